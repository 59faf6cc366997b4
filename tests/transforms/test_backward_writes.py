"""Element writes differentiated without a copy of the whole cotangent per write
(backward/writes.py, issue 29): where no one reads the zeros a write would put in its
old array's cotangent, the old array takes the cotangent as it is.

Every function is checked by check_grads (generated code, tape, finite differences,
forward mode); the finite differences are the independent check, since the tape takes
the same rules. The cases where the zeros are read (an overlapping write, a write into
an array that needs its gradient) must keep them.
"""

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen import passes, tape
from autodiffgen.backward import node_rules, reverse, writes
from autodiffgen.graph import toposort
from autodiffgen.testing import check_grads
from autodiffgen.trace import tracer

RNG = np.random.default_rng(29)


def _backward(f, *args, argnums=0):
    return ad.emit(f, *args, argnums=argnums).split("# backward")[1]


def naive_conv(x, w):
    """A 1-channel valid 2-D correlation, one output element per loop step."""
    out = np.zeros((x.shape[0] - 1, x.shape[1] - 1), dtype=x.dtype)
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = np.sum(x[i:i + 2, j:j + 2] * w)
    return np.sum(np.tanh(out) * np.arange(out.size).reshape(out.shape))


def preallocated_rnn(x, Wh):
    """h[:, t, :] = ... into a buffer made by np.zeros, reading h[:, t - 1, :]."""
    n, steps, _ = x.shape
    h = np.zeros((n, steps, Wh.shape[0]), dtype=x.dtype)
    for t in range(steps):
        prev = np.zeros((n, Wh.shape[0]), dtype=x.dtype) if t == 0 else h[:, t - 1, :]
        h[:, t, :] = np.tanh(x[:, t, :] + prev @ Wh)
    return np.sum(h * h)


def masked_sigmoid(x):
    """The overflow-free sigmoid: writes through complementary masks into zeros_like."""
    pos, neg = x >= 0, x < 0
    z = np.zeros_like(x)
    z[pos] = np.exp(-x[pos])
    z[neg] = np.exp(x[neg])
    top = np.ones_like(x)
    top[neg] = z[neg]
    return np.sum(np.sin(top / (1 + z)))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_element_writes_into_a_fresh_buffer_copy_no_cotangent(dtype):
    x, w = RNG.normal(size=(5, 4)).astype(dtype), RNG.normal(size=(2, 2)).astype(dtype)
    tol = {} if dtype == np.float64 else {"rtol": 2e-3, "atol": 2e-3}
    check_grads(naive_conv, x, w, argnums=(0, 1), **tol)
    backward = _backward(naive_conv, x, w, argnums=(0, 1))
    assert "_setitem(" not in backward and "np.stack(" not in backward


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_preallocated_recurrent_state_is_read_where_written(dtype):
    x = RNG.normal(size=(2, 5, 3)).astype(dtype)
    Wh = 0.4 * RNG.normal(size=(3, 3)).astype(dtype)
    tol = {} if dtype == np.float64 else {"rtol": 2e-3, "atol": 2e-3}
    check_grads(preallocated_rnn, x, Wh, argnums=(0, 1), **tol)
    assert "_setitem(" not in _backward(preallocated_rnn, x, Wh, argnums=(0, 1))


def test_complementary_masks_write_apart():
    x = RNG.normal(size=(3, 4))
    check_grads(masked_sigmoid, x)
    assert "_setitem(" not in _backward(masked_sigmoid, x)


def test_a_broadcast_scalar_written_into_columns():
    def f(x, s):
        out = np.zeros((3, 4), dtype=x.dtype)
        out[:, 1] = s * 2.0            # a 0-d value, broadcast down a column
        out[:, 2] = x
        out[0, 0] = np.sum(x)          # another column: apart
        return np.sum(out * out * np.arange(12.0).reshape(3, 4))
    for dtype in (np.float64, np.float32):
        x, s = RNG.normal(size=3).astype(dtype), dtype(0.7)
        tol = {} if dtype == np.float64 else {"rtol": 2e-3, "atol": 2e-3}
        check_grads(f, x, s, argnums=(0, 1), **tol)
        assert "_setitem(" not in _backward(f, x, s, argnums=(0, 1))


# ---- where the zeros are read, they stay ---------------------------------------------------
def into_a_copy_of_the_input(x, v):
    y = x * 1.0                        # needs its gradient: x's is zero where written
    y[1] = v * 2.0
    y[3] = v
    return np.sum(y ** 2)


def overlapping_slices(a, b):
    out = np.zeros(4)
    out[0:2] = a
    out[1:3] = b * 2.0                 # out[1] = a[1] is written over
    return np.sum(np.exp(out))


def same_element_twice(a, b):
    out = np.zeros(3)
    out[1] = a
    out[1] = b
    return np.sum(out * np.array([1.0, 2.0, 3.0]))


def overlapping_index_arrays(a, b):
    out = np.zeros(4)
    out[[0, 1]] = a
    out[[1, 2]] = b
    return np.sum(np.sin(out))


def overlapping_masks(x):
    out = np.zeros_like(x)
    out[x > 0] = x[x > 0] ** 2
    out[x > 0.5] = np.cos(x[x > 0.5])
    return np.sum(out * x)


def a_write_read_whole_then_written_again(a, b):
    out = np.zeros(3)
    out[0] = a
    y = out * 3.0                      # reads the whole array between two writes
    out[1] = b
    return np.sum(y * y) + np.sum(out ** 3)


READ = [(into_a_copy_of_the_input, (RNG.normal(size=5), 0.3)),
        (overlapping_slices, (RNG.normal(size=2), RNG.normal(size=2))),
        (same_element_twice, (0.4, 1.3)),
        (overlapping_index_arrays, (RNG.normal(size=2), RNG.normal(size=2))),
        (overlapping_masks, (RNG.normal(size=6),)),
        (a_write_read_whole_then_written_again, (0.5, -0.8))]


@pytest.mark.parametrize("f, args", READ, ids=[f.__name__ for f, _ in READ])
def test_zeros_that_are_read_stay(f, args):
    argnums = tuple(i for i, a in enumerate(args) if np.ndim(a) or type(a) is float)
    check_grads(f, *args, argnums=argnums)


def test_which_writes_give_their_cotangent_unzeroed():
    def f(a, b):
        out = np.zeros(6)
        out[0:2] = a
        out[2:4] = 1.0                 # apart from 0:2
        out[3] = np.sum(a)             # meets 2:4, whose value needs no cotangent
        out[1:3] = b                   # meets 0:2, whose value needs one: zeros read
        out[5] = b[0]                  # apart from all
        return np.sum(out * out)
    args = RNG.normal(size=2), RNG.normal(size=2)
    _, _, out = tracer.trace(f, list(args), (0, 1), ["a", "b"], eager=True)
    order = toposort([out.node])
    written = [n for n in order[::-1] if n.prim is not None and n.prim.name == "setitem"]
    needs = reverse._needs_grad(order, {order[-1], order[-2]})  # a and b
    found = writes.unzeroed_writes(order, needs)
    assert [w in found for w in written] == [True, True, True, False, True]
    check_grads(f, *args, argnums=(0, 1))


def test_gradients_are_those_of_the_zeroed_cotangents(monkeypatch):
    """The tape with and without the rule: the same gradients (only elements no one reads
    differ in between)."""
    x, Wh = RNG.normal(size=(2, 4, 3)), 0.4 * RNG.normal(size=(3, 3))
    want = tape.grad(preallocated_rnn, argnums=(0, 1))(x, Wh)
    got = ad.grad(preallocated_rnn, argnums=(0, 1))(x, Wh)
    monkeypatch.setattr(node_rules, "unzeroed_writes", lambda *args: set())
    zeroed = tape.grad(preallocated_rnn, argnums=(0, 1))(x, Wh)
    for a, b, c in zip(want, got, zeroed):
        np.testing.assert_array_equal(a, c)
        np.testing.assert_allclose(b, c, rtol=1e-12)


def test_the_backward_loop_adds_into_the_state_gradient_in_place():
    """With the zeros gone, the kept backward loop of the RNN updates g_h at row t - 1 in
    place (`g_h[:, t - 1, :] += ...`: plan/memory.py proves it apart from the row t it
    reads) and the forward loop writes h[:, t, :] in place: no copy of h per step."""
    if not passes.ENABLED:
        pytest.skip("the add_at pass makes the in-place update")
    x, Wh = RNG.normal(size=(2, 6, 3)), 0.4 * RNG.normal(size=(3, 3))
    _, forward, backward = ad.emit(preallocated_rnn, x, Wh, argnums=(0, 1)).split("for t in")
    forward = forward.split("# backward")[0]
    assert "_setitem(" not in forward and "h_1[:, t, :] = " in forward
    assert "_add_at(" not in backward.split("return")[0].split("\n    del")[0]
    assert "[:, subtract_1, :] += " in backward
