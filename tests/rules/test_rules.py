"""Every derivative rule against the dynamic tape and central finite differences.

One table, `CASES`: a name, a function written in plain NumPy, a generator for each
argument (a domain on which the function is smooth) and the argnums. Each row is checked
by `check_grads` (generated code vs tape vs finite differences, float64), a subset again
with float32 inputs, and every row's generated source must parse and pass `ruff check`.

Functions end in `_s(z) = sum(sin(z))` rather than a plain sum, so cotangents differ from
element to element: a plain sum seeds ones, which a wrong transpose or broadcast would
permute or sum into the same ones and pass unnoticed.
"""

import numpy as np
import pytest
import tables
from tables import axis_id, const, f64, ints, nonzero, normal, positive, pyfloat, shape_id, uniform
from tables import sum_sin as _s

import autodiffgen
from autodiffgen import tape
from autodiffgen.testing import check_grads


# ---- argument domains beyond the shared ones (tables.py): each is rng -> value ----------
def distinct(*shape):
    """No two values within 0.2 of each other: max, min and maximum have no ties."""
    def make(rng):
        n = int(np.prod(shape))
        grid = (rng.permutation(n) - n / 2) * 0.3
        return (grid + rng.uniform(-0.05, 0.05, n)).reshape(shape)
    return make


def off_bounds(*shape):
    """Values in three bands that stay 0.2 away from the clip bounds -0.5 and 0.5."""
    return lambda rng: rng.choice([-1.0, 0.0, 1.0], shape) + rng.uniform(-0.3, 0.3, shape)


CASES = []


def case(name, f, *args, argnums=0, **check):
    CASES.append(tables.Case(name, f, args, argnums, check))


# ---- elementwise binary ops on broadcasting shape pairs ---------------------------------
_BINARY = [
    ("add", lambda x, y: _s(x + y), normal, normal),
    ("np.add", lambda x, y: _s(np.add(x, y)), normal, normal),
    ("subtract", lambda x, y: _s(x - y), normal, normal),
    ("multiply", lambda x, y: _s(x * y), normal, normal),
    ("divide", lambda x, y: _s(x / y), normal, nonzero),
    ("np.divide", lambda x, y: _s(np.divide(x, y)), normal, nonzero),
    ("power", lambda x, y: _s(x ** y), positive, normal),
    ("np.power", lambda x, y: _s(np.power(x, y)), positive, normal),
    ("maximum", lambda x, y: _s(np.maximum(x, y)), normal, normal),
    ("minimum", lambda x, y: _s(np.minimum(x, y)), normal, normal),
]
_PAIRS = [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((2, 3, 4), (3, 1)),
          ((4,), (3, 4)), ((), (3,)), ((2, 3), ())]
for _op, _f, _dx, _dy in _BINARY:
    for _sx, _sy in _PAIRS:
        case(f"{_op}-{shape_id(_sx)}-{shape_id(_sy)}", _f, _dx(*_sx), _dy(*_sy),
             argnums=(0, 1))
    case(f"{_op}-f64scalar-3", _f, f64(_dx()), _dy(3), argnums=(0, 1))
    case(f"{_op}-3-f64scalar", _f, _dx(3), f64(_dy()), argnums=(0, 1))
    case(f"{_op}-float-2x3", _f, pyfloat(_dx()), _dy(2, 3), argnums=(0, 1))
    case(f"{_op}-2x3-float", _f, _dx(2, 3), pyfloat(_dy()), argnums=(0, 1))
    case(f"{_op}-float-float", _f, pyfloat(_dx()), pyfloat(_dy()), argnums=(0, 1))
    case(f"{_op}-wrt-y-only", _f, _dx(3, 4), _dy(4), argnums=1)

case("add-scalar-0d-array", lambda x: _s(x + np.array(2.0)), normal(3))
case("reflected-subtract", lambda x: _s(2.0 - x), normal(3, 4))
case("reflected-divide", lambda x: _s(1.0 / x), nonzero(3, 4))
case("reflected-power", lambda x: _s(2.0 ** x), normal(3, 4))
case("multiply-same-operand", lambda x: _s(x * x), normal(3, 4))
case("negative", lambda x: _s(-x), normal(3, 4))
case("np.negative", lambda x: _s(np.negative(x)), normal(2, 3))
case("negative-0d", lambda x: _s(-x), f64(normal()))
for _p in (2, 3, 0.5, -1, 2.0, -1.5):
    case(f"power-scalar-exponent-{_p}", lambda x, p=_p: _s(x ** p), positive(3, 4))
case("np.power-scalar-exponent-3", lambda x: _s(np.power(x, 3)), positive(3, 4))
case("power-exponent-only", lambda x, y: _s(x ** y), positive(3, 4), normal(4), argnums=1)
case("power-0d-array-exponent", lambda x, y: _s(x ** y), positive(3),
     lambda rng: np.array(2.0), argnums=(0, 1))

# ---- elementwise unary ops --------------------------------------------------------------
_UNARY = [
    ("exp", np.exp, normal), ("log", np.log, positive), ("sqrt", np.sqrt, positive),
    ("abs", np.abs, nonzero), ("absolute", np.absolute, nonzero), ("sin", np.sin, normal),
    ("cos", np.cos, normal), ("tan", np.tan, lambda *s: uniform(-1.2, 1.2, *s)),
    ("tanh", np.tanh, normal), ("sinh", np.sinh, normal), ("cosh", np.cosh, normal),
    ("arctan", np.arctan, normal), ("square", np.square, normal),
    ("reciprocal", np.reciprocal, nonzero), ("expm1", np.expm1, normal),
    ("log1p", np.log1p, lambda *s: uniform(-0.5, 2.0, *s)),
]
for _op, _fn, _dom in _UNARY:
    case(f"{_op}-3x4", lambda x, fn=_fn: _s(fn(x)), _dom(3, 4))
    case(f"{_op}-0d", lambda x, fn=_fn: _s(fn(x)), f64(_dom()))
case("abs-operator", lambda x: _s(abs(x)), nonzero(5))

# ---- maximum, minimum, where, clip ------------------------------------------------------
case("maximum-relu-scalar-0", lambda x: _s(np.maximum(x, 0)), nonzero(3, 4))
case("maximum-0-first", lambda x: _s(np.maximum(0.0, x)), nonzero(3, 4))
case("minimum-scalar", lambda x: _s(np.minimum(x, 0.25)), distinct(3, 4))
case("where-same-shapes", lambda x, y: _s(np.where(x > y, x, y)), normal(3, 4), normal(3, 4),
     argnums=(0, 1))
case("where-broadcast", lambda c, x, y: _s(np.where(c > 0, x, y)), normal(3, 4), normal(4),
     normal(3, 1), argnums=(1, 2))
case("where-bool-argument", lambda c, x, y: _s(np.where(c, x, y)),
     lambda rng: rng.random((3, 1)) > 0.5, normal(1, 4), normal(3, 4), argnums=(1, 2))
case("where-scalar-branch", lambda x: _s(np.where(x > 0, x, 0.0)), nonzero(3, 4))
case("where-0d-branch", lambda x, y: _s(np.where(x > 0, x, y)), nonzero(3, 4), f64(normal()),
     argnums=(0, 1))
case("where-constant-condition", lambda x: _s(np.where(np.array([True, False, True]), x, -x)),
     normal(2, 3))
case("clip-both", lambda x: _s(np.clip(x, -0.5, 0.5)), off_bounds(3, 4))
case("clip-no-lower", lambda x: _s(np.clip(x, None, 0.5)), off_bounds(3, 4))
case("clip-no-upper", lambda x: _s(np.clip(x, -0.5, None)), off_bounds(3, 4))
case("clip-method", lambda x: _s(x.clip(-0.5, 0.5)), off_bounds(3, 4))
case("clip-method-max-only", lambda x: _s(x.clip(max=0.5)), off_bounds(3, 4))
case("clip-array-bounds", lambda x, lo, hi: _s(np.clip(x, lo, hi)), off_bounds(3, 4),
     const(np.full(4, -0.5)), const(np.full((3, 1), 0.5)), argnums=(0, 1, 2))

# ---- matmul and dot ---------------------------------------------------------------------
_MATMUL = [((4,), (4,)), ((4,), (4, 3)), ((3, 4), (4,)), ((3, 4), (4, 2)),
           ((2, 3, 4), (2, 4, 5)), ((3, 4), (2, 4, 5)), ((2, 3, 4), (4, 5)),
           ((4,), (2, 4, 3)), ((2, 3, 4), (4,)), ((2, 1, 3, 4), (5, 4, 2))]
for _sa, _sb in _MATMUL:
    case(f"matmul-{shape_id(_sa)}-{shape_id(_sb)}", lambda a, b: _s(a @ b), normal(*_sa),
         normal(*_sb), argnums=(0, 1))
case("np.matmul-3x4-4x2", lambda a, b: _s(np.matmul(a, b)), normal(3, 4), normal(4, 2),
     argnums=(0, 1))
case("matmul-wrt-b-only", lambda a, b: _s(a @ b), normal(2, 3, 4), normal(4, 2), argnums=1)
case("matmul-constant-a", lambda b: _s(np.array([[1.0, -2.0], [0.5, 3.0]]) @ b), normal(2, 3))
for _sa, _sb in [((4,), (4,)), ((4,), (4, 3)), ((3, 4), (4,)), ((3, 4), (4, 2))]:
    case(f"np.dot-{shape_id(_sa)}-{shape_id(_sb)}", lambda a, b: _s(np.dot(a, b)),
         normal(*_sa), normal(*_sb), argnums=(0, 1))
case("dot-method-3x4-4x2", lambda a, b: _s(a.dot(b)), normal(3, 4), normal(4, 2),
     argnums=(0, 1))
case("dot-method-3x4-4", lambda a, b: _s(a.dot(b)), normal(3, 4), normal(4), argnums=(0, 1))
case("np.dot-scalar", lambda a, b: _s(np.dot(a, b)), f64(normal()), normal(3), argnums=(0, 1))

# ---- transpose, reshape and friends -----------------------------------------------------
case("T-2d", lambda x: _s(x.T), normal(3, 4))
case("T-3d", lambda x: _s(x.T), normal(2, 3, 4))
case("T-then-matmul", lambda x, w: _s(x.T @ w), normal(4, 3), normal(4, 2), argnums=(0, 1))
case("np.transpose-default", lambda x: _s(np.transpose(x)), normal(2, 3, 4))
case("np.transpose-axes", lambda x: _s(np.transpose(x, (1, 2, 0))), normal(2, 3, 4))
case("np.transpose-axes-kw", lambda x: _s(np.transpose(x, axes=(2, 0, 1))), normal(2, 3, 4))
case("np.transpose-negative-axes", lambda x: _s(np.transpose(x, (-1, 0, 1))), normal(2, 3, 4))
case("transpose-method-varargs", lambda x: _s(x.transpose(1, 0, 2)), normal(2, 3, 4))
case("transpose-method-tuple", lambda x: _s(x.transpose((2, 0, 1))), normal(2, 3, 4))
case("transpose-method-none", lambda x: _s(x.transpose()), normal(3, 4))
case("np.swapaxes", lambda x: _s(np.swapaxes(x, 0, 2)), normal(2, 3, 4))
case("swapaxes-method-negative", lambda x: _s(x.swapaxes(-1, -2)), normal(2, 3, 4))
case("swapaxes-2d", lambda x: _s(np.swapaxes(x, 0, 1)), normal(3, 4))
case("mT", lambda x: _s(x.mT), normal(2, 3, 4))
case("np.reshape", lambda x: _s(np.reshape(x, (4, 6))), normal(2, 3, 4))
case("np.reshape-minus-one", lambda x: _s(np.reshape(x, (-1, 4))), normal(2, 3, 4))
case("reshape-method-varargs", lambda x: _s(x.reshape(6, -1)), normal(2, 3, 4))
case("reshape-method-tuple", lambda x: _s(x.reshape((2, 12))), normal(2, 3, 4))
case("reshape-method-flat", lambda x: _s(x.reshape(-1)), normal(3, 4))
case("reshape-to-0d", lambda x: _s(x.reshape(())), normal(1, 1))
case("np.ravel", lambda x: _s(np.ravel(x)), normal(2, 3, 4))
case("ravel-method", lambda x: _s(x.ravel()), normal(3, 4))
case("flatten-method", lambda x: _s(x.flatten()), normal(3, 4))
case("np.squeeze-all", lambda x: _s(np.squeeze(x)), normal(1, 3, 1, 4))
case("np.squeeze-axis", lambda x: _s(np.squeeze(x, axis=2)), normal(1, 3, 1, 4))
case("np.squeeze-negative-axis", lambda x: _s(np.squeeze(x, -2)), normal(1, 3, 1, 4))
case("squeeze-method", lambda x: _s(x.squeeze(0)), normal(1, 3, 4))
case("np.expand_dims-0", lambda x: _s(np.expand_dims(x, 0)), normal(3, 4))
case("np.expand_dims-negative", lambda x: _s(np.expand_dims(x, -1)), normal(3, 4))
case("np.expand_dims-tuple", lambda x: _s(np.expand_dims(x, (0, 2))), normal(3, 4))
case("np.broadcast_to-3x1", lambda x: _s(np.broadcast_to(x, (2, 3, 4))), normal(3, 1))
case("np.broadcast_to-4", lambda x: _s(np.broadcast_to(x, (3, 4))), normal(4))
case("np.broadcast_to-1x4", lambda x: _s(np.broadcast_to(x, (3, 4))), normal(1, 4))
case("np.broadcast_to-0d", lambda x: _s(np.broadcast_to(x, (2, 3))), f64(normal()))
case("np.broadcast_to-same", lambda x: _s(np.broadcast_to(x, (3, 4))), normal(3, 4))

# ---- concatenate and stack --------------------------------------------------------------
case("concatenate-axis0", lambda a, b: _s(np.concatenate([a, b])), normal(2, 3), normal(4, 3),
     argnums=(0, 1))
case("concatenate-axis1", lambda a, b, c: _s(np.concatenate((a, b, c), axis=1)),
     normal(2, 3), normal(2, 1), normal(2, 2), argnums=(0, 1, 2))
case("concatenate-axis-minus1", lambda a, b: _s(np.concatenate([a, b], axis=-1)),
     normal(2, 3, 2), normal(2, 3, 3), argnums=(0, 1))
case("concatenate-1d", lambda a, b: _s(np.concatenate([a, b])), normal(3), normal(2),
     argnums=(0, 1))
case("concatenate-constant", lambda a: _s(np.concatenate([np.ones((1, 3)), a, a * 2])),
     normal(2, 3))
case("concatenate-wrt-second", lambda a, b: _s(np.concatenate([a, b], 1)), normal(2, 3),
     normal(2, 2), argnums=1)
case("stack-axis0", lambda a, b: _s(np.stack([a, b])), normal(3, 4), normal(3, 4),
     argnums=(0, 1))
case("stack-axis1", lambda a, b, c: _s(np.stack((a, b, c), axis=1)), normal(3, 2),
     normal(3, 2), normal(3, 2), argnums=(0, 1, 2))
case("stack-axis-minus1", lambda a, b: _s(np.stack([a, b], axis=-1)), normal(3), normal(3),
     argnums=(0, 1))
case("stack-0d", lambda a, b: _s(np.stack([a, b])), f64(normal()), f64(normal()),
     argnums=(0, 1))

# ---- astype -----------------------------------------------------------------------------
_F32 = {"eps": 1e-3, "rtol": 1e-3, "atol": 1e-4}  # the forward pass rounds to float32
case("astype-64-to-32", lambda x: _s(x.astype(np.float32)), uniform(-1, 1, 3, 4), **_F32)
case("astype-32-and-back", lambda x: _s(x.astype(np.float32).astype(np.float64) * x),
     uniform(-1, 1, 3, 4), **_F32)
case("astype-32-to-64", lambda x: _s(x.astype(np.float64) * 2),
     lambda rng: rng.standard_normal((3, 4)).astype(np.float32), rtol=1e-3, atol=1e-4)
case("astype-same-dtype", lambda x: _s(x.astype(np.float64)), normal(3, 4))

# ---- reductions: sum, mean, max, min; axis None / int / negative / tuple; keepdims -------
_REDUCTIONS = [("sum", np.sum, normal), ("mean", np.mean, normal), ("max", np.max, distinct),
               ("min", np.min, distinct)]
_REDUCE_AXES = {(5,): [None, 0, -1],
                (3, 4): [None, 0, 1, -1, (0, 1)],
                (2, 3, 4): [None, 1, -1, (0, 2), (-1, 0), (0, 1, 2)]}
for _op, _fn, _dom in _REDUCTIONS:
    for _shape, _axes in _REDUCE_AXES.items():
        for _axis in _axes:
            for _keep in (False, True):
                case(f"{_op}-{shape_id(_shape)}-axis{axis_id(_axis)}" + "-keepdims" * _keep,
                     lambda x, fn=_fn, axis=_axis, keep=_keep: _s(fn(x, axis=axis,
                                                                    keepdims=keep)),
                     _dom(*_shape))
case("sum-method", lambda x: _s(x.sum(axis=1)), normal(3, 4))
case("sum-method-positional", lambda x: _s(x.sum(0, keepdims=True)), normal(3, 4))
case("mean-method", lambda x: _s(x.mean(-1)), normal(2, 3, 4))
case("max-method", lambda x: _s(x.max(axis=0)), distinct(3, 4))
case("min-method", lambda x: _s(x.min(1, keepdims=True)), distinct(3, 4))
case("max-method-all", lambda x: _s(x.max()), distinct(2, 3, 4))
case("np.amax", lambda x: _s(np.amax(x, axis=1)), distinct(3, 4))
case("np.amin", lambda x: _s(np.amin(x, axis=(0, 1))), distinct(2, 3, 4))
case("np.amax-all", lambda x: _s(np.amax(x)), distinct(5))
case("np.add.reduce", lambda x: _s(np.add.reduce(x, axis=1)), normal(3, 4))
case("np.maximum.reduce", lambda x: _s(np.maximum.reduce(x)), distinct(3, 4))
case("sum-of-0d", lambda x: _s(np.sum(x)), f64(normal()))
case("max-of-0d", lambda x: _s(np.max(x)), f64(normal()))

# ---- indexing ---------------------------------------------------------------------------
case("slice-1:3", lambda x: _s(x[1:3]), normal(5))
case("slice-reverse", lambda x: _s(x[::-1]), normal(5))
case("slice-negative-step", lambda x: _s(x[3:0:-2]), normal(6))
case("slice-2d-negative-step", lambda x: _s(x[1:, ::-2]), normal(3, 5))
case("slice-newaxis", lambda x: _s(x[:, None] * x), normal(4))
case("slice-ellipsis", lambda x: _s(x[..., 1]), normal(2, 3, 4))
case("slice-ellipsis-newaxis", lambda x: _s(x[None, 1:3, ...]), normal(4, 2))
case("index-last", lambda x: _s(x[-1]), normal(3, 4))
case("index-int-pair", lambda x: _s(x[1, -2]), normal(3, 4))
case("index-row-column", lambda x: _s(x[1] * x[:, 2]), normal(3, 3))
case("slice-overlapping-uses", lambda x: _s(x[1:] * x[:-1]), normal(6))
case("int-array", lambda x: _s(x[np.array([2, 0, 3])]), normal(5))
case("int-array-repeated", lambda x: _s(x[[0, 2, 2, 1, 2]]), normal(4))
case("int-array-repeated-rows", lambda x: _s(x[np.array([1, 1, 0])]), normal(3, 4))
case("int-array-repeated-columns", lambda x: _s(x[:, [3, 3, 0]]), normal(2, 4))
case("int-array-2d-index", lambda x: _s(x[np.array([[0, 1], [1, 0]])]), normal(3, 2))
case("int-array-negative-aliases", lambda x: _s(x[np.array([2, -1, 0])]), normal(3))
case("int-array-negative-distinct", lambda x: _s(x[[-1, 0, -2]]), normal(4))
case("int-arrays-pair", lambda x: _s(x[[0, 1, 1], [2, 2, 2]]), normal(3, 4))
case("int-array-argument", lambda x, idx: _s(x[idx]), normal(4, 2), const(np.array([3, 1, 3, 3])))
case("arange-labels", lambda x, labels: _s(x[np.arange(x.shape[0]), labels]), normal(5, 3),
     const(np.array([2, 0, 2, 1, 0])))
case("arange-labels-random", lambda x, labels: _s(x[np.arange(6), labels]), normal(6, 4),
     ints(4, 6))
case("bool-mask-traced", lambda x: _s(x[x > 0]), nonzero(3, 4))
case("bool-mask-argument", lambda x, m: _s(x[m]), normal(3, 4),
     const(np.array([[True, False, True, True]] * 3)))
case("bool-mask-rows", lambda x: _s(x[np.array([True, False, True])]), normal(3, 4))
case("bool-mask-rows-argument", lambda x, m: _s(x[m, 1:]), normal(3, 4),
     const(np.array([False, True, True])))
case("bool-mask-with-int-array", lambda x: _s(x[np.array([True, False, True]), [1, 1]]),
     normal(3, 4))
case("bool-mask-list", lambda x: _s(x[[True, False, True]]), normal(3))
case("int-array-0d", lambda x: _s(x[np.array(1)]), normal(3, 2))

# ---- einsum -----------------------------------------------------------------------------
_EINSUM = [("ij,jk->ik", (3, 4), (4, 2)), ("ij->", (3, 4)), ("ij->j", (3, 4)),
           ("ij->ji", (3, 4)), ("bij,bjk->bik", (2, 3, 4), (2, 4, 2)), ("i,i->", (4,), (4,)),
           ("ij,jk", (3, 4), (4, 2)), ("i,j", (3,), (4,)), ("ij,jk,kl->il", (2, 3), (3, 4), (4, 2)),
           ("ij,k->k", (3, 4), (2,)), ("ij,kl->ik", (2, 3), (4, 5)), ("ijk->ki", (2, 3, 4)),
           ("ij,ij->i", (3, 4), (3, 4))]
for _spec, *_shapes in _EINSUM:
    case(f"einsum-{_spec.replace('->', '=')}",
         lambda *ops, spec=_spec: _s(np.einsum(spec, *ops)),
         *[normal(*s) for s in _shapes], argnums=tuple(range(len(_shapes))))
case("einsum-spaces", lambda a, b: _s(np.einsum("ij, jk -> ik", a, b)), normal(2, 3),
     normal(3, 2), argnums=(0, 1))
case("einsum-constant-operand", lambda a: _s(np.einsum("ij,j->i", a, np.arange(3.0))),
     normal(2, 3))


# ---- composed losses --------------------------------------------------------------------
def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def softmax(x):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def relu_maximum(x):
    return _s(np.maximum(x, 0) * 1.5)


def relu_mask(x):
    return _s(x * (x > 0))


def gelu(x):
    return np.sum(0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))))


def mse(w, x, y):
    pred = x @ w
    return np.mean((pred - y) ** 2)


def softmax_cross_entropy(logits, labels):
    shifted = logits - np.max(logits, axis=1, keepdims=True)
    logp = shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))
    return -np.mean(logp[np.arange(logits.shape[0]), labels])


def binary_cross_entropy(z, y):
    p = sigmoid(z)
    return -np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))


def mlp(w1, b1, w2, x, labels):
    h = np.tanh(x @ w1 + b1)
    return softmax_cross_entropy(h @ w2, labels) + 1e-3 * np.sum(w1 * w1)


case("sigmoid", lambda x: _s(sigmoid(x)), normal(3, 4))
case("softmax", lambda x: _s(softmax(x)), normal(3, 4))
case("softmax-1d", lambda x: _s(softmax(x)), normal(5))
case("relu-maximum", relu_maximum, nonzero(3, 4))
case("relu-mask", relu_mask, nonzero(3, 4))
case("gelu", gelu, normal(3, 4))
case("mse", mse, normal(4, 2), normal(5, 4), normal(5, 2), argnums=(0, 1, 2))
case("softmax-cross-entropy", softmax_cross_entropy, normal(6, 4), ints(4, 6))
case("binary-cross-entropy", binary_cross_entropy, normal(8), lambda rng: rng.random(8) > 0.5)
case("binary-cross-entropy-float-targets", binary_cross_entropy, normal(8), uniform(0, 1, 8),
     argnums=(0, 1))
case("mlp", mlp, normal(4, 5), normal(5), normal(5, 3), normal(6, 4), ints(3, 6),
     argnums=(0, 1, 2))

BY_NAME = tables.by_name(CASES)


# ---- the tests --------------------------------------------------------------------------
@pytest.mark.parametrize("c", CASES, ids=[c.name for c in CASES])
def test_gradients(c):
    tables.check_gradients(c)


FLOAT32 = ["add-3x4-4", "multiply-3x1-1x4", "divide-2x3x4-3x1", "power-3x4-4",
           "maximum-3x4-3x4", "exp-3x4", "log-3x4", "sqrt-3x4", "tanh-3x4", "abs-3x4",
           "sum-2x3x4-axis(0,2)", "mean-3x4-axis-1-keepdims", "max-2x3x4-axis1",
           "matmul-2x3x4-2x4x5", "matmul-3x4-4", "np.transpose-axes", "reshape-method-varargs",
           "concatenate-axis1", "stack-axis1", "int-array-repeated", "bool-mask-traced",
           "arange-labels", "slice-reverse", "einsum-ij,jk,kl=il", "where-broadcast",
           "clip-both", "softmax-cross-entropy", "gelu", "mse", "mlp", "power-float-2x3",
           "reflected-power", "maximum-relu-scalar-0", "minimum-3x1-1x4"]
# Cases whose own code computes in float64 whatever the input dtype.
PROMOTING = {"gelu": "np.sqrt(2 / np.pi) is an np.float64",
             "power-float-2x3": "a Python float argument is differentiated as float64"}


@pytest.mark.parametrize("name", FLOAT32)
def test_float32_gradients(name):
    tables.check_float32(BY_NAME[name], rtol=1e-3, atol=1e-4, arg_types=np.ndarray,
                         check_source=name not in PROMOTING)


# ---- generated source is clean Python ---------------------------------------------------
# Emits every case once and runs ruff once over all of them (one process, not hundreds).
ruff_report = tables.ruff_report_fixture(CASES, "generated")


@pytest.mark.parametrize("i", range(len(CASES)), ids=[c.name for c in CASES])
def test_generated_source_passes_ruff(i, ruff_report):
    ruff_report.check(i, CASES[i])


# ---- composed models, cache reuse, ties -------------------------------------------------
def test_cached_function_is_reused_with_new_values():
    rng = np.random.default_rng(1)
    f = autodiffgen.value_and_grad(mlp, argnums=(0, 1, 2))
    first = (normal(4, 5)(rng), normal(5)(rng), normal(5, 3)(rng), normal(6, 4)(rng),
             ints(3, 6)(rng))
    second = tuple(a + 0.5 * rng.standard_normal(a.shape) if a.dtype.kind == "f"
                   else (a + 1) % 3 for a in first)
    f(*first)
    assert (f.cache_info().misses, f.cache_info().hits) == (1, 0), f.cache_info()
    value, grads = f(*second)
    assert (f.cache_info().misses, f.cache_info().hits) == (1, 1), f.cache_info()
    tape_value, tape_grads = tape.value_and_grad(mlp, argnums=(0, 1, 2))(*second)
    np.testing.assert_allclose(value, tape_value, rtol=1e-12)
    for g, t in zip(grads, tape_grads, strict=True):
        np.testing.assert_allclose(g, t, rtol=1e-10, atol=1e-12)


def test_max_splits_gradient_among_tied_maxima():
    x = np.array([1.0, 3.0, 3.0, 2.0, 3.0])
    expected = np.array([0.0, 1 / 3, 1 / 3, 0.0, 1 / 3])
    for reduce in (np.max, np.amax, lambda x: x.max(axis=0)):
        def f(x, reduce=reduce):
            return reduce(x) * 2.0
        np.testing.assert_allclose(autodiffgen.grad(f)(x), 2 * expected)
        np.testing.assert_allclose(tape.grad(f)(x), 2 * expected)


def test_max_and_min_ties_along_an_axis():
    x = np.array([[1.0, 4.0, 4.0], [2.0, 2.0, 0.0]])
    g = autodiffgen.grad(lambda x: np.sum(np.max(x, axis=1) * np.array([1.0, 10.0])))(x)
    np.testing.assert_allclose(g, [[0, 0.5, 0.5], [5.0, 5.0, 0]])
    g = autodiffgen.grad(lambda x: np.sum(np.min(x, axis=0, keepdims=True)))(x)
    np.testing.assert_allclose(g, [[1, 0, 0], [0, 1, 1]])


def test_maximum_and_minimum_split_ties_equally():
    x = np.array([1.0, 2.0, 3.0])
    y = np.array([1.0, 0.0, 3.0])
    for op in (np.maximum, np.minimum):
        def f(x, y, op=op):
            return np.sum(op(x, y) * 3.0)
        gx, gy = autodiffgen.grad(f, argnums=(0, 1))(x, y)
        assert gx.dtype == gy.dtype == np.float64
        winner_x = 1.0 if op is np.maximum else 0.0
        np.testing.assert_allclose(gx, [1.5, 3 * winner_x, 1.5])
        np.testing.assert_allclose(gy, [1.5, 3 - 3 * winner_x, 1.5])
    # against a constant (relu), the tie goes to the constant: 0, as jax.nn.relu
    # (tests/rules/test_relu.py)
    g = autodiffgen.grad(lambda x: np.sum(np.maximum(x, 0.0)))(np.array([-1.0, 0.0, 2.0]))
    np.testing.assert_allclose(g, [0.0, 0.0, 1.0])


def test_repeated_indices_accumulate_like_add_at():
    x = np.arange(4.0)
    idx = np.array([0, 2, 2, 3, 2])
    w = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    expected = np.zeros(4)
    np.add.at(expected, idx, w)
    g = autodiffgen.grad(lambda x: np.sum(x[idx] * w))(x)
    np.testing.assert_array_equal(g, expected)
    g = autodiffgen.grad(lambda x, i: np.sum(x[i] * w))(x, idx)
    np.testing.assert_array_equal(g, expected)


# ---- exact zeros where the textbook formula divides by zero (issue 10) ------------------
COEFFS = np.array([0.5, -1.0, 2.0, 0.25])


def polynomial(x):
    return np.sum(sum(COEFFS[k] * x ** k for k in range(4)))


def polynomial_derivative(x):
    return sum(k * COEFFS[k] * x ** (k - 1) for k in range(1, 4))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_power_rule_is_finite_at_zero(dtype):
    """x ** 0 has derivative 0, x ** 1 derivative 1, x ** 2 derivative 0 at x = 0: not
    0 * 0 ** -1 = NaN. A polynomial's gradient is exact wherever an input is 0."""
    rng = np.random.default_rng(11)
    f = autodiffgen.grad(polynomial)
    for x in (np.array([0.0, 1.5, -2.0, 0.0]), rng.normal(size=4), np.zeros(4)):
        x = x.astype(dtype)
        with np.errstate(all="raise"):  # no 0 ** -1 anywhere, not even a warning
            g = f(x)
        assert g.dtype == dtype
        expected = polynomial_derivative(x.astype(np.float64))
        np.testing.assert_allclose(g, expected, rtol=1e-5 if dtype == np.float32 else 1e-12)
        np.testing.assert_allclose(tape.grad(polynomial)(x), expected, rtol=1e-5)
    check_grads(polynomial, np.array([0.0, 0.5, -1.0]))
    for k, slope in ((0, 0.0), (1, 1.0), (2, 0.0), (3, 0.0)):
        assert autodiffgen.grad(lambda x, k=k: np.sum(x ** k))(np.zeros(2))[0] == slope
        assert autodiffgen.grad(lambda x, k=k: x ** k)(0.0) == slope  # Python-float code


def test_power_with_an_array_exponent_containing_zero():
    """x ** p with p a constant, an argument, or differentiated: 0 where p is 0, also at
    x == 0, in reverse and forward mode, and the exponent's own derivative unchanged."""
    p = np.array([0.0, 1.0, 2.0, 0.0, 3.0])
    x = np.array([0.0, 0.0, 0.0, 1.5, -0.5])
    expected = np.array([0.0, 1.0, 0.0, 0.0, 0.75])

    def argument(x, p):
        return np.sum(x ** p)
    with np.errstate(divide="raise", invalid="raise"):
        np.testing.assert_array_equal(autodiffgen.grad(argument)(x, p), expected)
        np.testing.assert_array_equal(autodiffgen.grad(lambda x: np.sum(x ** p))(x), expected)
        np.testing.assert_array_equal(tape.grad(argument)(x, p), expected)
        _, t = autodiffgen.jvp(lambda x, p: x ** p, (x, p), (np.ones(5), None))
        np.testing.assert_array_equal(t, expected)
        _, t = tape.jvp(lambda x: x ** p, (x,), (np.ones(5),))
        np.testing.assert_array_equal(t, expected)
    gx, gp = autodiffgen.grad(argument, argnums=(0, 1))(x, p)
    np.testing.assert_array_equal(gx, expected)
    np.testing.assert_array_equal(gp, tape.grad(argument, argnums=1)(x, p))
    positive_x = np.array([0.5, 2.0, 1.5, 1.5, 0.7])
    check_grads(argument, positive_x, p, argnums=(0, 1))  # the where keeps d/dp exact
    h = autodiffgen.hessian(lambda q: np.sum(positive_x ** q))(p)
    np.testing.assert_allclose(h, np.diag(positive_x ** p * np.log(positive_x) ** 2))


def test_std_of_one_value_or_equal_values_has_a_zero_gradient():
    """sqrt at a variance of exactly 0 (a length-1 axis, or equal values): 0, as Autograd
    and PyTorch give for one value, instead of inf * 0 = NaN."""
    one_row = np.array([[1.0, 2.0, 3.0]])
    cases = [
        (lambda x: np.sum(np.std(x, axis=0)), one_row),
        (lambda x: np.sum(x.std(axis=0, keepdims=True) * 2.0), one_row),
        (lambda x: np.std(x), np.full(4, 0.5)),
        (lambda x: np.std(x, ddof=1), np.full(2, -1.0)),
        (lambda x: np.sum(np.std(x, axis=1) * np.array([1.0, 3.0])),
         np.array([[2.0, 2.0, 2.0], [1.0, 2.0, 4.0]])),
    ]
    for f, x in cases:
        with np.errstate(all="raise"):
            g = autodiffgen.grad(f)(x)
        assert np.isfinite(g).all()
        np.testing.assert_allclose(g, tape.grad(f)(x))
        check_grads(f, x, fwd=False)
        _, t = autodiffgen.jvp(f, (x,), (np.ones_like(x),))
        assert np.isfinite(t)
    g = autodiffgen.grad(cases[-1][0])(cases[-1][1])
    np.testing.assert_array_equal(g[0], 0.0)
    x = cases[-1][1][1]
    np.testing.assert_allclose(g[1], 3 * (x - x.mean()) / (3 * x.std()))
    check_grads(lambda x: np.sum(np.std(x, axis=0, ddof=1) + np.var(x, axis=0, ddof=1)),
                np.random.default_rng(3).normal(size=(4, 3)))


@pytest.mark.filterwarnings("ignore:Degrees of freedom")
def test_var_with_ddof_over_too_few_values_is_nan_as_in_numpy():
    """n - ddof == 0: NumPy's value is NaN, and so is the gradient (no silent number)."""
    x = np.array([[1.0, 2.0]])
    with np.errstate(all="ignore"):
        value, g = autodiffgen.value_and_grad(lambda x: np.sum(np.var(x, axis=0, ddof=1)))(x)
        assert np.isnan(value) and np.isnan(np.sum(np.var(x, axis=0, ddof=1)))
        assert np.isnan(g).all()


def test_std_second_derivatives_are_finite_over_a_length_1_axis():
    """The generated gradient calls _std_root, so an enclosing trace (hessian, grad of
    grad) records std_root and its finite rule, not np.sqrt's inf * 0."""
    import autodiffgen as ad

    def f(x):
        return np.sum(np.std(x[None, :], axis=0)) + np.sum(x ** 2)

    def g(x):
        return np.std(x) * 3

    x = np.array([0.3, -0.2, 0.5])
    np.testing.assert_allclose(ad.hessian(f)(x), 2 * np.eye(3))
    np.testing.assert_allclose(ad.jacobian(ad.grad(f))(x), 2 * np.eye(3))
    eps = 1e-6  # central differences of the tape's gradient
    fd = np.stack([(tape.grad(g)(x + eps * e) - tape.grad(g)(x - eps * e)) / (2 * eps)
                   for e in np.eye(3)])
    np.testing.assert_allclose(ad.hessian(g)(x), fd, rtol=1e-5, atol=1e-7)
