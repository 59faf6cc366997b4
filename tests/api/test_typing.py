"""The public API is typed (issue 15): the package ships py.typed, and every public
function of autodiffgen says the types of its parameters and of what it returns, in
annotations that resolve at run time on every supported Python."""

import inspect
import pathlib
import typing

import numpy as np

import autodiffgen as ad

FUNCTIONS = [name for name in ad.__all__
             if inspect.isfunction(getattr(ad, name)) and name != "__version__"]


def test_the_package_ships_py_typed():
    assert (pathlib.Path(ad.__file__).parent / "py.typed").is_file()


def test_every_public_function_is_annotated():
    assert {"grad", "value_and_grad", "jvp", "vjp", "jacobian", "hessian", "vmap",
            "checkpoint", "standalone_source", "emit"} <= set(FUNCTIONS)
    missing = []
    for name in FUNCTIONS:
        fun = getattr(ad, name)
        signature = inspect.signature(fun)
        hints = typing.get_type_hints(fun)  # resolves: no name undefined at run time
        if "return" not in hints:
            missing.append(f"{name} -> ?")
        missing += [f"{name}({p})" for p in signature.parameters if p not in hints]
    assert not missing, missing


def test_grad_has_one_typed_signature_per_use_as_a_decorator():
    overloads = typing.get_overloads(ad.grad) if hasattr(typing, "get_overloads") else None
    if overloads is not None:  # Python 3.11+
        assert len(overloads) == 2
    signature = inspect.signature(ad.grad)
    assert list(signature.parameters) == ["fun", "argnums", "options"]


def test_the_typed_wrappers_behave_as_before():
    """@grad, @grad(argnums=...), grad(f, argnums) and an unknown option, as before."""
    def f(x, y):
        return np.sum(x * y)

    x, y = np.arange(3.0), np.ones(3)
    np.testing.assert_array_equal(ad.grad(f)(x, y), y)
    np.testing.assert_array_equal(ad.grad(argnums=1)(f)(x, y), x)
    value, g = ad.value_and_grad(f, 1)(x, y)
    assert value == 3.0
    np.testing.assert_array_equal(g, x)
    try:
        ad.grad(f, colour="red")
    except TypeError as e:
        assert "colour" in str(e)
    else:
        raise AssertionError("an unknown option was accepted")
