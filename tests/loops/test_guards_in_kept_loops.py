"""A guard that stays in a kept loop's body refuses the call as any guard does: the cache
takes another path (cache/guarded.can_refuse looks into loop bodies), never a
GuardFailure out of the user's call. And a guard on a bound linear in the step leaves the
body only when its outcome at the two ends decides every step between (loops/bounds.py):
`j + k != 6` held at j = 0 and 7 may fail at j = 4."""

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen import tape

X = np.arange(1.0, 9.0)


def not_equal_in_loop(x, k):
    out = x[0] * 0.0
    for j in range(8):
        if j + k != 6:
            out = out + x[j] * x[j]
        else:
            out = out - x[j]
    return out


def equal_in_loop(x, k):
    out = x[0] * 0.0
    for j in range(8):
        if j + k == 6:
            out = out - x[j]
        else:
            out = out + x[j] * x[j]
    return out


def data_test_in_loop(x, c):
    out = x[0] * 0.0
    for j in range(8):
        if x[j] * c > 3:
            out = out + x[j] * x[j]
        else:
            out = out - x[j]
    return out


@pytest.mark.parametrize("f, values", [
    (not_equal_in_loop, [np.array(k) for k in (10, 2, 10, -3, 6, 0)]),
    (equal_in_loop, [np.array(k) for k in (10, 2, 10, -3, 6, 0)]),
    (data_test_in_loop, [np.array(c) for c in (10.0, 0.5, 10.0, -1.0, 0.7)]),
])
def test_one_cached_function_follows_every_path_of_a_test_inside_a_loop(f, values):
    g = ad.value_and_grad(f)
    for v in values:
        value, grad = g(X, v)
        t_value, t_grad = tape.value_and_grad(f)(X, v)
        assert value == pytest.approx(f(X, v), rel=1e-12)
        assert value == pytest.approx(t_value, rel=1e-12)
        np.testing.assert_allclose(grad, t_grad, rtol=1e-12)
