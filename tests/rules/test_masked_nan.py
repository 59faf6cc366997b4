"""Masks that are complements only without NaN (`x >= 0`, `x < 0`): the where-form of
their writes (rules/masked_writes.py) is guarded by one `np.isnan(x).any()` per compared
array, and a call with a NaN traces the masked writes as written. One cached function
called without NaN, with NaN and without again agrees with eager NumPy and the tape each
time, values and gradients, NaN positions included; `~m` and integer comparisons need no
guard; the LSTM step's three gates share one check."""

import numpy as np
import pytest
from test_masked_writes import masked_tape, sigmoid, sigmoid_loss

import autodiffgen as ad
from autodiffgen.trace import tracer

RNG = np.random.default_rng(37)


def inverted(x):  # `m` and `~m`: complements whatever the values
    m = x >= 0
    z = np.zeros_like(x)
    z[m] = np.exp(-x[m])
    z[~m] = np.exp(x[~m])
    return np.sum(z * x)


def by_integers(x, k):  # k >= 2 and k < 2 of integers: no NaN to miss
    z = np.zeros_like(x)
    z[k >= 2] = np.exp(-x[k >= 2])
    z[k < 2] = np.exp(x[k < 2])
    return np.sum(z * x)


def gates(a):  # three sigmoids of slices of one array, as an LSTM step's gates
    H = a.shape[1] // 3
    return np.sum(sigmoid(a[:, :H]) * sigmoid(a[:, H:2 * H]) + sigmoid(a[:, 2 * H:]))


def with_nan(x, at=((1, 2), (2, 0))):
    x = x.copy()
    for i in at:
        x[i] = np.nan
    return x


def agree(f, fun, *args):
    """f's value and gradient are eager NumPy's value and the masked tape's, exactly where
    they are NaN and closely elsewhere."""
    value, grad = f(*args)
    tape_value, tape_grad = masked_tape(fun)(*args)
    np.testing.assert_allclose(value, fun(*args), rtol=1e-13)
    np.testing.assert_allclose(value, tape_value, rtol=1e-13)
    np.testing.assert_allclose(grad, tape_grad, rtol=1e-12, atol=1e-15)  # (NaN where NaN)
    return grad


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_one_cached_function_without_nan_with_nan_and_without_again(dtype):
    x, w = RNG.normal(size=(5, 4)).astype(dtype), RNG.normal(size=(5, 4)).astype(dtype)
    f = ad.value_and_grad(sigmoid_loss)
    rtol = 1e-13 if dtype == np.float64 else 1e-5
    for k, arg in enumerate((x, with_nan(x), x * 2, with_nan(x, ((0, 0), (4, 1))))):
        value, grad = f(arg, w)
        assert grad.dtype == dtype and np.result_type(value) == dtype
        tape_value, tape_grad = masked_tape(sigmoid_loss)(arg, w)
        np.testing.assert_allclose(value, sigmoid_loss(arg, w), rtol=rtol)
        np.testing.assert_allclose(value, tape_value, rtol=rtol)
        np.testing.assert_allclose(grad, tape_grad, rtol=rtol, atol=1e-6)
        assert np.isfinite(value) and np.all(np.isfinite(grad))  # the fill at NaN, as eager
        assert np.all(grad[np.isnan(arg)] == 0)
        assert f.cache_info().misses == (1, 2, 2, 3)[k]  # the third call hits the first
        # path; the masked writes' path is traced per count of its masks (a count guard)


def test_the_guard_is_in_the_code_and_fails_on_nan_only():
    x, w = RNG.normal(size=(3, 4)), RNG.normal(size=(3, 4))
    source = ad.emit(sigmoid_loss, x, w)
    assert source.count("np.isnan(x).any()") == 1 and "np.where(" in source
    f = ad.value_and_grad(sigmoid_loss)
    f(x, w)
    runs = tracer.runs()
    f(-x, w)
    f(np.full_like(x, np.inf), w)  # inf is ordered: the where-form serves it
    assert tracer.runs() == runs
    agree(f, sigmoid_loss, with_nan(x), w)
    assert tracer.runs() > runs  # the NaN took the other path


def test_a_nan_path_traced_first_serves_values_without_nan():
    x, w = RNG.normal(size=(3, 4)), RNG.normal(size=(3, 4))
    f = ad.value_and_grad(sigmoid_loss)
    agree(f, sigmoid_loss, with_nan(x, ((0, 1),)), w)
    agree(f, sigmoid_loss, x, w)
    agree(f, sigmoid_loss, with_nan(x, ((2, 3),)), w)


@pytest.mark.parametrize("fun, args", [
    (inverted, (np.array([0.5, -1.0, np.nan, 2.0]),)),
    (by_integers, (np.array([0.5, -1.0, np.nan, 2.0]), np.array([1, 2, 3, 0])))],
    ids=["invert", "integers"])
def test_exact_complements_need_no_guard(fun, args):
    source = ad.emit(fun, *[np.nan_to_num(a) for a in args])
    assert "isnan" not in source and "np.where(" in source
    agree(ad.value_and_grad(fun), fun, *[np.nan_to_num(a) for a in args])
    f = ad.value_and_grad(fun)
    f(*[np.nan_to_num(a) for a in args])
    runs = tracer.runs()
    value, grad = f(*args)  # NaN where the user's code computes one
    assert tracer.runs() == runs
    tape_value, tape_grad = masked_tape(fun)(*args)
    np.testing.assert_array_equal(value, tape_value)
    np.testing.assert_allclose(grad, tape_grad, rtol=1e-13)


def test_gates_of_one_array_share_one_check():
    a = RNG.normal(size=(4, 9))
    source = ad.emit(gates, a)
    assert source.count("isnan(") == 1 and "np.isnan(a).any()" in source
    f = ad.value_and_grad(gates)
    agree(f, gates, a)
    agree(f, gates, with_nan(a, ((1, 7),)))  # NaN in one gate's slice
    agree(f, gates, a * 3)
