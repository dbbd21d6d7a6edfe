"""TileLang's ``tilelang.engine.callback``: hooks that rewrite TileLang's generated
CUDA C / HIP / C / Metal source before it is compiled.  tilecute generates CuTe DSL and
never edits generated code (docs/host-api.md), so each name imports and registering a
callback with it is a ``NotImplementedError`` naming it."""

from __future__ import annotations

from ..refusals import refusing_getattr

__getattr__ = refusing_getattr(__name__, {
    f"register_{lang}_postproc{suffix}": (
        "it rewrites the CUDA C/HIP/C source TileLang generates; tilecute generates CuTe DSL "
        "(kernel.get_kernel_source()) and does not post-process generated code")
    for lang in ("cuda", "hip", "c", "metal") for suffix in ("", "_callback")})
