"""Which elements an index selects, as far as the graph can tell, and whether two reads
or writes of one array can touch a common element.

A write `out[n, f, i, j] = v` or `h[:, t, :] = v` selects a box of the array: on each
axis a position, a range of positions, or the whole axis. Two boxes are apart when some
axis holds them apart: two different static positions, a position outside a range, two
ranges that do not meet, or, in a loop's step, two positions that are the same value
plus different offsets (`h[:, t, :]` and `h[:, t - 1, :]`). What cannot be known from
the graph (an index array, a mask, a slice bound read at run time, a size that is a
formula in n) counts as the whole axis, so "apart" is a proof and "may meet" the
default. The backward uses it to leave a write's cotangent unzeroed where no one reads
the zeros (backward/writes.py), the memory plan to write into an array while a view of
another part of it is still to be read (plan/memory.py).
"""

import numpy as np

from ..graph import Node, Slot, op

WHOLE = ("whole",)  # the whole axis, or a part of it not known


def region(index, args, shape):
    """The box `index` selects of an array of `shape`: one item per axis, each a
    position ("at", base, offset): the value of node `base` (None: 0) plus `offset`; a
    `range` of positions; or WHOLE. `args` are the indexing node's arguments (its
    Slots' values)."""
    items = index.items
    consumed = sum(_axes_taken(i, args) for i in items if i is not Ellipsis)
    out = []
    for item in items:
        if item is None:
            continue
        if item is Ellipsis:
            out += [WHOLE] * (len(shape) - consumed)
            continue
        if type(item) is Slot and _dtype(args[item.k]) == np.bool_:
            taken = _axes_taken(item, args)  # (a 0-d mask takes none: a new axis)
            mask = args[item.k]  # a traced mask: known only against its complement
            out += ([("mask", mask) if type(mask) is Node else WHOLE] +
                    [WHOLE] * (taken - 1)) if taken else []
            continue
        dim = shape[len(out)] if len(out) < len(shape) else None
        out.append(_along(item, args, dim))
    return tuple(out) + (WHOLE,) * (len(shape) - len(out))


def _axes_taken(item, args):
    """How many axes of the array an index item consumes (None: none; a mask: its ndim)."""
    if item is None:
        return 0
    if type(item) is Slot:
        a = args[item.k]
        if _dtype(a) == np.bool_:
            return len(a.shape) if hasattr(a, "shape") else 0
    return 1


def _dtype(a):
    """A Slot's value's dtype: a node's, a constant's (an array, a size formula's array:
    size_formulas.SymArray), a Python number's."""
    dtype = getattr(a, "dtype", None)
    return np.result_type(a) if dtype is None else dtype


def _along(item, args, dim):
    """One axis's item of a region (see `region`)."""
    if type(item) is Slot:
        return _position(args[item.k], dim)
    if type(item) is slice:
        bounds = (item.start, item.stop, item.step)
        if any(b is not None and type(b) is not int for b in bounds):
            return WHOLE  # a bound read at run time, or a formula in n
        if type(dim) is int:
            return range(*item.indices(dim))
        return WHOLE
    if type(item) is int:
        return _static(item, dim)
    return WHOLE


def _static(i, dim):
    if type(dim) is int and -dim <= i < 0:
        return ("at", None, i + dim)
    return ("at", None, i) if i >= 0 else WHOLE


def _position(a, dim):
    """A 0-d integer index: a constant, or a node plus an offset (t - 1 as (t, -1))."""
    if type(a) is not Node:
        if isinstance(a, (int, np.integer, np.ndarray)) and np.ndim(a) == 0 \
                and np.issubdtype(_dtype(a), np.integer):
            return _static(int(a), dim)
        return WHOLE
    if a.shape != () or a.dtype is None or a.dtype.kind not in "iu":
        return WHOLE
    offset = 0
    while op(a) in ("add", "subtract") and len(a.args) == 2:
        x, c = a.args
        if op(a) == "add" and type(x) is not Node:
            x, c = c, x
        if type(x) is not Node or type(c) is not int:
            break
        offset += c if op(a) == "add" else -c
        a = x
    return ("at", a, offset)


def apart(r, s, shape):
    """Whether the boxes r and s (of `region`, of an array of `shape`) share no element:
    some axis holds them apart, or one of them is empty."""
    for a, b, dim in zip(r, s, shape):
        if _apart(a, b, dim):
            return True
    return False


def _apart(a, b, dim):
    if a is WHOLE or b is WHOLE:
        return _empty(a) or _empty(b)
    masks = [x[1] for x in (a, b) if type(x) is tuple and x[0] == "mask"]
    if masks:
        return len(masks) == 2 and _complements(*masks)
    if type(a) is range and type(b) is range:
        return not _meet(a, b)
    if type(a) is range:
        a, b = b, a
    if type(b) is range:  # a position against a range: only a static one is known
        return not b or a[1] is None and a[2] not in b
    if a[1] is b[1]:  # the same value (or none) plus two offsets: apart when they differ
        gap = abs(a[2] - b[2])  # by less than the axis (t - 1 at t = 0 is the last element)
        return gap != 0 and (a[1] is None or type(dim) is int and gap < dim)
    return False


# comparisons as (relation, left, right): a < b is b > a; pairs of relations that no
# element satisfies both of, on the same operands (NaN satisfies neither: still apart)
_RELATIONS = {"greater": (">", False), "less": (">", True), "greater_equal": (">=", False),
              "less_equal": (">=", True), "equal": ("==", False), "not_equal": ("!=", False)}
_EXCLUSIVE = {((">", "ab"), (">", "ba")), ((">", "ab"), (">=", "ba")),
              ((">=", "ab"), (">", "ba")), ((">", "ab"), ("==", "ab")),
              ((">", "ab"), ("==", "ba")), (("==", "ab"), ("!=", "ab")),
              (("==", "ab"), ("!=", "ba"))}


def _complements(m, k):
    """Two masks that are never True at one element: `x >= 0` and `x < 0`, a mask and
    its negation (`~m`, np.logical_not(m))."""
    for p, q in ((m, k), (k, m)):
        if op(q) in ("invert", "logical_not") and q.args[0] is p:
            return True
    rm, rk = _relation(m), _relation(k)
    if rm is None or rk is None:
        return False
    (sm, am, bm), (sk, ak, bk) = rm, rk
    if _same(am, ak) and _same(bm, bk):
        order = "ab"
    elif _same(am, bk) and _same(bm, ak):
        order = "ba"
    else:
        return False
    pair = ((sm, "ab"), (sk, order))
    return pair in _EXCLUSIVE or (pair[1], pair[0]) in _EXCLUSIVE \
        or ((sk, "ab"), (sm, order)) in _EXCLUSIVE


_COMPLEMENTS = {(">", "ba"): ">=", (">=", "ba"): ">", ("==", "ab"): "!=", ("==", "ba"): "!=",
                ("!=", "ab"): "==", ("!=", "ba"): "=="}


def mask_complement(m, k):
    """k is True exactly where m is not: `~m`, np.logical_not(m), or the opposite
    comparison of the same operands (`x < c` of `x >= c`, `c <= x` of `x < c`; a NaN,
    which satisfies neither, is the one element the pair leaves out)."""
    for p, q in ((m, k), (k, m)):
        if op(q) in ("invert", "logical_not") and q.args[0] is p and q.dtype == np.bool_:
            return True
    rm, rk = _relation(m), _relation(k)
    if rm is None or rk is None:
        return False
    for order, (a, b) in (("ab", rk[1:]), ("ba", rk[2:0:-1])):
        if _same(rm[1], a) and _same(rm[2], b) and _COMPLEMENTS.get((rm[0], order)) == rk[0]:
            return True
    return False


def nan_sensitive(m, k):
    """The operands that must hold no NaN for masks m and k, complements by
    mask_complement, to be complements: a comparison's float operands (a NaN satisfies
    neither `x >= c` nor `x < c`); none for `~m`, and none of integers or booleans."""
    if any(op(q) in ("invert", "logical_not") and q.args[0] is p for p, q in ((m, k), (k, m))):
        return ()
    return tuple(a for a in m.args if type(a) is Node and a.dtype is not None
                 and a.dtype.kind in "fc")


def _relation(m):
    """A comparison as (relation, left, right), its operands swapped for < and <=."""
    found = _RELATIONS.get(op(m))
    if found is None or len(m.args) != 2:
        return None
    relation, swapped = found
    a, b = m.args
    return (relation, b, a) if swapped else (relation, a, b)


def _same(x, y):
    """The same operand: one node, or equal Python or NumPy numbers."""
    if type(x) is Node or type(y) is Node:
        return x is y
    return isinstance(x, (int, float, np.number)) and isinstance(y, (int, float, np.number)) \
        and x == y


def _empty(a):
    return type(a) is range and not a


def _meet(a, b):
    """Two ranges share a position."""
    if not a or not b:
        return False
    a, b = (r if r.step > 0 else r[::-1] for r in (a, b))
    if a.step == b.step == 1:
        return max(a.start, b.start) < min(a.stop, b.stop)
    shorter, longer = (a, b) if len(a) <= len(b) else (b, a)
    return any(i in longer for i in shorter)


class Boxes:
    """Boxes of one array, each with a number (`stamp`: the last statement a view of it
    is read at), grouped by their pattern (each axis's item, its static positions left
    out): two boxes of one pattern are apart exactly when their static positions differ,
    so a box is checked against the thousands of one loop's in one lookup; boxes of
    other patterns one by one."""

    __slots__ = ("groups",)

    def __init__(self):
        self.groups = {}  # pattern -> {static positions of a box of it: its largest stamp}

    def copy(self):
        other = Boxes()
        other.groups = {p: dict(keys) for p, keys in self.groups.items()}
        return other

    def add(self, box, stamp=0):
        pattern, key = _split(box)
        keys = self.groups.setdefault(pattern, {})
        keys[key] = max(keys.get(key, stamp), stamp)

    def update(self, other):
        """Every box of `other` added (`other` is left as it is)."""
        for pattern, keys in other.groups.items():
            mine = self.groups.setdefault(pattern, {})
            for key, stamp in keys.items():
                mine[key] = max(mine.get(key, stamp), stamp)

    def __len__(self):
        return sum(len(keys) for keys in self.groups.values())

    def meets(self, box, shape, since=0):
        """Whether `box` may share an element with a box of stamp `since` or more."""
        pattern, key = _split(box)
        if self.groups.get(pattern, {}).get(key, since - 1) >= since:
            return True
        for other, keys in self.groups.items():
            if other == pattern:
                continue  # (same pattern, other static positions: apart)
            if not apart(box, _joined(other, ()), shape) and any(
                    stamp >= since and not apart(box, _joined(other, k), shape)
                    for k, stamp in keys.items()):
                return True
        return False


_STATIC = ("static",)  # where a pattern had a static position


def _split(box):
    """(the box with its static positions as _STATIC, those positions)."""
    pattern = tuple(_STATIC if type(a) is tuple and a[0] == "at" and a[1] is None else a
                    for a in box)
    key = tuple(a[2] for a in box if type(a) is tuple and a[0] == "at" and a[1] is None)
    return pattern, key


def _joined(pattern, key):
    """The box of `pattern` with static positions `key` (none: each of them the whole
    axis, which meets what any position would)."""
    positions = iter(key)
    return tuple((("at", None, next(positions)) if key else WHOLE) if a is _STATIC
                 else a for a in pattern)
