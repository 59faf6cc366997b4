"""Random draws inside a differentiated function are run-time steps of the generated code.

Each test seeds the generators once, calls the compiled function several times (with new
data, at other batch sizes too), then re-seeds and calls the eager reference (NumPy for
values, the tape for gradients) as many times: every call must draw the same numbers, so
values and gradients agree call by call, and the generators end in the same state.
Gradients are also checked against central finite differences of the eager function with
the noise fixed (re-seeded before each evaluation).
"""

import threading

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen import grad, hessian, hvp, jvp, tape, value_and_grad, vjp
from autodiffgen.errors import TracingError, UnsupportedOperationError
from autodiffgen.testing import check_grads

DATA = np.random.default_rng(20261124)
W = DATA.standard_normal((5, 4))
B = DATA.standard_normal(4)
XS = [DATA.standard_normal((n, 5)) for n in (12, 12, 9)]  # the third call: another batch


def seeded(seed=0):
    """np.random's global state and a Generator, both seeded."""
    np.random.seed(seed)
    return np.random.default_rng(seed + 1000)


def states(rng):
    """What the generators would draw next (without changing them)."""
    legacy, own = np.random.get_state(), rng.bit_generator.state
    after = (np.random.rand(3), rng.random(3))
    np.random.set_state(legacy)
    rng.bit_generator.state = own
    return after


def fd_grad(f, args, i, eps=1e-6, seed=0, with_rng=True):
    """Central differences of f in args[i], the noise fixed by re-seeding before each call."""
    x = np.array(args[i], dtype=np.float64)
    g = np.zeros_like(x)
    for k in np.ndindex(x.shape):
        vals = []
        for sign in (1, -1):
            moved = x.copy()
            moved[k] += sign * eps
            rng = seeded(seed)
            call = list(args)
            call[i] = moved
            vals.append(f(*call, rng) if with_rng else f(*call))
        g[k] = (vals[0] - vals[1]) / (2 * eps)
    return g


def compare(fun, make_args, argnums=0, calls=3, fd=True, rtol=1e-7):
    """Seed once and call the compiled function `calls` times; re-seed and call the eager
    function and the tape as many times: equal values and gradients, equal final states."""
    compiled = value_and_grad(fun, argnums=argnums)
    rng = seeded()
    got = [compiled(*make_args(rng, k)) for k in range(calls)]
    after = states(rng)
    rng = seeded()
    eager = [fun(*make_args(rng, k)) for k in range(calls)]
    check_states_equal_to(after, rng)
    rng = seeded()
    ref = [tape.value_and_grad(fun, argnums=argnums)(*make_args(rng, k)) for k in range(calls)]
    for (value, g), e, (tv, tg) in zip(got, eager, ref):
        np.testing.assert_allclose(value, e, rtol=rtol)
        np.testing.assert_allclose(value, tv, rtol=rtol)
        for a, b in zip(ad.tree.leaves(g), ad.tree.leaves(tg)):
            if a is not None or b is not None:
                np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-12)
    assert compiled.cache_info().misses == 1  # a new Generator per call: no retrace
    return compiled, got


def check_states_equal(rng_a, rng_b):
    a, b = states(rng_a), states(rng_b)
    assert all(np.array_equal(u, v) for u, v in zip(a, b))


# ---- dropout ---------------------------------------------------------------------------------
def dropout_legacy(W, b, x, p):
    h = np.tanh(x @ W + b)
    mask = np.random.rand(*h.shape) < p
    h = h * mask / p
    return np.mean(h ** 2) + np.sum(np.random.randn(4) * b)


def dropout_rng(W, b, x, rng, p=0.7):
    h = np.tanh(x @ W + b)
    mask = rng.random(h.shape) < p
    return np.mean((h * mask / p) ** 2)


def test_dropout_with_np_random_rand_draws_as_eager_numpy_call_by_call():
    compiled, got = compare(dropout_legacy, lambda rng, k: (W, B, XS[k], 0.7), argnums=(0, 1))
    assert len({float(v) for v, _ in got}) == 3  # a new mask each call, not a frozen one
    source = compiled.source(W, B, XS[0], 0.7)
    assert "np.random.rand(n, 4)" in source and "np.random.randn(4)" in source


def test_dropout_with_a_generator_argument_draws_as_eager_numpy_call_by_call():
    compiled, got = compare(dropout_rng, lambda rng, k: (W, B, XS[k], rng), argnums=(0, 1))
    assert len({float(v) for v, _ in got}) == 3
    assert "rng.random((n, 4))" in compiled.source(W, B, XS[0], np.random.default_rng(0))


def test_dropout_gradients_match_finite_differences_with_the_noise_fixed():
    for fun, extra in ((dropout_rng, ()), (dropout_legacy, (0.7,))):
        g = grad(fun, argnums=(0, 1))
        for k in range(2):
            rng = seeded(k)
            args = (W, B, XS[k]) + extra + ((rng,) if not extra else ())
            gW, gb = g(*args)
            call = (lambda W_, b_, rng, f=fun, k=k: f(W_, b_, XS[k], rng)) if not extra else \
                (lambda W_, b_, rng, f=fun, k=k: f(W_, b_, XS[k], 0.7))
            np.testing.assert_allclose(gW, fd_grad(call, (W, B), 0, seed=k), rtol=1e-5,
                                       atol=1e-8)
            np.testing.assert_allclose(gb, fd_grad(call, (W, B), 1, seed=k), rtol=1e-5,
                                       atol=1e-8)


def test_a_new_generator_object_each_call_reuses_the_code_and_draws_from_it():
    f = grad(dropout_rng)
    for seed in range(3):
        g = f(W, B, XS[0], np.random.default_rng(seed))
        np.testing.assert_allclose(g, tape.grad(dropout_rng)(W, B, XS[0],
                                                             np.random.default_rng(seed)))
    assert f.cache_info().misses == 1


# ---- reparameterization ------------------------------------------------------------------------
def vae_like(mu, log_sigma, x, rng):
    z = mu + np.exp(log_sigma) * rng.standard_normal(mu.shape)
    return np.sum((x[:, :4] @ np.diag(z)) ** 2) * 0.01 + np.sum(log_sigma ** 2)


def reparam_methods(mu, log_sigma, x, rng):
    sigma = np.exp(log_sigma)
    z = rng.normal(mu, sigma)
    u = rng.uniform(mu, mu + sigma)
    e = rng.exponential(sigma, size=(3, 4))
    legacy = np.random.normal(mu, sigma)
    return np.sum(x[:, :4] * z) * 0.1 + np.sum(u ** 2) + np.sum(e) + np.sum(legacy ** 2)


MU, LOG_SIGMA = DATA.standard_normal(4) * 0.3, DATA.standard_normal(4) * 0.2


@pytest.mark.parametrize("fun", [vae_like, reparam_methods])
def test_reparameterization_noise_draws_and_differentiates_as_eager(fun):
    compare(fun, lambda rng, k: (MU, LOG_SIGMA, XS[k], rng), argnums=(0, 1))
    rng = seeded(3)
    gmu, gs = grad(fun, argnums=(0, 1))(MU, LOG_SIGMA, XS[0], rng)

    def call(mu, ls, rng):
        return fun(mu, ls, XS[0], rng)
    np.testing.assert_allclose(gmu, fd_grad(call, (MU, LOG_SIGMA), 0, seed=3), rtol=1e-5)
    np.testing.assert_allclose(gs, fd_grad(call, (MU, LOG_SIGMA), 1, seed=3), rtol=1e-5)


def test_rng_normal_of_a_differentiated_mean_is_written_as_its_reparameterization():
    src = value_and_grad(reparam_methods).source(MU, LOG_SIGMA, XS[0], np.random.default_rng(0))
    code = "\n".join(line.split("  #")[0] for line in src.splitlines())
    assert "= rng.standard_normal((4,))" in code and "rng.normal(" not in code
    assert "np.random.standard_normal((4,))" in src


def test_permutation_and_choice_of_a_differentiated_array_are_indexing():
    def f(w, rng):
        return np.sum(rng.permutation(w)[:2] * np.arange(2.0)) + \
            np.sum(rng.choice(w, size=3) ** 2) + np.sum(np.random.permutation(w) ** 3)
    w = DATA.standard_normal(6)
    compare(f, lambda rng, k: (w, rng))
    rng = seeded(1)
    np.testing.assert_allclose(grad(f)(w, rng), fd_grad(f, (w,), 0, seed=1), rtol=1e-6)


# ---- generators in pytrees, RandomState, made inside -----------------------------------------------
def in_a_dict(params, x):
    h = np.tanh(x @ params["W"])
    rng = params["rng"]
    keep = rng.binomial(1, 0.8, size=h.shape)
    k = rng.integers(0, 3)
    return np.mean(h * keep) + np.sum(params["W"][k]) + np.sum(rng.choice(4, size=2))


def test_a_generator_inside_a_dict_argument():
    compiled, got = compare(in_a_dict, lambda rng, k: ({"W": W, "rng": rng}, XS[k]))
    assert got[0][1]["rng"] is None and got[0][1]["W"].shape == W.shape
    assert 'rng = params["rng"]' in compiled.source({"W": W, "rng": np.random.default_rng()},
                                                   XS[0]).replace("'", '"')


def test_a_legacy_random_state_argument():
    def f(W, x, rs):
        h = np.tanh(x @ W)
        return np.mean(h * (rs.rand(*h.shape) < 0.5)) + rs.randint(0, 5) + rs.random_sample()
    compare(f, lambda rng, k: (W, XS[k], np.random.RandomState(7)))
    rs = np.random.RandomState(7)
    f_c = grad(f)
    for _ in range(3):
        f_c(W, XS[0], rs)
    ref = np.random.RandomState(7)
    for _ in range(3):
        f(W, XS[0], ref)
    assert rs.random_sample() == ref.random_sample()


def test_a_generator_created_inside_the_function():
    def f(W, x):
        rng = np.random.default_rng(42)
        h = np.tanh(x @ W)
        return np.mean(h * (rng.random(h.shape) < 0.5)) + np.sum(np.random.rand(2))
    compiled, got = compare(f, lambda rng, k: (W, XS[k]))
    assert "np.random.default_rng(42)" in compiled.source(W, XS[0])
    np.testing.assert_allclose(got[0][1], fd_grad(lambda W_, rng: f(W_, XS[0]), (W,), 0),
                               rtol=1e-6)


# ---- state: tracing draws nothing; the tape draws as eager does -------------------------------------
def test_tracing_and_source_do_not_advance_the_generators():
    rng = seeded()
    before = states(rng)
    f = value_and_grad(dropout_rng)
    ad.emit(dropout_rng, W, B, XS[0], rng)
    f.source(W, B, XS[0], rng)  # traces (three sizes) and runs the code to pick it
    f.source(W, B, XS[2], rng)
    ad.emit(dropout_legacy, W, B, XS[0], 0.7)
    check_states_equal_to(before, rng)


def check_states_equal_to(before, rng):
    assert all(np.array_equal(a, b) for a, b in zip(before, states(rng)))


def test_the_tape_draws_as_eager_numpy():
    rng = seeded()
    value, _ = tape.value_and_grad(dropout_rng)(W, B, XS[0], rng)
    after = states(rng)
    rng = seeded()
    assert value == dropout_rng(W, B, XS[0], rng)
    check_states_equal_to(after, rng)


# ---- transformations ------------------------------------------------------------------------------
def noisy_layer(W, x, rng):
    h = np.tanh(x @ W)
    return h * (rng.random(h.shape) < 0.6) + 0.1 * np.random.randn(*h.shape)


def noisy_loss(W, x, rng):
    return np.sum(noisy_layer(W, x, rng) ** 2)


def test_jvp_and_vjp_draw_as_eager_numpy():
    V = np.ones_like(W)
    rng = seeded()
    got = [jvp(noisy_layer, (W, XS[k], rng), (V, None, None)) for k in range(3)]
    after = states(rng)
    rng = seeded()
    ref = [tape.jvp(noisy_layer, (W, XS[k], rng), (V, None, None)) for k in range(3)]
    check_states_equal_to(after, rng)
    for (o, t), (ro, rt) in zip(got, ref):
        np.testing.assert_allclose(o, ro)
        np.testing.assert_allclose(t, rt)
    rng = seeded()
    out, back = vjp(noisy_layer, W, XS[0], rng)
    gW = back(np.ones_like(out))[0]
    after = states(rng)
    rng = seeded()
    np.testing.assert_allclose(out, noisy_layer(W, XS[0], rng))
    check_states_equal_to(after, rng)
    rng = seeded()
    np.testing.assert_allclose(gW, tape.grad(lambda W_, x, r: np.sum(noisy_layer(W_, x, r)))(
        W, XS[0], rng))


def test_hessian_and_hvp_with_the_noise_fixed():
    x = XS[0][:4]
    rng = seeded()
    H = hessian(noisy_loss)(W, x, rng)
    after = states(rng)
    rng = seeded()
    noisy_loss(W, x, rng)  # the Hessian's forward draws once, as one eager call
    check_states_equal_to(after, rng)

    def g(W_, rng):
        return tape.grad(noisy_loss)(W_, x, rng)
    ref = np.zeros(W.shape * 2)
    for k in np.ndindex(W.shape):
        E = np.zeros_like(W)
        E[k] = 1e-6
        ref[(...,) + k] = (g(W + E, seeded()) - g(W - E, seeded())) / 2e-6
    np.testing.assert_allclose(H, ref, atol=1e-6)
    V = DATA.standard_normal(W.shape)
    Hv = hvp(noisy_loss, (W, x, seeded()), (V, None, None))
    np.testing.assert_allclose(Hv, np.einsum("ijkl,kl->ij", ref, V), atol=1e-6)


def test_grad_of_grad_draws_once_per_call():
    def s(t, rng):
        return np.sum(np.sin(t * rng.random(3)))
    d2 = grad(lambda t, rng: np.sum(grad(s)(t, rng)))
    u = np.random.default_rng(5).random(3)
    for _ in range(2):
        rng = np.random.default_rng(5)
        assert d2(np.float64(0.7), rng) == pytest.approx(np.sum(-u * u * np.sin(0.7 * u)))
        check_states_equal(rng, _advanced(5, 3))


def _advanced(seed, n):
    rng = np.random.default_rng(seed)
    rng.random(n)
    return rng


# ---- float32, standalone --------------------------------------------------------------------------
def test_float32_keeps_float32_and_draws_as_eager():
    W32, x32 = W.astype(np.float32), XS[0].astype(np.float32)

    def f(W, x, rng):
        h = np.tanh(x @ W)
        u = rng.random(h.shape, dtype=np.float32)
        n = rng.standard_normal(h.shape, dtype=np.float32)
        return np.sum((h * (u < 0.5) + np.float32(0.1) * n) ** 2)
    rng = seeded()
    value, g = value_and_grad(f)(W32, x32, rng)
    assert g.dtype == np.float32 and np.asarray(value).dtype == np.float32
    rng = seeded()
    tv, tg = tape.value_and_grad(f)(W32, x32, rng)
    assert value == tv
    np.testing.assert_allclose(g, tg, rtol=1e-6)


def test_standalone_module_takes_the_generator_and_uses_np_random():
    source = ad.emit(dropout_rng, W, B, XS[0], np.random.default_rng(0), standalone=True)
    legacy = ad.emit(dropout_legacy, W, B, XS[0], 0.7, standalone=True)
    for src, name, args in ((source, "dropout_rng_value_and_grad", (W, B, XS[0])),
                            (legacy, "dropout_legacy_value_and_grad", (W, B, XS[0], 0.7))):
        scope = {}
        exec(compile(src, "<standalone>", "exec"), scope)  # noqa: S102  our generated module
        rng = seeded()
        extra = (rng,) if "rng" in name else ()
        value, _ = scope[name](*args, *extra)
        after = states(rng)
        rng = seeded()
        ref = (dropout_rng if extra else dropout_legacy)(*args, *((rng,) if extra else ()))
        assert value == ref
        check_states_equal_to(after, rng)


# ---- what is refused, with the user's line -----------------------------------------------------------
GLOBAL_RNG = np.random.default_rng(0)


def _reads_global_rng(w):
    return np.sum(w * GLOBAL_RNG.random(w.shape))


@pytest.mark.parametrize("body, error, words", [
    (lambda w, rng: np.sum(w) if rng.random() < 0.5 else np.sum(2 * w), TracingError,
     "randomly drawn value"),
    (lambda w, rng: np.sum(rng.binomial(3, 1 / (1 + np.exp(-w)))), TracingError,
     "no derivative with respect to its parameter 'p'"),
    (lambda w, rng: np.sum(rng.gamma(w * w)), TracingError, "stop_gradient"),
    (lambda w, rng: np.sum(w) + np.random.seed(1), UnsupportedOperationError, "seeds"),
    (lambda w, rng: np.sum(rng.random(w.shape, out=np.empty(w.shape)) * w), TracingError,
     "out="),
    (lambda w, rng: np.sum(rng.spawn(1)), Exception, "Generator.spawn is not supported"),
    (lambda w, rng: np.sum(w * rng.random(np.sum(w > 0))), TracingError, "static argument"),
    (lambda w, rng: np.sum(w * np.random.default_rng(np.random.SeedSequence(1)).random(3)),
     TracingError, "an int (or None)"),
])
def test_refused_with_a_clear_message_naming_the_line(body, error, words):
    with pytest.raises(error, match="test_random.py:") as info:
        grad(body)(np.ones(3), np.random.default_rng(0))
    assert words in str(info.value)


def test_a_generator_read_from_a_global_draws_at_run_time_as_eager():
    global GLOBAL_RNG
    f = grad(_reads_global_rng)
    w = np.linspace(0.5, 1.5, 3)
    for seed in (1, 2):
        GLOBAL_RNG = np.random.default_rng(seed)  # rebound: read again, no retrace
        got = [f(w) for _ in range(3)]
        GLOBAL_RNG = np.random.default_rng(seed)
        want = [GLOBAL_RNG.random(w.shape) for _ in range(3)]  # d sum(w * u) / dw = u
        for g, u in zip(got, want):
            np.testing.assert_array_equal(g, u)
    assert f.cache_info().misses == 1
    assert "GLOBAL_RNG" in f.source(w) and ".random((3,))" in f.source(w)


def test_a_standalone_module_refuses_a_generator_read_from_a_global():
    with pytest.raises(TracingError, match="GLOBAL_RNG"):
        ad.emit(_reads_global_rng, np.ones(3), standalone=True)


def test_a_differentiated_parameter_of_a_draw_is_fine_under_stop_gradient():
    def f(w, rng):
        return np.sum(w * rng.binomial(1, ad.stop_gradient(1 / (1 + np.exp(-w)))))
    compare(f, lambda rng, k: (np.linspace(-1, 1, 5), rng))


# ---- np.random's functions are intercepted only in the tracing thread, and restored --------------------
def test_interception_is_undone_on_every_exit_and_other_threads_draw_normally():
    originals = np.random.rand, np.random.normal, np.random.default_rng
    with pytest.raises(TracingError):
        grad(lambda w: np.sum(w * np.random.rand(3)) if np.random.rand() < 2 else 0.0)(
            np.ones(3))
    assert (np.random.rand, np.random.normal, np.random.default_rng) == originals
    started, release, seen = threading.Event(), threading.Event(), []

    def slow_loss(w):
        started.set()
        release.wait(5)
        return np.sum(w * np.random.rand(3))

    def other():
        started.wait(5)
        np.random.seed(9)  # a plain eager use while the trace runs in the main thread
        seen.append(np.random.rand(2))
        seen.append(np.random.default_rng(1).random())
        release.set()
    worker = threading.Thread(target=other)
    worker.start()
    np.random.seed(0)
    value = value_and_grad(slow_loss)(np.ones(3))[0]
    worker.join(5)
    np.random.seed(9)
    np.testing.assert_array_equal(seen[0], np.random.rand(2))
    assert seen[1] == np.random.default_rng(1).random()
    assert type(value) is not ad.trace.boxes.Box
    assert (np.random.rand, np.random.normal, np.random.default_rng) == originals


def test_code_from_the_disk_cache_draws_as_eager(tmp_path, monkeypatch):
    from autodiffgen import diskcache
    from autodiffgen.cache.disk import store
    from autodiffgen.trace import tracer
    for name in ("_explicit", "_path", "_max_bytes"):  # put back after the test
        monkeypatch.setattr(store, name, getattr(store, name))
    diskcache.enable(tmp_path / "cache")
    rng = seeded()
    first = value_and_grad(dropout_rng)(W, B, XS[0], rng)  # traced, stored
    monkeypatch.setattr(tracer, "trace", None)  # a trace now would fail
    again = value_and_grad(dropout_rng)
    got = [again(W, B, XS[k], rng) for k in range(2)]
    rng = seeded()
    eager = [dropout_rng(W, B, x, rng) for x in (XS[0], XS[0], XS[1])]
    assert [first[0]] + [v for v, _ in got] == eager


def test_a_data_dependent_branch_fails_its_guard_before_any_draw():
    def f(w, x, rng):
        h = np.tanh(x @ w)
        if np.sum(x) > 0:  # a guard on the data: checked before the code draws
            h = h * (rng.random(h.shape) < 0.5)
        else:
            h = h + np.random.randn(*h.shape)
        return np.sum(h ** 2)
    xs = [XS[0], -XS[0], XS[0] * 2, -XS[0] * 0.5]
    assert np.sum(xs[0]) > 0 or np.sum(xs[1]) > 0
    compiled = value_and_grad(f)
    rng = seeded()
    got = [compiled(W, x, rng) for x in xs]
    after = states(rng)
    rng = seeded()
    ref = [tape.value_and_grad(f)(W, x, rng) for x in xs]
    check_states_equal_to(after, rng)
    for (v, g), (tv, tg) in zip(got, ref):
        assert v == pytest.approx(tv, rel=1e-12)
        np.testing.assert_allclose(g, tg, rtol=1e-10)


def test_two_threads_tracing_at_once_draw_each_from_their_own_generator():
    errors, results = [], {}

    def work(seed):
        try:
            f = value_and_grad(lambda w, x, rng: np.sum(np.tanh(x @ w) * rng.random((12, 4))) +
                               np.sum(np.random.rand(2) * 0))
            rng = np.random.default_rng(seed)
            results[seed] = [f(W, XS[0], rng)[0] for _ in range(3)]
        except Exception as error:  # noqa: BLE001  reported below
            errors.append(error)
    threads = [threading.Thread(target=work, args=(s,)) for s in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    for seed, values in results.items():
        rng = np.random.default_rng(seed)
        assert values == [np.sum(np.tanh(XS[0] @ W) * rng.random((12, 4))) for _ in range(3)]


# ---- np.random.default_rng(seed) with a traced int seed (review A item 4) --------------
SEED = 3


def _noisy(x, seed):
    rng = np.random.default_rng(seed)
    return np.sum(np.sin(x) * rng.standard_normal(x.shape))


def _noisy_global(x):
    rng = np.random.default_rng(SEED)
    return np.sum(np.sin(x) * rng.standard_normal(x.shape))


def test_default_rng_seed_argument_is_an_input():
    f = ad.value_and_grad(_noisy)
    for seed in range(10):
        x = np.random.default_rng(100 + seed).standard_normal(4)
        value, g = f(x, seed)
        z = np.random.default_rng(seed).standard_normal(4)
        assert np.isclose(value, _noisy(x, seed))
        np.testing.assert_allclose(g, np.cos(x) * z)
        np.testing.assert_allclose(g, tape.grad(_noisy)(x, seed))
        check_grads(_noisy, x, seed, fwd=False)
    assert f.cache_info().misses == 1  # a new seed is a new input value, not a retrace
    assert "np.random.default_rng(seed)" in f.source(x, 0)


def test_default_rng_seed_from_a_rebound_global():
    global SEED
    f = ad.grad(_noisy_global)
    x = np.linspace(-1.0, 1.0, 3)
    try:
        for seed in range(10):
            SEED = seed
            z = np.random.default_rng(seed).standard_normal(3)
            np.testing.assert_allclose(f(x), np.cos(x) * z)
            np.testing.assert_allclose(f(x), tape.grad(_noisy_global)(x))
    finally:
        SEED = 3
    assert f.cache_info().misses == 1


def test_default_rng_seed_under_second_order():
    x = np.array([0.3, -1.2, 2.0])
    for seed in (1, 2, 7):
        z = np.random.default_rng(seed).standard_normal(3)
        np.testing.assert_allclose(ad.hessian(_noisy)(x, seed), np.diag(-np.sin(x) * z),
                                   atol=1e-12)
        gg = ad.grad(lambda t, s: ad.grad(_noisy)(t, s).sum())(x, seed)
        np.testing.assert_allclose(gg, -np.sin(x) * z)


def test_default_rng_float_seed_is_refused_clearly():
    with pytest.raises(ad.TracingError, match="takes one seed"):
        ad.grad(_noisy)(np.ones(2), 1.5)


def _sampler(num_samples, D):
    """Autograd's black_box_svi: the draw's size comes from ints read through a closure."""
    rs = np.random.RandomState(0)

    def objective(params):
        mean, log_std = params[:D], params[D:]
        samples = rs.randn(num_samples, D) * np.exp(log_std) + mean
        return np.sum(samples ** 2)
    return objective, rs


@pytest.mark.parametrize("num_samples, D", [(3, 2), (5, 1)])
def test_a_size_read_from_a_closures_ints_draws_as_eager(num_samples, D):
    objective, rs = _sampler(num_samples, D)
    f = ad.value_and_grad(objective)
    params = np.linspace(-0.5, 0.5, 2 * D)
    got = [f(params + k) for k in range(3)]
    rs.seed(0)
    for k, (value, g) in enumerate(got):
        z = rs.randn(num_samples, D)
        mean, std = params[:D] + k, np.exp(params[D:] + k)
        samples = z * std + mean
        assert np.isclose(value, np.sum(samples ** 2))
        np.testing.assert_allclose(g, np.concatenate([
            2 * samples.sum(0), (2 * samples * z * std).sum(0)]))
    assert f.cache_info().misses == 1


def test_an_int_argument_as_a_size_is_guarded_per_value():
    def f(w, n):
        return np.sum(w * np.random.randn(n, 2))
    g = ad.grad(f)
    w = np.ones(2)
    seeded()
    got = [g(w, n) for n in (3, 4, 3)]
    seeded()
    for n, result in zip((3, 4, 3), got):
        np.testing.assert_allclose(result, np.random.randn(n, 2).sum(0))
    assert g.cache_info().misses == 2  # one trace per size, the guard tells them apart
