"""Stage 7, codegen: the graph and its plan printed as Python source.

emitter (emit_module, and the Emitter: one function's statements and names), its parts
guards (GuardFailure checks), constants, arguments (inputs and results), layout
(comments, sections, lines) and fallback (Python floats with `math`, and the NumPy twin);
expressions (one primitive's `ast`), literals (static values, constants, formulas in n),
lines (100-character lines and docstrings), scalar (the `math` forms), text (a statement
from an earlier one of the same layout). Prints the plan; decides nothing. Upstream:
graph, trace (names, locations), rules, plan.
"""
