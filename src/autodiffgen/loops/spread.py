"""Values a loop saves at every step that are the same at every step, saved once.

A naive convolution's loop over a row's windows computes `top = i * stride` at every
step from values outside the loop; hoist.py computes it once before the loop, but the
backward reads it as each step's own, so the loop still wrote it into a stack at every
step (`values[t] = top`) and the backward read it back (`top = values[t]`): two array
element accesses per step for a number that never changes. Here such a saved value
becomes, after the loop, the value spread over the steps (`np.broadcast_to(top, (n,))`,
a view, nothing written), and a read of one of its rows is the value itself: in a
backward loop's body (one more invariant of that loop: hoist.hoisted_invariants) and
outside (passes/simplify.py folds `np.broadcast_to(v, (n, ...))[k]` to v).
"""

from dataclasses import replace

from ..graph import Node, op
from ..rules import PRIMITIVES


def spread_invariants(graph, loop, rebuilt):
    """(graph, the new loop node) with each saved value of `loop` that is one of its
    invariants spread after it instead; `rebuilt`: hoist._rebuilt."""
    body = loop.params["body"]
    inner = body.graph
    outer_of = dict(zip(inner.inputs[1 + body.carries:], loop.args[body.carries:]))
    stacks = {n.params["output"]: n for n in graph.nodes
              if op(n) == "scan_out" and n.args[0] is loop}
    keep, finals, made = [], {}, []
    for j, out in enumerate(inner.outputs):
        if j < body.carries or type(out) is not Node or out not in outer_of or j not in stacks:
            keep.append(j)
            continue
        stack = stacks[j]
        finals[j] = graph.new_node(PRIMITIVES["broadcast_to"], (outer_of[out],), like=stack,
                                   params={"shape": stack.shape}, shape=stack.shape,
                                   dtype=stack.dtype)
        finals[j].name = stack.name
        made.append(finals[j])
    if not finals:
        return graph, loop
    new_inner = replace(inner, outputs=tuple(inner.outputs[j] for j in keep))
    index = {j: k for k, j in enumerate(keep)}
    return rebuilt(graph, loop, replace(body, graph=new_inner), list(loop.args), made,
                   {"index": index, "finals": finals})


def spread_value(value):
    """v when `value` is v spread along a new first axis (np.broadcast_to(v, (n, *v's
    shape))), else None: each of its rows is v."""
    if type(value) is not Node or op(value) != "broadcast_to" or type(value.args[0]) is not Node:
        return None
    v = value.args[0]
    return v if value.shape[1:] == v.shape and value.dtype == v.dtype else None
