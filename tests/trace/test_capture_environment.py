"""Reads the capture of issue 10 first missed: the process environment (os.environ,
os.getenv) read inside the function, a helper behind functools.lru_cache, and
type(self).ATTR. Each is a guard or an input of the generated code, so a later call
that sees another value gives eager NumPy's answer."""

import functools
import os

import numpy as np
import pytest

from autodiffgen import tape, value_and_grad
from autodiffgen.testing import check_grads

X = np.array([0.3, -0.7, 1.1])


def verify(vg, fun, *args, argnums=0):
    value, g = vg(*args)
    np.testing.assert_allclose(value, fun(*args), rtol=1e-12)
    _, t_g = tape.value_and_grad(fun, argnums=argnums)(*args)
    np.testing.assert_allclose(g, t_g, rtol=1e-12)
    return value


@pytest.fixture
def env(monkeypatch):
    monkeypatch.delenv("ADG_TEST_MODE", raising=False)
    monkeypatch.delenv("ADG_TEST_SCALE", raising=False)
    return monkeypatch


def by_environ(w):
    mode = os.environ.get("ADG_TEST_MODE")
    y = np.sum(np.sin(w)) if mode == "sin" else np.sum(w ** 2)
    return y * float(os.getenv("ADG_TEST_SCALE", "1.0"))


def by_item(w):
    return np.sum(w ** 3) if os.environ["ADG_TEST_MODE"] == "cube" else np.sum(w)


def test_environment_variables_read_inside_are_guards(env):
    vg = value_and_grad(by_environ)
    seen = {round(float(verify(vg, by_environ, X)), 9)}
    for mode, scale in [("sin", None), ("sin", "2.5"), (None, "3.0"), ("other", "3.0")]:
        for name, value in (("ADG_TEST_MODE", mode), ("ADG_TEST_SCALE", scale)):
            if value is None:
                env.delenv(name, raising=False)
            else:
                env.setenv(name, value)
        seen.add(round(float(verify(vg, by_environ, X)), 9))
        check_grads(by_environ, X, fwd=False)
    assert len(seen) == 4  # "other" computes as unset does
    source = vg.source(X)
    assert "environ.get('ADG_TEST_MODE')" in source


def test_an_environment_variable_read_by_item(env):
    vg = value_and_grad(by_item)
    for mode in ("cube", "other", "cube"):
        env.setenv("ADG_TEST_MODE", mode)
        verify(vg, by_item, X)
    env.delenv("ADG_TEST_MODE")
    with pytest.raises(KeyError):
        vg(X)  # as eager: the variable is gone


POWER = 2


@functools.cache
def coefficient(k):
    return 2.0 ** k


def cached_helper(w):
    return np.sum(w ** 2) * coefficient(POWER)


def test_a_helper_behind_lru_cache_runs_uncached_while_traced():
    global POWER
    vg = value_and_grad(cached_helper)
    try:
        for power in (2, 3, 5):
            POWER = power
            verify(vg, cached_helper, X)
    finally:
        POWER = 2
    assert coefficient.cache_info().currsize <= 3  # the eager calls; no Box was cached


class Scaled:
    SCALE = 1.5

    def loss(self, x):
        return np.sum(x ** 2) * type(self).SCALE


def test_type_of_self_reads_the_class_as_self_does():
    model = Scaled()
    vg = value_and_grad(Scaled.loss, argnums=1)
    try:
        for scale in (1.5, 2.0, -3.0):
            Scaled.SCALE = scale
            verify(vg, Scaled.loss, model, X, argnums=1)
    finally:
        Scaled.SCALE = 1.5
    assert vg.cache_info().misses == 1  # a float: an input of the code


class ScaledByClass:
    SCALE = 1.5

    def loss(self, x):
        assert isinstance(self, ScaledByClass)  # isinstance still sees the real class
        return np.sum(x ** 2) * self.__class__.SCALE


def test_self_dot_class_reads_the_class_as_self_does():
    model = ScaledByClass()
    vg = value_and_grad(ScaledByClass.loss, argnums=1)
    try:
        for scale in (1.5, 2.0, -3.0):
            ScaledByClass.SCALE = scale
            verify(vg, ScaledByClass.loss, model, X, argnums=1)
    finally:
        ScaledByClass.SCALE = 1.5
    assert vg.cache_info().misses == 1
