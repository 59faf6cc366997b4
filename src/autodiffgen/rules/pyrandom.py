"""Python's own `random` module in a traced function: draws the generated code makes.

The module's functions (`random.random()`, `random.gauss(0, 1)`) are methods of its hidden
random.Random instance (`random._inst`); a user's `random.Random(seed)` has the same
methods. A draw that gives a number is recorded as a `pydraw` node, an effect as
rules/random.py's `draw` is (never folded, merged or dropped, run in the order traced), so
the generated code calls `random.random()` or `rng.uniform(a, b)` itself, from the same
object, on every call: a cached call takes from the stream what eager Python takes, and
draws anew. While a trace runs, draws come from private copies (rules/random.py's
`resolve`), so tracing (and retracing, and the checks generalize_batch.py runs) takes
nothing from the user's stream.

How a draw is reached, as for NumPy (numpy_api/random.py):
- the module's functions are swapped while a trace runs, for wrappers that record when
  that thread traces (Python's own function otherwise);
- a random.Random argument, or one read from a global or a closure, or a bound method read
  as a value (`from random import gauss`), is an input of the generated function, traced
  as a tracer.Handle whose methods record (capture.py reads it again at each call).

A parameter carrying a derivative (`random.gauss(mu, 0.1)` of a differentiated `mu`) is
written as the reparameterization Python's own code computes (`mu + z * sigma`, z =
random.gauss(0.0, 1.0)), checked bit for bit on copies at trace time; otherwise refused.

What the generated code cannot redo on each call is refused, naming the user's line:
Python control flow, an int() or a shape from a drawn number (numpy_api/random.py's guard
hook: re-checking would draw twice, and the cache may try several variants); a pick of
objects (random.choice of functions or arrays), a reordered or sampled list (shuffle,
sample, choices); seeding or reading the state inside the function.
"""

import copy
import functools
import inspect
import operator
import os
import random as pyrandom
import sys

import numpy as np

from ..errors import TracingError, UnsupportedOperationError, at, is_internal
from ..trace.boxes import HANDLE_METHODS, Box, Handle, carries_gradient
from ..trace.context import current_trace, located, user_loc
from ..trace.swaps import Swaps
from ..trace.tracer import TRACE_HOOKS
from .random import DRAWS, _identical, resolve
from .registry import defprimitive

# the methods whose draw is a number (choice: of a sequence of numbers)
NUMBER_DRAWS = tuple(name for name in (
    "random", "uniform", "triangular", "gauss", "normalvariate", "lognormvariate",
    "expovariate", "vonmisesvariate", "gammavariate", "betavariate", "paretovariate",
    "weibullvariate", "binomialvariate", "randint", "randrange", "getrandbits", "choice",
) if hasattr(pyrandom.Random, name))
_SIGNATURES = {name: inspect.signature(getattr(pyrandom.Random, name))
               for name in NUMBER_DRAWS if name != "getrandbits"}
_SIGNATURES["getrandbits"] = inspect.Signature([
    inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY),
    inspect.Parameter("k", inspect.Parameter.POSITIONAL_ONLY)])

_STATE = ("the generated code would not do it again on each call. Seed outside the "
          "function, or pass a random.Random(seed) made outside to it as an argument")
_ARRAYS = ("Draw with NumPy instead (x[rng.permutation(len(x))], rng.choice(a, size), with "
           "rng a np.random.Generator argument), or draw outside the function and pass the "
           "result to it as an argument")
REFUSED = {
    "seed": f"seeds Python's random generator: {_STATE}",
    "setstate": f"sets Python's random generator's state: {_STATE}",
    "getstate": f"reads Python's random generator's state: {_STATE}",
    "shuffle": "reorders a list when traced only: the generated code would keep the first "
               f"call's order on every call. {_ARRAYS}",
    "sample": "picks the items of a list when traced only: the generated code would keep "
              f"the first call's pick on every call. {_ARRAYS}",
    "choices": "picks the items of a list when traced only: the generated code would keep "
               f"the first call's pick on every call. {_ARRAYS}",
    "randbytes": "draws bytes, which the generated code would keep from the first call. "
                 "Draw outside the function and pass them to it as an argument",
}
_PICK = ("random.choice() of {what} picks which values or code the function uses: the "
         "generated code cannot redo that pick on each call (it keeps no branch per outcome). "
         "Pass the pick to the function as an argument, or pick with NumPy: stack the "
         "candidates and index them with an index drawn by rng.integers(n), or np.where")
_NUMBERS = (int, float)
_CHOOSABLE = (int, float, np.integer, np.floating, np.bool_)  # (bool is an int)
_STDLIB = os.path.dirname(os.__file__)
_MAX_CHOICES = 256


# ---- the primitive --------------------------------------------------------------------------
def _impl(*args, fn, module, keywords):
    rng = pyrandom._inst if module else args[0]
    values = args if module else args[1:]
    k = len(values) - len(keywords)
    return getattr(resolve(rng), fn)(*values[:k], **dict(zip(keywords, values[k:])))


def _template(params):
    """`random.random()`, `rng.gauss(mu, sigma=0.5)`: as the user's call passed them (the
    node's arguments: the generator unless `module`, then `count` values, the last ones
    passed by the names in `keywords`)."""
    first = 0 if params["module"] else 1
    keywords = params["keywords"]
    k = params["count"] - len(keywords)
    parts = [f"{{{first + i}}}" for i in range(k)]
    parts += [f"{name}={{{first + k + j}}}" for j, name in enumerate(keywords)]
    return f"{'random' if first == 0 else '{0}'}.{params['fn']}({', '.join(parts)})"


PYDRAW = defprimitive("pydraw", lambda *args, count, **params: _impl(*args, **params),
                      _template, effect=True)  # (emit imports random where it is used)
DRAWS.add(PYDRAW)


# ---- recording a draw -----------------------------------------------------------------------
def pydraw(handle, fn, args, kwargs):
    """Record `fn(*args, **kwargs)` drawn from the handle's random.Random (None: the random
    module's own) in the running trace; return the drawn number as a Box."""
    trace = current_trace()
    bound = _bind(fn, args, kwargs)
    if fn == "choice" and not _choice_of_numbers(bound):
        if trace.eager:  # the tape runs the user's Python as it is
            return getattr(resolve(_real(handle)), fn)(*args, **kwargs)
        raise UnsupportedOperationError(at(user_loc(), _PICK.format(
            what=_what(bound.arguments["seq"]))))
    values = {k: v for k, v in bound.arguments.items() if k != "self"}
    for value in values.values():
        if type(value) is Box and value.node.trace_id != trace.id:
            raise TracingError(at(user_loc(), f"random.{fn}() got a value traced by an "
                                  "enclosing transformation (through a closure); pass it as "
                                  "an argument"))
    wrt = [k for k, v in values.items() if type(v) is Box and carries_gradient(trace, v.node)]
    if wrt:
        return _reparameterized(handle, fn, values, wrt)
    return _record(trace, handle, fn, bound.args[1:], bound.kwargs)


def _record(trace, handle, fn, positional, keywords):
    """The draw, made now (from the private copy) and recorded as a node."""
    rng = () if handle is None else (handle,)
    operands = (*rng, *positional, *keywords.values())
    params = {"fn": fn, "module": handle is None, "keywords": tuple(keywords)}
    try:
        value = _impl(*(v.value if type(v) in (Box, Handle) else v for v in operands),
                      **params)
    except Exception as error:  # Python's own message, plus where the user wrote it
        relocated = located(error, f"in random.{fn}, called at")
        if relocated is error:
            raise
        raise relocated from error
    box = trace.box(PYDRAW, (*(h.node for h in rng), *operands[len(rng):]),
                    {**params, "count": len(operands) - len(rng)}, value)
    if type(value) in _NUMBERS:  # a Python number at run time too
        box.node.python_number = True
    trace.effects.append(box.node)
    return box


def _choice_of_numbers(bound):
    """Whether choice(seq) picks among numbers of one type (then written in the code as
    a tuple, which `bound` now holds)."""
    seq = _numbers(bound.arguments["seq"])
    if seq is not None:
        bound.arguments["seq"] = seq
    return seq is not None


def _real(handle):
    return pyrandom._inst if handle is None else handle.value


def _bind(fn, args, kwargs):
    try:
        return _SIGNATURES[fn].bind(None, *args, **kwargs)
    except TypeError as error:
        raise TypeError(at(user_loc(), f"random.{fn}(): {error}")) from None


def _numbers(seq):
    """`seq` as a tuple of numbers (written in the code), or None if it holds other things
    (functions, arrays, strings, traced values)."""
    if type(seq) is range and len(seq) <= _MAX_CHOICES:
        seq = tuple(seq)
    if type(seq) not in (list, tuple) or len(seq) > _MAX_CHOICES:
        return None
    if not seq:
        return ()  # Python's own IndexError, at the user's line
    kinds = {type(v) for v in seq}  # one (a result whose type differs between calls would
    return tuple(seq) if len(kinds) == 1 and Box not in kinds and isinstance(  # not do)
        seq[0], _CHOOSABLE) else None


def _what(seq):
    items = list(seq) if isinstance(seq, (list, tuple)) else [seq]
    kinds = ", ".join(sorted({type(v).__name__ for v in items}))
    if any(type(v) is Box for v in items):
        return "traced values (arrays or numbers the function computes)"
    if items and all(isinstance(v, _CHOOSABLE) for v in items):
        return (f"numbers of several types ({kinds}), whose result type would differ "
                "between calls (use numbers of one type),")
    if items and all(callable(v) for v in items):
        return "functions"
    return f"values of type {kinds}"


# ---- derivatives through a parameter: Python's own formula -------------------------------------
# fn -> (the parameter-free draw it is made of, with its arguments; how Python makes fn's
# number from it). Checked bit for bit on copies of the generator before it is used.
REPARAMETERIZED = {
    "uniform": ("random", (), lambda u, a, b: a + (b - a) * u),
    "gauss": ("gauss", (0.0, 1.0), lambda z, mu=0.0, sigma=1.0: mu + z * sigma),
    "normalvariate": ("normalvariate", (0.0, 1.0),
                      lambda z, mu=0.0, sigma=1.0: mu + z * sigma),
    "expovariate": ("expovariate", (1.0,), lambda e, lambd=1.0: e / lambd),
}


def _reparameterized(handle, fn, values, wrt):
    rule = REPARAMETERIZED.get(fn)
    if rule is None:
        raise TracingError(at(user_loc(), f"random.{fn}() has no derivative with respect to "
                              f"its parameter {wrt[0]!r}, which depends on a differentiated "
                              "argument. Wrap the parameter in autodiffgen.stop_gradient(...) "
                              "if no derivative should flow through the draw, or write the "
                              "draw as a differentiable function of a parameter-free one "
                              "(mu + sigma * random.gauss(0.0, 1.0))"))
    base, base_args, combine = rule
    plain = {k: v.value if type(v) is Box else v for k, v in values.items()}
    real = resolve(_real(handle))
    theirs = getattr(copy.deepcopy(real), fn)(**plain)
    mine = combine(getattr(copy.deepcopy(real), base)(*base_args), **plain)
    if not _identical(theirs, mine):
        raise TracingError(at(user_loc(), f"random.{fn}() with the parameter {wrt[0]!r} "
                              "depending on a differentiated argument: this Python does not "
                              f"compute it from random.{base}{base_args} as expected, so its "
                              "derivative is not known. Write the reparameterization "
                              "yourself, e.g. mu + sigma * random.gauss(0.0, 1.0)"))
    return combine(pydraw(handle, base, base_args, {}), **values)


# ---- how calls reach it ---------------------------------------------------------------------
def _method(fn):
    if fn in REFUSED:
        return lambda handle, *args, **kwargs: _refuse(fn, handle, args, kwargs)
    return lambda handle, *args, **kwargs: pydraw(handle, fn, args, kwargs)


def _refuse(fn, handle, args, kwargs):
    if current_trace().eager:  # the tape runs the user's Python as it is
        return getattr(resolve(_real(handle)), fn)(*args, **kwargs)
    raise UnsupportedOperationError(at(user_loc(), f"random.{fn}() in a traced function "
                                       f"{REFUSED[fn]}"))


for _fn in (*NUMBER_DRAWS, *REFUSED):
    if hasattr(pyrandom.Random, _fn):
        HANDLE_METHODS[(pyrandom.Random, _fn)] = _method(_fn)


def _wrapper(name, original):
    handler = _method(name)

    @functools.wraps(original)
    def intercepted(*args, **kwargs):
        if current_trace() is None:  # another thread, or no trace
            return original(*args, **kwargs)
        return handler(None, *args, **kwargs)
    return intercepted


_SWAPS = Swaps()
for _fn in (*NUMBER_DRAWS, *REFUSED):
    if hasattr(pyrandom, _fn):
        _SWAPS.add(pyrandom, _fn, _wrapper(_fn, getattr(pyrandom, _fn)))


# ---- a random.Random made inside the function ---------------------------------------------
# One seeded with a constant draws the same numbers on every call: the code keeps them, as
# any constant; so does one seeded with an int input (an argument, a global), read under a
# guard (another seed traces again). Unseeded (the OS's entropy) or seeded with another
# traced value, it would not: refused. (Random.__init__ seeds through Random.seed.)
_SEED = pyrandom.Random.seed
_UNSEEDED = ("random.Random() without a seed, made inside a traced function, draws from the "
             "operating system's entropy: the generated code would keep the first call's "
             "numbers. Make it outside and pass it to the function as an argument, or seed "
             "it with a constant")
_TRACED_SEED = ("random.Random(seed) with a seed the function computes (not an int): the "
                "generated code would keep the numbers drawn when traced. Make it outside and "
                "pass it to the function as an argument, or use np.random.default_rng(seed), "
                "which the code makes anew")


@functools.wraps(_SEED)
def _seed(self, a=None, version=2):
    trace = current_trace()
    if trace is not None and type(a) is Box and isinstance(a.value, int):
        a = operator.index(a)  # an int input: guarded (a drawn one is refused there)
    elif trace is not None and not trace.eager and (a is None or type(a) is Box):
        caller = _user_caller()
        if caller is not None:
            raise UnsupportedOperationError(at(caller, _UNSEEDED if a is None else
                                               _TRACED_SEED))
    return _SEED(self, a, version)


def _user_caller():
    """(file, line) of the user's code that seeds the generator; None if it is not the
    user's (copy.deepcopy's private copies, a library)."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename == pyrandom.__file__:
        frame = frame.f_back  # Random.__init__
    file = frame.f_code.co_filename if frame is not None else ""
    if not file or is_internal(file) or file.startswith(_STDLIB) or \
            "site-packages" in file or "dist-packages" in file:
        return None
    return file, frame.f_lineno


def _system_seed(self, *args, **kwargs):
    """random.SystemRandom() made inside: its numbers come from the OS, never the same."""
    trace = current_trace()
    caller = None if trace is None or trace.eager else _user_caller()
    if caller is not None:
        raise UnsupportedOperationError(at(caller, _SYSTEM))
    return _SYSTEM_SEED(self, *args, **kwargs)


_SYSTEM = ("random.SystemRandom() made inside a traced function draws from the operating "
           "system: the generated code would keep the first call's numbers. Draw outside the "
           "function and pass the numbers to it as an argument")
_SYSTEM_SEED = pyrandom.SystemRandom.seed
_SWAPS.add(pyrandom.Random, "seed", _seed)
_SWAPS.add(pyrandom.SystemRandom, "seed", _system_seed)


def _during_trace(trace):
    return _SWAPS.held()


TRACE_HOOKS.append(_during_trace)
