"""A differential fuzzer for a mask's count used in Python float formulas (review A item 8):
random programs divide or scale a masked selection's sum by a formula of len(selection)
(`len(p) + 1.0`, `len(p) ** 2`, `np.sqrt(len(p))`, `len(p) ** -0.5`, `2.0 * len(p) - 1`),
and the same cached function is called with masks selecting 8 other counts (from 2 to
23), from an argument and from data. Compared with eager NumPy and the tape; a one-term program traces at most
twice (counts below 2 trace their own code, as for any size the user's Python reads);
several terms may combine into a formula not fitted, which retraces per count (checked
for values only, over 8 counts).

Derandomized: CI runs the same programs every time; AUTODIFFGEN_FUZZ=<n> runs n examples.
"""

import os

import numpy as np
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from autodiffgen import tape, value_and_grad

EXAMPLES = int(os.environ.get("AUTODIFFGEN_FUZZ", "25"))
N = 24
FORMULAS = [lambda k: k + 1.0, lambda k: k ** 2, lambda k: np.sqrt(k), lambda k: k ** -0.5,
            lambda k: 2.0 * k - 1, lambda k: (k + 2) ** 2, lambda k: 1.0 / (k + 3.0)]
USES = ["divide", "multiply"]


@settings(max_examples=EXAMPLES, derandomize=True, deadline=None,
          suppress_health_check=list(HealthCheck), phases=[Phase.generate])
@given(st.lists(st.tuples(st.integers(0, len(FORMULAS) - 1), st.sampled_from(USES),
                          st.booleans()), min_size=1, max_size=3),
       st.integers(0, 2**16))
def test_count_formulas(terms, seed):
    def program(w, m, x):
        total, selected = 0.0, (w[m], w[x > 0.0])  # two count sources
        for index, use, from_data in terms:
            p = selected[from_data]
            c = FORMULAS[index](len(p))
            total = total + (np.sum(p ** 2) / c if use == "divide" else np.sum(np.sin(p)) * c)
        return total

    rng = np.random.default_rng(seed)
    f = value_and_grad(program)
    for k in rng.permutation(np.arange(2, N))[:8]:
        w, x = rng.standard_normal(N), rng.standard_normal(N)
        x[:2] = 1.0  # the data mask selects 2 or more, as the argument mask does
        m = np.zeros(N, bool)
        m[rng.permutation(N)[:k]] = True
        value, g = f(w, m, x)
        np.testing.assert_allclose(value, program(w, m, x), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(g, tape.grad(program)(w, m, x), rtol=1e-10, atol=1e-14)
    if len(terms) == 1:  # several formulas may be folded together into one not fitted
        assert f.cache_info().misses <= 2
