"""The autodiffgen benchmark suite: eight workloads, each against a hand-written NumPy
forward+backward baseline measured in the same run, and against HIPS autograd, JAX and
PyTorch when they are installed.

    python benchmarks/run.py                  # the full suite (a few minutes)
    python benchmarks/run.py --quick          # a short smoke run (~20 s)
    python benchmarks/run.py --only mlp       # one workload (repeat --only for more)
    python benchmarks/run.py --peers off      # autodiffgen and the baseline only
    python benchmarks/run.py --markdown benchmarks/RESULTS.md   # also write the report

Per workload: every contender's value and gradients are checked against the hand-written
baseline first (a workload whose autodiffgen gradient disagrees is aborted with a message;
a peer that disagrees is dropped from it). Then interleaved rounds, each timing every
contender once (a batch of calls sized to about --sample seconds), in a rotating order;
medians, and ratios to the baseline. Also the first call (autodiffgen: trace + emit +
compile + run; JAX: trace + jit compile + run; others: the plain first call) and the peak
memory that one step allocates, by tracemalloc, for the NumPy-based contenders.

Everything runs on one thread: OMP/OpenBLAS/MKL thread counts are set to 1 before NumPy
is imported, torch.set_num_threads(1), and XLA's CPU thread pool is turned off when the
installed JAX accepts the flag. JAX runs the recurrent workloads (rnn, gru) in the form a
JAX user writes them, the loop as `lax.scan` (Workload.jax_loss), not the unrolled loop.
The peers are optional: `pip install -e '.[bench]'`.
"""

import os
import sys

THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
               "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")
XLA_ONE_THREAD = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"

if __name__ == "__main__":  # before NumPy (and its BLAS) is first imported
    for _var in THREAD_VARS:
        os.environ[_var] = "1"

import argparse
import gc
import importlib.metadata
import importlib.util
import inspect
import platform
import shlex
import statistics
import subprocess
import time
import tracemalloc

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from workloads import WORKLOADS, Workload, allclose  # noqa: F401

BASELINE = "hand-written NumPy"
NOTES = "## Notes"   # --markdown keeps the file's section from this heading on, if it has one
PEERS = ("autograd", "jax", "torch")


# ---- contenders ---------------------------------------------------------------------------
class Contender:
    """One way of computing (value, gradients): `prepare` returns a zero-argument step and
    the time its first call took; `to_numpy` turns a step's result into (value, grads)."""
    name = ""
    numpy_based = True   # tracemalloc sees its allocations
    compiles = False     # its first call traces and compiles: repeat it on fresh functions

    def prepare(self, w, args):
        raise NotImplementedError

    def to_numpy(self, result):
        value, grads = result
        return value, tuple(grads)


def _timed_first(step):
    t0 = time.perf_counter()
    result = step()
    return time.perf_counter() - t0, result


def _calling(fn, args):
    """(step, first-call time, result) for a contender whose step is fn(*args)."""
    step = lambda: fn(*args)
    first, result = _timed_first(step)
    return step, first, result


class HandWritten(Contender):
    """The baseline (w.by_hand), or one of a workload's extra hand-written versions."""
    name = BASELINE

    def __init__(self, name=BASELINE, fn=None):
        self.name, self.fn = name, fn

    def prepare(self, w, args):
        return _calling(self.fn or w.by_hand, args)


class Autodiffgen(Contender):
    name = "autodiffgen"
    compiles = True

    def prepare(self, w, args):
        from autodiffgen import value_and_grad
        self.fn = value_and_grad(w.make_loss(np), argnums=w.argnums)  # new: a cold cache
        return _calling(self.fn, args)


class Autograd(Contender):
    name = "autograd"

    def prepare(self, w, args):
        import autograd
        import autograd.numpy as anp
        return _calling(autograd.value_and_grad(w.make_loss(anp), argnum=w.argnums), args)


class Jax(Contender):
    name = "JAX jit"
    numpy_based = False
    compiles = True

    def prepare(self, w, args):
        import jax
        import jax.numpy as jnp
        loss = w.jax_loss(jnp, jax) if w.jax_loss else w.make_loss(jnp)  # rnn, gru: lax.scan
        fn = jax.jit(jax.value_and_grad(loss, argnums=w.argnums))
        # arrays live on the device beforehand, as a JAX program keeps them (not timed)
        args = tuple(a if w.python_floats else jax.device_put(a) for a in args)
        step = lambda: jax.block_until_ready(fn(*args))
        first, result = _timed_first(step)
        return step, first, result

    def to_numpy(self, result):
        value, grads = result
        return np.asarray(value), tuple(np.asarray(g) for g in grads)


class Torch(Contender):
    name = "PyTorch eager"
    numpy_based = False

    def prepare(self, w, args):
        import torch
        loss, argnums = w.torch_loss, w.argnums
        if w.python_floats:  # the tensors are made in each call, from the floats
            def step():
                ts = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in args]
                value = loss(torch, *ts)
                return value, torch.autograd.grad(value, ts)
        else:  # tensors share the NumPy arrays' memory (not timed)
            ts = [torch.from_numpy(a if a.flags.c_contiguous else a.copy()) for a in args]
            wrt = [ts[i].requires_grad_(True) for i in argnums]

            def step():
                value = loss(torch, *ts)
                return value, torch.autograd.grad(value, wrt)
        first, result = _timed_first(step)
        return step, first, result

    def to_numpy(self, result):
        value, grads = result
        return value.detach().numpy(), tuple(g.detach().numpy() for g in grads)


PEER_CONTENDERS = {"autograd": Autograd, "jax": Jax, "torch": Torch}


def available_peers():
    return [p for p in PEERS if importlib.util.find_spec(p) is not None]


def setup_peers(peers):
    """Single-thread settings, before each peer is imported; returns notes on what was set."""
    notes = []
    if "jax" in peers:
        if xla_flags_accepted(XLA_ONE_THREAD):
            os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " "
                                       + XLA_ONE_THREAD).strip()
            notes.append(f"JAX: XLA_FLAGS={XLA_ONE_THREAD}")
        else:
            notes.append("JAX: the installed XLA rejects the single-thread flags; "
                         "run with its defaults")
        import jax
        jax.config.update("jax_enable_x64", True)  # the float64 workloads stay float64
        notes.append("JAX: jax_enable_x64 on; float32 workloads stay float32")
    if "torch" in peers:
        import torch
        torch.set_num_threads(1)
        try:
            torch.set_num_interop_threads(1)
        except RuntimeError:
            pass
        notes.append(f"PyTorch: torch.set_num_threads(1) -> {torch.get_num_threads()} thread")
    return notes


def xla_flags_accepted(flags):
    """XLA aborts the process on a flag it does not know, so try them in a child first."""
    env = dict(os.environ, XLA_FLAGS=flags)
    code = ("import jax, jax.numpy as jnp; "
            "jax.jit(lambda a: a + 1)(jnp.ones(2)).block_until_ready()")
    try:
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


# ---- checking, timing, memory ---------------------------------------------------------------
def check(w, contender, result, reference):
    """None if the value and every gradient agree with the baseline's; else a message."""
    value, grads = contender.to_numpy(result)
    ref_value, ref_grads = reference
    names = list(inspect.signature(w.by_hand).parameters)
    worst = 0.0
    pairs = [("value", value, ref_value)] + [
        (f"gradient of {names[i]}", g, r) for i, g, r in zip(w.argnums, grads, ref_grads)]
    if len(grads) != len(ref_grads):
        return f"{len(grads)} gradients, expected {len(ref_grads)}"
    for label, got, want in pairs:
        got64, want64 = np.asarray(got, np.float64), np.asarray(want, np.float64)
        if got64.shape != want64.shape:
            return f"{label}: shape {got64.shape}, expected {want64.shape}"
        if not allclose(got, want, w.rtol):
            scale = float(np.max(np.abs(want64))) or 1.0
            err = float(np.max(np.abs(got64 - want64))) / scale
            return (f"{label} disagrees with the hand-written baseline: max |difference| "
                    f"= {err:.2e} of its largest entry (tolerance {w.rtol:g})")
        if want64.size:
            scale = float(np.max(np.abs(want64))) or 1.0
            worst = max(worst, float(np.max(np.abs(got64 - want64))) / scale)
    contender.max_error = worst
    return None


def calibrate(step, sample):
    """Calls per timed sample, so that a sample takes about `sample` seconds."""
    t0 = time.perf_counter()
    step()
    step()
    once = (time.perf_counter() - t0) / 2
    return max(1, int(sample / max(once, 1e-9)))


def measure(steps, rounds, sample):
    """Interleaved rounds: each round times every contender once (a batch of `number`
    calls), starting from a different contender each round. Medians per call."""
    numbers = {name: calibrate(step, sample) for name, step in steps.items()}
    times = {name: [] for name in steps}
    order = list(steps)
    for r in range(rounds):
        for name in order[r % len(order):] + order[:r % len(order)]:
            step, number = steps[name], numbers[name]
            t0 = time.perf_counter()
            for _ in range(number):
                step()
            times[name].append((time.perf_counter() - t0) / number)
    return {name: statistics.median(t) for name, t in times.items()}, numbers


def peak_memory(step):
    """Bytes allocated at the peak of one step (results included), as tracemalloc sees
    them: NumPy reports its array buffers to it."""
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        start = tracemalloc.get_traced_memory()[0]
        result = step()
        peak = tracemalloc.get_traced_memory()[1] - start
        del result
    finally:
        tracemalloc.stop()
    return peak


# ---- one workload -------------------------------------------------------------------------
def run_workload(w, contenders, rounds, sample, log, first_repeats=1, size="full"):
    """Check, time and measure one workload; a dict of what was found. A contender that
    compiles has its first call measured `first_repeats` times, each on a fresh function
    (the median is kept); the others' first call is their first call in this process."""
    log(f"\n== {w.name}: {w.title}")
    args = w.make_args(np.random.default_rng(0), **w.sizes[size])
    out = {"name": w.name, "title": w.title, "first": {}, "memory": {}, "median": {},
           "dropped": {}, "aborted": None, "errors": {}}
    steps, kept, reference = {}, [], None   # the baseline comes first: the reference
    extras = [HandWritten(name, fn) for name, fn in w.extras.items()]
    for c in contenders[:1] + extras + contenders[1:]:
        try:
            firsts = []
            for _ in range(first_repeats if c.compiles else 1):
                step, first, result = c.prepare(w, args)
                firsts.append(first)
            first = statistics.median(firsts)
        except Exception as e:  # noqa: BLE001 -- a peer that cannot run this workload
            msg = f"{type(e).__name__}: {e}".splitlines()[0][:200]
            if c.name == "autodiffgen":
                out["aborted"] = f"autodiffgen failed: {msg}"
                log(f"   ABORTED: {out['aborted']}")
                return out
            out["dropped"][c.name] = f"failed: {msg}"
            log(f"   {c.name}: dropped, {msg}")
            continue
        if c.name == BASELINE:
            reference = c.to_numpy(result)
            c.max_error = 0.0
        else:
            problem = check(w, c, result, reference)
            if problem:
                if c.name == "autodiffgen":
                    out["aborted"] = f"autodiffgen's {problem}"
                    log(f"   ABORTED: {out['aborted']}")
                    return out
                out["dropped"][c.name] = problem
                log(f"   {c.name}: dropped, {problem}")
                continue
        out["first"][c.name] = first
        out["errors"][c.name] = c.max_error
        steps[c.name] = step
        kept.append(c)
    log("   gradients agree with the baseline: " + ", ".join(
        f"{c.name} ({c.max_error:.1e})" for c in kept if c.name != BASELINE))
    out["median"], out["numbers"] = measure(steps, rounds, sample)
    for c in kept:
        if c.numpy_based:
            out["memory"][c.name] = peak_memory(steps[c.name])
    base = out["median"][BASELINE]
    log(f"   {'contender':<28}{'median':>12}{'ratio':>9}{'first call':>13}{'peak mem':>12}")
    for c in kept:
        m = out["median"][c.name]
        mem = out["memory"].get(c.name)
        log(f"   {c.name:<28}{fmt_time(m):>12}{m / base:>8.2f}x{fmt_time(out['first'][c.name]):>13}"
            f"{fmt_bytes(mem) if mem is not None else 'n/a':>12}")
    return out


# ---- formatting ---------------------------------------------------------------------------
def fmt_time(t):
    if t < 1e-5:
        return f"{t * 1e6:.2f} us"
    if t < 1e-3:
        return f"{t * 1e6:.1f} us"
    if t < 1.0:
        return f"{t * 1e3:.2f} ms"
    return f"{t:.2f} s"


def fmt_bytes(n):
    if n < 1 << 20:
        return f"{n / 1024:.1f} KiB"
    return f"{n / (1 << 20):.1f} MiB"


def versions(peers):
    v = {"python": f"{platform.python_version()} ({sys.executable})", "numpy": np.__version__}
    for pkg in ("autodiffgen", "astor", "autograd", "jax", "jaxlib", "torch"):
        if pkg in ("autodiffgen", "astor") or pkg in peers or (pkg == "jaxlib" and "jax" in peers):
            try:
                v[pkg] = importlib.metadata.version(pkg)
            except importlib.metadata.PackageNotFoundError:
                v[pkg] = "?"
    v["autodiffgen"] += source_revision()
    try:
        blas = np.__config__.CONFIG["Build Dependencies"]["blas"]
        v["NumPy's BLAS"] = f"{blas['name']} {blas['version']}"
    except (AttributeError, KeyError, TypeError):
        pass
    return v


def source_revision():
    """' (commit abc1234)' of the autodiffgen being measured, if it runs from a git checkout,
    with a warning when its src/ has uncommitted changes."""
    import autodiffgen
    src = os.path.dirname(os.path.dirname(os.path.abspath(autodiffgen.__file__)))
    try:
        head = subprocess.run(["git", "-C", src, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10, check=True)
        dirty = subprocess.run(["git", "-C", src, "status", "--porcelain", "--", "."],
                               capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return ""
    return f" (commit {head.stdout.strip()}" + (", with uncommitted changes in src/)"
                                                 if dirty.stdout.strip() else ")")


def machine():
    # without the thread settings: nproc reports OMP_NUM_THREADS when it is set
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARS + ("OMP_THREAD_LIMIT",)}

    def sh(cmd):
        try:
            return subprocess.run(cmd, shell=True, capture_output=True, text=True, env=env,
                                  timeout=10, check=False).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return "?"
    return {"nproc": sh("nproc"), "lscpu": sh("lscpu | head"), "platform": platform.platform()}


def markdown(results, names, settings, peers_missing, command):
    lines = ["# Benchmark results", "",
             (f"Written by `{command}`, {time.strftime('%Y-%m-%d')}. Regenerate with the same "
              "command (it keeps the hand-written Notes at the end); the method is in the "
              "module docstring of `benchmarks/run.py`."), ""]
    m = settings["machine"]
    lines += ["## Machine", "", f"- `nproc`: {m['nproc']}", f"- platform: {m['platform']}",
              "- `lscpu | head`:", "", "```", m["lscpu"], "```", ""]
    lines += ["## Versions", ""] + [f"- {k}: {v}" for k, v in settings["versions"].items()]
    lines += ["", "## Settings", "",
              f"- one thread: {', '.join(f'{v}=1' for v in THREAD_VARS)} before NumPy's import"]
    lines += [f"- {n}" for n in settings["notes"]]
    lines.append(f"- {settings['rounds']} interleaved rounds per workload; each round times "
                 f"every contender once, as a batch of calls lasting about {settings['sample']} "
                 "s; the tables show the median per call")
    if peers_missing:
        lines.append(f"- not installed, so not measured: {', '.join(peers_missing)}")
    lines += [("- JAX's arrays are put on the device before timing; PyTorch's tensors share "
               "the NumPy arrays; for the scalar workload both build their inputs from the "
               "Python floats in every call"), ""]
    done = [r for r in results if not r["aborted"]]

    def table(title, cell, intro="", columns=names):
        out = [f"## {title}", ""] + ([intro, ""] if intro else [])
        out += ["| workload | " + " | ".join(columns) + " |",
                "|---|" + "---:|" * len(columns)]
        for r in done:
            out.append(f"| {r['name']} | " + " | ".join(cell(r, n) for n in columns) + " |")
        return out + [""]

    def ratio(r, n):
        if n not in r["median"]:
            return "—"
        return f"{r['median'][n] / r['median'][BASELINE]:.2f}x"

    lines += table("Time per step: ratio to the hand-written baseline", ratio,
                   "Lower is better; 1.00x is the hand-written NumPy forward+backward.")
    lines += table("Time per step: medians",
                   lambda r, n: fmt_time(r["median"][n]) if n in r["median"] else "—")
    lines += table("First call", lambda r, n: fmt_time(r["first"][n]) if n in r["first"] else "—",
                   "autodiffgen: trace + emit + compile + one run; JAX: trace + jit compile + "
                   f"one run (both: the median over {settings['first_repeats']} fresh "
                   "functions); the others: their first call in the process.")
    lines += table("Peak memory of one step (tracemalloc)",
                   lambda r, n: fmt_bytes(r["memory"][n]) if n in r["memory"] else "—",
                   "Bytes allocated at the peak of one step, results included; NumPy-based "
                   "contenders only.",
                   columns=[n for n in names if n in (BASELINE, "autodiffgen", "autograd")])
    lines += ["## Workloads", ""]
    for r in results:
        errs = ", ".join(f"{n} {e:.1e}" for n, e in r["errors"].items() if n != BASELINE)
        status = f"**aborted**: {r['aborted']}" if r["aborted"] else \
            f"gradients agree (max difference / largest entry: {errs})"
        lines.append(f"- **{r['name']}**: {r['title']}. {status}.")
        for n in r["median"]:
            if n not in names:  # a workload's extra hand-written version
                mem = f", peak memory {fmt_bytes(r['memory'][n])}" if n in r["memory"] else ""
                lines.append(f"  - {n}: {fmt_time(r['median'][n])} per step, "
                             f"{r['median'][n] / r['median'][BASELINE]:.2f}x the baseline, "
                             f"first call {fmt_time(r['first'][n])}{mem}")
        for n, why in r["dropped"].items():
            lines.append(f"  - {n} dropped: {why}")
    return "\n".join(lines) + "\n"


# ---- main ---------------------------------------------------------------------------------
def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="a short smoke run: 3 rounds of short samples")
    p.add_argument("--only", action="append", metavar="NAME",
                   choices=[w.name for w in WORKLOADS],
                   help="run this workload only (repeatable): " + ", ".join(
                       w.name for w in WORKLOADS))
    p.add_argument("--peers", choices=("auto", "on", "off"), default="auto",
                   help="compare with autograd, JAX and PyTorch: auto (those installed, the "
                        "default), on (all three, an error if one is missing), off")
    p.add_argument("--rounds", type=int, help="interleaved rounds (default 21, quick 3)")
    p.add_argument("--sample", type=float,
                   help="seconds per timed sample (default 0.15, quick 0.01)")
    p.add_argument("--first-repeats", type=int, metavar="N",
                   help="first calls of autodiffgen and JAX measured on N fresh functions, "
                        "median kept (default 3, quick 1)")
    p.add_argument("--markdown", metavar="PATH", help="also write the report as Markdown")
    return p.parse_args(argv)


def main(argv=None):
    opts = parse(argv)
    rounds = opts.rounds or (3 if opts.quick else 21)
    sample = opts.sample or (0.01 if opts.quick else 0.15)
    installed = available_peers()
    if opts.peers == "off":
        peers = []
    elif opts.peers == "on":
        missing = [p for p in PEERS if p not in installed]
        if missing:
            sys.exit(f"--peers on: not installed: {', '.join(missing)} "
                     "(pip install -e '.[bench]')")
        peers = list(PEERS)
    else:
        peers = installed
    log = print
    t_start = time.perf_counter()
    notes = setup_peers(peers)
    contenders = [HandWritten(), Autodiffgen()] + [PEER_CONTENDERS[p]() for p in peers]
    names = [c.name for c in contenders]
    log(f"autodiffgen benchmarks: {rounds} rounds x ~{sample} s samples; one thread; "
        f"contenders: {', '.join(names)}")
    for n in notes:
        log(f"  {n}")
    if opts.peers == "auto" and len(peers) < len(PEERS):
        log(f"  not installed: {', '.join(p for p in PEERS if p not in peers)}")
    chosen = [w for w in WORKLOADS if not opts.only or w.name in opts.only]
    first_repeats = opts.first_repeats or (1 if opts.quick else 3)
    results = [run_workload(w, contenders, rounds, sample, log, first_repeats)
               for w in chosen]

    done = [r for r in results if not r["aborted"]]
    log("\nSummary: time per step, ratio to the hand-written baseline (lower is better)")
    log(f"   {'workload':<11}" + "".join(f"{n:>20}" for n in names))
    for r in done:
        log(f"   {r['name']:<11}" + "".join(
            f"{r['median'][n] / r['median'][BASELINE]:>19.2f}x" if n in r["median"]
            else f"{'-':>20}" for n in names))
    aborted = [r for r in results if r["aborted"]]
    for r in aborted:
        log(f"ABORTED {r['name']}: {r['aborted']}")
    log(f"\ntotal {time.perf_counter() - t_start:.1f} s")
    if opts.markdown:
        command = "python benchmarks/run.py" + "".join(
            " " + shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))
        settings = {"machine": machine(), "versions": versions(peers), "notes": notes,
                    "rounds": rounds, "sample": sample, "first_repeats": first_repeats}
        text = markdown(results, names, settings,
                        [p for p in PEERS if p not in peers] if opts.peers != "off" else [],
                        command)
        with open(opts.markdown, "a+") as fh:  # keep a hand-written notes section
            fh.seek(0)
            old = fh.read()
            if NOTES in old:
                text += "\n" + old[old.index(NOTES):]
            fh.seek(0)
            fh.truncate()
            fh.write(text)
        log(f"wrote {opts.markdown}")
    return 1 if aborted else 0


if __name__ == "__main__":
    sys.exit(main())
