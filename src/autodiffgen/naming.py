"""Name recorded values after the user's own variables.

A statement `h = relu(x @ W + b)` makes several nodes; the value bound to `h` is the last
node made while that statement ran (inner calls included). So for each statement, at each
depth of the user's call stack, the last node of every uninterrupted run of nodes made
under it gets the statement's target name. Outer statements win over inner ones, since the
top-level function is what the reader has in front of them.
"""

import builtins
import functools
import keyword
import linecache
import re

_TARGET = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*(?:[-+*/@]|\*\*|//)?=(?!=)")
# names generated code must be able to read: keywords, builtins, the modules it calls
RESERVED = (set(keyword.kwlist) | set(dir(builtins))
            | {"np", "math", "random", "operator", "numexpr", "scipy", "l", "O", "I"})


def assigned_name(loc):
    """The variable a source line assigns to (`h = ...`, `h += ...`), or None."""
    match = _TARGET.match(linecache.getline(loc[0], loc[1]).strip())
    return match.group(1) if match else None


def name_forward(nodes):
    """Give forward nodes the names of the variables the user bound them to."""
    named = {}  # node -> (depth, name); smaller depth (outer statement) wins
    open_runs = []  # per depth from the outermost: (statement loc, last node)
    for node in nodes:
        chain = node.stack[::-1]  # outermost first
        for depth in range(len(open_runs)):
            if depth >= len(chain) or open_runs[depth][0] != chain[depth]:
                _close(open_runs[depth:], depth, named)
                del open_runs[depth:]
                break
        for depth, loc in enumerate(chain):
            if depth < len(open_runs):
                open_runs[depth] = (loc, node)
            else:
                open_runs.append((loc, node))
    _close(open_runs, 0, named)
    for node, (_, name) in named.items():
        if node.name is None:
            node.name = name


def _close(runs, first_depth, named):
    for depth, (loc, node) in enumerate(runs, first_depth):
        name = assigned_name(loc)
        if name and (node not in named or named[node][0] > depth):
            named[node] = (depth, name)


class Namespace:
    """Unique, valid, non-shadowing identifiers: `h`, then `h_1`, `h_2`, ..."""

    def __init__(self, taken=()):
        self.used = set(RESERVED) | set(taken)
        self.counts = {}

    def fresh(self, base):
        base = _identifier(base)
        if base not in self.used:
            self.used.add(base)
            return base
        n = self.counts.get(base, 0)
        while True:
            n += 1
            candidate = f"{base}_{n}"
            if candidate not in self.used:
                self.counts[base] = n
                self.used.add(candidate)
                return candidate


@functools.lru_cache(maxsize=4096)
def _identifier(base):
    """`base` as an identifier: `v` for nothing, `_` for what is not a word character."""
    base = re.sub(r"\W", "_", base or "v").strip("_") or "v"
    return "v" + base if base[0].isdigit() else base
