"""Products: matmul (1-D, 2-D and batched operands) and einsum, the two primitives that
np.dot, np.vdot, np.inner, np.outer and np.tensordot are written with
(numpy_api/products.py).

matmul's rules follow its promotion of 1-D operands; batch dimensions that broadcasting
added are summed away by `unbroadcast`. An einsum cotangent is another einsum: the
primitive always holds explicit subscripts (no '...', an output after '->'), and an index
repeated within one operand ('ii->i') gets its cotangent back onto the diagonal by one
more operand, an identity matrix. Both are linear in each operand, so each tangent's
contribution is the primitive with that operand replaced by its tangent.
"""

import string

import numpy as np

from ..trace.boxes import result_dtype
from .registry import defprimitive, register_ufunc


# ---- matmul ------------------------------------------------------------------------------
def _matmul_a(g, ans, a, b):
    if np.ndim(b) == 1:
        return g * b if np.ndim(a) == 1 else np.expand_dims(g, -1) * b
    if np.ndim(a) == 1:
        return np.squeeze(b @ np.expand_dims(g, -1), -1)
    if np.ndim(b) == 2 and np.ndim(a) > 2:  # shared weights: one GEMM, not one per batch
        # (BLAS reads b.T transposed; in a batch of small products that is the slow case)
        return np.reshape(np.reshape(g, (-1, np.shape(g)[-1])) @ np.swapaxes(b, -1, -2),
                          np.shape(a))
    return g @ np.swapaxes(b, -1, -2)


def _matmul_b(g, ans, a, b):
    if np.ndim(a) == 1:
        return g * a if np.ndim(b) == 1 else np.expand_dims(a, -1) * np.expand_dims(g, -2)
    if np.ndim(b) == 1:
        if np.ndim(a) == 2:  # a matrix-vector product's weights: one vector-matrix product
            return g @ a
        return np.squeeze(np.swapaxes(a, -1, -2) @ np.expand_dims(g, -1), -1)
    if np.ndim(b) == 2 and np.ndim(a) > 2:  # shared weights: one matmul over all batches
        return np.reshape(a, (-1, np.shape(a)[-1])).T @ np.reshape(g, (-1, np.shape(g)[-1]))
    return np.swapaxes(a, -1, -2) @ g


matmul = defprimitive("matmul", np.matmul, "{0} @ {1}", vjps=[_matmul_a, _matmul_b],
                      jvp_from="multilinear")
register_ufunc(np.matmul, matmul)


# ---- einsum ------------------------------------------------------------------------------
def split_subscripts(subscripts):
    ins, _, out = subscripts.partition("->")
    return ins.split(","), out


def unused_letters(*texts):
    """Letters einsum accepts that none of `texts` uses, in a fixed order."""
    used = set("".join(texts))
    return (c for c in string.ascii_letters if c not in used)


def _einsum_vjp(i, g, ans, *operands, subscripts, optimize=False):
    """The einsum of the other operands and g; an index that operand i repeats gets an
    identity operand (its cotangent lives on the diagonal), and an index summed within
    operand i alone is broadcast back."""
    ins, out = split_subscripts(subscripts)
    shape = np.shape(operands[i])
    fresh = unused_letters(subscripts)
    terms = [t for j, t in enumerate(ins) if j != i] + [out]
    ops = [op for j, op in enumerate(operands) if j != i] + [g]
    term = ""
    for c, n in zip(ins[i], shape):
        if c in term:  # a repeated index: a new letter tied to the first by an identity
            d = next(fresh)
            terms.append(c + d)
            ops.append(np.eye(n, dtype=result_dtype(g)))
            c = d
        term += c
    seen = set("".join(terms))
    keep = "".join(c for c in term if c in seen)
    r = einsum(*ops, subscripts=",".join(terms) + "->" + keep, optimize=optimize)
    if keep != term:
        axes = tuple(k for k, c in enumerate(term) if c not in seen)
        r = np.expand_dims(r, axes[0] if len(axes) == 1 else axes)
        full = tuple(n if c not in seen else m  # r's sizes: broadcasting may have grown them
                     for c, n, m in zip(term, shape, np.shape(r)))
        r = np.broadcast_to(r, full)
    return r


einsum = defprimitive("einsum", lambda *ops, subscripts, optimize=False:
                      np.einsum(subscripts, *ops, optimize=optimize),
                      "np.einsum({subscripts}, {*})", {"optimize": False},
                      variadic_vjp=_einsum_vjp, jvp_from="multilinear")
