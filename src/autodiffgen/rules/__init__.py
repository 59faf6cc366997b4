"""The primitive registry: each primitive's NumPy forward, its emitted form, VJPs and JVPs.

The modules here hold the derivative rules, one family each: elementwise, reductions,
shapes, indexing (getitem, scatter_add, setitem), assembly (tile, repeat, pad, triu,
tril), products (matmul, einsum), linalg (np.linalg), eig (np.linalg.eig), indices
(argmax, argsort, nonzero: no derivative), fft (np.fft), complex_numbers (real, imag,
angle; which primitives take complex values), special (scipy.special's ufuncs), random
(draws), control (guards); scipy/ holds SciPy's Python functions (logsumexp, scipy.stats,
convolve, solve_triangular, sqrtm, odeint), which NumPy does not dispatch to the tracer.
How NumPy's functions and ndarray methods reach these primitives (argument
normalization, aliases, functions composed of other primitives, in-place writes) is
the subpackage numpy_api/.

A VJP rule is an ordinary function of NumPy-level operations, `rule(g, ans, *args,
**params)`, returning the cotangent contribution for one argument. Called on Boxes while
tracing, it records the backward pass as more nodes of the same primitives; called on
plain arrays, it is the dynamic tape's backward. `None` in place of a rule means "not
differentiable in this argument". Broadcasting is undone once, in `unbroadcast`.

A JVP is declared in one of four ways, whichever says it shortest:
- `jvp_from="vjp"`: elementwise primitives, whose VJP `g * df/dx` is also the JVP `t * df/dx`;
- `linear_in=(0,)` (or "all"): the primitive is jointly linear in those arguments, so its
  tangent is the primitive applied to their tangents (zeros where an argument has none);
- `jvp_from="multilinear"`: linear in each argument on its own (matmul, einsum), so each
  tangent's contribution is the primitive with that argument replaced by its tangent;
- `jvps=[...]`: explicit rules `jvp(t, ans, *args, **params)`, one per argument.
Forward mode broadcasts and casts each tangent to its value's shape and dtype in one place.

What each stage knows of a primitive is in that stage's table, keyed by the primitive,
as JAX keeps primitive_jvps and primitive_transposes: reverse mode's in vjps.py (per
argument, variadic, sole, pieces, blocks), forward mode's in jvps.py (the four kinds
above), vmap's in batching.py. A Primitive holds what every stage needs: its name, impl,
how it prints, its effect. `registry` is the core the family modules import; this
package imports them all and re-exports the registration API.

A primitive's emitted form is a template such as "np.sum({0})" where {0}, {1} are its
arguments, {*} all of them and {name} a parameter; parameters listed in `defaults` are
added as keyword arguments when they differ from the default.
"""

import contextlib
import sys
import threading

from ..trace.context import current_trace
from ..trace.dispatch import UFUNC_MISSES
from ..trace.tracer import TRACE_HOOKS

# each module registers its primitives when imported; then numpy_api routes NumPy's
# functions and ndarray methods to them
from . import (  # noqa: F401
    assembly,
    complex_numbers,
    control,
    eig,
    elementwise,
    fft,
    indexing,
    indices,
    linalg,
    loops,
    products,
    pyrandom,
    random,
    reductions,
    shapes,
)
from .jvps import defjvp
from .numpy_api import boxmethod, register_function  # re-exported: how users add one
from .registry import (  # noqa: F401  (re-exported: the registry's API)
    PRIMITIVES,
    TRACEABLE_HELPERS,
    TRANSFORMS,
    Primitive,
    astype,
    broadcast_up,
    defprimitive,
    elementwise_ufunc,
    register_helper,
    register_ufunc,
    unbroadcast,
)
from .vjps import defvjp, missing_rule  # noqa: F401  (re-exported)

__all__ = ["PRIMITIVES", "Primitive", "boxmethod", "broadcast_up", "defbatch", "defjvp",
           "defprimitive", "defvjp", "register_function", "register_helper", "register_ufunc", "unbroadcast"]

# the batching rules (vmap), once every primitive exists
from . import batching
from .batching import defbatch

_scipy_lock = threading.Lock()
_scipy_loaded = False


def load_scipy():
    """SciPy's rules (rules/special.py: scipy.special's ufuncs; rules/scipy: its Python
    functions), registered once, with their batching rules: at the first trace that runs
    after SciPy was imported, or at a SciPy ufunc the trace meets (imported inside the
    function), or for the docs. Imported with autodiffgen, they would import
    scipy.signal, stats and integrate, half a second, for every user of it."""
    global _scipy_loaded
    with _scipy_lock:
        if _scipy_loaded:
            return
        _scipy_loaded = True
        trace = current_trace()  # SciPy's own import code runs untraced
        with trace.suspended() if trace is not None else contextlib.nullcontext():
            from . import scipy, special  # noqa: F401
        batching.register()


@contextlib.contextmanager
def _scipy_when_imported(trace):
    if not _scipy_loaded and "scipy" in sys.modules:
        load_scipy()
    yield


def _scipy_ufunc(ufunc):
    """A ufunc the tracer has no rule for (SciPy imported inside the traced function):
    SciPy's rules, if they may serve it."""
    if _scipy_loaded or "scipy" not in sys.modules:  # not loaded: not one of SciPy's
        return False
    load_scipy()
    return True


TRACE_HOOKS.insert(0, _scipy_when_imported)
UFUNC_MISSES.append(_scipy_ufunc)
