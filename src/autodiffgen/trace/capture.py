"""What a traced function reads besides its arguments: inputs read again, or guards.

The user's function runs on clones while it is traced: a clone is the same code with a
globals dict of its own (filled lazily, on first read) and closure cells of its own,
and user objects, classes and modules whose attributes it reads are seen through a
proxy. Neither touches the user's globals, cells or objects: other threads may run the
same code eagerly meanwhile.

Every value read that way is either
  - an input: an array or a float (Python or NumPy) becomes a Box of the trace whose
    input node carries its `Read` (where it lives: a holder object and a chain of
    `.attr` / `[key]` steps), so the generated code reads it again at call time from the
    same place (a rebound number or `W[...] = new` takes effect with no retrace; a
    changed type, shape or dtype raises GuardFailure), or
  - a guard: what decides control flow or a shape (an int, a string, None, a function
    or ufunc chosen by name) is checked by value or identity (`Check`).
Functions the code reaches are cloned in turn, so helpers at any depth see Boxes.

The capture is split by what it reads through: reads.py (where a value lives, and the
checks on it), clones.py (functions: globals, closures, defaults), proxies.py (objects,
classes, modules; pytree arguments of the user's classes), and this module (the Capture
that decides, per value, input or guard; containers; random generators; os.environ).
Upstream: context, boxes, recording (INPUT_KINDS), effects, reads, clones, proxies.
"""

import enum
import functools
import os
import random
import types

import numpy as np

from ..errors import TracingError, at
from . import effects
from .boxes import Box
from .clones import Clones
from .context import current_trace, user_loc
from .proxies import Proxy, PytreeClasses
from .reads import (
    INPUT_NUMBERS,
    Check,
    Read,
    follow,
    is_input,
    is_module_global,
    snapshot,
    user_function,
    user_module,
    user_object,
    writable,
)
from .recording import INPUT_KINDS

_GUARDED = (int, bool, str, bytes, np.integer, np.bool_)
_RANDOM = (np.random.Generator, np.random.RandomState, random.Random)  # rules/random.py
_PLAIN_ARGUMENTS = (int, float, complex, bool, str, bytes, type(None))
_MAX_LEAVES = 256  # a global container with more leaves is left alone


# A library's object -> what traced code gets when it reads it: a name bound before the
# trace (`from numpy import array`, `from scipy.special import logsumexp`) holds the
# original, which tracing swaps (swaps.py) only in its module. Keyed by id (a value read may
# be unhashable), or (id(owner), function) for a bound method, which is new at each read.
STAND_INS = {}


def _stand_in_key(value):
    if type(value) is types.MethodType:
        return (id(value.__self__), value.__func__), value.__func__
    return id(value), value


def add_stand_in(original, replacement):
    """Traced code reading `original` (a function, bound method, type or module) gets
    `replacement` (rules/numpy_api/building.py, rules/scipy)."""
    key, real = _stand_in_key(original)
    STAND_INS[key] = (real, replacement)


def stand_in(value):
    key, real = _stand_in_key(value)
    found = STAND_INS.get(key)
    return found[1] if found is not None and found[0] is real else value


class Capture(Clones, PytreeClasses):
    """The reads of one trace: Boxes by where they live, clones by original, guards."""

    def __init__(self, trace):
        self.trace = trace
        self.inputs = {}  # Read.key -> the Box (or the guarded value) that read gave
        self.clones = {}  # id(original function) -> (its clone, the original)
        self.originals = {}  # id(a clone) -> the user's function it stands for
        self.cells = {}  # id(a clone's cell) -> (that cell, the user's cell it stands for)
        self.copies = {}  # id(a user's list or dict) -> (the copy the trace sees, it)
        self.classes = {}  # a pytree argument's class -> the subclass the trace sees
        self.baked_reads = set()  # Read.key of inputs converted to plain values (baked)
        self.scopes = []  # the clones' globals (_Scope), to see what the function assigned
        self.made_cells = []  # (cell, what the trace saw, name, code of the function it
        # belongs to): to see what the function assigned
        self.effects = []  # (loc, what): attributes of outside objects the function set
        self._builtins = None

    def finish(self, fun):
        """After the trace: its writes outside itself, refused or warned of (effects.py)."""
        copies = [(c, o, label) for c, o, label in self.copies.values()]
        effects.check(fun, self.effects, self.scopes, copies, self.made_cells)

    def enter(self, fun):
        """What the tracer calls instead of `fun`."""
        if isinstance(fun, types.FunctionType):
            return self.clone(fun) if user_function(fun) else fun
        return self.substitute(fun, Read(fun, (), _file_of(fun)), root=True)

    def argument(self, value, fun):
        """What the traced code sees for an argument that is neither an array, a number
        nor a container (`self`, a config object, a partial, a callable object): the cache
        key holds such an argument by identity, so the object a later call hands over is
        this one, and what the trace reads through it is read again from it at call time,
        like a global."""
        if type(value) in _PLAIN_ARGUMENTS or isinstance(value, (np.ndarray, np.generic)):
            return value
        if type(value) is Proxy:  # handed over by code an enclosing trace runs (hessian)
            value = object.__getattribute__(value, "_adg_obj")
        return self.substitute(value, Read(value, (), _file_of(fun)), root=True)

    # values
    def substitute(self, value, read, root=False):
        """What the traced code sees for `value`, read from `read`."""
        kind = type(value)
        if kind is Box and (value.node.trace_id == self.trace.id or self.trace.eager):
            return value  # the tape's inner trace: refused where used (recording.bind)
        if read is not None and not all(writable(k) for _, k in read.chain):
            return value
        if kind is Box:  # an enclosing trace's value (a closure of grad(grad(f))): an input,
            return self.input(value.value, read) if read is not None else value  # see read_traced
        if is_input(value):  # an int in a shape or a branch: read by a guard
            return self.input(value, read) if read is not None else value
        if isinstance(value, _GUARDED) or value is None:
            return self.guard(read, "==" if value is not None else "is", value)
        if isinstance(value, _RANDOM):
            return self.generator(_exact(value), read) if read is not None else value
        if isinstance(value, enum.Enum) or isinstance(value, type) and issubclass(
                value, (BaseException, enum.Enum)):
            return self.guard(read, "is", value)
        if value is os.environ:
            return Environ(self, read or Read(os, (("attr", "environ"),), ""))
        return self._code_or_object(value, read, root)

    def _code_or_object(self, value, read, root):
        """What the traced code sees for a function, method, module, class, container or
        object: a clone, a proxy or a rebuilt container (the user's), or the library's
        own (its stand-in, if it has one), guarded by identity unless `root`."""
        kind = type(value)
        if value is os.getenv or isinstance(value, functools._lru_cache_wrapper) and \
                user_function(getattr(value, "__wrapped__", None)):
            if not root:  # os.getenv reads os.environ; a cached helper runs uncached
                self.guard(read, "is", value)
            return self.clone(getattr(value, "__wrapped__", value))
        if kind is types.FunctionType:
            if not user_function(value):
                return stand_in(self.guard(read, "is", value))
            if not root:
                self.guard(read, "is", value)
            return self.clone(value)
        if kind in (types.MethodType, types.BuiltinMethodType) and isinstance(
                value.__self__, _RANDOM) and read is not None:  # `RNG.normal`, numpy's `rand`
            _exact(value.__self__)
            return self.generator_method(value, read)
        if kind is types.MethodType:
            func = value.__func__
            if not (type(func) is types.FunctionType and user_function(func)):
                return stand_in(value)
            if not root:
                self.guard(read and read.then("attr", "__func__"), "is", func)
            owner = self.substitute(value.__self__, read and read.then("attr", "__self__"))
            return types.MethodType(self.clone(func), owner)
        if kind is functools.partial:
            return self.partial(value, read)
        if kind in (dict, list, tuple):
            return self.container(value, read)
        if kind is types.ModuleType:
            return Proxy(self, value, read) if user_module(value.__name__) or value is os \
                else stand_in(value)
        if isinstance(value, type):
            if user_module(value.__module__) or value.__module__ == "__main__":
                if not root:
                    self.guard(read, "is", value)
                return Proxy(self, value, read)
            return stand_in(self.guard(read, "is", value))
        if isinstance(value, np.ufunc) or type(value).__name__ == "_ArrayFunctionDispatcher" \
                or isinstance(value, types.BuiltinFunctionType) and (
                    value.__self__ is None or isinstance(value.__self__, types.ModuleType)):
            return stand_in(self.guard(read, "is", value))  # (a bound method: new each read)
        if user_object(value):
            return Proxy(self, value, read)
        return stand_in(value)  # np.r_, np.c_

    def input(self, value, read):
        found = self.inputs.get(read.key)
        if found is not None:
            return found[0]
        box = self.trace.new_input(value, read.name, None, read=read, type=type(value))
        self.inputs[read.key] = (box, read)
        return box

    def generator(self, value, read):
        """A random generator read from outside: an input whose methods draw at run time
        (rules/random.py), read again at each call like an array."""
        found = self.inputs.get(read.key)
        if found is not None:
            return found[0]
        handle = INPUT_KINDS[type(value)](self.trace, value, read.name, None)
        handle.node.params["read"] = read
        handle.node.params["type"] = type(value)
        self.inputs[read.key] = (handle, read)
        return handle

    def generator_method(self, value, read):
        """A generator's method read as a value (`sample = RNG.standard_normal`; numpy's
        `rand` is np.random's own RandomState's): the generator is an input, read again
        from the method's `__self__`, so draws are made at run time; the name is a guard."""
        self.guard(read.then("attr", "__name__"), "==", value.__name__)
        handle = self.generator(value.__self__, read.then("attr", "__self__"))
        return getattr(handle, value.__name__)

    def baked(self, box):
        """The value of an input read from outside, converted to a plain array or list by
        the user's code (np.asarray(W), W.tolist()): the trace keeps it as a constant, so
        the code checks it still holds the same numbers (against a private copy: a change
        in place is seen too) and retraces if not."""
        read = box.node.params["read"]
        value = box.value
        if read.key not in self.baked_reads:
            self.baked_reads.add(read.key)
            self.trace.captured.append(Check(read, "same" if type(value) is np.ndarray
                                             else "==", snapshot(value)))
        return value

    def guard(self, read, test, value):
        """`test`: "is", "==", "same" (the same contents: `same_contents`), "len" (a
        list's or tuple's length) or "keys" (a dict's keys, in order)."""
        if read is not None and read.chain and read.key not in self.inputs:
            self.inputs[read.key] = (value, read)
            kept = snapshot(value) if test in ("same", "==") else len(value) if test == "len" \
                else list(value) if test == "keys" else value
            self.trace.captured.append(Check(read, test, kept))
        return value

    def partial(self, value, read):
        func = self.substitute(value.func, read and read.then("attr", "func"))
        args = [self.substitute(a, read and read.then("attr", "args").then("item", i))
                for i, a in enumerate(value.args)]
        keywords = {k: self.substitute(v, read and read.then("attr", "keywords").then(
            "item", k)) for k, v in value.keywords.items()}
        return functools.partial(func, *args, **keywords)

    def container(self, value, read):
        """A dict, list or tuple: rebuilt with what its leaves are seen as, if it holds an
        array, a number or a function; else guarded by value (a tuple of ints, say). One
        with more than _MAX_LEAVES leaves is not rebuilt (each leaf would be an input):
        the code checks it still holds what it held (`same_contents`), or retraces."""
        budget = [_MAX_LEAVES]
        worth = _worth_rebuilding(value, budget)
        if budget[0] < 0 and _worth_rebuilding(value, [float("inf")]):
            self.guard(read, "same", value)
            return self.copy(value, read)
        if not worth:
            # a tuple of ints or strings is checked by value, and so is a module global's
            # list or dict of them (the trace sees a copy: what it appends never reaches
            # the user's); one reached through a closure or an object is not: it is more
            # likely a log or a counter the function is meant to write to
            if _literal(value, [_MAX_LEAVES]) and (type(value) is tuple or is_module_global(read)):
                self.guard(read, "==", value)
            return self.copy(value, read)
        if read is not None and read.chain:  # an entry appended or removed: traced again
            self.guard(read, "keys" if type(value) is dict else "len", value)
        if type(value) is dict:
            return {k: self.substitute(v, read and read.then("item", k))
                    for k, v in value.items()}
        return type(value)(self.substitute(v, read and read.then("item", i))
                           for i, v in enumerate(value))

    def copy(self, value, read):
        """What the trace sees of a module global's list or dict it does not rebuild: a
        shallow copy (one per trace), so what the function appends or stores there (a log
        of Boxes) never reaches the user's; the generated code does not replay such side
        effects. (One reached through a closure or an object is the user's own, as a
        spy or a counter there is meant to see the trace.)"""
        if type(value) not in (list, dict) or not is_module_global(read):
            return value
        found = self.copies.get(id(value))
        if found is None:
            found = self.copies[id(value)] = (value.copy(), value, read.label)  # own id
        return found[0]


class Environ:
    """os.environ as a trace sees it: each variable read is a guard of the code."""

    def __init__(self, capture, read):
        self._capture, self._read = capture, read

    def __getitem__(self, key):
        return self._capture.guard(self._read.then("item", key), "==", os.environ[key])

    def get(self, key, default=None):
        value = os.environ.get(key)
        self._capture.guard(self._read.then("get", key), "is" if value is None else "==",
                            value)
        return default if value is None else value

    def __contains__(self, key):
        return self.get(key) is not None

    def __getattr__(self, name):  # keys(), items(), copy(), ...: all of it, the real one
        return getattr(os.environ, name)


def _exact(generator):
    """A generator of a subclass (random.SystemRandom, a user's random.Random subclass) is
    refused: the trace could not draw from a private copy of it, nor the code be sure to
    draw as it does; its draws would otherwise be made once, when traced, and kept."""
    kind = type(generator)
    if kind not in _RANDOM:
        base = next(k for k in _RANDOM if isinstance(generator, k))
        spelled = "random.Random" if base is random.Random else f"np.random.{base.__name__}"
        raise TracingError(at(user_loc(), f"the traced function reads a {kind.__name__}, a "
                              f"subclass of {spelled}, from outside: its draws would be made "
                              f"once, when traced. Pass a {spelled} itself (or a "
                              "np.random.Generator) to the function as an argument instead"))
    return generator


def _worth_rebuilding(value, budget):
    if type(value) in (dict, list, tuple):
        budget[0] -= len(value)
        if budget[0] < 0:
            return False
        children = value.values() if type(value) is dict else value
        return any(_worth_rebuilding(v, budget) for v in children)
    return type(value) is np.ndarray or user_object(value) or isinstance(
        value, (*INPUT_NUMBERS, *_RANDOM, types.FunctionType, functools.partial))


def _literal(value, budget):
    if type(value) in (tuple, list):
        budget[0] -= len(value)
        return budget[0] >= 0 and all(_literal(v, budget) for v in value)
    if type(value) is dict:
        budget[0] -= len(value)
        return budget[0] >= 0 and all(_literal(k, budget) and _literal(v, budget)
                                      for k, v in value.items())
    return type(value) in (int, bool, str, float) or value is None


def _file_of(fun):
    call = type(fun).__dict__.get("__call__")
    code = getattr(getattr(fun, "__func__", fun), "__code__", None) or getattr(
        call, "__code__", None)
    return code.co_filename if code is not None else ""


def read_traced(holder, chain, test=None):
    """A read in code that an enclosing transformation traces (grad of grad): the
    enclosing trace sees it as its own input (`test` None) or its own guard ("is" or
    "=="), read from the same place."""
    value = follow(holder, chain)
    trace = current_trace()
    if trace is None or trace.capture is None:
        return value
    read = Read(holder, chain, "")
    if type(value) is Box:  # a closure over a traced value: the running trace's own, or an
        # input of it read from the same place (three transformations deep)
        return value if value.node.trace_id == trace.id else trace.capture.input(value.value,
                                                                                 read)
    if test is None and is_input(value):
        return trace.capture.input(value, read)
    if test is None and isinstance(value, _RANDOM):
        return trace.capture.generator(_exact(value), read)
    if test == "==" and not _literal(value, [_MAX_LEAVES]):  # no longer a literal (a dict
        test = "same"  # the function wrote an object into): checked by its contents
    return trace.capture.guard(read, test or "is", value)
