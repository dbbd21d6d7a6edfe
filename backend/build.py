"""Build a generated C++ launcher into a shared library that ``tvm_ffi.load_module`` loads.

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
``nvidia-cuda-runtime`` wheel ships.

Imports the standard library and ``tvm_ffi.libinfo`` (loaded without the rest of tvm_ffi);
no CUTLASS, no torch.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

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
    env = os.environ.get("CXX")
    if env:
        return env
    for name in ("g++", "c++"):
        found = shutil.which(name)
        if found:
            return found
    raise LauncherBuildError("no C++ compiler: set CXX or install g++")


@functools.lru_cache(maxsize=None)
def _compiler_version(compiler: str) -> str:
    out = subprocess.run([compiler, "--version"], capture_output=True, text=True, check=False)
    if out.returncode != 0 or not out.stdout.strip():
        raise LauncherBuildError(f"`{compiler} --version` failed: {out.stderr.strip()}")
    return out.stdout.splitlines()[0].strip()


def cxx_version() -> str:
    """The first line of ``<compiler> --version`` (for the cache key)."""
    return _compiler_version(cxx_compiler())


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


def launcher_build_command(source: Path, output: Path, extra_cflags: tuple[str, ...] = ()) -> list[str]:
    """The compiler command that builds ``source`` into the shared library ``output``."""
    libinfo = _tvm_ffi_libinfo()
    tvm_ffi_lib = Path(libinfo.find_libtvm_ffi())
    includes = dict.fromkeys(  # ordered, without repeats (tvm_ffi ships dlpack in its own include)
        [libinfo.find_include_path(), libinfo.find_dlpack_include_path(), str(cuda_include_dir())]
    )
    return [
        cxx_compiler(),
        *CXX_FLAGS,
        *extra_cflags,
        *(f"-I{folder}" for folder in includes),
        "-shared",
        str(source),
        "-o",
        str(output),
        f"-L{tvm_ffi_lib.parent}",
        f"-Wl,-rpath,{tvm_ffi_lib.parent}",
        "-Wl,-z,defs",  # an unresolved symbol fails the build, not the first load
        "-ltvm_ffi",
        "-ldl",
    ]


def build_launcher(source: Path, out_dir: Path, *, extra_cflags: tuple[str, ...] = ()) -> Path:
    """Compile the launcher ``source`` into ``out_dir/launcher.so`` and return its path.

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
        cmd = launcher_build_command(source, tmp, tuple(extra_cflags))
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


# -- whole entries and ahead-of-time cubins ---------------------------------------------------


def write_sources(func, arch: str, folder: Path, options: dict | None = None):
    """Lower ``func`` and write its generated sources into ``folder``: ``ir.json``,
    ``abi.json``, ``kernel_cute.py``, ``launcher.cpp`` and ``host.py``.  Returns the plan."""
    from . import __version__
    from .codegen.cute import emit_cute
    from .host.host_module import render_host_module
    from .host.launcher import render_launcher
    from .ir.serialize import to_json
    from .transform.lower import lower

    plan = lower(func, arch, options)
    folder = Path(folder)
    files = {
        "ir.json": to_json(plan.func),
        "abi.json": plan.abi.to_json(),
        "kernel_cute.py": emit_cute(plan),
        "launcher.cpp": render_launcher(plan.abi, tilecute_version=__version__),
        "host.py": render_host_module(plan.abi, arch=arch, tilecute_version=__version__),
    }
    for name, text in files.items():
        (folder / name).write_text(text)
    return plan


def build_entry(func, arch: str, options: dict, folder: Path) -> dict:
    """Build every artifact of a cache entry except the cubin (made on first use) into
    ``folder``; return the manifest fields the cache records."""
    import json

    from .cache import tool_versions
    from .ir.serialize import canonical_json

    plan = write_sources(func, arch, folder, options)
    build_launcher(Path(folder) / "launcher.cpp", Path(folder))
    return {"function": func.name, "arch": arch, "options": options,
            "versions": tool_versions(), "ir": json.loads(canonical_json(func)),
            "abi": plan.abi.to_dict()}


def build_cubin(func, arch: str | None = None, out_dir: str | None = None,
                options: dict | None = None):
    """Generate ``func``'s CuTe DSL source and compile it to a cubin for ``arch`` (default:
    the GPU's, else ``TILECUTE_ARCH``), without a GPU if need be.  The cubin's kernels and
    parameter tables are checked against the launch ABI (``ABIMismatch`` on disagreement).
    Returns a :class:`tilecute.runtime.cubin.CubinInfo` (path, kernel names, parameter
    tables)."""
    from .codegen.cute import emit_cute
    from .runtime.cubingen import default_arch, produce_cubin
    from .transform.lower import lower

    arch = arch or default_arch()
    folder = Path(out_dir or tempfile.mkdtemp(prefix=f"tilecute-{func.name}-"))
    folder.mkdir(parents=True, exist_ok=True)
    plan = lower(func, arch, options)
    source = folder / "kernel_cute.py"
    source.write_text(emit_cute(plan))
    return produce_cubin(str(source), plan.abi, arch, str(folder))
