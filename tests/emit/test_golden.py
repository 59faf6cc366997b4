"""The emitted code of seven programs, kept as reviewed golden files in tests/golden/: the
MLP and the recurrent net (value and gradient), the seed example (examples/seed_function.py),
a Hessian (the VJP of the generated gradient that ad.hessian runs), a JVP, an LSTM cell
and a whole compiled training step (forward, backward and Adam's update).

To regenerate, after a change that alters the generated code on purpose:

    AUTODIFFGEN_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/emit/test_golden.py
    git diff tests/golden/

and read the diff like any other code review (would a careful person have written it so?)
before committing it. The files show the optimized code: the test is skipped when
AUTODIFFGEN_PASSES=0. A missing file is written, and the test then passes.
"""

import importlib.util
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from golden_models import (
    hessian_args,
    hessian_fn,
    jvp_args,
    jvp_fn,
    lstm_args,
    lstm_cell,
    mlp_args,
    mlp_loss,
    rnn_args,
    rnn_loss,
    step_args,
    step_loss,
)

import autodiffgen as ad
from autodiffgen import passes

GOLDEN = pathlib.Path(__file__).parents[1] / "golden"
EXAMPLES = pathlib.Path(__file__).parents[2] / "examples"
UPDATE = os.environ.get("AUTODIFFGEN_UPDATE_GOLDEN") == "1"


def _seed_example():
    spec = importlib.util.spec_from_file_location("seed_function",
                                                  EXAMPLES / "seed_function.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.f


def mlp_source():
    return ad.emit(mlp_loss, *mlp_args(), argnums=0)


def rnn_source():
    return ad.emit(rnn_loss, *rnn_args(), argnums=0)


def seed_source():
    return ad.emit(_seed_example(), 2.0, 5.0)


def hessian_source():
    """The code ad.hessian runs: the reverse-mode Jacobian (a VJP) of the generated grad."""
    (x,) = hessian_args()
    ad.hessian(hessian_fn)(x)
    return hessian_fn.__autodiffgen_grad_0__.__autodiffgen_vjp_0__.source(x)


def jvp_source():
    primals, tangents = jvp_args()
    ad.jvp(jvp_fn, primals, tangents)
    return jvp_fn.__autodiffgen_jvp__.source(*primals, *tangents)


def lstm_source():
    return ad.emit(lstm_cell, *lstm_args(), argnums=0)


def train_step_source():
    """A whole compiled training step: forward, backward and Adam's update."""
    from autodiffgen.optim import Adam, compile_step

    params, x, y = step_args()
    step = compile_step(step_loss, Adam(lr=3e-3))
    return step.source(params, step.init(params), x, y)


SOURCES = {"mlp": mlp_source, "rnn": rnn_source, "seed_function": seed_source,
           "hessian": hessian_source, "jvp": jvp_source, "lstm_cell": lstm_source,
           "train_step": train_step_source}


@pytest.mark.parametrize("name", SOURCES)
def test_emitted_code_matches_the_golden_file(name):
    if not passes.ENABLED:
        pytest.skip("the golden files show the optimized code")
    source = SOURCES[name]()
    path = GOLDEN / f"{name}.py"
    if UPDATE or not path.exists():
        path.write_text(source)
    assert source == path.read_text(), f"{path} changed: review and regenerate (see module doc)"


def test_golden_files_pass_ruff_with_lines_of_at_most_100_characters():
    """E501 at 100 on top of ruff's default rules (the repository's config excludes the
    folder: these files are generated)."""
    files = sorted(str(p) for p in GOLDEN.glob("*.py"))
    assert len(files) == len(SOURCES)
    lint = subprocess.run([sys.executable, "-m", "ruff", "check", "--isolated", "--no-cache",
                           "--extend-select", "E501", "--line-length", "100", *files],
                          capture_output=True, text=True, check=False)
    assert lint.returncode == 0, lint.stdout


def test_the_golden_seed_and_jvp_compute_what_they_say():
    """The calls whose code the seed and JVP golden files show give the numbers by hand."""
    value, (dx1, dx2) = ad.value_and_grad(_seed_example().fun, argnums=(0, 1))(2.0, 5.0)
    np.testing.assert_allclose([value, dx1, dx2], [np.log(2.0) + 10.0 - np.sin(5.0),
                                                   1 / 2.0 + 5.0, 2.0 - np.cos(5.0)])
    primals, tangents = jvp_args()
    W, x = primals
    dW, dx = tangents
    _, t = ad.jvp(jvp_fn, primals, tangents)
    z = W @ x
    np.testing.assert_allclose(t, (dW @ x + W @ dx) / (1 + np.exp(-z)), rtol=1e-12)
