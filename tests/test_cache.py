"""The kernel cache: keys, publishing, concurrency, damage detection, safety rules, CLI.

Entries here come from ``fake_build``, which writes small files under the real entry
names.  To run these tests against the real compiler, make ``fake_build`` call
``tilecute.driver.build_entry`` (keeping the counter line it appends per build).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tilecute import cache
from tilecute.cli import main, parse_duration
from tilecute.runtime import entry as E

TESTS = Path(__file__).resolve().parent
ENTRY_FILES = ("host.py", "kernel_cute.py", "launcher.cpp", "launcher.so", "abi.json", "ir.json")
IR = {"schema": 1, "function": "vector_add", "body": ["copy", "add", "copy"]}


def fake_build(counter: str | None = None, delay: float = 0.0, function: str = "vector_add"):
    """A build function writing an entry's files; each call appends one line to
    ``counter`` so tests can count builds across processes."""

    def build(folder: Path) -> dict:
        folder = Path(folder)
        if counter:
            with open(counter, "a") as f:
                f.write(f"{os.getpid()}\n")
        time.sleep(delay)
        (folder / "host.py").write_text(
            "import os\nHERE = os.path.dirname(os.path.abspath(__file__))\n"
            f"FUNCTION = {function!r}\nVALUE = 42\n")
        (folder / "kernel_cute.py").write_text("# CuTe DSL source\n@cute.kernel\ndef k(): pass\n")
        (folder / "launcher.cpp").write_text("// launcher\nint launch() { return 0; }\n")
        (folder / "launcher.so").write_bytes(b"\x7fELF" + bytes(range(256)) * 256)
        (folder / "abi.json").write_text(json.dumps({"function": function, "args": []}))
        (folder / "ir.json").write_text(json.dumps(IR))
        return {"function": function, "arch": "sm_90a", "versions": {"tilecute": "0.1.0"},
                "options": {}, "ir": json.dumps(IR), "abi": {"function": function, "args": []}}

    return build


def key_for(name: str = "vector_add", **options) -> str:
    return cache.cache_key(json.dumps({**IR, "function": name}), "sm_90a", options,
                           {"tilecute": "0.1.0"})


def builds(counter: Path) -> int:
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def never_build(folder):
    raise AssertionError("build called on a cache hit")


def run_python(code: str, **popen) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    return subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **popen)


def communicate(proc: subprocess.Popen) -> str:
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return out


@pytest.fixture(autouse=True)
def _cache_enabled(monkeypatch):
    monkeypatch.delenv("TILECUTE_DISABLE_CACHE", raising=False)


# --- publishing and hits -----------------------------------------------------------------


def test_build_publishes_entry_with_manifest(cache_dir, tmp_path):
    counter = tmp_path / "builds"
    key = key_for()
    path = cache.get_or_build(key, fake_build(str(counter)))
    assert path == cache_dir / key and builds(counter) == 1
    m = E.load_manifest(path)
    assert m["schema"] == E.SCHEMA and m["key"] == key and m["function"] == "vector_add"
    assert m["arch"] == "sm_90a" and m["ir"] == IR and m["abi"]["function"] == "vector_add"
    assert abs(m["created"] - time.time()) < 60
    assert sorted(m["files"]) == sorted(ENTRY_FILES)
    data = (path / "launcher.so").read_bytes()
    assert m["files"]["launcher.so"] == {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    assert E.verify_entry(path) == []
    # private folders, nothing left behind but the entry and the lock folder
    assert os.stat(cache_dir).st_mode & 0o777 == 0o700
    assert os.stat(path).st_mode & 0o777 == 0o700
    assert sorted(p.name for p in cache_dir.iterdir()) == [".locks", key]


def test_second_get_or_build_is_a_hit_in_this_and_a_new_process(cache_dir, tmp_path):
    counter = tmp_path / "builds"
    key = key_for()
    path = cache.get_or_build(key, fake_build(str(counter)))
    assert cache.get_or_build(key, never_build) == path
    assert cache.lookup(key) == path
    out = communicate(run_python(
        "import importlib.util\n"
        "from tilecute import cache\n"
        "from test_cache import never_build\n"
        f"path = cache.get_or_build({key!r}, never_build)\n"
        "spec = importlib.util.spec_from_file_location('host', path / 'host.py')\n"
        "host = importlib.util.module_from_spec(spec); spec.loader.exec_module(host)\n"
        "print(path, host.VALUE)\n"))
    assert out.split() == [str(path), "42"]
    assert builds(counter) == 1


def test_racing_processes_build_once(cache_dir, tmp_path):
    counter, go = tmp_path / "builds", tmp_path / "go"
    key = key_for("raced")
    procs = [run_python(
        "import os, time\n"
        "from tilecute import cache\n"
        "from test_cache import fake_build\n"
        f"open({str(tmp_path / 'ready')!r} + str(os.getpid()), 'w').close()\n"
        f"while not os.path.exists({str(go)!r}): time.sleep(0.002)\n"
        f"print(cache.get_or_build({key!r}, fake_build({str(counter)!r}, delay=0.3)))\n")
        for _ in range(8)]
    deadline = time.time() + 30
    while len(list(tmp_path.glob("ready*"))) < 8 and time.time() < deadline:
        time.sleep(0.01)
    go.touch()
    paths = {communicate(p).strip() for p in procs}
    assert builds(counter) == 1
    assert paths == {str(cache_dir / key)}
    assert E.verify_entry(cache_dir / key) == []
    left = [p for p in cache_dir.iterdir() if p.name.startswith((".tmp-", ".trash-"))]
    # (seen twice under load in a full CI run, never alone: what was left, for diagnosis)
    assert not left, [(p.name, sorted(x.name for x in p.iterdir()), p.stat().st_mtime,
                       (cache_dir / key).stat().st_mtime, counter.read_text()) for p in left]


def test_racing_threads_build_once(cache_dir, tmp_path):
    counter = tmp_path / "builds"
    key = key_for("threads")
    results = []
    threads = [threading.Thread(target=lambda: results.append(
        cache.get_or_build(key, fake_build(str(counter), delay=0.1)))) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert builds(counter) == 1 and set(results) == {cache_dir / key}


def test_failed_build_leaves_nothing_and_reraises(cache_dir, tmp_path):
    key = key_for()

    def broken(folder):
        (Path(folder) / "host.py").write_text("half")
        raise RuntimeError("compiler exploded")

    with pytest.raises(RuntimeError, match="compiler exploded"):
        cache.get_or_build(key, broken)
    assert [p.name for p in cache_dir.iterdir()] == [".locks"]
    assert cache.lookup(key) is None
    counter = tmp_path / "builds"
    assert cache.get_or_build(key, fake_build(str(counter))) == cache_dir / key
    assert builds(counter) == 1


def test_build_must_return_manifest_fields(cache_dir):
    with pytest.raises(cache.CacheError, match="manifest fields"):
        cache.get_or_build(key_for(), lambda folder: None)
    with pytest.raises(cache.CacheError, match="arch"):
        cache.get_or_build(key_for(), lambda folder: {"function": "f"})
    assert [p.name for p in cache_dir.iterdir()] == [".locks"]


def test_keys_must_be_hex_digests(cache_dir):
    for bad in ("../evil", "A" * 64, "abc", "g" * 64):
        with pytest.raises(ValueError, match="not a cache key"):
            cache.get_or_build(bad, never_build)


def test_disable_cache_builds_outside_the_cache(cache_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("TILECUTE_DISABLE_CACHE", "1")
    counter = tmp_path / "builds"
    key = key_for()
    a = cache.get_or_build(key, fake_build(str(counter)))
    b = cache.get_or_build(key, fake_build(str(counter)))
    assert builds(counter) == 2 and a != b
    assert cache_dir not in a.parents and not cache_dir.exists()
    assert E.verify_entry(a) == [] and E.load_manifest(a)["key"] == key


@pytest.mark.parametrize("value, disabled", [("", False), ("0", False), ("false", False),
                                             ("Off", False), ("no", False), ("1", True),
                                             ("true", True), ("yes", True)])
def test_disable_cache_reads_false_values_as_every_switch_does(monkeypatch, value, disabled):
    import tilecute

    monkeypatch.setenv("TILECUTE_DISABLE_CACHE", value)
    assert cache.cache_disabled() is disabled and tilecute.is_cache_enabled() is not disabled


def test_cache_root_default_and_private_parents(tmp_path, monkeypatch):
    monkeypatch.delenv("TILECUTE_CACHE_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    root = cache.cache_root()
    assert root == tmp_path / "home" / ".cache" / "tilecute"
    for p in (root, root.parent, root.parent.parent):
        assert os.stat(p).st_mode & 0o777 == 0o700, p


# --- damage is detected and rebuilt ---------------------------------------------------------


def _truncate(file: Path):
    file.write_bytes(file.read_bytes()[:-1])


def _alter(file: Path):
    data = bytearray(file.read_bytes())
    data[len(data) // 2] ^= 0x01
    file.write_bytes(bytes(data))


def _remove(file: Path):
    file.unlink()


@pytest.mark.parametrize("damage", [_truncate, _alter, _remove], ids=["truncated", "altered", "removed"])
@pytest.mark.parametrize("name", ENTRY_FILES + ("kernel.cubin", E.MANIFEST))
def test_damaged_file_is_detected_and_rebuilt(cache_dir, tmp_path, name, damage):
    counter = tmp_path / "builds"
    key = key_for()
    path = cache.get_or_build(key, fake_build(str(counter)))
    E.publish_artifact(path, "kernel.cubin", lambda d: Path(d, "kernel.cubin").write_bytes(b"cubin" * 99))
    damage(path / name)
    with pytest.warns(E.CacheEntryWarning, match=rf"{re.escape(name)}.*{key}|{key}.*{re.escape(name)}"):
        again = cache.get_or_build(key, fake_build(str(counter)))
    assert again == path and builds(counter) == 2
    assert E.verify_entry(path) == []
    assert "kernel.cubin" not in E.load_manifest(path)["files"]  # a fresh entry
    assert not [p for p in cache_dir.iterdir() if p.name.startswith(".trash-")]


def test_verify_entry_names_each_problem(cache_dir):
    path = cache.get_or_build(key_for(), fake_build())
    _truncate(path / "host.py")
    _alter(path / "abi.json")
    (path / "ir.json").unlink()
    problems = E.verify_entry(path)
    assert len(problems) == 3
    assert any(p.startswith("host.py: size") for p in problems)
    assert any(p.startswith("abi.json: sha256") for p in problems)
    assert "ir.json: missing" in problems
    assert E.verify_entry(path, ["launcher.so", "kernel_cute.py"]) == []
    assert E.verify_entry(path, ["kernel.cubin"]) == ["kernel.cubin: not recorded in the manifest"]


def test_manifest_key_must_match_folder(cache_dir, tmp_path):
    counter = tmp_path / "builds"
    key, other = key_for("a"), key_for("b")
    path = cache.get_or_build(key, fake_build(str(counter)))
    os.rename(path, cache_dir / other)  # an entry under the wrong name
    with pytest.warns(E.CacheEntryWarning, match="manifest.json: records key"):
        assert cache.lookup(other) is None
    assert not (cache_dir / other).exists()


# --- safety -----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o702])
def test_writable_cache_root_is_refused(cache_dir, mode):
    cache.cache_root()
    os.chmod(cache_dir, mode)
    with pytest.raises(E.UnsafeCacheError, match=r"writable.*chmod go-w") as info:
        cache.get_or_build(key_for(), never_build)
    assert str(cache_dir) in str(info.value)
    assert isinstance(info.value, PermissionError)


def _owned_by_someone_else(monkeypatch, path: Path, how: str):
    """Make ``path`` belong to another user: really (chown, needs root) or as os.stat
    reports it to the safety check."""
    other = os.getuid() + 4242
    if how == "chown":
        if os.getuid() != 0:
            pytest.skip("chown to another user needs root")
        os.chown(path, other, other)
        return
    real_stat = os.stat

    def fake_stat(p, *args, **kwargs):
        st = real_stat(p, *args, **kwargs)
        if os.path.abspath(p) == str(path):
            fields = list(st)
            fields[4] = other  # st_uid
            return os.stat_result(fields)
        return st

    monkeypatch.setattr(E.os, "stat", fake_stat)


@pytest.mark.parametrize("how", ["chown", "mocked-stat"])
def test_entry_owned_by_another_user_is_refused(cache_dir, tmp_path, monkeypatch, how):
    key = key_for()
    path = cache.get_or_build(key, fake_build())
    _owned_by_someone_else(monkeypatch, path, how)
    with pytest.raises(E.UnsafeCacheError, match=r"owned by uid \d+, not by the current user") as info:
        cache.get_or_build(key, never_build)
    assert str(path) in str(info.value)
    with pytest.raises(E.UnsafeCacheError):
        E.check_private(path)
    assert path.exists()  # refused, not silently replaced


def test_file_in_entry_writable_by_others_is_refused(cache_dir):
    key = key_for()
    path = cache.get_or_build(key, fake_build())
    os.chmod(path / "host.py", 0o666)
    with pytest.raises(E.UnsafeCacheError, match="'host.py'.*world-writable"):
        cache.lookup(key)


def test_group_writable_files_from_build_are_made_private(cache_dir):
    def build(folder):
        fields = fake_build()(folder)
        os.chmod(Path(folder) / "launcher.so", 0o775)  # as under a umask of 002
        return fields

    path = cache.get_or_build(key_for(), build)
    assert os.stat(path / "launcher.so").st_mode & 0o777 == 0o755
    E.check_private(path)


# --- the key ------------------------------------------------------------------------------


def test_every_key_ingredient_changes_the_key():
    ir = json.dumps(IR, sort_keys=True)
    versions = {"tilecute": "0.1.0", "nvidia-cutlass-dsl": "4.3.0", "apache-tvm-ffi": "0.1.6",
                "cxx": "g++ 12.2.0"}
    options = {"num_stages": 3, "fast_math": False}
    base = cache.cache_key(ir, "sm_90a", options, versions)
    assert len(base) == 64 and int(base, 16) >= 0
    # same ingredients, other dict order: same key
    assert cache.cache_key(ir, "sm_90a", dict(reversed(options.items())),
                           dict(reversed(versions.items()))) == base
    variants = [
        cache.cache_key(json.dumps({**IR, "body": ["copy"]}, sort_keys=True), "sm_90a", options, versions),
        cache.cache_key(ir, "sm_80", options, versions),
        cache.cache_key(ir, "sm_90a", {**options, "num_stages": 4}, versions),
        cache.cache_key(ir, "sm_90a", {**options, "fast_math": True}, versions),
        cache.cache_key(ir, "sm_90a", {**options, "new_option": 1}, versions),
    ] + [cache.cache_key(ir, "sm_90a", options, {**versions, tool: v + ".1"})
         for tool, v in versions.items()]
    assert len(set(variants + [base])) == len(variants) + 1


def test_tool_versions_names_every_tool():
    v = cache.tool_versions()
    assert set(v) == {"tilecute", "nvidia-cutlass-dsl", "apache-tvm-ffi", "cxx"}
    # the release number plus a fingerprint of tilecute's own sources (templates included)
    assert re.fullmatch(re.escape(__import__("tilecute").__version__) + r"\+src\.[0-9a-f]{12}",
                        v["tilecute"])
    assert all(isinstance(s, str) and s for s in v.values())
    assert cache.tool_versions() == v


def test_source_fingerprint_follows_the_templates(tmp_path, monkeypatch):
    from tilecute import templates, toolchain

    before = toolchain.source_fingerprint()
    fake = tmp_path / "templates"
    fake.mkdir()
    for f in Path(templates.__file__).parent.iterdir():
        if f.is_file():
            (fake / f.name).write_bytes(f.read_bytes())
    (fake / "launcher.cpp.j2").write_text("// changed\n")
    monkeypatch.setattr(templates, "__file__", str(fake / "__init__.py"))
    assert toolchain.source_fingerprint() != before


def test_cache_key_refuses_non_json_options():
    with pytest.raises(TypeError, match="plain JSON"):
        cache.cache_key("{}", "sm_90a", {"f": object()}, {})


# --- lazy artifacts -----------------------------------------------------------------------


def _produce_cubin(counter: str, delay: float = 0.0):
    def produce(staging):
        with open(counter, "a") as f:
            f.write("x\n")
        time.sleep(delay)
        Path(staging, "kernel.cubin").write_bytes(b"\x7fELF cubin" * 1000)

    return produce


def test_publish_artifact_records_hash_and_is_reused(cache_dir, tmp_path):
    counter = tmp_path / "cubins"
    path = cache.get_or_build(key_for(), fake_build())
    cubin = E.publish_artifact(path, "kernel.cubin", _produce_cubin(str(counter)))
    assert cubin == path / "kernel.cubin" and builds(counter) == 1
    data = cubin.read_bytes()
    assert E.load_manifest(path)["files"]["kernel.cubin"] == {
        "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    assert E.publish_artifact(path, "kernel.cubin", never_build) == cubin
    assert E.verify_entry(path) == []
    assert sorted(p.name for p in path.iterdir() if p.name.startswith(".")) == [".lock"]


def test_publish_artifact_races_produce_once(cache_dir, tmp_path):
    counter = tmp_path / "cubins"
    path = cache.get_or_build(key_for(), fake_build())
    procs = [run_python(
        "from tilecute.runtime.entry import publish_artifact\n"
        "from test_cache import _produce_cubin\n"
        f"print(publish_artifact({str(path)!r}, 'kernel.cubin', _produce_cubin({str(counter)!r}, 0.3)))\n")
        for _ in range(4)]
    results = []
    threads = [threading.Thread(target=lambda: results.append(
        E.publish_artifact(path, "kernel.cubin", _produce_cubin(str(counter), 0.3)))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    outs = {communicate(p).strip() for p in procs}
    assert builds(counter) == 1
    assert outs == {str(path / "kernel.cubin")} and set(results) == {path / "kernel.cubin"}
    assert E.verify_entry(path) == [] and "kernel.cubin" in E.load_manifest(path)["files"]
    assert not [p for p in path.iterdir() if p.name.startswith((".staging-", ".manifest-"))]


def test_publish_artifact_failure_leaves_entry_unchanged(cache_dir):
    path = cache.get_or_build(key_for(), fake_build())
    before = E.load_manifest(path)

    def fails(staging):
        Path(staging, "kernel.cubin").write_bytes(b"partial")
        raise RuntimeError("ptxas failed")

    with pytest.raises(RuntimeError, match="ptxas failed"):
        E.publish_artifact(path, "kernel.cubin", fails)
    with pytest.raises(RuntimeError, match="wrote no file 'kernel.cubin'"):
        E.publish_artifact(path, "kernel.cubin", lambda staging: None)
    assert E.load_manifest(path) == before and not (path / "kernel.cubin").exists()
    assert not [p for p in path.iterdir() if p.name.startswith(".staging-")]


def test_publish_artifact_replaces_a_damaged_artifact(cache_dir, tmp_path):
    counter = tmp_path / "cubins"
    path = cache.get_or_build(key_for(), fake_build())
    cubin = E.publish_artifact(path, "kernel.cubin", _produce_cubin(str(counter)))
    _alter(cubin)
    with pytest.warns(E.CacheEntryWarning, match="kernel.cubin"):
        E.publish_artifact(path, "kernel.cubin", _produce_cubin(str(counter)))
    assert builds(counter) == 2 and E.verify_entry(path) == []


@pytest.mark.parametrize("name", ["../x", "a/b", ".lock", "manifest.json", ""])
def test_publish_artifact_refuses_odd_names(cache_dir, name):
    path = cache.get_or_build(key_for(), fake_build())
    with pytest.raises(ValueError, match="not a plain artifact file name"):
        E.publish_artifact(path, name, never_build)


def test_runtime_entry_imports_only_the_standard_library():
    out = communicate(run_python(
        "import sys\n"
        "before = set(sys.modules)\n"
        "import tilecute.runtime.entry\n"
        "new = set(sys.modules) - before\n"
        "print(' '.join(sorted(m for m in new if m.split('.')[0] not in sys.stdlib_module_names)))\n"))
    # (tilecute.refusals: the package's finder of TileLang modules it lacks, stdlib only)
    assert set(out.split()) <= {"tilecute", "tilecute.runtime", "tilecute.runtime.entry",
                                "tilecute.refusals"}


# --- CLI --------------------------------------------------------------------------------------


def _age(path: Path, seconds: float):
    m = E.load_manifest(path)
    m["created"] = time.time() - seconds
    E.write_manifest(path, m)


def test_cli_ls(cache_dir, capsys):
    assert main(["cache", "ls"]) == 0
    assert "no entries" in capsys.readouterr().err
    a = cache.get_or_build(key_for("add"), fake_build(function="add"))
    b = cache.get_or_build(key_for("gemm"), fake_build(function="gemm"))
    _age(b, 3 * 3600)
    assert main(["cache", "ls"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["KEY", "FUNCTION", "ARCH", "SIZE", "AGE"]
    assert lines[1].split()[:3] == [b.name[:12], "gemm", "sm_90a"] and lines[1].split()[-1] == "3h"
    assert lines[2].split()[:3] == [a.name[:12], "add", "sm_90a"]
    assert lines[3].startswith("2 entries")
    sizes = {e.key: e.size for e in cache.list_entries()}
    assert sizes[a.name] == sum(f.stat().st_size for f in a.iterdir())


def test_cli_clear_older_than(cache_dir, capsys):
    old = cache.get_or_build(key_for("old"), fake_build())
    new = cache.get_or_build(key_for("new"), fake_build())
    _age(old, 8 * 86400)
    assert main(["cache", "clear", "--older-than", "7d"]) == 0
    assert "removed 1 entry" in capsys.readouterr().out
    assert not old.exists() and new.exists()
    assert main(["cache", "clear"]) == 0
    assert not new.exists() and cache.list_entries() == []


def test_parse_duration():
    assert [parse_duration(s) for s in ("7d", "12h", "30m", "3600s", "90", "1w")] == [
        7 * 86400, 12 * 3600, 1800, 3600, 90, 7 * 86400]


def test_cli_verify(cache_dir, capsys):
    good = cache.get_or_build(key_for("good"), fake_build())
    bad = cache.get_or_build(key_for("bad"), fake_build())
    assert main(["cache", "verify"]) == 0
    assert "2 entries checked, 0 damaged" in capsys.readouterr().out
    _truncate(bad / "launcher.so")
    assert main(["cache", "verify"]) == 1
    out = capsys.readouterr().out
    assert f"{bad.name[:12]}: launcher.so: size" in out and good.name[:12] not in out
    assert bad.exists()  # verify reports, it does not remove


def test_cli_path_with_prefix(cache_dir, capsys):
    a = cache.get_or_build("ab" + "0" * 62, fake_build())
    b = cache.get_or_build("ac" + "0" * 62, fake_build())
    assert main(["cache", "path", "ab"]) == 0
    assert capsys.readouterr().out.strip() == str(a)
    assert main(["cache", "path", b.name]) == 0
    assert capsys.readouterr().out.strip() == str(b)
    assert main(["cache", "path", "a"]) == 2  # a usage error: the KEY names no single entry
    captured = capsys.readouterr()
    assert "ambiguous" in captured.err and captured.out == "" and "Traceback" not in captured.err
    assert main(["cache", "path", "ff"]) == 1  # a failure: no such entry
    assert "no cache entry matches 'ff'" in capsys.readouterr().err
    assert main(["cache", "path", "../x"]) == 2
    assert "not a cache key" in capsys.readouterr().err


def test_cli_unsafe_root_is_an_error_not_a_traceback(cache_dir, capsys):
    cache.cache_root()
    os.chmod(cache_dir, 0o777)
    assert main(["cache", "ls"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("tilecute: error: ") and "writable" in err and "Traceback" not in err


@pytest.mark.parametrize("argv", [[], ["cache"], ["cache", "nope"], ["cache", "clear", "--older-than", "7x"],
                                  ["cache", "path"]])
def test_cli_usage_errors_exit_2(cache_dir, capsys, argv):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2 and "usage:" in capsys.readouterr().err


def test_python_dash_m_tilecute(cache_dir):
    path = cache.get_or_build(key_for(), fake_build())
    done = subprocess.run([sys.executable, "-m", "tilecute", "cache", "path", path.name[:8]],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == str(path), done.stderr
