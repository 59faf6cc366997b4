"""passes/stepwise.py: a stack's parts' identical elementwise subgraphs computed once over
the stack, each step reading its row, written into the rows of the join its readers are
parts of (emit_slots._row_readers), so no buffer is added."""

import importlib
import re
import tracemalloc

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen import passes
from autodiffgen.tape import TapeFunction
from autodiffgen.testing import check_grads

# the pass batches steps written out (loops that cannot be kept as loops)
pytestmark = pytest.mark.usefixtures("written_out")

RNG = np.random.default_rng(1616)
# the module (the package exports its function under the same name)
stepwise = importlib.import_module("autodiffgen.passes.stepwise")
BATCHED = "steps at once"


@pytest.fixture(autouse=True)
def _with_passes(monkeypatch):
    """The stacks the pass batches over are made by the passes (accumulate), so these
    tests run with the passes on, also under AUTODIFFGEN_PASSES=0."""
    monkeypatch.setattr(passes, "ENABLED", True)


def _off(monkeypatch):
    """The pass batches nothing (a run would need more parts than any stack has)."""
    monkeypatch.setattr(stepwise, "MIN_RUN", 10 ** 9)


def elman(U, W, xs, h0):
    """A tanh recurrence with a cubic loss (not the benchmark's): the backward reads
    1 - h_k * h_k of every step's state, and the weight gradient stacks the states."""
    h = h0
    for t in range(xs.shape[0]):
        h = np.tanh(xs[t] @ U + h @ W)
    return np.sum(h ** 3) / 3.0


def elman_args(dtype, steps=5, batch=3, inputs=2, hidden=4, rng=RNG):
    return (rng.normal(size=(inputs, hidden)).astype(dtype),
            (rng.normal(size=(hidden, hidden)) / 2).astype(dtype),
            rng.normal(size=(steps, batch, inputs)).astype(dtype),
            rng.normal(size=(batch, hidden)).astype(dtype))


def rows(xs, w, c=1.0):
    """A forward that writes the pattern itself: every step's tanh stacked, and every
    step's w[t] * (c + 2p) stacked (the readers of the subgraphs, parts of a join)."""
    ps = [np.tanh(xs[t]) for t in range(xs.shape[0])]
    hs = np.stack(ps)
    qs = np.stack([w[t] * (c + 2.0 * ps[t]) for t in range(xs.shape[0])])
    return np.sum(hs * qs)


@pytest.mark.parametrize("steps", [3, 5, 8])
def test_a_recurrences_backward_batches_its_steps_and_agrees(steps):
    args = elman_args(np.float64, steps=steps)
    source = ad.emit(elman, *args, argnums=(0, 1))
    assert BATCHED in source
    assert source.count("np.empty(") == 2  # the states' stack and the gradients': no more
    check_grads(elman, *args, argnums=(0, 1))



def _left_alone(f, *args):
    """f's code has no batched statement, and its gradient is right."""
    assert BATCHED not in ad.emit(f, *args, argnums=(0, 1))
    check_grads(f, *args, argnums=(0, 1))

def test_float32_stays_float32_bit_for_bit_as_without_the_pass(monkeypatch):
    args = elman_args(np.float32, steps=7)
    f = ad.value_and_grad(elman, argnums=(0, 1, 2))
    value, grads = f(*args)
    assert BATCHED in f.source(*args)
    assert all(g.dtype == np.float32 for g in grads)
    _off(monkeypatch)
    f = ad.value_and_grad(elman, argnums=(0, 1, 2))
    f.cache_clear()  # compiled anew, without the pass
    plain_value, plain = f(*args)
    assert BATCHED not in f.source(*args)
    assert value == plain_value
    for g, p in zip(grads, plain):
        np.testing.assert_array_equal(g, p)


def test_new_values_on_the_cached_function():
    f = ad.value_and_grad(elman, argnums=(0, 1))
    for seed in range(4):
        args = elman_args(np.float64, rng=np.random.default_rng(seed))
        value, grads = f(*args)
        want_value, want = TapeFunction(elman, (0, 1))(*args)
        np.testing.assert_allclose(value, want_value, rtol=1e-12)
        for g, w in zip(grads, want):
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
    assert f.cache_info().misses == 1


def test_one_trace_serves_other_batch_sizes():
    def batch_first(U, W, xb, h0):
        return elman(U, W, np.swapaxes(xb, 0, 1), h0)
    f = ad.value_and_grad(batch_first, argnums=(0, 1))
    for batch in (9, 7, 8, 9):
        U, W, xs, h0 = elman_args(np.float64, batch=batch, rng=np.random.default_rng(batch))
        args = (U, W, np.swapaxes(xs, 0, 1).copy(), h0)
        value, grads = f(*args)
        want_value, want = TapeFunction(batch_first, (0, 1))(*args)
        np.testing.assert_allclose(value, want_value, rtol=1e-12)
        for g, w in zip(grads, want):
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
    assert f.cache_info().misses == 1
    assert BATCHED in f.source(*args)


def test_no_more_peak_memory_than_without_the_pass(monkeypatch):
    args = elman_args(np.float64, steps=40, batch=16, hidden=32)

    def peak():
        f = ad.value_and_grad(elman, argnums=(0, 1))
        f.cache_clear()  # compiled anew, with the pass or without
        f(*args)
        tracemalloc.start()
        f(*args)
        top = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return top, f.source(*args)
    batched, source = peak()
    _off(monkeypatch)
    plain, plain_source = peak()
    assert BATCHED in source and BATCHED not in plain_source
    assert batched <= plain, (batched, plain)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_forward_written_pattern_batches_and_agrees(dtype):
    """Written in the forward (c + 2p read by w[t] * ..., a part of a stack), with the
    0-d argument c the same for every step. Not differentiated in w: w's gradient
    would read c + 2p again, a second reader."""
    xs, w = RNG.normal(size=(4, 3, 2)).astype(dtype), RNG.normal(size=(4, 3, 2)).astype(dtype)
    c = dtype(0.5)
    source = ad.emit(rows, xs, w, c)
    assert source.count(BATCHED) == 2  # c + 2p, and tanh's 1 - p*p in the backward
    assert "np.empty((3, 3, 2)" not in source
    value, grad = ad.value_and_grad(rows)(xs, w, c)
    assert grad.dtype == dtype
    want_value, want = TapeFunction(rows, 0)(xs, w, c)
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(value, want_value, rtol=rtol)
    np.testing.assert_allclose(grad, want, rtol=rtol, atol=rtol)
    if dtype == np.float64:
        check_grads(rows, xs, w, c, argnums=0)
        check_grads(rows, xs, w, c, argnums=(0, 1))


def test_array_constants_batch_when_equal():
    """A 0-d array constant, the same at every step (compared by value)."""
    def f(xs, w):
        ps = [np.tanh(xs[t]) for t in range(xs.shape[0])]
        qs = np.stack([w[t] * (np.array(0.5) + 2.0 * ps[t]) for t in range(xs.shape[0])])
        return np.sum(np.stack(ps) * qs)
    xs, w = RNG.normal(size=(4, 3, 2)), RNG.normal(size=(4, 3, 2))
    assert ad.emit(f, xs, w).count(BATCHED) == 2
    check_grads(f, xs, w, argnums=(0, 1))


def test_subgraphs_that_differ_are_not_batched():
    """Each step's constant differs: no two subgraphs are the same."""
    def f(xs, w):
        ps = [np.tanh(xs[t]) for t in range(xs.shape[0])]
        qs = np.stack([w[t] * (float(t) - ps[t] * ps[t]) for t in range(xs.shape[0])])
        return np.sum(np.stack(ps) * qs)
    xs, w = RNG.normal(size=(4, 3, 2)), RNG.normal(size=(4, 3, 2))
    _left_alone(f, xs, w)


def test_alternating_steps_are_not_batched():
    """Every other step's state is tanh(2a)/2, whose backward reads no 1 - h*h of it:
    no two consecutive parts have the subgraph."""
    def f(U, W, xs, h0):
        h = h0
        for t in range(xs.shape[0]):
            a = xs[t] @ U + h @ W
            h = np.tanh(a) if t % 2 == 0 else np.tanh(2.0 * a) / 2.0
        return np.sum(h ** 3)
    args = elman_args(np.float64, steps=6)
    assert BATCHED not in ad.emit(f, *args, argnums=(0, 1))
    check_grads(f, *args, argnums=(0, 1))


def test_a_subgraph_value_read_elsewhere_forbids_it():
    """c - p*p is also summed: the batched value would be read whole, not row by row by
    the join's parts, and would hold a buffer of its own."""
    def f(xs, w):
        ps = [np.tanh(xs[t]) for t in range(xs.shape[0])]
        ss = [1.0 - p * p for p in ps]
        qs = np.stack([w[t] * ss[t] for t in range(xs.shape[0])])
        return np.sum(np.stack(ps) * qs) + sum(np.sum(s) for s in ss)
    xs, w = RNG.normal(size=(4, 3, 2)), RNG.normal(size=(4, 3, 2))
    _left_alone(f, xs, w)


def test_parts_computed_after_a_subgraph_is_read_are_not_batched():
    """Each step's part depends on the last step's subgraph (p_{t+1} = tanh(x + q_t)):
    the parts are not all there where the first subgraph is read."""
    def f(xs, w):
        ps, qs, q = [], [], 0.0
        for t in range(xs.shape[0]):
            p = np.tanh(xs[t] + q)
            q = w[t] * (1.0 - p * p)
            ps.append(p)
            qs.append(q)
        return np.sum(np.stack(ps) * np.stack(qs))
    xs, w = RNG.normal(size=(4, 3, 2)), RNG.normal(size=(4, 3, 2))
    _left_alone(f, xs, w)


def test_readers_joined_in_the_other_order_are_not_batched():
    """The readers' stack runs backwards: the batched rows would not lie in its buffer."""
    def f(xs, w):
        ps = [np.tanh(xs[t]) for t in range(xs.shape[0])]
        qs = np.stack([w[t] * (1.0 - ps[t] * ps[t]) for t in range(xs.shape[0])][::-1])
        return np.sum(np.stack(ps) * qs)
    xs, w = RNG.normal(size=(4, 3, 2)), RNG.normal(size=(4, 3, 2))
    _left_alone(f, xs, w)


def test_an_output_part_or_value_is_left_alone():
    """The subgraph's value is returned: it keeps its own array."""
    def f(xs, w):
        ps = [np.tanh(xs[t]) for t in range(xs.shape[0])]
        ss = [1.0 - p * p for p in ps]
        qs = np.stack([w[t] * ss[t] for t in range(xs.shape[0])])
        return np.sum(np.stack(ps) * qs), ss[1]
    xs, w = RNG.normal(size=(4, 3, 2)), RNG.normal(size=(4, 3, 2))
    f_aux = ad.value_and_grad(f, argnums=(0, 1), has_aux=True)
    (value, aux), _ = f_aux(xs, w)
    np.testing.assert_allclose(aux, 1.0 - np.tanh(xs[1]) ** 2, rtol=1e-12)
    np.testing.assert_allclose(value, f(xs, w)[0], rtol=1e-12)


def test_second_order_through_the_batched_rows():
    def f(x):
        return elman(x[:2], x[2:], XS, H0)
    x = RNG.normal(size=(6, 4)) / 2
    hess = ad.hessian(f)(x)
    eps, base = 1e-6, ad.grad(f)
    fd = np.stack([(base(x + eps * e.reshape(x.shape)) - base(x - eps * e.reshape(x.shape)))
                   / (2 * eps) for e in np.eye(x.size)]).reshape(x.shape * 2)
    np.testing.assert_allclose(hess, np.moveaxis(fd, (0, 1), (2, 3)), rtol=1e-5, atol=1e-7)


XS, H0 = RNG.normal(size=(4, 3, 2)), RNG.normal(size=(3, 4))


def test_a_value_read_row_by_row_by_a_joins_parts_is_computed_into_the_join():
    """Written so by the user (no pass needed): t's rows are read once each, by the parts
    of qs in order, so t is computed into qs's buffer and each part overwrites its row
    (sin's backward reads x, not t; w's gradient, which would read t's rows again, is
    not asked for)."""
    def f(x, w):
        t = np.sin(x)
        qs = np.stack([w[i] * t[i] for i in range(x.shape[0])])
        return np.sum(qs * qs)
    x, w = RNG.normal(size=(4, 3)), RNG.normal(size=(4, 3))
    source = ad.emit(f, x, w)
    assert re.search(r"np\.sin\(x, out=\w+\)", source)  # the join's whole buffer
    check_grads(f, x, w)
    check_grads(f, x, w, argnums=(0, 1))


def test_rows_read_out_of_order_or_twice_keep_their_own_buffer():
    def f(x, w):
        t = np.sin(x)
        qs = np.stack([w[i] * t[(i + 1) % 4] for i in range(4)])
        return np.sum(qs * qs) + np.sum(t[0] * w[1])
    x, w = RNG.normal(size=(4, 3)), RNG.normal(size=(4, 3))
    source = ad.emit(f, x, w)
    assert re.search(r"np\.sin\(x\)", source)
    check_grads(f, x, w, argnums=(0, 1))


def test_rows_slot():
    from autodiffgen.graph import Node
    from autodiffgen.plan.slots import Slot, _rows_slot
    base = Node(0, None, (), {}, (5, 2, 6), np.dtype(np.float64))
    value = Node(1, None, (), {}, (3, 2, 2), np.dtype(np.float64))
    rows = [(k, Slot(base, (k + 1, (0, None), (4, 6)))) for k in range(3)]
    assert _rows_slot(value, rows).items == ((1, 4), (0, None), (4, 6))
    assert _rows_slot(value, rows[::-1]).items == ((1, 4), (0, None), (4, 6))  # by row
    backwards = [(k, Slot(base, (3 - k, (0, None), (4, 6)))) for k in range(3)]
    assert _rows_slot(value, backwards) is None
    assert _rows_slot(value, rows[:2]) is None  # a row not in a slot
    across = [(k, Slot(base, ((0, None), k, (4, 6)))) for k in range(3)]
    assert _rows_slot(value, across) is None  # the rows' axis is not the value's first
