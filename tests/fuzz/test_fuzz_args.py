"""A differential fuzzer (Hypothesis) for what a call passes besides its arrays' shapes
(issue 10): Python numbers that change between calls, `try`/`except` around NumPy calls
whose raise depends on the values, and aliased or Fortran-ordered arguments of functions
that write in place. Each program is called several times with new values, including
values that take the other path, and compared with eager NumPy and the tape.

Derandomized: CI runs the same programs every time (well under 20 s); AUTODIFFGEN_FUZZ=<n>
runs n examples per class for a longer local search.
"""

import math
import os

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autodiffgen import TracingError, tape, value_and_grad

EXAMPLES = int(os.environ.get("AUTODIFFGEN_FUZZ", "40"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])


def close(actual, expected, rtol=1e-6, atol=1e-8):
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)


# ---- numbers that change between calls ---------------------------------------------------
def _loop(x, s, k):
    total = x[0] * 0.0
    for i in range(k):  # k decides control flow: a guard
        total = total + x[i] * s
    return total


NUMBER_TERMS = {  # name -> (term(x, s, k), whether k decides a shape or control flow)
    "scale": (lambda x, s, k: np.sum(x * s), False),
    "weak": (lambda x, s, k: np.sum(np.tanh(x) ** 2) * (s * 2 + k / 2 - k // 3), False),
    "power": (lambda x, s, k: np.sum(x ** k) * 0.1, False),
    "divide": (lambda x, s, k: np.sum(x / (1.0 + s * s)) + k, False),
    "slice": (lambda x, s, k: np.sum(x[:k] ** 2), True),
    "reshape": (lambda x, s, k: np.sum(np.sin(x.reshape(k, -1)) * s), True),
    "roll": (lambda x, s, k: np.sum(np.roll(x, k) * x), True),
    "loop": (_loop, True),
    "axis": (lambda x, s, k: np.sum(np.sum(x.reshape(3, 4), axis=k % 2) ** 2), True),
    "arange": (lambda x, s, k: np.sum(x[:k] * np.arange(k)) * s, True),
    "index": (lambda x, s, k: x[k] * s + x[-k], False),  # an integer index: read at run time
    "compare": (lambda x, s, k: np.sum(x * np.greater(s, 1.0) + x * (k > 2)), False),
}


@SETTINGS
@given(st.lists(st.sampled_from(sorted(NUMBER_TERMS)), min_size=1, max_size=4, unique=True),
       st.sampled_from([np.float64, np.float32]), st.integers(0, 2**16))
def test_numbers_changing_between_calls(terms, dtype, seed):
    def program(x, s, k):
        return sum(NUMBER_TERMS[t][0](x, s, k) for t in terms)
    rng = np.random.default_rng(seed)
    x = rng.normal(size=12).astype(dtype)
    ks = [int(k) for k in rng.choice([1, 2, 3, 4, 6], size=5)]
    vg = value_and_grad(program)
    for k in ks:
        s = float(rng.uniform(0.1, 3.0))
        value, g = vg(x, s, k)
        expected = program(x, s, k)
        assert np.result_type(value) == np.result_type(expected)
        assert g.dtype == x.dtype
        tolerance = 1e-4 if dtype == np.float32 else 1e-8
        close(value, expected, rtol=tolerance, atol=tolerance)
        _, t_grad = tape.value_and_grad_now(program, (x, s, k), (0,), ["x", "s", "k"])
        close(g, t_grad[0], rtol=tolerance, atol=tolerance)
    shaped = any(NUMBER_TERMS[t][1] for t in terms)
    assert vg.cache_info().misses <= (len(set(ks)) if shaped else 1)


# ---- try/except around NumPy calls ------------------------------------------------------
DECOMPOSITIONS = {
    "cholesky": lambda A: np.sum(np.linalg.cholesky(A) ** 2),
    "solve": lambda A: np.sum(np.linalg.solve(A, np.ones(len(A)))),
    "inv": lambda A: np.sum(np.linalg.inv(A) * A.T),
}
FALLBACKS = {
    "square": lambda A: np.sum(A * A),
    "trace": lambda A: np.trace(A) * 2.0,
    "tanh": lambda A: np.sum(np.tanh(A)),
}


def _matrix(rng, n, good, kind):
    M = rng.normal(size=(n, n))
    if good:
        return M @ M.T + n * np.eye(n)
    if kind == "cholesky":
        return -(M @ M.T) - np.eye(n)  # symmetric, not positive definite
    M[0] = 0.0  # singular
    return M


@SETTINGS
@given(st.sampled_from(sorted(DECOMPOSITIONS)), st.sampled_from(sorted(FALLBACKS)),
       st.lists(st.booleans(), min_size=3, max_size=5), st.integers(2, 4),
       st.integers(0, 2**16))
def test_try_except_around_numpy_calls(kind, fallback, pattern, n, seed):
    def program(A, b):
        try:
            y = DECOMPOSITIONS[kind](A) * np.sum(b)
        except np.linalg.LinAlgError:
            y = FALLBACKS[fallback](A) + np.sum(b * b)
        return y
    rng = np.random.default_rng(seed)
    vg = value_and_grad(program)
    b = rng.normal(size=3)
    for good in pattern:
        A = _matrix(rng, n, good, kind)
        value, g = vg(A, b)
        close(value, program(A, b), rtol=1e-6, atol=1e-8)
        _, t_grad = tape.value_and_grad_now(program, (A, b), (0,), ["A", "b"])
        close(g, t_grad[0], rtol=1e-6, atol=1e-8)
    assert vg.cache_info().misses == len(set(pattern))


# ---- aliased and Fortran-ordered arguments with in-place writes -------------------------
WRITES = {
    "set": lambda a, b, views, c: a.__setitem__((0, 1), c * b[1, 2]),
    "row": lambda a, b, views, c: a.__setitem__(1, a[1] * c),
    "iadd": lambda a, b, views, c: a.__iadd__(c * b),
    "view": lambda a, b, views, c: views.append(a.reshape(-1)),
    "ravel": lambda a, b, views, c: views.append(np.ravel(a)),
    "flatten": lambda a, b, views, c: views.append(a.flatten()),
    "column": lambda a, b, views, c: views.append(a[:, 1]),
}
LAYOUTS = ["C", "C", "F", "alias", "bF", "cols", "step", "rows"]


def _arguments(rng, layout):
    a, b = rng.normal(size=(2, 3)), rng.normal(size=(2, 3))
    if layout == "F":
        a = np.asfortranarray(a)
    if layout == "bF":
        b = np.asfortranarray(b)
    if layout == "alias":
        b = a
    if layout == "cols":  # non-contiguous slices of one shape and three layouts
        a = rng.normal(size=(2, 5))[:, 1:4]
    if layout == "step":
        a = rng.normal(size=(2, 6))[:, ::2]
    if layout == "rows":
        a = rng.normal(size=(4, 3))[::2]
    return a, b


def same_layout(x):
    """A copy of x with x's strides (a copy in order "K" of a slice is contiguous)."""
    if x.flags.c_contiguous or x.flags.f_contiguous or not isinstance(x.base, np.ndarray):
        return x.copy(order="K")
    base = x.base.copy(order="K")
    offset = x.__array_interface__["data"][0] - x.base.__array_interface__["data"][0]
    return np.ndarray(x.shape, x.dtype, buffer=base, offset=offset, strides=x.strides)


def _fresh(a, b):
    """Copies with the same layout and aliasing, since the program writes into them."""
    a2 = same_layout(a)
    return a2, (a2 if b is a else same_layout(b))


@SETTINGS
@given(st.lists(st.sampled_from(sorted(WRITES)), min_size=1, max_size=4),
       st.lists(st.sampled_from(LAYOUTS), min_size=3, max_size=5), st.floats(0.5, 2.0),
       st.integers(0, 2**16))
def test_aliased_and_fortran_arguments_with_writes(writes, layouts, c, seed):
    def program(a, b, w):
        views = []
        for name in writes:
            WRITES[name](a, b, views, c)
        total = np.sum(a * w) + np.sum(b * w * w)
        for i, v in enumerate(views):
            total = total + np.sum(v * (i + 1.0)) * np.sum(w)
        return total
    rng = np.random.default_rng(seed)
    vg = value_and_grad(program, argnums=2)
    w = rng.normal(size=(2, 3))
    for layout in layouts:
        a, b = _arguments(rng, layout)
        try:
            expected = program(*_fresh(a, b), w)
        except (TracingError, ValueError):
            continue
        try:
            value, g = vg(*_fresh(a, b), w)
        except TracingError as error:  # refused with a clear error, never a wrong answer
            assert layout == "alias" and "shares memory" in str(error) \
                or "writing into a view of another array" in str(error)
            continue
        close(value, expected)
        _, t_grad = tape.value_and_grad_now(program, (*_fresh(a, b), w), (2,), ["a", "b", "w"])
        close(g, t_grad[0])
        d = rng.normal(size=w.shape)
        eps = 1e-6
        fd = (program(*_fresh(a, b), w + eps * d) - program(*_fresh(a, b), w - eps * d)) / (2 * eps)
        assert math.isclose(fd, float(np.sum(g * d)), rel_tol=1e-4, abs_tol=1e-6)


def test_the_layout_class_does_see_both_semantics():
    """A C-ordered and a Fortran-ordered `a` give different answers for one program of
    the class: the checks above compare something that can differ."""
    def program(a, w):
        v = a.reshape(-1)
        a[0, 1] = 7.0
        return np.sum(v * w)
    w = np.arange(6.0)
    vg = value_and_grad(program, argnums=1)
    c, f = np.ones((2, 3)), np.asfortranarray(np.ones((2, 3)))
    assert vg(c.copy(), w)[0] == program(c.copy(), w) != program(f.copy(order="K"), w)
    assert vg(f.copy(order="K"), w)[0] == program(f.copy(order="K"), w)
