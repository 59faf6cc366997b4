"""Graph pieces -> Python expressions: the `ast` half of the emitter.

Each primitive's template (e.g. "np.sum({0})") is parsed into an expression whose
placeholders are filled with argument and parameter expressions; static values
(parameters, scalars, dtypes, small constant arrays) become literals. `render` turns any
of these into source: the one place that calls astor. Static values are literals.py's;
lines.py keeps the lines within 100 characters.
"""

import ast
import copy
import functools
import re
import threading
import warnings

import numpy as np

from ..graph import Node
from ..trace.raising import PARSE_LOCK
from .lines import WIDTH, docstring, wrap  # noqa: F401  (the emitter's, re-exported)
from .literals import (  # noqa: F401  (constant_ast, symbolic_array_ast: the emitter's)
    call_ast,
    constant_ast,
    index_item,
    literal_ast,
    symbolic_array_ast,
)
from .scalar import SCALAR

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
    items = [index_item(i, args, subscript=True) for i in index.items]
    return items[0] if len(items) == 1 else ast.Tuple(items, ast.Load())


def indexed_update(call, name):
    """`_add_at(h, np.s_[i], v, unique=True, out=h)` as the statement it stands for,
    `h[i] += v`; `np.add.at(h, np.s_[i], v)` for an index that may repeat an element;
    `_setitem(h, np.s_[i], v, out=h)` as `h[i] = v`."""
    _, index, v = call.args
    if call.func.id == "_setitem":  # _setitem(h, np.s_[i], v, out=h): h[i] = v
        return ast.Assign([ast.Subscript(ast.Name(name, ast.Load()), index.slice, ast.Store())], v)
    if any(k.arg == "unique" and getattr(k.value, "value", None) is True for k in call.keywords):
        return ast.AugAssign(ast.Subscript(ast.Name(name, ast.Load()), index.slice, ast.Store()),
                             ast.Add(), v)
    return ast.Expr(call_ast("np.add.at", [ast.Name(name, ast.Load()), index, v]))


def _same(a, b):
    return type(a) is type(b) and a == b


def outer_product(node):
    """A matmul of an (m, 1) and a (1, n) matrix, written np.dot: np.matmul has no BLAS
    path for an inner size of 1 (17 us for a (100, 1) by (1, 65), where np.dot takes 4 us;
    2.1 against 0.5 ms at (1000, 1) by (1, 1000)), and for 2-D operands np.dot is matmul.
    Into a buffer np.dot takes only a C-contiguous one, else np.multiply's broadcast is
    written (twice np.dot's time, half matmul's): emitter.outer_into. Each element is one
    product whichever is called, so the values are the same."""
    if getattr(node.prim, "op", None) != "matmul" or len(node.args) != 2:
        return False
    a, b = (np.shape(x) if not hasattr(x, "shape") else x.shape for x in node.args)
    return len(a) == 2 and len(b) == 2 and type(a[1]) is int and a[1] == 1


def vector_product(node):
    """A matmul of a matrix and a vector (1-D, an (m, 1) column or a (1, n) row), or an
    outer product, written np.dot: for 1-D and 2-D operands np.dot is matmul, and it
    skips matmul's generalized-ufunc dispatch, 0.3 us a call (1.2 against 1.5 us for a
    (100, 65) matrix by a column; equal from 64x128 by 128x128 up, measured in
    benchmarks/small_arrays.py). A vector's product is small work, so that is a fifth of
    it: a recurrent step on one example makes several. Into a buffer matmul stays (np.dot's
    out= takes only a C-contiguous one; emitter.outer_into)."""
    if outer_product(node):
        return True
    if getattr(node.prim, "op", None) != "matmul" or len(node.args) != 2:
        return False
    a, b = (np.shape(x) if not hasattr(x, "shape") else x.shape for x in node.args)
    if not (1 <= len(a) <= 2 and 1 <= len(b) <= 2):
        return False
    return len(a) == 1 or len(b) == 1 or _one(a[0]) or _one(b[1])


def _one(size):
    return type(size) is int and size == 1


# Reductions written as the array's method: `x.sum()` is np.sum's ufunc reduce without
# np.sum's Python wrapper (1.0 against 2.1 us on 65 doubles; 3.7 against 4.7 us for a
# 64x128 sum over an axis), the same call, and np.sum itself calls the method of anything
# that is not an ndarray. A value of no dimensions keeps np.sum: it may be a Python
# number, which has no methods (a loop's running total starts as `0`).
_METHODS = frozenset(("sum", "mean", "max", "min", "prod"))


def method_form(node):
    """The reduction is written `x.sum(...)` (see _METHODS)."""
    x = node.args[0] if getattr(node.prim, "op", None) in _METHODS and node.args else None
    return type(x) is Node and not x.python_number and x.shape != ()


def expression(node, arg_asts, param_ast=literal_ast, scalar=False):
    """The right-hand side for a node; `scalar`: its Python-float form (emit_scalar.py)."""
    prim = node.prim
    if scalar:
        return _Fill(arg_asts, node.params, param_ast).filled(_parsed(SCALAR[prim.name]))
    template = prim.template(node.params) if callable(prim.template) else prim.template
    if vector_product(node):
        template = "np.dot({0}, {1})"
    elif method_form(node):
        template = "{0}." + prim.op + "()"
    tree = _Fill(arg_asts, node.params, param_ast).filled(_parsed(template))
    if isinstance(tree, ast.Call):
        for key, default in prim.defaults.items():
            value = node.params.get(key, default)
            if not _same(value, default):
                tree.keywords.append(ast.keyword(key, literal_ast(value)))
    return tree
