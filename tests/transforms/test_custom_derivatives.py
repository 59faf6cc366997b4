"""JAX's custom_vjp and custom_jvp (issue 28, item 4): through grad, vjp, jacobian,
hessian, hvp, jvp, vmap and the generated code (the rules' operations are in it), against
central finite differences in float64, the float32 dtype kept, pytrees, and the errors
where JAX refuses too (forward mode through a custom_vjp function)."""

import importlib.util

import numpy as np

import autodiffgen as ad
from autodiffgen import passes
from autodiffgen.testing import check_grads

RNG = np.random.default_rng(4)
EPS = 1e-6


def fd_jacobian(f, x):
    """Central differences of f at the array x: out.shape + x.shape (x.shape for a scalar
    f, its gradient)."""
    out = np.asarray(f(x))
    J = np.zeros(out.shape + x.shape)
    for k in range(x.size):
        e = np.zeros_like(x)
        e.reshape(-1)[k] = EPS
        J.reshape(out.shape + (-1,))[..., k] = (np.asarray(f(x + e)) - np.asarray(f(x - e))) \
            / (2 * EPS)
    return J


# ---- custom_vjp ---------------------------------------------------------------------------
@ad.custom_vjp
def scaled_sin(x, y):
    return np.sin(x) * y


def scaled_sin_fwd(x, y):
    s = np.sin(x)
    return s * y, (np.cos(x), s, y)


def scaled_sin_bwd(res, g):
    c, s, y = res
    return g * c * y, g * s


scaled_sin.defvjp(scaled_sin_fwd, scaled_sin_bwd)


def vjp_loss(x, y):
    return np.sum(scaled_sin(x, y) ** 2)


X = RNG.normal(size=4)
Y = RNG.normal(size=4)


def test_custom_vjp_gradient_matches_finite_differences():
    gx, gy = ad.grad(vjp_loss, argnums=(0, 1))(X, Y)
    np.testing.assert_allclose(gx, fd_jacobian(lambda x: vjp_loss(x, Y), X), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gy, fd_jacobian(lambda y: vjp_loss(X, y), Y), rtol=1e-6, atol=1e-8)
    value, vjp_fn = ad.vjp(lambda x: scaled_sin(x, Y), X)
    np.testing.assert_allclose(value, np.sin(X) * Y)
    np.testing.assert_allclose(vjp_fn(np.ones(4))[0], np.cos(X) * Y)
    np.testing.assert_allclose(ad.jacobian(scaled_sin)(X, Y), np.diag(np.cos(X) * Y))


def test_generated_code_agrees_with_the_tape_and_finite_differences():
    check_grads(vjp_loss, X, Y, argnums=(0, 1), fwd=False)  # no forward mode, as in JAX
    check_grads(jvp_loss, X)  # both modes
    check_grads(lambda x: np.sum(log1pexp(x) * scaled_sin(x, Y)), X, fwd=False)


def test_custom_vjp_rules_are_in_the_generated_code():
    source = ad.emit(vjp_loss, X, Y, argnums=(0, 1))
    assert "np.cos(x)" in source  # f_fwd's residual, computed by the forward
    assert "# grad of scaled_sin" in source  # f_bwd's operations, in the backward
    assert "g_scaled_sin" in source
    assert ("_custom_vjp(" in source) is not passes.ENABLED  # an identity, dropped by them


def test_custom_vjp_runs_its_own_rule_not_the_derivative():
    @ad.custom_vjp
    def clip_gradient(x, lo, hi):
        return x

    def fwd(x, lo, hi):
        return x, (lo, hi)

    def bwd(res, g):
        lo, hi = res
        return np.clip(g, lo, hi), None, None
    clip_gradient.defvjp(fwd, bwd)
    x = np.array([1.0, -2.0, 3.0])
    g = ad.grad(lambda x: np.sum(clip_gradient(5.0 * x, -1.0, 1.0)))(x)
    np.testing.assert_allclose(g, [5.0, 5.0, 5.0])  # d(5x)/dx times the clipped 1
    g = ad.grad(lambda x: np.sum(clip_gradient(x, -0.5, 0.5) * 4.0))(x)
    np.testing.assert_allclose(g, [0.5, 0.5, 0.5])  # 4 clipped, not 4
    np.testing.assert_allclose(ad.jacrev(lambda x: 3.0 * clip_gradient(x, 0.0, 1.0))(x),
                               np.eye(3))
    np.testing.assert_allclose(clip_gradient(x, 0.0, 1.0), x)  # a plain call: f itself


def test_custom_vjp_keeps_float32():
    x, y = X.astype(np.float32), Y.astype(np.float32)
    gx, gy = ad.grad(vjp_loss, argnums=(0, 1))(x, y)
    assert gx.dtype == np.float32 and gy.dtype == np.float32
    np.testing.assert_allclose(gx, ad.grad(vjp_loss)(X, Y), rtol=1e-4)


def test_custom_vjp_over_pytrees():
    @ad.custom_vjp
    def layer(p, x):
        return {"h": np.tanh(p["w"] * x), "n": np.sum(x)}

    def fwd(p, x):
        h = np.tanh(p["w"] * x)
        return {"h": h, "n": np.sum(x)}, (h, p["w"], x, 2)  # a Python int rides along

    def bwd(res, g):
        h, w, x, two = res
        assert two == 2
        d = g["h"] * (1.0 - h * h)
        return {"w": d * x}, d * w + g["n"]
    layer.defvjp(fwd, bwd)

    def loss(p, x):
        out = layer(p, x)
        return np.sum(out["h"] ** 2) + 3.0 * out["n"]

    def plain(p, x):
        return np.sum(np.tanh(p["w"] * x) ** 2) + 3.0 * np.sum(x)
    p, x = {"w": RNG.normal(size=3)}, RNG.normal(size=3)
    gp, gx = ad.grad(loss, argnums=(0, 1))(p, x)
    assert set(gp) == {"w"}
    np.testing.assert_allclose(gp["w"], fd_jacobian(lambda w: plain({"w": w}, x), p["w"]),
                               rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gx, fd_jacobian(lambda x: plain(p, x), x), rtol=1e-6, atol=1e-8)


def test_custom_vjp_second_order_as_jax():
    """Reverse over reverse (hessian) and forward over reverse (hvp) differentiate f_fwd's
    and f_bwd's operations, as JAX does."""
    H = ad.hessian(vjp_loss)(X, Y)
    np.testing.assert_allclose(H, fd_jacobian(lambda x: ad.grad(vjp_loss)(x, Y), X),
                               rtol=1e-5, atol=1e-6)
    v = RNG.normal(size=4)
    np.testing.assert_allclose(ad.hvp(vjp_loss, (X, Y), (v, np.zeros(4))), H @ v,
                               rtol=1e-8, atol=1e-10)


def test_custom_vjp_under_vmap():
    per_example = ad.vmap(ad.grad(vjp_loss), in_axes=(0, 0))(X.reshape(2, 2), Y.reshape(2, 2))
    np.testing.assert_allclose(per_example, (2 * np.sin(X) * Y ** 2 * np.cos(X)).reshape(2, 2))
    np.testing.assert_allclose(ad.vmap(scaled_sin)(X, Y), np.sin(X) * Y)


def test_custom_vjp_with_the_passes_off(monkeypatch):
    monkeypatch.setattr(passes, "ENABLED", False)
    source = ad.emit(vjp_loss, X, Y, argnums=(0, 1))
    assert "_custom_vjp(" in source  # the mark, an identity
    gx = ad.grad(lambda x, y: np.sum(scaled_sin(x, y) ** 3))(X, Y)
    np.testing.assert_allclose(gx, 3 * (np.sin(X) * Y) ** 2 * np.cos(X) * Y)


def test_custom_vjp_standalone_module_runs(tmp_path):
    path = tmp_path / "gen.py"
    path.write_text(ad.standalone_source(vjp_loss, X, Y))  # imports no custom function
    spec = importlib.util.spec_from_file_location("gen", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    _, gx = module.value_and_grad(X, Y)
    np.testing.assert_allclose(gx, ad.grad(vjp_loss)(X, Y))


# ---- custom_jvp ---------------------------------------------------------------------------
@ad.custom_jvp
def log1pexp(x):
    return np.log1p(np.exp(x))


@log1pexp.defjvp
def log1pexp_jvp(primals, tangents):
    x, = primals
    t, = tangents
    return log1pexp(x), t * (1.0 - 1.0 / (1.0 + np.exp(x)))


def jvp_loss(x):
    z = log1pexp(x)
    return np.sum(z * z)


def test_defjvp_as_a_decorator_returns_the_rule():
    assert log1pexp_jvp.__name__ == "log1pexp_jvp" and callable(log1pexp_jvp)


def test_custom_jvp_reverse_and_forward_match_finite_differences():
    g = ad.grad(jvp_loss)(X)
    np.testing.assert_allclose(g, fd_jacobian(jvp_loss, X), rtol=1e-6, atol=1e-8)
    v = RNG.normal(size=4)
    value, t = ad.jvp(jvp_loss, (X,), (v,))
    np.testing.assert_allclose(value, jvp_loss(X))
    np.testing.assert_allclose(t, g @ v, rtol=1e-10)
    np.testing.assert_allclose(ad.jacfwd(log1pexp)(X), ad.jacrev(log1pexp)(X), rtol=1e-12)


def test_custom_jvp_rule_is_in_the_generated_code_and_f_is_called():
    source = ad.emit(jvp_loss, X)
    assert "z = log1pexp(x)" in source  # the function itself, as a custom primitive
    assert "np.exp(x)" in source and "grad of log1pexp" in source  # the rule, transposed


def test_custom_jvp_runs_its_own_rule():
    @ad.custom_jvp
    def f(x):
        return np.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        return f(primals[0]), 10.0 * tangents[0]  # not the derivative, on purpose
    np.testing.assert_allclose(ad.grad(lambda x: np.sum(f(x)))(X), np.full(4, 10.0))
    np.testing.assert_allclose(ad.jvp(f, (X,), (np.ones(4),))[1], np.full(4, 10.0))


def test_custom_jvp_second_order():
    H = ad.hessian(jvp_loss)(X)
    np.testing.assert_allclose(H, fd_jacobian(ad.grad(jvp_loss), X), rtol=1e-5, atol=1e-6)
    v = RNG.normal(size=4)
    np.testing.assert_allclose(ad.hvp(jvp_loss, (X,), (v,)), H @ v, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(ad.jacfwd(ad.grad(jvp_loss))(X), H, rtol=1e-8, atol=1e-10)


def test_custom_jvp_of_two_arguments_float32_and_a_python_float():
    @ad.custom_jvp
    def mul(x, y):
        return x * y

    @mul.defjvp
    def mul_jvp(primals, tangents):
        x, y = primals
        tx, ty = tangents
        return mul(x, y), tx * y + x * ty
    x, y = X.astype(np.float32), Y.astype(np.float32)
    gx, gy = ad.grad(lambda x, y: np.sum(mul(x, y) ** 2), argnums=(0, 1))(x, y)
    assert gx.dtype == np.float32 and gy.dtype == np.float32
    np.testing.assert_allclose(gx, 2 * x * y * y, rtol=1e-5)
    np.testing.assert_allclose(gy, 2 * x * x * y, rtol=1e-5)
    _, t = ad.jvp(lambda x, y: mul(x, y), (X, Y), (np.ones(4), None))  # no tangent for y
    np.testing.assert_allclose(t, Y)
    g = ad.grad(lambda s, x: np.sum(mul(x, s)))(1.5, X)
    np.testing.assert_allclose(g, np.sum(X))
