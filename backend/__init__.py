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
}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'tilecute' has no attribute {name!r}")


__all__ = ["__version__", *_LAZY]
