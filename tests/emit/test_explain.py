"""The explain page (autodiffgen.explain, `autodiffgen explain`): which generated statements
a user line became, checked against the comments `autodiffgen emit` prints; the values,
sizes and residuals it lists; its escaping; the command line; and the page itself in
headless Chromium (Debian's chromium and chromedriver, driven by Selenium): no console
error, a click on a user line marks its forward and backward statements."""

import os
import re
import shutil
import struct

import numpy as np
import pytest

from autodiffgen import cli
from autodiffgen.explain import explain_html, explained, page
from autodiffgen.explain.explained import sections_of

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIGITS = os.path.join(ROOT, "examples", "digits.py")
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
HOSTILE = "</script><img src=x onerror=\"alert(1)\"> & 'q'"

MODEL = f'''\
import numpy as np

from autodiffgen import grad, value_and_grad


@value_and_grad(argnums=(0, 1), example=dict(W="f64[3,4]", V="f64[4,2]", x="f64[5,3]"))
def loss(W, V, x):
    """A 3-4-2 tanh MLP's mean squared output. {HOSTILE}"""
    h = np.tanh(x @ W)
    out = h @ V  # {HOSTILE}
    return np.mean(out ** 2)


energy = grad(lambda v: np.sum(np.exp(v) * v), example=dict(v="f32[6]"))
'''
TANH_LINE, OUT_LINE = 9, 10


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "teach.py"
    path.write_text(MODEL)
    return str(path)


def emitted(model, capsys, function="loss"):
    """The source `autodiffgen emit` prints for one function of the model."""
    assert cli.main(["emit", model, "--function", function]) == 0
    return capsys.readouterr().out


def statements_from_comments(source, where):
    """{section: [generated line numbers]} of user line `where` ('teach.py:9'), read the
    way a person reads emit's output: a statement's comment names the user's line on the
    first line of its run (`teach.py:9  h = ...`, `grad of tanh, teach.py:9`), `grad of
    matmul` alone carries on at the same line, the seed of the backward (`seed: d loss /
    d itself`) is at the line that computed the output (the forward's last), and the run
    goes on over uncommented lines and `del`s to the next comment or section header."""
    current = last = None
    found, sections = {}, sections_of(source)
    for number, line in enumerate(source.splitlines(), 1):
        code, _, comment = line.partition("  # ")
        if code.strip().startswith("#"):  # a header, or a comment too long to follow code
            code, comment = "", code.strip()[2:]
        last = current if sections[number] == "forward" else last
        if comment:
            at = re.search(r"\b(\w+\.py:\d+)\b", comment)
            current = at.group(1) if at else last if comment.startswith("seed: ") else \
                current if comment.startswith("grad of ") else None
        if code.strip().startswith("return "):
            current = None
        if current == where and code.strip() and not code.strip().startswith("del "):
            found.setdefault(sections[number], []).append(number)
    return found


# ---- the data: which lines, which values ---------------------------------------------------
def test_a_user_line_maps_to_the_statements_emit_prints_for_it(model, capsys):
    source = emitted(model, capsys)
    module = cli.load_module(model)
    args = cli.example_args("loss", module.loss, {})
    ex = explained(module.loss, *args)
    assert ex.source == source.rstrip("\n") + "\n"  # the code a call runs, as emit prints it
    for line in (TANH_LINE, OUT_LINE, OUT_LINE + 1):
        user = ex.lines[(model, line)]
        expected = statements_from_comments(source, f"teach.py:{line}")
        assert {"forward": user.lines("forward"), "backward": user.lines("backward")} == \
            expected, line
    tanh = ex.lines[(model, TANH_LINE)]
    assert tanh.text == "h = np.tanh(x @ W)"
    assert any("np.tanh(" in source.splitlines()[n - 1] for n in tanh.lines("forward"))
    assert any("g_W" in source.splitlines()[n - 1] for n in tanh.lines("backward"))


def test_values_sizes_and_residuals(model):
    module = cli.load_module(model)
    ex = explained(module.loss, *cli.example_args("loss", module.loss, {}))
    assert ex.batch == ("n", 5)  # the code serves every batch size; sizes at the traced 5
    h = [v for v in ex.lines[(model, TANH_LINE)].values if v.name == "h"]
    assert h and {(v.type, v.nbytes, v.section) for v in h} == {("f64[n,4]", 5 * 4 * 8,
                                                                 "forward")}
    assert [v.name for v in ex.lines[(model, TANH_LINE)].values if v.saved] == ["h"]
    grads = {v.name: v for v in ex.lines[(model, TANH_LINE)].values if v.section == "backward"}
    assert grads["g_W"].type == "f64[3,4]" and grads["g_W"].nbytes == 96
    # every residual emit's `# saved by the forward:` line names is a saved value here
    saved_line = next(line for line in ex.source.splitlines() if "saved by the forward" in line)
    names = re.split(r", | and ", saved_line.split(":", 1)[1].strip())
    saved = {v.name for user in ex.lines.values() for v in user.values if v.saved}
    assert set(names) <= saved and "out" in saved


def test_a_function_of_python_floats_and_its_numpy_twin():
    def f(a, b):
        return a * b + np.sin(a)

    ex = explained(f, 1.5, 2.0)
    user, = ex.lines.values()
    lines = ex.source.splitlines()
    assert [lines[n - 1].split("=")[0].strip() for n in user.lines("backward")] == \
        ["cos", "g_a", "cos", "g_a"]  # the math function's (in its `try:`), the twin's


def test_a_training_step_has_its_update_section():
    module = cli.load_module(DIGITS)
    step, = [gf for _, gf in cli.find_functions(module)]
    ex = explained(step, *cli.example_args("step", step, {}))
    assert ex.update.startswith("Adam update")
    assert "update" in set(ex.sections.values())
    assert '<span class="key forward">' in page([ex], "digits", draw=False)


# ---- the page -------------------------------------------------------------------------------
def test_page_escapes_everything_and_fetches_nothing(model):
    module = cli.load_module(model)
    text = explain_html(module.loss, *cli.example_args("loss", module.loss, {}), draw=False)
    assert "<img" not in text and "alert(1)\">" not in text
    assert "&lt;/script&gt;&lt;img src=x onerror=&quot;alert(1)&quot;&gt; &amp; &#x27;q&#x27;" \
        in text  # in the source pane, and quoted by the generated code's comment
    assert text.count("<script>") == 1 and text.count("</script>") == 1
    assert not re.search(r"<(link|img|iframe)\b|<[a-z][^<>]*\b(src|href)\s*=|@import|url\(",
                         text)  # (the user's `src=` is text, escaped)
    assert "<svg" not in text and "loss_value_and_grad(W:f64[3,4]" in text  # the listing


def test_each_user_line_has_its_details(model):
    module = cli.load_module(model)
    text = explain_html(module.loss, *cli.example_args("loss", module.loss, {}), draw=False)
    key = f"0-{TANH_LINE}"
    assert f'class="line user" data-key="{key}"' in text
    detail = text[text.index(f'<div class="detail" data-key="{key}"'):]
    detail = detail[:detail.index("</div>")]
    assert "<b>Saved for the backward</b>: <code>h</code> (f64[n,4], 160 B)" in detail
    assert "<td><code>g_W</code></td><td>matmul</td><td>backward</td>" in detail
    assert re.search(r'data-nodes="[^"]*\bh\b', detail)  # the graph's node, to mark


@pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz's dot is not installed")
def test_graph_is_an_inline_svg_with_graphviz(model):
    module = cli.load_module(model)
    text = explain_html(module.loss, *cli.example_args("loss", module.loss, {}))
    assert text.count("<svg") == 1 and "<?xml" not in text and "<!DOCTYPE svg" not in text
    assert "<title>h</title>" in text


# ---- the command line -----------------------------------------------------------------------
def test_cli_writes_one_section_per_function(model, tmp_path, capsys):
    out = tmp_path / "report.html"
    assert cli.main(["explain", model, "-o", str(out)]) == 0
    assert "wrote" in capsys.readouterr().err
    text = out.read_text()
    assert text.count('<section class="function"') == 2
    assert "loss_value_and_grad" in text and "energy_value_and_grad" not in text  # a lambda:
    assert "f_value_and_grad" in text                                             # "f"
    assert cli.main(["explain", model, "--function", "energy", "--arg", "v=f64[2]",
                     "-o", str(out)]) == 0
    text = out.read_text()
    assert text.count('<section class="function"') == 1 and "v: float64[2]" in text


def test_cli_usage_errors(model, tmp_path, capsys):
    assert cli.main(["explain", str(tmp_path / "missing.py"), "-o", "x.html"]) == 2
    assert "no such file" in capsys.readouterr().err
    assert cli.main(["explain", model, "--function", "nope", "-o", "x.html"]) == 2
    with pytest.raises(SystemExit):  # -o is required: a page is not printed
        cli.main(["explain", model])
    assert not os.path.exists("x.html")


# ---- in a browser ----------------------------------------------------------------------------
@pytest.fixture
def browser(monkeypatch):
    """Headless Chromium from Debian's packages; never Selenium Manager (no download)."""
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        pytest.skip(f"needs {CHROMIUM} and {CHROMEDRIVER} (Debian: chromium, chromium-driver)")
    webdriver = pytest.importorskip("selenium.webdriver", reason="needs selenium")
    from selenium.webdriver.chrome.service import Service

    monkeypatch.setenv("SE_OFFLINE", "true")  # (a driver path given: it is not asked anyway)
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1500,1000",
                 "--disable-dev-shm-usage"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


def test_clicking_a_line_marks_its_statements_in_chromium(model, tmp_path, capsys, browser):
    from selenium.webdriver.common.by import By

    source = emitted(model, capsys)
    report = tmp_path / "report.html"
    assert cli.main(["explain", model, "--function", "loss", "-o", str(report)]) == 0
    browser.get(report.as_uri())
    assert browser.get_log("browser") == []
    users = browser.find_elements(By.CSS_SELECTOR, ".line.user")
    tanh, = [u for u in users if u.text.endswith("h = np.tanh(x @ W)")]
    tanh.click()

    def marked(kind):
        return [int(e.find_element(By.CLASS_NAME, "no").text)
                for e in browser.find_elements(By.CSS_SELECTOR, f".line.gen.{kind}.hl")]

    expected = statements_from_comments(source, f"teach.py:{TANH_LINE}")
    assert marked("forward") == expected["forward"] and marked("backward") == expected["backward"]
    assert "hl" in tanh.get_attribute("class")
    detail, = [d for d in browser.find_elements(By.CLASS_NAME, "detail") if d.is_displayed()]
    assert "Saved for the backward: h (f64[n,4], 160 B)" in detail.text
    if shutil.which("dot"):
        assert browser.find_elements(By.CSS_SELECTOR, "svg g.node.hl")
    # a generated statement selects the user line it came from
    backward_of_out = statements_from_comments(source, f"teach.py:{OUT_LINE}")["backward"]
    browser.find_elements(By.CSS_SELECTOR, ".line.gen")[0].click()  # (another line first)
    line = browser.find_element(By.XPATH, f"//span[contains(@class, 'gen')][span[@class='no' "
                                f"and text()='{backward_of_out[0]}']]")
    line.click()
    assert marked("backward") == backward_of_out
    selected, = browser.find_elements(By.CSS_SELECTOR, ".line.user.hl")
    assert selected.text.startswith(f"{OUT_LINE}") and "out = h @ V" in selected.text
    shot = tmp_path / "explain.png"
    assert browser.save_screenshot(str(shot))
    data = shot.read_bytes()
    width = struct.unpack(">I", data[16:20])[0]
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000 and width >= 1000
    assert browser.get_log("browser") == []  # nothing went wrong on the clicks either
