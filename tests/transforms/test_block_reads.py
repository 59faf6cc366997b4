"""Values read in blocks (`x[i]` for every i): the backward pass records one scatter_add
per read and sums them, but computes the sum once while tracing (cotangent_sums.py).
Gradients through such sums, alone and mixed with whole-array contributions, with
repeated indices, in float32 and at second order; and tracing linear in the reads."""

import tracemalloc

import numpy as np
import pytest

import autodiffgen
from autodiffgen.backward import cotangent_sums
from autodiffgen.testing import check_grads

RNG = np.random.default_rng(20261124)


def rows(x):
    total = 0.0
    for i in range(x.shape[0]):
        total = total + np.sum(np.sin(x[i]) * x[i])
    return total


def mixed(x):
    """Block reads between whole-array uses, so dense terms come before, between and
    after the blocks; a repeated integer index (np.add.at) and a mask."""
    y = np.sum(x * x)
    for i in range(x.shape[0]):
        y = y + np.sum(np.exp(x[i, 1:]) * x[i, :-1])
    y = y + np.sum(np.cos(x))
    y = y + np.sum(x[np.array([0, 0, -1])] ** 2)
    return y + np.sum(x[x > 0.5] * 3.0)


def column_blocks(x):
    """Blocks that tile rows and columns: a recurrent net's gates (`xw[t, :, a:b]`)."""
    h = np.zeros(x.shape[1])
    for t in range(x.shape[0]):
        h = np.tanh(x[t, :, :2].sum(axis=1) + h * x[t, :, 2])
    return np.sum(h * h)


@pytest.mark.parametrize("f, shape", [(rows, (5, 3)), (rows, (1, 4)), (mixed, (4, 3)),
                                      (column_blocks, (6, 2, 3))],
                         ids=["rows", "one_row", "mixed", "column_blocks"])
def test_gradients_match_tape_and_differences(f, shape):
    x = RNG.uniform(0.1, 0.9, shape)
    value, _ = check_grads(f, x)
    np.testing.assert_allclose(value, f(x), rtol=1e-12)
    grad = autodiffgen.grad(f)
    x2 = RNG.uniform(0.1, 0.9, shape)  # the cached code, new values, other mask counts
    np.testing.assert_allclose(grad(x2), autodiffgen.tape.grad(f)(x2), rtol=1e-10)


@pytest.mark.parametrize("f, shape", [(rows, (4, 3)), (mixed, (3, 3))], ids=["rows", "mixed"])
def test_float32_stays_float32(f, shape):
    x = RNG.uniform(0.1, 0.9, shape).astype(np.float32)
    _, g = check_grads(f, x, rtol=2e-3, atol=1e-4)
    assert g.dtype == np.float32


def test_zero_dimensional_blocks():
    def f(x):
        return x[()] * x[()] + np.sum(x[...] * 2.0)
    check_grads(f, np.array(0.7))


@pytest.mark.parametrize("f, shape", [(rows, (3, 2)), (mixed, (3, 2))], ids=["rows", "mixed"])
def test_hessian(f, shape):
    x = RNG.uniform(0.1, 0.9, shape)
    h = autodiffgen.hessian(f)(x).reshape(x.size, x.size)
    grad, eps, columns = autodiffgen.tape.grad(f), 1e-5, []
    for k in range(x.size):
        step = np.zeros(x.size)
        step[k] = eps
        step = step.reshape(shape)
        columns.append(((grad(x + step) - grad(x - step)) / (2 * eps)).reshape(-1))
    np.testing.assert_allclose(h, np.stack(columns, axis=1), rtol=1e-5, atol=1e-6)


def test_an_outer_trace_reads_the_complete_sum():
    """The inner gradient's value decides a branch of the outer function: the value read
    while tracing is the complete sum, and the guard holds it on the next calls."""
    def outer(x):
        g = autodiffgen.grad(rows)(x)
        if np.sum(g) > 3.0:
            return np.sum(g * g)
        return np.sum(g)

    grad_outer = autodiffgen.grad(outer)
    for x in (np.full((3, 2), 0.8), np.full((3, 2), 0.1), RNG.uniform(0.5, 0.9, (3, 2))):
        eps, fd = 1e-6, np.zeros(x.size)
        for k in range(x.size):
            step = np.zeros(x.size)
            step[k] = eps
            step = step.reshape(x.shape)
            fd[k] = (outer(x + step) - outer(x - step)) / (2 * eps)
        np.testing.assert_allclose(grad_outer(x).reshape(-1), fd, rtol=1e-5, atol=1e-6)


def _first_call_peak(n):
    x = np.linspace(0.1, 0.9, n * 512).reshape(n, 512)
    grad = autodiffgen.grad(rows)
    tracemalloc.start()
    try:
        grad(x)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_tracing_memory_grows_linearly_with_block_reads():
    """n rows read one by one: a full-size cotangent per read while tracing would make
    the first call's peak grow as n * n (16x from n = 32 to 128); it grows as n."""
    _first_call_peak(8)  # imports and caches, not counted
    small, large = _first_call_peak(32), _first_call_peak(128)
    assert large < 6 * small, (small, large)


def test_a_partial_sum_is_never_read():
    stand_in = cotangent_sums._stand_in((3, 4), np.float32)
    assert stand_in.shape == (3, 4) and stand_in.dtype == np.float32
    assert np.shape(stand_in) == (3, 4) and stand_in.nbytes == 48 and stand_in.strides == (0, 0)
    with pytest.raises(RuntimeError, match="partial sum of cotangents"):
        stand_in + 1.0
    with pytest.raises(RuntimeError, match="partial sum of cotangents"):
        np.sum(stand_in)


@pytest.mark.parametrize("join", ["stack", "concatenate"])
def test_a_join_of_many_values_gives_each_its_piece_once(join, monkeypatch):
    """The backward of np.stack / np.concatenate of n values: each value's piece of the
    cotangent, made without handing a rule all n arguments (n rules of n arguments were
    quadratic in n: the wide first-call shape)."""
    from autodiffgen.rules import PRIMITIVES
    from autodiffgen.rules.vjps import VARIADIC_VJPS
    seen, prim = [], PRIMITIVES[join]
    vjp = VARIADIC_VJPS[prim]
    monkeypatch.setitem(VARIADIC_VJPS, prim, lambda i, g, ans, *arrays, **p:
                        seen.append(len(arrays)) or vjp(i, g, ans, *arrays, **p))

    def f(x):
        parts = [np.sin(x[i:i + 1 + i % 2]) * x[i] for i in range(x.shape[0] - 1)]
        return np.sum(np.stack([p.sum() for p in parts]) if join == "stack"
                      else np.concatenate(parts) ** 2)
    x = RNG.uniform(0.1, 0.9, 9)
    check_grads(f, x)
    assert max(seen, default=0) <= 1, seen
