"""tilecute: a TileLang-style compiler backend for NVIDIA's CuTe DSL.

Importing ``tilecute`` is cheap: no CUTLASS, no torch, no compiler modules; the public
entry points load what they need on first use.
"""

__version__ = "0.1.0"

_LAZY = {
    "compile": ("tilecute.api", "compile"),
    "jit": ("tilecute.api", "jit"),
    "load": ("tilecute.runtime.kernel", "load"),
    "build_cubin": ("tilecute.driver", "build_cubin"),
    "lower": ("tilecute.transform.pipeline", "lower"),
    "PassConfigKey": ("tilecute.options", "PassConfigKey"),
    "TensorSupplyType": ("tilecute.utils", "TensorSupplyType"),
    "autotune": ("tilecute.autotuner", "autotune"),
}
# submodules reachable as attributes after a bare `import tilecute` (TileLang's layout)
_SUBMODULES = ("profiler", "utils", "testing", "language", "options", "autotuner", "layout")


def cdiv(a, b):
    """``ceil(a / b)`` for ints (TileLang's ``tilelang.cdiv``)."""
    return -(-a // b)


def __getattr__(name):
    import importlib

    if name in _LAZY:
        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    if name in _SUBMODULES:
        return importlib.import_module(f"tilecute.{name}")
    raise AttributeError(f"module 'tilecute' has no attribute {name!r}")


__all__ = ["__version__", "cdiv", *_LAZY]
