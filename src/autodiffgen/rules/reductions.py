"""Reductions: sum, mean, max, min, with axis None / int / negative / tuple and keepdims.

Every rule first puts the cotangent back into the reduced array's rank (`_kept`), then
broadcasts it; max and min share the gradient equally among tied maxima, as Autograd does.
"""

import numpy as np

from . import (
    axes_tuple,
    boxmethod,
    check_no_out,
    defprimitive,
    normalize_axis,
    register_function,
    register_ufunc_method,
)


def _kept(v, x, axis, keepdims):
    """`v` (reduced over `axis`) reshaped so that it broadcasts against `x`."""
    if keepdims:
        return v
    shape = list(np.shape(x))
    for a in axes_tuple(axis, len(shape)):
        shape[a] = 1
    return np.reshape(v, tuple(shape))


def _count(x, axis):
    shape = np.shape(x)
    return int(np.prod([shape[a] for a in axes_tuple(axis, len(shape))]))


def _sum_vjp(g, ans, x, axis, keepdims, dtype):
    return np.broadcast_to(_kept(g, x, axis, keepdims), np.shape(x))


def _mean_vjp(g, ans, x, axis, keepdims, dtype):
    return np.broadcast_to(_kept(g, x, axis, keepdims) / _count(x, axis), np.shape(x))


def _extremum_vjp(g, ans, x, axis, keepdims):
    hit = x == _kept(ans, x, axis, keepdims)
    g = _kept(g, x, axis, keepdims)
    return g * hit / np.sum(hit, axis=axis, keepdims=True, dtype=g.dtype)


def _extremum_jvp(t, ans, x, axis, keepdims):
    """The mean of the tangents at the tied extrema."""
    hit = x == _kept(ans, x, axis, keepdims)
    dtype = np.result_type(t.dtype, x.dtype)
    return (np.sum(t * hit, axis=axis, keepdims=keepdims)
            / np.sum(hit, axis=axis, keepdims=keepdims, dtype=dtype))


_REDUCE = {"axis": None, "keepdims": False}
sum_ = defprimitive("sum", lambda x, axis, keepdims, dtype:
                    np.sum(x, axis=axis, keepdims=keepdims, dtype=dtype),
                    "np.sum({0})", dict(_REDUCE, dtype=None), vjps=[_sum_vjp], linear_in=(0,))
mean = defprimitive("mean", lambda x, axis, keepdims, dtype:
                    np.mean(x, axis=axis, keepdims=keepdims, dtype=dtype),
                    "np.mean({0})", dict(_REDUCE, dtype=None), vjps=[_mean_vjp], linear_in=(0,))
max_ = defprimitive("max", lambda x, axis, keepdims: np.max(x, axis=axis, keepdims=keepdims),
                    "np.max({0})", _REDUCE, vjps=[_extremum_vjp], jvps=[_extremum_jvp])
min_ = defprimitive("min", lambda x, axis, keepdims: np.min(x, axis=axis, keepdims=keepdims),
                    "np.min({0})", _REDUCE, vjps=[_extremum_vjp], jvps=[_extremum_jvp])


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
