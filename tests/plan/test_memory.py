"""The memory plan: results written into dying operands and dead buffers, never into
anything else."""

import ast

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen import passes
from autodiffgen.plan import memory
from autodiffgen.testing import check_grads

RNG = np.random.default_rng(9)


def chain(x):
    a = np.sin(x)
    b = np.exp(a) * a
    c = np.tanh(b) + b
    return np.sum(c * c)


def test_dying_temporaries_are_reused():
    source = ad.emit(chain, RNG.normal(size=10000))  # (memory.MIN_ELEMENTS or more)
    assert "out=" in source
    check_grads(chain, RNG.normal(size=20))


def test_inputs_outputs_and_viewed_buffers_are_never_written():
    def f(x, y):
        t = x * 2.0          # x is an input: never an out= target
        v = t.T              # t is viewed by v: never an out= target
        return np.sum(v * y) + np.sum(t)
    x, y = RNG.normal(size=(3, 3)), RNG.normal(size=(3, 3))
    x0, y0 = x.copy(), y.copy()
    source = ad.emit(f, x, y, argnums=(0, 1))
    for line in source.splitlines():
        assert "out=x)" not in line and "out=y)" not in line and "out=t)" not in line
    gx, gy = ad.grad(f, argnums=(0, 1))(x, y)
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_array_equal(y, y0)
    np.testing.assert_allclose(gy, 2.0 * x.T)
    np.testing.assert_allclose(gx, 2.0 * y.T + 2.0)


def test_code_with_reused_buffers_can_be_differentiated_again():
    x = RNG.normal(size=4)
    H = ad.hessian(chain)(x)
    eps = 1e-6
    g = ad.grad(chain)
    fd = np.stack([(g(x + eps * e) - g(x - eps * e)) / (2 * eps) for e in np.eye(4)])
    np.testing.assert_allclose(H, fd, rtol=1e-5, atol=1e-6)


def test_user_code_still_may_not_write_into_traced_values():
    def f(x):
        h = np.zeros(3)
        np.add(h, x, out=h)
        return h.sum()
    try:
        ad.grad(f)(np.ones(3))
    except ad.TracingError as e:
        assert "out=" in str(e)
    else:
        raise AssertionError("np.add(..., out=) on a traced value should be refused")


def test_matmul_never_writes_into_an_operand():
    def f(W, xs):
        h = np.zeros((2, 4))
        for t in range(xs.shape[0]):
            h = np.tanh(xs[t] @ W + h @ W.T[:4, :4])
        return np.sum(h ** 2)
    W, xs = RNG.normal(size=(4, 4)), RNG.normal(size=(2, 2, 4))  # T * B == H: square terms
    source = ad.emit(f, W, xs)
    for call in _calls(source, "matmul"):  # (out=hs[t]: the stack hs, in a loop)
        out = [_array(k.value) for k in call.keywords if k.arg == "out"]
        assert not set(out) & {_array(n) for a in call.args for n in ast.walk(a)
                               if isinstance(n, ast.Name | ast.Subscript)}
    check_grads(f, W, xs)


def _array(expression):
    """The name of the array an expression reads (`h`, `hs` of `hs[t]`)."""
    while isinstance(expression, ast.Subscript | ast.Attribute):
        expression = expression.value
    return expression.id if isinstance(expression, ast.Name) else None


def _calls(source, name):
    """The np.<name>(...) calls of a generated source."""
    return [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute) and n.func.attr == name]


# ---- gradients are arrays of their own (from a code review) ----------------------------
@pytest.mark.parametrize("f", [lambda W: np.sum(W.T), lambda W: W.ravel().mean(),
                               lambda W: np.sum(W[:, :, None])])
def test_gradients_are_writable_and_contiguous_enough(f):
    g = ad.grad(f)(np.ones((2, 3)))
    assert g.flags.writeable and 0 not in g.strides
    g *= 0.1


def test_gradients_do_not_share_memory_with_each_other():
    def f(x, y):
        return np.sum(np.exp(x.T + y.reshape(3, 2)))
    gx, gy = ad.grad(f, argnums=(0, 1))(RNG.normal(size=(2, 3)), RNG.normal(size=6))
    assert not np.shares_memory(gx, gy)


@pytest.mark.parametrize("make", [
    lambda C: (lambda x: np.sum(np.reshape(x, (C.size,)) * C)),   # a view of a constant
    lambda C: (lambda x: np.sum(x * np.einsum("ij->ji", C.reshape(50, 40)).reshape(-1))),
    lambda C: (lambda x: np.sum(x)),                               # a broadcast seed
])
def test_gradients_never_share_memory_with_constants_and_are_writable(make):
    C = np.arange(2000.0)
    f = ad.grad(make(C))
    g = f(np.ones(2000))
    g *= 0.0
    np.testing.assert_array_equal(C, np.arange(2000.0))
    assert f(np.ones(2000)).any()


def test_memory_plan_respects_views_made_by_user_primitives():
    @ad.primitive
    def flip_t(x):
        return x.T
    ad.defvjp(flip_t, lambda g, ans, x: g.T)

    def f(x):
        a = np.sin(x)
        v = flip_t(a)
        b = a * 2.0
        return np.sum(b * v.T)
    x = RNG.normal(size=(3, 3))
    value, _ = ad.value_and_grad(f)(x)
    assert np.isclose(value, f(x))


# ---- the pool: buffers dead earlier serve later results of their shape and dtype ----------
def gru_like(W, U, xs, target):
    h = np.zeros((xs.shape[1], U.shape[0]), dtype=xs.dtype)
    for t in range(xs.shape[0]):
        zr = 1.0 / (1.0 + np.exp(-(xs[t] @ W + h @ np.concatenate([U, U], axis=1))))
        z, r = zr[:, :U.shape[0]], zr[:, U.shape[0]:]
        n = np.tanh((r * h) @ U + xs[t] @ W[:, :U.shape[0]])
        h = n + z * (h - n)
    return np.sum((h - target) ** 2) / xs.shape[1]


def gru_args(dtype, batch=4, steps=5, rng=RNG):
    W = rng.normal(size=(3, 8)).astype(dtype)
    U = (rng.normal(size=(4, 4)) * 0.5).astype(dtype)
    xs = rng.normal(size=(steps, batch, 3)).astype(dtype)
    return W, U, xs, rng.normal(size=(batch, 4)).astype(dtype)


def _tape(f, args, argnums):
    from autodiffgen.tape import TapeFunction
    return TapeFunction(f, argnums)(*args)


def _agree(got, want, rtol):
    value, grads = got
    np.testing.assert_allclose(value, want[0], rtol=rtol)
    for g, w in zip(grads, want[1]):
        assert g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol)


def test_a_recurrent_step_reuses_the_buffers_of_the_step_before(monkeypatch):
    monkeypatch.setattr(memory, "MIN_ELEMENTS", 1)  # buffers of any size worth reusing
    args = gru_args(np.float64)
    source = ad.emit(gru_like, *args, argnums=(0, 1))
    pooled = [ast.unparse(k.value) for name in ("matmul", "multiply", "add", "tanh", "subtract")
              for call in _calls(source, name) for k in call.keywords if k.arg == "out"
              and not any(ast.unparse(a) == ast.unparse(k.value) for a in call.args)]
    assert len(pooled) >= 5  # results written into buffers that died statements before
    # (or into their slot of a stack allocated before: emit_slots.py)
    check_grads(gru_like, *args, argnums=(0, 1))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_reused_buffers_give_the_tapes_results_call_after_call(dtype):
    f = ad.value_and_grad(gru_like, argnums=(0, 1))
    rtol = 2e-5 if dtype == np.float32 else 1e-10
    for seed in range(3):  # new values in each call of the cached code
        args = gru_args(dtype, rng=np.random.default_rng(seed))
        before = [a.copy() for a in args]
        got = f(*args)
        _agree(got, _tape(gru_like, args, (0, 1)), rtol)
        for a, b in zip(args, before):
            np.testing.assert_array_equal(a, b)  # no input written into
        assert not np.shares_memory(got[1][0], got[1][1])
    assert f.cache_info().misses == 1


def test_reuse_holds_at_every_batch_size_the_code_serves():
    """Batch-polymorphic code (one trace serves many sizes): buffers of the batch's shape
    (n, 4) and of a fixed one (4, 4) are kept apart, by the shapes' formulas in n."""
    def f(W, U, xs, target):
        fixed = np.tanh(W[:, :4].T @ W[:, :4])       # (4, 4) whatever the batch
        h = np.tanh(xs[0] @ W[:, :4])                 # (n, 4): 4 rows when traced
        for t in range(1, xs.shape[0]):
            h = np.tanh(h @ (U * fixed) + xs[t] @ W[:, :4])
        return np.sum((h - target) ** 2)
    def h(W, U, xsb, target):  # the batch first: the batch axis
        return f(W, U, np.swapaxes(xsb, 0, 1), target)
    grad = ad.value_and_grad(h, argnums=(0, 1))
    W, U = gru_args(np.float64)[:2]
    for batch in (6, 5, 6, 5):
        rng = np.random.default_rng(batch)
        args = (W, U, rng.normal(size=(batch, 5, 3)), rng.normal(size=(batch, 4)))
        _agree(grad(*args), _tape(h, args, (0, 1)), 1e-10)
    assert grad.cache_info().misses == 1  # one code served every size


def test_reuse_never_raises_the_peak():
    """A dead buffer is held for a later result only while that keeps the live bytes
    under the peak they reach anyway: the step's peak is the plan-off one's or lower."""
    import tracemalloc

    from autodiffgen.plan import memory as emit_memory

    def f(x, y):
        a = np.sin(x)
        s = np.sum(a * y)                  # a * y dies at once
        big = np.outer(x, y).ravel()[: x.size * 8]     # a larger array in between
        b = np.cos(np.sum(big) + a)        # a buffer of x's shape again
        return s + np.sum(b * b)
    x, y = RNG.normal(size=20000), RNG.normal(size=20000)

    def peak(fn):
        fn(x, y)
        tracemalloc.start()
        tracemalloc.reset_peak()
        fn(x, y)
        top = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return top
    with_pool = peak(ad.value_and_grad(f, argnums=(0, 1)))
    hold, emit_memory.MAX_HOLD = emit_memory.MAX_HOLD, 0
    try:
        without = peak(ad.value_and_grad(f, argnums=(0, 1)))
    finally:
        emit_memory.MAX_HOLD = hold
    assert with_pool <= without * 1.01


def test_backward_values_made_from_inputs_alone_are_computed_where_read(monkeypatch):
    """The gradient of `-(y @ z) / n` is -(1/n) * y, made from inputs alone: computed
    where it is read, after the saved values of the forward are gone, it takes one of
    their buffers instead of adding one while they are alive (the peak drops by one)."""
    import importlib
    import tracemalloc

    emit = importlib.import_module("autodiffgen.plan.planner")

    def make():  # a new function each time: no code compiled before is shared
        def logreg(w, X, y):
            z = X @ w
            return np.logaddexp(0.0, z).mean() - (y @ z) / 7.0  # no factor shared
        return logreg
    X = RNG.normal(size=(50000, 3))
    w, y = RNG.normal(size=3), (RNG.uniform(size=50000) < 0.5).astype(float)

    def peak():
        logreg = make()
        f = ad.value_and_grad(logreg)
        f(w, X, y)
        tracemalloc.start()
        tracemalloc.reset_peak()
        result = f(w, X, y)
        top = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        _agree(result, _tape(logreg, (w, X, y), 0), 1e-10)
        return top
    monkeypatch.setattr(passes, "ENABLED", True)  # fold makes the term from y alone
    sunk = peak()
    monkeypatch.setattr(emit, "sunk", lambda graph: graph)
    assert sunk <= peak() - 0.9 * y.nbytes


# ---- rematerialization: cheap saved values computed again in the backward -----------------
@pytest.mark.usefixtures("written_out")
def test_cheap_saved_values_are_recomputed_and_the_peak_drops(monkeypatch):
    """`h - n` (saved for the update gate's gradient) is recomputed in the backward from h
    and n, which the backward reads anyway: one buffer per step less at the peak."""
    import importlib
    import tracemalloc

    emit = importlib.import_module("autodiffgen.plan.planner")
    args = gru_args(np.float64, batch=64, steps=20)
    assert "# recomputed, not saved" in ad.emit(gru_like, *args, argnums=(0, 1))

    def make():
        def f(W, U, xs, target):
            return gru_like(W, U, xs, target)
        return f

    def peak():
        f = ad.value_and_grad(make(), argnums=(0, 1))
        f(*args)
        tracemalloc.start()
        tracemalloc.reset_peak()
        result = f(*args)
        top = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        _agree(result, _tape(gru_like, args, (0, 1)), 1e-10)
        return top
    recomputing = peak()
    monkeypatch.setattr(emit, "rematerialized", lambda graph: graph)
    step = args[2][0].nbytes / 3 * 4  # one (batch, 4) float64 state
    assert recomputing <= peak() - 10 * step


def test_recomputed_values_are_right_in_every_order_of_derivative():
    def f(x, y):
        n = np.tanh(x * y)
        d = x - n                   # cheap, its operands read by the backward anyway
        return np.sum(d * n * y)
    x, y = RNG.normal(size=5), RNG.normal(size=5)
    check_grads(f, x, y, argnums=(0, 1))
    H = ad.hessian(f)(x, y)
    g = ad.grad(f)
    eps = 1e-6
    fd = np.stack([(g(x + eps * e, y) - g(x - eps * e, y)) / (2 * eps) for e in np.eye(5)])
    np.testing.assert_allclose(H, fd, rtol=1e-5, atol=1e-6)


def test_a_contractions_result_is_written_into_but_a_one_operand_einsums_view_is_not(
        monkeypatch):
    monkeypatch.setattr(memory, "MIN_ELEMENTS", 1)  # any buffer worth reusing

    def f(W, b, A):
        out = np.einsum("ij,jk->ik", A, W)       # a new array: `+ b` may write into it
        diag = np.einsum("ii->i", A)             # a view of A: never written into
        return np.sum(np.tanh(out + b)) + np.sum(diag * 2.0)
    W, b, A = RNG.normal(size=(3, 3)), RNG.normal(size=3), RNG.normal(size=(3, 3))
    A0 = A.copy()
    source = ad.emit(f, W, b, A, argnums=(0, 1))
    assert "np.add(out, b, out=out)" in source or "out += b" in source
    check_grads(f, W, b, A, argnums=(0, 1))
    ad.grad(f, argnums=(0, 1))(W, b, A)
    np.testing.assert_array_equal(A, A0)


def _states_into_stack(Wh, xs):
    hs = np.zeros((xs.shape[0], xs.shape[1]))
    h = np.zeros(xs.shape[1])
    for t in range(xs.shape[0]):
        h = np.tanh(xs[t] + h @ Wh)
        hs[t] = h
    return np.sum(hs ** 2)


@pytest.mark.usefixtures("written_out")
def test_a_row_written_into_a_stack_is_written_in_place():
    """`hs[t] = h` records a copy of hs with row t replaced (writes are functional); where
    hs dies at the write, the plan writes the row into hs itself, as the user wrote it,
    instead of copying the whole stack at every step."""
    Wh, xs = 0.3 * RNG.normal(size=(3, 3)), RNG.normal(size=(6, 3))
    source = ad.emit(_states_into_stack, Wh, xs)
    forward = source.split("    # backward\n")[0]
    assert "_setitem(hs" not in forward  # hs copied at most once: the constant it starts from
    for t in range(1, 6):
        assert f"    hs[{t}] = h_{t}" in source, t
    check_grads(_states_into_stack, Wh, xs)
    value, g = ad.value_and_grad(_states_into_stack)(Wh * 2, xs)  # the cached code again
    assert np.isclose(value, _states_into_stack(Wh * 2, xs))
    np.testing.assert_allclose(g, ad.tape.grad(_states_into_stack)(Wh * 2, xs), rtol=1e-12)
