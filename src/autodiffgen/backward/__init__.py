"""Stage 3, derive: new graphs from a traced one with the rules of rules/.

reverse (the backward pass: VJP rules from the output back to the inputs), forward
(JVP rules in creation order), batched (vmap's rules: one example to a batch), and what
they share: cotangent_sums, checkpointing, node_rules (the kinds of rule the backward
loop calls: the primitive's, or one found in the graph: the whole rules of softmax and
sigmoid, the shift-invariance of a max subtracted). Upstream: graph, trace, rules.
"""
