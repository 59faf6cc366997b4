"""The tree shows the pipeline (issue 11): which modules may import which, checked on the
source, so that a later change cannot quietly route a stage back through another."""

import ast
import pathlib

import pytest

import autodiffgen

PACKAGE = pathlib.Path(autodiffgen.__file__).parent


def _module_name(path):
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _from_imports(path, nodes):
    """(module, the names it imports) of each `from ... import` of the package among
    `nodes` of the module at `path`, relative imports resolved."""
    name = _module_name(path)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in nodes:
        if isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            if not node.level and not (node.module or "").startswith("autodiffgen"):
                continue
            module = module.removeprefix("autodiffgen.").removeprefix("autodiffgen")
            yield module, [a.name for a in node.names]


def _imports():
    """{module: the package's modules it imports} (relative and absolute imports)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        targets = set()
        for module, names in _from_imports(path, ast.walk(ast.parse(path.read_text()))):
            targets.add(module)
            targets.update(f"{module}.{a}".strip(".") for a in names)
        found[_module_name(path)] = {t for t in targets if t}
    modules = set(found)
    return {m: {t for t in ts if t in modules} for m, ts in found.items()}


def _reach(graph, start):
    seen, stack = set(), [start]
    while stack:
        for nxt in graph.get(stack.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen


# The stages, upstream first: a stage imports only from stages before it (and from the
# shared leaves: errors, tree, _typing, _version, generated_helpers).
STAGES = ("graph", "trace", "rules", "backward", "passes", "loops", "generalize", "plan", "codegen",
          "cache", "pipeline")
LEAVES = {"errors", "tree", "_typing", "_version", "generated_helpers"}
COMPILER = {"api", "pipeline", "codegen", "transforms", "generalize", "passes", "plan",
            "cache.entries"}


def _stage(module):
    return module.split(".")[0]


def _stage_graph(graph):
    """{top-level module or package: those it imports}, edges inside one left out."""
    out = {}
    for module, targets in graph.items():
        out.setdefault(_stage(module), set()).update(
            _stage(t) for t in targets if _stage(t) != _stage(module))
    return out


def _cycle(graph):
    """A list of nodes that import each other in a ring, or None."""
    state = {}

    def visit(node, path):
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt, path + [nxt])
                if found:
                    return found
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node, [node])
            if found:
                return found
    return None


def _module_level_imports():
    """{module: the package's modules it imports when it is imported}: imports inside a
    function run later and are left out, and `from . import name` is an edge to the
    submodule `name` where there is one, else to the package (whose __init__ runs)."""
    modules = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    found = {}
    for name, path in modules.items():
        nodes = list(_top_level(ast.parse(path.read_text()).body))
        targets = set()
        for module, names in _from_imports(path, nodes):
            for alias in names:
                sub = f"{module}.{alias}".strip(".")
                targets.add(sub if sub in modules else module)
        for node in nodes:
            if isinstance(node, ast.Import):
                targets.update(a.name.removeprefix("autodiffgen.") for a in node.names
                               if a.name.startswith("autodiffgen."))
        found[name] = {t for t in targets if t in modules and t != name}
    return found


def _top_level(body):
    """The statements run when a module is imported: its body, and the bodies of the
    if, try and with blocks in it, not those of its functions and classes."""
    for node in body:
        yield node
        if isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
            for block in ("body", "orelse", "finalbody"):
                yield from _top_level(getattr(node, block, []))
            for handler in getattr(node, "handlers", []):
                yield from _top_level(handler.body)


def test_no_module_level_import_cycle_anywhere():
    """A family module imports the registry's core (rules.registry), never the package
    whose __init__ imports the families (issue 26); the same holds for every module of
    the package: no ring of imports run at import time."""
    graph = _module_level_imports()
    assert {"rules.registry", "rules.numpy_api.dispatch"} <= set(graph)
    assert _cycle(graph) is None, _cycle(graph)


def test_module_level_imports_see_a_package_cycle():
    """The check above would find the cycle it was written for: rules/__init__ imports
    rules.shapes, which would import a name from the package."""
    graph = _module_level_imports()
    assert "rules.shapes" in graph["rules"]
    assert _cycle({**graph, "rules.shapes": graph["rules.shapes"] | {"rules"}}) is not None


def test_the_modules_these_tests_name_exist():
    """A module renamed or moved must be renamed here too, or the checks check nothing."""
    modules = set(_imports())
    named = COMPILER | set(STAGES) | LEAVES | {"tape", "standalone", "api"}
    assert named <= modules, sorted(named - modules)


def test_no_cycle_between_stages():
    assert _cycle(_stage_graph(_imports())) is None, _cycle(_stage_graph(_imports()))


def test_a_stage_reaches_only_stages_upstream_of_it():
    """Reachability, not only direct imports: a stage that imports a helper that imports a
    later stage is caught too."""
    graph = _stage_graph(_imports())
    for i, stage in enumerate(STAGES):
        later = set(STAGES[i + 1:])
        reached = _reach(graph, stage) & (later | {"api", "transforms", "train_step"})
        assert not reached, (stage, sorted(reached))


# every stage package: no two of its modules import each other in a ring, lazily or not
ACYCLIC = ("graph", "trace", "rules", "backward", "passes", "generalize", "plan", "codegen",
           "cache")


def _inside(graph, package):
    """The imports between the modules of `package`, lazy ones included; a module's import
    of the package that holds it (what `from . import x` reads first) is not one."""
    return {m: {t for t in targets if t.startswith(package + ".")
                and not (m + ".").startswith(t + ".")}
            for m, targets in graph.items() if m.startswith(package + ".")}


@pytest.mark.parametrize("package", ACYCLIC)
def test_no_cycle_between_the_modules_of_a_stage(package):
    assert _cycle(_inside(_imports(), package)) is None, _cycle(_inside(_imports(), package))


def test_modules_and_classes_are_short():
    """No module over 500 lines, no class over 300 (issue 26): a newcomer reads a stage's
    module whole."""
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        where = path.relative_to(PACKAGE)
        assert len(text.splitlines()) <= 500, where
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                size = node.end_lineno - node.lineno + 1
                assert size <= 300, (where, node.name, size)


def test_the_cycle_check_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
    assert _cycle(_inside({"p": {"p.a"}, "p.a": {"p", "p.b"}, "p.b": {"p.a"}}, "p")) == \
        ["p.a", "p.b", "p.a"]


def test_the_reference_tape_needs_only_the_tracer_and_the_rules():
    reached = _reach(_imports(), "tape")
    assert not reached & COMPILER, sorted(reached & COMPILER)
    assert {"trace.tracer", "rules", "backward.reverse", "backward.forward"} <= reached


def test_the_emitter_only_emits_and_only_the_front_ends_run_the_pipeline():
    graph = _stage_graph(_imports())
    assert "passes" not in graph["codegen"]  # it reaches them only through the plan
    assert not _reach(graph, "codegen") & {"pipeline", "generalize"}
    users = {m for m, targets in _imports().items() if "pipeline" in targets}
    # the front ends: standalone: emit -o's; picture: graph_of's; train_step:
    # compile_step's; dask.source: what autodiffgen.dask's modules read
    assert users <= {"api", "transforms", "standalone", "picture", "train_step",
                     "dask.source"}, users


def test_only_the_pipeline_traces_to_compile():
    """Every front end compiles through pipeline.compile (one Request each); the only
    other caller of tracer.trace is the tape, the eager reference."""
    callers = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr == "trace" and isinstance(node.func.value, ast.Name) and \
                    node.func.value.id == "tracer":
                callers.add(_module_name(path))
    assert callers == {"pipeline", "tape"}, callers


def test_standalone_modules_do_not_import_the_api():
    assert "api" not in _reach(_imports(), "standalone")


def test_stages_do_not_import_the_api():
    graph = _imports()
    for stage in STAGES:
        assert "api" not in _reach(graph, stage), stage


def _fresh_python(code):
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_importing_autodiffgen_imports_no_scipy():
    """SciPy's rules are registered when SciPy is used (rules.load_scipy), so `import
    autodiffgen` does not pay for scipy.signal, stats and integrate."""
    assert _fresh_python("import sys, autodiffgen; print('scipy' in sys.modules)") == ["False"]


def test_scipy_rules_are_there_when_scipy_is_imported_before_or_inside_the_function():
    code = """if True:
        import numpy as np, autodiffgen as ad
        def inside(x):
            import scipy.special
            return np.sum(scipy.special.gammaln(x))
        print(ad.grad(inside)(np.array([2.0]))[0].round(6))
        from scipy.special import logsumexp
        print(ad.grad(lambda x: logsumexp(x))(np.zeros(2))[0])
        print(ad.vmap(lambda x: np.sum(__import__('scipy').special.expit(x)))(np.zeros((2, 1))))
    """
    assert _fresh_python(code) == ["0.422784", "0.5", "[0.5", "0.5]"]
