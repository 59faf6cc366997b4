"""The cotangents the backward pass accumulates, with block reads summed once.

A value read in blocks, `x[i]` for every i or `xw[t, :, a:b]` at every step, gets one
cotangent per read: `scatter_add`, zeros of x's shape with the block's cotangent in its
place, and these add up. The graph records exactly that (passes/accumulate.py then makes
it a concatenation or a stack), but computing each term and each partial sum while
tracing would cost one full-size array per read: n reads of an n-element array would
make tracing quadratic in time and memory, while the generated code is linear. So once a
block read contributes, the sum's nodes are recorded as the contributions come (same
nodes, same order), holding stand-in values of the right shape and dtype that take no
memory, and the sum is computed once, in one buffer, when it is read: after every
consumer has contributed (reverse.py visits nodes in that order). The tape, which has no
nodes, sums the same way.
"""

import numpy as np

from ..rules import PRIMITIVES
from ..trace.boxes import Box, result_dtype
from ..trace.recording import RESULT_HOOKS


class Block:
    """A block read's cotangent, scatter_add(g, *arrays, **params): zeros of shape
    params["shape"] with g at params["index"], made only when the sum is read."""

    __slots__ = ("arrays", "g", "params")

    def __init__(self, g, arrays, params):
        self.g, self.arrays, self.params = g, tuple(arrays), params


class Cotangents:
    """{node: its cotangent so far}. Contributions go in with `add` (a value, or a Block);
    `pop` gives the sum."""

    def __init__(self, trace):
        self.trace = trace  # where the sums' nodes are recorded, when tracing
        self.sums = {}
        self.terms = {}  # node -> what its stand-in sum adds up: ("block", ...) or ("dense", v)

    def add(self, node, contribution):
        if type(contribution) is Block:
            self.add_block(node, contribution.g, contribution.arrays, contribution.params)
        elif node not in self.sums:
            self.sums[node] = contribution
        elif node not in self.terms:
            self.sums[node] = self.sums[node] + contribution
        else:
            self._grow(node, contribution, ("dense", contribution))

    def add_block(self, node, g, arrays, params):
        """Add scatter_add(g, *arrays, **params), which `index` puts in an array of
        shape `shape`, without computing it now."""
        block = ("block", g, arrays, params)
        dtype = result_dtype(plain(g))
        if type(g) is Box:
            term = _recorded(self.trace, PRIMITIVES["scatter_add"], (g, *arrays), params,
                             _stand_in(params["shape"], dtype))
        else:
            term = _stand_in(params["shape"], dtype)
        if node not in self.sums:
            self.sums[node] = term
            self.terms[node] = [block]
            return
        if node not in self.terms:
            self.terms[node] = [("dense", self.sums[node])]
        self._grow(node, term, block)

    def _grow(self, node, term, what):
        before = self.sums[node]
        shape = np.shape(plain(before))
        dtype = np.result_type(plain(before), plain(term))
        if type(before) is Box or type(term) is Box:
            self.sums[node] = _recorded(self.trace, PRIMITIVES["add"], (before, term),
                                        {}, _stand_in(shape, dtype))
        else:
            self.sums[node] = _stand_in(shape, dtype)
        self.terms[node].append(what)

    def pop(self, node):
        """The complete cotangent of node (None if nothing reached it)."""
        total = self.sums.pop(node, None)
        terms = self.terms.pop(node, None)
        if terms is None:
            return total
        value = _summed(terms, np.shape(plain(total)), result_dtype(plain(total)))
        if type(total) is Box:
            total.value = value
            return total
        return value


def _summed(terms, shape, dtype):
    """The terms' sum, in one buffer: zeros plus each term in order, as the recorded
    nodes add them (adding a zero is exact, so the result is theirs)."""
    out = np.zeros(shape, dtype)
    for term in terms:
        if term[0] == "dense":
            np.add(out, plain(term[1]), out=out)
            continue
        _, g, arrays, params = term
        g = plain(g)
        index = params["index"].fill((g,) + tuple(plain(a) for a in arrays))
        if params.get("unique", False):
            out[index] += g
        else:
            np.add.at(out, index, g)
    return out


def plain(x):
    """A Box's value, anything else as it is."""
    return x.value if type(x) is Box else x


def _recorded(trace, prim, args, params, value):
    """A node recorded as `bind` would, but with `value` as its stand-in result."""
    box = trace.box(prim, args, params, value)
    for hook in RESULT_HOOKS:
        hook(trace, box, args)
    return box


class Unsummed(np.ndarray):
    """A partial sum's stand-in: shape and dtype only. Reading its values is a bug in
    autodiffgen (nothing but the recorded nodes refers to a partial sum), so it fails
    loudly rather than giving zeros."""

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        raise _read()

    def __array_function__(self, func, types, args, kwargs):
        if func in _SHAPE_ONLY:
            return super().__array_function__(func, (np.ndarray,), args, kwargs)
        raise _read()


_SHAPE_ONLY = {np.shape, np.ndim, np.size, np.result_type}


def _read():
    return RuntimeError("autodiffgen internal error: a partial sum of cotangents was read "
                        "before it was complete; please report this with your function")


def _stand_in(shape, dtype):
    """A read-only array of `shape` and `dtype` that takes no memory."""
    return np.broadcast_to(np.zeros((), dtype), shape).view(Unsummed)
