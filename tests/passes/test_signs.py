"""The signs pass: a negation whose every use ends in an add or a subtract (through
products, quotients and other negations) is dropped and its sign carried there."""

import numpy as np
import pytest
from graph_helpers import run, traced

from autodiffgen import passes
from autodiffgen.testing import check_grads

RNG = np.random.default_rng(23)


def cos_chain(x, y):  # cos's rule -(g * sin(x)), then products, then adds
    i = np.log(x * x + 1.0) * x
    return np.sum(np.cos(i) - y) + np.sum(np.sin(x) * y)


def negated_twice(x):
    n = -np.exp(x)
    return np.sum(-(n * x) + x) + np.sum(x - n / 2.0)


def kept_negation(x):  # the negation is read by an exp: it stays
    n = -x * x
    return np.sum(np.exp(n) + n)


def negation_first(x, y):  # (-a) - b = -(a + b): carried on to the add after it
    return np.sum(((-np.sin(x)) - y) * 2.0 + y)


def with_a_constant_array(x):  # a use next to a constant array (compared by identity)
    return np.sum(-np.sin(x) * np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]) + x)


FUNS = [cos_chain, negated_twice, kept_negation, negation_first, with_a_constant_array]


def args_of(fun):
    x = RNG.uniform(0.5, 1.5, 6)
    return (x, RNG.normal(size=6)) if fun in (cos_chain, negation_first) else (x,)


@pytest.mark.parametrize("enabled", [True, False])
@pytest.mark.parametrize("fun", FUNS, ids=lambda f: f.__name__)
def test_gradients_agree_with_the_tape_and_finite_differences(fun, enabled, monkeypatch):
    monkeypatch.setattr(passes, "ENABLED", enabled)
    args = args_of(fun)
    argnums = tuple(range(len(args)))
    check_grads(fun, *args, argnums=argnums)
    check_grads(fun, *(a.astype(np.float32) for a in args), argnums=argnums, rtol=1e-4,
                atol=1e-5, fd=False)


@pytest.mark.parametrize("fun", [cos_chain, negated_twice, negation_first],
                         ids=lambda f: f.__name__)
def test_the_negations_are_carried_to_an_add(fun):
    args = args_of(fun)
    graph = traced(fun, *args, argnums=tuple(range(len(args))))
    optimized = passes.optimize(graph)
    assert "negative" not in [n.prim.name for n in optimized.nodes]
    without = passes.optimize(graph, pipeline=tuple(
        p for p in passes.PIPELINE if p is not passes.signs))
    assert "negative" in [n.prim.name for n in without.nodes]
    got, want = run(optimized, *args), run(graph, *args)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-14)
    for a, b in zip(got[1], want[1]):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15)
    assert passes.signs(optimized) == (optimized, False)


def test_a_negation_read_elsewhere_stays():
    graph = passes.optimize(traced(kept_negation, *args_of(kept_negation)))
    assert "negative" in [n.prim.name for n in graph.nodes]
