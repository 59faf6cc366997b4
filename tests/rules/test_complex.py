"""Complex numbers, with Autograd's convention: the gradient of a real L of z = x + iy is
dL/dx - i dL/dy, so that of a holomorphic f (L its real part) is f'(z).

One table, `CASES`, as in test_coverage_linalg.py: each row is checked by `check_grads`
(generated code, tape, central finite differences along the real and the imaginary
direction of each element, forward mode and the transposition test), a subset again with
complex64 inputs, a subset for second derivatives, and every row's generated source must
pass `ruff check`. Rows end in `_c` (a real loss of both parts) or `_s` (sum(sin(z)), a
complex output whose real part is differentiated). Then np.linalg.eig, the predicates,
what a real-only rule does with a complex value, and complex arguments in the cache key.
"""

import numpy as np
import pytest
import scipy.linalg
import scipy.special
import tables
from tables import normal, positive
from tables import sum_sin as _s

import autodiffgen
from autodiffgen import tape
from autodiffgen.testing import check_grads


def cnormal(*shape):
    return lambda rng: rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


def cpy(rng):
    """A Python complex."""
    return complex(rng.standard_normal(), rng.standard_normal())


def away(*shape):
    """|z| in [0.5, 1.5]: away from 0, where abs and angle have no derivative, and from
    the negative real axis, where log, sqrt and angle have their branch cut."""
    def make(rng):
        r = rng.uniform(0.5, 1.5, shape)
        return r * np.exp(1j * rng.uniform(-2.5, 2.5, shape))
    return make


def _c(z):
    """A real loss of both parts, with cotangents that differ element to element."""
    return np.sum(np.sin(np.real(z)) + np.cos(1.3 * np.imag(z)))


CASES = []


def case(name, f, *args, argnums=0, **check):
    CASES.append(tables.Case(name, f, args, argnums, check))


# ---- holomorphic elementwise functions: f'(z), no conjugate ------------------------------
_HOLOMORPHIC = {
    "exp": np.exp, "expm1": np.expm1, "log": np.log, "log1p": lambda z: np.log1p(z),
    "log2": np.log2, "log10": np.log10, "sqrt": np.sqrt, "sin": np.sin, "cos": np.cos,
    "tan": np.tan, "tanh": np.tanh, "sinh": np.sinh, "cosh": np.cosh, "arctan": np.arctan,
    "arcsin": np.arcsin, "arccos": np.arccos, "arcsinh": np.arcsinh, "arctanh": np.arctanh,
    "square": np.square, "reciprocal": np.reciprocal, "negative": np.negative,
    "sinc": np.sinc, "exp2": np.exp2, "cube": lambda z: z ** 3,
    "power-real-exponent": lambda z: z ** 2.5,
}
for _name, _fn in _HOLOMORPHIC.items():
    case(f"{_name}-s", lambda z, fn=_fn: _s(fn(z)), away(3))
    case(f"{_name}-c", lambda z, fn=_fn: _c(fn(z)), away(2, 2))
# scipy.special's erf and erfc are holomorphic too
case("erf-c", lambda z: _c(scipy.special.erf(z)), away(2, 2))
case("erfc-c", lambda z: _c(scipy.special.erfc(z * 0.5)), away(3))
# max and min of complex values: NumPy's lexicographic order picks one element per group
case("max-c", lambda z: _c(np.max(z, axis=0)), away(4, 3))
case("min-c", lambda z: _c(np.min(z, axis=1, keepdims=True) * z), away(3, 4))
case("arccosh-c", lambda z: _c(np.arccosh(z + 2)), away(3))

# ---- binary arithmetic, complex and real arguments mixed ---------------------------------
for _op, _fn in [("add", np.add), ("subtract", np.subtract), ("multiply", np.multiply),
                 ("divide", np.divide), ("power", np.power)]:
    case(f"{_op}-complex-complex", lambda a, b, fn=_fn: _c(fn(a, b)), away(3), away(3),
         argnums=(0, 1))
    case(f"{_op}-complex-real", lambda a, b, fn=_fn: _c(fn(a, b)), away(2, 3), positive(3),
         argnums=(0, 1))
    case(f"{_op}-real-complex", lambda a, b, fn=_fn: _c(fn(a, b)), positive(3), away(2, 3),
         argnums=(0, 1))
case("real-times-complex-constant", lambda x: _c(x * (0.3 - 1.2j)), normal(4))
case("real-through-exp-i", lambda x: _c(np.exp(1j * x) * x), normal(4))
case("astype-complex", lambda x: _c(x.astype(np.complex128) * (1 + 2j)), normal(3))
case("python-complex", lambda z: _c(np.exp(z) * z), cpy)
case("python-complex-with-array", lambda z, x: _c(z * x + np.conj(z)), cpy, normal(3),
     argnums=(0, 1))

# ---- real, imag, conj, angle, abs: not holomorphic -----------------------------------------
case("real", lambda z: _s(np.real(z) * np.imag(z)), cnormal(4))
case("real-attribute", lambda z: _s(z.real ** 2 - z.imag), cnormal(2, 3))
case("imag", lambda z: _s(np.imag(z * z)), cnormal(4))
case("conj", lambda z: _c(np.conj(z) * z ** 2), cnormal(4))
case("conj-method", lambda z: _c(z.conj() * np.exp(z)), cnormal(4))
case("conjugate-method", lambda z: _s(z.conjugate() + 2 * z), cnormal(3))
case("angle", lambda z: _s(np.angle(z)), away(5))
case("angle-deg", lambda z: _s(np.angle(z, deg=True) / 90), away(5))
case("angle-of-real", lambda x: np.sum(np.angle(x) * x), normal(4))
case("abs", lambda z: _s(np.abs(z)), away(5))
case("abs-squared", lambda z: np.sum(np.abs(z) ** 2 * np.arange(1.0, 5.0)), cnormal(4))
case("abs-operator", lambda z: _s(abs(z * z)), away(2, 2))
case("abs-of-real-through-complex", lambda x: _s(np.abs(x + 0.5j)), normal(4))
case("sign", lambda z: _c(np.sign(z) * np.arange(1.0, 5.0)), away(4))
case("sign-of-real", lambda x: _s(np.sign(x) * x), normal(4))

# ---- reductions, shapes, indexing ----------------------------------------------------------
case("sum", lambda z: _s(np.sum(z, axis=0) * 1j), cnormal(3, 2))
case("mean", lambda z: _c(np.mean(z, axis=1, keepdims=True) * z), cnormal(3, 2))
case("prod", lambda z: _c(np.prod(z, axis=0)), away(3, 2))
case("cumsum", lambda z: _c(np.cumsum(z)), cnormal(4))
case("cumprod", lambda z: _c(np.cumprod(z, axis=1)), away(2, 3))
case("var", lambda z: _s(np.var(z, axis=0)), cnormal(4, 2))
case("std", lambda z: np.std(z), cnormal(5))
case("reshape-transpose", lambda z: _c(np.reshape(z, (3, 2)).T), cnormal(2, 3))
case("getitem-setitem", lambda z: _c(_written(z)), cnormal(4))
case("concatenate-stack", lambda z, x: _c(np.concatenate([z, np.stack([x, x])])),
     cnormal(2, 3), normal(3), argnums=(0, 1))
case("where", lambda z: _c(np.where(np.real(z) > 0, z, z * z)), cnormal(5))
case("broadcast", lambda z, w: _c(z[:, None] * w), cnormal(3), cnormal(2), argnums=(0, 1))


def _written(z):
    z = z * 1.0
    z[1] = z[0] * z[2]
    return z


# ---- products and linear algebra -----------------------------------------------------------
case("matmul", lambda a, b: _c(a @ b), cnormal(3, 4), cnormal(4, 2), argnums=(0, 1))
case("matmul-real-complex", lambda a, b: _c(a @ b), normal(3, 4), cnormal(4), argnums=(0, 1))
case("dot", lambda a, b: _s(np.dot(a, b)), cnormal(3), cnormal(3), argnums=(0, 1))
case("vdot", lambda a, b: _c(np.vdot(a, b)), cnormal(2, 3), cnormal(6), argnums=(0, 1))
case("einsum", lambda a, b: _c(np.einsum("ij,jk->ik", a, b)), cnormal(2, 3), cnormal(3, 2),
     argnums=(0, 1))
case("outer", lambda a, b: _c(np.outer(a, b)), cnormal(3), normal(2), argnums=(0, 1))
case("inv", lambda a: _c(np.linalg.inv(a + 3 * np.eye(3))), cnormal(3, 3))
case("det", lambda a: _s(0.1 * np.linalg.det(a + 3 * np.eye(3))), cnormal(3, 3))
case("solve", lambda a, b: _c(np.linalg.solve(a + 3 * np.eye(3), b)), cnormal(3, 3),
     cnormal(3), argnums=(0, 1))
case("norm", lambda z: np.linalg.norm(z), cnormal(4))
case("norm-axis", lambda z: _s(np.linalg.norm(z, axis=1)), cnormal(2, 3))
case("norm-1", lambda z: np.linalg.norm(z, ord=1), away(4))


# ---- np.linalg.eig: eigenvalues, and eigenvectors through phase-free functions -------------
def spread_square(n, batch=()):
    """Real matrices with eigenvalues near 1..n: distinct, and real or complex pairs."""
    return lambda rng: np.diag(np.arange(1.0, n + 1)) + 0.4 * rng.standard_normal(batch + (n, n))


def rotation_like(rng):
    """A real 3 x 3 matrix with a complex pair of eigenvalues."""
    return np.array([[1.0, -2.0, 0.3], [2.0, 1.0, 0.1], [0.2, 0.0, 3.0]]) \
        + 0.1 * rng.standard_normal((3, 3))


for _shape_name, _gen in [("4x4", spread_square(4)), ("2x3x3", spread_square(3, (2,))),
                          ("complex-pair", rotation_like),
                          ("complex-input", lambda rng: spread_square(3)(rng)
                           + 0.3j * rng.standard_normal((3, 3)))]:
    case(f"eigvals-{_shape_name}", lambda a: _c(np.linalg.eigvals(a)), _gen)
    case(f"eig-values-{_shape_name}", lambda a: _s(np.linalg.eig(a)[0]), _gen)
    case(f"eig-vectors-{_shape_name}",
         lambda a: _s(np.abs(np.linalg.eig(a).eigenvectors) ** 2), _gen)
case("eig-both-real", lambda a: _s(np.linalg.eig(a)[0] * np.linalg.eig(a)[1] ** 2),
     spread_square(3))

BY_NAME = tables.by_name(CASES)


# ---- the tests --------------------------------------------------------------------------
@pytest.mark.parametrize("c", CASES, ids=[c.name for c in CASES])
def test_gradients(c):
    tables.check_gradients(c)


COMPLEX64 = ["exp-c", "sqrt-s", "multiply-complex-real", "divide-real-complex", "abs",
             "angle", "conj", "real", "matmul", "sum", "var"]


@pytest.mark.parametrize("name", COMPLEX64)
def test_complex64_gradients_stay_complex64(name):
    tables.check_single_precision(BY_NAME[name])


# ---- second derivatives of real functions through complex values -------------------------
HESSIAN = {
    "exp-i": lambda x: np.sum(np.real(np.exp(1j * x) * x[::-1])),
    "abs": lambda x: np.sum(np.abs(x[:3] + 1j * x[3:]) ** 3),
    "angle": lambda x: np.sum(np.angle(x[:3] + 1j * (x[3:] + 2.0)) * x[:3]),
    "conj-products": lambda x: np.sum(np.real(np.conj(x[:3] + 1j * x[3:]) * (x[3:] - 2j) ** 2)),
    "eigvals": lambda x: np.sum(np.abs(np.linalg.eigvals(
        np.reshape(x[:4], (2, 2)) + np.array([[1.0, -3.0], [3.0, 1.0]])))),
}


@pytest.mark.parametrize("name", list(HESSIAN))
def test_second_derivatives(name):
    x = tables.rng_for(name).standard_normal(6) * 0.5
    tables.check_hessian(HESSIAN[name], x, symmetry={"rtol": 1e-7, "atol": 1e-9})


def test_grad_of_grad_of_a_complex_argument():
    """Autograd's test_abs_complex and test_angle_complex: the gradient (a complex
    function of z) differentiated again."""
    for fn, z in ((np.abs, 1.1 + 1.3j), (np.angle, 0.4 + 0.7j), (np.abs, 2.1)):
        check_grads(lambda z, fn=fn: autodiffgen.grad(fn)(z), z)
    np.testing.assert_allclose(autodiffgen.grad(np.abs)(3.0 + 4.0j), 0.6 - 0.8j)


ruff_report = tables.ruff_report_fixture(CASES, "generated_complex")


@pytest.mark.parametrize("i", range(len(CASES)), ids=[c.name for c in CASES])
def test_generated_source_passes_ruff(i, ruff_report):
    ruff_report.check(i, CASES[i])


# ---- the convention, on known answers ----------------------------------------------------
def test_the_gradient_is_d_dx_minus_i_d_dy():
    z = np.array([1.0 + 2.0j, 3.0 - 1.0j])
    for engine in (autodiffgen, tape):
        np.testing.assert_allclose(engine.grad(lambda z: np.sum(np.abs(z) ** 2))(z), 2 * np.conj(z))
        np.testing.assert_allclose(engine.grad(lambda z: np.sum(np.imag(z)))(z), [-1j, -1j])
        np.testing.assert_allclose(engine.grad(lambda z: np.real(np.sum(z ** 3)))(z), 3 * z ** 2)
    g = autodiffgen.grad(lambda z: np.sum(np.real(z)))(np.ones(2, np.complex64))
    assert g.dtype == np.complex64 and np.iscomplexobj(g)


def test_real_of_a_real_argument_keeps_a_real_gradient():
    """Autograd's test_real_type: np.real of a float has a real gradient, of 1j a complex one."""
    df = autodiffgen.grad(lambda x: np.sum(np.real(x)))
    assert np.isrealobj(df(2.0)) and np.iscomplexobj(df(1.0j))


# ---- np.linalg.eig: which kind NumPy returns is guarded ----------------------------------
def test_eig_traces_again_when_numpy_returns_the_other_kind():
    f = autodiffgen.grad(lambda a: np.sum(np.abs(np.linalg.eigvals(a))))
    real_kind = np.diag([1.0, 2.0, 3.0]) + 0.1
    complex_kind = np.array([[1.0, -2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 3.0]])
    matrices = (real_kind, complex_kind, real_kind + 0.05, complex_kind * 1.1)
    for a in matrices:
        np.testing.assert_allclose(f(a), tape.grad(f.fun)(a), rtol=1e-10)
    kinds = {np.linalg.eigvals(a).dtype for a in matrices}  # NumPy >= 2.5: always complex
    assert f.cache_info().misses == len(kinds)
    assert "np.iscomplexobj(" in f.source(real_kind)


# ---- predicates: plain answers, or comparisons of the imaginary part ---------------------
def test_complex_predicates_pass_through():
    seen = []

    def f(z):
        seen.append((np.iscomplexobj(z), np.isrealobj(z)))
        return np.sum(np.abs(z) * np.iscomplex(z) + np.real(z) * np.isreal(z))

    z = np.array([1.0 + 1.0j, 2.0 + 0.0j])
    np.testing.assert_allclose(autodiffgen.grad(f)(z), [np.conj(z[0]) / abs(z[0]), 1.0])
    np.testing.assert_allclose(autodiffgen.grad(f)(z[::-1].copy()),
                               [1.0, np.conj(z[0]) / abs(z[0])])  # values read at run time
    np.testing.assert_allclose(autodiffgen.grad(f)(np.array([1.0, 2.0])), [1.0, 1.0])
    assert seen[0] == (True, False) and seen[-1] == (False, True)
    assert all(type(v) is bool for pair in seen for v in pair)


# ---- real-only rules refuse complex values -------------------------------------------------
@pytest.mark.parametrize("f", [
    lambda z: np.sum(np.maximum(z, 0.5).real),
    lambda z: np.sum(np.clip(z, 0, 1).real),
    lambda z: np.sum(scipy.special.gamma(z).real),
    lambda z: np.sum(scipy.linalg.solve_triangular(np.outer(z, z) + 3 * np.eye(2), z,
                                                   lower=True).real),
], ids=["maximum", "clip", "gamma", "solve_triangular"])
def test_real_only_rules_refuse_complex_values(f):
    z = np.array([1.0 + 1.0j, 0.5 - 1.0j])
    for engine in (autodiffgen, tape):
        with pytest.raises(autodiffgen.UnsupportedOperationError, match="of a complex value"):
            engine.grad(f)(z)


def test_complex_data_without_a_derivative_is_numpy_s():
    """A real-only function of complex data no derivative flows through is NumPy's."""
    z = np.array([1.0 + 1.0j, 0.5 - 1.0j])
    g = autodiffgen.grad(lambda w, z: np.sum(w * np.maximum(z, 0.7 + 0j).real))(np.ones(2), z)
    np.testing.assert_allclose(g, np.maximum(z, 0.7 + 0j).real)


# ---- complex arguments in the cache key ----------------------------------------------------
def test_python_complex_is_an_input_and_dtypes_are_keys():
    f = autodiffgen.grad(lambda z: np.abs(np.sin(z)) ** 2)
    for z in (1.0 + 0.5j, -0.3 + 2.0j, 0.7 - 0.1j):
        np.testing.assert_allclose(f(z), tape.grad(f.fun)(z), rtol=1e-12)
    assert f.cache_info().misses == 1
    g = autodiffgen.grad(lambda z: np.sum(np.abs(z) ** 2))
    for dtype in (np.complex128, np.complex64, np.complex128):
        assert g(np.ones(3, dtype) * (1 + 1j)).dtype == dtype
    assert g.cache_info().misses == 2 and g.cache_info().hits == 1


def test_python_complex_keeps_python_typing_against_complex64():
    """A Python complex is weak beside a complex64 array, as in NumPy."""
    f = autodiffgen.value_and_grad(lambda z, c: np.sum(np.abs(z * c) ** 2))
    value, g = f(np.ones(2, np.complex64), 0.5 + 0.5j)
    assert g.dtype == np.complex64 and value.dtype == np.float32


def test_real_if_close_decides_on_the_values_and_guards_it():
    def g(z):
        r = np.real_if_close(z * z)
        return np.sum(np.abs(r) ** 2 * np.arange(2)) + 10.0 * np.iscomplexobj(r)

    f = autodiffgen.value_and_grad(g)
    for z in (np.array([1 + 1e-17j, 2 + 0j]), np.array([1 + 0.5j, 2 + 0j]),
              np.array([3 + 0j, 1 + 0j]), np.array([1 + 0.1j, 1j])):
        value, grad = f(z)
        assert value == g(z)  # 10 more where NumPy's answer is complex
        np.testing.assert_allclose(grad, tape.grad(g)(z))
        check_grads(g, z)
    assert f.cache_info().misses == 2  # one trace for each answer
