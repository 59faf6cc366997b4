"""Shape-polymorphic batches: one generated function for every batch size the code allows.

NumPy code computes sizes in Python (`np.arange(len(y))`, `x.reshape(len(x), -1)`, the
1/n of `.mean()`), where no tracer can follow them. So sizes are found by experiment: the
call is traced again with its batch arguments cut to n-1 rows and to a low size, and every
number that differs between the traces must fit one formula in n (size_formulas.py). The
result is sound by construction where it can be, and checked where it cannot:

1. the graphs as traced (before any pass) agree node for node at the three sizes, and
   every differing number fits a formula at all three. Python that decides on a size
   (`if len(x) > 64:`, `x[:100]`, `min(len(x), 100)`, a 1/n**2) changes the graph or a
   number no formula fits between the low size and n, and is refused;
2. the optimized graphs at n and n-1 unify into the program that is emitted (the passes
   decide on sizes too: `fold` keeps small constants, so both come from the same side);
3. that program, run at the low size, gives what the graph traced there gives;
4. the emitted code checks low <= n <= the traced n (a size test outside the sizes tried
   would be invisible) and that every batch argument has n rows; otherwise it raises
   GuardFailure and the caller traces these arguments as it always did.

Whatever fails, the caller keeps the specialized graph, which is always right.

What no finite set of sizes can see: a size test whose outcome is the same at n, n-1 and
the low size but not at some size between (`if len(x) == 37:`, `if 10 < len(x) < 20:`).
Closing that needs the tracer to hand out sizes that record their comparisons as guards.
"""

import dataclasses

import numpy as np

from ..graph import Node, op
from ..graph.size_formulas import Batch, evaluate
from ..rules.random import GENERATORS, private_streams
from ..trace.arguments import signature_text
from ..trace.count_sources import counted
from ..tree import child, is_container, items, leaves, rebuild
from . import counts
from .unify import unify
from .whiles import traced_whiles

# the low sizes tried, in turn (1 row broadcasts: it stays specialized; at 2 rows, n-1 is 1)
LOWS = (2, 8)


# ---- the batch axis ---------------------------------------------------------------------
def batch_of(args, diff_flags):
    """The batch axis of a call, or None: n is the leading size of the first array argument
    not differentiated (data, as in loss(params, x, y)), and the batch leaves are every
    array with that leading size. A call whose arrays are all differentiated has no batch:
    trying sizes costs extra traces that such functions seldom repay. Values of an
    enclosing trace are never batched."""
    arrays, anchor = [], None
    for i, arg in enumerate(args):
        for path, leaf in _leaves_with_paths(arg, (i,)):
            if type(leaf) is not np.ndarray:
                if not isinstance(leaf, (np.generic, int, float, complex, str, bytes,
                                         type(None), *GENERATORS)):
                    return None  # a Box, or an object the signature keys by value
                continue
            if leaf.ndim >= 1:
                arrays.append((path, leaf))
                if anchor is None and not diff_flags[i]:
                    anchor = (path, leaf)
    if anchor is None:
        return None
    n = anchor[1].shape[0]
    paths = [anchor[0]] + [p for p, a in arrays if a.shape[0] == n and p != anchor[0]]
    return Batch(n, paths)


def _leaves_with_paths(tree, path):
    if is_container(tree):
        for key, child in items(tree):
            yield from _leaves_with_paths(child, path + (key,))
    else:
        yield path, tree


def map_paths(tree, paths, fn, path=()):
    """`tree` with fn(leaf) at each of `paths` (full paths: argument index first)."""
    if path in paths:
        return fn(tree)
    if not is_container(tree):
        return tree
    return rebuild(tree, [map_paths(child, paths, fn, path + (key,))
                          for key, child in items(tree)])


def cut(args, batch, m):
    """The arguments with every batch leaf cut to its first m rows."""
    return tuple(map_paths(list(args), set(batch.paths), lambda a: a[:m]))


def grown(args, batch, m):
    """The arguments with every batch leaf's rows repeated up to m rows, or its first m
    (a standalone module checks its code above the traced size on them: standalone.py)."""
    return tuple(map_paths(list(args), set(batch.paths),
                            lambda a: np.resize(a, (m, *a.shape[1:]))))


# ---- generalizing a traced graph over the batch size ------------------------------------
def generalize(raw, args, diff_flags, names, optimize, retrace, rolled=None):
    """The graph to emit for `args`, made from `raw` (as traced, not yet optimized) by
    `optimize(graph)`, tracing the function again at other sizes by `retrace(args)` (the
    pipeline's: this stage never calls the tracer). The graph returned is optimized, and
    polymorphic when its `batch` is not None: it then serves every call whose poly_key is
    this call's and whose batch size is in batch.lo..batch.hi. A graph with data-dependent
    sizes (a mask's count) stays specialized per shape, its counts read at run time where
    they fit (counts.py)."""
    if counted(raw):  # data-dependent sizes: specialized per shape
        return counts.general(args, optimize, raw, retrace)
    graph = optimize(raw)
    batch = batch_of(args, diff_flags)
    if batch is None or batch.n <= LOWS[0] or graph.paths or traced_whiles(graph):
        return graph  # (a `while` loop serves every number of steps instead: whiles.py)
    general = _generalize(args, raw, graph, batch, optimize, _runs(retrace), rolled)
    if general is None:
        return graph
    return _described(general, graph, args, names)


def _generalize(args, raw, graph, batch, optimize, retrace, rolled):
    """The polymorphic graph, or None: the program from n and n-1 rows, checked at a low
    size (LOWS[0], else LOWS[1] when a derived size such as n-1 is 1 at the first). The
    traces compared at three sizes are as traced, or, with a loop kept as a loop, as
    rolled (`rolled`: loops.roll alone, before the passes, whose choices may depend on
    the sizes)."""
    n, var = batch.n, _fresh_var(graph.params)
    # first a cheap look at a small size: a program whose length depends on the size (a
    # loop over rows) is refused before the costly trace at n-1
    # (a loop kept as a loop, loops/scan.py, runs n steps: its traces differ in length, and
    # its graphs, one loop each, are compared as optimized)
    looped = any(op(node) == "scan" for node in graph.nodes)
    early = retrace(cut(args, batch, LOWS[-1])) if LOWS[-1] < n - 1 else None
    if early is not None and len(early.nodes) != len(raw.nodes) and not looped:
        return None
    for m in _nears(n, looped):
        near = retrace(cut(args, batch, m))
        general = near and unify([graph, optimize(near)], [n, m], var)
        if general is not None:
            break
    else:
        return None
    rolled = rolled and _once(rolled)
    for low in (low for low in LOWS if low <= m):
        probe = near if low == m else early if low == LOWS[-1] and early is not None \
            else retrace(cut(args, batch, low))
        sizes = [n, m] + ([low] if low < m else [])
        same = probe is not None and (
            unify([raw, near, probe][:len(sizes)], sizes, var) or looped and rolled and unify(
                [rolled(raw), rolled(near), rolled(probe)][:len(sizes)], sizes, var))
        if same and agrees(general, probe, cut(args, batch, low), low):
            return dataclasses.replace(general, batch=Batch(n, batch.paths, low, n, var))
    return None


def _nears(n, looped):
    """The second size traced: n - 1; for a loop kept as a loop over the batch axis, whose
    graphs do not grow with n, first a quarter of it (at least 16: a trace a quarter as
    long, not T - 1; the passes choose alike far enough above their thresholds, such as
    accumulate.py's MAX_INNER, else n - 1 is traced after all)."""
    small = max(2 * LOWS[-1], n // 4)
    return (small, n - 1) if looped and small < n - 1 else (n - 1,)


def _once(rolled):
    """`rolled`, each graph rolled once (the three traces are compared at each low size)."""
    done = {}

    def once(graph):
        if id(graph) not in done:
            done[id(graph)] = (graph, rolled(graph))  # (the graph kept: its id stays its own)
        return done[id(graph)][1]
    return once


def _runs(retrace):
    """`retrace`, returning None at a size the function does not run at (whatever it
    raises there: that size is not served, and the specialized graph is kept)."""
    def at(args):
        try:
            return retrace(args)
        except Exception:  # noqa: BLE001  a size the code does not run at
            return None
    return at


def _fresh_var(params):
    var = "n"
    while var in params:
        var = "_" + var
    return var


def _described(general, graph, args, names):
    """The docstring shows n for the batch leaves' leading size."""
    batch = general.batch
    parts = []
    for i, (name, arg) in enumerate(zip(names, args)):
        if (i,) in batch.paths:
            dims = ", ".join([batch.var] + [str(d) for d in arg.shape[1:]])
            parts.append(f"{name}: {arg.dtype}[{dims}]")
        else:
            parts.append(signature_text([arg], [name]))
    signature = ", ".join(parts)
    # (the docstring says it, and the sizes served: Graph.described, Batch.text)
    return dataclasses.replace(general, signature=signature)


# ---- the check at the low size --------------------------------------------------------------
def agrees(general, traced, args, n):
    """The unified program at n gives the outputs of the graph traced at n, on `args`."""
    try:
        with np.errstate(all="ignore"):
            mine, theirs = run(general, args, n), run(traced, args, n)
    except Exception:  # noqa: BLE001  a formula that breaks at n is a formula that is wrong
        return False
    return len(mine) == len(theirs) and all(map(_close, mine, theirs))


def run(graph, args, n=None):
    """The outputs (leaves) of a graph on concrete arguments, by its primitives' NumPy
    (random draws from copies of the generators: a check must not advance the user's)."""
    with private_streams():
        return _run(graph, args, n)


def _run(graph, args, n):
    env = {}
    for node in graph.inputs:
        read = node.params.get("read")
        if read is not None:  # a global, closure or attribute (capture.py)
            env[node] = read.follow()
            continue
        value = args
        for key in node.params["path"]:
            value = child(value, key)
        env[node] = value
    for node in graph.nodes:
        values = [env[a] if type(a) is Node else evaluate(a, n) for a in node.args]
        env[node] = node.prim.impl(*values, **evaluate(node.params, n))
    return [env[o] if type(o) is Node else evaluate(o, n) for o in leaves(graph.outputs)]


def _close(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if not np.issubdtype(a.dtype, np.inexact):
        return bool(np.array_equal(a, b))
    tol = 1e-9 if np.finfo(a.dtype).bits >= 64 else 1e-4  # complex64: a float32's
    scale = max(1.0, float(np.nanmax(np.abs(b), initial=0.0)))
    return bool(np.allclose(a, b, rtol=tol, atol=tol * scale, equal_nan=True))
