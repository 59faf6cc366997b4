"""scipy.special ufuncs (expit, logit, erf, gammaln, digamma, xlogy), when SciPy is there.

SciPy stays optional: without it this module registers nothing.
"""
