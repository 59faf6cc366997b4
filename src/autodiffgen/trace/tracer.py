"""Run the user's function once on Boxes and record every primitive it applies.

A Box holds a concrete value and the Node that made it. Boxes reach the rules through
Python operators and NumPy's `__array_ufunc__` / `__array_function__` protocols only: the
tracer knows nothing else about NumPy. The tables below map NumPy callables to handlers;
the rules package fills them in.

Values are computed eagerly while tracing (they give shapes and dtypes, and the tape
needs them), but Nodes keep no values, so dropping the Trace frees every array.
"""

import contextlib
import dis
import itertools
import linecache
import operator
import os
import sys
import threading

import numpy as np

from .. import errors
from ..errors import (
    ArgumentError,
    OutputError,
    TracingError,
    UnsupportedAttributeError,
    UnsupportedOperationError,
    at,
    def_site,
    function_name,
    is_internal,
    user_frame,
)
from ..graph import Node
from ..tree import is_container, items, leaves, map_tree, rebuild
from . import argument_writes, naming, raising
from .capture import Capture
from .record import user_code

UFUNCS = {}  # np.ufunc -> Primitive, for ufunc(...) calls
UFUNC_METHODS = {}  # (np.ufunc, method name) -> handler(*inputs, **kwargs)
FUNCTIONS = {}  # NumPy function -> handler(*args, **kwargs)
RESULT_HOOKS = []  # hook(trace, box, args) on every recorded result (rules.numpy_api.views)
INPUT_HOOKS = []  # hook(trace, box) on every new input (rules.numpy_api.views: aliasing)
GUARD = []  # [the guard Primitive], filled in by the rules package
INPUT_KINDS = {}  # argument type -> handler(trace, value, name, path): a non-array input
TRACE_HOOKS = []  # hook(trace) -> a context manager around the user's call (numpy_api.random)
ENTER_HOOKS = []  # (enter(), leave()) as a recording becomes, and stops being, the current
# one, derivative rules included (numpy_api.building: NumPy's callables wrapped meanwhile)
GUARD_HOOKS = []  # hook(trace, box) before a guard is recorded (numpy_api.random: none on a draw)
CONVERSION_HINTS = []  # hook() -> (loc, message) or None, when np.asarray refuses a Box (rules/scipy)
RAISES = {}  # primitive name -> what it raises on some values (rules/control.py)
UFUNC_MISSES = []  # hook(ufunc) -> whether it registered rules that may serve it (SciPy's)
COUNT_READS = []  # [hook(trace, box) -> int or None]: count_sources.read_count, for int()
STAND_INS = {}  # type -> stand_in(obj): an array object the rules trace as something else
# (numpy_api.building: a fresh constant a traced index wrote into is its Box), so that a
# handler never reads its memory as a constant

_state = threading.local()
_trace_ids = itertools.count(1)
GENERATED_LOCS = {}  # generated code's filename -> {line: the user's (file, line)}


def current_trace():
    return getattr(_state, "trace", None)


def _note_refusal(error):
    trace = current_trace()
    if trace is not None:
        trace.refused.append(error)


errors.RAISED.append(_note_refusal)


class Trace:
    """One recording: the node counter, the boxes made so far, and the backward context."""

    def __init__(self):
        self.id = next(_trace_ids)
        self.next_id = 0
        self.boxes = {}  # Node -> Box, so the backward pass can see forward values
        self.grad_of = None  # set while a derivative rule runs: the forward Node
        self.inputs = []
        self.wrt = set()  # input nodes that derivatives are taken with respect to
        self.guards = []  # guard nodes: what the traced path assumed of the values
        self.captured = []  # capture.Check: what it read that the code checks (guards)
        self.capture = None  # capture.Capture: what it read outside its arguments
        self.effects = []  # nodes kept although no output reads them (random draws)
        self.eager = False  # the tape: values are the user's (draws advance their generator)
        self.fun = None  # the user's function being traced
        self.refused = []  # errors.Refusal raised while it ran (the function may catch them)
        self.errstate = np.geterr()  # np.errstate(...) in the function differs (raising.py)
        self.marks = {}  # user stack -> raising.Mark: statements in a `try:` or an errstate
        self.tried = []  # forward nodes marked so: kept although no output reads them
        self.replaying = None  # batched.py: the node it batches (vmap), whose lines new nodes take
        self.writes = []  # (path, value): items the function assigned into argument containers
        self._outer = None

    def __enter__(self):
        self._outer = current_trace()
        _state.trace = self
        for enter, _ in ENTER_HOOKS:
            enter()
        return self

    def __exit__(self, *exc):
        for _, leave in ENTER_HOOKS:
            leave()
        _state.trace = self._outer
        return False

    @contextlib.contextmanager
    def suspended(self):
        """No trace current in this thread meanwhile: a module the traced function imports
        runs its top-level code as plain Python (scipy.special's draws a default_rng)."""
        _state.trace = self._outer
        try:
            yield
        finally:
            _state.trace = self

    def new_node(self, prim, args, params, value, stack=None):
        statements = None
        if self.grad_of is not None:
            stack, statements = self.grad_of.stack, self.grad_of.statements
        elif stack is None and self.replaying is not None:
            stack, statements = self.replaying.stack, self.replaying.statements
        elif stack is None:
            statements = []
            stack = user_stack(statements)
            statements = tuple(statements) if any(s is not None for s in statements) else None
        node = Node(self.next_id, prim, args, params, np.shape(value), result_dtype(value),
                    stack[0] if stack else None, stack, self.grad_of)
        node.statements = statements
        node.trace_id = self.id
        self.next_id += 1
        return node

    def new_input(self, value, name, path, **params):
        node = self.new_node(None, (), {"path": path, **params}, value, stack=())
        node.name = name
        if type(value) in _NUMBERS:
            node.python_number = True
        box = Box(value, node)
        self.boxes[node] = box
        self.inputs.append(node)
        for hook in INPUT_HOOKS:
            hook(self, box)
        return box

    def guard(self, box, test, outcome, index=(), more=()):
        """Record that the traced path depends on `test` of box's value (and `more`
        boxes') giving `outcome` (a branch taken, a number read): the generated code
        checks it before it runs."""
        for hook in GUARD_HOOKS:
            hook(self, box)
        params = {"test": test, "outcome": outcome, "index": tuple(index)}
        node = self.new_node(GUARD[0], (box.node, *[b.node for b in more]), params, True)
        self.guards.append(node)
        if self.grad_of is None:  # read in a `try:`: a raise at run time is a GuardFailure
            raising.mark(self, node.stack)

    def raised(self, prim, args, params, error, stack=None):
        """Record that applying prim to these values raised `error` (which the user's code
        may catch, `except LinAlgError:`): the generated code checks it still does (under
        the np.errstate the call ran in, raising.py)."""
        params = {"test": "raises", "outcome": type(error).__name__, "index": (),
                  "call": prim, "call_params": params, "error": type(error),
                  "errstate": raising.errstate_diff(self.errstate)}
        args = tuple(a.node if type(a) is Box else a for a in args)
        self.guards.append(self.new_node(GUARD[0], args, params, True, stack))

    def box(self, prim, args, params, value):
        node = self.new_node(prim, tuple(a.node if type(a) is Box else a for a in args),
                             params, value)
        box = Box(value, node)
        self.boxes[node] = box
        return box


def result_dtype(value):
    dtype = getattr(value, "dtype", None)
    if dtype is None and type(value) in (list, tuple):  # a constant (w * W.tolist())
        return np.asarray(value).dtype  # (np.result_type would read it as a dtype spec)
    return dtype if dtype is not None else np.result_type(value)


def user_stack(statements=None):
    """(filename, lineno) of the user's frames, innermost first, up to the traced call.
    A list `statements` gets, per frame, which statement of its line the frame is in when
    the line holds several (naming.statement_of), so `a = f(x); b = g(x)` names apart."""
    frame = sys._getframe(2)
    stack = []
    while frame is not None:
        filename = frame.f_code.co_filename
        generated = GENERATED_LOCS.get(filename)
        loc = None
        if generated is not None:  # tracing generated code: the user's line it came from
            loc = generated.get(frame.f_lineno)
            user = None  # the generated line's columns are not the user's
        elif is_internal(filename):
            if stack:
                break
        else:
            loc, user = (filename, frame.f_lineno), frame
        if loc is not None:
            stack.append(loc)
            if statements is not None:
                statements.append(naming.statement_of(loc, user))
        frame = frame.f_back
    return tuple(stack)


def user_loc():
    stack = user_stack()
    return stack[0] if stack else ("<unknown>", 0)


def stand_in(value):
    """`value` as the handlers see it (STAND_INS), a list or tuple's items included."""
    kind = type(value)
    if kind in STAND_INS:
        return STAND_INS[kind](value)
    if (kind is tuple or kind is list) and any(type(v) in STAND_INS for v in value):
        return kind(map(stand_in, value))
    return value


def bind(prim, args, params):
    """Apply a primitive: plain values in, plain value out; any Box in, a Box out."""
    args = tuple(map(stand_in, args))
    if params and any(_holds_box(v) for v in params.values()):
        params = {k: concrete(v) for k, v in params.items()}
    if not any(type(a) is Box for a in args):
        return prim.impl(*args, **params)
    trace = current_trace()
    if trace is None:
        raise TracingError(at(user_loc(), "a traced value was used after its trace ended "
                              "(was it stored in a global or returned inside a closure?)"))
    for a in args:
        if type(a) is Box and a.node.trace_id != trace.id:
            raise TracingError(at(user_loc(), "a value traced by an enclosing transformation "
                                  "(e.g. the outer grad of grad(grad(f))) reached the function "
                                  "an inner one is tracing" + (
                                      ": the tape (autodiffgen.tape) does not nest inside "
                                      "another transformation; use autodiffgen's grad, jvp "
                                      "or vjp for the inner one" if trace.eager else
                                      " by a path autodiffgen does not follow (a closure, "
                                      "global or attribute is followed; a large container or "
                                      "an object it does not see through is not). Pass it to "
                                      "the inner function as an argument instead")))
    try:
        value = prim.impl(*[a.value if type(a) is Box else a for a in args], **params)
    except Exception as error:  # NumPy's own message, plus where the user wrote it
        stack = user_stack() if trace.grad_of is None else ()
        if isinstance(error, RAISES.get(prim.name, ())) or raising.mark(trace, stack):
            trace.raised(prim, args, params, error, stack or None)  # from the values: a branch
        relocated = located(error, f"in {prim.name}, called at")
        if relocated is error:  # (3.11+, a note) dropped first: the traceback holds this
            del relocated       # frame, a cycle that would keep the failed trace's nodes
            raise               # until a collection (generalize's retraces fail)
        try:
            raise relocated from error
        finally:  # (3.10, a new exception) the same cycle through this local
            del relocated
    if prim.simplify is not None:
        same = prim.simplify(args, params, value)
        if same is not None:
            return same
    box = trace.box(prim, args, params, value)
    if trace.grad_of is None and prim.name not in RAISES and \
            raising.mark(trace, box.node.stack):  # in a `try:` or an np.errstate
        trace.tried.append(box.node)
    for hook in RESULT_HOOKS:
        hook(trace, box, args)
    return box


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


def _int_box(x):
    return type(x) is Box and type(x.value) is int


def shape_like(x, bare=False):
    """An argument of a NumPy function or ndarray method as its handler should see it: a
    tuple or list holding traced Python ints (a shape (k, -1), axes) read as Python ints,
    guarded (so is a bare one if `bare`: x.reshape(k, -1), np.roll(x, k)). Traced ints
    in Python arithmetic and ufuncs (k * x, np.maximum(x, k)) stay inputs."""
    if bare and _int_box(x):
        return concrete(x)
    if (type(x) is tuple or type(x) is list) and any(map(_int_box, x)):
        return concrete(x)
    return x


def shape_args(args, kwargs, bare=False):
    return ([shape_like(a, bare) for a in args],
            {k: shape_like(v, bare) for k, v in kwargs.items()})


def located(error, what):
    """`error` with the user's line added: as a note (Python 3.11+), else as the same
    exception type with the line in its message (when that type can be made so)."""
    note = f"(autodiffgen: {what} {at(user_loc(), '').rstrip(': ')})"
    if hasattr(error, "add_note"):
        error.add_note(note)
        return error
    try:
        return type(error)(f"{error} {note}")
    except Exception:  # noqa: BLE001  an exception type with other arguments: keep it
        return error


def source_line(loc):
    return linecache.getline(loc[0], loc[1]).strip() if loc else ""


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
        raise TracingError(at(user_loc(), f"{what} of a traced value: {hint}"))
    return method


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
            raise TracingError(at(user_loc(), f"{label} of a traced value that depends on a "
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
        trace.guard(self, test, outcome, args)
        return outcome
    return method


class Box:
    """A traced value. Shape queries are concrete; everything else is recorded."""

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
        if type(self.value) in _NUMBERS:
            return np.asarray(concrete(self), dtype=dtype)
        _refuse_store()
        return self._refuse_array(dtype)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        inputs = tuple(map(stand_in, inputs))
        if kwargs.get("out") is not None or any(type(a) is Box for a in kwargs.get("out", ())):
            raise TracingError(at(user_loc(), f"in-place np.{ufunc.__name__}(..., out=...) "
                                  "with a traced value: write `y = x + v`, not `x += v`, "
                                  "when x is a NumPy array and v is traced"))
        prim = UFUNCS.get(ufunc) if method == "__call__" else None
        if prim is None and method == "__call__" and any(hook(ufunc) for hook in UFUNC_MISSES):
            prim = UFUNCS.get(ufunc)
        if prim is not None and not kwargs:
            return bind(prim, inputs, {})
        if prim is not None:
            raise UnsupportedOperationError(at(user_loc(), f"np.{ufunc.__name__} with "
                                               f"keyword arguments {sorted(kwargs)} is "
                                               "not supported on traced values"))
        handler = UFUNC_METHODS.get((ufunc, method))  # a method, or a composed ufunc
        if handler is not None:
            return handler(*inputs, **kwargs)
        if _numbers_only(inputs):  # no rule, and no array traced: read them, guarded
            return getattr(ufunc, method)(*map(concrete, inputs), **kwargs)
        name = ufunc_name(ufunc) + ("" if method == "__call__" else f".{method}")
        raise UnsupportedOperationError(at(user_loc(), unsupported_message(name)))

    def __array_function__(self, func, types, args, kwargs):
        args, kwargs = tuple(map(stand_in, args)), {k: stand_in(v) for k, v in kwargs.items()}
        handler = FUNCTIONS.get(func)
        if handler is None and _numbers_only(args + tuple(kwargs.values())):
            return func(*map(concrete, args), **{k: concrete(v) for k, v in kwargs.items()})
        if handler is None:
            module = getattr(func, "__module__", "numpy") or "numpy"
            name = f"{module.replace('numpy', 'np', 1)}.{func.__name__}"
            raise UnsupportedOperationError(at(user_loc(), unsupported_message(name)))
        if args:  # after the data: a traced int is an axis, a shift, a count (guarded)
            rest, kwargs = shape_args(args[1:], kwargs, bare=True)
            args = (shape_like(args[0]), *rest)
        return handler(*args, **kwargs)


_STORES = {dis.opmap[name] for name in ("STORE_SUBSCR", "STORE_SLICE") if name in dis.opmap}
# `a[i] = v`, and `a[1:] = v` (its own opcode from Python 3.12)


_STORE_MESSAGE = ("a traced value written into a plain NumPy array (out = np.zeros(n); "
                  "out[i] = traced): the write cannot be followed. Start from a traced array, "
                  "out = np.zeros_like(x) of a traced x, or build the result with np.where, "
                  "np.stack or np.concatenate")


def _refuse_store():
    """Raise if the user's line is at `a[i] = v` (NumPy converting v for a plain array)."""
    frame = user_frame(2)
    if frame is not None and frame.f_code.co_code[frame.f_lasti] in _STORES:
        raise TracingError(at(user_loc(), _STORE_MESSAGE))


def _stored_scalar(error):
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


HANDLE_METHODS = {}  # (type of the value, method name) -> handler(handle, *args, **kwargs)
def _numbers_only(args):
    """Whether the traced values among `args` (and in lists or tuples there) are all Python
    numbers from the arguments: a NumPy function without a rule (np.copysign(1.0, s)) then
    reads them as Python numbers, each a guard the generated code checks."""
    boxes = [a for a in args if type(a) is Box] + [
        b for a in args if type(a) in (tuple, list) for b in a if type(b) is Box]
    return bool(boxes) and all(type(b.value) in _NUMBERS for b in boxes)


def _sized(box, size, user=False):
    """`size`, read from a traced value's shape. Once a mask's count is traced
    (generalize_counts.py),
    a size the user's Python reads may be that count deciding control flow, which no
    formula shows: the count guards of the trace are marked so (only a cost: more counts
    are tried, and counts 0 and 1 trace their own code)."""
    guards = getattr(current_trace(), "count_guards", None)
    if guards and (user or _read_by_user()):
        for guard in guards:
            guard.params["read"] = True
    return size


def _read_by_user():
    frame = sys._getframe(3)  # past _sized and the property or __len__
    while frame is not None and frame.f_code.co_filename.startswith(_NUMPY_DIR):
        frame = frame.f_back  # np.shape(x[m]) in the user's code reads it too
    return frame is not None and not is_internal(frame.f_code.co_filename)


_NUMPY_DIR = os.path.dirname(os.path.abspath(np.__file__))


def ufunc_name(ufunc):
    """`np.exp`, `scipy.special.jv`: the ufunc as the user wrote it."""
    name = ufunc.__name__
    if getattr(np, name, None) is ufunc:
        return f"np.{name}"
    special = sys.modules.get("scipy.special")
    return f"scipy.special.{name}" if getattr(special, name, None) is ufunc else name


def unsupported_message(name):
    return (f"{name} has no derivative rule in autodiffgen, so it cannot be applied to a "
            "traced value. If it does not depend on the differentiated inputs, compute it "
            "outside the function or on a non-traced value; otherwise register it with "
            "autodiffgen.rules.defprimitive(...) (see README, 'Adding a rule')")


_NUMBERS = (int, float, bool)


def _number(x):
    """x's value if x is a Python number (or the trace of one), else None. Python operators
    on two of them give what Python gives (`k / 2` a float, `k // 2` an int, `lr * 2` a
    float that stays weak beside a float32 array), as in the generated code, which applies
    the same operators to the same Python numbers."""
    if type(x) in _NUMBERS:
        return x
    if type(x) is Box and type(x.value) in _NUMBERS:
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
        if (other is None or type(other) is str) and type(self.value) in _NUMBERS:
            return NotImplemented
        return operate(self, other)
    return compare


Box.__eq__ = _equality(np.equal, operator.eq)
Box.__ne__ = _equality(np.not_equal, operator.ne)
Box.__neg__ = _unary_operator(np.negative, operator.neg)
Box.__pos__ = _unary_operator(np.positive, operator.pos)  # a new array, as in NumPy (+x)
Box.__abs__ = _unary_operator(np.absolute, operator.abs)
Box.__invert__ = lambda self: np.invert(self)


# ---- tracing a call ---------------------------------------------------------------------
def trace(fun, args, argnums, names, diff=True, capture=True, eager=False, static=(),
          call=None):
    """Call `fun` on Boxes: every array argument, every Python float, and every Python int
    outside `argnums` becomes an input of the recording (a number that decides control
    flow or a shape is read through a guard), except for the argument indices in `static`,
    whose numbers are constants; with `capture`, so does every array and float it reads
    from globals, closures and objects (capture.py). Returns the Trace, the boxed
    arguments and the output.

    `diff` says how strict `argnums` is: True (grad) refuses integer leaves there;
    "auto" (jvp, vjp) leaves them alone, so only the floating-point leaves get derivatives.
    `eager` (the tape): the recording's values are the ones the user gets. `call(run,
    boxed)` calls the function (as the trace sees it: `run`) on the boxed arguments when
    it takes not all of them (a training step: loss(params, *batch)).
    """
    recording = Trace()
    recording.eager = eager
    recording.fun = fun
    try:
        with recording, contextlib.ExitStack() as hooks:
            if capture:  # a standalone module keeps what it read as constants
                recording.capture = Capture(recording)
            for hook in TRACE_HOOKS:
                hooks.enter_context(hook(recording))
            boxed = [_box_tree(recording, a, (i,), names[i], diff if i in argnums else
                               None if i in static else False) for i, a in enumerate(args)]
            run = recording.capture.enter(fun) if capture else fun
            own = map_tree(boxed, _own_box)
            if capture:  # `self`, a config object, a partial: read through like a global
                own = map_tree(own, lambda x: x if type(x) in (Box, Handle) else
                               recording.capture.argument(x, fun))
                own = [recording.capture.pytree_argument(a) for a in own]
            recording.own = [b for b in leaves(own) if type(b) is Box]  # for count_sources.observe
            containers = argument_writes.snapshot(own)
            with user_code():  # the disk cache notes which functions run (cache/disk/record.py)
                try:
                    out = run(*own) if call is None else call(run, own)
                except ValueError as error:
                    stored = _stored_scalar(error)
                    if stored is None:
                        raise
                    raise stored from error
            out = map_tree(out, stand_in)
            if capture:
                recording.capture.finish(fun)
            recording.writes = [(path, map_tree(value, stand_in)) for path, value in
                                argument_writes.writes(containers, def_site(fun))]
    except BaseException as error:  # its capture's clones read it back: a cycle that would
        if recording.capture is not None:  # hold the failed trace's nodes until a collection
            recording.capture.trace = None
        if recording.refused and isinstance(error, Exception) and \
                not isinstance(error, errors.AutodiffgenError):  # a refusal NumPy turned
            raise recording.refused.pop(0) from error  # into its own (np.zeros(drawn k))
        raise
    if recording.refused:  # raised, and caught by the user's code: not eager's path
        first = recording.refused[0]
        raise TracingError(f"{first} [this error was raised while tracing "
                           f"{function_name(fun)} and caught by its own code (an `except` "
                           "around it): the trace would take a path eager NumPy does not. "
                           "Narrow the `except`, or keep the operation out of the `try`]"
                           ) from first
    if out is None:  # np.result_type(None) is float64: the gradient would be zeros
        raise OutputError(at(def_site(fun), f"{function_name(fun)} returned None: it has no "
                             "`return`, or a path through it ends without one; return the "
                             "value to differentiate"))
    if type(out) is Box and out.node.trace_id != recording.id:
        raise TracingError(at(user_loc(), "the function returned a value traced by an "
                              "enclosing transformation (through a closure); pass that value "
                              "to it as an argument instead"))
    return recording, boxed, out


raising.STOPS.add(trace.__code__)
raising.GENERATED = GENERATED_LOCS


def _own_box(x):
    """The user's function gets Boxes of its own: a write into an argument (x[i] = v,
    x += v) rebinds that Box, while `boxed` keeps the inputs derivatives are taken of."""
    return Box(x.value, x.node) if type(x) is Box else x


def box_inputs(recording, tree, path, name):
    """Make every array (and float) leaf of `tree` an input of the recording."""
    return _box_tree(recording, tree, path, name, "auto")


def unbox(tree):
    """The concrete values of a tree that may hold Boxes of an enclosing trace (a Python
    float stays an input of the inner trace: it becomes a 0-d NumPy float)."""
    return map_tree(tree, _unbox_leaf)


def _unbox_leaf(x):
    x = stand_in(x)
    if type(x) is Handle:
        return x.value
    if type(x) is not Box:
        return x
    if type(x.value) is complex:
        return np.complex128(x.value)
    return np.float64(x.value) if type(x.value) is float else x.value


def is_number_input(x, diff):
    """Whether a Python number is an input of the generated code: a float or a complex
    always, an int outside grad's argnums (not a bool, and not past int64, which NumPy
    could not hold); under jvp and vjp ("auto") an int is an input with no tangent."""
    kind = type(x)
    if diff is None:  # a static argument (cache.entries: a number made static)
        return False
    return kind is float or kind is complex or \
        kind is int and diff in (False, "auto") and -2**63 <= x < 2**63


def _box_tree(recording, x, path, name, diff):
    x = stand_in(x)  # np.zeros(n) made in an enclosing trace: a plain array, or its Box
    kind = type(x)
    if (kind is int or kind is float or kind is complex) and is_number_input(x, diff):
        box = recording.new_input(x, name, path)
        if diff and kind is not int:  # an int under jvp or vjp ("auto"): an input, no tangent
            recording.wrt.add(box.node)
        return box
    if kind is np.ndarray or isinstance(x, np.generic):
        if diff is True and not np.issubdtype(result_dtype(x), np.inexact):
            raise _argument_error(
                f"argument {name!r} is under argnums but has dtype {result_dtype(x)}: only "
                "floating-point and complex arrays have gradients. Remove it from argnums "
                "or convert it with .astype(np.float64)")
        if result_dtype(x) == object:  # its arithmetic is on Python objects: no float
            raise _argument_error(  # dtype, so no derivative would reach it, silently
                f"argument {name!r} is an array of dtype object, which generated code does "
                "not support: convert it with .astype(np.float64)")
        box = recording.new_input(x, name, path)
        if diff:
            recording.wrt.add(box.node)
        return box
    if kind in INPUT_KINDS:
        return INPUT_KINDS[kind](recording, x, name, path)
    if isinstance(x, np.ndarray):
        raise _argument_error(f"argument {name!r} is a {kind.__name__}, an ndarray subclass; "
                              "pass np.asarray(...) of it")
    if diff is True and kind in (int, bool):
        raise _argument_error(
            f"argument {name!r} is under argnums but is a Python {kind.__name__} ({x!r}): "
            "only floats and floating-point arrays have gradients. Pass a float (e.g. 2.0) "
            "or remove it from argnums")
    if is_container(x):
        return rebuild(x, [_box_tree(recording, child, path + (key,), f"{name}_{key}", diff)
                           for key, child in items(x)])
    if diff is True and x is None and len(path) > 1:  # p = {"b": None}: failing where used
        keys = "".join(f"[{k!r}]" for k in path[1:])
        raise _argument_error(
            f"argument {name!r} (entry {keys} of argument {path[0]}) is under argnums but is "
            "None: every leaf of a differentiated argument must be a float or a "
            "floating-point array. Leave the entry out, or pass it in an argument outside "
            "argnums")
    if diff is True and len(path) == 1:  # None, a string: NumPy would fail on it, unnamed
        raise _argument_error(
            f"argument {name!r} is under argnums but is {_short(x)}, not a float or a "
            "floating-point array: pass one, or remove it from argnums" + (
                " (on a method, argnums count self as 0: @grad(argnums=1) differentiates "
                "the first argument after self)" if name == "self" else ""))
    return x


def _short(x):
    """None, 'a string', or 'a Model instance' (no memory address in messages)."""
    if x is None or type(x) in (str, bytes):
        return repr(x)
    return f"a {type(x).__name__} instance"


def _argument_error(message):
    return ArgumentError(at(user_loc(), message))
