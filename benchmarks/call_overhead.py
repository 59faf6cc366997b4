"""Per-call time of a cached generated gradient vs hand-written NumPy, same run.

    python benchmarks/call_overhead.py [--rounds N]

Interleaved rounds; each case's fastest round (on a shared machine, the least disturbed:
the medians of sub-microsecond calls swing by more than the dispatch costs). For each kind of argument of the seed function
f(x1, x2) = log x1 + x1*x2 - sin x2 (Python floats, NumPy float64 scalars, 0-d arrays,
small arrays, and calls alternating between two kinds), it prints the hand-written NumPy
gradient, the cached call, and the generated function called directly; "dispatch" is
the cached call minus the direct call: what the cached call spends deciding which code
to run (cache/dispatch.py). Run it with one thread (OMP_NUM_THREADS=1) and say the load
average next to its numbers.
"""

import argparse
import timeit

import numpy as np

from autodiffgen import value_and_grad


def seed(x1, x2):
    return np.log(x1) + x1 * x2 - np.sin(x2)


def seed_by_hand(x1, x2):
    value = np.log(x1) + x1 * x2 - np.sin(x2)
    return value, (1.0 / x1 + x2, x1 - np.cos(x2))


def seed_sum(x1, x2):
    return np.sum(np.log(x1) + x1 * x2 - np.sin(x2))


def seed_sum_by_hand(x1, x2):
    value = np.sum(np.log(x1) + x1 * x2 - np.sin(x2))
    return value, (1.0 / x1 + x2, x1 - np.cos(x2))


def mlp(W1, W2, x):
    return np.tanh(np.tanh(x @ W1) @ W2).sum()


def mlp_by_hand(W1, W2, x):
    h = np.tanh(x @ W1)
    o = np.tanh(h @ W2)
    g_o = 1.0 - o * o
    g_W2 = h.T @ g_o
    g_h = (g_o @ W2.T) * (1.0 - h * h)
    return o.sum(), (x.T @ g_h, g_W2)


def measure(cases, rounds, number):
    """Seconds per call of each case in its fastest of interleaved rounds; a case is a list of
    (function, argument tuple) called in turn."""
    times = {name: [] for name in cases}
    for _ in range(rounds):  # interleaved, so drift hits every case alike
        for name, calls in cases.items():
            timer = timeit.Timer("for fn, a in calls: fn(*a)", globals={"calls": calls})
            times[name].append(timer.timeit(number=number) / (number * len(calls)))
    return {name: min(t) for name, t in times.items()}


def kinds():
    """(label, function, hand-written gradient, argument tuples called in turn)."""
    two = (2.0, 5.0)
    return [
        ("Python floats", seed, seed_by_hand, [two]),
        ("np.float64 scalars", seed, seed_by_hand, [tuple(map(np.float64, two))]),
        ("0-d float64 arrays", seed, seed_by_hand, [tuple(map(np.array, two))]),
        ("float64 arrays of 4", seed_sum, seed_sum_by_hand,
         [(np.full(4, 2.0), np.full(4, 5.0))]),
        ("alternating Python floats / np.float64", seed, seed_by_hand,
         [two, tuple(map(np.float64, two))]),
    ]


def dispatch_table(rounds):
    """One row per kind of argument: times, dispatch cost, ratio to hand-written."""
    print("\nseed function f(x1, x2) = log x1 + x1*x2 - sin x2 (sum over arrays), "
          "microseconds per call")
    print(f"  {'arguments':<40} {'hand':>7} {'cached':>7} {'direct':>7} {'dispatch':>9} "
          f"{'cached/hand':>12}")
    for label, fun, by_hand, calls in kinds():
        cached = value_and_grad(fun, argnums=(0, 1))
        direct = []
        for args in calls:
            value, grads = cached(*args)
            want, want_grads = by_hand(*args)
            assert np.allclose(value, want) and np.allclose(grads, want_grads), label
            direct.append((cached._entry(args), args))  # the generated function it runs
        cases = {"hand": [(by_hand, a) for a in calls], "cached": [(cached, a) for a in calls],
                 "direct": direct}
        m = measure(cases, rounds, number=max(1, 2000 // len(calls)))
        print(f"  {label:<40} {m['hand'] * 1e6:7.3f} {m['cached'] * 1e6:7.3f} "
              f"{m['direct'] * 1e6:7.3f} {(m['cached'] - m['direct']) * 1e6:9.3f} "
              f"{m['cached'] / m['hand']:11.2f}x")


def mlp_table(rounds):
    rng = np.random.default_rng(0)
    W1, W2 = rng.normal(size=(64, 64)) / 8, rng.normal(size=(64, 8)) / 8
    x = rng.normal(size=(32, 64))
    fn = value_and_grad(mlp, argnums=(0, 1))
    v, (g1, g2) = fn(W1, W2, x)
    hv, (h1, h2) = mlp_by_hand(W1, W2, x)
    assert np.allclose(v, hv) and np.allclose(g1, h1) and np.allclose(g2, h2)
    m = measure({"hand": [(mlp_by_hand, (W1, W2, x))], "cached": [(fn, (W1, W2, x))]},
                rounds, number=200)
    print("\ntwo-layer tanh net 32x64 -> 64 -> 8, float64")
    print(f"  hand-written NumPy gradient {m['hand'] * 1e6:9.2f} us")
    print(f"  autodiffgen cached call     {m['cached'] * 1e6:9.2f} us   "
          f"{m['cached'] / m['hand']:.2f}x hand-written")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=21, help="interleaved rounds")
    rounds = parser.parse_args().rounds
    dispatch_table(rounds)
    mlp_table(rounds)


if __name__ == "__main__":
    main()
