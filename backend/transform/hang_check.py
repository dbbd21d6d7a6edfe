"""A static check of the lowered IR for the ways a kernel the passes built can hang: the
last pass of the pipeline (:func:`check_hangs`): a warning (or, asked, an error) naming
the kernel and the line rather than a GPU that waits forever.

It walks each kernel with the set of threads that run each statement (a bit mask over
the block's threads, the producer warpgroup's included: conditions on the thread index
are evaluated for every thread; a condition the walk cannot evaluate that depends on the
thread, on a fragment's elements or on a name bound from either, leaves the set unknown)
and flags:

- a barrier of the compute threads (a block barrier, a reduction or row combine through
  shared memory, a TMA store, a grid or cluster sync) between a warpgroup's turn wait and
  the arrive that hands the turn over (the MMA overlap's named barriers 2..4): the
  warpgroup whose turn has not come never reaches it;
- such a barrier reached by other threads than the ones it waits for (inside a branch on
  the thread index, in the producer warpgroup's branch, in a loop whose trip count
  depends on the thread);
- ``setmaxnreg`` counts whose sum over the block's threads is over the register pool the
  block is launched with (``setmaxnreg.inc`` waits for registers that never come), or
  that a part of a warpgroup runs;
- a named barrier whose threads (those that sync or arrive on it, over the whole kernel)
  do not number its thread count, or whose sites give it different counts;
- an mbarrier one site arrives on more times than its count, or whose thread arrive
  sites number neither its count each nor together (TMA loads: fewer in all).

It imports nothing from later stages; it reads what the passes recorded (roles, counts,
scratch buffers) and the code generator's rule for which statements synchronise
(:func:`sync_kind`)."""

from __future__ import annotations

import dataclasses
import os
import warnings

from ..ir import nodes as N
from ..ir.visitor import walk_nodes, walk_stmts
from ..target import arch_at_least, target
from .analysis import buffer_scope


class HangError(ValueError):
    """A kernel that would wait forever on the GPU: an internal error of the passes, or the
    program's own barriers used so that some never complete."""


class HangWarning(UserWarning):
    """What :class:`HangError` says, as a warning: the check's default, since the check is
    younger than the passes it watches and a false alarm must not refuse a program."""


THREAD_CALLS = ("thread_idx", "shuffle_elect")
WARPGROUP = N.WARPGROUP_THREADS


# ---- which statements synchronise (the code generator's rule) ------------------------
def sync_kind(s: N.Stmt, allocs: dict) -> str | None:
    """What in ``s`` (not its nested bodies) waits for all the threads its barrier
    counts (the compute warpgroups' barrier 1 with a producer warpgroup, the block's
    otherwise, a warpgroup region's own inside one), in words; None where nothing does."""
    if isinstance(s, N.Barrier):
        return "a barrier of all the compute threads (T.sync_threads)"
    if isinstance(s, N.Reduce) and s.scratch and not s.partial:
        return f"T.reduce_{s.kind}({s.src}, {s.dst}) across warps (through '{s.scratch}')"
    if isinstance(s, N.CombineRows) and s.scratch:
        return f"the row combine of '{s.buffer}' across warps (through '{s.scratch}')"
    if isinstance(s, N.SegmentReduce):
        return f"T.reduce_{s.kind} of runs of '{s.src}' (through shared memory)"
    if isinstance(s, N.FinalizeReducer):
        return f"T.finalize_reducer({s.buffer})"
    if isinstance(s, N.ThreadAllReduce) and s.scratch:
        return "a thread all-reduce across warps"
    if isinstance(s, N.TmaCopy) and buffer_scope(allocs, s.dst.buffer) == "global":
        return f"the TMA store into '{s.dst.buffer}' (a barrier before its one issuing thread)"
    if isinstance(s, N.ClusterCopy) and s.barrier is not None:
        return "a cluster copy's barrier"
    if isinstance(s, N.ClusterSync):
        return f"T.cluster_{s.kind}()"
    if isinstance(s, N.Evaluate):
        calls = [c.name for c in walk_nodes(s.value) if isinstance(c, N.Call)]
        hit = next((c for c in calls if c == "sync_grid" or c.startswith("syncthreads_")), None)
        if hit:
            return f"T.{hit}()"
    return None


# ---- evaluating conditions for each thread -------------------------------------------
_BIN = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
        "floordiv": lambda a, b: a // b if b else None, "mod": lambda a, b: a % b if b else None,
        "min": min, "max": max, "bitand": lambda a, b: a & b, "bitor": lambda a, b: a | b,
        "bitxor": lambda a, b: a ^ b, "shl": lambda a, b: a << b, "shr": lambda a, b: a >> b,
        "div": lambda a, b: (a // b if isinstance(a, int) and isinstance(b, int) else a / b)
        if b else None}
_CMP = {"lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b,
        "ge": lambda a, b: a >= b, "eq": lambda a, b: a == b, "ne": lambda a, b: a != b}


def _eval(e, tid: int, env: dict):
    """``e``'s value for thread ``tid`` (names bound in ``env`` to expressions), or None
    where it depends on anything else."""
    if isinstance(e, N.Const):
        return e.value
    if isinstance(e, N.Var):
        v = env.get(e.name)
        return None if v is None else _eval(v, tid, env)
    if isinstance(e, N.Call):
        if e.name == "thread_idx" and len(e.args) == 1 and isinstance(e.args[0], N.Const):
            return tid if e.args[0].value == 0 else None
        return None
    if isinstance(e, N.Cast):
        v = _eval(e.value, tid, env)
        if v is None:
            return None
        return bool(v) if e.dtype == "bool" else int(v) if not N.is_float(e.dtype) else float(v)
    if isinstance(e, N.BinOp):
        a, b = _eval(e.a, tid, env), _eval(e.b, tid, env)
        return None if a is None or b is None or e.op not in _BIN else _BIN[e.op](a, b)
    if isinstance(e, N.Cmp):
        a, b = _eval(e.a, tid, env), _eval(e.b, tid, env)
        return None if a is None or b is None else _CMP[e.op](a, b)
    if isinstance(e, N.Not):
        a = _eval(e.a, tid, env)
        return None if a is None else not a
    if isinstance(e, N.Logic):
        vals = [_eval(x, tid, env) for x in e.args]
        if e.op == "and":
            return False if any(v is False or v == 0 for v in vals if v is not None) else \
                None if None in vals else True
        return True if any(v for v in vals if v is not None) else None if None in vals else False
    if isinstance(e, N.Select):
        c = _eval(e.cond, tid, env)
        return None if c is None else _eval(e.a if c else e.b, tid, env)
    return None


def _bits(mask: int) -> list[int]:
    out, i = [], 0
    while mask:
        if mask & 1:
            out.append(i)
        mask >>= 1
        i += 1
    return out


def _span(mask: int) -> str:
    """A thread mask in words (runs of threads)."""
    bits, runs = _bits(mask), []
    for t in bits:
        if runs and runs[-1][1] == t - 1:
            runs[-1][1] = t
        else:
            runs.append([t, t])
    return ", ".join(f"{a}..{b}" if a != b else str(a) for a, b in runs) or "none"


@dataclasses.dataclass
class _Ctx:
    mask: int | None  # the threads that run the statement; None: unknown (divergent)
    expect: int  # the threads a barrier of the compute threads waits for here
    where: str  # those threads in words
    turn: N.NamedBarrier | None = None  # the open turn wait, if any


class _Checker:
    def __init__(self, func: N.PrimFunc, scope: N.KernelScope, index: int, arch: str):
        self.func, self.scope, self.arch = func, scope, arch
        self.name = f"prim_func '{func.name}'" + (f" kernel {index}" if len(func.kernels) > 1 else "")
        self.allocs = {s.buffer.name: s for s in walk_stmts(scope.body) if isinstance(s, N.Allocate)}
        self.block = scope.num_threads + scope.producer_threads
        self.compute = (1 << scope.num_threads) - 1
        self.env: dict[str, N.Expr] = {}  # names bound to thread-dependent values
        self.tainted: set[str] = set()  # names whose values may differ between threads
        self.hazards: list[str] = []
        self.regs: list[tuple[int, int, N.Stmt]] = []  # (count, mask, site)
        self.named: dict[int, list] = {}  # id -> [(threads, mask, site)]
        self.mbar: dict[str, list] = {}  # barrier buffer -> [(arrivals or None, mask, site)]

    def flag(self, s, msg: str) -> None:
        loc = getattr(s, "loc", None)
        self.hazards.append(f"{loc}: {self.name}: {msg}" if loc else f"{self.name}: {msg}")

    # -- thread dependence
    def depends(self, e) -> bool:
        for x in walk_nodes(e):
            if isinstance(x, N.Call) and x.name in THREAD_CALLS:
                return True
            if isinstance(x, N.Var) and x.name in self.tainted:
                return True
            if isinstance(x, N.Load) and buffer_scope(self.allocs, x.buffer) == "fragment":
                return True
        return False

    def split(self, cond, mask: int | None) -> tuple:
        """(threads of ``mask`` for which ``cond`` holds, those for which it does not);
        both ``mask`` where it does not depend on the thread; (None, None) where it
        does and cannot be evaluated."""
        if not self.depends(cond):
            return mask, mask
        if mask is None:
            return None, None
        yes = no = 0
        for t in _bits(mask):
            v = _eval(cond, t, self.env)
            if v is None:
                return None, None
            if v:
                yes |= 1 << t
            else:
                no |= 1 << t
        return yes, no

    # -- the walk
    def run(self) -> list[str]:
        top = _Ctx((1 << self.block) - 1, (1 << self.block) - 1 if not self.scope.producer_threads
                   else self.compute, "the block's threads")
        if self.scope.producer_threads:
            top.where = f"the {self.scope.num_threads} compute threads (barrier 1)"
        self.body(self.scope.body, top)
        self.check_regs()
        self.check_named()
        self.check_mbarriers()
        return self.hazards

    def body(self, stmts, ctx: _Ctx) -> None:
        for s in stmts:
            self.stmt(s, ctx)

    def stmt(self, s, ctx: _Ctx) -> None:
        what = sync_kind(s, self.allocs)
        if what is not None:
            # a cluster's or the grid's barrier counts every thread that has not exited: the
            # whole block before the roles split, the compute threads after (the producer
            # warpgroup's branch ends with its loads, and its threads exit)
            whole = isinstance(s, N.ClusterSync) or what == "T.sync_grid()"
            if whole and ctx.mask == (1 << self.block) - 1:
                ctx = dataclasses.replace(ctx, expect=ctx.mask, where="the block's threads")
            self.sync(s, what, ctx)
        if isinstance(s, N.Let):
            if self.depends(s.value):
                self.tainted.add(s.var.name)
                self.env[s.var.name] = s.value
        elif isinstance(s, N.NamedBarrier):
            self.named_site(s, ctx)
        elif isinstance(s, N.SetMaxNReg):
            self.regs.append((s.count, ctx.mask, s))
        elif isinstance(s, N.MBarrierArrive):
            n = None
            if ctx.mask is not None and not s.cp_async and not s.cluster and s.block is None:
                n = bin(ctx.mask).count("1")
            self.mbar.setdefault(s.barrier.buffer, []).append((n, ctx.mask, s))
        elif isinstance(s, N.TmaCopy) and s.barrier is not None:
            n = 1 if s.arrive and not s.leader_threads and not s.multicast else None
            self.mbar.setdefault(s.barrier.buffer, []).append((n, None, s))
        elif isinstance(s, N.ClusterCopy) and s.barrier is not None:
            self.mbar.setdefault(s.barrier.buffer, []).append((None, None, s))
        elif isinstance(s, N.If):
            yes, no = self.split(s.cond, ctx.mask)
            producer = self.scope.producer_threads and ctx.mask is not None and \
                yes is not None and yes and yes == ctx.mask & ~self.compute
            if producer:  # the producer warpgroup's branch: no barrier of the compute threads
                inner = dataclasses.replace(ctx, mask=yes, where="the compute threads "
                                            "(barrier 1), which the producer warpgroup never joins")
                self.body(s.then, inner)
            else:
                self.body(s.then, dataclasses.replace(ctx, mask=yes))
            self.body(s.orelse, dataclasses.replace(ctx, mask=no))
            # (a turn opened in a branch is checked by the named barriers' counts)
        elif isinstance(s, (N.For, N.While)):
            bound = (s.start, s.extent) if isinstance(s, N.For) else (s.cond,)
            mask = ctx.mask
            if self.depends(bound):
                mask = None  # (trip counts differ between threads)
                if isinstance(s, N.For):
                    self.tainted.add(s.var.name)
            inner = dataclasses.replace(ctx, mask=mask)
            self.body(s.body, inner)
            if inner.turn is not None and ctx.turn is None:
                self.flag(inner.turn, "a warpgroup's turn wait (named barrier) whose turn is "
                                      "not handed over in the same loop step")
        elif isinstance(s, N.WarpGroups):
            lo, n = s.first_thread, s.num_threads
            region = ((1 << n) - 1) << lo
            mask = None if ctx.mask is None else ctx.mask & region
            inner = _Ctx(mask, region, f"the threads {lo}..{lo + n - 1} of the region", ctx.turn)
            self.body(s.body, inner)
        elif isinstance(s, N.SafeValueScope):
            self.body(s.body, ctx)

    def sync(self, s, what: str, ctx: _Ctx) -> None:
        if ctx.turn is not None:
            self.flag(s, f"{what} between a warpgroup's turn wait (named barrier, "
                         f"line {ctx.turn.loc.line if ctx.turn.loc else '?'}) and the arrive that "
                         f"hands the turn over: the warpgroup whose turn has not come never "
                         f"reaches it")
        if ctx.mask is None:
            self.flag(s, f"{what} under a condition or loop that depends on the thread: not "
                         f"every one of {ctx.where} may reach it")
        elif ctx.mask != ctx.expect:
            self.flag(s, f"{what} is reached by threads {_span(ctx.mask)}, and waits for "
                         f"{ctx.where} ({_span(ctx.expect)})")

    def named_site(self, s: N.NamedBarrier, ctx: _Ctx) -> None:
        turn = not s.program and self.depends(s.barrier_id)
        if turn and not s.arrive:
            ctx.turn = s
        elif turn and s.arrive:
            ctx.turn = None
        if ctx.mask is None:
            if not s.arrive:
                self.flag(s, f"named barrier sync ({s.threads} threads) under a condition that "
                             "depends on the thread, which the check cannot follow")
            return
        ids: dict[int, int] = {}
        for t in _bits(ctx.mask):
            i = _eval(s.barrier_id, t, self.env)
            if i is None:
                return
            ids[int(i)] = ids.get(int(i), 0) | (1 << t)
        for i, m in ids.items():
            self.named.setdefault(i, []).append((s.threads, m, s))

    # -- the counts
    def check_named(self) -> None:
        for i, sites in sorted(self.named.items()):
            counts = {n for n, _, _ in sites}
            if len(counts) > 1:
                self.flag(sites[0][2], f"named barrier {i} is given different thread counts "
                                       f"{sorted(counts)}")
                continue
            (n,) = counts
            union = 0
            for _, m, _ in sites:
                union |= m
            if bin(union).count("1") != n:
                self.flag(sites[0][2], f"named barrier {i} counts {n} threads, and threads "
                                       f"{_span(union)} ({bin(union).count('1')}) sync or "
                                       f"arrive on it")
            if self.scope.producer_threads and i == 1:
                self.flag(sites[0][2], "named barrier 1 is the compute warpgroups' barrier")

    def check_regs(self) -> None:
        if not self.regs or not arch_at_least(self.arch, 90):
            return
        for count, mask, s in self.regs:
            if mask is None:
                self.flag(s, f"T.set_max_nreg({count}) under a condition that depends on the "
                             "thread: setmaxnreg is run by whole warpgroups")
                return
            for g in range(0, self.block, WARPGROUP):
                part = (mask >> g) & ((1 << WARPGROUP) - 1)
                if part and part != (1 << WARPGROUP) - 1:
                    self.flag(s, f"T.set_max_nreg({count}) run by part of the warpgroup of "
                                 f"threads {g}..{g + WARPGROUP - 1} ({_span(mask)})")
                    return
        # the pool: the launch's count per thread (one block per SM) x the block's threads
        bounded = self.scope.producer_threads or self.scope.min_blocks_per_sm
        if not bounded:
            return  # (no launch bounds: ptxas ignores setmaxnreg, no count to wait for)
        blocks = max(self.scope.min_blocks_per_sm, 1)
        launch = target(self.arch).launch_regs(self.block, blocks)
        pool = launch * self.block
        per = [launch] * self.block
        for count, mask, _ in self.regs:
            for t in _bits(mask):
                per[t] = count if per[t] == launch else max(per[t], count)
        if sum(per) > pool:
            parts = sorted({(c, bin(m).count("1")) for c, m, _ in self.regs})
            self.flag(self.regs[0][2], f"setmaxnreg asks for {sum(per)} registers "
                                       f"({', '.join(f'{n} threads at {c}' for c, n in parts)}), "
                                       f"more than the {pool} the block is launched with "
                                       f"({self.block} threads at {launch}): setmaxnreg.inc "
                                       "waits forever")

    def check_mbarriers(self) -> None:
        """Thread arrives (a site's threads each arrive once): each site's threads, or
        all the sites' threads together (halves of the block arriving in two places),
        number the count; TMA loads (one arrive each): no more than the count at a site,
        and all of them together at least the count."""
        for name, sites in self.mbar.items():
            a = self.allocs.get(name)
            if a is None or a.layout is None or a.layout.kind != "mbarrier" or \
                    any(n is None for n, _, _ in sites):
                continue
            count = a.layout.threads
            over = next(((n, s) for n, _, s in sites if n > count), None)
            if over is not None:
                self.flag(over[1], f"the mbarrier '{name}' expects {count} arrivals a phase, "
                                   f"and {over[0]} threads arrive here")
                continue
            threads = [(n, m) for n, m, s in sites if m is not None]
            union = 0
            for _, m in threads:
                union |= m
            if threads and not (all(n == count for n, _ in threads) or
                                bin(union).count("1") == count):
                self.flag(sites[0][2], f"the mbarrier '{name}' expects {count} arrivals a "
                                       f"phase, and its arrive sites' threads number "
                                       f"{sorted({n for n, _ in threads})} (together "
                                       f"{bin(union).count('1')}): its waits never end")
            elif not threads and sum(n for n, _, _ in sites) < count:
                self.flag(sites[0][2], f"the mbarrier '{name}' expects {count} arrivals a "
                                       f"phase, and its TMA loads give "
                                       f"{sum(n for n, _, _ in sites)} in all: its waits never end")


def find_hazards(func: N.PrimFunc, arch: str = "sm_90a") -> list[str]:
    """The hang hazards of every kernel of the lowered ``func``, in words (line first)."""
    out = []
    for i, scope in enumerate(func.kernels):
        if len(scope.threads) != 1:  # (2-D / 3-D blocks: thread masks are not followed)
            continue
        out += _Checker(func, scope, i, arch).run()
    return out


def check_hangs(func: N.PrimFunc, arch: str) -> N.PrimFunc:
    """``func``, after the hazards :func:`find_hazards` finds are reported: a
    :class:`HangWarning` naming each (the default), a :class:`HangError` with
    ``TILECUTE_HANG_CHECK=error`` (the test suite's setting), nothing with ``=off``; any
    other value is a ``ValueError`` (a misspelt ``error`` must not quietly warn)."""
    raw = os.environ.get("TILECUTE_HANG_CHECK", "")
    mode = raw.strip().lower() or "warn"
    if mode not in ("warn", "error", "off"):
        raise ValueError(f"TILECUTE_HANG_CHECK={raw!r}: use warn (the default), error or off")
    if mode == "off":
        return func
    hazards = find_hazards(func, arch)
    if hazards:
        text = ("the lowered kernel could hang on the GPU:\n  " + "\n  ".join(hazards) +
                "\n(where the line names the program's own barrier -- T.sync_threads / "
                "T.barrier_* with a count or id, an mbarrier it allocated -- the program's "
                "synchronization is at fault; otherwise it is an internal error of tilecute's "
                "passes: please report it)")
        if mode == "error":
            raise HangError(text)
        warnings.warn(text, HangWarning, stacklevel=2)
    return func
