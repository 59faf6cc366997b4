"""Tracebacks of the user's mistakes end at their call (tracebacks.py): their own frames
and the entry point they called, none of the cache's, the pipeline's or the tracer's;
every frame with AUTODIFFGEN_TRACEBACK=full; the exception's type, message, notes and
`raise ... from` chain as they were; an error of ours that names no line of theirs whole."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen import tracebacks
from autodiffgen.optim import Adam, compile_step

PACKAGE = os.path.dirname(ad.__file__) + os.sep


def frames(error):
    """(file name, function name) of each frame of the exception's traceback."""
    out, tb = [], error.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        out.append((code.co_filename, code.co_name))
        tb = tb.tb_next
    return out


def ours(error):
    return [(os.path.relpath(f, PACKAGE), name) for f, name in frames(error)
            if f.startswith(PACKAGE)]


def users(error):
    return [name for f, name in frames(error) if f == __file__]


def loss(w, x):
    h = x @ w  # a shape mistake: (4, 5) @ (3, 2)
    return np.sum(h ** 2)


def tangent(x):
    return np.tanh(x @ np.ones((4, 2)))


W, X = np.ones((3, 2)), np.ones((4, 5))
PARAMS = {"W": np.ones((3, 2))}
STEP = compile_step(lambda params, x: loss(params["W"], x), Adam())

# a shape mistake in the user's function, through each entry point: (the call, the
# entry point's frame, the user's frames in the traceback)
CALLS = {
    "grad": (lambda: ad.grad(loss)(W, X), ("api.py", "__call__")),
    "value_and_grad": (lambda: ad.value_and_grad(loss, argnums=1)(W, X),
                       ("api.py", "__call__")),
    "jvp": (lambda: ad.jvp(tangent, (np.ones(3),), (np.ones(3),)), ("transforms.py", "jvp")),
    "vjp": (lambda: ad.vjp(tangent, np.ones(3)), ("transforms.py", "vjp")),
    "vmap": (lambda: ad.vmap(tangent)(np.ones((5, 3))), ("transforms.py", "__call__")),
    "jacobian": (lambda: ad.jacobian(tangent)(np.ones(3)), ("jacobians.py", "jacobian_fn")),
    "jacfwd": (lambda: ad.jacfwd(tangent)(np.ones(3)), ("jacobians.py", "jacobian_fn")),
    "hessian": (lambda: ad.hessian(loss)(W, X), ("jacobians.py", "hessian_fn")),
    "compile_step": (lambda: STEP(PARAMS, STEP.init(PARAMS), X), ("train_step.py", "__call__")),
    "graph_of": (lambda: ad.graph_of(loss, W, X), (os.path.join("picture", "__init__.py"),
                                                   "graph_of")),
    "emit": (lambda: ad.emit(loss, W, X), ("api.py", "emit")),
}


@pytest.mark.parametrize("name", CALLS)
def test_a_shape_mistake_shows_the_call_and_the_users_line(name):
    call, entry = CALLS[name]
    with pytest.raises(ValueError, match="matmul: Input operand 1 has a mismatch") as info:
        call()
    assert ours(info.value) == [entry]
    assert users(info.value)[1] == "<lambda>" and users(info.value)[-1] in ("loss", "tangent")
    assert info.value.__notes__[-1].startswith("(autodiffgen: in matmul, called at "
                                               "test_tracebacks.py:")


@pytest.mark.parametrize("name", ["grad", "vmap", "compile_step"])
def test_the_full_setting_keeps_every_frame_and_the_message(name, monkeypatch):
    call, entry = CALLS[name]
    with pytest.raises(ValueError) as short:
        call()
    monkeypatch.setenv("AUTODIFFGEN_TRACEBACK", "full")  # read at raise time
    with pytest.raises(ValueError) as full:
        call()
    assert str(full.value) == str(short.value)
    assert full.value.__notes__ == short.value.__notes__
    kept = ours(full.value)
    assert len(kept) >= 15 and entry in kept
    assert {"pipeline.py", os.path.join("trace", "tracer.py"),
            os.path.join("trace", "recording.py")} <= {f for f, _ in kept}
    assert users(full.value) == users(short.value)  # the user's frames are all there


def test_errors_raised_on_purpose_are_shortened_too():
    def to_list(w):
        return sum(w.tolist())  # leaves the traced world

    with pytest.raises(ad.TracingError, match=r"test_tracebacks.py:\d+: .tolist\(\)") as info:
        ad.value_and_grad(to_list)(np.ones(3))
    assert ours(info.value) == [("api.py", "__call__")] and users(info.value)[-1] == "to_list"
    with pytest.raises(ad.ArgumentError, match="has dtype int64") as info:
        ad.grad(np.sum)(np.arange(3))
    assert ours(info.value) == [("api.py", "__call__")]
    with pytest.raises(ad.OutputError, match="scalar") as info:
        ad.grad(lambda w: w * 2.0)(np.ones(3))
    assert ours(info.value) == [("api.py", "__call__")]


def test_raise_from_chains_survive():
    """The user's `raise ... from` keeps its type, message and cause, the cause its own
    traceback (the user's frames: nothing of ours was between)."""
    def checked(w):
        try:
            {}["shape"]
        except KeyError as missing:
            raise ValueError("w must have 4 entries") from missing
        return np.sum(w)

    with pytest.raises(ValueError) as info:
        ad.grad(checked)(np.ones(3))
    error = info.value
    assert type(error) is ValueError and str(error) == "w must have 4 entries"
    assert type(error.__cause__) is KeyError and error.__suppress_context__
    assert ours(error) == [("api.py", "__call__")] and users(error)[-1] == "checked"
    assert [name for _, name in frames(error.__cause__)] == ["checked"]


def test_a_grad_inside_the_users_function_is_their_call_too():
    """grad inside a function grad traces: the outer call, the user's line, the inner
    call, the user's line; the inner grad leaves the rewriting to the outer."""
    def inner(x):
        return np.sum(x @ np.ones((2, 2)))

    def outer(x):
        return np.sum(ad.grad(inner)(x) ** 2)

    with pytest.raises(ValueError) as info:
        ad.grad(outer)(np.ones(3))
    names = [(os.path.basename(f), name) for f, name in frames(info.value)]
    assert names[1:] == [("api.py", "__call__"), ("test_tracebacks.py", "outer"),
                         ("api.py", "__call__"), ("test_tracebacks.py", "inner")]


def test_an_error_in_generated_code_keeps_its_generated_line():
    f = ad.value_and_grad(lambda x: np.log(x).sum())
    f(np.ones(3))
    with np.errstate(divide="raise"), pytest.raises(FloatingPointError) as info:
        f(np.zeros(3))
    files = [f for f, _ in frames(info.value)]
    assert ours(info.value) == [("api.py", "__call__")]
    assert files[-1].startswith("<autodiffgen-")  # the generated np.log line


def test_an_error_of_ours_that_names_no_line_keeps_every_frame():
    """Not one of our errors, raised in our code, naming no line of the user's: a bug of
    ours (here graph_of of a training step unpacking no arguments; its message is not yet
    in the user's terms), whose report needs every frame."""
    with pytest.raises(ValueError, match="not enough values to unpack") as info:
        ad.graph_of(STEP)
    kept = ours(info.value)
    assert ("tracebacks.py", "entry_point") in kept  # the wrapper itself: nothing removed
    assert kept[-1] == (os.path.join("picture", "__init__.py"), "graph_of")


def test_every_entry_point_is_marked():
    codes = {f.__code__ for f in (ad.GradFunction.__call__, ad.jvp.__wrapped__,
                                  ad.vjp.__wrapped__, ad.vmap.__wrapped__,
                                  ad.graph_of.__wrapped__, ad.emit.__wrapped__)}
    assert codes <= tracebacks.ENTRIES


SCRIPT = textwrap.dedent("""\
    import numpy as np
    import autodiffgen as ad

    def loss(w, x):
        h = x @ w
        return np.sum(h ** 2)

    ad.grad(loss)(np.ones((3, 2)), np.ones((4, 5)))
    """)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="3.10 keeps every frame")
def test_what_the_user_sees(tmp_path):
    """The printed traceback of a shape mistake: 11 lines (62 before), the script's call,
    grad's call, the user's line and NumPy's message with the line noted; full: all."""
    (tmp_path / "model.py").write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "AUTODIFFGEN_TRACEBACK"}

    def run(**extra):
        done = subprocess.run([sys.executable, "model.py"], cwd=tmp_path, text=True,
                              capture_output=True, env={**env, **extra}, check=False)
        assert done.returncode == 1
        return done.stderr.splitlines()

    short = run()
    assert len(short) <= 12, "\n".join(short)
    files = [line.split('"')[1] for line in short if line.startswith('  File "')]
    assert [os.path.basename(f) for f in files] == ["model.py", "api.py", "model.py"]
    assert short[-1] == "(autodiffgen: in matmul, called at model.py:5)"
    full = run(AUTODIFFGEN_TRACEBACK="full")
    assert len(full) >= 50 and full[-2:] == short[-2:]
