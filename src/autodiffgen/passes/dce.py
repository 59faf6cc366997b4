"""Dead-code elimination: keep only the nodes the outputs and guards need, and the inputs
they read.

Runs after every other pass has redirected uses, so it is what actually removes the
values a simplification made unnecessary (and the unpacking of unused inputs).
"""

from ..graph import Node, roots_of


def dce(graph):
    live = _reachable(roots_of(graph))
    dead = [n for n in graph.nodes if n not in live] + [n for n in graph.inputs if n not in live]
    if not dead:
        return graph, False
    return graph.erase(dead), True


def _reachable(roots):
    """The nodes the roots read, directly or not (a plain walk: no order is needed)."""
    live, stack = set(), list(roots)
    push, pop, add = stack.extend, stack.pop, live.add
    while stack:  # arguments pushed as they are (constants too), sorted out when popped
        node = pop()
        if type(node) is Node and node not in live:
            add(node)
            push(node.args)
    return live
