"""One full-data gradient on 1, 2, ... Dask worker processes against one in-memory process.

    python benchmarks/dask_scaling.py [--rows 250000 1000000 4000000] [--workers 1 2]

For each row count: the same data (dask.array's seeded generator: the same numbers whether
the chunks are made on workers or in one process) and the same loss (logistic regression,
16 features, chunks of CHUNK rows). The in-memory time is autodiffgen.value_and_grad in a
fresh process holding all rows; the Dask time is autodiffgen.dask.value_and_grad with the
rows persisted on the workers (the data is made once, not timed). Each is the best of
REPEATS calls after a first (tracing) call; the in-memory process runs on one core. Efficiency per worker = in-memory time /
(workers x Dask time): 1.0 is a perfect split. The client's peak memory (its maximum
resident set) shows the data never comes to the client.

Each cluster times the user's chunks (chunks="keep") and the chunking policy's
(chunks="auto": merged to one chunk per worker, capped by its memory), interleaved round
by round. Per call: the time of a gradient of one 1000-row chunk per worker. Per chunk:
(keep - auto) / (keep's chunks - auto's), the cost each extra task adds.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

FEATURES = 16
CHUNK = 125_000
REPEATS = 5
# the in-memory process gets one core, as each worker does (threads_per_worker=1; Dask's
# nanny sets OMP_NUM_THREADS=1 too): BLAS and numexpr (the in-memory code's fused
# arithmetic on large arrays) would otherwise use every core
ONE_THREAD = {**os.environ, **dict.fromkeys(
    ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"), "1")}


def loss(params, x, y):
    z = x @ params["w"] + params["b"]
    return np.mean(np.logaddexp(0.0, z) - y * z)


def dataset(rows):
    import dask.array as da

    rng = da.random.default_rng(0)
    X = rng.standard_normal((rows, FEATURES), chunks=(min(CHUNK, rows), FEATURES))
    Y = (rng.random(rows, chunks=min(CHUNK, rows)) < 0.5).astype(np.float64)
    return X, Y


def params():
    return {"w": np.linspace(-1.0, 1.0, FEATURES), "b": 0.1}


def best_time(call):
    call()  # the first call traces and compiles
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times)


def best_times(calls):
    """The best of REPEATS timings of each call, taken in interleaved rounds (a machine
    shared with others slows each alike)."""
    for call in calls:
        call()  # the first call traces and compiles
    times = [[] for _ in calls]
    for _ in range(REPEATS):
        for call, kept in zip(calls, times):
            start = time.perf_counter()
            call()
            kept.append(time.perf_counter() - start)
    return [min(t) for t in times]


def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def in_memory(rows):
    """Run in a fresh process: the in-memory gradient's time and that process's peak."""
    import dask

    import autodiffgen

    x, y = dask.compute(*dataset(rows), scheduler="sync")
    vg = autodiffgen.value_and_grad(loss)
    p = params()
    return {"seconds": best_time(lambda: vg(p, x, y)), "peak_mb": peak_mb()}


def on_dask(rows, workers):
    """The Dask gradient's time with `workers` single-threaded worker processes, with the
    user's chunks and with chunks="auto" (and how many that ran), and the time of a call
    on one tiny chunk per worker (the per-call cost)."""
    import dask.array as da
    from dask.distributed import Client, LocalCluster, wait

    import autodiffgen.dask as add

    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster):
        X, Y = dataset(rows)
        X, Y = X.persist(), Y.persist()
        tiny = [a.persist() for a in (da.ones((1000 * workers, FEATURES), chunks=1000),
                                      da.ones(1000 * workers, chunks=1000))]
        wait([X, Y, *tiny])
        keep, auto, small = (add.value_and_grad(loss, timeout=600, chunks=c)
                             for c in ("keep", "auto", "keep"))
        p = params()
        seconds = best_times([lambda: keep(p, X, Y), lambda: auto(p, X, Y),
                              lambda: small(p, *tiny)])
        return {"keep": seconds[0], "auto": seconds[1], "per_call": seconds[2],
                "chunks": (len(keep.plan.rows), len(auto.plan.rows))}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[250_000, 1_000_000, 4_000_000])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--in-memory", type=int, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.in_memory:
        print(json.dumps(in_memory(options.in_memory)))
        return
    print("| rows | in memory | workers | user's chunks (efficiency) | chunks=\"auto\" "
          "(efficiency) | per call | per chunk |")
    print("|---|---:|---:|---|---|---:|---:|")
    peaks = []
    for rows in options.rows:
        out = subprocess.run([sys.executable, __file__, "--in-memory", str(rows)],
                             capture_output=True, text=True, check=True, env=ONE_THREAD)
        memory = json.loads(out.stdout)
        peaks.append((rows, memory["peak_mb"]))
        for w in options.workers:
            t = on_dask(rows, w)
            (n_keep, n_auto), per_chunk = t["chunks"], "-"
            if n_keep > n_auto:
                per_chunk = f"{1000 * (t['keep'] - t['auto']) / (n_keep - n_auto):.2f} ms"
            cells = [f"{rows:,}", f"{1000 * memory['seconds']:.1f} ms", str(w)] + [
                f"{1000 * t[k]:.1f} ms, {n} chunks ({memory['seconds'] / (w * t[k]):.2f})"
                for k, n in (("keep", n_keep), ("auto", n_auto))] + [
                f"{1000 * t['per_call']:.1f} ms", per_chunk]
            print("| " + " | ".join(cells) + " | " + os.getloadavg().__repr__(), flush=True)
    print(f"\npeak memory of the Dask client (this process, every run): {peak_mb():.0f} MB")
    for rows, mb in peaks:
        print(f"peak memory of the in-memory process at {rows:,} rows: {mb:.0f} MB")


if __name__ == "__main__":
    main()
