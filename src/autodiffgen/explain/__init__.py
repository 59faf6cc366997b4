"""`explain_html(f, *args)`: a page that shows what backpropagation computes, for teaching.

One self-contained HTML file (inline CSS, a little plain JavaScript, no network): the
user's source, the generated forward and backward, and the graph side by side; clicking
a line of the user's code marks the statements it became in the forward and in the
backward, and lists the values they compute, their sizes, and the residuals the forward
saves for the backward. `autodiffgen explain model.py -o report.html` (cli.py) writes one
for a file's functions.

The code shown is the code a call runs: explained.py compiles through pipeline.compile,
the one compile path, and reads the emitter's source map rather than the comments.
"""

from .explained import Explained, UserLine, Value, explained
from .page import page

__all__ = ["Explained", "UserLine", "Value", "explain_html", "explained", "page"]


def explain_html(fun, *args, argnums=0, has_aux=False, draw=None, title=None):
    """The explain page of value_and_grad(fun, argnums) at these example arguments (a
    grad or value_and_grad function brings its own argnums and has_aux). `draw`: the
    graph as an SVG (needs graphviz's `dot`) or, when False, as its text listing; None
    draws when `dot` is installed. Write it to a file and open it in a browser."""
    one = explained(fun, *args, argnums=argnums, has_aux=has_aux)
    return page([one], title or f"autodiffgen explain: {one.name}", draw)
