"""Returned derivatives own their memory.

After simplification a gradient can turn out to be an input itself (the gradient of
sum(x * y) with respect to y is x), a view of one or of a constant, a read-only
broadcast, or the same array as another output. A caller who updates a gradient in place
must never change their own data, a constant of the generated code or another gradient,
so every output that is not a new array of its own is copied, once, at the end. Unlike
the optimizations this always runs, passes on or off.
"""

import dataclasses

from ..graph import Node
from ..rules import PRIMITIVES
from ..rules.buffers import owns
from ..tree import leaves, map_tree


def ensure_fresh(graph):
    if graph.fresh_from is None:
        return graph
    opaque = set(graph.inputs)
    taken = {leaf for leaf in leaves(graph.outputs[:graph.fresh_from]) if type(leaf) is Node}
    copies = []

    def protect(leaf):
        if type(leaf) is not Node:
            return leaf  # a constant: the emitter writes np.copy(...) for arrays
        if owns(leaf) and leaf not in opaque and leaf not in taken:
            taken.add(leaf)
            return leaf
        copy = graph.new_node(PRIMITIVES["copy"], (leaf,), like=leaf, grad_of=leaf.grad_of or leaf)
        copies.append(copy)
        return copy

    owned = map_tree(graph.outputs[graph.fresh_from:], protect)
    if not copies:
        return graph
    return dataclasses.replace(graph, nodes=graph.nodes + copies,
                               outputs=graph.outputs[:graph.fresh_from] + tuple(owned))
