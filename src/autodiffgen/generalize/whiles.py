"""A `while` loop kept as a loop (loops/scan.py: Scan.exit) made to serve every number of
steps: one trace for every trip count, as batch.py makes one for every batch size.

The number of steps a `while` loop runs depends on the data, so no other arguments give a
trace at another number. Its test is made to say stop earlier instead (trace/exits.py):
the function traced again runs the loop k - 1 steps and a few (LOWS), and the three graphs are
unified (unify.py) with the number of steps as the variable. Where they unify, every size
and index that depended on the number (the stacks' rows, the backward loop's range) is a
formula in it, and the code names the number the loop ran (`steps = len(hs)`) before it
reads any. A loop that ran fewer steps than the fewest unified raises GuardFailure (the
function is traced again there). Anything that does not unify (code after the loop that
branches on its result, two `while` loops) keeps the traced number, checked after the
loop.
"""

import dataclasses

from ..graph import Graph, is_guard, op
from ..rules.loops import exit_test
from ..trace.exits import forcing, site_key
from .unify import unify

# the fewest steps tried, in turn: two steps make a loop; a backward loop without the
# first and the last step, which its code may write out, needs four; then half the steps
# traced and two fewer (the passes may choose otherwise below a size: one product of all
# the steps' rows while they are few, accumulate.py)
LOWS = (2, 3, 4, 5)


def traced_whiles(graph):
    """The `while` loops of a graph kept with the number of steps traced."""
    return [n for n in graph.nodes if op(n) == "scan" and n.params["body"].exit
            and type(n.params["body"].ts) is range]


def general(graph, raw, args, optimize, retrace):
    """`graph` (optimized, traced at `args` as `raw`) with its `while` loop serving every
    number of steps from the least of LOWS it unifies at up, or `graph` itself. (A graph
    with such a loop is not made to serve other batch sizes: batch.py leaves it; its
    traces at other sizes run other numbers of steps.)"""
    loops = traced_whiles(graph)
    if len(loops) != 1 or graph.batch is not None or type(raw) is not Graph:
        return graph
    scan = loops[0].params["body"]
    test = exit_test(scan)
    if test is None:
        return graph
    key = test.params["exit"]
    readings = sum(1 for n in raw.nodes if is_guard(n) and n.params["test"] == "bool"
                   and site_key(n.site) == key)
    steps = scan.count
    before = readings - steps  # the loop's steps written out before it (a first that differs)
    stop = not test.params["outcome"]

    def traced_at(size):  # the graph of a trace whose loop stops after `size` steps
        try:
            with forcing(key, before + size - 1, stop):
                return optimize(retrace(args))
        except Exception:  # noqa: BLE001  the function fails when its loop stops early
            return None

    var = _fresh_var(graph)
    near = traced_at(steps - 1) if steps - 1 > LOWS[0] else None
    if near is None or unify([graph, near], [steps, steps - 1], var) is None:
        return graph
    for low in sorted({low for low in (*LOWS, steps // 2, steps - 2) if low < steps - 1}):
        probe = traced_at(low)  # confirmed at a third number: the fewest it serves
        general = probe and unify([graph, near, probe], [steps, steps - 1, low], var)
        if general is not None:
            return dataclasses.replace(general, nodes=[_least(n, low) for n in general.nodes])
    return graph


def _least(node, low):
    """The loop's node with `low` as the fewest steps it serves."""
    body = node.params.get("body") if op(node) == "scan" else None
    if body is None or not body.exit or type(body.ts) is range:
        return node
    node.params = {**node.params, "body": dataclasses.replace(body, least=low)}
    return node


def _fresh_var(graph):
    var = "steps"
    while var in graph.params:
        var = "_" + var
    return var
