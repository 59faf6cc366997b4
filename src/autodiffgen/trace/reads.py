"""Where a value read from outside lives, and how the generated code checks it again.

A `Read` names a place: a holder (a module's globals, a closure cell, an object, a
function's defaults) and a chain of `.attr` / `[key]` steps. The generated code reads an
input again from its Read at each call (`follow`, written out with `chain_text`), and a
`Check` is a guard on a Read: the same object, an equal value, the same contents
(`snapshot` now, `same_contents` then). What counts as the user's code (whose functions
are cloned and whose objects are seen through proxies) is decided here too.

Contract: plain data and predicates, no trace state; the capture (capture.py) makes
Reads, the emitter and the disk cache read them. Upstream: errors only.
"""

import sys
import types
from dataclasses import dataclass

import numpy as np

from ..errors import is_internal

INPUT_NUMBERS = (float, complex, np.floating, np.complexfloating)
_INT64 = 2**63
_LIBRARIES = {"numpy", "autodiffgen", "scipy", "astor", "numexpr", "pytest", "_pytest",
              "hypothesis", "builtins"}
_ARRAY_LIKE = ("__array__", "__array_ufunc__", "__array_function__", "__array_interface__")


@dataclass(frozen=True, eq=False)
class Read:
    """Where a value lives: `holder` followed by `chain`, a tuple of ("attr", name) and
    ("item", key) steps (a cell's value is its "cell_contents" attribute)."""

    holder: object
    chain: tuple
    where: str = ""  # the file of the code that reads it, for messages
    var: str = ""  # a closure variable's name (a cell has none)

    def then(self, kind, key):
        return Read(self.holder, self.chain + ((kind, key),), self.where, self.var)

    def follow(self):
        return follow(self.holder, self.chain)

    @property
    def key(self):
        return (id(self.holder), self.chain)

    @property
    def label(self):
        """`config.scale`, `PARAMS['W']`, `k` (a closure variable): as the user wrote it."""
        steps = self.chain
        text = ""
        if steps and steps[0] == ("attr", "cell_contents"):
            steps = steps[1:]
            text = self.var or "a closure variable"
        elif steps and steps[0][0] == "item" and is_globals(self.holder):
            text, steps = str(steps[0][1]), steps[1:]
        else:
            text = getattr(self.holder, "__name__", type(self.holder).__name__)
        return text + chain_text(steps)

    @property
    def name(self):
        """A variable name for the value in generated code."""
        for _, key in reversed(self.chain):
            if type(key) is str and key.isidentifier() and not key.startswith("_") \
                    and key != "cell_contents":
                return key
        return self.var if self.var.isidentifier() else "captured"


@dataclass(frozen=True, eq=False)
class Check:
    """A guard on a read: `test` is "is" (the same object) or "==" (an equal value)."""

    read: Read
    test: str
    value: object



def is_input(value):
    """Whether a value read from outside is an input of the generated code: an array, a
    float, an int (Python's within int64, or NumPy's; not a bool)."""
    kind = type(value)
    return kind is np.ndarray or isinstance(value, INPUT_NUMBERS) or kind is int and \
        -_INT64 <= value < _INT64 or isinstance(value, np.integer)


def snapshot(value):
    """A private copy of a value's contents, for `same_contents`: arrays and containers
    are copied; other objects are kept (compared by identity)."""
    kind = type(value)
    if kind is np.ndarray:
        return value.copy()
    if kind is dict:
        return {k: snapshot(v) for k, v in value.items()}
    if kind in (list, tuple):
        return kind(map(snapshot, value))
    return value


def same_contents(value, kept):
    """Whether `value` holds what `kept` (a `snapshot`) held: what generated code checks
    for a value it keeps as a constant (np.asarray(W) of a global, a big global table)."""
    kind = type(kept)
    if type(value) is not kind:
        return False
    if kind is np.ndarray or kind in (float, complex) or isinstance(kept, np.generic):
        value, kept = np.asarray(value), np.asarray(kept)  # NaN equals NaN here
        return value.shape == kept.shape and value.dtype == kept.dtype and bool(
            np.array_equal(value, kept, equal_nan=kept.dtype.kind in "fc"))
    if kind is dict:
        return value.keys() == kept.keys() and all(
            same_contents(value[k], v) for k, v in kept.items())
    if kind in (list, tuple):
        return len(value) == len(kept) and all(map(same_contents, value, kept))
    if kind in (int, str, bytes, bool):
        return value == kept
    return value is kept


def is_module_global(read):
    """Whether `read` is a module global itself (not an attribute or entry of one)."""
    return read is not None and len(read.chain) == 1 and is_globals(read.holder)


def follow(holder, chain):
    value = holder
    for kind, key in chain:
        value = getattr(value, key) if kind == "attr" else value.get(key) if kind == "get" \
            else value[key]
    return value


def chain_text(chain):
    """`.scale`, `['W']`, `.get('HOME')`: the steps as Python writes them."""
    return "".join(f".{key}" if kind == "attr" else f".get({key!r})" if kind == "get"
                   else f"[{key!r}]" for kind, key in chain)


def is_globals(holder):
    return type(holder) is dict and "__name__" in holder and "__builtins__" in holder


def writable(key):
    """Whether a key can be written out as a literal in the generated code."""
    return type(key) in (str, int, bool) or key is None or (
        type(key) is tuple and all(map(writable, key)))


def user_module(name):
    if not name:
        return False
    top = name.partition(".")[0]
    if top in _LIBRARIES or top in getattr(sys, "stdlib_module_names", ()):
        return False
    module = sys.modules.get(top)
    file = getattr(module, "__file__", None) or ""
    return "site-packages" not in file and "dist-packages" not in file


def user_function(fn):
    code = fn.__code__
    return not is_internal(code.co_filename) and not code.co_filename.startswith(
        "<autodiffgen-") and (fn.__module__ is None or user_module(fn.__module__) or
                              fn.__module__ == "__main__")


def user_object(value):
    """An instance of a class of the user's (or a namespace of settings), unless it is an
    array-like that NumPy dispatches on: seen through a proxy, it would not be."""
    kind = type(value)
    if any(hasattr(kind, name) for name in _ARRAY_LIKE):
        return False
    return kind.__module__ == "__main__" or user_module(kind.__module__) or \
        kind.__name__ == "Namespace" and kind.__module__ == "argparse" or \
        kind is types.SimpleNamespace


