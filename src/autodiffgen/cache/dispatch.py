"""Which generated code a cached call runs, decided without computing a signature key.

Computing the key (keys.leaf_key on every argument) was most of a cached call of a small
function: 0.4 us of the 0.5 us that two Python floats took before their generated code
ran. So each signature gets two small functions, generated once from the exact types of
the arguments that first had it and from the `diff` flags (which decide how a number is
keyed):

- `same(*args)`: True only if signature_key(args, diff) equals the signature's key. Two
  Python floats cost two `type(a) is T` tests, an array one more for its shape and its
  dtype. The view keeps the last call's `run` (view.py): the same test with that call's
  entry, `run(*args)` giving the entry's result when the test holds and MISS otherwise,
  which the cached call (api.GradFunction.__call__) calls first: one generated call
  decides and runs (0.29 -> 0.17 us for two Python floats, benchmarks/call_overhead.py).
- `key(*args)`: signature_key(args, diff) for arguments of these exact types, which a
  call that is not the last one's looks its entry up with (its types pick the function).

Both follow leaf_key, whose order they mirror: a leaf whose key its type decides (a float
or complex input, a NumPy scalar) is a constant; an array is keyed by its shape and dtype;
an int input by its range; anything else by leaf_key itself. False from `same` is always
safe (the call takes the look-up); True must mean equal keys, which a test checks on many
kinds of arguments. When the flags change (numbers made static: entries.py), the cache
drops every function made here and every view's last call (FunctionCache.flags_changed).
"""

import functools
import os

import numpy as np

from .keys import _INT64, leaf_key, signature_key

_FILENAME = os.path.join(os.path.dirname(__file__), "<dispatch>")  # internal to errors.py
_NO = object()  # a missing argument: no type is its type


MISS = object()  # what `run` gives for arguments of another signature


def never(*args):
    """The `same` of no signature (a key made under other flags)."""
    return False


def no_run(*args):
    """The `run` of no signature (a view before its first call, or after the flags
    changed)."""
    return MISS


def checker(args, flags, key):
    """`same` for the signature `key` of `args` (see the module docstring): never when the
    arguments do not have that key under these flags (a caller's key made before numbers
    became static)."""
    test = condition(args, flags, key)
    if test is None:
        return never
    params, body, values = test
    return _made(f"def same({params}*more):\n    return {body}\n", values)


def runner(test, entry):
    """`run` for a signature whose `condition` is `test`, running `entry` (see the module
    docstring)."""
    if test is None:
        return no_run
    params, body, values = test
    call = params.replace("=_NO", "")
    source = (f"def run({params}*more):\n    if {body}:\n        return E({call[:-2]})\n"
              f"    return MISS\n")
    return _made(source, {**values, "E": entry})


def condition(args, flags, key):
    """(parameters, test, the test's values) that hold exactly for arguments with the
    signature `key` of `args`; None when `args` do not have that key under these flags."""
    if signature_key(args, flags) != key:
        return None
    checks, values = [], {}
    for i, (arg, flag) in enumerate(zip(args, flags)):
        checks.append(f"type(a{i}) is T{i}")
        values[f"T{i}"] = type(arg)
        checks.extend(_leaf_check(i, arg, flag, key[i], values))
    params = "".join(f"a{i}=_NO, " for i in range(len(args)))
    return params, " and ".join(["not more", *checks]), values


def _leaf_check(i, arg, flag, leaf, values):
    """The tests beyond the type's that make leaf i's key equal to `leaf`."""
    kind = type(arg)
    if kind is np.ndarray:
        values[f"S{i}"], values[f"D{i}"] = leaf
        return [f"a{i}.shape == S{i}", f"(a{i}.dtype is D{i} or a{i}.dtype == D{i})"]
    if _by_type(kind, flag):
        return []
    if kind is int and flag is False and leaf is int:
        return [f"-{_INT64} <= a{i} < {_INT64}"]
    values[f"K{i}"] = leaf
    return [f"leaf_key(a{i}, {flag!r}) == K{i}"]


def keyer(args, flags):
    """`key` for arguments of the types of `args` (see the module docstring)."""
    parts, values = [], {}
    for i, (arg, flag) in enumerate(zip(args, flags)):
        kind = type(arg)
        if kind is np.ndarray:
            parts.append(f"(a{i}.shape, a{i}.dtype)")
        elif _by_type(kind, flag):
            parts.append(f"K{i}")
            values[f"K{i}"] = leaf_key(arg, flag)
        elif kind is int and flag is False:
            parts.append(f"(int if -{_INT64} <= a{i} < {_INT64} else (int, a{i}))")
        else:
            parts.append(f"leaf_key(a{i}, {flag!r})")
    params = ", ".join(f"a{i}" for i in range(len(args)))
    return _made(f"def key({params}):\n    return ({''.join(p + ', ' for p in parts)})\n",
                 values)


def _by_type(kind, flag):
    """Whether leaf_key of a value of exact type `kind` is decided by the type alone."""
    if kind is float or kind is complex:
        return flag is not None  # None: a number made static, keyed by its value
    return issubclass(kind, np.generic)


def _made(source, values):
    """The function `source` defines, its free names bound to `values` (as closure
    variables: the fastest to read)."""
    return _factory(source, tuple(sorted(values)))(**values)


@functools.lru_cache(maxsize=512)
def _factory(source, names):
    """A function of `names` returning the function `source` defines (compiled once per
    source: the values differ from signature to signature, the text much less)."""
    body = "".join("    " + line + "\n" for line in source.splitlines())
    name = source.split("(", 1)[0][len("def "):]
    text = f"def make({', '.join(names)}):\n{body}    return {name}\n"
    scope = {"__name__": __name__, "_NO": _NO, "MISS": MISS, "leaf_key": leaf_key}  # ours (disk/reads.py)
    exec(compile(text, _FILENAME, "exec"), scope)  # noqa: S102  our own generated code
    return scope["make"]
