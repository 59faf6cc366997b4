"""Ints that only index (issue 25, item 5): `x = np.zeros((V, 1)); x[i] = 1` with i an
int argument writes a one-hot, as a character-level RNN does for each input character.
NumPy would read i as a Python int there (ndarray.__setitem__ converts its key), a guard
that fails for every new i; a new constant array made in the traced code instead becomes
traced at the write (rules/numpy_api/building.py, Fresh), so i is read when the code runs
and every sequence of the same length uses one trace."""

import numpy as np
import pytest

from autodiffgen import grad, tape, value_and_grad

VOCAB, HIDDEN, LENGTH = 5, 4, 6
ARGNUMS = (3, 4, 5, 6, 7)


def char_rnn_loss(inputs, targets, hprev, Wxh, Whh, Why, bh, by):
    """Karpathy's min-char-rnn loss; inputs, targets: lists of ints."""
    xs, hs, ys, ps = {}, {}, {}, {}
    hs[-1] = np.copy(hprev)
    total = 0
    for t in range(len(inputs)):
        xs[t] = np.zeros((VOCAB, 1))
        xs[t][inputs[t]] = 1
        hs[t] = np.tanh(np.dot(Wxh, xs[t]) + np.dot(Whh, hs[t - 1]) + bh)
        ys[t] = np.dot(Why, hs[t]) + by
        ps[t] = np.exp(ys[t]) / np.sum(np.exp(ys[t]))
        total += -np.log(ps[t][targets[t], 0])
    return total


def _params(rng):
    shapes = [(HIDDEN, 1), (HIDDEN, VOCAB), (HIDDEN, HIDDEN), (VOCAB, HIDDEN), (HIDDEN, 1),
              (VOCAB, 1)]
    return [rng.normal(size=shape) * 0.5 for shape in shapes]


def _sequence(rng):
    return [int(c) for c in rng.integers(0, VOCAB, LENGTH)]


def test_char_rnn_traces_once_for_every_sequence():
    rng = np.random.default_rng(25)
    params = _params(rng)
    g = grad(char_rnn_loss, argnums=ARGNUMS)
    vg = value_and_grad(char_rnn_loss, argnums=ARGNUMS)
    reference = tape.grad(char_rnn_loss, argnums=ARGNUMS)
    for _ in range(12):
        inputs, targets = _sequence(rng), _sequence(rng)
        grads = g(inputs, targets, *params)
        for got, want in zip(grads, reference(inputs, targets, *params)):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
        value, _ = vg(inputs, targets, *params)
        np.testing.assert_allclose(value, char_rnn_loss(inputs, targets, *params),
                                   rtol=1e-12)
    assert g.cache_info().misses == 1
    assert vg.cache_info().misses == 1
    source = g.source(inputs, targets, *params)
    assert "inputs[t]] = 1` read" not in source  # no guard on the index
    assert "_layout(Wxh)" not in source  # nor on the weights' layouts (a write checks them)


def one_hot_dot(i, w):
    x = np.zeros((VOCAB, 1))
    x[i] = 1
    return np.sum(w * x) + np.sum(x) * w[0, 0]


def read_at_traced_index(i, w):
    x = np.ones(VOCAB)
    x[1] = 5.0  # a plain write, then a read at a traced index
    z = np.full(VOCAB, 2.0)
    return w[0, 0] * (x[i] + z[i])


def write_then_add_in_place(i, w):
    x = np.zeros_like(np.empty((VOCAB, 1)))
    x[i] = 2.0
    x += w
    return np.sum(x ** 2)


@pytest.mark.parametrize("fun", [one_hot_dot, read_at_traced_index, write_then_add_in_place])
def test_a_new_constant_indexed_by_an_int_argument_is_traced_once(fun):
    w = np.random.default_rng(3).normal(size=(VOCAB, 1))
    _compare(fun, w, (0, 3, 1, 4, 2, -1), traces=1)


def constants_read_by_python(i, w):
    z = np.zeros(3)
    z[1] = 2.0
    scale = float(z[1]) if z[1] > 1 else 0.0  # constants: no guard, no trace per call
    return scale * np.sum(w) + len(z.tolist()) + z.shape[0]


def view_then_indexed_write(i, w):
    x = np.zeros((VOCAB, 1))
    column = x[:, 0]  # a view: it must see the write, so x stays a plain array
    x[i] = 1.0
    return np.sum(w[:, 0] * column)


@pytest.mark.parametrize("fun, traces", [(constants_read_by_python, 1),
                                         (view_then_indexed_write, 3)])
def test_other_new_constants_stay_plain(fun, traces):
    w = np.random.default_rng(4).normal(size=(VOCAB, 1))
    _compare(fun, w, (0, 3, 1, 3), traces)


def aliased_and_in_place(i, w):
    x = np.zeros(3)
    keep = {"x": x}
    x += 1  # NumPy's in-place add keeps x the same array
    keep["x"][i] = 5.0  # so this writes x too
    y = np.ones(3)
    y[1] = 4.0
    return np.sum(x * w) + np.sum(keep["x"] * w) + y[i] * w[0] + \
        np.sum(x.reshape(3, 1)[i]) * w[1]


def lists_and_conversions(i, w):
    x = np.zeros(3)
    x[i] = 1
    return np.sum(np.array([x, x * 2]).sum(0) * w) + np.mean([x, w]) + \
        np.sum(np.asarray(x) * w)


@pytest.mark.parametrize("fun", [aliased_and_in_place, lists_and_conversions])
def test_the_traced_array_is_what_every_name_and_conversion_sees(fun):
    w = np.array([0.3, 0.5, 0.7])
    _compare(fun, w, (0, 2, 1), traces=1)


def _compare(fun, w, indices, traces):
    """value_and_grad of fun(i, w) at each index i: eager's value, the tape's gradient,
    and `traces` traces in all."""
    vg = value_and_grad(fun, argnums=1)
    for i in indices:
        value, g = vg(i, w)
        np.testing.assert_allclose(value, fun(i, w), rtol=1e-12)
        np.testing.assert_allclose(g, tape.grad(fun, argnums=1)(i, w), rtol=1e-12)
    assert vg.cache_info().misses == traces


def one_hot_as_aux(i, w):
    x = np.zeros(3)
    x[i] = 1
    return np.sum(w * x), (x, np.zeros(2))


def test_a_written_constant_returned_is_its_written_value():
    w = np.array([0.3, 0.5, 0.7])
    vg = value_and_grad(one_hot_as_aux, argnums=1, has_aux=True)
    for i in (0, 2, 1):
        (value, (x, z)), g = vg(i, w)
        assert np.isclose(value, w[i])
        np.testing.assert_array_equal(x, np.eye(3)[i])
        assert type(x) is np.ndarray and type(z) is np.ndarray
        np.testing.assert_array_equal(g, np.eye(3)[i])
        (_, (x, z)), _ = tape.value_and_grad(one_hot_as_aux, argnums=1, has_aux=True)(i, w)
        np.testing.assert_array_equal(x, np.eye(3)[i])
        assert type(x) is np.ndarray and type(z) is np.ndarray
    assert vg.cache_info().misses == 1


def nested(i, w):
    x = np.zeros(3)
    x[i] = 1
    inner = grad(lambda y: np.sum(y ** 2 * w))
    return np.sum(inner(x) * w) + np.sum(inner(np.ones(3)))


def test_a_new_constant_passed_to_an_inner_transformation():
    w = np.arange(3.0)
    g = grad(nested, argnums=1)
    for i in (0, 1, 2):
        np.testing.assert_allclose(g(i, w), 2 + 4 * w * np.eye(3)[i])
        np.testing.assert_allclose(g(i, w), tape.grad(nested, argnums=1)(i, w))
    assert g.cache_info().misses == 1
