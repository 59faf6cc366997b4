"""Mutation: x[i] = v, x[mask] += v, h += v and views, as NumPy would compute them.

Every differentiable case is checked by check_grads (generated code vs tape vs finite
differences, reverse and forward mode), against plain NumPy's value, and for the caller's
arrays being left as they were. The error cases name the problem and the user's line.
"""

import numpy as np
import pytest

import autodiffgen
from autodiffgen import hessian, jvp, tape, value_and_grad
from autodiffgen.testing import check_grads

with open(__file__) as _source:
    HERE = _source.read().splitlines()


def line_of(marker):
    """'test_mutation.py:N' for the line that carries `# <marker>`."""
    n = next(i for i, text in enumerate(HERE, 1) if text.rstrip().endswith(f"# {marker}"))
    return f"test_mutation.py:{n}"


def arr(*shape, dtype=np.float64, seed=0):
    return np.random.default_rng(seed).uniform(0.5, 1.5, shape).astype(dtype)


def copies(args):
    return [np.copy(a) if isinstance(a, np.ndarray) else a for a in args]


def check(f, *args, argnums=0, **tolerances):
    """check_grads, plus: the value is plain NumPy's, and no argument was written into."""
    before = copies(args)
    value, grads = check_grads(f, *args, argnums=argnums, **tolerances)
    for arg, old in zip(args, before):
        np.testing.assert_array_equal(arg, old)
    np.testing.assert_allclose(value, f(*copies(args)), rtol=1e-6)
    return value, grads


# ---- x[index] = v for every kind of index -------------------------------------------------
def set_int(x, v):
    x[1] = v
    return np.sum(np.sin(x) * x)


def set_slice(x, v):
    x[1:3] = v
    return np.sum(x * x * x)


def set_negative(x, v):
    x[-1, -2] = v
    return np.sum(np.exp(x) * x)


def set_ellipsis(x, v):
    x[..., 0] = v
    return np.sum(x * np.cos(x))


def set_int_array(x, v):
    x[[2, 0]] = v
    return np.sum(x ** 3)


def set_int_arrays(x, v):
    x[np.array([1, 0]), np.array([2, 2])] = v
    return np.sum(x * x * np.arange(x.size).reshape(x.shape))


def set_repeated(x, v):  # NumPy keeps one write per element: the last (-3 is 0 here)
    x[[0, 2, 0, -3]] = v
    return np.sum(x * x * np.arange(1.0, 3.0))


def set_traced_index(x, v, idx):
    x[idx] = v
    return np.sum(x ** 2 * np.arange(1.0, x.shape[0] + 1.0)[:, None])


def set_constant_mask(x, v):
    x[np.arange(x.shape[0]) % 2 == 0] = v
    return np.sum(np.tanh(x) * x)


def set_traced_mask(x, v):
    x[x > 1.0] = v
    return np.sum(x * x)


def set_broadcast(x, v):
    x[:, 1:] = v
    return np.sum(x * x * x)


def set_zero_d(x, v):
    y = x[...]  # a 0-d array (also of the NumPy scalar that finite differences pass)
    y[()] = v * 2.0
    y[...] += v
    return y * y


def set_float32(x, v):
    x[1] = v  # v (float64) is cast to x's float32, as NumPy does
    x *= 2.0
    return np.sum(x * x)


SHAPE_CASES = [  # (function, make arguments, argnums)
    (set_int, lambda: (arr(3, 4), arr(4, seed=1)), (0, 1)),
    (set_int, lambda: (arr(5), 0.3), (0, 1)),
    (set_slice, lambda: (arr(4, 3), arr(2, 3, seed=1)), (0, 1)),
    (set_slice, lambda: (arr(5, 2, 2), arr(2, 1, seed=1)), (0, 1)),
    (set_negative, lambda: (arr(3, 4), 0.7), (0, 1)),
    (set_ellipsis, lambda: (arr(2, 3, 4), arr(2, 3, seed=1)), (0, 1)),
    (set_ellipsis, lambda: (arr(4), arr(seed=1)), (0, 1)),
    (set_int_array, lambda: (arr(3, 4), arr(2, 4, seed=1)), (0, 1)),
    (set_int_arrays, lambda: (arr(2, 3), arr(2, seed=1)), (0, 1)),
    (set_repeated, lambda: (arr(3, 2), arr(4, 2, seed=1)), (0, 1)),
    (set_repeated, lambda: (arr(3, 2), arr(2, seed=1)), (0, 1)),
    (set_traced_index, lambda: (arr(3, 2), arr(4, 2, seed=1), np.array([0, 2, 0, -1])), (0, 1)),
    (set_constant_mask, lambda: (arr(5, 2), arr(2, seed=1)), (0, 1)),
    (set_traced_mask, lambda: (arr(3, 4), 0.25), (0, 1)),
    (set_broadcast, lambda: (arr(3, 4), arr(3, seed=1)), (0, 1)),
    (set_broadcast, lambda: (arr(3, 4), arr(1, 3, seed=1)), (0, 1)),
    (set_zero_d, lambda: (arr(), arr(seed=1)), (0, 1)),
]


@pytest.mark.parametrize("f, make, argnums", SHAPE_CASES,
                         ids=[f"{c[0].__name__}-{i}" for i, c in enumerate(SHAPE_CASES)])
def test_assignment(f, make, argnums):
    check(f, *make(), argnums=argnums)


def test_float32_gradients_keep_their_dtypes():
    x, v = arr(3, 4, dtype=np.float32), arr(4, seed=1)
    _, (gx, gv) = check(set_float32, x, v, argnums=(0, 1), rtol=1e-3, atol=1e-3)
    assert gx.dtype == np.float32 and gv.dtype == np.float64


def test_repeated_indices_give_the_gradient_to_the_write_numpy_kept():
    x, v = arr(3, 2), arr(4, 2, seed=1)
    _, (gx, gv) = check(set_repeated, x, v, argnums=(0, 1))
    assert np.all(gv[[0, 2]] == 0) and np.all(gv[[1, 3]] != 0)  # x[0] was written 3 times
    assert np.all(gx[[0, 2]] == 0) and np.all(gx[1] != 0)  # rows written over get nothing


# ---- augmented assignment, aliasing and views ------------------------------------------
def add_at_mask(x, v):
    x[x > 1.0] += v
    return np.sum(x * x)


def scale_slice(x):
    x[1:3] *= 2
    return np.sum(x * x * x)


def alias(y, v):
    z = y
    z += v  # y is z: it changes too
    return np.sum(y * y) + np.sum(z)


def operators(x, v, W):
    h = x * 1.0
    h -= v
    h *= v
    h /= 2.0
    h **= 2
    h @= W
    return np.sum(h)


def argument_in_place(x, v):
    x += v  # the Box changes, never the caller's array
    x *= x
    return np.sum(x)


def cast_in_place(x, v):
    h = x * 1.0
    h += v  # v is float64: computed in float64, kept in x's float32 as NumPy's out=h does
    return np.sum(h * h)


def row_view(x, v):
    row = x[1]  # a view: writes into it change x
    row += v
    row *= row
    return np.sum(x * x)


def nested_view(x, v):
    x[0][1:] = v
    return np.sum(x ** 3)


def view_slice_mask(x):
    x[1:3][x[1:3] > 1.0] = 0.5
    return np.sum(x * x)


def overlapping_views(x, v):
    a = x[0:3]
    b = x[1:4]
    c = a[1:]
    c[0] = v  # x[1], a[1] and b[0] all change
    return np.sum(b * b) + np.sum(a * x[2:])


def read_view_after_write(x, v):
    w = x[:, :2]
    x[0] = v  # w sees it
    return np.sum(w * w)


def read_transpose_after_write(x, v):
    t = x.T
    x[0] = v  # so does a transposed view
    return np.sum(t * np.arange(t.size).reshape(t.shape))


def scalar_is_immutable(x):
    s = x[0, 0]  # a NumPy scalar: += rebinds s, t keeps the old value
    t = s
    s += 1.0
    x[1, 1] += s  # an element written through x itself does change x
    return t * s + np.sum(x * x)


def positive_is_a_copy(x):
    y = +x
    y += 1.0
    return np.sum(x * y)


def rnn(h0, W):
    h = np.stack([h0] * 5)
    for t in range(1, 5):
        h[t] = np.tanh(h[t - 1] @ W)
    return np.sum(h ** 2)


def accumulate(x, W):
    acc = (x[0] @ W) * 0.0
    for t in range(x.shape[0]):
        acc += np.tanh(x[t] @ W)
        acc *= 0.9
    return np.sum(acc ** 2)


UPDATE_CASES = [
    (add_at_mask, lambda: (arr(3, 4), 0.4), (0, 1)),
    (add_at_mask, lambda: (arr(6), arr(1, seed=1)), (0, 1)),
    (scale_slice, lambda: (arr(5),), 0),
    (scale_slice, lambda: (arr(4, 3),), 0),
    (alias, lambda: (arr(3, 2), arr(2, seed=1)), (0, 1)),
    (operators, lambda: (arr(2, 3), arr(3, seed=1), arr(3, 3, seed=2)), (0, 1, 2)),
    (argument_in_place, lambda: (arr(4), arr(4, seed=1)), (0, 1)),
    (cast_in_place, lambda: (arr(3, dtype=np.float32), arr(3, seed=1)), (0, 1)),
    (row_view, lambda: (arr(3, 3), arr(3, seed=1)), (0, 1)),
    (nested_view, lambda: (arr(2, 3), arr(2, seed=1)), (0, 1)),
    (view_slice_mask, lambda: (arr(4, 3),), 0),
    (overlapping_views, lambda: (arr(5), 2.5), (0, 1)),
    (read_view_after_write, lambda: (arr(3, 3), arr(3, seed=1)), (0, 1)),
    (read_transpose_after_write, lambda: (arr(2, 3), arr(3, seed=1)), (0, 1)),
    (scalar_is_immutable, lambda: (arr(2, 2),), 0),
    (positive_is_a_copy, lambda: (arr(3),), 0),
    (rnn, lambda: (arr(3), 0.5 * arr(3, 3, seed=1)), (0, 1)),
    (accumulate, lambda: (arr(4, 3), 0.5 * arr(3, 2, seed=1)), (0, 1)),
]


@pytest.mark.parametrize("f, make, argnums", UPDATE_CASES,
                         ids=[f"{c[0].__name__}-{i}" for i, c in enumerate(UPDATE_CASES)])
def test_update(f, make, argnums):
    tolerances = {"rtol": 1e-3, "atol": 1e-4} if f is cast_in_place else {}
    check(f, *make(), argnums=argnums, **tolerances)


def test_in_place_keeps_the_arrays_dtype():
    _, (gx, gv) = check(cast_in_place, arr(3, dtype=np.float32), arr(3, seed=1),
                        argnums=(0, 1), rtol=1e-3, atol=1e-4)
    assert gx.dtype == np.float32 and gv.dtype == np.float64


def test_emitted_mask_update_is_a_functional_copy():
    source = value_and_grad(add_at_mask, argnums=(0, 1)).source(arr(3, 4), 0.4)
    lines = [line.split("#")[0].strip() for line in source.splitlines()]
    assert "getitem = x[mask]" not in lines  # the mask is computed on the line itself
    assert any(line.startswith("x_1 = _setitem(x, np.s_[") and line.endswith("], add)")
               for line in lines)
    assert "out[index] = v" in source  # the helper is in the module: it writes its copy


def test_standalone_module_runs_the_same():
    x, v = arr(3, 4), arr(4, seed=1)
    namespace = {}
    source = autodiffgen.emit(row_view, x, v, argnums=(0, 1), standalone=True)
    exec(source, namespace)  # noqa: S102  generated above
    value, (gx, gv) = namespace["row_view_value_and_grad"](x, v)
    expected, (ex, ev) = tape.value_and_grad(row_view, argnums=(0, 1))(x, v)
    np.testing.assert_allclose(value, expected)
    np.testing.assert_allclose(gx, ex)
    np.testing.assert_allclose(gv, ev)


def test_hessian_through_assignments():
    h0, W = arr(3), 0.5 * arr(3, 3, seed=1)
    H = hessian(rnn)(h0, W)
    step = 1e-5
    fd = np.stack([(tape.grad(rnn)(h0 + step * e, W) - tape.grad(rnn)(h0 - step * e, W))
                   / (2 * step) for e in np.eye(3)])
    np.testing.assert_allclose(H, fd, rtol=1e-5, atol=1e-7)


# ---- cached code and the caller's arrays ----------------------------------------------
def test_cached_code_follows_new_values_and_masks():
    g = value_and_grad(add_at_mask, argnums=(0, 1))
    g.cache_clear()
    for seed in range(4):  # a different number of elements pass the mask each time
        x = np.random.default_rng(seed).uniform(0.5, 1.5, (3, 4))
        value, (gx, gv) = g(x, 0.4)
        expected, (ex, ev) = tape.value_and_grad(add_at_mask, argnums=(0, 1))(x, 0.4)
        np.testing.assert_allclose(value, expected)
        np.testing.assert_allclose(gx, ex)
        np.testing.assert_allclose(gv, ev)
    assert g.cache_info().hits == 3


def test_user_writes_into_arguments_between_calls():
    g = value_and_grad(argument_in_place, argnums=(0, 1))
    x, v = arr(4), arr(4, seed=1)
    first = g(x, v)
    saved = copies([first[0], *first[1]])
    for out in [first[0], *first[1]]:
        assert not np.shares_memory(out, x) and not np.shares_memory(out, v)
    x *= 3.0  # the user writes into both arrays in place
    v[1:] = -v[1:]
    value, grads = g(x, v)
    expected, expected_grads = tape.value_and_grad(argument_in_place, argnums=(0, 1))(x, v)
    np.testing.assert_allclose(value, expected)
    for got, want in zip(grads, expected_grads):
        np.testing.assert_allclose(got, want)
    for out, old in zip([first[0], *first[1]], saved):  # the first results stayed as they were
        np.testing.assert_array_equal(out, old)


def zero_first(x):
    x[0] = 0.0
    return x


def test_forward_mode_output_is_not_the_callers_array():
    x, t = arr(4), arr(4, seed=1)
    before = np.copy(x)
    out, tangent = jvp(zero_first, (x,), (t,))
    np.testing.assert_array_equal(x, before)
    assert not np.shares_memory(out, x) and not np.shares_memory(tangent, t)
    np.testing.assert_allclose(out, np.concatenate([[0.0], x[1:]]))
    np.testing.assert_allclose(tangent, np.concatenate([[0.0], t[1:]]))
    x[:] = 7.0
    out, _ = jvp(zero_first, (x,), (t,))
    np.testing.assert_allclose(out, [0.0, 7.0, 7.0, 7.0])


# ---- what cannot be followed ends in an error that names it and the line ----------------
def write_row_at(x, i):
    y = x[i]  # an int index: a view, but one whose place depends on i
    y[0] = 1.0  # write_row_at
    return np.sum(x)


def write_into_scalar(x):
    s = x[0, 0]
    s[()] = 1.0  # write_into_scalar
    return np.sum(x)


def grow_in_place(x):
    h = x[0]
    h += np.ones((2, 3))  # grow_in_place
    return np.sum(h)


def write_into_numpy_array(x):
    h = np.array([0.0, 0.0, 0.0])  # not np.zeros: a plain array whose writes are not followed
    h[0:2] = x[0, :2]  # write_into_numpy_array
    return np.sum(h)


def add_at(x):
    np.add.at(x, [0, 0], 1.0)  # add_at
    return np.sum(x)


def ufunc_out(x):
    np.exp(x, out=x)  # ufunc_out
    return np.sum(x)


X = np.linspace(0.5, 1.5, 6).reshape(2, 3)


def refusal(fun, *args, error, marker):
    """The message of the `error` that tracing `fun` raises at the line marked `marker`;
    the arguments are left as they were."""
    before = copies(args)
    with pytest.raises(error) as info:
        value_and_grad(fun)(*args)
    for arg, old in zip(args, before):
        np.testing.assert_array_equal(arg, old)
    assert line_of(marker) in str(info.value)
    return str(info.value)


@pytest.mark.parametrize("fun, marker, error, words", [
    (write_into_scalar, "write_into_scalar", TypeError, ["does not support item assignment"]),
    (grow_in_place, "grow_in_place", ValueError, ["non-broadcastable", "(2, 3)"]),
    (write_into_numpy_array, "write_into_numpy_array", autodiffgen.TracingError, ["NumPy array", "np.zeros"]),
    (add_at, "add_at", autodiffgen.UnsupportedOperationError, ["np.add.at"]),
    (ufunc_out, "ufunc_out", autodiffgen.TracingError, ["out="]),
])
def test_refused_writes_name_problem_and_line(fun, marker, error, words):
    message = refusal(fun, X.copy(), error=error, marker=marker)
    assert all(word in message for word in words), message


def test_view_error_names_where_the_view_was_made():
    message = refusal(write_row_at, X.copy(), 1, error=autodiffgen.TracingError,
                      marker="write_row_at")
    made = int(line_of("write_row_at").split(":")[1]) - 1
    assert f"getitem at test_mutation.py:{made}" in message and "copy" in message


def write_reshaped(x):
    y = x.reshape(3, 2)  # a view: the write below changes x too
    y[0] = y[0] * 3.0
    return np.sum(np.sin(x) * np.arange(6.0).reshape(2, 3)) + np.sum(y ** 2)


def write_transposed(x):
    t = x.T
    t += np.arange(3.0)[:, None]
    r = np.ravel(t)  # a copy (t is not contiguous): not written back
    r[0] = 5.0
    v = np.expand_dims(x, 0)[:, 1]
    v *= 2.0
    return np.sum(np.sin(x) * np.arange(6.0).reshape(2, 3)) + np.sum(r * t.reshape(-1))


def write_stridden_reshape(x):
    y = x[:, ::2].reshape(-1)  # a copy in NumPy: x keeps its values
    y[0] = 5.0
    z = x[::-1].reshape(3, 2)  # a view of a view
    z[1, 1] = z[0, 0] ** 2
    return np.sum(np.sin(x) * np.arange(6.0).reshape(2, 3)) + np.sum(y) * np.sum(z[:, 0])


@pytest.mark.parametrize("fun", [write_reshaped, write_transposed, write_stridden_reshape])
def test_writes_through_reshape_and_transpose_views_reach_the_base(fun):
    """As in NumPy: a reshape or transpose that is a view of x writes into x."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3))
    check_grads(fun, x)
    vg = value_and_grad(fun)
    for _ in range(3):
        x = rng.standard_normal((2, 3))
        value, _ = vg(x)
        np.testing.assert_allclose(value, fun(x.copy()), rtol=1e-12)
    assert vg.cache_info().misses == 1


def write_first(x, y):
    x[0] = 0.0  # write_first
    return np.sum(x * y)


@pytest.mark.parametrize("second", [lambda x: x, lambda x: x[1]], ids=["same", "view"])
def test_arguments_that_share_memory_cannot_be_written(second):
    x = X.copy()
    message = refusal(write_first, x, second(x), error=autodiffgen.TracingError,
                      marker="write_first")
    assert "'x'" in message and "'y'" in message and "shares memory" in message


def integer_in_place(x, n):
    n += 0.5  # integer_in_place
    return np.sum(x * n)


def test_in_place_cast_follows_numpy():
    message = refusal(integer_in_place, X.copy(), np.arange(3), error=TypeError,
                      marker="integer_in_place")
    assert "same_kind" in message


def read_only_argument(x):
    x[0] = 1.0  # read_only_argument
    return np.sum(x)


def test_read_only_argument_is_not_written():
    x = X.copy()
    x.setflags(write=False)  # NumPy refuses to write into it: so do we
    message = refusal(read_only_argument, x, error=ValueError, marker="read_only_argument")
    assert "read-only" in message


# ---- writes into np.zeros_like / np.ones_like of a traced value (review A item 9) ------
def _huber(w, y):
    r = w - y
    a = np.abs(r)
    small = a < 1.0
    out = np.zeros_like(r)
    out[small] = 0.5 * r[small] ** 2
    out[~small] = a[~small] - 0.5
    return out.mean()


def _one_slot(w):
    out = np.zeros_like(w)
    out[1] = w[1] ** 2
    return out.sum() + np.sum(w)


def test_masked_huber_into_zeros_like():
    f = autodiffgen.value_and_grad(_huber)
    rng = np.random.default_rng(0)
    for call in range(6):  # new data each call: other masks, all-small and all-large too
        w = rng.standard_normal(5) * (0.1 if call == 4 else 3.0 if call == 5 else 1.5)
        y = rng.standard_normal(5) * 0.1
        value, g = f(w, y)
        r = w - y
        assert np.isclose(value, np.mean(np.where(np.abs(r) < 1, 0.5 * r ** 2, np.abs(r) - 0.5)))
        np.testing.assert_allclose(g, np.where(np.abs(r) < 1, r, np.sign(r)) / 5)
        np.testing.assert_allclose(g, tape.grad(_huber)(w, y))
        check_grads(_huber, w, y)
    w32 = np.array([0.2, 3.0, -0.5], np.float32)
    assert f(w32, np.zeros(3, np.float32))[1].dtype == np.float32


def test_scalar_write_into_zeros_like():
    f = autodiffgen.grad(_one_slot)
    rng = np.random.default_rng(1)
    for _ in range(3):
        w = rng.standard_normal(4)
        np.testing.assert_allclose(f(w), 1 + np.array([0, 2 * w[1], 0, 0]))
        np.testing.assert_allclose(f(w), tape.grad(_one_slot)(w))
        check_grads(_one_slot, w)
    x = rng.standard_normal(4)
    np.testing.assert_allclose(autodiffgen.hessian(_one_slot)(x), np.diag([0, 2.0, 0, 0]), atol=1e-12)


def _clipped_into_ones_like(w, x):
    out = np.ones_like(x)  # 1 where |x w| >= 1, (x w)^2 below
    small = np.abs(x * w) < 1
    out[small] = (x * w)[small] ** 2
    return np.sum(out * w)


def test_writes_into_ones_like_of_a_traced_value():
    f = autodiffgen.value_and_grad(_clipped_into_ones_like)
    w = np.array([0.5, 2.0, -0.3])
    for x in (np.array([1.0, 0.2, 3.0]), np.full(3, 0.1), np.full(3, 5.0)):
        value, g = f(w, x)
        assert np.isclose(value, _clipped_into_ones_like(w, x))
        np.testing.assert_allclose(g, tape.grad(_clipped_into_ones_like)(w, x))
        check_grads(_clipped_into_ones_like, w, x)
    assert f.cache_info().misses == 1


def _plain_slice(w):
    out = np.zeros(4)
    out[1:3] = w[1:3] ** 2
    return out.sum()


def _plain_scalar(w):
    out = np.zeros(4)
    out[1] = w[1] ** 2
    return out.sum()


def _recurrence_into_stack(Wh, xs):
    """A recurrence written by hand (Tangent's rnn, CS231n's rnn_forward): the states
    written into a stack made with np.zeros, row by row."""
    T, n = xs.shape
    hs = np.zeros((T, n))
    h = np.zeros(n)
    for t in range(T):
        h = np.tanh(xs[t] + h @ Wh)
        hs[t] = h
    return np.sum(hs ** 2) + np.sum(hs[:, 0] * hs[:, -1])


def _columns_into_empty(w, x):
    out = np.empty((x.shape[0], 3, 2))
    for t in range(3):
        out[:, t, :] = np.tanh(x * w[t])
    return np.sum(out * out[:, ::-1, :])


@pytest.mark.parametrize("fun, args", [
    (_plain_slice, (np.linspace(0.5, 2.0, 4),)),
    (_plain_scalar, (np.linspace(0.5, 2.0, 4),)),
    (_recurrence_into_stack, (0.5 * np.eye(3) + 0.1, np.linspace(-1, 1, 12).reshape(4, 3))),
    (_columns_into_empty, (np.array([0.3, -0.7, 1.1]), np.linspace(-1, 1, 10).reshape(5, 2))),
])
def test_a_traced_value_written_into_a_new_array_is_followed(fun, args):
    """np.zeros / np.empty made in the function, then `out[i] = traced`: the array becomes
    traced at the write (issue 27), its derivative the one finite differences give."""
    value, g = value_and_grad(fun)(*args)
    assert np.isclose(value, fun(*args))
    np.testing.assert_allclose(g, tape.grad(fun)(*args), rtol=1e-12)
    check_grads(fun, *args)
    other = tuple(a * 1.5 for a in args)  # the cached code on new values
    np.testing.assert_allclose(value_and_grad(fun)(*other)[0], fun(*other))


def _write_into_a_literal(w):
    out = np.array([0.0, 0.0, 0.0, 0.0])  # not made by np.zeros: its writes not followed
    out[1] = w[1] ** 2
    return out.sum()


def _write_after_a_view(w):
    out = np.zeros(4)
    first = out[:2]  # a view, which would not see the write
    out[1] = w[1] ** 2
    return out.sum() + first.sum()


@pytest.mark.parametrize("fun", [_write_into_a_literal, _write_after_a_view])
def test_a_write_that_cannot_be_followed_names_the_line(fun):
    with pytest.raises(autodiffgen.TracingError, match=r"test_mutation.py:\d+: a traced value "
                       r"written into a NumPy array.*np.zeros"):
        autodiffgen.grad(fun)(np.ones(4))
