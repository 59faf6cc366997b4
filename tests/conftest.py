"""Puts tests/ on sys.path, so that the shared helpers here (graph_helpers, golden_models,
tables, custom_prims) import the same way from every subject folder."""

import importlib
import pathlib
import sys

import pytest

HERE = str(pathlib.Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)


@pytest.fixture
def written_out(monkeypatch):
    """The user's loops written out step by step (AUTODIFFGEN_LOOPS=updates): for tests of
    the passes and plans on written-out steps, which loops that cannot be kept still get."""
    monkeypatch.setattr(importlib.import_module("autodiffgen.loops.roll"), "USER_LOOPS", False)
