"""The memory plan: elementwise results written into an operand that dies there.

`del` at last use already frees every value as soon as it can go. On top of that, an
elementwise ufunc whose operand dies at that very statement can write its result into
the operand's buffer (`np.multiply(a, b, out=a)`), which saves an allocation and keeps
the peak lower on large arrays. Within one user statement, such a chain is one buffer under
one name (`h = x @ W`, `h += b`, `np.tanh(h, out=h)`): see `one_name`. Only buffers the graph owns qualify: never an input (but a donated one: a compiled
training step's params and state), a saved value, an output, a constant, or an array that
some view still looks into.
"""

import numpy as np

from .graph import Node, op
from .tree import leaves

# primitives whose result is a new array of its own (a view would share its buffer)
_OWNERS = {"matmul", "scatter_add", "copy", "concatenate", "stack", "sum", "mean", "prod",
           "where", "clip", "astype", "tile", "repeat", "pad", "cumsum", "cumprod",
           "angle", "fftn", "ifftn", "rfftn", "irfftn", "eig_values", "eig_vectors"}
_VIEWS = {"reshape", "transpose", "squeeze", "expand_dims", "getitem", "broadcast_to",
          "stop_gradient", "recompute_from", "einsum", "diagonal", "real", "imag"}


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
    kept = (set(graph.inputs) - graph.donated) | \
        {leaf for leaf in leaves(graph.outputs) if type(leaf) is Node}
    plan = {}
    for i, node in enumerate(graph.nodes):
        if not _elementwise(node.prim) or node.shape == ():
            continue
        dying = set(last_use.get(i, ()))
        for arg in node.args:
            if type(arg) is Node and arg in dying and arg not in kept and arg not in viewed \
                    and (owns(arg) or arg in graph.donated) \
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


def one_name(graph, plan):
    """{node: the last node of its chain}, for the chains of `plan` that one buffer runs
    through within one user statement, read as one variable named after the chain's last
    value (the user's `h`, a gradient `g_x`): its earlier values have no name of their own
    (`matmul`, `add`), and are not gradients."""
    chain = {}  # node -> the list of nodes sharing its buffer so far
    for i, operand in sorted(plan.items()):
        node = graph.nodes[i]
        if operand.name is None and operand not in graph.derivative_of \
                and operand.loc == node.loc and operand.loc is not None \
                and (operand.grad_of is None) == (node.grad_of is None):
            members = chain.get(operand, [operand])
            members.append(node)
            chain[operand] = chain[node] = members
    shared = {}
    for members in {id(m): m for m in chain.values()}.values():  # each chain once, not
        last = members[-1]                                    # once per member: linear
        if last.name is not None or last in graph.derivative_of:
            shared.update((m, last) for m in members)
    return shared
