"""Sums of many like terms, computed at once.

The backward pass of a loop accumulates one term per step: a recurrent net's weight
gradient is h[0].T @ g[0] + h[1].T @ g[1] + ..., and the gradient of xs in `xs[t] @ W`
adds one zero-filled array per step with a single row set. Done term by term, that is
many small matmuls, and work quadratic in the number of steps. Here such an add tree is
rewritten as one matmul over concatenated operands, and as one stack of the rows. Blocks
of a row that tile it (`xw[t, :, :2 * H]` and `xw[t, :, 2 * H:]`, a GRU's gates and
candidate) are concatenated into the row first; blocks that tile the whole array (`zr[:,
:H]`, `zr[:, H:]`) are one concatenation, from two terms on. Not
over values a checkpoint recomputes (checkpointing.py): the one matmul would keep them all.
"""

import numpy as np

from ..graph import Index, Node, Slot, op, recomputed, users_of
from ..rules import PRIMITIVES
from ..tree import leaves
from .rewrite import clone, guard_reads, substitute

MIN_TERMS = 3
MAX_INNER = 512  # products with a longer inner dimension are efficient one by one


def accumulate(graph):
    """Rewrites add trees of like terms. Only nodes computed in this graph are looked
    into: a graph's inputs (a backward function's saved values) are opaque."""
    uses = _use_counts(graph)
    computed = {node: i for i, node in enumerate(graph.nodes)}  # and where each is computed
    replace = {}
    consumed = guard_reads(graph)  # a guard reads these as traced, in the traced order
    for node in reversed(graph.nodes):  # roots of add trees come last
        if op(node) != "add" or node in consumed or not _plain(node, node):
            continue
        terms, inner = _terms(node, uses)
        if len(terms) < 2:
            continue
        merged = _merge(node, terms, uses, computed)
        if merged is not None:
            replace[node] = merged
        consumed |= inner  # a subtree has fewer terms of each kind: it would not merge either
    return substitute(graph, replace)


def _use_counts(graph):
    uses = {node: len(users) for node, users in users_of(graph.nodes).items()}
    for leaf in leaves(graph.outputs):
        if type(leaf) is Node:
            uses[leaf] = uses.get(leaf, 0) + 2  # an output is always needed as it is
    return uses


def _plain(x, like):
    """A computed node of the same shape and dtype (no broadcasting in the sum)."""
    return type(x) is Node and x.prim is not None and x.shape == like.shape \
        and x.dtype == like.dtype


def _terms(root, uses):
    """The leaves of the add tree under root, and its inner add nodes."""
    terms, inner, stack = [], set(), [root]
    while stack:
        node = stack.pop()
        is_sum = node is root or (op(node) == "add" and uses.get(node, 0) == 1
                                  and _plain(node, root))
        if is_sum and all(_plain(a, root) for a in node.args):
            inner.add(node)
            stack.extend(reversed(node.args))
        else:
            terms.append(node)
    return terms, inner


def _merge(root, terms, uses, computed):
    """One node for the sum of the terms, or None when nothing merges."""
    single = [t for t in terms if uses.get(t, 0) == 1 and t in computed]
    rows, whole, used = _tiles(root, single)
    products = [t for t in single if _product(t, root)]
    groups = []
    if whole is not None:
        groups.append(whole)
    if sum(len(used[t]) for t, _ in rows) >= 2:  # each scatter fills a whole array
        groups.append(_stack_rows(root, rows))
    else:
        used = {k: v for k, v in used.items() if k is None}
    if len(products) >= MIN_TERMS:
        groups.append(_one_matmul(root, products, computed))
    else:
        products = []
    if not groups:
        return None
    merged_terms = {t for pieces in used.values() for t in pieces} | set(products)
    rest = [t for t in terms if t not in merged_terms]
    total = groups[0]
    for term in groups[1:] + rest:
        total = clone(root, (total, term))
    return total


# ---- blocks set by indexing: x[t] for every t, x[t, :, a:b] tiling a row ------------------
def _block(node, root):
    """(t, axis, start, stop) for a scatter_add that sets one block of an array shaped
    like root: row t (None: no leading integer), all of it but the slice start:stop of
    `axis` (None: all of it). None for any other scatter."""
    if op(node) != "scatter_add" or node.params["shape"] != root.shape or len(node.args) != 1:
        return None
    items, dims, lead = node.params["index"].items, root.shape, None
    if items and type(items[0]) is int and dims:
        lead, items, dims = items[0] % dims[0], items[1:], dims[1:]
    if len(items) > len(dims) or any(type(i) is not slice or not all(
            b is None or type(b) is int for b in (i.start, i.stop, i.step)) for i in items):
        return None
    partial = []
    for axis, (item, n) in enumerate(zip(items, dims)):
        start, stop, step = item.indices(n)
        if (start, stop, step) != (0, n, 1):
            if step != 1 or stop <= start:
                return None
            partial.append((axis, start, stop))
    if len(partial) > 1:
        return None
    return (lead, *partial[0]) if partial else (lead, None, 0, 0)


def _tiles(root, single):
    """([(t, the row's node)], the node for the whole array or None, {t: terms used}):
    per leading index t (None for the whole array), the blocks that tile it, concatenated."""
    by_lead = {}
    for term in single:
        block = _block(term, root)
        if block is not None:
            by_lead.setdefault(block[0], []).append((block[1:], term))
    rows, whole, used = [], None, {}
    for lead, blocks in sorted(by_lead.items(), key=lambda kv: -1 if kv[0] is None else kv[0]):
        blocks.sort(key=lambda b: b[0][1])
        axes = {axis for (axis, _, _), _ in blocks}
        shape = root.shape if lead is None else root.shape[1:]
        pieces = [term.args[0] for _, term in blocks]
        if axes == {None} and len(blocks) == 1:
            node = pieces[0]
        elif len(axes) == 1 and None not in axes and [start for (_, start, _), _ in blocks] \
                == [0] + [stop for (_, _, stop), _ in blocks[:-1]] \
                and blocks[-1][0][2] == shape[next(iter(axes))] \
                and all(p.dtype == root.dtype for p in pieces):
            node = _concatenate(root, pieces, next(iter(axes)))
        else:
            continue
        used[lead] = [term for _, term in blocks]
        if lead is None:
            whole = node if len(blocks) > 1 else None
            if whole is None:
                del used[lead]
        else:
            rows.append((lead, node))
    return rows, whole, used


def _stack_rows(root, rows):
    """The rows stacked in order; a scatter of the stack where rows are missing."""
    order = sorted(rows, key=lambda tr: tr[0])
    index = [t for t, _ in order]
    pieces = [row for _, row in order]
    whole = index == list(range(root.shape[0]))
    stacked = root.replace(prim=PRIMITIVES["stack"], args=tuple(pieces), params={"axis": 0},
                           shape=root.shape if whole else (len(pieces),) + root.shape[1:])
    if whole:
        return stacked
    positions = np.array(index)
    return clone(root, (stacked, positions), PRIMITIVES["scatter_add"],
                 {"index": Index((Slot(1),)), "shape": root.shape,
                  "unique": len(set(index)) == len(index)})


# ---- products sharing no operand but their shape: sum_i A_i @ B_i ------------------------
def _product(node, root):
    if op(node) != "matmul" or len(node.shape) != 2:
        return False
    a, b = node.args
    return all(type(x) is Node and len(x.shape) == 2 and not _recomputed(x) for x in (a, b)) \
        and b.shape[0] <= MAX_INNER


def _recomputed(x):
    """A checkpoint's recomputed value (or its transpose): one matmul over all the terms
    would keep every such copy alive until the end, which is what checkpointing avoids."""
    return recomputed(x) or (op(x) == "transpose" and type(x.args[0]) is Node
                             and recomputed(x.args[0]))


def _one_matmul(root, products, computed):
    """sum_i A_i @ B_i as [A_1 ... A_n] @ [B_1; ...; B_n] (concatenated operands), the
    terms in the order their left operands are computed (a loop's first step first, as
    the stack of its rows has them: cse then finds the stack of the same rows once)."""
    products = sorted(products, key=lambda p: _position(p.args[0], computed))
    lefts = [p.args[0] for p in products]
    rights = [p.args[1] for p in products]
    if all(_transposed(a, computed) for a in lefts):  # A_i = X_i.T: stack the X_i, transpose once
        xs = [a.args[0] for a in lefts]
        left = _concatenate(root, xs, 0)
        left = root.replace(prim=PRIMITIVES["transpose"], args=(left,), params={"axes": None},
                            shape=left.shape[::-1])
    else:
        left = _concatenate(root, lefts, 1)
    right = _concatenate(root, rights, 0)
    return clone(root, (left, right), PRIMITIVES["matmul"], {})


def _position(left, computed):
    """Where a left operand (or what it transposes) is computed; -1 for an input."""
    if _transposed(left, computed):
        left = left.args[0]
    return computed.get(left, -1)


def _transposed(x, computed):
    return x in computed and op(x) == "transpose" and x.params["axes"] is None \
        and type(x.args[0]) is Node and len(x.shape) == 2


def _concatenate(root, parts, axis):
    """The parts joined along axis; along the first axis, parts of one shape are a stack,
    reshaped: the memory plan writes each part into its row of the stack as it is
    computed (emit_memory.destinations), at any batch size the code serves."""
    if axis == 0 and len(parts) > 1 and len({(p.shape, p.dtype) for p in parts}) == 1 \
            and parts[0].shape:
        stacked = _whole(parts)
        if stacked is None:
            stacked = root.replace(prim=PRIMITIVES["stack"], args=tuple(parts),
                                   params={"axis": 0}, shape=(len(parts),) + parts[0].shape,
                                   dtype=parts[0].dtype)
        shape = (len(parts) * parts[0].shape[0],) + parts[0].shape[1:]
        return root.replace(prim=PRIMITIVES["reshape"], args=(stacked,),
                            params={"shape": shape}, shape=shape, dtype=parts[0].dtype)
    shape = list(parts[0].shape)
    shape[axis] = sum(p.shape[axis] for p in parts)
    return root.replace(prim=PRIMITIVES["concatenate"], args=tuple(parts), params={"axis": axis},
                        shape=tuple(shape), dtype=np.result_type(*[p.dtype for p in parts]))


def _whole(parts):
    """x when the parts are its rows x[0], x[1], ... in order (a loop's inputs `xs[t]`),
    which stacked are x itself, not a copy; else None."""
    base = parts[0].args[0] if op(parts[0]) == "getitem" and parts[0].args else None
    for t, part in enumerate(parts):
        if op(part) != "getitem" or len(part.args) != 1 or part.args[0] is not base \
                or part.params["index"].items != (t,):
            return None
    return base if type(base) is Node and base.shape[:1] == (len(parts),) else None
