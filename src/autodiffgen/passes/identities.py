"""Identity calls dropped: `stop_gradient(x)` read as `x`, once no derivative is taken.

stop_gradient marks a value as a constant for differentiation; at run time it is the
identity. Once the graph's derivatives are taken, the call only tells a reader about a
differentiation that is over (`shifted = logits - _stop_gradient(max_1)`), unless the
generated code is itself traced again (grad of grad, hessian: pipeline.Request.pure),
where the mark keeps the next derivative right. So the front end drops it for code that
only runs, and keeps it for code an enclosing trace runs.
"""

from ..graph import op
from .rewrite import substitute

IDENTITIES = frozenset({"stop_gradient", "custom_vjp"})  # primitives that return argument 0


def identities(graph):
    """(graph with every identity node read as its argument, whether any was)."""
    return substitute(graph, {node: node.args[0] for node in graph.nodes
                              if op(node) in IDENTITIES})
