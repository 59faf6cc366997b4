"""Per-call time of a cached generated gradient vs hand-written NumPy, same run.

    python benchmarks/call_overhead.py

Interleaved rounds, medians; prints ratios to the hand-written baseline. The "dispatch"
row is the cached call minus a direct call of the generated function itself: the cost of
computing the signature key and looking it up.
"""

import statistics
import timeit

import numpy as np

from autodiffgen import value_and_grad


def seed(x1, x2):
    return np.log(x1) + x1 * x2 - np.sin(x2)


def seed_by_hand(x1, x2):
    value = np.log(x1) + x1 * x2 - np.sin(x2)
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


def measure(cases, rounds=15, number=2000):
    times = {name: [] for name in cases}
    for _ in range(rounds):  # interleaved, so drift hits every case alike
        for name, (fn, args) in cases.items():
            timer = timeit.Timer("fn(*args)", globals={"fn": fn, "args": args})
            times[name].append(timer.timeit(number=number) / number)
    return {name: statistics.median(t) for name, t in times.items()}


def report(title, cases, baseline, number):
    medians = measure(cases, number=number)
    print(f"\n{title}")
    for name, t in medians.items():
        print(f"  {name:<34} {t * 1e6:9.2f} us   {t / medians[baseline]:6.2f}x hand-written")
    return medians


def main():
    cached = value_and_grad(seed, argnums=(0, 1))
    for args, label in [((2.0, 5.0), "Python floats"),
                        ((np.float64(2.0), np.float64(5.0)), "0-d float64 scalars")]:
        cached(*args)
        generated = next(iter(cached._cache.entries.values())) if len(cached._cache.entries) == 1 else \
            list(cached._cache.entries.values())[-1]
        m = report(f"seed function f(x1, x2) = log x1 + x1*x2 - sin x2, {label}", {
            "hand-written NumPy gradient": (seed_by_hand, args),
            "autodiffgen cached call": (cached, args),
            "generated function called directly": (generated, args),
        }, "hand-written NumPy gradient", number=5000)
        dispatch = m["autodiffgen cached call"] - m["generated function called directly"]
        print(f"  {'dispatch overhead':<34} {dispatch * 1e6:9.2f} us")
    rng = np.random.default_rng(0)
    W1, W2 = rng.normal(size=(64, 64)) / 8, rng.normal(size=(64, 8)) / 8
    x = rng.normal(size=(32, 64))
    fn = value_and_grad(mlp, argnums=(0, 1))
    v, (g1, g2) = fn(W1, W2, x)
    hv, (h1, h2) = mlp_by_hand(W1, W2, x)
    assert np.allclose(v, hv) and np.allclose(g1, h1) and np.allclose(g2, h2)
    report("two-layer tanh net 32x64 -> 64 -> 8, float64", {
        "hand-written NumPy gradient": (mlp_by_hand, (W1, W2, x)),
        "autodiffgen cached call": (fn, (W1, W2, x)),
    }, "hand-written NumPy gradient", number=500)


if __name__ == "__main__":
    main()
