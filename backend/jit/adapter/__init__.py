"""TileLang's ``tilelang.jit.adapter``: its execution-backend adapters, which tilecute
has none of (refused by name when used; its submodules import with every name refused,
``tilecute.refusals``), except ``cutedsl.checks.check_cutedsl_available``."""

from ...refusals import refusing_getattr

_WHY = ("TileLang's execution-backend adapters (tvm_ffi, cython, nvrtc, cutedsl) wrap the CUDA C "
        "or Python TileLang generates; tilecute's one backend is a CuTe DSL kernel behind a "
        "TVM-FFI launcher (tilecute.host.launcher)")

__getattr__ = refusing_getattr(__name__, dict.fromkeys(
    ("BaseKernelAdapter", "CachedTextSource", "TVMFFIKernelAdapter", "CythonKernelAdapter",
     "NVRTCKernelAdapter", "MetalKernelAdapter", "CuTeDSLKernelAdapter"), _WHY))
