"""Products with constant zeros folded: `zeros @ W` is zeros of the product's shape.

A recurrent net whose state starts at `np.zeros(...)` multiplies it by its weights at
the first step (`h @ Wh`), and its backward multiplies that product's cotangent by the
same zeros (`zeros.T @ g`); fold cannot fold either (one operand is computed at run
time). Here such a product becomes zeros, which simplify then drops from the sums that
read it (`x + 0` is `x`), and fold computes what else reads only constants.

The zeros are a constant array up to fold's FOLD_LIMIT elements, else a broadcast of
one zero (no large array in the module). As JAX's symbolic zeros, a product with zeros is
zero even where the other operand is inf or nan (where NumPy would give nan).
"""

import numpy as np

from ..graph import Node, op
from ..rules import PRIMITIVES
from .fold import FOLD_LIMIT
from .rewrite import clone, substitute

PRODUCTS = frozenset({"matmul", "multiply", "einsum"})  # zero if one factor is


def zero_products(graph):
    """(graph with every product of a constant all-zero operand replaced by zeros,
    whether any was)."""
    replace = {}
    for node in graph.nodes:
        if op(node) in PRODUCTS and any(_zero(a) for a in node.args) \
                and np.dtype(node.dtype).kind in "biufc":
            replace[node] = _zeros_like(node)
    return substitute(graph, replace)


def _zero(x):
    """x is a constant array all of whose elements are 0, or a broadcast of one (what
    this pass makes of a large product). Not a Python 0: `x * 0` is the user's to write."""
    if op(x) == "broadcast_to":
        x = x.args[0]
    return type(x) is not Node and isinstance(x, np.ndarray) and x.size > 0 \
        and not np.any(x)


def _zeros_like(node):
    if int(np.prod(node.shape, dtype=np.int64)) <= FOLD_LIMIT:
        return np.zeros(node.shape, node.dtype)
    return clone(node, (np.zeros((), node.dtype),), PRIMITIVES["broadcast_to"],
                 {"shape": tuple(node.shape)})
