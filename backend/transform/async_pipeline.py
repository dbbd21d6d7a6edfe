"""Software pipelining of cp.async copies: a ``T.Pipelined(n, num_stages=S)`` body's
``T.copy`` nests from global into shared memory that the vectorization pass made cp.async
(``For.async_copy``; copies TMA cannot take: sm_80, a box past 256 elements, an
unaligned source) are multi-buffered (``Allocate.stages = S``) and issued ``S - 1``
steps ahead, as TileLang's pipeline does with cp.async::

    for p in range(S - 1):                       # prologue
        if p < n: copies of step p into stage p  # (each nest commits its own group)
        else: an empty group per nest
    for k in T.Pipelined(n, num_stages=S):       # the body sees stage k % S
        if k + S - 1 < n: copies of step k + S - 1 into stage (k + S - 1) % S
        else: an empty group per nest
        T.ptx_wait_group(G * (S - 1))            # step k's G groups have landed
        <the rest of the body>
    T.ptx_wait_group(0)

The copies become program-waited nests (``copy_instruction`` ASYNC_COPY), so the barrier
pass orders them as it orders a program's ``T.async_copy``: a barrier before the refill
(the stage it fills was read in the step before) and one after the wait (other threads'
copies landed).  The empty groups keep the count of groups a step commits constant, so
the wait's count is always right; the wait after the loop covers every copy of a loop
run zero times or ended early.

A loop is left as it is (its copies wait at the barrier before their first reader, one
buffer) unless every cp.async nest of its body qualifies: its shared buffers are tiles of
the kernel's own (not views, not already staged) that nothing outside the loop names and
nothing in the body before the copy names or writes besides it, and its indices read
nothing the body computes (a buffer the body writes, a ``Let`` other than those of the
loop variable and loop-invariant values, which are inlined: ``pg = Tbl[h, k]``), so it can
run steps ahead.  Where cp.async nests the barrier pass waits for may be in flight when
the loop starts (a Q tile copied before it), an ``AsyncCopyWait`` before the prologue lands
them: the body's barriers would otherwise wait for every group each step (the barrier
pass's state at the top of a body is the same for every step).  Loops with a producer warpgroup, the program's own cp.async (``T.async_copy``,
``T.ptx_cp_async``, ``T.ptx_wait_group``) or one stage are left too.
"""

from __future__ import annotations

import dataclasses

from ..ir import nodes as N
from ..ir.visitor import BODY_FIELDS, fold_constants, replace_stmt, substitute, walk_nodes, walk_stmts
from ..target import target
from .analysis import (PURE_CALLS, accesses, buffers_used, guarded_body, launch_sized,
                       names_in as _names, parallel_nest, tainted_lets, view_bases, with_innermost)
from .mbarriers import i32, sub
from .shared_memory import place


def _async_nest(s) -> bool:
    return isinstance(s, N.For) and s.kind == "parallel" and parallel_nest(s)[-1].async_copy


def _program_async(s) -> bool:
    """The program's own cp.async: T.async_copy nests, T.ptx_cp_async, its group calls."""
    if isinstance(s, N.Evaluate) and isinstance(s.value, N.Call) and \
            s.value.name in ("ptx_cp_async", "ptx_commit_group", "ptx_wait_group"):
        return True
    return isinstance(s, N.For) and s.kind == "parallel" and \
        parallel_nest(s)[-1].copy_instruction == N.ASYNC_COPY


def _bound(body) -> set[str]:
    """Names the statements give values to: Lets, loop variables, buffers they write."""
    out = set()
    for s in walk_stmts(body):
        if isinstance(s, N.Let):
            out.add(s.var.name)
        elif isinstance(s, N.For):
            out.add(s.var.name)
    out |= {b for b, _, w in accesses(body) if w}
    return out


def _commit() -> N.Evaluate:
    return N.Evaluate(N.Call("ptx_commit_group", (), "int32"))


class _Kernel:
    def __init__(self, scope: N.KernelScope, cap: int):
        self.scope = scope
        self.cap = cap  # the most stages a loop gets (fewer than it asks where they don't fit)
        self.allocs = {s.buffer.name: s for s in scope.body if isinstance(s, N.Allocate)}
        self.views = view_bases(scope.body)
        self.stages: dict[str, int] = {}
        self.enclosing: list = []  # the loops around the statement being rewritten
        self.piped: list = []  # the loops pipelined so far

    def run(self) -> N.KernelScope:
        body = self.block(self.scope.body)
        if not self.stages:
            return self.scope
        body = tuple(dataclasses.replace(s, stages=self.stages[s.buffer.name])
                     if isinstance(s, N.Allocate) and s.buffer.name in self.stages else s
                     for s in body)
        return dataclasses.replace(self.scope, body=body)

    def block(self, stmts) -> tuple:
        out = []
        for s in stmts:
            if isinstance(s, N.For) and s.kind == "pipelined":
                piped = self.pipelined(s)
                if piped is not None:
                    out += piped
                    continue
            names = BODY_FIELDS.get(type(s))
            if names and not (isinstance(s, N.For) and s.kind == "parallel"):
                loop = isinstance(s, (N.For, N.While))
                self.enclosing += [s] if loop else []
                try:
                    s = dataclasses.replace(s, **{n: self.block(getattr(s, n)) for n in names})
                finally:
                    self.enclosing = self.enclosing[:-1] if loop else self.enclosing
            out.append(s)
        return tuple(out)

    def per_thread(self) -> set[str]:
        """The kernel's Lets whose values read the thread index (or such a Let)."""
        return tainted_lets(self.scope.body, taints=lambda v: any(
            isinstance(c, N.Call) and c.name == "thread_idx" for c in walk_nodes(v)))

    def waited_before(self, loop: N.For) -> bool:
        """May a cp.async nest the barrier pass waits for be in flight when ``loop``
        starts: one before it in the kernel, or in a loop around it?"""
        def waited(stmts):  # (in program order; loops this pass pipelined: none)
            for t in stmts:
                if t is loop:
                    yield None
                elif _async_nest(t) and not _program_async(t):
                    yield t
                elif not any(t is p for p in self.piped):
                    for name in BODY_FIELDS.get(type(t), ()):
                        yield from waited(getattr(t, name))
        if any(t is not None for e in self.enclosing for t in waited(e.body)):
            return True
        return next(waited(self.scope.body), None) is not None

    def dsts(self, nest: N.For) -> set[str]:
        return {b for b, _, w in accesses([nest]) if w}

    def qualifies(self, loop: N.For, nest: N.For, before: list, lets: dict, body=None) -> bool:
        dsts = self.dsts(nest)
        outside = [t for t in self.scope.body if t is not loop and not isinstance(t, N.Allocate)]
        if any(b not in self.allocs or self.allocs[b].stages != 1 or b in self.views or
               b in self.views.values() or self.allocs[b].buffer.scope != "shared" for b in dsts):
            return False
        if dsts & _names(replace_stmt(tuple(outside), loop, ())):
            return False  # (a reader or writer outside the loop: one buffer for it)
        if dsts & _names(tuple(before)):
            return False  # (the body reads last step's tile before the copy)
        rest = [t for t in (loop.body if body is None else body) if t is not nest]
        reads = _names(substitute(nest, lets) if lets else nest) - dsts - \
            {lp.var.name for lp in parallel_nest(nest)}
        if reads & _bound(rest):
            return False  # (its indices read what the body computes)
        others = [t for t in rest if _async_nest(t)]
        return not (dsts & set().union(*(self.dsts(t) for t in others)) if others else set())

    def pipelined(self, loop: N.For) -> list | None:
        S = min(loop.num_stages, self.cap)
        guard, prefix, body = guarded_body(loop.body)  # (a body under one `if` the step decides)
        copies = [t for t in body if _async_nest(t)]
        if S < 2 or not copies or loop.warp_specialize or loop.stage_base is not None or \
                any(_program_async(t) for t in walk_stmts(loop.body)):
            return None
        if S < loop.num_stages and any(self.allocs[b].stages > 1 for b in buffers_used(loop.body)
                                       if b in self.allocs):
            return None  # (its TMA loads' stages are the loop's: it keeps its count)
        if _names((loop.start, loop.extent)) & _bound(loop.body):
            # (the range is read once, as the loop starts; the refill's guard reads it every
            # step: a count the body changes, Cnt[b] = 0, would skip later steps' copies)
            return None
        if any(_async_nest(t) for t in walk_stmts(loop.body) if not any(t is c for c in copies)
               and not any(t is x for c in copies for x in walk_stmts([c]))):
            return None  # (a cp.async nest nested deeper: its waits are the barrier pass's)
        lets = _step_lets(dataclasses.replace(loop, body=prefix + body))
        if guard is not None:  # (its Lets' values: what it reads for another step)
            guard = substitute(guard, lets) if lets else guard
            if _names(guard) & (_bound(loop.body) | self.per_thread()) or not all(
                    c.name in PURE_CALLS and c.name != "thread_idx"
                    for c in walk_nodes(guard) if isinstance(c, N.Call)):
                return None  # (a guard a thread decides for itself: the refill's barrier
                # would be in a branch some threads skip)
        if any(b in self.allocs and launch_sized(self.allocs[b].buffer)
               for c in copies for b in self.dsts(c)):
            return None  # (a shared buffer sized at launch keeps one stage)
        before = []
        for t in body:
            if any(t is c for c in copies):
                if not self.qualifies(loop, t, before, lets, body):
                    return None
            before.append(t)
        for c in copies:
            for b in self.dsts(c):
                self.stages[b] = S
        self.piped.append(loop)
        G, a, n = len(copies), loop.start, loop.extent

        def empty() -> tuple:  # (new statements each time: later passes find them by identity)
            return tuple(_commit() for _ in copies)

        def fill(it: N.Expr, stage: N.Expr) -> tuple:
            out = []
            for c in copies:
                c = with_innermost(c, copy_instruction=N.ASYNC_COPY)
                if lets:  # (the step's own values, for the step it copies)
                    c = substitute(c, lets)
                c = fold_constants(substitute(c, {loop.var.name: it}))
                out.append(dataclasses.replace(c, fill_stage=stage))
            return tuple(out)

        def guarded(it: N.Expr, stage: N.Expr) -> tuple:
            """The copies of step ``it`` where its guard holds (empty groups where not)."""
            if guard is None:
                return fill(it, stage)
            cond = fold_constants(substitute(guard, {loop.var.name: it}))
            return (N.If(cond, fill(it, stage), empty(), loc=loop.loc),)

        prologue = []
        for p in range(S - 1):
            it = N.binop("add", a, i32(p)) if p else a
            if isinstance(n, N.Const):
                prologue += guarded(it, i32(p)) if p < n.value else empty()
            else:
                prologue.append(N.If(N.Cmp("lt", i32(p), n), guarded(it, i32(p)), empty(), loc=loop.loc))
        rel = N.binop("add", sub(loop.var, a), i32(S - 1))
        refill = N.If(N.Cmp("lt", rel, n), guarded(N.binop("add", loop.var, i32(S - 1)),
                                                   N.binop("mod", rel, i32(S))), empty(), loc=loop.loc)
        wait = N.Evaluate(N.Call("ptx_wait_group", (i32(G * (S - 1)),), "int32"), loc=loop.loc)
        if guard is not None:  # the refill and its wait run every step, the rest where it holds
            branch = loop.body[len(prefix)]
            kept = tuple(t for t in body if not any(t is c for c in copies))
            body = [*prefix, refill, wait, dataclasses.replace(branch, then=kept)]
        else:
            body, placed = [], False
            for t in loop.body:
                if any(t is c for c in copies):
                    if not placed:
                        body += [refill, wait]
                        placed = True
                    continue
                body.append(t)
        drained = N.Evaluate(N.Call("ptx_wait_group", (i32(0),), "int32"), loc=loop.loc)
        # cp.async copies before the loop that the barrier pass waits for (a Q tile) would
        # make every barrier of the body wait for all groups, the prefetched steps' too (its
        # state at the body's top is the same each step): they land before the prologue
        landed = [N.AsyncCopyWait(loc=loop.loc)] if self.waited_before(loop) else []
        return [*landed, *prologue, dataclasses.replace(loop, body=tuple(body), num_stages=S),
                drained]


def _step_lets(loop: N.For) -> dict:
    """The values of the loop body's own ``Let``s (``kv = k * 64``; ``page =
    Table[b, k]``) that a copy's indices may read for another step: what they read is the
    loop variable, values from outside the loop, buffers the body does not write and
    earlier such Lets, and they call only pure math.  Name -> value, with those earlier
    Lets' values in it."""
    bound = _bound(loop.body)
    lets: dict = {}
    for t in loop.body:
        if not isinstance(t, N.Let):
            continue
        value = substitute(t.value, lets) if lets else t.value
        if _names(value) & bound or not all(
                c.name in PURE_CALLS for c in walk_nodes(value) if isinstance(c, N.Call)):
            continue
        lets[t.var.name] = value
    return lets


def _fitted(scope: N.KernelScope, arch: str, reuse: bool) -> N.KernelScope:
    """The kernel with its loops' cp.async copies pipelined, each loop with the stages it
    asks for or, where the kernel's shared memory would not fit them, the most that fit
    (at 1, none: the loop as it was)."""
    limit = target(arch).shared_per_block
    most = max((s.num_stages for s in walk_stmts(scope.body)
                if isinstance(s, N.For) and s.kind == "pipelined"), default=0)
    for cap in range(most, 1, -1):
        out = _Kernel(scope, cap).run()
        if out is scope or place(out, reuse).shared_bytes <= limit:
            return out
    return scope


def pipeline_async_copies(func: N.PrimFunc, arch: str, reuse: bool = True) -> N.PrimFunc:
    kernels = tuple(_fitted(k, arch, reuse) for k in func.kernels)
    return dataclasses.replace(func, kernels=kernels)
