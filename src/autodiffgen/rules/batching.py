"""Batching rules: each primitive applied to a batch of examples at once (batched.py).

A rule is `rule(ctx, *args, **params)`: the arguments `ctx.batched` marks hold a batch of
examples on their axis 0, the others are shared by every example; it returns the batch
of results, batch on axis 0, by applying primitives (so on Boxes it records them, and the
generated code is vectorized NumPy with no loop over the examples). `ctx.size` is the
batch size, `ctx.shape` the result's shape for one example, `ctx.ndims` each argument's
rank for one example, `ctx.examples` the arguments of one example (their shapes).

They are kept in BATCH_RULES, keyed by primitive. The rules are given by family, as data: elementwise primitives (broadcasting, once a
batched operand is brought to the result's rank), reductions and primitives with an axis
(the axis moves by one), stacked linear algebra (NumPy's own broadcasting over leading
axes), shapes, indexing and products one rule each.
"""

import string
import weakref

import numpy as np

from ..graph import Index, Slot
from ..trace.dispatch import UFUNCS
from .registry import PRIMITIVES

BATCH_RULES = weakref.WeakKeyDictionary()  # primitive -> rule(ctx, *args, **params)


def defbatch(prim, rule):
    """Set (or replace) the batching rule of a primitive, `rule(ctx, *args, **params)`:
    the result for a batch of examples, computed with primitives on arguments whose batch
    is on axis 0 (those `ctx.batched` marks; the others are shared by every example);
    `ctx` also holds the batch `size` and the per-example `shape` of the result
    (the rules of the built-in primitives are below, family by family)."""
    BATCH_RULES[prim] = rule


class Context:
    """What a rule knows besides its arguments (see the module docstring)."""

    __slots__ = ("batched", "examples", "ndims", "prim", "shape", "size")

    def __init__(self, prim, size, batched, examples, shape):
        self.prim = prim
        self.size = size
        self.batched = tuple(batched)
        self.examples = examples
        self.ndims = tuple(np.ndim(e) for e in examples)
        self.shape = tuple(shape)


def _p(name):
    return PRIMITIVES[name]


def lift(x, ndim, rank):
    """A batched x of per-example rank `ndim` with axes of length one inserted after the
    batch, to per-example rank `rank`: it then broadcasts as one example would."""
    if rank <= ndim:
        return x
    return _p("expand_dims")(x, axis=tuple(range(1, 1 + rank - ndim)))


def spread(x, size):
    """A shared value as a batch: every example the same (a broadcast view)."""
    return _p("broadcast_to")(x, shape=(size, *np.shape(x)))


def _axis(axis, ndim):
    return axis % ndim if ndim else axis


def _shift(axis, ndim):
    """A per-example axis (an int or a tuple; negative counts from the end) past the batch."""
    if isinstance(axis, tuple):
        return tuple(_axis(a, ndim) + 1 for a in axis)
    return _axis(axis, ndim) + 1


def _flat(ctx, x):
    """x as (batch, elements of one example): for an axis None that flattens."""
    return _p("reshape")(x, shape=(ctx.size, int(np.size(ctx.examples[0]))))


def _moved(x, sources, destinations):
    """np.moveaxis as a transpose primitive (identity: x itself)."""
    order = [a for a in range(np.ndim(x)) if a not in sources]
    for dst, src in sorted(zip(destinations, sources)):
        order.insert(dst, src)
    return x if order == list(range(np.ndim(x))) else _p("transpose")(x, axes=tuple(order))


# ---- elementwise -----------------------------------------------------------------------------
def elementwise(ctx, *args, **params):
    """Broadcasting: each batched operand brought to the result's rank (after its batch),
    so that it lines up with the shared ones as one example did."""
    rank = len(ctx.shape)
    args = [lift(a, n, rank) if b else a for a, b, n in zip(args, ctx.batched, ctx.ndims)]
    return ctx.prim(*args, **params)


# primitives that are NumPy ufuncs, or elementwise like one, besides their parameters
_ELEMENTWISE_MORE = ("where", "clip", "round", "sinc", "nan_to_num", "astype", "copy",
                     "std_root", "stop_gradient", "real", "imag", "conj", "angle", "absolute",
                     "sign", "polygamma", "fabs", "heaviside", "zeros_like", "ones_like")


# ---- reductions and primitives with an axis ------------------------------------------------
def reduction(ctx, x, axis=None, **params):
    """sum, mean, max, min, prod, count_nonzero: the axis shifted past the batch (None:
    every axis of the example)."""
    n = ctx.ndims[0]
    axis = tuple(range(1, n + 1)) if axis is None else _shift(axis, n)
    return ctx.prim(x, axis=axis, **params)


def arg_reduction(ctx, x, axis=None, keepdims=False):
    """argmax, argmin: axis None indexes the flattened example."""
    if axis is not None:
        return ctx.prim(x, axis=_shift(axis, ctx.ndims[0]), keepdims=keepdims)
    found = ctx.prim(_flat(ctx, x), axis=1, keepdims=False)
    return _p("reshape")(found, shape=(ctx.size, *ctx.shape))


def along_axis(ctx, x, *rest, axis, **params):
    """cumsum, cumprod, argsort, argpartition, repeat: one axis (None: the flattened
    example, for those that allow it)."""
    if axis is None:
        return ctx.prim(_flat(ctx, x), *rest, axis=1, **params)
    return ctx.prim(x, *rest, axis=_shift(axis, ctx.ndims[0]), **params)


def along_axes(ctx, x, *rest, axes, **params):
    """The FFTs: a tuple of axes."""
    return ctx.prim(x, *rest, axes=_shift(tuple(axes), ctx.ndims[0]), **params)


def joined(ctx, *xs, axis):
    """concatenate, stack: shared operands repeated over the batch."""
    xs = [x if b else spread(x, ctx.size) for x, b in zip(xs, ctx.batched)]
    rank = ctx.ndims[0] + (ctx.prim.name == "stack")
    return ctx.prim(*xs, axis=_axis(axis, rank) + 1)


# ---- shapes ------------------------------------------------------------------------------
def reshape(ctx, x, shape):
    return ctx.prim(x, shape=(ctx.size, *ctx.shape))


def broadcast_to(ctx, x, shape):
    return ctx.prim(lift(x, ctx.ndims[0], len(ctx.shape)), shape=(ctx.size, *ctx.shape))


def transpose(ctx, x, axes):
    n = ctx.ndims[0]
    axes = range(n - 1, -1, -1) if axes is None else (_axis(a, n) for a in axes)
    return ctx.prim(x, axes=(0, *(a + 1 for a in axes)))


def squeeze(ctx, x, axis=None):
    if axis is None:
        axis = tuple(i for i, k in enumerate(np.shape(ctx.examples[0])) if k == 1)
    return ctx.prim(x, axis=_shift(axis, ctx.ndims[0]))


def expand_dims(ctx, x, axis):
    return ctx.prim(x, axis=_shift(axis, len(ctx.shape)))


def full_like(ctx, a, v, dtype):
    a = a if ctx.batched[0] else spread(a, ctx.size)
    v = lift(v, ctx.ndims[1], len(ctx.shape)) if ctx.batched[1] else v
    return ctx.prim(a, v, dtype=dtype)


def tile(ctx, x, reps):
    reps = tuple(reps) if isinstance(reps, (tuple, list)) else (reps,)
    rank = max(len(reps), ctx.ndims[0])
    return ctx.prim(lift(x, ctx.ndims[0], rank), reps=(1,) * (1 + rank - len(reps)) + reps)


def pad(ctx, x, pad_width, **params):
    if np.ndim(params.get("constant_values", 0)) != 0:
        raise _unsupported(ctx, "np.pad with constant_values per axis")
    return ctx.prim(x, pad_width=((0, 0), *pad_width), **params)


def matrices(ctx, x, **params):
    """triu, tril and np.linalg's functions of one matrix work on stacks of matrices."""
    if ctx.ndims[0] < 2:
        raise _unsupported(ctx, f"{ctx.prim.name} of a vector")
    return ctx.prim(x, **params)


# ---- products ----------------------------------------------------------------------------
def matmul(ctx, a, b):
    """NumPy's own broadcasting where it lines the batch up (a batch of vectors or of
    stacks times shared weights: as one matrix of rows, which BLAS multiplies at once,
    where NumPy would loop over the stack); otherwise vectors made matrices (as matmul
    does), operands brought to one rank, and the product of the stacks (a broadcast
    multiply where the contracted axis has length one: outer products), the vectors'
    axes dropped again."""
    (ra, rb), (ba, bb) = ctx.ndims, ctx.batched
    if ba and not bb and ra >= 2 and rb == 2:
        rows = _p("reshape")(a, shape=(-1, np.shape(a)[-1]))
        return _p("reshape")(ctx.prim(rows, b), shape=(ctx.size, *ctx.shape))
    if ba and not bb and (ra >= 2 or rb <= 2):
        return ctx.prim(lift(a, ra, max(ra, rb)) if ra >= 2 else a, b)
    if bb and not ba and rb >= 2:
        return ctx.prim(a, lift(b, rb, max(ra, rb)))
    if bb and not ba and ra == 1:  # vector . vectors
        return ctx.prim(b, a)
    dropped = []
    if rb == 1:
        b, rb = _p("expand_dims")(b, axis=-1), 2
        dropped.append(-1)
    if ra == 1:
        a, ra = _p("expand_dims")(a, axis=-2), 2
        dropped.append(-2)
    rank = max(ra, rb)
    a, b = lift(a, ra, rank) if ba else a, lift(b, rb, rank) if bb else b
    out = _p("multiply")(a, b) if np.shape(a)[-1] == 1 and not dropped else ctx.prim(a, b)
    n = np.ndim(out)
    return _p("squeeze")(out, axis=tuple(sorted(n + d for d in dropped))) if dropped else out


def einsum(ctx, *operands, subscripts, **params):
    """One more index, the batch, on the batched operands and the result."""
    ins, _, out = subscripts.partition("->")
    letter = next(c for c in string.ascii_letters if c not in subscripts)
    terms = [letter + t if b else t for t, b in zip(ins.split(","), ctx.batched)]
    return ctx.prim(*operands, subscripts=",".join(terms) + "->" + letter + out, **params)


def solve(ctx, a, b):
    """np.linalg.solve of stacks: a vector b made a column, both operands brought to one
    rank (a shared one with leading axes of length one), the column dropped again."""
    (ra, rb), (ba, bb) = ctx.ndims, ctx.batched
    vector = rb == 1
    if vector:
        b, rb = _p("expand_dims")(b, axis=-1), 2
    rank = max(ra, rb)
    a = lift(a, ra, rank) if ba else _p("reshape")(a, shape=(1,) * (1 + rank - ra) + np.shape(a))
    b = lift(b, rb, rank) if bb else _p("reshape")(b, shape=(1,) * (1 + rank - rb) + np.shape(b))
    out = ctx.prim(a, b)
    return _p("squeeze")(out, axis=np.ndim(out) - 1) if vector else out


# ---- indexing ----------------------------------------------------------------------------
def _renumbered(item, by):
    if type(item) is Slot:
        return Slot(item.k + by)
    if type(item) is slice:
        return slice(*(Slot(b.k + by) if type(b) is Slot else b
                       for b in (item.start, item.stop, item.step)))
    return item


def _expanded(items, ndim, examples):
    """The index with its Ellipsis written out as slices (one example's rank `ndim`)."""
    if Ellipsis not in items:
        return list(items)
    used = sum(np.ndim(examples[i.k]) if type(i) is Slot and
               np.asarray(examples[i.k]).dtype == bool else 1
               for i in items if i is not None and i is not Ellipsis)
    at = items.index(Ellipsis)
    return list(items[:at]) + [slice(None)] * (ndim - used) + list(items[at + 1:])


def _advanced(items):
    """Positions of the advanced items (arrays, and ints beside arrays)."""
    arrays = any(type(i) is Slot for i in items)
    return [k for k, i in enumerate(items)
            if type(i) is Slot or (arrays and isinstance(i, (int, np.integer)))]


class Layout:
    """A batched index: the new index and arguments, and how the selection it makes is
    laid out against the per-example one (`to_batch`: its batch to the front, with the
    advanced axes where one example has them; `from_batch`: back)."""

    def __init__(self, ctx, x, arrays, index):
        """`x` the indexed array (argument 0), `arrays` the arguments the index's Slots
        name (from argument 1 on)."""
        batched, examples = ctx.batched, ctx.examples
        items = _expanded(index.items, np.ndim(examples[0]), examples)
        if any(batched[b.k] for i in items if type(i) is slice
               for b in (i.start, i.stop, i.step) if type(b) is Slot):
            raise _unsupported(ctx, "a slice whose bounds differ between examples")
        self.x = x if batched[0] else spread(x, ctx.size)
        slots = [i for i in items if type(i) is Slot]
        masks = [i for i in slots if np.asarray(examples[i.k]).dtype == bool]
        adv = _advanced(items)
        contiguous = not adv or adv == list(range(adv[0], adv[-1] + 1))
        if not any(batched[i.k] for i in slots):  # the batch is one more sliced axis
            self.args = list(arrays)
            self.index = Index((slice(None), *items))
            rank = len(np.broadcast_shapes(*[np.shape(np.nonzero(examples[i.k])[0])
                                             if i in masks else np.shape(examples[i.k])
                                             for i in slots]))
            self.moves = None if contiguous else ([rank], [0])  # advanced axes lead
            return
        if masks:
            raise _unsupported(ctx, "a boolean mask beside index arrays that differ between "
                                    "examples")
        # index arrays that differ between examples: the examples' numbers one more
        # advanced index, in front
        rank = max(np.ndim(examples[i.k]) for i in slots)
        self.args = [np.arange(ctx.size).reshape((ctx.size,) + (1,) * rank)] + [
            lift(a, np.ndim(examples[1 + j]), rank) if batched[1 + j] else a
            for j, a in enumerate(arrays)]
        self.index = Index((Slot(1), *(_renumbered(i, 1) for i in items)))
        self.moves = None
        if contiguous and adv[0] > 0:  # one example's advanced axes come after others
            before = sum(1 for i in items[:adv[0]] if type(i) is slice or i is None)
            self.moves = (list(range(1, rank + 1)), list(range(1 + before, 1 + before + rank)))

    def to_batch(self, selection):
        return selection if self.moves is None else _moved(selection, *self.moves)

    def from_batch(self, value):
        return value if self.moves is None else _moved(value, self.moves[1], self.moves[0])


def getitem(ctx, x, *arrays, index):
    layout = Layout(ctx, x, arrays, index)
    return layout.to_batch(ctx.prim(layout.x, *layout.args, index=layout.index))


def _selection(ctx, value, ndim, batched, shape):
    """A value broadcast to the batch of selections of one example's shape `shape`."""
    value = lift(value, ndim, len(shape)) if batched else value
    return _p("broadcast_to")(value, shape=(ctx.size, *shape))


def scatter_add(ctx, g, *arrays, index, shape, unique):
    layout = Layout(_with_first(ctx, np.zeros(shape)), g, arrays, index)
    picked = np.shape(np.zeros(shape)[index.fill([None, *ctx.examples[1:]])])
    g = layout.from_batch(_selection(ctx, g, ctx.ndims[0], ctx.batched[0], picked))
    return ctx.prim(g, *layout.args, index=layout.index, shape=(ctx.size, *shape),
                    unique=unique)


def setitem(ctx, x, v, *arrays, index):
    shifted = Index(_renumbered(i, -1) for i in index.items)
    sub = Context(ctx.prim, ctx.size, (ctx.batched[0], *ctx.batched[2:]),
                  (ctx.examples[0], *ctx.examples[2:]), ctx.shape)
    layout = Layout(sub, x, arrays, shifted)
    picked = np.shape(np.asarray(ctx.examples[0])[shifted.fill([None, *ctx.examples[2:]])])
    v = layout.from_batch(_selection(ctx, v, ctx.ndims[1], ctx.batched[1], picked))
    index = Index(_renumbered(i, 1) for i in layout.index.items)
    return ctx.prim(layout.x, v, *layout.args, index=index)


def add_at(ctx, x, v, *arrays, index, unique):
    """x + scatter_add(v, index): the scatter's rule, then the sum (x broadcasts when it
    is shared by the examples)."""
    sub = Context(_p("scatter_add"), ctx.size, ctx.batched[1:], ctx.examples[1:], ctx.shape)
    shifted = Index(_renumbered(i, -1) for i in index.items)
    scattered = scatter_add(sub, v, *arrays, index=shifted, shape=ctx.shape, unique=unique)
    return _p("add")(x, scattered)


def _with_first(ctx, example):
    """ctx with the first argument's example replaced (scatter_add: the array written)."""
    return Context(ctx.prim, ctx.size, (True, *ctx.batched[1:]), (example, *ctx.examples[1:]),
                   ctx.shape)


# ---- errors and the table ------------------------------------------------------------------
class Unbatchable(Exception):
    """A case of a primitive its rule does not batch (batched.py says where it was written)."""


def _unsupported(ctx, what):
    return Unbatchable(f"{ctx.prim.name}: {what} has no batching rule")


FAMILIES = {
    reduction: ("sum", "mean", "max", "min", "prod", "count_nonzero"),
    arg_reduction: ("argmax", "argmin"),
    along_axis: ("cumsum", "cumprod", "argsort", "argpartition", "repeat"),
    along_axes: ("fftn", "ifftn", "rfftn", "irfftn"),
    joined: ("concatenate", "stack"),
    matrices: ("triu", "tril", "inv", "det", "slogdet_sign", "logabsdet", "eigh_values",
               "eigh_vectors", "cholesky", "pinv", "svd_values", "svd_u", "svd_vh"),
    reshape: ("reshape",), broadcast_to: ("broadcast_to",), transpose: ("transpose",),
    squeeze: ("squeeze",), expand_dims: ("expand_dims",), full_like: ("full_like",),
    tile: ("tile",), pad: ("pad",), matmul: ("matmul",), einsum: ("einsum",),
    solve: ("solve",), getitem: ("getitem",), scatter_add: ("scatter_add",),
    setitem: ("setitem",), add_at: ("add_at",),
}


# the primitives without a batching rule, and why (docs/coverage.md lists them)
NO_BATCH_RULE = {
    "ones": "reads no array, so never a batched value",
    "guard": "a decision on one example's values; refused (layout checks are checked again)",
    "nonzero": "as many indices as each example's data says: no common shape",
    "flatnonzero": "as many indices as each example's data says: no common shape",
    "argwhere": "as many indices as each example's data says: no common shape",
    "unique": "as many values as each example's data says: no common shape",
    "bincount": "as many counts as each example's data says: no common shape",
    "eig_values": "whether the result is complex depends on each example's values",
    "eig_vectors": "whether the result is complex depends on each example's values",
    "draw": "a random draw per example would need a generator per example",
    "pydraw": "a random draw per example would need a generator per example",
    "default_rng": "a random draw per example would need a generator per example",
    "call": "a user's function called by odeint",
    "odeint": "scipy.integrate.odeint of one example",
    "solve_triangular": "scipy.linalg's function takes one matrix",
    "solve_banded": "scipy.linalg's function takes one matrix",
    "solve_sylvester": "scipy.linalg's function takes one matrix",
    "sqrtm": "scipy.linalg's function takes one matrix",
    "convolve": "scipy.signal's function convolves one pair",
}


def register():
    ufuncs = {p.name for p in UFUNCS.values() if p.op is not None} - {"matmul"}
    for name in sorted(ufuncs | set(_ELEMENTWISE_MORE)):
        if name in PRIMITIVES:
            defbatch(PRIMITIVES[name], elementwise)
    for rule, names in FAMILIES.items():
        for name in names:
            if name in PRIMITIVES:
                defbatch(PRIMITIVES[name], rule)


register()
