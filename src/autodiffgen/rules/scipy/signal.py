"""scipy.signal.convolve as a primitive (n-d, both arguments of one rank, modes full, valid
and same). Every mode is a centered slice of the full convolution, so the cotangent is
padded back to the full shape and correlated with the other argument: a 'valid'
convolution with it flipped, which is the same primitive again (second derivatives)."""

import numpy as np
import scipy.signal

from ...trace.recording import bind
from ..registry import defprimitive
from .intercept import register


def _full_cotangent(g, n1, n2):
    """g placed where its mode's output sits in the full convolution (zeros elsewhere)."""
    full = [a + b - 1 for a, b in zip(n1, n2)]
    starts = [(f - o) // 2 for f, o in zip(full, np.shape(g))]
    widths = [(s, f - o - s) for s, f, o in zip(starts, full, np.shape(g))]
    return np.pad(g, widths) if any(w != (0, 0) for w in widths) else g


def _flip(x):
    return x[(slice(None, None, -1),) * np.ndim(x)]


def _vjp(argnum):
    def rule(g, ans, in1, in2, mode, method):
        g_full = _full_cotangent(g, np.shape(in1), np.shape(in2))
        other = in2 if argnum == 0 else in1
        return convolve(g_full, _flip(other), "valid", method)
    return rule


CONVOLVE = defprimitive(
    "convolve", lambda in1, in2, mode, method: scipy.signal.convolve(in1, in2, mode, method),
    "scipy.signal.convolve({0}, {1})", defaults={"mode": "full", "method": "auto"},
    vjps=[_vjp(0), _vjp(1)], jvp_from="multilinear", imports=("scipy.signal",))


def convolve(in1, in2, mode="full", method="auto"):
    return bind(CONVOLVE, (in1, in2), {"mode": mode, "method": method})


register(scipy.signal, "convolve", convolve, "scipy.signal.convolve", "convolve")
