"""autodiffgen.dask on a LocalCluster of 2 worker processes that cannot import autodiffgen.

One cluster for the module (starting one takes seconds); every result waits at most
TIMEOUT seconds, so a broken cluster fails the test instead of hanging it.
"""

import importlib
import logging
import os

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")

from dask_models import UNEVEN, branchy, data, logreg_mean, mlp_sum, params, pick

import autodiffgen
import autodiffgen.dask as add

pytestmark = pytest.mark.cluster
TIMEOUT = 60
PRELOAD = os.path.join(os.path.dirname(__file__), "no_autodiffgen_preload.py")


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(
        processes=True, n_workers=2, threads_per_worker=1, dashboard_address=None,
        preload=[PRELOAD], silence_logs=logging.ERROR)
    c = distributed.Client(cluster, timeout=TIMEOUT)
    c.wait_for_workers(2, timeout=TIMEOUT)
    yield c
    c.close()
    cluster.close()


def test_workers_cannot_import_autodiffgen(client):
    for worker in client.scheduler_info()["workers"]:
        future = client.submit(importlib.import_module, "autodiffgen", workers=[worker],
                               pure=False)
        with pytest.raises(ModuleNotFoundError, match="autodiffgen"):
            future.result(timeout=TIMEOUT)
    numpy = client.submit(importlib.import_module, "numpy", pure=False)
    assert numpy.result(timeout=TIMEOUT).__name__ == "numpy"


def _chunked(x, y, chunks=UNEVEN):
    return (da.from_array(x, chunks=(chunks, x.shape[1])), da.from_array(y, chunks=(chunks,)))


def _close(got, want, dtype):
    tol = {"rtol": 2e-5, "atol": 1e-6} if dtype == np.float32 else {"rtol": 1e-12, "atol": 1e-13}
    np.testing.assert_allclose(got, want, **tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fun, names, reduce", [
    (logreg_mean, ("w", "b"), "mean"),
    (mlp_sum, ("W1", "b1", "w2"), "sum"),
], ids=["mean", "sum"])
def test_equals_in_memory_gradient(client, dtype, fun, names, reduce):
    rng = np.random.default_rng(7)
    p, (x, y) = pick(params(dtype, rng), *names), data(dtype, rng)
    vg = add.value_and_grad(fun, reduce=reduce, timeout=TIMEOUT)
    value, grads = vg(p, *_chunked(x, y))
    want_value, want = autodiffgen.value_and_grad(fun)(p, x, y)
    _close(value, want_value, dtype)
    assert np.asarray(value).dtype == dtype
    assert grads.keys() == want.keys()
    for name in names:
        assert np.asarray(grads[name]).dtype == dtype, name
        _close(grads[name], want[name], dtype)
    assert vg.retraces == 0  # one module serves 20, 16, 13 and 1 rows
    p2 = {k: v * dtype(0.5) for k, v in p.items()}  # new parameters, same code
    _close(vg(p2, *_chunked(x, y))[0], autodiffgen.value_and_grad(fun)(p2, x, y)[0], dtype)


def test_grad_with_the_gradient_only(client):
    rng = np.random.default_rng(3)
    p, (x, y) = pick(params(np.float64, rng), "w", "b"), data(np.float64, rng, n=41)
    g = add.grad(logreg_mean, timeout=TIMEOUT)(p, *_chunked(x, y, (11, 29, 1)))
    want = autodiffgen.grad(logreg_mean)(p, x, y)
    _close(g["w"], want["w"], np.float64)
    _close(g["b"], want["b"], np.float64)


@pytest.mark.parametrize("where", ["whole chunk", "one late row"])
def test_a_chunk_on_another_path_is_traced_again_on_the_client(client, where):
    rng = np.random.default_rng(5)
    p, (x, y) = pick(params(np.float64, rng), "w", "c"), data(np.float64, rng)
    if where == "whole chunk":
        x[:, 0] = -np.abs(x[:, 0])
        x[20:49, 0] = np.abs(x[20:49, 0]) + 0.1  # chunks 2 and 3 take the other branch: one
        # trace serves both
    else:  # the second chunk's first rows take the traced path, its row 12 does not
        x[:, 0] = np.abs(x[:, 0]) + 0.1
        x[32, 0] = -1.0
    vg = add.value_and_grad(branchy, timeout=TIMEOUT)
    value, grads = vg(p, *_chunked(x, y))
    assert vg.retraces == 1
    want_value, want = autodiffgen.value_and_grad(branchy)(p, x, y)
    _close(value, want_value, np.float64)
    _close(grads["w"], want["w"], np.float64)
    _close(grads["c"], want["c"], np.float64)
    vg(p, *_chunked(x, y))
    assert vg.retraces == 1  # the workers keep both paths' code
