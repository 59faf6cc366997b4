"""The sums pass (passes/sums.py): a full sum or mean of a sum, a scaled value, a
negation or (1-D float64) a product, taken apart when nothing else reads what it reduces:
no full-size temporary is written for the reduction. Values against the graph as traced,
the tape and finite differences; float32 stays float32 (and keeps np.sum for products);
batch sizes still generalize; second derivatives; what is not rewritten."""

import numpy as np
import pytest
from graph_helpers import check_both_precisions, flat, run, served_by_one_trace, traced

import autodiffgen as ad
from autodiffgen import passes, tape
from autodiffgen.testing import check_grads

RNG = np.random.default_rng(61)


@pytest.fixture(autouse=True)
def passes_on(monkeypatch):
    """The tests read the optimized code (CI also runs the suite with AUTODIFFGEN_PASSES=0)."""
    monkeypatch.setattr(passes, "ENABLED", True)


def softplus_minus_linear(w, X, y):  # a logistic regression's loss
    z = X @ w + 0.1
    return (np.logaddexp(0.0, z) - y * z).mean() + 0.5 * 1e-3 * (w * w).sum()


def scaled_end(x):  # the end of an elementwise chain
    n = np.sin(x) * x
    return (np.tanh(n) * 0.5 + n).sum()


def negated_quotient(x):
    return np.sum(-(np.cos(x) / 3.0)) + np.mean(np.exp(x) - np.sin(x))


def over_all_axes(x):
    return np.sum(np.tanh(x) + x * x, axis=(0, 1)) + np.sum(np.sin(x) * 2.0, axis=(-1, 0))


def forward_of(fun, *args, argnums=0):
    source = ad.value_and_grad(fun, argnums=argnums).source(*args)
    lines = source.split("# forward")[1].split("# backward")[0].splitlines()
    return [line.split("  # ")[0].strip() for line in lines if not line.strip().startswith("#")]


CASES = {
    softplus_minus_linear: ((RNG.normal(size=5), RNG.normal(size=(12, 5)),
                             (RNG.uniform(size=12) < 0.5).astype(float)), 0),
    scaled_end: ((RNG.normal(size=30),), 0),
    negated_quotient: ((RNG.normal(size=(3, 4)),), 0),
    over_all_axes: ((RNG.normal(size=(3, 4)),), 0),
}


@pytest.mark.parametrize("fun", CASES, ids=lambda f: f.__name__)
def test_the_pass_rewrites_and_keeps_the_values(fun):
    args, argnums = CASES[fun]
    graph = traced(fun, *args, argnums=argnums)
    without = passes.optimize(graph, pipeline=tuple(p for p in passes.PIPELINE
                                                    if p is not passes.sums))
    assert passes.sums(without)[1]
    rewritten = passes.optimize(graph)
    assert passes.sums(rewritten)[1] is False  # a fixed point
    for got, want in zip(flat(run(rewritten, *args)), flat(run(graph, *args))):
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("enabled", [True, False])
@pytest.mark.parametrize("fun", CASES, ids=lambda f: f.__name__)
def test_gradients_agree_with_the_tape_and_finite_differences(fun, enabled, monkeypatch):
    monkeypatch.setattr(passes, "ENABLED", enabled)
    args, argnums = CASES[fun]
    check_both_precisions(fun, args, argnums)


def test_no_temporary_for_a_logistic_loss_and_every_batch_size_served():
    w, X = RNG.normal(size=5), RNG.normal(size=(40, 5))
    y = (RNG.uniform(size=40) < 0.5).astype(float)
    forward = forward_of(softplus_minus_linear, w, X, y)
    assert "matmul = np.dot(y, z)" in forward and "divide = matmul / n" in forward
    assert not any("y * z" in line for line in forward)
    assert "np.dot(w, w)" in "\n".join(forward)
    served_by_one_trace(softplus_minus_linear,
                        [(w + 0.1 * rows, X[:rows], y[:rows]) for rows in (40, 33, 7, 2)],
                        rtol=1e-13)
    # float32: the product's sum stays np.sum (pairwise), in float32
    forward = forward_of(softplus_minus_linear, w.astype(np.float32), X.astype(np.float32),
                         y.astype(np.float32))
    assert "np.dot(y, z)" not in "\n".join(forward) and any("y * z" in line for line in forward)


def test_the_end_of_a_chain_writes_no_full_array():
    x = RNG.normal(size=30).astype(np.float32)
    forward = forward_of(scaled_end, x)
    assert "sum_1 = tanh.sum()" in forward and "multiply = sum_1 * 0.5" in forward
    assert not any("tanh * 0.5" in line for line in forward)
    value, grad = ad.value_and_grad(scaled_end)(x)
    assert value.dtype == grad.dtype == np.float32


def test_second_order():
    args = CASES[softplus_minus_linear][0]
    w, X, y = args
    grad = ad.grad(softplus_minus_linear)

    def outer(w):
        return np.sum(np.sin(ad.grad(softplus_minus_linear)(w, X, y)))
    v, eps = RNG.normal(size=w.shape), 1e-5
    fd = (np.sum(np.sin(grad(w + eps * v, X, y)))
          - np.sum(np.sin(grad(w - eps * v, X, y)))) / (2 * eps)
    np.testing.assert_allclose(np.sum(ad.grad(outer)(w) * v), fd, rtol=1e-6)
    fd = (grad(w + eps * v, X, y) - grad(w - eps * v, X, y)) / (2 * eps)
    np.testing.assert_allclose(ad.hvp(softplus_minus_linear, (w, X, y), (v, None, None)), fd,
                               rtol=1e-6, atol=1e-9)


def test_zero_d_and_several_calls():
    f = ad.value_and_grad(negated_quotient)
    reference = tape.value_and_grad(negated_quotient)
    for x in (np.float64(0.3), np.array(-1.2), np.array(2.0)):
        (v, g), (tv, tg) = f(x), reference(x)
        np.testing.assert_allclose(v, tv, rtol=1e-14)
        np.testing.assert_allclose(g, tg, rtol=1e-14)
        check_grads(negated_quotient, x)


def partial_axis(x):
    return np.sum(np.sum(np.tanh(x) + x, axis=1) ** 2)


def broadcast(x, c):
    return np.sum(np.tanh(x) + c)


def read_twice(x):
    s = np.tanh(x) + x
    return np.sum(s) + np.sum(np.sin(s))


def guarded(x):
    if np.sum(np.tanh(x) + x) > 0:
        return np.sum(np.sin(x))
    return np.sum(x)


def add_tree(x):  # y + x * c repeated: left to the adds, not one reduction per term
    y = np.tanh(x)
    for c in (0.5, 0.25, 2.0):
        y = y + np.sin(x) * c
    return np.sum(y)


def mixed_precision(x):  # float32 * a float64 scalar is float64: not taken apart
    return np.sum(np.tanh(x) * np.float64(0.3))


@pytest.mark.parametrize("fun, args", [
    (partial_axis, (RNG.normal(size=(3, 4)),)),
    (broadcast, (RNG.normal(size=(3, 4)), RNG.normal(size=(1, 4)))),
    (read_twice, (RNG.normal(size=5),)),
    (guarded, (np.abs(RNG.normal(size=5)),)),
    (mixed_precision, (RNG.normal(size=5).astype(np.float32),)),
    (add_tree, (RNG.normal(size=5),)),
], ids=lambda a: getattr(a, "__name__", ""))
def test_what_is_left_as_it_is(fun, args):
    graph = passes.optimize(traced(fun, *args), pipeline=tuple(
        p for p in passes.PIPELINE if p is not passes.sums))
    assert passes.sums(graph)[1] is False
    check_grads(fun, *args, argnums=0)


def test_a_long_scaled_chain_is_not_taken_apart_round_by_round():
    """sum(x * c * c ...): only a factor above a value that stays whole comes out, so the
    pass changes nothing here and optimize does not run a round per factor."""
    def f(x):
        for _ in range(50):
            x = x * 1.01
        return x.sum()
    x = RNG.normal(size=4)
    graph = passes.optimize(traced(f, x))
    assert passes.sums(graph)[1] is False
    assert sum(n.prim.name == "sum" for n in graph.nodes if n.prim is not None) == 1
    check_grads(f, x)


def cross_entropy(W, x, y):
    z = x @ W
    shifted = z - z.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return -log_probs[np.arange(len(y)), y].mean()


def reversed_rows(W, x, y):  # rows n-1, ..., 0: one per row too, but not np.arange(n)
    z = np.tanh(x @ W)
    picked = z[np.arange(len(y))[::-1], y]
    return np.sum(np.sum(np.zeros_like(z) + z, axis=1) * 0.0) + np.sum(picked ** 2)


def ce_args(rows=12, dtype=np.float64):
    return (RNG.normal(size=(5, 4)).astype(dtype), RNG.normal(size=(rows, 5)).astype(dtype),
            RNG.integers(0, 4, rows))


def test_the_row_sums_of_a_pick_are_its_values():
    """The cross-entropy's backward: softmax scaled, less the pick, with no row sum of
    the scattered cotangent; at every batch size, in float64 and float32."""
    backward = ad.value_and_grad(cross_entropy).source(*ce_args()).split("# backward")[1]
    assert "np.sum(g_log_probs" not in backward and "_scatter_add(" not in backward
    assert "[rows, y] += " in backward  # the pick added in place (passes/add_at.py)
    for dtype, tol in ((np.float64, 1e-12), (np.float32, 1e-5)):
        f = ad.value_and_grad(cross_entropy)
        reference = tape.value_and_grad(cross_entropy)
        for rows in (12, 9, 4, 2):
            args = ce_args(rows, dtype)
            (v, g), (tv, tg) = f(*args), reference(*args)
            assert v.dtype == g.dtype == dtype
            np.testing.assert_allclose(v, tv, rtol=tol)
            np.testing.assert_allclose(g, tg, rtol=tol, atol=tol)
        assert f.cache_info().misses == 1
    check_grads(cross_entropy, *ce_args(7))
    W, x, y = ce_args(6)
    v, eps = RNG.normal(size=W.shape), 1e-5
    grad = ad.grad(cross_entropy)
    fd = (grad(W + eps * v, x, y) - grad(W - eps * v, x, y)) / (2 * eps)
    np.testing.assert_allclose(ad.hvp(cross_entropy, (W, x, y), (v, None, None)), fd,
                               rtol=1e-6, atol=1e-8)


def log_softmax_of_columns(W, x, y):  # over axis 0, a pick per column
    z = (x @ W).T
    log_probs = z - np.log(np.exp(z).sum(axis=0))
    return -np.sum(log_probs[y, np.arange(len(y))] * x[:, 0])


def repeated_rows(W, x, y):
    z = x @ W
    log_probs = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return -np.sum(log_probs[np.arange(len(y)) // 2, y] * x[:, 0])


def several_per_row(W, x, y):
    z = x @ W
    log_probs = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return -np.sum(log_probs[np.arange(len(y))[:, None], np.array([[0, 2, 2]])] * x[:, :3])


@pytest.mark.parametrize("f", [reversed_rows, log_softmax_of_columns, repeated_rows,
                               several_per_row], ids=lambda f: f.__name__)
def test_a_scatters_sums_from_its_values(f):
    """Rows other than np.arange(n), in any order or repeated: the values scattered into
    the sum's shape; a row per column: the values; several picks per row: the sum."""
    args = ce_args(6)
    graph = passes.optimize(traced(f, *args))
    for got, want in zip(flat(run(graph, *args)), flat(run(traced(f, *args), *args))):
        np.testing.assert_allclose(got, want, rtol=1e-13)
    check_grads(f, *args)
    small = (*(a.astype(np.float32) for a in args[:2]), args[2])
    check_grads(f, *small, rtol=1e-4, atol=1e-5, fd=False)
    backward = ad.value_and_grad(f).source(*args).split("# backward")[1]
    assert (".sum(axis=1" in backward) == (f is several_per_row), backward
