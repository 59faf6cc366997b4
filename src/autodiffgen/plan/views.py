"""Which views look into each buffer, until which statement, and whether a write into
the buffer leaves what they see as it was: the memory plan (memory.py) writes into a
buffer only where no view still to be read can tell.

A view (x.T, x[0], a reshape, through views of views) is read until its last reader's
statement, or to the end when it is an output. Before the plan writes `h[i] = v` into
h's buffer, every view of h read at or after that statement must look at elements apart
from i (rules/regions.py): `h[:, t - 1, :]`, still to be saved, while the step writes
`h[:, t, :]`. Those views then look into the written value's buffer, which a later write
must leave as they see it too (`inherit`).
"""

from ..graph import Node, op
from ..rules.buffers import VIEWS, _contraction
from ..rules.regions import apart, region


class Views:
    """The views of a graph's buffers: `until[buffer]`, the last statement a view of it
    is read at; `of[buffer]`, {each view of it: the last statement it (or a view of it)
    is read at}. `kept`: the graph's outputs and inputs (a view among them is read to
    the end)."""

    def __init__(self, graph, kept):
        last_read, end = {}, len(graph.nodes)
        for j, node in enumerate(graph.nodes):
            for a in node.args:
                if type(a) is Node:
                    last_read[a] = j
        self.until, self.of = {}, {}
        for j in range(len(graph.nodes) - 1, -1, -1):  # a view's own views first
            node = graph.nodes[j]
            if op(node) in VIEWS and node.args and type(node.args[0]) is Node \
                    and not _contraction(node):
                read = end if node in kept else \
                    max(last_read.get(node, j), self.until.get(node, j))
                base = node.args[0]
                self.until[base] = max(self.until.get(base, -1), read)
                self.of.setdefault(base, {})[node] = read

    def done(self, buffer, at=None, box=None):
        """No view of `buffer` is read at statement `at` or later (None: none at all),
        but views of elements apart from `box`, what a write at `at` writes."""
        if buffer not in self.until:
            return True
        if at is None:
            return False
        return self.until[buffer] < at or box is not None and all(
            read < at or _apart(view, box) for view, read in self.of[buffer].items())

    def inherit(self, x, node, at):
        """`node` is written into x's buffer at statement `at`: the views of x still read
        there (apart from what it writes) are views of node's value now."""
        alive = {view: read for view, read in self.of.get(x, {}).items() if read >= at}
        if alive:
            self.of[node] = {**self.of.get(node, {}), **alive}
            self.until[node] = max(self.until.get(node, -1), *alive.values())


def _apart(view, box):
    """A block `view` reads (its own views see no more of the buffer) apart from `box`."""
    shape = view.args[0].shape
    return op(view) == "getitem" and apart(
        region(view.params["index"], view.args, shape), box, shape)
