"""Loops kept as loops (issue 27): the generated code with the user's loop kept as a loop
against the same code written out step by step, and both against the hand-written step.

    OMP_NUM_THREADS=1 python benchmarks/loops.py                 # rnn and gru, T = 10..1000
    python benchmarks/loops.py --only rnn --steps 10 200 --rounds 5

For each workload (benchmarks/workloads.py) and sequence length T, in this one process:
lines of the generated module, the first call (trace + compile + run: CPU seconds and the
peak of Python's allocations, tracemalloc), whether the steps were kept as a loop, whether
a call at T - 3 traces again, and the steady-state time of a call as a ratio to the hand-written NumPy forward+backward
(run.measure: interleaved rounds, one thread). "loop" rows have the user's loops kept
(AUTODIFFGEN_LOOPS=all), "written" rows the default (written out step by step). Results are checked against the hand-written step first.
"""

import argparse
import importlib
import os
import sys
import time
import tracemalloc

if __name__ == "__main__":  # before NumPy (and its BLAS) is first imported
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_var] = "1"

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run
from workloads import WORKLOADS

STEPS = (10, 50, 200, 1000)


def first_call(w, args, rolled, steps):
    """(lines, CPU seconds, peak MiB, kept as a loop, the step function) of a cold call."""
    import autodiffgen as ad
    roll = importlib.import_module("autodiffgen.loops.roll")
    roll.USER_LOOPS = rolled
    try:
        fn = ad.value_and_grad(w.make_loss(np), argnums=w.argnums)
        tracemalloc.start()
        start = time.process_time()
        result = fn(*args)
        seconds = time.process_time() - start
        peak = tracemalloc.get_traced_memory()[1] / 2 ** 20
        tracemalloc.stop()
        source = fn.source(*args)
        shorter = w.make_args(np.random.default_rng(1), steps=max(2, steps - 3))
        before = fn.cache_info().misses
        fn(*shorter)
        again = fn.cache_info().misses > before  # another length traced again
    finally:
        roll.USER_LOOPS = False
    return (len(source.splitlines()), seconds, peak, "for t in range(" in source, fn, result,
            again)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", action="append", choices=("rnn", "gru"))
    p.add_argument("--steps", type=int, nargs="*", default=list(STEPS))
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--sample", type=float, default=0.05)
    opts = p.parse_args(argv)
    for w in WORKLOADS:
        if w.name not in (opts.only or ("rnn", "gru")):
            continue
        print(f"== {w.name}")
        print(f"   {'T':>5} {'code':>8} {'lines':>7} {'first s':>8} {'peak MiB':>9} "
              f"{'steady x hand':>14} {'T-3 traces':>11}")
        for steps in opts.steps:
            args = w.make_args(np.random.default_rng(0), steps=steps)
            hand = run.HandWritten()
            hand_step, _, reference = hand.prepare(w, args)
            steps_fns = {"hand": hand_step}
            rows = []
            for label, rolled in (("loop", True), ("written", False)):
                lines, seconds, peak, kept, fn, result, again = first_call(w, args, rolled, steps)
                problem = run.check(w, run.Autodiffgen(), result, hand.to_numpy(reference))
                if problem:
                    print(f"   {steps:>5} {label:>8} disagrees with the hand-written step: "
                          f"{problem}")
                    continue
                steps_fns[label] = (lambda f=fn, a=args: f(*a))
                rows.append((label, lines, seconds, peak, kept, again))
            medians, _ = run.measure(steps_fns, opts.rounds, opts.sample)
            for label, lines, seconds, peak, kept, again in rows:
                ratio = medians[label] / medians["hand"]
                print(f"   {steps:>5} {label + ('' if kept or label != 'loop' else '?'):>8} "
                      f"{lines:>7} {seconds:>8.2f} {peak:>9.1f} {ratio:>14.2f} "
                      f"{'yes' if again else 'no':>11}")


if __name__ == "__main__":
    main()
