"""Writes into containers passed as arguments: `bn_param["running_mean"] = new`.

A function that keeps state in a dict or list its caller passes in (a batch-norm layer's
running mean, a cache of the last activations) changes that container when run eagerly.
The trace runs the function on rebuilt containers holding Boxes, so such a write lands in
the trace's copy; here it is found after the call, by comparing each dict and list of the
arguments with what it held on entry, and the generated code performs it: the new values
are computed with the rest and assigned into the caller's container (`Graph.writes`), after
every guard, so a call that traces again writes nothing twice.

A write that changes a container's length (`append`, `pop`, `del d[k]`) has no one value
to assign: it is refused, naming the function, rather than dropped.
"""

from ..errors import TracingError, at


def snapshot(tree, path=()):
    """[(path, container, what it held)] for every dict and list of the arguments."""
    if type(tree) is dict:
        found = [(path, tree, dict(tree))]
        pairs = tree.items()
    elif type(tree) is list:
        found = [(path, tree, list(tree))]
        pairs = enumerate(tree)
    elif type(tree) is tuple:
        found, pairs = [], enumerate(tree)
    else:
        return []
    for key, child in pairs:
        found += snapshot(child, (*path, key))
    return found


def writes(entries, where):
    """[(path, new value)] of the items the call assigned into its argument containers
    (`entries`: snapshot of them on entry); `where`: the function's (file, line)."""
    found = []
    for path, container, before in entries:
        if (len(container) != len(before)) if type(container) is list else \
                not before.keys() <= container.keys():  # appended, popped, deleted
            raise TracingError(at(where, f"the function changes the length of the "
                                  f"{type(container).__name__} {_text(path)} passed to it "
                                  "(append, pop, del): the generated code performs a write into "
                                  "an argument's container only as an item assignment "
                                  "(d[key] = value); return the new items instead"))
        if type(container) is list:
            before = dict(enumerate(before))
        keys = container.keys() if type(container) is dict else range(len(container))
        found += [((*path, key), container[key]) for key in keys
                  if key not in before or container[key] is not before[key]]
    return found


def _text(path):
    return f"argument {path[0]}" + "".join(f"[{key!r}]" for key in path[1:])


def perform(args, found, value):
    """Assign the writes `found` into the caller's containers in `args`, each item's value
    through `value` (the tape: a Box's array)."""
    from ..tree import map_tree

    for path, item in found:
        container = args[path[0]]
        for key in path[1:-1]:
            container = container[key]
        container[path[-1]] = map_tree(item, value)
