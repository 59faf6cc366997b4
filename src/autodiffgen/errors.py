"""Exceptions that speak the user's language.

Every error raised while tracing names the user's file and line (the innermost frame
outside autodiffgen and NumPy), what went wrong, and what to do about it. They subclass
the built-in exception a NumPy user would expect, so `except TypeError` still works.
"""

import os
import random
import sys

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_RANDOM_PY = random.__file__  # random.Random(seed) seeds in there (rules/pyrandom.py)
_NUMPY_DIR = None


def _numpy_dir():
    global _NUMPY_DIR
    if _NUMPY_DIR is None:
        import numpy

        _NUMPY_DIR = os.path.dirname(os.path.abspath(numpy.__file__))
    return _NUMPY_DIR


def is_internal(filename):
    """True for frames of autodiffgen, NumPy's Python layer, frozen stdlib modules (runpy,
    importlib) and Python's random module, none of which is the user's line."""
    return filename.startswith((_PACKAGE_DIR, _numpy_dir(), "<frozen ")) or \
        filename == _RANDOM_PY


def user_frame(depth=1):
    """The innermost frame that belongs to the user's code, or None."""
    frame = sys._getframe(depth)
    while frame is not None and is_internal(frame.f_code.co_filename):
        frame = frame.f_back
    return frame


def where(frame=None):
    """'file.py:LINE' for a frame (default: the user's innermost frame)."""
    frame = frame if frame is not None else user_frame(2)
    if frame is None:
        return "<unknown location>"
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"


def def_site(fun):
    """(file, line) where `fun` was defined, for errors about the function as a whole."""
    code = getattr(fun, "__code__", None)
    return (code.co_filename, code.co_firstlineno) if code else "<unknown location>"


def function_name(fun):
    """The name messages and generated code call `fun` by; a lambda is "f"."""
    name = getattr(fun, "__name__", "f")
    return "f" if name == "<lambda>" else name


class AutodiffgenError(Exception):
    """Base class of every error autodiffgen raises on purpose."""


RAISED = []  # [hook(error)]: trace/recording.py notes a refusal made while a trace runs


class Refusal(AutodiffgenError):
    """What the tracer cannot record: if the user's code catches it (`except Exception:`),
    the trace would take a path eager NumPy does not, so the trace notes each one."""

    def __init__(self, *args):
        super().__init__(*args)
        for hook in RAISED:
            hook(self)


class TracingError(Refusal, TypeError):
    """The traced function did something the tracer cannot record faithfully."""


class UnsupportedOperationError(Refusal, NotImplementedError):
    """A NumPy function or ufunc has no primitive or derivative rule."""


class UnsupportedAttributeError(AutodiffgenError, AttributeError):
    """An ndarray attribute or method that traced values do not offer."""


class OutputError(AutodiffgenError, TypeError):
    """The differentiated function returned something grad cannot differentiate."""


class ArgumentError(AutodiffgenError, ValueError):
    """argnums or an argument's type does not fit the differentiated function."""


class GuardError(AutodiffgenError, RuntimeError):
    """A data-dependent guard kept failing: the function is traced too many times."""


def at(loc, message):
    """Prefix a message with a location given as (filename, lineno) or a string."""
    if isinstance(loc, tuple):
        loc = f"{os.path.basename(loc[0])}:{loc[1]}"
    return f"{loc}: {message}"
