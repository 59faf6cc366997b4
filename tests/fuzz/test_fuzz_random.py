"""A differential fuzzer (Hypothesis) for random draws inside differentiated functions.

A program mixes draws (np.random's legacy functions and methods of a Generator passed in,
with shapes from the data, reparameterized draws whose parameters are traced values,
dropout-style masks, and Python's random module and a random.Random read from a global) with elementwise steps and reductions. The compiled function is
called three times after one seeding (the third call with another batch size), then
eager NumPy and the tape are called as many times after re-seeding: every call's value
and gradient must agree, and the generators must end in the same state. The first call's
gradient is also checked against central differences with the noise fixed (re-seeded
before each evaluation). Derandomized for CI; AUTODIFFGEN_FUZZ=<n> runs n programs.
"""

import os
import random

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autodiffgen import tape, value_and_grad

EXAMPLES = int(os.environ.get("AUTODIFFGEN_FUZZ", "60"))
UNARY = [np.tanh, np.sin, lambda v: v * v, lambda v: np.log(1.0 + v * v)]
BINARY = [np.add, np.subtract, np.multiply, lambda a, b: a / (2.0 + np.sin(b))]


def legacy_draw(i, shape, u):
    """A draw from np.random's global state, shaped like the value u (or its rows)."""
    return [lambda: np.random.rand(*shape), lambda: np.random.randn(*shape),
            lambda: np.random.uniform(-1.0, 1.0, size=shape),
            lambda: np.random.normal(u, 0.3),  # reparameterized when u is differentiated
            lambda: np.random.standard_normal(shape) * 0.5,
            lambda: np.random.binomial(1, 0.5, size=shape) * 1.0][i]()


def generator_draw(rng, i, shape, u):
    return [lambda: rng.random(shape), lambda: rng.standard_normal(shape),
            lambda: rng.normal(u, 0.2, size=shape),
            lambda: rng.uniform(u, u + 1.0),
            lambda: rng.exponential(1.0 + u * u),
            lambda: rng.integers(0, 3, size=shape) * 0.5,
            lambda: rng.permutation(u) if np.ndim(u) else u][i]()


PY = random.Random(0)  # a global the function reads: read again at each call


def stdlib_draw(i, u):
    """A number drawn by Python's random module (or PY), in arithmetic with the value u."""
    return [lambda: u * random.random(), lambda: u + random.gauss(0.0, 0.3),
            lambda: random.uniform(u, u + 1.0),  # reparameterized (Python's own formula)
            lambda: random.gauss(u, 0.3) * PY.expovariate(2.0),
            lambda: u * random.randint(0, 2) + PY.choice([0.5, 1.5]),
            lambda: u * PY.normalvariate(0.0, 1.0) + (  # a drawn index, read at run time
                u[..., random.randrange(3)][..., None] if np.ndim(u) else u),
            lambda: PY.uniform(-1.0, 1.0) * u + random.triangular()][i]()


@st.composite
def programs(draw):
    steps = []
    for k in range(draw(st.integers(2, 7))):
        kind = draw(st.sampled_from(["unary", "binary", "reduce", "legacy", "rng", "dropout",
                                     "stdlib"]))
        steps.append((kind, draw(st.integers(0, 1 + k)), draw(st.integers(0, 1 + k)),
                      draw(st.integers(0, 6)), draw(st.floats(0.2, 0.9))))
    return steps


def run(steps, w, x, rng):
    values = [w * x, np.tanh(x) + w]  # (n, 3): w is (3,), x the batch
    for kind, a, b, i, p in steps:
        u, v = values[a], values[b]
        if kind == "unary":
            out = UNARY[i % len(UNARY)](u)
        elif kind == "binary":
            out = BINARY[i % len(BINARY)](u, v)
        elif kind == "reduce":
            out = u - np.mean(u, axis=-1, keepdims=True) * p if np.ndim(u) else u * p
        elif kind == "legacy":
            out = u + legacy_draw(i % 6, np.shape(u), u)
        elif kind == "rng":
            out = u * generator_draw(rng, i, np.shape(u), u)
        elif kind == "stdlib":
            out = stdlib_draw(i, u)
        else:
            out = u * (rng.random(np.shape(u)) < p) / p
        values.append(out)
    return np.sum(values[-1] ** 2) * 0.1 + np.mean(np.tanh(values[-2]))


def seeded(seed):
    np.random.seed(seed)
    random.seed(seed + 2)
    PY.seed(seed + 3)
    return np.random.default_rng(seed + 1)


def states(rng):
    legacy, own = np.random.get_state(), rng.bit_generator.state
    python, py = random.getstate(), PY.getstate()
    after = np.concatenate([np.random.rand(2), rng.random(2), [random.random(), PY.random()]])
    np.random.set_state(legacy)
    rng.bit_generator.state = own
    random.setstate(python)
    PY.setstate(py)
    return after


def data(seed):
    gen = np.random.default_rng(seed)
    return gen.uniform(-1.0, 1.0, 3), [gen.uniform(-1.0, 1.0, (n, 3)) for n in (6, 6, 4)]


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(programs(), st.integers(0, 2**16))
def test_random_programs_draw_and_differentiate_as_eager_numpy(steps, seed):
    def f(w, x, rng):
        return run(steps, w, x, rng)
    w, xs = data(seed)
    compiled = value_and_grad(f)
    rng = seeded(seed)
    got = [compiled(w, x, rng) for x in xs]
    after = states(rng)
    rng = seeded(seed)
    eager = [f(w, x, rng) for x in xs]
    np.testing.assert_array_equal(after, states(rng))
    rng = seeded(seed)
    ref = [tape.value_and_grad(f)(w, x, rng) for x in xs]
    np.testing.assert_array_equal(after, states(rng))
    for (value, g), e, (tv, tg) in zip(got, eager, ref):
        np.testing.assert_allclose(value, e, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(value, tv, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(g, tg, rtol=1e-8, atol=1e-10)
    fd = np.zeros(3)
    for k in range(3):
        e = np.zeros(3)
        e[k] = 1e-6
        fd[k] = (f(w + e, xs[0], seeded(seed)) - f(w - e, xs[0], seeded(seed))) / 2e-6
    np.testing.assert_allclose(got[0][1], fd, rtol=1e-4, atol=1e-6)
