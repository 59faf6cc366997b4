"""The names an Emitter gives what its code reads but does not compute: module-level
constants (equal arrays share one name), constants in the batch size made at the top of
the function (`rows = np.arange(n)`), dtypes, custom primitives' functions, registered
types' flatten and aux_data, and objects handed over at load (the user's globals).

Each is written out when it can be (a literal, a small array) and otherwise left `None`
with a comment, for autodiffgen's loader to fill in.
"""

import ast

import numpy as np

from ..graph import constant_key
from ..graph.size_formulas import Dim, Scale, SymArray
from .expressions import (
    constant_ast,
    literal_ast,
    render,
    symbolic_array_ast,
    wrap,
)
from .layout import code_lines


def _array_name(array):
    """A module-level constant array's name, after how it is made (emit_ast.constant_ast)."""
    flat = array.ravel()
    if array.ndim == 0 or array.size == 0:
        return "const"
    if (flat == flat[0]).all():
        fill = flat[0].item()
        return "zeros" if fill == 0 else "ones" if fill == 1 else "full"
    if array.ndim == 1 and np.issubdtype(array.dtype, np.integer) \
            and (array == np.arange(array.size)).all():
        return "indices"
    return "const"


def _literal(value):
    """Whether a registered type's aux_data can be written as a Python literal."""
    if value is None or type(value) in (bool, int, float, str, bytes):
        return type(value) is not float or np.isfinite(value)
    return type(value) is tuple and all(map(_literal, value))


def _mentions(value, names):
    """Whether a symbolic value is a formula in one of `names` (the counts of
    generalize_counts.py)."""
    if not names:
        return False
    kind = type(value)
    if kind is SymArray:
        return _mentions(value.shape, names) or _mentions(value.fill, names)
    if kind in (tuple, list):
        return any(_mentions(v, names) for v in value)
    return getattr(value, "var", None) in names and kind in (Dim, Scale)


class Constants:
    """Module-level and function-level names of constants (a mixin of Emitter: the
    `constants` dict is shared by the functions of one module)."""

    def constant_name(self, value):
        """One module-level name per distinct constant (equal arrays share one)."""
        key = constant_key(value) if isinstance(value, np.ndarray) else ("object", id(value))
        entry = self.constants.get(key)
        if entry is None:
            base = _array_name(value) if isinstance(value, np.ndarray) else value.__name__
            entry = (self.ns.fresh(base), value)
            self.constants[key] = entry
        return entry[0]

    def local_constant(self, array):
        """A constant whose shape or values depend on the batch size: one name per distinct
        formula, computed at the top of the function (`rows = np.arange(n)`)."""
        if array in self.local_constants:
            return self.local_constants[array]
        name = self.local_constants[array] = self.ns.fresh(self.sym_array_name(array))
        if _mentions(array, self.counts):  # a mask's count: made where the count is known
            self.pending.append(self.local_constant_line(array, name))
        return name

    def sym_array_name(self, array):
        """What a constant in n is: `rows` (np.arange(n) of the batch), `inv_n` (1 / n
        everywhere: a mean's gradient), `neg_inv_n`, `zeros`, `ones`, else `full`."""
        batch = self.graph.batch
        if array.kind == "arange":
            dim = array.shape[0]
            whole = type(dim) is Dim and (dim.a, dim.b) == (1, 0)
            return "rows" if whole and batch is not None and dim.var == batch.var \
                else "indices"
        fill = array.fill
        if type(fill) is Scale and fill.power == -1 and (fill.m, fill.b) == (1, 0) \
                and fill.k in (1, -1):
            return ("inv_" if fill.k == 1 else "neg_inv_") + fill.var
        if type(fill) not in (Dim, Scale) and type(fill) is not bool and fill in (0, 1):
            return "zeros" if fill == 0 else "ones"
        return "full"

    def function_constant(self, fn, kind, what):
        """A registered type's flatten or unflatten as a module-level name (a lambda's is
        named after the type)."""
        key = ("object", id(fn))
        if key not in self.constants:
            name = getattr(fn, "__name__", "")
            base = name if name.isidentifier() else f"{kind.__name__}_{what}"
            self.constants[key] = (self.ns.fresh(base), fn)
        return self.constants[key][0]

    def local_constant_lines(self):
        return [self.local_constant_line(array, name)
                for array, name in self.local_constants.items()
                if not _mentions(array, self.counts)]

    @staticmethod
    def local_constant_line(array, name):
        return (f"{name} = {render(symbolic_array_ast(array))}",
                f"{array.dtype.name}[{render(literal_ast(array.shape))[1:-1].rstrip(',')}]")

    def dtype_name(self, dtype):
        key = ("dtype", np.dtype(dtype).str)
        entry = self.constants.get(key)
        if entry is None:
            entry = self.constants[key] = (self.ns.fresh(f"dtype_{np.dtype(dtype).name}"),
                                           np.dtype(dtype))
        return entry[0]

    def handover(self, obj, base, what):
        """A module-level name for an object the code reads but cannot write out (the
        user's globals, a closure cell): load() hands it over."""
        key = ("handover", id(obj))
        entry = self.constants.get(key)
        if entry is None:
            entry = self.constants[key] = (self.ns.fresh(base), obj, what)
        return entry[0]

    def function_line(self, name, fn):
        """A custom primitive's function: imported by a standalone module, handed over to
        an in-memory one."""
        module = getattr(fn, "__module__", None)
        if self.standalone:
            if module in (None, "__main__") or "<" in fn.__qualname__:
                raise ValueError(f"{fn.__qualname__} (a custom primitive or a namedtuple "
                                 f"class the code returns) is defined in "
                                 f"{module or 'no module'}, so a standalone module cannot "
                                 "import it: define it at the top level of an importable "
                                 "module")
            return wrap(f"{name} = __import__({module!r}, fromlist=[{fn.__name__!r}])"
                        f".{fn.__qualname__}")
        self.injected[name] = fn
        return code_lines(f"{name} = None", f"{module}.{fn.__qualname__}, which autodiffgen fills "
                     "in when it loads this module", indent="", align=False)

    def constant_lines(self):
        lines = []
        for name, array, *what in self.constants.values():
            if isinstance(array, np.dtype):
                lines.append(f"{name} = np.dtype({array.str!r})")
                continue
            if what:
                self.injected[name] = array
                lines += code_lines(f"{name} = None", f"{what[0]}, which autodiffgen fills in when "
                               "it loads this module", indent="", align=False)
                continue
            if not isinstance(array, np.ndarray):
                lines += self.function_line(name, array)
                continue
            made = constant_ast(array, self.standalone)
            what = f"{array.dtype.name}{list(array.shape)}"
            if made is None:  # too big to print: load() hands it over after exec
                self.injected[name] = array
                lines += code_lines(f"{name} = None", f"a {what} constant, which autodiffgen "
                               "fills in when it loads this module", indent="", align=False)
            else:
                lines += code_lines(f"{name} = {render(made)}", what, indent="")
        return lines

    def static_ast(self, value, kind):
        """A registered type's aux_data: written out when it is a literal, else a constant
        the loader hands over."""
        if _literal(value):
            return literal_ast(value)
        key = ("object", id(value))
        if key not in self.constants:
            self.constants[key] = (self.ns.fresh(f"{kind.__name__}_aux_data"), value,
                                   f"the aux_data of a {kind.__name__}")
        return ast.Name(self.constants[key][0], ast.Load())
