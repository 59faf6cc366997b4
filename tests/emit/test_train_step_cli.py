"""`autodiffgen emit` on a compiled training step (examples/digits.py): the whole step
printed and ruff-clean, `-o` refused with a one-line error; the digits example trains to
95% test accuracy and logs its progress line by line (when scikit-learn is installed: the
`examples` extra)."""

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIGITS = os.path.join(ROOT, "examples", "digits.py")


def run(*args, cwd=ROOT):
    return subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=120, check=False)


def test_emit_prints_the_whole_training_step(tmp_path):
    result = run("-m", "autodiffgen", "emit", DIGITS)
    assert result.returncode == 0, result.stderr
    source = result.stdout
    assert "def loss_train_step(params, state, hyper, x, y):" in source
    assert "# forward" in source and "# backward" in source
    assert "hyper_lr = hyper['lr']" in source and "state_m_W1 = state['m']['W1']" in source
    assert "return (loss, {'W1':" in source
    out = tmp_path / "step.py"
    out.write_text(source)
    lint = run("-m", "ruff", "check", "--no-cache", "--isolated", "--line-length", "100", out)
    assert lint.returncode == 0, lint.stdout


def test_standalone_module_of_a_step_is_refused():
    result = run("-m", "autodiffgen", "emit", DIGITS, "-o", "never_written.py")
    assert result.returncode == 2
    assert "compiled training step" in result.stderr and "--function" in result.stderr
    assert not os.path.exists(os.path.join(ROOT, "never_written.py"))


def test_digits_example_reaches_95_percent(tmp_path):
    """Trained, 95% on the test split. Its stdout a pipe (a log file, CI), the progress is
    plain lines, the first epoch's and every third of 30, not a bar redrawn with carriage
    returns into one 2 KB line (the bar is for a terminal)."""
    pytest.importorskip("sklearn")
    result = run(DIGITS, cwd=tmp_path)  # the plot goes to tmp_path
    assert result.returncode == 0, result.stderr
    accuracy = float(re.search(r"test accuracy (\d\.\d+)", result.stdout).group(1))
    assert accuracy >= 0.95
    assert "CacheInfo(hits=688, misses=2, entries=2)" in result.stdout
    losses = [float(v) for v in re.findall(r"loss (\d+\.\d+)", result.stdout)]
    assert losses[-1] < losses[0] / 10
    assert "\r" not in result.stdout
    lines = result.stdout.splitlines()
    epochs = [line for line in lines if line.startswith("epoch ")]
    assert [line.split()[1] for line in epochs] == \
        ["1/30", "3/30", "6/30", "9/30", "12/30", "15/30", "18/30", "21/30", "24/30",
         "27/30", "30/30"]
    assert all(re.fullmatch(r"epoch +\d+/30  loss \d+\.\d{4}", line) for line in epochs)
    assert max(map(len, lines)) < 100
