"""vmap: every batching rule against a Python loop of the unbatched function, in_axes and
out_axes, errors, and composition with grad, jvp, vjp, jacobian and vmap itself."""

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from tables import rng_for, run_ruff

import autodiffgen as ad
from autodiffgen.rules import PRIMITIVES
from autodiffgen.tracer import UFUNCS

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
    # elementwise with parameters, and their spellings
    Row("where", lambda c, x, y: np.where(c > 0.5, x, y), ((B, 4), (B, 3, 4), (4,)),
        covers=("where", "greater"), in_axes=(0, 0, None)),
    Row("clip", lambda x, lo: np.clip(x, lo, 0.6), ((B, 3, 4), (4,)), in_axes=(0, None),
        covers=("clip",)),
    Row("polygamma", lambda x: scipy_special().polygamma(1, x), ((B, 4),),
        covers=("polygamma",)),
    Row("round", lambda x: np.round(x * 10, 1), ((B, 4),), covers=("round",)),
    Row("sinc", np.sinc, ((B, 4),), covers=("sinc",)),
    Row("nan_to_num", lambda x: np.nan_to_num(np.log(x - 0.5) * 1e308 * 10), ((B, 4),),
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
    *[Row(f"{name}_axis{axis}_{keep}", (lambda fn, axis, keep: lambda x: fn(
        x, axis=axis, keepdims=keep))(getattr(np, name), axis, keep), ((B, 3, 4),),
          covers=(name,)) for name in ("sum", "mean", "max", "min", "prod")
      for axis in (None, 0, -1, (0, 1)) for keep in (False, True)],
    Row("count_nonzero", lambda x: np.count_nonzero(x > 0.5, axis=1), ((B, 3, 4),),
        covers=("count_nonzero",)),
    Row("count_nonzero_all", lambda x: np.count_nonzero(x > 0.5), ((B, 3, 4),),
        covers=("count_nonzero",)),
    *[Row(f"{name}_{axis}", (lambda fn, axis: lambda x: fn(x, axis=axis))(
        getattr(np, name), axis), ((B, 3, 4),), covers=(name,))
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
    Row("getitem_batched_labels", lambda lp, y: lp[np.arange(2), y], ((B, 2, 4), ints(4, B, 2)),
        covers=("getitem",)),
    Row("scatter_add", ad.grad(lambda x, i: np.sum(x[i] ** 2)), ((B, 5), ints(5, B, 3)),
        covers=("scatter_add",)),
    Row("scatter_add_shared_index", ad.grad(lambda x, i: np.sum(x[:, i] ** 2)),
        ((B, 2, 5), ints(5, 3)), in_axes=(0, None), covers=("scatter_add",)),
    Row("scatter_add_shared_x", ad.grad(lambda x, i: np.sum(np.sin(x[i]))), ((5, 2), ints(5, B)),
        in_axes=(None, 0), covers=("scatter_add",)),
    Row("setitem", lambda x, v: _written(x, v), ((B, 3, 4), (B, 4)), covers=("setitem",)),
    Row("setitem_index", lambda x, i: _written_at(x, i), ((B, 5), ints(5, B)),
        covers=("setitem",)),
]


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


def test_every_batching_rule_has_a_row():
    covered = {p for r in ROWS for p in r.covers}
    batched = {n for n, p in PRIMITIVES.items() if p.batch is not None}
    assert batched - covered == set()


def test_generated_code_passes_ruff(tmp_path):
    for name in ("matmul_1_2_(0, None)", "getitem_batched_labels", "setitem_index", "sum_axis0_True"):
        row = TABLE[name]
        (tmp_path / f"{len(list(tmp_path.iterdir()))}.py").write_text(
            ad.vmap(row.f, in_axes=row.in_axes).source(*row.make_args()))
    report = run_ruff(tmp_path)
    assert not report, report
