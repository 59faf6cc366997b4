"""One full-data gradient on 1, 2, ... Dask worker processes against one in-memory process.

    python benchmarks/dask_scaling.py [--rows 250000 1000000 4000000] [--workers 1 2]

For each row count: the same data (dask.array's seeded generator: the same numbers whether
the chunks are made on workers or in one process) and the same loss (logistic regression,
16 features, chunks of CHUNK rows). The in-memory time is autodiffgen.value_and_grad on
all rows held by this process (one thread: OMP_NUM_THREADS=1 and the like are set before
NumPy is imported, as Dask's nanny sets them on its workers); the Dask times are
autodiffgen.dask.value_and_grad with the rows persisted on the workers (made once, not
timed). All are timed in the same interleaved rounds, best of REPEATS after a first
(tracing) call, so load from others slows each alike. Efficiency per worker = in-memory
time / (workers x Dask time): 1.0 is a perfect split. The client's peak memory (its
maximum resident set) holds the in-memory copy and shows nothing more comes to it.

Two clusters of single-threaded workers run side by side, idle while the other computes:
one as Dask makes it (its nanny sets MALLOC_TRIM_THRESHOLD_=65536 in the workers'
environment, which turns off glibc's adaptive thresholds) and one with TUNED_MALLOC in
`distributed.nanny.pre-spawn-environ`. On the first, the user's chunks (chunks="keep") and
the chunking policy's (chunks="auto": the chunks a worker holds run as one task), each
chunk run by the generated code in blocks of rows (chunking.block_rows); on the second,
chunks="auto". Per call: a gradient of one 1000-row chunk per worker. Per chunk:
(keep - auto) / (keep's tasks - auto's), what each extra task adds.
"""

import argparse
import os
import resource
import time
import warnings

# the in-memory process gets one core, as each worker does (threads_per_worker=1; Dask's
# nanny sets OMP_NUM_THREADS=1 too): BLAS and numexpr (the in-memory code's fused
# arithmetic on large arrays) would otherwise use every core
for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
              "NUMEXPR_NUM_THREADS"):
    os.environ[_name] = "1"

import numpy as np  # (after the thread counts: read when NumPy loads its BLAS)

FEATURES = 16
CHUNK = 125_000
REPEATS = 15  # best of: on a machine shared with others, the rounds that ran alone
# glibc's thresholds set large enough that a worker's temporaries come from its heap and
# stay there: no fresh mmap, page faults and zeroing of each on every call
TUNED_MALLOC = {"MALLOC_TRIM_THRESHOLD_": 64 * 2**20, "MALLOC_MMAP_THRESHOLD_": 32 * 2**20}


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


def cluster(workers, malloc):
    """A LocalCluster of `workers` single-threaded worker processes and its Client, with
    `malloc` (None: Dask's own) as the workers' glibc environment."""
    import dask
    from dask.distributed import Client, LocalCluster

    for name in TUNED_MALLOC:  # a nanny leaves its settings in this process's environment,
        os.environ.pop(name, None)  # where the next cluster's would read them first
    environ = {f"distributed.nanny.pre-spawn-environ.{k}": v for k, v in (malloc or {}).items()}
    with dask.config.set(environ):
        c = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                         dashboard_address=":0")
    return c, Client(c, set_as_default=False)


def measured(rows, workers):
    """The seconds of the in-memory gradient and of each Dask call, interleaved, and the
    tasks each Dask call ran."""
    import dask
    import dask.array as da
    from dask.distributed import wait

    import autodiffgen
    import autodiffgen.dask as add

    warnings.simplefilter("ignore", UserWarning)  # chunks="keep"'s advice, said in the table
    p = params()
    x, y = dask.compute(*dataset(rows), scheduler="sync")
    in_memory = autodiffgen.value_and_grad(loss)
    (plain, plain_client), (tuned, tuned_client) = (cluster(workers, m)
                                                    for m in (None, TUNED_MALLOC))
    with plain, plain_client, tuned, tuned_client:
        data = {}
        for c in (plain_client, tuned_client):
            with c.as_current():
                X, Y = dataset(rows)
                tiny = (da.ones((1000 * workers, FEATURES), chunks=1000),
                        da.ones(1000 * workers, chunks=1000))
                data[c] = c.persist([X, Y, *tiny])
                wait(data[c])
        keep, auto, small, tuned_auto = (add.value_and_grad(loss, timeout=600, chunks=k)
                                         for k in ("keep", "auto", "keep", "auto"))

        def on(c, vg, tiny=False):
            def call():
                with c.as_current():
                    vg(p, *data[c][2 * tiny:2 * tiny + 2])
            return call

        seconds = best_times([lambda: in_memory(p, x, y), on(plain_client, keep),
                              on(plain_client, auto), on(tuned_client, tuned_auto),
                              on(plain_client, small, tiny=True)])
    names = ("memory", "keep", "auto", "tuned", "per_call")
    return dict(zip(names, seconds), tasks=(len(keep.plan.rows), len(auto.plan.rows)),
                block=auto.plan.block)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[250_000, 1_000_000, 4_000_000])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    options = parser.parse_args()
    print("| rows | workers | in memory | user's chunks (efficiency) | chunks=\"auto\" "
          "(efficiency) | auto, tuned malloc (efficiency) | per call | per chunk | load |")
    print("|---|---:|---:|---|---|---|---:|---:|---|")
    for rows in options.rows:
        for w in options.workers:
            t = measured(rows, w)
            (n_keep, n_auto), per_chunk = t["tasks"], "-"
            if n_keep > n_auto:
                per_chunk = f"{1000 * (t['keep'] - t['auto']) / (n_keep - n_auto):.2f} ms"
            cells = [f"{rows:,}", str(w), f"{1000 * t['memory']:.1f} ms"] + [
                f"{1000 * t[k]:.1f} ms, {n} task{'s' * (n > 1)} ({t['memory'] / (w * t[k]):.2f})"
                for k, n in (("keep", n_keep), ("auto", n_auto), ("tuned", n_auto))] + [
                f"{1000 * t['per_call']:.1f} ms", per_chunk,
                " ".join(f"{a:.2f}" for a in os.getloadavg())]
            print("| " + " | ".join(cells) + " |", flush=True)
    print(f"\nblocks of {t['block']:,} rows; peak memory of the client (this process, every "
          f"run, the in-memory copies included): {peak_mb():.0f} MB")


if __name__ == "__main__":
    main()
