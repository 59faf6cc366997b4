"""Reductions, shape and assembly functions, and indexing: every rule against the tape and
central finite differences, in reverse and forward mode (issue 3).

Laid out like tests/rules/test_rules.py: one table, `CASES`, of a name, a function in plain
NumPy, a generator per argument and the argnums. Every row goes through `check_grads`
in float64, a subset again in float32, a subset through second derivatives, and every
row's generated source must pass `ruff check`. Functions end in `_s(z) = sum(sin(z))` so
that cotangents differ from element to element.
"""

from functools import partial

import numpy as np
import pytest
import tables
from graph_helpers import served_by_one_trace
from tables import axis_id, const, f64, normal, shape_id, signed, uniform
from tables import sum_sin as _s

import autodiffgen
from autodiffgen import tape
from autodiffgen.errors import UnsupportedOperationError

# ---- argument domains beyond the shared ones (tables.py): each is rng -> value ----------
# Narrower than tables' positive and nonzero, [0.5, 1.5]: products stay moderate, and
# nonzero's values (random signs) never near zero.
positive = partial(uniform, 0.5, 1.5)
nonzero = partial(signed, 0.5, 1.5)


def with_zeros(shape, *where):
    """nonzero(*shape) with exact zeros at the given flat positions."""
    def make(rng):
        x = nonzero(*shape)(rng)
        x.reshape(-1)[list(where)] = 0.0
        return x
    return make


CASES = []


def case(name, f, *args, argnums=0, **check):
    CASES.append(tables.Case(name, f, args, argnums, check))


# ---- reductions: prod, var, std over axes, with keepdims --------------------------------
_REDUCE_AXES = {(5,): [None, 0, -1],
                (3, 4): [None, 0, 1, -1, (0, 1)],
                (2, 3, 4): [None, 1, -1, (0, 2), (-1, 0)]}
for _shape, _axes in _REDUCE_AXES.items():
    for _axis in _axes:
        for _keep in (False, True):
            _id = f"{shape_id(_shape)}-axis{axis_id(_axis)}" + "-keepdims" * _keep
            case(f"prod-{_id}", lambda x, axis=_axis, keep=_keep:
                 _s(np.prod(x, axis=axis, keepdims=keep)), nonzero(*_shape))
            case(f"var-{_id}", lambda x, axis=_axis, keep=_keep:
                 _s(np.var(x, axis=axis, keepdims=keep)), normal(*_shape))
            case(f"std-ddof1-{_id}", lambda x, axis=_axis, keep=_keep:
                 _s(np.std(x, axis=axis, ddof=1, keepdims=keep)), normal(*_shape))
case("prod-0d", lambda x: _s(np.prod(x)), f64(nonzero()))
case("prod-method", lambda x: _s(x.prod(axis=1)), nonzero(3, 4))
case("prod-method-all", lambda x: _s(x.prod()), nonzero(2, 3))
case("np.multiply.reduce", lambda x: _s(np.multiply.reduce(x, axis=-1)), nonzero(3, 4))
case("prod-one-zero", lambda x: _s(np.prod(x, axis=1)), with_zeros((3, 4), 1))
case("prod-two-zeros", lambda x: _s(np.prod(x, axis=1)), with_zeros((3, 4), 1, 3))
case("prod-zeros-in-two-rows", lambda x: _s(np.prod(x, axis=0) * 3),
     with_zeros((3, 4), 0, 4, 2, 11))
case("prod-all-one-zero", lambda x: _s(np.prod(x) * 2), with_zeros((2, 3), 4))
case("prod-all-two-zeros", lambda x: _s(np.prod(x) * 2), with_zeros((2, 3), 0, 5))
case("var-ddof1", lambda x: _s(np.var(x, ddof=1)), normal(6))
case("var-correction", lambda x: _s(np.var(x, axis=0, correction=1)), normal(4, 3))
case("var-0d", lambda x: _s(np.var(x) + x), f64(normal()))
case("var-method", lambda x: _s(x.var(axis=-1, keepdims=True)), normal(2, 3, 4))
case("std-method", lambda x: _s(x.std(0)), normal(3, 4))
case("std-all", lambda x: _s(np.std(x)), normal(3, 4))

# ---- cumulative sums and products -------------------------------------------------------
for _shape, _axes in {(5,): [None, 0, -1], (3, 4): [None, 0, 1, -1],
                      (2, 3, 4): [None, 1, -1]}.items():
    for _axis in _axes:
        _id = f"{shape_id(_shape)}-axis{axis_id(_axis)}"
        case(f"cumsum-{_id}", lambda x, axis=_axis: _s(np.cumsum(x, axis=axis)), normal(*_shape))
        case(f"cumprod-{_id}", lambda x, axis=_axis: _s(np.cumprod(x, axis=axis)),
             nonzero(*_shape))
case("cumsum-0d", lambda x: _s(np.cumsum(x)), f64(normal()))
case("cumprod-0d", lambda x: _s(np.cumprod(x)), f64(nonzero()))
case("cumsum-method", lambda x: _s(x.cumsum(1)), normal(3, 4))
case("cumprod-method", lambda x: _s(x.cumprod(axis=0)), positive(3, 4))
case("cumprod-one-zero", lambda x: _s(np.cumprod(x)), with_zeros((5,), 2))
case("cumprod-two-zeros-axis1", lambda x: _s(np.cumprod(x, axis=1)), with_zeros((3, 4), 1, 3, 4))
case("cumprod-leading-zero", lambda x: _s(np.cumprod(x, axis=0)), with_zeros((3, 2), 0, 5))
case("cumsum-twice", lambda x: _s(np.cumsum(np.cumsum(x, 0), 1)), normal(3, 4))


# ---- average and a user's logsumexp -----------------------------------------------------
def logsumexp(x, axis=None):
    m = np.max(x, axis=axis, keepdims=True)
    return np.squeeze(m, axis=axis) + np.log(np.sum(np.exp(x - m), axis=axis))


case("average-no-weights", lambda x: _s(np.average(x)), normal(3, 4))
case("average-no-weights-axis", lambda x: _s(np.average(x, axis=1)), normal(3, 4))
case("average-weights-same-shape", lambda x, w: _s(np.average(x, axis=0, weights=w)),
     normal(3, 4), positive(3, 4), argnums=(0, 1))
case("average-weights-all", lambda x, w: _s(np.average(x, weights=w)), normal(3, 4),
     positive(3, 4), argnums=(0, 1))
case("average-weights-1d", lambda x, w: _s(np.average(x, axis=1, weights=w)), normal(3, 4),
     positive(4), argnums=(0, 1))
case("average-weights-1d-axis0-keepdims",
     lambda x, w: _s(np.average(x, axis=0, weights=w, keepdims=True)), normal(3, 4),
     positive(3), argnums=(0, 1))
case("average-weights-tuple-axis", lambda x, w: _s(np.average(x, axis=(0, 2), weights=w)),
     normal(2, 3, 4), positive(2, 4), argnums=(0, 1))
case("average-returned", lambda x, w: _s(np.average(x, axis=1, weights=w, returned=True)[0])
     + _s(np.average(x, axis=1, weights=w, returned=True)[1]), normal(3, 4), positive(4),
     argnums=(0, 1))
case("average-weights-constant", lambda x: _s(np.average(x, axis=-1, weights=np.arange(1.0, 5))),
     normal(2, 3, 4))
case("logsumexp-all", lambda x: _s(logsumexp(x)), normal(3, 4))
case("logsumexp-axis1", lambda x: _s(logsumexp(x, axis=1)), normal(3, 4))
case("logsumexp-axis0-3d", lambda x: _s(logsumexp(x, axis=0)), normal(2, 3, 4))

# ---- moveaxis, swapaxes, expand_dims, squeeze, atleast_nd -------------------------------
case("np.moveaxis", lambda x: _s(np.moveaxis(x, 0, -1)), normal(2, 3, 4))
case("np.moveaxis-negative", lambda x: _s(np.moveaxis(x, -1, 0)), normal(2, 3, 4))
case("np.moveaxis-tuple", lambda x: _s(np.moveaxis(x, (0, 1), (2, 0))), normal(2, 3, 4))
case("np.moveaxis-identity", lambda x: _s(np.moveaxis(x, 1, 1)), normal(3, 4))
case("swapaxes-method-3d", lambda x: _s(x.swapaxes(0, 2)), normal(2, 3, 4))
case("np.expand_dims-tuple-negative", lambda x: _s(np.expand_dims(x, (-1, 0))), normal(3, 4))
case("np.expand_dims-tuple-0d", lambda x: _s(np.expand_dims(x, (0, 1))), f64(normal()))
case("np.squeeze-tuple", lambda x: _s(np.squeeze(x, axis=(0, 2))), normal(1, 3, 1, 4))
case("squeeze-method-tuple-negative", lambda x: _s(x.squeeze((-1, 0))), normal(1, 3, 1))
for _fn, _n in [(np.atleast_1d, 1), (np.atleast_2d, 2), (np.atleast_3d, 3)]:
    for _shape in [(), (3,), (2, 3), (2, 3, 2)]:
        _gen = f64(normal()) if _shape == () else normal(*_shape)
        case(f"atleast_{_n}d-{shape_id(_shape)}",
             lambda x, fn=_fn: _s(fn(x) * np.arange(1.0, 1 + np.size(x)).reshape(
                 fn(np.zeros(np.shape(x))).shape)), _gen)
case("atleast_2d-two-arrays", lambda x, y: _s(np.atleast_2d(x, y)[0] * np.atleast_2d(x, y)[1].T),
     normal(3), normal(3, 1), argnums=(0, 1))

# ---- hstack, vstack, dstack, column_stack -----------------------------------------------
case("hstack-1d", lambda a, b: _s(np.hstack([a, b]) * np.arange(5.0)), normal(3), normal(2),
     argnums=(0, 1))
case("hstack-2d", lambda a, b: _s(np.hstack((a, b))), normal(3, 2), normal(3, 1), argnums=(0, 1))
case("hstack-0d", lambda a, b: _s(np.hstack([a, b, a])), f64(normal()), normal(2),
     argnums=(0, 1))
case("vstack-1d", lambda a, b: _s(np.vstack([a, b])), normal(3), normal(3), argnums=(0, 1))
case("vstack-2d-1d", lambda a, b: _s(np.vstack((a, b))), normal(2, 3), normal(3), argnums=(0, 1))
case("dstack-2d", lambda a, b: _s(np.dstack([a, b])), normal(2, 3), normal(2, 3), argnums=(0, 1))
case("dstack-1d", lambda a, b: _s(np.dstack([a, b * 2])), normal(3), normal(3), argnums=(0, 1))
case("column_stack", lambda a, b: _s(np.column_stack([a, b])), normal(3), normal(3, 2),
     argnums=(0, 1))

# ---- split and array_split: lists of traced pieces --------------------------------------
def _written_at_tuples(x):
    y = x * 1.0
    y[(0, 2), (1, 1)] = x[(1, 2), (0, 0)] ** 2
    return y


def _written_at_range(x):
    y = x * 1.0
    y[range(1, 3), 0] = x[range(2), 1] * 3.0
    return y


def _cross_entropy(p, y):
    """The classic p[range(N), y]: each row's probability of its label (issue 25)."""
    return -np.log(p[range(p.shape[0]), y]).mean()


def _weighted(pieces):
    return sum(_s(p * (i + 1)) for i, p in enumerate(pieces))


case("split-sections", lambda x: _weighted(np.split(x, 3)), normal(6, 2))
case("split-sections-axis1", lambda x: _weighted(np.split(x, 2, axis=1)), normal(3, 4))
case("split-indices", lambda x: _weighted(np.split(x, [1, 3])), normal(5))
case("split-indices-axis-neg", lambda x: _weighted(np.split(x, [2], axis=-1)), normal(2, 3, 4))
case("split-indices-past-end", lambda x: _weighted(np.split(x, [2, 7])[:2]), normal(5))
case("array_split-uneven", lambda x: _weighted(np.array_split(x, 3)), normal(7))
case("array_split-uneven-axis1", lambda x: _weighted(np.array_split(x, 3, axis=1)),
     normal(2, 5))
case("array_split-indices", lambda x: _weighted(np.array_split(x, [1, 2], axis=0)), normal(4, 2))
case("split-some-unused", lambda x: _s(np.split(x, 4)[2]), normal(8))

# ---- tile and repeat --------------------------------------------------------------------
case("tile-int", lambda x: _s(np.tile(x, 3)), normal(4))
case("tile-int-2d", lambda x: _s(np.tile(x, 2)), normal(2, 3))
case("tile-tuple", lambda x: _s(np.tile(x, (2, 3))), normal(2, 3))
case("tile-more-reps", lambda x: _s(np.tile(x, (2, 1, 2))), normal(2, 3))
case("tile-fewer-reps", lambda x: _s(np.tile(x, (2,))), normal(2, 3, 2))
case("tile-0d", lambda x: _s(np.tile(x, (2, 2))), f64(normal()))
case("tile-ones", lambda x: _s(np.tile(x, (1, 1))), normal(2, 3))
case("repeat-axis-none", lambda x: _s(np.repeat(x, 2)), normal(2, 3))
case("repeat-axis1", lambda x: _s(np.repeat(x, 3, axis=1)), normal(2, 3))
case("repeat-axis-negative", lambda x: _s(np.repeat(x, 2, axis=-1)), normal(2, 3, 2))
case("repeat-per-element", lambda x: _s(np.repeat(x, [2, 0, 1], axis=1)), normal(2, 3))
case("repeat-per-element-axis-none", lambda x: _s(np.repeat(x, [1, 2, 3, 0])), normal(2, 2))
case("repeat-0d", lambda x: _s(np.repeat(x, 3)), f64(normal()))
case("repeat-method", lambda x: _s(x.repeat(2, axis=0)), normal(2, 3))
case("repeat-method-array", lambda x: _s(x.repeat(np.array([3, 1]), 0)), normal(2, 3))

# ---- flip and roll ----------------------------------------------------------------------
case("flip-all", lambda x: _s(np.flip(x) * x), normal(3, 4))
case("flip-axis0", lambda x: _s(np.flip(x, 0) * x), normal(3, 4))
case("flip-axis-neg", lambda x: _s(np.flip(x, axis=-1) * x), normal(2, 3, 4))
case("flip-tuple", lambda x: _s(np.flip(x, (0, 2)) * x), normal(2, 3, 4))
case("flip-1d", lambda x: _s(np.flip(x) * x), normal(5))
case("flip-0d", lambda x: _s(np.flip(x) * x), f64(normal()))
case("fliplr", lambda x: _s(np.fliplr(x) * x), normal(3, 4))
case("flipud", lambda x: _s(np.flipud(x) * x), normal(3, 4))
case("roll-axis-none", lambda x: _s(np.roll(x, 2) * x), normal(3, 4))
case("roll-1d", lambda x: _s(np.roll(x, -1) * x), normal(5))
case("roll-axis1", lambda x: _s(np.roll(x, 1, axis=1) * x), normal(3, 4))
case("roll-large-shift", lambda x: _s(np.roll(x, 9, axis=0) * x), normal(4, 3))
case("roll-zero-shift", lambda x: _s(np.roll(x, 4, axis=1) * x), normal(3, 4))
case("roll-tuple", lambda x: _s(np.roll(x, (1, -2), axis=(0, 2)) * x), normal(2, 3, 4))
case("roll-same-axis-twice", lambda x: _s(np.roll(x, (1, 1), axis=(1, 1)) * x), normal(2, 4))
case("roll-int-shift-tuple-axis", lambda x: _s(np.roll(x, 1, axis=(0, 1)) * x), normal(3, 4))

# ---- pad --------------------------------------------------------------------------------
case("pad-int", lambda x: _s(np.pad(x, 1) + 0.5), normal(2, 3))
case("pad-pair", lambda x: _s(np.pad(x, (2, 1))), normal(4))
case("pad-per-axis", lambda x: _s(np.pad(x, ((1, 0), (0, 2)))), normal(2, 3))
case("pad-constant", lambda x: _s(np.pad(x, ((0, 1), (2, 1)), constant_values=1.5)),
     normal(2, 3))
case("pad-constant-np-scalar", lambda x: _s(np.pad(x, 1, mode="constant",
                                                   constant_values=np.float64(-2.0))), normal(3))
case("pad-3d", lambda x: _s(np.pad(x, ((0, 0), (1, 1), (2, 0)))), normal(2, 2, 3))

# ---- triangles, diagonals, trace --------------------------------------------------------
for _k in (0, 1, -1):
    case(f"triu-k{_k}", lambda x, k=_k: _s(np.triu(x, k)), normal(3, 4))
    case(f"tril-k{_k}", lambda x, k=_k: _s(np.tril(x, k=k)), normal(4, 3))
case("triu-batched", lambda x: _s(np.triu(x)), normal(2, 3, 3))
case("tril-batched-k2", lambda x: _s(np.tril(x, 2)), normal(2, 3, 4))
for _k in (0, 1, -2):
    case(f"diag-1d-k{_k}", lambda x, k=_k: _s(np.diag(x, k) + 1), normal(3))
for _k in (0, 1, -1, 3):
    case(f"diag-2d-k{_k}", lambda x, k=_k: _s(np.diag(x, k)), normal(3, 4))
case("diag-of-diag", lambda x: _s(np.diag(np.diag(x)) * 2), normal(3, 3))
case("diagonal-2d", lambda x: _s(np.diagonal(x)), normal(3, 4))
case("diagonal-offset", lambda x: _s(np.diagonal(x, 1)), normal(4, 3))
case("diagonal-negative-offset", lambda x: _s(np.diagonal(x, offset=-2)), normal(4, 3))
case("diagonal-3d-axes", lambda x: _s(np.diagonal(x, 0, 1, 2)), normal(2, 3, 4))
case("diagonal-3d-swapped", lambda x: _s(np.diagonal(x, 1, axis1=2, axis2=0)), normal(3, 2, 4))
case("diagonal-method", lambda x: _s(x.diagonal(-1)), normal(3, 3))
case("trace-2d", lambda x: np.sin(np.trace(x)), normal(3, 4))
case("trace-offset", lambda x: np.sin(np.trace(x, 1)), normal(3, 3))
case("trace-3d", lambda x: _s(np.trace(x, axis1=1, axis2=2)), normal(2, 3, 3))
case("trace-method", lambda x: np.sin(x.trace(offset=-1)), normal(3, 3))

# ---- take and take_along_axis -----------------------------------------------------------
case("take-axis-none", lambda x: _s(np.take(x, [0, 5, 2])), normal(2, 3))
case("take-axis1", lambda x: _s(np.take(x, np.array([2, 0]), axis=1)), normal(3, 4))
case("take-repeated", lambda x: _s(np.take(x, [1, 1, 0, 1], axis=0)), normal(3, 2))
case("take-negative", lambda x: _s(np.take(x, [-1, 2], axis=-1)), normal(2, 3))
case("take-scalar-index", lambda x: _s(np.take(x, 1, axis=1)), normal(3, 4))
case("take-2d-indices", lambda x: _s(np.take(x, [[0, 1], [1, 1]])), normal(3))
case("take-method", lambda x: _s(x.take([2, 2, 0])), normal(4))
case("take-index-argument", lambda x, i: _s(np.take(x, i, axis=0)), normal(4, 2),
     const(np.array([3, 0, 3])))
case("take_along_axis-1", lambda x: _s(np.take_along_axis(
    x, np.array([[0, 0], [3, 1], [2, 2]]), axis=1)), normal(3, 4))
case("take_along_axis-0", lambda x: _s(np.take_along_axis(
    x, np.array([[2, 0, 1, 1]]), axis=0)), normal(3, 4))
case("take_along_axis-neg-3d", lambda x: _s(np.take_along_axis(
    x, np.array([[[1], [0], [1]]]), axis=-1)), normal(2, 3, 2))
case("take_along_axis-none", lambda x: _s(np.take_along_axis(x, np.array([4, 4, 0]), None)),
     normal(2, 3))
case("take_along_axis-argsort-constant", lambda x, i: _s(np.take_along_axis(x, i, axis=1)),
     normal(3, 4), lambda rng: np.argsort(rng.standard_normal((3, 4)), axis=1))

# ---- median, unique, bincount, searchsorted (issue 25) -----------------------------------
case("median-odd", lambda x: np.sin(np.median(x)), normal(5))
case("median-even", lambda x: np.sin(np.median(x)), normal(6))
case("median-axis0", lambda x: _s(np.median(x, axis=0)), normal(4, 3))
case("median-axis-1-keepdims", lambda x: _s(x * np.median(x, axis=-1, keepdims=True)),
     normal(3, 5))
case("median-axes-tuple", lambda x: _s(np.median(x, axis=(0, 2))), normal(2, 3, 2))
case("median-none-keepdims", lambda x: _s(np.median(x, keepdims=True) * x), normal(2, 3))
case("unique-values", lambda x: _s(np.unique(x) * np.arange(6.0)), normal(2, 3))
case("unique-values-index", lambda x: _s(np.unique(x, return_index=True)[0] ** 2), normal(5))
case("bincount-weights", lambda w, i: _s(np.bincount(i, weights=w)), normal(6),
     const(np.array([0, 2, 2, 4, 1, 2])))
case("bincount-weights-minlength", lambda w, i: _s(np.bincount(i, w, minlength=7)),
     normal(5), const(np.array([3, 0, 3, 3, 1])))
case("searchsorted-no-derivative",
     lambda x: _s(x * np.searchsorted(np.sort(x), x + 0.1, side="right")), normal(6))


# ---- indexing: negative steps, ellipsis, newaxis, arrays, masks, combinations ----------
case("idx-reverse-step2", lambda x: _s(x[::-2]), normal(7))
case("idx-negative-start-stop", lambda x: _s(x[-1:0:-1]), normal(5))
case("idx-negative-bounds-2d", lambda x: _s(x[-2::-1, -1:-4:-2]), normal(3, 5))
case("idx-ellipsis-middle", lambda x: _s(x[1, ..., ::-1]), normal(2, 3, 4))
case("idx-ellipsis-newaxis-end", lambda x: _s(x[..., None] * x[..., None, :]), normal(2, 3))
case("idx-newaxis-twice", lambda x: _s(x[None, :, None, 1:]), normal(3, 4))
case("idx-int-array-and-slice", lambda x: _s(x[1:, [0, 0, 2]]), normal(3, 4))
case("idx-int-array-reversed-slice", lambda x: _s(x[[2, 2, 0], ::-1]), normal(3, 4))
case("idx-int-arrays-split-by-slice", lambda x: _s(x[[0, 1, 1], :, [1, 2, 1]]),
     normal(2, 3, 4))
case("idx-int-arrays-broadcast", lambda x: _s(x[np.array([[0], [2]]), np.array([1, 1, 3])]),
     normal(3, 4))
case("idx-int-array-newaxis", lambda x: _s(x[None, [1, 1]]), normal(3, 2))
case("idx-int-array-ellipsis", lambda x: _s(x[..., [0, -1, 0]]), normal(2, 3))
case("idx-2d-repeated-pairs", lambda x: _s(x[[0, 0, 1, 0], [1, 1, 2, 1]]), normal(2, 3))
case("idx-tuples-as-arrays", lambda x: _s(x[(0, 1, 0), (3, 3, 2)]), normal(2, 4, 3))
case("idx-tuple-and-list-and-slice", lambda x: _s(x[(1, 0, 1), :, [2, 0, 2]]), normal(2, 3, 4))
case("idx-nested-tuple-2d", lambda x: _s(x[((0, 1), (1, 1)),]), normal(2, 3))
case("idx-tuples-write", lambda x: _s(_written_at_tuples(x)), normal(3, 4))
case("idx-negative-array-aliases-2d", lambda x: _s(x[[-1, 2], [0, 0]]), normal(3, 2))
case("idx-mask-2d-then-slice", lambda x: _s(x[x[:, 0] > 0, 1:]), nonzero(4, 3))
case("idx-mask-columns", lambda x: _s(x[:, np.array([True, False, True, True])]), normal(3, 4))
case("idx-mask-full-then-reverse", lambda x: _s(x[x > 0][::-1]), nonzero(3, 4))
case("idx-mask-3d-leading", lambda x: _s(x[np.array([[True, False, True], [False, True, True]])]),
     normal(2, 3, 2))
case("idx-mask-with-newaxis", lambda x: _s(x[None, np.array([True, False, True])]), normal(3))
case("idx-chained", lambda x: _s(x[::-1][1:][[0, 0]][:, None]), normal(4, 2))
case("idx-scalar-then-array", lambda x: _s(x[1][[2, 2, 0]]), normal(2, 3))
case("idx-0d-ellipsis", lambda x: _s(x[...] * x[()]), f64(normal()))
case("idx-range-and-labels", _cross_entropy, positive(4, 3), const(np.array([2, 0, 1, 2])))
case("idx-range-step-reversed", lambda x: _s(x[range(4, 0, -2)] * x[range(2), ::-1]),
     normal(5, 3))
case("idx-range-empty", lambda x: _s(x[range(0)]) + _s(x[range(2, 2)]), normal(3, 2))
case("idx-range-write", lambda x: _s(_written_at_range(x)), normal(3, 2))

BY_NAME = tables.by_name(CASES)


# ---- the tests --------------------------------------------------------------------------
@pytest.mark.parametrize("c", CASES, ids=[c.name for c in CASES])
def test_gradients(c):
    tables.check_gradients(c)


FLOAT32 = ["prod-3x4-axis1", "prod-one-zero", "var-2x3x4-axis(0,2)", "std-ddof1-3x4-axis0",
           "cumsum-3x4-axis1", "cumprod-3x4-axisNone", "cumprod-two-zeros-axis1", "average-weights-1d", "logsumexp-axis1",
           "np.moveaxis-tuple", "atleast_2d-two-arrays", "hstack-2d", "split-indices",
           "array_split-uneven-axis1", "tile-more-reps", "repeat-axis1", "repeat-per-element",
           "flip-tuple", "roll-tuple", "pad-constant", "triu-k1", "diag-1d-k1",
           "diagonal-3d-swapped", "trace-3d", "take-repeated", "take_along_axis-1",
           "idx-int-arrays-split-by-slice", "idx-mask-2d-then-slice", "idx-2d-repeated-pairs",
           "idx-tuples-as-arrays", "median-even", "median-axes-tuple",
           "unique-values-index"]


@pytest.mark.parametrize("name", FLOAT32)
def test_float32_gradients(name):
    tables.check_float32(BY_NAME[name], rtol=1e-3, atol=1e-4)


# ---- second derivatives -----------------------------------------------------------------
SECOND = ["prod-3x4-axis1", "var-3x4-axis0", "cumsum-3x4-axis1", "cumprod-5-axis0",
          "roll-axis1", "pad-per-axis", "take-repeated", "tile-tuple", "diagonal-offset",
          "repeat-axis1", "flip-tuple", "logsumexp-axis1", "idx-tuples-as-arrays",
          "median-even", "unique-values-index"]


@pytest.mark.parametrize("name", SECOND)
def test_hessian_against_finite_differences_of_grad(name):
    c = BY_NAME[name]
    (x,) = c.make_args()
    tables.check_hessian(c.f, x)


# ---- exact values where finite differences would not tell ------------------------------
def _others(x, axis):
    """The product of the other elements along `axis`, by brute force."""
    out = np.empty_like(x)
    for i in np.ndindex(x.shape):
        line = list(i)
        line[axis] = slice(None)
        row = x[tuple(line)]
        out[i] = np.prod(np.delete(row, i[axis]))
    return out


@pytest.mark.parametrize("zeros", [(), (1,), (1, 3), (0, 1, 2, 3)])
def test_prod_gradient_is_exact_at_zeros(zeros):
    x = np.array([[2.0, -3.0, 0.5, 4.0], [1.5, 2.0, -1.0, 3.0]])
    x[0, list(zeros)] = 0.0
    for engine in (autodiffgen, tape):
        g = engine.grad(lambda x: np.sum(np.prod(x, axis=1) * np.array([1.0, 2.0])))(x)
        assert np.all(np.isfinite(g))
        np.testing.assert_array_equal(g[0], _others(x, 1)[0])
        np.testing.assert_allclose(g[1], 2 * _others(x, 1)[1], rtol=1e-15)
    _, t = autodiffgen.jvp(lambda x: np.prod(x, axis=1), (x,), (np.ones_like(x),))
    np.testing.assert_allclose(t, _others(x, 1).sum(axis=1), rtol=1e-15)


@pytest.mark.parametrize("x", [[2.0, -1.0, 0.5, 3.0], [2.0, 0.0, 0.5, 3.0],
                               [0.0, 1.5, 0.0, 3.0], [2.0, 1.5, 0.5, 0.0]])
def test_cumprod_gradient_is_exact_at_zeros(x):
    x, w = np.array(x), np.array([1.0, 2.0, -1.0, 3.0])
    expected = [sum(w[i] * np.prod(np.delete(x[:i + 1], j)) for i in range(j, 4))
                for j in range(4)]
    for engine in (autodiffgen, tape):
        g = engine.grad(lambda x: np.sum(w * np.cumprod(x)))(x)
        np.testing.assert_allclose(g, expected, rtol=1e-15, atol=0)
    _, t = autodiffgen.jvp(lambda x: np.cumprod(x), (x,), (w,))
    np.testing.assert_allclose(t, [sum(w[j] * np.prod(np.delete(x[:i + 1], j))
                                       for j in range(i + 1)) for i in range(4)], rtol=1e-15)


def test_repeated_take_accumulates_like_add_at():
    x = np.arange(5.0)
    idx = np.array([4, 0, 4, 4, 1])
    w = np.arange(1.0, 6.0)
    expected = np.zeros(5)
    np.add.at(expected, idx, w)
    np.testing.assert_array_equal(autodiffgen.grad(lambda x: np.sum(np.take(x, idx) * w))(x),
                                  expected)
    g = autodiffgen.grad(lambda x: np.sum(np.take_along_axis(x, idx, axis=0) * w))(x)
    np.testing.assert_array_equal(g, expected)


def test_index_sequences_holding_a_traced_int_are_guarded():
    """x[(i, 0), [1, 1]] with an int argument i: the index is built from i's value, which
    the code checks, so another i traces again instead of reusing the first one's rows."""
    x = np.arange(12.0).reshape(3, 4)

    def f(x, i):
        return np.sum(x[(i, 0), [1, i]] ** 2)

    g = autodiffgen.grad(f)
    for i in (1, 2, 1):
        expected = np.zeros((3, 4))
        np.add.at(expected, ([i, 0], [1, i]), 2 * x[[i, 0], [1, i]])
        np.testing.assert_array_equal(g(x, i), expected)
    assert "GuardFailure" in g.source(x, 2)


def test_a_range_of_the_batch_size_serves_every_batch_size():
    """p[range(len(p)), y] is p[np.arange(n), y]: one trace serves the other sizes, the
    range written as the arange of n it is (it was an unsupported index: issue 25)."""
    rng = np.random.default_rng(3)
    p, y = rng.uniform(0.1, 1.0, (6, 3)), rng.integers(0, 3, 6)
    f = served_by_one_trace(_cross_entropy, [(p, y), (p[:5], y[:5]), (p[:3], y[:3])], 1e-12)
    assert "np.arange(n" in f.source(p, y)


def test_split_returns_a_list_of_traced_pieces():
    seen = []

    def f(x):
        pieces = np.split(x, 3)
        seen.append((type(pieces), [type(p).__name__ for p in pieces]))
        return _s(pieces[0] * pieces[2])

    autodiffgen.grad(f)(np.arange(6.0))
    assert seen[0] == (list, ["Box", "Box", "Box"])
    assert np.split(np.arange(6.0), 3)[1].tolist() == [2.0, 3.0]  # plain arrays untouched


def test_pad_refuses_other_modes():
    for kwargs in ({"mode": "linear_ramp"}, {"mode": "reflect", "reflect_type": "odd"},
                   {"mode": "mean"}, {"constant_values": ((1.0, 2.0), (3.0, 4.0))}):
        with pytest.raises(UnsupportedOperationError, match="np.pad"):
            autodiffgen.grad(lambda x, kw=kwargs: np.sum(np.pad(x, 1, **kw)))(np.ones((2, 2)))


def test_unique_median_refusals_name_the_line():
    with pytest.raises(UnsupportedOperationError, match=r"test_coverage_arrays.py:\d+: np.unique"):
        autodiffgen.grad(lambda x: np.sum(np.unique(x, axis=0)))(np.ones((2, 2)))
    with pytest.raises(UnsupportedOperationError, match=r"sorted=False\) of an array a der"):
        autodiffgen.grad(lambda x: np.sum(np.unique(x, sorted=False)))(np.ones(3))
    with pytest.raises(ValueError, match=r"test_coverage_arrays.py:\d+: np.median of an empty"):
        autodiffgen.grad(lambda x: np.median(x[:0]) + np.sum(x))(np.ones(3))


def test_unique_of_a_differentiated_array_with_ties_reaches_the_first_occurrence():
    """As ar.ravel()[index]: the derivative of each value reaches its first occurrence."""
    def f(x):
        return np.sum(np.unique(x) ** 2)

    x = np.array([2.0, 1.0, 2.0, 3.0, 1.0])
    expected = np.array([4.0, 2.0, 0.0, 6.0, 0.0])
    np.testing.assert_array_equal(autodiffgen.grad(f)(x), expected)
    np.testing.assert_array_equal(tape.grad(f)(x), expected)


def test_median_is_nan_where_numpy_gives_nan():
    x = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, 6.0]])
    value, g = autodiffgen.value_and_grad(lambda x: np.sum(np.median(x, axis=1)))(x)
    assert np.isnan(value)
    np.testing.assert_array_equal(g[1], [0.0, 1.0, 0.0])


def test_generated_code_reads_as_numpy():
    x = np.ones((3, 4))
    source = autodiffgen.emit(lambda x: _s(np.cumsum(np.tile(x, 2), axis=1)), x)
    assert "np.tile(x, (2,))" in source and "np.cumsum(" in source
    source = autodiffgen.emit(lambda x: _s(np.pad(np.triu(x, 1), 1)), x)
    assert "np.pad(" in source and "np.triu(x, k=1)" in source


# ---- generated source is clean Python ---------------------------------------------------
# Emits every case once and runs ruff once over all of them (one process, not hundreds).
ruff_report = tables.ruff_report_fixture(CASES, "generated")


@pytest.mark.parametrize("i", range(len(CASES)), ids=[c.name for c in CASES])
def test_generated_source_passes_ruff(i, ruff_report):
    ruff_report.check(i, CASES[i])


def test_concatenate_with_axis_none():
    a, b = np.ones((2, 2)), np.ones(3)
    ga, gb = autodiffgen.grad(lambda a, b: np.sum(np.concatenate([a, b], axis=None) ** 2),
                              argnums=(0, 1))(a, b)
    np.testing.assert_allclose(ga, 2 * a)
    np.testing.assert_allclose(gb, 2 * b)
