"""The persistent disk cache (opt-in), public face: generated modules kept on disk, so that a
new process skips tracing.

    AUTODIFFGEN_CACHE_DIR=~/.cache/autodiffgen python train.py    # or diskcache.enable()

The store lives in cache/disk/: what an entry is keyed on (key.py, reads.py), the signed
entries (store.py) and the safe directory I/O (files.py).
"""

from .cache.disk.files import CacheDirError
from .cache.disk.key import entry_key, fingerprint
from .cache.disk.store import (
    ENV_DIR,
    MAX_BYTES,
    DiskCacheWarning,
    Variant,
    default_directory,
    directory,
    disable,
    enable,
    enabled,
    load,
    persistable,
    store,
)

__all__ = ["ENV_DIR", "MAX_BYTES", "CacheDirError", "DiskCacheWarning", "Variant",
           "default_directory", "directory", "disable", "enable", "enabled", "entry_key",
           "fingerprint", "load", "persistable", "store"]
