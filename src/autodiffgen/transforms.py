"""Forward mode, VJPs and vmap, each emitted as code and cached (the Jacobians and
Hessians built on them are jacobians.py's).

    jvp(f, primals, tangents) -> (out, tangent_out)   generated forward-mode code
    vjp(f, *primals) -> (out, vjp_fn)                 vjp_fn runs generated code
    hvp(f, primals, tangents)                         forward mode over the generated grad
    vmap(f, in_axes, out_axes)(*args)                 generated vectorized code (batched.py)

Higher derivatives need no rules of their own: generated code is ordinary NumPy, so when
an outer transformation calls it on its Boxes, the tracer records it like user code.
"""

import functools
import operator
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import pipeline, rules, tracebacks
from ._typing import Fun, PyTree
from .api import GradFunction, grad
from .backward import batched, forward
from .backward import reverse as backward
from .cache.view import kept_with
from .errors import ArgumentError, at, function_name
from .generalize import counts as generalize_counts
from .trace import boxes, context, tracer
from .trace.arguments import signature_text

_ELSEWHERE = weakref.WeakKeyDictionary()  # callables without a __dict__ of their own


def _cached(kind, fun, make):
    """fun's transformed version of this kind, made once and kept while fun lives.

    Kept with fun (cache/view.kept_with), so that `jvp(lambda ...)` in a loop does not
    keep every lambda and its generated code; bound methods and objects without a
    __dict__ of their own use a weak table."""
    return kept_with(fun, f"__autodiffgen_{kind}__", lambda: make(fun), _ELSEWHERE)


class _Transformed(GradFunction):
    """A GradFunction whose generated function takes extra inputs after the primals."""

    extra_prefix = "t_"

    def __init__(self, fun, has_aux=False):
        super().__init__(fun, argnums=0, has_aux=has_aux)
        self._diff[:] = [False] * len(self._diff)  # every float and int argument is an input

    def _check_argnums(self, nargs):
        return None

    def _arg_names(self, n):
        primals = super()._arg_names(self._n_primals(n))
        return primals + [self.extra_prefix + name for name in primals][:n - len(primals)]

    def request(self, args, standalone=False, pure=False, batch=True):
        """This transformation's part of the compile path (pipeline.Request) at `args`;
        mask counts are read at run time where they can be (generalize_counts.py), and
        no code serves other batch sizes (`batch` is grad's)."""
        return pipeline.Request(**{
            "fun": self.fun, "args": tuple(args), "names": self._arg_names(len(args)),
            "outputs": self._outputs, "standalone": standalone, "pure": pure,
            **self._own(args)})

    def _own(self, args):
        """The Request fields that are this transformation's own, for `args` (its `fun`
        too, when what is traced is not what the cache holds: a training step's loss)."""
        raise NotImplementedError


class JVPFunction(_Transformed):
    """f's forward mode: generated `f_jvp(*primals, *tangents) -> (out, tangent_out)`, or
    (out, tangent_out, aux) with has_aux (f returns (out, aux); no tangent for aux)."""

    def _n_primals(self, n):
        return n // 2

    def _own(self, args):
        n = len(args) // 2
        return {"argnums": tuple(i for i in range(n) if args[n + i] is not None),
                "strict": "auto", "has_aux": self.has_aux, "primals": _first_half}

    def _outputs(self, request, traced):
        """The tangents of the traced output along the tangent arguments (None: data,
        not moved), pushed forward by the rules' JVPs."""
        trace, boxed, out, names = traced.trace, traced.boxed, traced.out, traced.names
        n = len(traced.args) // 2
        primals, tangents = traced.args[:n], traced.args[n:]
        seeds = {}
        for i in range(n):
            if tangents[i] is None:
                continue
            t_boxed = tracer.box_inputs(trace, tangents[i], (n + i,), names[n + i])
            forward.pair_tangents(boxed[i], t_boxed, names[i], seeds)
        nodes = [node for node in trace.boxes if node.prim is not None]
        with trace:
            found, tangent_of = forward.tangents(trace, nodes, seeds, trace.boxes.__getitem__)
            t_out = backward.map_tree(out, lambda o: backward.or_zeros(found.get(o.node), o)
                                      if type(o) is boxes.Box
                                      else np.zeros(np.shape(o), np.result_type(o)))
        return backward.fused_graph(
            f"{function_name(self.fun)}_jvp", names, trace,
            (out, t_out, traced.aux) if self.has_aux else (out, t_out), kind="jvp",
            fresh_from=1, derivative_of=tangent_of,
            signature=signature_text(primals, names),
            doc=(f"Value of {function_name(self.fun)} and its directional derivative along "
                 "the tangents"))


def _first_half(args):
    """A jvp's primals: the arguments before the tangents."""
    return args[:len(args) // 2]


class VJPFunction(_Transformed):
    """f's reverse mode, as two generated functions: `f_fwd(*primals) -> (out, residuals)`
    computes the forward pass once and saves what the backward reads, and
    `f_bwd(residuals, g) -> cotangents` runs the backward for any output cotangent g."""

    def __init__(self, fun, wrt=None, has_aux=False):
        """`wrt`: the indices of the primals cotangents are returned for (default all);
        the others are plain inputs (a jacobian's data, whose float() may be read).
        `has_aux`: f returns (out, aux), and f_fwd returns aux too (no cotangent for it)."""
        super().__init__(fun, has_aux=has_aux)
        # ints now: an index an enclosing trace holds as an input is read (guarded) there
        self._wrt = wrt = None if wrt is None else tuple(map(operator.index, wrt))
        if wrt is not None:
            self._diff[:] = [i in wrt for i in range(len(self._diff))]  # the cache's too

    def _n_primals(self, n):
        return n

    def _arg_names(self, n):
        return super(_Transformed, self)._arg_names(n)

    def __call__(self, *primals):
        out, residuals, *aux, backward_fn = self._entry(primals)(*primals)

        def vjp_fn(g):
            """The cotangents for g, which has out's structure (checked here, at each call:
            the generated backward unpacks g as the trace saw it)."""
            return backward_fn(residuals, backward.cotangent_like(out, g, context.user_loc()))
        return (out, vjp_fn, *aux)  # aux: [] or [f's auxiliary values] (has_aux)

    def _load(self, source, namespace, name, locs):
        """The forward function, returning the backward function of its own variant too."""
        fwd = super()._load(source, namespace, name, locs)
        bwd = fwd.__globals__[fwd.__name__[:-len("_fwd")] + "_bwd"]

        def run(*primals):
            return (*fwd(*primals), bwd)
        return run

    def _own(self, primals):
        return {"argnums": self._wrt if self._wrt is not None else tuple(range(len(primals))),
                "strict": "auto", "has_aux": self.has_aux, "last": _counts_checked_first}

    def _outputs(self, request, traced):
        """Two graphs of one trace: the forward with the residuals its backward reads,
        and the backward for any output cotangent `g`."""
        trace, boxed, out, names = traced.trace, traced.boxed, traced.out, traced.names
        primals, argnums = traced.args, request.argnums
        backward.check_output_tree(out, self.fun)
        # g: any value of out's structure, shapes and dtypes; the generated backward reads
        # it as its argument `g` (g[0]["W"] for a pytree output), and vjp_fn checks that
        # each call's cotangent has that structure
        seed = tracer.box_inputs(trace, backward.seed_like(out), (len(primals),), "g")
        wrt = tuple(boxed[i] for i in argnums)
        grads, cotangent_of = backward.traced_gradients(trace, out, wrt, seed)
        traced_at = signature_text(primals, names)
        return backward.split_graphs(
            f"{function_name(self.fun)}", names, trace, out, tuple(grads), seed,
            fwd_fields={"doc": f"Value of {function_name(self.fun)} and the forward values "
                               "its backward pass reads", "signature": traced_at},
            bwd_fields={"doc": f"The cotangents of {function_name(self.fun)}'s arguments for "
                               "the output cotangent g", "signature": traced_at,
                        "derivative_of": cotangent_of, "fresh_from": 0},
            aux=traced.aux, has_aux=self.has_aux)


def _counts_checked_first(graphs):
    """A VJP's backward checks the mask counts it was made for before it runs (the
    forward, which computes them, checks its own)."""
    fwd, bwd = graphs
    return [fwd, generalize_counts.checked_before(bwd)]


class VmapFunction(_Transformed):
    """vmap(f): its generated `f_vmap(*args) -> (batched outputs,)`, cached by signature."""

    def __init__(self, fun, in_axes=0, out_axes=0):
        super().__init__(fun)
        # set after functools.update_wrapper copied fun's attributes (a vmap of a vmap: its
        # axes), and the cache made again: its disk key holds them
        self.in_axes, self.out_axes = in_axes, out_axes
        self._cache = self._view(self.max_entries, self.max_variants)

    def _disk_extra(self):
        return (repr(getattr(self, "in_axes", None)), repr(getattr(self, "out_axes", None)))

    def _n_primals(self, n):
        return n

    def _arg_names(self, n):
        return super(_Transformed, self)._arg_names(n)

    @tracebacks.boundary
    def __call__(self, *args, **kwargs):
        return super().__call__(*args, **kwargs)[0]

    def _own(self, args):
        """One example traced (each mapped argument without its batch axis), replayed on
        the batch (batched.py): every argument is an input, none differentiated."""
        return {"strict": False,
                "primals": functools.partial(batched.examples, names=self._arg_names(
                    len(args)), in_axes=self.in_axes)}

    def _outputs(self, request, traced):
        return batched.batched_outputs_graph(traced, self.in_axes, self.out_axes)


# ---- the public functions ----------------------------------------------------------------
@tracebacks.boundary
def jvp(fun: Fun, primals: Sequence[PyTree], tangents: Sequence[PyTree],
        has_aux: bool = False) -> tuple[PyTree, ...]:
    """(f(*primals), the derivative of f at primals along tangents), from generated code.

    `tangents` matches `primals` in structure; use None for an argument that has no
    tangent (integer labels, say). With has_aux=True, f returns (out, aux) and jvp
    returns (out, tangent_out, aux), as JAX."""
    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise ArgumentError(at(context.user_loc(), f"jvp got {len(primals)} primals but "
                               f"{len(tangents)} tangents"))
    return _cached("jvp_aux" if _flag(has_aux) else "jvp", fun,
                   lambda f: JVPFunction(f, has_aux))(*primals, *tangents)


@tracebacks.boundary
def vjp(fun: Fun, *primals: PyTree,
        has_aux: bool = False) -> tuple[Any, ...]:
    """(f(*primals), vjp_fn) where vjp_fn(g) returns one cotangent per primal (None for
    integer arguments). Both come from generated code; the forward runs once, and vjp_fn
    reads the values it saved, so (as in JAX) do not modify the primals in place between
    the two calls. With has_aux=True, f returns (out, aux): (out, vjp_fn, aux), as JAX."""
    if _flag(has_aux):
        return _cached("vjp_aux", fun, lambda f: VJPFunction(f, has_aux=True))(*primals)
    return _cached("vjp", fun, VJPFunction)(*primals)


def _flag(has_aux):
    if type(has_aux) is not bool and not isinstance(has_aux, np.bool_):
        raise ArgumentError(at(context.user_loc(), f"has_aux must be True or False, got "
                               f"{has_aux!r}"))
    return bool(has_aux)


@tracebacks.boundary
def hvp(fun: Fun, primals: Sequence[PyTree], tangents: Sequence[PyTree]) -> PyTree:
    """Hessian-vector product: forward mode over the generated gradient of `fun` with
    respect to its first argument."""
    return jvp(_grad_of(fun, 0), primals, tangents)[1]


def _grad_of(fun, argnums, has_aux=False):
    """grad(fun): (gradient, aux) with has_aux, which a Jacobian with has_aux takes."""
    return _cached(f"grad_{argnums}{'_aux' if has_aux else ''}", fun,
                   lambda f: grad(f, argnums=argnums, has_aux=has_aux))


@tracebacks.boundary
def vmap(fun: Fun, in_axes: int | None | tuple[Any, ...] = 0,
         out_axes: int | None | tuple[Any, ...] = 0) -> "VmapFunction":
    """fun mapped over a batch axis of its arguments, as one generated vectorized function.

    `in_axes`: an int (the batch axis of every argument; negative counts from the end),
    None (not mapped: shared by every example), or a tuple with one entry per positional
    argument, each an int, None or a pytree prefix of that argument. `out_axes`: likewise
    for the output (an output that does not depend on the batch is repeated along it).
    All mapped axes must have the same size. Composes with grad, jvp, vjp, jacobian and
    itself: vmap(grad(loss), in_axes=(None, 0, 0))(w, X, y) gives per-example gradients."""
    return VmapFunction(fun, in_axes, out_axes)


rules.TRANSFORMS.update(vjp=vjp, jvp=jvp)  # for odeint's dynamics (rules/scipy/integrate.py)
