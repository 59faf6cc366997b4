"""Custom primitives, their rules, stop_gradient, and the errors for missing rules."""

import os
import subprocess
import sys

import numpy as np
import pytest
from custom_prims import softplus

import autodiffgen as ad
from autodiffgen.testing import check_grads

RNG = np.random.default_rng(11)


@ad.primitive
def cube(x):
    return x ** 3


def test_custom_primitive_gradients_both_modes_and_second_order():
    def f(x):
        return softplus(2.0 * x).sum()
    x = RNG.normal(size=4)
    check_grads(f, x)
    sig = 1.0 / (1.0 + np.exp(-2.0 * x))
    np.testing.assert_allclose(ad.hessian(f)(x), np.diag(4 * sig * (1 - sig)), atol=1e-10)


def test_generated_code_calls_the_function_itself():
    source = ad.emit(lambda x: softplus(x).sum(), np.ones(3))
    assert "softplus_1(x)" in source or "softplus(x)" in source
    assert "logaddexp" not in source  # not traced into


def test_missing_rule_names_the_primitive_argument_and_line():
    with pytest.raises(ad.UnsupportedOperationError) as info:
        ad.grad(lambda x: cube(x).sum())(np.ones(2))  # missing_vjp
    message = str(info.value)
    assert "cube has no VJP rule for argument 0" in message and "defvjp" in message
    assert "test_custom.py:" in message
    with pytest.raises(ad.UnsupportedOperationError, match="no JVP rule"):
        ad.jvp(lambda x: cube(x).sum(), (np.ones(2),), (np.ones(2),))


def test_custom_primitive_on_plain_arrays_is_the_function():
    np.testing.assert_allclose(softplus(np.zeros(2)), np.log(2.0) * np.ones(2))


def test_stop_gradient():
    x = RNG.normal(size=3)
    g = ad.grad(lambda x: (ad.stop_gradient(x) * x).sum())(x)
    np.testing.assert_allclose(g, x)
    _, t = ad.jvp(lambda x: ad.stop_gradient(x ** 2) + x, (x,), (np.ones(3),))
    np.testing.assert_allclose(t, np.ones(3))


def test_standalone_module_imports_the_custom_primitive(tmp_path):
    source = ad.emit(lambda x: softplus(x).sum(), np.ones(3), standalone=True)
    path = tmp_path / "gen.py"
    path.write_text(source)
    here = os.path.dirname(os.path.dirname(__file__))  # tests/, where custom_prims.py is
    code = ("import importlib.util, numpy as np\n"
            f"spec = importlib.util.spec_from_file_location('gen', {str(path)!r})\n"
            "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
            "v, g = m.f_value_and_grad(np.zeros(3))\n"
            "print(round(float(v), 6), g.tolist())\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": here}, check=True)
    assert result.stdout.split()[0] == str(round(3 * np.log(2.0), 6))


def test_standalone_refuses_a_primitive_it_cannot_import():
    @ad.primitive
    def local(x):
        return x * 2.0
    ad.defvjp(local, lambda g, ans, x: g * 2.0)
    with pytest.raises(ValueError, match="cannot import"):
        ad.emit(lambda x: local(x).sum(), np.ones(2), standalone=True)


def test_stop_gradient_holds_in_nested_derivatives_and_trees():
    def f(x):
        return np.sum(x * ad.stop_gradient(x))
    x = np.array([1.0, 2.0])
    df = ad.grad(f)
    np.testing.assert_allclose(ad.grad(lambda x: np.sum(df(x)))(x), [0.0, 0.0])
    np.testing.assert_allclose(ad.hessian(f)(x), np.zeros((2, 2)))
    g = ad.grad(lambda x: np.sum(ad.stop_gradient((x, x))[0] * x))(x)
    np.testing.assert_allclose(g, x)


def test_cse_tells_closures_apart_and_passes_ignore_user_primitive_names():
    def make_scale(k):
        @ad.primitive
        def scale(x):
            return k * x
        ad.defvjp(scale, lambda g, ans, x: g * k)
        return scale
    s2, s3 = make_scale(2.0), make_scale(3.0)
    value, grad = ad.value_and_grad(lambda x: np.sum(s2(x) + s3(x) ** 2))(np.array([1.0, 2.0]))
    assert value == 51.0
    np.testing.assert_allclose(grad, [20.0, 38.0])

    @ad.primitive
    def negative(x):  # named like the built-in: not to be simplified as one
        return np.maximum(-x, 0.0)
    ad.defvjp(negative, lambda g, ans, x: -g * (x < 0))
    x = np.array([0.5, 1.5])
    value, _ = ad.value_and_grad(lambda x: np.sum(negative(negative(x))))(x)
    assert value == 0.0
