"""Functions of data no derivative flows through (issue 25): np.unique (its values,
return_index, return_inverse, return_counts), np.bincount, np.argsort, np.sort,
np.searchsorted and np.median of integer labels or float data that is not differentiated
run in the generated code at every call, and the length of np.unique's and np.bincount's
results is read at run time (`count = len(unique)`) as a mask's count is: new labels with
another number of classes get eager NumPy's answer from the cached code, neither a stale
count nor a trace per call.

Each case runs one differentiated function over calls whose data changes the result's
length or values and compares the generated code with eager NumPy, the tape and central
finite differences, with the passes on and off, and counts the traces.
"""

import re

import numpy as np
import pytest
from test_sizes import run

import autodiffgen as ad
from autodiffgen import passes

N = 8


@pytest.fixture(autouse=True, params=[True, False], ids=["passes", "no-passes"])
def passes_on(request, monkeypatch):
    monkeypatch.setattr(passes, "ENABLED", request.param)
    return request.param


def labels_with(classes, n=N, seed=0):
    """n int labels holding exactly `classes` distinct values, spread over 0..2*classes."""
    rng = np.random.default_rng(seed + classes)
    values = np.sort(rng.choice(2 * classes + 1, classes, replace=False))
    return rng.permutation(np.concatenate([values, rng.choice(values, n - classes)]))


def xs(seed=0, n=N, dtype=np.float64):
    return np.random.default_rng(100 + seed).standard_normal(n).astype(dtype)


CLASSES = (3, 5, 2, 8, 4, 6, 7, 3)


# ---- np.unique --------------------------------------------------------------------------
def per_class(x, labels):
    return np.sum(x ** 2) / len(np.unique(labels))


def test_the_number_of_unique_labels_as_a_divisor_is_read_at_run_time():
    g = run(per_class, [(xs(i), labels_with(k)) for i, k in enumerate(CLASSES)])
    source = g.source(xs(), labels_with(3))
    assert "np.unique(labels)" in source and "count = len(unique)" in source, source


def test_one_class_traces_its_own_code_and_gets_numpys_answer():
    """len() read in Python: the code serves 2 classes or more, 1 traces again."""
    run(per_class, [(xs(0), labels_with(3)), (xs(1), labels_with(1)),
                    (xs(2), labels_with(5)), (xs(3), labels_with(1))], traces=2)


def class_balanced(x, labels):
    """Each sample weighted by one over its class's size, a term per class."""
    values, inverse, counts = np.unique(labels, return_inverse=True, return_counts=True)
    return np.sum(x ** 2 / counts[inverse]) + np.sum(values * 0.5) * np.sum(x)


def test_unique_counts_and_inverse_serve_every_number_of_classes():
    g = run(class_balanced, [(xs(i), labels_with(k)) for i, k in enumerate(CLASSES)])
    source = g.source(xs(), labels_with(3))
    assert "return_counts=True" in source and "return_inverse=True" in source, source


def first_of_each(x, labels):
    values, index = np.unique(labels, return_index=True)
    return np.sum(np.sin(x[index]) * values)


def test_unique_index_picks_the_first_of_each_class():
    run(first_of_each, [(xs(i), labels_with(k)) for i, k in enumerate(CLASSES)])


@pytest.mark.skipif(np.lib.NumpyVersion(np.__version__) < "2.3.0",
                    reason="np.unique(..., sorted=False) is NumPy 2.3's")
def test_unique_unsorted_keeps_numpys_order():
    """With sorted=False NumPy orders np.unique(a)'s values otherwise than those of
    np.unique(a, return_counts=True): each result comes from the call the user wrote."""
    def f(x, labels):
        values = np.unique(labels, sorted=False)
        first, counts = np.unique(labels, return_counts=True, sorted=False)
        order = np.cumsum(np.ones_like(values))  # 1, 2, 3...: a value per position
        return np.sum(x[values % N] * order) + np.sum(x[first % N] * counts * order)

    run(f, [(xs(i), labels_with(k) + 3) for i, k in enumerate(CLASSES)])


def test_unique_of_float_data_with_nans_and_ties():
    def f(x, data):
        return np.sum(x) * np.sum(np.unique(data) ** 2 > 0.5) + np.sum(x ** 2)

    calls = [(xs(0), np.array([1.0, np.nan, 1.0, 2.0, np.nan, 0.5, 0.5, 3.0])),
             (xs(1), np.array([1.0, 1.0, 1.0, 2.0, 2.0, 0.5, 0.5, 0.5])),
             (xs(2), np.linspace(0, 2, N))]
    run(f, calls)


def test_unique_count_in_vjp_and_hessian():
    calls = [(xs(i), labels_with(k)) for i, k in enumerate(CLASSES[:4])]
    for x, labels in calls:
        out, pullback = ad.vjp(lambda x, labels=labels: per_class(x, labels) * np.sum(x), x)
        np.testing.assert_allclose(out, per_class(x, labels) * np.sum(x))
        np.testing.assert_allclose(pullback(1.0)[0] if isinstance(pullback(1.0), tuple)
                                   else pullback(1.0),
                                   2 * x * np.sum(x) / len(np.unique(labels))
                                   + per_class(x, labels))
        np.testing.assert_allclose(ad.hessian(per_class)(x, labels),
                                   2 * np.eye(N) / len(np.unique(labels)))


def test_a_python_loop_over_the_classes_is_guarded_and_right():
    """range(len(u)) decides the program: one trace per number of classes, each right."""
    def f(x, labels):
        u = np.unique(labels)
        total = 0.0
        for i in range(len(u)):
            total = total + x[i] * u[i]
        return total

    g = run(f, [(xs(0), labels_with(3)), (xs(1), labels_with(4)), (xs(2), labels_with(3))],
            traces=2)
    assert re.search(r"if len\(u\) != \(?3\)?:", g.source(xs(), labels_with(3)))


# ---- np.bincount --------------------------------------------------------------------------
def test_bincount_with_minlength_as_weights():
    def f(x, labels):
        return np.sum(x[:5] ** 2 * np.bincount(labels, minlength=5))

    g = run(f, [(xs(i), labels_with(k) % 5) for i, k in enumerate(CLASSES)])
    assert "np.bincount(labels, minlength=5)" in g.source(xs(), labels_with(3) % 5)


def test_bincount_of_labels_indexed_by_them():
    """max(labels) + 1 bins, as many as the labels say: counts[labels] at every call."""
    def f(x, labels):
        counts = np.bincount(labels)
        return np.sum(x / counts[labels]) + np.sum(x) * np.sum(counts > 1)

    g = run(f, [(xs(i), labels_with(k)) for i, k in enumerate(CLASSES)])
    assert "np.bincount(labels)" in g.source(xs(), labels_with(3))


def test_bincount_of_differentiated_weights_reads_its_length_at_run_time():
    """The mean's 1/len and its cotangent's shape are formulas in the number of bins."""
    def f(x, labels):
        return np.mean(np.sin(np.bincount(labels, weights=x)))

    g = run(f, [(xs(i), labels_with(k)) for i, k in enumerate(CLASSES)])
    assert "count = len(bincount)" in g.source(xs(), labels_with(3))
    run(f, [(xs(i, dtype=np.float32), labels_with(k)) for i, k in enumerate(CLASSES[:3])])


# ---- argsort, sort, searchsorted, median of data ----------------------------------------
def test_argsort_of_data_indexes_a_differentiated_array():
    """The gradient flows through x[order], not through np.argsort(data)."""
    def f(x, data):
        return np.sum(x[np.argsort(data)] * np.arange(N))

    rng = np.random.default_rng(3)
    g = run(f, [(xs(i), rng.standard_normal(N)) for i in range(5)])
    assert "np.argsort(data)" in g.source(xs(), rng.standard_normal(N))


def test_sort_searchsorted_and_median_of_data_run_at_call_time():
    def f(x, data):
        edges = np.sort(data[:4])
        bins = np.searchsorted(edges, data)
        return np.sum(x * np.sort(data)) + np.median(data) * np.sum(x * bins)

    rng = np.random.default_rng(4)
    g = run(f, [(xs(i), rng.standard_normal(N)) for i in range(5)])
    assert "np.searchsorted(" in g.source(xs(), rng.standard_normal(N))


def test_median_of_int_labels_and_of_data_with_nan():
    def f(x, labels, data):
        return np.sum(x ** 2) * np.median(labels) + np.sum(x) * np.median(data)

    rng = np.random.default_rng(5)
    nan = rng.standard_normal(N)
    nan[2] = np.nan
    run(f, [(xs(0), labels_with(3), rng.standard_normal(N)),
            (xs(1), labels_with(6), nan),
            (xs(2), labels_with(2), rng.standard_normal(N))], fd=False)
