"""The registry's core: Primitive, the table of primitives by name, defprimitive (which
puts a primitive's rules in the tables of rules/vjps.py and rules/jvps.py), runtime
helpers, and how cotangents and tangents are brought to their value's shape and dtype
(unbroadcast, broadcast_up). The family modules import it; the package's __init__
imports them and re-exports this (see its docstring for the rules' conventions).
"""

import numpy as np

from ..generated_helpers import HELPERS
from ..trace.boxes import result_dtype
from ..trace.dispatch import UFUNCS
from ..trace.recording import bind
from .jvps import JVPS, jvp_kind
from .vjps import SOLE_VJPS, VARIADIC_VJPS, VJPS, vjp_rule

PRIMITIVES = {}
TRACEABLE_HELPERS = {}  # runtime helper name -> a version that records a primitive on Boxes
# "vjp", "jvp": the compiled transformations, which rules that differentiate a user's
# function at run time call (odeint's dynamics); transforms.py fills it in, so that the
# rules stage imports nothing of the compiler
TRANSFORMS = {}


class Primitive:
    """A named operation the tracer records and the emitter writes as one line: what every
    stage needs to know of it. What one stage knows (its derivative rules, its batching
    rule) is in that stage's table, keyed by the primitive: rules/vjps.py (reverse
    mode), rules/jvps.py (forward mode), rules/batching.py (vmap)."""

    def __init__(self, name, impl, template, defaults=None, simplify=None, helper=None,
                 strict=False, imports=(), builtin=False, effect=False):
        self.name = name
        self.impl = impl
        self.template = template
        self.defaults = defaults or {}
        # simplify(args, params, value): a value to record instead of the step, or None
        self.simplify = simplify
        self.helper = helper  # name of a runtime helper the emitted code calls, if any
        self.strict = strict  # a missing rule is an error (user primitives), not a zero
        self.imports = tuple(imports)  # modules besides NumPy its template names
        # a step with an effect (a random draw advances its generator): never folded,
        # merged or dropped, and run in the order traced
        self.effect = effect
        # passes recognize primitives by `op`: a user's primitive named "exp" is not np.exp
        self.op = name if builtin else None

    def __call__(self, *args, **params):
        return bind(self, args, params)

    def vjp(self, argnum, sole=False):
        """Reverse mode's rule for one argument (vjps.vjp_rule), or None: asked by the
        tracer, which knows primitives only as objects, where a derivative flows."""
        return vjp_rule(self, argnum, sole)

    def __repr__(self):
        return f"<primitive {self.name}>"


def defprimitive(name, impl, template, defaults=None, vjps=(), *, variadic_vjp=None,
                 sole_vjps=(), jvps=(), jvp_from=None, linear_in=None, **options):
    """Register a primitive. `template` is how the emitted code writes it (see module doc);
    `vjps`, `variadic_vjp`, `sole_vjps` go to reverse mode's tables (rules/vjps.py),
    `jvps`, `jvp_from`, `linear_in` to forward mode's (rules/jvps.py).

    Users add NumPy functions this way, e.g. a rule for np.cbrt:

        cbrt = defprimitive("cbrt", np.cbrt, "np.cbrt({0})",
                            vjps=[lambda g, ans, x: g / (3 * ans * ans)])
        register_ufunc(np.cbrt, cbrt)
    """
    if name in PRIMITIVES:
        raise ValueError(f"a primitive named {name!r} is already registered")
    prim = Primitive(name, impl, template, defaults, builtin=True, **options)
    VJPS[prim] = tuple(vjps)
    if variadic_vjp is not None:
        VARIADIC_VJPS[prim] = variadic_vjp
    if sole_vjps:
        SOLE_VJPS[prim] = tuple(sole_vjps)
    kind = jvp_kind(linear_in, jvp_from, jvps)
    if kind is not None:
        JVPS[prim] = kind
    PRIMITIVES[name] = prim
    return prim


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
