"""Algebraic simplification: x*1, x+0, x/1, --x, casts to the same dtype, reshapes and
broadcasts to the same shape, chains of reshapes and of transposes.

A rewrite is only made when the result has exactly the node's shape and dtype, so NumPy's
broadcasting and type promotion are never changed by it. A graph's inputs are opaque:
a rule may use one, never look into how it was computed (a backward function's inputs
were computed by the forward function).
"""

import numpy as np

from ..graph import Node, op
from ..rules import PRIMITIVES, elementwise_ufunc
from ..trace.boxes import result_dtype
from .rewrite import clone, op_here, substitute, unchanged


def simplify(graph, examined=None):
    """`examined`: as fold's (a rule reads the node, its arguments and theirs, which never
    change, and whether an argument is an input, which stays so while it is read)."""
    replace = {}
    opaque = set(graph.inputs)
    for node in graph.nodes:
        if unchanged(node, examined, replace):
            continue
        rule = _RULES.get(op(node))
        if rule is None and not elementwise_ufunc(node.prim):
            continue  # neither a rule nor a broadcast to drop: most nodes
        args = [replace.get(a, a) if type(a) is Node else a for a in node.args]
        unbroadcast = _unbroadcast(node, args, opaque)
        better = None if rule is None else rule(node, unbroadcast, opaque)
        if better is None and unbroadcast is not args:
            better = clone(node, unbroadcast)
        if better is not None and better is not node:
            replace[node] = better
    if examined is not None:  # (at C speed when nothing is replaced: most sweeps)
        examined.update(graph.nodes if not replace else
                        (n for n in graph.nodes if n not in replace))
    return substitute(graph, replace)


# NumPy 2 promotes a 0-d array like any array (NEP 50); NumPy 1 by its value, as a scalar
_ZERO_D_IS_AN_ARRAY = np.lib.NumpyVersion(np.__version__) >= "2.0.0"


def _unbroadcast(node, args, opaque):
    """An elementwise ufunc's operands without a `broadcast_to` the ufunc does itself:
    `g * np.broadcast_to(s, (n, 4))` is `g * s` when the result keeps its shape; nor a
    reshape that only puts axes of length 1 in front (a sum's backward, `np.reshape(g,
    (1, 1, 1)) * w`: a call that costs more than the product at a loop step's sizes). Not
    of a Python number (weak in type promotion, where the broadcast array is not)."""
    impl = getattr(node.prim, "impl", None)
    if not isinstance(impl, np.ufunc) or impl.signature is not None or len(args) < 2:
        return args
    new = list(args)
    for k, arg in enumerate(args):
        if op_here(arg, opaque) != "broadcast_to" and not _leading_ones(arg, opaque):
            continue
        x = arg.args[0]
        if not (type(x) is Node and not x.python_number or isinstance(x, np.ndarray)) \
                or not (np.shape(x) or _ZERO_D_IS_AN_ARRAY):
            continue
        trial = new[:k] + [x] + new[k + 1:]
        try:
            shape = np.broadcast_shapes(*(a.shape if type(a) is Node else np.shape(a)
                                          for a in trial))
        except (TypeError, ValueError):
            continue
        if shape == node.shape:
            new = trial
    return args if all(a is b for a, b in zip(new, args)) else new


def _leading_ones(arg, opaque):
    """arg is x with axes of length 1 put in front (broadcasting's own padding)."""
    if op_here(arg, opaque) not in ("reshape", "expand_dims"):
        return False
    x = arg.args[0]
    ndim = len(arg.shape) - len(np.shape(x))
    return ndim > 0 and arg.shape == (1,) * ndim + tuple(np.shape(x))


def _fits(x, node):
    """x can stand for node: same shape and dtype."""
    if type(x) is Node:
        return x.shape == node.shape and x.dtype == node.dtype
    return np.shape(x) == node.shape and result_dtype(x) == node.dtype


def _is(x, value):
    """x is a constant all of whose elements equal value (also a broadcast of one)."""
    if op(x) == "broadcast_to":
        x = x.args[0]
    if type(x) in (int, float):
        return x == value
    if type(x) is Node or not isinstance(x, (np.ndarray, np.generic)):
        return False
    return bool(np.all(np.asarray(x) == value))


def _negated(node, x):
    return clone(node, (x,), PRIMITIVES["negative"], {})


def _multiply(node, args, opaque):
    a, b = args
    for x, c in ((a, b), (b, a)):  # (the constant first: it is seldom one)
        if _is(c, 1) and _fits(x, node):
            return x
        if _is(c, -1) and _fits(x, node):
            return _negated(node, x)
    return None


def _divide(node, args, opaque):
    a, b = args
    return a if _is(b, 1) and _fits(a, node) else None


def _add(node, args, opaque):
    a, b = args
    for x, c in ((a, b), (b, a)):
        if _is(c, 0) and _fits(x, node):
            return x
    return None


def _subtract(node, args, opaque):
    a, b = args
    if _is(b, 0) and _fits(a, node):
        return a
    if _is(a, 0) and _fits(b, node):
        return _negated(node, b)
    return _cancelled(node, a, b, opaque)


def _cancelled(node, a, b, opaque):
    """(x + y) - x is y, for integers (exact, overflow too: it wraps back): a slice's
    length, `(j * s + 3) - j * s`, which a guard then reads as the number it is."""
    if node.dtype.kind not in "iu" or op_here(a, opaque) != "add" or type(b) is not Node:
        return None
    x, y = a.args
    other = y if x is b else x if y is b else None
    return other if other is not None and _fits(other, node) else None


def _negative(node, args, opaque):
    (a,) = args
    if op_here(a, opaque) == "negative" and _fits(a.args[0], node):
        return a.args[0]
    return None


def _same_value(node, args, opaque):
    return args[0] if _fits(args[0], node) else None


def _reshape(node, args, opaque):
    (a,) = args
    if _fits(a, node):
        return a
    if op_here(a, opaque) in ("reshape", "squeeze", "expand_dims"):
        return clone(node, (a.args[0],))
    return None


def _transpose(node, args, opaque):
    (a,) = args
    if op_here(a, opaque) != "transpose":
        return None
    ndim = len(node.shape)
    inner = a.params["axes"] or tuple(range(ndim - 1, -1, -1))
    outer = node.params["axes"] or tuple(range(ndim - 1, -1, -1))
    axes = tuple(inner[i] for i in outer)
    if axes == tuple(range(ndim)):
        return a.args[0] if _fits(a.args[0], node) else None
    reverse = axes == tuple(range(ndim - 1, -1, -1))
    return clone(node, (a.args[0],), params={"axes": None if reverse else axes})


def _getitem(node, args, opaque):
    """A row of v spread along a new first axis (np.broadcast_to(v, (n, *v.shape))[k], a
    value a loop saved at every step that was the same at every step: loops/spread.py)
    is v."""
    a = args[0]
    items = node.params["index"].items
    if len(args) != 1 or len(items) != 1 or type(items[0]) is not int \
            or op_here(a, opaque) != "broadcast_to" or type(a.args[0]) is not Node:
        return None
    v = a.args[0]
    return v if a.shape[1:] == v.shape and _fits(v, node) else None


_RULES = {"multiply": _multiply, "divide": _divide, "add": _add, "subtract": _subtract,
          "negative": _negative, "astype": _same_value, "broadcast_to": _same_value,
          "reshape": _reshape, "squeeze": _same_value, "expand_dims": _same_value,
          "transpose": _transpose, "getitem": _getitem}
