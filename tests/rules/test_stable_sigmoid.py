"""The stable sigmoid, where(z < 0, e, 1) / (1 + e) with e = exp(-|z|), differentiated
from its output (forms.stable_sigmoid_of, whole_rules.py): in the spellings people write
by hand and as course code's masked writes record it (rules/masked_writes.py), the
backward is g * (s * (1 - s)) and reads neither e nor the tests. A form that is not a
sigmoid (another denominator, the wrong side chosen) keeps the rules of its steps."""

import numpy as np
import pytest
from test_masked_writes import sigmoid

import autodiffgen as ad
from autodiffgen import pipeline
from autodiffgen.testing import check_grads

RNG = np.random.default_rng(31)
W = RNG.normal(size=(5, 4))


def abs_spelling(x):
    e = np.exp(-np.abs(x))
    return np.sum(np.where(x >= 0, 1, e) / (1 + e) * W)


def where_spelling(x):
    e = np.exp(np.where(x > 0, -x, x))
    return np.sum(np.where(x < 0, e, 1.0) / (e + 1) * W)


def swapped_tests(x):  # 0 > x and 0 <= x: the constant on the left
    e = np.exp(np.where(0 > x, x, -x))
    return np.sum(np.where(0 <= x, 1, e) / (1.0 + e) * W)


def masked_writes(x):  # course code's spelling
    return np.sum(sigmoid(x) * W)


def wrong_side(x):  # 1 where x < 0: not a sigmoid
    e = np.exp(-np.abs(x))
    return np.sum(np.where(x < 0, 1, e) / (1 + e) * W)


def other_denominator(x):
    e = np.exp(-np.abs(x))
    return np.sum(np.where(x >= 0, 1, e) / (2 + e) * W)


def e_read_elsewhere(x):  # e has a cotangent of its own: the steps' rules
    e = np.exp(-np.abs(x))
    return np.sum(np.where(x >= 0, 1, e) / (1 + e) * W + e)


SIGMOIDS = [abs_spelling, where_spelling, swapped_tests, masked_writes]
OTHERS = [wrong_side, other_denominator, e_read_elsewhere]


def backward_ops(fun, x):
    graph = pipeline.compile(ad.GradFunction(fun, 0).request((x,))).graph
    return {n.prim.name for n in graph.nodes if n.grad_of is not None}


def derivative(x):
    e = np.exp(-np.abs(x))
    return e / (1 + e) ** 2


@pytest.mark.parametrize("fun", SIGMOIDS, ids=lambda f: f.__name__)
def test_the_backward_reads_the_sigmoid_alone(fun):
    x = RNG.normal(size=(5, 4)) * 3
    assert not backward_ops(fun, x) & {"exp", "where", "divide", "getitem", "setitem"}
    value, grad = ad.value_and_grad(fun)(x)
    np.testing.assert_allclose(value, fun(x), rtol=1e-14)
    np.testing.assert_allclose(grad, W * derivative(x), rtol=1e-12, atol=1e-15)
    check_grads(fun, x)
    check_grads(fun, x.astype(np.float32), rtol=2e-3, atol=2e-3, fd=False)


@pytest.mark.parametrize("fun", OTHERS, ids=lambda f: f.__name__)
def test_what_is_not_a_sigmoid_keeps_the_rules_of_its_steps(fun):
    x = RNG.normal(size=(5, 4)) * 3
    assert "exp" in backward_ops(fun, x) or "where" in backward_ops(fun, x)
    value, _ = ad.value_and_grad(fun)(x)
    np.testing.assert_allclose(value, fun(x), rtol=1e-14)
    check_grads(fun, x)


def test_second_derivatives_of_the_stable_form():
    x = RNG.normal(size=4) * 2
    hess = ad.hessian(lambda x: np.sum(masked_writes(np.tile(x, (5, 1)))))(x)
    e = np.exp(-np.abs(x))
    s = np.where(x >= 0, 1, e) / (1 + e)
    want = np.diag(np.sum(W, axis=0) * s * (1 - s) * (1 - 2 * s))
    np.testing.assert_allclose(hess, want, rtol=1e-10, atol=1e-12)
