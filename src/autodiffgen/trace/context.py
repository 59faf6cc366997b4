"""Where tracing is, in this thread: the recording that is current, and the user's line.

The bottom of the trace stage: every other trace module asks here which recording a
traced value belongs to (`current_trace`) and where the user wrote the call being
recorded (`user_stack`, `user_loc`), for the graph's source lines and for messages.
Generated code traced again (grad of a compiled function) points at the user's lines it
came from through GENERATED_LOCS, which the cache's loader fills in.
"""

import linecache
import sys
import threading

from ..errors import at, is_internal
from . import naming, raising

_state = threading.local()
GENERATED_LOCS = {}  # generated code's filename -> {line: the user's (file, line)}
raising.GENERATED = GENERATED_LOCS


def current_trace():
    """The recording running in this thread (recording.Trace), or None."""
    return getattr(_state, "trace", None)


def make_current(trace):
    """Make `trace` (or None) this thread's current recording (recording.Trace does)."""
    _state.trace = trace


def user_stack(statements=None, sites=None):
    """(filename, lineno) of the user's frames, innermost first, up to the traced call.
    A list `statements` gets, per frame, which statement of its line the frame is in when
    the line holds several (naming.statement_of), so `a = f(x); b = g(x)` names apart; a
    list `sites`, per frame, (id(frame), code, bytecode offset): where in a loop the node
    was made (loops/find.py)."""
    frame = sys._getframe(2)
    stack = []
    while frame is not None:
        filename = frame.f_code.co_filename
        generated = GENERATED_LOCS.get(filename)
        loc = None
        if generated is not None:  # tracing generated code: the user's line it came from
            loc = generated.get(frame.f_lineno)
            user = None  # the generated line's columns are not the user's
        elif is_internal(filename):
            if stack:
                break
        else:
            loc, user = (filename, frame.f_lineno), frame
        if loc is not None:
            stack.append(loc)
            if statements is not None:
                statements.append(naming.statement_of(loc, user))
            if sites is not None and user is not None:
                sites.append((id(frame), frame.f_code, frame.f_lasti))
        frame = frame.f_back
    return tuple(stack)


def user_loc():
    stack = user_stack()
    return stack[0] if stack else ("<unknown>", 0)



def located(error, what):
    """`error` with the user's line added: as a note (Python 3.11+), else as the same
    exception type with the line in its message (when that type can be made so)."""
    note = f"(autodiffgen: {what} {at(user_loc(), '').rstrip(': ')})"
    if hasattr(error, "add_note"):
        error.add_note(note)
        return error
    try:
        return type(error)(f"{error} {note}")
    except Exception:  # noqa: BLE001  an exception type with other arguments: keep it
        return error


def source_line(loc):
    return linecache.getline(loc[0], loc[1]).strip() if loc else ""

