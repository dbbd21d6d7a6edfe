"""TileLang's ``tilelang.cuda.intrinsics``: ``make_mma_swizzle_layout(buffer)``, a layout
for ``T.annotate_layout`` (as ``tilecute.layout``'s constructors, read by the frontend in
a ``@T.prim_func`` body).  TileLang's MMA emitters and index maps
(``TensorCoreIntrinEmitter``, ``get_swizzle_layout``, ``mma_store_index_map`` ...) build
TVM TIR, which tilecute does not have: they import, and using one is an error naming it.
"""

from __future__ import annotations

from ...language import layouts as _L
from ...ir import nodes as _N
from ...refusals import refusing_getattr
from ...runtime.dtypes import DTYPES


def _mma_swizzle(buffer, is_smooth=False):
    """TileLang's ``make_mma_swizzle_layout(shared_buf, is_smooth=False)``: when a row of
    the buffer is a multiple of 64 bytes, the XOR swizzle of 16-byte units by row over
    ``min(128, row bytes)``-byte chunks (tilecute's ``tma_swizzled`` layout of that width,
    the same mapping: docs/tile-ops.md); otherwise, or with ``is_smooth``, row-major."""
    if is_smooth:
        return _N.Layout("row_major")
    cols = int(buffer.shape[-1].value)
    row_bytes = cols * DTYPES[buffer.dtype].bits // 8
    if row_bytes % 64:
        return _N.Layout("row_major")
    return _L._bank("make_mma_swizzle_layout", buffer, min(128, row_bytes) // 16)


_mma_swizzle.__name__ = "make_mma_swizzle_layout"
make_mma_swizzle_layout = _L.LayoutConstructor(_mma_swizzle)

_TIR = "it builds TVM TIR (TileLang's MMA emitters and index maps); tilecute has no TIR"
__getattr__ = refusing_getattr(__name__, {n: _TIR for n in (
    "TensorCoreIntrinEmitter", "TensorCoreIntrinEmitterWithLadderTransform",
    "TensorCoreIntrinEmitterSM120", "get_swizzle_layout", "mma_store_index_map",
    "get_ldmatrix_offset", "get_mma_micro_size")})
