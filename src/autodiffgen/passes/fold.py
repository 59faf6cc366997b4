"""Constant folding: a node whose arguments are all constants becomes a constant.

The seed of the backward pass (`ones(())`) and everything computed from it alone (its
negation, its reshape, its division by the batch size) are known when the code is
generated, so the generated function does not compute them on every call. Results larger
than FOLD_LIMIT elements stay computed (a broadcast view is cheaper than a big constant).
"""

import numpy as np

from ..graph import Node
from .rewrite import substitute

FOLD_LIMIT = 1024


def fold(graph):
    replace = {}
    for node in graph.nodes:
        if node.prim.effect or any(type(a) is Node for a in node.args):
            continue
        value = node.prim.impl(*node.args, **node.params)
        if _foldable(value, node):
            replace[node] = np.array(value, dtype=node.dtype) if np.ndim(value) == 0 \
                and isinstance(value, np.ndarray) else value
    return substitute(graph, replace)


def _foldable(value, node):
    if isinstance(value, np.ndarray):
        return value.size <= FOLD_LIMIT and value.dtype == node.dtype \
            and value.shape == node.shape
    return isinstance(value, (np.generic, float, int, bool))
