"""Dead-code elimination: keep only the nodes the outputs and guards need, and the inputs
they read.

Runs after every other pass has redirected uses, so it is what actually removes the
values a simplification made unnecessary (and the unpacking of unused inputs).
"""

import dataclasses

from ..graph import Node, roots_of


def dce(graph):
    live = _reachable(roots_of(graph))
    nodes = [n for n in graph.nodes if n in live]
    inputs = [n for n in graph.inputs if n in live]
    if len(nodes) == len(graph.nodes) and len(inputs) == len(graph.inputs):
        return graph, False
    return dataclasses.replace(graph, nodes=nodes, inputs=inputs), True


def _reachable(roots):
    """The nodes the roots read, directly or not (a plain walk: no order is needed)."""
    live, stack = set(), list(roots)
    while stack:
        node = stack.pop()
        if node not in live:
            live.add(node)
            stack.extend(a for a in node.args if type(a) is Node and a not in live)
    return live
