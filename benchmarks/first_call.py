"""First-call time (trace, passes, emission, compile, one run) against graph size.

    python benchmarks/first_call.py [--sizes 1000 10000 100000]

The function is a chain of elementwise operations on a small array, so the time is all
autodiffgen's own work. Prints the time per operation: flat means linear growth.
"""

import argparse
import time

import numpy as np

from autodiffgen import value_and_grad


def chain(n):
    def f(x):
        for i in range(n // 2):
            x = np.tanh(x) * 0.5 if i % 2 else np.sin(x) + 0.25
        return np.sum(x)
    return f


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    sizes = parser.parse_args().sizes
    x = np.linspace(0.1, 0.9, 8)
    print(f"{'forward ops':>12} {'first call':>12} {'per op':>10} {'cached call':>12}")
    for n in sizes:
        f = value_and_grad(chain(n))
        start = time.perf_counter()
        f(x)
        first = time.perf_counter() - start
        start = time.perf_counter()
        f(x)
        cached = time.perf_counter() - start
        print(f"{n:>12} {first:>11.3f}s {first / n * 1e6:>8.1f}us {cached * 1e3:>10.2f}ms")


if __name__ == "__main__":
    main()
