"""What a Dask worker runs: NumPy and the standard library only, never autodiffgen.

The client does not pickle these functions by reference (that would make the worker import
autodiffgen): autodiffgen.dask execs this file's text under a module name no process can
import, so Dask's pickler sends the functions by value. Keep it self-contained: no imports
from autodiffgen, no relative imports.

A chunk's result is a Part, a dict: "value", "aux" and "grads" are totals over rows (a
mean loss's are multiplied by the chunk's rows), so parts combine by adding, in any
grouping; "gathered" holds each chunk's own aux values by chunk index (aux="chunks");
"rows" lists (chunk index, rows) for every chunk summed, which the client checks counts
each chunk once; "failures" lists (chunk index, message) for chunks no variant of the
generated code served, which the client traces again. The generated code takes and
returns arrays and numbers only (the client's flat.py), so gradients are tuples here.
"""

import os
import sys
import types


def module_of(key, source):
    """The generated module of `source`, exec'd once per process (kept in sys.modules under
    a name made from `key`, the source's hash), so later tasks of this process reuse it."""
    name = f"_autodiffgen_generated_{key}"
    module = sys.modules.get(name)
    if module is None:
        module = types.ModuleType(name)
        try:
            exec(compile(source, f"<autodiffgen generated {key}>", "exec"), module.__dict__)  # noqa: S102
        except ImportError as e:  # SciPy, or the module of a custom primitive of the user's
            raise ImportError(f"the generated code imports {e.name!r}, which this Dask worker "
                              "cannot import: install it on the workers (the code calls "
                              "it: SciPy, or a module of custom primitives of yours)",
                              name=e.name) from e
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


def run_chunk(index, variants, layout, small, how, *chunks):
    """The Part of one chunk. `how` is (reduce, aux, block): "mean" or "sum"; None,
    "reduce" or "chunks"; and the rows of a block (0: none). A chunk longer than a block
    runs a block of rows at a time and adds their sums: a block's temporaries stay small
    enough for the CPU's cache and for malloc to reuse rather than map afresh (a chunk's
    own temporaries, megabytes each, cost page faults on every call under Dask's
    MALLOC_TRIM_THRESHOLD_). A block no variant serves sends the chunk whole, as without
    blocks, so a chunk's path is the one its rows take together, as the client traces it."""
    rows = len(chunks[0])
    spans = blocks(rows, block_for(how[2], os.environ))
    if len(spans) > 1:
        total = part()
        for start, stop in spans:
            block = run_block(index, variants, layout, small, how,
                              *(c[start:stop] for c in chunks))
            if block["failures"]:
                break
            total = combine(total, block)
        else:
            total["rows"] = [(index, rows)]
            return total
    return run_block(index, variants, layout, small, how, *chunks)


def block_for(block, environ):
    """The rows of a block on this worker: the client's `block` (about 1 MB of rows), or,
    where the worker's environment raises both of glibc's malloc thresholds (as
    docs/guide/dask.md shows), as many rows as keep a temporary of 8 bytes a row under an
    eighth of the lower: malloc then reuses them from its heap, and fewer blocks cost less
    Python (measured: 1M rows in 32.6 ms whole against 36.4 ms in 1 MB blocks)."""
    raised = min(int(environ.get(name) or 0) for name in ("MALLOC_MMAP_THRESHOLD_",
                                                           "MALLOC_TRIM_THRESHOLD_"))
    return max(block, raised // 64) if block and raised > 2**20 else block


def blocks(rows, block):
    """(start, stop) of `rows` rows cut into blocks of at most about `block` rows, all of
    one size give or take a row, none of a single row; [(0, rows)] when block is 0."""
    count = max(1, min(-(-rows // block), rows // 2)) if block else 1
    return [(rows * k // count, rows * (k + 1) // count) for k in range(count)]


def run_block(index, variants, layout, small, how, *chunks):
    """The Part of the rows in `chunks` (a chunk, or a block of one): the first variant
    that serves them runs on the call's arguments, rebuilt from `layout` ("chunk", k) /
    ("small", k)."""
    args = [chunks[k] if where == "chunk" else small[k] for where, k in layout]
    rows = len(chunks[0])
    why = f"no generated code for {rows} rows"
    for variant in variants:
        if not serves(variant, rows):
            continue
        module = module_of(variant["key"], variant["source"])
        try:
            out, grads = getattr(module, variant["function"])(*args)
        except Exception as e:
            if not other_path(module, e):
                raise
            why = str(e)
            continue
        return _part(index, rows, out, grads, *how[:2])
    return part(failures=[(index, why)])


def run_chunks(indices, variants, layout, small, how, *chunks):
    """The Part of a group of chunks (their blocks in order, as many for each), each run
    alone and added: a task's cost paid once for several chunks, none of them copied."""
    k = len(chunks) // len(indices)
    return combine(*(run_chunk(i, variants, layout, small, how, *chunks[j * k:(j + 1) * k])
                     for j, i in enumerate(indices)))


def part(value=None, aux=None, grads=None, rows=(), gathered=None, failures=()):
    return {"value": value, "aux": aux, "grads": grads, "rows": list(rows),
            "gathered": gathered or {}, "failures": list(failures)}


def _part(index, rows, out, grads, reduce, aux):
    """The Part of a chunk the generated code ran on."""
    value, aux_values = out if aux else (out, None)
    if reduce == "mean":  # totals over rows: a mean times the rows
        value, grads = value * rows, scaled(grads, rows)
        if aux == "reduce":
            aux_values = scaled(aux_values, rows)
    if aux == "chunks":
        return part(value, None, grads, [(index, rows)], {index: aux_values})
    return part(value, aux_values, grads, [(index, rows)])


def scaled(tree, k):
    """Each leaf times k, keeping its dtype (a float32 leaf stays float32)."""
    if isinstance(tree, tuple):
        return tuple(scaled(v, k) for v in tree)
    return None if tree is None else tree * k


def added(a, b):
    """Leafwise a + b over tuples (None, an empty aux value, stays None)."""
    if isinstance(a, tuple):
        return tuple(added(x, y) for x, y in zip(a, b))
    return None if a is None else a + b


def combine(*parts):
    """The Part of several Parts: one node of the tree reduction."""
    total = part()
    for p in parts:
        total["rows"] += p["rows"]
        total["failures"] += p["failures"]
        total["gathered"].update(p["gathered"])
        if p["value"] is None:
            continue
        if total["value"] is None:
            total.update(value=p["value"], aux=p["aux"], grads=p["grads"])
        else:
            total.update(value=total["value"] + p["value"], grads=added(total["grads"],
                                                                        p["grads"]),
                         aux=None if p["aux"] is None else added(total["aux"], p["aux"]))
    return total


class NpyRows:
    """A .npy file's rows, read when a task asks for them: what `da.from_array` wraps for
    autodiffgen.dask.from_npy. It pickles as its path (a np.memmap would pickle as its
    whole data), and each read maps the file, copies the rows asked for and unmaps it, so a
    worker holds only the chunks it is computing."""

    def __init__(self, path, shape, dtype):
        self.path, self.shape, self.dtype = path, tuple(shape), dtype
        self.ndim = len(self.shape)

    def __getitem__(self, key):
        import numpy as np

        return np.array(np.load(self.path, mmap_mode="r")[key])


def peak_bytes(reset=False):
    """This process's peak resident set in bytes (Linux's VmHWM) since it started or was
    last reset; with reset=True, start it again from the current one. Not getrusage's
    ru_maxrss: a spawned Dask worker inherits its parent's."""
    if reset:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM"))
