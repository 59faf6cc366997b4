"""Assembly primitives: tile, repeat by a constant count, constant pad, triu and tril.

These are the only operations of the assembly family (stacking, splitting, flipping,
rolling, rotating, padding, diagonals, take) that are primitives of their own: one line
of NumPy beats several there. The rest are indexing or concatenation in disguise and are
written that way in numpy_api/assembly.py, so their gradients come from getitem,
scatter_add and concatenate.
"""

import numpy as np

from ..graph import Index
from .indexing import getitem
from .registry import defprimitive


# ---- tile and repeat ----------------------------------------------------------------------
def _tile_layout(shape, reps):
    """shape and reps padded with leading ones to the same length."""
    n = max(len(shape), len(reps))
    return (1,) * (n - len(shape)) + tuple(shape), (1,) * (n - len(reps)) + tuple(reps)


def _tile_vjp(g, ans, x, reps):
    """View the cotangent as (r0, d0, r1, d1, ...) and sum the copies away."""
    shape, reps = _tile_layout(np.shape(x), reps)
    split, copies = [], []
    for r, d in zip(reps, shape, strict=True):
        if r != 1:
            copies.append(len(split))
            split.append(r)
        split.append(d)
    return np.reshape(np.sum(np.reshape(g, tuple(split)), axis=tuple(copies)), np.shape(x))


def _repeat_vjp(g, ans, x, repeats, axis):
    shape = np.shape(x)
    split = shape[:axis + 1] + (repeats,) + shape[axis + 1:]
    return np.sum(np.reshape(g, split), axis=axis + 1)


tile = defprimitive("tile", lambda x, reps: np.tile(x, reps), "np.tile({0}, {reps})",
                    vjps=[_tile_vjp], linear_in=(0,))
repeat = defprimitive("repeat", lambda x, repeats, axis: np.repeat(x, repeats, axis=axis),
                      "np.repeat({0}, {repeats}, axis={axis})", vjps=[_repeat_vjp],
                      linear_in=(0,))


# ---- pad and triangles ------------------------------------------------------------------
def _pad_vjp(g, ans, x, pad_width, constant_values):
    return getitem(g, index=Index(slice(before, before + n)
                                  for (before, _), n in zip(pad_width, np.shape(x), strict=True)))


pad = defprimitive("pad", lambda x, pad_width, constant_values:
                   np.pad(x, pad_width, constant_values=constant_values),
                   "np.pad({0}, {pad_width})", {"constant_values": 0}, vjps=[_pad_vjp],
                   jvps=[lambda t, ans, x, pad_width, constant_values:
                         pad(t, pad_width=pad_width, constant_values=0)])
triu = defprimitive("triu", lambda x, k: np.triu(x, k), "np.triu({0})", {"k": 0},
                    vjps=[lambda g, ans, x, k: triu(g, k=k)], linear_in=(0,))
tril = defprimitive("tril", lambda x, k: np.tril(x, k), "np.tril({0})", {"k": 0},
                    vjps=[lambda g, ans, x, k: tril(g, k=k)], linear_in=(0,))
