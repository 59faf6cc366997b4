"""A recording: the Trace of one call, and `bind`, which records a primitive applied.

`bind(prim, args, params)` is how every rule applies a primitive: on plain values it
computes the plain value; with a Box among its arguments it computes the value too and
records a Node in the current Trace, whose Box it returns. A Trace numbers its nodes,
keeps the Box of each (the backward pass reads forward values), and collects what the
graph needs besides its nodes: inputs, guards, effects, what the function read
(capture.py) and wrote (argument_writes.py).

Contract: a Node is made here only (Trace.new_node), with the user's lines it came from;
Nodes keep no values. Upstream: graph, context, boxes, raising.
"""

import contextlib
import itertools

import numpy as np

from .. import errors
from ..errors import TracingError, at
from ..graph import Node
from . import raising
from .boxes import NUMBERS, Box, _holds_box, concrete, result_dtype, stand_in
from .context import current_trace, located, make_current, user_loc, user_stack

RESULT_HOOKS = []  # hook(trace, box, args) on every recorded result (rules.numpy_api.views)
INPUT_HOOKS = []  # hook(trace, box) on every new input (rules.numpy_api.views: aliasing)
INPUT_KINDS = {}  # argument type -> handler(trace, value, name, path): a non-array input
GUARD = []  # [the guard Primitive], filled in by the rules package
GUARD_HOOKS = []  # hook(trace, box) before a guard is recorded (numpy_api.random: none on a draw)
ENTER_HOOKS = []  # (enter(), leave()) as a recording becomes, and stops being, the current
# one, derivative rules included (numpy_api.building: NumPy's callables wrapped meanwhile)
RAISES = {}  # primitive name -> what it raises on some values (rules/control.py)

_trace_ids = itertools.count(1)


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
        make_current(self)
        for enter, _ in ENTER_HOOKS:
            enter()
        return self

    def __exit__(self, *exc):
        for _, leave in ENTER_HOOKS:
            leave()
        make_current(self._outer)
        return False

    @contextlib.contextmanager
    def suspended(self):
        """No trace current in this thread meanwhile: a module the traced function imports
        runs its top-level code as plain Python (scipy.special's draws a default_rng)."""
        make_current(self._outer)
        try:
            yield
        finally:
            make_current(self)

    def new_node(self, prim, args, params, value, stack=None):
        statements = sites = None
        if self.grad_of is not None:
            stack, statements = self.grad_of.stack, self.grad_of.statements
        elif stack is None and self.replaying is not None:
            stack, statements = self.replaying.stack, self.replaying.statements
        elif stack is None:
            statements, sites = [], []
            stack = user_stack(statements, sites)
            statements = tuple(statements) if any(s is not None for s in statements) else None
        node = Node(self.next_id, prim, args, params, np.shape(value), result_dtype(value),
                    stack[0] if stack else None, stack, self.grad_of)
        node.statements = statements
        if sites:
            node.site = tuple(sites)
        node.trace_id = self.id
        self.next_id += 1
        return node

    def new_input(self, value, name, path, **params):
        node = self.new_node(None, (), {"path": path, **params}, value, stack=())
        node.name = name
        if type(value) in NUMBERS:
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

