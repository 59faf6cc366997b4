"""The memory plan: results written into dying operands, never into anything else."""

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen.testing import check_grads

RNG = np.random.default_rng(9)


def chain(x):
    a = np.sin(x)
    b = np.exp(a) * a
    c = np.tanh(b) + b
    return np.sum(c * c)


def test_dying_temporaries_are_reused():
    source = ad.emit(chain, RNG.normal(size=100))
    assert "out=" in source
    check_grads(chain, RNG.normal(size=20))


def test_inputs_outputs_and_viewed_buffers_are_never_written():
    def f(x, y):
        t = x * 2.0          # x is an input: never an out= target
        v = t.T              # t is viewed by v: never an out= target
        return np.sum(v * y) + np.sum(t)
    x, y = RNG.normal(size=(3, 3)), RNG.normal(size=(3, 3))
    x0, y0 = x.copy(), y.copy()
    source = ad.emit(f, x, y, argnums=(0, 1))
    for line in source.splitlines():
        assert "out=x)" not in line and "out=y)" not in line and "out=multiply)" not in line
    gx, gy = ad.grad(f, argnums=(0, 1))(x, y)
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_array_equal(y, y0)
    np.testing.assert_allclose(gy, 2.0 * x.T)
    np.testing.assert_allclose(gx, 2.0 * y.T + 2.0)


def test_code_with_reused_buffers_can_be_differentiated_again():
    x = RNG.normal(size=4)
    H = ad.hessian(chain)(x)
    eps = 1e-6
    g = ad.grad(chain)
    fd = np.stack([(g(x + eps * e) - g(x - eps * e)) / (2 * eps) for e in np.eye(4)])
    np.testing.assert_allclose(H, fd, rtol=1e-5, atol=1e-6)


def test_user_code_still_may_not_write_into_traced_values():
    def f(x):
        h = np.zeros(3)
        np.add(h, x, out=h)
        return h.sum()
    try:
        ad.grad(f)(np.ones(3))
    except ad.TracingError as e:
        assert "out=" in str(e)
    else:
        raise AssertionError("np.add(..., out=) on a traced value should be refused")


def test_matmul_never_writes_into_an_operand():
    def f(W, xs):
        h = np.zeros((2, 4))
        for t in range(xs.shape[0]):
            h = np.tanh(xs[t] @ W + h @ W.T[:4, :4])
        return np.sum(h ** 2)
    W, xs = RNG.normal(size=(4, 4)), RNG.normal(size=(2, 2, 4))  # T * B == H: square terms
    source = ad.emit(f, W, xs)
    assert not any("np.matmul(" in line and "out=" in line for line in source.splitlines())
    check_grads(f, W, xs)


# ---- gradients are arrays of their own (from a code review) ----------------------------
@pytest.mark.parametrize("f", [lambda W: np.sum(W.T), lambda W: W.ravel().mean(),
                               lambda W: np.sum(W[:, :, None])])
def test_gradients_are_writable_and_contiguous_enough(f):
    g = ad.grad(f)(np.ones((2, 3)))
    assert g.flags.writeable and 0 not in g.strides
    g *= 0.1


def test_gradients_do_not_share_memory_with_each_other():
    def f(x, y):
        return np.sum(np.exp(x.T + y.reshape(3, 2)))
    gx, gy = ad.grad(f, argnums=(0, 1))(RNG.normal(size=(2, 3)), RNG.normal(size=6))
    assert not np.shares_memory(gx, gy)


@pytest.mark.parametrize("make", [
    lambda C: (lambda x: np.sum(np.reshape(x, (C.size,)) * C)),   # a view of a constant
    lambda C: (lambda x: np.sum(x * np.einsum("ij->ji", C.reshape(50, 40)).reshape(-1))),
    lambda C: (lambda x: np.sum(x)),                               # a broadcast seed
])
def test_gradients_never_share_memory_with_constants_and_are_writable(make):
    C = np.arange(2000.0)
    f = ad.grad(make(C))
    g = f(np.ones(2000))
    g *= 0.0
    np.testing.assert_array_equal(C, np.arange(2000.0))
    assert f(np.ones(2000)).any()


def test_memory_plan_respects_views_made_by_user_primitives():
    @ad.primitive
    def flip_t(x):
        return x.T
    ad.defvjp(flip_t, lambda g, ans, x: g.T)

    def f(x):
        a = np.sin(x)
        v = flip_t(a)
        b = a * 2.0
        return np.sum(b * v.T)
    x = RNG.normal(size=(3, 3))
    value, _ = ad.value_and_grad(f)(x)
    assert np.isclose(value, f(x))
