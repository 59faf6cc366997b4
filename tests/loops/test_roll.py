"""loops.roll: a compiled training step's update, one step per parameter as traced, kept
as one `for` loop over the parameters when the steps are one program; against the same
step written out (rolling off) and the optimizer's own eager update, over several steps,
in place, float32 kept; the steps that are not one program written out, and said why."""

import importlib
import logging

import numpy as np
import pytest

from autodiffgen import nn, optim, value_and_grad

roll_module = importlib.import_module("autodiffgen.loops.roll")


def loss(params, x, y):
    h = np.tanh(x @ params["W"] + params["b"])
    # the penalty's forward reads W and is no part of the update: computed before the loop
    return np.mean(nn.softmax_cross_entropy(h @ params["V"], y)) + 0.01 * np.sum(params["W"] ** 2)


def make_params(dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    return {"W": rng.normal(size=(5, 6)).astype(dtype), "b": np.zeros(6, dtype),
            "V": rng.normal(size=(6, 3)).astype(dtype)}


def batch(seed, n=12, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 5)).astype(dtype), rng.integers(0, 3, n)


def leaves(tree):
    return [tree[k] for k in sorted(tree)] if isinstance(tree, dict) else [tree]


def all_leaves(params, state):
    out = leaves(params)
    for name in sorted(state):
        out += leaves(state[name])
    return out


OPTIMIZERS = [
    lambda: optim.SGD(lr=0.1),
    lambda: optim.SGD(lr=0.1, momentum=0.8, nesterov=True, weight_decay=0.01),
    lambda: optim.Adam(lr=0.01),
    lambda: optim.Adam(lr=0.02, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1),
    lambda: optim.AdamW(lr=0.03, weight_decay=0.2),
    lambda: optim.RMSprop(lr=0.01, centered=True, momentum=0.5, weight_decay=0.05),
]
IDS = ["sgd", "sgd-nesterov-decay", "adam", "adam-decay", "adamw", "rmsprop-centered-momentum"]


def compiled(fun, opt, params, rolled, monkeypatch, *batch_args):
    """A compiled step traced with rolling on or off (its code is made at the first call)."""
    step = optim.compile_step(fun, opt)
    with monkeypatch.context() as m:
        m.setattr(roll_module, "ENABLED", rolled)
        source = step.source(params, step.init(params), *batch_args)
    return step, source


@pytest.mark.parametrize("make", OPTIMIZERS, ids=IDS)
def test_the_rolled_update_is_the_written_out_one_and_the_eager_one(make, monkeypatch):
    params, written, eager = make_params(), make_params(), make_params()
    rolled_step, source = compiled(loss, make(), params, True, monkeypatch, *batch(0))
    written_step, written_source = compiled(loss, make(), written, False, monkeypatch,
                                            *batch(0))
    assert "    for p, g" in source and "    for p, g" not in written_source
    assert len(source.splitlines()) < len(written_source.splitlines())
    opt = make()
    state, written_state, eager_state = (rolled_step.init(params), written_step.init(written),
                                         opt.init(eager))
    ids = [id(a) for a in all_leaves(params, state)]
    for k in range(4):
        value = rolled_step(params, state, *batch(k))
        written_value = written_step(written, written_state, *batch(k))
        eager_value, grads = value_and_grad(loss)(eager, *batch(k))
        eager, eager_state = opt.update(eager, grads, eager_state)
        assert value == pytest.approx(eager_value, rel=1e-13) and value == written_value
        for got, same, want in zip(all_leaves(params, state), all_leaves(written, written_state),
                                   all_leaves(eager, eager_state)):
            np.testing.assert_array_equal(got, same)
            np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-14)
    assert [id(a) for a in all_leaves(params, state)] == ids  # the caller's arrays, in place
    assert rolled_step.cache_info().misses == 1


def test_float32_parameters_stay_float32_in_the_loop(monkeypatch):
    params, eager = make_params(np.float32), make_params(np.float32)
    step, source = compiled(loss, optim.Adam(lr=0.01), params, True, monkeypatch,
                            *batch(0, dtype=np.float32))
    assert "for p, g, m, v in " in source
    opt = optim.Adam(lr=0.01)
    state, eager_state = step.init(params), opt.init(eager)
    for k in range(3):
        step(params, state, *batch(k, dtype=np.float32))
        grads = value_and_grad(loss)(eager, *batch(k, dtype=np.float32))[1]
        eager, eager_state = opt.update(eager, grads, eager_state)
    for got, want in zip(all_leaves(params, state), all_leaves(eager, eager_state)):
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_0d_parameter_shares_the_loop_of_matrices(monkeypatch):
    """The steps differ in shape; the update is elementwise, so one body serves each."""
    def scaled(params, x, y):
        return loss(params, x, y) * params["s"] ** 2

    params = dict(make_params(), s=np.array(1.5))
    eager = {k: np.copy(v) for k, v in params.items()}
    step, source = compiled(scaled, optim.Adam(lr=0.05), params, True, monkeypatch, *batch(0))
    assert "for p, g, m, v in " in source and "state_m_s" in source
    opt = optim.Adam(lr=0.05)
    state, eager_state = step.init(params), opt.init(eager)
    s = params["s"]
    for k in range(3):
        step(params, state, *batch(k))
        grads = value_and_grad(scaled)(eager, *batch(k))[1]
        eager, eager_state = opt.update(eager, grads, eager_state)
    assert params["s"] is s
    for got, want in zip(all_leaves(params, state), all_leaves(eager, eager_state)):
        np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-14)


def test_steps_of_other_dtypes_are_written_out_and_the_explain_log_says_why(monkeypatch, caplog):
    params = make_params()
    params["b"] = params["b"].astype(np.float32)  # its update casts to float32: another program
    monkeypatch.setenv("AUTODIFFGEN_EXPLAIN", "1")
    with caplog.at_level(logging.WARNING, logger="autodiffgen"):
        step, source = compiled(loss, optim.Adam(lr=0.01), params, True, monkeypatch,
                                *batch(0))
    assert "for p, g, " not in source
    assert any("is written out step by step" in r.getMessage() and "step 1" in r.getMessage()
               for r in caplog.records), [r.getMessage() for r in caplog.records]
    eager = {k: np.copy(v) for k, v in params.items()}
    opt = optim.Adam(lr=0.01)
    state, eager_state = step.init(params), opt.init(eager)
    step(params, state, *batch(1))
    grads = value_and_grad(loss)(eager, *batch(1))[1]
    eager, eager_state = opt.update(eager, grads, eager_state)
    for got, want in zip(all_leaves(params, state), all_leaves(eager, eager_state)):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


class ClippedSGD(optim.SGD):
    """An optimizer of the user's: its update is a clip, which NumPy does not compute
    into an operand's buffer: the loop writes the result into the parameter."""

    def _leaf(self, p, g, *rest):
        h = rest[-2]
        return (np.clip(p - h["lr"] * g, -0.5, 0.5),)


def test_an_output_not_computed_in_place_is_written_into_its_parameter(monkeypatch):
    def two_layers(params, x, y):
        h = np.tanh(x @ params["A"])
        return np.mean(nn.softmax_cross_entropy(h @ params["B"], y))

    rng = np.random.default_rng(1)
    params = {"A": rng.normal(size=(5, 5)), "B": rng.normal(size=(5, 5))}
    eager = {k: np.copy(v) for k, v in params.items()}
    step, source = compiled(two_layers, ClippedSGD(lr=0.5), params, True, monkeypatch,
                            *batch(0))
    assert "for p, g in " in source and "    p[...] = " in source
    A = params["A"]
    state = step.init(params)
    opt = ClippedSGD(lr=0.5)
    eager_state = opt.init(eager)
    for k in range(3):
        step(params, state, *batch(k))
        grads = value_and_grad(two_layers)(eager, *batch(k))[1]
        eager, eager_state = opt.update(eager, grads, eager_state)
    assert params["A"] is A
    for got, want in zip(leaves(params), leaves(eager)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


def test_one_parameter_is_no_loop(monkeypatch):
    def one(params, x, y):
        return np.sum((x @ params["W"]) ** 2)

    params = {"W": make_params()["W"]}
    _, source = compiled(one, optim.Adam(lr=0.01), params, True, monkeypatch, *batch(0))
    assert "for " not in source


def test_the_loop_is_as_long_for_six_parameters_as_for_two(monkeypatch):
    def deep(params, x, y):
        h = x
        for k in range(len(params) // 2):
            h = np.tanh(h @ params[f"W{k}"] + params[f"b{k}"])
        return np.sum(h ** 2)

    rng = np.random.default_rng(2)

    def net(layers):
        return {name: rng.normal(size=shape) for k in range(layers)
                for name, shape in ((f"W{k}", (5, 5)), (f"b{k}", (5,)))}

    lines = []
    for layers in (1, 3):
        _, source = compiled(deep, optim.Adam(lr=0.01), net(layers), True, monkeypatch,
                             *batch(0))
        body = source.split("for p, g, m, v in ")[1].split("return")[0]
        lines.append([line for line in body.splitlines()
                      if line.startswith("        ") and not line.lstrip().startswith("(")])
    assert len(lines[0]) >= 10
    assert lines[0] == lines[1]
