"""Random draws: run-time steps of the generated code, from the generator the user's code uses.

A draw made while tracing is recorded as a `draw` node (an effect: never folded, merged
or dropped, and run in the order traced), so the generated code draws again on every call,
from the same generator the eager function would use, in the same sequence:

- np.random's module functions (`np.random.rand(32, 10)`) draw from NumPy's global
  RandomState. They never see a Box, so while a trace runs in some thread they are
  replaced by wrappers that record when *that thread* is tracing and call NumPy's own
  function otherwise (other threads are unaffected); the last trace to end puts the
  originals back, on every exit path. The code calls `np.random.rand(32, 10)` itself.
- a `np.random.Generator` or legacy `np.random.RandomState` argument (also inside a dict,
  list or tuple) is an input of the generated function, traced as a tracer.Handle whose
  methods record draws: the code calls `rng.random((32, 10))`. The cache keys it by type,
  so a new Generator object per call reuses the code.
- `np.random.default_rng(seed)` inside the function makes a generator in the code too.

Tracing never advances a user's generator: while a trace runs, draws come from private
copies of the generators (`private_streams`), taken when first used, so the traced values
are those the first call draws, and the extra traces poly.py runs, retraces and checks
draw nothing for real. The tape (`trace.eager`) draws from the real generators, as eager
NumPy does.

A draw has no derivative with respect to the generator. A distribution parameter that
carries a derivative (`rng.normal(mu, sigma)` with a differentiated `mu`) is written as its
reparameterization (`mu + sigma * rng.standard_normal(shape)`) when, checked on copies at
trace time, that gives bit for bit what NumPy draws; otherwise the trace is refused with
a message saying to write it. Python control flow on a drawn value (`if rng.random() <
p:`) is refused: re-checking it would need a second draw.

For the capture machinery (globals and closures read at call time): `input_handle(trace,
generator, name, path)` makes any Generator or RandomState an input of the recording,
exactly as an argument is; `is_generator(value)` says which values need it. Until a
captured generator is hooked in that way, a traced function that reads one from a global
or closure is refused with a message naming it.
"""

import contextlib
import copy
import functools
import threading
import types

import numpy as np

from ..errors import TracingError, UnsupportedOperationError, at
from ..graph import Node
from ..tracer import (
    GUARD_HOOKS,
    HANDLE_METHODS,
    INPUT_KINDS,
    TRACE_HOOKS,
    Box,
    Handle,
    carries_gradient,
    current_trace,
    located,
    user_loc,
)
from . import defprimitive

GENERATORS = (np.random.Generator, np.random.RandomState)


def is_generator(value):
    return type(value) in GENERATORS


# ---- the methods: name -> its parameters, "d" a distribution's (an array or a traced value,
# an argument of the node), "s" static (a parameter of the node, written as a literal)
def _spec(text):
    return tuple(tuple(item.split(":")) for item in text.split())


_LOC_SCALE = _spec("loc:d scale:d size:s")
_COMMON = {
    "normal": _LOC_SCALE, "laplace": _LOC_SCALE, "gumbel": _LOC_SCALE, "logistic": _LOC_SCALE,
    "uniform": _spec("low:d high:d size:s"), "exponential": _spec("scale:d size:s"),
    "lognormal": _spec("mean:d sigma:d size:s"), "binomial": _spec("n:d p:d size:s"),
    "poisson": _spec("lam:d size:s"), "geometric": _spec("p:d size:s"),
    "beta": _spec("a:d b:d size:s"), "gamma": _spec("shape:d scale:d size:s"),
    "chisquare": _spec("df:d size:s"), "standard_cauchy": _spec("size:s"),
    "multinomial": _spec("n:d pvals:d size:s"), "dirichlet": _spec("alpha:d size:s"),
}
GENERATOR_METHODS = {
    **_COMMON,
    "random": _spec("size:s dtype:s"), "standard_normal": _spec("size:s dtype:s"),
    "standard_exponential": _spec("size:s dtype:s method:s"),
    "standard_gamma": _spec("shape:d size:s dtype:s"),
    "integers": _spec("low:d high:d size:s dtype:s endpoint:s"),
    "choice": _spec("a:d size:s replace:s p:d axis:s shuffle:s"),
    "permutation": _spec("x:d axis:s"), "permuted": _spec("x:d axis:s"),
}
LEGACY_METHODS = {
    **_COMMON,
    "rand": "dims", "randn": "dims",  # rand(d0, d1, ...)
    "random": _spec("size:s"), "random_sample": _spec("size:s"),
    "standard_normal": _spec("size:s"), "standard_exponential": _spec("size:s"),
    "standard_gamma": _spec("shape:d size:s"), "randint": _spec("low:d high:d size:s dtype:s"),
    "choice": _spec("a:d size:s replace:s p:d"), "permutation": _spec("x:d"),
}
# np.random functions that change or read the global state rather than draw from it
_STATE = ("the generated code would not do it as the trace did. Seed outside the function, "
          "or create a generator inside it with np.random.default_rng(seed)")
_REFUSED = {
    "seed": f"seeds NumPy's global generator: {_STATE}",
    "set_state": f"sets NumPy's global generator's state: {_STATE}",
    "get_state": f"reads NumPy's global generator's state: {_STATE}",
    "shuffle": "shuffles an array in place: write x = x[np.random.permutation(len(x))]",
}


# ---- streams: which generator object a draw advances ----------------------------------------
_local = threading.local()


def resolve(rng):
    """The generator a draw uses: `rng` (None: np.random's global RandomState), or while
    a trace runs, that trace's private copy of it."""
    real = np.random.mtrand._rand if rng is None else rng
    streams = getattr(_local, "streams", None)
    if streams is None:
        return real
    entry = streams.get(id(real))
    if entry is None:  # the pair keeps `real` alive, so its id stays its own
        entry = streams[id(real)] = (real, copy.deepcopy(real))
    return entry[1]


@contextlib.contextmanager
def private_streams(eager=False):
    """Draws made inside come from copies of the generators (or, `eager`, the real ones).
    Nested in another trace, the copies start where the enclosing trace's copies are."""
    outer = getattr(_local, "streams", None)
    _local.streams = None if eager else {
        key: (real, copy.deepcopy(mine)) for key, (real, mine) in (outer or {}).items()}
    try:
        yield
    finally:
        _local.streams = outer


@contextlib.contextmanager
def states_kept(leaves):
    """The generators among `leaves`, and np.random's global one, are put back as they were
    after the block: running generated code to see which variant serves (f.source) must
    not draw for real."""
    kept = [g for g in leaves if is_generator(g)] + [np.random.mtrand._rand]
    states = [_state(g) for g in kept]
    try:
        yield
    finally:
        for g, state in zip(kept, states):
            if type(g) is np.random.Generator:
                g.bit_generator.state = state
            else:
                g.set_state(state)


def _state(g):
    return g.bit_generator.state if type(g) is np.random.Generator else g.get_state()


# ---- the primitives ---------------------------------------------------------------------------
def _draw_impl(*args, fn, api, state, dist, **static):
    rng = None if state else args[0]
    values = args if state else args[1:]
    dims = [static.pop(f"dim{i}") for i in range(sum(k.startswith("dim") for k in static))]
    kwargs = dict(zip(dist, values), **static)
    return getattr(resolve(rng), fn)(*dims, **kwargs)


def _draw_template(params):
    """`np.random.rand(32, 10)`, `rng.normal(mu, 0.1, size=(32, 10))`: positional while
    the call follows the method's own order, keywords after."""
    fn, state, dist = params["fn"], params["state"], params["dist"]
    parts = [f"{{dim{i}}}" for i in range(sum(k.startswith("dim") for k in params))]
    spec = (LEGACY_METHODS if params["api"] == "legacy" else GENERATOR_METHODS)[fn]
    positional, first = not parts, 0 if state else 1
    for name, kind in () if spec == "dims" else spec:
        if kind == "d" and name in dist:
            text = f"{{{first + dist.index(name)}}}"
        elif kind == "s" and name in params:
            text = f"{{{name}}}"
        else:
            positional = False
            continue
        parts.append(text if positional else f"{name}={text}")
    return f"{'np.random' if state else '{0}'}.{fn}({', '.join(parts)})"


DRAW = defprimitive("draw", _draw_impl, _draw_template, effect=True)
DEFAULT_RNG = np.random.default_rng
MAKE_RNG = defprimitive("default_rng", lambda *seed: DEFAULT_RNG(*seed),
                        lambda params: "np.random.default_rng({*})", effect=True)


# ---- recording a draw --------------------------------------------------------------------------
def draw(handle, fn, args, kwargs, api):
    """Record `fn(*args, **kwargs)` drawn from the handle's generator (None: np.random's
    global state) in the running trace, and return the drawn value as a Box."""
    trace = current_trace()
    spec = (LEGACY_METHODS if api == "legacy" else GENERATOR_METHODS)[fn]
    bound = _bind(fn, spec, args, kwargs)
    kinds = {"dim": "s"} if spec == "dims" else dict(spec)
    dist = {k: v for k, v in bound.items() if kinds.get(k, "s") == "d"}
    for value in dist.values():
        if type(value) is Box and value.node.trace_id != trace.id:
            raise TracingError(at(user_loc(), f"{fn}() got a value traced by an enclosing "
                                  "transformation (through a closure); pass it as an argument"))
    if any(type(v) is Box for k, v in bound.items() if k not in dist):
        raise TracingError(at(user_loc(), f"{fn}() got a traced value as its size or another "
                              "static argument: the generated code writes these as numbers. "
                              "Use shapes (x.shape, len(x)), not computed values"))
    if any(type(v) is Box and carries_gradient(trace, v.node) for v in dist.values()):
        return _reparameterized(trace, handle, fn, bound, dist, api)
    params = {"fn": fn, "api": api, "state": handle is None, "dist": tuple(dist),
              **{k: v for k, v in bound.items() if k not in dist}}
    rng = () if handle is None else (handle.node,)
    plain = [v.value if type(v) is Box else v for v in dist.values()]
    try:
        value = DRAW.impl(*(() if handle is None else (handle.value,)), *plain, **params)
    except Exception as error:  # NumPy's own message, plus where the user wrote it
        relocated = located(error, f"in {fn}, called at")
        if relocated is error:
            raise
        raise relocated from error
    box = trace.box(DRAW, rng + tuple(dist.values()), params, value)
    trace.effects.append(box.node)
    return box


def _bind(fn, spec, args, kwargs):
    if spec == "dims":
        if kwargs:
            raise TypeError(at(user_loc(), f"np.random.{fn}() takes no keyword arguments"))
        return {f"dim{i}": d for i, d in enumerate(args)}
    names = [name for name, _ in spec]
    if len(args) > len(names):
        raise TypeError(at(user_loc(), f"{fn}() takes at most {len(names)} arguments"))
    bound = dict(zip(names, args))
    for key, value in kwargs.items():
        if key == "out":
            raise TracingError(at(user_loc(), f"{fn}(..., out=...) in a traced function: "
                                  "assign the result instead"))
        if key not in names or key in bound:
            raise TypeError(at(user_loc(), f"{fn}() got an unexpected or repeated "
                               f"argument {key!r}"))
        bound[key] = value
    return bound


# ---- derivatives through a parameter: the reparameterization --------------------------------------
# fn -> (the parameters it is differentiable in, the parameter-free draw it is made of as
# (method, its arguments) given fn's arguments and the drawn shape, how that draw's numbers
# become fn's). For the generator API the uniform draw is `random`, for the legacy one
# `random_sample`. A permutation or choice of a traced array is one of its indices.
def _noise(fn):
    return lambda bound, size: (fn, {"size": size})


def _indices(name, *passed):
    def made(bound, size):
        return name, {**{k: bound[k] for k in passed if k in bound}, "a" if name == "choice"
                      else "x": len(bound["a" if name == "choice" else "x"])}
    return made


REPARAMETERIZED = {
    "normal": (("loc", "scale"), _noise("standard_normal"),
               lambda z, loc=0.0, scale=1.0, size=None: loc + scale * z),
    "uniform": (("low", "high"), _noise("random"),
                lambda u, low=0.0, high=1.0, size=None: low + (high - low) * u),
    "exponential": (("scale",), _noise("standard_exponential"),
                    lambda e, scale=1.0, size=None: scale * e),
    "lognormal": (("mean", "sigma"), _noise("standard_normal"),
                  lambda z, mean=0.0, sigma=1.0, size=None: np.exp(mean + sigma * z)),
    "permutation": (("x",), _indices("permutation"), lambda i, x: x[i]),
    "choice": (("a",), _indices("choice", "size", "replace", "p"), lambda i, a, **_: a[i]),
}


def _reparameterized(trace, handle, fn, bound, dist, api):
    """fn's draw as its parameter-free draw and differentiable arithmetic, if that gives
    NumPy's numbers bit for bit (checked now, on copies of the generator)."""
    wrt = [k for k, v in dist.items() if type(v) is Box and carries_gradient(trace, v.node)]
    rule = REPARAMETERIZED.get(fn)
    if rule is None or not set(wrt) <= set(rule[0]) or set(bound) - set(rule[0]) - {
            "size", "replace", "p"}:
        raise TracingError(at(user_loc(), f"{fn}() has no derivative with respect to its "
                              f"parameter {wrt[0]!r}, which depends on a differentiated "
                              "argument. Wrap the parameter in autodiffgen.stop_gradient(...) "
                              "if no derivative should flow through the draw, or write the "
                              "draw as a differentiable function of a parameter-free one"))
    _, made_of, combine = rule
    size = bound.get("size")
    if size is None:
        size = np.broadcast_shapes(*(np.shape(v) for v in dist.values()))
    base, base_args = made_of(bound, size)
    if base == "random" and api == "legacy":
        base = "random_sample"
    plain = {k: v.value if type(v) is Box else v for k, v in bound.items()}
    real = resolve(None if handle is None else handle.value)
    theirs = getattr(copy.deepcopy(real), fn)(**plain)
    mine = combine(getattr(copy.deepcopy(real), base)(**base_args), **plain)
    if not _identical(theirs, mine):
        raise TracingError(at(user_loc(), f"{fn}() with the parameter {wrt[0]!r} depending on "
                              f"a differentiated argument: {fn} is not {base} transformed "
                              "bit for bit by this NumPy, so its derivative is not known. "
                              "Write the reparameterization yourself, e.g. "
                              "mu + sigma * rng.standard_normal(size)"))
    noise = draw(handle, base, (), base_args, api)
    return combine(noise, **bound)


def _identical(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


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
_patch_lock = threading.Lock()
_tracing = [0]  # how many traces (in any thread) are running


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


_WRAPPERS = {name: _wrapper(name, fn) for name, fn in _ORIGINALS.items()}


@contextlib.contextmanager
def intercepting():
    """np.random's functions record while any trace runs (see _wrapper); restored after."""
    with _patch_lock:
        if _tracing[0] == 0:
            for name, fn in _WRAPPERS.items():
                setattr(np.random, name, fn)
        _tracing[0] += 1
    try:
        yield
    finally:
        with _patch_lock:
            _tracing[0] -= 1
            if _tracing[0] == 0:
                for name, fn in _ORIGINALS.items():
                    setattr(np.random, name, fn)


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
        names += c.co_names
        stack += [k for k in c.co_consts if isinstance(k, types.CodeType)]
    found = [(n, fun.__globals__.get(n)) for n in names]
    found += [(n, c.cell_contents) for n, c in zip(code.co_freevars, fun.__closure__ or ())
              if c.cell_contents is not None]
    for name, value in found:
        if is_generator(value):
            raise TracingError(f"{code.co_filename}: the traced function reads the random "
                               f"generator {name!r} from a global or closure variable; a "
                               "standalone module would draw from it once, when generated. "
                               "Pass the generator to the function as an argument")


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
        if node.prim is DRAW:
            raise TracingError(at(user_loc(), "Python control flow (if, float(), int(), "
                                  ".item()) on a randomly drawn value: the generated code "
                                  "cannot re-check it without drawing again. Decide with "
                                  "array operations instead (np.where(u < p, a, b))"))
        if node.prim is not None:
            stack.extend(node.args)


GUARD_HOOKS.append(_no_guard_on_draws)
