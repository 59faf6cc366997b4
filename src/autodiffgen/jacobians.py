"""Jacobians and Hessians of any function, JAX's structures: built on the generated JVP,
VJP and vmap (transforms.py), with no code generation of their own.

    jacfwd(f)(*args)     forward mode: one vmapped JVP over the basis tangents
    jacobian(f)(*args)   reverse mode (jacrev): one VJP call per output element
    hessian(f)(*args)    the Jacobian of the generated grad (a scalar f), or of the
                         Jacobian (a function returning more than one number)

For a pytree output and pytree arguments (or a tuple argnums), as JAX: the output's
structure holding, at each leaf, the arguments' structure of blocks of shape
out_leaf.shape + argument_leaf.shape.
"""

import numpy as np

from . import tracebacks
from ._typing import ArgNums, Fun
from .api import ARGNUMS, spelled
from .errors import ArgumentError, OutputError, at, function_name
from .trace import arguments, boxes, context
from .trace.arguments import single
from .transforms import VJPFunction, _cached, _flag, _grad_of, jvp, vmap
from .tree import leaves, map_tree


@tracebacks.boundary
def jacfwd(fun: Fun, argnums: ArgNums = ARGNUMS, has_aux: bool = False, *,
           argnum: ArgNums | None = None) -> Fun:
    """The Jacobian by forward mode: every input element's tangent pushed forward by one
    generated function, the JVP mapped over a batch of basis tangents (vmap, as JAX's
    jacfwd), so fun runs once: a random draw in it is drawn once, as in eager NumPy.

    For a pytree output and pytree arguments (or a tuple `argnums`), as JAX: the output's
    structure holding, at each leaf, the arguments' structure of blocks of shape
    out_leaf.shape + argument_leaf.shape. With has_aux=True, f returns (out, aux) and the
    Jacobian function returns (jacobian, aux). `argnum=`: Autograd's spelling of argnums."""
    indices = arguments.normalize_argnums(spelled(argnums, argnum), fun)  # now: an int read
    # from a trace
    has_aux = _flag(has_aux)

    @tracebacks.boundary
    def jacobian_fn(*args):
        xs = _jacobian_arguments(args, indices)
        x_leaves = leaves(xs)
        sizes = [int(np.size(_plain(x))) for x in x_leaves]
        if not sum(sizes):  # no element at all: the output's structure from a zero tangent
            out, _, *aux = jvp(fun, args, _tangents(args, indices, xs, None, None), has_aux)
            columns = [None] * len(x_leaves)
        else:
            push = _cached(f"jacfwd_{len(args)}_{tuple(indices)}_{has_aux}", fun,
                           lambda f: _pushforward(f, len(args), indices, has_aux))
            out, t_out, *aux = push(*args, *_basis_tangents(args, indices, xs, sizes))
            starts = np.cumsum([0, *sizes])
            columns = [[t[starts[i]:starts[i + 1]] for t in leaves(t_out)]
                       for i in range(len(x_leaves))]
        out_leaves = _jacobian_outputs(out, fun)
        blocks = [[_columns_block(columns[i] and columns[i][j], o, x)
                   for i, x in enumerate(x_leaves)] for j, o in enumerate(out_leaves)]
        return (_nest(out, xs, blocks), *aux) if has_aux else _nest(out, xs, blocks)
    return jacobian_fn


def _pushforward(fun, n, indices, has_aux):
    """vmap of fun's JVP over the tangents of `indices` (the other arguments shared):
    (out, the tangents of out stacked on axis 0[, aux])."""
    def pushed(*args_and_tangents):
        args, tangents = args_and_tangents[:n], list(args_and_tangents[n:])
        full = [None] * n
        for position, index in enumerate(indices):
            full[index] = tangents[position]
        return jvp(fun, args, full, has_aux)
    pushed.__name__ = pushed.__qualname__ = f"{function_name(fun)}_pushforward"
    in_axes = (None,) * n + (0,) * len(indices)
    return vmap(pushed, in_axes=in_axes, out_axes=(None, 0, None) if has_aux else (None, 0))


def _basis_tangents(args, indices, xs, sizes):
    """Every basis tangent of xs at once: per argument of `indices`, its structure with
    each leaf stacked over all of xs's elements (row r one at element r, counted across
    xs's leaves in order)."""
    total, starts = sum(sizes), np.cumsum([0, *sizes])
    counter = iter(range(len(sizes)))

    def stacked(x):
        i, value = next(counter), _plain(x)
        rows = np.zeros((total, *np.shape(value)), dtype=boxes.result_dtype(value))
        rows.reshape(total, -1)[starts[i]:starts[i + 1]] = np.eye(sizes[i], dtype=rows.dtype)
        return rows
    basis = map_tree(xs, stacked)
    return [basis] if single(indices) else list(basis)


def _columns_block(stacked, o, x):
    """The Jacobian block of output leaf o and argument leaf x from the tangents of o
    for x's elements, stacked on axis 0."""
    shape = np.shape(_plain(o)) + np.shape(_plain(x))
    if stacked is None or not np.size(stacked):
        return np.zeros(shape, np.result_type(boxes.result_dtype(_plain(o)),
                                              boxes.result_dtype(_plain(x))))
    return np.reshape(np.moveaxis(stacked, 0, -1), shape)


@tracebacks.boundary
def jacobian(fun: Fun, argnums: ArgNums = ARGNUMS, has_aux: bool = False, *,
             argnum: ArgNums | None = None) -> Fun:
    """The Jacobian by reverse mode (jacrev): one generated-VJP call per output element;
    pytrees, has_aux and argnum= as in jacfwd."""
    indices = arguments.normalize_argnums(spelled(argnums, argnum), fun)  # now: an int read
    # from a trace
    has_aux = _flag(has_aux)

    @tracebacks.boundary
    def jacobian_fn(*args):
        xs = _jacobian_arguments(args, indices)
        # a VJP with respect to those arguments alone: the others are data
        vjp_of = _cached(f"vjp_{indices[0] if single(indices) else indices}"
                         f"{'_aux' if has_aux else ''}", fun,
                         lambda f: VJPFunction(f, tuple(indices), has_aux))
        out, vjp_fn, *aux = vjp_of(*args)
        out_leaves = _jacobian_outputs(out, fun)
        x_leaves = leaves(xs)
        blocks = []
        for j, o in enumerate(out_leaves):
            rows = []
            for k in range(np.size(_plain(o))):
                rows.append(_row(vjp_fn, out, j, k, single(indices)))
            blocks.append([_block([r[i] for r in rows], o, x, 0)
                           for i, x in enumerate(x_leaves)])
        return (_nest(out, xs, blocks), *aux) if has_aux else _nest(out, xs, blocks)
    return jacobian_fn


def _row(vjp_fn, out, j, k, single_argument):
    """Row k of output leaf j's Jacobian, one part per argument leaf. For a complex output
    (of real arguments), the cotangent 1j * e gives the row's imaginary part, negated
    (complex_numbers.py)."""
    def pull(e):
        cotangents = vjp_fn(e)
        return leaves(cotangents[0] if single_argument else cotangents)
    e = _one_hot(out, j, k)
    row = pull(e)
    if np.iscomplexobj(_plain(leaves(out)[j])):
        row = [r - 1j * i for r, i in zip(row, pull(map_tree(e, lambda c: 1j * c)))]
    return row


def _jacobian_arguments(args, indices):
    """The pytree a Jacobian is taken with respect to (one argument, or the tuple of
    several), every leaf of which must be a float. `indices` is normalized when the
    Jacobian is made: an argnums an enclosing trace reads as an input (a default of a
    function it traces) is read, and guarded, in that trace, not in a later inner one."""
    for i in indices:
        if not 0 <= i < len(args):
            raise ArgumentError(at(context.user_loc(), f"argnums={i} is out of range: the "
                                   f"function got {len(args)} positional argument(s)"))
        for leaf in leaves(args[i]):
            value = _plain(leaf)
            if not (isinstance(value, (np.ndarray, np.generic, float))
                    and np.issubdtype(np.result_type(value), np.floating)):
                raise ArgumentError(at(context.user_loc(), f"the Jacobian is taken with "
                                       f"respect to argument {i}, whose every leaf must be a "
                                       f"float or a floating-point array, not "
                                       f"{type(value).__name__} {getattr(value, 'dtype', '')}"))
    return args[indices[0]] if single(indices) else tuple(args[i] for i in indices)


def _jacobian_outputs(out, fun):
    """The output's leaves: floats or floating-point (or complex) arrays (a Jacobian of an
    integer output, as in JAX, is refused rather than made zeros)."""
    found = leaves(out)
    for leaf in found:
        if not np.issubdtype(boxes.result_dtype(_plain(leaf)), np.inexact):
            raise OutputError(at(context.user_loc(), f"the Jacobian of "
                                 f"{function_name(fun)} needs floating-point outputs, but "
                                 f"one is {type(_plain(leaf)).__name__} of dtype "
                                 f"{boxes.result_dtype(_plain(leaf))}"))
    return found


def _tangents(args, indices, xs, i, k):
    """jvp's tangents: element k of the i-th leaf of xs one, every other leaf of xs zero,
    None for the other arguments (all zeros if i is None)."""
    counter = iter(range(len(leaves(xs))))
    basis = map_tree(xs, lambda x: _basis(x, k) if next(counter) == i else _basis(x, None))
    tangents = [None] * len(args)
    for n, index in enumerate(indices):
        tangents[index] = basis if single(indices) else basis[n]
    return tangents


def _one_hot(out, j, k):
    """A cotangent of out's structure: element k of its j-th leaf one, the rest zeros."""
    counter = iter(range(len(leaves(out))))
    return map_tree(out, lambda o: _basis(o, k if next(counter) == j else None))


def _block(parts, o, x, axis):
    """The Jacobian block of one output leaf o and one argument leaf x, from its rows
    (axis 0, reverse mode) or columns (axis -1, forward mode)."""
    shape = np.shape(_plain(o)) + np.shape(_plain(x))
    if not parts:
        return np.zeros(shape, np.result_type(boxes.result_dtype(_plain(o)),
                                              boxes.result_dtype(_plain(x))))
    return np.reshape(np.stack(parts, axis=axis), shape)


def _nest(out, xs, blocks):
    """The output's structure, holding at its j-th leaf xs's structure of blocks[j]."""
    counter = iter(blocks)

    def per_output(_):
        row = iter(next(counter))
        return map_tree(xs, lambda _: next(row))
    return map_tree(out, per_output)


def _plain(x):
    return x.value if type(x) is boxes.Box else x


jacrev = jacobian


@tracebacks.boundary
def hessian(fun: Fun, argnums: ArgNums = ARGNUMS, has_aux: bool = False, *,
            argnum: ArgNums | None = None) -> Fun:
    """The Hessian: for a scalar function, the reverse-mode Jacobian of its generated grad.
    With a tuple argnums or pytree arguments, as JAX: the arguments' structure holding
    the arguments' structure of blocks. A function returning more than one number (an
    array, a pytree) gets the Jacobian of its Jacobian, as JAX's: at each output leaf,
    blocks of shape out_leaf.shape + x_i.shape + x_j.shape. has_aux=True: (hessian,
    aux), as JAX. `argnum=`: Autograd's spelling of argnums."""
    indices = arguments.normalize_argnums(spelled(argnums, argnum), fun)
    argnums = indices[0] if single(indices) else indices
    has_aux = _flag(has_aux)
    of_grad = jacobian(_grad_of(fun, argnums, has_aux), argnums, has_aux)
    of_jacobian = []  # once grad has refused fun's output: the Jacobian of its Jacobian

    @tracebacks.boundary
    def hessian_fn(*args):
        if not of_jacobian:
            try:
                return of_grad(*args)
            except OutputError:  # not one number: the output's own Jacobian, or its error
                of_jacobian.append(jacobian(jacobian(fun, argnums, has_aux), argnums,
                                            has_aux))
        return of_jacobian[0](*args)
    return hessian_fn


def _basis(like, k):
    """Zeros like `like` (a Box's value for a Box), with element k one (k None: none)."""
    value = _plain(like)
    e = np.zeros(np.shape(value), dtype=boxes.result_dtype(value))
    if k is not None:
        e.reshape(-1)[k] = 1
    return e
