"""Signature keys: what a generated function depends on, as a hashable tuple.

A key is each argument's tree structure, the shape and dtype of every array, the type of
every Python float and int (they are inputs, read through guards where they decide control
flow or a shape), and the value of every other (static) argument: bools, strings, None,
hashable objects. Equal keys: the same generated code serves both calls (for a guarded
function, one of its variants: entries.py). A cache hit does not compute it: dispatch.py
generates, per signature, the tests that give the same answer faster; a change here must
be mirrored there (tests/cache/test_dispatch.py checks that they agree).
"""

import random
from collections import namedtuple

import numpy as np

from ..errors import ArgumentError, user_frame, where
from ..trace.boxes import Box, Handle
from ..tree import is_namedtuple, kind_of

CacheInfo = namedtuple("CacheInfo", "hits misses entries")
_STATIC = (int, bool, str, bytes, complex, type(None))
_INT64 = 2**63
_GENERATORS = (np.random.Generator, np.random.RandomState, random.Random)  # inputs: keyed by
# type, not identity


def leaf_key(x, diff):
    kind = type(x)
    if kind is np.ndarray:
        return (x.shape, x.dtype)
    if kind is float:  # an input of the generated code, like a 0-d array
        return float if diff is not None else (float, x.hex())  # None: made static
    if kind is complex and diff is not None:  # an input too
        return complex
    if isinstance(x, np.generic):  # a NumPy scalar: an input, like a 0-d array
        return (kind, "scalar")
    if kind is Box:  # an enclosing trace's value: always an input of the inner code
        return ("traced", x.shape, x.dtype)
    if kind is int and diff is False and -_INT64 <= x < _INT64:  # an input too (tracer.py)
        return int
    if kind in _STATIC:
        return (kind, x)
    if kind is tuple or kind is list or is_namedtuple(x):
        return (kind, tuple([leaf_key(v, diff) for v in x]))
    if kind is dict:
        return (dict, tuple([(k, leaf_key(v, diff)) for k, v in x.items()]))
    node = kind_of(kind)  # OrderedDict, defaultdict, a dataclass, a registered type (tree.py)
    if node is not None:
        return _container_key(node, kind, x, diff)
    if isinstance(x, np.ndarray):  # a subclass: the tracer refuses it with a clear message
        return (kind, x.shape, x.dtype)
    if kind in _GENERATORS:  # a new Generator each call must not retrace (rules/random.py)
        return (kind, "generator")
    if kind is Handle:  # an enclosing trace's generator
        return ("traced", type(x.value))
    try:
        hash(x)
    except TypeError:
        raise ArgumentError(where(user_frame(2)) + f": an argument of type {kind.__name__} "
                            "is neither an array nor hashable, so it cannot be a static "
                            "argument of the generated code") from None
    return (kind, x)


def _container_key(node, kind, x, diff):
    """(type, what besides the children decides its structure, the children's keys): an
    OrderedDict's keys in order, a defaultdict's factory, a registered type's aux_data
    (static: the trace may read it), which must be hashable."""
    static, _, children = node.parts(x)
    try:
        hash(static)
    except TypeError:
        raise ArgumentError(where(user_frame(3)) + f": the flatten function registered for "
                            f"{kind.__name__} returned aux_data {static!r}, which is not "
                            "hashable; it is part of the cache key (as in JAX, aux_data must "
                            "be hashable and compare by value)") from None
    return (kind, static, tuple([leaf_key(v, diff) for v in children]))


def signature_key(args, diff_flags):
    return tuple(map(leaf_key, args, diff_flags))
