"""How each primitive is written when every value is a Python float: the `math` module
and Python operators, with no NumPy call and no array allocation.

Used for functions of Python floats only (see emit.Emitter.scalar). Domain errors then
raise like Python does (math.log(-1.0) is a ValueError, 1.0 / 0.0 a ZeroDivisionError)
instead of returning nan or inf with a warning.
"""

_SAME = "{0}"  # reshapes, broadcasts and reductions of a scalar are the scalar itself

SCALAR = {
    # arithmetic
    "add": "{0} + {1}", "subtract": "{0} - {1}", "multiply": "{0} * {1}",
    "divide": "{0} / {1}", "negative": "-{0}", "positive": "+{0}",
    "power": "math.pow({0}, {1})", "square": "{0} * {0}", "reciprocal": "1.0 / {0}",
    "absolute": "abs({0})", "fabs": "abs({0})",
    # exponentials, logarithms, roots
    "exp": "math.exp({0})", "expm1": "math.expm1({0})", "exp2": "math.pow(2.0, {0})",
    "log": "math.log({0})", "log1p": "math.log1p({0})", "log2": "math.log2({0})",
    "log10": "math.log10({0})", "sqrt": "math.sqrt({0})",
    # trigonometric and hyperbolic
    "sin": "math.sin({0})", "cos": "math.cos({0})", "tan": "math.tan({0})",
    "arcsin": "math.asin({0})", "arccos": "math.acos({0})", "arctan": "math.atan({0})",
    "sinh": "math.sinh({0})", "cosh": "math.cosh({0})", "tanh": "math.tanh({0})",
    "arcsinh": "math.asinh({0})", "arccosh": "math.acosh({0})",
    "arctanh": "math.atanh({0})", "arctan2": "math.atan2({0}, {1})",
    "hypot": "math.hypot({0}, {1})",
    # (no comparisons and no `where`: NumPy computes both branches of np.where and adds
    # booleans as numbers; Python would raise in the discarded branch or add as ints)
    # structure that is the identity on a scalar
    "ones": "1.0", "copy": _SAME, "stop_gradient": _SAME, "reshape": _SAME,
    "broadcast_to": _SAME, "squeeze": _SAME, "expand_dims": _SAME, "sum": _SAME,
    "mean": _SAME, "max": _SAME, "min": _SAME, "transpose": _SAME,
    "recompute_from": "_recompute_from({0}, {1})",  # a checkpoint's (checkpointing.py)
}
