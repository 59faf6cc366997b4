"""Writes into an array in place while a view of another part of it is still to be read
(plan/memory.py with rules/regions.py), and loops that take their first value's buffer
rather than a copy (memory._handed).

A write `h[i] = v` is planned into h's buffer when h dies there and every view of h
still to be read (a backward reading `h[0]` saved from the forward, the row `h[:, t - 1,
:]` a step read) looks at elements apart from i: those views see what they saw. Every
function is checked against the tape and finite differences (check_grads)."""

import importlib

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen import passes, tape
from autodiffgen.testing import check_grads

RNG = np.random.default_rng(5)
roll_module = importlib.import_module("autodiffgen.loops.roll")


def _forward(f, *args, argnums=0):
    return ad.emit(f, *args, argnums=argnums).split("# backward")[0]


def apart_view(x):
    h = x * 2.0
    p = h[0]                 # a view the backward reads (the derivative of sin)
    y = np.sin(p)
    h[2] = y * 3.0           # apart from row 0: written into h
    return np.sum(h * h) + np.sum(y)


def meeting_view(x):
    h = x * 2.0
    p = h[0]
    y = np.sin(p)
    h[0:2] = y * 3.0         # meets row 0: p must keep its values, h is copied
    return np.sum(h * h) + np.sum(y)


def inherited_view(x):
    h = x * 2.0
    p = h[0]
    y = np.sin(p)
    h[2] = y * 3.0           # in place: p now looks into this value's buffer
    h[0] = y                 # meets p: a copy
    return np.sum(h * h) + np.sum(y)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_write_apart_from_a_live_view_is_in_place(dtype):
    x = RNG.normal(size=(3, 4)).astype(dtype)
    tol = {} if dtype == np.float64 else {"rtol": 2e-3, "atol": 2e-3}
    for f in (apart_view, meeting_view, inherited_view):
        check_grads(f, x, **tol)
    if passes.ENABLED:
        assert "h[2] = " in _forward(apart_view, x)
        assert "_setitem(h, np.s_[0:2]" in _forward(meeting_view, x)
        forward = _forward(inherited_view, x)
        assert "h[2] = " in forward and "_setitem(h, np.s_[0]" in forward


def preallocated(x, w):
    h = np.zeros((x.shape[0] + 1, x.shape[1]), dtype=x.dtype)
    h[0] = np.cos(x[0])
    for t in range(x.shape[0]):
        h[t + 1] = np.tanh(h[t] * w + x[t])
    return np.sum(h * h)


def read_after_the_loop(x, w):
    h = np.exp(x)            # exp's derivative reads h: its first value lives on
    for t in range(1, h.shape[0]):
        h[t] = np.tanh(h[t - 1] * w)
    return np.sum(h * h)


def test_a_loop_takes_the_buffer_of_a_first_value_that_dies_there():
    x, w = RNG.normal(size=(6, 3)), RNG.normal(size=3)
    for f in (preallocated, read_after_the_loop):
        check_grads(f, x, w, argnums=(0, 1))
    forward = _forward(preallocated, x, w, argnums=(0, 1))
    if "for t in" in forward:  # (the loop kept: not with AUTODIFFGEN_LOOPS=updates)
        assert "np.copy(h" not in forward and "h_1[add] = " in forward
        forward = _forward(read_after_the_loop, x, w, argnums=(0, 1))
        assert "_setitem(h, " in forward or "np.copy(h" in forward  # h = exp(x) lives on


def looks_ahead(x):
    """A `while` loop saving views of rows a later step writes: each step's are copied
    (kept in a list, they would see the next step's write)."""
    h = np.zeros((40, x.shape[0]))
    h[0] = x
    h[1:] = 0.25
    t = 0
    while np.max(np.abs(h[t])) > 0.05:
        prev, ahead = h[t], h[t + 2]
        h[t + 1] = np.sin(prev) * 0.5 * ahead
        t += 1
    return np.sum(h * h)


def test_views_a_while_loop_saves_are_copies(monkeypatch):
    monkeypatch.setattr(roll_module, "ENABLED", True)
    monkeypatch.setattr(roll_module, "USER_LOOPS", True)
    g = ad.value_and_grad(looks_ahead)
    for scale in (1.0, 3.0, 0.3, 2.0):
        x = np.array([0.5, 1.0, -0.7]) * scale
        value, grad = g(x)
        want_value, want_grad = tape.value_and_grad(looks_ahead)(x)
        np.testing.assert_allclose(value, want_value, rtol=1e-12)
        np.testing.assert_allclose(grad, want_grad, rtol=1e-10)
    source = g.source(x)
    if passes.ENABLED:
        assert "while True:" in source and ".append(np.copy(" in source
