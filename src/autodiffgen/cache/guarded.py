"""Whether a module of generated code can refuse a call (raise GuardFailure): a fact of its
graph, kept with the code in memory and on disk, so that no one decides it by reading the
code's text."""

from ..graph import is_guard
from ..trace import recording


def can_refuse(graph):
    """Whether the generated code can refuse a call (GuardFailure): it has guards, reads
    values outside its arguments, raises where the user's code did, or serves a batch
    range."""
    return graph.batch is not None or bool(graph.captured) or \
        any(is_guard(n) or n.prim is not None and n.prim.name in recording.RAISES
            for n in _nodes(graph)) or any(map(_reads_outside, graph.inputs)) or \
        any(mark.tried for mark in graph.marks.values())


def _nodes(graph):
    """The graph's nodes and those of the bodies of its kept loops, where a guard checked
    at every step stays (loops/hoist.py)."""
    for node in graph.nodes:
        yield node
        body = node.params.get("body")
        if body is not None and hasattr(body, "graph"):
            yield from _nodes(body.graph)


def _reads_outside(node):
    """An input the code reads from a global, closure or attribute (capture.py)."""
    return node.params.get("read") is not None
