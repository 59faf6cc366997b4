"""The one place the Dask bridge gets the generated module's source from.

A variant is what a worker needs to run one traced path: the module's source, its hash
(the worker's cache key), the function's name, and the row count the code is fixed to
(None when the module serves every batch size and checks shapes itself).
"""

import hashlib


def module_variant(gf, args):
    """The standalone module of value_and_grad `gf` traced at `args` (a chunk's rows): it
    serves every row count and raises its GuardFailure on another path."""
    source = gf.standalone_source(*args)
    key = hashlib.sha256(source.encode()).hexdigest()[:20]
    return {"key": key, "source": source, "function": "value_and_grad", "rows": None}
