"""Tracing and cached calls from several threads at once.

The tracer's current recording is per thread, a miss is compiled under the
GradFunction's lock (so threads racing for one entry share one compiled function), and
generated code keeps no state: every thread must get the answer of the dynamic tape or
of a closed form, whatever the other threads are tracing meanwhile.
"""

import sys
import threading
import time
import warnings

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen import tape
from autodiffgen.trace.context import current_trace

THREADS = 8
TIMEOUT = 20  # seconds: a deadlock fails the test instead of hanging it


@pytest.fixture(autouse=True)
def fine_grained_switching():
    """Threads switch every 10 microseconds instead of every 5 ms, so that traces
    really interleave (a race that needs two threads inside a trace at once shows up)."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(old)


def run_threads(work, n=THREADS):
    """Run work(i) for i < n, each in its own thread, and re-raise the first failure:
    an assertion inside a thread must fail the test, not just print."""
    errors = []

    def target(i):
        try:
            work(i)
        except BaseException as error:  # noqa: BLE001  handed to the main thread
            errors.append(error)
    threads = [threading.Thread(target=target, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT)
    if errors:  # first: a failed thread leaves its partners waiting at a barrier
        raise errors[0]
    assert not any(thread.is_alive() for thread in threads), "a thread hung (deadlock?)"


def close(actual, expected):
    np.testing.assert_allclose(actual, expected, rtol=1e-10, atol=1e-12)


# ---- functions with a dynamic-tape or closed-form answer ---------------------------------
def layer(W, x):
    return np.tanh(x @ W).sum() * W[0, 0]


def log_sum_exp(x, y):
    return np.log(np.exp(x * y).sum()) + (y * y).mean()


def sin_times(x):
    return (np.sin(x) * x).sum()


def tanh_times(x):
    return np.tanh(x) * x


def tanh_times_tangent(x, t):
    return t * ((1 - np.tanh(x) ** 2) * x + np.tanh(x))


def _mixed_call(rng, shared, k):
    """One call of one of the shared functions, checked against the tape or a closed
    form; k picks the kind of call, so every thread mixes all of them."""
    n = int(rng.integers(1, 5))  # a few shapes: entries are both raced for and reused
    x = rng.normal(size=n)
    kind = k % 6
    if kind == 0:
        W = rng.normal(size=(n, 3))
        value, grads = shared["layer"](W, x[None, :])
        want = tape.value_and_grad(layer, argnums=(0, 1))(W, x[None, :])
        close(value, want[0])
        close(grads[0], want[1][0])
        close(grads[1], want[1][1])
    elif kind == 1:
        y = rng.normal(size=n)
        close(shared["lse"](x, y), tape.grad(log_sum_exp, argnums=1)(x, y))
    elif kind == 2:
        t = rng.normal(size=n)
        out, tangent = ad.jvp(tanh_times, (x,), (t,))
        close(out, tanh_times(x))
        close(tangent, tanh_times_tangent(x, t))
    elif kind == 3:
        u = rng.normal(size=n)
        out, vjp_fn = ad.vjp(tanh_times, x)
        close(out, tanh_times(x))
        close(vjp_fn(u)[0], tanh_times_tangent(x, u))
    elif kind == 4:
        close(ad.jacobian(tanh_times)(x), np.diag(tanh_times_tangent(x, np.ones(n))))
    else:
        close(ad.hessian(sin_times)(x), np.diag(2 * np.cos(x) - x * np.sin(x)))


def test_eight_threads_mixing_functions_shapes_and_transforms_get_right_answers():
    shared = {"layer": ad.value_and_grad(layer, argnums=(0, 1)),
              "lse": ad.grad(log_sum_exp, argnums=1)}
    calls = 36

    def work(i):
        rng = np.random.default_rng(1000 + i)
        for k in range(calls):
            _mixed_call(rng, shared, i + k)
    run_threads(work)
    for function in shared.values():
        info = function.cache_info()
        assert info.misses <= info.entries <= 4  # at most one trace per shape, however raced (a batch function serves several)
        assert 0 < info.hits <= THREADS * calls  # approximate under threads, never broken


def test_threads_racing_for_one_entry_compile_it_once():
    traced = []

    def slow(x, y):
        traced.append(threading.get_ident())
        time.sleep(0.05)  # a slow trace: every other thread arrives while it runs
        return (np.exp(x) * y).sum()
    f = ad.value_and_grad(slow, argnums=(0, 1))
    x, y = np.linspace(-1, 1, 5), np.linspace(2, 3, 5)
    start = threading.Barrier(THREADS, timeout=TIMEOUT)
    results = [None] * THREADS

    def work(i):
        start.wait()
        results[i] = f(x, y)
    run_threads(work)
    assert len(traced) == 1
    assert f.cache_info().misses == 1 and f.cache_info().entries == 1
    for value, (gx, gy) in results:
        assert value == results[0][0]  # one compiled function: bit-identical results
        close(value, (np.exp(x) * y).sum())
        close(gx, np.exp(x) * y)
        close(gy, np.exp(x))


def test_threads_racing_for_one_jvp_compile_it_once():
    """The module-level transforms keep one transformed function per user function;
    threads that ask for it at the same moment must not each make (and trace) their own."""
    traced = []

    def slow(x):
        traced.append(threading.get_ident())
        time.sleep(0.05)
        return tanh_times(x)
    x, t = np.linspace(-1, 1, 4), np.linspace(1, 2, 4)
    start = threading.Barrier(THREADS, timeout=TIMEOUT)
    results = [None] * THREADS

    def work(i):
        start.wait()
        results[i] = ad.jvp(slow, (x,), (t,))
    run_threads(work)
    assert len(traced) == 1
    for out, tangent in results:
        close(out, tanh_times(x))
        close(tangent, tanh_times_tangent(x, t))


def test_threads_taking_a_new_branch_at_once_add_one_variant():
    """A data-dependent branch: when every thread's arguments fail the cached path's
    guard at the same moment, the other path is traced once, not once per thread (which
    would also run into the bound on variants and raise)."""
    traced = []

    def branchy(x):
        traced.append(threading.get_ident())
        time.sleep(0.02)
        if x.sum() > 0:
            return (x ** 2).sum()
        return -np.sin(x).sum()
    f = ad.grad(branchy)
    close(f(np.ones(3)), 2 * np.ones(3))  # the positive path is cached
    negative = -np.linspace(1, 2, 3)
    start = threading.Barrier(THREADS, timeout=TIMEOUT)
    results = [None] * THREADS

    def work(i):
        start.wait()
        results[i] = f(negative)
    run_threads(work)
    assert len(traced) == 2
    assert f.cache_info().misses == 2
    for g in results:
        close(g, -np.cos(negative))


def test_two_traces_at_once_never_see_each_others_boxes():
    """Both functions wait for each other in the middle of their traces, then record a
    chain of steps at the same time; each generated function must hold its own steps."""
    both_tracing = threading.Barrier(2, timeout=TIMEOUT / 4)
    steps = 40

    def chain(start, factor):
        def traced(x):
            h = start(x)
            try:  # meet the other trace; if it is late (a loaded machine), go on anyway
                both_tracing.wait()
            except threading.BrokenBarrierError:
                pass
            for _ in range(steps):
                h = h * factor
                assert h.node.trace_id == current_trace().id
            return h.sum()
        return traced
    chains = [(ad.grad(chain(np.sin, 1.01)), np.cos, 1.01, "exp"),
              (ad.grad(chain(np.exp, 0.99)), np.exp, 0.99, "sin")]

    def work(i):
        f, derivative, factor, foreign = chains[i]
        for n in range(1, 6):  # a new shape: a new trace, again alongside the other's
            x = np.linspace(0.1, 0.9, n)
            close(f(x), derivative(x) * factor ** steps)
            assert f"np.{foreign}" not in f.source(x)
    run_threads(work, n=2)


def test_a_box_of_another_threads_trace_is_refused():
    """A traced value that reaches another thread's function (through a shared variable)
    would mix two recordings: it must be an error, and the owner's trace must not suffer."""
    handed, used = threading.Event(), threading.Event()
    shared = []

    def owner(x):
        shared.append(x * 2.0)
        handed.set()
        used.wait(TIMEOUT)
        return (shared[0] * x).sum()

    def borrower(y):
        return (y * shared[0]).sum()
    x = np.linspace(1, 2, 3)

    def work(i):
        if i == 0:
            close(ad.grad(owner)(x), 4 * x)
            return
        handed.wait(TIMEOUT)
        try:
            with pytest.raises(ad.TracingError, match="another|enclosing"):
                ad.grad(borrower)(np.ones(3))
        finally:
            used.set()  # the owner finishes its trace either way
    run_threads(work, n=2)


def test_nested_grad_of_grad_in_threads():
    d2_shared = ad.grad(ad.grad(lambda t: np.sin(t) * t))

    def work(i):
        rng = np.random.default_rng(2000 + i)
        for k in range(6):
            t = float(rng.uniform(-2, 2))
            want = 2 * np.cos(t) - t * np.sin(t)
            close(d2_shared(t), want)
            close(d2_shared(np.array(t)), want)  # a 0-d array: another entry, NumPy code
            # a fresh nested function: both levels trace here, alongside other threads
            fresh = ad.grad(ad.grad(lambda s, k=k: np.sin(s) * s * (k + 1)))
            close(fresh(t), want * (k + 1))
    run_threads(work)


def test_cache_clear_while_other_threads_call():
    cube = ad.grad(lambda x: (x ** 3).sum())

    def work(i):
        if i == 0:
            for _ in range(30):
                cube.cache_clear()
                time.sleep(0.002)
            return
        rng = np.random.default_rng(3000 + i)
        for _ in range(60):
            x = rng.normal(size=1 + i % 3)
            close(cube(x), 3 * x * x)
    run_threads(work, n=4)
    info = cube.cache_info()
    assert info.entries <= 3 and info.misses >= 0 and info.hits >= 0


def test_tracing_in_threads_leaves_the_warning_filters_alone():
    """Rendering silences a DeprecationWarning of astor's for its own duration; two
    threads doing so at once must not leave the filter installed for the whole process."""
    before = list(warnings.filters)

    def work(i):
        for k in range(12):
            ad.grad(lambda x, k=k: np.tanh(x * (k + 1.0)).sum())(np.ones(i + 1))
    run_threads(work)
    assert warnings.filters == before


def test_one_compile_per_key_under_threads():
    f = ad.grad(lambda x: np.sum(np.tanh(x) ** 2))
    barrier = threading.Barrier(6)
    results = []

    def call():
        barrier.wait()
        results.append(f(np.ones(4)))
    threads = [threading.Thread(target=call) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert f.cache_info().misses == 1 and len(results) == 6
