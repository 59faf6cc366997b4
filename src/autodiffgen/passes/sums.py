"""Full reductions taken apart where the array they reduce is made for them alone.

`(np.logaddexp(0, z) - y * z).mean()` writes two full-size arrays (y * z, then the
difference) that only the mean reads; a careful person writes `(sp.sum() - y @ z) / n`,
which reads what exists and writes nothing. The same for the end of a chain,
`(o * 0.5 + n).sum()`, which is `0.5 * o.sum() + n.sum()`. The rewrites, for a sum or
mean over every axis (no dtype= given) of a value nothing else reads:

    sum(a + b),  sum(a - b)      ->  sum(a) + sum(b),  sum(a) - sum(b)   a, b of its shape,
                                                                         not sums themselves
    sum(x * c),  sum(x / c)      ->  sum(x) * c,  sum(x) / c             c a number,
    sum(-x)                      ->  -sum(x)                             x none of these
    sum(x * y)                   ->  x @ y                               1-D float64
    mean(...)                    ->  the same with means; mean(x * y) is (x @ y) / len(x)

and the sum over some axes of a scatter into zeros is the values scattered into the
sum's shape, or the values themselves at (np.arange(n), j), one value per row
(`_row_values`: a log-softmax's backward of a cross-entropy's pick).

The value is the same sum in another order (a few ulps; a value a guard reads is left as
traced, rewrite.guard_reads). The dot product is used for float64 only: BLAS accumulates
a float32 dot in float32 without np.sum's pairwise summation, less accurately. A
number's dtype must not change the array's (float32 * a float64 scalar is float64): the
reduction stays in the precision it had.
"""

import numpy as np

from ..graph import Index, Node, Slot, op, users_of
from ..rules import PRIMITIVES
from .rewrite import clone, guard_reads, substitute
from .weighted_sums import through_factor

_REDUCTIONS = ("sum", "mean")


def sums(graph):
    reductions = [n for n in graph.nodes if op(n) in _REDUCTIONS and n.dtype.kind in "fc"]
    if not reductions:
        return graph, False
    users = users_of(graph.nodes)
    opaque = set(graph.inputs) | guard_reads(graph)
    replace = {}
    for node in reductions:
        x = node.args[0]
        rows = _row_values(node, x) if op(x) == "scatter_add" and node not in opaque else None
        if rows is not None:
            replace[node] = rows
            continue
        if node in opaque or type(x) is not Node or x in opaque or x.prim is None \
                or users.get(x) != [node]:
            continue
        better = _apart(node, x, users) if _whole(node, x) else _factored(node, x)
        if better is not None:
            replace[node] = better
    return substitute(graph, replace)


def _row_values(node, x):
    """A sum over some axes of a scatter into zeros, from its values alone.

    The backward of `log_probs[np.arange(n), y]` is a scatter of the cotangent at
    (arange(n), y), and a log-softmax's backward sums it per row (`g - softmax * sum(g)`).
    For an index of integers and integer arrays, one per axis, the sum over the axes
    is the values scattered at the index of the axes kept: with one axis kept indexed by
    np.arange over it (each row holds exactly one value), the values themselves, else
    a scatter into the sum's shape (np.add.at: rows may repeat), as small as the index."""
    v = x.args[0]
    index, shape = x.params["index"].items, x.params["shape"]
    axes = _axes(node.params.get("axis"), len(shape))
    if op(node) != "sum" or axes is None or len(index) != len(shape) \
            or node.params.get("dtype") is not None or node.dtype != x.dtype \
            or (v.dtype if type(v) is Node else np.asarray(v).dtype) != node.dtype \
            or any(type(i) is not int and (type(i) is not Slot or _kind(x.args[i.k]) not in "iu")
                   for i in index):
        return None
    kept = [k for k in range(len(shape)) if k not in axes]
    slots = [index[k] for k in kept if type(index[k]) is Slot]
    if not kept or not _shape(v) == _index_shape(x, slots) == _index_shape(x, index):
        return None  # (each value at its own element: the axes summed add no dimension)
    if len(kept) == 1 and slots and _counts(x.args[slots[0].k], shape[kept[0]]):
        return v if node.shape == _shape(v) else \
            node.derived(PRIMITIVES["reshape"], (v,), {"shape": node.shape})
    keep = node.params.get("keepdims")
    items = [index[k] if k in kept else 0 for k in range(len(shape)) if keep or k in kept]
    arrays = [x.args[i.k] for i in slots]
    renumbered = Index(Slot(slots.index(i) + 1) if type(i) is Slot else i for i in items)
    return node.derived(PRIMITIVES["scatter_add"], (v, *arrays),
                        {"index": renumbered, "shape": node.shape, "unique": False})


def _counts(rows, n):
    """rows is np.arange(n)."""
    return type(rows) is np.ndarray and rows.shape == (n,) and rows.dtype.kind in "iu" \
        and np.array_equal(rows, np.arange(n))


def _axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    return tuple(a % ndim for a in axes) if all(-ndim <= a < ndim for a in axes) else None


def _index_shape(x, items):
    return np.broadcast_shapes(*[_shape(x.args[i.k]) for i in items if type(i) is Slot])


def _shape(a):
    return a.shape if type(a) is Node else np.shape(a)


def _kind(a):
    return a.dtype.kind if type(a) is Node else np.asarray(a).dtype.kind


def _whole(node, x):
    """node reduces every axis of x, in x's own dtype."""
    axis = node.params.get("axis")
    axes = range(len(x.shape)) if axis is None else \
        [a % len(x.shape) for a in ((axis,) if type(axis) is int else axis)]
    return node.params.get("dtype") is None and set(axes) == set(range(len(x.shape))) \
        and x.dtype == node.dtype


def _apart(node, x, users):
    name = op(x)
    if name in ("add", "subtract"):
        a, b = x.args
        if _same(a, x) and _same(b, x) and not (_sum(a, users) or _sum(b, users)):
            return clone(node, (_reduce(node, a), _reduce(node, b)), x.prim, {})
    elif name in ("multiply", "divide"):
        a, b = x.args
        for inner, c in ((a, b), (b, a)) if name == "multiply" else ((a, b),):
            if _same(inner, x) and _number(c) and np.result_type(inner.dtype, c) == x.dtype \
                    and not _splits(inner, users):
                args = (_reduce(node, inner), c) if inner is a else (c, _reduce(node, inner))
                return clone(node, args, x.prim, {})
        if name == "multiply" and _dot(node, x):
            return _dotted(node, a, b)
        if name == "multiply":
            return through_factor(node, x, users)
    elif name == "negative" and _same(x.args[0], x) and not _splits(x.args[0], users):
        return clone(node, (_reduce(node, x.args[0]),), x.prim, {})
    return None


def _factored(node, x):
    """A reduction over some axes of a negation, or of a product or quotient by a value
    that is the same along those axes (a batch norm's `sum(-(g * x_hat) / std, axis=0)`
    with std one per column): the reduction first, then the negation or the factor, on
    the small result (`-sum(g * x_hat, axis=0) / std`): one full-size pass fewer."""
    axes = _axes(node.params.get("axis"), len(x.shape))
    if axes is None or node.params.get("dtype") is not None or x.dtype != node.dtype:
        return None
    name = op(x)
    if name == "negative" and _same(x.args[0], x):
        return clone(node, (_reduce(node, x.args[0]),), x.prim, {})
    if name not in ("multiply", "divide"):
        return None
    a, b = x.args
    for inner, c in ((a, b), (b, a)) if name == "multiply" else ((a, b),):
        if _same(inner, x) and _constant_along(c, x, axes, node):
            args = (_reduce(node, inner), c) if inner is a else (c, _reduce(node, inner))
            return clone(node, args, x.prim, {})
    return None


def _constant_along(c, x, axes, node):
    """c (broadcast against x) takes one value along `axes`, and broadcasts against the
    reduction's result as it did against x, to the result's shape and dtype."""
    shape = _shape(c)
    padded = (1,) * (len(x.shape) - len(shape)) + tuple(shape)
    if len(shape) > len(x.shape) or any(padded[k] != 1 for k in axes):
        return False
    kept = padded if node.params.get("keepdims") else \
        tuple(d for k, d in enumerate(padded) if k not in axes)
    if _without_ones(kept) != _without_ones(shape):  # (c itself must line up with it)
        return False
    kind = c.dtype if type(c) is Node else c
    return np.broadcast_shapes(node.shape, shape) == node.shape \
        and np.result_type(x.dtype, kind) == x.dtype


def _without_ones(shape):
    """shape without its leading 1s (broadcasting adds them where needed)."""
    shape = tuple(shape)
    while shape and shape[0] == 1:
        shape = shape[1:]
    return shape


def _sum(a, users):
    """a is itself a sum made for this reduction alone: a tree of adds (y + x*c repeated)
    is left to the adds, not turned into one reduction per term."""
    return op(a) in ("add", "subtract") and len(users.get(a, ())) == 1


def _splits(a, users):
    """a's reduction would be taken apart again (a sum, a scaled or negated value made for
    it alone): a number's factor is taken out of a reduction only above a value that
    stays whole, so that `(x * 1.0001) * 1.0001 ...` is not one reduction per round."""
    return len(users.get(a, ())) == 1 and (_sum(a, users) or op(a) == "negative" or op(a) in (
        "multiply", "divide") and any(_number(c) for c in a.args))


def _same(a, x):
    return type(a) is Node and a.shape == x.shape and a.dtype == x.dtype


def _number(c):
    return type(c) in (int, float) or isinstance(c, np.generic) and c.dtype.kind in "fiu"


def _reduce(node, a):
    """node's reduction of a: a new node in node's place."""
    return node.derived(node.prim, (a,), node.params)


def _dot(node, x):
    a, b = x.args
    return _same(a, x) and _same(b, x) and len(x.shape) == 1 and x.dtype == np.float64 \
        and not node.params.get("keepdims")


def _dotted(node, a, b):
    """a @ b for sum(a * b), (a @ b) / len(a) for mean(a * b)."""
    if op(node) == "sum":
        return clone(node, (a, b), PRIMITIVES["matmul"], {})
    dot = node.derived(PRIMITIVES["matmul"], (a, b), shape=())
    return clone(node, (dot, a.shape[0]), PRIMITIVES["divide"], {})
