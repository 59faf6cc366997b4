"""A loop node written as a loop: `for p, g, m, v in ((...), ...):` over its body's lines.

The body (rules/loops.py: Body) is planned as a function of its own (plan/planner.py: its
items that the loop writes into are donated, so `m *= beta1` updates the caller's array)
and printed by an Emitter of its own that shares this one's names, constants, helpers and
imports: its lines are this function's, indented. An output the plan did not compute in
its item's buffer is copied into it at the end of the step (`p[...] = p_1`), so after the
loop every item holds its step's output, as `loop_out` says.
"""

import ast
from dataclasses import replace

import numpy as np

from ..graph import Node, op
from ..graph.size_formulas import Dim
from ..plan.memory import writes_out
from ..plan.planner import buffer_of, plan, viewed
from .expressions import call_ast, literal_ast, render


class Loops:
    """Loops (a mixin of Emitter)."""

    def loop_lines(self, node, locs, at, section):
        """The loop's `for` line and its body's lines, indented; `at`: the index its
        first entry will have in the function's body (for `locs`)."""
        body = node.params["body"]
        graph = body.graph
        step = self._inner(graph, node.args[body.items * body.trips:],
                           graph.inputs[body.items:])
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
            if buffer_of(into, out) is not item:
                lines.append((f"{self.names[item]}[...] = {render(self.arg_ast(out))}", ""))
        return lines

    def scan_lines(self, node, locs, at, section):
        """A counted loop (rules/loops.py: Scan): its stacks allocated, its carries set to
        their first values, then `for t in range(...):` over the body, each step's saved
        values written into their rows and the carries given their new values."""
        scan = node.params["body"]
        graph = scan.graph
        step = self._inner(graph, node.args[scan.carries:], graph.inputs[1 + scan.carries:])
        t = step.names[graph.inputs[0]] = self._loop_variable()
        lines, carried = [], []
        finals = {n.params["output"]: n for n in self.graph.nodes
                  if op(n) == "scan_out" and n.args[0] is node}
        written = _written(step.plan)
        for j, (inner, init) in enumerate(zip(graph.inputs[1:1 + scan.carries],
                                              node.args[:scan.carries])):
            name = step.names[inner] = self.ns.fresh(
                self._carry_name(finals.get(j), graph.outputs[j], inner, step, self.base_name))
            carried.append(name)
            value = _value_text(self.arg_ast(init))
            if inner in written and (node, j) not in self.plan.handed:  # the loop updates
                value = f"np.copy({value})"  # it in place: an array of its own (the first
                # value's buffer may serve another value), unless that dies here (the plan)
            lines.append((f"{name} = {value}", ""))
        stacks = []
        listed = self.pure or scan.exit  # (a `while` loop: the count is known at its end)
        for value in graph.outputs[scan.carries:]:
            name = self.ns.fresh(f"{_base(value)}s")
            stacks.append(name)
            if listed:  # code an enclosing trace runs writes into no array: a list
                lines.append((f"{name} = []", "each step's, for the backward"))
                continue
            empty = call_ast("np.empty", [literal_ast((scan.count, *value.shape))],
                             [ast.keyword("dtype", literal_ast(value.dtype))])
            lines.append((f"{name} = {render(empty)}", "each step's, for the backward"))
        self._constant_inputs(step, graph.inputs[1 + scan.carries:], node.args[scan.carries:],
                              lines)
        self.scan_names[node] = carried + stacks
        first = scan.first
        row = t if first == 0 else f"{t} - {_value_text(literal_ast(first))}" \
            if type(first) is int and first > 0 else f"{t} - ({_value_text(literal_ast(first))})"
        into_rows = {} if listed else _into_rows(step.plan, graph, scan, stacks, row, written)
        if into_rows:  # values computed into their stack's row: no copy
            step.plan = replace(step.plan, into={**step.plan.into, **into_rows})
        done = {r.stack for r in into_rows.values()}
        step.preset.update(_carried_names(step.plan, graph, scan, carried))
        step.reused = _step_buffers(step.plan, graph)
        inner_lines, inner_locs = [], {}
        step.statements(inner_lines, inner_locs, section)
        lines += step.before_loop
        inner_lines += step.pending
        saved = [(name, value) for name, value in zip(stacks, graph.outputs[scan.carries:])
                 if name not in done]
        inner_lines += [(f"{name}.append({_saved_text(step, value, graph, scan, written)})",
                         "") for name, value in saved] if listed else \
            [(f"{name}[{row}] = {render(step.arg_ast(value))}", "") for name, value in saved]
        new = [_outliving(step, v, render(step.arg_ast(v)), written)
               for v in graph.outputs[:scan.carries]]
        changed = [(c, v) for c, v in zip(carried, new) if c != v]
        if changed:
            names, values = ", ".join(c for c, _ in changed), ", ".join(v for _, v in changed)
            inner_lines.append((f"{names} = {values}", ""))
        self.helpers |= step.helpers
        self.imports |= step.imports
        head = f"for {t} in {_range_text(scan.ts)}:"
        after = []
        if scan.exit:
            head, after = self._while(scan, step, t, first, stacks, lines, inner_lines)
        start = at + len(lines) + 1
        locs.update((start + i, loc) for i, loc in inner_locs.items())
        if listed and stacks:  # in the order of t (a backward loop's runs down)
            order = "" if scan.ts.step == 1 else "[::-1]"
            after += [(f"{name} = np.stack({name}{order})", "") for name in stacks]
        return lines + [(head, scan.comment)] + [("    " + code if code else code, comment)
                                                 for code, comment in inner_lines
                                                 or [("pass", "")]] + after

    def _while(self, scan, step, t, first, stacks, lines, inner_lines):
        """A `while` loop's head and the lines after it: its test after each step (the
        step's values saved, its carries updated: the last step is one of the loop's), t
        counted where the body reads it, and the number of steps it ran named after the
        loop, checked against the traced number unless the code serves every number."""
        graph = scan.graph
        counted = any(a is graph.inputs[0] for n in graph.nodes for a in n.args)
        if not step.exit_check:  # (never `while True:` without its test)
            raise AssertionError(f"the {scan.comment} has lost its test")
        inner_lines += step.exit_check
        count = scan.count
        name = count.var if type(count) is Dim else self.ns.fresh("steps")
        if counted:
            lines.append((f"{t} = {first}", ""))
            inner_lines.append((f"{t} += 1", ""))
            ran = f"{t} - {first} + 1" if first else f"{t} + 1"
        elif stacks:
            ran = f"len({stacks[0]})"
        else:
            lines.append((f"{name} = 0", ""))
            inner_lines.insert(len(inner_lines) - 2, (f"{name} += 1", ""))
            ran = None
        after = [(f"{name} = {ran}", "the steps it ran")] if ran else []
        lo = scan.least if type(count) is Dim else None
        if type(count) is not Dim or lo:
            self.helpers.add("GuardFailure")
            where = scan.comment.replace("loop at ", "")
            served = f"{name} != {count}" if type(count) is not Dim else f"{name} < {lo}"
            message = (f"{where}: the loop ran {{{name}}} steps, and this code serves " +
                       (f"only the {count} it ran when traced" if type(count) is not Dim
                        else f"{lo} steps or more"))
            after += [(f"if {served}:", ""), (f"    raise GuardFailure(f{message!r})", "")]
        return "while True:", after

    def _loop_variable(self):
        """`t`, again in a loop after another (a name no value of the function has)."""
        if "t" in self.ns.used and "t" not in self.loop_variables:
            return self.ns.fresh("t")
        self.ns.used.add("t")
        self.loop_variables.add("t")
        return "t"

    def _carry_name(self, final, out, inner, step, base_name):
        """A carried value's name: the user's or its gradient's name for what it ends as
        (`h`, `g_h`), else that of the gradient it is summed into after the loop (`g_Wh`:
        a weight's gradient summed over the steps), else its value's."""
        prefix = "t_" if self.graph.kind == "jvp" else "g_"
        if final is not None and (final.name or final in self.cotangent_of):
            return base_name(final, self.cotangent_of, self.own, prefix)
        if type(out) is Node and out.prim is not None and \
                (out.name or out in step.cotangent_of):
            return base_name(out, step.cotangent_of, {}, prefix)
        if final is not None:
            for reader in self.graph.nodes:
                if any(a is final for a in reader.args) and reader in self.cotangent_of:
                    return base_name(reader, self.cotangent_of, self.own, prefix)
        return inner.name

    def _constant_inputs(self, step, inner_inputs, outer, lines):
        """A body's inputs that are constants (a table of a number per step): named
        before the loop, as a module constant or a value written out."""
        for inner, arg in zip(inner_inputs, outer):
            if isinstance(arg, np.ndarray):  # a module constant: read by its name
                step.names[inner] = render(self.arg_ast(arg))
            elif type(arg) is not Node:
                step.names[inner] = self.ns.fresh(inner.name)
                lines.append((f"{step.names[inner]} = {_value_text(self.arg_ast(arg))}",
                              "a number per step"))

    def _inner(self, graph, outer, inner_inputs):
        """An Emitter for a loop's body, sharing this one's names, constants, helpers; its
        invariant inputs named as this function names the values they stand for."""
        step = type(self)(plan(graph, self.pure), self.standalone, self.constants, self.pure)
        step.ns, step.injected, step.texts = self.ns, self.injected, self.texts
        step.counts, step.pending, step.nested = set(), [], True
        for inner, arg in zip(inner_inputs, outer):
            if type(arg) is Node and arg in self.inline_ast:  # a transpose read in place
                step.inline_ast[inner] = self.inline_ast[arg]
            elif type(arg) is Node:
                step.names[inner] = self.names[arg]
        return step


def _step_buffers(planned, graph):
    """The joins of a body (np.empty, parts computed into it) whose buffer no output of the
    step ends in, as its buffer, a part or a view: one buffer serves every step."""
    joins = {j for allocated in planned.joins.alloc.values() for j in allocated}
    if not joins:
        return frozenset()
    kept = set()
    for out in graph.outputs:
        if type(out) is not Node:
            continue
        for value in (out, viewed(out)):
            kept.add(buffer_of(planned.into, value))
            slot = planned.joins.slot.get(value)
            if slot is not None:
                kept.add(slot.base)
    return frozenset(j for j in joins if j not in kept and j not in graph.outputs
                     and all(type(d) is int for d in j.shape))


def _saved_text(step, value, graph, scan, written):
    """A step's value appended to its list: a copy where its array is written into after
    (an input's buffer, or the next step's carry, updated in place there)."""
    text = render(step.arg_ast(value))
    if type(value) is not Node or step.pure:
        return text
    carried = {o: i for i, o in zip(graph.inputs[1:1 + scan.carries], graph.outputs)}
    root = buffer_of(step.plan.into, value)
    if root.prim is None and root in written or carried.get(value) in written:
        return f"np.copy({text})"
    return _outliving(step, value, text, written)


def _outliving(step, value, text, written):
    """A view that outlives its step (saved in a list, carried into the next step), as
    `text`, or a copy of it where it looks into an input's buffer the loop writes into:
    this step wrote elsewhere (plan/memory.py), a later one may write where it looks
    (`h[:, t + 1]`, kept while this step writes `h[:, t]`)."""
    if type(value) is not Node or step.pure:
        return text
    base = viewed(value)
    root = buffer_of(step.plan.into, base)
    if base is not value and root.prim is None and root in written:
        return f"np.copy({text})"
    return text


def _range_text(ts):
    start, stop = (_value_text(literal_ast(b)) for b in (ts.start, ts.stop))
    if ts.step == 1:
        return f"range({stop})" if ts.start == 0 else f"range({start}, {stop})"
    return f"range({start}, {stop}, {ts.step})"


def _value_text(tree):
    """A value's text on the right of `=`: a literal without the parentheses an operand
    gets (`s = 0.0`, not `s = (0.0)`)."""
    text = render(tree)
    if text.startswith("(") and text.endswith(")") and "," not in text:
        inner = text[1:-1]
        try:
            ast.parse(inner, mode="eval")
            return inner
        except SyntaxError:
            pass
    return text


def _written(planned):
    """The inputs of a body whose buffers its plan writes into (a carry updated in place)."""
    into, roots = planned.into, set()
    for buffer in into.values():
        buffer = buffer_of(into, buffer)
        if type(buffer) is Node and buffer.prim is None:
            roots.add(buffer)
    return roots


class Row:
    """A stack's row as the buffer a body's value is computed into (`out=hs[t]`)."""

    def __init__(self, stack, row):
        self.stack, self.row = stack, row

    def tree(self):
        return ast.parse(f"{self.stack}[{self.row}]", mode="eval").body


def _into_rows(planned, graph, scan, stacks, row, written):
    """{the node whose buffer a saved value ends in: its stack's Row}, for the saved values
    a NumPy call can compute in place into the row (`np.matmul(h, W, out=hs[t])`, then the
    statements that update it in place), the copy after the step left out. Not a value
    the step carries into the next where that is updated in place (the row would change),
    nor one the plan already computes into another buffer."""
    into, taken, found = planned.into, set(), {}
    carried = {o: i for i, o in zip(graph.inputs[1:1 + scan.carries], graph.outputs)}
    for name, value in zip(stacks, graph.outputs[scan.carries:]):
        if type(value) is not Node or value.prim is None or value in carried \
                and carried[value] in written:
            continue
        root = buffer_of(into, value)
        if root.prim is None or root in into or root in taken or not writes_out(root) \
                or root.shape != value.shape or root.dtype != value.dtype \
                or root in planned.joins.slot:
            continue
        taken.add(root)
        found[root] = Row(name, row)
    return found


def _base(value):
    """What a stack is named after: its value's name, or the primitive computing it."""
    if type(value) is not Node:
        return "value"
    return value.name or (value.prim.name if value.prim is not None else "value")


def _carried_names(planned, graph, scan, names):
    """{the node that names a carry's new value: the carry's own name}, where the step has
    read the carry for the last time when it first binds that name: `g_h = g @ Wh_T`
    rather than `g_h_1 = g @ Wh_T` and then `g_h = g_h_1`."""
    order = {n: i for i, n in enumerate(planned.graph.nodes)}
    found = {}
    for carry, out, name in zip(graph.inputs[1:1 + scan.carries], graph.outputs, names):
        if type(out) is not Node or out not in order:
            continue
        owner = planned.owner.get(out, out)
        first = min(order[n] for n in planned.graph.nodes
                    if planned.owner.get(n, n) is owner or n is out)
        # the carry's name also names what is updated in place in its buffer (`g *= d`)
        named = {carry} | {n for n in planned.graph.nodes if planned.owner.get(n) is carry}
        saved = graph.outputs[scan.carries:]
        if any(o in named for o in saved) or \
                any(o in named for o in graph.outputs[:scan.carries] if o is not carry):
            continue  # read after the step (a saved value, another carry)
        last = max((order[_where(planned, n)] for n in planned.graph.nodes
                    if any(a in named for a in n.args if type(a) is Node)), default=-1)
        if last <= first and owner not in found:
            found[owner] = name
    return found


def _where(planned, node):
    """The statement a node's value is computed at (an inlined `x.T` at its reader's)."""
    while node in planned.inline:
        node = planned.inline[node]
    return node
