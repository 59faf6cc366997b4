"""A differential fuzzer (Hypothesis): random programs against the tape and finite
differences, then the same cached function re-called on data that takes other branches.

A program is a random DAG over three inputs of broadcast-compatible random shapes (0-d
included): elementwise unary and binary steps, reductions, and data-dependent Python
control flow (`if u.sum() > t:` choosing between two steps, and a `while` loop whose trip
count depends on the data). The examples are derandomized, so CI runs the same programs
every time in well under a minute; AUTODIFFGEN_FUZZ=<n> runs n examples (e.g. 2000) for
a longer local search.
"""

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from autodiffgen import tape, value_and_grad
from autodiffgen.testing import check_grads
from autodiffgen.trace.boxes import Box

EXAMPLES = int(os.environ.get("AUTODIFFGEN_FUZZ", "150"))
MARGIN = 1e-3  # a decision closer than this to flipping would fool finite differences

UNARY = [np.tanh, np.sin, np.cos, lambda v: v * v, np.negative, lambda v: np.exp(0.5 * v),
         lambda v: np.log(1.0 + v * v), lambda v: v / (1.0 + v * v)]
BINARY = [np.add, np.subtract, np.multiply, lambda a, b: a / (2.0 + np.sin(b)),
          lambda a, b: np.hypot(a, 1.0 + b * b)]


@st.composite
def programs(draw):
    base = tuple(draw(st.lists(st.integers(1, 4), min_size=0, max_size=3)))
    shapes = []
    for _ in range(3):  # broadcast-compatible: drop leading axes, squash some to 1
        lead = draw(st.integers(0, len(base)))
        shapes.append(tuple(1 if draw(st.booleans()) and draw(st.booleans()) else n
                            for n in base[lead:]))
    steps = []
    for k in range(draw(st.integers(2, 7))):
        kind = draw(st.sampled_from(["unary", "binary", "binary", "reduce", "if", "while"]))
        a, b = draw(st.integers(0, 2 + k)), draw(st.integers(0, 2 + k))
        steps.append((kind, a, b, draw(st.integers(0, 7)), draw(st.integers(0, 7)),
                      draw(st.floats(-1.0, 1.0))))
    return shapes, steps


def run(steps, args, margins=None):
    """The program on arrays or Boxes; on arrays, `margins` collects how far each
    data-dependent decision is from flipping."""
    values = list(args)

    def decide(value, threshold):
        if margins is not None and type(value) is not Box:
            margins.append(abs(float(value) - threshold))
        return value > threshold

    for kind, a, b, i, j, t in steps:
        u, v = values[a], values[b]
        if kind == "unary":
            out = UNARY[i](u)
        elif kind == "binary":
            out = BINARY[i % len(BINARY)](u, v)
        elif kind == "reduce":
            reduce = (np.sum, np.mean, np.max)[i % 3]  # random floats: no ties in max
            out = (reduce(u, axis=-1, keepdims=True) if np.ndim(u) else u) * 0.5 + np.mean(v)
        elif kind == "if":
            out = UNARY[i](u) if decide(np.sum(np.tanh(u)), t) else BINARY[j % 5](u, v)
        else:
            out, n = u, 0
            while n < 4 and decide(1.0 - np.mean(np.tanh(out) ** 2), 0.5 + 0.4 * t):
                out, n = np.sin(out) * 1.3 + 0.2, n + 1
        values.append(out)
    return np.sum(values[-1] ** 2) + np.mean(np.tanh(values[-2]))


def data(shapes, seed):
    rng = np.random.default_rng(seed)
    return tuple(rng.uniform(-1.5, 1.5, size=shape) for shape in shapes)


def clear_decisions(steps, args):
    margins = []
    run(steps, args, margins)
    return all(m > MARGIN for m in margins)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(programs(), st.integers(0, 2**16))
def test_random_programs_with_branches(program, seed):
    shapes, steps = program
    args = data(shapes, seed)
    assume(clear_decisions(steps, args))

    def f(x, y, z):
        return run(steps, (x, y, z))

    check_grads(f, *args, argnums=(0, 1, 2), rtol=1e-5, atol=1e-6)
    generated = value_and_grad(f, argnums=(0, 1, 2), max_variants=64)
    generated(*args)
    for k in range(1, 5):  # the cached function on new data, maybe down other branches
        new = tuple(np.asarray(a * s) for a, s in zip(data(shapes, seed + k), (1, -1, 2)))
        if not clear_decisions(steps, new):
            continue
        value, grads = generated(*new)
        tape_value, tape_grads = tape.value_and_grad(f, argnums=(0, 1, 2))(*new)
        np.testing.assert_allclose(value, tape_value, rtol=1e-10, atol=1e-12)
        for g, t in zip(grads, tape_grads):
            np.testing.assert_allclose(g, t, rtol=1e-9, atol=1e-12)
    assert generated.cache_info().entries == 1
    event(f"paths traced: {generated.cache_info().misses}")
    event("control flow: " + ",".join(sorted({s[0] for s in steps} & {"if", "while"})))


@pytest.mark.parametrize("seed", range(3))
def test_fuzzer_programs_do_take_both_branches(seed):
    """The generator is not vacuous: one program's decisions go both ways over new data."""
    steps = [("if", 0, 1, 2, 3, 0.0), ("while", 3, 0, 0, 0, 0.1)]
    shapes = [(3,), (3,), ()]
    outcomes = set()
    for k in range(20):
        args = data(shapes, 100 * seed + k)
        outcomes.add(bool(np.sum(np.tanh(args[0])) > 0.0))
    assert outcomes == {True, False}
    generated = value_and_grad(lambda x, y, z: run(steps, (x, y, z)), argnums=(0, 1, 2))
    for k in range(20):
        generated(*data(shapes, 100 * seed + k))
    assert generated.cache_info().misses >= 2  # several paths, one signature
