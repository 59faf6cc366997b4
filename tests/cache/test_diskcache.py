"""The persistent disk cache: a private directory, signed entries, atomic writes, keys that
change with everything the generated code depends on, and a real second process."""

import hashlib
import json
import linecache
import os
import pathlib
import re
import stat
import subprocess
import sys
import textwrap
import types
import warnings
from collections import namedtuple

import numpy as np
import pytest

import autodiffgen
from autodiffgen import _version, diskcache, passes
from autodiffgen.cache.disk import files as disk_files
from autodiffgen.cache.disk import key as disk_key
from autodiffgen.cache.disk import reads, store
from autodiffgen.cache.keys import signature_key
from autodiffgen.diskcache import CacheDirError, DiskCacheWarning, Variant
from autodiffgen.trace import executed

KEY = hashlib.sha256(b"one").hexdigest()
OTHER = hashlib.sha256(b"two").hexdigest()
Point = namedtuple("Point", "x y")


@pytest.fixture(autouse=True)
def fresh_state(monkeypatch):
    """No test sees another's settings, reports or the user's environment."""
    monkeypatch.delenv(diskcache.ENV_DIR, raising=False)
    monkeypatch.setattr(store, "_explicit", False)
    monkeypatch.setattr(store, "_path", None)
    monkeypatch.setattr(store, "_max_bytes", diskcache.MAX_BYTES)
    monkeypatch.setattr(store, "_reported", set())


@pytest.fixture
def cache(tmp_path):
    return pathlib.Path(diskcache.enable(tmp_path / "cache"))


def variant(seed, size=1000):
    source = f"SEED = {seed}\n\n\ndef f_value_and_grad(x):\n    return x * {seed}, W\n"
    return Variant(source, {"W": np.full(size, float(seed))}, "f_value_and_grad",
                   {4: ("model.py", 12)})


def run_python(code, *args, env=None):
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *map(str, args)],
                         check=False, capture_output=True, text=True, timeout=120,
                         env={**os.environ, **(env or {})})
    assert out.returncode == 0, out.stderr
    return out.stdout


def no_warnings(call, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return call(*args)


# ---------------------------------------------------------------- on, off, where

def test_off_by_default():
    assert not diskcache.enabled() and diskcache.directory() is None
    assert diskcache.load(KEY) is None
    assert diskcache.store(KEY, [variant(1)]) is False


def test_env_var_turns_it_on_and_disable_turns_it_off(tmp_path, monkeypatch):
    monkeypatch.setenv(diskcache.ENV_DIR, str(tmp_path / "env"))
    assert diskcache.store(KEY, [variant(1)])
    assert stat.S_IMODE((tmp_path / "env").stat().st_mode) == 0o700
    assert diskcache.load(KEY)[0].source == variant(1).source
    diskcache.disable()
    assert diskcache.load(KEY) is None and not diskcache.enabled()


def test_directory_and_files_are_private_whatever_the_umask(tmp_path):
    old = os.umask(0)
    try:
        path = pathlib.Path(diskcache.enable(tmp_path / "a" / "cache"))
        diskcache.store(KEY, [variant(1)])
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o700
    for name in ("hmac.key", KEY + ".adg"):
        assert stat.S_IMODE((path / name).stat().st_mode) == 0o600


def test_default_directory_honors_xdg_cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert diskcache.enable() == str(tmp_path / "xdg" / "autodiffgen")
    assert (tmp_path / "xdg" / "autodiffgen").is_dir()
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert diskcache.default_directory() == str(tmp_path / "home" / ".cache" / "autodiffgen")


# ---------------------------------------------------------------- refusals

def test_refuses_a_symlinked_directory(tmp_path, monkeypatch):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(CacheDirError, match=re.escape(f"{tmp_path / 'link'}: it is a symbolic link")):
        diskcache.enable(tmp_path / "link")
    monkeypatch.setenv(diskcache.ENV_DIR, str(tmp_path / "link"))
    with pytest.warns(DiskCacheWarning, match="symbolic link.*without the disk cache"):
        assert diskcache.store(KEY, [variant(1)]) is False
    assert diskcache.load(KEY) is None
    assert list(real.iterdir()) == []


def test_refuses_a_directory_others_can_write(tmp_path):
    (tmp_path / "open").mkdir()
    (tmp_path / "open").chmod(0o755)
    with pytest.raises(CacheDirError, match="mode is 0755, not 0700.*chmod 700"):
        diskcache.enable(tmp_path / "open")


def test_refuses_a_directory_owned_by_someone_else(tmp_path, monkeypatch):
    (tmp_path / "theirs").mkdir(mode=0o700)
    uid = os.geteuid()
    monkeypatch.setattr(os, "geteuid", lambda: uid + 1)
    with pytest.raises(CacheDirError, match=f"owned by uid {uid}, not by you"):
        diskcache.enable(tmp_path / "theirs")


def test_a_directory_that_turns_unsafe_later_is_reported_and_skipped(cache):
    diskcache.store(KEY, [variant(1)])
    cache.chmod(0o777)
    with pytest.warns(DiskCacheWarning, match="mode is 0777"):
        assert diskcache.load(KEY) is None
    cache.chmod(0o700)


def test_a_symlinked_entry_is_never_followed(cache, tmp_path):
    diskcache.store(KEY, [variant(1)])
    outside = tmp_path / "outside.adg"
    (cache / f"{KEY}.adg").rename(outside)  # a valid entry, but outside the directory
    before = outside.read_bytes()
    (cache / f"{KEY}.adg").symlink_to(outside)
    with pytest.warns(DiskCacheWarning, match=re.escape(f"{cache / KEY}.adg: it is a symbolic link")):
        assert diskcache.load(KEY) is None
    assert diskcache.store(KEY, [variant(2)])  # regenerated: the link is replaced, not followed
    assert not (cache / f"{KEY}.adg").is_symlink()
    assert outside.read_bytes() == before
    assert no_warnings(diskcache.load, KEY)[0].source == variant(2).source


def test_a_fifo_in_place_of_an_entry_does_not_block(cache):
    os.mkfifo(cache / f"{KEY}.adg")
    with pytest.warns(DiskCacheWarning, match="not a regular file"):
        assert diskcache.load(KEY) is None


def test_a_symlinked_secret_is_replaced_and_never_trusted(cache, tmp_path):
    attacker = b"k" * 32
    (tmp_path / "their.key").write_bytes(attacker)
    (cache / "hmac.key").symlink_to(tmp_path / "their.key")
    (cache / f"{KEY}.adg").write_bytes(store._seal(KEY, [variant(666)], attacker))
    with pytest.warns(DiskCacheWarning) as record:
        assert diskcache.load(KEY) is None
    messages = " ".join(str(w.message) for w in record)
    assert "hmac.key: it is a symbolic link" in messages and f"{KEY}.adg" in messages
    assert not (cache / "hmac.key").is_symlink()
    assert (tmp_path / "their.key").read_bytes() == attacker


# ---------------------------------------------------------------- integrity

def test_round_trip_keeps_arrays_names_and_line_maps(cache):
    arrays = {"a": np.asfortranarray(np.arange(12.0, dtype=np.float32).reshape(3, 4)),
              "b": np.array(7, dtype=np.int64), "c": np.array([True, False]),
              "d": np.arange(10.0).astype(">f8")[::3], "e": np.zeros((0, 2))}
    first = Variant("def g(x):\n    return x\n", arrays, "g", {1: ("/m/model.py", 3)})
    diskcache.store(KEY, [first, variant(2)])
    loaded = no_warnings(diskcache.load, KEY)
    assert [v.source for v in loaded] == [first.source, variant(2).source]
    assert loaded[0].name == "g" and loaded[0].locs == {1: ("/m/model.py", 3)}
    for name, array in arrays.items():
        got = loaded[0].arrays[name]
        assert got.dtype == array.dtype and got.shape == array.shape
        np.testing.assert_array_equal(got, array)
    np.testing.assert_array_equal(loaded[1].arrays["W"], variant(2).arrays["W"])


def test_a_tampered_source_is_reported_once_and_regenerated(cache):
    diskcache.store(KEY, [variant(2)])
    path = cache / f"{KEY}.adg"
    data = path.read_bytes()
    assert data.count(b"x * 2") == 1
    path.write_bytes(data.replace(b"x * 2", b"x * 3"))
    with pytest.warns(DiskCacheWarning, match=re.escape(f"{path}: its content is not what")):
        assert diskcache.load(KEY) is None
    assert no_warnings(diskcache.load, KEY) is None  # once per file and process
    diskcache.store(KEY, [variant(2)])
    assert no_warnings(diskcache.load, KEY)[0].source == variant(2).source


def test_a_tampered_array_is_rejected(cache):
    diskcache.store(KEY, [variant(2)])
    path = cache / f"{KEY}.adg"
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    with pytest.warns(DiskCacheWarning, match=re.escape(str(path))):
        assert diskcache.load(KEY) is None


@pytest.mark.parametrize("keep", [0, 10, 60, 0.5, -1])
def test_a_truncated_entry_is_ignored(cache, keep):
    diskcache.store(KEY, [variant(2)])
    path = cache / f"{KEY}.adg"
    data = path.read_bytes()
    path.write_bytes(data[:int(len(data) * keep) if isinstance(keep, float) else keep])
    with pytest.warns(DiskCacheWarning, match=re.escape(str(path))):
        assert diskcache.load(KEY) is None


def test_an_entry_copied_under_another_key_is_rejected(cache):
    diskcache.store(KEY, [variant(2)])
    (cache / f"{OTHER}.adg").write_bytes((cache / f"{KEY}.adg").read_bytes())
    with pytest.warns(DiskCacheWarning, match="written under another key"):
        assert diskcache.load(OTHER) is None


def test_entries_are_only_valid_under_the_secret_they_were_signed_with(cache):
    diskcache.store(KEY, [variant(2)])
    (cache / "hmac.key").unlink()
    with pytest.warns(DiskCacheWarning, match=f"{KEY}.adg"):
        assert diskcache.load(KEY) is None


def test_a_process_that_loses_the_race_to_create_the_secret_uses_the_winners(cache,
                                                                               monkeypatch):
    diskcache.store(KEY, [variant(2)])
    read, raced = disk_files.read, []

    def late(d, name, private=False):  # as if another process created it just after we looked
        if name == "hmac.key" and not raced:
            raced.append(name)
            raise FileNotFoundError(name)
        return read(d, name, private)
    monkeypatch.setattr(disk_files, "read", late)
    assert no_warnings(diskcache.load, KEY)[0].source == variant(2).source
    assert raced


def test_only_plain_arrays_are_persisted(cache):
    assert diskcache.persistable({"W": np.ones(3), "i": np.arange(2)})
    assert diskcache.persistable({})
    assert not diskcache.persistable({"fn": np.sin})
    assert not diskcache.persistable({"P": Point})
    assert not diskcache.persistable({"o": np.array([None, 1], dtype=object)})
    assert not diskcache.persistable({"m": np.ma.masked_array([1.0])})
    with pytest.raises(ValueError, match="persistable"):
        diskcache.store(KEY, [("def f(): pass\n", {"fn": np.sin}, "f")])
    with pytest.raises(ValueError, match="not a disk cache key"):
        diskcache.load("../../etc/passwd")


def test_least_recently_used_entries_go_past_the_size_bound(tmp_path):
    path = pathlib.Path(diskcache.enable(tmp_path / "c", max_bytes=250_000))
    keys = [hashlib.sha256(bytes([i])).hexdigest() for i in range(3)]
    for age, key in zip((100, 50), keys):
        diskcache.store(key, [variant(1, size=10_000)])  # about 80 kB each
        os.utime(path / f"{key}.adg", (1e9 - age, 1e9 - age))
    assert diskcache.load(keys[0]) is not None  # used: now the most recent
    diskcache.store(keys[2], [variant(1, size=15_000)])
    assert sorted(p.name for p in path.glob("*.adg")) == sorted(f"{k}.adg" for k in
                                                                  (keys[0], keys[2]))


def test_temporary_files_of_crashed_writers_are_cleaned_up(cache):
    (cache / ".tmp-old").write_bytes(b"x")
    os.utime(cache / ".tmp-old", (1e9, 1e9))
    (cache / ".tmp-young").write_bytes(b"x")
    diskcache.store(KEY, [variant(1)])
    assert not (cache / ".tmp-old").exists() and (cache / ".tmp-young").exists()


def test_without_o_nofollow_or_dir_fd_links_are_still_refused(cache, tmp_path, monkeypatch):
    monkeypatch.setattr(disk_files, "_NOFOLLOW", 0)
    monkeypatch.setattr(disk_files, "_DIR_FD", False)
    diskcache.store(KEY, [variant(3)])
    assert no_warnings(diskcache.load, KEY)[0].source == variant(3).source
    (cache / f"{KEY}.adg").rename(tmp_path / "outside.adg")
    (cache / f"{KEY}.adg").symlink_to(tmp_path / "outside.adg")
    with pytest.warns(DiskCacheWarning, match="symbolic link"):
        assert diskcache.load(KEY) is None


WRITER = """
    import sys, warnings
    import numpy as np
    from autodiffgen import diskcache
    warnings.simplefilter("error")
    diskcache.enable(sys.argv[1])
    seed, key = int(sys.argv[2]), sys.argv[3]
    for _ in range(25):
        diskcache.store(key, [diskcache.Variant(f"SEED = {seed}\\n", {"W": np.full(50_000, seed)})])
        got = diskcache.load(key)[0]
        other = int(got.source.split()[-1])
        assert (got.arrays["W"] == other).all(), "a mix of two writers' entries"
"""


def test_concurrent_writers_leave_a_valid_entry(tmp_path):
    path = tmp_path / "shared"
    writers = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(WRITER), str(path),
                                 str(seed), KEY], stderr=subprocess.PIPE, text=True)
               for seed in range(4)]
    for w in writers:
        assert w.wait(timeout=120) == 0, w.stderr.read()
        w.stderr.close()
    diskcache.enable(path)
    got = no_warnings(diskcache.load, KEY)[0]
    assert (got.arrays["W"] == int(got.source.split()[-1])).all()
    assert sorted(p.name for p in path.iterdir()) == sorted([f"{KEY}.adg", "hmac.key"])


# ---------------------------------------------------------------- keys

def module(tmp_path, source, name="model"):
    """`source` run as the module `name` from tmp_path/name.py, as an import would."""
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(source))
    linecache.checkcache(str(path))
    namespace = {"__name__": name, "np": np}
    exec(compile(path.read_text(), str(path), "exec"), namespace)  # noqa: S102  our test
    return types.SimpleNamespace(**namespace)


def fp(tmp_path, source, name="f"):
    return diskcache.fingerprint(getattr(module(tmp_path, source), name))


HELPER = """
    def helper(x):
        return x * 2

    def f(x):
        return helper(x) + 1
"""


def test_fingerprint_is_the_same_for_the_same_code(tmp_path):
    assert fp(tmp_path, HELPER) == fp(tmp_path, HELPER)


@pytest.mark.parametrize("before, after", [
    ("return helper(x) + 1", "return helper(x) + 2"),           # the function's code
    ("return x * 2", "return x * 3"),                           # a helper it calls
    ("def f(x):", "def f(x, k=1):"),                            # a default
    ("return helper(x) + 1", "return helper(x) + 1  # note"),   # a line the comments quote
    ("def f(x):", "def f(y):\n        x = y"),                  # a variable's name
])
def test_fingerprint_changes_with_what_the_generated_code_depends_on(tmp_path, before, after):
    assert HELPER.count(before) == 1
    assert fp(tmp_path, HELPER) != fp(tmp_path, HELPER.replace(before, after))


@pytest.mark.parametrize("source", [
    """
    import types
    layers = types.ModuleType("layers")
    exec("def dense(x):\\n    return x * SCALE", layers.__dict__)
    def f(x):
        return layers.dense(x)
    """,
    """
    class Model:
        @staticmethod
        def apply(x):
            return x * SCALE
    def f(x):
        return Model.apply(x)
    """,
    """
    def make(h):
        def f(x):
            return h(x)
        return f
    def h(x):
        return x * SCALE
    f = make(h)
    """,
    """
    def helper(x):
        return x * SCALE
    def f(x):
        return (lambda y: helper(y))(x)
    """,
    """
    def f(x):
        return g(x) if x > 0 else x
    def g(x):
        return f(x - SCALE)
    """,
    """
    import functools
    def scaled(x, k):
        return x * k * SCALE
    def f(x):
        return part(x)
    part = functools.partial(scaled, k=2)
    """,
    """
    class Layer:
        def __call__(self, x):
            return x * SCALE
    f = Layer()
    """,
], ids=["module attribute", "class attribute", "closure", "nested lambda", "cycle", "partial",
        "callable object"])
def test_helpers_reached_every_way_are_part_of_the_fingerprint(tmp_path, source):
    assert fp(tmp_path, source.replace("SCALE", "2")) != fp(tmp_path,
                                                            source.replace("SCALE", "3"))


def test_values_of_global_arrays_and_numbers_are_not_part_of_it(tmp_path):
    m = module(tmp_path, """
        W = np.ones(3)
        k = 2.0
        def f(x):
            return x @ W * k
    """)
    before = diskcache.fingerprint(m.f)
    m.f.__globals__["W"], m.f.__globals__["k"] = np.zeros(3), 5.0
    assert diskcache.fingerprint(m.f) == before


def test_a_grad_of_a_helper_is_followed_with_its_argnums(tmp_path):
    source = """
        import autodiffgen
        def loss(a, b):
            return a * b * SCALE
        d = autodiffgen.grad(loss, argnums=ARG)
        def f(x):
            return d(x, x)
    """
    variants = [source.replace("SCALE", s).replace("ARG", a)
                for s, a in (("2", "0"), ("3", "0"), ("2", "1"))]
    assert len({fp(tmp_path, v) for v in variants}) == 3


ARGS = (np.ones((3, 2), np.float32), 2.0, {"a": np.arange(3), "b": [0.5, None]}, "s",
        Point(np.ones(2), 3), -0.0, np.float64(1.0), float("nan"))
DIFF = (True, True, False, False, False, False, False, False)


def key_of(args=ARGS, diff=DIFF, extra=()):
    return diskcache.entry_key("0" * 64, signature_key(args, diff), extra)


def test_entry_key_changes_with_signature_version_settings_and_extra(monkeypatch):
    base = key_of()
    assert key_of() == base
    assert key_of(ARGS[:5] + (0.0,) + ARGS[6:]) == base        # a float is an input
    assert key_of(ARGS[:3] + ("t",) + ARGS[4:]) != base        # a string is static
    assert key_of((np.ones((3, 2), np.float64),) + ARGS[1:]) != base
    assert key_of(extra=("value_and_grad", (0, 1))) != base
    changes = [(_version, "__version__", "99.0"), (np, "__version__", "0.0.1"),
               (passes, "ENABLED", not passes.ENABLED),
               (disk_key, "_library_digest", lambda: "edited")]
    for owner, name, value in changes:
        with monkeypatch.context() as m:
            m.setattr(owner, name, value)
            assert key_of() != base, name
    monkeypatch.setenv(diskcache.ENV_DIR, "/elsewhere")  # where the cache is: same code
    monkeypatch.setenv("AUTODIFFGEN_EXPLAIN", "1")  # a log of retraces: same code
    assert key_of() == base
    monkeypatch.setenv("AUTODIFFGEN_SOMETHING_NEW", "1")
    assert key_of() != base


def test_a_signature_with_no_stable_text_is_not_persisted():
    class Local:
        pass
    LocalPoint = namedtuple("LocalPoint", "x")
    assert key_of((object(),), (False,)) is None
    assert key_of((Local,), (False,)) is None
    assert key_of((LocalPoint(np.ones(2)),), (False,)) is not None
    assert key_of((autodiffgen.grad,), (False,)) is not None  # a function: by its code
    assert key_of(extra=(object(),)) is None


def test_keys_are_the_same_in_another_process(tmp_path):
    m = module(tmp_path, HELPER)
    code = """
        import sys, numpy as np
        sys.path.insert(0, sys.argv[1])
        import model
        from autodiffgen import diskcache
        from autodiffgen.cache.keys import signature_key
        from test_diskcache import ARGS, DIFF
        fp = diskcache.fingerprint(model.f)
        print(fp, diskcache.entry_key(fp, signature_key(ARGS, DIFF), ("x", 1)))
    """
    path = os.pathsep.join(filter(None, [os.path.dirname(__file__), os.environ.get("PYTHONPATH")]))
    out = run_python(code, tmp_path, env={"PYTHONPATH": path}).split()
    mine = diskcache.fingerprint(m.f)
    assert out == [mine, diskcache.entry_key(mine, signature_key(ARGS, DIFF), ("x", 1))]


# ---------------------------------------------------------------- a second process

MODEL = """
    import numpy as np

    def f(x):
        W = np.sin(np.arange(900.0)).reshape(30, 30)  # too big to print: injected
        return np.sum(np.tanh(x @ W) ** 2)
"""

SECOND = """
    import sys, json
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    import model
    from autodiffgen import diskcache
    from autodiffgen.trace import tracer
    from autodiffgen.cache.keys import signature_key
    from autodiffgen.cache.loader import load
    tracer.trace = None  # a trace in this process would fail
    fp = diskcache.fingerprint(model.f)
    x = np.linspace(-1, 1, 60).reshape(2, 30)
    key = diskcache.entry_key(fp, signature_key((x,), (True,)))
    (source, arrays, name, locs, *_), = diskcache.load(key)
    value, (g,) = load(source, arrays, name, locs)(x)
    print(json.dumps([value, g.tolist()]))
"""


def test_a_second_process_runs_the_stored_code_without_tracing(cache, tmp_path):
    m = module(tmp_path, MODEL)
    x = np.linspace(-1, 1, 60).reshape(2, 30)
    compiled = autodiffgen.pipeline.compile(autodiffgen.GradFunction(m.f, (0,)).request((x,)))
    source, injected, graph, locs = (compiled.source, compiled.namespace, compiled.graph,
                                     compiled.locs)
    assert injected and diskcache.persistable(injected)
    key = diskcache.entry_key(diskcache.fingerprint(m.f), signature_key((x,), (True,)))
    assert diskcache.store(key, [(source, injected, graph.name, locs)])
    out = run_python(SECOND, tmp_path, env={diskcache.ENV_DIR: str(cache)})
    value, g = json.loads(out)
    expected_value, expected = autodiffgen.value_and_grad(m.f)(x)
    np.testing.assert_allclose(value, expected_value, rtol=1e-12)
    np.testing.assert_allclose(g, expected, rtol=1e-12)


THROUGH_GRAD = """
    import sys, json
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    import model
    import autodiffgen
    from autodiffgen.trace import tracer
    if sys.argv[2] == "second":
        tracer.trace = None  # a trace in this process would fail
    f = autodiffgen.value_and_grad(model.f)
    x = np.linspace(-1, 1, 60).reshape(2, 30)
    value, g = f(x)
    print(json.dumps([value, g.tolist(), f.cache_info().misses]))
"""


def test_grad_uses_the_disk_cache_in_a_new_process(cache, tmp_path):
    module(tmp_path, MODEL)
    env = {diskcache.ENV_DIR: str(cache)}
    first = json.loads(run_python(THROUGH_GRAD, tmp_path, "first", env=env))
    second = json.loads(run_python(THROUGH_GRAD, tmp_path, "second", env=env))
    assert first[2] == 1 and second[2] == 0  # the second process traced nothing
    np.testing.assert_allclose(second[0], first[0], rtol=1e-12)
    np.testing.assert_allclose(second[1], first[1], rtol=1e-12)


# ---------------------------------------------------------------- edits between processes

EDITS = {  # name: ({file: source}, {file: source after the edit}, {env after the edit})
    "env_string": ({"m_env_string.py": """
        import os
        import numpy as np
        MODE = os.environ.get("ADG_MODE", "square")
        def f(x):
            if MODE == "square":
                return np.sum(x ** 2)
            return np.sum(np.sin(x))
    """}, {}, {"ADG_MODE": "sine"}),
    "checkpoint_dict": ({"m_checkpoint.py": """
        import os
        import numpy as np
        PARAMS = dict(np.load(os.environ["ADG_CHECKPOINT"]))
        def f(x):
            return np.sum(np.tanh(x * PARAMS["w"]) + PARAMS["b"])
    """}, {}, {"ADG_CHECKPOINT": "b.npz"}),
    "import_in_body": ({"m_import_in_body.py": """
        import numpy as np
        def f(x):
            from h_import_in_body import helper
            return np.sum(helper(x))
    """, "h_import_in_body.py": """
        def helper(x):
            return x ** 2
    """}, {"h_import_in_body.py": """
        import numpy as np
        def helper(x):
            return np.sin(x) * 3
    """}, {}),
    "instance_method": ({"m_instance_method.py": """
        import numpy as np
        from c_instance_method import Layer
        layer = Layer()
        def f(x):
            return np.sum(layer.apply(x))
    """, "c_instance_method.py": """
        import numpy as np
        class Layer:
            def apply(self, x):
                return np.tanh(x) * 2
    """}, {"c_instance_method.py": """
        import numpy as np
        class Layer:
            def apply(self, x):
                return np.tanh(x) ** 2
    """}, {}),
    "package_function": ({"m_package_function.py": """
        import numpy as np
        import p_adg.sub
        def f(x):
            return np.sum(p_adg.sub.fn(x) ** 2)
    """, "p_adg/__init__.py": "", "p_adg/sub.py": """
        def fn(x):
            return x * 2
    """}, {"p_adg/sub.py": """
        def fn(x):
            return x * 5 + 1
    """}, {}),
    "config_attribute": ({"m_config_attribute.py": """
        import numpy as np
        from c_config_attribute import config
        def f(x):
            return np.sum(x * config.scale) ** 2
    """, "c_config_attribute.py": """
        import os
        class Config:
            pass
        config = Config()
        config.scale = float(os.environ.get("ADG_SCALE", "2.0"))
    """}, {}, {"ADG_SCALE": "3.0"}),
    "property_reading_a_global": ({"m_property.py": """
        import numpy as np
        from c_property import settings
        def f(x):
            return np.sum(x ** settings.power)
    """, "c_property.py": """
        import os
        POWER = int(os.environ.get("ADG_POWER", "2"))
        class Settings:
            @property
            def power(self):
                return POWER
        settings = Settings()
    """}, {}, {"ADG_POWER": "3"}),
    "slots_attribute": ({"m_slots.py": """
        import os
        import numpy as np
        class Config:
            __slots__ = ("kind",)
        config = Config()
        config.kind = os.environ.get("ADG_SLOT", "tanh")
        def f(x):
            return np.sum(np.tanh(x) if config.kind == "tanh" else np.exp(x))
    """}, {}, {"ADG_SLOT": "exp"}),
    "namedtuple_config": ({"m_namedtuple.py": """
        import os
        from collections import namedtuple
        import numpy as np
        Config = namedtuple("Config", "scale shift")
        CONFIG = Config(float(os.environ.get("ADG_NT", "2")), 1.0)
        def f(x):
            return np.sum(np.tanh(x * CONFIG.scale + CONFIG.shift))
    """}, {}, {"ADG_NT": "3"}),
    "closure_string": ({"m_closure_string.py": """
        import os
        import numpy as np
        def make(kind):
            def f(x):
                if kind == "square":
                    return np.sum(x ** 2)
                return np.sum(np.cos(x))
            return f
        f = make(os.environ.get("ADG_KIND", "square"))
    """}, {}, {"ADG_KIND": "cos"}),
    "global_tuple": ({"m_global_tuple.py": """
        import os
        import numpy as np
        COEFS = tuple(float(c) for c in os.environ.get("ADG_COEFS", "1,2").split(","))
        def f(x):
            return np.sum(sum(c * x ** (i + 1) for i, c in enumerate(COEFS)))
    """}, {}, {"ADG_COEFS": "1,2,3"}),
    "closure_array": ({"m_closure_array.py": """
        import os
        import numpy as np
        def make(w):
            def f(x):
                return np.sum(np.tanh(x * w))
            return f
        f = make(np.arange(1.0, 5.0) * float(os.environ.get("ADG_W", "1")))
    """}, {}, {"ADG_W": "2"}),
    "defaults": ({"m_defaults.py": """
        import os
        import numpy as np
        SCALE = float(os.environ.get("ADG_DEF", "2"))
        def f(x, scale=SCALE, mode=os.environ.get("ADG_DEFMODE", "tanh")):
            y = np.tanh(x) if mode == "tanh" else np.sin(x)
            return np.sum(y * scale)
    """}, {}, {"ADG_DEF": "3", "ADG_DEFMODE": "sin"}),
    "list_contents": ({"m_list_contents.py": """
        import os
        import numpy as np
        COEFS = [float(c) for c in os.environ.get("ADG_LIST", "1,2").split(",")]
        def f(x):
            return np.sum(x[0, :2] * np.asarray(COEFS)) + np.sum(x)
    """}, {}, {"ADG_LIST": "3,5"}),
    "argument_object": ({"m_argument_object.py": """
        import os
        import numpy as np
        class Model:
            def __init__(self):
                self.w = np.arange(1.0, 5.0) * float(os.environ.get("ADG_OBJ", "1"))
                self.kind = os.environ.get("ADG_OBJKIND", "tanh")
            def loss(self, x):
                y = np.tanh(x * self.w) if self.kind == "tanh" else np.sin(x * self.w)
                return np.sum(y)
        f = Model.loss
        PRE = (Model(),)
    """}, {}, {"ADG_OBJ": "2", "ADG_OBJKIND": "sin"}),
    "argument_object_class_edited": ({"m_argument_class.py": """
        import numpy as np
        from c_argument_class import Layer
        def f(layer, x):
            return np.sum(layer.apply(x))
        PRE = (Layer(),)
    """, "c_argument_class.py": """
        import numpy as np
        class Layer:
            w = np.arange(1.0, 5.0)
            def apply(self, x):
                return np.tanh(x * self.w)
    """}, {"c_argument_class.py": """
        import numpy as np
        class Layer:
            w = np.arange(1.0, 5.0)
            def apply(self, x):
                return np.sin(x * self.w) * 2
    """}, {}),
    "int_global": ({"m_int_global.py": """
        import os
        import numpy as np
        N = int(os.environ.get("ADG_N", "2"))
        def f(x):
            return np.sum(x ** N)
    """}, {}, {"ADG_N": "3"}),
}

RUNNER = """
    import json, logging, sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    import autodiffgen
    from autodiffgen import tape
    log = []
    handler = logging.Handler()
    handler.emit = lambda record: log.append(record.getMessage())
    logging.getLogger("autodiffgen").addHandler(handler)
    autodiffgen.explain_retraces()
    out = {}
    for name in sys.argv[2:]:
        module = __import__(name)
        pre = getattr(module, "PRE", ())  # arguments before x (an object with a method)
        f = autodiffgen.value_and_grad(module.f, argnums=len(pre))
        reference = tape.value_and_grad(module.f, argnums=len(pre))
        del log[:]
        calls = []
        for seed in range(2):
            x = np.random.default_rng(seed).uniform(0.5, 1.5, (3, 4))
            value, g = f(*pre, x)
            tape_value, tape_g = reference(*pre, x)
            calls.append([value, module.f(*pre, x), g.tolist(), tape_value, tape_g.tolist()])
        out[name] = {"misses": f.cache_info().misses, "calls": calls, "log": list(log)}
    print(json.dumps(out))
"""


def write_files(root, files):
    for name, source in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))


def run_modules(root, names, cache, env=()):
    env = {diskcache.ENV_DIR: str(cache), "ADG_CHECKPOINT": str(root / "a.npz"),
           "PYTHONDONTWRITEBYTECODE": "1", **dict(env)}  # an edit within a second: no .pyc
    return json.loads(run_python(RUNNER, root, *names, env=env))


def assert_right(result):
    for value, eager, g, tape_value, tape_g in result["calls"]:
        np.testing.assert_allclose(value, eager, rtol=1e-12)
        np.testing.assert_allclose(value, tape_value, rtol=1e-12)
        np.testing.assert_allclose(g, tape_g, rtol=1e-12)


@pytest.fixture(scope="module")
def edited(tmp_path_factory):
    """Three processes over every case of EDITS: one that writes the entries, one that
    reuses them unchanged, and one after each edit."""
    root = tmp_path_factory.mktemp("edits")
    cache = root / "cache"
    rng = np.random.default_rng(7)
    for checkpoint in ("a", "b"):
        np.savez(root / f"{checkpoint}.npz", w=rng.normal(size=4), b=rng.normal(size=4))
    names = [next(iter(files))[:-3] for files, _, _ in EDITS.values()]
    for files, _, _ in EDITS.values():
        write_files(root, files)
    first = run_modules(root, names, cache)
    again = run_modules(root, names, cache)
    env = {}
    for _, after, changes in EDITS.values():
        write_files(root, after)
        env.update(changes)
    env["ADG_CHECKPOINT"] = str(root / env["ADG_CHECKPOINT"])
    after = run_modules(root, names, cache, env)
    return {case: (first[n], again[n], after[n]) for case, n in zip(EDITS, names)}


@pytest.mark.parametrize("case", list(EDITS))
def test_a_second_process_reuses_the_entry_and_sees_every_edit(edited, case):
    first, again, after = edited[case]
    assert first["misses"] == 1
    for result in (first, again, after):
        assert_right(result)
    assert not np.allclose(after["calls"][0][0], first["calls"][0][0])  # the edit mattered
    if case in NOT_STORED:  # traced in each process, and the log says why
        for result in (first, again, after):
            assert result["misses"] == 1
            assert result["log"] == [(f"autodiffgen: disk cache, {NOT_STORED[case]}: not "
                                     "stored: an argument outside argnums has no text that "
                                     "is the same in every process (its repr is an address)")]
        return
    assert again["misses"] == 0, again["log"]  # reused: no trace
    assert first["log"] == ["autodiffgen: disk cache, f: no stored entry for this signature"]
    assert again["log"] == []
    if WHY[case] is None:
        assert after["log"] == [] and after["misses"] == 0, after["log"]
    else:
        assert len(after["log"]) == 1 and re.search(WHY[case], after["log"][0]), after["log"]


WHY = {  # what the explain log says in the process after the edit
    # a string, an int or a closure the generated code checks itself: its guard fails
    "env_string": "retracing f: guard failed: .*MODE is no longer 'square'",
    "checkpoint_dict": None,  # its arrays are read again by the code: no retrace
    "import_in_body": "stored code not used: h_import_in_body.helper is not",
    "instance_method": r"stored code not used: layer.__class__.apply is not",
    "package_function": "stored code not used: p_adg.sub.fn is not",
    "config_attribute": "stored code not used: config is not",
    "closure_string": "retracing f: guard failed: .*kind is no longer 'square'",
    "property_reading_a_global": None,  # an int as a value (x ** p): an input, read again
    "slots_attribute": "stored code not used: config is not",
    "namedtuple_config": "stored code not used: CONFIG is not",
    "global_tuple": "retracing f: guard failed: .*COEFS no longer has 2 entries",
    "closure_array": None,  # read again by the code at each call: no retrace at all
    "int_global": None,  # an int as a value (x ** N): an input, read again, no retrace
    "defaults": "f: no stored entry for this signature",  # defaults are in the fingerprint
    "list_contents": None,  # np.asarray of a list of floats: each float an input, read again
}
# an object passed as an argument outside argnums (self of a method): its reads are inputs
# and guards of the code as for a global, but the key of its signature would be its address
NOT_STORED = {"argument_object": "loss", "argument_object_class_edited": "f"}


NUMEXPR = """
    import json, logging, sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    if "missing" in sys.argv[2]:
        sys.modules["numexpr"] = None  # as if numexpr were not installed
    import autodiffgen
    from autodiffgen import diskcache, tape
    from autodiffgen.cache.disk import key
    fuse = sys.modules["autodiffgen.passes.fuse"]
    fuse.MIN_ELEMENTS[np.dtype(np.float64)] = (1, 1)  # fuse small arrays too
    if "same key" in sys.argv[2]:
        key._optional_imports = lambda: "the same everywhere"
    log = []
    handler = logging.Handler()
    handler.emit = lambda record: log.append(record.getMessage())
    logging.getLogger("autodiffgen").addHandler(handler)
    autodiffgen.explain_retraces()
    import m_numexpr
    f = autodiffgen.value_and_grad(m_numexpr.f)
    x = np.linspace(0.5, 1.5, 12)
    value, g = f(x)
    tape_value, tape_g = tape.value_and_grad(m_numexpr.f)(x)
    assert np.allclose(value, m_numexpr.f(x)) and np.allclose(value, tape_value)
    assert np.allclose(g, tape_g)
    print(json.dumps({"misses": f.cache_info().misses, "log": log,
                      "numexpr": "numexpr.evaluate" in f.source(x)}))
"""


@pytest.mark.skipif(not passes.ENABLED or disk_key._importable("numexpr") is False,
                    reason="needs numexpr and the passes")
@pytest.mark.parametrize("key", ["", "same key"])
def test_an_entry_that_imports_numexpr_is_not_used_where_numexpr_is_missing(cache, tmp_path, key):
    write_files(tmp_path, {"m_numexpr.py": """
        import numpy as np
        def f(x):
            return np.sum(((x * 2 + 1) * x - x / 3 + x * x) * 0.5 - x)
    """})
    env = {diskcache.ENV_DIR: str(cache)}
    first = json.loads(run_python(NUMEXPR, tmp_path, key, env=env))
    assert first["numexpr"] and first["misses"] == 1
    missing = json.loads(run_python(NUMEXPR, tmp_path, key + " missing", env=env))
    assert not missing["numexpr"] and missing["misses"] == 1  # traced again: no crash
    if key:  # the entry was found: its import failed, and the log says so
        assert "stored code not used: it imports numexpr, which is missing here" in \
            missing["log"][0]
    else:  # whether numexpr is installed is in the key: no entry for this process
        assert "no stored entry" in missing["log"][0]


SCRIPT = """
    import json, sys
    import numpy as np
    import autodiffgen
    N = 3
    SCALE = 0.5
    def f(x):
        return np.sum(x ** N) * SCALE
    g = autodiffgen.value_and_grad(f)
    x = np.linspace(0.5, 1.5, 5)
    value, grad = g(x)
    assert np.allclose(value, f(x)) and np.allclose(grad, 3 * x ** 2 * 0.5)
    print(g.cache_info().misses)
"""


def test_a_script_reading_module_level_numbers_is_persisted(cache, tmp_path):
    write_files(tmp_path, {"script.py": SCRIPT})
    env = {**os.environ, diskcache.ENV_DIR: str(cache)}
    runs = [subprocess.run([sys.executable, str(tmp_path / "script.py")], env=env, check=True,
                           capture_output=True, text=True, timeout=120).stdout
            for _ in range(2)]
    assert runs == ["1\n", "0\n"]  # the second run traced nothing


def explained(caplog, call):
    autodiffgen.explain_retraces()
    try:
        with caplog.at_level("WARNING", logger="autodiffgen"):
            call()
    finally:
        autodiffgen.explain_retraces(False)
    return [r.getMessage() for r in caplog.records]


def stored_entries(cache):
    return [p for p in cache.iterdir() if p.suffix == ".adg"]


def test_a_helper_s_closure_over_an_array_is_not_stored_and_the_log_says_why(cache, caplog):
    def make(w):
        def helper(x):
            return x * w
        return helper
    helper = make(np.ones(3))

    def f(x):
        return np.sum(helper(x))
    log = explained(caplog, lambda: autodiffgen.grad(f)(np.ones(3)))
    assert "not stored: the generated code re-reads a closure variable (cell_w) of a function " \
        "other than the traced one, which another process cannot find" in log[-1]
    assert stored_entries(cache) == []


def test_a_helper_no_process_can_import_is_not_stored_and_the_log_says_why(cache, caplog):
    scope = {}
    exec("def helper(x):\n    return x * 2\n", scope)  # noqa: S102  a module-less function
    tools = {"helper": scope["helper"]}

    def f(x):
        return np.sum(tools["helper"](x))
    log = explained(caplog, lambda: autodiffgen.grad(f)(np.ones(3)))
    assert re.search(r"not stored: the trace ran helper \(<string>:1\), which belongs to no "
                     r"module \(made by exec\?\), so another process cannot find it", log[-1])
    assert stored_entries(cache) == []


def test_under_a_tracer_and_a_profiler_nothing_is_stored_and_the_log_says_why(cache, caplog):
    def f(x):
        return np.sum(x ** 2)
    old_trace, old_profile = sys.gettrace(), sys.getprofile()
    sys.settrace(old_trace or (lambda *a: None))
    sys.setprofile(lambda *a: None)
    try:
        log = explained(caplog, lambda: autodiffgen.grad(f)(np.ones(3)))
    finally:
        sys.settrace(old_trace)
        sys.setprofile(old_profile)
    assert "not stored: a tracer (sys.settrace) and a profiler (sys.setprofile) were both " \
        "active during the trace" in log[-1]
    assert stored_entries(cache) == []


def test_under_a_debugger_or_coverage_the_recorder_uses_the_profile_hook(cache):
    def f(x):
        return np.sum(x ** 2)

    def tracer(*a):
        return None
    old_trace = sys.gettrace()
    sys.settrace(tracer)
    try:
        autodiffgen.grad(f)(np.ones(3))
        assert sys.gettrace() is tracer and sys.getprofile() is None
    finally:
        sys.settrace(old_trace)
    assert len(stored_entries(cache)) == 1


def test_the_recorder_sees_only_user_code_in_its_own_thread_and_restores_the_hooks():
    import threading


    def other():
        return sum(range(3))

    def mine():
        return 1
    def before():
        return 2
    old_trace = sys.gettrace()  # coverage's, under pytest-cov
    with executed.Recorder() as recorder:
        before()  # the library's own work, outside the user's function
        with executed.user_code():
            thread = threading.Thread(target=other)
            thread.start()
            thread.join()
            mine()
            with executed.user_code():  # nested: the same hook
                pass
            assert sys.gettrace() is not old_trace or sys.getprofile() is not None
    assert sys.gettrace() is old_trace and sys.getprofile() is None
    assert mine.__code__ in recorder.codes and other.__code__ not in recorder.codes
    assert before.__code__ not in recorder.codes
    with executed.user_code():  # no recorder waits: no hook
        assert sys.gettrace() is old_trace and sys.getprofile() is None


TRANSFORMS = """
    import json, sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    import autodiffgen
    import m_transforms
    x = np.linspace(0.5, 1.5, 3)
    inner = autodiffgen.grad(m_transforms.f)
    def outer(x):
        return np.sum(inner(x) ** 2)
    outer_grad = autodiffgen.grad(outer)
    hessian = autodiffgen.hessian(m_transforms.f)
    out = [outer_grad(x).tolist(), hessian(x).tolist(), outer_grad.cache_info().misses]
    print(json.dumps(out))
"""


def test_grad_of_grad_and_hessian_through_the_disk_cache_see_an_edit(cache, tmp_path):
    write_files(tmp_path, {"m_transforms.py": """
        import os
        import numpy as np
        MODE = os.environ.get("ADG_MODE", "cube")
        def f(x):
            if MODE == "cube":
                return np.sum(x ** 3)
            return np.sum(np.sin(x))
    """})
    x = np.linspace(0.5, 1.5, 3)
    runs = [json.loads(run_python(TRANSFORMS, tmp_path, env={
        diskcache.ENV_DIR: str(cache), "ADG_MODE": mode, "PYTHONDONTWRITEBYTECODE": "1"}))
        for mode in ("cube", "cube", "sine")]
    assert [misses for *_, misses in runs] == [1, 0, 1]  # reused, then traced after the edit
    for outer_grad, hessian, _ in runs[:2]:
        np.testing.assert_allclose(outer_grad, 36 * x ** 3, rtol=1e-12)  # d/dx |3x^2|^2
        np.testing.assert_allclose(hessian, np.diag(6 * x), rtol=1e-12)
    outer_grad, hessian, _ = runs[2]
    np.testing.assert_allclose(outer_grad, -np.sin(2 * x), rtol=1e-12)  # d/dx |cos x|^2
    np.testing.assert_allclose(hessian, np.diag(-np.sin(x)), rtol=1e-12, atol=1e-15)


def test_an_installed_package_s_object_is_not_stored_and_the_log_says_why(cache, caplog,
                                                                          tmp_path, monkeypatch):
    write_files(tmp_path / "site-packages", {"thirdparty_adg.py": """
        class Frame:
            def __init__(self, scale):
                self.scale = scale
    """})
    monkeypatch.syspath_prepend(str(tmp_path / "site-packages"))
    import thirdparty_adg
    frame = thirdparty_adg.Frame(2.0)

    def f(x):
        return np.sum(x * frame.scale)
    log = explained(caplog, lambda: autodiffgen.grad(f)(np.ones(3)))
    assert "not stored: the closure variable frame holds an instance of thirdparty_adg.Frame, "\
        "from an installed package, whose state the disk cache cannot describe" in log[-1]
    assert stored_entries(cache) == []


@pytest.mark.parametrize("source, edit, why", [
    ("""
        from collections import OrderedDict
        TABLE = OrderedDict(scale=2.0)
        def f(x):
            return x * TABLE["scale"]
    """, "TABLE['scale'] = 3.0", "TABLE is not"),
    ("""
        class Mode(str):
            pass
        MODE = Mode("a")
        def f(x):
            return x * 2 if MODE == "a" else x
    """, "MODE = Mode('b')", "MODE is not"),
    ("""
        W = np.ma.masked_array([1.0, 2.0], mask=[False, True])
        def f(x):
            return x * W.sum()
    """, "W.mask = [False, False]", "W is not"),
    ("""
        import os
        def f(x):
            return x * 2 if os.environ.get("ADG_FLAG_TEST") == "1" else x
    """, "os.environ['ADG_FLAG_TEST'] = '1'", "os.environ is not"),
    ("""
        P = np.poly1d([1.0, 2.0])
        def f(x):
            return P(x)
    """, "P.coeffs[0] = 5.0", "P is not"),
    ("""
        class Layer:
            def __init__(self):
                self.inner = Inner()
        class Inner:
            scale = 2.0
            def apply(self, x):
                return x * self.scale
        layer = Layer()
        def f(x):
            return layer.inner.apply(x)
    """, "layer.inner.scale = 3.0", "layer is not"),
], ids=["OrderedDict", "str subclass", "masked array", "os.environ", "poly1d",
        "nested object"])
def test_check_finds_each_kind_of_change(tmp_path, monkeypatch, source, edit, why):
    monkeypatch.delenv("ADG_FLAG_TEST", raising=False)
    f = module(tmp_path, source, name="m_check").f
    with executed.Recorder() as recorder, executed.user_code():
        f(np.ones(2))
    manifest = json.loads(json.dumps(reads.manifest(f, recorder.codes)))  # as stored
    assert reads.check(f, manifest) is None
    exec(edit, f.__globals__)  # noqa: S102  our test
    assert re.search(why, reads.check(f, manifest))
