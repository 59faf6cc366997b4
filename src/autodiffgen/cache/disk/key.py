"""The disk store's keys: what an entry is keyed on, so that a process finds an entry only
where a trace of its own would emit the same code.

`entry_key(fingerprint(fun), signature_key, extra)` is a sha256 of the function's code and
of every Python function it reaches by name (globals, closure cells, attributes of global
modules and classes: editing a helper changes the key), the call's signature key
(cache.keys), `extra` (the decorator's kind and argnums), the library's version and source
bytes, NumPy's, Python's and astor's versions, which optional modules the emitted code may
import are installed, and the settings that change the emitted code. A signature holding a
value with no process-independent text (an object whose repr is an address) has no key:
such a call is not persisted. What a trace read besides the code (values of globals,
attributes) is recorded and checked per entry: reads.py.
"""

import enum
import functools
import hashlib
import importlib.util
import linecache
import os
import pathlib
import sys
import types

import numpy as np

from ... import _version, passes, tree
from .store import FORMAT

_OPTIONAL = ("numexpr",)  # modules the emitted code imports when they are installed
_NOT_IN_CODE = {"AUTODIFFGEN_EXPLAIN", "AUTODIFFGEN_MAX_VARIANTS",  # logging, a bound,
                "AUTODIFFGEN_TRACEBACK"}  # how much of a traceback shows (tracebacks.py)
_LIBRARIES = ("numpy", "autodiffgen", "builtins")  # covered by the versions in the key


class _Unstable(Exception):
    """A value whose text could differ between processes (an address in its repr)."""


def fingerprint(fun):
    """sha256 of `fun`'s code and of the code of every Python function it reaches by name
    (globals, closure cells, attributes of global modules and classes), so that editing a
    helper changes the key. Values of arrays and numbers are left out: the generated code
    reads or guards them itself."""
    digest = hashlib.sha256()
    _Walk(digest.update).function(fun)
    return digest.hexdigest()


def entry_key(fingerprint, signature_key, extra=()):
    """The entry's name: the function's fingerprint, the call's signature key (cache.leaf_key
    tuples) and `extra`, with everything else the emitted code depends on. None when the
    signature holds a value with no process-independent text (an object whose repr is its
    address): such a call is not persisted."""
    try:
        call = _canon(signature_key) + "|" + _canon(extra)
    except _Unstable:
        return None
    return _hash([FORMAT, fingerprint, call, _version.__version__, _library_digest(),
                  np.__version__, sys.version, _pass_settings(), _optional_imports()])


def _hash(parts):
    digest = hashlib.sha256()
    for part in parts:
        data = part if isinstance(part, bytes) else _loose(part).encode()
        digest.update(len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()


def _pass_settings():
    """What decides which passes run, and every AUTODIFFGEN_* setting but those known to
    leave the emitted code alone: an unknown one might not."""
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith("AUTODIFFGEN_")
                 and not k.startswith("AUTODIFFGEN_CACHE") and k not in _NOT_IN_CODE)
    pipeline = tuple(p.__name__ for p in passes.PIPELINE)
    return repr((passes.ENABLED, pipeline, passes.MAX_ROUNDS, env))


def _optional_imports():
    """Which optional modules the emitted code may import are installed: code written where
    numexpr is would fail to import where it is not (a sys.modules entry of None, as a test
    or a sandbox sets, counts as missing)."""
    return repr([(name, _importable(name)) for name in _OPTIONAL] + [_astor_version()])


@functools.cache
def _astor_version():
    """astor writes the emitted code's text (and the trace runs it)."""
    import astor
    return getattr(astor, "__version__", None)


def _importable(name):
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


@functools.cache
def _library_digest():
    """The bytes of autodiffgen's own source: an edited checkout emits other code under the
    same version number."""
    root = pathlib.Path(__file__).parents[2]  # autodiffgen/, from cache/disk/
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _canon(x):
    """A text for `x` that is the same in every process, or _Unstable."""
    kind = type(x)
    if x is None or x is Ellipsis or kind in (bool, int, str):
        return f"{kind.__name__}:{x!r}"
    if kind is float:
        return "float:" + x.hex()
    if kind is complex:
        return f"complex:{x.real.hex()},{x.imag.hex()}"
    if kind is bytes:
        return "bytes:" + x.hex()
    if kind is tuple:
        return "(" + ",".join(map(_canon, x)) + ")"
    if kind is frozenset:
        return "frozenset(" + ",".join(sorted(map(_canon, x))) + ")"
    if isinstance(x, np.dtype):
        return f"dtype:{x.str}:{x.descr!r}"
    if isinstance(x, type):  # a registered pytree type: its flatten and unflatten too
        registered = tree.registration(x)
        return "type:" + _type_name(x) + ("" if registered is None else _canon(registered))
    if isinstance(x, enum.Enum):
        return f"enum:{_type_name(kind)}.{x.name}"
    if kind is types.FunctionType:
        return "function:" + fingerprint(x)
    raise _Unstable(x)


def _type_name(t):
    """module.qualname; a namedtuple's fields too. A class local to a function (other than a
    namedtuple) has no name that says which class it is: _Unstable."""
    fields = getattr(t, "_fields", None)
    if "<locals>" in t.__qualname__ and not (issubclass(t, tuple) and fields is not None):
        raise _Unstable(t)
    return f"{t.__module__}.{t.__qualname__}" + (repr(tuple(fields)) if fields else "")


def _loose(x):
    """_canon where it can; otherwise a stable text that still tells kinds apart (an array
    by shape and dtype, an object by its type): for code constants and default values,
    which the signature key sees again when they are used."""
    try:
        return _canon(x)
    except _Unstable:
        pass
    if isinstance(x, np.ndarray):
        return f"array:{x.shape}:{x.dtype.str}"
    if isinstance(x, (tuple, list)):
        return f"{type(x).__name__}[" + ",".join(map(_loose, x)) + "]"
    if isinstance(x, dict):
        return "dict{" + ",".join(f"{_loose(k)}:{_loose(v)}" for k, v in x.items()) + "}"
    return f"object:{type(x).__module__}.{type(x).__qualname__}"


class _Walk:
    """One walk over a function and what it calls. `seen` numbers each function visited, so
    a cycle (f calls g calls f) ends, hashed as a back reference."""

    def __init__(self, update):
        self.update = update
        self.seen = {}

    def feed(self, *parts):
        for part in parts:
            data = part if isinstance(part, bytes) else _loose(part).encode()
            self.update(len(data).to_bytes(8, "big") + data)

    def function(self, fun):
        if isinstance(fun, functools.partial):
            self.feed("partial", fun.args, fun.keywords)
            return self.function(fun.func)
        if not isinstance(fun, (types.FunctionType, types.MethodType)):  # a wrapper object
            text = repr(fun)  # e.g. a GradFunction's argnums, unless it is an address
            self.feed("wrapper", _loose(fun), "" if " at 0x" in text else text)
        fun = _unwrap(fun)
        if id(fun) in self.seen:
            return self.feed("seen", self.seen[id(fun)])
        self.seen[id(fun)] = len(self.seen)
        if not isinstance(fun, types.FunctionType):  # a builtin, a ufunc, a callable object
            self.feed("callable", _loose(fun), getattr(fun, "__qualname__", ""))
            call = _static_attr(type(fun), "__call__")
            if isinstance(call, types.FunctionType):
                self.function(call)
            return
        self.feed("function", fun.__module__, fun.__qualname__, fun.__defaults__,
                  fun.__kwdefaults__)
        if not _is_library(fun.__module__):
            self.code(fun.__code__)
            self.feed(_source_text(fun.__code__))
            self.references(fun)

    def code(self, co):
        self.feed("code", co.co_name, co.co_filename, co.co_firstlineno, co.co_argcount,
                  co.co_posonlyargcount, co.co_kwonlyargcount, co.co_flags, co.co_names,
                  co.co_varnames, co.co_freevars, co.co_cellvars, co.co_code, co.co_linetable)
        for const in co.co_consts:
            if isinstance(const, types.CodeType):
                self.code(const)
            else:
                self.feed(const)

    def references(self, fun):
        """Follow what `fun`'s code names: globals, closure cells and, on a global module or
        class, the attributes its code names too (`layers.dense(x)`)."""
        names = _names(fun.__code__)
        reached = [(f"global {n}", fun.__globals__.get(n)) for n in names]
        cells = zip(fun.__code__.co_freevars, fun.__closure__ or ())
        reached += [(f"closure {n}", _cell_contents(c)) for n, c in cells]
        for label, value in reached:
            if isinstance(value, (types.ModuleType, type)):
                for attr in names:
                    self.reach(f"{label}.{attr}", _static_attr(value, attr))
            else:
                self.reach(label, value)

    def reach(self, label, value):
        if isinstance(value, (types.FunctionType, types.MethodType, functools.partial)) \
                or callable(value) and hasattr(value, "__wrapped__"):
            self.feed(label)
            self.function(value)


def _unwrap(fun):
    """The Python function behind a bound method or a functools-style wrapper object."""
    for _ in range(100):  # a wrapper chain, not a cycle
        if isinstance(fun, (types.MethodType, staticmethod, classmethod)):
            fun = fun.__func__
        elif not isinstance(fun, types.FunctionType) and hasattr(fun, "__wrapped__"):
            fun = fun.__wrapped__
        else:
            break
    return fun


def _is_library(module):
    return isinstance(module, str) and module.split(".")[0] in _LIBRARIES


def _names(code):
    """The global and attribute names of `code` and of the functions defined inside it."""
    names = dict.fromkeys(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names.update(dict.fromkeys(_names(const)))
    return list(names)


def _cell_contents(cell):
    try:
        return cell.cell_contents
    except ValueError:  # a cell not filled yet
        return None


def _static_attr(namespace, attr):
    """`namespace.attr` without running a module's __getattr__ or a descriptor."""
    if isinstance(namespace, types.ModuleType):
        return None if _is_library(namespace.__name__) else vars(namespace).get(attr)
    if _is_library(namespace.__module__):
        return None
    return next((vars(k)[attr] for k in namespace.__mro__ if attr in vars(k)), None)


def _source_text(code):
    """The lines the function spans, which the generated code's comments quote."""
    last = max((line for _, _, line in code.co_lines() if line), default=code.co_firstlineno)
    return "".join(linecache.getlines(code.co_filename)[code.co_firstlineno - 1:last])
