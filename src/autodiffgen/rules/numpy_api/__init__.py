"""How NumPy calls reach the primitives: NumPy's API on traced values, not derivative rules.

A traced value (a Box) meets NumPy in three ways: a ufunc (np.add, through
__array_ufunc__, mapped to its primitive by `rules.register_ufunc`), a NumPy function
(np.sum, np.reshape, through __array_function__) and an ndarray method or property
(x.sum(), x.real, x[i] = v; Python operators and x.T are the tracer's own, written with
ufuncs and np.transpose). The modules here handle functions and methods: each takes the
arguments as NumPy does (axis=None / int / negative / tuple, keepdims, out=, aliases such
as np.amax, ndarray methods' loose signatures), refuses what a trace cannot honour with an
error at the user's line, and records primitives of `rules/` in canonical form, or writes
the function with other NumPy calls (np.var, np.kron, np.linalg.norm).

Kept apart from rules/ because it changes for different reasons: the rules say what a
primitive's derivative is, these modules say which NumPy spellings mean that primitive.
One module per family of rules/ that NumPy spells in more than one way, named alike,
plus `composed` (functions with no primitive of their own) and `writes` and `views`
(NumPy's in-place writes and aliasing, done functionally with setitem), and `random`
(np.random and generators). The ufuncs and scipy.special need no module here.
rules/__init__ imports this package after every primitive is registered.
"""

# each module registers its handlers when imported
from . import (  # noqa: F401
    assembly,
    building,
    composed,
    eig,
    elementwise,
    fft,
    indexing,
    indices,
    linalg,
    predicates,
    products,
    random,
    reductions,
    shapes,
    views,
    writes,
)
from .dispatch import (  # noqa: F401  (re-exported)
    boxmethod,
    check_no_out,
    normalize_axis,
    register_function,
    register_ufunc_method,
)
