"""Shared-memory layout, the last pass: each shared buffer of a kernel gets its place in
the block's dynamic shared memory (``Allocate.slot``), and the kernel its total
(``KernelScope.shared_bytes``), checked against what a block of the target may use.

Buffers are placed in allocation order (shared allocations stand at the kernel's top
level), each at a multiple of its alignment: 128 bytes (swizzles, cp.async), 1024 for a
TMA-swizzled buffer.  A buffer with ``stages`` holds that many copies, ``stride`` bytes
apart (one stage rounded up to the alignment)."""

from __future__ import annotations

import dataclasses

from ..ir import nodes as N
from ..target import SHARED_ALIGN, TMA_SWIZZLE_ALIGN, target
from .analysis import stage_bytes


class SharedMemoryError(ValueError):
    pass


def shared_allocs(scope: N.KernelScope) -> list[N.Allocate]:
    """The shared allocations of a kernel, in order."""
    return [s for s in scope.body if isinstance(s, N.Allocate) and s.buffer.scope == "shared"]


def _align(a: N.Allocate) -> int:
    swizzled = a.layout is not None and a.layout.kind == "tma_swizzled"
    return TMA_SWIZZLE_ALIGN if swizzled else SHARED_ALIGN


def _round_up(x: int, align: int) -> int:
    return -(-x // align) * align


def place(scope: N.KernelScope) -> N.KernelScope:
    """``scope`` with a slot on each shared allocation and its total bytes."""
    slots, total = {}, 0
    for a in shared_allocs(scope):
        align = _align(a)
        total = _round_up(total, align)
        stride = _round_up(stage_bytes(a.buffer), align)
        slots[a.buffer.name] = N.SharedSlot(total, stride, align)
        total += stride * (a.stages - 1) + stage_bytes(a.buffer)
    body = tuple(dataclasses.replace(s, slot=slots[s.buffer.name])
                 if isinstance(s, N.Allocate) and s.buffer.name in slots else s
                 for s in scope.body)
    return dataclasses.replace(scope, body=body, shared_bytes=total)


def assign_shared_memory(func: N.PrimFunc, arch: str) -> N.PrimFunc:
    limit = target(arch).shared_per_block
    kernels = []
    for i, scope in enumerate(func.kernels):
        scope = place(scope)
        if scope.shared_bytes > limit:
            where = f"{scope.loc}: " if scope.loc else ""
            raise SharedMemoryError(
                f"{where}prim_func '{func.name}': kernel {i} needs {scope.shared_bytes} bytes of "
                f"shared memory; a block can have at most {limit} on {arch}")
        kernels.append(scope)
    return dataclasses.replace(func, kernels=tuple(kernels))
