"""Values read from outside the arguments, by every route: each is an input of the
generated code (read again per call) or a guard it checks (capture.py).

Every test calls one cached function several times with new values in the place it reads
(rebound or changed in place) and compares it with eager NumPy, the tape and finite
differences at each call."""

import functools
import importlib
import sys
import types

import numpy as np
import pytest

import autodiffgen
from autodiffgen import grad, tape, value_and_grad
from autodiffgen.testing import check_grads

RNG = np.random.default_rng(7)
W = RNG.normal(size=(3, 2))
SCALE = 2.0
MODE = "tanh"
ACT = np.sin
PARAMS = {"W": RNG.normal(size=(3, 2)), "b": RNG.normal(size=2)}
LAYERS = [RNG.normal(size=(3, 3)), RNG.normal(size=(3, 2))]


@pytest.fixture(autouse=True)
def _restore():
    saved = {k: globals()[k] for k in ("W", "SCALE", "MODE", "ACT", "PARAMS", "LAYERS")}
    saved_arrays = {k: v.copy() for k, v in saved.items() if type(v) is np.ndarray}
    yield
    globals().update(saved)
    for k, v in saved_arrays.items():
        globals()[k][...] = v


def verify(f, fun, x, fd=True):
    """The cached value_and_grad `f` at x against eager NumPy, the tape and (with `fd`)
    finite differences."""
    value, g = f(x)
    np.testing.assert_allclose(value, fun(x), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g, tape.grad(fun)(x), rtol=1e-10, atol=1e-12)
    if fd:
        check_grads(fun, x, fwd=False)
    return value


def x_of(k):
    return np.random.default_rng(k).normal(size=(4, 3))


# ---- partial objects -------------------------------------------------------------------
def _weighted(w, scale, x):
    return scale * np.tanh(x @ w).sum()


def test_a_partial_objects_arrays_and_numbers_are_read_again():
    w = RNG.normal(size=(3, 2))
    loss = functools.partial(_weighted, w, 1.5)
    f = value_and_grad(loss)
    verify(f, loss, x_of(0))
    w[...] = RNG.normal(size=(3, 2))  # in place: no retrace
    verify(f, loss, x_of(1))
    assert f.cache_info().misses == 1
    inner = functools.partial(_weighted, W, 0.5)  # a global partial, read inside

    def outer(x):
        return inner(x) + SCALE * x.sum()
    g = value_and_grad(outer)
    verify(g, outer, x_of(2))
    inner = functools.partial(_weighted, W * 3, -2.0)  # rebound to another partial
    globals()["SCALE"] = 4.0
    verify(g, outer, x_of(3))
    assert g.cache_info().misses == 1


# ---- a callable object, methods, static and class methods -------------------------------
class Dense:
    factor = 1.0

    def __init__(self, w, scale):
        self.w, self.scale = w, scale

    def __call__(self, x):
        return self.scale * self.act(x @ self.w).sum() * self.factor

    def act(self, z):
        return np.tanh(z) + Ops.shift(z)

    def loss(self, x):
        return (self.act(x) * self.scale).sum()


class Ops:
    gain = 0.5

    @staticmethod
    def shift(z):
        return SCALE * 0.1 * z

    @classmethod
    def scaled(cls, z):
        return cls.gain * np.sin(z)


NET = Dense(RNG.normal(size=(3, 2)), 1.5)


def test_a_callable_objects_attributes_are_read_again():
    model = Dense(RNG.normal(size=(3, 2)), 2.0)
    f = value_and_grad(model)
    verify(f, model, x_of(0))
    model.w[...] *= -1.5
    model.scale = 0.25
    Dense.factor = 3.0  # a class attribute read through the instance
    try:
        verify(f, model, x_of(1))
        model.w = RNG.normal(size=(3, 2))  # rebound to a new array of the same shape
        verify(f, model, x_of(2))
        assert f.cache_info().misses == 1
        model.w = RNG.normal(size=(3, 4))  # another shape: a retrace
        verify(f, model, x_of(3))
        assert f.cache_info().misses == 2
    finally:
        Dense.factor = 1.0


def test_methods_of_a_global_instance_and_static_and_class_methods():
    def f(x):
        return NET(x) + Ops.scaled(x).sum() + NET.act(x).sum()
    g = value_and_grad(f)
    verify(g, f, x_of(0))
    NET.w[...] = RNG.normal(size=(3, 2))
    NET.scale = -1.0
    Ops.gain = 2.5
    globals()["SCALE"] = -3.0  # read by the static method
    try:
        verify(g, f, x_of(1))
        assert g.cache_info().misses == 1
    finally:
        NET.scale, Ops.gain = 1.5, 0.5
    source = g.source(x_of(0))
    assert "module_globals['NET'].scale" in source
    assert "module_globals['Ops'].gain" in source


def test_a_bound_method_differentiated_directly():
    model = Dense(RNG.normal(size=(3, 2)), 2.0)
    f = value_and_grad(model.loss)
    verify(f, model.loss, x_of(0))
    globals()["SCALE"] = 7.0  # read by Ops.shift, through act
    model.scale = -0.5
    verify(f, model.loss, x_of(1))
    assert f.cache_info().misses == 1


# ---- modules and packages ---------------------------------------------------------------
@pytest.fixture
def user_modules(tmp_path, monkeypatch):
    (tmp_path / "adg_helpers_mod.py").write_text(
        "import numpy as np\nGAIN = 2.0\nOFFSET = np.array([0.1, -0.2, 0.3])\n\n\n"
        "def helper(x):\n    return GAIN * np.sin(x + OFFSET)\n")
    pkg = tmp_path / "adg_pkg_demo"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from . import sub\n")
    (pkg / "sub" / "__init__.py").write_text("from .core import fn\nfrom . import core\n")
    (pkg / "sub" / "core.py").write_text(
        "import numpy as np\nK = 0.5\n\n\ndef fn(x):\n    return np.cos(K * x)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module("adg_helpers_mod")
    package = importlib.import_module("adg_pkg_demo")
    yield mod, package
    for name in [n for n in sys.modules if n.startswith(("adg_helpers_mod", "adg_pkg_demo"))]:
        del sys.modules[name]


def test_module_helper_and_package_function(user_modules):
    mod, pkg = user_modules

    def f(x):
        return (mod.helper(x) * pkg.sub.fn(x)).sum()
    g = value_and_grad(f)
    verify(g, f, x_of(0))
    mod.GAIN = -1.5
    mod.OFFSET[...] = [1.0, 2.0, 3.0]
    pkg.sub.core.K = 2.0
    verify(g, f, x_of(1))
    assert g.cache_info().misses == 1
    mod.OFFSET = np.zeros(3)
    verify(g, f, x_of(2))
    assert g.cache_info().misses == 1


# ---- attributes and containers ----------------------------------------------------------
config = types.SimpleNamespace(scale=2.0, depth=2, kind="sin")


def test_attributes_of_a_settings_object():
    def f(x):
        y = x
        for _ in range(config.depth):  # an int that decides the program: a guard
            y = np.sin(y) if config.kind == "sin" else np.tanh(y)
        return config.scale * (y @ W).sum()
    g = value_and_grad(f)
    try:
        for k, scale in enumerate([2.0, -1.0, 0.5, 3.25]):
            config.scale = scale
            W[...] = RNG.normal(size=(3, 2))
            verify(g, f, x_of(k))
        assert g.cache_info().misses == 1
        config.kind = "tanh"  # a string: a guard
        verify(g, f, x_of(5))
        config.depth = 3
        verify(g, f, x_of(6))
        assert g.cache_info().misses == 3
    finally:
        config.scale, config.depth, config.kind = 2.0, 2, "sin"


def test_global_dict_and_list_of_arrays():
    def f(x):
        h = np.tanh(x @ LAYERS[0])
        return ((h @ LAYERS[1] + PARAMS["b"]) * (x @ PARAMS["W"])).sum()
    g = value_and_grad(f)
    verify(g, f, x_of(0))
    PARAMS["W"] = RNG.normal(size=(3, 2))  # an entry rebound
    LAYERS[0][...] = RNG.normal(size=(3, 3))  # an entry changed in place
    verify(g, f, x_of(1))
    globals()["PARAMS"] = {"W": RNG.normal(size=(3, 2)), "b": np.ones(2)}  # a new dict
    verify(g, f, x_of(2))
    assert g.cache_info().misses == 1
    PARAMS["b"] = np.ones(2, np.float32)  # another dtype: a retrace
    verify(g, f, x_of(3))
    assert g.cache_info().misses == 2


# ---- what decides the program: guards ---------------------------------------------------
def test_function_chosen_by_name_and_string_flag():
    def f(x):
        y = ACT(x)
        if MODE == "tanh":
            y = np.tanh(y)
        return (y ** 2).sum()
    g = value_and_grad(f)
    verify(g, f, x_of(0))
    globals()["ACT"] = np.cos
    verify(g, f, x_of(1))
    globals()["MODE"] = "plain"
    verify(g, f, x_of(2))
    globals()["ACT"] = np.sin
    verify(g, f, x_of(3))
    assert g.cache_info().misses == 4  # sin+tanh, cos+tanh, cos+plain, sin+plain
    source = g.source(x_of(0))
    assert "module_globals['ACT'] is not np." in source
    assert "module_globals['MODE'] != " in source


# ---- in place, and a number rebound many times ------------------------------------------
def test_in_place_change_of_a_global_and_a_closure_array():
    local = RNG.normal(size=(3, 2))

    def f(x):
        return np.sin(x @ W).sum() + (x @ local).sum() * SCALE
    g = value_and_grad(f)
    for k in range(4):
        W[...] = RNG.normal(size=(3, 2))
        local[...] = RNG.normal(size=(3, 2))
        verify(g, f, x_of(k), fd=k in (0, 3))
    assert g.cache_info().misses == 1


def test_a_rebound_number_twenty_times_without_retrace():
    def f(x):
        return SCALE * np.tanh(x).sum() + np.exp(SCALE) * x.mean()
    g = value_and_grad(f, max_variants=2)
    for epoch in range(20):
        globals()["SCALE"] = 1.0 / (1 + epoch)
        verify(g, f, x_of(epoch), fd=epoch % 7 == 0)
    assert g.cache_info().misses == 1


# ---- every transformation ---------------------------------------------------------------
def _poly(x):
    return SCALE * (np.sin(x @ W) ** 2).sum() + (x ** 3).sum() * W.sum()


def _fd_hessian(f, x, eps=1e-5):
    n = x.size
    h = np.zeros((n, n))
    for i in range(n):
        e = np.zeros(n)
        e[i] = eps
        h[i] = (tape.grad(f)(x + e.reshape(x.shape)) -
                tape.grad(f)(x - e.reshape(x.shape))).ravel() / (2 * eps)
    return h


def test_under_every_transformation():
    x = np.random.default_rng(3).normal(size=(2, 3))
    t = np.random.default_rng(4).normal(size=(2, 3))
    hess = autodiffgen.hessian(_poly)
    gg = grad(lambda y: grad(lambda z: SCALE * np.sin(z * W[0, 0]).sum())(y).sum())
    for k, scale in enumerate([2.0, -0.5, 3.0]):
        globals()["SCALE"] = scale
        W[...] = np.random.default_rng(10 + k).normal(size=(3, 2))
        expected = tape.grad(_poly)(x)
        out, tangent = autodiffgen.jvp(_poly, (x,), (t,))
        np.testing.assert_allclose(out, _poly(x), rtol=1e-12)
        np.testing.assert_allclose(tangent, (expected * t).sum(), rtol=1e-10)
        out, back = autodiffgen.vjp(_poly, x)
        np.testing.assert_allclose(back(1.0)[0], expected, rtol=1e-10)
        h = hess(x).reshape(6, 6)
        np.testing.assert_allclose(h, _fd_hessian(_poly, x), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(autodiffgen.hvp(_poly, (x,), (t,)), (h @ t.ravel())
                                   .reshape(2, 3), rtol=1e-8, atol=1e-10)
        y = np.array(0.3 + k)
        c = W[0, 0]
        np.testing.assert_allclose(gg(y), -scale * c * c * np.sin(y * c), rtol=1e-10)
    assert gg.cache_info().misses == 1  # the outer code reads SCALE and W itself
    made = [(_poly, "__autodiffgen_jvp__"), (_poly, "__autodiffgen_vjp__"),  # jvp, vjp
            (vars(_poly)["__autodiffgen_grad_0__"], "__autodiffgen_jvp__"),  # hvp
            (vars(_poly)["__autodiffgen_grad_0__"], "__autodiffgen_vjp_0__")]  # hessian
    for owner, kind in made:
        assert vars(owner)[kind].cache_info().misses == 1, kind
    source = gg.source(np.array(0.5))
    assert "SCALE = module_globals['SCALE']" in source


# ---- the user's objects are never touched; the code lints; a value that is gone -----------
class Recorder:
    def __init__(self):
        self.w = np.linspace(-1, 1, 6).reshape(3, 2)

    def __call__(self, x):
        self.last = x  # a write while traced: kept by the proxy, not the object
        return np.tanh(x @ self.w).sum() * SCALE


def test_tracing_never_writes_into_the_users_globals_or_objects():
    rec = Recorder()
    before_globals = dict(globals())
    f = value_and_grad(rec)
    with pytest.warns(UserWarning, match="sets Recorder.last"):
        verify(f, rec, x_of(0), fd=False)
    del rec.last  # the eager call in verify() wrote it; the trace did not
    f(x_of(1))
    assert not hasattr(rec, "last")
    assert dict(globals()).keys() == before_globals.keys()
    assert all(globals()[k] is v for k, v in before_globals.items())


def test_generated_code_of_every_route_lints(user_modules):
    import subprocess

    mod, pkg = user_modules

    def f(x):
        y = NET(x) + Ops.scaled(x).sum() + mod.helper(x).sum() + pkg.sub.fn(x).sum()
        y = y + (x @ PARAMS["W"]).sum() * config.scale + ACT(x).sum()
        return y if MODE == "tanh" else -y
    source = grad(f).source(x_of(0))
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--isolated",
                             "--stdin-filename", "generated.py", "-"], input=source,
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout
    for expected in ("config'].scale", "module_globals['PARAMS']['W']", "['MODE'] != 'tanh'",
                     "['OFFSET']", "['K']"):
        assert expected in source, expected


def test_a_global_that_is_gone_fails_as_numpy_would():
    globals()["GONE"] = np.ones(3)

    def f(x):
        return (x * GONE).sum()  # noqa: F821  defined and deleted by this test
    g = grad(f)
    np.testing.assert_allclose(g(np.ones(3)), np.ones(3))
    del globals()["GONE"]
    with pytest.raises(NameError, match="GONE"):
        g(np.ones(3))


def test_a_global_converted_with_asarray_stays_an_input_and_tolist_is_checked_by_contents():
    """np.asarray(W) of a global is W itself, read again at each call; W.tolist() turns it
    into Python numbers, kept as a constant the code checks against a copy."""
    def f(x):
        return (x @ np.asarray(W)).sum() + len(np.asarray(LAYERS[0]).tolist()) * x.sum()
    g = value_and_grad(f)
    verify(g, f, x_of(0))
    globals()["W"] = RNG.normal(size=(3, 2))  # rebound: read again, no retrace
    verify(g, f, x_of(1))
    W[...] = RNG.normal(size=(3, 2))  # changed in place: the same
    verify(g, f, x_of(2))
    assert g.cache_info().misses == 1
    LAYERS[0][...] = RNG.normal(size=(3, 3))  # converted to a list: the contents check retraces
    verify(g, f, x_of(3))
    assert g.cache_info().misses == 2
    LAYERS[0] = LAYERS[0].copy()  # another array with the same numbers: no retrace
    verify(g, f, x_of(4))
    assert g.cache_info().misses == 2
    assert "same_contents(module_globals['LAYERS'][0], traced_LAYERS)" in g.source(x_of(4))


class Params(dict):
    pass


class Stack:
    def __init__(self, layers):
        self.layers = layers

    def __iter__(self):
        return iter(self.layers)


def test_a_dict_subclass_and_an_iterable_object_of_arrays():
    params = Params(W=RNG.normal(size=(3, 2)), b=RNG.normal(size=2))
    stack = Stack([RNG.normal(size=(3, 3)), RNG.normal(size=(3, 3))])

    def f(x):
        total = sum(v.sum() for v in params.values()) + params.get("b").sum()
        for k, v in params.items():
            total = total + (v * v).sum() * len(k)
        for layer in stack:
            x = np.tanh(x @ layer)
        return total + (x @ params["W"]).sum()
    g = value_and_grad(f)
    for k in range(4):
        verify(g, f, x_of(k), fd=k == 3)
        params["W"] = params["W"] * 1.5
        params["b"][...] = RNG.normal(size=2)
        stack.layers[1][...] *= 0.5
    assert g.cache_info().misses == 1


def test_a_helper_imported_inside_the_function(user_modules):
    mod, _ = user_modules

    def f(x):
        import adg_helpers_mod
        from adg_helpers_mod import helper
        from adg_pkg_demo.sub import core
        return (helper(x) * core.fn(x)).sum() + adg_helpers_mod.GAIN * x.sum()
    g = value_and_grad(f)
    verify(g, f, x_of(0))
    mod.GAIN = 4.0
    mod.OFFSET[...] = [0.5, 0.5, -1.0]
    sys.modules["adg_pkg_demo.sub.core"].K = -1.5
    verify(g, f, x_of(1))
    assert g.cache_info().misses == 1


LAYER_NAMES = ["a", "b"]
LAYER_SCALES = [1.0, 2.0]


def _loops_over_globals(w):
    z = w
    for _ in LAYER_NAMES:
        z = np.tanh(z)
    for s in LAYER_SCALES:
        z = z * s
    return np.sum(z ** 2) / len(LAYER_SCALES)


def test_a_global_list_that_grows_or_is_rebound_traces_again():
    """A list of strings is checked by value, a list of floats by its length (its entries
    are inputs): a loop over either sees every entry."""
    global LAYER_NAMES, LAYER_SCALES
    g = grad(_loops_over_globals)
    w = np.array([0.3, -0.2, 0.5])
    try:
        for change in (lambda: None, lambda: LAYER_NAMES.append("c"),
                       lambda: LAYER_SCALES.append(3.0), lambda: LAYER_SCALES.__setitem__(0, 5.0)):
            change()
            np.testing.assert_allclose(g(w), tape.grad(_loops_over_globals)(w), rtol=1e-12)
        LAYER_NAMES = ["a"]
        np.testing.assert_allclose(g(w), tape.grad(_loops_over_globals)(w), rtol=1e-12)
        assert g.cache_info().misses == 4  # the change of a float entry needs no trace
    finally:
        LAYER_NAMES, LAYER_SCALES = ["a", "b"], [1.0, 2.0]


DEFAULT_W = np.array([1.0, 2.0])
DEFAULT_RNG = np.random.default_rng(0)


def _with_defaults(w, W=DEFAULT_W, scale=2.0, rng=DEFAULT_RNG):
    return scale * np.sum(np.sin(w * W) * rng.random(2))


def test_array_and_generator_defaults_are_read_at_each_call():
    """`def f(w, W=W, rng=RNG)`: the default array is the caller's object, changed in
    place between calls, and the default generator draws at run time, as eagerly."""
    g = grad(_with_defaults)
    w = np.array([0.3, 0.1])
    for k in range(3):
        DEFAULT_W[...] = k + 1.0
        DEFAULT_RNG.bit_generator.state = np.random.default_rng(5 + k).bit_generator.state
        got = g(w)
        DEFAULT_RNG.bit_generator.state = np.random.default_rng(5 + k).bit_generator.state
        np.testing.assert_allclose(got, tape.grad(_with_defaults)(w), rtol=1e-12)
    assert g.cache_info().misses == 1


REGISTRY = {"calls": 0, "seen": {}}


class _Thing:
    pass


def _registers(x):
    REGISTRY["seen"][len(REGISTRY["seen"])] = _Thing()  # into a dict the guard compares
    return np.sum(x * x)


def test_a_guarded_literal_is_kept_as_it_was_read():
    """A global dict of literals is guarded by value; the guard keeps a copy, so that an
    object the function then stores in it does not reach the generated code's literal
    (which would not compile)."""
    for _ in range(2):
        np.testing.assert_allclose(grad(_registers)(np.ones(2)), [2.0, 2.0])


LEDGER = {"calls": 0, "seen": {}}


def _records(x):
    LEDGER["seen"][len(LEDGER["seen"])] = _Thing()
    return np.sum(x * x)


def test_a_guarded_literal_changed_before_an_enclosing_trace_reads_it():
    """The inner grad's code reads LEDGER again under the outer trace, after its own
    trace stored an object there: the outer code checks it by contents, not as a
    literal."""
    outer = grad(lambda x: np.sum(grad(_records)(x) * x))
    for _ in range(2):
        np.testing.assert_allclose(outer(np.ones(2)), [4.0, 4.0])
