"""Signature keys and compiled functions.

A key is what a generated function depends on: each argument's tree structure, the
shape and dtype of every array, the type of every Python float and int (they are inputs,
read through guards where they decide control flow or a shape), and the value of every
other (static) argument: bools, strings, None, hashable objects. Computing it is the whole cost of a cache hit, so the
common case, a plain ndarray, takes one type check and a tuple.

A compiled module lives exactly as long as its functions: its source lines (linecache)
and its line map (tracer.GENERATED_LOCS) are registered under a filename no other module
ever gets, and removed when the functions are collected, so tracing a thousand distinct
functions and dropping them leaves nothing behind.
"""

import itertools
import linecache
import sys
import threading
import weakref
from collections import namedtuple

import numpy as np

from .errors import ArgumentError, user_frame, where
from .rules import TRACEABLE_HELPERS
from .runtime import HELPERS
from .tracer import GENERATED_LOCS, Box, Handle
from .tree import is_namedtuple

CacheInfo = namedtuple("CacheInfo", "hits misses entries")
_counter = itertools.count()
_counter_lock = threading.Lock()
_dead_lines = []  # linecache keys of collected modules that a finalizer could not drop yet
_STATIC = (int, bool, str, bytes, complex, type(None))
_INT64 = 2**63
_GENERATORS = (np.random.Generator, np.random.RandomState)  # inputs: keyed by type, not identity


def leaf_key(x, diff):
    kind = type(x)
    if kind is np.ndarray:
        return (x.shape, x.dtype)
    if kind is float:  # an input of the generated code, like a 0-d array
        return float if diff is not None else (float, x.hex())  # None: made static
    if isinstance(x, np.generic):  # a NumPy scalar: an input, like a 0-d array
        return (kind, "scalar")
    if kind is Box:  # an enclosing trace's value: always an input of the inner code
        return ("traced", x.shape, x.dtype)
    if kind is int and diff is False and -_INT64 <= x < _INT64:  # an input too (tracer.py)
        return int
    if kind in _STATIC:
        return (kind, x)
    if kind is tuple or kind is list or is_namedtuple(x):
        return (kind, tuple([leaf_key(v, diff) for v in x]))
    if kind is dict:
        return (dict, tuple([(k, leaf_key(v, diff)) for k, v in x.items()]))
    if isinstance(x, np.ndarray):  # a subclass: the tracer refuses it with a clear message
        return (kind, x.shape, x.dtype)
    if kind in _GENERATORS:  # a new Generator each call must not retrace (rules/random.py)
        return (kind, "generator")
    if kind is Handle:  # an enclosing trace's generator
        return ("traced", type(x.value))
    try:
        hash(x)
    except TypeError:
        raise ArgumentError(where(user_frame(2)) + f": an argument of type {kind.__name__} "
                            "is neither an array nor hashable, so it cannot be a static "
                            "argument of the generated code") from None
    return (kind, x)


def signature_key(args, diff_flags):
    return tuple(map(leaf_key, args, diff_flags))


def describe(args, names):
    """'W: float32[784, 10], y: int64[128], lr=0.1' for headers and messages."""
    parts = []
    for name, arg in zip(names, args):
        if isinstance(arg, np.ndarray):
            parts.append(f"{name}: {arg.dtype}{list(arg.shape)}")
        elif isinstance(arg, (dict, list, tuple)):
            parts.append(f"{name}: {type(arg).__name__} of {len(arg)}")
        elif isinstance(arg, (int, float, str, bool, complex, np.generic)) or arg is None:
            parts.append(f"{name}={arg!r}")
        else:  # no memory addresses: the same call must describe itself the same way
            label = getattr(arg, "__qualname__", None) or f"a {type(arg).__name__}"
            parts.append(f"{name}={label}")
    return ", ".join(parts)


def load(source, namespace, name, locs=None):
    """Compile generated source under a filename that tracebacks and pdb can show, and
    remember which user line each generated line came from (see tracer.user_stack)."""
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
