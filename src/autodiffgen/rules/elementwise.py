"""Elementwise primitives: arithmetic, transcendental functions, comparisons, rounding,
where, clip, sinc, nan_to_num, conj; astype, copy and the seed `ones`.

One entry per primitive: its NumPy form, how it is written, and one VJP per argument
(elementwise VJPs `g * df/dx` are also the JVPs). How np.where, np.clip, x.astype(),
round(x), np.real ... reach these is in numpy_api/elementwise.py.

Rules return the cotangent in the broadcast shape; `unbroadcast` brings it back to each
argument's shape. Python scalars in the rules are weakly typed (NEP 50), so a float32
gradient stays float32.
"""

import cmath
import math

import numpy as np

from ..errors import UnsupportedOperationError, at
from ..trace.boxes import Box
from ..trace.context import user_loc
from .registry import defprimitive, register_ufunc


def ufunc(ufunc_, template, *vjps, name=None, **options):
    """Register a ufunc whose VJP rules `g * df/dx` are also its JVP rules."""
    prim = defprimitive(name or ufunc_.__name__, ufunc_, template, vjps=vjps, jvp_from="vjp",
                        **options)
    register_ufunc(ufunc_, prim)
    return prim


def _is_seed(a):
    return type(a) is Box and a.node.prim is ones and a.node.shape == ()


def _drop_seed(args, params, value):
    """x * seed and seed * x are x when that changes neither shape nor dtype."""
    for a, b in ((args[0], args[1]), (args[1], args[0])):
        if _is_seed(a) and type(b) is Box and b.node.shape == np.shape(value) \
                and b.node.dtype == value.dtype:
            return b
    return None


def _step(g, winner, loser):
    """g where `winner` is ahead, g/2 on ties (tied arguments share it), else 0. Written
    with comparisons, which NumPy vectorizes: about 2.5x a hand-written relu backward
    `g * (x > 0)`, where np.heaviside or np.sign would be slower still."""
    return g * (winner > loser) + (0.5 * g) * (winner == loser)


def _balanced(g, x, ans, other):
    """g where x won a max/min, g/2 on ties (so tied arguments share it), else 0.

    Written with `where` rather than dividing by 1 + tie, which is an integer array and
    would promote a float32 gradient to float64.
    """
    return np.where(x == other, 0.5 * g, g * (x == ans))


def _safe(x):
    """x with its zeros replaced by ones: a divisor for rules whose limit at 0 is finite,
    so that generated code divides by zero nowhere (and warns nowhere)."""
    return np.where(x == 0, 1, x)


def _power_x(g, ans, x, y):
    """y * x ** (y - 1), which is 0 where y == 0 (x ** 0 is constant), also at x == 0:
    there the textbook form is 0 * 0 ** -1 = NaN (a polynomial sum(c[k] * x ** k) would
    have a NaN gradient wherever x is 0). So those elements raise x to 1 instead of -1."""
    if type(y) is not Box and np.ndim(y) == 0:
        if y == 0:
            return None  # x ** 0: no derivative at all
        if y == 1:
            return g
        if y == 2:
            return g * (2 * x)
        return g * (y * x ** (y - 1))
    # a constant array of exponents is masked where it is 0; a traced one also needs x == 0
    # there, so that the rule's own derivative in y stays y's (x ** (y - 1)) elsewhere
    zero = y == 0 if type(y) is not Box else (y == 0) & (x == 0)
    if type(y) is Box and type(y.value) in (int, float):  # a traced Python number (an int
        # argument): np.where would read it as a number, guarded; arithmetic keeps it an input
        return g * (y * x ** (y - 1 + zero * (2 - y)))
    return g * (y * x ** np.where(zero, 1, y - 1))


def _power_y(g, ans, x, y):
    if getattr(ans, "dtype", None) is not None and ans.dtype.kind == "c":
        # complex: log(x) on its principal branch, as x ** y is computed (0 where x is 0)
        if type(x) in (int, float, complex):
            return g * (ans * (cmath.log(x) if x != 0 else 0.0))
        return g * (ans * np.log(np.where(x == 0, 1, x)))
    if type(x) in (int, float):  # 2.0 ** y: keep log(2.0) a weak Python float, as the base was
        return g * (ans * (math.log(x) if x > 0 else 0.0))
    return g * (ans * np.log(np.where(x > 0, x, 1)))


# ---- the seed and dtype plumbing --------------------------------------------------------
ones = defprimitive("ones", lambda shape, dtype: np.ones(shape, dtype),
                    "np.ones({shape}, dtype={dtype})")
astype = defprimitive("astype", lambda x, dtype: np.asarray(x).astype(dtype),
                      "{0}.astype({dtype})",
                      vjps=[lambda g, ans, x, dtype: g if np.issubdtype(dtype, np.inexact)
                            else None], jvp_from="vjp")
copy = defprimitive("copy", np.copy, "np.copy({0})", vjps=[lambda g, ans, x: g], linear_in=(0,))

# ---- arithmetic -------------------------------------------------------------------------
ufunc(np.add, "{0} + {1}", lambda g, ans, x, y: g, lambda g, ans, x, y: g)
ufunc(np.subtract, "{0} - {1}", lambda g, ans, x, y: g, lambda g, ans, x, y: -g)
ufunc(np.multiply, "{0} * {1}", lambda g, ans, x, y: g * y, lambda g, ans, x, y: g * x,
      simplify=_drop_seed)
ufunc(np.true_divide, "{0} / {1}", lambda g, ans, x, y: g / y,
      lambda g, ans, x, y: -(g * ans) / y, name="divide")
ufunc(np.negative, "-{0}", lambda g, ans, x: -g)
ufunc(np.positive, "+{0}", lambda g, ans, x: g)
ufunc(np.power, "{0} ** {1}", _power_x, _power_y)
ufunc(np.square, "np.square({0})", lambda g, ans, x: g * (2 * x))
ufunc(np.reciprocal, "np.reciprocal({0})", lambda g, ans, x: -(g * (ans * ans)))
ufunc(np.absolute, "np.abs({0})", lambda g, ans, x: g * np.sign(x))
ufunc(np.fabs, "np.fabs({0})", lambda g, ans, x: g * np.sign(x))
# a relu h = np.maximum(x, 0) (the other argument a constant, or not differentiated): the
# mask g * (h > 0), derivative 0 at the tie as jax.nn.relu and torch.relu (one pass, in
# place where g dies; h > 0 is x > 0, and reading h lets x die in the forward). Two
# differentiated arguments share the gradient at a tie (as jnp.maximum and Autograd), so
# max(a, b) + min(a, b) = a + b keeps its derivative
ufunc(np.maximum, "np.maximum({0}, {1})", lambda g, ans, x, y: _step(g, x, y),
      lambda g, ans, x, y: _step(g, y, x),
      sole_vjps=(lambda g, ans, x, y: g * (ans > y), lambda g, ans, x, y: g * (ans > x)))
ufunc(np.minimum, "np.minimum({0}, {1})", lambda g, ans, x, y: _step(g, y, x),
      lambda g, ans, x, y: _step(g, x, y),
      sole_vjps=(lambda g, ans, x, y: g * (ans < y), lambda g, ans, x, y: g * (ans < x)))
for _uf in (np.fmax, np.fmin):  # a NaN loses: compare with the result, not the difference
    ufunc(_uf, f"np.{_uf.__name__}({{0}}, {{1}})", lambda g, ans, x, y: _balanced(g, x, ans, y),
          lambda g, ans, x, y: _balanced(g, y, ans, x))
# x % y == x - floor(x / y) * y, and floor is locally constant; likewise fmod with trunc
ufunc(np.remainder, "{0} % {1}", lambda g, ans, x, y: g,
      lambda g, ans, x, y: -(g * np.floor(x / y)))
ufunc(np.fmod, "np.fmod({0}, {1})", lambda g, ans, x, y: g,
      lambda g, ans, x, y: -(g * np.trunc(x / y)))

# ---- exponentials, logarithms, roots ----------------------------------------------------
ufunc(np.exp, "np.exp({0})", lambda g, ans, x: g * ans)
ufunc(np.expm1, "np.expm1({0})", lambda g, ans, x: g * (ans + 1))
ufunc(np.log, "np.log({0})", lambda g, ans, x: g / x)
ufunc(np.log1p, "np.log1p({0})", lambda g, ans, x: g / (x + 1))
ufunc(np.sqrt, "np.sqrt({0})", lambda g, ans, x: g / (2 * ans))
ufunc(np.cbrt, "np.cbrt({0})", lambda g, ans, x: g / (3 * (ans * ans)))
ufunc(np.exp2, "np.exp2({0})", lambda g, ans, x: g * (ans * math.log(2)))
ufunc(np.log2, "np.log2({0})", lambda g, ans, x: g / (x * math.log(2)))
ufunc(np.log10, "np.log10({0})", lambda g, ans, x: g / (x * math.log(10)))
ufunc(np.logaddexp, "np.logaddexp({0}, {1})", lambda g, ans, x, y: g * np.exp(x - ans),
      lambda g, ans, x, y: g * np.exp(y - ans))
ufunc(np.logaddexp2, "np.logaddexp2({0}, {1})", lambda g, ans, x, y: g * np.exp2(x - ans),
      lambda g, ans, x, y: g * np.exp2(y - ans))

# ---- trigonometric and hyperbolic -------------------------------------------------------
ufunc(np.sin, "np.sin({0})", lambda g, ans, x: g * np.cos(x))
ufunc(np.cos, "np.cos({0})", lambda g, ans, x: -(g * np.sin(x)))
ufunc(np.tan, "np.tan({0})", lambda g, ans, x: g * (1 + ans * ans))
ufunc(np.tanh, "np.tanh({0})", lambda g, ans, x: g * (1 - ans * ans))
ufunc(np.sinh, "np.sinh({0})", lambda g, ans, x: g * np.cosh(x))
ufunc(np.cosh, "np.cosh({0})", lambda g, ans, x: g * np.sinh(x))
ufunc(np.arctan, "np.arctan({0})", lambda g, ans, x: g / (1 + x * x))
ufunc(np.arcsin, "np.arcsin({0})", lambda g, ans, x: g / np.sqrt(1 - x * x))
ufunc(np.arccos, "np.arccos({0})", lambda g, ans, x: -g / np.sqrt(1 - x * x))
ufunc(np.arcsinh, "np.arcsinh({0})", lambda g, ans, x: g / np.sqrt(x * x + 1))
ufunc(np.arccosh, "np.arccosh({0})", lambda g, ans, x: g / np.sqrt(x * x - 1))
ufunc(np.arctanh, "np.arctanh({0})", lambda g, ans, x: g / (1 - x * x))
ufunc(np.arctan2, "np.arctan2({0}, {1})", lambda g, ans, y, x: g * (x / (x * x + y * y)),
      lambda g, ans, y, x: -(g * (y / (x * x + y * y))))
ufunc(np.hypot, "np.hypot({0}, {1})", lambda g, ans, x, y: g * (x / ans),
      lambda g, ans, x, y: g * (y / ans))
for _uf in (np.deg2rad, np.radians):
    ufunc(_uf, f"np.{_uf.__name__}({{0}})", lambda g, ans, x: g * (math.pi / 180))
for _uf in (np.rad2deg, np.degrees):
    ufunc(_uf, f"np.{_uf.__name__}({{0}})", lambda g, ans, x: g * (180 / math.pi))

# ---- no derivative: comparisons, logic, rounding ----------------------------------------
for _uf, _template in [
        (np.greater, "{0} > {1}"), (np.greater_equal, "{0} >= {1}"), (np.less, "{0} < {1}"),
        (np.less_equal, "{0} <= {1}"), (np.equal, "{0} == {1}"), (np.not_equal, "{0} != {1}"),
        (np.bitwise_and, "{0} & {1}"), (np.bitwise_or, "{0} | {1}"),
        (np.bitwise_xor, "{0} ^ {1}"), (np.invert, "~{0}"),
        (np.floor_divide, "{0} // {1}"),
        (np.logical_and, "np.logical_and({0}, {1})"), (np.logical_or, "np.logical_or({0}, {1})"),
        (np.logical_xor, "np.logical_xor({0}, {1})"), (np.logical_not, "np.logical_not({0})"),
        (np.sign, "np.sign({0})"), (np.heaviside, "np.heaviside({0}, {1})"),
        (np.floor, "np.floor({0})"), (np.ceil, "np.ceil({0})"),
        (np.rint, "np.rint({0})"), (np.trunc, "np.trunc({0})"), (np.isnan, "np.isnan({0})"),
        (np.isfinite, "np.isfinite({0})"), (np.isinf, "np.isinf({0})")]:
    ufunc(_uf, _template)


# ---- where, clip, round, sinc, nan_to_num -------------------------------------------------
def _clip_x(g, ans, x, lo, hi):
    inside = True
    if lo is not None:
        inside = x >= lo
    if hi is not None:
        inside = inside & (x <= hi) if inside is not True else x <= hi
    return g * inside


def _sinc_vjp(g, ans, x):
    """(cos(pi x) - sinc(x)) / x, whose limit at 0 is 0: the numerator is exactly 0 there."""
    return g * ((np.cos(math.pi * x) - ans) / _safe(x))


def _where_impl(cond, x, y):
    return np.where(cond, x, y)


where = defprimitive("where", _where_impl, "np.where({0}, {1}, {2})", vjps=[
    None, lambda g, ans, c, x, y: np.where(c, g, 0), lambda g, ans, c, x, y: np.where(c, 0, g)],
    jvp_from="vjp")
clip = defprimitive("clip", np.clip, "np.clip({0}, {1}, {2})", vjps=[
    _clip_x, lambda g, ans, x, lo, hi: g * (x < lo), lambda g, ans, x, lo, hi: g * (x > hi)],
    jvp_from="vjp")
# round is a Python function in NumPy, so it arrives through __array_function__
round_ = defprimitive("round", lambda x, decimals: np.round(x, decimals), "np.round({0})",
                      {"decimals": 0})
sinc = defprimitive("sinc", np.sinc, "np.sinc({0})", vjps=[_sinc_vjp], jvp_from="vjp")
# the gradient passes where the input was finite
nan_to_num = defprimitive(
    "nan_to_num", lambda x, nan, posinf, neginf: np.nan_to_num(x, nan=nan, posinf=posinf,
                                                               neginf=neginf),
    "np.nan_to_num({0})", {"nan": 0.0, "posinf": None, "neginf": None},
    vjps=[lambda g, ans, x, nan, posinf, neginf: np.where(np.isfinite(x), g, 0)],
    jvp_from="vjp")


# ---- conj (its rule for complex values, and real, imag, angle: complex_numbers.py) ---------
def real_only(x, name):
    """x, refused if complex (a function with no rule for complex values)."""
    if np.issubdtype(x.dtype, np.complexfloating):
        raise UnsupportedOperationError(at(user_loc(), f"{name} of a complex traced value "
                                           "is not supported: apply it to np.real(z) and "
                                           "np.imag(z)"))
    return x


# (its rule for complex values, conj(g), is set in rules/complex_numbers.py)
conj = defprimitive("conj", np.conjugate, "np.conj({0})", vjps=[lambda g, ans, x: g],
                    linear_in=(0,), simplify=lambda args, params, value: args[0]
                    if value.dtype.kind != "c" and type(args[0]) is Box else None)
register_ufunc(np.conjugate, conj)
