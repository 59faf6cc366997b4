"""vmap: every batching rule against a Python loop of the unbatched function, in_axes and
out_axes, errors, and composition with grad, jvp, vjp, jacobian and vmap itself."""

import importlib.util
import sys
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

import numpy as np
import pytest
from tables import rng_for, run_ruff

import autodiffgen as ad
from autodiffgen import rules
from autodiffgen.rules import PRIMITIVES
from autodiffgen.rules.batching import BATCH_RULES
from autodiffgen.testing import check_grads
from autodiffgen.trace.dispatch import UFUNCS

B = 3  # the batch size of the table's rows


@dataclass
class Row:
    name: str
    f: object
    shapes: tuple  # per argument: the batched shape (batch on its in_axes), or a maker
    in_axes: object = 0
    covers: tuple = ()  # the primitives the row exercises (each must be batched)
    dtype: object = np.float64
    out_axes: object = 0

    def make_args(self):
        rng = rng_for(self.name)
        return tuple(s(rng) if callable(s) else (rng.uniform(0.1, 0.9, s).astype(self.dtype)
                                                  if s is not None else None)
                     for s in self.shapes)


def ints(high, *shape):
    return lambda rng: rng.integers(0, high, shape)


def bools(*shape):
    return lambda rng: rng.random(shape) > 0.5


def between(lo, hi, *shape):
    return lambda rng: rng.uniform(lo, hi, shape)


def cplx(*shape):
    return lambda rng: rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


def spd(n, batch=B):
    def make(rng):
        a = rng.standard_normal((batch, n, n))
        return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)
    return make


def _ufunc_rows():
    """A row per ufunc with a primitive: SciPy's too, loaded first where SciPy is there, so
    that the rows do not depend on whether an earlier test loaded them (the check that
    every batching rule has a row would otherwise miss or fail on them)."""
    if importlib.util.find_spec("scipy") is not None:
        rules.load_scipy()
    rows = []
    for ufunc, prim in sorted(UFUNCS.items(), key=lambda kv: kv[1].name):
        name = prim.name
        if name == "matmul" or prim.op is None:
            continue
        if name.startswith(("bitwise", "invert", "floor_divide", "remainder", "fmod")) \
                and name in ("bitwise_and", "bitwise_or", "bitwise_xor", "invert"):
            make = [ints(5, B, 3, 4), ints(5, 4)]
        elif name.startswith("logical"):
            make = [bools(B, 3, 4), bools(4)]
        elif name in ("arccosh",):
            make = [between(1.1, 2.0, B, 3, 4)]
        elif name in ("yn",):
            make = [ints(3, B, 4), between(0.5, 2.0, 3, 4)]
        else:
            make = [(B, 3, 4), (4,), (3, 1)][:ufunc.nin]
        make = make[:ufunc.nin]
        rows.append(Row(f"ufunc_{name}", ufunc, tuple(make),
                        in_axes=(0,) + (None,) * (ufunc.nin - 1), covers=(name,)))
        if ufunc.nin == 2 and not name.startswith(("logical", "bitwise", "yn")):
            # both batched, one of lower rank: brought to the result's rank
            rows.append(Row(f"ufunc_{name}_both", ufunc, ((B, 4), (3, B, 1, 4)),
                            in_axes=(0, 1), covers=(name,)))
    return rows


def _std(x):
    return np.std(x, axis=-1)


ROWS = _ufunc_rows() + [
    # one example a number (0-d)
    Row("scalar_times_shared", lambda x, y: x * y + np.exp(x), ((B,), (3, 4)),
        in_axes=(0, None), covers=("multiply", "exp")),
    Row("scalar_reductions", lambda x: np.sum(x) + np.max(x) + np.cumsum(x) + np.reshape(x, (1,)),
        ((B,),), covers=("sum", "max", "cumsum", "reshape")),
    Row("scalar_stack", lambda x, y: np.stack([x, y]) @ np.stack([y, x]), ((B,), (B,)),
        covers=("stack", "matmul")),
    # elementwise with parameters, and their spellings
    Row("where", lambda c, x, y: np.where(c > 0.5, x, y), ((B, 4), (B, 3, 4), (4,)),
        covers=("where", "greater"), in_axes=(0, 0, None)),
    Row("clip", lambda x, lo: np.clip(x, lo, 0.6), ((B, 3, 4), (4,)), in_axes=(0, None),
        covers=("clip",)),
    Row("polygamma", lambda x: scipy_special().polygamma(1, x), ((B, 4),),
        covers=("polygamma",)),
    Row("round", lambda x: np.round(x * 10, 1), ((B, 4),), covers=("round",)),
    Row("sinc", np.sinc, ((B, 4),), covers=("sinc",)),
    Row("nan_to_num", lambda x: np.nan_to_num(np.where(x > 0.5, np.inf, -x)), ((B, 4),),
        covers=("nan_to_num",)),
    Row("astype_float32", lambda x: x.astype(np.float32), ((B, 4),), covers=("astype",)),
    Row("copy", lambda x: np.copy(x) * 2, ((B, 4),), covers=("copy",)),
    Row("std", _std, ((B, 3, 4),), covers=("std_root",)),
    Row("stop_gradient", lambda x: ad.stop_gradient(x) * x, ((B, 4),),
        covers=("stop_gradient",)),
    Row("complex_parts", lambda z: np.real(z) * np.imag(z) + np.angle(np.conj(z)),
        (cplx(B, 4),), covers=("real", "imag", "conj", "angle")),
    Row("abs_sign", lambda x: np.abs(x - 0.5) * np.sign(x - 0.5) + np.fabs(x),
        ((B, 4),), covers=("absolute", "sign", "fabs")),
    Row("heaviside", lambda x: np.heaviside(x - 0.5, 0.5), ((B, 4),), covers=("heaviside",)),
    Row("buffers", lambda x: np.zeros_like(x) + np.ones_like(x) + np.full_like(x, 2.0),
        ((B, 3),), covers=("zeros_like", "ones_like", "full_like")),
    Row("full_like_traced", lambda a, v: np.full_like(a, v), ((3, 2), (B,)),
        in_axes=(None, 0), covers=("full_like",)),
    # reductions
    *[Row(f"{name}_axis{axis}_{keep}", partial(getattr(np, name), axis=axis, keepdims=keep),
          ((B, 3, 4),), covers=(name,)) for name in ("sum", "mean", "max", "min", "prod")
      for axis in (None, 0, -1, (0, 1)) for keep in (False, True)],
    Row("count_nonzero", lambda x: np.count_nonzero(x > 0.5, axis=1), ((B, 3, 4),),
        covers=("count_nonzero",)),
    Row("count_nonzero_all", lambda x: np.count_nonzero(x > 0.5), ((B, 3, 4),),
        covers=("count_nonzero",)),
    *[Row(f"{name}_{axis}", partial(getattr(np, name), axis=axis), ((B, 3, 4),),
          covers=(name,))
      for name in ("argmax", "argmin") for axis in (None, 1, -2)],
    Row("cumsum", lambda x: np.cumsum(x, axis=-1) + np.cumsum(x).reshape(3, 4), ((B, 3, 4),),
        covers=("cumsum",)),
    Row("cumprod", lambda x: np.cumprod(x, axis=0), ((B, 3, 4),), covers=("cumprod",)),
    Row("argsort", lambda x: np.argsort(x, axis=0) + np.argsort(x), ((B, 3, 4),),
        covers=("argsort",)),
    Row("argpartition", lambda x: np.argpartition(x, 1), ((B, 3, 4),),
        covers=("argpartition",)),
    Row("repeat", lambda x: np.repeat(x, 2, axis=1)[:, :4] + np.repeat(x, 2)[:4],
        ((B, 3, 4),), covers=("repeat",)),
    Row("fft", lambda x: np.abs(np.fft.fft(x)) + np.abs(np.fft.ifft2(x))
        + np.fft.irfft(np.fft.rfft(x), 4), ((B, 3, 4),),
        covers=("fftn", "ifftn", "rfftn", "irfftn")),
    # shapes
    Row("concatenate", lambda x, y: np.concatenate([x, y, x], axis=-1), ((B, 3, 4), (3, 2)),
        in_axes=(0, None), covers=("concatenate",)),
    Row("stack", lambda x, y: np.stack([x, y], axis=1), ((B, 3, 4), (3, 4)),
        in_axes=(0, None), covers=("stack",)),
    Row("reshape", lambda x: np.reshape(x, (2, -1)).T, ((B, 3, 4),),
        covers=("reshape", "transpose")),
    Row("transpose_axes", lambda x: np.transpose(x, (2, 0, 1)), ((B, 2, 3, 4),),
        covers=("transpose",)),
    Row("broadcast_to", lambda x: np.broadcast_to(x, (2, 3, 4)), ((B, 4),),
        covers=("broadcast_to",)),
    Row("squeeze", lambda x: np.squeeze(x) + np.squeeze(x, axis=-1)[0], ((B, 1, 3, 1),),
        covers=("squeeze",)),
    Row("expand_dims", lambda x: np.expand_dims(x, (0, -1)), ((B, 3),),
        covers=("expand_dims",)),
    Row("tile", lambda x: np.tile(x, (2, 1, 2)), ((B, 3, 4),), covers=("tile",)),
    Row("pad", lambda x: np.pad(x, ((1, 0), (0, 2))), ((B, 3, 4),), covers=("pad",)),
    Row("triangles", lambda x: np.triu(x, 1) + np.tril(x), ((B, 4, 4),),
        covers=("triu", "tril")),
    # linear algebra
    Row("inv_det", lambda a: np.linalg.inv(a) * np.linalg.det(a), (spd(3),),
        covers=("inv", "det")),
    Row("slogdet", lambda a: np.linalg.slogdet(a)[0] * np.linalg.slogdet(a)[1], (spd(3),),
        covers=("slogdet_sign", "logabsdet")),
    Row("solve_vector", lambda a, b: np.linalg.solve(a, b), (spd(3), (B, 3)),
        covers=("solve",)),
    Row("solve_shared_a", lambda a, b: np.linalg.solve(a, b), (spd(3, 1), (B, 3, 2)),
        in_axes=(None, 0), covers=("solve",)),
    Row("solve_shared_b", lambda a, b: np.linalg.solve(a, b), (spd(3), (3,)),
        in_axes=(0, None), covers=("solve",)),
    Row("eigh", lambda a: np.linalg.eigh(a)[0] + np.abs(np.linalg.eigh(a)[1]).sum(0),
        (spd(3),), covers=("eigh_values", "eigh_vectors")),
    Row("cholesky_pinv", lambda a: np.linalg.cholesky(a) + np.linalg.pinv(a), (spd(3),),
        covers=("cholesky", "pinv")),
    Row("svd", lambda a: np.linalg.svd(a, compute_uv=False).sum()
        + np.abs(np.linalg.svd(a, full_matrices=False)[0]).sum()
        + np.abs(np.linalg.svd(a, full_matrices=False)[2]).sum(), ((B, 4, 3),),
        covers=("svd_values", "svd_u", "svd_vh")),
    # products: every pairing of ranks, batched on either side or both
    *[Row(f"matmul_{ra}_{rb}_{axes}", lambda a, b: a @ b,
          (((B,) if axes[0] == 0 else ()) + ((2, 3, 4) if ra == 3 else (3, 4)[2 - ra:]),
           ((B,) if axes[1] == 0 else ()) + {1: (4,), 2: (4, 5), 3: (2, 4, 5)}[rb]),
          in_axes=axes, covers=("matmul",))
      for ra in (1, 2, 3) for rb in (1, 2, 3) for axes in ((0, None), (None, 0), (0, 0))],
    Row("einsum", lambda a, b: np.einsum("ij,jk->ik", a, b), ((B, 3, 4), (4, 2)),
        in_axes=(0, None), covers=("einsum",)),
    Row("einsum_both", lambda a, b: np.einsum("ij,ij->i", a, b), ((B, 3, 4), (3, 4, B)),
        in_axes=(0, -1), covers=("einsum",)),
    Row("dot_outer", lambda a, b: np.dot(a, b) + np.outer(a, b).sum(), ((B, 4), (4,)),
        in_axes=(0, None), covers=("matmul",)),
    # indexing
    Row("getitem_basic", lambda x: x[1:, 0] + x[..., -1, None][0], ((B, 3, 4),),
        covers=("getitem",)),
    Row("getitem_shared_array", lambda x, i: x[:, i], ((B, 3, 4), ints(4, 5)),
        in_axes=(0, None), covers=("getitem",)),
    Row("getitem_apart", lambda x, i: x[i, :, i], ((B, 3, 4, 3), ints(3, 2)),
        in_axes=(0, None), covers=("getitem",)),
    Row("getitem_mask", lambda x, m: x[m], ((B, 3, 4), bools(3, 4)), in_axes=(0, None),
        covers=("getitem",)),
    Row("getitem_batched_index", lambda x, i: x[i], ((B, 5, 2), ints(5, B, 4)),
        covers=("getitem",)),
    Row("getitem_batched_index_shared_x", lambda x, i: x[:, i], ((3, 5), ints(5, B)),
        in_axes=(None, 0), covers=("getitem",)),
    Row("getitem_batched_apart", lambda x, i: x[i, :, i], ((B, 3, 4, 3), ints(3, B, 2)),
        covers=("getitem",)),
    Row("getitem_batched_middle", lambda x, i: x[None, :, i, 1:], ((B, 2, 5, 3), ints(5, B, 4)),
        covers=("getitem",)),
    Row("scatter_add_middle", ad.grad(lambda x, i: np.sum(np.sin(x[:, i, 1:]))),
        ((B, 2, 5, 3), ints(5, B, 4)), covers=("scatter_add",)),
    Row("getitem_batched_labels", lambda lp, y: lp[np.arange(2), y], ((B, 2, 4), ints(4, B, 2)),
        covers=("getitem",)),
    Row("scatter_add", ad.grad(lambda x, i: np.sum(x[i] ** 2)), ((B, 5), ints(5, B, 3)),
        covers=("scatter_add",)),
    Row("scatter_add_shared_index", ad.grad(lambda x, i: np.sum(x[:, i] ** 2)),
        ((B, 2, 5), ints(5, 3)), in_axes=(0, None), covers=("scatter_add",)),
    Row("scatter_add_shared_x", ad.grad(lambda x, i: np.sum(np.sin(x[i]))), ((5, 2), ints(5, B)),
        in_axes=(None, 0), covers=("scatter_add",)),
    Row("add_at", ad.grad(lambda x, i: np.sum(np.sin(x)) + np.sum(x[i] ** 2)),
        ((B, 5), ints(5, B, 3)), covers=("add_at",)),
    Row("add_at_shared_index", ad.grad(lambda x, i: np.sum(np.sin(x)) - np.sum(x[:, i] ** 2)),
        ((B, 2, 5), ints(5, 3)), in_axes=(0, None), covers=("add_at",)),
    Row("add_at_shared_x", ad.grad(lambda x, i: np.sum(np.sin(x)) + np.sum(np.sin(x[i]))),
        ((5, 2), ints(5, B)), in_axes=(None, 0), covers=("add_at",)),
    Row("setitem", lambda x, v: _written(x, v), ((B, 3, 4), (B, 4)), covers=("setitem",)),
    Row("setitem_index", lambda x, i: _written_at(x, i), ((B, 5), ints(5, B)),
        covers=("setitem",)),
    Row("recompute_from", ad.grad(lambda w, x: np.sum(_cell(_cell(x, w), w) ** 2)),
        ((3, 3), (B, 3)), in_axes=(None, 0), covers=("recompute_from",)),
]


@ad.checkpoint
def _cell(h, w):
    """A checkpointed step: its backward starts from recompute_from."""
    return np.tanh(np.tanh(h @ w) @ w)


def scipy_special():
    return pytest.importorskip("scipy.special")


def _written(x, v):
    out = np.zeros_like(x)
    out[1] = v
    out[:, 0] = 1.0
    return out


def _written_at(x, i):
    out = np.copy(x)
    out[i] = 0.0
    return out


TABLE = {r.name: r for r in ROWS}
assert len(TABLE) == len(ROWS)


def loop(f, args, in_axes, out_axes=0):
    """The reference: f on each example, stacked."""
    axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
    size = next(np.shape(a)[ax] for a, ax in zip(args, axes) if ax is not None)
    outs = [f(*(a if ax is None else np.take(a, i, axis=ax) for a, ax in zip(args, axes)))
            for i in range(size)]
    return np.stack([np.asarray(o) for o in outs], axis=out_axes)


@pytest.mark.parametrize("name", list(TABLE))
def test_against_a_loop(name):
    row = TABLE[name]
    args = row.make_args()
    want = loop(row.f, args, row.in_axes)
    with np.errstate(all="ignore"):
        got = ad.vmap(row.f, in_axes=row.in_axes)(*args)
    assert got.shape == want.shape
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


FLOAT32 = [name for name, row in TABLE.items()
           if all(type(s) is tuple for s in row.shapes) and not name.startswith(
               ("ufunc_bitwise", "ufunc_invert", "ufunc_logical", "astype"))]


@pytest.mark.parametrize("name", FLOAT32[::4])
def test_float32_rows(name):
    """float32 arguments: the batched code computes in float32, as one example does."""
    row = replace(TABLE[name], dtype=np.float32)
    args = row.make_args()
    want = loop(row.f, args, row.in_axes)
    with np.errstate(all="ignore"):
        got = ad.vmap(row.f, in_axes=row.in_axes)(*args)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_every_batching_rule_has_a_row():
    covered = {p for r in ROWS for p in r.covers}
    batched = {n for n, p in PRIMITIVES.items() if p in BATCH_RULES}
    assert batched - covered == set()


def test_generated_code_passes_ruff(tmp_path):
    for name in ("matmul_1_2_(0, None)", "getitem_batched_labels", "setitem_index", "sum_axis0_True"):
        row = TABLE[name]
        (tmp_path / f"{len(list(tmp_path.iterdir()))}.py").write_text(
            ad.vmap(row.f, in_axes=row.in_axes).source(*row.make_args()))
    report = run_ruff(tmp_path)
    assert not report, report


# ---- in_axes, out_axes, dtypes ------------------------------------------------------------
def _affine(w, x, b):
    return np.tanh(x @ w + b)


@pytest.mark.parametrize("in_axes", [(None, 0, None), (None, 1, None), (None, -1, None),
                                     (None, 0, 0), (0, None, None)])
def test_in_axes(in_axes):
    rng = np.random.default_rng(0)
    shapes = {0: {None: (3, 2), 0: (4, 3, 2)}, 1: {None: (3,), 0: (4, 3), 1: (3, 4),
                                                   -1: (3, 4)},
              2: {None: (2,), 0: (4, 2)}}
    args = [rng.standard_normal(shapes[i][ax]) for i, ax in enumerate(in_axes)]
    want = loop(_affine, args, in_axes)
    np.testing.assert_allclose(ad.vmap(_affine, in_axes=in_axes)(*args), want, rtol=1e-12)


def test_pytree_in_axes_and_out_axes():
    def f(p, batch):
        h = batch["x"] @ p["W"] + p["b"]
        return {"h": h, "s": np.sum(h * batch["y"]), "c": p["b"] * 2.0}

    rng = np.random.default_rng(1)
    p = {"W": rng.standard_normal((3, 2)), "b": rng.standard_normal(2)}
    batch = {"x": rng.standard_normal((5, 3)), "y": rng.standard_normal((2, 5))}
    out = ad.vmap(f, in_axes=(None, {"x": 0, "y": 1}), out_axes={"h": 1, "s": 0, "c": None})(
        p, batch)
    for i in range(5):
        one = f(p, {"x": batch["x"][i], "y": batch["y"][:, i]})
        np.testing.assert_allclose(out["h"][:, i], one["h"], rtol=1e-12)
        np.testing.assert_allclose(out["s"][i], one["s"], rtol=1e-12)
    np.testing.assert_allclose(out["c"], p["b"] * 2.0)
    assert out["h"].shape == (2, 5) and out["s"].shape == (5,) and out["c"].shape == (2,)


def test_an_output_that_does_not_depend_on_the_batch_is_repeated():
    out = ad.vmap(lambda x, w: (x * 2.0, w + 1.0, 3.0), in_axes=(0, None))(
        np.ones((4, 2)), np.arange(3.0))
    assert out[1].shape == (4, 3) and out[2].shape == (4,)
    np.testing.assert_array_equal(out[1], np.tile(np.arange(3.0) + 1, (4, 1)))
    np.testing.assert_array_equal(out[2], np.full(4, 3.0))
    out[1][0, 0] = 99.0  # owns its memory
    assert ad.vmap(lambda x, w: w + 1.0, in_axes=(0, None))(np.ones((4, 2)), np.zeros(3))[
        0, 0] == 1.0


def test_float32_stays_float32_and_0d_examples():
    x = np.linspace(0.1, 0.9, 6, dtype=np.float32)
    out = ad.vmap(lambda t: np.sin(t) * 2.0 + t ** 2)(x)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, np.sin(x) * 2.0 + x ** 2, rtol=1e-6)
    g = ad.vmap(ad.grad(lambda t: np.sin(t) * t))(x)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, np.cos(x) * x + np.sin(x), rtol=1e-5)


def test_cached_and_new_data():
    vf = ad.vmap(lambda x, w: np.sum(np.exp(x * w)), in_axes=(0, None))
    rng = np.random.default_rng(2)
    for _ in range(3):
        x, w = rng.standard_normal((5, 3)), rng.standard_normal(3)
        np.testing.assert_allclose(vf(x, w), np.exp(x * w).sum(axis=1), rtol=1e-12)
    assert vf.cache_info().misses == 1 and vf.cache_info().hits == 2
    vf(rng.standard_normal((7, 3)), rng.standard_normal(3))  # another batch size
    assert vf.cache_info().misses == 2
    assert "for " not in vf.source(x, w)  # no loop over the examples


def test_python_numbers_and_closures_stay_inputs():
    scale = np.array([1.0, 2.0])

    def f(x, k):
        return x * scale * k

    vf = ad.vmap(f, in_axes=(0, None))
    x = np.ones((3, 2))
    np.testing.assert_array_equal(vf(x, 2.0), np.tile([2.0, 4.0], (3, 1)))
    np.testing.assert_array_equal(vf(x, 3.0), np.tile([3.0, 6.0], (3, 1)))
    scale[:] = [5.0, 7.0]
    np.testing.assert_array_equal(vf(x, 1.0), np.tile([5.0, 7.0], (3, 1)))
    assert vf.cache_info().misses == 1


# ---- errors --------------------------------------------------------------------------------
def test_sizes_must_agree():
    with pytest.raises(ad.ArgumentError, match="different sizes"):
        ad.vmap(lambda a, b: a + b)(np.ones(3), np.ones(4))


def test_something_must_be_mapped_and_mappable():
    with pytest.raises(ad.ArgumentError, match="maps no argument"):
        ad.vmap(lambda a: a, in_axes=None)(np.ones(3))
    with pytest.raises(ad.ArgumentError, match="only arrays"):
        ad.vmap(lambda a, b: a * b)(np.ones(3), 2.0)
    with pytest.raises(ad.ArgumentError, match="only 1 dimension"):
        ad.vmap(lambda a: a, in_axes=1)(np.ones(3))
    with pytest.raises(ad.ArgumentError, match="one entry per positional argument"):
        ad.vmap(lambda a, b: a * b, in_axes=(0,))(np.ones(3), np.ones(3))
    with pytest.raises(ad.ArgumentError, match="not a prefix"):
        ad.vmap(lambda p: p["a"], in_axes=({"b": 0},))({"a": np.ones(3)})


def test_python_control_flow_on_a_batched_value_names_the_line():
    def f(x):
        if x.sum() > 0:  # the line the error names
            return x
        return -x

    with pytest.raises(ad.TracingError, match=r"test_vmap.py:\d+: vmap: the function reads"):
        ad.vmap(f)(np.ones((3, 2)))


def test_a_primitive_without_a_batching_rule_names_itself_and_the_line():
    softplus = ad.primitive(lambda x: np.logaddexp(0.0, x))
    with pytest.raises(ad.UnsupportedOperationError, match=r"test_vmap.py:\d+: vmap: <lambda> "
                       "has no batching rule"):
        ad.vmap(lambda x: softplus(x) * 2)(np.ones((3, 2)))
    with pytest.raises(ad.UnsupportedOperationError, match="differs between examples"):
        ad.vmap(lambda x: x[x > 0.5])(np.ones((3, 2)))
    with pytest.raises(ad.UnsupportedOperationError, match="differs between examples"):
        ad.vmap(lambda x: np.nonzero(x > 0)[0])(np.ones((3, 2)))


def test_out_axes_none_for_a_batched_output():
    with pytest.raises(ad.OutputError, match="out_axes is None"):
        ad.vmap(lambda x: x * 2, out_axes=None)(np.ones((3, 2)))


# ---- composition ----------------------------------------------------------------------------
def logistic_loss(w, x, y):
    z = x @ w
    return np.logaddexp(0.0, z) - y * z


def test_per_example_gradients_of_logistic_regression():
    rng = np.random.default_rng(3)
    w, X = rng.standard_normal(5), rng.standard_normal((256, 5))
    y = (rng.random(256) > 0.5).astype(float)
    per_example = ad.vmap(ad.grad(logistic_loss), in_axes=(None, 0, 0))
    want = np.stack([ad.grad(logistic_loss)(w, x, t) for x, t in zip(X, y)])
    np.testing.assert_allclose(per_example(w, X, y), want, rtol=1e-12)
    p = 1.0 / (1.0 + np.exp(-(X @ w)))
    np.testing.assert_allclose(per_example(w, X, y), (p - y)[:, None] * X, rtol=1e-10)
    assert "for " not in per_example.source(w, X, y)


def test_per_example_gradients_of_the_mlp():
    sys.path.insert(0, str(Path(__file__).parents[2] / "examples"))
    import mlp

    rng = np.random.default_rng(4)
    params = mlp.init_params(rng)
    X, Y = rng.standard_normal((16, 1, 20)), rng.integers(0, 4, (16, 1))
    grad = ad.grad(mlp.loss.fun)
    got = ad.vmap(grad, in_axes=(None, 0, 0))(params, X, Y)
    for i in range(16):
        one = grad(params, X[i], Y[i])
        for k in params:
            np.testing.assert_allclose(got[k][i], one[k], rtol=1e-10, atol=1e-14)


def test_grad_of_a_function_that_uses_vmap():
    def total(w, X):
        return np.sum(ad.vmap(lambda x, w: np.tanh(x @ w) ** 2, in_axes=(0, None))(X, w))

    rng = np.random.default_rng(5)
    w, X = rng.standard_normal(3), rng.standard_normal((4, 3))
    want = ad.grad(lambda w, X: np.sum(np.tanh(X @ w) ** 2))(w, X)
    np.testing.assert_allclose(ad.grad(total)(w, X), want, rtol=1e-12)
    check_grads(total, w, X)  # the tape as the outer engine, and finite differences
    H = ad.hessian(total)(w, X)
    np.testing.assert_allclose(H, ad.hessian(lambda w, X: np.sum(np.tanh(X @ w) ** 2))(w, X),
                               rtol=1e-10)
    _, vjp_fn = ad.vjp(lambda w: ad.vmap(lambda x, w: np.sin(x * w), in_axes=(0, None))(X, w),
                       w)
    np.testing.assert_allclose(vjp_fn(np.ones((4, 3)))[0], np.sum(np.cos(X * w) * X, axis=0),
                               rtol=1e-12)


def test_vmap_of_jvp_and_jvp_of_vmap():
    f = np.sin
    x, t = np.linspace(0.1, 1.0, 5), np.linspace(1.0, 2.0, 5)
    out, tangent = ad.vmap(lambda a, b: ad.jvp(lambda z: f(z) * z, (a,), (b,)))(x, t)
    np.testing.assert_allclose(out, np.sin(x) * x)
    np.testing.assert_allclose(tangent, (np.cos(x) * x + np.sin(x)) * t, rtol=1e-12)
    out, tangent = ad.jvp(ad.vmap(lambda z: f(z) * z), (x,), (t,))
    np.testing.assert_allclose(tangent, (np.cos(x) * x + np.sin(x)) * t, rtol=1e-12)


def test_jacobian_of_vmap_and_vmap_of_vmap():
    x = np.linspace(0.1, 1.0, 4)
    J = ad.jacobian(ad.vmap(lambda z: np.exp(z) * z))(x)
    np.testing.assert_allclose(J, np.diag(np.exp(x) * (x + 1)), rtol=1e-12)
    A = np.arange(12.0).reshape(3, 4) / 10
    inner = ad.vmap(lambda a, b: np.sin(a) * b, in_axes=(0, None))
    got = ad.vmap(inner, in_axes=(1, 0))(A, np.arange(4.0))
    np.testing.assert_allclose(got, np.sin(A.T) * np.arange(4.0)[:, None], rtol=1e-12)
    hess = ad.vmap(ad.hessian(lambda z: np.sum(z ** 3)))(A)
    np.testing.assert_allclose(hess, np.stack([np.diag(6 * a) for a in A]), rtol=1e-12)


# ---- derivatives of the batched code ------------------------------------------------------
DIFFERENTIATED = ["ufunc_multiply_both", "ufunc_tanh", "where", "std", "sum_axis-1_True",
                  "max_axis(0, 1)_False", "cumprod", "fft", "concatenate", "transpose_axes",
                  "squeeze", "tile", "pad", "inv_det", "solve_vector", "solve_shared_a",
                  "matmul_1_1_(0, 0)", "matmul_3_1_(None, 0)", "einsum_both",
                  "getitem_batched_labels", "getitem_apart", "setitem"]


@pytest.mark.parametrize("name", DIFFERENTIATED)
def test_derivatives_through_vmap(name):
    """grad and jvp (generated and tape, against finite differences) and a second
    derivative of a function that vmaps the row's function."""
    row = TABLE[name]
    args = row.make_args()
    first = 0 if np.issubdtype(np.result_type(args[0]), np.floating) else 1
    mapped = ad.vmap(row.f, in_axes=row.in_axes)

    def total(a, *rest):
        both = (a, *rest) if first == 0 else (rest[0], a, *rest[1:])
        return np.sum(np.sin(mapped(*both)))

    order = (args[first], *args[:first], *args[first + 1:])
    check_grads(total, *order, rtol=1e-5)
    v = np.random.default_rng(0).standard_normal(np.shape(order[0]))
    hv = ad.hvp(total, order, (v, *(None,) * (len(order) - 1)))
    eps = 1e-5
    g = ad.grad(total)
    fd = (g(order[0] + eps * v, *order[1:]) - g(order[0] - eps * v, *order[1:])) / (2 * eps)
    np.testing.assert_allclose(hv, fd, rtol=1e-4, atol=1e-6)


def test_the_disk_cache_keeps_each_in_axes_apart(tmp_path):
    from autodiffgen import diskcache

    def f(a, b):
        return a * np.sin(b)

    A = np.arange(9.0).reshape(3, 3)
    diskcache.enable(tmp_path / "cache")
    try:
        for _ in range(2):  # the second time: new objects, code from the disk
            np.testing.assert_allclose(ad.vmap(f, in_axes=(0, None))(A, A[0]), A * np.sin(A[0]))
            np.testing.assert_allclose(ad.vmap(f, in_axes=(1, None))(A, A[0]),
                                       A.T * np.sin(A[0]))
        assert len(list((tmp_path / "cache").glob("*.adg"))) == 2
    finally:
        diskcache.disable()


def test_a_decision_on_a_shared_number_stays_a_guard():
    vf = ad.vmap(lambda x, k: np.sum(x[:k]) * k, in_axes=(0, None))
    X = np.arange(12.0).reshape(3, 4)
    for k in (2, 3, 2):
        np.testing.assert_allclose(vf(X, k), X[:, :k].sum(axis=1) * k)
    assert "GuardFailure" in vf.source(X, 2)


@dataclass
class _Params:
    W: np.ndarray
    b: np.ndarray


def test_per_example_gradients_with_aux_over_a_dataclass():
    """vmap(grad(f, has_aux=True)) with the parameters a dataclass shared by the batch."""
    rng = rng_for("vmap-dataclass")
    p = _Params(rng.standard_normal((3, 2)), rng.standard_normal(2))
    x, y = rng.standard_normal((5, 3)), rng.standard_normal((5, 2))

    def loss(p, x, y):
        z = x @ p.W + p.b
        return np.mean((z - y) ** 2), {"zmax": np.max(z)}
    g, aux = ad.vmap(ad.grad(loss, has_aux=True), in_axes=(None, 0, 0))(p, x, y)
    assert type(g) is _Params
    for i in range(5):
        gi, ai = ad.grad(loss, has_aux=True)(p, x[i], y[i])
        np.testing.assert_allclose(g.W[i], gi.W, rtol=1e-12)
        np.testing.assert_allclose(g.b[i], gi.b, rtol=1e-12)
        np.testing.assert_allclose(aux["zmax"][i], ai["zmax"], rtol=1e-12)
    axes = _Params(None, 0)
    out = ad.vmap(lambda p: p.W @ p.b, in_axes=(axes,))(_Params(p.W, np.stack([p.b] * 4)))
    np.testing.assert_allclose(out, np.stack([p.W @ p.b] * 4), rtol=1e-12)
