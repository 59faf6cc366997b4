"""Reverse mode's tables: what the backward pass (backward/reverse.py) knows of each
primitive, kept here by primitive as JAX keeps `primitive_transposes`, not on Primitive.

Most primitives have one rule per argument, `rule(g, ans, *args, **params)` (None: not
differentiable there). Four more kinds serve primitives that one rule per argument
serves badly:
- VARIADIC_VJPS: `rule(argnum, g, ans, *args, **params)`, for primitives of any number of
  arguments (einsum, getitem's index arrays, odeint's parameters);
- SOLE_VJPS: the rules when no derivative flows through the other arguments (they are
  constants for it): relu's np.maximum(x, 0) takes the mask g * (x > 0) there, where two
  traced arguments share the gradient at a tie;
- PIECES: `pieces(g, args, params) -> piece(i)`, argument i's cotangent, for primitives of
  many arguments (stack, concatenate), whose per-argument rule would be called with all
  of them each time (quadratic in the argument count);
- BLOCKS: `block(*args, **params) -> scatter_add's params` for argument 0's cotangent, for
  a read of part of an array (getitem), whose cotangents the backward sums without
  making each one array-sized (backward/cotangent_sums.py).

The tables hold primitives weakly: a user's primitive goes with its function.
"""

import weakref

from ..errors import UnsupportedOperationError, at
from ..trace.context import user_loc

VJPS = weakref.WeakKeyDictionary()  # primitive -> (rule of argument 0, of argument 1, ...)
VARIADIC_VJPS = weakref.WeakKeyDictionary()  # primitive -> rule(argnum, g, ans, *args)
SOLE_VJPS = weakref.WeakKeyDictionary()  # primitive -> rules when the others are constants
PIECES = weakref.WeakKeyDictionary()  # primitive -> pieces(g, args, params) -> piece(i)
BLOCKS = weakref.WeakKeyDictionary()  # primitive -> block(*args, **params)


def defvjp(prim, *rules):
    """Set (or replace) the VJP rules of a primitive, one per argument (replacing a
    variadic rule too, which would otherwise take precedence)."""
    VJPS[prim] = tuple(rules)
    VARIADIC_VJPS.pop(prim, None)


def vjp_rule(prim, argnum, sole=False):
    """The rule for one argument, or None if it is not differentiable there. `sole`: no
    derivative flows through the other arguments (see SOLE_VJPS)."""
    if sole:
        rules = SOLE_VJPS.get(prim, ())
        if argnum < len(rules):
            return rules[argnum]
    variadic = VARIADIC_VJPS.get(prim)
    if variadic is not None:
        return lambda g, ans, *args, **p: variadic(argnum, g, ans, *args, **p)
    rules = VJPS.get(prim, ())
    return rules[argnum] if argnum < len(rules) else None


def has_vjp(prim):
    """Some argument of prim has a VJP rule."""
    return prim in VARIADIC_VJPS or any(r is not None for r in VJPS.get(prim, ()))


def missing_rule(prim, kind, argnum, loc=None):
    """The error for a derivative asked through an argument of a primitive whose missing
    rule means "ask the user" (Primitive.strict), not zero."""
    return UnsupportedOperationError(at(
        loc or user_loc(), f"{prim.name} has no {kind} rule for argument {argnum}, and a derivative "
        f"was asked for through it; add one with autodiffgen.def{kind.lower()}({prim.name}, "
        "...) (one rule per argument)"))
