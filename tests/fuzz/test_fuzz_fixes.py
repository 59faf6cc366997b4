"""A differential fuzzer (Hypothesis) for the programs of issue 10's numerics and crashes:
random functions, written out as source, that meet every edge the issue lists at once.

A program's statements bind variables named like what generated code calls (`math`,
`operator`, `np`, `numexpr`, `_setitem`, `GuardFailure`, `slice`, ...; the function itself
reaches NumPy as `numpy`), and its terms are polynomials `c * x ** k` with k in 0..3 (int
or float) on data with exact zeros, `x ** p` with an exponent array holding zeros, std and
var with ddof over random axes of a shape with length-1 axes on data with equal rows, a
concatenate loop that starts from a size-0 2-d constant, and a guard on float() of
a1 @ b1 + a2 @ b2 + a3 @ b3 (which the accumulate pass would merge). Each program is
checked against eager NumPy (the value), the tape and central finite differences
(check_grads, reverse mode, and forward mode where no guard reads a float() of an
argument), must give no NaN, and its cached function is
re-called on new data. Derandomized: CI runs the same programs every time (a few seconds);
AUTODIFFGEN_FUZZ_FIXES=<n> runs n of them for a longer local search.
"""

import itertools
import linecache
import os

import numpy as np
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from autodiffgen import tape, value_and_grad
from autodiffgen.testing import check_grads

EXAMPLES = int(os.environ.get("AUTODIFFGEN_FUZZ_FIXES", os.environ.get("AUTODIFFGEN_FUZZ", "40")))
NAMES = ["math", "operator", "np", "numexpr", "scipy", "_setitem", "GuardFailure", "slice",
         "const", "n", "g", "sum", "bytes"]
EXPONENTS = [0, 1, 2, 3, 0.0, 1.0, 2.0]
UNARY = ["numpy.sin({v}) * 1.5", "{v} * {v}", "numpy.tanh({v}) + {v}", "-{v}", "{v} ** 2"]
_files = itertools.count()


@st.composite
def programs(draw):
    rows, cols = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    names = draw(st.permutations(NAMES))
    arrays, terms, lines = ["x"], [], []
    for k in range(draw(st.integers(2, 6))):
        v = draw(st.sampled_from(arrays))
        kind = draw(st.sampled_from(["unary", "poly", "power", "std", "concat", "guard"]))
        if kind == "unary":
            lines.append(f"{names[k]} = {draw(st.sampled_from(UNARY)).format(v=v)}")
            arrays.append(names[k])
            continue
        if kind == "poly":
            ks = draw(st.lists(st.sampled_from(EXPONENTS), min_size=1, max_size=4))
            cs = draw(st.lists(st.sampled_from([0.5, -1.0, 2.0, 0.25]), min_size=len(ks),
                               max_size=len(ks)))
            term = "numpy.sum(" + " + ".join(f"{c} * {v} ** {e}" for c, e in zip(cs, ks)) + ")"
        elif kind == "power":
            term = f"numpy.sum({v} ** p)"
        elif kind == "std":
            axis = draw(st.sampled_from([None, 0, 1, -1, (0, 1)]))
            size = rows * cols if axis in (None, (0, 1)) else (rows if axis == 0 else cols)
            ddof = draw(st.integers(0, 1)) if size >= 2 else 0
            fn = draw(st.sampled_from(["std", "var"]))
            term = f"numpy.sum(numpy.{fn}({v}, axis={axis}, ddof={ddof}) * 1.5)"
        elif kind == "concat":
            lines += [f"{names[k]} = numpy.zeros((0, {cols}))",
                      "for k in range(2):",
                      f"    {names[k]} = numpy.concatenate([{names[k]}, numpy.sin({v}) * k])"]
            term = f"numpy.sum({names[k]} ** 2)"
        else:
            term = (f"{v}.sum() * (1.0 if float(numpy.sum(a1 @ b1 + a2 @ b2 + a3 @ b3)) > 0"
                    " else -2.0)")
        lines.append(f"{names[k]} = {term}")
        terms.append(names[k])
    total = " + ".join(terms) if terms else "numpy.sum(x ** 2)"
    return (rows, cols), lines + [f"return {total}"]


def compile_program(lines):
    """The function, with its source in linecache so that names are taken from it."""
    filename = f"<fuzz_fixes_{next(_files)}>"
    source = "def f(x, p, a1, b1, a2, b2, a3, b3):\n" + "".join(f"    {x}\n" for x in lines)
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    scope = {"numpy": np}
    exec(compile(source, filename, "exec"), scope)  # noqa: S102  the fuzzer's own program
    return scope["f"], source


def data(shape, seed):
    """x with exact zeros and, often, equal rows or one value; p: exponents with zeros."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.5, 1.5, size=shape)
    x[rng.random(shape) < 0.3] = 0.0
    if rng.random() < 0.4:
        x[:] = x[0]  # equal rows: std over axis 0 is 0
    if rng.random() < 0.2:
        x[:] = 0.5
    p = rng.choice([0.0, 1.0, 2.0, 3.0], size=shape)
    mats = [rng.normal(size=(4, 9)) if i % 2 == 0 else rng.normal(size=(9, 3)) for i in range(6)]
    return (x, p, *mats)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.integers(0, 2**16))
def test_edge_programs_match_numpy_tape_and_finite_differences(program, seed):
    shape, lines = program
    f, source = compile_program(lines)
    generated = value_and_grad(f, max_variants=64)
    for k in range(3):  # new data each call: zeros elsewhere, the guard's other side
        args = data(shape, seed + k)
        with np.errstate(all="raise"):  # no 0 ** -1, no inf * 0 in the generated code
            value, g = generated(*args)
        np.testing.assert_allclose(value, f(*args), rtol=1e-12, atol=1e-12, err_msg=source)
        np.testing.assert_allclose(g, tape.grad(f)(*args), rtol=1e-10, atol=1e-12,
                                   err_msg=source)
        assert np.isfinite(g).all(), source
    # forward mode takes every float argument as an input, and float() of one is refused
    check_grads(f, *args, rtol=1e-5, atol=1e-5, fwd="float(" not in source)
    event(f"paths traced: {generated.cache_info().misses}")
