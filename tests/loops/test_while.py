"""A `while` loop on data kept as a loop (loops/find.py: exit_of, Scan.exit): the code runs
`while True:` over one step and its test, the backward as many steps in reverse as the
forward ran, and one trace serves every number of steps (generalize/whiles.py), checked
against the tape, finite differences and the closed form, at trip counts other than the
traced one; `for` loops that break, and tests in the middle of a step, are kept with the
traced count, which the code checks."""

import importlib

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen import tape
from autodiffgen.testing import check_grads

roll_module = importlib.import_module("autodiffgen.loops.roll")


def newton_sqrt(a):
    """sqrt(a) by Newton's steps until the step is small: the number of steps depends on a."""
    x = a
    step = x
    while np.max(np.abs(step)) > 1e-9:
        new = 0.5 * (x + a / x)
        step = new - x
        x = new
    return np.sum(x)


def fixed_point(W, b, x0):
    """x = tanh(W x + b) until it stops moving (a contraction: W small)."""
    x = x0
    while True:
        new = np.tanh(W @ x + b)
        moved = np.max(np.abs(new - x))
        x = new
        if moved < 1e-8:
            break
    return np.sum(x ** 2)


def halving(x):
    """A while loop whose test reads a counter too (`t`-like state in Python)."""
    k = 0
    while np.sum(x * x) > 1.0:
        x = np.sin(x) * 0.9
        k += 1
    return np.sum(x) * (k + 1)


def sqrt_args(scale):
    return (np.array([2.0, 3.0, 10.0]) * scale,)


@pytest.fixture(autouse=True)
def loops_kept(monkeypatch):
    monkeypatch.setattr(roll_module, "ENABLED", True)
    monkeypatch.setattr(roll_module, "USER_LOOPS", True)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_newton_serves_every_number_of_steps_with_one_trace(dtype):
    g = ad.value_and_grad(newton_sqrt)
    scales = [1.0, 30.0, 1e4, 0.2, 1e8, 3.0]
    for scale in scales:
        (a,) = sqrt_args(scale)
        a = a.astype(dtype)
        tol = 1e-9 if dtype == np.float64 else None
        if dtype == np.float32:  # (float32: the step may never fall below 1e-9)
            a = np.array([4.0, 9.0, 16.0], dtype) * np.float32(scale)
        value, grad = g(a)
        assert grad.dtype == dtype
        t_value, t_grad = tape.value_and_grad(newton_sqrt)(a)
        np.testing.assert_allclose(value, t_value, rtol=1e-6)
        np.testing.assert_allclose(grad, t_grad, rtol=1e-5 if tol is None else 1e-10)
        np.testing.assert_allclose(grad, 0.5 / np.sqrt(a), rtol=1e-5 if tol is None else 1e-8)
    assert g.cache_info().misses == 1, g.cache_info()
    source = g.source(a)
    assert "while True:" in source and "break" in source
    assert "steps = len(" in source
    assert "range(steps" in source  # the backward runs as many steps as the forward did


def test_newton_written_out_retraces_per_number_of_steps(monkeypatch):
    monkeypatch.setattr(roll_module, "USER_LOOPS", False)
    g = ad.value_and_grad(newton_sqrt)
    g.cache_clear()  # (the cache is shared with the other tests' grads of newton_sqrt)
    for scale in (1.0, 30.0, 1e4):
        g(*sqrt_args(scale))
    assert g.cache_info().misses == 3
    assert "while True:" not in g.source(*sqrt_args(1.0))


def test_fewer_steps_than_the_code_serves_trace_again():
    g = ad.value_and_grad(newton_sqrt)
    g(*sqrt_args(100.0))
    served = g.source(*sqrt_args(100.0))
    least = int(served.split("if steps < ")[1].split(":")[0])
    one = np.array([1.0, 1.0])  # converges at once: one step
    _, grad = g(one)
    np.testing.assert_allclose(grad, 0.5 / np.sqrt(one))
    assert least >= 2 and g.cache_info().misses == 2


def test_a_break_at_the_end_of_the_step_is_a_while_loop():
    rng = np.random.default_rng(0)
    W = rng.normal(size=(4, 4)) * 0.2
    b = rng.normal(size=4)
    g = ad.value_and_grad(fixed_point, argnums=(0, 1, 2))
    for seed in range(4):
        x0 = np.random.default_rng(seed).normal(size=4) * (1 + 3 * seed)
        value, grads = g(W, b, x0)
        t_value, t_grads = tape.value_and_grad(fixed_point, argnums=(0, 1, 2))(W, b, x0)
        np.testing.assert_allclose(value, t_value, rtol=1e-12)
        for mine, theirs in zip(grads, t_grads):
            np.testing.assert_allclose(mine, theirs, rtol=1e-9, atol=1e-12)
    assert "while True:" in g.source(W, b, x0)
    check_grads(fixed_point, W, b, x0, argnums=(0, 1))


def test_a_counter_in_python_is_read_as_the_number_of_steps():
    """k counts the steps in Python: the code after the loop computes with it."""
    g = ad.value_and_grad(halving)
    for scale in (3.0, 5.0, 2.5, 8.0):
        x = np.linspace(0.5, 1.0, 6) * scale
        value, grad = g(x)
        t_value, t_grad = tape.value_and_grad(halving)(x)
        np.testing.assert_allclose(value, t_value, rtol=1e-12)
        np.testing.assert_allclose(grad, t_grad, rtol=1e-10)
    check_grads(halving, x)


def mid_step_test(x):
    """The test in the middle of a step: the last step stops half way."""
    while True:
        x = np.cos(x)
        if np.max(np.abs(x - np.cos(x))) < 1e-6:
            break
        x = 0.5 * (x + np.cos(x))
    return np.sum(x)


def breaking_for(x):
    """A `for` loop that breaks: it may run to its end, so its count stays the traced one."""
    for _ in range(50):
        x = 0.5 * (x + 2.0 / x)
        if np.max(np.abs(x * x - 2.0)) < 1e-12:
            break
    return np.sum(x)


@pytest.mark.parametrize("f, scales", [(mid_step_test, (1.0, 5.0, 0.1)),
                                       (breaking_for, (1.0, 40.0, 1e4))])
def test_loops_that_keep_the_traced_count_are_right_at_every_count(f, scales):
    g = ad.value_and_grad(f)
    for scale in scales:
        x = np.array([0.7, 1.3, 2.0]) * scale
        value, grad = g(x)
        t_value, t_grad = tape.value_and_grad(f)(x)
        np.testing.assert_allclose(value, t_value, rtol=1e-12)
        np.testing.assert_allclose(grad, t_grad, rtol=1e-9, atol=1e-14)
    assert "steps = " not in g.source(x) or "!= " in g.source(x)


def test_the_while_loop_in_a_standalone_module_needs_no_autodiffgen(tmp_path):
    source = ad.emit(newton_sqrt, *sqrt_args(10.0), standalone=True)
    assert "import autodiffgen" not in source and "from autodiffgen" not in source
    namespace = {}
    exec(compile(source, str(tmp_path / "m.py"), "exec"), namespace)  # noqa: S102  generated
    fn = namespace["newton_sqrt_value_and_grad"]
    for scale in (10.0, 1e3, 2.0):
        (a,) = sqrt_args(scale)
        value, grad = fn(a)
        np.testing.assert_allclose(value, np.sum(np.sqrt(a)), rtol=1e-12)
        np.testing.assert_allclose(grad, 0.5 / np.sqrt(a), rtol=1e-8)


def test_graph_of_lists_a_kept_loop_with_its_body():
    text = ad.graph_of(newton_sqrt, *sqrt_args(10.0)).text()
    assert "loop(until its test" in text and "(ends the loop)" in text
    assert "loop(range(" in text  # the backward's loop, counting down

    def rnn(W, xs):
        h = np.zeros((2, 3))
        for t in range(xs.shape[0]):
            h = np.tanh(xs[t] @ W + h)
        return np.sum(h)

    text = ad.graph_of(rnn, np.eye(3), np.ones((5, 2, 3))).text()
    assert "body=loop(range(" in text and "tanh" in text.split("body=loop(range(")[1]


def test_a_test_inside_a_step_is_checked_at_every_step():
    """`if np.sum(h) > 100:` took one branch at every traced step: the code checks it at
    every step, and a call that takes the other branch at some step traces again."""
    def f(x):
        for _ in range(5):
            x = np.sin(x) * 1.5 + 0.3
            if np.sum(x) > 100:
                x = x * 0.01
        return np.sum(x ** 2)

    g = ad.value_and_grad(f)
    x = np.array([0.3, 0.5])
    g(x)
    source = g.source(x)
    body = source.split("for t in range(")[1].split("\n    power")[0]
    assert "raise GuardFailure" in body
    big = np.full(200, 1.0)  # the branch taken at the first step: traced again
    _, grad = g(big)
    np.testing.assert_allclose(grad, tape.value_and_grad(f)(big)[1], rtol=1e-10)
    assert g.cache_info().misses == 2
