"""Why a call missed the cache: an opt-in log of every retrace and its cause.

Set AUTODIFFGEN_EXPLAIN=1 (or call `autodiffgen.explain_retraces()`) and each trace after
a function's first says which argument's structure, shape, dtype or static value differs
from the nearest signature already compiled, or which guard failed. Messages go to the
"autodiffgen" logger at WARNING level, so they show without any logging set-up.

One message is always on: when the same argument has caused CHURN traces (a string or a
shape that changes every call), a warning names it, once per function and argument.
"""

import logging
import os

import numpy as np

LOG = logging.getLogger("autodiffgen")
_enabled = [os.environ.get("AUTODIFFGEN_EXPLAIN", "0") not in ("", "0")]


def explain_retraces(on: bool = True) -> None:
    """Log why each call of a differentiated function traces again (off: stop)."""
    _enabled[0] = bool(on)


def enabled():
    return _enabled[0]


def report(name, message):
    LOG.warning("autodiffgen: retracing %s: %s", name, message)


class Churn:
    """How many traces each argument's changes caused; past CHURN of them, one warning
    naming it (always on: a trace per call is a slowdown the user must hear of once)."""

    CHURN = 8

    def __init__(self):
        self.counts = {}
        self.warned = set()

    def count(self, function, names, key, known):
        for name in changed_arguments(names, key, known):
            self.counts[name] = n = self.counts.get(name, 0) + 1
            if n >= self.CHURN and name not in self.warned:
                self.warned.add(name)
                LOG.warning("autodiffgen: %s has been traced again %d times because argument %r "
                            "keeps changing (%s); each new value is compiled anew. Pass it "
                            "as an array if it is data, or keep it fixed; a number that Python "
                            "reads (math.exp(t), float(t), range(k)) is read per value: apply "
                            "NumPy to it instead (np.exp(t))", function, n, name,
                            new_signature(names, key, known))


    def guarded(self, function, label, failure):
        """A trace because a guard failed: counted per value read from outside the
        arguments that changed (`label`: a global, closure variable or attribute that
        Python reads), else per guard, and warned of once."""
        key = label or failure.split(": ", 1)[0]
        self.counts[key] = n = self.counts.get(key, 0) + 1
        if n < self.CHURN or key in self.warned:
            return
        self.warned.add(key)
        if label:
            LOG.warning("autodiffgen: %s has been traced again %d times because %s keeps "
                        "changing and Python reads its value (%s); each new value is "
                        "compiled anew and only the latest ones are kept. Apply NumPy to it "
                        "(np.exp(t) rather than math.exp(t)), so that it stays an input of "
                        "the code", function, n, label, failure)
        else:
            LOG.warning("autodiffgen: %s has been traced again %d times because a guard "
                        "keeps failing (%s): the arguments keep taking new paths through "
                        "Python that reads their values. Make the decision with array "
                        "operations (np.where, np.maximum) instead", function, n, failure)


def changed_arguments(names, key, known):
    """The arguments whose part of `key` differs from the closest of the `known` keys."""
    if not known or any(len(key) != len(k) for k in known):
        return []
    closest = min(known, key=lambda k: sum(a != b for a, b in zip(key, k)))
    return [name for name, now, then in zip(names, key, closest) if now != then]


def new_signature(names, key, known):
    """What differs between `key` and the closest of the `known` signature keys."""
    if not known:
        return "first call"
    best = min((_differences(names, key, other) for other in known), key=len)
    return "; ".join(best) or "same signature (the entry was cleared)"


def _differences(names, key, other):
    if len(key) != len(other):
        return [f"{len(key)} positional arguments instead of {len(other)}"]
    found = []
    for name, now, then in zip(names, key, other):
        found += _leaf_differences(name, now, then)
    return found


def _leaf_differences(path, now, then):
    if now == then:
        return []
    if _is_array_key(now) and _is_array_key(then):
        (shape, dtype), (old_shape, old_dtype) = now, then
        parts = []
        if shape != old_shape:
            parts.append(f"shape {old_shape} -> {shape}")
        if dtype != old_dtype:
            parts.append(f"dtype {old_dtype} -> {dtype}")
        return [f"argument {path!r}: {', '.join(parts)}"]
    if _is_tree_key(now) and _is_tree_key(then) and now[0] is then[0] \
            and len(now[1]) == len(then[1]):
        found = []
        for i, (a, b) in enumerate(zip(now[1], then[1])):
            if now[0] is dict:
                (k, a), (k_old, b) = a, b
                if k != k_old:
                    return [f"argument {path!r}: keys differ ({k_old!r} -> {k!r})"]
                found += _leaf_differences(f"{path}[{k!r}]", a, b)
            else:
                found += _leaf_differences(f"{path}[{i}]", a, b)
        return found
    return [f"argument {path!r}: {_say(then)} -> {_say(now)}"]


def _is_array_key(k):
    return type(k) is tuple and len(k) == 2 and type(k[0]) is tuple \
        and isinstance(k[1], np.dtype)


def _is_tree_key(k):
    return type(k) is tuple and len(k) == 2 and type(k[1]) is tuple and isinstance(k[0], type)


def _say(k):
    if _is_array_key(k):
        return f"an array of shape {k[0]} and dtype {k[1]}"
    if type(k) is tuple and len(k) == 2 and isinstance(k[0], type):
        if k[0] is float and type(k[1]) is str:  # a static float, keyed by its hex form
            return f"float {float.fromhex(k[1])!r}"
        return f"{k[0].__name__} {k[1]!r}"
    if k is float or k is int:
        return f"a {k.__name__} (an input)"
    return repr(k)


def disk(name, message):
    """Why the disk cache did not store or load `name`'s code (logged only when explaining:
    the cost is a trace, never a wrong answer)."""
    if enabled():
        LOG.warning("autodiffgen: disk cache, %s: %s", name, message)
