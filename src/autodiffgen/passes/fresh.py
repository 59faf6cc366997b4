"""Returned derivatives own their memory.

After simplification a gradient can turn out to be an input itself (the gradient of
sum(x * y) with respect to y is x), a view of one, a read-only broadcast, or the same
array as another output. A caller who updates a gradient in place must never change
their own data or another gradient, so each such output is copied once, at the end.
Unlike the optimizations this always runs, passes on or off.
"""

import dataclasses

from ..graph import Node
from ..rules import PRIMITIVES
from ..tree import leaves, map_tree

_VIEWS = {"reshape", "transpose", "squeeze", "expand_dims", "getitem", "broadcast_to",
          "stop_gradient"}


def ensure_fresh(graph):
    if graph.fresh_from is None:
        return graph
    opaque = set(graph.inputs)
    shared = {_base(leaf, opaque)[0] for leaf in leaves(graph.outputs[:graph.fresh_from])
              if type(leaf) is Node}
    next_id = max((n.id for n in graph.nodes + graph.inputs), default=0) + 1
    copies = []

    def protect(leaf):
        nonlocal next_id
        if type(leaf) is not Node:
            return leaf
        base, broadcast = _base(leaf, opaque)
        if not (broadcast or base in opaque or base in shared):
            shared.add(base)
            return leaf
        copy = Node(next_id, PRIMITIVES["copy"], (leaf,), {}, leaf.shape, leaf.dtype,
                    leaf.loc, leaf.stack, leaf.grad_of or leaf)
        copy.trace_id = leaf.trace_id
        next_id += 1
        copies.append(copy)
        return copy

    owned = map_tree(graph.outputs[graph.fresh_from:], protect)
    if not copies:
        return graph
    return dataclasses.replace(graph, nodes=graph.nodes + copies,
                               outputs=graph.outputs[:graph.fresh_from] + tuple(owned))


def _base(node, opaque):
    """The node whose memory `node` may share, and whether a broadcast view is between."""
    broadcast = False
    while node not in opaque and node.prim is not None and node.prim.name in _VIEWS \
            and type(node.args[0]) is Node:
        broadcast = broadcast or node.prim.name == "broadcast_to"
        node = node.args[0]
    return node, broadcast
