"""grad, value_and_grad and emit: a differentiated function as the user calls it.

A call computes its signature key, looks it up in the cache (cache/), and calls what it
finds; a miss compiles through pipeline.compile, with grad's own part of it (its Request:
the backward of the scalar output), and the cache loads and keeps the result.
"""

import functools
import operator
import os
from collections.abc import Callable
from typing import Any, overload

import numpy as np

from . import pipeline, tracebacks
from ._typing import ArgNums, Fun
from .backward import reverse as backward
from .cache.dispatch import MISS
from .cache.entries import FunctionCache
from .cache.keys import signature_key
from .cache.loader import load
from .cache.view import View, shared_store
from .codegen.emitter import emit_module
from .errors import ArgumentError, at, function_name, where
from .standalone import standalone_module
from .trace import tracer
from .trace.arguments import MAX_ARGS, Differentiated, caller, decorator, signature_text, single
from .trace.boxes import Box
from .tree import leaves


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
    hiding another function. A standalone module serves every batch size (standalone.py)."""
    if standalone:
        return standalone_module(calls)
    graphs = []
    for gf, args in calls:
        graph, = pipeline.program(gf.request(args))
        base, n, taken = graph.name, 0, {g.name for g in graphs}
        while graph.name in taken:
            n += 1
            graph.name = f"{base}_{n}"
        graphs.append(graph)
    return emit_module(graphs, standalone)[0], [g.name for g in graphs]


class GradFunction(Differentiated):
    """A differentiated function: call it like the original; it caches generated code.

    A function whose Python reads traced values (`if x.sum() > 0:`) gets one generated
    function per path its arguments take, at most `max_variants` per signature. At most
    `max_entries` signatures are kept, the least recently used dropped first."""

    __slots__ = ("_cache", "has_aux")  # read by every cached call (Differentiated's note)

    def __init__(self, fun, argnums=0, with_value=True, example=None, max_variants=None,
                 max_entries=None, has_aux=False):
        super().__init__(fun, argnums, with_value)
        self.has_aux = _flag("has_aux", has_aux)
        max_variants = MAX_VARIANTS if max_variants is None else \
            _count_setting("max_variants", max_variants, 1)
        self.example = example
        self._diff = [i in self._argnums for i in range(MAX_ARGS)]
        max_entries = MAX_ENTRIES if max_entries is None else \
            _count_setting("max_entries", max_entries)
        self._cache = self._view(max_entries, max_variants)

    def _view(self, max_entries, max_variants):
        """This object's View of its cache: shared with every plain grad of the same
        function and settings (cache/view.py), so grad(f) made at each call does not trace
        again."""
        disk_extra = (type(self).__name__, tuple(self._argnums), single(self._argnums),
                      *self._disk_extra()) + \
            (("has_aux",) if self.has_aux else ())  # ((value, aux), grads): other code

        def make():
            return FunctionCache(self.fun, list(self._diff), self._compile, self._load,
                                 self._arg_names, disk_extra, max_entries, max_variants)
        store, shared = shared_store(self.fun, (*disk_extra[1:], max_entries, max_variants),
                                     make) if type(self) is GradFunction else (make(), False)
        self._diff = store.diff  # the same list: numbers made static are static for all
        return View(store, shared)

    def _disk_extra(self):
        """What else decides the generated code, for the disk cache's key (vmap's axes)."""
        return ()

    @tracebacks.entry
    def __call__(self, *args, **kwargs):
        """The hot path: a call with the last call's signature runs its entry from one
        generated function that tests the arguments' types, shapes and dtypes
        (cache/dispatch.py); another call binds keywords and defaults, keys its arguments
        and looks them up. An error ends its traceback here (tracebacks.py; a `try` costs
        nothing until it raises, a wrapper's frame would cost every call)."""
        cache = self._cache
        try:
            if kwargs or (out := cache.last(*args)) is MISS:
                args, entry = self._look_up(args, kwargs)
                out = entry(*args)  # (value, grads), or ((value, aux), grads) with has_aux
            else:
                cache.hits += 1
        except Exception as error:
            tracebacks.shorten(error)
            raise
        if self.with_value:
            return out
        return (out[1], out[0][1]) if self.has_aux else out[1]

    def _look_up(self, args, kwargs):
        """(the arguments bound to positions, the entry for their signature): a call that
        is not the last one's signature, or has keywords."""
        if kwargs or not self._needed <= len(args) <= MAX_ARGS:
            args = self._positional(args, kwargs)
        cache = self._cache
        return args, cache.look_up(args, cache.key(args))

    def _entry(self, args):
        """The compiled function for these arguments' signature (compiled on a miss)."""
        if len(args) > MAX_ARGS:
            raise ArgumentError(at(caller(), f"at most {MAX_ARGS} positional arguments"))
        return self._cache.look_up(args, signature_key(args, self._diff))

    @tracebacks.boundary
    def source(self, *args, **kwargs):
        """The generated Python source for these arguments' signature."""
        if kwargs:
            args = self._positional(args, kwargs)
        return self._cache.source(args, signature_key(args, self._diff))

    @tracebacks.boundary
    def standalone_source(self, *args, **kwargs):
        """A NumPy-only module computing this function's value and gradient for every
        batch size of these example arguments (standalone_source below)."""
        if kwargs:
            args = self._positional(args, kwargs)
        return standalone_source(self, *args)

    def cache_info(self):
        return self._cache.info()

    def cache_clear(self):
        self._cache.clear()

    @property
    def max_entries(self):
        return self._cache.store.max_entries

    @max_entries.setter
    def max_entries(self, value):
        self._rebound(_count_setting("max_entries", value), self.max_variants)

    @property
    def max_variants(self):
        return self._cache.store.max_variants

    @max_variants.setter
    def max_variants(self, value):
        self._rebound(self.max_entries, _count_setting("max_variants", value, 1))

    def _rebound(self, max_entries, max_variants):
        """New bounds: a cache of this object's own takes them; a shared one stays as the
        other grads of the function made it, and this object moves to the cache shared
        under the new bounds."""
        if self._cache.shared:
            self._cache = self._view(max_entries, max_variants)
        else:
            store = self._cache.store
            store.max_entries, store.max_variants = max_entries, max_variants

    def _compile(self, args, pure):
        """The compile path of a miss: the pipeline.Compiled of `args`."""
        return pipeline.compile(self.request(args, pure=pure))

    def _load(self, source, namespace, name, locs):
        return load(source, namespace, name, locs)

    def request(self, args, standalone=False, pure=False, batch=True):
        """grad's part of the compile path (pipeline.Request) at `args`: the backward of
        the scalar output with respect to argnums; the code serves every batch size
        the cache's flags allow unless `batch` is False."""
        self._check_argnums(len(args))
        return pipeline.Request(
            self.fun, tuple(args), self._arg_names(len(args)), _value_and_grad_graph,
            argnums=self._argnums, has_aux=self.has_aux,
            batch=self._diff if batch else None, standalone=standalone, pure=pure)


def _value_and_grad_graph(request, traced):
    """grad's own stage: the value and the gradients of the traced scalar output, one
    Graph ((value, aux), gradients with has_aux: no cotangent is seeded at aux)."""
    fun, names, args, argnums = request.fun, traced.names, traced.args, request.argnums
    out, trace, boxed = traced.out, traced.trace, traced.boxed
    backward.check_output(out, fun, scalar=True)
    if type(out) is Box and out.node.name is None:
        out.node.name = function_name(fun)
    wrt = boxed[argnums[0]] if single(argnums) else tuple(boxed[i] for i in argnums)
    grads, cotangent_of = backward.traced_gradients(trace, out, wrt)
    signature = signature_text(args, names)
    arrays = [leaf for leaf in leaves(args) if isinstance(leaf, (np.ndarray, np.generic))]
    static = request.static
    return backward.fused_graph(
        f"{function_name(fun)}_value_and_grad", names, trace,
        ((out, traced.aux), grads) if request.has_aux else (out, grads),
        signature=signature,
        doc=(f"Value of {function_name(fun)} and its gradient with respect to "
             f"{', '.join(names[i] for i in argnums)}"),
        statics={names[i]: a for i, a in enumerate(args)  # Python numbers are inputs
                 if i not in argnums and (type(a) in (bool, str, type(None)) or
                                          type(a) in (int, float) and not
                                          tracer.is_number_input(
                                              a, None if i in static else False))},
        derivative_of=cotangent_of,
        fresh_from=1,  # (value, gradients): the gradients are the caller's
        scalar=not arrays and any(type(leaf) is float for leaf in leaves(args)))


class _Zero(int):
    """argnums's default, 0, told apart from an argnums=0 the caller wrote: Autograd's
    spelling argnum= may be given in its place, and writing both is an error."""

    def __repr__(self):
        return "0"


ARGNUMS: Any = _Zero(0)


def spelled(argnums, argnum):
    """argnums, or Autograd's spelling of it, argnum= (None: not given), checked that not
    both are given (the one a JAX and an Autograd user would each write by habit)."""
    if argnum is None:
        return argnums
    if argnums is not ARGNUMS:
        raise TypeError(at(where(), f"got both argnums={argnums!r} and argnum={argnum!r}: "
                           "argnum is Autograd's spelling of argnums (JAX's); give one"))
    return argnum


def _flag(name, value):
    if type(value) is not bool and not isinstance(value, np.bool_):
        raise ArgumentError(at(where(), f"{name} must be True or False, got {value!r}"))
    return bool(value)


def _decorator(with_value, cls=GradFunction):
    return decorator(with_value, cls, example=None, max_variants=None, max_entries=None,
                     has_aux=False)


_grad = _decorator(with_value=False)
_value_and_grad = _decorator(with_value=True)


@overload
def grad(fun: Fun, argnums: ArgNums = 0, *, example: Any = None,
         max_variants: int | None = None, max_entries: int | None = None,
         has_aux: bool = False, argnum: ArgNums | None = None) -> GradFunction: ...
@overload
def grad(fun: None = None, argnums: ArgNums = 0, *, example: Any = None,
         max_variants: int | None = None, max_entries: int | None = None,
         has_aux: bool = False, argnum: ArgNums | None = None) -> Callable[[Fun], GradFunction]: ...
@tracebacks.boundary
def grad(fun: Fun | None = None, argnums: ArgNums = ARGNUMS,
         **options: Any) -> GradFunction | Callable[[Fun], GradFunction]:
    """Gradient of a scalar-valued NumPy function with respect to `argnums`.

    Use as `@grad`, `@grad(argnums=(0, 1))` or `grad(f, argnums=1)`. The first call with a
    new signature (argument structure, shapes, dtypes, values of non-array arguments) traces
    `f` once and compiles a generated forward+backward function; later calls run only that.
    `example=` gives the CLI example arguments (the docs' "Command line"). `max_entries=`
    bounds the signatures kept (least recently used dropped first; default
    $AUTODIFFGEN_MAX_ENTRIES or 64). `has_aux=True`: f returns (output, aux), aux any pytree of arrays and numbers
    computed by the same generated function, with no derivative; the call returns
    (gradient, aux). `argnum=` is Autograd's spelling of `argnums=` (on every transform
    that takes argnums); giving both is an error."""
    return _grad(fun, spelled(argnums, options.pop("argnum", None)), **options)


@overload
def value_and_grad(fun: Fun, argnums: ArgNums = 0, *, example: Any = None,
                   max_variants: int | None = None, max_entries: int | None = None,
                   has_aux: bool = False, argnum: ArgNums | None = None) -> GradFunction: ...
@overload
def value_and_grad(fun: None = None, argnums: ArgNums = 0, *, example: Any = None,
                   max_variants: int | None = None, max_entries: int | None = None,
                   has_aux: bool = False,
                   argnum: ArgNums | None = None) -> Callable[[Fun], GradFunction]: ...
@tracebacks.boundary
def value_and_grad(fun: Fun | None = None, argnums: ArgNums = ARGNUMS,
                   **options: Any) -> GradFunction | Callable[[Fun], GradFunction]:
    """Like grad, but returns (value, gradient); with has_aux=True, ((value, aux),
    gradient), as JAX."""
    return _value_and_grad(fun, spelled(argnums, options.pop("argnum", None)), **options)


@tracebacks.boundary
def grad_and_aux(fun: Fun, argnum: int | str = 0) -> GradFunction:
    """Autograd's spelling of grad(fun, argnums=argnum, has_aux=True): the gradient of
    the first of the two values fun returns, and the second as it is: (gradient, aux)."""
    return grad(fun, argnums=argnum, has_aux=True)


def elementwise_grad(fun: Fun, argnums: ArgNums = ARGNUMS, *,
                     argnum: ArgNums | None = None) -> GradFunction:
    """Autograd's elementwise_grad: the gradient of the sum of fun's output (of all its
    leaves), which for a function applied element by element is its derivative at each
    element, in the argument's shape. For any other function it is the VJP of ones (each
    column of the Jacobian summed), as in Autograd; JAX writes vmap(grad(f))."""
    @functools.wraps(fun)
    def summed(*args, **kwargs):
        return functools.reduce(operator.add, map(np.sum, leaves(fun(*args, **kwargs))))
    return grad(summed, spelled(argnums, argnum))


@tracebacks.boundary
def emit(fun: Fun, *args: Any, argnums: ArgNums = ARGNUMS, standalone: bool = False,
         has_aux: bool = False, argnum: ArgNums | None = None) -> str:
    """The generated source of value_and_grad(fun, argnums) at these example arguments:
    the code a cached call runs (for every batch size it allows), or with `standalone`
    a module that needs only NumPy (standalone_source: every batch size, these dtypes)."""
    argnums = spelled(argnums, argnum)
    if standalone:
        return standalone_source(fun, *args, argnums=argnums, has_aux=has_aux)
    if isinstance(fun, GradFunction):
        argnums, has_aux, fun = fun._argnums, fun.has_aux, fun.fun
    return pipeline.compile(GradFunction(fun, argnums, has_aux=has_aux).request(args)).source


@tracebacks.boundary
def standalone_source(fun: Fun, *args: Any, argnums: ArgNums = ARGNUMS, has_aux: bool = False,
                      argnum: ArgNums | None = None) -> str:
    """The source of a module that needs only NumPy and computes fun's value and gradient
    for every batch size (and the dtypes) of these example arguments: its entry is
    `<fun's name>_value_and_grad(*args)`, returning (value, gradients), or ((value, aux),
    gradients) with has_aux, whatever `fun` is (a grad, a value_and_grad or a plain
    function, whose argnums and has_aux are then taken from the keywords). The module
    defines SignatureError (an argument of another dtype, shape or structure) and
    GuardFailure (a data-dependent branch the trace did not take: the module cannot trace
    again). `value_and_grad = <entry>` names the entry whatever the function's name
    (standalone.py)."""
    argnums = spelled(argnums, argnum)
    if isinstance(fun, GradFunction) and type(fun) is not GradFunction:
        raise ArgumentError(at(where(), f"standalone_source takes a grad or value_and_grad "
                               f"function (or a plain one), not a {type(fun).__name__}"))
    gf = fun if isinstance(fun, GradFunction) else GradFunction(fun, argnums,
                                                                has_aux=has_aux)
    source, names = standalone_module([(gf, args)])
    return source + f"\n\nvalue_and_grad = {names[0]}\n"
