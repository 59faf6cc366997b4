"""Counts nothing needs are not probed (generalize/counts.py: unneeded). A mask whose
selections were all recorded whole (rules/masked_writes.py: the stable sigmoid's
`z[m] = np.exp(-x[m])`) has a count no line of the code reads; a size the user's Python
reads from a value no selection made (an LSTM's `H = h.shape[1]`) holds no count
(count_sources.count_shaped). Such counts are neither probed nor guarded: one trace
serves every count. A size read from a selection (`len(x[m])`), or a selection left in
the code, keeps its count probed or guarded, as before."""

import sys
from pathlib import Path

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen.trace import tracer

sys.path.insert(0, str(Path(__file__).parents[1] / "rules"))
from test_masked_writes import masked_tape, sigmoid

RNG = np.random.default_rng(41)


def stacked(x, W, k):
    h = x
    for _ in range(k):
        h = sigmoid(h @ W)
    return np.sum(h)


def lstm_like(xs, h0, Wx, Wh):  # the gates' width read from h at every step
    h, c = h0, np.zeros_like(h0)
    for t in range(xs.shape[0]):
        H = h.shape[1]
        a = xs[t] @ Wx + h @ Wh
        i, f, o = sigmoid(a[:, :H]), sigmoid(a[:, H:2 * H]), sigmoid(a[:, 2 * H:3 * H])
        c = f * c + i * np.tanh(a[:, 3 * H:])
        h = o * np.tanh(c)
    return np.sum(h * h)


def decides_on_a_count(x):  # Python reads the selection's length: its count is kept
    m = x >= 0
    positive = x[m]
    scale = 2.0 if len(positive) > 3 else 3.0
    z = np.zeros_like(x)
    z[m] = np.exp(-positive)
    z[~m] = np.exp(x[~m])
    return np.sum(z) * scale


def mean_of_selection(x):  # a selection left in the code: its count is read at run time
    return np.sum(sigmoid(x)) + np.mean(x[x > 0.5])


def lstm_args(dtype=np.float64, T=4, N=3, D=5, H=4):
    return tuple(RNG.normal(size=s).astype(dtype) for s in
                 [(T, N, D), (N, H), (D, 4 * H), (H, 4 * H)])


def traces(fun, *args, argnums=0):
    """(f, the traces its first call made)."""
    f = ad.value_and_grad(fun, argnums)
    runs = tracer.runs()
    f(*args)
    return f, tracer.runs() - runs


def test_an_lstm_reading_its_width_traces_once_and_serves_every_count():
    args = lstm_args()
    f, made = traces(lstm_like, *args, argnums=(0, 1, 2, 3))
    assert made == 1  # (10 traces before: every count probed)
    source = ad.emit(lstm_like, *args, argnums=(0, 1, 2, 3))
    assert "count_nonzero" not in source
    runs = tracer.runs()
    for scale in (1.0, 5.0, -5.0):  # other counts in every mask
        moved = (args[0] * scale, *args[1:])
        value, grads = f(*moved)
        tape_value, tape_grads = masked_tape(lstm_like, (0, 1, 2, 3))(*moved)
        np.testing.assert_allclose(value, lstm_like(*moved), rtol=1e-13)
        np.testing.assert_allclose(value, tape_value, rtol=1e-13)
        for g, t in zip(grads, tape_grads):
            np.testing.assert_allclose(g, t, rtol=1e-11, atol=1e-14)
    assert tracer.runs() - runs == 3  # (the tape's)
    ad.testing.check_grads(lstm_like, *args, argnums=(0, 1, 2, 3))


def test_float32_keeps_its_dtype():
    args = lstm_args(np.float32)
    f, made = traces(lstm_like, *args, argnums=(1, 2))
    assert made == 1
    value, (g_h0, g_Wx) = f(*args)
    assert np.result_type(value) == np.float32 and g_h0.dtype == g_Wx.dtype == np.float32
    _, (t_h0, t_Wx) = masked_tape(lstm_like, (1, 2))(*args)
    np.testing.assert_allclose(g_h0, t_h0, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(g_Wx, t_Wx, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("k", [1, 3, 8, 20])
def test_stacked_sigmoids_trace_once(k):
    x, W = RNG.normal(size=(4, 5)), RNG.normal(size=(5, 5))
    _, made = traces(lambda x, W: stacked(x, W, k), x, W, argnums=(0, 1))
    assert made == 1


def test_a_count_python_decides_on_stays_guarded():
    x = np.array([1.0, -2.0, 0.5, 3.0, -0.1, 2.0])  # 4 selected: scale 2
    f, _ = traces(decides_on_a_count, x)
    for arg in (x, -x, x * 3):  # 2 selected: scale 3
        value, grad = f(arg)
        tape_value, tape_grad = masked_tape(decides_on_a_count)(arg)
        np.testing.assert_allclose(value, decides_on_a_count(arg), rtol=1e-14)
        np.testing.assert_allclose(value, tape_value, rtol=1e-14)
        np.testing.assert_allclose(grad, tape_grad, rtol=1e-13)
    assert "count_nonzero" in ad.emit(decides_on_a_count, x)


def test_a_selection_left_in_the_code_reads_its_count():
    x = RNG.normal(size=(6, 5))
    f, _ = traces(mean_of_selection, x)
    runs = tracer.runs()
    for arg in (x, x + 1.0, x - 0.3):
        value, grad = f(arg)
        np.testing.assert_allclose(value, mean_of_selection(arg), rtol=1e-13)
        np.testing.assert_allclose(grad, masked_tape(mean_of_selection)(arg)[1], rtol=1e-12)
    assert tracer.runs() - runs == 3  # (the tape's): one code serves every count
    assert "count_nonzero" in ad.emit(mean_of_selection, x)
