"""Many masks in one program (issue 29, item 0): the numerically stable sigmoid course code
uses holds two, so k stacked layers hold 2k and an LSTM three pairs per step. Every count is
still read at run time from one trace, and the first call probes the counts together
(generalize/probes.py: a few traces for all of them), where it took two traces per mask
and, before that, minutes for six layers (each mask's key was hashed as a tree that
doubled with every layer).

The trace counts come from trace.tracer.runs(); values and gradients are compared with the
tape and central finite differences over batch sizes and counts, 0 and all included.
"""

import importlib.util
import pathlib
import sys
import time
import types

import numpy as np
import pytest
from test_sizes import fd_check, quiet

import autodiffgen as ad
from autodiffgen import tape
from autodiffgen.generalize import probes
from autodiffgen.trace import tracer


def _load(name):
    """A module of benchmarks/ (the user's code the issue timed, which knows no autodiffgen)."""
    path = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"benchmarks_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


layer_models = _load("layer_models")
sigmoid = layer_models.sigmoid  # pos_mask = x >= 0; neg_mask = x < 0; z[pos_mask] = ...


def stacked(k):
    def f(W, x):
        h = x
        for _ in range(k):
            h = sigmoid(h @ W)
        return np.sum(h)
    return f


def first_call(fun, *args, **kwargs):
    """(traces, seconds) of the first call of value_and_grad(fun) on args."""
    g = ad.value_and_grad(fun, **kwargs)
    before, start = tracer.runs(), time.perf_counter()
    g(*args)
    return tracer.runs() - before, time.perf_counter() - start


def weights(seed=0, n=16):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, n)), rng.standard_normal((32, n))


def agree(f, g, args, argnums, rng):
    """g's value and gradients are eager NumPy's, the tape's and finite differences'."""
    value, grads = g(*args)
    t_value, t_grads = tape.value_and_grad(f, argnums=argnums)(*args)
    np.testing.assert_allclose(value, f(*args), rtol=1e-12)
    np.testing.assert_allclose(value, t_value, rtol=1e-12)
    grads = grads if type(grads) is tuple else (grads,)
    t_grads = t_grads if type(t_grads) is tuple else (t_grads,)
    for a, b in zip(grads, t_grads):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    fd_check(f, args, argnums, grads, rng)


# ---- the cost of a first call ---------------------------------------------------------------
def test_traces_of_stacked_sigmoids_grow_at_most_linearly():
    W, x = weights()
    traces, seconds = zip(*(first_call(stacked(k), W, x) for k in range(1, 9)))
    for k, count in enumerate(traces, 1):
        assert count <= 3 + k, traces  # 2k masks: two traces each would be 1 + 4k
    assert traces[-1] <= 2 + (2 * 8).bit_length(), traces  # the probes: ~log2 of the masks
    assert seconds[-1] < 5.0, seconds


def lstm_args(steps, seed=0, batch=16, hidden=32):
    """lstm_loss's (x, h0, Wx, Wh, b, dh): its gates sliced out of one product, a[:, :H],
    read a size after the masks that no count moves."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((batch, steps, hidden)), rng.standard_normal((batch, hidden)),
            rng.standard_normal((hidden, 4 * hidden)) * 0.3,
            rng.standard_normal((hidden, 4 * hidden)) * 0.3,
            rng.standard_normal(4 * hidden) * 0.1, rng.standard_normal((batch, steps, hidden)))


def test_an_lstm_of_masked_sigmoids_traces_a_few_times():
    """Three masked sigmoids a step: 24 masks at 4 steps, in a handful of traces."""
    traces, seconds = first_call(layer_models.lstm_loss, *lstm_args(4),
                                 argnums=(0, 1, 2, 3, 4))
    assert traces <= 3 + (24).bit_length(), traces
    assert seconds < 5.0, seconds


def test_the_lstm_is_right_at_other_counts_from_one_trace():
    f = layer_models.lstm_loss
    g = ad.value_and_grad(f, argnums=(0, 1, 2, 3, 4))
    rng = np.random.default_rng(5)
    for seed, scale in ((1, 1.0), (2, 3.0), (3, 0.2)):
        x, *rest = lstm_args(3, seed, batch=4, hidden=5)
        agree(f, g, (x * scale, *rest), (0, 1, 2, 3, 4), rng)
    assert g.cache_info().misses == 1, g.cache_info()


# ---- every count from one trace ---------------------------------------------------------------
@pytest.mark.parametrize("k", [1, 3, 6])
def test_stacked_sigmoids_are_right_at_every_count_and_batch_size(k):
    """One trace per batch size (a program with masks is specialized per shape) serves
    every count: inputs scaled so that the first layer's masks select all, none, or some."""
    f = stacked(k)
    g = ad.value_and_grad(f, argnums=(0, 1))
    rng = np.random.default_rng(k)
    sizes = (32, 7, 3)
    for rows in sizes:
        W = rng.standard_normal((6, 6))
        for shift in (0.0, 50.0, -50.0, 0.5):
            x = rng.standard_normal((rows, 6)) + shift
            with np.errstate(over="ignore"):
                agree(f, g, (W, x), (0, 1), rng)
    assert g.cache_info().misses == len(sizes), g.cache_info()


def pairs(x, ms):
    """Complementary masks, one pair per layer: x[m] and x[~m], which the probes change
    apart (~m keeps its own count)."""
    for m in ms:
        y = np.empty_like(x)
        y[m] = np.tanh(x[m]) * 2.0
        y[~m] = x[~m] ** 2 / (1.0 + np.count_nonzero(~m))
        x = y + x[m].mean() if m.any() else y
    return np.sum(x ** 2)


def test_complementary_masks_in_many_layers_from_one_trace():
    rng = np.random.default_rng(3)
    g = ad.value_and_grad(pairs)
    for counts in ((5, 9, 2, 12), (0, 16, 7, 1), (16, 3, 3, 8), (1, 15, 10, 4)):
        ms = []
        for count in counts:
            m = np.zeros(16, bool)
            m[rng.permutation(16)[:count]] = True
            ms.append(m)
        stack = quiet()
        try:
            with np.errstate(all="ignore"):
                agree(pairs, g, (rng.standard_normal(16) * 0.5, tuple(ms)), (0,), rng)
        finally:
            stack.__exit__(None, None, None)
    assert g.cache_info().misses <= 2, g.cache_info()  # (`m.any()`: a branch on data)


def test_a_count_decided_in_python_among_many_masks_is_guarded():
    """One layer's count decides a branch in Python: that count traces per value (the code
    checks it), the others are still read at run time; every call is right."""
    def f(W, x):
        h = sigmoid(x @ W)
        top = h[x[:, 0] > 0]
        scale = 2.0 if len(top) > 16 else 0.5
        return np.sum(sigmoid(h @ W)) * scale + np.sum(top)

    W, _ = weights(1, 4)
    g = ad.value_and_grad(f, argnums=(0, 1))
    rng = np.random.default_rng(6)
    for shift in (0.0, 2.0, -2.0, 0.3):
        agree(f, g, (W, rng.standard_normal((32, 4)) + shift), (0, 1), rng)
    assert g.cache_info().misses >= 2, g.cache_info()


def test_a_size_read_that_no_count_moves_serves_counts_0_and_1():
    """a[:, :2] after the masks reads a's shape, which is the same at every count: the
    code serves every count, 0 and 1 included, where any size read once traced each."""
    def f(w, x):
        s = sigmoid(x * w)
        return np.sum(s[:, :2] ** 2) + np.sum(s)

    rng = np.random.default_rng(8)
    w = rng.standard_normal(3)
    g = ad.value_and_grad(f, argnums=(0, 1))
    for shift in (0.0, 40.0, -40.0):
        x = rng.standard_normal((4, 3)) * 0.1 + shift * np.sign(w)
        with np.errstate(over="ignore"):
            agree(f, g, (w, x), (0, 1), rng)
    x = np.full((4, 3), -1.0) * np.sign(w)
    x[0, 0] *= -1  # one element selected by the first mask
    agree(f, g, (w, x), (0, 1), rng)
    assert g.cache_info().misses == 1, g.cache_info()


# ---- the design of the probes ---------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 2, 3, 7, 8, 40, 96])
def test_joint_probes_tell_every_count_apart(n):
    """The counts of `jointly`'s traces: three per source, none a function of another's."""
    guard = types.SimpleNamespace(params={"total": 4 * n + 40})
    centre = list(range(10, 10 + 2 * n, 2))
    columns = probes.jointly([guard] * n, centre, (1, 0))
    assert len(columns) == n.bit_length() + 1
    at = [centre] + [[column[i] for i in range(n)] for column in columns]
    assert probes.separable(at)
    for column in columns:  # no two sources meet in a trace
        assert len(set(column.values())) == n


def test_counts_that_move_together_are_not_separable():
    assert not probes.separable([[5, 9], [6, 10], [7, 11]])  # the second follows the first
    assert not probes.separable([[5, 9], [6, 9], [5, 10]])  # two counts each
    assert probes.separable([[5, 9], [6, 9], [5, 10], [7, 11]])
