"""The numexpr fuse pass: which trees it fuses, what the fused line reads, that results
are bit for bit NumPy's (dtypes included), and where numexpr must never appear.

Sizes and trees here are small, so the tests lower the measured thresholds: MIN_OPS to 4
for all of them, the size through `min_elements` or `forced`. The thresholds themselves
are tested on `_pays_off` and on one tree. Tests that need numexpr skip without it; the
others run either way.
"""

import ast
import importlib
import itertools
import os
import subprocess
import sys

import numpy as np
import pytest
from graph_helpers import emitted, flat, run, traced

import autodiffgen as ad
from autodiffgen import passes
from autodiffgen.graph import Node
from autodiffgen.testing import check_grads

fuse_module = importlib.import_module("autodiffgen.passes.fuse")
RNG = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def four_ops(monkeypatch):
    monkeypatch.setattr(fuse_module, "MIN_OPS", 4)


@pytest.fixture
def numexpr():
    return pytest.importorskip("numexpr")


@pytest.fixture
def forced(numexpr, monkeypatch):
    """Fuse trees of any size, float32 and float64, inside the normal pipeline (which
    runs it with the other passes only: AUTODIFFGEN_PASSES=0 turns it off too)."""
    monkeypatch.setattr(passes, "ENABLED", True)
    monkeypatch.setattr(fuse_module, "MIN_ELEMENTS", {
        np.dtype(np.float32): (1, 1), np.dtype(np.float64): (1, 1)})


def fused_nodes(graph, forward=False):
    return [n for n in graph.nodes if n.prim is fuse_module.FUSED
            and not (forward and n.grad_of is not None)]


def rational(x, y):
    a = (x * y + x) * y - x * x
    return np.sum(a * a / (1.0 + y * y) - x * y * 0.5)


def fused_pair(fun, *args, argnums=(0, 1), min_elements=1):
    graph = passes.optimize(traced(fun, *args, argnums=argnums))
    fused, changed = fuse_module.fuse(graph, min_elements=min_elements)
    return graph, passes.dce(fused)[0], changed


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fused_trees_give_numpys_results_bit_for_bit(numexpr, dtype):
    x, y = (RNG.uniform(0.5, 1.5, 50).astype(dtype) for _ in range(2))
    before, after, changed = fused_pair(rational, x, y)
    assert changed and fused_nodes(after)
    assert len(after.nodes) < len(before.nodes)
    want, got = run(before, x, y), run(after, x, y)
    for a, b in zip(flat(want), flat(got)):
        assert b.dtype == a.dtype == dtype  # float32 stays float32, constants too
        np.testing.assert_array_equal(a, b)


def test_the_fused_line_reads_as_the_expression_it_computes(numexpr):
    def f(x, y):
        a = (x * y + x) * y - x * x
        return np.sum(a * np.cos(x))
    x, y = RNG.normal(size=8), RNG.normal(size=8)
    _, after, _ = fused_pair(f, x, y, argnums=0)
    (node,) = fused_nodes(after, forward=True)
    assert node.params["expr"] == "(x * y + x) * y - x * x"
    source, _ = emitted(after)
    lines = source.splitlines()
    k = next(i for i, li in enumerate(lines) if "numexpr.evaluate" in li)
    statement, depth = lines[k].split("  #")[0].strip(), len(lines[k]) - len(lines[k].lstrip())
    for more in itertools.takewhile(lambda li: li.startswith(" " * (depth + 1)), lines[k + 1:]):
        statement += " " + more.strip()  # wrapped at 100 characters: its continuation lines
    assert statement == (
        "a = numexpr.evaluate('(x * y + x) * y - x * x', local_dict={'x': x, 'y': y})")
    where = lines[k].split("  # ")[1] if "  # " in lines[k] else lines[k - 1].strip()[2:]
    assert where.startswith("test_fuse.py:")  # after the line, or above it if too long


def test_float32_constants_are_passed_as_float32_scalars(numexpr):
    def f(w, x):  # x is not differentiated: no backward rule reads the tree's inside
        # (nor is the tree the gradient: an output is never fused, see below)
        return np.sum(np.sin(w) * ((x * 0.5 + 1.0) * x - x / 3.0))
    w, x = (RNG.uniform(0.5, 1.5, 16).astype(np.float32) for _ in range(2))
    before, after, _ = fused_pair(f, w, x, argnums=0)
    (node,) = fused_nodes(after, forward=True)
    assert node.params["expr"] == "(x * const + const_1) * x - x / const_2"  # not literals
    assert [a for a in node.args if type(a) is not Node] == [0.5, 1.0, 3.0]
    assert all(type(a) is np.float32 for a in node.args if type(a) is not Node)
    for a, b in zip(flat(run(before, w, x)), flat(run(after, w, x))):
        assert a.dtype == b.dtype == np.float32
        np.testing.assert_array_equal(a, b)
    _, after64, _ = fused_pair(f, w.astype(np.float64), x.astype(np.float64), argnums=0)
    (node64,) = fused_nodes(after64, forward=True)
    assert node64.params["expr"] == "(x * 0.5 + 1.0) * x - x / 3.0"  # float64: literals


def test_values_with_another_consumer_are_leaves_not_inner_nodes(numexpr):
    def f(w, x, y):
        shared = x * y + x              # read twice below: computed once, by NumPy
        return np.sum(np.sin(w) * (((shared - y) * y + x) * shared))
    w, x, y = (RNG.normal(size=8) for _ in range(3))
    _, after, _ = fused_pair(f, w, x, y, argnums=0)
    (node,) = fused_nodes(after, forward=True)
    assert node.params["expr"] == "((shared - y) * y + x) * shared"
    assert any(n.name == "shared" and n.prim.name == "add" for n in after.nodes)


def test_short_trees_small_arrays_and_other_ops_are_left_alone(numexpr, monkeypatch):
    def short(x, y):
        return np.sum((x * y + x) * 2.0)
    x, y = RNG.normal(size=8), RNG.normal(size=8)
    assert not fused_nodes(fused_pair(short, x, y, argnums=0)[1], forward=True)  # < MIN_OPS

    def five(w, x, y):
        return np.sum(w * w * ((x * y + x) * y - x * x))
    monkeypatch.undo()  # the measured MIN_OPS: a five-operation tree stays NumPy's
    assert fuse_module.MIN_OPS > 5
    assert not fused_nodes(fused_pair(five, x, x, y, argnums=0)[1], forward=True)
    monkeypatch.setattr(fuse_module, "MIN_OPS", 4)
    assert fused_nodes(fused_pair(five, x, x, y, argnums=0)[1], forward=True)

    def split(x, y):
        return np.sum(np.exp(x * y + x) * y - x)  # exp is not fused: it splits the tree
    assert not fused_nodes(fused_pair(split, x, y, argnums=0)[1], forward=True)
    graph = passes.optimize(traced(rational, x, y, argnums=(0, 1)))
    assert fuse_module.fuse(graph) == (graph, False)  # measured thresholds: 8 is tiny


def test_mixed_dtypes_and_broadcasts_are_not_fused(numexpr):
    def f(x, y):
        return np.sum(((x * y + x) * y - x) * x)
    x32 = RNG.normal(size=8).astype(np.float32)
    for x, y in ((x32, RNG.normal(size=8)), (RNG.normal(size=(4, 8)), RNG.normal(size=8))):
        _, after, _ = fused_pair(f, x, y, argnums=0)
        assert not fused_nodes(after, forward=True)  # float32 with float64; a broadcast
        for node in fused_nodes(after):
            assert all(type(a) is not Node or (a.shape in (node.shape, ())
                                               and a.dtype == node.dtype) for a in node.args)


def test_a_0d_operand_is_a_leaf_numexpr_broadcasts(numexpr):
    def f(w, c, x):
        return np.sum(np.sin(w) * (((x * c + x) * c - x) * x))
    w, c, x = RNG.normal(size=9), np.array(0.7), RNG.normal(size=9)
    before, after, _ = fused_pair(f, w, c, x, argnums=0)
    (node,) = fused_nodes(after, forward=True)
    assert node.params["expr"] == "((x * c + x) * c - x) * x"
    for a, b in zip(flat(run(before, w, c, x)), flat(run(after, w, c, x))):
        np.testing.assert_array_equal(a, b)


def test_numexpr_names_are_renamed_in_the_expression(numexpr):
    def f(x, y):
        where = np.exp(x)  # a leaf named like a numexpr function
        return np.sum(((where * y + x) * y - x) * y)
    x, y = RNG.normal(size=8), RNG.normal(size=8)
    before, after, _ = fused_pair(f, x, y, argnums=0)
    node = next(n for n in fused_nodes(after) if n.grad_of is None)
    assert "where_1" in node.params["names"] and "where" not in node.params["names"]
    np.testing.assert_array_equal(flat(run(before, x, y))[1], flat(run(after, x, y))[1])


def test_an_output_is_never_a_fused_root(numexpr):
    """rules.buffers.owns does not know the fused primitive: a fused gradient would be copied."""
    _, after, _ = fused_pair(rational, RNG.normal(size=8), RNG.normal(size=8))
    outputs = {id(g) for g in after.outputs[1]}
    assert not any(id(n) in outputs for n in fused_nodes(after))


def test_generated_code_with_numexpr_parses_passes_ruff_and_checks(forced, tmp_path):
    x, y = RNG.uniform(0.5, 1.5, 12), RNG.uniform(0.5, 1.5, 12)
    check_grads(rational, x, y, argnums=(0, 1))
    source = ad.emit(rational, x, y, argnums=(0, 1))
    assert "import numexpr" in source and "numexpr.evaluate(" in source
    ast.parse(source)
    path = tmp_path / "fused.py"
    path.write_text(source)
    lint = subprocess.run([sys.executable, "-m", "ruff", "check", "--isolated", "--no-cache",
                           str(path)], capture_output=True, text=True, check=False)
    assert lint.returncode == 0, lint.stdout + lint.stderr


def test_standalone_modules_and_traced_code_use_numpy_only(forced, monkeypatch):
    x, y = RNG.uniform(0.5, 1.5, 6), RNG.uniform(0.5, 1.5, 6)
    assert "import numexpr" in ad.emit(rational, x, y, argnums=(0, 1))
    standalone = ad.emit(rational, x, y, argnums=(0, 1), standalone=True)
    assert "import numexpr" not in standalone and "numexpr.evaluate" not in standalone
    # the hessian traces the generated gradient on Boxes, which numexpr cannot take
    fused = ad.hessian(rational)(x, y)
    monkeypatch.setattr(fuse_module, "MIN_ELEMENTS", {})
    np.testing.assert_allclose(fused, ad.hessian(rational)(x, y), rtol=1e-12)


def test_without_numexpr_or_when_disabled_nothing_changes(monkeypatch):
    graph = passes.optimize(traced(rational, np.ones(8), np.ones(8), argnums=(0, 1)))
    monkeypatch.setattr(fuse_module, "_numexpr", lambda: None)
    assert fuse_module.fuse(graph, min_elements=1) == (graph, False)
    monkeypatch.setattr(fuse_module, "ENABLED", False)
    assert fuse_module.fuse(graph, min_elements=1) == (graph, False)


def test_the_environment_variable_turns_it_off():
    code = "import importlib; print(importlib.import_module('autodiffgen.passes.fuse').ENABLED)"
    env = dict(os.environ, AUTODIFFGEN_NUMEXPR="0")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, check=True)
    assert out.stdout.strip() == "False"


def test_thresholds_depend_on_dtype_size_and_numexprs_threads(numexpr, monkeypatch):
    def node(n, dtype):
        return Node(0, None, (), {}, (n,), np.dtype(dtype))
    single, several = fuse_module.MIN_ELEMENTS[np.dtype(np.float64)]
    for threads, smallest in ((1, single), (2, several)):
        monkeypatch.setattr(fuse_module, "_threads", lambda t=threads: t)
        assert fuse_module._pays_off(node(smallest, np.float64), None)
        assert not fuse_module._pays_off(node(smallest - 1, np.float64), None)
        assert not fuse_module._pays_off(node(10**8, np.float32), None)  # never won here


def guarded_rational(x, y, d):
    a = (d * d + d) * d - d * d  # non-differentiated data, read by the guard below
    s = float(np.sum(a * a / (1.0 + d * d) - d * 0.5))
    return rational(x, y) * (2.0 if s > 0 else 3.0)


def test_a_tree_a_guard_reads_is_not_fused(numexpr):
    """numexpr would compute the guard's value in another way: it stays as traced (what
    the differentiated inputs compute is still fused)."""
    x, y, d = (RNG.uniform(0.5, 1.5, 50) for _ in range(3))
    before, after, changed = fused_pair(guarded_rational, x, y, d)
    assert changed
    read, stack = set(), [a for n in after.nodes if n.prim.name == "guard" for a in n.args]
    while stack:  # what the guards read, all the way up
        node = stack.pop()
        if type(node) is Node and node not in read:
            read.add(node)
            stack.extend(node.args)
    assert not any(n.prim is fuse_module.FUSED for n in read)
    assert any(n.prim is fuse_module.FUSED for n in after.nodes if n not in read)
    for a, b in zip(flat(run(before, x, y, d)), flat(run(after, x, y, d))):
        np.testing.assert_array_equal(a, b)
