"""The machinery shared by the table-driven rule tests (rules/test_rules.py,
rules/test_coverage_*.py).

Each of those files keeps its own table, `CASES`: rows of a name, a function in plain
NumPy, a generator per argument and the argnums. This module holds what every table
needs around it: the common argument domains, the `Case` row with its seeded arguments,
and the checks each file runs over its rows (gradients, float32, second derivatives and
ruff over the generated source). Where the files differ (tolerances, which arguments
must stay float32), the difference is a parameter, set by the file that needs it.
"""

import ast
import json
import os
import subprocess
import sys
import zlib
from dataclasses import dataclass, field

import numpy as np
import pytest

import autodiffgen
from autodiffgen.testing import check_grads


# ---- argument domains: each is rng -> value ---------------------------------------------
def normal(*shape):
    return lambda rng: rng.standard_normal(shape)


def uniform(lo, hi, *shape):
    return lambda rng: rng.uniform(lo, hi, shape)


def signed(lo, hi, *shape):
    """|x| in [lo, hi] with a random sign."""
    return lambda rng: rng.uniform(lo, hi, shape) * rng.choice([-1.0, 1.0], shape)


def positive(*shape):
    return uniform(0.5, 2.0, *shape)


def nonzero(*shape):
    """|x| in [0.5, 2] with a random sign: away from kinks, poles and branch points."""
    return signed(0.5, 2.0, *shape)


def f64(gen):
    """The value as an np.float64 scalar rather than a 0-d array: rules see both."""
    return lambda rng: np.float64(gen(rng))


def pyfloat(gen):
    return lambda rng: float(gen(rng))


def ints(high, *shape):
    return lambda rng: rng.integers(0, high, shape)


def distinct(*shape):
    """A shuffled grid of values 0.3 apart: no ties, whose gradient would be ambiguous
    (and finite differences would straddle the tie)."""
    def make(rng):
        n = int(np.prod(shape))
        return rng.permutation(np.arange(n) * 0.3 - 0.15 * n).reshape(shape)
    return make


def const(value):
    return lambda rng: value


def rng_for(name):
    """A generator seeded by the name alone, so a row's values do not change when other
    rows are added, removed or reordered."""
    return np.random.default_rng(zlib.crc32(name.encode()))


# ---- rows and their names ---------------------------------------------------------------
@dataclass
class Case:
    name: str
    f: object
    args: tuple
    argnums: object = 0
    check: dict = field(default_factory=dict)  # extra check_grads options (tolerances)

    def make_args(self, dtype=np.float64):
        rng = rng_for(self.name)
        return tuple(cast(gen(rng), dtype) for gen in self.args)


def cast(value, dtype):
    """float64 arrays and scalars as `dtype`; integers, booleans and Python floats as is."""
    if isinstance(value, (np.ndarray, np.generic)) and value.dtype == np.float64:
        return value.astype(dtype) if isinstance(value, np.ndarray) else dtype(value)
    return value


def by_name(cases):
    """The rows by name. Names are the test ids, so no two rows may share one."""
    names = [c.name for c in cases]
    assert len(set(names)) == len(names), "case names must be unique"
    return dict(zip(names, cases, strict=True))


def sum_sin(z):
    """sum(sin(z)): the functions' last step. Unlike a plain sum, it seeds cotangents that
    differ from element to element, so a wrong transpose or broadcast cannot pass by
    permuting or summing equal ones."""
    return np.sum(np.sin(z))


def shape_id(shape):
    return "x".join(map(str, shape)) if shape else "0d"


def axis_id(axis):
    return "None" if axis is None else str(axis).replace(" ", "")


def per_argument(argnums, grads):
    """(argnums, grads) as matching tuples: with an int argnums, grad returns one array."""
    if isinstance(argnums, int):
        return (argnums,), (grads,)
    return argnums, grads


# ---- the checks -------------------------------------------------------------------------
def check_gradients(c):
    """Generated code vs tape vs finite differences, in float64, with the row's options."""
    args = c.make_args()
    value, _ = check_grads(c.f, *args, argnums=c.argnums, **c.check)
    np.testing.assert_allclose(value, c.f(*args), rtol=1e-12)  # the forward is NumPy's


def check_float32(c, *, arg_types=object, check_source=True, **tolerances):
    """The row with float32 inputs: gradients right to `tolerances` and float32 for each
    argument of `arg_types`. With `check_source`, the generated code must not mention
    float64 nor cast: a rule computing in float64 and casting back at the end would
    pass the dtype check. Rows whose own code promotes to float64 turn it off."""
    args = c.make_args(np.float32)
    _, grads = check_grads(c.f, *args, argnums=c.argnums, **tolerances)
    for n, g in zip(*per_argument(c.argnums, grads), strict=True):
        if isinstance(args[n], arg_types):
            assert np.result_type(g) == np.float32, f"argument {n}: {np.result_type(g)}"
    if check_source:
        source = autodiffgen.emit(c.f, *args, argnums=c.argnums)
        assert "float64" not in source and ".astype(" not in source, source


def check_single_precision(c):
    """The row with float32 and complex64 arguments: each gradient keeps its argument's
    dtype (complex numbers and the FFT)."""
    args = tuple(a.astype(np.complex64) if isinstance(a, np.ndarray) and a.dtype.kind == "c"
                 else cast(a, np.float32) for a in c.make_args())
    _, grads = check_grads(c.f, *args, argnums=c.argnums, rtol=2e-3, atol=1e-3)
    for n, g in zip(*per_argument(c.argnums, grads), strict=True):
        assert np.result_type(g) == args[n].dtype, (n, np.result_type(g))


def differenced_hessian(f, x, eps=1e-5):
    """Central differences of the generated gradient: column k for input element k."""
    grad = autodiffgen.grad(f)
    columns = []
    for k in range(x.size):
        step = np.zeros(x.size)
        step[k] = eps
        step = step.reshape(x.shape)
        columns.append(((grad(x + step) - grad(x - step)) / (2 * eps)).reshape(-1))
    return np.stack(columns, axis=1)


def check_hessian(f, x, symmetry=None):
    """The generated Hessian against differences of the generated gradient, which the
    first-order tests have already checked. `symmetry`: assert_allclose tolerances for
    h == h.T, or None to leave symmetry unchecked."""
    h = autodiffgen.hessian(f)(x).reshape(x.size, x.size)
    np.testing.assert_allclose(h, differenced_hessian(f, x), rtol=1e-5, atol=1e-6)
    if symmetry is not None:
        np.testing.assert_allclose(h, h.T, **symmetry)


# ---- generated source is clean Python ---------------------------------------------------
def run_ruff(folder):
    """ruff's findings (its JSON records) over every file in `folder`, in one process."""
    run = subprocess.run([sys.executable, "-m", "ruff", "check", "--isolated", "--no-cache",
                          "--output-format", "json", str(folder)],
                         capture_output=True, text=True, check=False)
    assert run.returncode in (0, 1), run.stderr  # 1: ruff found problems, listed in stdout
    return json.loads(run.stdout or "[]")


@dataclass
class RuffReport:
    sources: dict  # row name -> generated source
    errors: dict  # row name -> what emit raised
    found: dict  # file name -> ruff's problems in it

    def check(self, i, c):
        """Row `i` emitted, parses, and ruff found nothing in it."""
        if c.name in self.errors:
            raise self.errors[c.name]
        ast.parse(self.sources[c.name])
        problems = self.found.get(f"case_{i}.py", [])
        assert not problems, "\n".join(problems) + "\n\n" + self.sources[c.name]


def emit_and_ruff(cases, folder):
    """Emit every row into `folder` and run ruff once over all of them (one process, not
    hundreds). What emit raises is kept for that row's own test to re-raise, so a broken
    rule fails its rows, not the module's fixture."""
    sources, errors = {}, {}
    for i, c in enumerate(cases):
        try:
            sources[c.name] = autodiffgen.emit(c.f, *c.make_args(), argnums=c.argnums)
        except Exception as e:  # noqa: BLE001  re-raised by that case's own test
            errors[c.name] = e
            continue
        (folder / f"case_{i}.py").write_text(sources[c.name])
    found = {}
    for d in run_ruff(folder):
        found.setdefault(os.path.basename(d["filename"]), []).append(
            f"{d['code']} line {d['location']['row']}: {d['message']}")
    return RuffReport(sources, errors, found)


def ruff_report_fixture(cases, folder_name):
    """A module-scoped fixture giving the RuffReport of `cases`, so that the emitting and
    the one ruff run happen once per test module. Assign it to `ruff_report`."""
    @pytest.fixture(scope="module")
    def ruff_report(tmp_path_factory):
        return emit_and_ruff(cases, tmp_path_factory.mktemp(folder_name))
    return ruff_report
