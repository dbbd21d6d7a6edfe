"""T.gemm as CuTe DSL source text: one tiled MMA per T.gemm at the kernel's start, the
accumulator (and A-operand) fragments in the MMA's register layout, the gemm calls
(wgmma, warp-level mma, or the SIMT fallback's scalar multiply-adds over an ordinary
fragment), and waiting for wgmma batches left in flight.  The
``runtime.cute.mma`` helpers (``tcm``) do the work.  Imports no CUTLASS.
"""

from __future__ import annotations

from ..ir import nodes as N
from ..ir.printer import expr_str, gemm_operand
from ..runtime.dtypes import DTYPES
from ..transform.analysis import batch_may_stay_in_flight, walk_stmts
from ..transform.analysis import accesses
from .expr import ExprPrinter, cute_type, mma_type
from .memory import SharedMemory
from .source import Writer, ident, quote



def _bytes(elements: N.Expr, factor: int, dtype: str) -> N.Expr:
    """The bytes that ``elements * factor`` elements of ``dtype`` take (a packed int4
    operand's: half as many; the parts and matrices a T.gemm reads start on whole bytes),
    kept a product where it can be so that the operand's alignment stays known."""
    info = DTYPES[dtype]
    if info.pack == 1:
        return N.binop("mul", elements, N.as_expr(factor * info.bytes))
    if factor % info.pack == 0:
        return N.binop("mul", elements, N.as_expr(factor // info.pack))
    if (isinstance(elements, N.BinOp) and elements.op == "mul" and isinstance(elements.b, N.Const)
            and int(elements.b.value) * factor % info.pack == 0):
        return N.binop("mul", elements.a, N.as_expr(int(elements.b.value) * factor // info.pack))
    return N.binop("floordiv", N.binop("mul", elements, N.as_expr(factor)), N.as_expr(info.pack))

class MmaEmitter:
    def __init__(self, out: Writer, buffers: dict[str, N.Buffer], layouts: dict[str, N.Layout],
                 smem: SharedMemory, exprs: ExprPrinter):
        self.out, self.buffers, self.layouts, self.smem = out, buffers, layouts, smem
        self.exprs = exprs  # (a matrix operand's leading indices)
        self.coords: dict[str, str] = {}  # mma fragment -> its (i, j) tensor
        self.rows: dict[str, str] = {}  # mma_rows fragment -> the row index of each register
        self.cols: dict[str, str] = {}  # mma_cols fragment -> the column index of each register
        # mma_rows / mma_cols fragment -> whether this thread is the first holder of its rows /
        # columns (the one copy of a side effect in a nest over the fragment)
        self.owners: dict[str, str] = {}
        # row / column fragment -> (owner test, owner lane, lane mask), or why not: the
        # once-per-element run of an atomic with a result in a nest over it
        self.fetch_once: dict[str, tuple | str] = {}
        self.tiled: dict[int, str] = {}  # id(T.gemm) -> its tiled MMA
        self.proxy_fence = False  # barriers also fence shared writes for wgmma reads
        # the wgmma batches T.gemms left in flight, oldest first; each the (accumulator, A
        # fragment) pairs it may be (one, or after branches or loops, any of several)
        self.in_flight: list[Batch] = []
        self.tid = "tc_tid"  # the thread's index among the threads the MMAs run on
        self.has_wgmma = False  # does a T.gemm of the kernel run on wgmma (set by declare)

    def declare(self, body, depth: int) -> None:
        """One tiled MMA per T.gemm, at the kernel's start."""
        allocs = {s.buffer.name: s for s in walk_stmts(body) if isinstance(s, N.Allocate)}
        written = {x for t in walk_stmts(body) if not isinstance(t, N.TmaCopy)
                   for x, _, w in accesses([t]) if w}  # shared buffers threads write
        for s in walk_stmts(body):
            if not isinstance(s, N.Gemm):
                continue
            self.out.use("mma")
            if s.family == "simt":
                continue  # scalar multiply-adds: no tiled MMA
            layout = allocs[s.c].layout
            self.has_wgmma |= layout.mma == "wgmma"
            a, b = allocs[s.a].buffer, allocs[s.b].buffer
            name = f"tc_mma{len(self.tiled)}"
            self.tiled[id(s)] = name
            n = int(allocs[s.c].buffer.shape[1].value)
            self.out.line(depth, f"{name} = tcm.tiled_mma({quote(layout.mma)}, {mma_type(a.dtype)}, "
                                 f"{mma_type(b.dtype)}, {cute_type(allocs[s.c].buffer.dtype)}, "
                                 f"{s.transpose_a}, "
                                 f"{not s.transpose_b}, {tuple(layout.warps)}, {n}"
                                 f"{', a_regs=True' if a.scope == 'fragment' else ''})",
                          f"{_form(s)}({gemm_operand(s.a, s.a_index, s.a_part)}, "
                          f"{gemm_operand(s.b, s.b_index, s.b_part)}, {s.c})")
            if layout.mma == "wgmma":
                self.proxy_fence |= bool({s.a, s.b} & written)

    def fragment(self, a: N.Allocate, depth: int) -> None:
        """A fragment in an MMA's register layout (an accumulator or an A operand), with the
        tensor of each register's (i, j)."""
        b, layout = a.buffer, a.layout
        self.out.use("mma")
        coords = f"tc_{b.name}_ij"  # in the generator's namespace: no IR name starts with tc_
        self.coords[b.name] = coords
        shape = tuple(int(d.value) for d in b.shape)
        fn, what = ("a_fragment", "A operand") if layout.operand == "A" else \
            ("accumulator", "accumulator")
        self.out.line(depth, f"{ident(b.name)}, {coords} = tcm.{fn}({quote(layout.mma)}, "
                             f"{tuple(layout.warps)}, {shape}, {cute_type(b.dtype)}, "
                             f"{_region_tid(layout)})",
                      f"{layout.mma} {what}; {coords}[r] = (i, j) of register r")

    def row_fragment(self, a: N.Allocate, depth: int) -> None:
        """An (M,) fragment holding one value per row of an accumulator: the rows this
        thread's accumulator registers cover, and the row index of each."""
        self.line_fragment(a, depth, "row", "i", self.rows, "accumulator")

    def col_fragment(self, a: N.Allocate, depth: int) -> None:
        """An (N,) fragment holding one value per column of a T.gemm register fragment: the
        columns this thread's registers of it cover, and the column index of each."""
        self.line_fragment(a, depth, "col", "j", self.cols, "register fragment")

    def line_fragment(self, a: N.Allocate, depth: int, kind: str, letter: str, names: dict,
                      what: str) -> None:
        b, layout = a.buffer, a.layout
        self.out.use("rows")
        index = f"tc_{b.name}_{letter}"  # in the generator's namespace: no IR name starts with tc_
        names[b.name] = index
        self.owners[b.name] = (f"tcrow.{kind}_owner({quote(layout.mma)}, {tuple(layout.warps)}, "
                               f"{int(b.shape[0].value)}, {_region_tid(layout)})")
        # an atomic with a result in a nest over it runs in the owner, its value shuffled
        # to the lanes holding the same row (the quad) / column (lane % 4 alike); where
        # other warps hold them too, a reason to refuse it
        lane = "cute.arch.lane_idx()"
        if kind == "row" and layout.warps[1] == 1:
            self.fetch_once[b.name] = (self.owners[b.name], f"({lane} & 28)",
                                       f"cutlass.Uint32(15) << ({lane} & 28)")
        elif kind == "col":  # (the 8 lanes of one lane % 4, and the warps along M)
            self.fetch_once[b.name] = (
                "its columns are held by 8 lanes of a warp and by each warp along M; tilecute "
                "runs such an atomic once per column and shares its value only for row "
                "fragments (one warp's quad)")
        else:
            spread = "warpgroups" if layout.mma == "wgmma" else "warps"
            self.fetch_once[b.name] = (
                f"its rows are held by lanes of several warps (the {layout.mma} {spread} "
                f"{tuple(layout.warps)}, more than one along N): the returned value would "
                "have to cross warps")
        word = "rows" if kind == "row" else "columns"
        self.out.line(depth, f"{ident(b.name)}, {index} = tcrow.{kind}_fragment({quote(layout.mma)}, "
                             f"{tuple(layout.warps)}, {int(b.shape[0].value)}, {cute_type(b.dtype)}, "
                             f"{_region_tid(layout)})",
                      f"the {word} of a {layout.mma} {what} this thread holds; "
                      f"{b.name}[q] is {word[:-1]} {index}[q]")

    def reduce_rows(self, s: N.Reduce, depth: int, threads: int = 0, barrier_id: int = 1) -> None:
        """``T.reduce_<kind>(acc, rows, dim=1)``: each thread combines its registers of each
        of its rows, then the quad holding the row; with warps along N (``s.scratch``), then
        the warps' partials through shared memory (``threads``: named barrier ``barrier_id``
        over ``threads`` threads: the first ones, for a kernel with a producer warpgroup, or
        a warpgroup region's, whose threads are numbered from its first)."""
        self.drain(depth, {s.src, s.dst})
        self.out.use("rows")
        what = f"T.reduce_{s.kind}({s.src}, {s.dst}, dim=1)"
        kind = s.kind + "_nan" if s.nan_propagate else s.kind  # TileLang's nan_propagate
        if s.partial:
            self.out.line(depth, f"tcrow.reduce_rows({ident(s.src)}, {ident(s.dst)}, {quote(kind)}, "
                                 f"clear={s.clear}, partial=True)",
                          what + ": this thread's partial of each row (the rows' sums are "
                                 "combined after the loop)")
            return
        if not s.scratch:
            self.out.line(depth, f"tcrow.reduce_rows({ident(s.src)}, {ident(s.dst)}, {quote(kind)}, "
                                 f"clear={s.clear})", what)
            return
        layout = self.layouts[s.src]
        m = int(self.buffers[s.src].shape[0].value)
        self.out.line(depth, f"tcrow.reduce_rows_across({ident(s.src)}, {ident(s.dst)}, "
                             f"{self.rows[s.dst]}, {quote(kind)}, {s.clear}, {ident(s.scratch)}, "
                             f"{quote(layout.mma)}, {tuple(layout.warps)}, {m}, {self.tid}, {threads}"
                             f"{f', {barrier_id}' if barrier_id != 1 else ''}"
                             f"{'' if s.sync_after else ', sync_after=False'})",
                      what + f": rows split over {layout.warps[1]} warp(group)s along N meet in "
                             f"'{s.scratch}'")

    def reduce_cols(self, s: N.Reduce, depth: int, threads: int = 0, barrier_id: int = 1) -> None:
        """``T.reduce_<kind>(acc, cols, dim=0)``: each thread combines its registers of each
        of its columns, the lanes holding the same columns combine theirs (shuffles), and
        the warps holding them through ``s.scratch``; every thread then holds all of
        ``cols`` (replicated).  ``threads`` / ``barrier_id`` as for :meth:`reduce_rows`."""
        self.drain(depth, {s.src, s.dst})
        self.out.use("rows")
        layout = self.layouts[s.src]
        kind = s.kind + "_nan" if s.nan_propagate else s.kind  # TileLang's nan_propagate
        self.out.line(depth, f"tcrow.reduce_cols({ident(s.src)}, {self.coords[s.src]}, "
                             f"{ident(s.dst)}, {quote(kind)}, {s.clear}, {ident(s.scratch)}, "
                             f"{quote(layout.mma)}, {tuple(layout.warps)}, {self.tid}, {threads}"
                             f"{f', {barrier_id}' if barrier_id != 1 else ''}"
                             f"{'' if s.sync_after else ', sync_after=False'})",
                      f"T.reduce_{s.kind}({s.src}, {s.dst}, dim=0): the columns' partials of "
                      f"the warps along M meet in '{s.scratch}'")

    def segment_reduce(self, s: N.SegmentReduce, depth: int, threads: int = 0,
                       barrier_id: int = 1) -> None:
        """``T.reduce_segments(acc, runs, kind, width)``: each run of ``width`` columns of
        each row of the accumulator combined by the threads holding it (their registers,
        then shuffles) into the shared ``runs``, then a barrier of the MMA's threads
        (``threads`` / ``barrier_id`` as for :meth:`reduce_rows`)."""
        self.drain(depth, {s.src})
        self.out.use("rows")
        n = int(self.buffers[s.src].shape[1].value)
        kind = s.kind + "_nan" if s.nan_propagate else s.kind  # TileLang's nan_propagate
        fn, per, what = ("reduce_segments", n // s.width, "columns") if s.axis else \
            ("reduce_row_segments", n, "rows")
        self.out.line(depth, f"tcrow.{fn}({ident(s.src)}, {self.coords[s.src]}, "
                             f"{ident(s.dst)}, {quote(kind)}, {s.width}, {per}, "
                             f"{self.tid}, {threads}"
                             f"{f', {barrier_id}' if barrier_id != 1 else ''})",
                      f"T.reduce_{s.kind} of runs of {s.width} {what} of '{s.src}' into "
                      f"'{s.dst}'")

    def combine_rows(self, s: N.CombineRows, depth: int, threads: int = 0,
                     barrier_id: int = 1) -> None:
        """``T.combine_rows(rows)``: each row's partials (one per thread holding it) added
        up in the quad, then (warps along N, ``s.scratch``) through shared memory."""
        self.out.use("rows")
        layout = self.layouts[s.buffer]
        m = int(self.buffers[s.buffer].shape[0].value)
        scratch = ident(s.scratch) if s.scratch else "None"
        self.out.line(depth, f"tcrow.combine_rows({ident(s.buffer)}, {self.rows[s.buffer]}, "
                             f"{quote(s.kind)}, {scratch}, {quote(layout.mma)}, "
                             f"{tuple(layout.warps)}, {m}, {self.tid}, {threads}"
                             f"{f', {barrier_id}' if barrier_id != 1 else ''})",
                      f"the row sums of '{s.buffer}': its threads' partials added up")

    def gemm(self, s: N.Gemm, depth: int, stage: str | None = None) -> None:
        """``stage``: the stage of the staged shared operands (default: the enclosing
        pipelined loop's)."""
        if s.family == "simt":
            self.simt(s, depth, stage)
            return
        a, b = self.buffers[s.a], self.buffers[s.b]
        layout = self.layouts[s.c]
        mma = self.tiled[id(s)]

        def view(buf, index, part, mn_major):
            return self.operand(buf, index, part, stage, mn_major, layout.mma)
        a_mn, b_mn = s.transpose_a, not s.transpose_b
        a_text = gemm_operand(s.a, s.a_index, s.a_part)
        b_text = gemm_operand(s.b, s.b_index, s.b_part)
        wait = self.wait_of(s)
        note = ""
        if s.wg_wait and layout.mma == "wgmma":
            note = "; no wait: in flight until T.wait_wgmma" if wait == N.NO_WAIT else \
                "; waits: a 16-bit accumulator cannot stay in flight (CuTe DSL repacks it)" \
                if wait == 0 else ""
        self.out.comment(depth, f"{_form(s)}({a_text}, {b_text}, {s.c}): {s.c} {_op(s)} {a_text}"
                                f"{'^T' if s.transpose_a else ''} @ {b_text}{'^T' if s.transpose_b else ''}"
                                + note)
        acc = self.clear(s, depth)
        if a.scope == "fragment":  # A is this thread's registers (wgmma's RS form, mma.sync)
            a_view, acc = ident(s.a), acc + ", a_regs=True"
        else:
            a_view = view(a, s.a_index, s.a_part, a_mn)
        b_view = view(b, s.b_index, s.b_part, b_mn)
        c = ident(s.c)
        if layout.mma == "wgmma":
            if wait:
                acc += f", wait={None if wait == N.NO_WAIT else wait}"
            self.out.line(depth, f"tcm.gemm({mma}, {self.tid}, {c}, {a_view}, {b_view}{acc})")
            batches = self.in_flight + [self.batch(s)]
            self.retire(batches, len(batches) if wait == N.NO_WAIT else wait, depth, done=s.c)
        else:
            self.out.line(depth, f"tcm.gemm_warp({mma}, {self.tid}, {c}, {a_view}, "
                                 f"{b_view}, {a_mn}, {b_mn}{acc})")

    def clear(self, s: N.Gemm, depth: int) -> str:
        """The gemm call's ``accumulate`` argument.  A clear_accum known only at run time
        (TileLang's ``clear_accum=(k == 0)``): wgmma's accumulate flag is a run-time value
        (its scale-d, as TileLang's), so batches in flight on C stay; the other families
        zero C first where it holds."""
        if isinstance(s.clear_accum, N.Expr) and self.layouts[s.c].kind == "mma" and \
                self.layouts[s.c].mma == "wgmma" and s.family != "simt":
            return f", accumulate={self.exprs.expr(N.Not(s.clear_accum))}"
        if isinstance(s.clear_accum, N.Expr):
            self.drain(depth, {s.c})
            self.out.line(depth, f"if {self.exprs.expr(s.clear_accum)}:",
                          f"clear_accum={expr_str(s.clear_accum)}")
            self.out.line(depth + 1, f"{ident(s.c)}.fill(0)")
            return ""
        return ", accumulate=False" if s.clear_accum else ""

    def operand(self, buf: N.Buffer, index: tuple, part: tuple, stage: str | None,
                mn_major: bool, family: str) -> str:
        """The (MN, K) view of a shared operand: a whole matrix, or a part of one (its
        first element's address; the rows of the whole matrix set the chunks' stride)."""
        rows, cols = (int(d.value) for d in buf.shape[-2:])
        layout = self.layouts.get(buf.name) or N.Layout("row_major")
        offset, stride = None, ""
        if part:
            (r0, rows), (c0, cols) = part
            full_rows, full_cols = (int(d.value) for d in buf.shape[-2:])
            if layout.kind == "tma_swizzled":  # chunk c0 / width, row r0 of each chunk
                offset = N.binop("add", _bytes(c0, full_rows, buf.dtype),
                                 N.binop("mul", r0, N.as_expr(layout.swizzle)))
                stride = f", chunk_rows={full_rows}" if rows != full_rows else ""
            else:  # row-major
                offset = (N.binop("mul", N.binop("add", N.binop("mul", r0, N.as_expr(full_cols)), c0),
                                  N.as_expr(DTYPES[buf.dtype].bytes))
                          if DTYPES[buf.dtype].pack == 1 else
                          N.binop("add", _bytes(r0, full_cols, buf.dtype), _bytes(c0, 1, buf.dtype)))
                stride = f", row_stride={full_cols}" if cols != full_cols else ""
        ptr = self.smem.matrix_ptr(self.exprs, buf, index, stage, offset)
        if layout.kind == "tma_swizzled":
            dtype = mma_type(buf.dtype) if family != "simt" else cute_type(buf.dtype)
            return (f"tcm.operand({ptr}, {dtype}, {rows}, {cols}, {layout.swizzle}, {mn_major}, "
                    f"{quote(family)}{stride})")
        # (row-major: a SIMT T.gemm's operand, or an mma.sync one whose rows no swizzle
        # chunks tile, read by ldmatrix as they are)
        dtype = mma_type(buf.dtype) if family == "mma" else cute_type(buf.dtype)
        return f"tcm.simt_operand({ptr}, {dtype}, {rows}, {cols}, {mn_major}{stride})"

    def simt(self, s: N.Gemm, depth: int, stage: str | None) -> None:
        """A T.gemm no tensor-core MMA serves (the gemm pass's ``simt`` family): each
        thread multiply-adds its own elements of C, in C's dtype, from the (MN, K) views of
        the shared operands; C's layout (blocked, replicated, or an MMA's) says which."""
        a, b, c = self.buffers[s.a], self.buffers[s.b], self.buffers[s.c]

        def view(buf, index, part, mn_major):
            return self.operand(buf, index, part, stage, mn_major, "simt")
        a_text = gemm_operand(s.a, s.a_index, s.a_part)
        b_text = gemm_operand(s.b, s.b_index, s.b_part)
        m, n = (int(d.value) for d in c.shape)
        k = s.a_part[0 if s.transpose_a else 1][1] if s.a_part else \
            int(a.shape[-2 if s.transpose_a else -1].value)
        layout = self.layouts.get(s.c) or N.Layout("replicated")
        self.out.comment(depth, f"T.gemm({a_text}, {b_text}, {s.c}): {s.c} {_op(s)} {a_text}"
                                f"{'^T' if s.transpose_a else ''} @ {b_text}"
                                f"{'^T' if s.transpose_b else ''} on CUDA cores (SIMT: no "
                                f"tensor-core MMA for {a.dtype} x {b.dtype} -> {c.dtype} here), "
                                f"{c.dtype} multiply-adds over C's {layout.kind} layout")
        args = (f"{ident(s.c)}, {view(a, s.a_index, s.a_part, s.transpose_a)}, "
                f"{view(b, s.b_index, s.b_part, not s.transpose_b)}, {m}, {n}, {k}")
        acc = self.clear(s, depth)
        if layout.kind != "mma" and self.dp4a_operands(s, a, b, c, k):
            acc += ", packed=True"  # four int8 products a dp4a, from 32-bit words
        if layout.kind == "mma":  # it shares T.Parallel loops with a tensor-core accumulator
            self.out.line(depth, f"tcm.gemm_simt_at({args}, {self.coords[s.c]}{acc})")
        elif layout.kind == "blocked":
            self.out.line(depth, f"tcm.gemm_simt({args}, {layout.threads}, {layout.vector}, "
                                 f"{_region_tid(layout)}{acc})")
        else:  # replicated: every thread holds (and computes) all of C, row-major
            self.out.line(depth, f"tcm.gemm_simt({args}, 1, {n}, 0{acc})")

    def dp4a_operands(self, s: N.Gemm, a: N.Buffer, b: N.Buffer, c: N.Buffer, k: int) -> bool:
        """Can a SIMT T.gemm read four K-consecutive bytes of each operand as one word and
        multiply-add them with ``dp4a``?  int8 x int8 -> int32, both K-major (A ``(M, K)``,
        B ``(N, K)`` with ``transpose_B``), whole row-major buffers whose rows are a
        multiple of 4 bytes (no part, no swizzle), ``K`` a multiple of 4."""
        if (a.dtype, b.dtype, c.dtype) != ("int8", "int8", "int32") or s.transpose_a or \
                not s.transpose_b or s.a_part or s.b_part or k % 4:
            return False
        for buf in (a, b):
            layout = self.layouts.get(buf.name) or N.Layout("row_major")
            if layout.kind != "row_major" or int(buf.shape[-1].value) % 4:
                return False
        return True

    def retire(self, batches: list, pending: int, depth: int, done: str | None = None) -> None:
        """After a wait that leaves the last ``pending`` of ``batches`` in flight: pin the
        registers of the accumulators that are complete now (``done``: one the wait's
        helper pins itself)."""
        self.in_flight = batches[len(batches) - pending:] if pending else []
        still = {c for b in self.in_flight for c, _ in b}
        for c in dict.fromkeys(c for b in batches for c, _ in b):
            if c not in still and c != done:
                self.out.line(depth, f"tcm.fence_registers({ident(c)})", "its MMAs are done")

    def wait(self, s: N.WaitWgmma, depth: int) -> None:
        """``T.wait_wgmma(n)``: at most the last ``n`` batches stay in flight.  In a kernel
        whose T.gemms run on no wgmma (mma.sync, SIMT: each completes in its statement)
        no batch is ever in flight, so nothing is waited for (there, below sm_90a, PTX has
        no wgmma.wait_group)."""
        if not self.has_wgmma:
            self.out.comment(depth, f"T.wait_wgmma({s.pending}): no wgmma batches in this kernel")
            return
        self.out.use("mma")
        if s.after:
            self.out.line(depth, f"tcm.wait_batches({s.pending}, after={ident(s.after)})",
                          f"kept after the writes of {s.after} (ptxas would move it up)")
        else:
            self.out.line(depth, f"tcm.wait_batches({s.pending})")
        self.retire(self.in_flight, s.pending, depth)

    def drain(self, depth: int, touched: set[str] | None = None) -> None:
        """Wait for the wgmma batches T.gemms left in flight (only when some statement
        about to run touches one of their registers, when ``touched`` names its buffers)."""
        if touched is not None and not touched & {x for b in self.in_flight for p in b
                                                  for x in p if x}:
            return
        for acc in dict.fromkeys(c for b in self.in_flight for c, _ in b):
            self.out.line(depth, f"tcm.drain({ident(acc)})", "the MMAs still in flight")
        self.in_flight = []

    # ---- the batches in flight where control flow meets ----------------------------------
    def wait_of(self, s: N.Gemm) -> int:
        """The batches a wgmma T.gemm leaves in flight: its ``wg_wait``, but none for a
        16-bit accumulator (CuTe DSL repacks those registers around each wgmma, which is
        wrong while the batch runs; T.wgmma_gemm then waits, which changes only timing)."""
        c = self.buffers.get(s.c)
        if s.wg_wait and c is not None and not batch_may_stay_in_flight(c.dtype):
            return 0
        return s.wg_wait

    def batch(self, s: N.Gemm) -> "Batch":
        """The registers a T.gemm's wgmma batch uses: its accumulator and A fragment (A
        where its buffer is not known yet: a shared A, which makes readers wait too)."""
        a = self.buffers.get(s.a)
        return Batch({(s.c, None if a is not None and a.scope == "shared" else s.a)})

    def loop_entry(self, body) -> list:
        """Before a loop's body: the batches in flight at the start of any of its steps
        (those before the loop, or those a step leaves to the next); returns those before."""
        entry, self.in_flight = self.in_flight, self.loop_state(self.in_flight, body)
        return entry

    def loop_exit(self, loop: N.For | N.While, entry: list, depth: int) -> None:
        """After a loop (``entry``: the batches in flight before it): those its steps leave
        (a loop of a few constant steps, step by step) and, unless the program waits for
        them itself (T.wgmma_gemm in the loop), waits for them all here."""
        steps = loop.extent.value if isinstance(loop, N.For) and \
            isinstance(loop.extent, N.Const) else None
        if steps is not None and 0 < steps <= 64:
            state = entry
            for _ in range(steps):
                state = self.flow(loop.body, state)
            self.in_flight = state
        else:
            self.in_flight = self.loop_state(entry, loop.body)
        if not any(isinstance(g, N.Gemm) and g.wg_wait == N.NO_WAIT for g in walk_stmts(loop.body)):
            self.drain(depth)

    def flow(self, stmts, state: list) -> list:
        """The batches in flight after ``stmts`` from ``state`` (what the emitter will
        track; reads that drain are left out, which only keeps more batches in flight)."""
        for s in stmts:
            if isinstance(s, N.Gemm) and s.family == "wgmma":
                state = merge([], state + [self.batch(s)])
                wait = self.wait_of(s)
                keep = len(state) if wait == N.NO_WAIT else wait
                state = state[len(state) - keep:] if keep else []
            elif isinstance(s, N.WaitWgmma):
                state = state[len(state) - s.pending:] if s.pending else []
            elif isinstance(s, N.Barrier):
                state = []
            elif isinstance(s, N.If):
                state = merge(self.flow(s.then, state), self.flow(s.orelse, state))
            elif isinstance(s, (N.For, N.While)):
                state = self.loop_state(state, s.body)
            elif isinstance(s, N.WarpGroups):
                state = merge(state, [])  # (its threads drain at its end; the others skip it)
        return state

    def loop_state(self, entry: list, body) -> list:
        """The batches in flight at the start of a loop's steps: a fixed point of ``entry``
        merged with what a step leaves (the merges only grow, so it is reached)."""
        state = entry
        for _ in range(4 * MAX_TRACKED):
            new = merge(entry, self.flow(body, state))
            if new == state:
                return state
            state = new
        return [Batch().union(*entry, *state)] * MAX_TRACKED  # (not reached)


Batch = frozenset  # of (accumulator, A fragment or None): the registers one batch may use
MAX_TRACKED = 8  # batches tracked one by one; older ones are one batch of all their registers


def merge(p: list, q: list) -> list:
    """The batches in flight where two paths meet: the i-th newest batch of either."""
    n = max(len(p), len(q))
    p, q = [Batch()] * (n - len(p)) + p, [Batch()] * (n - len(q)) + q
    out = [x | y for x, y in zip(p, q)]
    if len(out) > MAX_TRACKED:
        out = [Batch().union(*out[:len(out) - MAX_TRACKED + 1])] + out[len(out) - MAX_TRACKED + 1:]
    return out


def _form(s: N.Gemm) -> str:
    return "T.wgmma_gemm" if s.wgmma_only else "T.gemm"


def _op(s: N.Gemm) -> str:
    """How the comment writes the update: ``=`` with ``clear_accum=True``, ``+=`` without,
    and with a run-time ``clear_accum`` (``k == 0``) ``= (if k == 0) or +=``."""
    if isinstance(s.clear_accum, N.Const) or isinstance(s.clear_accum, bool):
        return "=" if bool(getattr(s.clear_accum, "value", s.clear_accum)) else "+="
    return f"= (if {expr_str(s.clear_accum)}) or +="


def _region_tid(layout: N.Layout) -> str:
    """The thread's index among the threads that hold a fragment of ``layout`` (those of
    a T.ws region start at ``layout.first_thread``)."""
    return f"tc_tid - {layout.first_thread}" if layout.first_thread else "tc_tid"
