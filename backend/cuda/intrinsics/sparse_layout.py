"""TileLang's ``tilelang.cuda.intrinsics.sparse_layout``: the 2:4 sparsity metadata
contract of ``T.gemm_sp`` (values kept per group, and how many elements of ``A`` one
metadata element indexes), which programs' compressors import."""

from __future__ import annotations

from ...language import dtype as _dtype

# dtype of A -> (values kept, group size): 2 of every 4, 1 of 2 for float32 (tf32)
GROUP_CONFIG = {_dtype(name): kept for name, kept in (
    ("float32", (1, 2)), ("float16", (2, 4)), ("bfloat16", (2, 4)), ("int8", (2, 4)),
    ("uint8", (2, 4)), ("float8_e4m3", (2, 4)), ("float8_e5m2", (2, 4)))}

_BITS_PER_GROUP = 4


def get_e_factor(a_dtype, meta_dtype) -> int:
    """How many elements of ``A`` (dtype ``a_dtype``) one metadata element indexes: a 4-bit
    field per group."""
    _, group = GROUP_CONFIG[_dtype(a_dtype)]
    return (_dtype(meta_dtype).bits // _BITS_PER_GROUP) * group


def get_e_replicate_factor(a_dtype) -> int:
    """TileLang's count of consecutive threads sharing a metadata value in its mma.sp
    layout (2 for 16-bit A, 1 for 8-bit)."""
    return 1 if _dtype(a_dtype).bits <= 8 else 2
