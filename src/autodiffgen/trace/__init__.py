"""Stage 1, trace: run the user's function once on Boxes and record a Graph.

The modules, upstream first (each imports only those above it; tests/api/test_layout.py):
  context      the recording current in this thread; the user's lines (user_stack)
  boxes        Box and Handle, the traced values; Python's operators and conversions
  recording    Trace (one recording: nodes, inputs, guards) and bind (a primitive applied)
  dispatch     NumPy's __array_ufunc__ / __array_function__ on Box, and their tables
  reads        where a value read from outside lives (Read) and its checks (Check)
  proxies      the user's objects, classes and modules as the trace sees them
  clones       the user's functions as the trace runs them: globals, closures, defaults
  capture      what the function reads besides its arguments: an input, or a guard
  tracer       trace(): the arguments boxed, the function run, its output checked
Beside them: effects (what it writes outside itself), raising (exceptions as control
flow), arguments and argument_writes (how it is called and what it writes into its
arguments), naming (the user's variable names), count_sources (data-dependent sizes as
the trace sees them), swaps and executed (what runs differently while a trace runs).
Upstream: graph. Downstream: everything else. Nothing is imported here.
"""
