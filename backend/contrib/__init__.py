"""TileLang's ``tilelang.contrib``: ``nvcc`` (:mod:`tilecute.contrib.nvcc`: the target's
compute version and the CUDA toolkit's version).  Its other modules (``hipcc``, ``cc``,
``nvrtc``, ``cutedsl`` ...) drive TileLang's own compilers: using one is an error."""

from __future__ import annotations

from ..refusals import refusing_getattr

__getattr__ = refusing_getattr(__name__, {n: "it drives TileLang's own compilers; tilecute "
                                             "compiles CuTe DSL (tilecute.build_cubin)"
                                          for n in ("hipcc", "cc", "nvrtc", "msvc", "rocm",
                                                    "cutedsl", "hip_resource_info")})
