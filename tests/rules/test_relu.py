"""relu as a mask: np.maximum(x, c), np.minimum(x, c) with c constant (or not
differentiated) take the sole rule g * (h > c), h the result: one comparison and one
multiply, in place where g dies, and the derivative 0 at the tie (as jax.nn.relu and
torch.relu; jnp.maximum and Autograd give 0.5 there). Two differentiated arguments keep
the shared tie, so that max(a, b) + min(a, b) = a + b has the gradient 1 everywhere."""

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen import passes
from autodiffgen.testing import check_grads

RNG = np.random.default_rng(3)


def relu_maximum(x):
    return np.sum(np.maximum(x, 0.0) * x)


def relu_maximum_left(x):
    return np.sum(np.maximum(0, x) ** 2)


def relu_where(x):
    return np.sum(np.where(x > 0, x, 0.0) * x)


def relu_mask(x):
    return np.sum((x * (x > 0)) * x)


def clamp_minimum(x):
    return np.sum(np.minimum(x, 0.5) * x)


def layer(W, x):  # the relu between two products, as in an MLP
    return np.sum(np.maximum(x @ W, 0.0) @ W.T)


ALL = [relu_maximum, relu_maximum_left, relu_where, relu_mask, clamp_minimum]


def away_from_ties(shape, dtype=np.float64):
    x = RNG.normal(size=shape)
    x[np.abs(x) < 0.05] = 0.3
    x[np.abs(x - 0.5) < 0.05] = 0.7
    return x.astype(dtype)


@pytest.mark.parametrize("enabled", [True, False])
@pytest.mark.parametrize("fun", ALL, ids=lambda f: f.__name__)
def test_gradients_agree_with_the_tape_and_finite_differences(fun, enabled, monkeypatch):
    monkeypatch.setattr(passes, "ENABLED", enabled)
    check_grads(fun, away_from_ties((3, 4)))
    check_grads(fun, away_from_ties((3, 4), np.float32), rtol=1e-4, atol=1e-4, fd=False)
    check_grads(fun, np.array(away_from_ties(())))  # 0-d


def test_broadcast_constant_and_a_layer():
    check_grads(lambda x: np.sum(np.maximum(x, np.array([0.0, 0.5, -0.5])) ** 2),
                away_from_ties((4, 3)))
    check_grads(layer, away_from_ties((3, 5)), away_from_ties((4, 3)))


@pytest.mark.parametrize("fun", [relu_maximum, relu_maximum_left, relu_where, relu_mask])
def test_the_derivative_at_the_tie_is_zero(fun):
    x = np.array([-1.0, 0.0, 2.0])
    want = 2 * np.maximum(x, 0.0)  # d/dx relu(x) * x = 2 relu(x), 0 at 0
    np.testing.assert_array_equal(ad.grad(fun)(x), want)
    np.testing.assert_array_equal(ad.tape.grad(fun)(x), want)
    _, tangent = ad.jvp(fun, (x,), (np.array([0.0, 1.0, 0.0]),))
    assert tangent == 0.0


def test_two_differentiated_arguments_share_the_tie():
    def f(a, b):
        return np.sum(np.maximum(a, b) * 3.0 + np.minimum(a, b))
    a, b = np.array([1.0, 2.0, 3.0]), np.array([1.0, 0.0, 5.0])
    ga, gb = ad.grad(f, argnums=(0, 1))(a, b)
    np.testing.assert_array_equal(ga, [2.0, 3.0, 1.0])
    np.testing.assert_array_equal(gb, [2.0, 1.0, 3.0])
    np.testing.assert_array_equal(ad.tape.grad(f, argnums=(0, 1))(a, b)[0], ga)
    check_grads(f, away_from_ties(5), away_from_ties(5), argnums=(0, 1))
    # a + b = max + min: gradient 1 everywhere, ties included
    both = ad.grad(lambda a, b: np.sum(np.maximum(a, b) + np.minimum(a, b)), argnums=(0, 1))
    for g in both(a, b):
        np.testing.assert_array_equal(g, np.ones(3))


def test_the_backward_is_one_mask_multiply_in_place():
    source = ad.value_and_grad(layer).source(away_from_ties((64, 64)),  # (MIN_ELEMENTS)
                                             away_from_ties((64, 64)))
    backward = source.split("# backward")[1]
    assert "==" not in backward and "0.5" not in backward
    # the mask is relu's derivative: named `dmaximum` (the rule's value, node_rules.py)
    assert "np.multiply(g_matmul_1, dmaximum, out=g_matmul_1)" in backward.replace(
        "  ", " ") or ", dmaximum, out=" in backward


def test_second_derivative_and_new_values_in_the_cached_function():
    def f(x):
        return np.sum(np.maximum(x, 0.0) ** 3)
    x = away_from_ties(4)
    np.testing.assert_allclose(ad.hessian(f)(x), np.diag(6 * np.maximum(x, 0.0)), rtol=1e-12)
    g = ad.grad(f)
    for _ in range(3):
        x = away_from_ties(4)
        np.testing.assert_allclose(g(x), 3 * np.maximum(x, 0.0) ** 2, rtol=1e-12)
    assert g(x.astype(np.float32)).dtype == np.float32
