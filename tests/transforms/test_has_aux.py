"""has_aux=True: f returns (output, aux); JAX's return structures, aux computed by the same
generated function (more outputs of it), with no derivative flowing from it."""

import numpy as np
import pytest
from graph_helpers import assert_tree_close

import autodiffgen as ad
from autodiffgen import tape
from autodiffgen.errors import ArgumentError, OutputError

RNG = np.random.default_rng(13)


def loss(w, x):
    """A scalar, and metrics computed on the way: a pytree of arrays and numbers."""
    z = np.tanh(x @ w)
    value = np.mean(z ** 2)
    return value, {"max": np.max(z), "z": z, "count": 2, "pair": (np.sum(w), 1.5)}


def plain_loss(w, x):
    return loss(w, x)[0]


def numeric_grad(f, w, eps=1e-6):
    g = np.zeros_like(w)
    for k in range(w.size):
        e = np.zeros_like(w)
        e.reshape(-1)[k] = eps
        g.reshape(-1)[k] = (f(w + e) - f(w - e)) / (2 * eps)
    return g


def expected_aux(w, x):
    return loss(w, x)[1]


def data(seed):
    rng = np.random.default_rng(seed)
    return rng.normal(size=3), rng.normal(size=(5, 3))


def test_value_and_grad_returns_value_aux_and_gradient_as_jax():
    vg = ad.value_and_grad(loss, has_aux=True)
    for seed in (0, 1, 2):  # cached re-calls with new values give new aux values
        w, x = data(seed)
        (value, aux), g = vg(w, x)
        np.testing.assert_allclose(value, plain_loss(w, x))
        assert_tree_close(aux, {**expected_aux(w, x), "count": 2})
        np.testing.assert_allclose(g, numeric_grad(lambda v, x=x: plain_loss(v, x), w), atol=1e-7)
    assert vg.cache_info().misses == 1


def test_grad_returns_gradient_and_aux():
    g_fn = ad.grad(loss, has_aux=True)
    first = None
    for seed in (3, 4):
        w, x = data(seed)
        g, aux = g_fn(w, x)
        np.testing.assert_allclose(g, ad.grad(plain_loss)(w, x), rtol=1e-12)
        assert_tree_close(aux, expected_aux(w, x))
        first = aux if first is None else first
    assert not np.allclose(first["z"], aux["z"])  # new values, not the traced ones
    assert g_fn.cache_info() == (1, 1, 1)


def test_the_aux_values_are_outputs_of_the_one_generated_function():
    calls = []

    def f(w, x):
        calls.append(1)
        return loss(w, x)
    g_fn = ad.value_and_grad(f, has_aux=True)
    w, x = data(5)
    g_fn(w, x)
    traced = len(calls)
    for seed in (6, 7):
        g_fn(*data(seed))
    assert len(calls) == traced  # cached calls: no call of f, for its aux or otherwise
    source = g_fn.source(w, x)
    assert source.count("def ") == 1
    assert "'max':" in source and "'pair':" in source
    assert "return ((" in source  # ((value, aux), gradient)


def test_no_derivative_flows_from_aux():
    def f(w):
        return np.sum(w), {"sq": np.sum(w ** 2), "w": w * 3.0}
    w = RNG.normal(size=4)
    g, aux = ad.grad(f, has_aux=True)(w)
    np.testing.assert_array_equal(g, np.ones(4))  # d sum(w) only
    np.testing.assert_allclose(aux["sq"], np.sum(w ** 2))
    assert type(aux["w"]) is np.ndarray and type(aux["sq"]) is not ad.trace.boxes.Box


def test_argnums_tuple_float32_and_python_floats():
    def f(a, b, s):
        return np.sum(a * b) * s, (a + b, s * 2.0)
    a = RNG.normal(size=3).astype(np.float32)
    b = RNG.normal(size=3).astype(np.float32)
    (ga, gs), (total, doubled) = ad.grad(f, argnums=(0, 2), has_aux=True)(a, b, 1.5)
    assert ga.dtype == np.float32 and total.dtype == np.float32
    np.testing.assert_allclose(ga, b * 1.5, rtol=1e-6)
    np.testing.assert_allclose(gs, np.sum(a * b), rtol=1e-6)
    assert doubled == 3.0
    _, (_, doubled2) = ad.grad(f, argnums=(0, 2), has_aux=True)(a, b, 4.0)
    assert doubled2 == 8.0  # the float is an input of the code: read again


def test_python_float_function_with_aux():
    def f(x):
        return x ** 3, x ** 2
    assert ad.grad(f, has_aux=True)(2.0) == (12.0, 4.0)
    assert ad.grad(f, has_aux=True)(3.0) == (27.0, 9.0)


def test_a_list_pair_and_none_in_aux():
    def f(x):
        return [np.sum(x * x), {"nothing": None, "x": x[0]}]
    x = RNG.normal(size=3)
    g, aux = ad.grad(f, has_aux=True)(x)
    np.testing.assert_allclose(g, 2 * x)
    assert aux["nothing"] is None and aux["x"] == x[0]


def test_grad_and_aux_is_autograds_spelling():
    def f(x, y):
        return np.sum(np.sin(x) * y), np.cos(x)
    x, y = RNG.normal(size=3), RNG.normal(size=3)
    g, aux = ad.grad_and_aux(f, argnum=1)(x, y)
    np.testing.assert_allclose(g, np.sin(x))
    np.testing.assert_allclose(aux, np.cos(x))


def test_vjp_returns_out_vjp_fn_and_aux():
    def f(x):
        y = np.sin(x) * x
        return y, {"norm": np.sqrt(np.sum(y * y))}
    for seed in (0, 1):
        x = np.random.default_rng(seed).normal(size=4)
        out, vjp_fn, aux = ad.vjp(f, x, has_aux=True)
        u = np.arange(4.0)
        (ct,) = vjp_fn(u)
        np.testing.assert_allclose(out, np.sin(x) * x)
        np.testing.assert_allclose(ct, u * (np.cos(x) * x + np.sin(x)), rtol=1e-12)
        np.testing.assert_allclose(aux["norm"], np.linalg.norm(np.sin(x) * x))
    assert len(ad.vjp(lambda x: np.sin(x), x)) == 2  # without has_aux: a pair, as before


def test_jvp_returns_out_tangent_and_aux():
    def f(x):
        return np.exp(x), x.sum()
    for seed in (0, 1):
        x = np.random.default_rng(seed).normal(size=3)
        v = np.ones(3)
        out, t, aux = ad.jvp(f, (x,), (v,), has_aux=True)
        np.testing.assert_allclose(out, np.exp(x))
        np.testing.assert_allclose(t, np.exp(x))
        np.testing.assert_allclose(aux, x.sum())


@pytest.mark.parametrize("jac", [ad.jacobian, ad.jacfwd, ad.jacrev])
def test_jacobians_return_jacobian_and_aux(jac):
    def f(x):
        y = np.tanh(x) * x[::-1]
        return y, {"y": y, "mean": np.mean(x)}
    for seed in (0, 1):
        x = np.random.default_rng(seed).normal(size=3)
        J, aux = jac(f, has_aux=True)(x)
        np.testing.assert_allclose(J, ad.jacobian(lambda v: f(v)[0])(x), rtol=1e-12)
        np.testing.assert_allclose(aux["y"], f(x)[0])
        np.testing.assert_allclose(aux["mean"], np.mean(x))


def test_hessian_returns_hessian_and_aux():
    def f(x):
        return np.sum(x ** 3) + x[0] * x[1], {"s": np.sum(x)}
    for seed in (0, 1):
        x = np.random.default_rng(seed).normal(size=3)
        H, aux = ad.hessian(f, has_aux=True)(x)
        want = np.diag(6 * x)
        want[0, 1] = want[1, 0] = 1.0
        np.testing.assert_allclose(H, want, atol=1e-12)
        np.testing.assert_allclose(aux["s"], np.sum(x))


def test_nested_inner_has_aux():
    def inner(x):
        return np.sum(np.sin(x) * x), np.sum(x)

    def outer(x):
        g, aux = ad.grad(inner, has_aux=True)(x)
        return np.sum(g) * aux
    x = RNG.normal(size=3)

    def direct(v):
        return np.sum(np.cos(v) * v + np.sin(v)) * np.sum(v)
    np.testing.assert_allclose(ad.grad(outer)(x), numeric_grad(direct, x), rtol=1e-6)


def test_has_aux_and_plain_grad_of_one_function_keep_their_own_code():
    def f(x):
        return np.sum(x * x), x
    x = RNG.normal(size=3)
    g, aux = ad.grad(f, has_aux=True)(x)
    with pytest.raises(OutputError, match="returned a tuple"):
        ad.grad(f)(x)
    g, aux = ad.grad(f, has_aux=True)(x)
    np.testing.assert_allclose(g, 2 * x)
    np.testing.assert_array_equal(aux, x)


def test_not_a_pair_names_the_function_and_its_line():
    def no_aux(x):
        return np.sum(x)
    x = RNG.normal(size=3)
    for transform in (lambda f: ad.grad(f, has_aux=True)(x),
                      lambda f: ad.value_and_grad(f, has_aux=True)(x),
                      lambda f: ad.vjp(f, x, has_aux=True),
                      lambda f: ad.jvp(f, (x,), (x,), has_aux=True),
                      lambda f: ad.jacobian(f, has_aux=True)(x)):
        with pytest.raises(OutputError, match=r"test_has_aux.py:\d+: no_aux is differentiated "
                                              r"with has_aux=True, so it must return a pair"):
            transform(no_aux)

    def triple(x):
        return np.sum(x), x, x
    with pytest.raises(OutputError, match="a tuple of 3"):
        ad.grad(triple, has_aux=True)(x)


def test_an_aux_leaf_that_is_not_a_number_is_refused():
    def f(x):
        return np.sum(x), {"name": "run 1"}
    with pytest.raises(OutputError, match=r"test_has_aux.py:\d+: f returned, with "
                                          r"has_aux=True, an auxiliary value aux\['name'\] "
                                          "that is a str"):
        ad.grad(f, has_aux=True)(RNG.normal(size=3))


def test_has_aux_must_be_a_bool():
    with pytest.raises(ArgumentError, match="has_aux must be True or False"):
        ad.grad(plain_loss, has_aux="yes")
    with pytest.raises(ArgumentError, match="has_aux must be True or False"):
        ad.vjp(plain_loss, RNG.normal(size=3), RNG.normal(size=(2, 3)), has_aux=1)


def test_emit_shows_the_aux_outputs():
    w, x = data(8)
    source = ad.emit(loss, w, x, has_aux=True)
    assert "'count': 2" in source and "return ((" in source
    assert "'count': 2" in ad.emit(ad.grad(loss, has_aux=True), w, x)  # has_aux kept


def test_an_outer_transformation_differentiates_through_aux():
    """As JAX: aux gets no derivative from the inner transformation, but an outer one
    differentiates through it (here aux = x**3)."""
    def f(x):
        _, aux = ad.grad(lambda x: (x ** 3, [x ** 3]), has_aux=True)(x)
        return aux[0] * np.sin(x)

    def via_jacobian(x):
        _, aux = ad.jacobian(lambda x: (x ** 3, [x ** 3]), has_aux=True)(x)
        return aux[0] * np.sin(x)
    want = 3 * 16.0 * np.sin(4.0) + 64.0 * np.cos(4.0)
    np.testing.assert_allclose(ad.grad(f)(4.0), want, rtol=1e-12)
    np.testing.assert_allclose(ad.jacobian(via_jacobian)(np.array(4.0)), want, rtol=1e-12)
    assert ad.grad(lambda x: (x ** 3, [4.0]), has_aux=True)(4.0) == (48.0, [4.0])


def test_the_tape_takes_has_aux_too():
    w, x = data(9)
    (value, aux), g = tape.value_and_grad(loss, has_aux=True)(w, x)
    (value2, aux2), g2 = ad.value_and_grad(loss, has_aux=True)(w, x)
    np.testing.assert_allclose(value, value2, rtol=1e-12)
    np.testing.assert_allclose(g, g2, rtol=1e-12)
    assert_tree_close(aux, aux2)
    assert type(aux["z"]) is np.ndarray
    g3, aux3 = tape.grad(loss, has_aux=True)(w, x)
    np.testing.assert_allclose(g3, g2, rtol=1e-12)
    assert_tree_close(aux3, aux2)
