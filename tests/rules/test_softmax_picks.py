"""A cross-entropy's pick differentiated whole (whole_rules.py): log(p[index]) of a
softmax p, however p is spelled (graph/forms.softmax_of: divided by its sum or times its
reciprocal, in place, the sum given its size-1 axes back, a max or constant shift, the
exp written twice), gives z the cotangent g scattered at the index less p times its row
sums: `p * c` then `g[rows, y] += v`, as by hand. Checked against the tape, finite
differences, forward mode and second derivatives, with masked, weighted, repeated,
sliced and single picks, and against spellings that are not a softmax."""

import types

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen import passes
from autodiffgen.testing import check_grads

RNG = np.random.default_rng(29)
N, V = 6, 5
Y = RNG.integers(0, V, N)
MASK = RNG.random(N) > 0.3
WEIGHTS = RNG.random(N)


def divided(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def in_place(z):  # the benchmark's softmax_forward
    p = np.exp(z - np.max(z, axis=1, keepdims=True))
    p /= np.sum(p, axis=1, keepdims=True)
    return p


def reciprocal(z):
    e = np.exp(z)
    return e * np.reciprocal(e.sum(axis=1, keepdims=True))


def one_over(z):
    e = np.exp(z)
    e *= 1 / e.sum(axis=1, keepdims=True)
    return e


def axes_given_back(z):
    e = np.exp(z)
    return e / e.sum(axis=1)[:, None]


def exp_twice(z):  # char_lstm_cell's spelling, by rows
    return np.exp(z - np.max(z, axis=1, keepdims=True)) / np.sum(
        np.exp(z - np.max(z, axis=1, keepdims=True)), axis=1, keepdims=True)


def constant_shift(z):
    e = np.exp(z - 3.0)
    return e / e.sum(axis=-1, keepdims=True)


def other_shifts(z):  # not a softmax: the numerator's shift is not the sum's
    return np.exp(z - z.max(axis=1, keepdims=True)) / np.sum(
        np.exp(z - z.min(axis=1, keepdims=True)), axis=1, keepdims=True)


def shift_along_the_axis(z):  # a softmax of z - max over the other axis: the shift counts
    e = np.exp(z - z.max(axis=0, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


FORMS = [divided, in_place, reciprocal, one_over, axes_given_back, exp_twice, constant_shift,
         other_shifts, shift_along_the_axis]
PICKS = {
    "mean": lambda p: -np.mean(np.log(p[np.arange(p.shape[0]), Y])),
    "masked": lambda p: -np.sum(MASK * np.log(p[np.arange(p.shape[0]), Y])) / 3,
    "weighted": lambda p: -np.sum(WEIGHTS * np.log(p[np.arange(N), Y])),
    "repeated rows": lambda p: -np.sum(np.log(p[np.array([0, 0, 2, 3, 3, 5]), Y])),
    "a column": lambda p: -np.sum(np.log(p[:, 1]) * WEIGHTS),
    "one element": lambda p: -np.log(p[2, 1]),
    "several per row": lambda p: -np.sum(np.log(p[np.arange(N)[:, None], np.array([[0, 1, 1]])])),
    "by a mask": lambda p: -np.sum(np.log(p[MASK[:, None] & (np.arange(V) == 1)])),
    "log, then the pick": lambda p: -np.mean(np.log(p)[np.arange(N), Y]),
}


def check(f, z):
    check_grads(f, z)
    check_grads(f, z.astype(np.float32), rtol=1e-4, atol=1e-5, fd=False)
    assert ad.grad(f)(z.astype(np.float32)).dtype == np.float32


@pytest.mark.parametrize("enabled", [True, False])
@pytest.mark.parametrize("form", FORMS, ids=lambda f: f.__name__)
def test_every_spelling_against_the_tape_and_finite_differences(form, enabled, monkeypatch):
    monkeypatch.setattr(passes, "ENABLED", enabled)
    check(lambda z: PICKS["masked"](form(z)), RNG.normal(size=(N, V)) * 2)


@pytest.mark.parametrize("enabled", [True, False])
@pytest.mark.parametrize("pick", PICKS)
def test_every_pick_against_the_tape_and_finite_differences(pick, enabled, monkeypatch):
    monkeypatch.setattr(passes, "ENABLED", enabled)
    check(lambda z: PICKS[pick](in_place(z)), RNG.normal(size=(N, V)) * 2)


def over_leading_axis(z):  # the sum without keepdims over axis 0, a pick per column
    e = np.exp(z)
    return -np.sum(np.log((e / e.sum(axis=0))[Y, np.arange(N)]))


def columns(z):  # the character models' (V, 1) columns, one step each, exp written twice
    total = 0.0
    for t in range(3):
        y = z[:, t:t + 1]
        p = np.exp(y - np.max(y)) / np.sum(np.exp(y - np.max(y)))
        total += -np.log(p[Y[t], 0])
    return total


def a_vector(z):
    p = np.exp(z[0]) / np.sum(np.exp(z[0]))
    return -np.log(p[3]) * 2.0


@pytest.mark.parametrize("f", [over_leading_axis, columns, a_vector], ids=lambda f: f.__name__)
def test_other_axes_and_second_derivatives(f):
    z = RNG.normal(size=(V, N))
    check(f, z)
    hessian = ad.hessian(f)(z).reshape(z.size, z.size)
    grad, eps = ad.grad(f), 1e-6
    numeric = np.stack([(grad(z + eps * d) - grad(z - eps * d)).ravel() / (2 * eps)
                        for d in np.eye(z.size).reshape(z.size, *z.shape)], axis=1)
    np.testing.assert_allclose(hessian, numeric, rtol=1e-5, atol=1e-7)


def test_the_gradient_is_p_less_the_one_hot():
    z = RNG.normal(size=(N, V))
    g = ad.grad(lambda z: PICKS["mean"](in_place(z)))(z)
    np.testing.assert_allclose(g, (divided(z) - np.eye(V)[Y]) / N, rtol=1e-12, atol=1e-15)


def backward_of(f, *args):
    source = ad.value_and_grad(f).source(*args)
    return "\n".join(line.split("  # ")[0] for line in source.split("# backward")[1].splitlines())


def test_the_backward_is_a_scale_and_an_indexed_update(monkeypatch):
    """As the hand-written `dx = probs.copy(); dx[np.arange(N), y] -= 1; dx /= N`: no
    row sum, no scatter into zeros, nothing of the max, the exp or the quotient."""
    monkeypatch.setattr(passes, "ENABLED", True)
    def loss(x, y):
        return -np.sum(np.log(in_place(x)[np.arange(x.shape[0]), y])) / x.shape[0]

    def masked(x, y, mask):
        return -np.sum(mask * np.log(exp_twice(x)[np.arange(x.shape[0]), y])) / 2

    for f, args in ((loss, (RNG.normal(size=(N, V)), Y)),
                    (masked, (RNG.normal(size=(N, V)), Y, MASK))):
        backward = backward_of(f, *args)
        assert "[rows, y] +=" in backward, backward
        for gone in ("np.sum", "_scatter_add", "np.max", "np.exp", "np.divide", "=="):
            assert gone not in backward, (gone, backward)


def test_a_column_per_step_reads_its_softmax_alone(monkeypatch):
    monkeypatch.setattr(passes, "ENABLED", True)
    fresh = types.FunctionType(columns.__code__, columns.__globals__)  # code of its own
    source = ad.value_and_grad(fresh).source(RNG.normal(size=(V, N)))
    backward = source.split("# backward")[1]
    assert "grad of max" not in backward and "np.exp" not in backward
    assert "np.sum" not in backward and "_add_at(" in backward
