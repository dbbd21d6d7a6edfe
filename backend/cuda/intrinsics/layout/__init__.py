"""TileLang's ``tilelang.cuda.intrinsics.layout``: ``make_mma_swizzle_layout`` (the layout
constructor of ``tilecute.cuda.intrinsics``, which ``T.annotate_layout`` reads).  Its
ldmatrix / MMA index maps (``mma_store_index_map``, ``get_ldmatrix_offset``,
``get_mma_micro_size``, ``get_swizzle_layout``) build TVM TIR, which tilecute does not
have: they import, and using one is an error naming it; so is every name of its other
submodules (``mma_sm70_layout`` ...)."""

from __future__ import annotations

from ....refusals import refusing_getattr
from .. import _TIR, make_mma_swizzle_layout  # noqa: F401

__getattr__ = refusing_getattr(__name__, {n: _TIR for n in (
    "mma_store_index_map", "get_ldmatrix_offset", "get_mma_micro_size", "get_swizzle_layout")})
