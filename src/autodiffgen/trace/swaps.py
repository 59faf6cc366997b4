"""Library callables swapped for tracing versions while a trace runs.

NumPy does not hand every call to the tracer: np.random's module functions draw from a
hidden state, np.array converts a list before anything dispatches, and SciPy's functions
convert their arguments with np.asarray. The rule modules for those register here the
attribute to replace (`owner.name`) and its replacement. While any trace runs, in any
thread, the attribute is the replacement, which must behave as the original in a thread
that is not tracing; the last trace to end puts the originals back. Each rule module
keeps its own Swaps, switched on by the hook whose lifetime it needs (tracer.TRACE_HOOKS
around the user's call, recording.ENTER_HOOKS while a recording is current).
"""

import contextlib
import threading


class Swaps:
    """A set of `owner.name` replacements, in force while at least one trace holds it."""

    def __init__(self):
        self.entries = []  # (owner, name, whether owner had it in its own __dict__, original, replacement)
        self._lock = threading.Lock()
        self._holders = 0

    def add(self, owner, name, replacement):
        """Swap `owner.name` for `replacement` while tracing; returns the original."""
        original = getattr(owner, name)
        self.entries.append((owner, name, name in vars(owner), original, replacement))
        return original

    def enter(self):
        with self._lock:
            if self._holders == 0:
                for owner, name, _, _, replacement in self.entries:
                    setattr(owner, name, replacement)
            self._holders += 1

    def leave(self):
        with self._lock:
            self._holders -= 1
            if self._holders == 0:
                for owner, name, own, original, _ in self.entries:
                    if own:
                        setattr(owner, name, original)
                    else:  # found on the owner's class (a distribution's method): drop it
                        delattr(owner, name)

    @contextlib.contextmanager
    def held(self):
        self.enter()
        try:
            yield
        finally:
            self.leave()
