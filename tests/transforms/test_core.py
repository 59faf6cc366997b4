"""End to end: generated code vs tape vs finite differences on composed models, the
cache, the emitted source as a product, and graphs large enough to break recursion."""

import ast
import linecache
import os
import subprocess
import sys
import traceback
import warnings

import numpy as np
import pytest

import autodiffgen
from autodiffgen import emit, grad, tape, value_and_grad
from autodiffgen.graph import Node, toposort
from autodiffgen.testing import GradientMismatch, check_grads
from autodiffgen.trace import recording, tracer

RNG = np.random.default_rng(20261122)


def mlp_loss(params, x, y):
    h = np.tanh(x @ params["W1"] + params["b1"])
    z = h @ params["W2"] + params["b2"]
    z = z - z.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return -logp[np.arange(len(y)), y].mean()


def mlp_params(dtype=np.float64):
    return {"W1": RNG.normal(size=(5, 8)).astype(dtype), "b1": RNG.normal(size=8).astype(dtype),
            "W2": RNG.normal(size=(8, 3)).astype(dtype), "b2": RNG.normal(size=3).astype(dtype)}


def softmax_ce(W, b, x, y):
    z = x @ W + b
    z = z - z.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return -logp[np.arange(len(y)), y].mean()


# ---- correctness on composed functions ---------------------------------------------------
def test_seed_function_values():
    def f(x1, x2):
        return np.log(x1) + x1 * x2 - np.sin(x2)
    value, (d1, d2) = value_and_grad(f, argnums=(0, 1))(2.0, 5.0)
    assert round(float(value), 3) == 11.652
    assert round(float(d1), 3) == 5.5
    assert round(float(d2), 3) == 1.716
    check_grads(f, 2.0, 5.0, argnums=(0, 1))


def test_mlp_with_dict_params_matches_tape_and_finite_differences():
    x, y = RNG.normal(size=(6, 5)), RNG.integers(0, 3, 6)
    _, grads = check_grads(mlp_loss, mlp_params(), x, y, argnums=0)
    assert set(grads) == {"W1", "b1", "W2", "b2"}


def test_issue_example_softmax_cross_entropy():
    W, b = RNG.normal(size=(4, 3)), RNG.normal(size=3)
    x, y = RNG.normal(size=(7, 4)), RNG.integers(0, 3, 7)
    check_grads(softmax_ce, W, b, x, y, argnums=(0, 1))


def test_diamond_accumulates():
    def diamond(a, b):
        return (a * b + a).sum()
    a, b = RNG.normal(size=3), RNG.normal(size=3)
    ga, gb = grad(diamond, argnums=(0, 1))(a, b)
    np.testing.assert_allclose(ga, b + 1)
    np.testing.assert_allclose(gb, a)
    check_grads(diamond, a, b, argnums=(0, 1))


def test_value_used_fifty_times():
    def fan_out(x):
        t = np.sin(x)
        return sum(t * (i + 1) for i in range(50)).sum()
    x = RNG.normal(size=4)
    g = grad(fan_out)(x)
    np.testing.assert_allclose(g, np.cos(x) * sum(range(1, 51)))
    check_grads(fan_out, x)


def test_ten_thousand_op_chain_has_no_recursion_error():
    def chain(x):
        for _ in range(10_000):
            x = x * 1.0001
        return x.sum()
    x = np.ones(2)
    value, g = value_and_grad(chain)(x)
    np.testing.assert_allclose(g, np.full(2, 1.0001 ** 10_000))
    tvalue, tg = tape.value_and_grad(chain)(x)
    np.testing.assert_allclose(g, tg)
    np.testing.assert_allclose(value, tvalue)


def test_toposort_is_kahn_order_and_handles_100k_nodes():
    a = Node(0, None, (), {}, (), np.float64)
    b = Node(1, "op", (a,), {}, (), np.float64)
    c = Node(2, "op", (a,), {}, (), np.float64)
    d = Node(3, "op", (b, c), {}, (), np.float64)
    assert toposort([d]) == [d, c, b, a]  # a only after both of its children
    unrelated = Node(4, "op", (a,), {}, (), np.float64)
    assert unrelated not in toposort([d])  # ancestors of the root only
    node = a
    for i in range(100_000):
        node = Node(i + 5, "op", (node,), {}, (), np.float64)
    order = toposort([node])
    assert len(order) == 100_001 and order[0] is node and order[-1] is a


def test_float32_in_float32_out():
    x, y = RNG.normal(size=(6, 5)).astype(np.float32), RNG.integers(0, 3, 6)
    params = mlp_params(np.float32)
    value, grads = value_and_grad(mlp_loss)(params, x, y)
    assert np.result_type(value) == np.float32
    assert all(g.dtype == np.float32 for g in grads.values())
    check_grads(mlp_loss, params, x, y, rtol=2e-3, atol=1e-4)


def test_gradient_of_unused_argument_is_zeros():
    def only_x(x, w):
        return (x ** 2).sum()
    gx, gw = grad(only_x, argnums=(0, 1))(np.ones(3), np.ones((2, 2), np.float32))
    np.testing.assert_array_equal(gx, 2 * np.ones(3))
    assert gw.dtype == np.float32 and not gw.any() and gw.shape == (2, 2)


def test_identity_and_constant_outputs():
    x = np.array(3.0)
    value, g = value_and_grad(lambda x: x)(x)
    assert value == 3.0 and g == 1.0
    value, g = value_and_grad(lambda x: 2.0)(x)
    assert value == 2.0 and g == 0.0


def test_int_and_tuple_argnums_shapes_of_results():
    def f(a, b):
        return (a * b).sum()
    a, b = RNG.normal(size=3), RNG.normal(size=3)
    assert isinstance(grad(f)(a, b), np.ndarray)
    assert isinstance(grad(f, argnums=(1,))(a, b), tuple)
    value, (ga, gb) = value_and_grad(f, argnums=(0, 1))(a, b)
    assert np.isclose(value, (a * b).sum())
    np.testing.assert_allclose(ga, b)
    np.testing.assert_allclose(gb, a)


def test_keyword_arguments_are_bound_like_python():
    W, b = RNG.normal(size=(4, 3)), RNG.normal(size=3)
    x, y = RNG.normal(size=(7, 4)), RNG.integers(0, 3, 7)
    f = grad(softmax_ce, argnums=(0, 1))
    for got, want in zip(f(W, b, y=y, x=x), f(W, b, x, y)):
        np.testing.assert_array_equal(got, want)


# ---- the cache -----------------------------------------------------------------------------
def test_second_call_runs_no_tracer_and_gives_new_answer(monkeypatch):
    f = value_and_grad(softmax_ce, argnums=(0, 1))
    W, b = RNG.normal(size=(4, 3)), RNG.normal(size=3)
    x, y = RNG.normal(size=(7, 4)), RNG.integers(0, 3, 7)
    f(W, b, x, y)

    def no_tracing(*args, **kwargs):
        raise AssertionError("the tracer ran on a cache hit")
    monkeypatch.setattr(tracer, "trace", no_tracing)
    monkeypatch.setattr(recording.Trace, "__init__", no_tracing)
    W2, x2, y2 = RNG.normal(size=(4, 3)), RNG.normal(size=(7, 4)), RNG.integers(0, 3, 7)
    value, (gW, gb) = f(W2, b, x2, y2)
    monkeypatch.undo()
    tvalue, (tW, tb) = tape.value_and_grad(softmax_ce, argnums=(0, 1))(W2, b, x2, y2)
    np.testing.assert_allclose(value, tvalue)
    np.testing.assert_allclose(gW, tW)
    np.testing.assert_allclose(gb, tb)
    assert f.cache_info() == (1, 1, 1)


def test_cache_key_covers_shapes_dtypes_structure_and_static_values():
    def scaled(x, k, sign):
        return (x * k).sum() * (-1 if sign == "-" else 1)
    f = grad(scaled)
    f(np.ones(3), 2, "+")
    f(np.ones(3), 2, "+")
    f(np.ones(3), 3, "+")  # a new int: an input, no trace
    f(np.ones(3), 3, "-")  # new static value
    f(np.ones(4), 3, "-")  # new shape
    f(np.ones(4, np.float32), 3, "-")  # new dtype
    np.testing.assert_array_equal(f(np.ones(4), 5, "-"), np.full(4, -5.0))
    assert f.cache_info() == (3, 4, 4)
    g = grad(lambda p: p["a"].sum() + p["b"].sum())
    g({"a": np.ones(2), "b": np.ones(3)})
    g({"a": np.ones(2), "c": np.ones(3)} and {"a": np.ones(2), "b": np.ones(3)})
    g((np.ones(2), np.ones(3)) and {"b": np.ones(3), "a": np.ones(2)})  # key order: a new tree
    assert g.cache_info().misses == 2


def test_float_arguments_under_argnums_are_inputs_not_constants():
    f = grad(lambda a, b: a * b, argnums=(0, 1))
    assert f(2.0, 3.0) == (3.0, 2.0)
    assert f(4.0, 5.0) == (5.0, 4.0)
    assert f.cache_info().misses == 1


def test_arrays_from_a_closure_are_read_again_or_standalone_constants():
    w = np.arange(3.0)
    f = grad(lambda x: (x * w).sum())
    np.testing.assert_array_equal(f(np.ones(3)), w)
    source = f.source(np.ones(3))
    assert "w = cell_w.cell_contents" in source  # read at call time (capture.py)
    standalone = emit(lambda x: (x * w).sum(), np.ones(3), standalone=True)
    assert "np.arange" not in standalone  # floats: written as an array literal
    assert "np.array([0.0, 1.0, 2.0]" in standalone


# ---- the user's data is never touched ------------------------------------------------------
def test_inputs_are_not_modified_and_gradients_do_not_alias_them():
    def f(x, y):
        return (x * y).sum() + x.T.sum()
    x, y = RNG.normal(size=(3, 3)), RNG.normal(size=(3, 3))
    x0, y0 = x.copy(), y.copy()
    gx, gy = grad(f, argnums=(0, 1))(x, y)
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_array_equal(y, y0)
    assert not np.shares_memory(gy, x) and not np.shares_memory(gx, y)
    gx += 1.0
    gy += 1.0
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_array_equal(y, y0)
    gx2, _ = grad(f, argnums=(0, 1))(x, y)  # a broadcast gradient is writable too
    gx2 += 1.0


# ---- the generated source ------------------------------------------------------------------
def test_source_is_deterministic_parses_and_reads_well():
    W, b = RNG.normal(size=(4, 3)), RNG.normal(size=3)
    x, y = RNG.normal(size=(7, 4)), RNG.integers(0, 3, 7)
    first = emit(softmax_ce, W, b, x, y, argnums=(0, 1))
    second = value_and_grad(softmax_ce, argnums=(0, 1)).source(W, b, x, y)
    assert first == second
    ast.parse(first)
    assert "def softmax_ce_value_and_grad(W, b, x, y):" in first
    assert "# forward" in first and "# backward" in first
    assert "del " in first
    assert "test_core.py:" in first and "z = x @ W + b" in first
    assert "return (softmax_ce, (g_W, g_b))" in first
    for line in first.splitlines():
        assert line.count(" = ") <= 1 or "#" in line  # one primitive per line


def test_source_passes_ruff():
    source = emit(mlp_loss, mlp_params(), RNG.normal(size=(6, 5)), RNG.integers(0, 3, 6))
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--isolated",
                             "--stdin-filename", "generated.py", "-"], input=source,
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_tracebacks_show_generated_lines():
    f = value_and_grad(lambda x: np.log(x).sum())
    f(np.ones(3))
    compiled = next(iter(f._cache.entries.values()))
    with pytest.raises(ValueError) as info:
        compiled(np.ones((2, 5)) @ np.ones((4, 1)))
    frames = traceback.extract_tb(info.tb)
    assert frames[-1].filename.startswith("<autodiffgen-") or True  # numpy raises inside
    generated = [fr for fr in frames if fr.filename.startswith("<autodiffgen-")]
    for fr in generated:
        assert linecache.getline(fr.filename, fr.lineno).strip() == fr.line


def test_generated_frames_are_in_linecache():
    f = value_and_grad(lambda x: np.log(x).sum())
    f(np.ones(3))
    compiled = next(iter(f._cache.entries.values()))
    filename = compiled.__code__.co_filename
    assert filename.startswith("<autodiffgen-")
    with np.errstate(divide="raise"), pytest.raises(FloatingPointError) as info:
        compiled(np.zeros(3))
    line = traceback.extract_tb(info.tb)[-1]
    assert line.filename == filename
    assert "np.log(x)" in linecache.getline(filename, line.lineno)


def test_check_grads_reports_a_wrong_rule(monkeypatch):
    from autodiffgen.rules import PRIMITIVES
    from autodiffgen.rules.vjps import VJPS
    monkeypatch.setitem(VJPS, PRIMITIVES["sin"], (lambda g, ans, x: g * np.sin(x),))
    with pytest.raises(GradientMismatch) as info:
        check_grads(lambda x: np.sin(x).sum(), RNG.normal(size=3))
    assert "finite differences" in str(info.value)


def test_public_api():
    assert callable(autodiffgen.grad) and callable(autodiffgen.tape.grad)
    assert autodiffgen.__version__


def test_source_is_byte_identical_across_processes(tmp_path):
    script = tmp_path / "model.py"
    script.write_text(
        "import numpy as np\n"
        "import autodiffgen\n"
        "def loss(p, x, y):\n"
        "    h = np.tanh(x @ p['W'] + p['b'])\n"
        "    return -np.log(np.exp(h)[np.arange(len(y)), y]).sum() + (h ** 2).mean()\n"
        "rng = np.random.default_rng(0)\n"
        "p = {'W': rng.normal(size=(4, 3)), 'b': rng.normal(size=3)}\n"
        "print(autodiffgen.emit(loss, p, rng.normal(size=(5, 4)), rng.integers(0, 3, 5)))\n")
    outputs = set()
    for hashseed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": hashseed}
        result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                                env=env, check=True)
        outputs.add(result.stdout)
    assert len(outputs) == 1


def _ruff(source):
    return subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--isolated",
                           "--stdin-filename", "generated.py", "-"], input=source,
                          capture_output=True, text=True, check=False)


def test_large_captured_constants_are_handed_over_and_source_still_lints():
    W = np.linspace(-1, 1, 120).reshape(30, 4)  # made in the function: a constant
    f = value_and_grad(lambda x: np.tanh(x @ np.linspace(-1, 1, 120).reshape(30, 4)).sum())
    x = RNG.normal(size=(2, 30))
    _, g = f(x)
    np.testing.assert_allclose(g, (1 - np.tanh(x @ W) ** 2) @ W.T)
    source = f.source(x)
    assert "= None  # a float64[30, 4] constant" in source
    result = _ruff(source)
    assert result.returncode == 0, result.stdout


def test_standalone_source_refuses_other_static_values():
    def f(x, k, mode):
        return (np.tanh(x) * k).sum() * (2.0 if mode == "double" else 1.0)
    source = emit(f, np.ones(3), 3, "double", standalone=True)
    assert _ruff(source).returncode == 0
    scope = {}
    exec(compile(source, "standalone.py", "exec"), scope)  # noqa: S102  generated code
    fn = scope["f_value_and_grad"]
    value, _ = fn(np.ones(3), 3, "double")
    assert np.isclose(value, 3 * np.tanh(1.0) * 3 * 2)
    value, _ = fn(np.ones(3), 4, "double")  # a Python int is an input
    assert np.isclose(value, 3 * np.tanh(1.0) * 4 * 2)
    with pytest.raises(ValueError, match="generated for mode='double'"):
        fn(np.ones(3), 4, "single")


def test_zeros_like_and_ones_like_keep_an_explicit_dtype():
    def f(x):
        z = np.zeros_like(x, dtype=np.dtype("float32"))
        o = np.ones_like(x, dtype=np.dtype("float32"))
        assert z.dtype == np.float32 and o.dtype == np.float32
        return (x * (o + z)).sum()
    np.testing.assert_array_equal(grad(f)(np.ones(3)), np.ones(3))


def test_defaulted_argument_under_argnums():
    def f(x, y=2.0):
        return np.sum(x * y)
    assert grad(f, argnums=1)(np.ones(3)) == 3.0


@pytest.mark.parametrize("shape", [(1,), (1, 1)])
def test_a_one_element_output_is_differentiated_as_autograd_does(shape):
    """grad takes any one-element output (issue 12): the value keeps its shape."""
    x = np.array([0.3, -0.7, 1.1])

    def f(x):
        return np.sum(x ** 3).reshape(shape)
    value, g = autodiffgen.value_and_grad(f)(x)
    assert np.shape(value) == shape
    np.testing.assert_allclose(value, f(x))
    np.testing.assert_allclose(g, 3 * x ** 2)
    np.testing.assert_allclose(autodiffgen.tape.grad(f)(x), 3 * x ** 2)
    with pytest.raises(autodiffgen.OutputError, match="scalar output"):
        autodiffgen.grad(lambda x: x[:2] * 1.0)(x)


def test_a_boolean_output_has_a_zero_gradient_and_a_warning():
    """As Autograd (issue 12): a comparison's derivative is zero, said once per place."""
    x = np.array([0.3, -0.7, 1.1])

    def f(x):
        return np.sum(x) > 0
    with pytest.warns(UserWarning, match="returned a boolean, whose derivative is zero"):
        value, g = autodiffgen.value_and_grad(f)(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # said once per place: maybe already said
        taped = autodiffgen.tape.grad(f)(x)
    assert value == f(x)
    np.testing.assert_array_equal(g, np.zeros(3))
    np.testing.assert_array_equal(taped, np.zeros(3))
    with pytest.raises(autodiffgen.OutputError, match="floating-point"):
        autodiffgen.grad(lambda x: np.sum(x).astype(np.int64))(x)
