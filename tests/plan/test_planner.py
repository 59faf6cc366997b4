"""The plan stage on its own (plan/planner.py): what it decides for a final graph, read
from the Plan by node, before anything is printed; and the few facts of it the printed
code shows (a reused buffer's name deleted with its taker's, small buffers never reused
under another name)."""

import ast
import re

import numpy as np
import pytest
from golden_models import mlp_args, mlp_loss

import autodiffgen as ad
from autodiffgen import pipeline
from autodiffgen.graph import Node, op
from autodiffgen.plan import memory
from autodiffgen.plan.planner import Plan, plan
from autodiffgen.plan.slots import Slot
from autodiffgen.tree import leaves

RNG = np.random.default_rng(26)


def final(fun, *args, argnums=0):
    """grad's finished graph of `fun` at `args` (what the plan stage takes), one size."""
    return pipeline.program(ad.GradFunction(fun, argnums).request(args, batch=False))[0]


def chain(x):
    a = np.sin(x)
    b = np.exp(a) * a
    c = np.tanh(b) + b
    return np.sum(c * c)


def two_layers(A, B, x, t):  # a (n, 32) activation whose last reader is B's gradient
    a = np.sin(x) @ A
    d = a @ B - t
    return 0.5 * np.sum(d * d) / x.shape[0]


def layer(W, b, x):
    h = np.tanh(x @ W + b)
    return np.sum(h * h)


def softmax_loss(W, x, y):
    logits = x @ W
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return -log_probs[np.arange(len(y)), y].mean()


def two_layer_args(rows=40):
    return (RNG.normal(size=(16, 32)), RNG.normal(size=(32, 8)), RNG.normal(size=(rows, 16)),
            RNG.normal(size=(rows, 8)))


CASES = {
    "chain": (chain, (RNG.normal(size=10000),), 0),
    "two_layers": (two_layers, two_layer_args(200), (0, 1)),
    "layer": (layer, (RNG.normal(size=(64, 128)), RNG.normal(size=128),
                      RNG.normal(size=(256, 64))), (0, 1)),
    "mlp": (mlp_loss, mlp_args(), 0),
}


@pytest.fixture(params=list(CASES))
def planned(request):
    fun, args, argnums = CASES[request.param]
    return plan(final(fun, *args, argnums=argnums))


def _kept(graph):
    return (set(graph.inputs) - graph.donated) | \
        {leaf for leaf in leaves(graph.outputs) if type(leaf) is Node}


def test_a_buffer_is_written_into_only_after_its_last_reader(planned):
    """A result goes into another value's buffer only at or after that value's last
    read: the statement that reads it last, or later (a dead buffer from the pool)."""
    nodes = planned.graph.nodes
    at = {node: i for i, node in enumerate(nodes)}
    last = {}
    for i, node in enumerate(nodes):
        for a in node.args:
            if type(a) is Node:
                last[a] = i
    taken = [(node, b) for node, b in planned.into.items() if type(b) is Node]
    assert taken
    for node, buffer in taken:
        assert last[buffer] <= at[node], (node, buffer)
        assert buffer.shape == node.shape and buffer.dtype == node.dtype


def test_an_input_or_an_output_is_never_written_into_nor_deleted(planned):
    kept = _kept(planned.graph)
    assert not kept & {b for b in planned.into.values() if type(b) is Node}
    assert not kept & {n for dead in planned.dels.values() for n in dead}


def test_each_value_is_deleted_once_after_its_last_reader_and_never_read_again(planned):
    nodes = planned.graph.nodes
    at = {node: i for i, node in enumerate(nodes)}
    deleted = [n for dead in planned.dels.values() for n in dead]
    assert deleted and len(deleted) == len(set(deleted))
    for node, dead in planned.dels.items():
        for n in dead:
            readers = [at[m] for m in nodes if any(a is n for a in m.args)]
            readers += [at[planned.inline[m]] for m in planned.inline
                        if any(a is n for a in m.args)]
            assert max(readers) <= at[node], n


def test_a_taken_buffers_name_is_deleted_with_the_value_that_took_it(planned):
    """`g_add = np.multiply(g_h, mask, out=g_h)` leaves g_h's buffer alive as g_add: no
    `del g_h` there (it would free nothing), but `del g_add, g_h` where g_add dies."""
    where = {n: node for node, dead in planned.dels.items() for n in dead}
    for node, buffer in planned.into.items():
        if type(buffer) is not Node or node in planned.in_place:
            continue
        assert buffer not in planned.dels.get(node, ())
        if node in where:
            assert where.get(buffer) is where[node], (node, buffer)


def test_the_order_frees_before_allocating():
    """The backward of `d = a @ B`: B's gradient (a's last reader, a (32, 8) result)
    before a's (a (n, 32) one), which then takes a's place."""
    A, B, x, t = two_layer_args(200)
    graph = final(two_layers, A, B, x, t, argnums=(0, 1))
    planned = plan(graph)
    nodes = planned.graph.nodes
    products = [n for n in nodes if n.grad_of is not None and op(n) == "matmul"]
    by_shape = {n.shape: nodes.index(n) for n in products}
    assert by_shape[(32, 8)] < by_shape[(200, 32)]
    assert [n for n in graph.nodes if n in set(nodes)] != nodes  # it moved


def test_a_chain_in_one_buffer_is_one_name_at_any_size():
    """`h = x @ W; h += b; np.tanh(h, out=h)`: the add and the tanh are updates of the
    matmul's buffer under the name h, however small."""
    W, b, x = RNG.normal(size=(3, 4)), RNG.normal(size=4), RNG.normal(size=(2, 3))
    planned = plan(final(layer, W, b, x, argnums=(0, 1)))
    forward = [n for n in planned.graph.nodes if n.grad_of is None]
    add, tanh = (next(n for n in forward if op(n) == kind) for kind in ("add", "tanh"))
    matmul = add.args[0] if op(add.args[0]) == "matmul" else add.args[1]
    assert {add, tanh} <= planned.in_place
    assert planned.owner[matmul] is planned.owner[add] is planned.owner[tanh] is tanh
    assert planned.into[add] is matmul and planned.into[tanh] is add
    source = ad.emit(layer, W, b, x, argnums=(0, 1))
    assert "h += b" in source and "np.tanh(h, out=h)" in source


def test_small_buffers_are_not_reused_under_another_name():
    """Below memory.MIN_ELEMENTS, a result gets a buffer of its own (a chain in one
    buffer aside): `s = np.sum(e, axis=1, keepdims=True)`, never into an (n, 1) buffer."""
    x = RNG.normal(size=100)
    small = plan(final(chain, x))
    assert not [node for node, b in small.into.items() if node not in small.in_place]
    large = plan(final(chain, RNG.normal(size=memory.MIN_ELEMENTS)))
    assert [node for node, b in large.into.items() if node not in large.in_place]
    W, xs, y = RNG.normal(size=(20, 10)), RNG.normal(size=(64, 20)), RNG.integers(0, 10, 64)
    source = ad.emit(softmax_loss, W, xs, y)
    assert "out=" not in source


def test_a_donated_input_is_written_into_at_any_size():
    """A training step's params and state (donated) are updated in place however small:
    the new values are the caller's arrays."""
    from autodiffgen.optim import SGD, compile_step

    def loss(params, x):
        return np.sum((x @ params["W"]) ** 2)
    step = compile_step(loss, SGD(lr=0.1))
    params = {"W": RNG.normal(size=(3, 2))}
    x = RNG.normal(size=(4, 3))
    W = params["W"]
    before = W.copy()
    step(params, step.init(params), x)
    assert params["W"] is W and not np.array_equal(W, before)
    source = step.source(params, step.init(params), x)
    assert "params_W -= " in source  # the caller's array, updated under its own name


def test_no_del_of_a_name_whose_buffer_the_caller_holds():
    """A training step writes Adam's moments into the caller's state arrays: a `del` of
    such a name (or of one computed into its buffer) frees nothing, and is not written."""
    from autodiffgen.optim import Adam, compile_step

    def loss(params, x):
        return np.sum(np.tanh(x @ params["W"]) ** 2)
    step = compile_step(loss, Adam(lr=0.1))
    params = {"W": RNG.normal(size=(10, 5))}   # small: Adam's m is a new array, not in place
    x = RNG.normal(size=(8, 10))
    source = step.source(params, step.init(params), x)
    held = {m.group(1) for m in re.finditer(r"^ *(\w+) = .*out=(?:state|params)_\w+\)",
                                            source, re.MULTILINE)}
    held |= set(re.findall(r"^ *((?:state|params)_\w+) [-+*/]= ", source, re.MULTILINE))
    assert held
    deleted = {name for line in source.splitlines() if line.strip().startswith("del ")
               for name in line.strip()[4:].split(", ")}
    assert not deleted & held, deleted & held


def _left_alive(planned):
    """The arrays of their own the plan never deletes (but the outputs)."""
    deleted = {n for dead in planned.dels.values() for n in dead}
    kept = _kept(planned.graph)
    return [n for n in planned.graph.nodes if n not in deleted and n not in kept
            and n.shape != () and n.prim is not None and n not in planned.into]


def test_small_arrays_are_left_to_the_return_within_a_budget_of_the_peak():
    """A hand-written function deletes no (10,) temporary; a loop's many small values
    are deleted once those left alive would add more than BUDGET to the peak."""
    def few(x):
        return np.sum(np.sin(x) * np.cos(x))

    def many(x):
        total = 0.0
        for i in range(300):
            total = total + np.sum(np.sin(x * i))
        return total
    x = RNG.normal(size=10)
    small = plan(final(few, x))
    assert not small.dels
    looped = plan(final(many, x))
    assert looped.dels  # past the budget
    alive = sum(memory.nbytes(n, 1) for n in _left_alive(looped))
    every = sum(memory.nbytes(n, 1) for n in looped.graph.nodes if n.shape != ()
                and n.prim is not None and n not in _kept(looped.graph))
    assert 0 < alive < every / 2  # some left alive, most deleted
    big = plan(final(few, RNG.normal(size=1000)))  # 8000 bytes each: deleted
    assert big.dels


def test_no_del_of_a_view_of_an_argument():
    """`x_t = xs[t]` looks into the caller's array: deleting it frees nothing."""
    def loss(W, xs):
        h = np.zeros((xs.shape[1], W.shape[1]))
        for t in range(xs.shape[0]):
            h = np.tanh(xs[t] @ W + h)
        return np.sum(h)
    W, xs = RNG.normal(size=(30, 40)), RNG.normal(size=(3, 50, 30))
    planned = plan(final(loss, W, xs))
    views = [n for n in planned.graph.nodes if op(n) == "getitem" and n.args[0] is
             planned.graph.inputs[1]]
    assert views
    deleted = {n for dead in planned.dels.values() for n in dead}
    assert not deleted & set(views)


def test_pure_code_keeps_its_order_and_writes_into_no_buffer():
    """Code an enclosing trace runs (pure) takes no buffer: the trace reads every value."""
    graph = final(chain, RNG.normal(size=10000))
    planned = plan(graph, pure=True)
    assert planned.graph is graph
    assert not planned.into and not planned.in_place and not planned.joins.slot
    assert planned.dels


def test_a_plan_is_keyed_by_node_and_the_emitter_changes_neither(monkeypatch):
    graph = final(two_layers, *two_layer_args(), argnums=(0, 1))
    planned = plan(graph)
    assert isinstance(planned, Plan)
    nodes = set(planned.graph.nodes)
    for mapping in (planned.into, planned.dels, planned.alloc, planned.owner, planned.inline):
        assert set(mapping) <= nodes
    assert all(type(b) in (Node, Slot) for b in planned.into.values())
    order, into = list(planned.graph.nodes), dict(planned.into)
    dels = {k: list(v) for k, v in planned.dels.items()}
    from autodiffgen.codegen.emitter import Emitter
    Emitter(planned).function()
    assert planned.graph.nodes == order and planned.into == into and planned.dels == dels


def _assignments(source):
    """(target, `out=` name or None) of each `name = call(...)` statement."""
    found = []
    for stmt in ast.walk(ast.parse(source)):
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call) \
                and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            out = [k.value.id for k in stmt.value.keywords
                   if k.arg == "out" and isinstance(k.value, ast.Name)]
            found.append((stmt.targets[0].id, out[0] if out else None))
    return found


def test_the_mlp_deletes_no_name_whose_buffer_lives_on():
    """`y = np.f(..., out=x)`: x is not deleted on its own (its buffer is y's), but with y."""
    source = ad.emit(mlp_loss, *mlp_args(), argnums=0)
    dels = [set(re.split(r",\s*", line.strip()[4:])) for line in source.splitlines()
            if line.strip().startswith("del ")]
    for name, out in _assignments(source):
        if out is None or out == name:
            continue
        assert not any(out in names and name not in names for names in dels), (name, out)
