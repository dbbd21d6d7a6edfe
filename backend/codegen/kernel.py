"""One ``T.Kernel`` block as a ``@cute.kernel`` function: its parameters (the launch
ABI's), thread and block indices, shared memory carved into buffers, global tensors
built from pointers, then the statements.

Statements have one method each (the table ``_STATEMENTS``); the concerns with state of
their own live in their modules: expressions (``expr``), bounds predication
(``bounds``), shared memory and element offsets (``memory``), T.Parallel nests and
vector lanes (``nests``), T.gemm (``mma``).  Imports no CUTLASS.
"""

from __future__ import annotations

import dataclasses
import math

from ..ir import nodes as N
from ..ir.printer import expr_str, gemm_operand, layout_str
from ..runtime.dtypes import DTYPES
from ..target import arch_at_least
from ..transform.analysis import (accesses, all_names, allreduce_steps, buffers_used, column_slice, has_pdl_calls, loads as _loads,
                                  matrix_slice, mentions, parallel_nest, plain_statements, row_slice, row_major_strides, value_range,
                                  stage_bytes, view_bases, walk_stmts)
from ..transform.launch_abi import KernelPlan
from ..transform.overlap_mma import TURN_BARRIER
from ..ir.visitor import BODY_FIELDS, walk_nodes
from .bounds import Bounds, load_key
from .expr import E8M0, PACKED, is_fp8, PREC, ExprPrinter, Py, chain, cute_type, memory_type, register_type
from .memory import SharedMemory, flat_index, shared_index, vector_view
from .mma import MmaEmitter, merge
from .nests import NestEmitter
from .source import CodegenError, Writer, ident, quote


def param_type(p) -> str:
    """The annotation of a launch-ABI parameter in a CuTe DSL signature."""
    if p.kind in ("pointer", "grid_barrier"):
        return "cute.Pointer"
    if p.kind == "tma_desc":
        return "tct.Desc"
    return cute_type(p.dtype)


class KernelEmitter:
    """Emits kernel ``index`` of ``plan``.  ``buffers``, ``layouts`` and ``ranges`` grow
    as the body's allocations and loops are reached; the parts share them."""

    def __init__(self, plan: KernelPlan, index: int, exchanged: frozenset = frozenset()):
        self.plan, self.func = plan, plan.func
        self.index = index
        self.scope = plan.func.kernels[index]
        self.name = plan.abi.kernels[index].symbol  # the kernel is named after its cubin symbol
        self.out = Writer(frozenset(all_names(plan.func)))
        self.buffers: dict[str, N.Buffer] = {p.name: p for p in plan.tensor_params}
        self.layouts: dict[str, N.Layout] = {}
        self.ranges: dict[str, tuple] = {}  # variable -> its known (lo, hi)
        self.exprs = ExprPrinter(self.ranges, self.load, self.fail, self.out.use)
        self.exprs.block_barrier = self.barrier_of_threads
        self.exprs.atomic_coord = self.atomic_coord
        self.bounds = Bounds(self.out, self.exprs, self.buffers, self.ranges)
        self.exprs.lets = lambda: self.bounds.known.written
        safe = dict(self.scope.safe_values)  # T.annotate_safe_value, views of the tensors too
        # (a view with a value of its own, a T.sblock scope's, keeps it: scope_safe_values)
        safe.update({v: safe[b] for v, b in view_bases(self.scope.body).items()
                     if b in safe and v not in safe})
        self.bounds.safe = safe
        for cond in self.func.assumes:  # TileLang moves the host's assumes into the device
            self.bounds.known.assume(cond, True)  # function; the launcher checks them too
        self.exprs.held = lambda e: self.bounds.hoisted.get(e) \
            if isinstance(e, (N.Call, N.Cast)) else None
        self.smem = SharedMemory(self.scope, self.out)
        self.smem.exprs = self.exprs  # (the run-time dims of a shared buffer sized at launch)
        self.smem.init_fence = arch_at_least(self.plan.arch, 90)
        self.mma = MmaEmitter(self.out, self.buffers, self.layouts, self.smem, self.exprs)
        self.nests = NestEmitter(self)
        # a row reduction's result as each thread computed it (rows held by lane groups):
        # dst -> (per-round registers, (rows, row), lanes, threads), while dst is unchanged
        self.row_results: dict[str, tuple] = {}
        # grouped row reductions whose rows are not shared out (``reduce_grouped``): those
        # read only in nests, less ``exchanged``; a nest reading one from its rows all the
        # same adds it to ``rows_read`` (``emit_cute`` then emits the kernel again)
        self.exchanged = exchanged | _read_outside_nests(self.scope.body)
        self.unshared: set[str] = set()
        self.rows_read: set[str] = set()
        self.one_thread = False  # inside `if tc_tid == <t>:`
        self.replicas = False  # inside a nest every thread runs whole (NestEmitter.replicated)
        self.dropped: set[int] = set()  # ids of statements not emitted: they never run
        # where they are (never_runs)
        # the threads the statements being emitted map onto: the block's, or inside a T.ws
        # region its warpgroups' (their thread index from 0, their count, their barrier)
        self.tid, self.threads, self.region_barrier = "tc_tid", self.scope.num_threads, 0
        self.region_first = 0  # the region's first thread (0: the block's)
        self.region_barriers: dict[tuple, int] = {}  # (first thread, count) -> barrier id
        self.reducers: dict[str, str] = {}  # T.alloc_reducer fragment -> its op
        self.pointers: dict[str, str] = {}  # tensor parameter -> its pointer parameter
        # local buffers that share registers with a view (or are one): one flat register
        # tensor indexed in row-major order, which a view's flat index shares
        self.viewed = {n for pair in view_bases(self.scope.body).items() for n in pair}  # views, bases
        local = {a.buffer.name for a in walk_stmts(self.scope.body)
                 if isinstance(a, N.Allocate) and a.buffer.scope == "local"}
        self.flat_locals = self.viewed & local
        # 32-bit registers a thread's share of the kernel's fragments takes (all of them at
        # once: an upper bound on what is live)
        self.fragment_registers = sum(
            stage_bytes(a.buffer) for a in walk_stmts(self.scope.body)
            if isinstance(a, N.Allocate) and a.buffer.scope == "fragment"
            and all(isinstance(x, N.Const) for x in a.buffer.shape)) // 4 // max(1, self.scope.num_threads)

    def fail(self, node, msg: str):
        loc = getattr(node, "loc", None)
        where = f"{loc}: " if loc else ""
        raise CodegenError(f"{where}prim_func '{self.func.name}': {msg}")

    def sync(self) -> str:
        """A barrier of the threads the body maps onto: the whole block, or with a
        producer warpgroup (which never joins) named barrier 1 over the others."""
        if self.region_barrier:  # inside a T.ws region: its threads' named barrier
            return (f"cute.arch.barrier(barrier_id={self.region_barrier}, "
                    f"number_of_threads={self.threads})")
        if self.scope.producer_threads:
            return f"cute.arch.barrier(barrier_id=1, number_of_threads={self.scope.num_threads})"
        return "cute.arch.sync_threads()"

    def barrier_of_threads(self) -> tuple[int, int]:
        """:meth:`sync`'s barrier as (id, thread count; 0 for the whole block), for the
        barriers that reduce a predicate (T.syncthreads_count ...)."""
        if self.region_barrier:
            return self.region_barrier, self.threads
        if self.scope.producer_threads:
            return 1, self.scope.num_threads
        return 0, 0

    def warp_groups(self, s: N.WarpGroups, depth: int) -> None:
        """``with T.ws(...)``: the region's threads run the body, numbered from 0 there
        (``tc_wtid``); its barriers are a named barrier of its own over its threads, and
        the wgmma batches it leaves in flight end inside it."""
        lo, n = s.first_thread, s.num_threads
        hi = lo + n
        conds = ([f"tc_tid >= {lo}"] if lo else []) + \
            ([f"tc_tid < {hi}"] if hi < self.scope.num_threads else [])
        what = f"T.ws({', '.join(map(str, s.groups))})" if s.groups else "thread region"
        self.out.line(depth, f"if {' and '.join(conds) or 'True'}:",
                      f"{what}: threads {lo}..{hi - 1}")
        key = (lo, n)
        # the program's own named barriers (T.sync_threads(barrier_id, ...)): a region takes
        # an id none of them uses; an id computed at run time could be any
        # (a name bound once to a constant, `ready = 10`, is that constant: names are unique)
        lets = {x.var.name: x.value for x in walk_stmts(self.scope.body)
                if isinstance(x, N.Let) and isinstance(x.value, N.Const)}
        taken = [lets.get(x.barrier_id.name, x.barrier_id) if isinstance(x.barrier_id, N.Var)
                 else x.barrier_id for x in walk_stmts(self.scope.body)
                 if isinstance(x, N.NamedBarrier) and x.program]
        if not all(isinstance(i, N.Const) for i in taken):
            self.fail(s, "T.ws regions sync on named barriers 2.. of their own, and the kernel "
                         "syncs a named barrier whose id is computed at run time "
                         "(T.sync_threads(barrier_id, ...)), which could be any of them")
        if key not in self.region_barriers:  # 0: the block's; 1: a producer's compute threads
            used = {int(i.value) for i in taken} | set(self.region_barriers.values())
            if any(isinstance(x, N.NamedBarrier) and not x.program for x in walk_stmts(self.scope.body)):
                used |= set(range(TURN_BARRIER, TURN_BARRIER + 3))  # the compute warpgroups' turns
            # (the last id is tcm.ANCHOR_BARRIER where a wait is anchored)
            top = 15 if any(isinstance(x, N.WaitWgmma) and x.after
                            for x in walk_stmts(self.scope.body)) else 16
            self.region_barriers[key] = next((b for b in range(2, top) if b not in used), 16)
            if self.region_barriers[key] >= top:
                self.fail(s, "more T.ws regions than free named barriers: the hardware has 16 "
                             "(0: the block's, 1: the compute warpgroups', and those the "
                             "program syncs with T.sync_threads(barrier_id, ...))")
        tid = "tc_tid"
        if lo:
            tid = self.out.fresh("wtid")
            self.out.line(depth + 1, f"{tid} = tc_tid - {lo}", "the thread's index in the region")
        saved = (self.tid, self.threads, self.region_barrier, self.mma.tid, self.region_first)
        self.tid, self.threads, self.region_barrier = tid, n, self.region_barriers[key]
        self.mma.tid, self.region_first = tid, lo
        before = self.mma.in_flight  # (the threads outside the region keep these in flight)
        try:
            self.body(s.body, depth + 1)
            self.mma.drain(depth + 1)
            self.mma.in_flight = before
        finally:
            self.tid, self.threads, self.region_barrier, self.mma.tid, self.region_first = saved

    # ---- memory accesses ------------------------------------------------------------------
    def load(self, e: N.Load) -> str:
        key = load_key(e)
        if key in self.bounds.hoisted:
            return self.bounds.hoisted[key]
        if key in self.nests.vector:
            return f"{self.nests.vector[key]}[{self.nests.lane}]"
        memory = self.buffers[e.buffer].scope in ("global", "shared")
        if e.dtype in PACKED and memory:  # the element's nibble of its byte
            self.out.use("fp4")
            tensor, coord, index = self.packed_element(e.buffer, e.indices)
            return f"tcfp4.nibble({tensor}[{coord}], {index})"
        text = self.element(e.buffer, e.indices, read=True)
        if e.dtype == "bool" and memory:
            return f"({text} != 0)"  # a byte in memory
        if (e.dtype.startswith("uint") or e.dtype == E8M0) and memory:
            # CuTe DSL reads an element of an unsigned global or shared tensor as its
            # signless (signed) type: as such a uint8 of 200 converted to float32 or int32
            # was -56 (sign-extended), and >> shifted in its sign bit (an e8m0 code is a
            # Uint8 likewise)
            return f"{cute_type(e.dtype)}({text})"
        return text

    def stride_text(self, buf: N.Buffer, stride: N.Expr) -> str:
        """A global tensor's stride: 64-bit for the tensors the index-width pass chose
        (``row_major_strides(buf, wide=True)``: a product of dims computed in 64 bits), so
        the layout computes every offset in 64 bits; coordinates are 32-bit, or 64-bit
        where an index is int64 (an int64 dim's)."""
        if buf.name in self.plan.func.wide_tensors and stride.dtype != "int64" and \
                not (isinstance(stride, N.Const) and stride.value == 1):
            return f"cutlass.Int64({self.exprs.expr(stride)})"
        return self.exprs.expr(stride)

    def atomic_coord(self, name: str, indices) -> str:
        """The coordinate of ``name[indices]`` that the atomic helpers take: a shared
        buffer's element offset under its layout, a global tensor's index tuple."""
        buf = self.buffers[name]
        if buf.scope == "shared":
            return shared_index(self.exprs, buf, self.layouts.get(name), indices)
        return self.exprs.global_coord(name, indices)

    def packed_element(self, name: str, indices) -> tuple[str, str, str]:
        """A float4_e2m1fn or int4 element in global or shared memory: (its tensor of
        bytes, the byte's coordinate there, the element's index, whose parity picks the
        nibble).  A global tensor's bytes are its rows halved (the last index // 2); a
        shared buffer's, its element offset under its layout // 2 (of the stage a filling
        nest writes, as :meth:`element`)."""
        buf = self.buffers[name]
        if buf.scope == "shared":
            e = shared_index(self.exprs, buf, self.layouts.get(name), indices)
            return ident(buf.name), f"({e}) >> 1", f"({e})" if " " in e else e
        last = self.exprs.operand(indices[-1], PREC["shr"] + 1)
        coord = [self.exprs.expr(i) for i in indices[:-1]] + [f"{last} >> 1"]
        return ident(name), ", ".join(coord), last

    def global_tensor(self, buf: N.Buffer, ptr: str) -> str:
        """``cute.make_tensor`` of global tensor ``buf`` over pointer text ``ptr``: its
        shape and strides; a float4_e2m1fn tensor's bytes (the last dim halved, the other
        strides too: the frontend keeps them even, the launcher checks it)."""
        shape = [self.exprs.expr(d) for d in buf.shape]
        wide = buf.name in self.plan.func.wide_tensors
        strides = [self.stride_text(buf, d) for d in row_major_strides(buf, wide)]
        if buf.dtype in PACKED:
            shape[-1] = f"({shape[-1]}) // 2" if not shape[-1].isdigit() else str(int(shape[-1]) // 2)
            strides[:-1] = [str(int(x) // 2) if x.isdigit() else f"({x}) // 2" for x in strides[:-1]]
        return (f"cute.make_tensor({ptr}, cute.make_layout(({', '.join(shape)},), "
                f"stride=({', '.join(strides)},)))")

    def element(self, name: str, indices, read: bool = False) -> str:
        """Source text of ``name[indices]`` in its memory (a register, shared or global);
        ``read``: the text is only read (a fragment read at a run-time index may be a
        select over its registers)."""
        buf = self.buffers[name]
        if buf.scope == "fragment":
            return self.nests.register(name, indices, read)
        if buf.scope == "shared":  # (buf.name: a filling nest's view of another stage)
            return f"{ident(buf.name)}[{shared_index(self.exprs, buf, self.layouts.get(name), indices)}]"
        if name in self.flat_locals:
            return f"{ident(name)}[{flat_index(self.exprs, buf, indices)}]"
        return f"{ident(name)}[{self.exprs.index_tuple(indices)}]"

    # ---- statements ----------------------------------------------------------------------
    def body(self, stmts, depth: int) -> None:
        if all(N.is_assume(s) for s in stmts):  # (none, or only comments)
            self.out.line(depth, "pass")
        start = len(self.out.lines)
        with self.bounds.known.scope():
            for s in stmts:
                self.stmt(s, depth)
        if all(line.lstrip().startswith("#") for line in self.out.lines[start:]) and \
                any(id(s) in self.dropped for s in stmts):
            self.out.line(depth, "pass")  # (its statements never run here: never_runs)

    def stmt(self, s: N.Stmt, depth: int) -> None:
        if not self.row_results:
            return self.emit_stmt(s, depth)
        # a reduction's per-round result stands for its dst until a statement writes it;
        # one set inside a loop or branch ends there (its registers are that body's)
        written = {b for b, _, w in accesses([s]) if w} | \
            {t.dst for t in walk_stmts([s]) if isinstance(t, N.Reduce)}
        written -= self.nests.round_written  # (a nest over the rows writes their registers)
        kept = {d: r for d, r in self.row_results.items() if d not in written}
        if not (isinstance(s, N.For) and s.kind == "parallel" and
                self.nests.row_results_nest(parallel_nest(s)) is not None):
            self.row_results = dict(kept)  # (a nest over the rows reads the old ones)
        self.emit_stmt(s, depth)
        if BODY_FIELDS.get(type(s)):
            self.row_results = kept
        self.row_results.update(self.nests.made)  # (the rows a nest over them wrote)
        self.nests.made = {}

    def emit_stmt(self, s: N.Stmt, depth: int) -> None:
        if self.never_runs(s):
            self.dropped.add(id(s))
            return
        with self.bounds.statement():
            if isinstance(s, (N.Let, N.Store, N.If, N.Evaluate, N.ThreadAllReduce)) and \
                    not N.is_assume(s):
                self.bounds.hoist_branches(_checked_part(s), depth, self.nests.vector)
                self.bounds.hoist(_checked_part(s), depth, self.nests.vector)
            method = _STATEMENTS.get(type(s))
            if method is not None:
                method(self, s, depth)
            elif isinstance(s, N.TILE_OPS):
                self.fail(s, f"T.{type(s).__name__.lower()} is a tile op; its lowering to CuTe DSL "
                             "is not implemented yet in this tilecute")
            else:
                self.fail(s, f"statement {type(s).__name__} has no CuTe DSL form")

    def never_runs(self, s: N.Stmt) -> bool:
        """A store to a global tensor whose bounds check cannot pass here
        (:meth:`Bounds.never`) and whose indices and value call nothing with an effect:
        it does nothing, and is not emitted.  So is a staged fill (``s.feeds``) whose
        reader's check cannot pass: nothing reads what it would write."""
        return bool(self.bounds.failed) and isinstance(s, N.Store) and plain_statements((s,)) and \
            (s.buffer, s.indices) not in self.nests.vector and \
            self.bounds.never(self.bounds.predicate(*(s.feeds or (s.buffer, s.indices))))

    def let(self, s: N.Let, depth: int) -> None:
        self.out.line(depth, f"{ident(s.var.name)} = {self.exprs.expr(s.value)}")
        self.bounds.known.let(s.var, s.value, s.within)
        # (a Python value where its value is one: i = 2 + i_iter * 3 of a constant-unrolled
        # i_iter; a run-time one where it is: t = T.get_thread_binding())
        self.exprs.bind(s.var.name, self.exprs.python_kind(s.value))

    def store(self, s: N.Store, depth: int) -> None:
        expr = self.exprs.expr
        key = (s.buffer, s.indices)
        if key in self.nests.vector:  # a vector store: this lane's element of its registers
            self.out.line(depth, f"{self.nests.vector[key]}[{self.nests.lane}] = {expr(s.value)}")
            return
        value = expr(s.value)
        if self.buffers[s.buffer].dtype in PACKED and self.buffers[s.buffer].scope in ("global", "shared"):
            self.out.use("fp4")  # one nibble of a byte another thread may be writing the other of
            tensor, coord, index = self.packed_element(s.buffer, s.indices)
            coord = f"({coord},)" if self.buffers[s.buffer].ndim == 1 or \
                self.buffers[s.buffer].scope == "shared" else f"({coord})"
            text = f"tcfp4.store({tensor}, {coord}, {index}, {value})"
            self.predicated(self.bounds.predicate(s.buffer, s.indices), text, depth)
            return
        if self.buffers[s.buffer].dtype == "bool" and self.buffers[s.buffer].scope in ("global", "shared"):
            value = f"cutlass.Uint8({value})"  # a byte in memory
        text = f"{self.element(s.buffer, s.indices)} = {value}"
        self.predicated(self.bounds.predicate(s.buffer, s.indices), text, depth)

    def predicated(self, conds: list[str], text: str, depth: int) -> None:
        if conds:
            self.out.line(depth, f"if {chain('and', conds)}:")
            self.out.line(depth + 1, text)
        else:
            self.out.line(depth, text)

    def if_(self, s: N.If, depth: int) -> None:
        t = _one_thread(s.cond)
        one = t is not None and len(self.scope.threads) == 1 and not s.orelse
        self.out.line(depth, f"if tc_tid == {t}:" if one else f"if {self.exprs.expr(s.cond)}:")
        saved, self.one_thread = self.one_thread, self.one_thread or one
        before = self.mma.in_flight  # (wgmma batches: each branch starts from these)
        known = self.bounds.known
        with known.scope():
            known.assume(s.cond, True)
            self.body(s.then, depth + 1)
        self.one_thread = saved
        after, self.mma.in_flight = self.mma.in_flight, before
        if s.orelse:
            self.out.line(depth, "else:")
            with known.scope():
                known.assume(s.cond, False)
                self.body(s.orelse, depth + 1)
        self.mma.in_flight = merge(after, self.mma.in_flight)

    def evaluate(self, s: N.Evaluate, depth: int) -> None:
        if isinstance(s.value, N.Call) and s.value.name == "fence_proxy_async" and \
                not arch_at_least(self.plan.arch, 90):
            self.fail(s, f"T.fence_proxy_async fences for the async proxy (wgmma, TMA) of "
                         f"sm_90+; the target is {self.plan.arch}")
        if isinstance(s.value, N.Call) and s.value.name in ("ptx_commit_group", "ptx_wait_group") \
                and not arch_at_least(self.plan.arch, 80):
            self.fail(s, f"T.{s.value.name} is cp.async's, sm_80+; the target is {self.plan.arch}")
        if isinstance(s.value, N.Call) and s.value.name == "sync_grid":
            return self.sync_grid(s, depth)
        if isinstance(s.value, N.Call) and s.value.name == "ptx_cp_async":
            return self.ptx_cp_async(s, depth)
        if N.is_assume(s):  # a fact for the bounds checks of the rest of the body
            self.bounds.known.assume(s.value.args[0], True)
            return self.out.line(depth, f"# T.assume({expr_str(s.value.args[0])})")
        self.out.line(depth, self.exprs.expr(s.value))

    def ptx_cp_async(self, s: N.Evaluate, depth: int) -> None:
        """TileLang's ``T.ptx_cp_async``: this thread's one ``cp.async`` of ``n`` contiguous
        elements from the global element to the shared one (``tcc.copy_async`` on
        ``n``-element views at their addresses; a TMA-swizzled tile keeps each 16-byte
        piece whole, so its first element's swizzled offset is the piece's)."""
        dst, src, n = s.value.args
        width = int(n.value)
        layout = self.layouts.get(dst.buffer)
        if layout is not None and layout.kind not in ("row_major", "tma_swizzled") or \
                dst.buffer in self.smem.staged:
            self.fail(s, f"T.ptx_cp_async into '{dst.buffer}': its shared layout "
                         f"({layout_str(layout) if layout else 'multi-buffered'}) does not keep "
                         f"{width} elements from one address; tilecute copies into row-major "
                         "or TMA-swizzled tiles")
        if not arch_at_least(self.plan.arch, 80):
            self.fail(s, f"T.ptx_cp_async is cp.async, sm_80+; the target is {self.plan.arch}")
        if self.buffers[src.buffer].strides is not None:
            self.fail(s, f"T.ptx_cp_async from '{src.buffer}', a tensor of strides: tilecute "
                         "takes the element's address in a row-major tensor")
        bits = width * DTYPES[self.buffers[dst.buffer].dtype].bits
        to = vector_view(self.exprs, self.buffers[dst.buffer], layout, dst.indices, width)
        frm = vector_view(self.exprs, self.buffers[src.buffer], None, src.indices, width,
                          wide=src.buffer in self.plan.func.wide_tensors)
        self.out.use("copy")
        what = f"T.ptx_cp_async: {dst.buffer}[...] <- {src.buffer}[...], {width} elements"
        # bounds (TileLang's LegalizeSafeMemoryAccess on cp.async: its source element's
        # indices): out of bounds the copy is not issued and its elements read 0 (TileLang's
        # zero-filling cp.async) or the tensor's T.annotate_safe_value
        conds = self.bounds.predicate(src.buffer, src.indices)
        if not conds:
            self.out.line(depth, f"tcc.copy_async({frm}, {to}, {bits})", what)
            return
        self.out.line(depth, f"if {chain('and', conds)}:", what)
        self.out.line(depth + 1, f"tcc.copy_async({frm}, {to}, {bits})")
        self.out.line(depth, "else:")
        fill = self.out.fresh("fill")
        dtype = self.buffers[dst.buffer].dtype
        value = self.bounds.fallback(src.buffer, dtype)
        if dtype == "bool" or DTYPES[dtype].pack > 1:  # (bytes in memory)
            if src.buffer in self.bounds.safe:
                self.fail(s, f"T.ptx_cp_async from '{src.buffer}', a {dtype} tensor with a "
                             "T.annotate_safe_value: tilecute fills the elements of an "
                             f"out-of-bounds {dtype} cp.async with 0 only")
            value = "cutlass.Uint8(0)"
        self.out.line(depth + 1, f"{fill} = cute.make_rmem_tensor(({width // DTYPES[dtype].pack},), "
                                 f"{memory_type(dtype)})")
        self.out.line(depth + 1, f"{fill}.fill({value})")
        self.out.line(depth + 1, f"{to}.store({fill}.load())")

    def sync_grid(self, s: N.Evaluate, depth: int) -> None:
        """``T.sync_grid()``: every thread of the block calls the grid barrier (a block
        barrier around thread 0's counting on the launcher's word)."""
        if self.region_barrier or self.scope.producer_threads:
            self.fail(s, "T.sync_grid() in a warp-specialized kernel (a producer warpgroup or "
                         "T.ws regions): the grid barrier needs every thread of the block; "
                         "its warpgroups run apart there")
        self.mma.drain(depth)  # wgmma batches end before the block waits
        self.out.use("grid")
        self.out.line(depth, "tcgrid.sync_grid(tc_grid_barrier)",
                      "T.sync_grid(): every block of the (cooperative) launch")

    def for_(self, s: N.For, depth: int) -> None:
        if s.kind == "parallel" and s.fill_stage is not None:
            self.filling(s, depth)
        elif s.kind == "parallel":
            self.nests.parallel(s, depth)
        else:
            self.serial(s, depth)

    def filling(self, s: N.For, depth: int) -> None:
        """A nest that fills stage ``s.fill_stage`` of its multi-buffered shared buffers
        (the cp.async pipelining pass's prologue and refill): each gets a view of that
        stage under a name of its own, which the nest's accesses print."""
        stage = self.exprs.expr(s.fill_stage)
        saved = {}
        for name in sorted(used_buffers((s,))):
            if name in self.smem.staged:
                view = self.out.fresh(f"{name}_stage")
                self.out.line(depth, f"{ident(view)} = {self.smem.view(self.smem.staged[name], stage)}",
                              "the stage this copy fills")
                saved[name] = self.buffers[name]
                self.buffers[name] = dataclasses.replace(saved[name], name=view)
        try:
            self.nests.parallel(s, depth)
        finally:
            self.buffers.update(saved)

    def picks_registers(self, s: N.For) -> bool:
        """Does the loop's variable pick the register of a blocked fragment by its row
        (``b[k, j]`` of a ``(K, J)`` fragment: the layout pass's ``"outer"`` and 2-D
        ``"col"`` accesses)?  Unrolled, the register index is a constant: the fragment
        stays in registers (TileLang's loop, which nvcc unrolls)."""
        for n in walk_nodes(s.body):
            if isinstance(n, (N.Load, N.Store)) and len(n.indices) == 2:
                layout = self.layouts.get(n.buffer)
                if layout is not None and layout.kind == "blocked" and \
                        mentions(n.indices[0], s.var.name):
                    return True
        return False

    def serial(self, s: N.For, depth: int) -> None:
        expr = self.exprs.expr
        zero = isinstance(s.start, N.Const) and s.start.value == 0
        const = isinstance(s.start, N.Const) and isinstance(s.extent, N.Const)
        with self.bounds.statement():  # (loads of the range: read once, bounds-checked)
            self.bounds.hoist((s.start, s.extent), depth, self.nests.vector)
            start, stop = expr(s.start), expr(s.extent if zero else N.binop("add", s.start, s.extent))
        if s.vectors:  # T.vectorized: vector_width iterations a step (nests.lanes)
            rng = f"cutlass.range_constexpr({start}, {stop}, {s.vector_width})"
        elif s.kind == "unrolled" and s.unroll_factor:  # TileLang's unroll_factor hint
            rng = f"cutlass.range({start}, {stop}, unroll={s.unroll_factor})"
        elif s.kind == "unrolled" and const:
            rng = f"cutlass.range_constexpr({start}, {stop})"
        elif s.kind == "unrolled":
            rng = f"cutlass.range({start}, {stop}, unroll_full=True)"
        elif const and self.picks_registers(s):  # constant register indices
            rng = f"cutlass.range_constexpr({start}, {stop})" if s.extent.value <= 16 else \
                f"cutlass.range({start}, {stop}, unroll_full=True)"
        else:
            rng = f"cutlass.range({start}, {stop})"
        if const:
            self.ranges[s.var.name] = (int(s.start.value), int(s.start.value + s.extent.value - 1))
        else:
            lo = value_range(s.start, self.ranges)[0]
            self.ranges[s.var.name] = (lo, None)
        # a constant-unrolled loop's index is a Python int (a T.vectorized loop's too: its
        # lanes, i + lane, unroll by range_constexpr), a run-time loop's a cutlass value
        constexpr = rng.startswith("cutlass.range_constexpr")
        self.exprs.bind(s.var.name, Py.PYTHON if constexpr else Py.CUTLASS)
        var = ident(s.var.name)
        self.out.line(depth, f"for {var} in {rng}:")
        entry = self.mma.loop_entry(s.body)
        with self.bounds.known.scope():
            self.bounds.known.loop(s.var, s.start, s.extent)
            if s.kind == "pipelined":
                step = var if zero else f"({var} - {self.exprs.operand(s.start, PREC['sub'] + 1)})"
                if s.stage_base is not None:  # (a persistent kernel's loop: steps of its earlier runs)
                    step = f"({self.exprs.operand(s.stage_base, PREC['add'])} + {step})"
                operands = {x for t in walk_stmts(s.body) if isinstance(t, N.Gemm) for x in (t.a, t.b)}
                with self.smem.pipelined(s.num_stages, step, used_buffers(s.body), operands, depth + 1):
                    self.body(s.body, depth + 1)
            elif s.vectors:
                self.nests.lanes(s, s.vector_width, depth + 1)
            else:
                self.body(s.body, depth + 1)
        self.mma.loop_exit(s, entry, depth)

    def while_(self, s: N.While, depth: int) -> None:
        """``while cond:``; a condition that reads global memory not proved in bounds is
        computed before the loop and again at the end of its body, its loads checked (the
        IR has no ``continue`` to skip that)."""
        if not any(self.bounds.predicate(ld.buffer, ld.indices) for ld in _loads(s.cond)):
            self.out.line(depth, f"while {self.exprs.expr(s.cond)}:")
            entry = self.mma.loop_entry(s.body)
            self.body(s.body, depth + 1)
            self.mma.loop_exit(s, entry, depth)
            return
        more = self.out.fresh("more")

        def test(depth: int) -> None:
            with self.bounds.statement():
                self.bounds.hoist(s.cond, depth, self.nests.vector)
                self.out.line(depth, f"{more} = {self.exprs.expr(s.cond)}")
        test(depth)
        self.out.line(depth, f"while {more}:")
        entry = self.mma.loop_entry(s.body)
        self.body(s.body, depth + 1)
        test(depth + 1)
        self.mma.loop_exit(s, entry, depth)

    def allocate(self, s: N.Allocate, depth: int) -> None:
        b = s.buffer
        self.buffers[b.name] = b
        if s.layout is not None:
            self.layouts[b.name] = s.layout
        if b.scope == "shared":
            return  # carved out of dynamic shared memory at the kernel's start
        if s.address is not None:
            self.at_address(s, depth)
            return
        if s.view_of:
            self.view(s, depth)
            return
        if b.scope == "fragment":
            total = math.prod(int(d.value) for d in b.shape)
            if s.reducer:
                self.reducers[b.name] = s.reducer
            layout = s.layout or N.Layout("replicated")
            if layout.kind == "mma":
                self.mma.fragment(s, depth)
                return
            if layout.kind == "mma_rows":
                self.mma.row_fragment(s, depth)
                return
            if layout.kind == "mma_cols":
                self.mma.col_fragment(s, depth)
                return
            if layout.kind == "blocked":
                step = layout.threads * layout.vector
                regs = -(-total // step) * layout.vector
                note = f"{layout.kind}: {layout.vector} consecutive elements per thread step"
            else:
                regs, note = total, "replicated: every thread holds every element"
            self.out.line(depth, f"{ident(b.name)} = cute.make_rmem_tensor(({regs},), {register_type(b.dtype)})",
                          note)
            return
        if b.name in self.flat_locals:  # its views index the same registers
            total = math.prod(int(d.value) for d in b.shape)
            self.out.line(depth, f"{ident(b.name)} = cute.make_rmem_tensor(({total},), "
                                 f"{register_type(b.dtype)})", "row-major: it has views")
            return
        shape = ", ".join(str(int(d.value)) for d in b.shape)
        self.out.line(depth, f"{ident(b.name)} = cute.make_rmem_tensor(({shape},), {register_type(b.dtype)})")

    def at_address(self, s: N.Allocate, depth: int) -> None:
        """A tensor at an address (T.make_tensor): a global pointer made from the int64
        address where the statement stands (a table entry read bounds-checked, 0 out of
        bounds), assumed aligned to what its vector accesses need and no more (at least
        its element's size: KernelPlan.address_align), and the tensor over it."""
        b = s.buffer
        align = dict(self.plan.address_align)[b.name]
        self.bounds.hoist(s.address, depth, self.nests.vector)
        address = self.exprs.expr(s.address)
        ptr = (f"cute.make_ptr({memory_type(b.dtype)}, {address}, cute.AddressSpace.gmem, "
               f"assumed_align={align})")
        self.out.line(depth, f"{ident(b.name)} = {self.global_tensor(b, ptr)}",
                      f"T.make_tensor at {expr_str(s.address)}")

    def view(self, s: N.Allocate, depth: int) -> None:
        """A view (T.view / T.reshape): a tensor over its base's storage.  Registers (a
        fragment or local view) are the base's own tensor, recast to another dtype; a
        global view is a row-major tensor over the parameter's pointer.  (Shared views
        are carved at their base's slot with the other shared buffers.)"""
        b, base = s.buffer, self.buffers[s.view_of]
        note = f"T.view of {base.name}"
        if b.scope == "global":
            ptr = ident(self.pointers[base.name])
            if memory_type(b.dtype) != memory_type(base.dtype):
                ptr = f"cute.recast_ptr({ptr}, dtype={memory_type(b.dtype)})"
            if s.view_offset is not None:  # TVM's elem_offset: that many of the view's elements in
                ptr = f"({ptr} + {self.exprs.expr(s.view_offset)})"
                note = f"T.Buffer(data={base.name}.data, elem_offset={expr_str(s.view_offset)})"
            self.out.line(depth, f"{ident(b.name)} = {self.global_tensor(b, ptr)}", note)
        elif b.dtype == base.dtype:
            self.out.line(depth, f"{ident(b.name)} = {ident(base.name)}", note)
        else:
            self.out.line(depth, f"{ident(b.name)} = cute.recast_tensor({ident(base.name)}, "
                                 f"{cute_type(b.dtype)})", note)

    # ---- tile statements -----------------------------------------------------------------
    def rows_barrier(self) -> tuple:
        """(threads, barrier id) of the barriers an accumulator's row exchange takes: a
        T.ws region's threads and named barrier; with a producer warpgroup, the compute
        threads' barrier 1; else the block's (0 threads)."""
        if self.region_barrier:
            return self.threads, self.region_barrier
        return (self.scope.num_threads if self.scope.producer_threads else 0), 1

    def reduce_barrier(self, first_warp: bool) -> str:
        """The trailing arguments of ``tcr.block_allreduce`` (``first_warp``) and
        ``tcr.grouped_rows`` that name their barrier: none for the block's; the named
        barrier 1 of a producer kernel's compute threads; a region's own named barrier
        (and the block warp its warps start at)."""
        if self.region_barrier:
            first = f", {self.region_first // 32}" if first_warp and self.region_first else ""
            return f", {self.threads}, {self.region_barrier}{first}"
        return f", {self.scope.num_threads}" if self.scope.producer_threads else ""

    def combine_rows(self, s: N.CombineRows, depth: int) -> None:
        self.mma.combine_rows(s, depth, *self.rows_barrier())

    def segment_reduce(self, s: N.SegmentReduce, depth: int) -> None:
        self.mma.segment_reduce(s, depth, *self.rows_barrier())

    def reduce(self, s: N.Reduce, depth: int) -> None:
        """Each thread combines its own registers of every row, then a warp shuffle
        all-reduce, then (several warps) a shared-memory exchange; the result lands in every
        thread's copy of the replicated ``dst``.  As in TileLang, the reduction runs in
        ``dst``'s dtype: each element is converted to it before it is combined (a float8
        source reduced into float16 combines float16s).  Rows of a T.gemm accumulator
        reduce within the quads that hold them, its columns within the lanes and warps that
        hold them."""
        if s.src in self.mma.coords:
            if s.dim == 0:
                self.mma.reduce_cols(s, depth, *self.rows_barrier())
            else:
                self.mma.reduce_rows(s, depth, *self.rows_barrier())
            return
        out = self.out
        src, dst = self.buffers[s.src], self.buffers[s.dst]
        threads = self.layouts[s.src].threads
        row = int(src.shape[-1].value)
        rows = math.prod(int(d.value) for d in src.shape[:-1])
        per_row = row // threads  # registers of a row in each thread
        op = {"abssum": "sum", "absmax": "max"}.get(s.kind, s.kind)
        op = quote(op + "_nan" if s.nan_propagate else op)  # TileLang's nan_propagate
        src_, dst_ = ident(s.src), ident(s.dst)
        acc_type = cute_type(dst.dtype)  # TileLang's accumulator: dst's dtype
        conv = (lambda x: f"{acc_type}({x})") if dst.dtype != src.dtype else (lambda x: x)
        absolute = (lambda x: f"cute.math.absf({x})") if N.is_float(dst.dtype) else \
            (lambda x: x) if dst.dtype.startswith("uint") else (lambda x: f"abs({x})")
        if is_fp8(dst.dtype):  # (no fp8 math: |x| of its exact float32 value)
            absolute = lambda x: f"{acc_type}(cute.math.absf(cutlass.Float32({x})))"  # noqa: E731
        take = (lambda x: absolute(conv(x))) if s.kind.startswith("abs") else conv
        red, r, q = out.fresh("red"), out.fresh("r"), out.fresh("q")
        acc = out.fresh("acc")
        v = self.layouts[s.src].vector or 1
        if s.dim == 0 and src.ndim == 2:  # (the layout pass keeps these in place)
            self.reduce_columns(s, depth, threads, v, take, op)
            return
        if row % (threads * v):
            self.reduce_grouped(s, depth, threads, v, take, op)
            return
        out.line(depth, f"{red} = cute.make_rmem_tensor(({rows},), {acc_type})")
        out.line(depth, f"for {r} in cutlass.range_constexpr({rows}):")
        self.fold(depth + 1, acc, q, per_row, f"{src_}[{r} * {per_row}]", f"{src_}[{r} * {per_row} + {q}]",
                  take, op)
        warp = min(threads, 32)
        out.line(depth + 1, f"{red}[{r}] = tcr.warp_allreduce({acc}, {op}, {warp})")
        if threads > 32:
            warps = threads // 32
            out.line(depth, f"tcr.block_allreduce({red}, {op}, {ident(s.scratch)}, {warps}, {warps}"
                            f"{self.reduce_barrier(True)})")
        self.store_reduced(s, red, rows, op, depth, r)

    def store_reduced(self, s: N.Reduce, values: str, rows: int, op: str, depth: int,
                      r: str) -> None:
        """``dst[r] = values[r]`` (in ``dst``'s dtype) for every row (combined with ``dst``
        unless ``clear``); ``r``: the loop variable's name."""
        out = self.out
        dst_ = ident(s.dst)
        out.line(depth, f"for {r} in cutlass.range_constexpr({rows}):")
        value = f"{values}[{r}]"
        if not s.clear:
            value = f"tcr.combine({dst_}[{r}], {value}, {op})"
        out.line(depth + 1, f"{dst_}[{r}] = {value}")
        out.use("reduce")

    def reduce_columns(self, s: N.Reduce, depth: int, threads: int, v: int, take, op: str) -> None:
        """The columns (dim 0) of a ``(K, J)`` fragment blocked with ``v`` lanes whose rounds
        are whole rows (layout pass: ``column_rounds``): thread ``t`` holds columns ``(t %
        g) * v ..`` (``g = J // v``) of rows ``t // g + c * (threads // g)``, register ``c *
        v + q``.  Each thread folds its rounds per lane, the lanes ``g`` apart holding the same
        columns all-reduce by shuffles, the warps through shared memory
        (``tcr.block_allreduce`` with ``lanes=g``); ``dst``, blocked with the same ``v``, takes the ``v``
        results in threads ``t < g`` (the others' copies are not read): TileLang's layout of
        the output, each thread keeping only its columns."""
        out = self.out
        src, acc_type = self.buffers[s.src], cute_type(self.buffers[s.dst].dtype)
        rows, cols = (int(d.value) for d in src.shape)
        group = cols // v  # threads holding one row
        rounds = rows * cols // (threads * v)
        src_, dst_ = ident(s.src), ident(s.dst)
        red, q, c, acc = (out.fresh(x) for x in ("red", "q", "c", "acc"))
        out.line(depth, f"{red} = cute.make_rmem_tensor(({v},), {acc_type})",
                 f"T.reduce_{s.kind}({s.src}, {s.dst}, dim=0): a row is {group} threads x {v} "
                 f"registers, each thread folds {rounds} rows of its {v} columns")
        out.line(depth, f"for {q} in cutlass.range_constexpr({v}):")
        self.fold(depth + 1, acc, c, rounds, f"{src_}[{q}]", f"{src_}[{c} * {v} + {q}]", take, op)
        width = min(threads, 32) // group  # lanes of a warp holding the same columns
        value = f"tcr.warp_allreduce({acc}, {op}, {width}, {group})" if width > 1 else acc
        out.line(depth + 1, f"{red}[{q}] = {value}")
        if threads > 32:
            warps = threads // 32
            lanes = f", lanes={group}" if group > 1 else ""
            out.line(depth, f"tcr.block_allreduce({red}, {op}, {ident(s.scratch)}, {warps}, {warps}"
                            f"{self.reduce_barrier(True)}{lanes})")
        self.store_reduced(s, red, v, op, depth, q)

    def fold(self, depth: int, acc: str, var: str, count: int, first: str, later: str,
             take, op: str) -> None:
        """``acc`` = the combine of a thread's ``count`` registers: ``first``, then ``later``
        for ``var`` in ``1..count`` (a register expression naming ``var``)."""
        self.out.line(depth, f"{acc} = {take(first)}")
        if count > 1:
            self.out.line(depth, f"for {var} in cutlass.range_constexpr(1, {count}):")
            self.out.line(depth + 1, f"{acc} = tcr.combine({acc}, {take(later)}, {op})")

    def reduce_grouped(self, s: N.Reduce, depth: int, threads: int, v: int, take, op: str) -> None:
        """Rows shorter than threads x ``v``: under the blocked layout each row is the ``v``
        registers of ``row // v`` consecutive threads (a lane group), and each round of
        ``threads x v`` elements holds ``threads x v // row`` rows.  Each thread combines its
        ``v`` registers of a round, the lane group all-reduces (shuffles; a group of whole
        warps: each warp, then the group's warps through shared, ``tcr.block_allreduce``),
        the group's first lane writes the row's result to shared, and every thread reads
        all rows back."""
        out = self.out
        src, acc_type = self.buffers[s.src], cute_type(self.buffers[s.dst].dtype)
        row = int(src.shape[-1].value)
        rows = math.prod(int(d.value) for d in src.shape[:-1])
        # (a last round the fragment does not fill: its first threads hold the rest)
        rounds, group, per_round = -(-rows * row // (threads * v)), row // v, threads * v // row
        src_ = ident(s.src)
        red, all_rows, c, q, acc = (out.fresh(x) for x in ("red", "rows", "c", "q", "acc"))
        out.line(depth, f"{red} = cute.make_rmem_tensor(({rounds},), {acc_type})",
                 f"T.reduce_{s.kind}({s.src}, {s.dst}): a row is {group} threads x {v} registers")
        out.line(depth, f"for {c} in cutlass.range_constexpr({rounds}):")
        self.fold(depth + 1, acc, q, v, f"{src_}[{c} * {v}]", f"{src_}[{c} * {v} + {q}]", take, op)
        out.line(depth + 1, f"{red}[{c}] = tcr.warp_allreduce({acc}, {op}, {min(group, 32)})")
        if group > 32:  # a row spans group // 32 warps
            out.line(depth, f"tcr.block_allreduce({red}, {op}, {ident(s.scratch)}, {threads // 32}, "
                            f"{group // 32}{self.reduce_barrier(True)})")
        kept = s.clear and s.dim == src.ndim - 1 and s.dst not in self.viewed
        if kept and s.dst not in self.exchanged:
            # every read of dst is a nest's that takes the rounds' registers (TileLang's
            # per-thread rows): no exchange through shared memory, no barriers
            out.comment(depth, f"{s.dst}: its rows stay in {red} (no nest reads them whole)")
            out.use("reduce")
            self.unshared.add(s.dst)
        else:
            out.line(depth, f"{all_rows} = cute.make_rmem_tensor(({rows},), {acc_type})")
            out.line(depth, f"tcr.grouped_rows({red}, {all_rows}, {ident(s.scratch)}, {per_round}, "
                            f"{group}, {self.tid}{self.reduce_barrier(False)})")
            self.store_reduced(s, all_rows, rows, op, depth, c)
        if kept:
            # (read back by nests laid out as src: NestEmitter.row_result)
            self.row_results[s.dst] = (red, (rows, row), v, threads)

    def scan(self, s: N.Scan, depth: int) -> None:
        """T.cumsum / T.cummax of a shared buffer: each warp takes whole lines (the
        elements along ``dim`` at one index of the other dims), lane ``l`` the
        ``ceil(L / 32)`` positions from ``l * ceil(L / 32)`` in scan order (from the end
        when reversed), loaded into registers, scanned by ``tcs.warp_inclusive_scan``,
        stored back; the barrier pass orders it with the statements around it."""
        out, src, dst = self.out, self.buffers[s.src], self.buffers[s.dst]
        threads = self.scope.num_threads
        fn = {"sum": "T.cumsum", "max": "T.cummax"}[s.kind]
        if threads % 32:
            self.fail(s, f"{fn} scans with whole warps; the block has {threads} threads")
        if s.src in self.smem.staged or s.dst in self.smem.staged:
            self.fail(s, f"{fn} of a multi-buffered shared buffer is not supported")
        shape = [int(d.value) for d in src.shape]
        length = shape[s.dim]
        outer, inner = math.prod(shape[:s.dim]), math.prod(shape[s.dim + 1:])
        lines, warps, chunk = outer * inner, threads // 32, -(-length // 32)
        lane, line, c = out.fresh("lane"), out.fresh("line"), out.fresh("c")
        vals, pos = out.fresh("scan"), out.fresh("pos")
        i32 = lambda v: N.Const(v, "int32")  # noqa: E731
        line_var, pos_var = N.Var(line), N.Var(pos)
        # line = o * inner + i (o < outer, i < inner): no `// 1`, and no `%` a range makes moot
        o = line_var if inner == 1 else N.binop("floordiv", line_var, i32(inner))
        i = line_var if outer == 1 else N.binop("mod", line_var, i32(inner))

        def unflatten(flat, dims):  # a row-major flat index (< prod(dims)) -> one index per dim
            out_, rest = [], math.prod(dims)
            for k, d in enumerate(dims):
                rest //= d
                q = flat if rest == 1 else N.binop("floordiv", flat, i32(rest))
                out_.append(i32(0) if d == 1 else q if k == 0 else N.binop("mod", q, i32(d)))
            return out_
        indices = tuple(unflatten(o, shape[:s.dim]) + [pos_var] + unflatten(i, shape[s.dim + 1:]))
        self.ranges[line] = (0, lines - 1)
        self.ranges[pos] = (0, length - 1)
        order = f"{length - 1} - ({lane} * {chunk} + {c})" if s.reverse else f"{lane} * {chunk} + {c}"
        what = f"{fn}({s.src}, {s.dst}, dim={s.dim}{', reverse=True' if s.reverse else ''})"
        out.line(depth, f"{lane} = tc_tid % 32", what)
        out.line(depth, f"for {line} in cutlass.range(tc_tid // 32, {lines}, {warps}):")
        out.line(depth + 1, f"{vals} = cute.make_rmem_tensor(({chunk},), {cute_type(src.dtype)})")
        out.line(depth + 1, f"{vals}.fill(0)")
        guard = f"if {lane} * {chunk} + {c} < {length}:" if length % 32 else None
        for load in (True, False):
            if not load:
                out.line(depth + 1, f"tcs.warp_inclusive_scan({vals}, {quote(s.kind)}, {lane})")
            out.line(depth + 1, f"for {c} in cutlass.range_constexpr({chunk}):")
            d = depth + 2
            if guard:
                out.line(d, guard)
                d += 1
            out.line(d, f"{pos} = {order}")
            buf = src if load else dst
            elem = f"{ident(buf.name)}[{shared_index(self.exprs, buf, self.layouts.get(buf.name), indices)}]"
            out.line(d, f"{vals}[{c}] = {elem}" if load else f"{elem} = {vals}[{c}]")
        out.use("scan")

    def finalize_reducer(self, s: N.FinalizeReducer, depth: int) -> None:
        """Every thread's copy of the reducer combined: a warp shuffle all-reduce of each
        element, then (several warps) a shared-memory exchange."""
        buf = self.buffers[s.buffer]
        op = quote(self.reducers[s.buffer])
        threads = self.scope.num_threads
        if threads & (threads - 1) and threads % 32:
            self.fail(s, f"T.finalize_reducer combines whole warps; the block has {threads} threads")
        total = math.prod(int(d.value) for d in buf.shape)
        r = self.out.fresh("r")
        self.out.line(depth, f"for {r} in cutlass.range_constexpr({total}):",
                      f"T.finalize_reducer({s.buffer})")
        self.out.line(depth + 1, f"{ident(buf.name)}[{r}] = tcr.warp_allreduce({ident(buf.name)}[{r}], "
                                 f"{op}, {min(threads, 32)})")
        if threads > 32:
            warps = threads // 32
            named = f", {threads}" if self.scope.producer_threads else ""
            self.out.line(depth, f"tcr.block_allreduce({ident(buf.name)}, {op}, {ident(s.scratch)}, "
                                 f"{warps}, {warps}{named})")
        self.out.use("reduce")

    def thread_allreduce(self, s: N.ThreadAllReduce, depth: int) -> None:
        """TVM's thread all-reduce, one step per run of reduced thread dims
        (``allreduce_steps``): shuffle butterflies over the run's lanes within a warp
        (``tcr.warp_allreduce``, lanes ``stride`` apart), then where a group spans warps or
        is not lane-aligned its partials meet in shared memory (``tcr.block_allreduce``
        for whole consecutive warps, else ``tcr.gather_allreduce``); every thread stores
        its group's result into the result buffers."""
        out = self.out
        if self.region_barrier or self.scope.producer_threads:
            self.fail(s, "T.tvm_thread_allreduce needs every thread of the block; this "
                         "kernel has a producer warpgroup (warp specialization) or a "
                         "warpgroup region around it")
        threads = self.scope.threads
        total = self.scope.num_threads
        steps = allreduce_steps(threads, s.dims)
        n = len(s.values)
        if s.op:
            op = quote(s.op)
        else:
            params = ", ".join(ident(v.name) for v in s.lhs + s.rhs)
            res = ", ".join(self.exprs.expr(r) for r in s.results)
            op = f"lambda {params}: " + (f"({res})" if n > 1 else res)
        dims = ", ".join(f"threadIdx.{'xyz'[d]}" for d in s.dims)
        names = [out.fresh("ar") for _ in s.values]
        for i, (name, v) in enumerate(zip(names, s.values)):
            out.line(depth, f"{name} = {self.exprs.expr(v)}",
                     f"T.tvm_thread_allreduce over {dims}" if i == 0 else None)
        val = names[0]
        if n > 1:
            val = out.fresh("ar")
            out.line(depth, f"{val} = ({', '.join(names)})")
        for st in steps:
            if st.lanes > 1:
                stride = f", {st.stride}" if st.stride > 1 else ""
                out.line(depth, f"{val} = tcr.warp_allreduce({val}, {op}, {st.lanes}{stride})")
            if not st.crosses:
                continue
            scratch = ident(s.scratch[0]) if n == 1 else f"({', '.join(map(ident, s.scratch))})"
            if st.stride == 1 and st.lanes == 32 and n == 1:  # groups of whole consecutive warps
                red = out.fresh("red")
                dtype = cute_type(s.values[0].dtype)
                out.line(depth, f"{red} = cute.make_rmem_tensor((1,), {dtype})")
                out.line(depth, f"{red}[0] = {val}")
                out.line(depth, f"tcr.block_allreduce({red}, {op}, {scratch}, {total // 32}, "
                                f"{st.extent // 32})")
                out.line(depth, f"{val} = {red}[0]")
                continue
            span = st.stride * st.extent  # threads from a group's first to the next group's
            first = [] if st.stride == 1 else [f"tc_tid % {st.stride}"]
            if span < total:
                first.append(f"tc_tid // {span} * {span}")
            first_text = " + ".join(first) or "0"
            # (unsigned values keep their type through the helper: its argument and its
            # shared loads come back signed, and max / min would compare them signed)
            unsigned = n == 1 and s.values[0].dtype.startswith("uint")
            typed = f", dtype={cute_type(s.values[0].dtype)}" if unsigned else ""
            call = (f"tcr.gather_allreduce({val}, {op}, {scratch}, tc_tid, {first_text}, "
                    f"{st.stride * st.lanes}, {st.extent // st.lanes}{typed})")
            out.line(depth, f"{val} = {cute_type(s.values[0].dtype)}({call})" if unsigned
                     else f"{val} = {call}")
        if n > 1:
            out.line(depth, f"{', '.join(names)} = {val}")
        for name, d in zip(names, s.dsts):
            out.line(depth, f"{self.element(d, (N.Const(0, 'int32'),))} = {name if n > 1 else val}")
        out.use("reduce")

    def atomic_add(self, s: N.AtomicAdd, depth: int) -> None:
        if isinstance(s.value, N.Region):
            self.fail(s, "internal: tile T.atomic_add reached the codegen unlowered")
        buf = self.buffers[s.dst.buffer]
        if buf.scope not in ("global", "shared"):
            self.fail(s, f"T.atomic_add into '{buf.name}': atomics target global or shared memory")
        value = self.exprs.expr(N.cast(s.value, buf.dtype))
        key = (s.dst.buffer, s.dst.starts)
        if key in self.nests.vector:  # a vector add (vectorize): this lane's element of it
            self.out.line(depth, f"{self.nests.vector[key]}[{self.nests.lane}] = {value}")
            return
        coord = self.atomic_coord(buf.name, s.dst.starts)
        # (skipped where it or an operand it reads is out of bounds, as TileLang wraps the call)
        conds = list(dict.fromkeys(self.bounds.predicate(buf.name, s.dst.starts)
                                   + self.bounds.of_loads(list(_loads(s.value)) + list(_loads(s.dst.starts)))))
        # add/max/min: their helpers' default order is relaxed, written only when another
        order = f', "{s.order}"' if s.op in ("or", "store") or s.order != "relaxed" else ""
        if s.op in ("max", "min") and buf.dtype in ("uint32", "uint64"):
            order += ", unsigned=True"  # the tensor's elements are signless Ints: .u32 / .u64
        if self.replicas and not self.one_thread:
            # (a nest every thread runs whole: one copy of its atomics, as TileLang guards
            # such side effects; its plain stores write the same value from every thread)
            conds.insert(0, f"{self.tid} == 0")
        elif self.nests.line_frag is not None and not self.one_thread:
            # a nest over the rows (columns) of an MMA row (column) fragment: the threads
            # holding a row (the lanes of a quad, the warps along N) run it alike; the first
            # of them runs its atomics, as TileLang guards them to the fragment's replica 0
            conds.insert(0, self.mma.owners[self.nests.line_frag])
        if self.bounds.never(conds):  # (it never runs here: not emitted)
            self.dropped.add(id(s))
            return
        self.predicated(conds, f"tca.atomic_{s.op}({ident(buf.name)}, {coord}, {value}{order})", depth)
        self.out.use("atomic")

    def gemm(self, s: N.Gemm, depth: int) -> None:
        self.mma.gemm(s, depth, None if s.stage is None else self.exprs.expr(s.stage))

    def named_barrier(self, s: N.NamedBarrier, depth: int) -> None:
        fn = "barrier_arrive" if s.arrive else "barrier"
        self.out.line(depth, f"cute.arch.{fn}(barrier_id={self.exprs.expr(s.barrier_id)}, "
                             f"number_of_threads={s.threads})")

    def warp_sync(self, s: N.WarpSync, depth: int) -> None:
        mask = "" if s.mask is None else (str(int(s.mask.value)) if isinstance(s.mask, N.Const)
                                          else self.exprs.expr(s.mask))
        self.out.line(depth, f"cute.arch.sync_warp({mask})")

    def device_print(self, s: N.DevicePrint, depth: int) -> None:
        """One ``cute.printf`` line as TileLang's debug print writes it (bools print
        ``true``/``false``, through an ``if``)."""
        self.out.use("debug")
        head = f"msg='{_printf_text(s.msg)}' BlockIdx=(%d, %d, %d), ThreadIdx=(%d, %d, %d)"
        if s.value is None:
            self.out.line(depth, f"cute.printf({quote(head)}, *tcd.where())")
            return
        if s.buffer:
            head += f": buffer={_printf_text(s.buffer)}, index=%d,"
            where = f"*tcd.where(), {self.exprs.expr(s.index)}"
        else:
            head += ":"
            where = "*tcd.where()"
        value = self.exprs.expr(s.value)
        if s.value.dtype == "bool":
            self.out.line(depth, f"if {value}:")
            self.out.line(depth + 1, f"cute.printf({quote(head + ' dtype=bool value=true')}, {where})")
            self.out.line(depth, "else:")
            self.out.line(depth + 1, f"cute.printf({quote(head + ' dtype=bool value=false')}, {where})")
            return
        name, conv, as_type = _PRINTED[s.value.dtype]
        self.out.line(depth, f"cute.printf({quote(f'{head} dtype={name} value={conv}')}, {where}, "
                             f"cutlass.{as_type}({value}))")

    def device_assert(self, s: N.DeviceAssert, depth: int) -> None:
        self.out.use("debug")
        self.out.line(depth, f"if not ({self.exprs.expr(s.cond)}):", "T.device_assert")
        if s.msg:
            self.out.line(depth + 1, f"cute.printf({quote('Device assert failed: ' + _printf_text(s.msg))})")
        self.out.line(depth + 1, "tcd.trap()")

    def wait_wgmma(self, s: N.WaitWgmma, depth: int) -> None:
        self.mma.wait(s, depth)

    # ---- barriers and TMA -----------------------------------------------------------------
    def barrier(self, s: N.Barrier, depth: int) -> None:
        self.mma.drain(depth)  # wgmma reads of shared memory end before the block moves on
        if s.wait_async:
            self.out.line(depth, "cute.arch.cp_async_wait_group(0)")
        if self.mma.proxy_fence or s.fence_proxy:
            # shared writes become visible to wgmma's (async proxy) reads; shared reads and
            # writes are done before a TMA load's (async proxy) writes to the same bytes
            self.out.line(depth, 'cute.arch.fence_proxy("async.shared", space="cta")')
        self.out.line(depth, self.sync())

    def barrier_ref(self, r: N.Region) -> str:
        idx = r.starts[0]
        if isinstance(idx, N.Const) and idx.value == 0:
            return ident(r.buffer)
        return f"{ident(r.buffer)} + {self.exprs.operand(idx, PREC['add'] + 1)}"

    def mbarrier_wait(self, s: N.MBarrierWait, depth: int) -> None:
        self.out.use("tma")
        if not arch_at_least(self.plan.arch, 90):
            # (mbarrier.try_wait is sm_90+: sm_80 spins on mbarrier.test_wait.parity)
            self.out.line(depth, f"tct.wait_test({self.barrier_ref(s.barrier)}, "
                                 f"{self.exprs.expr(s.parity)})")
            return
        self.out.line(depth, f"tct.wait({self.barrier_ref(s.barrier)}, {self.exprs.expr(s.parity)})")

    def mbarrier_arrive(self, s: N.MBarrierArrive, depth: int) -> None:
        if s.cp_async:  # T.cp_async_barrier_noinc
            if not arch_at_least(self.plan.arch, 90):  # (CuTe DSL's is sm_90+; the PTX is sm_80's)
                self.out.use("tma")
                self.out.line(depth, f"tct.cp_async_arrive_noinc({self.barrier_ref(s.barrier)})",
                              "arrives when this thread's earlier cp.async copies are done")
                return
            self.out.line(depth, f"cute.arch.cp_async_mbarrier_arrive_noinc("
                                 f"{self.barrier_ref(s.barrier)})",
                          "arrives when this thread's earlier cp.async copies are done")
            return
        self.out.use("tma")
        if s.cluster:  # (the multicast pass) the stage is the cluster's: each warp
            # releases it in every block of the cluster, lane r in block r
            self.out.line(depth, "cute.arch.sync_warp()", "the warp is done with the stage")
            self.out.line(depth, f"if cute.arch.lane_idx() < {s.cluster}:",
                          f"lane r arrives on block r's barrier, for the {s.cluster} blocks of "
                          "the cluster")
            self.out.line(depth + 1, f"tct.arrive({self.barrier_ref(s.barrier)}, "
                                     "block=cute.arch.lane_idx())")
            return
        if s.block is not None:  # T.mbarrier_arrive(bar, cta_id): a block of the cluster's
            if not arch_at_least(self.plan.arch, 90):  # (mapa + shared::cluster: sm_90+)
                self.fail(s, f"T.mbarrier_arrive(mbarrier, cta_id) arrives on a barrier of "
                             f"another block of the cluster (distributed shared memory, "
                             f"sm_90+); the target is {self.plan.arch}")
            self.out.line(depth, f"tct.arrive({self.barrier_ref(s.barrier)}, "
                                 f"block={self.exprs.expr(s.block)})",
                          "on that block's barrier in the cluster")
            return
        if not arch_at_least(self.plan.arch, 90):  # (CuTe DSL's arrive is .release.cta: sm_90+)
            self.out.line(depth, f"tct.arrive_cta({self.barrier_ref(s.barrier)})")
            return
        self.out.line(depth, f"tct.arrive({self.barrier_ref(s.barrier)})")

    def cluster_copy(self, s: N.ClusterCopy, depth: int) -> None:
        """``T.copy_cluster(src, dst, dst_block=b[, remote_barrier=bar])``: the threads the
        statement maps onto take its elements in turn and store each at its offset in block
        ``b``'s ``dst`` (``tct.remote_store``: ``st.shared::cluster``); with a barrier, they
        sync and one of them arrives on ``bar`` in block ``b`` (release at cluster scope)."""
        if not arch_at_least(self.plan.arch, 90):
            self.fail(s, f"T.copy_cluster(dst_block=...) stores into another block's shared "
                         f"memory (distributed shared memory, sm_90+); the target is "
                         f"{self.plan.arch}")
        if not self.scope.cluster or math.prod(self.scope.cluster) < 2:
            self.fail(s, "T.copy_cluster(dst_block=...) needs a kernel launched in clusters "
                         "(T.ClusterKernel(..., cluster_dims=...), T.Kernel(..., cluster=...))")
        if self.one_thread:
            self.fail(s, "T.copy_cluster(dst_block=...) inside a one-thread branch: the "
                         "threads of the block (or thread region) copy the elements together")
        out, exprs = self.out, self.exprs
        out.use("tma")
        dims = [int(e.value) for e in s.src.extents if int(e.value) != 1]
        total = math.prod(dims)
        block = exprs.expr(s.block)
        base = out.fresh("remote")
        out.line(depth, f"{base} = tct.remote_base({ident(s.dst.buffer)}, {block})",
                 f"T.copy_cluster: '{s.dst.buffer}' in block {block} of the cluster")
        e = out.fresh("e")
        out.line(depth, f"for {e} in cutlass.range({self.tid}, {total}, {self.threads}):")
        coords, stride = [], total
        for k, n in enumerate(dims):  # the element's coordinate along each dim of more than one
            stride //= n
            v = out.fresh("c")
            q = e if stride == 1 else f"{e} // {stride}"
            out.line(depth + 1, f"{v} = {q}" if k == 0 else f"{v} = {q} % {n}")
            coords.append(N.Var(v, "int32"))

        def indices(r: N.Region):
            it = iter(coords)
            return tuple(start if int(ext.value) == 1 else next(it) if
                         isinstance(start, N.Const) and start.value == 0 else
                         N.binop("add", start, next(it)) for start, ext in zip(r.starts, r.extents))
        dst = self.buffers[s.dst.buffer]
        value = N.Load(s.src.buffer, indices(s.src), self.buffers[s.src.buffer].dtype)
        text = exprs.expr(N.cast(value, dst.dtype))
        if dst.dtype == "bool":
            text = f"cutlass.Uint8({text})"  # a byte in memory
        offset = shared_index(exprs, dst, self.layouts.get(dst.name), indices(s.dst))
        out.line(depth + 1, f"tct.remote_store({base}, {offset}, {text})")
        if s.barrier is not None:
            out.line(depth, self.sync(), "every element stored")
            out.line(depth, f"if {self.tid} == 0:")
            out.line(depth + 1, f"tct.remote_arrive({self.barrier_ref(s.barrier)}, {block})",
                     f"on that barrier in block {block}")

    def cluster_sync(self, s: N.ClusterSync, depth: int) -> None:
        if not arch_at_least(self.plan.arch, 90):
            self.fail(s, f"T.cluster_{s.kind}() is barrier.cluster, sm_90+; the target is "
                         f"{self.plan.arch}")
        if s.kind == "sync":
            self.out.use("tma")
            self.out.line(depth, "tct.cluster_sync()")
        else:
            self.out.line(depth, f"cute.arch.cluster_{s.kind}()",
                          f"barrier.cluster.{s.kind.replace('_', '.')}")

    def set_max_nreg(self, s: N.SetMaxNReg, depth: int) -> None:
        if not self.plan.arch.startswith("sm_90"):
            form = "T.inc_max_nreg" if s.increase else "T.dec_max_nreg"
            self.fail(s, f"T.set_max_nreg ({form}({s.count})) is setmaxnreg, an sm_90a "
                         f"instruction; the target is {self.plan.arch}")
        fn = "increase" if s.increase else "decrease"
        self.out.line(depth, f"cute.arch.setmaxregister_{fn}({s.count})", "registers per thread of this warpgroup")

    def tma_copy(self, s: N.TmaCopy, depth: int) -> None:
        out = self.out
        out.use("tma")
        desc = {d.name: d for d in self.scope.tma_descriptors}.get(s.desc)
        if desc is None:
            self.fail(s, "internal: T.tma_copy without a descriptor (the TMA pass assigns one)")
        load = s.barrier is not None
        glob, shared = (s.src, s.dst) if load else (s.dst, s.src)
        coords = ", ".join(self.exprs.expr(x) for x in reversed(glob.starts))
        coords = f"({coords},)" if len(glob.starts) == 1 else f"({coords})"
        stage = None if s.stage is None else self.exprs.expr(s.stage)
        smem = self.smem.ptr(shared.buffer, stage)
        spec = desc.spec
        layout = self.layouts.get(shared.buffer)
        kind = layout.kind if layout is not None else "row_major"
        if (kind, layout.swizzle if kind == "tma_swizzled" else 0) != (
                "tma_swizzled" if spec.swizzle else "row_major", spec.swizzle):
            self.fail(s, f"internal: the TMA descriptor '{s.desc}' moves '{shared.buffer}' "
                         f"with swizzle {spec.swizzle}, but its layout is "
                         f"{layout_str(layout) if layout is not None else 'none'}")
        box = "x".join(map(str, spec.box))
        buf = self.buffers[shared.buffer]
        box_bytes = spec.box_bytes(desc.dtype)
        chunk_bytes = box_bytes  # a chunk's bytes in shared memory: the box's, but for a
        sliced = row_slice(shared, buf, spec.swizzle, symbolic=True)  # range of the tile's rows
        if sliced is not None:
            first, rows = sliced
            row_bytes = box_bytes // rows
            chunk_bytes = row_bytes * int(buf.shape[0].value)
            if not spec.swizzle and spec.box[-1] < int(buf.shape[-1].value):
                # a row cut into boxes (tma_box's split): row-major rows, one box after another
                row_bytes = DTYPES[buf.dtype].bytes * int(buf.shape[-1].value)
                chunk_bytes = box_bytes
            if isinstance(first, int):
                smem = f"{smem} + {first * row_bytes}"
                what_rows = f" into rows {first}:{first + rows} of {shared.buffer}"
            else:  # a row computed at run time (a_s[warp, 0:K])
                smem = f"{smem} + {self.exprs.operand(first, PREC['mul'])} * {row_bytes}"
                what_rows = f" into {rows} row(s) from row {self.exprs.expr(first)} of {shared.buffer}"
        else:
            what_rows = ""
        matrix = matrix_slice(shared, buf, spec.swizzle)
        if matrix is not None:  # A_s[s, :, :]: the matrix's own chunks
            smem = self.smem.matrix_ptr(self.exprs, buf, matrix, stage)
            what_rows = f" into {gemm_operand(buf.name, matrix)}"
        chunks = int(buf.shape[-1].value) // spec.box[-1]
        columns = column_slice(shared, buf, spec.swizzle)
        if columns is not None:  # KV_s[:, c0:c0 + n]: chunks c0 / width.. of the tile
            (c0, n), rows = columns, int(buf.shape[0].value)
            at = N.binop("mul", c0, N.as_expr(rows * DTYPES[buf.dtype].bytes))
            smem = self.smem.matrix_ptr(self.exprs, buf, (), stage, at)
            chunks = n // spec.box[-1]
            what_rows = f" into columns {self.exprs.expr(c0)}.. ({n}) of {shared.buffer}"
        what = (f"a {box} box" if chunks == 1 else f"{chunks} {box} boxes") + what_rows
        more = f", chunks={chunks}, step={spec.box[-1]}, chunk_bytes={chunk_bytes}" \
            if chunks > 1 else ""
        if load:
            more += "" if s.arrive else ", arrive=False"  # (TileLang's T.tma_copy)
            if s.multicast:
                if chunks % s.multicast:
                    self.fail(s, f"internal: a TMA load of {chunks} boxes multicast to "
                                 f"{s.multicast} blocks (the multicast pass splits whole boxes)")
                more += f", cluster={s.multicast}"
                what += f", multicast to the cluster's {s.multicast} blocks"
            call = (f"tct.load({ident(s.desc)}, {smem}, {self.barrier_ref(s.barrier)}, "
                    f"{coords}, {box_bytes * chunks}{more})")
            if self.one_thread:  # already inside `if tc_tid == <one thread>:`
                out.line(depth, call, f"TMA load of {what} of {glob.buffer}")
            elif s.leader_threads:  # T.tma_copy(leader_scope_threads=k)
                out.line(depth, f"if {self.tid} % {s.leader_threads} == 0:",
                         f"TMA load of {what} of {glob.buffer}, one per {s.leader_threads} threads")
                out.line(depth + 1, call)
            else:
                out.line(depth, f"if {self.tid} == 0:", f"TMA load of {what} of {glob.buffer}")
                out.line(depth + 1, call)
        else:
            fn, verb = ("store_add", "TMA reduce-store (add)") if s.reduce == "add" else \
                ("store", "TMA store")
            if s.reduce not in ("", "add"):
                self.fail(s, f"internal: a TMA reduce-store with reduce={s.reduce!r}")
            out.line(depth, "tct.store_fence()", f"{verb} of {what} of {glob.buffer}")
            out.line(depth, self.sync())
            out.line(depth, f"if {self.tid} == 0:")
            if not s.wait_read:
                more += ", wait=False"
            out.line(depth + 1, f"tct.{fn}({ident(s.desc)}, {smem}, {coords}{more})",
                     None if s.wait_read else "its read is waited for before the next barrier")

    def tma_store_wait(self, s: N.TmaStoreWait, depth: int) -> None:
        if s.program:  # T.tma_store_wait(count, read): by the thread that issues the stores
            self.bulk_group_op(s, f"T.tma_store_wait({s.count}{'' if s.read else ', read=False'})",
                               f"cute.arch.cp_async_bulk_wait_group({s.count}, read={s.read})",
                               depth)
            return
        self.out.use("tma")
        self.out.line(depth, f"if {self.tid} == 0:")
        self.out.line(depth + 1, "tct.store_wait()", "TMA has read the stores' shared tiles")

    def tma_store_arrive(self, s: N.TmaStoreArrive, depth: int) -> None:
        self.bulk_group_op(s, "T.tma_store_arrive()", "cute.arch.cp_async_bulk_commit_group()",
                           depth)

    def bulk_group_op(self, s, form: str, call: str, depth: int) -> None:
        """A program's commit or wait of bulk-store groups (sm_90+), run by the thread that
        issues the TMA stores of the threads the statement maps onto (their thread 0)."""
        if not arch_at_least(self.plan.arch, 90):
            self.fail(s, f"{form} commits or waits for TMA stores (cp.async.bulk), sm_90+; "
                         f"the target is {self.plan.arch}")
        self.out.line(depth, f"if {self.tid} == 0:", f"{form}: the TMA stores' issuing thread")
        self.out.line(depth + 1, call)

    def async_copy_wait(self, s: N.AsyncCopyWait, depth: int) -> None:
        self.out.line(depth, "cute.arch.cp_async_wait_group(0)",
                      "this thread's cp.async copies have landed")

    # ---- the kernel ----------------------------------------------------------------------
    def check_float8_conversions(self) -> None:
        """Below sm_89 a float8 value converts to or from another dtype by no instruction
        CuTe DSL emits (``cvt`` on e4m3 / e5m2 is sm_89+; libNVVM fails with "unsupported
        operation"): refuse the statement that would, naming it (TileLang's CUDA headers
        convert in software there)."""
        if arch_at_least(self.plan.arch, 89):
            return

        def cvt8(dtype: str) -> bool:  # (float8_e8m0fnu converts in software: runtime.cute.e8m0)
            return dtype.startswith("float8") and dtype != E8M0
        dtypes = {**{b.name: b.dtype for b in self.buffers.values()},
                  **{a.buffer.name: a.buffer.dtype for a in walk_stmts(self.scope.body)
                     if isinstance(a, N.Allocate)}}
        for s in walk_stmts(self.scope.body):
            if isinstance(s, N.Gemm):
                dts = {dtypes[b] for b in (s.a, s.b) if b in dtypes}
                if any(d.startswith("float8") for d in dts):
                    self.fail(s, f"T.gemm on {'/'.join(sorted(dts))} operands: float8 values "
                                 f"convert only on sm_89+ (cvt e4m3/e5m2); the target is "
                                 f"{self.plan.arch}")
                continue
            if isinstance(s, (N.Reduce, N.Scan)) and cvt8(dtypes.get(s.src, "")):
                form = f"T.reduce_{s.kind}" if isinstance(s, N.Reduce) else \
                    {"sum": "T.cumsum", "max": "T.cummax"}.get(s.kind, "T.cumsum")
                self.fail(s, f"{form} of {dtypes[s.src]} values: float8 values convert only on "
                             f"sm_89+ (cvt e4m3/e5m2; tilecute combines them in float32); the "
                             f"target is {self.plan.arch}")
            shallow = dataclasses.replace(s, **{f: () for f in BODY_FIELDS.get(type(s), ())})
            for x in walk_nodes(shallow):
                if isinstance(x, N.Call) and x.name == "reinterpret":
                    continue  # (its bits, no conversion)
                if isinstance(x, N.Cast) and x.dtype != x.value.dtype and \
                        (cvt8(x.dtype) or cvt8(x.value.dtype)):
                    self.fail(s, f"a cast from {x.value.dtype} to {x.dtype}: float8 values "
                                 f"convert only on sm_89+ (cvt e4m3/e5m2); the target is "
                                 f"{self.plan.arch}")
                args = (x.a, x.b) if isinstance(x, (N.BinOp, N.Cmp)) else \
                    x.args if isinstance(x, N.Call) else ()
                f8 = [a.dtype for a in args if isinstance(a, N.Expr) and cvt8(a.dtype)]
                if f8:  # (arithmetic on float8 values computes in float32)
                    what = f"T.{x.name}" if isinstance(x, N.Call) else \
                        f"T.{x.op}" if x.op in ("min", "max") else f"'{x.op}'"
                    self.fail(s, f"{what} on {f8[0]} values: float8 values convert only on "
                                 f"sm_89+ (cvt e4m3/e5m2; tilecute computes on them in "
                                 f"float32); the target is {self.plan.arch}")

    def check_elect(self) -> None:
        """``T.shuffle_elect`` is ``elect.sync``, sm_90+ (TileLang's ``tl_shuffle_elect``
        static_asserts "requires sm_90 or later" below it): below sm_90 refuse the statement
        that reads it, naming the form and the arch (ptxas failed with no line)."""
        if arch_at_least(self.plan.arch, 90):
            return
        for s in walk_stmts(self.scope.body):
            shallow = dataclasses.replace(s, **{f: () for f in BODY_FIELDS.get(type(s), ())})
            if any(isinstance(x, N.Call) and x.name == "elect_one_sync" for x in walk_nodes(shallow)):
                self.fail(s, f"T.shuffle_elect is elect.sync, sm_90+ (TileLang's requires sm_90 or "
                             f"later); the target is {self.plan.arch}")

    def emit(self) -> list[str]:
        plan, k, out = self.plan, self.scope, self.out
        self.check_float8_conversions()
        self.check_elect()
        launch = plan.abi.kernels[self.index]
        params = [f"{ident(p.name)}: {param_type(p)}" for p in launch.params]
        if k.tma_descriptors:
            out.use("tma")
        out.line(0, "@cute.kernel")
        out.line(0, f"def {self.name}({', '.join(params)}):")
        bvars = [ident(v.name) for v in k.block_vars] + ["_"] * (3 - len(k.block_vars))
        out.line(1, f"{', '.join(bvars)} = cute.arch.block_idx()")
        for v in k.block_vars:
            if v.dtype == "int64":  # over an int64 grid extent (TileLang's): int64 index math
                out.line(1, f"{ident(v.name)} = cutlass.Int64({ident(v.name)})")
        out.line(1, "tc_tx, tc_ty, tc_tz = cute.arch.thread_idx()")
        tx, ty = (k.threads + (1, 1))[:2]
        tid = "tc_tx"
        if len(k.threads) > 1:
            tid += f" + tc_ty * {tx}"
        if len(k.threads) > 2:
            tid += f" + tc_tz * {tx * ty}"
        out.line(1, f"tc_tid = {tid}")
        if k.pdl and not has_pdl_calls(k.body):  # Programmatic Dependent Launch (option
            # pdl): the previous grid's memory is visible after the wait; the next kernel
            # may start launching from here on (T.pdl_sync / T.pdl_trigger place their own)
            out.line(1, "cute.arch.griddepcontrol_wait()", "PDL: the previous kernel's writes")
            out.line(1, "cute.arch.griddepcontrol_launch_dependents()")
        for d, t in enumerate(k.threads):
            self.ranges[f"thread_idx{d}"] = (0, t - 1 + (k.producer_threads if d == 0 else 0))
        for v, g in zip(k.block_vars, k.grid):
            hi = g.value - 1 if isinstance(g, N.Const) else None
            self.ranges[v.name] = (0, hi)  # (a cutlass value: no name of ExprPrinter.python)
            self.bounds.known.loop(v, N.Const(0, g.dtype), g)
        self.smem.carve(1)
        used = used_buffers(k.body)
        pointer = {p.source: p.name for p in launch.params if p.kind == "pointer"}
        self.pointers = pointer
        for p in plan.tensor_params:
            if p.name not in used:
                continue
            out.line(1, f"{ident(p.name)} = {self.global_tensor(p, ident(pointer[p.name]))}")
        self.rng_state(k.body)
        self.mma.declare(k.body, 1)
        self.body(k.body, 1)
        return out.lines

    def rng_state(self, body) -> None:
        """The thread's random number generator state (``runtime.cute.rng``), declared at
        the kernel's top when it calls T.rng_init; drawing without one is refused."""
        calls = [x for x in walk_nodes(body) if isinstance(x, N.Call)
                 and x.name in ("rng_init",) + N.RNG_DRAWS]
        if not calls:
            return
        if not any(c.name == "rng_init" for c in calls):
            where = next((st for st in walk_stmts(body) if not isinstance(st, _COMPOUND)
                          and any(x in calls for x in walk_nodes(st))), None)
            self.fail(where, f"T.{'rng_rand' if calls[0].name == 'rng_rand' else 'rng_rand_float'}"
                            "() draws from the thread's generator, but the kernel never calls "
                            "T.rng_init(seed, ...) to start it")
        self.out.use("rng")
        self.out.line(1, "tc_rng = cute.make_rmem_tensor((tcrng.WORDS,), cutlass.Uint32)",
                      "the thread's Philox4x32-10 state (T.rng_init)")


# statement kind -> its method (tile ops other than these reach the codegen unlowered)
_STATEMENTS = {
    N.Let: KernelEmitter.let, N.Store: KernelEmitter.store, N.If: KernelEmitter.if_,
    N.Evaluate: KernelEmitter.evaluate, N.For: KernelEmitter.for_,
    N.Allocate: KernelEmitter.allocate, N.Reduce: KernelEmitter.reduce,
    N.AtomicAdd: KernelEmitter.atomic_add, N.Barrier: KernelEmitter.barrier,
    N.TmaCopy: KernelEmitter.tma_copy, N.Gemm: KernelEmitter.gemm,
    N.WaitWgmma: KernelEmitter.wait_wgmma, N.NamedBarrier: KernelEmitter.named_barrier,
    N.WarpSync: KernelEmitter.warp_sync, N.ClusterSync: KernelEmitter.cluster_sync,
    N.TmaStoreWait: KernelEmitter.tma_store_wait,
    N.TmaStoreArrive: KernelEmitter.tma_store_arrive,
    N.AsyncCopyWait: KernelEmitter.async_copy_wait,
    N.MBarrierWait: KernelEmitter.mbarrier_wait, N.SetMaxNReg: KernelEmitter.set_max_nreg,
    N.MBarrierArrive: KernelEmitter.mbarrier_arrive, N.While: KernelEmitter.while_,
    N.ClusterCopy: KernelEmitter.cluster_copy,
    N.Scan: KernelEmitter.scan, N.FinalizeReducer: KernelEmitter.finalize_reducer,
    N.CombineRows: KernelEmitter.combine_rows, N.SegmentReduce: KernelEmitter.segment_reduce,
    N.ThreadAllReduce: KernelEmitter.thread_allreduce,
    N.WarpGroups: KernelEmitter.warp_groups,
    N.DevicePrint: KernelEmitter.device_print, N.DeviceAssert: KernelEmitter.device_assert,
}

# IR dtype -> (the C type name TileLang's print shows, the printf conversion, the cutlass
# type the value is printed as)
_PRINTED = {
    "float32": ("float", "%f", "Float32"), "float64": ("double", "%lf", "Float64"),
    "float16": ("half_t", "%f", "Float32"), "bfloat16": ("bfloat16_t", "%f", "Float32"),
    "float8_e4m3": ("fp8_e4_t", "%f", "Float32"), "float8_e5m2": ("fp8_e5_t", "%f", "Float32"),
    "int8": ("signed char", "%d", "Int32"), "uint8": ("unsigned char", "%u", "Uint32"),
    "int16": ("short", "%d", "Int32"), "uint16": ("unsigned short", "%u", "Uint32"),
    "int32": ("int", "%d", "Int32"), "uint32": ("uint", "%u", "Uint32"),
    "int64": ("long", "%ld", "Int64"), "uint64": ("ulong", "%lu", "Uint64"),
}


_COMPOUND = (N.For, N.If, N.While, N.KernelScope, N.WarpGroups)


def _read_outside_nests(body) -> frozenset:
    """The buffers a statement other than a ``T.Parallel`` nest names (loops' and branches'
    own parts, other statements whole), a reduction's source, and the destination of a
    reduction with ``clear=False`` (it combines with the old rows)."""
    found: set[str] = set()
    for s in body:
        if isinstance(s, N.For) and s.kind == "parallel" or isinstance(s, N.Allocate):
            continue
        if isinstance(s, N.Reduce):
            found.update((s.src,) if s.clear else (s.src, s.dst))
            continue
        fields = BODY_FIELDS.get(type(s), ())
        found |= buffers_used(dataclasses.replace(s, **{f: () for f in fields}))
        for f in fields:
            found |= _read_outside_nests(getattr(s, f))
    return frozenset(found)


def _printf_text(text: str) -> str:
    """``text`` as literal printf text: ``%`` doubled, and CuTe's ``{}`` placeholder
    broken up."""
    return text.replace("%", "%%").replace("{}", "{ }")


def _checked_part(s: N.Stmt):
    """The part of a bounds-checked statement whose loads are hoisted."""
    if isinstance(s, N.ThreadAllReduce):
        return s.values
    if isinstance(s, N.Store):
        return (s.indices, s.value)
    if isinstance(s, N.If):
        return s.cond
    if isinstance(s.value, N.Call) and s.value.name == "ptx_cp_async":
        # (its loads stand for addresses: their indices are read, the cp.async is checked
        # by ptx_cp_async)
        return tuple(ld.indices for ld in s.value.args[:2])
    return s.value


def _one_thread(e) -> int | None:
    """The thread ``t`` if ``e`` is the condition ``thread_idx(0) == t``."""
    if isinstance(e, N.Cmp) and e.op == "eq" and isinstance(e.a, N.Call) and \
            e.a.name == "thread_idx" and e.a.args == (N.Const(0, "int32"),) and \
            isinstance(e.b, N.Const):
        return int(e.b.value)
    return None


def used_buffers(body) -> set[str]:
    """Buffers the statements index (TMA copies address theirs through descriptors and
    shared pointers, so they do not count)."""
    used: set[str] = set()

    def visit(x):
        if isinstance(x, N.TmaCopy):
            for e in x.src.starts + x.dst.starts:
                visit(e)
            return
        if isinstance(x, (N.Load, N.Store)):
            used.add(x.buffer)
        if isinstance(x, N.Region):
            used.add(x.buffer)
        if isinstance(x, (N.Expr, N.Stmt, N.Region)) and hasattr(x, "__dataclass_fields__"):
            for v in vars(x).values():
                visit(v)
        elif isinstance(x, tuple):
            for v in x:
                visit(v)

    visit(body)
    return used
