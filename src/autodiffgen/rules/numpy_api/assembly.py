"""np.tile, np.repeat, np.flip/fliplr/flipud, np.rot90, np.roll, np.pad, np.triu/tril,
np.diagonal, np.diag, np.trace, np.take, np.take_along_axis, np.hstack/vstack/dstack,
np.column_stack, np.split and np.array_split, and their ndarray methods.

Most are indexing or concatenation in disguise, and are written that way, so their
gradients come from getitem, scatter_add and concatenate: flip is a reversed slice,
roll, take, diagonal and per-element repeat are getitem with a constant integer index,
split is a list of slices. tile, repeat by a constant count, pad, triu and tril record
the primitives of rules/assembly.py.
"""

import itertools

import numpy as np

from ...errors import UnsupportedOperationError, at
from ...graph import Index, Slot
from ...trace.boxes import Box
from ...trace.context import user_loc
from ..assembly import pad, repeat, tile, tril, triu
from ..indexing import getitem, scatter_add
from .dispatch import boxmethod, check_no_out, register_function
from .indexing import parse_index
from .shapes import _concatenate, _moveaxis, _ravel, _transpose, atleast


def _along(axis, item):
    """An Index that applies `item` to `axis` and keeps every other axis whole."""
    return Index((slice(None),) * axis + (item,))


def _axis(axis, ndim):
    return int(axis) % max(ndim, 1)


# ---- tile and repeat ----------------------------------------------------------------------
@register_function(np.tile)
def _tile(A, reps):
    reps = tuple(int(r) for r in np.atleast_1d(reps))
    if all(r == 1 for r in reps) and len(reps) <= np.ndim(A):
        return A
    return tile(A, reps=reps)


@register_function(np.repeat)
@boxmethod("repeat")
def _repeat(a, repeats, axis=None):
    if axis is None:
        a, axis = _ravel(a), 0
    axis = _axis(axis, np.ndim(a))
    if type(repeats) is Box:
        raise UnsupportedOperationError(at(user_loc(), "np.repeat with traced repeats: the "
                                           "output's size must be known when tracing"))
    counts = np.asarray(repeats)
    if counts.size == 1:
        return repeat(a, repeats=int(counts.reshape(())), axis=axis)
    index = np.repeat(np.arange(np.shape(a)[axis]), counts)
    return getitem(a, index, index=_along(axis, Slot(1)))


# ---- flip and roll: reversed slices and constant permutations ---------------------------
@register_function(np.flip)
def _flip(m, axis=None):
    ndim = np.ndim(m)
    axes = range(ndim) if axis is None else {_axis(a, ndim) for a in np.atleast_1d(axis)}
    return getitem(m, index=Index(slice(None, None, -1) if i in axes else slice(None)
                                  for i in range(ndim)))


register_function(np.fliplr)(lambda m: _flip(m, 1))
register_function(np.flipud)(lambda m: _flip(m, 0))


@register_function(np.rot90)
def _rot90(m, k=1, axes=(0, 1)):
    """NumPy's own recipe: a flip and a transpose, both flips, or nothing."""
    ndim = np.ndim(m)
    if len(axes) != 2 or ndim < 2 or _axis(axes[0], ndim) == _axis(axes[1], ndim):
        raise ValueError(at(user_loc(), "np.rot90 takes two different axes of an array of at "
                            "least 2 dimensions"))
    first, second = _axis(axes[0], ndim), _axis(axes[1], ndim)
    k = int(k) % 4
    if k == 0:
        return m
    if k == 2:
        return _flip(m, (first, second))
    swapped = list(range(ndim))
    swapped[first], swapped[second] = second, first
    if k == 1:
        return _transpose(_flip(m, second), swapped)
    return _flip(_transpose(m, swapped), second)


@register_function(np.roll)
def _roll(a, shift, axis=None):
    if axis is None:
        return np.reshape(_roll(_ravel(a), np.sum(shift), 0), np.shape(a))
    shifts = {}
    for s, ax in np.broadcast(shift, axis):  # NumPy adds the shifts given for one axis
        ax = _axis(ax, np.ndim(a))
        shifts[ax] = shifts.get(ax, 0) + int(s)
    for ax, s in sorted(shifts.items()):
        n = np.shape(a)[ax]
        if n and s % n:
            a = getitem(a, (np.arange(n) - s) % n, index=_along(ax, Slot(1)))
    return a


# ---- pad ----------------------------------------------------------------------------------
_GATHERED = ("reflect", "symmetric", "edge", "wrap")


def _pad_by_gathering(array, pad_width, mode):
    """reflect, symmetric, edge and wrap repeat elements of the array: along each axis, a
    constant index, which is np.pad of np.arange(n) in the same mode (exactly NumPy's
    placement), gathers them; the gradient scatters back through it."""
    widths = np.broadcast_to(np.asarray(pad_width, dtype=int), (np.ndim(array), 2))
    for axis, (before, after) in enumerate(widths):
        if before or after:
            n = np.shape(array)[axis]
            index = np.pad(np.arange(n), (int(before), int(after)), mode=mode)
            array = getitem(array, index, index=_along(axis, Slot(1)))
    return array


@register_function(np.pad)
def _pad(array, pad_width, mode="constant", **kwargs):
    if mode in _GATHERED and kwargs.get("reflect_type", "even") == "even" and \
            set(kwargs) <= {"reflect_type"}:
        return _pad_by_gathering(array, pad_width, mode)
    value = kwargs.pop("constant_values", 0)
    if mode != "constant" or kwargs:
        raise UnsupportedOperationError(at(user_loc(), f"np.pad with mode={mode!r}"
                                           + (f" and {sorted(kwargs)}" if kwargs else "")
                                           + " is not supported on traced values: "
                                           "mode='constant' with a scalar constant_values, "
                                           "or 'reflect', 'symmetric' (reflect_type='even'), "
                                           "'edge', 'wrap'"))
    if type(value) is Box or np.ndim(value) != 0:
        raise UnsupportedOperationError(at(user_loc(), "np.pad with a traced or per-axis "
                                           "constant_values is not supported: pass one "
                                           "constant number"))
    widths = np.broadcast_to(np.asarray(pad_width, dtype=int), (np.ndim(array), 2))
    value = value.item() if isinstance(value, (np.generic, np.ndarray)) else value
    return pad(array, pad_width=tuple((int(b), int(e)) for b, e in widths),
               constant_values=value)


# ---- triangles and diagonals ------------------------------------------------------------
def _triangle(prim, name):
    def handler(m, k=0):
        if np.ndim(m) < 2:
            raise UnsupportedOperationError(at(user_loc(), f"np.{name} of a traced array of "
                                               f"{np.ndim(m)} dimensions: give it a matrix"))
        return prim(m, k=int(k))
    return handler


register_function(np.triu)(_triangle(triu, "triu"))
register_function(np.tril)(_triangle(tril, "tril"))


def _diagonal_index(n1, n2, offset):
    """Row and column indices of a diagonal; one array when they are the same."""
    length = max(min(n1, n2 - offset) if offset >= 0 else min(n1 + offset, n2), 0)
    rows = np.arange(length) + max(-offset, 0)
    cols = np.arange(length) + max(offset, 0)
    return (rows,) if offset == 0 else (rows, cols)


@register_function(np.diagonal)
@boxmethod("diagonal")
def _diagonal(a, offset=0, axis1=0, axis2=1):
    """The diagonal as the last axis, like NumPy: a[..., rows, cols] after moving the axes."""
    ndim = np.ndim(a)
    axis1, axis2 = _axis(axis1, ndim), _axis(axis2, ndim)
    n1, n2 = np.shape(a)[axis1], np.shape(a)[axis2]
    moved = _moveaxis(a, (axis1, axis2), (-2, -1))
    arrays = _diagonal_index(n1, n2, int(offset))
    return getitem(moved, *arrays, index=Index((Ellipsis, Slot(1), Slot(len(arrays)))))


@register_function(np.diag)
def _diag(v, k=0):
    if np.ndim(v) == 2:
        return _diagonal(v, k)
    if np.ndim(v) != 1:
        raise ValueError(at(user_loc(), "np.diag takes a 1-D or 2-D array"))
    n = np.shape(v)[0] + abs(int(k))
    arrays = _diagonal_index(n, n, int(k))
    return scatter_add(v, *arrays, index=Index((Slot(1), Slot(len(arrays)))), shape=(n, n),
                       unique=True)


@register_function(np.trace)
@boxmethod("trace")
def _trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    check_no_out(out, "np.trace", {"dtype": dtype} if dtype is not None else None)
    return np.sum(_diagonal(a, offset, axis1, axis2), axis=-1)


# ---- take and take_along_axis -----------------------------------------------------------
@register_function(np.take)
@boxmethod("take")
def _take(a, indices, axis=None, out=None, mode="raise"):
    check_no_out(out, "np.take", {"mode": mode} if mode != "raise" else None)
    if axis is None:
        a, axis = _ravel(a), 0
    key = (slice(None),) * _axis(axis, np.ndim(a)) + (np.asarray(indices)
                                                      if type(indices) is not Box else indices,)
    index, arrays = parse_index(key)
    return getitem(a, *arrays, index=index)


@register_function(np.take_along_axis)
def _take_along_axis(arr, indices, axis=-1):
    if axis is None:
        arr, axis = _ravel(arr), 0
    ndim = np.ndim(arr)
    axis = _axis(axis, ndim)
    key = [indices if d == axis else
           np.arange(n).reshape((1,) * d + (n,) + (1,) * (ndim - d - 1))
           for d, n in enumerate(np.shape(arr))]
    index, arrays = parse_index(tuple(key))
    return getitem(arr, *arrays, index=index)


# ---- stacking and splitting ---------------------------------------------------------------
@register_function(np.hstack)
def _hstack(tup, dtype=None, casting="same_kind"):
    arrays = [atleast(a, 1) for a in tup]
    return _concatenate(arrays, axis=0 if np.ndim(arrays[0]) == 1 else 1, dtype=dtype)


@register_function(np.vstack)
def _vstack(tup, dtype=None, casting="same_kind"):
    return _concatenate([atleast(a, 2) for a in tup], axis=0, dtype=dtype)


@register_function(np.dstack)
def _dstack(tup):
    return _concatenate([atleast(a, 3) for a in tup], axis=2)


@register_function(np.column_stack)
def _column_stack(tup):
    arrays = [a if np.ndim(a) >= 2 else np.reshape(a, (-1, 1)) for a in tup]
    return _concatenate(arrays, axis=1)


@register_function(np.array_split)
def _array_split(ary, indices_or_sections, axis=0):
    """A list of slices along `axis`, cut where NumPy cuts."""
    axis = _axis(axis, np.ndim(ary))
    n = np.shape(ary)[axis]
    if np.ndim(indices_or_sections) == 0:
        sections = int(indices_or_sections)
        if sections <= 0:
            raise ValueError(at(user_loc(), "number sections must be larger than 0."))
        size, extra = divmod(n, sections)
        bounds = np.cumsum([0] + extra * [size + 1] + (sections - extra) * [size]).tolist()
    else:
        bounds = [0, *(int(i) for i in indices_or_sections), n]
    return [getitem(ary, index=_along(axis, slice(start, stop)))
            for start, stop in itertools.pairwise(bounds)]


@register_function(np.split)
def _split(ary, indices_or_sections, axis=0):
    if np.ndim(indices_or_sections) == 0 and np.shape(ary)[_axis(axis, np.ndim(ary))] \
            % int(indices_or_sections):
        raise ValueError(at(user_loc(), "array split does not result in an equal division"))
    return _array_split(ary, indices_or_sections, axis)
