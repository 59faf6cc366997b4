"""A differential fuzzer for data-dependent sizes (issue 10): random programs that select
rows with masks passed in and masks computed from data (also through np.nonzero and
np.where(cond)), compute on the selection and reduce it (sum, mean, var, a sum over the
count as len(), np.count_nonzero or .shape[0] gives it). The same cached function is
called with masks that select other numbers of rows (none and all included) and compared
with eager NumPy, the tape, and central finite differences.

Derandomized: CI runs the same programs every time; AUTODIFFGEN_FUZZ_SIZES=<n> runs n
examples (e.g. 1000) for a longer local search.
"""

import os
import warnings

import numpy as np
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from autodiffgen import tape, value_and_grad

EXAMPLES = int(os.environ.get("AUTODIFFGEN_FUZZ_SIZES", os.environ.get("AUTODIFFGEN_FUZZ", "40")))
ROWS, COLS = 7, 3
MARGIN = 1e-3  # a data mask's decision closer than this would fool finite differences

UNARY = [np.tanh, np.sin, lambda v: v * v, lambda v: np.exp(0.3 * v),
         lambda v: np.log(1.0 + v * v)]
SOURCES = ["arg", "data", "nonzero", "where", "flatnonzero"]
REDUCES = ["sum", "mean", "var", "len", "count", "shape"]
FRACTIONS = (0.5, 0.0, 1.0, 0.3, 0.8)  # of the rows a mask argument selects, call by call


@st.composite
def programs(draw):
    terms = []
    for _ in range(draw(st.integers(1, 3))):
        terms.append((draw(st.sampled_from(SOURCES)), draw(st.integers(0, len(UNARY) - 1)),
                      draw(st.booleans()), draw(st.sampled_from(REDUCES)),
                      draw(st.floats(-0.8, 0.8))))
    return terms


def run(terms, w, x, m):
    total = 0.0
    for source, unary, rows_first, reduce, t in terms:
        scores = x @ w
        if source == "arg":
            mask = m
        elif source in ("data", "where"):
            mask = scores > t
        else:
            mask = m
        if source == "nonzero":
            rows = x[np.nonzero(mask)]
        elif source == "where":
            rows = x[np.where(mask)]
        elif source == "flatnonzero":
            rows = x[np.flatnonzero(mask)]
        else:
            rows = x[mask]
        v = UNARY[unary](rows @ w) if rows_first else UNARY[unary](rows * w)
        if reduce == "sum":
            r = np.sum(v)
        elif reduce == "mean":
            r = np.mean(v)
        elif reduce == "var":
            r = np.var(v)
        elif reduce == "len":
            r = np.sum(v) / len(rows)
        elif reduce == "count":
            r = np.sum(v) / np.count_nonzero(mask)
        else:
            r = np.mean(v) * rows.shape[0]
        total = total + r
    return total


def margins_clear(terms, w, x):
    scores = x @ w
    return all(np.min(np.abs(scores - t)) > MARGIN for *_, t in terms)


def calls(seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((ROWS, COLS))
    out = []
    for k, fraction in enumerate(FRACTIONS):
        w = rng.standard_normal(COLS) * (0.5 + k)
        m = np.zeros(ROWS, bool)
        m[rng.permutation(ROWS)[:round(fraction * ROWS)]] = True
        out.append((w, x, m))
    return out


def fd_direction(f, w, x, m, g, rng, eps=1e-6):
    d = rng.standard_normal(w.shape)
    fd = (f(w + eps * d, x, m) - f(w - eps * d, x, m)) / (2 * eps)
    np.testing.assert_allclose(np.dot(g, d), fd, rtol=1e-5, atol=1e-6)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(programs(), st.integers(0, 2**16))
def test_random_masked_programs_over_counts(terms, seed):
    def f(w, x, m):
        return run(terms, w, x, m)

    generated = value_and_grad(f, max_variants=64)
    reference = tape.value_and_grad(f)
    rng = np.random.default_rng(seed)
    counts = set()
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        for w, x, m in calls(seed):
            if not margins_clear(terms, w, x):
                continue
            eager = f(w, x, m)
            value, grad = generated(w, x, m)
            t_value, t_grad = reference(w, x, m)
            np.testing.assert_allclose(value, eager, rtol=1e-10, atol=1e-12, equal_nan=True)
            np.testing.assert_allclose(value, t_value, rtol=1e-10, atol=1e-12, equal_nan=True)
            np.testing.assert_allclose(grad, t_grad, rtol=1e-9, atol=1e-12, equal_nan=True)
            if np.isfinite(value) and np.all(np.isfinite(grad)):
                fd_direction(f, w, x, m, grad, rng)
            counts.add(int(np.count_nonzero(m)))
    info = generated.cache_info()
    event(f"traces: {min(info.misses, 4)}{'+' if info.misses > 4 else ''}")
    event(f"mask counts per program: {len(counts)}")


def test_the_fuzzer_sees_counts_0_and_all_in_one_program():
    """Not vacuous: one program's calls select no row, some rows and all rows, and one
    trace serves them."""
    terms = [("arg", 0, True, "mean", 0.0), ("data", 1, False, "sum", 0.1)]

    def f(w, x, m):
        return run(terms, w, x, m)

    generated = value_and_grad(f)
    counts = set()
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        for w, x, m in calls(3):
            value, grad = generated(w, x, m)
            np.testing.assert_allclose(value, f(w, x, m), equal_nan=True)
            np.testing.assert_allclose(grad, tape.grad(f)(w, x, m), equal_nan=True)
            counts.add(int(np.count_nonzero(m)))
    assert {0, ROWS} <= counts and len(counts) >= 4
    assert generated.cache_info().misses == 1
