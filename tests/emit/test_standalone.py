"""Standalone modules (standalone.py: `autodiffgen emit -o`, `standalone_source`): every
batch size, the traced dtypes kept, the arguments checked (SignatureError), guards that
cannot trace again (GuardFailure), NumPy only."""

import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen import cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def mlp_loss(params, x, y):
    h = np.tanh(x @ params["W1"] + params["b1"])
    z = h @ params["W2"] + params["b2"]
    z = z - z.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return -logp[np.arange(len(y)), y].mean()


def data(rows, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    params = {"W1": rng.normal(size=(5, 4)), "b1": rng.normal(size=4),
              "W2": rng.normal(size=(4, 3)), "b2": rng.normal(size=3)}
    params = {k: v.astype(dtype) for k, v in params.items()}
    return params, rng.normal(size=(rows, 5)).astype(dtype), rng.integers(0, 3, rows)


def load(source):
    scope = {}
    exec(compile(source, "standalone_test.py", "exec"), scope)  # noqa: S102  generated code
    return scope


def ruff(source):
    return subprocess.run([sys.executable, "-m", "ruff", "check", "--isolated", "--no-cache",
                           "--stdin-filename", "gen.py", "-"], input=source, text=True,
                          capture_output=True, check=False)


def assert_same(got, want, rtol):
    got_leaves, want_leaves = ad.tree.leaves(got), ad.tree.leaves(want)
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves):
        assert np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol)


@pytest.fixture(scope="module")
def mlp_module():
    vg = ad.value_and_grad(mlp_loss)
    return vg, load(ad.standalone_source(vg, *data(16)))


@pytest.mark.parametrize("rows", [1, 2, 5, 15, 16, 17, 40, 300])
def test_every_batch_size_matches_the_in_memory_gradient(mlp_module, rows):
    vg, module = mlp_module
    args = data(rows, seed=rows)
    assert_same(module["value_and_grad"](*args), vg(*args), 1e-12)


def test_float32_stays_float32():
    vg = ad.value_and_grad(mlp_loss)
    module = load(vg.standalone_source(*data(16, np.float32)))
    for rows in (1, 7, 64):
        value, grads = module["mlp_loss_value_and_grad"](*data(rows, np.float32, rows))
        assert value.dtype == np.float32
        assert all(g.dtype == np.float32 for g in grads.values())
        assert_same((value, grads), vg(*data(rows, np.float32, rows)), 1e-5)


@pytest.mark.parametrize("change, message", [
    (lambda p, x, y: (p, x.astype(np.float32), y),
     "x has dtype float32, but this module serves x: float64[n, 5]"),
    (lambda p, x, y: (p, x[:, :4], y), "x has shape (16, 4), but this module serves"),
    (lambda p, x, y: (p, x, y[:3]), ("y has shape (3,), but this module serves y: int64[n] "
                                    "with n = 16")),
    (lambda p, x, y: ({**p, "W1": p["W1"].T}, x, y), "params['W1'] has shape (4, 5)"),
    (lambda p, x, y: ({"W1": p["W1"]}, x, y), ("params has the structure ('dict', ('W1',)), "
                                              "but this module serves ('dict', ('W1', 'W2', ")),
    (lambda p, x, y: ({**p, "W3": p["W2"]}, x, y), "'W2', 'W3', 'b1'"),  # no gradient for W3
    (lambda p, x, y: ({**p, "b2": {"v": p["b2"]}}, x, y), "('b2', ('dict', ('v',)))"),
    (lambda p, x, y: (list(p.values()), x, y), "params has the structure ('list', "),
    (lambda p, x, y: (p, x.tolist(), y), "x is a list, but this module serves"),
    (lambda p, x, y: (p, x[:0], y[:0]), "x has 0 rows: this module serves 1 and 2 or more"),
])
def test_an_argument_it_does_not_serve_is_named(mlp_module, change, message):
    _, module = mlp_module
    with pytest.raises(module["SignatureError"]) as info:
        module["value_and_grad"](*change(*data(16)))
    assert message in str(info.value)
    assert isinstance(info.value, TypeError) and isinstance(info.value, ValueError)


def branchy(w, x):
    z = x @ w
    if np.sum(z) > 0:  # a data-dependent branch: a guard
        return np.mean(np.tanh(z) ** 2)
    return np.mean(z ** 2)


def test_a_failed_guard_raises_the_modules_guard_failure():
    w, x = np.array([1.0, 2.0]), np.abs(np.random.default_rng(3).normal(size=(10, 2)))
    gf = ad.grad(branchy)
    module = load(ad.standalone_source(gf, w, x))
    for rows in (1, 4, 30):
        xs = np.resize(x, (rows, 2))
        value, g = module["value_and_grad"](w, xs)
        assert value == pytest.approx(np.mean(np.tanh(xs @ w) ** 2))
        assert_same(g, gf(w, xs), 1e-12)
    for rows in (1, 4, 30):
        with pytest.raises(module["GuardFailure"], match="cannot trace again") as info:
            module["value_and_grad"](w, -np.ones((rows, 2)))
        assert "np.sum(z) > 0" in str(info.value)
        assert not isinstance(info.value, module["SignatureError"])


def test_a_size_decided_in_python_above_the_traced_size_is_refused_not_wrong():
    def capped(w, x):
        if len(x) > 20:  # the cache traces again at 21 rows; a module cannot
            return np.sum(x @ w)
        return np.mean((x @ w) ** 2)
    w, x = np.ones(3), np.ones((8, 3))
    module = load(ad.standalone_source(capped, w, x))
    assert module["value_and_grad"](w, np.ones((1, 3)))[0] == 9.0
    assert module["value_and_grad"](w, x)[0] == 9.0
    with pytest.raises(module["SignatureError"], match="serves 1 and 2 to 8 rows .*above 8"):
        module["value_and_grad"](w, np.ones((9, 3)))


def test_a_masks_count_is_read_at_run_time_at_every_batch_size():
    def masked(w, x):
        err = x @ w
        return np.mean(err[err > 0] ** 2)  # the in-memory cache: one trace per shape
    w, x = np.ones(2), np.random.default_rng(4).normal(size=(6, 2))
    source = ad.standalone_source(masked, w, x)
    module = load(source)
    assert "count = int(np.count_nonzero(" in source and "or more rows." in source
    # from 6 rows up (below, the code of each size keeps the count its first rows held)
    for rows in (6, 9, 40, 3000):
        xs = np.random.default_rng(rows).normal(size=(rows, 2))
        assert_same(module["value_and_grad"](w, xs), ad.value_and_grad(masked)(w, xs), 1e-12)


@dataclasses.dataclass
class Params:
    w: np.ndarray
    b: np.ndarray


def test_grad_with_aux_and_a_dataclass_returns_value_and_grad():
    def loss(p, x):
        z = x @ p.w + p.b
        return np.mean(z ** 2), {"zmax": np.max(z)}
    p, x = Params(np.array([1.0, -2.0]), np.array(0.5)), np.linspace(0, 1, 14).reshape(7, 2)
    gf = ad.grad(loss, has_aux=True)
    module = load(gf.standalone_source(p, x))
    for rows in (1, 3, 7, 20):
        xs = np.resize(x, (rows, 2))
        (value, aux), g = module["loss_value_and_grad"](p, xs)
        want_g, want_aux = gf(p, xs)
        assert value == pytest.approx(np.mean((xs @ p.w + p.b) ** 2))
        assert aux["zmax"] == pytest.approx(want_aux["zmax"])
        assert isinstance(g, Params)
        assert_same(g, want_g, 1e-12)
    with pytest.raises(module["SignatureError"], match="p.b has dtype float32"):
        module["value_and_grad"](Params(p.w, np.float32(0.5)), x)


def test_argnums_tuple_and_a_static_argument():
    def loss(a, b, x, act):
        z = x @ a + b
        return np.mean(np.tanh(z) if act == "tanh" else z ** 2)
    a, b, x = np.ones(3), np.array(0.1), np.ones((6, 3))
    module = load(ad.standalone_source(loss, a, b, x, "tanh", argnums=(0, 1)))
    value, (ga, gb) = module["value_and_grad"](a, b, np.ones((11, 3)), "tanh")
    assert_same((value, (ga, gb)),
                ad.value_and_grad(loss, argnums=(0, 1))(a, b, np.ones((11, 3)), "tanh"), 1e-12)
    with pytest.raises(ValueError, match="regenerate"):
        module["value_and_grad"](a, b, x, "relu")


def test_modules_pass_ruff_and_import_only_numpy(mlp_module):
    vg = mlp_module[0]
    source = vg.standalone_source(*data(16, np.float32))
    assert ruff(source).returncode == 0, ruff(source).stdout
    imports = [line for line in source.splitlines() if line.startswith(("import", "from"))]
    assert imports == ["import numpy as np"]


def test_scipy_is_imported_only_where_the_code_calls_it():
    special = pytest.importorskip("scipy.special")

    def erf_loss(w, x):
        return np.mean(special.erf(x * w))
    source = ad.standalone_source(erf_loss, np.ones(3), np.ones((5, 3)))
    assert "import scipy" in source and ruff(source).returncode == 0
    module = load(source)
    assert_same(module["value_and_grad"](np.ones(3), np.ones((9, 3))),
                ad.value_and_grad(erf_loss)(np.ones(3), np.ones((9, 3))), 1e-12)


# Runs a module with `import autodiffgen` made impossible, at the batch sizes given, and
# prints the values and the gradients' dtypes and sums as JSON.
RUNNER = '''\
import json
import sys

sys.modules["autodiffgen"] = None
import numpy as np

scope = {}
exec(open(sys.argv[1]).read(), scope)
out = {}
for rows in (1, 3, 16, 50):
    rng = np.random.default_rng(rows)
    params = {"W1": rng.normal(size=(5, 4)), "b1": rng.normal(size=4),
              "W2": rng.normal(size=(4, 3)), "b2": rng.normal(size=3)}
    params = {k: v.astype(np.float32) for k, v in params.items()}
    x, y = rng.normal(size=(rows, 5)).astype(np.float32), rng.integers(0, 3, rows)
    value, grads = scope["value_and_grad"](params, x, y)
    out[rows] = [float(value), str(value.dtype), {k: float(g.sum()) for k, g in grads.items()},
                 sorted({str(g.dtype) for g in grads.values()})]
try:
    scope["value_and_grad"](params, x.astype(np.float64), y)
except scope["SignatureError"] as e:
    out["error"] = str(e)
print(json.dumps(out))
'''


def test_the_module_runs_where_autodiffgen_cannot_be_imported(tmp_path):
    vg = ad.value_and_grad(mlp_loss)
    path = tmp_path / "mlp_standalone.py"
    path.write_text(vg.standalone_source(*data(16, np.float32)))
    result = subprocess.run([sys.executable, "-c", RUNNER, str(path)], capture_output=True,
                            text=True, cwd=tmp_path, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    for rows in (1, 3, 16, 50):
        value, dtype, sums, dtypes = out[str(rows)]
        want_value, want = vg(*data(rows, np.float32, rows))
        assert (dtype, dtypes) == ("float32", ["float32"])
        assert value == pytest.approx(float(want_value), rel=1e-5)
        for k, g in want.items():
            assert sums[k] == pytest.approx(float(g.sum()), rel=1e-4, abs=1e-5)
    assert out["error"].startswith("x has dtype float64, but this module serves")


def test_cli_output_serves_other_batch_sizes(tmp_path):
    model = tmp_path / "standalone_model.py"
    model.write_text('''\
import numpy as np

from autodiffgen import value_and_grad


@value_and_grad(example=dict(w="f32[3]", x="f32[32,3]", y="f32[32]"))
def loss(w, x, y):
    return np.mean((x @ w - y) ** 2)
''')
    out = tmp_path / "loss_grad.py"
    assert cli.main(["emit", str(model), "-o", str(out)]) == 0
    source = out.read_text()
    assert "serves the dtypes and trailing shapes" in source and ruff(source).returncode == 0
    module = load(source)
    rng = np.random.default_rng(5)
    w = rng.normal(size=3).astype(np.float32)
    for rows in (1, 31, 128):
        x, y = rng.normal(size=(rows, 3)).astype(np.float32), rng.normal(size=rows)
        y = y.astype(np.float32)
        value, g = module["loss_value_and_grad"](w, x, y)
        assert g.dtype == np.float32 and value.dtype == np.float32
        np.testing.assert_allclose(g, 2 * x.T @ (x @ w - y) / rows, rtol=1e-4, atol=1e-5)
    with pytest.raises(module["SignatureError"], match="x has dtype float64"):
        module["loss_value_and_grad"](w, x.astype(np.float64), y)


def test_other_transformations_are_refused():
    with pytest.raises(ad.ArgumentError, match=r"test_standalone.py:\d+: .*not a VmapFunction"):
        ad.standalone_source(ad.vmap(np.sin), np.ones(3))


def test_a_small_example_and_parameters_named_like_the_modules_names():
    def loss(run, np_, error):  # `run` and `error` are names the entry uses
        return np.mean((error @ run - np_) ** 2)
    run, y, x = np.array([0.5, -1.0, 2.0]), np.array([1.0, 2.0]), np.arange(6.0).reshape(2, 3)
    module = load(ad.standalone_source(loss, run, y, x))  # 2 rows: found on 16 repeated
    assert "Serves 1 and 2 or more rows" in " ".join(module["loss_value_and_grad"].__doc__.split())
    for rows in (1, 2, 3, 50):
        args = run, np.resize(y, rows), np.resize(x, (rows, 3))
        assert_same(module["value_and_grad"](*args), ad.value_and_grad(loss)(*args), 1e-12)
    assert_same(module["value_and_grad"](run=run, np_=y, error=x),
                ad.value_and_grad(loss)(run, y, x), 1e-12)


def test_a_two_row_example_whose_rows_cannot_be_repeated_serves_its_shapes():
    def loss(w, x):  # w has as many entries as x has rows: both batch leaves (in memory too)
        return np.sum(np.tanh(x @ w))
    w, x = np.array([0.5, -1.0]), np.array([[1.0, 3.0], [2.0, 1.0]])
    module = load(ad.standalone_source(loss, w, x))  # x @ w fails on 16 rows of both
    assert_same(module["value_and_grad"](w, x), ad.value_and_grad(loss)(w, x), 1e-12)
    with pytest.raises(module["SignatureError"], match=r"w has shape \(1,\)"):
        module["value_and_grad"](w[:1], x[:1, :1])
