"""np.argmax, np.argmin, np.argsort, np.count_nonzero, np.nonzero (and np.where with one
argument), np.flatnonzero, np.argwhere and their ndarray methods: the derivative-free
primitives of rules/indices.py, with axis normalized. A traced array whose nonzero
elements are counted is handed to generalize_counts.py first (its count is data).
"""

import numpy as np

from ... import count_sources
from ...errors import TracingError, at
from ...tracer import Box, bind, current_trace, user_loc
from ..indices import argmax, argmin, argsort, argwhere, count_nonzero, flatnonzero, nonzero
from . import boxmethod, check_no_out, normalize_axis, register_function


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
