"""What the explain page shows of one function, read from the compile path's own data.

`explained(fun, *args)` compiles the function as a call's cache miss does (GradFunction's
_compile: pipeline.compile of its Request, the source `autodiffgen emit` prints) and reads
back
- the source map the emitter made (Compiled.locs: generated line -> the user's file and
  line), each generated line in the section the emitter put it in (its `# forward`,
  `# backward` headers: Layout.section),
- for each user line, the values its statements compute (graph nodes at that loc) as the
  code names them (an Emitter of the same final graph, as GraphPicture names its nodes),
  with their types, their bytes at the traced batch size, their memory (a new buffer,
  an update in place, a view) and whether the backward reads them (a residual),
- the graph (picture.GraphPicture: its listing and DOT text).
"""

import linecache
from dataclasses import dataclass

from ..codegen.emitter import Emitter
from ..graph import Node, is_guard, op
from ..picture import GraphPicture, type_text
from ..plan.memory import nbytes
from ..plan.planner import viewed
from ..trace.context import source_line

_SECTIONS = {"# forward": "forward", "# backward": "backward", "# tangents": "tangents"}


@dataclass(frozen=True)
class Value:
    """One value a user line's statements compute, as the generated code holds it."""

    name: str      # its name in the code ("" when written inline where it is read: x.T)
    prim: str      # the primitive that computes it
    section: str   # forward, backward, update (a training step's optimizer)
    type: str      # 'f64[n,4]': dtype and shape, a batch size the code allows as n
    nbytes: int    # at the traced batch size
    memory: str    # 'new buffer', 'in place', "into g_out's buffer", 'view of x'
    saved: bool    # a forward value the backward reads: kept alive for it (a residual)
    recomputed: bool = False  # computed again in the backward rather than saved


@dataclass(frozen=True)
class UserLine:
    """One line of the user's code: the generated lines its statements became, by section
    ((generated line number, section) pairs), and the values they compute."""

    file: str
    line: int
    text: str
    code: tuple
    values: tuple
    nodes: tuple  # the graph picture's names of its values (the SVG's node titles)

    def lines(self, section):
        return [number for number, kind in self.code if kind == section]


@dataclass(frozen=True)
class Explained:
    """One compiled function, explained: the generated module's source, its lines'
    sections, the user's lines (by (file, line)) and files, and the graph."""

    name: str
    signature: str
    source: str
    sections: dict   # generated line number -> section ('forward', 'backward', ...)
    lines: dict      # (file, line) -> UserLine
    files: list      # (file, {line number: text}) in the order the code first reads them
    picture: GraphPicture
    batch: tuple     # (the batch size's name, the traced size), or None

    @property
    def update(self):
        """A training step's update section's label, else None."""
        return self.picture.label("update") if self.picture.graph.donated else None


def explained(fun, *args, argnums=0, has_aux=False):
    """The Explained value-and-grad of `fun` (a GradFunction brings its own argnums and
    has_aux; a compiled training step is explained whole at `params, *batch`)."""
    fun, args = _compiled_as(fun, args, argnums, has_aux)
    compiled = fun._compile(args, False)  # a cache miss's compile path (api.GradFunction)
    graph = compiled.graph
    sections = sections_of(compiled.source, graph.update)
    emitter = Emitter(graph)
    emitter.function()  # names the nodes as emit_module did, and plans their memory
    picture = GraphPicture(graph)
    code = {}
    for number, loc in sorted(compiled.locs.items()):
        code.setdefault(loc, []).append((number, sections.get(number) or "forward"))
    values = _values(emitter, picture)
    lines = {loc: UserLine(loc[0], loc[1], source_line(loc), tuple(pairs),
                           tuple(v for _, v in values.get(loc, ())),
                           tuple(picture.names[n] for n, _ in values.get(loc, ())
                                 if n in picture.names))
             for loc, pairs in code.items()}
    batch = (graph.batch.var, graph.batch.n) if graph.batch is not None else None
    return Explained(graph.name, graph.signature, compiled.source, sections, lines,
                     _files(lines), picture, batch)


def _compiled_as(fun, args, argnums, has_aux):
    """(the GradFunction, the arguments) a call of `fun` at `args` compiles: a training
    step's are its loss's, `params, *batch`, with the optimizer's initial state."""
    from ..api import GradFunction
    from ..train_step import TrainStep

    if isinstance(fun, TrainStep):
        params, *batch = args
        return fun, fun._arguments(params, fun.init(params), batch)
    if not isinstance(fun, GradFunction):
        fun = GradFunction(fun, argnums, has_aux=has_aux)
    return fun, args


def sections_of(source, update=""):
    """{generated line number: section} for the lines under a function's section headers
    (`# forward`, `# backward`, a training step's `# Adam update: ...`: Layout.section),
    which the emitter writes on lines of their own; a line before its function's first
    header (a guard) is None."""
    headers = dict(_SECTIONS, **({f"# {update}": "update"} if update else {}))
    kind, out = None, {}
    for number, line in enumerate(source.splitlines(), 1):
        if line.startswith("def "):
            kind = None
        elif line.startswith("    ") and line.strip() in headers:  # (in a `try:` too)
            kind = headers[line.strip()]
        out[number] = kind
    return out


def _values(emitter, picture):
    """{user loc: [(node, Value)]} of the final graph's statements, in the code's order."""
    plan, names = emitter.plan, emitter.names
    n = picture.graph.batch.n if picture.graph.batch is not None else 1
    # what the backward reads as the plan has it (a value it recomputes is not saved)
    read = {a for node in plan.graph.nodes if node.grad_of is not None for a in node.args
            if type(a) is Node}
    out = {}
    for node in plan.graph.nodes:
        if node.loc is None or is_guard(node) or op(node) in ("loop", "scan"):
            continue
        value = Value(names.get(node) or "", node.prim.name, picture.kind(node),
                      type_text(node), nbytes(node, n), _memory(node, plan, names),
                      node.grad_of is None and node in read, node.rematerialized)
        out.setdefault(node.loc, []).append((node, value))
    return out


def _memory(node, plan, names):
    """Where a statement's value lives: the plan's decision, as the code carries it out."""
    base = viewed(node)
    if base is not node:  # (`x.T` read once is written where it is read: plan.inline)
        inline = ", written where it is read" if node in plan.inline else ""
        return f"view of {names.get(base) or base.name or 'an argument'}{inline}"
    if node in plan.inline:
        return "written where it is read"
    if node in plan.in_place:
        return "in place"
    into = plan.into.get(node)
    if type(into) is Node and into in names:
        return f"into {names[into]}'s buffer"
    if into is not None:
        return "into a joined buffer"
    return "new buffer"


def _files(lines):
    """(file, {line: text}) of every file the code's lines come from, in order of first
    use; a file linecache cannot read (a notebook cell gone) shows its mapped lines."""
    order = list(dict.fromkeys(user.file for user in
                               sorted(lines.values(), key=lambda u: u.code[0][0])))
    files = []
    for name in order:
        text = linecache.getlines(name)
        numbered = {i: line.rstrip("\n") for i, line in enumerate(text, 1)} if text else \
            {user.line: user.text for user in lines.values() if user.file == name}
        files.append((name, numbered))
    return files
