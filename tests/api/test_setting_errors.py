"""Unclear errors made clear (issue 10): a None leaf under argnums, a bad max_entries= or
$AUTODIFFGEN_MAX_ENTRIES, and @grad stacked above @classmethod or @staticmethod each
raise at once, naming the problem and the user's file and line."""

import os
import subprocess
import sys

import numpy as np
import pytest

from autodiffgen import grad, value_and_grad


def test_none_inside_a_dict_under_argnums_is_named():
    def loss(p, x):
        return np.sum(p["w"] * x + p["b"])
    with pytest.raises(ValueError, match=r"test_setting_errors.py:\d+: argument 'p_b' \(entry "
                       r"\['b'\] of argument 0\) is under argnums but is None"):
        grad(loss)({"w": np.ones(3), "b": None}, np.ones(3))


def test_none_inside_a_dict_outside_argnums_is_data():
    def loss(w, cfg):
        return np.sum(w * 2.0) if cfg["bias"] is None else np.sum(w + cfg["bias"])
    np.testing.assert_allclose(grad(loss)(np.ones(3), {"bias": None}), 2.0 * np.ones(3))


@pytest.mark.parametrize("bad", ["x", -1, 2.5, True])
def test_max_entries_must_be_a_count(bad):
    with pytest.raises(ValueError, match=r"test_setting_errors.py:\d+: max_entries must be an "
                       rf"int of at least 0, got {bad!r}"):
        value_and_grad(lambda x: np.sum(x), max_entries=bad)
    assert value_and_grad(lambda x: np.sum(x), max_entries=np.int64(3)).max_entries == 3


def test_max_variants_must_be_a_count():
    with pytest.raises(ValueError, match="max_variants must be an int of at least 1, got 0"):
        grad(lambda x: np.sum(x), max_variants=0)


@pytest.mark.parametrize("value", ["abc", "-2", ""])
def test_a_bad_environment_setting_is_named(value):
    env = dict(os.environ, AUTODIFFGEN_MAX_ENTRIES=value)
    run = subprocess.run([sys.executable, "-c", "import autodiffgen"], check=False, env=env,
                         capture_output=True, text=True)
    assert run.returncode == 1
    assert f"ValueError: $AUTODIFFGEN_MAX_ENTRIES must be an int of at least 0, got {value!r}" \
        in run.stderr


def test_grad_above_classmethod_says_to_put_it_below():
    with pytest.raises(TypeError, match=r"test_setting_errors.py:\d+: @grad \(or value_and_grad"
                       r"\) is stacked above @classmethod.*@classmethod, then "
                       r"@grad\(argnums=1\)"):
        class Model:
            @grad
            @classmethod
            def loss(cls, w):
                return np.sum(w ** 2)


def test_grad_above_staticmethod_says_to_put_it_below():
    with pytest.raises(TypeError, match=r"test_setting_errors.py:\d+: .*stacked above "
                       r"@staticmethod.*@staticmethod, then @grad on the line below"):
        class Model:
            @value_and_grad(argnums=0)
            @staticmethod
            def loss(w):
                return np.sum(w ** 2)


def test_the_order_the_errors_advise_works():
    class Model:
        @classmethod
        @grad(argnums=1)
        def scaled(cls, w):
            return np.sum(w ** 2)

        @staticmethod
        @grad
        def plain(w):
            return np.sum(w ** 3)
    w = np.array([1.0, -2.0])
    np.testing.assert_allclose(Model.scaled(w), 2 * w)
    np.testing.assert_allclose(Model().scaled(w), 2 * w)
    np.testing.assert_allclose(Model().plain(w), 3 * w ** 2)
