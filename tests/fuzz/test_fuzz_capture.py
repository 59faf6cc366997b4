"""A fuzzer (Hypothesis) for values read from outside the arguments (capture.py).

A program is a chain of helper steps written into a fresh module: each step reads an
array or a float through one route (a global, a settings object's attribute, a global
dict or list entry, a method or static method of a global object or class, a partial
object's keyword, another module's attribute, a closure cell, a default value, a class
attribute read as type(obj).v) and a string flag may
choose a branch. Between calls the values are rebound or changed in place; the one
cached function must agree with eager NumPy and the tape at every call (and its
Hessian-vector product with finite differences of the tape's gradient, and a compiled
training step's update with the tape's gradient), and retrace only when the flag changes. Derandomized for CI; AUTODIFFGEN_FUZZ=<n> runs n programs.
"""

import itertools
import os
import sys
import types

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import autodiffgen
from autodiffgen import tape, value_and_grad
from autodiffgen.optim import SGD, compile_step

EXAMPLES = int(os.environ.get("AUTODIFFGEN_FUZZ", "40"))
ROUTES = ["global", "attr", "dict", "list", "method", "static", "partial", "module",
          "closure", "default", "classattr"]
OPS = ["y * {v}", "y + {v}", "np.sin(y) * {v}", "y * np.tanh({v})",
       "y / (1.5 + np.cos({v}))"]
_ids = itertools.count()


@st.composite
def programs(draw):
    steps = [(draw(st.sampled_from(ROUTES)), draw(st.sampled_from(OPS)), draw(st.booleans()))
             for _ in range(draw(st.integers(1, 5)))]
    flag = draw(st.booleans())
    changes = [[(draw(st.sampled_from(["rebind", "in place", "keep"])),
                 draw(st.integers(0, 2**16))) for _ in steps] for _ in range(3)]
    return steps, flag, changes, draw(st.integers(0, 2**16))


def _source(steps, flag):
    """The program's module: helpers that read each value through its route."""
    lines = ["import functools", "import numpy as np", "import {sub} as sub", "",
             "class Cfg:", "    pass", "", "cfg = Cfg()", "P = {{}}", "L = []", ""]
    body = []
    for k, (route, op, _) in enumerate(steps):
        v = {"global": f"G{k}", "attr": f"cfg.v{k}", "dict": f"P['v{k}']", "list": f"L[{k}]",
             "module": f"sub.v{k}", "method": "self.v", "static": f"G{k}",
             "partial": "v", "closure": "v", "default": "v",
             "classattr": f"type(tobj{k}).v"}[route]
        expr = op.format(v=v)
        if route == "method":
            lines += [f"class M{k}:", "    def apply(self, y):", f"        return {expr}", "",
                      f"obj{k} = M{k}()", ""]
            body.append(f"y = obj{k}.apply(y)")
        elif route == "static":
            lines += [f"class S{k}:", "    @staticmethod", "    def apply(y):",
                      f"        return {expr}", ""]
            body.append(f"y = S{k}.apply(y)")
        elif route == "partial":
            lines += [f"def _op{k}(y, v):", f"    return {expr}", ""]
            body.append(f"y = part{k}(y)")
        elif route == "closure":
            lines += [f"def _make{k}(v):", f"    return lambda y: {expr}", ""]
            body.append(f"y = clo{k}(y)")
        elif route == "default":
            lines += [f"def step{k}(y, v=None):", f"    return {expr}", ""]
            body.append(f"y = step{k}(y)")
        elif route == "classattr":
            lines += [f"class T{k}:", "    v = None", "", f"tobj{k} = T{k}()", "",
                      f"def step{k}(y):", f"    return {expr}", ""]
            body.append(f"y = step{k}(y)")
        else:
            lines += [f"def step{k}(y):", f"    return {expr}", ""]
            body.append(f"y = step{k}(y)")
    if flag:
        body.append("if cfg.mode == 'sin':\n        y = np.sin(y)")
    lines += ["def f(x):", "    y = x"] + [f"    {b}" for b in body] + \
        ["    return np.sum(y * y) + np.sum(np.tanh(y))", ""]
    return "\n".join(lines)


class World:
    """A program's module and the setters that change each value where it lives."""

    def __init__(self, steps, flag):
        n = next(_ids)
        self.name, sub_name = f"adg_fuzz_world_{n}", f"adg_fuzz_sub_{n}"
        self.sub = types.ModuleType(sub_name)
        self.mod = types.ModuleType(self.name)
        sys.modules[sub_name], sys.modules[self.name] = self.sub, self.mod
        code = _source(steps, flag).format(sub=sub_name)
        exec(compile(code, f"<{self.name}>", "exec"), self.mod.__dict__)  # noqa: S102
        self.mod.cfg.mode = "sin"
        self.steps = steps

    def close(self):
        sys.modules.pop(self.name, None)
        sys.modules.pop(self.sub.__name__, None)

    def set(self, k, value):
        route, _, _ = self.steps[k]
        m = self.mod.__dict__
        if route in ("global", "static"):
            m[f"G{k}"] = value
        elif route == "attr":
            setattr(m["cfg"], f"v{k}", value)
        elif route == "dict":
            m["P"][f"v{k}"] = value
        elif route == "list":
            while len(m["L"]) <= k:
                m["L"].append(None)
            m["L"][k] = value
        elif route == "module":
            setattr(self.sub, f"v{k}", value)
        elif route == "method":
            m[f"obj{k}"].v = value
        elif route == "partial":
            m[f"part{k}"] = __import__("functools").partial(m[f"_op{k}"], v=value)
        elif route == "default":
            m[f"step{k}"].__defaults__ = (value,)
        elif route == "classattr":
            m[f"T{k}"].v = value
        elif route == "closure":
            if f"clo{k}" in m:
                m[f"clo{k}"].__closure__[0].cell_contents = value
            else:
                m[f"clo{k}"] = m[f"_make{k}"](value)

    def get(self, k):
        route, _, _ = self.steps[k]
        m = self.mod.__dict__
        return {"global": lambda: m[f"G{k}"], "static": lambda: m[f"G{k}"],
                "attr": lambda: getattr(m["cfg"], f"v{k}"), "dict": lambda: m["P"][f"v{k}"],
                "list": lambda: m["L"][k], "module": lambda: getattr(self.sub, f"v{k}"),
                "method": lambda: m[f"obj{k}"].v,
                "partial": lambda: m[f"part{k}"].keywords["v"],
                "closure": lambda: m[f"clo{k}"].__closure__[0].cell_contents,
                "default": lambda: m[f"step{k}"].__defaults__[0],
                "classattr": lambda: m[f"T{k}"].v}[route]()


def _value(is_array, seed):
    rng = np.random.default_rng(seed)
    return rng.uniform(-1.0, 1.0, size=3) if is_array else float(rng.uniform(-1.0, 1.0))


def _check(generated, f, x, t, step):
    value, g = generated(x)
    np.testing.assert_allclose(value, f(x), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(g, tape.grad(f)(x), rtol=1e-9, atol=1e-12)
    params = {"x": x.copy()}  # the compiled training step: its trace is grad's
    np.testing.assert_allclose(step(params, step.init(params)), f(x), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(params["x"], x - 0.5 * g, rtol=1e-9, atol=1e-12)
    eps = 1e-5
    fd = (tape.grad(f)(x + eps * t) - tape.grad(f)(x - eps * t)) / (2 * eps)
    np.testing.assert_allclose(autodiffgen.hvp(f, (x,), (t,)), fd, rtol=1e-4, atol=1e-6)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_values_read_through_every_route_are_read_again(program):
    steps, flag, changes, seed = program
    world = World(steps, flag)
    try:
        for k, (_, _, is_array) in enumerate(steps):
            world.set(k, _value(is_array, seed + k))
        f = world.mod.f
        generated = value_and_grad(f)
        step = compile_step(lambda params: f(params["x"]), SGD(lr=0.5))
        rng = np.random.default_rng(seed)
        x, t = rng.normal(size=(2, 3)), rng.normal(size=(2, 3))
        _check(generated, f, x, t, step)
        for call, change in enumerate(changes):
            for k, (how, s) in enumerate(change):
                new = _value(steps[k][2], s)
                if how == "rebind":
                    world.set(k, new)
                elif how == "in place" and steps[k][2]:
                    world.get(k)[...] = new
            if flag and call == 1:
                world.mod.cfg.mode = "plain"
            _check(generated, f, rng.normal(size=(2, 3)), t, step)
        assert generated.cache_info().misses == 1 + (flag and len(changes) > 1)
    finally:
        world.close()
