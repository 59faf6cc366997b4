"""The registry's core: Primitive, the table of primitives by name, and how rules are
registered (defprimitive, defvjp, defjvp, defbatch) and cotangents brought to their
value's shape (unbroadcast). The family modules import it; the package's __init__
imports them and re-exports this (see its docstring for the rules' conventions).
"""

import numpy as np

from ..errors import UnsupportedOperationError, at
from ..generated_helpers import HELPERS
from ..trace.tracer import (
    UFUNCS,
    bind,
    result_dtype,
    user_loc,
)

PRIMITIVES = {}
TRACEABLE_HELPERS = {}  # runtime helper name -> a version that records a primitive on Boxes
# "vjp", "jvp": the compiled transformations, which rules that differentiate a user's
# function at run time call (odeint's dynamics); transforms.py fills it in, so that the
# rules stage imports nothing of the compiler
TRANSFORMS = {}


class Primitive:
    """A named operation the tracer records and the emitter writes as one line."""

    def __init__(self, name, impl, template, defaults=None, vjps=(), simplify=None,
                 variadic_vjp=None, helper=None, jvps=(), jvp_from=None, linear_in=None,
                 strict=False, imports=(), builtin=False, effect=False, sole_vjps=()):
        self.name = name
        self.impl = impl
        self.template = template
        self.defaults = defaults or {}
        self.vjps = tuple(vjps)
        self.variadic_vjp = variadic_vjp
        # the rules when no derivative flows through the other arguments (they are
        # constants for it): relu's np.maximum(x, 0) takes the mask g * (x > 0) there,
        # where two traced arguments share the gradient at a tie
        self.sole_vjps = tuple(sole_vjps)
        self.simplify = simplify
        self.helper = helper  # name of a runtime helper the emitted code calls, if any
        self.jvps = tuple(jvps)
        self.jvp_from = jvp_from
        self.linear_in = linear_in
        self.strict = strict  # a missing rule is an error (user primitives), not a zero
        self.imports = tuple(imports)  # modules besides NumPy its template names
        # a step with an effect (a random draw advances its generator): never folded,
        # merged or dropped, and run in the order traced
        self.effect = effect
        # passes recognize primitives by `op`: a user's primitive named "exp" is not np.exp
        self.op = name if builtin else None
        # its rules hold for complex values (rules/complex.py refuses the others there)
        self.complex_ok = False
        # batch(ctx, *args, **params): the primitive applied to a batch of examples at
        # once, the batch on axis 0 of the batched arguments (batching.py; batched.py runs it)
        self.batch = None
        # pieces(g, args, params) -> piece(i), the rule for argument i: for primitives of
        # many arguments (stack, concatenate), whose per-argument rule would be called with
        # all of them each time (quadratic in the argument count); set by the rule's module
        self.pieces = None
        # block(*args, **params) -> scatter_add's params for argument 0's cotangent: for a
        # read of part of an array (getitem), whose cotangents backward.py sums without
        # making each one array-sized (cotangent_sums.py); set by the rule's module
        self.block = None

    def __call__(self, *args, **params):
        return bind(self, args, params)

    def vjp(self, argnum, sole=False):
        """The rule for one argument, or None if it is not differentiable there. `sole`:
        no derivative flows through the other arguments (see sole_vjps)."""
        if sole and argnum < len(self.sole_vjps):
            return self.sole_vjps[argnum]
        if self.variadic_vjp is not None:
            return lambda g, ans, *args, **p: self.variadic_vjp(argnum, g, ans, *args, **p)
        return self.vjps[argnum] if argnum < len(self.vjps) else None

    @property
    def has_jvp(self):
        return bool(self.jvps or self.jvp_from or self.linear_in is not None)

    def tangent(self, tangents, ans, args, params, loc=None):
        """The output tangent given one tangent (or None) per argument; None if zero."""
        if self.linear_in is not None:
            return self._linear_tangent(tangents, args, params)
        parts = []
        for i, t in enumerate(tangents):
            if t is None:
                continue
            if self.jvp_from == "multilinear":
                parts.append(self(*args[:i], t, *args[i + 1:], **params))
                continue
            rule = self.vjp(i, sole=bool(self.sole_vjps) and _alone(tangents, i)) \
                if self.jvp_from == "vjp" else (
                self.jvps[i] if i < len(self.jvps) else None)
            if rule is None and self.strict:
                raise missing_rule(self, "JVP", i, loc)
            part = None if rule is None else rule(t, ans, *args, **params)
            if part is not None:
                parts.append(part)
        return _total(parts)

    def _linear_tangent(self, tangents, args, params):
        linear = range(len(args)) if self.linear_in == "all" else self.linear_in
        if all(tangents[i] is None for i in linear if i < len(tangents)):
            return None
        new = list(args)
        for i in linear:
            new[i] = tangents[i] if tangents[i] is not None else np.zeros_like(args[i])
        return self(*new, **params)

    def __repr__(self):
        return f"<primitive {self.name}>"


def _alone(tangents, i):
    """Only argument i has a tangent."""
    return all(t is None for j, t in enumerate(tangents) if j != i)


def missing_rule(prim, kind, argnum, loc=None):
    return UnsupportedOperationError(at(
        loc or user_loc(), f"{prim.name} has no {kind} rule for argument {argnum}, and a derivative "
        f"was asked for through it; add one with autodiffgen.def{kind.lower()}({prim.name}, "
        "...) (one rule per argument)"))


def _total(parts):
    if not parts:
        return None
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    return total


def defprimitive(name, impl, template, defaults=None, vjps=(), **options):
    """Register a primitive. `template` is how the emitted code writes it (see module doc).

    Users add NumPy functions this way, e.g. a rule for np.cbrt:

        cbrt = defprimitive("cbrt", np.cbrt, "np.cbrt({0})",
                            vjps=[lambda g, ans, x: g / (3 * ans * ans)])
        register_ufunc(np.cbrt, cbrt)
    """
    if name in PRIMITIVES:
        raise ValueError(f"a primitive named {name!r} is already registered")
    prim = Primitive(name, impl, template, defaults, vjps, builtin=True, **options)
    PRIMITIVES[name] = prim
    return prim


def defvjp(prim, *rules):
    """Set (or replace) the VJP rules of a primitive, one per argument (replacing a
    variadic rule too, which would otherwise take precedence)."""
    prim.vjps = tuple(rules)
    prim.variadic_vjp = None


def defjvp(prim, *rules):
    """Set (or replace) the JVP rules of a primitive, one per argument."""
    prim.jvps = tuple(rules)
    prim.jvp_from = prim.linear_in = None


def defbatch(prim, rule):
    """Set (or replace) the batching rule of a primitive, `rule(ctx, *args, **params)`:
    the result for a batch of examples, computed with primitives on arguments whose batch
    is on axis 0 (those `ctx.batched` marks; the others are shared by every example);
    `ctx` also holds the batch `size` and the per-example `shape` of the result
    (rules/batching.py has the rules of the built-in primitives, family by family)."""
    prim.batch = rule


def register_helper(name, plain, traceable):
    """A runtime helper that generated code calls by `name`: `plain` is the pure-NumPy
    version a module copies in, `traceable` the one that records a primitive when an
    enclosing trace calls it on Boxes."""
    HELPERS[name] = plain
    TRACEABLE_HELPERS[name] = traceable


def elementwise_ufunc(prim):
    """prim applies a NumPy ufunc elementwise (not a generalized one such as matmul); None
    (an input) does not. Asked of most nodes by several passes: kept on the primitive,
    whose impl never changes."""
    if prim is None:
        return False
    try:
        return prim._elementwise
    except AttributeError:
        pass
    impl = prim.impl
    prim._elementwise = isinstance(impl, np.ufunc) and impl.signature is None
    return prim._elementwise


def register_ufunc(ufunc, prim):
    """A ufunc is its primitive: np.add(x, y) on traced values records `prim` with the same
    arguments (functions and methods, which need their arguments normalized, are
    registered in numpy_api/)."""
    UFUNCS[ufunc] = prim


def unbroadcast(g, target, dtype):
    """Bring a cotangent to the shape `target` and the dtype of the value it belongs to.

    The one place where broadcasting is undone: sum over the axes that broadcasting added
    or stretched, then reshape, then cast (gradients keep their input's dtype).
    """
    gshape = np.shape(g)
    if gshape != target:
        lead = len(gshape) - len(target)
        axes = tuple(range(max(lead, 0))) + tuple(
            lead + i for i, n in enumerate(target)
            if n == 1 and lead + i >= 0 and gshape[lead + i] != 1)
        if axes:
            g = np.sum(g, axis=axes[0] if len(axes) == 1 else axes, keepdims=lead == 0)
        if np.shape(g) != target:
            g = (np.reshape(g, target) if np.size(g) == int(np.prod(target))
                 else np.broadcast_to(g, target))
    return _cast(g, dtype)


def _cast(v, dtype):
    """v in `dtype`; a complex v for a real value is its real part (rules/complex.py)."""
    have = result_dtype(v)
    if have == dtype:
        return v
    if have.kind == "c" and np.dtype(dtype).kind != "c":
        v = bind(PRIMITIVES["real"], (v,), {})
    elif have.kind != "c" and np.dtype(dtype).kind == "c":
        v = v + 0j  # as complex: also where v is a Python float (a VJP's cotangent g)
    return v if result_dtype(v) == dtype else astype(v, dtype)


def astype(x, dtype):
    return bind(PRIMITIVES["astype"], (x,), {"dtype": np.dtype(dtype)})


def broadcast_up(t, shape, dtype):
    """Bring a tangent to the shape and dtype of the value it belongs to (forward mode)."""
    if np.shape(t) != shape:
        t = np.broadcast_to(t, shape)
    return _cast(t, dtype)
