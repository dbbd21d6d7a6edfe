"""The toolchain that turns a generated launcher into a shared library, and the versions
of every tool that shapes a cache entry.

Finds the C++ compiler and its version, the CUDA driver API headers and TVM FFI's build
info (include paths, ``libtvm_ffi``); builds a launcher (:func:`build_launcher`); and says
which tool versions a cache key must cover (:func:`tool_versions`, with a fingerprint of
tilecute's own sources).

The compiler is called directly, not through ``tvm_ffi.cpp.build``.  That helper would
serve (it takes the source, include paths, flags and a build folder), but it

* runs the ``ninja`` executable, which only apache-tvm-ffi's optional ``[cpp]`` extra
  installs and which tilecute does not otherwise need;
* writes ``build.ninja``, a lock file, ninja's logs, the object file and its dependency
  file into the build folder, and the library can only be named inside that folder;
* links ``-ltvm_ffi`` without an rpath.

One compiler call builds the library straight from the source with the same include paths
and library (``tvm_ffi.libinfo``), into a temporary name that is renamed into place.

The launcher is linked against libtvm_ffi and libdl only: the CUDA driver is opened at run
time, so the build needs only the CUDA *headers* (``cuda.h``, ``cudaTypedefs.h``), which the
``nvidia-cuda-runtime`` wheel ships.  The launcher runtime (``tilecute_launcher_runtime.cpp``,
the code every launcher shares) is compiled once per toolchain into an object
(:func:`launcher_runtime_object`) that each launcher links statically, so a launcher's
build compiles only its own lines.

Imports the standard library and ``tvm_ffi.libinfo`` (loaded without the rest of tvm_ffi);
of tilecute only ``__version__`` and the folders of ``tilecute.runtime`` and
``tilecute.templates`` (for the source fingerprint): never ``cache`` or ``driver``, no
CUTLASS, no torch.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from .runtime import env_switch, native

LAUNCHER_LIBRARY = "launcher.so"
# -O1, not -O2: on an H100 the launcher's per-call time at -O1 and -O2 was the same within
# noise (interleaved, min of 3: 3.76 vs 3.82 us for 3 tensors, 5.21 vs 5.43 us for 10
# tensors + 4 scalars), and -O1 builds in 2.3-2.7 s instead of 3.3 s (docs/performance.md)
CXX_FLAGS = ("-std=c++17", "-O1", "-fPIC", "-fvisibility=hidden")
_CUDA_HEADERS = ("cuda.h", "cudaTypedefs.h")


class LauncherBuildError(RuntimeError):
    """The C++ compiler failed on a launcher; the message holds its command and output."""


def cxx_compiler() -> str:
    """The C++ compiler: ``$CXX``, else ``g++``, else ``c++``."""
    try:
        return native.cxx_compiler()
    except native.NativeBuildError as e:
        raise LauncherBuildError(str(e)) from None


def cxx_version() -> str:
    """The first line of ``<compiler> --version`` (for the cache key)."""
    try:
        return native.compiler_version(cxx_compiler())
    except native.NativeBuildError as e:
        raise LauncherBuildError(str(e)) from None


def _has_cuda_headers(folder: Path) -> bool:
    return all((folder / h).is_file() for h in _CUDA_HEADERS)


@functools.lru_cache(maxsize=1)
def cuda_include_dir() -> Path:
    """The folder holding ``cuda.h`` and ``cudaTypedefs.h``.

    The ``nvidia-cuda-runtime`` wheel first (``nvidia/cu13/include`` for CUDA 13,
    ``nvidia/cuda_runtime/include`` for CUDA 12), so a user machine needs no toolkit; then
    ``$CUDA_HOME`` / ``$CUDA_PATH`` and ``/usr/local/cuda``.
    """
    candidates: list[Path] = []
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        root = Path(root)
        candidates += [root / "cu13" / "include", root / "cuda_runtime" / "include"]
        candidates += sorted(root.glob("*/include"))
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            candidates.append(Path(os.environ[var]) / "include")
    candidates.append(Path("/usr/local/cuda/include"))
    for folder in candidates:
        if _has_cuda_headers(folder):
            return folder
    raise LauncherBuildError(
        "no CUDA driver API headers (cuda.h, cudaTypedefs.h) found; install the "
        "nvidia-cuda-runtime wheel or set CUDA_HOME. Looked in: "
        + ", ".join(str(c) for c in candidates)
    )


@functools.lru_cache(maxsize=1)
def _tvm_ffi_libinfo():
    """``tvm_ffi.libinfo`` without importing ``tvm_ffi`` itself, whose ``__init__`` imports
    torch when torch is installed (about 2 s); libinfo.py needs only the standard library."""
    spec = importlib.util.find_spec("tvm_ffi")
    for root in (spec.submodule_search_locations or []) if spec else []:
        path = Path(root) / "libinfo.py"
        if path.is_file():
            module_spec = importlib.util.spec_from_file_location("_tilecute_tvm_ffi_libinfo", path)
            module = importlib.util.module_from_spec(module_spec)
            try:
                module_spec.loader.exec_module(module)
                return module
            except Exception:  # a layout we do not know: take the ordinary import
                break
    from tvm_ffi import libinfo

    return libinfo


def _include_dirs() -> list[str]:
    libinfo = _tvm_ffi_libinfo()
    return list(dict.fromkeys(  # ordered, without repeats (tvm_ffi ships dlpack in its own include)
        [libinfo.find_include_path(), libinfo.find_dlpack_include_path(), str(cuda_include_dir())]
    ))


def launcher_build_command(source: Path, output: Path, extra_cflags: tuple[str, ...] = (),
                           runtime: Path | None = None) -> list[str]:
    """The compiler command that builds ``source`` into the shared library ``output``,
    linking ``runtime``: the launcher runtime compiled once (``.o``, see
    :func:`launcher_runtime_object`) or its source (``.cpp``, compiled along); None links
    none (a source that does not include ``tilecute_launcher.h``)."""
    libinfo = _tvm_ffi_libinfo()
    tvm_ffi_lib = Path(libinfo.find_libtvm_ffi())
    return [
        cxx_compiler(),
        *CXX_FLAGS,
        *extra_cflags,
        *(f"-I{folder}" for folder in _include_dirs()),
        "-shared",
        str(source),
        *((str(runtime),) if runtime is not None else ()),
        "-o",
        str(output),
        f"-L{tvm_ffi_lib.parent}",
        f"-Wl,-rpath,{tvm_ffi_lib.parent}",
        "-Wl,-z,defs",  # an unresolved symbol fails the build, not the first load
        "-ltvm_ffi",
        "-ldl",
    ]


# -- the launcher runtime, compiled once ----------------------------------------------------
# templates/tilecute_launcher.h and tilecute_launcher_runtime.cpp, copied next to every
# launcher.cpp (tilecute.host.launcher.write_launcher)
from .templates import RUNTIME_HEADER, RUNTIME_SOURCE  # noqa: E402  (named with the templates)
RUNTIME_OBJECT = "tilecute_launcher_runtime.o"
ENV_SHARED_RUNTIME = "TILECUTE_SHARED_RUNTIME"
# flags of a launcher build that do not change the runtime's code: left out of its build, so
# that every entry's launcher (each remaps its own folder) links the same object
_PATH_MAP_FLAGS = ("-ffile-prefix-map=", "-fdebug-prefix-map=", "-fmacro-prefix-map=")


def _runtime_flags(extra_cflags: tuple[str, ...]) -> list[str]:
    return [*CXX_FLAGS, *(f for f in extra_cflags if not f.startswith(_PATH_MAP_FLAGS))]


@functools.lru_cache(maxsize=1)
def _header_versions() -> tuple[str, ...]:
    """What else a compiled runtime depends on: the TVM FFI release and the CUDA headers'
    version (an upgrade in place keeps the include folders' paths)."""
    import re

    cuda_h = (cuda_include_dir() / "cuda.h").read_text(errors="replace")
    found = re.search(r"#define\s+CUDA_VERSION\s+(\d+)", cuda_h)
    return (f"apache-tvm-ffi {native.dist_version('apache-tvm-ffi')}",
            f"CUDA_VERSION {found.group(1) if found else 'unknown'}")


def _runtime_digest(sources: Path, flags: list[str]) -> str:
    """What a compiled runtime depends on: the compiler and its version, the flags, the
    include folders and header versions, and the text of the runtime's header and code."""
    parts = [cxx_compiler(), cxx_version(), *flags, *_include_dirs(), *_header_versions(),
             (sources / RUNTIME_HEADER).read_text(), (sources / RUNTIME_SOURCE).read_text()]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]


def launcher_runtime_object(folder: Path, sources: Path, extra_cflags: tuple[str, ...] = ()) -> Path | None:
    """The launcher runtime in ``sources`` (its header and code, as :func:`write_launcher`
    copies them next to a launcher) compiled for this toolchain and ``extra_cflags``, as
    ``folder/<digest>/tilecute_launcher_runtime.o``, built on first use (about 1 s) and
    linked by every later launcher build with the same digest.  None when
    ``TILECUTE_SHARED_RUNTIME=0``, when another process is building it right now (that
    launcher compiles the runtime along with itself rather than wait), or when ``folder``
    cannot be made private: the launcher is the same either way, only its build is slower
    (docs/performance.md).

    Code the compiler links into every launcher is trusted like the cache's entries: its
    folder must be private (``check_private``), and it is published by one rename, with
    the header and code it was compiled from beside it.  A compile error is raised
    (:class:`LauncherBuildError`): the launcher's own build would fail the same way."""
    if not env_switch(ENV_SHARED_RUNTIME, True):
        return None
    sources = Path(sources)
    flags = _runtime_flags(tuple(extra_cflags))
    return native.build_once(
        Path(folder), _runtime_digest(sources, flags), RUNTIME_OBJECT,
        {name: sources / name for name in (RUNTIME_HEADER, RUNTIME_SOURCE)},
        lambda tmp: [cxx_compiler(), *flags, *(f"-I{d}" for d in _include_dirs()),
                     "-c", str(tmp / RUNTIME_SOURCE), "-o", str(tmp / RUNTIME_OBJECT)],
        "the launcher runtime", LauncherBuildError)


def remove_stale_runtime_builds(folder: Path) -> int:
    """Remove the launcher runtime's build folders (``.<digest>-*`` in ``folder``) that a
    killed process left: those whose ``<digest>.lock`` is free (held by no live process);
    returns how many."""
    from .runtime.entry import try_lock

    n = 0
    for p in Path(folder).iterdir():
        if not (p.name.startswith(".") and p.is_dir() and "-" in p.name):
            continue
        with try_lock(Path(folder) / f"{p.name[1:].split('-', 1)[0]}.lock") as free:
            if free:
                shutil.rmtree(p, ignore_errors=True)
                n += 1
    return n


def build_launcher(source: Path, out_dir: Path, *, extra_cflags: tuple[str, ...] = (),
                   runtime_folder: Path | None = None) -> Path:
    """Compile the launcher ``source`` into ``out_dir/launcher.so`` and return its path.

    The launcher runtime next to ``source`` (``tilecute_launcher_runtime.cpp``) is linked
    in: from ``runtime_folder`` (the cache's ``.launcher-runtime``), compiled there once
    per toolchain (:func:`launcher_runtime_object`), or else compiled along with the
    launcher (``runtime_folder`` None, or no shared object to be had).  A source with no
    runtime next to it is built alone.

    The library is written under a temporary name in ``out_dir`` and renamed into place,
    so a reader never sees a partial file.
    """
    source, out_dir = Path(source), Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / LAUNCHER_LIBRARY
    fd, tmp_name = tempfile.mkstemp(prefix=".launcher.", suffix=".so.tmp", dir=out_dir)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        runtime = source.parent / RUNTIME_SOURCE
        if not runtime.is_file():
            runtime = None
        elif runtime_folder is not None:
            runtime = launcher_runtime_object(runtime_folder, source.parent, tuple(extra_cflags)) or runtime
        cmd = launcher_build_command(source, tmp, tuple(extra_cflags), runtime)
        out = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if out.returncode != 0:
            raise LauncherBuildError(
                f"building the launcher {source} failed (exit {out.returncode}):\n"
                f"$ {' '.join(cmd)}\n{out.stdout}{out.stderr}"
            )
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


# -- tool versions (for the cache key) ------------------------------------------------------


def tool_versions() -> dict:
    """Versions of the tools that shape an entry: tilecute, nvidia-cutlass-dsl,
    apache-tvm-ffi (from package metadata, without importing them) and the C++ compiler
    (first line of ``--version``).  ``"none"`` for one that is missing.  Computed once per
    process."""
    return dict(_tool_versions())


@functools.lru_cache(maxsize=1)
def _tool_versions() -> tuple:
    versions = {name: native.dist_version(name)
                for name in ("tilecute", "nvidia-cutlass-dsl", "apache-tvm-ffi")}
    if versions["tilecute"] == "none":  # running from a source tree that is not installed
        from . import __version__

        versions["tilecute"] = __version__
    # the generated artifacts follow the code, not only the release number: a changed
    # template or codegen module with the same version must not reuse old entries
    versions["tilecute"] += f"+src.{source_fingerprint()}"
    try:
        versions["cxx"] = cxx_version()
    except Exception:  # no compiler: lookups still work, a build reports the real error
        versions["cxx"] = "none"
    return tuple(sorted(versions.items()))


# what the fingerprint reads: the sources that shape generated artifacts
_SOURCE_SUFFIXES = (".py", ".j2", ".h", ".cpp")


def source_fingerprint() -> str:
    """sha256 (12 hex digits) of tilecute's own sources (.py, the .j2 templates and the
    launcher runtime's .h and .cpp): compiler, runtime and templates, named by package so a
    source tree and an installed wheel agree (about 70 small files, read once per
    process)."""
    from . import runtime, templates

    roots = {"tilecute": Path(__file__).parent, "tilecute.runtime": Path(runtime.__file__).parent,
             "tilecute.templates": Path(templates.__file__).parent}
    digest = hashlib.sha256()
    for package, root in sorted(roots.items()):
        others = [r for r in roots.values() if r != root and root in r.parents]
        for f in sorted(root.rglob("*")):
            if f.suffix not in _SOURCE_SUFFIXES or "__pycache__" in f.parts or \
                    any(o in f.parents for o in others):
                continue
            digest.update(f"{package}/{f.relative_to(root).as_posix()}".encode() + b"\0")
            digest.update(f.read_bytes())
    return digest.hexdigest()[:12]
