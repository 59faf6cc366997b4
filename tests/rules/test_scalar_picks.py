"""A pick at integer positions, traced or not (`p[targets[t], 0]`, targets a Python list):
one position, so its cotangent adds into one element and the emitted code says so
(`unique=True`: `g[i, 0] += v`, not np.add.at, 2.3 against 1.1 us on 65 doubles;
rules/indexing.selects_once). Values against eager NumPy, gradients against the tape and
central differences, float32 kept, a 0-d pick, the cached code serving new targets."""

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen import passes
from autodiffgen.testing import check_grads

RNG = np.random.default_rng(2904)


def picks(scores, targets):
    """A character model's loss: each column's softmax picked at its target."""
    total = 0.0
    for t in range(len(targets)):
        e = np.exp(scores[:, t:t + 1])
        p = e / np.sum(e)
        total = total - np.log(p[targets[t], 0])
    return total


def eager(scores, targets):
    p = np.exp(scores) / np.exp(scores).sum(axis=0)
    return -sum(np.log(p[k, t]) for t, k in enumerate(targets))


def args_for(dtype=np.float64, steps=4, vocab=5):
    return RNG.normal(size=(vocab, steps)).astype(dtype), \
        [int(k) for k in RNG.integers(0, vocab, steps)]


@pytest.fixture(autouse=True)
def optimized(monkeypatch):
    monkeypatch.setattr(passes, "ENABLED", True)


def test_a_pick_at_a_traced_integer_adds_into_one_element():
    source = ad.value_and_grad(picks).source(*args_for())
    backward = source.split("# backward")[1]
    assert "np.add.at" not in backward and "unique=False" not in backward, backward
    assert "unique=True" in backward or "] += " in backward, backward


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gradients_agree_with_the_tape_and_finite_differences(dtype):
    args = args_for(dtype)
    value, grad = check_grads(picks, *args, rtol=1e-4 if dtype == np.float32 else 1e-6,
                              atol=1e-5 if dtype == np.float32 else 1e-8,
                              fd=dtype == np.float64)
    np.testing.assert_allclose(value, eager(*args), rtol=1e-5 if dtype == np.float32 else 1e-12)
    assert grad.dtype == dtype


def test_a_zero_d_pick():
    def f(x, k):
        return np.tanh(x)[k] * 2.0
    x = RNG.normal(size=5)
    _, grad = check_grads(f, x, 3)
    assert np.count_nonzero(grad) == 1
    assert "unique=True" in ad.value_and_grad(f).source(x, 3).split("# backward")[1]


def test_the_cached_code_serves_new_targets():
    f = ad.value_and_grad(picks)
    for _ in range(3):
        args = args_for()
        value, grad = f(*args)
        want_value, want_grad = ad.tape.value_and_grad(picks)(*args)
        np.testing.assert_allclose(value, want_value, rtol=1e-12)
        np.testing.assert_allclose(grad, want_grad, rtol=1e-10, atol=1e-14)
