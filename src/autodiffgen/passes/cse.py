"""Common-subexpression elimination: one node per (primitive, arguments, parameters).

The backward pass often computes the same thing twice (`g * x` for both operands of
`x * x`, the same `tanh(x)**2` from two rules); the later copy reads the earlier one.
"""

from ..graph import Node, constant_key
from .rewrite import substitute


def cse(graph, keys=None):
    """`keys` (optimize's, across its rounds): node -> its key as computed before, which
    holds as long as none of its arguments is replaced in this sweep (a node never
    changes: a pass copies it instead), so a later round hashes what it looked at."""
    seen, replace, param_keys = {}, {}, {}
    keys = {} if keys is None else keys
    for node in graph.nodes:
        if node.prim.effect:  # two draws are two draws
            continue
        touched = replace and any(type(a) is Node and a in replace for a in node.args)
        key = None if touched else keys.get(node)
        if key is None:
            key = _key(node, replace, param_keys)
            if not touched:
                keys[node] = key
        if key in seen:
            replace[node] = seen[key]
        else:
            seen[key] = node
    return substitute(graph, replace)


def _key(node, replace, param_keys):
    """(primitive, arguments, parameters): a node by identity, after the one it is replaced
    by (which is never replaced itself: it was seen first); a constant by value (no
    constant's key equals a Node)."""
    params = node.params
    if not params:
        pkey = ()
    elif id(params) in param_keys:  # a copy made by a pass shares its original's
        pkey = param_keys[id(params)][1]
    else:
        pkey = tuple((k, _param_key(v)) for k, v in sorted(params.items()))
        param_keys[id(params)] = (params, pkey)  # params held: its id stays its own
    args = [replace.get(a, a) if type(a) is Node else constant_key(a) for a in node.args]
    if node.prim.op in _COMMUTATIVE and len(args) == 2:  # x * y is y * x, bit for bit
        args.sort(key=_order)
    return (id(node.prim), tuple(args), pkey)


_COMMUTATIVE = ("add", "multiply")


def _order(key):
    """An order of argument keys that is the same within a run (nodes by identity)."""
    return (1, id(key), "") if type(key) is Node else (0, 0, repr(key))


def _param_key(value):
    """Parameters by value, except functions (a custom primitive's), which go by identity:
    two closures may print alike and still differ."""
    return ("fn", id(value)) if callable(value) and not isinstance(value, type) \
        else repr(value)

