"""Batch-polymorphic sharing: one generated function for every batch size it serves.

A function generalized over the batch size (generalize_batch.py) is kept here by its poly key (the
signature key with each batch leaf's leading size left out). A call whose own signature
missed looks here before tracing: when a function traced at another batch size serves this
call's size, the call gets that function under its own key, without a trace.
"""

from ..generalize.batch import batch_of, map_paths
from .keys import signature_key


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

    def functions(self):
        """The generated functions kept here (each entry's first item: entries.py's)."""
        return [found[0] for _, found in self.entries.values()]

    def add(self, key, batch, entry):
        """Keep `entry` for calls of poly key `key` (if the graph was polymorphic)."""
        if key is not None and batch is not None:
            self.entries[key] = (batch, entry)

    def clear(self):
        self.entries.clear()


class BatchRows:
    """In a polymorphic key: an array of any number of rows, with these trailing dims."""

    __slots__ = ("dtype", "rest")

    def __init__(self, rest, dtype):
        self.rest, self.dtype = rest, dtype

    def __eq__(self, other):
        return type(other) is BatchRows and (other.rest, other.dtype) == (self.rest, self.dtype)

    def __hash__(self):
        return hash((BatchRows, self.rest, self.dtype))

    def __repr__(self):
        return f"BatchRows([n, {', '.join(map(str, self.rest))}], {self.dtype})"


def poly_key(args, diff_flags):
    """The signature key with each batch leaf's leading size left out (None if the call
    has no batch axis): the key under which a polymorphic function is found again."""
    return _keyed(args, diff_flags)[0]


def _keyed(args, diff_flags):
    """(poly key, batch size) of a call; (None, None) without a batch axis."""
    batch = batch_of(args, diff_flags)
    if batch is None:
        return None, None
    marked = map_paths(list(args), set(batch.paths),
                        lambda a: BatchRows(a.shape[1:], a.dtype))
    return signature_key(marked, diff_flags), batch.n
