"""Views and rebinding: which traced arrays look into which, so that a write reaches every
array NumPy would see it through (the design is in writes.py's docstring).

`write(box, new)` rebinds the Box the user holds to the new value and carries the write
up to the bases of a view made by basic indexing (written back) and down to their live
views (remade from the new value); a result that shares memory with a traced argument is
noted as a view by a tracer hook. Aliasing between the function's inputs is refused or
guarded here, and so is the layout of the arguments a write depends on.
"""

import contextlib
import re
import weakref

import numpy as np

from ...errors import TracingError, at
from ...trace.boxes import Box
from ...trace.context import current_trace, source_line, user_loc
from ...trace.recording import INPUT_HOOKS, RESULT_HOOKS, bind
from ..control import READS
from ..indexing import getitem, setitem, shifted
from ..shapes import expand_dims, reshape, squeeze, transpose

_REARRANGED = (reshape, squeeze, expand_dims, transpose)


# ---- rebinding a Box, and the arrays that share its memory ---------------------------------
def write(box, new, assign=False):
    """Rebind `box` to `new`, as an in-place write leaves it, and bring every traced array
    NumPy would see the write through up to date: the bases of `box` (written back) and
    their live views (refreshed). Refused, before anything changes, when that cannot be
    followed: a write into a view made by something other than basic indexing, or into
    an argument that shares memory with another argument."""
    if not box.value.flags.writeable:  # the caller's read-only array, a broadcast
        raise ValueError(at(user_loc(), "assignment destination is read-only"))
    trace = current_trace()
    views = _views(trace)
    chain = views.chain_up(box)  # (view, record) from box up to the array it looks into
    root = chain[-1][1].base if chain else box
    if not is_fresh(trace, root):
        _guard_layouts(trace)
    if root.node.prim is None:
        _check_not_shared(trace, root)
    names = _names(box, root, chain, assign)
    with views.quiet():
        _rebind(trace, box, new, names.get(id(box), new.node.prim.name))
        views.refresh(trace, box)
        for view, record in chain:
            base = record.base
            update = record.write_back(view)
            _rebind(trace, base, update, names.get(id(base), base.node.name or "setitem"))
            views.refresh(trace, base, skip=view)


def _rebind(trace, box, new, name):
    """Point `box` at `new`'s node and value; the old node keeps a Box of its own in the
    trace, since the backward pass reads the values of nodes, not of variables."""
    if new is box:
        return
    if trace.boxes.get(box.node) is box:
        trace.boxes[box.node] = Box(box.value, box.node)
    if new.node.name is None and name is not None:
        new.node.name = name
    value = new.value
    box.node, box.value = new.node, (np.asarray(value) if type(value) is not np.ndarray
                                     else value)  # an array stays one (0-d ufunc results)


_PLAIN = re.compile(r"^([A-Za-z_]\w*)\s*(?:[-+*/@%&|]|\*\*|//)=(?!=)")
_SUBSCRIPTED = re.compile(r"^([A-Za-z_]\w*)\s*\[")


def _names(box, root, chain, assign):
    """{id(box): name} for the new values, after the statement's target: `h += v` names
    h's new value h; `x[i] = v` (and `x[1:3] *= 2`, written back) names x's new value x.
    Everything else written on the way is named after its operation, so that naming.py
    does not give the statement's name to the wrong value."""
    line = source_line(user_loc())
    plain, subscripted = _PLAIN.match(line), _SUBSCRIPTED.match(line)
    names = {}
    if plain:
        names[id(box)] = plain.group(1)
    elif subscripted and (assign or chain):
        names[id(root)] = subscripted.group(1)
    return names


def _check_not_shared(trace, root):
    """Refuse a write into an argument another input (argument, or an array the function
    reads from a global) shares memory with; otherwise the code checks they still do not
    (f(c, c) after f(a, b) traces again, and fails here). Inputs read after the write
    are checked as they are read (_check_new_input)."""
    written = trace.__dict__.setdefault("written_inputs", [])
    if root.node in written:
        return
    written.append(root.node)
    for node in trace.inputs:
        if node is not root.node:
            _check_pair(trace, root.node, trace.boxes[node])


def _check_new_input(trace, box):
    for node in getattr(trace, "written_inputs", ()):
        _check_pair(trace, node, box)


def _check_pair(trace, written, other):
    """`written` (an input node) and the Box of another input do not share memory."""
    root = trace.boxes[written]  # the argument as passed, before the write
    if type(other.value) is not np.ndarray or type(root.value) is not np.ndarray:
        return
    if np.may_share_memory(other.value, root.value):
        what = (f"{other.node.name!r}, which the function reads from outside its arguments"
                if other.node.params.get("read") is not None
                else f"argument {other.node.name!r}")
        raise TracingError(at(user_loc(), f"writing into argument {written.name!r}, "
                              f"which shares memory with {what}: NumPy would change both. "
                              "Pass a copy (np.copy) of the argument"))
    trace.guard(root, "aliases", False, more=(other,))


def mark_fresh(trace, box):
    """Note `box` as a new constant array the traced code made (building.Fresh): a write
    into it, or into its views, reaches no argument, so needs no layout guard."""
    if not hasattr(trace, "fresh_roots"):
        trace.fresh_roots = {}  # id(box) -> weakref to it (a Box is not hashable)
    trace.fresh_roots[id(box)] = weakref.ref(box)


def is_fresh(trace, box):
    ref = getattr(trace, "fresh_roots", {}).get(id(box))
    return ref is not None and ref() is box


def _guard_layouts(trace):
    """A traced write means what it meant only for arguments laid out as they were: a
    reshape of a C-ordered argument is a view the write is seen through, of a
    Fortran-ordered one a copy. The first write of a trace has the code check each array
    argument's layout (code that never writes checks nothing)."""
    if getattr(trace, "layouts_guarded", False):
        return
    trace.layouts_guarded = True
    for node in trace.inputs:
        box = trace.boxes[node]
        if type(box.value) is np.ndarray and box.value.ndim:
            trace.guard(box, "layout", READS["layout"](box.value))


class _Record:
    """How a view was made: the primitive, its arguments (the bases as the Boxes the user
    holds, so a refresh sees their current values; other Boxes frozen) and parameters."""

    __slots__ = ("args", "bases", "loc", "params", "prim", "ref")

    def __init__(self, view, prim, args, params, bases):
        self.ref = weakref.ref(view)
        self.prim, self.params, self.bases = prim, params, bases
        self.args = tuple(a if any(a is b for b in bases) or type(a) is not Box
                          else Box(a.value, a.node) for a in args)
        self.loc = view.node.loc

    @property
    def base(self):
        return self.bases[0]

    @property
    def basic(self):
        """Made by basic indexing, or by a reshape or transpose (which view every element
        of the base, rearranged): a write into it can be written back into its base."""
        return self.prim is getitem and not self.params["index"].slots or \
            self.prim in _REARRANGED

    def write_back(self, view):
        """The base's new value after `view` was written into."""
        base = self.base
        if self.prim is getitem:
            return setitem(base, view, *self.args[1:],  # a dynamic slice's bounds
                           index=shifted(self.params["index"], 1))
        if self.prim is transpose:
            axes = self.params["axes"]
            return transpose(view, axes=None if axes is None else
                             tuple(int(i) for i in np.argsort(axes)))
        return reshape(view, shape=np.shape(base.value))  # C order both ways, as NumPy

    def remake(self):
        return bind(self.prim, self.args, self.params)


class _Views:
    """One trace's views: which Boxes look into which, kept until the view is dropped."""

    def __init__(self):
        self.record_of = {}  # id(view) -> _Record (checked against the record's weakref)
        self.children = {}  # id(base) -> [_Record]; records keep their bases alive
        self.silent = 0

    def add(self, trace, view, prim, args, params, bases):
        record = _Record(view, prim, args, params, bases)
        self.record_of[id(view)] = record
        for base in bases:
            self.children.setdefault(id(base), []).append(record)
        if trace.boxes.get(view.node) is view:  # so that only the user keeps it alive
            trace.boxes[view.node] = Box(view.value, view.node)

    def record(self, view):
        record = self.record_of.get(id(view))
        return record if record is not None and record.ref() is view else None

    def chain_up(self, box):
        chain, view = [], box
        while (record := self.record(view)) is not None:
            if not record.basic:
                raise TracingError(at(user_loc(), _opaque_message(record)))
            chain.append((view, record))
            view = record.base
        return chain

    def refresh(self, trace, base, skip=None):
        """Remake the live views of `base` (and theirs, and so on) from its current value;
        `skip` is the view the write came through, already up to date."""
        stack = [(base, skip)]
        while stack:
            base, skip = stack.pop()
            for record in self.live_children(base):
                view = record.ref()
                if view is not None and view is not skip:
                    _rebind(trace, view, record.remake(), view.node.name or record.prim.name)
                    stack.append((view, None))

    def live_children(self, base):
        """The records of the views of `base` that someone still holds (the others are
        dropped here: a view nobody holds needs no refresh)."""
        records = self.children.get(id(base))
        if not records:
            return ()
        live = self.children[id(base)] = [r for r in records if r.ref() is not None]
        return live

    @contextlib.contextmanager
    def quiet(self):
        """While a write is carried out: what it makes is not a view the user holds."""
        self.silent += 1
        try:
            yield
        finally:
            self.silent -= 1


def _opaque_message(record):
    where = at(record.loc, "").rstrip(": ") if record.loc else "an earlier line"
    return (f"writing into a view of another array, made by {record.prim.name} at {where}: "
            "NumPy would write into that array too, and autodiffgen follows writes "
            "through views made by basic indexing (x[1:3], x[0], x[..., i]), reshape and "
            "transpose only. Write "
            "into a copy (np.copy(...)), or into the original array")


def _views(trace):
    """The trace's view registry, made on first use (an attribute of the Trace, so it
    lives and dies with the recording and no other thread sees it)."""
    views = getattr(trace, "mutation_views", None)
    if views is None:
        views = trace.mutation_views = _Views()
    return views


def _note_views(trace, box, args):
    """A result the user's code gets that shares memory with a traced argument: a view."""
    value = box.value
    if trace.grad_of is not None or type(value) is not np.ndarray:
        return
    if value.base is None and not any(type(a) is Box and a.value is value for a in args):
        return
    views = _views(trace)
    if views.silent:
        return
    bases = [a for a in args if type(a) is Box and type(a.value) is np.ndarray
             and np.may_share_memory(a.value, value)]
    if bases:
        node = box.node
        views.add(trace, box, node.prim, args, node.params, bases)


RESULT_HOOKS.append(_note_views)


# ---- np.zeros_like(x) of a traced x: new memory ------------------------------------------
_LIKES = ("zeros_like", "ones_like")  # (full_like is laid out as x: not these)


def _note_likes(trace, box, args):
    """np.zeros_like(x) or ones_like of a traced x is a new array, C-ordered as traced
    (shapes.zeros_like) whatever x's layout: fresh, so a write into it checks no layout
    (a stable sigmoid's masked writes)."""
    if box.node.prim.name in _LIKES and trace.grad_of is None:
        mark_fresh(trace, box)


RESULT_HOOKS.append(_note_likes)
INPUT_HOOKS.append(_check_new_input)
