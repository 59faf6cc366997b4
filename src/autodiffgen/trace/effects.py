"""Python side effects of a traced function: what it writes outside itself.

The generated code repeats no Python statement, and the trace writes into what capture.py
made for it (a clone's globals, a proxy's attributes, a copy of a global list), so an
assignment to a global (`STEP += 1`), to an attribute of an object from outside
(`self.calls += 1`) or an append to a global list happens on no call at all, not even
the first. Where the function also reads what it writes, the next call would compute
from a value eager NumPy would have changed: refused, naming the line. Where it only
writes (a log, a cache of activations), a warning, once per function and place.
"""

import dis
import os
import warnings

from ..errors import TracingError, at, user_frame

_WARNED = set()
_ADVICE = ("the generated code repeats no Python side effects, so this happens on no call "
           "(not even the first). Do it outside the differentiated function (return the "
           "value and store it there)")


def attribute(label, name, was_read):
    """The function sets attribute `name` of an object from outside (`label`)."""
    frame = user_frame()
    loc = (frame.f_code.co_filename, frame.f_lineno) if frame else None
    if was_read:
        raise TracingError(at(loc, f"{frame.f_code.co_name if frame else 'the function'} "
                              f"sets {label}.{name}, which it also reads: the next call "
                              f"would read the value eager NumPy changed, and {_ADVICE}"))
    return loc, f"{frame.f_code.co_name if frame else 'the function'} sets {label}.{name}"


def check(fun, found, scopes, copies, cells):
    """After the trace: refuse a global or closure variable it reads and assigns, warn of
    the other writes (`found`: (loc, what) pairs already seen, attributes set)."""
    found = list(found)
    for cell, seen, name, code in cells:
        try:
            same = cell.cell_contents is seen
        except ValueError:  # deleted
            same = False
        if not same:
            found.append(_nonlocal(code, name))
    for scope in scopes:
        for name in scope.assigned():
            loc, who = _store_line(scope.code, name), scope.code[0].co_name
            if name in scope.seen:
                raise TracingError(at(loc, f"{who} assigns the global {name}, which it also "
                                      "reads: the next call would read the value eager "
                                      f"NumPy assigned, and {_ADVICE}"))
            found.append((loc, f"{who} assigns the global {name}"))
    for copy, original, label in copies:
        if _changed(copy, original):
            found.append((None, (f"{getattr(fun, '__name__', 'the function')} changes the "
                                f"global {type(original).__name__} {label}")))
    for loc, what in found:
        key = (getattr(fun, "__qualname__", repr(fun)), loc, what)
        if key in _WARNED:
            continue
        _WARNED.add(key)
        code = getattr(fun, "__code__", None)
        filename, line = loc or ((code.co_filename, code.co_firstlineno) if code
                                 else ("<unknown>", 0))
        warnings.warn_explicit(f"{os.path.basename(filename)}:{line}: {what}: {_ADVICE}",
                               UserWarning, filename, line)


def _nonlocal(code, name):
    """(loc, what) of an assigned closure variable, refused if the function whose closure
    holds it (`code`: a helper's too, not only the traced function) reads it first."""
    codes = [code] if code else []
    loc = _store_line(codes, name, "STORE_DEREF")
    reads = False  # read before it is first assigned: the value of an earlier call
    for c in _codes(codes):
        for i in dis.get_instructions(c):
            if i.argval == name and i.opname in ("LOAD_DEREF", "LOAD_CLASSDEREF"):
                reads = True
            if i.argval == name and i.opname in ("LOAD_DEREF", "LOAD_CLASSDEREF",
                                                  "STORE_DEREF"):
                break
    who = code.co_name if code else "the function"
    if reads:
        raise TracingError(at(loc or "?", f"{who} assigns the closure variable {name} "
                              "(nonlocal), which it also reads: the next call would read "
                              f"the value eager NumPy assigned, and {_ADVICE}"))
    return loc, f"{who} assigns the closure variable {name}"


def _codes(codes):
    stack, out = list(codes), []
    while stack:
        code = stack.pop(0)
        out.append(code)
        stack += [c for c in code.co_consts if hasattr(c, "co_code")]
    return out


def _changed(copy, original):
    if len(copy) != len(original):
        return True
    if isinstance(original, dict):
        return list(copy) != list(original) or any(copy[k] is not original[k] for k in copy)
    return any(a is not b for a, b in zip(copy, original))


def _store_line(codes, name, store="STORE_GLOBAL"):
    """(file, line) of the first assignment to `name` in these code objects."""
    for code in _codes(codes):
        starts = sorted(dis.findlinestarts(code))
        for instruction in dis.get_instructions(code):
            if instruction.opname == store and instruction.argval == name:
                lines = [line for offset, line in starts if offset <= instruction.offset]
                return code.co_filename, (lines[-1] if lines and lines[-1]
                                          else code.co_firstlineno)
    return None
