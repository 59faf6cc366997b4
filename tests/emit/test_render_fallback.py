"""Rendering where astor cannot (issue 15): astor 0.8.1 calls ast.Num, which Python 3.14
removed, and `render` then falls back to ast.unparse. These tests force that fallback on
the running Python and check it writes the very source astor writes: the golden models,
complex, infinite and NaN constants, and single expressions. Run them on every Python the
project supports (see CHANGELOG / README: 3.10 to 3.13 here)."""

import ast
import pathlib
import types
import warnings

import numpy as np
import pytest
from golden_models import hessian_args, hessian_fn, jvp_args, jvp_fn

import autodiffgen as ad
from autodiffgen import passes
from autodiffgen.codegen import expressions as emit_ast

GOLDEN = pathlib.Path(__file__).parents[1] / "golden"


def _astor_works():
    try:
        emit_ast._astor_source(ast.Constant(1.0))
    except AttributeError:
        return False
    return True


ASTOR = _astor_works()
needs_astor = pytest.mark.skipif(not ASTOR, reason="astor cannot read this Python's ast")


@pytest.fixture
def without_astor(monkeypatch):
    """render as on a Python astor cannot read; counts the trees the fallback wrote."""
    calls = []

    def broken(tree):
        raise AttributeError("module 'ast' has no attribute 'Num'")

    def counted(tree):
        calls.append(tree)
        return unparse(tree)

    unparse = emit_ast.unparse
    monkeypatch.setattr(emit_ast, "_astor_source", broken)
    monkeypatch.setattr(emit_ast, "unparse", counted)
    return calls


def _complex_loss(z, w):
    return np.sum(np.abs(np.exp(1j * z) * (1 + 2j) - w) ** 2) + np.real(np.sum(z * -1j))


def _fresh(fn):
    """The same function without the compiled code cached on it (ad.hessian keeps it there)."""
    return types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__,
                              fn.__closure__)


def _hessian_source():
    f = _fresh(hessian_fn)
    (x,) = hessian_args()
    ad.hessian(f)(x)
    return f.__autodiffgen_grad_0__.__autodiffgen_vjp_0__.source(x)


def _jvp_source():
    f = _fresh(jvp_fn)
    primals, tangents = jvp_args()
    ad.jvp(f, primals, tangents)
    return f.__autodiffgen_jvp__.source(*primals, *tangents)


def _golden_sources():
    from test_golden import mlp_source, rnn_source, seed_source
    return {"mlp": mlp_source, "rnn": rnn_source, "seed_function": seed_source,
            "hessian": _hessian_source, "jvp": _jvp_source}


PROGRAMS = {
    **_golden_sources(),
    "complex": lambda: ad.emit(_complex_loss, np.linspace(0.1, 1, 5) + 0.5j,
                               np.ones(5, complex)),
    "inf_nan": lambda: ad.emit(lambda x: np.sum(np.minimum(x, np.inf) * np.where(
        np.isnan(x), 0.0, x)), np.arange(4.0)),
}


@needs_astor
@pytest.mark.parametrize("name", PROGRAMS)
def test_the_fallback_writes_the_code_astor_writes(name, request):
    with_astor = PROGRAMS[name]()
    calls = request.getfixturevalue("without_astor")
    without = PROGRAMS[name]()
    assert calls, "the fallback was not used"
    assert without == with_astor


@pytest.mark.parametrize("name", ["mlp", "rnn", "seed_function", "hessian", "jvp"])
def test_the_fallback_writes_the_golden_files(name, without_astor):
    """Also where astor cannot run at all: the golden files are astor's text."""
    if not passes.ENABLED:
        pytest.skip("the golden files show the optimized code")
    assert PROGRAMS[name]() == (GOLDEN / f"{name}.py").read_text()
    assert without_astor


NUMBERS = [0, -3, 1.5, -1.0, 1e300, 1e-7, np.inf, -np.inf, np.nan, 1j, -1j, 0j, 1 + 2j,
           -1 - 2j, complex(2, 0), complex(-0.0, -1.0), complex(0, np.inf),
           complex(np.nan, 1), True, None, "a'b"]


def _shapes(value):
    """The value alone and in the places where astor's parentheses or spelling could differ."""
    c, x = (lambda: ast.Constant(value)), (lambda: ast.Name("x", ast.Load()))
    return [c(), ast.BinOp(c(), ast.Pow(), x()), ast.BinOp(x(), ast.Pow(), c()),
            ast.BinOp(c(), ast.Mult(), x()), ast.BinOp(x(), ast.Sub(), c()),
            ast.UnaryOp(ast.USub(), c()), ast.Attribute(c(), "real", ast.Load()),
            ast.Call(x(), [c()], [ast.keyword("k", c())]), ast.Tuple([c()], ast.Load()),
            ast.Subscript(x(), ast.Tuple([c(), ast.Slice(None, c())], ast.Load()),
                          ast.Load()),
            ast.Module([ast.Assign([ast.Name("y", ast.Store())], ast.BinOp(c(), ast.Add(), x()))],
                       [])]


@needs_astor
@pytest.mark.parametrize("value", NUMBERS, ids=repr)
def test_constants_in_expressions_are_spelled_as_astor_spells_them(value):
    for tree in _shapes(value):
        if isinstance(value, str) and isinstance(tree, ast.Constant | ast.Attribute):
            continue  # astor writes a string alone as a docstring ("""..."""); never emitted
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            expected = emit_ast._astor_source(tree)
        assert emit_ast.unparse(tree) == expected, ast.dump(tree)


def test_a_function_without_positions_renders():
    """The failure the fallback had: ast.unparse reads positions the emitter never sets."""
    body = [ast.Expr(ast.Constant("Doc.")),
            ast.Assign([ast.Name("y", ast.Store())], ast.Constant(-1j)),
            ast.Return(ast.Name("y", ast.Load()))]
    fn = ast.FunctionDef("f", ast.arguments([], [], None, [], [], None, []), body, [], None,
                         None)
    tree = ast.Module([fn], [])
    text = emit_ast.unparse(tree)
    assert "y = -1.0j" in text
    namespace = {}
    exec(text, namespace)  # noqa: S102  rendered above
    assert namespace["f"]() == -1j
    assert not hasattr(body[0], "lineno")  # the caller's tree is left as it was
