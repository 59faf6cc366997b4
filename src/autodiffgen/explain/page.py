"""Explained functions -> one self-contained HTML page: the user's source, the generated
forward and backward, and the graph side by side, for each function a section of its own.

Everything the page says is written here, escaped (html.escape) where it is made; the
page's script (assets.py) only shows and hides it: clicking a user line marks the
elements that carry its key (`data-key`: the line's generated statements and its details)
and the graph's nodes that its details name (`data-nodes`). Nothing is fetched: the CSS,
the script and the SVG are inline.
"""

import html
import os
import shutil

from ..picture import render
from .assets import CSS, SCRIPT


def page(functions, title, draw=None):
    """The page of a list of Explained. `draw`: the graph as an SVG (graphviz's `dot`),
    or its text listing when False, or when None and graphviz is not installed."""
    if draw is None:
        draw = shutil.which("dot") is not None
    sections = "\n".join(_section(i, ex, draw) for i, ex in enumerate(functions))
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{_e(title)}</title>
<style>{CSS}</style>
</head>
<body>
<header>
<h1>{_e(title)}</h1>
<p>Click a highlighted line of your code: the statements it became are marked in the
generated <span class="key forward">forward</span> and <span class="key backward">backward</span>,
and below are the values they compute, their sizes, and what the forward saves for the
backward.</p>
</header>
{sections}
<script>{SCRIPT}</script>
</body>
</html>
"""


def _section(index, ex, draw):
    keys = _keys(ex)
    sizes = f" Sizes at {ex.batch[0]} = {ex.batch[1]}." if ex.batch else ""
    return f"""<section class="function" id="function-{index}">
<h2>{_e(ex.name)}</h2>
<p class="signature">traced at ({_e(ex.signature)}).{_e(sizes)}</p>
<div class="columns">
<div class="pane source"><h3>your code</h3>{_source(ex, keys)}</div>
<div class="pane generated"><h3>generated forward and backward</h3>{_generated(ex, keys)}</div>
<div class="pane graph">{_graph(ex, draw)}</div>
</div>
<div class="details">
<p class="hint">Click a highlighted line of your code (or a generated statement).</p>
{"".join(_details(ex, key, user) for key, user in keys.items())}
</div>
</section>"""


def _keys(ex):
    """{'0-12': UserLine}: a user line's key, its file's place in ex.files and its line."""
    place = {name: i for i, (name, _) in enumerate(ex.files)}
    return {f"{place[user.file]}-{user.line}": user for user in
            sorted(ex.lines.values(), key=lambda u: (place[u.file], u.line))}


def _source(ex, keys):
    keys = {(user.file, user.line): key for key, user in keys.items()}
    parts = []
    for name, numbered in ex.files:
        rows = []
        for number, text in numbered.items():
            key = keys.get((name, number))
            attrs = f' class="line user" data-key="{key}" tabindex="0"' if key else \
                ' class="line"'
            rows.append(f'<span{attrs}><span class="no">{number}</span>{_e(text)}</span>')
        parts.append(f'<div class="file" title="{_e(name)}">{_e(os.path.basename(name))}'
                     f'</div><pre>{"".join(rows)}</pre>')
    return "".join(parts)


def _generated(ex, keys):
    marks = {number: (key, kind) for key, user in keys.items() for number, kind in user.code}
    rows = []
    for number, text in enumerate(ex.source.splitlines(), 1):
        section = ex.sections.get(number)
        classes = ["line"] + ([f"in-{section}"] if section else [])
        attrs = ""
        if number in marks:
            key, kind = marks[number]
            classes += ["gen", kind]
            attrs = f' data-key="{key}"'
        rows.append(f'<span class="{" ".join(classes)}"{attrs}><span class="no">{number}'
                    f'</span>{_e(text)}</span>')
    return f'<pre>{"".join(rows)}</pre>'


def _graph(ex, draw):
    if not draw:
        return f"<h3>graph</h3><pre>{_e(ex.picture.text())}</pre>"
    svg = render(ex.picture.dot(), "svg").decode("utf-8")
    return ('<h3>graph <button type="button" class="fit">fit to the pane</button></h3>'
            f'<div class="svg">{svg[svg.find("<svg"):]}</div>')  # (no XML prolog inline)


def _details(ex, key, user):
    where = f"{os.path.basename(user.file)}:{user.line}"
    steps = [("forward", "Forward"), ("backward", "Backward"), ("tangents", "Tangents"),
             ("update", ex.update or "Update")]
    said = "".join(f"<li><b>{_e(label)}</b>: generated lines {_numbers(user.lines(kind))}</li>"
                   for kind, label in steps if user.lines(kind))
    saved = [v for v in user.values if v.saved]
    kept = ", ".join(f"<code>{_e(v.name)}</code> ({_e(v.type)}, {_size(v.nbytes)})"
                     for v in saved) if saved else "nothing: the backward reads no value " \
        "this line computes"
    return f"""<div class="detail" data-key="{key}" data-nodes="{_e(" ".join(user.nodes))}" hidden>
<h4><code>{_e(where)}</code> <code>{_e(user.text)}</code></h4>
<ul>{said}<li><b>Saved for the backward</b>: {kept}</li></ul>
{_table(user.values)}
</div>"""


def _table(values):
    if not values:
        return ""
    rows = "".join(
        f"<tr class=\"{v.section}\"><td><code>{_e(v.name or '(inline)')}</code></td>"
        f"<td>{_e(v.prim)}</td><td>{_e(v.section)}</td><td><code>{_e(v.type)}</code></td>"
        f"<td class=\"num\">{_size(v.nbytes)}</td><td>{_e(_memory(v))}</td></tr>"
        for v in values)
    return ("<table><thead><tr><th>value</th><th>primitive</th><th>section</th>"
            "<th>shape</th><th>bytes</th><th>memory</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>")


def _memory(value):
    notes = [value.memory] + (["saved for the backward"] if value.saved else []) + \
        (["recomputed in the backward, not saved"] if value.recomputed else [])
    return "; ".join(notes)


def _numbers(numbers):
    return ", ".join(str(n) for n in numbers)


def _size(nbytes):
    """'160 B', '31.2 KiB', '1.5 MiB'."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes} B"


def _e(text):
    return html.escape(str(text), quote=True)
