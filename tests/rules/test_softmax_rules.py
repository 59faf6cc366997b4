"""Softmax and log-softmax differentiated whole (whole_rules.py): the backward is
p * (g - sum(g * p)) and g - softmax * sum(g), on both engines (a softmax's exp or sum
read elsewhere adds its own gradient); checked against the tape, finite differences,
forward mode and second derivatives, over several axes, dtypes and ways of writing it.
Its picks (a cross-entropy): test_softmax_picks.py."""

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen import nn, passes
from autodiffgen.plan import memory
from autodiffgen.testing import check_grads

RNG = np.random.default_rng(11)
W = RNG.normal(size=(3, 4, 5))


def softmax_shifted(z, axis=-1):
    s = z - z.max(axis=axis, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=axis, keepdims=True)


def softmax_plain(z, axis=-1):
    e = np.exp(z)
    return e / np.sum(e, axis=axis, keepdims=True)


def log_softmax_shifted(z, axis=-1):
    s = z - np.max(z, axis=axis, keepdims=True)
    return s - np.log(np.sum(np.exp(s), axis=axis, keepdims=True))


def log_softmax_plain(z, axis=-1):
    return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))


def log_softmax_logsumexp(z, axis=-1):  # z less its logsumexp, written out
    m = np.max(z, axis=axis, keepdims=True)
    return z - (m + np.log(np.sum(np.exp(z - m), axis=axis, keepdims=True)))


def softmax_exp_twice(z, axis=-1):
    return np.exp(z - np.max(z, axis=axis, keepdims=True)) / np.sum(
        np.exp(z - np.max(z, axis=axis, keepdims=True)), axis=axis, keepdims=True)


FORMS = {
    "softmax_shifted": softmax_shifted, "softmax_plain": softmax_plain,
    "softmax_exp_twice": softmax_exp_twice,
    "nn.softmax": lambda z, axis=-1: nn.softmax(z, axis=axis),
    "log_softmax_shifted": log_softmax_shifted, "log_softmax_plain": log_softmax_plain,
    "log_softmax_logsumexp": log_softmax_logsumexp,
    "nn.log_softmax": lambda z, axis=-1: nn.log_softmax(z, axis=axis),
}


def loss(form, axis):
    def f(z):
        return np.sum(np.tanh(form(z, axis)) * W[:z.shape[0], :z.shape[1], :z.shape[2]])
    return f


@pytest.mark.parametrize("axis", [-1, 0, 1, (0, 2)], ids=str)
@pytest.mark.parametrize("enabled", [True, False])
@pytest.mark.parametrize("name", FORMS)
def test_gradients_agree_with_the_tape_and_finite_differences(name, enabled, axis, monkeypatch):
    monkeypatch.setattr(passes, "ENABLED", enabled)
    f = loss(FORMS[name], axis)
    z = RNG.normal(size=(3, 4, 5))
    check_grads(f, z)
    check_grads(f, z.astype(np.float32), rtol=1e-4, atol=1e-5, fd=False)
    assert ad.grad(f)(z.astype(np.float32)).dtype == np.float32


@pytest.mark.parametrize("name", FORMS)
def test_the_backward_is_the_whole_rule(name, monkeypatch):
    monkeypatch.setattr(memory, "MIN_ELEMENTS", 1)  # written `np.divide(..., out=)` at any size
    f = loss(FORMS[name], -1)
    backward = code_of(ad.value_and_grad(f).source(RNG.normal(size=(2, 3, 4))).split(
        "# backward")[1])
    assert "np.negative" not in backward and " -" not in backward.replace(" - ", "")
    if "log" in name:  # g - (e / t) * sum(g)
        assert backward.count(".sum(") == 1 and backward.count("np.divide(") == 1
    else:  # (g - sum(g * p)) * p
        assert backward.count(".sum(") == 1 and "np.divide" not in backward


def test_the_0d_and_1d_cases():
    for form in FORMS.values():
        check_grads(lambda z, form=form: np.sum(form(z, None) * np.array([1.0, -2.0, 0.5])),
                    RNG.normal(size=3))
        check_grads(lambda z, form=form: np.sum(form(z, None)) * z, np.array(0.7))


def test_an_exp_or_a_sum_read_elsewhere_adds_its_own_gradient():
    def f(z):
        e = np.exp(z)
        p = e / e.sum(axis=1, keepdims=True)
        return np.sum(p * W[0, :2, :3]) + np.sum(e)  # e is read by another sum
    check_grads(f, RNG.normal(size=(2, 3)))

    def g(z):
        e = np.exp(z)
        t = e.sum(axis=1, keepdims=True)
        return np.sum((e / t) * W[0, :2, :3]) + np.sum(np.log(t))  # t read twice
    check_grads(g, RNG.normal(size=(2, 3)))

    def h(z):
        s = z - np.log(np.sum(np.exp(z), axis=0, keepdims=True))
        return np.sum(s * s) + np.sum(np.log(np.sum(np.exp(z), axis=0, keepdims=True)))
    check_grads(h, RNG.normal(size=(3, 2)))


def test_cross_entropy_of_integer_labels():
    labels = np.array([2, 0, 1, 1, 3])

    def ce(logits, labels):
        return -np.mean(log_softmax_shifted(logits, axis=1)[np.arange(5), labels])
    z = RNG.normal(size=(5, 4))
    _, g = check_grads(ce, z, labels)
    p = softmax_plain(z, axis=1)
    np.testing.assert_allclose(g, (p - np.eye(4)[labels]) / 5, rtol=1e-12, atol=1e-15)


def test_forward_mode_and_second_derivatives():
    for name, form in FORMS.items():
        def f(z, form=form):
            return np.sum(form(z, 1) ** 2 * W[0, :2, :3])
        z = RNG.normal(size=(2, 3))
        hessian = ad.hessian(f)(z).reshape(6, 6)
        grad, eps = ad.grad(f), 1e-6
        numeric = np.stack([(grad(z + eps * d) - grad(z - eps * d)).ravel() / (2 * eps)
                            for d in np.eye(6).reshape(6, 2, 3)], axis=1)
        np.testing.assert_allclose(hessian, numeric, rtol=1e-6, atol=1e-8, err_msg=name)


def test_new_values_in_the_cached_function():
    f = loss(softmax_shifted, 2)
    g = ad.value_and_grad(f)
    tape = ad.tape.value_and_grad(f)
    for _ in range(3):
        z = RNG.normal(size=(3, 4, 5)) * 5
        (v, d), (tv, td) = g(z), tape(z)
        np.testing.assert_allclose(v, tv, rtol=1e-12)
        np.testing.assert_allclose(d, td, rtol=1e-10, atol=1e-14)


def code_of(source):
    return "\n".join(line.split("  # ")[0] for line in source.splitlines())
