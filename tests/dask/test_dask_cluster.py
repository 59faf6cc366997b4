"""autodiffgen.dask on a LocalCluster of 2 worker processes that cannot import autodiffgen.

One cluster for the module (starting one takes seconds); every result waits at most
TIMEOUT seconds, so a broken cluster fails the test instead of hanging it. The fault tests
kill a worker process while the chunks' data waits on a distributed Event, then let it go.
"""

import importlib
import logging
import os
import re
import signal
import sys
import textwrap
import threading
import warnings

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")

from dask_models import UNEVEN, branchy, data, held, logreg_mean, mlp_sum, params, pick

import autodiffgen
import autodiffgen.dask as add
from autodiffgen.dask import chunking

pytestmark = pytest.mark.cluster
TIMEOUT = 60
PRELOAD = os.path.join(os.path.dirname(__file__), "no_autodiffgen_preload.py")


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(
        processes=True, n_workers=2, threads_per_worker=1, dashboard_address=":0",
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


@pytest.mark.parametrize("block_bytes", [None, 5 * 4 * 8], ids=["whole", "in blocks"])
@pytest.mark.parametrize("where", ["whole chunk", "one late row"])
def test_a_chunk_on_another_path_is_traced_again_on_the_client(client, where, block_bytes,
                                                                monkeypatch):
    if block_bytes:  # blocks of 5 rows (3 features and y): a block takes the other path
        monkeypatch.setattr(chunking, "BLOCK_BYTES", block_bytes)
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
    assert vg.plan.block == (5 if block_bytes else chunking.block_rows(32))


def test_keep_gives_no_advice_when_each_worker_has_one_chunk(client):
    rng = np.random.default_rng(4)
    p, (x, y) = pick(params(np.float64, rng), "w", "b"), data(np.float64, rng)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        add.value_and_grad(logreg_mean, timeout=TIMEOUT, chunks="keep")(
            p, *_chunked(x, y, (25, 25)))


PRIVATE = textwrap.dedent("""
    import dataclasses

    import numpy as np


    @dataclasses.dataclass
    class Params:
        w: np.ndarray
        b: float


    def hinge(p, x, y):
        margin = 1.0 - (2.0 * y - 1.0) * (x @ p.w + p.b)
        active = margin > 0.0
        return np.sum(margin[active]) / len(x), {"active": np.mean(active)}
""")


def test_the_whole_api_on_workers_that_cannot_import_it(client, tmp_path, monkeypatch):
    """A dataclass of a module only the client can import, keywords, has_aux, and a mask
    whose count the workers' code reads at run time: one trace for nine chunk sizes."""
    (tmp_path / "private_model.py").write_text(PRIVATE)
    monkeypatch.syspath_prepend(str(tmp_path))  # the client's path, not the workers'
    monkeypatch.delitem(sys.modules, "private_model", raising=False)
    model = importlib.import_module("private_model")
    missing = client.submit(importlib.import_module, "private_model", pure=False)
    with pytest.raises(ModuleNotFoundError):
        missing.result(timeout=TIMEOUT)
    rng = np.random.default_rng(13)
    sizes = (9, 10, 11, 12, 13, 14, 15, 16, 30)
    x, y = data(np.float64, rng, n=sum(sizes))
    p = model.Params(rng.normal(size=3), 0.1)
    vg = add.value_and_grad(model.hinge, has_aux=True, timeout=TIMEOUT)
    (value, aux), g = vg(p, y=_chunked(x, y, sizes)[1], x=_chunked(x, y, sizes)[0])
    (want_value, want_aux), want = autodiffgen.value_and_grad(model.hinge, has_aux=True)(
        p, x, y)
    assert type(g) is model.Params and (vg.traces, vg.retraces) == (1, 0)
    for got, expected in ((value, want_value), (aux["active"], want_aux["active"]),
                          (g.w, want.w), (g.b, want.b)):
        _close(got, expected, np.float64)
    sys.modules.pop("private_model")


def _held(a, event):
    """`a` whose every block waits for the distributed Event `event` on its worker."""
    return a.map_blocks(held, event, TIMEOUT, dtype=a.dtype)


def _killing_a_worker(client, call, event):
    """What call() returns or raises, run in a thread while its chunks' data waits on
    `event`: the worker process holding one of them is killed, then they are let go."""
    out = {}

    def run():
        try:
            out["result"] = call()
        except Exception as e:  # noqa: BLE001  the test looks at it
            out["error"] = e
    waiting = distributed.Queue(event + "-waiting", client=client)
    waiting.get(batch=True)  # the addresses of the calls before
    distributed.Event(event, client=client).clear()
    thread = threading.Thread(target=run)
    thread.start()
    victim = waiting.get(timeout=TIMEOUT)  # a worker whose chunk waits
    os.kill(client.run(os.getpid, workers=[victim])[victim], signal.SIGKILL)
    distributed.Event(event, client=client).set()
    thread.join(TIMEOUT)
    assert not thread.is_alive()
    client.wait_for_workers(2, timeout=TIMEOUT)  # its nanny starts it again
    return out


def _warm(client, event):
    """value_and_grad of logreg_mean traced (its sample computed) with the data let go,
    and its chunked data, held by `event` from then on."""
    rng = np.random.default_rng(17)
    p, (x, y) = pick(params(np.float64, rng), "w", "b"), data(np.float64, rng)
    distributed.Event(event, client=client).set()
    X, Y = _chunked(x, y)
    X = _held(X, event)
    vg = add.value_and_grad(logreg_mean, timeout=TIMEOUT)
    vg(p, X, Y)
    return vg, p, x, y, X, Y


def test_a_worker_killed_mid_gradient_gives_the_same_gradient(client):
    vg, p, x, y, X, Y = _warm(client, "autodiffgen-test-kill")
    out = _killing_a_worker(client, lambda: vg(p, X, Y), "autodiffgen-test-kill")
    value, g = out["result"]  # Dask ran the lost tasks again on the workers left
    want_value, want = autodiffgen.value_and_grad(logreg_mean)(p, x, y)
    _close(value, want_value, np.float64)
    _close(g["w"], want["w"], np.float64)
    _close(g["b"], want["b"], np.float64)


def test_a_chunk_given_up_with_its_workers_is_named_not_dropped(client):
    vg, p, _, _, X, Y = _warm(client, "autodiffgen-test-lost")
    scheduler = client.cluster.scheduler
    allowed, scheduler.allowed_failures = scheduler.allowed_failures, 0  # no second try
    try:
        out = _killing_a_worker(client, lambda: vg(p, X, Y), "autodiffgen-test-lost")
    finally:
        scheduler.allowed_failures = allowed
    error = out["error"]
    assert isinstance(error, add.PartialSumError), repr(error)
    assert type(error.__cause__).__name__ == "KilledWorker"
    # the task given up is the first the scheduler saw on the dead worker: a chunk's data,
    # or what every chunk reads, which waited there behind it
    assert re.match(r"autodiffgen.dask: (chunks? [\d and]+ \(rows \d+ to \d+.*\)|what every "
                    r"chunk reads \(.*\)) could not be computed: the worker processes running "
                    r"task .* died 1 time \(distributed.KilledWorker\)", str(error)), error


def test_the_cluster_is_read_again_only_after_a_while(client, monkeypatch):
    rng = np.random.default_rng(6)
    p, (x, y) = pick(params(np.float64, rng), "w", "b"), data(np.float64, rng)
    X, Y = _chunked(x, y)
    vg = add.value_and_grad(logreg_mean, timeout=TIMEOUT)  # chunks="auto": plans each call
    vg(p, X, Y)
    read = vg._shape[1]
    vg(p, X, Y)
    assert vg._shape[1] == read  # within CLUSTER_SECONDS: the same reading
    monkeypatch.setattr(add, "CLUSTER_SECONDS", 0.0)
    value, _ = vg(p, X, Y)
    assert vg._shape[1] > read
    _close(value, autodiffgen.value_and_grad(logreg_mean)(p, x, y)[0], np.float64)
