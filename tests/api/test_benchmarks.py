"""The benchmark suite's hand-written baselines stay correct: at tiny sizes, autodiffgen's
value and gradients equal each baseline's, through the suite's own check (no peers)."""

import importlib.util
import pathlib
import sys

import numpy as np
import pytest

BENCH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"


def _load_run():
    spec = importlib.util.spec_from_file_location("benchmarks_run", BENCH / "run.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


run = _load_run()


@pytest.mark.parametrize("w", run.WORKLOADS, ids=lambda w: w.name)
def test_baseline_matches_autodiffgen(w):
    args = w.make_args(np.random.default_rng(1), **w.sizes["tiny"])
    autodiffgen = run.Autodiffgen()
    _, _, result = autodiffgen.prepare(w, args)
    reference = w.by_hand(*args)
    assert len(reference[1]) == len(w.argnums)
    assert run.check(w, autodiffgen, result, reference) is None


@pytest.mark.parametrize("w", run.WORKLOADS, ids=lambda w: w.name)
def test_harness_runs_each_workload(w):
    out = run.run_workload(w, [run.HandWritten(), run.Autodiffgen()], rounds=1, sample=1e-4,
                           log=lambda *a: None, size="tiny")
    assert out["aborted"] is None
    assert set(out["median"]) == {run.BASELINE, "autodiffgen", *w.extras}
    assert out["memory"][run.BASELINE] > 0 or w.python_floats


def test_check_catches_a_wrong_gradient():
    w = next(w for w in run.WORKLOADS if w.name == "mlp")
    args = w.make_args(np.random.default_rng(2), **w.sizes["tiny"])
    value, grads = w.by_hand(*args)
    wrong = (value, (grads[0] * 1.01, *grads[1:]))
    message = run.check(w, run.HandWritten(), wrong, (value, grads))
    assert message is not None and "gradient of W1" in message


def test_markdown_report(tmp_path):
    path = tmp_path / "RESULTS.md"
    path.write_text("# old results\n\n## Notes\n\nkept by hand\n")
    assert run.main(["--only", "scalar", "--peers", "off", "--rounds", "1", "--sample", "1e-4",
                     "--markdown", str(path)]) == 0
    text = path.read_text()
    assert "| scalar | 1.00x |" in text and "## First call" in text
    assert "# old results" not in text and text.endswith("## Notes\n\nkept by hand\n")


def test_train_step_benchmark_runs_and_agrees():
    """benchmarks/train_step.py at tiny sizes: the compiled step and grad + update give the
    same parameters (it asserts so) and it prints both ratios."""
    import subprocess

    out = subprocess.run([sys.executable, str(BENCH / "train_step.py"), "--hidden", "8",
                          "--batch", "4", "--steps", "2", "--rounds", "1"],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert "compiled / (grad + update): time" in out.stdout and "peak memory" in out.stdout
