"""A picture of the graph (picture.py): graph_of's DOT text and make_jaxpr-like listing, read
back structurally; `autodiffgen graph` printing the listing and writing .dot; the message
when graphviz is missing; an SVG when it is installed."""

import os
import re
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import autodiffgen
from autodiffgen import cli, graph_of
from autodiffgen.picture import GraphvizNotFoundError, render

HERE = os.path.basename(__file__)


def mlp_loss(params, x, y):
    h = np.tanh(x @ params["W1"] + params["b1"])
    out = h @ params["W2"]
    return np.mean((out - y) ** 2)


def _args(dtype=np.float64):
    rng = np.random.default_rng(0)
    params = {"W1": rng.normal(size=(3, 4)).astype(dtype), "b1": np.zeros(4, dtype),
              "W2": rng.normal(size=(4, 1)).astype(dtype)}
    return params, rng.normal(size=(8, 3)).astype(dtype), rng.normal(size=(8, 1)).astype(dtype)


def _line_of(text):
    with open(__file__) as f:
        lines = f.read().splitlines()
    return next(i + 1 for i, line in enumerate(lines) if text in line and "def " not in line)


def parse_dot(text):
    """(node ids, edges, cluster names) of DOT text, checking its braces balance."""
    depth = 0
    for ch in re.sub(r'"(\\.|[^"\\])*"', '""', text):  # braces in labels do not count
        depth += {"{": 1, "}": -1}.get(ch, 0)
        assert depth >= 0
    assert depth == 0
    nodes = dict(re.findall(r'^\s*"([^"]+)" \[(.*)\];$', text, re.MULTILINE))
    edges = re.findall(r'^\s*"([^"]+)" -> "([^"]+)"', text, re.MULTILINE)
    clusters = re.findall(r"subgraph (cluster_\w+)", text)
    return nodes, edges, clusters


def test_dot_is_well_formed_and_matches_the_graph():
    picture = graph_of(mlp_loss, *_args())
    text = picture.dot()
    assert text.startswith('digraph "mlp_loss_value_and_grad" {')
    nodes, edges, clusters = parse_dot(text)
    for a, b in edges:
        assert a in nodes and b in nodes, (a, b)
    graph = picture.graph
    outputs = [n for n in nodes if n.startswith("output")]
    assert len(nodes) == len(graph.inputs) + len(graph.nodes) + len(outputs)
    assert sorted(outputs) == sorted(["output[0]", "output[1]['W1']", "output[1]['b1']",
                                      "output[1]['W2']"])
    assert clusters == ["cluster_forward", "cluster_backward"]
    assert sum(1 for a, b in edges if b.startswith("output")) == 4
    # every traced node's edges: one per distinct Node argument
    n_args = sum(len({id(a) for a in n.args if type(a) is type(n)}) for n in graph.nodes)
    assert len(edges) == n_args + 4


def test_marks_forward_backward_residuals_inputs_and_lines():
    picture = graph_of(mlp_loss, *_args())
    nodes, _, _ = parse_dot(picture.dot())
    forward = [k for k, attrs in nodes.items() if "#dbe9f6" in attrs]
    backward = [k for k, attrs in nodes.items() if "#fbe3d0" in attrs]
    inputs = [k for k, attrs in nodes.items() if "input " in attrs]
    saved = {k for k, attrs in nodes.items() if "saved for backward" in attrs}
    assert sorted(inputs) == ["params_W1", "params_W2", "params_b1", "x", "y"]
    assert "h" in forward and "mlp_loss" in forward
    assert {"g_params_W1", "g_params_b1", "g_params_W2"} <= set(backward)
    assert "h" in saved and "mlp_loss" not in saved and not saved & set(backward)
    # each saved value is read by the backward along a red edge, and nothing else is red
    red = {a for a, b in re.findall(r'"([^"]+)" -> "([^"]+)" \[color=red\]', picture.dot())}
    assert red == saved
    line = _line_of('h = np.tanh(x @ params["W1"]')
    assert f"{HERE}:{line}" in nodes["h"]
    assert all(HERE in attrs for k, attrs in nodes.items() if k in forward + backward)


def test_names_are_the_emitted_codes_and_output_is_deterministic():
    args = _args()
    first = graph_of(mlp_loss, *args)
    again = graph_of(autodiffgen.value_and_grad(mlp_loss), *args)
    assert first.dot() == again.dot() and first.text() == again.text()
    source = autodiffgen.emit(mlp_loss, *args)
    nodes, _, _ = parse_dot(first.dot())
    for name in ("h", "mlp_loss", "g_params_W1", "g_params_b1", "g_params_W2"):
        assert name in nodes and re.search(rf"\b{name} = ", source), name


def test_text_listing_lines():
    picture = graph_of(mlp_loss, *_args(np.float32))
    lines = picture.text().splitlines()
    assert lines[0] == ("mlp_loss_value_and_grad(params_W1:f32[3,4], params_b1:f32[4], "
                        "params_W2:f32[4,1], x:f32[n,3], y:f32[n,1])")
    assert lines[1] == "  # forward" and "  # backward" in lines
    assert lines[-1] == ("  return (mlp_loss, {'W1': g_params_W1, 'b1': g_params_b1, "
                         "'W2': g_params_W2})")
    line = _line_of('h = np.tanh(x @ params["W1"]')
    assert f"  h:f32[n,4] = tanh add [saved]  # {HERE}:{line}" in lines
    body = lines[2:lines.index("  # backward")] + lines[lines.index("  # backward") + 1:-1]
    assert len(body) == len(picture.graph.nodes)
    for text in body:
        assert re.fullmatch(r"  \w+:\w+\[[\w,+*-]*\] = \w+ .*  # \S+:\d+", text), text
    assert str(picture) == picture.text()


def test_save_dot_and_errors(tmp_path, monkeypatch):
    picture = graph_of(mlp_loss, *_args())
    path = tmp_path / "g.dot"
    picture.save(str(path))
    assert path.read_text() == picture.dot()
    with pytest.raises(ValueError, match=r"\.jpeg"):
        picture.save(str(tmp_path / "g.jpeg"))
    monkeypatch.setenv("PATH", str(tmp_path))  # no `dot` there
    with pytest.raises(GraphvizNotFoundError, match="install graphviz"):
        picture.save(str(tmp_path / "g.svg"))
    assert picture._repr_svg_() is None
    assert not (tmp_path / "g.svg").exists()


def branchy(x, k):
    if x.sum() > 0:
        y = np.sin(x) * k
    else:
        y = np.cos(x)
    z = autodiffgen.checkpoint(lambda a: np.exp(a) * a)(y)
    return np.sum(z[x > 0.5]), {"aux": y}


def test_guards_checkpoints_and_aux():
    picture = graph_of(branchy, np.linspace(0, 1, 5), 3, has_aux=True)
    nodes, edges, _ = parse_dot(picture.dot())
    guards = [k for k, attrs in nodes.items() if "shape=diamond" in attrs]
    assert len(guards) == 2  # the branch, and the mask's count
    assert all(a in nodes and b in nodes for a, b in edges)
    assert "output[0][1]['aux']" in nodes and ("y", "output[0][1]['aux']") in edges
    text = picture.text()
    assert "= recompute_from y g_z" in text and "getitem:f64[count] = getitem z" in text
    assert text.splitlines()[-1] == "  return ((branchy, {'aux': y}), g_x)"


@pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz's dot is not installed")
def test_svg_with_graphviz(tmp_path):
    picture = graph_of(mlp_loss, *_args())
    path = tmp_path / "g.svg"
    picture.save(str(path))
    assert "<svg" in path.read_text()
    assert "<svg" in picture._repr_svg_()


MODEL = '''\
import numpy as np

from autodiffgen import value_and_grad


@value_and_grad(example=dict(w="f64[3]", x="f64[5,3]"))
def loss(w, x):
    z = np.sin(x @ w)
    return np.sum(z ** 2)


@value_and_grad(example=dict(v="f32[4]"))
def other(v):
    return np.sum(np.exp(v))
'''


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "model.py"
    path.write_text(MODEL)
    return str(path)


def test_cli_prints_the_listing(model, capsys):
    assert cli.main(["graph", model, "--function", "loss"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "loss_value_and_grad(w:f64[3], x:f64[n,3])"
    assert "  z:f64[n] = sin matmul [saved]  # model.py:8" in out
    assert cli.main(["graph", model]) == 0
    assert "other_value_and_grad(v:f32[4])" in capsys.readouterr().out


def test_cli_writes_dot(model, tmp_path, capsys):
    target = tmp_path / "loss.dot"
    assert cli.main(["graph", model, "--function", "loss", "-o", str(target)]) == 0
    nodes, _, _ = parse_dot(target.read_text())
    assert "z" in nodes and "model.py:8" in nodes["z"]
    assert "wrote" in capsys.readouterr().err
    assert cli.main(["graph", model, "-o", str(target)]) == 2  # two functions: pick one
    assert "--function" in capsys.readouterr().err


def test_cli_without_graphviz(model, tmp_path):
    env = dict(os.environ, PATH=str(tmp_path))  # the interpreter by path, no `dot`
    done = subprocess.run([sys.executable, "-m", "autodiffgen", "graph", model, "--function",
                           "loss", "-o", str(tmp_path / "loss.svg")], env=env,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert done.stderr.strip() == textwrap.dedent("""\
        autodiffgen: error: graphviz's `dot` program is not on PATH: install graphviz \
(apt-get install graphviz, brew install graphviz, conda install graphviz) or save as .dot""")


def test_the_guide_listing_is_what_the_snippet_prints(tmp_path):
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "guide",
                           "pictures.md")) as f:
        guide = f.read()
    section = guide[guide.index("## graph_of"):]
    code = section[section.index("```python\n") + 10:]
    code = code[:code.index("```")]
    listing = section[section.index("```text\n") + 8:]
    listing = listing[:listing.index("```")]
    (tmp_path / "model.py").write_text(code)
    env = {k: v for k, v in os.environ.items() if k != "AUTODIFFGEN_PASSES"}  # as shown
    done = subprocess.run([sys.executable, "model.py"], cwd=tmp_path, capture_output=True,
                          text=True, check=True, env=env)
    assert done.stdout == listing + "\n"
    nodes, _, _ = parse_dot((tmp_path / "loss.dot").read_text())
    assert "saved for backward" in nodes["z"]


def test_a_compiled_training_step_is_drawn_whole():
    """graph_of(compile_step(loss, opt), params, *batch): forward, backward and the update
    that writes the new parameters, at the optimizer's initial state."""
    from autodiffgen.optim import Adam, compile_step

    def loss(params, x, y):
        return np.mean((np.tanh(x @ params["W"]) - y) ** 2)

    rng = np.random.default_rng(7)
    params = {"W": rng.standard_normal((3, 2))}
    x, y = rng.standard_normal((5, 3)), rng.standard_normal((5, 2))
    text = graph_of(compile_step(loss, Adam(lr=1e-2)), params, x, y).text()
    assert text.startswith("loss_train_step(params_W:f64[3,2], state_step:f64[]")
    assert "# forward" in text and "# backward" in text
    assert "= subtract params_W " in text  # the update of the parameters
    assert params["W"].shape == (3, 2) and "state_m_W" in text



def test_a_training_steps_update_is_its_own_section_and_cluster():
    """The optimizer's update is not drawn as forward work: the listing has a section of
    its own after the backward, the DOT a cluster of its own holding the new parameters."""
    from autodiffgen.optim import Adam, compile_step

    def loss(params, x, y):
        return np.mean((np.tanh(x @ params["W"]) - y) ** 2)

    rng = np.random.default_rng(8)
    params = {"W": rng.standard_normal((3, 2))}
    x, y = rng.standard_normal((5, 3)), rng.standard_normal((5, 2))
    picture = graph_of(compile_step(loss, Adam(lr=1e-2)), params, x, y)
    headers = [line.strip() for line in picture.text().splitlines()
               if line.strip().startswith("# ")]
    assert headers[:2] == ["# forward", "# backward"] and len(headers) == 3
    assert "update" in headers[2]
    clusters = picture.dot().split("subgraph cluster_")[1:]
    assert [c.split(" ")[0] for c in clusters] == ["forward", "backward", "update"]
    assert "sqrt" in clusters[2] and "sqrt" not in clusters[0]
    dot = picture.dot()
    new_w = next(line.split(" -> ")[0].strip() for line in dot.splitlines()
                 if line.endswith("-> \"output[1]['W']\";"))
    assert f"{new_w} [label=" in clusters[2].split("}")[0]  # the new W is the update's


def _digits_step():
    """examples/digits.py's compiled Adam step and arguments of its example's shapes
    (the module reads scikit-learn only to load the data)."""
    import importlib.util

    path = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "digits.py")
    spec = importlib.util.spec_from_file_location("digits_for_picture", path)
    digits = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(digits)
    rng = np.random.default_rng(3)
    return digits.step, (digits.init_params(rng), rng.random((64, 64)),
                         rng.integers(0, 10, 64))


@pytest.mark.skipif(os.environ.get("AUTODIFFGEN_LOOPS") == "0",
                    reason="the update is written out parameter by parameter")
def test_a_training_steps_update_is_one_loop_node():
    """The update of each parameter is one `for` in the code and one node in the drawing:
    no `loop_out` value drawn over the input it updates (a name drawn twice, edges from a
    node to itself), the moments of every parameter one input node, the outputs the loop
    writes one output node."""
    step, args = _digits_step()
    dot = graph_of(step, *args).dot()
    nodes, edges, clusters = parse_dot(dot)
    assert clusters == ["cluster_forward", "cluster_backward", "cluster_update"]
    update = dot[dot.index("subgraph cluster_update"):]
    assert re.fullmatch(r'    label="Adam update: optim.py:\d+  Adam._leaf";', update.splitlines()[1])
    declared = re.findall(r'^\s*"([^"]+)" \[', dot, re.MULTILINE)
    assert len(declared) == len(set(declared)) == len(nodes)
    assert all(a in nodes and b in nodes and a != b for a, b in edges)
    assert "loop_out" not in dot
    loops = [k for k, attrs in nodes.items() if "for p, g, m, v in 4 steps" in attrs]
    assert len(loops) == 1 and f'"{loops[0]}" [label=' in update.split("}")[0]
    assert [k for k, attrs in nodes.items() if "input state_m_*\\nW1 b1 W2 b2" in attrs]
    outputs = [k for k, attrs in nodes.items() if "shape=house" in attrs]
    assert len(outputs) == 3  # the loss, the state's step count, what the loop writes
    written = nodes["output[1]['W1'] ..."]
    assert "output[1]['W1' 'b1' 'W2' 'b2']\\noutput[2]['m']['W1' 'b1' 'W2' 'b2']" in written
    assert (loops[0], "output[1]['W1'] ...") in edges
    # 53 and 73 (63 and 84 with the passes off); 82 nodes and 114 edges drawn as before
    assert len(nodes) <= 64 and len(edges) <= 90


def _svg_points(svg):
    width, height = re.search(r'<svg width="([\d.]+)pt" height="([\d.]+)pt"', svg).groups()
    return float(width), float(height)


@pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz's dot is not installed")
def test_a_training_steps_drawing_fits_a_screen(tmp_path):
    """At most 20x12 inches (1920x1152 pixels at graphviz's 96 dpi), and so at a scale
    that reads: drawn at full size it is under 3000x1500 points (6292x1737 before the
    loop was one node)."""
    step, args = _digits_step()
    picture = graph_of(step, *args)
    picture.save(str(tmp_path / "step.png"))
    png = (tmp_path / "step.png").read_bytes()
    width, height = (int.from_bytes(png[k:k + 4], "big") for k in (16, 20))
    assert width <= 1920 and height <= 1152
    full = render(picture.dot().replace('  size="20,12";\n', ""), "svg").decode()
    width, height = _svg_points(full)
    assert width <= 3000 and height <= 1500, (width, height)
    assert 1000 <= _svg_points(picture._repr_svg_())[0] <= 1440  # scaled, not shrunk more
