"""autodiffgen.dask on Dask's local scheduler: the decomposition check, argument errors,
chunk alignment, the SciPy objective, has_aux, keywords, pytrees, masks and the check that
every chunk is summed once (the cluster's own tests: test_dask_cluster.py)."""

import dataclasses
import inspect

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
pytest.importorskip("distributed")

from dask_models import data, hinge, logreg_mean, params, pick, with_aux

import autodiffgen
import autodiffgen.dask as add


def batch_norm(p, x, y):
    h = x @ p["w"]
    h = (h - h.mean(0)) / (h.std(0) + 1.0)
    return np.mean((h - y) ** 2)


def worst_row(p, x, y):
    r = (x @ p["w"] - y) ** 2
    return np.max(r)


def summed(p, x, y):
    return np.sum((x @ p["w"] - y) ** 2)


def _line_of(fun, text):
    lines, first = inspect.getsourcelines(fun)
    return first + next(i for i, line in enumerate(lines) if text in line)


def _setup(n=30, chunks=10):
    rng = np.random.default_rng(11)
    p, (x, y) = pick(params(np.float64, rng), "w", "b"), data(np.float64, rng, n=n)
    return p, x, y, da.from_array(x, chunks=(chunks, 3)), da.from_array(y, chunks=chunks)


def test_batch_norm_is_refused_naming_the_mean_over_the_batch():
    p, _, _, X, Y = _setup()
    with pytest.raises(add.DecompositionError) as e:
        add.value_and_grad(batch_norm)(p, X, Y)
    text = str(e.value)
    assert text.startswith(f"test_dask_grad.py:{_line_of(batch_norm, 'h.mean(0)')}: ")
    assert "does not decompose over rows as reduce='mean'" in text
    assert "`mean` over the rows here (`h = (h - h.mean(0)) / (h.std(0) + 1.0)`)" in text
    assert "mixes rows" in text


def test_max_over_the_batch_is_refused_naming_it():
    p, _, _, X, Y = _setup()
    line = _line_of(worst_row, "np.max")
    with pytest.raises(add.DecompositionError, match=rf"test_dask_grad.py:{line}: .*`max` over "
                       r"the rows here \(`return np.max\(r\)`\) combines rows other than"):
        add.grad(worst_row)(p, X, Y)


def test_a_sum_called_a_mean_is_refused_with_the_fix():
    p, x, y, X, Y = _setup()
    with pytest.raises(add.DecompositionError, match="as reduce='sum': pass that"):
        add.value_and_grad(summed)(p, X, Y)
    value, g = add.value_and_grad(summed, reduce="sum")(p, X, Y)
    want_value, want = autodiffgen.value_and_grad(summed)(p, x, y)
    np.testing.assert_allclose(value, want_value, rtol=1e-12)
    np.testing.assert_allclose(g["w"], want["w"], rtol=1e-12)


def test_arguments_are_checked():
    p, x, y, X, Y = _setup()
    with pytest.raises(ValueError, match="reduce must be 'mean' or 'sum'"):
        add.value_and_grad(logreg_mean, reduce="max")
    with pytest.raises(ValueError, match="at least one dask array"):
        add.value_and_grad(logreg_mean)(p, x, y)
    with pytest.raises(ValueError, match="argument 1 is a dask array"):
        add.value_and_grad(logreg_mean, argnums=1)(p, X, Y)
    with pytest.raises(ValueError, match="30 and 29 rows"):
        add.value_and_grad(logreg_mean)(p, X, Y[:29])


def test_chunks_across_columns_and_unlike_row_chunks_are_aligned():
    p, x, y, _, _ = _setup(n=31)
    X = da.from_array(x, chunks=(7, 2))  # two chunks across the columns
    Y = da.from_array(y, chunks=12)  # other row chunks than X's
    value, g = add.value_and_grad(logreg_mean)(p, X, Y)
    want_value, want = autodiffgen.value_and_grad(logreg_mean)(p, x, y)
    np.testing.assert_allclose(value, want_value, rtol=1e-12)
    np.testing.assert_allclose(g["w"], want["w"], rtol=1e-12)


def test_scipy_objective_flattens_the_parameters():
    minimize = pytest.importorskip("scipy.optimize").minimize
    p, x, y, X, Y = _setup(n=200, chunks=64)
    fun, x0, unflatten = add.scipy_objective(add.value_and_grad(logreg_mean), p, X, Y)
    value, flat = fun(x0)
    want_value, want = autodiffgen.value_and_grad(logreg_mean)(p, x, y)
    assert type(value) is float and flat.dtype == np.float64 and flat.shape == (4,)
    np.testing.assert_allclose(flat, np.r_[want["w"], want["b"]], rtol=1e-12)
    assert np.isclose(value, want_value, rtol=1e-12)
    got = minimize(fun, x0, jac=True, method="L-BFGS-B")
    ref = minimize(lambda t: _flat(autodiffgen.value_and_grad(logreg_mean)(
        unflatten(t), x, y)), x0, jac=True, method="L-BFGS-B")
    np.testing.assert_allclose(got.x, ref.x, rtol=1e-6, atol=1e-8)
    assert unflatten(got.x).keys() == p.keys()


def _flat(vg):
    value, g = vg
    return float(value), np.r_[g["w"], g["b"]]


def scaled_logreg(p, x, y):
    z = (x @ p["w"]) * p["s"] + p["b"]
    return np.mean(np.logaddexp(0.0, z) - y * z)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_leaves_keep_their_types_and_dtypes(dtype):
    rng = np.random.default_rng(2)
    x, y = data(dtype, rng, n=23)
    p = {"w": rng.normal(size=3).astype(dtype), "s": np.array(0.5, dtype), "b": 0.25}
    X, Y = da.from_array(x, chunks=(9, 3)), da.from_array(y, chunks=9)
    value, g = add.value_and_grad(scaled_logreg)(p, X, Y)
    want_value, want = autodiffgen.value_and_grad(scaled_logreg)(p, x, y)
    tol = 2e-5 if dtype == np.float32 else 1e-12
    assert type(value) is type(want_value)
    np.testing.assert_allclose(value, want_value, rtol=tol)
    for name in p:
        assert type(g[name]) is type(want[name]), name
        assert np.asarray(g[name]).dtype == np.asarray(want[name]).dtype, name
        np.testing.assert_allclose(g[name], want[name], rtol=tol)


def _chunked(x, y, chunks):
    return da.from_array(x, chunks=(chunks, x.shape[1])), da.from_array(y, chunks=chunks)


def _same(got, want, rtol=1e-12):
    """Two pytrees of one structure with the same numbers."""
    leaves = autodiffgen.tree.leaves
    assert autodiffgen.tree.structure_text(got) == autodiffgen.tree.structure_text(want)
    for g, w in zip(leaves(got), leaves(want)):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-14)


def penalized(p, x, y, lam=0.1):
    return logreg_mean(p, x, y) + lam * np.sum(p["w"] ** 2)


def test_keywords_and_defaults_are_bound_as_in_memory():
    p, x, y, X, Y = _setup()
    vg = add.value_and_grad(penalized)
    _same(vg(p, y=Y, x=X), autodiffgen.value_and_grad(penalized)(p, y=y, x=x))
    _same(vg(p, X, Y, lam=0.5), autodiffgen.value_and_grad(penalized)(p, x, y, 0.5))
    with pytest.raises(TypeError, match="penalized.*'y'"):
        vg(p, X)


def test_has_aux_reduces_aux_values_as_the_loss_or_gathers_them_per_chunk():
    p, x, y, X, Y = _setup(n=31)
    want = autodiffgen.value_and_grad(with_aux, has_aux=True)(p, x, y)
    _same(add.value_and_grad(with_aux, has_aux=True)(p, X, Y), want)
    grads, aux = add.grad(with_aux, has_aux=True)(p, X, Y)
    _same((grads, aux), (want[1], want[0][1]))
    (value, per_chunk), grads = add.value_and_grad(with_aux, has_aux=True, aux="chunks")(
        p, X, Y)
    _same((value, grads), (want[0][0], want[1]))
    assert len(per_chunk) == 4  # rows 0-9, 10-19, 20-29, 30
    for k, aux in enumerate(per_chunk):
        rows = slice(10 * k, 10 * k + 10)
        _same(aux, with_aux(p, x[rows], y[rows])[1])


def worst_aux(p, x, y):
    r = (x @ p["w"] - y) ** 2
    return np.mean(r), {"mean": np.mean(r), "worst": np.max(r)}


def test_an_aux_value_that_does_not_add_up_over_chunks_is_refused_naming_it():
    p, _, _, X, Y = _setup()
    line = inspect.getsourcelines(worst_aux)[1]
    with pytest.raises(add.DecompositionError, match=rf"test_dask_grad.py:{line}: the aux value "
                       r"aux\['worst'\] of worst_aux does not combine over rows .*aux='chunks'"):
        add.value_and_grad(worst_aux, has_aux=True)(p, X, Y)
    (_, per_chunk), _ = add.value_and_grad(worst_aux, has_aux=True, aux="chunks")(p, X, Y)
    assert [set(aux) for aux in per_chunk] == [{"mean", "worst"}] * 3


@dataclasses.dataclass
class Linear:
    w: np.ndarray
    b: float


class Pair:
    """A registered pytree: its flatten and unflatten run on the client only."""

    def __init__(self, w, b):
        self.w, self.b = w, b


autodiffgen.register_pytree_node(Pair, lambda q: ((q.w, q.b), "pair"),
                                 lambda aux, children: Pair(*children))


def linear_loss(q, x, y):
    z = x @ q.w + q.b
    return np.mean(np.logaddexp(0.0, z) - y * z)


@pytest.mark.parametrize("make", [Linear, Pair], ids=["dataclass", "registered"])
def test_dataclass_and_registered_pytree_parameters(make):
    p, x, y, X, Y = _setup()
    q = make(p["w"], 0.25)
    vg = add.value_and_grad(linear_loss)
    value, g = vg(q, X, Y)
    want_value, want = autodiffgen.value_and_grad(linear_loss)(q, x, y)
    assert type(g) is make and type(g.b) is type(want.b)
    _same((value, g.w, g.b), (want_value, want.w, want.b))
    vg(make(p["w"] * 2.0, 0.5), X, Y)
    assert vg.traces == 1  # the same structure: the same program


def test_a_masked_loss_serves_nine_chunk_sizes_with_one_trace():
    """The module reads the mask's count at run time and serves every chunk size (the
    compile path used to keep such code to the traced shape: one trace per size, and
    RetraceError past 8)."""
    rng = np.random.default_rng(9)
    sizes = (9, 10, 11, 12, 13, 14, 15, 16, 40)
    p, (x, y) = pick(params(np.float64, rng), "w", "b"), data(np.float64, rng, n=sum(sizes))
    vg = add.value_and_grad(hinge)
    _same(vg(p, *_chunked(x, y, sizes)), autodiffgen.value_and_grad(hinge)(p, x, y))
    assert (vg.traces, vg.retraces) == (1, 0)


def test_every_chunk_must_be_counted_once():
    from autodiffgen.dask.faults import counted_once

    counted_once([(1, 10), (0, 10), (2, 3)], (10, 10, 3))
    with pytest.raises(add.PartialSumError, match=r"chunk 1 \(rows 10 to 19\) missing"):
        counted_once([(0, 10), (2, 3)], (10, 10, 3))
    with pytest.raises(add.PartialSumError, match=r"chunk 2 \(rows 20 to 22\) summed more"):
        counted_once([(0, 10), (1, 10), (2, 3), (2, 3)], (10, 10, 3))
    with pytest.raises(add.PartialSumError, match="chunk 0 .* other row counts"):
        counted_once([(0, 9), (1, 10), (2, 3)], (10, 10, 3))


def test_a_module_the_worker_cannot_import_is_named():
    """What a worker says when the generated code imports what it lacks (SciPy, a module
    of custom primitives): run here on the worker's own function."""
    module_of = add._WORKER["module_of"]
    with pytest.raises(ImportError, match="imports 'not_on_this_worker', which this Dask "
                       "worker cannot import: install it on the workers"):
        module_of("test-missing", "import numpy as np\nimport not_on_this_worker\n")


SCALE = 1.0


@dataclasses.dataclass
class Model:
    w: np.ndarray

    def predict(self, x):
        return SCALE * (x @ self.w)  # a global read in a method of a parameter's class


def model_loss(m, x, y):
    return np.mean((m.predict(x) - y) ** 2)


def test_what_a_parameters_method_reads_is_read_again_at_each_call():
    global SCALE
    p, x, y, X, Y = _setup()
    vg, m = add.value_and_grad(model_loss), Model(p["w"])
    for scale, traces in ((1.0, 1), (3.0, 2)):
        SCALE = scale
        value, g = vg(m, X, Y)
        want_value, want = autodiffgen.value_and_grad(model_loss)(m, x, y)
        _same((value, g.w), (want_value, want.w))
        assert vg.traces == traces  # the module baked SCALE: a new one for the new value
    SCALE = 1.0


def tanh_layer(p, x, y):
    return np.mean((np.tanh(x @ p["W"]) @ p["v"] - y) ** 2)


def test_a_weight_as_long_as_the_sample_is_not_taken_for_data():
    """W has 7 rows, as many as the sample would: the sample takes 8, so the module's
    batch is the data's alone and serves every chunk."""
    rng = np.random.default_rng(4)
    x, y = rng.normal(size=(60, 7)), rng.normal(size=60)
    p = {"W": rng.normal(size=(7, 4)), "v": rng.normal(size=4)}
    vg = add.value_and_grad(tanh_layer)
    _same(vg(p, *_chunked(x, y, 20)), autodiffgen.value_and_grad(tanh_layer)(p, x, y))
    assert (vg.traces, vg.retraces) == (1, 0)
