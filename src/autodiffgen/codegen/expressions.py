"""Graph pieces -> Python expressions: the `ast` half of the emitter.

Each primitive's template (e.g. "np.sum({0})") is parsed into an expression whose
placeholders are filled with argument and parameter expressions; static values
(parameters, scalars, dtypes, small constant arrays) become literals. `render` turns any
of these into source: the one place that calls astor. `wrap` and `docstring` keep the
lines it makes within 100 characters.
"""

import ast
import bisect
import copy
import functools
import io
import math
import re
import textwrap
import threading
import tokenize
import warnings

import numpy as np

from ..graph import Index, Slot
from ..graph.size_formulas import Dim, Scale, is_count_var
from ..trace.raising import PARSE_LOCK
from .scalar import SCALAR

_INLINE_LIMIT = 16  # constant arrays up to this size are written out as literals


_RENDER_LOCK = threading.Lock()


def render(tree):
    """Python source for an AST node. The one place that calls astor.

    catch_warnings saves and restores the process-wide filters: two threads inside it at
    once would restore each other's state and leave DeprecationWarnings silenced for
    good, hence the lock."""
    names = []
    key = _layout(tree, names)
    with _RENDER_LOCK:
        rendered = _RENDERED.setdefault((_astor_source, unparse), {})  # per renderer
        pieces = rendered.get(key)
        if pieces is None:
            pieces = _render_layout(tree)
            if type(pieces) is not str or not names:  # the text alone: for this tree only
                if len(rendered) >= _RENDERED_LIMIT:
                    rendered.clear()
                rendered[key] = pieces
    if type(pieces) is str:
        return pieces
    return filled_text(*pieces, names)


def filled_text(text, slots, names):
    """A layout's text with its names put in: text[0], names[slots[0]], text[1], ..."""
    parts = [text[0]]
    for k, slot in enumerate(slots):
        parts.append(names[slot])
        parts.append(text[k + 1])
    return "".join(parts)


# Rendering is most of emission, and most statements differ from an earlier one only in
# their variable names (`h_3 = np.tanh(a_3)`): each layout (the tree with its names left
# out) is rendered once, with stand-in names, and the text is reused with the names put in.
# A name is an atom wherever it stands, so the text around it does not depend on it.
_RENDERED = {}
_RENDERED_LIMIT = 1 << 14
_INT_MARK = 9182736450  # an int stand-in's digits: _INT_MARK, the slot in six digits, 9
_STAND_IN = re.compile(rf"_adg_name_(\d+)_|\b{_INT_MARK}(\d{{6}})9\b")


def _layout(node, names):
    """A hashable key of the tree as it renders, but for its names, which go to `names`
    (in the order _names finds them)."""
    kind = node.__class__
    if kind is ast.Name:  # its context is its place's: a target stores
        names.append(node.id)
        return kind
    if kind is ast.Constant:  # 1, 1.0 and True are equal keys: the type tells them apart
        value = node.value
        if value.__class__ is int and value >= 0:  # a size or an index (`x[123]`): its
            names.append(repr(value))               # digits, as a name's, in a slot
            return _INT
        return kind, value.__class__, repr(value), node.kind
    if kind is list:
        return (list, *[_layout(item, names) for item in node])
    fields = _FIELDS.get(kind)
    if fields is None:
        fields = _FIELDS[kind] = getattr(kind, "_fields", False)
    if fields is False:  # a field's plain value: a name's string, an int, None
        return kind, repr(node)
    if not fields:  # an operator or a context
        return kind
    key = [kind]
    get = node.__dict__.get  # a field not set (a Name without its ctx) is None
    for field in fields:  # the commonest fields inline: a name, a context, a string
        value = get(field)
        of = value.__class__
        if of is ast.Name:
            names.append(value.id)
            key.append(of)
        elif of is str:  # an attribute's or keyword's name: no other key is a str
            key.append(value)
        elif _FIELDS.get(of) == ():
            key.append(of)
        else:
            key.append(_layout(value, names))
    return tuple(key)


_FIELDS = {}  # class -> its _fields (() for an operator or a context), False: no ast node
_INT = "int"  # the layout of a non-negative int constant, whose digits fill a slot


def _names(node, found):
    """The Name nodes of a tree and its non-negative int constants, in the order _layout
    visits them."""
    if type(node) is ast.Name or type(node) is ast.Constant and \
            node.value.__class__ is int and node.value >= 0:
        found.append(node)
    elif isinstance(node, ast.AST):
        for field in node._fields:
            _names(getattr(node, field, None), found)
    elif type(node) is list:
        for item in node:
            _names(item, found)
    return found


def _render_layout(tree):
    """(text pieces, the name between each two) of the tree rendered with stand-ins for its
    names; the text itself when it has no names, or shows a stand-in where no name was."""
    found = _names(tree, [])
    if not found:
        return _source(tree)
    # an int's stand-in is an int (so written as any non-negative int is, `(7).real` too)
    field = ["id" if type(n) is ast.Name else "value" for n in found]
    originals = [getattr(n, f) for n, f in zip(found, field)]
    try:
        for k, (n, f) in enumerate(zip(found, field)):
            setattr(n, f, f"_adg_name_{k}_" if f == "id" else int(f"{_INT_MARK}{k:06d}9"))
        text = _source(tree)
    finally:
        for n, f, original in zip(found, field, originals):
            setattr(n, f, original)
    pieces = _STAND_IN.split(text)
    slots = [int(a if a is not None else b) for a, b in zip(pieces[1::3], pieces[2::3])]
    if sorted(slots) != list(range(len(found))):  # a stand-in in a string, or a name twice
        return _source(tree)
    return pieces[0::3], slots


def _source(tree):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            return _astor_source(tree)
        except AttributeError:  # astor predates the running Python's ast (ast.Num: 3.14)
            return unparse(tree)


def _astor_source(tree):
    import astor
    # "".join: one statement stays on one line, however long
    return astor.to_source(tree, pretty_source="".join).rstrip("\n")


def unparse(tree):
    """The source astor writes, from ast.unparse: for Pythons astor cannot read.

    The emitter builds nodes without positions, and ast.unparse looks up a type-ignore
    comment by each statement's line number (AttributeError: no lineno), so a copy gets
    them. Two habits of astor's are kept so that either way gives the same text: a number
    that is complex, infinite or NaN is written as astor spells it (`-1.0j`, `(1.0+2.0j)`,
    `1e1000`), and an operator expression rendered alone comes in parentheses."""
    alone = _parenthesized_alone(tree)
    tree = _AstorNumbers().visit(ast.fix_missing_locations(copy.deepcopy(tree)))
    text = ast.unparse(ast.fix_missing_locations(tree))
    return f"({text})" if alone else text


def _parenthesized_alone(tree):
    """astor writes an operator expression or a number alone as `(...)`."""
    if isinstance(tree, ast.BinOp | ast.UnaryOp | ast.BoolOp | ast.Compare | ast.IfExp):
        return True
    return _is_number(tree)


def _is_number(node):
    return isinstance(node, ast.Constant) and isinstance(node.value, int | float | complex)


class _AstorNumbers(ast.NodeTransformer):
    """Complex, infinite and NaN constants -> names spelled as astor writes the number;
    a number whose attribute is read goes in parentheses, `(1.5).real`, as astor puts it."""

    def visit_Attribute(self, node):
        if _is_number(node.value):
            spelled = f"({_astor_number(node.value.value)})"
            node.value = ast.copy_location(ast.Name(spelled, ast.Load()), node.value)
            return node
        return self.generic_visit(node)

    def visit_Constant(self, node):
        value = node.value
        if isinstance(value, complex) or (type(value) is float and not np.isfinite(value)):
            return ast.copy_location(ast.Name(_astor_number(value), ast.Load()), node)
        return node


def _astor_number(value):
    if type(value) is not float and not isinstance(value, complex):
        return repr(value)
    if not isinstance(value, complex):
        return _astor_part(value, "")
    imag = _astor_part(value.imag, "j")
    if value.real == 0:
        return imag
    if value.imag == 0:
        return f"({_astor_part(value.real, '')}+0j)"
    return f"({_astor_part(value.real, '')}{'' if imag.startswith('-') else '+'}{imag})"


def _astor_part(part, suffix):
    """One real number as astor writes it: 1e1000 for infinity, 1e1000-1e1000 for NaN."""
    if np.isnan(part):
        return f"(1e1000{suffix}-1e1000{suffix})"
    if np.isinf(part):
        return f"{'-' if part < 0 else ''}1e1000{suffix}"
    return repr(part) + suffix


# ---- expressions ------------------------------------------------------------------------
_PLACEHOLDER = re.compile(r"\{(\w+|\*)\}")


def copied(node):
    """copy.deepcopy of a tree of ast nodes, fields and positions, at a fraction of its
    cost (a template's leaves are strings, numbers and None, which are immutable)."""
    if isinstance(node, ast.AST):
        copy_ = node.__class__.__new__(node.__class__)
        for field in node._fields:
            if hasattr(node, field):
                setattr(copy_, field, copied(getattr(node, field)))
        for attribute in node._attributes:
            if hasattr(node, attribute):
                setattr(copy_, attribute, getattr(node, attribute))
        return copy_
    if type(node) is list:
        return [copied(item) for item in node]
    return node


@functools.cache
def _parsed(text):
    """A template's tree, parsed once, never edited (_Fill.filled makes the copies)."""
    def placeholder(match):
        key = match.group(1)
        return "_a_star" if key == "*" else f"_a{key}" if key.isdigit() else f"_p_{key}"
    with PARSE_LOCK:
        return ast.parse(_PLACEHOLDER.sub(placeholder, text), mode="eval").body


class _Fill:
    """Replace template placeholders with argument and parameter expressions: `filled`
    copies the template and fills it in one walk, leaving the template's own tree as it
    is."""

    def __init__(self, args, params, value_ast):
        self.args, self.params, self.value_ast = args, params, value_ast

    def filled(self, node):
        kind = node.__class__
        if kind is ast.Name:
            new = self._name(node)
            return copied(node) if new is node else new
        if not isinstance(node, ast.AST):
            return copied(node)
        copy_ = kind.__new__(kind)
        copy_.__dict__.update(node.__dict__)  # positions; every field is set below
        if kind is ast.Subscript:
            copy_.value = self.filled(node.value)
            slc = node.slice
            copy_.slice = _subscript_ast(self.params[slc.id[3:]], self.args) \
                if isinstance(slc, ast.Name) and slc.id.startswith("_p_") else self.filled(slc)
            copy_.ctx = copied(node.ctx)
        elif kind is ast.List:
            copy_.elts = self._expand_filled(node.elts)
            copy_.ctx = copied(node.ctx)
        elif kind is ast.Call:
            copy_.func = self.filled(node.func)
            copy_.args = self._expand_filled(node.args)
            copy_.keywords = [self.filled(k) for k in node.keywords]
        else:
            for field in kind._fields:
                value = node.__dict__.get(field)
                if type(value) is list:
                    copy_.__dict__[field] = [self.filled(item) for item in value]
                elif isinstance(value, ast.AST):
                    copy_.__dict__[field] = self.filled(value)
        return copy_

    def _expand_filled(self, items):
        out = []
        for item in items:
            if isinstance(item, ast.Name) and item.id == "_a_star":
                out.extend(self.args)
            else:
                out.append(self.filled(item))
        return out

    def _name(self, node):
        """What a Name of the template stands for: an argument, a parameter, or itself."""
        if node.id.startswith("_a") and node.id[2:].isdigit():
            return self.args[int(node.id[2:])]
        if node.id.startswith("_p_"):
            return self.value_ast(self.params[node.id[3:]], self.args)
        return node


def _subscript_ast(index, args):
    items = [_index_item(i, args, subscript=True) for i in index.items]
    return items[0] if len(items) == 1 else ast.Tuple(items, ast.Load())


def _index_item(item, args, subscript):
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


def indexed_update(call, name):
    """`_add_at(h, np.s_[i], v, unique=True, out=h)` as the statement it stands for,
    `h[i] += v`; `np.add.at(h, np.s_[i], v)` for an index that may repeat an element."""
    _, index, v = call.args
    if any(k.arg == "unique" and getattr(k.value, "value", None) is True for k in call.keywords):
        return ast.AugAssign(ast.Subscript(ast.Name(name, ast.Load()), index.slice, ast.Store()),
                             ast.Add(), v)
    return ast.Expr(call_ast("np.add.at", [ast.Name(name, ast.Load()), index, v]))


def call_ast(func, args, keywords=()):
    return ast.Call(_dotted(func), list(args), list(keywords))


def _dotted(path):
    parts = path.split(".")
    node = ast.Name(parts[0], ast.Load())
    for part in parts[1:]:
        node = ast.Attribute(node, part, ast.Load())
    return node


def _same(a, b):
    return type(a) is type(b) and a == b


def dtype_ast(dtype):
    name = np.dtype(dtype).name
    return _dotted("np.bool_" if name == "bool" else f"np.{name}")


def literal_ast(value, args=()):
    """An expression for a static value: parameters and scalar constants."""
    if type(value) in (Dim, Scale):
        return symbol_ast(value)
    if type(value) is Index:
        items = [_index_item(i, args, subscript=False) for i in value.items]
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


def expression(node, arg_asts, param_ast=literal_ast, scalar=False):
    """The right-hand side for a node; `scalar`: its Python-float form (emit_scalar.py)."""
    prim = node.prim
    if scalar:
        return _Fill(arg_asts, node.params, param_ast).filled(_parsed(SCALAR[prim.name]))
    template = prim.template(node.params) if callable(prim.template) else prim.template
    tree = _Fill(arg_asts, node.params, param_ast).filled(_parsed(template))
    if isinstance(tree, ast.Call):
        for key, default in prim.defaults.items():
            value = node.params.get(key, default)
            if not _same(value, default):
                tree.keywords.append(ast.keyword(key, literal_ast(value)))
    return tree


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


# ---- lines of at most WIDTH characters ---------------------------------------------------
WIDTH = 100  # ruff E501 at 100: no generated line is longer (where it can be broken)


def wrap(line, width=WIDTH):
    """One line of code as lines of at most `width` characters, as a careful person wraps
    it: after a comma inside brackets, the next line starting under the bracket's first
    item; else after the first bracket, the rest on the next line, indented (a message
    stays whole: `raise GuardFailure(` / `'...')`); else a long string literal inside
    brackets as adjacent literals, one per line. What cannot be broken so stays as it is."""
    if len(line) <= width:
        return [line]
    lines = _at_commas(line, width)
    if max(map(len, lines)) <= width:
        return lines
    for layout, inside in ((_hanging(line, width), True), (lines, False)):
        split = layout and [piece for k, one in enumerate(layout)
                            for piece in _split_strings(one, width, inside and k > 0)]
        if split and max(map(len, split)) <= width:
            return split
    return split


def _hanging(line, width):
    """The line broken after its first opening bracket (None if it has none)."""
    text = line.lstrip()
    indent = len(line) - len(text)
    at = next((end for kind, _, end, opened in _tokens(text)
               if kind in ("(", "[", "{") and opened is None), None)
    if at is None or not text[at:].strip():
        return None
    return [line[:indent + at]] + _at_commas(" " * (indent + 4) + text[at:].lstrip(), width)


def _at_commas(line, width):
    """The line broken after commas inside brackets, as few times as will do."""
    text = line.lstrip()
    indent = len(line) - len(text)
    breaks = [(at, opened) for kind, _, at, opened in _tokens(text)
              if kind == "," and opened is not None]
    at_of = [at for at, _ in breaks]  # increasing: bisect, not a scan per line (linear)
    lines = []  # (start in text, column of that start)
    start, column = 0, indent
    while column + len(text) - start > width:
        later = bisect.bisect_right(at_of, start)
        fits = bisect.bisect_right(at_of, start + width - column)  # the last that fits
        if fits > later:
            at, opened = breaks[fits - 1]
        elif later < len(breaks):
            at, opened = breaks[later]
        else:
            break
        lines.append((start, column))
        column = _column(lines, opened)
        start = at + len(text[at:]) - len(text[at:].lstrip())
    lines.append((start, column))
    ends = [s for s, _ in lines[1:]] + [len(text)]
    return [" " * col + text[s:e].rstrip() for (s, col), e in zip(lines, ends)]


def _column(lines, position):
    """The output column of a position in the text, given where the lines start."""
    start, column = lines[bisect.bisect_right(lines, (position, math.inf)) - 1]
    return column + position - start


def _tokens(text):
    """(token, its start, its end, the end of the innermost open bracket or None), of a
    line that may end inside brackets (a part of a wrapped line)."""
    opens, depth, first = [], 0, 0  # Python 3.12 tokenizes an f-string's inside: here,
    try:                                # the whole f-string is one STRING
        for tok in tokenize.generate_tokens(io.StringIO(text + "\n").readline):
            kind = tok.string if tok.type == tokenize.OP else tokenize.tok_name[tok.type]
            if kind == "FSTRING_START" or depth:
                first = tok.start[1] if not depth else first
                depth += (kind == "FSTRING_START") - (kind == "FSTRING_END")
                if not depth:
                    yield "STRING", first, tok.end[1], opens[-1] if opens else None
                continue
            if kind in (")", "]", "}") and opens:
                opens.pop()
            yield kind, tok.start[1], tok.end[1], opens[-1] if opens else None
            if kind in ("(", "[", "{"):
                opens.append(tok.end[1])
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return


def _split_strings(line, width, inside=False):
    """A line still too long: its first long string literal inside brackets (`inside`: the
    line is inside brackets) split into adjacent literals at spaces, each on a line of its
    own under the first."""
    if len(line) <= width:
        return [line]
    text = line.lstrip()
    indent = len(line) - len(text)
    for kind, start, end, opened in _tokens(text):
        if kind != "STRING" or opened is None and not inside or end - start < 20:
            continue
        column = indent + start
        tail = text[end:]
        pieces = _string_pieces(text[start:end], width - column - len(tail.split(",")[0]))
        if len(pieces) < 2:
            continue
        head = " " * indent + text[:start] + pieces[0]
        return [head] + [" " * column + p for p in pieces[1:-1]] + \
            [" " * column + pieces[-1] + tail]
    return [line]


_PREFIX = re.compile(r"^([A-Za-z]*)('|\")")


def _string_pieces(literal, room):
    """'a b c' as 'a ' 'b c', each at most `room` characters, split at spaces outside an
    f-string's braces; a piece with no placeholder is a plain string (ruff F541)."""
    match = _PREFIX.match(literal)
    if match is None or literal.startswith(match.group(0) + match.group(2) * 2) or room < 20:
        return [literal]  # a triple-quoted string, or no room to speak of
    prefix, quote = match.groups()
    body = literal[len(prefix) + 1:-1]
    cuts, depth, i = [], 0, 0
    while i < len(body):
        c = body[i]
        if "f" in prefix.lower() and c in "{}" and body[i:i + 2] in ("{{", "}}") and not depth:
            i += 2
            continue
        if "f" in prefix.lower() and c == "{":
            depth += 1
        elif "f" in prefix.lower() and c == "}":
            depth -= 1
        elif c == " " and not depth and body[i - 1:i] != "\\":
            cuts.append(i + 1)
        i += 1
    pieces, start, fits = [], 0, []
    for cut in cuts + [len(body)]:
        if len(prefix) + 2 + cut - start > room and fits:
            clause = [f for f in fits if body[f - 2] in ",:;." and f - start > room * 0.6]
            end = (clause or fits)[-1]  # after a clause rather than inside one
            pieces.append(body[start:end])
            start = end
            fits = [f for f in fits if f > start]
        fits.append(cut)
    pieces.append(body[start:])
    return [_literal(prefix, quote, p) for p in pieces if p]


def _literal(prefix, quote, body):
    if "f" in prefix.lower() and not re.search(r"(?<!\{)\{(?!\{)", body.replace("{{", "")):
        prefix = prefix.replace("f", "").replace("F", "")
        body = body.replace("{{", "{").replace("}}", "}")
    return f"{prefix}{quote}{body}{quote}"


def docstring(text, indent, width=WIDTH):
    """A docstring wrapped at `width` (None if the text needs escapes: render it)."""
    if '"""' in text or "\\" in text or text.endswith('"') or not text.isprintable():
        return None
    glued, depth = [], 0  # a line breaks between words and between argument specs only
    for i, c in enumerate(text):
        depth += (c in "([") - (c in ")]")
        free = depth == 0 and text[i + 1:i + 2] not in "(<=" and text[i - 1] not in "<=" \
            or depth == 1 and text[i - 1] == ","
        glued.append("\0" if c == " " and not free else c)
    lines = [line.replace("\0", " ") for line in textwrap.wrap(
        "".join(glued), width - len(indent) - 3, break_long_words=False,
        break_on_hyphens=False)]
    if len(lines) == 1:
        return [f'{indent}"""{lines[0]}"""']
    return [f'{indent}"""{lines[0]}'] + [indent + li for li in lines[1:-1]] + \
        [f'{indent}{lines[-1]}"""']
