"""The backward pass reads as Autograd's (issue 26, item 4): toposort, pop a node's
cotangent, call its rule, add into the parents; each special case is a kind of rule
(backward/node_rules.py), not a branch of the loop."""

import ast
import inspect
import textwrap

import numpy as np

import autodiffgen as ad
from autodiffgen import tape
from autodiffgen.backward import node_rules, reverse
from autodiffgen.graph import toposort
from autodiffgen.rules import PRIMITIVES
from autodiffgen.trace import tracer


def test_the_loop_knows_no_kind_of_rule():
    source = textwrap.dedent(inspect.getsource(reverse.cotangents_of_outputs))
    assert len(source.splitlines()) <= 30
    names = {getattr(n, "id", None) or getattr(n, "attr", None)
             for n in ast.walk(ast.parse(source))}
    assert not names & {"PIECES", "BLOCKS", "SOLE_VJPS", "pieces", "block", "whole", "shifted",
                        "add_block", "unbroadcast", "strict", "vjp"}, names


def test_each_primitive_kind_has_its_rule():
    assert node_rules.rule_of(PRIMITIVES["stack"]) is node_rules.by_pieces
    assert node_rules.rule_of(PRIMITIVES["concatenate"]) is node_rules.by_pieces
    assert node_rules.rule_of(PRIMITIVES["getitem"]) is node_rules.by_blocks
    assert node_rules.rule_of(PRIMITIVES["sin"]) is node_rules.per_argument


def _order(f, x):
    _, _, out = tracer.trace(f, [x], (0,), ["x"], eager=True)
    return toposort([out.node])


def _log_softmax(z):
    s = z - np.max(z, axis=-1, keepdims=True)
    return np.sum(s - np.log(np.sum(np.exp(s), axis=-1, keepdims=True)))


def test_graph_rules_are_found_around_the_node():
    """A log-softmax's root takes a whole rule, which gives z, not the shifted z - max,
    its cotangent: the max subtracted before it gets none."""
    order = _order(_log_softmax, np.arange(6.0).reshape(2, 3))
    found = node_rules.graph_rules(order, {order[0]})
    assert [node.prim.name for node in found] == ["subtract"]
    root = next(iter(found))
    assert root.args[0].prim.name == "subtract" and root.args[0].args[1].prim.name == "max"


def test_every_kind_agrees_with_the_tape():
    x = np.random.default_rng(0).normal(size=(3, 4))

    def f(x):
        parts = [x[i] * (i + 1.0) for i in range(3)]  # blocks
        joined = np.concatenate(parts) + np.stack(parts).sum()  # pieces
        return _log_softmax(np.maximum(joined, 0.1)[None]) + np.sum(np.sin(x))

    np.testing.assert_allclose(ad.grad(f)(x), tape.grad(f)(x), rtol=1e-10)
