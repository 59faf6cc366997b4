"""Default argument values (`def f(w, scale=0.5, cfg=CONFIG, *, mode="a")`) are read like
globals at each call (capture.py): a number is an input, a string a guard, a dict of
them is followed into, so setting __defaults__ / __kwdefaults__ or editing a default
dict in place takes effect, as it does in eager NumPy."""

import numpy as np
import pytest

from autodiffgen import grad, hessian, jvp, tape, value_and_grad
from autodiffgen.testing import check_grads

CONFIG = {"scale": 2.0, "act": "sin"}


def make():
    config = dict(CONFIG)

    def f(w, scale=0.5, cfg=config, *, power=2, mode="a"):
        act = np.sin if cfg["act"] == "sin" else np.cos
        y = scale * cfg["scale"] * act(w) ** power
        if mode == "b":
            y = -y
        return y.sum()
    return f, config


EDITS = [
    lambda f, cfg: None,
    lambda f, cfg: setattr(f, "__defaults__", (1.5, cfg)),
    lambda f, cfg: cfg.__setitem__("scale", 3.0),
    lambda f, cfg: cfg.__setitem__("act", "cos"),
    lambda f, cfg: f.__kwdefaults__.__setitem__("power", 3),
    lambda f, cfg: f.__kwdefaults__.__setitem__("mode", "b"),
    lambda f, cfg: setattr(f, "__defaults__", (np.float64(0.25), cfg)),
]


def test_edited_defaults_take_effect():
    f, cfg = make()
    vg = value_and_grad(f)
    w = np.array([0.3, 0.9, -0.4])
    values = set()
    for edit in EDITS:
        edit(f, cfg)
        value, g = vg(w)
        np.testing.assert_allclose(value, f(w), rtol=1e-12)
        np.testing.assert_allclose(g, tape.grad(f)(w), rtol=1e-12)
        check_grads(f, w, fwd=False)
        values.add(round(float(value), 9))
    assert len(values) == len(EDITS)  # each edit changed the answer
    assert vg.cache_info().misses <= 4  # numbers are inputs: a retrace for act, power, mode


@pytest.mark.parametrize("transform", ["hessian", "gradgrad", "jvp"])
def test_edited_defaults_under_other_transformations(transform):
    f, cfg = make()
    w = np.array([0.3, 0.9, -0.4])
    made = {"hessian": hessian(f), "gradgrad": grad(lambda w: grad(f)(w).sum()),
            "jvp": lambda w: jvp(f, (w,), (np.ones_like(w),))}[transform]
    seen = []
    for edit in EDITS:
        edit(f, cfg)
        out = made(w)
        out = out[1] if transform == "jvp" else out
        seen.append(np.asarray(out))
    f2, cfg2 = make()
    for edit, got in zip(EDITS, seen):
        edit(f2, cfg2)
        fresh = {"hessian": hessian(f2), "gradgrad": grad(lambda w: grad(f2)(w).sum()),
                 "jvp": lambda w: jvp(f2, (w,), (np.ones_like(w),))[1]}[transform](w)
        np.testing.assert_allclose(got, fresh, rtol=1e-10)  # as a fresh trace of each state


def test_a_string_default_is_a_guard_and_a_number_an_input():
    f, _ = make()
    source = value_and_grad(f).source(np.ones(2))
    assert "scale = f.__defaults__[0]" in source
    assert "if f.__kwdefaults__['mode'] != 'a':" in source
