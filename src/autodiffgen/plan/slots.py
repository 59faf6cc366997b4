"""Joined values written in place: each part of a stack or concatenation computed into its
slot of one buffer, instead of into an array of its own that the join then copies.

A loop's backward joins one value per step: accumulate.py stacks the rows of a gradient
indexed per step (`g_xw[t]`, a GRU's gates and candidate concatenated in each row) and
the operands of one matmul over all steps (every step's state). Written as they are, each
step's value gets a fresh array and is copied once per join it is in. Here the join's
buffer is allocated once (`g_xw = np.empty(...)`), before its first part is computed, and
each part that NumPy writes into a given array (an elementwise ufunc or a matmul, `out=`)
is computed into its slot (`np.multiply(a, b, out=g_xw[0, :, :4])`), together with the
values computed in place before it (a chain `np.subtract(h, n, out=...)`, `*= g`). A
join that is a part of a join is a slot in its parent's buffer. Parts that are computed
otherwise (an input, a part already in another join) are assigned into their slot where
the join was (`g_xw[2] = h0`), as the join would have copied them.

Slots are views, so the memory plan never gives a join's buffer or a part written into it
to another value (`fixed`). Slot indices are static: a stack's row, and a concatenation's
offsets along an axis whose sizes are numbers (not the batch size's formula), so the code
serves every batch size it did before.
"""

import ast
from dataclasses import dataclass

from ..graph import Node, op, recomputed
from ..tree import leaves


@dataclass(frozen=True, eq=False)
class Slot:
    """A part of a join's buffer: per axis of `base`, an int (that index) or (start, stop),
    stop None for the rest of the axis."""
    base: Node
    items: tuple

    def kept(self):
        """Positions in `items` of the axes the slot keeps (its own axes, in order)."""
        return [k for k, item in enumerate(self.items) if type(item) is tuple]


@dataclass
class Joins:
    slot: dict    # join node -> its Slot (a root join's: the whole of its own buffer)
    alloc: dict   # statement index -> the root joins allocated just before it
    parts: dict   # join node -> [(part, its Slot)] of the parts assigned where the join is
    bound: set    # joins inside another join that other statements read: named as a view
    fixed: set    # buffers and parts the memory plan leaves alone
    unread: set = None  # parts no statement reads (only their join): computed, not named


def subscript_ast(slot, name, ctx):
    """`g_xw[0, :, :4]`, the base named `name`: trailing whole axes left out."""
    items = [(i[0], None) if type(i) is tuple and i[1] == size else i
             for i, size in zip(slot.items, slot.base.shape)]
    while items and items[-1] == (0, None):
        items.pop()
    if not items:
        return ast.Name(name, ctx)
    parts = [ast.Constant(i) if type(i) is int else
             ast.Slice(ast.Constant(i[0]) if i[0] else None,
                       None if i[1] is None else ast.Constant(i[1]), None) for i in items]
    index = parts[0] if len(parts) == 1 else ast.Tuple(parts, ast.Load())
    return ast.Subscript(ast.Name(name, ast.Load()), index, ctx)


def joins_in_place(graph, plan, writes_out):
    """(plan with each placed part's statement writing into its Slot, Joins). `plan`:
    {statement index: the dying operand it writes into} (emit_memory.reuse_plan);
    `writes_out(node)`: NumPy computes the node into a given array of its shape."""
    inputs = set(graph.inputs)
    kept = inputs | {x for x in leaves(graph.outputs) if type(x) is Node}
    at = {node: i for i, node in enumerate(graph.nodes)}
    plan, placed = dict(plan), {}   # placed: value -> the Slot it is computed into
    parent = {}                      # a join inside a join -> that join
    order = []                       # what is placed or joined, in the order it is
    joins = Joins({}, {}, {}, set(), set())
    readers = _row_readers(graph, kept, writes_out)  # reader -> (batched value, its row)
    rows = {}                        # batched value -> [(row, the Slot its reader is in)]
    first = {}                       # root join -> the first statement written into it
    overwritten = set()              # placed values a later value is computed in place over

    def open_(node, slot):
        return type(node) is Node and node.prim is not None and node not in kept \
            and node not in placed and node not in joins.slot and node in at \
            and node.dtype == slot.base.dtype and not recomputed(node) \
            and not graph.marks.get(node.stack)

    def place(node, slot):
        """Computes node into slot if it can be; whether it is."""
        if not open_(node, slot):
            return False
        if _join(node) and _part_slots(node, slot) is not None:
            join(node, slot)
            return True
        if not writes_out(node):
            return False
        while True:  # down the chain of values computed in place (a loop: chains are long)
            placed[node] = slot
            order.append(node)
            if node in readers:  # it reads a row of a value that may lie in this slot:
                plan[at[node]] = slot  # nothing is computed into the slot before it
                rows.setdefault(readers[node][0], []).append((readers[node][1], slot))
                return True
            operand = plan.get(at[node])  # the buffer it would be computed in place into
            if not (type(operand) is Node and (operand.grad_of is None) == (node.grad_of is None)
                    and _contiguous(slot) and open_(operand, slot)):
                plan[at[node]] = slot
                return True
            if _join(operand) and _part_slots(operand, slot) is not None:
                overwritten.add(operand)
                join(operand, slot)
                return True
            if not writes_out(operand):
                plan[at[node]] = slot
                return True
            overwritten.add(operand)
            node = operand

    def join(node, slot):
        joins.slot[node] = slot
        order.append(node)
        joins.parts[node] = []
        for part, sub in zip(node.args, _part_slots(node, slot)):
            if _join(part) and open_(part, sub):
                parent[part] = node
            if not place(part, sub):
                joins.parts[node].append((part, sub))

    for node in reversed(graph.nodes):  # a join's parent comes after it: parents first
        if _join(node) and node not in joins.slot and not graph.marks.get(node.stack) \
                and node.shape != ():
            view = _stacked_slots(node, [placed.get(p) or joins.slot.get(p)
                                         if type(p) is Node and p not in overwritten else None
                                         for p in node.args])
            if view is not None and node not in kept:  # its parts lie in a buffer already
                # (and stay there: a part another value is computed over is not viewed)
                joins.slot[node] = view
                joins.parts[node] = []
                continue
            whole = Slot(node, ((0, None),) * len(node.shape))
            subs = _part_slots(node, whole)
            if subs is not None and any(open_(p, s) and (_join(p) or writes_out(p))
                                        for p, s in zip(node.args, subs)):
                before = len(order)
                join(node, whole)
                first[node] = min(at[x] for x in order[before:])
    for value, got in rows.items():  # a batched value computed into its readers' slots
        union = _rows_slot(value, got)
        if union is not None and union.base in first and open_(value, union) \
                and writes_out(value):
            before = len(order)
            place(value, union)
            first[union.base] = min(first[union.base], *(at[x] for x in order[before:]))
    for node, i in first.items():
        joins.alloc.setdefault(i, []).append(node)
    readers = {}
    for node in graph.nodes:
        for a in node.args:
            if type(a) is Node and a in joins.slot:
                readers.setdefault(a, set()).add(node)
    for node, slot in joins.slot.items():
        if slot.base is not node and (readers.get(node, set()) - {parent.get(node)} or node in kept):
            joins.bound.add(node)
    joins.fixed = set(placed) | set(joins.slot)
    slot_of = {**placed, **joins.slot}
    for i, operand in list(plan.items()):  # no other value written into a slot's buffer
        if type(operand) is Node and operand in joins.fixed \
                and slot_of.get(graph.nodes[i]) is not slot_of[operand]:
            del plan[i]
    # place and join read each other: a cycle that would hold every node until a collection
    place = join = None
    return plan, joins


def _row_readers(graph, kept, writes_out):
    """{reader: (value, k)} for each value whose every reader reads one row `value[k]`
    (passes/stepwise.py's batched values), each row read by one elementwise value of its
    shape and dtype that NumPy writes into a given array: computed into that reader's
    slot, the value is overwritten row by row by its readers, in place of a buffer."""
    rows_of = {}  # value -> its rows read by a getitem of one int, in a row's place
    for node in graph.nodes:
        if op(node) == "getitem" and len(node.args) == 1 and type(node.args[0]) is Node:
            items = node.params["index"].items
            if len(items) == 1 and type(items[0]) is int:
                rows_of.setdefault(node.args[0], []).append(node)
    candidates = {v for v in rows_of if v not in kept and v.prim is not None and v.shape
                  and type(v.shape[0]) is int and writes_out(v)}  # (n rows, not a formula)
    if not candidates:
        return {}
    rows = {r for v in candidates for r in rows_of[v]}
    users = {}  # of the candidates and of their rows alone
    for node in graph.nodes:
        for a in node.args:
            if type(a) is Node and (a in candidates or a in rows):
                users.setdefault(a, []).append(node)
    found = {}
    for value in candidates:
        read = {}
        for row in users.get(value, ()):
            readers = users.get(row, ())
            k = row.params["index"].items[0] if row in rows and row.args[0] is value else None
            if k is None or k in read or row in kept or len(readers) != 1 \
                    or sum(a is row for a in readers[0].args) != 1 or readers[0] in found \
                    or not writes_out(readers[0]) or op(readers[0]) == "matmul" \
                    or readers[0].shape != row.shape or readers[0].dtype != row.dtype:
                break
            read[k] = readers[0]
        else:
            if sorted(read) == list(range(value.shape[0])) \
                    and len(set(read.values())) == len(read):
                found.update((reader, (value, k)) for k, reader in read.items())
    return found


def _rows_slot(value, got):
    """The Slot that holds value's rows when row k lies in the k-th of the slots `got`
    [(k, slot)]: they differ in one index, running on by one, before any axis they keep;
    or None."""
    slots = [slot for _, slot in sorted(got, key=lambda kg: kg[0])]
    if sorted(k for k, _ in got) != list(range(value.shape[0])) \
            or len({s.base for s in slots}) != 1 or len({len(s.items) for s in slots}) != 1:
        return None
    first = slots[0].items
    varying = [q for q in range(len(first)) if any(s.items[q] != first[q] for s in slots)]
    if len(slots) < 2 or len(varying) != 1 or type(first[varying[0]]) is not int \
            or any(type(i) is tuple for i in first[:varying[0]]):
        return None
    q = varying[0]
    if [s.items[q] for s in slots] != list(range(first[q], first[q] + len(slots))):
        return None
    return Slot(slots[0].base, first[:q] + ((first[q], first[q] + len(slots)),) + first[q + 1:])


def _contiguous(slot):
    """The slot is one contiguous run of its buffer (a stack's row): NumPy's loops run at
    full speed on it, so values computed in place before the part may be computed there
    too. Elsewhere (`g_xw[t, :, :4]`, every row strided) only the part itself is, one
    strided loop instead of a contiguous one and a copy; nor is a forward value
    computed into a backward join's buffer (which would hold it from the forward on)."""
    items = list(zip(slot.items, slot.base.shape))
    while items and type(items[-1][0]) is tuple and items[-1][0][0] == 0 \
            and items[-1][0][1] in (None, items[-1][1]):
        items.pop()
    return all(type(item) is int for item, _ in items[:-1])


def _join(node):
    return op(node) in ("stack", "concatenate") and node.args \
        and type(node.params.get("axis")) is int


def _part_slots(node, slot):
    """The Slot of each of a join's parts inside the join's `slot`, or None when an offset
    is not a number."""
    kept = slot.kept()
    axis = node.params["axis"] % len(node.shape)
    position = kept[axis]
    start = slot.items[position][0]
    slots = []
    for k, part in enumerate(node.args):
        if op(node) == "stack":
            item = start + k
        else:
            size = part.shape[axis] if type(part) is Node and len(part.shape) > axis else None
            if type(size) is not int:
                return None
            item, start = (start, start + size), start + size
        slots.append(Slot(slot.base, slot.items[:position] + (item,) + slot.items[position + 1:]))
    return slots


def _stacked_slots(node, slots):
    """The Slot that a stack of parts lying in those slots is (`g_xw[:, :, 8:12]`, the rows
    8:12 of every step's stacked gradient), or None: the slots must differ in one index
    alone, running on by one, at the stack's axis among the slots' own."""
    if op(node) != "stack" or len(slots) < 2 or any(s is None for s in slots) \
            or len({s.base for s in slots}) != 1 or len({len(s.items) for s in slots}) != 1:
        return None
    first = slots[0].items
    varying = [k for k in range(len(first)) if any(s.items[k] != first[k] for s in slots)]
    if len(varying) != 1 or type(first[varying[0]]) is not int:
        return None
    q = varying[0]
    if [s.items[q] for s in slots] != list(range(first[q], first[q] + len(slots))) \
            or sum(type(i) is tuple for i in first[:q]) != node.params["axis"] % len(node.shape):
        return None
    return Slot(slots[0].base, first[:q] + ((first[q], first[q] + len(slots)),) + first[q + 1:])


def joins_last_use(graph, last_use, joins):
    """last_use with each part in a join's buffer dying at its last read by a statement,
    not at the join, which reads nothing of it (a step's state held as a name until the
    end of the backward is an array object per step); a join inside another has no name
    unless it is bound, so no `del`."""
    last = {}
    for i, node in enumerate(graph.nodes):
        if node in joins.fixed and (node not in joins.slot or joins.slot[node].base is not node):
            last.setdefault(node, i)
        for a in node.args:
            if type(a) is Node and a in last and (node not in joins.slot or any(
                    a is p for p, _ in joins.parts[node])):
                last[a] = i
    at = {node: i for i, node in enumerate(graph.nodes)}
    joins.unread = {n for n, i in last.items() if i == at[n] and n not in joins.slot}
    out = {}
    for i, nodes in last_use.items():
        for n in nodes:
            if n not in last:
                out.setdefault(i, []).append(n)
            elif n not in joins.unread and (n not in joins.slot or n in joins.bound):
                out.setdefault(last[n], []).append(n)
    return out
