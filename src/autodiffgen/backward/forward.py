"""Forward mode: push tangents through the recorded nodes in creation order.

Like `backward.cotangents`, one loop serves both engines: on Boxes the JVP rules record
the tangent computation as more nodes (and the emitter writes them out), on arrays they
simply compute. A node with no incoming tangent, or with an integer or boolean value,
gets none.
"""

import numpy as np

from ..errors import ArgumentError, at
from ..graph import Node
from ..rules import broadcast_up, jvps
from ..trace import tracer
from ..trace.boxes import Box
from ..tree import map_trees


def tangents(trace, nodes, seeds, lookup):
    """{node: tangent} for every node the seeded inputs reach, seeds included, and (for
    naming) which node each recorded tangent belongs to."""
    tangent = dict(seeds)
    tangent_of = {}
    for node in nodes:
        if node.prim is None or not np.issubdtype(node.dtype, np.inexact):
            continue
        ts = [tangent.get(a) if type(a) is Node else None for a in node.args]
        if all(t is None for t in ts):
            continue
        args = [lookup(a) if type(a) is Node else a for a in node.args]
        trace.grad_of = node
        try:
            t = jvps.tangent(node.prim, ts, lookup(node), args, node.params, node.loc)
            if t is not None:
                tangent[node] = t = broadcast_up(t, node.shape, node.dtype)
                if type(t) is Box and t.node.grad_of is not None:
                    tangent_of.setdefault(t.node, node)
        finally:
            trace.grad_of = None
    return tangent, tangent_of


def pair_tangents(primal, tangent, name, seeds):
    """seeds[primal input node] = its tangent, checking that the trees match."""
    def pair(p, t):
        if t is None or type(p) is not tracer.Box:
            return
        if np.shape(p.value) != np.shape(t.value if type(t) is tracer.Box else t):
            raise ArgumentError(at(tracer.user_loc(), f"a tangent of {name!r} has shape "
                                   f"{np.shape(t.value)}, but its primal has shape "
                                   f"{np.shape(p.value)}"))
        if np.issubdtype(p.node.dtype, np.inexact):
            seeds[p.node] = t
    try:
        map_trees(pair, primal, tangent, f"the tangent of {name!r}")
    except ArgumentError:  # pair's own, which names the line already (a ValueError too)
        raise
    except ValueError as e:
        raise ArgumentError(at(tracer.user_loc(), str(e))) from None
