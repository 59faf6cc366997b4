"""Pytree outputs (tuples, lists, dicts, namedtuples, nested, with Python numbers and
integer leaves) under vjp, jvp, jacobian, jacfwd and hessian, and pytree arguments and
tuple argnums for Jacobians and Hessians (the structures JAX returns): generated code
against the tape and central finite differences, first and second order."""

import collections

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen import tape
from autodiffgen.tree import leaves, map_tree, map_trees

RNG = np.random.default_rng(12)
EPS = 1e-6
Pair = collections.namedtuple("Pair", "first second")


def _is_float(a):
    return np.issubdtype(np.result_type(a), np.floating)


def _random_like(tree, rng):
    """Normal draws at the float leaves of `tree`, None at the others."""
    return map_tree(tree, lambda a: rng.normal(size=np.shape(a)) if _is_float(a) else None)


def _step(args, v, s):
    return map_trees(lambda a, t: a if t is None else a + s * t, args, v)


def _dot(a, b):
    """<a, b> over the float leaves both trees have."""
    total = 0.0
    for x, y in zip(leaves(a), leaves(b)):
        if x is not None and y is not None and _is_float(x) and _is_float(y):
            total += float(np.sum(np.asarray(x, np.float64) * np.asarray(y, np.float64)))
    return total


def _close(a, b, rtol=1e-6, atol=1e-8):
    map_trees(lambda x, y: np.testing.assert_allclose(x, y, rtol=rtol, atol=atol), a, b)


def _fd(f, args, v):
    """Central difference of f at args along v, leaf by leaf (float leaves only)."""
    plus, minus = f(*_step(args, v, EPS)), f(*_step(args, v, -EPS))
    return map_trees(lambda p, m: (np.asarray(p, np.float64) - m) / (2 * EPS)
                     if _is_float(p) else None, plus, minus)


def tuple_out(x, y):
    return np.sin(x), y @ x, 3.0


def list_out(x, y):
    return [x * y, np.sum(x ** 2)]


def nested_out(x, y):
    return {"v": (x[0] * x, [np.exp(x).sum()]), "u": np.tanh(y)}


def namedtuple_out(x, y):
    return Pair(np.cos(y).sum(axis=0) * x, Pair(x[1], 2.5))


def repeated_out(x, y):
    z = x * 2.0
    return x, z, z, np.log(z * z + 1.0)


def with_an_integer(x, y):
    return np.sum(x ** 2 * y), np.argmax(x), x > 0


def dict_params(p, y):
    return {"out": np.tanh(y @ p["W"] + p["b"]), "reg": np.sum(p["W"] ** 2)}


CASES = [(tuple_out, False), (list_out, False), (nested_out, False),
         (namedtuple_out, False), (repeated_out, False), (with_an_integer, False),
         (dict_params, True)]


def _args(params):
    x, y = RNG.normal(size=3), RNG.normal(size=(2, 3))
    if params:
        return ({"b": RNG.normal(size=4), "W": RNG.normal(size=(3, 4))}, y)
    return (x, y)


@pytest.mark.parametrize("f, params", CASES, ids=[c[0].__name__ for c in CASES])
def test_vjp_and_jvp_of_pytree_outputs(f, params):
    """jvp against finite differences and the tape; vjp against the tape and as jvp's
    transpose, <u, J v> == <vjp(u), v> for random u and v; twice, with new data."""
    for _ in range(2):
        args = _args(params)
        v = _random_like(args, RNG)
        out, t = ad.jvp(f, args, v)
        _close(out, f(*args))
        numeric = _fd(f, args, v)
        map_trees(lambda a, b: b is None or np.testing.assert_allclose(a, b, rtol=1e-5,
                                                                       atol=1e-7), t, numeric)
        _close(t, tape.jvp(f, args, v)[1])
        out2, vjp_fn = ad.vjp(f, *args)
        _close(out2, out)
        u = _random_like(out, RNG)
        cotangents = vjp_fn(u)
        assert len(cotangents) == len(args)
        _close(cotangents, tape.vjp(f, *args)[1](u))
        assert np.isclose(_dot(cotangents, v), _dot(u, t), rtol=1e-9, atol=1e-12)
    assert f.__autodiffgen_vjp__.cache_info().misses == 1


def test_a_cotangent_dict_matches_by_keys_and_none_is_zeros():
    x, y = RNG.normal(size=3), RNG.normal(size=(2, 3))
    _, vjp_fn = ad.vjp(nested_out, x, y)
    u = {"u": RNG.normal(size=(2, 3)), "v": (RNG.normal(size=3), [1.5])}
    reordered = {"v": u["v"], "u": u["u"]}
    _close(vjp_fn(u), vjp_fn(reordered))
    only_u = vjp_fn({"u": u["u"], "v": None})
    _close(only_u, vjp_fn({"u": u["u"], "v": (np.zeros(3), [0.0])}))
    assert np.any(only_u[1] != 0) and not np.any(only_u[0])


def test_a_cotangent_of_another_structure_or_shape_is_refused():
    x, y = RNG.normal(size=3), RNG.normal(size=(2, 3))
    _, vjp_fn = ad.vjp(nested_out, x, y)
    with pytest.raises(ad.ArgumentError, match=r"test_pytree_outputs.py:\d+: the "
                       r"cotangent\['v'\] has structure"):
        vjp_fn({"u": np.ones((2, 3)), "v": (np.ones(3),)})
    with pytest.raises(ad.ArgumentError, match=r"cotangent\['v'\]\[0\] has shape \(2,\)"):
        vjp_fn({"u": np.ones((2, 3)), "v": (np.ones(2), [1.0])})
    with pytest.raises(ad.ArgumentError, match="structure"):
        vjp_fn({"u": np.ones((2, 3)), "w": (np.ones(3), [1.0])})
    _, vjp_fn = ad.vjp(tuple_out, x, y)
    with pytest.raises(ad.ArgumentError, match="structure"):
        vjp_fn([np.ones(3), np.ones(2), 1.0])  # a list for a tuple


def test_an_output_leaf_that_is_not_a_number_is_refused():
    with pytest.raises(ad.OutputError, match="every leaf must be a number or an array of numbers"):
        ad.vjp(lambda x: (x * 2.0, "label"), np.ones(2))


def _branchy(x):
    if np.sum(x) > 0:
        return x * 2.0, {"s": np.sum(x ** 3)}
    return [np.sin(x)]


def test_the_output_structure_follows_the_path_taken():
    """The structure is what the traced path returns: each guarded variant has its own,
    and each call's cotangent is checked against the output of that call."""
    up, down = np.array([0.5, 1.0]), np.array([-0.5, -1.0])
    out, vjp_fn = ad.vjp(_branchy, up)
    assert type(out) is tuple
    np.testing.assert_allclose(vjp_fn((np.ones(2), {"s": 1.0}))[0], 2.0 + 3 * up ** 2)
    out, vjp_fn = ad.vjp(_branchy, down)
    assert type(out) is list
    np.testing.assert_allclose(vjp_fn([np.ones(2)])[0], np.cos(down))
    with pytest.raises(ad.ArgumentError, match="structure"):
        vjp_fn((np.ones(2), {"s": 1.0}))
    out, vjp_fn = ad.vjp(_branchy, up * 3)
    np.testing.assert_allclose(vjp_fn((np.zeros(2), {"s": 1.0}))[0], 27 * up ** 2)


def test_float32_and_zero_dimensional_leaves():
    x = RNG.normal(size=3).astype(np.float32)
    out, vjp_fn = ad.vjp(lambda x: (np.sum(x), x * x, 1.5), x)
    assert out[2] == 1.5 and out[1].dtype == np.float32
    g = vjp_fn((np.float32(2.0), np.ones(3, np.float32), 1.0))[0]
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, 2.0 + 2 * x, rtol=1e-6)
    _, t = ad.jvp(lambda x: (np.sum(x), x * x), (x,), (np.ones(3, np.float32),))
    assert t[1].dtype == np.float32


# ---- second order: through the generated VJP of a pytree output --------------------------
def _sum_of_cotangents(x, y):
    """Autograd's second-order check of a function of two arguments: its VJP returns a
    tuple, which the outer transformation differentiates."""
    u = (np.cos(x), np.ones(2), 0.5)
    gx, gy = ad.vjp(tuple_out, x, y)[1](u)
    return np.sum(gx * gx) + np.sum(np.sin(gy))


def test_grad_of_a_function_that_sums_a_vjp_tuple():
    x, y = RNG.normal(size=3), RNG.normal(size=(2, 3))
    gx, gy = ad.grad(_sum_of_cotangents, argnums=(0, 1))(x, y)
    tx, ty = tape.grad(_sum_of_cotangents, argnums=(0, 1))(x, y)
    np.testing.assert_allclose(gx, tx, rtol=1e-10)
    np.testing.assert_allclose(gy, ty, rtol=1e-10)
    v = _random_like((x, y), RNG)
    numeric = _fd(_sum_of_cotangents, (x, y), v)
    assert np.isclose(_dot((gx, gy), v), numeric, rtol=1e-6)


def test_forward_over_reverse_of_a_pytree_output():
    x, y, v = RNG.normal(size=3), RNG.normal(size=(2, 3)), RNG.normal(size=3)
    u = {"u": RNG.normal(size=(2, 3)), "v": (RNG.normal(size=3), [0.7])}

    def cotangent_x(x):
        return ad.vjp(nested_out, x, y)[1](u)[0]
    _, t = ad.jvp(cotangent_x, (x,), (v,))
    np.testing.assert_allclose(t, _fd(cotangent_x, (x,), (v,)), rtol=1e-5, atol=1e-7)


# ---- Jacobians and Hessians: pytree outputs, pytree arguments, tuple argnums -------------
def _numeric_block(f, args, n, path, out_path, eps=EPS):
    """d out[out_path] / d args[n][path] by central differences, element by element."""
    def pick(tree, where):
        for key in where:
            tree = tree[key]
        return np.asarray(tree, np.float64)

    x = pick(args[n], path)
    columns = []
    for k in range(x.size):
        e = np.zeros(x.shape)
        e.reshape(-1)[k] = eps
        v = map_tree(args, lambda a: None)
        v = list(v)
        v[n] = _with(args[n], path, e)
        plus, minus = f(*_step(args, tuple(v), 1.0)), f(*_step(args, tuple(v), -1.0))
        columns.append((pick(plus, out_path) - pick(minus, out_path)) / (2 * eps))
    out_shape = pick(f(*args), out_path).shape
    return np.stack(columns, axis=-1).reshape(out_shape + x.shape)


def _with(tree, path, value):
    """A tree like `tree`, None everywhere but `value` at `path`."""
    if not path:
        return value
    if type(tree) is dict:
        return {k: _with(c, path[1:], value) if k == path[0] else None
                for k, c in tree.items()}
    return type(tree)(_with(c, path[1:], value) if i == path[0] else None
                      for i, c in enumerate(tree))


def _paths(tree, prefix=()):
    if type(tree) is dict:
        return [p for k, c in tree.items() for p in _paths(c, prefix + (k,))]
    if isinstance(tree, (tuple, list)):
        return [p for i, c in enumerate(tree) for p in _paths(c, prefix + (i,))]
    return [prefix]


def _at(tree, path):
    for key in path:
        tree = tree[key]
    return tree


def _model(p, x):
    h = np.tanh(x @ p["W"] + p["b"])
    return {"h": h, "stats": (np.sum(h ** 2), h[0] * p["c"])}


@pytest.mark.parametrize("jac", [ad.jacobian, ad.jacfwd])
def test_jacobian_of_a_dict_argument_and_pytree_output(jac):
    p = {"W": RNG.normal(size=(3, 2)), "b": RNG.normal(size=2), "c": 0.7}
    x = RNG.normal(size=3)
    J = jac(_model)(p, x)
    assert set(J) == {"h", "stats"} and type(J["stats"]) is tuple
    for out_path in _paths(_model(p, x)):
        block = _at(J, out_path)
        assert set(block) == {"W", "b", "c"}  # the argument's structure at each leaf
        for path in _paths(p):
            want = _numeric_block(_model, (p, x), 0, path, out_path)
            got = _at(block, path)
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def test_jacrev_and_jacfwd_agree_over_a_tuple_argnums():
    x, y = RNG.normal(size=3), RNG.normal(size=(2, 3))
    rev = ad.jacobian(nested_out, argnums=(0, 1))(x, y)
    fwd = ad.jacfwd(nested_out, argnums=(0, 1))(x, y)
    map_trees(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14), rev, fwd)
    assert type(rev["v"][0]) is tuple and rev["v"][0][1].shape == (3, 2, 3)
    assert rev["u"][1].shape == (2, 3, 2, 3)
    np.testing.assert_allclose(rev["u"][1], _numeric_block(nested_out, (x, y), 1, (), ("u",)),
                               rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(rev["v"][1][0][0],
                               _numeric_block(nested_out, (x, y), 0, (), ("v", 1, 0)),
                               rtol=1e-5, atol=1e-7)


def _two(a, b):
    return np.sum(np.sin(a) * b[0] ** 2) + np.sum(a ** 3) * b[1]


def test_hessian_over_a_tuple_argnums_is_a_tuple_of_tuples():
    a, b = RNG.normal(size=3), RNG.normal(size=2)
    H = ad.hessian(_two, argnums=(0, 1))(a, b)
    assert [[h.shape for h in row] for row in H] == [[(3, 3), (3, 2)], [(2, 3), (2, 2)]]
    grads = ad.grad(_two, argnums=(0, 1))
    for i in range(2):
        for j in range(2):
            want = _numeric_block(lambda a, b: grads(a, b), (a, b), j, (), (i,))
            np.testing.assert_allclose(H[i][j], want, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(H[0][1], H[1][0].T, rtol=1e-10)


def test_hessian_of_a_dict_argument():
    p = {"W": RNG.normal(size=(3, 2)), "b": RNG.normal(size=2), "c": 0.7}
    x = RNG.normal(size=3)

    def loss(p, x):
        out = _model(p, x)
        return np.sum(out["h"] * out["stats"][1]) + out["stats"][0]
    H = ad.hessian(loss)(p, x)
    assert set(H) == {"W", "b", "c"} and set(H["W"]) == {"W", "b", "c"}
    assert H["W"]["b"].shape == (3, 2, 2) and H["c"]["c"].shape == ()
    g = ad.grad(loss)
    for row in _paths(p):
        for column in _paths(p):
            want = _numeric_block(lambda p, x: g(p, x), (p, x), 0, column, row)
            np.testing.assert_allclose(_at(H, row + column), want, rtol=1e-5, atol=1e-7)
    x2 = RNG.normal(size=3)  # new data: the same generated code, new values
    H2 = ad.hessian(loss)(p, x2)
    np.testing.assert_allclose(H2["b"]["W"], _numeric_block(lambda p, x: g(p, x), (p, x2), 0,
                                                            ("W",), ("b",)),
                               rtol=1e-5, atol=1e-7)


def test_jacobian_refusals_name_the_problem():
    x = np.ones(3)
    with pytest.raises(ad.ArgumentError, match="argnums=2 is out of range"):
        ad.jacobian(lambda a, b: a * b, argnums=(0, 2))(x, x)
    with pytest.raises(ad.ArgumentError, match="every leaf must be a float"):
        ad.jacobian(lambda p: p["a"] * p["n"])({"a": x, "n": np.arange(3)})
    with pytest.raises(ad.OutputError, match="needs floating-point outputs"):
        ad.jacobian(lambda a: (a * 2.0, np.argmax(a)))(x)
    with pytest.raises(ad.OutputError, match="needs floating-point outputs"):
        ad.jacfwd(lambda a: (a * 2.0, np.argmax(a)))(x)


def test_jacobian_with_an_empty_leaf():
    def f(a, b):
        return {"s": np.sum(a) * 2.0, "e": b * 1.0}
    a, b = np.ones(2), np.ones(0)
    for jac in (ad.jacobian, ad.jacfwd):
        J = jac(f, argnums=(0, 1))(a, b)
        assert J["s"][1].shape == (0,) and J["e"][0].shape == (0, 2)
        np.testing.assert_allclose(J["s"][0], [2.0, 2.0])
