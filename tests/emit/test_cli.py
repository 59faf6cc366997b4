"""The command line: `autodiffgen emit` on the examples and on small model files, the
standalone module it writes (run where autodiffgen cannot be imported), the example-spec
grammar, and the one-line errors for usage mistakes."""

import ast
import importlib.util
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import autodiffgen
from autodiffgen import cli
from autodiffgen.cli_examples import ArraySpec, SpecError, example_value, parse

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")
SEED = os.path.join(EXAMPLES, "seed_function.py")
MLP = os.path.join(EXAMPLES, "mlp.py")

MODEL = '''\
import numpy as np

from autodiffgen import grad, value_and_grad

WEIGHTS = np.linspace(0.5, 2.0, 20)  # 20 values: a standalone module writes them out in hex


@value_and_grad(argnums=(0, 1), example=dict(
    params=dict(W="f64[20,2]", b="f64[2]"), x="f64[5,20]", idx="i64[12]<5", scale=0.5))
def loss(params, x, idx, scale):
    h = np.tanh((x * WEIGHTS) @ params["W"] + params["b"])
    picked = h[idx]  # repeated rows: the backward pass accumulates with np.add.at
    return scale * np.sum(picked ** 2) + np.mean(np.log(x))


def _energy(x):
    return np.sum(np.sqrt(x) * x)


energy_grad = grad(_energy, example=dict(x="f32[4]"))
'''

# Loads a generated module by path with `import autodiffgen` made impossible, calls one
# function on the arguments in an .npz file ("0", "1/W", ...) and saves what it returns.
RUNNER = '''\
import importlib.util
import sys

sys.modules["autodiffgen"] = None
import numpy as np

path, inputs, outputs, name = sys.argv[1:5]
spec = importlib.util.spec_from_file_location("generated", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
tree = {}
with np.load(inputs) as data:
    for key in data.files:
        *parents, leaf = key.split("/")
        node = tree
        for parent in parents:
            node = node.setdefault(parent, {})
        node[leaf] = data[key]
out = getattr(module, name)(*[tree[str(i)] for i in range(len(tree))])
flat = {}


def flatten(x, prefix):
    if isinstance(x, (dict, tuple, list)):
        for k, v in (x.items() if isinstance(x, dict) else enumerate(x)):
            flatten(v, f"{prefix}/{k}")
    else:
        flat[prefix] = np.asarray(x)


flatten(out, "out")
np.savez(outputs, **flat)
'''


def run(*args, cwd=ROOT):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120, check=False)


def emit(*args, cwd=ROOT):
    return run("-m", "autodiffgen", "emit", *map(str, args), cwd=cwd)


def flatten(tree, prefix, flat):
    if isinstance(tree, (dict, tuple, list)):
        for k, v in (tree.items() if isinstance(tree, dict) else enumerate(tree)):
            flatten(v, f"{prefix}/{k}", flat)
    else:
        flat[prefix] = np.asarray(tree)
    return flat


def import_path(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "model.py"
    path.write_text(MODEL)
    return path


def write(tmp_path, text, name="bad_model.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


# ---- printing generated code ------------------------------------------------------------
def test_usage():
    result = run("-m", "autodiffgen", "emit", "--help")
    assert result.returncode == 0
    assert "usage: autodiffgen emit [-h] [--function NAME] [--arg NAME=SPEC] [-o FILE]" \
        in " ".join(result.stdout.split())
    assert run("-m", "autodiffgen").returncode == 2


@pytest.mark.parametrize("path, head", [
    (SEED, "def f_value_and_grad(x1, x2):"),
    (MLP, "def loss_value_and_grad(params, x, y):"),
])
def test_emit_examples(path, head):
    result = emit(path)
    assert result.returncode == 0, result.stderr
    assert head in result.stdout
    ast.parse(result.stdout)


def test_emit_prints_every_function_in_definition_order(model):
    result = emit(model)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.index("def loss_value_and_grad(params, x, idx, scale):") \
        < out.index("def _energy_value_and_grad(x):")
    assert "traced at (x: float32[4])" in out  # energy was traced at its f32 example
    ast.parse(out)


@pytest.mark.parametrize("name", ["energy_grad", "_energy"])
def test_function_by_variable_or_def_name(model, name):
    result = emit(model, "--function", name)
    assert result.returncode == 0, result.stderr
    assert "def _energy_value_and_grad(x):" in result.stdout
    assert "loss_value_and_grad" not in result.stdout


def test_arg_overrides_declared_specs(model):
    result = emit(model, "--function", "loss", "--arg", "x=f64[9,20]", "--arg",
                  'params={"W": "f64[20,4]", "b": "f64[4]"}', "--arg", "scale=2.0")
    assert result.returncode == 0, result.stderr
    assert "x: float64[9, 20]" in result.stdout and "scale=2.0" in result.stdout
    assert "(9, 4)" in result.stdout and "(5, 2)" not in result.stdout
    assert "scale * sum_1" in result.stdout  # a Python float is an input


def test_output_is_deterministic(model):
    assert emit(model).stdout == emit(model).stdout


@pytest.mark.parametrize("path", [SEED, MLP, "model"])
def test_printed_code_runs_as_printed_or_says_on_its_first_line_that_it_does_not(path, model):
    """`autodiffgen emit model.py > grads.py`: a module autodiffgen fills in when it loads
    it (mlp's module_globals) failed on its first call with no word of why."""
    path = model if path == "model" else path
    result = emit(path)
    assert result.returncode == 0, result.stderr
    first = result.stdout.splitlines()[0]
    if re.search(r"^\w+ = None\b", result.stdout, re.MULTILINE):  # a name the loader fills in
        assert first.startswith('"""Runs only inside autodiffgen,') and "emit -o" in first
        assert "standalone module" in first
        return
    scope = {}
    exec(compile(result.stdout, "grads.py", "exec"), scope)  # noqa: S102  as printed
    module = cli.load_module(str(path))
    for label, gf in cli.find_functions(module):
        scope[f"{gf.__name__}_value_and_grad"](*cli.example_args(label, gf, {}))

# ---- the standalone module --------------------------------------------------------------
def check_standalone(tmp_path, module_path, function, args, expected):
    inputs, outputs = tmp_path / "inputs.npz", tmp_path / "outputs.npz"
    np.savez(inputs, **{key[1:]: v for key, v in flatten(list(args), "", {}).items()})
    result = run("-c", RUNNER, str(module_path), str(inputs), str(outputs), function)
    assert result.returncode == 0, result.stderr
    want = flatten(expected, "out", {})
    with np.load(outputs) as got:
        assert sorted(got.files) == sorted(want)
        for key, value in want.items():
            assert got[key].dtype == value.dtype, key
            np.testing.assert_allclose(got[key], value, rtol=1e-12, atol=0, err_msg=key)


def test_standalone_module_runs_without_autodiffgen(model, tmp_path):
    out = tmp_path / "model_grad.py"
    result = emit(model, "-o", out)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "" and str(out) in result.stderr
    source = out.read_text()
    assert "autodiffgen emit" in source.splitlines()[0]
    assert "import autodiffgen" not in source and "from autodiffgen" not in source
    assert "bytes.fromhex(" in source  # WEIGHTS is written out, not injected
    lint = run("-m", "ruff", "check", "--no-cache", "--isolated", str(out))
    assert lint.returncode == 0, lint.stdout + lint.stderr

    user = import_path(model, "cli_test_model")
    rng = np.random.default_rng(1)
    params = {"W": rng.normal(size=(20, 2)), "b": rng.normal(size=2)}
    x, idx = rng.uniform(0.5, 2.0, (5, 20)), rng.integers(0, 5, 12)
    check_standalone(tmp_path, out, "loss_value_and_grad", (params, x, idx, 0.5),
                     user.loss(params, x, idx, 0.5))
    x4 = rng.uniform(0.5, 2.0, 4).astype(np.float32)
    check_standalone(tmp_path, out, "_energy_value_and_grad", (x4,),
                     (user._energy(x4), user.energy_grad(x4)))


def test_standalone_mlp_matches_in_process(tmp_path):
    out = tmp_path / "mlp_grad.py"
    result = emit(MLP, "-o", out, "--arg", "x=f64[16,20]", "--arg", "y=i64[16]<4")
    assert result.returncode == 0, result.stderr
    mlp = import_path(MLP, "cli_test_mlp")
    rng = np.random.default_rng(2)
    params = mlp.init_params(rng)
    x, y = rng.normal(size=(16, 20)), rng.integers(0, 4, 16)
    check_standalone(tmp_path, out, "loss_value_and_grad", (params, x, y),
                     mlp.loss(params, x, y))


def test_one_module_keeps_functions_that_share_a_name(tmp_path):
    path = write(tmp_path, """\
        import numpy as np
        from autodiffgen import grad, value_and_grad

        def f(x):
            return np.sum(np.sin(x))

        f_grad = grad(f, example=dict(x="f64[3]"))
        f_both = value_and_grad(f, example=dict(x="f64[2]"))
        """)
    out = tmp_path / "both.py"
    result = emit(path, "-o", out)
    assert result.returncode == 0, result.stderr
    assert "(f_value_and_grad, f_value_and_grad_1)" in result.stderr
    source = out.read_text()
    assert "def f_value_and_grad(x):" in source and "def f_value_and_grad_1(x):" in source
    assert "#   f(x=f64[3])" in source and "#   f(x=f64[2])" in source


def test_model_may_import_its_neighbours(tmp_path, capsys):
    write(tmp_path, "import numpy as np\n\ndef energy(x):\n    return np.sum(x * x)\n",
          "physics.py")
    path = write(tmp_path, """\
        from autodiffgen import grad
        from physics import energy

        energy_grad = grad(energy, example=dict(x="f64[3]"))
        """, "neighbour_model.py")
    before = list(sys.path)
    assert cli.main(["emit", str(path)]) == 0
    assert "def energy_value_and_grad(x):" in capsys.readouterr().out
    assert sys.path == before


def test_model_named_like_an_imported_module(tmp_path):
    path = write(tmp_path, NO_SPEC, "numpy.py")  # `import numpy` inside must still work
    result = emit(path, "--arg", "y=f64[3]")
    assert result.returncode == 0, result.stderr
    assert "def f_value_and_grad(x, y):" in result.stdout


# ---- the examples -----------------------------------------------------------------------
def test_seed_example_prints_value_and_gradient():
    result = run(SEED)
    assert result.returncode == 0, result.stderr
    for line in ["value = 11.652", "df/dx1 = 5.500", "df/dx2 = 1.716"]:
        assert line in result.stdout
    assert "def f_value_and_grad(x1, x2):" in result.stdout


def test_mlp_example_trains():
    result = run(MLP)
    assert result.returncode == 0, result.stderr
    losses = [float(v) for v in re.findall(r"loss (\d+\.\d+)", result.stdout)]
    assert len(losses) >= 3 and losses[-1] < losses[0]
    accuracy = float(re.search(r"accuracy (\d\.\d+)", result.stdout).group(1))
    assert accuracy > 0.8


# ---- errors -----------------------------------------------------------------------------
NO_FUNCTIONS = "import numpy as np\n\ndef f(x):\n    return np.sum(x)\n"
NO_SPEC = """\
    import numpy as np
    from autodiffgen import grad

    @grad(example=dict(x="f64[3]"))
    def f(x, y):
        return np.sum(x * y)
    """
BAD_SPEC = NO_SPEC.replace('dict(x="f64[3]")', 'dict(x="f33[3]", y="f64[3]")')
UNKNOWN_PARAM = NO_SPEC.replace('dict(x="f64[3]")', 'dict(x="f64[3]", y="f64[3]", z=1)')


@pytest.mark.parametrize("source, args, message", [
    (None, [], "no such file"),
    (NO_FUNCTIONS, [], "no @grad or @value_and_grad functions"),
    (NO_SPEC, [], "f has no example value for parameter 'y'"),
    (NO_SPEC, [], "--arg y=SPEC"),
    (BAD_SPEC, [], "bad spec 'f33[3]' for x: unknown dtype"),
    (NO_SPEC, ["--arg", "y=f32[3,a]"], "bad spec 'f32[3,a]' for y: dimensions"),
    (NO_SPEC, ["--arg", "y=i64[3]<0"], "bad spec 'i64[3]<0' for y"),
    (NO_SPEC, ["--arg", "y"], "--arg expects NAME=SPEC"),
    (NO_SPEC, ["--arg", "w=f64[3]"], "no selected function has a parameter 'w'"),
    (NO_SPEC, ["--function", "g"], "has no function 'g'; available: f"),
    (UNKNOWN_PARAM, [], "example= names 'z', which is not a parameter of f(x, y)"),
])
def test_usage_errors_exit_2_with_one_line(tmp_path, source, args, message):
    path = tmp_path / "missing.py" if source is None else write(tmp_path, source)
    result = emit(path, *args)
    assert result.returncode == 2
    assert message in result.stderr
    assert result.stderr.startswith("autodiffgen: error: ")
    assert len(result.stderr.strip().splitlines()) == 1 and result.stdout == ""


def test_failing_model_exits_1_with_its_own_traceback(tmp_path):
    path = write(tmp_path, "import numpy as np\n\nraise RuntimeError('no data here')\n")
    result = emit(path)
    assert result.returncode == 1
    assert "bad_model.py\", line 3" in result.stderr
    assert "RuntimeError: no data here" in result.stderr
    assert "importlib" not in result.stderr and "cli.py" not in result.stderr


def test_untraceable_function_exits_1_with_one_line(tmp_path):
    path = write(tmp_path, NO_SPEC.replace("np.sum(x * y)", "float(np.sum(x * y))"))
    result = emit(path, "--arg", "y=f64[3]")
    assert result.returncode == 1
    assert "bad_model.py:6: float() of a traced value" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


# ---- the spec grammar -------------------------------------------------------------------
@pytest.mark.parametrize("spec, dtype, shape", [
    ("f32[784,10]", np.float32, (784, 10)), ("f64[]", np.float64, ()),
    (" f16[ 2 , 3 ] ", np.float16, (2, 3)), ("i64[128]<10", np.int64, (128,)),
    ("u8[5]<256", np.uint8, (5,)), ("i32[0]", np.int32, (0,)), ("bool[2]", np.bool_, (2,)),
])
def test_array_specs(spec, dtype, shape):
    value = example_value(spec, "x")
    assert type(value) is np.ndarray and value.dtype == dtype and value.shape == shape
    if np.issubdtype(dtype, np.floating):
        assert ((value >= 0.5) & (value < 1.5)).all()
    np.testing.assert_array_equal(value, example_value(spec, "x"))  # seeded by the name


def test_integer_specs_draw_below_the_bound_or_are_zeros():
    labels = example_value("i64[1000]<10", "y")
    assert labels.min() == 0 and labels.max() == 9
    assert not example_value("i8[4]", "y").any()


def test_literals_and_pytrees():
    assert parse(2.0, "lr") == 2.0 and parse("0.1", "lr") == 0.1 and parse("None", "m") is None
    assert parse("'relu'", "act") == "relu"
    tree = parse('{"W": "f32[3,2]", "layers": [1, "i8[2]<3"]}', "p")
    assert tree == {"W": ArraySpec(np.float32, (3, 2)),
                    "layers": [1, ArraySpec(np.int8, (2,), 3)]}
    made = example_value({"W": "f32[3,2]", "b": ("f64[2]", 3)}, "params")
    assert made["W"].shape == (3, 2) and made["b"][0].shape == (2,) and made["b"][1] == 3


@pytest.mark.parametrize("spec, message", [
    ("f33[3]", "unknown dtype 'f33'"), ("f32[3,-1]", "dimensions"), ("f32[3]x", "not an array"),
    ("f32[3]<4", "only for integer dtypes"), ("u8[3]<257", "from 1 to 256"),
    ("relu", "write a string as"), (object(), "has type object"),
    ({"W": "f32[x]"}, "for params['W']"),
])
def test_bad_specs(spec, message):
    with pytest.raises(SpecError, match=re.escape(message)):
        parse(spec, "params")


def test_has_aux_shows_its_outputs_and_the_standalone_module_returns_them(tmp_path):
    path = write(tmp_path, '''\
        import numpy as np
        from autodiffgen import value_and_grad

        @value_and_grad(has_aux=True, example=dict(w="f64[3]", x="f64[5,3]"))
        def loss(w, x):
            z = np.tanh(x @ w)
            return np.mean(z ** 2), {"zmax": np.max(z)}
        ''', name="aux_model.py")
    result = emit(path)
    assert result.returncode == 0, result.stderr
    assert "return ((loss, {'zmax': max_1}), g_w)" in result.stdout
    out = tmp_path / "aux_grad.py"
    assert emit(path, "-o", str(out)).returncode == 0
    generated = import_path(out, "aux_grad")
    w, x = np.linspace(-1, 1, 3), np.linspace(0, 2, 15).reshape(5, 3)
    (value, aux), g = generated.loss_value_and_grad(w, x)
    assert g.shape == (3,)
    np.testing.assert_allclose(aux["zmax"], np.max(np.tanh(x @ w)))
    np.testing.assert_allclose(value, np.mean(np.tanh(x @ w) ** 2))


def test_emit_of_a_value_and_grad_object_keeps_an_int_argnums_bare():
    """emit(value_and_grad(f), x) is emit(f, x): the gradient returned bare, not in a tuple."""
    def f(x):
        return np.sum(np.sin(x))

    x = np.linspace(0.0, 1.0, 4)
    source = autodiffgen.emit(autodiffgen.value_and_grad(f), x)
    assert source == autodiffgen.emit(f, x)
    assert "(g_x,)" not in source
