"""Primitives without a derivative: indices (argmax, argmin, argsort, argpartition),
counts (count_nonzero), and indices as many as the data says (nonzero, flatnonzero,
argwhere).

Indices and counts are recorded as primitives without rules, so that the generated code
recomputes them from its inputs on every call (an argmax baked in as a constant would be
right only for the values it was traced with). Their results are integers, which neither
engine differentiates. The results of nonzero, flatnonzero and argwhere are as long as
the input has nonzero elements: numpy_api/indices.py tells generalize_counts.py, which reads that
count at run time where the code allows it and guards it where it does not.
"""

import numpy as np

from . import defprimitive

_AXIS = {"axis": None, "keepdims": False}


# ---- indices and counts -------------------------------------------------------------------
argmax = defprimitive("argmax", lambda x, axis, keepdims: np.argmax(x, axis=axis,
                                                                    keepdims=keepdims),
                      "np.argmax({0})", dict(_AXIS))
argmin = defprimitive("argmin", lambda x, axis, keepdims: np.argmin(x, axis=axis,
                                                                    keepdims=keepdims),
                      "np.argmin({0})", dict(_AXIS))
argsort = defprimitive("argsort", lambda x, axis, kind: np.argsort(x, axis=axis, kind=kind),
                       "np.argsort({0})", {"axis": -1, "kind": None})
# arranges each side of kth as np.partition does, though NumPy promises only the partition
argpartition = defprimitive(
    "argpartition", lambda x, kth, axis: np.argpartition(x, kth, axis=axis),
    "np.argpartition({0}, {kth})", {"axis": -1})
count_nonzero = defprimitive(
    "count_nonzero", lambda x, axis, keepdims: np.count_nonzero(x, axis=axis, keepdims=keepdims),
    "np.count_nonzero({0})", dict(_AXIS))

# ---- data-dependent shapes ----------------------------------------------------------------
nonzero = defprimitive("nonzero", lambda x, axis: np.nonzero(x)[axis],
                       lambda params: f"np.nonzero({{0}})[{params['axis']}]")
flatnonzero = defprimitive("flatnonzero", np.flatnonzero, "np.flatnonzero({0})")
argwhere = defprimitive("argwhere", np.argwhere, "np.argwhere({0})")
