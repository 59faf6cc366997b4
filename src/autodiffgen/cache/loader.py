"""Loading generated code: source in, a Python function out, living as long as it is used.

A compiled module lives exactly as long as its functions: its source lines (linecache)
and its line map (trace.context.GENERATED_LOCS) are registered under a filename no other
module ever gets, so tracebacks and pdb show the generated code and the user line it came from,
and removed when the functions are collected, so tracing a thousand distinct functions and
dropping them leaves nothing behind.
"""

import itertools
import linecache
import sys
import threading
import weakref

import numpy as np

from ..generated_helpers import HELPERS
from ..rules import TRACEABLE_HELPERS
from ..trace.context import GENERATED_LOCS

_counter = itertools.count()
_counter_lock = threading.Lock()
_dead_lines = []  # linecache keys of collected modules that a finalizer could not drop yet


def load(source, namespace, name, locs=None):
    """Compile generated source under a filename that tracebacks and pdb can show, and
    remember which user line each generated line came from (trace.context.user_stack)."""
    _drop_dead_lines()  # those a finalizer had to leave (see _forget)
    filename = _unique_filename(name)
    code = compile(source, filename, "exec")
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    GENERATED_LOCS[filename] = locs or {}
    scope = {"np": np, "__name__": f"autodiffgen.generated.{name}", **HELPERS}
    try:
        exec(code, scope)  # noqa: S102  our own generated code
    except BaseException:
        _forget(filename)
        raise
    scope.update(namespace)  # constants too big to print in the source
    scope.update(HELPERS)  # the module's copies, replaced: one GuardFailure class to catch
    scope.update(TRACEABLE_HELPERS)  # same results, and an enclosing trace can see into them
    function = scope[name]
    # every function of the module reads `scope`, which holds this one: it dies last
    weakref.finalize(function, _forget, filename).atexit = False
    return function


def _unique_filename(name):
    """The key of a module's linecache and GENERATED_LOCS entries, which its finalizer
    deletes: a name shared by two modules would delete the lines of a live one. The lock
    keeps the counter unique on free-threaded builds too (under the GIL, next() already is)."""
    with _counter_lock:
        number = next(_counter)
    return f"<autodiffgen-{number}:{name}>"


def _forget(filename):
    """Drop a collected module's line map, and its source lines unless linecache is busy.

    A finalizer runs at any allocation, in any thread, so possibly inside
    linecache.checkcache(), which (before CPython gh-126775) indexes the cache with a list
    of keys taken first and would raise KeyError for a key removed meanwhile: the lines
    then wait for the next finalizer or compilation."""
    GENERATED_LOCS.pop(filename, None)
    _dead_lines.append(filename)
    _drop_dead_lines()


def _drop_dead_lines():
    """Remove the deferred linecache entries, unless linecache is iterating its own."""
    if not _dead_lines or _linecache_running():
        return
    while True:
        try:  # pop, not `while _dead_lines`: another thread may take the last one first
            filename = _dead_lines.pop()
        except IndexError:
            return
        linecache.cache.pop(filename, None)


def _linecache_running():
    """Whether any thread is inside a linecache function right now."""
    for frame in sys._current_frames().values():
        while frame is not None:
            if frame.f_code.co_filename == linecache.__file__:
                return True
            frame = frame.f_back
    return False
