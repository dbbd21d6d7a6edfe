"""TileLang's ``tilelang.jit.adapter.cutedsl``: ``checks.check_cutedsl_available`` is
served (tilecute's kernels are CuTe DSL); the adapter and its wrappers are refused."""

from ...adapter import _WHY
from ....refusals import refusing_getattr

__getattr__ = refusing_getattr(__name__, dict.fromkeys(
    ("CuTeDSLKernelAdapter", "TLCuTeDSLSourceWrapper"), _WHY))
