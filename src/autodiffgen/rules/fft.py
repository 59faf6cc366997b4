"""np.fft: four primitives, the complex transform and its inverse (fftn, ifftn) and the
real ones (rfftn, irfftn), over normalized axes with the transform lengths `s` (None: the
input's own) and `norm`. numpy_api/fft.py writes fft, fft2, ifft... as these (fft along
one axis is fftn over that axis) and fftshift and ifftshift as np.roll.

Every transform is linear over the reals, so its JVP is itself applied to the tangent.
Its VJP is its transpose (rules/complex_numbers.py: no conjugate in Autograd's
convention). The DFT matrix is symmetric, so the transpose of a complex transform is the
same transform of the cotangent, cut or padded with zeros back to the input's length
where `s` changed it. rfftn keeps the first n // 2 + 1 rows of the DFT: its transpose
pads the cotangent back to n and transforms it (the real part is unbroadcast's). irfftn
reads the first n // 2 + 1 coefficients, each but the first (and the Nyquist one, for an
even n) twice, as a coefficient and its conjugate: its transpose is the inverse
transform of the cotangent, those rows kept and weighted by 2.
"""

import numpy as np

from ..graph import Index
from .assembly import pad
from .indexing import getitem
from .registry import defprimitive


def _template(name, single):
    def template(params):
        extra = "" if params["norm"] is None else ", norm={norm}"
        axes, s = params["axes"], params["s"]
        if len(axes) == 1:
            n = "" if s is None else f", n={s[0]}"
            return f"np.fft.{single}({{0}}{n}, axis={axes[0]}{extra})"
        sizes = "" if s is None else ", s={s}"
        return f"np.fft.{name}({{0}}{sizes}, axes={{axes}}{extra})"
    return template


def resize(g, shape, axes):
    """g cut or padded with zeros along `axes` to the sizes in `shape`: the transpose of
    what a transform's `s` does to its input."""
    cut = [slice(None)] * np.ndim(g)
    widths = [(0, 0)] * np.ndim(g)
    for ax in axes:
        have, want = np.shape(g)[ax], shape[ax]
        if have > want:
            cut[ax] = slice(0, want)
        elif have < want:
            widths[ax] = (0, want - have)
    if any(c != slice(None) for c in cut):
        g = getitem(g, index=Index(cut))
    if any(w != (0, 0) for w in widths):
        g = pad(g, pad_width=tuple(widths), constant_values=0)
    return g


def _c2c_vjp(g, ans, x, s, axes, norm, inverse):
    return resize((ifftn if inverse else fftn)(g, s=None, axes=axes, norm=norm),
                  np.shape(x), axes)


def _rfftn_vjp(g, ans, x, s, axes, norm):
    n = s[-1] if s is not None else np.shape(x)[axes[-1]]
    lengths = tuple(np.shape(g)[ax] for ax in axes[:-1]) + (n,)
    return resize(fftn(g, s=lengths, axes=axes, norm=norm), np.shape(x), axes)


def _hermitian_weights(n, m, ndim, axis, dtype):
    """2 for the coefficients irfft reads twice, 1 for the first and the Nyquist one."""
    w = np.full(m, 2.0, dtype)
    w[0] = 1.0
    if n % 2 == 0:
        w[-1] = 1.0
    return np.reshape(w, (m,) + (1,) * (ndim - axis - 1))


def _irfftn_vjp(g, ans, x, s, axes, norm):
    n = np.shape(ans)[axes[-1]]
    m = n // 2 + 1
    c = ifftn(g, s=None, axes=axes, norm=norm)
    cut = [slice(None)] * np.ndim(c)
    cut[axes[-1]] = slice(0, m)
    c = getitem(c, index=Index(cut)) * _hermitian_weights(n, m, np.ndim(c), axes[-1], g.dtype)
    return resize(c, np.shape(x), axes)


def _impl(fn):
    return lambda x, s, axes, norm: fn(x, s=s, axes=axes, norm=norm)


_PARAMS = None  # the template writes s (n) and norm where given
fftn = defprimitive("fftn", _impl(np.fft.fftn), _template("fftn", "fft"), _PARAMS,
                    vjps=[lambda g, ans, x, **p: _c2c_vjp(g, ans, x, inverse=False, **p)],
                    linear_in=(0,))
ifftn = defprimitive("ifftn", _impl(np.fft.ifftn), _template("ifftn", "ifft"), _PARAMS,
                     vjps=[lambda g, ans, x, **p: _c2c_vjp(g, ans, x, inverse=True, **p)],
                     linear_in=(0,))
rfftn = defprimitive("rfftn", _impl(np.fft.rfftn), _template("rfftn", "rfft"), _PARAMS,
                     vjps=[_rfftn_vjp], linear_in=(0,))
irfftn = defprimitive("irfftn", _impl(np.fft.irfftn), _template("irfftn", "irfft"), _PARAMS,
                      vjps=[_irfftn_vjp], linear_in=(0,))
