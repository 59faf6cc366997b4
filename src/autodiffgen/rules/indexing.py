"""Indexing: basic slicing, integer-array and boolean-mask indexing, and its transpose.

The cotangent of `x[index]` is `scatter_add`: zeros of x's shape with the cotangent added
at `index`. Repeated integer indices accumulate, as np.add.at does; when the index can
be seen to select each element at most once (basic slices, masks, or an index that
contains a constant array of distinct values, such as np.arange(n)), plain assignment
is used instead, which is much faster.
"""

import numpy as np

from .. import sizes
from ..errors import TracingError, at
from ..graph import Index, Slot
from ..runtime import _getitem as _getitem_helper
from ..runtime import scatter_add as _scatter_add_impl
from ..tracer import Box, concrete, current_trace, result_dtype, user_loc
from . import boxmethod, defprimitive, register_helper


def _getitem_impl(x, *arrays, index):
    return x[index.fill((x,) + arrays)]


def _getitem_vjp(i, g, ans, x, *arrays, index):
    if i != 0:
        return None
    return scatter_add(g, *arrays, index=index, shape=tuple(np.shape(x)),
                       unique=selects_once(index, (x,) + arrays))


def _scatter_add_vjp(i, g, ans, g_in, *arrays, index, shape, unique):
    return getitem(g, *arrays, index=index) if i == 0 else None


getitem = defprimitive("getitem", _getitem_impl, "{0}[{index}]", variadic_vjp=_getitem_vjp,
                       linear_in=(0,))
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
    for a in arrays:  # negative indices may alias positive ones: [2, -1] on length 3
        if type(a) is not Box and np.issubdtype(result_dtype(a), np.integer) \
                and np.shape(a) == shape and np.all(a >= 0) and np.unique(a).size == np.size(a):
            return True
    return False


def parse_index(key):
    """An Index and the arrays it refers to, from whatever the user put in x[...]."""
    items, arrays = [], []
    for item in key if type(key) is tuple else (key,):
        if type(item) is Box or isinstance(item, (np.ndarray, list)):  # a probed mask: seen
            arrays.append(sizes.seen(current_trace(), item) if type(item) is Box
                          else _index_array(item))
            items.append(Slot(len(arrays)))
        elif isinstance(item, (bool, np.bool_)):
            arrays.append(np.asarray(item))
            items.append(Slot(len(arrays)))
        elif isinstance(item, (int, np.integer)):
            items.append(int(item))
        elif type(item) is slice:
            items.append(slice(*[_slice_bound(b) for b in (item.start, item.stop, item.step)]))
        elif item is None or item is Ellipsis:
            items.append(item)
        else:
            raise TracingError(at(user_loc(), f"unsupported index {item!r} of type "
                                  f"{type(item).__name__} on a traced array"))
    return Index(items), arrays


def _index_array(item):
    try:
        return np.asarray(item)
    except TracingError:
        raise TracingError(at(user_loc(), "a list of traced values used as an index: "
                              "build the index with np.stack instead")) from None


def _slice_bound(b):
    if type(b) is Box and type(b.value) is int:  # from an int argument: read, and guarded
        return concrete(b)
    if type(b) is Box:
        raise TracingError(at(user_loc(), "a slice bound that depends on traced values: "
                              "slice sizes must be known when tracing"))
    return None if b is None else int(b)


@boxmethod("__getitem__")
def _getitem(self, key):
    index, arrays = parse_index(key)
    # a traced mask: how many elements it selects is data (sizes.py)
    arrays = [sizes.observe(current_trace(), a) if type(a) is Box and result_dtype(a) == np.bool_
              else a for a in arrays]
    if any(type(i) is slice and (i.start is not None or i.stop is not None)
           for i in index.items):  # x[m][:3] is 3 long, or fewer: a size decided on
        sizes.mark_read(current_trace())
    return getitem(self, *arrays, index=index)


def _traceable_scatter_add(g, index, shape, unique=False):
    """runtime._scatter_add for generated code, recorded as a primitive when traced."""
    if type(g) is not Box and not any(type(i) is Box for i in index):
        return _scatter_add_impl(g, index, shape, unique)
    parsed, arrays = parse_index(index)
    return scatter_add(g, *arrays, index=parsed, shape=tuple(shape), unique=unique)


register_helper("_scatter_add", _scatter_add_impl, _traceable_scatter_add)


def _traceable_getitem(x, index):
    """runtime._getitem for generated code (a constant indexed by computed arrays),
    recorded as a primitive when traced."""
    key = index if type(index) is tuple else (index,)
    if not any(type(i) is Box for i in key) and type(x) is not Box:
        return _getitem_helper(x, index)
    parsed, arrays = parse_index(index)
    return getitem(x, *arrays, index=parsed)


register_helper("_getitem", _getitem_helper, _traceable_getitem)
