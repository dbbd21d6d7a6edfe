"""TileLang's ``tilelang.cuda.intrinsics.layout.mma_layout``: ``make_mma_swizzle_layout``
(``tilecute.cuda.intrinsics``'); every other name of it (the ldmatrix / MMA index maps, TVM
TIR functions) imports as a value that raises an error naming it when used."""

from __future__ import annotations

from ....refusals import Refused
from .. import _TIR, make_mma_swizzle_layout  # noqa: F401


def __getattr__(name: str):
    if name.startswith("__") and name.endswith("__"):
        raise AttributeError(name)
    return Refused(f"tilelang.cuda.intrinsics.layout.mma_layout.{name}", _TIR)
