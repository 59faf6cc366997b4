"""How many rows each task takes: the user's row chunks one a task, or groups that pay for theirs.

Every call pays Dask and the client a fixed cost, and every chunk a task's cost
(benchmarks/dask_scaling.py measured about 20-25 ms a call and 3 ms a chunk). A chunk of
125k rows of 16 float64 features is computed in about 4 ms, so its task costs as much as
its arithmetic. `planned` groups row chunks (never splits one, never copies one: a task
runs the generated code on each chunk of its group in turn and adds the sums) into as few
tasks as keep every worker busy, no group larger than a worker's memory allows with a few
copies in flight; chunks already on a worker (persisted) are grouped with that worker's
only, so no chunk moves. `advice` says so in words for the `autodiffgen` logger. Pure
functions of sizes, so the decision is tested without a cluster or a clock.
"""

import math
from dataclasses import dataclass

PER_CHUNK_SECONDS = 0.003  # a task's cost, measured (module docstring)
BYTES_PER_SECOND = 3.9e9  # a NumPy loss's reading speed on one core, measured likewise
IN_FLIGHT = 6  # copies of a chunk a worker may hold: its input, rechunked, temporaries
MAX_CHUNK_BYTES = 256 * 2**20  # the cap when no worker states a memory limit
MIN_CHUNK_BYTES = 64 * 2**20  # a chunk under this pays its task a fifth of its arithmetic
BLOCK_BYTES = 2**20  # the rows a task's code runs at a time (block_rows), measured


@dataclass(frozen=True)
class Plan:
    """The chunks each task runs (`groups`, of chunk indices), their rows (`rows`),
    whether they are the user's chunks one a task (`kept`), the rows a task aimed at, and
    the rows the generated code runs on at a time (`block`, 0: a chunk whole)."""

    groups: tuple
    rows: tuple
    kept: bool
    target: int
    block: int = 0


def kept(sizes, target=0):
    """The plan of one task per chunk of the user's."""
    sizes = tuple(int(n) for n in sizes)
    return Plan(tuple((i,) for i in range(len(sizes))), sizes, True, target)


def planned(sizes, row_bytes, workers=1, memory_limit=None, homes=None):
    """The tasks for chunks of `sizes` rows (the user's), `row_bytes` a row's bytes across
    every chunked argument, `homes` the worker holding each chunk (None: not computed yet):
    grouped up to `target` rows when the user's chunks are smaller than what pays for a
    task, so each worker runs a few large tasks instead of many small ones."""
    sizes = tuple(int(n) for n in sizes)
    target = target_rows(sum(sizes), row_bytes, workers, memory_limit)
    if len(sizes) <= workers or max(sizes) >= target:
        return kept(sizes, target)
    homes = homes or [None] * len(sizes)
    groups = tuple(g for home in dict.fromkeys(homes) for g in _grouped(
        [i for i in range(len(sizes)) if homes[i] == home], sizes, target))
    if len(groups) == len(sizes):
        return kept(sizes, target)
    return Plan(groups, tuple(sum(sizes[i] for i in g) for g in groups), False, target)


def target_rows(rows, row_bytes, workers=1, memory_limit=None):
    """Rows per chunk: the data split evenly into the fewest chunks that give every worker
    one, none past the memory cap (the worker's limit over IN_FLIGHT, else MAX_CHUNK_BYTES)."""
    cap = MAX_CHUNK_BYTES if not memory_limit else memory_limit // IN_FLIGHT
    cap_rows = max(1, cap // max(1, int(row_bytes)))
    workers = max(1, int(workers))
    per_worker = math.ceil(rows / workers)
    tasks = workers * math.ceil(per_worker / cap_rows)  # a multiple of the workers: even
    return max(1, math.ceil(rows / tasks))


def block_rows(row_bytes):
    """Rows of about BLOCK_BYTES: what a worker's code runs on at a time (worker.py's
    run_chunk), so that each temporary of a row's few numbers stays in the CPU's cache and
    under malloc's thresholds instead of being mapped and faulted in on every call."""
    return max(2, BLOCK_BYTES // max(1, int(row_bytes)))


def _grouped(indices, sizes, target):
    """The chunks at `indices`, in order, grouped while a group stays at most `target` rows
    (a chunk larger than that alone)."""
    out, group, rows = [], [], 0
    for i in indices:
        if group and rows + sizes[i] > target:
            out.append(tuple(group))
            group, rows = [], 0
        group.append(i)
        rows += sizes[i]
    return out + [tuple(group)] if group else out


def too_small(sizes, row_bytes):
    """Whether the median chunk is so small its task costs a fifth of its arithmetic or more."""
    ordered = sorted(sizes)
    median = ordered[len(ordered) // 2] * row_bytes
    return len(sizes) > 1 and median < MIN_CHUNK_BYTES


def advice(sizes, row_bytes, plan):
    """What the logger says: the chunks chosen, or why the user's cost their tasks."""
    mb = row_bytes / 2**20
    theirs = f"{len(sizes)} chunks of about {max(sizes):,} rows ({max(sizes) * mb:.1f} MB)"
    seconds = len(sizes) * PER_CHUNK_SECONDS
    compute = sum(sizes) * row_bytes / BYTES_PER_SECOND
    if not plan.kept:
        tasks = f"{len(plan.rows)} task{'s' * (len(plan.rows) > 1)}"
        return (f"autodiffgen.dask: {theirs} run as {tasks} of about "
                f"{max(plan.rows):,} rows ({max(plan.rows) * mb:.1f} MB): each task costs "
                f"about {1000 * PER_CHUNK_SECONDS:.0f} ms; chunks='keep' runs yours")
    return (f"autodiffgen.dask: {theirs} cost about {1000 * seconds:.0f} ms of tasks for "
            f"about {1000 * compute:.1f} ms of arithmetic; chunks of about "
            f"{plan.target:,} rows would pay for theirs (chunks='auto' groups them)")
