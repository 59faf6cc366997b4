"""Reductions: sum, mean, max, min, prod over an axis (None, an int or a sorted tuple,
as numpy_api/reductions.py normalizes it), with keepdims; cumsum and cumprod; std_root,
the square root that ends np.std.

Every rule first puts the cotangent back into the reduced array's rank (`_kept`), then
broadcasts it; max and min share the gradient equally among tied maxima, as Autograd does.
prod's and cumprod's rules are products of the other elements, exact at zeros.
"""

import numpy as np

from ..graph import Index
from ..trace.boxes import Box
from .indexing import getitem
from .registry import defprimitive, register_helper


def axes_tuple(axis, ndim):
    """A normalized axis (None, an int or a tuple) as a tuple of axes."""
    if axis is None:
        return tuple(range(ndim))
    return (axis,) if isinstance(axis, int) else axis


def _kept(v, x, axis, keepdims):
    """`v` (reduced over `axis`) reshaped so that it broadcasts against `x`."""
    if keepdims:
        return v
    shape = list(np.shape(x))
    for a in axes_tuple(axis, len(shape)):
        shape[a] = 1
    return np.reshape(v, tuple(shape))


def count(x, axis):
    """How many elements of x each result of a reduction over `axis` reduces."""
    shape = np.shape(x)
    return int(np.prod([shape[a] for a in axes_tuple(axis, len(shape))]))


# ---- sum, mean, max, min --------------------------------------------------------------------
def _sum_vjp(g, ans, x, axis, keepdims, dtype):
    return np.broadcast_to(_kept(g, x, axis, keepdims), np.shape(x))


def _mean_vjp(g, ans, x, axis, keepdims, dtype):
    return np.broadcast_to(_kept(g, x, axis, keepdims) / count(x, axis), np.shape(x))


def _extremum_vjp(g, ans, x, axis, keepdims):
    """g shared by the tied extrema: divided by their count while it is as small as the
    result (a number for a whole reduction), then spread by the mask: the same numbers as
    `g * hit / count`, since hit is 0 or 1."""
    hit = x == _kept(ans, x, axis, keepdims)
    share = g / np.sum(hit, axis=axis, keepdims=keepdims, dtype=g.dtype)
    return _kept(share, x, axis, keepdims) * hit


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


# ---- prod -----------------------------------------------------------------------------------
def _others(x, axis):
    """Each element's product of the others in its group, exact when the group has zeros:
    with no zero it is prod / x, with one zero it is prod of the rest at the zero and 0
    elsewhere, with two or more it is 0 everywhere."""
    zero = x == 0
    safe = np.where(zero, 1, x)
    rest = np.prod(safe, axis=axis, keepdims=True)
    zeros = np.sum(zero, axis=axis, keepdims=True)
    return np.where(zeros == 0, rest / safe, np.where(zero & (zeros == 1), rest, 0))


prod = defprimitive(
    "prod", lambda x, axis, keepdims: np.prod(x, axis=axis, keepdims=keepdims),
    "np.prod({0})", _REDUCE,
    vjps=[lambda g, ans, x, axis, keepdims: _kept(g, x, axis, keepdims) * _others(x, axis)],
    jvps=[lambda t, ans, x, axis, keepdims:
          np.sum(t * _others(x, axis), axis=axis, keepdims=keepdims)])


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


# ---- std_root: np.std's square root ---------------------------------------------------------
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
