"""Helpers that generated code calls. Pure NumPy: a standalone module copies them in."""

import numpy as np


class GuardFailure(Exception):
    """Raised by generated code when the arguments take another path than the traced one."""


def _scatter_add(g, index, shape, unique=False):
    """Zeros of `shape` with `g` added at `index` (the transpose of indexing).

    Whole rows of doubles picked by one integer array (an embedding's gradient) are
    summed by one np.bincount over their elements' flat offsets, in the rows' order:
    np.add.at takes about a microsecond per row (640 rows of 128 into 1000: 720 us
    against 160). Below 256 elements np.add.at's fewer calls win. np.bincount sums only
    in doubles, so single precision stays with np.add.at."""
    dtype = np.result_type(g)
    rows = index[0] if type(index) is tuple and len(index) == 1 else index
    if (not unique and type(rows) is np.ndarray and rows.dtype.kind in "iu"
            and np.can_cast(rows.dtype, np.intp) and dtype == np.double
            and g.size >= 256 and len(shape) >= 1
            and g.shape == rows.shape + tuple(shape[1:])):
        n, width = shape[0], int(np.prod(shape[1:], dtype=np.intp))
        # in np.intp: offsets rows * width in a uint8 or int16 index's own type would wrap
        rows = np.where(rows < 0, np.add(rows, n, dtype=np.intp), rows).reshape(-1, 1)
        offsets = (rows * width + np.arange(width)).ravel()
        total = np.bincount(offsets, weights=g.ravel(), minlength=n * width)
        return total.reshape(shape)
    out = np.zeros(shape, dtype=dtype)
    if unique:
        out[index] = g
    else:
        np.add.at(out, index, g)
    return out


def _add_at(x, index, g, unique=False, out=None):
    """x with g added at `index`: x plus the scatter of g there, without its array of
    zeros. Written into `out` when given (x itself: the memory plan found x dead here),
    else into a copy of x, which is left as it is. The method copies an array as np.copy
    does (its layout kept) in a third of np.copy's 0.45 us, the cost at small sizes."""
    if out is None:
        out = x.copy(order="K") if type(x) is np.ndarray else np.copy(x)
    elif out is not x:
        np.copyto(out, x)
    if unique:
        out[index] += g
    else:
        np.add.at(out, index, g)
    return out


def _setitem(x, index, v):
    """A copy of x with x[index] = v: assignment as a function, so the array it is given
    (perhaps the caller's) is never written. np.copy keeps x's memory layout, so views
    and reshapes of the result behave as they did on x (so does the method, faster)."""
    out = x.copy(order="K") if type(x) is np.ndarray else np.copy(x)
    out[index] = v
    return out


def _layout(x):
    """How x's memory is laid out, as far as a write through a reshape of x depends on it:
    "C", "F", "CF" (both, e.g. 1-d), or for any other layout its strides in bytes (two
    non-contiguous slices of one shape may still differ in which reshapes are views)."""
    c, f = x.flags.c_contiguous, x.flags.f_contiguous
    if c or f:
        return "C" * c + "F" * f
    return x.strides


def _getitem(x, index):
    """x[index], for a constant x indexed by computed arrays: as a call, a trace of the
    generated code (grad of grad, hessian) can follow it, as it cannot const[mask]."""
    return x[index]


def _stop_gradient(x):
    """x itself: generated code marks with this call a value no derivative flows through."""
    return x


scatter_add = _scatter_add  # for importers; generated code calls the _ names
stop_gradient = _stop_gradient
HELPERS = {"GuardFailure": GuardFailure, "_add_at": _add_at, "_getitem": _getitem, "_layout": _layout,
           "_scatter_add": _scatter_add, "_setitem": _setitem, "_stop_gradient": _stop_gradient}
