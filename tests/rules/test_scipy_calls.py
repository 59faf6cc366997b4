"""How SciPy's Python functions reach their traced versions (rules/scipy/__init__.py), and
what the generated code does with them: every way of naming the function, SciPy's own
functions put back after the trace, cached code on new data, and the errors."""

import threading

import numpy as np
import pytest
import tables

import autodiffgen
import autodiffgen.testing
from autodiffgen import tape
from autodiffgen.errors import TracingError, UnsupportedOperationError

pytest.importorskip("scipy")
import scipy.integrate
import scipy.linalg
import scipy.signal
import scipy.special
import scipy.stats
from scipy.special import logsumexp
from scipy.stats import norm

ORIGINAL_LOGSUMEXP = scipy.special.logsumexp
NORM_LOGPDF = scipy.stats.norm.logpdf  # a bound method kept in a global
X = np.random.default_rng(0).normal(size=(3, 4))


def expected_logsumexp_grad(x):
    return np.exp(x - ORIGINAL_LOGSUMEXP(x, axis=1, keepdims=True))


CALLS = {
    "module-attribute": lambda x: np.sum(scipy.special.logsumexp(x, axis=1)),
    "from-import": lambda x: np.sum(logsumexp(x, axis=1)),
    "import-in-body": lambda x: np.sum(__import__("scipy.special").special.logsumexp(x, 1)),
}


@pytest.mark.parametrize("how", CALLS)
def test_every_way_of_naming_the_function_is_traced(how):
    f = CALLS[how]
    for engine in (autodiffgen.grad, tape.grad):
        np.testing.assert_allclose(engine(f)(X), expected_logsumexp_grad(X), rtol=1e-12)


def test_distribution_methods_however_named():
    def pdf(x):
        return np.sum(norm.pdf(x, 0.5, 2.0))

    def kept(x):
        return np.sum(NORM_LOGPDF(x, 0.5, 2.0))

    expected = -(X - 0.5) / 4.0
    np.testing.assert_allclose(autodiffgen.grad(kept)(X), expected, rtol=1e-12)
    np.testing.assert_allclose(autodiffgen.grad(pdf)(X),
                               expected * scipy.stats.norm.pdf(X, 0.5, 2.0), rtol=1e-12)


def test_scipy_functions_are_put_back_after_the_trace():
    autodiffgen.grad(lambda x: np.sum(scipy.stats.norm.logpdf(scipy.special.softmax(x))))(X)
    assert scipy.special.logsumexp is ORIGINAL_LOGSUMEXP
    assert "logpdf" not in vars(scipy.stats.norm)
    assert scipy.stats.norm.logpdf(0.0) == pytest.approx(-0.5 * np.log(2 * np.pi))


def test_another_thread_gets_scipys_own_function_while_one_traces():
    seen = []
    started, release = threading.Event(), threading.Event()

    def other():
        started.wait()
        seen.append(scipy.special.logsumexp(np.array([0.0, 0.0])))
        release.set()

    def f(x):
        started.set()
        release.wait(5)
        return logsumexp(x)

    thread = threading.Thread(target=other)
    thread.start()
    autodiffgen.grad(f)(np.array([1.0, 2.0]))
    thread.join()
    assert seen == [pytest.approx(np.log(2.0))]


def test_cached_code_serves_new_data_and_non_finite_values():
    f = autodiffgen.value_and_grad(lambda x: np.sum(logsumexp(x, axis=1)))
    rng = np.random.default_rng(1)
    for _ in range(3):
        x = rng.normal(size=(3, 4)) * 10
        value, g = f(x)
        np.testing.assert_allclose(value, np.sum(ORIGINAL_LOGSUMEXP(x, axis=1)), rtol=1e-12)
        np.testing.assert_allclose(g, expected_logsumexp_grad(x), rtol=1e-12)
    x = np.array([[-np.inf, 0.0, 1.0, 2.0], [-np.inf] * 4, [1000.0, 1000.0, 0.0, 0.0]])
    with np.errstate(all="ignore"):
        value, g = f(x)
    assert value == -np.inf  # as SciPy: the row of -inf gives -inf
    np.testing.assert_allclose(g[2], [0.5, 0.5, 0, 0], atol=1e-12)
    assert f.cache_info().misses == 1


def test_logsumexp_drops_the_terms_whose_weight_is_zero():
    a = np.array([[1000.0, 0.0, 1.0], [3.0, 2.0, 1.0]])
    b = np.array([[0.0, 1.0, 2.0], [1.0, 0.0, 1.0]])
    f = autodiffgen.value_and_grad(lambda a, b: np.sum(logsumexp(a, axis=1, b=b)),
                                   argnums=(0, 1))
    for engine in (f, tape.value_and_grad(f.fun, argnums=(0, 1))):
        value, (ga, gb) = engine(a, b)
        lse = ORIGINAL_LOGSUMEXP(a, axis=1, b=b, keepdims=True)
        assert value == pytest.approx(np.sum(lse))
        with np.errstate(over="ignore", invalid="ignore"):
            np.testing.assert_allclose(ga, np.where(b != 0, b * np.exp(a - lse), 0), atol=1e-12)
            expected_gb = np.exp(a - lse)  # also where b == 0: d/db_i = exp(a_i - lse)
        np.testing.assert_allclose(gb[1], expected_gb[1], rtol=1e-12)
        np.testing.assert_allclose(gb[0, 1:], expected_gb[0, 1:], rtol=1e-12)
        assert gb[0, 0] > 1e300  # e^999: capped below overflow


def test_ode_code_takes_new_initial_values_and_arguments():
    def dynamics(y, t, k):
        return -k * y + np.sin(t)

    def final(y0, k):
        return np.sum(scipy.integrate.odeint(dynamics, y0, np.linspace(0.0, 1.0, 5), (k,))[-1])

    f = autodiffgen.grad(final, argnums=(0, 1))
    rng = np.random.default_rng(2)
    for _ in range(2):
        y0, k = rng.normal(size=2), rng.uniform(0.5, 2.0, 2)
        g_y0, g_k = f(y0, k)
        np.testing.assert_allclose(g_y0, np.exp(-k), rtol=1e-5)  # d y(1) / d y0
        eps = 1e-6
        fd = [(final(y0, k + eps * e) - final(y0, k - eps * e)) / (2 * eps) for e in np.eye(2)]
        np.testing.assert_allclose(g_k, fd, rtol=1e-4)
    assert f.cache_info().misses == 1
    assert "_odeint(dynamics, y0" in f.source(y0, k)


def test_emitted_code_imports_scipy_and_passes_ruff(tmp_path):
    functions = [
        lambda a, b: np.sum(scipy.signal.convolve(a, b, "same")),
        lambda a, b: np.sum(scipy.linalg.solve_triangular(a, b, lower=True)),
        lambda a, b: np.sum(scipy.linalg.sqrtm(a @ a.T + np.eye(3))[:, :2] * b),
        lambda a, b: np.sum(scipy.special.jv(2.0, a)) + np.sum(scipy.stats.norm.logcdf(b)),
    ]
    a = np.eye(3) * 2 + 0.1
    for i, f in enumerate(functions):
        for standalone in (False, True):
            source = autodiffgen.emit(f, a, a[:, :2], argnums=(0, 1), standalone=standalone)
            assert "import scipy." in source
            (tmp_path / f"case_{i}_{int(standalone)}.py").write_text(source)
    assert tables.run_ruff(tmp_path) == []


# ---- errors ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("f,names", [
    (lambda a: np.sum(scipy.special.betainc(a, 2.0, 0.5)), ["scipy.special.betainc", "a"]),
    (lambda v: np.sum(scipy.special.jv(v, 1.5)), ["scipy.special.jv", "v"]),
    (lambda a: np.sum(scipy.special.gammainc(a, 1.5)), ["scipy.special.gammainc", "a"]),
    (lambda df: np.sum(scipy.stats.t.cdf(0.3, df)), ["scipy.special.stdtr", "df"]),
    (lambda k: np.sum(scipy.stats.poisson.logpmf(k, 2.0)), ["scipy.stats.poisson.logpmf", "k"]),
])
def test_a_derivative_in_an_argument_without_one_raises(f, names):
    for engine in (autodiffgen.grad, tape.grad):
        with pytest.raises(UnsupportedOperationError) as error:
            engine(f)(np.array([1.5, 2.5]))
        assert all(n in str(error.value) for n in names), str(error.value)
        assert "test_scipy_calls.py" in str(error.value)
    # forward mode too
    with pytest.raises(UnsupportedOperationError, match=names[0]):
        autodiffgen.jvp(f, (np.array([1.5, 2.5]),), (np.ones(2),))


def test_unsupported_scipy_functions_are_named_as_scipy_ones():
    with pytest.raises(UnsupportedOperationError, match=r"scipy\.special\.hyp2f1 has no"):
        autodiffgen.grad(lambda x: np.sum(scipy.special.hyp2f1(x, 1.0, 1.0, 0.5)))(X)
    with pytest.raises(TracingError, match=r"test_scipy_calls.py:\d+: scipy\.linalg\.expm"):
        autodiffgen.grad(lambda x: np.sum(scipy.linalg.expm(x[:, :3])))(X)
    with pytest.raises(TracingError, match=r"scipy\.stats\.laplace\.pdf converts"):
        autodiffgen.grad(lambda x: np.sum(scipy.stats.laplace.pdf(x)))(X)


def test_a_standalone_trace_says_how_to_call_a_name_bound_before_it():
    with pytest.raises(TracingError, match=r"call it as scipy\.special\.logsumexp\(\.\.\.\)"):
        autodiffgen.emit(CALLS["from-import"], X, standalone=True)


def test_odeint_refuses_dynamics_made_inside_the_traced_function():
    def closure(k):
        return np.sum(scipy.integrate.odeint(lambda y, t: -k * y, np.ones(2), [0.0, 1.0]))

    def made_inside(y0):
        return np.sum(scipy.integrate.odeint(lambda y, t: -y, y0, [0.0, 1.0]))

    for f in (closure, made_inside):
        with pytest.raises(UnsupportedOperationError, match="args="):
            autodiffgen.grad(f)(np.array([1.0, 2.0]))


def test_odeint_of_constants_inside_a_traced_function_is_scipys():
    def f(x):
        return np.sum(x * scipy.integrate.odeint(lambda y, t: -y, np.ones(2), [0.0, 1.0])[-1])

    np.testing.assert_allclose(autodiffgen.grad(f)(np.ones(2)), np.exp(-1.0), rtol=1e-6)


def test_odeint_refuses_options_it_cannot_trace():
    def f(y0):
        return np.sum(scipy.integrate.odeint(np.sin, y0, [0.0, 1.0], full_output=True)[0])

    with pytest.raises(UnsupportedOperationError, match="full_output"):
        autodiffgen.grad(f)(np.ones(2))


def _sqrtm_loss(a):
    r = scipy.linalg.sqrtm(a)
    return np.sum(np.real(r) * np.arange(1.0, 5.0).reshape(2, 2) + np.imag(r) ** 2)


def test_sqrtm_without_a_real_root_is_complex_and_its_kind_guarded():
    """A negative eigenvalue: SciPy's root is complex, differentiated as a holomorphic
    matrix function (a real matrix's gradient is real); whether SciPy returns complex
    values is read from the data, so the code checks it and the other kind traces again."""
    real_root, complex_root = np.array([[2.0, 0.3], [0.5, 3.0]]), np.array([[1.0, 0.3],
                                                                             [0.2, -4.0]])
    autodiffgen.testing.check_grads(_sqrtm_loss, complex_root)
    tables.check_hessian(_sqrtm_loss, complex_root)
    f = autodiffgen.grad(_sqrtm_loss)
    for a in (real_root, complex_root, real_root + 0.1, complex_root * 1.1):
        g = f(a)
        assert g.dtype == np.float64
        np.testing.assert_allclose(g, tape.grad(_sqrtm_loss)(a), rtol=1e-10)
    assert f.cache_info().misses == 2
    assert "np.iscomplexobj(" in f.source(real_root)
    z = real_root + 0.3j * np.array([[1.0, -0.5], [0.2, 0.7]])  # a complex matrix: holomorphic
    autodiffgen.testing.check_grads(_sqrtm_loss, z)


def test_singular_multivariate_normal_in_x_and_mean():
    cov = np.diag([1.0, 1.0, 0.0])

    def f(x, mean):
        x = np.concatenate([x[:2], mean[2:]])  # on the support
        return scipy.stats.multivariate_normal.logpdf(x, mean, cov, allow_singular=True)

    args = (np.array([0.3, -0.2, 0.0]), np.array([0.1, 0.4, 0.5]))
    autodiffgen.testing.check_grads(f, *args, argnums=(0, 1))
    value = autodiffgen.value_and_grad(f)(*args)[0]
    assert value == pytest.approx(f(*args))
    off = autodiffgen.value_and_grad(lambda x: scipy.stats.multivariate_normal.logpdf(
        x, np.zeros(3), cov, allow_singular=True))(np.array([0.1, 0.2, 0.3]))[0]
    assert off == -np.inf  # off the support, as SciPy

    def cov_argument(x, c):
        return scipy.stats.multivariate_normal.logpdf(x, np.zeros(3), c, allow_singular=True)

    x = np.array([0.3, -0.2, 0.0])
    generated = autodiffgen.value_and_grad(cov_argument)
    for c in (cov, np.eye(3), np.diag([2.0, 0.0, 0.0])):  # new covariances, one trace
        value, g = generated(x, c)
        np.testing.assert_allclose(g, tape.grad(cov_argument)(x, c), rtol=1e-12)
        assert value == pytest.approx(cov_argument(x, c))
    assert generated.cache_info().misses == 1
    with pytest.raises(UnsupportedOperationError, match="not in the covariance"):
        autodiffgen.grad(cov_argument, argnums=1)(x, cov)


def test_invalid_scale_gives_nan_as_scipy():
    f = autodiffgen.value_and_grad(lambda x, s: np.sum(scipy.stats.norm.logpdf(x, 0.0, s)))
    value, _ = f(np.ones(2), np.array([1.0, -1.0]))
    assert np.isnan(value) and np.isnan(np.sum(scipy.stats.norm.logpdf(np.ones(2), 0.0,
                                                                        [1.0, -1.0])))
