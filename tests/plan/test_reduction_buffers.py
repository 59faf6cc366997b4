"""Reductions in the buffer plan (emit_memory._writes_out): a sum, mean, max, min or prod
over some axes is computed into a dead buffer of its result's shape and dtype (`np.mean(a,
axis=1, keepdims=True, out=mean_1)`), so a recurrent step with a per-step reduction (a
layer norm, a softmax) allocates no reduction after the first step; a 0-d result stays a
new NumPy scalar. Gradients against the tape and finite differences, with the passes on and
off, float32 kept, new values and batch sizes on the cached function."""

import ast
import types

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen import passes, tape
from autodiffgen.plan import memory
from autodiffgen.testing import check_grads

RNG = np.random.default_rng(1616)
STEPS = 6
REDUCTIONS = ("sum", "mean", "max", "min", "prod")


def normed(Wx, Wh, xs, h0):  # a layer norm (centring) per step
    xw = xs @ Wx
    h = h0
    for t in range(xs.shape[1]):  # the batch first: one code for every batch size
        a = np.tanh(xw[:, t] + h @ Wh)
        h = a - a.mean(axis=1, keepdims=True)
    return np.sum(h ** 2)


def softmaxed(Wx, Wh, xs, h0):  # a softmax per step, and a per-step sum without keepdims
    xw = xs @ Wx
    h, total = h0, 0.0
    for t in range(xs.shape[1]):  # the batch first: one code for every batch size
        a = np.tanh(xw[:, t] + h @ Wh)
        e = np.exp(a - a.max(axis=1, keepdims=True))
        h = e / e.sum(axis=1, keepdims=True)
        total = total + np.sum(np.sin(h.sum(axis=1)))
    return total + np.sum(h * h0)


def args_for(dtype=np.float64, batch=4, rng=RNG):
    return (rng.normal(size=(3, 5)).astype(dtype), (0.5 * rng.normal(size=(5, 5))).astype(dtype),
            rng.normal(size=(batch, STEPS, 3)).astype(dtype),
            rng.normal(size=(batch, 5)).astype(dtype))


def reductions(source, phase):
    """The axis reductions of one phase ("forward", "backward"): (call text, has out=)."""
    text = source.split("# backward")[0 if phase == "forward" else 1]
    if phase == "forward":
        text = text.split("# forward")[1]
    calls = []
    for node in ast.walk(ast.parse("\n".join(line.strip() for line in text.splitlines()
                                             if line.strip() and not line.strip().startswith("#")))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in REDUCTIONS \
                and any(k.arg == "axis" for k in node.keywords):
            calls.append((ast.unparse(node), any(k.arg == "out" for k in node.keywords)))
    return calls


@pytest.mark.usefixtures("written_out")
@pytest.mark.parametrize("fun,kinds", [(normed, 1), (softmaxed, 3)], ids=["normed", "softmaxed"])
def test_a_recurrent_step_allocates_no_reduction_after_the_first(fun, kinds, monkeypatch):
    monkeypatch.setattr(passes, "ENABLED", True)
    monkeypatch.setattr(memory, "MIN_ELEMENTS", 1)  # buffers of any size worth reusing
    fun = types.FunctionType(fun.__code__, fun.__globals__)  # no code cached with fun
    source = ad.value_and_grad(fun, argnums=(0, 1)).source(*args_for())
    forward = reductions(source, "forward")
    assert len(forward) >= kinds * STEPS
    # each kind of reduction (its shape) allocates at most once: in the first step
    assert sum(not out for _, out in forward) <= kinds, forward
    backward = reductions(source, "backward")
    assert backward and sum(not out for _, out in backward) <= kinds, backward


@pytest.mark.parametrize("enabled", [True, False])
@pytest.mark.parametrize("fun", [normed, softmaxed], ids=lambda f: f.__name__)
def test_gradients_agree_with_the_tape_and_finite_differences(fun, enabled, monkeypatch):
    monkeypatch.setattr(passes, "ENABLED", enabled)
    check_grads(fun, *args_for(), argnums=(0, 1))
    small = args_for(np.float32)
    check_grads(fun, *small, argnums=(0, 1), rtol=1e-4, atol=1e-5, fd=False)
    value, grads = ad.value_and_grad(fun, argnums=(0, 1))(*small)
    assert value.dtype == grads[0].dtype == grads[1].dtype == np.float32


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_new_values_and_batch_sizes_on_the_cached_function(dtype):
    f = ad.value_and_grad(softmaxed, argnums=(0, 1))
    reference = tape.value_and_grad(softmaxed, (0, 1))
    rtol = 2e-4 if dtype == np.float32 else 1e-10
    for seed, batch in enumerate((4, 4, 7, 3, 4)):
        args = args_for(dtype, batch, np.random.default_rng(seed))
        before = [a.copy() for a in args]
        (v, grads), (tv, tgrads) = f(*args), reference(*args)
        np.testing.assert_allclose(v, tv, rtol=rtol)
        for g, t in zip(grads, tgrads):
            assert g.dtype == dtype
            np.testing.assert_allclose(g, t, rtol=rtol, atol=rtol)
        for a, b in zip(args, before):
            np.testing.assert_array_equal(a, b)  # no input written into
    assert f.cache_info().hits >= 2  # the same size again: the cached code, new values


def test_a_0d_reduction_stays_a_new_scalar():
    def f(x):
        total = 0.0
        for t in range(4):
            total = total + np.sum(np.sin(x[t]) * x[t])
        return total
    source = ad.value_and_grad(f).source(RNG.normal(size=(4, 3)))
    for line in source.splitlines():
        if "np.sum(" in line and "axis" not in line:
            assert "out=" not in line
    check_grads(f, RNG.normal(size=(4, 3)))
