"""Forms of the traced forward that more than one stage recognizes: the sigmoid
1 / (1 + exp(-z)) as users write it (the whole rules of whole_rules.py differentiate
it from its output; the stable-forms pass rewrites the log of it).

Each matcher takes the set of nodes it may look into (`computed`): what the caller
may rewrite or has traced in this graph.
"""

import numpy as np

from . import Node, op


def sigmoid_of(s, computed):
    """(z, its nodes) for s = 1 / (1 + exp(-z)) or reciprocal(1 + exp(-z)), else None."""
    if computed_op(s, computed, "divide") and is_one(s.args[0]):
        d = s.args[1]
    elif computed_op(s, computed, "reciprocal"):
        d = s.args[0]
    else:
        return None
    e = computed_op(d, computed, "add") and plus_one(d, computed)
    n = e and computed_op(e.args[0], computed, "negative")
    return (n.args[0], {s, d, e, n}) if n else None


def plus_one(node, computed):
    """The exp node of 1 + exp(.) or exp(.) + 1."""
    a, b = node.args
    for x, c in ((a, b), (b, a)):
        if is_one(c) and computed_op(x, computed, "exp"):
            return x
    return None


def computed_op(x, computed, name):
    """x if it is a node of `computed` applying the built-in primitive `name`."""
    return x if type(x) is Node and x in computed and op(x) == name else None


def is_one(c):
    """A constant scalar 1 (not a bool, not an array of them)."""
    if type(c) is Node or isinstance(c, (bool, np.bool_)) or np.ndim(c) != 0:
        return False
    return isinstance(c, (int, float, np.number, np.ndarray)) and bool(c == 1)
