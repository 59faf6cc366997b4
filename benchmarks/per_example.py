"""Per-example gradients, 256 examples: vmap(grad) against a Python loop over grad, a
hand-written vectorized NumPy gradient, and JAX's jit(vmap(grad)) when jax imports.

    OMP_NUM_THREADS=1 python benchmarks/per_example.py

Run by hand (not a test). Two models: logistic regression (100 features) and the MLP of
examples/mlp.py (20-64-64-4, softmax cross-entropy; one example is a batch of one). Each
method's per-example gradients are checked against the loop first; times are medians of
interleaved rounds, in float64 (JAX with jax_enable_x64).
"""

import os
import statistics
import sys
import timeit
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np

import autodiffgen as ad

sys.path.insert(0, str(Path(__file__).parents[1] / "examples"))
import mlp

N, D = 256, 100


def logistic_loss(w, x, y):
    z = x @ w
    return np.logaddexp(0.0, z) - y * z


def logistic_by_hand(w, X, y):
    p = 1.0 / (1.0 + np.exp(-(X @ w)))
    return (p - y)[:, None] * X


def mlp_by_hand(params, X, Y):
    """The MLP's per-example gradients, vectorized by hand (X: N x 1 x 20, Y: N x 1)."""
    x = X[:, 0]
    h1 = np.tanh(x @ params["W1"] + params["b1"])
    h2 = np.tanh(h1 @ params["W2"] + params["b2"])
    z = h2 @ params["W3"] + params["b3"]
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    g3 = p
    g3[np.arange(len(x)), Y[:, 0]] -= 1.0
    g2 = (g3 @ params["W3"].T) * (1.0 - h2 * h2)
    g1 = (g2 @ params["W2"].T) * (1.0 - h1 * h1)
    return {"W1": x[:, :, None] * g1[:, None, :], "b1": g1,
            "W2": h1[:, :, None] * g2[:, None, :], "b2": g2,
            "W3": h2[:, :, None] * g3[:, None, :], "b3": g3}


def loop(grad_fn):
    def run(first, X, y):
        grads = [grad_fn(first, x, t) for x, t in zip(X, y)]
        if isinstance(grads[0], dict):
            return {k: np.stack([g[k] for g in grads]) for k in grads[0]}
        return np.stack(grads)
    return run


def jax_versions():
    """jit(vmap(grad)) of both models, or {} when jax is not installed."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return {}
    jax.config.update("jax_enable_x64", True)

    def logistic(w, x, y):
        z = x @ w
        return jnp.logaddexp(0.0, z) - y * z

    def mlp_loss(params, x, y):
        h = jnp.tanh(x @ params["W1"] + params["b1"])
        h = jnp.tanh(h @ params["W2"] + params["b2"])
        z = h @ params["W3"] + params["b3"]
        logp = jax.nn.log_softmax(z, axis=1)
        return -logp[jnp.arange(len(y)), y].mean()

    def wrap(fn):
        compiled = jax.jit(jax.vmap(jax.grad(fn), in_axes=(None, 0, 0)))

        def run(*args):
            return jax.tree_util.tree_map(np.asarray, jax.block_until_ready(compiled(*args)))
        return run
    return {"logistic": wrap(logistic), "mlp": wrap(mlp_loss), "version": jax.__version__}


def measure(cases, args, rounds=7, seconds=0.2):
    numbers = {}
    for name, fn in cases.items():  # calls per round: about `seconds` each
        t = timeit.Timer(lambda fn=fn: fn(*args)).timeit(number=1)
        numbers[name] = max(1, int(seconds / max(t, 1e-7)))
    times = {name: [] for name in cases}
    for _ in range(rounds):
        for name, fn in cases.items():
            times[name].append(timeit.Timer(lambda fn=fn: fn(*args)).timeit(
                number=numbers[name]) / numbers[name])
    return {name: statistics.median(t) for name, t in times.items()}


def check(cases, args, reference):
    for name, fn in cases.items():
        got = fn(*args)
        pairs = [(got[k], reference[k]) for k in reference] if isinstance(reference, dict) \
            else [(got, reference)]
        for a, b in pairs:
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12, err_msg=name)


def report(title, cases, args):
    reference = cases["Python loop over grad"](*args)
    check(cases, args, reference)
    medians = measure(cases, args)
    base = medians["vmap(grad)"]
    print(f"\n{title}")
    for name, t in medians.items():
        print(f"  {name:<34} {t * 1e6:10.1f} us   {t / base:7.2f}x vmap(grad)")


def main():
    rng = np.random.default_rng(0)
    jax_fns = jax_versions()
    print(f"numpy {np.__version__}, autodiffgen {ad.__version__}, "
          f"jax {jax_fns.get('version', 'not installed')}; {N} examples")

    w, X = rng.standard_normal(D) * 0.1, rng.standard_normal((N, D))
    y = (rng.random(N) > 0.5).astype(float)
    cases = {"vmap(grad)": ad.vmap(ad.grad(logistic_loss), in_axes=(None, 0, 0)),
             "Python loop over grad": loop(ad.grad(logistic_loss)),
             "hand-written NumPy": logistic_by_hand}
    if jax_fns:
        cases["jax jit(vmap(grad))"] = jax_fns["logistic"]
    report(f"logistic regression, {D} features", cases, (w, X, y))

    params = mlp.init_params(rng)
    Xm, Ym = rng.standard_normal((N, 1, 20)), rng.integers(0, 4, (N, 1))
    grad = ad.grad(mlp.loss.fun)
    cases = {"vmap(grad)": ad.vmap(grad, in_axes=(None, 0, 0)),
             "Python loop over grad": loop(grad),
             "hand-written NumPy": mlp_by_hand}
    if jax_fns:
        cases["jax jit(vmap(grad))"] = jax_fns["mlp"]
    report("MLP 20-64-64-4 (examples/mlp.py)", cases, (params, Xm, Ym))


if __name__ == "__main__":
    main()
