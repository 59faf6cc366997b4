"""The emitted code of the MLP and the recurrent net, kept as reviewed golden files.

When a change alters the generated code on purpose, regenerate with
AUTODIFFGEN_UPDATE_GOLDEN=1 python -m pytest tests/test_golden.py, read the diff of
tests/golden/ like any other code review, and commit it.
"""

import os
import pathlib

import pytest
from golden_models import mlp_args, mlp_loss, rnn_args, rnn_loss

import autodiffgen as ad
from autodiffgen import passes

GOLDEN = pathlib.Path(__file__).parent / "golden"
UPDATE = os.environ.get("AUTODIFFGEN_UPDATE_GOLDEN") == "1"


@pytest.mark.parametrize("name, fun, make_args", [
    ("mlp", mlp_loss, mlp_args), ("rnn", rnn_loss, rnn_args)])
def test_emitted_code_matches_the_golden_file(name, fun, make_args):
    if not passes.ENABLED:
        pytest.skip("the golden files show the optimized code")
    source = ad.emit(fun, *make_args(), argnums=0)
    path = GOLDEN / f"{name}.py"
    if UPDATE or not path.exists():
        path.write_text(source)
    assert source == path.read_text(), f"{path} changed: review and regenerate (see module doc)"
