"""A custom primitive in an importable module, for the standalone-module test."""

import numpy as np

import autodiffgen as ad


@ad.primitive
def softplus(x):
    return np.logaddexp(0.0, x)


ad.defvjp(softplus, lambda g, ans, x: g / (1.0 + np.exp(-x)))
ad.defjvp(softplus, lambda t, ans, x: t / (1.0 + np.exp(-x)))
