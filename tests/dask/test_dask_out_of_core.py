"""Data on disk (autodiffgen.dask.from_npy, and a Zarr store through dask.array.from_zarr)
on a LocalCluster of one worker process that cannot import autodiffgen, with a memory
limit and spilling turned off: the gradient equals the in-memory one computed in pieces,
the graph holds the file's path (not its data), and the worker's peak resident set (VmHWM)
stays under its limit. benchmarks/dask_out_of_core.py runs the same paths over data 3x the
limit."""

import logging
import os

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
cloudpickle = pytest.importorskip("cloudpickle")

import autodiffgen
import autodiffgen.dask as add

pytestmark = pytest.mark.cluster
TIMEOUT = 60
LIMIT = 400 * 2**20
PRELOAD = os.path.join(os.path.dirname(__file__), "no_autodiffgen_preload.py")
OFF = {f"distributed.worker.memory.{k}": False for k in ("spill", "target", "pause",
                                                         "terminate")}


@pytest.fixture(scope="module")
def client():
    with dask.config.set(OFF):
        cluster = distributed.LocalCluster(
            processes=True, n_workers=1, threads_per_worker=1, memory_limit=LIMIT,
            dashboard_address=":0", preload=[PRELOAD], silence_logs=logging.ERROR)
    c = distributed.Client(cluster, timeout=TIMEOUT)
    c.wait_for_workers(1, timeout=TIMEOUT)
    yield c
    c.close()
    cluster.close()


def loss(p, x, y):
    z = x @ p["w"] + p["b"]
    return np.mean(np.logaddexp(0.0, z) - y * z)


def npy(folder, x, y):
    """X and Y read from .npy files by autodiffgen.dask.from_npy, 2,000 rows a chunk."""
    np.save(folder / "x.npy", x), np.save(folder / "y.npy", y)
    return (add.from_npy(str(folder / "x.npy"), rows=2_000),
            add.from_npy(str(folder / "y.npy"), rows=2_000))


def zarr_store(folder, x, y):
    """X and Y read from Zarr stores of 2,000-row chunks by dask.array.from_zarr."""
    zarr = pytest.importorskip("zarr")
    for name, a in (("x", x), ("y", y)):
        z = zarr.open_array(str(folder / f"{name}.zarr"), mode="w", shape=a.shape,
                            chunks=(2_000,) + a.shape[1:], dtype=a.dtype)
        z[:] = a
    return tuple(da.from_zarr(str(folder / f"{n}.zarr")) for n in ("x", "y"))


@pytest.mark.parametrize("stored", [npy, zarr_store], ids=["npy", "zarr"])
def test_gradient_over_data_on_disk_streams_under_the_memory_limit(client, tmp_path, stored):
    rng = np.random.default_rng(11)
    x, y = rng.standard_normal((20_000, 4)), (rng.random(20_000) < 0.5).astype(float)
    X, Y = stored(tmp_path, x, y)
    add.worker_peaks(client, reset=True)
    assert len(cloudpickle.dumps(dict(X.dask))) < x.nbytes // 10  # paths, not data
    p = {"w": np.linspace(-1.0, 1.0, 4), "b": 0.1}
    vd = add.value_and_grad(loss, timeout=TIMEOUT, chunks="keep")  # a task per chunk read
    with pytest.warns(UserWarning, match="10 chunks of about 2,000 rows"):
        value, grads = vd(p, X, Y)
    vg, want_value, want = autodiffgen.value_and_grad(loss), 0.0, {"w": 0.0, "b": 0.0}
    for k in range(0, 20_000, 5_000):  # in memory, a piece at a time
        v, g = vg(p, x[k:k + 5_000], y[k:k + 5_000])
        want_value += v / 4
        want = {n: want[n] + g[n] / 4 for n in want}
    np.testing.assert_allclose(value, want_value, rtol=1e-12)
    for n in want:
        np.testing.assert_allclose(grads[n], want[n], rtol=1e-12, atol=1e-15)
    peaks = add.worker_peaks(client)
    assert max(peaks.values()) < LIMIT
    assert client.run(lambda dask_worker: type(dask_worker.data).__name__) == {
        w: "dict" for w in peaks}  # no spilling store
