"""Static values -> Python expressions: parameters, scalars, dtypes, index items, small
constant arrays, and formulas in the batch size (`n`, `np.float32(0.5 / n)`); the
literals half of the emitter's `ast` (expressions.py fills templates with them)."""

import ast

import numpy as np

from ..graph import Index, Slot
from ..graph.size_formulas import Dim, Scale, is_count_var

_INLINE_LIMIT = 16  # constant arrays up to this size are written out as literals


def index_item(item, args, subscript):
    """One item of an index: an argument (a Slot), a slice, a bound."""
    if type(item) is Slot:
        return args[item.k]
    if type(item) is slice:
        bounds = [None if b is None else _bound(b, args)
                  for b in (item.start, item.stop, item.step)]
        if subscript:
            return ast.Slice(*bounds)
        if bounds[2] is None:  # slice(a, b); slice(b) only when a is None: slice(1) is [:1]
            bounds = bounds[1:2] if bounds[0] is None else bounds[:2]
        return call_ast("slice", [b or ast.Constant(None) for b in bounds])
    return _bound(item)


def _bound(value, args=()):
    """An index or slice bound: a number, a size in n (size_formulas.Dim), or an int the
    code computes (a Slot: X[i * bs:(i + 1) * bs] with i an input)."""
    if type(value) is Slot:
        return args[value.k]
    return symbol_ast(value) if type(value) is Dim else ast.Constant(value)


def call_ast(func, args, keywords=()):
    return ast.Call(_dotted(func), list(args), list(keywords))


def _dotted(path):
    parts = path.split(".")
    node = ast.Name(parts[0], ast.Load())
    for part in parts[1:]:
        node = ast.Attribute(node, part, ast.Load())
    return node


def dtype_ast(dtype):
    name = np.dtype(dtype).name
    return _dotted("np.bool_" if name == "bool" else f"np.{name}")


def literal_ast(value, args=()):
    """An expression for a static value: parameters and scalar constants."""
    if type(value) in (Dim, Scale):
        return symbol_ast(value)
    if type(value) is Index:
        items = [index_item(i, args, subscript=False) for i in value.items]
        return ast.Tuple(items, ast.Load())
    if isinstance(value, (np.dtype, type)) and value is not bool:
        return dtype_ast(value)
    if isinstance(value, tuple):
        return ast.Tuple([literal_ast(v, args) for v in value], ast.Load())
    if type(value) is list:  # item by item: a formula in it is code, not its repr
        return ast.List([literal_ast(v, args) for v in value], ast.Load())
    if isinstance(value, np.generic) and type(value.item()) is type(value):
        return _long_ast(value)
    if isinstance(value, np.generic):
        return call_ast(f"np.{value.dtype.name}" if value.dtype != np.bool_ else "np.bool_",
                        [literal_ast(_shortest(value))])
    if isinstance(value, float) and not np.isfinite(value):
        text = "np.nan" if np.isnan(value) else "np.inf"
        node = _dotted(text)
        return ast.UnaryOp(ast.USub(), node) if value < 0 else node
    return ast.Constant(value)


def _shortest(value):
    """value's Python number, with the fewest digits that give value back in its own
    dtype: np.float32(0.2) is written `np.float32(0.2)`, not with the digits of the float64
    nearest to it (`0.20000000298023224`), which name the same float32 only by rounding."""
    number = value.item()
    if value.dtype.kind == "c":
        short = complex(_shortest(value.real), _shortest(value.imag))
    elif value.dtype.kind == "f" and np.isfinite(value):
        short = float(str(value))  # NumPy's str: the shortest digits that round-trip
    else:
        return number
    return short if value.dtype.type(short) == value else number


def _long_ast(value):
    """np.longdouble (clongdouble): no Python number holds it; its shortest repr string,
    which NumPy parses at full precision, does (the complex one as re + im * 1j)."""
    if value.dtype.kind != "c":
        return call_ast(f"np.{value.dtype.name}", [ast.Constant(str(value))])
    return ast.BinOp(_long_ast(value.real), ast.Add(),
                     ast.BinOp(_long_ast(value.imag), ast.Mult(), ast.Constant(1j)))


# ---- constants --------------------------------------------------------------------------
def constant_ast(array, standalone):
    """How a module-level constant array is made, or None if it must be injected."""
    if array.ndim == 0:  # a NumPy scalar: the same type promotion as a 0-d array
        return literal_ast(array[()])
    dtype = dtype_ast(array.dtype)
    flat = array.ravel()
    if array.size == 0:  # np.array([]) would lose the shape: np.zeros((0, 3)) keeps it
        return call_ast("np.zeros", [literal_ast(array.shape)], [ast.keyword("dtype", dtype)])
    if (flat == flat[0]).all():
        fill = flat[0].item()
        if fill == 0 and not isinstance(fill, bool):
            return call_ast("np.zeros", [literal_ast(array.shape)], [ast.keyword("dtype", dtype)])
        return call_ast("np.full", [literal_ast(array.shape), literal_ast(fill)],
                     [ast.keyword("dtype", dtype)])
    if array.ndim == 1 and np.issubdtype(array.dtype, np.integer) \
            and (array == np.arange(array.size)).all():
        return call_ast("np.arange", [ast.Constant(array.size)], [ast.keyword("dtype", dtype)])
    if array.size <= _INLINE_LIMIT:
        return call_ast("np.array", [literal_ast_list(array.tolist())],
                        [ast.keyword("dtype", dtype)])
    if not standalone:
        return None
    data = np.ascontiguousarray(array).tobytes().hex()
    buf = call_ast("np.frombuffer", [call_ast("bytes.fromhex", [ast.Constant(data)])],
                [ast.keyword("dtype", dtype)])
    return call_ast("np.copy", [ast.Call(ast.Attribute(buf, "reshape", ast.Load()),
                                      [literal_ast(array.shape)], [])])


def literal_ast_list(value):
    if isinstance(value, list):
        return ast.List([literal_ast_list(v) for v in value], ast.Load())
    return literal_ast(value)


# ---- formulas in the batch size (size_formulas.py) ---------------------------------------------
def symbol_ast(value):
    """`n`, `2 * n - 1`, `-1.0 / n`, `np.float32(0.5 / n)`: a size or a scale in n."""
    n = ast.Name(value.var, ast.Load())
    if type(value) is Dim:
        tree = _times(value.a, n)
        if value.b:
            tree = ast.BinOp(tree, ast.Add() if value.b > 0 else ast.Sub(),
                             ast.Constant(abs(value.b)))
    elif value.power not in (1, -1) or value.power == 1 and (value.m, value.b) != (1, 0):
        tree = _powered_ast(value)
    elif value.power == -1 and is_count_var(value.var):  # a count may be 0: inf, as NumPy
        tree = call_ast("np.divide", [_signed(value.k), symbol_ast(value.count)])
    elif value.power == -1:
        tree = ast.BinOp(_signed(value.k), ast.Div(), symbol_ast(value.count))
    else:
        tree = call_ast("float", [n]) if value.k == 1 else ast.BinOp(_signed(value.k),
                                                                      ast.Mult(), n)
    return tree if value.cast is None else call_ast(f"np.{np.dtype(value.cast).name}", [tree])


def _powered_ast(value):
    """k * (m*n + b) ** p of a count (size_formulas._powered): `float(count + 1)`,
    `count ** 2`, `np.sqrt(count)`, `float(np.divide(1.0, count ** 2))`."""
    base = symbol_ast(Dim(value.m, value.b, var=value.var))
    if value.power in (0.5, -0.5):
        core = call_ast("np.sqrt", [base])
    elif abs(value.power) == 2:
        core = ast.BinOp(base, ast.Pow(), ast.Constant(2))
    else:
        core = base
    if value.power < 0:
        return call_ast("float", [call_ast("np.divide", [_signed(value.k), core])])
    if value.k != 1:
        return ast.BinOp(_signed(value.k), ast.Mult(), core)
    return call_ast("float", [core]) if type(value.k) is float else core


def _times(a, n):
    if a == 1:
        return n
    if a == -1:
        return ast.UnaryOp(ast.USub(), n)
    return ast.BinOp(ast.Constant(a), ast.Mult(), n)


def _signed(k):
    """A float literal, negative as `-1.0` rather than `(-1.0)`."""
    return ast.UnaryOp(ast.USub(), literal_ast(-k)) if k < 0 else literal_ast(k)


def symbolic_array_ast(array):
    """How generated code makes a size_formulas.SymArray: np.arange(n), np.full((n,), 1 / n)."""
    dtype = ast.keyword("dtype", dtype_ast(array.dtype))
    shape = literal_ast(array.shape)
    if array.kind == "arange":
        return call_ast("np.arange", [literal_ast(array.shape[0])], [dtype])
    fill = array.fill
    if type(fill) not in (Dim, Scale) and fill in (0, 1) and type(fill) is not bool:
        return call_ast("np.zeros" if fill == 0 else "np.ones", [shape], [dtype])
    return call_ast("np.full", [shape, literal_ast(fill)], [dtype])
