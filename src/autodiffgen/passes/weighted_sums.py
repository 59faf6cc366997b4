"""A whole sum of a product by a factor spread along some axes: the factor after a sum
over those axes (passes/sums.py calls it for `np.sum(p * d)`).

A layer's loss as a gradient check writes it, `np.sum((gamma * x_hat + beta) * dout)`,
makes three full-size arrays (the scaled, the shifted, the product) to sum them once;
with gamma and beta one per column, it is `gamma @ np.sum(x_hat * dout, axis=0) +
beta @ np.sum(dout, axis=0)`, and the backward computes both column sums anyway (they
are gamma's and beta's gradients: cse keeps one of each). The rewrites, for a sum over
every axis (no dtype=, no keepdims) of a product made for it alone, in one dtype:

    sum(c * d)          ->  sum(c * sum(d, axis=A))        c spread along the axes A of d
                            c * sum(d)                     c 0-d
    sum((a * c) * d)    ->  sum(c * (a * d))               (then the first)
    sum((a + b) * d)    ->  sum(a * d) + sum(b * d)        a or b spread, or a product by
                                                           a factor spread (then the others)

The value is the same sum in another order (a few ulps, as sums.py's).
"""

from ..graph import Node, op
from ..rules import PRIMITIVES


def through_factor(node, x, users):
    """node (a whole sum of x = p * d) rewritten, or None."""
    if op(node) != "sum" or node.params.get("keepdims") or node.params.get("dtype") is not None:
        return None
    for p, d in (x.args, x.args[::-1]):
        if not (_node_like(p, x) and _node_like(d, x) and d.shape == x.shape):
            continue
        axes = spread_axes(p.shape, x.shape)
        if axes:
            return _factor_last(node, p, d, axes)
        if users.get(p) != [x]:
            continue
        if op(p) == "multiply":
            for a, c in (p.args, p.args[::-1]):
                if _node_like(a, x) and a.shape == x.shape and _node_like(c, x) \
                        and spread_axes(c.shape, x.shape):
                    inner = x.derived(PRIMITIVES["multiply"], (a, d))
                    return node.replace(args=(x.derived(PRIMITIVES["multiply"], (c, inner)),))
        if op(p) == "add" and all(_node_like(v, x) for v in p.args) \
                and any(_spread(v, x) for v in p.args):
            parts = [node.derived(node.prim, (x.derived(PRIMITIVES["multiply"], (v, d)),),
                                  node.params) for v in p.args]
            return node.derived(PRIMITIVES["add"], tuple(parts))
    return None


def spread_axes(small, shape):
    """The axes along which an array of shape `small` is spread to `shape` by
    broadcasting (() if none), or None if it does not broadcast to it."""
    if len(small) > len(shape):
        return None
    padded = (1,) * (len(shape) - len(small)) + tuple(small)
    if not all(p == s or p == 1 for p, s in zip(padded, shape)):
        return None
    return tuple(k for k, (p, s) in enumerate(zip(padded, shape)) if p == 1 and s != 1)


def _factor_last(node, c, d, axes):
    """sum(c * sum(d, axis=axes)), when c lines up with the inner sum's shape (its
    leading spread axes dropped); else None."""
    padded = (1,) * (len(d.shape) - len(c.shape)) + tuple(c.shape)
    kept = tuple(s for k, s in enumerate(padded) if k not in axes)
    if _without_ones(kept) != _without_ones(c.shape):
        return None
    reduced = tuple(s for k, s in enumerate(d.shape) if k not in axes)
    if not reduced:  # c a 0-d array, spread along every axis: c * sum(d)
        if c.shape:
            return None
        return node.derived(PRIMITIVES["multiply"], (c, node.replace(args=(d,))))
    axis = axes[0] if len(axes) == 1 else axes  # (as a rule writes it: cse finds it)
    inner = node.derived(node.prim, (d,), {**node.params, "axis": axis}, shape=reduced)
    both = (1,) * (len(c.shape) - len(reduced)) + reduced  # (c's own leading 1s)
    return node.replace(args=(node.derived(PRIMITIVES["multiply"], (c, inner), shape=both),))


def _spread(v, x):
    """v is spread along some axes of x, or a product by a factor that is."""
    return bool(spread_axes(v.shape, x.shape)) or op(v) == "multiply" and any(
        _node_like(w, x) and spread_axes(w.shape, x.shape) for w in v.args)


def _node_like(v, x):
    return type(v) is Node and v.dtype == x.dtype


def _without_ones(shape):
    shape = tuple(shape)
    while shape and shape[0] == 1:
        shape = shape[1:]
    return shape
