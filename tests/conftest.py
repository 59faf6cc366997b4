"""Puts tests/ on sys.path, so that the shared helpers here (graph_helpers, golden_models,
tables, custom_prims) import the same way from every subject folder."""

import pathlib
import sys

HERE = str(pathlib.Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
