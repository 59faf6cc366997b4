"""scipy.special's Python functions, composed of traced NumPy: logsumexp, softmax,
log_softmax, multigammaln; and polygamma, the primitive of rules/special.py.

The max subtracted for stability goes through stop_gradient: the result does not depend
on it, so its derivative would only add terms that cancel.
"""

import math

import numpy as np
import scipy.special

from ...errors import UnsupportedOperationError, at
from ...trace.boxes import Box, result_dtype
from ...trace.context import user_loc
from ..control import stop_gradient
from ..special import polygamma
from .intercept import register


def _shift(a, axis):
    """The max along `axis` (kept), or 0 where it is not finite, as SciPy shifts."""
    m = stop_gradient(np.max(a, axis=axis, keepdims=True))
    return np.where(np.isfinite(m), m, 0)


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False):
    if b is not None and (type(b) is Box or not np.all(np.asarray(b) != 0)):
        # shifted by the largest term that counts (b != 0), as SciPy; a term with b == 0
        # adds nothing but has a derivative in b, which caps only where it would overflow
        m = _shift(np.where(b != 0, a, -np.inf), axis)
        cap = math.log(np.finfo(np.result_type(result_dtype(a), np.float16)).max) - 1.0
        e = b * np.exp(np.minimum(a - m, cap))
    else:
        m = _shift(a, axis)
        e = np.exp(a - m) if b is None else b * np.exp(a - m)
    s = np.sum(e, axis=axis, keepdims=keepdims)
    if return_sign:
        sign = np.sign(s)
        s = np.abs(s)
    out = np.log(s) + np.reshape(m, np.shape(s))
    return (out, sign) if return_sign else out


def softmax(x, axis=None):
    e = np.exp(x - _shift(x, axis))
    return e / np.sum(e, axis=axis, keepdims=True)


def log_softmax(x, axis=None):
    shifted = x - _shift(x, axis)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def multigammaln(a, d):
    """log of the multivariate gamma function: a sum of d gammaln terms."""
    d = int(d)
    terms = scipy.special.gammaln(np.expand_dims(a, -1) - np.arange(d) / 2.0)
    return np.sum(terms, axis=-1) + d * (d - 1) / 4.0 * math.log(math.pi)


def polygamma_call(n, x):
    if np.ndim(n) != 0 or int(n) != n:
        raise UnsupportedOperationError(at(user_loc(), "scipy.special.polygamma(n, x) on "
                                           "traced values takes one integer order n"))
    return polygamma(int(n), x)


for _name, _fn in (("logsumexp", logsumexp), ("softmax", softmax),
                   ("log_softmax", log_softmax), ("multigammaln", multigammaln),
                   ("polygamma", polygamma_call)):
    register(scipy.special, _name, _fn, f"scipy.special.{_name}",
             "polygamma" if _name == "polygamma" else "composed")
