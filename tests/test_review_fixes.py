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


# ---- item 9: writes into np.zeros_like of a traced value --------------------------------------
def _huber(w, y):
    r = w - y
    a = np.abs(r)
    small = a < 1.0
    out = np.zeros_like(r)
    out[small] = 0.5 * r[small] ** 2
    out[~small] = a[~small] - 0.5
    return out.mean()


def _one_slot(w):
    out = np.zeros_like(w)
    out[1] = w[1] ** 2
    return out.sum() + np.sum(w)


def test_masked_huber_into_zeros_like():
    f = ad.value_and_grad(_huber)
    rng = np.random.default_rng(0)
    for call in range(6):  # new data each call: other masks, all-small and all-large too
        w = rng.standard_normal(5) * (0.1 if call == 4 else 3.0 if call == 5 else 1.5)
        y = rng.standard_normal(5) * 0.1
        value, g = f(w, y)
        r = w - y
        assert np.isclose(value, np.mean(np.where(np.abs(r) < 1, 0.5 * r ** 2, np.abs(r) - 0.5)))
        np.testing.assert_allclose(g, np.where(np.abs(r) < 1, r, np.sign(r)) / 5)
        np.testing.assert_allclose(g, tape.grad(_huber)(w, y))
        check_grads(_huber, w, y)
    w32 = np.array([0.2, 3.0, -0.5], np.float32)
    assert f(w32, np.zeros(3, np.float32))[1].dtype == np.float32


def test_scalar_write_into_zeros_like():
    f = ad.grad(_one_slot)
    rng = np.random.default_rng(1)
    for _ in range(3):
        w = rng.standard_normal(4)
        np.testing.assert_allclose(f(w), 1 + np.array([0, 2 * w[1], 0, 0]))
        np.testing.assert_allclose(f(w), tape.grad(_one_slot)(w))
        check_grads(_one_slot, w)
    x = rng.standard_normal(4)
    np.testing.assert_allclose(ad.hessian(_one_slot)(x), np.diag([0, 2.0, 0, 0]), atol=1e-12)


def _clipped_into_ones_like(w, x):
    out = np.ones_like(x)  # 1 where |x w| >= 1, (x w)^2 below
    small = np.abs(x * w) < 1
    out[small] = (x * w)[small] ** 2
    return np.sum(out * w)


def test_writes_into_ones_like_of_a_traced_value():
    f = ad.value_and_grad(_clipped_into_ones_like)
    w = np.array([0.5, 2.0, -0.3])
    for x in (np.array([1.0, 0.2, 3.0]), np.full(3, 0.1), np.full(3, 5.0)):
        value, g = f(w, x)
        assert np.isclose(value, _clipped_into_ones_like(w, x))
        np.testing.assert_allclose(g, tape.grad(_clipped_into_ones_like)(w, x))
        check_grads(_clipped_into_ones_like, w, x)
    assert f.cache_info().misses == 1


def _plain_slice(w):
    out = np.zeros(4)
    out[1:3] = w[1:3] ** 2
    return out.sum()


def _plain_scalar(w):
    out = np.zeros(4)
    out[1] = w[1] ** 2
    return out.sum()


@pytest.mark.parametrize("fun", [_plain_slice, _plain_scalar])
def test_write_into_a_plain_array_names_the_line(fun):
    with pytest.raises(ad.TracingError, match=r"test_review_fixes.py:\d+: a traced value "
                       r"written into a plain NumPy array.*np.zeros_like\(x\)"):
        ad.grad(fun)(np.ones(4))


# ---- item 11: an int argument used as a value, under second-order transforms ---------------
def _annealed(w, epoch, lr):
    return np.sum(w ** 3) * 0.9 ** epoch * lr


def _int_power(w, k):
    return np.sum(w ** k) * 0.1


@pytest.mark.filterwarnings("error")  # no "traced again because 'epoch' keeps changing"
@pytest.mark.parametrize("kind", ["hessian", "hvp", "jvp", "vjp"])
def test_int_argument_is_an_input_under_transforms(kind):
    w = np.array([0.3, -0.2, 1.1])
    for epoch in range(12):  # past the 8 variants a guard per value would allow
        lr = 0.1 / (epoch + 1)
        scale = 0.9 ** epoch * lr
        if kind == "hessian":
            got, want = ad.hessian(_annealed)(w, epoch, lr), np.diag(6 * w) * scale
        elif kind == "hvp":
            got = ad.hvp(_annealed, (w, epoch, lr), (np.ones(3), None, None))
            got, want = (got[1] if isinstance(got, tuple) else got), 6 * w * scale
        elif kind == "jvp":
            got = ad.jvp(_annealed, (w, epoch, lr), (np.ones(3), None, None))[1]
            want = np.sum(3 * w ** 2) * scale
        else:
            value, back = ad.vjp(_annealed, w, epoch, lr)
            assert np.isclose(value, _annealed(w, epoch, lr))
            cotangents = back(1.0)
            assert cotangents[1] is None  # an int has no cotangent
            got, want = cotangents[0], 3 * w ** 2 * scale
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
    made = ad.transforms._cached({"hessian": "jvp", "hvp": "jvp"}.get(kind, kind), _annealed,
                                 None) if kind in ("jvp", "vjp") else None
    if made is not None:
        assert made.cache_info().misses == 1


def test_int_exponent_argument_is_an_input():
    f = ad.grad(_int_power)
    rng = np.random.default_rng(2)
    for k in (1, 2, 3, 4, 6, 0, 5):
        w = rng.standard_normal(4)
        w[0] = 0.0  # x ** k at 0: finite (0 for k == 0)
        np.testing.assert_allclose(f(w, k), 0.1 * k * w ** max(k - 1, 0) * (k != 0))
        np.testing.assert_allclose(f(w, k), tape.grad(_int_power)(w, k))
        check_grads(_int_power, w, k)
    assert f.cache_info().misses == 1
    gg = ad.grad(lambda w, k: ad.grad(_int_power)(w, k).sum())
    for k in (2, 3, 4):
        np.testing.assert_allclose(gg(w, k), 0.1 * k * (k - 1) * w ** (k - 2))


# ---- item 8: a mask's count in ordinary float formulas -----------------------------------------
def _plus_one(w, m):
    p = w[m]
    return p.sum() / (len(p) + 1.0)


def _squared(w, m):
    p = w[m]
    return p.sum() / len(p) ** 2


def _root(w, m):
    p = w[m]
    return np.sum(p ** 2) / np.sqrt(len(p)) + np.sum(p) * len(p) ** -0.5


def _where_count(x):
    return np.sum(x ** 2) * (len(np.where(x > 0.5)[0]) + 1.0)


COUNT_FORMULAS = {
    _plus_one: lambda w, m, k: m / (k + 1.0),
    _squared: lambda w, m, k: m / k ** 2,
    _root: lambda w, m, k: m * (2 * w + 1) / np.sqrt(k),
}


@pytest.mark.parametrize("fun", list(COUNT_FORMULAS), ids=lambda f: f.__name__)
def test_count_in_float_formulas_is_read_at_run_time(fun):
    f = ad.value_and_grad(fun)
    rng = np.random.default_rng(3)
    for k in (5, 2, 9, 14, 3, 20, 7, 11, 17, 4, 25):  # more counts than guard variants
        w = rng.standard_normal(30)
        m = np.zeros(30, bool)
        m[rng.permutation(30)[:k]] = True
        value, g = f(w, m)
        assert np.isclose(value, fun(w, m))
        np.testing.assert_allclose(g, COUNT_FORMULAS[fun](w, m, k), rtol=1e-12)
        np.testing.assert_allclose(g, tape.grad(fun)(w, m), rtol=1e-12)
        if k in (5, 14):
            check_grads(fun, w, m, fwd=False)
    assert f.cache_info().misses <= 2  # counts below 2 trace their own (a size read in Python)
    w32, m = rng.standard_normal(30).astype(np.float32), np.arange(30) % 3 == 0
    assert f(w32, m)[1].dtype == np.float32


def test_count_from_np_where_in_a_float_formula():
    f = ad.grad(_where_count)
    rng = np.random.default_rng(4)
    for _ in range(12):
        x = rng.uniform(0, 1, 20)
        k = np.count_nonzero(x > 0.5)
        np.testing.assert_allclose(f(x), 2 * x * (k + 1.0), rtol=1e-12)
        np.testing.assert_allclose(f(x), tape.grad(_where_count)(x), rtol=1e-12)
    assert f.cache_info().misses <= 2


def _reshaped_by_count(w, m):
    p = w[m]
    return np.sum(p.reshape(len(p), 1) * np.ones((1, len(p) % 3 + 1)))


def test_count_guard_message_says_what_to_do():
    f = ad.grad(_reshaped_by_count)
    w = np.linspace(0.0, 1.0, 40)
    with pytest.raises(ad.GuardError) as info:
        for k in range(2, 40):
            m = np.arange(40) < k
            f(w, m)
    text = str(info.value)
    assert "np.count_nonzero(mask) rather than len(x[mask])" in text
