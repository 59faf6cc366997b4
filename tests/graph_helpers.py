"""What the pass tests (test_passes.py, test_fuse.py, test_stable.py) share: a function's
value-and-grad graph as traced, before any pass, and a graph emitted as it is and called."""

import inspect

from autodiffgen import passes
from autodiffgen.arguments import normalize_argnums
from autodiffgen.cache.loader import load
from autodiffgen.emit import emit_module
from autodiffgen.pipeline import finish, gradient_graph


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
