"""What an entry may hold and how the cache's locks behave when a process dies, stops or
removes entries: no bytecode in entries, every folder checked, the lock folder checked,
waits that end with the holder's pid, leftovers of killed processes removed (and the
folders of live ones kept), the launcher checked when it is loaded, the exit cleanup.

Entries come from ``test_cache.fake_build`` or, where a kernel object is needed, from
``fake_kernel_entry`` (a host module that records what the kernel asks of it).
"""

from __future__ import annotations

import importlib.util
import json
import marshal
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import tilecute
from tilecute import cache
from tilecute.runtime import entry as E
from tilecute.runtime import kernel as K
from tilecute.runtime.abi import LaunchABI, TensorArg

from test_cache import fake_build, key_for, never_build

TESTS = Path(__file__).resolve().parent


@pytest.fixture(autouse=True)
def _cache_enabled(monkeypatch):
    monkeypatch.delenv("TILECUTE_DISABLE_CACHE", raising=False)
    monkeypatch.delenv(E.ENV_LOCK_TIMEOUT, raising=False)


def child_env(**extra) -> dict:
    """The environment of a child Python that finds these tests' modules and writes
    bytecode as a user's Python does (the test runner's may not)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
               **extra)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run_child(code: str, **extra) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], env=child_env(**extra),
                          capture_output=True, text=True, timeout=120)


ABI = LaunchABI("add", (TensorArg("A", "float16", (1024,)), TensorArg("B", "float16", (1024,))),
                (), ())
HOST = '''\
import os
HERE = os.path.dirname(os.path.abspath(__file__))
FUNCTION = "add"
SIGNATURE = "add(A: Tensor[1024] float16, B: Tensor[1024] float16)"
VALUE = "from the checked source"
LOADS = []


def ensure_cubin():
    return os.path.join(HERE, "kernel.cubin")


def load_launcher():
    LOADS.append(HERE)
    raise RuntimeError("the fake launcher was loaded")
'''


def fake_kernel_entry(folder: Path) -> dict:
    fields = fake_build(function="add")(folder)
    (folder / "host.py").write_text(HOST)
    (folder / "abi.json").write_text(ABI.to_json())
    return {**fields, "abi": ABI.to_dict()}


# --- item 3: no bytecode in entries, every folder checked ---------------------------------


def test_loading_an_entry_writes_no_bytecode_into_it(cache_dir):
    path = cache.get_or_build(key_for("add"), fake_kernel_entry)
    done = run_child(f"import tilecute; k = tilecute.load({str(path)!r}); print(k.host.VALUE)",
                     TILECUTE_CACHE_DIR=str(cache_dir))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "from the checked source"
    assert sorted(p.name for p in path.iterdir() if not p.name.startswith(".")) == sorted(
        ["manifest.json", "host.py", "kernel_cute.py", "launcher.cpp", "launcher.so", "abi.json",
         "ir.json"])
    assert cache.verify_all() == {path.name: []}


def _plant_bytecode(source_file: Path, code_text: str) -> Path:
    """A ``__pycache__`` file that Python's own loader would take for ``source_file``'s:
    its header records the source's mtime and size, its code is ``code_text``."""
    st = source_file.stat()
    code = compile(code_text, str(source_file), "exec")
    pyc = Path(importlib.util.cache_from_source(str(source_file)))
    pyc.parent.mkdir(mode=0o700, exist_ok=True)
    header = importlib.util.MAGIC_NUMBER + (0).to_bytes(4, "little") + \
        int(st.st_mtime).to_bytes(4, "little") + (st.st_size & 0xFFFFFFFF).to_bytes(4, "little")
    pyc.write_bytes(header + marshal.dumps(code))
    return pyc


def test_planted_bytecode_never_runs_and_the_entry_counts_as_damaged(cache_dir):
    key = key_for("add")
    path = cache.get_or_build(key, fake_kernel_entry)
    _plant_bytecode(path / "host.py", 'VALUE = "from the planted bytecode"\n')
    # imported directly, the module runs its checked source, not the .pyc beside it
    module = E.import_source(path / "host.py", "tilecute_test_planted")
    assert module.VALUE == "from the checked source"
    # and the entry holds a file its manifest does not list: verify says so, load refuses
    problems = E.verify_entry(path)
    assert len(problems) == 1 and problems[0].startswith("__pycache__/: a folder the manifest "
                                                         "does not list (1 file)")
    assert cache.verify_all() == {key: problems}
    with pytest.raises(RuntimeError, match=r"damaged: __pycache__/"):
        tilecute.load(path)
    with pytest.warns(E.CacheEntryWarning, match="__pycache__"):
        assert cache.lookup(key) is None  # removed, so the next compile rebuilds it
    assert not path.exists()


def test_unrecorded_files_are_problems_but_bookkeeping_is_not(cache_dir):
    path = cache.get_or_build(key_for(), fake_build())
    (path / ".staging-abc").mkdir(mode=0o700)
    (path / ".staging-abc" / "kernel.cubin").write_bytes(b"half")
    assert E.verify_entry(path) == []
    (path / "extra.so").write_bytes(b"\x7fELF")
    assert E.verify_entry(path) == ["extra.so: not recorded in the manifest; an entry holds only "
                                    "its recorded artifacts"]
    assert E.verify_entry(path, ["host.py"]) == []  # a given list checks only those files


@pytest.mark.parametrize("what", ["folder", "file"])
def test_every_folder_of_an_entry_is_checked(cache_dir, what):
    key = key_for()
    path = cache.get_or_build(key, fake_build())
    sub = path / "__pycache__"
    sub.mkdir(mode=0o700)
    (sub / "host.cpython-311.pyc").write_bytes(b"planted")
    os.chmod(sub if what == "folder" else sub / "host.cpython-311.pyc", 0o777 if what == "folder" else 0o666)
    name = "__pycache__" if what == "folder" else "__pycache__/host.cpython-311.pyc"
    with pytest.raises(E.UnsafeCacheError, match=rf"its {what} '{name}': it is .*world-writable"):
        cache.lookup(key)
    with pytest.raises(E.UnsafeCacheError):
        tilecute.load(path)
    E.check_private(path)  # the one-level check of a cache root does not descend


def test_a_folder_link_inside_an_entry_is_refused(cache_dir, tmp_path):
    key = key_for()
    path = cache.get_or_build(key, fake_build())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (path / "sub").symlink_to(elsewhere)
    with pytest.raises(E.UnsafeCacheError, match="its folder 'sub' is a symbolic link"):
        cache.lookup(key)


# --- item 5: the lock folder ------------------------------------------------------------


def test_a_writable_lock_folder_is_refused(cache_dir):
    cache.get_or_build(key_for("a"), fake_build())
    os.chmod(cache_dir / ".locks", 0o777)
    with pytest.raises(E.UnsafeCacheError, match=r"lock folder .*\.locks.*world-writable"):
        cache.get_or_build(key_for("b"), fake_build())
    assert not (cache_dir / key_for("b")).exists()


def test_a_linked_lock_folder_is_refused(cache_dir, tmp_path):
    cache.cache_root()
    target = tmp_path / "someone-elses-folder"
    target.mkdir(mode=0o700)
    (cache_dir / ".locks").symlink_to(target)
    with pytest.raises(E.UnsafeCacheError, match="lock folder .* is a symbolic link"):
        cache.get_or_build(key_for(), fake_build())
    assert list(target.iterdir()) == []  # no lock file was made through the link


def test_a_linked_lock_file_does_not_truncate_its_target(cache_dir, tmp_path):
    """filelock >= 3.20.3 (the pyproject floor) opens lock files with O_NOFOLLOW."""
    key = key_for()
    (cache_dir / ".locks").mkdir(parents=True, mode=0o700)
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me\n")
    (cache_dir / ".locks" / f"{key}.lock").symlink_to(precious)
    with pytest.raises(OSError):
        cache.get_or_build(key, fake_build())
    assert precious.read_text() == "keep me\n"


# --- item 9: waits end, and name the holder -------------------------------------------------


STOPPED_BUILDER = """
import os, signal, sys
from tilecute import cache
from test_cache import fake_build, key_for

def build(folder):
    print("building", flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)  # stopped while it holds the key's lock
    return fake_build()(folder)

cache.get_or_build(key_for(), build)
"""

WAITER = """
from tilecute import cache
from test_cache import fake_build, key_for
try:
    cache.get_or_build(key_for(), fake_build())
except cache.CacheLockTimeout as e:
    print("TIMEOUT", e)
else:
    print("BUILT")
"""


def test_a_stopped_builder_makes_waiters_fail_with_its_pid(cache_dir):
    builder = subprocess.Popen([sys.executable, "-c", STOPPED_BUILDER], env=child_env(),
                               stdout=subprocess.PIPE, text=True)
    try:
        assert builder.stdout.readline().strip() == "building"
        _, status = os.waitpid(builder.pid, os.WUNTRACED)  # returns once it is stopped
        assert os.WIFSTOPPED(status)
        waiter = run_child(WAITER, **{E.ENV_LOCK_TIMEOUT: "0.5"})
        assert waiter.returncode == 0, waiter.stderr
        out = waiter.stdout
        assert out.startswith("TIMEOUT tilecute cache: waited 0.5 s for the lock"), out
        assert f"{key_for()}.lock" in out and f"held by pid {builder.pid} (stopped)" in out
        assert f"kill -CONT {builder.pid}" in out and E.ENV_LOCK_TIMEOUT in out
    finally:
        builder.kill()
        builder.wait()
    assert run_child(WAITER).stdout.strip() == "BUILT"  # the lock died with its holder


def test_lock_timeout_must_be_a_number(monkeypatch):
    monkeypatch.setenv(E.ENV_LOCK_TIMEOUT, "soon")
    with pytest.raises(ValueError, match="TILECUTE_LOCK_TIMEOUT='soon' is not a number"):
        E.lock_timeout()


# --- item 9: clear takes the key's lock; leftovers of dead processes go, live ones stay ---


def test_clear_waits_for_a_process_using_the_entry(cache_dir):
    key = key_for()
    seen = {}

    def use(path):
        # `tilecute cache clear` in another process, while this one uses the entry
        seen["clear"] = subprocess.run(
            [sys.executable, "-m", "tilecute", "cache", "clear"], capture_output=True, text=True,
            env=child_env(**{E.ENV_LOCK_TIMEOUT: "0.5"}), timeout=120)
        seen["files"] = E.verify_entry(path)
        return path

    path = cache.get_or_build(key, fake_build(), use=use)
    assert seen["files"] == []  # the entry stayed whole while in use
    assert seen["clear"].returncode == 1
    assert f"held by pid {os.getpid()}" in seen["clear"].stderr
    assert cache.clear() == [key] and not path.exists()


KILLED_BUILDER = """
import os, signal
from tilecute import cache
from test_cache import fake_build, key_for

def build(folder):
    fake_build()(folder)
    os.kill(os.getpid(), signal.SIGKILL)

cache.get_or_build(key_for(), build)
"""


def test_clear_removes_the_build_folder_of_a_killed_builder_at_once(cache_dir):
    done = run_child(KILLED_BUILDER)
    assert done.returncode == -signal.SIGKILL
    left = [p for p in cache_dir.iterdir() if p.name.startswith(".tmp-")]
    assert len(left) == 1 and left[0].name.startswith(f".tmp-{key_for()}-")
    assert cache.clear() == []
    assert not left[0].exists()


def test_clear_keeps_the_build_folder_of_a_live_builder(cache_dir):
    inside, finish = threading.Event(), threading.Event()
    result = {}

    def build(folder):
        inside.set()
        finish.wait(60)
        return fake_build()(folder)

    worker = threading.Thread(target=lambda: result.setdefault(
        "path", cache.get_or_build(key_for(), build)))
    worker.start()
    try:
        assert inside.wait(60)
        building = [p for p in cache_dir.iterdir() if p.name.startswith(".tmp-")]
        assert cache.clear() == [] and all(p.exists() for p in building)
    finally:
        finish.set()
        worker.join(60)
    assert result["path"] == cache_dir / key_for() and E.verify_entry(result["path"]) == []


KILLED_PRODUCER = """
import os, signal, sys
from pathlib import Path
from tilecute.runtime.entry import publish_artifact

def produce(staging):
    Path(staging, "kernel.cubin").write_bytes(b"half a cubin")
    os.kill(os.getpid(), signal.SIGKILL)

publish_artifact(sys.argv[1], "kernel.cubin", produce)
"""


def test_staging_folders_of_a_killed_producer_are_removed(cache_dir):
    path = cache.get_or_build(key_for(), fake_build())

    def staging():
        return [p.name for p in path.iterdir() if p.name.startswith(".staging-")]

    left = []
    for _ in range(2):  # the second producer removes what the first left, then dies too
        done = subprocess.run([sys.executable, "-c", KILLED_PRODUCER, str(path)], env=child_env(),
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == -signal.SIGKILL, done.stderr
        assert len(staging()) == 1 and staging()[0] not in left
        left += staging()
    E.publish_artifact(path, "kernel.cubin", lambda d: Path(d, "kernel.cubin").write_bytes(b"cubin"))
    assert staging() == [] and E.verify_entry(path) == []


def test_clear_removes_dead_staging_folders_and_keeps_a_live_one(cache_dir):
    path = cache.get_or_build(key_for(), fake_build())
    dead = path / ".staging-dead"
    dead.mkdir(mode=0o700)
    inside, finish = threading.Event(), threading.Event()

    def produce(staging):
        inside.set()
        finish.wait(60)
        Path(staging, "kernel.cubin").write_bytes(b"cubin")

    worker = threading.Thread(target=E.publish_artifact, args=(path, "kernel.cubin", produce))
    worker.start()
    try:
        assert inside.wait(60)
        live = [p for p in path.iterdir() if p.name.startswith(".staging-")]
        assert len(live) == 1 and not dead.exists()  # the producer removed the dead one
        dead.mkdir(mode=0o700)  # another one left meanwhile; the producer holds the lock
        assert cache.clear(older_than_seconds=86400) == []
        assert live[0].exists() and dead.exists()
    finally:
        finish.set()
        worker.join(60)
    assert cache.clear(older_than_seconds=86400) == [] and not dead.exists()
    assert E.verify_entry(path) == []


@pytest.mark.parametrize("look", ["lookup", "verify_all"])
def test_a_look_during_a_lazy_publish_does_not_call_the_entry_damaged(cache_dir, monkeypatch,
                                                                      look):
    """Between moving kernel.cubin in and recording it, the entry holds an unrecorded file;
    a lookup (or `tilecute cache verify`) then waits for the entry's lock and looks again."""
    key = key_for()
    path = cache.get_or_build(key, fake_build())
    real_write = E.write_manifest
    found = {}
    expected = {"lookup": path, "verify_all": {key: []}}[look]

    def look_at_it():
        return cache.lookup(key) if look == "lookup" else cache.verify_all()

    def write_manifest_after_a_lookup(folder, manifest):
        assert (Path(folder) / "kernel.cubin").exists()  # moved in, not yet recorded
        looker = threading.Thread(target=lambda: found.setdefault("path", look_at_it()))
        looker.start()
        looker.join(0.5)  # it waits for the entry's lock that publish_artifact holds
        real_write(folder, manifest)
        found["looker"] = looker

    monkeypatch.setattr(E, "write_manifest", write_manifest_after_a_lookup)
    E.publish_artifact(path, "kernel.cubin", lambda d: Path(d, "kernel.cubin").write_bytes(b"cubin"))
    found["looker"].join(60)
    assert found["path"] == expected and E.verify_entry(path) == []


# --- item 9: the launcher is checked when it is loaded --------------------------------------


def test_a_launcher_changed_after_compile_is_not_loaded(cache_dir):
    path = cache.get_or_build(key_for("add"), fake_kernel_entry)
    kernel = K.Kernel(path)
    with open(path / "launcher.so", "ab") as f:
        f.write(b"appended after the entry was checked")
    with pytest.raises(RuntimeError, match=r"add: refusing to load the launcher .*launcher\.so: "
                                           r"size \d+ bytes, the manifest records \d+"):
        kernel.launcher
    assert kernel.host.LOADS == []


def test_a_removed_entry_is_a_clear_error_at_the_first_call(cache_dir):
    path = cache.get_or_build(key_for("add"), fake_kernel_entry)
    kernel = K.Kernel(path)
    cache.clear()
    with pytest.raises(RuntimeError, match="add: refusing to load .*the folder is gone.*"
                                           "tilecute.compile again"):
        kernel.launcher


# --- item 9: the exit cleanup does not race daemon threads ----------------------------------


def test_exit_cleanup_is_skipped_while_a_daemon_thread_may_launch():
    calls = []
    stop = threading.Event()
    launching = threading.Thread(target=stop.wait, daemon=True)
    launching.start()
    try:
        K._cleanup_at_exit(lambda: calls.append("cleanup"))
        assert calls == []
    finally:
        stop.set()
        launching.join()
    K._cleanup_at_exit(lambda: calls.append("cleanup"))
    assert calls == ["cleanup"]


EXIT_WITH_DAEMON = """
import atexit, json, sys, threading, time
from tilecute.runtime import kernel as K
log = []
atexit.register(lambda: print(json.dumps(log)))   # runs last: atexit is last in, first out
atexit.register(K._cleanup_at_exit, lambda: log.append("cleanup"))
started = threading.Event()
def launch_forever():
    started.set()
    while True:
        time.sleep(0.001)
threading.Thread(target=launch_forever, daemon=True).start()
started.wait()
"""


def test_exit_with_a_daemon_thread_running_skips_the_cleanup():
    done = run_child(EXIT_WITH_DAEMON)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
    done = run_child(EXIT_WITH_DAEMON.replace("threading.Thread(target=launch_forever, daemon=True)"
                                              ".start()\nstarted.wait()", ""))
    assert json.loads(done.stdout.strip().splitlines()[-1]) == ["cleanup"]
