"""Returned derivatives own their memory.

After simplification a gradient can turn out to be an input itself (the gradient of
sum(x * y) with respect to y is x), a view of one or of a constant, a read-only
broadcast, or the same array as another output. A caller who updates a gradient in place
must never change their own data, a constant of the generated code or another gradient,
so every output that is not a new array of its own is copied, once, at the end. Unlike
the optimizations this always runs, passes on or off.

A reshape or transpose of a buffer the function made (`g_x = np.reshape(g_rows, x.shape)`,
the gradient of a flattened input) is such a new array too, as long as no other output
looks into that buffer: nothing runs after the return, so the caller's view is the only
way into it, and copying it would only cost a pass over the gradient.
"""

import dataclasses

from ..graph import Node, op
from ..rules import PRIMITIVES
from ..rules.buffers import owns
from ..tree import leaves, map_tree

# views that show every element of their base once, writable: the base's buffer, reshaped
_WHOLE_VIEWS = {"reshape", "transpose", "squeeze", "expand_dims"}


def ensure_fresh(graph):
    if graph.fresh_from is None:
        return graph
    opaque = set(graph.inputs)
    taken = {base_of(leaf) for leaf in leaves(graph.outputs[:graph.fresh_from])
             if type(leaf) is Node}
    copies = []

    def protect(leaf):
        if type(leaf) is not Node:
            return leaf  # a constant: the emitter writes np.copy(...) for arrays
        base = base_of(leaf)
        if owns(base) and base not in opaque and base not in taken:
            taken.add(base)
            return leaf
        copy = graph.new_node(PRIMITIVES["copy"], (leaf,), like=leaf, grad_of=leaf.grad_of or leaf)
        copies.append(copy)
        return copy

    owned = map_tree(graph.outputs[graph.fresh_from:], protect)
    if not copies:
        return graph
    return dataclasses.replace(graph, nodes=graph.nodes + copies,
                               outputs=graph.outputs[:graph.fresh_from] + tuple(owned))


def base_of(node):
    """The value whose buffer node is, through reshapes and transposes (node itself if it
    is none of those)."""
    while op(node) in _WHOLE_VIEWS and type(node.args[0]) is Node:
        node = node.args[0]
    return node
