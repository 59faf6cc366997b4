"""np.linalg of complex matrices: svd (and the nuclear norm), eigh and eigvalsh, cholesky,
pinv and slogdet, with Autograd's convention (the gradient of a real L of z = x + iy is
dL/dx - i dL/dy).

One table, `CASES`, as in test_complex.py: each row goes through `check_grads` (generated
code, tape, central finite differences along the real and the imaginary direction of
each element, forward mode and the transposition test), a subset again with complex64
inputs, and every row's generated source must pass `ruff check`. Then second derivatives,
in reverse over reverse (the Hessian of a real parametrization) and forward over reverse
(the gradient differentiated again by check_grads).

Singular vectors and eigenvectors of complex matrices have a free phase each, which
finite differences of NumPy's functions do not see continuously: as in Autograd's tests,
vector losses here do not depend on those phases (|U|, U U^H, the rebuilt U S V^H). eigh
and cholesky read one triangle and the real part of the diagonal: rows take the input
made Hermitian and as it is.
"""

import numpy as np
import pytest
import tables
from tables import normal
from tables import shape_id as _id
from tables import sum_sin as _s

import autodiffgen
from autodiffgen import tape
from autodiffgen.testing import check_grads


# ---- argument domains: each is rng -> value -------------------------------------------------
def cnormal(*shape):
    return lambda rng: rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


def spread(*shape):
    """Complex matrices whose Hermitian parts have eigenvalues near 0, 2, 4, ...: apart."""
    n = shape[-1]
    return lambda rng: np.diag(2.0 * np.arange(n)) + 0.3 * cnormal(*shape)(rng)


def wellcond(*shape):
    """n * I plus a complex random part: Hermitian positive definite once made Hermitian."""
    n = shape[-1]
    return lambda rng: n * np.eye(n) + 0.3 * cnormal(*shape)(rng)


def _T(a):
    return np.swapaxes(a, -1, -2)


def _H(a):
    return np.conj(_T(a))


def _herm(a):
    return (a + _H(a)) / 2


def _c(z):
    """A real loss of both parts, with cotangents that differ element to element."""
    return np.sum(np.sin(np.real(z)) + np.cos(1.3 * np.imag(z)))


def _projector(u):
    """u u^H: the same for every phase of u's columns."""
    return u @ _H(u)


def _sign_times_log(a):
    sign, logabsdet = np.linalg.slogdet(a)
    return sign * logabsdet


def _rebuilt(a):
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    return (u * s[..., None, :]) @ vh


CASES = []


def case(name, f, *args, argnums=0, **check):
    CASES.append(tables.Case(name, f, args, argnums, check))


# ---- svd: values, U and Vh through phase-free functions, the nuclear norm ---------------
for _shape in [(4, 3), (3, 4), (3, 3), (2, 4, 2), (2, 2, 5)]:
    case(f"svd-values-{_id(_shape)}", lambda a: _s(np.linalg.svd(a, compute_uv=False)),
         cnormal(*_shape))
    case(f"svd-abs-u-{_id(_shape)}",
         lambda a: _s(np.abs(np.linalg.svd(a, full_matrices=False)[0])), cnormal(*_shape))
    case(f"svd-abs-vh-{_id(_shape)}",
         lambda a: _s(np.abs(np.linalg.svd(a, full_matrices=False).Vh) ** 2), cnormal(*_shape))
    case(f"svd-rebuilt-{_id(_shape)}", lambda a: _c(_rebuilt(a)), cnormal(*_shape))
    case(f"svd-u-projector-{_id(_shape)}",
         lambda a: _c(_projector(np.linalg.svd(a, full_matrices=False)[0])),
         cnormal(*_shape))
    case(f"svd-v-projector-{_id(_shape)}",
         lambda a: _c(_projector(_H(np.linalg.svd(a, full_matrices=False)[2]))),
         cnormal(*_shape))
case("svd-square-full-matrices",
     lambda a: _c(np.abs(np.linalg.svd(a)[0]) * np.linalg.svd(a)[1]), cnormal(3, 3))
case("svdvals", lambda a: _s(np.linalg.svdvals(a)), cnormal(3, 4))
case("svd-of-real-times-complex", lambda x: _s(np.linalg.svd(x * (1 + 2j) + 1j * x.T,
                                                             compute_uv=False)), normal(3, 3))
case("norm-nuc", lambda a: np.linalg.norm(a, "nuc"), cnormal(3, 4))
case("norm-nuc-axis", lambda a: _s(np.linalg.norm(a, "nuc", axis=(0, 2))), cnormal(3, 2, 4))
case("norm-2-matrix", lambda a: np.linalg.norm(a, 2), cnormal(4, 3))

# ---- eigh and eigvalsh: the Hermitian matrix read from one triangle ---------------------
for _uplo in ("L", "U"):
    case(f"eigh-values-{_uplo}", lambda a, u=_uplo: _s(np.linalg.eigh(_herm(a), u)[0]),
         spread(4, 4))
    case(f"eigh-abs-vectors-{_uplo}",
         lambda a, u=_uplo: _s(np.abs(np.linalg.eigh(_herm(a), u)[1])), spread(2, 3, 3))
    case(f"eigh-raw-{_uplo}", lambda a, u=_uplo: _s(np.linalg.eigh(a, UPLO=u)[0])
         + _s(np.abs(np.linalg.eigh(a, UPLO=u)[1]) ** 2), spread(4, 4))
    case(f"eigh-raw-projector-{_uplo}",
         lambda a, u=_uplo: _c(_projector(np.linalg.eigh(a, UPLO=u).eigenvectors[..., :2])),
         spread(4, 4))
    case(f"eigvalsh-raw-{_uplo}", lambda a, u=_uplo: _s(np.linalg.eigvalsh(a, UPLO=u)),
         spread(2, 3, 3))

# ---- cholesky: the lower triangle (upper=True: the upper one) -----------------------------
case("cholesky", lambda a: _c(np.linalg.cholesky(_herm(a))), wellcond(3, 3))
case("cholesky-raw", lambda a: _c(np.linalg.cholesky(a)), wellcond(2, 3, 3))
case("cholesky-raw-upper", lambda a: _c(np.linalg.cholesky(a, upper=True)), wellcond(4, 4))
case("cholesky-of-gram", lambda a: _c(np.linalg.cholesky(a @ _H(a) + np.eye(3))),
     cnormal(3, 4))

# ---- pinv, slogdet ------------------------------------------------------------------------
for _shape in [(4, 3), (3, 4), (3, 3), (2, 4, 2)]:
    case(f"pinv-{_id(_shape)}", lambda a: _c(np.linalg.pinv(a)), cnormal(*_shape))
case("slogdet-logabsdet", lambda a: _s(np.linalg.slogdet(a)[1]), wellcond(2, 3, 3))
case("slogdet-sign", lambda a: _c(np.linalg.slogdet(a).sign), wellcond(2, 3, 3))
case("slogdet-sign-times-logabsdet", lambda a: _c(_sign_times_log(a)), wellcond(3, 3))
case("slogdet-sign-of-real-times-complex",
     lambda x: _c(np.linalg.slogdet(x + 3j * np.eye(3))[0]), normal(3, 3))

BY_NAME = tables.by_name(CASES)


# ---- the tests --------------------------------------------------------------------------
@pytest.mark.parametrize("c", CASES, ids=[c.name for c in CASES])
def test_gradients(c):
    tables.check_gradients(c)


COMPLEX64 = ["svd-values-2x2x5", "svd-rebuilt-4x3", "svd-abs-vh-3x4", "eigh-raw-U",
             "cholesky-raw", "pinv-3x4", "slogdet-sign-times-logabsdet", "norm-nuc"]


@pytest.mark.parametrize("name", COMPLEX64)
def test_complex64_gradients_stay_complex64(name):
    tables.check_single_precision(BY_NAME[name])


ruff_report = tables.ruff_report_fixture(CASES, "generated_complex_linalg")


@pytest.mark.parametrize("i", range(len(CASES)), ids=[c.name for c in CASES])
def test_generated_source_passes_ruff(i, ruff_report):
    ruff_report.check(i, CASES[i])


# ---- second derivatives -------------------------------------------------------------------
def _complex_square(x, n=3):
    """An n x n complex matrix from 2 n^2 real numbers, diagonal pulled apart."""
    m = np.reshape(x[:n * n], (n, n)) + 1j * np.reshape(x[n * n:], (n, n))
    return m + np.diag(2.0 * np.arange(1.0, n + 1))


def _complex_wide(x):
    return np.reshape(x[:6], (2, 3)) + 1j * np.reshape(x[6:12], (2, 3)) + np.eye(2, 3)


HESSIAN = {
    "svd-values": lambda x: _s(np.linalg.svd(_complex_square(x), compute_uv=False)),
    "svd-abs-u": lambda x: _s(np.abs(np.linalg.svd(_complex_wide(x), full_matrices=False)[0])),
    "svd-rebuilt": lambda x: _c(_rebuilt(_complex_wide(x).T)),
    "norm-nuc": lambda x: np.linalg.norm(_complex_wide(x), "nuc"),
    "eigh-values-U": lambda x: _s(np.linalg.eigvalsh(_complex_square(x), UPLO="U")),
    "eigh-abs-vectors-L": lambda x: _s(np.abs(np.linalg.eigh(_complex_square(x))[1]) ** 2),
    "cholesky": lambda x: _c(np.linalg.cholesky(_complex_square(x) @ _H(_complex_square(x)))),
    "pinv": lambda x: _c(np.linalg.pinv(_complex_wide(x))),
    "slogdet": lambda x: _c(_sign_times_log(_complex_square(x))),
}


@pytest.mark.parametrize("name", list(HESSIAN))
def test_second_derivatives(name):
    """The Hessian (reverse over reverse) against differences of the gradient, and the
    same Hessian again forward over reverse."""
    f = HESSIAN[name]
    x = tables.rng_for(name).standard_normal(18) * 0.3
    tables.check_hessian(f, x, symmetry={"rtol": 1e-7, "atol": 1e-9})
    np.testing.assert_allclose(autodiffgen.jacfwd(autodiffgen.grad(f))(x),
                               autodiffgen.hessian(f)(x), rtol=1e-7, atol=1e-9)


GRAD_OF_GRAD = {
    "svd-abs-vh": (lambda a: _s(np.abs(np.linalg.svd(a, full_matrices=False)[2])),
                   cnormal(3, 4)),
    "eigh-raw-L": (lambda a: _s(np.linalg.eigvalsh(a) ** 2), spread(3, 3)),
    "cholesky-raw": (lambda a: _c(np.linalg.cholesky(a)), wellcond(3, 3)),
    "pinv": (lambda a: _c(np.linalg.pinv(a)), cnormal(4, 3)),
}


@pytest.mark.parametrize("name", list(GRAD_OF_GRAD))
def test_gradient_of_a_complex_argument_differentiated_again(name):
    """The gradient, a complex function of the complex matrix, through a real loss:
    checked by check_grads in reverse and forward mode."""
    f, make = GRAD_OF_GRAD[name]
    a = make(tables.rng_for(name))
    weights = np.arange(a.size).reshape(a.shape) % 3 - 1.0
    check_grads(lambda a: _c(autodiffgen.grad(f)(a) * weights), a, rtol=1e-4, atol=1e-6)


# ---- real matrices keep the real formulas ----------------------------------------------
@pytest.mark.parametrize("f", [
    lambda a: _s(np.linalg.svd(a, full_matrices=False)[0]),
    lambda a: _s(np.linalg.svd(a, full_matrices=False)[2]),
    lambda a: np.linalg.norm(a, "nuc"),
    lambda a: _s(np.linalg.eigh(a[:3, :3], UPLO="U")[1] ** 2),
    lambda a: _s(np.linalg.cholesky(a[:3, :3] @ a[:3, :3].T + np.eye(3))),
    lambda a: _s(np.linalg.pinv(a)),
    lambda a: np.linalg.slogdet(a[:3, :3] + 4 * np.eye(3))[1],
], ids=["svd-u", "svd-vh", "nuc", "eigh", "cholesky", "pinv", "slogdet"])
def test_real_matrices_take_no_conjugates(f):
    a = tables.rng_for("real-formulas").standard_normal((4, 3))
    for transform in (autodiffgen.emit, lambda f, a: autodiffgen.jvp(f, (a,), (a,))[1]):
        if transform is autodiffgen.emit:
            source = transform(f, a)
            assert "conj" not in source and "imag" not in source and "real" not in source
        else:
            assert np.isrealobj(transform(f, a))
    np.testing.assert_allclose(autodiffgen.grad(f)(a), tape.grad(f)(a), rtol=1e-12)
