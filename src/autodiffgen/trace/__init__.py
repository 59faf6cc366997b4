"""Stage 1, trace: run the user's function once on Boxes and record a Graph.

tracer (Boxes, the NumPy dispatch protocols, the recording), capture (what the function
reads besides its arguments: inputs read again, or guards), effects (what it writes
outside itself), raising (exceptions as control flow), arguments and argument_writes (how
it is called and what it writes into its arguments), naming (the user's variable names),
count_sources (data-dependent sizes as the trace sees them), swaps and record (what runs
differently while a trace runs). Upstream: graph. Downstream: everything else.
"""
