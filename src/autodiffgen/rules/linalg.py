"""Linear algebra: matmul (1-D, 2-D and batched operands), einsum, and dot, vdot, inner,
outer and tensordot written as one of the two.

matmul's rules follow its promotion of 1-D operands; batch dimensions that broadcasting
added are summed away by `unbroadcast`. An einsum cotangent is another einsum: the
primitive always holds explicit subscripts (no '...', an output after '->'), and an index
repeated within one operand ('ii->i') gets its cotangent back onto the diagonal by one
more operand, an identity matrix.
"""

import string

import numpy as np

from ..errors import UnsupportedOperationError, at
from ..tracer import result_dtype, user_loc
from . import boxmethod, check_no_out, defprimitive, register_function, register_ufunc


def _matmul_a(g, ans, a, b):
    if np.ndim(b) == 1:
        return g * b if np.ndim(a) == 1 else np.expand_dims(g, -1) * b
    if np.ndim(a) == 1:
        return np.squeeze(b @ np.expand_dims(g, -1), -1)
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
def _split(subscripts):
    ins, _, out = subscripts.partition("->")
    return ins.split(","), out


def _unused(*texts):
    """Letters einsum accepts that none of `texts` uses, in a fixed order."""
    used = set("".join(texts))
    return (c for c in string.ascii_letters if c not in used)


def _explicit(subscripts, operands):
    """'...ij,...jk' -> 'abij,bjk->abik': ellipses spelled out with unused letters
    (right-aligned, as NumPy broadcasts them) and the implicit output made explicit."""
    subscripts = subscripts.replace(" ", "")
    ins, out = _split(subscripts)
    if len(ins) != len(operands):
        raise ValueError(at(user_loc(), f"einsum subscripts {subscripts!r} name {len(ins)} "
                            f"operands but {len(operands)} were given"))
    fresh = _unused(subscripts)
    ranks = [np.ndim(op) - len(term.replace("...", "")) for term, op in zip(ins, operands)]
    dots = "".join(next(fresh) for _ in range(max([r for r, t in zip(ranks, ins)
                                                   if "..." in t], default=0)))
    ins = [t.replace("...", dots[len(dots) - r:] if r else "") for t, r in zip(ins, ranks)]
    if "->" in subscripts:
        out = out.replace("...", dots)
    else:
        letters = "".join(t for t in ins)
        out = dots + "".join(sorted(c for c in set(letters) - set(dots)
                                    if letters.count(c) == 1))
    return ",".join(ins) + "->" + out


def _einsum_vjp(i, g, ans, *operands, subscripts, optimize=False):
    """The einsum of the other operands and g; an index that operand i repeats gets an
    identity operand (its cotangent lives on the diagonal), and an index summed within
    operand i alone is broadcast back."""
    ins, out = _split(subscripts)
    shape = np.shape(operands[i])
    fresh = _unused(subscripts)
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


@register_function(np.einsum)
def _einsum(subscripts, *operands, out=None, optimize=False, **kwargs):
    if out is not None or kwargs or not isinstance(subscripts, str):
        raise UnsupportedOperationError(at(user_loc(), "np.einsum is supported with a "
                                           "subscripts string and operands only"))
    optimize = optimize if isinstance(optimize, (bool, str)) else bool(optimize)
    return einsum(*operands, subscripts=_explicit(subscripts, operands), optimize=optimize)


# ---- dot, vdot, inner, outer, tensordot: einsums (or matmul) ------------------------------
def _tensordot_subscripts(na, nb, axes_a, axes_b):
    letters = iter(string.ascii_lowercase)
    ta = [next(letters) for _ in range(na)]
    tb = [None] * nb
    for i, j in zip(axes_a, axes_b):
        tb[j] = ta[i]
    tb = [c or next(letters) for c in tb]
    contracted = {ta[i] for i in axes_a}
    out = [c for c in ta if c not in contracted] + [c for c in tb if c not in contracted]
    return "".join(ta) + "," + "".join(tb) + "->" + "".join(out)


@register_function(np.tensordot)
def _tensordot(a, b, axes=2):
    na, nb = np.ndim(a), np.ndim(b)
    if np.ndim(axes) == 0:
        axes_a, axes_b = list(range(na - int(axes), na)), list(range(int(axes)))
    else:
        axes_a, axes_b = ([x] if np.ndim(x) == 0 else list(x) for x in axes)
    if len(axes_a) != len(axes_b):
        raise ValueError(at(user_loc(), f"np.tensordot axes {axes!r}: both lists must "
                            "have the same length"))
    axes_a = [int(x) % na for x in axes_a]
    axes_b = [int(x) % nb for x in axes_b]
    return einsum(a, b, subscripts=_tensordot_subscripts(na, nb, axes_a, axes_b),
                  optimize=True)  # optimize: NumPy contracts with BLAS, as tensordot does


@register_function(np.dot)
def _dot(a, b, out=None):
    check_no_out(out, "np.dot")
    na, nb = np.ndim(a), np.ndim(b)
    if na == 0 or nb == 0:
        return a * b
    if na <= 2 and nb <= 2:
        return matmul(a, b)
    return _tensordot(a, b, ([na - 1], [max(nb - 2, 0)]))


boxmethod("dot")(_dot)


@register_function(np.inner)
def _inner(a, b):
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return a * b
    return _tensordot(a, b, ([-1], [-1]))


@register_function(np.vdot)
def _vdot(a, b):
    return einsum(np.reshape(a, (-1,)), np.reshape(b, (-1,)), subscripts="i,i->", optimize=True)


@register_function(np.outer)
def _outer(a, b, out=None):
    check_no_out(out, "np.outer")
    return einsum(np.reshape(a, (-1,)), np.reshape(b, (-1,)), subscripts="i,j->ij")
