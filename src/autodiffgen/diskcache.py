"""The persistent disk cache (opt-in): generated modules kept on disk, so that a new process
skips tracing.

    AUTODIFFGEN_CACHE_DIR=~/.cache/autodiffgen python train.py    # or diskcache.enable()

An entry is one file, `<key>.adg`, named by `entry_key(fingerprint(fun), signature_key,
extra)`: a hash of the function's code and of the helpers it names, the call's signature,
the library (version and source bytes), NumPy's, Python's and astor's versions, which
optional modules the code may import are installed and the settings that change the
emitted code. It holds the key's variants of generated code (source, injected arrays,
entry-point name, line map, and as JSON data the objects of the loading process the code
receives and what the trace read: diskentry.split and diskdeps.manifest); `load` hands them
back, the caller checks them (diskdeps.check, diskentry.restore) and compiles them.

Code read from disk runs with the user's rights, so whoever can write the file chooses it:
- the directory is per user, created 0700, and refused when it is a symbolic link, is owned
  by someone else or is open to others;
- every file is opened relative to the directory's descriptor with O_NOFOLLOW: a symbolic
  link planted in the directory is never followed;
- an entry carries an HMAC-SHA256, under a secret key file (0600) kept in the directory,
  over its key and content, checked before a byte of it is parsed: a changed, truncated or
  renamed file is reported once (a warning naming it) and treated as a miss, and the
  caller's regenerated code overwrites it;
- arrays are stored as .npy bytes and read with allow_pickle=False; a namespace holding
  anything but plain arrays and the handovers diskentry.split describes by name (a module's
  globals, the traced function's closure cells) is not persisted.
Writes go to a temporary file in the directory, fsync'd, then os.replace'd over the entry:
concurrent processes see the old entry or the new one, never a mix of the two.
"""

import contextlib
import enum
import errno
import functools
import hashlib
import hmac
import importlib.util
import io
import json
import linecache
import os
import pathlib
import re
import secrets
import stat
import sys
import time
import types
import warnings
from collections import namedtuple

import numpy as np

from . import _version, passes
from .errors import AutodiffgenError

ENV_DIR = "AUTODIFFGEN_CACHE_DIR"
MAX_BYTES = 512 * 2**20  # the default size bound: least recently used entries go first
Variant = namedtuple("Variant", "source arrays name locs handovers deps",
                     defaults=(None, None, None, None))
Variant.__doc__ = """One generated module: its source, the arrays its namespace receives,
the name of the function to call, {generated line: (user file, line)}, the objects of the
loading process it receives ({name: description}, see diskentry.split) and what the trace
read ({"names": [...], "paths": [[path, text]]}, see diskdeps.manifest): JSON data."""

_FORMAT = b"autodiffgen disk cache 2\n"
_SUFFIX = ".adg"
_SECRET = "hmac.key"
_TMP = ".tmp-"
_KEY = re.compile(r"[0-9a-f]{64}\Z")
_OPTIONAL = ("numexpr",)  # modules the emitted code imports when they are installed
_NOT_IN_CODE = {"AUTODIFFGEN_EXPLAIN", "AUTODIFFGEN_MAX_VARIANTS"}  # logging, a bound
_LIBRARIES = ("numpy", "autodiffgen", "builtins")  # covered by the versions in the key
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_FLAGS = getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
_LINK_ERRNOS = {errno.ELOOP, errno.EMLINK}  # O_NOFOLLOW on a link: Linux, FreeBSD
_DIR_FD = (hasattr(os, "O_DIRECTORY") and os.listdir in os.supports_fd
           and {os.open, os.rename, os.unlink, os.stat, os.link} <= os.supports_dir_fd)
_OWNERS = hasattr(os, "geteuid")  # POSIX: owners and modes mean something

_explicit, _path, _max_bytes = False, None, MAX_BYTES
_reported = set()


class CacheDirError(AutodiffgenError, PermissionError):
    """The cache directory is not one this library may run code from."""


class DiskCacheWarning(UserWarning):
    """A cache entry or directory was ignored; the code is traced again instead."""


class _Rejected(Exception):
    """A file in the cache directory that this library did not write as it is now."""


class _Unstable(Exception):
    """A value whose text could differ between processes (an address in its repr)."""


# ---------------------------------------------------------------- keys

def fingerprint(fun):
    """sha256 of `fun`'s code and of the code of every Python function it reaches by name
    (globals, closure cells, attributes of global modules and classes), so that editing a
    helper changes the key. Values of arrays and numbers are left out: the generated code
    reads or guards them itself."""
    digest = hashlib.sha256()
    _Walk(digest.update).function(fun)
    return digest.hexdigest()


def entry_key(fingerprint, signature_key, extra=()):
    """The entry's name: the function's fingerprint, the call's signature key (cache.leaf_key
    tuples) and `extra`, with everything else the emitted code depends on. None when the
    signature holds a value with no process-independent text (an object whose repr is its
    address): such a call is not persisted."""
    try:
        call = _canon(signature_key) + "|" + _canon(extra)
    except _Unstable:
        return None
    return _hash([_FORMAT, fingerprint, call, _version.__version__, _library_digest(),
                  np.__version__, sys.version, _pass_settings(), _optional_imports()])


def persistable(injected):
    """Whether a generated module's injected namespace can go to disk: plain arrays with no
    Python objects inside. A custom primitive's function or a namedtuple class would have to
    be pickled, and unpickling runs code: such modules stay in memory."""
    return all(type(v) is np.ndarray and not v.dtype.hasobject and str(k).isidentifier()
               for k, v in injected.items())


def _hash(parts):
    digest = hashlib.sha256()
    for part in parts:
        data = part if isinstance(part, bytes) else _loose(part).encode()
        digest.update(len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()


def _pass_settings():
    """What decides which passes run, and every AUTODIFFGEN_* setting but those known to
    leave the emitted code alone: an unknown one might not."""
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith("AUTODIFFGEN_")
                 and not k.startswith("AUTODIFFGEN_CACHE") and k not in _NOT_IN_CODE)
    pipeline = tuple(p.__name__ for p in passes.PIPELINE)
    return repr((passes.ENABLED, pipeline, passes.MAX_ROUNDS, env))


def _optional_imports():
    """Which optional modules the emitted code may import are installed: code written where
    numexpr is would fail to import where it is not (a sys.modules entry of None, as a test
    or a sandbox sets, counts as missing)."""
    return repr([(name, _importable(name)) for name in _OPTIONAL] + [_astor_version()])


@functools.cache
def _astor_version():
    """astor writes the emitted code's text (and the trace runs it)."""
    import astor
    return getattr(astor, "__version__", None)


def _importable(name):
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


@functools.cache
def _library_digest():
    """The bytes of autodiffgen's own source: an edited checkout emits other code under the
    same version number."""
    root = pathlib.Path(__file__).parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _canon(x):
    """A text for `x` that is the same in every process, or _Unstable."""
    kind = type(x)
    if x is None or x is Ellipsis or kind in (bool, int, str):
        return f"{kind.__name__}:{x!r}"
    if kind is float:
        return "float:" + x.hex()
    if kind is complex:
        return f"complex:{x.real.hex()},{x.imag.hex()}"
    if kind is bytes:
        return "bytes:" + x.hex()
    if kind is tuple:
        return "(" + ",".join(map(_canon, x)) + ")"
    if kind is frozenset:
        return "frozenset(" + ",".join(sorted(map(_canon, x))) + ")"
    if isinstance(x, np.dtype):
        return f"dtype:{x.str}:{x.descr!r}"
    if isinstance(x, type):
        return "type:" + _type_name(x)
    if isinstance(x, enum.Enum):
        return f"enum:{_type_name(kind)}.{x.name}"
    if kind is types.FunctionType:
        return "function:" + fingerprint(x)
    raise _Unstable(x)


def _type_name(t):
    """module.qualname; a namedtuple's fields too. A class local to a function (other than a
    namedtuple) has no name that says which class it is: _Unstable."""
    fields = getattr(t, "_fields", None)
    if "<locals>" in t.__qualname__ and not (issubclass(t, tuple) and fields is not None):
        raise _Unstable(t)
    return f"{t.__module__}.{t.__qualname__}" + (repr(tuple(fields)) if fields else "")


def _loose(x):
    """_canon where it can; otherwise a stable text that still tells kinds apart (an array
    by shape and dtype, an object by its type): for code constants and default values,
    which the signature key sees again when they are used."""
    try:
        return _canon(x)
    except _Unstable:
        pass
    if isinstance(x, np.ndarray):
        return f"array:{x.shape}:{x.dtype.str}"
    if isinstance(x, (tuple, list)):
        return f"{type(x).__name__}[" + ",".join(map(_loose, x)) + "]"
    if isinstance(x, dict):
        return "dict{" + ",".join(f"{_loose(k)}:{_loose(v)}" for k, v in x.items()) + "}"
    return f"object:{type(x).__module__}.{type(x).__qualname__}"


class _Walk:
    """One walk over a function and what it calls. `seen` numbers each function visited, so
    a cycle (f calls g calls f) ends, hashed as a back reference."""

    def __init__(self, update):
        self.update = update
        self.seen = {}

    def feed(self, *parts):
        for part in parts:
            data = part if isinstance(part, bytes) else _loose(part).encode()
            self.update(len(data).to_bytes(8, "big") + data)

    def function(self, fun):
        if isinstance(fun, functools.partial):
            self.feed("partial", fun.args, fun.keywords)
            return self.function(fun.func)
        if not isinstance(fun, (types.FunctionType, types.MethodType)):  # a wrapper object
            text = repr(fun)  # e.g. a GradFunction's argnums, unless it is an address
            self.feed("wrapper", _loose(fun), "" if " at 0x" in text else text)
        fun = _unwrap(fun)
        if id(fun) in self.seen:
            return self.feed("seen", self.seen[id(fun)])
        self.seen[id(fun)] = len(self.seen)
        if not isinstance(fun, types.FunctionType):  # a builtin, a ufunc, a callable object
            self.feed("callable", _loose(fun), getattr(fun, "__qualname__", ""))
            call = _static_attr(type(fun), "__call__")
            if isinstance(call, types.FunctionType):
                self.function(call)
            return
        self.feed("function", fun.__module__, fun.__qualname__, fun.__defaults__,
                  fun.__kwdefaults__)
        if not _is_library(fun.__module__):
            self.code(fun.__code__)
            self.feed(_source_text(fun.__code__))
            self.references(fun)

    def code(self, co):
        self.feed("code", co.co_name, co.co_filename, co.co_firstlineno, co.co_argcount,
                  co.co_posonlyargcount, co.co_kwonlyargcount, co.co_flags, co.co_names,
                  co.co_varnames, co.co_freevars, co.co_cellvars, co.co_code, co.co_linetable)
        for const in co.co_consts:
            if isinstance(const, types.CodeType):
                self.code(const)
            else:
                self.feed(const)

    def references(self, fun):
        """Follow what `fun`'s code names: globals, closure cells and, on a global module or
        class, the attributes its code names too (`layers.dense(x)`)."""
        names = _names(fun.__code__)
        reached = [(f"global {n}", fun.__globals__.get(n)) for n in names]
        cells = zip(fun.__code__.co_freevars, fun.__closure__ or ())
        reached += [(f"closure {n}", _cell_contents(c)) for n, c in cells]
        for label, value in reached:
            if isinstance(value, (types.ModuleType, type)):
                for attr in names:
                    self.reach(f"{label}.{attr}", _static_attr(value, attr))
            else:
                self.reach(label, value)

    def reach(self, label, value):
        if isinstance(value, (types.FunctionType, types.MethodType, functools.partial)) \
                or callable(value) and hasattr(value, "__wrapped__"):
            self.feed(label)
            self.function(value)


def _unwrap(fun):
    """The Python function behind a bound method or a functools-style wrapper object."""
    for _ in range(100):  # a wrapper chain, not a cycle
        if isinstance(fun, (types.MethodType, staticmethod, classmethod)):
            fun = fun.__func__
        elif not isinstance(fun, types.FunctionType) and hasattr(fun, "__wrapped__"):
            fun = fun.__wrapped__
        else:
            break
    return fun


def _is_library(module):
    return (module or "").split(".")[0] in _LIBRARIES


def _names(code):
    """The global and attribute names of `code` and of the functions defined inside it."""
    names = dict.fromkeys(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names.update(dict.fromkeys(_names(const)))
    return list(names)


def _cell_contents(cell):
    try:
        return cell.cell_contents
    except ValueError:  # a cell not filled yet
        return None


def _static_attr(namespace, attr):
    """`namespace.attr` without running a module's __getattr__ or a descriptor."""
    if isinstance(namespace, types.ModuleType):
        return None if _is_library(namespace.__name__) else vars(namespace).get(attr)
    if _is_library(namespace.__module__):
        return None
    return next((vars(k)[attr] for k in namespace.__mro__ if attr in vars(k)), None)


def _source_text(code):
    """The lines the function spans, which the generated code's comments quote."""
    last = max((line for _, _, line in code.co_lines() if line), default=code.co_firstlineno)
    return "".join(linecache.getlines(code.co_filename)[code.co_firstlineno - 1:last])


# ---------------------------------------------------------------- the directory

def enable(path=None, max_bytes=MAX_BYTES):
    """Keep generated code in `path` (default ~/.cache/autodiffgen, or under $XDG_CACHE_HOME),
    created 0700 if missing. Raises CacheDirError if the directory is not safe to use.
    Returns the directory."""
    global _explicit, _path, _max_bytes
    path = _resolve(path) if path is not None else default_directory()
    with _open_dir(path):
        pass
    _explicit, _path, _max_bytes = True, path, max_bytes
    return path


def disable():
    """No disk cache from now on, whatever AUTODIFFGEN_CACHE_DIR says."""
    global _explicit, _path
    _explicit, _path = True, None


def directory():
    """The cache directory in use, or None when the disk cache is off (the default)."""
    if _explicit:
        return _path
    env = os.environ.get(ENV_DIR)
    return _resolve(env) if env else None


def enabled():
    return directory() is not None


def default_directory():
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):  # the XDG spec: a relative value is ignored
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "autodiffgen")


def _resolve(path):
    return os.path.abspath(os.path.expanduser(os.fspath(path)))


def _open_dir(path):
    """Create the directory (0700) if missing, then open and check it."""
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as e:
        raise CacheDirError(f"cannot create the autodiffgen disk cache directory {path}: "
                            f"{e.strerror}") from None
    return _Dir(path)


def _check_dir(st, path):
    problem = None
    if stat.S_ISLNK(st.st_mode):
        problem = "it is a symbolic link; point it at a real directory instead"
    elif not stat.S_ISDIR(st.st_mode):
        problem = "it is not a directory"
    elif _OWNERS and st.st_uid != os.geteuid():
        problem = f"it is owned by uid {st.st_uid}, not by you (uid {os.geteuid()})"
    elif _OWNERS and stat.S_IMODE(st.st_mode) != 0o700:
        problem = (f"its mode is {stat.S_IMODE(st.st_mode):04o}, not 0700, so others could "
                   f"change the code it holds; run `chmod 700 {path}`")
    if problem:
        raise CacheDirError(f"refusing the autodiffgen disk cache directory {path}: {problem}")


def _file_problem(st, private):
    if not stat.S_ISREG(st.st_mode):
        return "it is not a regular file"
    if _OWNERS and st.st_uid != os.geteuid():
        return f"it is owned by uid {st.st_uid}, not by you"
    if _OWNERS and private and st.st_mode & 0o077:
        return f"its mode is {stat.S_IMODE(st.st_mode):04o}: others may read it"
    return None


class _Dir:
    """The checked directory, for one operation. Where the OS allows, every name is resolved
    against the directory's descriptor, so swapping the path for a link midway changes
    nothing; elsewhere against the path, after lstat says it is no link."""

    def __init__(self, path):
        self.path, self.fd = path, None
        _check_dir(os.lstat(path), path)
        if _DIR_FD:
            self.fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW | _FLAGS)
            try:
                _check_dir(os.fstat(self.fd), path)
            except CacheDirError:
                self.close()
                raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def name(self, name):
        return os.path.join(self.path, name)

    def _at(self, name):
        return (name, {"dir_fd": self.fd}) if self.fd is not None else (self.name(name), {})

    def open(self, name, flags, mode=0o600):
        if not _NOFOLLOW and os.path.islink(self.name(name)):  # no O_NOFOLLOW: lstat first
            raise OSError(errno.ELOOP, "a symbolic link", self.name(name))
        path, at = self._at(name)
        return os.open(path, flags | _NOFOLLOW | _FLAGS, mode, **at)

    def replace(self, src, dst):
        if self.fd is None:
            return os.replace(self.name(src), self.name(dst))
        os.replace(src, dst, src_dir_fd=self.fd, dst_dir_fd=self.fd)

    def link(self, src, dst):
        if self.fd is None:
            return os.link(self.name(src), self.name(dst))
        os.link(src, dst, src_dir_fd=self.fd, dst_dir_fd=self.fd)

    def unlink(self, name):
        path, at = self._at(name)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path, **at)

    def lstat(self, name):
        path, at = self._at(name)
        return os.stat(path, follow_symlinks=False, **at)

    def touch(self, name):
        """Mark an entry as used, for the size bound."""
        path, at = self._at(name)
        with contextlib.suppress(OSError, NotImplementedError):
            os.utime(path, follow_symlinks=False, **at)

    def listdir(self):
        return os.listdir(self.fd if self.fd is not None else self.path)

    def sync(self):
        """Make a rename durable (POSIX: fsync the directory)."""
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.fsync(self.fd)


def _read(d, name, private=False):
    """The bytes of a regular file of ours; _Rejected if it is a link or anything else."""
    try:
        fd = d.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO never blocks
    except OSError as e:
        if e.errno in _LINK_ERRNOS:
            raise _Rejected("it is a symbolic link, which the cache never follows") from None
        raise
    with open(fd, "rb") as f:
        problem = _file_problem(os.fstat(fd), private)
        if problem:
            raise _Rejected(problem)
        return f.read()


def _write(d, name, data):
    """A new private file, fsync'd; returns its (temporary) name."""
    tmp = f"{_TMP}{name}.{os.getpid()}.{secrets.token_hex(4)}"
    fd = d.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with open(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        d.unlink(tmp)
        raise
    return tmp


def _replace(d, name, data):
    """Write `name` atomically: readers see the old file or the new one."""
    tmp = _write(d, name, data)
    try:
        d.replace(tmp, name)
    except BaseException:
        d.unlink(tmp)
        raise
    d.sync()


def _secret(d):
    """The per-user key that signs entries, created on first use. A key file that is a link,
    someone else's or readable by others is replaced (and reported): entries signed with it
    are then misses."""
    try:
        data = _read(d, _SECRET, private=True)
        if len(data) == 32:
            return data
        raise _Rejected(f"it holds {len(data)} bytes, not 32")
    except FileNotFoundError:
        _new_secret(d, replace=False)
    except _Rejected as e:
        _report(d.name(_SECRET), f"ignoring {d.name(_SECRET)}: {e}; a new key replaces it")
        _new_secret(d, replace=True)
    return _read(d, _SECRET, private=True)


def _new_secret(d, replace):
    """Concurrent first uses agree on one key: it is linked into place, which fails if
    another process was first."""
    tmp = _write(d, _SECRET, secrets.token_bytes(32))
    try:
        if replace:
            d.replace(tmp, _SECRET)
        else:
            with contextlib.suppress(FileExistsError):
                d.link(tmp, _SECRET)
    finally:
        d.unlink(tmp)


def _report(path, message):
    """Warn once per file and process: a cache problem costs a trace, never a failure."""
    if path not in _reported:
        _reported.add(path)
        warnings.warn(f"autodiffgen disk cache: {message}", DiskCacheWarning, stacklevel=3)


# ---------------------------------------------------------------- entries

def load(key):
    """The variants stored under `key`, or None (disk cache off, no entry, or an entry that
    is not exactly what this library wrote, which is reported once)."""
    path = directory()
    if path is None:
        return None
    name = _entry_name(key)
    try:
        with _open_dir(path) as d:
            blob = _read(d, name)
            variants = _unseal(blob, key, _secret(d))
            d.touch(name)
            return variants
    except FileNotFoundError:
        return None
    except _Rejected as e:
        _report(os.path.join(path, name),
                f"ignoring {os.path.join(path, name)}: {e}; it will be regenerated")
    except CacheDirError as e:
        _report(path, f"{e}; running without the disk cache")
    except OSError as e:
        _report(os.path.join(path, name), f"cannot read {os.path.join(path, name)}: {e}")
    return None


def store(key, variants):
    """Write the variants of `key` (each (source, arrays[, name, locs])), replacing what was
    there; True if written. Raises ValueError for a namespace that is not `persistable`."""
    path = directory()
    if path is None:
        return False
    name = _entry_name(key)
    variants = [_variant(v) for v in variants]
    try:
        with _open_dir(path) as d:
            _replace(d, name, _seal(key, variants, _secret(d)))
            _prune(d, keep=name)
        return True
    except CacheDirError as e:
        _report(path, f"{e}; running without the disk cache")
    except OSError as e:
        _report(os.path.join(path, name), f"cannot write {os.path.join(path, name)}: {e}")
    return False


def _entry_name(key):
    if not isinstance(key, str) or not _KEY.match(key):
        raise ValueError(f"not a disk cache key (64 hex digits from entry_key): {key!r}")
    return key + _SUFFIX


def _variant(v):
    v = Variant(*v)
    if not isinstance(v.source, str) or not isinstance(v.arrays, dict) \
            or not persistable(v.arrays):
        raise ValueError("a disk cache variant is (source, {name: plain ndarray}, ...); "
                         "check persistable(injected) before storing")
    json.dumps([v.handovers, v.deps])  # TypeError if they are not JSON data
    return v


def _mac(secret, key, payload):
    return hmac.new(secret, _FORMAT + key.encode() + payload, hashlib.sha256).hexdigest()


def _seal(key, variants, secret):
    """FORMAT, the HMAC of key and payload, then the payload: a JSON head (sources, names,
    line maps, where each array is) and the arrays as .npy bytes."""
    head, blobs, offset = [], [], 0
    for v in variants:
        arrays = []
        for name, array in v.arrays.items():
            buffer = io.BytesIO()
            np.save(buffer, array, allow_pickle=False)
            arrays.append([name, offset, buffer.tell()])
            blobs.append(buffer.getvalue())
            offset += buffer.tell()
        locs = [[line, file, n] for line, (file, n) in sorted((v.locs or {}).items())]
        head.append({"source": v.source, "name": v.name, "locs": locs, "arrays": arrays,
                     "handovers": v.handovers or {}, "deps": v.deps})
    text = json.dumps(head, sort_keys=True).encode()
    payload = len(text).to_bytes(8, "big") + text + b"".join(blobs)
    return _FORMAT + _mac(secret, key, payload).encode() + b"\n" + payload


def _unseal(blob, key, secret):
    """The variants in `blob`, parsed only once its HMAC says this library wrote it."""
    end = len(_FORMAT) + 64
    if not blob.startswith(_FORMAT) or blob[end:end + 1] != b"\n":
        raise _Rejected("it is not an entry this library wrote (truncated or changed)")
    payload = blob[end + 1:]
    if not hmac.compare_digest(blob[len(_FORMAT):end], _mac(secret, key, payload).encode()):
        raise _Rejected("its content is not what this library wrote (changed, truncated, "
                        "or written under another key)")
    try:
        return _parse(payload)
    except (ValueError, KeyError, TypeError) as e:  # signed by us, yet unreadable: a bug
        raise _Rejected(f"it cannot be read ({e})") from None


def _parse(payload):
    size = int.from_bytes(payload[:8], "big")
    body = memoryview(payload)[8 + size:]
    variants = []
    for v in json.loads(payload[8:8 + size]):
        arrays = {name: np.load(io.BytesIO(body[at:at + n]), allow_pickle=False)
                  for name, at, n in v["arrays"]}
        locs = {line: (file, n) for line, file, n in v["locs"]}
        variants.append(Variant(v["source"], arrays, v["name"], locs, v["handovers"],
                                v["deps"]))
    return variants


def _prune(d, keep):
    """Drop the least recently used entries past the size bound, and temporary files that a
    crashed writer left behind an hour ago or more."""
    entries, total, now = [], 0, time.time()
    for name in d.listdir():
        with contextlib.suppress(FileNotFoundError):
            st = d.lstat(name)
            if not stat.S_ISREG(st.st_mode):
                continue
            if name.startswith(_TMP) and now - st.st_mtime > 3600:
                d.unlink(name)
            elif name.endswith(_SUFFIX):
                entries.append((st.st_mtime, name, st.st_size))
                total += st.st_size
    for _, name, size in sorted(entries):
        if total <= _max_bytes:
            break
        if name != keep:
            d.unlink(name)
            total -= size
