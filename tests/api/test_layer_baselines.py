"""benchmarks/layers.py's hand-written backward passes stay correct: at tiny sizes each
layer-style model's baseline gives autodiffgen's value and gradients (run.py's check,
rtol 1e-6 in float64), and the JAX ports of the character models give them too."""

import importlib.util
import inspect
import pathlib
import sys

import numpy as np
import pytest

BENCH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name):
    spec = importlib.util.spec_from_file_location(f"benchmarks_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


layers = _load("layers")
run = layers.run


@pytest.mark.parametrize("w", layers.MODELS, ids=lambda w: w.name)
def test_baseline_matches_autodiffgen(w):
    """Gradient by gradient, so a failure names the argument whose backward is wrong."""
    import autodiffgen

    args = w.make_args(np.random.default_rng(1), **w.sizes["tiny"])
    value, grads = autodiffgen.value_and_grad(w.make_loss(np), argnums=w.argnums)(*args)
    want_value, want_grads = w.by_hand(*args)
    np.testing.assert_allclose(value, want_value, rtol=layers.RTOL)
    names = list(inspect.signature(w.by_hand).parameters)
    assert len(want_grads) == len(grads) == len(w.argnums)
    for i, got, want in zip(w.argnums, grads, want_grads):
        scale = float(np.max(np.abs(want)))
        np.testing.assert_allclose(got, want, rtol=layers.RTOL, atol=layers.RTOL * scale,
                                   err_msg=f"{w.name}: gradient of {names[i]}")


def test_seventeen_models_in_the_styles_asked_for():
    assert len(layers.MODELS) == 17
    source = pathlib.Path(layers.lm.__file__).read_text()
    for style in ("np.add.at", "out[n, f, i, j] =", "h[:, t, :] =", "z[pos_mask] =",
                  "xs[t][inputs[t]] = 1", "probs /=", 'cache["x_hat"]'):
        assert style in source, style


@pytest.mark.parametrize("name", ["char_rnn", "char_lstm"])
def test_jax_ports_match_the_baseline(name):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    w = next(w for w in layers.MODELS if w.name == name)
    args = w.make_args(np.random.default_rng(1), **w.sizes["tiny"])
    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        value, grads = jax.value_and_grad(w.jax_loss(jnp, jax), argnums=w.argnums)(*args)
        result = (np.asarray(value), tuple(np.asarray(g) for g in grads))
    finally:
        jax.config.update("jax_enable_x64", before)
    assert run.check(w, run.HandWritten(), result, w.by_hand(*args)) is None


def test_main_prints_the_table(capsys):
    assert layers.main(["--only", "relu", "--size", "tiny", "--rounds", "1",
                        "--sample", "1e-4", "--jax", "off"]) == 0
    out = capsys.readouterr().out
    assert "| model | shapes |" in out and "| relu | x 128x1024 |" in out
