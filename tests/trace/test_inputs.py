"""Python numbers outside argnums are inputs of the generated code (issue 10): a new value
of a float or int argument runs the same code, with no trace, unless the number decides
control flow or a shape, which the code then checks (a guard). Python's own semantics of
the numbers are kept: a Python float beside a float32 array stays weak, `k / 2` a float."""

import logging
import math

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen import GuardError, emit, grad, tape, value_and_grad
from autodiffgen.testing import check_grads

RNG = np.random.default_rng(10)


def compare(vg, fun, args, argnums=0, fwd=True):
    """The cached call against eager NumPy, the tape and finite differences."""
    value, g = vg(*args)
    expected = fun(*args)
    np.testing.assert_allclose(value, expected, rtol=1e-5, atol=1e-6)
    assert np.result_type(value) == np.result_type(expected)
    t_value, t_grad = tape.value_and_grad_now(fun, args, (argnums,), [f"a{i}" for i in
                                                                     range(len(args))])
    np.testing.assert_allclose(value, t_value, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g, t_grad[0], rtol=1e-5, atol=1e-6)
    check_grads(fun, *args, argnums=argnums, rtol=1e-4, atol=1e-5, fwd=fwd)
    return value, g


def annealed(w, x, temperature):
    return np.sum(np.tanh(x @ w / temperature) ** 2) + 0.1 * temperature * np.sum(w * w)


def test_an_annealed_float_is_an_input_300_values_one_trace():
    vg = value_and_grad(annealed)
    w, x = RNG.normal(size=(3, 2)), RNG.normal(size=(4, 3))
    for step in range(300):
        t = 2.0 * 0.99 ** step
        value, _g = vg(w, x, t)
        if step % 60 == 0:
            compare(vg, annealed, (w, x, t))
    assert vg.cache_info() == (vg.cache_info().hits, 1, 1)
    np.testing.assert_allclose(value, annealed(w, x, t))


def test_an_iteration_counter_is_an_input():
    def step_loss(w, x, it):
        return np.sum((x @ w) ** 2) / (1 + it) + it * 0.01 * np.sum(w)
    vg = value_and_grad(step_loss)
    w, x = RNG.normal(size=3), RNG.normal(size=(5, 3))
    for it in range(50):
        value, _ = vg(w, x, it)
        assert np.isclose(value, step_loss(w, x, it))
    compare(vg, step_loss, (w, x, 7))
    assert vg.cache_info().misses == 1


def summed_powers(x, k):
    total = x[0] * 0.0
    for i in range(k):  # k decides control flow: a guard
        total = total + x[i] ** (i + 1)
    return total


def test_an_int_deciding_range_gets_guarded_variants():
    vg = value_and_grad(summed_powers)
    x = RNG.normal(size=5)
    for k in (2, 3, 2, 4, 3):
        compare(vg, summed_powers, (x, k))
    assert vg.cache_info().misses == 3 and vg.cache_info().entries == 1
    assert "if operator.index(k) != (2):" in vg.source(x, 2)


def shaped(x, k):
    return np.sum(x[:k]) + np.sum(x.reshape(k, -1) ** 2) + np.sum(np.roll(x, k) * x) \
        + np.sum(x, axis=0) * k + np.zeros(k).sum()


def test_an_int_deciding_a_shape_is_guarded_in_every_handler():
    vg = value_and_grad(shaped)
    x = RNG.normal(size=6)
    for k in (2, 3, 2, 6):
        compare(vg, shaped, (x, k))
    assert vg.cache_info().misses == 3
    for source in (vg.source(x, 2), vg.source(x, 3)):
        assert "Box" not in source and "operator.index(k)" in source


def created(x, s, k):
    return np.sum(x[:k] * np.arange(k)) + np.sum(np.full(x.shape, s) * x) \
        + np.sum(np.eye(k)) * s + np.sum(np.linspace(0.0, s, k)) * np.sum(x)


def test_numpy_constructors_read_numbers_through_guards():
    vg = value_and_grad(created)
    x = RNG.normal(size=4)
    for s, k in ((0.5, 2), (0.5, 3), (0.5, 2)):
        compare(vg, created, (x, s, k))  # k decides shapes: a guard
    assert vg.cache_info().misses == 2
    compare(vg, created, (x, 0.7, 2))  # np.full's fill s is an input: no new trace
    assert vg.cache_info().misses == 2
    check_grads(created, x, 0.7, 3, argnums=1)


def test_python_number_semantics_are_kept():
    def f(w, lr, k):
        scale = lr * 2 + k / 2 + k // 2  # Python numbers: a weak float, a float, an int
        return np.sum(w * scale) + np.sum(w * lr)
    vg = value_and_grad(f)
    w = RNG.normal(size=3).astype(np.float32)
    for lr, k in ((0.5, 3), (0.1, 4), (1e-3, 5)):
        value, g = vg(w, lr, k)
        expected = f(w, lr, k)
        assert value.dtype == np.float32 == expected.dtype and g.dtype == np.float32
        np.testing.assert_allclose(value, expected, rtol=1e-6)
        np.testing.assert_allclose(g, np.float32(lr * 2 + k / 2 + k // 2 + lr), rtol=1e-6)
    assert vg.cache_info().misses == 1
    assert "lr * 2" in vg.source(w, 0.5, 3) and "np.float64(lr)" not in vg.source(w, 0.5, 3)


def test_negative_zero_read_by_a_rule_less_function_is_guarded():
    f = grad(lambda x, s: np.sum(x * np.copysign(1.0, s)))
    np.testing.assert_array_equal(f(np.ones(2), 0.0), [1.0, 1.0])
    np.testing.assert_array_equal(f(np.ones(2), -0.0), [-1.0, -1.0])
    np.testing.assert_array_equal(f(np.ones(2), 0.0), [1.0, 1.0])
    np.testing.assert_array_equal(f(np.ones(2), 5.0), [1.0, 1.0])


def test_batches_of_other_sizes_still_share_one_trace():
    def loss(w, x, y, lam):
        return np.mean((x @ w - y) ** 2) + lam * np.sum(w * w)
    vg = value_and_grad(loss)
    w = RNG.normal(size=3)
    for n, lam in ((32, 0.1), (20, 0.2), (7, 0.05), (32, 0.3)):
        x, y = RNG.normal(size=(n, 3)), RNG.normal(size=n)
        compare(vg, loss, (w, x, y, lam))
    assert vg.cache_info().misses == 1


def test_scalar_mode_with_a_float_and_an_int_input():
    def f(x, a, k):
        return np.sin(x) * a + x * k
    vg = value_and_grad(f)
    for a, k in ((0.5, 2), (1.5, 3)):
        value, g = vg(1.2, a, k)
        assert np.isclose(value, f(1.2, a, k)) and np.isclose(g, np.cos(1.2) * a + k)
    assert vg.cache_info().misses == 1


def test_standalone_module_takes_new_numbers():
    source = emit(annealed, np.ones((3, 2)), np.ones((4, 3)), 2.0, standalone=True)
    scope = {}
    exec(compile(source, "standalone.py", "exec"), scope)  # noqa: S102  generated code
    w, x = RNG.normal(size=(3, 2)), RNG.normal(size=(4, 3))
    for t in (2.0, 0.3):
        value, _ = scope["annealed_value_and_grad"](w, x, t)
        np.testing.assert_allclose(value, annealed(w, x, t))


def test_bools_and_strings_stay_static():
    def f(x, flag, mode):
        y = np.sum(x * x) if flag else np.sum(x)
        return y * 2.0 if mode == "double" else y
    vg = value_and_grad(f)
    x = RNG.normal(size=3)
    for flag, mode in ((True, "double"), (False, "double"), (True, "single"), (True, "double")):
        compare(vg, f, (x, flag, mode))
    assert vg.cache_info().misses == 3


# ---- the bounded cache -------------------------------------------------------------------
def test_the_cache_is_bounded_least_recently_used_first(monkeypatch):
    def f(x, tag):
        return np.sum(x) * len(tag)
    g = grad(f, max_entries=3)
    x = np.ones(2)
    for tag in ("a", "bb", "ccc"):
        g(x, tag)
    g(x, "a")  # used: now the most recent
    g(x, "dddd")  # drops "bb", the least recently used
    assert g.cache_info() == (1, 4, 3)
    g(x, "a")
    assert g.cache_info() == (2, 4, 3)
    np.testing.assert_array_equal(g(x, "bb"), [2.0, 2.0])  # traced again
    assert g.cache_info() == (2, 5, 3)
    monkeypatch.setattr("autodiffgen.api.MAX_ENTRIES", 2)
    h = grad(f)
    for tag in ("a", "bb", "ccc", "a"):
        h(x, tag)
    assert h.cache_info() == (0, 4, 2)


def test_an_argument_that_keeps_changing_is_named_once(caplog):
    def f(x, tag):
        return np.sum(x) * len(tag)
    g = grad(f)
    with caplog.at_level(logging.WARNING, logger="autodiffgen"):
        for i in range(30):
            g(np.ones(2), "t" * (i + 1))
    warnings = [r.getMessage() for r in caplog.records if "keeps changing" in r.getMessage()]
    assert len(warnings) == 1 and "argument 'tag'" in warnings[0]
    assert g.cache_info().entries == 30 and g.cache_info().misses == 30


def test_no_warning_when_numbers_change():
    vg = value_and_grad(annealed)
    w, x = np.ones((3, 2)), np.ones((4, 3))
    for t in np.linspace(0.5, 2.0, 20):
        vg(w, x, float(t))
    assert not vg._cache.churn.warned


@pytest.mark.parametrize("bad", [2**70, True])
def test_ints_past_int64_and_bools_stay_static(bad):
    f = grad(lambda x, k: np.sum(x) * (1 if k else 0))
    np.testing.assert_array_equal(f(np.ones(2), bad), [1.0, 1.0])
    assert f.source(np.ones(2), bad).count("def ") == 1


def test_a_number_python_keeps_reading_becomes_static_instead_of_an_error(caplog):
    def f(w, t):
        return np.sum(w * w) * math.exp(-t)  # math reads float(t): a guard per value
    vg = value_and_grad(f)
    w = RNG.normal(size=3)
    with caplog.at_level(logging.WARNING, logger="autodiffgen"):
        for i in range(30):
            value, g = vg(w, 0.1 * i)
            np.testing.assert_allclose(value, f(w, 0.1 * i))
            np.testing.assert_allclose(g, 2 * w * math.exp(-0.1 * i))
    assert vg.cache_info().misses == 30  # 8 guarded variants, then one trace per value
    assert vg(w, 0.1 * 20)[0] == pytest.approx(f(w, 0.1 * 20)) and vg.cache_info().misses == 30
    warned = [r.getMessage() for r in caplog.records if "keeps changing" in r.getMessage()]
    assert len(warned) == 1 and "argument 't'" in warned[0] and "np.exp(t)" in warned[0]


def test_a_failing_array_guard_beside_a_number_guard_still_ends_in_guard_error():
    def f(w, x, k):
        total = np.sum(w[:k])
        if float(x[0]) > 0.0:  # data: the answer changes from call to call
            total = total * float(x[1])
        return total
    vg = value_and_grad(f, max_variants=2)
    w = RNG.normal(size=4)
    with pytest.raises(GuardError, match="max_variants"):
        for i in range(20):
            vg(w, RNG.normal(size=4), 2)


def test_a_python_float_beside_float32_under_second_derivatives():
    """The outer trace casts the Python float in `const * t` to float32: written
    np.float32(t), since a Python float has no .astype (it crashed in hessian, hvp,
    grad of grad and jacobian of grad)."""
    def f(x, t):
        return t * np.sum(x ** 2) + np.sum(np.sin(x)) * t * t

    x = np.array([1.0, 2.0], np.float32)
    for t in (0.7, 1.3, -0.2):
        want = np.diag(2 * t - np.sin(x.astype(np.float64)) * t * t)
        H = ad.hessian(f)(x, t)
        assert H.dtype == np.float32
        np.testing.assert_allclose(H, want, rtol=1e-5)
        np.testing.assert_allclose(ad.jacobian(ad.grad(f))(x, t), want, rtol=1e-5)
        np.testing.assert_allclose(ad.hvp(f, (x, t), (np.ones(2, np.float32), 0.0)),
                                   np.diag(want), rtol=1e-5)
        g2 = ad.grad(ad.grad(lambda s, t: t * s ** 3))(np.float32(0.3), t)
        np.testing.assert_allclose(g2, 6 * 0.3 * t, rtol=1e-5)


T_GLOBAL = 1.0


def test_a_global_number_python_keeps_reading_keeps_the_latest_values_and_is_named(caplog):
    """math.exp(-T) of a global T that changes each call: a guard per value; past
    max_variants the oldest value's code is dropped (no GuardError), and one warning
    names T."""
    global T_GLOBAL

    def f(w):
        return np.sum(w * w) * math.exp(-T_GLOBAL)
    vg = value_and_grad(f)
    w = RNG.normal(size=3)
    try:
        with caplog.at_level(logging.WARNING, logger="autodiffgen"):
            for i in range(20):
                T_GLOBAL = 0.1 * i
                value, g = vg(w)
                np.testing.assert_allclose(value, f(w))
                np.testing.assert_allclose(g, 2 * w * math.exp(-T_GLOBAL))
            T_GLOBAL = 0.1 * 19  # the latest values are kept
            misses = vg.cache_info().misses
            np.testing.assert_allclose(vg(w)[0], f(w))
            assert vg.cache_info().misses == misses
    finally:
        T_GLOBAL = 1.0
    warned = [r.getMessage() for r in caplog.records if "keeps changing" in r.getMessage()]
    assert len(warned) == 1 and "because T_GLOBAL keeps changing" in warned[0]


def test_guard_retraces_count_toward_the_warning(caplog):
    """With a high max_variants, data that takes a new path at each call is warned of once
    (naming the guard's line), not only signature changes."""
    def f(w, k):
        return np.sum(w) * float(k.sum())  # float() of data: a guard per value
    g = grad(f, max_variants=50)
    with caplog.at_level(logging.WARNING, logger="autodiffgen"):
        for i in range(12):
            np.testing.assert_allclose(g(np.ones(2), np.full(2, float(i))), [2.0 * i] * 2)
    warned = [r.getMessage() for r in caplog.records if "guard keeps failing" in r.getMessage()]
    assert len(warned) == 1 and "test_inputs.py" in warned[0]


# ---- int arguments under transforms are inputs (review A item 11) ----------------------
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
