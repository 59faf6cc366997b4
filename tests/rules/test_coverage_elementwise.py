"""Elementwise coverage: the rules beyond the basics, their edge cases, and pass-throughs.

Like tests/rules/test_rules.py, one table, `CASES`: a name, a function in plain NumPy, a
generator per argument (a domain on which the function is smooth) and the argnums. Every
row goes through `check_grads` (generated vs tape vs finite differences, reverse and
forward mode, and the transposition test) in float64, a subset again in float32 and a
subset to second order (the generated Hessian against finite differences of the
generated gradient). Rows that need SciPy are skipped without it.

Functions end in `_s(z) = sum(sin(z))` so that cotangents differ from element to element.
"""

import operator
import os
import re
from dataclasses import dataclass

import numpy as np
import pytest
import tables
from tables import const, f64, nonzero, normal, positive, shape_id, uniform
from tables import sum_sin as _s

import autodiffgen
from autodiffgen import tape

try:
    from scipy import special
except ImportError:  # SciPy is optional: its rows are skipped
    special = None


# ---- argument domains beyond the shared ones (tables.py): each is rng -> value ----------
def unit(*shape):
    """|x| < 0.9: inside the domain of arcsin, arccos and arctanh."""
    return uniform(-0.9, 0.9, *shape)


def above_one(*shape):
    return uniform(1.2, 3.0, *shape)


def probability(*shape):
    return uniform(0.1, 0.9, *shape)


def off_grid(step, *shape):
    """Values at least step/10 away from multiples of step/2 (rounding's jumps)."""
    def make(rng):
        k = rng.integers(-6, 6, shape)
        return (k + rng.uniform(0.1, 0.4, shape)) * (step / 2)
    return make


@dataclass
class Case(tables.Case):
    scipy: bool = False  # the row needs scipy.special: skipped without SciPy


CASES = []


def case(name, f, *args, argnums=0, scipy=False, **check):
    CASES.append(Case(name, f, args, argnums, check, scipy))


# ---- unary ufuncs on a matrix and a 0-d array -------------------------------------------
_UNARY = [
    ("cbrt", np.cbrt, nonzero), ("exp2", np.exp2, normal), ("log2", np.log2, positive),
    ("log10", np.log10, positive), ("arcsin", np.arcsin, unit), ("arccos", np.arccos, unit),
    ("arcsinh", np.arcsinh, normal), ("arccosh", np.arccosh, above_one),
    ("arctanh", np.arctanh, unit), ("deg2rad", np.deg2rad, normal),
    ("rad2deg", lambda x: np.rad2deg(x) / 90, normal), ("radians", np.radians, normal),
    ("degrees", lambda x: np.degrees(x) / 90, normal), ("fabs", np.fabs, nonzero),
    ("sinc", np.sinc, normal), ("square", np.square, normal),
    ("reciprocal", np.reciprocal, nonzero),
]
for _op, _fn, _dom in _UNARY:
    case(f"{_op}-3x4", lambda x, fn=_fn: _s(fn(x)), _dom(3, 4))
    case(f"{_op}-0d", lambda x, fn=_fn: _s(fn(x)), f64(_dom()))
case("sinc-wide", lambda x: _s(np.sinc(x)), uniform(-4, 4, 10))
case("sinc-through-zero", lambda x: _s(np.sinc(x - 0.5)), const(np.array([0.5, 0.25, 1.5])))

# ---- binary ufuncs on broadcasting shape pairs ------------------------------------------
_BINARY = [
    ("logaddexp", np.logaddexp, normal, normal),
    ("logaddexp2", np.logaddexp2, normal, normal),
    ("arctan2", np.arctan2, normal, nonzero),
    ("hypot", np.hypot, nonzero, nonzero),
    ("fmax", np.fmax, normal, normal),
    ("fmin", np.fmin, normal, normal),
    ("true_divide", np.true_divide, normal, nonzero),
    ("divide-operator", lambda x, y: x / y, normal, nonzero),
    ("power-array-exponent", np.power, positive, normal),
    ("remainder", np.remainder, normal, positive),
    ("mod-operator", lambda x, y: x % y, normal, positive),
    ("fmod", np.fmod, normal, positive),
]
_PAIRS = [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((2, 3, 4), (3, 1)), ((), (3,)), ((2, 3), ())]
for _op, _fn, _dx, _dy in _BINARY:
    for _sx, _sy in _PAIRS:
        case(f"{_op}-{shape_id(_sx)}-{shape_id(_sy)}", lambda x, y, fn=_fn: _s(fn(x, y)),
             _dx(*_sx), _dy(*_sy), argnums=(0, 1))
case("np.mod", lambda x: _s(np.mod(x, 0.75)), normal(3, 4))
case("arctan2-constant-x", lambda y: _s(np.arctan2(y, 2.0)), normal(5))
case("hypot-same-operand", lambda x: _s(np.hypot(x, x)), nonzero(4))
case("fmax-scalar", lambda x: _s(np.fmax(x, 0.0)), nonzero(3, 4))

# ---- power's edge cases -----------------------------------------------------------------
_WITH_ZERO = const(np.array([0.0, 1.5, -2.0, 0.0]))
_ZERO_OR_MORE = const(np.array([0.0, 1.5, 2.0, 0.0]))  # x ** y has no y-derivative at x < 0
for _p in (2, 2.0, 3, -1.5, 0.5):
    case(f"power-scalar-exponent-{_p}", lambda x, p=_p: _s(x ** p), positive(3, 4))
case("power-at-zero-exponent-2", lambda x: _s(x ** 2), _WITH_ZERO)
case("np.power-at-zero-exponent-2.0", lambda x: _s(np.power(x, 2.0)), _WITH_ZERO)
case("power-at-zero-array-exponent", lambda x, y: _s(x ** y), _ZERO_OR_MORE,
     const(np.full(4, 2.0)), argnums=(0, 1))
case("power-at-zero-0d-exponent", lambda x, y: _s(x ** y), _ZERO_OR_MORE,
     const(np.array(2.0)), argnums=(0, 1))
case("square-at-zero", lambda x: _s(np.square(x)), _WITH_ZERO)
case("reciprocal-negative", lambda x: _s(np.reciprocal(x) + x ** -2), uniform(-2, -0.5, 5))

# ---- no derivative: the value passes through, the gradient is zero ----------------------
_STEPS = [
    ("sign", np.sign, nonzero(3, 4)), ("floor", np.floor, off_grid(2, 3, 4)),
    ("ceil", np.ceil, off_grid(2, 3, 4)), ("rint", np.rint, off_grid(2, 3, 4)),
    ("trunc", np.trunc, off_grid(2, 3, 4)), ("np.round", np.round, off_grid(2, 3, 4)),
    ("np.around", np.around, off_grid(2, 3, 4)),
    ("np.round-decimals", lambda x: np.round(x, 1), off_grid(0.2, 3, 4)),
    ("np.round-decimals-keyword", lambda x: np.round(x, decimals=2), off_grid(0.02, 3, 4)),
    ("round-method", lambda x: x.round(1), off_grid(0.2, 3, 4)),
    ("round-builtin-0d", round, f64(off_grid(2))),
    ("floor_divide", lambda x: x // 0.5, off_grid(1, 3, 4)),
    ("np.floor_divide", lambda x: np.floor_divide(x, 2.0), off_grid(4, 3, 4)),
]
for _op, _fn, _dom in _STEPS:
    case(f"{_op}-alone", lambda x, fn=_fn: _s(fn(x)), _dom)
    case(f"{_op}-times-x", lambda x, fn=_fn: _s(fn(x) * x), _dom)
case("isfinite-where", lambda x: _s(np.where(np.isfinite(1 / x), x, 0.0)), nonzero(3, 4))
case("isnan-isinf", lambda x: _s(x * ~np.isnan(x) * ~np.isinf(x)), normal(3, 4))

# ---- pass-throughs: indices, counts, constants of a traced shape ------------------------
case("argmax-index", lambda x: _s(x[np.arange(3), np.argmax(x, axis=1)]), normal(3, 4))
case("argmin-method", lambda x: _s(x[x.argmin(axis=0), np.arange(4)] * x[0]), normal(3, 4))
case("argmax-flat", lambda x: _s(x[np.argmax(x)] * x), normal(5))
case("argmax-keepdims", lambda x: _s(x.argmax(axis=1, keepdims=True) * x), normal(3, 4))
case("argsort", lambda x: _s(x[np.argsort(x)] * np.arange(1.0, 6.0)), normal(5))
case("argsort-method-axis0", lambda x: _s(x[x.argsort(axis=0)[0], np.arange(4)]), normal(3, 4))
case("count_nonzero", lambda x: np.sum(np.sin(x) ** 2) / np.count_nonzero(x > 0),
     nonzero(3, 4))
case("count_nonzero-axis", lambda x: _s(x * np.count_nonzero(x > 0, axis=0)), nonzero(3, 4))
case("full_like", lambda x: _s(x * np.full_like(x, 2.5)), normal(3, 4))
case("full_like-traced-fill", lambda x, c: _s(x * np.full_like(x, c)), normal(3, 4),
     f64(normal()), argnums=(0, 1))
case("empty_like", lambda x: _s(x + 0.0 * np.empty_like(x)), normal(2, 3))

# ---- scipy.special ----------------------------------------------------------------------
if special is not None:
    _SPECIAL = [
        ("expit", special.expit, normal), ("logit", special.logit, probability),
        ("erf", special.erf, normal), ("erfc", special.erfc, normal),
        ("gammaln", special.gammaln, positive), ("digamma", special.digamma, positive),
        ("psi", special.psi, positive),
    ]
    for _op, _fn, _dom in _SPECIAL:
        case(f"scipy-{_op}-3x4", lambda x, fn=_fn: _s(fn(x)), _dom(3, 4), scipy=True)
        case(f"scipy-{_op}-0d", lambda x, fn=_fn: _s(fn(x)), f64(_dom()), scipy=True)
    for _sx, _sy in _PAIRS:
        case(f"scipy-xlogy-{shape_id(_sx)}-{shape_id(_sy)}",
             lambda x, y: _s(special.xlogy(x, y)), normal(*_sx), positive(*_sy),
             argnums=(0, 1), scipy=True)
    case("scipy-xlogy-zero-x", lambda x, y: _s(special.xlogy(x, y)),
         const(np.array([0.0, 0.5, 0.0])), const(np.array([0.0, 2.0, 3.0])), argnums=1,
         scipy=True)
    case("scipy-polygamma-2", lambda x: _s(_polygamma(2, x)), positive(3, 4), scipy=True)
    case("scipy-gammaln-digamma", lambda x: _s(special.gammaln(x) * special.digamma(x)),
         positive(5), scipy=True)

BY_NAME = tables.by_name(CASES)


def _polygamma(n, x):
    from autodiffgen.rules.special import polygamma

    return polygamma(n, x)


def _needs(c):
    if c.scipy:
        pytest.importorskip("scipy.special")


# ---- first order, float64 ---------------------------------------------------------------
@pytest.mark.parametrize("c", CASES, ids=[c.name for c in CASES])
def test_gradients(c):
    _needs(c)
    tables.check_gradients(c)


ZERO_GRADIENT = [c for c in CASES if c.name.endswith("-alone")]


@pytest.mark.parametrize("c", ZERO_GRADIENT, ids=[c.name for c in ZERO_GRADIENT])
def test_steps_have_zero_gradient(c):
    args = c.make_args()
    g = autodiffgen.grad(c.f)(*args)
    np.testing.assert_array_equal(g, np.zeros_like(args[0]))


# ---- float32: gradients stay float32 and no rule computes in float64 --------------------
FLOAT32 = ["cbrt-3x4", "exp2-3x4", "log2-3x4", "log10-3x4", "arcsin-3x4", "arccos-3x4",
           "arcsinh-3x4", "arccosh-3x4", "arctanh-3x4", "deg2rad-3x4", "rad2deg-3x4",
           "fabs-3x4", "sinc-3x4", "sinc-through-zero", "logaddexp-3x1-1x4",
           "logaddexp2-2x3x4-3x1", "arctan2-3x4-3x4", "hypot-3x1-1x4", "fmax-2x3x4-3x1",
           "fmin-3x4-3x4", "true_divide-3x1-1x4", "power-array-exponent-3x4-3x4",
           "remainder-3x4-3x4", "power-at-zero-array-exponent", "np.round-decimals-times-x",
           "argmax-index", "full_like-traced-fill", "scipy-expit-3x4", "scipy-logit-3x4",
           "scipy-erf-3x4", "scipy-erfc-3x4", "scipy-gammaln-3x4", "scipy-digamma-3x4",
           "scipy-xlogy-3x1-1x4"]

# Cases whose generated code computes in float64 whatever the input dtype.
PROMOTING = {"scipy-digamma-3x4": "SciPy's polygamma has only a float64 loop; the _polygamma "
                                  "helper casts its result back to x's dtype"}


@pytest.mark.parametrize("name", FLOAT32)
def test_float32_gradients(name):
    if name not in BY_NAME:  # a SciPy row, left out of the table without SciPy
        pytest.importorskip("scipy.special")
    tables.check_float32(BY_NAME[name], rtol=1e-3, atol=1e-4, eps=1e-3,
                         arg_types=(np.ndarray, np.generic), check_source=name not in PROMOTING)


# ---- second order: the generated Hessian against differences of the generated gradient --
SECOND = [
    ("cbrt", lambda x: _s(np.cbrt(x)), nonzero(3)),
    ("exp2", lambda x: _s(np.exp2(x)), normal(3)),
    ("log10", lambda x: _s(np.log10(x)), positive(3)),
    ("arcsin", lambda x: _s(np.arcsin(x)), unit(3)),
    ("arccosh", lambda x: _s(np.arccosh(x)), above_one(3)),
    ("arctanh", lambda x: _s(np.arctanh(x)), unit(3)),
    ("logaddexp", lambda x: _s(np.logaddexp(x, x[::-1] * 0.5)), normal(3)),
    ("arctan2", lambda x: _s(np.arctan2(x, x[::-1] + 1.0)), positive(3)),
    ("hypot", lambda x: _s(np.hypot(x, x[::-1] * 0.5)), nonzero(3)),
    ("sinc", lambda x: _s(np.sinc(x)), uniform(-2, 2, 3)),
    ("power-array-exponent", lambda x: _s(x ** x[::-1]), positive(3)),
    ("power-at-zero", lambda x: _s(x ** 2 * x[::-1]), const(np.array([0.0, 1.0, -0.5]))),
    ("fmax", lambda x: _s(np.fmax(x * x, x[::-1])), const(np.array([0.3, -1.2, 2.1]))),
    ("scipy-expit", lambda x: _s(special.expit(x)), normal(3)),
    ("scipy-erf", lambda x: _s(special.erf(x)), normal(3)),
    ("scipy-gammaln", lambda x: _s(special.gammaln(x)), positive(3)),
    ("scipy-digamma", lambda x: _s(special.digamma(x)), positive(3)),
    ("scipy-xlogy", lambda x: _s(special.xlogy(x, x[::-1] + 1)), positive(3)),
]


@pytest.mark.parametrize("name,f,dom", SECOND, ids=[s[0] for s in SECOND])
def test_second_derivatives(name, f, dom):
    if name.startswith("scipy"):
        pytest.importorskip("scipy.special")
    tables.check_hessian(f, dom(tables.rng_for(name)), symmetry={"rtol": 1e-10, "atol": 1e-12})


# ---- edge values --------------------------------------------------------------------------
def test_sinc_gradient_at_zero_is_zero_without_warnings():
    x = np.array([0.0, 0.5, -1.0, 0.0])
    with np.errstate(all="raise"):
        g = autodiffgen.grad(lambda x: np.sum(np.sinc(x)))(x)
    expected = (np.cos(np.pi * x[1:3]) - np.sinc(x[1:3])) / x[1:3]
    np.testing.assert_allclose(g, [0.0, *expected, 0.0], rtol=1e-12)


def test_power_at_zero_gives_zero_not_nan():
    x = np.array([0.0, 2.0])
    y = np.array([2.0, 2.0])
    with np.errstate(all="raise"):
        gx, gy = autodiffgen.grad(lambda x, y: np.sum(x ** y), argnums=(0, 1))(x, y)
        g2 = autodiffgen.grad(lambda x: np.sum(np.power(x, 2)))(x)
    np.testing.assert_allclose(gx, [0.0, 4.0])
    np.testing.assert_allclose(gy, [0.0, 4.0 * np.log(2.0)])
    np.testing.assert_allclose(g2, [0.0, 4.0])


def test_fmax_and_fmin_split_ties_like_maximum():
    x = np.array([1.0, 2.0, 3.0])
    y = np.array([1.0, 0.0, 3.0])
    for op, winner in ((np.fmax, 1.0), (np.fmin, 0.0)):
        gx, gy = autodiffgen.grad(lambda x, y, op=op: np.sum(op(x, y) * 3.0),
                                  argnums=(0, 1))(x, y)
        np.testing.assert_allclose(gx, [1.5, 3 * winner, 1.5])
        np.testing.assert_allclose(gy, [1.5, 3 - 3 * winner, 1.5])


def test_xlogy_gradient_in_y_is_zero_where_x_is_zero():
    pytest.importorskip("scipy.special")
    x = np.array([0.0, 2.0])
    y = np.array([0.0, 4.0])
    with np.errstate(all="raise"):
        gy = autodiffgen.grad(lambda y: np.sum(special.xlogy(x, y)))(y)
    np.testing.assert_allclose(gy, [0.0, 0.5])


# ---- pass-throughs are recomputed by the generated code ---------------------------------
def _picked(x):
    return np.sum(np.sin(x[np.arange(x.shape[0]), np.argmax(x, axis=1)]) * x[:, 0])


def test_argmax_is_recomputed_from_new_inputs():
    f = autodiffgen.value_and_grad(_picked)
    x1 = np.array([[3.0, 1.0, 2.0], [0.0, 5.0, 1.0]])
    x2 = np.array([[1.0, 1.5, 4.0], [6.0, 5.0, 1.0]])  # other winners: columns 2 and 0
    assert "np.argmax(x, axis=1)" in f.source(x1)
    for x in (x1, x2):
        value, g = f(x)
        tape_value, tape_g = tape.value_and_grad(_picked)(x)
        np.testing.assert_allclose(value, _picked(x), rtol=1e-12)
        np.testing.assert_allclose(value, tape_value, rtol=1e-12)
        np.testing.assert_allclose(g, tape_g, rtol=1e-12)
        rows = np.arange(2)
        cols = np.argmax(x, axis=1)
        expected = np.zeros_like(x)
        expected[rows, cols] += np.cos(x[rows, cols]) * x[:, 0]
        expected[:, 0] += np.sin(x[rows, cols])
        np.testing.assert_allclose(g, expected, rtol=1e-12)
    assert f.cache_info().misses == 1 and f.cache_info().hits == 2


def test_argsort_and_count_nonzero_are_recomputed():
    def f(x):
        order = x.argsort()
        return np.sum(x[order] * np.arange(1.0, 5.0)) / np.count_nonzero(x > 0)

    g = autodiffgen.grad(f)
    for x in (np.array([0.3, -1.0, 2.0, 0.5]), np.array([-2.0, -0.1, 4.0, 1.0])):
        expected = np.empty(4)
        expected[np.argsort(x)] = np.arange(1.0, 5.0) / np.count_nonzero(x > 0)
        np.testing.assert_allclose(g(x), expected, rtol=1e-12)
    source = g.source(x)
    assert "np.argsort(x)" in source and "np.count_nonzero(" in source, source


def test_full_and_empty_like_keep_shape_and_dtype():
    x = np.ones((2, 3), np.float32)

    def f(x):
        full = np.full_like(x, 2.0, dtype=np.float64)
        empty = np.empty_like(x, shape=(3,))
        assert full.dtype == np.float64 and empty.shape == (3,) and empty.dtype == np.float32
        return np.sum(x * np.full_like(x, 3.0))

    g = autodiffgen.grad(f)(x)
    assert g.dtype == np.float32
    np.testing.assert_array_equal(g, np.full((2, 3), 3.0, np.float32))


@pytest.mark.parametrize("call", [np.nonzero, np.argwhere, np.flatnonzero,
                                  operator.methodcaller("nonzero")],
                         ids=["nonzero", "argwhere", "flatnonzero", "method"])
def test_data_dependent_shapes_follow_the_data(call):
    """Indices as many as the data says: one trace serves every count (tests/generalize/test_sizes.py
    has the rest)."""
    def f(x):
        return np.sum(x[call(x > 0)] ** 2)

    g = autodiffgen.grad(f)
    for x in ([1.0, -1.0, 2.0, 3.0], [1.0, 2.0, 3.0, 4.0], [-1.0, -2.0, 3.0, -4.0]):
        x = np.array(x)
        np.testing.assert_allclose(g(x), np.where(x > 0, 2 * x, 0.0))
    assert g.cache_info().misses == 1


# ---- generated source: clean, standalone, the same results --------------------------------
RUFF_CASES = ["cbrt-3x4", "sinc-3x4", "logaddexp-3x1-1x4", "np.round-decimals-times-x",
              "argmax-index", "argsort", "count_nonzero", "full_like-traced-fill",
              "scipy-digamma-3x4", "scipy-xlogy-3x1-1x4", "scipy-gammaln-digamma"]


def test_generated_source_passes_ruff_and_runs_standalone(tmp_path):
    cases = [BY_NAME[n] for n in RUFF_CASES if n in BY_NAME]
    for i, c in enumerate(cases):
        for standalone in (False, True):
            source = autodiffgen.emit(c.f, *c.make_args(), argnums=c.argnums,
                                      standalone=standalone)
            (tmp_path / f"case_{i}_{int(standalone)}.py").write_text(source)
            if c.scipy:
                assert "\nimport numpy as np\nimport scipy.special\n" in source, source
            else:
                assert "scipy" not in source, source
    problems = [f"{os.path.basename(d['filename'])} {d['code']}: {d['message']}"
                for d in tables.run_ruff(tmp_path)]
    assert not problems, "\n".join(problems)
    for i, c in enumerate(cases):  # a standalone module runs on its own, in a fresh namespace
        scope = {"__name__": "standalone"}
        exec((tmp_path / f"case_{i}_1.py").read_text(), scope)  # noqa: S102
        name = next(k for k in scope if re.fullmatch(r".*_value_and_grad", k))
        args = c.make_args()
        expected = autodiffgen.value_and_grad(c.f, argnums=c.argnums)(*args)
        got = scope[name](*args)
        np.testing.assert_allclose(got[0], expected[0], rtol=1e-12)
        _, got_grads = tables.per_argument(c.argnums, got[1])
        _, expected_grads = tables.per_argument(c.argnums, expected[1])
        for a, b in zip(got_grads, expected_grads, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-12)


def test_python_float_booleans_follow_numpy():
    def f(x):
        return x * (np.greater(x, 0) + np.greater(x, 1))  # np.bool_ + np.bool_ is True
    value, g = autodiffgen.value_and_grad(f)(2.0)
    assert value == 2.0 and g == 1.0
