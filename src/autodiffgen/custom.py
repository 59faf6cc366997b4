"""Your own primitives: a function autodiffgen should not trace into, with your rules.

    @autodiffgen.primitive
    def softplus(x):                       # e.g. a numerically careful formula
        return np.logaddexp(0.0, x)

    autodiffgen.defvjp(softplus, lambda g, ans, x: g / (1.0 + np.exp(-x)))
    autodiffgen.defjvp(softplus, lambda t, ans, x: t / (1.0 + np.exp(-x)))

The generated code calls `softplus` itself (a standalone module imports it from its
module). Rules are written with NumPy operations like the built-in ones, so they are
traced into the generated backward too. Asking for a derivative whose rule is missing
raises an error naming the primitive and the argument, never a silent zero.
"""

import functools
from collections.abc import Callable
from typing import Any

from . import rules as registry
from ._typing import Fun
from .rules import Primitive
from .rules.control import stop_gradient  # noqa: F401  (re-exported: part of this API)
from .trace.recording import bind


class CustomPrimitive:
    """A user function recorded as one primitive (see the module docstring)."""

    def __init__(self, fun):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.prim = Primitive(f"{fun.__name__}", lambda *args, fn: fn.fun(*args), "{fn}({*})",
                              strict=True)

    def __call__(self, *args):
        """Plain values: the function itself. Traced values: one recorded step, which the
        generated code writes as a call of this object (so it nests, too)."""
        return bind(self.prim, args, {"fn": self})

    def __repr__(self):
        return f"<autodiffgen.primitive {self.fun.__qualname__}>"


def primitive(fun: Fun) -> "CustomPrimitive":
    """Make `fun` a primitive: traced calls record it as one step of the generated code."""
    return CustomPrimitive(fun)


def _primitive_of(f):
    if isinstance(f, CustomPrimitive):
        return f.prim
    if isinstance(f, Primitive):
        return f
    raise TypeError(f"expected a function made with autodiffgen.primitive, got {f!r}")


def _drop_fn(rule):
    return None if rule is None else (lambda g, ans, *args, fn=None: rule(g, ans, *args))


def _user_rules(f, rules):
    """A custom primitive's rules are written without its `fn` parameter."""
    return [_drop_fn(r) for r in rules] if isinstance(f, CustomPrimitive) else rules


def defvjp(f: Fun, *rules: Callable[..., Any] | None) -> None:
    """VJP rules for a primitive, one per argument: rule(g, ans, *args) -> cotangent.
    None marks an argument with no derivative (asking for one raises)."""
    registry.defvjp(_primitive_of(f), *_user_rules(f, rules))


def defjvp(f: Fun, *rules: Callable[..., Any] | None) -> None:
    """JVP rules for a primitive, one per argument: rule(t, ans, *args) -> tangent."""
    registry.defjvp(_primitive_of(f), *_user_rules(f, rules))
