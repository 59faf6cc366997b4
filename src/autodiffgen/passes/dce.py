"""Dead-code elimination: keep only the nodes the outputs and guards need, and the inputs
they read.

Runs after every other pass has redirected uses, so it is what actually removes the
values a simplification made unnecessary (and the unpacking of unused inputs).
"""

import dataclasses

from ..graph import roots_of, toposort


def dce(graph):
    roots = roots_of(graph)
    live = set(toposort(roots)) if roots else set()
    nodes = [n for n in graph.nodes if n in live]
    inputs = [n for n in graph.inputs if n in live]
    if len(nodes) == len(graph.nodes) and len(inputs) == len(graph.inputs):
        return graph, False
    return dataclasses.replace(graph, nodes=nodes, inputs=inputs), True
