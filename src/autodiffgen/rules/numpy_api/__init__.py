"""How NumPy calls reach the primitives: NumPy's API on traced values, not derivative rules.

A traced value (a Box) meets NumPy in three ways: a ufunc (np.add, through
__array_ufunc__, mapped to its primitive by `rules.register_ufunc`), a NumPy function
(np.sum, np.reshape, through __array_function__) and an ndarray method or property
(x.sum(), x.real, x[i] = v; Python operators and x.T are the tracer's own, written with
ufuncs and np.transpose). The modules here handle functions and methods: each takes the
arguments as NumPy does (axis=None / int / negative / tuple, keepdims, out=, aliases such
as np.amax, ndarray methods' loose signatures), refuses what a trace cannot honour with an
error at the user's line, and records primitives of `rules/` in canonical form, or writes
the function with other NumPy calls (np.var, np.kron, np.linalg.norm).

Kept apart from rules/ because it changes for different reasons: the rules say what a
primitive's derivative is, these modules say which NumPy spellings mean that primitive.
One module per family of rules/ that NumPy spells in more than one way, named alike,
plus `composed` (functions with no primitive of their own) and `writes` and `views`
(NumPy's in-place writes and aliasing, done functionally with setitem), and `random`
(np.random and generators). The ufuncs and scipy.special need no module here.
rules/__init__ imports this package after every primitive is registered.
"""

import functools

import numpy as np

from ...errors import TracingError, UnsupportedOperationError, at
from ...trace.boxes import Box
from ...trace.context import user_loc
from ...trace.dispatch import FUNCTIONS, UFUNC_METHODS, shape_args


def register_function(*funcs):
    """Decorator: handle these NumPy functions (via __array_function__) with `handler`."""
    def decorate(handler):
        for func in funcs:
            FUNCTIONS[func] = handler
        return handler
    return decorate


def boxmethod(*names):
    """Decorator: make `handler` a method (or property) of traced values."""
    def decorate(handler):
        for name in names:
            setattr(Box, name, handler if name.startswith("__") or not callable(handler)
                    else _reading_ints(handler))
        return handler
    return decorate


def _reading_ints(handler):
    """An ndarray method's traced int arguments (x.reshape(k, -1), x.sum(k)) read as
    guarded Python ints, as a NumPy function's shapes are (tracer.shape_args)."""
    @functools.wraps(handler)
    def method(self, *args, **kwargs):
        args, kwargs = shape_args(args, kwargs, bare=True)
        return handler(self, *args, **kwargs)
    return method


def register_ufunc_method(ufunc, method):
    """Decorator: handle `ufunc.method(...)` (e.g. np.add.reduce) on traced values."""
    def decorate(handler):
        UFUNC_METHODS[(ufunc, method)] = handler
        return handler
    return decorate


def check_no_out(out, name, kwargs=None):
    """Refuse out= and keyword arguments that a traced call cannot honour."""
    if out is not None:
        raise TracingError(at(user_loc(), f"{name}(..., out=...) on a traced value: in-place "
                              "results are not supported; assign the result instead"))
    if kwargs:
        raise UnsupportedOperationError(at(user_loc(), f"{name} with keyword arguments "
                                           f"{sorted(kwargs)} is not supported when traced"))


def normalize_axis(axis, ndim):
    """None, or an int / sorted tuple of non-negative axes (an int when there is one)."""
    if axis is None:
        return None
    axes = (axis,) if np.ndim(axis) == 0 else tuple(axis)
    axes = tuple(sorted(int(a) % ndim if ndim else int(a) for a in axes))
    return axes[0] if len(axes) == 1 else axes


# each module registers its handlers when imported
from . import (  # noqa: F401
    assembly,
    building,
    composed,
    eig,
    elementwise,
    fft,
    indexing,
    indices,
    linalg,
    predicates,
    products,
    random,
    reductions,
    shapes,
    views,
    writes,
)
