"""Functions as a trace sees them: clones that read their globals and closures through
the capture.

The user's function, and every function of the user's it reaches (a helper, a method, a
default's partial), runs as a clone: the same code object with a globals dict of its own
(`_Scope`, filled on first read with what the capture makes of each name) and closure
cells of its own, defaults read like globals, and builtins whose `import` and `type`
answer as the trace sees the user's modules and objects. Neither the user's globals nor
cells are touched: other threads may run the same code eagerly meanwhile.

Contract: a mixin of capture.Capture (`substitute`, `trace` and the tables `clones`,
`originals`, `cells`, `scopes`, `made_cells` are Capture's). Upstream: reads, proxies.
"""

import builtins
import types

from .proxies import Proxy
from .reads import Read

_MAX_CLONES = 512


class Clones:
    """Capture's half for functions: clones, their cells, defaults and builtins."""

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

