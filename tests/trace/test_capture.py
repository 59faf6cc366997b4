"""Globals and closure variables: arrays and floats are read again per call (inputs of
the generated code), ints and the like are checked (guards)."""

import subprocess
import sys

import numpy as np
import pytest

import autodiffgen
from autodiffgen import grad, tape

SCALE = 2.0
W = np.arange(6.0).reshape(3, 2) / 10
POWER = 2


def _layer(x):  # a helper function: what it reads counts too
    return np.tanh(x @ W)


def model(x):
    return SCALE * (_layer(x) ** POWER).sum()


def _set(name, value):
    globals()[name] = value


@pytest.fixture(autouse=True)
def _restore():
    saved = {name: globals()[name] for name in ("SCALE", "W", "POWER")}
    yield
    globals().update(saved)


def _check(f, x):
    np.testing.assert_allclose(f(x), tape.grad(model)(x), rtol=1e-12)


def test_rebinding_a_global_float_array_or_int_is_read_again():
    f = grad(model)
    x = np.linspace(-1, 1, 6).reshape(2, 3)
    _check(f, x)
    _check(f, x)
    assert f.cache_info().misses == 1
    _set("SCALE", 3.0)
    _check(f, x)
    _set("W", W * 2)  # a new array, read through the helper function
    _check(f, x)
    assert f.cache_info().misses == 1  # inputs: read again, no retrace
    _set("POWER", 3)  # an int used as a value (x ** POWER, and its rule): an input too
    _check(f, x)
    assert f.cache_info().misses == 1
    assert f.cache_info().entries == 1


def test_closure_variables_are_checked():
    def make(k):
        def f(x):
            return k * (x ** 2).sum()
        return f
    f = make(2.0)
    g = grad(f)
    x = np.array([1.0, 2.0])
    np.testing.assert_allclose(g(x), 4 * x)
    f.__closure__[0].cell_contents = 5.0  # what a nonlocal assignment does
    np.testing.assert_allclose(g(x), 10 * x)


def test_nonlocal_rebinding_in_a_closure():
    def make():
        scale = 1.0

        def f(x):
            return scale * np.sin(x).sum()

        def set_scale(v):
            nonlocal scale
            scale = v
        return f, set_scale
    f, set_scale = make()
    g = grad(f)
    x = np.array([0.3, 0.7])
    np.testing.assert_allclose(g(x), np.cos(x))
    set_scale(-2.0)
    np.testing.assert_allclose(g(x), -2.0 * np.cos(x))


def test_the_checks_are_in_the_source_and_it_lints():
    x = np.ones((2, 3))
    source = grad(model).source(x)
    assert "SCALE = module_globals['SCALE']" in source
    assert "W = module_globals['W']" in source
    assert "POWER = module_globals['POWER']" in source  # an int: an input ...
    assert "operator.index" not in source  # ... not read by a guard: x ** POWER keeps it traced
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--isolated",
                             "--stdin-filename", "generated.py", "-"], input=source,
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout
    standalone = autodiffgen.emit(model, x, standalone=True)
    assert "module_globals" not in standalone  # a standalone module keeps its constants


def test_unchanged_globals_keep_hitting_the_cache():
    f = grad(model)
    x = np.ones((4, 3))
    for _ in range(5):
        f(x)
    _set("SCALE", float("2.0"))  # an equal value: no retrace
    f(x)
    assert f.cache_info().misses == 1


def test_transforms_see_rebound_globals():
    x = np.array([[0.1, 0.2, 0.3]])
    t = np.ones_like(x)
    _, before = autodiffgen.jvp(model, (x,), (t,))
    _set("SCALE", 4.0)
    _, after = autodiffgen.jvp(model, (x,), (t,))
    np.testing.assert_allclose(after, 2 * before)
    _, back = autodiffgen.vjp(model, x)
    np.testing.assert_allclose(back(1.0)[0], tape.grad(model)(x))


EPOCH = 0


def annealed(x):
    return 0.9 ** EPOCH * np.sum(np.tanh(x) * (EPOCH + 1))


def test_a_global_int_used_as_a_value_is_an_input():
    """An epoch counter rebound every epoch runs the same code: no variant per value."""
    f = grad(annealed, max_variants=2)
    x = np.linspace(-1.0, 1.0, 5)
    for epoch in range(20):
        _set("EPOCH", epoch)
        np.testing.assert_allclose(f(x), tape.grad(annealed)(x), rtol=1e-12)
        np.testing.assert_allclose(f(x), 0.9 ** epoch * (epoch + 1) / np.cosh(x) ** 2)
    assert f.cache_info().misses == 1
    _set("EPOCH", 0)
