"""A kept loop's work on values that do not change from step to step (loops/hoist.py,
loops/spread.py, loops/bounds.py): the guards of its invariants checked once before the
loop, those of a window's bounds (linear in t) at its two ends, a value
saved at every step that is the same at every step spread once after it (no stack
written and read back per step), an index's `(j * s + k) - j * s` a number, and a
gradient's part the same at every step (a filter's) summed once after the loop. On
course-style naive convolution and max pooling (nested loops, a stride read from a dict):
values against eager NumPy, gradients against the tape and central differences, float32
kept, the cached code serving new values and another stride."""

import importlib
import re

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen import passes, tape
from autodiffgen.testing import check_grads

roll_module = importlib.import_module("autodiffgen.loops.roll")
RNG = np.random.default_rng(29)


@pytest.fixture(autouse=True)
def loops_kept(monkeypatch):
    """The tests read the loops' code (CI also runs the suite with the user's loops
    written out, AUTODIFFGEN_LOOPS=updates, and with AUTODIFFGEN_PASSES=0)."""
    monkeypatch.setattr(roll_module, "USER_LOOPS", True)
    monkeypatch.setattr(roll_module, "ENABLED", True)
    monkeypatch.setattr(passes, "ENABLED", True)


def conv(x, w, b, param):
    """One output element per step, the window's row offset `i * s` the same at every
    step of the inner loop."""
    s, k = param["stride"], w.shape[-1]
    size = 1 + (x.shape[-1] - k) // s
    out = np.zeros((w.shape[0], size, size), dtype=x.dtype)
    for f in range(w.shape[0]):
        for i in range(size):
            for j in range(size):
                window = x[:, i * s:i * s + k, j * s:j * s + k]
                out[f, i, j] = np.sum(window * w[f]) + b[f]
    return np.sum(out * out)


def max_pool(x, param):
    s = param["stride"]
    size = 1 + (x.shape[-1] - 2) // s
    out = np.zeros((x.shape[0], size, size), dtype=x.dtype)
    for c in range(x.shape[0]):
        for i in range(size):
            for j in range(size):
                out[c, i, j] = np.max(x[c, i * s:i * s + 2, j * s:j * s + 2])
    return np.sum(out * np.arange(out.size, dtype=x.dtype).reshape(out.shape))


def conv_args(dtype=np.float64, size=7, stride=1):
    return (RNG.normal(size=(2, size, size)).astype(dtype),
            RNG.normal(size=(2, 2, 3, 3)).astype(dtype), RNG.normal(size=2).astype(dtype),
            {"stride": stride})


def pool_args(dtype=np.float64, size=10, stride=2):
    return RNG.normal(size=(2, size, size)).astype(dtype), {"stride": stride}


CASES = {conv: (conv_args, (0, 1, 2)), max_pool: (pool_args, 0)}


def loop_bodies(source):
    """The lines of each `for t in range(...)` loop of the generated code."""
    lines, bodies = source.splitlines(), []
    for k, line in enumerate(lines):
        if line.lstrip().startswith("for t in range("):
            indent = len(line) - len(line.lstrip())
            body = []
            for after in lines[k + 1:]:
                if after.strip() and len(after) - len(after.lstrip()) <= indent:
                    break
                body.append(after.strip())
            bodies.append(body)
    return bodies


def as_tuple(grads):
    return grads if isinstance(grads, tuple) else (grads,)


def assigned(body):
    return {"t"} | {m.group(1) for line in body for m in [re.match(r"(\w+) = ", line)] if m}


@pytest.mark.parametrize("fun", CASES, ids=lambda f: f.__name__)
def test_no_guard_of_an_invariant_nor_a_save_of_one_inside_a_loop(fun):
    make, argnums = CASES[fun]
    source = ad.emit(fun, *make(), argnums=argnums)
    bodies = loop_bodies(source)
    assert len(bodies) >= 4, source  # the inner loops kept, forward and backward
    for body in bodies:
        mine = assigned(body)
        for line in body:
            test = re.match(r"if (?:not )?(?:operator\.index\()?(\w+)", line)
            if test:  # a guard reads a value of this step (t's window bounds)
                assert test.group(1) in mine, (line, body)
            save = re.match(r"\w+\[t(?: - \d+)?\] = (\w+)$", line.split("  #")[0])
            if save:  # what a step saves for the backward is its own
                assert save.group(1) in mine, (line, body)
    # the window's bounds, linear in t, are checked at the loops' ends: no guard inside
    assert not any(line.startswith("if ") for body in bodies for line in body), source
    # a spread value's rows are read as the value: nothing spreads it at run time
    assert "broadcast_to" not in source
    # the window's length `(j * s + 3) - j * s` is the number 3: no guard reads it
    assert "operator.index" not in "\n".join(line for b in bodies for line in b)


def test_a_filters_gradient_is_summed_after_the_loop():
    """`g_b[f] += g` at every step of the backward becomes the steps' g saved and one sum
    after the loop, and `g_w[f] += g * window` (window a row the forward saved) one
    product of the saved g with the saved windows (loops/hoist.py, hoisted_sums)."""
    source = ad.emit(conv, *conv_args(), argnums=(0, 1, 2))
    backward = loop_bodies(source.split("# backward")[1])
    assert backward
    for body in backward:
        assert not any(re.match(r"\w+\[\d+\] \+= ", line) for line in body), body
        assert not any("window" in line and "multiply" in line for line in body), body
    assert re.search(r"= \w+\.sum\(axis=0\)", source)
    assert re.search(r"= np\.dot\(\w+, \w+\)", source)
    # each loop's part added into the gradient that dies there, small as it is, not into
    # a copy of it (plan/memory.py)
    updates = [line for line in source.splitlines() if "= _add_at(" in line]
    assert updates and all("out=" in line for line in updates), updates


@pytest.mark.parametrize("fun", CASES, ids=lambda f: f.__name__)
def test_values_and_gradients(fun):
    make, argnums = CASES[fun]
    args = make()
    value, grads = ad.value_and_grad(fun, argnums=argnums)(*args)
    np.testing.assert_allclose(value, fun(*args), rtol=1e-13)
    reference = tape.value_and_grad(fun, argnums=argnums)(*args)[1]
    for got, want in zip(as_tuple(grads), as_tuple(reference)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)
    check_grads(fun, *args, argnums=argnums)  # forward mode too: loops/scan._in_order


@pytest.mark.parametrize("fun", CASES, ids=lambda f: f.__name__)
def test_float32_stays_float32(fun):
    make, argnums = CASES[fun]
    args = make(np.float32)
    value, grads = ad.value_and_grad(fun, argnums=argnums)(*args)
    assert value.dtype == np.float32
    want = tape.value_and_grad(fun, argnums=argnums)(*args)[1]
    for got, ref in zip(as_tuple(grads), as_tuple(want)):
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("fun", CASES, ids=lambda f: f.__name__)
def test_the_cached_code_serves_new_values_and_another_stride(fun):
    """New values on the traced path come from the cached code; another stride fails the
    guards checked before the loops (or the loops' own) and is traced again, each answer
    the eager one."""
    make, argnums = CASES[fun]
    f = ad.value_and_grad(fun, argnums=argnums)
    reference = tape.value_and_grad(fun, argnums=argnums)
    first = make()
    for args in (first, make(), make(stride=first[-1]["stride"] % 2 + 1), make()):
        value, grads = f(*args)
        want_value, want = reference(*args)
        np.testing.assert_allclose(value, want_value, rtol=1e-12)
        for got, ref in zip(as_tuple(grads), as_tuple(want)):
            np.testing.assert_allclose(got, ref, rtol=1e-11, atol=1e-12)
    assert f.cache_info().misses == 2


def test_a_tie_shares_the_gradient_as_before():
    """The max's rule divides g by the count of ties while g is a number: the same
    numbers as g * hit / count."""
    x = np.zeros((1, 4, 4))
    x[0, 0, 2] = x[0, 1, 3] = 2.0  # a tie of two in window (0, 1), of four in (1, 1)
    param = {"stride": 2}
    grad = ad.grad(max_pool)(x, param)
    np.testing.assert_array_equal(grad, tape.grad(max_pool)(x, param))
    assert grad[0, 0, 2] == grad[0, 1, 3] == 1 / 2 and grad[0, 2, 2] == grad[0, 3, 3] == 3 / 4


def shifted_windows(x, param):
    """Windows at j + offset: their bounds are guards linear in t, checked at the ends."""
    offset = param["offset"]
    out = np.zeros(5, dtype=x.dtype)
    for j in range(5):
        out[j] = np.sum(np.sin(x[j + offset:j + offset + 3]))
    return np.sum(out * out)


def test_a_window_past_the_end_fails_the_checks_at_the_loops_ends():
    """The checks before the loop stand for every step's: an offset that clips the last
    window, or starts the first one before 0 (a negative index), takes another path,
    traced again, each answer the eager one's."""
    x = RNG.normal(size=10)
    source = ad.emit(shifted_windows, x, {"offset": 1})
    assert any("for t in range(" in line for line in source.splitlines())
    assert not any(line.startswith("if ") for body in loop_bodies(source) for line in body)
    f = ad.value_and_grad(shifted_windows)
    for offset, misses in ((1, 1), (3, 1), (4, 2), (-1, 3), (0, 3), (4, 3)):
        value, grad = f(x, {"offset": offset})
        want_value, want = tape.value_and_grad(shifted_windows)(x, {"offset": offset})
        np.testing.assert_allclose(value, want_value, rtol=1e-13)
        np.testing.assert_allclose(grad, want, rtol=1e-12, atol=1e-14)
        assert f.cache_info().misses == misses, offset
    check_grads(shifted_windows, x, {"offset": 1})
    value, grad = ad.value_and_grad(shifted_windows)(x.astype(np.float32), {"offset": 1})
    assert value.dtype == grad.dtype == np.float32


def nested_counted(x, param):
    """Nested loops whose count is computed from the stride (a traced int)."""
    s = param["stride"]
    size = 1 + (x.shape[-1] - 2) // s
    out = np.zeros((size, size), dtype=x.dtype)
    for i in range(size):
        for j in range(size):
            out[i, j] = np.max(x[i * s:i * s + 2, j * s:j * s + 2])
    return np.sum(out * out)


def test_forward_mode_reads_each_steps_value_after_its_loop():
    """A tangent computed step by step beside the values reads a stack's row once the
    loop is kept: it is ordered after the loop (this failed to emit, a read of a loop
    node no longer in the graph)."""
    x, tangent = RNG.normal(size=(10, 10)), RNG.normal(size=(10, 10))
    for param in ({"stride": 2}, {"stride": 1}):
        value, out = ad.jvp(nested_counted, (x, param), (tangent, None))
        want_value, want = tape.jvp(nested_counted, (x, param), (tangent, None))
        np.testing.assert_allclose(value, want_value, rtol=1e-13)
        np.testing.assert_allclose(out, want, rtol=1e-12)
    check_grads(nested_counted, x, {"stride": 2})
