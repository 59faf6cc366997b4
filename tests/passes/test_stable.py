"""The stable-forms pass: softplus, log-sigmoid and log(1 - sigmoid) through logaddexp.

Each form is checked three ways: the pass rewrites it (forward and backward) and the
values are unchanged where the old form is finite; the generated code agrees with the
tape and finite differences, passes on and off; and with passes on, z = +-800 gives
finite values and gradients, where the old form gives inf or nan.
"""

import warnings

import numpy as np
import pytest
from graph_helpers import run, traced

import autodiffgen as ad
from autodiffgen import passes
from autodiffgen.testing import check_grads

RNG = np.random.default_rng(7)


def softplus(z):
    return np.sum(np.log(1 + np.exp(z)))


def softplus_swapped(z):
    return np.sum(np.log(np.exp(z) + 1.0) * z)


def softplus_log1p(z):
    return np.sum(np.log1p(np.exp(z)) ** 2)


def log_sigmoid(z):
    return np.sum(np.log(1 / (1 + np.exp(-z))))


def log_sigmoid_reciprocal(z):
    return np.sum(np.log(np.reciprocal(1.0 + np.exp(-z))) * z)


def log_one_minus_sigmoid(z):
    return np.sum(np.log(1 - 1 / (1 + np.exp(-z))))


def bce(z, y):
    s = 1 / (1 + np.exp(-z))
    return np.mean(-(y * np.log(s) + (1 - y) * np.log(1 - s)))


def softplus_twice(z):
    return np.sum(np.log(1 + np.exp(np.log(1 + np.exp(z)))))


def with_another_use_of_z(z):
    return np.sum(z * z + np.log(1 + np.exp(z)))  # z's gradient had a term already


def sp(z):
    return np.logaddexp(0.0, z)


def sigmoid(z):
    return np.exp(-sp(-z))


# function, its value and gradient in stable form (the reference at z = +-800)
FORMS = {
    softplus: (lambda z: np.sum(sp(z)), lambda z: sigmoid(z)),
    softplus_swapped: (lambda z: np.sum(sp(z) * z), lambda z: sp(z) + z * sigmoid(z)),
    softplus_log1p: (lambda z: np.sum(sp(z) ** 2), lambda z: 2 * sp(z) * sigmoid(z)),
    log_sigmoid: (lambda z: np.sum(-sp(-z)), lambda z: sigmoid(-z)),
    log_sigmoid_reciprocal: (lambda z: np.sum(-sp(-z) * z), lambda z: -sp(-z) + z * sigmoid(-z)),
    log_one_minus_sigmoid: (lambda z: np.sum(-sp(z)), lambda z: -sigmoid(z)),
    softplus_twice: (lambda z: np.sum(sp(sp(z))), lambda z: sigmoid(sp(z)) * sigmoid(z)),
    with_another_use_of_z: (lambda z: np.sum(z * z + sp(z)), lambda z: 2 * z + sigmoid(z)),
}
LABELS = np.array([0.0, 1.0, 1.0, 0.0, 1.0, 0.0])


def args_for(fun, z):
    return (z, LABELS[:len(z)]) if fun is bce else (z,)


def code_of(source):
    """The generated code without its comments (which quote the user's lines)."""
    return "\n".join(line.split("  # ")[0] for line in source.splitlines())


@pytest.mark.parametrize("fun", [*FORMS, bce], ids=lambda f: f.__name__)
def test_the_pass_rewrites_the_old_form_and_keeps_its_values(fun):
    z = RNG.normal(size=6) * 3
    graph = traced(fun, *args_for(fun, z))
    rewritten, changed = passes.stable(graph)
    assert changed
    cleaned, _ = passes.dce(rewritten)
    ops = [n.prim.name for n in cleaned.nodes]
    assert "log" not in ops and "log1p" not in ops and "logaddexp" in ops
    assert "exp" not in [n.prim.name for n in cleaned.nodes if n.grad_of is None]
    (value, grad), (new_value, new_grad) = (run(g, *args_for(fun, z)) for g in (graph, cleaned))
    np.testing.assert_allclose(new_value, value, rtol=1e-13)
    np.testing.assert_allclose(new_grad, grad, rtol=1e-12, atol=1e-15)
    assert passes.stable(cleaned) == (cleaned, False)


@pytest.mark.parametrize("enabled", [True, False])
@pytest.mark.parametrize("fun", [*FORMS, bce], ids=lambda f: f.__name__)
def test_gradients_agree_with_the_tape_and_finite_differences(fun, enabled, monkeypatch):
    monkeypatch.setattr(passes, "ENABLED", enabled)
    z = RNG.normal(size=6) * 2
    check_grads(fun, *args_for(fun, z))
    check_grads(fun, *args_for(fun, z.astype(np.float32)), rtol=2e-3, atol=2e-3, fd=False)


@pytest.mark.parametrize("fun", FORMS, ids=lambda f: f.__name__)
def test_overflow_gives_finite_values_and_gradients(fun):
    if not passes.ENABLED:
        pytest.skip("the stable forms are a pass")
    value_and_grad = ad.value_and_grad(fun)
    value_and_grad(RNG.normal(size=6))  # traced at ordinary values
    z = np.array([800.0, -800.0, 40.0, -40.0, 0.5, -0.5])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow, no division by zero
        value, grad = value_and_grad(z)
        with pytest.raises(RuntimeWarning):  # the old form does overflow there
            ad.tape.value_and_grad(fun)(z)
    want_value, want_grad = FORMS[fun]
    assert np.isfinite(value) and np.all(np.isfinite(grad))
    np.testing.assert_allclose(value, want_value(z), rtol=1e-13)
    np.testing.assert_allclose(grad, want_grad(z), rtol=1e-12, atol=1e-300)


def test_sigmoid_cross_entropy_is_finite_for_confident_mistakes():
    if not passes.ENABLED:
        pytest.skip("the stable forms are a pass")
    loss = ad.value_and_grad(bce)
    loss(RNG.normal(size=4), LABELS[:4])
    z = np.array([800.0, -800.0, 800.0, -800.0])  # labels 0, 1, 1, 0: two wrong by 800
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        value, grad = loss(z, LABELS[:4])
    np.testing.assert_allclose(value, (800.0 + 800.0) / 4, rtol=1e-15)
    np.testing.assert_allclose(grad, (sigmoid(z) - LABELS[:4]) / 4, rtol=1e-15)
    code = code_of(loss.source(z, LABELS[:4]))
    assert code.count("np.logaddexp(0.0, ") == 2 and "np.log(" not in code


def test_float32_stays_float32():
    z = RNG.normal(size=5).astype(np.float32)
    value, grad = ad.value_and_grad(bce)(z, LABELS[:5].astype(np.float32))
    assert value.dtype == grad.dtype == np.float32


def test_a_sigmoid_used_elsewhere_is_left_alone():
    def f(z):
        s = 1 / (1 + np.exp(-z))
        return np.sum(np.log(s) + s * s)  # s itself is needed: the region is not closed
    z = RNG.normal(size=4)
    _, changed = passes.stable(traced(f, z))
    assert not changed
    check_grads(f, z)


def test_when_z_has_no_gradient_the_forward_alone_is_rewritten(monkeypatch):
    monkeypatch.setattr(passes, "ENABLED", True)
    def f(w, z):
        return np.sum(w * np.log(1 + np.exp(z)))
    w, z = RNG.normal(size=3), np.array([800.0, 0.0, -800.0])
    code = code_of(ad.emit(f, w, RNG.normal(size=3)))
    assert "logaddexp" in code and "np.exp" not in code
    value_and_grad = ad.value_and_grad(f)
    value_and_grad(w, RNG.normal(size=3))  # traced at ordinary values
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, g = value_and_grad(w, z)
    np.testing.assert_allclose(g, sp(z))


def test_forward_mode_and_second_derivatives_through_the_stable_form():
    z = np.array([-3.0, 0.2, 2.5])
    _, tangent = ad.jvp(softplus, (z,), (np.ones(3),))
    np.testing.assert_allclose(tangent, np.sum(sigmoid(z)), rtol=1e-12)
    hessian = ad.hessian(softplus)(z)
    np.testing.assert_allclose(hessian, np.diag(sigmoid(z) * sigmoid(-z)), rtol=1e-10,
                               atol=1e-15)


def test_a_value_a_guard_reads_keeps_its_traced_form():
    """A guard compares the value the code computes with the traced one: the stable form
    would compute it another way, so a softplus that a guard reads stays as written."""
    from graph_helpers import traced

    def f(z):
        softplus = np.log(1.0 + np.exp(z))
        if np.sum(softplus) > 3.0:  # read by a guard
            return np.sum(softplus * 2.0)
        return np.sum(softplus)
    z = np.array([0.5, 1.0, 2.0])
    graph, _ = passes.stable(traced(f, z))
    assert "logaddexp" not in {n.prim.name for n in graph.nodes}
    check_grads(f, z)
