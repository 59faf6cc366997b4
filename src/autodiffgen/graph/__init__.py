"""The graph IR: nodes recorded by the tracer, and the child-count toposort.

A Node is one primitive application. Its `args` mix Nodes (traced values) and constants
(Python scalars, NumPy scalars and arrays); only Nodes are graph edges. Nodes keep
metadata (shape, dtype, where the user wrote it), never values, so a finished graph holds
no array bigger than the constants the user's function captured.
"""

import heapq
import itertools
from dataclasses import dataclass, field, replace

import numpy as np

from ..tree import leaves

# What a node knows about its value besides how it is computed, with the value a node has
# when nothing says otherwise. `Node.replace` (the same value, computed another way) carries
# them over; `Node.derived` (a new value made in a node's place) starts from these.
FACTS = {
    "name": None,  # a hint taken from the user's variables, if any
    "statements": None,  # per frame, which statement of a line with several (naming)
    # a checkpoint's recomputed copy: the forward node it is a copy of (checkpointing.py), so
    # a pass that matches forward patterns sees the backward through the copies (stable.py)
    "copy_of": None,
    # a comment line the emitter writes above the first of a group of nodes a pass made from
    # another (passes/contract.py: the einsum a group of matmul steps computes)
    "note": None,
    # the traced value is a Python number (a number argument, and Python operators on such
    # numbers, tracer._python): the emitter writes NumPy's calls on it where the trace
    # called NumPy (np.greater(x, 0) is np.True_ and stays one, x > 0 would be True)
    "python_number": False,
    # a cheap forward value computed again in the backward rather than saved
    # (plan.memory.rematerialized): the emitter says so in its comment
    "rematerialized": False,
    # where the user's frames were when it was recorded, innermost first: (id(frame), code,
    # bytecode offset) each, which loop step made it (loops/find.py)
    "site": (),
}


class Node:
    """One primitive application (Autograd's VJPNode) or one input of the function.

    A pass never changes a node a graph holds: it makes a copy with `replace` (or a new
    node in another's place with `derived`) and substitutes it (passes/rewrite.py)."""

    __slots__ = (
        "__weakref__",
        "args",
        "dtype",
        "grad_of",
        "id",
        "loc",
        "params",
        "prim",
        "shape",
        "stack",
        "trace_id",
        *FACTS,
    )

    def __init__(self, id, prim, args, params, shape, dtype, loc=None, stack=(), grad_of=None,
                 trace_id=None):
        self.id = id  # creation order: a valid topological order and the tie-breaker
        self.prim = prim  # a rules.Primitive, or None for a function input
        self.args = args
        self.params = params
        self.shape = shape
        self.dtype = dtype
        self.loc = loc  # (filename, lineno) of the user's code, or None
        self.stack = stack  # user frames, innermost first: used to name values
        self.grad_of = grad_of  # for backward nodes: the forward Node whose rule made it
        self.trace_id = trace_id  # which recording made it: nested grads must not mix them
        self.name = None  # (FACTS, written out: a node is made for every traced call)
        self.statements = None
        self.copy_of = None
        self.note = None
        self.python_number = False
        self.rematerialized = False
        self.site = ()

    def replace(self, **changes):
        """A copy of this node with `changes` (args=, prim=, shape=...): everything else, its
        id, trace, source line and facts included, is carried over, so the copy takes the
        node's place and the emitted code reads the same. A misspelled field is an error."""
        copy = _new_node(Node)
        copy.id, copy.prim, copy.args, copy.params = self.id, self.prim, self.args, self.params
        copy.shape, copy.dtype, copy.loc, copy.stack = self.shape, self.dtype, self.loc, self.stack
        copy.grad_of, copy.trace_id = self.grad_of, self.trace_id
        copy.name, copy.statements, copy.copy_of = self.name, self.statements, self.copy_of
        copy.note, copy.python_number = self.note, self.python_number
        copy.rematerialized, copy.site = self.rematerialized, self.site
        for field_name, value in changes.items():
            setattr(copy, field_name, value)  # (slots: no other attribute can be set)
        return copy

    def derived(self, prim, args, params=None, shape=None, dtype=None, **changes):
        """A new value computed in this node's place (a part of what it computes, or what it
        becomes): its id, trace, source line and rule, but none of its value's facts (no
        name: the user's name stays with the value the user named). Shape and dtype are
        this node's unless given."""
        return self.replace(prim=prim, args=tuple(args), params={} if params is None else params,
                            shape=self.shape if shape is None else shape,
                            dtype=self.dtype if dtype is None else dtype, **{**FACTS, **changes})

    def __repr__(self):
        op = self.prim.name if self.prim is not None else "input"
        return f"<Node {self.id} {op} {self.name or ''} {self.dtype}{list(self.shape)}>"


_new_node = object.__new__


def op(x):
    """The built-in primitive a node applies ("add", "matmul"...); None for inputs,
    constants and user-defined primitives, which no pass may take for a built-in."""
    return x.prim.op if type(x) is Node and x.prim is not None else None


def original(x):
    """The forward node a recomputed copy (of a copy...) stands for; x itself otherwise."""
    while type(x) is Node and x.copy_of is not None:
        x = x.copy_of
    return x


def recomputed(node):
    """A node of the backward's replay of a checkpointed call (checkpointing.py), whose
    `grad_of` is the call's mark."""
    return node.grad_of is not None and op(node.grad_of) == "checkpoint"


def parents_of(node):
    return [a for a in node.args if type(a) is Node]


def toposort(roots, parents=parents_of):
    """Nodes reachable from `roots`, each after all of its children (Kahn, child counts).

    Iterative, so a chain of 100,000 nodes is fine. Only ancestors of the roots are
    visited. Among nodes that are ready at the same time, the most recently created comes
    first, so the order is deterministic and close to the reverse of creation order.
    """
    child_counts = {}
    stack = list(roots)
    while stack:
        node = stack.pop()
        if node in child_counts:
            child_counts[node] += 1
            continue
        child_counts[node] = 1
        stack.extend(parents(node))
    for root in roots:  # roots were counted once as if they had a child: the caller
        child_counts[root] -= 1
    tie = itertools.count()  # nodes a pass made share an id: first come, first out
    ready = [(-n.id, next(tie), n) for n in dict.fromkeys(roots) if child_counts[n] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, _, node = heapq.heappop(ready)
        order.append(node)
        for parent in parents(node):
            child_counts[parent] -= 1
            if child_counts[parent] == 0:
                heapq.heappush(ready, (-parent.id, next(tie), parent))
    return order


def is_guard(node):
    return node.prim is not None and node.prim.name == "guard" and node.prim.op is not None


def guards_first(nodes):
    """`nodes` reordered so that each guard, with what it reads, comes as early as it can:
    a call that takes another path fails before the work that path would not do."""
    position = {n: i for i, n in enumerate(nodes)}
    placed, order = set(), []

    def place(root):
        stack = [root]
        pending = []
        while stack:  # the not-yet-placed ancestors of root, then root
            node = stack.pop()
            if node in placed or node not in position:
                continue
            placed.add(node)
            pending.append(node)
            stack.extend(a for a in node.args if type(a) is Node)
        order.extend(sorted(pending, key=position.__getitem__))

    for node in nodes:
        if is_guard(node):
            place(node)
    order.extend(n for n in nodes if n not in placed)
    return order


def with_guards_first(graph):
    return replace(graph, nodes=guards_first(graph.nodes)) \
        if any(is_guard(n) for n in graph.nodes) else graph


def has_effect(node):
    return node.prim is not None and getattr(node.prim, "effect", False)


def roots_of(graph):
    """What a graph must compute: its outputs' nodes, its guards, its effects (draws) and
    the calls in a `try:` whose raise decides the path (raising.py)."""
    return [leaf for leaf in leaves(graph.outputs) if type(leaf) is Node] + \
        [n for n in graph.nodes if is_guard(n) or has_effect(n) or n in graph.tried]


@dataclass
class Graph:
    """A traced function ready to emit: inputs, nodes in execution order, outputs.

    `inputs` pairs each input Node with its path into the arguments, e.g. (0,) for the
    first argument or (2, "W1") for params["W1"] when params is the third argument.
    `outputs` is a Python structure (tuple, list, dict) whose leaves are Nodes or constants.
    """

    name: str
    params: list
    inputs: list
    nodes: list
    outputs: object
    signature: str = ""  # the arguments it was traced at, as its docstring says them
    doc: str = ""  # what the generated function computes (its docstring: `described`)
    kind: str = "grad"  # "grad" or "jvp": how the emitter labels derivative lines
    paths: dict = field(default_factory=dict)  # inputs that are not the function's own
    # derivative node -> the value it is the (co)tangent of, to name it g_h / t_h after h
    derivative_of: dict = field(default_factory=dict)
    # outputs[fresh_from:] are handed to the caller and must own their memory (None: none)
    fresh_from: object = None
    scalar: bool = False  # called with Python floats only: math-module code if possible
    statics: dict = field(default_factory=dict)  # parameter -> the value it was traced at
    captured: list = field(default_factory=list)  # capture.Captured the code re-checks
    batch: object = None  # a polymorphic graph's size_formulas.Batch: where its size n comes from
    # user stack -> raising.Mark: statements run in `try:` or under an np.errstate
    marks: dict = field(default_factory=dict)
    tried: frozenset = frozenset()  # nodes so marked, kept although nothing reads them
    # inputs whose buffers the code may write into after their last read (a compiled training
    # step's params and state, train_step.py; as JAX's donated arguments)
    donated: frozenset = frozenset()
    update: str = ""  # a training step's update header: `Adam update: optim.py:122  Adam._leaf`
    # argument_writes.py: where the code assigns its last output's items, in order (paths
    # into the arguments: (1, "running_mean") for bn_param["running_mean"])
    writes: tuple = ()
    loops: tuple = ()  # Steps: loops run step by step, for loops/roll.py to keep as loops

    def described(self):
        """The docstring's text: what it computes, and the arguments traced at (a batch
        leaf's size as n once generalized: the signature is a field, not text to edit)."""
        if not self.doc:
            return ""
        return f"{self.doc}, traced at ({self.signature})." if self.signature else \
            f"{self.doc}."

    def new_node(self, prim, args, like, params=None, **changes):
        """A node this graph does not hold yet, for a pass to add: its id comes after every
        id the graph holds (and every one this method gave before), its trace, source line
        and rule are `like`'s (`changes` as Node.derived takes them). The one place a node
        that is not a copy of another gets its id once the trace is over (torch.fx's
        create_node); a node in another's place is `Node.derived`, with that one's id."""
        last = self.__dict__.get("_last_id")
        if last is None:
            last = max((n.id for n in itertools.chain(self.nodes, self.inputs)), default=0)
        self._last_id = last + 1
        return like.derived(prim, args, params, id=last + 1, **changes)

    def erase(self, dead):
        """This graph without the nodes (and inputs) `dead`. As torch.fx's erase_node, it
        refuses a node that a kept node or an output still reads: a pass redirects the
        readers first (passes.rewrite.substitute), then drops what nothing reads."""
        dead = set(dead)
        if not dead:
            return self
        nodes = [n for n in self.nodes if n not in dead]
        for node in nodes:
            for arg in node.args:
                if type(arg) is Node and arg in dead:
                    raise ValueError(f"{arg!r} is still read by {node!r}")
        for leaf in leaves(self.outputs):
            if type(leaf) is Node and leaf in dead:
                raise ValueError(f"{leaf!r} is still an output")
        return replace(self, nodes=nodes, inputs=[n for n in self.inputs if n not in dead])


@dataclass(frozen=True, eq=False)
class Steps:
    """A loop the trace ran step by step, as whoever ran it declares it (a compiled
    training step's update, one step per parameter): per step, the ids its nodes were
    recorded with (first, end), its items (the loop variables' values) and its outputs;
    `into[j]`, the item output j replaces; the loop variables' names; the `for` line's
    comment. loops/roll.py keeps it as one loop when it proves the steps one program."""

    names: tuple
    steps: tuple  # ((first id, end id, items, outputs), ...)
    into: tuple
    comment: str = ""


class Slot:
    """In an Index: the array held by argument number `k` of the indexing node."""

    __slots__ = ("k",)

    def __init__(self, k):
        self.k = k

    def __eq__(self, other):
        return type(other) is Slot and other.k == self.k

    def __hash__(self):
        return hash(("Slot", self.k))

    def __repr__(self):
        return f"Slot({self.k})"


class Index:
    """A normalized NumPy index: a tuple of ints, slices, None, Ellipsis and Slots.

    Arrays in an index (traced or constant) are arguments of the node, so the index
    itself stays a static parameter that the emitter can write out.
    """

    __slots__ = ("items",)

    def __init__(self, items):
        self.items = tuple(items)

    def fill(self, args):
        """The concrete index for NumPy, given the node's arguments."""
        return tuple(args[i.k] if type(i) is Slot else _filled(i, args) if type(i) is slice
                     else i for i in self.items)

    @property
    def slots(self):
        """The index arrays (a slice's bounds that are arguments are `bounds`)."""
        return [i for i in self.items if type(i) is Slot]

    @property
    def bounds(self):
        """Slice bounds that are arguments of the node (ints read at run time)."""
        return [b for i in self.items if type(i) is slice
                for b in (i.start, i.stop, i.step) if type(b) is Slot]

    def __eq__(self, other):
        return type(other) is Index and repr(self.items) == repr(other.items)

    def __hash__(self):
        return hash(repr(self.items))

    def __repr__(self):
        return f"Index{self.items!r}"


def _filled(item, args):
    """A slice whose bounds may be Slots, with their arguments in."""
    start, stop, step = (args[b.k] if type(b) is Slot else b
                         for b in (item.start, item.stop, item.step))
    return slice(start, stop, step)


def constant_key(value):
    """A hashable key equal for equal constants (arrays by content): one key for the
    passes (cse, fold) and the emitter (one module-level name per distinct constant)."""
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, np.ascontiguousarray(value).tobytes())
    if isinstance(value, np.generic):
        return ("scalar", value.dtype.str, value.tobytes())
    try:
        hash(value)
    except TypeError:
        return ("object", id(value))
    return ("value", type(value).__name__, repr(value))


def users_of(nodes):
    """{node: the nodes that read it, in order (once per argument)}: the users map the
    passes and the backward's shift check share."""
    found = {}
    get = found.get
    for node in nodes:
        for arg in node.args:
            if type(arg) is Node:
                users = get(arg)
                if users is None:  # (not setdefault: it would make a list every time)
                    found[arg] = [node]
                else:
                    users.append(node)
    return found
