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


# ---- a Python list NumPy converts item by item -----------------------------------------
def exp_of_list(xs):
    return np.sum(np.exp(xs))  # converts


def test_a_list_of_floats_is_named_with_what_to_write():
    with pytest.raises(ad.TracingError) as info:
        ad.grad(exp_of_list)([1.0, 2.0])
    message = str(info.value)
    assert line_of("converts") in message
    assert "'xs' of exp_of_list is a Python list of 2 floats" in message
    assert "np.array(xs)" in message and "np.asarray(xs)" in message
    assert "pytree" in message


def test_a_tuple_of_arrays_is_named_under_every_transform():
    pair = (np.ones(2), np.zeros(2))
    for call in (lambda: ad.grad(exp_of_list)(pair),
                 lambda: ad.jacobian(lambda xs: np.exp(xs))(pair),
                 lambda: ad.vjp(exp_of_list, pair),
                 lambda: ad.jvp(exp_of_list, (pair,), (pair,))):
        with pytest.raises(ad.TracingError) as info:
            call()
        assert "Python tuple of 2 arrays" in str(info.value)
        assert "np.stack(xs)" in str(info.value)


def test_the_suggestions_work_and_a_list_is_a_pytree():
    def with_asarray(xs):
        xs = np.asarray(xs)
        return np.sum(np.exp(xs))
    g = ad.grad(with_asarray)([1.0, 2.0])
    assert type(g) is list and np.allclose(g, np.exp([1.0, 2.0]))
    np.testing.assert_allclose(ad.grad(exp_of_list)(np.array([1.0, 2.0])), np.exp([1.0, 2.0]))
    g = ad.grad(lambda xs: xs[0] * xs[1])([2.0, 3.0])  # items read one by one: traced
    assert g == [3.0, 2.0]


def test_a_float_read_of_an_item_keeps_the_general_message():
    def reads(xs):
        return float(xs[0]) * xs[1]  # item
    with pytest.raises(ad.TracingError) as info:
        ad.grad(reads)([1.0, 2.0])
    assert "float() of a traced value" in str(info.value) and line_of("item") in str(info.value)


# ---- custom_vjp and custom_jvp -----------------------------------------------------------
@ad.custom_vjp
def only_reverse(x):
    return np.sin(x)


def only_reverse_fwd(x):
    return np.sin(x), np.cos(x)


def only_reverse_bwd(c, g):
    return (g * c,)


only_reverse.defvjp(only_reverse_fwd, only_reverse_bwd)


def test_forward_mode_through_a_custom_vjp_function_is_refused_as_in_jax():
    x = np.linspace(0.1, 0.5, 3)
    calls = {"jvp": lambda: ad.jvp(lambda x: only_reverse(x) * 2.0, (x,), (np.ones(3),)),  # jvp
             "jacfwd": lambda: ad.jacfwd(lambda x: only_reverse(x) * 2.0)(x)}  # jacfwd
    for marker, call in calls.items():
        with pytest.raises(ad.UnsupportedOperationError) as info:
            call()
        message = str(info.value)
        assert "only_reverse is a custom_vjp function" in message and "custom_jvp" in message
        assert line_of(marker) in message
    np.testing.assert_allclose(ad.jacrev(only_reverse)(x), np.diag(np.cos(x)))


def test_a_backward_rule_returning_the_wrong_count_is_named():
    @ad.custom_vjp
    def f(x, y):
        return x * y

    def f_fwd(x, y):
        return x * y, (x, y)

    def f_bwd(res, g):  # bad_bwd
        return g * res[1]
    f.defvjp(f_fwd, f_bwd)
    with pytest.raises(TypeError) as info:
        ad.grad(lambda x, y: np.sum(f(x, y)))(np.ones(2), np.ones(2))
    message = str(info.value)
    assert "f_bwd (the backward rule of f) must return a tuple of 2 cotangent(s)" in message
    assert f"test_habit_errors.py:{f_bwd.__code__.co_firstlineno}" in message


def test_a_cotangent_of_the_wrong_shape_is_named():
    @ad.custom_vjp
    def f(x):
        return 2.0 * x
    f.defvjp(lambda x: (2.0 * x, None), lambda res, g: (np.sum(g),))
    with pytest.raises(ValueError, match=r"backward rule of f\) returned .* shape \(\), .* shape \(3,\)"):
        ad.grad(lambda x: np.sum(f(x)))(np.ones(3))


def test_a_custom_vjp_function_without_its_rule_says_defvjp():
    @ad.custom_vjp
    def f(x):
        return 2.0 * x
    np.testing.assert_allclose(f(np.ones(2)), 2.0)  # plain calls need no rule
    with pytest.raises(TypeError, match=r"f.defvjp\(f_fwd, f_bwd\)"):
        ad.grad(lambda x: np.sum(f(x)))(np.ones(2))


def test_custom_jvp_takes_arrays_and_nondiff_argnums_are_refused():
    @ad.custom_jvp
    def f(p):
        return p["w"] * 2.0
    f.defjvp(lambda primals, tangents: (f(*primals), 2.0 * tangents[0]["w"]))
    with pytest.raises(ad.ArgumentError, match="argument 0 is a dict.*custom_vjp"):
        ad.grad(lambda p: np.sum(f(p)))({"w": np.ones(2)})
    with pytest.raises(TypeError, match="nondiff_argnums"):
        ad.custom_vjp(nondiff_argnums=(1,))(lambda x, n: x)
    with pytest.raises(TypeError, match="nondiff_argnums"):
        ad.custom_jvp(lambda x, n: x, nondiff_argnums=(1,))
