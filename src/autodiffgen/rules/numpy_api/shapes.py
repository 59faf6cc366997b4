"""np.reshape, np.ravel, np.transpose, np.swapaxes, np.moveaxis, np.rollaxis, np.squeeze,
np.expand_dims, np.broadcast_to, np.concatenate, np.stack, np.atleast_1d/2d/3d, np.shape,
np.ndim, np.size, np.zeros_like, np.ones_like, np.empty_like, np.full_like and the
ndarray methods reshape, ravel, flatten, transpose, swapaxes, squeeze: NumPy's spellings
of the primitives in rules/shapes.py (-1 sizes resolved, axes made non-negative, identity
rearrangements dropped).
"""

import os
import sys

import numpy as np

from ...errors import UnsupportedOperationError, at, is_internal
from ...trace.boxes import Box
from ...trace.context import user_loc
from ..shapes import (
    broadcast_to,
    concatenate,
    expand_dims,
    full_like,
    ones_like,
    reshape,
    squeeze,
    stack,
    transpose,
    zeros_like,
)
from .dispatch import boxmethod, check_no_out, normalize_axis, register_function


def _shape_arg(shape, args):
    if args:
        shape = (shape,) + args
    return (shape,) if np.ndim(shape) == 0 else tuple(shape)


@register_function(np.reshape)
def _reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    shape = newshape if shape is None else shape
    if order != "C":
        raise UnsupportedOperationError(at(user_loc(), f"reshape with order={order!r} is not "
                                           "supported on traced values"))
    return reshape(a, shape=_resolve(np.shape(a), _shape_arg(shape, ())))


def _resolve(old, new):
    """The new shape with a -1 replaced by the size it stands for."""
    if -1 in new:
        known = int(np.prod([n for n in new if n != -1]))
        size = int(np.prod(old))
        new = tuple(size // known if known and n == -1 else n for n in new)
    if int(np.prod(new)) != int(np.prod(old)):
        raise ValueError(at(user_loc(), f"cannot reshape an array of shape {old} into {new}"))
    return tuple(int(n) for n in new)


@boxmethod("reshape")
def _reshape_method(self, shape, *more, order="C"):
    return _reshape(self, _shape_arg(shape, more), order)


@register_function(np.ravel)
def _ravel(a, order="C"):
    """A reshape to (-1,), and a copy where NumPy's ravel copies: it returns a view only
    of a contiguous array, where reshape(-1) also views some strided ones (a write into
    the array must not be seen through a ravel that NumPy copied)."""
    flat = _reshape(a, (-1,), order)
    value = a.value if type(a) is Box else a
    if type(value) is np.ndarray and not np.may_share_memory(np.ravel(value, order), value):
        return np.copy(flat)
    return flat


boxmethod("ravel")(lambda self, order="C": _ravel(self, order))
boxmethod("flatten")(lambda self, order="C": np.copy(_reshape(self, (-1,), order)))


@register_function(np.transpose)
def _transpose(a, axes=None):
    ndim = np.ndim(a)
    axes = None if axes is None else tuple(int(i) % ndim for i in axes)
    if axes == tuple(range(ndim)):
        return a
    if axes == tuple(range(ndim - 1, -1, -1)):
        axes = None
    return transpose(a, axes=axes)


@boxmethod("transpose")
def _transpose_method(self, *axes):
    if len(axes) == 1 and (axes[0] is None or np.ndim(axes[0]) == 1):
        axes = axes[0]
    return _transpose(self, axes or None)


@register_function(np.swapaxes)
def _swapaxes(a, axis1, axis2):
    axes = list(range(np.ndim(a)))
    axes[axis1], axes[axis2] = axes[axis2], axes[axis1]
    return _transpose(a, axes)


boxmethod("swapaxes")(_swapaxes)


@register_function(np.moveaxis)
def _moveaxis(a, source, destination):
    ndim = np.ndim(a)
    source = [int(s) % ndim for s in np.atleast_1d(source)]
    destination = [int(d) % ndim for d in np.atleast_1d(destination)]
    order = [n for n in range(ndim) if n not in source]
    for dest, src in sorted(zip(destination, source, strict=True)):
        order.insert(dest, src)
    return _transpose(a, order)


@register_function(np.rollaxis)
def _rollaxis(a, axis, start=0):
    """moveaxis, once `start` is counted as NumPy counts it: before the axis is removed."""
    ndim = np.ndim(a)
    axis, given = int(axis) % ndim, int(start)
    start = given + ndim if given < 0 else given
    if not 0 <= start <= ndim:
        raise ValueError(at(user_loc(), f"np.rollaxis start={given} must be in [-{ndim}, "
                            f"{ndim}] for an array of {ndim} dimensions"))
    return _moveaxis(a, axis, start - 1 if axis < start else start)


def atleast(a, ndim):
    """a reshaped as np.atleast_<ndim>d does: (n,) -> (1, n) and (1, n, 1); (m, n) -> (m, n, 1)."""
    shape = tuple(np.shape(a))
    if len(shape) >= ndim:
        return a
    if ndim == 3:
        new = {0: (1, 1, 1), 1: (1,) + shape + (1,), 2: shape + (1,)}[len(shape)]
    else:
        new = (1,) * (ndim - len(shape)) + shape
    return reshape(a, shape=new)


def _atleast_handler(ndim):
    def handler(*arys):
        out = tuple(atleast(a, ndim) for a in arys)
        return out[0] if len(out) == 1 else out
    return handler


register_function(np.atleast_1d)(_atleast_handler(1))
register_function(np.atleast_2d)(_atleast_handler(2))
register_function(np.atleast_3d)(_atleast_handler(3))


@register_function(np.squeeze)
def _squeeze(a, axis=None):
    return squeeze(a, axis=normalize_axis(axis, np.ndim(a)))


boxmethod("squeeze")(_squeeze)


@register_function(np.expand_dims)
def _expand_dims(a, axis):
    return expand_dims(a, axis=normalize_axis(axis, np.ndim(a) + np.size(axis)))


@register_function(np.broadcast_to)
def _broadcast_to(array, shape, subok=False):
    shape = _shape_arg(shape, ())
    return array if np.shape(array) == shape else broadcast_to(array, shape=shape)


@register_function(np.concatenate)
def _concatenate(arrays, axis=0, out=None, dtype=None, casting="same_kind"):
    check_no_out(out, "np.concatenate", {"dtype": dtype} if dtype is not None else None)
    arrays = tuple(arrays)
    if axis is None:  # NumPy flattens every array first
        return concatenate(*[_ravel(a) for a in arrays], axis=0)
    return concatenate(*arrays, axis=normalize_axis(axis, np.ndim(arrays[0])))


@register_function(np.stack)
def _stack(arrays, axis=0, out=None, dtype=None, casting="same_kind"):
    check_no_out(out, "np.stack", {"dtype": dtype} if dtype is not None else None)
    arrays = tuple(arrays)
    return stack(*arrays, axis=normalize_axis(axis, np.ndim(arrays[0]) + 1))


register_function(np.shape)(lambda a: a.shape)
register_function(np.ndim)(lambda a: a.ndim)
register_function(np.size)(lambda a, axis=None: a.size if axis is None else a.shape[axis])


@register_function(np.zeros_like)
def _zeros_like(a, dtype=None, order="K", subok=True, shape=None, *, device=None):
    dtype = np.dtype(a.dtype if dtype is None else dtype)
    if shape is not None or not _called_by_user():
        return np.zeros(np.shape(a) if shape is None else shape, dtype)
    return zeros_like(a, dtype=dtype)


def _called_by_user():
    frame = sys._getframe(3)  # past this and its caller here, and Box.__array_function__
    while frame is not None and (frame.f_code.co_filename.startswith(_NUMPY_DIR)
                                 or frame.f_code in PASSING):
        frame = frame.f_back
    return frame is not None and not is_internal(frame.f_code.co_filename)


_NUMPY_DIR = os.path.dirname(os.path.abspath(np.__file__))
PASSING = set()  # code of wrappers that pass a NumPy call on (building.py): not the caller


@register_function(np.ones_like)
def _ones_like(a, dtype=None, order="K", subok=True, shape=None, *, device=None):
    """As np.zeros_like: traced in the user's code (a buffer its writes fill), a plain
    constant inside the rules."""
    dtype = np.dtype(a.dtype if dtype is None else dtype)
    if shape is not None or not _called_by_user():
        return np.ones(np.shape(a) if shape is None else shape, dtype)
    return ones_like(a, dtype=dtype)


@register_function(np.empty_like)
def _empty_like(prototype, dtype=None, order="K", subok=True, shape=None, *, device=None):
    """Zeros: an empty array's contents are arbitrary, and zeros are a deterministic choice.
    Traced in the user's code, as np.zeros_like: a buffer its writes fill, of the shape
    the prototype has when the code runs."""
    dtype = np.dtype(prototype.dtype if dtype is None else dtype)
    if shape is not None or type(prototype) is not Box or not _called_by_user():
        return np.zeros(np.shape(prototype) if shape is None else shape, dtype)
    return zeros_like(prototype, dtype=dtype)


@register_function(np.full_like)
def _full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, *, device=None):
    dtype = np.dtype(a.dtype if dtype is None else dtype)
    if shape is None and type(a) is Box and _called_by_user():
        return full_like(a, fill_value, dtype=dtype)
    shape = np.shape(a) if shape is None else shape
    if type(fill_value) is not Box:
        return np.full(shape, fill_value, dtype)
    if fill_value.dtype != dtype:  # a traced fill value: its gradient is the sum of g
        fill_value = fill_value.astype(dtype)
    return np.broadcast_to(fill_value, shape)
