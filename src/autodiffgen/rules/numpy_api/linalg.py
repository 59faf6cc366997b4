"""np.linalg on traced values: inv, det, slogdet, solve, cholesky (upper= too), eigh,
eigvalsh, pinv, svd, svdvals record the primitives of rules/linalg.py, returning NumPy's
result types (SlogdetResult, EighResult, SVDResult); norm is composed of elementwise ops,
reductions and singular values, and needs no rule of its own.
"""

import numpy as np

from ...errors import UnsupportedOperationError, at
from ...trace.boxes import result_dtype
from ...trace.context import user_loc
from ..complex_numbers import abs2
from ..linalg import (
    cholesky,
    det,
    eigh_values,
    eigh_vectors,
    inv,
    logabsdet,
    pinv,
    slogdet_sign,
    solve,
    svd_u,
    svd_values,
    svd_vh,
)
from .dispatch import register_function

_SlogdetResult = type(np.linalg.slogdet(np.eye(1)))
_EighResult = type(np.linalg.eigh(np.eye(1)))
_SVDResult = type(np.linalg.svd(np.eye(1)))


@register_function(np.linalg.inv)
def _inv(a):
    return inv(a)


@register_function(np.linalg.det)
def _det(a):
    return det(a)


@register_function(np.linalg.slogdet)
def _slogdet(a):
    return _SlogdetResult(slogdet_sign(a), logabsdet(a))


@register_function(np.linalg.solve)
def _solve(a, b):
    return solve(a, b)


@register_function(np.linalg.cholesky)
def _cholesky(a, /, *, upper=False):
    if upper:  # NumPy reads the upper triangle: the lower one of a's transpose
        return np.swapaxes(cholesky(np.swapaxes(a, -1, -2)), -1, -2)
    return cholesky(a)


@register_function(np.linalg.eigh)
def _eigh(a, UPLO="L"):
    UPLO = UPLO.upper()
    return _EighResult(eigh_values(a, UPLO=UPLO), eigh_vectors(a, UPLO=UPLO))


@register_function(np.linalg.eigvalsh)
def _eigvalsh(a, UPLO="L"):
    return eigh_values(a, UPLO=UPLO.upper())


@register_function(np.linalg.pinv)
def _pinv(a, rcond=None, hermitian=False, **kwargs):
    if rcond is not None or hermitian or kwargs:
        raise UnsupportedOperationError(at(user_loc(), "np.linalg.pinv of a traced value is "
                                           "supported with its default rcond/rtol and "
                                           "hermitian=False only"))
    return pinv(a)


@register_function(np.linalg.svd)
def _svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    if hermitian:
        raise UnsupportedOperationError(at(user_loc(), "np.linalg.svd(..., hermitian=True) "
                                           "of a traced value is not supported; use eigh"))
    if not compute_uv:
        return svd_values(a)
    m, n = np.shape(a)[-2:]
    if full_matrices and m != n:
        raise UnsupportedOperationError(at(user_loc(), "np.linalg.svd of a traced non-square "
                                           "matrix needs full_matrices=False: the extra "
                                           "singular vectors are not unique"))
    return _SVDResult(svd_u(a), svd_values(a), svd_vh(a))


@register_function(np.linalg.svdvals)
def _svdvals(x, /):
    return svd_values(x)


# ---- norm: composed of elementwise ops and reductions ------------------------------------
@register_function(np.linalg.norm)
def _norm(x, ord=None, axis=None, keepdims=False):
    ndim = np.ndim(x)
    if axis is None and ord is None:  # the 2-norm of the flattened array
        return np.sqrt(np.sum(abs2(x), axis=None, keepdims=keepdims))
    if axis is None:
        if ndim not in (1, 2):
            raise ValueError(at(user_loc(), f"np.linalg.norm with ord={ord!r} and no axis "
                                "needs a 1-D or 2-D array"))
        axis = (0,) if ndim == 1 else (0, 1)
    if np.ndim(axis) == 0 or len(axis) == 1:
        axis = int(axis if np.ndim(axis) == 0 else axis[0]) % ndim
        return _vector_norm(x, ord, axis, keepdims)
    if len(axis) != 2:
        raise ValueError(at(user_loc(), f"np.linalg.norm: axis={axis!r} names more than two "
                            "axes"))
    return _matrix_norm(x, ord, tuple(int(a) % ndim for a in axis), keepdims)


def _vector_norm(x, ord, axis, keepdims):
    if ord is None or ord == 2:
        return np.sqrt(np.sum(abs2(x), axis=axis, keepdims=keepdims))
    if ord == np.inf:
        return np.max(np.abs(x), axis=axis, keepdims=keepdims)
    if ord == -np.inf:
        return np.min(np.abs(x), axis=axis, keepdims=keepdims)
    if ord == 0:
        return np.sum((x != 0).astype(result_dtype(x)), axis=axis, keepdims=keepdims)
    if ord == 1:
        return np.sum(np.abs(x), axis=axis, keepdims=keepdims)
    if ord in ("fro", "f", "nuc"):
        raise ValueError(at(user_loc(), f"np.linalg.norm: ord={ord!r} is a matrix norm; "
                            "a vector norm takes a number"))
    return np.sum(np.abs(x) ** ord, axis=axis, keepdims=keepdims) ** (1.0 / ord)


def _matrix_norm(x, ord, axes, keepdims):
    rows, cols = axes
    if ord in (None, "fro", "f"):
        return np.sqrt(np.sum(abs2(x), axis=axes, keepdims=keepdims))
    if ord in (1, -1, np.inf, -np.inf):
        inner, outer = (rows, cols) if ord in (1, -1) else (cols, rows)
        sums = np.sum(np.abs(x), axis=inner, keepdims=True)
        pick = np.max if ord > 0 else np.min
        result = pick(sums, axis=outer, keepdims=True)
        return result if keepdims else np.squeeze(result, axis=axes)
    if ord in ("nuc", 2, -2):  # from the singular values of the matrices at `axes`
        ndim = np.ndim(x)
        rest = [k for k in range(ndim) if k not in axes]
        s = svd_values(np.transpose(x, rest + [rows, cols]))
        result = np.sum(s, axis=-1) if ord == "nuc" else (np.max if ord == 2 else np.min)(
            s, axis=-1)
        return np.expand_dims(result, tuple(sorted(axes))) if keepdims else result
    raise ValueError(at(user_loc(), f"np.linalg.norm: invalid matrix norm order {ord!r}"))
