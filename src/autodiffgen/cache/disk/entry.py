"""One function's entries in the disk store: a stored entry from a trace, and a trace's
code from a stored entry. The glue between the in-memory cache (cache/entries.py), the key
(key.py), the signed file format (store.py) and what a trace read (trace/executed.py, reads.py).

`OnDisk` is a function's side of the store: its fingerprint, computed once; each
signature's disk key; the recording a disk-cached trace runs under; the variants stored
under each key (a signature's later variants join what is there).

`to_variant` describes what a generated module receives from the process that loads it
(`split`: a module's globals dict by the module's name, a closure cell of the traced
function by its variable, an array that is such a variable's value by the variable and a
hash of its content) and what its trace read (reads.manifest). `usable` keeps the
stored variants whose manifest still holds (reads.check) and whose handovers and
imports resolve here (`restore`), and compiles them. Whatever is not stored or not used
says why in the explain log (retrace.disk); a cache costs a trace, never a failure.
"""

import contextlib
import sys
import types

import numpy as np

from ...errors import function_name
from ...trace.executed import Recorder
from .. import retrace
from ..guarded import can_refuse
from . import reads, store
from .key import entry_key, fingerprint
from .reads import MISSING, Unpersistable, module_named, qualname, text_of


class OnDisk:
    """The disk side of one differentiated function; `extra`: what its code depends on
    besides the function and the signature (the decorator's kind and argnums)."""

    def __init__(self, fun, extra):
        self.fun, self.extra = fun, extra
        self.fingerprint = None  # of the function's code: computed on the first disk key
        self.persisted = {}  # disk key -> the variants stored under it

    def key(self, signature_key, traced):
        """The signature's disk key, or None: the store is off, the arguments are an
        enclosing trace's values, or the signature has no text that is the same in every
        process (the explain log says which)."""
        if not store.enabled():
            return None
        name = function_name(self.fun)
        if traced:
            return retrace.disk(name, "not stored: called on an enclosing trace's values "
                                "(its code lives in that trace's)")
        if self.fingerprint is None:
            self.fingerprint = fingerprint(self.fun)
        disk_key = entry_key(self.fingerprint, signature_key, self.extra)
        if disk_key is None and _local_class(signature_key) is not None:
            retrace.disk(name, f"not stored: an argument is a pytree of "
                         f"{_local_class(signature_key).__qualname__}, a class defined inside "
                         "a function, which another process cannot find by its name")
        elif disk_key is None:
            retrace.disk(name, "not stored: an argument outside argnums has no text that is "
                         "the same in every process (its repr is an address)")
        return disk_key

    def recording(self, disk_key):
        """The context a trace for `disk_key` runs in: a Recorder of the code it runs."""
        return Recorder() if disk_key else contextlib.nullcontext()

    def save(self, disk_key, recorder, built):
        """Store a trace's code (a pipeline.Compiled) with what it read, or say why not."""
        variant = to_variant(self.fun, recorder, built)
        if variant is not None:
            done = self.persisted.setdefault(disk_key, [])
            done.append(variant)
            store.store(disk_key, done)

    def load(self, disk_key, load):
        """[(variant, compiled function)] of what an earlier process stored under
        `disk_key` that fits this one (`load` compiles a variant's source)."""
        found = usable(self.fun, store.load(disk_key), load)
        if found:
            self.persisted[disk_key] = [v for v, _ in found]
        return found


def _local_class(key):
    """A class defined inside a function in a signature key (a pytree's type), or None."""
    if isinstance(key, type):
        return key if "<locals>" in key.__qualname__ and not hasattr(key, "_fields") \
            else None  # a namedtuple's key holds its fields instead
    if type(key) is tuple:
        return next((c for c in map(_local_class, key) if c is not None), None)
    return None


class Miss(Exception):
    """A stored entry that does not fit this process; the message says why."""


class _Opaque(Unpersistable):
    """An object the generated code holds that no other process can find."""


def to_variant(fun, recorder, built):
    """The store.Variant of a trace's code (a pipeline.Compiled), or None with the reason
    in the explain log."""
    source, namespace, graph, locs = built.source, built.namespace, built.graph, built.locs
    try:
        checked = _checked(graph)
        if recorder.refused:
            raise Unpersistable(recorder.refused)
        try:
            arrays, handovers = split(namespace, fun)
        except _Opaque:  # what the trace ran may say better why (a helper made by exec)
            reads.manifest(fun, recorder.codes, checked)
            raise
        deps = reads.manifest(fun, recorder.codes, checked)
    except Unpersistable as e:
        return retrace.disk(function_name(fun), f"not stored: {e}")
    except Exception as e:  # noqa: BLE001  a cache costs a trace, never a failure
        return retrace.disk(function_name(fun), f"not stored: {e!r}")
    return store.Variant(source, arrays, graph.name, locs, handovers, deps, can_refuse(graph))


def _checked(graph):
    """(id(holder), name) of the globals and closure variables the generated code reads
    again or checks whole (capture.py), which the manifest need not describe."""
    reads = [n.params["read"] for n in graph.inputs if n.params.get("read") is not None]
    reads += [c.read for c in graph.captured]
    found = set()
    for read in reads:
        if len(read.chain) != 1:
            continue  # config.scale: only that attribute is read again, not all of config
        kind, key = read.chain[0]
        if kind == "item" or key == "cell_contents":
            found.add((id(read.holder), key if kind == "item" else read.var))
    return found


def usable(fun, stored, load):
    """[(variant, compiled function)] of the `stored` variants that fit this process
    (`load` compiles one: the decorator's _load)."""
    name, found = function_name(fun), []
    if not stored:
        retrace.disk(name, "no stored entry for this signature")
        return found
    for v in stored:
        try:
            if v.deps is None:
                raise Miss("the entry does not say what its trace read")
            why = reads.check(fun, v.deps)
            if why:
                raise Miss(why)
            namespace = {**v.arrays, **restore(v.handovers or {}, fun)}
            found.append((v, load(v.source, namespace, v.name, v.locs)))
        except ImportError as e:
            retrace.disk(name, f"stored code not used: it imports {e.name or e}, which is "
                         "missing here")
        except Miss as e:
            retrace.disk(name, f"stored code not used: {e}")
        except Exception as e:  # noqa: BLE001  a cache costs a trace, never a failure
            retrace.disk(name, f"stored code not used: {e!r}")
    return found


def split(namespace, fun):
    """(arrays, handovers) of a generated module's injected namespace: plain arrays go to
    disk as they are; a module's globals dict (which the code re-reads values from) as the
    module's name, a closure cell of the traced function `fun` as its variable's name, and
    an array that is the value of such a global or cell (which the code compares by
    identity) as that variable, with a hash of its content. Anything else: Unpersistable."""
    arrays, handovers, modules = {}, {}, []
    cells = list(zip(getattr(fun, "__closure__", None) or (),
                     getattr(getattr(fun, "__code__", None), "co_freevars", ())))
    for name, value in namespace.items():
        module = _module_of(value)
        if module is not None:
            handovers[name] = ["module", module.__name__, getattr(module, "__file__", None)]
            modules.append(module)
        elif type(value) is types.ModuleType and sys.modules.get(value.__name__) is value:
            # a module the code reads attributes of (`import helpers` in the body)
            handovers[name] = ["module_object", value.__name__,
                               getattr(value, "__file__", None)]
        elif type(value) is types.CellType and any(c is value for c, _ in cells):
            handovers[name] = ["cell", None, next(n for c, n in cells if c is value)]
    for name, value in namespace.items():
        if name in handovers:
            continue
        if type(value) is np.ndarray and not value.dtype.hasobject:
            held = next(([m.__name__, getattr(m, "__file__", None), n] for m in modules
                         for n, x in vars(m).items() if x is value), None)
            held = held or next((["cell_value", None, n] for c, n in cells
                                 if _contents(c) is value), None)
            if held is None:
                arrays[name] = value
            else:
                kind, *where = held
                handovers[name] = [kind if kind == "cell_value" else "global", *where,
                                   text_of(value)]
        elif _importable(value):  # a helper function or class a guard compares against
            module = sys.modules[value.__module__]
            handovers[name] = ["object", module.__name__, getattr(module, "__file__", None),
                               value.__qualname__]
        elif type(value) is types.CellType:
            raise Unpersistable(f"the generated code re-reads a closure variable ({name}) of "
                                "a function other than the traced one, which another process "
                                "cannot find")
        elif type(value) is dict and "__name__" in value:
            raise Unpersistable(f"the generated code re-reads the globals of "
                                f"{value['__name__']!r}, which is not an importable module")
        else:
            raise _Opaque(f"the generated code holds {qualname(value)} ({name}), "
                          "which would have to be pickled")
    return arrays, handovers


def _importable(value):
    """Whether `value` (a function or class) is what its module's name and qualified name
    lead to, so another process finds it by them."""
    module = sys.modules.get(getattr(value, "__module__", None) or "")
    qual = getattr(value, "__qualname__", None)
    if module is None or type(qual) is not str or "<" in qual:
        return False
    return _walk(module, qual) is value


def _walk(module, qual):
    value = module
    for part in qual.split("."):
        value = getattr(value, part, MISSING)
    return value


def _module_of(value):
    """The module whose globals dict `value` is, if it is one another process can import."""
    if type(value) is not dict or not isinstance(value.get("__name__"), str):
        return None
    module = sys.modules.get(value["__name__"])
    return module if getattr(module, "__dict__", None) is value else None


def _contents(cell):
    try:
        return cell.cell_contents
    except ValueError:
        return None


def restore(handovers, fun):
    """The namespace entries `split` described, found in this process (`fun` is the traced
    function); Miss if one is not what it was."""
    found = {}
    cells = dict(zip(getattr(getattr(fun, "__code__", None), "co_freevars", ()),
                     getattr(fun, "__closure__", None) or ()))
    for name, (kind, module_name, where, *rest) in handovers.items():
        if kind in ("cell", "cell_value"):  # where: the closure variable
            found[name] = _cell(cells, kind, where, rest)
            continue
        file = where  # of the module: a __main__ must be the same script
        module = module_named(module_name)
        if module is MISSING:
            raise Miss(f"the module {module_name!r} cannot be imported here")
        if module_name == "__main__" and getattr(module, "__file__", None) != file:
            raise Miss(f"the entry was written by another script ({file})")
        if kind == "module":
            found[name] = vars(module)
            continue
        if kind == "module_object":
            found[name] = module
            continue
        if kind == "object":
            found[name] = _walk(module, rest[0])
            if found[name] is MISSING:
                raise Miss(f"{module_name}.{rest[0]} is not there any more")
            continue
        var, text = rest
        value = vars(module).get(var)
        if type(value) is not np.ndarray or text_of(value) != text:
            raise Miss(f"the global {var} of {module_name} is not what it was when the "
                       "entry was written")
        found[name] = value
    return found


def _cell(cells, kind, variable, rest):
    cell = cells.get(variable)
    if cell is None:
        raise Miss(f"the traced function has no closure variable {variable} any more")
    if kind == "cell":
        return cell
    value = _contents(cell)
    if type(value) is not np.ndarray or text_of(value) != rest[0]:
        raise Miss(f"the closure variable {variable} is not what it was when the entry was "
                   "written")
    return value
