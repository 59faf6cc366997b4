"""np.fft on traced values: fft, ifft, rfft, irfft (n, axis), their 2-D and n-D forms
(s, axes) and norm, as the four primitives of rules/fft.py over normalized axes;
fftshift and ifftshift as np.roll by half of each axis.
"""

import numpy as np

from ...errors import UnsupportedOperationError, at
from ...trace.context import user_loc
from ..fft import fftn, ifftn, irfftn, rfftn
from .dispatch import check_no_out, register_function

_NORMS = (None, "backward", "ortho", "forward")


def _norm(norm, name):
    if norm not in _NORMS:
        raise ValueError(at(user_loc(), f"np.fft.{name}: norm={norm!r} is not one of "
                            "'backward', 'ortho', 'forward'"))
    return None if norm == "backward" else norm


def _axes(x, s, axes, name):
    """NumPy's reading of (s, axes): every axis by default, or the last len(s); the
    lengths as ints (-1: the input's own), None where `s` is not given."""
    ndim = np.ndim(x)
    if axes is None:
        axes = range(ndim) if s is None else range(ndim - len(s), ndim)
    axes = tuple(int(a) % ndim if -ndim <= int(a) < ndim else _bad_axis(a, ndim, name)
                 for a in axes)
    if len(set(axes)) != len(axes):
        raise UnsupportedOperationError(at(user_loc(), f"np.fft.{name} over a repeated axis "
                                           f"{axes} has no derivative rule here"))
    if s is not None:
        if len(s) != len(axes):
            raise ValueError(at(user_loc(), f"np.fft.{name}: s and axes have different "
                                "lengths"))
        s = tuple(np.shape(x)[a] if int(n) == -1 else int(n) for n, a in zip(s, axes))
    return s, axes


def _bad_axis(a, ndim, name):
    raise np.exceptions.AxisError(at(user_loc(), f"np.fft.{name}: axis {a} is out of bounds "
                                     f"for an array of dimension {ndim}"))


def _one_axis(prim, name):
    def transform(a, n=None, axis=-1, norm=None, out=None):
        check_no_out(out, f"np.fft.{name}")
        s, axes = _axes(a, None if n is None else (n,), (axis,), name)
        return prim(a, s=s, axes=axes, norm=_norm(norm, name))
    return transform


def _many_axes(prim, name, default_axes):
    def transform(a, s=None, axes=default_axes, norm=None, out=None):
        check_no_out(out, f"np.fft.{name}")
        s, axes = _axes(a, s, axes, name)
        return prim(a, s=s, axes=axes, norm=_norm(norm, name))
    return transform


for _prim, _names in ((fftn, ("fft", "fft2", "fftn")), (ifftn, ("ifft", "ifft2", "ifftn")),
                      (rfftn, ("rfft", "rfft2", "rfftn")),
                      (irfftn, ("irfft", "irfft2", "irfftn"))):
    register_function(getattr(np.fft, _names[0]))(_one_axis(_prim, _names[0]))
    register_function(getattr(np.fft, _names[1]))(_many_axes(_prim, _names[1], (-2, -1)))
    register_function(getattr(np.fft, _names[2]))(_many_axes(_prim, _names[2], None))


def _shift(x, axes, sign):
    ndim = np.ndim(x)
    axes = tuple(range(ndim)) if axes is None else \
        (axes,) if np.ndim(axes) == 0 else tuple(axes)
    shift = [sign * (np.shape(x)[a] // 2) for a in axes]
    return np.roll(x, shift, axes)


register_function(np.fft.fftshift)(lambda x, axes=None: _shift(x, axes, 1))
register_function(np.fft.ifftshift)(lambda x, axes=None: _shift(x, axes, -1))
