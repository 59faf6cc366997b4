"""A full-data gradient over data on disk several times larger than a worker's memory.

    python benchmarks/dask_out_of_core.py [--limit-mb 512] [--times 3] [--workers 1 2]
                                          [--source npy zarr]

Writes X (rows x 16 float64, seeded) and Y (rows of 0/1) totalling `times` the workers'
memory limit, as .npy files and as Zarr stores (the same numbers, chunks of PIECE rows, Zarr's
default compressor), opens them with autodiffgen.dask.from_npy (each task maps the file,
copies its chunk of rows, unmaps it) or dask.array.from_zarr (each task reads and decodes
a chunk of the store) and computes the logistic regression's gradient
on a LocalCluster of single-threaded workers with that memory limit and spilling, pausing
and terminating turned off, so a worker that held more than its limit would show it in
its peak resident set (autodiffgen.dask.worker_peaks: Linux's VmHWM, reset before the
first call and read on every worker after the last; getrusage's ru_maxrss would not do, a
spawned worker inherits its parent's, here the client's who wrote the files). The
gradient is checked against the in-memory one computed in pieces in this process. The
throughput is the data's bytes (as arrays, not as stored) over the best of REPEATS calls,
next to the speed at which one process reads the same data chunk by chunk the same way
(the files are likely in the page cache after they were written: for .npy that is the
speed of memory, an upper bound on a disk's; Zarr's adds decoding).
"""

import argparse
import functools
import os
import tempfile
import time

import numpy as np

FEATURES = 16
REPEATS = 3
PIECE = 200_000  # rows written, and checked in memory, at a time; a Zarr store's chunk


def loss(params, x, y):
    z = x @ params["w"] + params["b"]
    return np.mean(np.logaddexp(0.0, z) - y * z)


def params():
    return {"w": np.linspace(-1.0, 1.0, FEATURES), "b": 0.1}


def pieces(rows):
    """(start, stop, x, y) of the data, PIECE rows at a time: the same numbers every time."""
    rng = np.random.default_rng(0)
    for start in range(0, rows, PIECE):
        stop = min(rows, start + PIECE)
        yield start, stop, rng.standard_normal((stop - start, FEATURES)), \
            (rng.random(stop - start) < 0.5).astype(np.float64)


def write(folder, rows, source):
    """x and y of `rows` rows as .npy files or Zarr stores, written a piece at a time (never
    whole in memory); their paths."""
    paths = [os.path.join(folder, f"{name}.{source}") for name in ("x", "y")]
    if source == "npy":
        make = functools.partial(np.lib.format.open_memmap, mode="w+", dtype=np.float64)
    else:
        import zarr

        def make(path, shape):
            return zarr.open_array(path, mode="w", shape=shape, dtype=np.float64,
                                   chunks=(PIECE,) + shape[1:])
    x, y = make(paths[0], shape=(rows, FEATURES)), make(paths[1], shape=(rows,))
    for start, stop, xs, ys in pieces(rows):
        x[start:stop], y[start:stop] = xs, ys
    if source == "npy":
        x.flush(), y.flush()
    return paths


def reader(source, path):
    """rows(start, stop) of the array at `path`, read as a task of the workers reads it."""
    if source == "npy":
        return lambda start, stop: np.array(np.load(path, mmap_mode="r")[start:stop])
    import zarr

    return lambda start, stop: np.asarray(zarr.open_array(path, mode="r")[start:stop])


def in_pieces(source, xpath, ypath, rows):
    """The in-memory mean gradient, computed a piece at a time; and the seconds one process
    takes to read the data piece by piece as a task does (.npy: mapped, copied, unmapped)."""
    import autodiffgen

    vg, p = autodiffgen.value_and_grad(loss), params()
    read_x, read_y = reader(source, xpath), reader(source, ypath)
    value, grads, reading = 0.0, None, 0.0
    for start in range(0, rows, PIECE):
        begin = time.perf_counter()
        x, y = read_x(start, start + PIECE), read_y(start, start + PIECE)
        reading += time.perf_counter() - begin
        v, g = vg(p, x, y)
        value += v * len(y)
        g = {k: np.asarray(g[k]) * len(y) for k in g}
        grads = g if grads is None else {k: grads[k] + g[k] for k in g}
    return value / rows, {k: grads[k] / rows for k in grads}, reading


def opened(source, xpath, ypath):
    """The dask arrays of the data on disk, both chunked alike by rows."""
    import dask.array as da

    import autodiffgen.dask as add

    if source == "zarr":
        return da.from_zarr(xpath), da.from_zarr(ypath)
    X = add.from_npy(xpath)
    return X, add.from_npy(ypath, rows=X.chunksize[0])


def on_dask(source, xpath, ypath, workers, limit):
    """(best seconds, value, grads, each worker's peak resident MB, chunks, tasks, each
    worker's store of data)."""
    import dask
    from dask.distributed import Client, LocalCluster

    import autodiffgen.dask as add

    off = {f"distributed.worker.memory.{k}": False for k in ("spill", "target", "pause",
                                                              "terminate")}
    with dask.config.set(off), LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, memory_limit=limit,
            dashboard_address=None) as cluster, Client(cluster) as client:
        X, Y = opened(source, xpath, ypath)
        vg, p = add.value_and_grad(loss, timeout=600), params()
        add.worker_peaks(client, reset=True)
        value, grads = vg(p, X, Y)  # traces and compiles
        times = []
        for _ in range(REPEATS):
            start = time.perf_counter()
            vg(p, X, Y)
            times.append(time.perf_counter() - start)
        peaks = add.worker_peaks(client)
        peaks = {w: b / 2**20 for w, b in peaks.items()}
        stores = client.run(lambda dask_worker: type(dask_worker.data).__name__)
    return (min(times), value, grads, sorted(peaks.values()), len(X.chunks[0]),
            len(vg.plan.groups), stores)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit-mb", type=int, default=512)
    parser.add_argument("--times", type=float, default=3.0)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--source", nargs="+", choices=("npy", "zarr"), default=["npy", "zarr"])
    options = parser.parse_args()
    limit = options.limit_mb * 2**20
    rows = int(options.times * limit / (8 * (FEATURES + 1)))
    size = rows * (FEATURES + 1) * 8
    print(f"{rows:,} rows, {size / 2**20:.0f} MB of float64 = {size / limit:.1f}x a worker's "
          f"memory limit of {options.limit_mb} MB; load {os.getloadavg()}")
    print("| data | workers | chunks (tasks) | best of 3 | throughput | of the read speed | "
          "peak per worker (limit) | gradient vs in memory |")
    print("|---|---:|---:|---:|---:|---:|---|---:|")
    for source in options.source:
        with tempfile.TemporaryDirectory() as folder:
            xpath, ypath = write(folder, rows, source)
            stored = sum(_bytes(p) for p in (xpath, ypath)) / 2**20
            want_value, want, reading = in_pieces(source, xpath, ypath, rows)
            for w in options.workers:
                seconds, value, grads, peaks, chunks, tasks, stores = on_dask(
                    source, xpath, ypath, w, limit)
                error = max(abs(value - want_value), *(np.max(np.abs(grads[k] - want[k]))
                                                       for k in want))
                rate = size / 2**20 / seconds
                print(f"| {source} ({stored:.0f} MB stored, read at "
                      f"{size / 2**20 / reading:.0f} MB/s) | {w} | {chunks} ({tasks}) | "
                      f"{seconds:.2f} s | {rate:.0f} MB/s | {rate * reading / (size / 2**20):.2f}"
                      f" | {', '.join(f'{mb:.0f}' for mb in peaks)} MB ({options.limit_mb} MB)"
                      f" | {error:.1e} | {stores} load {os.getloadavg()}", flush=True)
                assert max(peaks) < options.limit_mb, "a worker went past its memory limit"


def _bytes(path):
    """A file's bytes, or a directory's (a Zarr store's chunks)."""
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path)
               for f in files)


if __name__ == "__main__":
    main()
