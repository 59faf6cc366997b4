"""Stage 6, plan: how the final graph runs, decided before anything is printed.

schedule (the order), memory (rematerialization, buffer reuse, results written into an
operand that dies there, the `del`s) and slots (parts of a join written into their slot of
one buffer). The emitter prints the graph and the plan and changes neither. Upstream:
graph, rules, passes.
"""
