"""The exact-scales pass (passes/exact_scales.py): a power of two multiplied into the
constant factor it scales, after the sizes' formulas are found: `(d + d) * (0.5/n)` is
`d * (1/n)`, `(x * 4) * c` is `x * 4c`. The values stay bit for bit (the product is
exact), formulas in the batch size and a mask's count still serve every size, float32
stays float32, derivatives agree with the tape and finite differences."""

import re

import numpy as np
import pytest
from graph_helpers import flat, run, served_by_one_trace, traced

import autodiffgen as ad
from autodiffgen import passes, tape
from autodiffgen.testing import check_grads

RNG = np.random.default_rng(16)


@pytest.fixture(autouse=True)
def passes_on(monkeypatch):
    """The tests read the optimized code (CI also runs the suite with AUTODIFFGEN_PASSES=0)."""
    monkeypatch.setattr(passes, "ENABLED", True)


def half_squared_error(w, x):  # the attention workload's last line, on a smaller model
    d = np.tanh(x @ w)
    return 0.5 * np.sum(d * d) / x.shape[0]


def times_four(x):
    return np.sum(np.sin(x) * 4.0 * 0.3)


def times_three(x):
    return np.sum(np.sin(x) * 3.0 * 0.3)


def reused(x):  # x + x read twice: it is computed anyway
    s = np.tanh(x) + np.tanh(x)
    return np.sum(s * 0.3) + np.sum(s * s)


def masked_square_mean(w, x, m):
    err = x @ w - 1
    return (err[m] ** 2).mean()


def backward_of(fun, *args, argnums=0):
    source = ad.value_and_grad(fun, argnums=argnums).source(*args)
    return "\n".join(line.split("  # ")[0] for line in source.split("# backward")[1].splitlines())


def test_twice_a_scale_is_one_multiply_and_serves_every_batch_size():
    w = RNG.normal(size=(3, 512))  # g_d of (n, 512): a buffer worth reusing (plan/memory.py)
    x = RNG.normal(size=(9, 3))
    source = ad.value_and_grad(half_squared_error).source(w, x)
    assert "Serves every batch size" in source
    backward = backward_of(half_squared_error, w, x)
    assert "np.float64(1.0 / n)" in backward and "np.add(" not in backward \
        and " + " not in backward
    calls = [(w, RNG.normal(size=(rows, 3))) for rows in (9, 7, 4, 2)]
    f = served_by_one_trace(half_squared_error, calls, rtol=1e-13)
    x = calls[-1][1]
    check_grads(half_squared_error, w, x)
    x32, w32 = RNG.normal(size=(9, 3)).astype(np.float32), w.astype(np.float32)
    value, grad = f(w32, x32)
    assert value.dtype == grad.dtype == np.float32
    assert re.search(r"g_d = np.multiply\(d, np.float32\(1\.0[0-9]* / n\)",
                     backward_of(half_squared_error, w32, x32))
    check_grads(half_squared_error, w32, x32, rtol=1e-4, atol=1e-5, fd=False)


def test_second_order_through_the_scaled_line():
    """The gradient of a function of the gradient, and a Hessian-vector product, against
    central differences of the (generated) gradient in float64."""
    w, x = RNG.normal(size=(3, 2)), RNG.normal(size=(5, 3))
    grad = ad.grad(half_squared_error)

    def outer(w):
        return np.sum(np.cos(ad.grad(half_squared_error)(w, x)))
    v, eps = RNG.normal(size=w.shape), 1e-5
    fd = (np.sum(np.cos(grad(w + eps * v, x))) - np.sum(np.cos(grad(w - eps * v, x)))) / (2 * eps)
    np.testing.assert_allclose(np.sum(ad.grad(outer)(w) * v), fd, rtol=1e-7)
    fd = (grad(w + eps * v, x) - grad(w - eps * v, x)) / (2 * eps)
    np.testing.assert_allclose(ad.hvp(half_squared_error, (w, x), (v, None)), fd,
                               rtol=1e-7, atol=1e-9)


def test_a_second_derivative_at_several_batch_sizes():
    """The outer trace reads the generated gradient, whose scale is 1/n (not 2 * (0.5/n)),
    at every size it is called with."""
    w = RNG.normal(size=(3, 2))
    gg = ad.grad(lambda w, x: np.sum(ad.grad(half_squared_error)(w, x) ** 2))
    grad = ad.grad(half_squared_error)
    v, eps = RNG.normal(size=w.shape), 1e-5
    for rows in (9, 8, 6, 3):
        x = RNG.normal(size=(rows, 3))
        fd = (np.sum(grad(w + eps * v, x) ** 2) - np.sum(grad(w - eps * v, x) ** 2)) / (2 * eps)
        np.testing.assert_allclose(np.sum(gg(w, x) * v), fd, rtol=1e-6)


@pytest.mark.parametrize("fun, folds", [(times_four, True), (times_three, False),
                                        (reused, False)], ids=lambda f: getattr(f, "__name__", ""))
def test_the_pass_keeps_the_values_bit_for_bit(fun, folds):
    x = RNG.normal(size=(4, 5))
    graph = passes.optimize(traced(fun, x))
    after, changed = passes.exact_scales(graph)
    assert changed is folds
    for got, want in zip(flat(run(after, x)), flat(run(graph, x))):
        np.testing.assert_array_equal(got, want)
    assert passes.exact_scales(after)[1] is False  # a fixed point
    check_grads(fun, x)
    check_grads(fun, np.float64(0.7))  # 0-d
    value, grad = ad.value_and_grad(fun)(x.astype(np.float32))
    assert value.dtype == grad.dtype == np.float32


def test_a_masked_mean_of_squares_serves_every_count():
    """A count's scale is left alone (the module docstring), and still fits."""
    w, x = RNG.normal(size=3), RNG.normal(size=(8, 3))
    f, reference = ad.value_and_grad(masked_square_mean), tape.value_and_grad(masked_square_mean)
    for k in (5, 3, 2, 6, 7):
        m = np.zeros(8, bool)
        m[RNG.permutation(8)[:k]] = True
        (v, g), (tv, tg) = f(w, x, m), reference(w, x, m)
        np.testing.assert_allclose(v, tv, rtol=1e-13)
        np.testing.assert_allclose(g, tg, rtol=1e-13)
        check_grads(masked_square_mean, w, x, m)
    assert f.cache_info().misses == 1
    assert "np.divide(1.0, count)" in f.source(w, x, m)


def test_values_a_guard_reads_stay_as_traced():
    def f(x):
        s = (np.sin(x) * 4.0) * 0.3
        if np.sum(s) > 0:  # a guard reads s
            return np.sum(s * x)
        return np.sum(x)
    x = np.abs(RNG.normal(size=4))
    graph, _ = passes.exact_scales(passes.optimize(traced(f, x)))
    guarded = passes.rewrite.guard_reads(graph)
    assert len([n for n in guarded if n.prim is not None and n.prim.name == "multiply"]) == 2
    check_grads(f, x)
