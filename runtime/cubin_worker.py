"""Cubins compiled out of process, so that compiling never stalls launching.

``cute.compile`` holds the Python interpreter for the seconds a kernel takes to compile;
run in the process that also launches kernels, it stops every other thread (a serving
process compiling a new shape in the background, the autotuner's profiling).  A cache
entry's lazy cubin step (its host module's ``ensure_cubin``) therefore goes to a worker:
a child process (``python -m tilecute.runtime.cubin_worker``) that imports CUTLASS once and
compiles one request at a time, read as JSON lines on its stdin, answered on its stdout.
The caller waits on a pipe, without the interpreter lock.  A process keeps its idle
workers for the next request and starts another when all are busy.

``TILECUTE_CUBIN_WORKER=0`` compiles in the calling process instead (one process, one
traceback, for debugging a code-generation error).  ``tilecute.build_cubin`` (ahead of
time, no launches to protect) compiles in process.

``with deadline(seconds):`` bounds the cubin compiles of the calling thread (the
autotuner's ``timeout`` per config): a worker still compiling then is killed with its
process group (each worker leads its own) and :class:`CubinTimeout` is raised, so the
caller's ``publish_artifact`` removes its staging folder and releases the entry's lock.
(An in-process compile, ``TILECUTE_CUBIN_WORKER=0``, cannot be bounded.)

Imports the standard library only; the worker imports :mod:`.cubingen`.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
import traceback
from typing import Optional

from . import env_switch

ENV = "TILECUTE_CUBIN_WORKER"


class CubinCompileError(RuntimeError):
    """``cute.compile`` failed in the cubin worker; the message carries its error and the
    end of its traceback."""


class CubinTimeout(CubinCompileError):
    """The compile ran past the calling thread's :func:`deadline`; its worker was killed."""


def enabled() -> bool:
    return env_switch(ENV, True)


_deadline = threading.local()


@contextlib.contextmanager
def deadline(seconds: Optional[float]):
    """Inside, a cubin compile of this thread still running ``seconds`` from now (None:
    no limit) is killed and raises :class:`CubinTimeout`."""
    before = getattr(_deadline, "at", None)
    _deadline.at = None if seconds is None else time.monotonic() + max(0.0, seconds)
    try:
        yield
    finally:
        _deadline.at = before


def _command() -> list:
    """How a worker is started (a test starts a slowed one instead)."""
    return [sys.executable, "-m", "tilecute.runtime.cubin_worker"]


class _Worker:
    def __init__(self):
        self.owner = os.getpid()  # a forked child must not share its parent's pipes
        env = dict(os.environ)
        # the child imports tilecute as this process does (tests and users may extend sys.path)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        # its own process group (session), so that a kill takes what it started too
        self.proc = subprocess.Popen(_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     env=env, text=True, bufsize=1, start_new_session=True)

    def alive(self) -> bool:
        return self.owner == os.getpid() and self.proc.poll() is None

    def kill(self) -> None:
        """The worker and its process group, at once."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            self.proc.kill()
        self.proc.wait()

    def ask(self, request: dict) -> dict:
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        at = getattr(_deadline, "at", None)
        if at is not None:  # one reply line per request: nothing is buffered before it
            left = at - time.monotonic()
            if left <= 0 or not select.select([self.proc.stdout], [], [], left)[0]:
                self.kill()
                raise CubinTimeout(f"compiling {request['source']} ran past its deadline; "
                                   f"the cubin worker (pid {self.proc.pid}) was killed")
        line = self.proc.stdout.readline()  # the wait: no interpreter lock held
        if not line:
            raise CubinCompileError(f"the cubin worker (pid {self.proc.pid}) exited with "
                                    f"code {self.proc.wait()} while compiling "
                                    f"{request['source']}")
        return json.loads(line)


_idle: list[_Worker] = []
_lock = threading.Lock()


def _take() -> _Worker:
    with _lock:
        while _idle:
            w = _idle.pop()
            if w.alive():
                return w
    return _Worker()


def prestart(n: int) -> int:
    """Start workers until ``n`` are idle (each imports CUTLASS at once, in its own process,
    while the caller goes on), so that ``n`` builds running at once each find a warm one:
    the autotuner calls it before its parallel builds.  Returns how many were started."""
    if not enabled():
        return 0
    with _lock:
        _idle[:] = [w for w in _idle if w.alive()]
        new = [_Worker() for _ in range(max(0, n - len(_idle)))]
        _idle.extend(new)
    return len(new)


def _after_fork_in_child() -> None:
    """A forked child (the autotuner's build process) starts its own workers: the parent's
    pipes are the parent's, and the lock may have been held by a thread the fork left
    behind."""
    global _lock
    _lock = threading.Lock()
    _idle.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


@atexit.register
def _shutdown() -> None:
    """Close the idle workers' stdin (each then exits) and reap them."""
    with _lock:
        workers, _idle[:] = list(_idle), []
    for w in workers:
        if w.owner != os.getpid():
            continue
        try:
            w.proc.stdin.close()
            w.proc.wait(timeout=10)
        except Exception:
            w.proc.kill()
        w.proc.stdout.close()


def produce_cubin(source_path: str, abi_path: str, arch: str, staging_dir: str,
                  name: str = "kernel.cubin", ptxas_options: str = "") -> str:
    """:func:`tilecute.runtime.cubingen.produce_cubin` in a worker process (or here, with
    ``TILECUTE_CUBIN_WORKER=0``); returns the cubin's path.  The ABI and arch checks and
    their errors are the same."""
    request = {"source": str(source_path), "abi": str(abi_path), "arch": arch,
               "staging": str(staging_dir), "name": name, "ptxas_options": ptxas_options}
    if not enabled():
        return _serve(request)["path"]
    worker = _take()
    try:
        reply = worker.ask(request)
    except BaseException:
        worker.kill()
        raise
    with _lock:
        _idle.append(worker)
    if reply["ok"]:
        return reply["path"]
    raise _error(reply)


def _error(reply: dict) -> Exception:
    from .arch import TargetError
    from .cubin import ABIMismatch

    known = {"ABIMismatch": ABIMismatch, "TargetError": TargetError}
    cls = known.get(reply["type"])
    if cls is not None:
        return cls(reply["message"])
    return CubinCompileError(f"{reply['type']}: {reply['message']}\n"
                             f"(in the cubin worker; TILECUTE_CUBIN_WORKER=0 compiles in "
                             f"this process)\n{reply['traceback']}")


def _serve(request: dict) -> dict:
    from .abi import LaunchABI
    from .cubingen import produce_cubin as compile_here

    with open(request["abi"]) as f:
        abi = LaunchABI.from_json(f.read())
    info = compile_here(request["source"], abi, request["arch"], request["staging"],
                        request["name"], request.get("ptxas_options", ""))
    return {"ok": True, "path": info.path}


def main() -> None:
    out = sys.stdout
    sys.stdout = sys.stderr  # what compiling prints goes to stderr, never into the replies
    try:  # CUTLASS imported now, while no request waits (prestart: before the first)
        import cutlass.cute  # noqa: F401
    except Exception:  # reported by the request that needs it
        pass
    for line in sys.stdin:
        request = json.loads(line)
        try:
            reply = _serve(request)
        except Exception as e:  # reported to the caller, who raises it
            tb = "".join(traceback.format_exception(type(e), e, e.__traceback__)[-6:])
            reply = {"ok": False, "type": type(e).__name__, "message": str(e), "traceback": tb}
        out.write(json.dumps(reply) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
