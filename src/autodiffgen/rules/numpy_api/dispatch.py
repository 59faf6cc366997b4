"""The decorators that route NumPy's functions, ndarray methods and ufunc methods on
traced values to their handlers, and the argument checks the handlers share (see the
package's docstring). The family modules import them from here."""

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
