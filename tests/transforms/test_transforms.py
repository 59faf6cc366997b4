"""Forward mode, VJPs, Jacobians, Hessians and nested grads, all from generated code."""

import collections

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen import tape

RNG = np.random.default_rng(7)


def vector_fn(x):
    return np.tanh(x) * np.sin(x[::-1]) + x.sum() ** 2


def scalar_fn(x):
    return np.sum(np.exp(-x * x) * x[0]) + np.log(np.sum(x * x))


def matrix_fn(W, x):
    return np.tanh(x @ W).sum() * W[0, 0]


def numeric_jacobian(f, x, eps=1e-6):
    columns = []
    for k in range(x.size):
        e = np.zeros_like(x)
        e.reshape(-1)[k] = eps
        columns.append((np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * eps))
    return np.stack(columns, axis=-1).reshape(np.shape(f(x)) + x.shape)


def test_jvp_matches_finite_differences_and_tape():
    x, v = RNG.normal(size=4), RNG.normal(size=4)
    out, t = ad.jvp(vector_fn, (x,), (v,))
    np.testing.assert_allclose(out, vector_fn(x))
    eps = 1e-6
    np.testing.assert_allclose(t, (vector_fn(x + eps * v) - vector_fn(x - eps * v)) / (2 * eps),
                               rtol=1e-6, atol=1e-8)
    tape_out, t_tape = tape.jvp(vector_fn, (x,), (v,))
    np.testing.assert_allclose(t, t_tape)
    np.testing.assert_allclose(tape_out, out)


def test_jvp_is_cached_and_takes_new_values():
    x, v = RNG.normal(size=4), RNG.normal(size=4)
    ad.jvp(vector_fn, (x,), (v,))
    made = vector_fn.__autodiffgen_jvp__
    misses = made.cache_info().misses
    x2, v2 = RNG.normal(size=4), RNG.normal(size=4)
    _, t2 = ad.jvp(vector_fn, (x2,), (v2,))
    assert made.cache_info().misses == misses
    np.testing.assert_allclose(t2, tape.jvp(vector_fn, (x2,), (v2,))[1])


def test_jvp_with_an_untangented_integer_argument():
    def pick(x, idx):
        return np.sin(x[idx]).sum()
    x, idx = RNG.normal(size=5), np.array([0, 3, 3])
    out, t = ad.jvp(pick, (x, idx), (np.ones(5), None))
    np.testing.assert_allclose(t, np.cos(x[idx]).sum())
    np.testing.assert_allclose(out, pick(x, idx))


def test_jvp_source_labels_tangents():
    ad.jvp(vector_fn, (np.ones(3),), (np.ones(3),))
    source = vector_fn.__autodiffgen_jvp__.source(np.ones(3), np.ones(3))
    assert "def vector_fn_jvp(x, t_x):" in source
    assert "tangent of tanh" in source


def test_vjp_function_is_generated_and_transposes_jvp():
    x, u, v = RNG.normal(size=4), RNG.normal(size=4), RNG.normal(size=4)
    out, vjp_fn = ad.vjp(vector_fn, x)
    np.testing.assert_allclose(out, vector_fn(x))
    (gx,) = vjp_fn(u)
    _, t = ad.jvp(vector_fn, (x,), (v,))
    assert np.isclose(np.dot(gx, v), np.dot(u, t))
    with pytest.raises(ad.ArgumentError, match="cotangent has shape"):
        vjp_fn(np.ones(3))


@pytest.mark.parametrize("jac", [ad.jacfwd, ad.jacobian, ad.jacrev])
def test_jacobians_match_finite_differences(jac):
    x = RNG.normal(size=4)
    np.testing.assert_allclose(jac(vector_fn)(x), numeric_jacobian(vector_fn, x),
                               rtol=1e-6, atol=1e-7)


def test_jacobian_of_matrix_argument():
    W, x = RNG.normal(size=(3, 2)), RNG.normal(size=(4, 3))
    J = ad.jacobian(lambda W, x: np.tanh(x @ W), argnums=0)(W, x)
    assert J.shape == (4, 2, 3, 2)
    np.testing.assert_allclose(J, numeric_jacobian(lambda W: np.tanh(x @ W), W), atol=1e-7)


def test_hessian_matches_finite_differences_of_the_gradient():
    x = RNG.normal(size=4)
    H = ad.hessian(scalar_fn)(x)
    np.testing.assert_allclose(H, numeric_jacobian(ad.grad(scalar_fn), x), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(H, H.T, atol=1e-10)


def test_hessian_of_a_matrix_argument():
    W, x = RNG.normal(size=(3, 2)), RNG.normal(size=(4, 3))
    H = ad.hessian(matrix_fn)(W, x)
    assert H.shape == (3, 2, 3, 2)
    np.testing.assert_allclose(H, numeric_jacobian(lambda W: ad.grad(matrix_fn)(W, x), W),
                               rtol=1e-5, atol=1e-6)


def test_hvp_equals_hessian_times_vector():
    x, v = RNG.normal(size=4), RNG.normal(size=4)
    np.testing.assert_allclose(ad.hvp(scalar_fn, (x,), (v,)), ad.hessian(scalar_fn)(x) @ v,
                               rtol=1e-8, atol=1e-10)


def test_nested_grad_of_grad():
    d2 = ad.grad(ad.grad(lambda t: np.sin(t) * t))
    for t in (0.5, -1.3):
        assert np.isclose(d2(t), -np.sin(t) * t + 2 * np.cos(t))
    d3 = ad.grad(ad.grad(ad.grad(lambda t: t ** 4)))
    assert np.isclose(d3(1.5), 24 * 1.5)


def test_second_order_through_indexing_and_reductions():
    def loss(W, x, y):
        z = x @ W
        z = z - z.max(axis=1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        return -logp[np.arange(len(y)), y].mean()
    W, x, y = RNG.normal(size=(3, 2)), RNG.normal(size=(5, 3)), RNG.integers(0, 2, 5)
    H = ad.hessian(loss)(W, x, y)
    np.testing.assert_allclose(H, numeric_jacobian(lambda W: ad.grad(loss)(W, x, y), W),
                               rtol=1e-5, atol=1e-6)


def test_second_order_source_is_code_and_lints():
    import subprocess
    import sys
    x = RNG.normal(size=3)
    ad.hessian(scalar_fn)(x)
    made = scalar_fn.__autodiffgen_grad_0__.__autodiffgen_vjp_0__  # with respect to x
    source = made.source(x)
    assert "def scalar_fn_fwd(x):" in source
    assert "def scalar_fn_bwd(residuals, g):" in source
    assert "# saved by the forward pass" in source
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--isolated", "--no-cache",
                             "--stdin-filename", "h.py", "-"], input=source, text=True,
                            capture_output=True, check=False)
    assert result.returncode == 0, result.stdout


def test_float32_is_kept_by_jvp_and_hessian():
    x = RNG.normal(size=3).astype(np.float32)
    _, t = ad.jvp(vector_fn, (x,), (np.ones(3, np.float32),))
    assert t.dtype == np.float32
    assert ad.hessian(scalar_fn)(x).dtype == np.float32


def test_second_order_code_points_back_to_the_users_lines():
    x = RNG.normal(size=3)
    ad.hessian(scalar_fn)(x)
    source = scalar_fn.__autodiffgen_grad_0__.__autodiffgen_vjp_0__.source(x)
    line = scalar_fn.__code__.co_firstlineno + 1
    assert f"test_transforms.py:{line}" in source
    assert "<autodiffgen-" not in source


def _reads_its_data(W, X):
    z = np.tanh(X @ W)
    if float(np.sum(X)) > 0:  # a branch on the data, never differentiated
        z = z * 2
    return np.sum(z ** 2)


def test_second_order_transforms_may_read_the_data_they_do_not_differentiate():
    """hessian/jacobian take a VJP with respect to argnums alone, and hvp a JVP of the
    arguments with tangents: float() of the other arguments is a guard, not refused."""
    W = RNG.normal(size=(4, 3))
    for X in (RNG.normal(size=(5, 4)) + 1, RNG.normal(size=(5, 4)) - 1):
        H = ad.hessian(_reads_its_data)(W, X)
        want = numeric_jacobian(lambda W_, X=X: tape.grad(_reads_its_data)(W_, X), W)
        np.testing.assert_allclose(H, want, rtol=1e-5, atol=1e-6)
        V = RNG.normal(size=W.shape)
        np.testing.assert_allclose(ad.hvp(_reads_its_data, (W, X), (V, None)),
                                   np.tensordot(want, V, axes=2), rtol=1e-5, atol=1e-6)


# ---- nested transforms and trees (from a code review) ----------------------------------
def test_jvp_tangent_is_writable():
    _, t = ad.jvp(lambda s: np.broadcast_to(s, (3,)).reshape(3, 1), (np.array(1.0),),
                  (np.array(1.0),))
    t += 1.0


def test_mixed_partial_through_a_python_float():
    x = RNG.normal(size=3)

    def f(x, s):
        return np.sum(x * x) * s
    inner = ad.grad(f, argnums=0)
    mixed = ad.grad(lambda s: np.sum(inner(x, s)))(1.5)
    assert np.isclose(mixed, np.sum(2 * x))


def test_jvp_checks_the_tangent_tree():
    f = lambda p: p["a"] * 1.0 + p["b"] * 10.0
    p = {"a": np.array(1.0), "b": np.array(1.0)}
    _, t = ad.jvp(f, (p,), ({"a": np.array(1.0), "b": np.array(0.0)},))
    assert t == 1.0
    _, t = ad.jvp(f, (p,), ({"b": np.array(0.0), "a": np.array(1.0)},))
    assert t == 1.0  # the same pytree: dicts match by key (issue 12, as in JAX)
    with pytest.raises(ad.ArgumentError, match="structure"):
        ad.jvp(lambda t: t[0] + t[1], ((np.ones(1), np.ones(1)),), ((np.ones(1),),))


def test_a_tangent_of_another_shape_names_the_line_once():
    with pytest.raises(ad.ArgumentError) as error:
        ad.jvp(np.sin, (np.ones(3),), (np.ones(4),))
    message = str(error.value)
    assert "has shape (4,), but its primal has shape (3,)" in message
    location = message.split(": ", 1)[0]
    assert location.startswith("test_transforms.py:") and message.count(location) == 1


def test_vjp_and_grad_of_mixed_trees():
    point = collections.namedtuple("Point", "x y")
    g = ad.grad(lambda p: p.x * p.y)(point(2.0, 3.0))
    assert type(g) is point and g == (3.0, 2.0)
    out, vjp_fn = ad.vjp(lambda p: p["w"] * p["idx"], {"w": 2.0, "idx": 3})
    assert out == 6.0
    (cot,) = vjp_fn(np.float64(1.0))
    assert cot["w"] == 3.0 and cot["idx"] is None
    grads = ad.grad(lambda p: p["W"].sum())({"W": np.ones(2), "act": "tanh"})
    assert grads["act"] is None


def test_hessian_through_code_whose_intermediates_depend_on_constants_only():
    C, E, D = np.random.default_rng(21).standard_normal((3, 50))

    def f(x):
        return np.sum(C * (E * (np.tanh(x) * D + np.sin(x))))
    g = ad.grad(f)
    x = RNG.normal(size=50)
    H = ad.hessian(f)(x)
    eps = 1e-6
    column = (g(x + eps * np.eye(50)[3]) - g(x - eps * np.eye(50)[3])) / (2 * eps)
    np.testing.assert_allclose(H[:, 3], column, rtol=1e-5, atol=1e-6)


def test_a_tangent_dict_matches_its_primal_by_keys_in_any_order():
    """The same pytree (as in JAX): {'b': ..., 'a': ...} is a tangent of {'a': ..., 'b': ...}."""
    def f(p):
        return np.sum(p["a"] * p["b"] ** 2)
    primal = {"a": np.array([1.0, 2.0]), "b": np.array([3.0, 4.0])}
    shuffled = {"b": np.array([1.0, 0.0]), "a": np.array([0.0, 1.0])}
    ordered = {"a": shuffled["a"], "b": shuffled["b"]}
    expected = np.sum(ordered["a"] * primal["b"] ** 2) + \
        np.sum(primal["a"] * 2 * primal["b"] * ordered["b"])
    for tangent in (shuffled, ordered):
        _, t = ad.jvp(f, (primal,), (tangent,))
        np.testing.assert_allclose(t, expected)
        np.testing.assert_allclose(tape.jvp(f, (primal,), (tangent,))[1], expected)
    with pytest.raises(ad.ArgumentError, match="structure"):
        ad.jvp(f, (primal,), ({"a": shuffled["a"], "c": shuffled["b"]},))
