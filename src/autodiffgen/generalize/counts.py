"""Data-dependent sizes: `x[mask]`, `np.nonzero(x)`, and what follows from their counts.

The number of elements a mask selects is data, yet the traced program reads it as a size:
the 1/k of `x[m].mean()`, the (k,) of a cotangent, `len(x[m])` used as a number. So every
mask (or array np.nonzero reads) is a *count source*: the trace records a guard
`np.count_nonzero(mask) == k` on it, and the count is then found by experiment, as
batch.py finds the batch size: the call is traced again with masks changed to select
other numbers of elements (`probe`: which, and at what counts, is probes.py's), and every
number that differs between the traces must fit one formula in one count
(size_formulas.Dim, Scale, SymArray in `count`). When all do, the guard becomes the
definition `count = int(np.count_nonzero(mask))` and the code serves every count, 0
included; otherwise (Python that decides on the count, a reshape to it, two masks whose
counts meet) the guard stays, and another count traces again. The length of np.unique's
and np.bincount's results is a count too (`len(u) == k`, read as `count = len(u)`): its
probes change that result's length (count_sources.observe_length).

The values of a changed trace are not the user's (only its graph is kept). A source is
changed only as its selections (x[m], y[m] = v, np.nonzero(m)) and the backward's see it
(`seen`): `~m` or `x <= 0` computed from a changed mask keep their own counts, so
complementary masks are two sources like any two; the same mask computed twice (`~m`
written twice) is one source (`_key`). The sources are changed together, a few traces
for all of them (probes.jointly), else each alone, two traces each (probes.alone: where
masks are too small to keep so many counts apart, or a mask computed from a changed
selection, `rows[rows > 0]`, cannot select what the probe asked). Every trace records
the counts it holds, the traces tell them apart (probes.separable), and a number fits
when one count alone explains it over every trace (a number that moves with two counts,
such as the length of np.concatenate([x[m], x[~m]]), does not). Counts that meet (the
passes may merge the 1/k of one mean with another's), or a count of 0, 1 or all, are
probed around counts held apart, once the graph traced at the user's counts is checked,
before any pass, to be the same program (probes.apart).

The user's Python may read a size after a mask (len(), .shape, .size, iteration, a
bounded slice, int(np.count_nonzero(m))); the trace keeps what it read
(count_sources.mark_read). Where that moves with a count between the traces, it may
decide control flow, which no graph shows: then every count up to 24 is traced (a spread
of them for bigger masks), and the code serves counts from 2 up, counts 0 and 1 tracing
their own. Where it does not (the gates sliced out of an LSTM's `a[:, :H]`), no count
decides anything. What the counts tried cannot see: a test such as `if len(x[m]) == 37:`
on a mask of 100 elements; keep such decisions out of the differentiated function.

Where the code is emitted: grad, jvp and vjp (and so grad of grad, hvp, hessian and
jacobian) read counts at run time. A VJP's forward and backward functions come from one
trace: they are probed together and unified alike, and the backward defines the counts it
reads from the masks the forward saves (backward.split_graphs).
"""

import dataclasses
import functools

import numpy as np

from ..graph import Node, is_guard
from ..graph.size_formulas import COUNT, NoFit, fit, same
from ..trace.count_sources import INDICES_OF_MASKS, TEST, TESTS, counted, is_count, probing
from . import probes
from .unify import Unifier


# ---- generalizing ---------------------------------------------------------------------------
def general(args, optimize, raw, retrace):
    """The graph to emit for `args`: counts read at run time where they fit, guarded where
    not. `raw` is the graph as traced, not optimized, or a tuple of graphs of one trace (a
    VJP's forward and backward functions: the first holds the count guards); `optimize(graph)`
    optimizes one; `retrace(args)` traces the function again (the pipeline's), here inside
    `probing(counts)`, to see the graph at other counts."""
    unread = unneeded(raw)
    if unread:
        raw = _without(unread, raw)
    main = _each(optimize, raw)
    if not counted(_first(raw)):
        return main
    probe = functools.partial(_probed, args, retrace, unread,
                              [g.params["source"] for g in _counts(raw)] if unread else None)
    for low in _LOWS:  # a small mask is tried at count 1, else at 0 (probes.probe_counts)
        for design in (probes.jointly, probes.alone):
            try:
                return _generalize(probe, raw, main, optimize, low, design)
            except _Unserved:
                return main
            except _Undesigned:
                continue  # the traces did not tell the counts apart: each source alone
            except NoFit:
                break
        if not any(_tries_below_2(g, low) for g in _counts(_first(raw))):
            break  # no count below 2 was tried: the other order would change nothing
    return main


def _tries_below_2(guard, low):
    try:
        return min(probes.probe_counts(guard.params["outcome"], probes.total(guard), False,
                                       low, least=guard.params.get("least", 0))) < 2
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


def _generalize(probe, raw, main, optimize, low, design):
    """The unified graph of the traces `design` (probes.py) asks for around the traced
    counts; NoFit if they do not unify."""
    guards = _counts(_first(raw))
    taken = {p for g in (raw if type(raw) is tuple else (raw,)) for p in g.params}
    names = [_fresh(f"{COUNT}{index or ''}", taken) for index in range(len(guards))]
    traced = [g.params["outcome"] for g in guards]
    if min(traced) < 2 and any(g.params["read"] for g in guards):
        raise _Unserved  # (whether the sizes read move or not, below 2 is a count's own)
    try:
        graphs, _, at, lo = _around(probe, main, raw, {}, traced, optimize, low, design)
        return _unify_all(graphs, names, at, lo)
    except _Unserved:
        raise
    except NoFit:  # (the last failure says whether another design may do better)
        # two counts that meet (x[m] and x[~m] at half the elements) or nearly: the passes
        # may merge the values of one with the other's (the same 1/k), which the probes,
        # where they differ, do not. So probe around counts held apart, and check that
        # the graph traced at these counts, before any pass, is the same program.
        base = probes.apart(guards)
        if base is None:
            raise
        base_raw = probe(base)
        if [g.params["outcome"] for g in _counts(_first(base_raw))] != list(base.values()):
            raise NoFit from None
        graphs, raws, at, lo = _around(probe, _each(optimize, base_raw), base_raw, base,
                                       list(base.values()), optimize, low, design, raw)
        _unify_all([raw] + raws, names, [traced] + at, lo)  # raises NoFit if not the same
    return _unify_all(graphs, names, at, lo)


class _Undesigned(NoFit):
    """The probes of a design did not run as asked, or did not tell the counts apart
    (probes.separable): another design may."""


class _Unserved(NoFit):
    """The user's Python reads a size that moves with a count, traced below 2: whatever
    the probes, the code would not serve the call it is made for (counts 0 and 1 trace
    their own), and the traced graph is kept."""


def _around(probe, main, raw, base, traced, optimize, low, design, first=None):
    """(optimized graphs, raw graphs, their counts, the least count served): `main` and the
    traces `design` asks for around the counts of `base` (the traced ones if empty), and,
    where the user's Python reads a size that moves with a count, every count of
    probes.spread. `first`: the trace made for the call, when `raw` is a trace at `base`."""
    guards = _counts(_first(raw))
    graphs, raws, at = [main], [raw], [traced]

    def trace(columns, exact):
        for counts in columns:
            probed = probe({**base, **counts})
            moved = _counts(_first(probed))
            if len(moved) != len(traced) or not (
                    all(moved[i].params["outcome"] == c for i, c in counts.items()) if exact
                    else probes.selected(moved, counts)):
                raise NoFit  # the program changed
            at.append([g.params["outcome"] for g in moved])  # a mask computed from a
            raws.append(probed)  # changed one's selection moves too
            graphs.append(_each(optimize, probed))

    joint = design is probes.jointly  # (each source alone: the others move as they do)
    try:
        trace(design(guards, traced, low), not joint)
        if joint and not probes.separable(at):
            raise NoFit
    except NoFit:
        raise _Undesigned from None
    read = _reads_move(raws + ([first] if first else []))
    if read and min(g.params["outcome"] for g in _counts(_first(first or raw))) < 2:
        raise _Unserved
    if read:
        trace(probes.spread(guards, traced, low), True)
    return graphs, raws, at, 2 if read else 0


def _reads_move(raws):
    """Whether the user's Python read a size after a mask (count_sources.mark_read) that
    is not the same in every trace: a count it may decide on."""
    reads = [_counts(_first(raw))[0].params.get("reads") for raw in raws]
    return any(r != reads[0] for r in reads)


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


def _probed(args, retrace, unread, sources, counts):
    """The graph traced again at `args` with the sources' counts changed to `counts`; NoFit
    where the code does not run. `unread`: the sources dropped (`unneeded`), `sources` the
    number of each source left, by position."""
    if sources is not None:
        counts = {sources[i]: count for i, count in counts.items()}
    try:
        with probing(counts):
            return _without(unread, retrace(args)) if unread else retrace(args)
    except NoFit:
        raise
    except Exception:  # noqa: BLE001  the code does not run at that count: not served
        raise NoFit from None


# ---- counts nothing needs -------------------------------------------------------------------
def unneeded(raw):
    """The sources whose count nothing needs, as traced: no selection of the graph reads
    their mask (x[m] read only by writes recorded whole: rules/masked_writes.py) and the
    user's Python read no size that may hold it (count_sources.mark_read). Their guards
    are dropped, not probed: the code serves every count without reading it. Only a mask
    a count guard reads is known as a source: a selection by any other keeps them all."""
    if type(raw) is tuple:  # (a VJP's backward reads its masks as residuals)
        return set()
    guards = _counts(raw)
    masks = {g.args[0]: g for g in guards if g.params["test"] == TEST}
    selected = set()
    for node in raw.nodes:
        if node.prim is not None and not is_guard(node) and (
                "index" in node.params or node.prim.name in INDICES_OF_MASKS):
            selected.update(a for a in node.args[1:] if type(a) is Node and a.dtype == np.bool_)
            selected.update(node.args[:1] if node.prim.name in INDICES_OF_MASKS else ())
    if any(type(a) is Node and a not in masks for a in selected):
        return set()
    return {g.params["source"] for m, g in masks.items()
            if m not in selected and not g.params.get("read")}


def _without(unread, raw):
    """raw (a graph) without the count guards of the sources `unread`."""
    kept = [n for n in raw.nodes if not (is_count(n) and n.params.get("source") in unread)]
    return dataclasses.replace(raw, nodes=kept)


def _fresh(base, taken):
    var = base
    while var in taken:
        var = "_" + var
    taken.add(var)
    return var


class _CountUnifier(Unifier):
    """The Unifier (unify.py) where a differing number is a formula in one count, the same
    over every trace: `at[i]` holds the counts of graph i, `names` their names. The traces tell
    the counts apart (probes.separable: the counts of masks computed from a changed one's
    selection may move with it), so a number that moves with two counts has no one
    formula and does not fit."""

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

    def params(self, node):
        """A count guard's without the sizes its trace read (count_sources.mark_read),
        which differ between the traces where a count moves them."""
        if not is_count(node) or "reads" not in node.params:
            return node.params
        return {k: v for k, v in node.params.items() if k != "reads"}

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
