"""What the two TMA scheduling passes (:mod:`.warp_specialize`, :mod:`.software_pipeline`)
share: a kernel's pending TMA loads, new mbarrier arrays, and the staged issue of a
pipelined loop's loads."""

from __future__ import annotations

import dataclasses

from ..ir import nodes as N
from ..ir.visitor import substitute, walk_stmts
from .analysis import (accesses, all_names, batch_may_stay_in_flight, buffer_scope, buffers_used,
                       fresh_name)
from .tma_copies import is_pending_load


def i32(v: int) -> N.Const:
    return N.Const(v, "int32")


def sub(x, y):
    """x - y, without "- 0"."""
    return x if isinstance(y, N.Const) and y.value == 0 else N.binop("sub", x, y)


class KernelTma:
    """One kernel being scheduled: its buffers and allocations, fresh names, and the
    mbarrier arrays and stage counts the pass adds (:meth:`finish` writes them back)."""

    def __init__(self, func: N.PrimFunc, scope: N.KernelScope, arch: str, names: set[str]):
        self.func, self.scope, self.arch, self.names = func, scope, arch, names
        self.buffers = {p.name: p for p in func.params if isinstance(p, N.Buffer)}
        self.allocs = {s.buffer.name: s for s in scope.body if isinstance(s, N.Allocate)}
        self.buffers.update({n: a.buffer for n, a in self.allocs.items()})
        self.new_allocs: list[N.Allocate] = []
        self.stages: dict[str, int] = {}

    def fail(self, s, msg: str, error=ValueError):
        where = f"{s.loc}: " if getattr(s, "loc", None) else ""
        raise error(f"{where}prim_func '{self.func.name}': {msg}")

    def fresh(self, stem: str) -> str:
        return fresh_name(self.names, stem, sep="", first=0, bare=False)

    def barrier(self, count: int, stages: int, loc) -> str:
        """A new array of ``stages`` mbarriers, each expecting ``count`` arrivals."""
        name = self.fresh("tc_bar")
        buf = N.Buffer(name, "uint64", (i32(stages),), "shared")
        self.new_allocs.append(N.Allocate(buf, N.Layout("mbarrier", threads=count), loc=loc))
        return name

    def pending(self, body) -> list[N.TmaCopy]:
        return [s for s in body if is_pending_load(s, self.func)]

    def shared_a(self, g: N.Gemm) -> bool:
        return self.buffers[g.a].scope == "shared"

    def stays_in_flight(self, g: N.Gemm, stages: int) -> bool:
        """May ``g``'s wgmma batch stay in flight past the step (``wg_wait=1``)?  Its A is
        in shared memory, its accumulator one whose batch may
        (:func:`analysis.batch_may_stay_in_flight`), and the loop has 3 stages or more:
        the batch holds its step's stage into the next step, so with 2 the next load could
        start only when a step ends and its whole latency would show (MLA decode's 2-stage
        loop waited on its loads most of the time, ncu on the H100)."""
        return stages >= 3 and self.shared_a(g) and \
            batch_may_stay_in_flight(self.buffers[g.c].dtype)

    def wgmma(self, g: N.Gemm) -> bool:
        layout = self.allocs[g.c].layout if g.c in self.allocs else None
        return layout is not None and layout.mma == "wgmma"

    def mma_tail(self, rest, loads) -> bool:
        """Does a pipelined body end with a wgmma ``T.gemm`` on the tiles it loads?"""
        last = rest[-1] if rest else None
        return isinstance(last, N.Gemm) and self.wgmma(last) and last.wg_wait == 0 and \
            bool({last.a, last.b} & {c.dst.buffer for c in loads})

    def mma_then_registers(self, rest, loads, compute_tail: bool = False) -> bool:
        """Is the body's last statement on the tiles it loads a wgmma ``T.gemm``, followed
        only by register work (none: ``mma_tail``): loops, branches, Lets, stores, fills
        and copies touching fragments and locals (and reading global tensors the kernel
        never writes) alone, so no GEMM, reduction, barrier, atomic or call (FP8's
        promotion of the accumulator every few steps: ``if (k + 1) % 2 == 0: acc2 += acc;
        T.clear(acc)``)?  The compute warpgroups run it as they run the GEMM; TileLang
        specializes such a loop too.

        ``compute_tail``: also followed by work on the kernel's own shared tiles and on
        global memory that none of the loaded tiles take part in -- stores and copies into
        shared or global memory (no load from global memory into shared: that is the
        producer's), GEMMs on other tiles, atomics and block barriers (the compute
        threads' named barrier then), as TileLang's GQA backward: dS^T into shared
        memory, dQ = dS K by mma.sync and its atomics after the last wgmma on Q and dO.
        The body must not end with a GEMM there (its batch would stay in flight past the
        step, which the stages' release rules only allow for a GEMM on the stages)."""
        tiles = {c.dst.buffer for c in loads}
        users = [i for i, s in enumerate(rest) if buffers_used(s) & tiles]
        if not users:
            return False
        g = rest[users[-1]]
        if not (isinstance(g, N.Gemm) and self.wgmma(g) and g.wg_wait == 0 and {g.a, g.b} & tiles):
            return False
        tail = rest[users[-1] + 1:]
        if compute_tail and tail and not isinstance(tail[-1], N.Gemm) and \
                all(self.compute_work(s) for s in tail):
            return True
        written = {b for b, _, w in accesses(self.scope.body) if w}
        for s in tail:
            used = buffers_used(s)
            # (registers, and global tensors the kernel only reads: deepgemm's scales)
            if any(b in written if b not in self.allocs else
                   self.allocs[b].buffer.scope not in ("fragment", "local") for b in used):
                return False
            if not all(isinstance(t, (N.For, N.If, N.Let, N.Store, N.Fill, N.Clear, N.Copy))
                       for t in walk_stmts([s])):
                return False
        return True

    def compute_work(self, s) -> bool:
        """Can the compute warpgroups run ``s`` alone, in a step after its stages' last
        use (:meth:`mma_then_registers`' ``compute_tail``)?  Loops, branches, Lets,
        stores, fills, GEMMs, atomics, block barriers and copies other than global ->
        shared loads."""
        kinds = (N.For, N.If, N.Let, N.Store, N.Fill, N.Clear, N.Copy, N.Gemm, N.AtomicAdd,
                 N.Barrier)
        for t in walk_stmts([s]):
            if not isinstance(t, kinds):
                return False
            if isinstance(t, N.Copy) and buffer_scope(self.allocs, t.src.buffer) == "global" and \
                    buffer_scope(self.allocs, t.dst.buffer) == "shared":
                return False
        return True

    def finish(self, body) -> N.KernelScope:
        """The kernel with ``body``, the stage counts on its allocations and the new
        mbarrier arrays after its other allocations (shared offsets follow this order)."""
        body = [dataclasses.replace(s, stages=self.stages[s.buffer.name])
                if isinstance(s, N.Allocate) and s.buffer.name in self.stages else s
                for s in body]
        last = -1  # after the allocations heading the kernel (Lets may stand among them)
        for i, s in enumerate(body):
            if isinstance(s, N.Allocate):
                last = i
            elif not isinstance(s, N.Let):
                break
        body[last + 1:last + 1] = self.new_allocs
        return dataclasses.replace(self.scope, body=tuple(body))


def split_body(body, loads):
    """A pipelined body without its ``loads``, and where the first of them stood."""
    taken = {id(c) for c in loads}
    rest, wait_at = [], None
    for s in body:
        if id(s) in taken:
            if wait_at is None:
                wait_at = len(rest)
        else:
            rest.append(s)
    return rest, wait_at


def issuer(loop: N.For, loads, bar: str):
    """``issue(it, stage)``: the loads of step ``it`` into ``stage``, arriving on
    ``bar[stage]``."""
    def issue(it: N.Expr, stage: N.Expr) -> tuple:
        ref = N.Region(bar, (stage,))
        return tuple(N.TmaCopy(substitute(c.src, {loop.var.name: it}), c.dst, ref, stage, loc=c.loc,
                               required=c.required)
                     for c in loads)
    return issue


def full_wait(loop: N.For, bar: str, base: N.Expr | None = None):
    """The wait for the current step's stage: ``(cur, wait)`` with ``cur`` the step
    index (the loop variable minus its start; plus ``base``, the steps of the loop's
    earlier runs, for a loop inside an outer loop)."""
    S = loop.num_stages
    cur = sub(loop.var, loop.start)
    if base is not None:
        cur = N.binop("add", base, cur)
    wait = N.MBarrierWait(N.Region(bar, (N.binop("mod", cur, i32(S)),)),
                          N.binop("bitand", N.binop("floordiv", cur, i32(S)), i32(1)),
                          loc=loop.loc)
    return cur, wait


def schedule(func: N.PrimFunc, arch: str, kernel_pass) -> N.PrimFunc:
    """Run ``kernel_pass(KernelTma) -> KernelScope`` over every kernel."""
    names = all_names(func)
    kernels = tuple(kernel_pass(KernelTma(func, k, arch, names)) for k in func.kernels)
    return dataclasses.replace(func, kernels=kernels)
