"""np.all, np.any, np.isclose, np.allclose, np.array_equal and np.array_equiv on traced
values: NumPy's tests written with traced comparisons (all and any count the elements
that are not, or are, true). np.iscomplex and np.isreal are with the complex numbers
(elementwise.py).

isclose gives a traced boolean array, computed again by the
generated code. allclose, array_equal and array_equiv give a Python bool, read from a
traced np.all(...) through Box.__bool__: like `if x.sum() > 0:`, that read is a guard
the generated code checks, so a call whose data decides otherwise traces the other path.
"""

import numpy as np

from ...trace.recording import bind
from ..indices import count_nonzero
from .dispatch import boxmethod, check_no_out, normalize_axis, register_function


def _counted(a, axis, out, keepdims, where, name):
    check_no_out(out, f"np.{name}", {"where": where} if where is not True else None)
    return bind(count_nonzero, (a,), {"axis": normalize_axis(axis, np.ndim(a)),
                                      "keepdims": bool(keepdims)})


@register_function(np.all)
@boxmethod("all")
def _all(a, axis=None, out=None, keepdims=False, *, where=True):
    return np.equal(_counted(np.logical_not(a), axis, out, keepdims, where, "all"), 0)


@register_function(np.any)
@boxmethod("any")
def _any(a, axis=None, out=None, keepdims=False, *, where=True):
    return np.greater(_counted(a, axis, out, keepdims, where, "any"), 0)


@register_function(np.isclose)
def _isclose(x, y, rtol=1.0e-5, atol=1.0e-8, equal_nan=False):
    """|a - b| <= atol + rtol * |b| where both are finite, or a == b (equal infinities).
    The difference is taken of the finite elements only: inf - inf would warn."""
    finite = np.logical_and(np.isfinite(x), np.isfinite(y))
    a, b = np.where(finite, x, 0), np.where(finite, y, 0)
    near = np.logical_and(np.less_equal(np.abs(a - b), atol + rtol * np.abs(b)), finite)
    close = np.logical_or(near, np.equal(x, y))
    if equal_nan:
        close = np.logical_or(close, np.logical_and(np.isnan(x), np.isnan(y)))
    return close


@register_function(np.allclose)
def _allclose(a, b, rtol=1.0e-5, atol=1.0e-8, equal_nan=False):
    return bool(np.all(_isclose(a, b, rtol, atol, equal_nan)))


@register_function(np.array_equal)
def _array_equal(a1, a2, equal_nan=False):
    if np.shape(a1) != np.shape(a2):  # shapes are known when tracing
        return False
    same = np.equal(a1, a2)
    if equal_nan:
        same = np.logical_or(same, np.logical_and(np.isnan(a1), np.isnan(a2)))
    return bool(np.all(same))


@register_function(np.array_equiv)
def _array_equiv(a1, a2):
    try:
        np.broadcast_shapes(np.shape(a1), np.shape(a2))
    except ValueError:
        return False
    return bool(np.all(np.equal(a1, a2)))

