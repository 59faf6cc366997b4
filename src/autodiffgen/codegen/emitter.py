"""Planned graphs -> Python source: one primitive per line, readable names, comments, `del`.

`emit_module` plans each final graph (plan/planner.py) and writes it as one function with
an Emitter, then assembles the module: the runtime helpers the code calls, the shared
constants, the functions, the imports it reads. The Emitter prints; the plan decided the
order, the buffers, the in-place writes and the `del`s.

Statements are built as `ast` nodes from each primitive's template (expressions.py) and
rendered with astor (behind `render`), or filled into the text of an earlier statement
of the same layout (text.py). Comments are not part of Python's AST, so each statement is
rendered alone and its trailing comment appended (layout.py). The Emitter's other parts
are its mixins, one module each: guards.py (checks that raise GuardFailure),
constants.py (names of what the code reads but does not compute), arguments.py (inputs
unpacked, results rebuilt), layout.py (comments, sections, lines), fallback.py (a
function of Python floats and its NumPy twin).
"""

import ast
import inspect
import re
import sys
from types import SimpleNamespace

import numpy as np

from .._version import __version__
from ..generated_helpers import HELPERS
from ..graph import Node, op
from ..graph.size_formulas import SymArray
from ..plan.planner import Plan, buffer_of, plan
from ..plan.slots import Slot, subscript_ast
from ..rules.buffers import ufunc_of
from ..trace.count_sources import count_var
from ..trace.naming import RESERVED, Namespace
from ..trace.recording import RAISES
from ..tree import leaves
from .arguments import Arguments
from .constants import Constants
from .expressions import (
    PARSE_LOCK,
    call_ast,
    copied,
    expression,
    literal_ast,
    outer_product,
    render,
    vector_product,
)
from .fallback import NumpyFallback, all_python_floats, twin_graph
from .guards import Guards
from .layout import Layout
from .loops import Loops, Row
from .text import Texts, statement


# ---- the function -----------------------------------------------------------------------
def _base_name(node, cotangent_of, names, prefix="g_"):
    if node in cotangent_of:  # named after its value, even if that value is never computed
        of = cotangent_of[node]
        return prefix + (names.get(of) or of.name or (of.prim.name if of.prim else "input"))
    if node.name:
        return node.name
    return node.prim.name


class Emitter(Guards, Constants, Arguments, Layout, NumpyFallback, Loops):
    """Turns one planned Graph into the lines of one function (and its module-level
    constants). `planned`: a Plan (plan/planner.py), or a final Graph, planned here.
    Names come from the user's variables, the gradient's value or the primitive; a
    chain the plan keeps in one buffer (plan.owner) is one name."""

    def __init__(self, planned, standalone=False, constants=None, pure=False):
        self.plan = planned if type(planned) is Plan else plan(planned, pure)
        self.graph = graph = self.plan.graph
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
        self.scalar = graph.scalar and all_python_floats(graph) and not graph.marks
        self.numpy_twin = None  # the name of the NumPy function a scalar one falls back to
        self.twin = False  # this is such a function (numpy_on_numbers)
        self.made_numpy = set()  # its derivatives of Python numbers written as NumPy calls
        self.pure = pure  # no writes into dead buffers (code an enclosing trace will read)
        self.inline_ast = {}  # `x.T` read once (plan.inline): its ast, where it is read
        self.texts = Texts()
        self.paths_checked = {}  # path length -> whether path_text's is astor's text
        self.scan_names = {}  # scan node -> the names of its outputs (codegen/loops.py)
        self.nested = False  # the body of a loop (codegen/loops.py)
        self.exit_check = []  # a `while` loop's test, printed after its step (guards.py)
        self.whole_lists = {}  # a stack of a list argument's items: arguments.py
        # a loop's body: the joins whose buffer serves every step, allocated before it
        self.reused, self.before_loop = frozenset(), []
        self.loop_variables = set()  # `t`, the loop variable of every loop it has
        self.preset = {}  # node -> the name it takes (a loop's carry: codegen/loops.py)

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

    def function(self):
        """The function's source lines (with module-level constants first)."""
        prologue = self.batch_guard()  # first: it takes the batch size's name
        self.counts = {v for v in map(count_var, self.graph.nodes) if v}
        self.ns.used.update(self.counts)
        self.pending = []  # lines of count-sized constants the next statement reads
        body = self.captured_checks() + self.unpack_inputs()
        start = len(body)  # the statements a scalar function tries (numpy_fallback)
        locs = {}  # body index -> the user's (file, line) the statement came from
        self.statements(body, locs)
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

    def statements(self, body, locs, section=None):
        """The graph's statements as (code, comment) entries appended to `body`, each
        user line's first entry noted in `locs` (body index -> (file, line)); `section`,
        the header already above them (a loop's body is in its loop's section)."""
        plan = self.plan
        self.own = {}  # node -> its own name, which a gradient's name is made from
        run_loc = note = None
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
                body += self.dels(node)
                continue
            if node in plan.inline:
                self.inline_ast[node] = expression(node, [self.arg_ast(a) for a in node.args])
                continue
            if node in plan.joins.slot:
                body += self.allocation_lines(node)
                if node.loc is not None:
                    locs[len(body)] = node.loc
                body += self.joined_lines(node) + self.dels(node)
                continue
            if op(node) == "loop_out":  # the item the loop wrote it into (rules/loops.py)
                self.names[node] = self.names[node.args[1]]
                continue
            if op(node) == "scan_out":  # a carry's last value, or a stack (codegen/loops.py)
                self.names[node] = self.scan_names[node.args[0]][node.params["output"]]
                continue
            name = self.names[node] = self.node_name(node) \
                if op(node) not in ("loop", "scan") else None
            kind = self.section(node, section)
            if kind != section and not self.nested:  # (a loop's body: its loop's section)
                body.append((kind, ""))
                section = kind
                if kind == "# backward":
                    body += self.saved_line(i)
            if node.note is not None and node.note != note:  # the first of a pass's group
                note = node.note
                body.append((f"# {note}", ""))
            if name is None:  # a loop: its `for` and its body (codegen/loops.py)
                lines = self.loop_lines if op(node) == "loop" else self.scan_lines
                body += lines(node, locs, len(body), kind) + self.dels(node)
                continue
            body += self.allocation_lines(node)
            in_place = node in plan.in_place
            out = plan.into.get(node)
            unread = not in_place and node in plan.joins.unread
            mark = self.graph.marks.get(node.stack) if node.grad_of is None else None
            raises = node.prim.name in RAISES and node.grad_of is None
            text = None if raises or unread or mark is not None else \
                self.texts.text(self, node, name, out, in_place)  # a layout seen before
            if text is None:
                value = self.value_ast(node, out)
                stmt = ast.Expr(value) if unread else statement(value, name, in_place)
            comment, run_loc = self.once(node, run_loc)
            body += self.pending
            self.pending = []
            dead = self.dels(node)
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

    @staticmethod
    def base_name(node, cotangent_of, names, prefix="g_"):
        return _base_name(node, cotangent_of, names, prefix)

    def node_name(self, node):
        """A fresh name after the user's variable, the gradient's value or the primitive;
        a later value of one buffer (plan.owner: memory.one_name) takes the name it has."""
        prefix = "t_" if self.graph.kind == "jvp" else "g_"
        owner = self.plan.owner.get(node)
        if node.prim.helper and not (node in self.plan.in_place and ufunc_of(node.prim) is None):
            self.helpers.add(node.prim.helper)  # (in place, `h[i] += v` calls none)
        self.imports.update(node.prim.imports)
        if owner is not None and owner in self.names:
            self.own[node] = self.names[owner] if node is owner else node.prim.name
            return self.names[owner]
        name = self.preset.get(owner or node) or \
            self.ns.fresh(_base_name(owner or node, self.cotangent_of, self.own, prefix))
        self.own[node] = name if owner in (None, node) else node.prim.name
        if owner is not None:
            self.names[owner] = name
        return name

    def allocation_lines(self, node):
        """`g_xw = np.empty(...)`: the buffer of each join whose parts are computed into it
        from node's statement on (plan/slots.py)."""
        lines = []
        for join in self.plan.alloc.get(node, ()):
            name = self.names[join] = self.node_name(join)
            empty = call_ast("np.empty", [literal_ast(join.shape)],
                             [ast.keyword("dtype", literal_ast(join.dtype))])
            line = (render(ast.Assign([ast.Name(name, ast.Store())], empty)),
                    f"{op(join)}: parts computed into it")
            if join in self.reused:  # a loop's body: allocated once, before the loop
                self.before_loop.append(line)
            else:
                lines.append(line)
        return lines

    def joined_lines(self, node):
        """Where a join was: its other parts assigned into their slots, and its name for
        a view when a join inside another is read by other statements."""
        lines = [(render(ast.Assign([self.slot_ast(slot, ast.Store())], self.arg_ast(part))), "")
                 for part, slot in self.plan.joins.parts[node]]
        if node in self.plan.joins.bound:
            self.names[node] = self.node_name(node)
            lines.append((render(ast.Assign([ast.Name(self.names[node], ast.Store())],
                                            self.slot_ast(self.plan.joins.slot[node]))), ""))
        return lines

    def slot_ast(self, slot, ctx=None):
        return subscript_ast(slot, self.names[slot.base], ctx or ast.Load())

    def value_ast(self, node, out):
        """The right-hand side of a node's statement; `out`: the buffer the plan writes
        it into (a dead value's, or a join's Slot), or None. One spelling per operation: a
        product is `a @ b`, or `np.matmul(a, b, out=buf)` when written into a buffer."""
        where = None if out is None else self.slot_ast(out) if type(out) is Slot else \
            out.tree() if type(out) is Row else self.arg_ast(out)
        if node in self.whole_lists:  # items of a list argument: np.stack(xs[1:49])
            arg, start, end, whole = self.whole_lists[node]
            items = self.params[arg] if whole else f"{self.params[arg]}[{start or ''}:{end}]"
            into = [] if where is None else [ast.keyword("out", where)]
            return call_ast("np.stack", [ast.parse(items, mode="eval").body], into)
        args = [self.arg_ast(a) for a in node.args]
        if out is not None:  # an operand dying here, a buffer dead before, a join's slot
            if ufunc_of(node.prim) is None:  # a helper that writes into out= (add_at)
                tree = expression(node, args, self.param_ast)
                tree.keywords.append(ast.keyword("out", where))
                return tree
            name = self.outer_into(node, out) or ufunc_of(node.prim)
            return call_ast(f"np.{name}", args, [ast.keyword("out", where)])
        if node.prim.name == "astype" and node.args[0].python_number:
            # a Python number has no .astype: np.float32(t)
            return call_ast(render(literal_ast(node.params["dtype"])), args)
        if node in self.plan.contiguous:  # read by several matmuls (plan/memory.py)
            return call_ast("np.ascontiguousarray", [expression(node, args, self.param_ast)])
        if self.numpy_on_numbers(node):  # as the trace computed it: a NumPy scalar
            return call_ast(f"np.{ufunc_of(node.prim)}", args)
        if node.prim.name == "getitem" and type(node.args[0]) is not Node \
                and any(type(a) is Node for a in node.args[1:]):  # const[mask]: a call
            self.helpers.add("_getitem")
            return expression(SimpleNamespace(prim=_GETITEM_CALL, params=node.params),
                              args, self.param_ast)
        return expression(node, args, self.param_ast, self.scalar)

    def outer_into(self, node, out):
        """For a vector's or an outer product (expressions.vector_product) written into
        `out`: np.dot into a C-contiguous buffer, as its out= must be (one a matmul made, a
        row of a loop's stack, a join's slot of leading rows), an outer product's
        np.multiply into another; None for any other node (np.matmul)."""
        if out is None or not vector_product(node):
            return None
        c_ordered = type(out) is Row or _leading(out) if type(out) in (Row, Slot) else \
            op(buffer_of(self.plan.into, out)) == "matmul"
        return "dot" if c_ordered else "multiply" if outer_product(node) else None

    def dels(self, node):
        """`del` of the values the plan ends after node's statement."""
        dead = sorted(self.names[n] for n in self.plan.dels.get(node, ()) if n not in self.reused)
        return [(f"del {', '.join(dead)}", "")] if dead else []


def _leading(slot):
    """A join's slot is C-contiguous in its buffer (np.empty's, C-ordered): indices, then
    a range of one axis, then whole axes."""
    items = slot.items
    first = next((k for k, item in enumerate(items) if type(item) is tuple), len(items))
    return all(type(items[k]) is tuple and items[k][0] == 0
               and items[k][1] in (None, slot.base.shape[k]) for k in range(first + 1, len(items)))


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


_NAMES = re.compile(r"\w+")  # (a count is read where it is a whole word, as \bcount\b)


def _used_counts(body, locs, counts):
    """The body (and its line locations) without the definitions of counts that no line
    reads (a mask whose count no size depends on: `x[m]` only scattered back)."""
    counts, read = set(counts), set()
    for code, _ in body:  # one pass: the names each line reads (a count's own line: not it)
        head, is_assignment, rest = code.partition(" = ")
        read.update(_NAMES.findall(code) if not is_assignment or head not in counts
                    else set(_NAMES.findall(rest)) - {head})
    unused = counts - read
    if not unused:
        return body, locs
    kept = [i for i, (code, _) in enumerate(body) if code.split(" = ", 1)[0] not in unused]
    where = {old: new for new, old in enumerate(kept)}
    return [body[i] for i in kept], {where[i]: loc for i, loc in locs.items() if i in where}


def _import_groups(imports):
    """The modules a generated module imports, as isort groups them: the standard library,
    then third-party modules (numpy, numexpr)."""
    stdlib = sorted(m for m in imports if m.split()[0] in sys.stdlib_module_names)
    return [group for group in (stdlib, sorted(set(imports) - set(stdlib))) if group]


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
            if len(path) == 2 and path[0] == 0 and path[1] < len(outputs[1])
            and type(outputs[1][path[1]]) is Node}  # (a constant saved: no name to take)


_GETITEM_CALL = SimpleNamespace(name="getitem", template="_getitem({0}, np.s_[{index}])",
                                defaults={})


def emit_module(graphs, standalone=False, pure=False, extra=(), extra_helpers=()):
    """Module source for one or more graphs, plus the arrays to inject (if not standalone).

    Returns (source, injected, locs): `injected` holds what is too large to write out,
    which the in-memory module receives in its namespace (a standalone module writes every
    constant out); `locs` maps a source line number to the user's (file, line) it came
    from, so that tracing generated code (for higher derivatives) points at the user's
    lines. Runtime helpers are copied into the module, so the source runs as it reads.
    The graphs are final (pipeline.finish); each is planned (plan/planner.py) and written
    out as planned. `extra`: more top-level parts written after the functions (a
    standalone module's entries), which call the runtime helpers `extra_helpers`.
    """
    functions, function_locs, helpers, imports, constants = [], [], set(), set(), {}
    shared = Namespace(p for graph in graphs for p in graph.params)  # no constant shadows one
    # what no local may shadow: the functions' names so far, every function's parameters
    # (a constant named in one function must not be a later one's parameter)
    emitter, module = None, {p for graph in graphs for p in graph.params}
    for graph in graphs:
        forward, emitter = emitter, Emitter(plan(graph, pure), standalone, constants, pure)
        emitter.saved = _saved_names(forward, graph)
        emitters = [emitter]
        if emitter.scalar:  # and its NumPy twin, for NumPy's values where math's differ
            emitter.numpy_twin = shared.fresh(f"{graph.name}_numpy")
            twin = plan(twin_graph(graph, emitter.numpy_twin), pure)
            emitters.insert(0, Emitter(twin, standalone, constants, pure))
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
    helpers |= set(extra_helpers)  # (each emitter added the helpers its lines call)
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


