"""Pytrees: nested tuples, lists, namedtuples and dicts whose leaves are anything else.

Arguments, gradients, tangents and a graph's outputs are all pytrees; these few functions
are the only place that knows how to take one apart and put it back together.
"""


def is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def is_container(x):
    kind = type(x)
    return kind is tuple or kind is list or kind is dict or is_namedtuple(x)


def items(tree):
    """(key, child) pairs of a container, in order."""
    if type(tree) is dict:
        return list(tree.items())
    return list(enumerate(tree))


def rebuild(like, children):
    """A container of the same kind as `like` holding `children` (a list, in order)."""
    if type(like) is dict:
        return dict(zip(like.keys(), children))
    if is_namedtuple(like):
        return type(like)(*children)
    return type(like)(children)


def leaves(tree):
    if is_container(tree):
        return [leaf for _, child in items(tree) for leaf in leaves(child)]
    return [tree]


def map_tree(tree, fn):
    if is_container(tree):
        return rebuild(tree, [map_tree(child, fn) for _, child in items(tree)])
    return fn(tree)


def map_trees(fn, tree, other, where="the argument"):
    """fn(leaf, other_leaf) over two trees of the same structure; a clear error if not.
    Dicts match by their keys, in any order (as in JAX).

    `other` may hold None in place of a whole subtree (no tangent there, say)."""
    if other is None or not is_container(tree):
        return fn(tree, other)
    if type(other) is not type(tree) or len(other) != len(tree) or (
            type(tree) is dict and set(other) != set(tree)):
        raise ValueError(f"{where} has structure {structure_text(other)} but "
                         f"{structure_text(tree)} was expected")
    others = [other[k] for k in tree] if type(tree) is dict else [c for _, c in items(other)]
    return rebuild(tree, [map_trees(fn, child, other_child, where)
                          for (_, child), other_child in zip(items(tree), others)])


def structure_text(tree):
    if type(tree) is dict:
        return "{" + ", ".join(f"{k!r}: {structure_text(v)}" for k, v in tree.items()) + "}"
    if is_container(tree):
        inner = ", ".join(structure_text(child) for child in tree)
        return f"[{inner}]" if type(tree) is list else f"({inner})"
    return "*"
