"""What a cache miss runs: the compile pipeline, one stage per call, top to bottom.

    trace       tracer.trace: run the user's function once on Boxes
    backward    backward.traced_gradients, fused_graph: the rules' derivatives, one Graph
    optimize    passes.optimize: dce, cse, fold, ... to a fixed point
    generalize  generalize_batch.generalize, generalize_counts.general: one graph for
                every batch size and mask count the code allows (traces at other sizes)
    finish      passes.ensure_fresh, guards first: what the emitter takes as given
    emit        emit.emit_module: Graph -> Python source
    load        cache.loader.load: source -> a function (done by the cache, which keeps it)

Generalizing needs the function traced again at other sizes and counts. Rather than call
back into the tracer, those stages are generators that yield a generalize_batch.Retrace
and are sent the graph; `drive` performs the traces, so every stage takes data and
returns data.
"""

import contextlib
import functools
import gc
import threading

import numpy as np

from . import backward, generalize_batch, generalize_counts, naming, passes, tracer
from .arguments import signature_text, single
from .emit import emit_module
from .errors import function_name
from .graph import with_guards_first
from .tracer import is_number_input
from .tree import leaves


def without_gc_pauses(stage):
    """A stage run with the cyclic garbage collector off (as it was before, after): a first
    call allocates hundreds of thousands of long-lived objects (nodes, trees, lines), and
    each full collection walks all of them, about a tenth of a large graph's first call.
    Nothing is lost: what is garbage when the stage ends is collected as usual after it."""
    @functools.wraps(stage)
    def run(*args, **kwargs):
        if not gc.isenabled():  # off already: the user's choice, or an enclosing stage's
            return stage(*args, **kwargs)
        gc.disable()
        _held.traces = []
        try:
            return stage(*args, **kwargs)
        finally:
            _held.traces = None  # freed here, once the source is made (see hold)
            gc.enable()
    return run


_held = threading.local()


def hold(trace):
    """Keep a finished trace (its values: the arrays it computed) until the outermost
    pause ends. Freed as soon as the backward is made, those arrays lie at the top of the
    heap and the allocator hands their pages back to the system, to fault them in again at
    the next trace (a warm GRU's backward: 77 -> 125 ms); freed once the source is made,
    below what was allocated since, their memory serves the next first call."""
    traces = getattr(_held, "traces", None)
    if traces is not None:
        traces.append(trace)


@without_gc_pauses
def compile_gradient(fun, args, argnums, names, standalone=False, pure=False, diff=None,
                     has_aux=False):
    """(source, namespace, graph, locs) of `fun`'s value-and-grad at `args`. With the
    per-argument `diff` flags, the graph serves every batch size the code allows (a flag
    None: that argument's numbers are static); `pure`: code an enclosing trace will run;
    `has_aux`: fun returns (output, aux), and the code returns ((value, aux), gradients)."""
    graph = program(fun, args, argnums, names, standalone, pure, diff, has_aux)
    source, namespace, locs = emit_module([graph], standalone, pure)
    return source, namespace, graph, locs


@without_gc_pauses
def program(fun, args, argnums, names, standalone=False, pure=False, diff=None,
            has_aux=False):
    """The finished graph compile_gradient emits (its arguments are compile_gradient's):
    a standalone module (standalone.py) emits several into one module."""
    static = () if diff is None else {i for i in range(len(args)) if diff[i] is None}

    def trace(a):  # the trace and backward stages, at these arguments
        return gradient_graph(fun, a, argnums, names, static, capture=not standalone,
                              has_aux=has_aux)

    def optimized(graph):  # numexpr: not in a standalone module, nor under another trace
        return optimize(graph, numexpr=not (standalone or pure))

    raw = trace(args)
    if diff is None or pure:  # no batch sharing; a mask's count still read at run time
        stage = generalize_counts.general(args, optimized, raw)
    else:
        stage = generalize_batch.generalize(raw, args, diff, names, optimized)
    return finish(drive(stage, trace))  # optimize + generalize (tracing as asked), finish


def gradient_graph(fun, args, argnums, names, static=(), capture=True, has_aux=False):
    """Trace and backward: the complete value-and-grad Graph of `fun` at `args`, not yet
    optimized (without `capture`, what it reads besides its arguments is baked in). With
    `has_aux`, fun's auxiliary values are more outputs of the same graph: ((value, aux),
    gradients); no cotangent is seeded at them, so no derivative flows from them."""
    trace, boxed, out = tracer.trace(fun, args, argnums, names, capture=capture,
                                     static=static)
    if has_aux:
        out, aux = backward.split_aux(out, fun)
    backward.check_output(out, fun, scalar=True)
    naming.name_forward(list(trace.boxes))
    if type(out) is tracer.Box and out.node.name is None:
        out.node.name = function_name(fun)
    wrt = boxed[argnums[0]] if single(argnums) else tuple(boxed[i] for i in argnums)
    grads, cotangent_of = backward.traced_gradients(trace, out, wrt)
    signature = signature_text(args, names)
    arrays = [leaf for leaf in leaves(args) if isinstance(leaf, (np.ndarray, np.generic))]
    graph = backward.fused_graph(
        f"{function_name(fun)}_value_and_grad", names, trace,
        ((out, aux), grads) if has_aux else (out, grads),
        signature=signature,
        doc=(f"Value of {function_name(fun)} and its gradient with respect to "
             f"{', '.join(names[i] for i in argnums)}, traced at ({signature})."),
        statics={names[i]: a for i, a in enumerate(args)  # Python numbers are inputs
                 if i not in argnums and (type(a) in (bool, str, type(None)) or
                                          type(a) in (int, float) and not
                                          is_number_input(a, None if i in static else False))},
        derivative_of=cotangent_of,
        fresh_from=1,  # (value, gradients): the gradients are the caller's
        scalar=not arrays and any(type(leaf) is float for leaf in leaves(args)))
    if trace.capture is not None:  # the capture's clones read it back: a cycle that would
        trace.capture.trace = None  # hold the trace's every node until a collection
    hold(trace)
    return graph


def optimize(graph, numexpr):
    """The passes (when on: AUTODIFFGEN_PASSES=0 turns them off); `numexpr`: the code may
    use numexpr (not in a standalone module, nor in code an enclosing trace runs)."""
    return generalize_batch.optimize(graph, numexpr)


def finish(graph):
    """What the emitter takes as given: outputs that own their memory, guards first; when
    the passes are on, the folds of numbers that need the sizes' formulas known: powers of
    two multiplied into the factors they scale (passes/exact_scales.py), chains of
    additions and multiplications by constants as one `u * a + b` (passes/affine.py)."""
    if passes.ENABLED:
        graph, _ = passes.affine(passes.exact_scales(graph)[0])
    return with_guards_first(passes.ensure_fresh(graph))


def drive(stage, trace):
    """Run a generalizing stage (a generator, see the module docstring): trace each
    generalize_batch.Retrace it yields, send back the graph, and return what it returns."""
    try:
        request = next(stage)
        while True:
            graph = error = None
            with request.context or contextlib.nullcontext():
                try:
                    graph = trace(request.args)
                except Exception as failed:  # noqa: BLE001  a size the code does not run at
                    error = failed
            request = stage.throw(error) if error is not None and request.errors \
                else stage.send(graph)
    except StopIteration as done:
        return done.value
    finally:  # a failed trace's traceback holds this frame, which held it: a cycle
        error = None  # keeping the graphs until a collection
