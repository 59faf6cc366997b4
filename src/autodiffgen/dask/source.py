"""The one place the Dask bridge gets the generated module's source from.

A variant is what a worker needs to run one traced path: the module's source, its hash
(the worker's cache key), the function's name, and the row count the code is fixed to
(None when the module serves every batch size and checks shapes itself).

A standalone module cannot read the client's globals: what the loss reads besides its
arguments (a weight-decay global, a closure's array, an attribute) is a constant in it.
So the client keeps, beside a signature's variants, what a trace read and the value it
read (`what_it_read`: the reads the in-memory code would read again or check), and checks
them at every call (`still_holds`): a change makes the variants new, never stale.
"""

import hashlib

from .. import pipeline
from ..errors import TracingError, at
from ..rules.random import DRAW
from ..standalone import standalone_module
from ..trace.reads import Check, same_contents, snapshot


def module_variant(gf, args):
    """The standalone module of value_and_grad `gf` traced at `args` (a chunk's rows): it
    serves every row count and raises its GuardFailure on another path."""
    source, (entry,) = standalone_module([(gf, tuple(args))])
    key = hashlib.sha256(source.encode()).hexdigest()[:20]
    return {"key": key, "source": source, "function": entry, "rows": None}


def what_it_read(gf, args):
    """[capture.Check] of what `gf`'s function reads at `args` besides its arguments:
    each value it reads as an input, with the value it has now, and each guard."""
    graph = pipeline.traced(gf.request(args, batch=False), args)
    draws = [node for node in graph.nodes if node.prim is DRAW]
    if draws:  # a worker's stream is not the client's: each chunk would draw other numbers
        raise TracingError(at(draws[0].loc, "autodiffgen.dask: the loss draws random "
                              "numbers, which each worker would draw from its own stream, "
                              "not eager NumPy's: draw them on the client and pass them in "
                              "as a chunked argument"))
    reads = [node.params["read"] for node in graph.inputs if "read" in node.params]
    return [Check(read, "same", snapshot(read.follow())) for read in reads] + \
        list(graph.captured)


def still_holds(checks):
    """Whether every value the module was made from is still what it read."""
    try:
        return all(_holds(check, check.read.follow()) for check in checks)
    except (LookupError, AttributeError, ValueError):  # gone: a cell emptied, a key deleted
        return False


def _holds(check, now):
    if check.test == "is":
        return now is check.value
    if check.test == "len":
        return len(now) == check.value
    if check.test == "keys":
        return list(now) == check.value
    return same_contents(now, check.value)
