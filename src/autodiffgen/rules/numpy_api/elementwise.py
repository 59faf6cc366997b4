"""np.where, np.clip, np.round, np.sinc, np.nan_to_num, np.copy, real/imag/conj, and the
ndarray methods astype, copy, clip, round, __round__: NumPy's spellings of the primitives
in rules/elementwise.py (the ufuncs reach theirs through __array_ufunc__ directly).
"""

import numpy as np

from ...errors import TracingError, UnsupportedOperationError, at
from ...trace.boxes import Box, reader
from ...trace.context import user_loc
from ...trace.recording import bind
from ..complex_numbers import angle, imag, is_complex, real
from ..elementwise import astype, clip, conj, copy, nan_to_num, real_only, round_, sinc, where
from .dispatch import boxmethod, check_no_out, register_function


@register_function(np.where)
def _where(condition, x=None, y=None):
    if x is None and y is None:  # indices, as many as the data says (numpy_api.indices)
        return np.nonzero(condition)
    if x is None or y is None:
        raise TracingError(at(user_loc(), "np.where takes one argument (the indices where it "
                              "is true) or three (condition, x, y), not two"))
    return bind(where, (condition, x, y), {})


@register_function(np.clip)
def _clip(a, a_min=None, a_max=None, out=None, **kwargs):
    a_min = kwargs.pop("min", a_min)
    a_max = kwargs.pop("max", a_max)
    check_no_out(out, "np.clip", kwargs)
    return bind(clip, (a, a_min, a_max), {})


@boxmethod("clip")
def _clip_method(self, min=None, max=None, out=None):
    return _clip(self, min, max, out)


@boxmethod("astype")
def _astype_method(self, dtype, order="K", casting="unsafe", subok=True, copy=True):
    if not copy and np.dtype(dtype) == self.dtype and isinstance(self.value, np.ndarray):
        return self  # NumPy returns the array itself: a write into it is one into self
    return bind(astype, (self,), {"dtype": np.dtype(dtype)})


if hasattr(np, "astype"):  # NumPy 2's function form of the method
    @register_function(np.astype)
    def _astype(x, dtype, /, *, copy=True, device=None):
        return _astype_method(x, dtype, copy=copy)


@boxmethod("copy")
def _copy_method(self, order="C"):
    return bind(copy, (self,), {})


@register_function(np.copy)
def _copy(a, order="K", subok=False):
    return bind(copy, (a,), {})


# ---- round -------------------------------------------------------------------------------
@register_function(np.round, np.around)
def _round(a, decimals=0, out=None):
    check_no_out(out, "np.round")
    return bind(round_, (a,), {"decimals": int(decimals)})


@boxmethod("round")
def _round_method(self, decimals=0, out=None):
    return _round(self, decimals, out)


_round_to_int = reader("round", round)


@boxmethod("__round__")
def _python_round(self, ndigits=None):
    """Python's round(): an int for a NumPy scalar (read, and guarded), like NumPy's."""
    if ndigits is None and not isinstance(self.value, np.ndarray):
        return _round_to_int(self)
    return _round(self, 0 if ndigits is None else ndigits)


# ---- sinc and nan_to_num -----------------------------------------------------------------
register_function(np.sinc)(lambda x: bind(sinc, (x,), {}))


@register_function(np.nan_to_num)
def _nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """copy=False cannot write into a traced array; the result is the same either way."""
    if any(type(v) is Box for v in (nan, posinf, neginf)):
        raise UnsupportedOperationError(at(user_loc(), "np.nan_to_num with traced "
                                           "replacement values is not supported"))
    if not np.issubdtype(real_only(x, "np.nan_to_num").dtype, np.floating):
        return x  # integers and booleans are always finite
    return bind(nan_to_num, (x,), {"nan": float(nan),
                                   "posinf": None if posinf is None else float(posinf),
                                   "neginf": None if neginf is None else float(neginf)})


# ---- real, imag, conj, angle (rules/complex.py) ------------------------------------------
def _conj(x):
    return bind(conj, (x,), {})


boxmethod("conj", "conjugate")(_conj)


@register_function(np.real)
def _real(val):
    """The value itself for a real array, as NumPy's np.real gives it."""
    return bind(real, (val,), {}) if is_complex(val) else val


@register_function(np.imag)
def _imag(val):
    if is_complex(val):
        return bind(imag, (val,), {})
    return np.zeros(np.shape(val), val.dtype)  # a constant: no derivative


@register_function(np.angle)
def _angle(z, deg=False):
    out = bind(angle, (z,), {})
    return out * (180 / np.pi) if deg else out


boxmethod("real")(property(_real))
boxmethod("imag")(property(_imag))


# ---- predicates on complex numbers ---------------------------------------------------------
# a traced value's dtype is fixed by the trace (the inputs' dtypes are in the cache key,
# np.linalg.eig's is guarded), so these answer as plain Python bools
register_function(np.iscomplexobj)(is_complex)
register_function(np.isrealobj)(lambda x: not is_complex(x))


@register_function(np.iscomplex)
def _iscomplex(x):
    """Element by element, from the values: traced for a complex x."""
    if is_complex(x):
        return _imag(x) != 0
    return np.zeros(np.shape(x), bool)


@register_function(np.isreal)
def _isreal(x):
    if is_complex(x):
        return _imag(x) == 0
    return np.ones(np.shape(x), bool)
