"""Per-step elementwise work on a stack's parts done once, over the whole stack.

An unrolled loop's backward computes, step by step, values that depend on the forward's
saved values alone: a tanh's `1 - h_k * h_k`, read once by `g_k * (1 - h_k * h_k)`. On a
recurrent net's small arrays (16 x 64) each of those NumPy calls is mostly its own
overhead (about a microsecond), paid per step. When the h_k are the parts of a stack the
forward already writes them into (accumulate.py's stack of every step's state), the same
subgraph applied to each part is one subgraph applied to the stack, one ufunc call per
operation over (T, B, H), and each step reads its row `F[k]`:

    h_k = stack(...)[k]; m_k = h_k * h_k; s_k = 1 - m_k; ... g_k * s_k ...
 -> S = stack(h_a, ..., h_b); M = S * S; F = 1 - M; ... g_k * F[k - a] ...

Conditions, so the rewrite computes the same values, at no more memory:
- the subgraphs are the same up to the part: the same primitives, parameters, constants,
  dtypes and shapes (`_key`), made of elementwise ufuncs on the part, constants and 0-d
  values (the same node for every part), none broadcast beyond the part's shape; one
  value (the root) leaves the subgraph, and nothing but the subgraph reads its others;
- a run of at least two consecutive parts of one stack (axis 0), computed before the
  first root is (so the batched value is computed where the first root was);
- each root is read once, by an elementwise value of its shape and dtype that is a part of
  a join, in the same order as the stack's: the emitter (emit_slots.py) computes the
  batched value into the rows of that join's buffer, which each reader then overwrites
  in place with its own result, so no buffer is added (peak memory as before);
- no output, guard-read or input value is touched, nor a checkpoint's recomputed value
  or a statement in a `try:` or under np.errstate.
The values are the same elementwise operations on the same numbers: bit for bit equal.
"""

from ..graph import Index, Node, constant_key, op, recomputed, users_of
from ..rules import PRIMITIVES, elementwise_ufunc
from ..tree import leaves
from .rewrite import clone, guard_reads, substitute

MIN_RUN = 2  # parts in a run: fewer is no batching
MAX_NODES = 16  # nodes of one subgraph (a bound on the work per part)


def stepwise(graph):
    stacks = [n for n in graph.nodes if op(n) == "stack" and len(n.args) >= MIN_RUN
              and n.params.get("axis") == 0]
    if not stacks:
        return graph, False
    users = users_of(graph.nodes)
    at = {n: i for i, n in enumerate(graph.nodes)}
    opaque = _Opaque(set(graph.inputs) | guard_reads(graph) |
                     {leaf for leaf in leaves(graph.outputs) if type(leaf) is Node},
                     graph.marks)
    replace = {}
    for stack in stacks:
        found = [_families(p, users, opaque) if type(p) is Node and p not in opaque
                 else {} for p in stack.args]
        for a, b, key in _runs(found):
            run = [found[k][key] for k in range(a, b)]
            parts = list(stack.args[a:b])
            if max(at.get(p, -1) for p in parts) >= min(at[f.root] for f in run) \
                    or len(set(parts)) != len(parts) or not _in_order(run, users) \
                    or any(f.root in replace for f in run):  # (a part of two stacks)
                continue
            rows = _batched(stack, parts, run[0])
            for k, family in enumerate(run):
                row = clone(family.root, (rows,), PRIMITIVES["getitem"], {"index": Index((k,))})
                replace[family.root] = row
    return substitute(graph, replace)


class _Opaque:
    """What the pass leaves as it is: inputs, outputs, what a guard reads (`fixed`), a
    checkpoint's recomputed values (a stack of them would keep them all), statements in
    a `try:` or under np.errstate (`marks`, raising.py)."""

    def __init__(self, fixed, marks):
        self.fixed, self.marks = fixed, marks

    def __contains__(self, node):
        return node in self.fixed or recomputed(node) or bool(self.marks) \
            and bool(self.marks.get(node.stack))


class _Family:
    """The subgraph computed from one part: its nodes in graph order, the value leaving it
    (root), and its key (equal keys: the same subgraph up to the part)."""

    def __init__(self, part, nodes, root):
        self.part, self.nodes, self.root = part, nodes, root
        self.key = _key(part, nodes)


def _families(part, users, opaque):
    """{key: family} of the elementwise subgraphs hanging off `part` (each connected apart
    from the part and 0-d values) that leave it through one value, read by one
    elementwise value (not of the subgraph) that is a part of a join."""
    if part.shape == () or part.prim is None:
        return {}
    inside, members, pending = {part}, [], list(users.get(part, ()))
    grown = True
    while grown and len(members) < MAX_NODES:  # a node joins once all it reads is inside
        grown = False
        for node in list(dict.fromkeys(pending)):
            if node not in inside and node not in opaque and _pointwise(node, part) \
                    and all(type(a) is not Node or a in inside or a.shape == ()
                            for a in node.args):  # a 0-d value: the same for every row
                inside.add(node)
                members.append(node)
                pending.extend(users.get(node, ()))
                grown = True
    found = {}
    for nodes in _components(members, part):
        family = _family(part, nodes, users, opaque)
        if family is not None:
            found.setdefault(family.key, family)
    return found


def _components(members, part):
    """The members split into the groups connected through what they read (not through the
    part or a 0-d value), each in the members' order (each after what it reads)."""
    group = {}
    for node in members:
        linked = {group[a] for a in node.args if type(a) is Node and a in group}
        mine = set().union(*linked, {node}) if linked else {node}
        for n in mine:
            group[n] = frozenset(mine)
    return [[n for n in members if n in g] for g in dict.fromkeys(group[n] for n in members)]


def _family(part, nodes, users, opaque):
    inside = set(nodes)
    leaving = [n for n in nodes if any(u not in inside for u in users.get(n, ()))]
    if len(leaving) != 1 or any(not users.get(n) for n in nodes):
        return None
    root = leaving[0]
    readers = users.get(root, ())
    if len(readers) != 1 or not _pointwise(readers[0], part) or readers[0] in opaque \
            or not any(_join(j) for j in users.get(readers[0], ())):
        return None
    return _Family(part, nodes, root)


def _pointwise(node, part):
    """An elementwise ufunc of the part's shape and dtype, whose constants broadcast no
    further (so over the stack it is the same operation, row by row)."""
    if op(node) is None or not elementwise_ufunc(node.prim) \
            or node.shape != part.shape or node.dtype != part.dtype:
        return False
    return all(type(a) is Node or len(getattr(a, "shape", ())) == 0 for a in node.args)


def _key(part, nodes):
    """What the subgraph computes from its part: per node, the primitive, parameters,
    dtype, shape, and each argument as a member (by position), the part, a 0-d value (the
    same node) or a constant (by value)."""
    position = {n: i for i, n in enumerate(nodes)}
    position[part] = "part"

    def arg(a):
        if type(a) is not Node:
            return ("const", constant_key(a))
        return ("node", position[a]) if a in position else ("0-d", id(a))
    return tuple((n.prim.name, repr(sorted(n.params.items())), str(n.dtype), n.shape,
                  tuple(arg(a) for a in n.args)) for n in nodes)


def _runs(found):
    """(start, stop, key) of each maximal run of consecutive parts with a family of one key
    (each part's families by key: `found`)."""
    keys = list(dict.fromkeys(key for families in found for key in families))
    for key in keys:
        k = 0
        while k < len(found):
            stop = k
            while stop < len(found) and key in found[stop]:
                stop += 1
            if stop - k >= MIN_RUN:
                yield k, stop, key
            k = max(stop, k + 1)


def _in_order(run, users):
    """The roots' readers are parts of joins that lay them out row after row in the order
    of the run: the same position in joins that are, level by level, consecutive parts of
    one stack (axis 0) at one level and the same position in one join above it."""
    positions = {}  # join -> {argument: its positions}: each join's arguments listed once
    paths = [_path(users[f.root][0], users, positions) for f in run]
    if any(p is None for p in paths) or len({len(p) for p in paths}) != 1:
        return False
    levels = [{p[i] for p in paths} for i in range(len(paths[0]))]
    varying = [i for i, level in enumerate(levels) if len(level) > 1]
    if len(varying) != 1:
        return False
    level = varying[0]
    joins = {p[level][0] for p in paths}
    start = paths[0][level][1]
    return len(joins) == 1 and op(next(iter(joins))) == "stack" \
        and next(iter(joins)).params.get("axis") == 0 \
        and [p[level][1] for p in paths] == list(range(start, start + len(run))) \
        and all(op(p[i][0]) == "stack" and p[i][0].params.get("axis") == 0
                for p in paths for i in range(level)) \
        and all(len({p[i][1] for p in paths}) == 1 for i in range(level + 1, len(paths[0])))


def _path(node, users, positions):
    """[(join, position of what is below in it)] from the outermost join down to node, or
    None when node is in no join or in one twice."""
    path = []
    while True:
        joins = [j for j in users.get(node, ()) if _join(j)]
        if not joins:
            return path[::-1] or None
        join = joins[0]
        where = positions.get(join)
        if where is None:
            where = positions[join] = {}
            for i, a in enumerate(join.args):
                if type(a) is Node:
                    where.setdefault(a, []).append(i)
        if len(where[node]) != 1:
            return None
        path.append((join, where[node][0]))
        node = join


def _join(node):
    return op(node) in ("stack", "concatenate") and type(node.params.get("axis")) is int


def _batched(stack, parts, family):
    """The family's subgraph over the stack of the parts: its root's counterpart."""
    note = f"{family.root.prim.name} of {len(parts)} steps at once, each step reads its row"
    rows = stack.replace(prim=PRIMITIVES["stack"], args=tuple(parts), params={"axis": 0},
                         shape=(len(parts),) + parts[0].shape, dtype=parts[0].dtype,
                         grad_of=family.root.grad_of, note=note)
    copies = {family.part: rows}
    for node in family.nodes:
        copies[node] = node.replace(args=tuple(copies.get(a, a) if type(a) is Node else a
                                               for a in node.args), shape=rows.shape, note=note)
    return copies[family.root]
