"""Code for Python floats (emit_scalar.py: the math module and Python operators) gives
NumPy's values, infinities, nans and warnings: at points at and past the edges of each
function's domain, a gradient at Python floats is the gradient at 0-d float64 arrays
(NumPy code) and the dynamic tape's there (eager NumPy), with the same kinds of warning, and
raises the same warning under simplefilter("error"). Issue 25: grad(np.arccos)(1.0)
raised ZeroDivisionError, (2.0) math's ValueError, where NumPy gives -inf and nan."""

import ast
import re
import warnings

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen import passes, tape

# functions of one Python float calling NumPy, each primitive with a math-module form
# (emit_scalar.SCALAR), and where each is compiled (inside its domain)
NUMPY_CALLS = {
    "arccos": np.arccos, "arcsin": np.arcsin, "arctan": np.arctan,
    "log": np.log, "log1p": np.log1p, "log2": np.log2, "log10": np.log10,
    "sqrt": np.sqrt, "exp": np.exp, "expm1": np.expm1, "exp2": np.exp2,
    "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
    "arcsinh": np.arcsinh, "arccosh": np.arccosh, "arctanh": np.arctanh,
    "reciprocal": np.reciprocal, "divide": lambda a: np.divide(2.0, a),
    "square": np.square, "absolute": np.abs,
    "power half": lambda a: np.power(a, 0.5), "power -1": lambda a: np.power(a, -1.0),
    "power 2.5": lambda a: np.power(a, 2.5), "base power": lambda a: np.power(2.5, a),
    "hypot": lambda a: np.hypot(a, 3.0), "arctan2": lambda a: np.arctan2(a, 1.0),
    "overflow": lambda a: np.exp(a) * 1e308,
    "inf - inf": lambda a: np.multiply(a, 2.0) - a,
    "composed": lambda a: np.log(a) * np.sqrt(a) + np.arccos(a) / a,
}
# the user's own Python operators on the float: Python's values and errors (1.0 / 0.0
# raises ZeroDivisionError), as the function itself gives them; derivatives NumPy's
PYTHON_OPERATORS = {
    "reciprocal": lambda a: 1.0 / a, "power half": lambda a: a ** 0.5,
    "power -1": lambda a: a ** -1.0, "overflow": lambda a: a * 1e308 * a,
    "inf - inf": lambda a: (a * 2.0) - a, "square": lambda a: a * a,
    "mixed": lambda a: np.sqrt(a) * a + 1.0 / (a + 1.0),
}
COMPILED_AT = {"arccosh": 1.5}
POINTS = (0.0, -0.0, 1.0, -1.0, 2.0, 0.5, np.inf, -np.inf, np.nan)


def _kinds(caught):
    """What NumPy's warnings say went wrong, not where ("divide by zero encountered in
    scalar divide" and "in divide" are one kind)."""
    found = set()
    for w in caught:
        match = re.match(r"(divide by zero|invalid value|overflow)", str(w.message))
        assert match and w.category is RuntimeWarning, f"not NumPy's warning: {w}"
        found.add(match.group(1))
    return found


def _run(fn, *args):
    """(what fn returns, or the exception it raises; the kinds of warning it gives)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = fn(*args)
        except Exception as error:  # noqa: BLE001 - compared with the reference's
            result = error
    return result, _kinds(caught)


def _same(got, want, label):
    if isinstance(want, Exception):
        assert type(got) is type(want), f"{label}: {got!r}, not {want!r}"
        return
    assert not isinstance(got, Exception), f"{label}: raised {got!r}, NumPy gives {want!r}"
    got, want = np.asarray(got, dtype=complex), np.asarray(want, dtype=complex)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=0, err_msg=label)
    assert (np.signbit(got.real) == np.signbit(want.real)).all() or np.isnan(want).any(), label


def _compiled(fun, name="", grad=False):
    """value_and_grad(fun) (or grad), compiled at a point inside fun's domain (then served
    by the cache at every point, a float being an input), and its 0-d arrays' version."""
    at = COMPILED_AT.get(name, 0.25)
    vg = (ad.grad if grad else ad.value_and_grad)(fun)
    vg(at)
    arrays = (ad.grad if grad else ad.value_and_grad)(fun)
    arrays(np.array(at))
    return vg, arrays


@pytest.mark.parametrize("name", NUMPY_CALLS)
def test_python_floats_give_numpys_values_and_warnings(name):
    fun = NUMPY_CALLS[name]
    vg, vg_arrays = _compiled(fun, name)
    reference = tape.value_and_grad(fun)
    for x in POINTS:
        got, got_kinds = _run(vg, x)
        want, want_kinds = _run(vg_arrays, np.array(x))
        taped, taped_kinds = _run(reference, np.array(x))  # eager NumPy
        eager, eager_kinds = _run(fun, x)  # the value alone, as NumPy computes it
        label = f"{name} at {x}"
        _same(got, want, f"{label}: Python float vs 0-d array")
        _same(got, taped, f"{label}: vs the tape")
        _same(got[0], eager, f"{label}: vs NumPy")
        assert got_kinds == want_kinds == taped_kinds, \
            f"{label}: warnings {got_kinds}, 0-d arrays {want_kinds}, tape {taped_kinds}"
        assert eager_kinds <= got_kinds, label


@pytest.mark.parametrize("name", PYTHON_OPERATORS)
def test_python_operators_keep_pythons_values_and_errors(name):
    """The user's `1.0 / a` raises ZeroDivisionError at 0.0 as Python's does, called
    alone; the value is the function's own, the derivative NumPy's (the 0-d arrays')."""
    fun = PYTHON_OPERATORS[name]
    vg, vg_arrays = _compiled(fun, name)
    for x in POINTS:
        got, got_kinds = _run(vg, x)
        eager, eager_kinds = _run(fun, x)
        want, want_kinds = _run(vg_arrays, np.array(x))
        label = f"{name} at {x}"
        if isinstance(eager, Exception):
            _same(got, eager, label)
            continue
        _same(got[0], eager, f"{label}: vs Python")
        _same(got[1], want[1], f"{label}: the derivative vs 0-d arrays")
        assert eager_kinds <= got_kinds <= want_kinds, label


@pytest.mark.parametrize("name", NUMPY_CALLS)
def test_a_warning_raised_as_an_error_is_numpys(name):
    """Under simplefilter("error"), the call raises NumPy's RuntimeWarning where the code
    for 0-d arrays does, and no math-module error (ValueError, ZeroDivisionError)."""
    fun = NUMPY_CALLS[name]
    for grad in (False, True):
        call, arrays = _compiled(fun, name, grad)
        for x in POINTS:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                got, _ = _run(call, x)
                want, _ = _run(arrays, np.array(x))
            assert type(got) is type(want) if isinstance(want, Exception) \
                else not isinstance(got, Exception), f"{name} at {x}: {got!r}, {want!r}"


def test_two_python_floats_give_numpys_values_and_warnings():
    def f(a, b):
        return np.log(a) * b + np.arccos(b) / a
    vg, vg_arrays = ad.value_and_grad(f, argnums=(0, 1)), ad.value_and_grad(f, argnums=(0, 1))
    vg(0.5, 0.25)
    vg_arrays(np.array(0.5), np.array(0.25))
    for a in (0.0, 1.0, -1.0, np.inf):
        for b in (0.0, 1.0, 2.0, np.nan):
            got, got_kinds = _run(vg, a, b)
            want, want_kinds = _run(vg_arrays, np.array(a), np.array(b))
            _same((got[0], *got[1]), (want[0], *want[1]), f"at {a}, {b}")
            assert got_kinds == want_kinds, f"at {a}, {b}: {got_kinds}, {want_kinds}"


@pytest.mark.parametrize("x", [1.0, 2.0, -1.0])
def test_the_first_call_at_an_edge_traces_and_returns_numpys_value(x):
    """Issue 25's report: grad(arccos) at 1.0 is -inf, at 2.0 nan, each with NumPy's
    warning, also when the first call (the trace) is at that point."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = ad.grad(lambda a: np.arccos(a))(x)
        value_and_gradient = ad.value_and_grad(lambda a: np.arccos(a))(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = tape.grad(lambda a: np.arccos(a))(np.array(x))
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(value_and_gradient[1], want)
    assert _kinds(caught) == ({"invalid value"} if x == 2.0 else {"divide by zero"})


def test_finite_values_keep_math_module_code_and_python_floats():
    """Inside the domains the math module's code runs (no NumPy call, Python floats out);
    its NumPy twin, which the function calls where math raises or a value is not finite,
    is the same graph with NumPy calls."""
    vg, _ = _compiled(lambda a: np.log(a) * 2.0 + np.arccos(a) * a)
    value, gradient = vg(0.5)
    assert type(value) is float and type(gradient) is float
    source = vg.source(0.5)
    functions = {d.name: d for d in ast.parse(source).body if isinstance(d, ast.FunctionDef)}
    assert set(functions) == {"f_value_and_grad", "f_value_and_grad_numpy"}
    names = {n.id for n in ast.walk(functions["f_value_and_grad"]) if isinstance(n, ast.Name)}
    assert "np" not in names and "math" in names
    assert "math" not in {n.id for n in ast.walk(functions["f_value_and_grad_numpy"])
                          if isinstance(n, ast.Name)}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value, gradient = vg(0.0)  # log(0.0): math raises, NumPy's -inf
    assert value == -np.inf and gradient == np.inf and _kinds(caught) == {"divide by zero"}


def test_a_finiteness_check_reads_few_values():
    """The check reads the float inputs and the values Python's operators may make
    infinite silently (1e308 * 10.0), less those a checked sum or product reads: its
    being finite says they are (inf - inf and inf * 0.0 are nan)."""
    vg, _ = _compiled(lambda a: np.log(a) * 2.0 + a * a - np.sin(a))
    source = vg.source(0.25)
    check = next(line for line in source.splitlines() if "math.isfinite" in line)
    read = "f + g_a" if passes.ENABLED else "f + g_log + g_a"  # g_log: 1.0 * 2.0 unfolded
    assert check.strip() == f"if not math.isfinite({read}):", source
