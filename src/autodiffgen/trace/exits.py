"""A `while` loop's test made to say stop early, so that a trace sees the loop run fewer
steps: the second trace generalize/whiles.py compares (as batch.py traces again at n - 1).

Inside `forcing(site, at)`, the traced bool read at `site` (the user's frames' code and
offsets, innermost first: loops/find.py's sites without the frames' ids) gives the stop
outcome at its `at`-th reading (0 first); the trace records what the loop then did. Only
the structure of such a trace is used: from the forced test on, its values are not the
function's.
"""

import contextlib
import threading

from . import boxes
from .context import user_stack

_state = threading.local()


def site_key(site):
    """A node's site without the frames' ids: the same place in another trace."""
    return tuple((code, offset) for _, code, offset in site)


@contextlib.contextmanager
def forcing(site, at, stop):
    """Traces in this block see the read at `site` give `stop` at its `at`-th reading."""
    previous = getattr(_state, "spec", None)
    _state.spec = [site, at, stop, 0]
    try:
        yield
    finally:
        _state.spec = previous


def _read(outcome):
    spec = getattr(_state, "spec", None)
    if spec is None:
        return outcome
    sites = []
    user_stack(None, sites)
    if site_key(sites) != spec[0]:
        return outcome
    spec[3] += 1
    return spec[2] if spec[3] - 1 == spec[1] else outcome


boxes.EXIT_READS.append(_read)
