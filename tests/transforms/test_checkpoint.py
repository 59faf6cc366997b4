"""checkpoint(f): the values inside f are recomputed by the backward pass, not kept.

Checked against the same functions without checkpoint (values, gradients, forward mode,
second derivatives), against the tape and finite differences (check_grads), in the
emitted code (the recomputation is in the backward, after `_recompute_from`, with its
comment, and survives the passes), and in memory (tracemalloc's peak of a recurrent
net's gradient)."""

import gc
import re
import tracemalloc

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen import checkpoint, passes, tape
from autodiffgen.testing import check_grads

RNG = np.random.default_rng(1313)


def cell(h, x, W):
    u = np.sin(h @ W + x)
    return np.tanh(u * h)


ck_cell = checkpoint(cell)


def twice(W, x, h):
    return np.sum(ck_cell(ck_cell(h, x, W), x, W) ** 2)


def twice_plain(W, x, h):
    return np.sum(cell(cell(h, x, W), x, W) ** 2)


@checkpoint
def two_cells(h, x, W):  # a checkpoint around checkpoints
    return ck_cell(ck_cell(h, x, W), x, W)


def nested(W, x, h):
    return np.sum(two_cells(two_cells(h, x, W), x, W) ** 2)


def nested_plain(W, x, h):
    for _ in range(4):
        h = cell(h, x, W)
    return np.sum(h ** 2)


def closing(W, x, h):
    @checkpoint
    def inner(h):  # closes over W and x, traced values of the outer function
        return np.sin(h @ W) * x
    return np.sum(inner(inner(h)) ** 2)


def closing_plain(W, x, h):
    def inner(h):
        return np.sin(h @ W) * x
    return np.sum(inner(inner(h)) ** 2)


@checkpoint
def tree_step(p, x, scale=1.0):  # pytrees in and out, a keyword argument
    a = np.tanh(x @ p["W"]) * scale
    return {"a": a, "b": (a * p["b"], np.exp(a).sum())}


def tree(p, x):
    o = tree_step(p, x, scale=0.5)
    return np.sum(o["b"][0]) + o["b"][1] * np.sum(o["a"] ** 2)


def tree_plain(p, x):
    o = tree_step.__wrapped__(p, x, scale=0.5)
    return np.sum(o["b"][0]) + o["b"][1] * np.sum(o["a"] ** 2)


PAIRS = [(twice, twice_plain), (nested, nested_plain), (closing, closing_plain)]


def _args(dtype=np.float64, n=4):
    return (RNG.normal(size=(3, 3)).astype(dtype) * 0.7, RNG.normal(size=(n, 3)).astype(dtype),
            RNG.normal(size=(n, 3)).astype(dtype))


def _close(a, b, tol=1e-12):
    for x, y in zip(np.atleast_1d(a) if not isinstance(a, tuple) else a,
                    np.atleast_1d(b) if not isinstance(b, tuple) else b):
        np.testing.assert_allclose(x, y, rtol=tol, atol=tol)


@pytest.mark.parametrize("f, plain", PAIRS, ids=lambda f: getattr(f, "__name__", ""))
def test_gradients_are_those_of_the_plain_function(f, plain):
    g = ad.value_and_grad(f, argnums=(0, 1, 2))
    for n in (4, 4, 6):  # the cached code on new data, and another shape
        args = _args(n=n)
        value, grads = g(*args)
        want_value, want = ad.value_and_grad(plain, argnums=(0, 1, 2))(*args)
        np.testing.assert_allclose(value, want_value, rtol=1e-13)
        _close(grads, want)
        _close(tape.grad(f, argnums=(0, 1, 2))(*args), want)


@pytest.mark.parametrize("f", [twice, nested, closing], ids=lambda f: f.__name__)
def test_against_finite_differences_and_the_tape(f):
    check_grads(f, *_args(), argnums=(0, 1, 2))


@pytest.mark.parametrize("f, plain", PAIRS, ids=lambda f: getattr(f, "__name__", ""))
def test_second_derivatives(f, plain):
    W, x, h = _args()
    _close(ad.hessian(f)(W, x, h), ad.hessian(plain)(W, x, h), 1e-10)
    gg = ad.grad(lambda W: np.sum(np.cos(ad.grad(f)(W, x, h))))(W)
    _close(gg, ad.grad(lambda W: np.sum(np.cos(ad.grad(plain)(W, x, h))))(W), 1e-10)
    V = RNG.normal(size=W.shape)
    zeros = (np.zeros_like(x), np.zeros_like(h))
    _close(ad.jvp(ad.grad(f), (W, x, h), (V, *zeros))[1],
           ad.jvp(ad.grad(plain), (W, x, h), (V, *zeros))[1], 1e-10)
    _close(ad.hvp(f, (W, x, h), (V, None, None)), ad.hvp(plain, (W, x, h), (V, None, None)),
           1e-10)


def test_forward_mode_and_vjp():
    W, x, h = _args()
    tangents = tuple(RNG.normal(size=a.shape) for a in (W, x, h))
    _close(ad.jvp(twice, (W, x, h), tangents), ad.jvp(twice_plain, (W, x, h), tangents))
    out, vjp_fn = ad.vjp(lambda W, h: ck_cell(ck_cell(h, x, W), x, W), W, h)
    want_out, want_fn = ad.vjp(lambda W, h: cell(cell(h, x, W), x, W), W, h)
    g = RNG.normal(size=out.shape)
    np.testing.assert_array_equal(out, want_out)
    _close(vjp_fn(g), want_fn(g))


def test_pytrees_in_and_out():
    p = {"W": RNG.normal(size=(3, 3)), "b": RNG.normal(size=3)}
    x = RNG.normal(size=(5, 3))
    got, want = ad.grad(tree)(p, x), ad.grad(tree_plain)(p, x)
    for k in p:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-12, atol=1e-14)
    check_grads(tree, p, x)


def test_float32_stays_float32_and_0d_values_broadcast():
    W, x, h = _args(np.float32)
    g = ad.grad(twice)(W, x, h)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, ad.grad(twice_plain)(W, x, h), rtol=1e-5, atol=1e-6)

    @checkpoint
    def scaled(s, v):  # a 0-d array broadcast against a vector inside
        return np.exp(s * v) * s
    f = lambda s, v: np.sum(scaled(s, v) ** 2)
    check_grads(f, np.array(0.3), RNG.normal(size=4), argnums=(0, 1))


def test_python_floats_and_variadic_functions():
    """Autograd's own check: Python floats in and out (math-module code), *args."""
    bar = checkpoint(lambda x, y: 2 * x + np.sin(y) + 5)
    both = ad.value_and_grad(lambda x: bar(x, x / 3.0) + bar(x, x ** 2))
    value, g = both(3.0)
    assert type(value) is float and type(g) is float
    assert value == 6 + np.sin(1.0) + 6 + np.sin(9.0) + 10
    np.testing.assert_allclose(g, 2 + np.cos(1.0) / 3 + 2 + np.cos(9.0) * 6, rtol=1e-14)
    total = checkpoint(lambda *args: sum(args))
    assert ad.grad(lambda x: total(x, x / 3.0, x * x))(3.0) == pytest.approx(1 + 1 / 3 + 6)


def test_a_checkpointed_function_passed_as_an_argument():
    def f(a):
        for _ in range(3):
            a = np.sin(a ** 2 + 1)
        return a

    def repeat(f, x):
        for _ in range(3):
            x = f(x)
        return np.sum(x)
    x = RNG.normal(size=20)
    g = ad.grad(repeat, argnums=1)
    np.testing.assert_allclose(g(checkpoint(f), x), g(f, x), rtol=1e-13)


def test_a_mask_a_branch_and_a_closure_over_an_outer_trace_inside():
    @checkpoint
    def positive(h):  # a data-dependent size
        m = h[h > 0]
        return np.sum(np.exp(m) * m)

    @checkpoint
    def branch(h):  # a guard: the other path traces again
        return np.tanh(h) * 2 if np.sum(h) > 0 else np.sin(h)

    def f(h):
        return positive(h * 1.5) + np.sum(branch(h) ** 2)

    def plain(h):
        return positive.__wrapped__(h * 1.5) + np.sum(branch.__wrapped__(h) ** 2)
    g = ad.grad(f)
    for seed in range(4):
        h = np.random.default_rng(seed).normal(size=7)
        np.testing.assert_allclose(g(h), ad.grad(plain)(h), rtol=1e-13)
        np.testing.assert_allclose(g(h), tape.grad(plain)(h), rtol=1e-13)

    def outer(x):  # an inner grad whose checkpointed function closes over x
        inner = lambda y: np.sum(checkpoint(lambda y: np.sin(x * y) * y)(y) ** 2)
        return np.sum(ad.grad(inner)(x) * x)

    def outer_plain(x):
        return np.sum(ad.grad(lambda y: np.sum((np.sin(x * y) * y) ** 2))(x) * x)
    x = RNG.normal(size=4)
    np.testing.assert_allclose(ad.grad(outer)(x), ad.grad(outer_plain)(x), rtol=1e-12)


def test_outside_a_transformation_it_is_the_function():
    W, x, h = _args()
    np.testing.assert_array_equal(ck_cell(h, x, W), cell(h, x, W))
    assert ck_cell.__name__ == "cell" and ck_cell.__wrapped__ is cell
    with pytest.raises(TypeError, match="checkpoint"):
        checkpoint(3)


def test_a_random_draw_inside_is_kept_not_drawn_again():
    @checkpoint
    def noisy(h, W, rng):
        z = h @ W + 0.1 * rng.normal(size=h.shape)
        return np.tanh(z) * z

    def f(W, h, seed):
        rng = np.random.default_rng(seed)
        return np.sum(noisy(noisy(h, W, rng), W, rng))

    def plain(W, h, seed):
        rng = np.random.default_rng(seed)
        return np.sum(noisy.__wrapped__(noisy.__wrapped__(h, W, rng), W, rng))
    W, _, h = _args()
    for seed in (3, 4):
        np.testing.assert_allclose(ad.grad(f)(W, h, seed), ad.grad(plain)(W, h, seed),
                                   rtol=1e-12)
    backward = ad.grad(f).source(W, h, 3).split("# backward")[1]
    assert "normal" not in backward


# ---- the emitted code -------------------------------------------------------------------
def _sections(f, *args):
    """The generated function's forward and backward parts."""
    source = ad.value_and_grad(f).source(*args)
    forward, backward = source.split("    # forward\n")[1].split("    # backward\n")
    return forward, backward


def _code(part):
    """The code without its comments (which quote the user's lines)."""
    return "\n".join(line.split("#")[0] for line in part.splitlines())


def test_the_recomputation_is_in_the_backward_and_says_so():
    W, x, h = _args()
    forward, backward = _sections(twice, W, x, h)
    assert "_recompute_from(" not in forward
    assert backward.count("recompute of checkpointed cell, test_checkpoint.py:") == 2
    # each replay starts from the cell's inputs, read only once the cotangent is there
    line = next(ln for ln in backward.splitlines() if "recompute of checkpointed" in ln)
    assert "= _recompute_from(" in line and ", g_" in line
    # the replay survives the passes: the second cell's sin is computed again in the
    # backward, where the plain function's code keeps the forward's (the first cell's is
    # read by the gradient with respect to h only, which is not asked for)
    plain_forward, plain_backward = map(_code, _sections(twice_plain, W, x, h))
    forward, backward = _code(forward), _code(backward)
    assert forward.count("np.sin(") == plain_forward.count("np.sin(") == 2
    assert backward.count("np.sin(") == 1 and plain_backward.count("np.sin(") == 0


def _kept(f, *args):
    """The names the forward part assigns and the backward part reads (not a dead buffer
    the backward writes into, `out=power`: the memory plan's pool, emit_memory.py)."""
    forward, backward = map(_code, _sections(f, *args))
    backward = re.sub(r"out=\w+|^ *del .*$", "", backward, flags=re.MULTILINE)
    assigned = set(re.findall(r"^ *(\w+) = ", forward, re.MULTILINE))
    return assigned & set(re.findall(r"(?<![.\w])\w+", backward))  # not np.multiply


def test_the_forward_keeps_only_the_outputs_of_a_checkpointed_call():
    """The plain cells keep sin's argument and result for the backward (`cos(add)`,
    `u * g`); checkpointed, the forward keeps each cell's output (and the value) alone."""
    W, x, h = _args()
    kept, plain = _kept(twice, W, x, h), _kept(twice_plain, W, x, h)
    assert kept == {"cell", "cell_1", "twice"}  # what each cell returns, named after it
    assert {"add", "add_1", "u_1"} <= plain


def test_nested_checkpoints_replay_the_inner_one_again():
    W, x, h = _args()
    _, backward = _sections(nested, W, x, h)
    assert "recompute of checkpointed two_cells" in backward
    assert backward.count("recompute of checkpointed two_cells") == 2
    assert backward.count("recompute of checkpointed cell") >= 4
    plain_backward = _code(_sections(nested_plain, W, x, h)[1])
    # sin: in each outer replay, for the first cell's output (2), and again in the cells'
    # own replays (4, less the very first cell's, which only h's gradient would read)
    assert _code(backward).count("np.sin(") == 5 and plain_backward.count("np.sin(") == 0


@pytest.mark.skipif(not passes.ENABLED, reason="the stable forms are a pass")
def test_stable_forms_inside_a_checkpoint():
    @checkpoint
    def softplus(z):
        return np.log(1 + np.exp(z)) * 2.0

    z = np.array([-800.0, -1.0, 0.0, 3.0, 800.0])
    with np.errstate(over="ignore", invalid="ignore"):
        g = ad.grad(lambda z: np.sum(softplus(z * 1.0)))(z)
    np.testing.assert_allclose(g, 2 * np.exp(-np.logaddexp(0, -z)), rtol=1e-12)  # 2 sigmoid


# ---- memory: a recurrent net ------------------------------------------------------------
def step(h, x, W1, W2, U):  # a two-layer transition: u is kept for the backward
    u = np.tanh(h @ W1 + x @ U)
    return np.tanh(u @ W2)


ck_step = checkpoint(step)


def rnn(kind, k=1):
    def loss(W1, W2, U, xs, h0):
        h = h0
        if kind == "segments":  # every k steps
            @checkpoint
            def segment(h, xs):
                for t in range(xs.shape[0]):
                    h = step(h, xs[t], W1, W2, U)
                return h
            for s in range(0, xs.shape[0], k):
                h = segment(h, xs[s:s + k])
        else:
            one = ck_step if kind == "steps" else step
            for t in range(xs.shape[0]):
                h = one(h, xs[t], W1, W2, U)
        return np.sum(h * h)
    return ad.value_and_grad(loss, argnums=(0, 1, 2))


def _peak(f, *args):
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        start = tracemalloc.get_traced_memory()[0]
        result = f(*args)
        peak = tracemalloc.get_traced_memory()[1] - start
        del result
    finally:
        tracemalloc.stop()
    return peak


@pytest.mark.usefixtures("written_out")
def test_checkpointing_a_recurrent_net_lowers_its_peak_memory():
    T, B, H = 36, 16, 32
    W1, W2, U = (RNG.normal(size=(H, H)) / np.sqrt(H) for _ in range(3))
    xs, h0 = RNG.normal(size=(T, B, H)), np.zeros((B, H))
    peaks, grads = {}, {}
    for kind, k in (("none", 1), ("steps", 1), ("segments", 6)):
        f = rnn(kind, k)
        grads[kind] = f(W1, W2, U, xs, h0)[1]  # compiled before measuring
        peaks[kind] = _peak(f, W1, W2, U, xs, h0)
    for kind in ("steps", "segments"):
        _close(grads[kind], grads["none"], 1e-11)
    state = B * H * 8
    # kept by the plain net: h and u of every step (2 T states); by one checkpoint per
    # step: h only (T); by one per 6 steps: 6 boundaries and one segment's inside
    assert peaks["none"] > 2 * T * state
    assert peaks["steps"] < 0.6 * peaks["none"]
    assert peaks["segments"] < 0.6 * peaks["steps"]
