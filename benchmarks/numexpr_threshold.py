"""Where one numexpr call beats NumPy on an arithmetic tree: the measurement behind
passes/fuse.py's MIN_ELEMENTS and MIN_OPS.

    python benchmarks/numexpr_threshold.py               # numexpr on 1 thread
    python benchmarks/numexpr_threshold.py --threads 2   # on 2 threads
    python benchmarks/numexpr_threshold.py --quick       # fewer sizes and repeats

A tree of k operations (+ and * alternating, over two arrays x and y) is computed the way
the generated code computes it without numexpr, the first operation allocating and each
later one writing into the dying result (`np.add(t, x, out=t)`), and as one
`numexpr.evaluate`. Each cell is the ratio of the two best-of-7 times (numexpr / NumPy):
below 1, fusing pays off. Then the same comparison end to end, the generated
value-and-grad with the fuse pass forced on and off: of an 8-op tree over data (the best
case) and of a rational function whose trees the backward partly reads again.
"""

import argparse
import os
import sys

if __name__ == "__main__":  # numexpr reads its thread count when first imported
    _threads = sys.argv[sys.argv.index("--threads") + 1] if "--threads" in sys.argv else "1"
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_var] = "1"
    os.environ["NUMEXPR_NUM_THREADS"] = _threads

import importlib
import inspect
import timeit

import numexpr
import numpy as np

import autodiffgen as ad

OPS = (2, 3, 4, 6, 8, 12)


def numpy_tree(k, x, y):
    t = x * y
    for i in range(k - 1):
        (np.add if i % 2 else np.multiply)(t, x if i % 3 else y, out=t)
    return t


def expression(k):
    text = "x * y"
    for i in range(k - 1):
        text = f"({text}) {'+' if i % 2 else '*'} {'x' if i % 3 else 'y'}"
    return text


def best(fns, work, rounds=7):
    """The best time per call of each function, over interleaved rounds (another process
    slowing the machine for a while then slows both)."""
    number = max(3, int(work))
    times = [[] for _ in fns]
    for _ in range(rounds):
        for fn, seen in zip(fns, times):
            seen.append(timeit.timeit(fn, number=number) / number)
    return [min(seen) for seen in times]


def tree_row(n, dtype, rng):
    x, y = (rng.uniform(0.5, 1.0, n).astype(dtype) for _ in range(2))
    cells = []
    for k in OPS:
        text, local = expression(k), {"x": x, "y": y}
        assert np.array_equal(numpy_tree(k, x, y), numexpr.evaluate(text, local_dict=local))
        fused, plain = best([lambda t=text, d=local: numexpr.evaluate(t, local_dict=d),
                             lambda k=k: numpy_tree(k, x, y)], 3e7 / (n * k))
        cells.append(fused / plain)
    return cells


def rational(x, y):
    """Trees mixed with values the backward reads again: fusion's ordinary case."""
    a = (x * y + x) * y - x * x
    return np.sum(a * a / (1.0 + y * y) - x * y * 0.5)


def weighted(w, x, y):
    """An 8-op tree over data that is not differentiated: fusion's best case."""
    return np.sum(w * w * ((((x * y + x) * y - x) * y + x) * y - y * x))


def end_to_end(fun, n, dtype, rng):
    """(time with numexpr, time without) of the generated gradient of `fun`, w.r.t. its
    first argument."""
    fuse = importlib.import_module("autodiffgen.passes.fuse")
    args = [rng.uniform(0.5, 1.0, n).astype(dtype) for _ in inspect.signature(fun).parameters]
    steps = []
    for min_elements in (1, None):
        saved = fuse.MIN_ELEMENTS
        fuse.MIN_ELEMENTS = {np.dtype(dtype): (min_elements, min_elements)} \
            if min_elements else {}
        try:
            f = ad.value_and_grad(fun)
            f(*args)
            fused = "numexpr.evaluate" in f.source(*args)
        finally:
            fuse.MIN_ELEMENTS = saved
        assert fused == bool(min_elements)
        steps.append(lambda f=f: f(*args))
    return best(steps, 3e7 / (n * 20))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", default="1", help="NUMEXPR_NUM_THREADS (default 1)")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    sizes = (10**5, 10**6) if args.quick else (10**5, 10**6, 4 * 10**6, 16 * 10**6)
    rng = np.random.default_rng(0)
    print(f"numexpr {numexpr.__version__} on {numexpr.get_num_threads()} thread(s), "
          f"numpy {np.__version__}; ratio numexpr / NumPy, below 1 pays off\n")
    print("| elements | dtype | " + " | ".join(f"{k} ops" for k in OPS) + " |")
    print("|---:|---|" + "---:|" * len(OPS))
    for n in sizes:
        for dtype in (np.float32, np.float64):
            cells = tree_row(n, dtype, rng)
            print(f"| {n:,} | {np.dtype(dtype).name} | "
                  + " | ".join(f"{c:.2f}" for c in cells) + " |")
    for fun in (weighted, rational):
        print(f"\nend to end, value_and_grad of `{fun.__name__}` (fuse forced on / off):\n")
        for n in sizes:
            for dtype in (np.float32, np.float64):
                on, off = end_to_end(fun, n, dtype, rng)
                print(f"- {n:,} {np.dtype(dtype).name}: {on * 1e3:.2f} ms / "
                      f"{off * 1e3:.2f} ms = {on / off:.2f}")


if __name__ == "__main__":
    main()
