"""The checks an Emitter writes: that the arguments and what the trace read besides them
take the traced path, else GuardFailure (the cache traces again).

A guard node's test (`if x.shape[0] != n: raise GuardFailure(...)`), a count read at run
time, a call that raised when traced (`try: ... except ...: pass else: raise`), the reads
of globals, closures and attributes done again (captured_checks), a standalone module's
checks of its non-array arguments, and the `try:` / `np.errstate` blocks of marked
statements. Each message names the user's line and what it read when traced.
"""

import os
import types
from types import SimpleNamespace

import numpy as np

from ..graph import Node
from ..graph.size_formulas import Dim
from ..trace.capture import read_traced
from ..trace.context import source_line
from ..trace.raising import Raised, errstate_code
from ..trace.reads import chain_text, is_globals, same_contents
from ..trace.recording import RAISES
from .expressions import (
    expression,
    literal_ast,
    render,
)
from .layout import loc_text

# how a guard's check reads the value, as the user's code did (rules/control.py READS)
_READ_FORMS = {"bool": "{x}", "item": "{x}.item({index})", "index": "operator.index({x})",
               "layout": "_layout({x})",
               "aliases": "np.may_share_memory({x}, {y})",
               "count_nonzero": "int(np.count_nonzero({x}))",
               "len": "len({x})",
               "iscomplexobj": "np.iscomplexobj({x})",
               "isnan_any": "np.isnan({x}).any()"}


_LAYOUTS = {"CF": "contiguous", "C": "C-ordered", "F": "Fortran-ordered"}


# a count read at run time (generalize_counts.py): what it counts, and what was traced
_COUNTED = {"count_nonzero": ("elements selected",
                              "{} elements selected; this code serves {} or more"),
            "len": ("a length the data decides",
                    "a result of length {}; this code serves lengths of {} or more")}


_COUNT_GUARDED = {  # a count guarded: what it was, why, and what would serve every count
    "count_nonzero": (
        "selected {} elements when traced, and this code serves only that count: traces at "
        "other counts did not fit one formula in it (Python decided on the number, e.g. a "
        "reshape, a range or an if; or computed with it in a way not fitted; or two "
        "selections meet). To serve every count with one trace, keep the count in arrays: "
        "np.count_nonzero(mask) rather than len(x[mask]) in arithmetic, np.where(mask, x, 0) "
        "rather than x[mask]"),
    "len": (
        "gave a result of length {} when traced, and this code serves only that length: "
        "traces at other lengths did not fit one formula in it (Python decided on it, e.g. a "
        "reshape, a range or an if; or the result meets an array of a fixed size, as "
        "x * np.bincount(labels, minlength=5) with x of 5 elements)")}


READS_OF_VALUES = ("bool", "float", "complex", "int", "index", "item", "round")


def _captured_labels(guard):
    """`T`, `config.scale`: what a guard's test reads, when it depends only on values read
    from outside the arguments (a global the user rebinds, not data). The GuardFailure
    carries it, so that the cache can name it when it keeps changing (api.py)."""
    labels, seen, stack = set(), set(), list(guard.args)
    while stack:
        node = stack.pop()
        if type(node) is not Node or id(node) in seen:
            continue
        seen.add(id(node))
        if node.prim is None:
            read = node.params.get("read")
            if read is None:
                return ""
            labels.add(read.label)
        stack.extend(node.args)
    return ", ".join(sorted(labels))


def _holder(read):
    """(the object a read starts at, its name in the module, what it is)."""
    holder = read.holder
    where = os.path.basename(read.where)
    if is_globals(holder):
        return holder, "module_globals", f"the globals of {holder.get('__name__')} ({where})"
    if read.var and read.chain[:1] == (("attr", "cell_contents"),):
        return holder, f"cell_{read.var}", f"the closure cell {read.var} ({where})"
    if isinstance(holder, types.FunctionType):  # its defaults
        return holder, holder.__name__, f"the function {holder.__qualname__} ({where})"
    return holder, "holder", f"the {type(holder).__name__} {read.label} ({where})"


# what NumPy raises on values (an index out of range, a NaN to int(), a FloatingPointError
# under np.errstate, LinAlgError, a ValueError subclass): in a `try:` line, such a raise at
# run time is a GuardFailure (raising.py)
_VALUE_ERRORS = "(ArithmeticError, LookupError, TypeError, ValueError)"


def _other_raise(where, error):
    """A raise of another class than the traced one: the user's `except` may not catch
    it, so the call traces again and finds out."""
    message = f"{where}: raised {{error!r}}, not what it raised when traced"
    others = ", ".join(n for n in _VALUE_ERRORS[1:-1].split(", ") if n != error.__name__)
    return [(f"except ({others}) as error:", ""),
            (f"    raise GuardFailure(f{message!r}) from None", "")]


def _error_name(cls):
    """How generated code names an exception class: np.linalg.LinAlgError, ValueError."""
    module = cls.__module__
    if module == "builtins":
        return cls.__name__
    if module.startswith("numpy.") and getattr(np, module.split(".")[1], None) is not None:
        return f"np.{module.split('.', 1)[1]}.{cls.__name__}"
    return _VALUE_ERRORS  # a class the code cannot name: any raise NumPy makes on values


class Guards:
    """The guard lines of an Emitter (a mixin: it reads the emitter's graph, names, helpers
    and imports, and writes lines as (code, comment) pairs)."""

    def batch_guard(self):
        """Polymorphic code (generalize_batch.py) reads the batch size n from its first batch
        argument,
        and checks every other one has n rows and that n is a size it was checked for."""
        batch = self.graph.batch
        if batch is None:
            return []
        self.helpers.add("GuardFailure")
        self.ns.used.add(batch.var)
        named = lambda path: render(self.path_ast(path))
        rows = _rows_named(batch.paths, named)
        # hi None: a standalone module's code, which serves every size from lo up
        tests = [f"not {batch.lo} <= {batch.var} <= {batch.hi}" if batch.hi is not None
                 else f"{batch.var} < {batch.lo}"]
        tests += _rows_tests(batch.paths[1:], batch.var, named)
        each = f", the same in {', '.join(rows[:-1])} and {rows[-1]}" if len(rows) > 1 else ""
        served = f"{batch.lo} to {batch.hi}" if batch.hi is not None else f"{batch.lo} or more"
        message = f"{{{batch.var}}} rows: this code serves {served} rows{each}"
        return [(f"{batch.var} = {render(self.path_ast(batch.paths[0]))}.shape[0]",
                 "the batch size"),
                (f"if {' or '.join(tests)}:", ""),
                (f"    raise GuardFailure(f{message!r})", "")]

    def raising(self, node, stmt, comment, locs, at):
        """A call that can raise on some values, traced on values where it did not: a raise
        is a GuardFailure, so the call traces the path it takes (an `except` in the user's
        code, or the error itself)."""
        self.helpers.add("GuardFailure")
        if node.loc is not None:
            locs[at + 1] = node.loc
        where = loc_text(node.loc) if node.loc else "?"
        message = f"{where}: {node.prim.name} raised {{error!r}}, which it did not when traced"
        return [("try:", ""), (f"    {stmt}", comment),
                (f"except {_error_name(RAISES[node.prim.name])} as error:", ""),
                (f"    raise GuardFailure(f{message!r}) from None", "")]

    def marked(self, body, node, mark, lines, locs):
        """A statement of a user line in a `try:` body (a raise at run time, which the
        trace did not see, is a GuardFailure: the call traces the path it takes) and/or
        under the np.errstate it was traced in. Consecutive statements of one user line
        share one block (of any lines, under an errstate alone: no message names a line)."""
        depth = bool(mark.errstate) + mark.tried
        lines = [("    " * depth + code, comment) for code, comment in lines]
        block, key = self.block, node.stack if mark.tried else mark
        if block is not None and block[0] == key and block[1] == len(body):
            at = len(body) - block[2]  # before the block's `except` lines
            body[at:at] = lines
            self.block = (key, len(body), block[2])
            if node.loc is not None and at not in locs:
                locs[at] = node.loc
            return
        head, tail = [], []
        if mark.tried:
            self.helpers.add("GuardFailure")
            where = loc_text(node.loc) if node.loc else "?"
            message = f"{where}: raised {{error!r}}, which it did not when traced"
            head.append(("try:", ""))
            tail = [(f"except {_VALUE_ERRORS} as error:", ""),
                    (f"    raise GuardFailure(f{message!r}) from None", "")]
        if mark.errstate:
            head.append(("    " * mark.tried + f"with {errstate_code(mark.errstate)}:", ""))
        if node.loc is not None:
            locs[len(body) + len(head)] = node.loc
        body += head + lines + tail
        self.block = (key, len(body), len(tail))

    def tried_guard(self, node, lines):
        """A guard's read in a `try:` body (`int(x)` of a NaN raises): a raise, which the
        trace did not see, is a GuardFailure too."""
        p = node.params
        if p["test"] == "raises" or type(p["outcome"]) is Raised:
            return lines
        where = loc_text(node.loc) if node.loc else "?"
        message = f"{where}: raised {{error!r}}, which it did not when traced"
        return [("try:", ""), *[("    " + code, comment) for code, comment in lines],
                ("except GuardFailure:", ""), ("    raise", ""),
                (f"except {_VALUE_ERRORS} as error:", ""),
                (f"    raise GuardFailure(f{message!r}) from None", "")]

    def guard_lines(self, node):
        """`if <the value reads otherwise>: raise GuardFailure(...)`, the guard's check (a
        count read at run time raises only below the counts the code serves)."""
        p = node.params
        if type(p["outcome"]) is not Dim:
            self.helpers.add("GuardFailure")
        if p["test"] == "raises":
            return self.raises_lines(node)
        x, *y = [render(self.arg_ast(a)) for a in node.args]
        if type(p["outcome"]) is Dim:  # a count the code reads at run time (generalize_counts.py)
            var = p["outcome"].var
            counted, served = _COUNTED[p["test"]]
            lines = [(f"{var} = {_READ_FORMS[p['test']].format(x=x)}",
                      f"{counted}, {loc_text(node.loc)}" if node.loc else "")]
            if p.get("lo"):
                self.helpers.add("GuardFailure")
                message = (f"{loc_text(node.loc) if node.loc else '?'}: " +
                           served.format(f"{{{var}}}", p["lo"]) +
                           " (the function reads a size in Python)")
                lines += [(f"if {var} < {p['lo']}:", ""),
                          (f"    raise GuardFailure(f{message!r})", "")]
            return lines
        read = _READ_FORMS.get(p["test"], p["test"] + "({x})").format(
            x=x, y=y[0] if y else "", index=", ".join(map(repr, p["index"])))
        if p["test"] == "index":
            self.imports.add("operator")
        outcome = p["outcome"]
        where = loc_text(node.loc) if node.loc else "?"
        code = source_line(node.loc) if node.loc else ""
        if type(outcome) is Raised:  # the read raised when traced, in a `try:`
            message = (f"{where}: `{code}` raised {outcome.error.__name__} when traced, and "
                       "does not now")
            return [("try:", f"guard: {code}" if code else "guard"), (f"    {read}", ""),
                    (f"except {_error_name(outcome.error)}:", ""), ("    pass", ""),
                    *_other_raise(where, outcome.error), ("else:", ""),
                    (f"    raise GuardFailure({message!r})", "")]
        if p["test"] in ("bool", "aliases", "iscomplexobj", "isnan_any"):
            test = f"not {read}" if outcome else read
            if p.get("exit"):  # a `while` loop's test: the loop prints it after the step
                self.exit_check = [(f"if {test}:", source_line(node.loc) if node.loc else ""),
                                   ("    break", "")]
                return []
        elif isinstance(outcome, float) and np.isnan(outcome):
            test = f"not np.isnan({read})"
        elif type(outcome) is float and outcome == 0.0:  # and its sign: -0.0 is not 0.0
            test = f"{read} != 0.0 or np.copysign(1.0, {read}) != {np.copysign(1.0, outcome)}"
        else:
            shown = repr(outcome) if type(outcome) is str else render(literal_ast(outcome))
            test = f"{read} != {shown}"
        where = loc_text(node.loc) if node.loc else "?"
        code = source_line(node.loc) if node.loc else ""
        message = f"{where}: `{code}` was {outcome!r} when traced" if p["test"] == "bool" \
            else f"{where}: `{code}` read {p['test']}() = {outcome!r} when traced"
        if p["test"] == "layout":  # the write is traced for this layout (rules/numpy_api/writes.py)
            self.helpers.add("_layout")
            message = f"{where}: `{code}` was traced with {x} " + _LAYOUTS.get(
                outcome, f"non-contiguous, strides {outcome}")
        elif p["test"] == "aliases":
            message = f"{where}: `{code}` was traced with {x} and {y[0]} not sharing memory"
        elif p["test"] == "isnan_any":  # (rules/masked_writes.py)
            message = (f"{where}: `{code}` was traced with no NaN in {x}, where its masks "
                       "are complements")
        elif p["test"] in _COUNTED:
            message = f"{where}: `{code}` " + _COUNT_GUARDED[p["test"]].format(outcome)
        reads = _captured_labels(node) if p["test"] in READS_OF_VALUES else ""
        failure = f"{message!r}, {reads!r}" if reads else repr(message)
        return [(f"if {test}:", f"guard: {code}" if code else "guard"),
                (f"    raise GuardFailure({failure})", "")]

    def raises_lines(self, node):
        """try: <the call> except <what it raised>: pass, else: raise GuardFailure(...)."""
        p = node.params
        call = SimpleNamespace(prim=p["call"], params=p["call_params"])
        expr = expression(call, [self.arg_ast(a) for a in node.args], self.param_ast)
        self.imports.update(p["call"].imports)
        where = loc_text(node.loc) if node.loc else "?"
        code = source_line(node.loc) if node.loc else ""
        message = f"{where}: `{code}` raised {p['outcome']} when traced, and does not now"
        call = [(f"    {render(expr)}", "")]
        if p.get("errstate"):  # raised under np.errstate(...): checked under it (raising.py)
            call = [(f"    with {errstate_code(p['errstate'])}:", ""), ("    " + call[0][0], "")]
        error = p.get("error") or RAISES[p["call"].name]
        return [("try:", f"guard: {code}" if code else "guard"), *call,
                (f"except {_error_name(error)}:", ""), ("    pass", ""),
                *(_other_raise(where, error) if p.get("error") is not None else ()),
                ("else:", ""), (f"    raise GuardFailure({message!r})", "")]

    def captured_checks(self):
        """Read again what the trace read outside the arguments (capture.py): arrays and
        numbers are inputs, checked for type, shape and dtype; the rest (ints, strings,
        functions chosen by name) are guards. A standalone module keeps them as constants."""
        reads = [n for n in self.graph.inputs if n.params.get("read") is not None]
        if self.standalone or not (reads or self.graph.captured):
            return []
        self.helpers.add("GuardFailure")
        lines = []
        for node in reads:
            read = node.params["read"]
            name = self.names[node] = self.ns.fresh(read.name)
            lines.append((f"    {name} = {self.read_code(read)}", read.label))
            lines += self.type_check(node, name, read)
        for check in self.graph.captured:
            read = check.read
            if check.test == "is":
                was = self.object_code(check.value, read)
                test = f"{self.read_code(read, 'is')} is not {was}"
            elif check.test == "same":  # its contents, against a private copy
                was = self.object_code(check.value, read)
                same = self.handover(same_contents, "same_contents",
                                     "autodiffgen.trace.capture's comparison")
                test = f"not {same}({self.read_code(read, 'same')}, {was})"
                message = (f"{os.path.basename(read.where)}: {read.label} holds other values "
                           "than when traced (the traced code keeps them as constants)")
                lines += [(f"    if {test}:", "guard: " + read.label),
                          (f"        raise GuardFailure({message!r})", "")]
                continue
            elif check.test in ("len", "keys"):  # a container rebuilt from its entries
                shape = "len" if check.test == "len" else "list"
                was = repr(check.value)
                test = f"{shape}({self.read_code(read, check.test)}) != {was}"
                what = f"no longer has {was} entries" if shape == "len" \
                    else f"no longer has the keys {was}"
                lines += self._failing(test, read, what, "guard: " + read.label)
                continue
            else:
                was = render(literal_ast(check.value)) if isinstance(
                    check.value, (np.generic, float)) else repr(check.value)
                test = f"{self.read_code(read, '==')} != {was}"
            lines += self._failing(test, read, f"is no longer {was}", "guard: " + read.label)
        where = os.path.basename(self.graph.captured[0].read.where if self.graph.captured
                                 else reads[0].params["read"].where)
        message = f"{where}: a global, closure variable or attribute it read is gone"
        head = "# what it reads besides its arguments: read again (inputs), or checked (guards)"
        return ([(head, ""), ("try:", "")] + lines +
                [("except (LookupError, AttributeError, ValueError):", ""),
                 (f"    raise GuardFailure({message!r}) from None", "")])

    def _failing(self, test, read, what, comment=""):
        message = f"{os.path.basename(read.where)}: {read.label} {what}, as it was when traced"
        return [(f"    if {test}:", comment), (f"        raise GuardFailure({message!r})", "")]

    def read_code(self, read, test=None):
        """`module_globals['config'].scale`: the place a value was read from."""
        holder = self.handover(*_holder(read))
        if self.pure:  # an enclosing trace runs this code: the read is its input or guard
            reader = self.handover(read_traced, "read_traced", "autodiffgen.trace.capture's reader")
            return f"{reader}({holder}, {read.chain!r}{'' if test is None else ', ' + repr(test)})"
        return holder + chain_text(read.chain)

    def type_check(self, node, name, read):
        kind = node.params["type"]
        if kind is np.ndarray:
            dtype = self.dtype_name(node.dtype)
            test = (f"{name}.__class__ is not np.ndarray or {name}.shape != "
                    f"{render(literal_ast(tuple(node.shape)))} or {name}.dtype != {dtype}")
            what = f"is no longer a {node.dtype}{list(node.shape)} array"
        else:
            spelled = kind.__name__ if kind in (float, complex, int) else \
                f"np.random.{kind.__name__}" if kind.__module__.startswith("numpy.random") \
                else f"random.{kind.__name__}" if kind.__module__ == "random" \
                else f"np.{kind.__name__}"
            test = f"{name}.__class__ is not {spelled}"
            article = "an" if kind.__name__[0] in "aeiou" else "a"
            what = f"is no longer {article} {kind.__name__}"
        return self._failing(test, read, what)

    def object_code(self, obj, read):
        """How the code names an object a guard compares against: np.sin, or a handover."""
        name = getattr(obj, "__name__", None)
        if obj is None:
            return "None"
        if type(name) is str and name.isidentifier() and getattr(np, name, None) is obj:
            return f"np.{name}"
        return self.handover(obj, f"traced_{read.name}", f"{read.label} when traced")

    def static_guards(self):
        """A standalone module cannot retrace: refuse a non-array argument's new value."""
        lines = []
        safe = dict(zip(self.graph.params, self.params))
        for name, value in self.graph.statics.items():
            name = safe.get(name, name)
            if value is None:
                test = f"{name} is not None"
            elif isinstance(value, float) and np.isnan(value):
                test = f"not np.isnan({name})"
            else:
                test = f"{name} != {render(literal_ast(value))}"
            message = (f"{name}={{{name}!r}}, but this code was generated for "
                       f"{name}={value!r}: regenerate it")
            lines += [f"if {test}:", f"    raise ValueError(f{message!r})"]
        return lines


def _next_item(path, after):
    """Whether `after` is the item of a list after `path`'s (xs[3], then xs[4])."""
    return len(path) == len(after) >= 2 and path[:-1] == after[:-1] and \
        type(path[-1]) is int and type(after[-1]) is int and after[-1] == path[-1] + 1


def _runs(paths):
    """(first, end) of each run of `paths`: a list's consecutive items, or one path."""
    k = 0
    while k < len(paths):
        end = k + 1
        while end < len(paths) and _next_item(paths[end - 1], paths[end]):
            end += 1
        yield k, end
        k = end


def _rows_named(paths, named):
    """The batch leaves' names for a message, a run of a list's items as one."""
    names = []
    for k, end in _runs(paths):
        names += [f"{named(paths[k])} to {named(paths[end - 1])}"] if end - k >= 3 else \
            [named(p) for p in paths[k:end]]
    return names


def _rows_tests(paths, var, named):
    """`x.shape[0] != n` per batch leaf; a run of a list's items as one test,
    `any(x.shape[0] != n for x in xs[1:50])` (a loop over a list reads them all)."""
    tests = []
    for k, end in _runs(paths):
        if end - k >= 3:
            tests.append(f"any(x.shape[0] != {var} for x in {named(paths[k][:-1])}"
                         f"[{paths[k][-1]}:{paths[end - 1][-1] + 1}])")
        else:
            tests += [f"{named(p)}.shape[0] != {var}" for p in paths[k:end]]
    return tests
