"""A differential fuzzer (Hypothesis) for exceptions used as control flow (issue 10).

A program chains steps on traced values; some are `try:` blocks whose raise depends on the
data of the call, not on shapes: indexing with an int argument, np.take with an int index
array argument, np.linalg.cholesky of a matrix that is positive definite or not, and a
division or a log under `np.errstate(divide="raise", invalid="raise")`, each with a
fallback in its `except`. The compiled value_and_grad is called on several data sets,
each taking its own mix of paths; every call's value and gradient must equal eager
NumPy's and the tape's, the first call's gradient must match central differences, and
every third program is also run through jvp, and every third through vjp, against the
tape. Derandomized for CI;
AUTODIFFGEN_FUZZ=<n> runs n programs.
"""

import os

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autodiffgen import jvp, tape, value_and_grad, vjp

EXAMPLES = int(os.environ.get("AUTODIFFGEN_FUZZ", "60"))
UNARY = [np.tanh, np.sin, lambda v: v * v]
KINDS = ["unary", "binary", "index", "take", "cholesky", "divide", "log", "helper"]


@st.composite
def programs(draw):
    steps = []
    for k in range(draw(st.integers(2, 6))):
        steps.append((draw(st.sampled_from(KINDS)), draw(st.integers(0, 1 + k)),
                      draw(st.integers(0, 1 + k)), draw(st.integers(0, 2))))
    return steps


def _pick(u, i):
    return u[i]


def step(kind, u, v, j, i, idx, d):
    """One step; the `try:` blocks raise or not depending on i, idx, d and the values."""
    if kind == "unary":
        return UNARY[j](u)
    if kind == "binary":
        return u * v if j else u + np.tanh(v)
    if kind == "index":
        try:
            return u * u[i]
        except IndexError:
            return np.sin(u) + v
    if kind == "take":
        try:
            return u + np.take(v, idx) * 0.5
        except IndexError:
            return u * 0.5
    if kind == "cholesky":
        try:
            L = np.linalg.cholesky(np.outer(u, u) + np.diag(d * (j + 1.0)))
            return u + np.sum(L, axis=0) * 0.1
        except np.linalg.LinAlgError:
            return u - v * 0.3
    if kind == "divide":
        with np.errstate(divide="raise", invalid="raise"):
            try:
                return u / d
            except FloatingPointError:
                return u * 2.0 + v
    if kind == "log":
        with np.errstate(divide="raise", invalid="raise"):
            try:
                return u * np.log(d)
            except FloatingPointError:
                return u - 1.0
    try:  # "helper": the raise is in a function the try calls
        return u + _pick(v, i) ** 2
    except IndexError:
        return u * v


def run(steps, w, x, i, idx, d):
    values = [w * x, np.tanh(x) + w]
    for kind, a, b, j in steps:
        values.append(step(kind, values[a], values[b], j, i, idx, d))
    return np.sum(values[-1] ** 2) * 0.1 + np.mean(np.tanh(values[-2]))


def data(seed):
    """Calls whose int index, index array and divisor take either path."""
    gen = np.random.default_rng(seed)
    w = gen.uniform(-1.0, 1.0, 3)
    calls = []
    for c in range(5):
        i = int(gen.choice([0, 2, -1, 3, -5, 7]))
        idx = gen.integers(0, 3, 3) if c % 2 else gen.integers(-5, 6, 3)
        d = gen.uniform(0.5, 2.0, 3)
        if gen.random() < 0.5:
            d[gen.integers(0, 3)] = gen.choice([0.0, -1.0])
        calls.append((gen.uniform(-1.0, 1.0, 3), i, idx, d))
    return w, calls


def eager(f, *args):
    """Eager NumPy's answer, or the exception class it raises."""
    try:
        return f(*args)
    except Exception as error:  # noqa: BLE001  a path every variant must raise on too
        return type(error)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(programs(), st.integers(0, 2**16))
def test_try_except_programs_follow_eager_numpy(steps, seed):
    def f(w, x, i, idx, d):
        return run(steps, w, x, i, idx, d)
    w, calls = data(seed)
    compiled = value_and_grad(f)
    for args in calls:
        want = eager(f, w, *args)
        if isinstance(want, type):  # raised out of f (a non-finite cholesky input)
            try:
                compiled(w, *args)
            except want:
                continue
            raise AssertionError(f"eager raised {want.__name__}, the compiled code did not")
        value, g = compiled(w, *args)
        t_value, t_g = tape.value_and_grad(f)(w, *args)
        np.testing.assert_allclose(value, want, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(value, t_value, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(g, t_g, rtol=1e-8, atol=1e-10)
    w_args = next((a for a in calls if not isinstance(eager(f, w, *a), type)), None)
    if w_args is None:
        return
    g = compiled(w, *w_args)[1]
    fd = np.zeros(3)
    for k in range(3):
        e = np.zeros(3)
        e[k] = 1e-6
        fd[k] = (f(w + e, *w_args) - f(w - e, *w_args)) / 2e-6
    np.testing.assert_allclose(g, fd, rtol=1e-4, atol=1e-6)
    if seed % 3 == 1:  # reverse mode as two generated functions (forward, backward)
        for args in calls:
            if isinstance(eager(f, w, *args), type):
                continue
            out, pullback = vjp(f, w, *args)
            np.testing.assert_allclose(out, f(w, *args), rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(pullback(1.0)[0], tape.grad(f)(w, *args), rtol=1e-8,
                                       atol=1e-10)
    if seed % 3 == 0:  # forward mode too, along a fixed direction of w
        t = np.array([0.3, -0.2, 0.5])
        for args in calls:
            if isinstance(eager(f, w, *args), type):
                continue
            none = (None,) * len(args)
            out, t_out = jvp(f, (w, *args), (t, *none))
            want, t_want = tape.jvp(f, (w, *args), (t, *none))
            np.testing.assert_allclose(out, want, rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(t_out, t_want, rtol=1e-8, atol=1e-10)
