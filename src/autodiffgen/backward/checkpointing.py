"""checkpoint(f): what f computes inside is recomputed by the backward pass, not kept.

Like JAX's `jax.checkpoint`, Autograd's `checkpoint` and `torch.utils.checkpoint`: a
recurrent net's step, checkpointed, keeps only its inputs and outputs for the backward;
the values in between are freed as soon as the forward has used them, and the backward
computes them again from the inputs when it reaches the step. Memory for compute.

How. While tracing, `checkpoint(f)(*args)` runs f on the Boxes as usual, then notes a
Region: the nodes between f's inputs (its arguments, and any traced value it closes over)
and its outputs. The backward pass (backward.cotangents_of_outputs) asks `lookup_for`
which values a rule reads: for a node inside a region, the region is replayed once, when
the backward first reaches it, as new nodes recorded in the backward part of the graph
(`grad_of` is the region's mark, so the emitter says `recompute of checkpointed f`), and
the region's rules read those copies, of its inputs too (so passes/accumulate.py, which
would keep every copy alive for one matmul, knows them; Node.copy_of tells
passes/stable.py what each copies). The copies start from `_recompute_from(x, g)`, one per input:
x itself, but read only once the cotangent g arriving at the region is computed (JAX's
optimization barrier over the residuals and the cotangent). Without it, common-subexpression
elimination would take the copies for the forward values and undo the checkpoint; with it
they stay distinct, and stay in the backward. A region inside a region (nested
checkpoints) is replayed from the outer one's copies, so its inside is computed a third
time rather than kept by the outer replay.

Random draws inside f are kept, not drawn again (a second draw would differ). The dynamic
tape and forward mode just run f. Code an enclosing transformation traces (grad of grad)
calls `_recompute_from` as a primitive: its derivative is the identity in x, none in g;
the enclosing trace sees the generated code, recomputation included, not the checkpoint.
"""

import functools
import inspect

from .._typing import F
from ..errors import function_name
from ..graph import Node
from ..rules import Primitive, defbatch, defprimitive, register_helper
from ..rules.batching import spread
from ..trace.boxes import Box, stand_in
from ..trace.context import current_trace, user_stack
from ..trace.recording import bind
from ..tree import leaves, map_tree


def _recompute_from(x, *after):
    """x itself: generated code marks with this call where a checkpointed function's
    recomputation starts, after the values named in `after` (its cotangents)."""
    return x


recompute_from = defprimitive(
    "recompute_from", _recompute_from, "_recompute_from({*})", helper="_recompute_from",
    vjps=[lambda g, ans, x, *after: g], linear_in=(0,))


def _batch_recompute_from(ctx, x, *after):
    """Under vmap: the batch of x, still read only after its cotangents (a shared x,
    whose cotangents are batched, is spread along the batch afterwards)."""
    out = bind(recompute_from, (x, *after), {})
    return out if ctx.batched[0] else spread(out, ctx.size)


defbatch(recompute_from, _batch_recompute_from)


def _traceable(x, *after):
    return bind(recompute_from, (x, *after), {}) \
        if type(x) is Box or any(type(a) is Box for a in after) else x


register_helper("_recompute_from", _recompute_from, _traceable)

# the `grad_of` of a replayed node: a node standing for the checkpointed call (op
# "checkpoint", which the emitter's comment reads); never a node of the graph
_MARK = Primitive("checkpoint", None, "", builtin=True)


def checkpoint(fun: F) -> F:
    """`fun`, whose inner values a backward pass recomputes instead of keeping (a decorator
    too). Outside any transformation, and under forward mode or the tape, it is `fun`."""
    if not callable(fun):
        raise TypeError(f"checkpoint takes a function, got {type(fun).__name__} {fun!r}")
    @functools.wraps(fun)
    def checkpointed(*args, **kwargs):
        trace = current_trace()
        if trace is None or trace.eager or trace.grad_of is not None:
            return fun(*args, **kwargs)
        start = trace.next_id
        out = map_tree(fun(*args, **kwargs), stand_in)  # a written np.zeros: its Box
        _note(trace, start, out, fun, _parameter_names(fun, args, kwargs))
        return out
    return checkpointed


def _parameter_names(fun, args, kwargs):
    """{input node: the name of fun's parameter it came in by}, to name its copy."""
    try:
        bound = inspect.signature(fun).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return {}
    return {leaf.node: name for name, value in bound.arguments.items()
            for leaf in leaves(value) if type(leaf) is Box}


class Region:
    """The nodes one checkpointed call computed that its outputs depend on."""

    __slots__ = ("input_set", "inputs", "mark", "members", "names", "order", "outputs",
                 "parent", "replayed")

    def __init__(self, order, outputs, inputs, mark, names):
        self.order = order  # members in creation order: the order they are replayed in
        self.members = set(order)
        self.outputs = outputs
        self.inputs = inputs  # what members read from outside: replayed from these
        self.input_set = set(inputs)
        self.mark = mark
        self.names = names  # input -> the parameter of the function it was passed as
        self.parent = None  # the region this one's call ran inside, if any
        self.replayed = None  # {member or input: its copy}, once the backward made it


class Regions:
    """A trace's regions: `home` maps each member to the innermost region holding it."""

    def __init__(self):
        self.home = {}

    def add(self, region):
        for node in region.order:
            inner = self.home.get(node)
            if inner is None:
                self.home[node] = region
                continue
            while inner.parent is not None:
                inner = inner.parent
            if inner is not region:
                inner.parent = region


def _note(trace, start, out, fun, names):
    """Record the region of a checkpointed call that started at node id `start`."""
    outputs = {leaf.node for leaf in leaves(out) if type(leaf) is Box
               and leaf.node.trace_id == trace.id and leaf.node.id >= start}
    members, inputs, stack = set(), set(), list(outputs)
    while stack:
        node = stack.pop()
        if node in members or node in inputs:
            continue
        if node.id < start or node.prim is None or node.prim.effect:  # kept, not replayed
            inputs.add(node)
            continue
        members.add(node)
        stack.extend(a for a in node.args if type(a) is Node)
    if not members:
        return
    stack_at = user_stack()
    mark = Node(start, _MARK, (), {}, (), None, stack_at[0] if stack_at else None, stack_at)
    mark.name = function_name(fun)
    by_id = sorted(members, key=lambda n: n.id)
    regions = getattr(trace, "checkpoints", None)
    if regions is None:
        regions = trace.checkpoints = Regions()
    regions.add(Region(by_id, outputs, sorted(inputs, key=lambda n: n.id), mark, names))


def lookup_for(trace, node, g, lookup):
    """How the rule of `node` reads values: `lookup`, unless node is inside a checkpointed
    call, whose values are then read from its replay (made now, after g, if not yet)."""
    regions = getattr(trace, "checkpoints", None)
    region = None if regions is None else regions.home.get(node)
    if region is None:
        return lookup
    return lambda a: _value(trace, region, a, g, lookup)


def _value(trace, region, node, g, lookup, inputs=True):
    """The value a rule in `region` reads for a forward node: its copy in the innermost
    region (from this one out) that holds it inside (not as an output, which the forward
    kept) or, with `inputs`, reads it as an input; else the forward value itself."""
    while region is not None:
        if (node in region.members and node not in region.outputs) or \
                (inputs and node in region.input_set):
            return _replayed(trace, region, g, lookup)[node]
        region = region.parent
    return lookup(node)


def _replayed(trace, region, g, lookup):
    if region.replayed is not None:
        return region.replayed
    copies = {}
    for x in region.inputs:  # an enclosing region's copy of what is inside it
        value = _value(trace, region.parent, x, g, lookup, inputs=False)
        copies[x] = _barrier(trace, region, x, value, g)
    saved, trace.grad_of = trace.grad_of, region.mark
    try:
        for node in region.order:
            args = [copies[a] if type(a) is Node else a for a in node.args]
            first = trace.next_id
            copy = copies[node] = bind(node.prim, args, node.params)
            if type(copy) is Box and copy.node.id >= first:  # not one a rule's simplify gave
                copy.node.name = node.name
                copy.node.copy_of, copy.node.python_number = node, node.python_number
    finally:
        trace.grad_of = saved
    region.replayed = copies
    return copies


def _barrier(trace, region, x, value, g):
    if type(value) is not Box:
        return value
    saved, trace.grad_of = trace.grad_of, region.mark
    try:
        box = bind(recompute_from, (value, g), {})
    finally:
        trace.grad_of = saved
    box.node.name = region.names.get(x) or value.node.name
    box.node.copy_of = x
    return box
