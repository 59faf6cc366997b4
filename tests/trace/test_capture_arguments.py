"""What a trace reads through an ARGUMENT that is not an array, a number or a container
(`self`, a config object, a partial, a callable object, a bound method), and the other
routes reviewer A found baked: each is an input of the generated code or a guard it
checks, as a global would be (capture.py). Every test calls one cached function several
times, changing what it reads between calls, against eager NumPy and the tape."""

import contextlib
import functools

import numpy as np
import pytest
from numpy.random import normal as _normal
from numpy.random import rand as _rand

import autodiffgen
from autodiffgen import tape, value_and_grad


def _same(got, fun, *args, argnums=0):
    value, g = got
    np.testing.assert_allclose(value, fun(*args), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g, tape.grad(fun, argnums=argnums)(*args), rtol=1e-10,
                               atol=1e-12)


# ---- (1) objects passed as arguments ------------------------------------------------------
class Model:
    def __init__(self):
        self.W1 = np.array([1.0, 2.0])
        self.act = "sin"
        self.k = 1.0

    def loss(self, w, x):
        h = np.sin(x * self.W1) if self.act == "sin" else np.cos(x * self.W1)
        return np.sum(h * w) * self.k


class Decorated(Model):
    @value_and_grad(argnums=1)
    def gloss(self, w, x):
        return np.sum(np.sin(x * self.W1) * w) * self.k


def _edits(m):
    """Changes of what the method reads through `self`, one per call."""
    yield
    m.W1[...] = [3.0, 4.0]
    yield
    m.W1 = np.array([5.0, 6.0])
    yield
    m.k = 2.0
    yield
    m.act = "cos"
    yield


def test_attributes_of_self_are_read_again():
    m = Model()
    g = value_and_grad(Model.loss, argnums=1)
    w, x = np.array([1.0, -1.0]), np.array([0.5, 0.25])
    for _ in _edits(m):
        _same(g(m, w, x), Model.loss, m, w, x, argnums=1)
    assert g.cache_info().misses == 2  # the string flag is a guard: one retrace
    d = Decorated()
    for k in (1.0, 3.0, -2.0):
        d.W1[...] *= 1.5
        d.k = k
        _same(d.gloss(w, x), Decorated.gloss.fun, d, w, x, argnums=1)
    assert Decorated.gloss.cache_info().misses == 1


def test_self_under_jvp_and_hessian():
    m = Model()
    w, x, t = np.array([1.0, -1.0]), np.array([0.5, 0.25]), np.array([1.0, 2.0])
    hess = autodiffgen.hessian(Model.loss, argnums=2)
    for k in (1.0, 5.0, 7.0):
        m.k = k
        m.W1[...] += 1.0
        _, tangent = autodiffgen.jvp(Model.loss, (m, w, x), (None, t, None))
        np.testing.assert_allclose(tangent, tape.grad(Model.loss, argnums=1)(m, w, x) @ t,
                                   rtol=1e-12)
        expected = np.diag(-np.sin(x * m.W1) * m.W1 ** 2 * w * k)
        np.testing.assert_allclose(hess(m, w, x), expected, rtol=1e-10, atol=1e-12)


class Config:
    def __init__(self):
        self.scale, self.W, self.mode = 1.0, np.array([1.0, 2.0]), "a"


def _configured(w, x, cfg):
    z = np.sum(w * x * cfg.W) * cfg.scale
    return z if cfg.mode == "a" else -z


def test_a_config_object_argument():
    cfg = Config()
    g = value_and_grad(_configured)
    w, x = np.array([1.0, 0.5]), np.array([2.0, -1.0])
    _same(g(w, x, cfg), _configured, w, x, cfg)
    cfg.scale = 10.0
    _same(g(w, x, cfg), _configured, w, x, cfg)
    cfg.W[...] = 5.0
    _same(g(w, x, cfg), _configured, w, x, cfg)
    cfg.mode = "b"
    _same(g(w, x, cfg), _configured, w, x, cfg)
    assert g.cache_info().misses == 2


def _base(x, a):
    return np.sum(np.sin(x) * a)


class Lin:
    def __init__(self):
        self.W = np.array([2.0, 2.0])

    def __call__(self, x):
        return np.sum(x * self.W)

    def apply(self, x):
        return np.sum(np.tanh(x) * self.W)


def _call(w, act):
    return act(w)


def test_partial_callable_object_and_bound_method_arguments():
    w = np.array([0.3, -0.7])
    p = functools.partial(_base, a=np.array([1.0, 1.0]))
    lin = Lin()
    g = value_and_grad(_call)
    for value in (3.0, -1.5, 0.25):
        for act in (p, lin, lin.apply):
            _same(g(w, act), _call, w, act)
        p.keywords["a"][...] = value
        lin.W[...] = value
    assert g.cache_info().misses == 3


# ---- (2) generators in global containers, and generator methods read as values --------------
GEN_DICT = {"rng": np.random.default_rng(3)}
GEN_LIST = [np.random.default_rng(4)]
GEN_TUPLE = (np.random.RandomState(5),)
sample = np.random.default_rng(6).standard_normal  # a bound method of a Generator


def _from_dict(w):
    return np.sum(GEN_DICT["rng"].standard_normal(w.shape) * w ** 2)


def _from_list(w):
    return np.sum(GEN_LIST[0].random(w.shape) * np.sin(w))


def _from_tuple(w):
    return np.sum(GEN_TUPLE[0].randn(*w.shape) * w ** 3)


def _from_method(w):
    return np.sum(w * sample(w.shape)) + np.sum(w ** 2 * _rand(*w.shape))


def _from_imports(w):
    return np.sum(w * (_rand(*w.shape) < 0.5)) + np.sum(w ** 2 * _normal(size=w.shape))


def _reseed():
    GEN_DICT["rng"] = np.random.default_rng(3)
    GEN_LIST[0] = np.random.default_rng(4)
    GEN_TUPLE[0].seed(5)
    sample.__self__.bit_generator.state = np.random.default_rng(6).bit_generator.state
    np.random.seed(0)


def _runs(f, fun, w):
    """Three calls of the cached code, of eager NumPy and of the tape, each from the same
    seeds: each call draws anew, the same numbers as eager NumPy."""
    _reseed()
    got = [f(w) for _ in range(3)]
    _reseed()
    eager = [fun(w) for _ in range(3)]
    _reseed()
    taped = [tape.grad(fun)(w) for _ in range(3)]
    for (value, g), e, t in zip(got, eager, taped):
        np.testing.assert_allclose(value, e, rtol=1e-12)
        np.testing.assert_allclose(g, t, rtol=1e-12)
    assert not np.allclose(got[0][1], got[1][1])  # not frozen


def test_generators_in_global_containers_and_generator_methods():
    w = np.array([0.5, -1.0, 2.0])
    for fun in (_from_dict, _from_list, _from_tuple, _from_method, _from_imports):
        f = value_and_grad(fun)
        _runs(f, fun, w)
        assert f.cache_info().misses == 1, fun.__name__


def test_a_generator_method_rebound_to_another_generator():
    global sample
    w = np.array([0.5, -1.0, 2.0])
    f = value_and_grad(_from_method)
    try:
        for seed in (1, 2):
            np.random.seed(0)
            sample = np.random.default_rng(seed).standard_normal
            value, _ = f(w)
            np.random.seed(0)
            sample = np.random.default_rng(seed).standard_normal
            np.testing.assert_allclose(value, _from_method(w), rtol=1e-12)
        sample = np.random.default_rng(1).random  # another method: the name is a guard
        np.random.seed(0)
        value, _ = f(w)
        np.random.seed(0)
        sample = np.random.default_rng(1).random
        np.testing.assert_allclose(value, _from_method(w), rtol=1e-12)
        assert f.cache_info().misses == 2
    finally:
        sample = np.random.default_rng(6).standard_normal


# ---- (3) NumPy ints read from outside; ints under hessian and grad(grad) ---------------------
STEP = np.int64(0)
EPOCH = 0


def _stepped(w):
    return np.sum(np.sin(w)) * STEP + np.sum(w ** 2) * 0.9 ** EPOCH


def _annealed(w):
    loss = np.sum(w ** 3) * 0.9 ** EPOCH
    if EPOCH >= 3:
        loss = loss + 0.01 * EPOCH * np.sum(w ** 2)
    return loss


def test_numpy_and_python_ints_are_inputs_under_every_transformation():
    global STEP, EPOCH
    w = np.array([0.3, -0.2])
    g = value_and_grad(_stepped)
    gg = value_and_grad(lambda t: autodiffgen.grad(_annealed)(t).sum())
    hess = autodiffgen.hessian(_annealed)
    try:
        for epoch in range(12):
            STEP, EPOCH = np.int64(epoch), epoch
            _same(g(w), _stepped, w)
            value, second = gg(w)
            np.testing.assert_allclose(value, tape.grad(_annealed)(w).sum(), rtol=1e-12)
            scale, l2 = 0.9 ** epoch, (0.02 * epoch if epoch >= 3 else 0.0)
            np.testing.assert_allclose(second, 6 * w * scale + l2, rtol=1e-10)
            np.testing.assert_allclose(hess(w), np.diag(6 * w * scale + l2), rtol=1e-10)
        assert g.cache_info().misses == 1
        assert gg.cache_info().misses == 2  # `if EPOCH >= 3` is a guard: one retrace
        assert "np.int64" in g.source(w)  # the type check spells NumPy's type
    finally:
        STEP, EPOCH = np.int64(0), 0


# ---- (4) a container past capture._MAX_LEAVES; (5) conversions of a value read from outside --
TABLE = {i: np.full(3, float(i)) for i in range(300)}
COEF = [0.5] * 300
V = np.array([1.0, 2.0, 3.0])


def _tabled(w):
    return np.sum(w * TABLE[7]) + COEF[3] * np.sum(w ** 2)


def _converted(w):
    return np.sum(w * np.array(V.tolist())) + np.sum(w ** 2 * np.asarray(V))


def _listed(w):
    return np.sum(w * V.tolist())


def test_a_big_global_container_and_converted_globals_are_never_stale():
    w = np.array([0.5, -1.0, 2.0])
    fs = [(value_and_grad(fun), fun) for fun in (_tabled, _converted, _listed)]
    try:
        for step in range(4):
            for f, fun in fs:
                _same(f(w), fun, w)
            TABLE[7][...] = 10.0 * step + 1
            COEF[3] = 2.0 + step
            V[...] = [step, -step, 0.5]
        TABLE[7] = np.zeros(3)
        _same(fs[0][0](w), _tabled, w)
    finally:
        TABLE[7], COEF[3], V[...] = np.full(3, 7.0), 0.5, [1.0, 2.0, 3.0]


# ---- (6) what the function stores into a user's list or dict stays in the trace --------------
LOG = []
STATS = {"calls": 0}


def _logging(w):
    y = np.sum(w ** 2)
    LOG.append(y)
    STATS["calls"] += 1
    return y * len(LOG)


def test_a_global_log_never_receives_traced_values():
    w = np.array([0.5, -1.0])
    f = value_and_grad(_logging)
    try:
        for i in range(3):
            with pytest.warns(UserWarning, match="changes the global") if i == 0 \
                    else contextlib.nullcontext():
                value, g = f(w)
            assert LOG == [] and STATS == {"calls": 0}  # not replayed; no Box leaked
            np.testing.assert_allclose(value, np.sum(w ** 2))
            np.testing.assert_allclose(g, 2 * w)
    finally:
        LOG.clear()
        STATS["calls"] = 0
