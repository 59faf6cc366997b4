"""Train a small classifier (an MLP, 20-64-64-4) with gradients from autodiffgen.

    python examples/mlp.py               # train: the loss goes down, then the accuracy
    autodiffgen emit examples/mlp.py     # the generated forward+backward code of `loss`

The first call of `loss` traces it and compiles the generated code; every later call
runs only that code, the short last batch of each epoch included (see
`loss.cache_info()` at the end: one miss).
"""

import itertools

import numpy as np

from autodiffgen import value_and_grad

SIZES = (20, 64, 64, 4)  # input features, two hidden layers, classes
BATCH = 128


def init_params(rng, sizes=SIZES):
    """W1, b1, W2, b2, ...: scaled so that tanh starts in its linear range."""
    params = {}
    for i, (n_in, n_out) in enumerate(itertools.pairwise(sizes), start=1):
        params[f"W{i}"] = rng.normal(0.0, 1.0 / np.sqrt(n_in), (n_in, n_out))
        params[f"b{i}"] = np.zeros(n_out)
    return params


def predict(params, x):
    """Logits: tanh hidden layers, then a linear output layer."""
    h = np.tanh(x @ params["W1"] + params["b1"])
    h = np.tanh(h @ params["W2"] + params["b2"])
    return h @ params["W3"] + params["b3"]


# Example shapes and dtypes, so that `autodiffgen emit` can trace `loss` without data.
@value_and_grad(argnums=0, example={
    "params": {"W1": "f64[20,64]", "b1": "f64[64]", "W2": "f64[64,64]", "b2": "f64[64]",
               "W3": "f64[64,4]", "b3": "f64[4]"},
    "x": "f64[128,20]",
    "y": "i64[128]<4",  # class labels in [0, 4)
})
def loss(params, x, y):
    """Mean softmax cross-entropy of the logits against integer labels y."""
    logits = predict(params, x)
    shifted = logits - logits.max(axis=1, keepdims=True)  # so exp cannot overflow
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return -log_probs[np.arange(len(y)), y].mean()


def make_blobs(rng, n, centers):
    """n points around each class center (Gaussian noise), shuffled."""
    y = rng.integers(0, len(centers), n)
    x = centers[y] + rng.normal(0.0, 1.0, (n, centers.shape[1]))
    return x, y


def accuracy(params, x, y):
    return np.mean(predict(params, x).argmax(axis=1) == y)


def train(epochs=25, lr=0.1, print_every=50, seed=0):
    """Plain SGD, epoch by epoch over shuffled data in batches of BATCH rows, the last
    batch of each epoch shorter (37 rows); prints the mean loss of every `print_every`
    steps."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(0.0, 0.6, (SIZES[-1], SIZES[0]))
    x_train, y_train = make_blobs(rng, 15 * BATCH + 37, centers)
    x_test, y_test = make_blobs(rng, 1024, centers)
    params = init_params(rng)
    losses = []
    for _ in range(epochs):
        order = rng.permutation(len(x_train))
        for start in range(0, len(order), BATCH):
            batch = order[start:start + BATCH]
            value, grads = loss(params, x_train[batch], y_train[batch])
            params = {k: params[k] - lr * grads[k] for k in params}
            losses.append(value)
            if len(losses) % print_every == 0:
                print(f"step {len(losses):4d}  loss {np.mean(losses[-print_every:]):.4f}")
    print(f"test accuracy {accuracy(params, x_test, y_test):.3f}")
    return params


if __name__ == "__main__":
    train()
    # traced and compiled once, then reused: the 37-row batches have an entry of their
    # own, served by the same generated function (it reads the batch size)
    print(loss.cache_info())
