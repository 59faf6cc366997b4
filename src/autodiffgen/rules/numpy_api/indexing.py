"""x[...] on traced values, and the index helpers generated code calls: how a key the user
writes (ints, slices, None, Ellipsis, arrays, masks, and lists or tuples inside a tuple
key, which NumPy reads as arrays: `x[(0, 1), (3, 2)]`; ranges: `p[range(n), y]`) becomes an
`Index` and the arrays it refers to, recorded as the primitives of rules/indexing.py.

A traced mask selects as many elements as the data says (generalize_counts.py decides whether that
count is read at run time or guarded); a slice bound that is a traced int argument is
read, and guarded, unless the slice's length is all that the bounds decide (`X[i * bs:(i + 1)
* bs]`): then the bounds are inputs of the code, and its guards check the length
(_dynamic_slice). `_getitem`, `_scatter_add`, `_setitem` and `_add_at` are runtime helpers of
generated code: called on Boxes by an enclosing trace (grad of grad, hessian) they record
their primitive again.
"""

import operator

import numpy as np

from ...errors import TracingError, at
from ...generated_helpers import _add_at as _add_at_impl
from ...generated_helpers import _getitem as _getitem_helper
from ...generated_helpers import _setitem as _setitem_impl
from ...generated_helpers import scatter_add as _scatter_add_impl
from ...graph import Index, Slot
from ...trace import count_sources
from ...trace.boxes import Box, _holds_box, concrete, result_dtype
from ...trace.context import current_trace, user_loc
from ..indexing import add_at, getitem, scatter_add, setitem, shifted
from ..registry import register_helper
from .dispatch import boxmethod


def parse_index(key, shape=None):
    """An Index and the arrays it refers to, from whatever the user put in x[...] (of an
    array of this shape, when known)."""
    items, arrays, axis = [], [], 0  # the axis the item indexes, while it is known
    for item in key if type(key) is tuple else (key,):
        dynamic = _dynamic_slice(item, axis, shape, arrays) if type(item) is slice else None
        axis = axis + 1 if type(item) in (int, slice) and axis is not None else \
            axis if item is None else None
        if dynamic is not None:
            items.append(dynamic)
        elif type(item) is Box or isinstance(item, (np.ndarray, list, tuple, range)):
            # a probed mask: seen; a constant: an array (_index_array)
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
    """A constant index as NumPy reads it: a range is the np.arange it is (an int array even
    when empty, which np.asarray(range(0)) is not), so p[range(len(y)), y] serves every
    batch size as p[np.arange(len(y)), y] does (generalize_batch fits it to arange(n))."""
    if type(item) is range:
        return np.arange(item.start, item.stop, item.step)
    try:
        return np.asarray(item)
    except TracingError:
        raise TracingError(at(user_loc(), "a list of traced values used as an index: "
                              "build the index with np.stack instead")) from None


def _dynamic_slice(item, axis, shape, arrays):
    """slice(Slot, Slot) for x[start:stop] with a traced int start and a stop that is
    start plus a fixed length: an iteration counter picking a minibatch. NumPy's slice
    then takes exactly elements start .. stop - 1 of the axis, for every start, when

        0 <= start,   stop - start == the length traced,   stop <= the axis length,

    which the trace reads as guards; the code slices x[start:stop] with the run-time
    bounds (NumPy's own semantics), and the backward writes the cotangent into the same
    rows. A start that is negative or a stop past the end (a last, shorter batch) is
    read and guarded as any other bound: another cache entry, never a wrong answer.
    None when the slice is not of this form."""
    start, stop = item.start, item.stop
    if axis is None or shape is None or axis >= len(shape) or not _int_box(start) or \
            not (_int_box(stop) or type(stop) is int) or \
            _slice_bound(item.step) not in (None, 1):
        return None
    stop_value = stop.value if type(stop) is Box else stop
    if not 0 <= start.value <= stop_value <= shape[axis]:
        return None
    if not (bool(start >= 0) and operator.index(stop - start) >= 0 and
            bool(stop <= shape[axis])):  # guards; their outcomes are known here
        return None
    bounds = []
    for bound in (start, stop):
        if type(bound) is Box:
            arrays.append(bound)
            bound = Slot(len(arrays))
        bounds.append(bound)
    return slice(bounds[0], bounds[1], None)


def _int_box(x):
    return type(x) is Box and type(x.value) is int


def _slice_bound(b):
    if type(b) is Box and type(b.value) is int:  # from an int argument: read, and guarded
        return concrete(b)
    if type(b) is Box:
        raise TracingError(at(user_loc(), "a slice bound that depends on traced values: "
                              "slice sizes must be known when tracing"))
    return None if b is None else int(b)


@boxmethod("__getitem__")
def _getitem(self, key):
    index, arrays = parse_index(key, np.shape(self))
    # a traced mask: how many elements it selects is data (generalize_counts.py)
    trace = current_trace()
    arrays = [count_sources.observe(trace, a) if type(a) is Box and result_dtype(a) == np.bool_
              else a for a in arrays]
    if any(type(i) is slice and (i.start is not None or i.stop is not None)
           for i in index.items):  # x[m][:3] is 3 long, or fewer: a size decided on
        count_sources.mark_read(current_trace(), np.shape(self.value), self)
    return getitem(self, *arrays, index=index)


def _traceable_scatter_add(g, index, shape, unique=False):
    """generated_helpers._scatter_add for generated code, recorded as a primitive when traced."""
    if type(g) is not Box and not _holds_box(index):
        return _scatter_add_impl(g, index, shape, unique)
    parsed, arrays = parse_index(index, tuple(shape))
    return scatter_add(g, *arrays, index=parsed, shape=tuple(shape), unique=unique)


register_helper("_scatter_add", _scatter_add_impl, _traceable_scatter_add)


def _traceable_getitem(x, index):
    """generated_helpers._getitem for generated code (a constant indexed by computed arrays),
    recorded as a primitive when traced."""
    key = index if type(index) is tuple else (index,)
    if not _holds_box(key) and type(x) is not Box:
        return _getitem_helper(x, index)
    parsed, arrays = parse_index(index, np.shape(x))
    return getitem(x, *arrays, index=parsed)


register_helper("_getitem", _getitem_helper, _traceable_getitem)


def _traceable_setitem(x, index, v):
    """generated_helpers._setitem for generated code, recorded as a primitive when traced."""
    key = index if type(index) is tuple else (index,)
    if not _holds_box((x, v) + key):
        return _setitem_impl(x, index, v)
    parsed, arrays = parse_index(index, np.shape(x))
    return setitem(x, v, *arrays, index=shifted(parsed, 1))


register_helper("_setitem", _setitem_impl, _traceable_setitem)


def _traceable_add_at(x, index, v, unique=False, out=None):
    """generated_helpers._add_at for generated code, recorded as a primitive when traced
    (where the code is traced, it writes into nothing: `out` is not given)."""
    key = index if type(index) is tuple else (index,)
    if not _holds_box((x, v) + key):
        return _add_at_impl(x, index, v, unique, out)
    parsed, arrays = parse_index(index, np.shape(x))
    return add_at(x, v, *arrays, index=shifted(parsed, 1), unique=unique)


register_helper("_add_at", _add_at_impl, _traceable_add_at)
