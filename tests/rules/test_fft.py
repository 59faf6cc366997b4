"""np.fft against the dynamic tape and central finite differences (real and imaginary
directions), in reverse and forward mode, as in test_complex.py: one table, `CASES`, a
subset with float32 / complex64 inputs, second derivatives, ruff over the generated
source. Covers every function of Autograd's list with n, s, axes and norm, odd lengths
(which Autograd refuses for the real transforms) and lengths cut or padded by n and s.
"""

import numpy as np
import pytest
import tables
from tables import normal
from tables import shape_id as _id
from tables import sum_sin as _s

import autodiffgen
from autodiffgen import tape


def cnormal(*shape):
    return lambda rng: rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


def _c(z):
    """A real loss of both parts, with cotangents that differ element to element."""
    return np.sum(np.sin(np.real(z)) + np.cos(1.3 * np.imag(z)))


CASES = []


def case(name, f, *args, argnums=0, **check):
    CASES.append(tables.Case(name, f, args, argnums, check))


# ---- complex transforms: fft, ifft, fft2, ifft2, fftn, ifftn ----------------------------
for _name in ("fft", "ifft"):
    _fn = getattr(np.fft, _name)
    for _norm in (None, "backward", "ortho", "forward"):
        case(f"{_name}-norm{_norm}", lambda x, fn=_fn, norm=_norm: _c(fn(x, norm=norm)),
             normal(5, 5))
    case(f"{_name}-complex", lambda z, fn=_fn: _c(fn(z)), cnormal(6))
    case(f"{_name}-axis0", lambda z, fn=_fn: _s(fn(z, axis=0)), cnormal(4, 3))
    case(f"{_name}-n-smaller", lambda x, fn=_fn: _c(fn(x, 3)), normal(5, 5))
    case(f"{_name}-n-bigger", lambda x, fn=_fn: _c(fn(x, 7, norm="ortho")), cnormal(5, 5))
    case(f"{_name}-0d-scale", lambda x, s, fn=_fn: _c(fn(x * s)), normal(4), normal(),
         argnums=(0, 1))
for _name in ("fft2", "ifft2", "fftn", "ifftn"):
    _fn = getattr(np.fft, _name)
    case(f"{_name}", lambda x, fn=_fn: _c(fn(x)), normal(4, 5))
    case(f"{_name}-complex-3d", lambda z, fn=_fn: _c(fn(z, norm="ortho")), cnormal(2, 3, 4))
    case(f"{_name}-s-axes", lambda x, fn=_fn: _c(fn(x, s=[7, 3], axes=[0, 2])),
         normal(5, 5, 5))
    case(f"{_name}-negative-axes", lambda z, fn=_fn: _s(fn(z, axes=(-1, -3))),
         cnormal(3, 2, 4))
case("fftn-s-without-axes-last-axes", lambda x: _c(np.fft.fftn(x, s=(3, 2), axes=(1, 2))),
     normal(2, 4, 4))
case("fftn-one-axis", lambda z: _c(np.fft.fftn(z, axes=(1,))), cnormal(2, 5))

# ---- real transforms: rfft, irfft and their 2-D and n-D forms ----------------------------
for _n in (4, 5):  # even and odd lengths
    for _norm in (None, "ortho", "forward"):
        case(f"rfft-{_n}-norm{_norm}", lambda x, norm=_norm: _c(np.fft.rfft(x, norm=norm)),
             normal(3, _n))
        case(f"irfft-{2 * _n - 2}-norm{_norm}",
             lambda z, norm=_norm, n=_n: _c(np.fft.irfft(z, 2 * n - 2, norm=norm)),
             cnormal(3, _n))
    case(f"irfft-odd-{2 * _n - 1}", lambda z, n=_n: _c(np.fft.irfft(z, 2 * n - 1)),
         cnormal(_n))
for _size in (2, 6):
    case(f"rfft-n{_size}", lambda x, n=_size: _c(np.fft.rfft(x, n)), normal(4, 4))
    case(f"irfft-n{_size}", lambda z, n=_size: _c(np.fft.irfft(z, n)), cnormal(4, 3))
case("rfft-axis0", lambda x: _c(np.fft.rfft(x, axis=0)), normal(4, 3))
case("irfft-axis0", lambda z: _c(np.fft.irfft(z, axis=0)), cnormal(3, 4))
case("irfft-of-real-input", lambda x: _c(np.fft.irfft(x)), normal(5))
case("irfft-hermitian-input", lambda x: _c(np.fft.irfft(np.fft.rfft(x) * (1 + 0.5j))),
     normal(4, 4))
for _name in ("rfft2", "rfftn"):
    _fn = getattr(np.fft, _name)
    case(_name, lambda x, fn=_fn: _c(fn(x)), normal(4, 4))
    case(f"{_name}-odd-3d", lambda x, fn=_fn: _c(fn(x, axes=(0, 2))), normal(3, 2, 5))
    case(f"{_name}-s-axes", lambda x, fn=_fn: _c(fn(x, s=[6, 2], axes=[0, 2])),
         normal(4, 4, 4))
for _name in ("irfft2", "irfftn"):
    _fn = getattr(np.fft, _name)
    case(_name, lambda z, fn=_fn: _c(fn(z)), cnormal(4, 3))
    case(f"{_name}-s-axes", lambda z, fn=_fn: _c(fn(z, s=[6, 5], axes=[0, 2])),
         cnormal(4, 4, 4))
    case(f"{_name}-norm-ortho", lambda z, fn=_fn: _c(fn(z, axes=(1, 2), norm="ortho")),
         cnormal(2, 3, 3))
case("rfftn-subset", lambda x: _c(np.fft.rfftn(x)[[0, 1, 0], [3, 3, 2]]), normal(4, 4, 4))
case("irfftn-subset", lambda z: _c(np.fft.irfftn(z, axes=(0, 1, 2))[[0, 1, 0], [3, 3, 2]]),
     cnormal(4, 4, 3))

# ---- shifts ---------------------------------------------------------------------------------
for _name in ("fftshift", "ifftshift"):
    _fn = getattr(np.fft, _name)
    for _shape in ((5, 5), (4, 4), (3, 4, 5)):
        case(f"{_name}-{_id(_shape)}", lambda x, fn=_fn: _s(fn(x)), normal(*_shape))
    case(f"{_name}-axes1", lambda x, fn=_fn: _s(fn(x, axes=1)), normal(5, 5))
    case(f"{_name}-axes-tuple-complex", lambda z, fn=_fn: _c(fn(z, axes=(0, -1))),
         cnormal(3, 2, 5))

# ---- compositions: a convolution, a spectrum, a shifted spectrum -----------------------------
case("convolution", lambda x, k: _s(np.fft.irfft(np.fft.rfft(x) * np.fft.rfft(k), n=6)),
     normal(6), normal(6), argnums=(0, 1))
case("power-spectrum", lambda x: np.sum(np.abs(np.fft.fft(x)) ** 2 * np.arange(8.0)), normal(8))
case("shifted-spectrum", lambda x: _c(np.fft.fftshift(np.fft.fft2(x)) * np.exp(x)),
     normal(4, 5))
case("round-trip", lambda z: _c(np.fft.ifftn(np.fft.fftn(z) * np.arange(1.0, 4.0))),
     cnormal(2, 3))

BY_NAME = tables.by_name(CASES)


# ---- the tests --------------------------------------------------------------------------
@pytest.mark.parametrize("c", CASES, ids=[c.name for c in CASES])
def test_gradients(c):
    tables.check_gradients(c)


SINGLE = ["fft-complex", "ifft-n-bigger", "fft2-s-axes", "rfft-5-normNone", "irfft-6-normNone",
          "rfftn-s-axes", "irfftn-s-axes", "fftshift-3x4x5", "convolution"]


@pytest.mark.parametrize("name", SINGLE)
def test_single_precision_gradients_keep_their_dtype(name):
    tables.check_single_precision(BY_NAME[name])


HESSIAN = {
    "fft": lambda x: np.sum(np.abs(np.fft.fft(x * x[::-1])) ** 2 * np.arange(6.0)),
    "rfft-irfft": lambda x: _s(np.fft.irfft(np.fft.rfft(x) ** 2, n=6)),
    "rfft-odd": lambda x: np.sum(np.abs(np.fft.rfft(np.sin(x), n=5)) ** 3),
    "fftn-shift": lambda x: _c(np.fft.fftshift(np.fft.fftn(np.reshape(x, (2, 3)) ** 2))),
}


@pytest.mark.parametrize("name", list(HESSIAN))
def test_second_derivatives(name):
    x = tables.rng_for(name).standard_normal(6) * 0.5
    tables.check_hessian(HESSIAN[name], x, symmetry={"rtol": 1e-7, "atol": 1e-9})


ruff_report = tables.ruff_report_fixture(CASES, "generated_fft")


@pytest.mark.parametrize("i", range(len(CASES)), ids=[c.name for c in CASES])
def test_generated_source_passes_ruff(i, ruff_report):
    ruff_report.check(i, CASES[i])


# ---- the emitted form, new data, batch sizes, errors --------------------------------------
def test_emitted_calls_read_as_numpy_s():
    source = autodiffgen.emit(lambda x: _c(np.fft.rfft(x, n=6, axis=0, norm="ortho")),
                              np.ones((4, 3)))
    assert "np.fft.rfft(x, n=6, axis=0, norm='ortho')" in source
    source = autodiffgen.emit(lambda z: _c(np.fft.ifft2(z)), np.ones((2, 3), complex))
    assert "np.fft.ifftn(z, axes=(0, 1))" in source


def test_new_data_and_batch_sizes_reuse_or_retrace_correctly():
    """A transform along the batch axis: its length is the batch size, so each size has
    its own code; new data of one size runs the same code."""
    def f(w, x):
        spectrum = np.fft.rfft(x * w, axis=0)
        return np.sum(np.abs(spectrum) ** 2) + _c(np.fft.fft(x * w, axis=1))
    g = autodiffgen.grad(f)
    rng = np.random.default_rng(0)
    w = rng.standard_normal(3)
    for n in (8, 6, 5, 8, 7, 8):
        x = rng.standard_normal((n, 3))
        np.testing.assert_allclose(g(w, x), tape.grad(f)(w, x), rtol=1e-10, atol=1e-12)
    assert g.cache_info().hits == 2


def test_repeated_axes_are_refused():
    with pytest.raises(autodiffgen.UnsupportedOperationError, match="repeated axis"):
        autodiffgen.grad(lambda x: _c(np.fft.fft2(x, axes=(0, 0))))(np.ones((3, 3)))


def test_out_is_refused():
    with pytest.raises(autodiffgen.TracingError, match="out="):
        autodiffgen.grad(lambda x: _c(np.fft.fft(x, out=np.empty(3, complex))))(np.ones(3))
