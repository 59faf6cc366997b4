"""Negations carried to the add that absorbs them.

A rule like cos's, `-(g * sin(x))`, negates a full array that the backward then only
multiplies, divides and finally adds: `-(g * s) * h + t` is `t - (g * s) * h`. When every
way out of a negation ends in an add or a subtract (through products, quotients with it
on top and other negations), the negation is dropped and the sign carried there, the
products recomputed without it: one full-size pass fewer, and no value computed twice.
Values the caller returns or a guard reads keep their sign (an add that absorbs one
keeps its value exactly: b - a is b + (-a) in floating point too).
"""

from ..graph import Node, op, users_of
from ..rules import PRIMITIVES
from ..tree import leaves
from .rewrite import clone, guard_reads, substitute

_DEPTH = 6  # how many products a sign is carried through


def signs(graph):
    negations = [n for n in graph.nodes if op(n) == "negative" and type(n.args[0]) is Node
                 and n.args[0].dtype == n.dtype and n.args[0].shape == n.shape]
    if not negations:
        return graph, False
    users = users_of(graph.nodes)
    fixed = {leaf for leaf in leaves(graph.outputs) if type(leaf) is Node} | guard_reads(graph)
    fixed |= set(graph.inputs)
    replace, flipped = {}, {}
    for n in negations:
        if n in flipped or not _carried(n, users, fixed, _DEPTH, set()):
            continue
        flipped[n] = n.args[0]
        _rewrite(n, users, flipped, replace)
    return substitute(graph, replace)


def _carried(v, users, fixed, depth, seen):
    """Every use of v (to be replaced by -v) can take the sign."""
    if v in fixed or v in seen or not users.get(v):
        return False
    seen.add(v)
    for w in users[v]:
        if sum(a is v for a in w.args) != 1 or w.dtype != v.dtype:
            return False
        name = op(w)
        if name == "negative" or name == "add" or name == "subtract" and w.args[1] is v:
            continue  # absorbed: w keeps its value (b - a is b + -a exactly)
        carries = name in ("multiply", "subtract") or name == "divide" and w.args[0] is v
        if not (carries and depth and _carried(w, users, fixed, depth - 1, seen)):
            return False  # neither absorbs the sign nor carries it on
    return True


def _rewrite(v, users, flipped, replace):
    """Rewrite the uses of v, whose negation is flipped[v]."""
    for w in users[v]:
        if w in replace or w in flipped:
            continue
        name, other = op(w), [a for a in w.args if a is not v]
        if name == "negative":
            replace[w] = flipped[v]
        elif name == "add":
            replace[w] = clone(w, (other[0], flipped[v]), PRIMITIVES["subtract"], {})
        elif name == "subtract" and w.args[1] is v:
            replace[w] = clone(w, (w.args[0], flipped[v]), PRIMITIVES["add"], {})
        else:  # w = v * b, v / b, v - b: -w is flipped[v] * b, flipped[v] / b, flipped[v] + b
            args = tuple(flipped[v] if a is v else a for a in w.args)
            prim = PRIMITIVES["add"] if name == "subtract" else w.prim
            flipped[w] = w.derived(prim, args, w.params)
            _rewrite(w, users, flipped, replace)
