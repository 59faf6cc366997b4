"""Which Python functions the user's code executed while traced, for the disk store.

A trace bakes in everything it read that the generated code does not read again itself,
so an entry is valid only where that code is the same (cache/disk/reads.manifest
describes it). While a disk-cached miss traces, `Recorder` notes the code of every
Python function the user's function executes (sys.settrace, or sys.setprofile under a
debugger; in the tracing thread only). The tracer runs the user's function inside
`user_code()`, which installs the hook only when a Recorder waits, so an uncached trace
pays nothing. Standard library only: the tracer imports this module.
"""

import contextlib
import sys
import threading

_local = threading.local()


def _on_call(frame, event, arg):
    """A trace or profile function: it sees each new Python frame once ('call'), and asks
    for no line events (returns None)."""
    if event == "call":
        code = frame.f_code
        for recorder in _local.stack:
            recorder.codes.setdefault(code, frame.f_globals)


class Recorder:
    """`with Recorder() as r:` notes in `r.codes` the code of every Python function this
    thread runs meanwhile inside `user_code()` blocks (the tracer runs the user's function
    in one), with its globals. Nested recorders all see the inner calls. `r.refused` says
    why nothing could be recorded."""

    def __init__(self):
        self.codes, self.refused = {}, None

    def __enter__(self):
        _local.__dict__.setdefault("stack", []).append(self)
        return self

    def __exit__(self, *exc):
        stack = _local.__dict__.get("stack", [])
        if self in stack:
            stack.remove(self)


_NOTHING = contextlib.nullcontext()


def user_code():
    """The context in which the tracer runs the user's function: while a Recorder waits
    in this thread, a hook notes every frame. Only there: a hook makes every Python call
    slower (2 to 3 times), and the rest of a compilation (rules, passes, emitting) is ours.

    sys.settrace where no tracer runs (its function is called for new frames only);
    sys.setprofile under a debugger or coverage (called for C calls too, 3x as often);
    neither when both are taken: the recorders are then `refused`, with the reason."""
    stack = _local.__dict__.get("stack")
    if not stack or _local.__dict__.get("hooked"):
        return _NOTHING
    return _hooked(stack)


@contextlib.contextmanager
def _hooked(stack):
    for get, put in ((sys.gettrace, sys.settrace), (sys.getprofile, sys.setprofile)):
        if get() is None:
            break
    else:
        for recorder in stack:
            recorder.refused = ("a tracer (sys.settrace) and a profiler (sys.setprofile) "
                                "were both active during the trace")
        yield
        return
    _local.hooked = True
    put(_on_call)
    try:
        yield
    finally:
        put(None)
        _local.hooked = False
