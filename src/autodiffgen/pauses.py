"""The cyclic garbage collector paused while a first call builds its graphs, and what
that pause keeps until it ends (pipeline.py's stages and the cache's compile use it)."""

import functools
import gc
import threading


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
            _held.traces = None  # freed here, after what the compile keeps (see hold)
            gc.enable()
    return run


_held = threading.local()


def hold(trace):
    """Keep a finished trace (its values: the arrays it computed) until the outermost
    pause ends. Freed as soon as the backward is made, those arrays lie at the top of the
    heap and the allocator hands their pages back to the system, to fault them in again at
    the next trace (a warm GRU's backward: 77 -> 125 ms); freed after the compile, below
    the source and code it keeps, their memory serves the next first call."""
    traces = getattr(_held, "traces", None)
    if traces is not None:
        traces.append(trace)
