"""Reductions: sum, mean, max, min, prod, with axis None / int / negative / tuple and
keepdims; cumsum and cumprod; var, std and average written with these.

Every rule first puts the cotangent back into the reduced array's rank (`_kept`), then
broadcasts it; max and min share the gradient equally among tied maxima, as Autograd does.
prod's and cumprod's rules are products of the other elements, exact at zeros.
"""

import numpy as np

from ..errors import UnsupportedOperationError, at
from ..graph import Index
from ..tracer import Box, user_loc
from . import (
    axes_tuple,
    boxmethod,
    check_no_out,
    defprimitive,
    normalize_axis,
    register_function,
    register_helper,
    register_ufunc_method,
)
from .indexing import getitem


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



def _others(x, axis):
    """Each element's product of the others in its group, exact when the group has zeros:
    with no zero it is prod / x, with one zero it is prod of the rest at the zero and 0
    elsewhere, with two or more it is 0 everywhere."""
    zero = x == 0
    safe = np.where(zero, 1, x)
    rest = np.prod(safe, axis=axis, keepdims=True)
    zeros = np.sum(zero, axis=axis, keepdims=True)
    return np.where(zeros == 0, rest / safe, np.where(zero & (zeros == 1), rest, 0))


def _prod_vjp(g, ans, x, axis, keepdims):
    return _kept(g, x, axis, keepdims) * _others(x, axis)


def _prod_jvp(t, ans, x, axis, keepdims):
    return np.sum(t * _others(x, axis), axis=axis, keepdims=keepdims)


prod = defprimitive("prod", lambda x, axis, keepdims: np.prod(x, axis=axis, keepdims=keepdims),
                    "np.prod({0})", _REDUCE, vjps=[_prod_vjp], jvps=[_prod_jvp])


# ---- cumulative sums and products -------------------------------------------------------
def _reversed(x, axis):
    return getitem(x, index=Index((slice(None),) * axis + (slice(None, None, -1),)))


def _reverse_cumsum(g, axis):
    """sum over j >= i of g[j]: the transpose of cumsum."""
    return _reversed(np.cumsum(_reversed(g, axis), axis=axis), axis)


def _cumprod_parts(x, axis):
    """For the product of x[:i+1] without x[j]: the running product with zeros read as
    ones, and masks of the positions i that follow no zero, or exactly one."""
    zero = x == 0
    safe = np.where(zero, 1, x)
    zeros = np.cumsum(zero, axis=axis)
    return zero, safe, np.cumprod(safe, axis=axis), zeros == 0, zeros == 1


def _cumprod_vjp(g, ans, x, axis):
    """sum over i >= j of g[i] * prod(x[k] for k <= i, k != j), exact where x has zeros:
    a nonzero x[j] divides out while no zero came before i; a zero x[j] is the only one."""
    zero, safe, run, none, one = _cumprod_parts(x, axis)
    return np.where(zero, _reverse_cumsum(g * run * one, axis),
                    _reverse_cumsum(g * run * none, axis) / safe)


def _cumprod_jvp(t, ans, x, axis):
    zero, safe, run, none, one = _cumprod_parts(x, axis)
    return run * np.where(none, np.cumsum(t / safe, axis=axis),
                          np.where(one, np.cumsum(t * zero, axis=axis), 0))


cumsum = defprimitive("cumsum", lambda x, axis: np.cumsum(x, axis=axis),
                      "np.cumsum({0}, axis={axis})",
                      vjps=[lambda g, ans, x, axis: _reverse_cumsum(g, axis)], linear_in=(0,))
cumprod = defprimitive("cumprod", lambda x, axis: np.cumprod(x, axis=axis),
                       "np.cumprod({0}, axis={axis})", vjps=[_cumprod_vjp], jvps=[_cumprod_jvp])

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
    return np.sum(np.square(centered), axis=axis, keepdims=keepdims) / (_count(a, axis) - ddof)


@register_function(np.std)
@boxmethod("std")
def _std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kwargs):
    return std_root(_var(a, axis, dtype, out, ddof, keepdims, **kwargs))


def _std_root_vjp(g, ans, v):
    """g / (2 * std), but g / 2 where std is 0 (one value, or all values equal): the
    variance's own derivative is exactly 0 there, so the gradient is 0 (as Autograd and
    PyTorch give for a single value) instead of inf * 0 = NaN."""
    return g / (2 * np.where(ans == 0, 1, ans))


def _std_root(v):
    """np.sqrt as np.std's last step. A helper of its own, so that an enclosing trace of
    the generated code (hessian, grad of grad) records std_root, whose derivative is
    finite where the variance is 0, rather than np.sqrt, whose derivative is not."""
    return np.sqrt(v)


def _traceable_std_root(v):
    return std_root(v) if type(v) is Box else _std_root(v)


std_root = defprimitive("std_root", np.sqrt, "_std_root({0})", vjps=[_std_root_vjp],
                        jvp_from="vjp", helper="_std_root")
register_helper("_std_root", _std_root, _traceable_std_root)


@register_function(np.average)
def _average(a, axis=None, weights=None, returned=False, *, keepdims=False):
    """sum(a * w) / sum(w), with 1-D weights laid along `axis` as NumPy does."""
    axis = normalize_axis(axis, np.ndim(a))
    if weights is None:
        avg = np.mean(a, axis=axis, keepdims=keepdims)
        total = np.full(np.shape(avg), _count(a, axis), dtype=avg.dtype)
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
