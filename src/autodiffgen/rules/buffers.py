"""What each primitive's result is as memory: a new array of its own, or a view of an
operand; and the NumPy ufunc a primitive applies as it is. Facts about primitives, read
by the passes (a returned gradient must own its memory), the plan (a buffer may be written
into only if the graph owns it) and the emitter (`out=`).
"""

import numpy as np

from ..graph import op

# primitives whose result is a new array of its own (a view would share its buffer)
_OWNERS = {"matmul", "scatter_add", "add_at", "copy", "concatenate", "stack", "sum", "mean", "prod",
           "max", "min",
           "where", "clip", "astype", "tile", "repeat", "pad", "cumsum", "cumprod",
           "angle", "fftn", "ifftn", "rfftn", "irfftn", "eig_values", "eig_vectors",
           "setitem", "loop_out",  # (setitem: a copy, then the write; the caller's array a loop updated in place: rules/loops.py)
           "zeros_like", "ones_like", "full_like"}  # (a buffer the user's writes fill)
REDUCTIONS = {"sum", "mean", "max", "min", "prod"}  # take out= of their result's shape
VIEWS = {"reshape", "transpose", "squeeze", "expand_dims", "getitem", "broadcast_to",
          "stop_gradient", "recompute_from", "einsum", "diagonal", "real", "imag",
          "custom_vjp"}  # (custom_derivatives.py: the identity on argument 0)


def ufunc_of(prim):
    """The NumPy ufunc a primitive applies as it is, or None (asked several times per
    node by the emitter's stages: kept on the primitive, whose impl and op never change)."""
    try:
        return prim._ufunc_of
    except AttributeError:
        pass
    impl = prim.impl
    name = impl.__name__ if prim.op is not None and isinstance(impl, np.ufunc) and \
        getattr(np, impl.__name__, None) is impl else None
    prim._ufunc_of = name
    return name


def owns(node):
    """The node's value is a new array of its own (so it may be written into)."""
    name = op(node)
    return name is not None and (name in _OWNERS or ufunc_of(node.prim) is not None or
                                 name == "einsum" and len(node.args) >= 2  # _contraction
                                 or name == "scan_out" and node.params["fresh"])


def _contraction(node):
    """An einsum of two or more operands: NumPy makes its result (or a transposed view of
    a temporary nobody else holds), never a view of an operand, as one operand's einsum
    can be (`np.einsum("ii->i", a)`)."""
    return op(node) == "einsum" and len(node.args) >= 2
