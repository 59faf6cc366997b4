"""MkDocs hook: pages that show generated code get it from autodiffgen at build time.

A page writes `<!-- generated: NAME -->` on a line of its own where `gallery.NAME()`
returns the Markdown to put there, so no generated code is ever pasted into docs/ and
none can go stale.
"""

import importlib.util
import pathlib
import re

MARKER = re.compile(r"^<!-- generated: (\w+) -->$", re.MULTILINE)


def _gallery():
    path = pathlib.Path(__file__).with_name("gallery.py")
    spec = importlib.util.spec_from_file_location("autodiffgen_docs_gallery", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def on_page_markdown(markdown, page, config, files):
    if not MARKER.search(markdown):
        return markdown
    gallery = _gallery()
    return MARKER.sub(lambda m: getattr(gallery, m.group(1))(), markdown)
