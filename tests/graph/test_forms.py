"""graph/forms.py's softmax and log-softmax: which traced spellings are a normalized
exponential (or its log) of which value over which axes, and which only look like one."""

import numpy as np
import pytest
from graph_helpers import traced

from autodiffgen.graph.forms import log_softmax_of, same_value, softmax_of

RNG = np.random.default_rng(3)
W = RNG.normal(size=(4, 5))


def found(f, z):
    """(z's node is the one found, axes) of each softmax in f's forward, as traced."""
    def loss(z):
        p = f(z)
        return np.sum(p * W[:p.shape[0], :p.shape[1]])
    graph = traced(loss, z)
    computed = set(graph.nodes)
    forward = [n for n in graph.nodes if n.grad_of is None]
    return [(m[0] is graph.inputs[0], m[1]) for m in
            (softmax_of(n, computed) for n in forward) if m is not None]


SOFTMAXES = {
    "divided, shifted by the max": (lambda z: _divided(z), (1,)),
    "in place": (lambda z: _in_place(z), (1,)),
    "times the reciprocal": (lambda z: np.exp(z) * np.reciprocal(
        np.sum(np.exp(z), axis=0, keepdims=True)), (0,)),
    "times one over the sum": (lambda z: np.exp(z) * (1 / np.sum(np.exp(z), axis=-1,
                                                                  keepdims=True)), (1,)),
    "the sum's axis given back": (lambda z: np.exp(z) / np.exp(z).sum(axis=1)[:, None], (1,)),
    "a reshape of the sum": (lambda z: np.exp(z) / np.exp(z).sum(axis=1).reshape(-1, 1), (1,)),
    "over leading axes, no keepdims": (lambda z: np.exp(z) / np.exp(z).sum(axis=0), (0,)),
    "over every axis": (lambda z: np.exp(z - 2.0) / np.sum(np.exp(z - 2.0)), (0, 1)),
    "the exp twice, a max each": (lambda z: np.exp(z - np.max(z)) / np.sum(
        np.exp(z - np.max(z))), (0, 1)),
}


def _divided(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _in_place(z):
    p = np.exp(z - np.max(z, axis=1, keepdims=True))
    p /= np.sum(p, axis=1, keepdims=True)
    return p


@pytest.mark.parametrize("name", SOFTMAXES)
def test_a_softmax_of_the_unshifted_value(name):
    f, axes = SOFTMAXES[name]
    assert found(f, RNG.normal(size=(4, 5))) == [(True, axes)]


NOT_SOFTMAXES = {
    "other shifts": lambda z: np.exp(z - z.max(axis=1, keepdims=True)) / np.sum(
        np.exp(z - z.min(axis=1, keepdims=True)), axis=1, keepdims=True),
    "another value's sum": lambda z: np.exp(z) / np.sum(np.exp(2 * z), axis=1, keepdims=True),
    "a trailing sum without keepdims": lambda z: np.exp(z[:, :4]) / np.exp(z[:, :4]).sum(axis=1),
    "a transposed sum": lambda z: np.exp(z[:, :4]) / np.exp(z[:, :4]).sum(axis=1)[None, :],
    "a product, no division": lambda z: np.exp(z) * np.sum(np.exp(z), axis=1, keepdims=True),
    "random draws": lambda z: np.exp(z * np.random.default_rng(0).random()) / np.sum(
        np.exp(z * np.random.default_rng(0).random()), axis=1, keepdims=True),
}


@pytest.mark.parametrize("name", NOT_SOFTMAXES)
def test_what_is_no_softmax(name):
    assert found(NOT_SOFTMAXES[name], RNG.normal(size=(4, 5))) == []


def test_a_shift_along_the_axis_stays_in_z():
    """exp(z - max over rows) normalized along rows: a softmax of the shifted value."""
    def f(z):
        e = np.exp(z - z.max(axis=0, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    assert found(f, RNG.normal(size=(4, 5))) == [(False, (1,))]


def test_same_value_looks_into_steps_and_constants():
    graph = traced(lambda z: np.sum((z - np.max(z)) * (z - np.max(z)) + (z - np.min(z))),
                   RNG.normal(size=3))
    subtracts = [n for n in graph.nodes if n.prim.name == "subtract" and n.grad_of is None]
    first, second, third = subtracts
    assert same_value(first, second) and not same_value(first, third)
    assert not same_value(first, second, depth=1)  # the maxes are two nodes
    assert same_value(np.array([1.0, 2.0]), np.array([1.0, 2.0]))
    assert not same_value(np.array([1.0, 2.0]), np.array([1.0, 3.0]))
    assert not same_value(first, 1.0)


def log_softmaxes(f, z):
    """(z's node is the one found, axes) of each log-softmax in f's forward."""
    graph = traced(lambda z: np.sum(f(z) * W[:z.shape[0], :z.shape[1]]), z)
    computed = set(graph.nodes)
    return [(m[0] is graph.inputs[0], m[1]) for m in
            (log_softmax_of(n, computed) for n in graph.nodes if n.grad_of is None)
            if m is not None]


def _shifted(z):
    s = z - z.max(axis=1, keepdims=True)
    return s - np.log(np.sum(np.exp(s), axis=1, keepdims=True))


def _logsumexp(z):
    m = np.max(z, axis=0, keepdims=True)
    return z - (m + np.log(np.sum(np.exp(z - m), axis=0, keepdims=True)))


LOG_SOFTMAXES = {
    "shifted": (_shifted, [(True, (1,))]),
    "plain": (lambda z: z - np.log(np.exp(z).sum(axis=-1, keepdims=True)), [(True, (1,))]),
    "less its logsumexp": (_logsumexp, [(True, (0,))]),
    "the sum's axis given back": (
        lambda z: z - np.log(np.exp(z).sum(axis=1))[:, None], []),  # log, then the axis
    "another shift in the exp": (
        lambda z: (z - np.max(z)) - np.log(np.sum(np.exp(z - np.min(z)))), []),
    "a logsumexp of another shift": (
        lambda z: z - (np.max(z) + np.log(np.sum(np.exp(z - np.min(z))))), []),
}


@pytest.mark.parametrize("name", LOG_SOFTMAXES)
def test_log_softmaxes(name):
    f, expected = LOG_SOFTMAXES[name]
    assert log_softmaxes(f, RNG.normal(size=(4, 5))) == expected
