"""The backward's order (schedule.py): a statement that is the last to read a buffer, and
makes a smaller result, runs before the allocation the rules put ahead of it, so the
peak is lower (the weight gradient of `a @ W` before the input gradient). Values agree
with the tape and finite differences, float32 stays float32, batch sizes still served."""

import importlib
import tracemalloc

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen import tape
from autodiffgen.testing import check_grads

RNG = np.random.default_rng(7)
PLANNER = importlib.import_module("autodiffgen.plan.planner")  # the plan stage runs the schedule


def two_layers(A, B, x, t):  # a (n, 32) activation whose last reader is B's gradient
    a = np.sin(x) @ A
    d = a @ B - t
    return 0.5 * np.sum(d * d) / x.shape[0]


def args(rows=40, dtype=np.float64):
    return tuple(v.astype(dtype) for v in (RNG.normal(size=(16, 32)), RNG.normal(size=(32, 8)),
                                           RNG.normal(size=(rows, 16)),
                                           RNG.normal(size=(rows, 8))))


def peak(f, *a):
    f(*a)
    tracemalloc.start()
    tracemalloc.reset_peak()
    f(*a)
    top = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return top


def test_the_weight_gradient_comes_first_and_the_peak_is_lower(monkeypatch):
    values = args()
    source = ad.value_and_grad(two_layers, argnums=(0, 1)).source(*values)
    backward = source.split("# backward")[1]
    assert backward.index("g_B = ") < backward.index("@ B.T")
    scheduled = peak(ad.value_and_grad(two_layers, argnums=(0, 1)), *values)
    monkeypatch.setattr(PLANNER, "freeing_first", lambda graph: graph)

    def unscheduled(A, B, x, t):  # another function: nothing cached
        a = np.sin(x) @ A
        d = a @ B - t
        return 0.5 * np.sum(d * d) / x.shape[0]
    plain = ad.value_and_grad(unscheduled, argnums=(0, 1))
    assert plain.source(*values).split("# backward")[1].index("@ B.T") \
        < plain.source(*values).split("# backward")[1].index("g_B = ")
    assert scheduled < peak(plain, *values) - 40 * 32 * 8 // 2  # about one (n, 32) buffer


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_values_agree_at_every_batch_size(dtype):
    f = ad.value_and_grad(two_layers, argnums=(0, 1))
    reference = tape.value_and_grad(two_layers, argnums=(0, 1))
    tol = 1e-12 if dtype == np.float64 else 1e-5
    for rows in (40, 31, 5, 2):
        values = args(rows, dtype)
        (v, g), (tv, tg) = f(*values), reference(*values)
        assert v.dtype == g[0].dtype == g[1].dtype == dtype
        np.testing.assert_allclose(v, tv, rtol=tol)
        for a, b in zip(g, tg):
            np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
    assert f.cache_info().misses == 1
    if dtype == np.float64:
        check_grads(two_layers, *args(6), argnums=(0, 1))


def test_a_statement_that_others_need_stays():
    """d's gradient is read by both products: the later one frees nothing the earlier
    does not read, so the order is the rules'."""
    def f(A, x):
        a = x @ A
        return np.sum(a * a)
    A, x = RNG.normal(size=(4, 3)), RNG.normal(size=(6, 4))
    check_grads(f, A, x, argnums=(0, 1))
    check_grads(f, np.float64(0.5) * np.ones((1, 1)), np.ones((2, 1)), argnums=(0, 1))


def l2_logistic(w, X, y):
    z = X @ w
    return np.mean(np.logaddexp(0.0, z) - y * z) + 0.5 * LAM * np.sum(w * w)


LAM = 0.01


def test_a_penalty_gradient_is_made_where_it_is_read():
    """(2 * 0.5 * lam) * w reads an input and a 0-d value only (emit_memory.sunk): it is
    computed after the (n,) buffers die, not beside them at the start of the backward."""
    w, X = RNG.normal(size=3), RNG.normal(size=(50, 3))
    y = (RNG.uniform(size=50) < 0.5).astype(float)
    backward = ad.value_and_grad(l2_logistic).source(w, X, y).split("# backward")[1]
    product = max(backward.find("g_z @ X"), backward.find("(g_z, X"))  # passes on, off
    assert backward.index("* w") > product > 0
    check_grads(l2_logistic, w, X, y)
    value, grad = ad.value_and_grad(l2_logistic)(*(a.astype(np.float32) for a in (w, X, y)))
    assert value.dtype == grad.dtype == np.float32
