"""The seed example: f(x1, x2) = log(x1) + x1*x2 - sin(x2), and its gradient at (2, 5).

    python examples/seed_function.py             # the value, the gradient, the code
    autodiffgen emit examples/seed_function.py   # just the generated code

By hand: df/dx1 = 1/x1 + x2 = 5.5 and df/dx2 = x1 - cos(x2) = 1.716.
"""

import numpy as np

from autodiffgen import value_and_grad


@value_and_grad(argnums=(0, 1), example={"x1": 2.0, "x2": 5.0})
def f(x1, x2):
    return np.log(x1) + x1 * x2 - np.sin(x2)


if __name__ == "__main__":
    value, (dx1, dx2) = f(2.0, 5.0)
    print(f"value = {value:.3f}")
    print(f"df/dx1 = {dx1:.3f}")
    print(f"df/dx2 = {dx2:.3f}")
    print()
    print(f.source(2.0, 5.0))
