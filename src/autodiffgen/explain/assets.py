"""The explain page's style sheet and script, inlined into every page (page.py).

The script is plain JavaScript with no library: a click on an element with a `data-key`
(a user line, or a generated statement) marks every element of its section with that key,
shows the details with that key, marks the graph's nodes those details name, and scrolls
each pane (not the page) to what it marked. Colours follow the graph picture's: forward
blue, backward orange, a training step's update purple.
"""

CSS = """
body { font-family: system-ui, sans-serif; margin: 1em 1.5em; color: #222; }
h1 { font-size: 1.3em; margin: 0 0 .3em; }
h2 { font-size: 1.1em; margin: 1.2em 0 .1em; font-family: monospace; }
h3 { font-size: .9em; margin: 0 0 .4em; color: #555; }
h4 { font-size: .95em; margin: 0 0 .5em; }
.signature { margin: 0 0 .6em; color: #555; font-size: .85em; }
.key { padding: 0 .3em; border-radius: 3px; }
.key.forward { background: #bcd7f2; } .key.backward { background: #f7c39a; }
.columns { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1.3fr)
  minmax(0, 1fr); gap: .8em; }
@media (max-width: 1000px) { .columns { grid-template-columns: minmax(0, 1fr); } }
.pane { position: relative; border: 1px solid #ccc; border-radius: 4px; padding: .5em;
  max-height: 55vh; overflow: auto; }
.file { font-family: monospace; font-size: .8em; color: #555; margin-top: .3em; }
pre { margin: 0; font-size: 12px; line-height: 1.45; }
.line { display: block; white-space: pre; }
.no { display: inline-block; width: 3.2em; padding-right: .8em; text-align: right;
  color: #999; user-select: none; }
.line.user { cursor: pointer; background: #f3f7fc; }
.line.user:hover, .line.user:focus { background: #e2ecf8; outline: none; }
.line.gen { cursor: pointer; }
.in-backward { box-shadow: inset 3px 0 #f7c39a; }
.in-update { box-shadow: inset 3px 0 #dcc3ea; }
.in-forward { box-shadow: inset 3px 0 #bcd7f2; }
.line.user.hl { background: #ffe27a; }
.line.gen.forward.hl, .line.gen.tangents.hl { background: #bcd7f2; }
.line.gen.backward.hl { background: #f7c39a; }
.line.gen.update.hl { background: #dcc3ea; }
.svg.fit svg { width: 100%; height: auto; }
button.fit { font-size: .8em; margin-left: .5em; }
.svg g.node.hl polygon, .svg g.node.hl path, .svg g.node.hl ellipse {
  stroke: #c99700; stroke-width: 4px; }
.details { margin-top: .8em; border: 1px solid #ccc; border-radius: 4px; padding: .6em .8em;
  min-height: 4em; }
.details ul { margin: 0 0 .6em; padding-left: 1.2em; }
.hint { color: #777; margin: 0; }
table { border-collapse: collapse; font-size: .85em; }
th, td { border-bottom: 1px solid #e4e4e4; padding: .15em .7em; text-align: left; }
td.num { text-align: right; }
tr.forward td:first-child { box-shadow: inset 3px 0 #bcd7f2; }
tr.backward td:first-child { box-shadow: inset 3px 0 #f7c39a; }
tr.update td:first-child { box-shadow: inset 3px 0 #dcc3ea; }
"""

SCRIPT = """
(function () {
  "use strict";
  function each(list, fun) { Array.prototype.forEach.call(list, fun); }

  function reveal(element) {  // scroll its pane to it, never the page
    var pane = element.closest(".pane");
    if (!pane) { return; }
    var at = element.getBoundingClientRect(), box = pane.getBoundingClientRect();
    pane.scrollTop += at.top - box.top - pane.clientHeight / 3;
    if (at.left < box.left || at.right > box.right) {
      pane.scrollLeft += at.left - box.left - pane.clientWidth / 3;
    }
  }

  function select(section, key) {
    each(section.querySelectorAll(".hl"), function (el) { el.classList.remove("hl"); });
    var nodes = [], shown = {};
    each(section.querySelectorAll("[data-key]"), function (el) {
      var on = el.getAttribute("data-key") === key;
      if (el.classList.contains("detail")) {
        el.hidden = !on;
        if (on) { nodes = el.getAttribute("data-nodes").split(" "); }
        return;
      }
      if (!on) { return; }
      el.classList.add("hl");
      var pane = el.closest(".pane");
      if (pane && !shown[pane.className]) { shown[pane.className] = true; reveal(el); }
    });
    each(section.querySelectorAll(".hint"), function (el) { el.hidden = true; });
    each(section.querySelectorAll("svg g.node"), function (g) {
      var title = g.querySelector("title");
      if (title && nodes.indexOf(title.textContent) >= 0) {
        g.classList.add("hl");
        if (!shown.graph) { shown.graph = true; reveal(g); }
      }
    });
  }

  each(document.querySelectorAll("section.function"), function (section) {
    section.addEventListener("click", function (event) {
      if (event.target.closest("button.fit")) {  // the graph at its size, or the pane's
        each(section.querySelectorAll(".svg"), function (el) { el.classList.toggle("fit"); });
        return;
      }
      var line = event.target.closest(".line[data-key]");
      if (line && section.contains(line)) { select(section, line.getAttribute("data-key")); }
    });
    section.addEventListener("keydown", function (event) {
      var line = event.target.closest(".line.user");
      if (line && (event.key === "Enter" || event.key === " ")) {
        event.preventDefault();
        select(section, line.getAttribute("data-key"));
      }
    });
    var first = section.querySelector(".line.user");
    if (first) { reveal(first); }
  });
})();
"""
