"""Arrays built from traced values: np.array / np.asarray of a traced value or of a
(nested) list of them, np.r_[...] and np.c_[...], np.full / np.full_like with a traced
fill, and NumPy functions given a Python list of traced values (np.mean([a, b])).

NumPy converts a list's items with __array__ before it dispatches anything, and
np.array, np.asarray and np.full are no __array_function__ of their argument, so a Box
there never reaches a handler. As np.random's module functions are (random.py), these
callables are replaced, while a recording is current in some thread (the user's function
and the derivative rules), by wrappers that, in *that* thread, turn a nested list holding Boxes into one traced array (np.stack level by level,
constants included, so NumPy promotes the dtype as np.array does) and call NumPy again
with it, which now dispatches; any other call goes to NumPy's own function. The last
trace to end puts the originals back.
"""

import functools
import sys
import types

import numpy as np

from ...errors import UnsupportedOperationError, at
from ...trace.boxes import STAND_INS, Box, _holds_box, concrete, stand_in
from ...trace.capture import add_stand_in
from ...trace.context import current_trace, user_loc
from ...trace.recording import ENTER_HOOKS, bind
from ...trace.swaps import Swaps
from ..elementwise import copy as copy_prim
from ..registry import astype
from .shapes import PASSING
from .views import mark_fresh


def gather(obj):
    """A list or tuple (nested) holding Boxes as one traced array; anything else as is."""
    if type(obj) in (list, tuple) and _holds_box(obj):
        return np.stack([gather(item) for item in obj])
    return obj


def cast(box, dtype):
    """box.astype(dtype); a traced Python number is made a 0-d array first (the generated
    code gets a float or an int there, which has no .astype)."""
    if not isinstance(box.value, (np.ndarray, np.generic)):
        box = _fresh(box)
    return astype(box, dtype)


def _fresh(box):
    """A new traced array with box's contents (np.array copies; a Python number becomes
    an array)."""
    return bind(copy_prim, (box,), {})


def _as_array(box, dtype, copy):
    """np.array / np.asarray of a traced value: cast, copied, or itself. A list whose
    Boxes were all read (traced ints, guarded: np.stack reads them) gathers into a plain
    array."""
    box = stand_in(box)
    if type(box) is not Box:
        return np.array(box, dtype=dtype, copy=copy or None)
    if dtype is not None and np.dtype(dtype) != box.dtype:
        return cast(box, dtype)
    if copy or not isinstance(box.value, np.ndarray):
        return _fresh(box)
    return box


def _array(obj, dtype=None, *, copy=True, order="K", subok=False, ndmin=0, like=None):
    built = gather(obj)  # a list made into a new array needs no copy
    out = _as_array(built, dtype, copy is not False and built is obj)
    if np.ndim(out) < ndmin:
        out = np.reshape(out, (1,) * (ndmin - np.ndim(out)) + np.shape(out))
    return out


def _asarray(a, dtype=None, order=None, *, device=None, copy=None, like=None):
    built = gather(a)
    return _as_array(built, dtype, bool(copy) and built is a)


def _full(shape, fill_value, dtype=None, order="C", *, device=None, like=None):
    """As NumPy: the fill's dtype unless one is given, the fill broadcast to the shape."""
    fill = gather(fill_value)
    if dtype is not None and np.dtype(dtype) != fill.dtype:
        fill = cast(fill, dtype)
    shape = concrete(shape)  # a traced int there is read, guarded
    return _fresh(np.broadcast_to(fill, (shape,) if np.ndim(shape) == 0 else tuple(shape)))


def _full_like_wrapper(original):
    """np.full_like(c, v) of a plain c and a traced v: np.full of c's shape and dtype. A
    traced c dispatches to full_like's handler itself (shapes.py)."""
    @functools.wraps(original)
    def wrapped(a, fill_value, dtype=None, order="K", subok=True, shape=None, **kwargs):
        if current_trace() is None or type(a) is Box or not _holds_box(
                fill_value if type(fill_value) in (list, tuple) else (fill_value,)):
            return original(a, fill_value, dtype, order, subok, shape, **kwargs)
        a = a if isinstance(a, np.ndarray) else np.asarray(a)
        return _full(np.shape(a) if shape is None else shape, fill_value,
                     a.dtype if dtype is None else dtype)
    return wrapped


# ---- np.r_ and np.c_: pieces made 1-d (r_) or columns (c_), then concatenated -----------
def _piece(item, column):
    if type(item) is slice:
        start, stop, step = item.start or 0, item.stop, 1 if item.step is None else item.step
        if isinstance(step, complex):
            return np.linspace(start, stop, int(abs(step)))
        return np.arange(start, stop, step)
    item = gather(item)
    if np.ndim(item) == 0:
        return np.reshape(item, (1, 1) if column else (1,))
    if column and np.ndim(item) == 1:
        return np.reshape(item, (-1, 1))
    return item


def _concatenator(key, column):
    items = key if type(key) is tuple else (key,)
    if any(isinstance(item, str) for item in items):
        raise UnsupportedOperationError(at(user_loc(), "np.r_ / np.c_ with a string "
                                           "directive ('0,2', 'r', ...) on traced values is "
                                           "not supported: use np.concatenate or np.stack"))
    pieces = [_piece(item, column) for item in items]
    arrays = [p for p, item in zip(pieces, items) if np.ndim(item) > 0 or type(item) is slice]
    if arrays and len(arrays) < len(pieces):  # scalars take the arrays' dtype, as in NumPy
        dtype = np.result_type(*[p.dtype for p in arrays])
        pieces = [p if np.ndim(item) > 0 or type(item) is slice or p.dtype == dtype
                  else astype(p, dtype) for p, item in zip(pieces, items)]
    return np.concatenate(pieces, axis=-1 if column else 0)


class _Concatenator:
    """What np.r_ / np.c_ are while a trace runs: NumPy's own unless this thread traces
    and the key holds a traced value."""

    def __init__(self, original, column):
        self._original, self._column = original, column

    def __getitem__(self, key):
        if current_trace() is None or not _holds_box(key if type(key) is tuple else (key,)):
            return self._original[key]
        return _concatenator(key, self._column)

    def __len__(self):
        return len(self._original)

    def __getattr__(self, name):
        return getattr(self._original, name)


# ---- the wrappers -------------------------------------------------------------------------
def _data_wrapper(original, count):
    """NumPy's function, its first `count` arguments gathered when they hold Boxes."""
    @functools.wraps(original)
    def wrapped(*args, **kwargs):
        if current_trace() is None or not any(
                type(a) in (list, tuple) and _holds_box(a) for a in args[:count]):
            return original(*args, **kwargs)
        return original(*[gather(a) if i < count else a for i, a in enumerate(args)],
                        **kwargs)
    return wrapped


FOREIGN = []  # folders of libraries whose np.asarray(...) leads into compiled code
# (SciPy's, rules/scipy): called from there, NumPy's own function refuses the Box, naming
# the library's function the user called, instead of a Box failing deep in that code


def _own_wrapper(original, handler, fill=None):
    """NumPy's function, or `handler` when this thread traces and the data (argument 0,
    or the fill at position `fill`) is or holds a Box."""
    @functools.wraps(original)
    def wrapped(*args, **kwargs):
        data = args[fill] if fill is not None and len(args) > fill else \
            kwargs.get("fill_value") if fill is not None else args[0] if args else \
            kwargs.get("object", kwargs.get("a"))
        if type(data) is Fresh:  # np.asarray(x) may be a view of x: x stays plain
            data.__dict__["viewed"] = True
        if current_trace() is None or not _holds_box(data if type(data) in (list, tuple)
                                                     else (data,)) or \
                sys._getframe(1).f_code.co_filename.startswith(tuple(FOREIGN)):
            return original(*args, **kwargs)
        return handler(*args, **kwargs)
    return wrapped


_DATA = {"mean": 1, "sum": 1, "prod": 1, "average": 1, "std": 1, "var": 1, "max": 1,
         "min": 1, "amax": 1, "amin": 1, "cumsum": 1, "cumprod": 1, "median": 1,
         "transpose": 1, "reshape": 1, "ravel": 1, "diag": 1, "trace": 1, "sort": 1,
         "atleast_1d": 1, "atleast_2d": 1, "dot": 2, "outer": 2, "inner": 2, "vdot": 2,
         "cross": 2, "kron": 2, "tensordot": 2, "where": 3, "clip": 1, "diff": 1,
         "squeeze": 1, "expand_dims": 1, "tile": 1, "repeat": 1, "flip": 1, "roll": 1,
         "append": 2, "ptp": 1, "linspace": 2}
_LINALG = {"norm": 1, "det": 1, "inv": 1, "solve": 2, "slogdet": 1}


def _originals():
    found = [(np, name, getattr(np, name)) for name in _DATA if hasattr(np, name)]
    found += [(np.linalg, name, getattr(np.linalg, name)) for name in _LINALG]
    found += [(np, name, getattr(np, name)) for name in
              ("array", "asarray", "asanyarray", "ascontiguousarray", "full", "full_like",
               "r_", "c_")]
    return found


_ORIGINALS = _originals()


def _replacement(module, name, original):
    if name in ("r_", "c_"):
        return _Concatenator(original, name == "c_")
    if name == "array":
        return _own_wrapper(original, _array)
    if name in ("asarray", "asanyarray", "ascontiguousarray"):
        return _own_wrapper(original, _asarray)
    if name == "full":
        return _own_wrapper(original, _full, fill=1)
    if name == "full_like":
        return _full_like_wrapper(original)
    return _data_wrapper(original, (_LINALG if module is np.linalg else _DATA)[name])


_SWAPS = Swaps()
for _module, _name, _fn in _ORIGINALS:
    _SWAPS.add(_module, _name, _replacement(_module, _name, _fn))
PASSING.update(fn.__code__ for *_, fn in _SWAPS.entries if hasattr(fn, "__code__"))
ENTER_HOOKS.append((_SWAPS.enter, _SWAPS.leave))  # the user's function and the rules (custom VJPs)


# ---- what the traced code sees of numpy itself (capture.py's stand-ins) -------------------
# A module, a type or a function the user's code holds on to (np.float64, `from numpy
# import array`) is not what the patching above replaces; capture.py hands the traced code
# these stand-ins instead, for the reads it sees (globals, closures, imports).
class _ScalarType(type):
    """np.float64(x), np.int64(x) of a traced value: x cast (np.int64 of a traced array
    is an integer array, with no derivative). Anything else is NumPy's own type: its
    instances, subclasses and dtype are those of the real one."""

    def __call__(cls, *args, **kwargs):
        real = cls.__mro__[1]
        if current_trace() is not None and len(args) == 1 and not kwargs and \
                _holds_box(args[0] if type(args[0]) in (list, tuple) else (args[0],)):
            return cast(gather(args[0]), real)
        return real(*args, **kwargs)

    def __instancecheck__(cls, obj):
        return isinstance(obj, cls.__mro__[1])

    def __subclasscheck__(cls, sub):
        return issubclass(sub, cls.__mro__[1])

    def __eq__(cls, other):
        return other is cls or other is cls.__mro__[1]

    def __hash__(cls):
        return hash(cls.__mro__[1])


class Indexable(np.ndarray):
    """What np.eye and np.identity give the traced code: a constant that a traced index
    can index (np.eye(k)[y], a one-hot of the labels y), which a plain array cannot
    (NumPy would convert the index to a plain array). Anything else it takes part in
    gives plain arrays."""

    def __getitem__(self, key):
        if current_trace() is not None and _holds_box(key if type(key) is tuple else (key,)):
            trace = current_trace()
            plain = self.view(np.ndarray)
            return trace.box(copy_prim, (plain,), {}, plain.copy())[key]
        out = np.ndarray.__getitem__(self, key)
        return out.view(np.ndarray) if isinstance(out, np.ndarray) else out

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        inputs = [_plain(x) for x in inputs]
        if "out" in kwargs:
            kwargs["out"] = tuple(_plain(x) for x in kwargs["out"])
        return getattr(ufunc, method)(*inputs, **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        args = [_plain(a) if type(a) is not list else [_plain(x) for x in a] for a in args]
        return func(*args, **{k: _plain(v) for k, v in kwargs.items()})

    def __reduce__(self):  # pickled (the disk cache) as the constant it is
        return self.view(np.ndarray).__reduce__()


def _plain(x):
    return x.view(np.ndarray) if type(x) in (Indexable, Fresh) else x


def _indexable(original):
    @functools.wraps(original)
    def make(*args, **kwargs):
        out = original(*args, **kwargs)
        return out.view(Indexable) if current_trace() is not None else out
    return make


class Fresh(np.ndarray):
    """What np.zeros, np.ones, np.empty and np.full of a constant (and their *_like of a
    plain array) give the traced code: a new constant array that a traced index can
    index or write into (`x = np.zeros((k, 1)); x[i] = 1`, a one-hot of an int argument
    i). A plain array would read i as a Python int (NumPy converts the index), a guard
    that fails for every new i; this one becomes traced there, its Box (a copy of the
    constant, then the write), so i is read when the code runs. Until then it is a plain
    array, and what it takes part in gives plain arrays. A view of it, or one with a view
    (x[0], x.reshape(...), np.asarray(x)), stays plain: the view would not see the write."""

    def __array_finalize__(self, obj):
        if isinstance(obj, Fresh) and np.may_share_memory(self, obj):
            obj.__dict__["viewed"] = True  # a view of it (x.T, x.reshape(...))

    def __getitem__(self, key):
        traced = _traced(self, key)
        if traced is not None:
            return traced[key]
        out = np.ndarray.__getitem__(self, key)
        if isinstance(out, np.ndarray):
            if out.base is not None:
                self.__dict__["viewed"] = True
            return out.view(np.ndarray)
        return out

    def __setitem__(self, key, value):
        traced = _traced(self, key, value)
        if traced is not None:
            traced[key] = value
        else:
            np.ndarray.__setitem__(self, key, value)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        inputs = [_plain(x) for x in inputs]
        out = kwargs.get("out")
        if out is not None:
            kwargs["out"] = tuple(_plain(x) for x in out)
        result = getattr(ufunc, method)(*inputs, **kwargs)
        if out is None or result is None:
            return result
        return out if type(result) is tuple else out[0]  # x += 1 keeps x itself, as NumPy

    def __array_function__(self, func, types, args, kwargs):
        args = [_plain(a) if type(a) is not list else [_plain(x) for x in a] for a in args]
        out = func(*args, **{k: _plain(v) for k, v in kwargs.items()})
        if isinstance(out, np.ndarray) and np.may_share_memory(out, self):
            self.__dict__["viewed"] = True  # np.reshape(x, ...), np.transpose(x)
        return out

    def __reduce__(self):  # pickled (the disk cache) as the constant it is
        return self.view(np.ndarray).__reduce__()


def _traced(fresh, key, value=None):
    """fresh's Box once a traced index reaches it, or a traced value is written into it
    (`hs = np.zeros((T, B, H))`, then `hs[t] = h` in the loop: a recurrence written by
    hand); it is then a TracedFresh, its Box standing in for it everywhere. Else None:
    fresh stays plain."""
    trace = current_trace()
    if trace is None or trace.grad_of is not None or \
            not (_holds_box(key if type(key) is tuple else (key,)) or _holds_box(value)):
        return None
    if not fresh.__dict__.get("made") or fresh.__dict__.get("viewed"):
        return None
    plain = fresh.view(np.ndarray)
    box = trace.box(copy_prim, (plain.copy(),), {}, plain.copy())
    mark_fresh(trace, box)
    fresh.__dict__["box"] = box
    fresh.__class__ = TracedFresh
    return box


class TracedFresh(np.ndarray):
    """A Fresh array after a traced index or value reached it: its Box stands in for it
    everywhere (attributes, operators, the tracer's handlers: tracer.STAND_INS); its own
    memory, the constant it started as, is never read again."""

    def __getattribute__(self, name):
        if name in ("__dict__", "__class__"):
            return object.__getattribute__(self, name)
        return getattr(object.__getattribute__(self, "__dict__")["box"], name)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if "out" in kwargs:  # x += v: Box's in-place operator rebinds it
            kwargs["out"] = tuple(map(stand_in, kwargs["out"]))
        return getattr(ufunc, method)(*map(stand_in, inputs), **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return func(*map(stand_in, args), **{k: stand_in(v) for k, v in kwargs.items()})


def _box_of(traced):
    return object.__getattribute__(traced, "__dict__")["box"]


def _delegate(name):
    def method(self, *args):
        return getattr(_box_of(self), name)(*args)
    method.__name__ = name
    return method


for _name in ("__getitem__", "__setitem__", "__len__", "__iter__", "__bool__", "__float__",
              "__int__", "__index__", "__complex__", "__repr__", "__str__", "__copy__",
              "__deepcopy__", "__reduce__", "__reduce_ex__", "__contains__", "__format__",
              "__array__", "__iadd__", "__isub__", "__imul__", "__itruediv__",
              "__ifloordiv__", "__imod__", "__ipow__", "__imatmul__", "__iand__", "__ior__"):
    setattr(TracedFresh, _name, _delegate(_name))
STAND_INS[Fresh] = lambda fresh: fresh.view(np.ndarray)  # a constant, as a plain one
STAND_INS[TracedFresh] = _box_of


def _fresh_maker(name, does):
    """np.zeros and the like, as the traced code sees them: a Fresh array while tracing
    (NumPy's function `does`, or its swap above (np.full of a traced fill), does the work;
    np.empty's is np.zeros', so the constants in the code do not vary from run to run)."""
    @functools.wraps(getattr(np, name))
    def make(*args, **kwargs):
        out = getattr(np, does if current_trace() is not None else name)(*args, **kwargs)
        if current_trace() is None or type(out) is not np.ndarray:
            return out
        fresh = out.view(Fresh)  # (a view of `out`, which nothing else holds)
        fresh.__dict__["made"] = True
        return fresh
    return make


class _NumpyView(types.ModuleType):
    """numpy, as the traced code reads it (`np.float64`, `np.eye`): the stand-ins above,
    and numpy's own attributes (those being patched, while a trace runs)."""

    def __getattr__(self, name):
        found = _VIEW.get(name)
        return found if found is not None else getattr(np, name)

    def __dir__(self):
        return dir(np)


_SCALARS = ("half", "single", "double", "longdouble", "float16", "float32", "float64",
            "int8", "int16", "int32", "int64", "intp", "int_", "uint8", "uint16", "uint32",
            "uint64", "uintp")
_VIEW = {name: _ScalarType(getattr(np, name).__name__, (getattr(np, name),),
                           {"__module__": "numpy"}) for name in _SCALARS if hasattr(np, name)}
_VIEW.update(eye=_indexable(np.eye), identity=_indexable(np.identity))
_VIEW.update({name: _fresh_maker(name, does) for name, does in
              (("zeros", "zeros"), ("ones", "ones"), ("empty", "zeros"), ("full", "full"),
               ("zeros_like", "zeros_like"), ("ones_like", "ones_like"),
               ("empty_like", "zeros_like"), ("full_like", "full_like"))})
PASSING.add(_VIEW["zeros"].__code__)  # np.zeros_like(x) of a traced x: the user's call
_VIEW_MODULE = _NumpyView("numpy", np.__doc__)
add_stand_in(np, _VIEW_MODULE)
for _name, _value in _VIEW.items():
    add_stand_in(getattr(np, _name), _value)
# what docs/coverage.md lists (coverage_doc.py): (name, differentiable)
BUILDING = [("np.array", True), ("np.asarray", True), ("np.asanyarray", True),
            ("np.ascontiguousarray", True), ("np.full", True), ("np.r_", True), ("np.c_", True),
            ("np.eye", False), ("np.identity", False)]
BUILDING += [(f"np.{name}", np.issubdtype(getattr(np, name), np.inexact)) for name in _VIEW
             if isinstance(_VIEW[name], type)]
for *_, _real, _wrapper in _SWAPS.entries:  # the same, for names bound before the trace
    add_stand_in(_real, _wrapper)
