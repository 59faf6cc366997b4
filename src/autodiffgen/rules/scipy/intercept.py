"""How a call of one of SciPy's Python functions on traced values reaches its traceable
version (see the package's docstring): the swaps made while a trace runs, the functions'
labels for the docs, and the hint given where SciPy converts a traced value."""

import functools
import sys

from ...trace.boxes import CONVERSION_HINTS, _holds_box
from ...trace.capture import add_stand_in
from ...trace.context import current_trace
from ...trace.swaps import Swaps
from ...trace.tracer import TRACE_HOOKS
from ..numpy_api.building import FOREIGN

SCIPY_FUNCTIONS = {}  # "scipy.special.logsumexp" -> "composed" or the primitive's name (docs)
_SWAPS = Swaps()
_SCIPY_DIR = None  # SciPy's own files (install)


def register(owner, name, traceable, label, kind="composed", always=False):
    """Calls of `owner.name` on traced values run `traceable` (see module doc); with
    `always`, every call made while tracing (odeint: a traced value may hide in its
    function's closure). `label` is the function as the user writes it
    (`scipy.stats.norm.pdf`), for the docs."""
    original = getattr(owner, name)
    wrapper = _wrapper(original, traceable, always)
    _SWAPS.add(owner, name, wrapper)
    add_stand_in(original, wrapper)
    SCIPY_FUNCTIONS[label] = kind


def _wrapper(original, traceable, always):
    @functools.wraps(original)
    def intercepted(*args, **kwargs):
        if current_trace() is not None and (always or _holds_box(args) or _holds_box(
                tuple(kwargs.values()))):
            return traceable(*args, **kwargs)
        return original(*args, **kwargs)
    return intercepted


def _during_trace(trace):
    return _SWAPS.held()


def _conversion_hint():
    """Where np.asarray refused a traced value inside SciPy: the SciPy function the user
    called (the outermost SciPy frame) and the user's line, instead of SciPy's own file."""
    frame, outer = sys._getframe(2), None
    while frame is not None:
        if frame.f_code.co_filename.startswith(_SCIPY_DIR):
            outer = frame
        elif outer is not None:
            break
        frame = frame.f_back
    if outer is None or frame is None:
        return None
    module = ".".join(p for p in outer.f_globals.get("__name__", "scipy").split(".")
                      if not p.startswith("_"))
    owner = outer.f_locals.get("self")
    if getattr(owner, "name", None) and module == "scipy.stats":  # a distribution's method
        module = f"scipy.stats.{owner.name}"
    name = f"{module}.{outer.f_code.co_name}"
    if name in SCIPY_FUNCTIONS:
        message = (f"{name} was called through a name bound before the trace (`from ... "
                   "import`), which a standalone module's trace cannot replace by its "
                   f"traced version: call it as {name}(...)")
    else:
        message = (f"{name} converts its arguments to plain arrays, and has no derivative "
                   "rule in autodiffgen: compute it outside the function or on values that "
                   "are not traced (docs/coverage.md lists the SciPy functions that have one)")
    return (frame.f_code.co_filename, frame.f_lineno), message


def install(scipy_dir):
    """Intercept calls once SciPy's rules are registered; `scipy_dir`: SciPy's own files,
    whose frames a conversion hint looks past."""
    global _SCIPY_DIR
    _SCIPY_DIR = scipy_dir
    FOREIGN.append(scipy_dir)
    TRACE_HOOKS.append(_during_trace)
    CONVERSION_HINTS.append(_conversion_hint)
