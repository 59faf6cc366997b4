"""The memory plan: elementwise results written into an operand that dies there.

`del` at last use already frees every value as soon as it can go. On top of that, an
elementwise ufunc whose operand dies at that very statement can write its result into
the operand's buffer (`np.multiply(a, b, out=a)`), which saves an allocation and keeps
the peak lower on large arrays. Within one user statement, such a chain is one buffer under
one name (`h = x @ W`, `h += b`, `np.tanh(h, out=h)`): see `one_name`. Only buffers the graph owns qualify: never an input (but a donated one: a compiled
training step's params and state), a saved value, an output, a constant, or an array that
some view still looks into.

A dense value plus a scatter (passes/add_at.py) is updated at the index in the dense
value's buffer when that dies there: `p[rows, y] += v`; a write `h[:, t, :] = v` likewise,
in h's buffer, even while views of other elements of h are still to be read (views.py:
`h[:, t - 1, :]`, saved for the backward). A loop whose body writes into a carry takes
the buffer of the carry's first value when that dies at the loop (`_handed`), rather
than a copy of it.

Beyond the operand dying at the statement, a buffer dead earlier in the function serves
any later result of its shape and dtype (`np.matmul(h, W, out=add_3)`, `np.sum(e, axis=1,
keepdims=True, out=sum_2)`, a recurrent step's temporaries reused by the next step):
`pooled` keeps the dead buffers, and the dead value's `del` moves to the statement that
reuses its buffer, so the source shows where each buffer goes. Shapes are compared as
the graph has them: a batch-polymorphic graph's (generalize_batch.py) are formulas in n,
so a reuse holds at every size the code serves.

A buffer is reused only where that reads as one variable (`h += b`) or saves memory worth
an `out=`: a buffer of MIN_ELEMENTS or more (at the traced batch size), or a donated
input's (the step's own array, updated in place). Below that, an allocation costs about
what the call does, and its bytes are no part of the peak worth a reader's attention:
`s = np.sum(e, axis=1, keepdims=True)`, not `..., out=max_1)` in an (n, 1) buffer.
"""

from dataclasses import replace

import numpy as np

from ..graph import Node, has_effect, is_guard, op, recomputed
from ..passes.rewrite import clone, substitute
from ..rules import elementwise_ufunc
from ..rules.buffers import REDUCTIONS, owns, ufunc_of
from ..rules.regions import region
from ..tree import leaves
from .slots import Joins, joins_in_place, joins_last_use
from .views import Views


def reuse_plan(graph, last_use):
    """({statement index: the node whose buffer, or the join's Slot, that statement writes
    into}, last_use with the `del` of each buffer taken from the pool moved to the
    statement that reuses it, the joins written in place: emit_slots.Joins, the loops'
    carries that take their first value's buffer: `_handed`)."""
    kept = (set(graph.inputs) - graph.donated) | \
        {leaf for leaf in leaves(graph.outputs) if type(leaf) is Node}
    views = Views(graph, kept)
    users = {a for n in graph.nodes if op(n) is None for a in n.args  # a user's primitive
             if type(a) is Node}                                       # may keep a view

    def free(arg, at=None, box=None):  # a buffer the graph owns, that nothing reads after
        # it dies (nor a view of it, read later than `at`, the statement that would write
        # into it: but a view of elements apart from `box`, those it writes)
        return type(arg) is Node and arg not in kept and arg not in users \
            and views.done(arg, at, box) \
            and (owns(arg) or arg in graph.donated) and arg.shape != () \
            and arg not in joins.fixed

    n = graph.batch.n if graph.batch is not None else 1
    plan, joins = {}, Joins({}, {}, {}, set(), set())
    for i, node in enumerate(graph.nodes):  # first, operands dying where they are read
        if _elementwise(node.prim) and node.shape != ():
            dying = [a for a in last_use.get(i, ()) if free(a, i)]
            for arg in node.args:
                if type(arg) is Node and any(arg is d for d in dying) \
                        and arg.shape == node.shape and arg.dtype == node.dtype:
                    plan[i] = arg
                    break
        elif op(node) in ("add_at", "setitem"):  # `x[index] += v` (passes/add_at.py), or
            x = node.args[0]                       # `x[index] = v`, in x's buffer
            if any(x is d for d in last_use.get(i, ())) and x is not node.args[1] \
                    and x.shape == node.shape and x.dtype == node.dtype \
                    and free(x, i, region(node.params["index"], node.args, node.shape)):
                plan[i] = x
                views.inherit(x, node, i)
    shared = one_name(graph, plan)  # a chain in one buffer reads as one variable: kept
    plan = {i: b for i, b in plan.items() if worth(b, graph, n)
            or op(graph.nodes[i]) in ("add_at", "setitem")  # (else a copy of b: time too)
            or shared.get(b, b) is shared.get(graph.nodes[i])
            or shared.get(b) in graph.donated}  # the caller's array, updated in place
    plan, joins = joins_in_place(graph, plan, writes_out)
    handed = _handed(graph, last_use, free)
    plan, last_use = _pooled(graph, joins_last_use(graph, last_use, joins), plan,
                             lambda arg: free(arg) and arg not in handed)
    return plan, last_use, joins, frozenset(handed.values())


def _handed(graph, last_use, free):
    """{a loop's first value of a carry: (the scan node, the carry's number)}, for the
    carries the loop updates in place (its body writes into them: `h[:, t, :] = v`) whose
    first value is an array of the function's own that dies at the loop: the loop takes
    its buffer, rather than a copy (codegen/loops.py), and the pool never hands it out."""
    found = {}
    for i, node in enumerate(graph.nodes):
        if op(node) != "scan":
            continue
        dying, inner = last_use.get(i, ()), node.params["body"].graph
        written = {n.args[0] for n in inner.nodes
                   if op(n) in ("setitem", "add_at") and type(n.args[0]) is Node}
        for j, init in enumerate(node.args[:node.params["body"].carries]):
            if inner.inputs[1 + j] in written and any(init is d for d in dying) \
                    and sum(a is init for a in node.args) == 1 and free(init, i):
                found[init] = (node, j)
    return found


MIN_ELEMENTS = 4096  # the smallest buffer reused under another name (see the module doc)


def worth(buffer, graph, n):
    """Whether writing into `buffer` under another name saves memory worth an `out=`."""
    if buffer in graph.donated:
        return True
    size = 1
    for d in buffer.shape:
        size *= d if type(d) is int else d.at(n) if hasattr(d, "at") else 1
    return size >= MIN_ELEMENTS


def _pooled(graph, last_use, plan, free):
    """The plan with dead buffers taken from the pool; a buffer is held from its death to
    its reuse only while that keeps the live bytes under the peak they reach without
    holding it (so reuse never raises the peak), and for at most MAX_HOLD statements."""
    n = graph.batch.n if graph.batch is not None else 1
    live, peak = live_bytes(graph, last_use, plan, n)
    pool, moved = {}, {}
    for i, node in enumerate(graph.nodes):
        dead = pool.get(_key(node)) if i not in plan and writes_out(node) \
            and worth(node, graph, n) else None
        if dead:
            buffer, k = dead[-1]
            size = nbytes(buffer, n)
            if i - k <= MAX_HOLD and max(live[k + 1:i], default=0) + size <= peak:
                dead.pop()
                plan[i] = buffer
                moved[buffer] = i
                for t in range(k + 1, i):
                    live[t] += size
        taken = plan.get(i)
        for arg in last_use.get(i, ()):
            if arg is not taken and free(arg):
                pool.setdefault(_key(arg), []).append((arg, i))
    return plan, _moved_dels(last_use, moved)


MAX_HOLD = 256  # statements a dead buffer waits in the pool (a bound on the planning work)


def live_bytes(graph, last_use, plan, n):
    """([bytes the graph's own buffers hold after each statement], the largest): a
    fresh result adds its bytes, a result written into a buffer adds none, a value whose
    buffer nobody took frees it at its last use. Views are counted as free."""
    live, now, holds = [], 0, set()
    for i, node in enumerate(graph.nodes):
        taken = plan.get(i)
        if taken is not None:
            holds.discard(taken)
            holds.add(node)
        elif owns(node):
            now += nbytes(node, n)
            holds.add(node)
        for arg in last_use.get(i, ()):
            if arg in holds and arg is not taken:
                holds.discard(arg)
                now -= nbytes(arg, n)
        live.append(now)
    return live, max(live, default=0)


def nbytes(node, n):
    size = np.dtype(node.dtype).itemsize if node.dtype is not None else 8
    for d in node.shape:
        size *= d if type(d) is int else d.at(n) if hasattr(d, "at") else 1
    return size


def _key(node):
    return (node.shape, np.dtype(node.dtype))


def writes_out(node):
    """A result that NumPy writes into a given buffer of its shape and dtype (out=): an
    elementwise ufunc's, a matmul's, a reduction's over some axes (`np.mean(h, axis=1,
    keepdims=True, out=mean_1)`, a recurrent step's layer norm; a 0-d one stays a new
    NumPy scalar, as cheap as anything)."""
    if node.shape == () or node.prim is None:
        return False
    return _elementwise(node.prim) or (op(node) == "matmul" and ufunc_of(node.prim) == "matmul") \
        or op(node) in REDUCTIONS


def _moved_dels(last_use, moved):
    """last_use with each pooled buffer's `del` at the statement that reuses it."""
    if not moved:
        return last_use
    out = {i: [n for n in nodes if n not in moved] for i, nodes in last_use.items()}
    for buffer, i in moved.items():
        out.setdefault(i, []).append(buffer)
    return {i: nodes for i, nodes in out.items() if nodes}


def _elementwise(prim):
    """A ufunc applied elementwise (not a generalized one such as matmul, which must not
    write into an operand it is still reading)."""
    return ufunc_of(prim) is not None and elementwise_ufunc(prim)


_NAMED_BY_LOOP = {"scan_out", "loop_out"}  # a loop's results: their names are the loop's


def one_name(graph, plan):
    """{node: the last node of its chain}, for the chains of `plan` that one buffer runs
    through within one user statement, read as one variable named after the chain's last
    value (the user's `h`, a gradient `g_x`): its earlier values have no name of their own
    (`matmul`, `add`), and are not gradients. A chain in a donated input's buffer is that
    input, updated in place (`m *= beta1`, `m += ...`): {node: the input}."""
    chain = {}  # node -> the list of nodes sharing its buffer so far
    for i, operand in sorted(plan.items()):
        node = graph.nodes[i]
        if operand.name is None and operand not in graph.derivative_of \
                and op(operand) not in _NAMED_BY_LOOP \
                and operand.loc == node.loc and operand.loc is not None \
                and (operand.grad_of is None) == (node.grad_of is None):
            members = chain.get(operand, [operand])
            members.append(node)
            chain[operand] = chain[node] = members
    shared = {}
    for members in {id(m): m for m in chain.values()}.values():  # each chain once, not
        last = members[-1]                                    # once per member: linear
        if last.name is not None or last in graph.derivative_of:
            shared.update((m, last) for m in members)
    for i, operand in sorted(plan.items()):  # a donated input's buffer: its name throughout;
        node = graph.nodes[i]                  # an array written into, its name (hs[t] = h)
        root = operand if operand in graph.donated else shared.get(operand)
        if root in graph.donated or op(node) == "setitem" and type(operand) is Node:
            shared[operand] = shared[node] = root or shared.get(operand, operand)
    return shared


# ---- layout: a transposed matrix that several matmuls read, made C-contiguous once ----
def contiguous_transposes(graph):
    """The 2-D transposes (`Wh.T`) that two or more matmuls read as their right operand:
    emitted as `np.ascontiguousarray(Wh.T)`. OpenBLAS multiplies by a transposed
    (Fortran-ordered) right operand markedly slower than by a C-ordered one on small left
    operands (a recurrent step's `g @ W.T`: 39 against 25 us for 32x256 @ 256x128,
    float32, here), and one copy is cheaper than the second product's difference. A
    transposed left operand (`x.T @ g`, a weight's gradient) costs BLAS nothing: copying
    it would only add its size to the peak."""
    readers = {}
    for node in graph.nodes:
        for a in _right_operands(node):
            if op(a) == "transpose" and a.params["axes"] in (None, (1, 0)) \
                    and len(a.shape) == 2 and not _checkpointed(a.args[0]):
                readers[a] = readers.get(a, 0) + (1 if op(node) == "matmul" else 2)
    return {a for a, count in readers.items() if count >= 2}


def _right_operands(node):
    """What a node reads as a matmul's right operand: a matmul's second argument; a loop's
    (rules/loops.py: Scan) invariants that its body's matmuls read so, once per step."""
    if op(node) == "matmul" and len(node.args) == 2:
        return [node.args[1]]
    if op(node) != "scan":
        return []
    body = node.params["body"]
    inner = body.graph
    right = {n.args[1] for n in inner.nodes if op(n) == "matmul" and len(n.args) == 2}
    return [a for i, a in zip(inner.inputs[1 + body.carries:], node.args[body.carries:])
            if i in right]


def _checkpointed(x):
    """A checkpoint's recomputed value: its segment trades time for memory, so no copy."""
    return type(x) is Node and (recomputed(x) or op(x) == "recompute_from")


# ---- the schedule: backward values made from inputs alone, computed where they are read ----
def sunk(graph):
    """The graph with each backward value that reads nothing but inputs, constants and 0-d
    values (the gradient of a mean, `-(1/n) * y`; of an L2 term, `(2 * lam) * w`) moved to
    just before its first reader: computed at once, it would hold its buffer while the
    forward's saved values are still alive."""
    inputs = set(graph.inputs) - graph.donated
    movable = set()
    for node in graph.nodes:
        if node.grad_of is not None and node.prim is not None and not is_guard(node) \
                and not has_effect(node) and node not in graph.tried \
                and not recomputed(node) and node.shape != () \
                and all(a in inputs or a in movable or a.shape == ()  # a 0-d value
                        for a in node.args if type(a) is Node):            # costs nothing held
            movable.add(node)
    if not movable:
        return graph
    order, placed = [], set()

    def place(node):
        for a in node.args:
            if type(a) is Node and a in movable and a not in placed:
                place(a)
        placed.add(node)
        order.append(node)
    for node in graph.nodes:
        if node not in movable:
            place(node)
    for node in graph.nodes:  # read by no statement: an output, computed last
        if node not in placed:
            place(node)
    place = None  # it calls itself: a cycle that would hold every node until a collection
    return replace(graph, nodes=order)


# ---- rematerialization: cheap saved values computed again where the backward reads them ----
CHEAP = {"add", "subtract", "multiply", "negative"}


def rematerialized(graph):
    """The graph with each cheap forward value the backward reads (`h - n`, saved for a
    GRU's update gate) computed again just before its first backward reader, when its
    operands are alive there anyway (inputs, or values the backward reads at or after that
    point): one elementwise pass in the backward instead of a buffer held from the forward
    to the backward. A hand-written backward recomputes such values the same way."""
    if graph.kind != "grad":  # a JVP's tangents run beside the values they read
        return graph
    nodes = graph.nodes
    at = {node: i for i, node in enumerate(nodes)}
    last, last_forward = {}, {}
    for i, node in enumerate(nodes):
        for a in node.args:
            if type(a) is Node:
                last[a] = i
                if node.grad_of is None:
                    last_forward[a] = i
    outputs = {leaf for leaf in leaves(graph.outputs) if type(leaf) is Node}
    inputs = set(graph.inputs)
    copies = {}  # forward node -> the index of its first backward reader
    for node in nodes:
        if node.grad_of is not None:
            for a in node.args:
                if type(a) is Node and a not in copies and a not in inputs \
                        and _cheap(a, outputs, graph):
                    first = at[node]
                    if last_forward.get(a, -1) < first - 1 and all(b in inputs or last.get(b, -1) >= first
                           for b in a.args if type(b) is Node):
                        copies[a] = first
    if not copies:
        return graph
    made = {}
    for a in copies:
        made[a] = a.replace(grad_of=nodes[copies[a]].grad_of, rematerialized=True)
    readers = {node: clone(node, tuple(made.get(b, b) if type(b) is Node else b
                                       for b in node.args))
               for node in nodes if node.grad_of is not None
               and any(type(b) is Node and b in made for b in node.args)}
    graph = substitute(graph, readers)[0]
    still_read = {a for node in graph.nodes for a in node.args if type(a) is Node}
    return graph.erase(a for a in copies if a not in still_read and a not in outputs)


def _cheap(node, outputs, graph):
    """One elementwise pass, or a view by a static index (`zr[:, :H]`: nothing computed,
    but one array object per step saved less, as a hand-written backward slices again)."""
    view = op(node) == "getitem" and len(node.args) == 1 and type(node.args[0]) is Node
    return node.grad_of is None and (view or op(node) in CHEAP and ufunc_of(node.prim) is not None) \
        and node.shape != () and node not in outputs and node not in graph.tried \
        and not graph.marks.get(node.stack)
