"""How to compute an einsum with BLAS: the pairwise order and, for each pair, one matmul.

An einsum of two operands is a GEMM once its indices are sorted into four groups: batch
(in both operands and kept), contracted (in both, summed), and the free indices of each
side. Transposed and reshaped to (batch..., rows, K) and (batch..., K, cols), the
operands go to one np.matmul (NumPy loops over the batch axes and calls BLAS per matrix,
passing a transposed matrix as a flag, not a copy). What it costs beyond the GEMM is the
copies: a reshape that merges axes which are not adjacent in memory copies the operand,
and so does a matrix whose rows and columns both have strides other than 1. So the plan
tries the orders the groups can take, and which operand is on the left, and keeps the
cheapest under a cost model of this machine class (one thread; see COST). A contracted
index outermost in both operands may also be made a batch index and summed after the
matmul: `bckhw,bohw->ock` is then a batch of (ck, hw) @ (hw, o) products and one sum,
with no copy of either operand.

Three or more operands are contracted pairwise in the order np.einsum_path finds
cheapest. Everything here is decided from the subscripts and the shapes (which the
traced graph knows), and a plan is right at any size: sizes only choose among right
plans. Operands are taken as C-contiguous in their subscripts' order (a graph does not
know strides); an operand that is not only costs a copy inside np.reshape.
"""

import functools
import itertools
import math
from dataclasses import dataclass

import numpy as np

# cost model, in nanoseconds (one thread, float32 or float64, AVX2/AVX-512 BLAS, measured
# on the benchmark machine): a multiply-add in a GEMM and in np.einsum's own loops, an
# element copied (a transposing copy) or summed; the calls: np.matmul, a view (reshape,
# transpose), a sum over axes, np.einsum; each matrix of a batched matmul (a BLAS call)
COST = {"gemm": 0.02, "einsum": 0.1, "element": 1.0, "call": 900.0, "view": 600.0,
        "reduce": 3000.0, "einsum_call": 2000.0, "matrix": 300.0}
BLAS_DTYPES = frozenset(np.dtype(t) for t in ("float32", "float64", "complex64", "complex128"))


@dataclass(frozen=True)
class Operand:
    """How one operand enters the matmul: transposed by `perm` (None: as it is), reshaped
    to `shape` (None: as it is), copied if `copy` (a view BLAS cannot read), and its last
    two axes swapped if `flip` (a matrix whose columns are contiguous: BLAS reads it
    transposed, as `x.T` in `x.T @ g`)."""

    perm: tuple
    shape: tuple
    copy: bool
    flip: bool
    cost: float


@dataclass(frozen=True)
class Pair:
    """One pairwise contraction. `summed`: per operand, the axes summed before it (indices
    no other operand nor the result has). kind "matmul": left @ right, the result
    reshaped to `shape`, its axes `demoted` summed, giving indices `result`; kind
    "multiply": left * right (nothing summed); kind "einsum": np.einsum(`subscripts`), of
    shape `shape`."""

    kind: str
    swap: bool  # the second operand is the matmul's left one
    summed: tuple
    left: Operand
    right: Operand
    shape: tuple
    demoted: tuple
    result: str
    subscripts: str
    cost: float


def plan(terms, out, shapes):
    """([(i, j, Pair)...], final): the contraction steps (operand positions in the list
    as it shrinks: the two are removed and the result appended, as np.einsum_path
    counts), then the transpose of the last result to `out` (None: it is in order). None
    when the einsum is better left to np.einsum (as a whole)."""
    return _plan(tuple(terms), out, tuple(tuple(s) for s in shapes))


@functools.lru_cache(maxsize=512)  # each round of the passes sees the einsums it left
def _plan(terms, out, shapes):
    sizes = _sizes(terms, shapes)
    if sizes is None or len(terms) < 2 or any(len(set(t)) != len(t) for t in terms):
        return None
    order = _path(terms, out, shapes)
    steps, terms = [], list(terms)
    for i, j in order:
        ta, tb = terms[i], terms[j]
        for k in sorted((i, j), reverse=True):
            del terms[k]
        keep = set(out).union(*terms)
        last = not terms
        pair = best_pair(ta, tb, keep, sizes, out if last else None)
        steps.append((i, j, pair))
        terms.append(pair.result)
    if all(p.kind == "einsum" for _, _, p in steps) and len(steps) == 1:
        return None
    return steps, (None if terms[0] == out else tuple(terms[0].index(c) for c in out))


def _sizes(terms, shapes):
    """{index: size}, or None when an index has different sizes in two operands (einsum
    broadcasting a length-1 axis: left to np.einsum) or a size is 0."""
    sizes = {}
    for term, shape in zip(terms, shapes):
        if len(term) != len(shape) or 0 in shape:
            return None
        for c, n in zip(term, shape):
            if sizes.get(c, n) != n:
                return None
            sizes[c] = n
    return sizes


def _path(terms, out, shapes):
    """The pairs np.einsum_path contracts, in order (zero-strided stand-ins: no memory)."""
    if len(terms) == 2:
        return [(0, 1)]
    stand_ins = [np.broadcast_to(np.zeros((), np.float64), s) for s in shapes]
    how = "optimal" if len(terms) <= 4 else "greedy"
    path, _ = np.einsum_path(",".join(terms) + "->" + out, *stand_ins, optimize=how)
    steps = [tuple(p) for p in path[1:]]
    if any(len(p) != 2 for p in steps):  # a single-operand step: pairwise, left to right
        steps = [(0, 1)] * (len(terms) - 1)
    return steps


# ---- one pair ------------------------------------------------------------------------------
def best_pair(ta, tb, keep, sizes, out=None):
    """The cheapest way to contract operands with subscripts ta and tb, keeping the
    indices in `keep` (in the order `out` when given, else as the matmul leaves them)."""
    summed = (tuple(k for k, c in enumerate(ta) if c not in tb and c not in keep),
              tuple(k for k, c in enumerate(tb) if c not in ta and c not in keep))
    pre = sum(_count(t, sizes) * COST["element"] + COST["reduce"]
              for t, s in zip((ta, tb), summed) if s)
    ta = "".join(c for k, c in enumerate(ta) if k not in summed[0])
    tb = "".join(c for k, c in enumerate(tb) if k not in summed[1])
    if not any(c in tb for c in ta):  # nothing to sum: a product, broadcast
        return _multiply_pair(ta, tb, sizes, out, summed, pre)
    fallback = _einsum_pair(ta, tb, keep, sizes, out, summed, pre)
    return min([*_matmul_pairs(ta, tb, keep, sizes, out, summed, pre), fallback],
               key=lambda p: p.cost)


def _multiply_pair(ta, tb, sizes, out, summed, pre):
    """An outer product (a scalar's too) as a * b, each operand's axes put in the result's
    order and given length-1 axes where it has none (`a[:, None] * b` in effect)."""
    result = out or ta + tb
    left, right = (_aligned(t, result, sizes) for t in (ta, tb))
    cost = pre + left.cost + right.cost + COST["element"] * _count(result, sizes) \
        + COST["call"]
    return Pair("multiply", False, summed, left, right, tuple(sizes[c] for c in result), (),
                result, f"{ta},{tb}->{result}", cost)


def _aligned(term, result, sizes):
    order = [c for c in result if c in term]
    perm = tuple(term.index(c) for c in order)
    first = result.index(order[0]) if order else len(result)
    shape = tuple(sizes[c] if c in term else 1 for c in result[first:])
    perm = None if perm == tuple(range(len(term))) else perm
    shape = None if shape == tuple(sizes[c] for c in order) else shape
    return Operand(perm, shape, False, False,
                   COST["view"] * ((perm is not None) + (shape is not None)))


def _count(term, sizes):
    return math.prod(sizes[c] for c in term)


def _einsum_pair(ta, tb, keep, sizes, out, summed, pre):
    result = out or "".join(dict.fromkeys(c for c in ta + tb if c in keep))
    cost = pre + COST["einsum_call"] + COST["einsum"] * _count(set(ta + tb), sizes)
    return Pair("einsum", False, summed, None, None, tuple(sizes[c] for c in result), (),
                result, f"{ta},{tb}->{result}", cost)


def _matmul_pairs(ta, tb, keep, sizes, out, summed, pre):
    shared = [c for c in ta if c in tb]
    batch0 = [c for c in shared if c in keep]
    contracted = [c for c in shared if c not in keep]
    free_a = [c for c in ta if c not in tb]
    free_b = [c for c in tb if c not in ta]
    if not contracted:
        return
    macs = _count(set(ta + tb), sizes)
    outer = _leading(ta, batch0 + contracted)[-1]
    outer = "".join(c for c in outer if c in contracted and c in _leading(tb, outer)[-1])
    for demoted in {"", outer}:
        inner = [c for c in contracted if c not in demoted]
        if not inner:
            continue
        for lead_a, lead_b in itertools.product(_leading(ta, free_a), _leading(tb, free_b)):
            batch = batch0 + list(demoted) + list(lead_a) + list(lead_b)
            rows = [c for c in free_a if c not in lead_a]
            cols = [c for c in free_b if c not in lead_b]
            for orders in _orders(ta, tb, out, batch, inner, rows, cols):
                for swap in (False, True):
                    yield _matmul_pair(ta, tb, sizes, out, summed, pre, macs, demoted,
                                       orders, swap)


def _leading(term, group):
    """Indices of `group` that may lead the matmul's batch axes: none, or those that come
    first in the operand ('b' of 'bckhw'). For free indices, the other operand is then
    broadcast along them; contracted ones leading both operands are summed after."""
    lead = ""
    for c in term:
        if c not in group:
            break
        lead += c
    return ("", lead) if lead else ("",)


def _orders(ta, tb, out, batch, inner, rows, cols):
    """Orders of the groups (batch, K, rows of a, columns of b) worth trying: each as one
    operand has it (or as the result must have it), the indices it lacks after."""
    def seen(group, *terms):
        terms = [t for t in terms if t is not None]
        return {"".join(dict.fromkeys(c for t in (first, *terms) for c in t if c in group))
                for first in terms}
    return itertools.product(seen(batch, ta, tb, out), seen(inner, ta, tb),
                             seen(rows, ta, out), seen(cols, tb, out))


def _matmul_pair(ta, tb, sizes, out, summed, pre, macs, demoted, orders, swap):
    batch, inner, rows, cols = orders
    if swap:  # b on the left: (batch, cols, K) @ (batch, K, rows)
        (ta, rows), (tb, cols) = (tb, cols), (ta, rows)
    left = _operand(ta, sizes, batch, rows, inner, vector=not batch and not rows and 2)
    right = _operand(tb, sizes, batch, inner, cols, vector=not batch and not cols and 1)
    result = batch + rows + cols
    shape = tuple(sizes[c] for c in result)
    kept = "".join(c for c in result if c not in demoted)
    matrices = _count(batch, sizes)
    gemm = COST["gemm"] * macs
    if right.flip:  # BLAS is slower with the right operand transposed, the more columns
        gemm *= 1 + 0.5 * min(1.0, _count(cols, sizes) / 128)  # it has (measured, OpenBLAS)
    cost = pre + left.cost + right.cost + gemm + COST["call"] + COST["matrix"] * matrices
    if demoted:
        cost += COST["element"] * _count(result, sizes) + COST["reduce"]
    if out is not None and kept != out:  # a transposed view: what reads it pays
        cost += 0.5 * COST["element"] * _count(kept, sizes)
    return Pair("matmul", swap, summed, left, right, shape,
                tuple(k for k, c in enumerate(result) if c in demoted), kept,
                f"{ta},{tb}->{kept}", cost)


def _operand(term, sizes, batch, first, second, vector):
    """How an operand with subscripts `term` (C-contiguous) becomes (batch..., first,
    second) matrices (or, `vector` 1 or 2, the 1-D first or second group)."""
    strides = _strides(term, sizes)
    s1, s2 = _merged(first, term, sizes, strides), _merged(second, term, sizes, strides)
    n1, n2 = _count(first, sizes), _count(second, sizes)
    view = s1 is not False and s2 is not False
    blas = view and (n1 == 1 or n2 == 1 or (s2 == 1 and s1 >= n2) or (s1 == 1 and s2 >= n1))
    flip = blas and not vector and n1 > 1 and n2 > 1 and s1 == 1
    if flip:  # reshaped as it lies in memory, then transposed
        first, second, n1, n2 = second, first, n2, n1
    order = [c for c in batch if c in term] + list(first + second)
    perm = tuple(term.index(c) for c in order)
    present = [k for k, c in enumerate(batch) if c in term]  # matmul broadcasts the rest;
    lead = batch[present[0]:] if present else ""  # those before any present go unwritten
    matrix = (n1, n2)[vector - 1:vector] if vector else (n1, n2)
    shape = tuple(sizes[c] if c in term else 1 for c in lead) + matrix
    perm = None if perm == tuple(range(len(term))) else perm
    shape = None if shape == tuple(sizes[c] for c in order) else shape
    cost = COST["view"] * ((perm is not None) + (shape is not None) + flip)
    if not blas:
        cost += COST["element"] * _count(term, sizes) + COST["call"]
    return Operand(perm, shape, view and not blas, flip, cost)


def _strides(term, sizes):
    strides, step = {}, 1
    for c in reversed(term):
        strides[c] = step
        step *= sizes[c]
    return strides


def _merged(group, term, sizes, strides):
    """The stride (in elements) of the group's axes merged into one, None for a group of
    size 1 (any stride will do), False when merging them copies."""
    axes = [c for c in group if sizes[c] != 1]
    if not axes:
        return None
    for a, b in itertools.pairwise(axes):
        if strides[a] != strides[b] * sizes[b]:
            return False
    return strides[axes[-1]]
