"""What the client asks of Dask: the distributed client if there is one, the shape of its
cluster (workers, memory limits, where each chunk's data lives) and results computed on it.

On Dask's default scheduler (no dask.distributed client) each answers as one process
would: one worker, no limit, no homes, dask.compute.
"""

import dask

from .faults import computed


def client():
    """The default dask.distributed client, or None."""
    try:
        from distributed import default_client
        return default_client()
    except (ImportError, ValueError):
        return None


def scheduler_address():
    """The distributed client's scheduler address, or None on Dask's default scheduler."""
    c = client()
    return None if c is None else c.scheduler.address


def workers(chunks):
    """(workers, the smallest worker's memory limit or None, the worker holding each
    chunk's first block or None) of the distributed client; (1, None, None) on Dask's
    default scheduler."""
    c = client()
    if c is None:
        return 1, None, None
    info = c.scheduler_info()["workers"].values()
    limits = [w.get("memory_limit") for w in info if w.get("memory_limit")]
    keys = [blocks[0].key for blocks in chunks]
    where = c.who_has(keys) if keys else {}
    homes = [min(where.get(k) or [None], key=str) for k in keys]
    return max(1, len(info)), (min(limits) if limits else None), homes


def compute_all(xs, timeout, chunks=(), sizes=()):
    """Compute on the distributed client if there is one (waiting at most `timeout`
    seconds for each result; a task given up with its workers named as the chunks it
    cost: faults.py), else on Dask's default scheduler."""
    c = client()
    if c is None:
        return dask.compute(*xs)
    return computed(c.compute(list(xs)), timeout, chunks, sizes)
