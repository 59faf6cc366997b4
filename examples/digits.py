"""Train an MLP (64-64-10) on scikit-learn's handwritten digits with one compiled Adam step.

    pip install -e '.[examples]'        # scikit-learn (the data ships inside it), matplotlib
    python examples/digits.py           # train: a progress bar (a line an epoch or so in
                                        # a log), the test accuracy, a plot
    autodiffgen emit examples/digits.py # the generated training step: forward, backward, Adam

`step(params, state, x, y)` runs one generated function that computes the loss, its
gradient and Adam's update, and writes the new parameters and Adam's moments into the
arrays of `params` and `state` (autodiffgen.optim). The loss curve goes to
digits_loss.png when matplotlib is installed.
"""

import itertools
import sys
import time

import numpy as np

from autodiffgen import nn
from autodiffgen.optim import Adam, compile_step

SIZES = (64, 64, 10)  # 8x8 pixels, one hidden layer, ten digits
BATCH = 64
EPOCHS = 30


def init_params(rng, sizes=SIZES):
    """W1, b1, W2, b2: He-scaled weights for the ReLU layer, zero biases."""
    params = {}
    for i, (n_in, n_out) in enumerate(itertools.pairwise(sizes), start=1):
        params[f"W{i}"] = rng.normal(0.0, np.sqrt(2.0 / n_in), (n_in, n_out))
        params[f"b{i}"] = np.zeros(n_out)
    return params


def predict(params, x):
    """Logits: a ReLU hidden layer, then a linear output layer."""
    h = nn.relu(x @ params["W1"] + params["b1"])
    return h @ params["W2"] + params["b2"]


def loss(params, x, y):
    """Mean softmax cross-entropy of the logits against the integer labels y."""
    return np.mean(nn.softmax_cross_entropy(predict(params, x), y))


# One compiled step: forward, backward and Adam's update. The example shapes let
# `autodiffgen emit` trace it without data.
step = compile_step(loss, Adam(lr=3e-3), example={
    "params": {"W1": "f64[64,64]", "b1": "f64[64]", "W2": "f64[64,10]", "b2": "f64[10]"},
    "x": "f64[64,64]",
    "y": "i64[64]<10",  # digit labels in [0, 10)
})


def load_digits_split(rng, test_fraction=0.2):
    """(x_train, y_train, x_test, y_test): pixels scaled to [0, 1], a random split."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        sys.exit("examples/digits.py needs scikit-learn: pip install -e '.[examples]'")
    digits = load_digits()
    x, y = digits.data / 16.0, digits.target.astype(np.int64)
    order = rng.permutation(len(x))
    n_test = int(len(x) * test_fraction)
    test, train = order[:n_test], order[n_test:]
    return x[train], y[train], x[test], y[test]


def progress(epoch, epochs, value, width=30):
    """In a terminal, one line redrawn: [#######.......] epoch 12/30  loss 0.1234. Into a
    file or a pipe, a plain line for the first epoch and every tenth of the run: a log
    reads line by line."""
    text = f"epoch {epoch:2d}/{epochs}  loss {value:.4f}"
    if not sys.stdout.isatty():
        if epoch == 1 or epoch % max(1, epochs // 10) == 0 or epoch == epochs:
            print(text, flush=True)
        return
    done = width * epoch // epochs
    end = "\n" if epoch == epochs else ""
    sys.stdout.write(f"\r[{'#' * done}{'.' * (width - done)}] {text}{end}")
    sys.stdout.flush()


def accuracy(params, x, y):
    return float(np.mean(predict(params, x).argmax(axis=1) == y))


def train(epochs=EPOCHS, seed=0):
    rng = np.random.default_rng(seed)
    x_train, y_train, x_test, y_test = load_digits_split(rng)
    params = init_params(rng)
    state = step.init(params)
    curve = []
    for epoch in range(1, epochs + 1):
        order = rng.permutation(len(x_train))
        values = [step(params, state, x_train[b], y_train[b])  # params, state: in place
                  for b in np.array_split(order, range(BATCH, len(order), BATCH))]
        curve.append(float(np.mean(values)))
        progress(epoch, epochs, curve[-1])
    return params, curve, accuracy(params, x_test, y_test)


def plot(curve, path="digits_loss.png"):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (pip install -e '.[examples]')")
        return
    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.plot(range(1, len(curve) + 1), curve, marker=".")
    ax.set(xlabel="epoch", ylabel="mean training loss", yscale="log",
           title="MLP on digits, compiled Adam step")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"loss curve saved to {path}")


if __name__ == "__main__":
    start = time.perf_counter()
    params, curve, test_accuracy = train()
    print(f"test accuracy {test_accuracy:.3f}  ({time.perf_counter() - start:.1f} s)")
    # one trace per batch size: the full batches and the epoch's shorter last one
    print(step.cache_info())
    plot(curve)
