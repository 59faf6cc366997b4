"""Data-dependent sizes: `x[mask]`, `np.nonzero(x)`, and what follows from their counts.

The number of elements a mask selects is data, yet the traced program reads it as a size:
the 1/k of `x[m].mean()`, the (k,) of a cotangent, `len(x[m])` used as a number. So every
mask (or array np.nonzero reads) is a *count source*: the trace records a guard
`np.count_nonzero(mask) == k` on it, and the count is then found by experiment, as
batch.py finds the batch size: the call is traced again with that one mask changed to
select another number of elements (`probe`), and every number that differs between the
traces must fit one formula in the count (size_formulas.Dim, Scale, SymArray in `count`).
When all do, the guard becomes the definition `count = int(np.count_nonzero(mask))` and the code
serves every count, 0 included; otherwise (Python that decides on the count, a reshape to
it, two masks whose counts meet) the guard stays, and another count traces again. The
length of np.unique's and np.bincount's results is a count too (`len(u) == k`, read as
`count = len(u)`): its probes change that result's length (count_sources.observe_length).

The values of a changed trace are not the user's (only its graph is kept). Each source is
changed alone, and only as its selections (x[m], y[m] = v, np.nonzero(m)) and the
backward's see it (`seen`): `~m` or `x <= 0` computed from a changed mask keep their
own counts, so complementary masks are two sources like any two; the same mask computed
twice (`~m` written twice) is one source (`_key`). A mask computed from a changed
selection (`rows[rows > 0]`) may move with it: every trace records the counts it holds,
and a number fits when one count alone explains it over every trace (a number that moves
with two counts, such as the length of np.concatenate([x[m], x[~m]]), does not). Counts
that meet (the passes may merge the 1/k of one mean with another's), or a count of 0, 1
or all, are probed around counts held apart, once the graph traced at the user's counts
is checked, before any pass, to be the same program (`_apart`).

Once the user's Python reads a size after a mask (len(), .shape, .size, a
bounded slice, int(np.count_nonzero(m))), that size may decide control flow, which no
graph shows: then every count up to 24 is traced (a spread of them for bigger masks), and
the code serves counts from 2 up, counts 0 and 1 tracing their own. What the counts tried
cannot see: a test such as `if len(x[m]) == 37:` on a mask of 100 elements; keep such
decisions out of the differentiated function.

Where the code is emitted: grad, jvp and vjp (and so grad of grad, hvp, hessian and
jacobian) read counts at run time. A VJP's forward and backward functions come from one
trace: they are probed together and unified alike, and the backward defines the counts it
reads from the masks the forward saves (backward.split_graphs).
"""

import dataclasses
import functools

import numpy as np

from ..graph import Node
from ..graph.size_formulas import COUNT, NoFit, fit, same
from ..trace.count_sources import TESTS, counted, is_count, probing
from .unify import Unifier


# ---- generalizing ---------------------------------------------------------------------------
def general(args, optimize, raw, retrace):
    """The graph to emit for `args`: counts read at run time where they fit, guarded where
    not. `raw` is the graph as traced, not optimized, or a tuple of graphs of one trace (a
    VJP's forward and backward functions: the first holds the count guards); `optimize(graph)`
    optimizes one; `retrace(args)` traces the function again (the pipeline's), here inside
    `probing(counts)`, to see the graph at other counts."""
    main = _each(optimize, raw)
    if not counted(_first(raw)):
        return main
    probe = functools.partial(_probed, args, retrace)
    for low in _LOWS:  # a small mask is tried at count 1, else at 0 (see _probe_counts)
        try:
            return _generalize(probe, raw, main, optimize, low)
        except NoFit:
            if not any(_tries_below_2(g, low) for g in _counts(_first(raw))):
                break  # no count below 2 was tried: the other order would change nothing
    return main


def _tries_below_2(guard, low):
    try:
        return min(_probe_counts(guard.params["outcome"], _total(guard), False, low,
                                 least=guard.params.get("least", 0))) < 2
    except NoFit:  # too few elements to try two counts (an empty selection's mask)
        return False


def _each(fn, graphs):
    return tuple(map(fn, graphs)) if type(graphs) is tuple else fn(graphs)


def _first(graphs):
    return graphs[0] if type(graphs) is tuple else graphs


def checked_before(graph):
    """A VJP's backward function without the count guards its forward function checked
    (the backward reads its masks only to define counts, when they are read at run time)."""
    kept = [n for n in graph.nodes if not (is_count(n) and type(n.params["outcome"]) is int)]
    return graph if len(kept) == len(graph.nodes) else dataclasses.replace(graph, nodes=kept)


def _total(guard):
    """The most elements the source can count: its mask's, or a length source's bound."""
    if "total" in guard.params:
        return guard.params["total"]
    return int(np.prod(guard.args[0].shape))


def _generalize(probe, raw, main, optimize, low):
    guards = _counts(_first(raw))
    taken = {p for g in (raw if type(raw) is tuple else (raw,)) for p in g.params}
    read = any(g.params["read"] for g in guards)
    lo = 2 if read else 0
    if any(g.params["outcome"] < lo for g in guards):
        raise NoFit
    names = [_fresh(f"{COUNT}{index or ''}", taken) for index in range(len(guards))]
    traced = [g.params["outcome"] for g in guards]
    try:
        graphs, _, at = _around(probe, main, raw, {}, traced, optimize, low, read)
        return _unify_all(graphs, names, at, lo)
    except NoFit:
        # two counts that meet (x[m] and x[~m] at half the elements) or nearly: the passes
        # may merge the values of one with the other's (the same 1/k), which the probes,
        # where they differ, do not. So probe around counts held apart, and check that
        # the graph traced at these counts, before any pass, is the same program.
        base = _apart(guards, lo)
        if base is None:
            raise
        base_raw = probe(base)
        if [g.params["outcome"] for g in _counts(_first(base_raw))] != list(base.values()):
            raise NoFit from None
        graphs, raws, at = _around(probe, _each(optimize, base_raw), base_raw, base,
                                   list(base.values()), optimize, low, read)
        _unify_all([raw] + raws, names, [traced] + at, lo)  # raises NoFit if not the same
    return _unify_all(graphs, names, at, lo)


def _around(probe, main, raw, base, traced, optimize, low, read):
    """(optimized graphs, raw graphs, their counts): `main` and, for each source in turn,
    traces (`probe(counts)`) with its count changed from `base` (the traced counts if
    empty)."""
    graphs, raws, at = [main], [raw], [traced]
    for index, guard in enumerate(_counts(_first(raw))):
        avoid = set(traced[:index] + traced[index + 1:])
        for count in _probe_counts(traced[index], _total(guard), read, low, avoid,
                                   guard.params.get("least", 0)):
            probed = probe({**base, index: count})
            moved = [g.params["outcome"] for g in _counts(_first(probed))]
            if len(moved) != len(traced) or moved[index] != count:
                raise NoFit  # the program changed
            at.append(moved)  # a mask computed from the probed one's selection moves too
            raws.append(probed)
            graphs.append(_each(optimize, probed))
    return graphs, raws, at


def _apart(guards, lo):
    """Counts near the traced ones, 2 apart if they can be, else distinct, from 2 to one
    less than all; None if the traced ones are so already or cannot be (masks too small
    to move)."""
    traced = [g.params["outcome"] for g in guards]
    if all(abs(a - b) >= 2 for i, a in enumerate(traced) for b in traced[:i]) and all(
            2 <= t < _total(g) for t, g in zip(traced, guards)):
        return None
    for gap in (2, 1):
        base = {}
        for index, guard in enumerate(guards):
            total = _total(guard)
            near = [traced[index] + d for step in range(total + 1) for d in (step, -step)]
            least = max(lo, 2, guard.params.get("least", 0))
            free = [c for c in near if least <= c < total
                    and all(abs(c - other) >= gap for other in base.values())]
            if not free:
                break
            base[index] = free[0]
        else:
            return base
    return None


def _unify_all(graphs, names, at, lo):
    if type(graphs[0]) is tuple:
        return tuple(_unified([g[i] for g in graphs], names, at, lo)
                     for i in range(len(graphs[0])))
    return _unified(graphs, names, at, lo)


def _unified(graphs, names, at, lo):
    unified = _CountUnifier(graphs, names, at).graph()
    for node in unified.nodes:
        if is_count(node):  # where a size is read, only the counts probed (least up)
            node.params["lo"] = max(lo, node.params.get("least", 0)) if lo else lo
    return unified


def _counts(graph):
    return sorted((n for n in graph.nodes if is_count(n)), key=lambda n: n.id)


_LOWS = ((1, 0), (0, 1))


def _probe_counts(traced, total, read, low=(1, 0), avoid=(), least=0):
    """Other counts to trace at, at least 2 where the mask is big enough (a count of 1
    broadcasts, 0 empties reductions: formulas serve them, as the same NumPy runs). Two
    near the traced one (else 1 or 0, in the order `low`: a mean does not fit at 0, some
    broadcasting not at 1); when the user's Python read a size, every count up to _EVERY,
    else a spread of them (a test `if len(x[m]) > 3:` changes the program at some count
    tried), and counts below 2 trace their own code. The near ones avoid the counts of
    the other sources (`avoid`) and all elements, where the passes may merge the values
    of two selections, or drop a step that then does nothing (a broadcast to x's shape),
    and are `least` or more (np.bincount's length: a shorter one would not hold the
    labels it counted, which the code may index it with)."""
    near = [traced + d for step in range(1, total + 1) for d in (-step, step)
            if traced + d >= least]
    apart = [c for c in near if 2 <= c < total and c not in avoid]
    counts = (apart + [c for c in near if 2 <= c <= total and c not in apart]
              + [c for c in low if c != traced and c >= least])[:2]
    if read:
        spread = range(2, total + 1) if total <= _EVERY else [
            *range(2, 10), total // 4, total // 2, 3 * total // 4, total - 1, total]
        counts += [c for c in spread if c != traced and c not in counts and c >= least]
    if len(counts) < 2:
        raise NoFit
    return counts


_EVERY = 24


def _probed(args, retrace, counts):
    """The graph traced again at `args` with the sources' counts changed to `counts`; NoFit
    where the code does not run."""
    try:
        with probing(counts):
            return retrace(args)
    except NoFit:
        raise
    except Exception:  # noqa: BLE001  the code does not run at that count: not served
        raise NoFit from None


def _fresh(base, taken):
    var = base
    while var in taken:
        var = "_" + var
    taken.add(var)
    return var


class _CountUnifier(Unifier):
    """The Unifier (unify.py) where a differing number is a formula in one count, the same
    over every trace: `at[i]` holds the counts of graph i, `names` their names. Each source was
    probed alone (the counts of masks computed from its selection may move with it), so a
    number that moves with two counts has no one formula and does not fit."""

    def __init__(self, graphs, names, at):
        super().__init__(graphs, None, None)
        self.names, self.at = names, at

    def graph(self):
        unified = super().graph()
        if self.graphs[0].paths:  # a VJP's backward: its inputs are the forward's residuals
            unified.paths = {n: n.params["path"] for n in unified.inputs}
        return unified

    def node(self, column, place):
        """An input a path names (a residual the forward function saved): unified by
        place, shape and dtype alone, as the backward function reads it."""
        head = column[0]
        path = self.graphs[0].paths.get(head) if place[0] == "input" else None
        if path is None:
            return super().node(column, place)
        if any(n.dtype != head.dtype for n in column):
            raise NoFit
        made = Node(head.id, None, (), {"path": path}, self.value([n.shape for n in column]),
                    head.dtype)
        made.name = head.name or (head.prim.name if head.prim else None)
        made.trace_id = head.trace_id
        made.python_number = head.python_number
        for position, n in zip(self.position, column):
            position[n] = place
        self.made[place] = self.of_first[head] = made
        return made

    def inner(self, graphs):
        return _CountUnifier(graphs, self.names, self.at)

    def same_guard(self, params):
        return same(params) or all(p["test"] in TESTS for p in params)

    def fit(self, values):
        if same(values):
            return values[0]
        for source, var in enumerate(self.names):
            seen_at = {}  # count -> the value the traces at that count hold
            for counts, value in zip(self.at, values):
                if seen_at.setdefault(counts[source], value) is not value \
                        and not same([seen_at[counts[source]], value]):
                    break  # another count moves it too
            else:
                if len(seen_at) >= 2:
                    try:
                        return fit(list(seen_at.values()), list(seen_at), var)
                    except NoFit:
                        pass
        raise NoFit
