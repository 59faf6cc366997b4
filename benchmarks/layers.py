"""Layer-style models (issue 29): autodiffgen's value_and_grad against each model's own
hand-written backward, and JAX where the same code runs under it.

    OMP_NUM_THREADS=1 python benchmarks/layers.py        # all 17 models (about 4 minutes)
    python benchmarks/layers.py --quick                  # a smoke run (3 short rounds)
    python benchmarks/layers.py --only conv --only lstm --rounds 5

The models (benchmarks/layer_models.py) are written as course assignments, tutorials and
classic scripts write them: outputs preallocated and filled in nested loops, dict caches,
in-place updates, `np.add.at`, masks, Python lists of ints. Per model, the loss a user
differentiates (its forward composed into a scalar, `sum(out * dout)` for a layer) goes to
autodiffgen, and the same forward followed by the author's backward is the baseline.
Each contender's value and gradients are checked against the baseline first (float64,
rtol 1e-6), then timed by benchmarks/run.py's harness: the first call (autodiffgen: trace,
emit, compile and run), then interleaved rounds (each round times every contender once,
as a batch of calls, starting from a different one), medians per call, one thread.

JAX (jax.jit of jax.value_and_grad, 64-bit) runs when it is installed, on the models whose
source runs unchanged with `np` bound to `jax.numpy` (a second copy of layer_models, see
jax_twin) and on the two character-level models, whose one-hot loop is ported (a JAX array
cannot be assigned into). It skips the models that write into arrays (naive conv and
pooling, the SVM loss, RNN and LSTM over time) and the LSTM step, whose masked sigmoid
selects by boolean masks JAX cannot trace.
"""

import argparse
import importlib.util
import inspect
import os
import sys
import types

if __name__ == "__main__":  # before NumPy (and its BLAS) is first imported
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_var] = "1"

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import layer_models as lm
import run
from workloads import Workload

RTOL = 1e-6
JAX_SKIPS = {"conv": "array writes", "max_pool": "array writes", "svm": "array writes",
             "rnn": "array writes", "lstm": "array writes", "lstm_step": "masked sigmoid"}


# ---- the hand-written baselines: the same forward, then the author's backward -------------
def by_hand_layer(forward, backward, n_inputs=None):
    """(value, gradients) of sum(forward(*inputs)[0] * dout), dout the last argument, from
    backward(dout, cache); gradients of the first n_inputs inputs."""
    def by_hand(*args):
        *inputs, dout = args
        out, cache = forward(*inputs)
        grads = backward(dout, cache)
        grads = grads if isinstance(grads, tuple) else (grads,)
        return np.sum(out * dout), grads[:n_inputs]
    return by_hand


def by_hand_loss(forward, backward):
    def by_hand(x, *labels):
        loss, cache = forward(x, *labels)
        return loss, (backward(cache),)
    return by_hand


def word_embedding_by_hand(W, x, dout):
    out, cache = lm.word_embedding_forward(x, W)
    return np.sum(out * dout), (lm.word_embedding_backward(dout, cache),)


def lstm_step_by_hand(x, prev_h, prev_c, Wx, Wh, b, dnext_h, dnext_c):
    next_h, next_c, cache = lm.lstm_step_forward(x, prev_h, prev_c, Wx, Wh, b)
    value = np.sum(next_h * dnext_h) + np.sum(next_c * dnext_c)
    return value, lm.lstm_step_backward(dnext_h, dnext_c, cache)


def two_layer_by_hand(W1, b1, W2, b2, X, y, reg):
    params = {"W1": W1, "b1": b1, "W2": W2, "b2": b2}
    loss, cache = lm.two_layer_forward(params, X, y, reg)
    grads = lm.two_layer_backward(params, cache, reg)
    return loss, tuple(grads[k] for k in ("W1", "b1", "W2", "b2"))


def char_rnn_by_hand(Wxh, Whh, Why, bh, by, hprev, inputs, targets):
    loss, cache = lm.char_rnn_forward(inputs, targets, hprev, Wxh, Whh, Why, bh, by)
    return loss, lm.char_rnn_backward(cache, targets, Wxh, Whh, Why)


def char_lstm_by_hand(*args):
    *weights, h_prev, c_prev, inputs, targets = args
    p = dict(zip(lm.CHAR_LSTM_PARAMS, weights))
    loss, cache = lm.char_lstm_forward(inputs, targets, h_prev, c_prev, p)
    grads = lm.char_lstm_backward(cache, targets, p)
    return loss, tuple(grads[k] for k in lm.CHAR_LSTM_PARAMS)


# ---- JAX: the same source with np bound to jax.numpy, or a port ---------------------------
def jax_twin():
    """layer_models loaded a second time, its global `np` then bound to jax.numpy: every
    function of it, helpers included, runs the same source on JAX's arrays."""
    import jax.numpy as jnp
    spec = importlib.util.spec_from_file_location("layer_models_jax", lm.__file__)
    twin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(twin)
    twin.np = jnp
    return twin


def jax_same(name):
    return lambda jnp, jax: getattr(jax_twin(), name)


def one_hot_jax(jnp, index, size):
    return jnp.zeros((size, 1)).at[index, 0].set(1.0)


def char_rnn_jax(jnp, jax):
    """char_rnn_loss's loop with its one-hot column made by `.at[].set`."""
    def loss(Wxh, Whh, Why, bh, by, hprev, inputs, targets):
        h, total = hprev, 0.0
        for t in range(len(inputs)):
            x = one_hot_jax(jnp, inputs[t], Wxh.shape[1])
            h = jnp.tanh(jnp.dot(Wxh, x) + jnp.dot(Whh, h) + bh)
            scores = jnp.dot(Why, h) + by
            p = jnp.exp(scores) / jnp.sum(jnp.exp(scores))
            total += -jnp.log(p[targets[t], 0])
        return total
    return loss


def char_lstm_jax(jnp, jax):
    """char_lstm_loss's loop with its one-hot column made by `.at[].set`; the cell is
    layer_models' own, run by JAX."""
    cell = jax_twin().char_lstm_cell

    def loss(*args):
        *weights, h, c, inputs, targets = args
        p = dict(zip(lm.CHAR_LSTM_PARAMS, weights))
        total = 0.0
        for t in range(len(inputs)):
            x = one_hot_jax(jnp, inputs[t], p["Wy"].shape[0])
            h, c, prob, _ = cell(x, h, c, p)
            total += -jnp.log(prob[targets[t], 0])
        return total
    return loss


# ---- arguments: float64, seeded; a fixed random upstream gradient where a layer needs one --
def normal(rng, *shape, scale=1.0):
    return rng.normal(size=shape) * scale


def affine_args(rng, n=64, shape=(3, 16, 16), m=256):
    d = int(np.prod(shape))
    return (normal(rng, n, *shape), normal(rng, d, m, scale=d ** -0.5), normal(rng, m),
            normal(rng, n, m))


def relu_args(rng, n=128, d=1024):
    return normal(rng, n, d), normal(rng, n, d)


def batchnorm_args(rng, n=128, d=512):
    x = 5.0 + 3.0 * normal(rng, n, d)
    return x, 1.0 + 0.1 * normal(rng, d), normal(rng, d), {"eps": 1e-5}, normal(rng, n, d)


def conv_args(rng, n=2, c=3, size=8, f=4):
    return (normal(rng, n, c, size, size), normal(rng, f, c, 3, 3, scale=0.3),
            normal(rng, f), {"stride": 1, "pad": 1}, normal(rng, n, f, size, size))


def max_pool_args(rng, n=2, c=4, size=16):
    pool = {"pool_height": 2, "pool_width": 2, "stride": 2}
    return normal(rng, n, c, size, size), pool, normal(rng, n, c, size // 2, size // 2)


def scores_args(rng, n=512, c=100):
    return normal(rng, n, c), rng.integers(0, c, n)


def step_args(rng, n=64, d=128, h=128, gates=1):
    """x, prev_h, Wx, Wh, b of one recurrent step, the gates side by side."""
    return (normal(rng, n, d), normal(rng, n, h), normal(rng, d, gates * h, scale=d ** -0.5),
            normal(rng, h, gates * h, scale=h ** -0.5), normal(rng, gates * h, scale=0.1))


def rnn_step_args(rng, n=64, d=128, h=128):
    return (*step_args(rng, n, d, h), normal(rng, n, h))


def lstm_step_args(rng, n=64, d=128, h=128):
    x, prev_h, Wx, Wh, b = step_args(rng, n, d, h, gates=4)
    return x, prev_h, normal(rng, n, h), Wx, Wh, b, normal(rng, n, h), normal(rng, n, h)


def sequence_args(rng, n=16, t=30, d=64, h=128, gates=1):
    """x (N, T, D), h0, Wx, Wh, b and the upstream gradient of every hidden state."""
    _, h0, Wx, Wh, b = step_args(rng, n, d, h, gates)
    return normal(rng, n, t, d), h0, Wx, Wh, b, normal(rng, n, t, h)


def lstm_args(rng, **size):
    return sequence_args(rng, **size, gates=4)


def word_embedding_args(rng, n=32, t=20, v=1000, d=128):
    return normal(rng, v, d), rng.integers(0, v, (n, t)), normal(rng, n, t, d)


def temporal_affine_args(rng, n=32, t=20, d=128, m=256):
    return (normal(rng, n, t, d), normal(rng, d, m, scale=d ** -0.5), normal(rng, m),
            normal(rng, n, t, m))


def temporal_softmax_args(rng, n=32, t=16, v=1000):
    return normal(rng, n, t, v), rng.integers(0, v, (n, t)), rng.random((n, t)) > 0.3


def two_layer_args(rng, n=200, d=3072, h=100, c=10):
    return (normal(rng, d, h, scale=d ** -0.5), normal(rng, h, scale=0.1),
            normal(rng, h, c, scale=h ** -0.5), normal(rng, c, scale=0.1),
            normal(rng, n, d), rng.integers(0, c, n), 0.05)


def text(rng, vocab, steps):
    """inputs and targets: Python lists of character indices, targets one step ahead."""
    chars = [int(k) for k in rng.integers(0, vocab, steps + 1)]
    return chars[:-1], chars[1:]


def char_rnn_args(rng, hidden=100, vocab=65, steps=25):
    weights = (normal(rng, hidden, vocab, scale=0.01), normal(rng, hidden, hidden, scale=0.01),
               normal(rng, vocab, hidden, scale=0.01))
    biases = normal(rng, hidden, 1, scale=0.01), normal(rng, vocab, 1, scale=0.01)
    return (*weights, *biases, np.zeros((hidden, 1)), *text(rng, vocab, steps))


def char_lstm_args(rng, hidden=100, vocab=65, steps=25):
    gates = [normal(rng, hidden, hidden + vocab, scale=0.1) for _ in range(4)]
    biases = [normal(rng, hidden, 1, scale=0.1) for _ in range(4)]
    Wy, by = normal(rng, vocab, hidden, scale=0.1), normal(rng, vocab, 1, scale=0.1)
    return (*gates, Wy, *biases, by, np.zeros((hidden, 1)), np.zeros((hidden, 1)),
            *text(rng, vocab, steps))


def fresh(fun):
    """A new function object running fun's code: autodiffgen keeps its generated code with
    the function it differentiates, so each new one starts cold, as run.py's closures do,
    and the code traced for a model is freed with it."""
    copy = types.FunctionType(fun.__code__, fun.__globals__, fun.__name__, fun.__defaults__,
                              fun.__closure__)
    copy.__qualname__, copy.__module__ = fun.__qualname__, fun.__module__
    return copy


# ---- the models -----------------------------------------------------------------------------
def layer(name, shapes, loss, by_hand, make_args, argnums, tiny, jax=None):
    """A model as a run.py Workload: its loss (for every xp: the user's code is NumPy's),
    its baseline, and JAX's loss unless the model is one JAX skips."""
    if jax is None and name not in JAX_SKIPS:
        jax = jax_same(loss.__name__)
    by_hand.__signature__ = inspect.signature(loss)  # run.check names gradients by it
    return Workload(name, shapes, lambda xp: fresh(loss), by_hand, None, make_args, argnums,
                    {"full": {}, "tiny": tiny}, RTOL, jax_loss=jax)


SEQ_TINY = {"n": 2, "t": 3, "d": 4, "h": 5}
MODELS = [
    layer("affine", "x 64x3x16x16 as 64 rows of 768, w 768x256", lm.affine_loss,
          by_hand_layer(lm.affine_forward, lm.affine_backward), affine_args, (0, 1, 2),
          {"n": 3, "shape": (2, 3), "m": 4}),
    layer("relu", "x 128x1024", lm.relu_loss, by_hand_layer(lm.relu_forward, lm.relu_backward),
          relu_args, (0,), {"n": 3, "d": 4}),
    layer("batchnorm", "x 128x512, train mode, dict cache", lm.batchnorm_loss,
          by_hand_layer(lm.batchnorm_forward, lm.batchnorm_backward, 3), batchnorm_args,
          (0, 1, 2), {"n": 5, "d": 3}),
    layer("conv", "x 2x3x8x8, w 4x3x3x3, pad 1: 512 loop steps", lm.conv_loss,
          by_hand_layer(lm.conv_forward_naive, lm.conv_backward_naive, 3), conv_args,
          (0, 1, 2), {"n": 1, "c": 2, "size": 3, "f": 2}),
    layer("max_pool", "x 2x4x16x16, 2x2 stride 2: 512 loop steps", lm.max_pool_loss,
          by_hand_layer(lm.max_pool_forward_naive, lm.max_pool_backward_naive), max_pool_args,
          (0,), {"n": 1, "c": 2, "size": 4}),
    layer("svm", "scores 512x100", lm.svm_loss, by_hand_loss(lm.svm_forward, lm.svm_backward),
          scores_args, (0,), {"n": 6, "c": 4}),
    layer("softmax", "scores 512x100", lm.softmax_loss,
          by_hand_loss(lm.softmax_forward, lm.softmax_backward), scores_args, (0,),
          {"n": 6, "c": 4}),
    layer("rnn_step", "N 64, D 128, H 128", lm.rnn_step_loss,
          by_hand_layer(lm.rnn_step_forward, lm.rnn_step_backward), rnn_step_args,
          (0, 1, 2, 3, 4), {"n": 3, "d": 4, "h": 5}),
    layer("rnn", "N 16, T 30, D 64, H 128", lm.rnn_loss,
          by_hand_layer(lm.rnn_forward, lm.rnn_backward), sequence_args, (0, 1, 2, 3, 4),
          SEQ_TINY),
    layer("word_embedding", "x 32x20 of 1000 words, W 1000x128", lm.word_embedding_loss,
          word_embedding_by_hand, word_embedding_args, (0,), {"n": 3, "t": 4, "v": 5, "d": 2}),
    layer("temporal_affine", "x 32x20x128, w 128x256", lm.temporal_affine_loss,
          by_hand_layer(lm.temporal_affine_forward, lm.temporal_affine_backward),
          temporal_affine_args, (0, 1, 2), {"n": 2, "t": 3, "d": 4, "m": 5}),
    layer("temporal_softmax", "x 32x16x1000, mask", lm.temporal_softmax_loss,
          by_hand_loss(lm.temporal_softmax_forward, lm.temporal_softmax_backward),
          temporal_softmax_args, (0,), {"n": 2, "t": 3, "v": 5}),
    layer("lstm_step", "N 64, D 128, H 128", lm.lstm_step_loss, lstm_step_by_hand,
          lstm_step_args, (0, 1, 2, 3, 4, 5), {"n": 3, "d": 4, "h": 5}),
    layer("lstm", "N 16, T 30, D 64, H 128", lm.lstm_loss,
          by_hand_layer(lm.lstm_forward, lm.lstm_backward), lstm_args, (0, 1, 2, 3, 4),
          SEQ_TINY),
    layer("two_layer", "X 200x3072, hidden 100, 10 classes", lm.two_layer_loss,
          two_layer_by_hand, two_layer_args, (0, 1, 2, 3), {"n": 4, "d": 6, "h": 5, "c": 3}),
    layer("char_rnn", "hidden 100, vocabulary 65, 25 steps", lm.char_rnn_loss,
          char_rnn_by_hand, char_rnn_args, (0, 1, 2, 3, 4),
          {"hidden": 5, "vocab": 4, "steps": 3}, jax=char_rnn_jax),
    layer("char_lstm", "hidden 100, vocabulary 65, 25 steps", lm.char_lstm_loss,
          char_lstm_by_hand, char_lstm_args, tuple(range(10)),
          {"hidden": 5, "vocab": 4, "steps": 3}, jax=char_lstm_jax),
]


# ---- main -----------------------------------------------------------------------------------
def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", action="append", metavar="NAME", choices=[m.name for m in MODELS],
                   help="this model only (repeatable): " + ", ".join(m.name for m in MODELS))
    p.add_argument("--quick", action="store_true", help="a smoke run: 3 rounds of short samples")
    p.add_argument("--rounds", type=int, help="interleaved rounds (default 21, quick 3)")
    p.add_argument("--sample", type=float,
                   help="seconds per timed sample (default 0.1, quick 0.01)")
    p.add_argument("--jax", choices=("auto", "off"), default="auto",
                   help="time JAX when it is installed (auto, the default) or not (off)")
    p.add_argument("--size", choices=("full", "tiny"), default="full",
                   help="the models' sizes: full (the benchmark) or tiny (the tests'; "
                        "the table's shapes still name the full ones)")
    return p.parse_args(argv)


def summary(results, jax_on):
    """The results as a Markdown table: the first call and the steady-state ratios."""
    head = ("model", "shapes", "hand-written", "autodiffgen first call", "autodiffgen x hand",
            "JAX jit x hand")
    lines = ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * 4]
    for w, r in results:
        if r["aborted"]:
            lines.append(f"| {w.name} | {w.title} | | | {r['aborted']} | |")
            continue
        base = r["median"][run.BASELINE]
        if "JAX jit" in r["median"]:
            jax = f"{r['median']['JAX jit'] / base:.2f}x"
        else:
            jax = ("dropped" if "JAX jit" in r["dropped"] else
                   f"skipped ({JAX_SKIPS[w.name]})" if w.name in JAX_SKIPS else
                   "not installed" if not jax_on else "—")
        lines.append(f"| {w.name} | {w.title} | {run.fmt_time(base)} | "
                     f"{r['first']['autodiffgen']:.2f} s | "
                     f"{r['median']['autodiffgen'] / base:.2f}x | {jax} |")
    return "\n".join(lines)


def main(argv=None):
    opts = parse(argv)
    rounds = opts.rounds or (3 if opts.quick else 21)
    sample = opts.sample or (0.01 if opts.quick else 0.1)
    jax_on = opts.jax == "auto" and "jax" in run.available_peers()
    notes = run.setup_peers(["jax"] if jax_on else [])
    print(f"layer-style models: {rounds} rounds x ~{sample} s samples, one thread, "
          f"{opts.size} sizes; " + "; ".join(notes or ["JAX off"]))
    results = []
    for w in MODELS:
        if opts.only and w.name not in opts.only:
            continue
        contenders = [run.HandWritten(), run.Autodiffgen()]
        if jax_on and w.jax_loss:
            contenders.append(run.Jax())
        results.append((w, run.run_workload(w, contenders, rounds, sample, print, size=opts.size)))
    print("\n" + summary(results, jax_on))
    return 1 if any(r["aborted"] for _, r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
