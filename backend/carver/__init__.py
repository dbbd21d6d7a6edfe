"""TileLang's ``tilelang.carver`` under tilecute's name: what programs use of it.

- :mod:`tilecute.carver.arch`: the device model ``CUDA(target)`` (SM count, shared memory,
  registers, L2, compute capability) and ``arch.driver`` (``get_num_sms()`` ...);
- :mod:`tilecute.carver.roller.rasterization`: the rasterization plan classes.

TileLang's roller and templates (``MatmulTemplate(...).recommend_hints()``) search tile
configurations by analysing TVM TIR, which tilecute does not have: they import, and using
one is an error naming it (``tilecute.autotune`` over explicit configs is tilecute's way).
Non-NVIDIA device models (``CDNA``, ``RDNA``, ``METAL``, ``CPU``) likewise.
"""

from __future__ import annotations

from ..refusals import refusing_getattr
from .arch import CDNA, CPU, CUDA, METAL, RDNA  # noqa: F401
from .roller import *  # noqa: F401,F403
from .template import (  # noqa: F401
    ConvTemplate, ElementwiseTemplate, FlashAttentionTemplate, GeneralReductionTemplate,
    GEMVTemplate, MatmulTemplate,
)

__getattr__ = refusing_getattr(__name__, {n: "it analyses TVM TIR; tilecute has no TIR" for n in (
    "BlockInfo", "IterInfo", "collect_block_iter_vars_used_in_access_region",
    "collect_vars_used_in_prim_expr", "detect_dominant_read", "is_broadcast_epilogue",
    "normalize_prim_func", "get_block", "get_output_blocks", "try_inline",
    "try_inline_contiguous_spatial")})
