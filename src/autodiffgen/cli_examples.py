"""Example-argument specs: the shapes and dtypes `autodiffgen emit` traces a function at.

Generated code depends only on each argument's structure, shape and dtype (and on the
values of non-array arguments), so a file can declare these instead of shipping data:

    @value_and_grad(argnums=(0, 1), example=dict(
        W="f32[784,10]", b="f32[10]", x="f32[128,784]", y="i64[128]<10"))

    f32[784,10]   float32 array of that shape, seeded uniform values in [0.5, 1.5),
                  so log, sqrt and division are safe while tracing
    f64[]         a 0-d float64 array
    i64[128]<10   int64 values in [0, 10), e.g. class labels (without `<N`: zeros)
    2.0, 3, None  a plain Python value (not a string): a static or differentiated scalar
    "2.0"         a string that is not an array spec is read as a Python literal; this is
                  how `--arg lr=0.1` arrives, and `"'relu'"` gives the string 'relu'
    dict / list   of specs: a pytree argument, e.g. params=dict(W1="f32[784,256]", ...)

Dtypes: f16 f32 f64 i8 i16 i32 i64 u8 bool. Values depend only on the spec and the
argument's name, so the same file always emits the same code.
"""

import ast
import re
import zlib
from dataclasses import dataclass

import numpy as np

DTYPES = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i8": np.int8,
          "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8, "bool": np.bool_}
_ARRAY = re.compile(r"(\w+)\s*\[(.*)\]\s*(?:<\s*(.*))?")
_LOOKS_LIKE_ARRAY = re.compile(r"[a-z]+\d*\s*\[")
GRAMMAR = (f"DTYPE[d0,d1,...] with DTYPE one of {' '.join(DTYPES)} (integers may end in <N), "
           "or a Python literal such as 2.0, 3 or None")


class SpecError(ValueError):
    """A spec that does not follow the grammar; the message names the argument."""


@dataclass(frozen=True)
class ArraySpec:
    """An array to make up: dtype, shape, and for integers an exclusive upper bound."""

    dtype: type
    shape: tuple
    high: int | None = None

    def make(self, rng):
        if np.issubdtype(self.dtype, np.floating):
            return np.asarray(rng.uniform(0.5, 1.5, self.shape), dtype=self.dtype)
        if self.high is not None:
            return np.asarray(rng.integers(0, self.high, self.shape, dtype=self.dtype))
        return np.zeros(self.shape, dtype=self.dtype)


def parse(spec, where):
    """A tree of ArraySpecs and plain values; `where` names the argument in errors."""
    if isinstance(spec, str):
        return _parse_text(spec.strip(), where)
    if isinstance(spec, dict):
        return {k: parse(v, f"{where}[{k!r}]") for k, v in spec.items()}
    if isinstance(spec, (list, tuple)):
        return type(spec)(parse(v, f"{where}[{i}]") for i, v in enumerate(spec))
    if spec is None or isinstance(spec, (bool, int, float, complex, np.ndarray)):
        return spec
    raise SpecError(f"the spec of {where} has type {type(spec).__name__}; expected {GRAMMAR}")


def _parse_text(text, where):
    match = _ARRAY.fullmatch(text)
    if match and match.group(1) in DTYPES:
        return _array_spec(text, where, *match.groups())
    if _LOOKS_LIKE_ARRAY.match(text):
        why = f"unknown dtype {match.group(1)!r}" if match else "not an array spec"
        raise SpecError(f"bad spec {text!r} for {where}: {why}; expected {GRAMMAR}")
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise SpecError(f"bad spec {text!r} for {where}: expected {GRAMMAR} "
                        "(write a string as \"'text'\")") from None
    return value if isinstance(value, str) else parse(value, where)


def _array_spec(text, where, dtype_name, dims, high):
    def bad(why):
        return SpecError(f"bad spec {text!r} for {where}: {why}")
    dims = [d.strip() for d in dims.split(",")] if dims.strip() else []
    if not all(d.isdigit() for d in dims):
        raise bad("dimensions must be non-negative integers, e.g. f32[128,10]")
    dtype = DTYPES[dtype_name]
    if high is not None:
        if not np.issubdtype(dtype, np.integer):
            raise bad("<N (values in [0, N)) is only for integer dtypes")
        if not high.strip().isdigit() or not 0 < int(high) <= np.iinfo(dtype).max + 1:
            raise bad(f"<N needs an integer N from 1 to {np.iinfo(dtype).max + 1}")
        high = int(high)
    return ArraySpec(dtype, tuple(int(d) for d in dims), high)


def make(tree, name):
    """Concrete values for a parsed spec, seeded by the argument's name and path."""
    if isinstance(tree, ArraySpec):
        return tree.make(np.random.default_rng(zlib.crc32(name.encode())))
    if isinstance(tree, dict):
        return {k: make(v, f"{name}.{k}") for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(make(v, f"{name}.{i}") for i, v in enumerate(tree))
    return tree


def example_value(spec, name):
    """The value to trace argument `name` at, from its declared or command-line spec."""
    return make(parse(spec, name), name)


_SPEC_NAMES = {np.dtype(t): name for name, t in DTYPES.items()}


def spec_text(value):
    """A value in spec notation, for headers and messages: 'f32[128,784]', '{W: f32[3,2]}'.

    Not arguments.signature_text, which writes the signature in a generated function's docstring
    ('W: float32[128, 784]', containers by length): one function would change one text."""
    if isinstance(value, np.ndarray):
        dtype = _SPEC_NAMES.get(value.dtype, value.dtype.name)
        return f"{dtype}[{','.join(map(str, value.shape))}]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {spec_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        items = ", ".join(spec_text(v) for v in value)
        return f"[{items}]" if isinstance(value, list) else f"({items})"
    return repr(value)
