"""The max shift before a softmax gets no gradient work, and only there."""

import numpy as np

import autodiffgen as ad
from autodiffgen.testing import check_grads

RNG = np.random.default_rng(13)


def log_softmax_loss(z):
    s = z - z.max(axis=1, keepdims=True)
    return -np.sum((s - np.log(np.exp(s).sum(axis=1, keepdims=True)))[:, 0])


def softmax_loss(z):
    s = z - np.max(z, axis=-1, keepdims=True)
    e = np.exp(s)
    return np.sum((e / e.sum(axis=-1, keepdims=True)) ** 2)


def max_also_used(z):
    m = z.max(axis=1, keepdims=True)
    s = z - m
    return np.sum(np.exp(s) / np.exp(s).sum(axis=1, keepdims=True)) + np.sum(m ** 2)


def not_invariant(z):
    s = z - z.max(axis=1, keepdims=True)
    return np.sum(np.exp(s) ** 2)  # no normalization: the shift matters


def backward_ops(f, z):
    source = ad.emit(f, z)
    return source[source.index("# backward"):]


def test_log_softmax_and_softmax_skip_the_max():
    z = RNG.normal(size=(4, 5))
    for f in (log_softmax_loss, softmax_loss):
        assert "grad of max" not in backward_ops(f, z)
        check_grads(f, z)


def test_other_uses_keep_the_max_gradient():
    z = RNG.normal(size=(4, 5))
    for f in (max_also_used, not_invariant):
        assert "grad of max" in backward_ops(f, z)
        check_grads(f, z)


def test_softmax_shift_is_kept_when_an_intermediate_is_the_output():
    def f(z):
        s = z - np.max(z, axis=0, keepdims=True)
        return np.sum(np.log(np.sum(np.exp(s), axis=0, keepdims=True)))  # logsumexp - max
    from autodiffgen.testing import check_grads
    check_grads(f, RNG.normal(size=(2, 3)))
