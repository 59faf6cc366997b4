"""Activations and losses in plain NumPy, written in forms that stay finite (as jax.nn and
optax.losses; the same names where they exist).

They are ordinary NumPy functions: called on arrays they compute with NumPy, and inside a
differentiated function they trace into the generated code line by line, so the code you
read there is the code below. Each one is written so that neither it nor its derivative
overflows at extreme inputs (logits of +-1000):

- logsumexp, log_softmax, softmax subtract the maximum first (held as a constant with
  stop_gradient: the derivative is the same, and no backward flows through the max);
- sigmoid is 0.5 * (1 + tanh(x / 2)) (no exp of a large number; its derivative is finite);
- softplus and the binary cross-entropy use np.logaddexp(0, x) = log(1 + exp(x)), whose
  rule is exp(x - logaddexp(0, x)), at most 1.

Losses return one value per example (as optax), so `.mean()` is yours to write; `mse` is
the exception, a mean, as its name says. Float32 inputs give float32 outputs.
"""

import numpy as np

from .custom import stop_gradient

_GELU_C = float(np.sqrt(2.0 / np.pi))


# ---- activations -----------------------------------------------------------------------
def relu(x):
    """max(x, 0) elementwise (derivative 0 at x = 0, as jax.nn.relu)."""
    return np.where(x > 0, x, 0.0)


def sigmoid(x):
    """1 / (1 + exp(-x)), as 0.5 * (1 + tanh(x / 2)): the same function, never exp(1000)."""
    return 0.5 * (1 + np.tanh(0.5 * x))


def softplus(x):
    """log(1 + exp(x)) as logaddexp(0, x): finite for every x (about x for x large)."""
    return np.logaddexp(0.0, x)


def log_sigmoid(x):
    """log(sigmoid(x)) = -softplus(-x), finite where sigmoid(x) underflows to 0."""
    return -softplus(-x)


def gelu(x):
    """The tanh approximation of GELU (jax.nn.gelu's default, approximate=True):
    0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x**3)))."""
    return 0.5 * x * (1 + np.tanh(_GELU_C * (x + 0.044715 * x * x * x)))


def logsumexp(x, axis=-1, keepdims=False):
    """log(sum(exp(x), axis)), computed as m + log(sum(exp(x - m))) with m the maximum."""
    m = stop_gradient(np.max(x, axis=axis, keepdims=True))
    out = m + np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))
    return out if keepdims else np.squeeze(out, axis=axis)


def log_softmax(x, axis=-1):
    """x - logsumexp(x): log-probabilities, finite for logits of any size."""
    shifted = x - stop_gradient(np.max(x, axis=axis, keepdims=True))
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def softmax(x, axis=-1):
    """exp(x) / sum(exp(x)) along `axis`, with the maximum subtracted first."""
    e = np.exp(x - stop_gradient(np.max(x, axis=axis, keepdims=True)))
    return e / np.sum(e, axis=axis, keepdims=True)


# ---- losses ----------------------------------------------------------------------------
def softmax_cross_entropy(logits, labels):
    """-log softmax(logits)[label] for each row: logits (n, classes), integer labels (n,);
    one loss per row (optax.losses.softmax_cross_entropy_with_integer_labels)."""
    log_p = log_softmax(logits, axis=-1)
    return -log_p[np.arange(len(labels)), labels]


def sigmoid_binary_cross_entropy(logits, labels):
    """-(y log sigmoid(z) + (1 - y) log(1 - sigmoid(z))) elementwise, as
    softplus(z) - y z (optax.losses.sigmoid_binary_cross_entropy); labels in [0, 1]."""
    return softplus(logits) - labels * logits


def mse(predictions, targets):
    """The mean of (predictions - targets) ** 2 over every element: one number."""
    err = predictions - targets
    return np.mean(err * err)


def squared_error(predictions, targets):
    """(predictions - targets) ** 2 elementwise (optax.losses.squared_error)."""
    err = predictions - targets
    return err * err


def huber_loss(predictions, targets, delta=1.0):
    """0.5 e**2 where |e| <= delta, else delta (|e| - 0.5 delta), elementwise, e the error
    (optax.losses.huber_loss)."""
    abs_err = np.abs(predictions - targets)
    quadratic = np.minimum(abs_err, delta)
    return 0.5 * quadratic * quadratic + delta * (abs_err - quadratic)
