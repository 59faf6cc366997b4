"""Python side effects of a differentiated function (effects.py): the generated code
repeats none, so a write to state the function also reads is refused (the next call
would differ from eager NumPy), and a write it never reads back is warned of, once."""

import warnings

import numpy as np
import pytest

from autodiffgen import TracingError, grad, hessian, jvp, value_and_grad

CALLS = 0
LAST = None
HISTORY = []


def counts_calls(w):
    global CALLS
    CALLS += 1
    return np.sum(w ** 2) * CALLS


def keeps_last(w):
    global LAST
    v = np.sum(w ** 2)
    LAST = v
    return v


def logs(w):
    v = np.sum(w ** 2)
    HISTORY.append(v)
    return v


class Model:
    def __init__(self):
        self.steps, self.w = 0, np.ones(3)

    def step_count(self, x):
        self.steps += 1
        return np.sum(self.w * x ** 2) / self.steps

    def keeps_activations(self, x):
        h = np.tanh(self.w * x)
        self.h = h
        return np.sum(h)

    def appends(self, x):
        self.log = self.log + [1] if hasattr(self, "log") else [1]
        return np.sum(x)


TRANSFORMS = {"grad": lambda f, *a, **k: grad(f, **k)(*a),
              "jvp": lambda f, *a, argnums=0: jvp(lambda x: f(*a[:argnums], x),
                                                  (a[argnums],), (np.ones(3),)),
              "hessian": lambda f, *a, **k: hessian(f, **k)(*a)}


@pytest.mark.parametrize("transform", list(TRANSFORMS))
def test_state_read_and_written_is_refused_naming_the_line(transform):
    run = TRANSFORMS[transform]
    with pytest.raises(TracingError, match=r"test_effects.py:\d+: counts_calls assigns the "
                       "global CALLS, which it also reads"):
        run(counts_calls, np.ones(3))
    assert CALLS == 0  # nothing of the user's was written
    model = Model()
    with pytest.raises(TracingError, match=r"step_count sets .*\.steps, which it also reads"):
        run(Model.step_count, model, np.ones(3), argnums=1)
    assert model.steps == 0


def test_writes_never_read_back_warn_once_and_leave_the_users_state_alone():
    x = np.array([0.5, -1.0, 2.0])
    for fun, args, kw, what in [(keeps_last, (x,), {}, "keeps_last assigns the global LAST"),
                                (logs, (x,), {}, "logs changes the global list HISTORY"),
                                (Model.keeps_activations, (Model(), x), {"argnums": 1},
                                 "keeps_activations sets Model.h")]:
        vg = value_and_grad(fun, **kw)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for scale in (1.0, 2.0, 3.0):
                value, _ = vg(*args[:-1], args[-1] * scale)
                np.testing.assert_allclose(value, fun(*args[:-1], args[-1] * scale) if
                                           fun is not logs else np.sum((x * scale) ** 2))
        said = [str(w.message) for w in caught if what in str(w.message)]
        assert len(said) == 1, [str(w.message) for w in caught]
        assert "test_effects.py:" in said[0] and "repeats no Python side effects" in said[0]
    assert LAST is not None  # the eager calls above did assign it ...
    HISTORY.clear()
    value_and_grad(logs)(x * 5.0)
    assert HISTORY == []  # ... the compiled ones do not


def test_rebinding_an_attribute_to_the_list_it_holds_is_no_write():
    class Spy:
        def __init__(self):
            self.seen = []

        def __call__(self, w):
            self.seen += [w.shape]
            return np.sum(w ** 2)
    spy = Spy()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_allclose(grad(spy)(np.ones(2)), [2.0, 2.0])
    assert spy.seen == [(2,)]  # the object's own list: the trace appended to it


def make_counter():
    calls = 0

    def f(w):
        nonlocal calls
        calls += 1
        return np.sum(w ** 2) * calls
    return f


def make_keeper():
    last = None

    def f(w):
        nonlocal last
        last = np.sum(w ** 2)
        return last
    return f


def test_closure_variables_assigned():
    with pytest.raises(TracingError, match=r"test_effects.py:\d+: f assigns the closure "
                       "variable calls \\(nonlocal\\), which it also reads"):
        grad(make_counter())(np.ones(3))
    keeper = make_keeper()
    with pytest.warns(UserWarning, match="f assigns the closure variable last"):
        np.testing.assert_allclose(grad(keeper)(np.ones(3)), 2 * np.ones(3))


def test_a_helpers_nonlocal_counter_is_refused_naming_the_helper():
    """The closure variable belongs to a helper the function calls: its own code says
    whether it reads the variable before assigning it."""
    counter = make_counter()

    def f(w):
        return counter(w) * 2.0
    with pytest.raises(TracingError, match=r"test_effects.py:\d+: f assigns the closure "
                       "variable calls \\(nonlocal\\), which it also reads"):
        grad(f)(np.ones(3))
