"""The one way passes change a graph: substitute values for nodes, copying what changes.

Nothing is mutated: a node whose arguments change is replaced by a copy, and the copy
takes over the original's name, location and role, so the emitted code reads the same.
"""

import dataclasses

from ..graph import Node
from ..tree import map_tree


def clone(node, args=None, prim=None, params=None):
    """A copy of `node` with other arguments (and primitive or parameters)."""
    copy = Node(node.id, prim or node.prim, node.args if args is None else tuple(args),
                node.params if params is None else params, node.shape, node.dtype,
                node.loc, node.stack, node.grad_of)
    copy.name, copy.trace_id = node.name, node.trace_id
    return copy


def substitute(graph, replace):
    """`graph` with every use of a key of `replace` reading its value instead.

    A value is a node already in the graph, a constant, or a new node (made with `clone`)
    that takes the replaced node's place in the order. Returns (graph, changed)."""
    if not replace:
        return graph, False
    present = set(graph.nodes)
    new_of = {}

    def resolve(arg):
        while type(arg) is Node and arg in replace:
            arg = replace[arg]
        return new_of.get(arg, arg) if type(arg) is Node else arg

    def renew(node):
        args = tuple(resolve(a) for a in node.args)
        if any(a is not b for a, b in zip(args, node.args)):
            new_of[node] = clone(node, args)
        return new_of.get(node, node)

    nodes = []
    for node in graph.nodes:
        if node not in replace:
            nodes.append(renew(node))
            continue
        target = replace[node]
        is_new = type(target) is Node and target.prim is not None and target not in present
        if is_new and target not in new_of:
            nodes.append(renew(target))  # a new node, in the place of the one it replaces
            new_of.setdefault(target, target)
    outputs = map_tree(graph.outputs, lambda o: resolve(o) if type(o) is Node else o)
    derivative_of = {}
    for node, of in graph.derivative_of.items():
        target = resolve(node)
        if type(target) is Node:
            derivative_of.setdefault(target, of)
    return dataclasses.replace(graph, nodes=nodes, outputs=outputs,
                               derivative_of=derivative_of), True
