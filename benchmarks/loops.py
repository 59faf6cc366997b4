"""Loops kept as loops (issue 27): the generated code with the user's loop kept as a loop
against the same code written out step by step, and both against the hand-written step.

    OMP_NUM_THREADS=1 python benchmarks/loops.py                 # rnn and gru, T = 10..1000
    python benchmarks/loops.py --only rnn --steps 10 200 --rounds 5
    python benchmarks/loops.py --only while --scales 0.3 0.6 0.9   # a `while` loop on data
    python benchmarks/loops.py --only kinds --steps 10 200          # five kinds of loop

For each workload (benchmarks/workloads.py) and sequence length T, in this one process:
lines of the generated module, the first call (trace + compile + run: CPU seconds, and the
peak of Python's allocations in a second cold call under tracemalloc), whether the steps were kept as a loop, whether
a call at T - 3 traces again, and the steady-state time of a call as a ratio to the hand-written NumPy forward+backward
(run.measure: interleaved rounds, one thread). "loop" rows have the user's loops kept
(the default), "written" rows the same steps written out (AUTODIFFGEN_LOOPS=updates). Results are checked against the hand-written step first.
"""

import argparse
import importlib
import itertools
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
    """(lines, CPU seconds, peak MiB, kept as a loop, the step function) of a cold call:
    its time without tracemalloc (which slows tracing several times), its peak in a second
    cold call under it."""
    import autodiffgen as ad
    roll = importlib.import_module("autodiffgen.loops.roll")
    setting, roll.USER_LOOPS = roll.USER_LOOPS, rolled
    try:
        fn = ad.value_and_grad(w.make_loss(np), argnums=w.argnums)
        start = time.process_time()
        result = fn(*args)
        seconds = time.process_time() - start
        fn.cache_clear()
        tracemalloc.start()
        fn(*args)
        peak = tracemalloc.get_traced_memory()[1] / 2 ** 20
        tracemalloc.stop()
        source = fn.source(*args)
        shorter = w.make_args(np.random.default_rng(1), steps=max(2, steps - 3))
        before = fn.cache_info().misses
        fn(*shorter)
        again = fn.cache_info().misses > before  # another length traced again
    finally:
        roll.USER_LOOPS = setting
    return (len(source.splitlines()), seconds, peak, "for t in range(" in source, fn, result,
            again)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", action="append", choices=("rnn", "gru", "while", "kinds"))
    p.add_argument("--scales", type=float, nargs="*", default=[0.3, 0.6, 0.8, 0.9])
    p.add_argument("--steps", type=int, nargs="*", default=list(STEPS))
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--sample", type=float, default=0.05)
    opts = p.parse_args(argv)
    if "kinds" in (opts.only or ("kinds",)):
        kinds(opts)
    if "while" in (opts.only or ("while",)):
        while_loop(opts)
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


# ---- the kinds of loop: one tanh RNN written five ways, against one hand-written step ------
def rnn_range_of_shape(Wx, Wh, b, xs, h0, target):
    h = h0
    for t in range(xs.shape[0]):
        h = np.tanh(xs[t] @ Wx + b + h @ Wh)
    d = h - target
    return 0.5 * (d * d).sum() / xs.shape[1]


def rnn_over_array(Wx, Wh, b, xs, h0, target):
    h = h0
    for x in xs:
        h = np.tanh(x @ Wx + b + h @ Wh)
    d = h - target
    return 0.5 * (d * d).sum() / xs.shape[1]


def rnn_over_list(Wx, Wh, b, xs, h0, target):  # xs: a list of (B, D) arrays
    h = h0
    for x in xs:
        h = np.tanh(x @ Wx + b + h @ Wh)
    d = h - target
    return 0.5 * (d * d).sum() / h.shape[0]


def rnn_batch_first(Wx, Wh, b, xs, h0, target):  # xs: (B, T, D)
    h = h0
    for t in range(xs.shape[1]):
        h = np.tanh(xs[:, t] @ Wx + b + h @ Wh)
    d = h - target
    return 0.5 * (d * d).sum() / xs.shape[0]


def rnn_int_steps(Wx, Wh, b, xs, h0, target, steps):
    h = h0
    for t in range(steps):
        h = np.tanh(xs[t] @ Wx + b + h @ Wh)
    d = h - target
    return 0.5 * (d * d).sum() / xs.shape[1]


KINDS = {  # name -> (function, arguments from the time-major ones, back to them for the hand)
    "range(xs.shape[0])": (rnn_range_of_shape, lambda a: a),
    "for x in xs": (rnn_over_array, lambda a: a),
    "for x in list": (rnn_over_list, lambda a: (*a[:3], list(a[3]), *a[4:])),
    "range(xs.shape[1])": (rnn_batch_first, lambda a: (*a[:3], a[3].transpose(1, 0, 2).copy(),
                                                       *a[4:])),
    "range(k), k an int": (rnn_int_steps, lambda a: (*a, a[3].shape[0])),
}


def kinds(opts):
    """Lines, first call (CPU s; peak MiB in a second cold call under tracemalloc), steady
    ratio to the hand-written step and whether T - 3 traces again, per kind of loop."""
    from workloads import rnn_args, rnn_by_hand

    import autodiffgen as ad
    print("== tanh RNN written five ways (batch 16, input 32, hidden 64, float32)")
    print(f"   {'loop':>20} {'T':>5} {'lines':>6} {'first s':>8} {'peak MiB':>9} "
          f"{'steady x hand':>14} {'T-3 traces':>11}")
    for name, (fun, made) in KINDS.items():
        for steps in opts.steps:
            base = rnn_args(np.random.default_rng(0), steps=steps)
            args = made(base)
            fn = ad.value_and_grad(fun, argnums=(0, 1, 2))
            start = time.process_time()
            value, _ = fn(*args)
            seconds = time.process_time() - start
            want, _ = rnn_by_hand(*base)
            assert np.isclose(value, want, rtol=1e-4), (name, value, want)
            fn.cache_clear()
            tracemalloc.start()
            fn(*args)
            peak = tracemalloc.get_traced_memory()[1] / 2 ** 20
            tracemalloc.stop()
            lines = len(fn.source(*args).splitlines())
            medians, _ = run.measure({"hand": lambda a=base: rnn_by_hand(*a),
                                      "loop": lambda a=args, f=fn: f(*a)}, opts.rounds,
                                     opts.sample)
            before = fn.cache_info().misses
            fn(*made(rnn_args(np.random.default_rng(1), steps=max(2, steps - 3))))
            again = fn.cache_info().misses > before
            print(f"   {name:>20} {steps:>5} {lines:>6} {seconds:>8.2f} {peak:>9.1f} "
                  f"{medians['loop'] / medians['hand']:>14.2f} {'yes' if again else 'no':>11}")


# ---- a `while` loop on data: a fixed point, its number of steps set by the data ----------
def fixed_point(W, b, x0):
    """x = tanh(x W + b) until no element moves by 1e-9: the loop runs as long as it takes."""
    x = x0
    while True:
        new = np.tanh(x @ W + b)
        moved = np.max(np.abs(new - x))
        x = new
        if moved < 1e-9:
            break
    return np.sum(x * x)


def fixed_point_by_hand(W, b, x0):
    """The same forward, each step's state kept, and its backward written by hand."""
    x, states = x0, [x0]
    while True:
        new = np.tanh(x @ W + b)
        moved = np.max(np.abs(new - x))
        x = new
        states.append(x)
        if moved < 1e-9:
            break
    loss = np.sum(x * x)
    g = 2 * x
    g_W, g_b = np.zeros_like(W), np.zeros_like(b)
    for k in range(len(states) - 1, 0, -1):
        h = states[k]
        g_z = g * (1 - h * h)
        g_W += states[k - 1].T @ g_z
        g_b += g_z.sum(axis=0)
        g = g_z @ W.T
    return loss, (g_W, g_b)


def fixed_point_args(scale, batch=64, hidden=64):
    """Arguments whose loop runs longer as `scale` grows (W's norm nearer 1)."""
    rng = np.random.default_rng(0)
    W = rng.normal(size=(hidden, hidden))
    W *= scale / np.linalg.norm(W, 2)
    return W, rng.normal(size=hidden) * 0.1, rng.normal(size=(batch, hidden))


def while_loop(opts):
    """Lines, first call, steady ratio and traces of the fixed point at several trip counts,
    one value_and_grad serving all of them."""
    import autodiffgen as ad
    print("== fixed point (a `while` loop on data), batch 64, hidden 64")
    print(f"   {'scale':>5} {'steps':>6} {'code':>8} {'lines':>6} {'first s':>8} "
          f"{'steady x hand':>14} {'traces so far':>14}")
    fn = ad.value_and_grad(fixed_point, argnums=(0, 1))
    for scale in opts.scales:
        args = fixed_point_args(scale)
        start = time.process_time()
        value, grads = fn(*args)
        seconds = time.process_time() - start
        want, want_grads = fixed_point_by_hand(*args)
        assert np.isclose(value, want, rtol=1e-10) and all(
            np.allclose(a, b, rtol=1e-8, atol=1e-12) for a, b in zip(grads, want_grads))
        source = fn.source(*args)
        kept = "while True:" in source
        medians, _ = run.measure({"hand": lambda a=args: fixed_point_by_hand(*a),
                                  "loop": lambda a=args: fn(*a)}, opts.rounds, opts.sample)
        steps = _steps(args)
        print(f"   {scale:>5} {steps:>6} {'loop' if kept else 'written':>8} "
              f"{len(source.splitlines()):>6} {seconds:>8.2f} "
              f"{medians['loop'] / medians['hand']:>14.2f} {fn.cache_info().misses:>14}")


def _steps(args):
    W, b, x = args
    for k in itertools.count(1):
        new = np.tanh(x @ W + b)
        if np.max(np.abs(new - x)) < 1e-9:
            return k
        x = new


if __name__ == "__main__":
    main()
