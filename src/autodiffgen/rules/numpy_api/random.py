"""How np.random reaches the draw primitive (rules/random.py, whose docstring has the design).

- np.random's module functions (`np.random.rand(32, 10)`) never see a Box, so while a
  trace runs in some thread they are replaced by wrappers that record when *that thread*
  is tracing and call NumPy's own function otherwise; the last trace to end puts the
  originals back. Functions that seed or read the global state are refused.
- a Generator or RandomState argument is an input of the generated function, traced as a
  tracer.Handle whose methods record draws.
- `np.random.default_rng(seed)` inside the function makes a generator in the code too.
Python control flow on a drawn value is refused: re-checking it would need a second draw.

For the capture machinery (globals and closures read at call time): `input_handle(trace,
generator, name, path)` makes any Generator or RandomState an input of the recording,
exactly as an argument is; `is_generator(value)` (rules/random.py) says which values need
it. Until a captured generator is hooked in that way, a traced function that reads one
from a global or closure is refused with a message naming it.
"""

import contextlib
import dis
import functools
import random as pyrandom
import types

import numpy as np

from ...errors import TracingError, UnsupportedOperationError, at
from ...graph import Node
from ...trace.boxes import HANDLE_METHODS, Box, Handle
from ...trace.context import current_trace, user_loc
from ...trace.recording import GUARD_HOOKS, INPUT_KINDS
from ...trace.swaps import Swaps
from ...trace.tracer import TRACE_HOOKS
from ..random import (
    DEFAULT_RNG,
    DRAWS,
    GENERATOR_METHODS,
    GENERATORS,
    LEGACY_METHODS,
    MAKE_RNG,
    draw,
    is_generator,
    private_streams,
)

# np.random functions that change or read the global state rather than draw from it
_STATE = ("the generated code would not do it as the trace did. Seed outside the function, "
          "or create a generator inside it with np.random.default_rng(seed)")
_REFUSED = {
    "seed": f"seeds NumPy's global generator: {_STATE}",
    "set_state": f"sets NumPy's global generator's state: {_STATE}",
    "get_state": f"reads NumPy's global generator's state: {_STATE}",
    "shuffle": "shuffles an array in place: write x = x[np.random.permutation(len(x))]",
}


# ---- generators as inputs, and made inside ---------------------------------------------------------
def input_handle(trace, generator, name, path):
    """`generator` as an input of the recording at `path` of the arguments: the generated
    function takes it there and calls its methods. (The capture machinery can call this
    for a generator read from a global or a closure that it passes in as an input.)"""
    node = trace.new_node(None, (), {"path": path}, np.empty((), object),
                          stack=())
    node.name = name
    handle = Handle(generator, node)
    trace.boxes[node] = handle
    trace.inputs.append(node)
    return handle


for _kind in GENERATORS:
    INPUT_KINDS[_kind] = input_handle


def _method(fn, api):
    return lambda handle, *args, **kwargs: draw(handle, fn, args, kwargs, api)


for _fn in GENERATOR_METHODS:
    HANDLE_METHODS[(np.random.Generator, _fn)] = _method(_fn, "generator")
for _fn in LEGACY_METHODS:
    HANDLE_METHODS[(np.random.RandomState, _fn)] = _method(_fn, "legacy")


def _default_rng(*seed):
    """A generator made inside the function. A seed that is a traced Python int (an int
    argument, or a global or closure int read as an input) is an input of the node, so
    the code makes `np.random.default_rng(seed)` from the seed of each call, no retrace."""
    trace = current_trace()
    if len(seed) > 1 or not all(s is None or _int_seed(s) for s in seed):
        raise TracingError(at(user_loc(), "np.random.default_rng(seed) in a traced function "
                              "takes one seed, an int (or None): a Python int, which may be "
                              "an argument or a global"))
    plain = [s.value if type(s) is Box else s for s in seed]
    if trace.eager:
        return DEFAULT_RNG(*plain)
    args = tuple(s.node if type(s) is Box else s for s in seed)
    node = trace.new_node(MAKE_RNG, args, {}, np.empty((), object))
    handle = Handle(DEFAULT_RNG(*plain), node)
    trace.boxes[node] = handle
    return handle


def _int_seed(seed):
    """An int, or the trace of a Python int (not of an array or a float)."""
    if type(seed) is Box:
        return type(seed.value) is int and seed.node.trace_id == current_trace().id
    return isinstance(seed, (int, np.integer))


# ---- np.random's module functions, intercepted while some thread traces ------------------------------
_ORIGINALS = {name: getattr(np.random, name) for name in
              [*LEGACY_METHODS, *_REFUSED, "default_rng"] if hasattr(np.random, name)}
_SWAPS = Swaps()


def _wrapper(name, original):
    @functools.wraps(original)
    def intercepted(*args, **kwargs):
        trace = current_trace()
        if trace is None or trace.eager and name not in (*LEGACY_METHODS, "default_rng"):
            return original(*args, **kwargs)  # another thread, or the tape
        if name in _REFUSED:
            raise UnsupportedOperationError(at(user_loc(), f"np.random.{name}() in a traced "
                                               f"function {_REFUSED[name]}"))
        if name == "default_rng":
            return _default_rng(*args, *kwargs.values())
        return draw(None, name, args, kwargs, "legacy")
    return intercepted


for _name, _fn in _ORIGINALS.items():
    _SWAPS.add(np.random, _name, _wrapper(_name, _fn))


def intercepting():
    """np.random's functions record while any trace runs (see _wrapper); restored after."""
    return _SWAPS.held()


@contextlib.contextmanager
def _during_trace(trace):
    if not trace.eager:
        _refuse_captured(trace)
    with private_streams(eager=trace.eager), intercepting():
        yield


def _refuse_captured(trace):
    """Without capture.py's clones (a standalone module keeps what it reads as constants),
    a generator read from a global or closure would draw once, when traced: refused."""
    fun = trace.fun
    if trace.capture is not None or not isinstance(fun, types.FunctionType):
        return
    code, names = fun.__code__, []
    stack = [code]
    while stack:
        c = stack.pop()
        names += [i.argval for i in dis.get_instructions(c)  # not an attribute's name
                  if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")]
        stack += [k for k in c.co_consts if isinstance(k, types.CodeType)]
    found = [(n, fun.__globals__.get(n)) for n in names]
    found += [(n, c.cell_contents) for n, c in zip(code.co_freevars, fun.__closure__ or ())
              if c.cell_contents is not None]
    for name, value in found:
        owner = getattr(value, "__self__", None)  # `from random import gauss`: a method
        if is_generator(value) or is_generator(owner):
            raise TracingError(at(_line_reading(code, name), "the traced function reads the "
                                  f"random generator {name!r} from a global or closure "
                                  "variable; a standalone module would draw from it once, "
                                  f"when generated. {_instead(owner)}"))


def _instead(owner):
    if owner is np.random.mtrand._rand or owner is pyrandom._inst:
        module = "np.random" if owner is np.random.mtrand._rand else "random"
        return f"Call it as {module}.<function>(...) instead"
    return "Pass the generator to the function as an argument"


def _line_reading(code, name):
    """(file, line) of the first place `code` (or a function inside it) reads `name`."""
    for c in [code, *(k for k in code.co_consts if isinstance(k, types.CodeType))]:
        lines = {offset: line for start, end, line in c.co_lines()
                 for offset in range(start, end, 2)}
        for instruction in dis.get_instructions(c):
            if instruction.argval == name and instruction.opname.startswith("LOAD") and \
                    lines.get(instruction.offset):
                return c.co_filename, lines[instruction.offset]
    return code.co_filename, code.co_firstlineno


TRACE_HOOKS.append(_during_trace)


def _no_guard_on_draws(trace, box):
    """A guard on a drawn value would need the generated code to draw twice to check it."""
    if trace.eager or not trace.effects:
        return
    seen, stack = set(), [box.node]
    while stack:
        node = stack.pop()
        if node in seen or type(node) is not Node:
            continue
        seen.add(node)
        if node.prim in DRAWS:
            raise TracingError(at(user_loc(), "Python control flow (if, float(), int(), "
                                  ".item()) or a shape (range(k), np.zeros(k)) on a randomly "
                                  "drawn value: the generated code cannot re-check it "
                                  "without drawing again. Decide with array operations "
                                  "instead (np.where(u < p, a, b), np.maximum(u, c) for "
                                  "max(u, c)), or draw the number "
                                  "outside the function and pass it as an argument"))
        if node.prim is not None:
            stack.extend(node.args)


GUARD_HOOKS.append(_no_guard_on_draws)
