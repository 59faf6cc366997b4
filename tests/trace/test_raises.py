"""Exceptions used as control flow beyond linear algebra (issue 10): a NumPy call in the
body of a `try:` (an index out of range, np.take, a division under np.errstate) is a
guarded branch. Traced raising, the code checks it still raises; traced not raising, a
raise at run time is a GuardFailure and the call traces the path it takes. Each case runs
several calls whose data takes the other path, in both orders, under value_and_grad, jvp,
vjp and hessian, against eager NumPy, the tape and finite differences."""

import numpy as np
import pytest

from autodiffgen import grad, hessian, jvp, tape, value_and_grad, vjp
from autodiffgen.testing import check_grads

RNG = np.random.default_rng(5)


def index_or_sum(x, i):
    try:
        y = x[i] * 2.0
    except IndexError:
        y = np.sum(x ** 2)
    return y * x[0]


def rows_or_sin(x, idx):
    try:
        y = np.sum(x[idx] ** 2)
    except IndexError:
        y = np.sum(np.sin(x))
    return y


def take_or_mean(x, idx):
    try:
        y = np.sum(np.take(x, idx) * x[:2])
    except IndexError:
        y = np.mean(x) ** 2
    return y


def checked_only(x, i):
    try:
        x[i]  # only whether it raises matters
        scale = 3.0
    except IndexError:
        scale = 0.5
    return np.sum(x ** 2) * scale


def _pick(x, i):
    return x[i]


def helper_in_try(x, i):
    try:
        y = _pick(x, i) ** 2
    except IndexError:
        y = np.prod(x)
    return y


def log_or_square(x):
    with np.errstate(divide="raise", invalid="raise"):
        try:
            y = np.sum(np.log(x))
        except FloatingPointError:
            y = np.sum(x ** 2)
    return y


def divide_or_cos(x, d):
    with np.errstate(all="raise"):
        try:
            y = np.sum(x / d)
        except FloatingPointError:
            y = np.sum(np.cos(x))
    return y * 1.5


X = np.array([0.5, 1.5, -0.7, 2.0])
POS = np.array([0.5, 1.5, 0.7, 2.0])
CASES = {  # name: (function, arguments taking the try path, arguments taking the except path)
    "int index": (index_or_sum, [(X, 1), (X, -2), (X * 2, 3)], [(X, 7), (X, -9)]),
    "index array": (rows_or_sin, [(X, np.array([0, 1])), (X * 3, np.array([3, 2]))],
                    [(X, np.array([0, 9])), (X - 1, np.array([-8, 1]))]),
    "np.take": (take_or_mean, [(X, np.array([1, 3])), (X + 1, np.array([0, 0]))],
                [(X, np.array([1, 4])), (X * 2, np.array([-6, 0]))]),
    "unused read": (checked_only, [(X, 2), (X * 2, 0)], [(X, 4), (X - 1, 11)]),
    "in a helper": (helper_in_try, [(X, 1), (X + 2, 3)], [(X, 5), (X * 2, -7)]),
    "errstate log": (log_or_square, [(POS,), (POS * 3,)], [(X,), (np.array([-1.0, 1.0, 2.0, 3.0]),)]),
    "errstate divide": (divide_or_cos, [(X, POS), (POS, X + 3)],
                        [(X, np.array([1.0, 0.0, 1.0, 1.0])), (POS, np.zeros(4))]),
}


def interleaved(case, first):
    fun, good, bad = CASES[case]
    a, b = (good, bad) if first == "try" else (bad, good)
    calls = [c for pair in zip(a, b) for c in pair] + a + b
    return fun, calls


def eager_branch(fun, args):
    """Which path eager NumPy takes (the test data must take both)."""
    with np.errstate(all="ignore"):
        return fun(*args)


@pytest.mark.parametrize("first", ["try", "except"])
@pytest.mark.parametrize("case", list(CASES))
def test_value_and_grad_follow_eager_and_the_tape(case, first):
    fun, calls = interleaved(case, first)
    vg = value_and_grad(fun)
    tvg = tape.value_and_grad(fun)
    for args in calls:
        value, g = vg(*args)
        np.testing.assert_allclose(value, fun(*args), rtol=1e-12)
        t_value, t_g = tvg(*args)
        np.testing.assert_allclose(value, t_value, rtol=1e-12)
        np.testing.assert_allclose(g, t_g, rtol=1e-12, atol=1e-15)
    assert vg.cache_info().misses == 2  # one trace per path, then each is reused


@pytest.mark.parametrize("case", list(CASES))
def test_gradients_match_finite_differences_on_both_paths(case):
    fun, good, bad = CASES[case]
    for args in (good[0], bad[0]):
        check_grads(fun, *args, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("first", ["try", "except"])
@pytest.mark.parametrize("case", ["int index", "index array", "errstate log", "errstate divide"])
def test_jvp_and_vjp_follow_the_path(case, first):
    fun, calls = interleaved(case, first)
    for args in calls:
        tangents = (np.linspace(0.1, 0.4, 4),) + tuple(
            np.zeros_like(a) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else None
            for a in args[1:])
        out, t_out = jvp(fun, args, tangents)
        want, t_want = tape.jvp(fun, args, tangents)
        np.testing.assert_allclose(out, want, rtol=1e-12)
        np.testing.assert_allclose(t_out, t_want, rtol=1e-12, atol=1e-15)
        out, pullback = vjp(fun, *args)
        np.testing.assert_allclose(out, fun(*args), rtol=1e-12)
        np.testing.assert_allclose(pullback(1.0)[0], tape.grad(fun)(*args), rtol=1e-12,
                                   atol=1e-15)


def _fd_hessian(fun, x, rest, eps=1e-5):
    g = grad(fun)
    return np.stack([(g(x + eps * e, *rest) - g(x - eps * e, *rest)) / (2 * eps)
                     for e in np.eye(len(x))])


@pytest.mark.parametrize("first", ["try", "except"])
@pytest.mark.parametrize("case", ["int index", "index array", "errstate log", "errstate divide"])
def test_hessian_follows_the_path(case, first):
    fun, calls = interleaved(case, first)
    h = hessian(fun)
    for x, *rest in calls:
        np.testing.assert_allclose(h(x, *rest), _fd_hessian(fun, x, rest), rtol=1e-4,
                                   atol=1e-5)


def test_grad_of_grad_follows_the_path():
    def f(x, i):
        try:
            return np.sum(x[i] ** 3)
        except IndexError:
            return np.sum(x ** 2)
    gg = grad(lambda x, i: np.sum(grad(f)(x, i) ** 2))
    for i in (1, 9, 2, 8):
        want = 8.0 * X if i >= len(X) else np.where(np.arange(4) == i, 36.0 * X ** 3, 0.0)
        np.testing.assert_allclose(gg(X, i), want, rtol=1e-12)


def test_the_code_runs_the_try_line_in_try_and_under_the_errstate():
    vg = value_and_grad(divide_or_cos)
    source = vg.source(X, POS)
    assert "with np.errstate(divide='raise', invalid='raise', over='raise', under='raise'):" \
        in source
    assert "except (ArithmeticError, LookupError, TypeError, ValueError) as error:" in source and "which it did not when traced" in source
    raised = vg.source(X, np.zeros(4))  # the guard checks the division still raises
    assert "except FloatingPointError:" in raised and "raised FloatingPointError when traced" \
        in raised
    assert "np.errstate" in raised.split("except FloatingPointError:")[0]


def test_code_without_try_or_errstate_is_unchanged():
    def f(x, i):
        return np.sum(x[i] * x)
    source = value_and_grad(f).source(X, 1)
    assert "try:" not in source and "errstate" not in source and "GuardFailure" not in source


def test_a_raise_outside_any_try_is_the_users_error_at_their_line():
    def f(x, i):
        return np.sum(x[i] * x)
    vg = value_and_grad(f)
    vg(X, 1)
    with pytest.raises(IndexError):
        vg(X, 9)
    assert vg.cache_info().misses == 1
    fresh = value_and_grad(f)
    fresh.cache_clear()  # grad(f)s share their code (cache/view.py): trace afresh
    with pytest.raises(IndexError) as info:
        fresh(X, 9)
    assert "test_raises.py" in "".join(getattr(info.value, "__notes__", [])) + str(info.value)


def test_errstate_without_try_raises_as_eager_does():
    def f(x):
        with np.errstate(divide="raise"):
            y = 1.0 / x
        return np.sum(y)
    vg = value_and_grad(f)
    np.testing.assert_allclose(vg(POS)[0], f(POS))
    with pytest.raises(FloatingPointError):
        f(np.zeros(4))
    with pytest.raises(FloatingPointError):
        vg(np.zeros(4))
    np.testing.assert_allclose(vg(POS * 2)[0], f(POS * 2))


def test_float32_keeps_float32_on_both_paths():
    vg = value_and_grad(log_or_square)
    for x in (POS.astype(np.float32), X.astype(np.float32)):
        value, g = vg(x)
        assert g.dtype == np.float32
        np.testing.assert_allclose(value, log_or_square(x), rtol=1e-6)


def test_zero_d_arrays():
    def f(x, d):
        with np.errstate(divide="raise"):
            try:
                return x / d
            except FloatingPointError:
                return x * 2.0
    vg = value_and_grad(f)
    for d in (np.float64(2.0), np.float64(0.0), np.float64(4.0), np.float64(0.0)):
        value, g = vg(np.array(3.0), np.array(d))
        np.testing.assert_allclose(value, f(np.array(3.0), np.array(d)))
        np.testing.assert_allclose(g, tape.grad(f)(np.array(3.0), np.array(d)))


def test_numexpr_never_fuses_a_line_under_an_errstate(monkeypatch):
    pytest.importorskip("numexpr")
    import importlib

    from autodiffgen import passes
    fuse_module = importlib.import_module("autodiffgen.passes.fuse")
    monkeypatch.setattr(passes, "ENABLED", True)
    monkeypatch.setattr(fuse_module, "MIN_OPS", 4)
    monkeypatch.setattr(fuse_module, "MIN_ELEMENTS", {np.dtype(np.float64): (1, 1)})

    def f(x, d):
        with np.errstate(divide="raise", invalid="raise"):
            try:
                y = (x * d + x) * d / (x - d) - x / d
            except FloatingPointError:
                y = x * 2.0
        return np.sum(y * y)
    vg = value_and_grad(f)
    x = np.linspace(1.0, 2.0, 8)
    source = vg.source(x, x + 1.0)
    assert "numexpr.evaluate" in source  # the backward pass is fused; the forward is not
    assert "numexpr.evaluate" not in source.split("# backward")[0]
    for d in (x + 1.0, x, x + 2.0, x * 1.0):  # d == x divides 0 by 0: the fallback
        value, g = vg(x, d)
        np.testing.assert_allclose(value, f(x, d), rtol=1e-12)
        np.testing.assert_allclose(g, tape.grad(f)(x, d), rtol=1e-12)


def int_or_zero(w, s):
    try:
        k = int(s[0])
    except (ValueError, OverflowError):
        k = 0
    return np.sum(w[k] * w)


@pytest.mark.parametrize("first", [1.0, np.nan])
def test_an_int_conversion_that_raises_is_a_branch(first):
    vg = value_and_grad(int_or_zero)
    w = np.array([1.0, 2.0, 3.0])
    for s0 in (first, np.nan, 2.0, np.inf, 1.0, np.nan, -np.inf, 2.0):
        s = np.array([s0, 0.0])
        value, g = vg(w, s)
        t_value, t_g = tape.value_and_grad(int_or_zero)(w, s)
        np.testing.assert_allclose(value, int_or_zero(w, s))
        np.testing.assert_allclose(value, t_value)
        np.testing.assert_allclose(g, t_g)
    source = vg.source(w, np.array([np.nan, 0.0]))
    assert "except ValueError:" in source and "raised ValueError when traced" in source


def test_a_try_or_errstate_around_the_call_is_not_the_functions():
    def f(x, s, i):
        y = x[i] * x
        return np.sum(y) if float(s[0]) > 0 else np.sum(y * 2.0)
    vg = value_and_grad(f, argnums=0)
    try:  # the caller's `try:` and errstate: the function's lines are in neither
        with np.errstate(all="raise"):
            source = vg.source(np.ones(3), np.ones(2), 1)
    except FloatingPointError:
        raise AssertionError("no float error here") from None
    assert "except (" not in source and "errstate" not in source
    with np.errstate(divide="raise"), pytest.raises(FloatingPointError):
        value_and_grad(lambda x: np.sum(1.0 / x))(np.zeros(2))  # the caller's setting holds


def test_python_float_arguments_keep_numpys_errors():
    """Code for Python floats is written with the math module, whose errors are not
    NumPy's (math.log(-1.0) is a ValueError): a line under an errstate stays NumPy."""
    def f(x):
        with np.errstate(invalid="raise", divide="raise"):
            return np.log(x) * x
    vg = value_and_grad(f)
    np.testing.assert_allclose(vg(2.0), tape.value_and_grad(f)(2.0))
    assert "math." not in vg.source(2.0)
    with pytest.raises(FloatingPointError):
        vg(-1.0)
    vg2 = value_and_grad(log_or_square)
    for x in (2.0, 0.0, -1.0, 3.0, 0.0):
        np.testing.assert_allclose(vg2(x), tape.value_and_grad(log_or_square)(x))


def test_the_generated_code_passes_ruff(tmp_path):
    from tables import run_ruff
    for name, (fun, good, bad) in CASES.items():
        vg = value_and_grad(fun)
        for k, args in enumerate((good[0], bad[0])):
            (tmp_path / f"{name.replace(' ', '_')}_{k}.py").write_text(vg.source(*args))
    vg = value_and_grad(int_or_zero)
    for k, s0 in enumerate((1.0, np.nan)):
        (tmp_path / f"int_{k}.py").write_text(vg.source(np.ones(3), np.array([s0, 0.0])))
    assert run_ruff(tmp_path) == []


def test_an_errstate_block_of_several_lines_is_one_with_block():
    def f(x):
        with np.errstate(divide="ignore", invalid="ignore"):
            r = 1.0 / x
            r = np.where(np.isfinite(r), r, 0.0)
            s = np.log(np.abs(x) + 1.0)
        return np.sum(r * s)
    vg = value_and_grad(f)
    x = np.array([0.5, 1.0, -2.0])  # (at 0 the backward pass meets inf * 0, as the tape does)
    source = vg.source(x)
    assert source.count("with np.errstate(divide='ignore', invalid='ignore'):") == 1
    np.testing.assert_allclose(vg(x)[0], f(x))
    np.testing.assert_allclose(vg(x)[1], tape.grad(f)(x))
