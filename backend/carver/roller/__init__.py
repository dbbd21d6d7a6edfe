"""TileLang's ``tilelang.carver.roller``: the rasterization plan classes
(:mod:`.rasterization`).  The roller's policies and hints analyse TVM TIR (tilecute has
none): those names import and are errors when used."""

from __future__ import annotations

from ...refusals import refusing_getattr
from .rasterization import (  # noqa: F401
    NoRasterization, Rasterization, Rasterization2DColumn, Rasterization2DRow,
)

__all__ = ["NoRasterization", "Rasterization", "Rasterization2DColumn", "Rasterization2DRow"]
__getattr__ = refusing_getattr(__name__, {n: "the roller analyses TVM TIR; tilecute has no TIR"
                                          for n in ("Hint", "TileDict", "PrimFuncNode",
                                                    "OutputNode", "DefaultPolicy",
                                                    "TensorCorePolicy", "BestFit")})
