"""A full-data gradient over .npy files on disk several times larger than a worker's memory.

    python benchmarks/dask_out_of_core.py [--limit-mb 512] [--times 3] [--workers 1 2]

Writes X (rows x 16 float64, seeded) and Y (rows of 0/1) as .npy files totalling `times`
the workers' memory limit, opens them with autodiffgen.dask.from_npy (each task maps the
file, copies its chunk of rows, unmaps it) and computes the logistic regression's gradient
on a LocalCluster of single-threaded workers with that memory limit and spilling, pausing
and terminating turned off, so a worker that held more than its limit would show it in
its peak resident set (autodiffgen.dask.worker_peaks: Linux's VmHWM, reset before the
first call and read on every worker after the last; getrusage's ru_maxrss would not do, a
spawned worker inherits its parent's, here the client's who wrote the files). The
gradient is checked against the in-memory one computed in pieces in this process. The
throughput is the files' bytes over the best of REPEATS calls, next to the speed at which
one process reads the same files chunk by chunk the same way (the file is likely in the
page cache after it was written: that is the speed of memory, an upper bound on a disk's).
"""

import argparse
import os
import tempfile
import time

import numpy as np

FEATURES = 16
REPEATS = 3
PIECE = 200_000  # rows written, and checked in memory, at a time


def loss(params, x, y):
    z = x @ params["w"] + params["b"]
    return np.mean(np.logaddexp(0.0, z) - y * z)


def params():
    return {"w": np.linspace(-1.0, 1.0, FEATURES), "b": 0.1}


def write(folder, rows):
    """x.npy and y.npy of `rows` rows, written a piece at a time (never whole in memory)."""
    rng = np.random.default_rng(0)
    x = np.lib.format.open_memmap(os.path.join(folder, "x.npy"), "w+", np.float64,
                                  (rows, FEATURES))
    y = np.lib.format.open_memmap(os.path.join(folder, "y.npy"), "w+", np.float64, (rows,))
    for start in range(0, rows, PIECE):
        stop = min(rows, start + PIECE)
        x[start:stop] = rng.standard_normal((stop - start, FEATURES))
        y[start:stop] = rng.random(stop - start) < 0.5
    x.flush(), y.flush()
    return x.filename, y.filename


def in_pieces(xpath, ypath):
    """The in-memory mean gradient, computed a piece at a time; and the seconds one process
    takes to read the files piece by piece (mapped, copied, unmapped, as a task does)."""
    import autodiffgen

    vg, p = autodiffgen.value_and_grad(loss), params()
    rows = np.load(ypath, mmap_mode="r").shape[0]
    value, grads, reading = 0.0, None, 0.0
    for start in range(0, rows, PIECE):
        begin = time.perf_counter()
        x = np.array(np.load(xpath, mmap_mode="r")[start:start + PIECE])
        y = np.array(np.load(ypath, mmap_mode="r")[start:start + PIECE])
        reading += time.perf_counter() - begin
        v, g = vg(p, x, y)
        value += v * len(y)
        g = {k: np.asarray(g[k]) * len(y) for k in g}
        grads = g if grads is None else {k: grads[k] + g[k] for k in g}
    return value / rows, {k: grads[k] / rows for k in grads}, reading


def on_dask(xpath, ypath, workers, limit):
    """(best seconds, value, grads, each worker's peak resident MB, chunks)."""
    import dask
    from dask.distributed import Client, LocalCluster

    import autodiffgen.dask as add

    off = {f"distributed.worker.memory.{k}": False for k in ("spill", "target", "pause",
                                                              "terminate")}
    with dask.config.set(off), LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, memory_limit=limit,
            dashboard_address=None) as cluster, Client(cluster) as client:
        X = add.from_npy(xpath)
        Y = add.from_npy(ypath, rows=X.chunksize[0])
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
    return min(times), value, grads, sorted(peaks.values()), len(X.chunks[0]), stores


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit-mb", type=int, default=512)
    parser.add_argument("--times", type=float, default=3.0)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    options = parser.parse_args()
    limit = options.limit_mb * 2**20
    rows = int(options.times * limit / (8 * (FEATURES + 1)))
    with tempfile.TemporaryDirectory() as folder:
        xpath, ypath = write(folder, rows)
        size = os.path.getsize(xpath) + os.path.getsize(ypath)
        want_value, want, reading = in_pieces(xpath, ypath)
        print(f"{rows:,} rows, {size / 2**20:.0f} MB on disk = {size / limit:.1f}x a worker's "
              f"memory limit of {options.limit_mb} MB; read in pieces by one process at "
              f"{size / 2**20 / reading:.0f} MB/s; load {os.getloadavg()}")
        print("| workers | chunks | best of 3 | throughput | of the read speed | peak per "
              "worker (limit) | gradient vs in memory |")
        print("|---:|---:|---:|---:|---:|---|---:|")
        for w in options.workers:
            seconds, value, grads, peaks, chunks, stores = on_dask(xpath, ypath, w, limit)
            error = max(abs(value - want_value), *(np.max(np.abs(grads[k] - want[k]))
                                                   for k in want))
            rate = size / 2**20 / seconds
            print(f"| {w} | {chunks} | {seconds:.2f} s | {rate:.0f} MB/s | "
                  f"{rate * reading / (size / 2**20):.2f} | "
                  f"{', '.join(f'{mb:.0f}' for mb in peaks)} MB ({options.limit_mb} MB) | "
                  f"{error:.1e} | {stores} load {os.getloadavg()}", flush=True)
            assert max(peaks) < options.limit_mb, "a worker went past its memory limit"


if __name__ == "__main__":
    main()
