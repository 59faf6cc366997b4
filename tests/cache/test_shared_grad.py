"""grad(f) made again for the same function finds the code made before (cache/view.py):
Autograd code writes `grad(loss)(w, x)` inside loops, which traced at every call. The
entries are shared; cache_info() counts each object's calls."""

import functools
import gc
import threading
import weakref

import numpy as np

from autodiffgen import grad, pipeline, value_and_grad


def _data(seed):
    rng = np.random.default_rng(seed)
    return rng.normal(size=3), rng.normal(size=(4, 3))


def _expected(w, x):
    t = np.tanh(x @ w)
    return x.T @ (2 * t * (1 - t ** 2))


def _fresh():
    def local_loss(w, x):  # a fresh function: no code from other tests
        return np.sum(np.tanh(x @ w) ** 2)
    return local_loss


def _count_traces(monkeypatch):
    traces = []
    real = pipeline.compile

    def counted(*args, **kwargs):
        traces.append(1)
        return real(*args, **kwargs)
    monkeypatch.setattr(pipeline, "compile", counted)
    return traces


def test_grad_made_again_in_a_loop_traces_once_and_stays_right(monkeypatch):
    traces, loss = _count_traces(monkeypatch), _fresh()
    infos = []
    for step in range(5):
        w, x = _data(step)
        g = grad(loss)  # made again at each step, as in Autograd code
        np.testing.assert_allclose(g(w, x), _expected(w, x), rtol=1e-12)
        g(w, x)
        infos.append(g.cache_info())
    assert len(traces) == 1
    assert infos == [(1, 1, 1)] * 5  # counted per object: the shared code is its miss


def test_value_and_grad_shares_grads_code_and_other_settings_do_not(monkeypatch):
    traces, loss = _count_traces(monkeypatch), _fresh()
    w, x = _data(0)
    grad(loss)(w, x)
    value, g = value_and_grad(loss)(w, x)
    assert len(traces) == 1
    np.testing.assert_allclose(value, loss(w, x))
    np.testing.assert_allclose(g, _expected(w, x), rtol=1e-12)
    g_x = grad(loss, argnums=1)(w, x)  # another argument: its own code
    t = np.tanh(x @ w)
    np.testing.assert_allclose(g_x, np.outer(2 * t * (1 - t ** 2), w), rtol=1e-12)
    assert len(traces) == 2
    grad(loss, max_entries=3)(w, x)  # other bounds: its own cache
    assert len(traces) == 3
    bounded = grad(loss)
    bounded.max_entries = 3  # moves to the cache shared under that bound
    bounded(w, x)
    assert len(traces) == 3 and bounded.max_entries == 3 and grad(loss).max_entries == 64


def test_cache_clear_empties_the_shared_code_and_this_objects_counts(monkeypatch):
    traces, loss = _count_traces(monkeypatch), _fresh()
    w, x = _data(2)
    first, second = grad(loss), grad(loss)
    first(w, x)
    second(w, x)
    second(w, x)
    assert second.cache_info() == (1, 1, 1)
    first.cache_clear()
    assert first.cache_info() == (0, 0, 0) and second.cache_info() == (1, 1, 0)
    np.testing.assert_allclose(second(w, x), _expected(w, x), rtol=1e-12)  # its last code
    assert len(traces) == 1
    third = grad(loss)
    np.testing.assert_allclose(third(w, x), _expected(w, x), rtol=1e-12)
    assert len(traces) == 2 and third.cache_info() == (0, 1, 1)


def test_a_wrapper_copying_the_functions_dict_gets_its_own_code():
    loss = _fresh()

    @functools.wraps(loss)  # copies loss.__dict__, the shared cache included
    def doubled(w, x):
        return 2 * loss(w, x)
    w, x = _data(1)
    grad(loss)(w, x)
    np.testing.assert_allclose(grad(doubled)(w, x), 2 * _expected(w, x), rtol=1e-12)


def test_bound_methods_of_two_instances_do_not_share():
    class Model:
        def __init__(self, scale):
            self.scale = scale

        def loss(self, w):
            return self.scale * np.sum(w ** 2)
    w = np.arange(3.0)
    np.testing.assert_allclose(grad(Model(1.0).loss)(w), 2 * w)
    np.testing.assert_allclose(grad(Model(3.0).loss)(w), 6 * w)


def test_guard_variants_are_shared_and_counted_as_if_each_object_traced_them(monkeypatch):
    traces = _count_traces(monkeypatch)

    def branchy(w, x):
        s = np.sum(x)
        return np.sum(w ** 2) if s > 0 else np.sum(np.sin(w))
    w = np.arange(3.0)
    pos, neg = np.ones(2), -np.ones(2)
    first = grad(branchy)
    first(w, pos)
    first(w, neg)
    assert first.cache_info().misses == 2 and len(traces) == 2
    second = grad(branchy)
    np.testing.assert_allclose(second(w, neg), np.cos(w))
    np.testing.assert_allclose(second(w, pos), 2 * w)
    assert len(traces) == 2 and second.cache_info() == (1, 2, 1)  # as first's: no trace
    np.testing.assert_allclose(second(w, neg), np.cos(w))
    assert second.cache_info() == (2, 2, 1)


def test_threads_making_grad_at_once_share_one_trace(monkeypatch):
    traces, loss = _count_traces(monkeypatch), _fresh()
    w, x = _data(3)
    errors = []

    def work():
        try:
            for _ in range(5):
                np.testing.assert_allclose(grad(loss)(w, x), _expected(w, x), rtol=1e-12)
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)
    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and len(traces) == 1


def test_the_cache_dies_with_its_function():
    def make():
        def f(w):
            return np.sum(w ** 3)
        return f
    f = make()
    grad(f)(np.ones(2))
    alive = weakref.ref(f)
    del f
    gc.collect()
    assert alive() is None


def test_a_call_served_by_code_traced_at_another_batch_size_is_a_hit(monkeypatch):
    """No trace, and code this object ran (under another batch size's key): a hit, as for
    its own key. Code another grad of f traced is this object's miss when it first runs
    it, as an exact key's is (its counts read the same whether the other ran or not)."""
    traces, loss = _count_traces(monkeypatch), _fresh()
    rng = np.random.default_rng(5)
    w = rng.normal(size=3)
    calls = {"first": ((10, (0, 1, 1)), (7, (1, 1, 2)), (7, (2, 1, 2)), (5, (3, 1, 3))),
             "second": ((6, (0, 1, 1)), (6, (1, 1, 1)), (10, (2, 1, 2)), (7, (3, 1, 3)))}
    for name, counts in calls.items():
        g = grad(loss)
        for rows, info in counts:
            x = rng.normal(size=(rows, 3))
            np.testing.assert_allclose(g(w, x), _expected(w, x), rtol=1e-12)
            assert g.cache_info() == info, (name, rows)
    assert len(traces) == 1


SCALE = 2.0  # read by `scaled`: its code has a guard, so each signature gets Variants


def test_a_batch_size_served_by_guarded_code_is_a_hit(monkeypatch):
    traces = _count_traces(monkeypatch)

    def scaled(w, x):
        return SCALE * np.sum(np.tanh(x @ w) ** 2)
    rng = np.random.default_rng(6)
    w = rng.normal(size=3)
    first, second = grad(scaled), grad(scaled)
    for g, counts in ((first, [(0, 1), (1, 1), (2, 1)]), (second, [(0, 1), (1, 1), (2, 1)])):
        for rows, (hits, misses) in zip((10, 7, 7), counts):
            x = rng.normal(size=(rows, 3))
            np.testing.assert_allclose(g(w, x), SCALE * _expected(w, x), rtol=1e-12)
            assert g.cache_info()[:2] == (hits, misses), rows
    assert len(traces) == 1
