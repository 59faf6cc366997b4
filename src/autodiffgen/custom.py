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
from ._typing import Fun, PyTree
from .generated_helpers import stop_gradient as _stop_gradient_impl
from .rules import Primitive, defprimitive, register_helper
from .tracer import Box, bind, stand_in
from .tree import map_tree


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


stop_gradient_prim = defprimitive("stop_gradient", lambda x: x, "_stop_gradient({0})",
                                  helper="_stop_gradient")


def _stop_leaf(x):
    x = stand_in(x)  # a new constant a traced index wrote into: its Box
    return bind(stop_gradient_prim, (x,), {}) if type(x) is Box else x


def stop_gradient(x: PyTree) -> PyTree:
    """x (an array or a pytree of them), as a constant for differentiation: no derivative
    flows through it, also when the generated code is differentiated again."""
    return map_tree(x, _stop_leaf)


register_helper("_stop_gradient", _stop_gradient_impl, _stop_leaf)
