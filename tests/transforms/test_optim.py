"""autodiffgen.optim against torch.optim's update formulas written out here (not torch), over
several steps on a pytree of parameters; compile_step against the gradient call followed
by the reference update, in place, cached, float32 kept."""

import importlib
import math

import numpy as np
import pytest

from autodiffgen import ArgumentError, nn, optim, value_and_grad

RNG = np.random.default_rng(0)


def loss(params, x, y):
    h = np.tanh(x @ params["W"] + params["b"])
    return np.mean(nn.softmax_cross_entropy(h @ params["V"][0], y)) + 0.1 * params["V"][1]


def make_params(dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    return {"W": rng.normal(size=(5, 6)).astype(dtype), "b": np.zeros(6, dtype),
            "V": [rng.normal(size=(6, 3)).astype(dtype), np.array(0.5, dtype)]}


def batch(seed, n=12, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 5)).astype(dtype), rng.integers(0, 3, n)


def flat(tree):
    return [tree["W"], tree["b"], tree["V"][0], tree["V"][1]]


# ---- the reference: torch.optim's loops, one parameter at a time, the step an int ------
class Reference:
    def __init__(self, kind, **hp):
        self.kind, self.hp, self.t, self.state = kind, hp, 0, {}

    def step(self, ps, gs):
        self.t += 1
        return [self.one(i, p, g) for i, (p, g) in enumerate(zip(ps, gs))]

    def one(self, i, p, g):
        hp, st = self.hp, self.state.setdefault(i, {})
        wd = hp.get("weight_decay", 0.01 if self.kind == "adamw" else 0.0)  # torch defaults
        if self.kind == "sgd":
            g = g + wd * p
            mu = hp.get("momentum", 0.0)
            if mu:
                st["buf"] = g.copy() if "buf" not in st else mu * st["buf"] + g
                g = g + mu * st["buf"] if hp.get("nesterov") else st["buf"]
            return p - hp["lr"] * g
        if self.kind in ("adam", "adamw"):
            b1, b2 = hp.get("betas", (0.9, 0.999))
            if self.kind == "adamw":
                p = p * (1 - hp["lr"] * wd)
            else:
                g = g + wd * p
            st["m"] = b1 * st.get("m", 0.0) + (1 - b1) * g
            st["v"] = b2 * st.get("v", 0.0) + (1 - b2) * g * g
            step_size = hp["lr"] / (1 - b1 ** self.t)
            denom = np.sqrt(st["v"]) / math.sqrt(1 - b2 ** self.t) + hp.get("eps", 1e-8)
            return p - step_size * st["m"] / denom
        alpha, eps = hp.get("alpha", 0.99), hp.get("eps", 1e-8)  # rmsprop
        g = g + wd * p
        st["sq"] = alpha * st.get("sq", 0.0) + (1 - alpha) * g * g
        avg = st["sq"]
        if hp.get("centered"):
            st["ga"] = alpha * st.get("ga", 0.0) + (1 - alpha) * g
            avg = avg - st["ga"] ** 2
        avg = np.sqrt(avg) + eps
        if hp.get("momentum"):
            st["buf"] = hp["momentum"] * st.get("buf", 0.0) + g / avg
            return p - hp["lr"] * st["buf"]
        return p - hp["lr"] * g / avg


CASES = [
    ("sgd", optim.SGD, {"lr": 0.1}),
    ("sgd", optim.SGD, {"lr": 0.1, "momentum": 0.9}),
    ("sgd", optim.SGD, {"lr": 0.1, "momentum": 0.8, "nesterov": True, "weight_decay": 0.01}),
    ("adam", optim.Adam, {"lr": 0.01}),
    ("adam", optim.Adam, {"lr": 0.02, "betas": (0.8, 0.99), "eps": 1e-6, "weight_decay": 0.1}),
    ("adamw", optim.AdamW, {"lr": 0.01}),
    ("adamw", optim.AdamW, {"lr": 0.03, "weight_decay": 0.2}),
    ("rmsprop", optim.RMSprop, {"lr": 0.01}),
    ("rmsprop", optim.RMSprop, {"lr": 0.01, "centered": True, "momentum": 0.5,
                                "weight_decay": 0.05}),
]
IDS = [f"{kind}-{'-'.join(hp)}" for kind, _, hp in CASES]
STEPS = 5


@pytest.mark.parametrize("kind, cls, hp", CASES, ids=IDS)
def test_update_follows_torch_formulas(kind, cls, hp):
    opt, ref = cls(**hp), Reference(kind, **hp)
    params = make_params()
    state = opt.init(params)
    expected = [p.copy() for p in flat(params)]
    vg = value_and_grad(loss)
    for k in range(STEPS):
        _, grads = vg(params, *batch(k))
        params, state = opt.update(params, grads, state)
        expected = ref.step(expected, flat(grads))
        for got, want in zip(flat(params), expected):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    assert state["step"] == STEPS


def test_update_leaves_its_arguments_alone():
    opt = optim.Adam(lr=0.1)
    params = make_params()
    state = opt.init(params)
    grads = value_and_grad(loss)(params, *batch(0))[1]
    saved = [np.copy(p) for p in flat(params) + flat(grads)]
    opt.update(params, grads, state)
    for a, b in zip(flat(params) + flat(grads), saved):
        np.testing.assert_array_equal(a, b)
    assert state["step"] == 0 and not np.any(state["m"]["W"])


@pytest.mark.parametrize("kind, cls, hp", CASES, ids=IDS)
def test_compiled_step_equals_gradient_call_and_update(kind, cls, hp):
    opt = cls(**hp)
    step = optim.compile_step(loss, opt)
    params = make_params()
    state = step.init(params)
    ids = [id(p) for p in flat(params)]
    expected = make_params()
    ref = Reference(kind, **hp)
    vg = value_and_grad(loss)
    for k in range(STEPS):
        value = step(params, state, *batch(k))
        want_value, grads = vg(expected, *batch(k))
        np.testing.assert_allclose(value, want_value, rtol=1e-13)
        new = ref.step(flat(expected), flat(grads))
        expected = {"W": new[0], "b": new[1], "V": [new[2], new[3]]}
        for got, want in zip(flat(params), new):
            np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-14)
    assert [id(p) for p in flat(params)] == ids  # the same arrays, written in place
    assert state["step"] == STEPS
    assert step.cache_info().misses == 1 and step.cache_info().hits == STEPS - 1


def test_state_is_updated_in_place_and_matches_the_functional_update():
    opt = optim.AdamW(lr=0.05)
    step = optim.compile_step(loss, opt)
    params, other = make_params(), make_params()
    state, other_state = step.init(params), opt.init(other)
    m_W, step_count = state["m"]["W"], state["step"]
    for k in range(3):
        step(params, state, *batch(k))
        grads = value_and_grad(loss)(other, *batch(k))[1]
        other, other_state = opt.update(other, grads, other_state)
    assert state["m"]["W"] is m_W and state["step"] is step_count and step_count == 3
    for name in ("m", "v"):
        for got, want in zip(flat(state[name]), flat(other_state[name])):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


def test_learning_rate_is_an_input_and_flags_are_in_the_key():
    opt = optim.SGD(lr=0.1, momentum=0.9)
    step = optim.compile_step(loss, opt)
    params = make_params()
    state = step.init(params)
    step(params, state, *batch(0))
    opt.lr = 0.01  # a schedule: the same code
    before = flat(params)[0].copy()
    grads = value_and_grad(loss)(params, *batch(1))[1]
    buf = 0.9 * state["momentum_buffer"]["W"] + grads["W"]
    step(params, state, *batch(1))
    np.testing.assert_allclose(params["W"], before - 0.01 * buf, rtol=1e-12)
    assert step.cache_info().misses == 1
    opt.nesterov = True  # another program: traced again
    step(params, state, *batch(2))
    assert step.cache_info().misses == 2


def test_float32_stays_float32_and_source_is_the_whole_step():
    opt = optim.Adam(lr=0.01)
    step = optim.compile_step(loss, opt)
    params = make_params(np.float32)
    state = step.init(params)
    x, y = batch(0, dtype=np.float32)
    step(params, state, x, y)
    step(params, state, *batch(1, dtype=np.float32))
    assert all(p.dtype == np.float32 for p in flat(params) + flat(state["m"]))
    expected = make_params()
    ref = Reference("adam", lr=0.01)
    for k in range(2):
        grads = value_and_grad(loss)(expected, *batch(k))[1]
        new = ref.step(flat(expected), flat(grads))
        expected = {"W": new[0], "b": new[1], "V": [new[2], new[3]]}
    for got, want in zip(flat(params), flat(expected)):
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=1e-5)
    source = step.source(params, state, x, y)
    assert "def loss_train_step(params, state, hyper, x, y):" in source
    assert "hyper_lr = hyper['lr']" in source and "# forward" in source
    # the optimizer's lines under their own header, pointing at its formulas: none of the caller's
    update = source[source.index("    # Adam update: optim.py:"):]
    assert "Adam._leaf" in update.splitlines()[0]
    assert "# backward" in source and "test_optim.py" not in update
    assert source.count("# forward") == 1


def test_what_the_loss_reads_besides_its_arguments_is_read_at_every_step():
    """A weight decay from a global, a scale in a closure dict replaced, a dropout mask
    drawn inside the loss: the step reads them again, as grad does (its trace is grad's)."""
    scales, gen = {"s": np.ones(2)}, np.random.default_rng(0)

    def regularized(params, x, y):
        keep = gen.random(x.shape) < 0.8
        return loss(params, x * keep, y) * np.sum(scales["s"]) + DECAY * np.sum(params["W"] ** 2)
    global DECAY
    step = optim.compile_step(regularized, optim.SGD(lr=0.1))
    for k in range(3):
        DECAY, scales["s"] = 0.1 * k, np.full(2, 1.0 + k)
        params, want = make_params(), make_params()
        x, y = batch(k)
        gen.bit_generator.state = np.random.default_rng(k).bit_generator.state
        step(params, step.init(params), x, y)
        gen.bit_generator.state = np.random.default_rng(k).bit_generator.state
        grads = value_and_grad(regularized)(want, x, y)[1]
        for got, old, g in zip(flat(params), flat(want), flat(grads)):
            np.testing.assert_allclose(got, old - 0.1 * g, rtol=1e-10, atol=1e-12)


DECAY = 0.0


def test_new_batch_size_traces_again_and_a_plain_float_parameter_is_refused():
    step = optim.compile_step(loss, optim.SGD(lr=0.1))
    params = make_params()
    state = step.init(params)
    step(params, state, *batch(0, n=12))
    step(params, state, *batch(1, n=7))
    step(params, state, *batch(2, n=7))
    assert step.cache_info().misses == 2
    params["V"][1] = 0.5  # a Python float cannot be written in place
    with pytest.raises(ArgumentError, match="writeable NumPy array"):
        step(params, state, *batch(0))


def test_nesterov_without_momentum_is_refused():
    with pytest.raises(ValueError, match="momentum"):
        optim.SGD(lr=0.1, nesterov=True)


def test_generated_code_writes_the_update_into_the_state_and_bias_arrays(monkeypatch):
    monkeypatch.setattr(importlib.import_module("autodiffgen.loops.roll"), "ENABLED", True)
    step = optim.compile_step(loss, optim.Adam(lr=0.01))
    params = make_params()
    state = step.init(params)
    source = step.source(params, state, *batch(0))
    # one loop over the parameters, updating the caller's arrays in place (loops/roll.py)
    assert "for p, g, m, v in ((params_W, g_params_W, state_m_W, state_v_W)," in source
    assert "m *= hyper_beta1" in source and "v *= hyper_beta2" in source
    assert "p -= " in source  # b is not read through a view: written in place
    m_W, b = state["m"]["W"], params["b"]
    expected_m = 0.1 * value_and_grad(loss)(params, *batch(0))[1]["W"]
    step(params, state, *batch(0))
    assert state["m"]["W"] is m_W and params["b"] is b
    np.testing.assert_allclose(m_W, expected_m, rtol=1e-12)


def test_arrays_that_share_memory_are_refused_and_left_alone():
    step = optim.compile_step(loss, optim.SGD(lr=0.1, momentum=0.9))
    params = make_params()
    state = step.init(params)
    before = params["W"].copy()
    shared = dict(params, b=params["W"][0])  # a view of W: written through twice
    with pytest.raises(ArgumentError, match="share memory"):
        step(shared, step.init(shared), *batch(0))
    x = params["W"].T  # (6, 5): a batch that is a view of a parameter
    with pytest.raises(ArgumentError, match="batch array shares memory"):
        step(params, state, x, np.arange(6) % 3)
    np.testing.assert_array_equal(params["W"], before)
    assert step.cache_info().misses == 0


def test_steps_are_never_stored_on_disk(tmp_path, monkeypatch):
    """Adam and AdamW have the same arguments: a disk key without the optimizer's code
    would hand one the other's step; a step is kept in memory only."""
    from autodiffgen import diskcache
    from autodiffgen.cache.disk import store

    monkeypatch.setattr(store, "_explicit", False)
    monkeypatch.setattr(store, "_path", None)
    diskcache.enable(tmp_path / "cache")
    try:
        results = []
        for cls in (optim.Adam, optim.AdamW):
            params = make_params()
            step = optim.compile_step(loss, cls(lr=0.1, weight_decay=0.5))
            step(params, step.init(params), *batch(0))
            results.append(params["W"])
        assert not np.allclose(results[0], results[1])
        assert not list((tmp_path / "cache").glob("*.adg"))
    finally:
        diskcache.disable()
