"""README.md cannot go stale (issue 15): every ```python block runs as written, alone, in
a fresh interpreter in an empty folder (a block defines the data it needs). The docs'
pages are run by test_docs_site.py; README stays short (issue 28)."""

import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
NOT_RUN = "# not run:"


def _blocks():
    """(line number, code) of every ```python block."""
    return [(README[:m.start()].count("\n") + 2, m.group(1))
            for m in re.finditer(r"^```python\n(.*?)^```", README, re.DOTALL | re.MULTILINE)]


BLOCKS = _blocks()


def test_the_readme_is_short_and_its_example_runs():
    assert README.count("\n") < 250, "README.md: under 250 lines; the docs hold the rest"
    assert BLOCKS and not any(code.startswith(NOT_RUN) for _, code in BLOCKS)


@pytest.mark.parametrize(("line", "code"), BLOCKS, ids=[f"line{n}" for n, _ in BLOCKS])
def test_a_readme_block_runs_as_written(line, code, tmp_path):
    if code.startswith(NOT_RUN):
        pytest.skip(f"README.md:{line} {code.splitlines()[0]}")
    path = tmp_path / f"readme_line{line}.py"
    path.write_text(code)
    run = subprocess.run([sys.executable, str(path)], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120, check=False)
    assert run.returncode == 0, f"README.md:{line} fails when pasted:\n{run.stderr[-3000:]}"
