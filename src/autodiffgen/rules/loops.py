"""A loop kept as a loop: one node of the outer graph holding its body, a graph of one step.

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

from dataclasses import dataclass

from ..graph import Graph, Node
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
    env = dict(zip(body.graph.inputs, values))
    for node in body.graph.nodes:
        env[node] = node.prim.impl(*[env[a] if type(a) is Node else a for a in node.args],
                                   **node.params)
    return tuple(env[o] if type(o) is Node else o for o in leaves(body.graph.outputs))


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
