"""scipy.special ufuncs (expit, logit, erf, erfc, gammaln, digamma, xlogy) and polygamma,
when SciPy is there.

SciPy stays optional: without it this module registers nothing. The ufuncs reach the
tracer through __array_ufunc__ like NumPy's; generated code that uses them starts with
`import scipy.special`. scipy.special.polygamma is a Python function that converts its
arguments with np.asarray, which a trace cannot see into: call this module's `polygamma`
on traced values instead (digamma's rule does, and generated code calls it as
`_polygamma`, a helper that an enclosing trace records as the primitive again).
"""

import math

import numpy as np

from ..tracer import bind
from . import PRIMITIVES, defprimitive, register_helper
from .elementwise import ufunc

try:
    import scipy.special
except ImportError:  # SciPy is optional
    scipy = None

_IMPORTS = ("scipy.special",)
_TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)


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
    prim = defprimitive(
        "polygamma", lambda x, n: _polygamma(n, x), "_polygamma({n}, {0})",
        vjps=[lambda g, ans, x, n: g * polygamma(n + 1, x)], jvp_from="vjp",
        helper="_polygamma")
    prim.imports = _IMPORTS
    register_helper("_polygamma", _polygamma, polygamma)


if scipy is not None:
    _register()
