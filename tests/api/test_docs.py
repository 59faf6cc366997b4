"""The generated coverage table in the docs is current."""

import pathlib

import pytest

from autodiffgen import coverage

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "coverage.md"


def test_coverage_table_is_current():
    pytest.importorskip("scipy")  # the table lists the scipy.special rules too
    if f"NumPy {coverage.numpy_version()} " not in DOC.read_text():
        pytest.skip("docs/coverage.md was generated with another NumPy version")
    assert DOC.read_text() == coverage.table(), (
        "docs/coverage.md is stale: run `python -m autodiffgen.coverage > docs/coverage.md`")


def test_every_primitive_has_both_rules_or_none():
    for name, prim in coverage.PRIMITIVES.items():
        vjp, jvp = coverage.vjp_status(prim), coverage.jvp_status(prim)
        assert (vjp == "rule") == (jvp in ("rule", "linear", "multilinear")), name
