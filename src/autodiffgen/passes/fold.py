"""Constant folding: a node whose arguments are all constants becomes a constant.

The seed of the backward pass (`ones(())`) and everything computed from it alone (its
negation, its reshape, its division by the batch size) are known when the code is
generated, so the generated function does not compute them on every call. Results larger
than FOLD_LIMIT elements stay computed (a broadcast view is cheaper than a big constant).

One sweep folds a whole constant subgraph: the nodes come in execution order, so a node's
arguments are folded (or known not to fold) before it is looked at, and it reads their
folded values. (Folding one level per sweep made `optimize` run a round per level.) A
`broadcast_to` of a value this sweep folded waits for the next sweep: a ufunc broadcasts by
itself, and simplify first drops the broadcast there, which keeps the constant small.
"""

import numpy as np

from ..graph import Node
from .rewrite import substitute, unchanged

FOLD_LIMIT = 1024


def fold(graph, examined=None):
    """`examined` (optimize's, across its rounds): the nodes looked at before and left as
    they were, which are left again when no argument of theirs changed in this sweep (a
    node and its arguments never change: a pass copies the node instead)."""
    replace = {}
    for node in graph.nodes:
        if node.prim.effect or unchanged(node, examined, replace):
            continue
        for a in node.args:  # (a replaced argument is a constant: fold replaces by them)
            if type(a) is Node and a not in replace:
                break  # reads a value computed at run time: most nodes
        else:
            if node.prim.op == "broadcast_to" and any(type(a) is Node for a in node.args):
                continue
            args = [replace.get(a, a) if type(a) is Node else a for a in node.args]
            with np.errstate(all="ignore"):  # what a call computes warns when it runs
                value = node.prim.impl(*args, **node.params)
            if _foldable(value, node):
                replace[node] = np.array(value, dtype=node.dtype) if np.ndim(value) == 0 \
                    and isinstance(value, np.ndarray) else value
    if examined is not None:  # (at C speed when nothing is replaced: most sweeps)
        examined.update(graph.nodes if not replace else
                        (n for n in graph.nodes if n not in replace))
    return substitute(graph, replace)


def _foldable(value, node):
    if isinstance(value, np.ndarray):
        return value.size <= FOLD_LIMIT and value.dtype == node.dtype \
            and value.shape == node.shape
    return isinstance(value, (np.generic, float, int, bool))
