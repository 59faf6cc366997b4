"""vmap's stage: a function of one example applied to a batch, as one Graph.

    vmap(f, in_axes=0, out_axes=0)(*args)     (transforms.py: the cached transformation)

The function is traced once on one example's worth of values (each mapped argument with
its batch axis taken away); then, in the same recording, the traced nodes are replayed in
order on the batch: a node that reads no batched value is shared by every example and
stays as it is; one that does is replaced by its primitive's batching rule
(rules/batching.py), applied to the batched values (batch on axis 0). The replay records
primitives like user code, so the generated code is NumPy on whole batches, with no loop
over the examples, cached by the arguments' signature as grad's is. Nested in another
transformation, the generated code is traced by it like any NumPy code; another
transformation nested inside (vmap(grad(loss))) has been traced into primitives that the
replay batches.

What the trace read: each mapped argument is an input of the generated code (the example
it traced at is not); what Python decided from one example's values (a guard: `if x > 0`,
`float(x)`) cannot hold for every example of a batch, and is refused with the user's line,
as JAX refuses such control flow under vmap. Guards on shared values stay guards.
"""

import numpy as np

from ..errors import (
    ArgumentError,
    OutputError,
    TracingError,
    UnsupportedOperationError,
    at,
    def_site,
    function_name,
)
from ..graph import Node, is_guard
from ..rules import PRIMITIVES
from ..rules.batching import BATCH_RULES, Context, Unbatchable
from ..rules.control import READS
from ..trace.arguments import index as as_index
from ..trace.arguments import signature_text
from ..trace.boxes import Box, result_dtype
from ..trace.context import user_loc
from ..tree import (
    is_container,
    items,
    leaves,
    map_tree,
    matching_children,
    rebuild,
    same_node,
    step_text,
    structure_text,
)
from .reverse import fused_graph


def axes_per_leaf(axes, tree, where):
    """A tree of tree's structure holding each leaf's axis: `axes` is a prefix of it (an
    int or None applies to a whole subtree), as in JAX."""
    if axes is None or as_index(axes) is not None:
        return map_tree(tree, lambda _: None if axes is None else as_index(axes))
    if not is_container(tree) or not same_node(tree, axes):
        raise ArgumentError(at(user_loc(), f"vmap: {where} has structure "
                               f"{structure_text(axes)}, which is not a prefix of the "
                               f"value's structure {structure_text(tree)}"))
    return rebuild(tree, [axes_per_leaf(a, child, f"{where}{step_text(k)}")
                          for a, (k, child) in zip(matching_children(tree, axes), items(tree))])


def in_axes_of(in_axes, args):
    """Each argument's axes tree, from in_axes: an int or None for all, or one entry per
    positional argument."""
    if in_axes is None or as_index(in_axes) is not None:
        return [axes_per_leaf(in_axes, a, "in_axes") for a in args]
    if type(in_axes) not in (tuple, list) or len(in_axes) != len(args):
        raise ArgumentError(at(user_loc(), f"vmap: in_axes must be an int, None, or a tuple "
                               f"with one entry per positional argument ({len(args)} given), "
                               f"got {in_axes!r}"))
    return [axes_per_leaf(a, arg, f"in_axes[{i}]") for i, (a, arg) in enumerate(zip(in_axes, args))]


def batch_size(args, axes, names):
    """The batch size all mapped leaves agree on (their axes normalized in place)."""
    sizes = {}

    def check(leaf, axis, name):
        if axis is None:
            return None
        if not isinstance(leaf, (np.ndarray, np.generic)) or np.ndim(leaf) == 0:
            raise ArgumentError(at(user_loc(), f"vmap: in_axes maps axis {axis} of {name!r}, "
                                   f"but it is {_kind(leaf)}: only arrays of at least one "
                                   "dimension can be mapped (give it in_axes None)"))
        n = np.ndim(leaf)
        if not -n <= axis < n:
            raise ArgumentError(at(user_loc(), f"vmap: in_axes maps axis {axis} of {name!r}, "
                                   f"which has only {n} dimension(s)"))
        sizes.setdefault(np.shape(leaf)[axis % n], []).append(name)
        return axis % n

    fixed = [_map_named(check, a, ax, name) for a, ax, name in zip(args, axes, names)]
    if not sizes:
        raise ArgumentError(at(user_loc(), "vmap: in_axes maps no argument (every entry is "
                               "None): at least one must have a batch axis"))
    if len(sizes) > 1:
        found = "; ".join(f"size {k}: {', '.join(v)}" for k, v in sizes.items())
        raise ArgumentError(at(user_loc(), f"vmap: the mapped axes have different sizes "
                               f"({found}); they must all be the batch size"))
    return next(iter(sizes)), fixed


def _map_named(fn, tree, axes, name):
    if is_container(tree):
        return rebuild(tree, [_map_named(fn, child, a, f"{name}{step_text(k)}")
                              for a, (k, child) in zip(matching_children(tree, axes), items(tree))])
    return fn(tree, axes, name)


def _kind(x):
    if isinstance(x, (np.ndarray, np.generic)):
        return f"a {np.ndim(x)}-d array"
    return f"a {type(x).__name__}"


def example_of(leaf, axis):
    """One example of a mapped leaf (the first; zeros for an empty batch)."""
    if axis is None:
        return leaf
    if np.shape(leaf)[axis] == 0:
        shape = np.shape(leaf)[:axis] + np.shape(leaf)[axis + 1:]
        return np.zeros(shape, leaf.dtype)[()]
    return np.take(leaf, 0, axis=axis)


def pairs(boxed, axes):
    """(leaf, axis) pairs of two trees of one structure."""
    return list(zip(leaves(boxed), leaves(axes)))


# ---- the replay ----------------------------------------------------------------------------
def batched_inputs(trace, boxed, args, axes):
    """{per-example input node: its batch (an input of the trace, moved to axis 0)}, and
    {per-example input node: the batch's input Box, as the caller passes it}."""
    found, raw = {}, {}
    for (box, axis), value in zip(pairs(boxed, axes), leaves(args)):
        if axis is None or type(box) is not Box:
            continue
        node = box.node
        batch = raw[node] = trace.new_input(value, node.name, node.params["path"])
        if axis:
            batch = PRIMITIVES["transpose"](batch, axes=(axis, *(
                a for a in range(np.ndim(value)) if a != axis)))
        found[node] = batch
    return found, raw


def replay(trace, env, size, raw):
    """Batch every node that reads a batched value, in order (env grows: node -> batch)."""
    nodes = sorted([n for n in trace.boxes if n.prim is not None] + trace.guards,
                   key=lambda n: n.id)
    for node in nodes:
        if not any(type(a) is Node and a in env for a in node.args):
            continue
        if is_guard(node):
            _guard_again(trace, node, raw)
            continue
        env[node] = _batched(trace, node, env, size)
    return env


def _guard_again(trace, node, raw):
    """A guard that reads batched values. One on the memory layout of the arguments (the
    check of generated code that writes, which an enclosing trace runs) is checked again
    on the batched arguments; one on the layout of a value computed inside is a property
    of the per-example code only (the batched code's writes copy), and is dropped; any
    other is a decision on one example's values, refused."""
    test = node.params["test"]
    if test == "count_nonzero":
        raise UnsupportedOperationError(at(node.loc or user_loc(), _COUNT_MESSAGE))
    if test not in READS_LAYOUT:
        raise TracingError(at(node.loc or user_loc(), _GUARD_MESSAGE))
    if all(type(a) is Node and a in raw for a in node.args):
        boxes = [raw[a] for a in node.args]
        outcome = READS[test](*[b.value for b in boxes], *node.params["index"])
        trace.guard(boxes[0], test, outcome, node.params["index"], more=boxes[1:])


READS_LAYOUT = ("layout", "aliases")
_COUNT_MESSAGE = (
    "vmap: a boolean mask or np.nonzero selects here a number of elements that differs "
    "between examples, so the examples' results could not be stacked into one batch: "
    "use np.where (or a weighted sum) instead of selecting")
_GUARD_MESSAGE = (
    "vmap: the function reads a value that differs between examples as a Python value "
    "here (an `if` on it, float(), int(), len() of a mask...), which one vectorized "
    "function cannot do for a whole batch. Compute both branches and choose with "
    "np.where, or keep the decision outside the mapped function")


def _batched(trace, node, env, size):
    rule = BATCH_RULES.get(node.prim)
    if rule is None:
        raise UnsupportedOperationError(at(node.loc or user_loc(), f"vmap: {node.prim.name} "
                                           "has no batching rule, so it cannot be applied to "
                                           "a batch of examples; add one with "
                                           f"autodiffgen.rules.defbatch({node.prim.name}, ...)"))
    args = [env[a] if type(a) is Node and a in env else
            trace.boxes[a] if type(a) is Node else a for a in node.args]
    examples = [_value(trace, a) for a in node.args]
    batched = [type(a) is Node and a in env for a in node.args]
    ctx = Context(node.prim, size, batched, examples, node.shape)
    trace.replaying = node
    try:
        out = rule(ctx, *args, **node.params)
    except Unbatchable as error:
        raise UnsupportedOperationError(at(node.loc or user_loc(), f"vmap: {error}")) from None
    finally:
        trace.replaying = None
    if type(out) is not Box or np.shape(out.value) != (size, *node.shape) \
            or result_dtype(out.value) != node.dtype:
        raise AssertionError(f"the batching rule of {node.prim.name} made "
                             f"{_kind(getattr(out, 'value', out))} of shape "
                             f"{np.shape(getattr(out, 'value', out))} and dtype "
                             f"{result_dtype(getattr(out, 'value', out))} for a batch of "
                             f"{size} results of shape {node.shape} and dtype {node.dtype}")
    return out


def _value(trace, a):
    if type(a) is not Node:
        return a
    box = trace.boxes.get(a)
    return box.value if box is not None else None


# ---- outputs ---------------------------------------------------------------------------------
def batched_outputs(trace, out, env, size, out_axes, fun):
    """out with each leaf's batch on its out_axes axis; a leaf that does not depend on the
    batch is repeated along it (out_axes None: returned as it is, once)."""
    axes = axes_per_leaf(out_axes, out, "out_axes")
    return _map2(lambda leaf, axis: _output(leaf, axis, env, size, fun), out, axes)


def _map2(fn, tree, axes):
    if is_container(tree):
        return rebuild(tree, [_map2(fn, child, a) for a, (_, child)
                              in zip(matching_children(tree, axes), items(tree))])
    return fn(tree, axes)


def _output(leaf, axis, env, size, fun):
    mapped = type(leaf) is Box and leaf.node in env
    if axis is None:
        if mapped:
            raise OutputError(at(user_loc(), f"vmap: out_axes is None for an output of "
                                 f"{function_name(fun)} that differs between examples"))
        return leaf
    value = env[leaf.node] if mapped else leaf
    ndim = np.ndim(value.value if type(value) is Box else value) + (not mapped)
    if not -ndim <= axis < ndim:
        raise OutputError(at(user_loc(), f"vmap: out_axes {axis} is out of range for an "
                             f"output with {ndim} dimension(s)"))
    axis %= ndim
    if not mapped:
        value = np.asarray(value) if type(value) is not Box else value
        shape = np.shape(value.value if type(value) is Box else value)
        value = np.broadcast_to(np.expand_dims(value, 0), (size, *shape))
    if axis:
        value = np.moveaxis(value, 0, axis)
    return value


# ---- the graph --------------------------------------------------------------------------------
def batched_graph(fun, trace, boxed, out, args, axes, names, size, out_axes):
    """The generated function's Graph: its inputs the batched arguments (and what the
    trace read besides), its output the batched result, in a 1-tuple."""
    with trace:
        env, raw = batched_inputs(trace, boxed, args, axes)
        examples = set(env)
        replay(trace, env, size, raw)
        outputs = batched_outputs(trace, out, env, size, out_axes, fun)
    trace.inputs = [n for n in trace.inputs if n not in examples]
    trace.tried = [n for n in trace.tried if n not in env]
    trace.guards = [n for n in trace.guards if not any(a in env for a in n.args
                                                        if type(a) is Node)]
    signature = signature_text(args, names)
    graph = fused_graph(f"{function_name(fun)}_vmap", names, trace, (outputs,),
                        signature=signature, fresh_from=0,
                        doc=f"{function_name(fun)} applied to a batch of {size} examples at "
                            "once")
    if examples & set(graph.nodes + graph.inputs):  # pragma: no cover  (a rule's mistake)
        raise AssertionError("vmap: a batched result still reads one example")
    return graph


def examples(args, names, in_axes):
    """What vmap traces: one example of each argument (a mapped one without its axis)."""
    _, axes = batch_size(args, in_axes_of(in_axes, args), names)
    return [_map2(example_of, a, ax) for a, ax in zip(args, axes)]


def batched_outputs_graph(traced, in_axes, out_axes):
    """vmap's own stage (pipeline.Request.outputs): the trace of one example replayed on
    the batch."""
    args, names = traced.args, traced.names
    if traced.trace.writes:  # one example's value: not what the batch would write
        path = traced.trace.writes[0][0]
        raise UnsupportedOperationError(at(def_site(traced.trace.fun), "vmap: the function "
                                           f"assigns into {names[path[0]]}"
                                           f"{''.join(f'[{k!r}]' for k in path[1:])}, a "
                                           "container passed to it; under vmap each example "
                                           "would write its own value: return it instead"))
    size, axes = batch_size(args, in_axes_of(in_axes, args), names)
    return batched_graph(traced.trace.fun, traced.trace, traced.boxed, traced.out, args, axes,
                         names, size, out_axes)
