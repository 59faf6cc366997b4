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

from ..runtime import GuardFailure
from ..tracer import GUARD
from . import defprimitive

READS = {  # test -> how the user's code read the value (x, *index) -> Python object
    "bool": lambda x: bool(x),
    "float": lambda x: float(x),
    "complex": lambda x: complex(x),
    "int": lambda x: int(x),
    "index": operator.index,
    "item": lambda x, *index: np.asarray(x).item(*index),
    "round": lambda x: round(x),
    "count_nonzero": lambda x: int(np.count_nonzero(x)),  # a mask's count (sizes.py)
}


def same(value, outcome):
    """The outcome again (NaN counts as itself: a NaN read stays a NaN)."""
    if isinstance(outcome, float) and math.isnan(outcome):
        return isinstance(value, float) and math.isnan(value)
    return type(value) is type(outcome) and value == outcome


def holds(x, test, outcome, index=(), source=None, read=False, lo=0):
    """Whether the guard still holds for the value x (the guard primitive's meaning).
    `source` numbers a mask's count guard (sizes.py), so that two are never merged into
    one; `read` says the user's Python read a size after it, `lo` the least count served."""
    read = READS[test](x, *index)
    return True if test == "count_nonzero" and type(outcome) is not int else same(read, outcome)


guard = defprimitive("guard", holds, "if <{0} read otherwise>: raise GuardFailure(...)")
GUARD.append(guard)

__all__ = ["READS", "GuardFailure", "guard", "holds", "same"]
