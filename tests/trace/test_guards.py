"""Data-dependent Python control flow: guards, one variant per path, a bound, a log."""

import logging
import subprocess
import sys

import numpy as np
import pytest

import autodiffgen
from autodiffgen import grad, tape, value_and_grad
from autodiffgen.testing import check_grads

RNG = np.random.default_rng(7)


def branchy(x):
    if x.sum() > 0:
        return (x ** 2).sum()
    return -np.sin(x).sum()


def loop(x):
    y = x
    while (y ** 2).sum() < 50.0:  # the trip count depends on the data
        y = y * 1.5 + 0.1
    return np.tanh(y).sum()


def python_max(x):
    return max(x[0], x[1]) * x[2]


def with_int(x, k):
    n = int(k.max())  # an integer label: no derivative, a guard on its value
    return (x[:n] ** 2).sum()


def with_range(x, k):
    total = x[0] * 0.0
    for i in range(k.max()):  # __index__ of a traced integer
        total = total + x[i] ** 2
    return total


def scaled(x, s):
    return float(s) * (x ** 2).sum()  # s is not differentiated: a guard on its value


def test_both_branches_are_right_and_cached_as_two_variants():
    f = value_and_grad(branchy)
    pos, neg = np.array([1.0, 2.0]), np.array([-1.0, -3.0])
    for x in (pos, neg, pos, neg, pos):
        check_grads(branchy, x)
        value, g = f(x)
        tv, tg = tape.value_and_grad(branchy)(x)
        np.testing.assert_allclose(value, tv)
        np.testing.assert_allclose(g, tg)
    info = f.cache_info()
    assert (info.misses, info.entries) == (2, 1)  # one signature, two paths


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_data_dependent_while_loop(dtype):
    f = grad(loop)
    for scale in (0.1, 1.0, 3.0, 0.5):
        x = (scale * np.arange(1, 4)).astype(dtype)
        g = f(x)
        assert g.dtype == dtype
        np.testing.assert_allclose(g, tape.grad(loop)(x), rtol=1e-5)
        if dtype == np.float64:
            check_grads(loop, x)


def test_python_max_follows_the_larger_value():
    for x in (np.array([1.0, 2.0, 3.0]), np.array([2.0, 1.0, 3.0])):
        check_grads(python_max, x)
        g = grad(python_max)(x)
        expected = np.zeros(3)
        expected[int(np.argmax(x[:2]))] = x[2]
        expected[2] = max(x[0], x[1])
        np.testing.assert_allclose(g, expected)


def test_max_with_a_python_number():
    def f(x):
        return max(0.0, x.sum()) * 2.0  # Python's max on a traced 0-d value
    check_grads(f, np.array([1.0, 2.0]))
    check_grads(f, np.array([-1.0, -2.0]))
    assert grad(f)(np.array([-1.0, -2.0])).tolist() == [0.0, 0.0]


@pytest.mark.parametrize("fun", [with_int, with_range])
def test_integers_read_from_traced_labels(fun):
    f = grad(fun)
    x = RNG.normal(size=6)
    for k in ([2, 1], [4, 3], [2, 0], [5, 5]):
        k = np.array(k)
        np.testing.assert_allclose(f(x, k), tape.grad(fun)(x, k))
        check_grads(fun, x, k)


def test_float_of_a_static_argument_is_guarded():
    f = grad(scaled)
    x = RNG.normal(size=3)
    for s in (2.0, 3.0, 2.0):
        np.testing.assert_allclose(f(x, np.array(s)), 2 * s * x)
    assert f.cache_info().misses == 2


def test_generated_code_checks_its_guards_first_and_says_so():
    f = value_and_grad(branchy)
    x = np.array([1.0, 2.0])
    source = f.source(x)
    guard_line = next(i for i, line in enumerate(source.splitlines()) if "if not greater" in line)
    assert "guard: if x.sum() > 0:" in source.splitlines()[guard_line]
    assert "GuardFailure('test_guards.py:" in source
    assert source.index("if not greater") < source.index("power = ")
    assert "# backward" in source[source.index("if not greater"):]
    neg = np.array([-1.0, -2.0])
    other = f.source(neg)  # the variant that these arguments pass
    assert "if greater:" in other and "np.sin" in other
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--isolated",
                             "--stdin-filename", "generated.py", "-"], input=other,
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout


def test_a_guard_that_keeps_failing_ends_in_a_clear_error():
    def f(x, t):
        if float(t) > 0.5 * float(t) ** 2:  # a new value read every call
            return x.sum()
        return x.sum() * float(t)
    g = grad(f, max_variants=3)
    x = np.ones(2)
    for t in (1.0, 1.5, 2.5):
        g(x, np.array(t))
    with pytest.raises(autodiffgen.GuardError) as info:
        g(x, np.array(3.5))
    message = str(info.value)
    line = f.__code__.co_firstlineno + 1
    assert f"test_guards.py:{line}" in message and "float()" in message
    assert "max_variants" in message and "3 times" in message


def test_float_of_a_differentiated_value_is_refused_with_the_line():
    def f(x):
        return max(0.0, float(x[0])) * x[1]  # float_line
    with pytest.raises(autodiffgen.TracingError) as info:
        grad(f)(np.array([1.0, 2.0]))
    line = f.__code__.co_firstlineno + 1
    assert f"test_guards.py:{line}" in str(info.value)
    assert "np.maximum" in str(info.value)


def test_stop_gradient_allows_reading_a_number():
    def f(x):
        return float(autodiffgen.stop_gradient(x[0])) * x[1]
    x = np.array([3.0, 2.0])
    np.testing.assert_allclose(grad(f)(x), [0.0, 3.0])


def test_transforms_follow_the_path_too():
    pos, neg = np.array([0.5, 1.0]), np.array([-0.5, -1.0])
    for x in (pos, neg, pos):
        _, t = autodiffgen.jvp(branchy, (x,), (np.ones(2),))
        _, tape_t = tape.jvp(branchy, (x,), (np.ones(2),))
        np.testing.assert_allclose(t, tape_t)
        _, back = autodiffgen.vjp(branchy, x)
        np.testing.assert_allclose(back(1.0)[0], tape.grad(branchy)(x))
        h = autodiffgen.hessian(branchy)(x)
        expected = 2 * np.eye(2) if x.sum() > 0 else np.diag(np.sin(x))
        np.testing.assert_allclose(h, expected, atol=1e-12)


def test_grad_of_grad_through_a_branch():
    def f(x):
        if x > 0:
            return x ** 3
        return -x ** 2
    d2 = grad(grad(f))
    assert d2(2.0) == pytest.approx(12.0)
    assert d2(-2.0) == pytest.approx(-2.0)
    assert d2(3.0) == pytest.approx(18.0)


def test_guards_of_a_grad_of_grad_name_the_users_line():
    """The outer grad traces the inner one's generated code: its guards point at the
    user's `if`, through the line map of that code, not at the caller's line."""
    def f(a):
        if a > 0:
            return a ** 3
        return -a ** 2
    line = f"test_guards.py:{f.__code__.co_firstlineno + 1}"
    for d2 in (grad(grad(f)), grad(grad(grad(f)))):
        source = d2.source(np.array(2.0))
        assert "# guard: if a > 0:" in source and f"'{line}: `if a > 0:`" in source, source
    d2 = grad(grad(f), max_variants=1)
    assert d2(np.array(2.0)) == pytest.approx(12.0)
    with pytest.raises(autodiffgen.GuardError) as info:
        d2(np.array(-2.0))
    assert str(info.value).startswith(f"{line}: `if a > 0:` was True when traced")


def test_standalone_module_refuses_the_other_path(tmp_path):
    source = autodiffgen.emit(branchy, np.array([1.0, 2.0]), standalone=True)
    path = tmp_path / "gen.py"
    path.write_text(source)
    scope = {}
    exec(compile(source, str(path), "exec"), scope)  # noqa: S102  generated above
    fn = scope["branchy_value_and_grad"]
    assert fn(np.array([2.0, 2.0]))[0] == pytest.approx(8.0)
    with pytest.raises(Exception, match="x.sum\\(\\) > 0") as info:
        fn(np.array([-2.0, -2.0]))
    assert type(info.value).__name__ == "GuardFailure"


def test_explain_retraces_says_why(caplog):
    f = grad(branchy)
    f.cache_clear()  # the code other tests' grad(branchy) made is shared: trace afresh
    autodiffgen.explain_retraces(True)
    try:
        with caplog.at_level(logging.WARNING, logger="autodiffgen"):
            f(np.ones(3))
            f(np.ones(4))
            f(-np.ones(4))
            f(np.ones((2, 2), np.float32))
    finally:
        autodiffgen.explain_retraces(False)
    messages = [r.getMessage() for r in caplog.records]
    assert any("argument 'x': shape (3,) -> (4,)" in m for m in messages)
    assert any("guard failed" in m and "x.sum() > 0" in m for m in messages)
    assert any("dtype float64 -> float32" in m for m in messages)
    assert len(messages) == 3  # nothing about the first call


def summed_products(w, a1, b1, a2, b2, a3, b3):
    s = float(np.sum(a1 @ b1 + a2 @ b2 + a3 @ b3))  # a guard on non-differentiated data
    if s > 0:
        return np.sum(np.sin(w) * s)
    return np.sum(w * w)


def test_a_guard_reads_its_value_computed_as_traced():
    """The accumulate pass rewrites a1 @ b1 + a2 @ b2 + a3 @ b3 as one matmul, whose sum
    differs in its last bits: a guard on float() of it failed at once, and the call died
    with 'gave another result when traced again'. What a guard reads is left as traced."""
    rng = np.random.default_rng(5)
    f = grad(summed_products)
    signs = set()
    for _ in range(4):  # float() reads a new value for new data: one variant each
        w = rng.normal(size=(7, 5))
        args = [w] + [rng.normal(size=(7, 13)) if i % 2 == 0 else rng.normal(size=(13, 5))
                      for i in range(6)]
        s = float(np.sum(args[1] @ args[2] + args[3] @ args[4] + args[5] @ args[6]))
        signs.add(s > 0)
        for _ in range(2):  # the same data again: the variant traced for it answers
            g = f(*args)
            np.testing.assert_allclose(g, tape.grad(summed_products)(*args), rtol=1e-12)
            np.testing.assert_allclose(g, np.cos(w) * s if s > 0 else 2 * w, rtol=1e-12)
    assert signs == {True, False}  # both paths taken
    assert f.cache_info().misses == 4


def test_passes_do_not_change_what_a_guard_reads():
    """accumulate merges the same sum when no guard reads it (the pass still works)."""
    from autodiffgen import passes
    rng = np.random.default_rng(1)
    args = [rng.normal(size=(7, 5))] + [rng.normal(size=(7, 13)) if i % 2 == 0
                                        else rng.normal(size=(13, 5)) for i in range(6)]

    def unguarded(w, a1, b1, a2, b2, a3, b3):
        return np.sum(np.sin(w) * (a1 @ b1 + a2 @ b2 + a3 @ b3))
    guarded_source = value_and_grad(summed_products).source(*args)
    assert "np.concatenate" not in guarded_source
    if passes.ENABLED:
        assert "np.concatenate" in value_and_grad(unguarded).source(*args)
