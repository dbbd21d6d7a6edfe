"""TileLang's ``tilelang.env`` names that programs read: ``TILELANG_CACHE_DIR`` is
tilecute's cache folder (``$TILECUTE_CACHE_DIR``, else ``~/.cache/tilecute``; also
``TILECUTE_CACHE_DIR``).  Other TileLang settings (its TVM paths, ``CUTLASS_INCLUDE_DIR``
...) are TileLang's own: reading one is an error naming it."""

from __future__ import annotations

from .refusals import Refused

_OWN = ("TILELANG_PACKAGE_PATH", "TILELANG_TEMPLATE_PATH", "CUTLASS_INCLUDE_DIR",
        "COMPOSABLE_KERNEL_INCLUDE_DIR", "TVM_PYTHON_PATH", "TVM_LIBRARY_PATH", "CUDA_HOME",
        "ROCM_HOME", "TILELANG_AUTO_TUNING_CPU_UTILITIES", "TILELANG_AUTO_TUNING_CPU_COUNTS",
        "TILELANG_AUTO_TUNING_MAX_CPU_COUNT", "TILELANG_CLEAR_CACHE", "TILELANG_TMP_DIR",
        "TILELANG_PRINT_ON_COMPILATION", "env")


def __getattr__(name: str):
    if name in ("TILELANG_CACHE_DIR", "TILECUTE_CACHE_DIR"):
        from .cache import cache_root

        return str(cache_root())
    if name in _OWN:
        return Refused(f"tilelang.env.{name}", "a TileLang setting tilecute does not have "
                       "(its settings are TILECUTE_* environment variables: docs/cache.md)")
    raise AttributeError(f"module 'tilecute.env' has no attribute {name!r}")
