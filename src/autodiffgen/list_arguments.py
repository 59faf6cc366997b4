"""The error for a Python list of traced values that NumPy converts item by item.

A list (or tuple) argument is a pytree: each float or array in it is traced, and its
gradient is a list of the same length, as in JAX. But a NumPy function that takes an
array, given the list itself (`np.exp(xs)`, `xs * 2.0` is fine, `np.sin(xs)` is not),
converts it before anything dispatches: each float through float(), each array through
__array__, which would cut the derivative off, so the tracer refuses. Its message would
speak of a traced value the user never converted; this hook (trace/boxes.READ_HINTS)
finds the list the value is an item of, among the parameters of the function on the
user's line, and says so: the argument's name, that it is a list of floats (or of arrays),
and what to write instead.
"""

import linecache
import re

import numpy as np

from .errors import user_frame
from .trace.boxes import READ_HINTS


def list_hint(box, what):
    """The message for `what` (float(), a conversion to an array) refused on `box`, when
    box is an item of a list or tuple parameter of the user's function that its current
    line hands over whole; None otherwise (the tracer's own message stands)."""
    frame = user_frame(2)
    if frame is None:
        return None
    code = frame.f_code
    for name in code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]:
        value = frame.f_locals.get(name)
        if type(value) in (list, tuple) and any(item is box for item in value) \
                and _read_whole(code, frame.f_lineno, name):
            return _message(what, name, value, box,
                            "f" if code.co_name == "<lambda>" else code.co_name)
    return None


def _read_whole(code, line, name):
    """Whether the user's line reads `name` itself (`np.sin(xs)`), not only items or
    attributes of it (`xs[0]`, `xs.count`); a line whose source is not at hand, yes."""
    text = linecache.getline(code.co_filename, line)
    return not text or re.search(rf"(?<![\w.]){re.escape(name)}\b(?!\s*[\[.(])", text) \
        is not None


def _message(what, name, items, box, function):
    kind = type(items).__name__
    values = [getattr(item, "value", item) for item in items]
    floats = all(isinstance(v, (float, int)) for v in values)
    noun = "float" if floats else "array" if all(np.ndim(v) for v in values) else "item"
    held = f"{len(items)} {noun}{'s' * (len(items) != 1)}"
    k = next(i for i, item in enumerate(items) if item is box)
    instead = (f"pass np.array({name}) as the argument (its gradient is then an array), or "
               f"write {name} = np.asarray({name}) at the top of {function} (traced: the "
               f"gradient stays a {kind})") if floats else \
        (f"stack it in the function, np.stack({name}) (traced), or compute on each array "
         f"({name}[0], ...)")
    return (f"{what} of {name}[{k}]: the argument {name!r} of {function} is a Python {kind} "
            f"of {held}, and a NumPy function given the {kind} itself converts it item by "
            f"item ({what}), which would carry no derivative. A {kind} is a pytree here "
            f"(each item is traced, and its gradient is a {kind}); to compute on it as an "
            f"array, {instead}")


READ_HINTS.append(list_hint)
