"""The disk cache stores no drawn number: code loaded in another process draws from Python's
random module, a random.Random global and a function imported from random at run time,
as eager Python does (rules/pyrandom.py)."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np

MODEL = """
    import random
    from random import gauss

    import numpy as np

    R = random.Random(0)


    def f(x):
        return np.sum(np.sin(x) * R.random() + x * gauss(0.0, 1.0) + random.uniform(0, x[0]))
"""

RUN = """
    import json, random, sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    import model_random as model
    import autodiffgen
    from autodiffgen.trace import tracer
    if sys.argv[2] == "second":
        tracer.trace = None  # a trace in this process would fail: the code is loaded
    f = autodiffgen.value_and_grad(model.f)
    x = np.array([0.1, 0.2, 0.7])
    random.seed(1)
    model.R.seed(2)
    got = [f(x) for _ in range(3)]
    random.seed(1)
    model.R.seed(2)
    want = [model.f(x) for _ in range(3)]
    print(json.dumps([[float(v) for v, _ in got], [float(v) for v in want],
                      [g.tolist() for _, g in got], f.cache_info().misses]))
"""


def run(tmp_path, which):
    env = {**os.environ, "AUTODIFFGEN_CACHE_DIR": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(RUN), str(tmp_path), which],
                         check=False, capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_code_loaded_in_another_process_draws_at_run_time_as_eager(tmp_path):
    (tmp_path / "model_random.py").write_text(textwrap.dedent(MODEL))
    first = run(tmp_path, "first")
    second = run(tmp_path, "second")
    assert first[3] == 1 and second[3] == 0  # the second process traced nothing
    for values, eager, grads, _ in (first, second):
        assert values == eager and len(set(values)) == 3  # drawn anew each call
    assert second[0] == first[0]
    np.testing.assert_array_equal(second[2], first[2])
