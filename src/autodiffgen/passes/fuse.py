"""Long arithmetic trees on large arrays as one numexpr call (optional: `pip install
autodiffgen[fast]`).

NumPy evaluates `a * b + c * d - e` one operation at a time, each a full pass over
memory with a temporary in between; numexpr evaluates the whole expression block by
block, in cache, on its own threads. A tree of elementwise nodes whose inner values have
no other consumer becomes one node whose line reads

    g_x = numexpr.evaluate('g_q * (1.5 - 0.5 * o * o)', local_dict={'g_q': g_q, 'o': o})

Only + - * / (unary minus, square) on one floating dtype are fused: numexpr computes them
bit for bit as NumPy does (its transcendental functions differ in the last bits, and
without Intel's VML they are several times slower than NumPy's SIMD loops). Every operand
has the result's dtype, and a float32 tree takes its constants as float32 scalars, since
numexpr would compute `x * 0.5` in float64 where NumPy keeps float32.

Whether it pays off was measured (`python benchmarks/numexpr_threshold.py`, on the
project's 2-core AMD EPYC with NumPy 2.4's AVX-512 loops, against the generated NumPy
code with its buffer reuse). numexpr's interpreter is slower per element than those
loops (1.7x in float64 and 4x in float32 while the arrays fit in the 32 MB cache), so
fusion wins only where memory traffic dominates: float64 trees of MIN_OPS or more
operations on MIN_ELEMENTS or more elements, 0.8-0.9x the NumPy time on one thread from
16M elements, and earlier on several threads. float32 never won, nor did trees of four
or five operations end to end (their results are new arrays, where NumPy writes into a
dying buffer). numexpr's thread count is read when the code is generated, never set:
NUMEXPR_NUM_THREADS decides it. AUTODIFFGEN_NUMEXPR=0 turns fusion off.

The pass runs only when the caller allows it (passes.optimize(numexpr=True)): not for a
standalone module, which imports NumPy only, nor for code an enclosing transformation
traces, whose Boxes cannot go through numexpr.
"""

import ast
import functools
import importlib
import importlib.util
import math
import os

import numpy as np

from ..graph import Node, op, users_of
from ..rules import Primitive
from ..tree import leaves
from .rewrite import clone, guard_reads, substitute

ENABLED = os.environ.get("AUTODIFFGEN_NUMEXPR", "1") != "0"
MIN_OPS = 6
# elements from which a tree of MIN_OPS or more pays off: (numexpr on 1 thread, on more)
MIN_ELEMENTS = {np.dtype(np.float64): (16_000_000, 4_000_000)}

_BINARY = {"add": ast.Add, "subtract": ast.Sub, "multiply": ast.Mult, "divide": ast.Div}
_UNARY = {"negative", "square"}


@functools.cache
def _numexpr():
    """The numexpr module, or None when it is not installed (imported only when a tree
    is worth fusing: the import takes about 0.1 s)."""
    if importlib.util.find_spec("numexpr") is None:
        return None
    return importlib.import_module("numexpr")


def fuse(graph, min_elements=None):
    """Replace each large enough arithmetic tree by one numexpr node. `min_elements`
    overrides the measured size threshold (tests fuse small arrays with it)."""
    if not ENABLED:
        return graph, False
    if not any(_large(node, min_elements) for node in graph.nodes):
        return graph, False  # no array large enough: the usual case, seen in one sweep
    kept = {leaf for leaf in leaves(graph.outputs) if type(leaf) is Node}
    uses = {node: len(users) for node, users in users_of(graph.nodes).items()}
    absorbed = guard_reads(graph)  # what guards read stays as traced
    if graph.marks:  # and a `try:` or np.errstate line (numexpr knows no errstate)
        absorbed |= {n for n in graph.nodes if n.grad_of is None and n.stack in graph.marks}
    computed = set(graph.nodes) - absorbed
    replace = {}
    for root in reversed(graph.nodes):  # consumers first: a tree is found from its root
        # an output stays a NumPy result, which rules.buffers.owns knows for a new array
        if root in absorbed or root in kept or not _fusible(root, root) \
                or not _pays_off(root, min_elements):  # first: a small chain stays linear
            continue
        inner = _tree(root, computed, uses, kept)
        if len(inner) >= MIN_OPS:
            replace[root] = _fused(root, inner, graph)
            absorbed |= inner
    return substitute(graph, replace)


def _large(node, min_elements):
    """Whether a node is large enough for _pays_off to consider (numexpr not imported)."""
    if not node.shape:
        return False
    least = min_elements if min_elements is not None else \
        min(MIN_ELEMENTS.get(node.dtype, (None,)), default=None)
    return least is not None and math.prod(node.shape) >= least


def _pays_off(root, min_elements):
    size = int(math.prod(root.shape))
    if min_elements is not None:
        return size >= min_elements and _numexpr() is not None
    thresholds = MIN_ELEMENTS.get(root.dtype)
    if thresholds is None or size < min(thresholds) or _numexpr() is None:
        return False  # numexpr is imported only for an array that may be large enough
    single, several = thresholds
    return size >= (several if _threads() > 1 else single)


def _threads():
    numexpr = _numexpr()
    get = getattr(numexpr, "get_num_threads", None)
    return get() if get is not None else numexpr.nthreads


# ---- finding a tree ---------------------------------------------------------------------
def _fusible(node, root):
    """An operation numexpr computes exactly as NumPy, on operands of the root's dtype."""
    if op(node) not in _BINARY and op(node) not in _UNARY:
        return False
    if node.dtype != root.dtype or node.shape != root.shape or root.shape == () \
            or root.dtype not in (np.float32, np.float64):
        return False
    for arg in node.args:
        if type(arg) is Node:
            if arg.dtype != root.dtype or arg.shape not in (root.shape, ()):
                return False
        elif _constant(arg, root.dtype) is None:
            return False
    return True


def _constant(value, dtype):
    """A scalar constant as `dtype`, NumPy's cast of it in an operation with an array of
    that dtype; None for anything else (arrays, booleans, non-finite values)."""
    if type(value) is bool or isinstance(value, np.bool_) or np.ndim(value) != 0:
        return None
    if not isinstance(value, (int, float, np.integer, np.floating, np.ndarray)):
        return None
    if isinstance(value, np.ndarray) and value.dtype.kind not in "iuf":
        return None
    cast = dtype.type(value)
    return cast if np.isfinite(cast) else None


def _tree(root, computed, uses, kept):
    """The root and every node under it read only there (the nodes the fused one replaces)."""
    inner, stack = [], [root]
    while stack:
        node = stack.pop()
        inner.append(node)
        for arg in node.args:
            if type(arg) is Node and arg in computed and uses.get(arg) == 1 \
                    and arg not in kept and arg.shape == root.shape and _fusible(arg, root):
                stack.append(arg)
    return set(inner)


# ---- the fused node ---------------------------------------------------------------------
def _fused(root, inner, graph):
    """One node of FUSED: the expression over named leaves, and the leaves as arguments."""
    names, args = {}, []
    taken = set()

    def leaf(value):
        key = value if type(value) is Node else ("constant", value.tobytes())
        if key not in names:
            base = _leaf_name(value, graph) if type(value) is Node else "const"
            names[key] = _fresh(base, taken)
            args.append(value)
        return ast.Name(names[key], ast.Load())

    def build(node):
        if type(node) is not Node or node not in inner:
            if type(node) is Node:
                return leaf(node)
            value = _constant(node, root.dtype)
            if root.dtype == np.float64 and not isinstance(node, np.generic):
                return ast.Constant(float(value))  # a literal: numexpr's own float type
            # a float32 scalar (numexpr keeps float32), or a NumPy one, which may be a
            # batch size's 1/n (passes/scalars.py): generalize_batch reads arguments
            return leaf(value)
        parts = [build(a) for a in node.args]
        if op(node) == "negative":
            return ast.UnaryOp(ast.USub(), parts[0])
        if op(node) == "square":
            return ast.BinOp(parts[0], ast.Pow(), ast.Constant(2))
        return ast.BinOp(parts[0], _BINARY[op(node)](), parts[1])

    expr = ast.unparse(build(root))
    return clone(root, args, FUSED, {"expr": expr, "names": tuple(names.values())})


# numexpr reads these names as its functions and constants, whatever local_dict says
_RESERVED = {"None", "True", "False", "abs", "arccos", "arccosh", "arcsin", "arcsinh",
             "arctan", "arctan2", "arctanh", "ceil", "complex", "conj", "contains", "copy",
             "copysign", "cos", "cosh", "exp", "expm1", "floor", "fmod", "hypot", "imag",
             "isfinite", "isinf", "isnan", "log", "log10", "log1p", "log2", "max",
             "maximum", "min", "minimum", "nextafter", "ones_like", "prod", "real", "round",
             "sign", "signbit", "sin", "sinh", "sqrt", "sum", "tan", "tanh", "trunc",
             "where"}


def _leaf_name(node, graph):
    """The name the emitter will most likely give the value (its own, or g_ + what it is
    the cotangent of, or its primitive's): the expression reads like the code around it."""
    of = graph.derivative_of.get(node)
    if of is not None:
        return "g_" + (of.name or (of.prim.name if of.prim else "input"))
    return node.name or (node.prim.name if node.prim else "v")


def _fresh(base, taken):
    base = base if base.isidentifier() and "__" not in base else "v"
    name, n = base, 0
    while name in taken or name in _RESERVED:
        n += 1
        name = f"{base}_{n}"
    taken.add(name)
    return name


def _template(params):
    pairs = ", ".join(f"{name!r}: {{{i}}}" for i, name in enumerate(params["names"]))
    return f"numexpr.evaluate({{expr}}, local_dict={{{pairs}}})"


def _evaluate(*args, expr, names):
    return _numexpr().evaluate(expr, local_dict=dict(zip(names, args)))


# not registered with the rules: it only ever appears after the backward pass, in emission
FUSED = Primitive("fused", _evaluate, _template, imports=("numexpr",), builtin=True)
