"""The peer GRU's first call (issue 27's target): autodiffgen's value_and_grad of the GRU
written with a Python loop against JAX's jit(value_and_grad) of the same GRU written with
`lax.scan`, each in its own fresh process, imports excluded.

    OMP_NUM_THREADS=1 python benchmarks/gru_first_call.py --steps 120 --rounds 3

Needs JAX for its column (the `bench` extra); prints CPU and wall seconds.
"""

import argparse
import importlib.util
import pathlib
import subprocess
import sys
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent


def _workloads():
    spec = importlib.util.spec_from_file_location("workloads", HERE / "workloads.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def first_call(engine, steps):
    """(CPU s, wall s) of one first call in this process."""
    w = _workloads()
    args = w.gru_args(np.random.default_rng(0), steps=steps)
    if engine == "jax":
        import jax
        import jax.numpy as jnp
        f = jax.jit(jax.value_and_grad(w.gru_jax(jnp, jax), argnums=(0, 1, 2, 3)))
        run = lambda: jax.block_until_ready(f(*args))
    else:
        import autodiffgen as ad
        f = ad.value_and_grad(w.gru_loss(np), argnums=(0, 1, 2, 3))
        run = lambda: f(*args)
    cpu, wall = time.process_time(), time.perf_counter()
    run()
    return time.process_time() - cpu, time.perf_counter() - wall


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--engine", choices=["jax", "autodiffgen"], help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.engine:  # a child process: one first call
        print(*first_call(options.engine, options.steps))
        return
    engines = ["autodiffgen"] + (["jax"] if importlib.util.find_spec("jax") else [])
    for _ in range(options.rounds):  # alternating, each call in a fresh process
        for engine in engines:
            out = subprocess.run([sys.executable, __file__, "--engine", engine, "--steps",
                                  str(options.steps)], capture_output=True, text=True,
                                 check=True).stdout.split()
            print(f"{engine:12s} T={options.steps}  cpu {float(out[0]):.2f} s  "
                  f"wall {float(out[1]):.2f} s")


if __name__ == "__main__":
    main()
