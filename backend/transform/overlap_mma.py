"""Overlap a pipelined loop's two chained wgmma GEMMs with the work between them
(FlashAttention-3's intra-warpgroup overlap).

A consumer loop of the form (attention: ``S = Q K^T``, the online softmax, ``O += P V``)

    for k in T.Pipelined(a, n):
        T.mbarrier_wait_parity(full[k], ...)
        T.gemm(Q_s, K_s, S, clear_accum=True)      # G1
        X                                          # reads S, writes P and rescales O
        T.gemm(P, V_s, O)                          # G2: A from registers
        T.mbarrier_arrive(empty[k])

runs G1 and G2 one after the other, each waiting for its MMAs, so the tensor cores idle
during X.  This pass software-pipelines the loop by one step: step k issues G1 for
step k and G2 for step k - 1 together, waits for G1 only, runs the part of X that does
not touch G2's operands (``P``, ``O``) while G2 runs, then waits for G2, releases step
k - 1's stage, and finishes X:

    wait full[a]; G1(a); X_free(a); X_tied(a)          # prologue (step a, no G2)
    for k in T.Pipelined(a + 1, n - 1):
        wait full[k]; G1(k) (in flight)
        X_acc(k - 1)                                    # O *= alpha, while G1 runs
        G2(k - 1, stage k - 1) (in flight: G1 done; with turns, G2 is issued with no
                                wait, the turn handed over, then G1 waited for)
        X_free(k)                                       # e.g. max, exp2, row sums
        T.wait_wgmma(0)                                 # G2 done
        arrive empty[k - 1]; X_tied(k)                  # e.g. P = S
    X_acc(a + n - 1); G2(a + n - 1); arrive empty[a + n - 1]     # epilogue

``X_tied`` is what touches G2's operands.  Where G2's accumulator is wider than 64
(attention's head dim above 64), its statements that touch only that accumulator
(``X_acc``, the rescale of O) wait for the next step, where they run while G1 does,
when they commute with the rest of ``X_tied`` and with G1; narrower, they stay in
``X_tied``, after G2 is done and outside the warpgroups' turns (as FlashAttention does up
to head dim 128, which measured slower here at 128: :data:`RESCALE_LATE_MAX_N`; option
``rescale_before_gemm`` True / False forces either).

It applies only where X splits that way (no statement of ``X_free`` depends on an earlier
statement of ``X_tied``), both GEMMs are wgmma, G2's A operand is a register fragment X
writes, and the loop has 3 stages or more, or 2 with separate pipelines.  With one
pipeline for both GEMMs' tiles, step k - 1's stage is held until the middle of step k:
with 2 stages the producer cannot run ahead (measured on an H100, attention at head dim
128 ran 7% slower with 2 stages overlapped than not, 6% faster with 3).  Where the warp
specialization gave G1's and G2's tiles a pipeline each (``[wait1, G1, release1, X,
wait2, G2, release2]``, FlashAttention's K and V pipelines), step k releases G1's stage as
soon as G1 is done and waits for G2's (step k - 1's) just before issuing G2, so 2 stages
keep the producer ahead.
Two wgmma GEMMs into one accumulator with only mbarrier waits between them are chained
(:func:`chain_batches`): the first's batch stays in flight while the second is issued.

``options={"disable_mma_overlap": True}`` keeps the loop as written, unless the program
asked for the overlap (``For.overlap_mma``: TileLang's ``T.Pipelined(stage=, order=,
group=)`` describing this schedule), which is honored with any number of stages, or
refused (``OverlapError``) where the loop is not of this form.

Two or three compute warpgroups that each own a slice of the rows also take turns issuing
their GEMMs (FA3's ping-pong, named barriers 2, 3 and, with three, 4; FA4 does it with
three at head dim 64; every step's GEMMs are issued in turn but the last step's G2, and
the first turn is opened once per kernel, so the turns run on from tile to tile of a
persistent kernel and a warpgroup starts its next tile without waiting for the others to
finish this one) where the second GEMM's accumulator is at most :data:`PINGPONG_MAX_N`
wide (FlashAttention's rule: head dims up to 128); the options
``warpgroup_pingpong`` and ``disable_warpgroup_pingpong`` force it on or off.  Measured on
an H200 (attention, 2 stages, separate K/V pipelines): head dim 128 548/473 TFLOP/s with
the turns against 536/476 without; 256 596/519 against 620/535.  Nothing that needs a
barrier of the compute threads may stand between a turn's wait and its hand-over (the
warpgroup whose turn has not come never reaches it): a late rescale that touches shared
memory runs before the turn's wait (the barrier pass puts the barrier before the GEMM
above the wait; the ``check_hangs`` pass flags any other).
"""

from __future__ import annotations

import dataclasses
import math

from ..ir import nodes as N
from ..ir.printer import expr_str
from ..ir.visitor import StmtMutator, fold_constants, substitute, walk_stmts
from .analysis import batch_may_stay_in_flight, buffers_used, loads, mentions, parallel_nest
from .mbarriers import i32, sub


def _wgmma(allocs: dict, g: N.Gemm) -> bool:
    """A wgmma T.gemm whose batch may stay in flight (:func:`batch_may_stay_in_flight`)."""
    a = allocs.get(g.c)
    return a is not None and a.layout is not None and a.layout.mma == "wgmma" and \
        batch_may_stay_in_flight(a.buffer.dtype)


def split_tied(between: list, tied: set[str]):
    """``between`` as (statements free of the buffers in ``tied``, statements touching
    them), or None where a free statement follows a tied one it shares a buffer with."""
    free, bound = [], []
    for s in between:
        used = buffers_used(s)
        if used & tied:
            bound.append(s)
            continue
        if any(used & buffers_used(t) for t in bound):
            return None
        free.append(s)
    return free, bound


WARPGROUP = 128
TURN_BARRIER = 2  # named barriers 2, 3 (4): the compute warpgroups' turns (1: their sync)
# the widest second-GEMM accumulator (attention: the head dim) that takes turns by default:
# measured on an H200 with 2 stages, head dim 128 +2% (non-causal), 256 -4% (FA4's rule too)
PINGPONG_MAX_N = 128
# the widest second-GEMM accumulator whose rescale (O *= alpha) runs right after G2 is
# done rather than in the next step before G2 is issued.  FlashAttention puts it after G2
# up to head dim 128 (RescaleOBeforeGemm above); measured on an H100 (attention, one run,
# TFLOP/s after / before): head dim 64 406 / 392 (causal 297 / 296), head dim 128
# 517 / 562 at B8 H32 S4096 and 580 / 580 at B4 H16 S8192 (causal 467 / 469, 518 / 528).
RESCALE_LATE_MAX_N = 64
# the widest second-GEMM accumulator whose wait is anchored after the step's row statistics
# (before the scores are rewritten: FA4's place) rather than after its row sums.  Measured on
# an H200 (attention, TFLOP/s, statistics / sums anchor, 2026-11-28): head dim 128 B8 H32
# S4096 611 / 597 and 607 / 570, S8192 635 / 608 and 630 / 602, causal 529-545 / 534-535 and
# 577-585 / 572-578; head dim 64 460 / 453 (causal 354 / 349); head dim 256 648 / 692 (560 /
# 611), so the sums anchor stays above 128
STATS_ANCHOR_MAX_N = 128


class OverlapError(ValueError):
    pass


def _is_clear_of(s: N.Stmt, name: str) -> bool:
    """``T.clear(name)`` or ``T.fill(name, 0)`` of the whole buffer."""
    if isinstance(s, N.Clear):
        return s.buffer == name
    return isinstance(s, N.Fill) and s.dst.buffer == name and s.dst.extents is None and \
        all(isinstance(x, N.Const) and x.value == 0 for x in s.dst.starts) and \
        isinstance(s.value, N.Const) and s.value.value == 0


def _fold_clear_into_g1(loop: N.For, allocs: dict | None = None) -> N.For:
    """TileLang's attention clears the scores before its first GEMM (``T.clear(acc_s);
    T.gemm(Q_s, K_s, acc_s)``), which is that GEMM with ``clear_accum=True``: the loop
    with the clear folded into the first T.gemm where only barrier statements stand
    between them (the warp specialization puts the consumer's wait there), else the loop
    as it is.  TileLang's flash-attention examples instead start the scores at their mask
    (``acc_s[i, j] = T.if_then_else(cond, 0, -T.infinity(...))`` over the whole tile, then
    the GEMM accumulates into it): that is the GEMM with ``clear_accum=True`` followed by
    the mask (:func:`_mask_after_gemm`), since adding the products to 0 or to an infinity
    first or last gives the same value."""
    body = list(loop.body)
    first = next((i for i, s in enumerate(body) if isinstance(s, N.Gemm)), None)
    if loop.kind != "pipelined" or first is None or body[first].clear_accum is not False:
        return loop
    g1 = body[first]
    for i in range(first - 1, -1, -1):
        if _is_clear_of(body[i], g1.c):
            body[first] = dataclasses.replace(g1, clear_accum=True)
            del body[i]
            return dataclasses.replace(loop, body=tuple(body))
        mask = _mask_after_gemm(body[i], g1.c, allocs or {})
        if mask is not None:
            body[first] = dataclasses.replace(g1, clear_accum=True)
            after = first + 1  # after the GEMM and the release of its tiles
            while after < len(body) and isinstance(body[after], N.MBarrierArrive):
                after += 1
            body.insert(after, mask)
            del body[i]
            return dataclasses.replace(loop, body=tuple(body))
        if not isinstance(body[i], (N.MBarrierWait, N.MBarrierArrive)):
            return loop
    return loop


def _constant(e) -> float | None:
    """The value of a constant expression (``-T.infinity(...)`` written outside the
    program is ``0 - inf``), else None."""
    if isinstance(e, N.Cast):
        return _constant(e.value)
    if isinstance(e, N.Const):
        return None if isinstance(e.value, bool) else float(e.value)
    if isinstance(e, N.BinOp) and e.op in ("add", "sub", "mul"):
        a, b = _constant(e.a), _constant(e.b)
        if a is None or b is None:
            return None
        return a + b if e.op == "add" else a - b if e.op == "sub" else a * b
    return None


def _zero_or_inf(e) -> str | None:
    """"0" for a constant 0, "inf" for a constant infinity (either sign), else None."""
    v = _constant(e)
    return None if v is None else "0" if v == 0 else "inf" if math.isinf(v) else None


def _mask_after_gemm(s: N.Stmt, acc: str, allocs: dict) -> N.Stmt | None:
    """For ``for i, j in T.Parallel(M, N): acc[i, j] = T.if_then_else(c, x, y)`` over all
    of the float accumulator ``acc``, with ``x`` and ``y`` each 0 or an infinity (a mask
    the GEMM then adds its products to): the nest that adds the mask to what a GEMM from
    0 leaves (``acc[i, j] = acc[i, j] + T.if_then_else(c, x, y)``), guarded so that it runs
    only where some element of the tile can take an infinity (:func:`_may_hold`); else
    None."""
    a = allocs.get(acc)
    if a is None or not isinstance(s, N.For) or s.kind != "parallel" or \
            a.buffer.dtype not in ("float32", "float16", "bfloat16"):
        return None
    nest = parallel_nest(s)
    shape = a.buffer.shape
    if len(nest) != len(shape) or not nest[-1].body:
        return None
    # names the body binds first (TileLang's `q_idx = bx * bm + i + past_len`) stand for
    # their values
    lets, store = nest[-1].body[:-1], nest[-1].body[-1]
    if not isinstance(store, N.Store) or \
            not all(isinstance(x, N.Let) and not any(loads(x.value)) for x in lets):
        return None
    values = {}
    for x in lets:
        values[x.var.name] = substitute(x.value, values)
    store = dataclasses.replace(store, value=substitute(store.value, values))
    names = [f.var.name for f in nest]
    if store.buffer != acc or \
            not all(isinstance(f.start, N.Const) and f.start.value == 0 and f.extent == d
                    for f, d in zip(nest, shape)) or \
            [getattr(x, "name", None) for x in store.indices] != names or \
            not isinstance(store.value, N.Select):
        return None
    sel = store.value
    kinds = (_zero_or_inf(sel.a), _zero_or_inf(sel.b))
    # (it moves past the release of the GEMM's tiles: no read of shared memory, which the
    # producer may refill from there on, nor of the accumulator the GEMM writes)
    # (both 0: a clear, which T.fill's form above is; both infinite: no GEMM value is left)
    if None in kinds or kinds[0] == kinds[1] or any(
            x.buffer == acc or x.buffer in allocs and allocs[x.buffer].buffer.scope.startswith("shared")
            for x in loads(sel.cond)):
        return None
    # the products' sum plus the mask value: what the program computes (a sum started at 0
    # or at an infinity, in either order, is the same value, NaN and infinite products
    # included; where the guard skips a step only a -0 score stays -0)
    here = N.Load(acc, store.indices, a.buffer.dtype)
    inner = dataclasses.replace(store, value=N.binop("add", here, sel))
    for f in reversed(nest):
        inner = dataclasses.replace(f, body=(inner,))
    masked = sel.cond if kinds[0] == "inf" else N.Not(sel.cond)
    guard = _may_hold(masked, {f.var.name: f.extent for f in nest})
    return inner if guard is None else N.If(guard, (inner,), loc=getattr(s, "loc", None))


_CMP = {"lt": int.__lt__, "le": int.__le__, "gt": int.__gt__, "ge": int.__ge__,
        "eq": int.__eq__, "ne": int.__ne__}


def _static_ifs(stmts) -> list:
    """``stmts`` with each top-level ``if`` on a comparison of two integer constants (a
    mask's guard at the prologue's step, ``if -873 >= 0``) replaced by the branch it takes."""
    out = []
    for s in stmts:
        c = s.cond if isinstance(s, N.If) else None
        if isinstance(c, N.Cmp) and all(isinstance(x, N.Const) and isinstance(x.value, int)
                                        and not isinstance(x.value, bool) for x in (c.a, c.b)):
            out += list(s.then if _CMP[c.op](c.a.value, c.b.value) else s.orelse)
        else:
            out.append(s)
    return out


def _linear(e, names: set):
    """``e`` as ``({name: integer coefficient}, rest)`` with ``rest`` free of ``names``,
    where ``e`` is a sum of integer multiples of them; else None.  (Unlike
    :func:`~tilecute.ir.visitor.linear_form`, only ``names`` need be linear: ``rest`` stays
    any expression, a ``T.min`` or a division of other names included, for the guard.)"""
    if isinstance(e, N.Var) and e.name in names:
        return {e.name: 1}, N.Const(0, e.dtype)
    if not any(mentions(e, n) for n in names):
        return {}, e
    if isinstance(e, N.BinOp) and e.op in ("add", "sub"):
        x, y = _linear(e.a, names), _linear(e.b, names)
        if x is None or y is None:
            return None
        k = 1 if e.op == "add" else -1
        coef = dict(x[0])
        for n, c in y[0].items():
            coef[n] = coef.get(n, 0) + k * c
        return coef, N.binop(e.op, x[1], y[1])
    if isinstance(e, N.BinOp) and e.op == "mul":
        for c, v in ((e.a, e.b), (e.b, e.a)):
            if isinstance(c, N.Const) and isinstance(c.value, int) and not isinstance(c.value, bool):
                x = _linear(v, names)
                if x is not None:
                    return {n: c.value * k for n, k in x[0].items()}, N.binop("mul", c, x[1])
    return None


_NEGATE = {"ge": "lt", "gt": "le", "le": "gt", "lt": "ge", "eq": "ne", "ne": "eq"}


def _may_hold(c, extents: dict):
    """An expression free of the loop variables that is true wherever ``c`` holds for some
    point of the loops (each from 0 to its constant extent): exact for integer comparisons
    of sums of multiples of the variables, combined with and / or / not; None where it
    cannot say (no guard then)."""
    if isinstance(c, N.Not):
        inner = c.a
        if isinstance(inner, N.Not):
            return _may_hold(inner.a, extents)
        if isinstance(inner, N.Cmp):
            return _may_hold(N.Cmp(_NEGATE[inner.op], inner.a, inner.b), extents)
        if isinstance(inner, N.Logic):  # De Morgan
            return _may_hold(N.Logic("or" if inner.op == "and" else "and",
                                     tuple(N.Not(x) for x in inner.args)), extents)
        return None
    if isinstance(c, N.Logic):
        parts = [_may_hold(x, extents) for x in c.args]
        if c.op == "or":  # some point holds one of them
            return None if None in parts else N.Logic("or", tuple(parts))
        known = [p for p in parts if p is not None]  # (and: both must hold somewhere)
        return None if not known else known[0] if len(known) == 1 else N.Logic("and", tuple(known))
    if not isinstance(c, N.Cmp) or c.op not in ("lt", "le", "gt", "ge") or \
            not (N.is_int(c.a.dtype) and N.is_int(c.b.dtype)) or \
            not all(isinstance(x, N.Const) for x in extents.values()):
        return None
    d = _linear(N.binop("sub", c.a, c.b), set(extents))
    if d is None:
        return None
    coef, rest = d
    hi = sum(max(k, 0) * (extents[n].value - 1) for n, k in coef.items())
    lo = sum(min(k, 0) * (extents[n].value - 1) for n, k in coef.items())
    if c.op in ("ge", "gt"):  # the largest difference reaches 0
        return fold_constants(N.cmp(c.op, N.binop("add", rest, N.Const(hi, rest.dtype)), N.Const(0, rest.dtype)))
    return fold_constants(N.cmp(c.op, N.binop("add", rest, N.Const(lo, rest.dtype)), N.Const(0, rest.dtype)))


class _Overlap(StmtMutator):
    def __init__(self, func: str, allocs: dict, pingpong, auto: bool, early=None,
                 anchor: str | None = "auto"):
        # pingpong, early: True / False as the options force them, None: by G2's width
        self.func, self.allocs, self.pingpong, self.auto = func, allocs, pingpong, auto
        self.early, self.anchor = early, anchor
        # the first loop's turns (every loop of the kernel takes them alike), which
        # :meth:`visit_kernel` opens once
        self.first_turns = None

    def visit_kernel(self, scope: N.KernelScope) -> N.KernelScope:
        """The loops rewritten; where warpgroups take turns, the last one's first arrive
        (warpgroup 0 goes first) placed once, before the top-level statement holding the
        first loop with turns: the turns run on from loop to loop and tile to tile."""
        scope = super().visit_kernel(scope)
        if self.first_turns is None:
            return scope
        groups, wg, sync, _ = self.first_turns
        body = list(scope.body)
        # (the first step, substituted, holds an equal copy of the wait; with a constant
        # extent it stands at the top level before the steady loop)
        at = next(i for i, s in enumerate(body) if any(t == sync for t in walk_stmts((s,))))
        body.insert(at, N.If(N.Cmp("eq", wg, i32(groups - 1)), (N.NamedBarrier(
            i32(TURN_BARRIER), sync.threads, arrive=True, loc=sync.loc),), loc=sync.loc))
        return dataclasses.replace(scope, body=tuple(body))

    def rescale_early(self, g2: N.Gemm) -> bool:
        """Whether the statements that only rescale G2's accumulator run in the next step,
        before G2 is issued (while G1 runs), rather than right after G2 is done."""
        if self.early is not None:
            return self.early
        wide = self.allocs[g2.c].buffer.shape[-1]
        return not (isinstance(wide, N.Const) and wide.value <= RESCALE_LATE_MAX_N)

    def turns(self, g1: N.Gemm, g2: N.Gemm):
        """For two or three compute warpgroups that each own a slice of the rows (wgmma
        warps (2, 1) or (3, 1)): (warpgroups, warpgroup index, wait for my turn, the next
        warpgroup's barrier), else None.  Warpgroup w issues its GEMMs after syncing on
        barrier 2 + w, then arrives on the next one's (w + 1, cyclically), so one
        warpgroup's MMAs run while the others compute their softmax (FA3's ping-pong;
        FA4 takes turns among three at head dim 64 too)."""
        layout = self.allocs[g1.c].layout
        groups = layout.warps[0]
        if tuple(layout.warps) != (groups, 1) or groups not in (2, 3) or \
                layout.threads != groups * WARPGROUP:
            return None
        wide = self.allocs[g2.c].buffer.shape[-1]
        narrow = isinstance(wide, N.Const) and wide.value <= PINGPONG_MAX_N
        if not (self.pingpong or (self.pingpong is None and narrow)) or \
                (self.first_turns is not None and self.first_turns[0] != groups):
            return None
        wg = N.binop("floordiv", N.Call("thread_idx", (i32(0),), "int32"), i32(WARPGROUP))
        mine = N.NamedBarrier(N.binop("add", i32(TURN_BARRIER), wg), 2 * WARPGROUP, loc=g1.loc)
        if groups == 2:
            other = N.binop("sub", i32(TURN_BARRIER + 1), wg)
        else:
            other = N.binop("add", i32(TURN_BARRIER), N.binop(
                "mod", N.binop("add", wg, i32(1)), i32(groups)))
        return groups, wg, mine, other

    def visit_for(self, loop: N.For):
        loop = self.generic(loop)
        folded = _fold_clear_into_g1(loop, self.allocs)
        plan = self.match(folded)
        if plan is not None:
            loop = folded
        if plan is None and loop.overlap_mma:
            where = f"{loop.loc}: " if loop.loc else ""
            raise OverlapError(
                f"{where}prim_func '{self.func}': T.Pipelined(stage=, order=) asks for the "
                f"second T.gemm one step behind the first; tilecute does that for a loop whose "
                f"body is its TMA loads, a wgmma T.gemm into a cleared accumulator, work on it, "
                f"and a wgmma T.gemm whose A operand is a register fragment that work writes "
                f"(sm_90a, warp-specialized); this loop is not of that form")
        return loop if plan is None else self.rewrite(loop, *plan)

    def match(self, loop: N.For):
        body = list(loop.body)
        if loop.kind != "pipelined" or len(body) < 4:
            return None
        wait, arrive = body[0], body[-1]
        if not isinstance(wait, N.MBarrierWait) or not isinstance(arrive, N.MBarrierArrive):
            return None
        # separate pipelines (warp_specialize): G1's tiles released right after it, G2's
        # waited for right before it: [wait1, G1, release1, X, wait2, G2, release2]
        split = len(body) > 6 and isinstance(body[2], N.MBarrierArrive) and \
            isinstance(body[-3], N.MBarrierWait)
        if split:
            release1, wait2 = body.pop(2), body.pop(-3)
        else:
            release1 = wait2 = None
        if not loop.overlap_mma and (not self.auto or loop.num_stages < (2 if split else 3)):
            return None  # (one pipeline: step k - 1's stage is held until mid-step k, and
            # 2 stages starve; separate ones release G1's tiles at once)
        gemms = [i for i, s in enumerate(body) if isinstance(s, N.Gemm)]
        if len(gemms) != 2 or gemms[0] != 1 or gemms[1] != len(body) - 2:
            return None
        g1, g2 = body[1], body[-2]
        if not (_wgmma(self.allocs, g1) and _wgmma(self.allocs, g2)) or g1.wg_wait or g2.wg_wait:
            return None
        a2 = self.allocs.get(g2.a)
        if a2 is None or a2.buffer.scope != "fragment" or g1.clear_accum is not True or g1.c in (g2.a, g2.c):
            return None
        between = list(body[2:-2])
        if not any(g2.a in buffers_used(s) for s in between):
            return None
        staged = {n for n, al in self.allocs.items() if al.stages > 1}
        if any(buffers_used(s) & staged for s in between):
            return None  # (a staged buffer's stage would follow the loop's new start)
        split = split_tied(between, {g2.a, g2.c})
        if split is None:
            return None
        free, tied = split
        # the rescale of G2's accumulator (O *= alpha) waits for the next step, where it
        # runs while that step's G1 does, if it commutes with the rest of the tied part,
        # where G2's accumulator is wider than RESCALE_LATE_MAX_N (else it runs once G2 is
        # done, out of the warpgroups' turns)
        rest = [t for t in tied if g2.a in buffers_used(t) or g1.c in buffers_used(t)]
        later = [t for t in tied if t not in rest]
        g1_bufs = {g1.a, g1.b, g1.c}
        if any(buffers_used(r) & (buffers_used(t) | g1_bufs) for r in later for t in rest) or \
                any(buffers_used(r) & g1_bufs for r in later) or not self.rescale_early(g2):
            later, rest = [], tied
        return g1, g2, free, later, rest, release1, wait2

    def anchor_of(self, free: list, g1c: str, g2c: str) -> str | None:
        """The float32 fragment the wait for G2 stays after (``WaitWgmma.after``): ptxas
        moves a ``wgmma.wait_group`` up to the top of its basic block, so the wait for step
        k - 1's G2, written after step k's softmax, ran before it and the softmax did not
        overlap G2 (sm_90a SASS of attention at head dim 128: the wait right after the
        masking, before the row max).  Where G2's accumulator is at most
        :data:`STATS_ANCHOR_MAX_N` wide, the last one ``free`` writes before its last
        rewrite of G1's accumulator (attention: the row statistics ``m`` / ``alpha``, before
        the exponentials): the exponentials then run after G2 is done, each followed by its
        conversion into P (FA4's schedule), instead of all of them during G2 and the
        conversions in a burst after it; wider (or with ``late_wait_anchor``, or where no
        such statistics come first), the last one ``free`` writes (the row sum ``l``).  None
        where there is none, or with ``disable_wait_anchor``."""
        if not self.anchor:
            return None
        wide = self.allocs[g2c].buffer.shape[-1] if g2c in self.allocs else None
        if self.anchor == "auto" and isinstance(wide, N.Const) and \
                wide.value <= STATS_ANCHOR_MAX_N:  # before the scores become P's values
            last = [i for i, s in enumerate(free) if any(
                isinstance(x, N.Store) and x.buffer == g1c for x in walk_stmts((s,)))]
            if last and (stats := self.last_fragment(free[:last[-1]])) is not None:
                return stats
        return self.last_fragment(free)

    def last_fragment(self, free: list) -> str | None:
        """The float32 fragment the last of ``free``'s stores writes, if it writes one."""
        for s in reversed(free):
            stores = [x for x in walk_stmts((s,)) if isinstance(x, N.Store)]
            if not stores:
                continue
            a = self.allocs.get(stores[-1].buffer)
            if a is not None and a.buffer.scope == "fragment" and a.buffer.dtype == "float32":
                return a.buffer.name
            return None
        return None

    def rewrite(self, loop: N.For, g1: N.Gemm, g2: N.Gemm, free: list, later: list,
                tied: list, release1, wait2):
        """``release1``/``wait2`` (separate pipelines): step k releases G1's tiles as soon
        as G1 is done, and waits for G2's (step k - 1's) only before issuing G2."""
        wait, arrive = loop.body[0], loop.body[-1]
        r1, w2 = ([release1] if release1 else []), ([wait2] if wait2 else [])
        k, a, n, S = loop.var, loop.start, loop.extent, loop.num_stages
        loc = loop.loc

        def at(stmts, it):
            return _static_ifs(fold_constants(substitute(tuple(stmts), {k.name: it})))

        base = loop.stage_base  # (a loop inside an outer loop: the steps of earlier runs)

        def stage(it):  # the stage step ``it`` reads
            step = sub(it, a) if base is None else N.binop("add", base, sub(it, a))
            return fold_constants(N.binop("mod", step, i32(S)))

        prev = N.binop("sub", k, i32(1))
        last = fold_constants(N.binop("add", a, sub(n, i32(1))))
        turns = self.turns(g1, g2)
        if turns is None:
            mine, hand_over = [], lambda it: []
        else:
            # warpgroup 0 goes first (the last one arrives on its barrier once, before the
            # kernel's first such loop); every step's GEMMs are issued in turn, each
            # warpgroup handing over after issuing them, and the last step's G2 out of
            # turn, so the turns run on into the next loop or tile: a warpgroup starts
            # its next tile without waiting for the others to finish this one, and the
            # first step keeps the warpgroups half a step apart from the start
            groups, wg, sync, other = turns
            self.first_turns = self.first_turns or turns
            mine = [sync]

            def hand_over(it):
                return [N.NamedBarrier(other, sync.threads, arrive=True, loc=loc)]
        def issue_g2(st):
            """G2 issued, the turn handed over, then the wait for G1: with turns, the other
            warpgroup may issue its GEMMs as soon as both of this one's are issued (FA3's
            order), not only once G1 is done."""
            if turns is None:
                return [dataclasses.replace(g2, wg_wait=1, stage=st)]
            # (a T.wgmma_gemm: issued without a wait; it runs on wgmma already)
            return [dataclasses.replace(g2, wg_wait=N.NO_WAIT, wgmma_only=True, stage=st), *hand_over(k),
                    N.WaitWgmma(1, loc=g2.loc)]

        # the late rescale runs while G1 does, inside the warpgroup's turn, except where it
        # touches shared memory (a scale the threads of another row layout wrote): the
        # barrier before it would stand between the turn's wait and its hand-over, where
        # the other warpgroup never comes (hang); it runs before the turn's wait then
        in_turn, before_turn = later, []
        if turns is not None and any(self.allocs[b].buffer.scope.startswith("shared")
                                     for t in later for b in buffers_used(t) if b in self.allocs):
            in_turn, before_turn = [], later
        if turns is None:
            first = at([wait, dataclasses.replace(g1, stage=stage(a)), *r1, *free, *tied], a)
        else:
            first = at([wait, *mine, dataclasses.replace(g1, wg_wait=1, stage=stage(a)),
                        *hand_over(k), N.WaitWgmma(0, loc=g1.loc), *r1, *free, *tied], a)
        steady = dataclasses.replace(loop, start=fold_constants(N.binop("add", a, i32(1))),
                                     extent=sub(n, i32(1)),
                                     stage_base=None if base is None else fold_constants(
                                         N.binop("add", base, i32(1))),
                                     body=tuple([
                                         wait, *at(before_turn, prev), *mine,
                                         dataclasses.replace(g1, wg_wait=1, stage=stage(k)),
                                         *at(in_turn, prev), *at(w2, prev),
                                         *issue_g2(stage(prev)), *r1, *free,
                                         N.WaitWgmma(0, after=self.anchor_of(free, g1.c, g2.c), loc=g2.loc),
                                         *at([arrive], prev), *tied]))
        tail = [*at(later, last), *at(w2, last), dataclasses.replace(g2, stage=stage(last)),
                *at([arrive], last)]
        if isinstance(n, N.Const):
            return first + [steady] + tail if n.value > 0 else []
        return N.If(N.Cmp("gt", n, i32(0)), tuple(first + [steady] + tail), loc=loc)


class _Plain(StmtMutator):
    """Loops that asked for the MMA overlap, as plain pipelined loops."""

    def visit_for(self, loop: N.For):
        loop = self.generic(loop)
        return dataclasses.replace(loop, overlap_mma=False) if loop.overlap_mma else loop


def overlap_mma(func: N.PrimFunc, arch: str, options: dict) -> N.PrimFunc:
    asked = any(isinstance(s, N.For) and s.overlap_mma for k in func.kernels
                for s in walk_stmts(k.body))
    if not arch.startswith("sm_90") or options.get("disable_wgmma"):
        # the overlap is a schedule of wgmma batches; before sm_90 (or with wgmma off) the
        # loop runs its statements in their source order, which a software pipeline's
        # stages and order compute the same values as (TileLang compiles such loops on
        # sm_80 too)
        return _Plain().run(func) if asked else func
    auto = not options.get("disable_mma_overlap")
    if not auto and not asked:
        return func
    kernels = []
    for scope in func.kernels:
        allocs = {s.buffer.name: s for s in scope.body if isinstance(s, N.Allocate)}
        pingpong = True if options.get("warpgroup_pingpong") else \
            False if options.get("disable_warpgroup_pingpong") else None
        early = options.get("rescale_before_gemm")
        own = next((s for s in walk_stmts(scope.body)
                    if isinstance(s, N.NamedBarrier) and s.program), None)
        if own is not None:  # the turns take named barriers 2, 3 (and 4)
            loop = next((s for s in walk_stmts(scope.body) if isinstance(s, N.For) and s.overlap_mma), None)
            if loop is not None:
                raise OverlapError(f"prim_func '{func.name}': T.Pipelined(stage=, order=) asks for "
                                   "overlapped GEMMs, whose turns take named barriers 2 to 4, "
                                   "and the kernel syncs named barriers of its own "
                                   f"(T.sync_threads({expr_str(own.barrier_id)}, {own.threads}))")
            kernels.append(scope)
            continue
        scope = _Overlap(func.name, allocs, pingpong, auto, early,
                         None if options.get("disable_wait_anchor") else
                         "sums" if options.get("late_wait_anchor") else "auto"
                         ).visit_kernel(scope)
        kernels.append(dataclasses.replace(scope, body=chain_batches(scope.body, allocs))
                       if auto else scope)
    return dataclasses.replace(func, kernels=tuple(kernels))


def chain_batches(body, allocs: dict) -> tuple:
    """Two wgmma T.gemms into one accumulator with only mbarrier waits between them (MLA:
    ``S = Q_s C^T`` then ``S += Qpe_s Kpe^T``, the second tile's wait between): the first
    one's batch stays in flight (``wg_wait=1``) while the second is issued, which waits for
    both, so the tensor cores do not drain between them (wgmmas into one accumulator run
    in issue order)."""
    out = list(body)
    for i, s in enumerate(out):
        if isinstance(s, N.Gemm) and s.wg_wait == 0 and _wgmma(allocs, s):
            j = i + 1
            while j < len(out) and isinstance(out[j], N.MBarrierWait):
                j += 1
            nxt = out[j] if j < len(out) else None
            if isinstance(nxt, N.Gemm) and nxt.c == s.c and _wgmma(allocs, nxt) and \
                    nxt.clear_accum is False and nxt.wg_wait != N.NO_WAIT:
                out[i] = dataclasses.replace(s, wg_wait=1)
        elif isinstance(s, (N.For, N.While, N.WarpGroups)):
            out[i] = dataclasses.replace(s, body=chain_batches(s.body, allocs))
        elif isinstance(s, N.If):
            out[i] = dataclasses.replace(s, then=chain_batches(s.then, allocs),
                                         orelse=chain_batches(s.orelse, allocs))
    return tuple(out)
