"""A worker lost mid-gradient costs time, never a silently partial sum.

Dask keeps the task graph, so a worker process that dies loses only what it held: the
scheduler runs those tasks again on the workers left (and on the one its nanny starts
again). A task whose workers keep dying is given up after
`distributed.scheduler.allowed-failures` deaths (3 by default) with KilledWorker, which
`computed` turns into a PartialSumError naming the chunks it cost and their rows. And
whatever the scheduler does, the reduction carries (chunk, rows) for every chunk it adds:
`counted_once` checks that the total holds each chunk asked for exactly once, with its
rows, before the client divides by them.
"""

from ..errors import AutodiffgenError


class PartialSumError(AutodiffgenError, RuntimeError):
    """The sum over chunks would not count every chunk's rows exactly once (a chunk lost
    with its workers, or summed twice): no value or gradient is returned."""


def counted_once(counted, sizes):
    """Raise PartialSumError unless `counted` ([(chunk, rows)] of the total) holds every
    chunk of `sizes` (rows per chunk; NaN where Dask does not know them) exactly once."""
    seen = {}
    for index, rows in counted:
        seen.setdefault(index, []).append(rows)
    twice = sorted(i for i, r in seen.items() if len(r) > 1)
    missing = [i for i in range(len(sizes)) if i not in seen]
    wrong = sorted(i for i, r in seen.items() if i >= len(sizes) or
                   sizes[i] == sizes[i] and r[0] != sizes[i])  # (NaN: not known)
    if not (twice or missing or wrong):
        return
    what = [f"{_chunks(missing, sizes)} missing" if missing else "",
            f"{_chunks(twice, sizes)} summed more than once" if twice else "",
            f"{_chunks(wrong, sizes)} with other row counts than the data's" if wrong else ""]
    raise PartialSumError(
        "autodiffgen.dask: the sum over chunks does not count every chunk's rows once: "
        + "; ".join(w for w in what if w) + f" (of {len(sizes)} chunks). No value or "
        "gradient is returned; this is a bug of autodiffgen.dask or of the scheduler: "
        "please report it")


def computed(futures, timeout, chunks, sizes):
    """The futures' results, waiting at most `timeout` seconds for each; a KilledWorker
    (the workers running one task kept dying) as a PartialSumError naming the chunks
    whose rows it cost (`chunks`: each chunk's Delayed blocks, whose graphs say which
    tasks a chunk needs)."""
    try:
        return [future.result(timeout=timeout) for future in futures]
    except Exception as e:
        if type(e).__name__ != "KilledWorker":
            raise
        deaths = e.allowed_failures + 1
        raise PartialSumError(
            f"autodiffgen.dask: {_lost(e.task, chunks, sizes)} could not be computed: the "
            f"worker processes running task {e.task!r} died {deaths} "
            f"time{'s' * (deaths > 1)} (distributed.KilledWorker), so Dask gave it "
            "up. No value or gradient is returned (the other chunks' sums are not one). "
            "Dask runs a task lost with its worker again up to "
            "distributed.scheduler.allowed-failures times; look at the workers' logs "
            "for what killed them (memory: a smaller chunk of rows needs less)") from e


def _lost(key, chunks, sizes):
    """What the task `key` computed, as the user knows it: a chunk (its own task, or one
    its data comes from), what every chunk reads, or a step of the sum (the keys
    autodiffgen.dask's _run gives its tasks)."""
    text = str(key)
    if text.startswith("autodiffgen-chunk-"):
        return _chunks([int(text.split("-")[2])], sizes)
    if text.startswith(("autodiffgen-sources-", "autodiffgen-arguments-")):
        return "what every chunk reads (the small arguments, the generated code)"
    if text.startswith("autodiffgen-sum-"):
        return "a step of the sum over chunks"
    lost = [i for i, blocks in enumerate(chunks)
            if any(key in block.__dask_graph__() for block in blocks)]
    return _chunks(lost, sizes) if lost else f"task {key!r}"


def _chunks(indices, sizes):
    """'chunks 2 and 5 (rows 40 to 59, 100 to 119)' of row counts `sizes`."""
    starts = [0]
    for n in sizes:
        starts.append(starts[-1] + n)
    spans = [f"{starts[i]:g} to {starts[i + 1] - 1:g}" for i in indices if i < len(sizes)]
    names = " and ".join(map(str, indices))
    return (f"chunk{'s' * (len(indices) > 1)} {names}"
            + (f" (rows {', '.join(spans)})" if spans else ""))
