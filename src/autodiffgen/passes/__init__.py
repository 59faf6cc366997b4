"""Graph -> Graph optimizations, run to a fixed point before emission.

Each pass is a pure function: it takes a Graph and returns a new Graph (sharing the nodes
it did not change) and whether it changed anything. `optimize` runs them in turn until
none changes anything. Set AUTODIFFGEN_PASSES=0 (or `passes.ENABLED = False`) to emit
the graph exactly as traced, e.g. to compare the two.

`stable` comes first: it matches the graph as traced, before the other passes reshape the
backward nodes it rewrites with the forward ones. `fuse` (numexpr) is a lowering, not an
optimization the others can build on: it runs once, after the fixed point, and only when
the caller allows numexpr in the code it emits.
"""

import os

from .accumulate import accumulate
from .add_at import add_at
from .affine import affine
from .contract import contract
from .cse import cse
from .dce import dce
from .exact_scales import exact_scales
from .fold import fold
from .fresh import ensure_fresh
from .fuse import fuse
from .identities import identities
from .scalars import scalars
from .signs import signs
from .simplify import simplify
from .stable import stable
from .stepwise import stepwise
from .sums import sums
from .wheres import wheres
from .zero_products import zero_products

PIPELINE = (stable, fold, zero_products, simplify, scalars, signs, wheres, sums, contract, cse, accumulate,
            add_at, stepwise, dce)
ENABLED = os.environ.get("AUTODIFFGEN_PASSES", "1") != "0"
MAX_ROUNDS = 20


def optimize(graph, pipeline=PIPELINE, numexpr=False):
    """The graph after every pass has run until none changes it; then, if `numexpr`, its
    long arithmetic trees on large arrays fused into numexpr calls (see fuse.py).

    The passes run in turn, and the loop stops as soon as each has run once on the graph
    as it is without changing it (not at the end of a round): the graphs are the same as
    round by round, without the passes that could not change anything. fold, simplify and
    scalars look again only at the nodes that are new since they last ran, or read a node
    they replace (`examined`); cse keeps each node's key."""
    clean = 0  # passes run in a row that changed nothing
    # what a pass keeps across its runs: the nodes a local pass need not revisit, cse's keys
    examined = {fold: set(), simplify: set(), scalars: set(), cse: {}}
    for k in range(MAX_ROUNDS * len(pipeline)):
        if clean == len(pipeline):
            break
        step = pipeline[k % len(pipeline)]
        graph, did = step(graph, examined[step]) if step in examined else step(graph)
        clean = 0 if did else clean + 1
    if numexpr:
        graph, fused = fuse(graph)
        if fused:
            graph, _ = dce(graph)
    return graph


__all__ = ["ENABLED", "PIPELINE", "accumulate", "add_at", "affine", "contract", "cse", "dce",
           "ensure_fresh", "exact_scales", "fold", "fuse", "identities", "optimize", "scalars", "signs",
           "simplify", "stable", "stepwise", "sums", "wheres", "zero_products"]
