"""A slice whose bounds come from an int input and whose length is fixed
(`X[i * bs:(i + 1) * bs]`, an iteration counter picking a minibatch): the bounds are inputs
of the generated code, the guards check only the length (rules/numpy_api/indexing.py
_dynamic_slice), so one trace serves every batch; where NumPy's clipping or wrapping would
give another length, the call takes another entry, never a wrong answer."""

import re

import numpy as np
import pytest

from autodiffgen import grad, hessian, jvp, tape, value_and_grad
from autodiffgen.testing import check_grads

RNG = np.random.default_rng(12)
X = RNG.normal(size=(1000, 5))
BS, BATCHES = 10, 100
START = 30  # an int global used as a slice bound


def minibatch_loss(w, it):
    idx = it % BATCHES
    rows = slice(idx * BS, (idx + 1) * BS)  # as Autograd's MNIST examples
    return np.sum(np.tanh(X[rows] @ w) ** 2)


def _expected(w, it):
    idx = it % BATCHES
    rows = X[idx * BS:(idx + 1) * BS]
    t = np.tanh(rows @ w)
    return rows.T @ (2 * t * (1 - t ** 2))


def test_300_steps_over_100_batches_trace_once_and_match_eager():
    g, w = grad(minibatch_loss), RNG.normal(size=5)
    for it in range(300):
        out = g(w, it)
        if it % 37 == 0:
            np.testing.assert_allclose(out, _expected(w, it), rtol=1e-12)
            np.testing.assert_allclose(out, tape.grad(minibatch_loss)(w, it), rtol=1e-12)
    for it in (3, 250):
        check_grads(minibatch_loss, w, it)  # the generated code, the tape and FD agree
    assert g.cache_info().misses == 1
    assert re.search(r"= X\[\w+:\w+\]\n", g.source(w, 7))  # the bounds: computed inputs


def test_rows_differentiated_scatter_into_the_slice():
    def window(x, i):
        return np.sum(np.sin(x[i:i + 3]) * np.arange(1.0, 4.0)[:, None])
    x = RNG.normal(size=(10, 2))
    vg = value_and_grad(window)
    for i in (0, 4, 7, 2):
        value, g = vg(x, i)
        want = np.zeros_like(x)
        want[i:i + 3] = np.cos(x[i:i + 3]) * np.arange(1.0, 4.0)[:, None]
        np.testing.assert_allclose(value, window(x, i))
        np.testing.assert_allclose(g, want, rtol=1e-12)
        tape_value, tape_g = tape.value_and_grad(window)(x, i)
        np.testing.assert_allclose(tape_value, value)
        np.testing.assert_allclose(g, tape_g, rtol=1e-12)
        check_grads(window, x, i)
    assert vg.cache_info().misses == 1
    _, tangent = jvp(window, (x, 5), (np.ones_like(x), 0))
    np.testing.assert_allclose(tangent, np.sum(np.cos(x[5:8]) * np.arange(1.0, 4.0)[:, None]))


def test_second_order_through_a_dynamic_slice():
    def cubic(x, i):
        return np.sum(x[i:i + 2] ** 3)
    x = RNG.normal(size=4)
    for i in (0, 2, 1):
        np.testing.assert_allclose(hessian(cubic)(x, i), np.diag(
            np.where((np.arange(4) >= i) & (np.arange(4) < i + 2), 6 * x, 0.0)), rtol=1e-12)
    np.testing.assert_allclose(grad(grad(lambda t, i: np.sum(
        np.sin(t * np.arange(6.0)[i:i + 3]))))(0.3, 2), -np.sum(
        np.arange(2.0, 5.0) ** 2 * np.sin(0.3 * np.arange(2.0, 5.0))), rtol=1e-12)


@pytest.mark.parametrize("i", [97, 99, 100, 130, -3, -7, -200])
def test_bounds_numpy_clips_or_wraps_take_another_entry(i):
    def window(x, i):
        return np.sum(x[i:i + 5] ** 2)
    x = RNG.normal(size=100)
    g = grad(window)
    g(x, 10)  # traced where the slice is inside: a dynamic slice
    want = np.zeros_like(x)
    want[i:i + 5] = 2 * x[i:i + 5]
    np.testing.assert_allclose(g(x, i), want, rtol=1e-12)
    np.testing.assert_allclose(g(x, 20), np.where((np.arange(100) >= 20) & (
        np.arange(100) < 25), 2 * x, 0.0), rtol=1e-12)


def test_last_shorter_batch_is_another_entry_not_a_wrong_answer():
    x = RNG.normal(size=(95, 3))

    def batch_sum(w, it):
        return np.sum((x[it * 10:(it + 1) * 10] @ w) ** 2)
    g, w = grad(batch_sum), RNG.normal(size=3)
    for it in list(range(10)) * 2:
        rows = x[it * 10:(it + 1) * 10]
        np.testing.assert_allclose(g(w, it), 2 * rows.T @ (rows @ w), rtol=1e-12)
    assert g.cache_info().misses == 2  # batches of 10, and the last one of 5


def test_a_step_or_an_open_end_is_still_read_as_before():
    def strided(x, i):
        return np.sum(x[i:i + 6:2] ** 2) + np.sum(x[i:])
    x = RNG.normal(size=12)
    g = grad(strided)
    for i in (1, 4):
        want = np.ones_like(x) * (np.arange(12) >= i)
        want[i:i + 6:2] += 2 * x[i:i + 6:2]
        np.testing.assert_allclose(g(x, i), want, rtol=1e-12)
    assert g.cache_info().misses == 2  # x[i:] decides a shape: one trace per value


def test_an_int_global_as_the_start_is_an_input():
    def from_global(w):
        return np.sum(X[START:START + BS] @ w)
    g, w = grad(from_global), np.ones(5)
    global START
    try:
        for start in (30, 500, 990):
            START = start
            np.testing.assert_allclose(g(w), X[start:start + BS].sum(axis=0), rtol=1e-12)
        assert g.cache_info().misses == 1
    finally:
        START = 30


def test_float32_stays_float32():
    x = RNG.normal(size=(20, 2)).astype(np.float32)

    def window(x, i):
        return np.sum(x[i:i + 4] ** 2)
    for i in (0, 9):
        out = grad(window)(x, i)
        assert out.dtype == np.float32
        np.testing.assert_allclose(out[i:i + 4], 2 * x[i:i + 4], rtol=1e-6)


def test_a_write_into_a_dynamic_slice_view_reaches_its_base():
    def scaled_window(x, i):
        y = x * 1.0
        v = y[i:i + 3]
        v *= 2.0  # NumPy writes into y through the view
        return np.sum(y ** 2)
    x = np.arange(1.0, 11.0)
    g = grad(scaled_window)
    for i in (2, 5, 0):
        want = 2 * x
        want[i:i + 3] *= 4.0
        np.testing.assert_allclose(g(x, i), want, rtol=1e-12)
    assert g.cache_info().misses == 1
