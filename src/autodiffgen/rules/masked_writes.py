"""Writes under complementary masks recorded as one elementwise `np.where`.

Course code writes the numerically stable sigmoid with two masks:

    z = np.zeros_like(x)
    z[x >= 0] = np.exp(-x[x >= 0])
    z[x < 0] = np.exp(x[x < 0])
    top = np.ones_like(x)
    top[x < 0] = z[x < 0]

Traced as written, that is four gathers, three scatters and, in the backward, as many
again plus the zeroing copies of the writes' rules: six boolean selections per sigmoid
where the author's backward is `s * (1 - s)`. Each write is setitem's `simplify` here (a
rule of the primitive, as `x * seed` is multiply's): at the moment it is recorded, a
write whose result is an elementwise function of whole arrays is recorded as that
function instead, so every engine (the traced graph, the tape, forward mode, vmap)
differentiates the whole-array form with the ordinary rules of its steps:

- a write `y[k] = b` into `y = setitem(base, a, m)`, with k the complement of m (`~m`, or
  `x < c` against `x >= c`: mask_complement) and a, b computed from selections `u[m]`,
  `u[k]`: y is where(m, A, B) whatever `base` held, for A and B the same steps applied
  to the whole arrays;
- a write `y[m] = a` into a fresh constant (zeros_like, ones_like, full_like), with a
  cheap whole-array value (below): y is where(m, A, fill).

What is sound. Applied to the whole array, exp(-x) overflows (and warns) where x < 0, which
the masked code never computed. So the two sides are merged step by step: where a and b
apply the same elementwise step (exp and exp), the merged value is that step applied to
the merged arguments, and only where they differ (-x[m] against x[k]) is a `where` taken,
of whole arrays computed by steps that cannot overflow or warn (a selection's array, a
negation, an absolute value, a constant): exp(where(m, -x, x)). At each element the new
code computes exactly what the masked code computed there, no value more: no warning, inf
or nan it did not have. Where the sides differ by a step that can warn, nothing changes.
One difference is left: `x >= 0` and `x < 0` both miss a NaN, where the masked code keeps
the fill (0) and the merged form propagates the NaN (what np.exp(nan) gives). So masks
that are complements by opposite comparisons of floats (not `~m`, not integers) are
complements only of values without NaN, a fact the trace reads from the values: it is a
guard, `np.isnan(x).any()` once per compared array (the array a slice of it views, when
it is one: one check for all the gates of an LSTM), and a call with a NaN traces the
masked writes as written, which any value then takes exactly. A NaN at trace time keeps
the writes. The merged value is also checked against the write's own at trace time, and
any other difference keeps the write as traced (but not in a trace that probes other
mask counts, whose changed masks are no complements: generalize/counts.py keeps only its
graph).

The selections the old form read are then read by nothing (the passes drop them); their
masks' counts were observed when they were traced, and generalize/counts.py serves them
as before.
"""

import numpy as np

from ..errors import TracingError
from ..graph import Node, Slot, constant_key, has_effect, op
from ..graph.forms import same_value
from ..trace.boxes import Box
from ..trace.context import current_trace
from .buffers import ufunc_of
from .regions import mask_complement, nan_sensitive
from .registry import PRIMITIVES

# steps that cannot overflow, underflow or warn on any float: a `where` of their results
# computes nothing the masked code would not have
_CHEAP = {"negative", "positive", "absolute", "fabs"}
_FILLS = {"zeros_like": 0, "ones_like": 1}
_DEPTH = 12  # how many steps deep the two sides are merged


def masked_where(args, params, value):
    """setitem's simplify: the where-form of this write (module doc), or None."""
    trace = current_trace()
    x, v, *arrays = args
    m = _mask(params["index"], arrays, x)
    if trace is None or m is None or type(x) is not Box \
            or not np.issubdtype(np.result_type(value), np.floating):
        return None
    boxes, probed, compared = trace.boxes, getattr(trace, "probed", None), ()
    if op(x.node) == "setitem" and _mask(x.node.params["index"], x.node.args[2:], x.node) \
            is not None and mask_complement(x.node.args[2], m.node):
        compared = _viewed(nan_sensitive(x.node.args[2], m.node))
        if not probed and any(np.isnan(boxes[a].value).any() for a in compared):
            return None  # a NaN, which neither mask selects: the writes as written
        first = boxes[x.node.args[2]]  # the first write's mask, as its write saw it
        new = _merged(x.node.args[1], _node(v), first, m.node, boxes, _DEPTH)
    else:
        new = _filled(x.node, _node(v), m, boxes)
    if new is None or not (probed or _equal(new.value, value)):
        return None  # (a probe's changed masks are no longer complements: its values differ)
    return new if _nan_guarded(trace, compared) else None


def _viewed(nodes):
    """The arrays to check for NaN: each node, or the array a slice of it views (one
    check serves every slice), each once, in order."""
    out = {}
    for a in nodes:
        while op(a) == "getitem" and type(a.args[0]) is Node and len(a.args) == 1:
            a = a.args[0]
        out[a] = None
    return tuple(out)


def _nan_guarded(trace, arrays):
    """Guards that `arrays` hold no NaN (module doc), one per array per trace; False when
    the code cannot check one (a random draw's: checking would draw again)."""
    for a in arrays:
        if any(g.params["test"] == "isnan_any" and g.args[0] is a for g in trace.guards):
            continue
        try:
            trace.guard(trace.boxes[a], "isnan_any", False)
        except TracingError:
            return False
    return True


def _mask(index, arrays, x):
    """The Box (or node) of the one boolean mask, shaped like x, that `index` is."""
    items = index.items
    if len(items) != 1 or type(items[0]) is not Slot or len(arrays) != 1:
        return None
    m = arrays[0]
    node = _node(m)
    if type(node) is not Node or node.dtype != np.bool_ or node.shape != _shape(x) \
            or node.shape == ():
        return None
    return m


def _shape(x):
    return x.node.shape if type(x) is Box else x.shape


def _node(v):
    return v.node if type(v) is Box else v


def _filled(base, v, m, boxes):
    """A Box of where(m, V, fill) for a write of v into a fresh constant array (`base`:
    zeros_like, ones_like, full_like), V the whole value v selects, if it is cheap."""
    name = op(base)
    fill = _FILLS[name] if name in _FILLS else base.args[1] if name == "full_like" else None
    whole = None if fill is None else _spread(v, m.node, boxes)
    if whole is None:
        return None
    return PRIMITIVES["where"](m, whole, boxes[fill] if type(fill) is Node else fill)


def _merged(a, b, m, k, boxes, depth):
    """A Box of where(m, A, B) for a computed from selections by m (a Box), b by k (a
    node, m's complement): the common steps of a and b applied to the merged arguments, a `where`
    only of cheap whole values (module doc). None when there is no such form."""
    if depth and _same_step(a, b):
        parts = [_merged(p, q, m, k, boxes, depth - 1) for p, q in zip(a.args, b.args)]
        if all(p is not None for p in parts):
            return a.prim(*parts, **a.params)
    whole_a, whole_b = _spread(a, m.node, boxes), _spread(b, k, boxes)
    if whole_a is None or whole_b is None:
        return None
    if whole_a is whole_b or type(whole_a) is not Box and type(whole_b) is not Box \
            and constant_key(whole_a) == constant_key(whole_b):
        return whole_a
    return PRIMITIVES["where"](m, whole_a, whole_b)


def _same_step(a, b):
    """a and b apply one elementwise step (a ufunc, the same parameters)."""
    return type(a) is Node and type(b) is Node and a.prim is b.prim and op(a) is not None \
        and ufunc_of(a.prim) is not None and not has_effect(a) and len(a.args) == len(b.args) \
        and a.params.keys() == b.params.keys() \
        and all(constant_key(a.params[p]) == constant_key(b.params[p]) for p in a.params)


def _spread(a, m, boxes, depth=_DEPTH):
    """The whole-array value (a Box or a number) that `a`, computed from selections by
    mask m, is the selection of, if only cheap steps make it (module doc); else None."""
    if type(a) is not Node or a.shape == ():  # a number, or a 0-d value: the same everywhere
        return boxes[a] if type(a) is Node else a if np.ndim(a) == 0 else None
    name = op(a)
    if name == "getitem" and len(a.args) == 2 and type(a.args[1]) is Node \
            and a.params["index"].items == (Slot(1),) and same_value(a.args[1], m) \
            and type(a.args[0]) is Node and a.args[0].shape == m.shape:
        return boxes[a.args[0]]
    if name in _CHEAP and len(a.args) == 1 and depth:
        inner = _spread(a.args[0], m, boxes, depth - 1)
        return None if inner is None else a.prim(inner, **a.params)
    return None


def _equal(new, value):
    """The merged value is the write's, element for element (NaN where it has NaN)."""
    return np.shape(new) == np.shape(value) and np.result_type(new) == np.result_type(value) \
        and np.array_equal(new, value, equal_nan=True)
