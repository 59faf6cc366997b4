"""Graph -> Graph optimizations, run to a fixed point before emission.

Each pass is a pure function: it takes a Graph and returns a new Graph (sharing the nodes
it did not change) and whether it changed anything. `optimize` runs them in turn until
none changes anything. Set AUTODIFFGEN_PASSES=0 (or `passes.ENABLED = False`) to emit
the graph exactly as traced, e.g. to compare the two.
"""

import os

from .accumulate import accumulate
from .cse import cse
from .dce import dce
from .fold import fold
from .fresh import ensure_fresh
from .simplify import simplify

PIPELINE = (fold, simplify, cse, accumulate, dce)
ENABLED = os.environ.get("AUTODIFFGEN_PASSES", "1") != "0"
MAX_ROUNDS = 20


def optimize(graph, pipeline=PIPELINE):
    """The graph after every pass has run until none changes it."""
    for _ in range(MAX_ROUNDS):
        changed = False
        for run in pipeline:
            graph, did = run(graph)
            changed = changed or did
        if not changed:
            break
    return graph


__all__ = ["ENABLED", "PIPELINE", "accumulate", "cse", "dce", "ensure_fresh", "fold", "optimize", "simplify"]
