"""Native code built once per toolchain and shared by every cache root: the folder it lives
in, the C++ compiler, and the build-once step (a private temporary folder, the compiler
run there, one rename to publish).  The compiler's launcher runtime
(``tilecute.toolchain.launcher_runtime_object``) and the kernels' call path
(``runtime/fastcall.py``) are built through it.  Standard library only."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Callable, Optional

from .entry import UnsafeCacheError, check_private, try_lock

ENV_RUNTIME_DIR = "TILECUTE_LAUNCHER_RUNTIME_DIR"
RUNTIME_FOLDER = ".launcher-runtime"


class NativeBuildError(RuntimeError):
    """The compiler is missing or failed; the message holds its command and output."""


def runtime_folder() -> Optional[Path]:
    """Where native code is compiled once per toolchain: ``$TILECUTE_LAUNCHER_RUNTIME_DIR``,
    else ``~/.cache/tilecute/.launcher-runtime`` -- the default cache root's, whatever
    ``TILECUTE_CACHE_DIR`` says, so that many cache roots (a test suite's, a tuner's fresh
    folders) share one.  None when its parent cannot be made."""
    folder = Path(os.environ.get(ENV_RUNTIME_DIR)
                  or Path.home() / ".cache" / "tilecute" / RUNTIME_FOLDER).expanduser()
    if not folder.is_absolute():
        folder = Path.cwd() / folder
    try:
        if not folder.parent.is_dir():
            make_private_dirs(folder.parent)
        return folder
    except OSError:
        return None


def make_private_dirs(folder: Path) -> None:
    """``folder`` and its missing parents, each made with mode 0700."""
    missing = []
    p = folder
    while not p.exists():
        missing.append(p)
        p = p.parent
    for p in reversed(missing):
        try:
            p.mkdir(mode=0o700)
            os.chmod(p, 0o700)  # mkdir's mode is cut by the umask
        except FileExistsError:  # another process made it meanwhile; check_private judges it
            pass


def dist_version(dist: str) -> str:
    """The installed version of distribution ``dist``, or ``"none"``."""
    import importlib.metadata

    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "none"


def cxx_compiler() -> str:
    """The C++ compiler: ``$CXX``, else ``g++``, else ``c++``."""
    env = os.environ.get("CXX")
    if env:
        return env
    for name in ("g++", "c++"):
        found = shutil.which(name)
        if found:
            return found
    raise NativeBuildError("no C++ compiler: set CXX or install g++")


@functools.lru_cache(maxsize=None)
def compiler_version(compiler: str) -> str:
    """The first line of ``<compiler> --version``."""
    out = subprocess.run([compiler, "--version"], capture_output=True, text=True, check=False)
    if out.returncode != 0 or not out.stdout.strip():
        raise NativeBuildError(f"`{compiler} --version` failed: {out.stderr.strip()}")
    return out.stdout.splitlines()[0].strip()


def build_once(folder: Path, name: str, output: str, sources: dict,
               command: Callable[[Path], list], what: str,
               error: type = NativeBuildError) -> Optional[Path]:
    """``folder/name/output``, built on first use: ``sources`` (file name -> path) copied
    into a private temporary folder, ``command(tmp)`` run there (the object naming its
    sources under the folder it is published as), the folder published by one rename.
    None when another process holds the build's lock right now, or when ``folder`` cannot
    be made private; a failed command raises ``error``.  Code built here is trusted like
    the cache's entries: its folder must be private (``check_private``)."""
    target = folder / name
    built = target / output
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        check_private(folder)
        if built.is_file():
            check_private(target)
            return built
        with try_lock(folder / f"{target.name}.lock") as held:
            if not held:
                return None
            if built.is_file():
                return built
            tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=folder))
            try:
                for file, path in sources.items():
                    shutil.copyfile(path, tmp / file)
                cmd = command(tmp)
                cmd[1:1] = [f"-ffile-prefix-map={tmp}={target}"]
                out = subprocess.run(cmd, capture_output=True, text=True, check=False)
                if out.returncode != 0:
                    raise error(f"building {what} failed (exit {out.returncode}):\n"
                                f"$ {' '.join(cmd)}\n{out.stdout}{out.stderr}")
                os.replace(tmp, target)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        return built
    except (OSError, UnsafeCacheError):
        return None
