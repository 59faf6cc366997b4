"""The zero_products pass: a product with a constant array of zeros (an RNN's state that
starts at np.zeros) is zeros, and what adds it drops it."""

import numpy as np
import pytest
from graph_helpers import run, traced

import autodiffgen as ad
from autodiffgen import passes
from autodiffgen.graph import op
from autodiffgen.testing import check_grads

RNG = np.random.default_rng(29)


def rnn(w, v, xs):
    h = np.zeros((xs.shape[1], w.shape[0]))
    for t in range(xs.shape[0]):
        h = np.tanh(xs[t] @ v + h @ w)
    return np.sum(h ** 2)


def wide(w, x):  # a product of zeros larger than fold's limit: a broadcast of one zero
    h = np.zeros((64, 40))
    return np.sum(np.sin(x @ w + h @ w) + (h * x[:, :40]).sum())


def rnn_args():
    return RNG.normal(size=(3, 3)) / 2, RNG.normal(size=(2, 3)) / 2, RNG.normal(size=(4, 5, 2))


def wide_args():
    return RNG.normal(size=(40, 40)) / 8, RNG.normal(size=(64, 40))


@pytest.mark.parametrize("fun, args_of", [(rnn, rnn_args), (wide, wide_args)])
def test_the_products_of_zeros_are_gone(fun, args_of):
    args = args_of()
    graph = traced(fun, *args, argnums=(0, 1))
    reads_zeros = [n for n in graph.nodes if op(n) in ("matmul", "multiply") and any(
        isinstance(a, np.ndarray) and a.size > 1 and not a.any() for a in n.args)]
    assert reads_zeros  # as traced: h @ w at the first step, and its backward
    folded, changed = passes.zero_products(graph)
    assert changed
    optimized = passes.optimize(graph)
    assert not [n for n in optimized.nodes if op(n) in ("matmul", "multiply") and any(
        isinstance(a, np.ndarray) and a.size > 1 and not a.any() for a in n.args)]
    assert len(optimized.nodes) < len(passes.optimize(graph, tuple(
        p for p in passes.PIPELINE if p is not passes.zero_products)).nodes)
    want = run(graph, *args)
    for g in (folded, optimized):
        got = run(g, *args)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
        for a, b in zip(got[1], want[1]):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("enabled", [True, False])
def test_gradients_agree_with_finite_differences(enabled, monkeypatch):
    monkeypatch.setattr(passes, "ENABLED", enabled)
    check_grads(rnn, *rnn_args(), argnums=(0, 1))
    check_grads(wide, *wide_args(), argnums=(0, 1))


@pytest.mark.usefixtures("written_out")
def test_the_rnn_code_has_no_array_of_zeros():
    source = ad.emit(rnn, *rnn_args(), argnums=(0, 1))
    if passes.ENABLED:  # no `zeros @ w` in the forward, no `zeros.T @ g` in the backward
        assert "zeros" not in source
