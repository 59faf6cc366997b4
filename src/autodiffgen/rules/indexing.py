"""Indexing: getitem (basic slicing, integer arrays, boolean masks), its transpose
scatter_add, setitem, the functional form of a write `x[index] = v`, and add_at, a dense
value plus a scatter without the zeros (`x[index] += v` as a function).

The cotangent of `x[index]` is `scatter_add`: zeros of x's shape with the cotangent added
at `index`. Repeated integer indices accumulate, as np.add.at does; when the index can
be seen to select each element at most once (basic slices, masks, or an index that
contains a constant array of distinct values, such as np.arange(n)), plain assignment
is used instead, which is much faster. setitem is a copy of x with x[index] = v; how the
user's writes, views and in-place operators become setitem is numpy_api/writes.py and
numpy_api/views.py, how x[...] keys become an Index numpy_api/indexing.py.
"""

import numpy as np

from ..generated_helpers import _add_at as _add_at_impl
from ..generated_helpers import _setitem as _setitem_impl
from ..generated_helpers import scatter_add as _scatter_add_impl
from ..graph import Index, Slot
from ..trace.boxes import Box, result_dtype
from .masked_writes import masked_where
from .registry import defprimitive
from .vjps import BLOCKS


# ---- getitem and scatter_add ---------------------------------------------------------------
def _getitem_impl(x, *arrays, index):
    return x[index.fill((x,) + arrays)]


def _getitem_vjp(i, g, ans, x, *arrays, index):
    if i != 0:
        return None
    return scatter_add(g, *arrays, **block_cotangent(x, *arrays, index=index))


def block_cotangent(x, *arrays, index):
    """scatter_add's parameters for the cotangent of x[index] (backward/reverse.py sums many of
    them at once: cotangent_sums.py)."""
    return {"index": index, "shape": tuple(np.shape(x)),
            "unique": selects_once(index, (x,) + arrays)}


def _scatter_add_vjp(i, g, ans, g_in, *arrays, index, shape, unique):
    return getitem(g, *arrays, index=index) if i == 0 else None


getitem = defprimitive("getitem", _getitem_impl, "{0}[{index}]", variadic_vjp=_getitem_vjp,
                       linear_in=(0,))
BLOCKS[getitem] = block_cotangent
scatter_add = defprimitive(
    "scatter_add",
    lambda g, *arrays, index, shape, unique: _scatter_add_impl(
        g, index.fill((g,) + arrays), shape, unique),
    "_scatter_add({0}, {index}, {shape})", {"unique": False},
    variadic_vjp=_scatter_add_vjp, helper="_scatter_add", linear_in=(0,))


def selects_once(index, args):
    """True when no element of the indexed array can be selected twice."""
    slots = index.slots
    if not slots:
        return True
    arrays = [args[s.k] for s in slots]
    if any(result_dtype(a) == np.bool_ for a in arrays):  # a mask selects once; with other
        return len(arrays) == 1  # arrays its shape is not theirs, so do not compare them
    shape = np.broadcast_shapes(*[np.shape(a) for a in arrays])
    if shape == ():  # integers, traced or not: one position (x[t, 0] in a loop over t)
        return True
    for a in arrays:  # negative indices may alias positive ones: [2, -1] on length 3
        if type(a) is not Box and np.issubdtype(result_dtype(a), np.integer) \
                and np.shape(a) == shape and np.all(a >= 0) and np.unique(a).size == np.size(a):
            return True
    return False


# ---- setitem: a copy of x with x[index] = v ------------------------------------------------
def shifted(index, by):
    """The Index with its Slots renumbered: setitem's arrays come after (x, v), getitem's
    after x alone."""
    def moved(i):
        return Slot(i.k + by) if type(i) is Slot else i
    return Index(slice(moved(i.start), moved(i.stop), moved(i.step)) if type(i) is slice
                 else moved(i) for i in index.items)


def _setitem_fill(x, v, *arrays, index):
    return _setitem_impl(x, index.fill((x, v) + arrays), v)


def _setitem_vjp(i, g, ans, x, v, *arrays, index):
    if i == 0:  # the elements written over get nothing from the old value (unless no one
        return setitem(g, 0.0, *arrays, index=index)  # reads them: backward/writes.py)
    if i == 1:
        return _kept_writes(g, x, arrays, shifted(index, -1))
    return None


def _kept_writes(g, x, arrays, index):
    """g at the elements of v (broadcast to x[index]) that NumPy's write kept.

    With repeated integer indices only one write to an element survives (NumPy makes no
    promise which; in practice the last). Which one is found by writing the positions of
    v's elements the same way and reading them back: the other writes get no gradient.
    """
    picked = getitem(g, *arrays, index=index)
    if selects_once(index, (x,) + tuple(arrays)):
        return picked
    shape = np.shape(picked)
    order = np.arange(int(np.prod(shape)), dtype=np.intp).reshape(shape)
    slots = setitem(np.full(np.shape(x), -1, np.intp), order, *arrays, index=shifted(index, 1))
    return np.where(getitem(slots, *arrays, index=index) == order, picked, 0)


setitem = defprimitive("setitem", _setitem_fill, "_setitem({0}, np.s_[{index}], {1})",
                       variadic_vjp=_setitem_vjp, helper="_setitem", linear_in=(0, 1),
                       simplify=masked_where)  # complementary masked writes: one np.where


# ---- add_at: x + scatter_add(v, index), made by passes/add_at.py ----------------------------
def _add_at_fill(x, v, *arrays, index, unique):
    return _add_at_impl(x, index.fill((x, v) + arrays), v, unique)


def _add_at_vjp(i, g, ans, x, v, *arrays, index, unique):
    if i == 0:
        return g
    if i == 1:  # repeated indices: each occurrence of an element gets its cotangent
        return getitem(g, *arrays, index=shifted(index, -1))
    return None


add_at = defprimitive("add_at", _add_at_fill, "_add_at({0}, np.s_[{index}], {1})",
                      {"unique": False}, variadic_vjp=_add_at_vjp, helper="_add_at",
                      linear_in=(0, 1))
