"""scipy.integrate.odeint(func, y0, t, args=()) as a primitive, differentiable in y0, t and
args (as Autograd's). The generated code calls SciPy's solver with the user's `func`
itself (handed to the code as a custom primitive's function is; where the user's code
reads it, it is guarded by identity, as any function read is).

Reverse mode is the adjoint method: between consecutive output times, one backward solve
of the state with its adjoint a (da/ds = -a df/dy) and the cotangent of args
(db/ds = -a df/dargs); the output times' cotangents are g_i . f(y_i, t_i), and t0's is
-a . f(y0, t0). Forward mode solves the sensitivity equations (ds/dt = df/dy s +
df/dargs t_args). Both are odeint again, of augmented dynamics (`_Adjoint`, `_Sensitivity`)
that call func's VJP or JVP (autodiffgen.vjp / jvp: generated code, compiled once, which
transforms.py hands over in rules.TRANSFORMS; so the tape uses them here too); func
itself at the output times is `call`. These are primitives with rules of the same kind,
so second derivatives trace through them too.
"""

import weakref

import numpy as np
import scipy.integrate

from ...errors import UnsupportedOperationError, at
from ...trace.boxes import Box, concrete
from ...trace.context import current_trace, user_loc
from ...trace.recording import bind
from ...tree import is_container, items, leaves
from ..jvps import JVPS
from ..registry import TRANSFORMS, defprimitive, register_helper
from .intercept import register

_REFUSED = ("Dfun", "col_deriv", "full_output", "tfirst", "ml", "mu", "printmessg")


def _odeint(func, y0, t, *args, options=()):
    """scipy.integrate.odeint with func's extra arguments after t."""
    return scipy.integrate.odeint(func, y0, t, args=args, **dict(options))


def _call(fn, *args):
    """fn(*args): a user's function as one step of generated code."""
    return fn(*args)


# ---- derived dynamics: callable objects, one per function (so equal steps merge) -----------
_MADE = weakref.WeakKeyDictionary()  # function -> {(kind, extra): its derived dynamics}


class _Derived:
    """One object per (kind, function, extra): equal steps of generated code call the same
    object, so they merge. Kept while the function lives (a weak table)."""

    def __new__(cls, fn, *extra):
        mine = _MADE.setdefault(fn, {})
        found = mine.get((cls, extra))
        if found is None:
            found = mine[(cls, extra)] = super().__new__(cls)
            found._fn, found.extra = weakref.ref(fn), extra
            found.__name__ = f"{cls.__name__.strip('_').lower()}_{getattr(fn, '__name__', 'f')}"
            found.__qualname__ = f"<{found.__name__}>"  # not importable by a standalone module
        return found

    @property
    def fn(self):
        return self._fn()


class _Adjoint(_Derived):
    """[y, a, b] -> [f(y), -a df/dy, -a df/dargs (flat)] for the backward solve."""

    def __call__(self, state, s, *args):
        vjp = TRANSFORMS["vjp"]
        n = self.extra[0]
        y, a = state[:n], state[n:2 * n]
        f, vjp_fn = vjp(self.fn, y, s, *args)
        cots = vjp_fn(-a)
        parts = [f, cots[0]] + [np.zeros(np.size(x)) if c is None else np.ravel(c)
                                for c, x in zip(cots[2:], args)]  # None: an int argument
        return np.concatenate(parts)


class _Sensitivity(_Derived):
    """[y, s] -> [f(y), df/dy s + df/dargs t_args] (args then their tangents)."""

    def __call__(self, state, s, *args_and_tangents):
        jvp = TRANSFORMS["jvp"]
        n, k = self.extra
        y, sens = state[:n], state[n:]
        args, targs = args_and_tangents[:k], args_and_tangents[k:]
        f, df = jvp(self.fn, (y, s, *args), (sens, None, *targs))
        return np.concatenate([f, df])


class _VJPOf(_Derived):
    """(*args, g) -> the cotangent of argument extra[0] of fn at args."""

    def __call__(self, *args_and_g):
        vjp = TRANSFORMS["vjp"]
        _, vjp_fn = vjp(self.fn, *args_and_g[:-1])
        return vjp_fn(args_and_g[-1])[self.extra[0]]


class _JVPOf(_Derived):
    """(*args, t) -> fn's derivative along t in argument extra[0]."""

    def __call__(self, *args_and_t):
        jvp = TRANSFORMS["jvp"]
        args, k = args_and_t[:-1], self.extra[0]
        tangents = tuple(args_and_t[-1] if i == k else None for i in range(len(args)))
        return jvp(self.fn, args, tangents)[1]


class _Packed(_Derived):
    """(y, t, *leaves) -> fn(y, t, *args): func's extra arguments as a pytree (a list of
    (W, b) layers), which the solver and the rules see as their leaves."""

    def __call__(self, y, t, *flat):
        return self.fn(y, t, *_unflatten(self.extra[0], iter(flat)))


def _structure(tree):
    """A hashable description of a pytree's containers (None for a leaf)."""
    if not is_container(tree):
        return None
    keys = tuple(tree) if type(tree) is dict else len(tree)
    return (type(tree), keys, tuple(_structure(child) for _, child in items(tree)))


def _unflatten(structure, flat):
    if structure is None:
        return next(flat)
    kind, keys, children = structure
    values = [_unflatten(child, flat) for child in children]
    if kind is dict:
        return dict(zip(keys, values))
    return kind(*values) if issubclass(kind, tuple) and kind is not tuple else kind(values)


# ---- call(fn, *args): a user function as one step ------------------------------------------------
CALL = defprimitive(
    "call", lambda *args, fn: fn(*args), "_call({fn}, {*})",
    variadic_vjp=lambda i, g, ans, *args, fn: call(_VJPOf(fn, i), *args, g),
    helper="_call")


def _call_tangent(prim, tangents, ans, args, params, loc=None):
    parts = [call(_JVPOf(params["fn"], i), *args, t) for i, t in enumerate(tangents)
             if t is not None]
    return None if not parts else sum(parts[1:], parts[0])


JVPS[CALL] = _call_tangent  # one rule for any number of arguments
register_helper("_call", _call, lambda fn, *args: call(fn, *args))


def call(fn, *args):
    return bind(CALL, args, {"fn": fn})


# ---- odeint -----------------------------------------------------------------------------------------
def _adjoint(g, ans, y0, t, *args, func, options):
    """(cotangent of y0, of t, of each arg)."""
    n, steps = np.shape(ans)[1], np.shape(ans)[0]
    sizes = [int(np.size(a)) for a in args]
    aug = _Adjoint(func, n)
    a = g[steps - 1]
    b = np.zeros(sum(sizes), dtype=ans.dtype)
    g_times = []
    for i in range(steps - 1, 0, -1):
        g_times.append(np.sum(g[i] * call(func, ans[i], t[i], *args)))
        state = np.concatenate([ans[i], a, b])
        back = odeint(aug, state, np.stack([t[i], t[i - 1]]), args, options)[1]
        a, b = back[n:2 * n], back[2 * n:]
        if i == 1:
            g_times.append(-np.sum(a * call(func, y0, t[0], *args)))
        a = a + g[i - 1]
    g_t = np.stack(g_times[::-1]) if g_times else np.zeros_like(t)
    g_args, start = [], 0
    for arg, size in zip(args, sizes):
        g_args.append(np.reshape(b[start:start + size], np.shape(arg)))
        start += size
    return a, g_t, g_args


def _odeint_vjp(argnum, g, ans, y0, t, *args, func, options):
    g_y0, g_t, g_args = _adjoint(g, ans, y0, t, *args, func=func, options=options)
    return g_y0 if argnum == 0 else g_t if argnum == 1 else g_args[argnum - 2]


def _odeint_tangent(prim, tangents, ans, args, params, loc=None):
    """The sensitivity solve, seeded with every argument's tangent at once."""
    if all(t is None for t in tangents):
        return None
    y0, t, *rest = args
    func, options = params["func"], params["options"]
    t_y0, t_t, *t_args = [np.zeros_like(a) if tt is None else tt
                          for a, tt in zip(args, tangents)]
    f_at = [call(func, ans[i], t[i], *rest) for i in range(np.shape(ans)[0])]
    s0 = t_y0 - f_at[0] * t_t[0]
    n = np.shape(ans)[1]
    sens = odeint(_Sensitivity(func, n, len(rest)), np.concatenate([y0, s0]), t,
                  (*rest, *t_args), options)[:, n:]
    return sens + np.stack(f_at) * np.expand_dims(t_t, -1)


ODEINT = defprimitive("odeint", lambda *args, func, options: _odeint(func, *args, options=options),
                      "_odeint({func}, {*})", defaults={"options": ()},
                      variadic_vjp=_odeint_vjp, helper="_odeint", imports=("scipy.integrate",))
JVPS[ODEINT] = _odeint_tangent  # one sensitivity solve for all the tangents
register_helper("_odeint", _odeint,
                lambda func, y0, t, *args, options=(): odeint(func, y0, t, args, options))


def odeint(func, y0, t, args=(), options=()):
    return bind(ODEINT, (y0, t, *args), {"func": func, "options": options})


def _users(func):
    """The user's own function for a clone the trace runs. One made while tracing (a
    lambda or def in the traced function) is refused: the code would call that object,
    whose closure and globals are the trace's."""
    trace = current_trace()
    while trace is not None:
        found = trace.capture.originals.get(id(func)) if trace.capture else None
        if found is not None:
            return found
        trace = trace._outer
    if type(getattr(func, "__globals__", {})) is not dict or _closes_over_box(func):
        raise UnsupportedOperationError(at(user_loc(), "scipy.integrate.odeint: the dynamics "
                                           "function is made inside the traced function; "
                                           "define it outside, and pass traced values to it "
                                           "through odeint's args=(...)"))
    return func


def _closes_over_box(func):
    for cell in getattr(func, "__closure__", None) or ():
        try:
            if type(cell.cell_contents) is Box:
                return True
        except ValueError:  # an empty cell
            continue
    return False


def odeint_call(func, y0, t, args=(), **options):
    args = args if isinstance(args, tuple) else (args,)
    traced = [x for x in leaves((y0, t, args, list(options.values()))) if type(x) is Box]
    if not _closes_over_box(func) and not traced:
        return _ORIGINAL(func, y0, t, args, **options)  # nothing traced: SciPy's own
    refused = [k for k in _REFUSED if options.get(k)]
    if refused:
        raise UnsupportedOperationError(at(user_loc(), "scipy.integrate.odeint on traced "
                                           f"values does not take {', '.join(refused)}"))
    options = tuple(sorted((k, concrete(v)) for k, v in options.items() if k not in _REFUSED))
    func = _users(func)
    if any(is_container(a) for a in args):  # a pytree of arguments: its leaves
        func, args = _Packed(func, _structure(args)), tuple(leaves(args))
    return odeint(func, y0, t, args, options)


_ORIGINAL = scipy.integrate.odeint
register(scipy.integrate, "odeint", odeint_call, "scipy.integrate.odeint", "odeint", always=True)
