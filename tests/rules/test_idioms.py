"""NumPy idioms that build arrays from traced values or need a composed path: np.array /
np.asarray of traced values and nested lists of them, np.r_, np.c_, np.full(_like) with a
traced fill, NumPy functions given a list of traced values, np.float_power, the einsum
sublist form, np.gradient, np.partition / np.argpartition, np.pad's gathering modes, and
the predicates (np.allclose, np.isclose, np.array_equal, ...) on traced values.

Laid out like test_coverage_extras.py: one table, `CASES`, checked by `check_grads` in
float64 (generated code, tape, finite differences, forward mode), a subset in float32 and
to second order, and every row's generated source must pass ruff.
"""

import numpy as np
import pytest
import tables
from tables import distinct, f64, normal, positive, pyfloat
from tables import sum_sin as _s

import autodiffgen
from autodiffgen import tape
from autodiffgen.errors import UnsupportedOperationError


def _ramp(z):
    """sum(sin(z * (1, 2, 3, ...))): every position weighed differently."""
    return _s(z * np.arange(1, 1 + np.size(z), dtype=z.dtype).reshape(np.shape(z)))


CASES = []


def case(name, f, *args, argnums=0, **check):
    CASES.append(tables.Case(name, f, args, argnums, check))


# ---- np.array / np.asarray of traced values ----------------------------------------------
case("array-of-scalars", lambda x: _ramp(np.array([x[0], x[1] * 2.0, x[2] + 2.5])), normal(3))
case("array-nested-mixed", lambda x: _ramp(np.array([[x[0], 0.0], [x[1], x[2]]])), normal(3))
case("array-of-arrays", lambda x: _ramp(np.array([x, 2.0 * x])), normal(3, 2))
case("array-of-arrays-2d", lambda x: _ramp(np.array([[2 * x, x + 1], [x, x]])), normal(3, 2))
case("array-from-scalar", lambda x: _s(np.array(x) * 3.0), f64(normal()))
case("astype-function", lambda x: _s(np.astype(x * 2.0, x.dtype) * x), normal(2, 3))
case("array-from-pyfloat", lambda x: _ramp(np.array([x, x * x, 1.0])), pyfloat(normal()))
case("array-tuple-ndmin", lambda x: _ramp(np.array((x[0], x[1]), ndmin=2)), normal(2))
case("asarray-self", lambda x: _ramp(np.asarray(x) * x), normal(3))
case("asarray-list", lambda x, y: _ramp(np.asarray([x, y, x * y])), normal(2), normal(2),
     argnums=(0, 1))
case("asanyarray-list", lambda x: _ramp(np.asanyarray([x[0], x[1]])), normal(2))
case("array-fanout", lambda x: _ramp(np.array([x[0], x[1]]) + np.array([x[1], x[0]])), normal(2))

# ---- np.r_ and np.c_ --------------------------------------------------------------------
case("r_-single", lambda x: _ramp(np.r_[x]), normal(3, 2))
case("r_-double", lambda x: _ramp(np.r_[x, x]), normal(3, 2))
case("r_-const-mixed", lambda x: _ramp(np.r_[x, np.ones((3, 2)), x]), normal(3, 2))
case("r_-slice-scalar", lambda x: _ramp(np.r_[x, 1:4, 2.5, x[0]]), normal(4))
case("c_-mixed", lambda x: _ramp(np.c_[x, np.ones((3, 2)), x]), normal(3, 2))
case("c_-vectors", lambda x: _ramp(np.c_[x, 2.0 * x, np.arange(3.0)]), normal(3))

# ---- np.full and np.full_like -----------------------------------------------------------
case("full-traced-fill", lambda x: _ramp(np.full((2, 3), x[0]) * x[1]), normal(2))
case("full-pyfloat-fill", lambda s: _ramp(np.full(4, s)), pyfloat(normal()))
case("full-array-fill", lambda x: _ramp(np.full((2, 3), x)), normal(3))
case("full_like-constant-shape", lambda x: _ramp(np.full_like(np.ones((2, 2)), x[0]) * x[1]),
     normal(2))

# ---- functions given a Python list of traced values -------------------------------------
case("mean-list", lambda x: np.sin(np.mean([x[0], x[1] * 2.0, 1.0])), normal(2))
case("sum-list-axis", lambda x: _ramp(np.sum([x, x * x], axis=0)), normal(3))
case("norm-list", lambda x: np.linalg.norm([x[0], x[1] * 2.0]), normal(2))
case("dot-lists", lambda x: np.sin(np.dot([x[0], x[1]], [x[1], 3.0])), normal(2))
case("max-list", lambda x: np.max([x[0], x[1] + 5.0]), normal(2))

# ---- float_power, einsum sublists, gradient, partition, pad -------------------------------
case("float_power", lambda x: _ramp(np.float_power(x, 2.5)), positive(3))
case("float_power-both", lambda x, y: _ramp(np.float_power(x, y)), positive(3), normal(3),
     argnums=(0, 1))
case("float_power-int-exponent", lambda x: _ramp(np.float_power(x, 3)), normal(2, 2))
case("einsum-sublist-out", lambda a, b: _ramp(np.einsum(a, [0, 1], b, [1, 2], [0, 2])),
     normal(2, 3), normal(3, 4), argnums=(0, 1))
case("einsum-sublist-implicit", lambda a, b: _ramp(np.einsum(a, [0, 1], b, [1, 2])),
     normal(2, 3), normal(3, 4), argnums=(0, 1))
case("einsum-sublist-ellipsis", lambda c, a: _ramp(np.einsum(c, [..., 0, 1], a, [0, 1], [...])),
     normal(5, 2, 3), normal(2, 3), argnums=(0, 1))
case("einsum-sublist-trace", lambda a: np.sin(np.einsum(a, [0, 0])), normal(3, 3))
case("gradient-1d", lambda x: _ramp(np.gradient(x)), normal(6))
case("gradient-2d-spacings", lambda x: sum(_ramp(g) for g in np.gradient(x, 0.5, 2.0)),
     normal(4, 3))
case("gradient-edge2-axis0", lambda x: _ramp(np.gradient(x, axis=0, edge_order=2)), normal(5, 3))
case("gradient-coordinates", lambda x: _ramp(np.gradient(x, np.array([0.0, 0.4, 1.5, 1.9, 3.0]),
                                                        axis=0, edge_order=2)), normal(5, 2))
case("gradient-traced-spacing", lambda x, h: _ramp(np.gradient(x, h)), normal(5),
     f64(positive()), argnums=(0, 1))
case("argpartition-gather", lambda x: _ramp(x[np.argpartition(x, 2)]), distinct(6))
case("argpartition-axis0", lambda x: _ramp(np.take_along_axis(
    x, np.argpartition(x, [0, 2], axis=0), axis=0)), distinct(4, 3))
for _mode in ("reflect", "symmetric", "edge", "wrap"):
    case(f"pad-{_mode}", lambda x, m=_mode: _ramp(np.pad(x, ((1, 2), (2, 0)), mode=m)),
         normal(3, 4))
case("pad-wrap-wide", lambda x: _ramp(np.pad(x, 5, mode="wrap")), normal(3))

# ---- predicates: plain values, read from traced data -------------------------------------
case("isclose-where", lambda x: _ramp(np.where(np.isclose(x, np.round(x)), x, x * x)), normal(5))
case("allclose-branch", lambda x: _ramp(x) if np.allclose(x, 0.0, atol=10.0) else _s(x * x),
     normal(3))
case("array_equal-branch", lambda x: _ramp(x) if np.array_equal(x, x[::-1]) else _s(x * x),
     normal(3))

BY_NAME = tables.by_name(CASES)

FLOAT32 = ["array-of-scalars", "array-of-arrays", "asarray-list", "r_-double", "r_-const-mixed",
           "c_-mixed", "full-traced-fill", "mean-list", "einsum-sublist-out", "gradient-1d",
           "pad-reflect", "array-nested-mixed"]
# rows whose own code promotes float32 to float64, as NumPy does (a Python float in a list,
# a float64 constant): their source may say float64
PROMOTED = {"array-nested-mixed", "r_-const-mixed", "c_-mixed", "mean-list"}
SECOND = ["array-of-scalars", "array-nested-mixed", "r_-double", "c_-vectors",
          "full-traced-fill", "norm-list", "float_power", "einsum-sublist-trace",
          "gradient-edge2-axis0", "pad-symmetric", "argpartition-gather"]


@pytest.mark.parametrize("c", CASES, ids=[c.name for c in CASES])
def test_gradients(c):
    tables.check_gradients(c)


@pytest.mark.parametrize("name", FLOAT32)
def test_float32_gradients(name):
    tables.check_float32(BY_NAME[name], rtol=1e-3, atol=1e-4, check_source=name not in PROMOTED)


@pytest.mark.parametrize("name", SECOND)
def test_hessian_against_finite_differences_of_grad(name):
    (x,) = BY_NAME[name].make_args()
    tables.check_hessian(BY_NAME[name].f, x)


ruff_report = tables.ruff_report_fixture(CASES, "generated_idioms")


@pytest.mark.parametrize("i", range(len(CASES)), ids=[c.name for c in CASES])
def test_generated_source_passes_ruff(i, ruff_report):
    ruff_report.check(i, CASES[i])


# ---- exact semantics ------------------------------------------------------------------------
def _write_into(make):
    """A function that writes into make(x) and returns what x then holds (times a weight)."""
    def f(x):
        y = make(x)
        y[0] = 10.0
        return np.sum(x * np.arange(1.0, 4.0)) + np.sum(y * y)
    return f


@pytest.mark.parametrize("make", [np.array, np.asarray, np.copy,
                                  lambda x: np.array(x, copy=False)],
                         ids=["array", "asarray", "copy", "array-nocopy"])
def test_array_copies_where_numpy_copies(make):
    """np.array(x) is a copy (a write leaves x alone), np.asarray(x) is x itself."""
    f = _write_into(make)
    x = np.array([0.5, -1.0, 2.0])
    for engine in (autodiffgen, tape):
        value, _ = engine.value_and_grad(f)(x)
        np.testing.assert_allclose(value, f(x.copy()))
    tables.check_gradients(tables.Case("write", f, (normal(3),)))


def test_array_keeps_numpys_dtype_and_shape():
    def f(x):
        a = np.array([x[0], x[1]], dtype=np.float32)
        b = np.array([[x[0]], [1]])
        c = np.asarray(x, dtype=np.float32)
        d = np.full((2, 2), x[0], dtype=np.float32)
        return a, b, c, d
    x = np.array([0.5, -1.0, 2.0])
    got, _ = autodiffgen.jvp(f, (x,), (x,))
    for g, e in zip(got, f(x), strict=True):
        assert g.dtype == e.dtype and g.shape == e.shape
        np.testing.assert_allclose(g, e)


def test_numpy_is_itself_again_after_the_trace():
    originals = (np.array, np.asarray, np.full, np.mean, np.linalg.norm, np.r_, np.c_)
    autodiffgen.grad(lambda x: np.sum(np.array([x[0], x[1]]) ** 2))(np.ones(2))
    after = (np.array, np.asarray, np.full, np.mean, np.linalg.norm, np.r_, np.c_)
    assert all(a is b for a, b in zip(originals, after, strict=True))
    assert np.r_[1:3, 5].tolist() == [1, 2, 5]


def test_lists_of_plain_values_inside_a_trace_stay_numpys():
    def f(x):
        return np.sum(x * np.array([1.0, 2.0])) * np.mean([1.0, 3.0]) + np.r_[1:3][1]
    check = autodiffgen.value_and_grad(f)(np.ones(2))
    np.testing.assert_allclose(check[0], f(np.ones(2)))


def test_r_with_a_string_directive_is_refused_at_the_users_line():
    with pytest.raises(UnsupportedOperationError, match="test_idioms.py.*string directive"):
        autodiffgen.grad(lambda x: np.sum(np.r_["0,2", x, x]))(np.ones(2))


def test_allclose_is_a_guard_and_another_path_traces_again():
    def f(x):
        return np.sum(x ** 2) if np.allclose(x, 1.0) else np.sum(x ** 3)
    vg = autodiffgen.value_and_grad(f)
    for x in (np.ones(3), np.array([1.0, 2.0, 3.0]), np.ones(3) + 1e-9, np.arange(3.0)):
        value, g = vg(x)
        np.testing.assert_allclose(value, f(x))
        np.testing.assert_allclose(g, 2 * x if np.allclose(x, 1.0) else 3 * x ** 2)
    assert vg.cache_info().misses == 2
    assert "raise GuardFailure" in vg.source(np.ones(3))


def test_predicates_give_numpys_answers():
    x = np.array([1.0, np.nan, np.inf, -2.0, 1e-9])
    y = np.array([1.0 + 1e-7, np.nan, np.inf, 2.0, 0.0])
    calls = [lambda x, y: np.isclose(x, y), lambda x, y: np.isclose(x, y, equal_nan=True),
             lambda x, y: np.isclose(x, y, rtol=0.0, atol=1e-8), lambda x, y: np.iscomplex(x),
             lambda x, y: np.isreal(y), lambda x, y: np.all(x > 0, axis=0),
             lambda x, y: np.any(np.isnan(x)), lambda x, y: x.all(), lambda x, y: y.any()]
    for call in calls:
        value, _ = autodiffgen.jvp(lambda x, c=call: np.where(c(x, y), x, 7.0), (x,), (x,))
        np.testing.assert_array_equal(value, np.where(call(x, y), x, 7.0))
    for scalar, others in [(np.allclose, (x, y, x + 1e-9)), (np.array_equal, (x, y, x[:2])),
                           (np.array_equiv, (x, y, x[:2], x[:1]))]:
        for b in others:
            got = []
            autodiffgen.grad(lambda a, b=b, p=scalar, got=got: got.append(p(a, b)) or np.sum(a))(x)
            assert got == [scalar(x, b)]


def test_int_and_float_conversions_of_an_index():
    """Autograd's test_cast_to_int: an int index read from traced values."""
    def f(w):
        inds = np.int64(w[:, -1])
        return np.sum(w[:, :-1][inds]) + np.float64(w[0, 0]) ** 2
    w = np.random.default_rng(0).standard_normal((5, 3))
    w = np.concatenate([w, np.array([[3.5], [0.4], [4.6], [1.3], [0.7]])], axis=1)
    tables.check_gradients(tables.Case("cast", f, (lambda rng: w,)))


def test_one_hot_of_an_integer_input():
    """A constant indexed by a traced integer argument (the labels): an input, not baked."""
    def loss(W, x, y):
        logits = x @ W
        logp = logits - np.log(np.sum(np.exp(logits), axis=1, keepdims=True))
        return -np.sum(np.eye(3)[y] * logp)
    rng = np.random.default_rng(1)
    W, x = rng.standard_normal((4, 3)), rng.standard_normal((6, 4))
    vg = autodiffgen.value_and_grad(loss)
    for _ in range(3):
        y = rng.integers(0, 3, 6)
        value, g = vg(W, x, y)
        np.testing.assert_allclose(value, loss(W, x, y))
        np.testing.assert_allclose(g, tape.grad(loss)(W, x, y))
    assert vg.cache_info().misses == 1
    tables.check_gradients(tables.Case("onehot", loss, (lambda r: W, lambda r: x,
                                                        lambda r: np.array([0, 2, 1, 1, 0, 2]))))


@autodiffgen.primitive
def _logsumexp(x):
    m = np.max(x)
    return m + np.log(np.sum(np.exp(x - m)))


# Autograd's define_gradient example: a rule that builds arrays with np.full runs on traced
# values too (the wrappers are in place while the rules run)
autodiffgen.defvjp(_logsumexp, lambda g, ans, x: np.full(x.shape, g)
                   * np.exp(x - np.full(x.shape, ans)))


def test_a_custom_rule_may_build_arrays_from_traced_values():
    f = lambda x: _logsumexp(np.sin(x)) * 2.0
    x = np.array([0.3, -1.2, 2.0])
    tables.check_gradients(tables.Case("custom", f, (lambda rng: x,), check={"fwd": False}))
    h = autodiffgen.hessian(f)(x)
    np.testing.assert_allclose(h, tables.differenced_hessian(f, x), rtol=1e-5, atol=1e-6)
