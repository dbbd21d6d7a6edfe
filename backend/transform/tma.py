"""TMA (sm_90+): tile copies between global and shared memory through the Tensor Memory
Accelerator, with mbarriers, and software pipelining of ``T.Pipelined`` loops.

What this pass does, per kernel, before the tile ops are lowered:

1. **Loads.** ``T.copy(A[origin], s)`` (a global region origin into a whole shared
   buffer) becomes ``T.tma_copy(A[origin], s, barrier=bar[i])`` plus a
   ``T.mbarrier_wait_parity`` when TMA can do it (:func:`tma_box` says when) and the copy
   stands at the top level of the kernel or of a ``T.Pipelined`` body; adjacent copies
   share one barrier.  Anything else keeps the cp.async / vector path.
2. **Stores.** ``T.copy(s, A[origin])`` becomes ``T.tma_copy(s, A[origin])`` (anywhere).
3. **Pipelining.** A ``T.Pipelined(n, num_stages=S)`` body whose loads became TMA copies
   gets its shared buffers multi-buffered (``Allocate.stages = S``, one mbarrier per
   stage) and its loads issued ``S - 1`` iterations ahead::

       for p in range(S - 1):                 # prologue
           if p < n: tma_copy(... k = p ..., stage=p, barrier=bar[p])
       for k in T.Pipelined(n, num_stages=S): # the body sees stage k % S
           if k + S - 1 < n: tma_copy(... k + S - 1 ..., stage=(k + S - 1) % S, ...)
           mbarrier_wait_parity(bar[k % S], (k // S) & 1)
           <the rest of the body>

   The barrier pass then puts a block barrier before the in-loop copy (the stage it
   refills was read in the previous iteration).  When the body ends with a wgmma
   ``T.gemm`` on the loaded tiles, the refill moves after it and the gemm keeps its MMAs
   in flight (``wg_wait=1``): step k's MMAs overlap step k + 1's wait, and the refill
   of step k - 1's stage follows the wait that retires step k - 1's MMAs (A read from
   shared memory; with A in registers the MMAs end within the step).
   ``T.Pipelined(..., warp_specialize=True)`` moves the loads to a producer warpgroup
   instead (:meth:`_Kernel.specialized`, then :func:`split_roles` after the barrier pass).
4. **Descriptors.** Every ``TmaCopy`` (these and the program's own ``T.tma_copy``) gets a
   descriptor parameter: one per (tensor, box, swizzle) and kernel, named
   ``<tensor>_desc``; the specs go to the launch ABI (``TmaSpec``), which the launcher
   encodes per launch.
"""

from __future__ import annotations

import dataclasses
import math

from ..ir import nodes as N
from ..ir.validate import MAX_THREADS
from ..runtime.abi import TmaSpec
from ..runtime.dtypes import DTYPES
from .analysis import arch_at_least, known_multiple, mentions, row_major_strides
from .gemm import WARPGROUP
from .layout import accesses, parallel_nest
from .tileops import all_names

MAX_BOX = 256  # elements per box dimension
MAX_RANK = 5
L2_PROMOTION = 128  # bytes
PRODUCER_REGS = 40  # registers per thread a producer warpgroup keeps (it only issues TMA)
SM_REGISTERS = 65536  # a block of a warp-specialized kernel has the SM to itself
SM_SHARED = 228 * 1024  # shared memory per SM (Hopper)


class TmaError(ValueError):
    pass


Descriptor = N.TmaDescriptor


def tma_box(glob: N.Buffer, region: N.Region, shared: N.Buffer, swizzle: int) -> tuple | str:
    """The box (tensor axis order) of a TMA copy between ``region`` of global ``glob``
    and the whole shared buffer ``shared``, or why TMA cannot do it.  With a swizzle the
    box is one ``swizzle``-byte chunk of the tile's last dim; the copy moves the tile as
    consecutive boxes (the ``tma_swizzled`` layout stores the chunks one after another)."""
    if glob.dtype != shared.dtype:
        return f"the dtypes differ ({glob.dtype} and {shared.dtype}); TMA does not convert"
    if not 1 <= glob.ndim <= MAX_RANK:
        return f"'{glob.name}' has {glob.ndim} dims; TMA tensors have 1 to {MAX_RANK}"
    tile = [int(d.value) for d in shared.shape]
    while len(tile) > glob.ndim and tile[0] == 1:
        tile.pop(0)
    if len(tile) > glob.ndim:
        return f"the shared tile has more dims than '{glob.name}'"
    box = (1,) * (glob.ndim - len(tile)) + tuple(tile)
    if region.extents is not None:
        ext = [int(e.value) if isinstance(e, N.Const) else None for e in region.extents]
        if tuple(ext) != box:
            return f"the region's extents {ext} are not the shared tile's {list(box)}"
    esize = DTYPES[glob.dtype].bytes
    if swizzle and box[-1] * esize % swizzle:
        return (f"a {swizzle}-byte TMA swizzle copies rows in {swizzle}-byte chunks; the box's "
                f"rows have {box[-1] * esize} bytes")
    if swizzle:  # one box per chunk of the last dim
        box = box[:-1] + (swizzle // esize,)
    if any(b > MAX_BOX for b in box):
        return f"box {list(box)} has a dim above {MAX_BOX}"
    strides = row_major_strides(glob)
    if not (isinstance(strides[-1], N.Const) and strides[-1].value == 1):
        return f"the last dim of '{glob.name}' is not contiguous (stride 1)"
    for d, st in enumerate(strides[:-1]):
        if known_multiple(st) * esize % 16:
            return (f"stride {d} of '{glob.name}' is not known to be a multiple of 16 bytes "
                    "(declare the extents with T.symbolic(..., multiple_of=...))")
    inner = box[-1] * esize
    if inner % 16:
        return f"the box's inner dim is {inner} bytes, not a multiple of 16"
    return box


def _is_origin(r: N.Region) -> bool:
    return all(isinstance(x, N.Const) and x.value == 0 for x in r.starts) and r.extents is None


def _whole(r: N.Region, buf: N.Buffer) -> bool:
    if not all(isinstance(x, N.Const) and x.value == 0 for x in r.starts):
        return False
    return r.extents is None or tuple(r.extents) == tuple(buf.shape)


def _substitute(e, name: str, value: N.Expr):
    """``e`` with variable ``name`` replaced by ``value`` (expressions, regions, tuples)."""
    if isinstance(e, N.Var) and e.name == name:
        return value
    if isinstance(e, tuple):
        return tuple(_substitute(x, name, value) for x in e)
    if dataclasses.is_dataclass(e) and not isinstance(e, type):
        changes = {f.name: _substitute(getattr(e, f.name), name, value)
                   for f in dataclasses.fields(e) if f.name != "loc"}
        return dataclasses.replace(e, **changes)
    return e


def _buffer_names(body) -> set[str]:
    """Every buffer a statement list names (loads, stores, regions, tile-op operands)."""
    out: set[str] = set()

    def visit(x):
        if isinstance(x, (N.Load, N.Store)):
            out.add(x.buffer)
        elif isinstance(x, N.Region):
            out.add(x.buffer)
        elif isinstance(x, N.Gemm):
            out.update((x.a, x.b, x.c))
        elif isinstance(x, N.Reduce):
            out.update((x.src, x.dst))
        elif isinstance(x, N.Clear):
            out.add(x.buffer)
        if isinstance(x, tuple):
            for y in x:
                visit(y)
        elif dataclasses.is_dataclass(x) and not isinstance(x, type):
            for f in dataclasses.fields(x):
                visit(getattr(x, f.name))

    visit(tuple(body))
    return out


def _column_walked(body) -> set[str]:
    """Shared buffers some ``T.Parallel`` nest walks down a column (its innermost loop
    variable in an index other than the last): the layout pass swizzles those."""
    out: set[str] = set()
    for s in body:
        if isinstance(s, N.For) and s.kind == "parallel":
            loops = parallel_nest(s)
            inner = loops[-1].var.name
            for b, idx, _ in accesses(loops[-1].body):
                if len(idx) >= 2 and any(mentions(i, inner) for i in idx[:-1]):
                    out.add(b)
        elif isinstance(s, N.For):
            out |= _column_walked(s.body)
        elif isinstance(s, N.If):
            out |= _column_walked(s.then + s.orelse)
    return out


def _let_names(body) -> set[str]:
    out: set[str] = set()
    for s in body:
        if isinstance(s, N.Let):
            out.add(s.var.name)
        elif isinstance(s, N.For):
            out.add(s.var.name)
            out |= _let_names(s.body)
        elif isinstance(s, N.If):
            out |= _let_names(s.then + s.orelse)
    return out


def _i32(v: int) -> N.Const:
    return N.Const(v, "int32")


class _Kernel:
    def __init__(self, func: N.PrimFunc, scope: N.KernelScope, arch: str, names: set[str],
                 auto: bool = True):
        self.func, self.scope, self.arch = func, scope, arch
        self.auto = auto  # turn T.copy into TMA copies (off: the disable_tma option)
        self.names = names
        self.buffers = {p.name: p for p in func.params if isinstance(p, N.Buffer)}
        self.allocs: dict[str, N.Allocate] = {}
        for s in scope.body:
            if isinstance(s, N.Allocate):
                self.allocs[s.buffer.name] = s
                self.buffers[s.buffer.name] = s.buffer
        self.column_walked = _column_walked(scope.body)
        self.new_allocs: list[N.Allocate] = []
        self.stages: dict[str, int] = {}
        self.descriptors: dict[tuple, Descriptor] = {}
        self.producer: N.If | None = None  # the producer warpgroup's branch, if any

    def fail(self, s, msg: str):
        where = f"{s.loc}: " if getattr(s, "loc", None) else ""
        raise TmaError(f"{where}prim_func '{self.func.name}': {msg}")

    def fresh(self, stem: str) -> str:
        n = 0
        while f"{stem}{n}" in self.names:
            n += 1
        self.names.add(f"{stem}{n}")
        return f"{stem}{n}"

    def swizzle_of(self, shared: str) -> int:
        a = self.allocs.get(shared)
        return a.layout.swizzle if a is not None and a.layout is not None and \
            a.layout.kind == "tma_swizzled" else 0

    # ---- which copies -----------------------------------------------------------------
    def load_ok(self, s) -> bool:
        return isinstance(s, N.Copy) and self.tma_ok(s.src, s.dst)

    def store_ok(self, s) -> bool:
        return isinstance(s, N.Copy) and self.tma_ok(s.dst, s.src)

    def tma_ok(self, glob_r: N.Region, shared_r: N.Region) -> bool:
        """Can TMA copy between global region ``glob_r`` and shared ``shared_r``?"""
        glob, shared = self.buffers.get(glob_r.buffer), self.buffers.get(shared_r.buffer)
        if not self.auto or not arch_at_least(self.arch, 90) or glob is None or shared is None or \
                glob.scope != "global" or shared.scope != "shared":
            return False
        if not _whole(shared_r, shared) or shared.name not in self.allocs:
            return False
        swizzle = self.swizzle_of(shared.name)
        if shared.name in self.column_walked and not swizzle:
            return False  # the layout pass swizzles it for the column walk; TMA rows can't
        return isinstance(tma_box(glob, glob_r, shared, swizzle), tuple)

    def barrier(self, count: int, stages: int, loc) -> str:
        name = self.fresh("tc_bar")
        buf = N.Buffer(name, "uint64", (_i32(stages),), "shared")
        self.new_allocs.append(N.Allocate(buf, N.Layout("mbarrier", threads=count), loc=loc))
        return name

    # ---- rewriting --------------------------------------------------------------------
    def top(self, body) -> list:
        """The kernel body: TMA load groups and pipelined loops at this level, stores
        anywhere."""
        out, i = [], 0
        body = list(body)
        while i < len(body):
            s = body[i]
            if self.load_ok(s):
                group = [s]
                while i + len(group) < len(body) and self.load_ok(body[i + len(group)]):
                    group.append(body[i + len(group)])
                bar = self.barrier(len(group), 1, s.loc)
                ref = N.Region(bar, (_i32(0),))
                out += [N.TmaCopy(c.src, c.dst, ref, loc=c.loc) for c in group]
                out.append(N.MBarrierWait(ref, _i32(0), loc=s.loc))
                i += len(group)
                continue
            if isinstance(s, N.For) and s.kind == "pipelined":
                out += self.pipelined(s)
            else:
                out.append(self.stmt(s))
            i += 1
        return out

    def stmt(self, s):
        """Stores become TMA stores at any depth; nested loops are not pipelined."""
        if self.store_ok(s):
            return N.TmaCopy(s.src, s.dst, loc=s.loc)
        if isinstance(s, N.For):
            return dataclasses.replace(s, body=tuple(self.stmt(t) for t in s.body))
        if isinstance(s, N.If):
            return dataclasses.replace(s, then=tuple(self.stmt(t) for t in s.then),
                                       orelse=tuple(self.stmt(t) for t in s.orelse))
        return s

    def pipelined(self, loop: N.For):
        """Multi-buffer and prefetch the TMA loads of a ``T.Pipelined`` body (see the
        module docstring); a body with none stays as it is (a serial loop)."""
        body = list(loop.body)
        inner = _let_names(body)
        outside = _buffer_names(
            [t for t in self.scope.body if t is not loop and not isinstance(t, N.Allocate)])
        loads, before = [], []
        for s in body:
            # a load is pipelined when its origin depends only on the loop variable and
            # values from outside the loop, and its buffer is not touched before it in
            # the body nor anywhere outside the loop
            if self.load_ok(s) and not any(mentions(e, n) for e in s.src.starts for n in inner) \
                    and s.dst.buffer not in _buffer_names(before) \
                    and s.dst.buffer not in outside and s.dst.buffer not in self.stages:
                loads.append(s)
            else:
                before.append(s)
        if not loads:
            if loop.warp_specialize:
                self.fail(loop, self.specialize_refusal(loop, [], False))
            return [dataclasses.replace(loop, body=tuple(self.stmt(t) for t in loop.body))]
        taken = {id(c) for c in loads}
        rest, wait_at = [], None
        for s in body:
            if id(s) in taken:
                if wait_at is None:
                    wait_at = len(rest)
            else:
                rest.append(self.stmt(s))
        S, k, a, n = loop.num_stages, loop.var, loop.start, loop.extent
        for c in loads:
            self.stages[c.dst.buffer] = S
        bar = self.barrier(len(loads), S, loop.loc)

        def issue(it: N.Expr, stage: N.Expr):
            ref = N.Region(bar, (stage,))
            return tuple(N.TmaCopy(_substitute(c.src, k.name, it), c.dst, ref, stage, loc=c.loc)
                         for c in loads)

        prologue = []
        for p in range(S - 1):
            it = N.binop("add", a, _i32(p))
            if isinstance(n, N.Const):
                if p < n.value:
                    prologue += issue(it, _i32(p))
            else:
                prologue.append(N.If(N.Cmp("lt", _i32(p), n), issue(it, _i32(p)), loc=loop.loc))
        ahead = N.binop("add", k, _i32(S - 1))
        rel = _sub(ahead, a)
        prefetch = N.If(N.Cmp("lt", rel, n),
                        issue(ahead, N.binop("mod", rel, _i32(S))), loc=loop.loc)
        cur = _sub(k, a)
        wait = N.MBarrierWait(N.Region(bar, (N.binop("mod", cur, _i32(S)),)),
                              N.binop("bitand", N.binop("floordiv", cur, _i32(S)), _i32(1)),
                              loc=loop.loc)
        last = rest[-1] if rest else None
        mma_tail = isinstance(last, N.Gemm) and self.wgmma(last) and last.wg_wait == 0 and \
            bool({last.a, last.b} & {c.dst.buffer for c in loads})
        ws = loop.warp_specialize
        if ws is not False:
            refusal = self.specialize_refusal(loop, loads, mma_tail)
            if ws and refusal:
                self.fail(loop, refusal)
            # the default: where it can, and where it costs no occupancy
            ws = refusal is None and (ws or self.alone_on_sm(loop, loads))
        if ws:
            return self.specialized(loop, loads, rest, wait_at, bar, issue, wait, cur)
        if mma_tail and self.shared_a(last):  # (A in registers must stay until its MMAs end)
            # the wgmma of step k stays in flight while step k + 1 waits for its tiles.  Each
            # thread releases step k - 1's stage on an "empty" mbarrier once its MMAs of
            # step k - 1 are done; one thread waits for that release and refills the stage
            # (no block barrier: the warpgroups never wait for each other)
            rest[-1] = dataclasses.replace(last, wg_wait=1)
            empty = self.barrier(self.scope.num_threads, S, loop.loc)
            prev = _sub(cur, _i32(1))
            prev_stage = N.Region(empty, (N.binop("mod", N.binop("add", cur, _i32(S - 1)), _i32(S)),))
            release = N.If(N.Cmp("gt", cur, _i32(0)), (N.MBarrierArrive(prev_stage, loc=loop.loc),),
                           loc=loop.loc)
            acquire = N.If(N.Cmp("gt", cur, _i32(0)), (N.MBarrierWait(
                prev_stage, N.binop("bitand", N.binop("floordiv", prev, _i32(S)), _i32(1)),
                loc=loop.loc),), loc=loop.loc)
            one = N.Cmp("eq", N.Call("thread_idx", (_i32(0),), "int32"), _i32(0))
            refill = N.If(N.Cmp("lt", rel, n), (N.If(one, (acquire,) + prefetch.then,
                                                     loc=loop.loc),), loc=loop.loc)
            new_body = rest[:wait_at] + [wait] + rest[wait_at:] + [release, refill]
        else:
            new_body = [prefetch] + rest[:wait_at] + [wait] + rest[wait_at:]
        return [*prologue, dataclasses.replace(loop, body=tuple(new_body))]

    def specialized(self, loop: N.For, loads, rest, wait_at, bar, issue, full, cur) -> list:
        """The warp-specialized form of a pipelined loop: a producer warpgroup (threads
        ``threads .. threads + 127``) runs its own loop that waits for a stage to be
        released and refills it; the kernel's threads wait for each stage, run the body
        (its wgmma batch stays in flight) and release the previous stage::

            if thread_idx >= threads:                      # the producer warpgroup
                if thread_idx == threads:
                    for j in range(n):
                        if j >= S: mbarrier_wait_parity(empty[j % S], (j // S + 1) & 1)
                        tma_copy(... k = start + j ..., stage=j % S, barrier=full[j % S])
            for k in T.Pipelined(n, num_stages=S):     # the compute warpgroups
                mbarrier_wait_parity(full[k % S], (k // S) & 1)
                <the body; its T.gemm keeps one batch in flight>
                if k > 0: mbarrier_arrive(empty[(k - 1) % S])

        With A in registers (wgmma RS) the MMAs end within the step, so each step
        releases its own stage.  :func:`split_roles` later puts everything but the
        producer in its ``else``.  ``full`` is the wait for step ``cur``'s stage (``cur`` =
        the loop variable minus its start), as :meth:`pipelined` built it."""
        S, a, n = loop.num_stages, loop.start, loop.extent
        threads = self.scope.num_threads
        rest = list(rest)
        empty = self.barrier(threads, S, loop.loc)
        if self.shared_a(rest[-1]):  # step k's MMAs stay in flight: release step k - 1's stage
            rest[-1] = dataclasses.replace(rest[-1], wg_wait=1)
            release = N.If(N.Cmp("gt", cur, _i32(0)), (N.MBarrierArrive(N.Region(
                empty, (N.binop("mod", N.binop("add", cur, _i32(S - 1)), _i32(S)),)), loc=loop.loc),),
                loc=loop.loc)
        else:  # A from registers: the MMAs end with the step, and so does its stage
            release = N.MBarrierArrive(N.Region(empty, (N.binop("mod", cur, _i32(S)),)),
                                       loc=loop.loc)
        j = N.Var(self.fresh("tc_j"), "int32")
        stage = N.binop("mod", j, _i32(S))
        acquire = N.If(N.Cmp("ge", j, _i32(S)), (N.MBarrierWait(
            N.Region(empty, (stage,)),
            N.binop("bitand", N.binop("add", N.binop("floordiv", j, _i32(S)), _i32(1)), _i32(1)),
            loc=loop.loc),), loc=loop.loc)
        it = j if isinstance(a, N.Const) and a.value == 0 else N.binop("add", a, j)  # a + j
        feed = N.For(j, _i32(0), n, "serial", (acquire,) + issue(it, stage), loc=loop.loc)
        tid = N.Call("thread_idx", (_i32(0),), "int32")
        self.producer = N.If(N.Cmp("ge", tid, _i32(threads)), (
            N.If(N.Cmp("eq", tid, _i32(threads)), (feed,), loc=loop.loc),), loc=loop.loc)
        body = rest[:wait_at] + [full] + rest[wait_at:] + [release]
        return [self.producer, dataclasses.replace(loop, body=tuple(body))]

    def specialize_refusal(self, loop: N.For, loads, mma_tail: bool) -> str | None:
        """Why ``loop`` cannot be warp-specialized (an error when the program asks, the
        default staying off otherwise), or None."""
        threads = self.scope.num_threads
        if not arch_at_least(self.arch, 90) or not mma_tail:
            return ("T.Pipelined(warp_specialize=True) needs sm_90a and a body whose loads "
                    "become TMA copies and that ends with a wgmma T.gemm on the loaded tiles")
        if len(self.scope.threads) != 1 or threads % WARPGROUP or threads + WARPGROUP > MAX_THREADS:
            return (f"T.Pipelined(warp_specialize=True) needs 1-D threads in whole warpgroups "
                    f"(multiples of {WARPGROUP}) with room for a producer warpgroup (at most "
                    f"{MAX_THREADS - WARPGROUP}); the kernel has threads={self.scope.threads}")
        if self.producer is not None:
            return "a kernel has at most one T.Pipelined(warp_specialize=True) loop"
        hidden = sorted(self.producer_names(loop, loads) - self.producer_sees(loop))
        if hidden:
            return (f"T.Pipelined(warp_specialize=True): the loads use {hidden}, which the "
                    "producer warpgroup does not see; it sees the kernel's block indices, "
                    "parameters and the Lets before the loop at the kernel's top level")
        return None

    def alone_on_sm(self, loop: N.For, loads) -> bool:
        """Does the block's shared memory (with ``loop``'s stages) keep it alone on its SM?
        Then warp specialization costs no occupancy (a producer's register reallocation
        takes the SM's whole register file), so the default turns it on."""
        stages = {**self.stages, **{c.dst.buffer: loop.num_stages for c in loads}}
        smem = sum(stage_bytes(a.buffer) * stages.get(name, a.stages)
                   for name, a in self.allocs.items() if a.buffer.scope == "shared")
        return smem > SM_SHARED // 2

    def producer_names(self, loop: N.For, loads) -> set[str]:
        """Variables the producer's loop needs (its bounds, the loads' coordinates)."""
        names: set[str] = set()
        _var_names((loop.start, loop.extent) + tuple(c.src for c in loads), names)
        return names - {loop.var.name}

    def producer_sees(self, loop: N.For) -> set[str]:
        """What :func:`split_roles` leaves before the role split: block indices,
        parameters, symbols, and the pure top-level Lets before ``loop``."""
        seen = {v.name for v in self.scope.block_vars} | {p.name for p in self.func.params}
        seen |= {v.name for v in self.func.symbols}
        for s in self.scope.body:
            if s is loop:
                break
            if _hoisted(s, set(self.allocs)):
                seen.add(s.var.name)
        return seen

    def shared_a(self, g: N.Gemm) -> bool:
        return self.buffers[g.a].scope == "shared"

    def wgmma(self, g: N.Gemm) -> bool:
        layout = self.allocs[g.c].layout if g.c in self.allocs else None
        return layout is not None and layout.mma == "wgmma"

    # ---- descriptors ------------------------------------------------------------------
    def describe(self, body) -> tuple:
        out = []
        for s in body:
            if isinstance(s, N.TmaCopy):
                out.append(self.describe_copy(s))
            elif isinstance(s, N.For):
                out.append(dataclasses.replace(s, body=self.describe(s.body)))
            elif isinstance(s, N.If):
                out.append(dataclasses.replace(s, then=self.describe(s.then),
                                               orelse=self.describe(s.orelse)))
            else:
                out.append(s)
        return tuple(out)

    def describe_copy(self, s: N.TmaCopy) -> N.TmaCopy:
        if not arch_at_least(self.arch, 90):
            self.fail(s, f"T.tma_copy needs TMA (sm_90 or newer); the target is {self.arch}")
        load = self.buffers[s.src.buffer].scope == "global"
        glob_r, shared_r = (s.src, s.dst) if load else (s.dst, s.src)
        glob, shared = self.buffers[glob_r.buffer], self.buffers[shared_r.buffer]
        if not _whole(shared_r, shared):
            self.fail(s, f"T.tma_copy moves a whole shared buffer; '{shared.name}' is sliced")
        swizzle = self.swizzle_of(shared.name)
        box = tma_box(glob, glob_r, shared, swizzle)
        if isinstance(box, str):
            self.fail(s, f"T.tma_copy between '{glob.name}' and '{shared.name}': {box}")
        # L2 promotion of 128 bytes, as CuTe's own TMA atoms encode it
        spec = TmaSpec(box=box, swizzle=swizzle, l2_promotion=L2_PROMOTION)
        key = (glob.name, spec)
        d = self.descriptors.get(key)
        if d is None:
            taken = {x.name for x in self.descriptors.values()}
            name, i = f"{glob.name}_desc", 1
            while name in taken or name in self.names:
                i += 1
                name = f"{glob.name}_desc{i}"
            d = Descriptor(name, glob.name, glob.dtype, spec)
            self.descriptors[key] = d
        return dataclasses.replace(s, desc=d.name)

    def run(self) -> tuple[N.KernelScope, list[Descriptor]]:
        body = [dataclasses.replace(s, stages=self.stages[s.buffer.name])
                if isinstance(s, N.Allocate) and s.buffer.name in self.stages else s
                for s in self.top(self.scope.body)]
        # barrier arrays go after the other allocations (shared offsets follow this order)
        last = max((i for i, s in enumerate(body) if isinstance(s, N.Allocate)), default=-1)
        body[last + 1:last + 1] = self.new_allocs
        body = self.describe(tuple(body))
        producer = WARPGROUP if self.producer is not None else 0
        return dataclasses.replace(self.scope, body=body, producer_threads=producer,
                                   tma_descriptors=tuple(self.descriptors.values()))


def plan_tma(func: N.PrimFunc, arch: str, auto: bool = True) -> N.PrimFunc:
    """Apply the TMA rewrites (``auto=False``, the ``disable_tma`` option: only the
    program's own ``T.tma_copy`` statements); each kernel records its descriptors
    (``KernelScope.tma_descriptors``)."""
    names = all_names(func)
    kernels = [_Kernel(func, scope, arch, names, auto).run() for scope in func.kernels]
    return dataclasses.replace(func, kernels=tuple(kernels))


def box_bytes(d: Descriptor) -> int:
    return d.spec.box_bytes(d.dtype)


def stage_bytes(buf: N.Buffer) -> int:
    """Bytes of one stage of a shared buffer."""
    return math.prod(int(x.value) for x in buf.shape) * DTYPES[buf.dtype].bytes


def split_roles(func: N.PrimFunc) -> N.PrimFunc:
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
        threads = scope.num_threads
        tid = N.Call("thread_idx", (_i32(0),), "int32")
        cond = N.Cmp("ge", tid, _i32(threads))
        (at,) = [i for i, s in enumerate(scope.body) if isinstance(s, N.If) and s.cond == cond]
        producer = scope.body[at]
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
        regs = (SM_REGISTERS - PRODUCER_REGS * scope.producer_threads) // threads // 8 * 8
        regs = min(256, regs)
        split = N.If(cond, (N.SetMaxNReg(PRODUCER_REGS, False, loc=producer.loc),) + producer.then,
                     (N.SetMaxNReg(regs, True, loc=producer.loc), *compute), loc=producer.loc)
        kernels.append(dataclasses.replace(scope, body=(*head, split)))
    return dataclasses.replace(func, kernels=tuple(kernels))


def _sub(x, y):
    """x - y, without "- 0"."""
    return x if isinstance(y, N.Const) and y.value == 0 else N.binop("sub", x, y)


def _hoisted(s, allocated: set[str]) -> bool:
    """Is ``s`` (at the kernel's top level, before a warp-specialized loop) a ``Let`` that
    :func:`split_roles` leaves before the role split, where the producer sees it: one that
    reads no buffer the kernel allocates."""
    return isinstance(s, N.Let) and not _reads(s.value, allocated)


def _var_names(x, out: set[str]) -> None:
    """Every variable name in expressions / regions ``x``."""
    if isinstance(x, N.Var):
        out.add(x.name)
    elif isinstance(x, tuple):
        for y in x:
            _var_names(y, out)
    elif dataclasses.is_dataclass(x) and not isinstance(x, type):
        for f in dataclasses.fields(x):
            if f.name != "loc":
                _var_names(getattr(x, f.name), out)


def _reads(e, buffers: set[str]) -> bool:
    """Does ``e`` load from one of ``buffers``?"""
    if isinstance(e, N.Load) and e.buffer in buffers:
        return True
    if isinstance(e, N.Expr):
        return any(_reads(v, buffers) for v in vars(e).values())
    if isinstance(e, tuple):
        return any(_reads(v, buffers) for v in e)
    return False
