"""A power of two multiplied into a constant factor, once sizes are formulas.

The backward of `0.5 * sum(d * d) / n` is `(d + d) * (0.5/n)`: two full-size passes where
`d * (1/n)` is one. The optimizing passes cannot fold the two factors: a size's formula
(1/n, 2/count, the 1/(n - 1) of a sample variance) is found by comparing the graphs
traced at several sizes (generalize_batch.py, generalize_counts.py), and a folded product
can be exactly 1 at one of them (2/count at count 2), where `simplify` drops the multiply
and the graphs no longer match. So this runs after them, on the graph that is emitted,
where a factor is a number or already a formula (size_formulas.Scale):

    (x + x) * c,  (x * a) * c,  (x * c) * a   ->  x * (2 * c),  x * (a * c)

with a a power of two (a sign too) and c a number or a Scale in the batch size, or an
array x's shape broadcasts along some axis (a row: `g_var * (2 * centered)` of a batch
norm's backward is `centered * (g_var * 2)`, the factor scaled where it is small). Not in a
mask's count: a second derivative traces the generated gradient again, where the folded
`2/count` is one number again, 1 at count 2 (the batch's traces are at n and n - 1 and
check the low size by value). Multiplying by a power of
two is exact in floating point (2 * fl(k/n) is fl(2k/n), and stays so through a float32
cast), so the new factor is the product as the code would have computed it, and a
formula's is the same formula with its constant scaled (Scale(2k, ...)). The inner value
must be read by this product alone (else it is computed anyway), and the shape and dtype
stay. Values a guard reads are left as traced (rewrite.guard_reads); the inner values
left unread go (dce).
"""

import math

import numpy as np

from ..graph import Node, op, users_of
from ..graph.size_formulas import Scale, is_count_var
from .dce import dce
from .rewrite import clone, guard_reads, substitute


def exact_scales(graph):
    candidates = [n for n in graph.nodes if op(n) == "multiply" and n.dtype.kind in "fc"]
    if not candidates:
        return graph, False
    users, opaque = users_of(graph.nodes), set(graph.inputs) | guard_reads(graph)
    replace = {}
    for node in candidates:
        if node in opaque or node in replace:
            continue
        split = _factor(node) or _small_factor(node)
        if split is None or split[0] in opaque or split[0] in replace \
                or users.get(split[0]) != [node]:
            continue
        inner, c = split
        pair = _inner_factor(inner)
        if pair is None:
            continue
        x, a = pair
        if type(c) is Node:  # a smaller array: the power of two goes into it
            if _power_of_two(a) and type(x) is Node and x.shape == node.shape \
                    and np.result_type(c.dtype, a) == c.dtype and x.dtype == node.dtype:
                replace[node] = clone(node, (x, node.derived(node.prim, (c, a), shape=c.shape,
                                                             dtype=c.dtype)))
            continue
        scale = _product(a, c)
        if scale is None or type(x) is not Node or x.shape != node.shape \
                or x.dtype != node.dtype:
            continue
        if type(scale) is not Scale and np.result_type(x.dtype, scale) != node.dtype:
            continue
        replace[node] = clone(node, (x, scale))
    graph, changed = substitute(graph, replace)
    return (dce(graph)[0] if changed else graph), changed


def _factor(node):
    """(inner node, constant factor) of node = inner * c, or None."""
    nodes = [a for a in node.args if type(a) is Node]
    consts = [a for a in node.args if type(a) is not Node]
    if len(nodes) != 1 or len(consts) != 1 or not _constant(consts[0]):
        return None
    return nodes[0], consts[0]


def _small_factor(node):
    """(inner node, c) of node = inner * c with c an array that broadcasts to the
    inner's shape along some axis (a batch norm's `(1, d)` row times `2 * centered`):
    scaling c is cheaper than scaling the array, and as exact."""
    if len(node.args) != 2 or not all(type(a) is Node for a in node.args):
        return None
    for inner, c in (node.args, node.args[::-1]):
        if inner.shape == node.shape and _broadcast_along(c.shape, node.shape):
            return inner, c
    return None


def _broadcast_along(small, shape):
    """An array of shape `small` is spread along at least one axis of `shape`."""
    if len(small) > len(shape):
        return False
    padded = (1,) * (len(shape) - len(small)) + tuple(small)
    return all(p == d or p == 1 for p, d in zip(padded, shape)) \
        and any(p == 1 and d != 1 for p, d in zip(padded, shape))


def _inner_factor(inner):
    """(x, a) for inner = x + x (a = 2) or x * a, a a constant."""
    if op(inner) == "add" and inner.args[0] is inner.args[1]:
        return inner.args[0], 2
    if op(inner) == "multiply":
        return _factor(inner)
    return None


def _constant(c):
    return type(c) is Scale or type(c) in (int, float) \
        or isinstance(c, np.generic) and c.dtype.kind in "fi"


def _product(a, c):
    """a * c when one of them is a power of two (exactly), else None."""
    for p, q in ((a, c), (c, a)):
        if not _power_of_two(p):
            continue
        if type(q) is Scale and is_count_var(q.var):
            return None  # see the module docstring
        if type(q) is Scale:
            return _reduced(Scale(q.k * float(p), q.power, q.cast, q.var, q.m, q.b))
        return q * p
    return None


def _reduced(scale):
    """2k/(2n) as k/n: the same quotient, so the same rounded value."""
    k, m, b = scale.k, scale.m, scale.b
    while scale.power == -1 and m % 2 == 0 and b % 2 == 0 and m:
        k, m, b = k / 2, m // 2, b // 2
    return Scale(k, scale.power, scale.cast, scale.var, m, b)


def _power_of_two(c):
    """c is +-2**j, a plain number (not a formula): multiplying by it is exact."""
    if type(c) is Scale or not _constant(c) or type(c) is bool:
        return False
    value = float(c)
    return value != 0 and math.isfinite(value) and math.frexp(abs(value))[0] == 0.5
