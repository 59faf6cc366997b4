"""SciPy's Python functions on traced values: logsumexp, softmax, the scipy.stats
distributions, signal.convolve, linalg.solve_triangular and sqrtm, integrate.odeint.

They convert their arguments with np.asarray, which a trace cannot follow, and NumPy does
not dispatch them to the tracer as it does ufuncs. So each has a traceable version here:
composed of traced NumPy and scipy.special calls where that reads as the math (stats,
logsumexp, softmax), or one primitive with its rules where SciPy's algorithm is the point
(convolve, solve_triangular, sqrtm), generated code calling SciPy's function.

How a call reaches it, as np.random's module functions do (numpy_api/random.py): while a
trace runs in any thread, `owner.name` (a module's function, or a method of an object such
as scipy.stats.norm) is replaced by a wrapper that calls the traceable version when the
calling thread is tracing and an argument holds a traced value, and SciPy's own function
otherwise; the last trace to end puts the originals back. A name bound before the trace
(`from scipy.special import logsumexp`) still holds the original: the capture hands the
traced code the wrapper instead (capture.STAND_INS). The function itself is a
library's, so a trace reads nothing through it: no input, no guard.
"""

import os

from .intercept import SCIPY_FUNCTIONS, install, register  # noqa: F401  (re-exported)

try:
    import scipy
except ImportError:  # SciPy is optional: nothing to intercept
    pass
else:
    from . import integrate, linalg, signal, special, stats  # noqa: F401  (each registers its own)

    install(os.path.dirname(scipy.__file__))
