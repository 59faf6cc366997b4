"""SciPy: the scipy.special ufuncs Autograd differentiates, and SciPy's Python functions
(logsumexp, softmax, the scipy.stats distributions, signal.convolve, linalg.solve_triangular,
sqrtm, solve_sylvester, integrate.odeint), reached while tracing (rules/scipy/).

One table, `CASES`, as in test_coverage_elementwise.py: every row goes through
`check_grads` (generated code vs tape vs central differences, reverse and forward mode);
`SECOND` rows again to second order (the generated Hessian against differences of the
generated gradient). Argument ranges follow Autograd's tests/test_scipy.py.
"""

import numpy as np
import pytest
import tables
from tables import Case, const, normal, uniform
from tables import sum_sin as _s

import autodiffgen
from autodiffgen import tape

pytest.importorskip("scipy")
import scipy.integrate
import scipy.linalg
import scipy.signal
import scipy.special as sp
import scipy.stats as st
from scipy.special import logsumexp  # bound before any trace: the capture hands over ours
from scipy.stats import multivariate_normal as mvn

CASES = []


def case(name, f, *args, argnums=0, **check):
    CASES.append(Case(name, f, args, argnums, check))


def above(lo, *shape):
    """Autograd's R(...) ** 2 + lo: positive, away from lo."""
    return lambda rng: rng.standard_normal(shape) ** 2 + lo


def psd(n):
    def make(rng):
        a = rng.standard_normal((n, n))
        return a.T @ a + np.eye(n)
    return make


def tri(n):
    return lambda rng: rng.standard_normal((n, n)) + 4 * np.eye(n)


def banded(lower, upper, n):
    def make(rng):
        ab = rng.standard_normal((lower + upper + 1, n))
        ab[upper] += 4  # the diagonal
        return ab
    return make


def sym(c):
    return 0.5 * (c + c.T)


# ---- scipy.special ufuncs ---------------------------------------------------------------------
UNARY = [("gamma", sp.gamma, uniform(0.3, 2.0, 4)), ("rgamma", sp.rgamma, uniform(0.3, 2.0, 4)),
         ("erfinv", sp.erfinv, uniform(-0.95, 0.95, 4)),
         ("erfcinv", sp.erfcinv, uniform(0.05, 1.95, 4)),
         ("j0", sp.j0, uniform(0.2, 20.0, 4)), ("j1", sp.j1, uniform(0.2, 20.0, 4)),
         ("y0", sp.y0, uniform(0.2, 20.0, 4)), ("y1", sp.y1, uniform(0.2, 20.0, 4)),
         ("i0", sp.i0, uniform(0.2, 5.0, 4)), ("i1", sp.i1, uniform(0.2, 5.0, 4)),
         ("ndtr", sp.ndtr, normal(4)), ("log_ndtr", sp.log_ndtr, normal(4)),
         ("ndtri", sp.ndtri, uniform(0.05, 0.95, 4)),
         ("jv", lambda x: sp.jv(2, x), above(1.3, 4)), ("jn", lambda x: sp.jn(2, x), above(1.3, 4)),
         ("yn", lambda x: sp.yn(2, x), above(1.3, 4)),
         ("iv", lambda x: sp.iv(np.array([1.5, 3.0, 7.0, 20.0]), x), above(1.3, 4)),
         ("ive", lambda x: sp.ive(np.array([1.0, 2.0, 3.0, 7.0]), x), normal(4)),
         ("gammainc", lambda x: sp.gammainc(1.0, x), above(1.3, 4)),
         ("gammaincc", lambda x: sp.gammaincc(2.5, x), above(1.3, 4)),
         ("betainc", lambda x: sp.betainc(2.0, 3.5, x), uniform(0.05, 0.95, 4)),
         ("stdtr", lambda x: sp.stdtr(3.5, x), normal(4)),
         ("polygamma", lambda x: sp.polygamma(1, x), uniform(0.3, 2.0, 4)),
         ("multigammaln", lambda x: sp.multigammaln(x, 3), uniform(4.0, 5.0, 2, 3))]
for _name, _fn, _dom in UNARY:
    case(f"special-{_name}", lambda x, fn=_fn: _s(fn(x)), _dom)
case("special-gamma-0d", lambda x: _s(sp.gamma(x)), lambda rng: np.float64(rng.uniform(0.3, 2)))
case("special-beta", lambda a, b: _s(sp.beta(a, b)), above(1.1, 3, 1), above(1.1, 4),
     argnums=(0, 1))
case("special-betaln", lambda a, b: _s(sp.betaln(a, b)), above(1.1, 4), above(1.1, 4),
     argnums=(0, 1))
case("special-gammasgn-times-x", lambda x: _s(x * sp.gammasgn(x)), uniform(0.3, 2.0, 4))

# ---- logsumexp, softmax, log_softmax ---------------------------------------------------------
for _shape, _axes in (((4,), (None, 0)), ((3, 4), (None, 0, 1, (0, 1), -1)), ((2, 3, 4), (1,))):
    for _axis in _axes:
        for _keep in (False, True):
            _id = f"{tables.shape_id(_shape)}-{tables.axis_id(_axis)}-{int(_keep)}"
            case(f"logsumexp-{_id}", lambda x, a=_axis, k=_keep: _s(
                logsumexp(x, axis=a, keepdims=k)), normal(*_shape))
            case(f"logsumexp-b-{_id}", lambda x, b, a=_axis, k=_keep: _s(
                sp.logsumexp(x, axis=a, b=b, keepdims=k)), normal(*_shape),
                 lambda rng, s=_shape: np.exp(rng.standard_normal(s)), argnums=(0, 1))
        case(f"softmax-{tables.shape_id(_shape)}-{tables.axis_id(_axis)}",
             lambda x, a=_axis: _s(sp.softmax(x, axis=a)), normal(*_shape))
        case(f"log_softmax-{tables.shape_id(_shape)}-{tables.axis_id(_axis)}",
             lambda x, a=_axis: _s(sp.log_softmax(x, axis=a)), normal(*_shape))
case("logsumexp-1x5-keepdims", lambda x: _s(logsumexp(x, axis=1, keepdims=True)), normal(1, 5))
case("logsumexp-0d", lambda x: _s(logsumexp(x)), lambda rng: np.float64(rng.normal()))
case("logsumexp-return_sign", lambda x, b: _s(logsumexp(x, axis=1, b=b, return_sign=True)[0]),
     normal(3, 4), lambda rng: rng.uniform(0.5, 2, (3, 4)) * [1, -1, 1, 1], argnums=(0, 1))

# ---- scipy.stats ------------------------------------------------------------------------------
_LOC = normal(1, 3)
_SCALE = above(1.1, 4, 1)
for _m in ("pdf", "logpdf", "cdf", "logcdf", "sf", "logsf"):
    case(f"norm-{_m}", lambda x, l, s, m=_m: _s(getattr(st.norm, m)(x, l, s)), normal(4, 3),
         _LOC, _SCALE, argnums=(0, 1, 2))
for _m in ("ppf", "isf"):
    case(f"norm-{_m}", lambda q, l, s, m=_m: _s(getattr(st.norm, m)(q, l, s)),
         uniform(0.05, 0.95, 4, 3), _LOC, _SCALE, argnums=(0, 1, 2))
case("norm-pdf-keywords", lambda x, l: _s(st.norm.pdf(x, scale=1.5, loc=l)), normal(4),
     normal(4), argnums=(0, 1))
for _m in ("pdf", "logpdf"):
    case(f"t-{_m}", lambda x, df, l, s, m=_m: _s(getattr(st.t, m)(x, df, l, s)), normal(4, 3),
         above(2.1, 1, 3), normal(4, 3), _SCALE, argnums=(0, 1, 2, 3))
for _m in ("cdf", "logcdf"):
    case(f"t-{_m}", lambda x, l, s, m=_m: _s(getattr(st.t, m)(x, 3.5, l, s)), normal(4, 3),
         normal(4, 3), _SCALE, argnums=(0, 1, 2))
for _m in ("pdf", "logpdf"):
    case(f"gamma-{_m}", lambda x, a, m=_m: _s(getattr(st.gamma, m)(x, a)), above(1.1, 4),
         above(1.1, 4), argnums=(0, 1))
    case(f"chi2-{_m}", lambda x, m=_m: _s(getattr(st.chi2, m)(x, 3)), above(1.1, 4))
    case(f"beta-{_m}", lambda x, a, b, m=_m: _s(getattr(st.beta, m)(x, a, b)),
         uniform(0.05, 0.95, 4), above(1.1, 4), above(1.1, 4), argnums=(0, 1, 2))
case("gamma-cdf", lambda x: _s(st.gamma.cdf(x, 2.5)), above(1.1, 4))
case("chi2-cdf", lambda x: _s(st.chi2.cdf(x, 3)), above(1.1, 4))
case("beta-cdf", lambda x: _s(st.beta.cdf(x, 2.0, 3.0)), uniform(0.05, 0.95, 4))
_K = const(np.array([[0.0, 1.0, 3.0], [2.0, 5.0, 1.0], [4.0, 0.0, 2.0], [1.0, 1.0, 7.0]]))
for _m in ("pmf", "logpmf", "cdf"):
    case(f"poisson-{_m}", lambda mu, m=_m: _s(getattr(st.poisson, m)(_K(None), mu)),
         above(1.1, 4, 1))
_ALPHA = const(np.array([1.3, 2.2, 1.7, 3.1]))
_X = const(np.array([0.2, 0.3, 0.1, 0.4]))
for _m in ("pdf", "logpdf"):
    case(f"dirichlet-{_m}-x", lambda x, m=_m: np.sin(getattr(st.dirichlet, m)(
        x / np.sum(x), _ALPHA(None))), _X)
    case(f"dirichlet-{_m}-alpha", lambda a, m=_m: np.sin(getattr(st.dirichlet, m)(_X(None), a)),
         _ALPHA)
    for _xs in ((4,), (5, 4)):
        case(f"mvn-{_m}-{tables.shape_id(_xs)}", lambda x, mu, c, m=_m: _s(
            getattr(mvn, m)(x, mu, sym(c))), normal(*_xs), normal(4), psd(4),
             argnums=(0, 1, 2))
case("mvn-entropy", lambda c: np.sin(mvn.entropy(np.zeros(3), sym(c))), psd(3))

# ---- scipy.linalg, scipy.signal -------------------------------------------------------------------
for _b in ((3,), (3, 2)):
    for _trans in (0, 1, "T") if len(_b) == 1 else (0, 1):
        for _lower in (False, True):
            for _unit in (False, True):
                case(f"solve_triangular-{tables.shape_id(_b)}-{_trans}-{int(_lower)}{int(_unit)}",
                     lambda a, b, tr=_trans, lo=_lower, u=_unit: _s(scipy.linalg.solve_triangular(
                         a, b, trans=tr, lower=lo, unit_diagonal=u)), tri(3), normal(*_b),
                     argnums=(0, 1))
for _lu in ((1, 1), (2, 0), (0, 2)):
    for _b in ((5,), (5, 2)):
        case(f"solve_banded-{_lu[0]}{_lu[1]}-{tables.shape_id(_b)}", lambda ab, b, lu=_lu: _s(
            scipy.linalg.solve_banded(lu, ab, b)), banded(*_lu, 5), normal(*_b), argnums=(0, 1))
case("sqrtm", lambda a: _s(scipy.linalg.sqrtm(sym(a))), psd(3))
case("solve_sylvester", lambda a, b, q: _s(scipy.linalg.solve_sylvester(a, b, q)), tri(3),
     tri(3), normal(3, 3), argnums=(0, 1, 2))
_PAIRS = [((4,), (2,)), ((5,), (3,)), ((2,), (5,)), ((4, 3), (2, 2)), ((6, 7), (4, 1)),
          ((5, 4), (3, 2)), ((2, 3), (4, 5))]
for _s1, _s2 in _PAIRS:
    for _mode in ("full", "valid", "same"):
        bigger = all(a >= b for a, b in zip(_s1, _s2)) or all(a <= b for a, b in zip(_s1, _s2))
        if _mode == "valid" and not bigger:
            continue
        case(f"convolve-{tables.shape_id(_s1)}-{tables.shape_id(_s2)}-{_mode}",
             lambda a, b, m=_mode: _s(scipy.signal.convolve(a, b, m)), normal(*_s1),
             normal(*_s2), argnums=(0, 1))


# ---- scipy.integrate.odeint --------------------------------------------------------------------------
def dynamics(y, t, arg1, arg2):
    return -np.sqrt(t) - y + arg1 - np.mean((y + arg2) ** 2)


def ode(y0, t, a1, a2):
    return _s(scipy.integrate.odeint(dynamics, y0, t, args=(a1, a2), rtol=1e-10, atol=1e-10))


case("odeint", ode, normal(3), const(np.linspace(0.1, 0.2, 4)), normal(3), normal(3),
     argnums=(0, 1, 2, 3), rtol=1e-4, atol=1e-6)
case("odeint-one-time", ode, normal(3), const(np.array([0.1])), normal(3), normal(3),
     argnums=(0, 2))



def layers(y, t, params):
    for w, b in params:
        out = y @ w + b
        y = np.tanh(out)
    return out


def layer_params(rng):
    return [(rng.normal(size=(2, 3)) * 0.5, rng.normal(size=3) * 0.5),
            (rng.normal(size=(3, 2)) * 0.5, rng.normal(size=2) * 0.5)]


case("odeint-pytree-args", lambda y0, params: _s(scipy.integrate.odeint(
    layers, y0, np.linspace(0.0, 1.0, 4), (params,), rtol=1e-10, atol=1e-10)),
     normal(2), layer_params, argnums=(0, 1), rtol=1e-4, atol=1e-6)

BY_NAME = tables.by_name(CASES)


@pytest.mark.parametrize("c", CASES, ids=[c.name for c in CASES])
def test_gradients(c):
    tables.check_gradients(c)


# ---- second order ----------------------------------------------------------------------------------
def _on(name, k=0):
    """Row `name` as a function of its argument k alone (the others fixed)."""
    c = BY_NAME[name]
    args = c.make_args()

    def f(x):
        return c.f(*args[:k], x, *args[k + 1:])
    return f, args[k]


SECOND = [c.name for c in CASES if c.name.startswith("special-") and "0d" not in c.name] + [
    "logsumexp-3x4-1-0", "logsumexp-b-3x4-None-1", "softmax-3x4-0", "log_softmax-2x3x4-1",
    "norm-logcdf", "norm-ppf", "t-logpdf", "t-cdf", "gamma-logpdf", "beta-pdf", "chi2-cdf",
    "poisson-pmf", "dirichlet-logpdf-alpha", "mvn-logpdf-5x4", "solve_triangular-3x2-1-10",
    "solve_banded-11-5x2", "sqrtm", "solve_sylvester", "convolve-5x4-3x2-same", "convolve-5-3-valid", "odeint"]
SECOND_ARG = {"norm-logcdf": 2, "mvn-logpdf-5x4": 2, "solve_triangular-3x2-1-10": 0,
              "solve_sylvester": 1, "convolve-5-3-valid": 1, "odeint": 1}


@pytest.mark.parametrize("name", SECOND)
def test_second_derivatives(name):
    f, x = _on(name, SECOND_ARG.get(name, 0))
    tables.check_hessian(f, x)


# ---- float32 ------------------------------------------------------------------------------------
FLOAT32 = ["special-jv", "special-erfinv", "special-beta", "logsumexp-3x4-1-0", "softmax-3x4-0",
           "norm-logpdf", "convolve-5x4-3x2-same", "solve_triangular-3-0-00"]


@pytest.mark.parametrize("name", FLOAT32)
def test_float32_stays_float32(name):
    c = BY_NAME[name]
    args = c.make_args(np.float32)
    grads = autodiffgen.grad(c.f, argnums=c.argnums)(*args)
    for g in grads if isinstance(grads, tuple) else (grads,):
        assert g.dtype == np.float32
    expected = tape.grad(c.f, argnums=c.argnums)(*c.make_args())
    for g, e in zip(grads if isinstance(grads, tuple) else (grads,),
                    expected if isinstance(expected, tuple) else (expected,), strict=True):
        np.testing.assert_allclose(g, e, rtol=2e-3, atol=2e-4)
