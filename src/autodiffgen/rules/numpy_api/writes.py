"""Writes: `x[i] = v`, `x[mask] += v`, `h += v` and writes through views, done functionally.

NumPy arrays are mutable and shared; generated code is not. A write becomes the primitive
`setitem`, a copy of x with x[index] = v (emitted as `_setitem(x, np.s_[index], v)`), and
the Box the user holds is *rebound* to that copy: the object stays, its node and value
change. So every name bound to that Box sees the write, as every name bound to one ndarray
would (`z = y; z += v` changes y too), while the array behind the old node, perhaps the
caller's, is never written. Python runs `x[mask] += v` as `t = x[mask]; t += v;
x[mask] = t`, so it needs nothing of its own.

Aliasing follows NumPy's, read off the values computed while tracing (NumPy's own):
- A result that shares memory with a traced argument is a *view* of it. Views made by
  basic indexing (ints, slices, None, Ellipsis) are followed both ways: a write into the
  view is written back into its base (`x[1:3] *= 2`, `row = x[0]; row += 1`), and a
  write into a base refreshes its live views (`v = x[:2]; x[0] = 5` changes v).
- Other views (reshape, transpose, ravel, broadcast_to, ...) are refreshed when their
  base is written; a write into one is refused with an error, since it would have to be
  carried back through the operation that made the view.
- In-place operators on a NumPy scalar (x[0, 0] of a 2-d array) or a Python float rebind
  the name, as in NumPy: scalars are immutable.
- An argument that shares memory with another argument (f(x, x), f(x, x[0])) cannot be
  written into: NumPy would change both.
Views are held weakly, so a view the user dropped (`h[t - 1]` in a loop) costs nothing
when its base is written next.

This module holds the entry points (x[i] = v, the in-place operators, and the layout and
aliasing reads of generated code that writes: x.flags, x.strides, np.may_share_memory);
views.py the bookkeeping of which traced arrays look into which.
"""

import numpy as np

from ...errors import TracingError, at
from ...graph import Index
from ...trace.boxes import Box
from ...trace.context import current_trace, user_loc
from ..control import READS
from ..indexing import setitem, shifted
from ..registry import astype
from .dispatch import boxmethod, register_function
from .indexing import parse_index
from .views import write


# ---- what the user writes ------------------------------------------------------------------
@boxmethod("__setitem__")
def _assign(self, key, value):
    _check_mutable(self, "item assignment")
    index, arrays = parse_index(key)
    index = shifted(index, 1)
    if _writes_back(self, value, index, arrays):
        return
    if not isinstance(value, (Box, np.ndarray, np.generic, int, float, complex, bool)):
        value = np.asarray(value)  # a list of traced values is refused here, with a hint
    write(self, setitem(self, value, *arrays, index=index), assign=True)


def _writes_back(x, value, index, arrays):
    """`x[1:3] *= 2` ends with `x[1:3] = t`, where t is the view whose write already
    went into x: x holds exactly t there, so writing it again changes nothing."""
    node = x.node
    return (not arrays and type(value) is Box and node.prim is setitem
            and node.args[1] is value.node and node.params["index"] == index)


_INPLACE = {"__iadd__": np.add, "__isub__": np.subtract, "__imul__": np.multiply,
            "__itruediv__": np.true_divide, "__ifloordiv__": np.floor_divide,
            "__imod__": np.remainder, "__ipow__": np.power, "__imatmul__": np.matmul,
            "__iand__": np.bitwise_and, "__ior__": np.bitwise_or}


def _inplace(ufunc):
    """`h op= v`: NumPy's `ufunc(h, v, out=h)`, computed as a new value that h is rebound to."""
    def method(self, other):
        result = ufunc(self, other)
        if type(self.value) is not np.ndarray:  # immutable: the name is rebound, as in NumPy
            return result
        write(self, _as_output(self, result, ufunc))
        return self
    return method


for _name, _ufunc in _INPLACE.items():
    boxmethod(_name)(_inplace(_ufunc))


def _as_output(out, result, ufunc):
    """The result as NumPy's out=h would hold it: h's shape, cast to h's dtype."""
    if np.shape(result) != out.shape:
        raise ValueError(at(user_loc(), f"non-broadcastable output operand with shape "
                            f"{out.shape} doesn't match the broadcast shape "
                            f"{np.shape(result)} (in-place np.{ufunc.__name__})"))
    dtype = np.result_type(result.dtype)
    if dtype != out.dtype:
        if not np.can_cast(dtype, out.dtype, "same_kind"):
            raise TypeError(at(user_loc(), f"Cannot cast ufunc '{ufunc.__name__}' output "
                               f"from {dtype!r} to {out.dtype!r} with casting rule "
                               "'same_kind' (an in-place operator keeps its array's dtype)"))
        result = astype(result, out.dtype)
    layout = READS["layout"]
    if type(result) is Box and type(result.value) is np.ndarray \
            and layout(result.value) != layout(out.value):  # NumPy writes into h, keeping
        # its layout (a Fortran-ordered h stays so): written into a copy of h, likewise
        result = setitem(out, result, index=Index((Ellipsis,)))
    return result


def _check_mutable(box, what):
    if type(box.value) is not np.ndarray:
        raise TypeError(at(user_loc(), f"'{type(box.value).__name__}' object does not support "
                           f"{what} (indexing every axis with an integer gives a NumPy "
                           "scalar, a copy; index with x[i:i + 1] or x[..., i] for a view)"))


# ---- layout and aliasing, read by generated code that an enclosing trace runs --------------
def _flags(self):
    """x.flags of a traced value (generated code that writes checks its arguments' layout,
    and an enclosing trace runs that code): read, and a guard of the enclosing trace."""
    _current_trace_of(self).guard(self, "layout", READS["layout"](self.value))
    return self.value.flags


def _may_share_memory(a, b, max_work=None):
    """np.may_share_memory of traced values (the check of generated code that writes,
    run by an enclosing trace): read, and a guard of that trace."""
    boxes = [x for x in (a, b) if type(x) is Box]
    value = bool(np.may_share_memory(*[x.value if type(x) is Box else x for x in (a, b)]))
    if len(boxes) == 2:
        _current_trace_of(a).guard(a, "aliases", value, more=(b,))
    return value


def _current_trace_of(box):
    trace = current_trace()
    if trace is None or box.node.trace_id != trace.id:
        raise TracingError(at(user_loc(), "the memory layout of a value traced by another "
                              "transformation was read"))
    return trace


def _strides(self):
    """x.strides of a traced value (the layout check of generated code that writes, run by
    an enclosing trace): read, and a guard of the enclosing trace, as x.flags."""
    _current_trace_of(self).guard(self, "layout", READS["layout"](self.value))
    return self.value.strides


boxmethod("flags")(property(_flags))
boxmethod("strides")(property(_strides))
register_function(np.may_share_memory)(_may_share_memory)
