"""The cotangents of np.where's two sides joined into one where.

np.where's rule gives each side the cotangent where it was chosen and zeros elsewhere,
`where(c, g, 0)` and `where(c, 0, g)`. When both sides are computed from one value (the
stable sigmoid's exp(where(m, -x, x)), rules/masked_writes.py; `np.where(m, x, 2 * x)`),
that value's cotangent is their sum: two full-size wheres and an add where one where
says it all:

    where(c, a, 0) + where(c, 0, b)   ->   where(c, a, b)
    where(c, 0, a) - where(c, b, 0)   ->   where(c, -b, a)
    where(c, a, 0) - where(c, 0, b)   ->   where(c, a, -b)

(and the add with its terms swapped). At every element one of the two terms is the zero
the other is added to, so the value is the same, a NaN or inf included; only a -0.0 there
becomes 0.0 in the old form and stays -0.0 in the new. The rewrite is made where the old
wheres are read by the sum alone, and the sum's shape and dtype are theirs.
"""

import numpy as np

from ..graph import Node, op, users_of
from ..graph.forms import same_value
from ..rules import PRIMITIVES
from .rewrite import clone, substitute


def wheres(graph):
    sums = [n for n in graph.nodes if op(n) in ("add", "subtract")
            and all(op(a) == "where" for a in n.args)]
    if not sums:
        return graph, False
    users = users_of(graph.nodes)
    replace = {}
    for node in sums:
        a, b = node.args
        if a is b or not same_value(a.args[0], b.args[0]) or any(
                len(users.get(w, ())) != 1 or w.shape != node.shape or w.dtype != node.dtype
                for w in (a, b)):
            continue
        joined = _joined(node, a, b)
        if joined is not None:
            replace[node] = joined
    return substitute(graph, replace)


def _joined(node, a, b):
    """The one where of `node` = a +- b, or None if its sides do not take turns."""
    if _zero(a.args[2]) and _zero(b.args[1]):  # a's side chosen where c holds, b's elsewhere
        sides, k = [a.args[1], b.args[2]], 1
    elif _zero(a.args[1]) and _zero(b.args[2]):  # b's side chosen where c holds, a's elsewhere
        sides, k = [b.args[1], a.args[2]], 0
    else:
        return None
    if op(node) == "subtract":  # b's side (k) negated
        side = sides[k]
        if type(side) is not Node or side.dtype != node.dtype:
            return None
        sides[k] = node.derived(PRIMITIVES["negative"], (side,), shape=side.shape)
    return clone(node, (a.args[0], *sides), PRIMITIVES["where"], {})


def _zero(x):
    """A constant number 0 (not a bool), which takes the other side's dtype."""
    return type(x) is not Node and isinstance(x, (int, float)) and not isinstance(x, bool) \
        and x == 0 and np.ndim(x) == 0
