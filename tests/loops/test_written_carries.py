"""Kept loops that write into a carried array in place while views of it live on.

`ahead = h[t + 1]` is carried into the next step, which writes `h[t] = ...` after reading
it: a view of the carried buffer, it would see a later step's write, so the loop copies
it when it carries it (codegen/loops.py: _outliving). Its backward adds into the state's
gradient at one row and reads it at another in the same step, which keeps that sum in
the loop (loops/hoist.py: a running sum a step reads is not summed after the loop).

Writes give their old array's cotangent unzeroed where no one reads the zeros
(backward/writes.py), which gives the loops' backward new shapes: a table of loops over
writes, each checked by check_grads."""

import importlib

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen.testing import check_grads

roll_module = importlib.import_module("autodiffgen.loops.roll")


def carried_ahead(x, w):
    h = np.zeros((x.shape[0] + 2, x.shape[1]), dtype=x.dtype)
    h[0] = np.cos(x[0])
    h[1:] = 0.5
    ahead = h[1]
    for t in range(1, x.shape[0] + 1):
        h[t] = np.sin(ahead * w) + x[t - 1]   # ahead: the row this write replaces
        ahead = h[t + 1]
    return np.sum(h * h)


@pytest.fixture
def loops_kept(monkeypatch):
    monkeypatch.setattr(roll_module, "ENABLED", True)
    monkeypatch.setattr(roll_module, "USER_LOOPS", True)


@pytest.mark.usefixtures("loops_kept")
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_carried_view_of_an_array_written_in_place_is_copied(dtype):
    rng = np.random.default_rng(3)
    x, w = rng.normal(size=(6, 3)).astype(dtype), rng.normal(size=3).astype(dtype)
    tol = {} if dtype == np.float64 else {"rtol": 2e-3, "atol": 2e-3}
    check_grads(carried_ahead, x, w, argnums=(0, 1), **tol)
    source = ad.emit(carried_ahead, x, w, argnums=(0, 1))
    loop = source.split("for t in")[1].split("# backward")[0]
    assert "h_1[add] = " in loop and "np.copy(ahead" in loop


def two_buffers(x, w):
    a = np.zeros(x.shape)
    b = np.zeros(x.shape)
    for t in range(x.shape[0]):
        a[t] = np.sin(x[t] * w)
        b[t] = a[t] * 2.0 + (b[t - 1] if t else 0.0)
    return np.sum(a * b)


def prefix_reads(x, w):
    h = np.zeros(x.shape)
    total = 0.0
    for t in range(x.shape[0]):
        h[t] = np.tanh(x[t] * w + 0.1 * t)
        total = total + np.sum(h[:t + 1] ** 2)   # every row written so far
    return total


def rewrite_rows(x, w):
    h = np.zeros(x.shape)
    for t in range(x.shape[0]):
        h[t] = np.tanh(x[t] * w)
        if t:
            h[t - 1] = h[t - 1] * h[t]           # a row written before, again
    return np.sum(h * h)


def cols_then_rows(x, w):
    """The backward of the first loop has each of its values read again outside it: the
    loop is written out (loops/roll.py)."""
    out = np.zeros((4, 4))
    for j in range(4):
        out[:, j] = x[j] * w
    for i in range(4):
        out[i, :] = out[i, :] + x[i]            # meets every column's write
    return np.sum(out ** 2)


def reversed_rows(x, w):
    out = np.zeros(x.shape)
    for t in range(x.shape[0]):
        out[-1 - t] = np.cos(x[t] * w)
    return np.sum(out * np.arange(out.size).reshape(out.shape))


@pytest.mark.parametrize("f", [two_buffers, prefix_reads, rewrite_rows, cols_then_rows,
                               reversed_rows])
def test_loops_over_writes(f):
    rng = np.random.default_rng(4)
    x, w = rng.normal(size=(4, 4)), rng.normal(size=4)
    check_grads(f, x, w, argnums=(0, 1))
