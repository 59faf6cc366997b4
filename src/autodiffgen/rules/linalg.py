"""Linear algebra: matmul (1-D, 2-D and batched operands), dot, einsum.

matmul's rules follow its promotion of 1-D operands; batch dimensions that broadcasting
added are summed away by `unbroadcast`. An einsum cotangent is another einsum.
"""

import numpy as np

from ..errors import UnsupportedOperationError, at
from ..tracer import user_loc
from . import boxmethod, defprimitive, register_function, register_ufunc


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
        return np.squeeze(np.swapaxes(a, -1, -2) @ np.expand_dims(g, -1), -1)
    return np.swapaxes(a, -1, -2) @ g


matmul = defprimitive("matmul", np.matmul, "{0} @ {1}", vjps=[_matmul_a, _matmul_b],
                      jvp_from="multilinear")
register_ufunc(np.matmul, matmul)


@register_function(np.dot)
def _dot(a, b, out=None):
    if out is not None or max(np.ndim(a), np.ndim(b)) > 2:
        raise UnsupportedOperationError(at(user_loc(), "np.dot on arrays of more than two "
                                           "dimensions (or with out=) is not supported yet; "
                                           "use np.matmul or np.einsum"))
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return a * b
    return matmul(a, b)


boxmethod("dot")(_dot)


# ---- einsum ------------------------------------------------------------------------------
def _parse(subscripts, n):
    """Explicit 'ij,jk->ik' form; implicit output is the sorted letters seen once."""
    subscripts = subscripts.replace(" ", "")
    if "." in subscripts:
        raise UnsupportedOperationError(at(user_loc(), "np.einsum with '...' is not "
                                           "supported yet; write the axes out"))
    ins, _, out = subscripts.partition("->")
    ins = ins.split(",")
    if len(ins) != n:
        raise ValueError(at(user_loc(), f"einsum subscripts {subscripts!r} name {len(ins)} "
                            f"operands but {n} were given"))
    if "->" not in subscripts:
        letters = "".join(ins)
        out = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    for term in ins:
        if len(set(term)) != len(term):
            raise UnsupportedOperationError(at(user_loc(), f"np.einsum with a repeated index "
                                               f"in one operand ({term!r}) is not supported yet"))
    return ins, out


def _einsum_vjp(i, g, ans, *operands, subscripts):
    ins, out = _parse(subscripts, len(operands))
    others = [t for j, t in enumerate(ins) if j != i]
    seen = set("".join(others) + out)
    keep = "".join(c for c in ins[i] if c in seen)
    spec = ",".join(others + [out]) + "->" + keep
    others_ops = [op for j, op in enumerate(operands) if j != i]
    r = einsum(*others_ops, g, subscripts=spec)
    if keep != ins[i]:  # letters summed within operand i alone: the cotangent is constant there
        shape = np.shape(operands[i])
        kept_shape = tuple(n if c in seen else 1 for c, n in zip(ins[i], shape))
        r = np.broadcast_to(np.reshape(r, kept_shape), shape)
    return r


einsum = defprimitive("einsum", lambda *ops, subscripts: np.einsum(subscripts, *ops),
                      "np.einsum({subscripts}, {*})", variadic_vjp=_einsum_vjp,
                      jvp_from="multilinear")


@register_function(np.einsum)
def _einsum(subscripts, *operands, out=None, optimize=False, **kwargs):
    if out is not None or kwargs or not isinstance(subscripts, str):
        raise UnsupportedOperationError(at(user_loc(), "np.einsum is supported with a "
                                           "subscripts string and operands only"))
    ins, out_ = _parse(subscripts, len(operands))
    return einsum(*operands, subscripts=",".join(ins) + "->" + out_)
