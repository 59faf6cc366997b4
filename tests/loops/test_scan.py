"""loops/scan.py: the user's for loops kept as loops, forward and backward, each kind of
loop against the same function with rolling off (the steps written out), the tape and
finite differences, at several lengths and both float precisions; loops that must stay
written out do, and AUTODIFFGEN_EXPLAIN=1 says why."""

import importlib
import logging
import pathlib
import types

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen import passes, tape
from autodiffgen.testing import check_grads

roll_module = importlib.import_module("autodiffgen.loops.roll")
RNG = np.random.default_rng(27)


# ---- the kinds of loop ------------------------------------------------------------------
def range_of_shape(Wx, Wh, b, xs):
    h = np.zeros((xs.shape[1], Wh.shape[0]), xs.dtype)
    for t in range(xs.shape[0]):
        h = np.tanh(xs[t] @ Wx + h @ Wh + b)
    return np.sum(h * h)


def over_array(Wx, Wh, b, xs):
    h = np.zeros((xs.shape[1], Wh.shape[0]), xs.dtype)
    for x in xs:
        h = np.tanh(x @ Wx + h @ Wh + b)
    return np.sum(h ** 2)


def _cell(h, x, Wx, Wh, b):
    return np.tanh(x @ Wx + h @ Wh + b)


def helper_body(Wx, Wh, b, xs):
    h = np.zeros((xs.shape[1], Wh.shape[0]), xs.dtype)
    for t in range(len(xs)):
        h = _cell(h, xs[t], Wx, Wh, b)
    return np.mean(h)


def enumerated(Wx, Wh, b, xs):
    h = np.zeros((xs.shape[1], Wh.shape[0]), xs.dtype)
    total = 0.0
    for t, x in enumerate(xs):
        h = np.tanh(x @ Wx + h @ Wh + b) * (1.0 / (t + 1))
        total = total + np.sum(h)
    return total


def zipped(Wx, Wh, b, xs):
    h = np.zeros((xs.shape[1], Wh.shape[0]), xs.dtype)
    s = 0.0
    for x, w in zip(xs, np.linspace(0.5, 1.5, len(xs)).astype(xs.dtype)):
        h = np.tanh(x @ Wx + h @ Wh) * w
        s = s + np.sum(h * b)
    return s


def reversed_steps(Wx, Wh, b, xs):
    h = np.zeros((xs.shape[1], Wh.shape[0]), xs.dtype)
    T = xs.shape[0]
    for t in range(T):
        h = np.tanh(xs[T - 1 - t] @ Wx + h @ Wh + b)
    return np.sum(h)


def states_into_stack(Wx, Wh, b, xs):
    """The states written into a stack made with np.zeros (issue 27, item 5)."""
    T, B = xs.shape[:2]
    hs = np.zeros((T, B, Wh.shape[0]), xs.dtype)
    h = np.zeros((B, Wh.shape[0]), xs.dtype)
    for t in range(T):
        h = np.tanh(xs[t] @ Wx + h @ Wh + b)
        hs[t] = h
    return np.sum(hs * hs[::-1])


def two_carries(Wx, Wh, b, xs):
    h = np.zeros((xs.shape[1], Wh.shape[0]), xs.dtype)
    c = np.zeros_like(h)
    for t in range(xs.shape[0]):
        z = xs[t] @ Wx + h @ Wh + b
        c = 0.5 * c + np.tanh(z)
        h = np.tanh(c) * (1.0 / (1.0 + np.exp(-z)))
    return np.sum(h + c)


def nested(Wx, Wh, b, xs):
    """A loop in a loop: the inner one (over the steps) is kept, the outer written out."""
    total = 0.0
    for k in range(2):
        h = np.zeros((xs.shape[1], Wh.shape[0]), xs.dtype)
        for t in range(xs.shape[0]):
            h = np.tanh(xs[t] @ Wx + h @ Wh + b)
        total = total + np.sum(h) * (k + 1)
        Wh = Wh * 0.5
    return total


KINDS = [range_of_shape, over_array, helper_body, enumerated, zipped, reversed_steps,
         states_into_stack, two_carries, nested]


def args_for(T, dtype=np.float64, B=2, D=3, H=4):
    return (RNG.normal(size=(D, H)).astype(dtype), (0.4 * RNG.normal(size=(H, H))).astype(dtype),
            RNG.normal(size=H).astype(dtype), RNG.normal(size=(T, B, D)).astype(dtype))


def compiled(fun, args, rolled, monkeypatch):
    """(value, gradient, source) with rolling on or off."""
    with monkeypatch.context() as m:
        m.setattr(roll_module, "ENABLED", rolled)
        m.setattr(roll_module, "USER_LOOPS", rolled)
        f = ad.value_and_grad(fun, argnums=(0, 1, 2))
        value, g = f(*args)
        source = ad.emit(fun, *args, argnums=(0, 1, 2))
    return value, g, source


@pytest.mark.parametrize("fun", KINDS, ids=[f.__name__ for f in KINDS])
@pytest.mark.parametrize("T", [1, 2, 3, 7])
def test_a_loop_kept_as_a_loop_is_the_loop_written_out(fun, T, monkeypatch):
    args = args_for(T)
    value, g, source = compiled(fun, args, True, monkeypatch)
    written = compiled(fun, args, False, monkeypatch)
    assert np.isclose(value, written[0], rtol=1e-12) and np.isclose(value, fun(*args))
    for a, b, c in zip(g, written[1], tape.grad(fun, argnums=(0, 1, 2))(*args)):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(a, c, rtol=1e-10, atol=1e-12)
    if T >= 3:  # two steps or more in a loop: the forward's `for` at least
        assert "    for t in range(" in source, source
    if T >= 7:
        assert len(source.splitlines()) < len(written[2].splitlines())


@pytest.mark.parametrize("fun", KINDS, ids=[f.__name__ for f in KINDS])
def test_finite_differences_and_float32(fun, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(roll_module, "USER_LOOPS", True)
        check_grads(fun, *args_for(4), argnums=(0, 1, 2))
    args = args_for(5, np.float32)
    value, g, source = compiled(fun, args, True, monkeypatch)
    written = compiled(fun, args, False, monkeypatch)
    assert "for t in range(" in source
    assert np.isclose(value, written[0], rtol=1e-5)
    for a, b in zip(g, written[1]):
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6)


def test_the_generated_rnn_does_not_grow_with_the_length(monkeypatch):
    """The same statements at 12 and 40 steps (a `del` may come or go: which small arrays
    are left alive depends on the peak, which grows with the stacks)."""
    def statements(T):
        source = compiled(range_of_shape, args_for(T), True, monkeypatch)[2]
        return [line for line in source.splitlines() if not line.strip().startswith("del ")]
    assert len(statements(12)) == len(statements(40)) < 120


def test_the_cached_code_serves_new_values(monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(roll_module, "USER_LOOPS", True)
        f = ad.value_and_grad(two_carries, argnums=(0, 1, 2))
        for seed in range(3):
            args = args_for(6)
            value, g = f(*args)
            assert np.isclose(value, two_carries(*args)), seed
            for a, b in zip(g, tape.grad(two_carries, argnums=(0, 1, 2))(*args)):
                np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
        assert f.cache_info().misses == 1


# ---- loops that stay written out ----------------------------------------------------------
def branch_on_t(Wx, Wh, b, xs):
    h = np.zeros((xs.shape[1], Wh.shape[0]))
    for t in range(xs.shape[0]):
        z = xs[t] @ Wx + h @ Wh
        if t == 2:  # one step in the middle is another program
            z = z + b
        h = np.tanh(z)
    return np.sum(h)


def two_steps_back(Wx, Wh, b, xs):
    hs = [np.zeros((xs.shape[1], Wh.shape[0])), np.zeros((xs.shape[1], Wh.shape[0]))]
    for t in range(xs.shape[0]):
        hs.append(np.tanh(xs[t] @ Wx + hs[-2] @ Wh + b))
    return np.sum(hs[-1]) + np.sum(hs[-2])


def growing(Wx, Wh, b, xs):
    total = 0.0
    for t in range(xs.shape[0]):
        total = total + np.sum(np.tanh(xs[:t + 1] @ Wx + b))  # a shape that grows with t
    return total


@pytest.mark.parametrize("fun", [branch_on_t, two_steps_back, growing])
def test_a_loop_that_is_not_one_program_is_written_out_and_said_why(fun, monkeypatch, caplog):
    args = args_for(6)
    monkeypatch.setenv("AUTODIFFGEN_EXPLAIN", "1")
    with caplog.at_level(logging.WARNING, logger="autodiffgen"):
        value, g, source = compiled(fun, args, True, monkeypatch)
    assert not any(line.lstrip().startswith("for t in range(") for line in source.splitlines())
    said = [r.getMessage() for r in caplog.records if "written out step by step" in r.getMessage()]
    assert said and "test_scan.py:" in said[0], said
    assert np.isclose(value, fun(*args))
    for a, b in zip(g, tape.grad(fun, argnums=(0, 1, 2))(*args)):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_the_loops_work_is_what_a_hand_written_backward_does(monkeypatch):
    """The loop-level passes (loops/hoist.py): Wh.T made once before the backward loop,
    `1 - h * h` computed over the stack of states before it, and the weights' gradients
    summed after it in one product each, not one per step."""
    args = args_for(12)
    _, _, source = compiled(range_of_shape, args, True, monkeypatch)
    backward = source.split("    # backward\n")[1]
    loop = backward.split("for t in range(")[1].split("\n    g_")[0]
    body = [line.strip() for line in loop.splitlines()[1:] if line.startswith("        ")]
    assert "np.ascontiguousarray(Wh.T)" in backward
    assert not any(".T @" in line for line in body), body  # no weight gradient per step
    assert sum("@" in line for line in body) == 1, body  # g @ Wh.T, the recurrence itself
    assert not any("* h" in line or "h * " in line for line in body), body  # 1 - h*h, hoisted


def test_a_loop_the_user_requires_is_an_error_where_it_cannot_be_kept(monkeypatch):
    """AUTODIFFGEN_LOOPS=require: a loop written out would be an error naming its line."""
    monkeypatch.setattr(roll_module, "ENABLED", True)
    monkeypatch.setattr(roll_module, "USER_LOOPS", True)
    monkeypatch.setattr(roll_module, "REQUIRED", True)
    with pytest.raises(ad.TracingError, match=r"test_scan.py:\d+: this loop cannot be kept "
                       r"as a loop: "):
        fresh = types.FunctionType(branch_on_t.__code__, branch_on_t.__globals__)  # no cache
        ad.value_and_grad(fresh, argnums=(0, 1, 2))(*args_for(6))
    args = args_for(6)  # a loop that can be kept: no error
    value, _ = ad.value_and_grad(range_of_shape, argnums=(0, 1, 2))(*args)
    assert np.isclose(value, range_of_shape(*args))


def time_major(Wx, Wh, b, xs):
    xw = xs @ Wx + b
    h = np.zeros((xs.shape[1], Wh.shape[0]), xs.dtype)
    for t in range(xs.shape[0]):
        h = np.tanh(xw[t] + h @ Wh)
    return np.sum(h * h)


def test_one_trace_serves_every_length_of_a_time_major_loop(monkeypatch):
    """xs shaped (T, B, D): T is the batch axis, and a loop over it is `for t in
    range(n)`, the code serving every length from the lowest checked up to the traced."""
    monkeypatch.setattr(roll_module, "ENABLED", True)
    monkeypatch.setattr(roll_module, "USER_LOOPS", True)
    f = ad.value_and_grad(time_major, argnums=(0, 1, 2))
    Wx, Wh, b, _ = args_for(4)
    for T in (20, 13, 9, 17):
        xs = RNG.normal(size=(T, 2, 3))
        value, g = f(Wx, Wh, b, xs)
        assert np.isclose(value, time_major(Wx, Wh, b, xs))
        for got, want in zip(g, tape.grad(time_major, argnums=(0, 1, 2))(Wx, Wh, b, xs)):
            np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    assert f.cache_info().misses == 1
    source = f.source(Wx, Wh, b, RNG.normal(size=(20, 2, 3)))
    assert "    for t in range(n):" in source and "range(n - 2, 0, -1)" in source


def over_a_list(Wx, Wh, b, xs):
    h = np.zeros((xs[0].shape[0], Wh.shape[0]), xs[0].dtype)
    for x in xs:  # a Python list of arrays: one input per step
        h = np.tanh(x @ Wx + h @ Wh + b)
    return np.sum(h * h)


@pytest.mark.parametrize("T", [1, 2, 3, 7])
def test_a_loop_over_a_list_of_arrays_is_kept_as_a_loop(T, monkeypatch):
    """The items of a list, one per step, are stacked before the loop and read by row."""
    Wx, Wh, b, xs = args_for(T)
    args = (Wx, Wh, b, list(xs))
    value, g, source = compiled(over_a_list, args, True, monkeypatch)
    written = compiled(over_a_list, args, False, monkeypatch)
    assert np.isclose(value, written[0], rtol=1e-12) and np.isclose(value, over_a_list(*args))
    want = tape.grad(over_a_list, argnums=(0, 1, 2))(*args)
    for a, b_, c in zip(g, written[1], want):
        np.testing.assert_allclose(a, b_, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(a, c, rtol=1e-10, atol=1e-12)
    if T >= 3:
        assert "    for t in range(" in source and "np.stack(xs)" in source
    if T >= 7:  # the backward a loop too: the items read only stacked, not unpacked
        assert "xs_1" not in source


def test_the_gradient_of_a_list_of_arrays_read_in_a_kept_loop(monkeypatch):
    """The list's own gradient: one array per item, as the tape gives it."""
    monkeypatch.setattr(roll_module, "ENABLED", True)
    monkeypatch.setattr(roll_module, "USER_LOOPS", True)
    Wx, Wh, b, xs = args_for(6)
    args = (Wx, Wh, b, list(xs))
    f = ad.value_and_grad(over_a_list, argnums=3)
    source = f.source(*args)
    assert "    for t in range(" in source
    value, g = f(*args)
    assert np.isclose(value, over_a_list(*args))
    want = tape.grad(over_a_list, argnums=3)(*args)
    assert type(g) is list and len(g) == 6
    for got, expected in zip(g, want):
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


def dropout_steps(W, xs, rng):
    h = np.zeros((xs.shape[1], W.shape[1]))
    for t in range(xs.shape[0]):
        keep = rng.random(h.shape) > 0.3
        h = np.tanh(xs[t] @ W + h) * keep
    return np.sum(h ** 2)


def test_a_random_draw_in_the_body_draws_at_every_step_as_eager(monkeypatch):
    """Dropout at every step: the loop draws from the caller's generator at each step, in
    eager's order (the same numbers), and saves each step's mask for the backward."""
    monkeypatch.setattr(roll_module, "ENABLED", True)
    monkeypatch.setattr(roll_module, "USER_LOOPS", True)
    W, xs = RNG.normal(size=(3, 4)) * 0.5, RNG.normal(size=(7, 2, 3))
    g = ad.value_and_grad(dropout_steps)
    for seed in (5, 6):
        value, grad = g(W, xs, np.random.default_rng(seed))
        want, want_grad = tape.value_and_grad(dropout_steps)(W, xs, np.random.default_rng(seed))
        assert np.isclose(value, want, rtol=1e-12)
        np.testing.assert_allclose(grad, want_grad, rtol=1e-10)
    source = g.source(W, xs, np.random.default_rng(5))
    assert "rng.random(" in source.split("for t in range(")[1].split("\n    power")[0]
    assert g.cache_info().misses == 1


def test_a_steps_joined_buffer_is_allocated_once_before_the_loop(monkeypatch):
    """The GRU's backward joins the gradients of z and r into one (B, 2H) buffer at every
    step: one np.empty before the loop serves every step (none in the body, no del of it
    there), and the gradients are still the hand-written ones, call after call."""
    if not passes.ENABLED:
        pytest.skip("the joined buffer is made by the passes (plan/slots.py on their joins)")
    monkeypatch.syspath_prepend(str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks"))
    from workloads import WORKLOADS

    monkeypatch.setattr(roll_module, "ENABLED", True)
    monkeypatch.setattr(roll_module, "USER_LOOPS", True)
    w = {x.name: x for x in WORKLOADS}["gru"]
    args = w.make_args(np.random.default_rng(0), steps=12, batch=3, inputs=4, hidden=5)
    f = ad.value_and_grad(w.make_loss(np), argnums=w.argnums)
    source = f.source(*args)
    loop = source.split("# backward")[1].split("for t in range(")[1].split("\n    del")[0]
    before = source.split("# backward")[1].split("for t in range(")[0]
    assert "np.empty((3, 10)" not in loop and "np.empty((3, 10)" in before
    for seed in (0, 1):
        args = w.make_args(np.random.default_rng(seed), steps=12, batch=3, inputs=4, hidden=5)
        value, grads = f(*args)
        want, want_grads = w.by_hand(*args)
        assert np.isclose(value, want, rtol=1e-5)
        for a, b in zip(grads, want_grads):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
