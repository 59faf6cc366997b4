"""What a cache miss runs: the compile path, one stage per call, top to bottom.

    trace       tracer.trace: run the user's function once on Boxes, reading what it reads
                besides its arguments (globals, closures, attributes, random generators)
                as inputs or guards (trace/capture.py)
    outputs     the front end's own part: what it seeds and returns (grad: the backward of
                a scalar; jvp: tangents; vjp: two functions; vmap: the batch; a training
                step: the optimizer's update), one Graph or a tuple of Graphs of one trace
    optimize    passes.optimize: dce, cse, fold, ... to a fixed point
    generalize  generalize.batch.generalize, generalize.counts.general: one graph for
                every batch size and mask count the code allows (traces at other sizes)
    finish      passes.ensure_fresh, guards first: the final graph
    plan        plan.planner.plan: order, rematerialization, buffer reuse, in-place
                writes and dels, as a Plan keyed by node (emit_module plans each final
                graph, and the NumPy twin it makes of a function of Python floats)
    emit        codegen.emitter.emit_module: the graphs and their plans -> Python source
    load        cache.loader.load: source -> a function (done by the cache, which keeps it)

Every front end (grad, value_and_grad, jvp, vjp, the Jacobians and Hessians built on them,
vmap, has_aux, compile_step, standalone modules, graph_of, autodiffgen.dask) describes
what is its own in a `Request` and calls `compile` (or `program`, for the finished graphs
of a module that holds several): what the trace reads, its guards, run-time random draws,
counts, batch sizes, the memory plan and emission are this module's, so a guarantee made
here holds for all of them. No other module calls tracer.trace to compile.

Generalizing needs the function traced again at other sizes and counts. Rather than call
the tracer, those stages take the trace and outputs stages as a function, `retrace(args)`
(`traced` with this request), and the optimize stage as `optimize(graph)`, so that no
later stage reaches back to an earlier one.
"""

import functools
import gc
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import loops, passes
from .backward import reverse as backward
from .codegen.emitter import emit_module
from .generalize import batch as generalize_batch
from .generalize import counts as generalize_counts
from .generalize import whiles as generalize_whiles
from .graph import Graph, with_guards_first
from .trace import naming, tracer


@dataclass(frozen=True)
class Traced:
    """One trace, as a front end's `outputs` receives it: the recording, the boxed
    arguments, the output (and with has_aux, the auxiliary values apart), and the
    arguments and names it was traced at (the tangents of a jvp too)."""

    trace: Any
    boxed: list
    out: Any
    aux: Any
    args: tuple
    names: list


@dataclass(frozen=True, eq=False)
class Request:
    """What one front end asks of the compile path: only what is its own.

    `outputs(request, traced)` makes its Graph (or a tuple of Graphs of the one trace) from the
    trace; `argnums` are the arguments it differentiates, `strict` how (tracer.trace's
    `diff`: True refuses integer leaves there, "auto" skips them, False none); `primals`
    the arguments the function is called on (jvp: without the tangents; vmap: one
    example); `call(run, boxed)` how (a training step calls loss(params, *batch));
    `batch` the per-argument flags of grad's cache, when the code serves every batch
    size (a flag None: that argument's numbers are constants); `last` a front end's touch
    on its optimized graphs (vjp: the backward checks counts first)."""

    fun: Callable
    args: tuple
    names: list
    outputs: Callable[["Request", Traced], Any]
    argnums: tuple = ()
    strict: Any = True
    has_aux: bool = False
    primals: Callable[[tuple], tuple] | None = None
    call: Callable | None = None
    batch: list | None = None
    standalone: bool = False  # a NumPy-only module: what the trace reads is a constant
    pure: bool = False  # code an enclosing trace runs: no in-place writes, no numexpr
    last: Callable[[list], list] | None = None

    @property
    def static(self):
        """The arguments whose Python numbers are constants of the code."""
        return () if self.batch is None else \
            {i for i in range(len(self.args)) if self.batch[i] is None}


@dataclass(eq=False)
class Compiled:
    """A compiled request: the module's source, the namespace it is loaded with (what the
    code reads that is not text), its first graph (its entry), every graph it holds, and
    the source map (generated line -> the user's line)."""

    source: str
    namespace: dict
    graph: Graph
    locs: dict
    graphs: list = field(default_factory=list)


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
def compile(request):
    """The Compiled module of `request`: every stage, once."""
    graphs = program(request)
    source, namespace, locs = emit_module(graphs, request.standalone, request.pure)
    return Compiled(source, namespace, graphs[0], locs, graphs)


@without_gc_pauses
def program(request):
    """The finished graphs `compile` emits: trace, outputs, optimize, generalize (tracing
    again as asked), finish. A standalone module (standalone.py) emits several requests'
    graphs into one module."""
    def optimized(graph):  # numexpr: not in a standalone module, nor under another trace
        return optimize(graph, numexpr=not (request.standalone or request.pure))

    raw = traced(request, request.args)
    retrace = functools.partial(traced, request)
    if request.batch is None or request.pure:  # a mask's count still read at run time
        graphs = generalize_counts.general(request.args, optimized, raw, retrace)
    else:
        graphs = generalize_batch.generalize(raw, request.args, request.batch,
                                             request.names, optimized, retrace, rolled)
    graphs = list(graphs) if type(graphs) is tuple else [graphs]
    if len(graphs) == 1:  # a `while` loop kept as a loop: every number of steps
        graphs = [generalize_whiles.general(graphs[0], raw, request.args, optimized, retrace)]
    if request.last is not None:
        graphs = request.last(graphs)
    if passes.ENABLED and not request.pure:  # no derivative of it taken: no stop_gradient
        graphs = [passes.identities(graph)[0] for graph in graphs]
    return [finish(graph) for graph in graphs]


def traced(request, args):
    """The trace and outputs stages at `args`: the request's graph (or tuple of graphs),
    not yet optimized."""
    primals = tuple(args) if request.primals is None else request.primals(args)
    trace, boxed, out = tracer.trace(
        request.fun, primals, request.argnums, request.names[:len(primals)],
        diff=request.strict, capture=not request.standalone, static=request.static,
        call=request.call)
    aux = None
    if request.has_aux:
        out, aux = backward.split_aux(out, request.fun)
    naming.name_forward(list(trace.boxes))
    graphs = request.outputs(request, Traced(trace, boxed, out, aux, tuple(args),
                                             request.names))
    if trace.capture is not None:  # the capture's clones read it back: a cycle that would
        trace.capture.trace = None  # hold the trace's every node until a collection
    hold(trace)
    return graphs


def optimize(graph, numexpr):
    """Loops the trace ran step by step kept as loops (`rolled`), then the passes (when
    on: AUTODIFFGEN_PASSES=0 turns them off); `numexpr`: the code may use numexpr (not in
    a standalone module, nor in code an enclosing trace runs)."""
    graph = rolled(graph)
    return passes.optimize(graph, numexpr=numexpr) if passes.ENABLED else graph


def rolled(graph):
    """loops.roll, each body given the passes and finish's folds."""
    return loops.roll(graph, lambda body: _folded(optimize(body, numexpr=False)))


def _folded(graph):
    if passes.ENABLED:
        graph, _ = passes.affine(passes.exact_scales(passes.identities(graph)[0])[0])
    return graph


def finish(graph):
    """What the emitter takes as given: outputs that own their memory, guards first; when
    the passes are on, the folds of numbers that need the sizes' formulas known: powers of
    two multiplied into the factors they scale (passes/exact_scales.py), chains of
    additions and multiplications by constants as one `u * a + b` (passes/affine.py)."""
    if passes.ENABLED:
        graph, _ = passes.affine(passes.exact_scales(graph)[0])
    return with_guards_first(passes.ensure_fresh(graph))

