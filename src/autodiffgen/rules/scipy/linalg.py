"""scipy.linalg.solve_triangular, solve_banded, sqrtm and solve_sylvester as primitives: the generated
code calls SciPy's own solvers, and the rules are written with the same primitives, so
second derivatives trace through them.

solve_triangular reads one triangle of `a` (and not its diagonal with unit_diagonal): the
gradient in `a` lies in that triangle and a tangent of `a` counts only there. sqrtm of a
real matrix with a negative eigenvalue is complex: whether SciPy returns complex values is
guarded (the other kind traces again), and its rules, those of a holomorphic matrix
function, hold for complex values (solve_sylvester's too), so a real matrix's gradient is
the real part of the complex one (rules/complex_numbers.py's convention).
"""

import numpy as np
import scipy.linalg

from ...errors import UnsupportedOperationError, at
from ...trace.boxes import concrete
from ...trace.context import user_loc
from ...trace.recording import bind
from ..complex_numbers import mark_complex_ok
from ..numpy_api.eig import kind_guarded
from ..registry import defprimitive
from .intercept import register

_IMPORTS = ("scipy.linalg",)
_TRANS = {0: 0, 1: 1, 2: 1, "N": 0, "T": 1, "C": 1}


def _t(x):
    return np.swapaxes(x, -1, -2)


# ---- solve_triangular --------------------------------------------------------------------
def _mask(m, lower, unit_diagonal):
    """The part of m in the triangle solve_triangular reads."""
    k = int(unit_diagonal)
    return np.tril(m, -k) if lower else np.triu(m, k)


def _outer(u, v, vector):
    """u v^T for the columns of u and v (or the vectors u and v)."""
    if vector:
        return np.expand_dims(u, -1) * np.expand_dims(v, -2)
    return u @ _t(v)


def _tri_vjp_b(g, ans, a, b, trans, lower, unit_diagonal):
    return solve_triangular(a, g, trans=1 - trans, lower=lower, unit_diagonal=unit_diagonal)


def _tri_vjp_a(g, ans, a, b, trans, lower, unit_diagonal):
    v = _tri_vjp_b(g, ans, a, b, trans, lower, unit_diagonal)
    vector = np.ndim(b) == np.ndim(a) - 1
    grad = -_outer(ans, v, vector) if trans else -_outer(v, ans, vector)
    return _mask(grad, lower, unit_diagonal)


def _tri_jvp_a(t, ans, a, b, trans, lower, unit_diagonal):
    da = _mask(t, lower, unit_diagonal)
    da = _t(da) if trans else da
    return -solve_triangular(a, da @ ans, trans=trans, lower=lower, unit_diagonal=unit_diagonal)


def _tri_jvp_b(t, ans, a, b, trans, lower, unit_diagonal):
    return solve_triangular(a, t, trans=trans, lower=lower, unit_diagonal=unit_diagonal)


SOLVE_TRIANGULAR = defprimitive(
    "solve_triangular",
    lambda a, b, trans, lower, unit_diagonal: scipy.linalg.solve_triangular(
        a, b, trans=trans, lower=lower, unit_diagonal=unit_diagonal),
    "scipy.linalg.solve_triangular({0}, {1})",
    defaults={"trans": 0, "lower": False, "unit_diagonal": False},
    vjps=[_tri_vjp_a, _tri_vjp_b], jvps=[_tri_jvp_a, _tri_jvp_b], imports=_IMPORTS)


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
                     check_finite=True):
    trans, lower, unit_diagonal = concrete((trans, lower, unit_diagonal))  # guarded
    if trans not in _TRANS:
        raise UnsupportedOperationError(at(user_loc(), f"scipy.linalg.solve_triangular: "
                                           f"trans={trans!r} is not 0, 1, 2, 'N', 'T' or 'C'"))
    return bind(SOLVE_TRIANGULAR, (a, b), {"trans": _TRANS[trans], "lower": bool(lower),
                                            "unit_diagonal": bool(unit_diagonal)})


# ---- solve_banded: `ab` holds a's band, ab[u + i - j, j] = a[i, j] ---------------------------
def _band_rows(ab, lower, upper):
    """(row, offset d = i - j) of the band storage."""
    return [(ab[r], r - upper) for r in range(lower + upper + 1)]


def _padded(v, before, after):
    """v with zeros added along its first axis: the rest of a band row or diagonal."""
    pad = [(before, after)] + [(0, 0)] * (np.ndim(v) - 1)
    return np.pad(v, pad) if before or after else v


def _band_transpose(ab, lower, upper):
    """The band storage of a's transpose (bands (upper, lower)): row r moved to l + u - r
    and shifted by r - u (what rolls around lands where LAPACK reads nothing)."""
    rows = [np.roll(row, d) for row, d in _band_rows(ab, lower, upper)]
    return np.stack(rows[::-1])


def _band_matvec(dab, x, lower, upper):
    """a x for the band matrix stored in dab."""
    n = np.shape(x)[0]
    total = None
    for row, d in _band_rows(dab, lower, upper):
        row = np.reshape(row, (n,) + (1,) * (np.ndim(x) - 1))
        part = _padded(row[:n - d] * x[:n - d], d, 0) if d >= 0 else \
            _padded(row[-d:] * x[-d:], 0, -d)
        total = part if total is None else total + part
    return total


def _band_outer(v, x, lower, upper):
    """The band storage of v x^T (summed over columns for a matrix right-hand side)."""
    n = np.shape(x)[0]
    rows = []
    for d in range(-upper, lower + 1):  # the storage's rows, top to bottom
        prod = v[d:] * x[:n - d] if d >= 0 else v[:n + d] * x[-d:]
        if np.ndim(prod) > 1:
            prod = np.sum(prod, axis=-1)
        rows.append(_padded(prod, 0, d) if d >= 0 else _padded(prod, -d, 0))
    return np.stack(rows)


def _banded_vjp_ab(g, ans, ab, b, lower, upper):
    v = solve_banded((upper, lower), _band_transpose(ab, lower, upper), g)
    return -_band_outer(v, ans, lower, upper)


SOLVE_BANDED = defprimitive(
    "solve_banded", lambda ab, b, lower, upper: scipy.linalg.solve_banded((lower, upper), ab, b),
    "scipy.linalg.solve_banded(({lower}, {upper}), {0}, {1})",
    vjps=[_banded_vjp_ab,
          lambda g, ans, ab, b, lower, upper: solve_banded(
              (upper, lower), _band_transpose(ab, lower, upper), g)],
    jvps=[lambda t, ans, ab, b, lower, upper: -solve_banded(
              (lower, upper), ab, _band_matvec(t, ans, lower, upper)),
          lambda t, ans, ab, b, lower, upper: solve_banded((lower, upper), ab, t)],
    imports=_IMPORTS)


def solve_banded(l_and_u, ab, b, *rest, **options):
    lower, upper = (int(k) for k in concrete(tuple(l_and_u)))
    return bind(SOLVE_BANDED, (ab, b), {"lower": lower, "upper": upper})


# ---- solve_sylvester: a x + x b = q ----------------------------------------------------------
def _syl_adjoint(g, a, b):
    return solve_sylvester(_t(a), _t(b), g)


SOLVE_SYLVESTER = defprimitive(
    "solve_sylvester", scipy.linalg.solve_sylvester, "scipy.linalg.solve_sylvester({0}, {1}, {2})",
    vjps=[lambda g, ans, a, b, q: -(_syl_adjoint(g, a, b) @ _t(ans)),
          lambda g, ans, a, b, q: -(_t(ans) @ _syl_adjoint(g, a, b)),
          lambda g, ans, a, b, q: _syl_adjoint(g, a, b)],
    jvps=[lambda t, ans, a, b, q: solve_sylvester(a, b, -(t @ ans)),
          lambda t, ans, a, b, q: solve_sylvester(a, b, -(ans @ t)),
          lambda t, ans, a, b, q: solve_sylvester(a, b, t)],
    imports=_IMPORTS)


def solve_sylvester(a, b, q):
    return bind(SOLVE_SYLVESTER, (a, b, q), {})


# ---- sqrtm: x x = a ------------------------------------------------------------------------------
SQRTM = defprimitive(
    "sqrtm", lambda a: scipy.linalg.sqrtm(a), "scipy.linalg.sqrtm({0})",
    vjps=[lambda g, ans, a: solve_sylvester(_t(ans), _t(ans), g)],
    jvps=[lambda t, ans, a: solve_sylvester(ans, ans, t)], imports=_IMPORTS)
mark_complex_ok("sqrtm", "solve_sylvester")


def sqrtm(a, *rest, **options):
    return kind_guarded(bind(SQRTM, (a,), {}))


for _name, _fn in (("solve_triangular", solve_triangular), ("solve_banded", solve_banded),
                   ("solve_sylvester", solve_sylvester), ("sqrtm", sqrtm)):
    register(scipy.linalg, _name, _fn, f"scipy.linalg.{_name}", _name)
