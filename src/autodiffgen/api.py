"""grad, value_and_grad and emit: the pipeline from a NumPy function to cached code.

    trace the call on Boxes -> name values -> record the backward pass
    -> collect the fused graph -> emit source -> compile -> cache by signature
"""

import functools
import inspect
import operator
import os

import numpy as np

from . import pipeline
from .cache.entries import FunctionCache
from .cache.keys import leaf_key, signature_key
from .cache.loader import load
from .emit import emit_module
from .errors import ArgumentError, at, def_site, function_name, user_frame, where

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
        max_variants = MAX_VARIANTS if max_variants is None else \
            _count_setting("max_variants", max_variants, 1)
        self.with_value = with_value
        self.example = example
        self._argnums = _normalize_argnums(argnums, fun)
        self._signature = _signature_of(fun)
        params = list(self._signature.parameters.values())
        self._varargs = any(p.kind == p.VAR_POSITIONAL for p in params)
        self._names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY,
                                                            p.POSITIONAL_OR_KEYWORD)]
        if not self._varargs:
            self._check_argnums(len(self._names))
        self._diff = [i in self._argnums for i in range(_MAX_ARGS)]
        self._needed = max(self._argnums) + 1  # fewer positional arguments: bind defaults
        max_entries = MAX_ENTRIES if max_entries is None else \
            _count_setting("max_entries", max_entries)
        disk_extra = (type(self).__name__, tuple(self._argnums), _single(self._argnums))
        self._cache = FunctionCache(fun, self._diff, self._compile, self._load,
                                    self._arg_names, disk_extra, max_entries, max_variants)

    def __call__(self, *args, **kwargs):
        """Key, look up, call: the hot path. A run of calls with one signature costs the
        key and a tuple comparison with the last call's."""
        if kwargs or not self._needed <= len(args) <= _MAX_ARGS:
            args = self._positional(args, kwargs)
        key = tuple(map(leaf_key, args, self._diff))  # keys.signature_key, inlined
        cache = self._cache
        last_key, entry = cache.last
        if key == last_key:
            cache.hits += 1
        else:
            entry = cache.look_up(args, key)
        out = entry(*args)
        return out if self.with_value else out[1]

    def _entry(self, args):
        """The compiled function for these arguments' signature (compiled on a miss)."""
        if len(args) > _MAX_ARGS:
            raise ArgumentError(at(_caller(), f"at most {_MAX_ARGS} positional arguments"))
        return self._cache.look_up(args, signature_key(args, self._diff))

    def source(self, *args, **kwargs):
        """The generated Python source for these arguments' signature."""
        if kwargs:
            args = self._positional(args, kwargs)
        return self._cache.source(args)

    def cache_info(self):
        return self._cache.info()

    def cache_clear(self):
        self._cache.clear()

    @property
    def max_entries(self):
        return self._cache.max_entries

    @max_entries.setter
    def max_entries(self, value):
        self._cache.max_entries = _count_setting("max_entries", value)

    @property
    def max_variants(self):
        return self._cache.max_variants

    @max_variants.setter
    def max_variants(self, value):
        self._cache.max_variants = _count_setting("max_variants", value, 1)

    def _compile(self, args, pure):
        """The compile path of a miss: (source, namespace, graph, locs) for `args`."""
        self._check_argnums(len(args))
        return self._build(args, self._arg_names(len(args)), pure)

    def _load(self, source, namespace, name, locs):
        return load(source, namespace, name, locs)

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


_ANY = inspect.Signature([inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL)])


def _signature_of(fun):
    """fun's signature, or (*args) where Python has none for it (a ufunc on Python 3.10)."""
    try:
        return inspect.signature(fun)
    except (TypeError, ValueError):
        return _ANY


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
