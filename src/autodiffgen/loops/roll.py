"""roll(graph, prepare): each loop the trace ran step by step (Graph.loops) as one loop node.

The trace records a loop's every step: a training step's update of four parameters is
four copies of Adam's thirteen primitives. When the steps are proven one program, they
become one `loop` node whose body is step 0's graph, and the code reads as written by
hand: `for p, g, m, v in ((params_W1, g_params_W1, ...), ...):` over one step's lines.

The proof compares the steps position by position, as the trace recorded them (the same
Python taking the same path records the same nodes in the same order):

- a step's nodes are those recorded while it ran (Steps: ids first..end); those reading
  its items (directly or through each other) are its body, the others (`1 - beta1`, the
  bias corrections: they read only values from outside) are invariants, computed once
  before the loop from step 0's copy;
- at every position the same primitive, parameters and dtype; an argument that is the
  same position of the same step, the same item, the same value from outside, or an
  equal constant; each step's outputs at the same positions;
- shapes may differ from step to step (a weight and a bias) only where every body node is
  elementwise on operands of its own shape or 0-d, so the one body serves each;
- nothing outside a step reads its body but through its declared outputs; no guard or
  random draw in it; every item the loop writes into (`into`) is a donated input that
  nothing reads after the loop.

Anything unproven leaves the graph as it was (the steps written out one after another);
AUTODIFFGEN_EXPLAIN=1 logs why. AUTODIFFGEN_LOOPS=0 turns rolling off, to compare; the
user's own loops are kept as loops too (loops/scan.py) unless AUTODIFFGEN_LOOPS=updates.
"""

import logging
import os
from dataclasses import replace

import numpy as np

from ..graph import Node, constant_key, has_effect, is_guard, users_of
from ..passes.rewrite import substitute
from ..rules import elementwise_ufunc
from ..rules.loops import Body, loop, loop_out
from ..tree import leaves

# AUTODIFFGEN_LOOPS: unset ("all"), the user's loops and a training step's update are kept
# as loops wherever their steps are proven one program; "updates", only the update (the
# user's loops written out step by step, as before issue 27); "0", every loop written out;
# "require", as "all", and a loop that cannot be kept is an error naming its line
_SETTING = os.environ.get("AUTODIFFGEN_LOOPS", "all")
ENABLED = _SETTING != "0"
USER_LOOPS = _SETTING in ("all", "require")
REQUIRED = _SETTING == "require"


def required():
    """Whether a loop that cannot be kept is an error (read when asked: a setting)."""
    return REQUIRED
LOG = logging.getLogger("autodiffgen")


class Unproven(Exception):
    """Why the steps of a loop are not shown to be one program."""


def roll(graph, prepare):
    """`graph` with each loop of Graph.loops that is proven one program as one loop node;
    `prepare(body)`: the passes a body's graph gets (the pipeline's own)."""
    declared, graph = graph.loops, replace(graph, loops=()) if graph.loops else graph
    if not ENABLED:
        return graph
    for steps in declared:
        try:
            graph = _rolled(graph, steps, prepare)
        except Unproven as why:
            explain(graph, f"the loop over {', '.join(steps.names)} is written out step by "
                           f"step: {why}")
    if not USER_LOOPS:
        return graph
    from .scan import roll_loops  # (it builds on this module's helpers)
    return roll_loops(graph, prepare)


def explain(graph, message):
    """Say why a loop is written out step by step, when AUTODIFFGEN_EXPLAIN=1."""
    if os.environ.get("AUTODIFFGEN_EXPLAIN", "0") not in ("", "0"):
        LOG.warning("autodiffgen: %s: %s", graph.name, message)


def graph_of_step(graph, inputs, nodes, outputs, derivative_of=None, donated=frozenset()):
    """One step of a loop of `graph` as a graph of its own (a loop's body)."""
    return replace(graph, name=f"{graph.name}_step", params=[], inputs=inputs, nodes=nodes,
                   outputs=outputs, paths={}, derivative_of=derivative_of or {},
                   fresh_from=None, donated=donated, captured=[], marks={},
                   tried=frozenset(), writes=(), statics={}, batch=None, doc="",
                   signature="", loops=())


def _rolled(graph, steps, prepare):
    if len(steps.steps) < 2:
        raise Unproven("fewer than two steps")
    parts = [_split(graph, *step) for step in steps.steps]
    same_shapes = _prove(parts)
    if not same_shapes:
        _check_elementwise(parts)
    _check_escapes(graph, parts)
    outer = _outer_reads(parts[0])
    after = _readers_first(graph, parts, steps.into, outer)
    body = _body(graph, parts[0], outer, steps, prepare)
    return _with_loop(graph, parts, outer, after, body, steps.into)


def _split(graph, first, end, items, outputs):
    """(items, outputs, body nodes, invariant nodes) of one step, in the graph's order."""
    present = set(graph.nodes).union(graph.inputs)
    if not all(v in present for v in items + outputs):
        raise Unproven("a step's values are not in the graph")
    reads_item = set(items)
    body, invariant = [], []
    for node in graph.nodes:
        if first <= node.id < end:
            if is_guard(node) or has_effect(node):
                raise Unproven(f"a step has a {node.prim.name}, which a loop does not keep yet")
            if any(type(a) is Node and a in reads_item for a in node.args):
                reads_item.add(node)
                body.append(node)
            else:
                invariant.append(node)
    if not all(o in reads_item for o in outputs):
        raise Unproven("a step's output is not computed from its items")
    return items, outputs, body, invariant


def _prove(parts):
    """Whether every step is step 0's program (raises Unproven if not); returns whether
    the shapes are equal too."""
    items0, outputs0, body0, invariant0 = parts[0]
    same_shapes = True
    for i, (items, outputs, body, invariant) in enumerate(parts[1:], 1):
        if len(items) != len(items0) or len(body) != len(body0) \
                or len(invariant) != len(invariant0):
            raise Unproven(f"step {i} records {len(body)} values, step 0 {len(body0)}")
        at = dict(zip(items, items0))
        for mine, theirs in zip(invariant + body, invariant0 + body0):
            if mine.prim is not theirs.prim or mine.dtype != theirs.dtype \
                    or not _same_params(mine.params, theirs.params) \
                    or len(mine.args) != len(theirs.args) \
                    or not all(map(lambda a, b: _same_arg(a, b, at), mine.args, theirs.args)):
                raise Unproven(f"step {i} computes {mine.prim.name} where step 0 computes "
                               f"{theirs.prim.name}, or from other values")
            same_shapes &= mine.shape == theirs.shape
            at[mine] = theirs
        if any(at.get(o) is not p for o, p in zip(outputs, outputs0)):
            raise Unproven(f"step {i}'s outputs are other values than step 0's")
        same_shapes &= all(a.shape == b.shape for a, b in zip(items, items0))
    return same_shapes


def _same_arg(mine, theirs, at):
    if type(mine) is Node:
        return mine is theirs and mine not in at or at.get(mine) is theirs
    return type(theirs) is not Node and constant_key(mine) == constant_key(theirs)


def _same_params(a, b):
    return a.keys() == b.keys() and all(constant_key(a[k]) == constant_key(b[k]) for k in a)


def _check_elementwise(parts):
    """Steps of different shapes share one body only if it never depends on the shape:
    each body node elementwise on operands of its own shape, or 0-d, in every step."""
    for items, _, body, _ in parts:
        for node in body:
            if not (elementwise_ufunc(node.prim) or node.prim.op == "astype"):
                raise Unproven(f"its steps differ in shape and {node.prim.name} depends on it")
            for a in node.args:
                if type(a) is Node and a.shape not in ((), node.shape) \
                        or type(a) is not Node and getattr(a, "ndim", 0):
                    raise Unproven("its steps differ in shape and a value is broadcast")


def _check_escapes(graph, parts):
    """A step's values are read outside it only as its declared outputs (by the graph's
    outputs or later nodes), its invariants (but step 0's) only inside it."""
    users = users_of(graph.nodes)
    returned = {o for o in leaves(graph.outputs) if type(o) is Node}
    for i, (_, outputs, body, invariant) in enumerate(parts):
        inside = set(body).union(invariant)
        free = set(outputs)
        for node in body + (invariant if i else []):
            if node not in free and (node in returned or
                                     any(u not in inside for u in users.get(node, ()))):
                raise Unproven(f"a value of step {i} is read outside the step")


def _outer_reads(part):
    """The values of the outer graph step 0's body reads besides its items: the loop's
    invariants (values from before it, and the step's invariant nodes), in order."""
    items, _, body, _ = part
    mine = set(items).union(body)
    return list(dict.fromkeys(a for n in body for a in n.args if type(a) is Node and a not in mine))


def _readers_first(graph, parts, into, outer):
    """The loop writes each step's outputs into its items `into`: each must be a donated
    input, which it may overwrite once every other reader has read it. Returns those
    readers that the loop's own arguments do not already put before it (the loss's
    `np.sum(b ** 2)`, which its update does not need): the loop reads them too, for its
    order alone."""
    before = set()
    stack = [a for items, *_ in parts for a in items] + outer
    while stack:
        node = stack.pop()
        if node not in before:
            before.add(node)
            stack.extend(a for a in node.args if type(a) is Node)
    inside = {n for _, _, body, invariant in parts for n in body + invariant}
    users = users_of(graph.nodes)
    returned = {o for o in leaves(graph.outputs) if type(o) is Node}
    outputs = {o for _, outs, _, _ in parts for o in outs}
    after = []
    for items, *_ in parts:
        for j in into:
            item = items[j]
            if item not in graph.donated or item in returned:
                raise Unproven("it would write into a value the code may not overwrite")
            after += [u for u in users.get(item, ()) if u not in inside and u not in before]
    after = list(dict.fromkeys(after))
    stack = list(after)
    while stack:  # none of them may need what the loop computes
        node = stack.pop()
        if node in outputs:
            raise Unproven("a value it writes into is read after it, with what it computes")
        stack.extend(a for a in node.args if type(a) is Node and a not in before)
    return after


def _body(graph, part, outer, steps, prepare):
    """Step 0 as a graph: inputs the items (named as the loop variables), then the
    invariants; its nodes step 0's body; outputs step 0's outputs."""
    items, outputs, body, _ = part
    inputs = [item.replace(prim=None, args=(), params={}, name=name, grad_of=None)
              for item, name in zip(items, steps.names)]
    inputs += [value.replace(prim=None, args=(), params={}, grad_of=None) for value in outer]
    new = dict(zip((*items, *outer), inputs))
    nodes = []
    for node in body:
        new[node] = copy = node.replace(args=tuple(new.get(a, a) if type(a) is Node else a
                                                   for a in node.args))
        nodes.append(copy)
    step = graph_of_step(graph, inputs, nodes, tuple(new[o] for o in outputs),
                         donated=frozenset(inputs[j] for j in steps.into))
    return Body(replace(prepare(step), inputs=inputs), len(items), tuple(steps.into),
                len(steps.steps), steps.comment)


def _with_loop(graph, parts, outer, after, body, into):
    """The graph with the steps' nodes gone (step 0's invariants kept), one loop node
    after the last of them, and each output read as `loop_out` of its step."""
    args = tuple(a for items, *_ in parts for a in items) + tuple(outer) + tuple(after)
    last = parts[-1][1][-1]
    node = graph.new_node(loop, args, like=last, params={"body": body}, shape=(),
                          dtype=np.dtype(bool))
    outs, replace_by = [], {}
    for i, (items, outputs, _, _) in enumerate(parts):
        for j, out in enumerate(outputs):
            replace_by[out] = graph.new_node(loop_out, (node, items[into[j]]), like=out,
                                             params={"step": i, "output": j})
            outs.append(replace_by[out])
    dead = {n for i, (_, _, body_nodes, invariant) in enumerate(parts)
            for n in body_nodes + (invariant if i else [])}
    last = {n for _, _, b, inv in parts for n in b + inv}
    return spliced(graph, dead, last, [node, *outs], args, replace_by)


def spliced(graph, dead, steps, made, args, replace_by):
    """The graph without the nodes `dead`, the loop's nodes `made` where the last of
    `steps` was (after every value it reads, `args`), then `replace_by` substituted."""
    at = max((i for i, n in enumerate(graph.nodes) if n in steps), default=None)
    if at is None:  # (each value of its steps is read again outside them)
        raise Unproven("none of its steps' values is left to the loop")
    seen = set(graph.inputs)
    nodes = []
    for i, node in enumerate(graph.nodes):
        if node not in dead:
            nodes.append(node)
            seen.add(node)
        if i == at:
            if not all(a in seen for a in args if type(a) is Node):
                raise Unproven("a value the loop reads is computed after its steps")
            nodes += made
    return substitute(replace(graph, nodes=nodes), replace_by)[0]
