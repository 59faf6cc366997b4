"""Einsums as matmuls: each einsum of two or more operands (np.einsum, np.tensordot,
np.inner and the einsums the rules' backward makes) rewritten to the steps
contraction.plan finds cheapest: transposes and reshapes (views where the layout allows),
one np.matmul per pairwise contraction, a sum of demoted axes. np.einsum's own loops do
not call BLAS unless asked to (optimize=True), and when asked they copy both operands
into tensordot's layout; here the layout is chosen so that most operands need no copy.

The plan depends on the operands' shapes only, and is right at every size (a size
chooses among right plans), so a graph generalized over the batch size stays right at
sizes it was not traced at. An einsum a guard reads is left as traced: summed in another
order, its value could differ in the last bit from the one the guard compares with.
"""

import numpy as np

from ..graph import Node, op, users_of
from ..rules import PRIMITIVES
from ..rules.products import split_subscripts
from ..trace.boxes import result_dtype
from ..tree import leaves
from .contraction import BLAS_DTYPES, plan
from .rewrite import clone, guard_reads, substitute


def contract(graph):
    replace = {}
    consumed = guard_reads(graph)
    users = None  # made at the first transpose: most graphs' nodes are neither kind
    outputs = {o for o in leaves(graph.outputs) if type(o) is Node}
    touched = set()  # one swap per chain of products a round: each reads the graph as it is
    for node in graph.nodes:
        kind = op(node)
        if kind == "transpose":
            users = users_of(graph.nodes) if users is None else users
            swapped = _swapped_product(node, users, outputs, consumed | touched)
            if swapped is not None:
                replace[node] = swapped
                touched.update(a for a in (node, node.args[0], *node.args[0].args)
                               if type(a) is Node)
        if kind != "einsum" or len(node.args) < 2 or node in consumed \
                or node.dtype not in BLAS_DTYPES \
                or any(_dtype(a) != node.dtype for a in node.args):
            continue
        ins, out = split_subscripts(node.params["subscripts"])
        found = plan(ins, out, [_shape(a) for a in node.args])
        if found is not None:
            replace[node] = _lowered(node, *found)
    return substitute(graph, replace)


def _dtype(x):
    return x.dtype if type(x) is Node else result_dtype(x)


def _shape(x):
    return x.shape if type(x) is Node else np.shape(x)


def _lowered(node, steps, final):
    """The nodes of the plan, the last one standing for `node`."""
    kinds = [pair.kind for _, _, pair in steps]
    note = f"einsum {node.params['subscripts']!r} as " + " and ".join(
        f"{kinds.count(k)} {k}" for k in ("matmul", "multiply", "einsum") if k in kinds)

    def make(name, args, params, shape):
        return node.replace(prim=PRIMITIVES[name], args=tuple(args), params=params,
                            shape=tuple(shape), name=None, note=note)

    operands = list(node.args)
    for i, j, pair in steps:
        a, b = operands[i], operands[j]
        for k in sorted((i, j), reverse=True):
            del operands[k]
        operands.append(_pair(make, pair, _summed(make, a, pair.summed[0]),
                              _summed(make, b, pair.summed[1])))
    last = operands[0]
    if final is not None:
        last = make("transpose", (last,), {"axes": None if final == (1, 0) else final},
                    tuple(last.shape[k] for k in final))
    return last.replace(name=node.name)


def _summed(make, x, axes):
    if not axes:
        return x
    shape = tuple(n for k, n in enumerate(_shape(x)) if k not in axes)
    return make("sum", (x,), {"axis": axes, "keepdims": False, "dtype": None}, shape)


def _pair(make, pair, a, b):
    if pair.kind == "einsum":
        return make("einsum", (a, b), {"subscripts": pair.subscripts, "optimize": False},
                    pair.shape)
    if pair.swap:
        a, b = b, a
    left, right = _entered(make, a, pair.left), _entered(make, b, pair.right)
    if pair.kind == "multiply":
        return make("multiply", (left, right), {}, pair.shape)
    product = make("matmul", (left, right), {}, _matmul_shape(_shape(left), _shape(right)))
    if product.shape != pair.shape:
        product = make("reshape", (product,), {"shape": pair.shape}, pair.shape)
    if pair.demoted:
        product = _summed(make, product, pair.demoted)
    return product


def _entered(make, x, how):
    """An operand as the matmul reads it: transposed, reshaped, copied (contraction.Operand)."""
    if how.perm is not None:
        x = make("transpose", (x,), {"axes": None if how.perm == (1, 0) else how.perm},
                 tuple(_shape(x)[k] for k in how.perm))
    if how.shape is not None:
        x = make("reshape", (x,), {"shape": how.shape}, how.shape)
    if how.copy:
        x = make("copy", (x,), {}, _shape(x))
    if how.flip:
        shape = _shape(x)
        x = make("transpose", (x,), {"axes": _last_two_swapped(len(shape))},
                 shape[:-2] + shape[:-3:-1])
    return x


def _matmul_shape(a, b):
    if len(a) == 1 and len(b) == 1:
        return ()
    if len(a) == 1:
        return b[:-2] + b[-1:]
    if len(b) == 1:
        return a[:-1]
    return np.broadcast_shapes(a[:-2], b[:-2]) + (a[-2], b[-1])


# ---- a product transposed: (a @ b).T = b.T @ a.T --------------------------------------------
def _swapped_product(node, users, outputs, consumed):
    """`np.transpose(a @ b, (0, 2, 1))` (the gradient of `k` in `q @ k.T` comes so) as
    `b.T @ a.T`: the product is made in the layout it is read in, and a reshape of it
    after is a view, not a copy. Only when nothing else reads `a @ b`."""
    if op(node) != "transpose" or not _swaps(node) or node in consumed or node.note:
        return None  # (a contraction's own transpose: its plan has weighed the other way)
    product = node.args[0]
    if op(product) != "matmul" or product in outputs or len(users.get(product, ())) != 1 \
            or any(len(_shape(x)) < 2 or type(x) is Node and x in consumed
                   for x in product.args) \
            or product in consumed:
        return None
    a, b = (_transposed(node, x) for x in product.args)
    return clone(node, (b, a), PRIMITIVES["matmul"], {})


def _swaps(node):
    """A transpose that swaps the last two axes (and no other)."""
    n, axes = len(node.shape), node.params["axes"]
    return n >= 2 and (axes is None and n == 2 or axes is not None and
                       tuple(axes) == (*range(n - 2), n - 1, n - 2))


def _last_two_swapped(ndim):
    """np.transpose's axes that swap the last two of `ndim` axes (None for a matrix: .T)."""
    return None if ndim == 2 else (*range(ndim - 2), ndim - 1, ndim - 2)


def _transposed(like, x):
    """x with its last two axes swapped: the array x transposes, if it is such a transpose."""
    if op(x) == "transpose" and _swaps(x):
        return x.args[0]
    shape = _shape(x)
    return like.replace(prim=PRIMITIVES["transpose"], args=(x,),
                        params={"axes": _last_two_swapped(len(shape))},
                        shape=shape[:-2] + shape[:-3:-1], dtype=_dtype(x), name=None)
