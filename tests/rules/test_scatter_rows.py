"""The gradient of picking whole rows by an integer array (an embedding, `W[x]`): the
generated code's `_scatter_add` sums the picked rows' cotangents by one np.bincount
when there are enough of them (generated_helpers.py), by np.add.at below that. Both
paths are checked against eager np.add.at, the tape and finite differences, with
repeated and negative rows, several row shapes, float32 kept, and one cached function
serving indices that repeat and indices that do not."""

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen.generated_helpers import _scatter_add
from autodiffgen.testing import check_grads

RNG = np.random.default_rng(30)


def embedding_loss(W, x, dout):
    return np.sum(W[x] * dout)


def by_add_at(x, dout, shape):
    out = np.zeros(shape, dout.dtype)
    np.add.at(out, x, dout)
    return out


@pytest.mark.parametrize("rows, index_shape, row_shape", [
    (1000, (32, 20), (128,)),   # an embedding: 81920 elements, bincount
    (50, (300,), (4, 3)),       # rows that are matrices, every row picked often
    (7, (5,), (3,)),            # 15 elements: np.add.at
    (40, (64,), ()),            # a vector's elements
])
def test_row_scatter_matches_add_at_the_tape_and_finite_differences(rows, index_shape,
                                                                    row_shape):
    W = RNG.standard_normal((rows,) + row_shape)
    x = RNG.integers(-rows, rows, index_shape)  # negative rows count from the end
    dout = RNG.standard_normal(index_shape + row_shape)
    value, g = check_grads(embedding_loss, W, x, dout, fwd=False, max_fd_elements=16)
    np.testing.assert_allclose(g, by_add_at(x, dout, W.shape), rtol=1e-12, atol=1e-12)
    assert value == pytest.approx(embedding_loss(W, x, dout))


def test_float32_rows_keep_their_dtype_through_add_at():
    W = RNG.standard_normal((100, 16)).astype(np.float32)
    x = RNG.integers(0, 100, (40, 8))
    dout = RNG.standard_normal((40, 8, 16)).astype(np.float32)
    g = ad.grad(embedding_loss)(W, x, dout)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, by_add_at(x, dout, W.shape), rtol=1e-5, atol=1e-5)


def test_one_cached_function_serves_repeated_and_distinct_rows():
    f = ad.grad(embedding_loss)
    W = RNG.standard_normal((64, 32))
    dout = RNG.standard_normal((16, 32))
    for x in (np.zeros(16, np.int64), np.arange(16), np.arange(16)[::-1] - 64,
              RNG.integers(0, 64, 16)):
        np.testing.assert_allclose(f(W, x, dout), by_add_at(x, dout, W.shape),
                                   rtol=1e-12, atol=1e-12)
    assert f.cache_info().misses == 1


@pytest.mark.parametrize("index", [
    (np.array([0, 2, 2, 1]),),                               # one array in a tuple
    (np.array([0, 2, 2, 1]), np.array([1, 0, 0, 1])),        # elements, not rows
    (slice(None), np.array([0, 0, 1, 1])),                   # columns
])
def test_the_helper_agrees_with_add_at_on_rows_and_on_other_indices(index):
    shape = (3, 2)
    g = RNG.standard_normal(np.zeros(shape)[index].shape)
    big = np.broadcast_to(g, (100,) + g.shape) if len(index) == 1 else None
    want = np.zeros(shape)
    np.add.at(want, index, g)
    np.testing.assert_allclose(_scatter_add(g, index, shape), want, rtol=1e-12)
    if big is not None:  # enough rows for bincount: the same sums
        rows = np.tile(index[0], 100)
        flat = np.ascontiguousarray(big).reshape(-1, 2)
        want = np.zeros(shape)
        np.add.at(want, rows, flat)
        np.testing.assert_allclose(_scatter_add(flat, (rows,), shape), want, rtol=1e-12)


def test_the_bincount_path_reads_but_never_writes_its_arguments():
    g = RNG.standard_normal((300, 4))
    rows = RNG.integers(-10, 10, 300)
    kept = g.copy(), rows.copy()
    _scatter_add(g, (rows,), (10, 4))
    np.testing.assert_array_equal(g, kept[0])
    np.testing.assert_array_equal(rows, kept[1])


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.int32, np.uint64])
def test_narrow_integer_rows_are_summed_without_wrapping(dtype):
    """Offsets rows * width leave a narrow index type's range: they are taken in np.intp."""
    rows = np.array([3, 100, 7, 7] + ([-1] if np.dtype(dtype).kind == "i" else []), dtype)
    g = RNG.standard_normal((rows.size, 128))
    want = np.zeros((200, 128))
    np.add.at(want, rows, g)
    np.testing.assert_allclose(_scatter_add(g, (rows,), (200, 128)), want, rtol=1e-12)
