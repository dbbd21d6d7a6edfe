"""tilecute: a TileLang-style compiler backend for NVIDIA's CuTe DSL.

Importing ``tilecute`` is cheap: no CUTLASS, no torch, no compiler modules; the public
entry points load what they need on first use.
"""

__version__ = "0.1.0"

_LAZY = {
    "compile": ("tilecute.api", "compile"),
    "par_compile": ("tilecute.api", "par_compile"),
    "load": ("tilecute.runtime.kernel", "load"),
    "build_cubin": ("tilecute.driver", "build_cubin"),
    "lower": ("tilecute.engine", "lower"),
    "PassConfigKey": ("tilecute.options", "PassConfigKey"),
    "TensorSupplyType": ("tilecute.utils", "TensorSupplyType"),
    "autotune": ("tilecute.autotuner", "autotune"),
    # TileLang's other top-level names (docs/host-api.md)
    "JITKernel": ("tilecute.jit.kernel", "JITKernel"),
    "Profiler": ("tilecute.profiler", "Profiler"),
    "deprecated": ("tilecute.utils", "deprecated"),
    "next_power_of_2": ("tilecute.math", "next_power_of_2"),
    "DataType": ("tilecute.tvm", "DataType"),
    "register_cuda_postproc": ("tilecute.engine", "register_cuda_postproc"),
    "register_hip_postproc": ("tilecute.engine", "register_hip_postproc"),
    "register_c_postproc": ("tilecute.engine", "register_c_postproc"),
    "Layout": ("tilecute.layout", "Layout"),
    "Fragment": ("tilecute.layout", "Fragment"),
}
# submodules reachable as attributes after a bare `import tilecute` (TileLang's layout)
_SUBMODULES = ("profiler", "utils", "testing", "language", "options", "autotuner", "layout",
               "transform", "math", "env", "engine", "contrib", "cuda", "carver", "tvm", "cache",
               "jit", "tileop")  # tilecute.jit: the decorator, callable, and TileLang's jit package


def cdiv(a, b):
    """``ceil(a / b)`` for ints (TileLang's ``tilelang.cdiv``)."""
    return -(-a // b)


def disable_cache() -> None:
    """TileLang's ``tilelang.disable_cache()``: kernels compiled from now on in this process
    skip the on-disk cache (``TILECUTE_DISABLE_CACHE=1``: built in a temporary folder)."""
    import os

    os.environ["TILECUTE_DISABLE_CACHE"] = "1"


def enable_cache() -> None:
    """Undo :func:`disable_cache` (TileLang's ``tilelang.enable_cache()``)."""
    import os

    os.environ.pop("TILECUTE_DISABLE_CACHE", None)


def is_cache_enabled() -> bool:
    import importlib  # (the package root imports no stage of the pipeline: a lazy name)

    return not importlib.import_module("tilecute.cache").cache_disabled()


def set_log_level(level) -> None:
    """TileLang's ``tilelang.set_log_level``: the level of the ``tilecute`` logger
    (``"WARNING"``, ``logging.INFO`` ...)."""
    import logging

    logging.getLogger("tilecute").setLevel(level.upper() if isinstance(level, str) else level)


# `import tvm` (no TVM installed) finds tilecute.tvm, TileLang modules tilecute lacks import
# with every name refused (tilecute.refusals, standard library only; last on sys.meta_path,
# so real modules win; neither torch nor tvm_ffi probes for `tvm`)
from .refusals import install_module_finder as _install  # noqa: E402

_install()


def __getattr__(name):
    import importlib

    if name in _LAZY:
        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    if name in _SUBMODULES:
        return importlib.import_module(f"tilecute.{name}")
    if name == "dtypes":  # (TileLang's tilelang.dtypes is its language's dtypes module)
        return importlib.import_module("tilecute.language.dtypes")
    raise AttributeError(f"module 'tilecute' has no attribute {name!r}")


__all__ = ["__version__", "cdiv", "disable_cache", "enable_cache", "is_cache_enabled",
           "set_log_level", "jit", *_LAZY]
