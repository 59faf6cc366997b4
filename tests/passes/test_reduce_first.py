"""Scaling after reducing (issue 29): a reduction over some axes of a negation, or of a
product or quotient by a factor constant along those axes, reduces first and scales the
small result (passes/sums.py, `sum(-a * g) = -sum(a * g)`, `sum(a / c) = sum(a) / c`); a
whole sum of a product by a factor spread along some axes sums over them first
(passes/weighted_sums.py, `sum((g * a + b) * d) = g @ sum(a * d, 0) + b @ sum(d, 0)`),
the column sums shared with the backward's (cse: `a * d` is `d * a`); a
power of two goes into a smaller broadcast factor, not the array (passes/exact_scales.py);
a reshape that only puts axes of length 1 in front is left to broadcasting
(passes/simplify.py). On a batch norm's train-mode forward as course code writes it:
values against the graph as traced and eager NumPy, gradients against the tape and
central differences, float32 kept, every batch size and a branch's other path served."""

import re

import numpy as np
import pytest
from graph_helpers import check_both_precisions, flat, rewrites_alone, run, traced

import autodiffgen as ad
from autodiffgen import passes, tape
from autodiffgen.graph import Node, op
from autodiffgen.testing import check_grads

RNG = np.random.default_rng(2029)


@pytest.fixture(autouse=True)
def passes_on(monkeypatch):
    """The tests read the optimized code (CI also runs the suite with AUTODIFFGEN_PASSES=0)."""
    monkeypatch.setattr(passes, "ENABLED", True)


def batchnorm(x, gamma, beta, dout):
    mean = x.mean(axis=0)
    centered = x - mean
    var = np.mean(centered ** 2, axis=0)
    x_hat = centered / np.sqrt(var + 1e-5)
    return np.sum((gamma * x_hat + beta) * dout)


def columns_scaled(x, c):  # c one per column: the sum over rows takes it out
    return np.sum(np.sin(np.sum(-np.tanh(x) / c, axis=0)))


def rows_scaled(x, c):  # c one per row, kept dims: the sum over columns takes it out
    return np.sum(np.sum(np.tanh(x) * c, axis=1, keepdims=True) ** 2)


def mean_of_3d(x, c):  # axes 0 and 2 reduced, c along axis 1 only
    return np.sum(np.cos(np.mean(np.exp(x) * c, axis=(0, 2), keepdims=True)))


def by_a_number(x, c):  # c 0-d
    return np.sum(np.sin(np.sum(np.tanh(x) * c, axis=1)))


def gain_shift(x, gamma, beta, dout):  # a layer's `sum(out * dout)`: column sums, dots
    return np.sum((gamma * np.tanh(x) + beta) * dout)


def spread_3d(x, c, dout):  # c (1, d) against (m, n, d): spread along two axes
    return np.sum((np.sin(x) * c) * dout)


def by_a_0d_array(x, c, dout):
    return np.sum(c * (np.exp(x) * dout))


def branch(x, gamma, beta, dout):  # another path on another sign
    if np.sum(x) > 0:
        return batchnorm(x, gamma, beta, dout)
    return batchnorm(-x, gamma, beta, dout) * 2.0


def bn_args(n=6, d=4, dtype=np.float64):
    return tuple(a.astype(dtype) for a in (
        3.0 + 2.0 * RNG.normal(size=(n, d)), 1.0 + 0.1 * RNG.normal(size=d),
        RNG.normal(size=d), RNG.normal(size=(n, d))))


CASES = {
    batchnorm: (bn_args(), (0, 1, 2)),
    columns_scaled: ((RNG.normal(size=(5, 3)), 1.5 + RNG.uniform(size=3)), (0, 1)),
    rows_scaled: ((RNG.normal(size=(5, 3)), RNG.normal(size=(5, 1))), (0, 1)),
    mean_of_3d: ((RNG.normal(size=(2, 3, 4)), RNG.normal(size=(3, 1))), (0, 1)),
    by_a_number: ((RNG.normal(size=(3, 4)), np.array(0.7)), (0, 1)),
    gain_shift: ((RNG.normal(size=(5, 3)), RNG.normal(size=3), RNG.normal(size=3),
                  RNG.normal(size=(5, 3))), (0, 1, 2)),
    spread_3d: ((RNG.normal(size=(2, 3, 4)), RNG.normal(size=(1, 4)),
                 RNG.normal(size=(2, 3, 4))), (0, 1)),
    by_a_0d_array: ((RNG.normal(size=(3, 4)), np.array(1.3), RNG.normal(size=(3, 4))), (0, 1)),
}


def reductions_of_scaled(graph):
    """The reductions of a full-size negation, product or quotient (as large as the first
    argument, x) by a factor spread along some axes that the graph still computes."""
    size = np.prod(graph.inputs[0].shape)
    return [n for n in graph.nodes if op(n) in ("sum", "mean")
            and op(n.args[0]) in ("negative", "multiply", "divide")
            and np.prod(n.args[0].shape) >= size and _scaled(n.args[0])]


def _scaled(x):
    return op(x) == "negative" or any(
        type(a) is not Node or a.shape != x.shape or _scaled(a) for a in x.args)


@pytest.mark.parametrize("enabled", [True, False])
@pytest.mark.parametrize("fun", CASES, ids=lambda f: f.__name__)
def test_the_reduction_comes_first_and_the_gradients_agree(fun, enabled, monkeypatch):
    """With the passes, sums rewrites what the others leave (to a fixed point), fewer
    reductions of a scaled value remain, and the values are the graph's as traced and
    eager NumPy's; with and without, the tape's and central differences', float32 kept."""
    args, argnums = CASES[fun]
    if enabled:
        graph = traced(fun, *args, argnums=argnums)
        without, rewritten = rewrites_alone(graph, passes.sums, args, rtol=1e-12)
        assert len(reductions_of_scaled(rewritten)) < len(reductions_of_scaled(without))
        np.testing.assert_allclose(flat(run(rewritten, *args))[0], fun(*args), rtol=1e-13)
    monkeypatch.setattr(passes, "ENABLED", enabled)
    check_both_precisions(fun, args, argnums)


def varies_along(x, c):  # c one per row, the rows reduced: sum(x * c, axis=0) no scaling
    return np.sum(np.sin(np.sum(np.tanh(x) * c, axis=0)))


def lines_up_otherwise(x, c):  # c (3, 1) against the (3,) mean: it would need a reshape
    return np.sum(np.cos(np.mean(np.exp(x) * c, axis=(0, 2))))


@pytest.mark.parametrize("fun, args", [
    (varies_along, (RNG.normal(size=(5, 3)), RNG.normal(size=(5, 1)))),
    (lines_up_otherwise, (RNG.normal(size=(2, 3, 4)), RNG.normal(size=(3, 1)))),
], ids=lambda a: getattr(a, "__name__", ""))
def test_a_factor_that_is_not_constant_along_the_axes_stays_inside(fun, args):
    graph = passes.optimize(traced(fun, *args, argnums=(0, 1)),
                            pipeline=tuple(p for p in passes.PIPELINE if p is not passes.sums))
    assert passes.sums(graph)[1] is False
    check_grads(fun, *args, argnums=(0, 1))


def test_batchnorms_backward_reduces_before_it_scales():
    """The emitted backward negates and divides the (d,) sums, never the (n, d) arrays
    they reduce, and scales the (1, d) row by 2 rather than the centered values; float32
    stays float32."""
    args = bn_args(n=64, d=8)
    source = ad.emit(batchnorm, *args, argnums=(0, 1, 2))
    backward = source.split("# backward")[1]
    negated = re.findall(r"np\.negative\((\w+)", backward)
    sums = set(re.findall(r"(\w+) = \w+\.sum\(axis=0\)", backward))
    assert negated and set(negated) <= sums, backward  # only sums are negated
    assert "2 * centered" not in backward and "np.multiply(2, centered" not in backward
    assert not any(op(n) in ("sum", "mean") and op(n.args[0]) in ("negative", "divide")
                   for n in passes.optimize(traced(batchnorm, *args, argnums=(0, 1, 2))).nodes)
    value, grads = ad.value_and_grad(batchnorm, argnums=(0, 1, 2))(*bn_args(dtype=np.float32))
    assert value.dtype == np.float32 and all(g.dtype == np.float32 for g in grads)


def test_other_batch_sizes_and_the_other_branch_from_the_cache():
    f = ad.value_and_grad(branch, argnums=(0, 1, 2))
    reference = tape.value_and_grad(branch, argnums=(0, 1, 2))
    calls = [bn_args(8), bn_args(8)]
    calls += [(-x, *rest) for x, *rest in calls]  # the sum's other sign: the other path
    for args in calls + [bn_args(n) for n in (16, 3, 2)]:  # (code shared across sizes)
        (value, grads), (want_value, want) = f(*args), reference(*args)
        np.testing.assert_allclose(value, want_value, rtol=1e-12)
        for got, ref in zip(grads, want):
            np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-12)
        if len(args[0]) == 8:
            assert f.cache_info().misses <= 2  # one trace a path


def test_a_power_of_two_scales_the_smaller_factor_exactly():
    def f(x, r):
        return np.sum(np.tanh(r * (2.0 * x)))
    x, r = RNG.normal(size=(6, 4)), RNG.normal(size=(1, 4))
    code = [line.split("  #")[0].strip() for line in ad.emit(f, x, r).splitlines()]
    assert "multiply = r * 2.0" in code and "multiply = 2.0 * x" not in code, code
    value, _ = ad.value_and_grad(f)(x, r)
    assert value == f(x, r)  # bit for bit: scaling by two is exact either way
    check_grads(f, x, r, argnums=(0, 1))
    check_both_precisions(f, (x, r), 0)


def test_a_reshape_broadcasting_does_is_not_emitted():
    """The max's backward spreads the 0-d cotangent over the window: `g * hit`, with no
    np.reshape(g, (1, 1)) before it; 0-d and 2-D inputs, float32 too."""
    def f(x, w):
        return np.sum(np.sin(np.max(x) * w))
    for dtype in (np.float64, np.float32):
        x, w = RNG.normal(size=(3, 4)).astype(dtype), RNG.normal(size=(3, 4)).astype(dtype)
        assert "np.reshape" not in ad.emit(f, x, w, argnums=(0, 1))
        value, grads = ad.value_and_grad(f, argnums=(0, 1))(x, w)
        assert value.dtype == dtype and all(g.dtype == dtype for g in grads)
    check_grads(f, RNG.normal(size=(3, 4)), RNG.normal(size=(3, 4)), argnums=(0, 1))
    check_grads(f, np.array(0.4), RNG.normal(size=(3, 4)), argnums=(0, 1))


def test_a_layers_loss_sums_the_columns_its_backward_returns():
    """`np.sum((gamma * a + beta) * dout)`: no scaled or shifted full array in the forward,
    two dots of column sums, and those sums are gamma's and beta's gradients (one each)."""
    args = CASES[gain_shift][0]
    source = ad.emit(gain_shift, *args, argnums=(0, 1, 2))
    forward = [line.split("  #")[0].strip() for line in
               source.split("# forward")[1].split("# backward")[0].splitlines()]
    assert any(line.endswith("np.dot(gamma, sum_1)") for line in forward), forward
    assert any("np.dot(beta," in line for line in forward), forward
    assert not any("gamma *" in line or "+ beta" in line for line in forward), forward
    assert source.count("dout.sum(axis=0)") == 1 and source.count(".sum(axis=0)") == 2
    value, grads = ad.value_and_grad(gain_shift, argnums=(0, 1, 2))(*args)
    want_value, want = tape.value_and_grad(gain_shift, argnums=(0, 1, 2))(*args)
    np.testing.assert_allclose(value, want_value, rtol=1e-13)
    for got, ref in zip(grads, want):
        np.testing.assert_allclose(got, ref, rtol=1e-13)


def test_a_product_and_its_mirror_are_one_value():
    def f(x, y):
        return np.sum(np.sin(x * y)) + np.sum(np.cos(y * x))
    args = RNG.normal(size=(3, 4)), RNG.normal(size=(3, 4))
    graph = passes.optimize(traced(f, *args, argnums=(0, 1)))
    x, y = graph.inputs[:2]
    assert sum(op(n) == "multiply" and set(n.args) == {x, y} for n in graph.nodes) == 1
    check_grads(f, *args, argnums=(0, 1))
