"""Primitives without a derivative: indices (argmax, argmin, argsort, argpartition,
searchsorted), counts (count_nonzero), indices as many as the data says (nonzero,
flatnonzero, argwhere), and results as long as the data says (unique, bincount).

Indices and counts are recorded as primitives without rules, so that the generated code
recomputes them from its inputs on every call (an argmax baked in as a constant would be
right only for the values it was traced with). Their results are integers, which neither
engine differentiates. The results of nonzero, flatnonzero and argwhere are as long as
the input has nonzero elements: numpy_api/indices.py tells generalize_counts.py, which reads that
count at run time where the code allows it and guards it where it does not. So for the
length of np.unique's results (one primitive per result asked for, as np.nonzero's) and
of np.bincount's, whose one derivative is in its weights: a linear gather g[x].
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
searchsorted = defprimitive(
    "searchsorted", lambda a, v, *by, side, sorter: np.searchsorted(
        a, v, side=side, sorter=by[0] if sorter else None),
    lambda params: "np.searchsorted({0}, {1}" + (", side='right'" if params["side"] == "right"
                                                 else "") + (", sorter={2}" if
                                                             params["sorter"] else "") + ")")


# ---- results as long as the data says ------------------------------------------------------
_UNIQUE_PARTS = {"values": 0, "index": 1, "inverse": 1, "counts": 1}  # [i] of np.unique's


def _unique(a, part, equal_nan):
    if part == "values":
        return np.unique(a, equal_nan=equal_nan)
    return np.unique(a, equal_nan=equal_nan, **{f"return_{part}": True})[1]


def _unique_template(params):
    part, nan = params["part"], "" if params["equal_nan"] else ", equal_nan=False"
    if part == "values":
        return f"np.unique({{0}}{nan})"
    return f"np.unique({{0}}, return_{part}=True{nan})[1]"


unique = defprimitive("unique", _unique, _unique_template)
bincount = defprimitive(
    "bincount", lambda x, *weights, minlength: np.bincount(
        x, weights[0] if weights else None, minlength=minlength),
    lambda params: "np.bincount({*}" + (f", minlength={params['minlength']}"
                                        if params["minlength"] else "") + ")",
    vjps=[None, lambda g, ans, x, w, minlength: g[x]], linear_in=(1,))
