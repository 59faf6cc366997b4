"""Pytrees beyond dicts, lists and tuples: dataclasses (fields as children), OrderedDict,
defaultdict and types registered with register_pytree_node, through every transformation,
as arguments and as outputs, with the structure checked."""

import collections
import dataclasses

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen import tape
from autodiffgen.errors import ArgumentError
from autodiffgen.testing import check_grads


@dataclasses.dataclass
class Params:
    W: np.ndarray
    b: np.ndarray


@dataclasses.dataclass(frozen=True)
class Frozen:
    W: np.ndarray
    b: np.ndarray


class Pair:
    """A container of its own: two arrays and a static tag (the aux_data)."""

    def __init__(self, first, second, tag="plain"):
        self.first, self.second, self.tag = first, second, tag


def flatten_pair(p):
    return (p.first, p.second), p.tag


def unflatten_pair(tag, children):
    return Pair(children[0], children[1], tag)


ad.register_pytree_node(Pair, flatten_pair, unflatten_pair)


def parts(t):
    if isinstance(t, (Params, Frozen)):
        return t.W, t.b
    if isinstance(t, Pair):
        return t.first, t.second
    return t["W"], t["b"]


def make(kind, seed, tag="plain"):
    rng = np.random.default_rng(seed)
    W, b = rng.normal(size=3), rng.normal(size=3)
    return {"dataclass": lambda: Params(W, b), "frozen": lambda: Frozen(W, b),
            "ordereddict": lambda: collections.OrderedDict([("W", W), ("b", b)]),
            "defaultdict": lambda: collections.defaultdict(list, {"W": W, "b": b}),
            "registered": lambda: Pair(W, b, tag)}[kind]()


KINDS = ["dataclass", "frozen", "ordereddict", "defaultdict", "registered"]


def scalar(t):
    W, b = parts(t)
    scale = 2.0 if isinstance(t, Pair) and t.tag == "double" else 1.0
    return np.sum(np.sin(W) * b ** 2) * scale


def vector(t):
    W, b = parts(t)
    return np.tanh(W) * b


def assert_same_kind(got, like):
    assert type(got) is type(like)
    if isinstance(like, collections.defaultdict):
        assert got.default_factory is like.default_factory
    if isinstance(like, Pair):
        assert got.tag == like.tag
    if isinstance(like, collections.OrderedDict):
        assert list(got) == list(like)


def numeric_grad(f, t, eps=1e-6):
    """Finite differences of f at t, leaf by leaf, as [dW, db]."""
    out = []
    for i in range(2):
        leaf = parts(t)[i]
        g = np.zeros_like(leaf)
        for k in range(leaf.size):
            e = np.zeros_like(leaf)
            e[k] = eps
            plus, minus = [list(parts(t)) for _ in range(2)]
            plus[i], minus[i] = leaf + e, leaf - e
            g[k] = (f(_like(t, plus)) - f(_like(t, minus))) / (2 * eps)
        out.append(g)
    return out


def _like(t, leaves):
    if isinstance(t, Pair):
        return Pair(*leaves, t.tag)
    if dataclasses.is_dataclass(t):
        return type(t)(*leaves)
    if isinstance(t, collections.defaultdict):
        return collections.defaultdict(t.default_factory, zip(["W", "b"], leaves))
    return type(t)(zip(["W", "b"], leaves))


@pytest.mark.parametrize("kind", KINDS)
def test_grad_and_value_and_grad(kind):
    f = ad.value_and_grad(scalar)
    for seed in (0, 1):  # the second call runs the cached code on new values
        t = make(kind, seed)
        value, g = f(t)
        assert_same_kind(g, t)
        np.testing.assert_allclose(value, scalar(t))
        for got, want in zip(parts(g), numeric_grad(scalar, t)):
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)
    assert f.cache_info().misses == 1
    check_grads(scalar, make(kind, 2))
    assert_same_kind(tape.grad(scalar)(t), t)


@pytest.mark.parametrize("kind", KINDS)
def test_jvp_and_vjp(kind):
    for seed in (0, 1):
        t, v = make(kind, seed), make(kind, seed + 10)
        out, tangent = ad.jvp(vector, (t,), (v,))
        W, b = parts(t)
        np.testing.assert_allclose(out, np.tanh(W) * b)
        dW, db = parts(v)
        np.testing.assert_allclose(tangent, (1 - np.tanh(W) ** 2) * dW * b + np.tanh(W) * db)
        _, vjp_fn = ad.vjp(vector, t)
        u = np.arange(3.0)
        (ct,) = vjp_fn(u)
        assert_same_kind(ct, t)
        np.testing.assert_allclose(parts(ct)[0], u * (1 - np.tanh(W) ** 2) * b)
        np.testing.assert_allclose(parts(ct)[1], u * np.tanh(W))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("jac", [ad.jacobian, ad.jacfwd])
def test_jacobians(kind, jac):
    t = make(kind, 3)
    J = jac(vector)(t)
    assert_same_kind(J, t)
    W, b = parts(t)
    np.testing.assert_allclose(parts(J)[0], np.diag((1 - np.tanh(W) ** 2) * b), atol=1e-12)
    np.testing.assert_allclose(parts(J)[1], np.diag(np.tanh(W)), atol=1e-12)


@pytest.mark.parametrize("kind", KINDS)
def test_hessian_hvp_and_grad_of_grad(kind):
    t = make(kind, 4)
    W, b = parts(t)
    H = ad.hessian(scalar)(t)
    assert_same_kind(H, t)
    assert_same_kind(parts(H)[0], t)
    np.testing.assert_allclose(parts(parts(H)[0])[0], np.diag(-np.sin(W) * b ** 2), atol=1e-12)
    np.testing.assert_allclose(parts(parts(H)[0])[1], np.diag(2 * np.cos(W) * b), atol=1e-12)
    hv = ad.hvp(scalar, (t,), (t,))
    assert_same_kind(hv, t)
    np.testing.assert_allclose(parts(hv)[1], 2 * np.cos(W) * b * W + 2 * np.sin(W) * b)
    gg = ad.grad(lambda s: np.sum(parts(ad.grad(scalar)(s))[1]))(t)
    assert_same_kind(gg, t)
    np.testing.assert_allclose(parts(gg)[0], 2 * np.cos(W) * b, atol=1e-12)


@pytest.mark.parametrize("kind", KINDS)
def test_outputs_of_the_type(kind):
    """A function returning the container: jvp's tangent and vjp's cotangent have its
    structure; the Jacobian nests the output's structure outside the argument's."""
    def f(t):
        W, b = parts(t)
        return _like(t, [np.sin(W), W * b])
    t = make(kind, 5)
    out, tangent = ad.jvp(f, (t,), (t,))
    assert_same_kind(out, t)
    assert_same_kind(tangent, t)
    out, vjp_fn = ad.vjp(f, t)
    (ct,) = vjp_fn(make(kind, 6))
    W, b = parts(t)
    gW, gb = parts(make(kind, 6))
    np.testing.assert_allclose(parts(ct)[0], gW * np.cos(W) + gb * b)
    np.testing.assert_allclose(parts(ct)[1], gb * W)
    J = ad.jacobian(f)(t)
    assert_same_kind(J, t)
    assert_same_kind(parts(J)[1], t)


def test_a_dataclass_reads_as_attributes_in_the_generated_code():
    t = make("dataclass", 0)
    source = ad.grad(scalar).source(t)
    assert "= t.W" in source and "Params(W=" in source
    source = ad.grad(scalar).source(make("registered", 0))
    assert "flatten_pair(t)[0][0]" in source and "unflatten_pair('plain', [" in source


def test_aux_data_is_part_of_the_key_and_read_by_the_trace():
    g = ad.value_and_grad(scalar)
    plain, double = make("registered", 0), make("registered", 0, tag="double")
    v1, _ = g(plain)
    v2, g2 = g(double)
    assert g.cache_info().misses == 2  # another aux_data: traced again
    np.testing.assert_allclose(v2, 2 * v1)
    assert g2.tag == "double"
    g(make("registered", 1))
    assert g.cache_info() == (1, 2, 2)  # equal aux_data, new values: a hit


def test_structure_and_order_are_part_of_the_key():
    g = ad.grad(scalar)
    od = make("ordereddict", 0)
    g(od)
    g(collections.OrderedDict(reversed(list(od.items()))))  # another order: another key
    g(dict(od))
    g(collections.defaultdict(float, dict(od)))  # another factory: another key
    assert g.cache_info().misses == 4
    g(make("ordereddict", 1))
    assert g.cache_info().misses == 4


def test_a_batch_inside_a_dataclass_is_generalized():
    @dataclasses.dataclass
    class Batch:
        x: np.ndarray
        y: np.ndarray

    calls = []

    def loss(w, batch):
        calls.append(1)
        return np.mean((batch.x @ w - batch.y) ** 2)
    g = ad.grad(loss)
    rng = np.random.default_rng(0)
    w = rng.normal(size=3)
    traced = None
    for n in (8, 6, 5):
        batch = Batch(rng.normal(size=(n, 3)), rng.normal(size=n))
        np.testing.assert_allclose(g(w, batch),
                                   2 * batch.x.T @ (batch.x @ w - batch.y) / n, rtol=1e-12)
        traced = traced if n < 8 else len(calls)
    assert len(calls) == traced  # smaller batches: the code made at the first call
    source = g.source(w, batch)
    assert "n = batch.x.shape[0]" in source and "batch.y.shape[0] != n" in source


def test_mismatched_structures_are_clear_errors():
    t = make("registered", 0)
    with pytest.raises(ValueError, match=r"structure Pair\(aux_data='other'; \*, \*\) but "
                                         r"Pair\(aux_data='plain'; \*, \*\) was expected"):
        ad.jvp(vector, (t,), (make("registered", 1, tag="other"),))
    with pytest.raises(ValueError, match=r"structure \(\*, \*\) but Params\(W=\*, b=\*\)"):
        ad.jvp(vector, (make("dataclass", 0),), ((np.ones(3), np.ones(3)),))

    def f(t):
        return _like(t, [np.sin(parts(t)[0]), parts(t)[1]])
    _, vjp_fn = ad.vjp(f, make("ordereddict", 0))
    with pytest.raises(ArgumentError, match=r"the cotangent has structure \{'W': \*, 'b': \*\}"
                                            r" but the function returned OrderedDict"):
        vjp_fn({"W": np.ones(3), "b": np.ones(3)})
    _, vjp_fn = ad.vjp(f, make("defaultdict", 0))
    with pytest.raises(ArgumentError, match="the cotangent has structure defaultdict"):
        vjp_fn(collections.defaultdict(float, {"W": np.ones(3), "b": np.ones(3)}))


def test_aux_values_of_these_types_with_has_aux():
    def f(t):
        W, b = parts(t)
        return np.sum(W * b), _like(t, [W * 2.0, b.sum()])
    for kind in KINDS:
        for seed in (0, 1):
            t = make(kind, seed)
            g, aux = ad.grad(f, has_aux=True)(t)
            assert_same_kind(aux, t)
            np.testing.assert_allclose(parts(aux)[0], parts(t)[0] * 2.0)
            np.testing.assert_allclose(parts(g)[0], parts(t)[1])


def test_unhashable_aux_data_is_refused_by_name():
    class Bag:
        def __init__(self, x, meta):
            self.x, self.meta = x, meta
    ad.register_pytree_node(Bag, lambda b: ((b.x,), b.meta), lambda meta, c: Bag(c[0], meta))
    with pytest.raises(ArgumentError, match=r"registered for Bag returned aux_data \['a'\], "
                                            "which is not hashable"):
        ad.grad(lambda b: np.sum(b.x))(Bag(np.ones(2), ["a"]))


def test_registration_is_checked():
    with pytest.raises(ValueError, match="already a pytree node type"):
        ad.register_pytree_node(Pair, flatten_pair, unflatten_pair)
    with pytest.raises(ValueError, match="OrderedDict is already a pytree node type"):
        ad.register_pytree_node(collections.OrderedDict, flatten_pair, unflatten_pair)
    with pytest.raises(ValueError, match="Point is already a pytree node type"):
        ad.register_pytree_node(collections.namedtuple("Point", "x y"), flatten_pair,
                                unflatten_pair)
    with pytest.raises(TypeError, match="takes a type"):
        ad.register_pytree_node(Pair(1, 2), flatten_pair, unflatten_pair)


def test_a_lambda_registered_type_and_a_nested_mix():
    class Box2:
        def __init__(self, inner):
            self.inner = inner
    ad.register_pytree_node(Box2, lambda b: ([b.inner], None), lambda _, c: Box2(c[0]))

    def f(tree):
        return np.sum(tree["box"].inner.W ** 2) + np.sum(tree["od"]["k"][0] * 3.0)
    tree = {"box": Box2(make("dataclass", 0)),
            "od": collections.OrderedDict(k=[np.ones(2), 4.0])}
    g = ad.grad(f)(tree)
    assert type(g["box"]) is Box2 and type(g["box"].inner) is Params
    np.testing.assert_allclose(g["box"].inner.W, 2 * tree["box"].inner.W)
    np.testing.assert_allclose(g["od"]["k"][0], [3.0, 3.0])
    source = ad.grad(f).source(tree)
    assert "Box2_flatten(" in source and "Box2_unflatten(" in source


SHIFT = np.array(0.5)


@dataclasses.dataclass
class Model:
    """A dataclass of parameters with methods, a property and a class attribute."""

    W: np.ndarray
    b: np.ndarray
    SCALE = 2.0

    @property
    def weights(self):
        return self.W * self.SCALE

    def predict(self, x):
        return np.tanh(x @ self.weights + self.b) + SHIFT


class Layer:
    """A registered container with a method."""

    def __init__(self, W, act):
        self.W, self.act = W, act

    def __call__(self, x):
        return getattr(np, self.act)(x @ self.W) * SHIFT


ad.register_pytree_node(Layer, lambda layer: ((layer.W,), layer.act),
                        lambda act, children: Layer(children[0], act))


def test_methods_globals_and_class_attributes_are_read_at_each_call(monkeypatch):
    """What the methods of a pytree argument read is read again at each call, as for
    any function: a global they read and a class attribute (never baked in)."""
    def loss(m, x):
        assert isinstance(m, Model)
        m2 = dataclasses.replace(m, b=m.b * 2.0)
        return np.sum(m2.predict(x) ** 2)

    def reference(m, x):
        z = np.tanh(x @ (m.W * Model.SCALE) + 2.0 * m.b) + SHIFT
        return np.sum(z ** 2)
    rng = np.random.default_rng(1)
    m, x = Model(rng.normal(size=(3, 2)), rng.normal(size=2)), rng.normal(size=(4, 3))
    vg = ad.value_and_grad(loss)
    for shift, scale in ((0.5, 2.0), (1.5, 2.0), (1.5, -1.0)):
        monkeypatch.setitem(globals(), "SHIFT", np.array(shift))
        monkeypatch.setattr(Model, "SCALE", scale)
        value, g = vg(m, x)
        np.testing.assert_allclose(value, reference(m, x), rtol=1e-12)
        assert type(g) is Model
        np.testing.assert_allclose(g.W, numeric_grad_of(lambda W: reference(Model(W, m.b), x),
                                                        m.W), rtol=1e-6, atol=1e-8)
    assert vg.cache_info().misses == 1
    layer = Layer(rng.normal(size=(3, 2)), "tanh")

    def layer_loss(layer, x):
        return np.sum(layer(x))
    g = ad.grad(layer_loss)(layer, x)
    np.testing.assert_allclose(g.W, x.T @ ((1 - np.tanh(x @ layer.W) ** 2) * SHIFT),
                               rtol=1e-12)
    assert g.act == "tanh"
    monkeypatch.setitem(globals(), "SHIFT", np.array(4.0))
    g = ad.grad(layer_loss)(layer, x)
    np.testing.assert_allclose(g.W, x.T @ ((1 - np.tanh(x @ layer.W) ** 2) * 4.0), rtol=1e-12)


def numeric_grad_of(f, W, eps=1e-6):
    g = np.zeros_like(W)
    for k in range(W.size):
        e = np.zeros_like(W)
        e.reshape(-1)[k] = eps
        g.reshape(-1)[k] = (f(W + e) - f(W - e)) / (2 * eps)
    return g
