"""A fuzzer (Hypothesis) for what a trace reads through an ARGUMENT object (capture.py,
Capture.argument): `self` of a method, an object passed in, a partial over a method, a
callable object.

A program is a chain of steps, each reading one attribute of the object: an array (used
directly or through np.asarray), a float, an int and a NumPy int used as values, a string
flag choosing a branch, a Generator drawing noise. Between calls the attributes are
rebound, changed in place or reseeded; the one cached function must agree at every call
with eager NumPy and the tape, drawing the same numbers. Derandomized for CI;
AUTODIFFGEN_FUZZ=<n> runs n programs.
"""

import functools
import os

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autodiffgen import tape, value_and_grad

EXAMPLES = int(os.environ.get("AUTODIFFGEN_FUZZ", "30"))
KINDS = ["array", "asarray", "float", "int", "npint", "flag", "rng"]
ROUTES = ["method", "object", "partial", "callable"]
EDITS = ["rebind", "in place", "float", "int", "flag", "reseed", "keep"]


class Holder:
    def __init__(self, kinds, seed):
        r = np.random.default_rng(seed)
        self.kinds = tuple(kinds)
        self.a = r.normal(size=3)
        self.s, self.k, self.n, self.mode = 0.5, 2, np.int64(3), "sin"
        self.rng = np.random.default_rng(seed + 1)

    def loss(self, w):
        y = w
        for kind in self.kinds:
            if kind == "array":
                y = y * self.a
            elif kind == "asarray":
                y = y + np.asarray(self.a)
            elif kind == "float":
                y = y + self.s
            elif kind == "int":
                y = y * 0.9 ** self.k
            elif kind == "npint":
                y = y * self.n
            elif kind == "flag":
                y = np.sin(y) if self.mode == "sin" else np.cos(y)
            else:
                y = y * self.rng.random(y.shape)
        return np.sum(y ** 2)

    __call__ = loss


def _through(w, h):
    return h.loss(w)


def _calling(w, fn):
    return fn(w)


def _route(route, h):
    """(the function to differentiate, its arguments after w) for a route."""
    if route == "method":
        return (lambda w, h: Holder.loss(h, w)), (h,)
    if route == "object":
        return _through, (h,)
    if route == "partial":
        return _calling, (functools.partial(Holder.loss, h),)
    return _calling, (h,)


def _edit(h, edit, seed):
    r = np.random.default_rng(seed)
    if edit == "rebind":
        h.a = r.normal(size=3)
    elif edit == "in place":
        h.a[...] = r.normal(size=3)
    elif edit == "float":
        h.s = float(r.normal())
    elif edit == "int":
        h.k, h.n = int(r.integers(0, 20)), np.int64(r.integers(-5, 5))
    elif edit == "flag":
        h.mode = "cos" if h.mode == "sin" else "sin"
    elif edit == "reseed":
        h.rng = np.random.default_rng(seed)


@settings(max_examples=EXAMPLES, derandomize=EXAMPLES <= 30, deadline=None,
          suppress_health_check=list(HealthCheck))
@given(st.lists(st.sampled_from(KINDS), min_size=1, max_size=5), st.sampled_from(ROUTES),
       st.lists(st.tuples(st.sampled_from(EDITS), st.integers(0, 2**16)), min_size=3,
                max_size=5), st.integers(0, 2**16))
def test_reads_through_argument_objects(kinds, route, edits, seed):
    h = Holder(kinds, seed)
    fun, rest = _route(route, h)
    f = value_and_grad(fun)
    w = np.random.default_rng(seed + 2).normal(size=3)
    for edit, s in [("keep", 0), *edits]:
        _edit(h, edit, s)
        state = h.rng.bit_generator.state
        value, g = f(w, *rest)
        h.rng.bit_generator.state = state
        np.testing.assert_allclose(value, fun(w, *rest), rtol=1e-10, atol=1e-12)
        h.rng.bit_generator.state = state
        np.testing.assert_allclose(g, tape.grad(fun)(w, *rest), rtol=1e-9, atol=1e-12)
