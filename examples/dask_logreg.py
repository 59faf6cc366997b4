"""Full-batch L-BFGS for logistic regression on millions of rows that live on Dask workers.

    pip install -e '.[dask,test]'          # dask[distributed] and scipy
    python examples/dask_logreg.py [--rows 4000000] [--workers 2] [--subset 400000]

The data is made on the workers, chunk by chunk (dask.array's random generator), and kept
there (persist): the client never holds it. autodiffgen.dask traces the loss once on a
sample, sends the generated NumPy module to the workers, and each L-BFGS step asks for one
full-data value and gradient: one task per chunk and a tree reduction. The same training
then runs in memory (autodiffgen.value_and_grad in this process) on a subset of the rows,
for the wall time per gradient on one process.
"""

import argparse
import time

import dask.array as da
import numpy as np
from dask.distributed import Client, LocalCluster
from scipy.optimize import minimize

import autodiffgen
import autodiffgen.dask as add

LAMBDA = 1e-3


def loss(params, x, y):
    """Mean logistic loss of the rows plus an L2 penalty: a mean over rows, as reduce says."""
    z = x @ params["w"] + params["b"]
    penalty = 0.5 * LAMBDA * np.sum(params["w"] ** 2)
    return np.mean(np.logaddexp(0.0, z) - y * z) + penalty


def dataset(rows, features, chunk, seed=0):
    """(X, Y) as lazy dask arrays: each chunk of rows is drawn on the worker that holds it."""
    rng = da.random.default_rng(seed)
    X = rng.standard_normal((rows, features), chunks=(chunk, features))
    w_true = np.linspace(-1.0, 1.0, features)
    p = 1.0 / (1.0 + np.exp(-(X @ w_true + 0.3)))
    Y = (rng.random(rows, chunks=chunk) < p).astype(np.float64)
    return X, Y


def train(fun, x0, label):
    """L-BFGS with jac=True, printing the loss at each iteration; (result, seconds, calls)."""
    seen = {"calls": 0, "value": None}

    def counted(theta):
        value, g = fun(theta)
        seen["calls"] += 1
        seen["value"] = value
        return value, g

    def report(theta):
        print(f"  {label} iteration {report.k:2d}: loss {seen['value']:.6f}")
        report.k += 1

    report.k = 1
    start = time.perf_counter()
    result = minimize(counted, x0, jac=True, method="L-BFGS-B", callback=report,
                      options={"maxiter": 30, "gtol": 1e-7})
    return result, time.perf_counter() - start, seen["calls"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--features", type=int, default=16)
    parser.add_argument("--chunk", type=int, default=250_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--subset", type=int, default=400_000)
    options = parser.parse_args()

    params = {"w": np.zeros(options.features), "b": 0.0}
    with LocalCluster(n_workers=options.workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster):
        X, Y = dataset(options.rows, options.features, options.chunk)
        start = time.perf_counter()
        X, Y = X.persist(), Y.persist()
        X.sum().compute()  # wait until every chunk is made
        print(f"{options.rows:,} rows x {options.features} features in "
              f"{X.numblocks[0]} chunks made on {options.workers} workers in "
              f"{time.perf_counter() - start:.1f} s")

        vg = add.value_and_grad(loss, reduce="mean")
        fun, x0, unflatten = add.scipy_objective(vg, params, X, Y)
        print(f"L-BFGS over all {options.rows:,} rows (Dask, {options.workers} workers):")
        result, seconds, calls = train(fun, x0, "dask")
        print(f"  {result.message}; {calls} gradients in {seconds:.2f} s "
              f"({1000 * seconds / calls:.0f} ms per full-data gradient)")
        w = unflatten(result.x)["w"]
        subset = [np.asarray(a) for a in (X[:options.subset].compute(),
                                          Y[:options.subset].compute())]

    print(f"the same L-BFGS in memory, on the first {options.subset:,} rows (one process):")
    memory_vg = autodiffgen.value_and_grad(loss)

    def in_memory(theta):
        value, g = memory_vg(unflatten(theta), *subset)
        return float(value), np.r_[g["w"], g["b"]]

    result_m, seconds_m, calls_m = train(in_memory, x0, "memory")
    per_row_dask = seconds / calls / options.rows
    per_row_memory = seconds_m / calls_m / options.subset
    print(f"  {result_m.message}; {calls_m} gradients in {seconds_m:.2f} s "
          f"({1000 * seconds_m / calls_m:.0f} ms per gradient of {options.subset:,} rows)")
    print(f"time per row and gradient: Dask {1e9 * per_row_dask:.1f} ns, in memory "
          f"{1e9 * per_row_memory:.1f} ns (Dask/memory = {per_row_dask / per_row_memory:.2f})")
    print(f"fitted w[:4] on all rows {np.round(w[:4], 3)}, on the subset "
          f"{np.round(unflatten(result_m.x)['w'][:4], 3)}")


if __name__ == "__main__":
    main()
