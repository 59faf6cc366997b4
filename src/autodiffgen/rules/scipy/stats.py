"""scipy.stats distributions composed of traced NumPy and scipy.special (Autograd's set):
norm, t, gamma, beta, chi2, poisson (loc, scale as keywords or positional, as SciPy),
dirichlet and multivariate_normal.

Outside a distribution's support the result is what SciPy gives (pdf 0, logpdf -inf); an
invalid parameter (scale <= 0) gives nan, as SciPy does.
"""

import math

import numpy as np
import scipy.special as sp
import scipy.stats

from ...errors import UnsupportedOperationError, at
from ...trace.boxes import Box, carries_gradient
from ...trace.context import current_trace, user_loc
from .intercept import register

_LOG_2PI = math.log(2 * math.pi)
_CUTOFF = 1e6 * np.finfo(np.float64).eps  # SciPy's for a singular covariance


def _where(cond, value, fill):
    """value where cond holds, else fill; nothing when cond is a plain True."""
    return value if cond is True or cond is np.True_ else np.where(cond, value, fill)


def _std(x, loc, scale):
    return (x - loc) / scale


def _log_scale(scale):
    valid = scale > 0
    return _where(valid, np.log(_where(valid, scale, 1)), np.nan)


# ---- norm ---------------------------------------------------------------------------------
def norm_logpdf(x, loc=0, scale=1):
    z = _std(x, loc, scale)
    return -0.5 * (z * z) - 0.5 * _LOG_2PI - _log_scale(scale)


def norm_pdf(x, loc=0, scale=1):
    return np.exp(norm_logpdf(x, loc, scale))


def _norm_of(fn, sign=1):
    def dist(x, loc=0, scale=1):
        z = _std(x, loc, scale)
        return _where(scale > 0, fn(sign * z), np.nan)
    return dist


def norm_ppf(q, loc=0, scale=1):
    return _where(scale > 0, loc + scale * sp.ndtri(q), np.nan)


def norm_isf(q, loc=0, scale=1):
    return _where(scale > 0, loc - scale * sp.ndtri(q), np.nan)


# ---- Student's t ----------------------------------------------------------------------------
def t_logpdf(x, df, loc=0, scale=1):
    z = _std(x, loc, scale)
    return (sp.gammaln((df + 1) / 2) - sp.gammaln(df / 2) - 0.5 * np.log(df * math.pi)
            - (df + 1) / 2 * np.log1p(z * z / df) - _log_scale(scale))


def t_pdf(x, df, loc=0, scale=1):
    return np.exp(t_logpdf(x, df, loc, scale))


def t_cdf(x, df, loc=0, scale=1):
    z = _std(x, loc, scale)
    return _where(scale > 0, sp.stdtr(df, z), np.nan)


def t_logcdf(x, df, loc=0, scale=1):
    return np.log(t_cdf(x, df, loc, scale))


# ---- gamma, chi2, beta ----------------------------------------------------------------------
def gamma_logpdf(x, a, loc=0, scale=1):
    z, log_scale = _std(x, loc, scale), _log_scale(scale)
    inside = z >= 0
    out = sp.xlogy(a - 1, _where(inside, z, 1)) - z - sp.gammaln(a) - log_scale
    return _where(inside, out, -np.inf)


def gamma_pdf(x, a, loc=0, scale=1):
    return np.exp(gamma_logpdf(x, a, loc, scale))


def gamma_cdf(x, a, loc=0, scale=1):
    z = _std(x, loc, scale)
    return _where(scale > 0, sp.gammainc(a, np.maximum(z, 0)), np.nan)


def chi2_logpdf(x, df, loc=0, scale=1):
    return gamma_logpdf(x, df / 2, loc, 2 * scale)


def chi2_pdf(x, df, loc=0, scale=1):
    return np.exp(chi2_logpdf(x, df, loc, scale))


def chi2_cdf(x, df, loc=0, scale=1):
    return gamma_cdf(x, df / 2, loc, 2 * scale)


def beta_logpdf(x, a, b, loc=0, scale=1):
    z, log_scale = _std(x, loc, scale), _log_scale(scale)
    inside = (z >= 0) & (z <= 1)
    zi = _where(inside, z, 0.5)
    out = sp.xlogy(a - 1, zi) + (b - 1) * np.log1p(-zi) - sp.betaln(a, b) - log_scale
    return _where(inside, out, -np.inf)


def beta_pdf(x, a, b, loc=0, scale=1):
    return np.exp(beta_logpdf(x, a, b, loc, scale))


def beta_cdf(x, a, b, loc=0, scale=1):
    z = _std(x, loc, scale)
    return _where(scale > 0, sp.betainc(a, b, np.clip(z, 0, 1)), np.nan)


# ---- poisson ----------------------------------------------------------------------------------
def _counts(k, loc, method):
    """k - loc, refused if a derivative is taken in it (a count: no derivative, as
    Autograd's poisson is differentiable in mu only)."""
    for v, name in ((k, "k"), (loc, "loc")):
        if type(v) is Box and carries_gradient(current_trace(), v.node):
            raise UnsupportedOperationError(at(user_loc(), f"scipy.stats.poisson.{method} is "
                                               f"differentiable in mu, not in {name}"))
    return k - loc


def poisson_logpmf(k, mu, loc=0):
    k = _counts(k, loc, "logpmf")
    inside = (k >= 0) & (k == np.floor(k))
    out = sp.xlogy(k, mu) - sp.gammaln(_where(inside, k, 0) + 1) - mu
    return _where(inside, out, -np.inf)


def poisson_pmf(k, mu, loc=0):
    return np.exp(poisson_logpmf(k, mu, loc))


def poisson_cdf(k, mu, loc=0):
    k = np.floor(_counts(k, loc, "cdf"))
    return _where(k >= 0, sp.gammaincc(np.maximum(k, 0) + 1, mu), 0.0)


# ---- dirichlet, multivariate_normal ----------------------------------------------------------
def dirichlet_logpdf(x, alpha):
    """x holds the K components along its first axis, as SciPy's (and is not re-checked to
    lie on the simplex, which SciPy's own call checks)."""
    log_b = np.sum(sp.gammaln(alpha)) - sp.gammaln(np.sum(alpha))
    return np.sum(np.transpose(sp.xlogy(alpha - 1, np.transpose(x))), axis=0) - log_b


def dirichlet_pdf(x, alpha):
    return np.exp(dirichlet_logpdf(x, alpha))


def mvn_logpdf(x, mean=None, cov=1, allow_singular=False):
    dev = x if mean is None else x - mean
    if allow_singular:
        return _singular_mvn_logpdf(dev, cov)
    inv = np.linalg.inv(cov)
    maha = np.sum((dev @ inv) * dev, axis=-1)
    d = np.shape(cov)[-1]
    return -0.5 * (d * _LOG_2PI + np.linalg.slogdet(cov)[1] + maha)


def _singular_mvn_logpdf(dev, cov):
    """As SciPy: through cov's eigenvalues above SciPy's cutoff (pseudo-inverse and
    pseudo-determinant), -inf off the support, nan for a cov that is not positive
    semidefinite (where SciPy raises). Differentiable in x and mean, as Autograd's."""
    if type(cov) is Box and carries_gradient(current_trace(), cov.node):
        raise UnsupportedOperationError(at(user_loc(), "scipy.stats.multivariate_normal with "
                                           "allow_singular=True is differentiable in x and "
                                           "mean, not in the covariance"))
    s, u = np.linalg.eigh(cov)
    eps = _CUTOFF * np.max(np.abs(s))
    keep = s > eps
    whiten = u * np.sqrt(np.where(keep, 1 / np.where(keep, s, 1), 0))
    log_pdet = np.sum(np.log(np.where(keep, s, 1)))
    maha = np.sum((dev @ whiten) ** 2, axis=-1)
    out = -0.5 * (np.sum(keep) * _LOG_2PI + log_pdet + maha)
    off = np.sum(((dev @ u) * (s <= eps)) ** 2, axis=-1) >= (1e3 * eps) ** 2  # the null space
    return np.where(np.min(s) < -eps, np.nan, np.where(off, -np.inf, out))


def mvn_pdf(x, mean=None, cov=1, allow_singular=False):
    return np.exp(mvn_logpdf(x, mean, cov, allow_singular))


def mvn_entropy(mean=None, cov=1):
    d = np.shape(cov)[-1]
    return 0.5 * (d * (1 + _LOG_2PI) + np.linalg.slogdet(cov)[1])


_TABLE = {
    "norm": {"pdf": norm_pdf, "logpdf": norm_logpdf, "cdf": _norm_of(sp.ndtr),
             "logcdf": _norm_of(sp.log_ndtr), "sf": _norm_of(sp.ndtr, -1),
             "logsf": _norm_of(sp.log_ndtr, -1), "ppf": norm_ppf, "isf": norm_isf},
    "t": {"pdf": t_pdf, "logpdf": t_logpdf, "cdf": t_cdf, "logcdf": t_logcdf},
    "gamma": {"pdf": gamma_pdf, "logpdf": gamma_logpdf, "cdf": gamma_cdf},
    "chi2": {"pdf": chi2_pdf, "logpdf": chi2_logpdf, "cdf": chi2_cdf},
    "beta": {"pdf": beta_pdf, "logpdf": beta_logpdf, "cdf": beta_cdf},
    "poisson": {"pmf": poisson_pmf, "logpmf": poisson_logpmf, "cdf": poisson_cdf},
    "dirichlet": {"pdf": dirichlet_pdf, "logpdf": dirichlet_logpdf},
    "multivariate_normal": {"pdf": mvn_pdf, "logpdf": mvn_logpdf, "entropy": mvn_entropy},
}
for _dist, _methods in _TABLE.items():
    for _name, _fn in _methods.items():
        register(getattr(scipy.stats, _dist), _name, _fn, f"scipy.stats.{_dist}.{_name}")
