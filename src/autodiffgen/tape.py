"""The dynamic tape: the reference engine.

Like Autograd or micrograd: every call records the forward pass afresh, runs the same
VJP rules backward on concrete arrays, and drops the recording. It is slow and simple on
purpose; tests compare the generated code against it.
"""

import numpy as np

from .backward import forward
from .backward import reverse as backward
from .errors import TracingError, at
from .trace import argument_writes, tracer
from .trace.arguments import Differentiated, decorator, single
from .trace.boxes import Box, result_dtype, stand_in
from .trace.context import user_loc
from .tree import leaves, map_tree


class TapeFunction(Differentiated):
    """Same calling convention as api.GradFunction (arguments.py), but nothing is
    generated or cached: it needs only the tracer and the rules."""

    def __init__(self, fun, argnums=0, with_value=True, has_aux=False):
        super().__init__(fun, argnums, with_value)
        self.has_aux = bool(has_aux)

    def __call__(self, *args, **kwargs):
        if kwargs:
            args = self._positional(args, kwargs)
        self._check_argnums(len(args))
        value, grads = value_and_grad_now(self.fun, args, self._argnums,
                                          self._arg_names(len(args)), self.has_aux)
        if self.with_value:
            return value, grads
        return (grads, value[1]) if self.has_aux else grads

    def source(self, *args, **kwargs):
        raise TypeError("the dynamic tape generates no source; use autodiffgen.grad")


def recorded(request):
    """An eager recording of a compile request's function at its arguments, on the tape's
    terms (the values are the ones eager NumPy computes): what a check compares the
    compiled code against (autodiffgen.dask's decomposition check)."""
    return tracer.trace(request.fun, list(request.args), request.argnums, request.names,
                        eager=True, call=request.call)[0]


def value_and_grad_now(fun, args, argnums, names, has_aux=False):
    """Record, run backward on arrays, and return; the recording dies with this frame.
    With has_aux, the value is (value, aux), aux's leaves plain values."""
    _not_nested(args)
    trace, boxed, out = tracer.trace(fun, args, argnums, names, eager=True)
    _write(args, trace)
    aux = None
    if has_aux:
        out, aux = backward.split_aux(out, fun)
        aux = map_tree(aux, lambda a: a.value if type(a) is Box else a)
    backward.check_output(out, fun, scalar=True)
    wrt = boxed[argnums[0]] if single(argnums) else tuple(boxed[i] for i in argnums)
    value = out.value if type(out) is Box else out
    found = {}
    if type(out) is Box:
        seed = np.ones(out.node.shape, out.node.dtype)
        wrt_nodes = [b.node for b in leaves(wrt) if type(b) is Box]
        found, _ = backward.cotangents(trace, out.node, wrt_nodes, _values(trace.boxes), seed)
    grads = map_tree(wrt, lambda b: _gradient(found.get(b.node), b) if type(b) is Box
                     else None)
    return ((value, aux) if has_aux else value), grads


def _write(args, trace):
    """What the function assigned into its argument containers, into the caller's, as
    eager NumPy leaves it (argument_writes.py)."""
    argument_writes.perform(args, trace.writes, lambda b: b.value if type(b) is Box else b)


def _not_nested(args):
    """The tape computes on concrete arrays: under another transformation (its Boxes as
    arguments) it would drop their derivatives, so it refuses."""
    if any(type(stand_in(leaf)) is Box for leaf in leaves(args)):
        raise TracingError(at(user_loc(), "the tape (autodiffgen.tape) does not nest "
                              "inside another transformation; use autodiffgen's grad, jvp or "
                              "vjp for the inner one"))


def _values(boxes):
    return lambda node: boxes[node].value


def _gradient(g, leaf):
    """A fresh array of the input's shape and dtype (zeros if the output ignores it)."""
    if type(leaf) is not Box:
        return None
    dtype = result_dtype(leaf.value)
    if g is None:
        return np.zeros(np.shape(leaf.value), dtype)
    return np.array(g, dtype=dtype, copy=True)


grad = decorator(with_value=False, cls=TapeFunction, has_aux=False)
value_and_grad = decorator(with_value=True, cls=TapeFunction, has_aux=False)


def jvp(fun, primals, tangents):
    """Forward mode on the tape: (out, tangent_out) computed on concrete arrays."""
    primals, tangents = tuple(primals), tuple(tangents)
    _not_nested(primals)
    names = [f"arg{i}" for i in range(len(primals))]
    trace, boxed, out = tracer.trace(fun, primals, range(len(primals)), names, diff="auto",
                                     eager=True)
    _write(primals, trace)
    seeds = {}
    for i, tangent in enumerate(tangents):
        forward.pair_tangents(boxed[i], tangent, names[i], seeds)
    nodes = [node for node in trace.boxes if node.prim is not None]
    seeds = {node: np.asarray(t, dtype=node.dtype) for node, t in seeds.items()}
    found, _ = forward.tangents(trace, nodes, seeds, _values(trace.boxes))

    def tangent_of(o):
        if type(o) is Box and o.node in found:
            return np.array(found[o.node], dtype=o.node.dtype, copy=True)
        return np.zeros(np.shape(o.value if type(o) is Box else o), result_dtype(
            o.value if type(o) is Box else o))
    return (map_tree(out, lambda o: o.value if type(o) is Box else o),
            map_tree(out, tangent_of))


def vjp(fun, *primals):
    """Reverse mode on the tape: (out, vjp_fn), vjp_fn(g) running the rules backward on
    concrete arrays from a cotangent g of out's structure (checked as the generated
    vjp_fn checks it); one cotangent per primal, None for integer leaves."""
    _not_nested(primals)
    names = [f"arg{i}" for i in range(len(primals))]
    trace, boxed, out = tracer.trace(fun, primals, range(len(primals)), names, diff="auto",
                                     eager=True)
    _write(primals, trace)
    backward.check_output_tree(out, fun)
    value = map_tree(out, lambda o: o.value if type(o) is Box else o)
    wrt = [b.node for b in leaves(boxed) if type(b) is Box]

    def vjp_fn(g):
        g = backward.cotangent_like(value, g, user_loc())
        seeds = [(o.node, np.asarray(t, o.node.dtype)) for o, t in zip(leaves(out), leaves(g))
                 if type(o) is Box and t is not None]
        found, _ = backward.cotangents_of_outputs(trace, seeds, wrt, _values(trace.boxes))
        return tuple(map_tree(b, lambda leaf: _gradient(found.get(leaf.node), leaf)
                              if type(leaf) is Box and
                              np.issubdtype(leaf.node.dtype, np.inexact) else None)
                     for b in boxed)
    return value, vjp_fn
