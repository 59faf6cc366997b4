"""The in-memory cache of one differentiated function: generated code by signature key.

Contract: `look_up(args, key)` returns a callable that computes the call (the key is
keys.signature_key of `args` under the function's `diff` flags), made on a miss by, in
turn: the disk store (disk/entry.py), a batch-polymorphic function traced at another batch
size (shared.py), or `compile(args, pure)` -> a pipeline.Compiled, the
compile path the decorator passes in, whose source `load` turns into a function.

- At most `max_entries` signatures are kept, the least recently used dropped first. A
  view (view.py) keeps its last call's entry inside that signature's generated test
  (dispatch.runner), so a run of calls with one signature costs no look-up nor reordering.
- A signature whose code has guards (data-dependent branches, values read from globals, a
  batch range) gets a `Variants` entry: one generated function per path its arguments
  take, at most `max_variants`; when no variant's guards hold, `grow` traces the path
  these arguments take. Python numbers that a guard keeps failing on become static (keyed
  by value, the `diff` flag None: the decorator's key sees the same list).
- Two functions generated per signature decide a call without its key (dispatch.py):
  `runner(args, key, entry)` for a view's last call, `key(args)` for the others. They follow the
  `diff` flags, so a change of flags drops them all and every view's `last`.
- One lock serializes misses (a miss may trace code that misses again: reentrant); hits
  take no lock.
"""

import threading
import weakref
from collections import OrderedDict

from ..errors import GuardError, TracingError, function_name
from ..generated_helpers import GuardFailure
from ..graph import Node, is_guard
from ..rules.random import states_kept
from ..trace import boxes, context, tracer
from ..tree import leaves
from . import dispatch, retrace
from .disk.entry import OnDisk
from .guarded import can_refuse
from .keys import CacheInfo, signature_key
from .shared import Shared


class Variants:
    """The generated functions of one signature, one per path through the user's
    data-dependent branches: the first whose guards hold answers the call; when none
    does, `grow` traces the path these arguments take and adds it."""

    __slots__ = ("functions", "grow", "key", "sources")

    def __init__(self, functions, sources, key, grow):
        self.functions, self.sources, self.key, self.grow = functions, sources, key, grow

    def __call__(self, *args):
        failure = None
        for function in self.functions:
            try:
                return function(*args)
            except GuardFailure as failed:
                failure = failed
        return self.grow(self, args, failure)


class FunctionCache:
    """The cache of one function (see the module docstring). `names(n)` names n arguments
    for the explain log; `disk_extra` is what the disk key adds to the signature."""

    def __init__(self, fun, diff, compile, load, names, disk_extra, max_entries,
                 max_variants):
        self.fun, self.diff, self.names = fun, diff, names
        self.compile, self.load = compile, load
        self.max_entries, self.max_variants = max_entries, max_variants
        self.entries = OrderedDict()  # least recently used first
        self.sources = {}
        self.shared = Shared()  # polymorphic functions, for other batch sizes
        self.disk = OnDisk(fun, disk_extra)
        self.churn = retrace.Churn()  # which arguments keep causing traces
        self.guarded_numbers = set()  # Python-number arguments some guard reads
        self.lock = threading.RLock()  # a miss may trace code that misses again
        self.hits = self.misses = 0
        self.traced = set()  # keys whose code was traced here, not loaded nor shared (view.py)
        self.keyers = {}  # exact types of the arguments -> their `key` (dispatch.py)
        self.checks = {}  # signature key -> (entry, its run, its test): dispatch.runner
        self.views = weakref.WeakSet()  # the views whose `last` holds one of those

    def look_up(self, args, key):
        """The entry for `key` (made on a miss), now the most recently used."""
        entry = self.entries.get(key)  # a miss runs outside: a tracing error is not chained
        if entry is None:
            return self.miss(args, key)
        self.hits += 1
        try:
            self.entries.move_to_end(key)
        except KeyError:  # dropped meanwhile by another thread's miss: it runs anyway
            pass
        return entry

    def info(self):
        return CacheInfo(self.hits, self.misses, len(self.entries))

    # ---- dispatch: the functions that decide a call without its key -----------------------
    def key(self, args):
        """signature_key(args, self.diff), by the generated function of their types."""
        keyers, types = self.keyers, tuple(map(type, args))  # one table: flags_changed
        keyer = keyers.get(types)  # replaces it, and a keyer made meanwhile goes with it
        if keyer is None:
            keyer = keyers[types] = dispatch.keyer(args, self.diff)
            _bound(keyers, self.max_entries)
        return keyer(*args)

    def runner(self, args, key, entry):
        """The generated call of `entry` for arguments with the signature `key` (of
        `args`), MISS for others: a view's last call (dispatch.runner)."""
        made = self.checks.get(key)
        if made is not None and made[0] is entry:  # calls alternating between signatures
            return made[1]
        test = dispatch.condition(args, self.diff, key) if made is None else made[2]
        run = dispatch.runner(test, entry)
        self.checks[key] = (entry, run, test)
        _bound(self.checks, self.max_entries)
        return run

    def flags_changed(self):
        """The `diff` flags changed, and with them the keys of some arguments: drop the
        functions made for the old flags and every view's last call (it may hold one)."""
        self.keyers, self.checks = {}, {}
        for view in list(self.views):
            view.last = dispatch.no_run

    def clear(self):
        with self.lock:
            self.entries.clear()
            self.keyers, self.checks = {}, {}
            self.sources.clear()
            self.shared.clear()
            self.traced.clear()
            self.hits = self.misses = 0

    def source(self, args):
        """The generated source the call with `args` runs (compiled on a miss)."""
        key = signature_key(args, self.diff)
        entry = self.entries.get(key) or self.miss(args, key)
        if type(entry) is not Variants:
            return self.sources[key]
        with states_kept(leaves(args)):  # running it to see must not draw for real
            for function, source in zip(entry.functions, entry.sources):
                try:  # the variant whose guards these arguments pass
                    function(*args)
                except GuardFailure:
                    continue
                return source
            entry(*args)
        return entry.sources[-1]

    # ---- a miss ---------------------------------------------------------------------------
    def miss(self, args, key):
        with self.lock:
            if any(d is None for d in self.diff[:len(args)]):  # a number made static since
                key = signature_key(args, self.diff)  # the caller's key (numbers_static)
            entry = self.entries.get(key)  # another thread may have compiled it meanwhile
            if entry is not None:
                return entry
            entry, source = self._make(args, key)
            self.entries[key] = entry
            self.sources[key] = source
            while len(self.entries) > max(self.max_entries, 1):  # the least recently used
                dropped = self.entries.popitem(last=False)[0]
                self.sources.pop(dropped, None)
                self.traced.discard(dropped)
                self.checks.pop(dropped, None)
        return entry

    def _make(self, args, key):
        """(entry, source) for a new signature: from disk, from a polymorphic function
        traced at another batch size, or traced now."""
        traced = _traced(args)
        disk_key = self.disk.key(key, traced)
        stored = self.disk.load(disk_key, self.load) if disk_key else None
        if stored:  # written by an earlier process: no trace
            return self._from_disk(stored, key)
        poly_key, found = (None, None) if traced else self.shared.find(args, self.diff)
        if found is None:  # no polymorphic function serves this batch size: trace
            self._explain(args, key)
            found = self._compile(args, disk_key)
            self.traced.add(key)
            self.shared.add(poly_key, found[3], found)
        function, source, guarded, _ = found
        entry = Variants([function], [source], key, self.grow) if guarded else function
        return entry, source

    def _from_disk(self, stored, key):
        """(entry, source) of the [(variant, function)] an earlier process stored."""
        first = stored[0][0]
        if len(stored) == 1 and not first.guarded:
            return stored[0][1], first.source
        return Variants([f for _, f in stored], [v.source for v, _ in stored], key,
                        self.grow), first.source

    def _explain(self, args, key):
        """Before a trace for a new signature: the opt-in log of why, and a warning, once
        per argument, when the same argument keeps changing (a trace per call)."""
        if not self.misses:
            return
        name, names, known = function_name(self.fun), self.names(len(args)), list(self.entries)
        if retrace.enabled():
            retrace.report(name, retrace.new_signature(names, key, known))
        self.churn.count(name, names, key, known)

    def _compile(self, args, disk_key=None):
        """(function, source, whether it has guards, its batch range or None) for these
        arguments, traced now (and stored on disk under `disk_key`)."""
        # called on an enclosing trace's Boxes: code that never writes in place, since
        # that trace keeps references to the plain arrays the code computes
        with self.disk.recording(disk_key) as recorder:
            built = self.compile(tracer.unbox(args), _traced(args))
        self.misses += 1
        if disk_key:
            self.disk.save(disk_key, recorder, built)
        source, graph = built.source, built.graph
        self.guarded_numbers |= _numbers_guarded(graph, args)
        function = self.load(source, built.namespace, graph.name, built.locs)
        return function, source, can_refuse(graph), graph.batch

    # ---- guard variants -------------------------------------------------------------------
    def grow(self, variants, args, failure, view=None):
        """No variant's guards hold for `args`: trace the path they take, add it, run it
        (a miss of the `view` whose call it is: view.py)."""
        name = function_name(self.fun)
        with self.lock:
            for function in variants.functions:  # a thread we waited for may have added it
                try:
                    return function(*args)
                except GuardFailure:
                    pass
            rebound = failure.args[1] if failure is not None and len(failure.args) > 1 else ""
            if failure is not None:  # rebound: Python reads a global that keeps changing
                self.churn.guarded(name, rebound, str(failure.args[0]))
            full = len(variants.functions) >= self.max_variants
            if full and rebound:
                del variants.functions[0], variants.sources[0]  # the oldest value's code
            elif full and (self._numbers_made_static() or
                           signature_key(args, self.diff) != variants.key):
                return self._numbers_static(args, view)  # keyed by the numbers' values now
            elif full:
                raise _too_many(failure, name, len(variants.functions))
            if retrace.enabled():
                retrace.report(name, f"guard failed: {failure}")
            disk_key = self.disk.key(variants.key, _traced(args))
            function, source, *_ = self._compile(args, disk_key)
            if view is not None:
                view.misses += 1
            try:
                out = function(*args)
            except GuardFailure as again:
                raise TracingError(f"{again}: {name} gave another result when traced again "
                                   "with the same arguments (does it use randomness or "
                                   "state outside its arguments?)") from None
            variants.functions.append(function)
            variants.sources.append(source)
            seen = getattr(variants, "seen", None)  # a View's handle (view.py)
            if seen is not None:
                seen.intersection_update(variants.functions)
                seen.add(function)
        return out

    def _numbers_made_static(self):
        """Whether some Python-number argument a guard reads was an input until now: the
        guards keep failing (math.exp(t) of an annealed t reads a new value each call), so
        those arguments become static, keyed by value, each value a signature of its own
        (the cache bound and the warning apply)."""
        newly = [i for i in self.guarded_numbers if self.diff[i] is not None]
        for i in newly:
            self.diff[i] = None
        if newly:
            self.flags_changed()
        return bool(newly)

    def _numbers_static(self, args, view=None):
        """The call again, under the key its static numbers now give."""
        args = tuple(args)
        key = signature_key(args, self.diff)
        entry = view.look_up(args, key) if view is not None else \
            self.entries.get(key) or self.miss(args, key)
        return entry(*args)


def _bound(table, max_entries):
    """Keep a dispatch table within a few times the entries' bound: it holds the types of
    the arguments (a class made at each call must not live on here)."""
    if len(table) > 4 * max(max_entries, 16):
        table.clear()


def _too_many(failure, name, traced):
    return GuardError(f"{failure}: {name} has been traced {traced} times for arguments of the "
                      "same shapes because this guard keeps failing (the value it reads "
                      "changes from call to call). Make the decision with array operations "
                      "(np.where, np.maximum) instead of Python's if/float()/int(), pass the "
                      "value as a static argument, or raise the bound with max_variants=")


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
    """Whether the call gets an enclosing trace's values (grad of grad), as arguments or
    through a closure (any call while a trace runs): such a call is never batched nor
    stored, and its code never writes in place and reads what it reads from outside
    through capture.read_traced."""
    return context.current_trace() is not None or \
        any(type(leaf) in (boxes.Box, boxes.Handle) for leaf in leaves(args))
