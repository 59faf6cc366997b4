"""rules/regions.py: which elements an index selects, and when two indexes provably
select no common element. "Apart" must be a proof: every pair it calls apart is checked
against NumPy by writing through both indexes."""

import numpy as np
import pytest

from autodiffgen.graph import Index, Node, Slot
from autodiffgen.rules import PRIMITIVES
from autodiffgen.rules.regions import WHOLE, apart, region

SHAPE = (4, 5, 6)


def _box(*items, args=()):
    return region(Index(items), (None, *args), SHAPE)


def _touch(items):
    """The elements an index of static items selects, as a boolean array."""
    hit = np.zeros(SHAPE, bool)
    hit[tuple(items)] = True
    return hit


STATIC = [
    ((1,), (2,), True),
    ((1,), (-3,), False),                      # -3 is 1 on an axis of 4
    ((-1,), (3,), False),
    ((slice(None), 2), (slice(None), 3), True),
    ((slice(0, 2),), (slice(2, 4),), True),
    ((slice(0, 3),), (slice(2, 4),), False),
    ((slice(0, 4, 2),), (slice(1, 4, 2),), True),   # evens and odds
    ((slice(None, None, -2),), (slice(0, 4, 2),), True),  # 3, 1 against 0, 2
    ((slice(1, 1),), (slice(None),), True),         # an empty slice meets nothing
    ((Ellipsis, 0), (Ellipsis, 5), True),
    ((Ellipsis, 0), (0, Ellipsis), False),
    ((None, 1), (2, None), True),                   # a new axis takes no axis
    ((1, slice(None), 3), (1, 2), False),
    ((1, slice(0, 2)), (1, 4), True),
    ((slice(None),), (slice(None),), False),
]


@pytest.mark.parametrize("a, b, expected", STATIC)
def test_static_boxes_are_apart_exactly_when_numpy_writes_no_common_element(a, b, expected):
    assert apart(_box(*a), _box(*b), SHAPE) is expected
    assert apart(_box(*b), _box(*a), SHAPE) is expected
    assert expected == (not (_touch(a) & _touch(b)).any())


def _node(prim, args, shape=(), dtype=np.int64):
    return Node(0, PRIMITIVES[prim] if prim else None, args, {}, shape, np.dtype(dtype))


def test_positions_apart_by_an_offset_in_a_loop_counter():
    """h[:, t] and h[:, t - 1] in one step: apart for every t, as long as the offset is
    smaller than the axis (t - 5 at t = 0 would be the last element of an axis of 5)."""
    t = _node(None, ())
    minus = _node("subtract", (t, 1))
    plus = _node("add", (2, t))
    step = (slice(None), Slot(1))
    assert apart(_box(*step, args=(t,)), _box(*step, args=(minus,)), SHAPE)
    assert apart(_box(*step, args=(plus,)), _box(*step, args=(minus,)), SHAPE)
    assert not apart(_box(*step, args=(t,)), _box(*step, args=(t,)), SHAPE)
    far = _node("subtract", (t, 5))
    assert not apart(_box(*step, args=(t,)), _box(*step, args=(far,)), SHAPE)
    other = _node(None, ())
    assert not apart(_box(*step, args=(t,)), _box(*step, args=(other,)), SHAPE)
    assert not apart(_box(*step, args=(t,)), _box(slice(None), 2), SHAPE)


def test_what_cannot_be_known_is_the_whole_axis():
    rows = np.array([0, 1])
    assert _box(Slot(1), args=(rows,)) == (WHOLE,) * 3
    bound = _node(None, ())
    assert _box(slice(Slot(1), None), args=(bound,))[0] is WHOLE
    assert not apart(_box(Slot(1), args=(rows,)), _box(3,), SHAPE)


def test_complementary_masks_are_apart():
    x = _node(None, (), SHAPE, np.float64)
    ge, lt = _node("greater_equal", (x, 0), SHAPE, bool), _node("less", (x, 0), SHAPE, bool)
    le, gt = _node("less_equal", (x, 0), SHAPE, bool), _node("greater", (x, 0), SHAPE, bool)
    eq = _node("equal", (x, 0), SHAPE, bool)
    flipped = _node("greater", (0, x), SHAPE, bool)  # 0 > x is x < 0
    negated = _node("logical_not", (ge,), SHAPE, bool)
    y = _node(None, (), SHAPE, np.float64)
    pairs = {(ge, lt): True, (gt, le): True, (gt, lt): True, (eq, gt): True,
             (lt, eq): True, (ge, flipped): True, (ge, negated): True,
             (ge, le): False, (ge, gt): False,
             (ge, _node("less", (y, 0), SHAPE, bool)): False,
             (ge, _node("less", (x, 1), SHAPE, bool)): False}
    for (m, k), expected in pairs.items():
        for p, q in ((m, k), (k, m)):
            assert apart(_box(Slot(1), args=(p,)), _box(Slot(1), args=(q,)), SHAPE) \
                is expected, (p.prim.name, q.prim.name)
    assert not apart(_box(Slot(1), args=(ge,)), _box(0,), SHAPE)
    row = _node("greater_equal", (x, 0), SHAPE[1:], bool)  # a mask of the last two axes
    assert _box(1, Slot(1), args=(row,))[1:] == (("mask", row), WHOLE)
    flag = np.array(True)  # a 0-d mask takes no axis
    assert _box(Slot(1), 2, args=(flag,)) == (("at", None, 2), WHOLE, WHOLE)
