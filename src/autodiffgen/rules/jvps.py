"""Forward mode's table: how each primitive's output tangent is computed from its
arguments' tangents, kept here by primitive as JAX keeps `primitive_jvps`.

A table entry is called as `jvp(prim, tangents, ans, args, params, loc)`, one tangent (or
None, a zero) per argument, and returns the output's tangent or None. The kinds below
say the usual cases shortest (rules/__init__ lists how defprimitive picks one); a
primitive whose tangents are best computed all at once (odeint's sensitivity solve) has a
plain function of that signature. Forward mode (backward/forward.py) broadcasts and
casts each tangent to its value's shape and dtype afterwards.
"""

import weakref

import numpy as np

from .vjps import missing_rule, vjp_rule

JVPS = weakref.WeakKeyDictionary()  # primitive -> jvp(prim, tangents, ans, args, params, loc)


class PerArgument:
    """One rule per argument, `jvp(t, ans, *args, **params)`; their parts are summed."""

    def __init__(self, rules=()):
        self.rules = tuple(rules)

    def rule(self, prim, i, tangents):
        return self.rules[i] if i < len(self.rules) else None

    def __call__(self, prim, tangents, ans, args, params, loc=None):
        parts = []
        for i, t in enumerate(tangents):
            if t is None:
                continue
            rule = self.rule(prim, i, tangents)
            if rule is None and prim.strict:
                raise missing_rule(prim, "JVP", i, loc)
            part = None if rule is None else rule(t, ans, *args, **params)
            if part is not None:
                parts.append(part)
        return _total(parts)


class FromVJP(PerArgument):
    """Elementwise primitives: the VJP `g * df/dx` is also the JVP `t * df/dx`."""

    def rule(self, prim, i, tangents):
        return vjp_rule(prim, i, sole=_alone(tangents, i))


class Multilinear:
    """Linear in each argument on its own (matmul, einsum): each tangent's part is the
    primitive with that argument replaced by its tangent."""

    def __call__(self, prim, tangents, ans, args, params, loc=None):
        return _total([prim(*args[:i], t, *args[i + 1:], **params)
                       for i, t in enumerate(tangents) if t is not None])


class Linear:
    """Jointly linear in the arguments `argnums` ("all": every one): the tangent is the
    primitive applied to their tangents (zeros where an argument has none)."""

    def __init__(self, argnums):
        self.argnums = argnums

    def __call__(self, prim, tangents, ans, args, params, loc=None):
        linear = range(len(args)) if self.argnums == "all" else self.argnums
        if all(tangents[i] is None for i in linear if i < len(tangents)):
            return None
        new = list(args)
        for i in linear:
            new[i] = tangents[i] if tangents[i] is not None else np.zeros_like(args[i])
        return prim(*new, **params)


_NO_RULES = PerArgument()


def defjvp(prim, *rules):
    """Set (or replace) the JVP rules of a primitive, one per argument."""
    JVPS[prim] = PerArgument(rules)


def jvp_kind(linear_in=None, jvp_from=None, jvps=()):
    """The table entry defprimitive's options describe (rules/__init__), or None."""
    if linear_in is not None:
        return Linear(linear_in)
    if jvp_from == "multilinear":
        return Multilinear()
    if jvp_from == "vjp":
        return FromVJP()
    return PerArgument(jvps) if jvps else None


def tangent(prim, tangents, ans, args, params, loc=None):
    """The output tangent given one tangent (or None) per argument; None if zero."""
    return JVPS.get(prim, _NO_RULES)(prim, tangents, ans, args, params, loc)


def _alone(tangents, i):
    """Only argument i has a tangent."""
    return all(t is None for j, t in enumerate(tangents) if j != i)


def _total(parts):
    if not parts:
        return None
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    return total
