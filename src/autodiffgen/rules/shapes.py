"""Shape primitives: reshape, transpose, squeeze, expand_dims, broadcast_to, concatenate,
stack; and zeros_like, ones_like, full_like, the buffers the user's writes fill.

Their cotangents are the inverse rearrangement; nothing here does arithmetic except
broadcast_to, whose rule leaves the summing to `unbroadcast`. np.moveaxis, np.ravel, the
atleast_nd family and the other NumPy spellings are in numpy_api/shapes.py.
"""

import numpy as np

from ..graph import Index
from .indexing import getitem
from .registry import defprimitive
from .vjps import PIECES


def _transpose_template(params):
    return "{0}.T" if params["axes"] is None else "np.transpose({0}, {axes})"


def _inverse(axes):
    return None if axes is None else tuple(int(i) for i in np.argsort(axes))


reshape = defprimitive("reshape", lambda x, shape: np.reshape(x, shape),
                       "np.reshape({0}, {shape})",
                       vjps=[lambda g, ans, x, shape: np.reshape(g, np.shape(x))], linear_in=(0,))
transpose = defprimitive("transpose", lambda x, axes: np.transpose(x, axes), _transpose_template,
                         vjps=[lambda g, ans, x, axes: transpose(g, axes=_inverse(axes))],
                         linear_in=(0,))
squeeze = defprimitive("squeeze", lambda x, axis: np.squeeze(x, axis), "np.squeeze({0})",
                       {"axis": None},
                       vjps=[lambda g, ans, x, axis: np.reshape(g, np.shape(x))], linear_in=(0,))
expand_dims = defprimitive("expand_dims", lambda x, axis: np.expand_dims(x, axis),
                           "np.expand_dims({0}, {axis})",
                           vjps=[lambda g, ans, x, axis: np.reshape(g, np.shape(x))],
                           linear_in=(0,))
broadcast_to = defprimitive("broadcast_to", lambda x, shape: np.broadcast_to(x, shape),
                            "np.broadcast_to({0}, {shape})",
                            vjps=[lambda g, ans, x, shape: g], linear_in=(0,))


def _concatenate_vjp(i, g, ans, *arrays, axis):
    start = sum(np.shape(a)[axis] for a in arrays[:i])
    stop = start + np.shape(arrays[i])[axis]
    return getitem(g, index=Index((slice(None),) * axis + (slice(start, stop),)))


def _stack_vjp(i, g, ans, *arrays, axis):
    return getitem(g, index=Index((slice(None),) * axis + (i,)))


concatenate = defprimitive("concatenate", lambda *xs, axis: np.concatenate(xs, axis=axis),
                           "np.concatenate([{*}])", {"axis": 0}, variadic_vjp=_concatenate_vjp,
                           linear_in="all")
stack = defprimitive("stack", lambda *xs, axis: np.stack(xs, axis=axis), "np.stack([{*}])",
                     {"axis": 0}, variadic_vjp=_stack_vjp, linear_in="all")


def _concatenate_pieces(g, arrays, params):
    """_concatenate_vjp for every argument, the offsets summed once."""
    axis = params["axis"]
    stops = np.cumsum([np.shape(a)[axis] for a in arrays]).tolist()
    return lambda i: getitem(g, index=Index((slice(None),) * axis + (
        slice(stops[i - 1] if i else 0, stops[i]),)))


PIECES[concatenate] = _concatenate_pieces
PIECES[stack] = lambda g, arrays, params: lambda i: _stack_vjp(i, g, None, axis=params["axis"])


# ---- buffers: np.zeros_like(r), np.ones_like(r), np.full_like(r, v) in the user's code --------
# A traced array (no derivative reaches r), so that a buffer filled by writes (`out =
# np.zeros_like(r); out[m] = r[m] ** 2`) records them as traced writes (numpy_api/writes.py).
# Made inside a rule, it stays a constant. full_like's derivative in a traced v is the sum
# of the cotangent over what v was broadcast to (unbroadcast).
zeros_like = defprimitive("zeros_like", lambda a, dtype: np.zeros(np.shape(a), dtype),
                          "np.zeros_like({0}, dtype={dtype})", vjps=[None])
ones_like = defprimitive("ones_like", lambda a, dtype: np.ones(np.shape(a), dtype),
                         "np.ones_like({0}, dtype={dtype})", vjps=[None])
full_like = defprimitive("full_like", lambda a, v, dtype: np.full_like(a, v, dtype=dtype),
                         "np.full_like({0}, {1}, dtype={dtype})",
                         vjps=[None, lambda g, ans, a, v, dtype: g], linear_in=(1,))
