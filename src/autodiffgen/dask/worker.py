"""What a Dask worker runs: NumPy and the standard library only, never autodiffgen.

The client does not pickle these functions by reference (that would make the worker import
autodiffgen): autodiffgen.dask execs this file's text under a module name no process can
import, so Dask's pickler sends the functions by value. Keep it self-contained: no imports
from autodiffgen, no relative imports.

A chunk's result is a Part: (total value, total gradients, rows, failures). Totals are sums
over rows (a mean loss's value and gradients are multiplied by the chunk's rows), so parts
combine by adding, in any grouping; `failures` lists (chunk index, message) for chunks no
variant of the generated code served, which the client traces again.
"""

import sys
import types


def module_of(key, source):
    """The generated module of `source`, exec'd once per process (kept in sys.modules under
    a name made from `key`, the source's hash), so later tasks of this process reuse it."""
    name = f"_autodiffgen_generated_{key}"
    module = sys.modules.get(name)
    if module is None:
        module = types.ModuleType(name)
        exec(compile(source, f"<autodiffgen generated {key}>", "exec"), module.__dict__)  # noqa: S102
        sys.modules[name] = module
    return module


def serves(variant, rows):
    """Whether this variant's code takes a chunk of `rows` rows: code traced at a fixed row
    count (variant["rows"]) takes only that count."""
    return variant["rows"] is None or variant["rows"] == rows


def other_path(module, error):
    """Whether `error` says the chunk takes another path or shape than this code serves
    (the module's own exception classes), rather than a bug to report."""
    kinds = tuple(getattr(module, name) for name in ("GuardFailure", "SignatureError")
                  if isinstance(getattr(module, name, None), type))
    return isinstance(error, kinds)


def run_chunk(index, variants, layout, small, reduce, *chunks):
    """The Part of one chunk: the first variant that serves it runs on the call's
    arguments, rebuilt from `layout` ("chunk", k) / ("small", k)."""
    args = [chunks[k] if where == "chunk" else small[k] for where, k in layout]
    rows = len(chunks[0])
    why = f"no generated code for {rows} rows"
    for variant in variants:
        if not serves(variant, rows):
            continue
        module = module_of(variant["key"], variant["source"])
        try:
            value, grads = getattr(module, variant["function"])(*args)
        except Exception as e:
            if not other_path(module, e):
                raise
            why = str(e)
            continue
        if reduce == "mean":
            value, grads = value * rows, scaled(grads, rows)
        return value, grads, rows, []
    return None, None, 0, [(index, why)]


def scaled(tree, k):
    """Each leaf times k, keeping its dtype (a float32 leaf stays float32)."""
    if isinstance(tree, dict):
        return {key: scaled(v, k) for key, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return _same_sequence(tree, [scaled(v, k) for v in tree])
    return tree * k


def added(a, b):
    """Leafwise a + b over dicts, lists and tuples (namedtuples too)."""
    if isinstance(a, dict):
        return {key: added(v, b[key]) for key, v in a.items()}
    if isinstance(a, (list, tuple)):
        return _same_sequence(a, [added(x, y) for x, y in zip(a, b)])
    return a + b


def _same_sequence(like, items):
    if isinstance(like, tuple) and hasattr(like, "_fields"):
        return type(like)(*items)
    return type(like)(items)


def combine(*parts):
    """The Part of several Parts: one node of the tree reduction."""
    value, grads, rows, failures = None, None, 0, []
    for v, g, n, f in parts:
        failures = failures + list(f)
        if v is None:
            continue
        value, grads = (v, g) if value is None else (value + v, added(grads, g))
        rows += n
    return value, grads, rows, failures
