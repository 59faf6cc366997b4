"""How each primitive is written when every value is a Python float: the `math` module
and Python operators, with no NumPy call and no array allocation.

Used for functions of Python floats only (see emit.Emitter.scalar), where they give
NumPy's values: on finite operands, a form either gives the finite value NumPy gives
(without a warning: NumPy sets no flag but underflow's, which it ignores by default), or
raises (math.log(0.0), math.acos(2.0): ValueError; 1.0 / 0.0: ZeroDivisionError;
math.exp(1e3): OverflowError), or is one of OVERFLOWS, which return an inf or a nan
silently (1e308 * 10.0) where NumPy warns. So the function runs its NumPy twin instead,
for NumPy's infinities, nans and warnings, when a form raises or when an input or a value
of OVERFLOWS is not finite (emit.Emitter.numpy_fallback): the other forms keep a finite
operand finite or raise.
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

# the forms above that give an inf or a nan of finite operands without raising; the other
# math-module functions raise instead (math.exp(1e3): OverflowError), and negation,
# abs and the identities keep a finite value finite
OVERFLOWS = frozenset({"add", "subtract", "multiply", "divide", "square", "reciprocal",
                       "hypot"})

# the forms whose value is not finite when an operand is not (inf - inf and inf * 0.0 are
# nan): a finite result checks its operands too, so the check reads fewer values
PROPAGATES = frozenset({"add", "subtract", "multiply", "square", "negative", "positive",
                        "absolute", "fabs"} | {name for name, form in SCALAR.items()
                                               if form == _SAME})

# what the forms raise where NumPy returns an inf or a nan with a warning
MATH_ERRORS = "(ValueError, ZeroDivisionError, OverflowError)"
