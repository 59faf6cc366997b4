"""np.argmax, np.argmin, np.argsort, np.searchsorted, np.count_nonzero, np.nonzero (and
np.where with one argument), np.flatnonzero, np.argwhere, np.unique, np.bincount and their
ndarray methods: the derivative-free primitives of rules/indices.py, with axis normalized.
A traced array whose nonzero elements are counted is handed to generalize_counts.py first
(its count is data), and so is the length of np.unique's and np.bincount's results.
"""

import operator

import numpy as np

from ...errors import TracingError, UnsupportedOperationError, at
from ...trace import count_sources
from ...trace.boxes import Box, carries_gradient
from ...trace.context import current_trace, user_loc
from ...trace.recording import bind
from ..indices import (
    argmax,
    argmin,
    argsort,
    argwhere,
    bincount,
    count_nonzero,
    flatnonzero,
    nonzero,
    searchsorted,
    unique,
)
from .dispatch import boxmethod, check_no_out, normalize_axis, register_function


# ---- indices and counts -------------------------------------------------------------------
def _arg_extremum(prim, func):
    name = prim.name

    @register_function(func)
    def handler(a, axis=None, out=None, *, keepdims=False):
        check_no_out(out, f"np.{name}")
        axis = None if axis is None else normalize_axis(axis, np.ndim(a))
        return bind(prim, (a,), {"axis": axis, "keepdims": bool(keepdims)})

    @boxmethod(name)
    def method(self, axis=None, out=None, *, keepdims=False):
        return handler(self, axis, out, keepdims=keepdims)


_arg_extremum(argmax, np.argmax)
_arg_extremum(argmin, np.argmin)


@register_function(np.argsort)
def _argsort(a, axis=-1, kind=None, order=None, *, stable=None):
    if order is not None:
        raise TracingError(at(user_loc(), "np.argsort(..., order=...) sorts structured "
                              "arrays, which cannot be traced"))
    if stable:
        kind = "stable"
    axis = None if axis is None else normalize_axis(axis, np.ndim(a))
    return bind(argsort, (a,), {"axis": -1 if axis == np.ndim(a) - 1 else axis, "kind": kind})


@boxmethod("argsort")
def _argsort_method(self, axis=-1, kind=None, order=None, *, stable=None):
    return _argsort(self, axis, kind, order, stable=stable)


@register_function(np.count_nonzero)
def _count_nonzero(a, axis=None, *, keepdims=False):
    axis = None if axis is None else normalize_axis(axis, np.ndim(a))
    return bind(count_nonzero, (a,), {"axis": axis, "keepdims": bool(keepdims)})


# ---- data-dependent shapes ----------------------------------------------------------------
def _counted(x):
    if type(x) is Box:
        if np.ndim(x.value) == 0:
            raise TracingError(at(user_loc(), "np.nonzero of a 0-d traced value: use np.where("
                                  "condition, x, y) or a 1-d array"))
        return count_sources.observe(current_trace(), x)
    return x


@register_function(np.nonzero)
def _nonzero(a):
    a = _counted(a)
    return tuple(bind(nonzero, (a,), {"axis": d}) for d in range(np.ndim(a)))


boxmethod("nonzero")(_nonzero)
register_function(np.flatnonzero)(lambda a: bind(flatnonzero, (_counted(a),), {}))
register_function(np.argwhere)(lambda a: bind(argwhere, (_counted(a),), {}))


# ---- sorted data: searchsorted ---------------------------------------------------------------
@register_function(np.searchsorted)
def _searchsorted(a, v, side="left", sorter=None):
    if side not in ("left", "right"):
        raise ValueError(at(user_loc(), f"np.searchsorted: side must be 'left' or 'right', "
                            f"not {side!r}"))
    args = (a, v) if sorter is None else (a, v, sorter)
    return bind(searchsorted, args, {"side": side, "sorter": sorter is not None})


@boxmethod("searchsorted")
def _searchsorted_method(self, v, side="left", sorter=None):
    return _searchsorted(self, v, side, sorter)


# ---- results as long as the data says: unique, bincount ------------------------------------
@register_function(np.unique)
def _unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None,
            *, equal_nan=True, sorted=True):
    """One primitive per result asked for, all counted by one source (their length). The
    values of an array a derivative flows through are read at the indices of their first
    occurrences, ar.ravel()[index], so that the derivative reaches those elements."""
    if axis is not None:
        raise UnsupportedOperationError(at(user_loc(), "np.unique(..., axis=...) of a traced "
                                           "array is not supported: only axis=None"))
    trace = current_trace()
    differentiated = type(ar) is Box and carries_gradient(trace, ar.node)
    if differentiated and not sorted:
        raise UnsupportedOperationError(at(user_loc(), "np.unique(..., sorted=False) of an "
                                           "array a derivative flows through: NumPy promises "
                                           "no order, so its values' derivative cannot be "
                                           "placed; leave sorted=True"))
    asked = [r for r, on in (("index", return_index or differentiated),
                             ("inverse", return_inverse), ("counts", return_counts)) if on]
    params = {"returns": tuple(asked), "equal_nan": bool(equal_nan), "sorted": bool(sorted)}
    key = ("unique", count_sources.length_key(trace, ar), bool(equal_nan))

    def part(i, resize=None):
        box = bind(unique, (ar,), {"part": i, **params})
        return count_sources.observe_length(trace, box, key, int(np.size(ar)), resize)

    out = [part(0)] + [part(i + 1, _in_range if r == "inverse" else None)
                       for i, r in enumerate(asked)]
    if differentiated:  # the values at their first occurrences: out[1] is the index
        out[0] = np.ravel(ar)[out[1]]
        if not return_index:
            del out[1]
    return out[0] if len(out) == 1 else tuple(out)


def _in_range(inverse, count):
    """np.unique's inverse where a probe changed the count: indices into that many values."""
    return inverse % count if count else np.zeros_like(inverse)


@register_function(np.bincount)
def _bincount(x, weights=None, minlength=0):
    """Its length, max(x) + 1 or minlength, is data: a count source when x is traced,
    probed at greater lengths only (a shorter one would not hold x's labels, which the
    code may index it with: counts[x])."""
    trace = current_trace()
    box = bind(bincount, (x,) if weights is None else (x, weights),
               {"minlength": operator.index(minlength)})
    if type(x) is not Box:
        return box
    key = ("bincount", count_sources.length_key(trace, x), operator.index(minlength))
    length = len(box.value)
    return count_sources.observe_length(trace, box, key, 2 * length + 2, least=length)
