"""CI runs exactly the README's test command, and it installs the extras the tests need."""

import os
import pathlib
import shutil

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _readme_test_command():
    lines = [line for line in (ROOT / "README.md").read_text().splitlines()
             if "pytest -q" in line and "AUTODIFFGEN_PASSES=0" in line]
    assert len(lines) == 1, lines
    return lines[0].strip()


def test_ci_runs_the_readme_test_command():
    command = _readme_test_command()
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert command in ci


def test_the_test_command_installs_what_the_tests_drive():
    """The dask extra (a real cluster), docs (the site's build), examples (the main job)
    and the system programs (graphviz, Chromium) the picture and explorer tests use."""
    command = _readme_test_command()
    assert "pip install -q -e '.[test,dask,docs,examples]'" in command
    assert command.startswith("bash .ci/system-packages && ")


@pytest.mark.skipif(not os.environ.get("CI"), reason="on a developer's machine they may skip")
def test_on_ci_the_real_programs_are_there():
    """So the SVG, explorer and site tests run on CI instead of skipping."""
    import mkdocs  # noqa: F401
    import selenium  # noqa: F401
    import sklearn  # noqa: F401
    for program in ("dot", "chromium", "chromedriver"):
        assert shutil.which(program), f"CI must install {program} (.ci/system-packages)"
