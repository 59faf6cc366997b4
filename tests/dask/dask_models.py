"""Losses and data shared by the Dask tests (tests/ is on sys.path)."""

import numpy as np

UNEVEN = (20, 16, 13, 1)  # unequal chunks, all but the last larger than the 7 traced rows


def logreg_mean(p, x, y):
    z = x @ p["w"] + p["b"]
    return np.mean(np.logaddexp(0.0, z) - y * z)


def mlp_sum(p, x, y):
    h = np.tanh(x @ p["W1"] + p["b1"])
    r = h @ p["w2"] - y
    return np.sum(r ** 2) + 0.5 * np.sum(np.abs(r))


def branchy(p, x, y):
    """The same numbers on either path: a chunk whose first column is all positive takes
    the other branch (its own generated code)."""
    if np.all(x[:, 0] > 0):
        a = x[:, 0]
    else:
        a = np.abs(x[:, 0])
    r = x @ p["w"] + a * p["c"] - y
    return np.mean(r ** 2)


def params(dtype, rng, d=3, k=4):
    return {"w": rng.normal(size=d).astype(dtype), "b": dtype(0.1),
            "W1": rng.normal(size=(d, k)).astype(dtype), "b1": rng.normal(size=k).astype(dtype),
            "w2": rng.normal(size=k).astype(dtype), "c": dtype(0.7)}


def pick(p, *names):
    return {n: p[n] for n in names}


def data(dtype, rng, n=50, d=3):
    x = rng.normal(size=(n, d)).astype(dtype)
    y = (rng.random(n) > 0.5).astype(dtype)
    return x, y


def hinge(p, x, y):
    """A mask's count read at run time: how many rows the selection keeps differs per
    chunk, and so does the chunk's size."""
    margin = 1.0 - (2.0 * y - 1.0) * (x @ p["w"] + p["b"])
    return np.sum(margin[margin > 0.0]) / len(x)


def with_aux(p, x, y):
    """A mean loss with aux values that are means over rows too (aux="reduce")."""
    z = x @ p["w"] + p["b"]
    return np.mean(np.logaddexp(0.0, z) - y * z), {"hits": np.mean((z > 0) == (y > 0)),
                                                    "z": np.mean(z)}


def held(block, event, timeout):
    """A block of data that waits (at most `timeout` seconds) for the distributed Event
    named `event`, having put its worker's address in the Queue `event` + "-waiting":
    chunks wait here while a test kills the worker of one of them."""
    from distributed import Event, Queue, get_worker

    Queue(event + "-waiting").put(get_worker().address)
    Event(event).wait(timeout)
    return block
