"""A chain of additions and multiplications by numbers on one array, as one shift and
one scale.

tanh's derivative scaled and shifted, `(1 - o*o) * 0.5 + 1`, is three full-size passes
over `o*o` where `(o*o - 3) * -0.5` is two. Each step of such a chain (x + c, x - c,
c - x, x * c, -x, for a number c, the intermediate values read by the next step alone)
is `u * a + b` with a and b numbers; the chain is written as the one or two operations
that form needs, `(u + b/a) * a` (the shift first: see `_cost`), when that is fewer than
it has.

The numbers are combined as the code would combine them (a float32 scalar stays one), and
only numbers that are constants: this runs after generalization (pipeline.finish), where
a size's formula is a size_formulas symbol, never folded into another number (whose
product need not fit a formula). The values are the same up to rounding: `(1 - u) * 0.5`
is rounded twice, `u * -0.5 + 0.5` too, not at the same places. Values a guard reads and
the graph's inputs are left as they are (rewrite.guard_reads).
"""

import numpy as np

from ..graph import Node, op, users_of
from ..rules import PRIMITIVES
from .dce import dce
from .rewrite import clone, guard_reads, substitute

_STEPS = ("add", "subtract", "multiply", "negative")


def affine(graph):
    chains = [n for n in graph.nodes if op(n) in _STEPS and n.dtype.kind == "f" and n.shape]
    if not chains:
        return graph, False
    users, opaque = users_of(graph.nodes), set(graph.inputs) | guard_reads(graph)
    forms, absorbed = {}, set()  # node -> (u, a, b, steps); the nodes a later step extends
    for node in chains:  # in order: a step's operand has its form already
        if node not in opaque:
            with np.errstate(all="ignore"):  # a product that overflows: _cost refuses it
                form = _form(node, users, opaque, forms)
            if form is not None:
                forms[node] = form
                x = _step(node)[0]
                if x in forms and users.get(x) == [node]:
                    absorbed.add(x)
    replace = {}
    for node, (u, a, b, steps) in forms.items():
        if node in absorbed or steps <= _cost(a, b, node.dtype) \
                or np.result_type(u.dtype, a, b) != node.dtype:
            continue
        replace[node] = _written(node, u, a, b)
    graph, changed = substitute(graph, replace)
    return (dce(graph)[0] if changed else graph), changed


def _number(c):
    return type(c) in (int, float) or isinstance(c, np.floating)


def _step(node):
    """(x, c) for a step x op c (c None for -x), or None."""
    name = op(node)
    if name == "negative":
        x = node.args[0]
        return (x, None) if type(x) is Node else None
    if name not in _STEPS or len(node.args) != 2:
        return None
    nodes = [a for a in node.args if type(a) is Node]
    numbers = [a for a in node.args if _number(a)]
    if len(nodes) != 1 or len(numbers) != 1:
        return None
    return nodes[0], numbers[0]


def _form(node, users, opaque, forms):
    """(u, a, b, steps): node is u * a + b, computed in `steps` steps."""
    step = _step(node)
    if step is None:
        return None
    x, c = step
    if x.shape != node.shape or x.dtype != node.dtype:
        return None
    inner = forms.get(x) if users.get(x) == [node] else None
    u, a, b, steps = inner if inner is not None else (x, 1, 0, 0)
    name = op(node)
    if name == "negative":
        return u, -a, -b, steps + 1
    if name == "multiply":
        return u, a * c, b * c, steps + 1
    if name == "add":
        return u, a, b + c, steps + 1
    if node.args[0] is x:  # x - c
        return u, a, b - c, steps + 1
    return u, -a, c - b, steps + 1  # c - x


def _cost(a, b, dtype):
    """The steps `u * a + b` takes, written shift first: (u + b/a) * a. A difference that
    cancels (1 - t*t at a saturated tanh) must be taken before the scaling, where it is
    exact, not after it (t*t * -k + k loses the digits); so b/a must be exact in the
    array's dtype, or the chain is left as it is."""
    if a == 0 or not (np.isfinite(a) and np.isfinite(b)):
        return _NEVER  # u * 0 is nan at an inf: kept as written
    if b == 0:
        return int(a != 1)  # u * a, -u
    if a in (1, -1):
        return 1  # u + b, b - u
    with np.errstate(all="ignore"):
        shift = b / a
        exact = shift * a == b and float(dtype.type(shift)) == float(shift)
    return 2 if exact else _NEVER


_NEVER = 1 << 30


def _written(node, u, a, b):
    if b == 0:
        if a == -1:
            return clone(node, (u,), PRIMITIVES["negative"], {})
        return clone(node, (u, a), PRIMITIVES["multiply"], {})
    if a == 1:
        return clone(node, (u, b), PRIMITIVES["add"], {})
    if a == -1:
        return clone(node, (b, u), PRIMITIVES["subtract"], {})
    shifted = node.derived(PRIMITIVES["add"], (u, b / a))
    return clone(node, (shifted, a), PRIMITIVES["multiply"], {})
