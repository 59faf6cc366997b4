"""Name recorded values after the user's own variables.

A statement `h = relu(x @ W + b)` makes several nodes; the value bound to `h` is the last
node made while that statement ran (inner calls included). So for each statement, at each
depth of the user's call stack, the last node of every uninterrupted run of nodes made
under it gets the statement's target name. Outer statements win over inner ones, since the
top-level function is what the reader has in front of them.

A line holding several statements (`a = np.sin(x); b = np.cos(x)`) is told apart by the
columns of the call each frame is in (Python 3.11+ code positions); where those are not
known (Python 3.10, a frame in generated code) its values get no name rather than a
neighbour's.
"""

import ast
import builtins
import functools
import keyword
import linecache
import re

_RETURN = re.compile(r"^return\b")
_TARGET = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*(?:[-+*/@]|\*\*|//)?=(?!=)")
# names generated code must be able to read: keywords, builtins, the modules it calls
RESERVED = (set(keyword.kwlist) | set(dir(builtins))
            | {"np", "math", "random", "operator", "numexpr", "scipy", "l", "O", "I"})


def assigned_name(loc):
    """The variable a source line assigns to (`h = ...`, `h += ...`), or None; a value a
    function returns is named after the function (`return h @ W2 + b2` in `predict`)."""
    line = linecache.getline(loc[0], loc[1]).strip()
    match = _TARGET.match(line)
    if match:
        return match.group(1)
    return _function_at(loc) if _RETURN.match(line) else None


def _function_at(loc):
    """The name of the innermost function (not a lambda) whose body holds loc's line, when
    the line returns one value (not a tuple, a list or a dict of several: each is its own)."""
    functions, returns = _functions(loc[0])
    best = None
    for first, last, name in functions:
        if first < loc[1] <= last and (best is None or first > best[0]):
            best = (first, name)
    if best is None or isinstance(returns.get(loc[1]), ast.Tuple | ast.List | ast.Dict | ast.Set):
        return None
    return best[1]


@functools.lru_cache(maxsize=16)
def _functions(filename):
    """A file's functions, (first line, last line, name), and what each line returns: one
    walk of its tree (names are asked for line by line, a long trace asks thousands)."""
    tree = _parse(filename)
    functions, returns = [], {}
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            functions.append((node.lineno, node.end_lineno or 0, node.name))
        elif isinstance(node, ast.Return):
            returns.setdefault(node.lineno, node.value)
    return functions, returns


def statement_of(loc, frame):
    """Which statement of loc's line `frame` runs, and where in it: (index, offset).

    The index is None when the line holds one statement (or none); else the statement's
    index in _statements_on(loc), or -1 when that is not known (no columns, a position in
    no statement: an `if` header). The offset is the frame's instruction (None: no
    frame), which tells a statement run again (a loop's body) from the same run going
    on: a run's instructions never go back. None when neither is known."""
    offset = frame.f_lasti if frame is not None else None
    statements = _statements_on(loc)
    if statements is None:
        return None if offset is None else (None, offset)
    position = _position(frame) if frame is not None else None
    if position is not None:
        for i, (start, end, _) in enumerate(statements):
            if start <= position < end:
                return i, offset
    return -1, offset


def name_forward(nodes):
    """Give forward nodes the names of the variables the user bound them to: per depth of
    the user's stack, the last node of each run of one statement (a loop's body run four
    times is four runs: `h`, `h_1`, `h_2`, `h_3`, not `tanh, tanh_1, tanh_2, h`)."""
    named = {}  # node -> (depth, name); smaller depth (outer statement) wins
    open_runs = []  # per depth from the outermost: (statement, last node, its offset)
    for node in nodes:
        if not node.stack:  # an input read on the way (a global): no statement of its own
            continue
        chain = node.stack[::-1]  # outermost first
        kept = node.statements[::-1] if node.statements is not None else (None,) * len(chain)
        chain = tuple((loc, k[0] if k else None) for loc, k in zip(chain, kept))
        offsets = tuple(k[1] if k else None for k in kept)
        for depth in range(len(open_runs)):
            statement, _, offset = open_runs[depth]
            if depth >= len(chain) or statement != chain[depth] or \
                    _again(offset, offsets[depth]):
                _close(open_runs[depth:], depth, named)
                del open_runs[depth:]
                break
        for depth, loc in enumerate(chain):
            if depth < len(open_runs):
                open_runs[depth] = (loc, node, offsets[depth])
            else:
                open_runs.append((loc, node, offsets[depth]))
    _close(open_runs, 0, named)
    for node, (_, name) in named.items():
        if node.name is None:
            node.name = name


def _again(before, now):
    """The statement runs again: its instruction went back (two nodes of one call, as
    nn.relu's, are at the same instruction: one run)."""
    return before is not None and now is not None and now < before


def _close(runs, first_depth, named):
    for depth, (statement, node, _) in enumerate(runs, first_depth):
        name = _statement_name(statement)
        if name and (node not in named or named[node][0] > depth):
            named[node] = (depth, name)


def _statement_name(statement):
    if type(statement[0]) is str:  # a plain loc (filename, line)
        return assigned_name(statement)
    loc, index = statement
    if index is None:
        return assigned_name(loc)
    statements = _statements_on(loc)
    return statements[index][2] if statements and index >= 0 else None


@functools.lru_cache(maxsize=1024)
def _statements_on(loc):
    """((start, end, assigned name or None), ...) of the simple statements on loc's line,
    positions as (line, column), when there are several; None when there is one. A line
    with a `;` in a file that does not parse gives (): several, none of them known."""
    if ";" not in linecache.getline(loc[0], loc[1]):
        return None
    tree = _parse(loc[0])
    if tree is None:
        return ()
    found = tuple(((s.lineno, s.col_offset), (s.end_lineno, s.end_col_offset), _target(s, loc[0]))
                  for s in ast.walk(tree)
                  if isinstance(s, ast.stmt) and not hasattr(s, "body")
                  and s.lineno <= loc[1] <= s.end_lineno)
    return found if len(found) > 1 else None


@functools.lru_cache(maxsize=16)
def _parse(filename):
    try:
        return ast.parse("".join(linecache.getlines(filename)))
    except (SyntaxError, ValueError):
        return None


def _target(statement, filename):
    """The variable a simple statement assigns to, as assigned_name reads it from a line."""
    if isinstance(statement, ast.Return):
        return _function_at((filename, statement.lineno))
    target = getattr(statement, "target", None)  # `h += ...`, `h: float = ...`
    if isinstance(statement, ast.Assign):
        target = statement.targets[0]
    return target.id if isinstance(target, ast.Name) else None


def _position(frame):
    """(line, column) where the instruction frame runs starts, or None (Python 3.10)."""
    positions = _positions(frame.f_code)
    i = frame.f_lasti // 2
    if positions is None or not 0 <= i < len(positions):
        return None
    line, _, column, _ = positions[i]
    return None if line is None or column is None else (line, column)


@functools.lru_cache(maxsize=256)
def _positions(code):
    return tuple(code.co_positions()) if hasattr(code, "co_positions") else None


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
