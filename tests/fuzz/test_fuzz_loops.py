"""A fuzzer (Hypothesis) for loops kept as loops (loops/scan.py, loops/hoist.py).

A program is a `for t in range(...)` loop whose body is a random sequence of statements on
one or two carried arrays: products with an invariant matrix, rows of the sequence read
forward or backward (`xs[t]`, `xs[T - 1 - t]`), a number per step (`1 / (t + 1)`),
elementwise functions, a second carry, a sum of every step. The function, written into
a fresh module, is compiled with the user's loops kept (AUTODIFFGEN_LOOPS=all) and with
them written out; both must agree with each other and with the tape, value and gradient,
at several lengths (1 to 6) and on a second call with new values. Derandomized for CI;
AUTODIFFGEN_FUZZ=<n> runs n programs.
"""

import importlib
import itertools
import os
import types

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import autodiffgen as ad
from autodiffgen import tape

EXAMPLES = int(os.environ.get("AUTODIFFGEN_FUZZ", "25"))
roll_module = importlib.import_module("autodiffgen.loops.roll")
STATEMENTS = [
    "h = np.tanh(h @ W)",
    "h = h + xs[t]",
    "h = h + xs[T - 1 - t] * 0.5",
    "h = h * (1.0 / (t + 1))",
    "h = np.sin(h) + b",
    "c = 0.5 * c + h",
    "h = np.tanh(h + c @ W)",
    "total = total + np.sum(h * h)",
    "h = h * np.exp(-np.abs(c))",
]
_ids = itertools.count()


@st.composite
def programs(draw):
    body = draw(st.lists(st.sampled_from(STATEMENTS), min_size=1, max_size=5))
    return body, draw(st.integers(1, 6)), draw(st.booleans())


def _source(body, second):
    lines = ["import numpy as np", "", "", "def f(W, b, xs):",
             "    T = xs.shape[0]",
             "    h = np.zeros((xs.shape[1], W.shape[0]))" if not second else
             "    h = xs[0] * 0.1",
             "    c = np.zeros_like(h)",
             "    total = 0.0",
             "    for t in range(T):"]
    lines += [f"        {s}" for s in body]
    lines += ["    return total + np.sum(h * h) + np.sum(c)"]
    return "\n".join(lines) + "\n"


def _function(body, second):
    name = f"_fuzz_loops_{next(_ids)}"
    module = types.ModuleType(name)
    exec(compile(_source(body, second), f"<{name}>", "exec"), module.__dict__)  # noqa: S102
    return module.f


def _arguments(T, seed):
    rng = np.random.default_rng(seed)
    return (0.5 * rng.normal(size=(3, 3)), rng.normal(size=3), rng.normal(size=(T, 2, 3)))


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_a_loop_kept_as_a_loop_agrees_with_the_loop_written_out_and_the_tape(program):
    body, T, second = program
    results, setting = {}, roll_module.USER_LOOPS
    for rolled in (True, False):
        roll_module.USER_LOOPS = rolled
        try:
            f = ad.value_and_grad(_function(body, second), argnums=(0, 1, 2))
            results[rolled] = [f(*_arguments(T, seed)) for seed in (0, 1)]
        finally:
            roll_module.USER_LOOPS = setting
    reference = _function(body, second)
    for seed, (kept, written) in enumerate(zip(results[True], results[False])):
        args = _arguments(T, seed)
        want = tape.grad(reference, argnums=(0, 1, 2))(*args)
        assert np.isclose(kept[0], written[0], rtol=1e-10), (body, T)
        assert np.isclose(kept[0], reference(*args), rtol=1e-10), (body, T)
        for got, same, expected in zip(kept[1], written[1], want):
            np.testing.assert_allclose(got, same, rtol=1e-9, atol=1e-12, err_msg=str(body))
            np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12, err_msg=str(body))
