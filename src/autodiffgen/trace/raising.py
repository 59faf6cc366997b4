"""Exceptions used as control flow: which traced statements may raise on other values.

A NumPy call the user wrote inside the body of a `try:` (in any of their frames on the
stack) may raise on values it did not raise on when traced: an index out of range, a
matrix that is not positive definite, a division under `np.errstate(divide="raise")`.
Such a call is "tried": when it raises while tracing and the user's code goes on, the
trace records a "raises" guard (recording.Trace.raised); when it does not, the generated
code runs it inside `try:` and turns a raise into GuardFailure, so the call traces the
path it takes. A call made while `np.geterr()` differs from what it was when the trace
started runs under the same `np.errstate(...)` in the generated code.

Both facts are kept per user stack (the statement's place, which the nodes that passes
make from it keep too) in `Graph.marks`: stack -> Mark. Functions without `try:` or
`np.errstate` have no marks, and their code is what it always was.
"""

import ast
import dis
import linecache
import sys
import threading
from typing import NamedTuple

import numpy as np

from ..errors import is_internal


class Mark(NamedTuple):
    """How the statements of one user stack run: under `errstate` (sorted (kind, mode)
    pairs that differ from the trace's start, or ()), and inside `try:` if `tried`."""

    errstate: tuple
    tried: bool


class Raised(NamedTuple):
    """A guard's outcome when the read itself raised (`int(x)` of a NaN, in a `try:`): the
    code checks the read still raises `error`."""

    error: type


# CPython 3.11's ast.parse keeps a recursion counter per interpreter, not per thread: two
# threads parsing at once can fail with "AST constructor recursion depth mismatch"
# (gh-106905). Every parse (user source here, templates in codegen, inspect.getsource in emit) holds this.
PARSE_LOCK = threading.Lock()


_TRY_LINES = {}  # filename -> (its lines as linecache holds them, set of try-body lines)


def _try_body_lines(filename):
    """The line numbers of `filename` that lie inside the body of a `try:` statement."""
    lines = linecache.getlines(filename)
    cached = _TRY_LINES.get(filename)
    if cached is not None and cached[0] is lines:
        return cached[1]
    found = set()
    try:
        with PARSE_LOCK:  # CPython 3.11: no two threads may parse at once (gh-106905)
            tree = ast.parse("".join(lines))
    except (SyntaxError, ValueError):  # not Python source (or none): nothing is known
        tree = None
    for node in ast.walk(tree) if tree is not None else ():
        is_try = isinstance(node, ast.Try) or type(node).__name__ == "TryStar"
        if is_try and node.body and node.handlers:  # try/finally alone catches nothing
            found.update(range(node.body[0].lineno, node.body[-1].end_lineno + 1))
    _TRY_LINES[filename] = (lines, found)
    return found


_HANDLERS = frozenset(["SETUP_FINALLY", "SETUP_EXCEPT", "PUSH_EXC_INFO", "CHECK_EXC_MATCH"])
_CATCHES = {}  # code object -> whether it has an exception handler (a try:, or a with:)


def _may_catch(code):
    """Whether `code` has any exception handler at all, read from its bytecode (cheap,
    once per code object): only then is its file parsed for `try:` bodies."""
    found = _CATCHES.get(code)
    if found is None:
        found = _CATCHES[code] = any(i.opname in _HANDLERS for i in dis.get_instructions(code))
    return found


GENERATED = {}  # context.GENERATED_LOCS: generated code's lines -> the user's (file, line)
STOPS = set()  # code objects where the traced call starts (tracer.trace): look no further


def in_try():
    """Whether a user frame between here and the start of the trace is executing a line
    inside a `try:` body (a frame of generated code counts as the user's line it came
    from). Frames beyond the traced call (the caller's, a test runner's) do not count."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code not in STOPS:
        filename = frame.f_code.co_filename
        generated = GENERATED.get(filename)
        if generated is not None:
            filename, line = generated.get(frame.f_lineno, (None, 0))
        else:
            line = 0 if is_internal(filename) or not _may_catch(frame.f_code) \
                else frame.f_lineno
        if line and line in _try_body_lines(filename):
            return True
        frame = frame.f_back
    return False


def errstate_diff(start):
    """The np.errstate settings now in force that differ from `start` (a dict from
    np.geterr()), as a sorted tuple of (kind, mode) pairs."""
    now = np.geterr()
    if now == start:
        return ()
    return tuple(sorted((k, v) for k, v in now.items() if start.get(k) != v))


def mark(trace, stack):
    """Note in `trace.marks` how the statement at `stack` must run; False if it is plain."""
    errstate = errstate_diff(trace.errstate)
    tried = in_try()
    if not (errstate or tried):
        return False
    trace.marks.setdefault(stack, Mark(errstate, tried))
    return True


def errstate_code(errstate):
    """`np.errstate(divide="raise")`, the generated code's spelling of a setting."""
    return "np.errstate(" + ", ".join(f"{k}={v!r}" for k, v in errstate) + ")"


__all__ = ["Mark", "Raised", "errstate_code", "errstate_diff", "in_try", "mark"]
