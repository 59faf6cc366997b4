"""The functions written through other primitives (rules/numpy_api/composed.py and their neighbours):
sort, partition, diff, trapezoid, kron, cross, rot90, rollaxis, nan_to_num, linspace, and
real / imag / conj of real values.

Laid out like tests/rules/test_coverage_arrays.py: one table, `CASES`, of a name, a function in
plain NumPy, a generator per argument and the argnums. Every row goes through
`check_grads` in float64, a subset again in float32, a subset through second
derivatives, and every row's generated source must pass `ruff check`. Functions end in
`_s(z) = sum(sin(z))`; those that only rearrange elements first weigh them by position
(`_ramp`), since a sum of sines does not notice a permutation.
"""

import numpy as np
import pytest
import tables
from tables import distinct, f64, normal, positive, shape_id
from tables import sum_sin as _s

import autodiffgen
from autodiffgen import tape
from autodiffgen.errors import TracingError, UnsupportedOperationError


def _ramp(z):
    """sum(sin(z * (1, 2, 3, ...))): element k gets its own weight, so that a permutation
    put back the wrong way round changes the gradient."""
    return _s(z * np.arange(1, 1 + np.size(z), dtype=z.dtype).reshape(np.shape(z)))


def with_nonfinite(*shape):
    """normal(*shape) with nan, inf and -inf at the first three flat positions."""
    def make(rng):
        x = rng.standard_normal(shape)
        x.reshape(-1)[:3] = [np.nan, np.inf, -np.inf]
        return x
    return make


CASES = []


def case(name, f, *args, argnums=0, **check):
    CASES.append(tables.Case(name, f, args, argnums, check))


# ---- sort and partition ----------------------------------------------------------------
for _shape, _axes in {(6,): [-1, 0, None], (3, 4): [0, 1, -1, None],
                      (2, 3, 4): [1, -1, None]}.items():
    for _axis in _axes:
        case(f"sort-{shape_id(_shape)}-axis{tables.axis_id(_axis)}",
             lambda x, axis=_axis: _ramp(np.sort(x, axis=axis)), distinct(*_shape))
case("sort-stable", lambda x: _ramp(np.sort(x, kind="stable")), distinct(3, 4))
case("sort-twice", lambda x: _ramp(np.sort(np.sort(x, 0), 1)), distinct(3, 4))
case("sort-of-product", lambda x, y: _ramp(np.sort(x * y)), distinct(5), positive(5),
     argnums=(0, 1))
case("partition-1d", lambda x: _ramp(np.partition(x, 2)), distinct(7))
case("partition-kth-list", lambda x: _ramp(np.partition(x, [1, 3])), distinct(2, 6))
case("partition-axis0", lambda x: _ramp(np.partition(x, -1, axis=0)), distinct(4, 3))
case("partition-axis-none", lambda x: _ramp(np.partition(x, 4, axis=None)), distinct(3, 3))

# ---- diff and trapezoid ----------------------------------------------------------------
case("diff-1d", lambda x: _s(np.diff(x)), normal(6))
case("diff-n2", lambda x: _s(np.diff(x, 2)), normal(6))
case("diff-n3-axis0", lambda x: _s(np.diff(x, n=3, axis=0)), normal(5, 3))
case("diff-axis1", lambda x: _s(np.diff(x, axis=1)), normal(3, 4))
case("diff-3d-axis-neg2", lambda x: _s(np.diff(x, 2, axis=-2)), normal(2, 4, 3))
case("diff-n0", lambda x: _s(np.diff(x, 0)), normal(3, 4))
case("diff-prepend-scalar", lambda x: _s(np.diff(x, prepend=0.5)), normal(3, 4))
case("diff-append-array", lambda x: _s(np.diff(x, axis=0, append=np.ones((1, 4)))),
     normal(3, 4))
case("diff-traced-prepend-append", lambda x, p: _s(np.diff(x, prepend=p, append=p[:, :1])),
     normal(3, 4), normal(3, 2), argnums=(0, 1))
case("trapezoid-1d", lambda y: np.sin(np.trapezoid(y)), normal(6))
case("trapezoid-dx", lambda y: np.sin(np.trapezoid(y, dx=0.25)), normal(6))
case("trapezoid-x-1d", lambda y, x: _s(np.trapezoid(y, x)), normal(3, 5), normal(5),
     argnums=(0, 1))
case("trapezoid-x-1d-axis0", lambda y, x: _s(np.trapezoid(y, x, axis=0)), normal(4, 3),
     normal(4), argnums=(0, 1))
case("trapezoid-x-nd", lambda y, x: _s(np.trapezoid(y, x, axis=0)), normal(4, 3), normal(4, 3),
     argnums=(0, 1))
case("trapezoid-traced-dx", lambda y, dx: _s(np.trapezoid(y, dx=dx, axis=1)), normal(2, 4),
     f64(positive()), argnums=(0, 1))
case("trapezoid-rows", lambda x: np.sin(np.trapezoid(x[0], x[1])), normal(2, 5))

# ---- kron and cross ----------------------------------------------------------------------
for _sa, _sb in [((2, 3), (2, 2)), ((3,), (4,)), ((3,), (2, 2)), ((2, 2), (3,)),
                 ((2, 1, 2), (2, 3)), ((), (2, 3)), ((2, 3), ())]:
    case(f"kron-{shape_id(_sa)}-{shape_id(_sb)}", lambda a, b: _ramp(np.kron(a, b)),
         f64(normal()) if _sa == () else normal(*_sa),
         f64(normal()) if _sb == () else normal(*_sb), argnums=(0, 1))
case("kron-constant-left", lambda b: _ramp(np.kron(np.array([[1.0, -2.0], [0.5, 3.0]]), b)),
     normal(2, 3))
case("kron-self-1d-2d", lambda x: _ramp(np.kron(x[0], x)), normal(2, 2))
case("cross-vectors", lambda a, b: _s(np.cross(a, b)), normal(3), normal(3), argnums=(0, 1))
case("cross-batched", lambda a, b: _s(np.cross(a, b)), normal(4, 3), normal(4, 3),
     argnums=(0, 1))
case("cross-broadcast", lambda a, b: _s(np.cross(a, b)), normal(2, 1, 3), normal(4, 3),
     argnums=(0, 1))
case("cross-vector-and-batch", lambda a, b: _s(np.cross(a, b)), normal(3), normal(5, 3),
     argnums=(0, 1))
case("cross-axis0", lambda a, b: _ramp(np.cross(a, b, axis=0)), normal(3, 4), normal(3, 4),
     argnums=(0, 1))
case("cross-axisa-axisb-axisc", lambda a, b: _ramp(np.cross(a, b, axisa=0, axisb=1, axisc=0)),
     normal(3, 2), normal(2, 3), argnums=(0, 1))
case("cross-constant", lambda a: _s(np.cross(a, np.array([0.5, -1.0, 2.0]))), normal(4, 3))
case("cross-rows", lambda x: _s(np.cross(x[0], x[1])), normal(2, 3))

# ---- rot90 and rollaxis ----------------------------------------------------------------
for _k in (1, 2, 3, -1, 0, 5):
    case(f"rot90-k{_k}", lambda x, k=_k: _ramp(np.rot90(x, k)), normal(3, 4))
case("rot90-axes12", lambda x: _ramp(np.rot90(x, axes=(1, 2))), normal(2, 3, 4))
case("rot90-axes-reversed", lambda x: _ramp(np.rot90(x, 1, (1, 0))), normal(3, 4))
case("rot90-axes-negative-k3", lambda x: _ramp(np.rot90(x, 3, axes=(-1, 0))), normal(2, 3, 4))
for _axis, _start in [(2, 0), (2, 1), (0, 3), (0, 2), (-1, -2), (1, 1), (1, 2)]:
    case(f"rollaxis-{_axis}-start{_start}",
         lambda x, axis=_axis, start=_start: _ramp(np.rollaxis(x, axis, start)),
         normal(2, 3, 4))
case("rollaxis-default-start", lambda x: _ramp(np.rollaxis(x, 1)), normal(3, 4))

# ---- nan_to_num ----------------------------------------------------------------------------
case("nan_to_num-finite", lambda x: _s(np.nan_to_num(x)), normal(3, 4))
case("nan_to_num-nonfinite", lambda x: _s(np.nan_to_num(x) * 1e-300), with_nonfinite(3, 4))
case("nan_to_num-values", lambda x: _s(np.nan_to_num(x, nan=1.5, posinf=2.0, neginf=-3.0)),
     with_nonfinite(2, 3))
case("nan_to_num-inf-kwargs", lambda x: _s(np.nan_to_num(x, posinf=np.inf, nan=np.nan) + 1),
     normal(4))
case("nan_to_num-twice", lambda x: _s(np.nan_to_num(x * 2.0 + 1.0, posinf=3.0, neginf=-3.0)
                                      * np.nan_to_num(x, posinf=1.0, neginf=-1.0)),
     with_nonfinite(3, 4))
case("nan_to_num-0d", lambda x: _s(np.nan_to_num(x * 2)), f64(normal()))

# ---- linspace ------------------------------------------------------------------------------
case("linspace-traced-ends", lambda a, b: _ramp(np.linspace(a, b, 5)), f64(normal()),
     f64(normal()), argnums=(0, 1))
case("linspace-constant-start", lambda b: _ramp(np.linspace(0.0, b, 4)), f64(normal()))
case("linspace-no-endpoint", lambda a, b: _ramp(np.linspace(a, b, 4, endpoint=False)),
     f64(normal()), f64(normal()), argnums=(0, 1))
case("linspace-one", lambda a, b: _s(np.linspace(a, b, 1) + b), f64(normal()), f64(normal()),
     argnums=(0, 1))
case("linspace-arrays", lambda a, b: _ramp(np.linspace(a, b, 3)), normal(3), normal(2, 3),
     argnums=(0, 1))
case("linspace-axis-last", lambda a, b: _ramp(np.linspace(a, b, 4, axis=-1)), normal(2),
     normal(2), argnums=(0, 1))
case("linspace-retstep", lambda a, b: _ramp(np.linspace(a, b, 5, retstep=True)[0])
     + np.sin(np.linspace(a, b, 5, retstep=True)[1]), f64(normal()), f64(normal()),
     argnums=(0, 1))
case("linspace-rows", lambda x: _ramp(np.linspace(x[0], x[1], 3, axis=1)), normal(2, 3))

# ---- real, imag, conj of real values -------------------------------------------------------
case("np.real", lambda x: _s(np.real(x) * x), normal(3, 4))
case("np.imag", lambda x: _s(np.imag(x) + x), normal(3, 4))
case("np.conj", lambda x: _s(np.conj(x) * x), normal(3, 4))
case("np.conjugate", lambda x: _s(np.conjugate(x) * 2), normal(4))
case("real-imag-properties", lambda x: _s(x.real * x + x.imag), normal(2, 3))
case("conj-methods", lambda x: _s(x.conj() * x.conjugate()), normal(2, 3))
case("real-0d", lambda x: np.sin(np.real(x) * np.conj(x)), f64(normal()))

# ---- append, ptp, matrix_power, multi_dot (issue 12) ---------------------------------------
case("append-flat", lambda x, y: _s(np.append(x, y)), normal(2, 3), normal(4), argnums=(0, 1))
case("append-axis0", lambda x, y: _s(np.append(x, y, axis=0)), normal(2, 3), normal(1, 3),
     argnums=(0, 1))
case("append-constant", lambda x: _s(np.append(x, [1.0, 2.0])), normal(3))
case("ptp-flat", lambda x: np.sin(np.ptp(x)), distinct(3, 4))
case("ptp-axis1-keepdims", lambda x: _s(np.ptp(x, axis=1, keepdims=True) * x), distinct(3, 4))
case("matrix_power-3", lambda a: _s(np.linalg.matrix_power(a, 3)), normal(3, 3))
case("matrix_power-0", lambda a: _s(np.linalg.matrix_power(a, 0) * a), normal(3, 3))
case("matrix_power-neg2", lambda a: _s(np.linalg.matrix_power(a, -2)),
     lambda rng: 3 * np.eye(3) + 0.3 * rng.standard_normal((3, 3)))
case("matrix_power-batched-5", lambda a: _s(np.linalg.matrix_power(a, 5)),
     lambda rng: 0.5 * rng.standard_normal((2, 3, 3)))
case("multi_dot-3", lambda a, b, c: _s(np.linalg.multi_dot([a, b, c])), normal(2, 3),
     normal(3, 4), normal(4, 2), argnums=(0, 1, 2))
case("multi_dot-vectors", lambda v, a, w: np.sin(np.linalg.multi_dot([v, a, a, w])), normal(3),
     normal(3, 3), normal(3), argnums=(0, 1, 2))

case("hsplit-2d", lambda x: _s(np.hsplit(x, 2)[1] * 2 + np.hsplit(x, 2)[0]), normal(3, 4))
case("hsplit-1d", lambda x: _s(np.hsplit(x, [2])[1]), normal(5))
case("vsplit", lambda x: _s(np.vsplit(x, 3)[2] ** 2), normal(3, 2))
case("dsplit", lambda x: _s(np.dsplit(x, [1])[1] * x[..., :1]), normal(2, 2, 3))
case("select", lambda x, y: _s(np.select([x < 0, x > 1], [x * y, y ** 2], default=x)),
     normal(3, 4), normal(3, 4), argnums=(0, 1))
case("real_if_close", lambda x: _s(np.real_if_close(x) * x), normal(4))

BY_NAME = tables.by_name(CASES)


# ---- the tests --------------------------------------------------------------------------
# Every row in float64; these again in float32, and these to second order.
FLOAT32 = ["sort-3x4-axis0", "sort-2x3x4-axisNone", "partition-kth-list", "diff-n2",
           "diff-traced-prepend-append", "trapezoid-x-1d", "trapezoid-x-nd", "kron-2x3-2x2",
           "kron-3-2x2", "cross-batched", "cross-axis0", "rot90-k1", "rot90-axes12",
           "rollaxis-0-start3", "nan_to_num-values", "linspace-traced-ends", "linspace-arrays",
           "np.real", "real-imag-properties", "conj-methods", "append-axis0",
           "ptp-axis1-keepdims", "matrix_power-3", "multi_dot-3"]
SECOND = ["sort-3x4-axis1", "diff-n2", "trapezoid-rows", "kron-self-1d-2d", "cross-rows",
          "linspace-rows", "rot90-axes-negative-k3", "matrix_power-neg2"]


@pytest.mark.parametrize("c", CASES, ids=[c.name for c in CASES])
def test_gradients(c):
    tables.check_gradients(c)


@pytest.mark.parametrize("name", FLOAT32)
def test_float32_gradients(name):
    tables.check_float32(BY_NAME[name], rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("name", SECOND)
def test_hessian_against_finite_differences_of_grad(name):
    (x,) = BY_NAME[name].make_args()
    tables.check_hessian(BY_NAME[name].f, x)


# ---- exact values and refusals -------------------------------------------------------------
def test_sort_with_ties_gives_each_position_one_element():
    x = np.array([2.0, 1.0, 2.0, 1.0, 0.0])
    w = np.array([1.0, 10.0, 100.0, 1000.0, 10000.0])
    order = np.argsort(x)
    for engine in (autodiffgen, tape):
        g = engine.grad(lambda x: np.sum(np.sort(x) * w))(x)
        expected = np.zeros(5)
        expected[order] = w
        np.testing.assert_array_equal(g, expected)


def test_sort_is_recomputed_from_new_inputs():
    grad = autodiffgen.grad(lambda x: np.sum(np.sort(x) * np.array([1.0, 2.0, 3.0])))
    np.testing.assert_array_equal(grad(np.array([0.0, 1.0, 2.0])), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(grad(np.array([2.0, 1.0, 0.0])), [3.0, 2.0, 1.0])


@pytest.mark.parametrize("method", ["sort", "partition"])
def test_in_place_sort_methods_are_refused(method):
    def f(x):
        getattr(x, method)()
        return np.sum(x)

    with pytest.raises(TracingError, match=f"np.{method}"):
        autodiffgen.grad(f)(np.ones(3))


def test_partition_matches_numpy():
    x = np.random.default_rng(0).standard_normal((4, 9))
    value, _ = autodiffgen.jvp(lambda x: np.partition(x, (2, 5), axis=1), (x,), (x,))
    np.testing.assert_array_equal(value, np.partition(x, (2, 5), axis=1))


def test_linspace_hits_its_ends_exactly():
    a, b = np.float64(0.1), np.float64(0.7)
    value, tangent = autodiffgen.jvp(lambda a, b: np.linspace(a, b, 7), (a, b),
                                     (np.float64(1.0), np.float64(0.0)))
    assert value[0] == a and value[-1] == b
    np.testing.assert_allclose(value, np.linspace(a, b, 7), rtol=1e-15)
    np.testing.assert_allclose(tangent, np.linspace(1.0, 0.0, 7), rtol=1e-15)


def test_linspace_keeps_float32():
    a, b = np.float32(0.5), np.float32(2.0)
    value, _ = autodiffgen.jvp(lambda a, b: np.linspace(a, b, 4), (a, b), (a, b))
    assert value.dtype == np.float32 == np.linspace(a, b, 4).dtype


def test_nan_to_num_gradient_is_zero_where_the_input_was_not_finite():
    x = np.array([np.nan, np.inf, -np.inf, 2.0])
    for engine in (autodiffgen, tape):
        g = engine.grad(lambda x: np.sum(np.nan_to_num(x) * np.array([1.0, 0.5, 0.25, 4.0])))(x)
        np.testing.assert_array_equal(g, [0.0, 0.0, 0.0, 4.0])


def test_imag_of_a_real_value_is_a_constant_and_of_a_complex_one_a_derivative():
    g = autodiffgen.grad(lambda x: np.sum(np.imag(x) + x.imag))(np.ones(3))
    np.testing.assert_array_equal(g, np.zeros(3))
    for f, expected in ((lambda x: np.sum(np.real(x * 1j)), 0.0),
                        (lambda x: np.sum(np.conj(x * 1j).real), 0.0),
                        (lambda x: np.sum(np.imag(x * 1j)), 1.0),
                        (lambda x: np.sum(np.conj(x * 1j).imag), -1.0)):
        g = autodiffgen.grad(f)(np.ones(3))
        assert g.dtype == np.float64
        np.testing.assert_array_equal(g, np.full(3, expected))


def test_cross_refuses_two_vectors():
    with pytest.raises(UnsupportedOperationError, match="3-vectors"):
        autodiffgen.grad(lambda a: np.sum(np.cross(a, a)))(np.ones((4, 2)))


@pytest.mark.parametrize("call", [lambda x: np.rot90(x, axes=(0, 0)),
                                  lambda x: np.rot90(x[0]),
                                  lambda x: np.rollaxis(x, 0, 4),
                                  lambda x: np.diff(x, -1),
                                  lambda x: np.diff(x[0, 0])])
def test_bad_arguments_raise_value_errors(call):
    with pytest.raises(ValueError):
        autodiffgen.grad(lambda x: np.sum(call(x)))(np.ones((2, 3)))


def test_generated_code_reads_as_numpy():
    x = np.ones((3, 4))
    source = autodiffgen.emit(lambda x: _ramp(np.sort(x, axis=0)), x)
    assert "np.argsort(x, axis=0)" in source
    source = autodiffgen.emit(lambda x: _s(np.nan_to_num(x)), x)
    assert "np.nan_to_num(x)" in source and "np.isfinite(x)" in source
    source = autodiffgen.emit(lambda x: _s(np.kron(x, x)), x)
    if autodiffgen.passes.ENABLED:  # passes/contract.py: an outer product, broadcast
        assert "# einsum 'ab,cd->acbd' as 1 multiply" in source
        assert "np.reshape(x, (3, 1, 4, 1))" in source
    else:
        assert "np.einsum('ab,cd->acbd', x, x)" in source
    source = autodiffgen.emit(lambda x: _s(np.real(x) + np.conj(x)), x)
    code = "\n".join(line.split("#")[0] for line in source.splitlines())  # not the comments
    assert "add = x + x" in code and "conj" not in code and "real" not in code


# ---- generated source is clean Python ---------------------------------------------------
ruff_report = tables.ruff_report_fixture(CASES, "generated")


@pytest.mark.parametrize("i", range(len(CASES)), ids=[c.name for c in CASES])
def test_generated_source_passes_ruff(i, ruff_report):
    ruff_report.check(i, CASES[i])
