"""The proof that a loop's steps are one program (loops/scan.py rolls what it proves).

Step k is compared with step 0 position by position, as the trace recorded them (the same
Python taking the same path records the same nodes in the same order): the same
primitive, dtype and shape; parameters equal, or an index whose ints are affine in t
(`xs[t]`, `xs[n - 1 - t]`); each argument a value of the same step at the same position,
a value of the step before (a carry, step 0 reading its first value from outside), one
value from outside (an invariant), an equal constant, a number affine in t, or a table of
one number per step, or one value per step from outside (the items of a list, stacked
before the loop). What a step's values are read as after the loop (a carry's last
value, a row of a stack, a row of a value from outside read again) is found here too.
"""

import numpy as np

from ..graph import Node, constant_key, is_guard, recomputed, users_of
from ..tree import leaves
from .roll import Unproven

_INDEXED = {"getitem", "setitem", "scatter_add", "add_at"}  # an Index parameter, args filled


class Proof:
    """Step 0 as the template and what each of its arguments is in every step."""

    def __init__(self, graph, steps, ts, users=None, exit=False):
        """`users`: users_of(graph.nodes), when the caller has it (several parts of one
        run are tried in turn, each proof reading the same graph). `exit`: the steps are
        a `while` loop's, each ending with its test, which gives the other outcome at the
        last step (the loop then ends: find.exit_of)."""
        if list(range(ts[0], ts[-1] + (1 if ts[-1] >= ts[0] else -1),
                      1 if ts[-1] >= ts[0] else -1)) != ts:
            raise Unproven("its steps are not consecutive")
        self.graph, self.ts = graph, ts
        self.users = users if users is not None else users_of(graph.nodes)
        self._order = None
        self.steps = [self._with_reads(s) for s in steps]
        self.position = [{n: p for p, n in enumerate(s)} for s in self.steps]
        self.place = {n: p for position in self.position for n, p in position.items()}
        self.inside = {n for s in self.steps for n in s}
        template = self.steps[0]
        if any(len(s) != len(template) for s in self.steps):
            raise Unproven(f"its steps record {sorted({len(s) for s in self.steps})} values")
        self.exit = len(template) - 1 if exit else None  # the test's place in a step
        for k in range(1, len(self.steps)):
            for p in range(len(template)):
                if not self._same(p, k):
                    raise Unproven(f"step {k} computes {self.steps[k][p].prim.name} where "
                                   f"step 0 computes {template[p].prim.name} "
                                   f"({_where(template[p])})")
        self.carries = {}  # position of a carry's new value -> its initial value
        self.args = [[self._argument(p, a) for a in range(len(node.args))]
                     for p, node in enumerate(template)]
        self.index = [self._index(p) for p in range(len(template))]
        self._check_outside()
        self.final, self.stacked = self._escapes()

    def _with_reads(self, step):
        """A step with the rows of stacks it reads (`hs[t]`, made outside by the roll of
        the forward) first: getitems no other step reads."""
        mine, reads = set(step), []
        for node in step:
            if is_guard(node) and node.params["test"] == "raises" \
                    or node in self.graph.tried or node.prim.op == "checkpoint" \
                    or recomputed(node):  # (a guard checked every step is kept)
                raise Unproven(f"a step has a {_kind(node)}, not kept in a loop yet")
            for a in node.args:
                if type(a) is Node and a.prim is not None and a.prim.op == "getitem" \
                        and a not in mine and a not in reads \
                        and all(u in mine for u in self.users.get(a, ())):
                    reads.append(a)
        if len(reads) > 1:
            if self._order is None:
                self._order = {n: i for i, n in enumerate(self.graph.nodes)}
            reads.sort(key=self._order.__getitem__)
        return reads + list(step)

    def _argument(self, p, a):
        values = [s[p].args[a] for s in self.steps]
        head = values[0]
        if all(type(v) is Node for v in values):
            here = [self.position[k].get(v) for k, v in enumerate(values)]
            if here[0] is not None and all(q == here[0] for q in here):
                return ("here", here[0])
            before = [self.position[k - 1].get(v) for k, v in enumerate(values) if k]
            if head not in self.inside and before[0] is not None \
                    and all(q == before[0] for q in before):
                return self._carry(before[0], head)
            if head not in self.inside and all(v is head for v in values):
                return ("outer", head)
            if not any(v in self.inside for v in values) \
                    and len({id(v) for v in values}) == len(values) \
                    and all(v.shape == head.shape and v.dtype == head.dtype for v in values):
                return ("rows", tuple(values))  # a value of its own per step: a list's items
        elif type(head) is not Node and not any(type(v) is Node for v in values[1:]):
            if all(constant_key(v) == constant_key(head) for v in values):
                return ("const", head)
            affine = _affine(values, self.ts)
            if affine is not None:
                return ("affine", *affine)
            table = _table(values, self.ts, self.steps[0][p].dtype)
            if table is not None:  # a number per step (1 / (t + 1)): read from a table
                return ("table", table, min(self.ts))
        elif type(head) is not Node and all(type(v) is Node for v in values[1:]):
            before = [self.position[k - 1].get(v) for k, v in enumerate(values) if k]
            if before[0] is not None and all(q == before[0] for q in before):
                return self._carry(before[0], head)
        raise Unproven(f"step 1 of {self.steps[0][p].prim.name} at "
                       f"{_where(self.steps[0][p])} reads another kind of value than step 0")

    def _same(self, p, k):
        node, head = self.steps[k][p], self.steps[0][p]
        if node.prim is not head.prim or node.dtype != head.dtype or node.shape != head.shape \
                or len(node.args) != len(head.args) or node.params.keys() != head.params.keys():
            return False
        ends = p == self.exit and k == len(self.steps) - 1  # the test that ended the loop
        if ends and node.params["outcome"] == head.params["outcome"]:
            return False
        return all(key == "index" and node.prim.op in _INDEXED
                   or ends and key == "outcome"
                   or constant_key(node.params[key]) == constant_key(head.params[key])
                   for key in node.params)

    def _carry(self, q, init):
        known = self.carries.get(q, init)
        if known is not init and (type(init) is Node or type(known) is Node
                                  or constant_key(known) != constant_key(init)):
            raise Unproven("a value it carries starts from two values")
        out = self.steps[0][q]
        if type(init) is Node and (init.shape != out.shape or init.dtype != out.dtype) \
                or type(init) is not Node and np.shape(init) != out.shape:
            raise Unproven("a value it carries changes shape or dtype at the first step")
        self.carries[q] = init
        return ("carry", q)

    def _index(self, p):
        """None, or the template's Index with the items that vary as ("affine", a, b)."""
        head = self.steps[0][p]
        if "index" not in head.params or head.prim.op not in _INDEXED:
            return None
        indexes = [s[p].params["index"] for s in self.steps]
        if all(i == indexes[0] for i in indexes):
            return None
        columns = list(zip(*(i.items for i in indexes)))
        if any(len(i.items) != len(indexes[0].items) for i in indexes):
            raise Unproven("its index changes shape from step to step")
        items = []
        for column in columns:
            if all(type(c) is type(column[0]) and c == column[0] for c in column):
                items.append(column[0])
                continue
            affine = _affine(list(column), self.ts) if all(type(c) is int for c in column) \
                else None
            if affine is None:
                raise Unproven("its index changes other than as a + b t from step to step")
            items.append(("affine", *affine))
        return items

    def reread(self, node):
        """Whether a step's value is a row of a value from outside (`xs[t]`), which a
        reader after the loop reads again rather than from a stack."""
        p = self.place.get(node)
        return p is not None and node.prim.op == "getitem" and \
            all(kind[0] in ("outer", "const", "affine", "rows") for kind in self.args[p])

    def _check_outside(self):
        """Nothing outside the steps that they read may be computed from them (it would
        come after the loop it feeds)."""
        downstream, stack = set(), [u for s in self.steps for n in s
                                    for u in self.users.get(n, ()) if u not in self.inside]
        while stack:
            node = stack.pop()
            if node not in downstream:
                downstream.add(node)
                stack.extend(self.users.get(node, ()))
        for column in self.args:
            for arg in column:
                if arg[0] == "outer" and arg[1] in downstream or \
                        arg[0] == "rows" and any(v in downstream for v in arg[1]):
                    raise Unproven("a value it reads is computed from its steps")
        for init in self.carries.values():
            if type(init) is Node and init in downstream:
                raise Unproven("a value it carries starts from one computed from its steps")

    def _escapes(self):
        """(carries whose last value is read after the loop, positions stacked): a value
        read outside the steps (later code, the backward, the outputs)."""
        returned = {o for o in leaves(self.graph.outputs) if type(o) is Node}
        last = len(self.steps) - 1
        final, stacked = set(), set()
        self.views = {}  # a position read after the loop as a slice of another's row
        for k, step in enumerate(self.steps):
            for p, node in enumerate(step):
                if node in returned or any(u not in self.inside for u in self.users.get(node, ())):
                    if k == last and p in self.carries:
                        final.add(p)
                    elif self.reread(node):
                        continue
                    elif self._slice_of(p) is not None:  # `z = zr[:, :H]`: zr's row, sliced
                        self.views[p] = self._slice_of(p)
                        stacked.add(self.views[p])
                    else:
                        stacked.add(p)
        return sorted(final), sorted(stacked)

    def _slice_of(self, p):
        """The position q when step values at p are a static slice of those at q (a view:
        saved as q's rows, read back sliced), else None."""
        node = self.steps[0][p]
        kinds = self.args[p]
        if node.prim.op != "getitem" or len(kinds) != 1 or kinds[0][0] != "here" \
                or self.index[p] is not None or not all(
                    type(i) in (int, slice) and all(type(b) in (int, type(None))
                                                    for b in _bounds(i))
                    for i in node.params["index"].items):
            return None
        return kinds[0][1]


def _bounds(item):
    return (item.start, item.stop, item.step) if type(item) is slice else ()


def _affine(values, ts):
    """(a, b) with values[k] == a * ts[k] + b exactly, numbers of one type; or None."""
    kind = type(values[0])
    if kind not in (int, float) or any(type(v) is not kind for v in values):
        return None
    a = (values[1] - values[0]) / (ts[1] - ts[0])
    b = values[0] - a * ts[0]
    if kind is int:
        if a != int(a) or b != int(b):
            return None
        a, b = int(a), int(b)
    if all(a * t + b == v for t, v in zip(ts, values)):
        return a, b
    return None


def _table(values, ts, dtype):
    """The steps' constants as one array, row t - min(ts) for step t: NumPy scalars or
    arrays of one dtype and shape as they are, Python numbers in the dtype of the value
    they are an operand of (where NumPy takes a Python number in that dtype anyway); or
    None."""
    order = sorted(range(len(ts)), key=ts.__getitem__)
    rows = [values[k] for k in order]
    head = rows[0]
    if all(type(v) in (int, float) for v in rows) and dtype is not None \
            and dtype.kind in "fc" and any(type(v) is float for v in rows):
        return np.array(rows, dtype=dtype)
    if isinstance(head, (np.ndarray, np.generic)) and all(
            type(v) is type(head) and v.dtype == head.dtype and np.shape(v) == np.shape(head)
            for v in rows):
        return np.stack([np.asarray(v) for v in rows])
    return None


def _where(node):
    return f"{node.loc[0].rsplit('/', 1)[-1]}:{node.loc[1]}" if node.loc else "?"


def _kind(node):
    """What a node that is not kept in a loop is, for the message."""
    if node.prim.op == "checkpoint" or recomputed(node):
        return "checkpointed call (autodiffgen.checkpoint: its steps stay written out)"
    if is_guard(node):
        return "call whose raise decides the path (in a `try:`)"
    return f"statement in a `try:` ({node.prim.name})"
