"""JAX's custom_vjp and custom_jvp decorators, on top of the rule tables.

    @custom_vjp
    def clip_gradient(x, lo, hi):
        return x
    def clip_fwd(x, lo, hi):
        return x, (lo, hi)                  # (output, residuals)
    def clip_bwd(res, g):
        lo, hi = res
        return np.clip(g, lo, hi), None, None   # one cotangent per argument (None: zero)
    clip_gradient.defvjp(clip_fwd, clip_bwd)

    @custom_jvp
    def log1pexp(x):
        return np.log1p(np.exp(x))
    @log1pexp.defjvp
    def log1pexp_jvp(primals, tangents):
        x, = primals
        t, = tangents
        return log1pexp(x), t / (1.0 + np.exp(-x))

custom_vjp: a traced call runs f_fwd on the traced values, so its operations are the
generated forward's, and marks each float output leaf with a `custom_vjp` node, the
identity on it, whose other arguments are the primals and the residuals. Its VJP
(rules/vjps.py's variadic table) calls f_bwd on the residuals and the cotangent, so f_bwd's
operations are the generated backward's. The mark is an identity: dropped from code that
only runs (passes/identities.py); code an enclosing trace runs keeps it as the helper
`_custom_vjp(out)`, which that trace reads as the identity, so a second derivative
differentiates f_fwd's and f_bwd's operations, as JAX does. Forward mode through the mark
itself is refused, as in JAX (forward over reverse, an hvp, works: the mark is gone there).

custom_jvp: a custom primitive (custom.py), so the generated code calls f itself. Its JVP
runs f_jvp; its VJP is the transpose of f_jvp's tangent map (linear in the tangents), taken
by a generated VJP of that map, whose operations the backward then holds; JAX too derives
reverse mode by transposing the JVP. A nested derivative meets the same call of f, and the
same rules, so the custom rule holds at every order, as in JAX.
"""

import inspect
import weakref
from collections.abc import Callable

import numpy as np

from ._typing import Fun
from .custom import CustomPrimitive
from .errors import ArgumentError, UnsupportedOperationError, at, def_site, function_name
from .rules import Primitive, defbatch, register_helper
from .rules.batching import spread
from .rules.jvps import JVPS
from .rules.vjps import VARIADIC_VJPS
from .trace.boxes import Box, result_dtype
from .trace.context import current_trace, user_loc
from .trace.recording import bind
from .tree import leaves, map_tree

_LAST = weakref.WeakKeyDictionary()  # trace -> (key, cotangents) of the last node's rule


def _once(key, compute):
    """compute() for a node's rule, its arguments and cotangent (`key`, compared by
    identity): the backward calls the rule once per argument, and f_bwd runs once for all
    of them. Kept per trace, and only while the trace lives."""
    trace = current_trace()
    last = _LAST.get(trace) if trace is not None else None
    if last is None or len(last[0]) != len(key) or any(a is not b for a, b in zip(last[0], key)):
        last = (key, compute())
        if trace is not None:
            _LAST[trace] = last
    return last[1]


def _positional(fun, args, kwargs):
    if not kwargs:
        return args
    bound = inspect.signature(fun).bind(*args, **kwargs)
    bound.apply_defaults()
    return bound.args


def _traced(args):
    trace = current_trace()
    return trace is not None and any(type(leaf) is Box and leaf.node.trace_id == trace.id
                                     for leaf in leaves(args))


# ---- custom_vjp ---------------------------------------------------------------------------
class _Slot(int):
    """Where a residual's leaf is among the mark's arguments."""

    def __repr__(self):
        return f"slot{int(self)}"


def _custom_vjp(x):
    """x itself: generated code marks with this call an output of a custom_vjp function."""
    return x


def _mark_vjp(argnum, g, ans, *args, fn, leaf, primal, res, out):
    """The cotangent of argument `argnum` of a mark: f_bwd's, for the primal leaves."""
    found = _once((fn, leaf, g, *args), lambda: fn.cotangents(g, args, leaf, primal, res, out))
    return found.get(argnum)


def _refuse_forward(prim, tangents, ans, args, params, loc=None):
    if all(t is None for t in tangents):
        return
    fn = params["fn"]
    raise UnsupportedOperationError(at(
        loc or user_loc(), f"{fn.__name__} is a custom_vjp function: it has a reverse-mode "
        "rule only, so forward mode (jvp, jacfwd) cannot go through it, as in JAX. Take "
        "reverse mode (grad, vjp, jacrev, hessian), or define it with "
        "autodiffgen.custom_jvp, whose rule serves both modes"))


def _mark_batch(ctx, *args, **params):
    """Under vmap the mark is dropped (the vectorized code takes no derivative)."""
    return args[0] if ctx.batched[0] else spread(args[0], ctx.size)


def _mark_of(name):
    """The mark of one custom_vjp function: a primitive named after it (its output's and
    cotangent's names in the code, `g_f`), whose op is "custom_vjp" (what the passes and the
    plan know of it: an identity, a view)."""
    prim = Primitive(name, lambda x, *rest, **params: x, "_custom_vjp({0})",
                     helper="_custom_vjp")
    prim.op = "custom_vjp"
    VARIADIC_VJPS[prim] = _mark_vjp
    JVPS[prim] = _refuse_forward
    defbatch(prim, _mark_batch)
    return prim


register_helper("_custom_vjp", _custom_vjp, _custom_vjp)  # traced again: the identity


class CustomVJP:
    """A function with a reverse-mode rule of its own (see the module docstring)."""

    def __init__(self, fun, nondiff_argnums=()):
        if nondiff_argnums:
            raise TypeError(at(def_site(fun), "custom_vjp(nondiff_argnums=...) is not "
                               "supported: close over those values (functools.partial), "
                               "or pass them as arguments whose cotangent f_bwd gives as None"))
        self.__name__ = function_name(fun)
        self.__qualname__ = getattr(fun, "__qualname__", self.__name__)
        self.__doc__, self.__wrapped__ = fun.__doc__, fun
        self.fun, self.fwd, self.bwd = fun, None, None
        self.mark = _mark_of(self.__name__)

    def defvjp(self, fwd, bwd):
        """f_fwd(*args) -> (output, residuals); f_bwd(residuals, g) -> one cotangent per
        argument of f (a tuple), each shaped as its argument, or None for a zero."""
        self.fwd, self.bwd = fwd, bwd

    def __call__(self, *args, **kwargs):
        args = _positional(self.fun, args, kwargs)
        if not _traced(args):
            return self.fun(*args)
        if self.fwd is None:
            raise TypeError(at(user_loc(), f"{self.__name__} is a custom_vjp function with "
                               f"no rule yet: call {self.__name__}.defvjp(f_fwd, f_bwd) "
                               "before differentiating it"))
        pair = self.fwd(*args)
        if type(pair) not in (tuple, list) or len(pair) != 2:
            raise TypeError(at(def_site(self.fwd), f"{function_name(self.fwd)} (the forward "
                               f"rule of {self.__name__}) must return a pair (output, "
                               f"residuals), got {type(pair).__name__}"))
        return self._marked(args, *pair)

    def _marked(self, args, out, res):
        """out with each float leaf marked: its node's arguments are the leaf, the primal
        leaves, then the residual leaves that are arrays or Boxes."""
        operands, primal = [], []
        for arg in args:
            slots = []
            for leaf in leaves(arg):
                slots.append(len(operands) + 1 if type(leaf) is Box else None)
                operands += [leaf] if type(leaf) is Box else []
            primal.append(tuple(slots))
        res_skeleton = map_tree(res, lambda leaf: _add(operands, leaf)
                                if type(leaf) is Box or isinstance(leaf, np.ndarray) else leaf)
        out_leaves = leaves(out)
        specs = tuple((np.shape(_plain(o)), result_dtype(_plain(o))) for o in out_leaves)
        counter = iter(range(len(out_leaves)))

        def mark(o):
            j = next(counter)
            if type(o) is not Box or not np.issubdtype(specs[j][1], np.inexact):
                return o
            return bind(self.mark, (o, *operands), {
                "fn": self, "leaf": j, "primal": tuple(primal), "res": res_skeleton,
                "out": (map_tree(out, lambda _: 0), specs)})
        return map_tree(out, mark)

    def cotangents(self, g, args, leaf, primal, res, out):
        """{argument index of the mark: cotangent} from f_bwd, for output leaf `leaf`
        (the others' cotangents zeros, as f_bwd is linear in them)."""
        skeleton, specs = out
        counter = iter(range(len(specs)))
        g_tree = map_tree(skeleton, lambda _, c=counter: _cotangent(next(c), leaf, g, specs))
        res_tree = map_tree(res, lambda x: args[x] if type(x) is _Slot else x)
        cots = self.bwd(res_tree, g_tree)
        where = def_site(self.bwd)
        name = function_name(self.bwd)
        if type(cots) not in (tuple, list) or len(cots) != len(primal):
            raise TypeError(at(where, f"{name} (the backward rule of {self.__name__}) must "
                               f"return a tuple of {len(primal)} cotangent(s), one per "
                               f"argument of {self.__name__}, got {_what(cots)}"))
        found = {}
        for i, (slots, cot) in enumerate(zip(primal, cots)):
            parts = [None] * len(slots) if cot is None else leaves(cot)
            if len(parts) != len(slots):
                raise TypeError(at(where, f"{name} (the backward rule of {self.__name__}) "
                                   f"returned for argument {i} a cotangent of {len(parts)} "
                                   f"leaves, but the argument has {len(slots)}"))
            for slot, part in zip(slots, parts):
                if slot is not None and part is not None:
                    _check_shape(part, args[slot], f"{name} (the backward rule of "
                                 f"{self.__name__})", i, where)
                    found[slot] = part
        return found

    def __repr__(self):
        return f"<autodiffgen.custom_vjp {self.__qualname__}>"


def _add(operands, leaf):
    operands.append(leaf)
    return _Slot(len(operands))  # the mark's argument 0 is the output leaf


def _cotangent(i, leaf, g, specs):
    shape, dtype = specs[i]
    return g if i == leaf else np.zeros(shape, dtype)


def _check_shape(part, primal, name, i, where):
    if np.shape(_plain(part)) != np.shape(_plain(primal)):
        raise ValueError(at(where, f"{name} returned for argument {i} a cotangent of shape "
                            f"{np.shape(_plain(part))}, but the argument has shape "
                            f"{np.shape(_plain(primal))}"))


def _plain(x):
    return x.value if type(x) is Box else x


def _what(value):
    if type(value) in (tuple, list):
        return f"a {type(value).__name__} of {len(value)}"
    return type(value).__name__


def custom_vjp(fun: Fun | None = None, *, nondiff_argnums: tuple[int, ...] = ()
               ) -> "CustomVJP | Callable[[Fun], CustomVJP]":
    """JAX's custom_vjp: `fun` with the reverse-mode rule given by `fun.defvjp(f_fwd,
    f_bwd)` (see the module docstring). Forward mode through it is refused, as in JAX."""
    if fun is None:
        return lambda f: CustomVJP(f, nondiff_argnums)
    return CustomVJP(fun, nondiff_argnums)


# ---- custom_jvp ---------------------------------------------------------------------------
class CustomJVP(CustomPrimitive):
    """A function with a forward-mode rule of its own, from which reverse mode is derived
    (see the module docstring); one primitive, called by the generated code."""

    def __init__(self, fun, nondiff_argnums=()):
        if nondiff_argnums:
            raise TypeError(at(def_site(fun), "custom_jvp(nondiff_argnums=...) is not "
                               "supported: close over those values (functools.partial)"))
        super().__init__(fun)
        self.jvp = None
        self._transposes = {}

    def defjvp(self, jvp):
        """jvp(primals, tangents) -> (primal_out, tangent_out), tangent_out linear in the
        tangents. Returns jvp, so that it serves as a decorator."""
        self.jvp = jvp
        JVPS[self.prim] = self._tangent
        VARIADIC_VJPS[self.prim] = self._cotangent
        return jvp

    def __call__(self, *args, **kwargs):
        args = _positional(self.fun, args, kwargs)
        if not _traced(args):
            return self.fun(*args)
        for i, arg in enumerate(args):
            value = _plain(arg)
            if not isinstance(value, (np.ndarray, np.generic, float, int)):
                raise ArgumentError(at(user_loc(), f"{self.__name__} is a custom_jvp function, "
                                       f"whose arguments are arrays or numbers here: argument "
                                       f"{i} is a {type(value).__name__}. Pass a pytree's leaves "
                                       "as arguments, or use custom_vjp, which takes pytrees"))
        out = super().__call__(*args)
        if not isinstance(_plain(out), (np.ndarray, np.generic, float)):
            raise ArgumentError(at(def_site(self.fun), f"{self.__name__} is a custom_jvp "
                                   "function, which returns one array here, not a "
                                   f"{type(_plain(out)).__name__}; use custom_vjp for a "
                                   "pytree output"))
        return out

    def _tangent(self, prim, tangents, ans, args, params, loc=None):
        if all(t is None for t in tangents):
            return None
        filled = tuple(_zeros(a) if t is None else t for a, t in zip(args, tangents))
        pair = self.jvp(tuple(args), filled)
        name = function_name(self.jvp)
        if type(pair) not in (tuple, list) or len(pair) != 2:
            raise TypeError(at(def_site(self.jvp), f"{name} (the JVP rule of {self.__name__}) "
                               "must return a pair (primal_out, tangent_out), got "
                               f"{_what(pair)}"))
        tangent = pair[1]
        if np.shape(_plain(tangent)) != np.shape(_plain(ans)):
            raise ValueError(at(def_site(self.jvp), f"{name} returned a tangent of shape "
                                f"{np.shape(_plain(tangent))} for {self.__name__}'s output "
                                f"of shape {np.shape(_plain(ans))}"))
        return tangent

    def _cotangent(self, argnum, g, ans, *args, fn=None):
        """Argument argnum's part of the transposed tangent map at g (all parts computed
        once per node)."""
        return _once((self, g, *args), lambda: self._transposed(g, args))[argnum]

    def _transposed(self, g, args):
        from .transforms import VJPFunction  # a front end's: it builds on the compiler

        n = len(args)
        if n not in self._transposes:
            jvp, name = self.jvp, self.__name__

            def tangent_map(*primals_and_tangents):
                return jvp(primals_and_tangents[:n], primals_and_tangents[n:])[1]
            tangent_map.__name__ = tangent_map.__qualname__ = f"{name}_tangent_map"
            self._transposes[n] = VJPFunction(tangent_map, wrt=range(n, 2 * n))
        _, pull = self._transposes[n](*args, *map(_zeros, args))
        return pull(g)


def _zeros(x):
    value = _plain(x)
    return np.zeros(np.shape(value), result_dtype(value)) if isinstance(
        value, (np.ndarray, np.generic)) else 0.0


def custom_jvp(fun: Fun | None = None, *, nondiff_argnums: tuple[int, ...] = ()
               ) -> "CustomJVP | Callable[[Fun], CustomJVP]":
    """JAX's custom_jvp: `fun` with the forward-mode rule given by `fun.defjvp(f_jvp)`
    (also a decorator), from which reverse mode is derived (see the module docstring)."""
    if fun is None:
        return lambda f: CustomJVP(f, nondiff_argnums)
    return CustomJVP(fun, nondiff_argnums)
