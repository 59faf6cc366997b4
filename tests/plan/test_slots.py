"""Joins written in place (emit_slots.py): a stack's or concatenation's parts computed into
their slots of one buffer, never a buffer another statement writes into."""

import ast

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen import passes
from autodiffgen.graph import Node
from autodiffgen.plan import memory
from autodiffgen.plan.slots import Slot, _contiguous, _stacked_slots
from autodiffgen.rules import PRIMITIVES
from autodiffgen.testing import check_grads

RNG = np.random.default_rng(16)


@pytest.fixture(autouse=True)
def _with_passes(monkeypatch):
    """The stacks these tests look for are made by the passes (accumulate, cse), so they
    run with the passes on, also under AUTODIFFGEN_PASSES=0."""
    monkeypatch.setattr(passes, "ENABLED", True)


def _tape(f, args, argnums):
    from autodiffgen.tape import TapeFunction
    return TapeFunction(f, argnums)(*args)


def _agree(got, want, rtol):
    np.testing.assert_allclose(got[0], want[0], rtol=rtol)
    for g, w in zip(got[1], want[1]):
        assert g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol)


def _outs(source):
    """The `out=` targets of the source's calls, as written."""
    return [ast.unparse(k.value) for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call) for k in node.keywords if k.arg == "out"]


def sine_net(w, v, xs):
    """An elementwise recurrence reading a row of xs per step: xs's gradient is a stack
    of per-step rows, w's one sum over the steps' products."""
    h = np.zeros(xs.shape[1:], dtype=xs.dtype)
    for t in range(xs.shape[0]):
        h = np.sin(xs[t] * w + h * v)
    return np.sum(h * h)


def gated(W, U, xw, h):
    """Per step, two blocks of a row read apart (xw[t, :, :3], xw[t, :, 3:]), a gate
    split in two, as a GRU's: the gradient's rows are concatenations, then a stack."""
    for t in range(xw.shape[0]):
        g = np.tanh(xw[t, :, :3] + h @ W)
        a, b = g[:, :1], g[:, 1:]
        c = np.cos(xw[t, :, 3:] + (b * h) @ U)
        h = c + a * (h - c)
    return np.sum(h ** 2)


def gated_args(dtype, batch=4, steps=5, rng=RNG):
    return (rng.normal(size=(2, 3)).astype(dtype), rng.normal(size=(2, 2)).astype(dtype),
            rng.normal(size=(steps, batch, 5)).astype(dtype),
            rng.normal(size=(batch, 2)).astype(dtype))


@pytest.mark.usefixtures("written_out")
def test_each_steps_row_is_computed_into_the_stack():
    w, v, xs = RNG.normal(size=3), RNG.normal(size=3), RNG.normal(size=(4, 3))
    source = ad.emit(sine_net, w, v, xs, argnums=(0, 1, 2))
    assert "np.empty((4, 3)" in source and "np.stack(" not in source
    rows = [out for out in _outs(source) if out.startswith("g_xs[")]
    assert sorted(rows) == ["g_xs[0]", "g_xs[1]", "g_xs[2]", "g_xs[3]"]
    check_grads(sine_net, w, v, xs, argnums=(0, 1, 2))


@pytest.mark.usefixtures("written_out")
def test_blocks_of_a_row_and_the_matmuls_operands_share_one_buffer():
    args = gated_args(np.float64)
    source = ad.emit(gated, *args, argnums=(0, 1, 2))
    assert "np.concatenate(" not in source and "np.stack(" not in source
    outs = _outs(source)
    assert any(o.startswith("g_xw[") and o.endswith(", 3:]") for o in outs)  # the candidate's
    # a matmul's operands over every step: the gate blocks of g_xw, a view, no copy
    assert "g_xw[:, :, :3]" in source
    check_grads(gated, *args, argnums=(0, 1, 2))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_joins_in_place_give_the_tapes_results_call_after_call(dtype):
    f = ad.value_and_grad(gated, argnums=(0, 1, 2))
    rtol = 2e-5 if dtype == np.float32 else 1e-10
    for seed in range(3):  # new values in each call of the cached code
        args = gated_args(dtype, rng=np.random.default_rng(seed))
        before = [a.copy() for a in args]
        got = f(*args)
        _agree(got, _tape(gated, args, (0, 1, 2)), rtol)
        for a, b in zip(args, before):
            np.testing.assert_array_equal(a, b)
        assert got[1][2].dtype == dtype
    assert f.cache_info().misses == 1


def test_joins_in_place_serve_every_batch_size():
    """Slots index a stack's row and a concatenation's offsets in numbers, never in the
    batch size: one trace serves other batch sizes (the batch axis first)."""
    def batch_first(W, U, xwb, h):
        return gated(W, U, np.swapaxes(xwb, 0, 1), h)
    grad = ad.value_and_grad(batch_first, argnums=(0, 1, 2))
    for batch in (6, 5, 6, 5):
        W, U, xw, h = gated_args(np.float64, batch=batch, rng=np.random.default_rng(batch))
        args = (W, U, np.swapaxes(xw, 0, 1).copy(), h)
        _agree(grad(*args), _tape(batch_first, args, (0, 1, 2)), 1e-10)
    assert grad.cache_info().misses == 1


def test_a_part_read_after_the_join_is_never_overwritten():
    """The parts are views of the join's buffer: neither the join (dying at `ys * 3`) nor
    a part may then be written into while the other is read."""
    def f(x):
        parts = [np.tanh(x[i] * 2.0) for i in range(3)]
        ys = np.stack(parts)
        zs = ys * 3.0
        p = parts[0] + 1.0
        return np.sum(zs) + np.sum(p * parts[0]) + np.sum(parts[2] * zs[1])
    x = RNG.normal(size=(3, 4))
    source = ad.emit(f, x)
    assert "np.empty((3, 4)" in source
    for out in _outs(source):
        assert out in ("ys[0]", "ys[1]", "ys[2]") or not out.startswith("ys")
    check_grads(f, x)
    value, _ = ad.value_and_grad(f)(x)
    np.testing.assert_allclose(value, f(x), rtol=1e-12)


def _stack_of_parts_then_of_their_chains(step):
    """hs stacks the parts; qs stacks, row by row, what each part is computed into in
    place (`step(part, t)`): the parts lie in qs's buffer only until their chain is."""
    def f(xs, w):
        ps = [np.tanh(xs[t]) for t in range(2)]
        hs = np.stack(ps)
        qs = np.stack([np.stack([step(ps[t], w[t]), w[t]]) for t in range(2)])
        return np.sum(hs ** 2) + np.sum(qs ** 2)
    return f


@pytest.mark.parametrize("step", [lambda p, w: p - 0.25, lambda p, w: w * (2.0 * p)],
                         ids=["shift", "scaled"])
@pytest.mark.parametrize("enabled", [True, False])
def test_a_join_is_no_view_of_slots_a_later_value_is_computed_over(step, enabled,
                                                                   monkeypatch):
    """A part computed into a slot and then computed over in place (`ps[t] - 0.25` in the
    same slot) is not read through a view of that slot: hs gave qs's rows (a wrong value
    and gradient, no error) with or without the passes; the stepwise pass made it reachable
    from plain recurrences."""
    monkeypatch.setattr(passes, "ENABLED", enabled)
    f = _stack_of_parts_then_of_their_chains(step)
    cached = ad.value_and_grad(f, argnums=(0, 1))
    for scale in (1.0, -0.7):
        args = (np.full((2, 3), 0.5) * scale + RNG.normal(size=(2, 3)) * 0.1,
                RNG.normal(size=(2, 3)))
        _agree(cached(*args), _tape(f, args, (0, 1)), 1e-12)
        np.testing.assert_allclose(cached(*args)[0], f(*args), rtol=1e-12)
    check_grads(f, *args, argnums=(0, 1))


def test_inputs_and_parts_of_two_joins_are_assigned_into_their_slots():
    def f(x, y):
        a, b = np.sin(x), np.cos(x)
        s1 = np.stack([a, y, b])
        s2 = np.concatenate([b, a * 2.0], axis=-1)  # computed after s1: b is its part
        return np.sum(s1 * s1) + np.sum(s2 * np.arange(s2.shape[-1]))
    x, y = RNG.normal(size=(2, 3)), RNG.normal(size=(2, 3))
    source = ad.emit(f, x, y, argnums=(0, 1))
    lines = [line.split("#")[0].strip() for line in source.splitlines()]
    assert "s1[1] = y" in lines and "s1[2] = cos" in lines  # copied where s1 was
    assert "sin = np.sin(x, out=s1[0])" in lines and "cos = np.cos(x, out=s2[:, :3])" in lines
    assert "np.multiply(sin, 2.0, out=s2[:, 3:])" in lines  # read by s2 alone: not named
    check_grads(f, x, y, argnums=(0, 1))
    value, _ = ad.value_and_grad(f, argnums=(0, 1))(x, y)
    np.testing.assert_allclose(value, f(x, y), rtol=1e-12)


def test_second_order_through_joins_in_place():
    def f(x):
        return np.sum(np.stack([np.sin(x[i]) * x[i] for i in range(x.shape[0])]) ** 2)
    x = RNG.normal(size=(3, 2))
    hess = ad.hessian(f)(x)
    eps, base = 1e-6, ad.grad(f)
    fd = np.stack([(base(x + eps * e.reshape(x.shape)) - base(x - eps * e.reshape(x.shape)))
                   / (2 * eps) for e in np.eye(x.size)]).reshape(x.shape * 2)
    np.testing.assert_allclose(hess, np.moveaxis(fd, (0, 1), (2, 3)), rtol=1e-6, atol=1e-8)


def _node(shape):
    return Node(0, None, (), {}, shape, np.dtype(np.float64), None, None, None)


def test_slot_shapes():
    base = _node((4, 2, 6))
    assert _contiguous(Slot(base, (1, (0, None), (0, None))))
    assert _contiguous(Slot(base, ((1, 3), (0, None), (0, 6))))
    assert not _contiguous(Slot(base, (1, (0, None), (0, 3))))
    rows = [Slot(base, (t, (0, None), (3, 6))) for t in range(4)]
    stack = Node(1, PRIMITIVES["stack"], (), {"axis": 0}, (4, 2, 3), np.dtype(np.float64),
                 None, None, None)
    view = _stacked_slots(stack, rows)
    assert view.items == ((0, 4), (0, None), (3, 6))
    assert _stacked_slots(stack, rows[::-1]) is None  # rows out of order: a copy


@pytest.mark.usefixtures("written_out")
def test_a_long_chain_computed_in_place_into_its_slot():
    """The chain of values computed in place before a part is walked in a loop: longer
    than Python's recursion limit, it is placed whole."""
    def f(x):
        parts = []
        for i in range(2):
            y = np.sin(x[i])
            for _ in range(600):
                y = y * 1.0001 + 0.5
            parts.append(y)
        return np.sum(np.stack(parts) ** 2)
    x = RNG.normal(size=(2, 3))
    code = "\n".join(line.split("#")[0] for line in ad.emit(f, x).splitlines())
    assert "np.empty((2, 3)" in code and "np.stack(" not in code
    value, grad = ad.value_and_grad(f)(x)
    np.testing.assert_allclose(value, f(x), rtol=1e-12)
    _agree((value, (grad,)), _tape(f, (x,), 0)[:1] + ((_tape(f, (x,), 0)[1],),), 1e-10)


# ---- layout for BLAS (emit_memory.contiguous_transposes) ----------------------------------
def tanh_chain(W, V, x):
    """Several products by W.T (a backward reads it once per step, here the forward)."""
    h = x
    for _ in range(3):
        h = np.tanh(h @ W.T + np.sin(h) @ V)
    return np.sum(h * h)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_transpose_read_by_several_matmuls_is_made_contiguous_once(order, dtype):
    rng = np.random.default_rng(3)
    W = np.asarray(rng.normal(size=(4, 4)) * 0.5, dtype=dtype, order=order)
    V = np.asarray(rng.normal(size=(4, 4)) * 0.5, dtype=dtype, order=order)
    x = np.asarray(rng.normal(size=(5, 4)), dtype=dtype, order=order)  # F: pooled buffers too
    source = ad.emit(tanh_chain, W, V, x, argnums=(0, 1, 2))
    assert "np.ascontiguousarray(W.T)" in source
    f = ad.value_and_grad(tanh_chain, argnums=(0, 1, 2))
    rtol = 2e-5 if dtype == np.float32 else 1e-10
    for seed in range(2):
        args = [np.asarray(a * (1 + seed), order=order) for a in (W, V, x)]
        got = f(*args)
        _agree(got, _tape(tanh_chain, args, (0, 1, 2)), rtol)
        assert all(g.dtype == dtype for g in got[1])
    check_grads(tanh_chain, *(a.astype(np.float64) for a in (W, V, x)), argnums=(0, 1, 2))


def test_a_transpose_read_as_the_left_operand_is_not_copied():
    """x.T @ g (weights' gradients sharing one input) is a flag to BLAS: no copy, which
    would only add x's size to the peak."""
    def shared_input(A, B, x):
        return np.sum(np.tanh(x @ A) * (x @ B))
    rng = np.random.default_rng(4)
    args = (rng.normal(size=(4, 3)), rng.normal(size=(4, 3)), rng.normal(size=(6, 4)))
    source = ad.emit(shared_input, *args, argnums=(0, 1))
    assert "ascontiguousarray" not in source
    check_grads(shared_input, *args, argnums=(0, 1))


def test_a_product_into_a_buffer_is_np_matmul(monkeypatch):
    """One spelling per product (issue 26): `a @ b`, or np.matmul(..., out=) into a
    contiguous slot, a dead product or any other buffer; never np.dot beside them."""
    monkeypatch.setattr(memory, "MIN_ELEMENTS", 1)  # buffers of any size worth reusing
    w, v, xs = RNG.normal(size=(3, 3)), RNG.normal(size=(3, 3)), RNG.normal(size=(4, 2, 3))

    def rnn(w, v, xs):
        h = np.zeros(xs.shape[1:])
        for t in range(xs.shape[0]):
            h = np.tanh(xs[t] + h @ w)
        return np.sum(h @ v)
    source = ad.emit(rnn, w, v, xs, argnums=(0, 1, 2))
    into = [line for line in source.splitlines() if "np.matmul(" in line]
    assert into and all("out=" in line for line in into)
    assert "np.dot(" not in source
    check_grads(rnn, w, v, xs, argnums=(0, 1, 2))
    xf = np.asfortranarray(RNG.normal(size=(6, 6)))

    def mixed(a, b):
        s = np.sin(a)                  # Fortran-ordered, as a is
        t = np.sum(s * b)              # s dies here: its buffer is pooled
        return t + np.sum((a @ b) @ b)
    got = ad.value_and_grad(mixed, argnums=(0, 1))(xf, xf.T.copy())
    _agree(got, _tape(mixed, (xf, xf.T.copy()), (0, 1)), 1e-10)


def test_a_product_written_into_a_fortran_ordered_buffer_is_not_c_ordered():
    """A matmul computed into a dead elementwise result's buffer (Fortran-ordered, as the
    inputs are) has that buffer's layout: a later product into it stays np.matmul."""
    def f(a, b):
        s = np.sin(a) * b                 # Fortran-ordered
        t = np.sum(s)
        m = a @ b                         # into s's buffer
        u = np.sum(m * m)
        return t + u + np.sum((m @ b) @ a)
    a = np.asfortranarray(RNG.normal(size=(5, 5)))
    b = np.asfortranarray(RNG.normal(size=(5, 5)))
    got = ad.value_and_grad(f, argnums=(0, 1))(a, b)
    _agree(got, _tape(f, (a, b), (0, 1)), 1e-10)
