"""Regressions from review A (items 4, 8, 9, 11): each compared with eager NumPy, the tape
and central finite differences over several calls with new data."""

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen import tape
from autodiffgen.testing import check_grads

SEED = 3


def _noisy(x, seed):
    rng = np.random.default_rng(seed)
    return np.sum(np.sin(x) * rng.standard_normal(x.shape))


def _noisy_global(x):
    rng = np.random.default_rng(SEED)
    return np.sum(np.sin(x) * rng.standard_normal(x.shape))


# ---- item 4: np.random.default_rng(seed) with a traced int seed ------------------------------
def test_default_rng_seed_argument_is_an_input():
    f = ad.value_and_grad(_noisy)
    for seed in range(10):
        x = np.random.default_rng(100 + seed).standard_normal(4)
        value, g = f(x, seed)
        z = np.random.default_rng(seed).standard_normal(4)
        assert np.isclose(value, _noisy(x, seed))
        np.testing.assert_allclose(g, np.cos(x) * z)
        np.testing.assert_allclose(g, tape.grad(_noisy)(x, seed))
        check_grads(_noisy, x, seed, fwd=False)
    assert f.cache_info().misses == 1  # a new seed is a new input value, not a retrace
    assert "np.random.default_rng(seed)" in f.source(x, 0)


def test_default_rng_seed_from_a_rebound_global():
    global SEED
    f = ad.grad(_noisy_global)
    x = np.linspace(-1.0, 1.0, 3)
    try:
        for seed in range(10):
            SEED = seed
            z = np.random.default_rng(seed).standard_normal(3)
            np.testing.assert_allclose(f(x), np.cos(x) * z)
            np.testing.assert_allclose(f(x), tape.grad(_noisy_global)(x))
    finally:
        SEED = 3
    assert f.cache_info().misses == 1


def test_default_rng_seed_under_second_order():
    x = np.array([0.3, -1.2, 2.0])
    for seed in (1, 2, 7):
        z = np.random.default_rng(seed).standard_normal(3)
        np.testing.assert_allclose(ad.hessian(_noisy)(x, seed), np.diag(-np.sin(x) * z),
                                   atol=1e-12)
        gg = ad.grad(lambda t, s: ad.grad(_noisy)(t, s).sum())(x, seed)
        np.testing.assert_allclose(gg, -np.sin(x) * z)


def test_default_rng_float_seed_is_refused_clearly():
    with pytest.raises(ad.TracingError, match="takes one seed"):
        ad.grad(_noisy)(np.ones(2), 1.5)
