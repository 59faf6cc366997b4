"""Data-parallel gradients over Dask arrays chunked by rows (`pip install 'autodiffgen[dask]'`).

    vg = autodiffgen.dask.value_and_grad(loss, argnums=0, reduce="mean")
    value, grads = vg(params, X, Y)        # X, Y: dask arrays with the same row chunks

The client traces `loss` with autodiffgen and sends the generated module's source (never
the user's function, never autodiffgen) to the workers, which need only NumPy: each runs it
on its chunk and returns the chunk's total value and gradients and its row count; a tree
reduction in Dask adds them up and the client divides by the rows for a mean. What the
workers run takes each leaf of the small arguments as an argument of its own (flat.py), so
they need none of the user's classes either. The first call checks on a sample that the
loss (and with has_aux, each aux value) decomposes over rows (check.py). A chunk that
takes another path than the code traced (a guard fails on the worker) comes back to the
client, which traces that chunk, adds the new variant, and runs the chunk again. A worker
lost mid-gradient costs time, never a partial sum (faults.py). Row chunks too small to pay
for their tasks run several to a task (chunking.py); from_npy reads a .npy file on the
workers a chunk at a time.
"""

try:
    import dask
    import dask.array as da
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("autodiffgen.dask needs Dask: pip install 'autodiffgen[dask]'") from e

import logging
import os
import time
import uuid
import warnings
from dataclasses import dataclass, replace

import numpy as np

from ..errors import ArgumentError, AutodiffgenError
from ..tree import is_container, items, leaves, map_tree, structure_text
from .check import DecompositionError, check_decomposes
from .chunking import advice, block_rows, kept, planned, target_rows, too_small
from .cluster import compute_all, scheduler_address, workers
from .faults import PartialSumError, counted_once
from .flat import Calls, Flat, FlatGrad
from .source import module_variant, still_holds, what_it_read

__all__ = [
    "DecompositionError",
    "PartialSumError",
    "RetraceError",
    "from_npy",
    "grad",
    "scipy_objective",
    "value_and_grad",
    "worker_peaks",
]

SAMPLE_ROWS = 7  # the decomposition check's sample: halves of 3 and 4 rows
CLUSTER_SECONDS = 10.0  # how long a call reuses the workers, their limits and data homes
EMBEDDED_BYTES = 2**20  # small arguments and sources up to this, over all tasks, go in each
MAX_VARIANTS = 8
LOG = logging.getLogger("autodiffgen")


class RetraceError(AutodiffgenError, RuntimeError):
    """Chunks kept taking paths no traced variant serves."""


def _worker_namespace():
    """worker.py's functions, exec'd under a module name nothing can import, so Dask
    pickles them by value and a worker never imports autodiffgen to run them."""
    path = os.path.join(os.path.dirname(__file__), "worker.py")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    namespace = {"__name__": "_autodiffgen_dask_worker"}
    exec(compile(text, path, "exec"), namespace)  # noqa: S102  our own file, see above
    return namespace


_WORKER = _worker_namespace()


def value_and_grad(fun, argnums=0, reduce="mean", fan_in=8, timeout=None, *,
                   has_aux=False, aux="reduce", chunks="auto"):
    """value_and_grad over Dask arrays chunked by rows; `reduce` says how the loss combines
    over rows: "mean" (weighted by each chunk's rows) or "sum". With has_aux=True, `fun`
    returns (loss, aux) and the call ((value, aux), grads): `aux="reduce"` combines each
    aux value over rows as the loss is, `aux="chunks"` gives a list of each chunk's.
    `chunks="auto"` merges row chunks too small to pay for their tasks (chunking.py, said
    on the `autodiffgen` logger); `chunks="keep"` runs the user's, warning if too small."""
    return DaskGradFunction(fun, argnums, reduce, fan_in, timeout, True, has_aux, aux, chunks)


def grad(fun, argnums=0, reduce="mean", fan_in=8, timeout=None, *, has_aux=False,
         aux="reduce", chunks="auto"):
    """grad over Dask arrays chunked by rows (see value_and_grad); with has_aux=True it
    returns (grads, aux)."""
    return DaskGradFunction(fun, argnums, reduce, fan_in, timeout, False, has_aux, aux, chunks)


@dataclass(eq=False)
class Program:
    """What one signature of the call compiles to: its flat form, the GradFunction of
    that, the variants of the generated module sent to the workers, and what the code
    read besides the arguments (source.py)."""

    flat: Flat
    gf: FlatGrad
    variants: list
    reads: list


class DaskGradFunction:
    """A loss of small arguments and row-chunked Dask arrays, differentiated per chunk."""

    def __init__(self, fun, argnums, reduce, fan_in, timeout, with_value, has_aux=False,
                 aux="reduce", chunks="auto"):
        if reduce not in ("mean", "sum"):
            raise ArgumentError(f"reduce must be 'mean' or 'sum', got {reduce!r}")
        if aux not in ("reduce", "chunks"):
            raise ArgumentError(f"aux must be 'reduce' or 'chunks', got {aux!r}")
        if chunks not in ("auto", "keep"):
            raise ArgumentError(f"chunks must be 'auto' or 'keep', got {chunks!r}")
        self.chunks = chunks
        self.plan = None  # the last call's chunking.Plan (the row chunks it ran)
        self._said = set()  # (the user's chunks, the plan's): said on the logger once
        self._shape = None  # (the chunks and scheduler, when, cluster.workers): _cluster
        self.calls = Calls(fun, argnums)
        self.fun, self.reduce, self.with_value = fun, reduce, with_value
        self.has_aux, self.aux = bool(has_aux), aux
        self.fan_in, self.timeout = max(2, int(fan_in)), timeout
        self._programs = {}  # signature of the call -> Program
        self.traces = 0  # programs made: one per signature (again when what it read changed)
        self.retraces = 0  # chunks traced again because no variant served them

    def __call__(self, *args, **kwargs):
        args, names = self.calls.bound(args, kwargs)
        batch = [i for i, a in enumerate(args) if isinstance(a, da.Array)]
        self._check_args(args, batch)
        arrays = _aligned([args[i] for i in batch])
        program = self._program(args, names, batch, arrays)
        flat_args = program.flat.args(args)
        small = [a for k, a in enumerate(flat_args) if k not in program.flat.batch]
        layout = _layout(len(flat_args), program.flat.batch)
        chunks = list(zip(*(a.to_delayed().ravel() for a in arrays)))
        sizes = arrays[0].chunks[0]
        plan = self._planned(arrays, chunks)
        total = self._run(program, layout, small, chunks, plan.groups, sizes)
        for _ in range(MAX_VARIANTS):
            if not total["failures"]:
                break
            failed = [i for i, _ in total["failures"]]  # their sums are not in total
            self._retrace(program, flat_args, chunks[failed[0]], total["failures"][0][1])
            total["failures"] = []
            total = _WORKER["combine"](total, self._run(program, layout, small, chunks,
                                                        [(i,) for i in failed], sizes))
        if total["failures"]:
            raise RetraceError(f"chunks {[i for i, _ in total['failures']]} took paths no "
                               f"traced code serves after {MAX_VARIANTS} retraces: "
                               f"{total['failures'][0][1]}")
        counted_once(total["rows"], sizes)
        return self._result(program.flat, total)

    def _planned(self, arrays, chunks):
        """The tasks chunking.py plans for this cluster: the user's chunks grouped when
        chunks="auto" and they are too small to pay for their tasks (never with
        aux="chunks", whose list is the user's chunks'). Said once per plan."""
        sizes = arrays[0].chunks[0]
        row_bytes = sum(a.dtype.itemsize * int(np.prod(a.shape[1:])) for a in arrays)
        keep = self.chunks == "keep" or (self.has_aux and self.aux == "chunks")
        plan = kept(sizes) if keep else planned(sizes, row_bytes, *self._cluster(chunks))
        if not (self.has_aux and self.aux == "chunks"):  # (whose list is per chunk)
            plan = replace(plan, block=block_rows(row_bytes))
        new = (sizes, plan.rows) not in self._said
        self._said.add((sizes, plan.rows))
        target = planned(sizes, row_bytes, *workers(())).target if new and \
            self.chunks == "keep" and too_small(sizes, row_bytes) else 0
        if target > max(sizes):  # (not when no larger chunks would do: one per worker)
            warnings.warn(advice(sizes, row_bytes, kept(sizes, target)), stacklevel=3)
        elif new and not plan.kept:
            LOG.info(advice(sizes, row_bytes, plan))
        self.plan = plan
        return plan

    def _cluster(self, chunks):
        """cluster.workers(chunks), read again only after CLUSTER_SECONDS or for other
        chunks or another scheduler: it costs two round trips, and decides only how chunks
        are grouped, never the sum (faults.py checks that every chunk's rows are counted)."""
        key = (scheduler_address(), tuple(blocks[0].key for blocks in chunks))
        now = time.monotonic()
        if self._shape is None or self._shape[0] != key or \
                now - self._shape[1] > CLUSTER_SECONDS:
            self._shape = (key, now, workers(chunks))
        return self._shape[2]

    def _check_args(self, args, batch):
        if not batch:
            raise ArgumentError("autodiffgen.dask expects at least one dask array, chunked "
                                "by rows; for arrays in memory use autodiffgen.value_and_grad")
        for i in self.calls.argnums:
            if i in batch:
                raise ArgumentError(f"argument {i} is a dask array: autodiffgen.dask "
                                    "differentiates small arguments sent to every worker, "
                                    "not the chunked data")

    def _program(self, args, names, batch, arrays):
        """The Program of this call's signature: made (traced on a sample, checked) the
        first time, and again when what the code read besides its arguments changed."""
        key = _signature(args, batch)
        program = self._programs.get(key)
        if program is None or not still_holds(program.reads):
            flat = Flat(self.fun, names, args, batch, self.calls._argnums, self.has_aux)
            if not flat.argnums:
                raise ArgumentError(f"argnums={self.calls.argnums}: the differentiated "
                                    "arguments hold no arrays or floats")
            gf = FlatGrad(flat, self.has_aux)
            sample = _sample(flat.args(args), flat.batch, arrays, self.timeout)
            reads = what_it_read(gf, sample)  # what the module bakes (draws refused)
            check_decomposes(gf, sample, flat.batch, self.reduce,
                             flat.aux_paths if self.has_aux and self.aux == "reduce" else None)
            program = Program(flat, gf, [module_variant(gf, sample)], reads)
            self._programs[key] = program
            self.traces += 1
        return program

    def _run(self, program, layout, small, chunks, groups, sizes):
        """The Part of the chunks in `groups` (of chunk indices): one task per group, a
        tree reduction on the workers down to at most fan_in parts, the last sum here. A
        task is named after its group's first chunk (faults.py)."""
        # keys not from hashing the values: each call is computed anew (named as faults.py
        # reads them: a task given up names what it cost)
        variants, token = program.variants, uuid.uuid4().hex[:16]
        v, s = variants, small  # in each task: no task of their own to wait for and move
        if len(groups) * (_nbytes(small) + sum(len(x["source"]) for x in variants)) > \
                EMBEDDED_BYTES:  # one key each, shared by every task: sent once to a worker
            v = dask.delayed(variants, name="autodiffgen-sources-" + "-".join(
                variant["key"] for variant in variants))
            s = dask.delayed(small, name=f"autodiffgen-arguments-{token}")
        run, combine = (dask.delayed(_WORKER[name], pure=False) for name in ("run_chunks",
                                                                             "combine"))
        how = (self.reduce, self.aux if self.has_aux else None, self.plan.block)
        parts = [run(g, v, layout, s, how, *(block for i in g for block in chunks[i]),
                     dask_key_name=f"autodiffgen-chunk-{g[0]}-{token}") for g in groups]
        level = 0
        while len(parts) > self.fan_in:
            parts = [combine(*parts[k:k + self.fan_in],
                             dask_key_name=f"autodiffgen-sum-{token}-{level}-{k}")
                     for k in range(0, len(parts), self.fan_in)]
            level += 1
        return _WORKER["combine"](*compute_all(parts, self.timeout, chunks, sizes))

    def _retrace(self, program, flat_args, chunk, why):
        """Trace the chunk's own path and add that code to the variants: traced on the
        chunk's first rows (7, then 4 times more) as soon as that code serves the whole
        chunk here on the client, so a large chunk is traced whole only if it must be."""
        variants, batch = program.variants, program.flat.batch
        if len(variants) >= MAX_VARIANTS:
            raise RetraceError(f"more than {MAX_VARIANTS} variants of the generated code "
                               f"needed; the last chunk said: {why}")
        rows = [np.asarray(r) for r in compute_all(chunk, self.timeout)]
        whole = _with_rows(flat_args, batch, rows)
        n = len(rows[0])
        k = _unlike(flat_args, batch, SAMPLE_ROWS, n)
        while True:
            variant = module_variant(program.gf, _with_rows(flat_args, batch,
                                                            [r[:k] for r in rows]))
            if k == n or _serves(variant, whole):
                break
            k = min(4 * k, n)
        variants.append(variant)
        self.retraces += 1

    def _result(self, flat, total):
        """The user's (value, grads), ((value, aux), grads), grads or (grads, aux)."""
        value, grads, aux = total["value"], total["grads"], total["aux"]
        if self.reduce == "mean":
            rows = sum(n for _, n in total["rows"])
            value, grads = value / rows, _scaled_back(grads, rows)
            aux = None if aux is None else _scaled_back(aux, rows)
        grads = flat.grads(grads)
        if not self.has_aux:
            return (value, grads) if self.with_value else grads
        gathered = total["gathered"]
        aux = flat.aux(aux) if self.aux == "reduce" else \
            [flat.aux(gathered[i]) for i in sorted(gathered)]
        return ((value, aux), grads) if self.with_value else (grads, aux)


def _nbytes(small):
    """The bytes of the small arguments' arrays (a number counts as 8)."""
    return sum(getattr(x, "nbytes", 8) for x in small)


def _with_rows(args, batch, rows):
    full = list(args)
    for i, r in zip(batch, rows):
        full[i] = r
    return full


def _serves(variant, args):
    """Whether the variant's code runs on these arguments (the path it was traced for)."""
    module = _WORKER["module_of"](variant["key"], variant["source"])
    try:
        getattr(module, variant["function"])(*args)
    except Exception as e:  # another path or shape (the module's own classes), or a bug
        if not _WORKER["other_path"](module, e):
            raise
        return False
    return True


def _scaled_back(grads, rows):
    """Each leaf divided by the rows, in its own dtype."""
    def leaf(g):
        if isinstance(g, np.ndarray):  # 0-d too: NumPy would return a scalar
            return np.array(g / rows, dtype=g.dtype)
        if isinstance(g, np.generic):
            return g.dtype.type(g / rows)
        return None if g is None else g / rows  # (None: an empty aux value)
    return map_tree(grads, leaf)


def _aligned(arrays):
    """The dask arguments with one chunk across every axis but the first, and the first
    argument's row chunks."""
    rows = arrays[0].chunks[0]
    out = []
    for a in arrays:
        if a.shape[:1] != arrays[0].shape[:1]:
            raise ArgumentError(f"dask arguments have {arrays[0].shape[0]} and {a.shape[0]} "
                                "rows: every chunked argument needs one row per example")
        want = (rows,) + tuple((n,) for n in a.shape[1:])
        out.append(a if a.chunks == want else a.rechunk(want))
    return out


def _layout(n, batch):
    """Where each argument comes from in a task: ("chunk", k) or ("small", k)."""
    layout, c, s = [], 0, 0
    for i in range(n):
        if i in batch:
            layout.append(("chunk", c))
            c += 1
        else:
            layout.append(("small", s))
            s += 1
    return tuple(layout)


def _signature(args, batch):
    """What decides the program besides the values: the dask arrays' dtypes and trailing
    shapes, the small arguments' structure (their containers' types), shapes, dtypes and
    non-float values (read without rebuilding a container: a class may check its fields)."""
    def leaf(x):
        if hasattr(x, "shape") and hasattr(x, "dtype"):
            return ("array", np.shape(x), np.dtype(x.dtype).str)
        return ("float",) if type(x) is float else (type(x).__name__, repr(x))
    small = [(structure_text(a), tuple(_kinds(a)), tuple(map(leaf, leaves(a))))
             for i, a in enumerate(args) if i not in batch]
    return tuple((args[i].dtype.str, args[i].shape[1:]) for i in batch), tuple(small)


def _kinds(tree):
    """The types of a tree's containers, in order (two classes of one name differ)."""
    if is_container(tree):
        yield type(tree)
        for _, child in items(tree):
            yield from _kinds(child)


def _sample(args, batch, arrays, timeout):
    """The arguments with the first SAMPLE_ROWS rows of each dask array, in memory (or a
    few more: see _unlike)."""
    n = _unlike(args, batch, SAMPLE_ROWS, arrays[0].shape[0])
    if n < 2:
        raise ArgumentError("autodiffgen.dask needs at least 2 rows of data")
    rows = compute_all([a[:n] for a in arrays], timeout)
    return _with_rows(args, batch, [np.asarray(r) for r in rows])


def _unlike(args, batch, n, most):
    """n, or the next row count up to `most` that no small argument's array has as its
    leading size: traced at 7 rows, a (7, k) weight would look like data to the module
    (its batch leaves are every array as long as the data: standalone.py), which then
    serves only that weight's chunks of 7 rows."""
    lengths = {np.shape(a)[0] for k, a in enumerate(args) if k not in batch and np.ndim(a)}
    while n in lengths and n < most:
        n += 1
    return min(n, most)


def from_npy(path, rows=None):
    """A dask array of the .npy file at `path`, read from disk chunk by chunk on the
    workers (never whole: see worker.py's NpyRows), `rows` rows a chunk; by default as many
    as chunking.py allows a worker's memory limit (or MAX_CHUNK_BYTES)."""
    header = np.load(path, mmap_mode="r")
    shape, dtype = header.shape, header.dtype
    del header
    if rows is None:
        row_bytes = dtype.itemsize * int(np.prod(shape[1:]))
        rows = target_rows(shape[0], row_bytes, *workers(())[:2])
    source = _WORKER["NpyRows"](os.path.abspath(path), shape, dtype)
    return da.from_array(source, chunks=(int(rows),) + tuple(shape[1:]), asarray=False,
                         inline_array=True,
                         name=f"npy-{uuid.uuid4().hex[:16]}")


def worker_peaks(client, reset=False):
    """{worker address: its process's peak resident bytes} since it started or the last
    worker_peaks(client, reset=True) (which starts them again); Linux only."""
    return client.run(_WORKER["peak_bytes"], reset)


def scipy_objective(vg, params, *args):
    """(fun, x0, unflatten) for scipy.optimize.minimize(fun, x0, jac=True): `fun(theta)`
    rebuilds params' pytree from the flat float64 vector theta, calls vg(params, *args)
    (params is argument 0) and returns (float value, flat float64 gradient)."""
    if not getattr(vg, "with_value", True):
        raise ArgumentError("scipy_objective needs value_and_grad, not grad")
    template = leaves(params)
    sizes = [np.size(x) for x in template]
    offsets = np.cumsum([0] + sizes)

    def unflatten(theta):
        parts = [np.asarray(theta[a:b], dtype=np.asarray(x).dtype).reshape(np.shape(x))
                 for a, b, x in zip(offsets[:-1], offsets[1:], template)]
        return _rebuilt(params, parts)

    def fun(theta):
        value, grads = vg(unflatten(theta), *args)
        if getattr(vg, "has_aux", False):
            value = value[0]  # (value, aux): the aux values are not SciPy's
        flat = np.concatenate([np.ravel(g).astype(np.float64) for g in leaves(grads)])
        return float(value), flat

    x0 = np.concatenate([np.ravel(x).astype(np.float64) for x in template])
    return fun, x0, unflatten


def _rebuilt(like, parts):
    """like's pytree with its leaves replaced, in order, by parts."""
    it = iter(parts)
    return map_tree(like, lambda _: next(it))

