"""A statement's text from an earlier statement of the same layout, without a syntax tree.

Most statements of a large function differ from an earlier one in their names alone
(`sin_3 = np.sin(multiply_2, out=multiply_2)`): the same primitive, the same constants,
the same buffer decisions. Building each one's `ast` and rendering it is most of the
emitter's time per node, so a statement of a plain node (no parameters, arguments that
are values or scalar constants) is keyed by what its text depends on besides its names
(the primitive, the constants, `out=`, in place or not,
which of its names are the same name; a write into a join's slot is built as usual),
built and rendered once per key with stand-in names, and its text reused with the names
put in. The text is exactly what emitter.Emitter builds: the first statement of a key
is built both ways, and a key whose two texts differ is not reused.
"""

import ast
import re

import numpy as np

from ..graph import Node
from .expressions import filled_text, indexed_update, method_form, render, vector_product

_SLOT = re.compile(r"_adg_slot_(\d+)_")
_NUMBERS = (int, float, bool)


class Texts:
    """The statement texts of one Emitter's function, by layout."""

    def __init__(self):  # the emitter is passed, not kept: no cycle for the collector
        self.known = {}  # layout key -> its text as a format template (_template), or None

    def text(self, emitter, node, name, out, in_place):
        """The statement binding `name` to node's value (written into `out` when not None;
        as an update in place when `in_place`), or None: not a plain node, built as usual."""
        if node.params or emitter.scalar or node in emitter.plan.contiguous:
            return None
        names, constants = [name], []
        for k, arg in enumerate(node.args):
            if type(arg) is Node:
                if arg in emitter.inline_ast:
                    return None
                names.append(emitter.names[arg])
            elif type(arg) in _NUMBERS or isinstance(arg, np.generic) and \
                    arg.dtype.kind in "biuf" and type(arg.item()) is not type(arg):
                constants.append((k, type(arg), repr(arg)))  # written as its repr says
            else:
                return None
        if out is not None:  # a join's slot (emit_slots.py) is written as a subscript
            if type(out) is not Node or out in emitter.inline_ast:
                return None
            names.append(emitter.names[out])
        first = {}
        same = tuple([first.setdefault(n, j) for j, n in enumerate(names)])
        key = (id(node.prim), in_place, out is not None,
               out is None and emitter.numpy_on_numbers(node), same, tuple(constants),
               vector_product(node), method_form(node),  # np.dot or not, x.sum() or not
               emitter.outer_into(node, out))
        known = self.known.get(key, False)
        if known is False:
            known = self.known[key] = _template(
                self._learn(emitter, node, out, in_place, names, same))
        if known is None:
            return None
        return known.format(*names)  # filled_text(*pieces_and_slots, names), in C

    def _learn(self, emitter, node, out, in_place, names, same):
        """(pieces, slots) of the statement rendered with stand-in names, checked against
        the statement rendered with its own; None if they differ."""
        valued = [a for a in node.args if type(a) is Node] + ([out] if out is not None else [])
        own = {n: emitter.names[n] for n in valued}
        stand_ins = [f"_adg_slot_{j}_" for j in same]
        try:
            for n, stand_in in zip(valued, stand_ins[1:]):
                emitter.names[n] = stand_in
            text = render(statement(emitter.value_ast(node, out), stand_ins[0], in_place))
        finally:
            emitter.names.update(own)
        pieces = _SLOT.split(text)
        known = pieces[0::2], [int(s) for s in pieces[1::2]]
        real = render(statement(emitter.value_ast(node, out), names[0], in_place))
        return known if filled_text(*known, names) == real else None


def _template(known):
    """A layout's (text pieces, slots) as a str.format template: filled_text's text."""
    if known is None:
        return None
    pieces, slots = known
    escaped = [p.replace("{", "{{").replace("}", "}}") for p in pieces]
    return escaped[0] + "".join(f"{{{slot}}}{p}" for slot, p in zip(slots, escaped[1:]))


def statement(value, name, in_place):
    """`name = value`, or its update in place (the plan's in_place: `h += b`)."""
    if in_place:
        return _in_place(value, name)
    return ast.Assign([ast.Name(name, ast.Store())], value)


_AUGMENTED = {"add": ast.Add, "subtract": ast.Sub, "multiply": ast.Mult, "divide": ast.Div,
              "true_divide": ast.Div}


def _in_place(call, name):
    """`np.add(h, b, out=h)` as a statement: `h += b`; `np.tanh(h, out=h)` as it is."""
    if isinstance(call.func, ast.Name):  # _add_at(h, np.s_[i], v, out=h): h[i] += v
        return indexed_update(call, name)
    kind = call.func.attr
    args = call.args
    if kind in _AUGMENTED and len(args) == 2:
        first = isinstance(args[0], ast.Name) and args[0].id == name
        if not first and kind in ("add", "multiply"):  # b + h is h + b, bit for bit
            args = args[::-1]
            first = isinstance(args[0], ast.Name) and args[0].id == name
        if first:
            return ast.AugAssign(ast.Name(name, ast.Store()), _AUGMENTED[kind](), args[1])
    return ast.Expr(call)

