"""scipy.special ufuncs (Autograd's list: the gamma, beta, Bessel and error functions and
their inverses, expit, logit, xlogy; and ndtr, log_ndtr, ndtri, stdtr, which the
scipy.stats distributions use) and polygamma, when SciPy is there.

Derivatives are taken in the arguments Autograd takes them in: jv, yn, iv, ive in x, not
the order; betainc, gammainc(c), stdtr in x only. Asked for in another argument, the rule
raises an error naming the function and the argument (`_no_derivative`).

SciPy stays optional: without it this module registers nothing. The ufuncs reach the
tracer through __array_ufunc__ like NumPy's; generated code that uses them starts with
`import scipy.special`. scipy.special.polygamma is a Python function that converts its
arguments with np.asarray, which a trace cannot see into: call this module's `polygamma`
on traced values instead (digamma's rule does, and generated code calls it as
`_polygamma`, a helper that an enclosing trace records as the primitive again).
"""

import math

import numpy as np

from ..errors import UnsupportedOperationError, at
from ..trace.context import current_trace, user_loc
from ..trace.recording import bind
from .complex_numbers import mark_complex_ok
from .elementwise import ufunc
from .registry import PRIMITIVES, defprimitive, register_helper

try:
    import scipy.special
except ImportError:  # SciPy is optional
    scipy = None

_IMPORTS = ("scipy.special",)
_TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)
_SQRT_PI_OVER_TWO = math.sqrt(math.pi) / 2
_INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)


def _polygamma(n, x):
    """scipy.special.polygamma in x's floating dtype (SciPy computes it in float64)."""
    x = np.asarray(x)
    return scipy.special.polygamma(n, x).astype(np.result_type(x.dtype, np.float16))


def polygamma(n, x):
    """scipy.special.polygamma(n, x) for an integer order n: on traced values, a
    primitive differentiable in x (its derivative is polygamma(n + 1, x))."""
    return bind(PRIMITIVES["polygamma"], (x,), {"n": int(n)})


def _scipy(ufunc_, *vjps, name=None):
    """Register scipy.special.<name>, written as such in generated code."""
    name = name or ufunc_.__name__
    args = ", ".join(f"{{{i}}}" for i in range(ufunc_.nin))
    prim = ufunc(ufunc_, f"scipy.special.{name}({args})", *vjps, name=name)
    prim.imports = _IMPORTS  # the emitter starts the module with `import scipy.special`
    return prim


def _no_derivative(fname, argname, only):
    """The rule of an argument a function is not differentiated in: asked for, it raises,
    naming the function, the argument and the user's line."""
    def rule(g, ans, *args, **params):
        trace = current_trace()
        node = trace.grad_of if trace is not None else None
        loc = node.loc if node is not None and node.loc else user_loc()
        raise UnsupportedOperationError(at(loc, f"scipy.special.{fname} is differentiable "
                                           f"only in {only}, not in its argument {argname}: "
                                           f"keep {argname} out of the differentiated inputs"))
    return rule


def _xlogy_y(g, ans, x, y):
    """x / y, and 0 where x == 0 (whatever y), as xlogy(0, y) is 0 for every y."""
    return g * (x / np.where(x == 0, 1, y))


def _register():
    _scipy(scipy.special.expit, lambda g, ans, x: g * (ans * (1 - ans)))
    _scipy(scipy.special.logit, lambda g, ans, x: g / (x * (1 - x)))
    _scipy(scipy.special.erf, lambda g, ans, x: g * (_TWO_OVER_SQRT_PI * np.exp(-(x * x))))
    _scipy(scipy.special.erfc, lambda g, ans, x: -(g * (_TWO_OVER_SQRT_PI * np.exp(-(x * x)))))
    _scipy(scipy.special.gammaln, lambda g, ans, x: g * scipy.special.digamma(x))
    _scipy(scipy.special.digamma, lambda g, ans, x: g * polygamma(1, x), name="digamma")
    _scipy(scipy.special.xlogy, lambda g, ans, x, y: g * np.log(y), _xlogy_y)
    _register_gamma_beta(scipy.special)
    _register_bessel(scipy.special)
    _register_normal(scipy.special)
    prim = defprimitive(
        "polygamma", lambda x, n: _polygamma(n, x), "_polygamma({n}, {0})",
        vjps=[lambda g, ans, x, n: g * polygamma(n + 1, x)], jvp_from="vjp",
        helper="_polygamma")
    prim.imports = _IMPORTS
    register_helper("_polygamma", _polygamma, polygamma)



def _register_gamma_beta(sp):
    psi = sp.digamma
    _scipy(sp.gamma, lambda g, ans, x: g * (ans * psi(x)))
    _scipy(sp.rgamma, lambda g, ans, x: -(g * (ans * psi(x))))
    _scipy(sp.gammasgn)  # piecewise constant: no derivative
    _scipy(sp.beta, lambda g, ans, a, b: g * (ans * (psi(a) - psi(a + b))),
           lambda g, ans, a, b: g * (ans * (psi(b) - psi(a + b))))
    _scipy(sp.betaln, lambda g, ans, a, b: g * (psi(a) - psi(a + b)),
           lambda g, ans, a, b: g * (psi(b) - psi(a + b)))
    _scipy(sp.betainc, _no_derivative("betainc", "a", "x"), _no_derivative("betainc", "b", "x"),
           lambda g, ans, a, b, x: g * (x ** (a - 1) * (1 - x) ** (b - 1) / sp.beta(a, b)))
    for name, sign in (("gammainc", 1), ("gammaincc", -1)):
        _scipy(getattr(sp, name), _no_derivative(name, "a", "x"),
               lambda g, ans, a, x, s=sign: g * (s * np.exp(-x) * x ** (a - 1) / sp.gamma(a)))
    _scipy(sp.erfinv, lambda g, ans, x: g * (_SQRT_PI_OVER_TWO * np.exp(ans * ans)))
    _scipy(sp.erfcinv, lambda g, ans, x: -(g * (_SQRT_PI_OVER_TWO * np.exp(ans * ans))))


def _register_bessel(sp):
    """jv (also scipy.special.jn), yn, iv, ive in x; j0, j1, y0, y1, i0, i1."""
    _scipy(sp.j0, lambda g, ans, x: -(g * sp.j1(x)))
    _scipy(sp.j1, lambda g, ans, x: g * ((sp.j0(x) - sp.jv(2, x)) / 2))
    _scipy(sp.y0, lambda g, ans, x: -(g * sp.y1(x)))
    _scipy(sp.y1, lambda g, ans, x: g * ((sp.y0(x) - sp.yn(2, x)) / 2))
    _scipy(sp.i0, lambda g, ans, x: g * sp.i1(x))
    _scipy(sp.i1, lambda g, ans, x: g * ((sp.i0(x) + sp.iv(2, x)) / 2))
    _scipy(sp.jv, _no_derivative("jv", "v", "x"),
           lambda g, ans, v, x: g * ((sp.jv(v - 1, x) - sp.jv(v + 1, x)) / 2))
    _scipy(sp.yn, _no_derivative("yn", "n", "x"),
           lambda g, ans, n, x: g * ((sp.yn(n - 1, x) - sp.yn(n + 1, x)) / 2))
    _scipy(sp.iv, _no_derivative("iv", "v", "x"),
           lambda g, ans, v, x: g * ((sp.iv(v - 1, x) + sp.iv(v + 1, x)) / 2))
    # ive = iv * exp(-|x|)
    _scipy(sp.ive, _no_derivative("ive", "v", "x"), lambda g, ans, v, x: g * (
        (sp.ive(v - 1, x) + sp.ive(v + 1, x)) / 2 - np.sign(x) * ans))


def _register_normal(sp):
    """The standard normal's cdf, its log and inverse, and Student's t cdf (scipy.stats)."""
    _scipy(sp.ndtr, lambda g, ans, x: g * (_INV_SQRT_2PI * np.exp(-0.5 * (x * x))))
    _scipy(sp.log_ndtr, lambda g, ans, x: g * (_INV_SQRT_2PI * np.exp(-0.5 * (x * x) - ans)))
    _scipy(sp.ndtri, lambda g, ans, x: g * (1 / _INV_SQRT_2PI * np.exp(0.5 * (ans * ans))))
    _scipy(sp.stdtr, _no_derivative("stdtr", "df", "t"), lambda g, ans, df, t: g * np.exp(
        sp.gammaln((df + 1) / 2) - sp.gammaln(df / 2) - 0.5 * np.log(df * math.pi)
        - (df + 1) / 2 * np.log1p(t * t / df)))


if scipy is not None:
    _register()
    mark_complex_ok("erf", "erfc")  # holomorphic: their rules hold for complex values
