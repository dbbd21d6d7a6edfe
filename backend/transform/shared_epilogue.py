"""The GEMM epilogue through shared memory (sm_90+, by default): ``T.copy(acc, C[...])``
from a T.gemm accumulator straight to global memory becomes

    acc_s = T.alloc_shared((M, N), C.dtype, layout=T.Layout("tma_swizzled", swizzle=...))
    T.copy(acc, acc_s)           # registers -> a swizzled shared tile (register pairs)
    T.copy(acc_s, C[...])        # -> one TMA store (the TMA pass lowers it)

where TMA can store the tile and the block's shared memory (the pipelined loops' stages
counted, less the bytes of buffers dead by then, which the tile reuses) still fits without
fewer blocks fitting on an SM.  What experts write by hand for the last few percent of a GEMM
(``examples/gemm.py``, ``epilogue="shared"``); the compile option
``disable_shared_epilogue`` keeps the direct copy, as ``T.copy(acc, C[...],
disable_tma=True)`` (or any ``prefer_instruction=``: the program chose the copy's
instruction) does for one copy.  The new allocation and copies are visible in the printed
IR."""

from __future__ import annotations

import dataclasses

from ..ir import nodes as N
from ..ir.visitor import walk_stmts
from ..runtime.dtypes import DTYPES
from ..target import TMA_SWIZZLES, arch_at_least, target
from .analysis import all_names, lifetimes, stage_bytes, tma_box, whole

BARRIER_SLACK = 1024  # bytes the TMA passes may still add (mbarriers, alignment)


def _accumulator(a: N.Allocate | None) -> bool:
    return a is not None and a.buffer.scope == "fragment" and a.layout is not None and \
        a.layout.kind == "mma" and a.layout.operand == ""


def _estimate(scope: N.KernelScope) -> dict[str, int]:
    """Bytes of each shared buffer once the pipelined loops multi-buffer their loads (and
    the alignment padding before it)."""
    stages: dict[str, int] = {}
    for s in walk_stmts(scope.body):
        if isinstance(s, N.For) and s.kind == "pipelined":
            for t in s.body:
                if isinstance(t, N.Copy):
                    stages[t.dst.buffer] = max(stages.get(t.dst.buffer, 1), s.num_stages)
    out = {}
    for a in scope.body:
        if isinstance(a, N.Allocate) and a.buffer.scope == "shared":
            align = 1024 if a.layout is not None and a.layout.kind == "tma_swizzled" else 128
            out[a.buffer.name] = align + stage_bytes(a.buffer) * stages.get(a.buffer.name, 1)
    return out


def _kernel(func: N.PrimFunc, scope: N.KernelScope, arch: str, names: set[str]) -> N.KernelScope:
    allocs = {s.buffer.name: s for s in scope.body if isinstance(s, N.Allocate)}
    params = {p.name: p for p in func.params if isinstance(p, N.Buffer)}
    t = target(arch)
    sizes = _estimate(scope)
    alive = lifetimes(scope)
    used = sum(sizes.values()) + BARRIER_SLACK
    # the tile may take what is left of the block's limit, and no more than keeps as many
    # blocks on an SM as before (a shared epilogue is not worth half the occupancy); it
    # reuses the bytes of buffers no longer alive (the main loop's stages)
    blocks = max(1, t.shared_per_sm // max(used, 1))
    budget = min(t.shared_per_block, t.shared_per_sm // blocks) - used
    body = []
    changed = False
    for i, s in enumerate(scope.body):
        if not (isinstance(s, N.Copy) and not s.disable_tma and not s.instruction
                and _accumulator(allocs.get(s.src.buffer))
                and s.dst.buffer in params and whole(s.src, allocs[s.src.buffer].buffer)
                and DTYPES[params[s.dst.buffer].dtype].pack == 1):  # (no fp4 TMA store)
            body.append(s)
            continue
        acc, glob = allocs[s.src.buffer].buffer, params[s.dst.buffer]
        shape = tuple(acc.shape)
        row_bytes = int(shape[-1].value) * DTYPES[glob.dtype].bytes
        swizzle = next((w for w in TMA_SWIZZLES if row_bytes % w == 0), 0)
        n = 0
        while f"{acc.name}_shared{n or ''}" in names:
            n += 1
        name = f"{acc.name}_shared{n or ''}"
        tile = N.Buffer(name, glob.dtype, shape, "shared")
        dead = sum(size for b, size in sizes.items() if alive.get(b, (i, i))[1] < i)
        size = max(0, stage_bytes(tile) + 1024 - dead)
        if not swizzle or size > budget or not isinstance(tma_box(glob, s.dst, tile, swizzle), tuple):
            body.append(s)
            continue
        names.add(name)
        budget -= size
        whole_tile = N.Region(name, tuple(N.Const(0, "int32") for _ in shape))
        changed = True
        body += [N.Allocate(tile, N.Layout("tma_swizzled", swizzle=swizzle), loc=s.loc),
                 N.Copy(s.src, whole_tile, loc=s.loc), N.Copy(whole_tile, s.dst, loc=s.loc)]
    return dataclasses.replace(scope, body=tuple(body)) if changed else scope


def stage_epilogue(func: N.PrimFunc, arch: str, options: dict) -> N.PrimFunc:
    if not arch_at_least(arch, 90) or options.get("disable_tma") or \
            options.get("disable_shared_epilogue"):
        return func
    names = all_names(func)
    kernels = tuple(_kernel(func, k, arch, names) for k in func.kernels)
    return dataclasses.replace(func, kernels=kernels)
