"""A kept loop's guards of a bound linear in t, checked at the loop's two ends.

A window `x[j * s:j * s + 3]` read at every step of a loop over j records the slice's
bounds as guards (`j * s >= 0`, `j * s + 3 <= 10`: the trace clipped nothing); kept in
the loop, they are two comparisons and two tests a step. Each side of such a comparison
is an integer linear in t (t times invariants, plus invariants: the loop's values from
outside and constants), so their difference is monotone in t whatever the signs: an
ordered comparison that holds (or fails) at the first and at the last step does so at
every step between, and so does an equality that holds at both (the difference is zero
at two steps: everywhere). An equality that fails at both ends may hold between (`j + k
!= 6` at j = 0 and 7, not at 4): such a guard stays in the body. The others are checked
before the loop, once at each end, and leave the body.
"""

from dataclasses import replace

from ..graph import Node, is_guard, op

# comparison -> the traced outcomes for which both ends decide every step between
_COMPARISONS = {"less": (True, False), "less_equal": (True, False), "greater": (True, False),
                "greater_equal": (True, False), "equal": (True,), "not_equal": (False,)}


def hoisted_bounds(graph, loop, rebuilt, pruned):
    """(graph, the new loop node) with each guard of the body on a comparison of values
    linear in t checked before the loop, at its first and last t; `rebuilt` and `pruned`:
    hoist._rebuilt and hoist._pruned."""
    body = loop.params["body"]
    inner, ts = body.graph, body.ts
    if body.exit or type(ts) is not range or not len(ts):
        return graph, loop
    t, start = inner.inputs[0], 1 + body.carries
    outer_of = dict(zip(inner.inputs[start:], loop.args[body.carries:]))
    checks = [n for n in inner.nodes if _bound(n, t, outer_of)]
    if not checks:
        return graph, loop
    made = []
    for guard in checks:
        for at in dict.fromkeys((ts[0], ts[-1])):
            values = {t: at, **outer_of}
            test = _at(guard.args[0], values, graph, made)
            made.append(graph.new_node(guard.prim, (test,), like=guard, params=guard.params))
    kept = pruned(replace(inner, nodes=[n for n in inner.nodes if n not in checks]))
    return rebuilt(graph, loop, replace(body, graph=kept), list(loop.args), made, {})


def _bound(node, t, outer_of):
    """A guard of a comparison whose two sides are integers linear in t, and which its
    outcome at the loop's two ends decides at every step."""
    if not is_guard(node) or node.params.get("exit") or node.params.get("test") != "bool" \
            or len(node.args) != 1 \
            or node.params.get("outcome") not in _COMPARISONS.get(op(node.args[0]), ()):
        return False
    degrees = [_degree(a, t, outer_of) for a in node.args[0].args]
    return len(degrees) == 2 and None not in degrees


def _degree(value, t, outer_of):
    """0 for an invariant integer, 1 for an integer linear in t, None for anything else."""
    if value is t:
        return 1
    if type(value) is not Node:
        return 0 if type(value) is int else None
    if value.dtype.kind not in "iu" or value.shape != ():
        return None
    if value in outer_of:
        return 0
    name = op(value)
    if name not in ("add", "subtract", "multiply", "negative"):
        return None
    degrees = [_degree(a, t, outer_of) for a in value.args]
    if None in degrees:
        return None
    total = sum(degrees) if name == "multiply" else max(degrees)
    return total if total <= 1 else None


def _at(value, values, graph, made):
    """`value` computed outside the loop at one t: its nodes copied, t a number."""
    if type(value) is not Node:
        return value
    if value in values:
        return values[value]
    args = tuple(_at(a, values, graph, made) for a in value.args)
    node = graph.new_node(value.prim, args, like=value, params=value.params,
                          python_number=value.python_number)
    made.append(node)
    values[value] = node
    return node
