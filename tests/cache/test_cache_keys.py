"""Cache keys of the in-memory cache: static values that compare equal but are not the same
(-0.0 and 0.0, NaN), and the number of arguments a key can hold."""

import math

import numpy as np
import pytest

import autodiffgen as ad


def test_negative_zero_and_nan_static_values():
    f = ad.grad(lambda x, s: np.sum(x * np.copysign(1.0, s)))
    np.testing.assert_array_equal(f(np.ones(2), 0.0), [1.0, 1.0])
    np.testing.assert_array_equal(f(np.ones(2), -0.0), [-1.0, -1.0])
    g = ad.grad(lambda x, s: np.sum(x) + (0.0 if math.isnan(s) else s))
    for _ in range(3):
        g(np.ones(2), float("nan"))
    assert g.cache_info().misses == 1


def test_more_arguments_than_the_cache_handles_is_an_error():
    f = ad.grad(lambda *xs: sum(np.sum(x) for x in xs))
    with pytest.raises(ad.ArgumentError, match="at most 256"):
        f(*[np.ones(1)] * 257)
