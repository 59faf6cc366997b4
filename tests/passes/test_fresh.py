"""Returned gradients own their memory (passes/fresh.py), and a reshape or transpose of
a buffer the function made and returns nothing else of is one: no copy of it (the
gradient of a flattened input, as affine layers and a temporal softmax have)."""

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen import passes
from autodiffgen.testing import check_grads

RNG = np.random.default_rng(31)


def affine(x, w, dout):  # the benchmark's affine layer: N examples of any shape, as rows
    return np.sum((x.reshape(x.shape[0], -1) @ w) * dout)


def code_of(source):
    return "\n".join(line.split("  # ")[0] for line in source.splitlines())


@pytest.mark.parametrize("enabled", [True, False])
def test_a_reshaped_gradient_is_returned_as_it_is(enabled, monkeypatch):
    monkeypatch.setattr(passes, "ENABLED", enabled)
    x, w, dout = RNG.normal(size=(4, 2, 3)), RNG.normal(size=(6, 5)), RNG.normal(size=(4, 5))
    fun = ad.value_and_grad(affine, argnums=(0, 1))
    assert "np.copy" not in code_of(fun.source(x, w, dout))
    _, (gx, gw) = fun(x, w, dout)
    np.testing.assert_allclose(gx, (dout @ w.T).reshape(x.shape), rtol=1e-12)
    assert gx.shape == x.shape and gx.flags.writeable
    for other in (x, w, dout, gw):
        assert not np.shares_memory(gx, other)
    before = fun(x, w, dout)[1][1].copy()
    gx += 1.0  # the caller's to change: the next call is as before
    np.testing.assert_array_equal(fun(x, w, dout)[1][1], before)
    check_grads(affine, x, w, dout, argnums=(0, 1))


def test_two_views_of_one_buffer_are_not_both_returned():
    def f(a, b):
        return np.sum((a.reshape(6) + b.T.reshape(6)) ** 2)
    a, b = RNG.normal(size=(2, 3)), RNG.normal(size=(3, 2))
    ga, gb = ad.grad(f, argnums=(0, 1))(a, b)
    assert not np.shares_memory(ga, gb)
    s = a.reshape(6) + b.T.reshape(6)
    np.testing.assert_allclose(ga, 2 * s.reshape(2, 3), rtol=1e-12)
    np.testing.assert_allclose(gb, (2 * s).reshape(2, 3).T, rtol=1e-12)


def test_a_view_of_an_input_is_copied():
    def f(x, c):
        return np.sum(x.reshape(-1) * c)
    x, c = RNG.normal(size=(2, 3)), RNG.normal(size=6)
    gc = ad.grad(f, argnums=1)(x, c)
    np.testing.assert_array_equal(gc, x.reshape(-1))
    assert not np.shares_memory(gc, x)


def test_a_view_of_a_slice_is_copied():
    """A reshape of part of a bigger buffer would keep all of it alive: copied."""
    def f(a, x):
        return np.sum(a * np.tanh(x)[:2].reshape(-1))
    a, x = RNG.normal(size=6), RNG.normal(size=(5, 3))
    fun = ad.grad(f, argnums=0)
    g = fun(a, x)
    np.testing.assert_allclose(g, np.tanh(x)[:2].reshape(-1), rtol=1e-12)
    assert g.base is None or g.base.size == g.size
    check_grads(f, a, x, argnums=(0, 1))
