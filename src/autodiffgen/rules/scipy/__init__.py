"""SciPy's Python functions on traced values: logsumexp, softmax, the scipy.stats
distributions, signal.convolve, linalg.solve_triangular and sqrtm, integrate.odeint.

They convert their arguments with np.asarray, which a trace cannot follow, and NumPy does
not dispatch them to the tracer as it does ufuncs. So each has a traceable version here:
composed of traced NumPy and scipy.special calls where that reads as the math (stats,
logsumexp, softmax), or one primitive with its rules where SciPy's algorithm is the point
(convolve, solve_triangular, sqrtm), generated code calling SciPy's function.

How a call reaches it, as np.random's module functions do (numpy_api/random.py): while a
trace runs in any thread, `owner.name` (a module's function, or a method of an object such
as scipy.stats.norm) is replaced by a wrapper that calls the traceable version when the
calling thread is tracing and an argument holds a traced value, and SciPy's own function
otherwise; the last trace to end puts the originals back. A name bound before the trace
(`from scipy.special import logsumexp`) still holds the original: the capture hands the
traced code the wrapper instead (capture.STAND_INS). The function itself is a
library's, so a trace reads nothing through it: no input, no guard.
"""

import functools
import os
import sys

from ...trace.boxes import CONVERSION_HINTS, _holds_box
from ...trace.capture import add_stand_in
from ...trace.context import current_trace
from ...trace.swaps import Swaps
from ...trace.tracer import TRACE_HOOKS
from ..numpy_api.building import FOREIGN

SCIPY_FUNCTIONS = {}  # "scipy.special.logsumexp" -> "composed" or the primitive's name (docs)
_SWAPS = Swaps()


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


try:
    import scipy
except ImportError:  # SciPy is optional: nothing to intercept
    pass
else:
    from . import integrate, linalg, signal, special, stats  # noqa: F401  (each registers its own)

    _SCIPY_DIR = os.path.dirname(scipy.__file__)
    FOREIGN.append(_SCIPY_DIR)
    TRACE_HOOKS.append(_during_trace)
    CONVERSION_HINTS.append(_conversion_hint)
