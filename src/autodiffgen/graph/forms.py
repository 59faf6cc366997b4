"""Forms of the traced forward that more than one stage recognizes: the sigmoid
1 / (1 + exp(-z)) as users write it (the whole rules of whole_rules.py differentiate
it from its output; the stable-forms pass rewrites the log of it) or in its stable form
(the exp of -|z| only), and the softmax, a
normalized exponential in any of its spellings (whole_rules.py).

Each matcher takes the set of nodes it may look into (`computed`): what the caller
may rewrite or has traced in this graph.
"""

import numpy as np

from . import Node, constant_key, has_effect, op


def sigmoid_of(s, computed):
    """(z, its nodes) for s = 1 / (1 + exp(-z)) or reciprocal(1 + exp(-z)), else None."""
    if computed_op(s, computed, "divide") and is_one(s.args[0]):
        d = s.args[1]
    elif computed_op(s, computed, "reciprocal"):
        d = s.args[0]
    else:
        return None
    e = computed_op(d, computed, "add") and plus_one(d, computed)
    n = e and computed_op(e.args[0], computed, "negative")
    return (n.args[0], {s, d, e, n}) if n else None


def stable_sigmoid_of(s, computed):
    """(z, its nodes) for the sigmoid that takes exp only of -|z|: s = t / (1 + e) with
    e = exp(-|z|) (np.exp(-np.abs(z)), or np.where(z >= 0, -z, z)) and t 1 where z > 0,
    e where z < 0 (np.where(z < 0, e, 1), np.where(z >= 0, 1, e)), as the masked writes
    of course code record it (rules/masked_writes.py). Either test may be strict, e being
    1 at z = 0. Else None. The nodes leave the tests out: they have no derivative."""
    if not computed_op(s, computed, "divide"):
        return None
    t, d = s.args
    e = computed_op(d, computed, "add") and plus_one(d, computed)
    found = e and _minus_abs(e.args[0], computed)
    if not found or not computed_op(t, computed, "where"):
        return None
    z, parts = found
    c, chosen, other = t.args
    sign = _sign_of(c, z)
    if not (sign == "+" and is_one(chosen) and other is e
            or sign == "-" and chosen is e and is_one(other)):
        return None
    return z, {s, d, e, t, *parts}


def _minus_abs(u, computed):
    """(z, the nodes) for u = -|z|: -np.abs(z), np.where(z >= 0, -z, z), np.where(z < 0,
    z, -z); else None."""
    if computed_op(u, computed, "negative") and computed_op(u.args[0], computed, "absolute"):
        return u.args[0].args[0], {u, u.args[0]}
    if not computed_op(u, computed, "where"):
        return None
    c, a, b = u.args
    for minus, z, sign in ((a, b, "+"), (b, a, "-")):
        if computed_op(minus, computed, "negative") and minus.args[0] is z \
                and type(z) is Node and _sign_of(c, z) == sign:
            return z, {u, minus}
    return None


_SIGNS = {"greater": "+", "greater_equal": "+", "less": "-", "less_equal": "-"}


def _sign_of(c, z):
    """"+" for a test that z is positive (z > 0, z >= 0, 0 < z), "-" for negative."""
    sign = _SIGNS.get(op(c)) if type(c) is Node and len(c.args) == 2 else None
    if sign is None:
        return None
    a, b = c.args
    if a is z and _is_zero(b):
        return sign
    if b is z and _is_zero(a):
        return "-" if sign == "+" else "+"
    return None


def _is_zero(c):
    return type(c) is not Node and not isinstance(c, (bool, np.bool_)) and np.ndim(c) == 0 \
        and isinstance(c, (int, float, np.number)) and bool(c == 0)


def plus_one(node, computed):
    """The exp node of 1 + exp(.) or exp(.) + 1."""
    a, b = node.args
    for x, c in ((a, b), (b, a)):
        if is_one(c) and computed_op(x, computed, "exp"):
            return x
    return None


def computed_op(x, computed, name):
    """x if it is a node of `computed` applying the built-in primitive `name`."""
    return x if type(x) is Node and x in computed and op(x) == name else None


def is_one(c):
    """A constant scalar 1 (not a bool, not an array of them)."""
    if type(c) is Node or isinstance(c, (bool, np.bool_)) or np.ndim(c) != 0:
        return False
    return isinstance(c, (int, float, np.number, np.ndarray)) and bool(c == 1)


# ---- normalized exponentials: a softmax however it is spelled ------------------------------
def softmax_of(p, computed):
    """(z, axes) for p = exp(z - c) / sum(exp(z - c), axes), else None.

    The spellings: divided by the sum, or multiplied by its reciprocal (`1 / t`,
    np.reciprocal); in place (`e /= t`, `e *= 1 / t` are traced as those); the sum with
    keepdims, or without it over leading axes, or given its size-1 axes back (`t[:, None]`,
    a reshape); the numerator and the sum's exp one node or two equal computations
    (`np.exp(y - np.max(y)) / np.sum(np.exp(y - np.max(y)))`). The shift c is anything
    constant along the axes (a max, a number, another input): exp(z - c) normalized does
    not depend on it, so z is what it is differentiated in, and c gets nothing from it."""
    if computed_op(p, computed, "divide"):
        e, t = p.args
    elif computed_op(p, computed, "multiply"):
        e, t = _reciprocal_factor(p, computed)
    else:
        return None
    t, axes = _denominator(t, computed, len(p.shape))
    if not computed_op(e, computed, "exp") or t is None or t.dtype != e.dtype \
            or p.shape != e.shape or p.dtype != e.dtype or not np.issubdtype(e.dtype, np.floating):
        return None
    other = computed_op(t.args[0], computed, "exp")
    if not other or not same_value(e.args[0], other.args[0]):
        return None
    return unshifted(e.args[0], axes, computed), axes


def log_softmax_of(y, computed):
    """(z, axes, e, t) for y = s - log(t), t = sum(e, axes), e = exp(s), s = z - c (c
    constant along the axes, as softmax_of's), or y = z - (c + log(t)) with e = exp(z - c)
    (a logsumexp subtracted); e / t is the softmax. Else None."""
    if not computed_op(y, computed, "subtract") or type(y.args[0]) is not Node:
        return None
    a, b = y.args
    c = None
    if computed_op(b, computed, "add"):
        c, b = b.args if computed_op(b.args[1], computed, "log") else b.args[::-1]
    t = b.args[0] if computed_op(b, computed, "log") else None
    total, axes = _denominator(t, computed, len(y.shape))
    e = total is not None and computed_op(total.args[0], computed, "exp")
    if not e or total.dtype != e.dtype or not (y.shape == a.shape == e.shape) \
            or not (y.dtype == a.dtype == e.dtype) or not np.issubdtype(e.dtype, np.floating):
        return None
    s = e.args[0]
    if c is None:
        return (unshifted(a, axes, computed), axes, e, t) if same_value(a, s) else None
    if unshifted(s, axes, computed) is s or not same_value(s.args[0], a) \
            or not same_value(s.args[1], c):
        return None
    return a, axes, e, t


def _reciprocal_factor(p, computed):
    """(e, t) of p = e * (1 / t) or (1 / t) * e, e * reciprocal(t); (None, None) else."""
    for e, r in (p.args, p.args[::-1]):
        if computed_op(r, computed, "reciprocal"):
            return e, r.args[0]
        if computed_op(r, computed, "divide") and is_one(r.args[0]):
            return e, r.args[1]
    return None, None


def _denominator(t, computed, ndim):
    """(the sum, its sorted axes) of a denominator that broadcasts back along the axes it
    summed: a sum with keepdims, or without over leading axes, or given its size-1 axes
    back (`t[:, None]`, a reshape, expand_dims); (None, None) otherwise."""
    if computed_op(t, computed, "sum"):
        axes = _axes(t.params["axis"], ndim)
        if axes is not None and (t.params["keepdims"] or axes == tuple(range(len(axes)))):
            return t, axes
        return None, None
    inner = type(t) is Node and t in computed and len(t.args) == 1 \
        and computed_op(t.args[0], computed, "sum")
    if not inner or inner.params["keepdims"] or not (
            op(t) in ("reshape", "expand_dims") or op(t) == "getitem" and all(
                i is None or i == slice(None) for i in t.params["index"].items)):
        return None, None
    axes = _axes(inner.params["axis"], ndim)
    if axes is None or len(t.shape) != ndim or t.shape != _with_ones(inner.shape, axes, ndim):
        return None, None
    return inner, axes


def _with_ones(shape, axes, ndim):
    """shape with size-1 axes put back at `axes` (as keepdims=True has it), or None."""
    if len(shape) + len(axes) != ndim:
        return None
    rest = iter(shape)
    return tuple(1 if k in axes else next(rest) for k in range(ndim))


def _axes(axis, ndim):
    """The axes a reduction's `axis` names, sorted and non-negative; None if out of range."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    if any(not -ndim <= a < ndim for a in axes):
        return None
    return tuple(sorted({int(a) % ndim for a in axes}))


def unshifted(s, axes, computed):
    """z for s = z - c with c constant along `axes` (of size 1 there, as s's shape is
    z's); s itself otherwise."""
    if computed_op(s, computed, "subtract") and type(s.args[0]) is Node \
            and s.args[0].shape == s.shape and s.args[0].dtype == s.dtype:
        c = np.shape(s.args[1]) if type(s.args[1]) is not Node else s.args[1].shape
        ones = (1,) * (len(s.shape) - len(c)) + tuple(c)
        if len(ones) == len(s.shape) and all(ones[k] == 1 for k in axes):
            return s.args[0]
    return s


def same_value(a, b, depth=4):
    """a and b are one value: the same node, equal constants, or the same built-in step
    (no random draw) of the same values, looked into `depth` steps deep."""
    if a is b:
        return True
    if type(a) is not Node or type(b) is not Node:
        return type(a) is not Node and type(b) is not Node and constant_key(a) == constant_key(b)
    if depth == 0 or op(a) is None or a.prim is not b.prim or has_effect(a) \
            or a.shape != b.shape or a.dtype != b.dtype or len(a.args) != len(b.args) \
            or a.params.keys() != b.params.keys():
        return False
    return all(constant_key(a.params[k]) == constant_key(b.params[k]) for k in a.params) \
        and all(same_value(x, y, depth - 1) for x, y in zip(a.args, b.args))
