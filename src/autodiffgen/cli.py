"""`autodiffgen emit model.py`: the generated code of a file's differentiated functions.

    autodiffgen emit model.py                     print each function's generated source
    autodiffgen emit model.py --function loss     only `loss`
    autodiffgen emit model.py --arg x=f32[64,3]   trace at another example argument
    autodiffgen emit model.py -o loss_grad.py     write one standalone, NumPy-only module
                                                  (every batch size: standalone.py)
    autodiffgen graph model.py                    print each function's graph as a listing
    autodiffgen graph model.py -o loss.svg        draw one function's graph (.dot, or
                                                  .svg/.png/.pdf with graphviz: picture.py)
    autodiffgen explain model.py -o report.html   a page for teaching: source, forward,
                                                  backward and graph side by side (explain/)

The file is imported, not run, so its `if __name__ == "__main__":` block stays quiet. Its
module-level `@grad` / `@value_and_grad` functions are traced at the example arguments
their decorator declares with `example=` (see cli_examples.py). Exit status: 0 on success; 2 for
a usage problem (missing file, no functions, a bad or missing spec), with a one-line
message; 1 when the user's own code fails to import or trace.
"""

import argparse
import importlib.util
import inspect
import os
import shlex
import sys
import traceback

from ._version import __version__
from .api import GradFunction, emit_functions
from .cli_examples import SpecError, example_value, spec_text
from .errors import AutodiffgenError, at, def_site, is_internal

_SPEC_HELP = """\
SPEC is DTYPE[d0,d1,...] with DTYPE one of f16 f32 f64 i8 i16 i32 i64 u8 bool
(f64[] is 0-d). Floats get seeded values in [0.5, 1.5); integers are zeros, or values
in [0, N) with i64[128]<N. A Python literal (2.0, 3, None, "'text'") is a plain value,
and a dict or list literal of SPECs a pytree: --arg 'params={"W": "f32[3,2]"}'.
A file declares its specs on the decorator:
    @value_and_grad(argnums=0, example=dict(W="f32[784,10]", y="i64[128]<10"))"""


class UsageError(Exception):
    """The command line or the file's declarations are wrong: one line, exit status 2."""


class ModelError(Exception):
    """The user's code failed while importing or tracing: exit status 1."""


def main(argv=None):
    """Run the command line `argv` (default: sys.argv[1:]); returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    options = _parser().parse_args(argv)
    try:
        return options.run(options, argv)
    except UsageError as e:
        print(f"autodiffgen: error: {e}", file=sys.stderr)
        return 2
    except ModelError as e:
        print(f"autodiffgen: error: {e}", file=sys.stderr)
        return 1


def _parser():
    parser = argparse.ArgumentParser(
        prog="autodiffgen", description="Ahead-of-time gradients of NumPy code, emitted as "
        "readable NumPy source.")
    parser.add_argument("--version", action="version", version=f"autodiffgen {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    emit = commands.add_parser(
        "emit", help="print or write the generated code of a file's @grad/@value_and_grad "
        "functions", description="Import model.py and print the generated forward+backward "
        "code of its\nmodule-level @grad / @value_and_grad functions, traced at the example "
        "arguments\ntheir decorator declares with example=.", epilog=_SPEC_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    emit.add_argument("model", metavar="model.py", help="the Python file to import")
    emit.add_argument("--function", metavar="NAME", action="append",
                      help="only this function, by variable or def name (repeatable)")
    emit.add_argument("--arg", metavar="NAME=SPEC", action="append", default=[],
                      help="give or override one example argument, e.g. x=f32[128,784] "
                      "or lr=0.1 (repeatable)")
    emit.add_argument("-o", "--output", metavar="FILE", help="write one standalone module, "
                      "needing only NumPy, with every selected function")
    emit.set_defaults(run=run_emit)
    graph = commands.add_parser(
        "graph", help="print or draw the graph of a file's @grad/@value_and_grad functions",
        description="Import model.py and print the traced forward and generated backward "
        "graph\nof its module-level @grad / @value_and_grad functions (one line per "
        "primitive),\nor write it with -o as DOT, or as SVG/PNG/PDF with graphviz's dot.",
        epilog=_SPEC_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    graph.add_argument("model", metavar="model.py", help="the Python file to import")
    graph.add_argument("--function", metavar="NAME", action="append",
                       help="only this function, by variable or def name (repeatable)")
    graph.add_argument("--arg", metavar="NAME=SPEC", action="append", default=[],
                       help="give or override one example argument (repeatable)")
    graph.add_argument("-o", "--output", metavar="FILE", help="write one function's graph: "
                       "graph.dot, or graph.svg / .png / .pdf (needs graphviz's dot)")
    graph.set_defaults(run=run_graph)
    explain = commands.add_parser(
        "explain", help="write an HTML page showing what the backward computes, for "
        "teaching", description="Import model.py and write one self-contained HTML page "
        "with, side by side,\nthe source, the generated forward and backward, and the "
        "graph of its\n@grad / @value_and_grad functions: clicking a line of the source "
        "marks the\nstatements it became, the values they compute and what the forward "
        "saves.", epilog=_SPEC_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    explain.add_argument("model", metavar="model.py", help="the Python file to import")
    explain.add_argument("--function", metavar="NAME", action="append",
                         help="only this function, by variable or def name (repeatable)")
    explain.add_argument("--arg", metavar="NAME=SPEC", action="append", default=[],
                         help="give or override one example argument (repeatable)")
    explain.add_argument("-o", "--output", metavar="FILE", required=True,
                         help="the page to write, e.g. report.html")
    explain.set_defaults(run=run_explain)
    return parser


def run_emit(options, argv):
    module = load_module(options.model)
    functions = select(find_functions(module), options.function, options.model)
    overrides = parse_overrides(options.arg, functions)
    calls = [(label, gf, example_args(label, gf, overrides)) for label, gf in functions]
    if options.output is None:
        sources = [_traced(_call_text(gf, args), getattr(gf, "example_source", gf.source), *args)
                   for _, gf, args in calls]  # example_source: a compiled step's (train_step.py)
        sys.stdout.write("\n\n".join(sources))
        return 0
    for label, gf, _ in calls:
        if hasattr(gf, "example_source"):
            raise UsageError(f"{_label(label, gf)} is a compiled training step: -o writes "
                             "gradient functions only; select others with --function")
    source, names = _traced(options.model, emit_functions, [c[1:] for c in calls])
    _write(options.output, _header(argv, calls) + source)
    print(f"autodiffgen: wrote {options.output} ({', '.join(names)})", file=sys.stderr)
    return 0


def run_graph(options, argv):
    from .picture import graph_of

    module = load_module(options.model)
    functions = select(find_functions(module), options.function, options.model)
    overrides = parse_overrides(options.arg, functions)
    if options.output is not None and len(functions) > 1:
        raise UsageError(f"-o draws one function; {options.model} has "
                         f"{', '.join(_label(*f) for f in functions)}: pick one with --function")
    calls = [(gf, example_args(label, gf, overrides)) for label, gf in functions]
    pictures = [_traced(_call_text(gf, args), graph_of, gf, *args) for gf, args in calls]
    if options.output is None:
        sys.stdout.write("\n".join(p.text() for p in pictures))
        return 0
    try:
        pictures[0].save(options.output)
    except OSError as e:
        raise UsageError(f"cannot write {options.output}: {e.strerror or e}") from None
    except (ValueError, RuntimeError) as e:  # a format it cannot write, or no graphviz
        raise UsageError(str(e)) from None
    print(f"autodiffgen: wrote {options.output}", file=sys.stderr)
    return 0


def run_explain(options, argv):
    from .explain import explained, page

    module = load_module(options.model)
    functions = select(find_functions(module), options.function, options.model)
    overrides = parse_overrides(options.arg, functions)
    calls = [(gf, example_args(label, gf, overrides)) for label, gf in functions]
    pages = [_traced(_call_text(gf, args), explained, gf, *args) for gf, args in calls]
    _write(options.output, page(pages, f"autodiffgen explain {os.path.basename(options.model)}"))
    print(f"autodiffgen: wrote {options.output} ({', '.join(p.name for p in pages)})",
          file=sys.stderr)
    return 0


# ---- finding the functions --------------------------------------------------------------
def load_module(path):
    """Import the file as a module named after its stem, its directory on sys.path."""
    if not os.path.isfile(path):
        why = "is a directory" if os.path.isdir(path) else "no such file"
        raise UsageError(f"{path}: {why}")
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None:
        raise UsageError(f"{path}: not a Python file (expected a .py file)")
    module = importlib.util.module_from_spec(spec)
    directory = os.path.dirname(os.path.abspath(path))
    register = name not in sys.modules  # never replace a module already imported
    if register:
        sys.modules[name] = module  # as `import` does: dataclasses and pickle look it up
    sys.path.insert(0, directory)
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001  the user's code may raise anything: show it
        if register:
            sys.modules.pop(name, None)
        raise ModelError(f"importing {path} failed:\n{_user_traceback(e)}") from None
    finally:
        if directory in sys.path:
            sys.path.remove(directory)
    return module


def find_functions(module):
    """(variable name, GradFunction) pairs at module level, in definition order."""
    found, seen = [], set()
    for name, value in vars(module).items():
        if isinstance(value, GradFunction) and id(value) not in seen:
            seen.add(id(value))
            found.append((name, value))
    return found


def select(found, wanted, path):
    """The functions named by --function (variable or def name), or all of them."""
    if not found:
        raise UsageError(f"{path}: no @grad or @value_and_grad functions at module level")
    if not wanted:
        return found
    chosen = []
    for name in wanted:
        matches = [(label, gf) for label, gf in found if name in (label, gf.__name__)]
        if not matches:
            available = ", ".join(_label(label, gf) for label, gf in found)
            raise UsageError(f"{path} has no function {name!r}; available: {available}")
        chosen += [m for m in matches if m not in chosen]
    return chosen


def _label(label, gf):
    return label if label == gf.__name__ else f"{label} ({gf.__name__})"


# ---- example arguments ------------------------------------------------------------------
def parse_overrides(items, functions):
    """{name: SPEC text} from the --arg options; each must name some function's parameter."""
    overrides = {}
    for item in items:
        name, sep, spec = item.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier():
            raise UsageError(f"--arg expects NAME=SPEC, e.g. --arg x=f32[128,784]; got {item!r}")
        overrides[name] = spec
    known = {p.name for _, gf in functions for p in _parameters(gf)}
    for name in overrides:
        if name not in known:
            raise UsageError(f"--arg {name}=...: no selected function has a parameter {name!r} "
                             f"(parameters: {', '.join(sorted(known))})")
    return overrides


def example_args(label, gf, overrides):
    """Positional arguments to trace `gf` at: from --arg, else example=, else the default."""
    declared = _declared(label, gf)
    args = []
    for param in _parameters(gf):
        if param.name in overrides:
            spec = overrides[param.name]
        elif param.name in declared:
            spec = declared[param.name]
        elif param.default is not param.empty:
            args.append(param.default)
            continue
        else:
            raise UsageError(at(def_site(gf.fun), f"{_label(label, gf)} has no example value for "
                                f"parameter {param.name!r}: add {param.name}=SPEC to example= on "
                                f"its decorator, or pass --arg {param.name}=SPEC "
                                "(SPEC like f32[128,10], i64[128]<10 or 2.0)"))
        try:
            args.append(example_value(spec, param.name))
        except SpecError as e:
            raise UsageError(at(def_site(gf.fun), f"{_label(label, gf)}: {e}")) from None
    return args


def _declared(label, gf):
    declared = {} if gf.example is None else gf.example
    if not isinstance(declared, dict):
        raise UsageError(at(def_site(gf.fun), f"{_label(label, gf)}: example= must be a dict "
                            f"from parameter name to SPEC, got a {type(declared).__name__}"))
    names = [p.name for p in _parameters(gf)]
    for name in declared:
        if name not in names:
            raise UsageError(at(def_site(gf.fun), f"{_label(label, gf)}: example= names {name!r}, "
                                f"which is not a parameter of {gf.__name__}({', '.join(names)})"))
    return declared


def _parameters(gf):
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    fun = getattr(gf, "example_fun", gf.fun)  # a compiled step takes its loss's examples
    return [p for p in inspect.signature(fun).parameters.values() if p.kind in kinds]


# ---- tracing and writing ----------------------------------------------------------------
def _traced(what, make, *args):
    """Call `make`; the user's errors become one line (ours) or their traceback (theirs)."""
    try:
        return make(*args)
    except AutodiffgenError as e:
        raise ModelError(str(e)) from None
    except Exception as e:  # noqa: BLE001  the user's code may raise anything: show it
        raise ModelError(f"tracing {what} failed:\n{_user_traceback(e)}") from None


def _user_traceback(error):
    """The traceback of `error` without autodiffgen's, NumPy's or importlib's frames."""
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if not is_internal(f.filename) and not f.filename.startswith("<frozen")]
    lines = traceback.format_list(frames) + traceback.format_exception_only(type(error), error)
    return "".join(lines).rstrip()


def _header(argv, calls):
    """Comment lines saying how to regenerate the module and what it is specialized to."""
    lines = [f"# {shlex.join(['autodiffgen', *argv])}",
             "# Each function serves the dtypes and trailing shapes it was traced at, every",
             "# batch size its docstring names, and the values of its non-array arguments:"]
    lines += [f"#   {_call_text(gf, args)}" for _, gf, args in calls]
    return "\n".join(lines) + "\n"


def _call_text(gf, args):
    """'loss(W=f32[784,10], lr=0.1)': a function at its example arguments."""
    names = [p.name for p in _parameters(gf)]
    return f"{gf.__name__}({', '.join(f'{n}={spec_text(v)}' for n, v in zip(names, args))})"


def _write(path, text):
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror or e}") from None
