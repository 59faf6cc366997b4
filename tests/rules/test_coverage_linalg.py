"""Linear algebra rules against the dynamic tape and central finite differences.

One table, `CASES`, as in test_rules.py: each row is checked by `check_grads` in reverse
and forward mode with the transposition test (float64), a subset again with float32
inputs, a subset for second derivatives (the generated Hessian against finite differences
of the generated gradient), and every row's generated source must pass `ruff check`.

Matrices are well conditioned (n * I plus a small random part). cholesky's and eigh's
rules are those of NumPy's functions, which read one triangle, so their rows take the
argument symmetrized and as it is. eigh's inputs have well-separated eigenvalues and its
eigenvector losses are invariant to each eigenvector's sign.
"""

import numpy as np
import pytest
import tables
from tables import normal
from tables import shape_id as _id
from tables import sum_sin as _s

import autodiffgen


# ---- argument domains beyond the shared ones (tables.py): each is rng -> value ----------
def wellcond(*shape):
    """A stack of n x n matrices n * I + 0.3 * noise: far from singular."""
    n = shape[-1]
    return lambda rng: n * np.eye(n) + 0.3 * rng.standard_normal(shape)


def negdet(*shape):
    """Well conditioned with a negative determinant (the first row flipped)."""
    def make(rng):
        a = wellcond(*shape)(rng)
        a[..., 0, :] *= -1
        return a
    return make


def spread(*shape):
    """Symmetric-ish matrices with eigenvalues near 1, 2, ..., n: gaps of about 1."""
    n = shape[-1]
    return lambda rng: np.diag(np.arange(1.0, n + 1)) + 0.1 * rng.standard_normal(shape)


def apart(*shape):
    """Values whose absolute values are at least 0.2 apart and nonzero, random signs."""
    def make(rng):
        size = int(np.prod(shape))
        mags = 0.3 * (rng.permutation(size) + 1) + rng.uniform(-0.05, 0.05, size)
        return (mags * rng.choice([-1.0, 1.0], size)).reshape(shape)
    return make


def _sym(a):
    return (a + np.swapaxes(a, -1, -2)) / 2


CASES = []


def case(name, f, *args, argnums=0, **check):
    CASES.append(tables.Case(name, f, args, argnums, check))


def pairs(op, fn, shape_pairs, dom_a=normal, dom_b=normal):
    for sa, sb in shape_pairs:
        case(f"{op}-{_id(sa)}-{_id(sb)}", lambda a, b, fn=fn: _s(fn(a, b)), dom_a(*sa),
             dom_b(*sb), argnums=(0, 1))


# ---- matmul, dot, vdot, inner, outer, tensordot -----------------------------------------
pairs("matmul", np.matmul, [((4,), (4,)), ((3, 4), (4,)), ((4,), (4, 3)), ((3, 4), (4, 2)),
                            ((2, 1, 3, 4), (5, 4, 2)), ((4,), (2, 4, 3)), ((3, 4), (2, 4, 5)),
                            ((2, 3, 4), (4,))])
pairs("dot", np.dot, [((2, 3, 4), (4,)), ((2, 3, 4), (5, 4, 2)), ((4,), (2, 4, 3)),
                      ((3, 4), (2, 4, 5)), ((2, 3), (3,)), ((), (2, 3, 4))])
pairs("dot-method", lambda a, b: a.dot(b), [((2, 3, 4), (4, 2))])
pairs("vdot", np.vdot, [((5,), (5,)), ((3, 4), (12,)), ((2, 3), (3, 2))])
pairs("inner", np.inner, [((4,), (4,)), ((3, 4), (5, 4)), ((2, 3, 4), (4,)), ((), (3,)),
                          ((4,), (2, 3, 4))])
pairs("outer", np.outer, [((3,), (4,)), ((2, 2), (3,))])
for _axes, _sa, _sb in [(2, (2, 3, 4), (3, 4, 5)), (1, (3, 4), (4, 2)), (0, (3,), (2, 2)),
                        (([1, 0], [0, 1]), (3, 4), (4, 3)), (([2], [0]), (2, 3, 4), (4, 5)),
                        ((1, 0), (3, 4), (4, 2)), (([-1], [0]), (2, 3), (3, 2)),
                        (([0, 2], [2, 1]), (2, 3, 4), (5, 4, 2))]:
    case(f"tensordot-{_axes}-{_id(_sa)}-{_id(_sb)}".replace(" ", ""),
         lambda a, b, axes=_axes: _s(np.tensordot(a, b, axes)), normal(*_sa), normal(*_sb),
         argnums=(0, 1))
case("tensordot-axes-keyword", lambda a, b: _s(np.tensordot(a, b, axes=([0], [1]))),
     normal(3, 2), normal(4, 3), argnums=(0, 1))

# ---- einsum: implicit output, ellipsis, repeated and lone indices -----------------------
_EINSUM = [("...ij,...jk->...ik", (2, 1, 3, 4), (5, 4, 2)), ("...ij,...jk->...ik", (3, 4), (2, 4, 2)),
           ("...i->...", (2, 3, 4)), ("...ij->...ji", (2, 3, 4)), ("...ij", (2, 3, 4)),
           ("i...->...", (3, 2, 2)), ("...i,...i", (2, 3), (3,)), ("ii->", (4, 4)),
           ("ii", (3, 3)), ("ii->i", (4, 4)), ("iij->j", (3, 3, 2)), ("bii->bi", (2, 3, 3)),
           ("ij->i", (3, 4)), ("ijk,kj->i", (2, 3, 4), (4, 3)), ("ii,i->i", (3, 3), (3,)),
           ("ii,jj->", (3, 3), (2, 2)), ("iji->j", (3, 2, 3)), ("ij,jk", (3, 4), (4, 2)),
           ("ji", (3, 4)), ("i,i,i->", (4,), (4,), (4,)), ("ij,ij->ij", (1, 3), (2, 3)),
           ("ij,k->", (2, 3), (4,)), ("ii,ij->j", (3, 3), (3, 2))]
for _spec, *_shapes in _EINSUM:
    case(f"einsum-{_spec.replace('->', '=')}-{'-'.join(map(_id, _shapes))}",
         lambda *ops, spec=_spec: _s(np.einsum(spec, *ops)), *[normal(*s) for s in _shapes],
         argnums=tuple(range(len(_shapes))))
case("einsum-same-operand-twice", lambda a: _s(np.einsum("ij,ij->i", a, a)), normal(3, 4))
case("einsum-trace-of-square", lambda a: _s(np.einsum("ij,ji", a, a)), normal(3, 3))
case("einsum-diagonal-constant-operand",
     lambda a: _s(np.einsum("ii,i->i", a, np.arange(1.0, 4.0))), normal(3, 3))

# ---- inv, det, slogdet, solve -----------------------------------------------------------
_SQUARE = [(1, 1), (3, 3), (2, 3, 3), (2, 2, 4, 4)]
for _shape in _SQUARE:
    case(f"inv-{_id(_shape)}", lambda a: _s(np.linalg.inv(a)), wellcond(*_shape))
    case(f"det-{_id(_shape)}", lambda a: _s(0.1 * np.linalg.det(a)), wellcond(*_shape))
    case(f"slogdet-{_id(_shape)}", lambda a: _s(np.linalg.slogdet(a)[1]), wellcond(*_shape))
case("det-negative", lambda a: _s(0.1 * np.linalg.det(a)), negdet(2, 3, 3))
case("slogdet-sign-times-logabsdet",
     lambda a: _s(np.linalg.slogdet(a).sign * np.linalg.slogdet(a).logabsdet), negdet(2, 3, 3))
case("slogdet-unpacked", lambda a: _s(np.linalg.slogdet(a)[0] + np.linalg.slogdet(a)[1]),
     negdet(3, 3))
case("inv-then-matmul", lambda a, b: _s(np.linalg.inv(a) @ b), wellcond(3, 3), normal(3, 2),
     argnums=(0, 1))
for _sa, _sb in [((3, 3), (3,)), ((3, 3), (3, 2)), ((2, 3, 3), (3,)), ((2, 3, 3), (2, 3, 2)),
                 ((2, 3, 3), (3, 2)), ((3, 3), (2, 3, 2)), ((2, 1, 3, 3), (4, 3, 1))]:
    case(f"solve-{_id(_sa)}-{_id(_sb)}", lambda a, b: _s(np.linalg.solve(a, b)),
         wellcond(*_sa), normal(*_sb), argnums=(0, 1))
case("solve-wrt-b-only", lambda a, b: _s(np.linalg.solve(a, b)), wellcond(3, 3), normal(3),
     argnums=1)
case("solve-constant-a", lambda b: _s(np.linalg.solve(4 * np.eye(3) + 0.5, b)), normal(3, 2))

# ---- cholesky, eigh, pinv ----------------------------------------------------------------
for _shape in [(1, 1), (3, 3), (2, 3, 3), (4, 4)]:
    case(f"cholesky-{_id(_shape)}", lambda a: _s(np.linalg.cholesky(_sym(a))), wellcond(*_shape))
    case(f"eigh-values-{_id(_shape)}", lambda a: _s(np.linalg.eigh(_sym(a))[0]), spread(*_shape))
    case(f"eigh-vectors-{_id(_shape)}", lambda a: _s(np.linalg.eigh(_sym(a))[1] ** 2),
         spread(*_shape))
case("cholesky-upper", lambda a: _s(np.linalg.cholesky(_sym(a), upper=True)), wellcond(3, 3))
case("cholesky-of-gram", lambda a: _s(np.linalg.cholesky(a @ a.T + np.eye(3))), normal(3, 4))
case("eigh-both", lambda a: _s(np.linalg.eigh(_sym(a)).eigenvalues[..., None]
                               * np.linalg.eigh(_sym(a)).eigenvectors ** 2), spread(2, 4, 4))
case("eigh-unpacked-projector", lambda a: _eigh_projector(a), spread(4, 4))
case("eigh-upper", lambda a: _s(np.linalg.eigh(_sym(a), UPLO="U")[1] ** 2), spread(3, 3))
case("eigvalsh", lambda a: _s(np.linalg.eigvalsh(_sym(a))), spread(2, 3, 3))
# NumPy reads one triangle: with the input as it is (not symmetric), the derivatives are
# those of that triangle mirrored, which is what finite differences of np.linalg.eigh see
for _uplo in ("L", "U"):
    case(f"eigh-raw-{_uplo}", lambda a, u=_uplo: _s(np.linalg.eigh(a, UPLO=u)[1] ** 2)
         + _s(np.linalg.eigh(a, UPLO=u)[0] ** 2), spread(4, 4))
    case(f"eigvalsh-raw-{_uplo}", lambda a, u=_uplo: _s(np.linalg.eigvalsh(a, UPLO=u)),
         spread(2, 3, 3))
# cholesky reads the lower triangle (upper=True: the upper one) in the same way
case("cholesky-raw", lambda a: _s(np.linalg.cholesky(a)), wellcond(2, 3, 3))
case("cholesky-raw-upper", lambda a: _s(np.linalg.cholesky(a, upper=True)), wellcond(4, 4))
for _shape in [(4, 3), (3, 4), (3, 3), (2, 4, 2), (5, 1)]:
    case(f"pinv-{_id(_shape)}", lambda a: _s(np.linalg.pinv(a)), normal(*_shape))
for _shape in [(4, 3), (3, 4), (3, 3), (2, 4, 2), (2, 2, 5), (1, 3)]:
    case(f"svd-values-{_id(_shape)}", lambda a: _s(np.linalg.svd(a, compute_uv=False)),
         normal(*_shape))
    case(f"svd-u-{_id(_shape)}", lambda a: _s(np.linalg.svd(a, full_matrices=False)[0] ** 2),
         normal(*_shape))
    case(f"svd-vh-{_id(_shape)}", lambda a: _s(np.linalg.svd(a, full_matrices=False).Vh ** 2),
         normal(*_shape))
case("svd-square-full-matrices", lambda a: _s(_svd_rebuild(a)), normal(3, 3))
case("svd-low-rank-approximation", lambda a: _s(_svd_rebuild(a, 2)), normal(2, 5, 4))
case("svdvals", lambda a: _s(np.linalg.svdvals(a)), normal(3, 4))


def _svd_rebuild(a, rank=None):
    u, s, vh = np.linalg.svd(a, full_matrices=a.shape[-1] == a.shape[-2])
    return (u[..., :rank] * s[..., None, :rank]) @ vh[..., :rank, :]


def _eigh_projector(a):
    w, v = np.linalg.eigh(_sym(a))
    return _s(v[:, 1:] @ v[:, 1:].T * w[0])


# ---- norm ---------------------------------------------------------------------------------
_VECTOR_ORDS = [None, 2, 1, np.inf, -np.inf, 3, 0.5, -1.5, 0]
for _ord in _VECTOR_ORDS:
    case(f"norm-vector-ord{_ord}", lambda x, o=_ord: _s(np.linalg.norm(x, ord=o)), apart(5))
    case(f"norm-axis1-ord{_ord}", lambda x, o=_ord: _s(np.linalg.norm(x, o, axis=1)),
         apart(3, 4))
    case(f"norm-axis0-keepdims-ord{_ord}",
         lambda x, o=_ord: _s(np.linalg.norm(x, o, axis=0, keepdims=True)), apart(3, 4))
case("norm-flat-3d", lambda x: _s(np.linalg.norm(x)), normal(2, 3, 4))
case("norm-flat-keepdims", lambda x: _s(np.linalg.norm(x, keepdims=True)), normal(2, 3))
case("norm-axis-negative", lambda x: _s(np.linalg.norm(x, axis=-1)), normal(2, 3, 4))
case("norm-axis-tuple-1", lambda x: _s(np.linalg.norm(x, axis=(1,))), normal(3, 4))
for _ord in [None, "fro", 1, -1, np.inf, -np.inf, "nuc", 2, -2]:
    case(f"norm-matrix-ord{_ord}", lambda x, o=_ord: _s(np.linalg.norm(x, ord=o)), apart(3, 4))
    case(f"norm-matrix-batched-ord{_ord}",
         lambda x, o=_ord: _s(np.linalg.norm(x, ord=o, axis=(1, 2))), apart(2, 3, 4))
    case(f"norm-matrix-axes-reversed-keepdims-ord{_ord}",
         lambda x, o=_ord: _s(np.linalg.norm(x, o, axis=(2, 0), keepdims=True)), apart(3, 2, 4))

BY_NAME = tables.by_name(CASES)


# ---- the tests --------------------------------------------------------------------------
@pytest.mark.parametrize("c", CASES, ids=[c.name for c in CASES])
def test_gradients(c):
    tables.check_gradients(c)


FLOAT32 = ["matmul-2x1x3x4-5x4x2", "dot-2x3x4-5x4x2", "vdot-3x4-12", "inner-3x4-5x4",
           "outer-2x2-3", "tensordot-2-2x3x4-3x4x5", "tensordot-([1,0],[0,1])-3x4-4x3",
           "einsum-...ij,...jk=...ik-2x1x3x4-5x4x2", "einsum-ii=i-4x4", "einsum-iij=j-3x3x2",
           "einsum-ii-3x3", "einsum-ij=i-3x4", "inv-2x3x3", "det-2x3x3", "slogdet-2x3x3",
           "solve-2x3x3-3", "solve-2x3x3-2x3x2", "cholesky-2x3x3", "eigh-values-2x3x3",
           "eigh-vectors-3x3", "pinv-4x3", "norm-axis1-ord3", "norm-vector-ordinf",
           "norm-matrix-batched-ordfro", "norm-matrix-ord1", "svd-u-4x3", "svd-vh-2x2x5",
           "norm-matrix-ordnuc", "eigh-raw-U"]


@pytest.mark.parametrize("name", FLOAT32)
def test_float32_gradients(name):
    tables.check_float32(BY_NAME[name], rtol=2e-3, atol=1e-3)


# ---- second derivatives: the generated Hessian vs differences of the generated gradient --
def _square(x):
    return np.reshape(x, (3, 3)) + 3 * np.eye(3)


HESSIAN = {
    "inv": lambda x: _s(np.linalg.inv(_square(x))),
    "det": lambda x: np.sin(0.1 * np.linalg.det(_square(x))),
    "solve-a": lambda x: _s(np.linalg.solve(_square(x), np.array([1.0, -2.0, 0.5]))),
    "solve-both": lambda x: _s(np.linalg.solve(_square(x), x[:3] * x[3:6])),
    "slogdet": lambda x: np.linalg.slogdet(_square(x))[1] * 1.5,
    "einsum-matmul": lambda x: _s(np.einsum("ij,jk->ik", _square(x), np.reshape(x, (3, 3)))),
    "einsum-trace": lambda x: np.sin(np.einsum("ii", np.reshape(x, (3, 3)) ** 2)),
    "einsum-diagonal": lambda x: _s(np.einsum("ii->i", np.reshape(x, (3, 3))) * x[:3]),
    "einsum-ellipsis": lambda x: _s(np.einsum("...ij,...j->...i", np.reshape(x, (3, 3)), x[:3])),
    "tensordot": lambda x: _s(np.tensordot(np.reshape(x, (3, 3)), np.reshape(x[::-1], (3, 3)))),
    "tensordot-1": lambda x: _s(np.tensordot(np.reshape(x, (3, 3)), x[:3], 1)),
    "cholesky": lambda x: _s(np.linalg.cholesky(_square(x) @ _square(x).T)),
    "svd-values": lambda x: _s(np.linalg.svd(_square(x), compute_uv=False)),
    "pinv": lambda x: _s(np.linalg.pinv(np.reshape(x, (3, 3))[:, :2] + np.eye(3)[:, :2])),
    "eigh-raw-L": lambda x: _s(np.linalg.eigh(_square(x) + np.diag([0.0, 2.0, 4.0]))[1] ** 2),
    "eigvalsh-raw-U": lambda x: _s(np.linalg.eigvalsh(_square(x) * _square(x), UPLO="U")),
}


@pytest.mark.parametrize("name", list(HESSIAN))
def test_second_derivatives(name):
    x = tables.rng_for(name).standard_normal(9) * 0.5
    tables.check_hessian(HESSIAN[name], x, symmetry={"rtol": 1e-8, "atol": 1e-10})


# ---- errors and the emitted form ---------------------------------------------------------
def test_svd_of_nonsquare_needs_reduced_form():
    with pytest.raises(autodiffgen.UnsupportedOperationError, match="full_matrices=False"):
        autodiffgen.grad(lambda x: np.linalg.svd(x)[1].sum())(np.ones((3, 2)))


def test_vector_norm_refuses_matrix_ord():
    with pytest.raises(ValueError, match="matrix norm"):
        autodiffgen.grad(lambda x: np.linalg.norm(x, ord="fro", axis=0).sum())(np.eye(3))


def test_pinv_refuses_rcond():
    with pytest.raises(autodiffgen.UnsupportedOperationError, match="rcond"):
        autodiffgen.grad(lambda x: np.linalg.pinv(x, rcond=1e-3).sum())(np.eye(3))


def test_einsum_ellipsis_is_spelled_out():
    source = autodiffgen.emit(lambda a, b: _s(np.einsum("...ij,...jk->...ik", a, b)),
                              np.ones((2, 3, 4)), np.ones((4, 5)), argnums=(0, 1))
    code = [line.partition("#")[0] for line in source.splitlines()]
    assert ("# einsum 'aij,jk->aik' as 1 matmul" if autodiffgen.passes.ENABLED  # contract.py
            else "np.einsum('aij,jk->aik', a, b)") in source, source
    assert not any("..." in line for line in code), source


def test_einsum_diagonal_cotangent_is_exact():
    g = autodiffgen.grad(lambda a: np.sum(np.einsum("ii->i", a) * np.array([1.0, 2.0, 3.0])))
    np.testing.assert_array_equal(g(np.zeros((3, 3))), np.diag([1.0, 2.0, 3.0]))
    g = autodiffgen.grad(lambda a: np.einsum("ii", a))
    np.testing.assert_array_equal(g(np.ones((4, 4))), np.eye(4))


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_gradient_lies_in_the_triangle_numpy_reads(uplo):
    """The gradient is that of NumPy's function, which never reads the other triangle (so
    it is not symmetric, unlike JAX's convention); at a symmetric input, its symmetric
    part (g + g.T) / 2 is the gradient of eigh(sym(a)), the symmetric one."""
    a = spread(4, 4)(np.random.default_rng(0))
    g = autodiffgen.grad(lambda a: _s(np.linalg.eigh(a, UPLO=uplo)[1] ** 2))(a)
    lower, upper = g[np.tril_indices(4, -1)], g[np.triu_indices(4, 1)]
    read, unread = (lower, upper) if uplo == "L" else (upper, lower)
    assert not unread.any() and read.all()
    s = _sym(a)
    g = autodiffgen.grad(lambda a: _s(np.linalg.eigh(a, UPLO=uplo)[1] ** 2))(s)
    symmetric = autodiffgen.grad(lambda a: _s(np.linalg.eigh(_sym(a), UPLO=uplo)[1] ** 2))(s)
    np.testing.assert_allclose(symmetric, (g + g.T) / 2, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_gradient_lies_in_the_triangle_numpy_reads(upper):
    """As eigh's: zero in the triangle NumPy does not read; at a symmetric input, the
    symmetric part is the gradient of cholesky(sym(a)) (Autograd's and JAX's)."""
    a = wellcond(4, 4)(np.random.default_rng(1))
    f = lambda a: _s(np.linalg.cholesky(a, upper=upper))
    g = autodiffgen.grad(f)(a)
    lower, strict_upper = g[np.tril_indices(4, -1)], g[np.triu_indices(4, 1)]
    read, unread = (strict_upper, lower) if upper else (lower, strict_upper)
    assert not unread.any() and read.all()
    s = _sym(a)
    g = autodiffgen.grad(f)(s)
    symmetric = autodiffgen.grad(lambda a: f(_sym(a)))(s)
    np.testing.assert_allclose(symmetric, (g + g.T) / 2, rtol=1e-12, atol=1e-12)


# ---- generated source is clean Python ---------------------------------------------------
# Emits every case once and runs ruff once over all of them (one process, not hundreds).
ruff_report = tables.ruff_report_fixture(CASES, "generated_linalg")


@pytest.mark.parametrize("i", range(len(CASES)), ids=[c.name for c in CASES])
def test_generated_source_passes_ruff(i, ruff_report):
    ruff_report.check(i, CASES[i])
