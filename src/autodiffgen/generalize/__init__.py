"""Stage 5, generalize: one graph for every batch size and every data-dependent count.

batch (shape-polymorphic batches: sizes become formulas in n) and counts (the sizes of
`x[mask]` and `np.nonzero`), both built on unify (two traces of one function matched node
by node). A retrace is a plain callable the pipeline passes in. Upstream: graph, trace,
rules, passes.
"""
