"""One grad(f) object's window on the code every grad of the same function shares.

Autograd code makes `grad(loss)` again inside its loops (`grad(loglike)(r, p(r))`): each
call is a new GradFunction, which traced again when each had its own cache. The entries
(a FunctionCache: entries.py) are kept with the function instead, one per (argnums,
max_entries, max_variants), in `f.__dict__` as transforms._cached keeps jvp/vjp; each
GradFunction looks at them through a View, which keeps its own counts, so cache_info()
reads the same whether or not another grad(f) ran before:

- hits: calls answered by code this object had already used, under this signature or
  another: a function traced at another batch size that serves this one (shared.py)
  answers a call of a new signature without a trace;
- misses: traces for this object's calls (a new signature, a guard variant), and calls
  answered by code new to this object that another grad of f traced (no trace then: a
  signature, a batch size, or a guard variant, when this object first runs it). Code
  loaded from the disk cache is neither, the first time.
- entries: this object's signatures that the shared cache still keeps.

cache_clear() empties the shared cache (every grad of f traces again) and this object's
counts. Functions without a `__dict__` of their own, bound methods and subclasses of
GradFunction (jvp, vjp, ...) keep a cache per object. The hot path: a call runs `last`,
which runs this view's last entry when its arguments have that call's signature
(dispatch.runner).
"""

import threading
import types
from collections import OrderedDict

from ..generated_helpers import GuardFailure
from .dispatch import no_run
from .entries import Variants

_LOCK = threading.RLock()  # threads making grad(f) at once share one cache (reentrant:
# a transformation kept with fun makes a grad(f) kept with it)


class View:
    """A GradFunction's counts and entries over a shared FunctionCache `store`."""

    __slots__ = ("__weakref__", "entries", "hits", "key", "last", "misses", "shared", "store")

    def __init__(self, store, shared):
        self.store, self.shared = store, shared  # shared: kept in the function's __dict__
        self.entries = OrderedDict()  # key -> entry, least recently used first
        self.last = no_run  # runs the last call's entry on arguments of its signature
        self.hits = self.misses = 0
        store.views.add(self)  # forgets `last` when the keys change (flags_changed)
        self.key = store.key  # key(args): signature_key(args, the store's flags)

    def look_up(self, args, key):
        """The entry for `key`, made on a miss (or taken from the shared store)."""
        entry = self.entries.get(key)
        if entry is not None and key in self.store.entries:
            self.hits += 1
            try:
                self.entries.move_to_end(key)
                self.store.entries.move_to_end(key)
            except KeyError:  # dropped meanwhile by another thread's miss: it runs anyway
                return entry
            self.last = self.store.runner(args, key, entry)
            return entry
        return self._miss(args, key)

    def _miss(self, args, key):
        store = self.store
        with store.lock:
            entry = self.entries.get(key)
            if entry is not None and key in store.entries:  # another thread's miss made it
                self.hits += 1
                return entry
            ran, traces = self._ran(), store.misses  # (before this key's entry joins them)
            found = store.look_up(args, key)
            traced = store.misses - traces  # for this call
            self.misses += traced
            functions = found.functions if type(found) is Variants else (found,)
            other = () if traced else _traced_here(store)  # code traced before, by any grad
            # credited: code this object ran or traced, or loaded from the disk cache
            seen = [f for f in functions if f in ran or f not in other]
            if type(found) is Variants:  # each variant counted when this object first uses it
                entry = _Variants(found, self, seen, () if traced else ran)
            else:
                entry = found
                self.hits += found in ran  # (through another key: another batch size)
                self.misses += not seen  # code new to this object that another grad traced
            self.entries[key] = entry
            self.entries.move_to_end(key)
            self.last = store.runner(args, key, entry)
            while len(self.entries) > max(store.max_entries, 1):
                self.entries.popitem(last=False)
        return entry

    def _ran(self):
        """The generated functions this object's calls ran (or it traced), of the entries
        it keeps."""
        ran = set()
        for entry in self.entries.values():
            ran.update(entry.seen if type(entry) is _Variants else (entry,))
        return ran

    def grow(self, variants, args, failure):
        """No variant's guards hold: the store traces the path (a miss of this object)."""
        return self.store.grow(variants, args, failure, self)

    def source(self, args, key):
        if key not in self.entries or key not in self.store.entries:
            self._miss(args, key)
        return self.store.source(args)

    @property
    def churn(self):  # which arguments keep causing traces: the function's, shared
        return self.store.churn

    def info(self):
        from .keys import CacheInfo
        kept = sum(key in self.store.entries for key in list(self.entries))
        return CacheInfo(self.hits, self.misses, kept)

    def clear(self):
        with self.store.lock:
            self.store.clear()
            self.entries.clear()
            self.last = no_run
            self.hits = self.misses = 0


class _Variants(Variants):
    """A View's handle on a shared Variants (the same lists): a variant traced for
    another grad of f counts as a miss when this object's call first runs it, as if this
    object had traced it; a variant this object traces is counted by the store's grow.
    The first call, made by View._miss, is a hit if it runs a function of `ran` (code
    this object ran under another key: a function traced at another batch size)."""

    __slots__ = ("ran", "seen", "view")

    def __init__(self, shared, view, seen, ran):
        super().__init__(shared.functions, shared.sources, shared.key, view.grow)
        self.view, self.seen, self.ran = view, set(seen), ran

    def __call__(self, *args):
        failure = None
        ran, self.ran = self.ran, ()  # the first call's only
        for function in self.functions:
            try:
                out = function(*args)
            except GuardFailure as failed:
                failure = failed
                continue
            if function not in self.seen:
                self.seen.add(function)
                self.view.misses += 1
            elif function in ran:
                self.view.hits += 1
            return out
        return self.grow(self, args, failure)


def _traced_here(store):
    """The functions the store's traces made (not loaded from the disk cache): each
    traced key's entry, and the functions that serve other batch sizes (shared.py)."""
    made = set()
    for key in store.traced:
        entry = store.entries.get(key)
        made.update(entry.functions if type(entry) is Variants else
                    (entry,) if entry is not None else ())
    made.update(store.shared.functions())
    return made


def kept_with(fun, name, make, elsewhere=None):
    """make(), made once and kept in fun's own __dict__ under `name`, so that it dies with
    fun (a weak table's value that refers to its key, as generated code does to its
    function, would keep it alive). A bound method (whose __dict__ is its function's,
    while its instance differs) or a callable without a __dict__ of its own uses
    `elsewhere` (a weak table: fun -> {name: made}) when given; else None."""
    own = getattr(fun, "__dict__", None)
    with _LOCK:
        if type(own) is dict and not isinstance(fun, types.MethodType):
            home = own
        elif elsewhere is not None:
            home = elsewhere.setdefault(fun, {})
        else:
            return None
        made = home.get(name)
        if made is None or made.fun is not fun:  # functools.wraps copies __dict__
            made = home[name] = make()
    return made


def shared_store(fun, settings, make):
    """(the FunctionCache every grad of `fun` with these settings shares, made by `make()`
    the first time, True), kept with fun; a callable kept_with cannot keep it with gets
    its own: (make(), False)."""
    store = kept_with(fun, f"__autodiffgen_grad_{settings}__", make)
    return (make(), False) if store is None else (store, True)
