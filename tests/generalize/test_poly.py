"""Shape-polymorphic batches (generalize_batch.py, size_formulas.py): formulas fitted across batch sizes,
generated code that serves every batch size it was checked for, and the cases that must
stay specialized (and right) at other sizes."""

import ast
import functools
import inspect
import subprocess
import sys

import numpy as np
import pytest
from golden_models import mlp_args, mlp_loss
from graph_helpers import gradient_graph

import autodiffgen as ad
from autodiffgen import passes, pipeline, tape
from autodiffgen.cache import shared
from autodiffgen.cache.keys import signature_key
from autodiffgen.cache.loader import load
from autodiffgen.cache.shared import Shared
from autodiffgen.codegen.emitter import emit_module
from autodiffgen.generalize import batch as generalize_batch
from autodiffgen.generated_helpers import GuardFailure
from autodiffgen.graph import Index, Node
from autodiffgen.graph.size_formulas import Dim, NoFit, Scale, SymArray, evaluate, fit, is_symbolic
from autodiffgen.trace.arguments import normalize_argnums


# ---- what GradFunction does with generalize_batch.py (the integration, in miniature) ----------------
class PolyGrad:
    """Exact signature first, then a polymorphic function of another batch size that
    serves this one, else a trace (which tries to generalize). Counts traces."""

    def __init__(self, fun, argnums=0):
        self.fun, self.argnums = fun, normalize_argnums(argnums, fun)
        self.names = list(inspect.signature(fun).parameters)
        self.diff = [i in self.argnums for i in range(len(self.names))]
        self.exact, self.shared, self.traces, self.sources = {}, Shared(), 0, {}

    def __call__(self, *args):
        key = signature_key(args, self.diff)
        entry = self.exact.get(key)
        if entry is None:
            shared, entry = self.shared.find(args, self.diff)
            if entry is None:
                entry, batch = self.compile(args)
                self.shared.add(shared, batch, entry)
            self.exact[key] = entry
        value, grads = entry(*args)
        return value, grads

    def graph(self, args):
        def build(a):
            return gradient_graph(self.fun, a, self.argnums, self.names)
        optimize = functools.partial(pipeline.optimize, numexpr=False)
        graph = pipeline.finish(generalize_batch.generalize(
            build(args), args, self.diff, self.names, optimize, build))
        return graph, graph.batch

    def compile(self, args):
        self.traces += 1
        graph, batch = self.graph(args)
        source, namespace, locs = emit_module([graph])
        self.sources[self.traces] = source
        return load(source, namespace, graph.name, locs), batch


# ---- functions ---------------------------------------------------------------------------
def mean_loss(w, x):
    return np.tanh(x @ w).mean()


def pick_loss(W, x, y):
    """Indexing with np.arange(len(y)) and integer labels, as in examples/mlp.py."""
    z = x @ W
    return -(z[np.arange(len(y)), y]).mean()


def reshape_loss(w, x):
    h = x.reshape(x.shape[0], -1, 2) * w[:2]
    return np.sum(np.tanh(h) ** 2) / len(x)


def differences(w, x):
    """Slices with bounds in n, and the 1/(n - 1) of a sample variance."""
    d = x[1:] - x[:len(x) - 1]
    return np.sum((d @ w) ** 2) / (len(x) - 1)


def clamped(w, x):  # a size clamped in Python: n for small batches, 100 for big ones
    return (x @ w).sum() / min(len(x), 100)


def first_rows(w, x):
    return np.tanh(x[:100] @ w).sum()


def branch(w, x):
    if len(x) > 64:
        return np.tanh(x @ w).sum()
    return np.tanh(x @ w).mean()


def inverse_square(w, x):
    return (x @ w).sum() / len(x) ** 2


def spaced(w, x):  # a constant that is neither an arange nor a fill
    return ((x @ w) * np.linspace(0.0, 1.0, len(x))).sum()


def _data(n=128, features=6, classes=3, dtype=np.float64, seed=0):
    """Arguments by letter: w, W (weights), x, y (a batch of n), p (MLP parameters)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, features)).astype(dtype)
    y = rng.integers(0, classes, n)
    params = mlp_args(n, (features, 8, 8, classes), dtype)[0]  # relu MLP, softmax CE
    w = rng.normal(size=features).astype(dtype)
    W = rng.normal(size=(features, classes)).astype(dtype)
    return {"w": w, "W": W, "x": x, "y": y, "p": params}


def _symbols(graph):
    """Every formula a graph holds: in parameters, constant arguments and shapes."""
    found = []

    def walk(value):
        if type(value) in (Dim, Scale, SymArray):
            found.append(value)
        elif type(value) in (tuple, list):
            if type(value) is tuple and is_symbolic(value):
                found.append(value)  # a shape
            for v in value:
                walk(v)
        elif type(value) is dict:
            walk(list(value.values()))
        elif type(value) is slice:
            walk([value.start, value.stop, value.step])
        elif type(value) is Index:
            walk(value.items)
    for node in graph.inputs + graph.nodes:
        walk([a for a in node.args if type(a) is not Node])
        walk(node.params)
        walk(node.shape)
    return found


def _assert_close(a, b, rtol=1e-9):
    for u, v in zip(_leaves(a), _leaves(b)):
        assert np.shape(u) == np.shape(v) and np.result_type(u) == np.result_type(v)
        np.testing.assert_allclose(u, v, rtol=rtol, atol=rtol)


def _leaves(tree):
    if isinstance(tree, dict):
        return [leaf for k in tree for leaf in _leaves(tree[k])]
    if isinstance(tree, (tuple, list)):
        return [leaf for t in tree for leaf in _leaves(t)]
    return [tree]


def _finite_differences(fun, args, eps=1e-6, count=4):
    """d fun / d args[0] at its first `count` elements (central differences)."""
    w = args[0]
    out = []
    for i in range(min(count, w.size)):
        step = np.zeros_like(w)
        step.flat[i] = eps
        out.append((fun(w + step, *args[1:]) - fun(w - step, *args[1:])) / (2 * eps))
    return np.array(out)


# ---- fitting -----------------------------------------------------------------------------
NS = [128, 127, 2]


@pytest.mark.parametrize("values, expected", [
    ([5, 5, 5], 5),
    ([128, 127, 2], Dim(1, 0)),
    ([256, 254, 4], Dim(2, 0)),
    ([129, 128, 3], Dim(1, 1)),
    ([127, 126, 1], Dim(1, -1)),
    ([np.int64(128), np.int64(127), np.int64(2)], Dim(1, 0, np.int64)),
    ([-1 / 128, -1 / 127, -1 / 2], Scale(-1.0, -1)),
    ([1 / 768, 1 / 762, 1 / 12], Scale(1.0, -1, m=6)),
    ([1 / 127, 1 / 126, 1.0], Scale(1.0, -1, b=-1)),
    ([-3 / 128, -3 / 127, -1.5], Scale(-3.0, -1)),
    ([256.0, 254.0, 4.0], Scale(2.0, 1)),
    ([np.float32(1 / 128), np.float32(1 / 127), np.float32(0.5)], Scale(1.0, -1, np.float32)),
])
def test_fit_numbers(values, expected):
    fitted = fit(values, NS)
    assert fitted == expected
    assert all(type(evaluate(fitted, n)) is type(v) for n, v in zip(NS, values))


@pytest.mark.parametrize("values", [
    [100, 100, 2],  # min(n, 100)
    [64, 64, 1],  # n // 2
    [1 / 128 ** 2, 1 / 127 ** 2, 1 / 4],  # 1/n**2
    [True, False, False],
    [128, 127.0, 2],
    ["a", "b", "c"],
])
def test_fit_refuses(values):
    with pytest.raises(NoFit):
        fit(values, NS)


def test_fit_arrays():
    aranges = fit([np.arange(n) for n in NS], NS)
    assert aranges == SymArray("arange", (Dim(1, 0),), np.dtype(np.int64))
    fills = fit([np.full((n, 3), -1 / n) for n in NS], NS)
    assert fills == SymArray("full", (Dim(1, 0), 3), np.dtype(np.float64), Scale(-1.0, -1))
    zeros = fit([np.zeros((2 * n,), np.float32) for n in NS], NS)
    assert zeros == SymArray("full", (Dim(2, 0),), np.dtype(np.float32), 0.0)
    np.testing.assert_array_equal(evaluate(fills, 37), np.full((37, 3), -1 / 37))
    with pytest.raises(NoFit):
        fit([np.linspace(0, 1, n) for n in NS], NS)
    with pytest.raises(NoFit):  # an arange that stops growing
        fit([np.arange(min(n, 100)) for n in NS], NS)


# ---- unification -------------------------------------------------------------------------
@pytest.mark.parametrize("fun, args, argnums, expected", [
    (mean_loss, "wx", 0, [Scale(1.0, -1, np.float64) if passes.ENABLED else Dim(1, 0)]),
    (pick_loss, "Wxy", 0, [SymArray("arange", (Dim(1, 0),), np.dtype(np.int64))]),
    (reshape_loss, "wx", 0, [(Dim(1, 0), 3, 2)]),
    (mlp_loss, "pxy", 0, [SymArray("arange", (Dim(1, 0),), np.dtype(np.int64)),
                          (Dim(1, 0), 3)]),
])
def test_unify_finds_the_formulas(fun, args, argnums, expected):
    values = _data()
    graph, batch = PolyGrad(fun, argnums).graph(tuple(values[a] for a in args))
    assert batch is not None and (batch.lo, batch.hi) == (2, 128)
    found = _symbols(graph)
    for formula in expected:
        assert formula in found or any(type(s) is SymArray and s.fill == formula
                                       for s in found), (formula, found)


@pytest.mark.parametrize("fun", [clamped, first_rows, branch, inverse_square, spaced])
def test_size_dependent_python_stays_specialized(fun):
    w, x = (_data()[a] for a in "wx")
    graph, batch = PolyGrad(fun).graph((w, x))
    assert batch is None and not _symbols(graph)
    f = PolyGrad(fun)
    for n in (128, 37):
        _assert_close(f(w, x[:n]), tape.value_and_grad(fun)(w, x[:n]))
    assert f.traces == 2


def test_a_range_traced_small_does_not_serve_bigger_batches():
    """Traced at 37 (and 36, 2), `branch` looks polymorphic; its code must not run at 128,
    where Python takes the other branch."""
    w, x = (_data()[a] for a in "wx")
    f = PolyGrad(branch)
    _assert_close(f(w, x[:37]), tape.value_and_grad(branch)(w, x[:37]))
    _assert_close(f(w, x[:20]), tape.value_and_grad(branch)(w, x[:20]))
    assert f.traces == 1
    _assert_close(f(w, x), tape.value_and_grad(branch)(w, x))
    assert f.traces == 2


def test_a_wrong_formula_is_caught_by_the_check_at_the_low_size():
    w, x = (_data()[a] for a in "wx")
    f = PolyGrad(mean_loss)
    graph, _ = f.graph((w, x))
    def build(a):
        return gradient_graph(mean_loss, a, f.argnums, f.names)
    low = build((w, x[:2]))
    assert generalize_batch.agrees(graph, low, (w, x[:2]), 2)
    wrong = {Dim: lambda d: Dim(d.a, d.b + 1),  # n + 1 for n, 1/(2n) for 1/n
             SymArray: lambda a: SymArray("full", a.shape, a.dtype, Scale(1.0, -1, m=2)),
             Scale: lambda s: Scale(s.k, s.power, s.cast, s.var, m=2 * s.m, b=s.b)}
    for node in graph.nodes:
        node.args = tuple(wrong[type(a)](a) if type(a) in wrong else a for a in node.args)
    assert not generalize_batch.agrees(graph, low, (w, x[:2]), 2)


def test_a_probe_that_fails_keeps_the_specialized_code():
    def blocks(w, x):
        return np.sum(x.reshape(-1, 64) ** 2) * w.sum()
    w, x = (_data()[a] for a in "wx")
    assert PolyGrad(blocks).graph((w, x))[1] is None
    _assert_close(PolyGrad(blocks)(w, x), tape.value_and_grad(blocks)(w, x))


# ---- generated code ----------------------------------------------------------------------
CASES = [(mean_loss, "wx"), (pick_loss, "Wxy"), (reshape_loss, "wx"), (differences, "wx"),
         (mlp_loss, "pxy")]


@pytest.mark.parametrize("fun, names", CASES)
def test_polymorphic_code_matches_specialized_tape_and_fd(fun, names):
    data = _data()
    f, specialized, reference = PolyGrad(fun), ad.value_and_grad(fun), tape.value_and_grad(fun)
    small = 1 if fun is not differences else 8  # (differences divides by n - 1)
    for n in (128, 37, small, 2):
        values = dict(data, x=data["x"][:n], y=data["y"][:n])
        args = tuple(values[a] for a in names)
        got = f(*args)
        _assert_close(got, specialized(*args))
        _assert_close(got, reference(*args))
        if names[0] in "wW":
            fd = _finite_differences(fun, args)
            np.testing.assert_allclose(got[1].ravel()[:len(fd)], fd, rtol=1e-5, atol=1e-7)
    # 128 (serving 37 and 2), then 1 row (it broadcasts): its own trace. `differences`
    # serves 8 to 128 (at 2 rows, its n-1 rows broadcast): 2 has its own trace
    assert f.traces == 2


def test_guard_refuses_other_sizes_and_ragged_batches():
    x, y, params = (_data()[a] for a in "xyp")
    f = PolyGrad(mlp_loss)
    f(params, x, y)
    code = f.exact[signature_key((params, x, y), f.diff)]
    with pytest.raises(GuardFailure, match="1 rows: this code serves 2 to 128 rows"):
        code(params, x[:1], y[:1])
    with pytest.raises(GuardFailure, match="the same in x and y"):
        code(params, x[:37], y[:36])
    with pytest.raises(GuardFailure):
        code(params, np.concatenate([x, x]), np.concatenate([y, y]))


def test_float32_stays_float32():
    x, y, params = (_data(dtype=np.float32)[a] for a in "xyp")
    f = PolyGrad(mlp_loss)
    for n in (128, 37):
        value, grads = f(params, x[:n], y[:n])
        assert all(g.dtype == np.float32 for g in grads.values())
        _assert_close((value, grads), tape.value_and_grad(mlp_loss)(params, x[:n], y[:n]),
                      rtol=1e-4)
    assert f.traces == 1
    # its constants in n as float32 (`np.float32(1.0 / n)`; with the passes off, the
    # mean's gradient an array `np.full((n,), -1.0 / n, dtype=np.float32)`), none in float64
    source = f.sources[1]
    assert ("np.float32(" in source or "dtype=np.float32" in source) and "float64" not in source


def test_batch_leaves_inside_a_dict_and_a_differentiated_batch():
    def loss(w, batch):  # the batch dict is data: n is its first array's leading size
        return np.mean((batch["x"] @ w - batch["t"]) ** 2)
    w, x = (_data()[a] for a in "wx")
    t = x[:, 0] * 2.0
    f = PolyGrad(loss, argnums=(0,))
    for n in (128, 37):
        batch = {"x": x[:n], "t": t[:n]}
        got = f(w, batch)
        _assert_close(got, tape.value_and_grad(loss, argnums=(0,))(w, batch))
    assert f.traces == 1
    assert "batch['t'].shape[0] != n" in f.sources[1]
    everything = PolyGrad(loss, argnums=(0, 1))  # all differentiated: no batch axis
    for n in (128, 37):
        batch = {"x": x[:n], "t": t[:n]}
        got = everything(w, batch)
        _assert_close(got, tape.value_and_grad(loss, argnums=(0, 1))(w, batch))
        assert got[1][1]["x"].shape == (n, 6)
    assert everything.traces == 2


def test_generated_source_parses_and_passes_ruff(tmp_path):
    values = _data()
    for i, (fun, names) in enumerate(CASES):
        graph, batch = PolyGrad(fun).graph(tuple(values[a] for a in names))
        assert batch is not None
        source = emit_module([graph], standalone=True)[0]
        ast.parse(source)
        (tmp_path / f"poly_{i}.py").write_text(source)
    lint = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--isolated",
                           str(tmp_path)], capture_output=True, text=True, check=False)
    assert lint.returncode == 0, lint.stdout


def test_emit_module_only_emits(monkeypatch):
    w, x = (_data()[a] for a in "wx")
    graph, _ = PolyGrad(mean_loss).graph((w, x))
    monkeypatch.setattr(passes, "ENABLED", True)
    monkeypatch.setattr(passes, "optimize", lambda g: pytest.fail("optimized twice"))
    assert "n = x.shape[0]" in emit_module([graph])[0]


# ---- keys --------------------------------------------------------------------------------
def test_poly_key():
    x, y, params = (_data()[a] for a in "xyp")
    diff = [True, False, False]
    key = shared.poly_key((params, x, y), diff)
    assert key == shared.poly_key((params, x[:37], y[:37]), diff)
    assert key != shared.poly_key((params, x[:37], y[:36]), diff)
    assert key != shared.poly_key((params, x[:, :3], y), diff)
    assert key != signature_key((params, x, y), diff)
    assert shared.poly_key((1.0, "a"), [True, False]) is None
    assert generalize_batch.batch_of((params, x, y), diff).paths == ((1,), (2,))


# ---- the example: batches of 128, then a last batch of 37 --------------------------------
def test_training_with_a_short_last_batch_traces_once():
    x, y, params = (_data(n=128 * 3 + 37, features=20, classes=4)[a] for a in "xyp")
    f, real = PolyGrad(mlp_loss), ad.value_and_grad(mlp_loss)
    reference = ad.tape.value_and_grad(mlp_loss)
    for epoch in range(2):
        for start in range(0, len(x), 128):
            batch = (x[start:start + 128], y[start:start + 128])
            value, grads = f(params, *batch)
            _assert_close((value, grads), reference(params, *batch))
            _assert_close(real(params, *batch), reference(params, *batch))
            params = {k: params[k] - 0.1 * grads[k] for k in params}
    assert f.traces == 1
    # the library itself: one trace; the 37-row batch gets its own key, the same function
    assert (real.cache_info().misses, real.cache_info().entries) == (1, 2)


def test_numexpr_lowering_before_unification(monkeypatch):
    """With numexpr allowed, both sizes are lowered alike, then unified."""
    monkeypatch.setattr(passes, "ENABLED", True)
    monkeypatch.setattr(sys.modules["autodiffgen.passes.fuse"], "MIN_ELEMENTS",
                        {np.dtype(np.float64): (1, 1)})
    monkeypatch.setattr(sys.modules["autodiffgen.passes.fuse"], "MIN_OPS", 3)
    def loss(w, x):
        return np.sum(np.tanh(x @ w) * 3.0 + (x @ w) ** 2 - np.exp(-(x @ w)) / 2.0) / len(x)
    w, x = (_data()[a] for a in "wx")
    f = PolyGrad(loss)
    def build(a):
        return gradient_graph(loss, a, f.argnums, f.names)
    optimize = functools.partial(pipeline.optimize, numexpr=True)
    graph = pipeline.finish(generalize_batch.generalize(
        build((w, x)), (w, x), f.diff, f.names, optimize, build))
    batch = graph.batch
    source, namespace, locs = emit_module([graph])
    assert batch is not None and "numexpr" in source
    code = load(source, namespace, graph.name, locs)
    _assert_close(code(w, x[:37]), tape.value_and_grad(loss)(w, x[:37]))
