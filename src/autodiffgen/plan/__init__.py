"""Stage 6, plan: how the final graph runs, decided before anything is printed.

planner (`plan(graph)` -> a Plan keyed by node, what the emitter reads: the order, the
transposes written where read, the buffers, the in-place writes and the `del`s), schedule
(the order: rematerialized, sunk, freeing_first are in memory and schedule), memory
(buffer reuse, results written into an operand that dies there, one name per chain) and
slots (parts of a join written into their slot of one buffer). The emitter prints the
graph and the plan and changes neither. Upstream: graph, rules, passes.
"""
