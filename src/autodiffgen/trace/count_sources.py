"""A mask's count as the trace sees it: the trace-time half of data-dependent sizes.

Every mask (or array np.nonzero reads) whose count decides a size is a *count source*:
`observe` records it, with a guard `np.count_nonzero(mask) == k`, and, in a trace that
generalize_counts.py runs to probe another count (`probing`), hands the selections a copy
of the mask changed to select that many elements (`seen`). A result as long as the data
says (np.unique's values, np.bincount's counts) is a count source too, its length the
count (`observe_length`, a guard `len(u) == k`): a probe changes that result itself. The
rules call this module while tracing; generalize_counts.py, a later stage, turns the
traces at several counts into one program.
"""

import contextlib
import threading
import warnings

import numpy as np

from ..graph import Node, is_guard
from ..graph.size_formulas import Dim
from . import boxes, recording
from .boxes import Box

TEST = "count_nonzero"  # the guard test a count source records
LENGTH = "len"  # the one a result as long as the data says records (observe_length)
TESTS = (TEST, LENGTH)
_state = threading.local()


class _Probe:
    """A trace to run with source number i selecting counts[i] elements (for each i in
    `counts`): the first trace made after it (not one that trace makes inside, a nested
    grad's)."""

    def __init__(self, counts):
        self.counts = counts
        self.trace_id = next(recording._trace_ids) + 1


def observe(trace, box):
    """`box` (a traced mask, or what np.nonzero reads) decides a size: record it as a count
    source of `trace` (once per value: the same mask computed twice, `x[~m]` and
    `y[~m] = ...`, is one source), changed to the probe's count when this trace is a
    probe. Returns the box the selection is to read (`seen`)."""
    if trace is None or box.node.trace_id != trace.id:
        return box  # not this trace's value: bind says so
    sources = trace.__dict__.setdefault("count_sources", {})
    trace.__dict__.setdefault("count_masks", set()).add(box.node)
    key = _key(trace, box.node)
    if key in sources or np.ndim(box.value) == 0:
        return seen(trace, box)
    sources[key] = index = len(sources)
    probe = getattr(_state, "probe", None)
    if probe is not None and probe.trace_id == trace.id and index in probe.counts:
        trace.__dict__.setdefault("probed", {})[key] = with_count(box.value,
                                                                  probe.counts[index])
        box = seen(trace, box)
    trace.guard(box, TEST, int(np.count_nonzero(box.value)))
    guard = trace.guards[-1]
    guard.params.update(source=index, read=False)  # its own: CSE must not merge two sources
    trace.__dict__.setdefault("count_guards", []).append(guard)  # boxes._sized marks them
    return box


def seen(trace, box):
    """The mask a selection (x[m], y[m] = v, np.nonzero(m)) reads: a probed source's
    changed value, else `box`. Only selections see the change, and the backward's, which
    read trace.boxes; never the mask's other uses: so `~m` or `m & k` computed from a
    probed mask keep their own counts, and each source is still changed alone
    (complementary masks, x[m] and x[~m], are served as any two)."""
    probed = getattr(trace, "probed", None)
    if not probed or type(box) is not Box or box.node.trace_id != trace.id:
        return box
    value = probed.get(_key(trace, box.node))
    if value is None:
        return box
    current = trace.boxes.get(box.node)
    if current is None or current is box or current.value is not value:
        current = trace.boxes[box.node] = Box(value, box.node)  # the user's box stays
    return current


def _key(trace, node, depth=0):
    """What identifies a mask's value: its node, or, for one computed again from the same
    values by the same deterministic steps (`~m` written twice), those steps, numbered
    (`_Steps`) so that a key holds its arguments' numbers, not their keys: nested keys
    would be hashed whole at every lookup, a tree that doubles with each value used twice
    (a sigmoid's masks after k layers: 2**k)."""
    keys = trace.__dict__.setdefault("source_keys", {})
    found = keys.get(node)
    if found is None:
        found = keys[node] = _structure(trace, node, depth)
    return found


def _structure(trace, node, depth):
    if node.prim is None or node.prim.effect or depth > 32:
        return node
    try:
        key = (node.prim, tuple(_key(trace, a, depth + 1) if type(a) is Node else _constant(a)
                                for a in node.args), tuple(sorted(node.params.items())))
        numbers = trace.__dict__.setdefault("source_steps", {})
        return numbers.setdefault(key, _Steps(len(numbers)))
    except TypeError:  # a parameter or constant not compared by value: the node itself
        return node


class _Steps:
    """One distinct computation (`_key`), made once per trace: equal only to itself."""

    __slots__ = ("number",)

    def __init__(self, number):
        self.number = number

    def __repr__(self):
        return f"_Steps({self.number})"


def _constant(value):
    if isinstance(value, (np.ndarray, np.generic)):
        if np.size(value) > 64:
            raise TypeError
        return (type(value), value.dtype.str, np.shape(value), value.tobytes())
    if type(value) in (int, float, bool, complex, type(None)):
        return (type(value), value)
    raise TypeError


def observe_length(trace, box, key, total, resize=None, least=0):
    """`box`, a result as long as the data says (np.unique(labels), np.bincount(labels)),
    decides sizes: record its length as a count source of `trace`, one per `key` (the
    results of one np.unique call, or of the same call written twice, share it), with
    the guard `len(box) == k` on the first one. In a probe of that source, returns the
    box changed to the probed length (nonsense values: only the graph is kept), or, for
    a result of fixed length whose values index the counted one (np.unique's inverse),
    changed by `resize(value, k)`. `total`: the most the count can usefully be probed at,
    `least` the least (generalize/probes.probe_counts)."""
    if trace is None or box.node.trace_id != trace.id:
        return box
    sources = trace.__dict__.setdefault("count_sources", {})
    key = (LENGTH, key)
    first = key not in sources
    if first and resize is not None:  # (its length is not the count)
        return box
    index = sources.setdefault(key, len(sources))
    trace.__dict__.setdefault("count_lengths", set()).add(box.node)  # its shape counts
    probe = getattr(_state, "probe", None)
    if probe is not None and probe.trace_id == trace.id and index in probe.counts:
        value = (resize or _with_length)(box.value, probe.counts[index])
        box.node.shape = np.shape(value)  # a new node, which nothing reads yet
        box = trace.boxes[box.node] = Box(value, box.node)
    if first:
        trace.guard(box, LENGTH, len(box.value))
        guard = trace.guards[-1]
        guard.params.update(source=index, read=False, total=total, least=least)
        trace.__dict__.setdefault("count_guards", []).append(guard)
    return box


def length_key(trace, box):
    """What identifies the data a length source is computed from (as a mask, `_key`)."""
    return _key(trace, box.node) if type(box) is Box and \
        box.node.trace_id == trace.id else id(box)


def _with_length(value, length):
    value = np.asarray(value)
    shape = (length, *value.shape[1:])
    return np.resize(value, shape) if value.size else np.zeros(shape, value.dtype)


def read_count(trace, box):
    """int() of a traced np.count_nonzero(mask) (generated code's `count = int(...)`, traced
    again by hessian or grad of grad): the mask becomes a count source, and the number
    read is marked as a size read in Python. None for any other value."""
    node = box.node
    if node.prim is None or node.prim.op != "count_nonzero" or node.params["axis"] is not None \
            or node.params["keepdims"] or type(node.args[0]) is not Node:
        return None
    source = trace.boxes.get(node.args[0])
    if source is None:
        return None
    source = observe(trace, source)
    count = int(np.count_nonzero(source.value))
    mark_read(trace, count)
    return count


boxes.COUNT_READS.append(read_count)


def mark_read(trace, size, box=None):
    """A size was read after the trace's masks: `size`, the shape the user's Python read
    (len(), .shape, .size, iteration) of `box`, the shape sliced with bounds (x[m][:3] is
    3 long, or fewer) or the count int() read. Where the box's shape may hold a count
    (`count_shaped`), the count guards so far are marked (a count Python may decide on),
    and the size is kept on the first: where it moves with a count between the traces,
    generalize/counts.py tries every count, and counts 0 and 1 trace their own code;
    where it does not (a[:, :H] after a mask), it decides on no count. A box no selection
    made (an LSTM's h, whose gates' masks only chose elements: `H = h.shape[1]`) marks
    nothing, so that a count nothing else needs is not probed (counts.unneeded)."""
    guards = getattr(trace, "count_guards", None)
    if not guards or box is not None and not count_shaped(trace, box.node):
        return
    for guard in guards[trace.__dict__.get("read_marked", 0):]:
        guard.params["read"] = True
    trace.read_marked = len(guards)
    first = guards[0].params
    first["reads"] = first.get("reads", ()) + (size,)


boxes.SIZE_READS.append(mark_read)


def count_shaped(trace, node):
    """Whether node's shape may hold a count: it selects by a counted mask (x[m],
    np.nonzero(m)), is as long as the data says (np.unique), or reads such a value. A
    shape gets a count from no other place: a size Python read from one is marked then.
    Each node is looked at once per trace (the answers are kept)."""
    known = trace.__dict__.setdefault("count_shaped", {})
    masks, lengths = getattr(trace, "count_masks", ()), getattr(trace, "count_lengths", ())
    stack = [node]
    while stack:
        top = stack[-1]
        if top in known:
            stack.pop()
            continue
        args = [a for a in top.args if type(a) is Node]
        todo = [a for a in args if a not in known]
        if todo:
            stack += todo
            continue
        stack.pop()
        known[top] = top in lengths or any(known[a] for a in args) or selects(top, masks)
    return known[node]


# the primitives whose results are as long as their mask's count (rules/indices.py)
INDICES_OF_MASKS = ("nonzero", "flatnonzero", "argwhere")


def selects(node, masks):
    """node selects elements by one of `masks` (a mask whose count is a source)."""
    return node.prim is not None and ("index" in node.params and not is_guard(node) or
                                      node.prim.name in INDICES_OF_MASKS) \
        and any(type(a) is Node and a in masks for a in node.args)


def with_count(value, count):
    """`value` changed to have `count` nonzero elements (trailing ones cleared, or leading
    zeros set to one)."""
    flat = np.array(value).ravel()
    nonzero = np.flatnonzero(flat)
    if count < nonzero.size:
        flat[nonzero[count:]] = 0
    else:
        flat[np.flatnonzero(flat == 0)[:count - nonzero.size]] = 1
    return flat.reshape(np.shape(value))


def is_count(node):
    return is_guard(node) and node.params["test"] in TESTS


def counted(graph):
    return any(is_count(n) for n in graph.nodes)


def count_var(node):
    """The name generated code gives a count, if the guard defines one (a formula)."""
    outcome = node.params["outcome"] if is_count(node) else None
    return outcome.var if type(outcome) is Dim else None


@contextlib.contextmanager
def probing(counts):
    """Inside: the first trace made is a probe with the sources' counts changed to
    `counts` (generalize_counts.py), NumPy's warnings and floating-point errors silenced."""
    probe = _Probe(counts)
    outer = getattr(_state, "probe", None)
    _state.probe = probe
    try:
        with np.errstate(all="ignore"), _quiet():
            yield
    finally:
        _state.probe = outer


@contextlib.contextmanager
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
