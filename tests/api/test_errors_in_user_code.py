"""Mistakes in the user's code (the function being differentiated): each ends in a correct
answer or an error that names the problem and the user's line (never a silently wrong
gradient).

Mistakes in how the library is called (arguments, argnums) are in test_errors_in_calls.py."""

import math
import subprocess
import sys

import numpy as np
import pytest

import autodiffgen
from autodiffgen import grad, tape
from autodiffgen.errors import TracingError
from autodiffgen.testing import check_grads

with open(__file__) as _source:
    HERE = _source.read().splitlines()


def line_of(marker):
    n = next(i for i, text in enumerate(HERE, 1) if text.rstrip().endswith(f"# {marker}"))
    return f"test_errors_in_user_code.py:{n}"


X = np.array([0.5, -1.5, 2.3])
X2D = np.linspace(0.5, 1.5, 6).reshape(2, 3)


# ---- these work: the answer is right -------------------------------------------------------
def isinstance_branch(x):
    if isinstance(x, np.ndarray):  # a Box answers for its value
        return (x ** 2).sum()
    return x.sum()


def python_max(x):
    return max(x[0], x[1]) * x[2]  # a guard on x[1] > x[0]


def python_round_index(x):
    return x[round(x[2] / 2)] * 3.0  # round() of a NumPy scalar is an int, guarded


def int_of_data(x):
    return (x[:int(x[2])] ** 2).sum()  # no derivative through int(): zero almost everywhere


def truthiness(x):
    return x.sum() if x[0] else x.prod()  # bool() of one element


def loop_over_rows(x):
    total = 0.0
    for row in x:  # iterating a traced array gives its rows
        total = total + np.sin(row)
    return total


def python_sum(x):
    return sum(x) * 2.0  # builtin sum over the rows, starting from 0


@pytest.mark.parametrize("fun", [isinstance_branch, python_max, python_round_index,
                                 int_of_data, truthiness, loop_over_rows, python_sum])
@pytest.mark.parametrize("x", [X, -X[::-1].copy(), np.array([1.0, 2.0, 3.9])])
def test_works_and_is_right(fun, x):
    check_grads(fun, x)
    np.testing.assert_allclose(grad(fun)(x), tape.grad(fun)(x))


def test_isinstance_of_a_float_argument():
    def f(x):
        return x ** 3 if isinstance(x, float) else x
    assert grad(f)(2.0) == pytest.approx(12.0)


# ---- these fail: the message names the problem and the line -------------------------------
def asarray(x):
    return (np.arange(3.0)[np.argsort(x)] * x).sum()  # asarray


def math_exp(x):
    return math.exp(x[0]) + x[1]  # math_exp


def array_of_elements(x):
    return np.array([x, x[:2]]).sum()  # array_of_elements


def fft(x):
    return np.fft.hfft(x).sum()  # fft


def float_of_param(x):
    return max(0.0, float(x.sum())) * 2.0  # float_of_param


def item_of_param(x):
    return x.sum().item() * 2.0  # item_of_param


def tolist(x):
    return sum(x.tolist())  # tolist


def ambiguous_truth(x):
    return x.sum() if x > 0 else -x.sum()  # ambiguous_truth


def numpy_out(x):
    h = np.zeros(3)
    np.add(h, x, out=h)  # numpy_out
    return h.sum()


def unknown_method(x):
    return x.byteswap().sum()  # unknown_method


@pytest.mark.parametrize("fun, marker, error, words", [
    (asarray, "asarray", autodiffgen.TracingError, ["plain NumPy array", "indexes"]),
    (math_exp, "math_exp", autodiffgen.TracingError, ["float()", "derivative"]),
    (array_of_elements, "array_of_elements", ValueError, ["same shape"]),
    (fft, "fft", autodiffgen.UnsupportedOperationError, ["np.fft.hfft"]),
    (float_of_param, "float_of_param", autodiffgen.TracingError, ["float()", "np.maximum"]),
    (item_of_param, "item_of_param", autodiffgen.TracingError, [".item()"]),
    (tolist, "tolist", autodiffgen.TracingError, [".tolist()"]),
    (ambiguous_truth, "ambiguous_truth", ValueError, ["ambiguous"]),
    (numpy_out, "numpy_out", autodiffgen.TracingError, ["out="]),
    (unknown_method, "unknown_method", AttributeError, [".byteswap"]),
])
def test_fails_with_the_problem_and_the_line(fun, marker, error, words):
    x = X.copy()
    with pytest.raises(error) as info:
        grad(fun)(x)
    text = str(info.value) + "".join(getattr(info.value, "__notes__", []))
    assert line_of(marker) in text, text
    for word in words:
        assert word in text, text
    np.testing.assert_array_equal(x, X)  # nothing the user passed in was modified


def test_errors_carry_no_internal_exception():
    """What the user sees is the error alone: no cache KeyError (nor any other internal
    exception) chained to it, whichever engine or transformation raised it."""
    calls = [lambda f: grad(f)(X.copy()), lambda f: tape.grad(f)(X.copy()),
             lambda f: autodiffgen.value_and_grad(f)(X.copy()),
             lambda f: autodiffgen.hessian(f)(X.copy()),
             lambda f: autodiffgen.vjp(f, X.copy())]
    for fun in (asarray, math_exp, float_of_param, tolist, numpy_out, forgets_return):
        for call in calls:
            with pytest.raises(Exception) as info:  # each has its own type
                call(fun)
            error = info.value
            assert error.__cause__ is None, (fun, error.__cause__)
            assert error.__context__ is None or error.__suppress_context__, (
                fun, repr(error.__context__))


# ---- a function that forgets `return` ------------------------------------------------------
def forgets_return(x):  # forgets_return
    loss = np.sum(np.sin(x) ** 2)  # noqa: F841  the mistake under test


def returns_on_one_path(x):  # returns_on_one_path
    if x[0] > 0:
        return np.sum(x ** 2)


@pytest.mark.parametrize("call", [
    lambda f, x: grad(f)(x),
    lambda f, x: autodiffgen.value_and_grad(f)(x),
    lambda f, x: tape.grad(f)(x),
    lambda f, x: tape.jvp(f, (x,), (x,)),
    lambda f, x: autodiffgen.jvp(f, (x,), (x,)),
    lambda f, x: autodiffgen.vjp(f, x),
    lambda f, x: autodiffgen.jacobian(f)(x),
    lambda f, x: autodiffgen.jacfwd(f)(x),
    lambda f, x: autodiffgen.hessian(f)(x),
    lambda f, x: autodiffgen.hvp(f, (x,), (x,)),
    lambda f, x: grad(grad(f))(x),
], ids=["grad", "value_and_grad", "tape", "tape_jvp", "jvp", "vjp", "jacobian", "jacfwd",
        "hessian", "hvp", "grad_of_grad"])
def test_a_function_that_returns_none_is_refused_at_its_definition(call):
    """Returning None (a missing `return`) gave an all-zeros gradient: now an OutputError
    naming the function, its definition line and None."""
    with pytest.raises(autodiffgen.OutputError) as info:
        call(forgets_return, X.copy())
    message = str(info.value)
    assert line_of("forgets_return") in message and "forgets_return returned None" in message
    f = grad(returns_on_one_path)
    np.testing.assert_allclose(f(X.copy()), 2 * X)  # x[0] > 0: it returns
    with pytest.raises(autodiffgen.OutputError) as info:
        f(-X)  # the other path falls off the end
    assert line_of("returns_on_one_path") in str(info.value)


# ---- programs that crashed inside the generated code ---------------------------------------
def _ruff_clean(source):
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--isolated",
                             "--stdin-filename", "generated.py", "-"], input=source,
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + source


def grow_by_concatenation(x):
    rows = np.zeros((0, 3))  # a size-0 constant with two dimensions
    for k in range(3):
        rows = np.concatenate([rows, np.sin(x)[None] * k])
    return np.sum(rows * np.zeros((0, 2)).sum() + rows ** 2)


def test_size_0_constants_keep_their_shape_and_dtype():
    x = np.array([0.3, -1.2, 2.0])
    check_grads(grow_by_concatenation, x)
    source = autodiffgen.value_and_grad(grow_by_concatenation).source(x)
    assert "np.array([]" not in source
    standalone = autodiffgen.emit(grow_by_concatenation, x, standalone=True)
    namespace = {}
    exec(compile(standalone, "standalone.py", "exec"), namespace)  # noqa: S102
    value, g = namespace["grow_by_concatenation_value_and_grad"](x)
    np.testing.assert_allclose(value, grow_by_concatenation(x))
    np.testing.assert_allclose(g, tape.grad(grow_by_concatenation)(x))
    for const in (np.zeros((0, 3), np.float32), np.zeros((2, 0, 4), np.int64)):
        made = eval(autodiffgen.codegen.expressions.render(  # our own literal
            autodiffgen.codegen.expressions.constant_ast(const, True)), {"np": np})
        assert made.shape == const.shape and made.dtype == const.dtype


def shadows_modules(x, np_, operator, _setitem, slice):
    math = x * slice  # names the generated code reads: math, operator, np, helpers, builtins
    numexpr = np.sin(math) + operator
    scipy = numexpr * _setitem
    if x[0] > 0:
        return np.sum(scipy * np_[int(x[1] > 0)])
    return np.sum(scipy)


def shadowing_argument(x, np):  # an argument named np
    return ((x * np) ** 2).sum()


def test_user_names_never_shadow_what_the_generated_code_calls():
    """A value or argument named math, operator, np, numexpr or a runtime helper is
    renamed in the generated code, which calls the modules by those names."""
    rng = np.random.default_rng(4)
    f = grad(shadows_modules)
    for _ in range(3):  # both branches of the guard (operator.index of int(...))
        x = rng.normal(size=3)
        args = (x, np.array([1.5, -2.0]), 0.5, 2.0, 3.0)
        np.testing.assert_allclose(f(*args), tape.grad(shadows_modules)(*args))
    check_grads(shadows_modules, np.array([0.4, 1.0, -0.3]), np.array([1.5, -2.0]), 0.5,
                2.0, 3.0, fwd=False)
    _ruff_clean(autodiffgen.value_and_grad(shadows_modules).source(*args))
    # Python floats: the code calls the math module, a variable named math is math_1
    def scalar(x):
        math = x * 2.0
        operator = np.sin(math)
        return operator * math
    assert grad(scalar)(1.5) == pytest.approx(tape.grad(scalar)(1.5))
    source = autodiffgen.value_and_grad(scalar).source(1.5)
    assert "math.sin(math_1)" in source
    _ruff_clean(source)
    np.testing.assert_allclose(grad(shadowing_argument)(X.copy(), 2.0), 8.0 * X)
    standalone = autodiffgen.emit(shadowing_argument, X.copy(), 2.0, standalone=True)
    assert "def _shadowing_argument_value_and_grad_traced(x, np_1):" in standalone
    assert "def shadowing_argument_value_and_grad(x, np):" in standalone  # the entry's body
    scope = {}  # reads no np, so it keeps the user's names, for keyword calls
    exec(standalone, scope)  # noqa: S102  generated code
    np.testing.assert_allclose(scope["value_and_grad"](x=X.copy(), np=2.0)[1], 8.0 * X)
    _ruff_clean(standalone)


@pytest.mark.parametrize("dtype", [np.longdouble, np.float16, np.float32])
def test_unusual_float_dtypes(dtype):
    """float128 (np.longdouble) recursed in the emitter; its constants are now written at
    full precision. float16 works as float32 does."""
    third = dtype(1) / dtype(3)

    def f(x):
        return np.mean(x * third + x ** 3) * 3.0 + np.std(x)
    x = np.array([0.5, -1.0, 2.0], dtype)
    for call in (lambda: grad(f)(x), lambda: grad(f)(x[1]), lambda: grad(f)(x.reshape(3, 1))):
        g, t = call(), None
        assert np.result_type(g) == dtype
    g = grad(f)(x)
    t = tape.grad(f)(x)
    assert g.dtype == t.dtype == dtype
    np.testing.assert_array_equal(g, t)  # the same operations in the same precision
    if dtype == np.longdouble:
        assert grad(lambda x: np.sum(x * third))(x)[0] == third  # not rounded to float64
    _, tangent = autodiffgen.jvp(f, (x,), (np.ones_like(x),))
    assert tangent.dtype == dtype
    check_grads(f, x.astype(np.float64))


def _swallows_a_missing_rule(w, x):
    try:
        z = np.fft.hfft(w)[:np.size(w)]  # no rule: refused while tracing
    except Exception:  # noqa: BLE001  the user's broad except
        z = w * 0.0
    return np.sum(z * x) + np.sum(w ** 2)


def _swallows_a_conversion(w, x):
    try:
        z = np.arange(3.0)[np.argsort(w)] * x
    except Exception:  # noqa: BLE001
        z = -w * x
    return np.sum(np.tanh(z))


@pytest.mark.parametrize("f", [_swallows_a_missing_rule, _swallows_a_conversion])
def test_a_refusal_the_function_catches_is_raised_not_traced_around(f):
    """Eager NumPy takes the `try` path; a trace whose refusal the user's `except` caught
    would take the fallback and return a silently wrong gradient."""
    w, x = np.array([0.3, 0.2, 0.4]), np.array([1.0, 2.0, -1.0])
    for transform in (autodiffgen.grad, tape.grad):
        with pytest.raises(TracingError, match="caught by its own code") as info:
            transform(f)(w, x)
        assert "test_errors_in_user_code.py:" in str(info.value)


def test_unknown_ndarray_attribute_names_the_line():
    with pytest.raises(AttributeError, match=r"test_errors_in_user_code.py:\d+: .*\.byteswap"):
        autodiffgen.grad(lambda x: x.byteswap().sum())(np.ones(2))


def test_numpy_errors_inside_a_primitive_carry_the_line():
    with pytest.raises(ValueError) as info:
        autodiffgen.grad(lambda x: (x @ np.ones((3, 2))).sum())(np.ones(2))
    if hasattr(info.value, "__notes__"):
        assert "test_errors_in_user_code.py:" in info.value.__notes__[0]


# ---- these fail too, on a 2-d X2D: the message names the problem and the line --------
def nonscalar(x):
    return np.tanh(x)  # nonscalar


def to_float(x):
    return float(x[0, 0]) * 2.0  # to_float


def item(x):
    return x.sum().item()  # item


def make_array(x):
    return np.r_["0,2", x[0], x[1]].sum()  # make_array


def inplace_numpy(x):
    h = np.zeros(3)
    h += x[0]  # inplace_numpy
    return h.sum()


def int_output(x):
    return (x > 1).sum()  # int_output


@pytest.mark.parametrize("fun, marker, error, words", [
    (nonscalar, "nonscalar", autodiffgen.OutputError, ["scalar", "(2, 3)"]),
    (fft, "fft", autodiffgen.UnsupportedOperationError, ["np.fft.hfft", "defprimitive"]),
    (to_float, "to_float", autodiffgen.TracingError, ["float()", "derivative"]),
    (item, "item", autodiffgen.TracingError, [".item()"]),
    (make_array, "make_array", autodiffgen.UnsupportedOperationError,
     ["np.r_", "string directive", "np.concatenate"]),
    (inplace_numpy, "inplace_numpy", autodiffgen.TracingError, ["out=", "x += v"]),
    (int_output, "int_output", autodiffgen.OutputError, ["floating-point", "int64"]),
])
def test_bad_function_names_problem_and_line(fun, marker, error, words):
    x = X2D.copy()
    with pytest.raises(error) as info:
        grad(fun)(x)
    message = str(info.value)
    assert line_of(marker) in message
    for word in words:
        assert word in message
    np.testing.assert_array_equal(x, X2D)  # the user's array is untouched


def test_errors_are_builtin_exception_types():
    with pytest.raises(TypeError):
        grad(to_float)(X2D)
    with pytest.raises(NotImplementedError):
        grad(fft)(X2D)


def test_traced_value_escaping_its_trace():
    leaked = []

    def leak(x):
        leaked.append(x * 2)
        return x.sum()
    grad(leak)(X2D)
    with pytest.raises(autodiffgen.TracingError) as info:
        np.exp(leaked[0])  # leak
    assert line_of("leak") in str(info.value)


def test_two_argument_where_is_refused():
    def nonzero(x):
        return np.where(x > 1, x).sum()  # two_arg_where
    with pytest.raises(autodiffgen.TracingError) as info:
        grad(nonzero)(X2D)
    assert line_of("two_arg_where") in str(info.value)
