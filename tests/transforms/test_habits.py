"""Habits of JAX and Autograd users (issue 28, item 4): Autograd's argnum= on every
transform that takes argnums, the Hessian of a vector-valued or pytree-valued function
(JAX's out_shape + in_shape + in_shape blocks), jacrev/jacfwd over pytrees, and Autograd's
elementwise_grad. Every derivative against central finite differences in float64."""

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen.tree import leaves, map_tree

RNG = np.random.default_rng(28)
EPS = 1e-6


def fd_jacobian(f, args, i):
    """Central differences of f (any pytree output) with respect to argument i (a pytree
    too): the output's structure holding, at each leaf, argument i's structure of blocks
    of shape out_leaf.shape + x_leaf.shape, as JAX's jacrev."""
    arg = args[i]
    x_leaves = leaves(arg)
    out = f(*args)
    columns = []  # per x leaf: per element, the output's leaves' differences
    for n, x in enumerate(x_leaves):
        per = []
        for k in range(np.size(x)):
            def moved(step, n=n, k=k):
                counter = iter(range(len(x_leaves)))

                def one(leaf):
                    leaf = np.array(leaf, dtype=np.float64)
                    if next(counter) == n:
                        leaf.reshape(-1)[k] += step
                    return leaf
                new = list(args)
                new[i] = map_tree(arg, one)
                return leaves(f(*new))
            per.append([(np.asarray(a) - np.asarray(b)) / (2 * EPS)
                        for a, b in zip(moved(EPS), moved(-EPS))])
        columns.append(per)
    blocks = iter(range(len(leaves(out))))

    def at_output(o):
        j = next(blocks)
        per_x = iter(range(len(x_leaves)))

        def block(x):
            n = next(per_x)
            parts = [per[j] for per in columns[n]]
            return np.moveaxis(np.array(parts), 0, -1).reshape(np.shape(o) + np.shape(x))
        return map_tree(arg, block)
    return map_tree(out, at_output)


def assert_trees_close(got, want, rtol=1e-5, atol=1e-6):
    assert type(got) is type(want) or np.ndim(got) == np.ndim(want), (got, want)
    got_leaves, want_leaves = leaves(got), leaves(want)
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves):
        assert np.shape(g) == np.shape(w)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def two(x, y):
    return np.sum(np.sin(x) * y ** 2)


X = RNG.normal(size=3)
Y = RNG.normal(size=3)


# ---- argnum= ---------------------------------------------------------------------------
@pytest.mark.parametrize("transform", [ad.grad, ad.value_and_grad, ad.jacobian, ad.jacrev,
                                       ad.jacfwd, ad.hessian, ad.elementwise_grad])
def test_argnum_is_argnums(transform):
    got = transform(two, argnum=1)(X, Y)
    want = transform(two, argnums=1)(X, Y)
    assert_trees_close(got, want, rtol=0, atol=0)


def test_argnum_on_the_decorator_and_the_source_functions():
    @ad.grad(argnum=1)
    def g(x, y):
        return np.sum(x * y ** 2)
    np.testing.assert_allclose(g(X, Y), 2 * X * Y)
    assert ad.emit(two, X, Y, argnum=1) == ad.emit(two, X, Y, argnums=1)
    assert ad.standalone_source(two, X, Y, argnum=(0, 1)) == \
        ad.standalone_source(two, X, Y, argnums=(0, 1))


def test_argnum_tuple_and_autograd_grad_of_the_second_argument():
    gx, gy = ad.grad(two, argnum=(0, 1))(X, Y)
    np.testing.assert_allclose(gx, np.cos(X) * Y ** 2)
    np.testing.assert_allclose(gy, 2 * np.sin(X) * Y)


# ---- the Hessian of a function returning more than one number -------------------------
def vector(x):
    return np.sin(x) * x[0] + x ** 3


def test_hessian_of_a_vector_valued_function_is_jax_shaped():
    x = RNG.normal(size=4)
    H = ad.hessian(vector)(x)
    assert H.shape == (4, 4, 4)  # out_shape + in_shape + in_shape, as jax.hessian
    want = fd_jacobian(ad.jacobian(vector), (x,), 0)
    np.testing.assert_allclose(H, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(H, np.swapaxes(H, 1, 2), atol=1e-12)  # symmetric


def test_hessian_of_a_matrix_valued_function_of_a_matrix():
    def f(W):
        return np.tanh(W @ W.T)
    W = RNG.normal(size=(2, 3))
    H = ad.hessian(f)(W)
    assert H.shape == (2, 2, 2, 3, 2, 3)
    np.testing.assert_allclose(H, fd_jacobian(ad.jacobian(f), (W,), 0), rtol=1e-5,
                               atol=1e-6)


def test_hessian_of_a_pytree_output_and_pytree_arguments():
    def f(p, scale):
        return {"h": np.tanh(p["w"] * p["b"]) * scale, "s": np.sum(p["w"] ** 3)}
    p = {"w": RNG.normal(size=3), "b": RNG.normal(size=3)}
    H = ad.hessian(f)(p, 2.0)
    assert set(H) == {"h", "s"} and set(H["h"]) == {"w", "b"}
    assert H["h"]["w"]["b"].shape == (3, 3, 3) and H["s"]["b"]["w"].shape == (3, 3)
    assert_trees_close(H, fd_jacobian(ad.jacobian(f), (p, 2.0), 0))


def test_hessian_of_a_vector_function_over_a_tuple_argnums_and_has_aux():
    def f(x, y):
        return np.sin(x) * y, {"note": x.sum()}
    x, y = RNG.normal(size=2), RNG.normal(size=2)
    H, aux = ad.hessian(f, argnums=(0, 1), has_aux=True)(x, y)
    np.testing.assert_allclose(aux["note"], x.sum())
    assert len(H) == 2 and len(H[0]) == 2 and H[0][1].shape == (2, 2, 2)

    def jac(x, y):
        return ad.jacobian(lambda x, y: f(x, y)[0], argnums=(0, 1))(x, y)
    for i in range(2):
        want = fd_jacobian(jac, (x, y), i)
        for j in range(2):
            np.testing.assert_allclose(H[j][i], want[j], rtol=1e-5, atol=1e-6)


def test_hessian_of_a_scalar_function_is_unchanged_and_keeps_float32():
    x = RNG.normal(size=3).astype(np.float32)
    H = ad.hessian(lambda x: np.sum(x ** 3))(x)
    assert H.dtype == np.float32 and H.shape == (3, 3)
    np.testing.assert_allclose(H, np.diag(6 * x), rtol=1e-6)
    Hv = ad.hessian(lambda x: x ** 3)(x)
    assert Hv.dtype == np.float32 and Hv.shape == (3, 3, 3)
    want = np.zeros((3, 3, 3), np.float32)
    want[np.arange(3), np.arange(3), np.arange(3)] = 6 * x
    np.testing.assert_allclose(Hv, want, rtol=1e-6)


def test_hessian_of_an_integer_output_is_still_refused():
    with pytest.raises(ad.OutputError, match="floating-point"):
        ad.hessian(lambda x: np.arange(3))(X)


# ---- jacrev / jacfwd over pytrees --------------------------------------------------------
def tree_function(p, x):
    return {"out": np.tanh(p["W"] @ x + p["b"]), "norm": np.sum(p["W"] ** 2)}, [x * p["b"]]


OUTPUT_LEAVES = [lambda t: t[0]["out"], lambda t: t[0]["norm"], lambda t: t[1][0]]


@pytest.mark.parametrize("jac", [ad.jacrev, ad.jacfwd])
def test_jacobians_of_pytrees_match_jax_structure_and_differences(jac):
    p = {"W": RNG.normal(size=(2, 2)), "b": RNG.normal(size=2)}
    x = RNG.normal(size=2)
    for argnums in (0, 1):
        J = jac(tree_function, argnums=argnums)(p, x)
        assert_trees_close(J, fd_jacobian(tree_function, (p, x), argnums))
    J = jac(tree_function, argnums=(0, 1))(p, x)  # at each output leaf, (for p, for x)
    assert J[0]["out"][0]["W"].shape == (2, 2, 2) and J[1][0][1].shape == (2, 2)
    wants = [fd_jacobian(tree_function, (p, x), i) for i in range(2)]
    for leaf in OUTPUT_LEAVES:
        assert type(leaf(J)) is tuple and len(leaf(J)) == 2
        for i in range(2):
            assert_trees_close(leaf(J)[i], leaf(wants[i]))


@pytest.mark.parametrize("jac", [ad.jacrev, ad.jacfwd])
def test_jacobians_keep_float32(jac):
    x = RNG.normal(size=3).astype(np.float32)
    J = jac(lambda x: np.sin(x) * x[0])(x)
    assert J.dtype == np.float32 and J.shape == (3, 3)


# ---- elementwise_grad --------------------------------------------------------------------
def test_elementwise_grad_is_the_derivative_of_an_elementwise_function():
    x = RNG.normal(size=(2, 3))
    g = ad.elementwise_grad(np.tanh)(x)
    np.testing.assert_allclose(g, 1 - np.tanh(x) ** 2)

    def f(x, y):
        return np.sin(x) * y
    gy = ad.elementwise_grad(f, argnum=1)(x, 2.0 * x)
    np.testing.assert_allclose(gy, np.sin(x))
    fd = (f(x, 2 * x + EPS) - f(x, 2 * x - EPS)) / (2 * EPS)
    np.testing.assert_allclose(gy, fd, rtol=1e-6, atol=1e-8)


def test_elementwise_grad_keeps_float32_and_is_a_vjp_with_ones():
    x = RNG.normal(size=4).astype(np.float32)
    g = ad.elementwise_grad(lambda x: x ** 2)(x)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, 2 * x, rtol=1e-6)

    def mixing(x):  # not elementwise: the sum of each column of the Jacobian
        return np.cumsum(x)
    x = RNG.normal(size=4)
    np.testing.assert_allclose(ad.elementwise_grad(mixing)(x),
                               ad.jacobian(mixing)(x).sum(axis=0))
