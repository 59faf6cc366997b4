"""Loop-level passes: work a scan's body does at every step that it need not.

- Invariant code out (`hoisted_invariants`): a body value computed from the loop's
  invariants and constants alone (`Wh.T`, the same at every step) is computed once before
  the loop and read by the body as one more invariant; a guard of invariants alone is
  checked once, before the loop, and one of a bound linear in t at the loop's two ends
  (bounds.py).
- Accumulations after the loop (`hoisted_sums`): a carried sum that each step only adds
  to, `g_Wh = g_Wh + hs[t - 1].T @ g` (a weight's gradient summed over the steps, as the
  backward records it), `g_b = g_b + np.sum(g, axis=0)`, `g_xw[t] += g` or a filter's
  `g_w[f] += g` (a naive convolution's, the same part at every step), becomes the
  step's `g` saved in a stack and one product, sum or slice update after the loop:
  `g_Wh += reshape(hs[lo:hi]).T @ reshape(gs)`, one GEMM in place of one per step, as a
  hand-written backward of a recurrent net does.

Both are Graph -> Graph over the outer graph, each scan node rebuilt with its new body.
"""

from dataclasses import replace

import numpy as np

from ..graph import Index, Node, Slot, has_effect, is_guard, op, roots_of, users_of
from ..passes.cse import cse
from ..passes.rewrite import ancestors, substitute
from ..rules import PRIMITIVES, elementwise_ufunc
from ..rules.loops import Scan, scan, scan_out
from ..tree import leaves
from .bounds import hoisted_bounds
from .spread import spread_invariants, spread_value


def hoisted(graph):
    """`graph` with each scan's invariant code and accumulations out of its loop."""
    for i in range(sum(op(n) == "scan" for n in graph.nodes)):  # (a rebuilt loop renews
        node = _scans(graph)[i]                                   # the loops reading it)
        graph, node = hoisted_invariants(graph, node)
        graph, node = hoisted_bounds(graph, node, _rebuilt, _pruned)
        graph, node = spread_invariants(graph, node, _rebuilt)
        graph, node = hoisted_maps(graph, node)
        graph = hoisted_sums(graph, node)
    for i in range(sum(op(n) == "scan" for n in graph.nodes)):
        node = _scans(graph)[i]
        body = node.params["body"]
        inner = _saved_not_carried(body)
        merged = cse(inner, {})[0]  # (the row offsets the passes above made: `t - 1` once)
        if merged is not inner:
            inner = replace(merged, inputs=inner.inputs)
        if inner is not body.graph:
            graph = _rebuilt(graph, node, replace(body, graph=inner), list(node.args), [], {})[0]
    return graph


def _scans(graph):
    return [n for n in graph.nodes if op(n) == "scan"]


def _saved_not_carried(body):
    """The body with no carry updated in place that an elementwise value each step saves
    reads (`g *= dtanh[t]`, then `gs[t] = g`): that value computed into its row of the
    stack instead (codegen/loops.py), which saves the row's copy."""
    inner = body.graph
    users = users_of(inner.nodes)
    saved = set(inner.outputs[body.carries:])

    def feeds_saved(carry):  # through elementwise steps, which the plan may do in place
        stack, seen = list(users.get(carry, ())), set()
        while stack:
            node = stack.pop()
            if node in seen or not elementwise_ufunc(node.prim):
                continue
            if node in saved:
                return True
            seen.add(node)
            stack.extend(users.get(node, ()))
        return False
    keep = {c for c in inner.donated if not feeds_saved(c)}
    return inner if keep == inner.donated else replace(inner, donated=frozenset(keep))


# ---- per-step work on saved rows, done once over the stack ---------------------------------
def hoisted_maps(graph, loop):
    """(graph, the new loop node) with the body's elementwise work on rows of stacks
    (`dtanh = 1 - hs[t] * hs[t]`, which reads nothing carried) computed once over the
    whole stack before the loop (`1 - hs * hs`), the body reading its row t: two NumPy
    calls in place of two per step, as passes/stepwise.py does for steps written out."""
    body = loop.params["body"]
    inner = body.graph
    t, start = inner.inputs[0], 1 + body.carries
    outer_of = dict(zip(inner.inputs[start:], loop.args[body.carries:]))
    first, n = min(body.ts), len(body.ts)
    mapped = {}  # body node -> (outer node over every step, the offset k of its rows)
    made = []
    for node in inner.nodes:
        base, k = _row_of_stack(node, t, inner, body)
        if base is not None:
            mapped[node] = (_outer_rows(graph, outer_of[base], first + k, n, node, made), k)
            continue
        if not elementwise_ufunc(node.prim) or not any(a in mapped for a in node.args
                                                      if type(a) is Node):
            continue
        offsets = {mapped[a][1] for a in node.args if type(a) is Node and a in mapped}
        if len(offsets) != 1 or not all(
                type(a) is not Node or a in mapped and a.shape == node.shape
                or a in outer_of and len(a.shape) < len(node.shape) for a in node.args):
            continue
        args = tuple(mapped[a][0] if type(a) is Node and a in mapped else
                     outer_of.get(a, a) if type(a) is Node else a for a in node.args)
        whole = graph.new_node(node.prim, args, like=node, params=node.params,
                               shape=(n, *node.shape), dtype=node.dtype)
        whole.name = node.name
        made.append(whole)
        mapped[node] = (whole, offsets.pop())
    users = users_of(inner.nodes)
    frontier = [m for m in mapped if op(m) != "getitem" and (
        any(u not in mapped for u in users.get(m, ())) or m in inner.outputs)]
    if not frontier:
        return graph, loop
    stand_ins, reads = {}, []
    for m in frontier:  # the body reads row t of the value computed over every step
        stack_in = Node(m.id, None, (), {}, (n, *m.shape), m.dtype)
        stack_in.name = m.name
        offset = _offset_node(t, -first, inner)
        row = m.replace(prim=PRIMITIVES["getitem"], args=(stack_in, offset),
                        params={"index": Index((Slot(1),))}, grad_of=m.grad_of)
        stand_ins[m] = row
        reads.append((stack_in, mapped[m][0]))
    new_inner, _ = substitute(inner, stand_ins)
    new_inner = _pruned(replace(new_inner, inputs=list(inner.inputs) + [s for s, _ in reads]))
    used = ancestors([w for _, w in reads])
    return _rebuilt(graph, loop, replace(body, graph=new_inner),
                    list(loop.args) + [w for _, w in reads],
                    [m for m in made if m in used], {})


def _outer_rows(graph, stack, lo, n, like, made):
    node = graph.new_node(PRIMITIVES["getitem"], (stack,), like=like,
                          params={"index": Index((slice(lo, lo + n),))},
                          shape=(n, *like.shape), dtype=like.dtype)
    node.name = like.name
    made.append(node)
    return node


def _offset_node(t, k, inner):
    """t + k as a body node: t itself for k = 0, the body's own if it has one."""
    if k == 0:
        return t
    for node in inner.nodes:
        if _offset(node, t) == k and node is not t:
            return node
    node = t.replace(prim=PRIMITIVES["add" if k > 0 else "subtract"], args=(t, abs(k)),
                     params={}, name=None)
    node.python_number = True
    return node


# ---- invariant code out -------------------------------------------------------------------
def hoisted_invariants(graph, loop):
    """(graph, the new loop node) with body values of invariants alone computed before."""
    body = loop.params["body"]
    inner = body.graph
    start = 1 + body.carries
    outer_of = {i: a for i, a in zip(inner.inputs[start:], loop.args[body.carries:])}
    moved = {}  # body node -> the outer node computing it
    checks = []  # the body's guards of invariants, checked once before the loop instead
    t, spread = inner.inputs[0], set()  # (spread: values already outside, not made here)
    for node in inner.nodes:
        base, _ = _row_of_stack(node, t, inner, body)
        if base is not None and spread_value(outer_of[base]) is not None:
            moved[node] = spread_value(outer_of[base])  # (a row of a value spread: it)
            spread.add(moved[node])
            continue
        if has_effect(node) or node.prim.op is None \
                or is_guard(node) and not _checked_once(node, body):
            continue
        if all(type(a) is not Node or a in outer_of or a in moved for a in node.args) \
                and any(type(a) is Node for a in node.args):
            args = tuple(outer_of.get(a, moved.get(a, a)) if type(a) is Node else a
                         for a in node.args)
            moved[node] = graph.new_node(node.prim, args, like=node, params=node.params,
                                         shape=node.shape, dtype=node.dtype)
            moved[node].name = node.name
            if is_guard(node):
                checks.append(node)
    read = {a for n in inner.nodes if n not in moved for a in n.args if type(a) is Node}
    read |= {o for o in inner.outputs if type(o) is Node}
    wanted = [n for n in moved if n in read]  # what the rest of the body reads
    if not wanted and not checks:
        return graph, loop
    stand_ins = {n: n.replace(prim=None, args=(), params={}, grad_of=None) for n in wanted}
    kept = replace(inner, nodes=[n for n in inner.nodes if n not in checks])
    new_inner, _ = substitute(kept, stand_ins)
    new_inner = _pruned(replace(new_inner, inputs=list(inner.inputs) + list(stand_ins.values())))
    made = [moved[n] for n in moved if _needed(n, moved, wanted + checks)
            and moved[n] not in spread]
    new_inner, args = _read_only(new_inner, list(loop.args) + [moved[n] for n in wanted],
                                 body.carries)
    return _rebuilt(graph, loop, replace(body, graph=new_inner), args, made, {})


def _read_only(inner, args, carries):
    """The body without the invariants it no longer reads (a saved row it now reads as
    the value spread, loops/spread.py), and the loop's arguments without theirs."""
    read = {a for n in inner.nodes for a in n.args if type(a) is Node}
    read |= {o for o in leaves(inner.outputs) if type(o) is Node}
    start = 1 + carries
    keep = [k for k, node in enumerate(inner.inputs[start:]) if node in read]
    if len(keep) == len(inner.inputs) - start:
        return inner, args
    inputs = list(inner.inputs[:start]) + [inner.inputs[start + k] for k in keep]
    return replace(inner, inputs=inputs), args[:carries] + [args[carries + k] for k in keep]


def _checked_once(guard, body):
    """A guard of the loop's invariants holds at every step if it holds at one: it is
    checked once, before a loop known to run (a counted one, at least one step; not a
    `while` loop's test, which ends it)."""
    return not body.exit and not guard.params.get("exit") and type(body.ts) is range \
        and len(body.ts) > 0


def _needed(node, moved, wanted):
    """Whether a moved node is one the body reads or one such a node is computed from."""
    return moved[node] in ancestors([moved[w] for w in wanted])


# ---- accumulations after the loop ---------------------------------------------------------
def hoisted_sums(graph, loop):
    """The graph with each carried sum that a step only adds to summed after the loop."""
    body = loop.params["body"]
    inner = body.graph
    users = users_of(inner.nodes)
    t = inner.inputs[0]
    found = {}
    for j in range(body.carries):
        carry, out = inner.inputs[1 + j], inner.outputs[j]
        if type(out) is Node and out not in inner.outputs[body.carries:] \
                and not users.get(out):  # (a step reading its running sum keeps it)
            terms = _chain(out, carry, t, inner, body, users)
            if terms:
                found[j] = terms
    if not found:
        return graph
    stacked = list(dict.fromkeys(m[2] for terms in found.values() for m in terms))
    kept = [j for j in range(body.carries) if j not in found]
    outputs = tuple(inner.outputs[j] for j in kept) + tuple(inner.outputs[body.carries:]) + \
        tuple(stacked)
    inputs = [t] + [inner.inputs[1 + j] for j in kept] + list(inner.inputs[1 + body.carries:])
    new_inner = _pruned(replace(inner, inputs=inputs, outputs=outputs,
                                donated=frozenset(d for d in inner.donated if d in inputs)))
    new_body = Scan(new_inner, len(kept), body.ts, body.comment)
    args = [loop.args[j] for j in kept] + list(loop.args[body.carries:])
    index = {j: k for k, j in enumerate(kept)}
    ys = len(inner.outputs) - body.carries
    index.update({body.carries + i: len(kept) + i for i in range(ys)})
    first, n = min(body.ts), len(body.ts)
    finals = {}
    new_loop = graph.new_node(scan, tuple(args), like=loop, params={"body": new_body},
                              shape=(), dtype=np.dtype(bool))
    made = []
    stacks = {}
    for g in stacked:
        stacks[g] = graph.new_node(scan_out, (new_loop,), like=loop,
                                   params={"output": len(kept) + ys + len(stacks), "fresh": True},
                                   shape=(n, *g.shape), dtype=g.dtype)
        made.append(stacks[g])
    outer_of = dict(zip(inner.inputs[1 + body.carries:], loop.args[body.carries:]))
    for j, terms in found.items():
        total = loop.args[j]
        for kind, k, g, rows in terms:  # in the order the step added them
            total = _summed(graph, kind, total, stacks[g],
                            outer_of[rows] if kind in ("matmul", "columns") else
                            (outer_of[rows[0]], rows[1]) if kind == "weighted" else rows,
                            first + k, n, inner.outputs[j], made)
        finals[j] = total
    return _rebuilt(graph, loop, new_body, args, made, {"index": index, "finals": finals},
                    new_loop)[0]


def _chain(out, carry, t, inner, body, users):
    """The terms a step adds to a carried sum, first added first, when the carry is read
    only by a chain of such additions ending in its new value (`g_xw[t, :, :H] += a`,
    then `g_xw[t, :, H:] += b`); else None."""
    terms, node = [], out
    while node is not carry:
        previous = _previous(node, carry)
        if previous is None or users.get(previous) != [node]:
            return None
        match = _accumulation(node, previous, t, inner, body)
        if match is None:
            return None
        terms.append(match)
        node = previous
    return terms[::-1]


def _previous(node, carry):
    """The running sum `node` adds a term to: add_at's array; the operand of an add that
    leads back to the carry through such additions."""
    if op(node) == "add_at":
        return node.args[0]
    if op(node) == "add" and len(node.args) == 2:
        for a in node.args:
            if _leads_to(a, carry):
                return a
    return None


def _leads_to(node, carry, depth=64):
    if node is carry:
        return True
    if depth == 0 or type(node) is not Node:
        return False
    if op(node) == "add_at":
        return _leads_to(node.args[0], carry, depth - 1)
    return op(node) == "add" and any(_leads_to(a, carry, depth - 1) for a in node.args)


def _accumulation(out, carry, t, inner, body):
    """(kind, offset k, the step's g, the stack it is read with) when `out` adds a step's
    term to `carry` alone: `carry + S[t + k].T @ g`, `carry + sum(g, axis=0)`,
    `carry[t + k] += g`, `carry[f] += g` (a part the same at every step)."""
    if op(out) == "add" and len(out.args) == 2 and carry in out.args:
        term = out.args[1] if out.args[0] is carry else out.args[0]
        if type(term) is not Node or term is carry:
            return None
        if op(term) == "matmul" and len(term.args) == 2 and op(term.args[0]) == "transpose" \
                and term.args[0].params.get("axes") in (None, (1, 0)) \
                and len(term.shape) == 2 and len(term.args[1].shape) == 2:
            row = term.args[0].args[0]
            stack, k = _row_of_stack(row, t, inner, body)
            if stack is not None and len(row.shape) == 2:
                return ("matmul", k, term.args[1], stack)
        column = _column_product(term, t, inner, body)
        if column is not None:
            return column
        if op(term) == "sum" and term.params.get("axis") in (0, (0,)) \
                and not term.params.get("keepdims") and len(term.args[0].shape) == 2 \
                and term.params.get("dtype") is None:
            return ("sum", 0, term.args[0], None)
    if op(out) == "add_at" and out.args[0] is carry and len(out.args) == 3 \
            and type(out.args[1]) is Node and _row_then_static(out.params["index"].items):
        k = _offset(out.args[2], t)
        if k is not None:  # `g_xw[t, :, 256:] += g`: the rows' slices, all at once after
            return ("rows", k, out.args[1], out.params["index"].items[1:])
    if op(out) == "add_at" and out.args[0] is carry and len(out.args) == 2 \
            and type(out.args[1]) is Node and _static(out.params["index"].items):
        items = out.params["index"].items
        weighted = _weighted_row(out.args[1], t, inner, body)
        if weighted is not None:  # `g_w[f] += g * windows[t]`: one product after the loop
            scale, stack, k = weighted
            return ("weighted", k, scale, (stack, items))
        return ("part", 0, out.args[1], items)  # `g_w[f] += g`
    return None


def _column_product(term, t, inner, body):
    """("columns", k, g, the stack) when term is `g @ S[t + k].T` of two columns, (m, 1)
    and (p, 1): the outer products a recurrent net on one example sums (`dWhh +=
    np.dot(dh_raw, hs[t - 1].T)`), all of them reshape(gs, (n, m)).T @ reshape(S, (n, p))."""
    if op(term) != "matmul" or len(term.args) != 2 or op(term.args[1]) != "transpose" \
            or term.args[1].params.get("axes") not in (None, (1, 0)):
        return None
    g, row = term.args[0], term.args[1].args[0]
    if type(g) is not Node or len(g.shape) != 2 or g.shape[1] != 1 \
            or len(row.shape) != 2 or row.shape[1] != 1:
        return None
    stack, k = _row_of_stack(row, t, inner, body)
    return ("columns", k, g, stack) if stack is not None else None


def _weighted_row(term, t, inner, body):
    """(s, the stack, k) when term is a number s of the step times row t + k of a stack
    of the loop's (s * windows[t]), both of the term's dtype."""
    if op(term) != "multiply" or len(term.args) != 2 \
            or not all(type(d) is int for d in term.shape):
        return None
    for scale, row in (term.args, term.args[::-1]):
        if type(scale) is Node and type(row) is Node and scale.shape == () \
                and row.shape == term.shape and scale.dtype == row.dtype == term.dtype:
            stack, k = _row_of_stack(row, t, inner, body)
            if stack is not None:
                return scale, stack, k
    return None


def _static(items):
    return all(type(i) is int or type(i) is slice and all(
        type(b) in (int, type(None)) for b in (i.start, i.stop, i.step)) for i in items)


def _row_then_static(items):
    """An index `[t + k, ...]`: row t + k (argument 2), then static slices and ints."""
    return bool(items) and items[0] == Slot(2) and _static(items[1:])


def _row_of_stack(node, t, inner, body):
    """(the outer value, k) when `node` is row t + k of an invariant of the loop."""
    if op(node) != "getitem" or node.params["index"].items != (Slot(1),) or len(node.args) != 2:
        return None, None
    base = node.args[0]
    if base not in inner.inputs[1 + body.carries:]:
        return None, None
    k = _offset(node.args[1], t)
    return (base, k) if k is not None else (None, None)


def _offset(node, t):
    """k when node is t + k (t, t + 1, t - 1), else None."""
    if node is t:
        return 0
    if op(node) in ("add", "subtract") and len(node.args) == 2 and node.args[0] is t \
            and type(node.args[1]) is int:
        return node.args[1] if op(node) == "add" else -node.args[1]
    return None


def _summed(graph, kind, init, stack, rows, lo, n, out, made):
    """The outer nodes of one accumulation summed after the loop; returns the last."""
    def new(prim, args, result_shape, **params):
        node = graph.new_node(PRIMITIVES[prim], args, like=stack, params=params,
                              shape=result_shape, dtype=out.dtype)
        made.append(node)
        return node
    if kind == "rows":  # `rows`: the static rest of the index
        return new("add_at", (init, stack), out.shape,
                   index=Index((slice(lo, lo + n), *rows)), unique=True)
    if kind == "sum":
        total = new("sum", (stack,), out.shape, axis=(0, 1), keepdims=False, dtype=None)
        return new("add", (init, total), out.shape)
    if kind == "weighted":  # `g_w[f] += gs @ windows[lo:hi]`, the rows flattened
        rows, items = rows
        size = int(np.prod(rows.shape[1:]))
        sliced = new("getitem", (rows,), (n, *rows.shape[1:]), index=Index((slice(lo, lo + n),)))
        flat = new("reshape", (sliced,), (n, size), shape=(n, size))
        product = new("matmul", (stack, flat), (size,))
        part = new("reshape", (product,), rows.shape[1:], shape=rows.shape[1:])
        return new("add_at", (init, part), out.shape, index=Index(items), unique=True)
    if kind == "part":  # `g_w[f] += gs.sum(axis=0)`: one update of the part for every step
        total = new("sum", (stack,), stack.shape[1:], axis=0, keepdims=False, dtype=None)
        return new("add_at", (init, total), out.shape, index=Index(rows), unique=True)
    sliced = new("getitem", (rows,), (n, *np.shape(rows)[1:]), index=Index((slice(lo, lo + n),)))
    if kind == "columns":  # the steps' columns side by side: gs.T @ S[lo:hi]
        left, right = _as_rows(new, stack, n), _as_rows(new, sliced, n)
    else:  # the steps' rows one under another: S[lo:hi].T @ gs
        left, right = _as_rows(new, sliced, n * np.shape(rows)[1]), _as_rows(new, stack, n * np.shape(rows)[1])
    left_t = new("transpose", (left,), left.shape[::-1], axes=None)
    product = new("matmul", (left_t, right), out.shape)
    return new("add", (init, product), out.shape)


def _as_rows(new, x, count):
    """x reshaped to `count` rows."""
    shape = (count, int(np.prod(x.shape)) // count)
    return new("reshape", (x,), shape, shape=shape)


# ---- rebuilding a scan and its readers ------------------------------------------------------
def _pruned(inner):
    """A body without the nodes none of its outputs or tests needs (a guard checked at
    every step, a `while` loop's test)."""
    live = ancestors(roots_of(inner))
    return replace(inner, nodes=[n for n in inner.nodes if n in live])


def _rebuilt(graph, loop, body, args, made, remap, new_loop=None):
    """The graph with `loop` as a new scan node of `body` reading `args`, the nodes
    `made` (computed before it, or after it from its outputs) beside it, and its old
    outputs read from the new node (`remap`: old output index -> new, and the finals
    computed after the loop)."""
    if new_loop is None:
        new_loop = graph.new_node(scan, tuple(args), like=loop, params={"body": body},
                                  shape=(), dtype=np.dtype(bool))
    index, finals = remap.get("index"), remap.get("finals", {})
    replace_by = {}
    outs = []
    for node in graph.nodes:
        if op(node) == "scan_out" and node.args[0] is loop:
            j = node.params["output"]
            if j in finals:
                replace_by[node] = finals[j]
            else:
                new = node.replace(args=(new_loop,), params={
                    **node.params, "output": j if index is None else index[j]})
                replace_by[node] = new
                outs.append(new)
    before = [m for m in made if not _reads(m, new_loop)]
    after = [m for m in made if m not in before]
    nodes = []
    for node in graph.nodes:
        if node is loop:
            nodes += before + [new_loop] + outs + after
        elif node not in replace_by:
            nodes.append(node)
    return substitute(replace(graph, nodes=nodes), replace_by)[0], new_loop


def _reads(node, loop):
    return loop in ancestors([node])
