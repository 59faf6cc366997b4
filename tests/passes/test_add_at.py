"""The add_at pass (passes/add_at.py): a dense value plus or minus a scatter, as the dense
value with the values added at the index, in the dense value's buffer when it dies there
(`g[rows, y] += v`, `np.add.at(g, index, v)` for an index that repeats), in a copy when it
lives on. Every order of the operands; repeated indices, masks, slices; a dense operand
smaller than the scatter left alone; float32 kept; an input or an output never written
into; values against the graph as traced, the tape, finite differences (forward and
reverse), second order, vmap, and new values and batch sizes on the cached function."""

import numpy as np
import pytest
from graph_helpers import flat, run, traced

import autodiffgen as ad
from autodiffgen import passes, tape
from autodiffgen.graph import Index, Slot
from autodiffgen.plan import memory
from autodiffgen.rules.indexing import scatter_add
from autodiffgen.testing import check_grads

RNG = np.random.default_rng(16)


@pytest.fixture(autouse=True)
def passes_on(monkeypatch):
    """The tests read the optimized code (CI also runs the suite with AUTODIFFGEN_PASSES=0)."""
    monkeypatch.setattr(passes, "ENABLED", True)


def scattered(v, index, shape, unique):
    """The scatter a backward makes for `x[index]` (zeros of `shape`, v added at index),
    written in a forward so that each order of the operands can be asked for."""
    return scatter_add(v, index, index=Index((Slot(1),)), shape=shape, unique=unique)


UNIQUE, REPEATED = np.array([4, 0, 2]), np.array([1, 3, 1, 1])


def dense_plus(x, v):
    return np.sum(np.sin(np.exp(x) + scattered(v, UNIQUE, (5, 3), True)) ** 2)


def plus_dense(x, v):
    return np.sum(np.sin(scattered(v, REPEATED, (5, 3), False) + np.exp(x)) ** 2)


def dense_minus(x, v):
    return np.sum(np.sin(np.exp(x) - scattered(v, REPEATED, (5, 3), False)) ** 2)


def minus_dense(x, v):  # the negation taken by the product that makes the dense value
    return np.sum(np.sin(scattered(v, UNIQUE, (5, 3), True) - np.exp(x) * 0.5) ** 2)


def minus_dense_alone(x, v):  # a dense value something else reads too: negated itself
    d = np.exp(x)
    return np.sum(np.sin(scattered(v, UNIQUE, (5, 3), True) - d) ** 2) + np.sum(d)


ORDERS = {dense_plus: 3, plus_dense: 4, dense_minus: 4, minus_dense: 3, minus_dense_alone: 3}


def order_args(fun, dtype=np.float64):
    return (RNG.normal(size=(5, 3)).astype(dtype),
            RNG.normal(size=(ORDERS[fun], 3)).astype(dtype))


def backward_of(source):
    return source.split("# backward")[1]  # (the helpers come before the function)


@pytest.mark.parametrize("fun", ORDERS, ids=lambda f: f.__name__)
def test_every_order_is_rewritten_and_keeps_the_values(fun):
    args = order_args(fun)
    graph = traced(fun, *args, argnums=(0, 1))
    rewritten = passes.optimize(graph)
    assert any(n.prim is not None and n.prim.name == "add_at" for n in rewritten.nodes)
    assert not any(n.prim is not None and n.prim.name == "scatter_add" for n in rewritten.nodes)
    assert passes.add_at(rewritten)[1] is False  # a fixed point
    for got, want in zip(flat(run(rewritten, *args)), flat(run(graph, *args))):
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)
    forward = ad.value_and_grad(fun, argnums=(0, 1)).source(*args).split("# backward")[0]
    assert "_scatter_add(" not in forward
    assert ("np.add.at(" if fun in (plus_dense, dense_minus) else "] += ") in forward


@pytest.mark.parametrize("fun", ORDERS, ids=lambda f: f.__name__)
def test_gradients_agree_with_the_tape_and_finite_differences(fun):
    check_grads(fun, *order_args(fun), argnums=(0, 1))  # and forward mode
    small = order_args(fun, np.float32)
    check_grads(fun, *small, argnums=(0, 1), rtol=1e-4, atol=1e-5, fd=False)
    value, (gx, gv) = ad.value_and_grad(fun, argnums=(0, 1))(*small)
    assert value.dtype == gx.dtype == gv.dtype == np.float32


def test_the_dense_value_is_written_into_where_it_dies(monkeypatch):
    monkeypatch.setattr(memory, "MIN_ELEMENTS", 1)  # the small arrays' buffers reused too
    def f(x, v):  # exp is saved for its backward, exp * 2 dies at the sum
        return np.sum(np.sin(np.exp(x) * 2.0 + scattered(v, UNIQUE, (5, 3), True)) ** 2)
    x, v = order_args(dense_plus)
    body = ad.value_and_grad(f, argnums=(0, 1)).source(x, v).split("# forward")[1]
    assert "_scatter_add(" not in body
    assert "_add_at(multiply, np.s_[UNIQUE], v, unique=True, out=multiply)" in body
    check_grads(f, x, v, argnums=(0, 1))


def test_a_smaller_dense_operand_is_left_alone():
    def f(x, v):  # x (3,) broadcasts against the scatter's (5, 3)
        return np.sum(np.sin(np.exp(x) + scattered(v, UNIQUE, (5, 3), True)) ** 2)
    x, v = RNG.normal(size=3), RNG.normal(size=(3, 3))
    graph = passes.optimize(traced(f, x, v, argnums=(0, 1)))
    assert not any(n.prim is not None and n.prim.name == "add_at" for n in graph.nodes)
    check_grads(f, x, v, argnums=(0, 1))


def test_an_input_is_copied_not_written_into():
    def f(x, v):
        return np.sum(np.sin(x + scattered(v, UNIQUE, (5, 3), True)) ** 2)
    x, v = order_args(dense_plus)
    kept = x.copy()
    source = ad.value_and_grad(f, argnums=(0, 1)).source(x, v)
    assert "_add_at(x, np.s_[" in source and "out=x" not in source
    check_grads(f, x, v, argnums=(0, 1))
    ad.value_and_grad(f, argnums=(0, 1))(x, v)
    np.testing.assert_array_equal(x, kept)


def test_an_output_is_copied_not_written_into():
    def f(x, v):  # d is handed to the caller as it is (an auxiliary output)
        d = np.exp(x)
        return np.sum(np.sin(d + scattered(v, UNIQUE, (5, 3), True)) ** 2), d
    x, v = order_args(dense_plus)
    (value, d), grads = ad.value_and_grad(f, argnums=(0, 1), has_aux=True)(x, v)
    np.testing.assert_allclose(d, np.exp(x), rtol=1e-15)
    (tvalue, _), tgrads = tape.value_and_grad(f, (0, 1), has_aux=True)(x, v)
    np.testing.assert_allclose(value, tvalue, rtol=1e-13)
    for g, t in zip(grads, tgrads):
        np.testing.assert_allclose(g, t, rtol=1e-12)


# ---- the form a backward makes: a cotangent read densely and at an index -------------------
def picked_rows(W, x, rows, y):  # a cross-entropy of picks whose rows may repeat
    z = x @ W
    shifted = z - z.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return -log_probs[rows, y].mean()


def masked(x, m):
    return np.sum(np.sin(x) * x) + np.sum(np.tanh(x[m]) ** 2)


def sliced(x):
    return np.sum(np.cos(x) ** 2) - 3.0 * np.sum(x[1:4, ::2] ** 3)


def test_repeated_rows_are_added_with_np_add_at():
    W, x = RNG.normal(size=(4, 3)), RNG.normal(size=(6, 4))
    rows, y = np.array([0, 2, 2, 5, 0]), np.array([1, 1, 1, 0, 2])
    backward = backward_of(ad.value_and_grad(picked_rows).source(W, x, rows, y))
    assert "np.add.at(g_z, np.s_[rows, y], np.float64(-0.2))" in backward  # z, not z - max
    assert "np.negative(g_z" not in backward  # the sign taken by the row sum
    check_grads(picked_rows, W, x, rows, y)
    small = (W.astype(np.float32), x.astype(np.float32), rows, y)
    check_grads(picked_rows, *small, rtol=1e-4, atol=1e-5, fd=False)
    assert ad.grad(picked_rows)(*small).dtype == np.float32


def test_a_mask_and_a_slice():
    x = RNG.normal(size=(5, 6))
    m = RNG.uniform(size=(5, 6)) < 0.4
    assert "_scatter_add(" not in backward_of(ad.value_and_grad(masked).source(x, m))
    check_grads(masked, x, m)
    f, reference = ad.value_and_grad(masked), tape.value_and_grad(masked)
    for p in (0.4, 0.7, 0.1):  # other masks, other counts: the cached code
        m = RNG.uniform(size=(5, 6)) < p
        (v, g), (tv, tg) = f(x, m), reference(x, m)
        np.testing.assert_allclose(v, tv, rtol=1e-12)
        np.testing.assert_allclose(g, tg, rtol=1e-12, atol=1e-14)
    assert "_scatter_add(" not in backward_of(ad.value_and_grad(sliced).source(x))
    check_grads(sliced, x)
    check_grads(sliced, x.astype(np.float32), rtol=1e-4, atol=1e-5, fd=False)


def cross_entropy(W, x, y):
    z = np.tanh(x @ W)
    shifted = z - z.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return -log_probs[np.arange(len(y)), y].mean()


def ce_args(rows, dtype=np.float64):
    return (RNG.normal(size=(4, 3)).astype(dtype), RNG.normal(size=(rows, 4)).astype(dtype),
            RNG.integers(0, 3, rows))


def test_new_values_and_batch_sizes_on_the_cached_function():
    for dtype, tol in ((np.float64, 1e-12), (np.float32, 1e-5)):
        f, reference = ad.value_and_grad(cross_entropy), tape.value_and_grad(cross_entropy)
        for rows in (11, 7, 3, 2, 11):
            args = ce_args(rows, dtype)
            (v, g), (tv, tg) = f(*args), reference(*args)
            assert g.dtype == dtype
            np.testing.assert_allclose(v, tv, rtol=tol)
            np.testing.assert_allclose(g, tg, rtol=tol, atol=tol)
        assert f.cache_info().misses == 1
        assert "[rows, y] += " in f.source(*ce_args(5, dtype))


def test_hessian_of_a_cross_entropy():
    """Second order through add_at: the gradient's code, traced again, records add_at."""
    W, x, y = ce_args(6)
    hess = ad.hessian(cross_entropy)(W, x, y).reshape(W.size, W.size)
    grad, eps = tape.grad(cross_entropy), 1e-5
    fd = np.empty_like(hess)
    for k in range(W.size):
        step = np.zeros(W.size)
        step[k] = eps
        fd[:, k] = (grad(W + step.reshape(W.shape), x, y)
                    - grad(W - step.reshape(W.shape), x, y)).ravel() / (2 * eps)
    np.testing.assert_allclose(hess, fd, rtol=1e-6, atol=1e-8)
    v = RNG.normal(size=W.shape)
    np.testing.assert_allclose(ad.hvp(cross_entropy, (W, x, y), (v, None, None)),
                               (hess @ v.ravel()).reshape(W.shape), rtol=1e-10, atol=1e-12)


def test_per_example_gradients_by_vmap():
    W, x, y = ce_args(5)
    per_example = ad.vmap(ad.grad(cross_entropy), in_axes=(None, 0, 0))(W, x[:, None], y[:, None])
    want = np.stack([tape.grad(cross_entropy)(W, x[i:i + 1], y[i:i + 1]) for i in range(5)])
    np.testing.assert_allclose(per_example, want, rtol=1e-12, atol=1e-14)
