"""compile_step(loss, optimizer): one generated function for a whole training step.

    step = compile_step(loss, Adam(lr=1e-3))
    state = step.init(params)
    value = step(params, state, x, y)     # params and state hold the new values

The generated `loss_train_step(params, state, hyper, x, y)` computes the loss, its
gradient with respect to `params` and the optimizer's update in one function, returning
(value, new_params, new_state). The trace is grad's (the loss, then the backward its rules
record) followed by `optimizer._update` run on the same trace's Boxes: the update is more
nodes of the one graph, so the passes see forward, backward and update together (a
gradient is read where the update needs it, and freed after its last use).

In place, and how: the tracer never writes into a function's arguments (its writes are
functional: README "Writes"), so the traced step returns the new arrays. Its graph marks
params and state as *donated* (Graph.donated, as JAX's donate_argnums): the memory plan
(emit_memory.py) may then write an elementwise result into such an input's buffer once
the input has had its last read (`m = np.multiply(hyper_beta1, state_m_W1,
out=state_m_W1)`), as it does with the code's own temporaries. An output so computed IS
your array; any other (a weight still read through a transposed view by the backward, a
0-d step count) is a new array that the step copies into yours with np.copyto. So params
and state are updated in place (other references see the new values), and must be
writeable arrays of their own: the step refuses leaves that share memory with each other
or with the batch, since the code writes into one before it has read the others. The
gradients are temporaries of the generated function, freed at their last use. No
guard can fail after such a write: the guards come first, or are read by the loss's
forward, and every params and state leaf has its last read in the update, after them.

What the trace reads: the loss is traced as grad traces it (pipeline.Request, `call`
loss(params, *batch)), so what it reads besides its arguments (globals, closures,
attributes, random draws) is read again or checked at every step, as under grad; params,
state and the batch are inputs (arrays); the optimizer's
float hyperparameters (`hyper`: lr, betas, ...) are inputs too, read from the optimizer
at each call, so a learning-rate schedule needs no new trace; its structural settings
(`hyper["flags"]`: momentum on or off, nesterov, centered, weight decay on or off) are
bools, so the cache key holds them and a change traces again; the code never reads them,
so they are no parameter of their own. As for `value_and_grad`, a new shape
or dtype (a last, shorter batch) traces again; the code does not serve other batch sizes.
"""

import functools
import inspect
import os
import sys

import numpy as np

from . import tracebacks
from .api import GradFunction
from .backward import reverse as backward
from .cache import retrace
from .cache.disk import store
from .cache.disk.entry import OnDisk
from .errors import ArgumentError, at, function_name
from .graph import Node, Steps
from .trace import naming
from .trace.arguments import signature_text
from .trace.boxes import Box
from .trace.context import user_loc
from .transforms import _Transformed
from .tree import leaves, map_tree


class TrainStep(_Transformed):
    """A compiled training step of `loss(params, *batch)` with `optimizer`: call it as
    step(params, state, *batch); it returns the loss before the update."""

    def __init__(self, loss, optimizer, example=None):
        if isinstance(loss, GradFunction):  # a decorated loss: its function and examples
            example = loss.example if example is None else example
            loss = loss.fun
        self.loss, self.optimizer = loss, optimizer

        def train_step(params, state, hyper, *batch):  # the name the trace shows
            return loss(params, *batch)
        functools.update_wrapper(train_step, loss, assigned=("__module__", "__qualname__",
                                                              "__doc__"), updated=())
        train_step.__name__ = f"{function_name(loss)}_train"
        super().__init__(train_step)
        self.example = example  # the loss's arguments, for `autodiffgen emit` (cli.py)
        self.example_fun = loss

    def _view(self, max_entries, max_variants):
        """The cache, never on disk: the update's code (the optimizer's) runs outside the
        traced clone, so the disk key could not hold it (Adam and AdamW would share one)."""
        view = super()._view(max_entries, max_variants)
        view.store.disk = _NotOnDisk(view.store.disk.fun, ())
        return view

    def init(self, params):
        """The optimizer's state for these parameters (optimizer.init)."""
        return self.optimizer.init(params)

    def _arguments(self, params, state, batch):
        """The generated step's arguments: the structural flags go with the float
        hyperparameters, as bools the cache key holds and the code never reads."""
        return (params, state, {**self.optimizer.hyper(), "flags": self.optimizer.flags()},
                *batch)

    @tracebacks.boundary
    def __call__(self, params, state, *batch):
        targets = leaves((params, state))
        _check_targets(targets, batch)
        value, new_params, new_state = super().__call__(
            *self._arguments(params, state, batch))
        for old, new in zip(targets, leaves((new_params, new_state))):
            if new is not old:  # else written in place by the generated code
                np.copyto(old, new)
        return value

    @tracebacks.boundary
    def source(self, params, state, *batch):
        """The generated step a call with these arguments runs. Run on copies: the cache
        may run the code to find the variant whose guards the arguments pass, and the
        code writes into params and state."""
        params, state = map_tree((params, state), np.copy)
        return super().source(*self._arguments(params, state, batch))

    def example_source(self, params, *batch):
        """The generated step at the loss's example arguments (`autodiffgen emit`), with
        the optimizer's initial state."""
        return self.source(params, self.init(params), *batch)

    def _n_primals(self, n):
        return n

    def _arg_names(self, n):
        """params, state, hyper, then the loss's own names for the batch."""
        try:
            own = [p.name for p in inspect.signature(self.loss).parameters.values()
                   if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)][1:]
        except (TypeError, ValueError):
            own = []
        names = ["params", "state", "hyper"]
        names += [name if name not in names else f"{name}_" for name in own]
        return (names + [f"batch_{i}" for i in range(len(names) - 3, n - 3)])[:n]

    def _own(self, args):
        """The loss is what is traced, on params and the batch (what it reads besides is
        read again or guarded, as under grad); state and hyper are inputs its update
        reads. Derivatives with respect to params."""
        return {"fun": self.loss, "argnums": (0,), "call": _loss_on_params_and_batch}

    def _outputs(self, request, traced):
        """The loss's backward, then the optimizer's update run on the same trace's
        Boxes: (value, new params, new state)."""
        trace, boxed, out, names, args = (traced.trace, traced.boxed, traced.out,
                                          traced.names, traced.args)
        backward.check_output(out, self.loss, scalar=True)
        if type(out) is Box and out.node.name is None:
            out.node.name = "loss"
        grads, cotangent_of = backward.traced_gradients(trace, out, boxed[0])
        first = trace.next_id
        trace.replaying = _OptimizerLines(self.optimizer)
        steps = []
        try:
            with trace:
                hyper = {k: v for k, v in boxed[2].items() if k != "flags"}
                new_params, new_state = self.optimizer._update(
                    boxed[0], grads, boxed[1], hyper, args[2]["flags"],
                    leaf=functools.partial(_watched, trace, self.optimizer._leaf, steps))
        finally:
            trace.replaying = None
        _name_update([node for node in trace.boxes if node.id >= first])
        loss_name = function_name(self.loss)
        graph = backward.fused_graph(
            f"{loss_name}_train_step", names, trace, (out, new_params, new_state),
            signature=signature_text(args, names), derivative_of=cotangent_of, fresh_from=1,
            doc=(f"{loss_name}(params, ...), its gradient with respect to params and "
                 f"{type(self.optimizer).__name__}'s update: (value, new params, new state)"))
        # the step overwrites params and state anyway: the code may write into them
        graph.donated = frozenset(b.node for b in leaves(boxed[:2]) if type(b) is Box)
        graph.update = _update_header(self.optimizer)
        if all(type(v) is Node for step in steps for v in step[2] + step[3]):
            graph.loops = (Steps(("p", "g", *self.optimizer.slots), tuple(steps),
                                 (0, *range(2, 2 + len(self.optimizer.slots))),
                                 "each parameter, its gradient and its state"),)
        return graph


def _watched(trace, leaf, steps, p, g, *rest):
    """The optimizer's update of one parameter, noted as one step of a loop (Graph.loops):
    the ids its nodes take, its items (p, g and the slots) and its outputs."""
    first = trace.next_id
    out = leaf(p, g, *rest)
    steps.append((first, trace.next_id, tuple(_node(v) for v in (p, g, *rest[:-3])),
                  tuple(_node(v) for v in out)))
    return out


def _node(value):
    return value.node if type(value) is Box else value


class _OptimizerLines:
    """What the update's nodes take as their lines (tracer.Trace.new_node): the innermost
    line of the optimizer's own code (its class's and its bases' files), which names the
    values it assigns (`m = b1 * m + ...`: naming.py); never the caller's of the step."""

    statements = None

    def __init__(self, optimizer):
        self.files = set()
        for cls in type(optimizer).__mro__[:-1]:  # (not object's)
            try:
                self.files.add(inspect.getsourcefile(cls))
            except TypeError:  # a class without a file: its lines name nothing
                pass

    @property
    def stack(self):
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_filename in self.files:
                return ((frame.f_code.co_filename, frame.f_lineno),)
            frame = frame.f_back
        return ()


def _name_update(nodes):
    """The update's values named after the optimizer's variables (Adam's `m`, `v`), then
    its lines dropped: none is the user's, and the update's header points at them."""
    naming.name_forward(nodes)
    for node in nodes:
        node.loc, node.stack = None, ()


def _update_header(optimizer):
    """The update's header: whose update it is and where its formulas are, as a source
    comment says it (`Adam update: optim.py:123  Adam._leaf`), the lines being none of
    the user's."""
    title = f"{type(optimizer).__name__} update"
    leaf = type(optimizer)._leaf
    try:
        line = inspect.getsourcelines(leaf)[1]
        where = f"{os.path.basename(inspect.getsourcefile(leaf))}:{line}"
    except (OSError, TypeError):  # no source: its name alone
        return f"{title}: {leaf.__qualname__}"
    return f"{title}: {where}  {leaf.__qualname__}"


def _loss_on_params_and_batch(loss, boxed):
    """How the step calls the traced loss: on params and the batch (after params, state
    and hyper)."""
    return loss(boxed[0], *boxed[3:])


def _check_targets(targets, batch):
    """Every leaf of params and state a writeable array of its own (the generated code may
    write into it before it has read every other input), no two sharing one buffer, and
    none the buffer of a batch array. Compared by base array: one pass, no pair tests."""
    bases = set()
    for leaf in targets:
        if not isinstance(leaf, np.ndarray) or not leaf.flags.writeable:
            raise ArgumentError(at(user_loc(), "compile_step updates params and state "
                                   "in place: every leaf must be a writeable NumPy array, got "
                                   f"{type(leaf).__name__}"))
        base = leaf if leaf.base is None else leaf.base
        if id(base) in bases:
            raise ArgumentError(at(user_loc(), "compile_step updates params and state "
                                   "in place: two of their arrays share memory (views of one "
                                   "array, or one array twice); give each its own copy"))
        bases.add(id(base))
    for leaf in leaves(batch):
        if isinstance(leaf, np.ndarray) and id(leaf if leaf.base is None else leaf.base) in bases:
            raise ArgumentError(at(user_loc(), "compile_step: a batch array shares "
                                   "memory with params or state, which the step overwrites"))


class _NotOnDisk(OnDisk):
    def key(self, signature_key, traced):
        if store.enabled():
            retrace.disk(function_name(self.fun), "not stored: a compiled training step is "
                         "kept in memory only (the optimizer's code is not in the key)")
