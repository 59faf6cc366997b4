"""The plan of one final graph: its order and every memory decision, keyed by node.

`plan(graph)` runs the schedule (rematerialized, sunk, freeing_first), then decides which
transposes are written where they are read, which buffer each result is written into
(memory.reuse_plan, slots.joins_in_place), which of those writes read as an update of
one variable (`h += b`, memory.one_name) and which values each statement ends (`del`).
The emitter (codegen/) prints the planned graph as the plan says and decides none of it.

A `del` frees memory only when it drops a buffer's last name. A value written into the
buffer of one that dies there (`shifted = np.subtract(logits, m, out=logits)`) or into
a dead one taken from the pool keeps that buffer alive under its own name: the dead
name goes with the `del` of the value that holds its buffer, not on a line of its own.
"""

from dataclasses import dataclass, field

from ..graph import Graph, Node, Slot, op
from ..graph.size_formulas import Dim
from ..rules.buffers import owns
from ..tree import leaves
from .memory import (
    contiguous_transposes,
    live_bytes,
    nbytes,
    one_name,
    rematerialized,
    reuse_plan,
    sunk,
)
from .schedule import freeing_first
from .slots import Joins


@dataclass(frozen=True, eq=False)
class Plan:
    """How `graph` runs. Every mapping is keyed by a node of graph.nodes (a statement)."""

    graph: Graph                      # the final graph in the planned order
    into: dict = field(default_factory=dict)    # node -> the dead Node or join Slot whose
    #                                             buffer its result is written into (out=)
    in_place: frozenset = frozenset()  # nodes written as an update of their buffer's name
    owner: dict = field(default_factory=dict)   # node -> the node whose name its buffer has
    dels: dict = field(default_factory=dict)    # node -> the values `del`eted after it
    alloc: dict = field(default_factory=dict)   # node -> joins allocated just before it
    joins: Joins = field(default_factory=lambda: Joins({}, {}, {}, set(), set(), set()))
    inline: dict = field(default_factory=dict)  # `x.T` -> the node whose statement reads it
    contiguous: frozenset = frozenset()  # transposes copied C-ordered once (several readers)
    handed: frozenset = frozenset()  # (scan node, carry number): the loop updates the
    #                                  carry in its first value's buffer, not in a copy


def plan(graph, pure=False):
    """The Plan of a final graph. `pure`: code an enclosing trace reads, which writes into
    no buffer it did not make (no reuse, no join in place); a graph with marked
    statements (a `try:`, an np.errstate) keeps its order."""
    if not (pure or graph.marks):
        graph = freeing_first(sunk(rematerialized(graph)))
    inline = inlined(graph)
    last_use = last_uses(graph, inline)
    reuse, joins, contiguous, handed = {}, Plan(graph).joins, frozenset(), frozenset()
    if not pure:
        reuse, last_use, joins, handed = reuse_plan(graph, last_use)
        contiguous = frozenset(contiguous_transposes(graph))
    nodes = graph.nodes
    owner = one_name(graph, {i: b for i, b in reuse.items()
                             if any(b is a for a in nodes[i].args)})
    in_place = frozenset(nodes[i] for i, b in reuse.items()
                         if owner.get(b) is owner.get(nodes[i], False))
    into = {nodes[i]: b for i, b in reuse.items()}
    dels = _dels(nodes, last_use, into, owner, _frees(graph, into, last_use, reuse))
    return Plan(graph, into, in_place, owner, dels,
                {nodes[i]: list(js) for i, js in joins.alloc.items()}, joins, inline,
                contiguous, handed)


def _dels(nodes, last_use, into, owner, frees):
    """{statement node: the values `del`eted after it}: those whose last reader it is, but
    a value of the statement's own name (a chain in one buffer, `h += b`) and a value whose
    buffer the statement took (`out=`), whose name is deleted with the taker's: a `del`
    that leaves the buffer alive under another name frees nothing. Only values `frees`
    says a del frees memory worth its line."""
    held = {}  # node -> the other names of its buffer, deleted with it
    dels = {}
    for i in sorted(last_use):
        node = nodes[i]
        dead = []
        for n in last_use[i]:
            if n in owner and owner[n] is owner.get(node):  # the statement's own name
                held.setdefault(node, []).extend(held.pop(n, ()))
            elif into.get(node) is n:  # its buffer lives on as node
                held.setdefault(node, []).extend([n, *held.pop(n, ())])
            else:
                dead += [n, *held.pop(n, ())]
        dead = [n for n in dead if frees(n)]
        if dead:
            dels[node] = dead
    return dels


SMALL_BYTES = 1024  # an array this small is left to the function's return, within a budget:
BUDGET = 0.1  # of the peak bytes, what the arrays left alive may add to it, or at least
FLOOR = 4 * SMALL_BYTES  # (a function of small arrays only: none deleted)


def _frees(graph, into, last_use, reuse):
    """Whether deleting a value's name frees memory worth a line: not when its buffer is
    an argument's (the caller holds it, a donated one too: `del state_m` after `np.multiply(b1,
    state_m, out=state_m)` frees nothing), nor a scalar (a Python float, a NumPy scalar or
    a 0-d array), nor an array of its own under SMALL_BYTES while those left alive add up
    to at most BUDGET of the code's peak (or FLOOR) (a loop's many small values still are deleted
    once they would: a checkpointed RNN's peak). A view counts as the array it views."""
    inputs = set(graph.inputs)
    n = graph.batch.n if graph.batch is not None else 1
    budget = [max(FLOOR, BUDGET * live_bytes(graph, last_use, reuse, n)[1])]

    left = set()  # the small arrays left alive (charged to the budget once each)

    def leave(array):
        size = nbytes(array, n)
        if array in left or size < SMALL_BYTES and size <= budget[0]:
            budget[0] -= 0 if array in left else size
            left.add(array)
            return True
        return False

    def frees(node):
        buffer, base = buffer_of(into, node), viewed(node)
        if node.shape == () or buffer in inputs or base in inputs:
            return False
        if base is not node:  # a view frees what its base holds, if nothing else holds it
            return not leave(base)
        return not (owns(buffer) and buffer is node and leave(buffer))
    return frees


def buffer_of(into, node):
    """The node whose buffer `node`'s value is in, following the plan's writes (`into`):
    the first value of a chain of results written into one buffer."""
    while type(node) is Node and type(into.get(node)) is Node:
        node = into[node]
    return node


_VIEWING = {"reshape", "transpose", "squeeze", "expand_dims", "broadcast_to", "diagonal",
            "real", "imag"}


def viewed(node):
    """The array a chain of views (`xs[t]`, `x.T`, a reshape) looks into: deleting a view
    of an argument frees nothing. A getitem by arrays (a copy) is no view."""
    while type(node) is Node and node.args and type(node.args[0]) is Node and (
            op(node) in _VIEWING or op(node) == "getitem"
            and all(type(i) in (int, Dim, slice, type(None), type(Ellipsis))  # (hs[n - 1])
                    or type(i) is Slot and _an_int(node.args[i.k])  # xs[t] in a loop
                    for i in node.params["index"].items)):
        node = node.args[0]
    return node


def _an_int(arg):
    return type(arg) is int or type(arg) is Node and arg.shape == () and \
        arg.dtype is not None and arg.dtype.kind in "iu"


def inlined(graph):
    """{`x.T` node: the node whose statement reads it}: a transpose is a view, so a reader
    writes `h.T @ g` rather than naming it first. Not a value the user named or a
    gradient (its name says what it is), an output or a guard's operand."""
    uses = {node: None for node in leaves(graph.outputs) if type(node) is Node}
    for node in graph.nodes:
        for arg in node.args:
            if type(arg) is Node:  # (a loop reads it at every step: named once)
                uses[arg] = None if arg in uses or op(node) in ("guard", "scan") else node
    return {node: uses[node] for node in graph.nodes
            if op(node) == "transpose" and node.params.get("axes") is None
            and uses.get(node) is not None and node.name is None
            and node not in graph.derivative_of}


def last_uses(graph, inline):
    """{statement index: the nodes whose last use it is} (outputs and inputs excluded, but
    for donated inputs); an inlined `x.T` reads x where its reader is."""
    keep = set(graph.inputs) - graph.donated
    keep |= {n for n in leaves(graph.outputs) if type(n) is Node} | set(inline)
    nodes = graph.nodes
    at = {node: i for i, node in enumerate(nodes)}
    last = {}
    for i, node in enumerate(nodes):
        where = node
        while where in inline:  # an inlined `x.T` reads x where it is written (`x.T.T` too)
            where = inline[where]
        k = at[where]
        for arg in node.args:
            if type(arg) is Node and arg not in keep:
                last[arg] = max(k, last.get(arg, k))
    by_index = {}
    for node, i in last.items():
        by_index.setdefault(i, []).append(node)
    return by_index
