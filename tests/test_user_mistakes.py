"""Things users do wrong: each ends in a correct answer or an error that names the problem
and the user's line (never a silently wrong gradient)."""

import math

import numpy as np
import pytest

import autodiffgen
from autodiffgen import grad, tape
from autodiffgen.testing import check_grads

with open(__file__) as _source:
    HERE = _source.read().splitlines()


def line_of(marker):
    n = next(i for i, text in enumerate(HERE, 1) if text.rstrip().endswith(f"# {marker}"))
    return f"test_user_mistakes.py:{n}"


X = np.array([0.5, -1.5, 2.3])


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
    return np.asarray(x).sum()  # asarray


def math_exp(x):
    return math.exp(x[0]) + x[1]  # math_exp


def array_of_elements(x):
    return np.array([x[0], x[1]]).sum()  # array_of_elements


def fft(x):
    return np.fft.fft(x).real.sum()  # fft


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
    (asarray, "asarray", autodiffgen.TracingError, ["np.asarray()"]),
    (math_exp, "math_exp", autodiffgen.TracingError, ["float()", "derivative"]),
    (array_of_elements, "array_of_elements", autodiffgen.TracingError, ["np.stack"]),
    (fft, "fft", autodiffgen.UnsupportedOperationError, ["np.fft.fft"]),
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
