"""How an Emitter's statements become lines: each statement's comment said once per run
of lines (the user's line quoted on the first forward line, `grad of tanh, file.py:16` on
the first backward line of a rule), the section headers, the line naming the values the
backward reads from the forward, and the function's head; no line over WIDTH characters.
"""

import ast
import functools
import os

from ..graph import Node, op, recomputed
from ..rules.buffers import VIEWS
from ..trace.context import source_line
from .expressions import (
    WIDTH,
    docstring,
    render,
    wrap,
)

_COMMENT_COLUMN = 40


def _comment(node, kind="grad"):
    if node.loc is None:
        return ""
    where = loc_text(node.loc)
    if node.grad_of is not None and not node.args and node.prim.name == "ones":
        return f"seed: d {node.grad_of.name or 'output'} / d itself"
    if recomputed(node):  # checkpointing.py: the replay of a checkpointed call
        return f"recompute of checkpointed {node.grad_of.name}, {where}"
    if node.rematerialized:  # plan.memory.rematerialized: cheaper than saving it
        return f"recomputed, not saved: {where}"
    if node.grad_of is not None:
        of = node.grad_of.prim.name if node.grad_of.prim else "argument"
        return f"{'tangent' if kind == 'jvp' else 'grad'} of {of}, {where}"
    return where


@functools.lru_cache(maxsize=4096)
def loc_text(loc):
    return f"{os.path.basename(loc[0])}:{loc[1]}"


def code_lines(code, comment, indent="    ", align=True):
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


class Layout:
    """Sections, comments and the function's lines (a mixin of Emitter)."""

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

    def lines(self, prologue, body, locs):
        """The function's lines: its head (def, docstring, guards, constants in n), then
        the body, each statement's lines mapped to the user's line it came from."""
        head = wrap(f"def {self.graph.name}({', '.join(self.params)}):")
        doc = self.graph.described()
        if doc and self.graph.batch is not None and self.graph.batch.lo is not None:
            doc += " " + self.graph.batch.text()  # the sizes a polymorphic graph serves
        if doc:
            head += docstring(doc, "    ") or ["    " + render(ast.Expr(ast.Constant(doc)))]
        if self.standalone:
            head += [line for code in self.static_guards() for line in code_lines(code, "")]
        for code, comment in prologue + self.local_constant_lines():
            head += code_lines(code, comment)
        self.line_locs = {}  # every line of a statement the user's line made points at it
        said = None
        for i, (code, comment) in enumerate(body):
            comment, said = ("" if comment == said else comment), comment  # said once
            lines = code_lines(code, comment)
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
