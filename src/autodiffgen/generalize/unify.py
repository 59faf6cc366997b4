"""Unification: several traces of one function, matched node by node, as one graph whose
numbers are formulas (size_formulas.fit) equal to each trace's at its size.

The batch stage (batch.py) unifies traces at n, n-1 and a low size; the counts stage
(counts.py) subclasses the Unifier, fitting a differing number to one mask's count.
"""

import dataclasses

from ..graph import Graph, Index, Node, is_guard
from ..graph.size_formulas import NoFit, SymArray, fit, same
from ..passes.rewrite import clone
from ..rules.loops import SymRange
from ..trace.reads import Read
from ..tree import is_container, items, rebuild, static_part


def unify(graphs, ns, var="n"):
    """One graph whose numbers are formulas in n, equal to graphs[i] at n = ns[i]; None
    if the graphs differ in structure or a differing number fits no formula."""
    try:
        return Unifier(graphs, ns, var).graph()
    except NoFit:
        return None


class Unifier:
    """Walks the graphs in step: nodes by their place in the order (so the wiring must be
    the same), every other value by `fit`."""

    def __init__(self, graphs, ns, var):
        self.graphs, self.ns, self.var = graphs, ns, var
        self.position = [{} for _ in graphs]  # per graph: node -> its place
        self.made = {}  # place -> the unified node
        self.of_first = {}  # first graph's node -> the unified node

    def graph(self):
        first = self.graphs[0]
        inputs = [self.node(column, ("input", i))
                  for i, column in enumerate(self.columns("inputs"))]
        nodes = [self.node(column, ("node", i))
                 for i, column in enumerate(self.columns("nodes"))]
        outputs = self.value([g.outputs for g in self.graphs])
        handled = {"inputs", "nodes", "outputs", "derivative_of", "paths", "signature", "doc",
                   "donated"}
        rest = {f.name: self.value([getattr(g, f.name) for g in self.graphs])
                for f in dataclasses.fields(Graph) if f.name not in handled}
        derivative_of = {self.of_first.get(k, k): self.of_first.get(v, v)
                         for k, v in first.derivative_of.items()}
        donated = [frozenset(self.position[i].get(n) for n in g.donated)
                   for i, g in enumerate(self.graphs)]
        if any(d != donated[0] for d in donated) or None in donated[0]:
            raise NoFit  # (a compiled step's params, a loop's carries: by place)
        return dataclasses.replace(first, **rest, inputs=inputs, nodes=nodes, outputs=outputs,
                                   derivative_of=derivative_of, paths={},
                                   donated=frozenset(self.made[p] for p in donated[0]))

    def columns(self, name):
        lists = [getattr(g, name) for g in self.graphs]
        if len({len(nodes) for nodes in lists}) != 1:
            raise NoFit
        return list(zip(*lists))

    def node(self, column, place):
        """The unified node of one node per graph (same primitive, wiring, dtype)."""
        head = column[0]
        if any(n.prim is not head.prim or len(n.args) != len(head.args)
               or n.dtype != head.dtype for n in column):
            raise NoFit
        args = [self.value(list(a)) for a in zip(*(n.args for n in column))]
        params = [self.params(n) for n in column]
        if is_guard(head) and not self.same_guard(params):  # an outcome is data, not a size
            raise NoFit
        params = self.value(params)
        if _holds(params, SymArray):  # parameters are written as literals: no arrays
            raise NoFit
        made = clone(head, args, params=params)
        made.shape = self.value([n.shape for n in column])
        for position, n in zip(self.position, column):
            position[n] = place
        self.made[place] = self.of_first[head] = made
        return made

    def value(self, values):
        """One value (constant or formula) standing for values[i] in graph i."""
        head = values[0]
        if all(v is head for v in values):  # the same object (a global array, a module)
            return head
        if any(type(v) is not type(head) for v in values):
            raise NoFit
        if type(head) is Node:
            places = {position.get(v) for position, v in zip(self.position, values)}
            if len(places) != 1 or None in places:
                raise NoFit
            return self.made[places.pop()]
        if is_container(head):
            if any(static_part(v) != static_part(head) for v in values):
                raise NoFit
            columns = zip(*([child for _, child in items(v)] for v in values))
            return rebuild(head, [self.value(list(c)) for c in columns])
        if type(head) is slice:
            return slice(*(self.value([getattr(v, f) for v in values])
                           for f in ("start", "stop", "step")))
        if type(head) is Index:
            return Index(self.value([v.items for v in values]))
        if type(head) is Graph:  # a loop's body (rules/loops.py): unified on its own
            return self.inner(values).graph()
        if type(head) is range:  # a loop's steps: their bounds may be sizes
            if all(v == head for v in values):
                return head
            if any(v.step != head.step for v in values):
                raise NoFit
            return SymRange(self.value([v.start for v in values]),
                            self.value([v.stop for v in values]), head.step)
        if dataclasses.is_dataclass(head) and not isinstance(head, type):
            return self.record(values)
        return self.fit(values)

    def params(self, node):
        """The parameters of `node` its unified node takes (each the same, or fitted)."""
        return node.params

    def inner(self, graphs):
        """A Unifier of graphs held by these (a loop's body), fitting numbers as this one."""
        return Unifier(graphs, self.ns, self.var)

    def same_guard(self, params):
        return same(params)

    def fit(self, values):
        return fit(values, self.ns, self.var)

    def record(self, values):
        """A dataclass instance (e.g. a capture.Captured), field by field. A Read's place
        (`SCALES[len(x[m])]`) is one in every trace: the code reads it before it computes
        anything, so no size or count is known there to write a formula over."""
        head = values[0]
        if type(head) is Read and any(v.chain != head.chain for v in values):
            raise NoFit
        changed = {}
        for f in dataclasses.fields(head):
            value = self.value([getattr(v, f.name) for v in values])
            if value is not getattr(head, f.name):
                changed[f.name] = value
        return dataclasses.replace(head, **changed) if changed else head


def _holds(value, kind):
    if type(value) is kind:
        return True
    if type(value) is dict:
        value = list(value.values())
    return type(value) in (tuple, list) and any(_holds(v, kind) for v in value)
