"""Values computed from traced inputs that have no derivative: indices, counts, and
constants of a traced array's shape.

Indices and counts are recorded as primitives without rules, so that the generated code
recomputes them from its inputs on every call (an argmax baked in as a constant would be
right only for the values it was traced with). Their results are integers, which neither
engine differentiates. Functions whose result has a data-dependent shape (np.nonzero,
np.argwhere, np.flatnonzero) are primitives too; sizes.py handles their length.
"""

import numpy as np

from .. import sizes
from ..errors import TracingError, at
from ..tracer import Box, bind, current_trace, user_loc
from . import boxmethod, check_no_out, defprimitive, normalize_axis, register_function

_AXIS = {"axis": None, "keepdims": False}


# ---- indices and counts -------------------------------------------------------------------
def _arg_extremum(name, func):
    prim = defprimitive(name, lambda x, axis, keepdims: func(x, axis=axis, keepdims=keepdims),
                        f"np.{name}({{0}})", dict(_AXIS))

    @register_function(func)
    def handler(a, axis=None, out=None, *, keepdims=False):
        check_no_out(out, f"np.{name}")
        axis = None if axis is None else normalize_axis(axis, np.ndim(a))
        return bind(prim, (a,), {"axis": axis, "keepdims": bool(keepdims)})

    @boxmethod(name)
    def method(self, axis=None, out=None, *, keepdims=False):
        return handler(self, axis, out, keepdims=keepdims)

    return prim


argmax = _arg_extremum("argmax", np.argmax)
argmin = _arg_extremum("argmin", np.argmin)

argsort = defprimitive("argsort", lambda x, axis, kind: np.argsort(x, axis=axis, kind=kind),
                       "np.argsort({0})", {"axis": -1, "kind": None})


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


count_nonzero = defprimitive(
    "count_nonzero", lambda x, axis, keepdims: np.count_nonzero(x, axis=axis, keepdims=keepdims),
    "np.count_nonzero({0})", dict(_AXIS))


@register_function(np.count_nonzero)
def _count_nonzero(a, axis=None, *, keepdims=False):
    axis = None if axis is None else normalize_axis(axis, np.ndim(a))
    return bind(count_nonzero, (a,), {"axis": axis, "keepdims": bool(keepdims)})


# ---- data-dependent shapes ----------------------------------------------------------------
# Their results are as long as the input has nonzero elements: that count is read at run
# time where the code allows it, and guarded where it does not (sizes.py).
nonzero = defprimitive("nonzero", lambda x, axis: np.nonzero(x)[axis],
                       lambda params: f"np.nonzero({{0}})[{params['axis']}]")
flatnonzero = defprimitive("flatnonzero", np.flatnonzero, "np.flatnonzero({0})")
argwhere = defprimitive("argwhere", np.argwhere, "np.argwhere({0})")


def _counted(x):
    if type(x) is Box:
        if np.ndim(x.value) == 0:
            raise TracingError(at(user_loc(), "np.nonzero of a 0-d traced value: use np.where("
                                  "condition, x, y) or a 1-d array"))
        return sizes.observe(current_trace(), x)
    return x


@register_function(np.nonzero)
def _nonzero(a):
    a = _counted(a)
    return tuple(bind(nonzero, (a,), {"axis": d}) for d in range(np.ndim(a)))


boxmethod("nonzero")(_nonzero)
register_function(np.flatnonzero)(lambda a: bind(flatnonzero, (_counted(a),), {}))
register_function(np.argwhere)(lambda a: bind(argwhere, (_counted(a),), {}))
