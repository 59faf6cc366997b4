"""Tracebacks that end at the user's call: autodiffgen's own frames left out of the user's
mistakes, as JAX's traceback_util does.

A shape error in the user's function, an operation with no derivative or a bad argument
reaches the user through some twenty frames of the cache, the pipeline and the tracer,
none of which is theirs to read. So each public entry point (a call of grad's function,
jvp, vjp, vmap, the Jacobians, a compiled training step, emit, graph_of) is a *boundary*:
an exception leaving it keeps the user's frames and the entry point's own (the call they
made), and loses the rest. Only the outermost boundary on the stack rewrites (a grad
inside a jvp inside the user's function is one call of theirs), and the entry points a
user's own code calls from inside it stay: `f -> grad(...)(x) -> g` reads as written.

Which exceptions are the user's to read: those raised on purpose (AutodiffgenError), those
whose message or note names the user's line (`model.py:12: ...`, or NumPy's own error on
the user's operation, noted "(autodiffgen: in matmul, called at model.py:5)"), and those
raised in the user's own code (the innermost frame outside NumPy, the standard library and
installed packages is not ours). Anything else raised inside autodiffgen is a bug of ours,
and keeps every frame: a bug report needs them. Chained exceptions (`raise ... from`, and a
context not suppressed) are judged and shortened by the same rule, each alone; an
exception's type, message and chain are never changed.

AUTODIFFGEN_TRACEBACK=full, read when the exception leaves the entry point, keeps every
frame of every exception. Python 3.10 keeps them all anyway: a re-raise there restores the
traceback the interpreter holds, not the exception's.
"""

import functools
import os
import re
import sys
import sysconfig
import types
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from .errors import AutodiffgenError, _numpy_dir

P = ParamSpec("P")
R = TypeVar("R")
ENTRIES = set()  # the entry points' code objects: a frame of one is the user's call
_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep
_PLACE = re.compile(r"(<unknown location>|\S+:\d+): ")  # errors.at's prefix
_LIBRARIES = []  # NumPy, the standard library, installed packages (filled on first use)


def boundary(fun: Callable[P, R]) -> Callable[P, R]:
    """`fun` as an entry point: an exception leaving it ends at the user's call."""
    ENTRIES.add(fun.__code__)

    @functools.wraps(fun)
    def entry_point(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fun(*args, **kwargs)
        except Exception as error:
            shorten(error)
            raise  # (3.11+: with the traceback shorten gave it)
    return entry_point


_WRAPPER = next(c for c in boundary.__code__.co_consts if isinstance(c, types.CodeType))


def entry(fun: Callable[P, R]) -> Callable[P, R]:
    """`fun` as an entry point that shortens its own exceptions, for a call too hot for
    the wrapper's frame (grad's): `except Exception as error: shorten(error); raise`."""
    ENTRIES.add(fun.__code__)
    return fun


def shorten(error: BaseException) -> None:
    """Rewrite the tracebacks of `error` and its chain as the module says, when the entry
    point calling this is the outermost one on the stack."""
    if sys.version_info < (3, 11) or _full() or _inside_another(sys._getframe(1).f_back):
        return
    seen = set()
    while error is not None and id(error) not in seen:  # the chain Python prints
        seen.add(id(error))
        if _users(error):
            error.__traceback__ = _kept(error.__traceback__)
        error = error.__cause__ if error.__cause__ is not None else \
            None if error.__suppress_context__ else error.__context__


def _full():
    return os.environ.get("AUTODIFFGEN_TRACEBACK", "").strip().lower() == "full"


def _inside_another(frame):
    """Whether an entry point is running further out: it rewrites, once, for all."""
    while frame is not None:
        if frame.f_code in ENTRIES or frame.f_code is _WRAPPER:
            return True
        frame = frame.f_back
    return False


def _users(error):
    """Whether `error` is the user's to read (the module says which are)."""
    if isinstance(error, AutodiffgenError):
        return True
    try:
        text = str(error)
    except Exception:  # noqa: BLE001  a broken __str__: judged by its frames alone
        text = ""
    notes = getattr(error, "__notes__", None)
    if _PLACE.match(text) or "(autodiffgen: " in text or \
            any("(autodiffgen: " in str(n) for n in (notes if type(notes) is list else ())):
        return True
    innermost = None
    tb = error.__traceback__
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if not filename.startswith(_libraries()):
            innermost = filename
        tb = tb.tb_next
    return innermost is not None and not innermost.startswith(_PACKAGE)


def _libraries():
    """Where NumPy, the standard library and installed packages live: their frames say
    whose code called them, not whose mistake it is."""
    if not _LIBRARIES:
        paths = sysconfig.get_paths()
        dirs = {os.path.abspath(paths[k]) + os.sep
                for k in ("stdlib", "platstdlib", "purelib", "platlib")}
        _LIBRARIES.extend(sorted(dirs | {_numpy_dir() + os.sep}))
        _LIBRARIES.append("<frozen ")
    return tuple(_LIBRARIES)


def _kept(tb):
    """The traceback without autodiffgen's frames but the entry points' that the user
    called (the first, and any whose caller in the traceback is the user's code)."""
    kept, caller_ours = [], False
    while tb is not None:
        code = tb.tb_frame.f_code
        if code is not _WRAPPER:
            ours = code.co_filename.startswith(_PACKAGE)
            if not ours or (code in ENTRIES and not caller_ours):
                kept.append(tb)
            caller_ours = ours
        tb = tb.tb_next
    rebuilt = None
    for one in reversed(kept):
        rebuilt = types.TracebackType(rebuilt, one.tb_frame, one.tb_lasti, one.tb_lineno)
    return rebuilt
