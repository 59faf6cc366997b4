"""How a differentiated function is called: argnums, argument names, keyword binding.

Shared by the compiled functions (api.GradFunction) and the reference tape
(tape.TapeFunction), so that the reference needs only the tracer and the rules, never the
compiler: both take the same arguments, name them alike and refuse the same mistakes.
"""

import functools
import inspect
import operator

import numpy as np

from ..errors import ArgumentError, at, def_site, function_name, user_frame, where

MAX_ARGS = 256


class Single(tuple):
    """argnums given as an int: the gradient is returned bare, not in a tuple."""


def single(argnums):
    return type(argnums) is Single


def normalize_argnums(argnums, fun):
    """An int (np.int64 too: anything operator.index takes, but a bool) or a non-empty
    tuple or list of them; an already normalized one as it is (a Single stays bare)."""
    if type(argnums) is Single:
        return argnums
    one = index(argnums)
    if one is not None:
        return Single((one,))
    try:
        indices = tuple(map(index, argnums))
    except TypeError:  # not iterable: 0.0, None
        indices = ()
    if not indices or None in indices:
        raise ArgumentError(at(def_site(fun), f"argnums must be an int or a non-empty tuple "
                               f"of ints, got {argnums!r}"))
    return indices


def index(i):
    """i as an int if it is an integer (a NumPy one too) and not a bool, else None."""
    if isinstance(i, (bool, np.bool_)):
        return None
    try:
        return operator.index(i)
    except TypeError:
        return None


class Differentiated:
    """A function with its argnums: binds a call's arguments to positions, names them
    after the function's parameters, and checks argnums against them."""

    # What a cached call reads is in slots: functools.update_wrapper fills the instance's
    # __dict__, after which reading an attribute from it costs 0.09 us more per call.
    __slots__ = ("__dict__", "__weakref__", "with_value")

    def __init__(self, fun, argnums=0, with_value=True):
        check_decorator_order(fun)
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.with_value = with_value
        self._argnums = normalize_argnums(argnums, fun)
        self._signature = signature_of(fun)
        params = list(self._signature.parameters.values())
        self._varargs = any(p.kind == p.VAR_POSITIONAL for p in params)
        self._names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY,
                                                            p.POSITIONAL_OR_KEYWORD)]
        if not self._varargs:
            self._check_argnums(len(self._names))
        self._needed = max(self._argnums) + 1  # fewer positional arguments: bind defaults

    @property
    def argnums(self):
        """The positions of the differentiated arguments, as a tuple."""
        return tuple(self._argnums)

    def _arg_names(self, n):
        names = list(self._names[:n])
        extra = self._signature.parameters
        star = next((p.name for p in extra.values() if p.kind == p.VAR_POSITIONAL), "args")
        names += [f"{star}_{i}" for i in range(n - len(names))]
        return names

    def _positional(self, args, kwargs):
        if len(args) > MAX_ARGS:
            raise ArgumentError(at(caller(), f"at most {MAX_ARGS} positional arguments"))
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(at(caller(), f"{function_name(self.fun)}(): {e}")) from None
        bound.apply_defaults()
        if bound.kwargs:
            raise ArgumentError(at(caller(), f"{function_name(self.fun)}: keyword-only "
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
        return self if instance is None else Bound(self, instance)


class Bound:
    """A differentiated function read from an instance: calls (and sources) get it first."""

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


def caller():
    return where(user_frame(3))


def check_decorator_order(fun):
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


def signature_of(fun):
    """fun's signature, or (*args) where Python has none for it (a ufunc on Python 3.10)."""
    try:
        return inspect.signature(fun)
    except (TypeError, ValueError):
        return _ANY


def decorator(with_value, cls, **options):
    """grad / value_and_grad for the class `cls`: `@grad`, `@grad(argnums=1)` or
    `grad(f, argnums=1)`; `options` are cls's other keyword arguments."""
    def make(fun=None, argnums=0, **given):
        unknown = set(given) - set(options)
        if unknown:
            raise TypeError(f"unexpected keyword argument(s) {sorted(unknown)}")
        settings = {**options, **given}
        if fun is None:
            return lambda f: cls(f, argnums, with_value, **settings)
        check_decorator_order(fun)
        if not callable(fun):  # grad(argnums) used positionally by mistake
            raise ArgumentError(f"expected a function to differentiate, got {fun!r}")
        return cls(fun, argnums, with_value, **settings)
    return make


def signature_text(args, names):
    """'W: float32[784, 10], y: int64[128], lr=0.1': a call's arguments, for the
    generated function's docstring and for messages."""
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
