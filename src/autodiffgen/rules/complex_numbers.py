"""Complex numbers, with Autograd's convention: real, imag, conj, angle, abs of complex
values, and which primitives may see a complex value at all.

The convention. For a real loss L of a complex value z = x + iy, the cotangent of z is
dL/dx - i dL/dy (so `grad` of a real function of z is that, and `grad` of a holomorphic
function is its complex derivative f'(z)). Under it the chain rule through a holomorphic
primitive is `g * f'(z)`, with no conjugate: the rules of multiply, exp, matmul, einsum,
inv, sum, reshape... hold unchanged for complex values. A real value's cotangent is the
real part of what reaches it (`unbroadcast`), and a real value's tangent the real part of
a complex one (`broadcast_up`). The functions that are not holomorphic (real, imag,
conj, angle, abs, sign) have rules of their own here. Forward mode needs nothing special:
a complex tangent is pushed through the same rules.

`COMPLEX_OK` lists the primitives whose rules hold for complex values. Every other
primitive with a derivative rule was written for real numbers (maximum, clip,
solve_triangular, scipy.special...): applied to a complex value that a derivative flows through, it
raises an error naming it, instead of casting or comparing silently (`refuse_complex`, a
result hook of the tracer).
"""

import weakref

import numpy as np

from ..errors import UnsupportedOperationError, at
from ..trace.boxes import Box, carries_gradient
from ..trace.context import user_loc
from ..trace.recording import RESULT_HOOKS
from . import (  # noqa: F401  (the families COMPLEX_OK marks, registered first)
    assembly,
    eig,
    fft,
    indexing,
    linalg,
    products,
    reductions,
    shapes,
)
from .elementwise import _safe, conj
from .jvps import JVPS, PerArgument, defjvp
from .registry import PRIMITIVES, defprimitive
from .vjps import defvjp, has_vjp


def is_complex(x):
    """Whether x (an array, a Box, a number) holds complex values."""
    if isinstance(x, complex):
        return True
    dtype = getattr(x, "dtype", None)
    return isinstance(dtype, np.dtype) and dtype.kind == "c"


def _abs2(x):
    """|x|^2 of a complex x, as a real value."""
    return real(x * conj(x))


def abs2(x):
    """|x|^2 as NumPy's var and norm compute it: x * x for a real x, real."""
    return _abs2(x) if is_complex(x) else x * x


# ---- real, imag, conj, angle --------------------------------------------------------------
real = defprimitive("real", np.real, "np.real({0})", vjps=[lambda g, ans, x: g],
                    linear_in=(0,))
imag = defprimitive("imag", np.imag, "np.imag({0})", vjps=[lambda g, ans, x: -1j * g],
                    linear_in=(0,))
defvjp(conj, lambda g, ans, x: conj(g))


def _angle_vjp(g, ans, x):
    """d angle = Im(dz / z): dL/dx - i dL/dy = g * (-y - ix) / |z|^2 = g * -i conj(z) / |z|^2."""
    return g * ((-1j * conj(x)) / _safe(_abs2(x)))


def _angle_jvp(t, ans, x):
    return imag(t * conj(x)) / _safe(_abs2(x))


angle = defprimitive("angle", np.angle, "np.angle({0})", vjps=[_angle_vjp], jvps=[_angle_jvp])


# ---- abs: |z| for complex z, the sign rule for real x --------------------------------------
def _abs_vjp(g, ans, x):
    if is_complex(x):  # dL/dx - i dL/dy = g * (x - iy) / |z|, 0 at z = 0 (as Autograd)
        return g * (conj(x) / _safe(ans))
    return g * np.sign(x)


def _abs_jvp(t, ans, x):
    if is_complex(x):
        return real(t * conj(x)) / _safe(ans)
    return t * np.sign(x)


defvjp(PRIMITIVES["absolute"], _abs_vjp)
defjvp(PRIMITIVES["absolute"], _abs_jvp)

# ---- sign: z / |z| for complex z (NumPy 2), locally constant for real x --------------------
def _sign_vjp(g, ans, x):
    if not is_complex(x):
        return None
    r = _safe(np.abs(x))  # d(z/|z|) = dz/|z| - s Re(conj(s) dz)/|z|, transposed
    return g / r - real(g * ans) * conj(ans) / r


def _sign_jvp(t, ans, x):
    if not is_complex(x):
        return None
    r = _safe(np.abs(x))
    return t / r - ans * real(conj(ans) * t) / r


defvjp(PRIMITIVES["sign"], _sign_vjp)
defjvp(PRIMITIVES["sign"], _sign_jvp)

# ---- which primitives take complex values -------------------------------------------------
# holomorphic or linear (their rules need no conjugate), or with rules of their own above;
# max and min pass the cotangent to the element NumPy picks (complex: lexicographic order)
COMPLEX_OK = frozenset((
    "getitem", "scatter_add", "setitem", "add_at", "tile", "repeat", "pad", "triu", "tril", "ones",
    "astype", "copy", "conj", "real", "imag", "angle", "absolute", "sign", "add", "subtract",
    "multiply", "divide", "negative", "positive", "power", "square", "reciprocal", "exp",
    "expm1", "log", "log1p", "sqrt", "exp2", "log2", "log10", "sin", "cos", "tan", "tanh",
    "sinh", "cosh", "arctan", "arcsin", "arccos", "arcsinh", "arccosh", "arctanh", "where",
    "sinc", "sum", "mean", "prod", "max", "min", "cumsum", "cumprod", "reshape", "transpose", "squeeze",
    "expand_dims", "broadcast_to", "concatenate", "stack", "zeros_like", "ones_like",
    "full_like", "matmul", "einsum", "inv", "det", "solve", "fftn", "ifftn", "rfftn",
    "irfftn", "eig_values", "eig_vectors", "slogdet_sign", "logabsdet", "cholesky",
    "eigh_values", "eigh_vectors", "pinv", "svd_values", "svd_u", "svd_vh"))


_HOLD_FOR_COMPLEX = weakref.WeakSet()  # the primitives of COMPLEX_OK and mark_complex_ok


def mark_complex_ok(*names):
    """Mark primitives whose rules hold for complex values (a user's, or a family's
    added later)."""
    for name in names:
        _HOLD_FOR_COMPLEX.add(PRIMITIVES[name])


mark_complex_ok(*COMPLEX_OK)


def _has_rules(prim):
    jvp = JVPS.get(prim)
    if isinstance(jvp, PerArgument):  # FromVJP too, whose rules are the VJP's
        return has_vjp(prim) or bool(jvp.rules)
    return has_vjp(prim) or jvp is not None


def refuse_complex(trace, box, args):
    """A primitive with real-only rules applied to a complex value a derivative reaches."""
    prim = box.node.prim
    if prim in _HOLD_FOR_COMPLEX or prim.strict or not _has_rules(prim):
        return
    if not (is_complex(box.value) or any(map(is_complex, args))):
        return
    if trace.grad_of is None and not any(
            type(a) is Box and carries_gradient(trace, a.node) for a in args):
        return  # complex data no derivative flows through: NumPy's own answer
    raise UnsupportedOperationError(at(user_loc(), f"{prim.name} of a complex value: its "
                                       "derivative rule is for real numbers only, so it "
                                       "would be wrong here. Apply it to np.real(z), np.imag(z) "
                                       "or np.abs(z) instead"))


RESULT_HOOKS.append(refuse_complex)
