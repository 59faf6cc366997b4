"""Common-subexpression elimination: one node per (primitive, arguments, parameters).

The backward pass often computes the same thing twice (`g * x` for both operands of
`x * x`, the same `tanh(x)**2` from two rules); the later copy reads the earlier one.
"""

from ..graph import Node
from .fold import constant_key
from .rewrite import substitute


def cse(graph):
    seen, replace = {}, {}
    for node in graph.nodes:
        key = (node.prim.name, tuple(_arg_key(a, replace) for a in node.args),
               repr(sorted(node.params.items(), key=lambda kv: kv[0])))
        if key in seen:
            replace[node] = seen[key]
        else:
            seen[key] = node
    return substitute(graph, replace)


def _arg_key(arg, replace):
    if type(arg) is Node:
        while arg in replace:
            arg = replace[arg]
        return ("node", id(arg))
    return constant_key(arg)
