"""Boxes: traced values, and what Python does with them.

A Box holds a concrete value and the Node that made it (a Handle, a traced object that is
not an array: a random generator). Values are computed eagerly while tracing (they give
shapes and dtypes, and the tape needs them), but Nodes keep no values, so dropping the
Trace frees every array. Shape queries answer with the value's; Python's operators are
NumPy's ufuncs; reading a Box as a Python object (bool, int, float, `.item()`) reads the
value now and records a guard that it reads the same next time; converting it to a plain
array is refused. NumPy's own protocols (`__array_ufunc__`, `__array_function__`) are set
on Box by dispatch.py, which holds the tables they route by.

Contract: this module records nothing itself but guards (through the current recording,
context.current_trace); it knows no primitive and no rule. Upstream: graph, context,
raising.
"""

import dis
import operator
import os
import sys

import numpy as np

from ..errors import TracingError, UnsupportedAttributeError, at, is_internal, user_frame
from ..graph import Node
from . import raising
from .context import current_trace, located, user_loc, user_stack

COUNT_READS = []  # [hook(trace, box) -> int or None]: count_sources.read_count, for int()
SIZE_READS = []  # [hook(trace, shape, box)]: count_sources.mark_read, for a shape the user reads
EXIT_READS = []  # [hook(outcome) -> outcome]: exits.py, a loop's test said stop earlier
CONVERSION_HINTS = []  # hook() -> (loc, message) or None, when np.asarray refuses a Box (rules/scipy)
READ_HINTS = []  # hook(box, what) -> message or None, when a read or conversion is refused
# (list_arguments.py: a list of traced values NumPy converts item by item)
STAND_INS = {}  # type -> stand_in(obj): an array object the rules trace as something else
# (numpy_api.building: a fresh constant a traced index wrote into is its Box), so that a
# handler never reads its memory as a constant
NUMBERS = (int, float, bool)  # Python numbers: their operators give what Python gives
HANDLE_METHODS = {}  # (type of the value, method name) -> handler(handle, *args, **kwargs)


def result_dtype(value):
    dtype = getattr(value, "dtype", None)
    if dtype is None and type(value) in (list, tuple):  # a constant (w * W.tolist())
        return np.asarray(value).dtype  # (np.result_type would read it as a dtype spec)
    return dtype if dtype is not None else np.result_type(value)


def stand_in(value):
    """`value` as the handlers see it (STAND_INS), a list or tuple's items included."""
    kind = type(value)
    if kind in STAND_INS:
        return STAND_INS[kind](value)
    if (kind is tuple or kind is list) and any(type(v) in STAND_INS for v in value):
        return kind(map(stand_in, value))
    return value


def _holds_box(value):
    kind = type(value)
    if kind is Box:
        return True
    if kind in STAND_INS:  # a new constant a traced index wrote into (STAND_INS)
        return type(STAND_INS[kind](value)) is Box
    if kind is tuple or kind is list:
        return any(map(_holds_box, value))
    return kind is slice and _holds_box((value.start, value.stop, value.step))


def concrete(value):
    """A parameter with traced numbers in it (np.sum(x, axis=k), x.reshape(k, -1), x[:k]
    with k an int argument) read as Python numbers, each read a guard the code checks: a
    parameter is written into the code as a literal, never as a traced value."""
    kind = type(value)
    if kind is Box:
        v = value.value
        if isinstance(v, (bool, np.bool_)):
            return bool(value)
        if isinstance(v, (int, np.integer)):
            return operator.index(value)
        if isinstance(v, (float, np.floating)):
            return float(value)
        return value
    if kind is tuple or kind is list:
        return kind(map(concrete, value)) if _holds_box(value) else value
    if kind is slice and _holds_box(value):
        return slice(concrete(value.start), concrete(value.stop), concrete(value.step))
    return value


def _refuse(what, hint, convert=None):
    def method(self, *args, **kwargs):
        trace = current_trace()
        if convert is not None and trace is not None and trace.capture is not None \
                and self.node.trace_id == trace.id and self.node.params.get("read"):
            # a global, closure or attribute the trace read (capture.py): its value,
            # checked by identity as it was before values read from outside were inputs
            return convert(trace.capture.baked(self), *args, **kwargs)
        for library in CONVERSION_HINTS:  # a library's function converting it: name that
            found = library()
            if found is not None:
                raise TracingError(at(*found))
        raise TracingError(at(user_loc(), _hinted(self, what) or
                              f"{what} of a traced value: {hint}"))
    return method


def _hinted(box, what):
    """What a READ_HINTS hook says of this refusal, if one knows better."""
    return next(filter(None, (hook(box, what) for hook in READ_HINTS)), None)


def _current(box, what):
    """The trace that recorded `box`, which must be the one running."""
    trace = current_trace()
    if trace is None or box.node.trace_id != trace.id:
        raise TracingError(at(user_loc(), f"{what} of a value traced by another (enclosing or "
                              "finished) transformation, probably reached through a closure "
                              "or a global; pass it to the function as an argument instead"))
    return trace


def carries_gradient(trace, node):
    """Whether a derivative taken by this trace flows into `node` (so reading its value
    as a Python number would cut that derivative off)."""
    seen, stack = set(), [node]
    while stack:
        node = stack.pop()
        if node in seen or not np.issubdtype(node.dtype, np.inexact):
            continue
        seen.add(node)
        if node in trace.wrt:
            return True
        if node.prim is not None and node.prim.name != "stop_gradient":
            stack.extend(a for i, a in enumerate(node.args)
                         if type(a) is Node and node.prim.vjp(i) is not None)
    return False


def reader(test, convert, differentiable=False):
    """A method that reads a traced value as a Python object, guarded on the result."""
    label = ".item()" if test == "item" else f"{test}()"

    def method(self, *args):
        trace = _current(self, label)
        if differentiable and carries_gradient(trace, self.node):
            raise TracingError(at(user_loc(), _hinted(self, label) or
                                  f"{label} of a traced value that depends on a "
                                  "differentiated argument: the Python number it returns would "
                                  "carry no derivative, so the gradient would silently be "
                                  "wrong. Keep it an array (np.maximum(x, 0), or max(x, 0) on "
                                  "the traced value, instead of max(0, float(x))), or wrap it "
                                  "in autodiffgen.stop_gradient(...) if no derivative should "
                                  "flow through it"))
        counted = COUNT_READS[0](trace, self) if COUNT_READS and test in ("int", "index") \
            else None
        if counted is not None:  # int(np.count_nonzero(mask)): a mask's count
            return counted
        try:
            outcome = convert(self.value, *args)
        except Exception as error:  # NumPy's own message, plus where the user wrote it
            if trace.grad_of is None and raising.mark(trace, user_stack()):
                trace.guard(self, test, raising.Raised(type(error)), args)  # a branch
            relocated = located(error, f"{label} of a traced value at")
            if relocated is error:
                raise
            raise relocated from error
        if test == "bool" and EXIT_READS:
            outcome = EXIT_READS[0](outcome)
        trace.guard(self, test, outcome, args)
        return outcome
    return method


class Box:
    """A traced value. Shape queries are concrete; everything else is recorded (NumPy's
    calls through `__array_ufunc__` and `__array_function__`, which dispatch.py sets)."""

    __slots__ = ("__weakref__", "node", "value")  # weakref: rules.numpy_api.views registry
    __array_priority__ = 1000.0
    __hash__ = None  # like ndarray: == is elementwise

    def __init__(self, value, node):
        self.value = value
        self.node = node

    # isinstance(x, np.ndarray) (or float) answers for the value, as it would untraced
    __class__ = property(lambda self: type(self.value))
    shape = property(lambda self: _sized(self, np.shape(self.value)))
    ndim = property(lambda self: np.ndim(self.value))
    size = property(lambda self: _sized(self, np.size(self.value)))
    dtype = property(lambda self: result_dtype(self.value))
    T = property(lambda self: np.transpose(self))
    mT = property(lambda self: np.swapaxes(self, -1, -2))

    def __len__(self):
        if np.ndim(self.value) == 0:
            raise TypeError(at(user_loc(), "len() of a 0-d traced value"))
        return _sized(self, np.shape(self.value)[0])

    def __iter__(self):
        _sized(self, None, user=True)
        return (self[i] for i in range(np.shape(self.value)[0]))

    def __repr__(self):
        return f"Box({self.value!r})"

    def __getattr__(self, name):  # reached only for attributes Box does not have
        if name.startswith("__"):
            raise AttributeError(name)
        raise UnsupportedAttributeError(at(user_loc(), f"the ndarray attribute or method "
                                           f".{name} is not supported on traced values; "
                                           "use the np. function, or compute it outside "
                                           "the differentiated function"))

    # data-dependent Python: the value read now, and a guard that it is the same next time
    __bool__ = reader("bool", bool)
    __float__ = reader("float", float, differentiable=True)
    __complex__ = reader("complex", complex, differentiable=True)
    __int__ = reader("int", int)
    __index__ = reader("index", operator.index)
    item = reader("item", lambda value, *i: np.asarray(value).item(*i), differentiable=True)
    tolist = _refuse(".tolist()", "it would turn every element into a Python number with "
                     "no derivative; use the array itself, or index it (x[i])",
                     lambda value: np.asarray(value).tolist())
    _refuse_array = _refuse(
        "conversion to a plain NumPy array",
        "the tracer cannot follow it. NumPy converts a traced value so when it indexes a "
        "plain array (c[traced]: index a traced array, or np.eye(k)[traced]) or meets a "
        "NumPy function with no rule; np.array([...]) and np.asarray(...) of traced values "
        "are traced",
        lambda value, dtype=None, copy=None: np.asarray(value, dtype))

    def __array__(self, dtype=None, copy=None):
        """A Python-number argument NumPy converts (np.arange(k), np.full(3, s)): read,
        and guarded. Any other traced value cannot be followed into a plain array."""
        if type(self.value) in NUMBERS:
            return np.asarray(concrete(self), dtype=dtype)
        _refuse_store()
        return self._refuse_array(dtype)


_STORES = {dis.opmap[name] for name in ("STORE_SUBSCR", "STORE_SLICE") if name in dis.opmap}
# `a[i] = v`, and `a[1:] = v` (its own opcode from Python 3.12)


_STORE_MESSAGE = ("a traced value written into a NumPy array whose writes cannot be "
                  "followed: one the function did not make with np.zeros, np.ones, np.empty "
                  "or np.full (an argument's, a global's, np.array([...])), or one a view "
                  "was taken of before the write (the view would not see it). Write into an "
                  "array made with np.zeros(...) (or np.zeros_like(x)) in the function, "
                  "before taking views of it, or build the result with np.where, np.stack "
                  "or np.concatenate")


def _refuse_store():
    """Raise if the user's line is at `a[i] = v` (NumPy converting v for a plain array)."""
    frame = user_frame(2)
    if frame is not None and frame.f_code.co_code[frame.f_lasti] in _STORES:
        raise TracingError(at(user_loc(), _STORE_MESSAGE))


def stored_scalar(error):
    """NumPy's own ValueError for `out[i] = traced` with a 0-d traced value (it takes the
    value for a sequence, asking it nothing): as the TracingError above, or None."""
    if not str(error).startswith("setting an array element with a sequence"):
        return None
    tb, last = error.__traceback__, None
    while tb is not None:
        if not is_internal(tb.tb_frame.f_code.co_filename):
            last = tb
        tb = tb.tb_next
    if last is None or last.tb_frame.f_code.co_code[last.tb_lasti] not in _STORES:
        return None
    return TracingError(at((last.tb_frame.f_code.co_filename, last.tb_lineno), _STORE_MESSAGE))


class Handle:
    """A traced object that is not an array (a random generator): its node is an input or
    the primitive that made it; the rules give its methods (HANDLE_METHODS), which record."""

    __slots__ = ("node", "value")
    __class__ = property(lambda self: type(self.value))  # isinstance answers for the value

    def __init__(self, value, node):
        self.value = value
        self.node = node

    def __getattr__(self, name):
        method = HANDLE_METHODS.get((type(self.value), name))
        if method is None:
            raise UnsupportedAttributeError(at(user_loc(), f"{type(self.value).__name__}."
                                               f"{name} is not supported on a traced "
                                               f"{type(self.value).__name__}"))
        return lambda *args, **kwargs: method(self, *args, **kwargs)

    def __repr__(self):
        return f"Handle({self.value!r})"


def _sized(box, size, user=False):
    """`size`, read from a traced value's shape. Once a mask's count is traced
    (generalize/counts.py), a size the user's Python reads may be that count deciding control flow, which no
    formula shows: the shape read is handed to count_sources.mark_read (only a cost: where
    it moves with a count, more counts are tried, and counts 0 and 1 trace their own code)."""
    trace = current_trace()
    if getattr(trace, "count_guards", None) and (user or _read_by_user()):
        for hook in SIZE_READS:
            hook(trace, np.shape(box.value), box)
    return size


def _read_by_user():
    frame = sys._getframe(3)  # past _sized and the property or __len__
    while frame is not None and frame.f_code.co_filename.startswith(_NUMPY_DIR):
        frame = frame.f_back  # np.shape(x[m]) in the user's code reads it too
    return frame is not None and not is_internal(frame.f_code.co_filename)


_NUMPY_DIR = os.path.dirname(os.path.abspath(np.__file__))


def _number(x):
    """x's value if x is a Python number (or the trace of one), else None. Python operators
    on two of them give what Python gives (`k / 2` a float, `k // 2` an int, `lr * 2` a
    float that stays weak beside a float32 array), as in the generated code, which applies
    the same operators to the same Python numbers."""
    if type(x) in NUMBERS:
        return x
    if type(x) is Box and type(x.value) in NUMBERS:
        return x.value
    return None


def _python(out, python, *operands):
    if type(out) is Box:
        values = [_number(x) for x in operands]
        if None not in values:
            out.value = python(*values)
            out.node.python_number = True
    return out


def _ufunc_operator(ufunc, python, reflected=False):
    if reflected:
        return lambda self, other: _python(ufunc(other, self), python, other, self)
    return lambda self, other: _python(ufunc(self, other), python, self, other)


def _unary_operator(ufunc, python):
    return lambda self: _python(ufunc(self), python, self)


for _name, _ufunc in [("add", np.add), ("sub", np.subtract), ("mul", np.multiply),
                      ("truediv", np.true_divide), ("floordiv", np.floor_divide),
                      ("mod", np.remainder), ("pow", np.power), ("matmul", np.matmul),
                      ("and", np.bitwise_and), ("or", np.bitwise_or)]:
    _op = getattr(operator, _name + "_" if _name in ("and", "or") else _name)
    setattr(Box, f"__{_name}__", _ufunc_operator(_ufunc, _op))
    setattr(Box, f"__r{_name}__", _ufunc_operator(_ufunc, _op, reflected=True))
for _name, _ufunc in [("lt", np.less), ("le", np.less_equal), ("gt", np.greater),
                      ("ge", np.greater_equal)]:
    setattr(Box, f"__{_name}__", _ufunc_operator(_ufunc, getattr(operator, _name)))


def _equality(ufunc, python):
    """== and != of a traced Python number with a string or None (`ord == "fro"` in
    np.linalg.norm, a default read as an input) is Python's: decided by the types alone."""
    operate = _ufunc_operator(ufunc, python)

    def compare(self, other):
        if (other is None or type(other) is str) and type(self.value) in NUMBERS:
            return NotImplemented
        return operate(self, other)
    return compare


Box.__eq__ = _equality(np.equal, operator.eq)
Box.__ne__ = _equality(np.not_equal, operator.ne)
Box.__neg__ = _unary_operator(np.negative, operator.neg)
Box.__pos__ = _unary_operator(np.positive, operator.pos)  # a new array, as in NumPy (+x)
Box.__abs__ = _unary_operator(np.absolute, operator.abs)
Box.__invert__ = lambda self: np.invert(self)

