"""NumPy's dispatch protocols on Boxes: which rule a NumPy call on a traced value reaches.

NumPy hands a call with a Box among its arguments to `Box.__array_ufunc__` (a ufunc, or
one of its methods: np.add.reduce) or `Box.__array_function__` (np.sum, np.concatenate,
...). Both are set on Box here and route by three tables that the rules package fills
in: UFUNCS (a ufunc's call is one primitive, recorded by recording.bind), UFUNC_METHODS
and FUNCTIONS (a handler that composes primitives). This is all the tracer knows of
NumPy; a call none of them serves is refused with a message naming it, unless every
traced value in it is a Python number (then read as one, guarded).

Contract: the tables are data (rules/ registers, nothing here decides a derivative).
Upstream: context, boxes, recording.
"""

import sys

import numpy as np

from ..errors import TracingError, UnsupportedOperationError, at
from .boxes import NUMBERS, Box, concrete, stand_in
from .context import user_loc
from .recording import bind

UFUNCS = {}  # np.ufunc -> Primitive, for ufunc(...) calls
UFUNC_METHODS = {}  # (np.ufunc, method name) -> handler(*inputs, **kwargs)
FUNCTIONS = {}  # NumPy function -> handler(*args, **kwargs)
UFUNC_MISSES = []  # hook(ufunc) -> whether it registered rules that may serve it (SciPy's)


def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
    """A ufunc (or one of its methods) with a Box among its arguments."""
    inputs = tuple(map(stand_in, inputs))
    if kwargs.get("out") is not None or any(type(a) is Box for a in kwargs.get("out", ())):
        raise TracingError(at(user_loc(), f"in-place np.{ufunc.__name__}(..., out=...) "
                              "with a traced value: write `y = x + v`, not `x += v`, "
                              "when x is a NumPy array and v is traced"))
    prim = UFUNCS.get(ufunc) if method == "__call__" else None
    if prim is None and method == "__call__" and any(hook(ufunc) for hook in UFUNC_MISSES):
        prim = UFUNCS.get(ufunc)
    if prim is not None and not kwargs:
        return bind(prim, inputs, {})
    if prim is not None:
        raise UnsupportedOperationError(at(user_loc(), f"np.{ufunc.__name__} with "
                                           f"keyword arguments {sorted(kwargs)} is "
                                           "not supported on traced values"))
    handler = UFUNC_METHODS.get((ufunc, method))  # a method, or a composed ufunc
    if handler is not None:
        return handler(*inputs, **kwargs)
    if _numbers_only(inputs):  # no rule, and no array traced: read them, guarded
        return getattr(ufunc, method)(*map(concrete, inputs), **kwargs)
    name = ufunc_name(ufunc) + ("" if method == "__call__" else f".{method}")
    raise UnsupportedOperationError(at(user_loc(), unsupported_message(name)))

def __array_function__(self, func, types, args, kwargs):
    """A NumPy function with a Box among its arguments (NumPy's __array_function__)."""
    args, kwargs = tuple(map(stand_in, args)), {k: stand_in(v) for k, v in kwargs.items()}
    handler = FUNCTIONS.get(func)
    if handler is None and _numbers_only(args + tuple(kwargs.values())):
        return func(*map(concrete, args), **{k: concrete(v) for k, v in kwargs.items()})
    if handler is None:
        module = getattr(func, "__module__", "numpy") or "numpy"
        name = f"{module.replace('numpy', 'np', 1)}.{func.__name__}"
        raise UnsupportedOperationError(at(user_loc(), unsupported_message(name)))
    if args:  # after the data: a traced int is an axis, a shift, a count (guarded)
        rest, kwargs = shape_args(args[1:], kwargs, bare=True)
        args = (shape_like(args[0]), *rest)
    return handler(*args, **kwargs)


def _numbers_only(args):
    """Whether the traced values among `args` (and in lists or tuples there) are all Python
    numbers from the arguments: a NumPy function without a rule (np.copysign(1.0, s)) then
    reads them as Python numbers, each a guard the generated code checks."""
    boxes = [a for a in args if type(a) is Box] + [
        b for a in args if type(a) in (tuple, list) for b in a if type(b) is Box]
    return bool(boxes) and all(type(b.value) in NUMBERS for b in boxes)


def ufunc_name(ufunc):
    """`np.exp`, `scipy.special.jv`: the ufunc as the user wrote it."""
    name = ufunc.__name__
    if getattr(np, name, None) is ufunc:
        return f"np.{name}"
    special = sys.modules.get("scipy.special")
    return f"scipy.special.{name}" if getattr(special, name, None) is ufunc else name


def unsupported_message(name):
    return (f"{name} has no derivative rule in autodiffgen, so it cannot be applied to a "
            "traced value. If it does not depend on the differentiated inputs, compute it "
            "outside the function or on a non-traced value; otherwise register it with "
            "autodiffgen.rules.defprimitive(...) (see the docs, 'Your own primitives and rules')")


def _int_box(x):
    return type(x) is Box and type(x.value) is int


def shape_like(x, bare=False):
    """An argument of a NumPy function or ndarray method as its handler should see it: a
    tuple or list holding traced Python ints (a shape (k, -1), axes) read as Python ints,
    guarded (so is a bare one if `bare`: x.reshape(k, -1), np.roll(x, k)). Traced ints
    in Python arithmetic and ufuncs (k * x, np.maximum(x, k)) stay inputs."""
    if bare and _int_box(x):
        return concrete(x)
    if (type(x) is tuple or type(x) is list) and any(map(_int_box, x)):
        return concrete(x)
    return x


def shape_args(args, kwargs, bare=False):
    return ([shape_like(a, bare) for a in args],
            {k: shape_like(v, bare) for k, v in kwargs.items()})


Box.__array_ufunc__ = __array_ufunc__
Box.__array_function__ = __array_function__
