"""Warp specialization (sm_90a): a ``T.Pipelined`` loop whose TMA loads feed a wgmma
``T.gemm`` gets a producer warpgroup that issues the loads while the kernel's threads
only compute.  Two passes:

- :func:`warp_specialize` (after the copies are lowered to TMA, before software
  pipelining) decides per loop and builds the producer's loop and the compute loop::

      if thread_idx >= threads:                      # the producer warpgroup
          if thread_idx == threads:
              for j in range(n):
                  if j >= S: mbarrier_wait_parity(empty[j % S], (j // S + 1) & 1)
                  tma_copy(... k = start + j ..., stage=j % S, barrier=full[j % S])
      for k in T.Pipelined(n, num_stages=S):     # the compute warpgroups
          mbarrier_wait_parity(full[k % S], (k // S) & 1)
          <the body; its T.gemm keeps one batch in flight>
          if k > 0: mbarrier_arrive(empty[(k - 1) % S])

  With A in registers (wgmma RS) the MMAs end within the step, so each step releases
  its own stage.  A body that is one ``if`` each step decides alone (``if BlockMask[by,
  bx, k]:``, after the step's Lets: :func:`.analysis.guarded_body`; the TMA pass made its
  branch's loads pending only then) gets a producer too: it issues step ``j``'s loads
  under step ``j``'s condition, the compute warpgroups wait, compute and release under
  step ``k``'s, and both count only the steps that load (a skipped step takes 1 off a
  local count, the loop's ``stage_base``), as TileLang's producer and consumer phase
  counters do; without a producer (or in a loop inside an outer loop) the branch's loads
  are put back as copies (:func:`_loop_back`).  A stage the threads read themselves is released after a proxy fence
  (:func:`_release`).  ``warp_specialize=True`` asks for it (an error naming the reason when
  the loop does not qualify), ``False`` refuses it, and the default (``None``) turns it
  on where the loop qualifies and the block is alone on its SM anyway (its shared memory,
  or a constant grid of no more blocks than the smallest GPU of the arch has SMs): the
  producer's register reallocation takes the SM's whole register file.
- :func:`split_roles` (after the barrier pass) moves everything but the shared
  allocations and the leading pure ``Let``s into the ``else`` of the producer's branch
  and sets each role's register budget (``T.set_max_nreg``).
"""

from __future__ import annotations

import dataclasses
import math

from ..ir import nodes as N
from ..ir.visitor import (fold_constants, replace_exprs, replace_stmt, substitute, var_names,
                          walk_nodes, walk_stmts)
from ..target import MAX_THREADS, PRODUCER_REGS, WARPGROUP, arch_at_least, target
from .analysis import (buffers_used, guarded_body, let_values, lifetimes, loads as expr_loads,
                       nested_pipelined, stage_bytes, syncs_grid, top_loads, under_ifs,
                       written_globals)
from .tma_copies import TmaError, is_pending_load
from .mbarriers import KernelTma, full_wait, i32, issuer, schedule, split_body, sub


class WarpSpecializeError(TmaError):
    pass


class _Specializer:
    def __init__(self, k: KernelTma, auto: bool = True, compute_tail: bool = True):
        self.k, self.auto = k, auto  # auto: the pass may choose a producer by itself
        self.compute_tail = compute_tail  # (KernelTma.mma_then_registers')
        self.producer: N.If | None = None
        self.staged: dict[str, int] = {}  # buffers earlier pipelined loops load, their stages

    def fail(self, s, msg: str):
        self.k.fail(s, msg, WarpSpecializeError)

    def run(self) -> N.KernelScope:
        body = []
        for s in self.k.scope.body:
            if isinstance(s, N.For) and s.kind == "pipelined":
                body += self.loop(s)
            elif (path := nested_pipelined(s)) is not None:  # a persistent kernel's tiles,
                body += self.nested(s, path)  # or a loop under a block-uniform ``if``
            else:
                body.append(s)
        scope = self.k.finish(body)
        return dataclasses.replace(scope, producer_threads=WARPGROUP if self.producer else 0)

    def nested(self, outer: N.For, path: list) -> list:
        """A pipelined loop inside an outer loop or ``if`` (``path``: from ``outer`` down to it): the
        producer's loop replays the outer loops, Lets and ifs around it, and both roles
        count the steps of the loop's earlier runs (a local counter each), so the stages
        and mbarrier phases run on from tile to tile and the producer loads the next
        tile's first stages while the compute warpgroups finish the last one (its
        epilogue).  The tile's own loads before the loop (attention's Q) the producer
        issues once per run.  A loop that gets no producer has its loads put back as
        copies (the software pipeline takes top-level loops, and loops under top-level
        ``if``s only: :func:`under_ifs`), or, under ifs only, keeps them for the software
        pipeline."""
        loop, body = path[-1], (outer,)
        run_loads = self.run_loads(path)
        if any(var_names(c.src) - self.producer_sees(path[0], path) for c in run_loads):
            run_loads = []  # (an origin the producer cannot compute: they stay copies)
        out = self.loop(loop, path, run_loads)
        for c in self.run_loads(path):  # those the producer does not issue
            if len(out) == 1 or not run_loads:
                body = replace_stmt(body, c, [_copy_back(c, self.k.func)])
        if len(out) == 1:  # no producer
            kept = out[0] if under_ifs(path) else _loop_back(loop, self.k.func)
            return list(replace_stmt(body, loop, [kept]))
        producer, inits, compute, run_wait, run_done = out
        body = replace_stmt(body, loop, compute)
        if run_loads:  # the compute warpgroups wait for the tile's loads where they stood
            body = replace_stmt(body, run_loads[0], [run_wait])
            for c in run_loads[1:]:
                body = replace_stmt(body, c, [])
            body = replace_stmt(body, compute[-1], [compute[-1], *run_done])
        return inits + [producer, *body]

    def run_loads(self, path: list) -> list:
        """The pending TMA loads among the statements of the pipelined loop's container
        before it (a tile's own loads, attention's Q)."""
        out = []
        for t in _children(path[-2]):
            if t is path[-1]:
                break
            if is_pending_load(t, self.k.func):
                out.append(t)
        return out

    def loop(self, loop: N.For, path: list | None = None, run_loads=()) -> list:
        guard = _guard(loop, self.k.func)  # (a body under one ``if`` the step decides)
        loads = self.k.pending(loop.body if guard is None else guard[2])
        if not loads:
            if loop.warp_specialize:
                self.fail(loop, self.refusal(loop, [], False))
            return [loop]
        if guard is not None and (loop.warp_specialize is False or loop.overlap_mma):
            return [_loop_back(loop, self.k.func)]
        rest, wait_at = split_body(loop.body if guard is None else guard[2], loads)
        staged = {**self.staged, **{c.dst.buffer: loop.num_stages for c in loads}}
        self.staged = staged
        ws = loop.warp_specialize
        if ws is False:
            return [loop]
        refusal = self.refusal(loop, loads, self.k.mma_then_registers(rest, loads, self.compute_tail),
                               path, guard)
        blocks = self.k.scope.min_blocks_per_sm
        if refusal is None and blocks > 1:
            refusal = (f"the kernel asks for {blocks} blocks per SM "
                       f"(T.annotate_min_blocks_per_sm({blocks})), and a producer warpgroup's "
                       "register reallocation (setmaxnreg) takes the SM's whole register file")
        if refusal is None and (crowded := self.crowded_mma()):
            refusal = crowded
        if refusal is None and syncs_grid(self.k.scope.body):
            refusal = ("the kernel calls T.sync_grid(), which tilecute runs only in kernels "
                       "without a producer warpgroup")
        if refusal is None and any(isinstance(x, N.NamedBarrier) and x.program
                                   for x in walk_stmts(self.k.scope.body)):
            refusal = ("the kernel syncs named barriers of its own (T.sync_threads(barrier_id, "
                       "...)), whose ids the producer/compute split would share (barrier 1)")
        if ws and refusal:
            self.fail(loop, refusal)
        if loop.overlap_mma and refusal and arch_at_least(self.k.arch, 90) and \
                self.k.mma_tail(rest, loads):
            # (the program's stage / order lists ask for the MMA overlap, which runs on a
            # producer warpgroup: say why there is none, not only that the loop differs)
            self.fail(loop, "T.Pipelined(stage=, order=) asks for overlapped GEMMs, which "
                            f"need a producer warpgroup, and this loop gets none: {refusal}")
        # (a loop whose GEMMs the program asked to overlap needs the producer warpgroup)
        if refusal is not None or not (ws or loop.overlap_mma or (
                self.auto and self.alone_on_sm(staged))):
            return [loop if guard is None else _loop_back(loop, self.k.func)]
        return self.specialize(loop, loads, rest, wait_at, path, run_loads, guard)

    def specialize(self, loop: N.For, loads, rest, wait_at, path: list | None = None,
                   run_loads=(), guard: tuple | None = None) -> list:
        """The producer's loop and the compute loop.  Loads whose tiles are first used by
        different statements (attention: K by the first GEMM, V by the second) get a
        pipeline each (FlashAttention's separate K and V pipelines): the compute loop
        waits for each group just before its first use, and the producer refills each
        group's stage as soon as that group's stage is released.

        Returns ``[producer, compute loop]``; for a loop inside an outer loop (``path``)
        ``[producer, the counters' declarations, what replaces the loop, the wait for
        the run's own loads (``run_loads``), what follows the loop's replacement]``: the
        producer issues ``run_loads`` at the start of each run once the compute
        warpgroups are done with the last run's (an empty/full mbarrier pair, the runs
        counted in a local each).  Where nothing after the loop reads the run's tiles, the
        compute warpgroups release them in the loop's last step, right after their last
        reader there (attention: Q after the last Q K^T), so the producer loads the next
        tile's while this one's last P V and epilogue run; a run of no steps releases them
        after the loop."""
        k = self.k
        S, a, n = loop.num_stages, loop.start, loop.extent
        for c in loads:
            k.stages[c.dst.buffer] = S
        threads = k.scope.num_threads
        rest = list(rest)
        groups = _by_first_use(loads, rest)
        if len(groups) == 1:  # (one pipeline: wait where the first load stood)
            groups = [(wait_at, loads)]
        j = N.Var(k.fresh("tc_j"), "int32")
        # a loop inside an outer loop counts on from its earlier runs: each role keeps the
        # count of its steps so far in a local (tc_pbase: the producer's, tc_cbase: the
        # compute warpgroups'); the stage and phase of step j are those of step base + j
        # A guarded body (``if BlockMask[by, bx, k]:``, ``guard``) uses a stage only in the
        # steps its guard holds: a skipped step takes 1 off both counts (TileLang counts
        # such steps the same way), so the stages and phases follow the steps that load
        pbase = cbase = None
        if path is not None or guard is not None:
            pbase = N.Buffer(k.fresh("tc_pbase"), "int32", (i32(1),), "local")
            cbase = N.Buffer(k.fresh("tc_cbase"), "int32", (i32(1),), "local")
        count = j if pbase is None else N.binop("add", N.Load(pbase.name, (i32(0),), "int32"), j)
        stage = N.binop("mod", count, i32(S))
        it = j if isinstance(a, N.Const) and a.value == 0 else N.binop("add", a, j)  # a + j
        # (else each step's MMAs end in it; a GEMM followed by register work ends there)
        shared_a = isinstance(rest[-1], N.Gemm) and k.stays_in_flight(rest[-1], S) and guard is None
        if shared_a:  # step k's MMAs stay in flight: release step k - 1's stage
            rest[-1] = dataclasses.replace(rest[-1], wg_wait=1)
        feed, waits, releases = [], {}, {}
        base = None if cbase is None else N.Load(cbase.name, (i32(0),), "int32")
        tail = []  # (nested, MMAs in flight) after the loop: release its last step's stage
        for at, group in groups:
            bar = k.barrier(len(group), S, loop.loc)
            cur, full = full_wait(loop, bar, base)
            empty = k.barrier(threads, S, loop.loc)
            fence = self.read_by_threads(rest, {c.dst.buffer for c in group})
            if shared_a:  # at the end of the step
                step = sub(loop.var, loop.start)
                releases.setdefault(len(rest), []).append(N.If(N.Cmp("gt", step, i32(0)), _release(
                    N.Region(empty, (N.binop("mod", N.binop("add", cur, i32(S - 1)), i32(S)),)),
                    fence, loop.loc), loc=loop.loc))
                if base is not None:  # (the next run's producer waits for it)
                    last = N.binop("mod", N.binop("add", base, N.binop("add", n, i32(S - 1))), i32(S))
                    release = _release(N.Region(empty, (last,)), fence, loop.loc)
                    if not isinstance(n, N.Const):
                        tail.append(N.If(N.Cmp("gt", n, i32(0)), release, loc=loop.loc))
                    elif n.value > 0:
                        tail.extend(release)
            else:  # A from registers: the MMAs end with the step; each group's stage is
                # released after its last use (the last group's at the end of the step)
                last = max((i for i, s in enumerate(rest)
                            if buffers_used(s) & {c.dst.buffer for c in group}), default=0)
                last = len(rest) if len(groups) == 1 or last == len(rest) - 1 else last + 1
                releases.setdefault(last, []).extend(_release(
                    N.Region(empty, (N.binop("mod", cur, i32(S)),)), fence, loop.loc))
            feed.append(N.If(N.Cmp("ge", count, i32(S)), (N.MBarrierWait(
                N.Region(empty, (stage,)),
                N.binop("bitand", N.binop("add", N.binop("floordiv", count, i32(S)), i32(1)), i32(1)),
                loc=loop.loc),), loc=loop.loc))
            feed.extend(issuer(loop, group, bar)(it, stage))
            waits.setdefault(at, []).append(full)
        feed = read_origins_first(feed, written_globals(k.func, k.scope.body), k.fresh, loop.loc)
        if guard is not None:  # (the step's guard, read again for step it)
            feed = [N.If(substitute(guard[0], {loop.var.name: it}), tuple(feed),
                         (_skipped(pbase, loop.loc),), loc=loop.loc)]
        tid = N.Call("thread_idx", (i32(0),), "int32")
        issuing: tuple = (N.For(j, i32(0), n, "serial", tuple(feed), loc=loop.loc),)
        if guard is not None:
            issuing = _local(pbase, loop.loc) + issuing
        inits = list(_local(cbase, loop.loc)) if cbase is not None else []
        run_wait, run_done = None, ()
        if run_loads:
            loc = loop.loc
            full = k.barrier(len(run_loads), 1, loc)
            empty = k.barrier(threads, 1, loc)
            prun = N.Buffer(k.fresh("tc_prun"), "int32", (i32(1),), "local")
            crun = N.Buffer(k.fresh("tc_crun"), "int32", (i32(1),), "local")
            runs = N.Load(prun.name, (i32(0),), "int32")
            issuing = _counted(prun, i32(1), loc, (N.If(N.Cmp("ge", runs, i32(1)), (
                N.MBarrierWait(N.Region(empty, (i32(0),)),
                               N.binop("bitand", N.binop("sub", runs, i32(1)), i32(1)), loc=loc),
            ), loc=loc), *[dataclasses.replace(c, barrier=N.Region(full, (i32(0),)))
                           for c in run_loads])) + issuing
            run_wait = N.MBarrierWait(N.Region(full, (i32(0),)), N.binop(
                "bitand", N.Load(crun.name, (i32(0),), "int32"), i32(1)), loc=loc)
            bufs = {c.dst.buffer for c in run_loads}
            after = (path[0],)  # the run without its loads and the loop: read after it?
            for s in (loop, *run_loads):
                after = replace_stmt(after, s, [])
            release = _release(N.Region(empty, (i32(0),)),
                               self.read_by_threads((*rest, *after), bufs), loc)
            users = [i for i, s in enumerate(rest) if buffers_used(s) & bufs]
            if users and not shared_a and not buffers_used(after) & bufs:
                # (with shared_a, step k's MMAs end in step k + 1)
                last_step = fold_constants(N.binop("add", a, sub(n, i32(1))))
                releases.setdefault(users[-1] + 1, []).append(N.If(
                    N.Cmp("eq", loop.var, last_step), release, loc=loc))
                release = () if isinstance(n, N.Const) and n.value > 0 else \
                    (N.If(N.Cmp("le", n, i32(0)), release, loc=loc),)
            run_done = release + _counted(crun, i32(1), loc, ())
            inits += list(_local(crun, loc))
        if path is not None:  # the outer loops, Lets and ifs around it, the counts kept
            issuing = _counted(pbase, n, loop.loc, issuing)
            issuing = _local(pbase, loop.loc) + (_local(prun, loop.loc) if run_loads else ()) + \
                (_replay(path, issuing, k.allocs),)
        self.producer = N.If(N.Cmp("ge", tid, i32(threads)), (
            N.If(N.Cmp("eq", tid, i32(threads)), issuing, loc=loop.loc),), loc=loop.loc)
        body = []
        for i, s in enumerate(rest):
            body += releases.get(i, []) + waits.get(i, []) + [s]
        body += waits.get(len(rest), []) + releases.get(len(rest), [])
        if guard is not None:
            cond, prefix, _ = guarded_body(loop.body)
            body = [*prefix, N.If(cond, tuple(body), (_skipped(cbase, loop.loc),), loc=loop.loc)]
        compute = dataclasses.replace(loop, body=tuple(body), stage_base=base)
        if path is None:
            return [self.producer, *inits, compute]
        return [self.producer, inits, [compute, *tail, *_counted(cbase, n, loop.loc, ())],
                run_wait, run_done]

    def read_by_threads(self, stmts, bufs: set[str]) -> bool:
        """Do statements of ``stmts`` other than wgmma GEMMs (whose shared operands the async
        proxy reads, done when the GEMM's wait returns) read tiles of ``bufs``: the threads'
        own loads (generic proxy), which must be ordered before the producer's next TMA
        write of the stage (:func:`_release`)."""
        return any(buffers_used(s) & bufs and not (isinstance(s, N.Gemm) and self.k.wgmma(s))
                   for s in stmts)

    def refusal(self, loop: N.For, loads, mma_tail: bool, path: list | None = None,
                guard: tuple | None = None) -> str | None:
        """Why ``loop`` cannot be warp-specialized (an error when the program asks, the
        default staying off otherwise), or None."""
        scope = self.k.scope
        threads = scope.num_threads
        if any(isinstance(s, N.WarpGroups) for s in walk_stmts(scope.body)):
            return ("the kernel has T.ws regions: its program assigns the warpgroups' work "
                    "and orders it (as TileLang, tilecute adds no producer warpgroup then)")
        if not arch_at_least(self.k.arch, 90) or not mma_tail:
            return ("T.Pipelined(warp_specialize=True) needs sm_90a and a body whose loads "
                    "become TMA copies and that ends with a wgmma T.gemm on the loaded tiles "
                    "(after it only register work, or with option disable_warp_specialize_tail "
                    "unset, GEMMs, atomics, barriers and stores on tiles of its own, not "
                    "ending with a GEMM)")
        if len(scope.threads) != 1 or threads % WARPGROUP or threads + WARPGROUP > MAX_THREADS:
            return (f"T.Pipelined(warp_specialize=True) needs 1-D threads in whole warpgroups "
                    f"(multiples of {WARPGROUP}) with room for a producer warpgroup (at most "
                    f"{MAX_THREADS - WARPGROUP}); the kernel has threads={scope.threads}")
        if self.producer is not None:
            return "a kernel has at most one T.Pipelined(warp_specialize=True) loop"
        if guard is not None and path is not None:
            return ("T.Pipelined(warp_specialize=True): a body under an `if` in a loop inside an "
                    "outer loop (the producer warpgroup issues guarded loads only for a loop at "
                    "the kernel's top level)")
        guards = () if guard is None else (guard[0],)  # (the producer decides it too)
        needs = var_names((loop.start, loop.extent) + tuple(c.src for c in loads) + guards) - \
            {loop.var.name}
        if path is not None:  # (it replays the ifs around the loop too)
            needs |= var_names(tuple(s.cond for s in path if isinstance(s, N.If)))
        hidden = sorted(needs - self.producer_sees(path[0] if path else loop, path))
        # a bound or origin read from a buffer the kernel allocates (a T.alloc_var's lo /
        # hi): the producer's branch has none of the compute warpgroups' locals
        bounds = (loop.start, loop.extent) + tuple(c.src for c in loads) + guards
        if path is not None:
            bounds += tuple(s.cond for s in path if isinstance(s, N.If))
        hidden += sorted({x.buffer for x in walk_nodes(bounds)
                          if isinstance(x, N.Load) and x.buffer in self.k.allocs})
        if hidden:
            return (f"T.Pipelined(warp_specialize=True): the loads use {hidden}, which the "
                    "producer warpgroup does not see; it sees the kernel's block indices, "
                    "parameters and the Lets before the loop at the kernel's top level, not "
                    "the compute threads' locals (a T.alloc_var read in the loop's bounds or a "
                    "load's origin)")
        return None

    def crowded_mma(self) -> str | None:
        """Why a producer warpgroup would leave some wgmma of the kernel too few registers,
        or None: the kernel is compiled at the registers per thread of its launch with the
        producer's threads (96 at 512 + 128), and ptxas holds each wgmma instruction's
        accumulator and what it needs beside within that count, whatever setmaxnreg raises
        for the compute warpgroups ("Insufficient registers", C7602: a 256 x 160 tile over
        512 threads, 80 + 26 registers, compiles without a producer, not with one)."""
        from .select_mma import WGMMA_SPARE_REGS, wgmma_instruction_regs
        threads = self.k.scope.num_threads
        cap = target(self.k.arch).launch_regs(threads + WARPGROUP)
        for g in walk_stmts(self.k.scope.body):
            if not (isinstance(g, N.Gemm) and g.family == "wgmma" and g.c in self.k.allocs):
                continue
            c = self.k.allocs[g.c]
            layout = c.layout
            if layout is None or not layout.warps:
                continue
            cols = int(c.buffer.shape[-1].value) // layout.warps[1]
            need = wgmma_instruction_regs(cols, c.buffer.dtype) + WGMMA_SPARE_REGS
            if need > cap:
                return (f"T.gemm(..., {g.c}): its wgmma instruction needs about {need} registers "
                        f"a thread, and a block of {threads} threads and a producer warpgroup "
                        f"is compiled with {cap} (ptxas: 'Insufficient registers'; setmaxnreg "
                        "raises no instruction's limit)")
        return None

    def alone_on_sm(self, stages: dict[str, int]) -> bool:
        """Is the block alone on its SM anyway?  Then warp specialization costs no
        occupancy.  So it is when the grid is constant and has no more blocks than the
        architecture's smallest GPU has SMs (``Target.min_sms``: each block gets an SM of
        its own; H100, TileLang's 1024^3 GEMM example, 64 blocks of 128 x 128: 18.6 us
        with a producer warpgroup vs 20.4 without, while at 2048^3, 256 blocks, 61 vs 41
        us), or when the block's shared memory (with the pipelined loops' stages; buffers
        alive at different times share bytes) is over half the SM's."""
        grid = self.k.scope.grid
        if all(isinstance(g, N.Const) for g in grid) and \
                math.prod(int(g.value) for g in grid) <= target(self.k.arch).min_sms:
            return True
        sizes = {name: stage_bytes(a.buffer) * stages.get(name, a.stages)
                 for name, a in self.k.allocs.items() if a.buffer.scope == "shared"}
        alive = lifetimes(self.k.scope)
        forever = (-1, len(self.k.scope.body))
        peak = max((sum(size for b, size in sizes.items()
                        if alive.get(b, forever)[0] <= i <= alive.get(b, forever)[1])
                    for i in range(len(self.k.scope.body))), default=0)
        return peak > target(self.k.arch).shared_per_sm // 2

    def producer_sees(self, loop: N.For, path: list | None = None) -> set[str]:
        """What :func:`split_roles` leaves before the role split: block indices,
        parameters, symbols, and the pure top-level Lets before ``loop``; for a loop inside
        an outer loop (``path``), also the outer loops' variables and the pure Lets the
        producer replays (:func:`_replay`)."""
        scope, func = self.k.scope, self.k.func
        seen = {v.name for v in scope.block_vars} | {p.name for p in func.params}
        seen |= {v.name for v in func.symbols}
        for s in scope.body:
            if s is loop:
                break
            if _hoisted(s, set(self.k.allocs)):
                seen.add(s.var.name)
        for s in (path or [])[:-1]:
            if isinstance(s, N.For):
                seen.add(s.var.name)
            for t in _replayed_lets(s, path, set(self.k.allocs)):
                seen.add(t.var.name)
        return seen


def read_origins_first(feed: list, written: set[str], fresh, loc) -> list:
    """The producer's step with the global reads in its TMA origins (a paged cache's
    block table: ``KV[block_table[b, k], ...]``) bound first, before its waits for free
    stages, so that their latency passes while the producer waits rather than delaying
    the copies.  Only tensors the kernel never writes (``written``: those it does) are
    read early; a read that appears in several origins is read once."""
    found: list[N.Load] = []
    for s in feed:
        if isinstance(s, N.TmaCopy):
            found += [ld for ld in top_loads(s.src.starts)
                      if ld.buffer not in written and ld not in found]
    if not found:
        return feed
    names = {ld: N.Var(fresh("tc_origin"), ld.dtype) for ld in found}
    return [N.Let(v, ld, loc=loc) for ld, v in names.items()] + \
        [replace_exprs(s, names) if isinstance(s, N.TmaCopy) else s for s in feed]


def _release(region: N.Region, fence: bool, loc) -> tuple:
    """A compute thread's release of a stage (its arrive on the stage's empty mbarrier),
    after which the producer's TMA (the async proxy) writes the stage again.  Where the
    threads read the stage themselves (``fence``: a tile copied to a fragment, a vector
    read by a ``T.Parallel``), each thread first runs ``fence.proxy.async.shared::cta``:
    the arrive alone does not order its generic-proxy loads, which may still be in flight,
    before the TMA write, and they may read the next step's tile (seen on the H100 and
    H200: a row-major tile copied to a wgmma A fragment, whose bank-conflicted loads take long,
    read wrong values on most runs; the barrier pass fences a block barrier before a TMA
    load for the same reason)."""
    arrive = N.MBarrierArrive(region, loc=loc)
    if not fence:
        return (arrive,)
    return (N.Evaluate(N.Call("fence_proxy_async", (), "int32"), loc=loc), arrive)


def _copy_back(s, func):
    """A pending TMA load put back as the copy it came from (one the program asked to be
    TMA keeps the request: its lowering then fails naming it)."""
    if not is_pending_load(s, func):
        return s
    return N.Copy(s.src, s.dst, loc=s.loc, instruction="tma" if s.required else "")


def _guard(loop: N.For, func: N.PrimFunc) -> tuple | None:
    """``(cond, prefix, then)`` of a pipelined body under one ``if`` whose branch holds
    pending TMA loads (:func:`guarded_body`; the TMA pass took them only where the step
    alone decides the guard), ``cond`` with the prefix Lets it names inlined (what the
    producer reads for each step); None for any other body."""
    cond, prefix, then = guarded_body(loop.body)
    if cond is None or not any(is_pending_load(s, func) for s in then):
        return None
    return substitute(cond, let_values(prefix)), prefix, then


def _loop_back(loop: N.For, func: N.PrimFunc) -> N.For:
    """``loop`` with its pending TMA loads, at the top of its body or of its guarded
    branch, put back as copies (a loop that gets no producer warpgroup)."""
    body = tuple(_copy_back(s, func) for s in loop.body)
    if body and isinstance(body[-1], N.If) and _guard(loop, func) is not None:
        body = body[:-1] + (dataclasses.replace(
            body[-1], then=tuple(_copy_back(s, func) for s in body[-1].then)),)
    return dataclasses.replace(loop, body=body)


def _skipped(buf: N.Buffer, loc) -> N.Store:
    """A skipped step of a guarded body: the count ``buf`` one lower."""
    return N.Store(buf.name, (i32(0),), N.binop("sub", N.Load(buf.name, (i32(0),), "int32"), i32(1)),
                   loc=loc)


def _local(buf: N.Buffer, loc) -> tuple:
    """A local int32 counter, set to 0."""
    return (N.Allocate(buf, loc=loc), N.Store(buf.name, (i32(0),), i32(0), loc=loc))


def _counted(buf: N.Buffer, n, loc, stmts: tuple) -> tuple:
    """``stmts``, then the counter ``buf`` advanced by the ``n`` steps they ran (none for
    an extent below 0: a loop over it runs no step)."""
    now = N.Load(buf.name, (i32(0),), "int32")
    if not (isinstance(n, N.Const) and n.value >= 0):
        n = N.binop("max", n, i32(0))
    return stmts + (N.Store(buf.name, (i32(0),), N.binop("add", now, n), loc=loc),)


def _children(s) -> tuple:
    return s.body if isinstance(s, N.For) else s.then + s.orelse


def _replayed_lets(s, path: list, allocated: set[str]) -> list:
    """The Lets directly in container ``s`` of ``path`` before the next statement of the
    path that read no buffer the kernel allocates (the producer replays those)."""
    nxt = path[path.index(s) + 1]
    out = []
    for t in _children(s):
        if t is nxt:
            break
        if isinstance(t, N.Let) and not any(ld.buffer in allocated for ld in expr_loads(t.value)):
            out.append(t)
    return out


def _replay(path: list, inner: tuple, allocated: set[str]):
    """The producer's copy of the outer loops and ifs of ``path`` (all but its last, the
    pipelined loop), each with only its replayed Lets and the next one; ``inner`` in place
    of the pipelined loop."""
    body = inner
    for s in reversed(path[:-1]):
        lets = tuple(_replayed_lets(s, path, allocated))
        if isinstance(s, N.For):
            body = (dataclasses.replace(s, body=lets + body),)
        else:
            nxt = path[path.index(s) + 1]
            in_then = any(t is nxt for t in s.then)
            body = (dataclasses.replace(s, then=lets + body if in_then else (),
                                        orelse=() if in_then else lets + body),)
    return body[0]


def _by_first_use(loads, rest) -> list:
    """``loads`` grouped by the statement of ``rest`` that first uses their tiles, in
    order: ``[(index, loads), ...]``."""
    first = {}
    for c in loads:
        at = next((i for i, s in enumerate(rest) if c.dst.buffer in buffers_used(s)), len(rest))
        first.setdefault(at, []).append(c)
    return sorted(first.items())


def warp_specialize(func: N.PrimFunc, arch: str, auto: bool = True,
                    compute_tail: bool = True) -> N.PrimFunc:
    """``auto=False`` (option ``disable_warp_specialize``): only loops that ask for a
    producer (``warp_specialize=True``, or overlapped GEMMs) get one.
    ``compute_tail=False`` (option ``disable_warp_specialize_tail``): a loop whose last
    wgmma GEMM on its loaded tiles is followed by more than register work (shared tiles
    of its own, GEMMs, atomics, barriers: TileLang's GQA backward's dQ) gets none."""
    return schedule(func, arch, lambda k: _Specializer(k, auto, compute_tail).run())


def split_roles(func: N.PrimFunc, arch: str) -> N.PrimFunc:
    """The last step of warp specialization, after the barrier pass: in a kernel with a
    producer warpgroup, everything after the shared allocations and the leading ``Let``s
    (which both roles see) moves into the ``else`` of the producer's branch, and each
    role sets its register budget: the producer keeps :data:`PRODUCER_REGS`, the compute
    warpgroups share the rest of the SM's registers (``T.set_max_nreg``)."""
    kernels = []
    for scope in func.kernels:
        if not scope.producer_threads:
            kernels.append(scope)
            continue
        at = producer_branch(scope)
        producer, cond = scope.body[at], scope.body[at].cond
        local = {s.buffer.name for s in scope.body if isinstance(s, N.Allocate)}
        head, compute = [], []
        for i, s in enumerate(scope.body):
            if i == at:
                continue
            shared = isinstance(s, N.Allocate) and s.buffer.scope == "shared"
            if shared or (i < at and _hoisted(s, local)):
                head.append(s)
            else:
                compute.append(s)
        if scope.reg_alloc:
            low, high = _budgets(func.name, scope, arch)
            split = N.If(cond, (N.SetMaxNReg(low, False, loc=producer.loc),) + producer.then,
                         (N.SetMaxNReg(high, True, loc=producer.loc), *compute), loc=producer.loc)
        else:  # T.no_set_max_nreg(): both roles keep the launch's budget
            split = N.If(cond, producer.then, tuple(compute), loc=producer.loc)
        kernels.append(dataclasses.replace(scope, body=(*head, split)))
    return dataclasses.replace(func, kernels=tuple(kernels))


def producer_branch(scope: N.KernelScope) -> int | None:
    """The index in ``scope.body`` of the producer warpgroup's branch (``if thread_idx >=
    threads:``, placed by :func:`warp_specialize` just before its loop), or None in a kernel
    without one.  Where it stands is not when it runs: :func:`split_roles` starts it with the
    kernel, beside everything the compute warpgroups run before the loop."""
    if not scope.producer_threads:
        return None
    cond = N.Cmp("ge", N.Call("thread_idx", (i32(0),), "int32"), i32(scope.num_threads))
    (at,) = [i for i, s in enumerate(scope.body) if isinstance(s, N.If) and s.cond == cond]
    return at


def _budgets(name: str, scope: N.KernelScope, arch: str) -> tuple[int, int]:
    """The producer's and the compute warpgroups' registers per thread: the program's
    (T.annotate_producer_reg_dealloc / T.annotate_consumer_reg_alloc), else the producer
    keeps :data:`PRODUCER_REGS` and the compute warpgroups share the rest of the block's
    register pool.

    The pool is what the block was launched with, not the SM's file: ``setmaxnreg.dec``
    gives registers back to the block's pool and ``setmaxnreg.inc`` waits until the pool
    has them, so a pair the pool cannot hold waits forever.  A kernel that changes its
    register counts is compiled at the count its launch bounds allow (one block per SM:
    the file over the block's threads, in steps of 8, at most 255): 168 a thread at 384
    threads (pool 64512: 24 + 2 x 240), 96 at 640 (pool 61440: 24 + 4 x 112, where the
    SM's file would give 120 and hang).  A pair over the pool is an error naming both."""
    threads = scope.num_threads
    block = threads + scope.producer_threads
    pool = target(arch).launch_regs(block) * block
    low = scope.producer_regs or PRODUCER_REGS
    high = scope.consumer_regs or min(256, (pool - low * scope.producer_threads) // threads // 8 * 8)
    if low * scope.producer_threads + high * threads > pool:
        raise WarpSpecializeError(
            f"prim_func '{name}': {scope.producer_threads} producer threads at {low} registers "
            f"and {threads} compute threads at {high} take "
            f"{low * scope.producer_threads + high * threads} registers, more than the "
            f"{pool} the block is launched with ({block} threads at "
            f"{pool // block}; setmaxnreg.inc would wait forever) "
            f"(T.annotate_producer_reg_dealloc / T.annotate_consumer_reg_alloc)")
    return low, high


def _hoisted(s, allocated: set[str]) -> bool:
    """Is ``s`` (at the kernel's top level, before a warp-specialized loop) a ``Let`` that
    :func:`split_roles` leaves before the role split, where the producer sees it: one that
    reads no buffer the kernel allocates."""
    return isinstance(s, N.Let) and not any(ld.buffer in allocated for ld in expr_loads(s.value))
