"""Writes whose old array needs no zeros in its cotangent: `out[n, f, i, j] = v` into a
fresh buffer, each element written once.

The rule of `y = setitem(x, v, index)` gives x the cotangent of y with the written
elements zeroed: what x held there never reached y. That zeroing is a copy of the whole
cotangent, per write; a naive convolution filling its output one element at a time makes
as many full copies as it has elements, and an RNN storing each step's state in a
preallocated (N, T, H) array copies the whole of it per step.

The zeros matter only where the cotangent of x is read there. It is read by x's own
rule alone, and when x is itself a write, `x = setitem(w, u, index_x)`, that rule reads
it at index_x (u's cotangent, if u needs one) and hands the rest down to w, zeroed or
not, and so on down the chain of writes to the array it started from (its root): the
root's rule reads all of it, unless nothing differentiable reaches the root (a buffer
made by np.zeros, np.zeros_like) or its primitive has no derivative. So when the
written elements are apart from every earlier write of the chain whose value needs a
cotangent (rules/regions.py proves it from the indices), and the root's cotangent is
not read, nothing ever reads what the zeros would hide: x takes y's cotangent as it is,
and the written elements are read from it (`g[index]`) for v. The gradients are exactly
the same; the copies are gone.
"""

from ..graph import Node, op
from ..rules.regions import Boxes, region
from ..rules.vjps import BLOCKS, PIECES, has_vjp


def unzeroed_writes(order, needs, ruled=()):
    """The setitem nodes of `order` (the backward's order: outputs first) whose old
    array may take their cotangent unzeroed; `needs`: the nodes that need a cotangent,
    `ruled`: nodes another graph rule differentiates (their cotangent counts as read)."""
    forward = order[::-1]
    takers = {}  # a write's old array -> how many writes take it
    for node in forward:
        if op(node) == "setitem" and type(node.args[0]) is Node:
            takers[node.args[0]] = takers.get(node.args[0], 0) + 1
    chains, found = {}, set()  # a write -> the Boxes of its chain up to it (None: read)
    for node in forward:
        if op(node) != "setitem":
            continue
        x = node.args[0]
        written = _below(x, chains, needs, ruled, takers.get(x, 0) > 1)
        if written is None:
            chains[node] = None
            continue
        box = region(node.params["index"], node.args, node.shape)
        if not written.meets(box, node.shape):
            found.add(node)
        v = node.args[1]
        if type(v) is Node and v in needs:  # its rule reads the cotangent there
            written.add(box)
        chains[node] = written
    return found


def _below(x, chains, needs, ruled, shared):
    """The Boxes of what lies below a write into x: the chain's (a copy when another
    write into x `shared` it), a fresh one when x is a root whose cotangent no one
    reads, None when it is read."""
    if type(x) is not Node:  # a constant: no cotangent at all
        return Boxes()
    if op(x) == "setitem":
        written = chains[x] if shared else chains.pop(x)
        return written.copy() if shared and written is not None else written
    read = x in needs and (x.prim is None or x in ruled or x.prim in PIECES
                           or x.prim in BLOCKS or has_vjp(x.prim))
    return None if read else Boxes()
