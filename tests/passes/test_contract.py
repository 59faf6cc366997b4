"""The contraction pass: einsums of two or more operands as matmuls (passes/contract.py,
planned by contraction.py).

Each einsum is checked against np.einsum (values, float64 and float32), its gradients
against the tape and central finite differences (reverse, forward, second order), with
the pass on and off; its plan for copies; and its code: a comment naming the einsum,
`x.T @ g` where BLAS reads a transposed operand, np.einsum kept where no GEMM is there.
A graph generalized over the batch size still agrees at the sizes it was not traced at.
"""

import numpy as np
import pytest
from graph_helpers import flat, run, traced

import autodiffgen as ad
from autodiffgen import passes
from autodiffgen.passes import contraction
from autodiffgen.passes.contraction import plan
from autodiffgen.testing import check_grads

RNG = np.random.default_rng(16)

# subscripts, operand shapes, whether the pass makes it matmuls
SPECS = [
    ("ij,jk->ik", [(4, 5), (5, 3)], True),
    ("ij,jk->ki", [(4, 5), (5, 3)], True),               # the result transposed
    ("bij,bjk->bik", [(2, 4, 5), (2, 5, 3)], True),      # a batch index
    ("ij,ij->", [(3, 4), (3, 4)], True),                 # a 0-d result
    ("i,i->", [(6,), (6,)], True),
    ("ij,j->i", [(4, 5), (5,)], True),
    ("bckhw,ock->bohw", [(2, 3, 4, 5, 5), (6, 3, 4)], True),  # a convolution on patches
    ("bckhw,bohw->ock", [(2, 3, 4, 5, 5), (2, 6, 5, 5)], True),  # its weights' gradient
    ("ijk,jl->il", [(3, 4, 2), (4, 5)], True),           # k summed within one operand
    ("ij,jk,kl->il", [(3, 4), (4, 5), (5, 2)], True),    # three operands
    ("ab,bc,cd,de->ae", [(2, 6), (6, 3), (3, 5), (5, 2)], True),
    ("i,ij,j->", [(4,), (4, 5), (5,)], True),            # three operands, a 0-d result
    ("ijk,jl,lk->i", [(3, 4, 2), (4, 5), (5, 2)], True),
    ("...ij,...jk->...ik", [(2, 3, 4), (4, 5)], True),   # an ellipsis, broadcast
    ("...ij,...jk->...ik", [(1, 3, 4), (2, 4, 5)], False),  # a size-1 axis broadcast
    ("ii,ij->j", [(4, 4), (4, 3)], False),               # a repeated index
    ("i,j->ij", [(3,), (4,)], True),                     # an outer product: a multiply
]
IDS = [f"{s}-{'x'.join(map(str, shapes[0]))}" for s, shapes, _ in SPECS]


def loss_of(subscripts):
    """sum(sin(einsum)), its operands named parameters (as the trace names them)."""
    arity = subscripts.count(",") + 1
    if arity == 2:
        return lambda a, b: np.sum(np.sin(np.einsum(subscripts, a, b)))
    if arity == 3:
        return lambda a, b, c: np.sum(np.sin(np.einsum(subscripts, a, b, c)))
    return lambda a, b, c, d: np.sum(np.sin(np.einsum(subscripts, a, b, c, d)))


def operands(shapes, dtype=np.float64):
    return [RNG.normal(size=s).astype(dtype) for s in shapes]


@pytest.fixture
def forced(monkeypatch):
    """Every einsum that is a GEMM made one, however small (the sizes here are small, so
    that finite differences are quick; the cost model would leave some to np.einsum)."""
    force(monkeypatch)


def force(monkeypatch):
    monkeypatch.setitem(contraction.COST, "einsum_call", 1e12)
    contraction._plan.cache_clear()  # plans made under the other costs
    monkeypatch.setattr(contraction, "_plan", contraction._plan.__wrapped__)


@pytest.mark.parametrize(("subscripts", "shapes", "lowered"), SPECS, ids=IDS)
def test_the_pass_keeps_the_values(subscripts, shapes, lowered, forced):
    args = operands(shapes)
    argnums = tuple(range(len(args)))
    graph = traced(loss_of(subscripts), *args, argnums=argnums)
    rewritten, _ = passes.contract(graph)
    forward = [n.prim.name for n in rewritten.nodes if n.grad_of is None]
    assert ("einsum" not in forward) == lowered, forward  # the backward's may be GEMMs
    if lowered:
        assert "einsum" not in [n.prim.name for n in rewritten.nodes]
    before, after = flat(run(graph, *args)), flat(run(rewritten, *args))
    for a, b in zip(before, after):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12)
    assert passes.contract(rewritten)[1] is False  # a fixed point


@pytest.mark.parametrize("how", ["forced", "costed", "off"])
@pytest.mark.parametrize(("subscripts", "shapes", "lowered"), SPECS, ids=IDS)
def test_gradients_agree_with_the_tape_and_finite_differences(subscripts, shapes, lowered,
                                                               how, monkeypatch):
    monkeypatch.setattr(passes, "ENABLED", how != "off")
    if how == "forced":
        force(monkeypatch)
    args = operands(shapes)
    argnums = tuple(range(len(args)))
    value, _ = check_grads(loss_of(subscripts), *args, argnums=argnums)
    np.testing.assert_allclose(value, np.sum(np.sin(np.einsum(subscripts, *args))),
                               rtol=1e-12)
    args32 = [a.astype(np.float32) for a in args]  # float32 stays float32 (check_grads checks)
    value, _ = check_grads(loss_of(subscripts), *args32, argnums=argnums, rtol=2e-3,
                           atol=2e-3, fd=False)
    assert value.dtype == np.float32


@pytest.mark.parametrize(("subscripts", "shapes"), [
    ("bij,bjk->bik", [(2, 4, 5), (2, 5, 3)]), ("ij,jk,kl->il", [(3, 4), (4, 5), (5, 2)]),
    ("bckhw,ock->bohw", [(2, 3, 4, 5, 5), (6, 3, 4)])])
def test_second_order(subscripts, shapes, forced):
    """The gradient of a function of the gradient, against finite differences of it."""
    args = operands(shapes)
    first = ad.grad(loss_of(subscripts), argnums=0)

    def outer(a, *rest):
        return np.sum(first(a, *rest) ** 2)

    check_grads(outer, *args, argnums=0, fwd=False)


# ---- the plan -------------------------------------------------------------------------------
def test_a_convolution_and_its_weights_gradient_copy_nothing():
    """'bckhw,ock->bohw': W (o, ck) @ patches (b, ck, hw), broadcast over b, is already
    'bohw'; its gradient 'bckhw,bohw->ock' sums b after a batch of products (ck, hw) @
    (hw, o), then transposes the small (ck, o) result (BLAS is slower on (o, hw) @ (hw,
    ck), whose right operand it reads transposed)."""
    (_, _, conv), = plan(["bckhw", "ock"], "bohw", [(8, 16, 9, 16, 16), (32, 16, 9)])[0]
    assert conv.kind == "matmul" and conv.result == "bohw"
    assert not (conv.left.copy or conv.right.copy or conv.left.perm or conv.right.perm)
    steps, final = plan(["bckhw", "bohw"], "ock", [(8, 16, 9, 16, 16), (8, 32, 16, 16)])
    (_, _, grad), = steps
    assert grad.kind == "matmul" and not (grad.left.copy or grad.right.copy)
    assert grad.demoted == (0,) and final == (2, 0, 1)


def test_three_operands_go_in_the_cheapest_order():
    """(A @ B) @ v costs a matrix product, A @ (B @ v) two matrix-vector products."""
    steps, _ = plan(["ij", "jk", "k"], "i", [(200, 200), (200, 200), (200,)])
    assert [(i, j) for i, j, _ in steps] == [(1, 2), (0, 1)]


def test_outer_products_are_products():
    (_, _, pair), = plan(["i", "j"], "ji", [(3,), (4,)])[0]
    assert pair.kind == "multiply" and pair.result == "ji"
    assert pair.left.shape is None and pair.right.shape == (4, 1)  # j[:, None] * i


# ---- the code -------------------------------------------------------------------------------
def code_of(source):
    return "\n".join(line.split("#")[0] for line in source.splitlines())


def test_the_code_names_the_einsum_and_reads_transposes_as_blas_does(forced):
    source = ad.emit(lambda a, b: np.sum(np.sin(np.einsum("bi,bj->ij", a, b))),
                     np.ones((8, 3)), np.ones((8, 4)), argnums=(0, 1))
    if not passes.ENABLED:
        assert "np.einsum('bi,bj->ij', a, b)" in source
        return
    assert "# einsum 'bi,bj->ij' as 1 matmul" in source
    assert "a.T @ b" in code_of(source) and "np.einsum" not in code_of(source), source


def test_a_convolution_by_einsum_is_one_matmul_each_way(forced):
    def conv(W, x):
        patches = np.stack([x[:, :, i:i + 4, j:j + 4] for i in range(2) for j in range(2)], 2)
        return np.sum(np.einsum("bckhw,ock->bohw", patches, W.reshape(len(W), -1, 4)) ** 2)

    W, x = RNG.normal(size=(6, 3, 2, 2)), RNG.normal(size=(2, 3, 5, 5))
    check_grads(conv, W, x, argnums=0)
    if passes.ENABLED:
        code = code_of(ad.emit(conv, W, x))
        assert code.count(" @ ") == 2 and "np.einsum" not in code


# ---- the batch size ------------------------------------------------------------------------
def test_one_trace_serves_other_batch_sizes(forced):
    """The plan is made at the traced size; the code it makes is right at every size."""
    def loss(W, V, x):
        h = np.einsum("bi,ij->bj", x, W)
        return np.sum(np.einsum("bj,bk,jk->b", h, np.tanh(h @ V), V) ** 2) / len(x)

    W, V = RNG.normal(size=(5, 4)), RNG.normal(size=(4, 4))
    f = ad.value_and_grad(loss, argnums=(0, 1))
    f(W, V, RNG.normal(size=(12, 5)))
    for n in (11, 7, 3):
        x = RNG.normal(size=(n, 5))
        value, grads = f(W, V, x)
        want, want_grads = ad.tape.value_and_grad(loss, argnums=(0, 1))(W, V, x)
        np.testing.assert_allclose(value, want, rtol=1e-12)
        for g, w in zip(grads, want_grads):
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
    assert "Serves every batch size" in f.source(W, V, x)


# ---- products transposed, products with shared weights ------------------------------------
def attention_scores(q, k):
    return np.sum(np.tanh(q @ np.swapaxes(k, 1, 2)) ** 2)


def nested_transposes(a, b, c):
    return np.sum(np.sin(((a @ b).T @ c).T @ (b.T @ a.T).T))


@pytest.mark.parametrize("fun", [attention_scores, nested_transposes], ids=lambda f: f.__name__)
def test_a_transposed_product_is_the_product_swapped(fun):
    """k's gradient in q @ k.T is (q.T @ g).T: computed as g.T @ q, in the layout it is
    read in. Every node reads only nodes computed before it."""
    args = [RNG.normal(size=(2, 5, 3)), RNG.normal(size=(2, 5, 3))] if fun is attention_scores \
        else [RNG.normal(size=(4, 4)) for _ in range(3)]
    argnums = tuple(range(len(args)))
    check_grads(fun, *args, argnums=argnums)
    graph = passes.optimize(traced(fun, *args, argnums=argnums))
    seen = set(graph.inputs)
    for node in graph.nodes:
        assert all(a in seen for a in node.args if type(a) is type(node)), node
        seen.add(node)
    if fun is attention_scores and passes.ENABLED:
        transposed_products = [n for n in graph.nodes if n.prim.name == "transpose"
                               and n.args[0].prim is not None and n.args[0].prim.name == "matmul"]
        assert not transposed_products
    for a, b in zip(flat(run(graph, *args)), flat(ad.tape.value_and_grad(fun, argnums)(*args))):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_shared_weights_get_one_gemm_each_way():
    """x (b, s, d) @ W (d, e): W's gradient and x's are each one 2-D GEMM over b*s rows."""
    def loss(W, x):
        return np.sum(np.tanh(x @ W) ** 2)

    W, x = RNG.normal(size=(3, 4)), RNG.normal(size=(2, 5, 3))
    check_grads(loss, W, x, argnums=(0, 1))
    check_grads(loss, W.astype(np.float32), x.astype(np.float32), argnums=(0, 1), rtol=2e-3,
                atol=2e-3, fd=False)
    graph = traced(loss, W, x, argnums=(0, 1))
    products = [n for n in graph.nodes if n.prim.name == "matmul" and n.grad_of is not None]
    assert [len(n.shape) for n in products] == [2, 2]
