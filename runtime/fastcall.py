"""A kernel's call path: its TVM FFI function called with torch tensors as DLTensor pointers.

TVM FFI's Python binding converts each torch tensor argument into an owning DLPack tensor
and an ``ffi.Tensor`` (two allocations, freed after the call); ``tilecute_fastcall``
(templates/tilecute_fastcall.c, a CPython extension compiled once per toolchain beside the
launcher runtime) fills a DLTensor on the stack through torch's DLPack C exchange API
instead, passes torch's current stream as the launcher's explicit stream argument (unless
the call ends with its own int stream handle), and calls the same TVM FFI function.  Any call it does not take whole (another argument count,
keywords, a tensor subclass, another framework's array, a big int) goes to the TVM FFI
function itself.  docs/performance.md ("The call's argument conversion") has the numbers.

``TILECUTE_FAST_CALL=0`` turns it off (kernels then call the TVM FFI function directly).
"""

from __future__ import annotations

import sys
import threading

_LOCK = threading.Lock()
_MODULE = ...  # the loaded extension, None where it cannot be had; ... until first asked


def _make_error(kind: str, message: str, backtrace: str) -> BaseException:
    """The Python exception TVM FFI's binding raises for a launcher's error."""
    from tvm_ffi.core import Error

    return Error(kind, message, backtrace).py_error()


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

    from ..cache import launcher_runtime_folder
    from ..toolchain import fastcall_library

    folder = launcher_runtime_folder()
    path = fastcall_library(folder) if folder is not None else None
    if path is None:
        return None
    loader = importlib.machinery.ExtensionFileLoader("tilecute_fastcall", str(path))
    spec = importlib.util.spec_from_file_location("tilecute_fastcall", str(path), loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


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
