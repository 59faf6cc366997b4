"""The models whose generated code is kept as reviewed golden files (tests/golden/)."""

import itertools

import numpy as np


def mlp_loss(params, x, y):
    """784-256-256-10 MLP, relu, softmax cross-entropy on integer labels."""
    h = np.maximum(x @ params["W1"] + params["b1"], 0.0)
    h = np.maximum(h @ params["W2"] + params["b2"], 0.0)
    logits = h @ params["W3"] + params["b3"]
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return -log_probs[np.arange(len(y)), y].mean()


def mlp_args(batch=128, sizes=(784, 256, 256, 10), dtype=np.float32):
    rng = np.random.default_rng(0)
    params = {}
    for i, (n_in, n_out) in enumerate(itertools.pairwise(sizes), start=1):
        params[f"W{i}"] = (rng.normal(size=(n_in, n_out)) / np.sqrt(n_in)).astype(dtype)
        params[f"b{i}"] = np.zeros(n_out, dtype)
    x = rng.normal(size=(batch, sizes[0])).astype(dtype)
    y = rng.integers(0, sizes[-1], batch)
    return params, x, y


def rnn_loss(params, xs, target):
    """A tanh RNN unrolled over the time steps of xs; squared error of the last state."""
    h = np.zeros((xs.shape[1], params["Wh"].shape[0]), xs.dtype)
    for t in range(xs.shape[0]):
        h = np.tanh(xs[t] @ params["Wx"] + h @ params["Wh"] + params["b"])
    return np.mean((h - target) ** 2)


def rnn_args(steps=4, batch=2, n_in=3, hidden=5, dtype=np.float32):
    rng = np.random.default_rng(1)
    params = {"Wx": rng.normal(size=(n_in, hidden)).astype(dtype) / 2,
              "Wh": rng.normal(size=(hidden, hidden)).astype(dtype) / 2,
              "b": np.zeros(hidden, dtype)}
    xs = rng.normal(size=(steps, batch, n_in)).astype(dtype)
    target = rng.normal(size=(batch, hidden)).astype(dtype)
    return params, xs, target


def hessian_fn(x):
    """A scalar function of a vector whose Hessian is dense: tanh energy plus neighbours."""
    return np.sum(np.tanh(x) ** 2) + np.sum(x[:-1] * x[1:])


def hessian_args():
    return (np.random.default_rng(2).normal(size=4),)


def jvp_fn(W, x):
    """A softplus layer: the JVP pushes tangents of both the weights and the input."""
    return np.log1p(np.exp(W @ x))


def jvp_args():
    rng = np.random.default_rng(3)
    W, x = rng.normal(size=(3, 4)), rng.normal(size=4)
    return (W, x), (np.ones_like(W), np.ones_like(x))


def lstm_cell(params, x, h, c):
    """One LSTM cell step (input, forget, output gates and the candidate), as in the
    textbook: the four gates from one matmul each of x and h, split along the columns."""
    z = x @ params["Wx"] + h @ params["Wh"] + params["b"]
    n = h.shape[1]
    i = 1.0 / (1.0 + np.exp(-z[:, :n]))
    f = 1.0 / (1.0 + np.exp(-z[:, n:2 * n]))
    o = 1.0 / (1.0 + np.exp(-z[:, 2 * n:3 * n]))
    g = np.tanh(z[:, 3 * n:])
    c_new = f * c + i * g
    h_new = o * np.tanh(c_new)
    return np.sum(h_new ** 2) + np.sum(c_new ** 2)


def lstm_args(batch=4, n_in=3, hidden=5, dtype=np.float64):
    rng = np.random.default_rng(4)
    params = {"Wx": rng.normal(size=(n_in, 4 * hidden)).astype(dtype) / 2,
              "Wh": rng.normal(size=(hidden, 4 * hidden)).astype(dtype) / 2,
              "b": np.zeros(4 * hidden, dtype)}
    x = rng.normal(size=(batch, n_in)).astype(dtype)
    h = rng.normal(size=(batch, hidden)).astype(dtype)
    c = rng.normal(size=(batch, hidden)).astype(dtype)
    return params, x, h, c


def step_loss(params, x, y):
    """A 64-32-10 MLP with a ReLU and softmax cross-entropy: the loss of the compiled
    training step (compile_step with Adam), as examples/digits.py trains it."""
    h = np.maximum(x @ params["W1"] + params["b1"], 0.0)
    logits = h @ params["W2"] + params["b2"]
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return -log_probs[np.arange(len(y)), y].mean()


def step_args(batch=16, sizes=(64, 32, 10)):
    rng = np.random.default_rng(5)
    params = {}
    for i, (n_in, n_out) in enumerate(itertools.pairwise(sizes), start=1):
        params[f"W{i}"] = rng.normal(0.0, np.sqrt(2.0 / n_in), (n_in, n_out))
        params[f"b{i}"] = np.zeros(n_out)
    x = rng.normal(size=(batch, sizes[0]))
    y = rng.integers(0, sizes[-1], batch)
    return params, x, y
