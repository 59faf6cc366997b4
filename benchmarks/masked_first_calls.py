"""First calls of code with masks (issue 29, item 0): traces and CPU seconds of the first
`value_and_grad` call of k stacked stable sigmoids (the course spelling with boolean masks,
layer_models.sigmoid), k = 1..20, and of the LSTM written with it at several lengths.

    OMP_NUM_THREADS=1 python benchmarks/masked_first_calls.py

The issue's starting point: 4k + 1 traces, 224 s at k = 6; the LSTM at T = 4 did not
finish in 15 minutes. A count that grew faster than k would show here (and fail
tests/generalize/test_sizes_many_masks.py and test_unneeded_counts.py).
"""

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import layer_models as lm

import autodiffgen as ad
from autodiffgen.trace import tracer


def stacked(k):
    def f(W, x):
        h = x
        for _ in range(k):
            h = lm.sigmoid(h @ W)
        return np.sum(h)
    return f


def first_call(fun, *args, **kwargs):
    """(traces, CPU seconds) of the first call of value_and_grad(fun)(*args)."""
    g = ad.value_and_grad(fun, **kwargs)
    before, start = tracer.runs(), time.process_time()
    g(*args)
    return tracer.runs() - before, time.process_time() - start


def main():
    rng = np.random.default_rng(0)
    W, x = rng.standard_normal((16, 16)), rng.standard_normal((32, 16))
    print("k stacked sigmoids, W 16x16, x 32x16\n\n| k | traces | CPU s |\n|---|---:|---:|")
    for k in range(1, 21):
        traces, seconds = first_call(stacked(k), W, x)
        print(f"| {k} | {traces} | {seconds:.2f} |")
    batch, hidden, features = 16, 32, 32
    print(f"\nlstm_loss, batch {batch}, H = D = {hidden}\n\n| T | traces | CPU s |\n|---|---:|---:|")
    for steps in (1, 2, 4, 16, 30):
        args = (rng.standard_normal((batch, steps, features)),
                rng.standard_normal((batch, hidden)),
                rng.standard_normal((features, 4 * hidden)) * 0.1,
                rng.standard_normal((hidden, 4 * hidden)) * 0.1,
                rng.standard_normal(4 * hidden), rng.standard_normal((batch, steps, hidden)))
        traces, seconds = first_call(lm.lstm_loss, *args, argnums=(0, 1, 2, 3, 4))
        print(f"| {steps} | {traces} | {seconds:.2f} |")


if __name__ == "__main__":
    main()
