"""TileLang's ``tilelang.jit.kernel``: ``JITKernel`` is tilecute's compiled
:class:`tilecute.runtime.kernel.Kernel`."""

from ..runtime.kernel import Kernel as JITKernel

__all__ = ["JITKernel"]
