"""Compatibility names for the code generator while it moves to reading the recorded
decisions: the pipeline is :mod:`.pipeline`, the launch ABI :mod:`.launch_abi`, shared
memory :mod:`.shared_memory`."""

from __future__ import annotations

from ..ir import nodes as N
from ..target import SHARED_ALIGN, TMA_SWIZZLE_ALIGN
from .analysis import stage_bytes
from .launch_abi import KernelPlan, LoweringError, grid_cpp  # noqa: F401
from .pipeline import lower  # noqa: F401
from .shared_memory import shared_allocs  # noqa: F401


def shared_stride(alloc: N.Allocate) -> int:
    return alloc.slot.stride


def shared_align(alloc: N.Allocate) -> int:
    return alloc.slot.align


def shared_offsets(scope: N.KernelScope) -> tuple[dict[str, int], int]:
    return ({a.buffer.name: a.slot.offset for a in shared_allocs(scope)}, scope.shared_bytes)


def shared_bytes(scope: N.KernelScope) -> int:
    return scope.shared_bytes
