"""The backward's order: a statement that frees a buffer runs before the allocations that
precede it without being needed by it.

The backward of `d = a @ W` is `g_a = g @ W.T` (a's size) and `g_W = a.T @ g` (W's size),
and the rules give them in that order: g_a's buffer is allocated while a is still alive,
to die one line later at g_W. A hand-written backward computes g_W first: a dies, then
g_a takes its place. So each backward statement that is the last to read a buffer (or a
view into one) and makes a smaller result than it frees moves up, with the views it
reads that are made between, past the backward statements that allocate before it and
that it does not need (at most WINDOW back); a buffer that one of them reads is not
freed by the move, so what counts is the rest.
Forward statements, guards, effects and the statements of a `try:` stay where they are.
The memory plan (emit_memory.py) then sees the freed buffer die before the allocation.
"""

from dataclasses import replace

from ..graph import Node, has_effect, is_guard, op
from ..rules.buffers import VIEWS, owns
from ..tree import leaves
from .memory import nbytes

WINDOW = 8  # how far back a statement moves: the pattern is a rule's two lines, and a
#            bounded look keeps the stage linear in the graph


def freeing_first(graph):
    if graph.kind != "grad":
        return graph
    nodes = list(graph.nodes)
    n = graph.batch.n if graph.batch is not None else 1
    kept = {_base(leaf) for leaf in leaves(graph.outputs) if type(leaf) is Node}
    kept |= set(graph.inputs)
    last = {}  # buffer -> the last statement reading it, directly or through a view
    for node in nodes:
        for a in node.args:
            if type(a) is Node:
                last[_base(a)] = node
    moved = False
    for i in range(len(nodes)):
        spot = _target(nodes, i, graph, kept, last, n)
        if spot is not None:
            start, group = spot
            nodes[start:i + 1] = group + [m for m in nodes[start:i + 1] if m not in group]
            moved = True
    return replace(graph, nodes=nodes) if moved else graph


def _movable(node, graph):
    return node.grad_of is not None and node.prim is not None and not is_guard(node) \
        and not has_effect(node) and node not in graph.tried


def _base(node):
    """The buffer a value looks into: itself, or the base of the view it is."""
    while type(node) is Node and op(node) in VIEWS and node.args and type(node.args[0]) is Node:
        node = node.args[0]
    return node


def _target(nodes, i, graph, kept, last, n):
    """(position, the statements to move there) for nodes[i], or None."""
    node = nodes[i]
    if not _movable(node, graph) or op(node) in VIEWS or not owns(node):
        return None
    freed = {b for b in (_base(a) for a in node.args if type(a) is Node)
             if last.get(b) is node and b not in kept and owns(b) and b.shape != ()}
    if not freed or nbytes(node, n) >= sum(nbytes(b, n) for b in freed):
        return None  # (what the move frees can only shrink below: no gain, at once)
    low = max(0, i - WINDOW)
    at = {nodes[k]: k for k in range(low, i)}
    views = _views(node, at, graph)
    while True:  # a view another statement passed reads stays where it is
        fixed = [a for m in views + [node] for a in m.args if type(a) is Node and a not in views]
        start = max([low] + [at[a] + 1 for a in fixed if a in at])
        group = sorted((v for v in views if at[v] >= start), key=at.__getitem__) + [node]
        between = [m for m in nodes[start:i] if m not in group]
        shared = {a for m in between for a in m.args if type(a) is Node and a in group}
        if not shared:
            break
        views = [v for v in views if v not in shared]
    if not between or not all(_movable(m, graph) for m in between):
        return None
    freed -= {_base(a) for m in between for a in m.args if type(a) is Node}
    if not freed or nbytes(node, n) >= sum(nbytes(b, n) for b in freed) \
            or not any(owns(m) and op(m) not in VIEWS for m in between):
        return None
    return start, group


def _views(node, at, graph):
    """The views node reads, directly or through other views, made within the window."""
    found, stack = [], [node]
    while stack:
        for a in stack.pop().args:
            if type(a) is Node and a in at and op(a) in VIEWS and _movable(a, graph) \
                    and a not in found:
                found.append(a)
                stack.append(a)
    return found
