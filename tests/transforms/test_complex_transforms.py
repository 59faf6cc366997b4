"""jvp, vjp, Jacobians, Hessians and nested grads of functions with complex arguments,
complex values inside, or complex outputs, from generated code and the tape, against
central finite differences (Autograd's convention: rules/complex_numbers.py)."""

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen import tape

RNG = np.random.default_rng(12)
EPS = 1e-6


def _z(*shape):
    return RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)


def holomorphic(z):
    return np.exp(z) * np.sin(z) / (z + 3.0) + z @ np.ones((3, 3)) * 0.5j


def mixed(z):
    """Not holomorphic: conj, abs, angle, real parts; a complex output."""
    return np.conj(z) * z ** 2 + np.abs(z) * np.angle(z) + np.fft.fft(z).real * 1j


def differenced(f, primals, tangents):
    plus = [p + EPS * t for p, t in zip(primals, tangents, strict=True)]
    minus = [p - EPS * t for p, t in zip(primals, tangents, strict=True)]
    return (np.asarray(f(*plus)) - np.asarray(f(*minus))) / (2 * EPS)


@pytest.mark.parametrize("f", [holomorphic, mixed], ids=["holomorphic", "mixed"])
def test_jvp_of_complex_functions(f):
    z, v = _z(3), _z(3)
    for _ in range(2):  # a second call with new data runs the cached code
        out, t = ad.jvp(f, (z,), (v,))
        out_tape, t_tape = tape.jvp(f, (z,), (v,))
        np.testing.assert_allclose(out, f(z))
        np.testing.assert_allclose(t, differenced(f, [z], [v]), rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(t_tape, t, rtol=1e-10)
        np.testing.assert_allclose(out_tape, out)
        assert t.dtype == np.complex128
        z, v = _z(3), _z(3)


def test_jvp_of_a_python_complex_has_its_tangent():
    """It used to be a constant: a zero tangent, silently."""
    f = lambda z, x: np.sin(z) * x + z ** 2
    x = RNG.standard_normal(3)
    for z, v in ((1.0 + 2.0j, 1j), (0.5 - 0.3j, 0.2 + 1.0j)):
        _, t = ad.jvp(f, (z, x), (v, np.zeros(3)))
        np.testing.assert_allclose(t, (np.cos(z) * x + 2 * z) * v)
        _, t = tape.jvp(f, (z, x), (v, np.zeros(3)))
        np.testing.assert_allclose(t, (np.cos(z) * x + 2 * z) * v)


def test_vjp_is_the_transpose_in_autograd_s_convention():
    """<u, J v> and <vjp(u), v> agree as real inner products: Re(sum(conj(u) * J v)) =
    Re(sum(vjp(conj(u)) * v)), the identity Autograd's own check uses."""
    for f in (holomorphic, mixed):
        z = _z(3)
        out, vjp_fn = ad.vjp(f, z)
        np.testing.assert_allclose(out, f(z))
        for _ in range(2):
            u, v = _z(3), _z(3)
            (g,) = vjp_fn(np.conj(u))
            assert g.dtype == np.complex128
            jv = differenced(f, [z], [v])
            np.testing.assert_allclose(np.real(np.sum(g * v)), np.real(np.sum(np.conj(u) * jv)),
                                       rtol=1e-6)


def test_vjp_of_a_pytree_with_complex_leaves_is_each_leaf_s():
    """A tuple or dict output with complex leaves (Autograd's checks of functions of
    several complex arguments take such VJPs): each leaf's cotangent reaches the
    arguments as that leaf's own VJP would take it, in the generated code and the tape."""
    def f(z, w):
        return {"p": z * w, "s": (np.sin(z), np.sum(np.abs(w)))}
    for _ in range(2):  # a second call with new data runs the cached code
        z, w = _z(3), _z(3)
        out, vjp_fn = ad.vjp(f, z, w)
        _, vjp_tape = tape.vjp(f, z, w)
        u = {"s": (_z(3), 0.7), "p": _z(3)}  # keys in another order: the same pytree
        gz, gw = vjp_fn(u)
        expected_z = ad.vjp(np.multiply, z, w)[1](u["p"])[0] \
            + ad.vjp(np.sin, z)[1](u["s"][0])[0]
        expected_w = ad.vjp(np.multiply, z, w)[1](u["p"])[1] \
            + ad.vjp(lambda w: np.sum(np.abs(w)), w)[1](0.7)[0]
        np.testing.assert_allclose(gz, expected_z, rtol=1e-12)
        np.testing.assert_allclose(gw, expected_w, rtol=1e-12)
        for g, h in zip((gz, gw), vjp_tape(u), strict=True):
            np.testing.assert_allclose(g, h, rtol=1e-12)
        np.testing.assert_allclose(out["p"], z * w)


def test_vjp_of_a_holomorphic_function_is_its_derivative():
    z = _z(4)
    _, vjp_fn = ad.vjp(lambda z: np.exp(z) * z, z)
    (g,) = vjp_fn(np.ones(4, complex))
    np.testing.assert_allclose(g, np.exp(z) * (z + 1))
    _, vjp_fn = ad.vjp(lambda z: np.exp(z) * z, z.astype(np.complex64))
    assert vjp_fn(np.ones(4, np.complex64))[0].dtype == np.complex64


def test_vjp_of_a_real_argument_is_real():
    x = RNG.standard_normal(4)
    _, vjp_fn = ad.vjp(lambda x: np.fft.fft(x) * np.exp(1j * x), x)
    u = _z(4)
    (g,) = vjp_fn(np.conj(u))
    assert g.dtype == np.float64
    v = RNG.standard_normal(4)
    jv = differenced(lambda x: np.fft.fft(x) * np.exp(1j * x), [x], [v])
    np.testing.assert_allclose(np.sum(g * v), np.real(np.sum(np.conj(u) * jv)), rtol=1e-6)


def spectral_loss(x):
    return np.sum(np.abs(np.fft.rfft(x * x[::-1])) ** 2 * np.arange(4.0)) \
        + np.sum(np.angle(np.fft.fft(x) + 2.0))


def test_jacobian_hessian_and_hvp_through_complex_values():
    x = RNG.standard_normal(6)
    J = ad.jacobian(lambda x: np.abs(np.fft.fft(x)))(x)
    np.testing.assert_allclose(J, np.stack([differenced(lambda x: np.abs(np.fft.fft(x)), [x],
                                                        [e]) for e in np.eye(6)], axis=1),
                               rtol=1e-5, atol=1e-6)
    H = ad.hessian(spectral_loss)(x)
    g = ad.grad(spectral_loss)
    np.testing.assert_allclose(H, np.stack([differenced(g, [x], [e]) for e in np.eye(6)]),
                               rtol=1e-5, atol=1e-5)
    v = RNG.standard_normal(6)
    np.testing.assert_allclose(ad.hvp(spectral_loss, (x,), (v,)), H @ v, rtol=1e-6, atol=1e-8)


def test_grad_of_grad_of_a_complex_argument():
    """grad(abs) is a complex function of z; its own gradient (of its real part) is
    checked against differences in both directions."""
    dabs = ad.grad(np.abs)
    d2 = ad.grad(lambda z: np.real(dabs(z)))
    for z in (1.1 + 1.3j, -0.4 + 0.2j):
        fd = (np.real(dabs(z + EPS)) - np.real(dabs(z - EPS))) / (2 * EPS) \
            - 1j * (np.real(dabs(z + 1j * EPS)) - np.real(dabs(z - 1j * EPS))) / (2 * EPS)
        np.testing.assert_allclose(d2(z), fd, rtol=1e-6, atol=1e-8)
    assert d2.cache_info().misses == 1


def test_reverse_jacobian_of_a_complex_output_is_complex():
    """Each row from two VJPs: the real part and the imaginary part (it was the real part
    alone)."""
    x = RNG.standard_normal(3)
    f = lambda x: np.exp(1j * x) * x[::-1] + np.fft.fft(x)
    J = ad.jacobian(f)(x)
    assert J.dtype == np.complex128
    np.testing.assert_allclose(J, ad.jacfwd(f)(x), rtol=1e-12)
    np.testing.assert_allclose(J, np.stack([differenced(f, [x], [e]) for e in np.eye(3)],
                                           axis=1), rtol=1e-6, atol=1e-8)


def test_jacobian_of_a_complex_argument_is_refused_clearly():
    with pytest.raises(ad.ArgumentError, match="floating-point"):
        ad.jacobian(np.exp)(_z(2))
