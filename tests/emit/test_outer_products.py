"""A product of an (m, 1) and a (1, n) matrix is written `np.dot(a, b)` (codegen/
expressions.outer_product): np.matmul has no BLAS path for an inner size of 1 and takes
about four times as long. Into a buffer, np.dot when the buffer is C-contiguous (a
matmul's), np.multiply's broadcast otherwise. Either way each element is one product,
so the values are those of `@`, bit for bit."""

import importlib

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen import passes
from autodiffgen.plan import memory
from autodiffgen.testing import check_grads

RNG = np.random.default_rng(7)


def code_of(source):
    return "\n".join(line.split("  # ")[0] for line in source.splitlines())


def char_step(W, b, h):
    """The character models' backward: np.dot(W, h) of a column, whose gradient is the
    outer product g h^T."""
    return np.sum(np.tanh(np.dot(W, h) + b) ** 2)


def test_a_columns_gradient_is_np_dot_and_equals_matmul():
    W, b, h = RNG.normal(size=(6, 4)), RNG.normal(size=(6, 1)), RNG.normal(size=(4, 1))
    source = code_of(ad.value_and_grad(char_step).source(W, b, h))
    assert "np.dot(g_add, h.T)" in source and "np.dot(W, h)" in source  # a column's too
    _, g = ad.value_and_grad(char_step)(W, b, h)
    t = np.tanh(W @ h + b)
    np.testing.assert_array_equal(g, (2 * t * (1 - t * t)) @ h.T)  # bit for bit
    for dtype in (np.float64, np.float32):
        check_grads(char_step, W.astype(dtype), b.astype(dtype), h.astype(dtype),
                    rtol=1e-4 if dtype == np.float32 else 1e-5, fd=dtype == np.float64)


def outer(u, v):
    return np.sum(np.sin(u @ v.T))


@pytest.mark.parametrize("enabled", [True, False])
def test_outer_products_of_any_batch_size(enabled, monkeypatch):
    """u is (n, 1): the batch size n varies, the inner size stays 1."""
    monkeypatch.setattr(passes, "ENABLED", enabled)
    fun = ad.value_and_grad(outer, argnums=(0, 1))
    v = RNG.normal(size=(5, 1))
    for n in (8, 3, 11):
        u = RNG.normal(size=(n, 1))
        value, (gu, gv) = fun(u, v)
        np.testing.assert_array_equal(value, np.sum(np.sin(u @ v.T)))
        c = np.cos(u @ v.T)
        np.testing.assert_allclose(gu, c @ v, rtol=1e-12)
        np.testing.assert_allclose(gv, c.T @ u, rtol=1e-12)
    assert "np.dot(u, v.T)" in code_of(fun.source(u, v))


def outers(us, vs):
    """One outer product per step, each into the buffer the step before left: the plan
    writes them `out=` a dead buffer."""
    total = 0.0
    for k in range(us.shape[0]):
        total = total + np.sum(np.tanh(us[k] @ vs[k].T) * (k + 1))
    return total


def test_into_a_buffer_np_dot_or_multiply(monkeypatch):
    monkeypatch.setattr(memory, "MIN_ELEMENTS", 1)  # reused at any size
    monkeypatch.setattr(passes, "ENABLED", True)
    roll = importlib.import_module("autodiffgen.loops.roll")  # (the package names a function so)
    monkeypatch.setattr(roll, "USER_LOOPS", True)  # the loop kept, its rows a stack's
    us, vs = RNG.normal(size=(4, 7, 1)), RNG.normal(size=(4, 6, 1))
    fun = ad.value_and_grad(outers, argnums=(0, 1))
    forward = code_of(fun.source(us, vs).split("# backward")[0])
    assert "np.dot(getitem, transpose, out=tanhs[t])" in forward  # a row of a C-ordered stack
    assert "np.matmul" not in forward and " @ " not in forward
    check_grads(outers, us, vs, argnums=(0, 1))
    value, _ = fun(us, vs)
    assert value == sum(np.sum(np.tanh(us[k] @ vs[k].T) * (k + 1)) for k in range(4))


def test_other_products_stay_at(monkeypatch):
    monkeypatch.setattr(passes, "ENABLED", True)
    def f(W, x, v):
        return np.sum((W @ x) * 2.0) + np.sum(v @ v.T) + np.sum(x.T @ W.T)
    W, x, v = RNG.normal(size=(3, 4)), RNG.normal(size=(4, 2)), RNG.normal(size=(1, 3))
    forward, backward = ad.value_and_grad(f, argnums=(0, 1, 2)).source(W, x, v).split(
        "# backward")
    assert "np.dot(" not in code_of(forward).replace("np.dot(v, v.T)", "")  # a row's only
    assert code_of(backward).count("np.dot(") == 1  # v's: (1, 1) by (1, 3)
    check_grads(f, W, x, v, argnums=(0, 1, 2))
