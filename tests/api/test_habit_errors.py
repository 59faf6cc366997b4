"""What a JAX or Autograd habit that autodiffgen does not take gets told (issue 28, item
4): both argnums= and argnum=, optax's argument order for an optimizer's update, a Python
list of floats that NumPy converts element by element, forward mode through a custom_vjp
function. Each message names the user's file and line, the argument or the order, and
what to write instead."""

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen import optim

with open(__file__) as _source:
    HERE = _source.read().splitlines()


def line_of(marker):
    """'test_habit_errors.py:N' for the line that carries `# <marker>`."""
    n = next(i for i, text in enumerate(HERE, 1) if text.rstrip().endswith(f"# {marker}"))
    return f"test_habit_errors.py:{n}"


def two(x, y):
    return np.sum(x * y)


@pytest.mark.parametrize("transform", [ad.grad, ad.value_and_grad, ad.jacobian, ad.jacrev,
                                       ad.jacfwd, ad.hessian, ad.elementwise_grad])
def test_argnums_and_argnum_together_name_both(transform):
    with pytest.raises(TypeError) as info:
        transform(two, argnums=0, argnum=1)  # both
    message = str(info.value)
    assert "argnums=0" in message and "argnum=1" in message and "Autograd" in message
    assert line_of("both") in message


def test_argnums_0_written_out_still_conflicts_with_argnum():
    with pytest.raises(TypeError, match="argnums=0 and argnum=0"):
        ad.emit(two, np.ones(2), np.ones(2), argnums=0, argnum=0)


def test_an_unknown_keyword_is_still_refused():
    with pytest.raises(TypeError, match="argnumz"):
        ad.grad(two, argnumz=1)


# ---- optimizers: torch.optim's order, not optax's --------------------------------------
@pytest.mark.parametrize("make", [lambda: optim.Adam(lr=0.1), lambda: optim.SGD(lr=0.1),
                                  lambda: optim.RMSprop(momentum=0.9)])
def test_optax_order_is_refused_with_the_expected_order(make):
    opt = make()
    params = {"w": np.ones(3), "b": np.zeros(1)}
    grads = {"w": np.full(3, 0.5), "b": np.ones(1)}
    state = opt.init(params)
    with pytest.raises(TypeError) as info:
        opt.update(grads, state, params)  # optax
    message = str(info.value)
    assert "(params, grads, state)" in message and "optax" in message
    assert "second, where grads go" in message and line_of("optax") in message
    new_params, new_state = opt.update(params, grads, state)  # the order it takes
    assert set(new_params) == {"w", "b"} and new_state["step"] == 1.0


def test_an_update_without_a_state_says_what_the_third_argument_is():
    opt = optim.SGD(lr=0.1)
    with pytest.raises(TypeError, match="the third argument is a NoneType"):
        opt.update({"w": np.ones(2)}, {"w": np.ones(2)}, None)
