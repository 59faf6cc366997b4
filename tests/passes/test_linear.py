"""The first call's work grows linearly with the graph, counted, not timed (a timed test
would flake on a loaded machine; benchmarks/first_call.py measures the time): how many
passes `optimize` runs, how many nodes they visit, how many add-tree nodes `accumulate`
walks, and how many statements the emitter hands to astor, on graphs of growing size."""

import ast
import importlib

import numpy as np
import pytest
from graph_helpers import cyclic_garbage, traced

import autodiffgen as ad
from autodiffgen import passes
from autodiffgen.codegen import expressions as emit_ast
from autodiffgen.codegen import lines as emit_lines
from autodiffgen.graph import Node

SIZES = (50, 200, 800)
accumulate_module = importlib.import_module("autodiffgen.passes.accumulate")


def fanout(n):
    """y = y + x * c, n times: x read by every step, its gradient a sum of n terms."""
    def f(x):
        y = x
        for _ in range(n):
            y = y + x * 0.5
        return np.sum(y)
    return f


def chain(n):
    def f(x):
        for i in range(n):
            x = np.tanh(x) * 0.5 if i % 2 else np.sin(x) + 0.25
        return np.sum(x)
    return f


def rnn(n):
    def f(W, xs):
        h = np.zeros((2, 3))
        for t in range(n):
            h = np.tanh(xs[t] + h @ W)
        return np.sum(h * h)
    return f


def gated(n):
    """A GRU-like step: block reads of one projection per step, whose gradients are joined
    in place (emit_slots.py), and 2-D products written by np.dot into their slots."""
    def f(Wx, Wh, xs):
        xw = xs @ Wx
        h = np.zeros((2, 2))
        for t in range(n):
            z = np.tanh(xw[t, :, :2] + h @ Wh)
            u = xs[t] @ Wx  # a product per step: np.dot into the slots of one stack
            h = z * np.tanh(xw[t, :, 2:] + u[:, 2:]) + (1.0 - z) * h
        return np.sum(h * h)
    return f


def _args(shape, n):
    if shape is rnn:
        return np.full((3, 3), 0.1), np.linspace(-1, 1, n * 6).reshape(n, 2, 3)
    if shape is gated:
        return (np.linspace(-0.5, 0.5, 12).reshape(3, 4), np.full((2, 2), 0.2),
                np.linspace(-1, 1, n * 6).reshape(n, 2, 3))
    return (np.linspace(0.1, 0.9, 8),)


def counted_optimize(graph):
    """(pass runs, nodes the passes were given in all) of optimize on the graph."""
    runs, visits = [], []

    def counting(run):
        def counted(g):
            runs.append(run.__name__)
            visits.append(len(g.nodes))
            return run(g)
        counted.__name__ = run.__name__
        return counted

    passes.optimize(graph, pipeline=tuple(counting(p) for p in passes.PIPELINE))
    return runs, sum(visits)


@pytest.mark.parametrize("shape", [fanout, chain, rnn])
def test_optimize_runs_as_many_passes_whatever_the_size(shape):
    """Each pass changes what it can in one sweep, so the number of pass runs does not
    grow with the graph (folding one constant per round ran all 20 rounds on a fan-out),
    and the nodes the passes visit grow in proportion to the graph."""
    counts = []
    for n in SIZES:
        graph = traced(shape(n), *_args(shape, n), argnums=0)
        runs, visits = counted_optimize(graph)
        counts.append((len(runs), visits / len(graph.nodes)))
    assert len({runs for runs, _ in counts}) == 1, counts
    assert counts[0][0] < passes.MAX_ROUNDS * len(passes.PIPELINE)
    per_node = [v for _, v in counts]
    assert max(per_node) <= 1.1 * min(per_node), counts


def test_one_fold_sweep_folds_a_whole_constant_subgraph():
    """A constant computed by a chain of n operations folds in one call of fold."""
    def f(x):
        c = np.ones(3)
        for _ in range(40):
            c = c * 0.5 + 1.0
        return np.sum(x * c)
    graph = traced(f, np.linspace(0.1, 0.9, 3))
    folded, changed = passes.fold(graph)
    assert changed
    folded, _ = passes.dce(folded)
    names = [n.prim.name for n in folded.nodes]
    assert names.count("multiply") + names.count("add") <= 3, names


def test_accumulate_walks_each_add_tree_once(monkeypatch):
    """The add tree of a fan-out's gradient is walked once per accumulate, not once per
    add node in it (which was quadratic in the fan-out)."""
    walked = []
    terms = accumulate_module._terms

    def counted(root, uses):
        found, inner = terms(root, uses)
        walked.append(len(found) + len(inner))
        return found, inner

    monkeypatch.setattr(accumulate_module, "_terms", counted)
    per_node = []
    for n in SIZES:
        graph = traced(fanout(n), *_args(fanout, n))
        graph, _ = passes.cse(passes.simplify(passes.fold(graph)[0])[0])
        walked.clear()
        passes.accumulate(graph)
        per_node.append(sum(walked) / len(graph.nodes))
    assert max(per_node) <= 1.1 * min(per_node) + 0.01, per_node


@pytest.mark.usefixtures("written_out")
def test_emission_renders_each_statement_layout_once(monkeypatch):
    """Statements that differ only in their names are rendered by astor once, and the
    text is reused with the names put in: astor's calls do not grow with the graph."""
    calls = []
    source = emit_ast._astor_source

    def counted(tree):
        calls.append(tree)
        return source(tree)

    monkeypatch.setattr(emit_ast, "_astor_source", counted)  # a new renderer: a cold cache
    counts = []
    for n in (100, 400):
        calls.clear()
        text = ad.emit(chain(n), np.linspace(0.1, 0.9, 8))
        counts.append(len(calls))
        assert text.count("np.tanh(") >= n // 2
    assert counts[1] <= counts[0] + 5, counts


def _statement(text):
    return ast.parse(text).body[0]


@pytest.mark.parametrize("text", [
    "a = np.add(b, c)",
    "x_1 = np.multiply(x_1, y, out=x_1)",
    "z = (a + b) * -c ** 2",
    "q = f(1, 1.0, True, None, 'a', b'b', -1.5, 1e300)",
    "w = a[1:b, ..., None, c]",
    "k = 'it says _adg_name_0_ here' + a",
    "d = {'a': a, 'b': [b, (c,)]}",
    "del a, b",
])
def test_render_by_layout_writes_what_astor_writes(text):
    """Reusing a layout's text with other names gives what rendering the tree gives; so
    do constants that are equal but differ in type (1, 1.0, True), and a string holding
    a stand-in name."""
    tree = _statement(text)
    expected = emit_ast._source(tree)
    assert emit_ast.render(tree) == expected
    renamed = _statement(text)
    for node in ast.walk(renamed):
        if type(node) is ast.Name:
            node.id += "_renamed"
    assert emit_ast.render(renamed) == emit_ast._source(renamed)
    for old, new in ((" 1,", " 2,"), ("1.0", "2.0"), ("True", "False")):
        other = _statement(text.replace(old, new))
        assert emit_ast.render(other) == emit_ast._source(other)


@pytest.mark.parametrize("text", [
    "x = a[123]",
    "y = (7).real + a[0]",
    "z = np.reshape(a, (8, 3))",
    "k = a ** 2 * b[3, 4] - 2 ** c",
    "j = -a[5]",
    "s = np.sum(a, axis=1, keepdims=True)",
    "t = f(0, 1, 2, 3, 0, 1)",
    "v = a[1:10:2, 0] + 1.5",
    "m = 'at 91827364500000009 91827364500000019' + a[0]",
])
def test_ints_are_slots_of_their_layout(text):
    """A non-negative int constant fills a slot as a name does (an index of `x[123]`, a
    shape): statements differing in them share a layout, and each renders as astor
    writes it, in any place an int stands (`(7).real`)."""
    for old, new in ((None, None), ("1", "12"), ("0", "40"), ("3", "0"), ("7", "8")):
        tree = _statement(text if old is None else text.replace(old, new))
        assert emit_ast.render(tree) == emit_ast._source(tree)


def _at_commas_by_scanning(line, width):
    """lines._at_commas, scanning every break for each line (quadratic)."""
    text = line.lstrip()
    indent = len(line) - len(text)
    breaks = [(at, opened) for kind, _, at, opened in emit_lines._tokens(text)
              if kind == "," and opened is not None]
    lines = []
    start, column = 0, indent
    while column + len(text) - start > width:
        fits = [b for b in breaks if b[0] > start and column + b[0] - start <= width]
        later = [b for b in breaks if b[0] > start]
        at, opened = (fits or later or [(None, None)])[-1 if fits else 0]
        if at is None:
            break
        lines.append((start, column))

        def column_of(opened):
            begin, col = next((s, c) for s, c in reversed(lines) if s <= opened)
            return col + opened - begin
        # not a break whose next line hangs past the middle while another fits
        at, opened = next((b for b in reversed(fits) if column_of(b[1]) <= width // 2),
                          (at, opened))
        column = column_of(opened)
        start = at + len(text[at:]) - len(text[at:].lstrip())
    lines.append((start, column))
    ends = [s for s, _ in lines[1:]] + [len(text)]
    return [" " * col + text[s:e].rstrip() for (s, col), e in zip(lines, ends)]


@pytest.mark.parametrize("line", [
    "    s = np.stack([" + ", ".join(f"row_{i}" for i in range(300)) + "])",
    "    y = np.einsum('ij,jk->ik', " + ", ".join(f"f(a_{i}, (b_{i}, c))" for i in range(40))
    + ", optimize=True)",
    "    g = h(" + ", ".join(f"[x_{i}, {{'k': (y_{i}, z)}}]" for i in range(60)) + ")",
])
def test_a_long_line_wraps_at_its_commas_as_before(line):
    """wrap on calls with many arguments (a stack of every row of a long loop), each break
    now found by bisection: the same lines as the scan gave."""
    for width in (40, 100):
        assert emit_lines._at_commas(line, width) == _at_commas_by_scanning(line, width)
    lines = emit_ast.wrap(line)
    assert len(lines) > 1
    assert "".join(line.split()) == "".join("".join(lines).split())


def _structure(graph):
    """The graph as data: each node's primitive, parameters and arguments (a node by its
    place in the order, an input by its path, a constant by its repr)."""
    place = {n: ("node", i) for i, n in enumerate(graph.nodes)}
    place.update((n, ("input", repr(n.params.get("path")))) for n in graph.inputs)

    def arg(a):
        return place.get(a, ("?", a.id)) if isinstance(a, Node) else repr(a)
    return [(n.prim.name, repr(sorted(n.params.items())), [arg(a) for a in n.args])
            for n in graph.nodes]


def _full_sweeps(graph):
    """optimize as before `examined`: every pass looks at every node each time."""
    clean, k = 0, 0
    while clean < len(passes.PIPELINE):
        graph, did = passes.PIPELINE[k % len(passes.PIPELINE)](graph)
        clean, k = 0 if did else clean + 1, k + 1
    return graph


def simplifiable(n):
    """Work for simplify and fold at every step: x * 1, --x, reshape of reshape, a
    broadcast a ufunc does itself, constants to fold."""
    def f(x):
        y = x
        for _ in range(n):
            c = np.ones(3) * 2.0 - 1.0
            z = np.reshape(np.reshape(np.negative(-y), (3, 1)), (3,))
            y = np.sin(z * c) + np.broadcast_to(np.sum(y), (3,)) * 0.1
        return np.sum(y)
    return f


def factored(n):
    """Work for scalars and cse at every step: signs to fold into a factor, a common factor,
    the same product computed twice."""
    def f(x):
        y = x
        for _ in range(n):
            y = np.sin(-(y * 0.5)) + (-np.cos(y)) + y * 0.3 + np.cos(y) * 0.3
        return np.sum(np.tanh(y) * np.tanh(y))
    return f


@pytest.mark.parametrize("shape", [fanout, chain, rnn, simplifiable, factored])
def test_examined_nodes_skipped_give_the_same_graph(shape):
    """fold, simplify and scalars skip the nodes they left before (whose arguments did not
    change since), cse reuses the keys it computed: the optimized graph is the one full
    sweeps give."""
    args = _args(shape, 20) if shape not in (simplifiable, factored) \
        else (np.linspace(0.1, 0.9, 3),)
    graph = traced(shape(20), *args, argnums=0)
    assert _structure(passes.optimize(graph)) == _structure(_full_sweeps(graph))


@pytest.mark.parametrize("local", [passes.fold, passes.simplify, passes.scalars])
def test_a_sweep_over_an_unchanged_graph_looks_at_no_node(local):
    """After a sweep, every node left is examined: the next sweep over the same graph
    decides each by `unchanged` alone."""
    graph = traced((factored if local is passes.scalars else simplifiable)(10),
                   np.linspace(0.1, 0.9, 3))
    examined = set()
    graph, changed = local(graph, examined)
    assert changed
    graph, changed = local(graph, examined)  # the copies the first sweep made: new
    while changed:
        graph, changed = local(graph, examined)
    assert set(graph.nodes) <= examined


def test_cse_computes_no_key_again_for_a_node_it_keyed(monkeypatch):
    """With optimize's `keys`, a sweep over the graph cse returned computes the key of no
    node it keyed before: only the nodes its replacements copied are new."""
    cse_module = importlib.import_module("autodiffgen.passes.cse")
    computed = []
    key = cse_module._key
    monkeypatch.setattr(cse_module, "_key", lambda *a: computed.append(a[0]) or key(*a))
    graph = traced(factored(10), np.linspace(0.1, 0.9, 3))
    keys = {}
    optimized, changed = passes.cse(graph, keys)
    assert changed
    assert len(computed) == len([n for n in graph.nodes if not n.prim.effect])
    computed.clear()
    keyed = set(keys)
    again, changed = passes.cse(optimized, keys)
    assert not changed and again is optimized
    assert computed == [n for n in optimized.nodes if n not in keyed]  # the copies alone
    computed.clear()
    assert passes.cse(again, keys) == (again, False)
    assert not computed  # a sweep over a graph it left: every key known


def test_fuse_looks_no_further_without_a_large_array(monkeypatch):
    """The users map and the guards' reads are made only when some array is large enough
    for numexpr: a graph of small arrays costs one sweep."""
    fuse_module = importlib.import_module("autodiffgen.passes.fuse")
    made = []
    users_of = fuse_module.users_of
    monkeypatch.setattr(fuse_module, "users_of", lambda nodes: made.append(1) or users_of(nodes))
    graph = traced(chain(50), np.linspace(0.1, 0.9, 8))
    assert passes.fuse(graph) == (graph, False)
    assert not made
    passes.fuse(graph, min_elements=1)  # every array large enough: the usual walk
    assert made


@pytest.mark.parametrize("shape", [fanout, chain, rnn, factored, gated])
def test_statement_texts_by_layout_are_the_rendered_ones(shape, monkeypatch):
    """emit_text reuses a statement's text for statements of its layout: the module is the
    one every statement's tree rendered alone gives, and the trees built and rendered do
    not grow with the graph."""
    emit_text = importlib.import_module("autodiffgen.codegen.text")
    learned = []
    learn = emit_text.Texts._learn
    monkeypatch.setattr(emit_text.Texts, "_learn",
                        lambda self, *a: learned.append(1) or learn(self, *a))
    counts = []
    for n in (40, 160):
        args = _args(shape, n) if shape is not factored else (np.linspace(0.1, 0.9, 3),)
        learned.clear()
        reused = ad.emit(shape(n), *args)
        counts.append(len(learned))
        with monkeypatch.context() as m:
            m.setattr(emit_text.Texts, "text", lambda self, *a: None)
            assert reused == ad.emit(shape(n), *args)
    assert counts[1] <= counts[0] + 2, counts


def test_int_paths_are_written_as_rendered():
    """An input at params[k][j] (a deep net's weights) is unpacked by text written out,
    which is the text its tree renders to."""
    emit = importlib.import_module("autodiffgen.codegen.emitter")
    emitter = emit.Emitter(traced(lambda p, x: np.sum(x), [np.ones(2)], np.ones(2)))
    for path in [(0, 3), (0, 12, 0), (1, 0, 1, 2), (0, "W"), (0, -1), (0, True)]:
        assert emitter.path_text(path) == emit_ast.render(emitter.path_ast(path))
    assert emitter.paths_checked == {2: True, 3: True, 4: True}



@pytest.mark.parametrize("shape", [fanout, chain, rnn, gated])
def test_a_first_call_leaves_no_node_to_the_collector(shape):
    """Nothing of the graph is in a reference cycle (a trace's capture, the emitter's texts,
    a pass's recursive helper): the nodes are freed as the compile ends, not by a
    collection walking every one of them (a tenth of a long chain's first call); what
    the collector finds does not grow with the graph."""
    counts, nodes = [], []
    for n in (40, 160):
        found = cyclic_garbage(shape(n), _args(shape, n))
        assert not found["Graph"] and not found["Trace"], found
        nodes.append(found["Node"] + found["Box"])  # inputs a capture read: a few
        counts.append(sum(found.values()))
    assert nodes[1] == nodes[0] <= 8 and counts[1] <= counts[0] + 20, (nodes, counts)


def test_freeing_first_looks_back_only_where_a_move_can_free_more(monkeypatch):
    """schedule.freeing_first builds its window of earlier statements (and the views in it)
    only for a statement whose dying buffers are larger than its result: in a chain of
    equal-sized values, the products of two dying values (199 of 1,100 statements here;
    598 when every statement that frees a buffer had its window built)."""
    schedule = importlib.import_module("autodiffgen.plan.schedule")
    windows, statements = [], []
    views, target = schedule._views, schedule._target
    monkeypatch.setattr(schedule, "_views", lambda *a: windows.append(1) or views(*a))
    monkeypatch.setattr(schedule, "_target", lambda *a: statements.append(1) or target(*a))
    ad.emit(chain(200), np.linspace(0.1, 0.9, 8))
    assert 0 < len(windows) < len(statements) / 4, (len(windows), len(statements))


def test_scalars_tries_its_rewrites_only_on_the_nodes_they_match(monkeypatch):
    """passes.scalars tries no rewrite on a node that is not a negation, product, sum or
    difference and reads no array constant or broadcast (sin, tanh... most of a graph)."""
    scalars = importlib.import_module("autodiffgen.passes.scalars")
    tried = []
    factor = scalars._factor
    monkeypatch.setattr(scalars, "_factor", lambda node, args: tried.append(node) or
                        factor(node, args))
    graph = traced(chain(100), np.linspace(0.1, 0.9, 8))
    passes.scalars(graph)
    assert tried and all(n.prim.op in ("negative", "multiply", "add", "subtract")
                         for n in tried)


class _CountedArgs(tuple):
    """A join's arguments that count how often they are walked."""

    walks = 0

    def __iter__(self):
        _CountedArgs.walks += 1
        return super().__iter__()


@pytest.mark.parametrize("n", [50, 200])
def test_stepwise_walks_each_join_s_arguments_a_bounded_number_of_times(n, monkeypatch):
    """passes.stepwise finds each part's position in its stack once per join, not by
    walking the stack's arguments again for every part (quadratic in the steps: 41 of the
    100,000-op rnn's 58 s first call)."""
    graph = traced(rnn(n), *_args(rnn, n), argnums=0)
    graph = passes.optimize(graph, pipeline=tuple(p for p in passes.PIPELINE
                                                  if p is not passes.stepwise))
    joins = [node for node in graph.nodes if node.prim is not None
             and node.prim.name == "stack" and len(node.args) >= n - 1]
    assert joins
    for join in joins:
        join.args = _CountedArgs(join.args)
    monkeypatch.setattr(_CountedArgs, "walks", 0)
    passes.stepwise(graph)
    assert _CountedArgs.walks <= 8 * len(joins), (_CountedArgs.walks, len(joins))
