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
from ..rules.regions import Boxes, region


class Views:
    """The views of a graph's buffers: `until[buffer]`, the last statement a view of it
    (or a view of that) is read at; `blocks[buffer]`, the Boxes of its views by a static
    block (`h[:, t - 1, :]`), each stamped with that statement; `opaque[buffer]`, the
    same for its other views (x.T, a reshape), of which no part is known. `kept`: the
    graph's outputs and inputs (a view among them is read to the end)."""

    def __init__(self, graph, kept):
        last_read, end = {}, len(graph.nodes)
        for j, node in enumerate(graph.nodes):
            for a in node.args:
                if type(a) is Node:
                    last_read[a] = j
        self.until, self.blocks, self.opaque = {}, {}, {}
        for j in range(len(graph.nodes) - 1, -1, -1):  # a view's own views first
            node = graph.nodes[j]
            if op(node) in VIEWS and node.args and type(node.args[0]) is Node \
                    and not _contraction(node):
                read = end if node in kept else \
                    max(last_read.get(node, j), self.until.get(node, j))
                base = node.args[0]
                self.until[base] = max(self.until.get(base, -1), read)
                if op(node) == "getitem":  # its own views see no more than it does
                    box = region(node.params["index"], node.args, base.shape)
                    self.blocks.setdefault(base, Boxes()).add(box, read)
                else:
                    self.opaque[base] = max(self.opaque.get(base, -1), read)

    def done(self, buffer, at=None, box=None):
        """No view of `buffer` is read at statement `at` or later (None: none at all),
        but views of elements apart from `box`, what a write at `at` writes."""
        if buffer not in self.until:
            return True
        if at is None:
            return False
        return self.until[buffer] < at or box is not None \
            and self.opaque.get(buffer, -1) < at \
            and not self.blocks[buffer].meets(box, buffer.shape, since=at)

    def inherit(self, x, node, at):
        """`node` is written into x's buffer at statement `at`: the views of x still read
        there (apart from what it writes) are views of node's value now."""
        if self.until.get(x, -1) < at:
            return
        self.until[node] = max(self.until.get(node, -1), self.until[x])
        self.opaque[node] = max(self.opaque.get(node, -1), self.opaque.get(x, -1))
        mine, theirs = self.blocks.get(node), self.blocks.get(x)
        if theirs is not None:  # (x dies here: its Boxes move, the larger one kept)
            if mine is not None and len(mine) > len(theirs):
                mine.update(theirs)
            else:
                if mine is not None:
                    theirs.update(mine)
                self.blocks[node] = theirs
