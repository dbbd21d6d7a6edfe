"""Software pipelining of TMA loads: every load the TMA pass left pending (no mbarrier
yet) gets one, and a ``T.Pipelined(n, num_stages=S)`` body's loads are multi-buffered
(``Allocate.stages = S``, one mbarrier per stage) and issued ``S - 1`` steps ahead::

    for p in range(S - 1):                 # prologue
        if p < n: tma_copy(... k = p ..., stage=p, barrier=bar[p])
    for k in T.Pipelined(n, num_stages=S): # the body sees stage k % S
        if k + S - 1 < n: tma_copy(... k + S - 1 ..., stage=(k + S - 1) % S, ...)
        mbarrier_wait_parity(bar[k % S], (k // S) & 1)
        <the rest of the body>

The barrier pass then puts a block barrier before the in-loop copy (the stage it refills
was read in the previous iteration).  When the body ends with a wgmma ``T.gemm`` on the
loaded tiles (A from shared memory), the refill moves after it and the gemm keeps its
MMAs in flight (``wg_wait=1``): step k's MMAs overlap step k + 1's wait, each thread
releases step k - 1's stage on an "empty" mbarrier once its MMAs of step k - 1 are done,
and one thread waits for that release and refills the stage (no block barrier).
A loop whose program ``order`` issues loads after the rest of the step
(``For.loads_last``, their shared buffers: ``order=[1, 2, 0], stage=[0, 0, 2]`` names
both tiles) gets their refill at the end of the body instead of the start (the block
barrier the barrier pass puts before it orders it after the reads of the stage it
refills, made in step k - 1); the other loads stay at the start (all arrive on the
stage's one mbarrier).
Consecutive pending loads at the kernel's top level share one mbarrier and one wait.
Loops the warp-specialization pass took have no pending loads left.
"""

from __future__ import annotations

import dataclasses

from ..ir import nodes as N
from .mbarriers import KernelTma, full_wait, i32, issuer, schedule, split_body, sub


class _Pipeliner:
    def __init__(self, k: KernelTma):
        self.k = k

    def run(self) -> N.KernelScope:
        out, i = [], 0
        body = list(self.k.scope.body)
        pending = self.k.pending(body)
        while i < len(body):
            s = body[i]
            if any(s is c for c in pending):
                group = [s]
                while i + len(group) < len(body) and any(body[i + len(group)] is c for c in pending):
                    group.append(body[i + len(group)])
                bar = self.k.barrier(len(group), 1, s.loc)
                ref = N.Region(bar, (i32(0),))
                out += [dataclasses.replace(c, barrier=ref) for c in group]
                out.append(N.MBarrierWait(ref, i32(0), loc=s.loc))
                i += len(group)
                continue
            if isinstance(s, N.For) and s.kind == "pipelined":
                out += self.pipelined(s)
            else:
                out.append(s)
            i += 1
        return self.k.finish(out)

    def pipelined(self, loop: N.For) -> list:
        k = self.k
        loads = k.pending(loop.body)
        if not loads:
            return [loop]
        rest, wait_at = split_body(loop.body, loads)
        S, a, n = loop.num_stages, loop.start, loop.extent
        for c in loads:
            k.stages[c.dst.buffer] = S
        bar = k.barrier(len(loads), S, loop.loc)
        issue = issuer(loop, loads, bar)
        prologue = []
        for p in range(S - 1):
            it = N.binop("add", a, i32(p))
            if isinstance(n, N.Const):
                if p < n.value:
                    prologue += issue(it, i32(p))
            else:
                prologue.append(N.If(N.Cmp("lt", i32(p), n), issue(it, i32(p)), loc=loop.loc))
        ahead = N.binop("add", loop.var, i32(S - 1))
        rel = sub(ahead, a)
        prefetch = N.If(N.Cmp("lt", rel, n), issue(ahead, N.binop("mod", rel, i32(S))), loc=loop.loc)
        cur, wait = full_wait(loop, bar)
        last = rest[-1] if rest else None
        # (A in registers must stay until its MMAs end; with one stage the refill is this
        # step's own load, which must come before the wait: the plain form below)
        if S > 1 and k.mma_tail(rest, loads) and k.stays_in_flight(last, S):
            rest[-1] = dataclasses.replace(last, wg_wait=1)
            empty = k.barrier(k.scope.num_threads, S, loop.loc)
            prev = sub(cur, i32(1))
            prev_stage = N.Region(empty, (N.binop("mod", N.binop("add", cur, i32(S - 1)), i32(S)),))
            release = N.If(N.Cmp("gt", cur, i32(0)), (N.MBarrierArrive(prev_stage, loc=loop.loc),),
                           loc=loop.loc)
            acquire = N.If(N.Cmp("gt", cur, i32(0)), (N.MBarrierWait(
                prev_stage, N.binop("bitand", N.binop("floordiv", prev, i32(S)), i32(1)),
                loc=loop.loc),), loc=loop.loc)
            one = N.Cmp("eq", N.Call("thread_idx", (i32(0),), "int32"), i32(0))
            refill = N.If(N.Cmp("lt", rel, n), (N.If(one, (acquire,) + prefetch.then,
                                                     loc=loop.loc),), loc=loop.loc)
            new_body = rest[:wait_at] + [wait] + rest[wait_at:] + [release, refill]
        elif loop.loads_last:  # (the program's order: these refills after the step's work)
            late = [c for c in loads if c.dst.buffer in loop.loads_last]
            early = [c for c in loads if c.dst.buffer not in loop.loads_last]

            def refill(part):
                it = issuer(loop, part, bar)(ahead, N.binop("mod", rel, i32(S)))
                return [N.If(N.Cmp("lt", rel, n), it, loc=loop.loc)] if part else []
            new_body = refill(early) + rest[:wait_at] + [wait] + rest[wait_at:] + refill(late)
        else:
            new_body = [prefetch] + rest[:wait_at] + [wait] + rest[wait_at:]
        return [*prologue, dataclasses.replace(loop, body=tuple(new_body))]


def pipeline_tma_loads(func: N.PrimFunc, arch: str) -> N.PrimFunc:
    return schedule(func, arch, lambda k: _Pipeliner(k).run())
