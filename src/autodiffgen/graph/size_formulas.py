"""Numbers that are formulas in the batch size n: what a shape-polymorphic graph holds
where a specialized one holds the sizes it was traced at.

generalize_batch.py traces one call at several batch sizes and, for every number that
differs between the traces, looks for one formula that gives it at each size. The formulas are few on
purpose, since a formula that fits by accident would be a wrong gradient at other sizes:

- `Dim`: an integer a*n + b (a size, a slice bound, an element count: n, 2*n, n - 1);
- `Scale`: a float k/n or k*n (the 1/n of a mean's derivative, a sum times n); for a
  mask's count only, also k * (m*n + b) ** p, p in 1, 2, 1/2, -1/2, -2 (len(x[m]) + 1.0);
- `SymArray`: a constant array np.arange(size), or np.full(shape, fill) whose shape or fill
  is one of the above (np.arange(len(y)), a mean's cotangent `full((n,), -1/n)`).

Anything else that differs does not fit (`NoFit`), and the caller keeps specialized code.
Each symbol knows its value at a given n (`at`), which is how fits are checked.
"""

import math

import numpy as np

from . import Index

_ULPS = 2  # a float fits if the formula's value is this close to the traced one


class NoFit(Exception):
    """The traced values differ in a way no formula in n explains."""


class _Symbol:
    """Equal when of the same kind and the same formula: a graph's formulas can be compared
    and used as keys like the numbers they stand for."""

    __slots__ = ()

    def __eq__(self, other):
        return type(other) is type(self) and other._key() == self._key()

    def __hash__(self):
        return hash((type(self), self._key()))


class Dim(_Symbol):
    """The integer a*n + b, a != 0; `cast` is the NumPy integer type it had, if any."""

    __slots__ = ("a", "b", "cast", "var")

    def __init__(self, a, b, cast=None, var="n"):
        self.a, self.b, self.cast, self.var = a, b, cast, var

    def at(self, n):
        value = self.a * n + self.b
        return value if self.cast is None else self.cast(value)

    def _key(self):
        return (self.a, self.b, self.cast, self.var)

    def __repr__(self):
        return f"Dim({self.a}*{self.var}{self.b:+d})"


class Scale(_Symbol):
    """The float k/(m*n + b) (power -1) or k*n (power 1); `cast` is its NumPy float type,
    if any. m and b keep a mean's 1/(6*n), or the 1/(n - 1) of a sample variance, the
    number the traced code computed, rather than 0.1666.../n."""

    __slots__ = ("b", "cast", "k", "m", "power", "var")

    def __init__(self, k, power, cast=None, var="n", m=1, b=0):
        self.k, self.power, self.cast, self.var, self.m, self.b = k, power, cast, var, m, b

    def at(self, n):
        if self.power == -1:
            value = self.k / (self.m * n + self.b)
        elif self.power == 1 and (self.m, self.b) == (1, 0):
            value = self.k * n
        else:  # a count's power (_count_powers): k * (m*n + b) ** power
            value = _powered(self.k, self.m * n + self.b, self.power)
        return value if self.cast is None else self.cast(value)

    @property
    def count(self):
        """The divisor m*n + b of a power -1 scale."""
        return Dim(self.m, self.b, var=self.var)

    def _key(self):
        return (self.k, self.m, self.b, self.power, self.cast, self.var)

    def __repr__(self):
        if self.power not in (1, -1) or self.power == 1 and (self.m, self.b) != (1, 0):
            return f"Scale({self.k}*({self.count!r})**{self.power})"
        if self.power == 1:
            return f"Scale({self.k}*{self.var})"
        return f"Scale({self.k}/({self.count!r}))"


class SymArray(_Symbol):
    """A constant array that depends on n: np.arange(shape[0]) ("arange") or
    np.full(shape, fill) ("full"), of `dtype`. Generated code computes it in the function."""

    __slots__ = ("dtype", "fill", "kind", "shape")

    def __init__(self, kind, shape, dtype, fill=None):
        self.kind, self.shape, self.dtype, self.fill = kind, shape, dtype, fill

    def at(self, n):
        shape = evaluate(self.shape, n)
        if self.kind == "arange":
            return np.arange(shape[0], dtype=self.dtype)
        return np.full(shape, evaluate(self.fill, n), dtype=self.dtype)

    def _key(self):
        return (self.kind, self.shape, self.dtype.str, repr(self.fill))

    def __repr__(self):
        return f"SymArray({self.kind}, {self.shape}, {self.dtype}, {self.fill!r})"


SYMBOLS = (Dim, Scale, SymArray)
AT_N = set()  # other types that hold formulas and say their value at n (a loop: rules/loops.py)
COUNT = "count"  # what generalize_counts.py names a mask's count (`_count` if taken)


def is_count_var(var):
    """A formula's variable is a mask's count (generalize_counts.py), which may be 0, not
    a batch size."""
    return var.lstrip("_").startswith(COUNT)


def evaluate(value, n):
    """`value` with every symbol in it replaced by its value at n."""
    kind = type(value)
    if kind in SYMBOLS or kind in AT_N:
        return value.at(n)
    if kind is tuple or kind is list:
        return kind(evaluate(v, n) for v in value)
    if kind is dict:
        return {k: evaluate(v, n) for k, v in value.items()}
    if kind is slice:
        return slice(evaluate(value.start, n), evaluate(value.stop, n), evaluate(value.step, n))
    if kind is Index:
        return Index(evaluate(value.items, n))
    return value


def is_symbolic(value):
    kind = type(value)
    if kind in SYMBOLS:
        return True
    if kind is tuple or kind is list:
        return any(is_symbolic(v) for v in value)
    return False


# ---- fitting ----------------------------------------------------------------------------
def same(values):
    """All values are the same constant (arrays by content, floats to the bit)."""
    return all(_same(values[0], v) for v in values[1:])


def _same(a, b):
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape \
            and np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()
    if isinstance(a, np.generic):
        return a.dtype == b.dtype and a.tobytes() == b.tobytes()
    if type(a) is float:
        return a.hex() == b.hex()
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


def fit(values, ns, var="n"):
    """One value that is values[i] at n = ns[i]: the common value if they agree, else a
    formula; raises NoFit. `values` are leaves (no containers), `ns` distinct sizes."""
    if same(values):
        return values[0]
    first = values[0]
    if any(type(v) is not type(first) for v in values) or isinstance(first, (bool, np.bool_)):
        raise NoFit
    if isinstance(first, np.ndarray):
        return _fit_array(values, ns, var)
    if isinstance(first, SymArray):
        return _fit_sym_array(values, ns, var)
    if isinstance(first, (int, np.integer)):
        return _fit_int(values, ns, var)
    if isinstance(first, (float, np.floating)):
        return _fit_float(values, ns, var)
    raise NoFit


def _powered(k, base, power):
    """k * base ** power as the user's Python computes it (math.sqrt for the halves: as
    np.sqrt, correctly rounded); a negative power of 0 is inf, as NumPy divides."""
    root = math.sqrt(base) if power in (0.5, -0.5) else base ** abs(round(power))
    if power > 0:
        return k * root
    return k / root if root else math.copysign(math.inf, k)


# A mask's count used in Python arithmetic (len(x[m]) + 1.0, len(p) ** 2, np.sqrt(len(p))):
# k * (m*n + b) ** power with whole m and b. Fitted for counts only, which are traced at
# many counts (generalize_counts.py), never for a batch size, fitted from three traces.
_COUNT_POWERS = (1, 2, 0.5, -0.5, -2)


def _count_powers(values, ns, var, ints=False):
    """(k, power, m, b) with k = +-1 (1 for ints) for which values fit a count's power."""
    if not is_count_var(var) or not all(np.isfinite(values)):
        return
    sign = 1.0 if ints or float(values[0]) >= 0 else -1.0
    for power in (2,) if ints else _COUNT_POWERS:
        signed = [sign * float(v) for v in values]
        if any(v < 0 or v == 0 and power < 0 for v in signed):
            continue
        bases = [_tidy(v ** (1 / power)) for v in signed]
        if not all(b == round(b) for b in bases):
            continue
        try:
            dim = _fit_linear([round(b) for b in bases], ns, var)
        except NoFit:
            continue
        yield (1 if ints else sign), power, dim.a, dim.b


def _cast(value):
    return type(value) if isinstance(value, np.generic) else None


def _fit_int(values, ns, var):
    try:
        return _fit_linear(values, ns, var)
    except NoFit:
        ints = [int(v) for v in values]
        for k, power, m, b in _count_powers(ints, ns, var, ints=True):
            square = Scale(k, power, _cast(values[0]), var, m, b)
            if all(square.at(n) == v for n, v in zip(ns, ints)):
                return square
        raise


def _fit_linear(values, ns, var):
    ints = [int(v) for v in values]
    a, rest = divmod(ints[0] - ints[1], ns[0] - ns[1])
    dim = Dim(a, ints[0] - a * ns[0], _cast(values[0]), var)
    if rest or a == 0 or any(dim.a * n + dim.b != v for n, v in zip(ns, ints)):
        raise NoFit
    return dim


def _fit_float(values, ns, var):
    if not np.all(np.isfinite(values)):  # _close matches no nan or inf: no formula fits
        raise NoFit
    cast = _cast(values[0])
    for k, power, m, b in _candidates([float(v) for v in values], ns, var):
        scale = Scale(k, power, cast, var, m, b)
        if k != 0 and all(_close(scale.at(n), v) for n, v in zip(ns, values)):
            return scale
    raise NoFit


_NUMERATORS = (1.0, 2.0, 0.5, 4.0, 0.25, 8.0, 0.125)


def _candidates(floats, ns, var):
    """(k, power, m, b) to try, in this order: k/(m*n + b) with whole m and b and k = +-1
    (a mean over m*n elements, 1/(n - 1)) or +-2, +-4, +-1/2... (passes/exact_scales.py
    multiplies a power of two into such a factor, exactly: 2/(n - 1), and code traced
    again reads it so), k/n with k whole, any k/n, then k*n."""
    if all(floats) and all(np.isfinite(floats)):
        sign = float(np.sign(floats[0]))
        for k in _NUMERATORS:
            counts = [_tidy(sign * k / v) for v in floats]
            if not all(c == round(c) for c in counts):
                continue
            try:
                count = _fit_linear([round(c) for c in counts], ns, var)
            except NoFit:
                continue
            yield sign * k, -1, count.a, count.b
    yield _tidy(floats[0] * ns[0]), -1, 1, 0
    yield _tidy(floats[0] / ns[0]), 1, 1, 0
    yield from _count_powers(floats, ns, var)


def _tidy(k):
    """k as written in the source when it is a whole number (-1.0, not -0.9999999999999999)."""
    whole = float(round(k)) if np.isfinite(k) else k
    return whole if abs(k - whole) <= 1e-9 * max(1.0, abs(k)) else k


def _close(value, traced):
    if type(value) is not type(traced) or not np.isfinite(traced):
        return False
    ulp = np.spacing(np.abs(np.asarray(traced)))
    return bool(abs(float(value) - float(traced)) <= _ULPS * ulp)


def _fit_array(values, ns, var):
    first = values[0]
    if any(v.dtype != first.dtype or v.ndim != first.ndim for v in values):
        raise NoFit
    if first.ndim == 0:  # a 0-d constant is written as a NumPy scalar: fit it as one
        return fit([v[()] for v in values], ns, var)
    shape = tuple(fit([v.shape[d] for v in values], ns, var) for d in range(first.ndim))
    flats = [v.ravel() for v in values]
    if all(f.size and (f == f[0]).all() for f in flats):
        fill = fit([f[0] for f in flats], ns, var)
        if type(fill) in (Dim, Scale):
            fill.cast = None  # np.full(..., dtype=) casts it
        else:
            fill = fill.item()
        return SymArray("full", shape, first.dtype, fill)
    if first.ndim == 1 and np.issubdtype(first.dtype, np.integer) and type(shape[0]) is Dim \
            and all((f == np.arange(f.size)).all() for f in flats):
        return SymArray("arange", shape, first.dtype)
    raise NoFit


def _fit_sym_array(values, ns, var):
    """SymArrays already formulas in another variable (a mask's count) that differ in n:
    one whose shape and fill are formulas in both (np.full((count,), 1/n) of a sum over
    the selected rows divided by len(x), in code made at several batch sizes)."""
    first = values[0]
    if any(v.kind != first.kind or v.dtype != first.dtype or len(v.shape) != len(first.shape)
           for v in values):
        raise NoFit
    shape = tuple(fit([v.shape[d] for v in values], ns, var) for d in range(len(first.shape)))
    fill = first.fill if first.kind == "arange" else fit([v.fill for v in values], ns, var)
    if type(fill) in (Dim, Scale):
        fill.cast = None  # np.full(..., dtype=) casts it
    return SymArray(first.kind, shape, first.dtype, fill)


class Batch:
    """The batch axis of a polymorphic graph: the traced size `n`, the argument paths of
    the batch leaves (the first is where the code reads n from), the name `var` the
    code gives n, and the sizes lo <= n <= hi the code was checked for."""

    __slots__ = ("hi", "lo", "n", "paths", "var")

    def __init__(self, n, paths, lo=None, hi=None, var="n"):
        self.n, self.paths, self.lo, self.hi, self.var = n, tuple(paths), lo, hi, var

    def serves(self, n):
        return self.lo is not None and self.lo <= n <= self.hi

    def text(self):
        """The sizes served, as the generated function's docstring says them."""
        if self.hi is None:
            return f"Serves every batch size {self.var} >= {self.lo}."
        return f"Serves every batch size {self.lo} <= {self.var} <= {self.hi}."

    def __repr__(self):
        return f"Batch(n={self.n}, paths={self.paths}, {self.lo}..{self.hi})"
