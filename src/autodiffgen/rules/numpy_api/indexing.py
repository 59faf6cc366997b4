"""x[...] on traced values, and the index helpers generated code calls: how a key the user
writes (ints, slices, None, Ellipsis, arrays, lists, masks) becomes an `Index` and the
arrays it refers to, recorded as the primitives of rules/indexing.py.

A traced mask selects as many elements as the data says (generalize_counts.py decides whether that
count is read at run time or guarded); a slice bound that is a traced int argument is
read, and guarded. `_getitem`, `_scatter_add` and `_setitem` are runtime helpers of
generated code: called on Boxes by an enclosing trace (grad of grad, hessian) they record
their primitive again.
"""

import numpy as np

from ... import count_sources
from ...errors import TracingError, at
from ...generated_helpers import _getitem as _getitem_helper
from ...generated_helpers import _setitem as _setitem_impl
from ...generated_helpers import scatter_add as _scatter_add_impl
from ...graph import Index, Slot
from ...tracer import Box, concrete, current_trace, result_dtype, user_loc
from .. import register_helper
from ..indexing import getitem, scatter_add, setitem, shifted
from . import boxmethod


def parse_index(key):
    """An Index and the arrays it refers to, from whatever the user put in x[...]."""
    items, arrays = [], []
    for item in key if type(key) is tuple else (key,):
        if type(item) is Box or isinstance(item, (np.ndarray, list)):  # a probed mask: seen
            arrays.append(count_sources.seen(current_trace(), item) if type(item) is Box
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
    # a traced mask: how many elements it selects is data (generalize_counts.py)
    trace = current_trace()
    arrays = [count_sources.observe(trace, a) if type(a) is Box and result_dtype(a) == np.bool_
              else a for a in arrays]
    if any(type(i) is slice and (i.start is not None or i.stop is not None)
           for i in index.items):  # x[m][:3] is 3 long, or fewer: a size decided on
        count_sources.mark_read(current_trace())
    return getitem(self, *arrays, index=index)


def _traceable_scatter_add(g, index, shape, unique=False):
    """generated_helpers._scatter_add for generated code, recorded as a primitive when traced."""
    if type(g) is not Box and not any(type(i) is Box for i in index):
        return _scatter_add_impl(g, index, shape, unique)
    parsed, arrays = parse_index(index)
    return scatter_add(g, *arrays, index=parsed, shape=tuple(shape), unique=unique)


register_helper("_scatter_add", _scatter_add_impl, _traceable_scatter_add)


def _traceable_getitem(x, index):
    """generated_helpers._getitem for generated code (a constant indexed by computed arrays),
    recorded as a primitive when traced."""
    key = index if type(index) is tuple else (index,)
    if not any(type(i) is Box for i in key) and type(x) is not Box:
        return _getitem_helper(x, index)
    parsed, arrays = parse_index(index)
    return getitem(x, *arrays, index=parsed)


register_helper("_getitem", _getitem_helper, _traceable_getitem)


def _traceable_setitem(x, index, v):
    """generated_helpers._setitem for generated code, recorded as a primitive when traced."""
    key = index if type(index) is tuple else (index,)
    if not any(type(a) is Box for a in (x, v) + key):
        return _setitem_impl(x, index, v)
    parsed, arrays = parse_index(index)
    return setitem(x, v, *arrays, index=shifted(parsed, 1))


register_helper("_setitem", _setitem_impl, _traceable_setitem)
