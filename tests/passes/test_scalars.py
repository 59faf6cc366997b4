"""The constant-factors pass (passes/scalars.py): all-equal constant arrays become NumPy
scalars, broadcasts sink below elementwise operations with scalars, a negation folds
into a constant factor or into the add it feeds, a factor common to both terms of a
sum is applied once.
Each rewrite on small inline functions: the pass changes the graph, the values stay
(against the unoptimized graph, the tape and finite differences), dtypes stay."""

import numpy as np
import pytest
from graph_helpers import check_both_precisions, flat, run, traced

import autodiffgen as ad
from autodiffgen import passes
from autodiffgen.testing import check_grads

RNG = np.random.default_rng(5)


def backward_of(fun, *args, argnums=0):
    source = ad.value_and_grad(fun, argnums=argnums).source(*args)
    return "\n".join(line.split("  # ")[0] for line in source.split("# backward")[1].splitlines())


def constant_array(x):
    return np.sum(np.tanh(x) * np.full((1, 3), 0.25, dtype=x.dtype))


def half_squared_mean(d):
    return 0.5 * np.sum(d * d) / 4


def scaled_sum(x):
    return np.sum(np.tanh(x) * 0.5 + x)


def plus_negative(x, y):
    return np.sum(np.sin(x) * (y + -np.cos(x)))


def minus_negative(x, y):
    return np.sum((y - (-x)) * np.exp(x))


def negated_product(x):
    return np.sum(-(x * 3.0) * np.tanh(x)) + np.sum((-x) * 0.5 * x)


def common_factor(x):
    return np.sum((x * 3.0 + np.sin(x) * 3.0) ** 2) + np.sum(x * 0.5 - np.cos(x) * -0.5)


def softplus_minus_linear(z, y):  # the logistic regression's loss: one scaling in its backward
    return np.mean(np.logaddexp(0.0, z) - y * z)


CASES = {
    common_factor: ((RNG.normal(size=(3, 4)),), 0),
    softplus_minus_linear: ((RNG.normal(size=7), RNG.normal(size=7)), 0),
    constant_array: ((RNG.normal(size=(4, 3)),), 0),
    half_squared_mean: ((RNG.normal(size=(2, 3, 5)),), 0),
    scaled_sum: ((RNG.normal(size=50),), 0),
    plus_negative: ((RNG.normal(size=6), RNG.normal(size=6)), (0, 1)),
    minus_negative: ((RNG.normal(size=6), RNG.normal(size=6)), (0, 1)),
    negated_product: ((RNG.normal(size=(3, 2)),), 0),
}


@pytest.mark.parametrize("fun", CASES, ids=lambda f: f.__name__)
def test_the_pass_rewrites_and_keeps_the_values(fun):
    args, argnums = CASES[fun]
    graph = traced(fun, *args, argnums=argnums)
    rewritten = passes.optimize(graph)
    without = passes.optimize(graph, pipeline=tuple(
        p for p in passes.PIPELINE if p not in (passes.scalars, passes.signs)))
    assert passes.scalars(without)[1] and len(rewritten.nodes) <= len(without.nodes)
    for got, want in zip(flat(run(rewritten, *args)), flat(run(graph, *args))):
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-15)
    assert passes.scalars(rewritten)[1] is False  # a fixed point


@pytest.mark.parametrize("enabled", [True, False])
@pytest.mark.parametrize("fun", CASES, ids=lambda f: f.__name__)
def test_gradients_agree_with_the_tape_and_finite_differences(fun, enabled, monkeypatch):
    monkeypatch.setattr(passes, "ENABLED", enabled)
    args, argnums = CASES[fun]
    check_both_precisions(fun, args, argnums)


def test_constant_arrays_are_scalars_and_broadcasts_go(monkeypatch):
    monkeypatch.setattr(passes, "ENABLED", True)  # the passes' code, at a size of its own
    d = RNG.normal(size=(16, 16, 16)).astype(np.float32)  # memory.MIN_ELEMENTS: reused
    backward = backward_of(half_squared_mean, d)
    lines = [line.strip() for line in backward.strip().splitlines() if not line.strip().startswith("del")]
    assert lines[0] == "g_d = np.multiply(d, np.float32(0.25), out=multiply)"  # d + d, scaled
    backward = backward_of(constant_array, RNG.normal(size=(4, 3)))
    assert "full" not in backward.replace("constant_array", "")
    assert "g_x *= np.float64(0.25)" in backward or \
        "g_x = np.float64(0.25) * dtanh" in backward  # the constant array, as a scalar
    backward = backward_of(scaled_sum, RNG.normal(size=50).astype(np.float32))
    assert "broadcast_to" not in backward and "np.float32(-0.5)" in backward  # affine.py's


def test_negations_meet_their_add():
    x, y = RNG.normal(size=6), RNG.normal(size=6)
    source = ad.value_and_grad(plus_negative, argnums=(0, 1)).source(x, y)
    assert "-cos" not in source and "np.negative(cos" not in source
    assert "np.subtract(y, cos" in source or "y - cos" in source
    source = ad.value_and_grad(minus_negative, argnums=(0, 1)).source(x, y)
    assert "y + x" in source or "np.add(y, x" in source


def test_a_batch_scale_still_generalizes():
    def loss(w, x):
        d = x @ w
        return 0.5 * np.sum(d * d) / x.shape[0]
    w = RNG.normal(size=(3, 2)).astype(np.float32)
    f = ad.value_and_grad(loss)
    tape = ad.tape.value_and_grad(loss)
    x = RNG.normal(size=(9, 3)).astype(np.float32)
    f(w, x)
    assert "Serves every batch size" in f.source(w, x)
    for rows in (9, 7, 4, 2):
        x = RNG.normal(size=(rows, 3)).astype(np.float32)
        (v, g), (tv, tg) = f(w, x), tape(w, x)
        np.testing.assert_allclose(v, tv, rtol=1e-6)
        np.testing.assert_allclose(g, tg, rtol=1e-5, atol=1e-6)


def test_values_a_guard_reads_stay_as_traced():
    def f(x):
        s = (x * 3.0) * 2.0
        if np.sum(s) > 0:  # a guard reads s
            return np.sum(s * x)
        return np.sum(x)
    x = np.abs(RNG.normal(size=4))
    graph = passes.optimize(traced(f, x))
    guarded = passes.rewrite.guard_reads(graph)
    products = [n for n in guarded if n.prim is not None and n.prim.name == "multiply"]
    assert len(products) == 2
    check_grads(f, x)


def test_a_common_factor_is_applied_once():
    z, y = RNG.normal(size=7), RNG.normal(size=7)
    backward = backward_of(softplus_minus_linear, z, y)
    assert backward.count("np.float64(") == 1  # the factor -1/n, once, after the subtract
    assert "np.subtract(y, g_z, out=g_z)" in backward or "g_z = y - dlogaddexp" in backward
    source = ad.value_and_grad(common_factor).source(RNG.normal(size=(3, 4)))
    forward = "\n".join(line.split("  # ")[0] for line in source.split("# backward")[0].splitlines())
    assert forward.count("3.0") == 1 and forward.count("0.5") == 1
