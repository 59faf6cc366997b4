"""grad, value_and_grad and emit: the pipeline from a NumPy function to cached code.

    trace the call on Boxes -> name values -> record the backward pass
    -> collect the fused graph -> emit source -> compile -> cache by signature
"""

import contextlib
import functools
import inspect
import operator
import os
import threading
from collections import OrderedDict

import numpy as np

from . import diskcache, diskdeps, diskentry, pipeline, poly, retrace, tracer
from .cache import CacheInfo, leaf_key, load, signature_key
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
from .graph import Node, is_guard
from .rules.random import states_kept
from .runtime import GuardFailure
from .tree import leaves

_MAX_ARGS = 256


def _count_setting(name, value, least=0):
    """An int setting (max_entries=, $AUTODIFFGEN_MAX_ENTRIES) checked when it is given,
    rather than failing later inside the cache with a message that does not name it."""
    number = None if isinstance(value, (bool, np.bool_)) else \
        getattr(value, "__index__", lambda: None)()
    if number is None and type(value) is str and name.startswith("$"):
        try:
            number = int(value.strip())
        except ValueError:
            number = None
    if number is None or number < least:
        message = f"{name} must be an int of at least {least}, got {value!r}"
        raise ValueError(message if name.startswith("$") else at(where(), message))
    return number


MAX_VARIANTS = _count_setting("$AUTODIFFGEN_MAX_VARIANTS",
                              os.environ.get("AUTODIFFGEN_MAX_VARIANTS", "8"), 1)
MAX_ENTRIES = _count_setting("$AUTODIFFGEN_MAX_ENTRIES",
                             os.environ.get("AUTODIFFGEN_MAX_ENTRIES", "64"))


def emit_functions(calls, standalone=True):
    """One module with the value-and-grad of several (GradFunction, args) pairs, and the
    functions' names: the CLI's `-o`. A name already taken gets a `_1` suffix rather than
    hiding another function."""
    graphs = []
    for gf, args in calls:
        gf._check_argnums(len(args))
        graph = pipeline.finish(pipeline.optimize(pipeline.gradient_graph(
            gf.fun, args, gf._argnums, gf._arg_names(len(args)), capture=not standalone),
            numexpr=not standalone))
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
    """An int (np.int64 too: anything operator.index takes, but a bool) or a non-empty
    tuple or list of them."""
    single = _index(argnums)
    if single is not None:
        return _Single((single,))
    try:
        indices = tuple(map(_index, argnums))
    except TypeError:  # not iterable: 0.0, None
        indices = ()
    if not indices or None in indices:
        raise ArgumentError(at(def_site(fun), f"argnums must be an int or a non-empty tuple "
                               f"of ints, got {argnums!r}"))
    return indices


def _index(i):
    """i as an int if it is an integer (a NumPy one too) and not a bool, else None."""
    if isinstance(i, (bool, np.bool_)):
        return None
    try:
        return operator.index(i)
    except TypeError:
        return None


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
    function per path its arguments take, at most `max_variants` per signature. At most
    `max_entries` signatures are kept, the least recently used dropped first."""

    def __init__(self, fun, argnums=0, with_value=True, example=None, max_variants=None,
                 max_entries=None):
        _check_decorator_order(fun)
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.max_variants = MAX_VARIANTS if max_variants is None else \
            _count_setting("max_variants", max_variants, 1)
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
        self.max_entries = MAX_ENTRIES if max_entries is None else \
            _count_setting("max_entries", max_entries)
        self._entries = OrderedDict()  # least recently used first
        # the entry last used, last in _entries already: a run of calls with one signature
        # costs an identity test, not a reordering (batch sizes that share one polymorphic
        # function count as used together)
        self._recent = None
        self._sources = {}
        self._churn = retrace.Churn()  # which arguments keep causing traces
        self._guarded_numbers = set()  # Python-number arguments some guard reads
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
        except KeyError:  # the miss runs outside: a tracing error is not chained to it
            entry = None
        if entry is None:
            entry = self._miss(args, key)  # the key is computed once, hit or miss
        else:
            if entry is not self._recent:  # another signature than last time's
                self._touch(key, entry)
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
        if entry is not self._recent:
            self._touch(key, entry)
        self.hits += 1
        return entry

    def _touch(self, key, entry):
        """Make `key` the most recently used entry, dropped last."""
        try:
            self._entries.move_to_end(key)
        except KeyError:  # dropped meanwhile by another thread's miss: it has run anyway
            return
        self._recent = entry

    def source(self, *args, **kwargs):
        """The generated Python source for these arguments' signature."""
        if kwargs:
            args = self._positional(args, kwargs)
        key = signature_key(args, self._diff)
        entry = self._entries.get(key) or self._miss(args, key)
        if type(entry) is not Variants:
            return self._sources[key]
        with states_kept(leaves(args)):  # running it to see must not draw for real
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
            self._recent = None
            self._sources.clear()
            self._shared.clear()
            self.hits = self.misses = 0

    def _miss(self, args, key):
        self._check_argnums(len(args))
        with self._lock:
            if any(d is None for d in self._diff[:len(args)]):  # a number made static since
                key = signature_key(args, self._diff)  # the caller's key (_numbers_static)
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
                    self._explain(args, key)
                    found = self._compile(args, disk_key)
                    self._shared.add(shared, found[3], found)
                function, source, guarded, _ = found
                entry = Variants(function, source, key, self._grow) if guarded else function
            self._entries[key] = entry
            self._sources[key] = source
            self._recent = entry
            while len(self._entries) > max(self.max_entries, 1):  # the least recently used
                self._sources.pop(self._entries.popitem(last=False)[0], None)
        return entry

    def _explain(self, args, key):
        """Before a trace for a new signature: the opt-in log of why, and a warning, once
        per argument, when the same argument keeps changing (a trace per call)."""
        if not self.misses:
            return
        names, known = self._arg_names(len(args)), list(self._entries)
        if retrace.enabled():
            retrace.report(function_name(self.fun), retrace.new_signature(names, key, known))
        self._churn.count(function_name(self.fun), names, key, known)

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
        self._guarded_numbers |= _numbers_guarded(graph, args)
        guarded = graph.batch is not None or bool(graph.captured) or \
            any(is_guard(n) or n.prim is not None and n.prim.name in tracer.RAISES
                for n in graph.nodes) or any(map(_reads_outside, graph.inputs)) or \
            any(mark.tried for mark in graph.marks.values())
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
            rebound = failure.args[1] if failure is not None and len(failure.args) > 1 else ""
            if failure is not None:  # rebound: Python reads a global that keeps changing
                self._churn.guarded(name, rebound, str(failure.args[0]))
            if len(variants.functions) >= self.max_variants and rebound:
                del variants.functions[0], variants.sources[0]  # the oldest value's code
            elif len(variants.functions) >= self.max_variants and (
                    self._numbers_made_static() or signature_key(args, self._diff) != variants.key):
                return self._numbers_static(args)  # keyed by the numbers' values now
            elif len(variants.functions) >= self.max_variants:
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

    def _numbers_made_static(self):
        """Whether some Python-number argument a guard reads was an input until now: the
        guards keep failing (math.exp(t) of an annealed t reads a new value each call), so
        those arguments become static, keyed by value, each value a signature of its own
        (the cache bound and the warning apply)."""
        newly = [i for i in self._guarded_numbers if self._diff[i] is not None]
        for i in newly:
            self._diff[i] = None
        return bool(newly)

    def _numbers_static(self, args):
        """The call again, under the key its static numbers now give."""
        args = tuple(args)
        key = signature_key(args, self._diff)
        entry = self._entries.get(key) or self._miss(args, key)
        return entry(*args)

    def _build(self, args, names, pure=False):
        """(source, injected constants, graph, source locations) of the generated function
        for `args`."""
        return pipeline.compile_gradient(self.fun, args, self._argnums, names, pure=pure,
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

    def __get__(self, instance, owner=None):
        """`@grad` on a method: `obj.loss(w)` is `loss(obj, w)`, as for any function in a
        class (and in Autograd and JAX): argnums count `self` as 0. The cache stays the
        function's, shared by every instance."""
        return self if instance is None else BoundGradFunction(self, instance)


class BoundGradFunction:
    """A GradFunction read from an instance: calls (and sources) get it first."""

    __slots__ = ("__func__", "__self__")

    def __init__(self, function, instance):
        self.__func__, self.__self__ = function, instance

    def __call__(self, *args, **kwargs):
        return self.__func__(self.__self__, *args, **kwargs)

    def source(self, *args, **kwargs):
        return self.__func__.source(self.__self__, *args, **kwargs)

    def __getattr__(self, name):  # cache_info, cache_clear, fun, __name__, ...
        return getattr(self.__func__, name)

    def __repr__(self):
        return f"<bound {self.__func__!r} of {type(self.__self__).__name__}>"


def _reads_outside(node):
    """An input the code reads from a global, closure or attribute (capture.py)."""
    return node.params.get("read") is not None


def _numbers_guarded(graph, args):
    """The indices of the Python-number arguments the graph's guards read."""
    found, seen = set(), set()
    stack = [n for n in graph.nodes if is_guard(n)]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        if node.prim is None:
            path = node.params.get("path")
            if path and len(path) == 1 and path[0] < len(args) and type(args[path[0]]) in (int, float):
                found.add(path[0])
        stack.extend(a for a in node.args if type(a) is Node)
    return found


def _traced(args):
    """Whether the call gets an enclosing trace's values (grad of grad): such a call is
    never batched nor stored, and its code never writes in place."""
    return any(type(leaf) in (tracer.Box, tracer.Handle) for leaf in leaves(args))


def _caller():
    return where(user_frame(3))


def _check_decorator_order(fun):
    """@grad stacked above @classmethod or @staticmethod gets the descriptor, not the
    function: a classmethod object is not callable, and a staticmethod one would be bound
    to the instance it is read from, as a method."""
    if type(fun) not in (classmethod, staticmethod):
        return
    kind = type(fun).__name__
    how = ("argnums count cls as 0: @classmethod, then @grad(argnums=1) on the line below"
           if kind == "classmethod" else "@staticmethod, then @grad on the line below")
    raise TypeError(at(def_site(fun.__func__), f"@grad (or value_and_grad) is stacked above "
                       f"@{kind}, so it got a {kind} object rather than the function. Put it "
                       f"below: {how}"))


def _decorator(with_value, cls=GradFunction):
    def make(fun=None, argnums=0, *, example=None, max_variants=None, max_entries=None):
        if fun is None:
            return lambda f: cls(f, argnums, with_value, example, max_variants, max_entries)
        _check_decorator_order(fun)
        if not callable(fun):  # grad(argnums) used positionally by mistake
            raise ArgumentError(f"expected a function to differentiate, got {fun!r}")
        return cls(fun, argnums, with_value, example, max_variants, max_entries)
    return make


grad = _decorator(with_value=False)
grad.__doc__ = """Gradient of a scalar-valued NumPy function with respect to `argnums`.

Use as `@grad`, `@grad(argnums=(0, 1))` or `grad(f, argnums=1)`. The first call with a
new signature (argument structure, shapes, dtypes, values of non-array arguments) traces
`f` once and compiles a generated forward+backward function; later calls run only that.
`example=` gives the CLI example arguments (see README). `max_entries=` bounds the
signatures kept (least recently used dropped first; default $AUTODIFFGEN_MAX_ENTRIES or 64).
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
    return pipeline.compile_gradient(fun, args, gf._argnums, names, standalone, diff=diff)[0]
