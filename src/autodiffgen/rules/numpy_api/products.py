"""np.einsum, np.tensordot, np.dot (and x.dot), np.inner, np.vdot and np.outer on traced
values: einsums or matmuls (rules/products.py). einsum's subscripts are made explicit
here ('...' spelled out with unused letters, the implicit output written after '->'), so
the primitive and its rules see one form only.
"""

import operator
import string

import numpy as np

from ...errors import UnsupportedOperationError, at
from ...trace.context import user_loc
from ..complex_numbers import is_complex
from ..elementwise import conj
from ..products import einsum, matmul, split_subscripts, unused_letters
from .dispatch import boxmethod, check_no_out, register_function


def _explicit(subscripts, operands):
    """'...ij,...jk' -> 'abij,bjk->abik': ellipses spelled out with unused letters
    (right-aligned, as NumPy broadcasts them) and the implicit output made explicit."""
    subscripts = subscripts.replace(" ", "")
    ins, out = split_subscripts(subscripts)
    if len(ins) != len(operands):
        raise ValueError(at(user_loc(), f"einsum subscripts {subscripts!r} name {len(ins)} "
                            f"operands but {len(operands)} were given"))
    fresh = unused_letters(subscripts)
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


def _sublist_letters(sublist):
    """[0, 1, Ellipsis] -> 'ab...': NumPy's letters for axis numbers (0-25 a-z, 26-51 A-Z)."""
    letters = string.ascii_lowercase + string.ascii_uppercase
    try:
        return "".join("..." if s is Ellipsis else letters[operator.index(s)] for s in sublist)
    except (TypeError, IndexError):
        raise ValueError(at(user_loc(), f"einsum sublist {sublist!r}: each entry must be an "
                            "int in [0, 52) or Ellipsis")) from None


def _from_sublists(args):
    """einsum(a, [0, 1], b, [1, 2], [0, 2]) -> ('ab,bc->ac', (a, b))."""
    operands, sublists = args[0::2], args[1::2]
    output = None
    if len(args) % 2:  # a trailing output sublist
        operands, output = operands[:-1], args[-1]
    subscripts = ",".join(map(_sublist_letters, sublists))
    if output is not None:
        subscripts += "->" + _sublist_letters(output)
    return subscripts, operands


@register_function(np.einsum)
def _einsum(subscripts, *operands, out=None, optimize=False, **kwargs):
    if out is not None or kwargs:
        raise UnsupportedOperationError(at(user_loc(), "np.einsum with out= or keyword "
                                           "arguments other than optimize= is not supported "
                                           "on traced values"))
    if not isinstance(subscripts, str):  # the sublist form
        subscripts, operands = _from_sublists((subscripts, *operands))
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
    """The first argument conjugated, as NumPy does."""
    if is_complex(a):
        a = conj(a)
    return einsum(np.reshape(a, (-1,)), np.reshape(b, (-1,)), subscripts="i,i->", optimize=True)


@register_function(np.outer)
def _outer(a, b, out=None):
    check_no_out(out, "np.outer")
    return einsum(np.reshape(a, (-1,)), np.reshape(b, (-1,)), subscripts="i,j->ij")
