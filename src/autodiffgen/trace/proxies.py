"""Objects as a trace sees them: the user's objects, classes and modules through a Proxy,
and pytree arguments of the user's classes as an instance of a traced subclass.

What the traced code reads through a Proxy (`self.W`, `config.scale`, `model.layer`) is
what the capture makes of it (capture.Capture.substitute: an input read again at each
call, a guard, a clone of a method), and what it writes stays in the proxy, noted as an
effect (effects.py), so the user's object is never changed by a trace. A dataclass or
registered pytree argument keeps its Boxes as fields; its class is swapped for a subclass
whose methods are clones and whose class attributes are read from the class at each call.

Contract: these are the capture's views, made by Capture (a mixin, PytreeClasses, holds
its pytree half); they look nothing up but through it. Upstream: reads, effects.
"""

import dis
import os
import sys
import types

from ..errors import is_internal
from ..tree import alias_kind, is_container, items, user_kind
from . import effects
from .reads import Read, user_function, user_module

_STDLIB = os.path.dirname(os.__file__)


class Proxy:
    """A user object, class or module as the traced code sees it: attributes read
    through it are what the trace sees (Boxes, clones); writes stay in the proxy."""

    __slots__ = ("_adg_capture", "_adg_fetched", "_adg_obj", "_adg_own", "_adg_read")

    def __init__(self, capture, obj, read):
        set_ = object.__setattr__
        set_(self, "_adg_capture", capture)
        set_(self, "_adg_obj", obj)
        set_(self, "_adg_read", read)
        set_(self, "_adg_own", {})
        set_(self, "_adg_fetched", {})  # attribute name -> what the trace read

    @property
    def __class__(self):
        """The object's class: the real one for isinstance() and library code, and the
        class seen through a proxy where the user's code reads `self.__class__.SCALE`."""
        real = type(object.__getattribute__(self, "_adg_obj"))
        if isinstance(object.__getattribute__(self, "_adg_obj"), type) or \
                not _reads_class_attribute(sys._getframe(1)):
            return real
        read = object.__getattribute__(self, "_adg_read")
        return Proxy(object.__getattribute__(self, "_adg_capture"), real,
                     read and read.then("attr", "__class__"))

    def __getattr__(self, name):
        own = object.__getattribute__(self, "_adg_own")
        if name in own:
            return own[name]
        obj = object.__getattribute__(self, "_adg_obj")
        read = object.__getattribute__(self, "_adg_read")
        capture = object.__getattribute__(self, "_adg_capture")
        if isinstance(obj, dict) and name in _MAPPING_READS and \
                _lookup(type(obj), name)[0] != "function":  # a dict subclass's own methods
            return _MAPPING_READS[name](self, obj)
        kind, found = _lookup(obj, name)
        here = read and read.then("attr", name)
        if kind == "method":  # a function on the class, bound to this proxy
            capture.guard(here and here.then("attr", "__func__"), "is", found)
            return types.MethodType(capture.clone(found), self)
        if kind == "static":
            capture.guard(here, "is", found)
            return capture.clone(found)
        if kind == "classmethod":
            capture.guard(here and here.then("attr", "__func__"), "is", found)
            owner = self if isinstance(obj, type) else Proxy(
                capture, type(obj), read and read.then("attr", "__class__"))
            return types.MethodType(capture.clone(found), owner)
        if kind == "property":
            return capture.clone(found.fget)(self)
        seen = capture.substitute(found, here)
        object.__getattribute__(self, "_adg_fetched")[name] = seen
        return seen

    def __setattr__(self, name, value):
        read = object.__getattribute__(self, "_adg_read")
        own = object.__getattribute__(self, "_adg_own")
        fetched = object.__getattribute__(self, "_adg_fetched")
        if read is not None and name not in own and not (
                name in fetched and fetched[name] is value):  # `self.log += [x]`: the same list
            capture = object.__getattribute__(self, "_adg_capture")
            capture.effects.append(effects.attribute(read.label or "an object", name,
                                                     name in fetched))
        own[name] = value

    def __call__(self, *args, **kwargs):
        obj = object.__getattribute__(self, "_adg_obj")
        if isinstance(obj, type):  # a new object: its methods are cloned too
            made = obj(*args, **kwargs)
            capture = object.__getattribute__(self, "_adg_capture")
            return Proxy(capture, made, None) if type(made) is obj and not \
                is_container(made) else made  # a pytree (tree.py): its leaves are traced
        return self.__getattr__("__call__")(*args, **kwargs)

    def __getitem__(self, key):
        obj = object.__getattribute__(self, "_adg_obj")
        if _lookup(type(obj), "__getitem__")[0] == "function":
            return self.__getattr__("__getitem__")(key)
        read = object.__getattribute__(self, "_adg_read")
        capture = object.__getattribute__(self, "_adg_capture")
        value = obj[key]
        return capture.substitute(value, read.then("item", key)) if read else value

    def __len__(self):
        return len(object.__getattribute__(self, "_adg_obj"))

    def __iter__(self):
        obj = object.__getattribute__(self, "_adg_obj")
        if _lookup(type(obj), "__iter__")[0] == "function":
            return self.__getattr__("__iter__")()
        if isinstance(obj, (list, tuple)):
            return (self[i] for i in range(len(obj)))
        return iter(obj)

    def __bool__(self):
        return bool(object.__getattribute__(self, "_adg_obj"))

    def __repr__(self):
        return repr(object.__getattribute__(self, "_adg_obj"))

    def __instancecheck__(self, instance):
        return isinstance(instance, object.__getattribute__(self, "_adg_obj"))

    def __subclasscheck__(self, cls):
        return issubclass(cls, object.__getattribute__(self, "_adg_obj"))


_MAPPING_READS = {  # what reads a dict subclass's values, through the proxy's [key]
    "items": lambda proxy, obj: lambda: [(k, proxy[k]) for k in obj],
    "values": lambda proxy, obj: lambda: [proxy[k] for k in obj],
    "get": lambda proxy, obj: lambda k, default=None: proxy[k] if k in obj else default,
}


_CLASS_READS = {}  # code -> offsets of its `.__class__` attribute reads


def _reads_class_attribute(frame):
    """Whether `frame` (user code) is reading `.__class__` as an attribute, as opposed to
    calling isinstance() or a library reading it."""
    code = frame.f_code
    if is_internal(code.co_filename):
        return False
    offsets = _CLASS_READS.get(code)
    if offsets is None:
        offsets = _CLASS_READS[code] = frozenset(
            i.offset for i in dis.get_instructions(code)
            if i.opname.startswith("LOAD_ATTR") and i.argval == "__class__")
    return frame.f_lasti in offsets


def _lookup(obj, name):
    """(how the attribute is found, what is found), without running the user's code."""
    if isinstance(obj, types.ModuleType):
        found = obj.__dict__.get(name, _MISSING)
        return ("value", found if found is not _MISSING else getattr(obj, name))
    klass = obj if isinstance(obj, type) else type(obj)
    found = _MISSING
    for k in klass.__mro__:
        if name in k.__dict__:
            found = k.__dict__[name]
            break
    if isinstance(found, staticmethod) and type(found.__func__) is types.FunctionType:
        return ("static", found.__func__)
    if isinstance(found, classmethod) and type(found.__func__) is types.FunctionType:
        return ("classmethod", found.__func__)
    if isinstance(obj, type):
        if type(found) is types.FunctionType and user_function(found):
            return ("function", found)
        return ("value", getattr(obj, name))
    if isinstance(found, property) and type(found.fget) is types.FunctionType:
        return ("property", found)
    own = getattr(obj, "__dict__", None)
    if type(own) is dict and name in own:
        return ("value", own[name])
    if type(found) is types.FunctionType and user_function(found):
        return ("method", found)
    return ("value", getattr(obj, name))


_MISSING = object()


class PytreeClasses:
    """Capture's half for pytree arguments of the user's classes (tree.py): `clone` and
    `substitute` are Capture's, `classes` its table of the subclasses made."""

    def pytree_argument(self, tree):
        """A dataclass or registered-type argument (at any depth of a pytree), rebuilt by
        tracer.py around its Boxes, as the traced code sees it: an instance of a subclass
        whose methods are clones (what they read is read again or guarded, as for any
        function) and whose class attributes are read from the class at each call. Its
        fields are its children (Boxes); what else it holds follows from them and from
        its aux_data, both in the cache key."""
        if not is_container(tree):
            return tree
        for _, child in items(tree):
            self.pytree_argument(child)
        kind = type(tree)
        if user_kind(kind):
            traced = self.classes.get(kind)
            if traced is None:
                traced = self.classes[kind] = self._traced_class(kind)
            if traced is not None:
                object.__setattr__(tree, "__class__", traced)
        return tree

    def _traced_class(self, kind):
        """The subclass of `kind` the trace sees (None if Python refuses to make one)."""
        members = {"__slots__": (), "__module__": kind.__module__,
                   "__qualname__": kind.__qualname__}
        fields = getattr(kind, "__dataclass_fields__", {})
        for klass in reversed(kind.__mro__[:-1]):  # a subclass's member wins
            if not (user_module(klass.__module__) or klass.__module__ == "__main__"):
                continue
            for name, value in vars(klass).items():
                member = None if name in fields else self._traced_member(kind, name, value)
                if member is not None:
                    members[name] = member
                else:
                    members.pop(name, None)
        try:
            made = type(kind)(kind.__name__, (kind,), members)
            alias_kind(made, kind)
            return made
        except TypeError:  # a layout or metaclass that refuses a subclass
            return None

    def _traced_member(self, kind, name, value):
        def traced(fn):  # not what dataclasses writes (exec'd, or a wrapper of its own)
            return type(fn) is types.FunctionType and user_function(fn) and not (
                fn.__code__.co_filename.startswith(("<", _STDLIB)))
        if traced(value):
            return self.clone(value)
        if isinstance(value, (staticmethod, classmethod)) and traced(value.__func__):
            return type(value)(self.clone(value.__func__))
        if isinstance(value, property) and value.fget is not None and traced(value.fget):
            return property(self.clone(value.fget), value.fset, value.fdel, value.__doc__)
        if name.startswith("__") or hasattr(type(value), "__get__"):
            return None
        return _ClassValue(self, kind, name)


class _ClassValue:
    """A class attribute as a pytree argument's traced subclass shows it: read from the
    user's class (an input or a guard of the generated code, read again at each call);
    an instance attribute of the same name wins, as in Python."""

    def __init__(self, capture, kind, name):
        self.capture, self.kind, self.name = capture, kind, name

    def __get__(self, instance, owner=None):
        where = getattr(sys.modules.get(self.kind.__module__), "__file__", "") or ""
        return self.capture.substitute(getattr(self.kind, self.name),
                                       Read(self.kind, (("attr", self.name),), where))


