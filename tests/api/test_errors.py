"""Bad input gets a clear exception naming the problem and the user's file and line."""

import numpy as np
import pytest

import autodiffgen
from autodiffgen import grad, value_and_grad

with open(__file__) as _source:
    HERE = _source.read().splitlines()


def line_of(marker):
    """'test_errors.py:N' for the line that carries `# <marker>`."""
    n = next(i for i, text in enumerate(HERE, 1) if text.rstrip().endswith(f"# {marker}"))
    return f"test_errors.py:{n}"


X = np.linspace(0.5, 1.5, 6).reshape(2, 3)


def nonscalar(x):
    return np.tanh(x)  # nonscalar


def fft(x):
    return np.fft.fft(x).real.sum()  # fft


def to_float(x):
    return float(x[0, 0]) * 2.0  # to_float


def item(x):
    return x.sum().item()  # item


def make_array(x):
    return np.array([x[0, 0], x[0, 1]]).sum()  # make_array


def inplace_numpy(x):
    h = np.zeros(3)
    h += x[0]  # inplace_numpy
    return h.sum()


def int_output(x):
    return (x > 1).sum()  # int_output


@pytest.mark.parametrize("fun, marker, error, words", [
    (nonscalar, "nonscalar", autodiffgen.OutputError, ["scalar", "(2, 3)"]),
    (fft, "fft", autodiffgen.UnsupportedOperationError, ["np.fft.fft", "defprimitive"]),
    (to_float, "to_float", autodiffgen.TracingError, ["float()", "derivative"]),
    (item, "item", autodiffgen.TracingError, [".item()"]),
    (make_array, "make_array", autodiffgen.TracingError, ["np.array", "np.stack"]),
    (inplace_numpy, "inplace_numpy", autodiffgen.TracingError, ["out=", "x += v"]),
    (int_output, "int_output", autodiffgen.OutputError, ["floating-point", "int64"]),
])
def test_bad_function_names_problem_and_line(fun, marker, error, words):
    x = X.copy()
    with pytest.raises(error) as info:
        grad(fun)(x)
    message = str(info.value)
    assert line_of(marker) in message
    for word in words:
        assert word in message
    np.testing.assert_array_equal(x, X)  # the user's array is untouched


def test_errors_are_builtin_exception_types():
    with pytest.raises(TypeError):
        grad(to_float)(X)
    with pytest.raises(NotImplementedError):
        grad(fft)(X)


def two(a, b):
    return (a * b).sum()


def test_argnums_out_of_range_names_the_function_definition():
    with pytest.raises(autodiffgen.ArgumentError) as info:
        grad(two, argnums=2)
    message = str(info.value)
    assert "argnums=2" in message and "two" in message
    assert f"test_errors.py:{two.__code__.co_firstlineno}" in message


@pytest.mark.parametrize("argnums", [-1, (0, 5), "0", ()])
def test_bad_argnums(argnums):
    with pytest.raises(autodiffgen.ArgumentError):
        grad(two, argnums=argnums)


def test_integer_array_under_argnums():
    with pytest.raises(autodiffgen.ArgumentError) as info:
        grad(two, argnums=1)(X, np.arange(3))  # int_arg
    assert line_of("int_arg") in str(info.value)
    assert "'b'" in str(info.value) and "int64" in str(info.value)


@pytest.mark.parametrize("bad", [3, True, np.array([True, False, True])])
def test_integer_or_boolean_scalar_under_argnums(bad):
    with pytest.raises(autodiffgen.ArgumentError) as info:
        value_and_grad(two, argnums=(0, 1))(X, bad)
    assert "'b'" in str(info.value) and "argnums" in str(info.value)


def test_ndarray_subclass_is_refused():
    with pytest.raises(autodiffgen.ArgumentError) as info:
        grad(two)(np.ma.masked_array(X), X)
    assert "subclass" in str(info.value)


def test_keyword_only_arguments_are_refused():
    def kwonly(x, *, scale):
        return (x * scale).sum()
    with pytest.raises(autodiffgen.ArgumentError):
        grad(kwonly)(X, scale=2.0)


def test_traced_value_escaping_its_trace():
    leaked = []

    def leak(x):
        leaked.append(x * 2)
        return x.sum()
    grad(leak)(X)
    with pytest.raises(autodiffgen.TracingError) as info:
        np.exp(leaked[0])  # leak
    assert line_of("leak") in str(info.value)


def test_two_argument_where_is_refused():
    def nonzero(x):
        return np.where(x > 1, x).sum()  # two_arg_where
    with pytest.raises(autodiffgen.TracingError) as info:
        grad(nonzero)(X)
    assert line_of("two_arg_where") in str(info.value)


def test_complex_arguments_are_refused_under_argnums():
    with pytest.raises(autodiffgen.ArgumentError, match="real floating-point"):
        autodiffgen.grad(lambda z: np.sum(np.abs(z) ** 2))(np.ones(2, complex))


def test_jacobian_of_an_integer_argument_is_refused():
    with pytest.raises(autodiffgen.ArgumentError, match="floating-point"):
        autodiffgen.jacobian(lambda x, i: x * i, argnums=1)(np.ones(2), np.arange(2))
    np.testing.assert_array_equal(autodiffgen.jacfwd(lambda x: x * 2)(np.ones(0)),
                                  np.zeros((0, 0)))
