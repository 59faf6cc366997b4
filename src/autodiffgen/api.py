"""grad, value_and_grad and emit: the pipeline from a NumPy function to cached code.

    trace the call on Boxes -> name values -> record the backward pass
    -> collect the fused graph -> emit source -> compile -> cache by signature
"""

import contextlib
import functools
import inspect
import os
import threading

import numpy as np

from . import backward, diskcache, diskdeps, diskentry, naming, poly, retrace, tracer
from .cache import CacheInfo, describe, leaf_key, load, signature_key
from .emit import emit_module
from .errors import (
    ArgumentError,
    GuardError,
    TracingError,
    at,
    def_site,
    function_name,
    user_frame,
    where,
)
from .graph import is_guard
from .runtime import GuardFailure
from .tree import leaves

_MAX_ARGS = 256
MAX_VARIANTS = int(os.environ.get("AUTODIFFGEN_MAX_VARIANTS", "8"))


def compile_gradient(fun, args, argnums, names, standalone=False, pure=False, diff=None):
    """Trace `fun` at `args` and return (source, namespace, graph, locs) of its
    value-and-grad. With the per-argument `diff` flags, the graph serves every batch size
    the code allows (poly.py) when it can."""
    def build(a):
        return trace_gradient(fun, a, argnums, names)
    graph = build(args) if diff is None or pure else poly.compile_polymorphic(
        build, args, diff, names, numexpr=not standalone)[0]
    source, namespace, locs = emit_module([graph], standalone, pure)
    return source, namespace, graph, locs


def trace_gradient(fun, args, argnums, names):
    """The fused value-and-grad Graph of `fun` at `args`."""
    trace, boxed, out = tracer.trace(fun, args, argnums, names)
    backward.check_output(out, fun, scalar=True)
    naming.name_forward(list(trace.boxes))
    if type(out) is tracer.Box and out.node.name is None:
        out.node.name = function_name(fun)
    wrt = boxed[argnums[0]] if len(argnums) == 1 and _single(argnums) else \
        tuple(boxed[i] for i in argnums)
    grads, cotangent_of = backward.traced_gradients(trace, out, wrt)
    name = f"{function_name(fun)}_value_and_grad"
    graph = backward.fused_graph(name, names, trace, (out, grads))
    graph.signature = describe(args, names)
    wrt = ", ".join(names[i] for i in argnums)
    graph.doc = (f"Value of {function_name(fun)} and its gradient with respect to {wrt}, "
                 f"traced at ({graph.signature}).")
    graph.statics = {names[i]: a for i, a in enumerate(args)
                     if i not in argnums and type(a) in (int, float, bool, str, type(None))}
    graph.derivative_of = cotangent_of
    graph.fresh_from = 1  # (value, gradients): the gradients are the caller's
    arrays = [leaf for leaf in leaves(args) if isinstance(leaf, (np.ndarray, np.generic))]
    graph.scalar = not arrays and any(type(leaf) is float for leaf in leaves(args))
    return graph


def emit_functions(calls, standalone=True):
    """One module with the value-and-grad of several (GradFunction, args) pairs, and the
    functions' names: the CLI's `-o`. A name already taken gets a `_1` suffix rather than
    hiding another function."""
    graphs = []
    for gf, args in calls:
        gf._check_argnums(len(args))
        graph = trace_gradient(gf.fun, args, gf._argnums, gf._arg_names(len(args)))
        base, n, taken = graph.name, 0, {g.name for g in graphs}
        while graph.name in taken:
            n += 1
            graph.name = f"{base}_{n}"
        graphs.append(graph)
    return emit_module(graphs, standalone)[0], [g.name for g in graphs]


class _Single(tuple):
    """argnums given as an int: the gradient is returned bare, not in a tuple."""


def _single(argnums):
    return type(argnums) is _Single


def _normalize_argnums(argnums, fun):
    if isinstance(argnums, int):
        return _Single((argnums,))
    argnums = tuple(argnums)
    if not argnums or not all(isinstance(i, int) for i in argnums):
        raise ArgumentError(at(def_site(fun), f"argnums must be an int or a non-empty tuple "
                               f"of ints, got {argnums!r}"))
    return argnums


class Variants:
    """The generated functions of one signature, one per path through the user's
    data-dependent branches: the first whose guards hold answers the call; when none
    does, `grow` traces the path these arguments take and adds it."""

    __slots__ = ("functions", "grow", "key", "sources")

    def __init__(self, function, source, key, grow):
        self.functions, self.sources, self.key, self.grow = [function], [source], key, grow

    def __call__(self, *args):
        failure = None
        for function in self.functions:
            try:
                return function(*args)
            except GuardFailure as failed:
                failure = failed
        return self.grow(self, args, failure)


class GradFunction:
    """A differentiated function: call it like the original; it caches generated code.

    A function whose Python reads traced values (`if x.sum() > 0:`) gets one generated
    function per path its arguments take, at most `max_variants` per signature."""

    def __init__(self, fun, argnums=0, with_value=True, example=None, max_variants=None):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.max_variants = MAX_VARIANTS if max_variants is None else max_variants
        self.with_value = with_value
        self.example = example
        self._argnums = _normalize_argnums(argnums, fun)
        self._signature = inspect.signature(fun)
        params = list(self._signature.parameters.values())
        self._varargs = any(p.kind == p.VAR_POSITIONAL for p in params)
        self._names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY,
                                                            p.POSITIONAL_OR_KEYWORD)]
        if not self._varargs:
            self._check_argnums(len(self._names))
        self._diff = [i in self._argnums for i in range(_MAX_ARGS)]
        self._needed = max(self._argnums) + 1  # fewer positional arguments: bind defaults
        self._entries = {}
        self._sources = {}
        self._shared = poly.Shared()  # polymorphic functions, for other batch sizes
        self._fingerprint = None  # of the function's code, for the opt-in disk cache
        self._persisted = {}  # disk key -> the variants stored under it
        self._lock = threading.RLock()  # a miss may trace code that misses again
        self.hits = self.misses = 0

    def __call__(self, *args, **kwargs):
        """The hot path: a signature key, one dict lookup, the generated function."""
        if kwargs or not self._needed <= len(args) <= _MAX_ARGS:
            args = self._positional(args, kwargs)
        key = tuple(map(leaf_key, args, self._diff))  # signature_key, inlined: hot path
        try:
            entry = self._entries[key]
        except KeyError:
            entry = self._miss(args, key)  # the key is computed once, hit or miss
        else:
            self.hits += 1
        out = entry(*args)
        return out if self.with_value else out[1]

    def _entry(self, args):
        """The compiled function for these arguments' signature (compiled on a miss)."""
        if len(args) > _MAX_ARGS:
            raise ArgumentError(at(_caller(), f"at most {_MAX_ARGS} positional arguments"))
        key = signature_key(args, self._diff)
        entry = self._entries.get(key)
        if entry is None:
            return self._miss(args, key)
        self.hits += 1
        return entry

    def source(self, *args, **kwargs):
        """The generated Python source for these arguments' signature."""
        if kwargs:
            args = self._positional(args, kwargs)
        key = signature_key(args, self._diff)
        entry = self._entries.get(key) or self._miss(args, key)
        if type(entry) is not Variants:
            return self._sources[key]
        for function, source in zip(entry.functions, entry.sources):
            try:  # the variant whose guards these arguments pass
                function(*args)
            except GuardFailure:
                continue
            return source
        entry(*args)
        return entry.sources[-1]

    def cache_info(self):
        return CacheInfo(self.hits, self.misses, len(self._entries))

    def cache_clear(self):
        with self._lock:
            self._entries.clear()
            self._sources.clear()
            self._shared.clear()
            self.hits = self.misses = 0

    def _miss(self, args, key):
        self._check_argnums(len(args))
        with self._lock:
            entry = self._entries.get(key)  # another thread may have compiled it meanwhile
            if entry is not None:
                return entry
            disk_key = self._disk_key(key, args)
            loaded = self._from_disk(disk_key, key) if disk_key else None
            if loaded:  # written by an earlier process: no trace
                entry, source = loaded
            else:
                shared, found = (None, None) if _traced(args) else \
                    self._shared.find(args, self._diff)
                if found is None:  # no polymorphic function serves this batch size: trace
                    if retrace.enabled() and self.misses:
                        retrace.report(function_name(self.fun), retrace.new_signature(
                            self._arg_names(len(args)), key, list(self._entries)))
                    found = self._compile(args, disk_key)
                    self._shared.add(shared, found[3], found)
                function, source, guarded, _ = found
                entry = Variants(function, source, key, self._grow) if guarded else function
            self._entries[key] = entry
            self._sources[key] = source
        return entry

    def _compile(self, args, disk_key=None):
        """(function, source, whether it has guards, its batch range or None) for these
        arguments."""
        # called on an enclosing trace's Boxes: code that never writes in place, since
        # that trace keeps references to the plain arrays the code computes
        pure = _traced(args)
        names = self._arg_names(len(args))
        with diskdeps.Recorder() if disk_key else contextlib.nullcontext() as recorder:
            source, namespace, graph, locs = self._build(tracer.unbox(args), names, pure)
        self.misses += 1
        if disk_key:
            self._to_disk(disk_key, recorder, (source, namespace, graph, locs))
        guarded = graph.batch is not None or bool(graph.captured) or \
            any(map(is_guard, graph.nodes))
        return self._load(source, namespace, graph.name, locs), source, guarded, graph.batch

    def _load(self, source, namespace, name, locs):
        return load(source, namespace, name, locs)

    def _disk_key(self, key, args):
        """This signature's entry in the opt-in disk cache, or None (the cache is off, or
        the arguments are an enclosing trace's values)."""
        if not diskcache.enabled():
            return None
        if _traced(args):
            return retrace.disk(function_name(self.fun), "not stored: called on an enclosing "
                                "trace's values (its code lives in that trace's)")
        if self._fingerprint is None:
            self._fingerprint = diskcache.fingerprint(self.fun)
        disk_key = diskcache.entry_key(self._fingerprint, key, (
            type(self).__name__, tuple(self._argnums), _single(self._argnums)))
        if disk_key is None:
            retrace.disk(function_name(self.fun), "not stored: an argument outside argnums "
                         "has no text that is the same in every process (its repr is an "
                         "address)")
        return disk_key

    def _to_disk(self, disk_key, recorder, built):
        """Store a trace's code with what the trace read (diskentry), or say why not."""
        variant = diskentry.to_variant(self.fun, recorder, built)
        if variant is not None:
            done = self._persisted.setdefault(disk_key, [])
            done.append(variant)
            diskcache.store(disk_key, done)

    def _from_disk(self, disk_key, key):
        """(entry, source) of the variants an earlier process stored that fit this one,
        loaded without tracing; None if none does (the explain log says why)."""
        found = diskentry.usable(self.fun, diskcache.load(disk_key), self._load)
        if not found:
            return None
        self._persisted[disk_key] = [v for v, _ in found]
        (first, function), rest = found[0], found[1:]
        if not rest and "raise GuardFailure(" not in first.source:
            return function, first.source
        entry = Variants(function, first.source, key, self._grow)
        entry.functions += [f for _, f in rest]
        entry.sources += [v.source for v, _ in rest]
        return entry, first.source

    def _grow(self, variants, args, failure):
        """No variant's guards hold for `args`: trace the path they take, add it, run it."""
        name = function_name(self.fun)
        with self._lock:
            for function in variants.functions:  # a thread we waited for may have added it
                try:
                    return function(*args)
                except GuardFailure:
                    pass
            if len(variants.functions) >= self.max_variants:
                raise GuardError(f"{failure}: {name} has been traced "
                                 f"{len(variants.functions)} times for arguments of the same "
                                 "shapes because this guard keeps failing (the value it reads "
                                 "changes from call to call). Make the decision with array "
                                 "operations (np.where, np.maximum) instead of Python's "
                                 "if/float()/int(), pass the value as a static argument, or "
                                 "raise the bound with max_variants=")
            if retrace.enabled():
                retrace.report(name, f"guard failed: {failure}")
            function, source, *_ = self._compile(args, self._disk_key(variants.key, args))
            try:
                out = function(*args)
            except GuardFailure as again:
                raise TracingError(f"{again}: {name} gave another result when traced again "
                                   "with the same arguments (does it use randomness or "
                                   "state outside its arguments?)") from None
            variants.functions.append(function)
            variants.sources.append(source)
        return out

    def _build(self, args, names, pure=False):
        """(source, injected constants, graph, source locations) of the generated function
        for `args`."""
        return compile_gradient(self.fun, args, self._argnums, names, pure=pure,
                                diff=self._diff)

    def _arg_names(self, n):
        names = list(self._names[:n])
        extra = self._signature.parameters
        star = next((p.name for p in extra.values() if p.kind == p.VAR_POSITIONAL), "args")
        names += [f"{star}_{i}" for i in range(n - len(names))]
        return names

    def _positional(self, args, kwargs):
        if len(args) > _MAX_ARGS:
            raise ArgumentError(at(_caller(), f"at most {_MAX_ARGS} positional arguments"))
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(at(_caller(), f"{function_name(self.fun)}(): {e}")) from None
        bound.apply_defaults()
        if bound.kwargs:
            raise ArgumentError(at(_caller(), f"{function_name(self.fun)}: keyword-only "
                                   "arguments are not supported; make them positional"))
        return bound.args

    def _check_argnums(self, nargs):
        for i in self._argnums:
            if not 0 <= i < nargs:
                raise ArgumentError(at(def_site(self.fun), f"argnums={i} is out of range for "
                                       f"{function_name(self.fun)}, which takes {nargs} "
                                       "positional argument(s) (argnums count from 0)"))

    def __repr__(self):
        kind = "value_and_grad" if self.with_value else "grad"
        return f"<autodiffgen.{kind} of {function_name(self.fun)}, argnums={self._argnums!r}>"


def _traced(args):
    """Whether the call gets an enclosing trace's values (grad of grad): such a call is
    never batched nor stored, and its code never writes in place."""
    return any(type(leaf) is tracer.Box for leaf in leaves(args))


def _caller():
    return where(user_frame(3))


def _decorator(with_value, cls=GradFunction):
    def make(fun=None, argnums=0, *, example=None, max_variants=None):
        if fun is None:
            return lambda f: cls(f, argnums, with_value, example, max_variants)
        if not callable(fun):  # grad(argnums) used positionally by mistake
            raise ArgumentError(f"expected a function to differentiate, got {fun!r}")
        return cls(fun, argnums, with_value, example, max_variants)
    return make


grad = _decorator(with_value=False)
grad.__doc__ = """Gradient of a scalar-valued NumPy function with respect to `argnums`.

Use as `@grad`, `@grad(argnums=(0, 1))` or `grad(f, argnums=1)`. The first call with a
new signature (argument structure, shapes, dtypes, values of non-array arguments) traces
`f` once and compiles a generated forward+backward function; later calls run only that.
`example=` gives the CLI example arguments (see README).
"""
value_and_grad = _decorator(with_value=True)
value_and_grad.__doc__ = """Like grad, but returns (value, gradient)."""


def emit(fun, *args, argnums=0, standalone=False):
    """The generated source of value_and_grad(fun, argnums) at these example arguments:
    the code a cached call runs (for every batch size it allows), or with `standalone`
    a module that needs only NumPy, for these shapes."""
    if isinstance(fun, GradFunction):
        argnums, fun = fun._argnums, fun.fun
    gf = GradFunction(fun, argnums)
    names = gf._arg_names(len(args))
    gf._check_argnums(len(args))
    diff = None if standalone else gf._diff  # in memory: what the cached call would run
    return compile_gradient(fun, args, gf._argnums, names, standalone, diff=diff)[0]
