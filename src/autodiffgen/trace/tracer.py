"""trace(): run the user's function once on Boxes and return what it recorded.

The stage's entry point (pipeline.compile and the tape call it): the arguments become
Boxes (inputs of the recording) or stay constants, the function runs on them (on clones
that read its globals, closures and objects through the capture, capture.py), and what
it returns, raises or writes is checked. The pieces, upstream first: context (the
current recording, the user's lines), boxes (traced values), recording (Trace, bind),
dispatch (NumPy's protocols), capture (what it reads besides its arguments).

Contract: returns (Trace, boxed arguments, output); raises the user's error, or an
autodiffgen error naming the user's line. Nothing here knows a primitive.
"""

import contextlib

import numpy as np

from .. import errors
from ..errors import ArgumentError, OutputError, TracingError, at, def_site, function_name
from ..tree import is_container, items, leaves, map_tree, rebuild
from . import (
    argument_writes,
    dispatch,  # noqa: F401  (it sets NumPy's protocols on Box)
    raising,
)
from .boxes import Box, Handle, result_dtype, stand_in, stored_scalar
from .capture import Capture
from .context import user_loc
from .executed import user_code
from .recording import INPUT_KINDS, Trace

TRACE_HOOKS = []  # hook(trace) -> a context manager around the user's call (numpy_api.random)
_runs = [0]  # how many times trace() has run a function (`runs`)


def runs():
    """How many times `trace` has run a function so far, in this process: what a first call
    costs in traces is the difference around it (generalizing traces again at other
    sizes and counts)."""
    return _runs[0]


def trace(fun, args, argnums, names, diff=True, capture=True, eager=False, static=(),
          call=None):
    """Call `fun` on Boxes: every array argument, every Python float, and every Python int
    outside `argnums` becomes an input of the recording (a number that decides control
    flow or a shape is read through a guard), except for the argument indices in `static`,
    whose numbers are constants; with `capture`, so does every array and float it reads
    from globals, closures and objects (capture.py). Returns the Trace, the boxed
    arguments and the output.

    `diff` says how strict `argnums` is: True (grad) refuses integer leaves there;
    "auto" (jvp, vjp) leaves them alone, so only the floating-point leaves get derivatives.
    `eager` (the tape): the recording's values are the ones the user gets. `call(run,
    boxed)` calls the function (as the trace sees it: `run`) on the boxed arguments when
    it takes not all of them (a training step: loss(params, *batch)).
    """
    _runs[0] += 1
    recording = Trace()
    recording.eager = eager
    recording.fun = fun
    try:
        with recording, contextlib.ExitStack() as hooks:
            if capture:  # a standalone module keeps what it read as constants
                recording.capture = Capture(recording)
            for hook in TRACE_HOOKS:
                hooks.enter_context(hook(recording))
            boxed = [_box_tree(recording, a, (i,), names[i], diff if i in argnums else
                               None if i in static else False) for i, a in enumerate(args)]
            run = recording.capture.enter(fun) if capture else fun
            own = map_tree(boxed, _own_box)
            if capture:  # `self`, a config object, a partial: read through like a global
                own = map_tree(own, lambda x: x if type(x) in (Box, Handle) else
                               recording.capture.argument(x, fun))
                own = [recording.capture.pytree_argument(a) for a in own]
            recording.own = [b for b in leaves(own) if type(b) is Box]  # for count_sources.observe
            containers = argument_writes.snapshot(own)
            with user_code():  # the disk cache notes which functions run (executed.py)
                try:
                    out = run(*own) if call is None else call(run, own)
                except ValueError as error:
                    stored = stored_scalar(error)
                    if stored is None:
                        raise
                    raise stored from error
            out = map_tree(out, stand_in)
            if capture:
                recording.capture.finish(fun)
            recording.writes = [(path, map_tree(value, stand_in)) for path, value in
                                argument_writes.writes(containers, def_site(fun))]
    except BaseException as error:  # its capture's clones read it back: a cycle that would
        if recording.capture is not None:  # hold the failed trace's nodes until a collection
            recording.capture.trace = None
        if recording.refused and isinstance(error, Exception) and \
                not isinstance(error, errors.AutodiffgenError):  # a refusal NumPy turned
            raise recording.refused.pop(0) from error  # into its own (np.zeros(drawn k))
        raise
    _check_output(recording, fun, out)
    return recording, boxed, out


raising.STOPS.add(trace.__code__)


def _check_output(recording, fun, out):
    """Refuse what the trace cannot stand by: a refusal the function caught, no output,
    or an output an enclosing transformation traced."""
    if recording.refused:  # raised, and caught by the user's code: not eager's path
        first = recording.refused[0]
        raise TracingError(f"{first} [this error was raised while tracing "
                           f"{function_name(fun)} and caught by its own code (an `except` "
                           "around it): the trace would take a path eager NumPy does not. "
                           "Narrow the `except`, or keep the operation out of the `try`]"
                           ) from first
    if out is None:  # np.result_type(None) is float64: the gradient would be zeros
        raise OutputError(at(def_site(fun), f"{function_name(fun)} returned None: it has no "
                             "`return`, or a path through it ends without one; return the "
                             "value to differentiate"))
    if type(out) is Box and out.node.trace_id != recording.id:
        raise TracingError(at(user_loc(), "the function returned a value traced by an "
                              "enclosing transformation (through a closure); pass that value "
                              "to it as an argument instead"))


def _own_box(x):
    """The user's function gets Boxes of its own: a write into an argument (x[i] = v,
    x += v) rebinds that Box, while `boxed` keeps the inputs derivatives are taken of."""
    return Box(x.value, x.node) if type(x) is Box else x


def box_inputs(recording, tree, path, name):
    """Make every array (and float) leaf of `tree` an input of the recording."""
    return _box_tree(recording, tree, path, name, "auto")


def unbox(tree):
    """The concrete values of a tree that may hold Boxes of an enclosing trace (a Python
    float stays an input of the inner trace: it becomes a 0-d NumPy float)."""
    return map_tree(tree, _unbox_leaf)


def _unbox_leaf(x):
    x = stand_in(x)
    if type(x) is Handle:
        return x.value
    if type(x) is not Box:
        return x
    if type(x.value) is complex:
        return np.complex128(x.value)
    return np.float64(x.value) if type(x.value) is float else x.value


def is_number_input(x, diff):
    """Whether a Python number is an input of the generated code: a float or a complex
    always, an int outside grad's argnums (not a bool, and not past int64, which NumPy
    could not hold); under jvp and vjp ("auto") an int is an input with no tangent."""
    kind = type(x)
    if diff is None:  # a static argument (cache.entries: a number made static)
        return False
    return kind is float or kind is complex or \
        kind is int and diff in (False, "auto") and -2**63 <= x < 2**63


def _box_tree(recording, x, path, name, diff):
    x = stand_in(x)  # np.zeros(n) made in an enclosing trace: a plain array, or its Box
    kind = type(x)
    if (kind is int or kind is float or kind is complex) and is_number_input(x, diff):
        box = recording.new_input(x, name, path)
        if diff and kind is not int:  # an int under jvp or vjp ("auto"): an input, no tangent
            recording.wrt.add(box.node)
        return box
    if kind is np.ndarray or isinstance(x, np.generic):
        if diff is True and not np.issubdtype(result_dtype(x), np.inexact):
            raise _argument_error(
                f"argument {name!r} is under argnums but has dtype {result_dtype(x)}: only "
                "floating-point and complex arrays have gradients. Remove it from argnums "
                "or convert it with .astype(np.float64)")
        if result_dtype(x) == object:  # its arithmetic is on Python objects: no float
            raise _argument_error(  # dtype, so no derivative would reach it, silently
                f"argument {name!r} is an array of dtype object, which generated code does "
                "not support: convert it with .astype(np.float64)")
        box = recording.new_input(x, name, path)
        if diff:
            recording.wrt.add(box.node)
        return box
    if kind in INPUT_KINDS:
        return INPUT_KINDS[kind](recording, x, name, path)
    if isinstance(x, np.ndarray):
        raise _argument_error(f"argument {name!r} is a {kind.__name__}, an ndarray subclass; "
                              "pass np.asarray(...) of it")
    if diff is True and kind in (int, bool):
        raise _argument_error(
            f"argument {name!r} is under argnums but is a Python {kind.__name__} ({x!r}): "
            "only floats and floating-point arrays have gradients. Pass a float (e.g. 2.0) "
            "or remove it from argnums")
    if is_container(x):
        return rebuild(x, [_box_tree(recording, child, path + (key,), f"{name}_{key}", diff)
                           for key, child in items(x)])
    if diff is True and x is None and len(path) > 1:  # p = {"b": None}: failing where used
        keys = "".join(f"[{k!r}]" for k in path[1:])
        raise _argument_error(
            f"argument {name!r} (entry {keys} of argument {path[0]}) is under argnums but is "
            "None: every leaf of a differentiated argument must be a float or a "
            "floating-point array. Leave the entry out, or pass it in an argument outside "
            "argnums")
    if diff is True and len(path) == 1:  # None, a string: NumPy would fail on it, unnamed
        raise _argument_error(
            f"argument {name!r} is under argnums but is {_short(x)}, not a float or a "
            "floating-point array: pass one, or remove it from argnums" + (
                " (on a method, argnums count self as 0: @grad(argnums=1) differentiates "
                "the first argument after self)" if name == "self" else ""))
    return x


def _short(x):
    """None, 'a string', or 'a Model instance' (no memory address in messages)."""
    if x is None or type(x) in (str, bytes):
        return repr(x)
    return f"a {type(x).__name__} instance"


def _argument_error(message):
    return ArgumentError(at(user_loc(), message))
