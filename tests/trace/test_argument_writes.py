"""Writes into containers passed as arguments (argument_writes.py): the generated code
performs them, as eager NumPy does, through every front end that can; vmap and a change of
length are refused, naming the function."""

import numpy as np
import pytest
from graph_helpers import assert_tree_close

import autodiffgen as ad
from autodiffgen import tape
from autodiffgen.optim import SGD, compile_step


def batch_norm_loss(w, x, bn_param):
    momentum = bn_param.get("momentum", 0.9)
    h = x @ w
    mean = h.mean(axis=0)
    bn_param["running_mean"] = momentum * bn_param["running_mean"] + (1 - momentum) * mean
    bn_param["calls"] = bn_param["calls"] + 1.0
    return np.sum((h - mean) ** 2)


def list_state(w, x, cache):
    h = np.tanh(x @ w)
    cache[0] = h
    cache[1]["last"] = np.sum(h)
    return np.sum(h ** 2)


def _data(k):
    rng = np.random.default_rng(k)
    return rng.normal(size=(3, 2)), rng.normal(size=(4 + k, 3))


def _bn():
    return {"running_mean": np.zeros(2), "calls": 0.0, "momentum": 0.8}


@pytest.mark.parametrize("make", [ad.grad, ad.value_and_grad, tape.grad])
def test_grad_performs_the_write_on_every_call(make):
    g = make(batch_norm_loss)
    state, eager = _bn(), _bn()
    for k in range(4):  # new batch sizes too: the write is in every variant
        w, x = _data(k)
        got = g(w, x, state)
        batch_norm_loss(w, x, eager)
        assert_tree_close(state, eager)
        want = tape.grad(batch_norm_loss)(w, x, _bn())
        np.testing.assert_allclose(got[1] if isinstance(got, tuple) else got, want)
    assert state["calls"] == 4.0


def test_the_generated_code_says_it_writes():
    w, x = _data(0)
    source = ad.grad(batch_norm_loss).source(w, x, _bn())
    assert "bn_param['running_mean'] = " in source
    assert "bn_param['calls'] = " in source


def test_writes_into_a_list_and_a_nested_dict():
    w, x = _data(1)
    got, want = [None, {}], [None, {}]
    g = ad.grad(list_state)(w, x, got)
    list_state(w, x, want)
    assert_tree_close(got, want)
    np.testing.assert_allclose(g, tape.grad(list_state)(w, x, [None, {}]))


def test_jvp_and_vjp_perform_the_write():
    w, x = _data(2)
    state, eager = _bn(), _bn()
    ad.jvp(batch_norm_loss, (w, x, state), (np.ones_like(w), None, None))
    batch_norm_loss(w, x, eager)
    assert_tree_close(state, eager)
    state = _bn()
    ad.vjp(batch_norm_loss, w, x, state)
    assert_tree_close(state, eager)


def test_compile_step_performs_the_write():
    def loss(params, x, bn_param):
        return batch_norm_loss(params["w"], x, bn_param)
    step = compile_step(loss, SGD(lr=0.01))
    w, x = _data(3)
    params, state, eager = {"w": w.copy()}, _bn(), _bn()
    opt = step.init(params)
    for _ in range(3):
        batch_norm_loss(params["w"], x, eager)
        step(params, opt, x, state)
        assert_tree_close(state, eager)


def test_vmap_refuses_a_write_naming_the_function():
    def per_example(x, stats):
        stats["last"] = x * 2.0
        return np.sum(x)
    with pytest.raises(ad.AutodiffgenError, match=r"test_argument_writes.py:\d+.*stats\['last'\]"):
        ad.vmap(per_example, in_axes=(0, None))(np.ones((3, 2)), {})


def test_a_change_of_length_is_refused_not_dropped():
    def appends(x, log):
        log.append(np.sum(x))
        return np.sum(x ** 2)
    with pytest.raises(ad.TracingError, match=r"test_argument_writes.py:\d+.*length"):
        ad.grad(appends)(np.ones(3), [])


def test_a_standalone_module_performs_the_write():
    w, x = _data(0)
    namespace = {}
    exec(ad.standalone_source(batch_norm_loss, w, x, _bn()), namespace)  # noqa: S102
    state, eager = _bn(), _bn()
    for k in range(3):
        w, x = _data(k)
        namespace["value_and_grad"](w, x, state)
        batch_norm_loss(w, x, eager)
        assert_tree_close(state, eager)
