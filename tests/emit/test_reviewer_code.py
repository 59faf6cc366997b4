"""Generated code a reviewer takes for hand-written (issue 26, item 7): shortest float
literals, one spelling per operation, no identity calls, constant zeros folded, no unused
parameters, names that say what a value holds."""

import importlib
import re

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen import passes
from autodiffgen.codegen.literals import literal_ast
from autodiffgen.testing import check_grads


def test_float_literals_are_the_shortest_that_round_trip():
    import ast

    for value in (np.float32(0.2), np.float16(0.1), np.complex64(0.2 + 0.1j), np.float64(0.1),
                  np.float32(np.inf), np.float32(1e-45), np.float32(3.4e38)):
        text = ast.unparse(literal_ast(value))
        back = eval(text, {"np": np})
        assert type(back) is type(value) and back == value, text
    assert ast.unparse(literal_ast(np.float32(0.2))) == "np.float32(0.2)"


def test_a_float32_scale_is_written_with_its_own_digits():
    def f(x):
        return np.mean(x ** 2)

    source = ad.emit(f, np.ones(10, np.float32))
    assert "0000000" not in source
    if passes.ENABLED:  # the scale 2 / 10 folded
        assert "np.float32(0.2)" in source


def test_no_stop_gradient_call_in_code_that_only_runs():
    def f(x):
        return np.sum(x * ad.stop_gradient(np.max(x)))

    x = np.array([1.0, 3.0, 2.0])
    source = ad.emit(f, x)
    assert ("_stop_gradient" not in source) == passes.ENABLED  # a pass: off, as traced
    np.testing.assert_allclose(ad.grad(f)(x), [3.0, 3.0, 3.0])


def test_the_mark_stays_where_the_code_is_differentiated_again():
    def f(x):
        return np.sum(x * ad.stop_gradient(x))

    x = np.array([1.0, 2.0])
    df = ad.grad(f)
    np.testing.assert_allclose(df(x), x)  # this code runs: no mark in it
    assert ("_stop_gradient" not in df.source(x)) == passes.ENABLED
    # traced again, the gradient (stop_gradient(x)) has no derivative: its code keeps it
    np.testing.assert_allclose(ad.grad(lambda x: np.sum(df(x)))(x), [0.0, 0.0])
    np.testing.assert_allclose(ad.hessian(f)(x), np.zeros((2, 2)))
    np.testing.assert_allclose(ad.jacobian(df)(x), np.zeros((2, 2)))


def test_one_spelling_per_product():
    """`a @ b` where the product gets a new array, np.matmul(a, b, out=buf) where it is
    written into a buffer: never np.dot beside them (an RNN writes its products into
    the rows of a stack and into dead products' buffers)."""
    def rnn(w, v, xs):
        h = np.zeros(xs.shape[1:])
        for t in range(xs.shape[0]):
            h = np.tanh(xs[t] @ v + h @ w)
        return np.sum(h ** 2)

    rng = np.random.default_rng(0)
    args = rng.normal(size=(3, 3)), rng.normal(size=(3, 3)), rng.normal(size=(4, 2, 3))
    source = ad.emit(rnn, *args, argnums=(0, 1, 2))
    assert "np.dot(" not in source
    assert all("out=" in line for line in source.splitlines() if "np.matmul(" in line)
    assert " @ " in source


def test_a_compiled_step_has_no_parameter_it_does_not_read():
    """The optimizer's structural flags (Adam's weight decay on or off) are in the cache
    key, not a parameter of the code, which never reads them."""
    from autodiffgen import optim

    def loss(params, x):
        return np.sum((x @ params["W"]) ** 2)

    params, x = {"W": np.ones((3, 2))}, np.ones((4, 3))
    step = optim.compile_step(loss, optim.Adam(lr=0.1))
    source = step.source(params, step.init(params), x)
    assert "def loss_train_step(params, state, hyper, x):" in source
    assert "flags" not in source


def test_the_update_of_a_step_is_under_the_optimizers_header():
    from autodiffgen import optim

    def loss(params, x):
        return np.sum((x @ params["W"]) ** 2)

    params, x = {"W": np.ones((3, 2))}, np.ones((4, 3))
    step = optim.compile_step(loss, optim.AdamW(lr=0.1))
    lines = [line.strip() for line in step.source(params, step.init(params), x).splitlines()]
    update = [line for line in lines if line.startswith("# AdamW update")]
    assert len(update) == 1 and lines.count("# forward") == 1
    assert lines.index("# forward") < lines.index("# backward") < lines.index(update[0])
    assert update[0].startswith("# AdamW update: optim.py:")
    assert update[0].endswith("  Adam._leaf")  # AdamW's formulas are Adam's


def _saved(source, function):
    """{residual index: name} as `function` returns or unpacks its residuals."""
    body = source[source.index(f"def {function}("):]
    body = body[:body.index("\n\n\n")] if "\n\n\n" in body else body
    if function.endswith("_fwd"):
        returned = body[body.rindex("return ("):].split("(", 2)[2].rstrip(")\n ")
        return dict(enumerate(name.strip() for name in returned.split(",") if name.strip()))
    import re

    return {int(k): name for name, k in re.findall(r"(\w+) = residuals\[(\d+)\]", body)}


def test_a_residual_has_the_same_name_in_the_forward_and_the_backward():
    def f(x):  # multiply (x * 2.0) is not saved, multiply_1 (x * x) is, for sin's rule
        return np.sum(np.exp(x * 2.0)) + np.sum(np.sin(x * x))

    x = np.linspace(0.1, 1.0, 4)
    ad.vjp(f, x)
    source = f.__autodiffgen_vjp__.source(x)
    forward, backward = _saved(source, "f_fwd"), _saved(source, "f_bwd")
    assert forward == {**backward, 0: "x"} and "multiply_1" in backward.values()


def test_the_optimizers_values_are_named_after_its_variables(monkeypatch):
    from autodiffgen import optim

    monkeypatch.setattr(importlib.import_module("autodiffgen.loops.roll"), "ENABLED", True)

    def loss(params, x):
        return np.sum((x @ params["W"]) ** 2) + np.sum(params["b"] ** 2)

    params, x = {"W": np.ones((3, 2)), "b": np.zeros(2)}, np.ones((4, 3))
    step = optim.compile_step(loss, optim.Adam(lr=0.1))
    source = step.source(params, step.init(params), x)
    # one loop over the parameters, its variables the optimizer's own: p, g, m, v
    assert "    for p, g, m, v in ((params_W, g_params_W, state_m_W, state_v_W)," in source
    for line in ("step = ", "    m *= hyper_beta1", "    v *= hyper_beta2", "    p -= "):
        assert f"    {line}" in source, line
    # the new state is the caller's arrays, updated in place
    assert "{'step': step, 'm': {'W': state_m_W, 'b': state_m_b}, " \
        "'v': {'W': state_v_W, 'b': state_v_b}}" in " ".join(source.split())


@pytest.mark.parametrize("kept", [False, True], ids=["written out", "kept as a loop"])
def test_a_variable_assigned_in_a_loop_is_named_at_every_step(kept, monkeypatch):
    """`h = np.tanh(...)` run three times: written out, h, h_1, h_2 (one run of the
    statement each), not tanh, tanh_1, h; kept as a loop, h in the loop's body. One call
    making two nodes (nn.relu) is still one run."""
    from autodiffgen import nn

    roll_module = importlib.import_module("autodiffgen.loops.roll")
    monkeypatch.setattr(roll_module, "ENABLED", True)
    monkeypatch.setattr(roll_module, "USER_LOOPS", kept)

    def f(w, x):
        h = x
        for _ in range(3):
            h = np.tanh(h @ w + 1.0)
        r = nn.relu(h @ w)
        return np.sum(r)

    source = ad.emit(f, np.eye(3) / 2, np.ones((2, 3)))
    forward = source[source.index("# forward"):source.index("# backward")]
    assigned = [line.split(" = ")[0].strip() for line in forward.splitlines() if " = " in line]
    assert ({"h", "r"} if kept else {"h", "h_1", "h_2", "r"}) <= set(assigned)
    assert ("for t in range(3):" in forward) == kept
    assert not any(name.startswith("tanh") for name in assigned)
    assert sum(name.startswith("r") for name in assigned) == 1


def test_a_value_a_function_returns_is_named_after_the_function():
    def predict(w, x):
        return np.tanh(x @ w)

    def loss(w, x):
        return np.sum(predict(w, x) ** 2)

    source = ad.emit(loss, np.eye(3) / 2, np.ones((2, 3)))
    forward = source[source.index("# forward"):source.index("# backward")]
    assert "    predict = " in forward or "np.tanh(predict, out=predict)" in forward


def test_a_name_survives_the_pass_that_drops_its_node():
    """`y = (x * 2.0).astype(x.dtype)`: the cast to the dtype it has is dropped
    (simplify); the product it cast takes the name y."""
    def f(x):
        y = (x * 2.0).astype(x.dtype)
        return np.sum(np.sin(y))

    source = ad.emit(f, np.ones(3))
    forward = source[source.index("# forward"):source.index("# backward")]
    code = [line.split("  #")[0].strip() for line in forward.splitlines()]
    if passes.ENABLED:
        assert not any("astype" in line for line in code)
        assert "y = x * 2.0" in code


def test_the_picture_of_a_step_draws_its_update_apart():
    from autodiffgen import graph_of, optim

    def loss(params, x):
        return np.sum((x @ params["W"]) ** 2)

    params, x = {"W": np.ones((3, 2))}, np.ones((4, 3))
    picture = graph_of(optim.compile_step(loss, optim.Adam(lr=0.1)), params, x)
    text = picture.text()
    # the listing's update header is the generated code's: whose update, where its formulas are
    assert text.index("# forward") < text.index("# backward") < text.index("# Adam update: ")
    assert "= subtract params_W " in text[text.index("# Adam update: "):]
    dot = picture.dot()
    update = dot[dot.index("subgraph cluster_update"):]
    assert 'label="Adam update: optim.py:' in update
    assert '= subtract' in update[:update.index("  }")]


def test_a_one_argument_rule_names_the_derivative_it_computes():
    """`dtanh = 1 - h * h`, `dsin = np.cos(x)`: where a rule is g times a value it
    computes, that value is the primitive's derivative and is named so; a two-argument
    primitive's factors (y in the rule of x * y) are values of their own."""
    def f(x, y):
        return np.sum(np.tanh(x) * y) + np.sum(np.sin(y))
    x, y = np.linspace(-1.0, 1.0, 6), np.linspace(0.5, 2.0, 6)
    source = ad.value_and_grad(f, argnums=(0, 1)).source(x, y)
    backward = source.split("# backward")[1]
    assert re.search(r"dtanh = .*tanh", backward) and "dsin = np.cos(y)" in backward
    assert "dmultiply" not in backward
    check_grads(f, x, y, argnums=(0, 1))


def test_a_wrapped_line_does_not_hang_past_the_middle():
    """`'v': {'W1': v,` then each item under its brace at column 82: not while an
    earlier comma fits; the nested dicts stay whole."""
    from autodiffgen.codegen.lines import wrap

    line = ("    return (loss, {'W1': subtract_5, 'b1': subtract_6, 'W2': subtract_7, "
            "'b2': subtract_8}, {'step': step, 'm': {'W1': m, 'b1': m_1, 'W2': m_2, "
            "'b2': m_3}, 'v': {'W1': v, 'b1': v_1, 'W2': v_2, 'b2': v_3}})")
    lines = wrap(line)
    assert len(lines) == 3 and all(len(x) <= 100 for x in lines)
    assert lines[2].strip() == "'v': {'W1': v, 'b1': v_1, 'W2': v_2, 'b2': v_3}})"
