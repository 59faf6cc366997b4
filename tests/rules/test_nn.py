"""autodiffgen.nn: activations and losses against their plain formulas (and scipy.special),
gradients through the generated code, the tape and finite differences, extreme logits
(+-1000) giving finite values and gradients, float32 kept."""

import numpy as np
import pytest
import scipy.special as sp

from autodiffgen import grad, hessian, jvp, nn, value_and_grad
from autodiffgen.testing import check_grads

RNG = np.random.default_rng(0)
X = RNG.normal(0.0, 2.0, (5, 4))
LABELS = np.array([0, 3, 1, 2, 3])
TARGETS = RNG.normal(0.0, 2.0, (5, 4))
BITS = (RNG.random((5, 4)) < 0.5).astype(np.float64)


def plain_log_softmax(x):
    return np.log(np.exp(x) / np.exp(x).sum(axis=-1, keepdims=True))


REFERENCES = {  # name: (function of x, straightforward formula)
    "relu": (nn.relu, lambda x: np.maximum(x, 0.0)),
    "sigmoid": (nn.sigmoid, lambda x: 1.0 / (1.0 + np.exp(-x))),
    "softplus": (nn.softplus, lambda x: np.log(1.0 + np.exp(x))),
    "log_sigmoid": (nn.log_sigmoid, lambda x: np.log(1.0 / (1.0 + np.exp(-x)))),
    "gelu": (nn.gelu, lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi)
                                                      * (x + 0.044715 * x ** 3)))),
    "logsumexp": (nn.logsumexp, lambda x: np.log(np.exp(x).sum(axis=-1))),
    "log_softmax": (nn.log_softmax, plain_log_softmax),
    "softmax": (nn.softmax, lambda x: np.exp(x) / np.exp(x).sum(axis=-1, keepdims=True)),
    "softmax_cross_entropy": (lambda x: nn.softmax_cross_entropy(x, LABELS),
                              lambda x: -plain_log_softmax(x)[np.arange(5), LABELS]),
    "sigmoid_binary_cross_entropy": (
        lambda x: nn.sigmoid_binary_cross_entropy(x, BITS.astype(x.dtype)),
        lambda x: -(BITS * np.log(1 / (1 + np.exp(-x)))
                    + (1 - BITS) * np.log(1 - 1 / (1 + np.exp(-x))))),
    "mse": (lambda x: nn.mse(x, TARGETS.astype(x.dtype)), lambda x: np.mean((x - TARGETS) ** 2)),
    "squared_error": (lambda x: nn.squared_error(x, TARGETS.astype(x.dtype)), lambda x: (x - TARGETS) ** 2),
    "huber_loss": (lambda x: nn.huber_loss(x, TARGETS.astype(x.dtype), delta=1.5), lambda x: np.where(
        np.abs(x - TARGETS) <= 1.5, 0.5 * (x - TARGETS) ** 2,
        1.5 * (np.abs(x - TARGETS) - 0.75))),
}


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_values_match_the_plain_formula(name):
    fun, plain = REFERENCES[name]
    np.testing.assert_allclose(fun(X), plain(X), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_gradients_generated_tape_and_finite_differences(name):
    fun = REFERENCES[name][0]
    x = X + 0.05  # no element at relu's or huber's kink
    weights = np.cos(np.arange(np.size(fun(x)))).reshape(np.shape(fun(x)))
    check_grads(lambda x: np.sum(fun(x) * weights), x, rtol=1e-5, atol=1e-7)


def test_against_scipy_special():
    np.testing.assert_allclose(nn.logsumexp(X, axis=0), sp.logsumexp(X, axis=0))
    np.testing.assert_allclose(nn.logsumexp(X, keepdims=True),
                               sp.logsumexp(X, axis=-1, keepdims=True))
    np.testing.assert_allclose(nn.softmax(X, axis=0), sp.softmax(X, axis=0))
    np.testing.assert_allclose(nn.log_softmax(X), sp.log_softmax(X, axis=-1))
    np.testing.assert_allclose(nn.sigmoid(X), sp.expit(X), rtol=1e-14)
    np.testing.assert_allclose(nn.log_sigmoid(X), sp.log_expit(X), rtol=1e-14)
    np.testing.assert_allclose(nn.huber_loss(X, TARGETS, 0.7),
                               sp.huber(0.7, X - TARGETS), rtol=1e-14)


EXTREME = np.array([[1000.0, -1000.0, 0.0], [-1000.0, -1000.0, 1000.0]])


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_extreme_logits_give_finite_values_and_gradients(name):
    fun = REFERENCES[name][0]
    x = np.tile(EXTREME, (3, 2))[:5, :4]
    with np.errstate(over="raise", invalid="raise", divide="raise"):  # no inf, no nan
        value, g = value_and_grad(lambda x: np.sum(fun(x)))(x)
    assert np.isfinite(value) and np.all(np.isfinite(g)), (value, g)


def test_extreme_values_are_the_limits():
    x = EXTREME
    far = np.abs(x) == 1000.0
    np.testing.assert_allclose(nn.softplus(x)[far], np.maximum(x, 0.0)[far])
    np.testing.assert_allclose(nn.log_sigmoid(x)[far], np.minimum(x, 0.0)[far])
    np.testing.assert_allclose(nn.softmax_cross_entropy(x, np.array([1, 2])), [2000.0, 0.0])
    np.testing.assert_allclose(nn.sigmoid_binary_cross_entropy(x, np.ones_like(x))[far],
                               -np.minimum(x, 0.0)[far])
    g = grad(lambda z: np.sum(nn.softmax_cross_entropy(z, np.array([1, 2]))))(x)
    np.testing.assert_allclose(g, [[1.0, -1.0, 0.0], [0.0, 0.0, 0.0]], atol=1e-300)
    g = grad(lambda z: np.sum(nn.sigmoid_binary_cross_entropy(z, np.ones_like(z))))(x)
    np.testing.assert_allclose(g, [[0.0, -1.0, -0.5], [-1.0, -1.0, 0.0]])


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_float32_stays_float32(name):
    fun = REFERENCES[name][0]
    x = X.astype(np.float32)
    out = fun(x)
    assert np.result_type(out) == np.float32, np.result_type(out)
    g = grad(lambda x: np.sum(fun(x) * fun(x)))(x)
    assert g.dtype == np.float32


def test_second_order_and_forward_mode():
    def loss(w):
        return np.mean(nn.softmax_cross_entropy(X @ w, LABELS[:5])) + nn.mse(w, 0.0)
    w = RNG.normal(0.0, 0.5, (4, 4))
    h = hessian(loss)(w)
    eps, e = 1e-5, np.zeros_like(w)
    e[1, 2] = 1.0
    fd = (grad(loss)(w + eps * e) - grad(loss)(w - eps * e)) / (2 * eps)
    np.testing.assert_allclose(h[..., 1, 2], fd, rtol=1e-5, atol=1e-8)
    _, t = jvp(lambda z: nn.gelu(z) + nn.sigmoid(z), (X,), (np.ones_like(X),))
    fd = (nn.gelu(X + eps) + nn.sigmoid(X + eps) - nn.gelu(X - eps) - nn.sigmoid(X - eps))
    np.testing.assert_allclose(t, fd / (2 * eps), rtol=1e-6)


def test_new_data_reuses_the_generated_code():
    f = value_and_grad(lambda z, y: np.mean(nn.softmax_cross_entropy(z, y)))
    for seed in range(3):
        rng = np.random.default_rng(seed)
        z, y = rng.normal(size=(5, 4)), rng.integers(0, 4, 5)
        value, g = f(z, y)
        np.testing.assert_allclose(value, np.mean(-plain_log_softmax(z)[np.arange(5), y]))
        expected = np.exp(plain_log_softmax(z))
        expected[np.arange(5), y] -= 1.0
        np.testing.assert_allclose(g, expected / 5)
    assert f.cache_info().misses == 1
