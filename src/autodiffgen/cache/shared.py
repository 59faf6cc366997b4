"""Batch-polymorphic sharing: one generated function for every batch size it serves.

A function generalized over the batch size (generalize_batch.py) is kept here by its poly key (the
signature key with each batch leaf's leading size left out). A call whose own signature
missed looks here before tracing: when a function traced at another batch size serves this
call's size, the call gets that function under its own key, without a trace.
"""

from ..generalize_batch import batch_of, poly_key


class Shared:
    """The polymorphic functions of one differentiated function, by poly key."""

    def __init__(self):
        self.entries = {}  # poly key -> (Batch, whatever the caller stored)

    def find(self, args, diff_flags):
        """(poly key, the stored entry that serves these arguments, or None)."""
        key = poly_key(args, diff_flags)
        found = self.entries.get(key) if key is not None else None
        if found is None or not found[0].serves(batch_of(args, diff_flags).n):
            return key, None
        return key, found[1]

    def add(self, key, batch, entry):
        """Keep `entry` for calls of poly key `key` (if the graph was polymorphic)."""
        if key is not None and batch is not None:
            self.entries[key] = (batch, entry)

    def clear(self):
        self.entries.clear()
