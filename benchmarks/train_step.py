"""A compiled training step against the gradient call followed by a NumPy update.

    python benchmarks/train_step.py                  # MLP 784-256-256-10, batch 128, Adam
    python benchmarks/train_step.py --hidden 512 --batch 256 --rounds 20

Both train the same MLP (ReLU, softmax cross-entropy) with Adam (torch's formulas):

- compiled: `compile_step(loss, Adam(...))`, one generated function for the forward, the
  backward and the update, whose results are copied into the parameter and state arrays;
- grad + update: `value_and_grad(loss)` (generated code too), then a hand-written NumPy
  Adam update in place (`m *= b1; m += (1 - b1) * g`, ...), the usual loop.

The step time is the median over interleaved rounds of `steps` steps each; peak memory is
what tracemalloc sees one step allocate (NumPy reports its buffers to it). Both runs start
from the same parameters and the parameters are checked to agree after the timing. One
thread (BLAS too), so the numbers compare the code, not the thread pool.
"""

import os

if __name__ == "__main__":  # before NumPy (and its BLAS) is first imported
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                 "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS"):
        os.environ[_var] = "1"

import argparse
import gc
import itertools
import math
import statistics
import time
import tracemalloc

import numpy as np

from autodiffgen import nn, value_and_grad
from autodiffgen.optim import Adam, compile_step

LR, B1, B2, EPS = 1e-3, 0.9, 0.999, 1e-8


def loss(params, x, y):
    h = nn.relu(x @ params["W1"] + params["b1"])
    h = nn.relu(h @ params["W2"] + params["b2"])
    return np.mean(nn.softmax_cross_entropy(h @ params["W3"] + params["b3"], y))


def init(rng, sizes):
    params = {}
    for i, (n_in, n_out) in enumerate(itertools.pairwise(sizes), start=1):
        params[f"W{i}"] = rng.normal(0.0, math.sqrt(2.0 / n_in), (n_in, n_out))
        params[f"b{i}"] = np.zeros(n_out)
    return params


class ByHand:
    """value_and_grad, then Adam written out in NumPy, in place."""

    def __init__(self, params):
        self.vg = value_and_grad(loss)
        self.m = {k: np.zeros_like(v) for k, v in params.items()}
        self.v = {k: np.zeros_like(v) for k, v in params.items()}
        self.t = 0

    def __call__(self, params, x, y):
        value, grads = self.vg(params, x, y)
        self.t += 1
        step_size = LR / (1 - B1 ** self.t)
        root2 = math.sqrt(1 - B2 ** self.t)
        for k, p in params.items():
            g, m, v = grads[k], self.m[k], self.v[k]
            m *= B1
            m += (1 - B1) * g
            v *= B2
            v += (1 - B2) * g * g
            p -= step_size * m / (np.sqrt(v) / root2 + EPS)
        return value


class Compiled:
    def __init__(self, params):
        self.step = compile_step(loss, Adam(lr=LR, betas=(B1, B2), eps=EPS))
        self.state = self.step.init(params)

    def __call__(self, params, x, y):
        return self.step(params, self.state, x, y)


def peak(run, params, x, y):
    gc.collect()
    tracemalloc.start()
    run(params, x, y)
    top = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return top


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=10)
    options = parser.parse_args()
    rng = np.random.default_rng(0)
    sizes = (784, options.hidden, options.hidden, 10)
    x = rng.normal(size=(options.batch, sizes[0]))
    y = rng.integers(0, 10, options.batch)
    runs = {}
    for name, cls in (("grad + update", ByHand), ("compiled step", Compiled)):
        params = init(np.random.default_rng(1), sizes)
        runs[name] = (cls(params), params)
        runs[name][0](params, x, y)  # trace and compile outside the timing
    times = {name: [] for name in runs}
    for _ in range(options.rounds):
        for name, (run, params) in runs.items():
            start = time.perf_counter()
            for _ in range(options.steps):
                run(params, x, y)
            times[name].append((time.perf_counter() - start) / options.steps)
    (_, a), (_, b) = runs.values()
    for k in a:
        np.testing.assert_allclose(a[k], b[k], rtol=1e-6, atol=1e-9)
    peaks = {name: peak(run, params, x, y) for name, (run, params) in runs.items()}
    print(f"MLP {'-'.join(map(str, sizes))}, batch {options.batch}, Adam, float64, one thread")
    print(f"{'':16}{'step (ms)':>12}{'peak (MB)':>12}")
    for name in runs:
        print(f"{name:16}{1e3 * statistics.median(times[name]):12.3f}"
              f"{peaks[name] / 2**20:12.2f}")
    base, ours = (statistics.median(times[n]) for n in runs)
    print(f"compiled / (grad + update): time {ours / base:.2f}, "
          f"peak memory {peaks['compiled step'] / peaks['grad + update']:.2f}")


if __name__ == "__main__":
    main()
