"""NumPy's callables wrapped while a recording is current (rules/numpy_api/building.py):
only in the tracing thread, put back afterwards, and reached however the user's code
names them (np.array, `from numpy import array`, a module that re-exports numpy's names)."""

import threading
import types

import numpy as np
from numpy import array, float64, int64

import autodiffgen
from autodiffgen import tape
from autodiffgen.testing import check_grads

ALIAS = types.ModuleType("alias")  # a module holding numpy's names, as autograd.numpy does
ALIAS.__dict__.update({k: getattr(np, k) for k in ("array", "r_", "float64", "eye", "sum")})


def test_another_thread_gets_numpys_own_functions_meanwhile():
    inside, done, seen = threading.Event(), threading.Event(), {}

    def other():
        inside.wait(10)
        seen["array"] = np.array([1.0, 2.0])
        seen["mean"] = np.mean([1.0, 3.0])
        seen["eye"] = np.eye(2)
        done.set()

    def f(x):
        inside.set()
        done.wait(10)
        return np.sum(np.array([x[0], x[1]]) ** 2)

    thread = threading.Thread(target=other)
    thread.start()
    g = autodiffgen.grad(f)(np.array([1.0, 2.0]))
    thread.join()
    np.testing.assert_allclose(g, [2.0, 4.0])
    assert type(seen["array"]) is np.ndarray and seen["mean"] == 2.0
    assert type(seen["eye"]) is np.ndarray


def test_names_bound_before_the_trace_reach_the_wrappers():
    def f(x, i):
        a = array([x[0], 2.0 * x[1]])
        b = ALIAS.array([x[1], x[0]]) + ALIAS.r_[x[:1], x[1:]]
        c = float64(x[0]) * ALIAS.float64(x[1])
        return np.sum(a * b) + c + ALIAS.sum(ALIAS.eye(2)[int64(x[:2] * 0.0 + i)] @ x)

    x = np.array([0.5, -1.5])
    for engine in (autodiffgen, tape):
        value, _ = engine.value_and_grad(f)(x, 1)
        np.testing.assert_allclose(value, f(x, 1))
    check_grads(f, x, 1)


def test_what_the_trace_made_is_plain_numpy_afterwards():
    kept = []

    def f(x):
        kept.append(np.eye(2))
        return np.sum(kept[-1] * x)

    autodiffgen.grad(f)(np.ones((2, 2)))
    assert np.array is array and np.float64 is float64
    assert type(np.eye(2)) is np.ndarray and np.eye(2)[np.array([1])].tolist() == [[0.0, 1.0]]
