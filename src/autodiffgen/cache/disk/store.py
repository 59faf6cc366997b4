"""The disk store: signed entries of generated code, one file per key, least recently used
dropped past a size bound (opt-in).

    AUTODIFFGEN_CACHE_DIR=~/.cache/autodiffgen python train.py    # or diskcache.enable()

An entry is one file, `<key>.adg` (the key: key.entry_key). It holds the key's variants of
generated code (source, injected arrays, entry-point name, line map, and as JSON data the
objects of the loading process the code receives and what the trace read: entry.split and
reads.manifest); `load` hands them back, the caller checks them (reads.check,
entry.restore) and compiles them. A cache problem costs a trace, never a failure: it is
reported once (a DiskCacheWarning naming the file) and treated as a miss.

- an entry carries an HMAC-SHA256, under a secret key file (0600) kept in the directory,
  over its key and content, checked before a byte of it is parsed: a changed, truncated or
  renamed file is a miss, and the caller's regenerated code overwrites it;
- arrays are stored as .npy bytes and read with allow_pickle=False; a namespace holding
  anything but plain arrays (`persistable`) is refused: the caller keeps such code in memory.
How the directory and its files are opened and written safely: files.py.
"""

import contextlib
import hashlib
import hmac
import io
import json
import os
import re
import secrets
import stat
import time
import warnings
from collections import namedtuple

import numpy as np

from . import files

ENV_DIR = "AUTODIFFGEN_CACHE_DIR"
MAX_BYTES = 512 * 2**20  # the default size bound: least recently used entries go first
FORMAT = b"autodiffgen disk cache 3\n"  # the first line of every entry (and part of its key)
Variant = namedtuple("Variant", "source arrays name locs handovers deps guarded",
                     defaults=(None, None, None, None, True))
Variant.__doc__ = """One generated module: its source, the arrays its namespace receives,
the name of the function to call, {generated line: (user file, line)}, the objects of the
loading process it receives ({name: description}, see entry.split) and what the trace
read ({"names": [...], "paths": [[path, text]]}, see reads.manifest): JSON data; whether
the code can refuse a call (guarded: cache/guarded.py), so a loading process need not
read its text to know."""

_SUFFIX = ".adg"
_SECRET = "hmac.key"
_KEY = re.compile(r"[0-9a-f]{64}\Z")

_explicit, _path, _max_bytes = False, None, MAX_BYTES
_reported = set()


class DiskCacheWarning(UserWarning):
    """A cache entry or directory was ignored; the code is traced again instead."""


# ---------------------------------------------------------------- where

def enable(path=None, max_bytes=MAX_BYTES):
    """Keep generated code in `path` (default ~/.cache/autodiffgen, or under $XDG_CACHE_HOME),
    created 0700 if missing. Raises CacheDirError if the directory is not safe to use.
    Returns the directory."""
    global _explicit, _path, _max_bytes
    path = files.resolve(path) if path is not None else default_directory()
    with files.open_dir(path):
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
    return files.resolve(env) if env else None


def enabled():
    return directory() is not None


def default_directory():
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):  # the XDG spec: a relative value is ignored
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "autodiffgen")


def _secret(d):
    """The per-user key that signs entries, created on first use. A key file that is a link,
    someone else's or readable by others is replaced (and reported): entries signed with it
    are then misses."""
    try:
        data = files.read(d, _SECRET, private=True)
        if len(data) == 32:
            return data
        raise files.Rejected(f"it holds {len(data)} bytes, not 32")
    except FileNotFoundError:
        _new_secret(d, replace=False)
    except files.Rejected as e:
        _report(d.name(_SECRET), f"ignoring {d.name(_SECRET)}: {e}; a new key replaces it")
        _new_secret(d, replace=True)
    return files.read(d, _SECRET, private=True)


def _new_secret(d, replace):
    """Concurrent first uses agree on one key: it is linked into place, which fails if
    another process was first."""
    tmp = files.write(d, _SECRET, secrets.token_bytes(32))
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
        with files.open_dir(path) as d:
            blob = files.read(d, name)
            variants = _unseal(blob, key, _secret(d))
            d.touch(name)
            return variants
    except FileNotFoundError:
        return None
    except files.Rejected as e:
        _report(os.path.join(path, name),
                f"ignoring {os.path.join(path, name)}: {e}; it will be regenerated")
    except files.CacheDirError as e:
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
        with files.open_dir(path) as d:
            files.replace(d, name, _seal(key, variants, _secret(d)))
            _prune(d, keep=name)
        return True
    except files.CacheDirError as e:
        _report(path, f"{e}; running without the disk cache")
    except OSError as e:
        _report(os.path.join(path, name), f"cannot write {os.path.join(path, name)}: {e}")
    return False


def persistable(injected):
    """Whether a generated module's injected namespace can go to disk: plain arrays with no
    Python objects inside. A custom primitive's function or a namedtuple class would have to
    be pickled, and unpickling runs code: such modules stay in memory."""
    return all(type(v) is np.ndarray and not v.dtype.hasobject and str(k).isidentifier()
               for k, v in injected.items())


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
    return hmac.new(secret, FORMAT + key.encode() + payload, hashlib.sha256).hexdigest()


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
                     "handovers": v.handovers or {}, "deps": v.deps,
                     "guarded": bool(v.guarded)})
    text = json.dumps(head, sort_keys=True).encode()
    payload = len(text).to_bytes(8, "big") + text + b"".join(blobs)
    return FORMAT + _mac(secret, key, payload).encode() + b"\n" + payload


def _unseal(blob, key, secret):
    """The variants in `blob`, parsed only once its HMAC says this library wrote it."""
    end = len(FORMAT) + 64
    if not blob.startswith(FORMAT) or blob[end:end + 1] != b"\n":
        raise files.Rejected("it is not an entry this library wrote (truncated or changed)")
    payload = blob[end + 1:]
    if not hmac.compare_digest(blob[len(FORMAT):end], _mac(secret, key, payload).encode()):
        raise files.Rejected("its content is not what this library wrote (changed, truncated, "
                        "or written under another key)")
    try:
        return _parse(payload)
    except (ValueError, KeyError, TypeError) as e:  # signed by us, yet unreadable: a bug
        raise files.Rejected(f"it cannot be read ({e})") from None


def _parse(payload):
    size = int.from_bytes(payload[:8], "big")
    body = memoryview(payload)[8 + size:]
    variants = []
    for v in json.loads(payload[8:8 + size]):
        arrays = {name: np.load(io.BytesIO(body[at:at + n]), allow_pickle=False)
                  for name, at, n in v["arrays"]}
        locs = {line: (file, n) for line, file, n in v["locs"]}
        variants.append(Variant(v["source"], arrays, v["name"], locs, v["handovers"],
                                v["deps"], v["guarded"]))
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
            if name.startswith(files.TMP) and now - st.st_mtime > 3600:
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
