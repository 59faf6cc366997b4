"""Memory for compute: a 500-step recurrent net's gradient with and without checkpoint.

    python benchmarks/checkpoint.py                 # 500 steps, hidden 128, batch 32, float64
    python benchmarks/checkpoint.py --steps 200 --rounds 3

The net is a tanh RNN with a two-layer transition (u = tanh(h W1 + x_t U), then
h = tanh(u W2)), loss 0.5 |h_T - target|^2 / batch. Its backward reads u and h of every
step, so the plain gradient keeps 2 T states; checkpointing each step keeps T (the steps'
outputs) and recomputes u; checkpointing every k ~ sqrt(T) steps keeps T / k segment
boundaries and, while the backward runs through one segment, that segment's k states.

Measured in one run, on one thread: the hand-written NumPy forward+backward (which keeps
u and h of every step), and autodiffgen's generated gradient with no checkpoint, a
checkpoint per step, and one per segment. Peak memory is what tracemalloc sees one call
allocate (NumPy reports its buffers to it), results included; the step time is the median
over interleaved rounds. Every gradient is checked against the hand-written one first.
"""

import os

if __name__ == "__main__":  # before NumPy (and its BLAS) is first imported
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                 "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS"):
        os.environ[_var] = "1"

import argparse
import gc
import math
import statistics
import time
import tracemalloc

import numpy as np

import autodiffgen as ad
from autodiffgen import checkpoint


def step(h, x, W1, W2, U):
    u = np.tanh(h @ W1 + x @ U)
    return np.tanh(u @ W2)


def loss_of(kind, k):
    """The loss with no checkpoint ("none"), one per step ("step") or per k steps."""
    ck_step = checkpoint(step)

    def loss(W1, W2, U, xs, h0, target):
        h = h0
        if kind == "segment":
            @checkpoint
            def segment(h, xs):
                for t in range(xs.shape[0]):
                    h = step(h, xs[t], W1, W2, U)
                return h
            for s in range(0, xs.shape[0], k):
                h = segment(h, xs[s:s + k])
        else:
            one = ck_step if kind == "step" else step
            for t in range(xs.shape[0]):
                h = one(h, xs[t], W1, W2, U)
        d = h - target
        return 0.5 * np.sum(d * d) / xs.shape[1]
    return loss


def by_hand(W1, W2, U, xs, h0, target):
    """Forward keeping u and h of every step, then the backward through them."""
    T, B, _ = xs.shape
    H = W1.shape[0]
    hs = np.empty((T + 1, B, H))
    us = np.empty((T, B, H))
    hs[0] = h0
    for t in range(T):
        a = hs[t] @ W1
        a += xs[t] @ U
        np.tanh(a, out=us[t])
        np.tanh(us[t] @ W2, out=hs[t + 1])
    d = hs[T] - target
    value = 0.5 * np.sum(d * d) / B
    gW1, gW2, gU = np.zeros_like(W1), np.zeros_like(W2), np.zeros_like(U)
    dh = d / B
    for t in range(T - 1, -1, -1):
        h, u = hs[t + 1], us[t]
        dz = dh * (1.0 - h * h)
        gW2 += u.T @ dz
        da = dz @ W2.T
        da *= 1.0 - u * u
        gW1 += hs[t].T @ da
        gU += xs[t].T @ da
        dh = da @ W1.T
    return value, (gW1, gW2, gU)


def arguments(steps, batch, hidden, inputs, seed=0):
    rng = np.random.default_rng(seed)
    W1 = rng.normal(size=(hidden, hidden)) / math.sqrt(hidden)
    W2 = rng.normal(size=(hidden, hidden)) / math.sqrt(hidden)
    U = rng.normal(size=(inputs, hidden)) / math.sqrt(inputs)
    xs = rng.normal(size=(steps, batch, inputs))
    h0 = np.zeros((batch, hidden))
    target = rng.uniform(-0.5, 0.5, size=(batch, hidden))
    return W1, W2, U, xs, h0, target


def peak_memory(fun, args):
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        start = tracemalloc.get_traced_memory()[0]
        result = fun(*args)
        peak = tracemalloc.get_traced_memory()[1] - start
        del result
    finally:
        tracemalloc.stop()
    return peak


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--inputs", type=int, default=32)
    parser.add_argument("--segment", type=int, default=0, help="k (default: round(sqrt(steps)))")
    parser.add_argument("--rounds", type=int, default=5)
    opts = parser.parse_args()
    k = opts.segment or round(math.sqrt(opts.steps))
    args = arguments(opts.steps, opts.batch, opts.hidden, opts.inputs)
    want_value, want = by_hand(*args)
    contenders = {"hand-written NumPy": (by_hand, 0.0)}
    for label, kind in (("autodiffgen, no checkpoint", "none"),
                        ("autodiffgen, checkpoint per step", "step"),
                        (f"autodiffgen, checkpoint per {k} steps", "segment")):
        fun = ad.value_and_grad(loss_of(kind, k), argnums=(0, 1, 2))
        t0 = time.perf_counter()
        value, grads = fun(*args)  # trace, emit, compile, run
        first = time.perf_counter() - t0
        np.testing.assert_allclose(value, want_value, rtol=1e-10)
        for g, w in zip(grads, want):
            np.testing.assert_allclose(g, w, rtol=1e-8, atol=1e-12)
        contenders[label] = (fun, first)
    peaks = {label: peak_memory(fun, args) for label, (fun, _) in contenders.items()}
    times = {label: [] for label in contenders}
    for r in range(opts.rounds):  # interleaved, in a rotating order
        labels = list(contenders)
        for label in labels[r % len(labels):] + labels[:r % len(labels)]:
            t0 = time.perf_counter()
            contenders[label][0](*args)
            times[label].append(time.perf_counter() - t0)
    medians = {label: statistics.median(t) for label, t in times.items()}
    base = "hand-written NumPy"
    state = opts.batch * opts.hidden * 8
    print(f"tanh RNN, two-layer transition: {opts.steps} steps, hidden {opts.hidden}, batch "
          f"{opts.batch}, input {opts.inputs}, float64; one state = {state / 2**10:.0f} KiB, "
          f"{opts.rounds} rounds, one thread")
    print(f"| {'gradient':<38} | {'peak MiB':>8} | {'x hand':>6} | {'step ms':>8} | "
          f"{'x hand':>6} | {'first call s':>12} |")
    print(f"|{'-' * 40}|{'-' * 10}|{'-' * 8}|{'-' * 10}|{'-' * 8}|{'-' * 14}|")
    for label, (_, first) in contenders.items():
        print(f"| {label:<38} | {peaks[label] / 2**20:8.2f} | "
              f"{peaks[label] / peaks[base]:6.2f} | {medians[label] * 1e3:8.1f} | "
              f"{medians[label] / medians[base]:6.2f} | "
              f"{first:12.2f} |" if first else
              f"| {label:<38} | {peaks[label] / 2**20:8.2f} | {1:6.2f} | "
              f"{medians[label] * 1e3:8.1f} | {1:6.2f} | {'':>12} |")


if __name__ == "__main__":
    main()
