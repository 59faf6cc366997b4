"""The affine pass (passes/affine.py): a chain of additions and multiplications by numbers
on one array is written as `u * a + b`, in at most two operations. Values close to the
graph as it was (two roundings in other places), the tape and finite differences; float32
stays float32 and its numbers float32; sizes' formulas are not folded; chains whose
intermediate values are read elsewhere are left."""

import numpy as np
import pytest
from graph_helpers import flat, run, served_by_one_trace, traced

import autodiffgen as ad
from autodiffgen import passes, tape
from autodiffgen.testing import check_grads

RNG = np.random.default_rng(23)


@pytest.fixture(autouse=True)
def passes_on(monkeypatch):
    """The tests read the optimized code (CI also runs the suite with AUTODIFFGEN_PASSES=0)."""
    monkeypatch.setattr(passes, "ENABLED", True)


def tanh_shifted(x):  # n's gradient: tanh's derivative scaled and shifted, (1 - o*o) * 0.5 + 1
    n = np.sin(x) * x
    return np.sum(np.tanh(n) * 0.5 + n)


def forward_chain(x):
    s = np.sin(x) * x
    return np.sum(np.exp(((3.0 - s) * 2.5 + 1.0) * -0.1))


def lines_of(fun, *args, part=1):
    source = ad.value_and_grad(fun).source(*args)
    text = source.split("# backward")[part] if part else \
        source.split("# forward")[1].split("# backward")[0]
    return [line.split("  # ")[0].strip() for line in text.splitlines()
            if line.strip() and not line.strip().startswith(("#", "del "))]


@pytest.mark.parametrize("fun", [tanh_shifted, forward_chain], ids=lambda f: f.__name__)
def test_the_pass_folds_and_keeps_the_values(fun):
    x = RNG.normal(size=(4, 6))
    graph = passes.optimize(traced(fun, x))
    after, changed = passes.affine(graph)
    assert changed and len(after.nodes) < len(graph.nodes)
    assert passes.affine(after)[1] is False  # a fixed point
    for got, want in zip(flat(run(after, x)), flat(run(graph, x))):
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("fun", [tanh_shifted, forward_chain], ids=lambda f: f.__name__)
def test_gradients_agree_with_the_tape_and_finite_differences(fun):
    x = RNG.normal(size=(4, 6))
    check_grads(fun, x)
    check_grads(fun, np.float64(0.3))  # 0-d: left as it is
    small = x.astype(np.float32)
    check_grads(fun, small, rtol=1e-4, atol=1e-5, fd=False)
    value, grad = ad.value_and_grad(fun)(small)
    assert value.dtype == grad.dtype == np.float32


def test_tanh_derivative_is_two_operations():
    x = RNG.normal(size=50).astype(np.float32)
    backward = lines_of(tanh_shifted, x)
    assert backward[1:3] == ["g_n += np.float32(-3.0)", "g_n *= np.float32(-0.5)"]
    assert not any("np.subtract(1," in line for line in backward)
    forward = lines_of(forward_chain, RNG.normal(size=5000), part=0)  # buffers worth reusing
    # ((3 - s) * 2.5 + 1) * -0.1 is (s - 3.4) * 0.25 (3.4 as computed: exact in float64)
    assert forward[2:4] == ["add = np.add(s, -3.4000000000000004, out=s)",
                            "multiply = np.multiply(add, 0.25, out=add)"]


def test_a_batch_scale_is_not_folded_and_still_serves_every_size():
    def loss(w, x):
        d = np.tanh(x @ w)
        return np.sum((1.0 - d * d) * 3.0) / x.shape[0] + np.sum(d * 2.0 + 1.0)
    w = RNG.normal(size=(3, 2))
    f = served_by_one_trace(loss, [(w, RNG.normal(size=(rows, 3))) for rows in (9, 8, 5, 2)],
                            rtol=1e-12)
    assert "/ n)" in f.source(w, RNG.normal(size=(9, 3)))


def test_an_intermediate_read_elsewhere_stays():
    def f(x):
        a = np.sin(x) * 2.0
        b = a + 1.0
        return np.sum(b * 3.0) + np.sum(a * a)
    x = RNG.normal(size=5)
    graph = passes.optimize(traced(f, x))
    after, _ = passes.affine(graph)
    names = [n.prim.name for n in after.nodes if n.prim is not None]
    assert names.count("multiply") >= 2  # a = sin * 2 kept for a * a
    check_grads(f, x)


def test_a_difference_that_cancels_is_taken_before_the_scale():
    """(1 - t*t) * 1.5**3 at a saturated tanh, in float32: written as (t*t - 1) * -3.375
    (the shift first, exact), never t*t * -3.375 + 3.375, which loses the small result."""
    def saturated(x):
        y = x
        for _ in range(3):
            y = y * 1.5
        return np.sum(np.tanh(y))
    x = np.linspace(0.3, 1.0, 8).astype(np.float32)
    grad = ad.grad(saturated)(x)
    assert grad.dtype == np.float32
    np.testing.assert_allclose(grad, tape.grad(saturated)(x), rtol=1e-5)


def test_a_shift_not_exact_leaves_the_chain():
    def f(x):
        return np.sum(np.exp((np.sin(x) * 3.0 + 1.0) * 2.0))
    x = RNG.normal(size=5000).astype(np.float32)  # (plan/memory.py: worth reusing)
    forward = lines_of(f, x, part=0)  # 2 / 6 is no float32: three steps stay
    assert forward[1:4] == ["multiply = np.multiply(sin, 3.0, out=sin)",
                            "add = np.add(multiply, 1.0, out=multiply)",
                            "multiply_1 = np.multiply(add, 2.0, out=add)"]
    check_grads(f, x.astype(np.float64))
    check_grads(f, x, rtol=1e-4, atol=1e-5, fd=False)


def test_a_zero_factor_is_kept():
    """u * 0 + 1 is not 1 where u is inf: the chain stays, and nothing warns."""
    def f(x):
        return np.sum(np.exp(x) * 0.0 + 1.0) + np.sum((np.sin(x) * 0.0) * 3.0 - 2.0)
    x = RNG.normal(size=4)
    graph = passes.optimize(traced(f, x))
    with np.errstate(all="raise"):
        after, _ = passes.affine(graph)
    with np.errstate(all="ignore"):
        for got, want in zip(flat(run(after, x)), flat(run(graph, x))):
            np.testing.assert_array_equal(got, want)
