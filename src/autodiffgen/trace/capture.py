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
"""

import builtins
import dis
import enum
import functools
import os
import random
import sys
import types
from dataclasses import dataclass

import numpy as np

from ..errors import TracingError, at, is_internal
from ..tree import alias_kind, is_container, items, user_kind
from . import effects

_INPUT_NUMBERS = (float, complex, np.floating, np.complexfloating)
_INT64 = 2**63
_GUARDED = (int, bool, str, bytes, np.integer, np.bool_)
_LIBRARIES = {"numpy", "autodiffgen", "scipy", "astor", "numexpr", "pytest", "_pytest",
              "hypothesis", "builtins"}
_ARRAY_LIKE = ("__array__", "__array_ufunc__", "__array_function__", "__array_interface__")
_MAX_CLONES = 512
_RANDOM = (np.random.Generator, np.random.RandomState, random.Random)  # rules/random.py
_STDLIB = os.path.dirname(os.__file__)
_PLAIN_ARGUMENTS = (int, float, complex, bool, str, bytes, type(None))
_MAX_LEAVES = 256  # a global container with more leaves is left alone


@dataclass(frozen=True, eq=False)
class Read:
    """Where a value lives: `holder` followed by `chain`, a tuple of ("attr", name) and
    ("item", key) steps (a cell's value is its "cell_contents" attribute)."""

    holder: object
    chain: tuple
    where: str = ""  # the file of the code that reads it, for messages
    var: str = ""  # a closure variable's name (a cell has none)

    def then(self, kind, key):
        return Read(self.holder, self.chain + ((kind, key),), self.where, self.var)

    def follow(self):
        return follow(self.holder, self.chain)

    @property
    def key(self):
        return (id(self.holder), self.chain)

    @property
    def label(self):
        """`config.scale`, `PARAMS['W']`, `k` (a closure variable): as the user wrote it."""
        steps = self.chain
        text = ""
        if steps and steps[0] == ("attr", "cell_contents"):
            steps = steps[1:]
            text = self.var or "a closure variable"
        elif steps and steps[0][0] == "item" and is_globals(self.holder):
            text, steps = str(steps[0][1]), steps[1:]
        else:
            text = getattr(self.holder, "__name__", type(self.holder).__name__)
        return text + chain_text(steps)

    @property
    def name(self):
        """A variable name for the value in generated code."""
        for _, key in reversed(self.chain):
            if type(key) is str and key.isidentifier() and not key.startswith("_") \
                    and key != "cell_contents":
                return key
        return self.var if self.var.isidentifier() else "captured"


@dataclass(frozen=True, eq=False)
class Check:
    """A guard on a read: `test` is "is" (the same object) or "==" (an equal value)."""

    read: Read
    test: str
    value: object


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


def is_input(value):
    """Whether a value read from outside is an input of the generated code: an array, a
    float, an int (Python's within int64, or NumPy's; not a bool)."""
    kind = type(value)
    return kind is np.ndarray or isinstance(value, _INPUT_NUMBERS) or kind is int and \
        -_INT64 <= value < _INT64 or isinstance(value, np.integer)


def snapshot(value):
    """A private copy of a value's contents, for `same_contents`: arrays and containers
    are copied; other objects are kept (compared by identity)."""
    kind = type(value)
    if kind is np.ndarray:
        return value.copy()
    if kind is dict:
        return {k: snapshot(v) for k, v in value.items()}
    if kind in (list, tuple):
        return kind(map(snapshot, value))
    return value


def same_contents(value, kept):
    """Whether `value` holds what `kept` (a `snapshot`) held: what generated code checks
    for a value it keeps as a constant (np.asarray(W) of a global, a big global table)."""
    kind = type(kept)
    if type(value) is not kind:
        return False
    if kind is np.ndarray or kind in (float, complex) or isinstance(kept, np.generic):
        value, kept = np.asarray(value), np.asarray(kept)  # NaN equals NaN here
        return value.shape == kept.shape and value.dtype == kept.dtype and bool(
            np.array_equal(value, kept, equal_nan=kept.dtype.kind in "fc"))
    if kind is dict:
        return value.keys() == kept.keys() and all(
            same_contents(value[k], v) for k, v in kept.items())
    if kind in (list, tuple):
        return len(value) == len(kept) and all(map(same_contents, value, kept))
    if kind in (int, str, bytes, bool):
        return value == kept
    return value is kept


def _global(read):
    """Whether `read` is a module global itself (not an attribute or entry of one)."""
    return read is not None and len(read.chain) == 1 and is_globals(read.holder)


def follow(holder, chain):
    value = holder
    for kind, key in chain:
        value = getattr(value, key) if kind == "attr" else value.get(key) if kind == "get" \
            else value[key]
    return value


def chain_text(chain):
    """`.scale`, `['W']`, `.get('HOME')`: the steps as Python writes them."""
    return "".join(f".{key}" if kind == "attr" else f".get({key!r})" if kind == "get"
                   else f"[{key!r}]" for kind, key in chain)


def is_globals(holder):
    return type(holder) is dict and "__name__" in holder and "__builtins__" in holder


def writable(key):
    """Whether a key can be written out as a literal in the generated code."""
    return type(key) in (str, int, bool) or key is None or (
        type(key) is tuple and all(map(writable, key)))


# ---- what is the user's code ------------------------------------------------------------
def user_module(name):
    if not name:
        return False
    top = name.partition(".")[0]
    if top in _LIBRARIES or top in getattr(sys, "stdlib_module_names", ()):
        return False
    module = sys.modules.get(top)
    file = getattr(module, "__file__", None) or ""
    return "site-packages" not in file and "dist-packages" not in file


def user_function(fn):
    code = fn.__code__
    return not is_internal(code.co_filename) and not code.co_filename.startswith(
        "<autodiffgen-") and (fn.__module__ is None or user_module(fn.__module__) or
                              fn.__module__ == "__main__")


def _user_object(value):
    """An instance of a class of the user's (or a namespace of settings), unless it is an
    array-like that NumPy dispatches on: seen through a proxy, it would not be."""
    kind = type(value)
    if any(hasattr(kind, name) for name in _ARRAY_LIKE):
        return False
    return kind.__module__ == "__main__" or user_module(kind.__module__) or \
        kind.__name__ == "Namespace" and kind.__module__ == "argparse" or \
        kind is types.SimpleNamespace


# ---- one trace's reads ------------------------------------------------------------------
class Capture:
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

    def builtins(self):
        """Python's builtins, but `import` in the function's body gives what the trace
        sees of a module of the user's (a proxy), as a global module would be, and
        type(self) of an object seen through a proxy the class seen through one (so that
        type(self).SCALE is read like self.SCALE)."""
        if self._builtins is None:
            def importer(name, globals=None, locals=None, fromlist=(), level=0):
                with self.trace.suspended():  # the module's own code is not traced
                    module = builtins.__import__(name, globals, locals, fromlist, level)
                return self.substitute(module, Read(module, (), ""))

            def type_of(obj, *rest):
                if rest or builtins.type(obj) is not Proxy:
                    return builtins.type(obj, *rest)
                real = object.__getattribute__(obj, "_adg_obj")
                if isinstance(real, type):
                    return builtins.type(real)
                read = object.__getattribute__(obj, "_adg_read")
                return Proxy(self, builtins.type(real), read and read.then("attr", "__class__"))
            self._builtins = {**builtins.__dict__, "__import__": importer, "type": type_of}
        return self._builtins

    # values
    def substitute(self, value, read, root=False):
        """What the traced code sees for `value`, read from `read`."""
        from .tracer import Box

        kind = type(value)
        if kind is Box and (value.node.trace_id == self.trace.id or self.trace.eager):
            return value  # the tape's inner trace: refused where used (tracer.bind)
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
        if _user_object(value):
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
        from .tracer import INPUT_KINDS

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
            if _literal(value, [_MAX_LEAVES]) and (type(value) is tuple or _global(read)):
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
        if type(value) not in (list, dict) or not _global(read):
            return value
        found = self.copies.get(id(value))
        if found is None:
            found = self.copies[id(value)] = (value.copy(), value, read.label)  # own id
        return found[0]

    # functions
    def clone(self, fn):
        """`fn` with globals and closure cells that hold what the trace sees."""
        found = self.clones.get(id(fn))
        if found is not None:
            return found[0]
        if len(self.clones) >= _MAX_CLONES:
            return fn
        where = fn.__code__.co_filename
        real = fn.__globals__
        real = real._real if type(real) is _Scope else real  # made by an enclosing trace
        user = self.original_function(fn)
        scope = _Scope(self, real, where)
        scope.code = [fn.__code__]
        self.scopes.append(scope)
        cells = tuple(self.cell(cell, name, where, fn.__code__) for name, cell in
                      zip(fn.__code__.co_freevars, fn.__closure__ or ()))
        # a default (`def f(w, W=W, scale=0.5, cfg=CONFIG)`) is read like a global, at
        # each call: an array may change in place, a dict be edited, __defaults__ be set
        code, first = fn.__code__, fn.__code__.co_argcount - len(user.__defaults__ or ())
        defaults = user.__defaults__ and tuple(
            self.default(d, Read(user, (("attr", "__defaults__"), ("item", i)), where,
                                 code.co_varnames[first + i]))
            for i, d in enumerate(user.__defaults__))
        made = types.FunctionType(fn.__code__, scope, fn.__name__, defaults, cells or None)
        self.clones[id(fn)] = (made, fn)
        self.originals[id(made)] = user
        made.__kwdefaults__ = user.__kwdefaults__ and {
            k: self.default(d, Read(user, (("attr", "__kwdefaults__"), ("item", k)), where, k))
            for k, d in user.__kwdefaults__.items()}
        made.__qualname__, made.__module__ = fn.__qualname__, fn.__module__
        made.__dict__.update(fn.__dict__)
        return made

    # pytree arguments of the user's classes (tree.py)
    def pytree_argument(self, tree):
        """A dataclass or registered-type argument (at any depth of a pytree), rebuilt by
        tracer.py around its Boxes, as the traced code sees it: an instance of a subclass
        whose methods are clones (what they read is read again or guarded, as for any
        function) and whose class attributes are read from the class at each call. Its
        fields are its children (Boxes); what else it holds follows from them and from
        its aux_data, both in the cache key."""
        if not is_container(tree):
            return tree
        for _, child in items(tree):
            self.pytree_argument(child)
        kind = type(tree)
        if user_kind(kind):
            traced = self.classes.get(kind)
            if traced is None:
                traced = self.classes[kind] = self._traced_class(kind)
            if traced is not None:
                object.__setattr__(tree, "__class__", traced)
        return tree

    def _traced_class(self, kind):
        """The subclass of `kind` the trace sees (None if Python refuses to make one)."""
        members = {"__slots__": (), "__module__": kind.__module__,
                   "__qualname__": kind.__qualname__}
        fields = getattr(kind, "__dataclass_fields__", {})
        for klass in reversed(kind.__mro__[:-1]):  # a subclass's member wins
            if not (user_module(klass.__module__) or klass.__module__ == "__main__"):
                continue
            for name, value in vars(klass).items():
                member = None if name in fields else self._traced_member(kind, name, value)
                if member is not None:
                    members[name] = member
                else:
                    members.pop(name, None)
        try:
            made = type(kind)(kind.__name__, (kind,), members)
            alias_kind(made, kind)
            return made
        except TypeError:  # a layout or metaclass that refuses a subclass
            return None

    def _traced_member(self, kind, name, value):
        def traced(fn):  # not what dataclasses writes (exec'd, or a wrapper of its own)
            return type(fn) is types.FunctionType and user_function(fn) and not (
                fn.__code__.co_filename.startswith(("<", _STDLIB)))
        if traced(value):
            return self.clone(value)
        if isinstance(value, (staticmethod, classmethod)) and traced(value.__func__):
            return type(value)(self.clone(value.__func__))
        if isinstance(value, property) and value.fget is not None and traced(value.fget):
            return property(self.clone(value.fget), value.fset, value.fdel, value.__doc__)
        if name.startswith("__") or hasattr(type(value), "__get__"):
            return None
        return _ClassValue(self, kind, name)

    def original_function(self, fn):
        """The user's function, if `fn` is a clone an enclosing trace made (grad(f) called
        inside the function grad(grad(...)) traces): its defaults are the user's."""
        trace = self.trace._outer
        while trace is not None:
            found = trace.capture.originals.get(id(fn)) if trace.capture else None
            if found is not None:
                return found
            trace = trace._outer
        return fn

    def default(self, value, read):
        if value is None or type(value) is bool:
            return value
        return self.substitute(value, read)

    def cell(self, cell, name, where, code=None):
        if name == "__class__":  # super() reads it: the class itself
            return cell
        cell = self.original_cell(cell)
        try:
            value = cell.cell_contents
        except ValueError:  # not yet assigned
            return types.CellType()
        seen = self.substitute(value, Read(cell, (("attr", "cell_contents"),), where, name))
        made = types.CellType(seen)
        self.cells[id(made)] = (made, cell)
        self.made_cells.append((made, seen, name, code))
        return made

    def original_cell(self, cell):
        """The user's cell, if `cell` is one an enclosing trace's clone made (a function
        defined in the function an enclosing transformation traces)."""
        trace = self.trace._outer
        while trace is not None:
            found = trace.capture.cells.get(id(cell)) if trace.capture else None
            if found is not None and found[0] is cell:
                return found[1]
            trace = trace._outer
        return cell


class _Scope(dict):
    """A clone's globals: each name read is looked up in the real globals once and
    replaced by what the trace sees. Names it does not hold fall to builtins."""

    def __init__(self, capture, real, where):
        super().__init__((k, v) for k, v in real.items() if k.startswith("__"))
        self["__builtins__"] = capture.builtins()
        self._capture, self._real, self._where = capture, real, where
        self.seen = {}  # name -> what the trace saw of it

    def __missing__(self, name):
        value = self._real[name]  # a KeyError sends the interpreter to the builtins
        seen = self._capture.substitute(value, Read(self._real, (("item", name),),
                                                    self._where))
        self[name] = self.seen[name] = seen
        return seen

    def assigned(self):
        """The globals the function assigned (`global STEP; STEP += 1`)."""
        return [k for k, v in self.items() if not k.startswith("__")
                and (k not in self.seen or v is not self.seen[k])]


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
        from .tracer import user_loc

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
    return type(value) is np.ndarray or _user_object(value) or isinstance(
        value, (*_INPUT_NUMBERS, *_RANDOM, types.FunctionType, functools.partial))


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


class _ClassValue:
    """A class attribute as a pytree argument's traced subclass shows it: read from the
    user's class (an input or a guard of the generated code, read again at each call);
    an instance attribute of the same name wins, as in Python."""

    def __init__(self, capture, kind, name):
        self.capture, self.kind, self.name = capture, kind, name

    def __get__(self, instance, owner=None):
        where = getattr(sys.modules.get(self.kind.__module__), "__file__", "") or ""
        return self.capture.substitute(getattr(self.kind, self.name),
                                       Read(self.kind, (("attr", self.name),), where))


# ---- proxies ----------------------------------------------------------------------------
class Proxy:
    """A user object, class or module as the traced code sees it: attributes read
    through it are what the trace sees (Boxes, clones); writes stay in the proxy."""

    __slots__ = ("_adg_capture", "_adg_fetched", "_adg_obj", "_adg_own", "_adg_read")

    def __init__(self, capture, obj, read):
        set_ = object.__setattr__
        set_(self, "_adg_capture", capture)
        set_(self, "_adg_obj", obj)
        set_(self, "_adg_read", read)
        set_(self, "_adg_own", {})
        set_(self, "_adg_fetched", {})  # attribute name -> what the trace read

    @property
    def __class__(self):
        """The object's class: the real one for isinstance() and library code, and the
        class seen through a proxy where the user's code reads `self.__class__.SCALE`."""
        real = type(object.__getattribute__(self, "_adg_obj"))
        if isinstance(object.__getattribute__(self, "_adg_obj"), type) or \
                not _reads_class_attribute(sys._getframe(1)):
            return real
        read = object.__getattribute__(self, "_adg_read")
        return Proxy(object.__getattribute__(self, "_adg_capture"), real,
                     read and read.then("attr", "__class__"))

    def __getattr__(self, name):
        own = object.__getattribute__(self, "_adg_own")
        if name in own:
            return own[name]
        obj = object.__getattribute__(self, "_adg_obj")
        read = object.__getattribute__(self, "_adg_read")
        capture = object.__getattribute__(self, "_adg_capture")
        if isinstance(obj, dict) and name in _MAPPING_READS and \
                _lookup(type(obj), name)[0] != "function":  # a dict subclass's own methods
            return _MAPPING_READS[name](self, obj)
        kind, found = _lookup(obj, name)
        here = read and read.then("attr", name)
        if kind == "method":  # a function on the class, bound to this proxy
            capture.guard(here and here.then("attr", "__func__"), "is", found)
            return types.MethodType(capture.clone(found), self)
        if kind == "static":
            capture.guard(here, "is", found)
            return capture.clone(found)
        if kind == "classmethod":
            capture.guard(here and here.then("attr", "__func__"), "is", found)
            owner = self if isinstance(obj, type) else Proxy(
                capture, type(obj), read and read.then("attr", "__class__"))
            return types.MethodType(capture.clone(found), owner)
        if kind == "property":
            return capture.clone(found.fget)(self)
        seen = capture.substitute(found, here)
        object.__getattribute__(self, "_adg_fetched")[name] = seen
        return seen

    def __setattr__(self, name, value):
        read = object.__getattribute__(self, "_adg_read")
        own = object.__getattribute__(self, "_adg_own")
        fetched = object.__getattribute__(self, "_adg_fetched")
        if read is not None and name not in own and not (
                name in fetched and fetched[name] is value):  # `self.log += [x]`: the same list
            capture = object.__getattribute__(self, "_adg_capture")
            capture.effects.append(effects.attribute(read.label or "an object", name,
                                                     name in fetched))
        own[name] = value

    def __call__(self, *args, **kwargs):
        obj = object.__getattribute__(self, "_adg_obj")
        if isinstance(obj, type):  # a new object: its methods are cloned too
            made = obj(*args, **kwargs)
            capture = object.__getattribute__(self, "_adg_capture")
            return Proxy(capture, made, None) if type(made) is obj and not \
                is_container(made) else made  # a pytree (tree.py): its leaves are traced
        return self.__getattr__("__call__")(*args, **kwargs)

    def __getitem__(self, key):
        obj = object.__getattribute__(self, "_adg_obj")
        if _lookup(type(obj), "__getitem__")[0] == "function":
            return self.__getattr__("__getitem__")(key)
        read = object.__getattribute__(self, "_adg_read")
        capture = object.__getattribute__(self, "_adg_capture")
        value = obj[key]
        return capture.substitute(value, read.then("item", key)) if read else value

    def __len__(self):
        return len(object.__getattribute__(self, "_adg_obj"))

    def __iter__(self):
        obj = object.__getattribute__(self, "_adg_obj")
        if _lookup(type(obj), "__iter__")[0] == "function":
            return self.__getattr__("__iter__")()
        if isinstance(obj, (list, tuple)):
            return (self[i] for i in range(len(obj)))
        return iter(obj)

    def __bool__(self):
        return bool(object.__getattribute__(self, "_adg_obj"))

    def __repr__(self):
        return repr(object.__getattribute__(self, "_adg_obj"))

    def __instancecheck__(self, instance):
        return isinstance(instance, object.__getattribute__(self, "_adg_obj"))

    def __subclasscheck__(self, cls):
        return issubclass(cls, object.__getattribute__(self, "_adg_obj"))


_MAPPING_READS = {  # what reads a dict subclass's values, through the proxy's [key]
    "items": lambda proxy, obj: lambda: [(k, proxy[k]) for k in obj],
    "values": lambda proxy, obj: lambda: [proxy[k] for k in obj],
    "get": lambda proxy, obj: lambda k, default=None: proxy[k] if k in obj else default,
}


_CLASS_READS = {}  # code -> offsets of its `.__class__` attribute reads


def _reads_class_attribute(frame):
    """Whether `frame` (user code) is reading `.__class__` as an attribute, as opposed to
    calling isinstance() or a library reading it."""
    code = frame.f_code
    if is_internal(code.co_filename):
        return False
    offsets = _CLASS_READS.get(code)
    if offsets is None:
        offsets = _CLASS_READS[code] = frozenset(
            i.offset for i in dis.get_instructions(code)
            if i.opname.startswith("LOAD_ATTR") and i.argval == "__class__")
    return frame.f_lasti in offsets


def _lookup(obj, name):
    """(how the attribute is found, what is found), without running the user's code."""
    if isinstance(obj, types.ModuleType):
        found = obj.__dict__.get(name, _MISSING)
        return ("value", found if found is not _MISSING else getattr(obj, name))
    klass = obj if isinstance(obj, type) else type(obj)
    found = _MISSING
    for k in klass.__mro__:
        if name in k.__dict__:
            found = k.__dict__[name]
            break
    if isinstance(found, staticmethod) and type(found.__func__) is types.FunctionType:
        return ("static", found.__func__)
    if isinstance(found, classmethod) and type(found.__func__) is types.FunctionType:
        return ("classmethod", found.__func__)
    if isinstance(obj, type):
        if type(found) is types.FunctionType and user_function(found):
            return ("function", found)
        return ("value", getattr(obj, name))
    if isinstance(found, property) and type(found.fget) is types.FunctionType:
        return ("property", found)
    own = getattr(obj, "__dict__", None)
    if type(own) is dict and name in own:
        return ("value", own[name])
    if type(found) is types.FunctionType and user_function(found):
        return ("method", found)
    return ("value", getattr(obj, name))


_MISSING = object()


def read_traced(holder, chain, test=None):
    """A read in code that an enclosing transformation traces (grad of grad): the
    enclosing trace sees it as its own input (`test` None) or its own guard ("is" or
    "=="), read from the same place."""
    from .tracer import Box, current_trace

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
