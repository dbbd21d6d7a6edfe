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
A loop under top-level ``if``s alone (no outer loop: it runs at most once) is pipelined
the same way in place (:func:`.analysis.under_ifs`).
Consecutive pending loads at the kernel's top level share one mbarrier and one wait.
Loops the warp-specialization pass took have no pending loads left.

Each wait stands right before the first statement that names its loads' buffers (a view
of one, or the buffer it views, included), not where the loads stood: the work before
it (another copy's loads, a ``T.clear``) runs while the TMA lands.  In a pipelined body
the loads whose first reader differs get an mbarrier array each (``T.copy`` of K, then of
V read only by the second ``T.gemm``: the first GEMM waits for K alone, as TileLang's
pipeline, one barrier per copy, does); at the top level the wait of the loads before a
pipelined loop that reads them moves after that loop's prologue, so the first stages'
loads are issued before it.  A load whose buffer nothing names after it (or that
something names before it in the body) keeps its wait where it stood.  A ``T.ws`` region
that reads them waits at its own start (so no wait stands between side-by-side regions).
"""

from __future__ import annotations

import dataclasses

from ..ir import nodes as N
from ..ir.visitor import replace_stmt
from .analysis import names_in as _names, nested_pipelined, under_ifs, view_bases, view_family
from .mbarriers import KernelTma, full_wait, i32, issuer, schedule, split_body, sub


class _Pipeliner:
    def __init__(self, k: KernelTma):
        self.k = k
        self.bases = view_bases(k.scope.body)

    def run(self) -> N.KernelScope:
        out, i = [], 0
        body = list(self.k.scope.body)
        pending = self.k.pending(body)
        waits: list[tuple[set, N.Stmt]] = []  # (names, wait): waits not yet placed
        while i < len(body):
            s = body[i]
            due = [w for w in waits if w[0] & _names(s)]
            waits = [w for w in waits if not any(w is d for d in due)]
            if any(s is c for c in pending):
                group = [s]
                while i + len(group) < len(body) and any(body[i + len(group)] is c for c in pending):
                    group.append(body[i + len(group)])
                more = [w for w in waits if w[0] & _names(tuple(group))]
                waits = [w for w in waits if not any(w is d for d in more)]
                out += [w for _, w in due + more]
                bar = self.k.barrier(len(group), 1, s.loc)
                ref = N.Region(bar, (i32(0),))
                out += [dataclasses.replace(c, barrier=ref) for c in group]
                wait = N.MBarrierWait(ref, i32(0), loc=s.loc)
                later = [t for t in body[i + len(group):] if not any(t is c for c in pending)]
                names = set().union(*(self.aliases(c.dst.buffer) for c in group))
                if any(names & _names(t) for t in later):
                    waits.append((names, wait))  # placed before its first reader
                else:
                    out.append(wait)
                i += len(group)
                continue
            if isinstance(s, N.For) and s.kind == "pipelined":
                # [*prologue, loop]: the waits after the prologue, but for buffers it loads
                filled = set().union(*(self.aliases(c.dst.buffer) for c in self.k.pending(s.body)))
                first = [w for n, w in due if n & filled]
                after = [w for n, w in due if not n & filled]
                stmts = self.pipelined(s)
                out += first + stmts[:-1] + after + stmts[-1:]
            elif (path := nested_pipelined(s)) is not None and under_ifs(path) and \
                    self.k.pending(path[-1].body):
                # a loop under a block-uniform ``if`` (an MoE expert's ``if rows > 0:``)
                # runs at most once, as a top-level one: pipelined in place
                out += [w for _, w in due] + list(replace_stmt((s,), path[-1], self.pipelined(path[-1])))
            elif due and isinstance(s, N.WarpGroups):
                # a T.ws region reads the loads: its threads wait at its start.  Between
                # side-by-side regions (``if tx >= 128: ... else: ...``) a wait would split
                # them, and the barrier pass would order the second after the first (a
                # hang where the first waits on mbarriers the second arrives on); later
                # readers outside the region wait too
                out.append(dataclasses.replace(s, body=(*(w for _, w in due), *s.body)))
                waits += [w for w in due if any(w[0] & _names(t) for t in body[i + 1:])]
            else:
                out += [w for _, w in due] + [s]
            i += 1
        out += [w for _, w in waits]
        return self.k.finish(out)

    def aliases(self, name: str) -> set[str]:
        """``name``, the buffer it views and the other views of either."""
        return view_family(self.bases, name)

    def wait_points(self, rest: list, loads: list, positions: list, wait_at: int):
        """Where each load's wait goes in ``rest``: before the first statement at or after
        its own position that names its buffer; ``wait_at`` (where the first load stood)
        for every load where some load has no such reader or a reader before it."""
        points = []
        for c, pos in zip(loads, positions):
            names = self.aliases(c.dst.buffer)
            readers = [j for j, t in enumerate(rest) if names & _names(t)]
            if not readers or readers[0] < pos:
                return [wait_at] * len(loads)
            points.append(readers[0])
        return points

    def pipelined(self, loop: N.For) -> list:
        k = self.k
        loads = k.pending(loop.body)
        if not loads:
            return [loop]
        rest, wait_at = split_body(loop.body, loads)
        S, a, n = loop.num_stages, loop.start, loop.extent
        for c in loads:
            k.stages[c.dst.buffer] = S
        last = rest[-1] if rest else None
        # (A in registers must stay until its MMAs end; with one stage the refill is this
        # step's own load, which must come before the wait: the plain form below)
        mma_tail = S > 1 and k.mma_tail(rest, loads) and k.stays_in_flight(last, S)
        if mma_tail:  # (its refill waits for the stage's release: one barrier for all)
            points = [wait_at] * len(loads)
        else:
            positions, seen = [], 0
            for t in loop.body:
                if any(t is c for c in loads):
                    positions.append(seen)
                else:
                    seen += 1
            points = self.wait_points(rest, loads, positions, wait_at)
        bars = {p: k.barrier(points.count(p), S, loop.loc) for p in sorted(set(points))}

        def issue(it: N.Expr, stage: N.Expr, part=None) -> tuple:
            return tuple(x for c, p in zip(loads, points) if part is None or any(c is d for d in part)
                         for x in issuer(loop, [c], bars[p])(it, stage))

        def waited(stmts: list) -> list:
            out = []
            for j in range(len(stmts) + 1):
                if j in bars:
                    out.append(full_wait(loop, bars[j])[1])
                if j < len(stmts):
                    out.append(stmts[j])
            return out
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
        cur = full_wait(loop, bars[wait_at] if mma_tail else next(iter(bars.values())))[0]
        if mma_tail:
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
            new_body = waited(rest) + [release, refill]
        elif loop.loads_last:  # (the program's order: these refills after the step's work)
            late = [c for c in loads if c.dst.buffer in loop.loads_last]
            early = [c for c in loads if c.dst.buffer not in loop.loads_last]

            def refill(part):
                it = issue(ahead, N.binop("mod", rel, i32(S)), part)
                return [N.If(N.Cmp("lt", rel, n), it, loc=loop.loc)] if part else []
            new_body = refill(early) + waited(rest) + refill(late)
        else:
            new_body = [prefetch] + waited(rest)
        return [*prologue, dataclasses.replace(loop, body=tuple(new_body))]


def pipeline_tma_loads(func: N.PrimFunc, arch: str) -> N.PrimFunc:
    return schedule(func, arch, lambda k: _Pipeliner(k).run())
