"""Random programs, seeded: generated code (passes on) against the tape and finite
differences. Each program is a random DAG of elementwise, reduction, shape and matmul
steps over a few inputs, with reuse of earlier values (fan-out, diamonds) and views, so
the passes and the memory plan meet shapes of graphs nobody wrote by hand."""

import numpy as np
import pytest

from autodiffgen.testing import check_grads

UNARY = [np.tanh, np.sin, np.exp, lambda v: v * v, lambda v: -v, np.cos,
         lambda v: np.log(1.0 + v * v), lambda v: np.maximum(v, 0.1)]
BINARY = [np.add, np.subtract, np.multiply, lambda a, b: a / (1.5 + np.tanh(b))]


def make_program(seed, steps=8):
    """A list of steps; each reads earlier values by index and makes a (3, 4) value."""
    rng = np.random.default_rng(seed)
    program = []
    for k in range(steps):
        kind = rng.choice(["unary", "binary", "binary", "view", "reduce", "matmul"])
        a, b = (int(i) for i in rng.integers(0, 3 + k, size=2))
        program.append((str(kind), a, b, int(rng.integers(0, 8))))
    return program


def run(program, x, y, z):
    values = [x, y, z]
    for kind, a, b, pick in program:
        u, v = values[a], values[b]
        if kind == "unary":
            out = UNARY[pick % len(UNARY)](u)
        elif kind == "binary":
            out = BINARY[pick % len(BINARY)](u, v)
        elif kind == "view":  # views of earlier values, then a fresh array of the same shape
            out = [u.T.T, u[:, ::-1], u.reshape(4, 3).reshape(3, 4), u[::-1] * 1.0][pick % 4]
        elif kind == "reduce":  # a reduction broadcast back
            out = u - [u.mean(axis=1, keepdims=True), u.max(axis=0),
                       u.sum(axis=(0, 1))][pick % 3] * 0.5
        else:
            out = np.tanh(u @ v.T @ u * 0.1)
        values.append(out)
    return np.sum(values[-1] * values[-2]) + np.mean(values[-3] ** 2)


@pytest.mark.parametrize("seed", range(40))
def test_random_program(seed):
    program = make_program(seed)
    rng = np.random.default_rng(1000 + seed)
    x, y, z = (rng.uniform(-1.0, 1.0, size=(3, 4)) for _ in range(3))

    def f(x, y, z):
        return run(program, x, y, z)
    check_grads(f, x, y, z, argnums=(0, 1, 2), rtol=1e-5, atol=1e-6)
