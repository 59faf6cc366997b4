"""The IR (graph/): what a node knows is on the node, copied by one `Node.replace`; nodes
a pass makes get their ids from the graph and leave it only when nothing reads them."""

import dataclasses
import importlib
import inspect
import pkgutil
import weakref

import numpy as np
import pytest

from autodiffgen import graph as ir
from autodiffgen.graph import FACTS, Graph, Node, original
from autodiffgen.passes.rewrite import clone, substitute
from autodiffgen.rules import PRIMITIVES

_WEAK = (weakref.WeakKeyDictionary, weakref.WeakValueDictionary, weakref.WeakSet)


def _modules(*packages):
    for name in packages:
        package = importlib.import_module(f"autodiffgen.{name}")
        yield package
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            yield importlib.import_module(info.name)


def test_no_module_keeps_facts_about_nodes_in_a_weak_table():
    """The facts that were global weak tables (COPY_OF, NOTES, PYTHON_NUMBERS in graph,
    RECOMPUTED in the memory plan) are fields of Node: a copy carries them, and no table
    outlives or misses a node."""
    for module in _modules("graph", "passes", "plan", "codegen", "backward"):
        tables = [k for k, v in vars(module).items() if isinstance(v, _WEAK)
                  and _defined_here(module, k)]
        assert tables == [], module.__name__
    for gone in ("COPY_OF", "NOTES", "PYTHON_NUMBERS"):
        assert not hasattr(ir, gone)
    assert not hasattr(importlib.import_module("autodiffgen.plan.memory"), "RECOMPUTED")


def _defined_here(module, name):
    """`name` is assigned at the top of `module` (not imported into it: the rule tables
    of rules/, keyed by primitive, are read by backward/)."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(module))
    return any(isinstance(s, (ast.Assign, ast.AnnAssign)) and name in
               {t.id for t in (s.targets if isinstance(s, ast.Assign) else [s.target])
                if isinstance(t, ast.Name)} for s in tree.body)


def _node(id=3):
    x = Node(1, None, (), {"path": (0,)}, (2,), np.dtype("float64"), trace_id=7)
    node = Node(id, PRIMITIVES["sin"], (x,), {}, (2,), np.dtype("float64"),
                ("model.py", 12), (("model.py", 12),), None, trace_id=7)
    return x, node


def _with_every_fact(node):
    """`node` with every fact set to a value other than its default."""
    other = Node(0, None, (), {}, (), np.dtype("float64"))
    values = {"name": "h", "statements": (1,), "copy_of": other, "note": "a note",
              "python_number": True, "rematerialized": True, "site": ((1, None, 4),)}
    assert set(values) == set(FACTS)  # a new fact gets a value here, and so a check below
    for key, value in values.items():
        assert getattr(node, key) == FACTS[key]
        setattr(node, key, value)
    return node


def _fields(node):
    return {k: getattr(node, k) for k in Node.__slots__ if k != "__weakref__"}


def test_replace_carries_every_field_and_fact():
    x, node = _node()
    _with_every_fact(node)
    copy = node.replace()
    assert copy is not node and _fields(copy) == _fields(node)
    y = Node(2, None, (), {"path": (1,)}, (2,), np.dtype("float64"))
    changed = node.replace(args=(y,), prim=PRIMITIVES["cos"])
    assert changed.args == (y,) and changed.prim is PRIMITIVES["cos"]
    assert {k: v for k, v in _fields(changed).items() if k not in ("args", "prim")} == \
        {k: v for k, v in _fields(node).items() if k not in ("args", "prim")}
    assert node.args == (x,) and node.prim is PRIMITIVES["sin"]  # the original is as it was


def test_replace_refuses_a_field_a_node_does_not_have():
    _, node = _node()
    with pytest.raises(AttributeError):
        node.replace(nmae="h")


def test_clone_and_substitute_carry_the_facts():
    x, node = _node()
    _with_every_fact(node)
    assert _fields(clone(node)) == _fields(node)
    out = Node(4, PRIMITIVES["negative"], (node,), {}, (2,), np.dtype("float64"))
    graph = Graph("f", ["x"], [x], [node, out], out)
    y = Node(2, None, (), {"path": (1,)}, (2,), np.dtype("float64"))
    new, changed = substitute(graph, {x: y})
    assert changed
    copy = new.nodes[0]
    assert copy is not node and copy.args == (y,)
    assert {k: v for k, v in _fields(copy).items() if k != "args"} == \
        {k: v for k, v in _fields(node).items() if k != "args"}


def test_derived_keeps_the_place_and_drops_the_value_s_facts():
    """A new value made in a node's place (a part of what it computes) has its id, trace,
    source line and rule, not its name or other facts: those stay with the value."""
    x, node = _node()
    _with_every_fact(node)
    node.grad_of = x
    part = node.derived(PRIMITIVES["negative"], [x], shape=(1, 2))
    assert (part.id, part.trace_id, part.loc, part.stack, part.grad_of) == \
        (node.id, node.trace_id, node.loc, node.stack, node.grad_of)
    assert part.prim is PRIMITIVES["negative"] and part.args == (x,) and part.params == {}
    assert part.shape == (1, 2) and part.dtype == node.dtype
    assert {k: getattr(part, k) for k in FACTS} == FACTS
    noted = node.derived(PRIMITIVES["negative"], [x], note="grouped", grad_of=None)
    assert noted.note == "grouped" and noted.grad_of is None


def test_original_follows_copy_of():
    x, node = _node()
    copy = node.replace(copy_of=node)
    assert original(copy.replace(copy_of=copy)) is node and original(x) is x


def test_new_node_allocates_ids_after_the_graph_s():
    x, node = _node(id=5)
    graph = Graph("f", ["x"], [x], [node], node)
    first = graph.new_node(PRIMITIVES["copy"], (node,), like=node, grad_of=node)
    second = graph.new_node(PRIMITIVES["copy"], (x,), like=x)
    assert (first.id, second.id) == (6, 7)
    assert first.trace_id == node.trace_id == 7 and first.loc == node.loc
    assert first.grad_of is node and first.name is None and first.args == (node,)
    assert second.shape == x.shape and second.dtype == x.dtype and second.params == {}


def test_erase_refuses_a_node_that_is_still_read():
    x, node = _node()
    out = Node(4, PRIMITIVES["negative"], (x,), {}, (2,), np.dtype("float64"))
    graph = Graph("f", ["x"], [x], [node, out], out)
    with pytest.raises(ValueError, match="still an output"):
        graph.erase([out])
    with pytest.raises(ValueError, match="still read by"):
        Graph("f", ["x"], [x], [node, out], node).erase([x])
    kept = graph.erase([node])
    assert kept.nodes == [out] and kept.inputs == [x] and graph.nodes == [node, out]
    assert graph.erase([]) is graph


def test_every_module_that_made_nodes_by_hand_is_gone():
    """Passes make nodes with Node.replace, Node.derived or Graph.new_node: one place sets
    the id and the trace (a hand-made node that forgot trace_id mixed nested traces)."""
    for module in _modules("passes"):
        assert "Node(" not in inspect.getsource(module), module.__name__


def test_a_graph_describes_itself_from_its_fields():
    """The docstring is made from the doc and the signature, fields a later stage sets
    (generalize: the batch leaves' size as n), not text it edits."""
    graph = Graph("f_value_and_grad", ["x"], [], [], None, doc="Value of f",
                  signature="x: float64[3]")
    assert graph.described() == "Value of f, traced at (x: float64[3])."
    general = dataclasses.replace(graph, signature="x: float64[n]")
    assert general.described() == "Value of f, traced at (x: float64[n])."
    assert dataclasses.replace(graph, signature="").described() == "Value of f."
    assert dataclasses.replace(graph, doc="").described() == ""
