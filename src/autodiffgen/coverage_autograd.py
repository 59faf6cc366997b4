"""Autograd's list of differentiable functions beside ours, for docs/coverage.md.

AUTOGRAD is a fact about HIPS Autograd 1.9.1, gathered from its registries (the functions
it gives a VJP with defvjp and a JVP with defjvp or def_linear, in autograd/numpy/*.py and
autograd/scipy/*): names only, per module, as "(VJP and JVP names, VJP-only names)". Every
one of them has a VJP there. `np.array` and `np.concatenate` stand for Autograd's
array_from_args and concatenate_args (np.array / np.concatenate of traced values);
`np.ndarray.__getitem__` for indexing.

What autodiffgen has for each is read from the registries (coverage_doc.entry_rows), not
written here: merging more rules changes the table when docs/coverage.md is regenerated.
"""

import importlib

import numpy as np

AUTOGRAD = {
    "np": (
        ("abs absolute acos acosh add amax amin angle arccos arccosh arcsin arcsinh "
         "arctan arctan2 arctanh array array_split asin asinh atan atan2 atanh "
         "atleast_1d atleast_2d atleast_3d broadcast_to clip concatenate conj conjugate "
         "cos cosh cross cumsum deg2rad degrees diag diagonal diff divide dot dsplit "
         "einsum exp exp2 expand_dims expm1 fabs fliplr flipud fmax fmin full gradient "
         "hsplit imag inner kron linspace log log10 log1p log2 logaddexp logaddexp2 "
         "make_diagonal matmul max maximum mean min minimum mod moveaxis multiply "
         "nan_to_num negative outer pad partition permute_dims pow power prod rad2deg "
         "radians ravel real real_if_close reciprocal remainder repeat reshape roll "
         "rollaxis rot90 sin sinc sinh sort split sqrt square squeeze std subtract sum "
         "swapaxes tan tanh tensordot tile trace transpose tril triu true_divide var "
         "vsplit where"),
        "astype hypot",
    ),
    "np.fft": (
        "",
        ("fft fft2 fftn fftshift ifft ifft2 ifftn ifftshift irfft irfft2 irfftn rfft "
         "rfft2 rfftn"),
    ),
    "np.linalg": (
        "norm",
        "cholesky det eig eigh inv pinv slogdet solve svd",
    ),
    "np.ndarray": (
        "__getitem__",
        "",
    ),
    "scipy.integrate": (
        "",
        "odeint",
    ),
    "scipy.linalg": (
        "solve_sylvester sqrtm",
        "solve_banded solve_triangular",
    ),
    "scipy.signal": (
        "",
        "convolve",
    ),
    "scipy.special": (
        "logsumexp",
        ("beta betainc betaln digamma erf erfc erfcinv erfinv expit gamma gammainc "
         "gammaincc gammaln gammasgn i0 i1 iv ive j0 j1 jn logit multigammaln polygamma "
         "psi rgamma y0 y1 yn"),
    ),
    "scipy.stats.beta": (
        "",
        "cdf logpdf pdf",
    ),
    "scipy.stats.chi2": (
        "",
        "cdf logpdf pdf",
    ),
    "scipy.stats.dirichlet": (
        "",
        "logpdf pdf",
    ),
    "scipy.stats.gamma": (
        "",
        "cdf logpdf pdf",
    ),
    "scipy.stats.multivariate_normal": (
        "",
        "entropy logpdf pdf",
    ),
    "scipy.stats.norm": (
        "",
        "cdf logcdf logpdf logsf pdf sf",
    ),
    "scipy.stats.poisson": (
        "",
        "cdf logpmf pmf",
    ),
    "scipy.stats.t": (
        "",
        "cdf logcdf logpdf pdf",
    ),
}


def autograd_names():
    """{name: whether Autograd has a JVP for it} (all have a VJP)."""
    names = {}
    for module, (both, vjp_only) in AUTOGRAD.items():
        names.update({f"{module}.{n}": True for n in both.split()})
        names.update({f"{module}.{n}": False for n in vjp_only.split()})
    return names


def _resolve(name):
    """The object a dotted name like np.fft.fft or scipy.stats.norm.pdf stands for, or None
    (a name NumPy or SciPy does not have, or SciPy not installed)."""
    head, *rest = name.split(".")
    try:
        obj = np if head == "np" else importlib.import_module(head)
        for i, part in enumerate(rest):
            if not hasattr(obj, part) and head != "np":
                obj = importlib.import_module(".".join([head, *rest[:i + 1]]))
            else:
                obj = getattr(obj, part)
    except (ImportError, AttributeError):
        return None
    return obj


def our_row_name(name, name_of):
    """The name under which coverage_doc lists the function Autograd calls `name` (the
    same object may be named otherwise here: np.abs is the ufunc np.absolute), or None.
    `name_of`: coverage_doc's name of a NumPy function."""
    if name == "np.ndarray.__getitem__":
        return "getitem"
    obj = _resolve(name)
    if obj is None:
        return None
    if isinstance(obj, np.ufunc):
        numpy_ufunc = getattr(np, obj.__name__, None) is obj
        return f"{'np' if numpy_ufunc else 'scipy.special'}.{obj.__name__}"
    return name_of(obj) if callable(obj) and name.startswith("np.") else name


def _has(status):
    return status.startswith("rule") or status in ("linear", "multilinear")


def section(rows, indexing, name_of):
    """Markdown lines and counts: each Autograd function with Autograd's and our VJP/JVP.
    `rows`: coverage_doc.entry_rows(); `indexing`: the getitem primitive's (VJP, JVP)
    status; `name_of`: coverage_doc's name of a NumPy function."""
    ours = {name: (vjp, jvp) for name, _, _, vjp, jvp in rows}
    ours["getitem"] = indexing
    intro = ("Every function HIPS Autograd 1.9.1 differentiates (its defvjp/defjvp "
             "registrations), with what autodiffgen has for it: yes, or no (no rule "
             "registered here: applied to a traced value it raises; a SciPy function "
             "written in NumPy may still trace through).")
    header = ("| Autograd function | Autograd VJP | Autograd JVP | autodiffgen name | "
              "autodiffgen VJP | autodiffgen JVP |")
    lines = ["", "## Beside Autograd", "", intro, "", header, "|---|---|---|---|---|---|"]
    counts = {"n": 0, "jvp": 0, "vjp_ours": 0, "jvp_ours": 0, "jvp_both": 0}
    for name, ag_jvp in sorted(autograd_names().items()):
        ours_name = name if name in ours else our_row_name(name, name_of)
        vjp, jvp = ours.get(ours_name, ("", ""))
        v, j = _has(vjp), _has(jvp)
        counts["n"] += 1
        counts["jvp"] += ag_jvp
        counts["vjp_ours"] += v
        counts["jvp_ours"] += j
        counts["jvp_both"] += j and ag_jvp
        shown = f"`{ours_name}`" if ours_name in ours else (
            "no entry" if ours_name or _resolve(name) is not None else "not in NumPy/SciPy")
        lines.append(f"| `{name}` | yes | {'yes' if ag_jvp else 'no'} | {shown} | "
                     f"{'yes' if v else 'no'} | {'yes' if j else 'no'} |")
    lines += ["", (f"Autograd: {counts['n']} functions with a VJP, {counts['jvp']} of them "
                   f"with a JVP. autodiffgen: a VJP for {counts['vjp_ours']} of the "
                   f"{counts['n']}, a JVP for {counts['jvp_ours']} of them "
                   f"({counts['jvp_both']} of Autograd's {counts['jvp']} JVPs).")]
    return lines, counts
