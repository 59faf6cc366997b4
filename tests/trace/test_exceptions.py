"""Exceptions used as control flow (issue 10): a NumPy call that raised while tracing is a
guarded branch (the code checks it still raises), and on a path traced without a raise,
a raise at run time is a GuardFailure, so the call traces the path it takes."""

import numpy as np
import pytest

from autodiffgen import hessian, tape, value_and_grad
from autodiffgen.testing import check_grads

RNG = np.random.default_rng(11)


def chol_or_fallback(A, b):
    try:
        L = np.linalg.cholesky(A)
        y = np.sum(L * L) * np.sum(b ** 2)
    except np.linalg.LinAlgError:
        y = np.sum(A * A) + np.sum(np.sin(b))
    return y


def solve_or_lstsq(A, b):
    try:
        x = np.linalg.solve(A, b)
    except np.linalg.LinAlgError:
        x = b * 0.5
    return np.sum(x ** 2)


def matrices(n=3):
    M = RNG.normal(size=(n, n))
    pd = M @ M.T + n * np.eye(n)
    return pd, -pd


def check(vg, fun, args):
    value, g = vg(*args)
    np.testing.assert_allclose(value, fun(*args), rtol=1e-6)
    _t_value, t_grad = tape.value_and_grad_now(fun, args, (0,), ["A", "b"])
    np.testing.assert_allclose(g, t_grad[0], rtol=1e-6, atol=1e-9)
    check_grads(fun, *args, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("first", ["fallback", "cholesky"])
def test_cholesky_fallback_in_both_orders(first):
    vg = value_and_grad(chol_or_fallback)
    b = RNG.normal(size=3)
    for i in range(6):
        pd, npd = matrices()
        A = (npd, pd)[(i + (first == "cholesky")) % 2]
        check(vg, chol_or_fallback, (A, b))
    assert vg.cache_info().misses == 2 and vg.cache_info().entries == 1


def test_the_generated_code_checks_the_call_still_raises():
    vg = value_and_grad(chol_or_fallback)
    pd, npd = matrices()
    b = np.ones(3)
    source = vg.source(npd, b)
    assert "except np.linalg.LinAlgError:" in source and "raised LinAlgError when traced" in source
    other = vg.source(pd, b)
    assert "except np.linalg.LinAlgError as error:" in other


def test_singular_solve_falls_back_and_comes_back():
    vg = value_and_grad(solve_or_lstsq)
    b = RNG.normal(size=3)
    singular = np.ones((3, 3))
    for A in (matrices()[0], singular, matrices()[0], singular):
        value, _ = vg(A, b)
        np.testing.assert_allclose(value, solve_or_lstsq(A, b), rtol=1e-6)
    assert vg.cache_info().misses == 2


def test_an_uncaught_raise_at_run_time_is_the_users_error():
    def f(A):
        return np.sum(np.linalg.cholesky(A))
    vg = value_and_grad(f)
    pd, npd = matrices()
    vg(pd)
    with pytest.raises(np.linalg.LinAlgError):
        vg(npd)
    np.testing.assert_allclose(vg(pd)[0], f(pd))
    assert vg.cache_info().misses == 1  # the failed trace compiled nothing


def test_hessian_of_a_fallback():
    def f(x):
        A = np.outer(x, x) + np.diag(x)
        try:
            L = np.linalg.cholesky(A)
            return np.sum(L)
        except np.linalg.LinAlgError:
            return np.sum(x ** 3)
    h = hessian(f)
    for x in (np.array([-1.0, 2.0]), np.array([1.0, 2.0]), np.array([-1.0, 3.0])):
        H = h(x)
        eps = 1e-5
        grad = value_and_grad(f)
        fd = np.stack([(grad(x + eps * e)[1] - grad(x - eps * e)[1]) / (2 * eps)
                       for e in np.eye(2)])
        np.testing.assert_allclose(H, fd, rtol=1e-4, atol=1e-5)
