"""TileLang's ``tilelang.carver.template``: kernel templates whose roller recommends tile
configurations by analysing the TVM TIR of an equivalent function.  tilecute has no TIR,
so each template imports and constructing one is an error naming it; give
``tilecute.autotune`` the configurations to try instead."""

from __future__ import annotations

from ..refusals import Refused

_WHY = ("its roller analyses TVM TIR, which tilecute does not have; list the configurations "
        "for tilecute.autotune(configs=...) instead")

MatmulTemplate = Refused("tilelang.carver.template.MatmulTemplate", _WHY)
GEMVTemplate = Refused("tilelang.carver.template.GEMVTemplate", _WHY)
ElementwiseTemplate = Refused("tilelang.carver.template.ElementwiseTemplate", _WHY)
GeneralReductionTemplate = Refused("tilelang.carver.template.GeneralReductionTemplate", _WHY)
FlashAttentionTemplate = Refused("tilelang.carver.template.FlashAttentionTemplate", _WHY)
ConvTemplate = Refused("tilelang.carver.template.ConvTemplate", _WHY)
