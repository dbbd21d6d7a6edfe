"""A kernel's call path: its TVM FFI function called with torch tensors as DLTensor pointers.

TVM FFI's Python binding converts each torch tensor argument into an owning DLPack tensor
and an ``ffi.Tensor`` (two allocations, freed after the call); ``tilecute_fastcall``
(runtime/tilecute_fastcall.c, a CPython extension compiled once per toolchain beside the
launcher runtime, runtime/native.py) fills a DLTensor on the stack through torch's DLPack C
exchange API instead, passes torch's current stream as the launcher's explicit stream
argument (unless the call ends with its own int stream handle), and calls the same TVM FFI
function.  Any call it does not take whole (another argument count, keywords, a tensor
subclass, another framework's array, a big int) goes to the TVM FFI function itself.  docs/performance.md ("The call's argument conversion") has the numbers.

``TILECUTE_FAST_CALL=0`` turns it off (kernels then call the TVM FFI function directly).
"""

from __future__ import annotations

import functools
import sys
import threading
from pathlib import Path
from typing import Optional

from . import env_switch, native

_LOCK = threading.Lock()
_MODULE = ...  # the loaded extension, None where it cannot be had; ... until first asked


def _make_error(kind: str, message: str, backtrace: str) -> BaseException:
    """The Python exception TVM FFI's binding raises for a launcher's error."""
    from tvm_ffi.core import Error

    return Error(kind, message, backtrace).py_error()


ENV_FAST_CALL = "TILECUTE_FAST_CALL"
SOURCE = "tilecute_fastcall.c"  # beside this file
FLAGS = ("-x", "c", "-O2", "-fPIC", "-shared", "-fvisibility=hidden")
_ERRORS: list = []


def extension():
    """The ``tilecute_fastcall`` module, built on first use; None without one (no Python
    headers or compiler, ``TILECUTE_FAST_CALL=0``, a folder that cannot be made private)."""
    global _MODULE
    with _LOCK:
        if _MODULE is ...:
            _MODULE = _load()
        return _MODULE


def _load():
    import importlib.machinery
    import importlib.util

    folder = native.runtime_folder()
    path = library(folder) if folder is not None else None
    if path is None:
        return None
    loader = importlib.machinery.ExtensionFileLoader("tilecute_fastcall", str(path))
    spec = importlib.util.spec_from_file_location("tilecute_fastcall", str(path), loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


@functools.lru_cache(maxsize=None)
def library(folder: Path) -> Optional[Path]:
    """The extension compiled for this Python, TVM FFI release and compiler as
    ``folder/fastcall-<digest>/tilecute_fastcall<ext suffix>``, once per toolchain like the
    launcher runtime (about 0.3 s).  None where it cannot be had: no Python headers, no
    compiler or a failed build (:func:`build_error` says why), the build's lock held by
    another process, a folder that cannot be made private, or ``TILECUTE_FAST_CALL=0``;
    kernels then call TVM FFI's binding, which does the same, slower."""
    if not env_switch(ENV_FAST_CALL, True):
        return None
    try:
        return _build(Path(folder))
    except native.NativeBuildError as e:
        _ERRORS.append(str(e))
        return None


def build_error() -> Optional[str]:
    """The reason :func:`library` found none, when it was a missing header or compiler or a
    failed build; else None."""
    return _ERRORS[-1] if _ERRORS else None


def _build(folder: Path) -> Optional[Path]:
    import hashlib
    import sysconfig

    from tvm_ffi import libinfo

    source = Path(__file__).parent / SOURCE
    python_include = sysconfig.get_paths().get("include") or ""
    if not (Path(python_include) / "Python.h").is_file():
        raise native.NativeBuildError(f"no Python.h in {python_include!r} (the Python headers)")
    tvm_ffi_lib = Path(libinfo.find_libtvm_ffi())
    includes = [python_include, libinfo.find_include_path(), libinfo.find_dlpack_include_path()]
    output = "tilecute_fastcall" + (sysconfig.get_config_var("EXT_SUFFIX") or ".so")
    cxx = native.cxx_compiler()
    parts = [cxx, native.compiler_version(cxx), *FLAGS, *includes, output, str(tvm_ffi_lib),
             native.dist_version("apache-tvm-ffi"), source.read_text()]
    digest = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]
    return native.build_once(
        folder, f"fastcall-{digest}", output, {SOURCE: source},
        lambda tmp: [cxx, *FLAGS, *(f"-I{d}" for d in includes), str(tmp / SOURCE),
                     "-o", str(tmp / output), f"-L{tvm_ffi_lib.parent}",
                     f"-Wl,-rpath,{tvm_ffi_lib.parent}", "-ltvm_ffi"],
        "the kernels' call path (tilecute_fastcall)")


def wrap(func, num_args: int):
    """``func`` (a kernel's TVM FFI function of ``num_args`` parameters, its stream left
    out) behind the fast call path, or None where that cannot be had: torch not imported
    (no torch tensors to convert) or without the DLPack C exchange API's non-allocating
    conversion, or no extension (:func:`extension`)."""
    torch = sys.modules.get("torch")
    api = getattr(getattr(torch, "Tensor", None), "__dlpack_c_exchange_api__", None)
    if api is None:
        return None
    module = extension()
    if module is None or num_args > module.MAX_ARGS:
        return None
    return module.make(func, func.__chandle__(), torch.Tensor, api, _make_error, num_args,
                       bool(func.release_gil))
