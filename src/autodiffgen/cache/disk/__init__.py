"""The opt-in disk store of generated code, in three parts: what an entry is keyed on
(key.py; reads.py, with trace/executed.py, for what a trace ran and read), the signed entry format
and its store (store.py), and file safety (files.py). entry.py joins them for one function.
The public face is autodiffgen.diskcache. Nothing is imported here (see cache/__init__).
"""
