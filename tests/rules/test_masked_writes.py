"""Writes under complementary masks recorded as one np.where (rules/masked_writes.py).

The course-style stable sigmoid is checked against eager NumPy (the user's own code on
arrays), the masked form as traced before the rewrite (on the tape), the closed-form
derivative s * (1 - s) and finite differences; at float32 (dtype kept), 0-d and
broadcast shapes; at huge values without a warning, inf or nan; at all-positive,
all-negative and mixed inputs from one traced function. Masks that are not complements,
or sides whose whole-array form could overflow, keep the masked writes.
"""

import warnings

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen import pipeline
from autodiffgen.rules import indexing
from autodiffgen.testing import check_grads
from autodiffgen.trace import tracer

RNG = np.random.default_rng(29)


def sigmoid(x):
    pos_mask = x >= 0
    neg_mask = x < 0
    z = np.zeros_like(x)
    z[pos_mask] = np.exp(-x[pos_mask])
    z[neg_mask] = np.exp(x[neg_mask])
    top = np.ones_like(x)
    top[neg_mask] = z[neg_mask]
    return top / (1 + z)


def sigmoid_loss(x, w):
    return np.sum(sigmoid(x) * w)


def sigmoid_of_sum(x, b):  # b broadcast along x's rows
    return np.sum(sigmoid(x + b) ** 2)


def inverted(x):  # `m` and `~m`; the same step (log1p) on both sides
    m = x > 0
    y = np.full_like(x, 7.0)
    y[m] = np.log1p(x[m])
    y[~m] = np.log1p(-x[~m])
    return np.sum(y * x)


def scaled(x, a):  # a traced 0-d scale on both sides
    m = x >= 0
    z = np.zeros_like(x)
    z[m] = np.exp(-a * x[m])
    z[~m] = np.exp(a * x[~m])
    return np.sum(z * x)


def relu_by_mask(x):  # one write into zeros: where(m, x, 0)
    out = np.zeros_like(x)
    m = x > 0
    out[m] = x[m]
    return np.sum(out * out)


def traced_fill(x, c):  # where(m, -x, c): the fill's gradient is where the mask is not
    y = np.full_like(x, c)
    m = x < 0.3
    y[m] = -x[m]
    return np.sum(y * y)


def gap_at_zero(x):  # x > 0 and x < 0 miss x == 0: not complements
    z = np.zeros_like(x)
    z[x > 0] = np.exp(-x[x > 0])
    z[x < 0] = np.exp(x[x < 0])
    return np.sum(z * x)


def squares_and_negatives(x):  # x ** 2 everywhere could overflow where x < 0 did not
    m = x >= 0
    z = np.zeros_like(x)
    z[m] = x[m] ** 2
    z[~m] = -x[~m]
    return np.sum(z)


def closed_form(x):
    """(sigmoid, its derivative) from e = exp(-|x|): accurate in both tails."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1, e) / (1 + e), e / (1 + e) ** 2


def masked_tape(fun, argnums=0):
    """The tape's value_and_grad with the rewrite off: the masked form as written."""
    def run(*args):
        saved, indexing.setitem.simplify = indexing.setitem.simplify, None
        try:
            return ad.tape.value_and_grad(fun, argnums)(*args)
        finally:
            indexing.setitem.simplify = saved
    return run


def selections(fun, *args, argnums=0):
    """The selections and writes (by a mask or not) left in the generated code's graph."""
    request = ad.GradFunction(fun, argnums).request(args)
    graph = pipeline.compile(request).graph
    return [n.prim.name for n in graph.nodes
            if n.prim.name in ("getitem", "setitem", "scatter_add", "add_at")]


def mixed(shape, scale=3.0):
    return RNG.normal(size=shape) * scale


def test_the_stable_sigmoid_has_no_masked_selection_left():
    x, w = mixed((5, 4)), mixed((5, 4))
    assert selections(sigmoid_loss, x, w) == []
    source = ad.emit(sigmoid_loss, x, w)
    assert "np.where(" in source and "np.exp(" in source


def test_values_and_gradients_agree_with_numpy_the_masked_tape_and_the_closed_form():
    x, w = mixed((6, 5)), mixed((6, 5))
    value, grad = ad.value_and_grad(sigmoid_loss)(x, w)
    s, ds = closed_form(x)
    np.testing.assert_allclose(value, sigmoid_loss(x, w), rtol=1e-14)
    np.testing.assert_allclose(value, np.sum(s * w), rtol=1e-12)
    np.testing.assert_allclose(grad, w * ds, rtol=1e-12, atol=1e-15)
    tape_value, tape_grad = masked_tape(sigmoid_loss)(x, w)
    np.testing.assert_allclose(value, tape_value, rtol=1e-14)
    np.testing.assert_allclose(grad, tape_grad, rtol=1e-12, atol=1e-15)
    check_grads(sigmoid_loss, x, w, argnums=(0, 1))


def test_float32_keeps_its_dtype():
    x, w = mixed((4, 3)).astype(np.float32), mixed((4, 3)).astype(np.float32)
    value, grad = ad.value_and_grad(sigmoid_loss)(x, w)
    assert grad.dtype == np.float32 and np.result_type(value) == np.float32
    s, ds = closed_form(x.astype(np.float64))
    np.testing.assert_allclose(value, np.sum(s * w), rtol=1e-5)
    np.testing.assert_allclose(grad, w * ds, rtol=1e-5, atol=1e-6)
    check_grads(sigmoid_loss, x, w, rtol=2e-3, atol=2e-3, fd=False)


@pytest.mark.parametrize("x", [np.float64(1.5), np.array(-2.5), np.array([0.5]),
                               np.array([-4.0])], ids=["scalar", "0-d", "one+", "one-"])
def test_small_shapes(x):
    value, grad = ad.value_and_grad(lambda x: np.sum(sigmoid(np.asarray(x) * 1.0)))(x)
    s, ds = closed_form(np.asarray(x, dtype=np.float64))
    np.testing.assert_allclose(value, np.sum(s), rtol=1e-14)
    np.testing.assert_allclose(grad, ds, rtol=1e-12)


def test_broadcast_operands_get_their_summed_gradients():
    x, b = mixed((5, 3)), mixed((3,))
    check_grads(sigmoid_of_sum, x, b, argnums=(0, 1))
    _, (gx, gb) = ad.value_and_grad(sigmoid_of_sum, argnums=(0, 1))(x, b)
    s, ds = closed_form(x + b)
    np.testing.assert_allclose(gx, 2 * s * ds, rtol=1e-12)
    np.testing.assert_allclose(gb, np.sum(2 * s * ds, axis=0), rtol=1e-12)


def test_huge_values_warn_nowhere_and_stay_finite():
    f = ad.value_and_grad(sigmoid_loss)
    f(mixed((2, 4)), mixed((2, 4)))  # traced at ordinary values
    x = np.array([[800.0, -800.0, 1e308, -1e308], [40.0, -40.0, 0.0, -0.0]])
    w = np.ones_like(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        value, grad = f(x, w)
        eager = sigmoid_loss(x, w)  # the user's masked code warns nowhere either
    assert np.isfinite(value) and np.all(np.isfinite(grad))
    np.testing.assert_allclose(value, eager, rtol=1e-15)
    # (s * (1 - s), as the author's backward: 0 at x = 40 where it is 4e-18)
    np.testing.assert_allclose(grad, closed_form(x)[1], rtol=1e-12, atol=1e-17)


def test_one_trace_serves_all_positive_all_negative_and_mixed_inputs():
    f = ad.value_and_grad(sigmoid_loss)
    w = mixed((6, 4))
    inputs = [mixed((6, 4)), np.abs(mixed((6, 4))) + 0.1, -np.abs(mixed((6, 4))) - 0.1,
              np.zeros((6, 4))]
    f(inputs[0], w)
    runs = tracer.runs()
    for x in inputs:
        value, grad = f(x, w)
        np.testing.assert_allclose(value, sigmoid_loss(x, w), rtol=1e-14)
        np.testing.assert_allclose(grad, w * closed_form(x)[1], rtol=1e-12, atol=1e-15)
    assert tracer.runs() == runs  # no count of either mask is a guard
    assert f.cache_info().misses == 1


def test_the_complement_spelled_with_invert_and_a_fill():
    x = mixed((7,))
    assert selections(inverted, x) == []
    check_grads(inverted, x)
    np.testing.assert_allclose(ad.value_and_grad(inverted)(x)[0], inverted(x), rtol=1e-14)


def test_a_traced_scalar_on_both_sides():
    x, a = mixed((4, 5)), np.float64(0.7)
    assert selections(scaled, x, a, argnums=(0, 1)) == []
    check_grads(scaled, x, a, argnums=(0, 1))
    value, _ = ad.value_and_grad(scaled, argnums=(0, 1))(x, a)
    np.testing.assert_allclose(value, scaled(x, a), rtol=1e-14)


def test_one_write_of_a_cheap_value_into_zeros():
    x = mixed((3, 4))
    assert selections(relu_by_mask, x) == []
    value, grad = ad.value_and_grad(relu_by_mask)(x)
    np.testing.assert_allclose(value, relu_by_mask(x), rtol=1e-14)
    np.testing.assert_allclose(grad, 2 * np.maximum(x, 0), rtol=1e-14)
    check_grads(relu_by_mask, x)


def test_one_write_into_a_fill_that_is_traced():
    x, c = mixed((3, 4)), np.float64(1.7)
    assert selections(traced_fill, x, c, argnums=(0, 1)) == []
    _, (gx, gc) = ad.value_and_grad(traced_fill, argnums=(0, 1))(x, c)
    np.testing.assert_allclose(gx, np.where(x < 0.3, 2 * x, 0), rtol=1e-14)
    np.testing.assert_allclose(gc, 2 * c * np.sum(x >= 0.3), rtol=1e-14)
    check_grads(traced_fill, x, c, argnums=(0, 1))


@pytest.mark.parametrize("fun", [gap_at_zero, squares_and_negatives], ids=lambda f: f.__name__)
def test_the_rewrite_does_not_fire_where_it_would_not_be_sound(fun):
    x = np.array([1.5, -0.5, 0.0, 2.0, -3.0])  # (0: where the masks leave a gap)
    assert "setitem" in selections(fun, x)
    check_grads(fun, x + 0.25)  # (away from the kink at 0)
    value, grad = ad.value_and_grad(fun)(x)
    tape_value, tape_grad = masked_tape(fun)(x)
    np.testing.assert_allclose(value, tape_value, rtol=1e-14)
    np.testing.assert_allclose(grad, tape_grad, rtol=1e-14)


def test_a_nan_when_traced_keeps_the_masked_writes():
    x = np.array([0.5, np.nan, -1.0])  # neither mask holds at NaN: the fill stays there
    w = np.ones(3)
    assert "setitem" in selections(sigmoid_loss, x, w)
    value, _ = ad.value_and_grad(sigmoid_loss)(x, w)
    np.testing.assert_allclose(value, sigmoid_loss(x, w), rtol=1e-14)
