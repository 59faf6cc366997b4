"""Constant factors: scalars for constant arrays, broadcasts applied late, signs folded.

The backward of `0.5 * sum(d * d) / n` arrives as the seed's constants folded into a
(1, 1, 1) array of 0.25/n times d; of `sum(0.5 * tanh(n))` as the seed broadcast to a
full array, then multiplied by 0.5 (an extra full-size pass and allocation); a cos's
rule as a negation that the add after it could have been a subtraction. The rewrites,
each exact in shape and dtype:

    c (an array, all elements equal) as an operand  ->  the NumPy scalar c.flat[0]
    op(broadcast_to(x, S), k, ...)                  ->  broadcast_to(op(x, k, ...), S)
    -(x * a),  (-x) * b                             ->  x * -a,  x * -b
    b + (-a),  b - (-a)                             ->  b - a,  b + a
    a * c + b * c,  a * c + b * -c                  ->  (a + b) * c,  (a - b) * c

for scalar constants a, b. The first keeps the result's dtype: a NumPy scalar is as
strong as an array in promotion, and generalize_batch fits it to a formula in n as it
fitted the array (a Python float, weak, would read better, but a float32 1/n held in
one would not fit, and the fuse pass writes Python floats into its expressions). The second
lets fold compute the op of a small constant once and the ufunc broadcast it; the
others do in one pass what took two. Two constant factors are not multiplied into one
((x * a) * b): one of them may be a batch size's 1/n, and their product need not fit
the formulas generalize_batch reads sizes with (2/(n - 1), 2/sqrt(k)). Values a guard
reads are left as traced (rewrite.guard_reads).
"""

import numpy as np

from ..graph import Node, op
from ..rules import PRIMITIVES, elementwise_ufunc
from .rewrite import clone, guard_reads, op_here, substitute, unchanged


def scalars(graph, examined=None):
    """`examined`: as simplify's, the nodes no rewrite applied to (not those a guard's
    read kept as they were: a guard may go). Right while each rewrite reads the node, its
    arguments and theirs alone, never its users."""
    guarded = None
    replace, opaque = {}, set(graph.inputs)
    for node in graph.nodes:
        if unchanged(node, examined, replace):
            continue
        if not elementwise_ufunc(node.prim) or node.prim.effect \
                or not node.shape or node.dtype.kind not in "fc":
            better = None
        else:
            args = [replace.get(a, a) if type(a) is Node else a for a in node.args]
            better = _rewrite(node, args, opaque)
        if better is None:
            if examined is not None:
                examined.add(node)
            continue
        guarded = guard_reads(graph) if guarded is None else guarded
        if node not in guarded:
            replace[node] = better
    return substitute(graph, replace)


def _rewrite(node, args, opaque):
    # most nodes at once: none of the rewrites below applies without one of these (an
    # array operand for _scalar, a broadcast one for _sink_broadcast, an op of _REWRITTEN)
    if op(node) not in _REWRITTEN and not any(
            type(a) is np.ndarray or type(a) is Node and op(a) == "broadcast_to" for a in args):
        return None
    new = [_scalar(a, node, args) for a in args]
    if any(a is not b for a, b in zip(new, args)):
        return clone(node, new)
    name = op(node)
    factor = _factor(node, args)
    if factor is not None:
        product = _product(node, *factor, opaque)
        if product is not None:
            return product
    if name in ("add", "subtract"):
        signed = _signed(node, args, opaque) or _common_factor(node, args, opaque)
        if signed is not None:
            return signed
    return _sink_broadcast(node, args, opaque)


_REWRITTEN = {"negative", "multiply", "add", "subtract"}  # what _factor and _signed look for


def _common_factor(node, args, opaque):
    """(a +- b) * c for a * c +- b * (+-c): one scaling where there were two."""
    scaled = [_factor(x, x.args) if op_here(x, opaque) == "multiply" else None for x in args]
    if None in scaled or args[0] is args[1]:  # x + x: as cheap as x * 2
        return None
    (a, c), (b, k) = scaled
    if type(a) is not Node or type(b) is not Node or a.dtype != b.dtype \
            or np.broadcast_shapes(a.shape, b.shape) != node.shape \
            or np.result_type(a.dtype, c) != node.dtype or not np.isfinite(c) or c == 0:
        return None
    plus = op(node) == "add"
    if k == c:
        name = "add" if plus else "subtract"
    elif k == -c:
        name = "subtract" if plus else "add"
    else:
        return None
    inner = node.derived(PRIMITIVES[name], (a, b), dtype=a.dtype)
    return clone(node, (inner, c), PRIMITIVES["multiply"], {})


def _signed(node, args, opaque):
    """b - a for b + (-a) and (-a) + b; b + a for b - (-a)."""
    a, b = args
    if op(node) == "subtract":
        if op_here(b, opaque) == "negative" and _keeps(node, a, b.args[0]):
            return clone(node, (a, b.args[0]), PRIMITIVES["add"], {})
        return None
    for x, y in ((b, a), (a, b)):
        if op_here(x, opaque) == "negative" and _keeps(node, y, x.args[0]):
            return clone(node, (y, x.args[0]), PRIMITIVES["subtract"], {})
    return None


def _keeps(node, a, b):
    """a and b, both arrays computed here, give node's shape and dtype."""
    return type(a) is Node and type(b) is Node and a.dtype == b.dtype == node.dtype \
        and np.broadcast_shapes(a.shape, b.shape) == node.shape


def _scalar(a, node, args):
    """The NumPy scalar for an all-equal constant array operand, if the result keeps
    node's shape without it (its dtype is kept: a NumPy scalar promotes as the array)."""
    if type(a) is not np.ndarray or a.size == 0 or a.dtype.kind not in "fciu" \
            or a.size > 1 and not (a == a.flat[0]).all():
        return a
    others = [np.shape(b) if type(b) is not Node else b.shape for b in args if b is not a]
    try:
        if np.broadcast_shapes(*others) != node.shape:
            return a
    except ValueError:
        return a
    return a.flat[0]


def _is_number(c):
    return type(c) in (int, float) or isinstance(c, np.generic) and c.dtype.kind in "fiu"


def _factor(node, args):
    """(inner, b) when node is inner * b, b a scalar constant (-inner: b = -1)."""
    name = op(node)
    if name == "negative":
        return args[0], -1
    if name == "multiply":
        consts = [a for a in args if _is_number(a)]
        nodes = [a for a in args if type(a) is Node]
        if len(consts) == 1 and len(nodes) == 1:
            return nodes[0], consts[0]
    return None


def _product(node, inner, factor, opaque):
    """x * -a for -(x * a), x * -b for (-x) * b: a and b scalar constants."""
    if type(inner) is not Node or inner in opaque or inner.shape != node.shape:
        return None
    if op(inner) == "negative":
        x, a = inner.args[0], -1
    elif op(inner) == "multiply":
        consts = [c for c in inner.args if _is_number(c)]
        xs = [c for c in inner.args if type(c) is Node]
        if len(consts) != 1 or len(xs) != 1:
            return None
        x, a = xs[0], consts[0]
    else:
        return None
    if factor == -1 and a == -1:
        return None  # --x: simplify's
    if not (_is_sign(a) or _is_sign(factor)):
        return None  # (x * a) * b: see the module docstring
    scale = a * factor
    if type(x) is not Node or x.shape != node.shape \
            or np.result_type(x.dtype, scale) != node.dtype:
        return None
    return clone(node, (x, scale), PRIMITIVES["multiply"], {})


def _is_sign(c):
    return type(c) is int and c in (1, -1)


def _sink_broadcast(node, args, opaque):
    """broadcast_to(op(x, k), S) for op(broadcast_to(x, S), k): k scalar constants."""
    nodes = [a for a in args if type(a) is Node]
    if len(nodes) != 1 or op(nodes[0]) != "broadcast_to" or nodes[0] in opaque \
            or nodes[0].shape != node.shape or nodes[0].dtype != node.dtype \
            or not all(_is_number(a) for a in args if type(a) is not Node):
        return None
    x = nodes[0].args[0]
    shape = x.shape if type(x) is Node else np.shape(x)
    if int(np.prod(shape)) * 4 > int(np.prod(node.shape)):
        return None  # not much smaller: no gain
    small = [x if a is nodes[0] else a for a in args]
    if np.result_type(*(a.dtype if type(a) is Node else a for a in small)) != node.dtype:
        return None
    inner = node.derived(node.prim, small, node.params, shape=shape)
    return clone(node, (inner,), PRIMITIVES["broadcast_to"], nodes[0].params)
