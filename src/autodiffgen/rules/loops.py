"""A loop kept as a loop: one node of the outer graph holding its body, a graph of one step.

Two kinds. `loop` runs over a tuple of items (a training step's update, one step per
parameter); `scan` runs a counted loop (`for t in range(...)`) whose steps carry values
from one to the next and save values of every step in stacks (see Scan below).

    loop(items of step 0, ..., items of step k-1, *invariants, *first; body)   a `for`
    loop_out(loop, item; step=i, output=j)                             step i's output j

The body's inputs are a step's items (the loop variables: a parameter, its gradient and
its optimizer slots, `for p, g, m, v in ...`), then the invariants (values of the outer
graph the body reads, the same at every step), then the values that must be computed
before the loop although it does not read them (`first`: other readers of an item it
overwrites, loops/roll.py). Each output of a step is written into one
of its items (`Body.into`): the loop updates its items in place, so `loop_out` is the item
itself after the loop, and the code names it so (loops/roll.py makes these nodes, the
emitter writes the `for`). `impl` runs the body's primitives step by step, for whatever
evaluates a graph by its NumPy (the constant folder, generalize's agreement check).
"""

import itertools
from dataclasses import dataclass, replace

import numpy as np

from ..graph import Graph, Node
from ..graph.size_formulas import AT_N, Dim, evaluate
from ..tree import leaves
from .registry import defprimitive


@dataclass(eq=False)
class Body:
    """One step of a loop: `graph` (inputs: the items, then the invariants; outputs: a
    tuple), `items` the number of loop variables, `into[j]` the item output j is written
    into, `trips` the number of steps, and the comment its `for` line carries."""

    graph: Graph
    items: int
    into: tuple
    trips: int
    comment: str = ""


def run_body(body, values):
    """The body's outputs (a tuple) on concrete inputs, by its primitives' NumPy."""
    return run_body_graph(body.graph, values)


def _loop(*args, body):
    k = body.items
    invariants = args[k * body.trips:][:len(body.graph.inputs) - k]
    return tuple(run_body(body, (*args[i * k:(i + 1) * k], *invariants))
                 for i in range(body.trips))


# made after the derivatives are taken (a training step's update): a derivative through
# one is an error, never a silent zero
loop = defprimitive("loop", _loop, None, strict=True)
loop_out = defprimitive("loop_out", lambda steps, item, *, step, output: steps[step][output],
                        None, strict=True)


@dataclass(frozen=True)
class SymRange:
    """A loop's steps whose bounds are sizes in n (size_formulas.Dim): range(n), range(n -
    2, 0, -1), one loop serving every length (generalize/unify.py makes it)."""

    start: object
    stop: object
    step: int

    def at(self, n):
        return range(evaluate(self.start, n), evaluate(self.stop, n), self.step)

    def __len__(self):  # (not a Python int: see count)
        raise TypeError("a SymRange's length is a formula: use count")

    @property
    def count(self):
        """The number of steps, a Dim (or an int)."""
        return _minus(self.stop, self.start) if self.step > 0 else _minus(self.start, self.stop)

    @property
    def first(self):
        return self.start if self.step > 0 else _plus(self.stop, 1)


def _minus(a, b):
    return _plus(a, _negated(b))


def _negated(x):
    return -x if type(x) is int else Dim(-x.a, -x.b, x.cast, x.var)


def _plus(a, b):
    if type(a) is int and type(b) is int:
        return a + b
    if type(a) is int:
        a, b = b, a
    if type(b) is int:
        return Dim(a.a, a.b + b, a.cast, a.var)
    if a.var != b.var:
        raise ValueError("steps counted in two sizes")
    return a.b + b.b if a.a + b.a == 0 else Dim(a.a + b.a, a.b + b.b, a.cast, a.var)


def steps_of(ts):
    """(number of steps, first t) of a loop's range, ints or sizes in n."""
    if type(ts) is SymRange:
        return ts.count, ts.first
    return len(ts), min(ts)


@dataclass(eq=False)
class Scan:
    """A counted loop: `for t in ts:` over the body `graph` (inputs: t, then the carries,
    then the invariants; outputs: the carries' new values, then the values each step
    saves), `carries` of them carried from one step to the next, each step's saved values
    stacked (row t - min(ts)) in `stacks` arrays; `ts` a range (forward: up, a backward
    loop: down)."""

    graph: Graph
    carries: int
    ts: range
    comment: str = ""
    exit: bool = False  # a `while` loop's: it runs until its test (a guard node of the
    # body marked "exit", its last) says stop, however many steps that takes; `ts` then
    # gives the first t and, unless it is a SymRange, the number of steps traced
    least: int = 0  # a `while` loop serving every number of steps: the least it serves

    @property
    def first(self):
        return steps_of(self.ts)[1]

    @property
    def count(self):
        return steps_of(self.ts)[0]

    def at(self, n):
        """This loop with every size formula in its body at n (a batch-polymorphic graph
        run at one size: generalize/batch.py's check)."""
        new, inputs, nodes = {}, [], []
        for node in self.graph.inputs:
            new[node] = node.replace(shape=evaluate(node.shape, n))
            inputs.append(new[node])
        for node in self.graph.nodes:
            new[node] = node.replace(
                args=tuple(new.get(a, a) if type(a) is Node else evaluate(a, n) for a in node.args),
                params=evaluate(node.params, n), shape=evaluate(node.shape, n))
            nodes.append(new[node])
        outputs = tuple(new.get(o, o) if type(o) is Node else o for o in self.graph.outputs)
        return Scan(replace(self.graph, inputs=inputs, nodes=nodes, outputs=outputs),
                    self.carries, evaluate(self.ts, n), self.comment, self.exit,
                    self.least)


def exit_test(scan):
    """A `while` loop's test: the body's guard marked "exit" (None: a counted loop)."""
    return next((n for n in scan.graph.nodes if n.params.get("exit")), None) \
        if scan.exit else None


def run_scan(scan, values):
    """(*final carries, *stacks) of the loop on concrete values (inits, invariants)."""
    carries, invariants = list(values[:scan.carries]), values[scan.carries:]
    rows = None
    ts = itertools.count(scan.first) if scan.exit else scan.ts
    for t in ts:
        env = run_body_graph(scan.graph, (t, *carries, *invariants), env=True)
        out = tuple(env[o] if type(o) is Node else o for o in leaves(scan.graph.outputs))
        carries = list(out[:scan.carries])
        if rows is None:
            rows = [[] for _ in out[scan.carries:]]
        for row, value in zip(rows, out[scan.carries:]):
            row.append(value)
        if scan.exit and not env[exit_test(scan)]:  # its test said stop
            break
    order = list(range(scan.first, t + 1)) if scan.exit else list(scan.ts)
    return (*carries, *[np.stack([r[order.index(t)] for t in sorted(order)]) for r in rows])


def run_body_graph(graph, values, env=False):
    """The body's outputs on concrete inputs (`env`: every node's value instead)."""
    values_of = dict(zip(graph.inputs, values))
    for node in graph.nodes:
        values_of[node] = node.prim.impl(
            *[values_of[a] if type(a) is Node else a for a in node.args], **node.params)
    if env:
        return values_of
    return tuple(values_of[o] if type(o) is Node else o for o in leaves(graph.outputs))


scan = defprimitive("scan", lambda *values, body: run_scan(body, values), None, strict=True)
scan_out = defprimitive("scan_out", lambda results, *, output, fresh: results[output], None,
                        strict=True)

AT_N.update((Scan, SymRange))  # evaluate() takes a loop's body and steps at n too
