"""Pytrees: nested containers whose leaves are anything else.

Arguments, gradients, tangents and a graph's outputs are all pytrees; these functions are
the only place that knows how to take one apart and put it back together. The containers:
tuples, lists, dicts and namedtuples; `collections.OrderedDict` and `defaultdict` (rebuilt
with the same default_factory); dataclass instances, whose fields (those `__init__` takes)
are the children, rebuilt by calling the class with them (JAX asks for a dataclass to be
registered first; here every dataclass is a container, as its fields are what a user means
by its contents); and any type given to `register_pytree_node(type, flatten, unflatten)`,
with JAX's semantics: flatten(x) -> (children, aux_data), unflatten(aux_data, children)
-> x, aux_data hashable (it is part of the cache key: what the trace read from it is
static).

A path step into a container (tracer.py names inputs by their path, and the generated
code reads them by it) is a dict key or a list index, a `Field` (the emitted code reads
`x.name`) or a `Child` (child i of a registered type: `flatten(x)[0][i]`).
"""

import collections
import dataclasses
import weakref
from collections.abc import Callable, Iterable
from typing import Any

_REGISTERED = {}  # type -> (flatten, unflatten), by register_pytree_node
_KINDS = weakref.WeakKeyDictionary()  # type -> its _Kind, or None: decided once per type


class Field(str):
    """A dataclass field's name as a path step: the generated code reads `x.name`."""

    __slots__ = ()


class Child(int):
    """Child i of a registered type as a path step: the generated code reads
    `flatten(x)[0][i]` with the type's own flatten function (`kind`)."""

    def __new__(cls, i, kind):
        child = super().__new__(cls, i)
        child.kind = kind
        return child

    def __reduce__(self):
        return (Child, (int(self), self.kind))


class _Kind:
    """How one container type comes apart: parts(x) -> (static, keys, children), where
    `static` (hashable) is what besides the children decides the structure, and
    make(static, keys, children) -> a container of that type."""

    __slots__ = ("make", "parts", "user")

    def __init__(self, parts, make, user=False):
        self.parts, self.make, self.user = parts, make, user


def _mapping(kind):
    def parts(x):
        keys = list(x)
        return (tuple(keys), keys, [x[k] for k in keys])

    def make(static, keys, children):
        return kind(zip(keys, children))
    return _Kind(parts, make)


def _defaultdict_parts(x):
    keys = list(x)
    return ((x.default_factory, tuple(keys)), keys, [x[k] for k in keys])


def _defaultdict_make(static, keys, children):
    return collections.defaultdict(static[0], zip(keys, children))


def _dataclass(kind):
    names = [Field(f.name) for f in dataclasses.fields(kind) if f.init]
    static = tuple(map(str, names))  # in the key: a renamed field is another structure

    def parts(x):
        return (static, names, [getattr(x, name) for name in names])

    def make(static, keys, children):
        return kind(**dict(zip(keys, children)))
    return _Kind(parts, make)


def _registered(kind, flatten, unflatten):
    def parts(x):
        children, aux = flatten(x)
        children = list(children)
        return (aux, [Child(i, kind) for i in range(len(children))], children)

    def make(static, keys, children):
        return unflatten(static, list(children))
    return _Kind(parts, make, user=True)


def kind_of(kind):
    """The _Kind of a container type beyond tuple, list, dict and namedtuple, or None."""
    try:
        return _KINDS[kind]
    except KeyError:
        pass
    except TypeError:  # not weakly referenceable: no container of ours
        return None
    found = None
    if kind in _REGISTERED:
        found = _registered(kind, *_REGISTERED[kind])
    elif kind is collections.OrderedDict:
        found = _mapping(kind)
    elif kind is collections.defaultdict:
        found = _Kind(_defaultdict_parts, _defaultdict_make)
    elif dataclasses.is_dataclass(kind) and isinstance(kind, type) and \
            not kind.__module__.startswith("autodiffgen"):  # ours are values, not trees
        found = _dataclass(kind)
    _KINDS[kind] = found
    return found


def register_pytree_node(nodetype: type, flatten: Callable[[Any], tuple[Iterable[Any], Any]],
                         unflatten: Callable[[Any, Iterable[Any]], Any]) -> None:
    """Make `nodetype` a container, as jax.tree_util.register_pytree_node:
    `flatten(x) -> (children, aux_data)` and `unflatten(aux_data, children) -> x`.
    aux_data must be hashable and compare by value: it is part of the cache key (a new
    value traces again). Every transformation, the cache and the disk cache take it."""
    if not isinstance(nodetype, type):
        raise TypeError(f"register_pytree_node takes a type, got {nodetype!r}")
    if nodetype in (tuple, list, dict, collections.OrderedDict, collections.defaultdict) or \
            nodetype in _REGISTERED or issubclass(nodetype, tuple) and \
            hasattr(nodetype, "_fields"):  # a namedtuple class
        raise ValueError(f"{nodetype.__qualname__} is already a pytree node type")
    if not (callable(flatten) and callable(unflatten)):
        raise TypeError("register_pytree_node(type, flatten, unflatten): flatten and "
                        "unflatten must be functions")
    _REGISTERED[nodetype] = (flatten, unflatten)
    _KINDS.pop(nodetype, None)


def user_kind(kind):
    """Whether instances of `kind` are containers of a class of the user's (a dataclass
    or a registered type), whose methods the trace runs."""
    node = kind_of(kind)
    return node is not None and (node.user or dataclasses.is_dataclass(kind))


def alias_kind(made, kind):
    """`made` (a subclass the trace makes of a user's container class) comes apart as
    `kind` does and is rebuilt as a `kind`."""
    _KINDS[made] = kind_of(kind)


def registration(kind):
    """(flatten, unflatten) of a registered type, else None."""
    return _REGISTERED.get(kind)


def child(tree, key):
    """The child of `tree` a path step names (as the generated code reads it)."""
    if type(key) is Field:
        return getattr(tree, key)
    if type(key) is Child:
        return list(_REGISTERED[key.kind][0](tree)[0])[key]
    return tree[key]


def is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def is_container(x):
    kind = type(x)
    return kind is tuple or kind is list or kind is dict or is_namedtuple(x) or \
        kind_of(kind) is not None


def is_mapping(x):
    """Children found by key (dict, OrderedDict, defaultdict): matched by key."""
    kind = type(x)
    return kind is dict or kind is collections.OrderedDict or kind is collections.defaultdict


def items(tree):
    """(key, child) pairs of a container, in order."""
    kind = type(tree)
    if kind is dict:
        return list(tree.items())
    if kind is tuple or kind is list or is_namedtuple(tree):
        return list(enumerate(tree))
    _, keys, children = kind_of(kind).parts(tree)
    return list(zip(keys, children))


def static_part(tree):
    """What besides its children decides a container's structure (hashable): a dict's
    keys in order, a defaultdict's factory, a registered type's aux_data, a sequence's
    length."""
    kind = type(tree)
    if kind is dict:
        return tuple(tree)
    if kind is tuple or kind is list or is_namedtuple(tree):
        return len(tree)
    static, keys, _ = kind_of(kind).parts(tree)
    return (static, len(keys))


def rebuild(like, children):
    """A container of the same kind as `like` holding `children` (a list, in order)."""
    kind = type(like)
    if kind is dict:
        return dict(zip(like.keys(), children))
    if is_namedtuple(like):
        return kind(*children)
    if kind is tuple or kind is list:
        return kind(children)
    node = kind_of(kind)
    static, keys, _ = node.parts(like)
    return node.make(static, keys, children)


def leaves(tree):
    if is_container(tree):
        return [leaf for _, child in items(tree) for leaf in leaves(child)]
    return [tree]


def map_tree(tree, fn):
    if is_container(tree):
        return rebuild(tree, [map_tree(child, fn) for _, child in items(tree)])
    return fn(tree)


def same_node(tree, other):
    """Whether `other` is a container of tree's kind with the same children (a mapping's
    keys in any order, as JAX matches dicts; a registered type's equal aux_data)."""
    if type(other) is not type(tree):
        return False
    if is_mapping(tree):
        return len(other) == len(tree) and set(other) == set(tree) and (
            type(tree) is not collections.defaultdict or
            other.default_factory == tree.default_factory)
    try:
        return static_part(other) == static_part(tree)
    except Exception:  # noqa: BLE001  an aux_data that does not compare: not the same
        return False


def matching_children(tree, other):
    """other's children in tree's order (same_node holds): a mapping's by key."""
    if is_mapping(tree):
        return [other[k] for k in tree]
    return [child for _, child in items(other)]


def map_trees(fn, tree, other, where="the argument"):
    """fn(leaf, other_leaf) over two trees of the same structure; a clear error if not.
    Dicts match by their keys, in any order (as in JAX).

    `other` may hold None in place of a whole subtree (no tangent there, say)."""
    if other is None or not is_container(tree):
        return fn(tree, other)
    if not same_node(tree, other):
        raise ValueError(f"{where} has structure {structure_text(other)} but "
                         f"{structure_text(tree)} was expected")
    return rebuild(tree, [map_trees(fn, child, other_child, where) for (_, child), other_child
                          in zip(items(tree), matching_children(tree, other))])


def step_text(key):
    """A path step as the user would write it: ['W'], [0], .W (a dataclass field), or
    <child 0> of a registered type."""
    if type(key) is Field:
        return f".{key}"
    if type(key) is Child:
        return f"<child {int(key)}>"
    return f"[{key!r}]"


def structure_text(tree):
    kind = type(tree)
    if kind is dict:
        return "{" + ", ".join(f"{k!r}: {structure_text(v)}" for k, v in tree.items()) + "}"
    if kind is list or kind is tuple or is_namedtuple(tree):
        inner = ", ".join(structure_text(child) for child in tree)
        return f"[{inner}]" if kind is list else f"({inner})"
    if not is_container(tree):
        return "*"
    pairs = items(tree)
    if is_mapping(tree):
        inner = ", ".join(f"{k!r}: {structure_text(v)}" for k, v in pairs)
        return f"{kind.__name__}({{{inner}}})"
    if pairs and type(pairs[0][0]) is Field:
        inner = ", ".join(f"{k}={structure_text(v)}" for k, v in pairs)
    else:
        inner = ", ".join(structure_text(v) for _, v in pairs)
        if kind_of(kind).user:
            static = kind_of(kind).parts(tree)[0]
            inner = f"aux_data={static!r}" + (f"; {inner}" if inner else "")
    return f"{kind.__name__}({inner})"
