"""What a disk cache entry depends on besides its key: what its trace read, so that another
process loads it only where a trace would produce the same code.

`manifest` walks from the traced function through what the code a Recorder saw run
(trace/executed.py) names: the globals and closure cells of every executed function, the
attributes of the modules, classes and objects it reaches (`pkg.sub.fn`, `config.scale`,
`self.w`). Each place is stored as a path from the traced function (or from a module, by
name) with a text of what is there: a function by the hash of its code, a string, tuple or
dict by its content (arrays by a hash of their bytes), an object by its class and the
attributes the code names (an installed package's object, whose state this cannot see, is
Unpersistable). An executed function that no path reaches (a helper imported inside the
body, a method of a callable object) is found by its module and qualified name. Values the
generated code checks itself (the globals and closure variables it re-reads) are left out.

`check` resolves every path in the loading process and compares the texts: an entry built
from other code or other values is a miss, with the first difference as its reason.
A function that cannot be found again by a path (defined by exec with no module, in a
module that cannot be imported) makes the entry `Unpersistable`, with the reason.
"""

import enum
import functools
import hashlib
import importlib
import re
import sys
import types
from collections.abc import Mapping

import numpy as np

_LIBRARIES = ("numpy", "autodiffgen", "builtins", "astor", "numexpr")  # versions in the key
_STDLIB = getattr(sys, "stdlib_module_names", frozenset())  # 3.10+
_SIMPLE = (type(None), bool, int, float, complex, str, bytes, type(Ellipsis))
_MAX_DEPTH = 12
MISSING = _MISSING = "<missing>"
_FUNCTION = 0x1  # inspect.CO_OPTIMIZED: a function's code, not a module's or class body's


class Unpersistable(Exception):
    """What the trace read has no description another process can check; the message says
    what, for the explain log."""



def is_library(module_name):
    """Code the key's versions cover: NumPy, autodiffgen, the standard library (and the
    methods collections.namedtuple writes)."""
    if not isinstance(module_name, str):  # a C type's member descriptor (Cython functions)
        return False
    top = module_name.split(".")[0]
    return top in _LIBRARIES or top in _STDLIB or top.startswith("namedtuple_")


# ---------------------------------------------------------------- describing values

def _sha(data):
    return hashlib.sha256(data).hexdigest()[:32]


def _code_hash(code):
    return _code_hash_of(id(code), code)


@functools.lru_cache(maxsize=4096)
def _code_hash_of(_, code):
    """Cached by identity: equal code objects of two files (code == ignores the file name)
    have different hashes. The cache holds the code, so its id is not reused meanwhile."""
    digest = hashlib.sha256()
    for part in (code.co_name, code.co_filename, code.co_firstlineno, code.co_argcount,
                 code.co_posonlyargcount, code.co_kwonlyargcount, code.co_flags,
                 code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars):
        digest.update(repr(part).encode() + b"\0")
    # the lines too: the generated code's comments and messages name the user's lines
    table = code.co_linetable  # 3.10+
    digest.update(code.co_code + b"\0" + table + b"\0")
    for const in code.co_consts:
        digest.update((_code_hash(const) if isinstance(const, types.CodeType)
                       else _text(const, frozenset(), 0)).encode() + b"\0")
    return digest.hexdigest()[:32]


def _qualname(x):
    return f"{getattr(x, '__module__', None)}.{getattr(x, '__qualname__', None)}"


def _text(x, names, depth):
    """A text of `x` that another process gives only for the same value and code."""
    kind = type(x)
    if depth > _MAX_DEPTH:
        raise Unpersistable("a value nested too deep to describe")
    if kind in _SIMPLE:
        return f"{kind.__name__}:{x.hex() if kind is float else repr(x)}"
    if isinstance(x, np.ndarray):  # a subclass too (a masked array: its mask as well)
        if x.dtype.hasobject:
            raise Unpersistable("an array of Python objects")
        data = np.ascontiguousarray(x).tobytes() + np.ma.getmaskarray(x).tobytes() \
            if isinstance(x, np.ma.MaskedArray) else np.ascontiguousarray(x).tobytes()
        return f"array:{_qualname(kind)}:{x.dtype.str}:{x.shape}:{_sha(data)}"
    if isinstance(x, np.generic):
        return f"scalar:{x.dtype.str}:{x.tobytes().hex()}"
    if isinstance(x, np.dtype):
        return f"dtype:{x.str}:{x.descr!r}"
    if isinstance(x, (tuple, list, set, frozenset)):  # a namedtuple, a subclass too
        items = [_text(v, names, depth + 1) for v in x]
        unordered = isinstance(x, (set, frozenset))
        return f"{_qualname(kind)}[{','.join(sorted(items) if unordered else items)}]"
    if isinstance(x, dict):  # an OrderedDict, a defaultdict too
        return f"{_qualname(kind)}{{" + ",".join(
            f"{_text(k, names, depth + 1)}:{_text(v, names, depth + 1)}"
            for k, v in x.items()) + "}"
    if kind is types.FunctionType:
        return f"function:{_qualname(x)}:{_code_hash(x.__code__)}:" + \
            _text((x.__defaults__, x.__kwdefaults__), names, depth + 1)
    if kind is types.MethodType:
        return f"method:{_text(x.__func__, names, depth + 1)}"
    if isinstance(x, (staticmethod, classmethod)):
        return f"{kind.__name__}:{_text(x.__func__, names, depth + 1)}"
    if kind is property:
        return "property:" + ",".join(_text(f, names, depth + 1)
                                      for f in (x.fget, x.fset, x.fdel))
    if kind is functools.partial:
        return f"partial:{_text((x.func, x.args, x.keywords), names, depth + 1)}"
    if kind is types.ModuleType:
        file = getattr(x, "__file__", None) if x.__name__ == "__main__" else None
        return f"module:{x.__name__}:{file}"
    if isinstance(x, type):  # its methods: by their paths, or found by name if they ran
        return f"class:{_qualname(x)}"
    if kind is types.CellType:
        raise Unpersistable("a closure cell")
    if isinstance(x, (np.ufunc, types.BuiltinFunctionType)) or _compiled_function(kind):
        return f"builtin:{getattr(x, '__module__', None)}.{x.__name__}"
    if isinstance(x, enum.Enum):
        return f"enum:{_qualname(kind)}.{x.name}"
    for base in (int, float, complex, str, bytes):  # a subclass: its value too
        if isinstance(x, base):
            return f"{_qualname(kind)}:{_text(base(x), names, depth + 1)}:" + \
                _object_text(x, names, depth)
    return _object_text(x, names, depth)


def _compiled_function(kind):
    """A function compiled by Cython (NumPy's random methods, on some versions): a
    library's function, whose class has no module name of its own."""
    return not isinstance(getattr(kind, "__module__", None), str) and \
        kind.__name__ in ("cython_function_or_method", "fused_cython_function")


def _object_text(x, names, depth):
    """An object by its class and the attributes the executed code names (every one, for
    a NumPy object such as a poly1d, whose attributes NumPy's own code reads; the named
    keys of a mapping such as os.environ). An instance of an installed package's class has
    state this cannot see: Unpersistable."""
    kind, module = type(x), type(x).__module__
    module = module if isinstance(module, str) else ""  # a C type's member descriptor
    if not is_library(module) and _installed(module):
        raise Unpersistable(f"an instance of {_qualname(kind)}, from an installed package, "
                            "whose state the disk cache cannot describe")
    numpy = module.split(".")[0] == "numpy"
    attrs = {a: v for a, v in _vars(x).items() if numpy or a in names}
    if is_library(module) and isinstance(x, Mapping):
        attrs = {f"[{k}]": x[k] for k in sorted(names) if k in x}
    return f"object:{_qualname(kind)}{{" + ",".join(
        f"{a}:{_text(v, names, depth + 1)}" for a, v in sorted(attrs.items())) + "}"


def _installed(module_name):
    """Whether the module comes from site-packages (a third party's, installed)."""
    file = getattr(sys.modules.get(module_name), "__file__", None) or ""
    return any(part in ("site-packages", "dist-packages") for part in re.split(r"[/\\]", file))


# ---------------------------------------------------------------- paths

def step(value, how, name=None):
    """One step of a path, without running the user's code (no __getattr__, descriptors
    or properties): _MISSING if it leads nowhere."""
    try:
        if how == "global":
            return value.__globals__.get(name, _MISSING)
        if how == "closure":
            cells = dict(zip(value.__code__.co_freevars, value.__closure__ or ()))
            return cells[name].cell_contents
        if how == "func":
            if type(value) is functools.partial:
                return value.func
            if isinstance(value, (types.MethodType, staticmethod, classmethod)):
                return value.__func__
            return _MISSING
        if how == "self":
            return value.__self__ if type(value) is types.MethodType else _MISSING
        if how == "wrapped":
            return _vars(value)["__wrapped__"]
        if how == "type":
            return type(value)
        if how in ("fget", "fset", "fdel"):
            return getattr(value, how) if type(value) is property else _MISSING
        if how == "attr":
            if isinstance(value, types.ModuleType):
                return _vars(value).get(name, _MISSING)
            if isinstance(value, type):
                return next((vars(k)[name] for k in value.__mro__ if name in vars(k)), _MISSING)
            return _vars(value).get(name, _MISSING)
    except (AttributeError, KeyError, ValueError, TypeError):
        pass
    return _MISSING


def _vars(x):
    """x.__dict__ and the values of its __slots__, without running a __getattr__ or a
    property (a class may define them); {} if none."""
    try:
        found = object.__getattribute__(x, "__dict__")
    except (AttributeError, TypeError):
        found = {}
    found = found if isinstance(found, (dict, types.MappingProxyType)) else {}
    if isinstance(x, type):
        return found
    slots = {}
    for klass in type(x).__mro__:
        for name, attr in vars(klass).items():
            if type(attr) is types.MemberDescriptorType and name not in slots:
                try:
                    slots[name] = attr.__get__(x, type(x))
                except AttributeError:  # a slot not set
                    pass
    return {**slots, **found} if slots else found


def resolve(root, path):
    """The value at `path` (a list of [how, name]) from `root`, or _MISSING."""
    value = root
    for how, name in path:
        if how == "module":
            value = _module(name)
        else:
            value = step(value, how, name)
        if value is _MISSING:
            return _MISSING
    return value


def _module(name):
    module = sys.modules.get(name)
    if module is None and name != "__main__":
        try:
            module = importlib.import_module(name)
        except Exception:  # noqa: BLE001  any failure to import is a miss
            return _MISSING
    return _MISSING if module is None else module


def say(path):
    """The path as the user would write it."""
    parts = []
    for how, name in path:
        if how in ("module", "global"):
            parts = [name]
        elif how == "attr":
            parts.append(f".{name}")
        elif how == "closure":
            parts = [f"the closure variable {name}"]
        elif how == "type":
            parts.append(".__class__")
    return "".join(parts) or "the traced function"


# ---------------------------------------------------------------- building the manifest

def manifest(fun, codes, checked=()):
    """{"names": [...], "paths": [[path, text]]}: what the trace read, from the Recorder's
    `codes`, leaving out the (id(holder), name) pairs in `checked` that the generated code
    re-reads itself. `names` (what the executed code names) decides which attributes of an
    object its text shows."""
    codes = {c: getattr(g, "_real", g) for c, g in codes.items()}  # a clone's (capture.py)
    executed = {c for c, g in codes.items() if c.co_flags & _FUNCTION
                and not is_library(g.get("__name__"))}
    names = set()
    for code in executed:
        names |= _names(code)
    walk = _Walk(names, executed, set(checked))
    walk.visit([], fun)
    for code in sorted(executed, key=lambda c: (c.co_filename, c.co_firstlineno, c.co_name)):
        if code not in walk.covered:
            walk.visit(*_by_name(code, codes[code]))
    return {"names": sorted(names), "paths": walk.entries}


def _names(code):
    """The names `code` reads as globals or attributes, and the strings it holds (for
    getattr(obj, "name") and mapping["name"])."""
    found = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found |= _names(const)
        elif type(const) is str and const.isidentifier():
            found.add(const)
    return found


def _nested(code):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _nested(const)


def _by_name(code, scope):
    """[("module", name), ("attr", ...)...] and the function found there whose code holds
    `code`; Unpersistable if its module has none."""
    module_name = scope.get("__name__")
    module = sys.modules.get(module_name)
    where = f"{code.co_name} ({code.co_filename}:{code.co_firstlineno})"
    if module_name is None:
        raise Unpersistable(f"the trace ran {where}, which belongs to no module (made by "
                            "exec?), so another process cannot find it")
    if module is None or vars(module) is not scope:
        raise Unpersistable(f"the trace ran {where}, whose module {module_name!r} another "
                            "process cannot import")
    for name, value in list(vars(module).items()):
        for path, fn in _functions_in(value, [("attr", name)], module_name):
            if code in _nested(fn.__code__):
                return [("module", module_name)] + path, resolve(module, path)
    raise Unpersistable(f"the trace ran {where}, which another process cannot find by name "
                        f"in {module_name}")


def _functions_in(value, path, module_name, depth=0):
    """(path, function) of a module attribute, or of the methods of a class defined there."""
    if isinstance(value, types.FunctionType):
        yield path, value
    for how in ("func", "wrapped"):
        inner = step(value, how)
        if inner is not _MISSING and inner is not value and depth < 8:
            yield from _functions_in(inner, path + [(how, None)], module_name, depth + 1)
    if isinstance(value, property):
        for accessor in ("fget", "fset", "fdel"):
            if isinstance(getattr(value, accessor), types.FunctionType):
                yield path + [(accessor, None)], getattr(value, accessor)
    elif isinstance(value, type) and value.__module__ == module_name and depth < 4:
        for name, attr in list(vars(value).items()):
            yield from _functions_in(attr, path + [("attr", name)], module_name, depth + 1)


class _Walk:
    def __init__(self, names, executed, checked):
        self.names, self.executed, self.checked = frozenset(names), executed, checked
        self.entries, self.covered, self.seen = [], set(), set()

    def visit(self, path, value):
        try:
            text = _text(value, self.names, 0)
        except Unpersistable as e:
            raise Unpersistable(f"{say(path)} holds {e}") from None
        self.entries.append([[list(s) for s in path], text])
        if id(value) in self.seen:
            return
        self.seen.add(id(value))
        for how, name, child in self.children(value):
            if child is not _MISSING:
                self.visit(path + [(how, name)], child)

    def children(self, value):
        """(how, name, value) of what the trace may have read through `value`."""
        kind = type(value)
        if kind is types.FunctionType:
            self.covered.update(_nested(value.__code__))
            if not self.executed.intersection(_nested(value.__code__)):
                return []
            found = [("wrapped", None, step(value, "wrapped"))] \
                if "__wrapped__" in vars(value) else []
            scope = value.__globals__
            found += [("global", n, scope[n]) for n in sorted(_names(value.__code__))
                      if n in scope and (id(scope), n) not in self.checked]
            cells = zip(value.__code__.co_freevars, value.__closure__ or ())
            found += [("closure", n, step(value, "closure", n)) for n, c in cells
                      if (id(c), n) not in self.checked]
            return found
        if kind in (types.MethodType, functools.partial, staticmethod, classmethod):
            return [("func", None, step(value, "func"))] + \
                ([("self", None, value.__self__)] if kind is types.MethodType else [])
        if kind is property:
            return [(a, None, getattr(value, a)) for a in ("fget", "fset", "fdel")
                    if getattr(value, a) is not None]
        if isinstance(value, (types.ModuleType, type)):
            if isinstance(value, type) and is_library(value.__module__):
                return []
            return [("attr", n, step(value, "attr", n)) for n in sorted(self.names)
                    if step(value, "attr", n) is not _MISSING]
        if kind in _SIMPLE or kind in (tuple, list, dict, set, frozenset, np.ndarray):
            return []
        wrapped = [("wrapped", None, step(value, "wrapped"))]  # a GradFunction's function
        if is_library(kind.__module__):
            return wrapped
        attrs = [("attr", n, v) for n, v in sorted(_vars(value).items()) if n in self.names]
        return [("type", None, kind)] + wrapped + attrs


def check(fun, manifest):
    """None if every path of the manifest shows the same text here; else the first place
    that differs, for the explain log."""
    names = frozenset(manifest["names"])
    for path, text in manifest["paths"]:
        value = resolve(fun, path)
        try:
            now = _MISSING if value is _MISSING else _text(value, names, 0)
        except Unpersistable as e:
            now = str(e)
        if now != text:
            return (f"{say(path)} is not what it was when the entry was written" if
                    value is not _MISSING else f"{say(path)} is gone")
    return None


def text_of(value):
    """_text of a value alone (an array handed over), for entry.py."""
    return _text(value, frozenset(), 0)


qualname, module_named = _qualname, _module
