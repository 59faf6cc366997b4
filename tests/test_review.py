"""Regression tests for problems a code review found: aliasing, cache keys, nested
transforms, trees, stop_gradient, standalone guards, threads and error messages."""

import collections
import math
import subprocess
import sys
import threading

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen.api import emit_functions

RNG = np.random.default_rng(3)


# ---- gradients are arrays of their own ---------------------------------------------------
@pytest.mark.parametrize("f", [lambda W: np.sum(W.T), lambda W: W.ravel().mean(),
                               lambda W: np.sum(W[:, :, None])])
def test_gradients_are_writable_and_contiguous_enough(f):
    g = ad.grad(f)(np.ones((2, 3)))
    assert g.flags.writeable and 0 not in g.strides
    g *= 0.1


def test_gradients_do_not_share_memory_with_each_other():
    def f(x, y):
        return np.sum(np.exp(x.T + y.reshape(3, 2)))
    gx, gy = ad.grad(f, argnums=(0, 1))(RNG.normal(size=(2, 3)), RNG.normal(size=6))
    assert not np.shares_memory(gx, gy)


def test_jvp_tangent_is_writable():
    _, t = ad.jvp(lambda s: np.broadcast_to(s, (3,)).reshape(3, 1), (np.array(1.0),),
                  (np.array(1.0),))
    t += 1.0


# ---- cache keys ------------------------------------------------------------------------------
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


def test_one_compile_per_key_under_threads():
    f = ad.grad(lambda x: np.sum(np.tanh(x) ** 2))
    barrier = threading.Barrier(6)
    results = []

    def call():
        barrier.wait()
        results.append(f(np.ones(4)))
    threads = [threading.Thread(target=call) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert f.cache_info().misses == 1 and len(results) == 6


def test_defaulted_argument_under_argnums():
    def f(x, y=2.0):
        return np.sum(x * y)
    assert ad.grad(f, argnums=1)(np.ones(3)) == 3.0


# ---- nested transforms and trees -------------------------------------------------------------
def test_mixed_partial_through_a_python_float():
    x = RNG.normal(size=3)

    def f(x, s):
        return np.sum(x * x) * s
    inner = ad.grad(f, argnums=0)
    mixed = ad.grad(lambda s: np.sum(inner(x, s)))(1.5)
    assert np.isclose(mixed, np.sum(2 * x))


def test_returning_an_outer_value_from_an_inner_function_is_refused():
    def outer(s):
        return ad.grad(lambda z: s)(np.ones(2))
    with pytest.raises(ad.TracingError, match="enclosing transformation"):
        ad.grad(outer)(1.0)


def test_jvp_checks_the_tangent_tree():
    f = lambda p: p["a"] * 1.0 + p["b"] * 10.0
    p = {"a": np.array(1.0), "b": np.array(1.0)}
    _, t = ad.jvp(f, (p,), ({"a": np.array(1.0), "b": np.array(0.0)},))
    assert t == 1.0
    with pytest.raises(ad.ArgumentError, match="structure"):
        ad.jvp(f, (p,), ({"b": np.array(0.0), "a": np.array(1.0)},))
    with pytest.raises(ad.ArgumentError, match="structure"):
        ad.jvp(lambda t: t[0] + t[1], ((np.ones(1), np.ones(1)),), ((np.ones(1),),))


def test_vjp_and_grad_of_mixed_trees():
    point = collections.namedtuple("Point", "x y")
    g = ad.grad(lambda p: p.x * p.y)(point(2.0, 3.0))
    assert type(g) is point and g == (3.0, 2.0)
    out, vjp_fn = ad.vjp(lambda p: p["w"] * p["idx"], {"w": 2.0, "idx": 3})
    assert out == 6.0
    (cot,) = vjp_fn(np.float64(1.0))
    assert cot["w"] == 3.0 and cot["idx"] is None
    grads = ad.grad(lambda p: p["W"].sum())({"W": np.ones(2), "act": "tanh"})
    assert grads["act"] is None


def test_complex_arguments_are_refused_under_argnums():
    with pytest.raises(ad.ArgumentError, match="real floating-point"):
        ad.grad(lambda z: np.sum(np.abs(z) ** 2))(np.ones(2, complex))


def test_stop_gradient_holds_in_nested_derivatives_and_trees():
    def f(x):
        return np.sum(x * ad.stop_gradient(x))
    x = np.array([1.0, 2.0])
    df = ad.grad(f)
    np.testing.assert_allclose(ad.grad(lambda x: np.sum(df(x)))(x), [0.0, 0.0])
    np.testing.assert_allclose(ad.hessian(f)(x), np.zeros((2, 2)))
    g = ad.grad(lambda x: np.sum(ad.stop_gradient((x, x))[0] * x))(x)
    np.testing.assert_allclose(g, x)


# ---- standalone modules and generated source -----------------------------------------------
def _ruff(source):
    return subprocess.run([sys.executable, "-m", "ruff", "check", "--isolated", "--no-cache",
                           "--stdin-filename", "gen.py", "-"], input=source, text=True,
                          capture_output=True, check=False)


@pytest.mark.parametrize("static", [float("inf"), float("nan"), -0.5, "relu", True])
def test_standalone_guards_lint_and_run(static):
    source = ad.emit(lambda x, s: np.sum(x * x), np.ones(2), static, standalone=True)
    assert _ruff(source).returncode == 0, _ruff(source).stdout
    scope = {}
    exec(compile(source, "gen.py", "exec"), scope)  # noqa: S102  generated code
    value, _ = scope["f_value_and_grad"](np.ones(2), static)
    assert value == 2.0


def test_no_unused_numpy_import():
    source = ad.emit(lambda x: x * x, np.array(2.0), standalone=True)
    assert "import numpy" not in source and _ruff(source).returncode == 0


def test_a_later_function_parameter_does_not_shadow_a_shared_constant():
    C = np.arange(1.0, 4.0)

    def f1(x):
        return np.sum(x * C)

    def f2(const, x):
        return np.sum(x * C) + np.sum(const)
    source, names = emit_functions([(ad.grad(f1), (np.ones(3),)),
                                    (ad.grad(f2, argnums=1), (np.ones(3), np.ones(3)))])
    scope = {}
    exec(source, scope)  # noqa: S102  generated code
    np.testing.assert_allclose(scope[names[1]](np.zeros(3), np.ones(3))[1], C)


def test_source_describes_object_arguments_without_addresses():
    def act(v):
        return v
    source = ad.emit(lambda x, a: np.sum(a(x)), np.ones(2), act)
    assert "0x" not in source


# ---- errors name the user's line -------------------------------------------------------------
def test_unknown_ndarray_attribute_names_the_line():
    with pytest.raises(AttributeError, match=r"test_review.py:\d+: .*\.byteswap"):
        ad.grad(lambda x: x.byteswap().sum())(np.ones(2))


def test_numpy_errors_inside_a_primitive_carry_the_line():
    with pytest.raises(ValueError) as info:
        ad.grad(lambda x: (x @ np.ones((3, 2))).sum())(np.ones(2))
    if hasattr(info.value, "__notes__"):
        assert "test_review.py:" in info.value.__notes__[0]


def test_jacobian_of_an_integer_argument_is_refused():
    with pytest.raises(ad.ArgumentError, match="floating-point"):
        ad.jacobian(lambda x, i: x * i, argnums=1)(np.ones(2), np.arange(2))
    np.testing.assert_array_equal(ad.jacfwd(lambda x: x * 2)(np.ones(0)), np.zeros((0, 0)))


def test_concatenate_with_axis_none():
    a, b = np.ones((2, 2)), np.ones(3)
    ga, gb = ad.grad(lambda a, b: np.sum(np.concatenate([a, b], axis=None) ** 2),
                     argnums=(0, 1))(a, b)
    np.testing.assert_allclose(ga, 2 * a)
    np.testing.assert_allclose(gb, 2 * b)


# ---- a second review: passes, memory plan, invariance, scalar code -----------------------
def test_hessian_through_code_whose_intermediates_depend_on_constants_only():
    C, E, D = np.random.default_rng(21).standard_normal((3, 50))

    def f(x):
        return np.sum(C * (E * (np.tanh(x) * D + np.sin(x))))
    g = ad.grad(f)
    x = RNG.normal(size=50)
    H = ad.hessian(f)(x)
    eps = 1e-6
    column = (g(x + eps * np.eye(50)[3]) - g(x - eps * np.eye(50)[3])) / (2 * eps)
    np.testing.assert_allclose(H[:, 3], column, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("make", [
    lambda C: (lambda x: np.sum(np.reshape(x, (C.size,)) * C)),   # a view of a constant
    lambda C: (lambda x: np.sum(x * np.einsum("ij->ji", C.reshape(50, 40)).reshape(-1))),
    lambda C: (lambda x: np.sum(x)),                               # a broadcast seed
])
def test_gradients_never_share_memory_with_constants_and_are_writable(make):
    C = np.arange(2000.0)
    f = ad.grad(make(C))
    g = f(np.ones(2000))
    g *= 0.0
    np.testing.assert_array_equal(C, np.arange(2000.0))
    assert f(np.ones(2000)).any()


def test_softmax_shift_is_kept_when_an_intermediate_is_the_output():
    def f(z):
        s = z - np.max(z, axis=0, keepdims=True)
        return np.sum(np.log(np.sum(np.exp(s), axis=0, keepdims=True)))  # logsumexp - max
    from autodiffgen.testing import check_grads
    check_grads(f, RNG.normal(size=(2, 3)))


def test_cse_tells_closures_apart_and_passes_ignore_user_primitive_names():
    def make_scale(k):
        @ad.primitive
        def scale(x):
            return k * x
        ad.defvjp(scale, lambda g, ans, x: g * k)
        return scale
    s2, s3 = make_scale(2.0), make_scale(3.0)
    value, grad = ad.value_and_grad(lambda x: np.sum(s2(x) + s3(x) ** 2))(np.array([1.0, 2.0]))
    assert value == 51.0
    np.testing.assert_allclose(grad, [20.0, 38.0])

    @ad.primitive
    def negative(x):  # named like the built-in: not to be simplified as one
        return np.maximum(-x, 0.0)
    ad.defvjp(negative, lambda g, ans, x: -g * (x < 0))
    x = np.array([0.5, 1.5])
    value, _ = ad.value_and_grad(lambda x: np.sum(negative(negative(x))))(x)
    assert value == 0.0


def test_memory_plan_respects_views_made_by_user_primitives():
    @ad.primitive
    def flip_t(x):
        return x.T
    ad.defvjp(flip_t, lambda g, ans, x: g.T)

    def f(x):
        a = np.sin(x)
        v = flip_t(a)
        b = a * 2.0
        return np.sum(b * v.T)
    x = RNG.normal(size=(3, 3))
    value, _ = ad.value_and_grad(f)(x)
    assert np.isclose(value, f(x))


def test_python_float_booleans_follow_numpy():
    def f(x):
        return x * (np.greater(x, 0) + np.greater(x, 1))  # np.bool_ + np.bool_ is True
    value, g = ad.value_and_grad(f)(2.0)
    assert value == 2.0 and g == 1.0
