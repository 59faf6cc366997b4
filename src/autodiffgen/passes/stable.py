"""Numerically stable forms: softplus, log-sigmoid and log(1 - sigmoid) through logaddexp.

`np.log(1 + np.exp(z))` is inf at z = 800, where its value is 800, and the log of a
sigmoid `s = 1 / (1 + np.exp(-z))` is -inf at z = -800. Each is rewritten to the same
function in a form that is finite wherever the function is:

    log(1 + exp(z)), log1p(exp(z))   ->   logaddexp(0, z)           softplus
    log(1 / (1 + exp(-z)))           ->  -logaddexp(0, -z)          log-sigmoid
    log(1 - 1 / (1 + exp(-z)))       ->  -logaddexp(0, z)           log(1 - sigmoid)

so the sigmoid cross-entropy -(y log s + (1 - y) log(1 - s)) becomes
y logaddexp(0, -z) + (1 - y) logaddexp(0, z), finite for every z. These are identities:
the values agree wherever the old form is finite (to rounding).

Why the backward is rewritten too. Passes see the fused forward+backward graph, and its
backward was derived from the old form: for softplus it is (g / (1 + exp(z))) * exp(z),
which reads the overflowing values (inf / inf = nan at z = 800). Rewriting the forward
alone would leave that, so a match is a *region*: its roots (the logs), the interior
nodes between them and the leaf z, and the backward nodes the interior's and the roots'
rules recorded (`grad_of` in the region). When nothing else reads an interior value,
those backward nodes compute exactly p + sum_i g_i dF_i/dz, where g_i is the cotangent
that reached root i and p what had reached z before them (if anything), and that sum is
the one value of theirs read elsewhere: the region's exit. The rewrite replaces each
root by its stable form and the exit by p + sum_i g_i F_i'(z) in stable form (the
sigmoid as exp(z - logaddexp(0, z)), at most 1), after which the old nodes are dead.
A region of any other shape (an interior value used elsewhere or returned, two exits, a
backward input that is neither a g_i nor p) is left as it is: the old form is right
wherever it is finite.

Inside a checkpointed function (checkpointing.py) the backward reads recomputed copies of the
region's values and of z: they stand for the forward values, and the new exit reads
those (z and the logaddexp stay alive until the backward: stability first).

The pass comes first in the pipeline, so it sees the backward nodes as the rules
recorded them; forward-mode graphs (`kind == "jvp"`) are left alone.
"""

import numpy as np

from ..graph import Node, op, original, users_of
from ..graph.forms import computed_op as _computed
from ..graph.forms import is_one as _one
from ..graph.forms import plus_one as _plus_one
from ..graph.forms import sigmoid_of as _sigmoid
from ..rules import PRIMITIVES
from ..tree import leaves
from .rewrite import clone, guard_reads, substitute


def stable(graph):
    if graph.kind != "grad":
        return graph, False
    computed = set(graph.nodes) - guard_reads(graph)  # what guards read stays as traced
    matches = [m for m in (_match(n, computed) for n in graph.nodes) if m is not None]
    if not matches:
        return graph, False
    consumers = users_of(graph.nodes)
    recorded = {}  # forward node -> (place, node) its rule made
    for i, node in enumerate(graph.nodes):
        if node.grad_of is not None:
            recorded.setdefault(node.grad_of, []).append((i, node))
    kept = {leaf for leaf in leaves(graph.outputs) if type(leaf) is Node}
    replace = {}
    for region in _regions(matches):
        replace.update(_rewrite(region, recorded, consumers, kept))
    return substitute(graph, replace)


# ---- matching the old forms -------------------------------------------------------------
class _Match:
    __slots__ = ("form", "interior", "root", "z")

    def __init__(self, root, z, interior, form):
        self.root, self.z, self.interior, self.form = root, z, frozenset(interior), form


def _match(node, computed):
    """The stable form for a log node over one of the patterns, or None."""
    if op(node) == "log1p":
        e = _computed(node.args[0], computed, "exp")
        return _Match(node, e.args[0], {e}, _softplus) if e else None
    if op(node) != "log":
        return None
    x = node.args[0]
    sig = _sigmoid(x, computed)
    if sig:
        return _Match(node, sig[0], sig[1], _log_sigmoid)
    if _computed(x, computed, "subtract") and _one(x.args[0]):
        sig = _sigmoid(x.args[1], computed)
        if sig:
            return _Match(node, sig[0], sig[1] | {x}, _log_one_minus_sigmoid)
    e = _computed(x, computed, "add") and _plus_one(x, computed)
    return _Match(node, e.args[0], {x, e}, _softplus) if e else None


def _regions(matches):
    """Matches sharing interior nodes (log s and log(1 - s) of one sigmoid) go together,
    in the order of their first match."""
    owner = {}  # interior node -> the index of the region that holds it
    regions = []
    for m in matches:
        found = sorted({owner[v] for v in m.interior if v in owner})
        if not found:
            regions.append([m])
            found = [len(regions) - 1]
        else:
            regions[found[0]].append(m)
        for i in found[1:]:  # m joins regions that were apart until now
            regions[found[0]] += regions[i]
            regions[i] = []
            owner.update({v: found[0] for other in regions[found[0]] for v in other.interior})
        owner.update({v: found[0] for v in m.interior})
    return [r for r in regions if r]


# ---- the rewrite ------------------------------------------------------------------------
def _rewrite(matches, recorded, consumers, kept):
    """{old node: new node} for one region, or {} when it does not have the shape the
    module docstring describes."""
    z = matches[0].z
    roots = {m.root for m in matches}
    interior = set().union(*(m.interior for m in matches)) - roots
    region = interior | roots
    if type(z) is not Node or any(m.z is not z for m in matches) or z in region \
            or not np.issubdtype(z.dtype, np.floating) or interior & kept \
            or any(n.shape != z.shape or n.dtype != z.dtype for n in region):
        return {}
    backward = [n for _, n in sorted(p for v in region for p in recorded.get(v, ()))]
    inside = region | set(backward)
    if any(c not in inside for v in interior for c in consumers.get(v, ())):
        return {}
    forms = {m.root: m.form(m.root, z) for m in matches}
    replace = {root: new for root, (new, _) in forms.items()}
    if not backward:  # z has no gradient: the forward is all there is
        return replace
    exit_value = _exit(matches, backward, region, z, consumers, kept, forms)
    if exit_value is None:
        return {}
    replace.update(exit_value)
    return replace


def _exit(matches, backward, region, z, consumers, kept, forms):
    """{exit: p + sum_i g_i F_i'(z)}, or None if the backward is not as expected."""
    own = set(backward)
    exits = [n for n in backward
             if n in kept or any(c not in own for c in consumers.get(n, ()))]
    if len(exits) != 1 or exits[0].shape != z.shape or exits[0].dtype != z.dtype:
        return None
    out = exits[0]
    outside = {a for n in backward for a in n.args if _outside(a, own, region, z)}
    prior = None  # what had reached z before: the exit is cots[z] + contribution
    others = [a for a in out.args if not (type(a) is Node and a in own)]
    if op(out) == "add" and others:
        if len(others) != 1 or type(others[0]) is not Node:
            return None
        prior = others[0]
    terms, known = [], {prior}
    for m in matches:
        g = _cotangent(m.root, backward, own, region, z)
        if g is False:
            return None
        if g is not None:
            known.add(g)
            core, derivative = forms[m.root][1]
            terms.append(derivative(_maker(out, core), g))
    if not terms or not outside <= known:
        return None
    total = terms[0]
    for term in terms[1:]:
        total = _maker(out, total.grad_of)("add", total, term)
    if prior is not None:
        total = _maker(out, total.grad_of)("add", prior, total)
    return {out: out.replace(prim=total.prim, args=total.args, params={},
                             grad_of=total.grad_of)}


def _cotangent(root, backward, own, region, z):
    """The cotangent that reached `root`: the one input of its rule's nodes from outside
    the region. None if its rule never ran, False if that input is not clear."""
    rule_nodes = [n for n in backward if n.grad_of is root]
    if not rule_nodes:
        return None
    found = {a for n in rule_nodes for a in n.args if _outside(a, own, region, z)}
    if len(found) != 1:
        return False
    g = found.pop()
    return g if g.shape == root.shape and g.dtype == root.dtype else False


def _outside(a, own, region, z):
    """A value a region's backward reads from outside it. A checkpoint's copy of a region
    value (or of z) is that value: the new exit reads the forward one instead."""
    if type(a) is not Node or a in own:
        return False
    a = original(a)
    return a not in region and a is not z


def _maker(like, grad_of):
    """make(name, *args): a new node shaped like `like`, recorded as part of the rule of
    `grad_of` (None for forward values), at its source line."""
    def make(name, *args):
        return like.derived(PRIMITIVES[name], args, grad_of=grad_of)
    return make


# ---- the stable forms: (new root, (its logaddexp node, the derivative term)) --------------
def _softplus(root, z):
    """log(1 + exp(z)) = logaddexp(0, z); d/dz = sigmoid(z) = exp(z - logaddexp(0, z))."""
    new = clone(root, (0.0, z), PRIMITIVES["logaddexp"], {})
    return new, (new, lambda make, g: make("multiply", g, make("exp", make("subtract", z, new))))


def _log_sigmoid(root, z):
    """log sigmoid(z) = -logaddexp(0, -z); d/dz = sigmoid(-z) = exp(-z - logaddexp(0, -z))."""
    forward = _maker(root, None)
    minus = forward("negative", z)
    core = forward("logaddexp", 0.0, minus)
    new = clone(root, (core,), PRIMITIVES["negative"], {})
    return new, (core, lambda make, g: make("multiply", g, make("exp", make("subtract", minus,
                                                                            core))))


def _log_one_minus_sigmoid(root, z):
    """log(1 - sigmoid(z)) = -logaddexp(0, z); d/dz = -sigmoid(z)."""
    core = _maker(root, None)("logaddexp", 0.0, z)
    new = clone(root, (core,), PRIMITIVES["negative"], {})
    return new, (core, lambda make, g: make("negative", make("multiply", g, make(
        "exp", make("subtract", z, core)))))
