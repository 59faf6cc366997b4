"""The cached call's dispatch (cache/dispatch.py): the generated `same` and `key` agree
with keys.signature_key on every kind of argument, and a call takes the code its own
arguments select, whatever ran before it (the last call's fast path and the look-up
alike): floats, ints, bools, NumPy scalars, 0-d and other arrays, pytrees, keywords,
defaults, guards, captured globals, numbers made static."""

import collections
import math
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import autodiffgen as ad
from autodiffgen.cache import dispatch
from autodiffgen.cache.keys import signature_key

EXAMPLES = int(os.environ.get("AUTODIFFGEN_FUZZ", "200"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])
Pair = collections.namedtuple("Pair", "a b")
GENERATOR = np.random.default_rng(0)

LEAVES = [  # one of each kind of argument, and neighbours that differ in one way
    2.0, 5.0, -0.0, float("nan"), float("inf"), 3, -7, 2**70, -2**63, 2**63 - 1, 2**63,
    True, False, 1j, 2 + 0j, None, "relu", b"x", np.float64(2.0), np.float32(2.0),
    np.int64(3), np.bool_(True), np.complex128(1j), np.array(2.0), np.array(2.0, np.float32),
    np.array(3), np.ones(2), np.ones(3), np.ones((2, 3)), np.ones(2, np.float32),
    np.ones(2, ">f8"), np.ones(2, "<f8"), np.zeros((0, 2)), (np.ones(2), 1.0), [1.0, 2.0],
    [1.0, 2], {"w": np.ones(2), "b": 0.5}, {"b": 0.5, "w": np.ones(2)},
    Pair(np.ones(2), 3.0), GENERATOR, np.random.default_rng(1), collections.OrderedDict(x=1.0),
]
leaves = st.sampled_from(range(len(LEAVES))).map(LEAVES.__getitem__)
calls = st.lists(leaves, min_size=0, max_size=4).map(tuple)
flags = st.lists(st.sampled_from([True, False, None]), min_size=4, max_size=4)


def _types(args):
    return tuple(map(type, args))


@SETTINGS
@given(calls, calls, flags)
def test_same_and_key_agree_with_the_signature_key(first, then, diff):
    """`key` is signature_key for arguments of its types; `same` holds exactly when the
    types and the keys are the same (never when the types differ), and `run` runs its
    entry exactly then."""
    key = signature_key(first, diff)
    assert dispatch.keyer(first, diff)(*first) == key
    if _types(then) == _types(first):
        assert dispatch.keyer(first, diff)(*then) == signature_key(then, diff)
    same = dispatch.checker(first, diff, key)
    assert same(*first)
    expected = _types(then) == _types(first) and signature_key(then, diff) == key
    assert same(*then) == expected
    run = dispatch.runner(dispatch.condition(first, diff, key), lambda *args: args)
    assert run(*first) == first
    assert (run(*then) is not dispatch.MISS) == expected


def test_same_refuses_other_arities_and_a_key_the_arguments_do_not_have():
    same = dispatch.checker((2.0, 5.0), [True, True], (float, float))
    assert same(2.0, 5.0) and same(3.0, -1.0)
    assert not same(2.0) and not same(2.0, 5.0, 1.0) and not same()
    assert not same(2.0, np.float64(5.0)) and not same(2, 5.0) and not same(True, 5.0)
    assert dispatch.checker((2.0,), [None], (float,)) is dispatch.never  # a stale key


def _fresh(scale_of):
    """A new function object each time (grads of one function share their cache)."""
    def f(x, s):
        return np.sum(np.sin(x) * x) * scale_of(s)
    return f


X_KINDS = [2.0, np.float64(2.0), np.float32(2.0), np.array(2.0), np.array(2.0, np.float32),
           np.linspace(0.5, 1.5, 3), np.linspace(0.5, 1.5, 3).astype(np.float32),
           np.linspace(0.5, 1.5, 4)]
S_KINDS = [1.5, 3, True, np.float32(1.5), np.array(1.5), None, 2**70]


def _scale(s):
    if s is None:
        return 1.0
    return s % 7 if type(s) is int and s > 2**63 else s


@settings(max_examples=min(EXAMPLES, 40), deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(range(len(X_KINDS))),
                          st.sampled_from(range(len(S_KINDS)))), min_size=2, max_size=12))
def test_a_sequence_of_calls_gets_what_each_call_alone_gets(picks):
    """Calls with changing kinds of arguments, in any order, return what a fresh cache
    returns for each alone: values, dtypes, types (the fast path, the look-up and the
    compile path agree)."""
    cached = ad.value_and_grad(_fresh(_scale))
    for i, j in picks:
        x, s = X_KINDS[i], S_KINDS[j]
        got = cached(x, s)
        want = ad.value_and_grad(_fresh(_scale))(x, s)
        for a, b in zip(_flat(got), _flat(want)):
            assert type(a) is type(b) and np.shape(a) == np.shape(b)
            assert np.result_type(a) == np.result_type(b)
            np.testing.assert_allclose(a, b, rtol=1e-6)
    distinct = {signature_key((X_KINDS[i], S_KINDS[j]), cached._diff) for i, j in picks}
    assert cached.cache_info().misses == len(distinct)
    assert cached.cache_info().hits == len(picks) - len(distinct)


def _flat(out):
    value, grad = out
    return [value, grad]


def test_two_floats_run_the_last_entry_and_count_hits():
    f = ad.value_and_grad(lambda x1, x2: np.log(x1) + x1 * x2 - np.sin(x2), (0, 1))
    for x in (2.0, 3.0, 4.0):
        value, (g1, g2) = f(x, 5.0)
        assert value == pytest.approx(math.log(x) + 5 * x - math.sin(5.0))
        assert (g1, g2) == pytest.approx((1 / x + 5.0, x - math.cos(5.0)))
        assert type(value) is float and type(g1) is float
    assert f.cache_info() == (2, 1, 1)
    run = f._cache.last
    assert run(1.0, 5.0) == f(1.0, 5.0)
    for args in [(np.float64(1.0), 1.0), (1, 1.0), (1.0,), (1.0, 1.0, 1.0)]:
        assert run(*args) is dispatch.MISS


def test_calls_alternating_between_signatures_reuse_each_signature_s_run():
    f = ad.grad(lambda x, y: np.sin(x) * y)
    f(1.0, 2.0)
    run = f._cache.last
    f(np.float64(1.0), 2.0)
    assert f._cache.last is not run and f._cache.last(1.0, 2.0) is dispatch.MISS
    assert f(0.5, 2.0) == pytest.approx(2 * math.cos(0.5))
    assert f._cache.last is run  # made once per signature and entry
    assert f.cache_info().misses == 2


def test_an_int_too_large_for_int64_takes_its_own_code():
    f = ad.grad(lambda x, n: np.sum(x * (n % 5)))
    x = np.ones(3)
    for n in (3, 2**70, 3, 2**70 + 1, -4):
        np.testing.assert_array_equal(f(x, n), np.full(3, float(n % 5)))


def test_keywords_and_defaults_bind_before_the_look_up():
    def f(x, scale=2.0):
        return np.sum(x) * scale
    g = ad.grad(f)
    x = np.ones(2)
    for call, want in [((x,), 2.0), ((x, 3.0), 3.0), ((x,), 2.0), ((), 4.0), ((x, 5.0), 5.0)]:
        got = g(*call) if call else g(x, scale=4.0)
        np.testing.assert_array_equal(got, [want, want])


def test_guards_are_checked_on_the_fast_path():
    g = ad.grad(lambda x, t: x * x if t > 0 else -x)
    for t, want in [(1.0, 4.0), (-1.0, -1.0), (2.0, 4.0), (-3.0, -1.0)]:
        assert g(2.0, t) == want


SCALE = 2.0


def test_a_captured_global_is_read_at_each_call():
    global SCALE
    g = ad.grad(lambda x: x * SCALE)
    try:
        for SCALE in (2.0, 3.0, -1.0):
            assert g(1.5) == SCALE
    finally:
        SCALE = 2.0


def test_numbers_made_static_forget_every_grad_s_last_call():
    """A float a guard keeps failing on becomes static (keyed by value) for every grad of
    the function: a grad whose last call was keyed the old way takes the look-up."""
    def f(x, t):
        return x * math.exp(t)  # math reads t's value: a guard on it
    first, second = ad.grad(f, max_variants=2), ad.grad(f, max_variants=2)
    assert second(2.0, 1.0) == pytest.approx(math.e)
    for t in (1.0, 0.25, 0.75, 0.1, 0.9, 0.2):
        assert first(3.0, t) == pytest.approx(math.exp(t))
    assert first._diff[1] is None  # t is static now
    assert second._cache.last is dispatch.no_run
    for t in (1.0, 0.3, 0.3):
        assert second(2.0, t) == pytest.approx(math.exp(t))
