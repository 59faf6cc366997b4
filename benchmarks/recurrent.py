"""Recurrent nets at several sizes: autodiffgen's step against the hand-written one.

    OMP_NUM_THREADS=1 python benchmarks/recurrent.py            # rnn and gru, a few sizes
    python benchmarks/recurrent.py --only gru --rounds 5         # quicker

For each workload (benchmarks/workloads.py: rnn, gru) and each size (sequence length,
batch, hidden), the generated value-and-grad and the hand-written NumPy forward+backward
are checked against each other, then timed in interleaved rounds in this one process
(run.measure, one thread), and the peak memory of one step of each is taken by
tracemalloc (run.peak_memory). Printed: the time ratio and the two peaks with theirs.
The issue's target for recurrent nets: a ratio of at most 0.85 and a peak at most the
hand-written one's, at every size.
"""

import argparse
import os
import sys

if __name__ == "__main__":  # before NumPy (and its BLAS) is first imported
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_var] = "1"

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run
from workloads import WORKLOADS

# (steps, batch, hidden): the workload's own size first, then shorter/longer, smaller/wider
SIZES = [(120, 32, 128), (30, 32, 128), (120, 8, 64), (120, 64, 256), (400, 16, 64)]


def one(w, steps, batch, hidden, rounds, sample):
    """(ratio, hand-written peak, autodiffgen peak) at one size; None if they disagree."""
    args = w.make_args(np.random.default_rng(0), steps=steps, batch=batch, hidden=hidden)
    hand, gen = run.HandWritten(), run.Autodiffgen()
    hand_step, _, reference = hand.prepare(w, args)
    gen_step, _, result = gen.prepare(w, args)
    problem = run.check(w, gen, result, hand.to_numpy(reference))
    if problem:
        print(f"   {steps:>5} {batch:>5} {hidden:>6}   disagrees: {problem}")
        return None
    medians, _ = run.measure({"hand": hand_step, "gen": gen_step}, rounds, sample)
    peaks = run.peak_memory(hand_step), run.peak_memory(gen_step)
    return medians["gen"] / medians["hand"], medians["hand"], *peaks


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", action="append", choices=("rnn", "gru"))
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--sample", type=float, default=0.1)
    opts = p.parse_args(argv)
    for w in WORKLOADS:
        if w.name not in (opts.only or ("rnn", "gru")):
            continue
        print(f"== {w.name}")
        print(f"   {'steps':>5} {'batch':>5} {'hidden':>6} {'hand ms':>9} {'ratio':>7}"
              f" {'hand peak':>11} {'gen peak':>11} {'x hand':>7}")
        for steps, batch, hidden in SIZES:
            got = one(w, steps, batch, hidden, opts.rounds, opts.sample)
            if got is None:
                continue
            ratio, hand_time, hand_peak, gen_peak = got
            print(f"   {steps:>5} {batch:>5} {hidden:>6} {hand_time * 1e3:>9.2f} {ratio:>6.2f}x"
                  f" {run.fmt_bytes(hand_peak):>11} {run.fmt_bytes(gen_peak):>11}"
                  f" {gen_peak / hand_peak:>6.2f}x", flush=True)


if __name__ == "__main__":
    main()
