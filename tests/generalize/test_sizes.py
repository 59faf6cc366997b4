"""Data-dependent sizes (issue 10): a mask's count, np.nonzero's length and len(x[m]) are
read at run time, or guarded where the code decides on them in Python; never baked in.

Each case runs one differentiated function over calls whose masks select different
numbers of elements (0 and all included) and compares the generated code with eager
NumPy, the tape and central finite differences, in float64 and float32.
"""

import importlib
import re
import warnings

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen import GuardError, tape
from autodiffgen.testing import check_grads

COUNTS = (4, 1, 0, 8, 2, 6, 3, 7)


def masks(n=8, counts=COUNTS, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for k in counts:
        m = np.zeros(n, bool)
        m[rng.permutation(n)[:k]] = True
        out.append(m)
    return out


def quiet():
    """Eager NumPy warns on an empty mean; the generated code may too."""
    stack = warnings.catch_warnings()
    stack.__enter__()
    warnings.simplefilter("ignore")
    return stack


def fd_check(f, args, argnums, grads, rng, eps=1e-6):
    """Central differences of eager f (in float64) along random directions."""
    args64 = [a.astype(np.float64) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a
              for a in args]
    for i, g in zip(argnums, grads):
        for _ in range(2):
            d = rng.standard_normal(np.shape(args64[i]))
            plus, minus = list(args64), list(args64)
            plus[i], minus[i] = args64[i] + eps * d, args64[i] - eps * d
            fd = (f(*plus) - f(*minus)) / (2 * eps)
            np.testing.assert_allclose(np.sum(g * d), fd, rtol=2e-3 if g.dtype == np.float32
                                       else 1e-5, atol=1e-4 if g.dtype == np.float32 else 1e-7)


def run(f, calls, argnums=(0,), traces=1, fd=True):
    """The generated code, the tape and eager NumPy agree on every call; `traces` traces."""
    g = ad.value_and_grad(f, argnums=argnums)
    t = tape.value_and_grad(f, argnums=argnums)
    rng = np.random.default_rng(1)
    stack = quiet()
    try:
        with np.errstate(all="ignore"):
            for args in calls:
                value, grads = g(*args)
                t_value, t_grads = t(*args)
                eager = f(*args)
                np.testing.assert_allclose(value, eager, rtol=1e-5, equal_nan=True)
                np.testing.assert_allclose(value, t_value, rtol=1e-5, equal_nan=True)
                for i, a, b in zip(argnums, grads, t_grads):
                    assert a.dtype == args[i].dtype, (a.dtype, args[i].dtype)
                    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6, equal_nan=True)
                if fd and np.isfinite(value):
                    fd_check(f, args, argnums, grads, rng)
    finally:
        stack.__exit__(None, None, None)
    if traces is not None:
        assert g.cache_info().misses == traces, g.cache_info()
    return g


def data(dtype=np.float64, seed=0, rows=8, cols=3):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(cols).astype(dtype),
            rng.standard_normal((rows, cols)).astype(dtype))


def masked_loss(w, x, m):
    err = x @ w - 1
    return (err[m] ** 2).mean()


# ---- boolean masks passed in ----------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_masked_mean_serves_every_count(dtype):
    w, x = data(dtype)
    g = run(masked_loss, [(w, x, m) for m in masks()])
    source = g.source(w, x, masks()[0])
    assert "count = int(np.count_nonzero(m))" in source, source
    assert "count," in source and "/ count" in source or "np.divide(1.0, count)" in source, \
        source


def test_the_masked_mean_gradient_is_not_four_times_too_large():
    """The issue's case: traced with 4 selected, called with 1."""
    w, x = data()
    g = ad.grad(masked_loss)
    m4, m1 = np.zeros(8, bool), np.zeros(8, bool)
    m4[:4] = m1[:1] = True
    g(w, x, m4)
    expected = tape.grad(masked_loss)(w, x, m1)
    np.testing.assert_allclose(g(w, x, m1), expected)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_elementwise_broadcasting_and_reductions_of_selected_rows(dtype):
    def f(w, x, m):
        rows = x[m]                            # (k, 3)
        z = np.tanh(rows * w + 0.5)            # broadcast against a static (3,)
        return z.sum() + (rows ** 2).mean() + z.var() + np.std(rows, axis=0).sum() \
            + rows.mean(axis=0) @ w + np.sum(rows @ w)

    w, x = data(dtype)
    calls = [(w, x, m) for m in masks(counts=(4, 2, 8, 3, 5))]
    run(f, calls, traces=1)


def test_max_min_of_selected_rows_and_empty_selection_raises_as_numpy():
    def f(w, x, m):
        return np.max(x[m] @ w) - np.min(x[m] * w)

    w, x = data()
    g = run(f, [(w, x, m) for m in masks(counts=(4, 2, 8, 1, 3))])
    with pytest.raises(ValueError, match="zero-size"):
        g(w, x, np.zeros(8, bool))
    with pytest.raises(ValueError, match="zero-size"):
        f(w, x, np.zeros(8, bool))


def test_matmul_of_selected_rows_both_sides():
    def f(w, x, m):
        xs = x[m]
        return np.sum((xs.T @ xs) * np.outer(w, w)) / 10

    w, x = data()
    run(f, [(w, x, m) for m in masks()])


def test_empty_selection_value_and_gradient_as_numpy():
    w, x = data()
    g = ad.value_and_grad(masked_loss)
    m = np.zeros(8, bool)
    m[:3] = True
    g(w, x, m)
    stack = quiet()
    try:
        with np.errstate(all="ignore"):
            value, grad = g(w, x, np.zeros(8, bool))
            t_value, t_grad = tape.value_and_grad(masked_loss)(w, x, np.zeros(8, bool))
            eager = masked_loss(w, x, np.zeros(8, bool))
    finally:
        stack.__exit__(None, None, None)
    assert np.isnan(value) and np.isnan(eager) and np.isnan(t_value)
    np.testing.assert_array_equal(grad, t_grad)
    assert g.cache_info().misses == 1


# ---- masks computed from data -----------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_mask_from_data(dtype):
    def f(w, x):
        err = x @ w
        pos = err[err > 0]
        return (pos ** 2).mean() + np.sum(x[err > 0] @ w) + np.sum(w[w > 0.1] ** 3)

    w, x = data(dtype)
    calls = [(w + s, x) for s in (0.0, 1.6, -0.6, 0.3, -1.9, 0.5, 1.1)]
    counts = {int(np.count_nonzero(x @ a > 0)) for a, _ in calls}
    assert len(counts) >= 3, counts
    run(f, calls, traces=1)


def test_nd_mask_over_leading_axes():
    def f(w, x, m):                            # x (4, 5, 3), m (4, 5): rows (k, 3)
        return np.sum(np.sin(x[m] @ w)) + (x[m] ** 2).mean()

    rng = np.random.default_rng(3)
    w, x = rng.standard_normal(3), rng.standard_normal((4, 5, 3))
    calls = []
    for k in (7, 0, 20, 3, 12):
        m = np.zeros(20, bool)
        m[rng.permutation(20)[:k]] = True
        calls.append((w, x, m.reshape(4, 5)))
    run(f, calls, traces=1)


def test_mask_on_a_later_axis():
    def f(x, m):
        return np.sum(x[:, m] ** 2) / 3

    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 6))
    run(f, [(x, m) for m in masks(6, (3, 0, 6, 1, 4))], traces=1)


# ---- indices from np.nonzero and friends ------------------------------------------------------
@pytest.mark.parametrize("how", ["nonzero", "flatnonzero", "where", "argwhere", "method"])
def test_indices_whose_length_is_data(how):
    def f(w, x, m):
        e = x @ w
        if how == "nonzero":
            idx = np.nonzero(m)
        elif how == "flatnonzero":
            idx = np.flatnonzero(m)
        elif how == "where":
            idx = np.where(m)
        elif how == "argwhere":
            idx = np.argwhere(m)[:, 0]
        else:
            idx = m.nonzero()
        return np.sum(e[idx] ** 2) + np.sum(x[idx] * w)

    w, x = data()
    run(f, [(w, x, m) for m in masks()], traces=1)


def test_argwhere_of_a_2d_mask():
    def f(x, m):
        ij = np.argwhere(m)
        return np.sum(x[ij[:, 0], ij[:, 1]] ** 3)

    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 4))
    calls = [(x, rng.random((3, 4)) < p) for p in (0.5, 0.0, 1.0, 0.2, 0.8)]
    run(f, calls, traces=1)


# ---- counts used as numbers -------------------------------------------------------------------
def test_counts_as_numbers_in_array_arithmetic():
    def f(w, x, m):
        sel = x[m] @ w
        return np.sum(sel) / np.count_nonzero(m) + np.sum(sel ** 2) / len(x[m]) \
            + x[m].shape[0] * w.sum() + x[m].size * np.sum(w ** 2)

    w, x = data()
    run(f, [(w, x, m) for m in masks(counts=(4, 2, 8, 3, 6, 5))], traces=1)
    g_all = ad.value_and_grad(f)
    for m in masks(counts=(0, 1)):  # counts below 2 trace code of their own
        stack = quiet()
        try:
            with np.errstate(all="ignore"):
                v = g_all(w, x, m)[0]
                np.testing.assert_allclose(v, f(w, x, m), equal_nan=True)
        finally:
            stack.__exit__(None, None, None)


# ---- guarded: Python decides on the count -----------------------------------------------------
def test_python_branch_on_the_count_is_guarded():
    def f(x, m):
        s = x[m]
        if len(s) > 3:
            return np.sum(s ** 2) / len(s)
        return np.sum(s)

    x = data()[1][:, 0]
    g = run(f, [(x, m) for m in masks(counts=(5, 6, 2, 3, 7, 5, 8))], traces=None)
    assert g.cache_info().misses >= 2


def test_range_over_the_count_and_reshape_to_it_are_guarded():
    def f(x, m):
        s = x[m]
        total = 0.0
        for i in range(len(s)):
            total = total + s[i] * (i + 1)
        return total + np.sum(np.reshape(s, (s.shape[0], 1)) * np.ones(2))

    roll_module = importlib.import_module("autodiffgen.loops.roll")
    x = data()[1][:, 0]
    kept = roll_module.USER_LOOPS  # the loop kept as a loop reads the count (loops/scan.py)
    g = run(f, [(x, m) for m in masks(counts=(3, 5, 3, 2, 6))], traces=1 if kept else 4)
    source = g.source(x, masks(counts=(3,))[0])
    if kept:
        assert re.search(r"for t in range\(count\):", source), source
    else:
        assert re.search(r"int\(np.count_nonzero\(m\)\) != \(?3\)?:", source), source


def test_range_over_the_count_written_out_is_guarded(monkeypatch):
    """The same loop written out step by step: one statement per element, so the count is
    guarded (and each count traced)."""
    roll_module = importlib.import_module("autodiffgen.loops.roll")
    monkeypatch.setattr(roll_module, "USER_LOOPS", False)
    test_range_over_the_count_and_reshape_to_it_are_guarded()


SCALES = [1.0 + 0.5 * i for i in range(20)]


def test_a_global_read_at_the_count_is_guarded_not_written_as_a_formula():
    """`SCALES[len(x[m])]` over the rows a 2-D mask selects: the generated code reads its
    globals before it computes the count, so the place it reads is one per trace (it read
    `module_globals['SCALES'][Dim(1*count+0)]`: a NameError at every count)."""
    def f(x):
        m = x[:, 0] > 0
        rows = x[m]
        return np.sum(rows ** 2) * SCALES[len(rows)]

    rng = np.random.default_rng(3)
    calls = []
    for m in masks(counts=(3, 5, 3, 2, 6, 0)):
        x = rng.standard_normal((8, 3))
        x[:, 0] = np.where(m, 1, -1) * (np.abs(x[:, 0]) + 0.1)
        calls.append((x,))
    g = run(f, calls, traces=None)
    assert "Dim(" not in g.source(*calls[0])


def test_a_formula_in_a_list_parameter_is_written_as_code():
    from autodiffgen.codegen.expressions import literal_ast, render
    from autodiffgen.graph.size_formulas import Dim
    assert render(literal_ast([Dim(2, -1, var="count"), 3, float("inf")])) == \
        "[2 * count - 1, 3, np.inf]"

def test_guard_error_names_the_line_and_what_to_do():
    def f(x, m):
        s = x[m]  # the_count_line
        return np.sum(s[:len(s) // 2])

    x = np.linspace(-1, 1, 12)
    g = ad.grad(f, max_variants=2)
    for k in (3, 5):
        m = np.zeros(12, bool)
        m[:k] = True
        np.testing.assert_allclose(g(x, m), tape.grad(f)(x, m))
    m = np.zeros(12, bool)
    m[:9] = True
    with pytest.raises(GuardError) as info:
        g(x, m)
    message = str(info.value)
    assert "test_sizes.py" in message and "s = x[m]" in message, message
    assert "np.where(mask, x, 0)" in message, message


def test_two_masks_that_meet_are_guarded():
    def f(x, y, a, b):
        return np.sum(x[a] * y[b])

    rng = np.random.default_rng(6)
    x, y = rng.standard_normal(8), rng.standard_normal(8)
    a, b = masks(counts=(3, 3, 5, 5), seed=2)[:4], masks(counts=(3, 3, 5, 5), seed=3)
    g = ad.grad(f)
    for m1, m2 in zip(a, b):
        np.testing.assert_allclose(g(x, y, m1, m2), tape.grad(f)(x, y, m1, m2))
    with pytest.raises(ValueError):
        g(x, y, a[0], b[2])


# ---- transformations and batches ----------------------------------------------------------------
def test_jvp_vjp_hessian_over_counts():
    w, x = data()

    def eager_grad(m):
        return 2 * ((x @ w - 1) * m) @ x / m.sum()

    for m in masks(counts=(4, 2, 8, 3)):
        v = np.random.default_rng(7).standard_normal(3)
        _, t = ad.jvp(masked_loss, (w, x, m), (v, None, None))
        np.testing.assert_allclose(t, eager_grad(m) @ v)
        _, back = ad.vjp(masked_loss, w, x, m)
        np.testing.assert_allclose(back(np.float64(1.0))[0], eager_grad(m))
        h = ad.hessian(masked_loss)(w, x, m)
        np.testing.assert_allclose(h, 2 * x[m].T @ x[m] / m.sum())
        gg = ad.grad(lambda w, m: ad.grad(masked_loss)(w, x, m).sum())(w, m)
        np.testing.assert_allclose(gg, (2 * x[m].T @ x[m] / m.sum()).sum(axis=1))


def test_batches_with_a_mask_stay_specialized_per_shape():
    """Data-dependent sizes and the polymorphic batch: one trace per batch size, every
    count served by it."""
    rng = np.random.default_rng(8)
    w = rng.standard_normal(3)
    calls = []
    for rows in (12, 9, 12):
        x = rng.standard_normal((rows, 3))
        for k in (3, rows // 2, rows):
            m = np.zeros(rows, bool)
            m[rng.permutation(rows)[:k]] = True
            calls.append((w, x, m))
    run(masked_loss, calls, traces=2)


def test_a_closure_mask_changed_in_place_is_read_again_with_its_count():
    """A mask read from a closure is an input (capture.py): changed in place, it selects
    other rows, and its count is read at run time like an argument's."""
    keep = np.array([True, False, True, True, False, False, True, False])

    def f(w, x):
        return np.sum((x[keep] @ w) ** 2) / np.count_nonzero(keep)

    w, x = data()
    g = ad.value_and_grad(f)
    for new in masks(counts=(4, 2, 6, 4)):
        keep[...] = new
        value, grad = g(w, x)
        np.testing.assert_allclose(value, f(w, x), rtol=1e-12)
        np.testing.assert_allclose(grad, tape.grad(f)(w, x), rtol=1e-12)
    assert g.cache_info().misses == 1


def test_a_slice_of_the_selection_is_not_baked_at_its_traced_length():
    """x[m][:3] has 3 rows at 5 selected and 2 at 2 selected: no constant of length 3."""
    def f(x, m):
        return np.mean(x[m][:3] ** 2) + np.sum(x[m][1:] * 2)

    x = data()[1][:, 0]
    run(f, [(x, m) for m in masks(counts=(5, 6, 4, 2, 3, 8, 1))], traces=None)


def test_assignment_through_a_mask():
    def f(x, m):
        y = x * 1.0
        y[m] = np.sin(x[m]) * 2
        return np.sum(y ** 2) + np.mean(x[m] ** 2)

    x = data()[1][:, 0]
    run(f, [(x, m) for m in masks(counts=(4, 2, 8, 3, 6))], traces=1)


def test_code_traced_at_an_empty_selection_runs():
    """Counts below 2 trace their own code when the function reads a size; at 0 its
    constants are (0, 3) arrays, which must be written as such (not np.array([]))."""
    def f(w, x, m):
        rows = x[m]
        return np.sum(np.log(1.0 + (rows * w) ** 2)) / len(rows)

    w, x = data()
    run(f, [(w, x, m) for m in masks(counts=(4, 0, 1, 0, 5))], traces=3)


def test_second_derivatives_read_the_count_of_the_generated_code():
    """grad(grad) and hvp trace the generated gradient, whose `int(np.count_nonzero(m))`
    is a count again: one outer trace for counts 2..12 (0 and 1 trace their own)."""
    rng = np.random.default_rng(9)
    w, x = rng.standard_normal(3), rng.standard_normal((12, 3))
    gg = ad.grad(lambda w, x, m: ad.grad(masked_loss)(w, x, m).sum())
    for k in range(2, 13):
        m = np.zeros(12, bool)
        m[rng.permutation(12)[:k]] = True
        h = 2 * x[m].T @ x[m] / k
        np.testing.assert_allclose(gg(w, x, m), h.sum(axis=1))
        v = rng.standard_normal(3)
        np.testing.assert_allclose(ad.hvp(masked_loss, (w, x, m), (v, None, None)), h @ v)
    assert gg.cache_info().misses == 1, gg.cache_info()


# ---- a mask's count in Python float formulas (review A item 8) -------------------------
def _plus_one(w, m):
    p = w[m]
    return p.sum() / (len(p) + 1.0)


def _squared(w, m):
    p = w[m]
    return p.sum() / len(p) ** 2


def _root(w, m):
    p = w[m]
    return np.sum(p ** 2) / np.sqrt(len(p)) + np.sum(p) * len(p) ** -0.5


def _where_count(x):
    return np.sum(x ** 2) * (len(np.where(x > 0.5)[0]) + 1.0)


COUNT_FORMULAS = {
    _plus_one: lambda w, m, k: m / (k + 1.0),
    _squared: lambda w, m, k: m / k ** 2,
    _root: lambda w, m, k: m * (2 * w + 1) / np.sqrt(k),
}


@pytest.mark.parametrize("fun", list(COUNT_FORMULAS), ids=lambda f: f.__name__)
def test_count_in_float_formulas_is_read_at_run_time(fun):
    f = ad.value_and_grad(fun)
    rng = np.random.default_rng(3)
    for k in (5, 2, 9, 14, 3, 20, 7, 11, 17, 4, 25):  # more counts than guard variants
        w = rng.standard_normal(30)
        m = np.zeros(30, bool)
        m[rng.permutation(30)[:k]] = True
        value, g = f(w, m)
        assert np.isclose(value, fun(w, m))
        np.testing.assert_allclose(g, COUNT_FORMULAS[fun](w, m, k), rtol=1e-12)
        np.testing.assert_allclose(g, tape.grad(fun)(w, m), rtol=1e-12)
        if k in (5, 14):
            check_grads(fun, w, m, fwd=False)
    assert f.cache_info().misses <= 2  # counts below 2 trace their own (a size read in Python)
    w32, m = rng.standard_normal(30).astype(np.float32), np.arange(30) % 3 == 0
    assert f(w32, m)[1].dtype == np.float32


def test_count_from_np_where_in_a_float_formula():
    f = ad.grad(_where_count)
    rng = np.random.default_rng(4)
    for _ in range(12):
        x = rng.uniform(0, 1, 20)
        k = np.count_nonzero(x > 0.5)
        np.testing.assert_allclose(f(x), 2 * x * (k + 1.0), rtol=1e-12)
        np.testing.assert_allclose(f(x), tape.grad(_where_count)(x), rtol=1e-12)
    assert f.cache_info().misses <= 2


def _reshaped_by_count(w, m):
    p = w[m]
    return np.sum(p.reshape(len(p), 1) * np.ones((1, len(p) % 3 + 1)))


def test_count_guard_message_says_what_to_do():
    f = ad.grad(_reshaped_by_count)
    w = np.linspace(0.0, 1.0, 40)
    with pytest.raises(ad.GuardError) as info:
        for k in range(2, 40):
            m = np.arange(40) < k
            f(w, m)
    text = str(info.value)
    assert "np.count_nonzero(mask) rather than len(x[mask])" in text
