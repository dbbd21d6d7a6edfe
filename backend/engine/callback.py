"""TileLang's ``tilelang.engine.callback``: hooks that rewrite TileLang's generated
CUDA C / HIP / C / Metal source before it is compiled.  tilecute generates CuTe DSL and
never edits generated code (docs/host-api.md), so each name imports and registering a
callback with it is a ``NotImplementedError`` naming it."""

from __future__ import annotations

from ..refusals import Refused

_WHY = ("it rewrites the CUDA C/HIP/C source TileLang generates; tilecute generates CuTe DSL "
        "(kernel.get_kernel_source()) and does not post-process generated code")

register_cuda_postproc = Refused("tilelang.engine.callback.register_cuda_postproc", _WHY)
register_hip_postproc = Refused("tilelang.engine.callback.register_hip_postproc", _WHY)
register_c_postproc = Refused("tilelang.engine.callback.register_c_postproc", _WHY)
register_metal_postproc = Refused("tilelang.engine.callback.register_metal_postproc", _WHY)
register_cuda_postproc_callback = Refused(
    "tilelang.engine.callback.register_cuda_postproc_callback", _WHY)
register_hip_postproc_callback = Refused(
    "tilelang.engine.callback.register_hip_postproc_callback", _WHY)
register_c_postproc_callback = Refused(
    "tilelang.engine.callback.register_c_postproc_callback", _WHY)
register_metal_postproc_callback = Refused(
    "tilelang.engine.callback.register_metal_postproc_callback", _WHY)
