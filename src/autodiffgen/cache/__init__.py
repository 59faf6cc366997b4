"""The cache stage: a call's signature key in, the generated function that serves it out.

    keys.py      signature keys, CacheInfo
    dispatch.py  per signature, generated functions that decide a call without its key:
                 `same` (the last call's signature again?), `key` (by exact types)
    entries.py   one function's entries: LRU bound, guard variants (Variants, grow),
                 misses made from disk, a polymorphic function, or the compile path
    shared.py    batch-polymorphic sharing: one function for every batch size it serves
    loader.py    generated source -> a function that lives as long as it is used
    view.py      one grad(f) object's counts over the entries every grad(f) shares
    disk/        the opt-in disk store: key.py (what an entry is keyed on), reads.py
                 (what a trace ran, trace/executed.py, and read), store.py (signed entries, LRU on
                 disk), files.py (private directory, no links followed, atomic writes),
                 entry.py (a function's entries: a trace to an entry and back)

Nothing is imported here: keys.py imports the trace stage, so this package must load without its modules. Import them by name.
"""
