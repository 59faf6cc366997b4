"""The memory plan: elementwise results written into an operand that dies there.

`del` at last use already frees every value as soon as it can go. On top of that, an
elementwise ufunc whose operand dies at that very statement can write its result into
the operand's buffer (`np.multiply(a, b, out=a)`), which saves an allocation and keeps
the peak lower on large arrays. Only buffers the graph owns qualify: never an input, a
saved value, an output, a constant, or an array that some view still looks into.
"""

import numpy as np

from .graph import Node, op
from .tree import leaves

# primitives whose result is a new array of its own (a view would share its buffer)
_OWNERS = {"matmul", "scatter_add", "copy", "concatenate", "stack", "sum", "mean", "prod",
           "where", "clip", "astype", "tile", "repeat", "pad", "cumsum", "cumprod"}
_VIEWS = {"reshape", "transpose", "squeeze", "expand_dims", "getitem", "broadcast_to",
          "stop_gradient", "einsum", "diagonal"}


def ufunc_of(prim):
    """The NumPy ufunc a primitive applies as it is, or None."""
    impl = prim.impl
    if prim.op is not None and isinstance(impl, np.ufunc) and getattr(np, impl.__name__, None) is impl:
        return impl.__name__
    return None


def reuse_plan(graph, last_use):
    """{statement index: the operand node whose buffer that statement writes into}."""
    viewed = {n.args[0] for n in graph.nodes if op(n) in _VIEWS and n.args
              and type(n.args[0]) is Node}
    viewed |= {a for n in graph.nodes if op(n) is None for a in n.args  # a user's
               if type(a) is Node}                                          # primitive
    kept = set(graph.inputs) | {leaf for leaf in leaves(graph.outputs) if type(leaf) is Node}
    plan = {}
    for i, node in enumerate(graph.nodes):
        if not _elementwise(node.prim) or node.shape == ():
            continue
        dying = set(last_use.get(i, ()))
        for arg in node.args:
            if type(arg) is Node and arg in dying and arg not in kept and arg not in viewed and owns(arg) \
                    and arg.shape == node.shape and arg.dtype == node.dtype:
                plan[i] = arg
                break
    return plan


def _elementwise(prim):
    """A ufunc applied elementwise (not a generalized one such as matmul, which must not
    write into an operand it is still reading)."""
    return ufunc_of(prim) is not None and prim.impl.signature is None


def owns(node):
    """The node's value is a new array of its own (so it may be written into)."""
    return op(node) in _OWNERS or (op(node) is not None and ufunc_of(node.prim) is not None)
