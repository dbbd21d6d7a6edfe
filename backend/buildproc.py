"""A build run in a child process that a timeout kills whole (the autotuner's configs).

:func:`run` forks a child in a new session -- its own process group, which the processes
it starts (the launcher's g++, a cubin worker) join -- runs ``fn(*args)`` there and
returns its result (JSON: a path, a number), or raises the child's exception as
:class:`ChildError`.  Past ``timeout`` seconds the whole group is killed (SIGKILL) and
:class:`BuildTimeout` is raised, after what the child left is removed:

- its temporary files: the child runs with ``TMPDIR`` (and :mod:`tempfile`) pointed at a
  private folder made for it, so g++'s and its own temporary files go with that folder;
- the cache's build folders (``.tmp-<key>-*``) and the launcher runtime's
  (``.<digest>-*``) whose lock is now free: the child's file locks died with it, so none
  is left held, and a build folder whose lock is free belongs to no live process.

The fork needs no pickling: the child is a copy of this process, so a kernel factory
defined in ``__main__``, under decorators or inside a function builds as it is.  The
caller (a thread) waits on a pipe without the interpreter lock, so threads that launch
kernels meanwhile keep running.  The child must not use CUDA (a forked CUDA context does
not work): a build does not, given its arch (callers resolve it before the fork).

Without ``os.fork`` (not POSIX), or with ``TILECUTE_BUILD_PROCESS=0`` (one process, one
traceback; or a factory that uses CUDA itself, which a forked child cannot), ``fn`` runs
in a thread of this process: a timeout then returns to the caller
(:class:`BuildTimeout` with ``killed=False``) while that thread builds on, since a thread
cannot be killed.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from typing import Any, Callable, Optional

from .runtime import env_switch

__all__ = ["run", "kill", "BuildTimeout", "ChildError", "forks"]

_POLL = 0.25  # seconds between checks that the child is still alive


class BuildTimeout(Exception):
    """The build ran past its timeout; ``killed`` says whether its processes were killed."""

    def __init__(self, timeout: float, killed: bool = True):
        self.timeout, self.killed = timeout, killed
        super().__init__(f"took longer than timeout={timeout} s"
                         + (" (killed)" if killed else " (not killed: it builds in a thread)"))


class ChildError(Exception):
    """An exception raised in the child: its class name, message and traceback's end."""

    def __init__(self, type_name: str, message: str, tb: str = ""):
        self.type_name, self.message, self.child_traceback = type_name, message, tb
        super().__init__(f"{type_name}: {message}")


ENV = "TILECUTE_BUILD_PROCESS"


def forks() -> bool:
    """Whether builds run in killable child processes here."""
    return (hasattr(os, "fork") and hasattr(os, "setsid")
            and env_switch(ENV, True))


_live: dict = {}  # group name -> pids of its build processes running now
_live_lock = threading.Lock()
_killed: set = set()  # groups killed: their later builds die at once


def kill(group: str) -> int:
    """Kill the running build processes that :func:`run` started with ``group`` in this
    process (the tuner interrupted: Ctrl-C), each with its process group; their callers
    then clean up as after a crash.  Returns how many."""
    with _live_lock:
        _killed.add(group)  # a build of the group that starts later is killed at once
        pids = list(_live.get(group, ()))
    for pid in pids:
        _kill_group(pid)
    return len(pids)


def _kill_group(pid: int) -> None:
    # called only for an unreaped child: its pid (and group id) is not reused meanwhile
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):  # not yet in its own group
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


_imported = threading.Event()
_import_lock = threading.Lock()


def _import_build_path() -> None:
    """Import, once and before the first fork, every module a build may import: tilecute's
    own (but the CuTe DSL helpers, which only the cubin workers load) and the libraries its
    launcher build uses.  A module another thread is importing while this one forks stays
    half-initialized in the child, its import lock held by a thread the child does not have,
    and the child's first import of it waits forever (seen: a CI run hung in the tuner's
    tests).  With every such module imported first, no build imports one of them; a
    factory's own imports racing another thread's are the caller's (docs/autotune.md)."""
    if _imported.is_set():
        return
    import importlib
    import pkgutil

    with _import_lock:
        if _imported.is_set():
            return
        package = importlib.import_module(__name__.rpartition(".")[0])
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if ".runtime.cute" in info.name or info.name.endswith(("__main__", "cubin_worker")):
                continue
            try:
                importlib.import_module(info.name)
            except ImportError:
                pass  # an optional dependency (its module is then no build's)
        for name in ("jinja2", "filelock", "elftools.elf.elffile"):
            try:
                importlib.import_module(name)
            except ImportError:
                pass
        _imported.set()


# filelock 4.x (on Python 3.12+, through an audit hook) refuses os.fork while another thread
# is forking, or while the forking thread is taking or releasing one of its locks: a
# RuntimeError "os.fork is unsafe while filelock is changing descriptor ownership".  With a
# build per core, forks from the tuner's threads met (H100 machine, 16 cores: 6 of 8 configs
# failed).  tilecute's forks take turns; one that still meets another's (a fork of code
# other than tilecute's) is tried again, every millisecond for up to 5 s.
_FORK_TRIES = 5000
_fork_turn = threading.Lock()


def _fork() -> int:
    for attempt in range(_FORK_TRIES):
        try:
            with _fork_turn:
                return os.fork()
        except RuntimeError as e:
            if "filelock" not in str(e) or attempt == _FORK_TRIES - 1:
                raise
            time.sleep(0.001)
    raise AssertionError("unreachable")


def run(fn: Callable[..., Any], args: tuple = (), timeout: Optional[float] = None,
        group: Optional[str] = None) -> Any:
    """``fn(*args)`` in a child process (see the module docstring); ``timeout`` None or
    <= 0 means no limit; :func:`kill` of ``group`` kills it too."""
    limit = timeout if timeout is not None and timeout > 0 else None
    if not forks():
        return _run_in_thread(fn, args, timeout, limit)
    _import_build_path()
    tmp = tempfile.mkdtemp(prefix="tilecute-build-")
    for stream in (sys.stdout, sys.stderr):  # else the child would write their buffers again
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
    r, w = os.pipe()
    try:
        pid = _fork()
    except BaseException:
        os.close(r)
        os.close(w)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if pid == 0:  # the child: never returns
        _child(fn, args, r, w, tmp)
    os.close(w)
    if group is not None:
        with _live_lock:
            _live.setdefault(group, set()).add(pid)
            if group in _killed:
                _kill_group(pid)
    deadline = None if limit is None else time.monotonic() + limit
    data, size, killed, exited = b"", None, False, False
    try:
        # The result is framed (its length first), not ended by EOF: a sibling forked by
        # another thread meanwhile may hold this pipe's write end open.  Whether the child
        # died without one is polled.
        while size is None or len(data) < size:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                killed = True
                break
            if not select.select([r], [], [], _POLL if left is None else min(left, _POLL))[0]:
                if exited:
                    break
                # exited, not reaped (WNOWAIT): its pid stays its own until the waitpid below
                exited = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
                continue
            chunk = os.read(r, 1 << 16)
            if not chunk:
                break
            data += chunk
            if size is None and len(data) >= 8:
                size = 8 + int.from_bytes(data[:8], "little")
    finally:
        os.close(r)
        _kill_group(pid)  # the child (unreaped: its pid and group id are its own) and its group
        if group is not None:
            with _live_lock:
                _live[group].discard(pid)
                if not _live[group]:
                    del _live[group]
        status = os.waitpid(pid, 0)[1]
        complete = size is not None and len(data) >= size
        if not complete:
            shutil.rmtree(tmp, ignore_errors=True)
            remove_leftovers()
        elif os.listdir(tmp):  # a build with TILECUTE_DISABLE_CACHE: its entry lives here
            atexit.register(shutil.rmtree, tmp, True)
        else:
            os.rmdir(tmp)
    if killed:
        raise BuildTimeout(timeout)
    if not complete:
        raise ChildError("ChildDied", f"the build process {pid} ended without a result "
                         f"({_how(status)})")
    doc = json.loads(data[8:size])
    if not doc["ok"]:
        raise ChildError(doc["type"], doc["message"], doc.get("traceback", ""))
    return doc["value"]


def _run_in_thread(fn, args, timeout, limit):
    box: dict = {}

    def target():
        try:
            box["value"] = fn(*args)
        except BaseException as e:
            box["error"] = e

    thread = threading.Thread(target=target, daemon=True, name="tilecute-build")
    thread.start()
    thread.join(limit)
    if thread.is_alive():
        raise BuildTimeout(timeout, killed=False)
    if "error" in box:
        raise box["error"]
    return box["value"]


def _how(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit status {os.WEXITSTATUS(status)}"


def _child(fn, args, r: int, w: int, tmp: str) -> None:
    status = 1
    try:
        os.close(r)
        os.setsid()
        os.environ["TMPDIR"] = tmp
        tempfile.tempdir = tmp
        try:
            doc = {"ok": True, "value": fn(*args)}
        except BaseException as e:
            tb = "".join(traceback.format_exception(type(e), e, e.__traceback__)[-6:])
            doc = {"ok": False, "type": type(e).__name__, "message": str(e), "traceback": tb}
        payload = json.dumps(doc, default=str).encode()
        data = memoryview(len(payload).to_bytes(8, "little") + payload)
        while data:
            data = data[os.write(w, data):]
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (AttributeError, OSError, ValueError):
                pass
        status = 0
    finally:
        os._exit(status)  # no atexit handlers, no parent's finally blocks


def remove_leftovers() -> None:
    """Build folders of dead processes: the cache root's (whose key lock is free) and the
    launcher runtime's (whose lock is free)."""
    from .cache import cache_disabled, launcher_runtime_folder, remove_stale_builds
    from .toolchain import remove_stale_runtime_builds

    if not cache_disabled():
        try:
            remove_stale_builds()
        except Exception:  # an unsafe cache root: not ours to clean (the build said why)
            pass
    folder = launcher_runtime_folder()
    if folder is not None and folder.is_dir():
        remove_stale_runtime_builds(folder)
