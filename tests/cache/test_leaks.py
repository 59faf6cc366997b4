"""Memory stays flat: a finished trace leaves no Box, Node, Trace or closure behind, a
cached call allocates nothing that outlives it, and a dropped generated function takes
its source lines (linecache) and line map (context.GENERATED_LOCS) with it.
"""

import gc
import linecache
import os
import sys
import tracemalloc
import weakref

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen import tape
from autodiffgen.graph import Graph, Node
from autodiffgen.trace.boxes import Box
from autodiffgen.trace.context import GENERATED_LOCS, current_trace
from autodiffgen.trace.recording import Trace

TRACED_TYPES = (Box, Node, Trace, Graph)


def live_traced_objects():
    """How many Boxes, Nodes, Traces and Graphs the collector can still reach."""
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) in TRACED_TYPES)


def generated_entries():
    """(generated files in linecache, entries of GENERATED_LOCS), once the collector has
    freed the modules nothing refers to (a function and its globals form a cycle)."""
    gc.collect()
    return (sum(1 for name in linecache.cache if name.startswith("<autodiffgen-")),
            len(GENERATED_LOCS))


class Spy:
    """Weak references to what a traced function sees: its Boxes' Nodes and the Trace
    recording them. All must be dead once the transformation returns."""

    def __init__(self):
        self.refs = []

    def __call__(self, *boxes):
        trace = current_trace()
        if trace is not None:
            self.refs.append(weakref.ref(trace))
        self.refs += [weakref.ref(b.node) for b in boxes if type(b) is Box]

    def alive(self):
        gc.collect()
        return [ref() for ref in self.refs if ref() is not None]


def _transformations():
    """(name, call(f, x)) for each way a function gets traced."""
    return [
        ("grad", lambda f, x: ad.grad(f)(x)),
        ("value_and_grad", lambda f, x: ad.value_and_grad(f)(x)),
        ("jvp", lambda f, x: ad.jvp(f, (x,), (np.ones_like(x),))),
        ("vjp", lambda f, x: ad.vjp(f, x)[1](np.float64(1.0))),
        ("hessian", lambda f, x: ad.hessian(f)(x)),
        ("grad of grad", lambda f, x: ad.grad(lambda y: ad.grad(f)(y).sum())(x)),
        ("tape", lambda f, x: tape.grad(f)(x)),
    ]


@pytest.mark.parametrize("name, call", _transformations(), ids=lambda v: v
                         if isinstance(v, str) else "")
def test_a_finished_trace_leaves_no_boxes_nodes_or_traces(name, call):
    spy = Spy()

    def f(x):
        h = np.tanh(x) * x
        spy(x, h)
        return (h * h).sum()
    before = live_traced_objects()
    result = call(f, np.linspace(0.1, 0.9, 3))
    assert spy.refs, "the spy saw no trace"
    assert spy.alive() == []
    assert live_traced_objects() == before
    del result


def test_a_failed_trace_leaves_nothing_behind():
    spy = Spy()

    def bad(x):
        spy(x)
        return np.fft.hfft(x).sum()  # no rule: the trace stops with an error
    before = live_traced_objects()
    with pytest.raises(ad.UnsupportedOperationError):
        ad.grad(bad)(np.ones(3))
    assert spy.alive() == []
    assert live_traced_objects() == before


def test_a_live_grad_function_holds_its_code_not_graphs():
    """What a cached GradFunction reaches (outside module namespaces, which are global
    anyway) holds no Box, Node, Trace or Graph: only the generated code and constants."""
    W = np.linspace(0, 1, 12).reshape(4, 3)  # a captured constant, injected into the code
    f = ad.value_and_grad(lambda x, y: (np.tanh(x @ W) * y).sum(), argnums=(0, 1))
    x, y = np.ones((2, 4)), np.ones((2, 3))
    f(x, y)
    d2 = ad.grad(ad.grad(lambda t: np.sin(t) * t))
    d2(0.5)
    assert not [type(o).__name__ for o in _reachable([f, d2]) if type(o) in TRACED_TYPES]


def _reachable(roots):
    """Objects reachable from `roots`, not following into modules, classes, or a
    module's globals (the test module's included)."""
    stop = {id(vars(m)) for m in list(sys.modules.values()) if hasattr(m, "__dict__")}
    seen, stack, found = set(), list(roots), []
    while stack:
        obj = stack.pop()
        if id(obj) in seen or id(obj) in stop or isinstance(obj, (type, type(sys))):
            continue
        seen.add(id(obj))
        found.append(obj)
        stack.extend(gc.get_referents(obj))
    return found


def test_ten_thousand_cached_calls_leave_memory_flat():
    f = ad.value_and_grad(lambda W, x: np.tanh(x @ W).sum(), argnums=(0, 1))
    jvp_of = lambda x: np.sin(x) * x  # one function, looked up in every call
    W, x = np.ones((3, 2)), np.ones((4, 3))

    def calls(n):
        for _ in range(n):
            f(W, x)
            ad.jvp(jvp_of, (W,), (W,))
    calls(100)  # warm-up: entries compiled, lookup tables at their size
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        calls(10_000)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        if started:
            tracemalloc.stop()
    assert grown < 4096, f"10,000 cached calls kept {grown} bytes"
    assert f.cache_info().misses == 1


def _make(k):
    def tiny(x):
        return (x * k).sum()
    return tiny


def _trace_and_drop(first, count, x, alive):
    """Trace `count` distinct functions, then drop them; `alive` records the generated
    entries and allocated blocks while they lived."""
    functions = [ad.grad(_make(float(k))) for k in range(first, first + count)]
    for f in functions:
        f(x)
    gc.collect()
    alive.update(entries=generated_entries(), blocks=sys.getallocatedblocks())


def test_a_thousand_distinct_traces_are_freed_with_their_functions():
    """Counted in allocated blocks, not with tracemalloc: it would triple the time, and
    it keeps the name of every file whose code allocated, so each module would seem to
    leave ~90 bytes behind. (The leak this guards against kept ~3 KB, 25 blocks, a
    module: its lines in linecache and its GENERATED_LOCS map.)"""
    x, alive = np.ones(2), {}
    _trace_and_drop(0, 200, x, alive)  # warm-up: template caches, method caches, dict sizes
    objects, entries = live_traced_objects(), generated_entries()
    start = sys.getallocatedblocks()
    _trace_and_drop(200, 1000, x, alive)
    gc.collect()
    kept, held = sys.getallocatedblocks() - start, alive["blocks"] - start
    assert alive["entries"] == (entries[0] + 1000, entries[1] + 1000)
    assert generated_entries() == entries
    assert live_traced_objects() == objects
    assert held > 50_000  # the measure sees the modules while they live...
    assert kept < 1000, f"1,000 dropped traces kept {kept} of {held} blocks"  # ...not after


def test_entries_dropped_by_cache_clear_are_freed():
    f = ad.grad(lambda x: np.tanh(x).sum())
    entries = generated_entries()
    for n in range(1, 51):
        f(np.ones(n))
    assert generated_entries() == (entries[0] + 50, entries[1] + 50)
    f.cache_clear()
    assert generated_entries() == entries


class _CollectingOS:
    """linecache's `os`, collecting garbage at every stat: as an allocation can at any
    moment of checkcache()'s loop over its keys."""

    def __getattr__(self, name):
        return getattr(os, name)

    @staticmethod
    def stat(path):
        gc.collect()
        return os.stat(path)


def test_a_module_collected_inside_linecache_checkcache_does_not_break_it(monkeypatch):
    """checkcache() indexes the cache with a list of its keys taken first (CPython before
    gh-126775): a generated module freed in that loop must not remove its entry then."""
    if not hasattr(linecache, "os"):  # 3.13 imports os inside checkcache: nothing to patch
        pytest.skip("this linecache reaches os.stat another way; the loop is the same")
    linecache.getline(__file__, 1)  # a real file's entry, stat-ed before the generated one
    f = ad.grad(lambda x: np.tanh(x).sum())
    f(np.ones(2))
    filename = next(iter(f._cache.entries.values())).__code__.co_filename
    gc.collect()
    gc.disable()  # the module is freed inside checkcache(), not before
    try:
        del f
        monkeypatch.setattr(linecache, "os", _CollectingOS())
        linecache.checkcache()
    finally:
        monkeypatch.undo()
        gc.enable()
    ad.grad(lambda x: np.sin(x).sum())(np.ones(2))  # a later compilation drops it
    assert filename not in linecache.cache and filename not in GENERATED_LOCS


@pytest.mark.parametrize("transform", [
    lambda f, x: ad.jvp(f, (x,), (x,)),
    lambda f, x: ad.vjp(f, x)[1](np.ones_like(x)),
    lambda f, x: ad.hessian(lambda y: f(y).sum())(x),
    lambda f, x: ad.hvp(lambda y: f(y).sum(), (x,), (x,)),
], ids=["jvp", "vjp", "hessian", "hvp"])
def test_a_transformed_closure_dies_with_its_last_reference(transform):
    """jvp(lambda ...) in a loop: the transformed function (and its generated code) is
    kept for reuse while the user's function lives, and no longer."""
    x = np.linspace(0.5, 1.5, 3)
    entries = generated_entries()
    refs = []
    for k in range(20):
        f = _make_elementwise(float(k))
        transform(f, x)
        refs.append(weakref.ref(f))
    del f
    gc.collect()
    assert [r for r in refs if r() is not None] == []
    assert generated_entries() == entries


def _make_elementwise(k):
    def f(x):
        return np.sin(x) * k
    return f
