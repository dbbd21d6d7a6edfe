"""TileLang's ``tilelang.carver.template``: kernel templates whose roller recommends tile
configurations by analysing the TVM TIR of an equivalent function.  tilecute has no TIR,
so each template imports and constructing one is an error naming it; give
``tilecute.autotune`` the configurations to try instead."""

from __future__ import annotations

from ..refusals import refusing_getattr

__getattr__ = refusing_getattr(__name__, {name: (
    "its roller analyses TVM TIR, which tilecute does not have; list the configurations "
    "for tilecute.autotune(configs=...) instead") for name in (
        "MatmulTemplate", "GEMVTemplate", "ElementwiseTemplate", "GeneralReductionTemplate",
        "FlashAttentionTemplate", "ConvTemplate")})
