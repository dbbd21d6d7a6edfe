"""Multi-versioning of a ``T.Pipelined(n, num_stages=S)`` loop whose body is the
program's own warp-specialized regions (``T.ws``) ordered by its own mbarriers, as
TileLang's pipeline pass does for such a body (its ``ExpandPipelineBarriers`` and buffer
versioning): the shared tiles the loop's TMA loads write get ``S`` stages (step ``k``
reads and writes stage ``(k - start) % S``), every mbarrier array the body arrives on gets
``S`` copies (step ``k`` uses copy ``(k - start) % S``: element ``i`` becomes ``stage * n +
i``), and each wait on one of them waits for parity ``((k - start) // S + p0) % 2``, ``p0``
the parity the program waits for at the first step.  The producer region then runs up to
``S`` steps ahead of the consumer instead of one load at a time::

    for ko in T.Pipelined(K, num_stages=2):      # the program: one tile, one barrier each
        with T.ws(1):
            T.barrier_wait(done, (ko + 1) % 2); T.tma_copy(A[.., ko], A_s, barrier=ready)
            T.barrier_arrive(ready)
        with T.ws(0):
            T.barrier_wait(ready, ko % 2); T.gemm(A_s, ...); T.barrier_arrive(done)

becomes stages ``ko % 2`` of ``A_s``, ``ready[ko % 2]`` and ``done[ko % 2]``, the waits on
parities ``(ko // 2 + 1) % 2`` and ``(ko // 2) % 2``.  TileLang also moves each region to its
pipeline stage in the loop's program order; the regions run on different threads, so the
order a thread sees is the same.

Only where that reading is exact: a loop at the kernel's top level whose body is ``T.ws``
regions of disjoint warpgroups; the versioned tiles written in the loop by TMA loads alone
and, like the versioned barriers, named nowhere outside it; every load in the loop
arriving on a versioned barrier; every wait on one in the phase-alternating form ``(ko + c)
% 2`` (or ``& 1``) of a one-buffer protocol.  Any other loop keeps one buffer per tile and
runs as written.  Imports no CUTLASS."""

from __future__ import annotations

import dataclasses

from ..ir import nodes as N
from ..ir.visitor import linear_form, rebuild, substitute, walk_nodes, walk_stmts


def _i32(v: int) -> N.Const:
    return N.Const(v, "int32")


def _alternates(parity: N.Expr, var: str):
    """``c`` (0 or 1) where ``parity`` is ``(var + c) % 2`` or ``(var + c) & 1`` (any odd
    coefficient of ``var``), else None."""
    if not (isinstance(parity, N.BinOp) and isinstance(parity.b, N.Const) and (
            parity.op == "mod" and parity.b.value == 2 or
            parity.op == "bitand" and parity.b.value == 1)):
        return None
    form = linear_form(parity.a)
    if form is None or set(form) - {var, None} or form.get(var, 0) % 2 != 1:
        return None
    return form.get(None, 0) % 2


def _regions_disjoint(body) -> bool:
    seen: set[int] = set()
    for s in body:
        if not isinstance(s, N.WarpGroups) or s.span or not s.groups or seen & set(s.groups):
            return False
        seen |= set(s.groups)
    return True


def _mentions(x, names: set[str]) -> bool:
    """Does ``x`` name any of ``names`` (a buffer of a region, load or store, or an
    allocation)?"""
    for n in walk_nodes(x):
        if isinstance(n, (N.Region, N.Load, N.Store)) and n.buffer in names:
            return True
        if isinstance(n, N.Allocate) and n.buffer.name in names:
            return True
        if isinstance(n, N.Gemm) and ({n.a, n.b, n.c} & names):
            return True
    return False


class _Kernel:
    def __init__(self, scope: N.KernelScope):
        self.scope = scope
        self.allocs = {s.buffer.name: s for s in scope.body if isinstance(s, N.Allocate)}

    def plan(self, loop: N.For):
        """(tiles, barriers) to version for ``loop``, or None where the loop does not
        qualify."""
        if loop.kind != "pipelined" or loop.num_stages < 2 or not _regions_disjoint(loop.body):
            return None
        stmts = list(walk_stmts(loop.body))
        barriers = {s.barrier.buffer for s in stmts if isinstance(s, N.MBarrierArrive)}
        loads = [s for s in stmts if isinstance(s, N.TmaCopy) and s.barrier is not None]
        tiles = {c.dst.buffer for c in loads}
        if not barriers or not tiles or any(c.barrier.buffer not in barriers or c.stage is not None
                                            for c in loads):
            return None
        for name in barriers | tiles:
            a = self.allocs.get(name)
            if a is None or a.stages != 1 or a.view_of or a.buffer.scope != "shared":
                return None
        if any(self.allocs[b].layout is None or self.allocs[b].layout.kind != "mbarrier"
               or len(self.allocs[b].buffer.shape) != 1
               or not isinstance(self.allocs[b].buffer.shape[0], N.Const) for b in barriers):
            return None
        if any(self.allocs[t].layout is not None and self.allocs[t].layout.kind == "mbarrier"
               for t in tiles):
            return None
        # in the loop the tiles are written by its TMA loads and read by T.gemm / T.copy
        # alone (a statement that names them otherwise: the loop stays as written)
        for s in stmts:
            if isinstance(s, N.TmaCopy) and s.barrier is not None:
                if _mentions((s.src,), tiles):
                    return None
            elif isinstance(s, N.Gemm):
                if s.c in tiles:
                    return None
            elif isinstance(s, N.Copy):
                if _mentions((s.dst,), tiles):
                    return None
            elif not isinstance(s, (N.WarpGroups, N.If, N.For)) and _mentions((s,), tiles):
                return None
            elif isinstance(s, (N.If, N.For)) and _mentions(
                    (s.cond,) if isinstance(s, N.If) else (s.start, s.extent), tiles):
                return None
        for s in stmts:
            if isinstance(s, N.MBarrierWait) and s.barrier.buffer in barriers and \
                    _alternates(s.parity, loop.var.name) is None:
                return None
        # named nowhere else (their allocations aside)
        others = [s for s in self.scope.body if s is not loop and not (
            isinstance(s, N.Allocate) and s.buffer.name in barriers | tiles)]
        if _mentions(tuple(others), barriers | tiles):
            return None
        return tiles, barriers

    def version(self, loop: N.For, tiles: set[str], barriers: set[str]) -> N.For:
        S = loop.num_stages
        step = loop.var if isinstance(loop.start, N.Const) and loop.start.value == 0 else \
            N.binop("sub", loop.var, loop.start)
        stage = N.binop("mod", step, _i32(S))
        turn = N.binop("floordiv", step, _i32(S))
        sizes = {b: int(self.allocs[b].buffer.shape[0].value) for b in barriers}

        def slot(r: N.Region) -> N.Region:
            idx = r.starts[0]
            base = N.binop("mul", stage, _i32(sizes[r.buffer])) if sizes[r.buffer] > 1 else stage
            new = base if isinstance(idx, N.Const) and idx.value == 0 else N.binop("add", base, idx)
            return dataclasses.replace(r, starts=(new,) + tuple(r.starts[1:]))

        def leaf(n):
            if isinstance(n, N.MBarrierWait) and n.barrier.buffer in barriers:
                p0 = _alternates(n.parity, loop.var.name)
                # the program's parity at the first step: (start + c) % 2
                start = loop.start.value if isinstance(loop.start, N.Const) else None
                p0 = (start + p0) % 2 if start is not None else None
                if p0 is None:  # (a symbolic start: the offset as an expression)
                    base = N.binop("add", turn, substitute(n.parity, {loop.var.name: loop.start}))
                else:
                    base = N.binop("add", turn, _i32(p0)) if p0 else turn
                return dataclasses.replace(n, barrier=slot(n.barrier),
                                           parity=N.binop("mod", base, _i32(2)))
            if isinstance(n, N.Region) and n.buffer in barriers:
                return slot(n)
            return None
        return dataclasses.replace(loop, body=rebuild(loop.body, leaf))

    def run(self) -> N.KernelScope:
        body, stages = [], {}
        for s in self.scope.body:
            plan = self.plan(s) if isinstance(s, N.For) else None
            if plan is None:
                body.append(s)
                continue
            tiles, barriers = plan
            for t in tiles:
                stages[t] = s.num_stages
            for b in barriers:
                stages[b] = s.num_stages
            body.append(self.version(s, tiles, barriers))
        if not stages:
            return self.scope
        out = []
        for s in body:
            if isinstance(s, N.Allocate) and s.buffer.name in stages:
                S = stages[s.buffer.name]
                if s.layout is not None and s.layout.kind == "mbarrier":
                    n = int(s.buffer.shape[0].value)
                    s = dataclasses.replace(s, buffer=dataclasses.replace(
                        s.buffer, shape=(N.Const(n * S, s.buffer.shape[0].dtype),)))
                else:
                    s = dataclasses.replace(s, stages=S)
            out.append(s)
        return dataclasses.replace(self.scope, body=tuple(out))


def version_pipelines(func: N.PrimFunc) -> N.PrimFunc:
    return dataclasses.replace(func, kernels=tuple(_Kernel(k).run() for k in func.kernels))
