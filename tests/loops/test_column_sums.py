"""A kept loop whose backward adds an outer product of two columns at every step
(loops/hoist.py, `_column_product`): a recurrent net on one example, its state a column
(H, 1), as min-char-rnn writes it (`dWhh += np.dot(dh_raw, hs[t - 1].T)`). Each step's
column is saved and the sum is one product after the loop, `gs.T @ S`, in place of an
outer product and an add per step. Values against eager NumPy, gradients against the tape
and central differences, float32 kept, a 0-d bias broadcast, the cached code serving new
values and another number of steps."""

import numpy as np
import pytest
from test_invariants import loops_kept  # noqa: F401  (autouse: the loops kept, passes on)

import autodiffgen as ad
from autodiffgen.testing import check_grads

RNG = np.random.default_rng(2929)


def column_rnn(W, U, b, h0, xs):
    """h = tanh(W x_t + U h + b) over the columns x_t of xs (T, D, 1)."""
    h, total = h0, 0.0
    for t in range(xs.shape[0]):
        h = np.tanh(np.dot(W, xs[t]) + np.dot(U, h) + b)
        total = total + np.sum(h * h * (t + 1))
    return total


def args_for(dtype=np.float64, steps=6, hidden=5, inputs=3, bias=(5, 1)):
    return tuple(a.astype(dtype) for a in (
        RNG.normal(size=(hidden, inputs)) * 0.5, RNG.normal(size=(hidden, hidden)) * 0.5,
        RNG.normal(size=bias), RNG.normal(size=(hidden, 1)),
        RNG.normal(size=(steps, inputs, 1))))


def loop_lines(source):
    """The backward loop's lines (code only, comments dropped)."""
    backward = source.splitlines()
    start = next(k for k, line in enumerate(backward) if "# backward of the loop" in line)
    depth = len(backward[start]) - len(backward[start].lstrip())
    body = []
    for line in backward[start + 1:]:
        if line.strip() and len(line) - len(line.lstrip()) <= depth:
            break
        body.append(line.split("  # ")[0].strip())
    return body


def eager_value(W, U, b, h0, xs):
    h, total = h0, 0.0
    for t in range(xs.shape[0]):
        h = np.tanh(W @ xs[t] + U @ h + b)
        total += np.sum(h * h * (t + 1))
    return total


def test_the_outer_products_are_one_product_after_the_loop():
    args = args_for()
    source = ad.value_and_grad(column_rnn, argnums=(0, 1, 2, 3)).source(*args)
    body = loop_lines(source)
    assert body and not any(".T)" in line for line in body), body  # no outer product per step
    assert not any(line.startswith(("g_W +=", "g_U +=")) for line in body), body
    after = source.split("# backward")[-1]
    assert after.count(" @ ") >= 2  # g_W and g_U: one product each, over every step


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gradients_agree_with_the_tape_and_finite_differences(dtype):
    args = args_for(dtype)
    value, grads = check_grads(column_rnn, *args, argnums=(0, 1, 2, 3),
                               rtol=1e-4 if dtype == np.float32 else 1e-6,
                               atol=1e-4 if dtype == np.float32 else 1e-7,
                               fd=dtype == np.float64)
    np.testing.assert_allclose(value, eager_value(*args), rtol=1e-5 if dtype == np.float32
                               else 1e-12)
    assert all(g.dtype == dtype and g.shape == a.shape for g, a in zip(grads, args))


def test_a_zero_d_bias_broadcast_into_every_column():
    args = args_for(bias=())
    _, grads = check_grads(column_rnn, *args, argnums=(0, 1, 2))
    assert grads[2].shape == ()


def test_the_cached_code_serves_new_values_and_another_number_of_steps():
    f = ad.value_and_grad(column_rnn, argnums=(0, 1, 2, 3))
    for steps in (6, 6, 9):
        args = args_for(steps=steps)
        value, grads = f(*args)
        want_value, want_grads = ad.tape.value_and_grad(column_rnn, (0, 1, 2, 3))(*args)
        np.testing.assert_allclose(value, want_value, rtol=1e-12)
        for g, w in zip(grads, want_grads):
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
