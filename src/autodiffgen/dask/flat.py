"""The loss as the workers see it: a function of arrays and numbers, one per argument.

A worker runs generated NumPy code and nothing of the user's: no autodiffgen, no module
of theirs. So the client differentiates the loss as a function of each leaf of the small
arguments (the parameters, as dicts, dataclasses, registered pytrees...) as a positional
argument of its own: its traces call the user's function itself (FlatGrad's Request.call,
so what it reads besides its arguments is captured as in memory) on arguments rebuilt
from the leaves on the client, and return the loss (and with has_aux, the aux values'
leaves as a tuple). The generated module then reads and returns arrays and numbers only:
a worker never needs a user's class, by reference or by value, and adds gradients as
tuples. The client puts the user's structures back (`grads`, `aux`).
"""

import dataclasses
import functools
import inspect
import re

from ..api import GradFunction
from ..backward.reverse import split_aux
from ..trace.arguments import Differentiated, single
from ..trace.context import current_trace
from ..tree import is_container, items, leaves, map_tree, step_text


class Flat:
    """The flat form of one call's arguments: `args` in the user's order, `batch` the
    positions of the chunked ones, `argnums` the differentiated positions (normalized)."""

    def __init__(self, fun, names, args, batch, argnums, has_aux):
        self.like = list(args)  # the small arguments' structures (the chunks stay whole)
        self.sizes = [1 if i in batch else len(leaves(a)) for i, a in enumerate(args)]
        self.starts = [sum(self.sizes[:i]) for i in range(len(args))]
        self.batch = [self.starts[i] for i in batch]
        self.user_argnums = argnums
        self.argnums = tuple(k for i in argnums for k in self._span(i))
        self.has_aux = has_aux
        self.aux_like = None  # the aux values' structure, from the last call of `fun`
        self.names = _unique([n for i, name in enumerate(names) for n in (
            [name] if i in batch else _leaf_names(args[i], name))])
        self.user_fun = fun
        self.fun = self._flat_fun(fun)  # for eager calls: the decomposition check

    def _span(self, i):
        return range(self.starts[i], self.starts[i] + self.sizes[i])

    def args(self, args):
        """The flat arguments of a call with this structure (its leaves, in order)."""
        flat = []
        for i, arg in enumerate(args):
            flat += [arg] if self.starts[i] in self.batch else leaves(arg)
        return flat

    def unflat(self, flat):
        """The user's arguments from the flat ones."""
        return [flat[self.starts[i]] if self.starts[i] in self.batch else
                _refilled(like, flat[self.starts[i]:self.starts[i] + self.sizes[i]])
                for i, like in enumerate(self.like)]

    def grads(self, flat_grads):
        """The gradients in the user's structure: one tree per argument in argnums, bare
        when argnums was an int."""
        flat_grads, k, out = list(flat_grads), 0, []
        for i in self.user_argnums:
            out.append(_refilled(self.like[i], flat_grads[k:k + self.sizes[i]]))
            k += self.sizes[i]
        return out[0] if single(self.user_argnums) else tuple(out)

    def aux(self, flat_aux):
        """The aux values in the structure the loss returned them."""
        return _refilled(self.aux_like, list(flat_aux))

    def aux_paths(self):
        """How the user would write each aux leaf: aux['acc'], aux[0], aux.count."""
        return [f"aux{path}" for path in _paths(self.aux_like)]

    def call(self, run, flat_args):
        """How a trace calls the user's function (`run`, as the trace sees it: a clone)
        on the flat Boxes: its dataclass and registered-type arguments seen as the tracer
        shows them (capture's pytree_argument: their methods are clones too)."""
        args = self.unflat(flat_args)
        recording = current_trace()
        if recording is not None and recording.capture is not None:
            args = [recording.capture.pytree_argument(a) for a in args]
        return self._flat_out(run(*args))

    def _flat_out(self, out):
        if not self.has_aux:
            return out
        value, self.aux_like = split_aux(out, self.user_fun)  # its errors name the loss
        return value, tuple(leaves(self.aux_like))

    def _flat_fun(self, fun):
        @functools.wraps(fun)
        def flat(*flat_args):
            return self._flat_out(fun(*self.unflat(flat_args)))
        flat.__signature__ = inspect.Signature(
            [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in self.names])
        return flat


class FlatGrad(GradFunction):
    """value_and_grad of Flat.fun (its names and argnums) whose traces call the user's
    function itself, through Flat.call: what it reads besides its arguments (a global
    number, an attribute, a method's globals) is captured as for the in-memory grad."""

    def __init__(self, flat, has_aux):
        super().__init__(flat.fun, flat.argnums, has_aux=has_aux)
        self.flat = flat

    def request(self, args, standalone=False, pure=False, batch=True):
        request = super().request(args, standalone, pure, batch)
        return dataclasses.replace(request, fun=self.flat.user_fun, call=self.flat.call)


class Calls(Differentiated):
    """How the user calls the loss: keywords and defaults bound to positions as the
    in-memory grad binds them (the same errors), the parameters' names, argnums."""

    def bound(self, args, kwargs):
        args = tuple(self._positional(args, kwargs))
        return args, self._arg_names(len(args))


def _refilled(like, parts):
    it = iter(parts)
    return map_tree(like, lambda _: next(it))


def _paths(tree, path=""):
    if not is_container(tree):
        yield path
        return
    for key, child in items(tree):
        yield from _paths(child, path + step_text(key))


def _leaf_names(arg, name):
    """The in-memory trace's names of an argument's leaves: p_w for p["w"]."""
    if not is_container(arg):
        return [name]
    return [n for key, child in items(arg) for n in _leaf_names(child, f"{name}_{key}")]


def _unique(names):
    """Identifiers, each once (p_w_1 after p_w)."""
    out, taken = [], set()
    for name in names:
        base = re.sub(r"\W", "_", name)
        base = base if base[:1].isalpha() or base[:1] == "_" else f"_{base}"
        name, k = base, 0
        while name in taken:
            k += 1
            name = f"{base}_{k}"
        taken.add(name)
        out.append(name)
    return out
