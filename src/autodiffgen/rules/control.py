"""Guards: what a traced path assumed about values only known at run time.

When the user's Python reads a traced value (`if x.sum() > 0:`, `while err > tol:`,
`int(n)`, `range(k)`), the tracer answers with the concrete value and records a guard
node: "this test of that value gave this outcome". The generated code re-checks every
guard before the work that depends on it and raises GuardFailure when one fails, so the
cache traces the other path instead of answering from the wrong one.
"""

import math
import operator

import numpy as np

from .._typing import PyTree
from ..generated_helpers import GuardFailure, _layout
from ..generated_helpers import stop_gradient as _stop_gradient_impl
from ..trace.boxes import Box, stand_in
from ..trace.raising import Raised
from ..trace.recording import GUARD, RAISES, bind
from ..tree import map_tree
from .registry import defprimitive, register_helper

READS = {  # test -> how the user's code read the value (x, *index) -> Python object
    "bool": lambda x: bool(x),
    "float": lambda x: float(x),
    "complex": lambda x: complex(x),
    "int": lambda x: int(x),
    "index": operator.index,
    "item": lambda x, *index: np.asarray(x).item(*index),
    "round": lambda x: round(x),
    # what an in-place write's meaning depends on (numpy_api/writes.py): whether a reshape
    # of an argument is a view (its memory layout), and whether two arguments are one
    "layout": _layout,
    "aliases": lambda x, y: bool(np.may_share_memory(x, y)),
    "count_nonzero": lambda x: int(np.count_nonzero(x)),  # a mask's count (generalize_counts.py)
    "len": len,  # the length of np.unique's or np.bincount's result (count_sources.py)
    "iscomplexobj": lambda x: bool(np.iscomplexobj(x)),  # the dtype np.linalg.eig chose
    # masks that are complements only without NaN (rules/masked_writes.py)
    "isnan_any": lambda x: bool(np.isnan(x).any()),
}


def same(value, outcome):
    """The outcome again (NaN counts as itself: a NaN read stays a NaN)."""
    if isinstance(outcome, float) and math.isnan(outcome):
        return isinstance(value, float) and math.isnan(value)
    if type(outcome) is float and outcome == 0.0:  # -0.0 is not 0.0 (np.copysign, 1 / x)
        return type(value) is float and math.copysign(1.0, value) == math.copysign(1.0, outcome)
    return type(value) is type(outcome) and value == outcome


def holds(x, *more, test, outcome, index=(), call=None, call_params=None, source=None,
          read=False, lo=0, error=None, errstate=(), total=None, least=0, exit=False):
    """Whether the guard still holds for the value x (the guard primitive's meaning); for
    a "raises" guard, whether call(x, *more) still raises what it raised when traced.
    `source` numbers a mask's count guard (generalize_counts.py), so that two are never merged into
    one; `read` says the user's Python read a size after it, `lo` the least count served,
    `total` and `least` (a length's count) the most and least probed; `exit` marks a
    `while` loop's test (rules/loops.py: Scan.exit), which ends the loop when it fails."""
    if test == "raises":
        expected = error if error is not None else RAISES[call.name]
        try:
            with np.errstate(**dict(errstate)):
                call.impl(x, *more, **call_params)
        except expected:
            return True
        return False
    if test in ("count_nonzero", "len") and type(outcome) is not int:  # read at run time
        return True
    if type(outcome) is Raised:  # the read raised when traced (in a `try:`, raising.py)
        try:
            READS[test](x, *more, *index)
        except outcome.error:
            return True
        return False
    return same(READS[test](x, *more, *index), outcome)


# primitives that raise on some values, not shapes (a matrix that is not positive
# definite, a singular one): a raise while tracing is a branch the code guards, and a
# raise at run time on the path traced without one is a GuardFailure (see emit.py)
RAISES.update(dict.fromkeys(["inv", "solve", "cholesky", "pinv", "eigh_values",
                             "eigh_vectors", "svd_values", "svd_u", "svd_vh"],
                            np.linalg.LinAlgError))


guard = defprimitive("guard", holds, "if <{0} read otherwise>: raise GuardFailure(...)")
GUARD.append(guard)

__all__ = ["READS", "GuardFailure", "guard", "holds", "same"]


# ---- stop_gradient: a value that is a constant for differentiation -------------------

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
