"""First-call time against graph size and shape, stage by stage.

    python benchmarks/first_call.py [--quick] [--shapes chain fanout ...] [--sizes 1000 ...]
                                    [--workloads] [--markdown]

A first call traces the function, derives its backward pass, runs the passes,
generalizes over the batch size, emits the source, compiles it and runs it once. This
times each stage (the time inside it, less the stages it calls) on graphs of one shape
at growing size, on tiny arrays, so the time is all autodiffgen's own work:

    chain     x = sin(x) + c / tanh(x) * c, alternating: one long path
    fanout    y = y + x * c, repeated: one value read by every step (the issue's fan-out)
    wide      sin(x[i]) * x[i] for every i, stacked: many short independent paths
    mlp       h = tanh(h @ W + b) for every layer's (W, b): a deep net
    rnn       h = tanh(xs[t] @ U + h @ W): a long recurrent net (accumulate's case)

The per-op column is the first call over the forward ops; "growth" is that per-op time
over the smallest size's, so 1.0x all the way down means linear growth. --quick skips
the 100,000-op sizes. --workloads adds the first call of each workload of
benchmarks/workloads.py at its full size (and of the 120-step GRU, hidden 128, batch 32),
the median of three fresh functions.
"""

import argparse
import os
import sys
import time
from collections import defaultdict

if __name__ == "__main__":  # one thread, before NumPy (and its BLAS) is imported
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")

import numpy as np

from autodiffgen import api, pipeline, value_and_grad
from autodiffgen.trace import tracer

STAGES = ("trace", "backward", "passes", "generalize", "emission", "compile", "run")


class Stages:
    """Time spent in each stage, exclusive: a stage's time does not include the stages it
    calls (generalize retraces: those traces count as trace, their backward as backward)."""

    def __init__(self):
        self.times = defaultdict(float)
        self._inner = []

    def wrap(self, owner, attr, stage):
        fn = getattr(owner, attr)

        def timed(*args, **kwargs):
            start = time.perf_counter()
            self._inner.append(0.0)
            try:
                return fn(*args, **kwargs)
            finally:
                total = time.perf_counter() - start
                self.times[stage] += total - self._inner.pop()
                if self._inner:
                    self._inner[-1] += total

        setattr(owner, attr, timed)

    def install(self):
        self.wrap(tracer, "trace", "trace")                  # pipeline calls tracer.trace
        self.wrap(pipeline, "gradient_graph", "backward")    # trace + backward + naming
        self.wrap(pipeline, "optimize", "passes")
        self.wrap(pipeline, "program", "generalize")         # the rest: generalize, finish
        self.wrap(pipeline, "emit_module", "emission")
        self.wrap(api, "load", "compile")

    def first_call(self, fn, args):
        """(total seconds, {stage: seconds}) of fn's first call; "run" is the rest (the
        cache's look-up and the one run)."""
        self.times.clear()
        start = time.perf_counter()
        fn(*args)
        total = time.perf_counter() - start
        stages = dict(self.times)
        stages["run"] = total - sum(stages.values())
        return total, stages


# ---- graph shapes: (function, arguments, argnums) with about n forward ops ----------------
def chain(n):
    def f(x):
        for i in range(n // 2):
            x = np.tanh(x) * 0.5 if i % 2 else np.sin(x) + 0.25
        return np.sum(x)
    return f, (np.linspace(0.1, 0.9, 8),), 0


def fanout(n):
    def f(x):
        y = x
        for _ in range(n // 2):
            y = y + x * 0.5
        return np.sum(y)
    return f, (np.linspace(0.1, 0.9, 8),), 0


def wide(n):
    def f(x):
        return np.sum(np.stack([np.sin(x[i]) * x[i] for i in range(x.shape[0])]))
    return f, (np.linspace(0.1, 0.9, n // 3),), 0


def mlp(n):
    layers = n // 3  # matmul, add, tanh
    rng = np.random.default_rng(0)

    def f(params, x):
        h = x
        for W, b in params:
            h = np.tanh(h @ W + b)
        return np.sum(h * h)
    params = [(rng.normal(size=(4, 4)) * 0.5, rng.normal(size=4) * 0.1) for _ in range(layers)]
    return f, (params, rng.normal(size=(2, 4))), (0, 1)


def rnn(n):
    steps = n // 5  # getitem, two matmuls, add, tanh; xs is the batch (not differentiated)
    rng = np.random.default_rng(0)

    def f(U, W, xs):
        h = np.zeros((2, 4))
        for t in range(xs.shape[0]):
            h = np.tanh(xs[t] @ U + h @ W)
        return np.sum(h * h)
    return f, (rng.normal(size=(3, 4)) * 0.5, rng.normal(size=(4, 4)) * 0.5,
               rng.normal(size=(steps, 2, 3))), (0, 1)


SHAPES = {"chain": chain, "fanout": fanout, "wide": wide, "mlp": mlp, "rnn": rnn}


def _row(cells):
    return "| " + " | ".join(cells) + " |"


def run_shapes(stages, shapes, sizes, markdown):
    head = ["shape", "ops", "first call", "per op", "growth", *STAGES]
    print(_row(head) if markdown else "  ".join(f"{h:>10}" for h in head))
    if markdown:
        print(_row(["---"] + ["---:"] * (len(head) - 1)))
    for shape in shapes:
        base = None
        for n in sizes:
            f, args, argnums = SHAPES[shape](n)
            total, times = stages.first_call(value_and_grad(f, argnums=argnums), args)
            per_op = total / n
            base = base or per_op
            cells = [shape, f"{n:,}", f"{total:.3f} s", f"{per_op * 1e6:.0f} us",
                     f"{per_op / base:.2f}x", *(f"{times.get(s, 0.0) * 1e3:.0f}" for s in STAGES)]
            print(_row(cells) if markdown else "  ".join(f"{c:>10}" for c in cells), flush=True)


def gru_loss(xp):
    """The 120-step GRU of the issue (hidden 128, batch 32, float32), until workloads.py
    has one."""
    def gru(Wz, Uz, bz, Wr, Ur, br, Wc, Uc, bc, xs, h0, target):
        h = h0
        for t in range(xs.shape[0]):
            x = xs[t]
            z = 1.0 / (1.0 + xp.exp(-(x @ Wz + h @ Uz + bz)))
            r = 1.0 / (1.0 + xp.exp(-(x @ Wr + h @ Ur + br)))
            c = xp.tanh(x @ Wc + (r * h) @ Uc + bc)
            h = (1.0 - z) * h + z * c
        d = h - target
        return 0.5 * (d * d).sum() / xs.shape[1]
    return gru


def gru_args(rng, steps=120, batch=32, inputs=32, hidden=128):
    f32 = np.float32
    weights = []
    for _ in range(3):
        weights += [(rng.normal(size=(inputs, hidden)) / np.sqrt(inputs)).astype(f32),
                    (rng.normal(size=(hidden, hidden)) / np.sqrt(hidden)).astype(f32),
                    (rng.normal(size=hidden) * 0.1).astype(f32)]
    xs = rng.normal(size=(steps, batch, inputs)).astype(f32)
    h0 = np.zeros((batch, hidden), dtype=f32)
    target = rng.uniform(-0.5, 0.5, size=(batch, hidden)).astype(f32)
    return (*weights, xs, h0, target)


def run_workloads(stages, markdown):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import workloads  # the benchmark's own module, beside this file

    cases = [(w.name, w.make_loss, w.make_args(np.random.default_rng(0)), w.argnums)
             for w in workloads.WORKLOADS]
    if not any(name == "gru" for name, *_ in cases):
        cases.append(("gru", gru_loss, gru_args(np.random.default_rng(0)), tuple(range(9))))
    head = ["workload", "first call", *STAGES]
    print(_row(head) if markdown else "  ".join(f"{h:>10}" for h in head))
    if markdown:
        print(_row(["---"] + ["---:"] * (len(head) - 1)))
    for name, make_loss, args, argnums in cases:  # a new function each time: a cold cache
        runs = [stages.first_call(value_and_grad(make_loss(np), argnums=argnums), args)
                for _ in range(3)]
        total, times = sorted(runs, key=lambda r: r[0])[1]
        cells = [name, f"{total * 1e3:.1f} ms",
                 *(f"{times.get(s, 0.0) * 1e3:.1f}" for s in STAGES)]
        print(_row(cells) if markdown else "  ".join(f"{c:>10}" for c in cells), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", choices=list(SHAPES), default=list(SHAPES))
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--quick", action="store_true", help="skip sizes above 10,000 ops")
    parser.add_argument("--workloads", action="store_true",
                        help="also the benchmark workloads' first calls (and the GRU's)")
    parser.add_argument("--markdown", action="store_true", help="markdown tables")
    opts = parser.parse_args()
    sizes = [n for n in opts.sizes if n <= 10000] if opts.quick else opts.sizes
    stages = Stages()
    stages.install()
    value_and_grad(lambda x: np.sum(np.sin(x)))(np.ones(3))  # imports, first-use caches
    print("stages in ms; growth: per-op time over the smallest size's (1.00x = linear)\n")
    run_shapes(stages, opts.shapes, sizes, opts.markdown)
    if opts.workloads:
        print()
        run_workloads(stages, opts.markdown)


if __name__ == "__main__":
    main()
