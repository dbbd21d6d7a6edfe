"""TileLang's ``tilelang.engine`` names.  Its post-processing callbacks
(``register_cuda_postproc`` ...) rewrite the CUDA C / HIP / C source TileLang generates
before it is compiled; tilecute generates CuTe DSL instead (``kernel.get_kernel_source()``)
and never edits generated code, so they import and registering one is an error naming it.
``lower`` is tilecute's own (``tilecute.lower``: the passes and the launch ABI).
"""

from __future__ import annotations

from ..refusals import refusing_getattr
from .callback import (  # noqa: F401
    register_c_postproc, register_cuda_postproc, register_hip_postproc,
    register_metal_postproc,
)


def lower(func, arch: str = "sm_90a", options=None):
    """``tilecute.lower``: ``func`` through tilecute's passes for ``arch``, with its launch
    ABI (a :class:`tilecute.transform.launch_abi.KernelPlan`)."""
    from ..transform.pipeline import lower as run

    return run(func, arch, options)


__getattr__ = refusing_getattr(__name__, {
    "is_device_call": "it inspects TVM TIR calls; tilecute has no TVM",
    "KernelParam": "tilecute's kernel parameters are its launch ABI's (kernel.args)",
})
