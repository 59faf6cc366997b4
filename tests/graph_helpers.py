"""What the pass tests (test_passes.py, test_fuse.py, test_stable.py, ...) share: a
function's value-and-grad graph as traced, before any pass, a graph emitted as it is and
called, and the gradient check every pass's cases get."""

import dataclasses
import gc
import inspect
from collections import Counter

import numpy as np

import autodiffgen as ad
from autodiffgen import passes, pipeline, tape
from autodiffgen.cache.loader import load
from autodiffgen.codegen.emitter import emit_module
from autodiffgen.pipeline import finish
from autodiffgen.testing import check_grads
from autodiffgen.trace.arguments import normalize_argnums


def gradient_graph(fun, args, argnums, names):
    """grad's graph of `fun` at `args` as the trace and grad's outputs stage make it
    (pipeline.traced), before any pass, its arguments named `names`."""
    request = ad.GradFunction(fun, argnums).request(args, batch=False)
    return pipeline.traced(dataclasses.replace(request, names=list(names)), args)


def traced(fun, *args, argnums=0):
    """The graph, its values named after `fun`'s parameters as a real call names them."""
    names = list(inspect.signature(fun).parameters)[:len(args)]
    return gradient_graph(fun, args, normalize_argnums(argnums, fun), names)


def emitted(graph):
    """(source, function) of one graph emitted as it is: no further passes (only what
    every emitted graph gets: pipeline.finish)."""
    enabled, passes.ENABLED = passes.ENABLED, False
    try:
        source, injected, locs = emit_module([finish(graph)])
    finally:
        passes.ENABLED = enabled
    return source, load(source, injected, graph.name, locs)


def run(graph, *args):
    """Emit one graph as it is and call it."""
    return emitted(graph)[1](*args)


def flat(out):
    """(value, gradient or tuple of gradients) as one list."""
    value, grads = out
    return [value] + list(grads if isinstance(grads, tuple) else [grads])


def rewrites_alone(graph, step, args, rtol=1e-13):
    """(the graph optimized without the pass `step`, with it), after checking that `step`
    still rewrites the first, leaves the second as it is (a fixed point), and that both
    compute what the graph as traced computes."""
    without = passes.optimize(graph, pipeline=tuple(p for p in passes.PIPELINE if p is not step))
    assert step(without)[1]
    rewritten = passes.optimize(graph)
    assert step(rewritten)[1] is False
    for got, want in zip(flat(run(rewritten, *args)), flat(run(graph, *args))):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-14)
    return without, rewritten


def check_both_precisions(fun, args, argnums):
    """The generated gradient against the tape and central differences in float64, and
    against the tape in float32, where the value and every gradient stay float32."""
    check_grads(fun, *args, argnums=argnums)
    small = tuple(a.astype(np.float32) for a in args)
    check_grads(fun, *small, argnums=argnums, rtol=1e-4, atol=1e-5, fd=False)
    value, grads = ad.value_and_grad(fun, argnums=argnums)(*small)
    assert value.dtype == np.float32
    assert all(g.dtype == np.float32 for g in (grads if isinstance(grads, tuple) else [grads]))


def served_by_one_trace(fun, calls, rtol):
    """value_and_grad(fun) on each argument tuple of `calls` (other batch sizes, say)
    against the tape's, all from one trace; the function, for what a test reads next."""
    f, reference = ad.value_and_grad(fun), tape.value_and_grad(fun)
    for args in calls:
        (v, g), (tv, tg) = f(*args), reference(*args)
        np.testing.assert_allclose(v, tv, rtol=rtol)
        np.testing.assert_allclose(g, tg, rtol=rtol)
    assert f.cache_info().misses == 1
    return f


def assert_tree_close(got, want, rtol=1e-12):
    """Two pytrees (dicts, tuples, lists) of the same structure, leaf by leaf close, each
    container of the same type."""
    assert type(got) is type(want)
    if isinstance(want, dict):
        assert list(got) == list(want)
        for k in want:
            assert_tree_close(got[k], want[k], rtol)
    elif isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for a, b in zip(got, want):
            assert_tree_close(a, b, rtol)
    else:
        np.testing.assert_allclose(got, want, rtol=rtol)


def cyclic_garbage(fun, args):
    """The objects a first call of value_and_grad(fun) leaves for the cyclic collector,
    by type name (the collector off meanwhile, as during a compile)."""
    gc.collect()
    gc.disable()
    try:
        ad.value_and_grad(fun)(*args)
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        return Counter(type(o).__name__ for o in gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
