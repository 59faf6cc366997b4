"""Small arrays, where NumPy's per-call overhead is the time (issue 29): the emitted code
spells each call the cheaper of two equal ways (codegen/expressions.py).

- A matrix by a vector (1-D, a column or a row) is `np.dot(W, h)`: np.dot is matmul for
  1-D and 2-D operands, without matmul's 0.3 us of generalized-ufunc dispatch.
- A reduction is the array's method, `x.sum()`, `x.max(axis=1, keepdims=True)`: np.sum's
  ufunc reduce without its Python wrapper (1 us less); a Python number keeps np.sum.
- The helpers copy an array with its method (`x.copy(order="K")`, np.copy's layout).

Values against eager NumPy, gradients against the tape and central differences, float32
kept, 0-d and broadcast operands, the cached code serving new values."""

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen import passes
from autodiffgen.generated_helpers import _add_at, _setitem
from autodiffgen.testing import check_grads

RNG = np.random.default_rng(2903)


def code_of(source):
    return "\n".join(line.split("  # ")[0] for line in source.splitlines())


def step(W, h, b, v):
    """A column's product, a 1-D vector's and a row's; a 0-d or column bias broadcast."""
    a = np.tanh(np.dot(W, h) + b)
    return np.sum(a * a) + np.sum(np.tanh(v @ W)) + np.sum((v[None] @ W) ** 2)


def reductions(x, s):
    """Every reduction with a method, over all axes and one, kept or not; s a 0-d array."""
    return (np.sum(x * s) + np.max(x, axis=0).sum() + np.mean(x * x, axis=1, keepdims=True).sum()
            + np.min(x) * np.prod(np.tanh(x), axis=1).sum())


def step_args(dtype=np.float64, bias=(4, 1)):
    return tuple(a.astype(dtype) for a in (RNG.normal(size=(4, 3)), RNG.normal(size=(3, 1)),
                                           RNG.normal(size=bias), RNG.normal(size=4)))


def reduction_args(dtype=np.float64):
    return RNG.normal(size=(3, 5)).astype(dtype), np.asarray(0.7, dtype=dtype)


@pytest.fixture(autouse=True)
def optimized(monkeypatch):
    monkeypatch.setattr(passes, "ENABLED", True)


def test_a_vectors_products_are_np_dot():
    code = code_of(ad.value_and_grad(step, argnums=(0, 1, 2, 3)).source(*step_args()))
    forward = code.split("# backward")[0]
    assert "np.dot(W, h)" in forward and "np.dot(v, W)" in forward, forward
    assert " @ " not in forward and "np.matmul" not in forward, forward


def test_reductions_are_methods():
    code = code_of(ad.value_and_grad(reductions).source(*reduction_args()))
    for method in (".max(axis=0)", ".mean(axis=1, keepdims=True)", ".min()", ".prod(axis=1)"):
        assert method in code, code
    assert not any(f"np.{r}(" in code for r in ("sum", "mean", "max", "min", "prod")), code


def test_a_number_keeps_np_sum():
    """A value of no dimensions may be a Python number when the code runs (a loop's
    running total starts as 0): np.sum, not a method it may not have."""
    def f(x, c):
        total = 0
        for k in range(3):
            total = np.sum(total) + np.sum(x[k] * c)
        return total
    x = np.arange(3.0)
    code = code_of(ad.value_and_grad(f, argnums=(0, 1)).source(x, 2.5))
    assert "np.sum(" in code and ".sum()" not in code, code
    for c in (2.5, np.float64(2.5), np.asarray(2.5)):
        value, (g_x, g_c) = check_grads(f, x, c, argnums=(0, 1))
        assert value == 7.5 and np.array_equal(g_x, np.full(3, 2.5)) and g_c == 3.0


@pytest.mark.parametrize("fun,make,argnums", [(step, step_args, (0, 1, 2, 3)),
                                              (reductions, reduction_args, (0, 1))])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gradients_agree_with_the_tape_and_finite_differences(fun, make, argnums, dtype):
    args = make(dtype)
    value, grads = check_grads(fun, *args, argnums=argnums,
                               rtol=1e-4 if dtype == np.float32 else 1e-6,
                               atol=1e-4 if dtype == np.float32 else 1e-7,
                               fd=dtype == np.float64)
    np.testing.assert_allclose(value, fun(*args), rtol=1e-5 if dtype == np.float32 else 1e-13)
    assert all(g.dtype == dtype and g.shape == np.shape(a) for g, a in zip(grads, args))


def test_a_zero_d_bias_broadcast():
    args = step_args(bias=())
    _, grads = check_grads(step, *args, argnums=(0, 1, 2, 3))
    assert grads[2].shape == ()


def test_the_cached_code_serves_new_values():
    f = ad.value_and_grad(step, argnums=(0, 1, 2, 3))
    for _ in range(3):
        args = step_args()
        value, grads = f(*args)
        want_value, want_grads = ad.tape.value_and_grad(step, (0, 1, 2, 3))(*args)
        np.testing.assert_allclose(value, want_value, rtol=1e-13)
        for g, w in zip(grads, want_grads):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)
    assert f.cache_info().misses == 1


@pytest.mark.parametrize("helper", [lambda x: _setitem(x, np.s_[1, 0], 5.0),
                                    lambda x: _add_at(x, np.s_[1, 0], 5.0, unique=True)])
def test_the_helpers_copy_keeps_the_layout_and_leaves_the_array(helper):
    x = np.asfortranarray(RNG.normal(size=(3, 4)))
    before = x.copy()
    out = helper(x)
    assert out.flags.f_contiguous and not out.flags.c_contiguous and out is not x
    np.testing.assert_array_equal(x, before)
    assert out[1, 0] in (5.0, before[1, 0] + 5.0)
    assert np.array_equal(helper(np.zeros((2, 2)).tolist()), helper(np.zeros((2, 2))))
