"""README.md cannot go stale (issue 15): every ```python block runs as written, alone, in
a fresh interpreter in an empty folder (a block defines the data it needs), except a block
whose first line says `# not run: <why>` (a Dask cluster, say), which is counted and
reported as skipped; the generated-code sample is the code the seed example generates."""

import importlib.util
import pathlib
import re
import subprocess
import sys

import pytest

import autodiffgen as ad
from autodiffgen import coverage_doc, passes

ROOT = pathlib.Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
NOT_RUN = "# not run:"


def _blocks():
    """(line number, code) of every ```python block."""
    return [(README[:m.start()].count("\n") + 2, m.group(1))
            for m in re.finditer(r"^```python\n(.*?)^```", README, re.DOTALL | re.MULTILINE)]


BLOCKS = _blocks()


def test_the_readme_has_python_blocks_and_few_are_not_run():
    not_run = [line for line, code in BLOCKS if code.startswith(NOT_RUN)]
    assert len(BLOCKS) >= 10
    assert len(not_run) == 1, f"README blocks marked not run, at lines {not_run}"


@pytest.mark.parametrize(("line", "code"), BLOCKS, ids=[f"line{n}" for n, _ in BLOCKS])
def test_a_readme_block_runs_as_written(line, code, tmp_path):
    if code.startswith(NOT_RUN):
        pytest.skip(f"README.md:{line} {code.splitlines()[0]}")
    path = tmp_path / f"readme_line{line}.py"
    path.write_text(code)
    run = subprocess.run([sys.executable, str(path)], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120, check=False)
    assert run.returncode == 0, f"README.md:{line} fails when pasted:\n{run.stderr[-3000:]}"


def _seed_example():
    spec = importlib.util.spec_from_file_location("seed_function",
                                                  ROOT / "examples" / "seed_function.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.f


def test_the_generated_code_sample_is_what_the_seed_example_generates():
    if not passes.ENABLED:
        pytest.skip("the README shows the optimized code")
    section = README.index("### Generated code")
    sample = next(code for line, code in BLOCKS
                  if README[:section].count("\n") < line)
    generated = ad.emit(_seed_example(), 2.0, 5.0)
    assert sample == generated, ("README's generated-code sample is stale: paste the "
                                 "output of `python examples/seed_function.py`")


def test_the_supported_operations_list_is_made_from_the_registry():
    pytest.importorskip("scipy")  # the list names the SciPy rules too
    begin = README.index(coverage_doc.README_BEGIN)
    end = README.index(coverage_doc.README_END) + len(coverage_doc.README_END) + 1
    shown = README[begin:end]
    if f"(NumPy {coverage_doc.numpy_version()})" not in shown.splitlines()[0]:
        pytest.skip("README's list was made with another NumPy version")
    assert shown == coverage_doc.readme_summary(), (
        "README's supported operations are stale: replace the generated list with the "
        "output of `python -m autodiffgen.coverage_doc --readme`")
