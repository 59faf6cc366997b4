"""Softmax, log-softmax and sigmoid differentiated whole, as one would by hand.

Traced primitive by primitive, a softmax `p = e / sum(e)` with `e = exp(z)` gets the
quotient rule's backward: g / t, then g * p negated and divided by t, summed, broadcast,
added, times e (seven full-size operations); a log-softmax `z - log(sum(exp(z)))` a
sum, a division, a multiplication by e and an add. Differentiated as one function of z:

    softmax      p = exp(z) / sum(exp(z))          dz = p * (g - sum(g * p))
    log-softmax  y = z - log(sum(exp(z)))         dz = g - (e / t) * sum(g)

(sums over the softmax's axis, kept as size-1 axes), which is what a careful person
writes: a product, a sum and two in-place updates. z is whatever the user exponentiates
(usually `s - max(s)`, whose max then gets no gradient: shift_invariance.py). Likewise
a sigmoid written out, `s = 1 / (1 + exp(-z))` (forms.sigmoid_of), is differentiated
from its output, `dz = g * (s * (1 - s))`, so that its exp and sum need not be kept
for the backward, as tanh's and scipy.special.expit's rules already do.

`whole_rules` matches the forms in the backward's node order, the way shift_invariance
does, and only when the intermediates (e, its sum, the log; the sigmoid's exp, negation
and sum) are read by nothing else on
the way to the output: then no cotangent reaches them except through the root, and
replacing the root's rule (and theirs, which never run) by the whole one is exact. Both
engines use it (the tape computes it on arrays), and it is written with NumPy-level
operations, so second derivatives come from its own primitives' rules.
"""

import numpy as np

from ..graph import Node, op, users_of
from ..graph.forms import sigmoid_of


def whole_rules(order, seeded):
    """{root node: rule(g, look) -> (z, dz)} for each softmax or log-softmax in `order`
    (the backward's node order) whose intermediates nothing else reads. `seeded`: nodes
    that receive a cotangent from outside (the outputs), which count as other readers."""
    consumers = computed = None
    found = {}
    for node in order:
        name = op(node)
        if name == "exp" and node not in seeded and type(node.args[0]) is Node:
            consumers = consumers if consumers is not None else users_of(order)
            match = _match(node, consumers, seeded)
        elif name in ("divide", "reciprocal"):
            consumers = consumers if consumers is not None else users_of(order)
            computed = computed if computed is not None else set(order)
            match = _sigmoid(node, computed, consumers, seeded)
        else:
            continue
        if match is not None:
            root, rule = match
            found[root] = rule
    return found


def _sigmoid(s, computed, consumers, seeded):
    """The rule of s = 1 / (1 + exp(-z)) from s alone, if nothing else reads its parts."""
    found = sigmoid_of(s, computed)
    if found is None:
        return None
    z, nodes = found
    parts = nodes - {s}
    if type(z) is not Node or not np.issubdtype(z.dtype, np.floating) or not _like(s, z) \
            or any(v in seeded or len(consumers.get(v, ())) != 1 or not _like(v, z)
                   for v in parts):
        return None
    return s, lambda g, look: (z, _sigmoid_vjp(g, look(s)))


def _match(e, consumers, seeded):
    z = e.args[0]
    if not np.issubdtype(z.dtype, np.floating) or e.shape != z.shape:
        return None
    users = consumers.get(e, [])
    sums = [t for t in users if op(t) == "sum" and t.params["keepdims"]
            and t.params["dtype"] is None and t.dtype == e.dtype]
    if len(sums) != 1 or sums[0] in seeded:
        return None
    t, axis = sums[0], sums[0].params["axis"]
    after = _only(consumers.get(t, []))
    if op(after) == "divide" and after.args[0] is e and after.args[1] is t \
            and len(users) == 2 and {id(u) for u in users} == {id(t), id(after)} \
            and _like(after, e):
        return after, lambda g, look: (z, _softmax_vjp(g, look(after), axis))
    if op(after) == "log" and after not in seeded and _only(users) is t:
        root = _only(consumers.get(after, []))
        if op(root) == "subtract" and root.args[0] is z and root.args[1] is after \
                and _like(root, e):
            return root, lambda g, look: (z, _log_softmax_vjp(g, look(e), look(t), axis))
    return None


def _only(users):
    return users[0] if len(users) == 1 else None


def _like(node, e):
    return node.shape == e.shape and node.dtype == e.dtype


def _softmax_vjp(g, p, axis):
    """p * (g - sum(g * p)): what reaches z from p = softmax(z)."""
    return (g - np.sum(g * p, axis=axis, keepdims=True)) * p


def _sigmoid_vjp(g, s):
    """g * s * (1 - s): what reaches z from s = sigmoid(z)."""
    return g * (s * (1 - s))


def _log_softmax_vjp(g, e, t, axis):
    """g - softmax(z) * sum(g), the softmax computed again as e / t (both kept)."""
    return g - (e / t) * np.sum(g, axis=axis, keepdims=True)
