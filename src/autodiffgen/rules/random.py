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
are those the first call draws, and the extra traces generalize_batch.py runs, retraces and checks
draw nothing for real. The tape (`trace.eager`) draws from the real generators, as eager
NumPy does.

A draw has no derivative with respect to the generator. A distribution parameter that
carries a derivative (`rng.normal(mu, sigma)` with a differentiated `mu`) is written as its
reparameterization (`mu + sigma * rng.standard_normal(shape)`) when, checked on copies at
trace time, that gives bit for bit what NumPy draws; otherwise the trace is refused with
a message saying to write it. Python control flow on a drawn value (`if rng.random() <
p:`) is refused: re-checking it would need a second draw.

This module holds the draw primitives, the generators' method signatures, the private
streams and the reparameterization; how np.random's functions, Generator arguments and
np.random.default_rng inside the function reach `draw` is numpy_api/random.py. Python's
own random module (its functions, random.Random objects) draws the same way, through
pyrandom.py's `pydraw` primitive, with the same private streams.
"""

import contextlib
import copy
import operator
import random as pyrandom
import threading

import numpy as np

from ..errors import TracingError, at
from ..trace.boxes import Box, carries_gradient
from ..trace.context import current_trace, located, user_loc
from .registry import defprimitive

GENERATORS = (np.random.Generator, np.random.RandomState, pyrandom.Random)  # (rules/pyrandom.py)


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
    kept = [g for g in leaves if is_generator(g)] + [np.random.mtrand._rand, pyrandom._inst]
    states = [_state(g) for g in kept]
    try:
        yield
    finally:
        for g, state in zip(kept, states):
            if type(g) is np.random.Generator:
                g.bit_generator.state = state
            elif type(g) is np.random.RandomState:
                g.set_state(state)
            else:
                g.setstate(state)


def _state(g):
    if type(g) is np.random.Generator:
        return g.bit_generator.state
    return g.get_state() if type(g) is np.random.RandomState else g.getstate()


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
DRAWS = {DRAW}  # the primitives that draw (and rules/pyrandom.py's, Python's random module)
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
    bound = {k: v if k in dist else _static(v, fn) for k, v in bound.items()}
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


def _static(value, fn):
    """A size or other static argument as the Python value the generated code writes. An
    integer input there (an int argument, or one read from a closure or a global, as
    `rs.randn(num_samples, D)` reads D) is read under a guard, as range(k) reads it, so
    another value traces again; a computed traced value is refused."""
    if type(value) in (tuple, list):
        return type(value)(_static(v, fn) for v in value)
    if type(value) is not Box:
        return value
    if value.node.prim is None and isinstance(value.value, (int, np.integer)) and \
            not isinstance(value.value, (bool, np.bool_)):
        return operator.index(value)
    raise TracingError(at(user_loc(), f"{fn}() got a traced value as its size or another "
                          "static argument: the generated code writes these as numbers. "
                          "Use shapes (x.shape, len(x)), not computed values"))


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
