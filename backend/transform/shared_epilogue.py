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
IR.  A tile the program stages itself (``C_s = T.alloc_shared(...)``, ``T.copy(acc, C_s)``,
``T.copy(C_s, C[...])``) gets the same swizzle (:func:`_swizzle_own_tile`)."""

from __future__ import annotations

import dataclasses

from ..ir import nodes as N
from ..ir.visitor import walk_stmts
from ..runtime.dtypes import DTYPES
from ..target import TMA_SWIZZLES, arch_at_least, target
from .analysis import (all_names, buffers_used, lifetimes, stage_bytes, tma_allowed, tma_box,
                       whole)

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
        if not (isinstance(s, N.Copy) and tma_allowed(s) and not s.instruction
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


def _swizzle_own_tile(func: N.PrimFunc, scope: N.KernelScope) -> N.KernelScope:
    """The program's own epilogue tile (TileLang's block-sparse GEMM: ``C_shared =
    T.alloc_shared((M, N), dtype)``, ``T.copy(C_local, C_shared)``, ``T.copy(C_shared,
    C[...])``) gets the layout of the staged epilogue's: a shared buffer with no layout of
    the program's, written whole by copies from T.gemm accumulators and read whole by copies
    to global tensors that TMA can store from that swizzle, and touched by nothing else,
    is ``tma_swizzled``. Row-major, the accumulator's register pairs met 8 rows a warp in
    one bank group (an 8-way conflict a store; TileLang swizzles such a tile too)."""
    allocs = {s.buffer.name: s for s in scope.body if isinstance(s, N.Allocate)}
    params = {p.name: p for p in func.params if isinstance(p, N.Buffer)}
    writes: dict[str, list] = {}
    reads: dict[str, list] = {}
    others: set[str] = set()
    for s in walk_stmts(scope.body):
        if isinstance(s, N.Copy):
            if s.dst.buffer in allocs and _accumulator(allocs.get(s.src.buffer)):
                writes.setdefault(s.dst.buffer, []).append(s)
                continue
            if s.src.buffer in allocs and s.dst.buffer in params:
                reads.setdefault(s.src.buffer, []).append(s)
                continue
        if not isinstance(s, (N.For, N.If, N.While, N.KernelScope, N.Allocate)):
            others |= buffers_used(s)
    swizzled = {}
    for name in set(writes) & set(reads) - others:
        a = allocs[name]
        buf = a.buffer
        if buf.scope != "shared" or a.layout is not None or a.view_of or a.stages != 1 or \
                buf.ndim != 2 or not all(isinstance(d, N.Const) for d in buf.shape) or \
                any(b.view_of == name for b in allocs.values()):
            continue
        row_bytes = int(buf.shape[-1].value) * DTYPES[buf.dtype].bytes
        swizzle = next((w for w in TMA_SWIZZLES if row_bytes % w == 0), 0)
        if not swizzle or DTYPES[buf.dtype].pack != 1 or \
                not all(whole(c.dst, buf) for c in writes[name]) or \
                not all(whole(c.src, buf) and tma_allowed(c)
                        and isinstance(tma_box(params[c.dst.buffer], c.dst, buf, swizzle), tuple)
                        for c in reads[name]):
            continue
        swizzled[name] = swizzle
    if not swizzled:
        return scope
    return dataclasses.replace(scope, body=tuple(
        dataclasses.replace(s, layout=N.Layout("tma_swizzled", swizzle=swizzled[s.buffer.name]))
        if isinstance(s, N.Allocate) and s.buffer.name in swizzled else s for s in scope.body))


def stage_epilogue(func: N.PrimFunc, arch: str, options: dict) -> N.PrimFunc:
    if not arch_at_least(arch, 90) or options.get("disable_tma") or \
            options.get("disable_shared_epilogue"):
        return func
    names = all_names(func)
    kernels = tuple(_swizzle_own_tile(func, _kernel(func, k, arch, names)) for k in func.kernels)
    return dataclasses.replace(func, kernels=kernels)
