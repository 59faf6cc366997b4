"""Mistakes in how the library is called (its arguments, argnums, methods, dtypes it
refuses): a clear exception naming the problem and the user's file and line.

Mistakes inside the differentiated function are in test_errors_in_user_code.py; bad settings
(max_entries=, $AUTODIFFGEN_MAX_ENTRIES, decorator order) in test_setting_errors.py."""

import numpy as np
import pytest

import autodiffgen
from autodiffgen import grad, tape, value_and_grad

with open(__file__) as _source:
    HERE = _source.read().splitlines()


def line_of(marker):
    """'test_errors_in_calls.py:N' for the line that carries `# <marker>`."""
    n = next(i for i, text in enumerate(HERE, 1) if text.rstrip().endswith(f"# {marker}"))
    return f"test_errors_in_calls.py:{n}"


X = np.linspace(0.5, 1.5, 6).reshape(2, 3)
V = np.array([0.5, -1.5, 2.3])


def two(a, b):
    return (a * b).sum()


def test_argnums_out_of_range_names_the_function_definition():
    with pytest.raises(autodiffgen.ArgumentError) as info:
        grad(two, argnums=2)
    message = str(info.value)
    assert "argnums=2" in message and "two" in message
    assert f"test_errors_in_calls.py:{two.__code__.co_firstlineno}" in message


@pytest.mark.parametrize("argnums", [-1, (0, 5), "0", ()])
def test_bad_argnums(argnums):
    with pytest.raises(autodiffgen.ArgumentError):
        grad(two, argnums=argnums)


def test_integer_array_under_argnums():
    with pytest.raises(autodiffgen.ArgumentError) as info:
        grad(two, argnums=1)(X, np.arange(3))  # int_arg
    assert line_of("int_arg") in str(info.value)
    assert "'b'" in str(info.value) and "int64" in str(info.value)


@pytest.mark.parametrize("bad", [3, True, np.array([True, False, True])])
def test_integer_or_boolean_scalar_under_argnums(bad):
    with pytest.raises(autodiffgen.ArgumentError) as info:
        value_and_grad(two, argnums=(0, 1))(X, bad)
    assert "'b'" in str(info.value) and "argnums" in str(info.value)


def test_ndarray_subclass_is_refused():
    with pytest.raises(autodiffgen.ArgumentError) as info:
        grad(two)(np.ma.masked_array(X), X)
    assert "subclass" in str(info.value)


def test_keyword_only_arguments_are_refused():
    def kwonly(x, *, scale):
        return (x * scale).sum()
    with pytest.raises(autodiffgen.ArgumentError):
        grad(kwonly)(X, scale=2.0)


def test_integer_arguments_are_refused_under_argnums():
    with pytest.raises(autodiffgen.ArgumentError, match="floating-point and complex"):
        autodiffgen.grad(lambda z: np.sum(np.abs(z) ** 2))(np.ones(2, int))


def test_jacobian_of_an_integer_argument_is_refused():
    with pytest.raises(autodiffgen.ArgumentError, match="floating-point"):
        autodiffgen.jacobian(lambda x, i: x * i, argnums=1)(np.ones(2), np.arange(2))
    np.testing.assert_array_equal(autodiffgen.jacfwd(lambda x: x * 2)(np.ones(0)),
                                  np.zeros((0, 0)))


# ---- argnums as users write it (on `two_sin` and a 1-d V) ------------------------------
def two_sin(a, b):
    return np.sum(a * np.sin(b))


@pytest.mark.parametrize("argnums, expected", [
    (np.int64(1), 1), (np.int32(0), 0), ((np.int64(0), 1), (0, 1)), ([1, 0], (1, 0)),
    (range(2), (0, 1))])
def test_numpy_integers_are_argnums(argnums, expected):
    a, b = V.copy(), V[::-1].copy()
    got = grad(two_sin, argnums=argnums)(a, b)
    want = tape.grad(two_sin, argnums=expected)(a, b)
    for g, w in zip(got if isinstance(expected, tuple) else [got],
                    want if isinstance(expected, tuple) else [want]):
        np.testing.assert_allclose(g, w)
    jac = autodiffgen.jacobian(np.sin, argnums=np.int64(0))(V)
    np.testing.assert_allclose(jac, np.diag(np.cos(V)))
    hess = autodiffgen.hessian(lambda x: np.sum(x ** 3), argnums=np.int64(0))(V)
    np.testing.assert_allclose(hess, np.diag(6 * V))


@pytest.mark.parametrize("argnums", [0.0, True, np.bool_(False), "0", None, (0, 1.0), [],
                                     np.array([0.5])])
def test_non_integer_argnums_are_refused_clearly(argnums):
    with pytest.raises(autodiffgen.ArgumentError) as info:
        grad(two_sin, argnums=argnums)
    assert "argnums must be an int" in str(info.value)
    assert f"test_errors_in_calls.py:{two_sin.__code__.co_firstlineno}" in str(info.value)


@pytest.mark.parametrize("bad", [None, "scale"])
def test_none_under_argnums_names_the_argument(bad):
    with pytest.raises(autodiffgen.ArgumentError) as info:
        autodiffgen.value_and_grad(two_sin, argnums=(0, 1))(V.copy(), bad)  # none_arg
    message = str(info.value)
    assert "'b'" in message and repr(bad) in message and "argnums" in message
    assert line_of("none_arg") in message


class Model:
    """As in Autograd and JAX, argnums count `self` as argument 0."""

    def __init__(self, scale):
        self.scale = scale

    @grad(argnums=1)
    def loss(self, w, x):
        return np.sum(np.sin(w * x)) * self.scale

    @autodiffgen.value_and_grad(argnums=(1, 2))
    def both(self, w, x):
        return np.sum(np.sin(w * x)) * self.scale

    @grad
    def by_default(self, w):
        return np.sum(w ** 2)

    def plain(self, w, x):
        return np.sum(np.sin(w * x)) * self.scale


def test_grad_works_on_methods_and_counts_self_as_argument_0():
    rng = np.random.default_rng(2)
    Model.loss.cache_clear()
    for scale in (2.0, 3.0):
        model = Model(scale)
        for _ in range(2):
            w, x = rng.normal(size=3), rng.normal(size=3)
            np.testing.assert_allclose(model.loss(w, x), scale * x * np.cos(w * x))
            np.testing.assert_allclose(model.loss(w, x=x), scale * x * np.cos(w * x))
            np.testing.assert_allclose(model.loss(w, x),
                                       tape.grad(Model.plain, argnums=1)(model, w, x))
            value, (gw, gx) = model.both(w, x)
            np.testing.assert_allclose(gw, scale * x * np.cos(w * x))
            np.testing.assert_allclose(value, model.plain(w, x))
            np.testing.assert_allclose(gx, scale * w * np.cos(w * x))
            np.testing.assert_allclose(Model.loss(model, w, x), model.loss(w, x))  # unbound
    info = model.loss.cache_info()  # one cache for the method, shared by every instance
    assert info == Model.loss.cache_info() and info.misses == 2 and info.hits == 18
    assert "def loss_value_and_grad(self, w, x):" in model.loss.source(w, x)
    assert "Model" in repr(model.loss)
    with pytest.raises(autodiffgen.ArgumentError) as info:
        model.by_default(w)  # self_under_argnums
    message = str(info.value)
    assert "'self'" in message and "argnums=1" in message
    assert line_of("self_under_argnums") in message


def test_real_only_rules_refuse_complex_values_clearly():
    z = np.array([1.0 + 2.0j, 0.5j])
    with pytest.raises(autodiffgen.UnsupportedOperationError) as info:
        grad(lambda z: np.sum(np.maximum(z, 0.0).real))(z)  # complex_arg
    message = str(info.value)
    assert "maximum of a complex value" in message and line_of("complex_arg") in message
    with pytest.raises(autodiffgen.UnsupportedOperationError) as info:
        grad(lambda w, z: np.sum(np.clip(w * z, 0, 1).real))(np.ones(2), z)  # complex_data
    assert "clip" in str(info.value) and line_of("complex_data") in str(info.value)
    g = grad(lambda w, z: np.sum((w * z).real))(np.ones(2), z)  # complex data: its real part
    np.testing.assert_array_equal(g, [1.0, 0.0])
    objects = np.array([1.0, 2.0], dtype=object)  # arithmetic on it has no float dtype:
    with pytest.raises(autodiffgen.ArgumentError) as info:  # the gradient was zeros
        grad(lambda w, o: np.sum(w * o))(np.ones(2), objects)  # object_data
    assert "dtype object" in str(info.value) and line_of("object_data") in str(info.value)
