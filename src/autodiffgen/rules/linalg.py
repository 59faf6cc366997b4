"""np.linalg's primitives: inv, det, slogdet, solve, cholesky, eigh, pinv, svd.

Every primitive works on stacks of matrices (the last two axes), as NumPy does, and its
rules are written with matmul, solve and inv, so a rule is itself differentiable (second
derivatives). Functions that return several arrays (slogdet, eigh, svd) are one
primitive per part, each with its own rules. eigh reads one triangle (UPLO) of its
input and mirrors it; its derivatives are those of that function, so a tangent is the
read triangle mirrored, and a cotangent is nonzero only in that triangle (what finite
differences of np.linalg.eigh give, for a non-symmetric input too). cholesky reads the
lower triangle, and its derivatives are those of that function in the same way (at a
symmetric input, the symmetric part of its gradient is Autograd's and JAX's). svd is the reduced
one, differentiable where the singular values are distinct and nonzero. How the
np.linalg functions reach these, and np.linalg.norm (composed of traced ops, no rule of
its own), is numpy_api/linalg.py.

Complex matrices, under rules/complex_numbers.py's convention (a VJP is the transpose of
the JVP for the pairing Re sum(g * t), without conjugate): inv, det and solve are
holomorphic, so their rules serve unchanged; the others have transposes that become
conjugate transposes (`_H`) where the JVP conjugates (JAX's JVPs, Autograd's VJPs). eigh
and cholesky read a Hermitian matrix from one triangle and the real part of the diagonal
(LAPACK ignores its imaginary part). Each singular vector pair and eigenvector has a free
phase: as in Autograd and JAX, U's derivative takes the phase change that keeps A = U S V^H
(an imaginary diagonal term, i Im(U^H dA V)_ii / s_i) and V and eigh's vectors none, so a
function that does not depend on those phases (|U|, U S V^H, v v^H) is differentiated
correctly. slogdet's sign of a complex matrix is the phase of its determinant, with its
derivative. Real inputs take exactly the real formulas (`_H` is then `_T`, `_conj` and
`_re` the identity).
"""

import numpy as np

from ..trace.boxes import result_dtype
from .registry import defprimitive


def _T(x):
    return np.swapaxes(x, -1, -2)


def _sym(x):
    return (x + _T(x)) / 2


def _mat(x):
    """A stack of scalars as a stack of 1x1 matrices, to broadcast against matrices."""
    return np.expand_dims(x, (-2, -1))


def _trace_of_product(a, b):
    """trace(a @ b) over the last two axes, without forming the product."""
    return np.sum(_T(a) * b, axis=(-2, -1))


def _eye(x):
    return np.eye(np.shape(x)[-1], dtype=result_dtype(x))


def _complex(x):
    return result_dtype(x).kind == "c"


def _H(x):
    """The conjugate transpose (of a real x, the transpose)."""
    return np.conj(_T(x)) if _complex(x) else _T(x)


def _conj(x):
    return np.conj(x) if _complex(x) else x


def _re(x):
    """The real part of a complex x (a real quantity's tangent), a real x as it is."""
    return np.real(x) if _complex(x) else x


def _real_eye(x):
    """The identity in x's real precision (float32 for complex64)."""
    return np.eye(np.shape(x)[-1], dtype=np.finfo(result_dtype(x)).dtype)


# ---- inverse, determinant, solve ----------------------------------------------------------
inv = defprimitive("inv", np.linalg.inv, "np.linalg.inv({0})",
                   vjps=[lambda g, ans, a: -(_T(ans) @ g @ _T(ans))],
                   jvps=[lambda t, ans, a: -(ans @ t @ ans)])
det = defprimitive("det", np.linalg.det, "np.linalg.det({0})",
                   vjps=[lambda g, ans, a: _mat(g * ans) * _T(inv(a))],
                   jvps=[lambda t, ans, a: ans * _trace_of_product(inv(a), t)])


def _sign_vjp(g, ans, a):
    """d sign = sign * i Im tr(A^-1 dA) for a complex A (the phase of det A); a real
    sign is locally constant."""
    if not _complex(a):
        return None
    return _mat(1j * np.imag(g * ans)) * _T(inv(a))


def _sign_jvp(t, ans, a):
    if not _complex(a):
        return None
    return ans * (1j * np.imag(_trace_of_product(inv(a), t)))


slogdet_sign = defprimitive("slogdet_sign", lambda a: np.linalg.slogdet(a)[0],
                            "np.linalg.slogdet({0})[0]", vjps=[_sign_vjp], jvps=[_sign_jvp])
logabsdet = defprimitive("logabsdet", lambda a: np.linalg.slogdet(a)[1],
                         "np.linalg.slogdet({0})[1]",
                         vjps=[lambda g, ans, a: _mat(g) * _T(inv(a))],
                         jvps=[lambda t, ans, a: _re(_trace_of_product(inv(a), t))])


def _column(b, x):
    """solve's right-hand side as a stack of matrices: a vector b becomes one column."""
    return np.expand_dims(x, -1) if np.ndim(b) == 1 else x


def _uncolumn(b, x):
    return np.squeeze(x, -1) if np.ndim(b) == 1 else x


def _solve_a(g, ans, a, b):
    gb = solve(_T(a), _column(b, g))
    return -(gb @ _T(_column(b, ans)))


def _solve_b(g, ans, a, b):
    return _uncolumn(b, solve(_T(a), _column(b, g)))


solve = defprimitive("solve", np.linalg.solve, "np.linalg.solve({0}, {1})",
                     vjps=[_solve_a, _solve_b],
                     jvps=[lambda t, ans, a, b: -_uncolumn(b, solve(a, t @ _column(b, ans))),
                           lambda t, ans, a, b: solve(a, t)])


# ---- eigh --------------------------------------------------------------------------------
def _gaps(w):
    """F[i, j] = 1 / (w[j] - w[i]) off the diagonal, 0 on it (distinct eigenvalues)."""
    eye = _eye(w)
    return (1 - eye) / (np.expand_dims(w, -2) - np.expand_dims(w, -1) + eye)


def _read_triangle(t, UPLO):
    """The matrix eigh sees of `t`: its UPLO triangle, mirrored (NumPy never reads the
    other one), so a tangent of the input is one of that symmetric matrix. Complex: the
    strict triangle and its conjugate transpose, and the real part of the diagonal."""
    part, k = (np.tril, -1) if UPLO == "L" else (np.triu, 1)
    if _complex(t):
        strict = part(t, k)
        return strict + _H(strict) + np.real(t) * _real_eye(t)
    return part(t) + _T(part(t, k))


def _onto_triangle(g, UPLO):
    """The transpose of _read_triangle: a cotangent of the symmetric (Hermitian) matrix
    eigh sees, as one of the input, nonzero only in the triangle read (each off-diagonal
    element there stands for two of the symmetric matrix)."""
    part, k = (np.tril, -1) if UPLO == "L" else (np.triu, 1)
    if _complex(g):
        return part(g + _H(g), k) + np.real(g) * _real_eye(g)
    return part(g + _T(g), k) + g * _eye(g)


def _eigh_vectors_vjp(g, ans, a, UPLO):
    w = eigh_values(a, UPLO=UPLO)
    return _onto_triangle(_conj(ans) @ (_gaps(w) * (_T(ans) @ g)) @ _T(ans), UPLO)


def _eigh_vectors_jvp(t, ans, a, UPLO):
    """V (F * V^H dH V): the phase of each eigenvector left unchanged."""
    w = eigh_values(a, UPLO=UPLO)
    return ans @ (_gaps(w) * (_H(ans) @ _read_triangle(t, UPLO) @ ans))


def _eigh_values_vjp(g, ans, a, UPLO):
    v = eigh_vectors(a, UPLO=UPLO)
    return _onto_triangle((_conj(v) * np.expand_dims(g, -2)) @ _T(v), UPLO)


def _eigh_values_jvp(t, ans, a, UPLO):
    v = eigh_vectors(a, UPLO=UPLO)
    return _re(np.sum(_conj(v) * (_read_triangle(t, UPLO) @ v), axis=-2))


def _eigh_template(part):
    def template(params):
        uplo = "" if params["UPLO"] == "L" else ", UPLO={UPLO}"
        return f"np.linalg.eigh({{0}}{uplo})[{part}]"
    return template


eigh_values = defprimitive("eigh_values", lambda a, UPLO: np.linalg.eigh(a, UPLO)[0],
                           _eigh_template(0), vjps=[_eigh_values_vjp], jvps=[_eigh_values_jvp])
eigh_vectors = defprimitive("eigh_vectors", lambda a, UPLO: np.linalg.eigh(a, UPLO)[1],
                            _eigh_template(1), vjps=[_eigh_vectors_vjp],
                            jvps=[_eigh_vectors_jvp])


# ---- cholesky ----------------------------------------------------------------------------
def _phi(x):
    """The lower triangle of x with its diagonal halved."""
    n = np.shape(x)[-1]
    return x * (np.tri(n, dtype=result_dtype(x)) - 0.5 * np.eye(n, dtype=result_dtype(x)))


def _cholesky_vjp(g, ans, a):
    """sym(L^-T phi(L^T g) L^-1) (Murray 2016), with the triangular solves done by solve:
    the cotangent of the symmetric matrix NumPy factors, put in the lower triangle it
    reads. Complex: L^-T phi(L^T g) conj(L)^-1, onto the Hermitian matrix's triangle."""
    lt = _T(ans)
    if _complex(ans):
        return _onto_triangle(solve(lt, _T(solve(_H(ans), _T(_phi(lt @ g))))), "L")
    return _onto_triangle(_sym(solve(lt, _T(solve(lt, _T(_phi(lt @ g)))))), "L")


def _cholesky_jvp(t, ans, a):
    """L phi(L^-1 s L^-H), s the tangent's lower triangle mirrored (what NumPy reads)."""
    return ans @ _phi(solve(ans, _H(solve(ans, _read_triangle(t, "L")))))


cholesky = defprimitive("cholesky", np.linalg.cholesky, "np.linalg.cholesky({0})",
                        vjps=[_cholesky_vjp], jvps=[_cholesky_jvp])


# ---- pinv (full rank) --------------------------------------------------------------------
def _pinv_vjp(g, ans, a):
    """The transpose of the JVP below (Golub and Pereyra 1973), for full-rank a."""
    x, xc, ac, gt = ans, _conj(ans), _conj(a), _H(g)
    xxt, xtx = xc @ _T(x), _T(x) @ xc
    return (-(_T(x) @ g @ _T(x)) + (gt - ac @ (xc @ gt)) @ xxt
            + xtx @ (gt - (gt @ xc) @ ac))


def _pinv_jvp(t, ans, a):
    """-X t X + X X^H t^H (I - A X) + (I - X A) t^H X^H X, with X = pinv(a)."""
    x, tt = ans, _H(t)
    return (-(x @ t @ x) + x @ _H(x) @ (tt - (tt @ a) @ x)
            + (tt - x @ (a @ tt)) @ _H(x) @ x)


pinv = defprimitive("pinv", np.linalg.pinv, "np.linalg.pinv({0})", vjps=[_pinv_vjp],
                    jvps=[_pinv_jvp])


# ---- svd (reduced; distinct, nonzero singular values) ------------------------------------
def _svd_gaps(s):
    """F[i, j] = 1 / (s[j]**2 - s[i]**2) off the diagonal, 0 on it."""
    eye = _eye(s)
    row, col = np.expand_dims(s, -2), np.expand_dims(s, -1)
    return (1 - eye) / ((row + col) * (row - col) + eye)


def _phase_term(p, s):
    """i Im(p_ii) / s_i on the diagonal: the change of U's phases that keeps U S V^H = A
    when V's are left alone (complex matrices only)."""
    return 1j * np.imag(p) * _eye(s) / np.expand_dims(s, -2)


def _svd_values_vjp(g, ans, a):
    return (_conj(svd_u(a)) * np.expand_dims(g, -2)) @ _conj(svd_vh(a))


def _svd_values_jvp(t, ans, a):
    return _re(np.sum(_conj(svd_u(a)) * (t @ _H(svd_vh(a))), axis=-2))


def _svd_u_vjp(g, ans, a):
    u, s, vh = ans, svd_values(a), _conj(svd_vh(a))
    x = _svd_gaps(s) * (_T(u) @ g)
    inner = (x + _H(x)) * np.expand_dims(s, -2)
    if _complex(a):
        inner = inner + _phase_term(_T(u) @ g, s)
    grad = _conj(u) @ inner @ vh
    if np.shape(a)[-2] > np.shape(a)[-1]:  # U's columns do not span the output space
        grad = grad + ((g - _conj(u) @ (_T(u) @ g)) / np.expand_dims(s, -2)) @ vh
    return grad


def _svd_u_jvp(t, ans, a):
    u, s, v = ans, svd_values(a), _H(svd_vh(a))
    p = _H(u) @ t @ v
    ps = p * np.expand_dims(s, -2)
    du = u @ (_svd_gaps(s) * (ps + _H(ps)))
    if _complex(a):
        du = du + u @ _phase_term(p, s)
    if np.shape(a)[-2] > np.shape(a)[-1]:
        tv = t @ v
        du = du + (tv - u @ (_H(u) @ tv)) / np.expand_dims(s, -2)
    return du


def _svd_vh_vjp(g, ans, a):
    u, s, v, gv = _conj(svd_u(a)), svd_values(a), _H(ans), _H(g)
    y = _svd_gaps(s) * (_conj(ans) @ gv)
    grad = u @ ((y + _H(y)) * np.expand_dims(s, -1)) @ _conj(ans)
    if np.shape(a)[-1] > np.shape(a)[-2]:  # V's columns do not span the input space
        gt = _T(g) if _complex(a) else gv
        grad = grad + u @ _T((gt - v @ (ans @ gt)) / np.expand_dims(s, -2))
    return grad


def _svd_vh_jvp(t, ans, a):
    u, s, v = svd_u(a), svd_values(a), _H(ans)
    p = _H(u) @ t @ v
    sp = np.expand_dims(s, -1) * p
    dv = v @ (_svd_gaps(s) * (sp + _H(sp)))
    if np.shape(a)[-1] > np.shape(a)[-2]:
        tu = _H(t) @ u
        dv = dv + (tu - v @ (ans @ tu)) / np.expand_dims(s, -2)
    return _H(dv)


svd_values = defprimitive("svd_values", lambda a: np.linalg.svd(a, compute_uv=False),
                          "np.linalg.svd({0}, compute_uv=False)", vjps=[_svd_values_vjp],
                          jvps=[_svd_values_jvp])
svd_u = defprimitive("svd_u", lambda a: np.linalg.svd(a, full_matrices=False)[0],
                     "np.linalg.svd({0}, full_matrices=False)[0]", vjps=[_svd_u_vjp],
                     jvps=[_svd_u_jvp])
svd_vh = defprimitive("svd_vh", lambda a: np.linalg.svd(a, full_matrices=False)[2],
                      "np.linalg.svd({0}, full_matrices=False)[2]", vjps=[_svd_vh_vjp],
                      jvps=[_svd_vh_jvp])
