"""NumPy functions that are a few other primitives in a row: sort, partition and median,
diff and trapezoid, kron and cross, linspace, append and ptp, matrix_power and multi_dot.

Nothing here has a primitive of its own, nor a rule. sort and partition are an index
(argsort, or argpartition, which has no derivative) and take_along_axis, so the
cotangent is scattered back through the permutation; median is the mean of the middle
of a sort (NumPy's own way), so its derivative reaches the one or two middle elements
(and the data's median, of values no derivative flows through, is computed by the
generated code at run time, like any step); diff and trapezoid are slices and
sums; kron is an einsum and a reshape; cross is products of rotated components;
linspace is start and stop weighted by constants. Their gradients, second derivatives
included, come from those primitives.
"""

import operator
import string

import numpy as np

from ...errors import TracingError, UnsupportedOperationError, at
from ...trace.boxes import Box
from ...trace.context import user_loc
from ...trace.recording import bind
from ..indices import argpartition
from ..registry import astype
from .assembly import _axis, _take_along_axis
from .building import cast
from .dispatch import (
    boxmethod,
    check_no_out,
    normalize_axis,
    register_function,
    register_ufunc_method,
)
from .indices import _argsort
from .shapes import _moveaxis, _ravel


# ---- sort and partition: a derivative-free index, then take_along_axis ------------------
@register_function(np.sort)
def _sort(a, axis=-1, kind=None, order=None, *, stable=None):
    if axis is None:
        a, axis = _ravel(a), -1
    return _take_along_axis(a, _argsort(a, axis, kind, order, stable=stable), axis)


def _in_place(name):
    def refuse(self, *args, **kwargs):
        raise TracingError(at(user_loc(), f"x.{name}() on a traced array {name}s it in place, "
                              f"which cannot be traced; write x = np.{name}(x, ...) instead"))
    return refuse


boxmethod("sort")(_in_place("sort"))
boxmethod("partition")(_in_place("partition"))

@register_function(np.partition)
def _partition(a, kth, axis=-1, kind="introselect", order=None):
    """argpartition arranges each side of kth as np.partition does, though NumPy
    promises only the partition itself."""
    if axis is None:
        a, axis = _ravel(a), -1
    return _take_along_axis(a, _argpartition(a, kth, axis, kind, order), axis)


@register_function(np.argpartition)
def _argpartition(a, kth, axis=-1, kind="introselect", order=None):
    if order is not None or type(kth) is Box:
        raise TracingError(at(user_loc(), "np.partition or np.argpartition with order= or a "
                              "traced kth cannot be traced: pass kth as a number or a list of "
                              "numbers"))
    if axis is None:
        a, axis = _ravel(a), -1
    axis = normalize_axis(axis, np.ndim(a))
    kth = int(kth) if np.ndim(kth) == 0 else tuple(int(k) for k in kth)
    return bind(argpartition, (a,), {"kth": kth, "axis": -1 if axis == np.ndim(a) - 1 else axis})


# ---- median: the mean of the middle of a sort --------------------------------------------
@register_function(np.median)
def _median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """As NumPy computes it: the mean of the one or two middle elements of the sorted
    values (so an int array's median is a float64), NaN where a NaN sorts last."""
    check_no_out(out, "np.median")
    ndim = np.ndim(a)
    axes = normalize_axis(axis, ndim)
    if axes is None:
        a, along = _ravel(a), 0
    elif type(axes) is tuple:  # the axes moved last and joined into one
        a = np.moveaxis(a, axes, tuple(range(-len(axes), 0)))
        a, along = np.reshape(a, np.shape(a)[:ndim - len(axes)] + (-1,)), ndim - len(axes)
    else:
        along = axes
    n = np.shape(a)[along]
    if n == 0:
        raise ValueError(at(user_loc(), "np.median of an empty traced array (NumPy gives NaN "
                            "with a warning): check the size before taking the median"))
    s, before = _sort(a, along), (slice(None),) * along
    middle = np.mean(s[before + (slice((n - 1) // 2, n // 2 + 1),)], axis=along)
    if np.issubdtype(_dtype_of(s), np.inexact):  # NumPy's median is NaN where a NaN is
        last = s[before + (-1,)]
        middle = np.where(np.isnan(last), last, middle)
    if keepdims:
        middle = np.reshape(middle, (1,) * ndim) if axes is None else \
            np.expand_dims(middle, axes)
    return middle


# ---- diff and trapezoid: slices along an axis -------------------------------------------
def _ends(a, axis):
    """a without its first, and without its last, element along `axis`."""
    whole = (slice(None),) * axis
    return a[whole + (slice(1, None),)], a[whole + (slice(None, -1),)]


def _end_piece(value, a, axis):
    """prepend= / append= as NumPy takes it: a scalar becomes one slice along `axis`."""
    if np.ndim(value) == 0:
        shape = list(np.shape(a))
        shape[axis] = 1
        return np.broadcast_to(value, tuple(shape))
    return value


@register_function(np.diff)
def _diff(a, n=1, axis=-1, prepend=np._NoValue, append=np._NoValue):
    if n < 0:
        raise ValueError(at(user_loc(), f"order must be non-negative but got {n!r}"))
    if np.ndim(a) == 0:
        raise ValueError(at(user_loc(), "diff requires input that is at least one dimensional"))
    if n == 0:
        return a
    axis = _axis(axis, np.ndim(a))
    pieces = [a]
    if prepend is not np._NoValue:
        pieces.insert(0, _end_piece(prepend, a, axis))
    if append is not np._NoValue:
        pieces.append(_end_piece(append, a, axis))
    if len(pieces) > 1:
        a = np.concatenate(pieces, axis=axis)
    op = np.not_equal if np.result_type(a.dtype) == np.bool_ else np.subtract
    for _ in range(int(n)):
        a = op(*_ends(a, axis))
    return a


def _trapezoid(y, x=None, dx=1.0, axis=-1):
    ndim = np.ndim(y)
    axis = _axis(axis, ndim)
    if x is None:
        d = dx
    elif np.ndim(x) == 1:  # spacings along `axis`, as NumPy lines them up
        d = np.diff(x)
        d = np.reshape(d, tuple(np.shape(d)[0] if i == axis else 1 for i in range(ndim)))
    else:
        d = np.diff(x, axis=axis)
    upper, lower = _ends(y, axis)
    return np.sum(d * (upper + lower) / 2.0, axis=axis)


register_function(*[getattr(np, name) for name in ("trapezoid", "trapz")
                    if hasattr(np, name)])(_trapezoid)


# ---- gradient: central differences inside, one-sided ones at the ends -------------------
def _spacings(varargs, axes, shape):
    """Per axis: a number (uniform spacing) or a 1-d array of coordinates, as NumPy takes
    varargs (none, one for every axis, or one per axis)."""
    if len(varargs) == 0:
        return [1.0] * len(axes)
    if len(varargs) == 1 and np.ndim(varargs[0]) == 0:
        return list(varargs) * len(axes)
    if len(varargs) != len(axes):
        raise TypeError(at(user_loc(), "invalid number of arguments to np.gradient"))
    for h, axis in zip(varargs, axes):
        if np.ndim(h) == 1 and len(h) != shape[axis]:
            raise ValueError(at(user_loc(), "when 1d, distances must match the length of "
                                "the corresponding dimension"))
    return list(varargs)


def _gradient_along(f, h, axis, edge_order):
    """NumPy's formulas: second-order accurate inside (for uneven coordinates too) and
    `edge_order`-accurate at both ends."""
    n = np.shape(f)[axis]
    if n < edge_order + 1:
        raise ValueError(at(user_loc(), "Shape of array too small to calculate a numerical "
                            "gradient, at least (edge_order + 1) elements are required."))
    at_ = lambda i: f[(slice(None),) * axis + (i,)]
    part = lambda a, b: f[(slice(None),) * axis + (slice(a, b),)]
    line = lambda d: np.reshape(d, tuple(-1 if i == axis else 1
                                         for i in range(np.ndim(f))))
    if np.ndim(h) == 0:
        inner = (part(2, None) - part(None, -2)) / (2.0 * h)
        if edge_order == 1:
            first, last = (at_(1) - at_(0)) / h, (at_(-1) - at_(-2)) / h
        else:
            first = (-1.5 * at_(0) + 2.0 * at_(1) - 0.5 * at_(2)) / h
            last = (0.5 * at_(-3) - 2.0 * at_(-2) + 1.5 * at_(-1)) / h
    else:
        dx = np.diff(h)
        d1, d2 = dx[:-1], dx[1:]
        inner = (line(-d2 / (d1 * (d1 + d2))) * part(None, -2)
                 + line((d2 - d1) / (d1 * d2)) * part(1, -1)
                 + line(d1 / (d2 * (d1 + d2))) * part(2, None))
        if edge_order == 1:
            first, last = (at_(1) - at_(0)) / dx[0], (at_(-1) - at_(-2)) / dx[-1]
        else:
            a, b = dx[0], dx[1]
            first = (-(2.0 * a + b) / (a * (a + b)) * at_(0) + (a + b) / (a * b) * at_(1)
                     - a / (b * (a + b)) * at_(2))
            a, b = dx[-2], dx[-1]
            last = (b / (a * (a + b)) * at_(-3) - (a + b) / (a * b) * at_(-2)
                    + (2.0 * b + a) / (b * (a + b)) * at_(-1))
    ends = [np.expand_dims(first, axis), inner, np.expand_dims(last, axis)]
    return np.concatenate(ends, axis=axis)


@register_function(np.gradient)
def _gradient(f, *varargs, axis=None, edge_order=1):
    if edge_order not in (1, 2):
        raise ValueError(at(user_loc(), "'edge_order' greater than 2 not supported"))
    ndim = np.ndim(f)
    axes = tuple(range(ndim)) if axis is None else \
        (normalize_axis(axis, ndim),) if np.ndim(axis) == 0 else \
        tuple(int(a) % ndim for a in axis)
    if not np.issubdtype(f.dtype, np.inexact):
        f = astype(f, np.float64)
    spacings = _spacings(varargs, axes, np.shape(f))
    out = tuple(_gradient_along(f, h, a, edge_order) for h, a in zip(spacings, axes))
    return out[0] if len(out) == 1 else out


# ---- kron and cross ---------------------------------------------------------------------
@register_function(np.kron)
def _kron(a, b):
    """One einsum that interleaves the axes of a and b ('ab,cd->acbd'), then a reshape
    that merges each pair; the operands are first given the same number of axes."""
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return a * b
    ndim = max(np.ndim(a), np.ndim(b))
    if ndim > 13:  # two letters an axis
        raise UnsupportedOperationError(at(user_loc(), "np.kron of traced arrays of more "
                                           "than 13 dimensions is not supported"))
    a, b = (x if np.ndim(x) == ndim else np.reshape(x, (1,) * (ndim - np.ndim(x)) + np.shape(x))
            for x in (a, b))
    ta, tb = string.ascii_lowercase[:ndim], string.ascii_lowercase[ndim:2 * ndim]
    out = "".join(i + j for i, j in zip(ta, tb, strict=True))
    shape = tuple(m * n for m, n in zip(np.shape(a), np.shape(b), strict=True))
    return np.reshape(np.einsum(f"{ta},{tb}->{out}", a, b), shape)


@register_function(np.cross)
def _cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = np.moveaxis(a, axisa, -1), np.moveaxis(b, axisb, -1)
    if np.shape(a)[-1] != 3 or np.shape(b)[-1] != 3:
        raise UnsupportedOperationError(at(user_loc(), "np.cross of traced arrays supports "
                                           "3-vectors only (NumPy 2 deprecates 2-vectors); "
                                           f"got {np.shape(a)[-1]} and {np.shape(b)[-1]}"))
    ahead, behind = np.array([1, 2, 0]), np.array([2, 0, 1])  # (a1, a2, a0), (a2, a0, a1)
    c = a[..., ahead] * b[..., behind] - a[..., behind] * b[..., ahead]
    return _moveaxis(c, -1, axisc)


# ---- linspace: start and stop weighted by constants --------------------------------------
def _dtype_of(value):
    if type(value) is Box or isinstance(value, (np.ndarray, np.generic)):
        return value.dtype
    return value if isinstance(value, (int, float)) else np.asarray(value).dtype


@register_function(np.linspace)
def _linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *,
              device=None):
    """start * (1 - w) + stop * w with constant weights w = i / div, which gives start
    and stop exactly at the ends (NumPy's start + i * step matches them to rounding)."""
    num = operator.index(num)
    if num < 0:
        raise ValueError(at(user_loc(), f"Number of samples, {num}, must be non-negative."))
    div = num - 1 if endpoint else num
    inexact = np.result_type(_dtype_of(start), _dtype_of(stop), 0.0)
    ndim = len(np.broadcast_shapes(np.shape(start), np.shape(stop)))
    w = np.arange(num, dtype=inexact) / div if div > 0 else np.zeros(num, inexact)
    w = np.reshape(w, (num,) + (1,) * ndim)
    y = start * (1 - w) + stop * w
    if axis != 0:
        y = np.moveaxis(y, 0, axis)
    if dtype is not None and np.issubdtype(dtype, np.integer):
        y = np.floor(y)
    if dtype is not None and np.dtype(dtype) != y.dtype:
        y = y.astype(dtype)
    if retstep:
        return y, (stop - start) / div if div > 0 else np.nan
    return y


# ---- append and ptp: one or two other functions -----------------------------------------
@register_function(np.append)
def _append(arr, values, axis=None):
    if axis is None:
        return np.concatenate([np.ravel(arr), np.ravel(values)])
    return np.concatenate([arr, values], axis=axis)


@register_function(np.ptp)
def _ptp(a, axis=None, out=None, keepdims=False):
    if out is not None:
        raise TracingError(at(user_loc(), "np.ptp(..., out=...) writes in place, which "
                              "cannot be traced; use the returned value"))
    return np.max(a, axis=axis, keepdims=keepdims) - np.min(a, axis=axis, keepdims=keepdims)


# ---- float_power: np.power computed in float64 (or wider), as NumPy does ------------------
@register_ufunc_method(np.float_power, "__call__")
def _float_power(x1, x2, out=None, **kwargs):
    check_no_out(out, "np.float_power", kwargs)
    wide = np.result_type(_dtype_of(x1), _dtype_of(x2), np.float64)
    x1, x2 = (cast(x, wide) if type(x) is Box and x.dtype != wide else
              x if type(x) is Box else np.asarray(x, wide) for x in (x1, x2))
    return np.power(x1, x2)


# ---- matrix_power and multi_dot: matmul chains ------------------------------------------
@register_function(np.linalg.matrix_power)
def _matrix_power(a, n):
    """Repeated squaring, as NumPy does (n < 0: of the inverse; n == 0: the identity)."""
    n = operator.index(n)
    if n < 0:
        a, n = np.linalg.inv(a), -n
    if n == 0:
        return np.broadcast_to(np.eye(a.shape[-1], dtype=a.dtype), a.shape) + a * 0
    result = None
    while n:
        if n & 1:
            result = a if result is None else result @ a
        n >>= 1
        if n:
            a = a @ a
    return result


@register_function(np.linalg.multi_dot)
def _multi_dot(arrays, *, out=None):
    """The product left to right (NumPy picks the cheapest order: the same up to rounding);
    a 1-D first or last array is a row or a column vector, as in matmul."""
    if out is not None:
        raise TracingError(at(user_loc(), "np.linalg.multi_dot(..., out=...) writes in "
                              "place, which cannot be traced; use the returned value"))
    arrays = list(arrays)
    if len(arrays) < 2:
        raise ValueError(at(user_loc(), "Expecting at least two arrays."))
    result = arrays[0]
    for array in arrays[1:]:
        result = result @ array
    return result


# ---- vsplit, hsplit, dsplit, select, real_if_close -------------------------------------
def _split_along(axis, least, name):
    def split(ary, indices_or_sections):
        if np.ndim(ary) < least:
            raise ValueError(at(user_loc(), f"{name} only works on arrays of {least} or more "
                                "dimensions"))
        along = 1 if axis == 1 and np.ndim(ary) > 1 else 0 if axis == 1 else axis
        return np.split(ary, indices_or_sections, axis=along)
    return split


register_function(np.vsplit)(_split_along(0, 2, "vsplit"))
register_function(np.hsplit)(_split_along(1, 1, "hsplit"))
register_function(np.dsplit)(_split_along(2, 3, "dsplit"))


@register_function(np.select)
def _select(condlist, choicelist, default=0):
    """np.where from the last choice to the first, so the first true condition wins."""
    if len(condlist) != len(choicelist):
        raise ValueError(at(user_loc(), "list of cases must be same length as list of "
                            "conditions"))
    result = default
    for condition, choice in reversed(list(zip(condlist, choicelist))):
        result = np.where(condition, choice, result)
    return result


@register_function(np.real_if_close)
def _real_if_close(a, tol=100):
    """A real array as it is. A complex one's real part if every imaginary part is within
    tol (machine epsilons, for tol > 1) of 0: NumPy decides on the values, so the code
    guards that decision (one variant for each answer)."""
    if not np.iscomplexobj(a) or np.size(a) == 0:
        return a
    if tol > 1:
        tol = tol * np.finfo(a.dtype).eps
    if bool(np.max(np.abs(np.imag(a))) < tol):
        return np.real(a)
    return a
