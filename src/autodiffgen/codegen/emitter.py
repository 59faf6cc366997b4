"""Graph -> Python source: one primitive per line, readable names, comments, `del`.

Statements are built as `ast` nodes from each primitive's template (emit_ast.py) and
rendered with astor (behind `render`). Comments are not part of Python's AST, so each
statement is rendered alone and its trailing comment appended, once per run of lines:
the first forward line of a user's statement quotes it (`mlp.py:32  h = ...`), the first
backward line of a rule says whose it is (`grad of tanh, mlp.py:32`).

What a careful person would write by hand: a transpose read once is written where it is
read (`h.T @ g`); one buffer within a statement is one name (`h = x @ W`, `h += b`,
`np.tanh(h, out=h)`, see emit_memory.one_name); `del` only of arrays; constants named after
what they are (`rows = np.arange(n)`); no line over 100 characters (emit_ast.wrap).
"""

import ast
import collections
import dataclasses
import functools
import inspect
import os
import re
import sys
import types
from types import SimpleNamespace

import numpy as np

from .._version import __version__
from ..generated_helpers import HELPERS
from ..graph import NOTES, PYTHON_NUMBERS, Node, constant_key, op, recomputed
from ..graph.size_formulas import Dim, Scale, SymArray
from ..plan.memory import (
    RECOMPUTED,
    contiguous_transposes,
    one_name,
    rematerialized,
    reuse_plan,
    sunk,
)
from ..plan.schedule import freeing_first
from ..plan.slots import Slot, subscript_ast
from ..rules.buffers import VIEWS, ufunc_of
from ..trace.capture import chain_text, is_globals, read_traced, same_contents
from ..trace.count_sources import count_var
from ..trace.naming import RESERVED, Namespace
from ..trace.raising import Raised, errstate_code
from ..trace.tracer import RAISES, source_line
from ..tree import Child, Field, is_namedtuple, kind_of, leaves, registration
from .expressions import (
    PARSE_LOCK,
    WIDTH,
    call_ast,
    constant_ast,
    copied,
    docstring,
    expression,
    indexed_update,
    literal_ast,
    render,
    symbolic_array_ast,
    wrap,
)
from .scalar import MATH_ERRORS, OVERFLOWS, PROPAGATES, SCALAR
from .text import Texts, statement

_COMMENT_COLUMN = 40


# ---- the function -----------------------------------------------------------------------
def _base_name(node, cotangent_of, names, prefix="g_"):
    if node in cotangent_of:  # named after its value, even if that value is never computed
        of = cotangent_of[node]
        return prefix + (names.get(of) or of.name or (of.prim.name if of.prim else "input"))
    if node.name:
        return node.name
    return node.prim.name


def _comment(node, kind="grad"):
    if node.loc is None:
        return ""
    where = _where(node.loc)
    if node.grad_of is not None and not node.args and node.prim.name == "ones":
        return f"seed: d {node.grad_of.name or 'output'} / d itself"
    if recomputed(node):  # checkpointing.py: the replay of a checkpointed call
        return f"recompute of checkpointed {node.grad_of.name}, {where}"
    if node in RECOMPUTED:  # emit_memory.rematerialized: cheaper than saving it
        return f"recomputed, not saved: {where}"
    if node.grad_of is not None:
        of = node.grad_of.prim.name if node.grad_of.prim else "argument"
        return f"{'tangent' if kind == 'jvp' else 'grad'} of {of}, {where}"
    return where


@functools.lru_cache(maxsize=4096)
def _where(loc):
    return f"{os.path.basename(loc[0])}:{loc[1]}"


# how a guard's check reads the value, as the user's code did (rules/control.py READS)
_READ_FORMS = {"bool": "{x}", "item": "{x}.item({index})", "index": "operator.index({x})",
               "layout": "_layout({x})",
               "aliases": "np.may_share_memory({x}, {y})",
               "count_nonzero": "int(np.count_nonzero({x}))",
               "len": "len({x})",
               "iscomplexobj": "np.iscomplexobj({x})"}
_LAYOUTS = {"CF": "contiguous", "C": "C-ordered", "F": "Fortran-ordered"}
# a count read at run time (generalize_counts.py): what it counts, and what was traced
_COUNTED = {"count_nonzero": ("elements selected",
                              "{} elements selected; this code serves {} or more"),
            "len": ("a length the data decides",
                    "a result of length {}; this code serves lengths of {} or more")}
_COUNT_GUARDED = {  # a count guarded: what it was, why, and what would serve every count
    "count_nonzero": (
        "selected {} elements when traced, and this code serves only that count: traces at "
        "other counts did not fit one formula in it (Python decided on the number, e.g. a "
        "reshape, a range or an if; or computed with it in a way not fitted; or two "
        "selections meet). To serve every count with one trace, keep the count in arrays: "
        "np.count_nonzero(mask) rather than len(x[mask]) in arithmetic, np.where(mask, x, 0) "
        "rather than x[mask]"),
    "len": (
        "gave a result of length {} when traced, and this code serves only that length: "
        "traces at other lengths did not fit one formula in it (Python decided on it, e.g. a "
        "reshape, a range or an if; or the result meets an array of a fixed size, as "
        "x * np.bincount(labels, minlength=5) with x of 5 elements)")}


class Emitter:
    """Turns one Graph into the lines of one function (and its module-level constants)."""

    def __init__(self, graph, standalone=False, constants=None, pure=False):
        self.graph = graph if pure or graph.marks else freeing_first(sunk(rematerialized(graph)))
        self.standalone = standalone
        self.cotangent_of = self.graph.derivative_of
        self.ns = Namespace(list(graph.params) + list(HELPERS))
        # an argument named like a module or helper the code calls (np, math, operator,
        # _setitem, slice...) is renamed, so the code never reads the user's value instead
        self.params = [self.ns.fresh(p) if p in RESERVED or p in HELPERS else p
                       for p in graph.params]
        self.names = {}
        self.saved = {}  # saved input -> the name the forward function gave it (emit_module)
        # content key -> (name, value); shared by the functions of one module
        self.constants = {} if constants is None else constants
        self.injected = {}
        self.local_constants = {}  # size_formulas.SymArray -> name: made in the function, from n
        self.helpers = set()
        self.imports = set()  # modules other than NumPy that some primitive's template uses
        self.scalar = graph.scalar and _all_python_floats(graph) and not graph.marks
        self.numpy_twin = None  # the name of the NumPy function a scalar one falls back to
        self.twin = False  # this is such a function (numpy_on_numbers)
        self.made_numpy = set()  # its derivatives of Python numbers written as NumPy calls
        self.pure = pure  # no writes into dead buffers (code an enclosing trace will read)
        self.inline_at = _inlined(self.graph)  # `x.T` read once: written where it is read
        self.inline_ast = {}
        self.texts = Texts()
        self.paths_checked = {}  # path length -> whether path_text's is astor's text

    def arg_ast(self, arg):
        if type(arg) is Node and arg in self.inline_ast:
            return copied(self.inline_ast[arg])
        if type(arg) is Node:
            return ast.Name(self.names[arg], ast.Load())
        if self.scalar and isinstance(arg, (np.ndarray, np.generic)):
            return literal_ast(arg.item())  # a Python float (or bool) in math-module code
        if isinstance(arg, np.ndarray):
            return ast.Name(self.constant_name(arg), ast.Load())
        if type(arg) is SymArray:
            return ast.Name(self.local_constant(arg), ast.Load())
        return literal_ast(arg)

    def param_ast(self, value, args=()):
        """Parameters are literals, except a custom primitive's function: a module name."""
        if callable(value) and not isinstance(value, type):
            return ast.Name(self.constant_name(value), ast.Load())
        return literal_ast(value, args)

    def constant_name(self, value):
        """One module-level name per distinct constant (equal arrays share one)."""
        key = constant_key(value) if isinstance(value, np.ndarray) else ("object", id(value))
        entry = self.constants.get(key)
        if entry is None:
            base = _array_name(value) if isinstance(value, np.ndarray) else value.__name__
            entry = (self.ns.fresh(base), value)
            self.constants[key] = entry
        return entry[0]

    def local_constant(self, array):
        """A constant whose shape or values depend on the batch size: one name per distinct
        formula, computed at the top of the function (`rows = np.arange(n)`)."""
        if array in self.local_constants:
            return self.local_constants[array]
        name = self.local_constants[array] = self.ns.fresh(self.sym_array_name(array))
        if _mentions(array, self.counts):  # a mask's count: made where the count is known
            self.pending.append(self.local_constant_line(array, name))
        return name

    def sym_array_name(self, array):
        """What a constant in n is: `rows` (np.arange(n) of the batch), `inv_n` (1 / n
        everywhere: a mean's gradient), `neg_inv_n`, `zeros`, `ones`, else `full`."""
        batch = self.graph.batch
        if array.kind == "arange":
            dim = array.shape[0]
            whole = type(dim) is Dim and (dim.a, dim.b) == (1, 0)
            return "rows" if whole and batch is not None and dim.var == batch.var \
                else "indices"
        fill = array.fill
        if type(fill) is Scale and fill.power == -1 and (fill.m, fill.b) == (1, 0) \
                and fill.k in (1, -1):
            return ("inv_" if fill.k == 1 else "neg_inv_") + fill.var
        if type(fill) not in (Dim, Scale) and type(fill) is not bool and fill in (0, 1):
            return "zeros" if fill == 0 else "ones"
        return "full"

    def batch_guard(self):
        """Polymorphic code (generalize_batch.py) reads the batch size n from its first batch
        argument,
        and checks every other one has n rows and that n is a size it was checked for."""
        batch = self.graph.batch
        if batch is None:
            return []
        self.helpers.add("GuardFailure")
        self.ns.used.add(batch.var)
        rows = [render(self.path_ast(path)) for path in batch.paths]
        # hi None: a standalone module's code, which serves every size from lo up
        tests = [f"not {batch.lo} <= {batch.var} <= {batch.hi}" if batch.hi is not None
                 else f"{batch.var} < {batch.lo}"]
        tests += [f"{r}.shape[0] != {batch.var}" for r in rows[1:]]
        each = f", the same in {', '.join(rows[:-1])} and {rows[-1]}" if len(rows) > 1 else ""
        served = f"{batch.lo} to {batch.hi}" if batch.hi is not None else f"{batch.lo} or more"
        message = f"{{{batch.var}}} rows: this code serves {served} rows{each}"
        return [(f"{batch.var} = {rows[0]}.shape[0]", "the batch size"),
                (f"if {' or '.join(tests)}:", ""),
                (f"    raise GuardFailure(f{message!r})", "")]

    def path_text(self, path):
        """render(self.path_ast(path)); a path of int keys (`params[3][0]`, one per input
        of a deep net) written out, each length's first checked against the rendering."""
        if any(type(k) is not int or k < 0 for k in path[1:]):
            return render(self.path_ast(path))
        text = self.params[path[0]] + "".join(f"[{k}]" for k in path[1:])
        same = self.paths_checked.get(len(path))
        if same is None:
            same = self.paths_checked[len(path)] = text == render(self.path_ast(path))
        return text if same else render(self.path_ast(path))

    def path_ast(self, path):
        expr = ast.Name(self.params[path[0]], ast.Load())
        for key in path[1:]:
            expr = self.step_ast(expr, key)
        return expr

    def step_ast(self, expr, key):
        """One step into a pytree argument (tree.py): `x['W']`, `x[0]`, a dataclass's
        field `x.W`, or child i of a registered type, `flatten(x)[0][i]`."""
        if type(key) is Field:
            return ast.Attribute(expr, str(key), ast.Load())
        if type(key) is Child:
            flatten = self.function_constant(registration(key.kind)[0], key.kind, "flatten")
            children = ast.Subscript(ast.Call(ast.Name(flatten, ast.Load()), [expr], []),
                                     ast.Constant(0), ast.Load())
            return ast.Subscript(children, ast.Constant(int(key)), ast.Load())
        return ast.Subscript(expr, ast.Constant(key), ast.Load())

    def function_constant(self, fn, kind, what):
        """A registered type's flatten or unflatten as a module-level name (a lambda's is
        named after the type)."""
        key = ("object", id(fn))
        if key not in self.constants:
            name = getattr(fn, "__name__", "")
            base = name if name.isidentifier() else f"{kind.__name__}_{what}"
            self.constants[key] = (self.ns.fresh(base), fn)
        return self.constants[key][0]

    def local_constant_lines(self):
        return [self.local_constant_line(array, name)
                for array, name in self.local_constants.items()
                if not _mentions(array, self.counts)]

    @staticmethod
    def local_constant_line(array, name):
        return (f"{name} = {render(symbolic_array_ast(array))}",
                f"{array.dtype.name}[{render(literal_ast(array.shape))[1:-1].rstrip(',')}]")

    def function(self):
        """The function's source lines (with module-level constants first)."""
        prologue = self.batch_guard()  # first: it takes the batch size's name
        self.counts = {v for v in map(count_var, self.graph.nodes) if v}
        self.ns.used.update(self.counts)
        self.pending = []  # lines of count-sized constants the next statement reads
        body = self.captured_checks() + self.unpack_inputs()
        start = len(body)  # the statements a scalar function tries (numpy_fallback)
        locs = {}  # body index -> the user's (file, line) the statement came from
        last_use = self.last_uses()
        reuse, self.joins, self.contiguous = {}, None, ()
        if not (self.scalar or self.pure):
            reuse, last_use, self.joins = reuse_plan(self.graph, last_use)
            self.contiguous = contiguous_transposes(self.graph)
        self.shared = one_name(self.graph, {  # node -> whose name its buffer has
            i: b for i, b in reuse.items() if any(b is a for a in self.graph.nodes[i].args)})
        self.own = {}  # node -> its own name, which a gradient's name is made from
        section = run_loc = note = None
        self.block = None  # the `try:` or `with np.errstate` block last emitted (marked)
        used = {a for n in self.graph.nodes for a in n.args if type(a) is Node} | \
            {o for o in leaves(self.graph.outputs) if type(o) is Node} if self.graph.marks else ()
        for i, node in enumerate(self.graph.nodes):
            if op(node) == "guard":
                mark = self.graph.marks.get(node.stack)
                lines = self.guard_lines(node) if mark is None or not mark.tried else \
                    self.tried_guard(node, self.guard_lines(node))
                if node.loc is not None:  # a trace of this code (grad(grad(f))) reads the
                    locs.update((len(body) + k, node.loc) for k in range(len(lines)))  # user's
                body += lines
                body += self.dels(last_use.get(i, ()))
                continue
            if node in self.inline_at:
                self.inline_ast[node] = expression(node, [self.arg_ast(a) for a in node.args])
                continue
            if self.joins is not None and node in self.joins.slot:
                body += self.allocation_lines(i)
                if node.loc is not None:
                    locs[len(body)] = node.loc
                body += self.joined_lines(node) + self.dels(last_use.get(i, ()))
                continue
            name = self.names[node] = self.node_name(node)
            kind = self.section(node, section)
            if kind != section:
                body.append((kind, ""))
                section = kind
                if kind == "# backward":
                    body += self.saved_line(i)
            if NOTES and NOTES.get(node, note) != note:  # the first line of a pass's group
                note = NOTES[node]
                body.append((f"# {note}", ""))
            if self.joins is not None:
                body += self.allocation_lines(i)
            in_place = i in reuse and self.shared.get(reuse[i]) is self.shared.get(node, False)
            unread = not in_place and self.joins is not None and node in self.joins.unread
            mark = self.graph.marks.get(node.stack) if node.grad_of is None else None
            raises = node.prim.name in RAISES and node.grad_of is None
            text = None if raises or unread or mark is not None else \
                self.texts.text(self, node, name, reuse.get(i), in_place)  # a layout seen before
            if text is None:
                value = self.value_ast(node, reuse.get(i))
                stmt = ast.Expr(value) if unread else statement(value, name, in_place)
            comment, run_loc = self.once(node, run_loc)
            body += self.pending
            self.pending = []
            dead = self.dels(n for n in last_use.get(i, ()) if self.names[n] != name)
            if raises:
                body += self.raising(node, render(stmt), comment, locs, len(body)) + dead
            elif mark is not None:  # in a `try:` or an np.errstate (raising.py)
                if node not in used:  # kept for its raise alone (`try: x[i]`)
                    stmt = ast.Expr(value)
                self.marked(body, node, mark, [(render(stmt), comment)] + dead, locs)
            else:
                if node.loc is not None:
                    locs[len(body)] = node.loc
                body.append((render(stmt) if text is None else text, comment))
                body += dead
        if self.numpy_twin is not None and len(body) > start:
            body, locs = self.numpy_fallback(body, locs, start)
        outputs = self.graph.outputs
        body += self.pending
        if self.graph.writes:  # argument_writes.py: the items the function assigned
            outputs, written = outputs[:-1], outputs[-1]
            body += [(f"{self.written_ast(path)} = {render(self.output_ast(value))}",
                      "written into the argument, as the function does")
                     for path, value in zip(self.graph.writes, written)]
        body.append(("return " + render(self.output_ast(outputs)), ""))
        return self.lines(prologue, *_used_counts(body, locs, self.counts))

    def section(self, node, section):
        """The header of the section `node` is in: forward, backward or tangents; in a
        training step (whose params and state are donated), what follows the backward
        is the optimizer's update, under its own header (Graph.update)."""
        if node.grad_of is not None:
            return "# tangents" if self.graph.kind == "jvp" else "# backward"
        update = f"# {self.graph.update or 'update'}"
        if self.graph.donated and section in ("# backward", update):
            return update
        return "# forward"

    def written_ast(self, path):
        """The target of a write into an argument's container: `bn_param['mean']`."""
        return self.graph.params[path[0]] + "".join(f"[{key!r}]" for key in path[1:])

    def numpy_fallback(self, body, locs, start):
        """A scalar function's statements from `start` on in a `try:`; where a math-module
        form raises, or an input or a value that may overflow silently is not finite, the
        call returns its NumPy twin's result instead: NumPy's infinities, nans and warnings
        (emit_scalar.py says why these cases are all)."""
        call = f"return {self.numpy_twin}({', '.join(self.params)})"
        checked = [self.names[n] for n in _finite_checks(self.graph)]
        tried = [("try:", "")] + [("    " + code if code else code, comment)
                                  for code, comment in body[start:]]
        tail = [(f"except {MATH_ERRORS}:", ""), (f"    {call}", "math's error: NumPy's value")]
        if checked:
            tail += [(f"if not math.isfinite({' + '.join(checked)}):", ""),
                     (f"    {call}", "an inf or a nan: NumPy's warnings")]
        outer = self.outer_numbers()
        head = [(f"if {outer}:", ""), (f"    {call}", "a value of an enclosing trace")] \
            if outer else []
        locs = {(k + 1 + len(head) if k >= start else k): loc for k, loc in locs.items()}
        return body[:start] + head + tried + tail, locs

    def outer_numbers(self):
        """`type(x) is not float`: the test that a number read besides the arguments (a
        closure's x) is not a Box of an enclosing trace (grad(lambda x: x * grad(lambda
        y: x + y)(1.0))), which the NumPy twin follows and math.isfinite would refuse."""
        tests = [f"type({self.names[n]}) is not {_PYTHON_TYPES[n.dtype.kind]}"
                 for n in self.graph.inputs if n.params.get("read") is not None
                 and n in self.names and n in PYTHON_NUMBERS and n.dtype.kind in _PYTHON_TYPES]
        return " or ".join(tests)

    def node_name(self, node):
        """A fresh name after the user's variable, the gradient's value or the primitive;
        a later value of one buffer (emit_memory.one_name) takes the name it has."""
        prefix = "t_" if self.graph.kind == "jvp" else "g_"
        owner = self.shared.get(node)
        if node.prim.helper:
            self.helpers.add(node.prim.helper)
        self.imports.update(node.prim.imports)
        if owner is not None and owner in self.names:
            self.own[node] = self.names[owner] if node is owner else node.prim.name
            return self.names[owner]
        name = self.ns.fresh(_base_name(owner or node, self.cotangent_of, self.own, prefix))
        self.own[node] = name if owner in (None, node) else node.prim.name
        if owner is not None:
            self.names[owner] = name
        return name

    def allocation_lines(self, i):
        """`g_xw = np.empty(...)`: the buffer of each join whose parts are computed into it
        from statement i on (emit_slots.py)."""
        lines = []
        for join in self.joins.alloc.get(i, ()):
            name = self.names[join] = self.node_name(join)
            empty = call_ast("np.empty", [literal_ast(join.shape)],
                             [ast.keyword("dtype", literal_ast(join.dtype))])
            lines.append((render(ast.Assign([ast.Name(name, ast.Store())], empty)),
                          f"{op(join)}: parts computed into it"))
        return lines

    def joined_lines(self, node):
        """Where a join was: its other parts assigned into their slots, and its name for
        a view when a join inside another is read by other statements."""
        lines = [(render(ast.Assign([self.slot_ast(slot, ast.Store())], self.arg_ast(part))), "")
                 for part, slot in self.joins.parts[node]]
        if node in self.joins.bound:
            self.names[node] = self.node_name(node)
            lines.append((render(ast.Assign([ast.Name(self.names[node], ast.Store())],
                                            self.slot_ast(self.joins.slot[node]))), ""))
        return lines

    def slot_ast(self, slot, ctx=None):
        return subscript_ast(slot, self.names[slot.base], ctx or ast.Load())

    def value_ast(self, node, out):
        """The right-hand side of a node's statement; `out`: the dying operand whose
        buffer it writes into (emit_memory.py), or None. One spelling per operation: a
        product is `a @ b`, or `np.matmul(a, b, out=buf)` when written into a buffer."""
        args = [self.arg_ast(a) for a in node.args]
        if out is not None:  # an operand dying here, a buffer dead before, a join's slot
            where = self.slot_ast(out) if type(out) is Slot else self.arg_ast(out)
            if ufunc_of(node.prim) is None:  # a helper that writes into out= (add_at)
                tree = expression(node, args, self.param_ast)
                tree.keywords.append(ast.keyword("out", where))
                return tree
            return call_ast(f"np.{ufunc_of(node.prim)}", args, [ast.keyword("out", where)])
        if node.prim.name == "astype" and node.args[0] in PYTHON_NUMBERS:
            # a Python number has no .astype: np.float32(t)
            return call_ast(render(literal_ast(node.params["dtype"])), args)
        if node in self.contiguous:  # read by several matmuls (emit_memory.py)
            return call_ast("np.ascontiguousarray", [expression(node, args, self.param_ast)])
        if self.numpy_on_numbers(node):  # as the trace computed it: a NumPy scalar
            return call_ast(f"np.{ufunc_of(node.prim)}", args)
        if node.prim.name == "getitem" and type(node.args[0]) is not Node \
                and any(type(a) is Node for a in node.args[1:]):  # const[mask]: a call
            self.helpers.add("_getitem")
            return expression(SimpleNamespace(prim=_GETITEM_CALL, params=node.params),
                              args, self.param_ast)
        return expression(node, args, self.param_ast, self.scalar)

    def lines(self, prologue, body, locs):
        """The function's lines: its head (def, docstring, guards, constants in n), then
        the body, each statement's lines mapped to the user's line it came from."""
        head = wrap(f"def {self.graph.name}({', '.join(self.params)}):")
        if self.graph.doc:
            head += docstring(self.graph.doc, "    ") or \
                ["    " + render(ast.Expr(ast.Constant(self.graph.doc)))]
        if self.standalone:
            head += [line for code in self.static_guards() for line in _line(code, "")]
        for code, comment in prologue + self.local_constant_lines():
            head += _line(code, comment)
        self.line_locs = {}  # every line of a statement the user's line made points at it
        said = None
        for i, (code, comment) in enumerate(body):
            comment, said = ("" if comment == said else comment), comment  # said once
            lines = _line(code, comment)
            if i in locs:
                self.line_locs.update((len(head) + k, locs[i]) for k in range(len(lines)))
            head += lines
        return head

    def once(self, node, run):
        """A statement's comment, said once for the run of statements that one user line
        (or one rule at it) made: `file.py:16  source` on the first forward line of the
        user's statement, `grad of tanh, file.py:16` on the first backward line of a rule,
        only `grad of add` when the rule changes at the same line, nothing when the
        comment would repeat the line before (but a fused numexpr line, which stands for
        much of the user's line, says where it is). Returns (comment, the run it starts)."""
        comment = said = _comment(node, self.graph.kind)
        if node.loc is None:
            return comment, run
        key = (node.grad_of is None, node.loc)
        if run is not None and run[0] == key and op(node) != "fused":  # a numexpr line
            if run[1] == comment:                                     # keeps its place
                return "", run
            if node.grad_of is not None and not recomputed(node):  # another rule at
                return comment.rsplit(", ", 1)[0], (key, comment)        # the same line
        if node.grad_of is None and (run is None or run[0] != key):
            comment = f"{comment}  {source_line(node.loc)}".rstrip()
        return comment, (key, said)

    def saved_line(self, start):
        """`# saved by the forward: h, n, zr and 357 more`: the forward's arrays that the
        backward, from statement `start` on, reads (the residuals a hand-written backward
        would keep), by name, as many as fit on one line; not views, which hold their
        base's memory."""
        read = {a for n in self.graph.nodes[start:] if n.grad_of is not None
                for a in n.args if type(a) is Node}
        saved = [self.names[n] for n in self.graph.nodes[:start] if n in read
                 and n.grad_of is None and n.shape != () and n in self.names
                 and (op(n) not in VIEWS or op(n) == "getitem" and n.params["index"].slots)]
        if not saved:
            return []
        text = "# saved by the forward:"
        for shown, name in enumerate(saved):
            more = f" and {len(saved) - shown} more"
            if len(text) + len(name) + 2 + len(more) > WIDTH - 8 and shown:
                return [(text + more, "")]
            text += (", " if shown else " ") + name
        return [(text, "")]

    def dels(self, nodes):
        """`del` of the arrays that die here: a scalar (a Python float, a NumPy scalar, a
        0-d array) holds no memory worth freeing early."""
        dead = sorted(self.names[n] for n in nodes if n.shape != ())
        return [(f"del {', '.join(dead)}", "")] if dead else []

    def numpy_on_numbers(self, node):
        """Whether `node`, written with Python's operators, would compute a Python number
        where the trace's NumPy call gave a NumPy scalar (np.greater(x, 0) of a float x).
        In a scalar function's NumPy twin, also a derivative's operator on Python numbers
        (a rule's x ** -0.5 of a float x: NumPy's inf at 0.0, as Autograd's, not Python's
        ZeroDivisionError; the values are all float64 there, so no dtype changes)."""
        if self.scalar or not any(type(a) is Node for a in node.args) or \
                node in PYTHON_NUMBERS and not (self.twin and node.grad_of is not None):
            return False
        template = node.prim.template
        numpy = isinstance(template, str) and not template.startswith("np.") \
            and ufunc_of(node.prim) is not None \
            and all(a in PYTHON_NUMBERS and a not in self.made_numpy if type(a) is Node
                    else type(a) in (int, float, bool) for a in node.args)
        if numpy and node in PYTHON_NUMBERS:  # a twin's: its readers see a NumPy scalar
            self.made_numpy.add(node)
        return numpy

    def raising(self, node, stmt, comment, locs, at):
        """A call that can raise on some values, traced on values where it did not: a raise
        is a GuardFailure, so the call traces the path it takes (an `except` in the user's
        code, or the error itself)."""
        self.helpers.add("GuardFailure")
        if node.loc is not None:
            locs[at + 1] = node.loc
        where = _where(node.loc) if node.loc else "?"
        message = f"{where}: {node.prim.name} raised {{error!r}}, which it did not when traced"
        return [("try:", ""), (f"    {stmt}", comment),
                (f"except {_error_name(RAISES[node.prim.name])} as error:", ""),
                (f"    raise GuardFailure(f{message!r}) from None", "")]

    def marked(self, body, node, mark, lines, locs):
        """A statement of a user line in a `try:` body (a raise at run time, which the
        trace did not see, is a GuardFailure: the call traces the path it takes) and/or
        under the np.errstate it was traced in. Consecutive statements of one user line
        share one block (of any lines, under an errstate alone: no message names a line)."""
        depth = bool(mark.errstate) + mark.tried
        lines = [("    " * depth + code, comment) for code, comment in lines]
        block, key = self.block, node.stack if mark.tried else mark
        if block is not None and block[0] == key and block[1] == len(body):
            at = len(body) - block[2]  # before the block's `except` lines
            body[at:at] = lines
            self.block = (key, len(body), block[2])
            if node.loc is not None and at not in locs:
                locs[at] = node.loc
            return
        head, tail = [], []
        if mark.tried:
            self.helpers.add("GuardFailure")
            where = _where(node.loc) if node.loc else "?"
            message = f"{where}: raised {{error!r}}, which it did not when traced"
            head.append(("try:", ""))
            tail = [(f"except {_VALUE_ERRORS} as error:", ""),
                    (f"    raise GuardFailure(f{message!r}) from None", "")]
        if mark.errstate:
            head.append(("    " * mark.tried + f"with {errstate_code(mark.errstate)}:", ""))
        if node.loc is not None:
            locs[len(body) + len(head)] = node.loc
        body += head + lines + tail
        self.block = (key, len(body), len(tail))

    def tried_guard(self, node, lines):
        """A guard's read in a `try:` body (`int(x)` of a NaN raises): a raise, which the
        trace did not see, is a GuardFailure too."""
        p = node.params
        if p["test"] == "raises" or type(p["outcome"]) is Raised:
            return lines
        where = _where(node.loc) if node.loc else "?"
        message = f"{where}: raised {{error!r}}, which it did not when traced"
        return [("try:", ""), *[("    " + code, comment) for code, comment in lines],
                ("except GuardFailure:", ""), ("    raise", ""),
                (f"except {_VALUE_ERRORS} as error:", ""),
                (f"    raise GuardFailure(f{message!r}) from None", "")]

    def guard_lines(self, node):
        """`if <the value reads otherwise>: raise GuardFailure(...)`, the guard's check."""
        self.helpers.add("GuardFailure")
        p = node.params
        if p["test"] == "raises":
            return self.raises_lines(node)
        x, *y = [render(self.arg_ast(a)) for a in node.args]
        if type(p["outcome"]) is Dim:  # a count the code reads at run time (generalize_counts.py)
            var = p["outcome"].var
            counted, served = _COUNTED[p["test"]]
            lines = [(f"{var} = {_READ_FORMS[p['test']].format(x=x)}",
                      f"{counted}, {_where(node.loc)}" if node.loc else "")]
            if p.get("lo"):
                self.helpers.add("GuardFailure")
                message = (f"{_where(node.loc) if node.loc else '?'}: " +
                           served.format(f"{{{var}}}", p["lo"]) +
                           " (the function reads a size in Python)")
                lines += [(f"if {var} < {p['lo']}:", ""),
                          (f"    raise GuardFailure(f{message!r})", "")]
            return lines
        read = _READ_FORMS.get(p["test"], p["test"] + "({x})").format(
            x=x, y=y[0] if y else "", index=", ".join(map(repr, p["index"])))
        if p["test"] == "index":
            self.imports.add("operator")
        outcome = p["outcome"]
        where = _where(node.loc) if node.loc else "?"
        code = source_line(node.loc) if node.loc else ""
        if type(outcome) is Raised:  # the read raised when traced, in a `try:`
            message = (f"{where}: `{code}` raised {outcome.error.__name__} when traced, and "
                       "does not now")
            return [("try:", f"guard: {code}" if code else "guard"), (f"    {read}", ""),
                    (f"except {_error_name(outcome.error)}:", ""), ("    pass", ""),
                    *_other_raise(where, outcome.error), ("else:", ""),
                    (f"    raise GuardFailure({message!r})", "")]
        if p["test"] in ("bool", "aliases", "iscomplexobj"):
            test = f"not {read}" if outcome else read
        elif isinstance(outcome, float) and np.isnan(outcome):
            test = f"not np.isnan({read})"
        elif type(outcome) is float and outcome == 0.0:  # and its sign: -0.0 is not 0.0
            test = f"{read} != 0.0 or np.copysign(1.0, {read}) != {np.copysign(1.0, outcome)}"
        else:
            shown = repr(outcome) if type(outcome) is str else render(literal_ast(outcome))
            test = f"{read} != {shown}"
        where = _where(node.loc) if node.loc else "?"
        code = source_line(node.loc) if node.loc else ""
        message = f"{where}: `{code}` was {outcome!r} when traced" if p["test"] == "bool" \
            else f"{where}: `{code}` read {p['test']}() = {outcome!r} when traced"
        if p["test"] == "layout":  # the write is traced for this layout (rules/numpy_api/writes.py)
            self.helpers.add("_layout")
            message = f"{where}: `{code}` was traced with {x} " + _LAYOUTS.get(
                outcome, f"non-contiguous, strides {outcome}")
        elif p["test"] == "aliases":
            message = f"{where}: `{code}` was traced with {x} and {y[0]} not sharing memory"
        elif p["test"] in _COUNTED:
            message = f"{where}: `{code}` " + _COUNT_GUARDED[p["test"]].format(outcome)
        reads = _captured_labels(node) if p["test"] in READS_OF_VALUES else ""
        failure = f"{message!r}, {reads!r}" if reads else repr(message)
        return [(f"if {test}:", f"guard: {code}" if code else "guard"),
                (f"    raise GuardFailure({failure})", "")]

    def raises_lines(self, node):
        """try: <the call> except <what it raised>: pass, else: raise GuardFailure(...)."""
        p = node.params
        call = SimpleNamespace(prim=p["call"], params=p["call_params"])
        expr = expression(call, [self.arg_ast(a) for a in node.args], self.param_ast)
        self.imports.update(p["call"].imports)
        where = _where(node.loc) if node.loc else "?"
        code = source_line(node.loc) if node.loc else ""
        message = f"{where}: `{code}` raised {p['outcome']} when traced, and does not now"
        call = [(f"    {render(expr)}", "")]
        if p.get("errstate"):  # raised under np.errstate(...): checked under it (raising.py)
            call = [(f"    with {errstate_code(p['errstate'])}:", ""), ("    " + call[0][0], "")]
        error = p.get("error") or RAISES[p["call"].name]
        return [("try:", f"guard: {code}" if code else "guard"), *call,
                (f"except {_error_name(error)}:", ""), ("    pass", ""),
                *(_other_raise(where, error) if p.get("error") is not None else ()),
                ("else:", ""), (f"    raise GuardFailure({message!r})", "")]

    def captured_checks(self):
        """Read again what the trace read outside the arguments (capture.py): arrays and
        numbers are inputs, checked for type, shape and dtype; the rest (ints, strings,
        functions chosen by name) are guards. A standalone module keeps them as constants."""
        reads = [n for n in self.graph.inputs if n.params.get("read") is not None]
        if self.standalone or not (reads or self.graph.captured):
            return []
        self.helpers.add("GuardFailure")
        lines = []
        for node in reads:
            read = node.params["read"]
            name = self.names[node] = self.ns.fresh(read.name)
            lines.append((f"    {name} = {self.read_code(read)}", read.label))
            lines += self.type_check(node, name, read)
        for check in self.graph.captured:
            read = check.read
            if check.test == "is":
                was = self.object_code(check.value, read)
                test = f"{self.read_code(read, 'is')} is not {was}"
            elif check.test == "same":  # its contents, against a private copy
                was = self.object_code(check.value, read)
                same = self.handover(same_contents, "same_contents",
                                     "autodiffgen.trace.capture's comparison")
                test = f"not {same}({self.read_code(read, 'same')}, {was})"
                message = (f"{os.path.basename(read.where)}: {read.label} holds other values "
                           "than when traced (the traced code keeps them as constants)")
                lines += [(f"    if {test}:", "guard: " + read.label),
                          (f"        raise GuardFailure({message!r})", "")]
                continue
            elif check.test in ("len", "keys"):  # a container rebuilt from its entries
                shape = "len" if check.test == "len" else "list"
                was = repr(check.value)
                test = f"{shape}({self.read_code(read, check.test)}) != {was}"
                what = f"no longer has {was} entries" if shape == "len" \
                    else f"no longer has the keys {was}"
                lines += self._failing(test, read, what, "guard: " + read.label)
                continue
            else:
                was = render(literal_ast(check.value)) if isinstance(
                    check.value, (np.generic, float)) else repr(check.value)
                test = f"{self.read_code(read, '==')} != {was}"
            lines += self._failing(test, read, f"is no longer {was}", "guard: " + read.label)
        where = os.path.basename(self.graph.captured[0].read.where if self.graph.captured
                                 else reads[0].params["read"].where)
        message = f"{where}: a global, closure variable or attribute it read is gone"
        head = "# what it reads besides its arguments: read again (inputs), or checked (guards)"
        return ([(head, ""), ("try:", "")] + lines +
                [("except (LookupError, AttributeError, ValueError):", ""),
                 (f"    raise GuardFailure({message!r}) from None", "")])

    def _failing(self, test, read, what, comment=""):
        message = f"{os.path.basename(read.where)}: {read.label} {what}, as it was when traced"
        return [(f"    if {test}:", comment), (f"        raise GuardFailure({message!r})", "")]

    def read_code(self, read, test=None):
        """`module_globals['config'].scale`: the place a value was read from."""
        holder = self.handover(*_holder(read))
        if self.pure:  # an enclosing trace runs this code: the read is its input or guard
            reader = self.handover(read_traced, "read_traced", "autodiffgen.trace.capture's reader")
            return f"{reader}({holder}, {read.chain!r}{'' if test is None else ', ' + repr(test)})"
        return holder + chain_text(read.chain)

    def type_check(self, node, name, read):
        kind = node.params["type"]
        if kind is np.ndarray:
            dtype = self.dtype_name(node.dtype)
            test = (f"{name}.__class__ is not np.ndarray or {name}.shape != "
                    f"{render(literal_ast(tuple(node.shape)))} or {name}.dtype != {dtype}")
            what = f"is no longer a {node.dtype}{list(node.shape)} array"
        else:
            spelled = kind.__name__ if kind in (float, complex, int) else \
                f"np.random.{kind.__name__}" if kind.__module__.startswith("numpy.random") \
                else f"random.{kind.__name__}" if kind.__module__ == "random" \
                else f"np.{kind.__name__}"
            test = f"{name}.__class__ is not {spelled}"
            article = "an" if kind.__name__[0] in "aeiou" else "a"
            what = f"is no longer {article} {kind.__name__}"
        return self._failing(test, read, what)

    def dtype_name(self, dtype):
        key = ("dtype", np.dtype(dtype).str)
        entry = self.constants.get(key)
        if entry is None:
            entry = self.constants[key] = (self.ns.fresh(f"dtype_{np.dtype(dtype).name}"),
                                           np.dtype(dtype))
        return entry[0]

    def object_code(self, obj, read):
        """How the code names an object a guard compares against: np.sin, or a handover."""
        name = getattr(obj, "__name__", None)
        if obj is None:
            return "None"
        if type(name) is str and name.isidentifier() and getattr(np, name, None) is obj:
            return f"np.{name}"
        return self.handover(obj, f"traced_{read.name}", f"{read.label} when traced")

    def handover(self, obj, base, what):
        """A module-level name for an object the code reads but cannot write out (the
        user's globals, a closure cell): load() hands it over."""
        key = ("handover", id(obj))
        entry = self.constants.get(key)
        if entry is None:
            entry = self.constants[key] = (self.ns.fresh(base), obj, what)
        return entry[0]

    def static_guards(self):
        """A standalone module cannot retrace: refuse a non-array argument's new value."""
        lines = []
        safe = dict(zip(self.graph.params, self.params))
        for name, value in self.graph.statics.items():
            name = safe.get(name, name)
            if value is None:
                test = f"{name} is not None"
            elif isinstance(value, float) and np.isnan(value):
                test = f"not np.isnan({name})"
            else:
                test = f"{name} != {render(literal_ast(value))}"
            message = (f"{name}={{{name}!r}}, but this code was generated for "
                       f"{name}={value!r}: regenerate it")
            lines += [f"if {test}:", f"    raise ValueError(f{message!r})"]
        return lines

    def unpack_inputs(self):
        """Names for the inputs (a Python number stays one, as in the user's code: weak
        beside a float32 array; see numpy_on_numbers for NumPy calls on it)."""
        lines = []
        for node in self.graph.inputs:
            if node in self.names:  # read by captured_checks
                continue
            path = self.graph.paths.get(node) or node.params["path"]
            if len(path) == 1:
                self.names[node] = name = self.params[path[0]]
                self.ns.used.add(name)
                continue
            name = self.ns.fresh(self.saved.get(node) or node.name or
                                 (node.prim.name if node.prim else "v"))
            self.names[node] = name
            saved = node in self.graph.paths
            lines.append((f"{name} = {self.path_text(path)}",
                          "saved by the forward pass" if saved else "unpack the argument"))
        return lines

    def last_uses(self):
        """statement index -> nodes whose last use it is (outputs and inputs excluded, but
        for donated inputs)."""
        keep = set(self.graph.inputs) - self.graph.donated
        keep |= {n for n in leaves(self.graph.outputs) if type(n) is Node} | set(self.inline_at)
        last, nodes = {}, self.graph.nodes
        for i, node in enumerate(nodes):
            at = i
            while nodes[at] in self.inline_at:  # an inlined `x.T` reads x where it is
                at = self.inline_at[nodes[at]]   # written (`x.T.T` too)
            for arg in node.args:
                if type(arg) is Node and arg not in keep:
                    last[arg] = max(at, last.get(arg, at))
        by_index = {}
        for node, i in last.items():
            by_index.setdefault(i, []).append(node)
        return by_index

    def output_ast(self, out):
        node = kind_of(type(out))
        if node is not None:  # an OrderedDict, a defaultdict, a dataclass, a registered type
            return self.container_ast(out, node)
        if is_namedtuple(out):  # rebuilt as the user's own namedtuple class
            return ast.Call(ast.Name(self.constant_name(type(out)), ast.Load()),
                            [self.output_ast(o) for o in out], [])
        if isinstance(out, tuple):
            return ast.Tuple([self.output_ast(o) for o in out], ast.Load())
        if isinstance(out, list):
            return ast.List([self.output_ast(o) for o in out], ast.Load())
        if isinstance(out, dict):
            return ast.Dict([ast.Constant(k) for k in out], [self.output_ast(v) for v in out.values()])
        if isinstance(out, (np.ndarray, SymArray)):
            return call_ast("np.copy", [self.arg_ast(out)])
        return self.arg_ast(out)

    def container_ast(self, out, node):
        """The user's container rebuilt: `OrderedDict([('W', g_W), ...])`,
        `defaultdict(list, {...})`, `Params(W=g_W, b=g_b)`, `unflatten(aux, [...])`."""
        kind = type(out)
        static, keys, children = node.parts(out)
        values = [self.output_ast(c) for c in children]
        if kind is collections.OrderedDict:
            pairs = [ast.Tuple([ast.Constant(k), v], ast.Load()) for k, v in zip(keys, values)]
            return ast.Call(ast.Name(self.constant_name(kind), ast.Load()),
                            [ast.List(pairs, ast.Load())], [])
        if kind is collections.defaultdict:
            factory = static[0]
            factory_ast = ast.Constant(None) if factory is None else \
                ast.Name(self.function_constant(factory, kind, "factory"), ast.Load())
            return ast.Call(ast.Name(self.constant_name(kind), ast.Load()), [
                factory_ast, ast.Dict([ast.Constant(k) for k in keys], values)], [])
        if keys and type(keys[0]) is Field or not keys and registration(kind) is None:
            return ast.Call(ast.Name(self.constant_name(kind), ast.Load()), [],
                            [ast.keyword(str(k), v) for k, v in zip(keys, values)])
        unflatten = self.function_constant(registration(kind)[1], kind, "unflatten")
        return ast.Call(ast.Name(unflatten, ast.Load()),
                        [self.static_ast(static, kind), ast.List(values, ast.Load())], [])

    def static_ast(self, value, kind):
        """A registered type's aux_data: written out when it is a literal, else a constant
        the loader hands over."""
        if _literal(value):
            return literal_ast(value)
        key = ("object", id(value))
        if key not in self.constants:
            self.constants[key] = (self.ns.fresh(f"{kind.__name__}_aux_data"), value,
                                   f"the aux_data of a {kind.__name__}")
        return ast.Name(self.constants[key][0], ast.Load())

    def function_line(self, name, fn):
        """A custom primitive's function: imported by a standalone module, handed over to
        an in-memory one."""
        module = getattr(fn, "__module__", None)
        if self.standalone:
            if module in (None, "__main__") or "<" in fn.__qualname__:
                raise ValueError(f"{fn.__qualname__} (a custom primitive or a namedtuple "
                                 f"class the code returns) is defined in "
                                 f"{module or 'no module'}, so a standalone module cannot "
                                 "import it: define it at the top level of an importable "
                                 "module")
            return wrap(f"{name} = __import__({module!r}, fromlist=[{fn.__name__!r}])"
                        f".{fn.__qualname__}")
        self.injected[name] = fn
        return _line(f"{name} = None", f"{module}.{fn.__qualname__}, which autodiffgen fills "
                     "in when it loads this module", indent="", align=False)

    def constant_lines(self):
        lines = []
        for name, array, *what in self.constants.values():
            if isinstance(array, np.dtype):
                lines.append(f"{name} = np.dtype({array.str!r})")
                continue
            if what:
                self.injected[name] = array
                lines += _line(f"{name} = None", f"{what[0]}, which autodiffgen fills in when "
                               "it loads this module", indent="", align=False)
                continue
            if not isinstance(array, np.ndarray):
                lines += self.function_line(name, array)
                continue
            made = constant_ast(array, self.standalone)
            what = f"{array.dtype.name}{list(array.shape)}"
            if made is None:  # too big to print: load() hands it over after exec
                self.injected[name] = array
                lines += _line(f"{name} = None", f"a {what} constant, which autodiffgen "
                               "fills in when it loads this module", indent="", align=False)
            else:
                lines += _line(f"{name} = {render(made)}", what, indent="")
        return lines


# (random: Python's, rules/pyrandom.py; not np.random)
_MODULE_USE = {name: re.compile(rf"(?<![\w.]){name}\.") for name in ("np", "math", "random")}


def _names_used(parts):
    """Which of np, math and random the code reads (not a comment quoting the user's source): a
    use before any `  # ` on its line. Each name's first such use ends its search."""
    used = set()
    for name, pattern in _MODULE_USE.items():
        for part in parts:
            if name + "." in part and any(  # (a substring test first: most parts lack one)
                    part.find("  # ", part.rfind("\n", 0, m.start()) + 1, m.start()) < 0
                    for m in pattern.finditer(part)):
                used.add(name)
                break
    return used


def _used_counts(body, locs, counts):
    """The body (and its line locations) without the definitions of counts that no line
    reads (a mask whose count no size depends on: `x[m]` only scattered back)."""
    unused = {c for c in counts if not any(re.search(rf"\b{c}\b", code)
                                            for code, _ in body if not code.startswith(c + " = "))}
    if not unused:
        return body, locs
    kept = [i for i, (code, _) in enumerate(body) if code.split(" = ", 1)[0] not in unused]
    where = {old: new for new, old in enumerate(kept)}
    return [body[i] for i in kept], {where[i]: loc for i, loc in locs.items() if i in where}


def _mentions(value, names):
    """Whether a symbolic value is a formula in one of `names` (the counts of
    generalize_counts.py)."""
    if not names:
        return False
    kind = type(value)
    if kind is SymArray:
        return _mentions(value.shape, names) or _mentions(value.fill, names)
    if kind in (tuple, list):
        return any(_mentions(v, names) for v in value)
    return getattr(value, "var", None) in names and kind in (Dim, Scale)


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


def _inlined(graph):
    """{`x.T` node: the index of the one statement that reads it}: a transpose is a view,
    so a reader writes `h.T @ g` rather than naming it first. Not a value the user named
    or a gradient (its name says what it is), an output or a guard's operand."""
    uses = {node: None for node in leaves(graph.outputs) if type(node) is Node}
    for i, node in enumerate(graph.nodes):
        for arg in node.args:
            if type(arg) is Node:
                uses[arg] = None if arg in uses or op(node) == "guard" else i
    return {node: uses[node] for node in graph.nodes
            if op(node) == "transpose" and node.params.get("axes") is None
            and uses.get(node) is not None and node.name is None
            and node not in graph.derivative_of}


def _all_python_floats(graph):
    """Every value is a Python-float scalar with a math-module form (emit_scalar.py), and
    every constant is a finite number (Emitter.numpy_fallback checks computed values)."""
    def scalar_constant(a):
        return type(a) is Node or np.ndim(a) == 0 and \
            isinstance(a, (int, float, np.generic, np.ndarray)) and bool(np.isfinite(a))
    return all(op(n) == "guard" or n.shape == () and n.dtype == np.float64 and op(n) in SCALAR
               and all(scalar_constant(a) for a in n.args) for n in graph.nodes)


READS_OF_VALUES = ("bool", "float", "complex", "int", "index", "item", "round")


def _captured_labels(guard):
    """`T`, `config.scale`: what a guard's test reads, when it depends only on values read
    from outside the arguments (a global the user rebinds, not data). The GuardFailure
    carries it, so that the cache can name it when it keeps changing (api.py)."""
    labels, seen, stack = set(), set(), list(guard.args)
    while stack:
        node = stack.pop()
        if type(node) is not Node or id(node) in seen:
            continue
        seen.add(id(node))
        if node.prim is None:
            read = node.params.get("read")
            if read is None:
                return ""
            labels.add(read.label)
        stack.extend(node.args)
    return ", ".join(sorted(labels))


def _holder(read):
    """(the object a read starts at, its name in the module, what it is)."""
    holder = read.holder
    where = os.path.basename(read.where)
    if is_globals(holder):
        return holder, "module_globals", f"the globals of {holder.get('__name__')} ({where})"
    if read.var and read.chain[:1] == (("attr", "cell_contents"),):
        return holder, f"cell_{read.var}", f"the closure cell {read.var} ({where})"
    if isinstance(holder, types.FunctionType):  # its defaults
        return holder, holder.__name__, f"the function {holder.__qualname__} ({where})"
    return holder, "holder", f"the {type(holder).__name__} {read.label} ({where})"


# what NumPy raises on values (an index out of range, a NaN to int(), a FloatingPointError
# under np.errstate, LinAlgError, a ValueError subclass): in a `try:` line, such a raise at
# run time is a GuardFailure (raising.py)
_VALUE_ERRORS = "(ArithmeticError, LookupError, TypeError, ValueError)"


def _other_raise(where, error):
    """A raise of another class than the traced one: the user's `except` may not catch
    it, so the call traces again and finds out."""
    message = f"{where}: raised {{error!r}}, not what it raised when traced"
    others = ", ".join(n for n in _VALUE_ERRORS[1:-1].split(", ") if n != error.__name__)
    return [(f"except ({others}) as error:", ""),
            (f"    raise GuardFailure(f{message!r}) from None", "")]


def _error_name(cls):
    """How generated code names an exception class: np.linalg.LinAlgError, ValueError."""
    module = cls.__module__
    if module == "builtins":
        return cls.__name__
    if module.startswith("numpy.") and getattr(np, module.split(".")[1], None) is not None:
        return f"np.{module.split('.', 1)[1]}.{cls.__name__}"
    return _VALUE_ERRORS  # a class the code cannot name: any raise NumPy makes on values


def _import_groups(imports):
    """The modules a generated module imports, as isort groups them: the standard library,
    then third-party modules (numpy, numexpr)."""
    stdlib = sorted(m for m in imports if m.split()[0] in sys.stdlib_module_names)
    return [group for group in (stdlib, sorted(set(imports) - set(stdlib))) if group]


def _array_name(array):
    """A module-level constant array's name, after how it is made (emit_ast.constant_ast)."""
    flat = array.ravel()
    if array.ndim == 0 or array.size == 0:
        return "const"
    if (flat == flat[0]).all():
        fill = flat[0].item()
        return "zeros" if fill == 0 else "ones" if fill == 1 else "full"
    if array.ndim == 1 and np.issubdtype(array.dtype, np.integer) \
            and (array == np.arange(array.size)).all():
        return "indices"
    return "const"


def _line(code, comment, indent="    ", align=True):
    """The lines of one statement and its comment, none over WIDTH characters where it
    can be helped: the comment after the code (at _COMMENT_COLUMN if `align`) if it fits
    there, else on a line of its own above it (the user's own `# ...` left out, then cut
    short, if it does not fit there either); the code wrapped (emit_ast.wrap)."""
    code = indent + code if code else ""
    if not comment:
        return wrap(code) if code else [""]
    if code.startswith(indent + "#") or not code:
        return [f"{indent}{code.strip()}".rstrip()]
    lines = wrap(code)
    first = lines[0]
    for pad in ((_COMMENT_COLUMN,) if align else ()) + (0,):
        joined = f"{first.ljust(pad)}  # {comment}"
        if len(joined) <= WIDTH:
            return [joined] + lines[1:]
    lead = " " * (len(first) - len(first.lstrip()))
    above = f"{lead}# {comment}"
    if len(above) > WIDTH and "  # " in comment:  # the user's comment on the line quoted
        above = f"{lead}# {comment.rsplit('  # ', 1)[0]}"
    if len(above) > WIDTH:
        above = above[:WIDTH - 3].rstrip() + "..."
    return [above] + lines


# a constant indexed by computed arrays, written as a call that a trace of the generated
# code can follow (ndarray.__getitem__ cannot take a traced index): generated_helpers._getitem
def _saved_names(forward, graph):
    """A backward function's saved inputs named as the forward function that saved them
    named them: `tanh = residuals[0]` where the forward returns (out, (tanh, ...))."""
    outputs = forward.graph.outputs if forward is not None else None
    if not graph.paths or type(outputs) is not tuple or len(outputs) < 2 \
            or type(outputs[1]) is not tuple \
            or graph.name.removesuffix("_bwd") != forward.graph.name.removesuffix("_fwd"):
        return {}
    return {node: forward.names.get(outputs[1][path[1]]) for node, path in graph.paths.items()
            if len(path) == 2 and path[0] == 0 and path[1] < len(outputs[1])}


_GETITEM_CALL = SimpleNamespace(name="getitem", template="_getitem({0}, np.s_[{index}])",
                                defaults={})


def emit_module(graphs, standalone=False, pure=False, extra=()):
    """Module source for one or more graphs, plus the arrays to inject (if not standalone).

    Returns (source, injected, locs): `injected` holds what is too large to write out,
    which the in-memory module receives in its namespace (a standalone module writes every
    constant out); `locs` maps a source line number to the user's (file, line) it came
    from, so that tracing generated code (for higher derivatives) points at the user's
    lines. Runtime helpers are copied into the module, so the source runs as it reads.
    The graphs are final (pipeline.finish): the emitter only writes them out. `extra`:
    more top-level parts written after the functions (a standalone module's entries).
    """
    functions, function_locs, helpers, imports, constants = [], [], set(), set(), {}
    shared = Namespace(p for graph in graphs for p in graph.params)  # no constant shadows one
    # what no local may shadow: the functions' names so far, every function's parameters
    # (a constant named in one function must not be a later one's parameter)
    emitter, module = None, {p for graph in graphs for p in graph.params}
    for graph in graphs:
        forward, emitter = emitter, Emitter(graph, standalone, constants, pure)
        emitter.saved = _saved_names(forward, graph)
        emitters = [emitter]
        if emitter.scalar:  # and its NumPy twin, for NumPy's values where math's differ
            emitter.numpy_twin = shared.fresh(f"{graph.name}_numpy")
            emitters.insert(0, Emitter(_numpy_twin(graph, emitter.numpy_twin), standalone,
                                       constants, pure))
            emitters[0].twin = True
        texts = []
        for each in emitters:  # the twin first: the other's names avoid its constants'
            # another function's locals it may repeat (`tanh` in a forward and its backward)
            each.ns.used |= module | {entry[0] for entry in constants.values()}
            texts.append(("\n".join(each.function()), each.line_locs))
            module.add(each.graph.name)
            shared.used.add(each.graph.name)
            helpers |= each.helpers
            imports |= each.imports
        for text, line_locs in reversed(texts):  # the function, then its twin
            functions.append(text)
            function_locs.append(line_locs)
    constant_lines = emitter.constant_lines()  # the module's constants, shared by its functions
    helpers = {h for h in helpers  # not a helper whose call became a statement (`h[i] += v`)
               if any(h in text for text in functions) or any(h in text for text in extra)}
    injected = emitter.injected
    with PARSE_LOCK:  # getsource of a class parses its module (see raising.PARSE_LOCK)
        parts = [inspect.getsource(HELPERS[name]).rstrip() for name in sorted(helpers)]
    if constant_lines:
        parts.append("\n".join(constant_lines))
    parts += functions + list(extra)
    used = _names_used(parts)
    imports |= {module for name, module in (("np", "numpy as np"), ("math", "math"),
                                            ("random", "random")) if name in used}
    header = list(_LOADED_HEADER) if injected else [
        f'"""Generated by autodiffgen {__version__}. Do not edit: regenerate it."""']
    if imports:
        for group in _import_groups(imports):  # isort: the standard library first
            header += [""] + [f"import {module}" for module in group]
    # isort (ruff I001): one blank line between the imports and a statement, two before a def
    gap = "\n\n" if constant_lines and not helpers else "\n\n\n"
    source = "\n".join(header) + gap + "\n\n\n".join(parts) + "\n"
    locs, start = {}, source.count("\n") + 1
    start -= sum(part.count("\n") + 3 for part in extra)  # each part and the blank lines
    for text, line_locs in zip(reversed(functions), reversed(function_locs)):
        start -= text.count("\n") + 1
        locs.update({start + i: loc for i, loc in line_locs.items()})
        start -= 2  # the blank lines between parts
    return source, injected, locs


# A module with names autodiffgen fills in when it loads it (`x = None  # ..., which
# autodiffgen fills in`) fails as printed (module_globals['predict'] of None): it says so on
# its first line, and where a module that runs alone comes from.
_LOADED_HEADER = (
    ('"""Runs only inside autodiffgen, which fills in the None names; emit -o writes a '
     'standalone module.'), "",
    f"Generated by autodiffgen {__version__}. From Python, autodiffgen.emit(f, *args,",
    "standalone=True) writes a standalone module. Do not edit: regenerate it.", '"""')


_PYTHON_TYPES = {"f": "float", "i": "int", "b": "bool"}  # a Python number's, by its dtype's kind


def _finite_checks(graph):
    """The values whose finiteness a scalar function checks (numpy_fallback): the float
    inputs and the values of OVERFLOWS, but those a later checked value of PROPAGATES
    reads, as its being finite says they are (last first, as read in the code)."""
    known, checked = set(), []
    for node in reversed(graph.nodes):
        if node not in known and op(node) in OVERFLOWS:
            checked.append(node)
            known.add(node)
        if node in known and op(node) in PROPAGATES:
            known.update(a for a in node.args if type(a) is Node)
    checked += [n for n in reversed(graph.inputs) if n.dtype.kind == "f" and n not in known]
    return checked[::-1]


def _numpy_twin(graph, name):
    """The graph written with NumPy calls, which a scalar function (Emitter.scalar) runs
    where the math module's forms would not give NumPy's values and warnings."""
    return dataclasses.replace(
        graph, name=name, scalar=False,
        doc=f"{graph.name} with NumPy calls: its values where math raises or a value "
            "is not finite (NumPy's infinities, nans and warnings).")


def _literal(value):
    """Whether a registered type's aux_data can be written as a Python literal."""
    if value is None or type(value) in (bool, int, float, str, bytes):
        return type(value) is not float or np.isfinite(value)
    return type(value) is tuple and all(map(_literal, value))
