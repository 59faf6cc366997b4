"""The user's loops kept as loops: a loop's steps, as the trace recorded them, proven one
program (proof.py) and made one `scan` node (rules/loops.py), so the code runs `for t in
range(n):` over one step's lines; then the same for the backward of those steps, a loop
that runs the other way. The steps come from find.py (where the user's frames were).

The backward of step k reads step k's values: those are saved in stacks the forward loop
fills (`hs[t] = h`), and read back a row at a time (`hs[t]`). Values read after the loop
are its carries' last values and rows of its stacks. A first or a last step that differs
(a constant initial state the trace folded, the backward's first sum into a weight's
gradient) is written out before or after the loop. Anything else unproven leaves the
steps written out as today, and AUTODIFFGEN_EXPLAIN=1 says why; a statement in a `try:`
or a checkpointed call inside a step is not kept in a loop yet. A guard inside a step is
checked at every step; a random draw draws at every step, in eager's order; a `while`
loop's test ends the loop (find.exit_of).

The count is the traced one; generalize/batch.py makes a loop over the batch axis serve
every length (rules/loops.py: SymRange), and generalize/counts.py one over a mask's count
(`for i in range(len(x[m]))`) every count.
"""

from dataclasses import replace

import numpy as np

from ..errors import TracingError, at
from ..graph import Index, Node, Slot, users_of
from ..rules import PRIMITIVES
from ..rules.buffers import owns
from ..rules.loops import Scan, scan, scan_out
from ..trace.exits import site_key
from ..tree import leaves
from . import find
from .hoist import hoisted
from .proof import Proof
from .roll import Unproven, explain, graph_of_step, required, spliced


def roll_loops(graph, prepare):
    """`graph` with each run of a loop that is proven one program as a scan node, and its
    backward too where that is proven."""
    tried = set()
    while True:
        forward = [n for n in graph.nodes if n.grad_of is None]
        pending = [r for r in find.runs(forward) if _key(r) not in tried]
        if not pending:
            return hoisted(graph)
        run = pending[0]
        tried.add(_key(run))
        try:
            graph = _roll_run(graph, run, prepare)
        except Unproven as why:
            message = f"the loop at {run.where()} ({len(run.steps)} steps) is written " \
                      f"out step by step: {why}"
            if required():  # AUTODIFFGEN_LOOPS=require: the user asked for loops
                raise TracingError(at((run.code.co_filename, run.line()),
                                      f"this loop cannot be kept as a loop: {why}")) from None
            explain(graph, message)


def _key(run):
    return run.code, run.loop, run.steps[0][0].id


def _roll_run(graph, run, prepare):
    steps = run.steps
    step_of = {n: k for k, s in enumerate(steps) for n in s}
    graph = _rolled(graph, steps, list(range(len(steps))), prepare, f"loop at {run.where()}",
                    find.exit_of(run))
    derivative = [[] for _ in steps]
    for node in graph.nodes:
        if node.grad_of is not None and node.grad_of in step_of:
            derivative[step_of[node.grad_of]].append(node)
    if not all(derivative):
        return graph
    ts = list(range(len(steps)))
    if derivative[-1][0].id < derivative[0][0].id:  # reverse mode: the last step first
        derivative, ts = derivative[::-1], ts[::-1]
    try:
        return _rolled(graph, derivative, ts, prepare, f"backward of the loop at {run.where()}")
    except Unproven as why:
        explain(graph, f"the backward of the loop at {run.where()} is written out step by "
                       f"step: {why}")
        return graph


def _rolled(graph, steps, ts, prepare, comment, exit=False):
    """The graph with `steps` (one t each, in order) as one scan node: tried whole, then
    without a first and/or a last step that differs (written out beside the loop). A
    `while` loop's steps (`exit`) are first tried with their last, whose test ended the
    loop: the loop then runs until its test says stop, as many steps as it takes."""
    first_error, users = None, users_of(graph.nodes)
    tries = [(0, 0, True), (1, 0, True)] if exit else []
    for lo, hi, ends in tries + [(0, 0, False), (1, 0, False), (0, 1, False), (1, 1, False)]:
        part, part_ts = steps[lo:len(steps) - hi], ts[lo:len(ts) - hi]
        if len(part) < 2:
            break
        try:
            proof = Proof(graph, part, part_ts, users, ends)
        except Unproven as why:  # (its message only: the exception holds this frame)
            first_error = first_error or str(why)
            continue
        return _build(graph, proof, prepare, comment)
    raise Unproven(first_error or "fewer than two steps")


def _build(graph, proof, prepare, comment):
    template, ts = proof.steps[0], proof.ts
    carries = sorted(proof.carries)
    invariants = list(dict.fromkeys(arg[1] for column in proof.args for arg in column
                                    if arg[0] == "outer"))
    t = Node(template[0].id, None, (), {}, (), np.dtype(np.int64))
    t.name, t.python_number = "t", True
    carry_in = []
    for q in carries:
        node = Node(template[q].id, None, (), {}, template[q].shape, template[q].dtype)
        node.name = template[q].name or template[q].prim.name
        carry_in.append(node)
    outer_in = [v.replace(prim=None, args=(), params={}, grad_of=None) for v in invariants]
    body = _Body(t, dict(zip(carries, carry_in)), dict(zip(invariants, outer_in)), ts)
    clones = [body.clone(node, proof.args[p], proof.index[p]) for p, node in enumerate(template)]
    if proof.exit is not None:  # the loop's test: `if not ...: break` after each step
        end = clones[proof.exit]  # (marked with its place: trace/exits.py finds it again)
        end.params = {**end.params, "exit": site_key(template[proof.exit].site)}
    inputs = [t, *carry_in, *outer_in, *body.tables.values(),
              *(node for node, _ in body.row_stacks.values())]
    outputs = tuple(clones[q] for q in carries) + tuple(clones[p] for p in proof.stacked)
    derivative_of = {clones[p]: graph.derivative_of[n] for p, n in enumerate(template)
                     if n in graph.derivative_of}
    step = graph_of_step(graph, inputs, body.nodes + clones, outputs, derivative_of)
    prepared = prepare(step)
    # a carry whose new value is an array of the step's own may be updated in place (the
    # emitter copies its first value where that is not the function's own to overwrite)
    prepared = replace(prepared, donated=frozenset(
        c for c, out in zip(carry_in, prepared.outputs) if type(out) is Node and owns(out)))
    ts_range = range(ts[0], ts[-1] + (1 if ts[-1] >= ts[0] else -1), 1 if ts[-1] >= ts[0] else -1)
    if proof.exit is not None:  # (its test last: each step runs whole, the last one too)
        ends = [n for n in prepared.nodes if n.params.get("exit")]
        if len(ends) != 1:  # (merged with an equal test by the passes: not this loop's)
            raise Unproven("its test is computed with another's")
        prepared = replace(prepared, nodes=[n for n in prepared.nodes if n not in ends] + ends)
    scanned = Scan(replace(prepared, inputs=inputs), len(carries), ts_range, comment,
                   proof.exit is not None)
    inits = [proof.carries[q] for q in carries]
    last_step = proof.steps[-1]
    tables = [table for table in body.table_values]
    stacked = [graph.new_node(PRIMITIVES["stack"], tuple(items), like=items[0],
                              params={"axis": 0}, shape=(len(items), *items[0].shape),
                              dtype=items[0].dtype)
               for _, items in body.row_stacks.values()]  # a list's items, one array
    loop = graph.new_node(scan, (*inits, *invariants, *tables, *stacked), like=last_step[-1],
                          params={"body": scanned}, shape=(), dtype=np.dtype(bool))
    made = [*stacked, loop]
    finals = {}
    for j, q in enumerate(carries):
        out = graph.new_node(scan_out, (loop,), like=last_step[q],
                             params={"output": j, "fresh": owns(prepared.outputs[j])},
                             shape=template[q].shape, dtype=template[q].dtype)
        out.name = last_step[q].name
        finals[q] = out
        made.append(out)
    first, rows, stacks = min(ts), {}, {}
    for i, p in enumerate(proof.stacked):
        stacks[p] = stack = graph.new_node(
            scan_out, (loop,), like=last_step[p], params={"output": len(carries) + i,
                                                          "fresh": True},
            shape=(len(ts), *template[p].shape), dtype=template[p].dtype)
        made.append(stack)
        for k, s in enumerate(proof.steps):
            if not (k == len(ts) - 1 and p in finals):
                rows[s[p]] = (stack, ts[k] - first)
    for p, q in proof.views.items():  # read as a slice of q's row
        items = template[p].params["index"].items
        for k, s in enumerate(proof.steps):
            rows[s[p]] = (stacks[q], ts[k] - first, items)
    for q, out in finals.items():
        rows[last_step[q]] = out
    return _spliced(graph, proof, made, rows, (*inits, *invariants))


class _Body:
    """Step 0's nodes copied into the body: arguments and indexes as the proof found them."""

    def __init__(self, t, carry_in, outer_in, ts):
        self.t, self.carry_in, self.outer_in, self.ts = t, carry_in, outer_in, ts
        self.row_stacks = {}  # the items read, one per step -> (input, items in t's order)
        self.nodes, self.affine, self.copies = [], {}, []
        self.tables = {}  # (id(table), first) -> its input node (a constant the loop reads)
        self.table_values = []

    def clone(self, node, args, index):
        values = [self.value(arg) for arg in args]
        params = node.params
        if index is not None:
            items = []
            for item in index:
                if type(item) is tuple and item[0] == "affine":
                    items.append(Slot(len(values)))
                    values.append(self.value(item))
                else:
                    items.append(item)
            params = {**params, "index": Index(items)}
        copy = node.replace(args=tuple(values), params=params, site=())
        self.copies.append(copy)
        return copy

    def value(self, arg):
        kind = arg[0]
        if kind == "here":
            return self.copies[arg[1]]
        if kind == "carry":
            return self.carry_in[arg[1]]
        if kind == "outer":
            return self.outer_in[arg[1]]
        if kind == "const":
            return arg[1]
        if kind == "table":
            return self.row_of(arg[1], arg[2])
        if kind == "rows":
            return self.item_of(arg[1])
        return self.affine_of(arg[1], arg[2])

    def row_of(self, table, first):
        """table[t - first], the table an input of the body (a constant of the loop)."""
        key = (id(table), first)
        if key not in self.tables:
            self.tables[key] = self._input((table.shape, table.dtype), "per_step")
            self.table_values.append(table)
        return self._row(self.tables[key], first)

    def item_of(self, values):
        """Step t's own value from outside (a list's item): row t - first of their stack,
        made before the loop, an input of the body."""
        key = tuple(id(v) for v in values)
        if key not in self.row_stacks:
            items = [values[k] for k in sorted(range(len(values)), key=self.ts.__getitem__)]
            node = self._input(((len(items), *items[0].shape), items[0].dtype),
                               f"{items[0].name}s" if items[0].name else "items")
            self.row_stacks[key] = (node, items)
        return self._row(self.row_stacks[key][0], min(self.ts))

    def _input(self, shape_dtype, name):
        node = Node(self.t.id, None, (), {}, *shape_dtype)
        node.name = name
        return node

    def _row(self, stack, first):
        """The body's read of row t - first of an input stacked over the steps."""
        row = self.t.replace(prim=PRIMITIVES["getitem"], args=(stack, self.affine_of(1, -first)),
                             params={"index": Index((Slot(1),))}, name=None,
                             shape=stack.shape[1:], dtype=stack.dtype)
        self.nodes.append(row)
        return row

    def affine_of(self, a, b):
        """a * t + b as nodes of the body, as one writes it: t, t + 1, t - 1, n - 1 - t."""
        if (a, b) in self.affine:
            return self.affine[a, b]
        kind = type(b) if type(b) is float else type(a)
        if a == -1:
            value = self._number(PRIMITIVES["subtract"], (b, self.t), kind)
        else:
            value = self.t if a == 1 else self._number(PRIMITIVES["multiply"], (self.t, a), kind)
            if b > 0:
                value = self._number(PRIMITIVES["add"], (value, b), kind)
            elif b < 0:
                value = self._number(PRIMITIVES["subtract"], (value, -b), kind)
        self.affine[a, b] = value
        return value

    def _number(self, prim, args, kind):
        node = self.t.replace(prim=prim, args=args, params={}, name=None,
                              dtype=np.dtype(np.int64 if kind is int else np.float64))
        node.python_number = True
        self.nodes.append(node)
        return node


def _spliced(graph, proof, made, rows, args):
    """The graph with the steps' nodes gone and `made` where the last of them was, every
    read of a step's value outside the steps going to what replaces it: a carry's last
    value, or its row of a stack, read by that reader alone (`hs[3]`: the backward of
    step 3 then reads only rows of its own, which a roll of the backward takes in). A
    row of an argument read by the step (`xs[t]`) is read from the argument again."""
    returned = {o for o in leaves(graph.outputs) if type(o) is Node}
    kept = {n for n in proof.inside if proof.reread(n) and (
        n in returned or any(u not in proof.inside for u in proof.users.get(n, ())))}
    dead = set(proof.inside) - kept
    replace_by = {}
    position = {n: i for i, n in enumerate(graph.nodes)}
    readers = {u for a in rows if a not in kept for u in proof.users.get(a, ()) if u not in dead}
    for node in sorted(readers, key=position.__getitem__):  # (the graph's order: stable ids)
        replace_by[node] = node.replace(args=tuple(
            _row(graph, rows[a], a, node) if type(a) is Node and a in rows and a not in kept
            else a for a in node.args))
    for leaf in leaves(graph.outputs):  # (its row made with the loop: the value is gone)
        if type(leaf) is Node and leaf in rows and leaf not in kept and leaf not in replace_by:
            replace_by[leaf] = _row(graph, rows[leaf], leaf, leaf)
            if replace_by[leaf] not in made:
                made = [*made, replace_by[leaf]]
    last = max((position[n] for n in dead), default=0)
    early = any(position[n] < last for n in readers)
    graph = spliced(graph, dead, dead, made, args, replace_by)
    return replace(graph, nodes=_in_order(graph)) if early else graph


def _in_order(graph):
    """The graph's nodes with each after the values it reads, the order otherwise kept: a
    reader of an early step's value that came before the loop's last step (a forward
    mode's tangent, computed step by step beside the values) now reads a row of a stack
    the loop fills, so it waits for the loop."""
    placed, order, waiting = set(graph.inputs), [], {}
    for node in graph.nodes:
        stack = [node]
        while stack:
            n = stack.pop()
            missing = next((a for a in n.args if type(a) is Node and a not in placed), None)
            if missing is not None:
                waiting.setdefault(missing, []).append(n)
                continue
            order.append(n)
            placed.add(n)
            stack.extend(reversed(waiting.pop(n, [])))
    order += [n for n in graph.nodes if n not in placed]  # (reading what is not here)
    return order


def _row(graph, where, value, reader):
    """What `reader`'s read of `value` after the loop reads instead: a scan_out, or a new
    node reading its row of a stack (part of the reader's section: the backward's)."""
    if type(where) is Node:
        return where
    stack, row, *sliced = where
    node = graph.new_node(PRIMITIVES["getitem"], (stack,), like=reader,
                          params={"index": Index((row, *(sliced[0] if sliced else ())))},
                          shape=value.shape, dtype=value.dtype)
    node.name, node.loc, node.stack = value.name, value.loc, value.stack
    return node
