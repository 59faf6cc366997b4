"""Does the loss decompose over rows? Checked once, on a small sample, before any chunk runs.

Chunked gradients are right only if the loss of all rows is the combination of the losses
of any split of them (their sum, or their mean weighted by rows). The check computes the
loss of a sample and of its two halves with the user's own function. When they disagree,
both samples are traced on the tape and their recorded values compared, to name the
operation that mixes rows: the first reduction over the batch axis feeding a per-row value
that differs between the sample and its half (a batch norm), or a reduction over the batch
axis other than a sum or mean (a max over the batch). With has_aux and aux="reduce", each
aux value is checked the same way, as the workers add it up as they add the loss.
"""

import inspect

import numpy as np

from .. import tape
from ..errors import AutodiffgenError, at
from ..trace.context import source_line
from ..tree import leaves


class DecompositionError(AutodiffgenError, ValueError):
    """The loss does not decompose over rows as `reduce` says."""


SUMMING = {"sum", "mean", "add_reduce"}


def combined(first, second, h, n, reduce):
    return first + second if reduce == "sum" else (h * first + (n - h) * second) / n


def check_decomposes(gf, args, batch, reduce, aux_paths=None):
    """Raise DecompositionError unless f(rows) == combine(f(first half), f(second half)),
    for the loss and, when `aux_paths` (a function: how the user writes each aux leaf) is
    given, for each aux value."""
    n = len(args[batch[0]])
    h = n // 2
    outs = [gf.fun(*_rows(args, batch, s)) for s in (slice(0, n), slice(0, h), slice(h, n))]
    whole, first, second = (float(out[0] if gf.has_aux else out) for out in outs)
    if not _close(whole, combined(first, second, h, n, reduce), args):
        _refuse(gf, args, batch, reduce, (whole, first, second))
    if aux_paths is not None:
        for path, values in zip(aux_paths(), zip(*(out[1] for out in outs))):
            _check_aux(gf, path, values, h, n, reduce, args)


def _refuse(gf, args, batch, reduce, losses):
    """The loss does not decompose: say where it mixes rows, and what would decompose."""
    whole, first, second = losses
    n = len(args[batch[0]])
    h = n // 2
    other = "sum" if reduce == "mean" else "mean"
    hint = (f" It does decompose as reduce={other!r}: pass that."
            if _close(whole, combined(first, second, h, n, other), args) else "")
    what = _mixing_operation(gf, args, batch, n, h)
    raise DecompositionError(at(
        what[0] if what else _def_site(gf.fun),
        f"the loss of {gf.__name__} does not decompose over rows as reduce={reduce!r}: "
        f"on {n} sample rows it is {whole!r}, but its halves' losses combine to "
        f"{combined(first, second, h, n, reduce)!r}, so chunked gradients would be wrong. "
        + (what[1] if what else "" if hint else "Some operation mixes rows.")
        + hint + " Compute per-row terms and end with their mean (or sum) over the rows."))


def _check_aux(gf, path, values, h, n, reduce, args):
    """One aux value: the workers add it over chunks as the loss, so it must decompose."""
    if all(v is None for v in values):  # an empty subtree, as in JAX
        return
    try:
        whole, first, second = (np.asarray(v, dtype=np.float64) for v in values)
    except (TypeError, ValueError):  # not a number: a string, None
        whole = first = None
    if whole is not None and whole.shape == first.shape == second.shape and \
            _close(whole, combined(first, second, h, n, reduce), args):
        return
    said = values[0] if whole is None else whole.tolist()
    raise DecompositionError(at(_def_site(gf.fun), (
        f"the aux value {path} of {gf.__name__} does not combine over rows as the loss "
        f"does (reduce={reduce!r}): on {n} sample rows it is {said!r}, which its halves' "
        "values do not give, so adding it up over chunks would be wrong. Pass "
        "aux='chunks' to get each chunk's aux values in a list, and combine them yourself")))


def _def_site(fun):
    code = getattr(inspect.unwrap(fun), "__code__", None)
    return (code.co_filename, code.co_firstlineno) if code else "<unknown location>"


def _rows(args, batch, rows):
    return [a[rows] if i in batch else a for i, a in enumerate(args)]


def _close(a, b, args):
    low = any(getattr(x, "dtype", np.float64) in (np.float16, np.float32) for x in leaves(args))
    return bool(np.allclose(a, b, rtol=1e-4 if low else 1e-9, atol=1e-6 if low else 1e-12))


def _mixing_operation(gf, args, batch, n, h):
    """((file, line), description) of the operation that mixes rows, or None."""
    try:
        whole = _recorded(gf, args)
        half = _recorded(gf, _rows(args, batch, slice(0, h)))
    except Exception:  # noqa: BLE001  naming is a courtesy: the check itself already failed
        return None
    if [node.prim.name for node, _ in whole] != [node.prim.name for node, _ in half]:
        return None
    for (node, value), (_, part) in zip(whole, half):
        if _rowwise(node.shape, n) and np.shape(part)[:1] == (h,) and \
                not np.allclose(np.asarray(value)[:h], part, rtol=1e-5, atol=1e-8):
            culprit = _batch_reduction(node, n) or node
            return _describe(culprit, "mixes rows: each row's value depends on the other rows")
    for node, _ in whole:
        if _reduces_rows(node, n) and node.prim.name not in SUMMING:
            return _describe(node, "combines rows other than by a sum or a mean")
    return None


def _recorded(gf, args):
    """[(forward node, its value)] of one eager trace, in recording order."""
    trace = tape.recorded(gf.request(args))
    return [(node, box.value) for node, box in trace.boxes.items()
            if node.prim is not None and node.grad_of is None]


def _rowwise(shape, n):
    return len(shape) >= 1 and shape[0] == n


def _reduces_rows(node, n):
    """A node whose input has the batch axis and whose output does not."""
    inputs = [a for a in node.args if hasattr(a, "shape") and hasattr(a, "prim")]
    return not _rowwise(node.shape, n) and any(_rowwise(a.shape, n) for a in inputs)


def _batch_reduction(node, n):
    """The earliest reduction over the batch axis among node's ancestors, or None."""
    seen, todo, found = set(), [node], []
    while todo:
        x = todo.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if x.prim is not None and _reduces_rows(x, n):
            found.append(x)
        todo += [a for a in x.args if hasattr(a, "prim") and hasattr(a, "shape")]
    return min(found, key=lambda x: x.id) if found else None


def _describe(node, what):
    line = source_line(node.loc)
    text = f"`{node.prim.name}` over the rows here (`{line}`) {what}."
    return node.loc or "<unknown location>", text
