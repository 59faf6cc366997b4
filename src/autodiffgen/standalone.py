"""Standalone modules: the generated code of built functions, needing only NumPy.

A standalone module runs where autodiffgen is not installed (a cluster's workers, another
program), so it cannot trace again. It carries what the in-memory cache would otherwise
decide per call:

- the batch generalization (generalize_batch.py): the code in n the cache runs, plus code
  traced at each size below its low one (1 row broadcasts, so it has code of its own).
  Above the traced size the cache traces again; a module cannot, so its code in n is
  checked against traces at larger sizes (_holds_above) and serves every larger size
  when they agree, else up to the traced size;
- one entry per function, `<name>_value_and_grad`, that checks every array argument's
  dtype and trailing shape against the traced ones and raises SignatureError (a TypeError
  and a ValueError) naming the argument, what it got and what the module serves, instead
  of a NumPy error or a silent cast (float32 stays float32: another dtype is refused);
- the guards of the traced path: a failed one raises the module's GuardFailure, whose
  message says the module cannot trace again, so a caller that can (the client of a
  cluster) catches it and traces that path with autodiffgen;
- a mask's count read at run time for every batch size (_counted_rows): the compile path
  keeps a graph that reads counts to its traced shape, since the in-memory cache traces
  each new shape again; a module unifies such graphs made at three sizes instead.
"""

import dataclasses
import textwrap
import warnings

import numpy as np

from . import pipeline
from .cache.loader import load
from .codegen.emitter import emit_module
from .errors import function_name
from .generalize.batch import LOWS, _close, agrees, batch_of, grown  # (as agrees compares)
from .generalize.unify import unify
from .graph.size_formulas import Batch
from .trace.count_sources import counted
from .tree import Field, child, is_container, items, leaves

PROBE_ROWS = 2048  # the large size a module's code is checked at (see _holds_above)
PROBE_BYTES = 1 << 26
GROWN = 16  # the rows an example of LOWS[0] rows or fewer is repeated to

_ENTRY_HELPERS = '''\
class SignatureError(TypeError, ValueError):
    """An argument's dtype, shape or structure is not one this module was generated for."""


def _check(value, name, path, dtype, shape, rows=None):
    """The array at `path` in argument `name`, checked against the `dtype` and `shape` this
    module serves (shape[0] None: any number of rows, `rows` if given); its row count."""
    where = name
    for key in path:
        try:
            value = getattr(value, key[0]) if type(key) is tuple else value[key]
        except (KeyError, IndexError, TypeError, AttributeError):
            step = f".{key[0]}" if type(key) is tuple else f"[{key!r}]"
            raise SignatureError(f"{where} has no {step}: this module serves {name} of the "
                                 "structure it was traced at") from None
        where += f".{key[0]}" if type(key) is tuple else f"[{key!r}]"
    dims = ", ".join("n" if d is None else str(d) for d in shape)
    served = f"{where}: {dtype}[{dims}]" + ("" if rows is None else f" with n = {rows}")
    if not isinstance(value, np.ndarray) and not (shape == () and
                                                  isinstance(value, np.generic)):
        raise SignatureError(f"{where} is a {type(value).__name__}, but this module serves "
                             f"{served} (a NumPy array)")
    if value.dtype != dtype:
        raise SignatureError(f"{where} has dtype {value.dtype}, but this module serves "
                             f"{served}: generate it for {value.dtype} too")
    if value.ndim != len(shape) or any(d is not None and d != s for d, s in
                                       zip(shape, value.shape)) or \\
            rows is not None and value.shape[0] != rows:
        raise SignatureError(f"{where} has shape {value.shape}, but this module serves "
                             f"{served}")
    return value.shape[0] if value.ndim else None


def _tree(value):
    """A dict's sorted keys, a list's or tuple's length, nested (None at anything else)."""
    if type(value) is dict:  # a key, or (key, its tree) for a container
        kids = ((k, _tree(v)) for k, v in value.items())
        return ("dict", tuple(sorted((k if t is None else (k, t) for k, t in kids), key=repr)))
    if type(value) in (list, tuple):
        return (type(value).__name__, tuple(map(_tree, value)))
    return None


def _check_tree(value, name, tree):
    """Refuses an argument of another structure (another key, length or container)."""
    if _tree(value) != tree:
        raise SignatureError(f"{name} has the structure {_tree(value)}, but this module "
                             f"serves {tree} (keys and lengths of the traced {name})")


def _no_retrace(error):
    """A failed guard, said as a module that cannot trace again says it."""
    return GuardFailure(f"{error} -- this standalone module holds only the traced path and "
                        "cannot trace again: call the autodiffgen function on these arguments "
                        "(where autodiffgen is installed) to trace the path they take")
'''

# the module's names an entry calls
_ENTRY_NAMES = {"GuardFailure", "SignatureError", "_check", "_check_tree", "_no_retrace"}


def standalone_module(calls):
    """(source, entry names) of one module with the value-and-grad of each (GradFunction,
    args) pair: the CLI's `-o`. A name already taken gets a `_1` suffix."""
    graphs, entries, taken = [], [], set()
    for gf, args in calls:
        name = _free(f"{_base(gf)}_value_and_grad", taken)
        served, entry = _served(gf, tuple(args), name, taken)
        graphs += [g for _, g in served]
        entries.append(entry)
    extra = [_ENTRY_HELPERS.rstrip()] + [text.rstrip() for text, _ in entries]
    source = emit_module(graphs, True, extra=extra, extra_helpers={"GuardFailure"})[0]
    return source, [name for _, name in entries]  # (the entries catch GuardFailure)


def _base(gf):
    return function_name(gf.fun)


def _free(name, taken):
    base, n = name, 0
    while name in taken:
        n += 1
        name = f"{base}_{n}"
    taken.add(name)
    return name


def _served(gf, args, name, taken):
    """([(rows or None, graph)], (entry text, name)): the graph for every batch size from
    its low one up (rows None), the graphs traced at each size below, or the one graph of
    the traced shapes when the code does not generalize."""
    request = gf.request(args, standalone=True)
    rows = batch_of(args, request.batch)
    # at LOWS[0] rows or fewer the code in n cannot be found (generalize_batch.py): find it
    # on the example's rows repeated, and trace the sizes below its low one as usual
    grow = rows is not None and rows.n <= LOWS[0]
    general = _traced(request, grown(args, rows, GROWN)) if grow else None
    if general is None or general.batch is None:  # the example's own shapes, then
        grow = False
        general, = pipeline.program(request)
    if general.batch is None and rows is not None and counted(general):
        grow = rows.n < GROWN  # n - 1 above a low size: the sizes unified must differ
        general = _counted_rows(request, grown(args, rows, GROWN) if grow else args,
                                None if grow else general) or general
    batch = general.batch
    if batch is None:
        general.name = _free(f"_{name}_traced", taken)
        return [(None, general)], (_entry(name, general, args, None, [(None, general)]), name)
    if _holds_above(request, grown(args, rows, GROWN) if grow else args, general):
        general = dataclasses.replace(general, batch=Batch(  # serves every n >= lo
            batch.n, batch.paths, batch.lo, None, batch.var))
    general.name = _free(f"_{name}_rows", taken)
    served = [(None, general)]
    for size in range(1, batch.lo):
        small = grown(args, rows, size)  # the first `size` rows, or repeated
        graph = _traced(dataclasses.replace(request, batch=None), small)
        if graph is not None:  # else a size the function does not run at: not served
            graph.name = _free(f"_{name}_{size}_row{'s' * (size > 1)}", taken)
            served.append((size, graph))
    return served, (_entry(name, general, args, batch, served), name)


def _holds_above(request, args, general):
    """Whether the code in n also gives what a trace gives at larger sizes: 2n + 1 rows,
    and a large size (up to PROBE_ROWS rows, and PROBE_BYTES of batch arguments), on the
    example's rows repeated. The in-memory cache traces again above the traced size; a
    module cannot, so it serves every larger size only when these checks pass (a size
    test such as `if len(x) > 64:` or `x[:100]` fails them), and up to the traced size
    otherwise. A size test that gives the same answer at every size tried is not seen,
    as in memory (generalize_batch.py)."""
    batch = general.batch
    per_row = sum(_row_bytes(args, path) for path in batch.paths)
    large = min(PROBE_ROWS, PROBE_BYTES // max(per_row, 1))
    sizes = [2 * batch.n + 1] + ([large] if large > 2 * batch.n + 1 else [])
    check = _emitted_agrees if counted(general) else _agrees
    return all(check(request, general, grown(args, batch, rows), rows) for rows in sizes)


def _agrees(request, general, args, n):
    """batch.agrees: the graph in n run at `args` against the graph traced there."""
    try:
        traced = pipeline.traced(request, args)
    except Exception:  # noqa: BLE001  the user's code may raise anything at another size
        return False
    return agrees(general, traced, args, n)


def _counted_rows(request, args, first=None):
    """The graph of a function that reads a mask's count at run time (generalize/counts.py)
    for every batch size from a low one up to n, or None: the programs made at n (`first`
    if given), n-1 and a low size, each reading its counts at run time, unified into one
    whose sizes are formulas in n that fit all three (_holds_above checks larger sizes)."""
    batch = batch_of(args, request.batch)
    request = dataclasses.replace(request, batch=None)  # the counts' stage alone, per size
    n = batch.n
    at_n = first or _traced(request, args)
    near = _traced(request, grown(args, batch, n - 1))
    if at_n is None or near is None:
        return None
    var = "n" if "n" not in at_n.params else "_n"
    # the least low size that fits, so that fewest sizes below it are traced alone (where
    # a mask of 1 or 2 elements keeps its count)
    for low in range(LOWS[0], min(LOWS[-1] + 1, n - 1)):
        probe = _traced(request, grown(args, batch, low))
        general = probe and unify([at_n, near, probe], [n, n - 1, low], var)
        if general is not None:
            return dataclasses.replace(general, batch=Batch(n, batch.paths, low, n, var))
    return None


def _emitted_agrees(request, general, args, n):
    """_agrees for a graph that reads counts, which only its emitted code computes
    (batch.run knows formulas in n alone): its code, emitted for every size from its low
    one, run at `args` against the code the counts' stage makes for their shapes (what the
    in-memory cache would run)."""
    b = general.batch
    graph = dataclasses.replace(general, batch=Batch(b.n, b.paths, b.lo, None, b.var))
    reference = _traced(dataclasses.replace(request, batch=None), args)
    if reference is None:
        return False
    try:
        with np.errstate(all="ignore"):
            mine, theirs = (leaves(load(*_emitted(g))(*args)) for g in (graph, reference))
    except Exception:  # noqa: BLE001  code that breaks at this size does not serve it
        return False
    return len(mine) == len(theirs) and all(map(_close, mine, theirs))


def _emitted(graph):
    source, namespace, locs = emit_module([graph], True)
    return source, namespace, graph.name, locs


def _row_bytes(args, path):
    leaf = args[path[0]]
    for key in path[1:]:
        leaf = child(leaf, key)
    return leaf.nbytes // max(leaf.shape[0], 1)


def _traced(request, args):
    """The request's graph at `args` (for every batch size it allows when its `batch`
    flags are set), or None when the function fails there. NumPy's warnings there are
    not the user's (the mean of a mask of 1 row that selects none): they are not shown."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return pipeline.program(dataclasses.replace(request, args=tuple(args)))[0]
    except Exception:  # noqa: BLE001  the user's code may raise anything at another size
        return None


def _entry(name, graph, args, batch, served):
    """The entry's source: check each array argument, pick the code for its rows, run it."""
    # the module's names the entry calls: a parameter named so is renamed (keyword calls
    # keep the user's names otherwise); the entry's locals are named unlike any parameter
    used = _ENTRY_NAMES | {g.name for _, g in served} | {name}
    original = list(graph.params)
    params = [p + "_arg" if p in used else p for p in original]
    run, error = (_unlike(local, params) for local in ("run", "error"))
    batch_paths = [] if batch is None else list(batch.paths)
    checks, anchor = [], None
    for path, leaf in _array_leaves(args):
        text = _path_text(path)
        if text is None:
            continue
        shape = list(leaf.shape)
        rows = None
        if path in batch_paths:
            shape[0] = None
            if anchor is not None:
                rows = batch.var
        call = f"_check({params[path[0]]}, {original[path[0]]!r}, {text}, " \
               f"{leaf.dtype.name!r}, {tuple(shape)!r}{'' if rows is None else ', ' + rows})"
        if path in batch_paths and anchor is None:
            anchor = f"{batch.var} = {call}"
            checks.insert(0, anchor)
        else:
            checks.append(call)
    trees = [f"_check_tree({params[i]}, {original[i]!r}, {tree!r})"
             for i, tree in enumerate(map(_tree, args)) if type(tree) is tuple]
    checks = trees + checks  # a dict with another key, a list of another length: first
    arguments = ", ".join(params)
    doc = graph.described()
    if batch is not None:
        doc += f" Serves {_sizes(batch, served)} rows."
    text = (doc + " " if doc else "") + (
        "Checks each array argument's dtype and shape, then runs the code for its batch "
        "size. Raises SignatureError for an argument this module does not serve, and "
        "GuardFailure for a path it was not traced for.")
    doc = textwrap.indent(textwrap.fill(text.replace('"', "'"), 84), "    ")
    doc = f'    """{doc[4:]}\n    """'
    lines = [f"def {name}({arguments}):", doc] + [f"    {c}" for c in checks]
    if batch is None:
        call = f"{graph.name}({arguments})"
    else:
        lines += _dispatch(batch, served, original, run)
        call = f"{run}({arguments})"
    lines += ["    try:", f"        return {call}", f"    except GuardFailure as {error}:",
              f"        raise _no_retrace({error}) from None"]
    return "\n".join(lines) + "\n"


def _unlike(name, params):
    while name in params:
        name = "_" + name
    return name


def _dispatch(batch, served, params, run):
    """`run = ...`: the general code from the low size up, the code of each smaller size."""
    var, lo = batch.var, batch.lo
    general = next(g for rows, g in served if rows is None)
    hi = general.batch.hi
    test = f"{var} >= {lo}" if hi is None else f"{lo} <= {var} <= {hi}"
    lines = [f"    if {test}:", f"        {run} = {general.name}"]
    for rows, graph in served:
        if rows is not None:
            lines += [f"    elif {var} == {rows}:", f"        {run} = {graph.name}"]
    anchor = params[batch.paths[0][0]] + "".join(_step(k) for k in batch.paths[0][1:])
    lines += ["    else:",
              (f"        raise SignatureError(f'{anchor} has {{{var}}} rows: this module "
               f"serves {_sizes(batch, served)} rows{_why(hi)}')")]
    return lines


def _sizes(batch, served):
    """'1 and 2 or more': the batch sizes an entry serves."""
    hi = next(g for rows, g in served if rows is None).batch.hi
    sizes = [str(rows) for rows, _ in served if rows is not None]
    return " and ".join(sizes + [f"{batch.lo} or more" if hi is None else
                                 f"{batch.lo} to {hi}"])


def _why(hi):
    if hi is None:
        return ""
    return (f" (above {hi} rows the function computes otherwise than this code: "
            "generate the module at the largest batch size it is to serve)")


def _step(key):
    return f".{key}" if type(key) is Field else f"[{key!r}]"


def _tree(value):
    """What _check_tree compares (the module's _tree): a dict's sorted keys (with the tree
    of a container under it), a list's or tuple's length, nested;
    None at a leaf; False where another container (a dataclass, a registered type) is met
    or a key is not a str or int (the argument's structure is then not checked)."""
    if type(value) is dict:
        if not all(type(k) in (str, int) for k in value):
            return False
        kids = {k: _tree(v) for k, v in value.items()}
        if False in kids.values():
            return False
        return ("dict", tuple(sorted((k if v is None else (k, v) for k, v in kids.items()),
                                     key=repr)))
    if type(value) in (list, tuple):
        kids = tuple(map(_tree, value))
        return False if False in kids else (type(value).__name__, kids)
    return False if is_container(value) else None


def _array_leaves(args):
    for i, arg in enumerate(args):
        yield from _leaves(arg, (i,))


def _leaves(tree, path):
    if is_container(tree):
        for key, child in items(tree):
            yield from _leaves(child, path + (key,))
    elif type(tree) is np.ndarray:
        yield path, tree


def _path_text(path):
    """The path inside its argument as _check takes it: a dict key or an index, a
    dataclass field as a 1-tuple; None for a registered type's child (not checked)."""
    steps = []
    for key in path[1:]:
        if type(key) is Field:
            steps.append((str(key),))
        elif type(key) in (str, int):
            steps.append(key)
        else:
            return None
    return repr(tuple(steps))
