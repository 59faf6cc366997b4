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
