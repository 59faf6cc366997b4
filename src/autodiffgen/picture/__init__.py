"""A picture of the graph: `graph_of(f, *args)` as DOT text, an SVG/PNG, or a listing.

What it shows is the finished graph the generated code is emitted from (traced forward,
the rules' backward, after the passes and batch generalization), so a node is a line of
`autodiffgen.emit`'s output and is named as that line's variable. The picture answers
"what will run"; the passes' effect is seen by comparing with AUTODIFFGEN_PASSES=0.

The public name is `graph_of`, not `graph`: `autodiffgen.graph` is the graph module.
Drawing needs graphviz's `dot` program on PATH; no Python package for it is used. How
the DOT text is laid out (clusters, a loop drawn as one node, a size a screen holds) is
picture/dot.py's; this module names the values, lists them and saves the drawing.
"""

import os
import shutil
import subprocess

import numpy as np

from .. import tracebacks
from .._typing import ArgNums, Fun, PyTree
from ..cli_examples import _SPEC_NAMES
from ..codegen.emitter import Emitter
from ..codegen.layout import loc_text
from ..graph import Index, Node, Slot, is_guard
from ..graph.size_formulas import Dim, SymArray
from ..rules.loops import Body, Scan
from ..trace.naming import Namespace

_INSTALL = ("graphviz's `dot` program is not on PATH: install graphviz (apt-get install "
            "graphviz, brew install graphviz, conda install graphviz) or save as .dot")
_FORMATS = {".svg": "svg", ".png": "png", ".pdf": "pdf"}


class GraphvizNotFoundError(RuntimeError):
    """Drawing asked for graphviz's `dot` program, which is not on PATH."""


@tracebacks.boundary
def graph_of(fun: Fun, *args: PyTree, argnums: ArgNums = 0,
             has_aux: bool = False) -> "GraphPicture":
    """The value-and-grad graph of `fun` at these example arguments, as the generated code
    computes it: `.text()`, `.dot()`, `.save(path)`; a Jupyter cell draws it (SVG, when
    graphviz is installed). A GradFunction brings its own argnums and has_aux; a compiled
    training step (optim.compile_step) is drawn whole (forward, backward, update) at its
    loss's arguments, `params, *batch`, with the optimizer's initial state."""
    from .. import pipeline
    from ..api import GradFunction
    from ..train_step import TrainStep

    if isinstance(fun, TrainStep):
        params, *batch = args
        args = fun._arguments(params, fun.init(params), batch)
    else:
        fun = fun if isinstance(fun, GradFunction) else GradFunction(fun, argnums,
                                                                     has_aux=has_aux)
    return GraphPicture(pipeline.program(fun.request(args))[0])


def _update_nodes(graph, read_by_backward):
    """A training step's update (its params and state donated, train_step.py): the values
    after its first gradient that are no gradient and that no gradient reads, drawn in a
    section and a cluster of their own rather than inside the forward's."""
    if not graph.donated:
        return frozenset()
    first = next((i for i, n in enumerate(graph.nodes) if n.grad_of is not None),
                 len(graph.nodes))
    return frozenset(n for n in graph.nodes[first:] if n.grad_of is None and not is_guard(n)
                     and n not in read_by_backward)


class GraphPicture:
    """One finished Graph, drawn: node names are the generated code's variable names
    (made unique where the code reuses one buffer under one name)."""

    def __init__(self, graph):
        self.graph = graph
        emitter = Emitter(graph)
        emitter.function()  # names the nodes as the emitted code does
        # a value the code names keeps its name; one the code computes into another's
        # buffer, or writes inline (`x.T`), is named after its primitive
        owns = [n for n in list(graph.inputs) + list(graph.nodes)  # (a loop has no name)
                if emitter.names.get(n) is not None and emitter.plan.owner.get(n, n) is n]
        ns = Namespace(emitter.names[n] for n in owns)
        self.names = {n: emitter.names[n] for n in owns}
        for node in list(graph.inputs) + list(graph.nodes):
            if node not in self.names:
                self.names[node] = ns.fresh(node.prim.name if node.prim else node.name)
        self.outputs = [(path, o) for path, o in _paths(graph.outputs, "output")
                        if type(o) is Node]
        read_by_backward = {a for n in graph.nodes if n.grad_of is not None
                            for a in n.args if type(a) is Node}
        self.residuals = [n for n in self._values() if n.grad_of is None and n in
                          read_by_backward]
        self.update = _update_nodes(graph, read_by_backward)

    def _values(self):
        return [n for n in self.graph.inputs] + list(self.graph.nodes)

    def kind(self, node):
        if node.prim is None:
            return "input"
        if is_guard(node):
            return "guard"
        if node in self.update:
            return "update"
        return "forward" if node.grad_of is None else "backward"

    def label(self, kind):
        """A section's header: a training step's update is the optimizer's (Graph.update)."""
        return (getattr(self.graph, "update", None) or kind) if kind == "update" else kind

    # ---- the listing --------------------------------------------------------------------
    def text(self):
        """One line per primitive, as make_jaxpr prints: `name:type = prim args params
        # file:line`, inputs first, then the forward and the backward, then the outputs."""
        lines = [f"{self.graph.name}("
                 + ", ".join(f"{self.names[n]}:{type_text(n)}" for n in self.graph.inputs)
                 + ")"]
        section = None
        for node in self.graph.nodes:
            kind = self.kind(node)
            kind = "forward" if kind == "guard" else kind
            if kind != section:
                lines.append(f"  # {self.label(kind)}")
                section = kind
            lines.append("  " + self.line(node))
            if type(node.params.get("body")) in (Scan, Body):
                lines += ["    " + line for line in _body_lines(node.params["body"])]
        lines.append("  return " + self._output_text(self.graph.outputs))
        return "\n".join(lines) + "\n"

    def line(self, node):
        args = " ".join(self._arg_text(a) for a in node.args)
        params = " ".join(f"{k}={param_text(v)}" for k, v in sorted(node.params.items())
                          if v is not None)  # None: the default, said by saying nothing
        code = " ".join(p for p in (f"{self.names[node]}:{type_text(node)} =",
                                    node.prim.name, args, params) if p)
        marks = " [saved]" if node in self.residuals else ""
        where = f"  # {loc_text(node.loc)}" if node.loc is not None else ""
        return code + marks + where

    def _arg_text(self, arg):
        if type(arg) is Node:
            return self.names[arg]
        if isinstance(arg, np.ndarray) and arg.ndim:
            return f"const:{dtype_text(arg.dtype)}[{','.join(map(str, arg.shape))}]"
        return param_text(arg)

    def _output_text(self, out):
        if type(out) is Node:
            return self.names[out]
        if isinstance(out, (tuple, list)):
            inner = ", ".join(self._output_text(o) for o in out)
            return f"({inner}{',' if len(out) == 1 else ''})"
        if isinstance(out, dict):
            return "{" + ", ".join(f"{k!r}: {self._output_text(v)}" for k, v in out.items()) + "}"
        return self._arg_text(out)

    # ---- DOT ----------------------------------------------------------------------------
    def dot(self):
        """The graph in graphviz's DOT language (picture/dot.py says how it is drawn)."""
        from .dot import dot_text

        return dot_text(self)

    # ---- files and notebooks ------------------------------------------------------------
    def save(self, path):
        """Write `path`: .dot as text; .svg, .png or .pdf by running graphviz's `dot`."""
        ext = os.path.splitext(path)[1].lower()
        if ext in ("", ".dot", ".gv"):
            with open(path, "w", encoding="utf-8") as f:
                f.write(self.dot())
            return path
        if ext not in _FORMATS:
            raise ValueError(f"cannot save a graph as {ext!r}: use .dot, .svg, .png or .pdf")
        drawn = render(self.dot(), _FORMATS[ext])  # first: no empty file when it fails
        with open(path, "wb") as f:
            f.write(drawn)
        return path

    def _repr_svg_(self):
        """Jupyter draws it when graphviz is installed (None: it shows the text instead)."""
        if shutil.which("dot") is None:
            return None
        return render(self.dot(), "svg").decode("utf-8")

    def _repr_pretty_(self, printer, cycle):  # IPython: the listing
        printer.text(self.text())

    def __str__(self):
        return self.text()

    def __repr__(self):
        return f"<GraphPicture {self.graph.name}: {len(self.graph.nodes)} nodes>"


def render(dot_text, fmt):
    """Bytes of `dot_text` drawn by graphviz's `dot -T<fmt>`; a clear error without it."""
    exe = shutil.which("dot")
    if exe is None:
        raise GraphvizNotFoundError(_INSTALL)
    done = subprocess.run([exe, f"-T{fmt}"], input=dot_text.encode("utf-8"),
                          capture_output=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"graphviz's dot failed: {done.stderr.decode(errors='replace')}")
    return done.stdout


def dtype_text(dtype):
    dtype = np.dtype(dtype)
    return _SPEC_NAMES.get(dtype, dtype.name)


def type_text(node):
    """'f64[n,3]': the dtype and shape (a batch size the code allows for any n, as n)."""
    return f"{dtype_text(node.dtype)}[{','.join(map(dim_text, node.shape))}]"


def dim_text(d):
    """A dimension: a number, or a size in the batch size n ('n', '2*n', 'n-1')."""
    if type(d) is not Dim:
        return str(d)
    a = "" if d.a == 1 else "-" if d.a == -1 else f"{d.a}*"
    return f"{a}{d.var}" + (f"{d.b:+d}" if d.b else "")


def _body_lines(scan):
    """A loop's body, listed as the graph is (its inputs: t, the carries, what it reads)."""
    ns, names = Namespace([]), {}
    for node in scan.graph.inputs:
        names[node] = ns.fresh(node.name or "value")
    lines = ["{ " + ", ".join(f"{names[n]}:{type_text(n)}" for n in scan.graph.inputs) + " ->"]
    for node in scan.graph.nodes:
        names[node] = ns.fresh(node.name or node.prim.name)
        args = " ".join(names[a] if type(a) is Node else param_text(a) for a in node.args)
        params = " ".join(f"{k}={param_text(v)}" for k, v in sorted(node.params.items())
                          if v is not None and k != "exit")
        test = "  (ends the loop)" if node.params.get("exit") else ""
        lines.append("  " + " ".join(p for p in (f"{names[node]}:{type_text(node)} =",
                                                 node.prim.name, args, params) if p) + test)
    outs = ", ".join(names[o] if type(o) is Node else param_text(o) for o in scan.graph.outputs)
    return lines + [f"  -> ({outs}) }}"]


def param_text(value):
    """A short text for a parameter or constant: numbers as written, arrays by type."""
    if type(value) is Scan:  # a loop kept as a loop: its steps (its body: _body_lines)
        steps = "until its test" if value.exit else \
            f"range({', '.join(map(param_text, _bounds(value.ts)))})"
        return f"loop({steps}, {value.carries} carried, {len(value.graph.nodes)} in a step)"
    if type(value) is Body:  # a loop over items (a training step's update of each parameter)
        return f"for({_items(value)}; {value.trips} steps, {len(value.graph.nodes)} in a step)"
    if isinstance(value, np.ndarray):
        return repr(value.item()) if value.ndim == 0 else \
            f"const:{dtype_text(value.dtype)}[{','.join(map(str, value.shape))}]"
    if isinstance(value, np.generic):
        return repr(value.item())
    if type(value) is SymArray:  # made in the function from the batch size n
        return f"{value.kind}:{dtype_text(value.dtype)}[{','.join(map(dim_text, value.shape))}]"
    if type(value) is Index:  # Slot k: the node's argument number k
        return "[" + ", ".join(f"#{i.k}" if type(i) is Slot else param_text(i)
                               for i in value.items) + "]"
    if type(value) is tuple:
        return "(" + ", ".join(map(param_text, value)) + ("," if len(value) == 1 else "") + ")"
    if type(value) is Dim:
        return dim_text(value)
    if callable(value):
        return getattr(value, "__name__", type(value).__name__)
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _paths(out, prefix):
    """(path text, leaf) of an output structure: out[0], out[1]['W1']..."""
    if isinstance(out, (tuple, list)):
        return [p for i, o in enumerate(out) for p in _paths(o, f"{prefix}[{i}]")]
    if isinstance(out, dict):
        return [p for k, o in out.items() for p in _paths(o, f"{prefix}[{k!r}]")]
    return [(prefix, out)]


def _items(body):
    return ", ".join(n.name or "item" for n in body.graph.inputs[:body.items])


def _escape(text):
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _bounds(ts):
    return (ts.start, ts.stop) if ts.step == 1 else (ts.start, ts.stop, ts.step)
