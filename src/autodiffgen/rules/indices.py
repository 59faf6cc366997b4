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

from .registry import defprimitive

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
# np.unique's results: result `part` of the call the user wrote, whose `returns` name the
# results asked for besides the values (as many as the call's return_index=True...): the
# call made again for each, never a shorter one, since with sorted=False NumPy orders the
# values of np.unique(a) otherwise than those of np.unique(a, return_counts=True)
def _unique_options(returns, equal_nan, sorted):
    return {**{f"return_{r}": True for r in returns}, **({} if equal_nan else
            {"equal_nan": False}), **({} if sorted else {"sorted": False})}


def _unique(a, part, returns, equal_nan, sorted):
    out = np.unique(a, **_unique_options(returns, equal_nan, sorted))
    return out[part] if returns else out


def _unique_template(params):
    options = _unique_options(params["returns"], params["equal_nan"], params["sorted"])
    call = "np.unique({0}" + "".join(f", {k}={v}" for k, v in options.items()) + ")"
    return f"{call}[{params['part']}]" if params["returns"] else call


unique = defprimitive("unique", _unique, _unique_template)
bincount = defprimitive(
    "bincount", lambda x, *weights, minlength: np.bincount(
        x, weights[0] if weights else None, minlength=minlength),
    lambda params: "np.bincount({*}" + (f", minlength={params['minlength']}"
                                        if params["minlength"] else "") + ")",
    vjps=[None, lambda g, ans, x, w, minlength: g[x]], linear_in=(1,))
