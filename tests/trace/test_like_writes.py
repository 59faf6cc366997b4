"""Writes into np.zeros_like(x) or np.ones_like(x) of a traced x (rules/numpy_api/views.py:
_note_likes): a new array, C-ordered as traced, so fresh, and a write into it checks no
layout (a stable sigmoid's masked writes: no `_layout` check). np.full_like(x, v) is laid
out as x (its trace too): a write into it keeps the layout checks, and C-ordered,
Fortran-ordered and strided arguments each take their own path, as eager NumPy does."""

import sys
from pathlib import Path

import numpy as np

import autodiffgen as ad
from autodiffgen.trace import tracer

sys.path.insert(0, str(Path(__file__).parents[1] / "rules"))
from test_masked_writes import masked_tape, sigmoid_loss

RNG = np.random.default_rng(43)


def reshaped_then_written(x):  # y is a view of the new array z, which is C-ordered
    z = np.zeros_like(x)
    y = z.reshape(-1)
    z[0, 1] = 5.0
    w = np.ones_like(x)
    w.reshape(-1)[3] = 2.0
    return np.sum(y * x.ravel()) + np.sum(w * x)


def through_a_row(x):  # a basic view of the like array, written into
    z = np.full_like(x, 2.0)
    row = z[0]
    row += x[1]
    return np.sum(z * x)


def layouts(x):
    return [np.ascontiguousarray(x), np.asfortranarray(x), x[:, ::2]]


def test_the_stable_sigmoid_checks_no_layout():
    x, w = RNG.normal(size=(5, 4)), RNG.normal(size=(5, 4))
    source = ad.emit(sigmoid_loss, x, w)
    assert "_layout(" not in source
    f = ad.value_and_grad(sigmoid_loss)
    f(x, w)
    runs = tracer.runs()
    big = RNG.normal(size=(5, 8))
    for arg in (np.asfortranarray(x), big[:, ::2], x.T.copy().T):
        value, grad = f(arg, w)
        np.testing.assert_allclose(value, sigmoid_loss(arg, w), rtol=1e-14)
        np.testing.assert_allclose(grad, masked_tape(sigmoid_loss)(arg, w)[1], rtol=1e-12)
    assert tracer.runs() - runs == 3  # (the tape's): one code serves every layout


def test_float32():
    x, w = (RNG.normal(size=(3, 4)).astype(np.float32) for _ in range(2))
    value, grad = ad.value_and_grad(sigmoid_loss)(np.asfortranarray(x), w)
    assert grad.dtype == np.float32 and np.result_type(value) == np.float32
    np.testing.assert_allclose(grad, masked_tape(sigmoid_loss)(x, w)[1], rtol=1e-5)


def agree_at(fun, args):
    """One cached function at each of `args`: eager NumPy's value, the tape's gradient."""
    f = ad.value_and_grad(fun)
    for arg in args:
        value, grad = f(arg)
        tape_value, tape_grad = ad.tape.value_and_grad(fun)(arg)
        np.testing.assert_allclose(value, fun(arg), rtol=1e-14)
        np.testing.assert_allclose(value, tape_value, rtol=1e-14)
        np.testing.assert_allclose(grad, tape_grad, rtol=1e-14)
    ad.testing.check_grads(fun, args[0])


def test_a_view_of_a_new_array_is_followed_with_no_layout_check():
    x = RNG.normal(size=(3, 4))
    assert "_layout(" not in ad.emit(reshaped_then_written, x)
    agree_at(reshaped_then_written, [x, RNG.normal(size=(3, 8))[:, ::2], x * 2])


def test_a_write_into_full_like_keeps_the_layout_checks():
    x = RNG.normal(size=(3, 4))
    assert "_layout(" in ad.emit(through_a_row, x)
    agree_at(through_a_row, layouts(x) + layouts(x * 2))  # C, F, strided; each as eager
