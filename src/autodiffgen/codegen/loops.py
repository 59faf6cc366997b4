"""A loop node written as a loop: `for p, g, m, v in ((...), ...):` over its body's lines.

The body (rules/loops.py: Body) is planned as a function of its own (plan/planner.py: its
items that the loop writes into are donated, so `m *= beta1` updates the caller's array)
and printed by an Emitter of its own that shares this one's names, constants, helpers and
imports: its lines are this function's, indented. An output the plan did not compute in
its item's buffer is copied into it at the end of the step (`p[...] = p_1`), so after the
loop every item holds its step's output, as `loop_out` says.
"""

import ast

from ..graph import Node
from ..plan.planner import plan
from .expressions import render


class Loops:
    """Loops (a mixin of Emitter)."""

    def loop_lines(self, node, locs, at, section):
        """The loop's `for` line and its body's lines, indented; `at`: the index its
        first entry will have in the function's body (for `locs`)."""
        body = node.params["body"]
        graph = body.graph
        step = type(self)(plan(graph, self.pure), self.standalone, self.constants, self.pure)
        step.ns, step.injected, step.texts = self.ns, self.injected, self.texts
        step.counts, step.pending = set(), []
        outer = node.args[body.items * body.trips:]
        for inner, arg in zip(graph.inputs[body.items:], outer):
            if type(arg) is Node and arg in self.inline_ast:  # a transpose read in place
                step.inline_ast[inner] = self.inline_ast[arg]
            elif type(arg) is Node:
                step.names[inner] = self.names[arg]
        items = graph.inputs[:body.items]
        for inner in items:
            step.names[inner] = self.ns.fresh(inner.name)
        lines, inner_locs = [], {}
        step.statements(lines, inner_locs, section)
        lines += step.pending + step.written_back(body)
        self.helpers |= step.helpers
        self.imports |= step.imports
        rows = ast.Tuple([ast.Tuple([self.arg_ast(a) for a in node.args[k:k + body.items]],
                                    ast.Load())
                          for k in range(0, body.items * body.trips, body.items)], ast.Load())
        head = f"for {', '.join(step.names[i] for i in items)} in {render(rows)}:"
        locs.update((at + 1 + i, loc) for i, loc in inner_locs.items())
        return [(head, body.comment)] + [("    " + code if code else code, comment)
                                         for code, comment in lines]

    def written_back(self, body):
        """`p[...] = value` for each output of the step whose buffer is not its item's."""
        lines = []
        graph, into = body.graph, self.plan.into
        for out, j in zip(graph.outputs, body.into):
            item = graph.inputs[j]
            root = out
            while type(root) is Node and type(into.get(root)) is Node:
                root = into[root]
            if root is not item:
                lines.append((f"{self.names[item]}[...] = {render(self.arg_ast(out))}", ""))
        return lines
