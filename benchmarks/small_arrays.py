"""Small arrays (issue 29, item 3): where NumPy's per-call overhead dominates, and whether
fusing elementwise work (numexpr, numba) pays there.

    OMP_NUM_THREADS=1 python benchmarks/small_arrays.py            # about two minutes
    python benchmarks/small_arrays.py --quick                      # fewer sizes, rounds

Three measurements, each against plain NumPy in the same run, in interleaved rounds
(numexpr_threshold.best: every contender once per round, the best of the rounds):

1. Calls: one NumPy call of each kind the generated code makes, on the character models'
   sizes (a column of 100 or 65 doubles), in the spellings that compute the same thing:
   `W @ h` and `np.dot(W, h)`, `np.sum(x)` and `x.sum()`, `np.copy(x)` and `x.copy()`...
2. Chains: an elementwise tree of k = 3, 5, 8 operations (numexpr_threshold's, + and *
   alternating over x and y) on n elements, as the generated code computes it (each op a
   call, the later ones into the dying result), as one `numexpr.evaluate`, and as one
   `numba.njit` loop. Ratios to NumPy: below 1 pays off. The size from which each pays is
   the smallest n from which every larger one measured is below 1.
3. An RNN step, forward and backward (`h = tanh(W x + U h0 + b)`, then b's and h0's
   gradients from dh, and dh_raw saved for the weights' one product after the loop), hidden
   H, input H: NumPy as the generated code writes it; its elementwise parts fused by
   numexpr or by numba kernels (products still np.dot); the whole step as one numba
   function (np.dot inside calls BLAS). Per step, ratio to NumPy.

numba's cost before the first call is measured too: `import numba`, compiling a kernel
(uncached), and loading it from numba's on-disk cache (`cache=True`, a second process).
numba is not a dependency of autodiffgen: `pip install numba` to run section 2 and 3's
numba columns (they print "n/a" without it).
"""

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import time

if __name__ == "__main__":  # before NumPy (and its BLAS) is first imported
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                 "NUMEXPR_NUM_THREADS", "NUMBA_NUM_THREADS"):
        os.environ[_var] = "1"

import numexpr
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from numexpr_threshold import best, expression, numpy_tree

CHAINS = (3, 5, 8)


# ---- 1. one call, two spellings ---------------------------------------------------------
def call_pairs(rng):
    """(what, NumPy's usual spelling, the faster one) at the character models' sizes."""
    W, U, V = rng.normal(size=(100, 65)), rng.normal(size=(100, 100)), rng.normal(size=(65, 100))
    x, h, p = rng.normal(size=(65, 1)), rng.normal(size=(100, 1)), rng.normal(size=(65, 1))
    B, out = rng.normal(size=(64, 128)), np.empty((100, 1))
    return [
        ("(100, 65) @ (65, 1)", lambda: W @ x, lambda: np.dot(W, x)),
        ("(100, 100) @ (100, 1)", lambda: U @ h, lambda: np.dot(U, h)),
        ("(65, 100).T @ (65, 1)", lambda: V.T @ p, lambda: np.dot(V.T, p)),
        ("sum of 65", lambda: np.sum(p), lambda: p.sum()),
        ("max of 65", lambda: np.max(p), lambda: p.max()),
        ("sum of 64x128 over axis 0", lambda: np.sum(B, axis=0), lambda: B.sum(axis=0)),
        ("copy of 65", lambda: np.copy(p), lambda: p.copy(order="K")),
        ("one element added: np.add.at / +=", lambda: np.add.at(p, (3, 0), 1.0),
         lambda: p.__setitem__((3, 0), p[3, 0] + 1.0)),
        ("h + h (a ufunc call's floor)", lambda: h + h, lambda: np.add(h, h, out=out)),
    ]


def calls_table(rng, rounds):
    print("| call | NumPy's spelling | faster spelling | saved per call |")
    print("|---|---:|---:|---:|")
    for what, usual, fast in call_pairs(rng):
        a, b = best([usual, fast], 2e4, rounds)
        print(f"| {what} | {a * 1e9:.0f} ns | {b * 1e9:.0f} ns | {(a - b) * 1e9:.0f} ns |")


# ---- numba kernels, written to a file so that cache=True can keep them ---------------------
def kernel_source(cache):
    """A module of numba kernels: one per chain length, and the RNN step's parts."""
    chains = "\n".join(textwrap.dedent(f"""
        @numba.njit(cache={cache})
        def chain{k}(x, y, out):
            for i in range(x.shape[0]):
                x_, y_ = x[i], y[i]
                out[i] = {expression(k).replace('x', 'x_').replace('y', 'y_')}
            return out
        """) for k in CHAINS)
    return "import numba\nimport numpy as np\n" + chains + textwrap.dedent(f"""
        @numba.njit(cache={cache})
        def tanh3(a, b, c, out):
            for i in range(a.shape[0]):
                out[i] = np.tanh(a[i] + b[i] + c[i])
            return out

        @numba.njit(cache={cache})
        def tanh_back(h, dh, db, out):
            # dh_raw = (1 - h * h) * dh into out (the step's row of a stack); db += dh_raw
            for i in range(h.shape[0]):
                r = (1.0 - h[i] * h[i]) * dh[i]
                out[i] = r
                db[i] += r
            return out

        @numba.njit(cache={cache})
        def whole_step(W, U, b, x, h0, dh, db, out):
            h = np.tanh(np.dot(W, x) + np.dot(U, h0) + b)
            r = (1.0 - h * h) * dh
            db += r
            out[:] = r
            return h, np.dot(U.T, r)
        """)


def load_kernels(directory, cache=False):
    """The kernels' module (None without numba), compiled on first call."""
    try:
        import numba  # noqa: F401
    except ImportError:
        return None
    path = os.path.join(directory, f"kernels_{int(cache)}.py")
    with open(path, "w") as f:
        f.write(kernel_source(cache))
    sys.path.insert(0, directory)
    try:
        return __import__(f"kernels_{int(cache)}")
    finally:
        sys.path.pop(0)


# ---- 2. elementwise chains ----------------------------------------------------------------
def chain_cells(n, k, kernels, rounds, rng):
    x, y = (rng.uniform(0.5, 1.0, n) for _ in range(2))
    text, local, out = expression(k), {"x": x, "y": y}, np.empty(n)
    want = numpy_tree(k, x, y)
    fns = [lambda: numpy_tree(k, x, y), lambda: numexpr.evaluate(text, local_dict=local)]
    if kernels is not None:
        kernel = getattr(kernels, f"chain{k}")
        np.testing.assert_allclose(kernel(x, y, out), want, rtol=1e-12)
        fns.append(lambda: kernel(x, y, np.empty(n)))  # a new result, as NumPy's is
    np.testing.assert_allclose(numexpr.evaluate(text, local_dict=local), want, rtol=1e-12)
    times = best(fns, 2e6 / (n * k + 2000), rounds)
    return times[0], [t / times[0] for t in times[1:]] + [None] * (3 - len(times))


def pays_from(sizes, ratios):
    """The smallest size from which every larger one measured is below 1."""
    start = None
    for n, r in zip(sizes, ratios):
        if r is None or r >= 1:
            start = None
        elif start is None:
            start = n
    return f"{start:,} elements" if start is not None else "no size measured"


def chains_table(sizes, kernels, rounds, rng):
    print("| elements | ops | NumPy | numexpr / NumPy | numba / NumPy |")
    print("|---:|---:|---:|---:|---:|")
    ratios = {(k, tool): [] for k in CHAINS for tool in (0, 1)}
    for n in sizes:
        for k in CHAINS:
            plain, cells = chain_cells(n, k, kernels, rounds, rng)
            for tool in (0, 1):
                ratios[k, tool].append(cells[tool])
            print(f"| {n:,} | {k} | {plain * 1e6:.2f} us | "
                  + " | ".join("n/a" if c is None else f"{c:.2f}" for c in cells[:2]) + " |")
    print()
    for k in CHAINS:
        print(f"- {k} ops: numexpr pays from {pays_from(sizes, ratios[k, 0])}, "
              f"numba from {pays_from(sizes, ratios[k, 1])}")


# ---- 3. an RNN step, forward and backward --------------------------------------------------
# What a step of the generated loop does once its weight gradients are summed after the loop
# (loops/hoist.py: one product over the saved columns): two products and the tanh forward;
# tanh's derivative times dh into the step's row of a stack, the bias's sum and h0's
# gradient backward.
def rnn_data(H, rng):
    W, U = rng.normal(size=(H, H)) / np.sqrt(H), rng.normal(size=(H, H)) / np.sqrt(H)
    b, x, h0, dh = (rng.normal(size=H) for _ in range(4))
    return (W, U, b, x, h0, dh), (np.zeros(H), np.empty(H))


def step_numpy(W, U, b, x, h0, dh, db, out):
    """As the generated code writes a step (products np.dot, each op a call)."""
    a = np.dot(W, x)
    a += np.dot(U, h0)
    a += b
    h = np.tanh(a, out=a)
    r = np.multiply(h, h, out=out)
    np.subtract(1.0, r, out=r)
    r *= dh
    db += r
    return h, np.dot(U.T, r)


def step_numexpr(W, U, b, x, h0, dh, db, out):
    h = numexpr.evaluate("tanh(a + c + b)", local_dict={"a": np.dot(W, x), "c": np.dot(U, h0),
                                                        "b": b})
    r = numexpr.evaluate("(1.0 - h * h) * dh", local_dict={"h": h, "dh": dh}, out=out)
    db += r
    return h, np.dot(U.T, r)


def step_fused(kernels):
    def step(W, U, b, x, h0, dh, db, out):
        h = kernels.tanh3(np.dot(W, x), np.dot(U, h0), b, np.empty(len(b)))
        r = kernels.tanh_back(h, dh, db, out)
        return h, np.dot(U.T, r)
    return step


def rnn_table(hiddens, kernels, rounds, rng):
    names = ["numexpr parts", "numba parts", "numba whole step"]
    print("| hidden | NumPy per step | " + " | ".join(f"{n} / NumPy" for n in names) + " |")
    print("|---:|---:|" + "---:|" * len(names))
    for H in hiddens:
        data, grads = rnn_data(H, rng)
        steps = [step_numpy, step_numexpr]
        if kernels is not None:
            steps += [step_fused(kernels), kernels.whole_step]
        want = step_numpy(*data, *(np.zeros_like(g) for g in grads))
        for step in steps[1:]:
            got = step(*data, *(np.zeros_like(g) for g in grads))
            for a, b in zip(got, want):
                np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
        grads = tuple(np.zeros_like(g) for g in grads)
        calls = [lambda s=s, d=data, g=grads: s(*d, *g) for s in steps]
        times = best(calls, 2e5 / (H * H + 2000), rounds)
        cells = [f"{t / times[0]:.2f}" for t in times[1:]] + ["n/a"] * (4 - len(times))
        print(f"| {H} | {times[0] * 1e6:.2f} us | " + " | ".join(cells) + " |")


# ---- numba before its first call ----------------------------------------------------------
def numba_startup(directory):
    """Seconds to import numba, and to first call a chain kernel without and with numba's
    on-disk cache, each in a new process (the cached one after a process wrote it)."""
    code = textwrap.dedent(f"""
        import time, sys
        t0 = time.perf_counter()
        import numba, numpy as np
        t1 = time.perf_counter()
        sys.path.insert(0, {directory!r})
        import kernels_1 as k
        x = np.ones(100)
        k.chain8(x, x, np.empty(100))
        k.tanh3(x, x, x, np.empty(100))
        print(t1 - t0, time.perf_counter() - t1)
        """)
    env = dict(os.environ, NUMBA_CACHE_DIR=os.path.join(directory, "numba_cache"))
    runs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, check=True).stdout.split() for _ in range(2)]
    (imported, uncached), (_, cached) = ([float(v) for v in run] for run in runs)
    print(f"numba: `import numba` {imported:.2f} s; two kernels' first calls "
          f"{uncached:.2f} s compiled, {cached:.3f} s loaded from numba's cache (cache=True)")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer sizes and rounds")
    args = p.parse_args()
    rounds = 3 if args.quick else 9
    sizes = (16, 100, 1024, 16384) if args.quick else \
        (16, 65, 100, 256, 1024, 4096, 16384, 65536, 262144)
    hiddens = (16, 100, 512) if args.quick else (16, 32, 64, 100, 128, 256, 512, 1024)
    rng = np.random.default_rng(0)
    directory = tempfile.mkdtemp(prefix="small_arrays_")
    kernels = load_kernels(directory)
    numba_version = kernels.numba.__version__ if kernels is not None else "not installed"
    print(f"NumPy {np.__version__}, numexpr {numexpr.__version__}, numba {numba_version}; "
          f"one thread; {time.strftime('%H:%M UTC', time.gmtime())}, load "
          f"{os.getloadavg()[0]:.2f}\n")
    calls_table(rng, rounds)
    print()
    chains_table(sizes, kernels, rounds, rng)
    print()
    rnn_table(hiddens, kernels, rounds, rng)
    if kernels is not None:
        print()
        load_kernels(directory, cache=True)  # the file the processes import
        numba_startup(directory)


if __name__ == "__main__":
    main()
