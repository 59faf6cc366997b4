"""The wheres pass: np.where's two cotangents, where(c, g, 0) and where(c, 0, g), summed
into one where when both sides are computed from one value."""

import numpy as np
import pytest
from graph_helpers import run, traced

from autodiffgen import passes
from autodiffgen.testing import check_grads

RNG = np.random.default_rng(41)


def negated_side(x):  # where(c, 0, g) - where(c, g, 0), once signs made it a subtract
    return np.sum(np.exp(np.where(x >= 0, -x, x)))


def negated_first(x):  # x * x's cotangent is distributed over the product first: apart
    return np.sum(np.exp(np.where(x < 0.5, x * x, -(x * x))))


def condition_as_input(x, c):  # the sum, sides apart
    return np.sum(np.sin(np.where(c, x, x)))


def scaled_side(x):  # 3 * where(c, 0, g): not joined (a product in between)
    return np.sum(np.sin(np.where(x > 0.5, x, 3.0 * x)))


def where_read_twice(x, y):  # y's where feeds two values: the cotangents stay apart
    w = np.where(x > 0, x * y, y)
    return np.sum(w * w) + np.sum(w)


FUNS = [negated_side, negated_first, condition_as_input, scaled_side, where_read_twice]


def args_of(fun):
    x = RNG.normal(size=(4, 3))
    if fun is condition_as_input:
        return x, RNG.normal(size=(4, 3)) > 0
    if fun is where_read_twice:
        return x, RNG.normal(size=(4, 3))
    return (x,)


def wheres_of(graph):
    return sum(n.prim.name == "where" for n in graph.nodes if n.grad_of is not None)


def optimized(graph, join):
    pipeline = passes.PIPELINE if join else tuple(p for p in passes.PIPELINE
                                                   if p is not passes.wheres)
    return passes.optimize(graph, pipeline)


@pytest.mark.parametrize("fun", FUNS, ids=lambda f: f.__name__)
def test_the_two_cotangents_become_one_where(fun):
    args = args_of(fun)
    graph = traced(fun, *args, argnums=1 if fun is where_read_twice else 0)
    apart, joined = optimized(graph, False), optimized(graph, True)
    fewer = 1 if fun in (negated_side, condition_as_input) else 0
    assert wheres_of(joined) == wheres_of(apart) - fewer
    (value, grad), (new_value, new_grad) = (run(g, *args) for g in (apart, joined))
    np.testing.assert_allclose(new_value, value, rtol=1e-15)
    np.testing.assert_allclose(new_grad, grad, rtol=1e-15)
    assert passes.wheres(joined) == (joined, False)


@pytest.mark.parametrize("enabled", [True, False])
@pytest.mark.parametrize("fun", FUNS, ids=lambda f: f.__name__)
def test_gradients_agree_with_the_tape_and_finite_differences(fun, enabled, monkeypatch):
    monkeypatch.setattr(passes, "ENABLED", enabled)
    args = args_of(fun)
    check_grads(fun, *args, argnums=1 if fun is where_read_twice else 0)
    check_grads(fun, *[a.astype(np.float32) if a.dtype == np.float64 else a for a in args],
                argnums=1 if fun is where_read_twice else 0, rtol=2e-3, atol=2e-3, fd=False)
