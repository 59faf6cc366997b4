"""How one node's cotangent reaches its parents: the kinds of rule the backward loop
(reverse.py) calls, one per node, so that the loop itself knows none of them.

A node rule is `rule(step) -> [(parent, contribution)]`, for a `Step`: the node, its
cotangent g, the values its rule reads and which parents need a cotangent. Most nodes
take their primitive's kind (`rule_of`), from reverse mode's tables (rules/vjps.py):
- per_argument: the primitive's rule for each argument needing one, unbroadcast;
- by_pieces (PIECES: stack, concatenate): one call gives every argument its piece;
- by_blocks (BLOCKS: getitem): argument 0 gets a Block, a scatter_add that
  cotangent_sums.py adds without making it array-sized.
Some nodes take a rule that a look at the graph around them found (`graph_rules`):
- a softmax, log-softmax, a cross-entropy's pick or a sigmoid differentiated whole
  (whole_rules.py): the root's rule gives z its cotangent at once (a max shifted out of
  z gets nothing), and its intermediates' rules never run;
- a write whose zeros in its old array's cotangent no one reads (writes.py): the old
  array gets the cotangent unzeroed.
"""

from ..graph import Node
from ..rules import unbroadcast
from ..rules.vjps import BLOCKS, PIECES, SOLE_VJPS, missing_rule, vjp_rule
from ..trace.boxes import Box, result_dtype
from .cotangent_sums import Block
from .whole_rules import whole_rules
from .writes import unzeroed_writes


class Step:
    """What a node's rule sees: the node, its cotangent `g`, its arguments' and output's
    values (`args`, `ans`, read by `look`: a checkpoint's replay, checkpointing.py), and
    the nodes that need a cotangent."""

    __slots__ = ("ans", "args", "g", "look", "needs", "node", "trace")

    def __init__(self, trace, node, g, look, needs):
        self.trace, self.node, self.g, self.look, self.needs = trace, node, g, look, needs
        self.args = [look(a) if type(a) is Node else a for a in node.args]
        self.ans = look(node)

    def wanted(self):
        """(i, parent) for each argument that is a node needing a cotangent."""
        return [(i, a) for i, a in enumerate(self.node.args) if type(a) is Node and a in self.needs]

    def sole(self, i):
        """No derivative flows through the node's arguments other than the i-th."""
        return not any(type(a) is Node and a in self.needs
                       for j, a in enumerate(self.node.args) if j != i)


def per_argument(step, argnums=None):
    """The primitive's rule for each argument that needs a cotangent (`argnums`: only
    these); a missing rule is a zero, or an error for a strict primitive."""
    for i, parent in step.wanted():
        if argnums is None or i in argnums:
            yield from _by_rule(step, i, parent)


def _by_rule(step, i, parent):
    node = step.node
    rule = vjp_rule(node.prim, i, sole=node.prim in SOLE_VJPS and step.sole(i))
    if rule is None and node.prim.strict:
        raise missing_rule(node.prim, "VJP", i, node.loc)
    first = step.trace.next_id
    contribution = None if rule is None else rule(step.g, step.ans, *step.args, **node.params)
    if contribution is not None:
        _name_local_derivative(node, step.g, contribution, first)
        yield parent, unbroadcast(contribution, parent.shape, parent.dtype)


def _name_local_derivative(node, g, contribution, first):
    """`dtanh = 1 - h * h`: where the rule of a one-argument primitive is g times a value
    it computed (from node ids `first` on), that value is the primitive's derivative, and
    is named so (`d` + the primitive's name), as one would by hand."""
    if type(g) is not Box or type(contribution) is not Box or \
            sum(type(a) is Node for a in node.args) != 1 or not node.prim.name.isidentifier():
        return
    made = contribution.node
    if made.prim is None or made.prim.name != "multiply" or \
            not any(a is g.node for a in made.args):
        return
    local = [a for a in made.args if a is not g.node]
    if len(local) == 1 and type(local[0]) is Node and local[0].id >= first \
            and local[0].name is None:
        local[0].name = "d" + node.prim.name


def by_pieces(step):
    """Every argument's piece of the cotangent from one call (PIECES), not a rule of all
    the arguments called once per argument."""
    piece = PIECES[step.node.prim](step.g, step.args, step.node.params)
    for i, parent in step.wanted():
        yield parent, unbroadcast(piece(i), parent.shape, parent.dtype)


def by_blocks(step):
    """A read of a block of argument 0 gives it a Block (BLOCKS), summed with the other
    reads' in one buffer; the other arguments, and a cotangent of another dtype or not
    yet traced (the tape outside eager mode), take the per-argument rules."""
    node, g = step.node, step.g
    for i, parent in step.wanted():
        if i == 0 and result_dtype(g) == parent.dtype and (type(g) is Box or step.trace.eager):
            yield parent, Block(g, step.args[1:], BLOCKS[node.prim](*step.args, **node.params))
        else:
            yield from _by_rule(step, i, parent)


def rule_of(prim):
    """The node rule of a primitive's nodes: its kind in reverse mode's tables."""
    if prim in PIECES:
        return by_pieces
    if prim in BLOCKS:
        return by_blocks
    return per_argument


def graph_rules(order, seeded, needs=None):
    """{node: its rule} for the nodes whose rule depends on the graph around them (see
    the module docstring): `order` is the backward's node order, `seeded` the nodes that
    receive a cotangent from outside (the outputs), `needs` those that need a cotangent
    (None: not known, no write is given its cotangent unzeroed)."""
    found = {root: _whole(rule) for root, rule in whole_rules(order, seeded).items()}
    if needs is not None:
        found.update((node, _unzeroed) for node in unzeroed_writes(order, needs, found)
                     if node not in found)
    return found


def _unzeroed(step):
    """A write's rule with its old array given the cotangent as it is (writes.py: no one
    reads the zeros its written elements would get)."""
    for i, parent in step.wanted():
        if i == 0:
            yield parent, step.g
        else:
            yield from _by_rule(step, i, parent)


def _whole(rule):
    """A rule of whole_rules.py, `rule(g, look) -> (z, dz)`, as a node rule."""
    def whole(step):
        parent, contribution = rule(step.g, step.look)
        if parent in step.needs:
            yield parent, contribution
    return whole
