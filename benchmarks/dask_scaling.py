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
    """The Dask gradient's time with `workers` single-threaded worker processes."""
    from dask.distributed import Client, LocalCluster, wait

    import autodiffgen.dask as add

    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster):
        X, Y = dataset(rows)
        X, Y = X.persist(), Y.persist()
        wait([X, Y])
        vg = add.value_and_grad(loss, timeout=600)
        p = params()
        return best_time(lambda: vg(p, X, Y))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[250_000, 1_000_000, 4_000_000])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--in-memory", type=int, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.in_memory:
        print(json.dumps(in_memory(options.in_memory)))
        return
    header = "| rows | in memory | " + " | ".join(
        f"{w} worker{'s' * (w > 1)} (efficiency)" for w in options.workers) + " |"
    print(header)
    print("|" + "---|" * (2 + len(options.workers)))
    peaks = []
    for rows in options.rows:
        out = subprocess.run([sys.executable, __file__, "--in-memory", str(rows)],
                             capture_output=True, text=True, check=True, env=ONE_THREAD)
        memory = json.loads(out.stdout)
        cells = [f"{rows:,}", f"{1000 * memory['seconds']:.1f} ms"]
        for w in options.workers:
            seconds = on_dask(rows, w)
            cells.append(f"{1000 * seconds:.1f} ms ({memory['seconds'] / (w * seconds):.2f})")
        peaks.append((rows, memory["peak_mb"]))
        print("| " + " | ".join(cells) + " |", flush=True)
    print(f"\npeak memory of the Dask client (this process, every run): {peak_mb():.0f} MB")
    for rows, mb in peaks:
        print(f"peak memory of the in-memory process at {rows:,} rows: {mb:.0f} MB")


if __name__ == "__main__":
    main()
