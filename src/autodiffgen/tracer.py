"""Run the user's function once on Boxes and record every primitive it applies.

A Box holds a concrete value and the Node that made it. Boxes reach the rules through
Python operators and NumPy's `__array_ufunc__` / `__array_function__` protocols only: the
tracer knows nothing else about NumPy. The tables below map NumPy callables to handlers;
the rules package fills them in.

Values are computed eagerly while tracing (they give shapes and dtypes, and the tape
needs them), but Nodes keep no values, so dropping the Trace frees every array.
"""

import itertools
import linecache
import operator
import sys
import threading

import numpy as np

from .capture import captured
from .diskdeps import user_code
from .errors import (
    ArgumentError,
    TracingError,
    UnsupportedAttributeError,
    UnsupportedOperationError,
    at,
    is_internal,
)
from .graph import Node
from .tree import is_container, items, map_tree, rebuild

UFUNCS = {}  # np.ufunc -> Primitive, for ufunc(...) calls
UFUNC_METHODS = {}  # (np.ufunc, method name) -> handler(*inputs, **kwargs)
FUNCTIONS = {}  # NumPy function -> handler(*args, **kwargs)
RESULT_HOOKS = []  # hook(trace, box, args) on every recorded result (rules.mutation: views)
GUARD = []  # [the guard Primitive], filled in by the rules package

_state = threading.local()
_trace_ids = itertools.count(1)
GENERATED_LOCS = {}  # generated code's filename -> {line: the user's (file, line)}


def current_trace():
    return getattr(_state, "trace", None)


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
        self.captured = []  # capture.Captured: globals and closure values it read
        self._outer = None

    def __enter__(self):
        self._outer = current_trace()
        _state.trace = self
        return self

    def __exit__(self, *exc):
        _state.trace = self._outer
        return False

    def new_node(self, prim, args, params, value, stack=None):
        if self.grad_of is not None:
            stack = self.grad_of.stack
        elif stack is None:
            stack = user_stack()
        node = Node(self.next_id, prim, args, params, np.shape(value), result_dtype(value),
                    stack[0] if stack else None, stack, self.grad_of)
        node.trace_id = self.id
        self.next_id += 1
        return node

    def new_input(self, value, name, path):
        node = self.new_node(None, (), {"path": path, "pyfloat": type(value) is float}, value,
                             stack=())
        node.name = name
        box = Box(value, node)
        self.boxes[node] = box
        self.inputs.append(node)
        return box

    def guard(self, box, test, outcome, index=()):
        """Record that the traced path depends on `test` of box's value giving `outcome`
        (a branch taken, a number read): the generated code checks it before it runs."""
        params = {"test": test, "outcome": outcome, "index": tuple(index)}
        node = self.new_node(GUARD[0], (box.node,), params, True)
        self.guards.append(node)

    def box(self, prim, args, params, value):
        node = self.new_node(prim, tuple(a.node if type(a) is Box else a for a in args),
                             params, value)
        box = Box(value, node)
        self.boxes[node] = box
        return box


def result_dtype(value):
    dtype = getattr(value, "dtype", None)
    return dtype if dtype is not None else np.result_type(value)


def user_stack():
    """(filename, lineno) of the user's frames, innermost first, up to the traced call."""
    frame = sys._getframe(2)
    stack = []
    while frame is not None:
        filename = frame.f_code.co_filename
        generated = GENERATED_LOCS.get(filename)
        if generated is not None:  # tracing generated code: the user's line it came from
            loc = generated.get(frame.f_lineno)
            if loc is not None:
                stack.append(loc)
        elif is_internal(filename):
            if stack:
                break
        else:
            stack.append((filename, frame.f_lineno))
        frame = frame.f_back
    return tuple(stack)


def user_loc():
    stack = user_stack()
    return stack[0] if stack else ("<unknown>", 0)


def bind(prim, args, params):
    """Apply a primitive: plain values in, plain value out; any Box in, a Box out."""
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
                                  "an inner one is tracing, probably through a closure. Pass "
                                  "it to the inner function as an argument instead"))
    try:
        value = prim.impl(*[a.value if type(a) is Box else a for a in args], **params)
    except Exception as error:  # NumPy's own message, plus where the user wrote it
        relocated = located(error, f"in {prim.name}, called at")
        if relocated is error:
            raise
        raise relocated from error
    if prim.simplify is not None:
        same = prim.simplify(args, params, value)
        if same is not None:
            return same
    box = trace.box(prim, args, params, value)
    for hook in RESULT_HOOKS:
        hook(trace, box, args)
    return box


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


def _refuse(what, hint):
    def method(self, *args, **kwargs):
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
        try:
            outcome = convert(self.value, *args)
        except Exception as error:  # NumPy's own message, plus where the user wrote it
            relocated = located(error, f"{label} of a traced value at")
            if relocated is error:
                raise
            raise relocated from error
        trace.guard(self, test, outcome, args)
        return outcome
    return method


class Box:
    """A traced value. Shape queries are concrete; everything else is recorded."""

    __slots__ = ("__weakref__", "node", "value")  # weakref: rules.mutation's view registry
    __array_priority__ = 1000.0
    __hash__ = None  # like ndarray: == is elementwise

    def __init__(self, value, node):
        self.value = value
        self.node = node

    # isinstance(x, np.ndarray) (or float) answers for the value, as it would untraced
    __class__ = property(lambda self: type(self.value))
    shape = property(lambda self: np.shape(self.value))
    ndim = property(lambda self: np.ndim(self.value))
    size = property(lambda self: np.size(self.value))
    dtype = property(lambda self: result_dtype(self.value))
    T = property(lambda self: np.transpose(self))
    mT = property(lambda self: np.swapaxes(self, -1, -2))

    def __len__(self):
        if np.ndim(self.value) == 0:
            raise TypeError(at(user_loc(), "len() of a 0-d traced value"))
        return np.shape(self.value)[0]

    def __iter__(self):
        return (self[i] for i in range(len(self)))

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
                     "no derivative; use the array itself, or index it (x[i])")
    __array__ = _refuse(
        "np.asarray()/np.array() conversion",
        "the tracer cannot follow a conversion to a plain ndarray. Pass the value to NumPy "
        "functions directly, and use np.stack([...]) instead of np.array([...])")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if kwargs.get("out") is not None or any(type(a) is Box for a in kwargs.get("out", ())):
            raise TracingError(at(user_loc(), f"in-place np.{ufunc.__name__}(..., out=...) "
                                  "with a traced value: write `y = x + v`, not `x += v`, "
                                  "when x is a NumPy array and v is traced"))
        if method == "__call__":
            prim = UFUNCS.get(ufunc)
            if prim is not None and not kwargs:
                return bind(prim, inputs, {})
            if prim is not None:
                raise UnsupportedOperationError(at(user_loc(), f"np.{ufunc.__name__} with "
                                                   f"keyword arguments {sorted(kwargs)} is "
                                                   "not supported on traced values"))
        else:
            handler = UFUNC_METHODS.get((ufunc, method))
            if handler is not None:
                return handler(*inputs, **kwargs)
        name = f"np.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
        raise UnsupportedOperationError(at(user_loc(), unsupported_message(name)))

    def __array_function__(self, func, types, args, kwargs):
        handler = FUNCTIONS.get(func)
        if handler is None:
            module = getattr(func, "__module__", "numpy") or "numpy"
            name = f"{module.replace('numpy', 'np', 1)}.{func.__name__}"
            raise UnsupportedOperationError(at(user_loc(), unsupported_message(name)))
        return handler(*args, **kwargs)


def unsupported_message(name):
    return (f"{name} has no derivative rule in autodiffgen, so it cannot be applied to a "
            "traced value. If it does not depend on the differentiated inputs, compute it "
            "outside the function or on a non-traced value; otherwise register it with "
            "autodiffgen.rules.defprimitive(...) (see README, 'Adding a rule')")


def _ufunc_operator(ufunc, reflected=False):
    if reflected:
        return lambda self, other: ufunc(other, self)
    return lambda self, other: ufunc(self, other)


for _name, _ufunc in [("add", np.add), ("sub", np.subtract), ("mul", np.multiply),
                      ("truediv", np.true_divide), ("floordiv", np.floor_divide),
                      ("mod", np.remainder), ("pow", np.power), ("matmul", np.matmul)]:
    setattr(Box, f"__{_name}__", _ufunc_operator(_ufunc))
    setattr(Box, f"__r{_name}__", _ufunc_operator(_ufunc, reflected=True))
for _name, _ufunc in [("lt", np.less), ("le", np.less_equal), ("gt", np.greater),
                      ("ge", np.greater_equal), ("eq", np.equal), ("ne", np.not_equal)]:
    setattr(Box, f"__{_name}__", _ufunc_operator(_ufunc))
Box.__and__ = _ufunc_operator(np.bitwise_and)
Box.__rand__ = _ufunc_operator(np.bitwise_and, reflected=True)
Box.__or__ = _ufunc_operator(np.bitwise_or)
Box.__ror__ = _ufunc_operator(np.bitwise_or, reflected=True)
Box.__neg__ = lambda self: np.negative(self)
Box.__pos__ = lambda self: np.positive(self)  # a new array, as in NumPy (+x; x += 1)
Box.__abs__ = lambda self: np.absolute(self)
Box.__invert__ = lambda self: np.invert(self)


# ---- tracing a call ---------------------------------------------------------------------
def trace(fun, args, argnums, names, diff=True):
    """Call `fun` on Boxes: every array argument (and every float under `argnums`) becomes
    an input of the recording. Returns the Trace, the boxed arguments and the output.

    `diff` says how strict `argnums` is: True (grad) refuses integer leaves there;
    "auto" (jvp, vjp) leaves them alone, so only the floating-point leaves get derivatives.
    """
    recording = Trace()
    recording.captured = captured(fun)
    with recording:
        boxed = [_box_tree(recording, a, (i,), names[i], diff if i in argnums else False)
                 for i, a in enumerate(args)]
        with user_code():  # the disk cache notes which functions run (diskdeps.Recorder)
            out = fun(*map_tree(boxed, _own_box))
    if type(out) is Box and out.node.trace_id != recording.id:
        raise TracingError(at(user_loc(), "the function returned a value traced by an "
                              "enclosing transformation (through a closure); pass that value "
                              "to it as an argument instead"))
    return recording, boxed, out


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
    if type(x) is not Box:
        return x
    return np.float64(x.value) if type(x.value) is float else x.value


def _box_tree(recording, x, path, name, diff):
    kind = type(x)
    if kind is np.ndarray or isinstance(x, np.generic) or (diff and kind is float):
        if diff is True and not np.issubdtype(result_dtype(x), np.floating):
            raise _argument_error(
                f"argument {name!r} is under argnums but has dtype {result_dtype(x)}: only "
                "real floating-point arrays have gradients. Remove it from argnums or "
                "convert it with .astype(np.float64)")
        box = recording.new_input(x, name, path)
        if diff:
            recording.wrt.add(box.node)
        return box
    if isinstance(x, np.ndarray):
        raise _argument_error(f"argument {name!r} is a {kind.__name__}, an ndarray subclass; "
                              "pass np.asarray(...) of it")
    if diff is True and kind in (int, bool, complex):
        raise _argument_error(
            f"argument {name!r} is under argnums but is a Python {kind.__name__} ({x!r}): "
            "only floats and floating-point arrays have gradients. Pass a float (e.g. 2.0) "
            "or remove it from argnums")
    if is_container(x):
        return rebuild(x, [_box_tree(recording, child, path + (key,), f"{name}_{key}", diff)
                           for key, child in items(x)])
    return x


def _argument_error(message):
    return ArgumentError(at(user_loc(), message))
