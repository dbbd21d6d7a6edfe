"""TileLang's ``tilelang.utils`` names that kernel programs and their tests import:
``TensorSupplyType`` (how a profiler fills a kernel's inputs), ``map_torch_type`` and
``make_tensor`` (implemented in ``tilecute.runtime.profiling``)."""

from .runtime.profiling import TensorSupplyType, make_tensor, map_torch_type  # noqa: F401
