"""graph_of's drawing: a GraphPicture (picture/__init__.py) as DOT text that fits a screen.

Forward, backward and a training step's update are clusters of their own. What the code
writes once is drawn once: a loop kept as a loop (the update of each parameter, one `for`
in the code) is one node, and its `loop_out` values, the items it wrote in place, are
that node; the inputs only it reads, as the same item of every step (Adam's `m` of each
parameter), are one node, and so are the outputs of one drawn value. An input read by one
cluster alone is drawn in it. Labels are two lines at most (what a value is, where it was
written); larger than 20x12 inches, the drawing is scaled down to that.

Measured on examples/digits.py (`autodiffgen graph examples/digits.py -o g.png`, graphviz
2.43): 8389x2315 pixels before (a loop's values drawn over its inputs, under their names),
1920x931 after (2259x1085 points before the scaling).
"""

import os

from ..codegen.layout import loc_text
from ..graph import Node
from . import _escape, _items, param_text, type_text

# colours: forward values, backward values, saved residuals, inputs/outputs
_STYLE = {"forward": 'fillcolor="#dbe9f6"', "backward": 'fillcolor="#fbe3d0"',
          "update": 'fillcolor="#efe3f6"', "input": 'shape=invhouse, fillcolor="#e3f1dd"',
          "guard": 'shape=diamond, fillcolor="#eeeeee"'}
# small type and tight spacing; a drawing larger than 20x12 inches (a screen at 96 dpi) is
# scaled down to it (graphviz's `size`: a smaller one is left as it is)
_LAYOUT = ("  rankdir=TB;", '  size="20,12";', "  nodesep=0.15;", "  ranksep=0.25;",
           '  node [shape=box, style="rounded,filled", fontname="monospace", fontsize=10, '
           + 'margin="0.06,0.03", height=0.3];', "  edge [arrowsize=0.6];",
           '  fontname="monospace";', "  fontsize=11;")
_KINDS = ("forward", "backward", "update")


def dot_text(picture):
    """The DOT text of a GraphPicture: clusters, then outputs, then edges (a saved value
    read by the backward along a red edge)."""
    g = picture.graph
    shown = _shown(picture)
    drawn = [n for n in list(g.inputs) + list(g.nodes) if shown[n] is n]
    where = _clusters(picture, drawn, shown)
    lines = [f'digraph "{g.name}" {{', *_LAYOUT,
             f'  label="{_escape(g.name)}: red borders are values saved for the backward";']
    lines += [f"  {_node(picture, n, shown)}" for n in drawn if where[n] is None]
    for kind in _KINDS:
        members = [n for n in drawn if where[n] == kind]
        if members:
            lines += [f"  subgraph cluster_{kind} {{",
                      f'    label="{_escape(picture.label(kind))}";', "    style=dashed;"]
            lines += [f"    {_node(picture, n, shown)}" for n in members]
            lines.append("  }")
    outputs = _output_nodes(picture, shown)
    lines += [f'  "{_escape(key)}" [label="{_label(label)}", shape=house, '
              'fillcolor="#e3f1dd"];' for key, (label, _) in outputs.items()]
    edges = {}
    for node in drawn:
        for arg in _node_args(node):
            red = arg in picture.residuals and node.grad_of is not None
            edges.setdefault((shown[arg], node), " [color=red]" if red else "")
    names = picture.names
    lines += [f'  "{names[a]}" -> "{names[b]}"{style};' for (a, b), style in edges.items()]
    lines += [f'  "{names[source]}" -> "{_escape(key)}";'
              for key, (_, source) in outputs.items()]
    return "\n".join(lines + ["}"]) + "\n"


def _node_args(node):
    return [a for a in node.args if type(a) is Node] if node.prim is not None else []


def _shown(picture):
    """{node: the node drawn for it}: itself, or a loop for its `loop_out` values and for
    the inputs it alone reads as the same item of every step (the first stands for all)."""
    g = picture.graph
    shown = {n: n for n in list(g.inputs) + list(g.nodes)}
    readers = {}
    for node in g.nodes:
        for arg in _node_args(node):
            readers.setdefault(arg, set()).add(node)
        if node.prim.name == "loop_out":
            shown[node] = node.args[0]
    inputs = set(g.inputs)
    outputs = {o for _, o in picture.outputs}
    for loop in (n for n in g.nodes if n.prim.name == "loop"):
        body = loop.params["body"]
        for j in range(body.items):
            items = loop.args[j:body.items * body.trips:body.items]
            if len(items) > 1 and all(n in inputs and n not in outputs and
                                      {shown[r] for r in readers.get(n, ())} == {loop}
                                      for n in items):
                shown.update((n, items[0]) for n in items)
    return shown


def _clusters(picture, drawn, shown):
    """{drawn node: its cluster's kind, or None}: an input goes in the cluster of its
    readers when they are all in one (a training step's hyperparameters: the update's)."""
    where = {n: None if n.prim is None else
             "forward" if picture.kind(n) == "guard" else picture.kind(n) for n in drawn}
    readers = {}
    for node in drawn:
        for arg in _node_args(node):
            readers.setdefault(shown[arg], set()).add(where[node])
    for node in picture.graph.inputs:
        if shown[node] is node and len(readers.get(node, ())) == 1:
            where[node] = next(iter(readers[node]))
    return where


def _output_nodes(picture, shown):
    """{node id: (label, drawn source)}: one node per drawn value the outputs hold, its
    paths in the label (output[2]['m']['W1' 'b1'] for a loop's)."""
    by_source = {}
    for path, o in picture.outputs:
        by_source.setdefault(shown[o], []).append(path)
    return {paths[0] if len(paths) == 1 else f"{paths[0]} ...":
            (_grouped(paths), source) for source, paths in by_source.items()}


def _node(picture, node, shown):
    """A node's line: its name and primitive, type and source line; a loop's `for`."""
    kind, name = picture.kind(node), picture.names[node]
    if kind == "input":
        group = [picture.names[n] for n in picture.graph.inputs if shown[n] is node]
        label = [f"input {name}", type_text(node)] if len(group) == 1 else \
            _group_label(group)
    elif node.prim.name == "loop":
        label = _loop_label(node.params["body"])
    else:
        head = param_text(node.params["body"]) if node.prim.name == "scan" else \
            f"{node.prim.name}  {type_text(node)}"  # a counted loop: its steps
        label = [f"{name} = {head}"] + ([loc_text(node.loc)] if node.loc is not None else [])
    style = _STYLE[kind]
    if node in picture.residuals:
        style += ', color=red, penwidth=2, tooltip="saved for backward"'
    return f'"{name}" [label="{_label(label)}", {style}];'


def _label(lines):
    """A label's lines in DOT: escaped, joined by `\\n`."""
    return "\\n".join(_escape(s) for s in lines)


def _loop_label(body):
    """A loop's label: its `for` line, as the code writes it, and what a step computes."""
    return [f"for {_items(body)} in {body.trips} steps", body.comment or "",
            f"{len(body.graph.nodes)} operations a step"]


def _group_label(names):
    """Inputs drawn as one: `input state_m_*` over the rest of their names."""
    common = os.path.commonprefix(names)
    return [f"input {common}*", " ".join(n[len(common):] for n in names)]


def _grouped(paths):
    """Output paths, those that differ in their last key on one line:
    output[1]['W1' 'b1' 'W2' 'b2']."""
    groups = {}
    for path in paths:
        head, _, last = path.rpartition("[") if path.endswith("]") else ("", "", path + "]")
        groups.setdefault(head, []).append(last[:-1])
    return [f"{head}[{' '.join(keys)}]" if head else keys[0] for head, keys in groups.items()]
