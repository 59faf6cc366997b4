"""A dense value plus a scatter, as the dense value with the scattered values added at
their index (the primitive add_at, rules/indexing.py).

The cotangent of `x[index]` is a scatter_add: zeros of x's shape with the cotangent added
at the index. Added to a dense array (a cross-entropy's softmax minus its one-hot pick,
`g - softmax * sum(g)`), that is three full-size passes: the zeros, the sum, and a new
buffer for it; a careful person writes `p[rows, y] -= 1.0` into the dense array. The
rewrites, for an add or subtract whose operands have its shape and dtype (no
broadcasting: a smaller dense operand is left alone), s a scatter_add of the values v:

    a + s,  s + a   ->  add_at(a, v)
    a - s           ->  add_at(a, -v)
    s - a           ->  add_at(-a, v)      -(x * c) is x * -c, -(-x) is x: the sign is
                                           taken by what made a, when nothing else reads
                                           it, on its smaller operand (a number, a row sum)

A constant v of one value everywhere (the gradient of a mean: -1/n at every pick) is that
value as a NumPy scalar of its dtype: added at the index it broadcasts as the array did.
add_at is written into a's buffer when a dies there (emit_memory.reuse_plan): `p[rows, y]
+= v` for an index that selects each element once (scatter_add's `unique`), `np.add.at(p,
index, v)` otherwise; into a copy of a when a lives on. With repeated indices the sum is
made in another order (a few ulps): a value a guard reads is left as traced.
"""

import numpy as np

from ..graph import Node, op, users_of
from ..rules import PRIMITIVES
from ..rules.indexing import shifted
from ..tree import leaves
from .rewrite import clone, guard_reads, substitute


def add_at(graph):
    sums, filled = [], []  # (one walk over the nodes: this pass runs in every round)
    for n in graph.nodes:
        name = n.prim.op if n.prim is not None else None
        if name == "add" or name == "subtract":
            if n.shape != () and any(op(a) == "scatter_add" for a in n.args):
                sums.append(n)
        elif name == "add_at" and _scalar(n.args[1]) is not n.args[1]:
            filled.append(n)  # its values became a constant after it was made (fold)
    if not (sums or filled):
        return graph, False
    users = users_of(graph.nodes)
    traced = guard_reads(graph)
    fixed = traced | set(graph.inputs) | {leaf for leaf in leaves(graph.outputs)
                                          if type(leaf) is Node}  # whose sign stays
    replace = {n: clone(n, (n.args[0], _scalar(n.args[1]), *n.args[2:])) for n in filled}
    for node in sums:
        if node in traced or node.dtype.kind not in "fc" \
                or not all(_same(a, node) for a in node.args):
            continue
        a, s = node.args
        v = None
        if op(s) == "scatter_add":  # a + s, s + s', a - s
            v = _scalar(s.args[0])
            if op(node) == "subtract":
                v = _negative(node, v)
        else:  # s + a, s - a
            a, s = s, a
            v = _scalar(s.args[0])
            if op(node) == "subtract":
                a = _negated(node, a, users, fixed)
        params = {"index": shifted(s.params["index"], 1), "unique": s.params["unique"]}
        replace[node] = clone(node, (a, v, *s.args[1:]), PRIMITIVES["add_at"], params)
    return substitute(graph, replace)


def _same(x, node):
    return type(x) is Node and x.shape == node.shape and x.dtype == node.dtype


def _scalar(v):
    """A constant array of one value as that value (a NumPy scalar of its dtype)."""
    if type(v) is np.ndarray and v.size and v.ndim and (v == v.flat[0]).all():
        return v.flat[0]
    return v


def _negative(node, v):
    """-v: a constant negated now, a value by a node of its own (the size of the index)."""
    if type(v) is not Node:
        return np.negative(v) if isinstance(v, (np.ndarray, np.generic)) else -v
    return node.derived(PRIMITIVES["negative"], (v,), shape=v.shape, dtype=v.dtype)


def _negated(node, a, users, fixed):
    """-a, computed where node is: by what made a, when node alone reads it."""
    if a not in fixed and users.get(a) == [node] and a.prim is not None:
        name = op(a)
        if name == "negative":
            return a.args[0]
        if name in ("multiply", "divide"):
            x, c = a.args
            if name == "multiply" and _smaller(x, a):
                x, c = c, x
            if _smaller(c, a) and _same(x, a):
                minus = _negative(a, c)
                return clone(node, (x, minus) if c is a.args[1] else (minus, x), a.prim, {})
    return clone(node, (a,), PRIMITIVES["negative"], {})


def _smaller(c, a):
    """c is a number, or a value of a's dtype with fewer elements (`sum(g)` of a softmax's
    backward): negated in fewer steps than a."""
    if type(c) is Node:
        return c.dtype == a.dtype and int(np.prod(c.shape)) < int(np.prod(a.shape)) \
            and all(type(d) is int for d in c.shape + a.shape)
    return _number(c)


def _number(c):
    return type(c) in (int, float) or isinstance(c, np.generic) and c.dtype.kind in "fc"
