"""The documentation site cannot go stale: every ```python block of every page runs,
the page's blocks in order in one fresh interpreter (a tutorial builds on its earlier
blocks), except a block whose first line says `# not run: <why>`; and the site builds
with MkDocs with warnings as errors, the generated gallery included."""

import html
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
NOT_RUN = "# not run:"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
# The pages run with the user's defaults whatever the test run's settings (passes off, say),
# so a run with settings would repeat the default run's work: CI's second run skips them.
pytestmark = pytest.mark.skipif(
    any(k.startswith("AUTODIFFGEN_") for k in os.environ),
    reason="the docs run with the default settings; the run without AUTODIFFGEN_* runs them")
PAGES = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")
               if "_build" not in p.parts and BLOCK.search(p.read_text()))


def page_script(text):
    """The page's blocks as one script whose line numbers are the page's: prose lines are
    blank, so an error points at the Markdown line."""
    lines = [""] * (text.count("\n") + 1)
    for match in BLOCK.finditer(text):
        if match.group(1).startswith(NOT_RUN):
            continue
        first = text[:match.start()].count("\n") + 1
        for offset, line in enumerate(match.group(1).splitlines()):
            lines[first + offset] = line
    return "\n".join(lines) + "\n"


def _clean_environment():
    """The user's view: no setting of the test run (passes off, say) leaks in."""
    return {k: v for k, v in os.environ.items() if not k.startswith("AUTODIFFGEN_")}


def test_the_docs_have_pages_with_code_and_few_are_not_run():
    assert {"index.md", "tutorial/first-gradient.md", "tutorial/digits.md",
            "tutorial/rnn.md", "jax.md", "autograd.md"} <= set(PAGES)
    not_run = [(page, text[:m.start()].count("\n") + 2) for page in PAGES
               for text in [(DOCS / page).read_text()] for m in BLOCK.finditer(text)
               if m.group(1).startswith(NOT_RUN)]
    assert len(not_run) <= 2, not_run


def test_a_page_script_keeps_the_page_line_numbers():
    text = "# t\n\nprose\n```python\nx = 1\n```\nmore\n```python\nraise ValueError\n```\n"
    script = page_script(text).splitlines()
    assert script[4] == "x = 1" and script[8] == "raise ValueError"
    assert script[2] == ""


@pytest.mark.parametrize("page", PAGES)
def test_a_docs_page_runs_as_written(page, tmp_path):
    text = (DOCS / page).read_text()
    if "sklearn" in text:
        pytest.importorskip("sklearn")
    path = tmp_path / (page.replace("/", "_").removesuffix(".md") + ".py")
    path.write_text(page_script(text))
    run = subprocess.run([sys.executable, str(path)], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300, check=False, env=_clean_environment())
    assert run.returncode == 0, (f"docs/{page} fails when run as written (line numbers "
                                 f"are the page's):\n{run.stderr[-3000:]}")


def _text(page):
    """A built page's text: Pygments splits code into spans."""
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))


def test_the_site_builds_with_warnings_as_errors(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
                          "-d", str(tmp_path / "site")], cwd=ROOT, capture_output=True,
                         text=True, timeout=600, check=False,
                         env={**_clean_environment(), "NO_MKDOCS_2_WARNING": "1"})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    gallery = _text(tmp_path / "site" / "gallery" / "index.html")
    assert "gru_value_and_grad" in gallery and "for t in range(" in gallery
    assert "<!-- generated:" not in (tmp_path / "site" / "gallery" / "index.html").read_text()
    reference = _text(tmp_path / "site" / "reference" / "index.html")
    assert "value_and_grad" in reference and "argnums" in reference
