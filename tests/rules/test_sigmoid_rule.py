"""The sigmoid differentiated from its output (whole_rules.py): s = 1 / (1 + exp(-z))
or np.reciprocal(1 + exp(-z)) gets dz = g * (s * (1 - s)), reading s alone (the exp
and the sum are not kept for the backward), whenever nothing else reads them; tanh and
scipy.special.expit already have such rules. Checked against the tape, finite
differences, forward mode and second derivatives."""

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen import passes
from autodiffgen.testing import check_grads

RNG = np.random.default_rng(17)
W = RNG.normal(size=(4, 3))


def sigmoid_divide(z):
    return np.sum(np.tanh(1 / (1 + np.exp(-z))) * W[:len(z)])


def sigmoid_reciprocal(z):
    return np.sum(np.reciprocal(np.exp(-z) + 1.0) ** 2 * W[:len(z)])


def gate(x, w):  # a gate of a recurrent cell: sigmoid of a product, times the input
    s = 1.0 / (1.0 + np.exp(-(x @ w)))
    return np.sum(s * x[:, :3])


def tanh_cell(x, w):
    return np.sum(np.tanh(x @ w) ** 2)


FUNS = [sigmoid_divide, sigmoid_reciprocal]


@pytest.mark.parametrize("enabled", [True, False])
@pytest.mark.parametrize("fun", FUNS, ids=lambda f: f.__name__)
def test_gradients_agree_with_the_tape_and_finite_differences(fun, enabled, monkeypatch):
    monkeypatch.setattr(passes, "ENABLED", enabled)
    z = RNG.normal(size=(4, 3)) * 2
    check_grads(fun, z)
    check_grads(fun, z.astype(np.float32), rtol=1e-4, atol=1e-5, fd=False)
    assert ad.grad(fun)(z.astype(np.float32)).dtype == np.float32
    check_grads(lambda z: np.sum(1 / (1 + np.exp(-z))) * z, np.array(0.3))  # 0-d


def test_a_gate_and_a_tanh_cell():
    x, w = RNG.normal(size=(5, 4)), RNG.normal(size=(4, 3))
    check_grads(gate, x, w, argnums=(0, 1))
    check_grads(tanh_cell, x, w, argnums=(0, 1))


def test_the_backward_reads_the_output_only():
    x, w = RNG.normal(size=(5, 4)), RNG.normal(size=(4, 3))
    source = ad.value_and_grad(gate, argnums=1).source(x, w)
    forward, backward = source.split("# backward")
    assert "np.exp" not in backward and "np.negative" not in backward
    assert "1 - s" in backward or "np.subtract(1, s," in backward  # from the output s, computed in place in the forward
    assert "np.divide(1.0, s, out=s)" in forward


def test_read_elsewhere_the_primitive_rules_stay():
    def f(z):
        e = np.exp(-z)
        return np.sum(1 / (1 + e)) + np.sum(e * e)
    check_grads(f, RNG.normal(size=5))


def test_forward_mode_second_derivatives_and_new_values():
    z = RNG.normal(size=(4, 3))
    hessian = ad.hessian(sigmoid_divide)(z).reshape(12, 12)
    grad, eps = ad.grad(sigmoid_divide), 1e-6
    numeric = np.stack([(grad(z + eps * d) - grad(z - eps * d)).ravel() / (2 * eps)
                        for d in np.eye(12).reshape(12, 4, 3)], axis=1)
    np.testing.assert_allclose(hessian, numeric, rtol=1e-6, atol=1e-8)
    g, tape = ad.value_and_grad(gate, argnums=1), ad.tape.value_and_grad(gate, argnums=1)
    for _ in range(3):
        x, w = RNG.normal(size=(5, 4)), RNG.normal(size=(4, 3))
        np.testing.assert_allclose(g(x, w)[1], tape(x, w)[1], rtol=1e-12)
