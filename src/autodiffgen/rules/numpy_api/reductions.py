"""np.sum, np.mean, np.max/amax, np.min/amin, np.prod, np.cumsum, np.cumprod, their
ndarray methods and ufunc.reduce spellings (np.add.reduce ...), and np.var, np.std and
np.average written with them: the primitives of rules/reductions.py, with NumPy's axis
(None, int, negative, tuple), keepdims and dtype arguments normalized.
"""

import numpy as np

from ...errors import UnsupportedOperationError, at
from ...trace.context import user_loc
from ..complex_numbers import abs2, is_complex
from ..reductions import axes_tuple, count, cumprod, cumsum, max_, mean, min_, prod, std_root, sum_
from .dispatch import (
    boxmethod,
    check_no_out,
    normalize_axis,
    register_function,
    register_ufunc_method,
)


def _reducer(prim, name, with_dtype):
    """The handler for np.<name>(a, axis, ...) and for the method a.<name>(axis, ...)."""
    def handler(a, axis=None, dtype=None, out=None, keepdims=False, **kwargs):
        check_no_out(out, f"np.{name}", {k: v for k, v in kwargs.items() if v is not np._NoValue})
        axis = normalize_axis(axis, np.ndim(a))
        params = {"axis": axis, "keepdims": bool(keepdims)}
        if with_dtype:
            params["dtype"] = None if dtype is None else np.dtype(dtype)
        return prim(a, **params)
    return handler


def _extremum(prim, name):
    def handler(a, axis=None, out=None, keepdims=False, **kwargs):
        check_no_out(out, f"np.{name}", {k: v for k, v in kwargs.items() if v is not np._NoValue})
        return prim(a, axis=normalize_axis(axis, np.ndim(a)), keepdims=bool(keepdims))
    return handler


register_function(np.sum)(boxmethod("sum")(_reducer(sum_, "sum", True)))
register_function(np.mean)(boxmethod("mean")(_reducer(mean, "mean", True)))
register_function(np.max, np.amax)(boxmethod("max")(_extremum(max_, "max")))
register_function(np.min, np.amin)(boxmethod("min")(_extremum(min_, "min")))


@register_ufunc_method(np.add, "reduce")
def _add_reduce(a, axis=0, dtype=None, out=None, keepdims=False):
    return _reducer(sum_, "add.reduce", True)(a, axis, dtype, out, keepdims)


@register_ufunc_method(np.maximum, "reduce")
def _maximum_reduce(a, axis=0, out=None, keepdims=False):
    return _extremum(max_, "maximum.reduce")(a, axis, out, keepdims)


@register_ufunc_method(np.minimum, "reduce")
def _minimum_reduce(a, axis=0, out=None, keepdims=False):
    return _extremum(min_, "minimum.reduce")(a, axis, out, keepdims)


@register_ufunc_method(np.multiply, "reduce")
def _multiply_reduce(a, axis=0, dtype=None, out=None, keepdims=False):
    return _prod(a, axis, dtype, out, keepdims)


def _refuse_dtype(dtype, name):
    if dtype is not None:
        raise UnsupportedOperationError(at(user_loc(), f"{name}(..., dtype=...) is not supported "
                                           "on traced values; cast with .astype() first"))


@register_function(np.prod)
@boxmethod("prod")
def _prod(a, axis=None, dtype=None, out=None, keepdims=False, **kwargs):
    check_no_out(out, "np.prod", {k: v for k, v in kwargs.items() if v is not np._NoValue})
    _refuse_dtype(dtype, "np.prod")
    return prod(a, axis=normalize_axis(axis, np.ndim(a)), keepdims=bool(keepdims))


def _cumulative(prim, name):
    """np.<name>(a, axis=None): axis None works on the flattened array, as NumPy does."""
    def handler(a, axis=None, dtype=None, out=None):
        check_no_out(out, f"np.{name}")
        _refuse_dtype(dtype, f"np.{name}")
        if axis is None:
            a, axis = np.reshape(a, (-1,)), 0
        return prim(a, axis=int(axis) % max(np.ndim(a), 1))
    return handler


register_function(np.cumsum)(boxmethod("cumsum")(_cumulative(cumsum, "cumsum")))
register_function(np.cumprod)(boxmethod("cumprod")(_cumulative(cumprod, "cumprod")))


# ---- var, std and average: written with the primitives above ----------------------------
@register_function(np.var)
@boxmethod("var")
def _var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=np._NoValue,
         mean=np._NoValue, correction=np._NoValue):
    """As NumPy computes it: the mean of the squared deviations, divided by n - ddof."""
    check_no_out(out, "np.var", {k: v for k, v in {"where": where, "mean": mean}.items()
                                 if v is not np._NoValue})
    _refuse_dtype(dtype, "np.var")
    ddof = ddof if correction is np._NoValue else correction
    axis = normalize_axis(axis, np.ndim(a))
    centered = a - np.mean(a, axis=axis, keepdims=True)
    squares = abs2(centered) if is_complex(centered) else np.square(centered)
    return np.sum(squares, axis=axis, keepdims=keepdims) / (count(a, axis) - ddof)


@register_function(np.std)
@boxmethod("std")
def _std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kwargs):
    return std_root(_var(a, axis, dtype, out, ddof, keepdims, **kwargs))


@register_function(np.average)
def _average(a, axis=None, weights=None, returned=False, *, keepdims=False):
    """sum(a * w) / sum(w), with 1-D weights laid along `axis` as NumPy does."""
    axis = normalize_axis(axis, np.ndim(a))
    if weights is None:
        avg = np.mean(a, axis=axis, keepdims=keepdims)
        total = np.full(np.shape(avg), count(a, axis), dtype=avg.dtype)
    else:
        if np.shape(weights) != np.shape(a):
            if axis is None:
                raise TypeError(at(user_loc(), "np.average: weights of a shape different "
                                   "from a's need an axis"))
            shape = [1] * np.ndim(a)
            for ax, n in zip(axes_tuple(axis, np.ndim(a)), np.shape(weights), strict=True):
                shape[ax] = n
            weights = np.reshape(weights, tuple(shape))
        total = np.sum(weights, axis=axis, keepdims=keepdims)
        avg = np.sum(a * weights, axis=axis, keepdims=keepdims) / total
        if returned and np.shape(total) != np.shape(avg):
            total = np.broadcast_to(total, np.shape(avg))
    return (avg, total) if returned else avg
