"""How the emitted code reads: what a careful person would have written by hand.

No temporary for a transpose read once (`h.T @ g`), no broadcast_to before a ufunc that
broadcasts anyway, `del` of arrays only, the source comment once per user statement, one
name for one buffer within a statement, constants named after what they are, no line over
100 characters (ruff E501), and the wrapping that keeps them so (emit_ast.wrap) never
changes what a line means.
"""

import ast
import itertools
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen import passes
from autodiffgen.api import emit_functions
from autodiffgen.codegen.lines import WIDTH, docstring, wrap

ROOT = pathlib.Path(__file__).parents[2]
RNG = np.random.default_rng(11)


@pytest.fixture(scope="module")
def mlp_source():
    """`autodiffgen emit examples/mlp.py`, as a user runs it."""
    run = subprocess.run([sys.executable, "-m", "autodiffgen", "emit", "examples/mlp.py"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    return run.stdout


def code_lines(source):
    """(code, comment) of each line of the generated function's body."""
    body = source[source.index("\ndef "):].splitlines()[1:]
    return [(line.split("  # ")[0].rstrip(), line.split("  # ", 1)[1] if "  # " in line
             else "") for line in body]


def test_the_mlp_reads_as_written_by_hand(mlp_source):
    lines = [code.strip() for code, _ in code_lines(mlp_source)]
    assert not any(re.fullmatch(r"\w+ = \w+\.T", code) for code in lines)  # no temporary
    assert "g_params_W1 = x.T @ g_add_1" in lines or any(
        re.fullmatch(r"g_params_W1 = x\.T @ \w+", code) for code in lines)
    if passes.ENABLED:  # simplify leaves out the broadcast; one buffer, the user's h
        assert "np.broadcast_to" not in mlp_source
        assert lines[lines.index("h = x @ params_W1"):][:3] == [
            "h = x @ params_W1", "h += params_b1", "np.tanh(h, out=h)"]
    assert "rows = np.arange(n, dtype=np.int64)" in lines
    assert not any(re.match(r"const(_\d+)? = ", code) for code in lines)


def test_del_only_of_arrays(mlp_source):
    # mean and loss are scalars: nothing to free early; h, logits... are arrays
    deleted = {name for code, _ in code_lines(mlp_source) if code.strip().startswith("del ")
               for name in code.strip()[4:].split(", ")}
    assert deleted and "mean" not in deleted and "loss" not in deleted
    assert "h" in deleted  # (with the value computed into its buffer, `del dtanh_1, h`)


def test_the_source_comment_once_per_user_statement(mlp_source):
    comments = [comment for _, comment in code_lines(mlp_source) if comment]
    labels = [c for c in comments if re.match(r"mlp\.py:\d+", c)]
    assert len(labels) == len({c.split()[0] for c in labels})  # one per user line
    for first, second in itertools.pairwise(comments):
        assert first != second
    assert "mlp.py:32  h = np.tanh(x @ params[\"W1\"] + params[\"b1\"])" in mlp_source


def test_no_line_over_100_characters(mlp_source, tmp_path):
    path = tmp_path / "mlp_generated.py"
    path.write_text(mlp_source)
    lint = subprocess.run([sys.executable, "-m", "ruff", "check", "--isolated", "--no-cache",
                           "--extend-select", "E501", "--line-length", "100", str(path)],
                          capture_output=True, text=True, check=False)
    assert lint.returncode == 0, lint.stdout
    assert max(map(len, mlp_source.splitlines())) <= WIDTH


def test_a_broadcast_left_out_before_a_ufunc_computes_the_same_float32():
    def f(x, w):  # the mean's gradient is broadcast against x's shape, then multiplied
        return np.sum(np.mean(x * w, axis=1, keepdims=True) * np.tanh(x))
    x = RNG.normal(size=(5, 3)).astype(np.float32)
    w = RNG.normal(size=(1, 3)).astype(np.float32)
    g = ad.grad(f, argnums=(0, 1))
    gx, gw = g(x, w)
    tx, tw = ad.tape.grad(f, argnums=(0, 1))(x, w)
    assert gx.dtype == gw.dtype == np.float32 and gw.shape == (1, 3)
    np.testing.assert_allclose(gx, tx, rtol=1e-5)
    np.testing.assert_allclose(gw, tw, rtol=1e-5)


def test_a_transpose_of_a_transpose_inlined_keeps_its_operand_alive(monkeypatch):
    """Unoptimized, `x.T.T` is two transposes, both written where they are read: x lives
    until that line, not until the line of the inner one."""
    monkeypatch.setattr(passes, "ENABLED", False)

    def f(x, y):  # a is read once more (a.T) between the two transposes and their reader
        a = x @ y.T
        return np.sum(np.tanh(a.T.T + np.sum(a.T)))
    x, y = RNG.normal(size=(3, 4)), RNG.normal(size=(2, 4))
    source = ad.emit(f, x, y, argnums=(0, 1))
    assert ".T.T" in source
    got = ad.grad(f, argnums=(0, 1))(x, y)
    want = ad.tape.grad(f, argnums=(0, 1))(x, y)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12)


LONG = [
    ("    return (loss, {'W1': g_params_W1, 'b1': g_params_b1, 'W2': g_params_W2, "
     "'b2': g_params_b2, 'W3': g_params_W3, 'b3': g_params_b3})"),
    ("        raise GuardFailure('mlp.py: a global, closure variable or attribute it read is "
     "gone, or something else happened') from None"),
    ("        raise GuardFailure(f'{n} rows: this code serves 2 to 128 rows, the same in x, y, "
     "{{z}} and w, and it was traced at {m!r} rows, which is not what it is now')"),
    ("    out = np.einsum('abcdefghijklmnopqrstuvwxyz,zyxwvutsrqponmlkjihgfedcba->abc', "
     "first_operand, second_operand, optimize=False)"),
    ("    g = _scatter_add(np.full((n, 4), 1.0, dtype=np.float32), (rows, labels[:, None]), "
     "(n, 4, 7), unique=[True, 'a, b', (1, 2)][0])"),
    ("        if module_globals['a_rather_long_name'] is not traced_a_rather_long_name or x.shape "
     "!= (3, 4):"),
]


@pytest.mark.parametrize("line", LONG)
def test_wrap_keeps_lines_short_and_the_code_the_same(line):
    lines = wrap(line)
    assert len(line) > WIDTH
    body = "def f():\n" if line.startswith("    ") and not line.startswith("        ") \
        else "def f():\n  if x:\n"
    suffix = "\n" + " " * (len(line) - len(line.lstrip()) + 4) + "pass" \
        if line.rstrip().endswith(":") else ""
    before = ast.dump(ast.parse(body + line + suffix))
    after = ast.dump(ast.parse(body + "\n".join(lines) + suffix))
    assert before == after
    if "'a_rather_long_name'" not in line:  # a line with no bracket to break in stays
        assert max(map(len, lines)) <= WIDTH


def test_wrapped_docstrings_keep_their_text():
    text = ("Value of loss and its gradient with respect to params, traced at (params: dict "
            "of 6, x: float64[n, 20], y: int64[n]). Serves every batch size 2 <= n <= 128.")
    lines = docstring(text, "    ")
    assert max(map(len, lines)) <= WIDTH and len(lines) == 2
    assert ast.literal_eval("\n".join(lines).strip()).replace("\n    ", " ") == text
    assert "x: float64[n, 20]" in "\n".join(lines)  # a spec is never broken inside


# ---- standalone modules and generated source (from a code review) ----------------------
def _ruff(source):
    return subprocess.run([sys.executable, "-m", "ruff", "check", "--isolated", "--no-cache",
                           "--stdin-filename", "gen.py", "-"], input=source, text=True,
                          capture_output=True, check=False)


@pytest.mark.parametrize("static", [float("inf"), float("nan"), -0.5, "relu", True])
def test_standalone_guards_lint_and_run(static):
    source = ad.emit(lambda x, s: np.sum(x * x), np.ones(2), static, standalone=True)
    assert _ruff(source).returncode == 0, _ruff(source).stdout
    scope = {}
    exec(compile(source, "gen.py", "exec"), scope)  # noqa: S102  generated code
    value, _ = scope["f_value_and_grad"](np.ones(2), static)
    assert value == 2.0


def test_no_unused_numpy_import():
    source = ad.emit(lambda x: x * x, np.array(2.0))
    assert "\nimport numpy" not in source
    assert _ruff(ad.emit(lambda x: x * x, 2.0)).returncode == 0  # its NumPy twin uses np
    source = ad.emit(lambda x: x * x, np.array(2.0), standalone=True)  # its entry checks x
    assert "import numpy as np" in source and _ruff(source).returncode == 0


def test_a_later_function_parameter_does_not_shadow_a_shared_constant():
    C = np.arange(1.0, 4.0)

    def f1(x):
        return np.sum(x * C)

    def f2(const, x):
        return np.sum(x * C) + np.sum(const)
    source, names = emit_functions([(ad.grad(f1), (np.ones(3),)),
                                    (ad.grad(f2, argnums=1), (np.ones(3), np.ones(3)))])
    scope = {}
    exec(source, scope)  # noqa: S102  generated code
    np.testing.assert_allclose(scope[names[1]](np.zeros(3), np.ones(3))[1], C)


def test_source_describes_object_arguments_without_addresses():
    def act(v):
        return v
    source = ad.emit(lambda x, a: np.sum(a(x)), np.ones(2), act)
    assert "0x" not in source


def _sigmoid(z):
    return 1 / (1 + np.exp(-z))


def _two_on_a_line(x):
    a = np.sin(x); b = np.cos(x)  # the case under test
    return np.sum(a * b)


def _gates(z, c):
    i = _sigmoid(z[0]); f = _sigmoid(z[1])  # the case under test
    return np.sum(f * c + i * np.tanh(z[2]))


def _assigned(source):
    """{expression: the name it is assigned to} of the generated forward lines."""
    forward = source[:source.index("# backward")]
    return {code.split(" = ", 1)[1]: code.strip().split(" = ", 1)[0]
            for code, _ in code_lines(forward) if " = " in code}


def test_two_statements_on_one_line_keep_their_own_names():
    x = np.linspace(0.1, 1, 5)
    assigned = _assigned(ad.grad(_two_on_a_line).source(x))
    assert assigned["np.sin(x)"] == "a" and assigned["np.cos(x)"] == "b"
    source = ad.grad(_gates).source(RNG.normal(size=(3, 4)), RNG.normal(size=4))
    lines = [code.strip() for code, _ in code_lines(source[:source.index("# backward")])]
    second = next(k for k, code in enumerate(lines) if code.endswith("z[1]"))
    third = next(k for k, code in enumerate(lines) if code.endswith("z[2]"))
    assigns = [[code.split(" ")[0] for code in part if re.match(r"\w+ (\S+ )?=", code)]
               for part in (lines[:second], lines[second:third])]
    assert "i" in assigns[0] and "f" not in assigns[0], lines  # the input gate is i
    assert "f" in assigns[1] and "i" not in assigns[1], lines  # the forget gate is f


def test_without_columns_two_statements_on_one_line_get_no_name(monkeypatch):
    """Python 3.10 has no code positions: a value gets no user name rather than its
    neighbour's."""
    from autodiffgen.trace import naming
    monkeypatch.setattr(naming, "_positions", lambda code: None)

    def f(x):  # (not _two_on_a_line, whose code is cached)
        a = np.sin(x); b = np.cos(x)  # the case under test
        return np.sum(a * b)
    assigned = _assigned(ad.grad(f).source(np.linspace(0.1, 1, 5)))
    assert assigned["np.sin(x)"] not in ("a", "b") and assigned["np.cos(x)"] not in ("a", "b")
