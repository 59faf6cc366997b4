"""The one way passes change a graph: substitute values for nodes, copying what changes.

Nothing is mutated: a node whose arguments change is replaced by a copy, and the copy
takes over the original's name, location and role, so the emitted code reads the same.
"""

import dataclasses

from ..graph import Node, op
from ..tree import map_tree


def clone(node, args=None, prim=None, params=None):
    """A copy of `node` with other arguments (and primitive or parameters): Node.replace."""
    changes = {}
    if args is not None:
        changes["args"] = tuple(args)
    if prim is not None:
        changes["prim"] = prim
    if params is not None:
        changes["params"] = params
    return node.replace(**changes)


def substitute(graph, replace):
    """`graph` with every use of a key of `replace` reading its value instead.

    A value is a node already in the graph, a constant, or a new node (made with `clone`)
    that takes the replaced node's place in the order. Returns (graph, changed).

    Linear in the graph, and cheap per node left as it is (a pass often replaces a few
    nodes of a large graph): a node none of whose arguments changed is kept without a
    call, and the set of the graph's nodes is made only when a new node is inserted."""
    if not replace:
        return graph, False
    _keep_names(replace)
    present = None  # the graph's nodes and inputs (a backward function's inputs are nodes)
    new_of = {}

    def resolve(arg):
        while type(arg) is Node and arg in replace:
            arg = replace[arg]
        return new_of.get(arg, arg) if type(arg) is Node else arg

    changed = set(replace)  # the nodes whose readers change: replaced ones, copied ones

    def renew(node):  # a node some argument of which may have changed
        args = tuple([resolve(a) for a in node.args])
        for a, b in zip(args, node.args):
            if a is not b:
                break
        else:
            return new_of.get(node, node)
        new_of[node] = copy = node.replace(args=args)
        changed.add(node)
        return copy

    nodes = []
    append, untouched = nodes.append, changed.isdisjoint

    def insert(target):
        """A new node (and any new node it reads) in the place of the one it replaces."""
        nonlocal present
        if type(target) is not Node or target.prim is None or target in new_of:
            return
        if present is None:
            present = set(graph.nodes)
            present.update(graph.inputs)
        if target in present:
            return
        for arg in target.args:
            insert(arg)
        append(renew(target))
        new_of.setdefault(target, target)

    for node in graph.nodes:
        if node in replace:
            insert(replace[node])
            continue
        try:
            if untouched(node.args):  # most nodes: nothing they read changed
                append(node)
                continue
        except TypeError:  # an unhashable constant (an array) among the arguments
            pass
        append(renew(node))
    insert = None  # it calls itself: a cycle that would hold the old graph until a collection
    outputs = map_tree(graph.outputs, lambda o: resolve(o) if type(o) is Node else o)
    derivative_of = {}
    for node, of in graph.derivative_of.items():
        target = resolve(node) if node in replace or node in new_of else node
        if type(target) is Node and target.grad_of is not None:  # forward values keep
            derivative_of.setdefault(target, of)                 # their own names
    return dataclasses.replace(graph, nodes=nodes, outputs=outputs,
                               derivative_of=derivative_of), True


def _keep_names(replace):
    """A user's name goes on with the value: a named node replaced by an unnamed one of
    the same value (`correction1 = (...).astype(p.dtype)`, a cast to the dtype it has)
    gives it its name, so the code still says what the user called it."""
    for old, new in replace.items():
        if type(new) is Node and old.name is not None and new.name is None \
                and new.prim is not None and new.grad_of is None and old.grad_of is None:
            new.name = old.name


def unchanged(node, examined, replace):
    """Whether a local pass (fold, simplify), which looked at `node` before and left it,
    would leave it again: none of its arguments is replaced in this sweep (`replace`)."""
    if examined is None or node not in examined:
        return False
    if not replace:
        return True
    try:
        return replace.keys().isdisjoint(node.args)
    except TypeError:  # an unhashable constant (an array) among the arguments
        return not any(type(a) is Node and a in replace for a in node.args)


def guard_reads(graph):
    """The nodes a guard's value is computed from. A guard compares the value the code
    computes with the one the trace computed, so passes that change arithmetic (a sum
    reassociated into one matmul, a stable form, numexpr) leave these alone: computed in
    another order, the value can differ in its last bit and the guard would fail forever."""
    return ancestors([a for n in graph.nodes if (p := n.prim) is not None  # is_guard,
                      and p.name == "guard" and p.op is not None for a in n.args])  # inline


def ancestors(nodes):
    """The nodes among `nodes` and every node they are computed from (constants left out)."""
    read, stack = set(), list(nodes)
    while stack:
        node = stack.pop()
        if type(node) is Node and node not in read:
            read.add(node)
            stack.extend(node.args)
    return read


def op_here(x, opaque):
    """The primitive name of a node computed in this graph and not one of `opaque` (the
    nodes a pass must leave as they are: inputs, what a guard reads); None otherwise."""
    return None if type(x) is not Node or x in opaque else op(x)
