"""A timeout kills the config, not the tuner (issue 20): a config whose build runs past
``timeout`` (per config, from its build's start) has its processes killed -- the build
process, the g++ it runs, the cubin worker -- within the timeout and a small margin; no
lock stays held, no build or staging folder stays behind; the other configs compile and
the tuner returns; a later run builds the killed configs from what the cache holds, which
is whole.

The slow steps are real ones, slowed by stand-ins while the file ``$AUTOTUNE_SLOW``
exists (tests/autotune_programs.slowed_program): the factory (it runs in the build
process), the launcher's g++ (``$CXX``, a script that starts a sleeping child) and the
cubin compile (a cubin worker that sleeps for the kernel ``slow_cubin``)."""

import concurrent.futures as cf
import getpass
import os
import shutil
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

import tilecute
from tilecute import autotuner as A
from tilecute import cache
from tilecute.runtime import cubin_worker
from tilecute.runtime.entry import LOCK, STAGING_PREFIX, try_lock

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import autotune_programs as P  # noqa: E402

TIMEOUT = 20.0
MARGIN = 5.0  # kill, reap and clean up after the deadline (polls every 0.25 s)

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="builds are killable where os.fork is")


def _gone(pid: int) -> bool:
    """No such process, or only its exit status is left (a zombie whose parent died and
    whose new parent has not reaped it yet)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


@pytest.fixture
def slowed(tmp_path, monkeypatch):
    """The environment of a slowed build: private cache, runtime and temp folders, the
    g++ and cubin worker stand-ins; yields the folder the slowed processes write their
    pids to."""
    pids = tmp_path / "pids"
    pids.mkdir()
    flag = tmp_path / "slow"
    flag.touch()
    gxx = shutil.which(os.environ.get("CXX") or "g++") or shutil.which("c++")
    cxx = tmp_path / "cxx"
    cxx.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        for a in "$@"; do
          case "$a" in
            *launcher.cpp)
              if [ -e {flag} ] && grep -q slow_gxx "$a"; then
                echo $$ > {pids}/gxx
                sleep 600 &
                echo $! > {pids}/gxx_child
                wait
              fi;;
          esac
        done
        exec {gxx} "$@"
        """))
    cxx.chmod(0o700)
    worker = tmp_path / "slow_worker.py"
    worker.write_text(textwrap.dedent(f"""\
        import os, time
        from tilecute.runtime import cubin_worker as W

        serve = W._serve

        def slowed(request):
            if os.path.exists({str(flag)!r}) and "slow_cubin" in open(request["source"]).read():
                with open({str(pids / "cubin_worker")!r}, "w") as f:
                    f.write(str(os.getpid()))
                time.sleep(600)
            return serve(request)

        W._serve = slowed
        W.main()
        """))
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    monkeypatch.setenv("TILECUTE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TILECUTE_LAUNCHER_RUNTIME_DIR", str(tmp_path / "runtime"))
    monkeypatch.setenv("CXX", str(cxx))
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    monkeypatch.setenv("AUTOTUNE_SLOW", str(flag))
    monkeypatch.setenv("AUTOTUNE_PIDS", str(pids))
    monkeypatch.setattr(cubin_worker, "_command", lambda: [sys.executable, str(worker)])
    cubin_worker._shutdown()  # idle workers started before are not slowed
    yield pids
    cubin_worker._shutdown()  # nor may a later test get a slowed one


def _leftovers(root: Path, tmp: Path) -> list[str]:
    """Held locks, build and staging folders and temporary files left in the cache."""
    found = [p.name for p in root.iterdir() if p.name.startswith((".tmp-", ".trash-"))]
    for lock in (root / ".locks").glob("*.lock"):
        with try_lock(lock) as free:
            if not free:
                found.append(f"held {lock.name}")
    for e in cache.list_entries():
        found += [f"{e.key[:12]}/{p.name}" for p in e.path.iterdir() if p.name.startswith(STAGING_PREFIX)]
        with try_lock(e.path / LOCK) as free:
            if not free:
                found.append(f"held {e.key[:12]}/{LOCK}")
    # (CuTe DSL keeps a cache in $TMPDIR/<user>/cutlass_python_cache: not a leftover)
    found += [f"tmp/{p.name}" for p in tmp.iterdir() if p.name != getpass.getuser()]
    problems = cache.verify_all()
    found += [f"{k[:12]}: {v}" for k, v in problems.items() if v]
    return found


def test_a_slow_build_is_killed_whole_and_the_tuner_goes_on(slowed, tmp_path):
    variants = ["scale", "slow_factory", "slow_gxx", "slow_cubin"]
    configs = [{"variant": v} for v in variants]
    with cf.ThreadPoolExecutor(max_workers=len(configs)) as pool:  # a user's executor
        tuned = tilecute.autotune(configs=configs, timeout=TIMEOUT, executor=pool)(P.slowed)
        start = time.monotonic()
        results = {r.config["variant"]: r for r in tuned.compile_all(1024)}
        wall = time.monotonic() - start
    assert results["scale"].kernel is not None, results["scale"].error
    assert Path(results["scale"].kernel.ensure_cubin()).stat().st_size > 0
    for v in variants[1:]:
        r = results[v]
        assert r.kernel is None and r.error == f"compile took longer than timeout={TIMEOUT} s (killed)", (v, r)
        assert TIMEOUT <= r.compile_s < TIMEOUT + MARGIN, (v, r.compile_s)
    assert wall < TIMEOUT + MARGIN + 10  # the tuner returned: the killed configs did not wait
    pids = {p.name: int(p.read_text()) for p in slowed.iterdir()}
    assert set(pids) == {"slow_factory", "gxx", "gxx_child", "cubin_worker"}, pids
    assert [n for n, pid in pids.items() if not _gone(pid)] == []
    root = Path(os.environ["TILECUTE_CACHE_DIR"])
    assert _leftovers(root, tmp_path / "tmp") == []

    # a second run, nothing slowed: the killed configs build from what the cache holds
    (tmp_path / "slow").unlink()
    again = tilecute.autotune(configs=configs, timeout=TIMEOUT)(P.slowed)
    second = {r.config["variant"]: r for r in again.compile_all(1024)}
    for v in variants:
        assert second[v].kernel is not None, (v, second[v].error)
        assert Path(second[v].kernel.ensure_cubin()).stat().st_size > 0
    assert second["scale"].kernel.path == results["scale"].kernel.path  # reused
    assert _leftovers(root, tmp_path / "tmp") == []


def test_the_timeout_is_per_config_and_the_default_executor_kills_too(slowed, tmp_path):
    """Three slow configs on the default executor (a thread per core, each driving a build
    process): each gets its own timeout from its build's start, so with fewer cores than
    configs the last starts late and is still given the whole timeout."""
    cores = os.cpu_count() or 2
    configs = [{"variant": "slow_factory", "block": b} for b in (128, 256, 512, 1024)[:cores + 1]]
    tuned = tilecute.autotune(configs=configs, timeout=TIMEOUT / 2)(P.slowed)
    start = time.monotonic()
    results = tuned.compile_all(1024)
    wall = time.monotonic() - start
    for r in results:
        assert r.error == f"compile took longer than timeout={TIMEOUT / 2} s (killed)", r
        assert TIMEOUT / 2 <= r.compile_s < TIMEOUT / 2 + MARGIN, r.compile_s
    assert wall >= TIMEOUT  # two rounds: a global deadline would have ended at TIMEOUT / 2
    assert _gone(int((slowed / "slow_factory").read_text()))
    assert _leftovers(Path(os.environ["TILECUTE_CACHE_DIR"]), tmp_path / "tmp") == []


def test_a_process_pool_executor_kills_in_its_workers(slowed, tmp_path):
    """A user's ProcessPoolExecutor gets each config's build task pickled (an importable
    factory); the task forks and kills its build inside the pool's worker, which lives on."""
    import multiprocessing

    configs = [{"variant": "scale"}, {"variant": "slow_factory"}]
    with cf.ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("fork")) as pool:
        tuned = tilecute.autotune(configs=configs, timeout=TIMEOUT / 2, executor=pool)(P.slowed)
        results = tuned.compile_all(1024)
        assert pool.submit(os.getpid).result() > 0  # the pool is not broken
    assert results[0].kernel is not None, results[0].error
    assert results[1].error == f"compile took longer than timeout={TIMEOUT / 2} s (killed)"
    assert TIMEOUT / 2 <= results[1].compile_s < TIMEOUT / 2 + MARGIN
    assert _gone(int((slowed / "slow_factory").read_text()))
    assert _leftovers(Path(os.environ["TILECUTE_CACHE_DIR"]), tmp_path / "tmp") == []


def test_no_timeout_means_no_limit_as_in_tilelang(tmp_path, monkeypatch):
    """TileLang bounds a config only when ``timeout > 0``."""
    monkeypatch.setenv("TILECUTE_CACHE_DIR", str(tmp_path / "cache"))
    job = A._Job(P.scale_program, None, (1024,), {}, {"block": 512}, [-1], "sm_90a", {}, 0)
    got = A._build_config(job)
    assert "path" in got, got


def test_the_decorators_timeout_defaults_to_tilelangs_100_s():
    """``@autotune`` without ``timeout=`` bounds each config at TileLang's default, 100 s;
    ``timeout=None`` still means no limit."""
    assert tilecute.autotune(configs=[{"block": 256}])(P.scale).timeout == 100
    assert tilecute.autotune(configs=[{"block": 256}], timeout=None)(P.scale).timeout is None


def test_without_a_build_process_a_timeout_reports_and_leaves_the_thread(tmp_path, monkeypatch):
    """TILECUTE_BUILD_PROCESS=0 (and platforms without os.fork): the tuner goes on at the
    timeout and says the build was not killed."""
    import threading

    monkeypatch.setenv("TILECUTE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TILECUTE_BUILD_PROCESS", "0")
    tuned = tilecute.autotune(configs=[{"block": 256}, {"block": 512, "delay": 8.0}],
                              timeout=4)(P.scale)
    start = time.monotonic()
    results = tuned.compile_all(1024)
    assert time.monotonic() - start < 8.0
    assert results[0].kernel is not None, results[0].error
    assert results[1].error == "compile took longer than timeout=4 s (not killed: it builds on in a thread)"
    for t in threading.enumerate():  # let it finish here, in this test's cache
        if t.name == "tilecute-build":
            t.join(60)


def test_an_interrupted_tuning_run_kills_its_builds(slowed, tmp_path):
    """buildproc.kill(group), what compile_all does when interrupted (Ctrl-C): the running
    builds of that run die with their process groups and their callers clean up; a build
    of the group started afterwards dies at once; other groups are untouched."""
    import threading

    from tilecute import buildproc

    job = A._Job(P.slowed_program, None, (1024,), {}, {"variant": "slow_factory"}, [-1],
                 "sm_90a", {}, None, "run-1")
    got = {}
    thread = threading.Thread(target=lambda: got.update(A._build_config(job)))
    thread.start()
    pid_file = slowed / "slow_factory"
    for _ in range(200):
        if pid_file.exists() and pid_file.read_text():
            break
        time.sleep(0.1)
    pid = int(pid_file.read_text())
    assert buildproc.kill("another-run") == 0 and not _gone(pid)
    assert buildproc.kill("run-1") == 1
    thread.join(10)
    assert not thread.is_alive() and _gone(pid)
    assert got["error"].startswith("compile failed: ChildDied") and "signal 9" in got["error"]
    assert A._build_config(job)["error"].startswith("compile failed: ChildDied")  # at once
    assert _leftovers(Path(os.environ["TILECUTE_CACHE_DIR"]), tmp_path / "tmp") == []


def _add(a, b):
    return a + b


def test_a_fork_refused_while_filelock_changes_hands_is_tried_again(monkeypatch):
    """filelock's audit hook refuses os.fork while any thread is taking or releasing one of
    its locks (seen on a 16-core machine: 6 of 8 configs failed); the fork waits it out."""
    from tilecute import buildproc

    real, refused = os.fork, []

    def fork():
        if len(refused) < 3:
            refused.append(1)
            raise RuntimeError("os.fork is unsafe while filelock is changing descriptor ownership")
        return real()

    monkeypatch.setattr(buildproc.os, "fork", fork)
    assert buildproc.run(_add, (2, 3)) == 5
    assert len(refused) == 3


def test_forks_from_several_threads_take_turns(monkeypatch):
    """Builds started from several threads at once never fork at the same moment (filelock
    refuses a fork while another thread forks, on Python 3.12+)."""
    import threading

    from tilecute import buildproc

    real, busy, overlaps = os.fork, [0], []
    guard = threading.Lock()

    def fork():
        with guard:
            busy[0] += 1
            overlaps.append(busy[0] > 1)
        time.sleep(0.005)  # a slow fork: another thread's would start meanwhile
        try:
            return real()
        finally:
            with guard:
                busy[0] -= 1

    monkeypatch.setattr(buildproc.os, "fork", fork)
    with cf.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda i: buildproc.run(_add, (i, 1)), range(16)))
    assert results == list(range(1, 17))
    assert len(overlaps) == 16 and not any(overlaps)
