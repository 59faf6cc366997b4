"""Each optimization pass on its own: what it removes or rewrites, and that the generated
function computes the same values before and after."""

import ast

import numpy as np
import pytest
from graph_helpers import flat, run, traced

import autodiffgen as ad
from autodiffgen import passes
from autodiffgen.graph import Node
from autodiffgen.testing import check_grads

RNG = np.random.default_rng(5)


def ops(graph):
    return [n.prim.name for n in graph.nodes]


def same_results(before, after, *args):
    for a, b in zip(flat(run(before, *args)), flat(run(after, *args))):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_fold_turns_the_seed_chain_into_constants():
    def f(x):
        return -np.mean(np.tanh(x))
    x = RNG.normal(size=5)
    graph = traced(f, x)
    assert "ones" in ops(graph)
    folded, changed = passes.fold(graph)
    assert changed and "ones" not in ops(folded)
    assert len(folded.nodes) < len(graph.nodes)
    same_results(graph, folded, x)


def test_fold_leaves_large_results_computed():
    def f(x):
        return np.sum(x * 2.0)
    x = RNG.normal(size=(64, 64))  # the broadcast seed has 4096 > FOLD_LIMIT elements
    folded, _ = passes.fold(traced(f, x))
    assert "broadcast_to" in ops(folded)


def test_simplify_removes_multiplications_by_one_and_double_negations():
    def f(x):
        return np.sum(np.negative(-x) * 1.0 + 0.0)
    x = RNG.normal(size=4)
    graph = traced(f, x)
    graph_folded, _ = passes.fold(graph)
    simpler, changed = passes.simplify(graph_folded)
    assert changed
    simpler, _ = passes.dce(simpler)
    assert "multiply" not in ops(simpler) and ops(simpler).count("negative") < ops(
        graph).count("negative")
    same_results(graph, simpler, x)


def test_simplify_folds_transpose_and_reshape_chains():
    def f(x):
        return np.sum(np.sin(x.T.T.reshape(6).reshape(2, 3)))
    x = RNG.normal(size=(2, 3))
    graph = traced(f, x)
    simpler, _ = passes.dce(passes.simplify(graph)[0])
    assert "transpose" not in ops(simpler) and ops(simpler).count("reshape") < ops(
        graph).count("reshape")
    same_results(graph, simpler, x)


def test_simplify_never_changes_dtype_or_broadcasting():
    def f(x):
        return np.sum(x * np.ones(3))  # multiplying by ones broadcasts x: not removable
    x = np.float32(2.0) * np.ones((2, 1), np.float32)
    graph = traced(f, x)
    simpler, _ = passes.simplify(graph)
    forward = [n for n in simpler.nodes if n.grad_of is None]
    assert "multiply" in [n.prim.name for n in forward]
    same_results(graph, simpler, x)


def test_cse_merges_repeated_work():
    def f(x):
        return np.sum(np.tanh(x) * np.tanh(x))
    x = RNG.normal(size=4)
    graph = traced(f, x)
    merged, changed = passes.cse(graph)
    assert changed and ops(merged).count("tanh") == 1
    same_results(graph, merged, x)


def test_dce_drops_what_no_output_needs():
    def f(x):
        return np.sum(np.sin(np.negative(-x)))
    x = RNG.normal(size=3)
    graph = traced(f, x)
    simpler, _ = passes.simplify(graph)
    assert "negative" in ops(simpler)  # the inner negation is unused, but still there
    cleaned, changed = passes.dce(simpler)
    assert changed and "negative" not in [n.prim.name for n in cleaned.nodes
                                          if n.grad_of is None]
    live = set(cleaned.nodes) | set(cleaned.inputs)
    assert all(type(a) is not Node or a in live for n in cleaned.nodes for a in n.args)
    same_results(graph, cleaned, x)


def test_optimize_reaches_a_fixed_point():
    def f(W, x):
        return np.mean(np.tanh(x @ W) ** 2)
    W, x = RNG.normal(size=(3, 2)), RNG.normal(size=(4, 3))
    graph = traced(f, W, x)
    once = passes.optimize(graph)
    assert len(once.nodes) < len(graph.nodes)
    for run_pass in passes.PIPELINE:
        assert run_pass(once)[1] is False
    same_results(graph, once, W, x)


def test_ensure_fresh_copies_a_gradient_that_became_an_input():
    def f(x, y):
        return np.sum(x * y)
    x, y = RNG.normal(size=3), RNG.normal(size=3)
    gx, gy = ad.grad(f, argnums=(0, 1))(x, y)
    assert not np.shares_memory(gx, y) and not np.shares_memory(gy, x)


@pytest.mark.parametrize("enabled", [True, False])
def test_results_equal_with_passes_on_and_off(enabled, monkeypatch):
    monkeypatch.setattr(passes, "ENABLED", enabled)

    def f(W, b, x):
        h = np.maximum(x @ W + b, 0.0)
        return np.mean((h - 1.0) ** 2)
    W, b, x = RNG.normal(size=(3, 4)), RNG.normal(size=4), RNG.normal(size=(5, 3))
    value, grads = ad.value_and_grad(f, argnums=(0, 1))(W, b, x)
    tape_value, tape_grads = ad.tape.value_and_grad(f, argnums=(0, 1))(W, b, x)
    np.testing.assert_allclose(value, tape_value)
    for g, t in zip(grads, tape_grads):
        np.testing.assert_allclose(g, t)


# ---- Python floats: math-module code ---------------------------------------------------------
def test_python_floats_get_math_module_code():
    def f(a, b):
        return np.log(a) * np.tanh(b) + a ** 2.5 - np.sqrt(b) / a
    g = ad.value_and_grad(f, argnums=(0, 1))
    value, (ga, gb) = g(1.7, 0.4)
    source = g.source(1.7, 0.4)
    function = next(d for d in ast.parse(source).body  # not its NumPy twin (numpy_fallback)
                    if isinstance(d, ast.FunctionDef) and d.name == "f_value_and_grad")
    names = {n.id for n in ast.walk(function) if isinstance(n, ast.Name)}
    assert "import math" in source and "np" not in names
    assert type(value) is float and type(ga) is float and type(gb) is float
    check_grads(f, 1.7, 0.4, argnums=(0, 1))


def test_math_module_code_returns_numpys_nan_where_math_raises():
    """math.log(-1.0) raises: the call returns its NumPy twin's values (a nan value, a
    finite gradient), with NumPy's warning (tests/emit/test_python_floats.py checks many
    functions and points)."""
    vg = ad.value_and_grad(lambda a: np.log(a) * 2.0)
    vg(1.0)
    with pytest.warns(RuntimeWarning, match="invalid value"):
        value, grad = vg(-1.0)
    assert np.isnan(value) and grad == -2.0


def test_arrays_or_unsupported_primitives_keep_numpy_code():
    source = ad.emit(lambda a, x: np.sum(a * x), 2.0, np.ones(3))
    assert "import math" not in source and "np.sum" in source
    source = ad.emit(lambda a: np.cbrt(a) * 2.0, 2.0)  # cbrt has no math-module form here
    assert "np.cbrt" in source


def test_accumulate_merges_per_step_terms_of_a_loop():
    def unrolled(W, xs):
        h = np.zeros((2, 3))
        for t in range(xs.shape[0]):
            h = np.tanh(xs[t] @ W + h)
        return np.sum(h ** 2)
    W, xs = RNG.normal(size=(4, 3)), RNG.normal(size=(6, 2, 4))
    graph = traced(unrolled, W, xs, argnums=(0, 1))
    merged, changed = passes.accumulate(graph)
    assert changed
    merged, _ = passes.dce(merged)
    backward_ops = [n.prim.name for n in merged.nodes if n.grad_of is not None]
    # W's gradient: one matmul over every step's rows, stacked and reshaped (accumulate's
    # _concatenate); xs's: a plain stack, as every row of xs is set
    assert backward_ops.count("stack") >= 2 and "reshape" in backward_ops
    assert "scatter_add" not in backward_ops
    same_results(graph, merged, W, xs)
    check_grads(unrolled, W, xs, argnums=(0, 1))


def test_accumulate_leaves_short_sums_alone():
    def two_steps(W, x):
        return np.sum((x @ W) ** 2) + np.sum((2 * x) @ W)
    graph = traced(two_steps, RNG.normal(size=(3, 2)), RNG.normal(size=(4, 3)))
    assert passes.accumulate(graph)[1] is False


def test_accumulate_concatenates_blocks_that_tile_rows_and_arrays():
    """A GRU-like loop reads xw[t, :, :4] and xw[t, :, 4:] (the gates and the candidate),
    and splits zr into z = zr[:, :2] and r = zr[:, 2:]: the gradient is a concatenation
    of the blocks, row by row, then a stack; no scatter into zeros of the whole array."""
    def gru_like(W, U, xw):
        h = np.zeros((3, 2))
        for t in range(xw.shape[0]):
            zr = np.tanh(xw[t, :, :4] + h @ W)
            z, r = zr[:, :2], zr[:, 2:]
            n = np.tanh(xw[t, :, 4:] + (r * h) @ U)
            h = n + z * (h - n)
        return np.sum(h ** 2)
    W, U, xw = RNG.normal(size=(2, 4)), RNG.normal(size=(2, 2)), RNG.normal(size=(5, 3, 6))
    graph = traced(gru_like, W, U, xw, argnums=(0, 1, 2))
    merged, changed = passes.accumulate(graph)
    assert changed
    merged, _ = passes.dce(merged)
    backward_ops = [n.prim.name for n in merged.nodes if n.grad_of is not None]
    assert "stack" in backward_ops and "scatter_add" not in backward_ops
    same_results(graph, merged, W, U, xw)
    check_grads(gru_like, W, U, xw, argnums=(0, 1, 2))


@pytest.mark.parametrize("index", [
    lambda x, t: x[t, :, 1:3],          # blocks that do not tile the row: scattered
    lambda x, t: x[t % 2],              # the same row twice: added, then scattered
    lambda x, t: x[:, t % 3],           # a column: not a leading index
])
def test_accumulate_blocks_that_do_not_tile_stay_correct(index):
    def f(x):
        total = 0.0
        for t in range(4):
            total = total + np.sum(np.sin(index(x, t)) * (t + 1))
        return total
    x = RNG.normal(size=(4, 3, 5))
    graph = traced(f, x)
    merged, _ = passes.accumulate(graph)
    same_results(graph, passes.dce(merged)[0], x)
    check_grads(f, x)
