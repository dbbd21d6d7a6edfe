"""TileLang's ``check_cutedsl_available()``: whether the CuTe DSL backend can run in this
Python environment.  tilecute's kernels are CuTe DSL programs, so it asks the same of
tilecute: ``cutlass.cute`` imports (NVIDIA's ``nvidia-cutlass-dsl``)."""

import importlib

__all__ = ["check_cutedsl_available"]


def check_cutedsl_available() -> None:
    """Return if ``cutlass.cute`` imports; raise ``ImportError`` saying what to install
    otherwise (the test suites of TileLang's CuTe DSL backend skip on it)."""
    try:
        importlib.import_module("cutlass.cute")
    except Exception as e:  # noqa: BLE001  (a broken install fails in many ways)
        raise ImportError(f"the CuTe DSL is not usable here (`import cutlass.cute` failed: {e}); "
                          "tilecute builds its kernels with it: pip install nvidia-cutlass-dsl") from None
