"""What a traced function reads besides its arguments: globals and closure variables.

Arrays and numbers that the function (or a Python function it calls) reads from a module
global or a closure become constants of the generated code. So that a cached function
never keeps using a value the user has since rebound, the generated code re-reads each
of them when it is called and raises GuardFailure if one is not the object (an array) or
the value (a number) it was traced with; the cache then traces again.
"""

import types
from dataclasses import dataclass

import numpy as np

_NUMBERS = (int, float, complex, bool, np.generic)
# generators too: rules/random.py refuses to trace code that draws from a captured one
_READ = (np.ndarray, np.random.Generator, np.random.RandomState)


@dataclass(frozen=True, eq=False)
class Captured:
    """One value a traced function read: `holder[name]` (a globals dict) or a closure
    cell (`holder.cell_contents`), and the value it had when traced."""

    kind: str  # "global" or "closure"
    holder: object
    name: str
    value: object
    where: str  # the file of the function that reads it, for messages

    def read(self):
        if self.kind == "global":
            return self.holder.get(self.name, _MISSING)
        try:
            return self.holder.cell_contents
        except ValueError:  # an empty cell
            return _MISSING


_MISSING = object()


def captured(fun, limit=64):
    """The arrays and numbers `fun` and the Python functions it reaches read from globals
    and closures, each once, in a deterministic order."""
    found, seen, queue = {}, set(), [fun]
    while queue and len(seen) < limit:
        fn = queue.pop(0)
        code = getattr(fn, "__code__", None)
        if code is None or id(fn) in seen:
            continue
        seen.add(id(fn))
        where = code.co_filename
        scope = getattr(fn, "__globals__", {})
        for name in _global_names(code):
            if name in scope:
                _take(found, queue, Captured("global", scope, name, scope[name], where))
        for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            _take(found, queue, Captured("closure", cell, name, value, where))
    return list(found.values())


def _take(found, queue, item):
    value = item.value
    if isinstance(value, (types.FunctionType, types.MethodType)):
        queue.append(value)
    elif type(value) in _READ or isinstance(value, _NUMBERS):
        found.setdefault((id(item.holder), item.name), item)


def _global_names(code):
    """Names a code object (and the functions and comprehensions nested in it) may read
    as globals."""
    names, stack = [], [code]
    while stack:
        c = stack.pop()
        names.extend(c.co_names)
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return list(dict.fromkeys(names))
