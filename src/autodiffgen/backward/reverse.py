"""Reverse mode: replay the VJP rules from the output back to the differentiated inputs.

The same loop serves both engines. While tracing, `lookup` gives Boxes, so the rules
record the backward pass as nodes of the same graph (then `fused_graph` collects what
the outputs need, in creation order: forward first, then backward). For the dynamic
tape, `lookup` gives concrete arrays and the rules simply compute.
"""

import contextlib
import warnings

import numpy as np

from ..errors import ArgumentError, OutputError, at, def_site, function_name
from ..graph import Graph, Node, toposort
from ..rules import PRIMITIVES
from ..trace.boxes import Box, result_dtype
from ..tree import (
    is_container,
    is_mapping,
    items,
    leaves,
    map_tree,
    matching_children,
    rebuild,
    same_node,
    step_text,
    structure_text,
)
from .checkpointing import lookup_for
from .cotangent_sums import Cotangents, plain
from .node_rules import Step, graph_rules, rule_of

_WARNED_BOOL = {}  # warnings' registry: one warning per place, however often it traces


def check_output(out, fun, scalar):
    """The differentiated function must return a float (and, for grad, one element: a
    scalar, or an array of shape (1,) or (1, 1), as Autograd takes)."""
    value = out.value if type(out) is Box else out
    where = out.node.loc if type(out) is Box and out.node.loc else def_site(fun)
    name = function_name(fun)
    try:
        dtype, shape = result_dtype(value), np.shape(value)
    except (TypeError, ValueError):  # not array-like at all, e.g. a tuple of arrays
        dtype, shape = None, None
    if dtype == np.bool_:  # as Autograd: a comparison has a zero derivative, said
        filename, line = where if isinstance(where, tuple) else ("<unknown>", 0)
        warnings.warn_explicit(at(where, f"{name} returned a boolean, whose derivative is "
                                  "zero"), UserWarning, filename, line,
                               registry=_WARNED_BOOL)
    elif dtype is None or not np.issubdtype(dtype, np.inexact):
        raise OutputError(at(where, f"{name} must return a floating-point value to be "
                             f"differentiated, but it returned {_kind_of(value)}"))
    if scalar and int(np.prod(shape)) != 1:
        raise OutputError(at(where, f"grad needs a scalar output, but {name} returned "
                             f"an array of shape {shape}; reduce it (e.g. .sum() or .mean()) "
                             "or use a Jacobian"))


def split_aux(out, fun):
    """(output, aux) of a function differentiated with has_aux=True, which must return a
    pair; aux is any pytree whose leaves are arrays or numbers (None: an empty subtree, as
    in JAX). Its traced leaves are outputs of the generated code like any other; no
    cotangent is seeded at them, so no derivative flows from them, and the caller gets
    plain arrays (no Box escapes: outside a trace, generated code computes on arrays)."""
    name = function_name(fun)
    if type(out) not in (tuple, list) or len(out) != 2:
        what = f"a {type(out).__name__} of {len(out)}" if type(out) in (tuple, list) \
            else _kind_of(out.value if type(out) is Box else out)
        raise OutputError(at(def_site(fun), f"{name} is differentiated with has_aux=True, "
                             f"so it must return a pair (output, aux), but it returned {what}"))
    value, aux = out
    for path, leaf in _paths(aux, "aux"):
        plain = leaf.value if type(leaf) is Box else leaf
        if plain is None or _leaf_dtype(plain) is not None and \
                _leaf_dtype(plain) != np.dtype(object) and type(plain) not in (str, bytes):
            continue
        where = leaf.node.loc if type(leaf) is Box and leaf.node.loc else def_site(fun)
        raise OutputError(at(where, f"{name} returned, with has_aux=True, an auxiliary value "
                             f"{path} that is {_kind_of(plain)}: every leaf of aux must be an "
                             "array or a number"))
    return value, aux


def _paths(tree, path):
    if is_container(tree):
        for key, child in items(tree):
            yield from _paths(child, path + _step(tree, key))
    else:
        yield path, tree


def check_output_tree(out, fun):
    """A VJP's output: what check_output takes, or a pytree (tuple, list, dict) of floats
    (or complex numbers), ints and bools, arrays or Python numbers. Integer and boolean leaves (a count, a mask
    returned beside the value) have no derivative: their cotangents are ignored."""
    if not is_container(out):
        return check_output(out, fun, scalar=False)
    for leaf in leaves(out):
        value = leaf.value if type(leaf) is Box else leaf
        kind = _leaf_dtype(value)
        if kind is None or not (np.issubdtype(kind, np.inexact) or
                                np.issubdtype(kind, np.integer) or kind == np.bool_):
            where = leaf.node.loc if type(leaf) is Box and leaf.node.loc else def_site(fun)
            raise OutputError(at(where, f"{function_name(fun)} returned a pytree "
                                 f"{structure_text(out)} with a leaf that is "
                                 f"{_kind_of(value)}: every leaf must be a number or an "
                                 "array of numbers to be differentiated"))


def _leaf_dtype(value):
    if value is None or type(value) in (str, bytes):
        return None
    try:
        return result_dtype(value)
    except (TypeError, ValueError):
        return None


def seed_like(out):
    """A cotangent tree shaped like `out` for tracing a VJP: ones (only the type matters)
    at the leaves with a derivative, None at the others."""
    def seed(leaf):
        value = leaf.value if type(leaf) is Box else leaf
        dtype = result_dtype(value)
        return np.ones(np.shape(value), dtype) if np.issubdtype(dtype, np.inexact) else None
    return map_tree(out, seed)


def cotangent_like(out, g, loc):
    """The user's cotangent g for the output `out` (a value or a pytree of them), checked
    leaf by leaf and put in out's structure (a dict's keys in out's order, as JAX): None
    where a leaf has no derivative (an int, a bool), zeros for None at a float leaf."""
    def walk(o, t, path):
        if is_container(o):
            if t is None:
                return rebuild(o, [walk(c, None, path + _step(o, k)) for k, c in items(o)])
            if not same_node(o, t):
                raise ArgumentError(at(loc, f"the cotangent{path} has structure "
                                       f"{structure_text(t)} but the function returned "
                                       f"{structure_text(o)}"))
            return rebuild(o, [walk(c, tc, path + _step(o, k)) for (k, c), tc
                               in zip(items(o), matching_children(o, t))])
        o, shape = plain(o), np.shape(plain(t))
        dtype = result_dtype(o)
        if not np.issubdtype(dtype, np.inexact):
            return None
        if t is None:
            return np.zeros(np.shape(o), dtype)
        if shape != np.shape(o):
            raise ArgumentError(at(loc, f"the cotangent{path} has shape {shape} but the "
                                   f"function returned shape {np.shape(o)}"))
        return t if type(t) in (np.ndarray, Box) else np.asarray(t, dtype)
    return walk(out, g, "")


def _step(container, key):
    return step_text(key) if is_mapping(container) or type(key) is not int else f"[{key}]"


def cotangents(trace, out_node, wrt, lookup, seed):
    """{input node: cotangent} for the inputs in `wrt` reached from `out_node`.

    Nodes are visited by the child-count toposort, so a node's cotangent is complete
    (every consumer has contributed) before its own rule runs. Also returns, for naming,
    which forward node each recorded cotangent belongs to.
    """
    return cotangents_of_outputs(trace, [(out_node, seed)], wrt, lookup)


def cotangents_of_outputs(trace, seeds, wrt, lookup):
    """`cotangents` for several outputs at once (a pytree output under vjp): `seeds` is
    [(output node, its cotangent)]; one output reached twice gets their sum.

    Autograd's backward pass: pop a node's cotangent, call its rule, add what the rule
    gives into the parents. What the rule is (the primitive's kind of rule, or one a look
    at the graph around the node found) is node_rules.py's business."""
    cots = Cotangents(trace)
    for node, seed in seeds:
        with _recording(trace, node):  # a sum is part of the backward pass (split_graphs)
            cots.add(node, seed)
    order = toposort(list(cots.sums))
    needs = _needs_grad(order, set(wrt))
    found = graph_rules(order, set(cots.sums), needs)  # softmax, sigmoid whole; z - max(z)
    result, cotangent_of = {}, {}
    for node in order:
        g = cots.pop(node)
        if g is None or node not in needs:
            continue
        _note_cotangent(cotangent_of, g, node)
        if node.prim is None:
            result[node] = g
            continue
        step = Step(trace, node, g, lookup_for(trace, node, g, lookup), needs)
        with _recording(trace, node):
            for parent, contribution in (found.get(node) or rule_of(node.prim))(step):
                cots.add(parent, contribution)
    return result, cotangent_of


@contextlib.contextmanager
def _recording(trace, node):
    """The nodes recorded meanwhile are the backward of `node` (named after it)."""
    trace.grad_of = node
    try:
        yield
    finally:
        trace.grad_of = None


def _note_cotangent(cotangent_of, g, node):
    """For naming: g, recorded by the backward, is node's cotangent."""
    if type(g) is Box and g.node.grad_of is not None and g.node not in cotangent_of:
        cotangent_of[g.node] = node


def _needs_grad(order, wrt):
    """Nodes on a path from a differentiated input to the output, with a float dtype."""
    needs = set()
    for node in reversed(order):
        if node in wrt or (np.issubdtype(node.dtype, np.inexact)
                           and any(type(a) is Node and a in needs for a in node.args)):
            needs.add(node)
    return needs


def traced_gradients(trace, out, wrt_tree, seed=None):
    """Record the backward pass; returns the gradient tree (Boxes or constants).

    The output cotangent is `seed` (a tree like `out` of Boxes, e.g. inputs of a VJP
    function, None at leaves without a derivative) or ones.
    """
    wrt = [b.node for b in leaves(wrt_tree) if type(b) is Box]
    pairs = [(o.node, s) for o, s in zip(leaves(out), leaves(seed))
             if _differentiable_leaf(o) and type(s) is Box] if seed is not None else \
        [(out.node, None)] if type(out) is Box else []
    if not pairs:
        return map_tree(wrt_tree, lambda b: _zeros(b) if _differentiable_leaf(b) else None), {}
    with trace:
        if seed is None:
            out_node = out.node
            trace.grad_of = out_node
            pairs = [(out_node, trace.box(PRIMITIVES["ones"], (), {"shape": out_node.shape,
                                                                   "dtype": out_node.dtype},
                                          np.ones(out_node.shape, out_node.dtype)))]
            trace.grad_of = None
        found, cotangent_of = cotangents_of_outputs(trace, pairs, wrt,
                                                    trace.boxes.__getitem__)
        grads = map_tree(wrt_tree, lambda b: or_zeros(found.get(b.node), b)
                         if _differentiable_leaf(b) else None)
    return grads, cotangent_of


def or_zeros(g, leaf):
    """The derivative for one leaf: zeros when none reached it. (That a returned
    derivative owns its memory is passes.ensure_fresh's job, after the optimizations.)"""
    return _zeros(leaf) if g is None else g


def _differentiable_leaf(leaf):
    return type(leaf) is Box and np.issubdtype(leaf.node.dtype, np.inexact)


def _zeros(leaf):
    value = leaf.value if type(leaf) is Box else leaf
    return np.zeros(np.shape(value), result_dtype(value)) if type(leaf) is Box else None


def fused_graph(name, params, trace, outputs, **fields):
    """The nodes the outputs (a tree of Boxes and constants) need, in creation order,
    with the inputs they read; `fields` are the Graph's other fields (its doc, kind...),
    so that the Graph is complete when it is made."""
    outputs, fields = with_writes(trace, outputs, fields)
    roots = [leaf.node for leaf in leaves(outputs) if type(leaf) is Box] + trace.guards + \
        trace.effects + trace.tried
    order = toposort(roots)
    live = set(order)
    nodes = sorted((n for n in order if n.prim is not None), key=lambda n: n.id)
    inputs = [n for n in trace.inputs if n in live]
    return Graph(name, params, inputs, nodes,
                 map_tree(outputs, lambda b: b.node if type(b) is Box else b),
                 captured=trace.captured, marks=trace.marks, tried=frozenset(trace.tried),
                 **fields)


def with_writes(trace, outputs, fields):
    """(outputs, fields) with the items the function assigned into its argument
    containers as one more output, and their paths (argument_writes.py), if any."""
    if not trace.writes:
        return outputs, fields
    paths, values = zip(*trace.writes)
    return (*outputs, tuple(values)), {**fields, "writes": paths}


def split_graphs(name, params, trace, value, grads, seed, fwd_fields=None, bwd_fields=None,
                 aux=None, has_aux=False):
    """A forward function returning (value, residuals) and a backward function of
    (residuals, g): the forward values the backward reads are computed once and saved.
    `fwd_fields`, `bwd_fields`: the Graphs' other fields (doc...), complete when made.
    `has_aux`: the forward function returns (value, residuals, aux)."""
    seeds = [leaf.node for leaf in leaves(seed) if type(leaf) is Box]
    grad_roots = [leaf.node for leaf in leaves(grads) if type(leaf) is Box]
    order = toposort(grad_roots) if grad_roots else []
    bwd_nodes = sorted((n for n in order if n.prim is not None and n.grad_of is not None),
                       key=lambda n: n.id)
    needed = {a for n in bwd_nodes for a in n.args if type(a) is Node and a.grad_of is None}
    needed |= {leaf.node for leaf in leaves(grads)
               if type(leaf) is Box and leaf.node.grad_of is None}
    # a mask's count (generalize_counts.py) the backward may read at run time: it defines
    # it again from
    # the saved mask (generalize_counts.checked_before drops it where the count stays a guard)
    counts = [n for n in trace.guards if n.params["test"] in ("count_nonzero", "len")]
    needed |= {n.args[0] for n in counts}
    residuals = sorted((n for n in needed if n not in seeds), key=lambda n: n.id)
    value_node = map_tree(value, lambda b: b.node if type(b) is Box else b)
    aux_node = map_tree(aux, lambda b: b.node if type(b) is Box else b)
    fwd_outputs = (value_node, tuple(residuals), aux_node) if has_aux else \
        (value_node, tuple(residuals))
    fwd_outputs, fwd_fields = with_writes(trace, fwd_outputs, fwd_fields or {})
    fwd_outputs = map_tree(fwd_outputs, lambda b: b.node if type(b) is Box else b)
    fwd_roots = [r for r in residuals if r.prim is not None] + trace.guards + trace.effects + \
        trace.tried + [n for n in leaves(fwd_outputs) if type(n) is Node]
    fwd_order = set(toposort(fwd_roots)) if fwd_roots else set()
    fwd = Graph(f"{name}_fwd", params, [n for n in trace.inputs if n in fwd_order],
                sorted((n for n in fwd_order if n.prim is not None), key=lambda n: n.id),
                fwd_outputs, captured=trace.captured, marks=trace.marks,
                tried=frozenset(trace.tried), **fwd_fields)
    paths = {r: (0, i) for i, r in enumerate(residuals)}
    for node in seeds:  # g, or g[0]["W"] of a pytree output's cotangent
        paths[node] = (1, *node.params["path"][1:])
    bwd = Graph(f"{name}_bwd", ["residuals", "g"], residuals + seeds, counts + bwd_nodes,
                map_tree(grads, lambda b: b.node if type(b) is Box else b), paths=paths,
                **(bwd_fields or {}))
    return fwd, bwd


def _kind_of(value):
    if isinstance(value, (np.ndarray, np.generic)):
        return f"an array of dtype {value.dtype} and shape {value.shape}"
    return f"a {type(value).__name__}"
