"""Shifts that cannot change the result: the max subtracted before a (log-)softmax.

`s = z - z.max(axis, keepdims=True)` keeps exp from overflowing. What follows, a
log-softmax `s - log(sum(exp(s)))` or a softmax `exp(s) / sum(exp(s))` over the same
axis, does not change when s is shifted along that axis, so the gradient that reaches the
max is exactly zero: computing it costs a comparison, two sums and a division per row
and yields rounding noise. `dead_shifts` finds such subtractions so that the backward
pass skips the max's side of them; anything else that reads s or the max keeps it.
"""

from ..graph import Node, op, users_of


def dead_shifts(order):
    """The subtract nodes `z - max(z)` whose max side gets an exactly zero gradient.

    `order` starts with the output, which counts as a use that is never allowed: the
    softmax or log-softmax must be the only way out of the chain."""
    consumers = users_of(order)
    if order:
        consumers.setdefault(order[0], []).append(None)  # the caller reads the output
    dead = set()
    for node in order:
        if op(node) != "subtract" or type(node.args[1]) is not Node:
            continue
        z, m = node.args
        if op(m) == "max" and m.args[0] is z and m.params["keepdims"] \
                and consumers.get(m) == [node] and _invariant(node, m.params["axis"], consumers):
            dead.add(node)
    return dead


def _invariant(s, axis, consumers):
    """Every use of s is part of a softmax or log-softmax of s over `axis`."""
    exps = [c for c in consumers.get(s, []) if op(c) == "exp"]
    sums = [c for e in exps for c in consumers.get(e, []) if op(c) == "sum"
            and c.params["axis"] == axis and c.params["keepdims"]]
    logs = [c for t in sums for c in consumers.get(t, []) if op(c) == "log"]
    allowed = {
        id(s): lambda c: c in exps or (op(c) == "subtract" and c.args[0] is s
                                       and c.args[1] in logs),
        **{id(e): lambda c, e=e: c in sums or (op(c) == "divide" and c.args[0] is e
                                                 and c.args[1] in sums) for e in exps},
        **{id(t): lambda c: c in logs or (op(c) == "divide" and c.args[1] in sums
                                          and c.args[0] in exps) for t in sums},
        **{id(L): lambda c: op(c) == "subtract" and c.args[0] is s and c.args[1] in logs
           for L in logs},
    }
    for value in [s] + exps + sums + logs:
        if not all(allowed[id(value)](c) for c in consumers.get(value, [])):
            return False
    return bool(exps and sums)
