"""Softmax, log-softmax, a cross-entropy's pick and sigmoid differentiated whole, as one
would by hand.

Traced primitive by primitive, a softmax `p = e / sum(e)` with `e = exp(z)` gets the
quotient rule's backward: g / t, then g * p negated and divided by t, summed, broadcast,
added, times e (seven full-size operations); a log-softmax `z - log(sum(exp(z)))` a
sum, a division, a multiplication by e and an add; a cross-entropy `log(p[rows, y])` a
division by the picks, a scatter into zeros and then the softmax's. Differentiated as
one function of z:

    softmax      p = exp(z) / sum(exp(z))          dz = p * (g - sum(g * p))
    log-softmax  y = z - log(sum(exp(z))), log(p)  dz = g - p * sum(g)
    picked log   y = log(p[index])                 dz = S - p * sum(S),  S = g at index

(sums over the softmax's axes, kept as size-1 axes), which is what a careful person
writes: a product, a sum and two in-place updates; for the pick `p * c` and `dz[rows, y]
+= g` (passes/add_at.py), the row sums of S being g itself when the index picks once per
row (passes/sums.py), or g's sum for a softmax over every axis. p is any spelling of a normalized
exponential (forms.softmax_of: divided or multiplied by the reciprocal, in place, the
exp computed twice), the log-softmax `s - log(sum(exp(s)))` or `z - (c + log(sum(exp(z -
c))))` (forms.log_softmax_of), of z shifted by anything constant along the axes, which
then gets nothing from it: exactly zero, so the max of `z - max(z)` costs no backward
work. Likewise a sigmoid written out, `s = 1 / (1 + exp(-z))` (forms.sigmoid_of), or in
its stable form, `where(z < 0, e, 1) / (1 + e)` with `e = exp(-|z|)` (forms.stable_sigmoid_of:
what course code's masked writes become, rules/masked_writes.py), is
differentiated from its output, `dz = g * (s * (1 - s))`, so that its exp and sum need
not be kept for the backward, as tanh's and scipy.special.expit's rules already do.

`whole_rules` matches the forms in the backward's node order. The root's rule gives z
the cotangent of every path from z to the root at once, and gives the intermediates (the
exps, the sum, the shift, the pick) none: an intermediate another node also reads gets
that node's cotangent alone, and its own rule passes it on, so the sum at z is exact
whoever else reads them. (The sigmoid is matched only when nothing else reads its parts,
which then need not be kept.) Both engines use it (the tape computes it on arrays), and
it is written with NumPy-level operations, so second derivatives come from its own
primitives' rules.
"""

import numpy as np

from ..graph import Node, op, users_of
from ..graph.forms import log_softmax_of, sigmoid_of, softmax_of, stable_sigmoid_of
from ..rules.indexing import block_cotangent, scatter_add


def whole_rules(order, seeded):
    """{root node: rule(g, look) -> (z, dz)} for each softmax, log-softmax, picked log of a
    softmax or sigmoid in `order` (the backward's node order). `seeded`: nodes that receive
    a cotangent from outside (the outputs), which count as other readers."""
    consumers = None
    computed = set(order)
    found = {}
    for node in order:
        name = op(node)
        if name == "log":
            match = _picked_log(node, computed) or _log_of_softmax(node, computed)
        elif name == "subtract":
            match = _log_softmax(node, computed)
        elif name in ("divide", "multiply", "reciprocal"):
            match = _softmax(node, computed)
            if match is None and name != "multiply":
                consumers = consumers if consumers is not None else users_of(order)
                match = _sigmoid(node, computed, consumers, seeded)
        else:
            continue
        if match is not None:
            root, rule = match
            found[root] = rule
    return found


def _softmax(p, computed):
    """The rule of p = softmax(z) over its axes, in any spelling (forms.softmax_of)."""
    found = softmax_of(p, computed)
    if found is None:
        return None
    z, axes = found
    return p, lambda g, look: (z, _softmax_vjp(g, look(p), axes))


def _log_softmax(y, computed):
    """The rule of y = z - log(sum(exp(z))), shifted or not (forms.log_softmax_of)."""
    found = log_softmax_of(y, computed)
    if found is None:
        return None
    z, axes, e, t = found
    return y, lambda g, look: (z, _log_softmax_vjp(g, look(e), look(t), axes))


def _log_of_softmax(log, computed):
    """log(p) of p = softmax(z): a log-softmax, dz = g - p * sum(g)."""
    p = log.args[0]
    found = softmax_of(p, computed) if type(p) is Node else None
    if found is None or log.shape != p.shape or log.dtype != p.dtype:
        return None
    z, axes = found
    return log, lambda g, look: (z, g - look(p) * np.sum(g, axis=_axis(axes), keepdims=True))


def _picked_log(log, computed):
    """log(p[index]) of p = softmax(z): a cross-entropy's pick (see the module doc)."""
    q = log.args[0]
    if op(q) != "getitem" or q not in computed or type(q.args[0]) is not Node \
            or log.shape != q.shape or log.dtype != q.dtype:
        return None
    p = q.args[0]
    found = softmax_of(p, computed)
    if found is None:
        return None
    z, axes = found
    index, arrays = q.params["index"], q.args[1:]
    whole = len(axes) == len(p.shape)

    def rule(g, look):
        values = [look(a) if type(a) is Node else a for a in arrays]
        return z, _picked_log_vjp(g, look(p), values, index, axes, whole)
    return log, rule


def _sigmoid(s, computed, consumers, seeded):
    """The rule of s = 1 / (1 + exp(-z)) from s alone, if nothing else reads its parts
    (or of its stable form, forms.stable_sigmoid_of)."""
    found = sigmoid_of(s, computed) or stable_sigmoid_of(s, computed)
    if found is None:
        return None
    z, nodes = found
    parts = nodes - {s}
    if type(z) is not Node or not np.issubdtype(z.dtype, np.floating) or not _like(s, z) \
            or any(v in seeded or any(c not in nodes for c in consumers.get(v, ()))
                   or not _like(v, z) for v in parts):
        return None
    return s, lambda g, look: (z, _sigmoid_vjp(g, look(s)))


def _like(node, e):
    return node.shape == e.shape and node.dtype == e.dtype


def _softmax_vjp(g, p, axes):
    """p * (g - sum(g * p)): what reaches z from p = softmax(z)."""
    return (g - np.sum(g * p, axis=_axis(axes), keepdims=True)) * p


def _picked_log_vjp(g, p, arrays, index, axes, whole):
    """What reaches z from log(p[index]), p = softmax(z), g its cotangent: S - p * sum(S)
    for S = g scattered at the index (sums over the softmax's axes). By the quotient rule
    it would be p * (G - sum(G * p)) for G = (g / p[index]) scattered; G * p is S, with no
    division. sum(S) is g's sum for a softmax over every axis (`whole`); else the sums
    pass computes it from g (passes/sums.py: g itself for [np.arange(n), y])."""
    picked = scatter_add(g, *arrays, **block_cotangent(p, *arrays, index=index))
    if whole:
        return picked - p * (np.sum(g) if np.shape(g) else g)
    return picked - p * np.sum(picked, axis=_axis(axes), keepdims=True)


def _axis(axes):
    return axes[0] if len(axes) == 1 else axes


def _sigmoid_vjp(g, s):
    """g * s * (1 - s): what reaches z from s = sigmoid(z)."""
    return g * (s * (1 - s))


def _log_softmax_vjp(g, e, t, axes):
    """g - softmax(z) * sum(g), the softmax computed again as e / t (both kept)."""
    return g - (e / t) * np.sum(g, axis=_axis(axes), keepdims=True)
