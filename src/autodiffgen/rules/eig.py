"""np.linalg.eig of a general square matrix (or a stack of them): its eigenvalues and
eigenvectors as two primitives, complex for most real inputs.

With A = U diag(w) U^-1 and P = U^-1 dA U: dw = diag(P), and dU = U (F * P) plus, for
each column, the multiple of itself that keeps its norm 1 (NumPy's normalization), where
F[i, j] = 1 / (w[j] - w[i]) off the diagonal. Each column's phase is left free, as in
Autograd: a function of the eigenvectors is differentiated correctly when it does not
depend on their phases (|U|, U * conj(U), or real eigenvectors, whose sign is fixed).
The VJPs are the transposes under rules/complex_numbers.py's convention; a real A takes
the real part. Whether NumPy returns complex or real arrays depends on the values:
numpy_api/eig.py guards it.
"""

import numpy as np

from ..trace.recording import RAISES
from .linalg import _T, solve
from .registry import defprimitive


def _gaps(w):
    """F[..., i, j] = 1 / (w[j] - w[i]), 0 on the diagonal (distinct eigenvalues)."""
    n = np.shape(w)[-1]
    eye = np.eye(n, dtype=bool)
    diff = np.expand_dims(w, -2) - np.expand_dims(w, -1)
    return np.where(eye, 0, 1 / np.where(eye, 1, diff))


def _diagonal(m):
    return np.sum(m * np.eye(np.shape(m)[-1]), axis=-1)


def _back(a, u, x):
    """U^-T x U^T: a cotangent of P = U^-1 dA U brought back to A."""
    return solve(_T(u), x @ _T(u))


def _values_vjp(g, ans, a):
    u = eig_vectors(a)
    return _back(a, u, np.expand_dims(g, -1) * np.eye(np.shape(g)[-1]))


def _values_jvp(t, ans, a):
    u = eig_vectors(a)
    return _diagonal(solve(u, t @ u))


def _vectors_vjp(g, ans, a):
    u, w = ans, eig_values(a)
    f = _gaps(w)
    ug = _T(u) @ g
    r = np.real(np.sum(u * g, axis=-2))  # Re diag(U^T g): the norm constraint's share
    return _back(a, u, f * ug - f * ((_T(u) @ np.conj(u)) * np.expand_dims(r, -2)))


def _vectors_jvp(t, ans, a):
    u, w = ans, eig_values(a)
    du = u @ (_gaps(w) * solve(u, t @ u))
    c = np.real(np.sum(np.conj(u) * du, axis=-2))
    return du - u * np.expand_dims(c, -2)


eig_values = defprimitive("eig_values", lambda a: np.linalg.eig(a)[0],
                          "np.linalg.eig({0})[0]", vjps=[_values_vjp], jvps=[_values_jvp])
eig_vectors = defprimitive("eig_vectors", lambda a: np.linalg.eig(a)[1],
                           "np.linalg.eig({0})[1]", vjps=[_vectors_vjp], jvps=[_vectors_jvp])
RAISES.update(dict.fromkeys(["eig_values", "eig_vectors"], np.linalg.LinAlgError))
