"""The counts the counts stage (counts.py) traces a function at: its probes.

A probe is a trace with some count sources made to select other numbers of elements
(count_sources.probing): a dict source -> count, the others as they are. counts.py fits
every number that differs between the traces to one formula in one count, the same over
every trace, so the traces must tell the counts apart: for every two sources i and j,
two traces where i selects the same number of elements and j does not (`separable`),
else a number that moves with j could be read as a formula in i, which is wrong code at
the calls where they move apart. And each source must take three counts: a formula
fitted at two and checked at the third.

Changing one source at a time (`alone`) does that in two traces per source, which for
a program of many masks (a numerically stable sigmoid holds two, an LSTM three per step)
is most of its first call. `jointly` changes them all together, by a code: source i
takes its first other count in the traces of the bits of i + 1, and its second in a
last trace, so its counts over the traces spell i + 1. Two sources have distinct codes,
so each moves in a trace where the other does not: ceil(log2(N + 1)) + 1 traces for N
sources (5 for 16 masks, 8 for 96), every count still fitted over three and checked
against every other trace. Where a probe cannot select what it asked (a mask computed
from another's selection holds fewer elements), `separable` checks the counts the
traces did select, and counts.py changes one source at a time instead.

The other counts are near the traced one and held apart from every other source's
(`near`), where the passes might merge two selections' values (the same 1/k). Where
the user's Python reads a size that moves with a count (`spread`), every count up to
_EVERY is tried, one source at a time, since Python may decide on it.
"""

import numpy as np

from ..graph.size_formulas import NoFit

_EVERY = 24


def total(guard):
    """The most elements the source can count: its mask's, or a length source's bound."""
    if "total" in guard.params:
        return guard.params["total"]
    return int(np.prod(guard.args[0].shape))


def probe_counts(traced, most, read, low=(1, 0), avoid=(), least=0):
    """Other counts to trace at, at least 2 where the mask is big enough (a count of 1
    broadcasts, 0 empties reductions: formulas serve them, as the same NumPy runs). Two
    near the traced one (else 1 or 0, in the order `low`: a mean does not fit at 0, some
    broadcasting not at 1); when the user's Python read a size, every count up to _EVERY,
    else a spread of them (a test `if len(x[m]) > 3:` changes the program at some count
    tried), and counts below 2 trace their own code. The near ones avoid the counts of
    the other sources (`avoid`) and all elements (`most`), where the passes may merge the
    values of two selections, or drop a step that then does nothing (a broadcast to x's
    shape), and are `least` or more (np.bincount's length: a shorter one would not hold
    the labels it counted, which the code may index it with)."""
    near = [traced + d for step in range(1, most + 1) for d in (-step, step)
            if traced + d >= least]
    # two are taken: cut here, the list is searched below once per count of `near`
    apart = [c for c in near if 2 <= c < most and c not in avoid][:2]
    counts = (apart + [c for c in near if 2 <= c <= most and c not in apart]
              + [c for c in low if c != traced and c >= least])[:2]
    if read:
        spread = range(2, most + 1) if most <= _EVERY else [
            *range(2, 10), most // 4, most // 2, 3 * most // 4, most - 1, most]
        counts += [c for c in spread if c != traced and c not in counts and c >= least]
    if len(counts) < 2:
        raise NoFit
    return counts


def _near(guard, centre, low, avoid):
    return probe_counts(centre, total(guard), False, low, avoid,
                        guard.params.get("least", 0))


# ---- designs: the probes of every source ----------------------------------------------------
def alone(guards, centre, low):
    """Each source changed alone to its two near counts, the others at `centre`: two
    traces per source."""
    columns = []
    for index, guard in enumerate(guards):
        avoid = set(centre[:index] + centre[index + 1:])
        columns += [{index: count} for count in _near(guard, centre[index], low, avoid)]
    return columns


def jointly(guards, centre, low):
    """Every source changed at once, by its code (the module's docstring): the bits of
    i + 1, then all at their second counts; a source not changed in a trace is held at
    its count in `centre` (a mask computed from a changed one's selection would move
    with it). The other counts of each source differ from every other source's, so that
    no two meet in a trace unless they do at `centre`; NoFit where they cannot (masks
    too small for so many counts: `alone` keeps fewer apart)."""
    used, picks = set(centre), []
    for index, guard in enumerate(guards):
        picks.append(_near(guard, centre[index], low, used)[:2])
        if used & set(picks[-1]):
            raise NoFit
        used.update(picks[-1])
    columns = [{i: pick[0] if (i + 1) >> bit & 1 else centre[i] for i, pick in enumerate(picks)}
               for bit in range(len(guards).bit_length())]
    return columns + [{i: pick[1] for i, pick in enumerate(picks)}]


def spread(guards, centre, low):
    """Where the user's Python reads a size that moves with a count: every count of the
    spread (probe_counts) past the two near ones, each source alone."""
    columns = []
    for index, guard in enumerate(guards):
        avoid = set(centre[:index] + centre[index + 1:])
        counts = probe_counts(centre[index], total(guard), True, low, avoid,
                              guard.params.get("least", 0))
        columns += [{index: count} for count in counts[2:]]
    return columns


def apart(guards):
    """Counts near the traced ones, 2 apart if they can be, else distinct, from 2 to one
    less than all; None if the traced ones are so already or cannot be (masks too small
    to move)."""
    traced = [g.params["outcome"] for g in guards]
    if all(abs(a - b) >= 2 for i, a in enumerate(traced) for b in traced[:i]) and all(
            2 <= t < total(g) for t, g in zip(traced, guards)):
        return None
    for gap in (2, 1):
        base = {}
        for index, guard in enumerate(guards):
            most = total(guard)
            near = [traced[index] + d for step in range(most + 1) for d in (step, -step)]
            least = max(2, guard.params.get("least", 0))
            free = [c for c in near if least <= c < most
                    and all(abs(c - other) >= gap for other in base.values())]
            if not free:
                break
            base[index] = free[0]
        else:
            return base
    return None


# ---- what the traces selected -------------------------------------------------------------------
def selected(guards, counts):
    """Whether the guards of a probe (`guards`, traced with `counts`) selected what it
    asked, or all a mask held where it asked for more (a mask computed from a selection
    the probe made smaller)."""
    for index, count in counts.items():
        got = guards[index].params["outcome"]
        if got != count and not (count > got == _held(guards[index])):
            return False
    return True


def _held(guard):
    return int(np.prod(guard.args[0].shape)) if "total" not in guard.params else None


def separable(at):
    """`at[t][i]`, source i's count in trace t: every source takes three counts or more,
    and none's counts are a function of another's (two traces where one is the same and
    the other is not)."""
    counts = np.array(at).T  # (source, trace)
    labels = np.array([np.unique(row, return_inverse=True)[1].ravel() for row in counts])
    kinds = labels.max(axis=1) + 1
    if (kinds < 3).any():
        return False
    width = labels.shape[1]
    for i, row in enumerate(labels):  # j's counts a function of i's: no more pairs than i's
        pairs = np.sort(row * width + labels, axis=1)
        distinct = 1 + np.count_nonzero(np.diff(pairs, axis=1), axis=1)
        distinct[i] = -1
        if (distinct == kinds[i]).any():
            return False
    return True
