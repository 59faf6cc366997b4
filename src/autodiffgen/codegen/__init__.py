"""Stage 7, codegen: the graph and its plan printed as Python source.

emitter (statements, names, comments, sections), expressions (one primitive's `ast`),
literals (static values, constants, formulas in n), lines (100-character lines and
docstrings), scalar (Python-float twins with `math`), text (a statement from an earlier
one of the same layout). Prints; decides nothing. Upstream: graph, trace (names, locations), plan.
"""
