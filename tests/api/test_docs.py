"""The generated coverage table in the docs is current."""

import pathlib

import pytest

from autodiffgen import coverage_doc

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "coverage.md"


def test_coverage_table_is_current():
    pytest.importorskip("scipy")  # the table lists the scipy.special rules too
    if f"NumPy {coverage_doc.numpy_version()} " not in DOC.read_text():
        pytest.skip("docs/coverage.md was generated with another NumPy version")
    assert DOC.read_text() == coverage_doc.table(), (
        "docs/coverage.md is stale: run `python -m autodiffgen.coverage_doc > docs/coverage.md`")


def test_every_primitive_has_both_rules_or_none():
    for name, prim in coverage_doc.PRIMITIVES.items():
        vjp, jvp = coverage_doc.vjp_status(prim), coverage_doc.jvp_status(prim)
        assert (vjp == "rule") == (jvp in ("rule", "linear", "multilinear")), name


# ---- the section beside Autograd's list (coverage_autograd.py) ---------------------------
def _autograd_rows():
    lines, counts = coverage_doc.autograd_table()
    rows = {}
    for line in lines:
        cells = [c.strip().strip("`") for c in line.strip("|").split("|")]
        if line.startswith("| `"):
            rows[cells[0]] = cells
    return rows, counts


def test_autograd_names_are_found_under_our_names():
    """Aliases resolve to the object's own entry: np.abs is the ufunc np.absolute here."""
    rows, _ = _autograd_rows()
    assert rows["np.abs"][3:] == ["np.absolute", "yes", "yes"]
    assert rows["np.acos"][3] == "np.arccos"
    assert rows["np.ndarray.__getitem__"][3:] == ["getitem", "yes", "yes"]
    assert rows["np.linalg.eigh"][1:3] == ["yes", "no"]  # Autograd: a VJP, no JVP
    assert rows["np.make_diagonal"][3:] == ["not in NumPy/SciPy", "no", "no"]


def test_autograd_section_reports_what_is_registered():
    """A function gains a "yes" by being in the registries' rows, nothing else."""
    from autodiffgen.coverage_autograd import section
    rows = [r for r in coverage_doc.entry_rows() if r[0] not in ("np.sin", "np.fft.fft")]
    getitem = ("rule", "rule")
    without = {line.split("|")[1].strip(): line for line in section(rows, getitem,
                                                                     coverage_doc._name)[0]
               if line.startswith("| `")}
    assert without["`np.sin`"].endswith("| no entry | no | no |")
    added = rows + [("np.fft.fft", "function (fft)", "", "rule (recorded as primitives)",
                     "linear")]
    lines, counts = section(added, getitem, coverage_doc._name)
    assert any(line.startswith("| `np.fft.fft` |") and line.endswith("| yes | yes |")
               for line in lines)
    _, before = section(rows, getitem, coverage_doc._name)
    assert counts["vjp_ours"] == before["vjp_ours"] + 1


def test_autograd_counts_match_the_table():
    rows, counts = _autograd_rows()
    assert counts["n"] == len(rows) >= 200
    assert counts["vjp_ours"] == sum(cells[4] == "yes" for cells in rows.values())
    assert counts["jvp"] == sum(cells[2] == "yes" for cells in rows.values())
