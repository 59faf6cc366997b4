"""The retrace the generalize stage is handed (pipeline.program passes `retrace(args)`, the
trace and outputs stages at other arguments): a size or count the function does not run at
is not served, whatever the function raises there; what is not an error (an interrupt)
reaches the user; and a failed retrace leaves nothing of the graph to the collector."""


import numpy as np
import pytest
from graph_helpers import cyclic_garbage, gradient_graph

from autodiffgen.generalize import batch, counts


def blocks(w, x):
    """Runs only where x's rows fill blocks of 64: not at n-1 or a low size."""
    return np.sum(x.reshape(-1, 64) ** 2) * w.sum()


def pairs(w, x, m):
    """Runs only at an even count: a probe at an odd count raises."""
    return np.sum(x[m].reshape(2, -1) @ w[:2])


def _batch_args():
    rng = np.random.default_rng(0)
    return rng.normal(size=3), rng.normal(size=(128, 1))


def _count_args():
    rng = np.random.default_rng(0)
    m = np.zeros(8, bool)
    m[[0, 2, 5, 7]] = True
    return rng.normal(size=3), rng.normal(size=8), m


def _graph(fun, args):
    return gradient_graph(fun, args, (0,), ["w", "x", "m"][:len(args)])


def _same(graph):
    return graph


def _raising(error):
    def retrace(args):
        raise error
    return retrace


@pytest.mark.parametrize("error", [ValueError("no"), RuntimeError("no"), AssertionError()])
def test_a_batch_size_the_retrace_raises_at_is_not_served(error):
    args = _batch_args()
    raw = _graph(blocks, args)
    graph = batch.generalize(raw, args, [True, False], ["w", "x"], _same, _raising(error))
    assert graph is raw and graph.batch is None


@pytest.mark.parametrize("error", [ValueError("no"), RuntimeError("no"), AssertionError()])
def test_a_count_the_retrace_raises_at_is_not_served(error):
    args = _count_args()
    raw = _graph(pairs, args)
    assert counts.general(args, _same, raw, _raising(error)) is raw


def test_an_interrupt_in_a_retrace_reaches_the_user():
    w, x = _batch_args()
    with pytest.raises(KeyboardInterrupt):
        batch.generalize(_graph(blocks, (w, x)), (w, x), [True, False], ["w", "x"], _same,
                         _raising(KeyboardInterrupt()))
    args = _count_args()
    with pytest.raises(KeyboardInterrupt):
        counts.general(args, _same, _graph(pairs, args), _raising(KeyboardInterrupt()))


@pytest.mark.parametrize("fun, args", [(blocks, _batch_args()), (pairs, _count_args())])
def test_a_failed_retrace_leaves_no_graph_to_the_collector(fun, args):
    """The error a retrace raised, and its traceback's frames, are freed with it: no frame
    that holds them is held by them (the traces of a first call are freed as it ends)."""
    found = cyclic_garbage(fun, args)
    assert not found["Graph"] and not found["Trace"] and not found["frame"], found
