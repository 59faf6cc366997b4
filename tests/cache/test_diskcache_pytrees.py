"""Pytree types through the disk cache: a dataclass, an OrderedDict, a defaultdict and a
registered type of an importable module are found again by a fresh process (their keys
name the class, its fields, the keys, the factory, the aux_data and the registered
functions' code); a registration that another process cannot find is not stored, and the
explain log says why."""

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from autodiffgen import diskcache
from autodiffgen.cache.disk import store

MODEL = """
    import collections
    import dataclasses
    import os

    import numpy as np

    import autodiffgen


    @dataclasses.dataclass
    class Params:
        W: np.ndarray
        b: np.ndarray


    class Pair:
        def __init__(self, first, second, tag):
            self.first, self.second, self.tag = first, second, tag


    def flatten_pair(p):
        return (p.first, p.second), p.tag


    def flatten_pair_swapped(p):  # another registration: another key
        return (p.second, p.first), p.tag


    def unflatten_pair(tag, children):
        return Pair(children[0], children[1], tag)


    def unflatten_pair_swapped(tag, children):
        return Pair(children[1], children[0], tag)


    class Loose:  # registered with lambdas: no other process can find them by name
        def __init__(self, first, second):
            self.first, self.second = first, second


    if os.environ.get("SWAPPED"):
        autodiffgen.register_pytree_node(Pair, flatten_pair_swapped, unflatten_pair_swapped)
    else:
        autodiffgen.register_pytree_node(Pair, flatten_pair, unflatten_pair)
    autodiffgen.register_pytree_node(Loose, lambda p: ((p.first, p.second), None),
                                     lambda _, c: Loose(*c))


    def parts(t):
        if isinstance(t, Params):
            return t.W, t.b
        if isinstance(t, (Pair, Loose)):
            return t.first, t.second
        return t["W"], t["b"]


    def f(t, x):
        W, b = parts(t)
        scale = 3.0 if isinstance(t, Pair) and t.tag == "triple" else 1.0
        return np.sum(np.tanh(x @ W + b) ** 2) * scale


    def make(kind, seed):
        rng = np.random.default_rng(seed)
        W, b = rng.normal(size=(3, 2)), rng.normal(size=2)
        if kind == "dataclass":
            return Params(W, b)
        if kind == "ordereddict":
            return collections.OrderedDict([("W", W), ("b", b)])
        if kind == "defaultdict":
            return collections.defaultdict(list, {"W": W, "b": b})
        if kind == "loose":
            return Loose(W, b)
        return Pair(W, b, "triple")
"""

RUNNER = """
    import json, logging, sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    import treemodel
    import autodiffgen
    from autodiffgen import tape

    log = []
    handler = logging.Handler()
    handler.emit = lambda record: log.append(record.getMessage())
    logging.getLogger("autodiffgen").addHandler(handler)
    autodiffgen.explain_retraces()
    out = {}
    for kind in sys.argv[2:]:
        f = autodiffgen.value_and_grad(treemodel.f)
        del log[:]
        calls = []
        for seed in range(2):
            t = treemodel.make(kind, seed)
            x = np.random.default_rng(seed + 5).normal(size=(4, 3))
            value, g = f(t, x)
            tape_value, tape_g = tape.value_and_grad(treemodel.f)(t, x)
            assert type(g) is type(t), (type(g), type(t))
            calls.append([value, tape_value, [a.tolist() for a in treemodel.parts(g)],
                          [a.tolist() for a in treemodel.parts(tape_g)]])
        out[kind] = {"misses": f.cache_info().misses, "calls": calls, "log": list(log)}
    print(json.dumps(out))
"""

KINDS = ["dataclass", "ordereddict", "defaultdict", "registered"]


@pytest.fixture(autouse=True)
def fresh_state(monkeypatch):
    monkeypatch.delenv(diskcache.ENV_DIR, raising=False)
    monkeypatch.setattr(store, "_explicit", False)
    monkeypatch.setattr(store, "_path", None)
    monkeypatch.setattr(store, "_reported", set())


def run(root, kinds, env=()):
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(RUNNER), str(root), *kinds],
                         check=False, capture_output=True, text=True, timeout=120,
                         env={**os.environ, diskcache.ENV_DIR: str(root / "cache"),
                              "PYTHONDONTWRITEBYTECODE": "1", **dict(env)})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def assert_right(result):
    for value, tape_value, g, tape_g in result["calls"]:
        np.testing.assert_allclose(value, tape_value, rtol=1e-12)
        for a, b in zip(g, tape_g):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("trees")
    (root / "treemodel.py").write_text(textwrap.dedent(MODEL))
    kinds = [*KINDS, "loose"]
    first, again = run(root, kinds), run(root, kinds)
    swapped = run(root, ["registered"], {"SWAPPED": "1"})
    return first, again, swapped


@pytest.mark.parametrize("kind", KINDS)
def test_a_fresh_process_finds_the_entry_of_each_pytree_type(runs, kind):
    first, again, _ = runs
    assert_right(first[kind])
    assert_right(again[kind])
    assert first[kind]["misses"] == 1
    assert first[kind]["log"][0] == ("autodiffgen: disk cache, f: no stored entry for this "
                                     "signature")
    assert again[kind]["misses"] == 0 and again[kind]["log"] == []  # no trace at all
    np.testing.assert_allclose(again[kind]["calls"][0][0], first[kind]["calls"][0][0])


def test_another_registration_of_the_type_is_another_entry(runs):
    _, _, swapped = runs
    assert_right(swapped["registered"])
    assert swapped["registered"]["misses"] == 1  # traced: the flatten code differs
    assert swapped["registered"]["log"] == [("autodiffgen: disk cache, f: no stored entry for "
                                             "this signature")]


def test_a_registration_by_lambdas_is_not_stored_and_the_log_says_why(runs):
    first, again, _ = runs
    for result in (first["loose"], again["loose"]):
        assert_right(result)
        assert result["misses"] == 1
        assert any("not stored" in line and "<lambda>" in line for line in result["log"]), \
            result["log"]


def test_the_disk_key_of_a_registered_type_holds_its_functions():
    from autodiffgen.cache.disk import key as disk_key

    class Local:
        pass
    assert disk_key._canon(pathlib.Path).startswith("type:pathlib")
    with pytest.raises(disk_key._Unstable):
        disk_key._canon(Local)  # a class local to a function: no name another process finds


def test_a_class_defined_in_a_function_is_not_stored_and_the_log_says_why(tmp_path, caplog):
    import dataclasses

    import autodiffgen

    @dataclasses.dataclass
    class Local:
        W: np.ndarray

    def f(p):
        return np.sum(p.W ** 2)
    diskcache.enable(tmp_path / "cache")
    autodiffgen.explain_retraces()
    try:
        with caplog.at_level("WARNING", logger="autodiffgen"):
            g = autodiffgen.grad(f)(Local(np.arange(3.0)))
    finally:
        autodiffgen.explain_retraces(False)
        diskcache.disable()
    np.testing.assert_allclose(g.W, 2 * np.arange(3.0))
    assert any("not stored: an argument is a pytree of test_a_class_defined_in_a_function"
               in r.getMessage() and "a class defined inside a function" in r.getMessage()
               for r in caplog.records), [r.getMessage() for r in caplog.records]
    assert not list((tmp_path / "cache").glob("*.adg"))  # nothing stored
