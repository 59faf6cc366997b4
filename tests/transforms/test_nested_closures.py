"""Inner transformations of functions that close over a value an outer one traces, and
Jacobians inside other transformations: each inner trace takes the closed-over value as
an input of its generated code (read again from the closure when the outer trace runs
that code), so derivatives with respect to it flow through the outer transformation and
never mix with the inner one's (no perturbation confusion). Checked against central
finite differences of the plain (eager) function and against the tape as the outer
engine."""

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen import tape

RNG = np.random.default_rng(1212)


def _fd_grad(f, x, eps=1e-6):
    """The gradient of a scalar f by central differences, element by element."""
    x = np.asarray(x, np.float64)
    g = np.zeros(x.shape)
    for k in range(x.size):
        e = np.zeros(x.shape)
        e.reshape(-1)[k] = eps
        g.reshape(-1)[k] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


def _check(outer, x, rtol=1e-6, atol=1e-8):
    """ad.grad(outer) against finite differences of outer run eagerly (the inner
    transformation then runs on plain arrays) and against tape.grad(outer); twice, so the
    second call runs the cached outer code on new data."""
    for _ in range(2):
        got = ad.grad(outer)(x)
        np.testing.assert_allclose(got, _fd_grad(outer, x), rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(got, tape.grad(outer)(x), rtol=rtol, atol=atol)
        x = x + RNG.normal(size=np.shape(x))
    return got


def test_no_perturbation_confusion():
    """d/dx [x * d/dy (x + y)] = 1 (2 would mix the two derivatives)."""
    assert ad.grad(lambda x: x * ad.grad(lambda y: x + y)(1.0))(1.0) == 1.0
    x = RNG.normal(size=3)
    got = ad.grad(lambda x: np.sum(x * ad.grad(lambda y: np.sum(x * y))(x)))(x)
    np.testing.assert_allclose(got, 2 * x)


def test_an_inner_function_of_python_floats_reading_an_outer_value():
    """The inner code for Python floats (math module) reads the outer x, a traced value
    there: it runs its NumPy twin, which the outer trace follows (math.sin of it, or the
    check that its values are finite, would call float() on it)."""
    got = ad.grad(lambda x: x * ad.grad(lambda y: np.sin(x) * y)(1.0))(1.0)
    assert got == pytest.approx(np.sin(1.0) + np.cos(1.0), rel=1e-14)


def test_an_inner_function_returning_the_closed_over_value():
    """The inner output is the outer value itself (read again from the closure by the
    inner code): its derivative is the outer one's."""
    def f(s):
        return ad.vjp(lambda z: (s, z * s), 1.5)[0][0] * 3.0 + ad.grad(lambda z: s * z)(2.0) * s
    assert ad.grad(f)(2.0) == tape.grad(f)(2.0) == 3.0 + 2 * 2.0


def _grad_of_closure(x):
    return np.sum(ad.grad(lambda y: np.sum(x * np.sin(y) ** 2))(x ** 2) * x)


def _jvp_of_closure(x):
    out, t = ad.jvp(lambda y: np.tanh(x * y), (np.cos(x),), (x,))
    return np.sum(out * t)


def _vjp_of_closure(x):
    out, vjp_fn = ad.vjp(lambda y: (np.exp(-x * y), np.sum(x) * y), x[::-1])
    (g,) = vjp_fn((x, np.ones_like(x)))
    return np.sum(g ** 2) + np.sum(out[0])


def _closure_over_a_dict(x):
    p = {"a": x * 2.0, "b": np.sum(x)}
    return np.sum(ad.grad(lambda y: np.sum(p["a"] * y ** 3) + p["b"] * np.sum(y))(x))


def _inner_at_a_constant(x):
    """The inner function's arguments are plain arrays; only its closure is traced."""
    return np.sum(ad.grad(lambda y: np.sum(np.sin(x * y)))(np.linspace(0.1, 0.4, 3)))


@pytest.mark.parametrize("outer", [_grad_of_closure, _jvp_of_closure, _vjp_of_closure,
                                   _closure_over_a_dict, _inner_at_a_constant])
def test_inner_transformation_of_a_closure(outer):
    _check(outer, RNG.normal(size=3))


def test_three_transformations_deep():
    """d/dz (x y z^2) = 2xyz at z = y; d/dy (2 x y^2) = 4xy at y = x; d/dx 4x^2 = 8x."""
    def middle(x):
        return ad.grad(lambda y: ad.grad(lambda z: x * y * z ** 2)(y))(x)
    assert np.isclose(ad.grad(middle)(0.7), 8 * 0.7)
    assert np.isclose(ad.grad(middle)(-1.3), 8 * -1.3)


def test_float32_stays_float32_through_a_closure():
    x = RNG.normal(size=3).astype(np.float32)
    g = ad.grad(_grad_of_closure)(x)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, ad.grad(_grad_of_closure)(x.astype(np.float64)), rtol=1e-4)


def test_the_tape_refuses_to_be_the_inner_transformation():
    x = np.ones(3)
    with pytest.raises(ad.TracingError, match="the tape .* does not nest"):
        ad.grad(lambda x: np.sum(tape.grad(lambda y: np.sum(x * y))(np.ones(3))))(x)
    with pytest.raises(ad.TracingError, match="the tape .* does not nest"):
        ad.grad(lambda x: np.sum(tape.grad(lambda y: np.sum(y ** 2))(x)))(x)


# ---- Jacobians inside other transformations ---------------------------------------------
def _vector(x):
    return np.sin(x) * np.sum(x ** 2) + x[::-1]


def _sum_of_jacobian(x):
    return np.sum(ad.jacobian(_vector)(x) ** 2)


def _sum_of_jacfwd(x):
    return np.sum(np.cos(ad.jacfwd(_vector)(x)))


def _sum_of_hessian(x):
    return np.sum(ad.hessian(lambda y: np.sum(np.sin(y) * y[0]))(x) * x)


def _jacobian_of_a_closure(x):
    return np.sum(ad.jacobian(lambda y: x * np.tanh(y))(x[::-1]) ** 2)


@pytest.mark.parametrize("outer", [_sum_of_jacobian, _sum_of_jacfwd, _sum_of_hessian,
                                   _jacobian_of_a_closure])
def test_jacobian_inside_grad(outer):
    _check(outer, RNG.normal(size=3))


@pytest.mark.parametrize("outer_jac", [ad.jacobian, ad.jacfwd])
@pytest.mark.parametrize("inner_jac", [ad.jacobian, ad.jacfwd])
def test_jacobian_of_a_jacobian(outer_jac, inner_jac):
    x = RNG.normal(size=3)
    got = outer_jac(inner_jac(_vector))(x)
    assert got.shape == (3, 3, 3)
    eps = 1e-6
    for k in range(3):
        e = np.zeros(3)
        e[k] = eps
        numeric = (ad.jacobian(_vector)(x + e) - ad.jacobian(_vector)(x - e)) / (2 * eps)
        np.testing.assert_allclose(got[..., k], numeric, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(got, np.swapaxes(got, 1, 2), atol=1e-10)  # mixed partials


def _my_jacobian(f, argnum=0):
    """A user's wrapper: under a trace, its default `argnum` is read as an input (a Box
    of the trace that calls the wrapper), and the Jacobian reads it there."""
    return ad.jacobian(f, argnums=argnum)


def _my_egrad(f, argnum=0):
    def call(x):
        out, vjp_fn = ad.transforms.VJPFunction(f, (argnum,))(x)
        return vjp_fn(np.ones_like(out))[0]
    return call


def test_argnums_read_from_a_traced_default():
    x = RNG.normal(size=3)
    got = ad.grad(lambda x: np.sum(_my_jacobian(_my_jacobian(_vector))(x)))(x)
    want = ad.grad(lambda x: np.sum(ad.jacobian(ad.jacobian(_vector))(x)))(x)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(got, _fd_grad(
        lambda x: np.sum(ad.jacobian(ad.jacobian(_vector))(x)), x), rtol=1e-5, atol=1e-7)
    third = _my_egrad(_my_egrad(_my_egrad(np.tanh)))(x)
    t = np.tanh(x)
    np.testing.assert_allclose(third, -2 * (1 - t ** 2) * (1 - 3 * t ** 2), rtol=1e-10)
