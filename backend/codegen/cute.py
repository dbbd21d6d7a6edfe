"""Emit CuTe DSL source from a KernelPlan: one ``@cute.kernel`` per ``T.Kernel`` block,
one ``@cute.jit`` wrapper that launches them in order, and ``placeholder_args()`` that
builds the compile-time stand-ins the lazy cubin step passes to ``cute.compile``.

Kernel parameters are exactly the launch ABI's (pointers, int32 symbols, scalars); the
kernel builds its tensors from them.  Op -> code mappings are tables at the top of the
file; statements have one method each.  This module imports no CUTLASS: it prints text.
"""

from __future__ import annotations

import math

from .. import __version__
from ..ir import nodes as N
from ..runtime.dtypes import DTYPES
from ..transform.analysis import loads as _loads, row_major_strides, value_range, walk_stmts
from ..transform.layout import accesses, parallel_nest
from ..transform.lower import KernelPlan, shared_align, shared_allocs, shared_offsets, shared_stride
from ..transform.analysis import top_loads
from ..transform.vectorize import vector_accesses

# ---- tables ------------------------------------------------------------------------------
BINOP = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "mod": "%",
         "bitand": "&", "bitor": "|", "bitxor": "^", "shl": "<<", "shr": ">>"}
CMPOP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
# intrinsic -> CuTe DSL function; `{fast}` marks where fastmath goes
MATH = {
    "exp": "cute.math.exp", "exp2": "cute.math.exp2", "log": "cute.math.log",
    "log2": "cute.math.log2", "sqrt": "cute.math.sqrt", "rsqrt": "cute.math.rsqrt",
    "tanh": "cute.math.tanh", "sin": "cute.math.sin", "cos": "cute.math.cos",
    "floor": "cute.math.floor", "ceil": "cute.math.ceil",
}
PREC = {"or": 2, "and": 3, "not": 4, "cmp": 5, "bitor": 6, "bitxor": 7, "bitand": 8,
        "shl": 10, "shr": 10, "add": 11, "sub": 11, "mul": 12, "div": 12, "floordiv": 12,
        "mod": 12}
ATOM = 100
UNROLL_LIMIT = 8  # parallel nests with at most this many iterations per thread unroll fully
REPLICATED_UNROLL = 256  # replicated nests up to this many iterations unroll fully
HELPERS = {  # runtime.cute helper modules, by what the kernel uses
    "reduce": "from tilecute.runtime.cute import reduce as tcr",
    "atomic": "from tilecute.runtime.cute import atomic as tca",
    "copy": "from tilecute.runtime.cute import copy as tcc",
    "tma": "from tilecute.runtime.cute import tma as tct",
    "mma": "from tilecute.runtime.cute import mma as tcm",
}
TMA_SWIZZLE_MASK = {32: 0x10, 64: 0x30, 128: 0x70}  # byte bits that TMA's swizzle XORs in


class CodegenError(NotImplementedError):
    pass


def cute_type(dtype: str) -> str:
    return f"cutlass.{DTYPES[dtype].cute}"


class _KernelEmitter:
    def __init__(self, plan: KernelPlan, index: int):
        self.plan, self.func = plan, plan.func
        self.index = index
        self.scope = plan.func.kernels[index]
        self.name = plan.kernel_names[index]
        self.lines: list[str] = []
        self.buffers: dict[str, N.Buffer] = {p.name: p for p in plan.tensor_params}
        self.ranges: dict[str, tuple] = {}
        self.counter = 0
        self.layouts: dict[str, N.Layout] = {}
        self.subst: dict[str, str] = {}  # loop variable -> expression text (lanes)
        self.vector: dict[tuple, str] = {}  # vector access -> its register temporary
        self.hoisted: dict[tuple, str] = {}  # bounds-checked load -> its temporary
        self.lane = None  # this lane's index text inside a nest body
        self.frag_reg = None  # (step text, lanes) of the nest being emitted
        self.uses: set[str] = set()  # runtime.cute helper modules the kernel calls
        self.grid_bound: dict[str, str] = {}  # block variable -> the symbol its grid extent is
        self.smem_offsets: dict[str, int] = {}  # shared buffer -> byte offset
        self.staged: dict[str, N.Allocate] = {}  # multi-buffered shared buffers
        self.stage_of: dict[str, str] = {}  # staged buffer -> the stage the loop body sees
        self.mma_coords: dict[str, str] = {}  # T.gemm accumulator fragment -> its (i, j) tensor
        self.mma_reg = None  # the register index inside a nest over accumulators
        self.gemms: dict[int, str] = {}  # id(T.gemm) -> its tiled MMA
        self.proxy_fence = False  # barriers also fence shared writes for wgmma reads
        self.in_flight: list[str] = []  # accumulators of T.gemms that left wgmma batches in flight
        self.one_thread = False  # inside `if tc_tid == 0:`

    # ---- helpers -------------------------------------------------------------------------
    def sync(self) -> str:
        """A barrier of the threads the body maps onto: the whole block, or with a
        producer warpgroup (which never joins) named barrier 1 over the others."""
        if self.scope.producer_threads:
            return f"cute.arch.barrier(barrier_id=1, number_of_threads={self.scope.num_threads})"
        return "cute.arch.sync_threads()"

    def fresh(self, stem: str) -> str:
        self.counter += 1
        return f"tc_{stem}{self.counter}"

    def line(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def fail(self, node, msg: str):
        loc = getattr(node, "loc", None)
        where = f"{loc}: " if loc else ""
        raise CodegenError(f"{where}prim_func '{self.func.name}': {msg}")

    # ---- expressions ---------------------------------------------------------------------
    def const(self, e: N.Const) -> str:
        if e.dtype == "bool":
            return "True" if e.value else "False"
        if e.dtype == "int32":
            return str(int(e.value))
        value = repr(float(e.value)) if N.is_float(e.dtype) else str(int(e.value))
        if value in ("inf", "-inf", "nan"):
            value = f'float("{value}")'
        return f"{cute_type(e.dtype)}({value})"

    def expr(self, e: N.Expr) -> str:
        return self._expr(e)[0]

    def operand(self, e: N.Expr, min_prec: int) -> str:
        text, prec = self._expr(e)
        return f"({text})" if prec < min_prec else text

    def _expr(self, e: N.Expr) -> tuple[str, int]:
        """Source text of ``e`` and its Python precedence (parentheses only where needed)."""
        if isinstance(e, N.Var):
            return self.subst.get(e.name, e.name), ATOM
        if isinstance(e, N.Const):
            return self.const(e), ATOM
        if isinstance(e, N.BinOp):
            if e.op in ("min", "max"):
                return f"cutlass.{e.op}({self.expr(e.a)}, {self.expr(e.b)})", ATOM
            if e.op == "mod" and N.is_int(e.dtype) and not self.nonnegative_mod(e):
                # CuTe DSL's % truncates like C; the IR's mod floors like Python's
                a, b = self.operand(e.a, PREC["mul"]), self.operand(e.b, ATOM)
                return f"{a} - {a} // {b} * {b}", PREC["sub"]
            p = PREC[e.op]
            return f"{self.operand(e.a, p)} {BINOP[e.op]} {self.operand(e.b, p + 1)}", p
        if isinstance(e, N.Cmp):
            p = PREC["cmp"]
            return f"{self.operand(e.a, p + 1)} {CMPOP[e.op]} {self.operand(e.b, p + 1)}", p
        if isinstance(e, N.Logic):
            p = PREC[e.op]
            return f" {e.op} ".join(self.operand(a, p + 1) for a in e.args), p
        if isinstance(e, N.Not):
            return f"not {self.operand(e.a, PREC['not'])}", PREC["not"]
        if isinstance(e, N.Cast):
            return f"{cute_type(e.dtype)}({self.expr(e.value)})", ATOM
        if isinstance(e, N.Select):
            return (f"cutlass.select_({self.expr(e.cond)}, {self.expr(e.a)}, "
                    f"{self.expr(e.b)})"), ATOM
        if isinstance(e, N.Load):
            key = self.load_key(e)
            if key in self.hoisted:
                return self.hoisted[key], ATOM
            if key in self.vector:
                return f"{self.vector[key]}[{self.lane}]", ATOM
            return self.element(e.buffer, e.indices), ATOM
        if isinstance(e, N.Call):
            if e.name == "thread_idx":
                return ("tc_tx", "tc_ty", "tc_tz")[int(e.args[0].value)], ATOM
            if e.name == "ceildiv":
                a, b = self.operand(e.args[0], PREC["add"]), self.operand(e.args[1], ATOM)
                return f"({a} + {b} - 1) // {b}", PREC["floordiv"]
            if e.name == "fma":
                a, b, c = (self.operand(x, PREC["mul"] + 1) for x in e.args)
                return f"{a} * {b} + {c}", PREC["add"]
            if e.name == "abs":
                fn = "cute.math.absf" if N.is_float(e.dtype) else "abs"
                return f"{fn}({self.expr(e.args[0])})", ATOM
            if e.name in MATH:
                x = e.args[0]
                if x.dtype in ("float16", "bfloat16"):  # 16-bit math runs in fp32
                    inner = f"{MATH[e.name]}({self.expr(N.Cast('float32', x))})"
                    return f"{cute_type(e.dtype)}({inner})", ATOM
                return f"{MATH[e.name]}({self.expr(x)})", ATOM
        self.fail(None, f"expression {type(e).__name__} {getattr(e, 'name', '')} has no CuTe DSL form")

    def nonnegative_mod(self, e: N.BinOp) -> bool:
        (alo, _), (blo, _) = value_range(e.a, self.ranges), value_range(e.b, self.ranges)
        return alo is not None and alo >= 0 and blo is not None and blo > 0

    def index_tuple(self, indices) -> str:
        parts = [self.expr(i) for i in indices]
        return ", ".join(parts) if len(parts) > 1 else parts[0]

    @staticmethod
    def load_key(e: N.Load) -> tuple:
        return (e.buffer, e.indices)

    # ---- bounds predication --------------------------------------------------------------
    def access_predicate(self, buffer: str, indices, lower: bool = True, upper: bool = True) -> list[str]:
        """Conditions for ``buffer[indices]`` to be in bounds that cannot be proved."""
        buf = self.buffers.get(buffer)
        if buf is None or buf.scope != "global":
            return []
        conds = []
        for idx, dim in zip(indices, buf.shape):
            lo, hi = value_range(idx, self.ranges)
            if lower and (lo is None or lo < 0):
                conds.append(f"{self.expr(idx)} >= 0")
            if not upper:
                continue
            if isinstance(idx, N.Var) and isinstance(dim, N.Var) and self.grid_bound.get(idx.name) == dim.name:
                continue  # a block index over a grid of exactly `dim` blocks
            if not (isinstance(dim, N.Const) and hi is not None and hi < dim.value):
                conds.append(f"{self.expr(idx)} < {self.expr(dim)}")
        return conds

    def access_conds(self, loads) -> list[str]:
        conds: list[str] = []
        for ld in loads:
            conds += self.access_predicate(ld.buffer, ld.indices)
        return list(dict.fromkeys(conds))

    # ---- statements ----------------------------------------------------------------------
    def body(self, stmts, depth: int, guarded: bool = False) -> None:
        if not stmts:
            self.line(depth, "pass")
        for s in stmts:
            self.stmt(s, depth, guarded)

    def hoist_loads(self, e, depth: int) -> None:
        """Read each global load of ``e`` whose bounds cannot be proved into a temporary
        that stays 0 out of bounds (out-of-bounds loads read 0)."""
        for ld in top_loads(e):
            self.hoist_loads(ld.indices, depth)
            key = self.load_key(ld)
            if key in self.vector or key in self.hoisted:
                continue
            conds = self.access_predicate(ld.buffer, ld.indices)
            if conds:
                t = self.fresh("ld")
                self.line(depth, f"{t} = {cute_type(ld.dtype)}(0)")
                self.line(depth, f"if {' and '.join(conds)}:")
                self.line(depth + 1, f"{t} = {self.expr(ld)}")
                self.hoisted[key] = t

    def stmt(self, s: N.Stmt, depth: int, guarded: bool) -> None:
        saved = dict(self.hoisted)
        try:
            self._stmt(s, depth, guarded)
        finally:
            self.hoisted = saved

    def _stmt(self, s: N.Stmt, depth: int, guarded: bool) -> None:
        if guarded and isinstance(s, (N.Let, N.Store, N.If, N.Evaluate)):
            parts = {N.Let: lambda: s.value, N.Store: lambda: (s.indices, s.value),
                     N.If: lambda: s.cond, N.Evaluate: lambda: s.value}
            self.hoist_loads(parts[type(s)](), depth)
        if isinstance(s, N.Let):
            self.line(depth, f"{s.var.name} = {self.expr(s.value)}")
        elif isinstance(s, N.Store):
            key = (s.buffer, s.indices)
            if key in self.vector:  # a vector store: this lane's element of its registers
                self.line(depth, f"{self.vector[key]}[{self.lane}] = {self.expr(s.value)}")
                return
            text = f"{self.element(s.buffer, s.indices)} = {self.expr(s.value)}"
            conds = self.access_predicate(s.buffer, s.indices) if guarded else []
            if conds:
                self.line(depth, f"if {' and '.join(conds)}:")
                self.line(depth + 1, text)
            else:
                self.line(depth, text)
        elif isinstance(s, N.If):
            t = _one_thread(s.cond)
            one = t is not None and len(self.scope.threads) == 1 and not s.orelse
            self.line(depth, f"if tc_tid == {t}:" if one else f"if {self.expr(s.cond)}:")
            saved, self.one_thread = self.one_thread, self.one_thread or one
            self.body(s.then, depth + 1, guarded)
            self.one_thread = saved
            if s.orelse:
                self.line(depth, "else:")
                self.body(s.orelse, depth + 1, guarded)
        elif isinstance(s, N.Evaluate):
            self.line(depth, self.expr(s.value))
        elif isinstance(s, N.For):
            if s.kind == "parallel":
                self.parallel(s, depth)
                if parallel_nest(s)[-1].async_copy:
                    self.line(depth, "cute.arch.cp_async_commit_group()")
            else:
                self.serial(s, depth, guarded)
        elif isinstance(s, N.Allocate):
            self.allocate(s, depth)
        elif isinstance(s, N.Reduce):
            self.reduce(s, depth)
        elif isinstance(s, N.AtomicAdd):
            if isinstance(s.value, N.Region):
                self.fail(s, "internal: tile T.atomic_add reached the codegen unlowered")
            self.atomic_add(s, depth, guarded)
        elif isinstance(s, N.Barrier):
            self.barrier(s, depth)
        elif isinstance(s, N.TmaCopy):
            self.tma_copy(s, depth)
        elif isinstance(s, N.Gemm):
            self.gemm(s, depth)
        elif isinstance(s, N.MBarrierWait):
            self.uses.add("tma")
            self.line(depth, f"tct.wait({self.barrier_ref(s.barrier)}, {self.expr(s.parity)})")
        elif isinstance(s, N.SetMaxNReg):
            if not self.plan.arch.startswith("sm_90"):
                self.fail(s, f"T.set_max_nreg is setmaxnreg, an sm_90a instruction; the target is "
                             f"{self.plan.arch}")
            fn = "increase" if s.increase else "decrease"
            self.line(depth, f"cute.arch.setmaxregister_{fn}({s.count})  # registers per thread of this warpgroup")
        elif isinstance(s, N.MBarrierArrive):
            self.uses.add("tma")
            self.line(depth, f"tct.arrive({self.barrier_ref(s.barrier)})")
        elif isinstance(s, N.TILE_OPS):
            self.fail(s, f"T.{type(s).__name__.lower()} is a tile op; its lowering to CuTe DSL "
                         "is not implemented yet in this tilecute")
        else:
            self.fail(s, f"statement {type(s).__name__} has no CuTe DSL form")

    # ---- buffers -------------------------------------------------------------------------
    def allocate(self, s: N.Allocate, depth: int) -> None:
        b = s.buffer
        self.buffers[b.name] = b
        if s.layout is not None:
            self.layouts[b.name] = s.layout
        if b.scope == "shared":
            return  # carved out of dynamic shared memory at the kernel's start
        if b.scope == "fragment":
            total = math.prod(int(d.value) for d in b.shape)
            layout = s.layout or N.Layout("replicated")
            if layout.kind == "mma":
                self.uses.add("mma")
                coords = f"{b.name}_ij"
                self.mma_coords[b.name] = coords
                shape = tuple(int(d.value) for d in b.shape)
                fn, what = ("a_fragment", "A operand") if layout.operand == "A" else \
                    ("accumulator", "accumulator")
                self.line(depth, f"{b.name}, {coords} = tcm.{fn}(\"{layout.mma}\", "
                                 f"{tuple(layout.warps)}, {shape}, {cute_type(b.dtype)}, tc_tid)"
                                 f"  # {layout.mma} {what}; {coords}[r] = (i, j) of register r")
                return
            if layout.kind == "blocked":
                step = layout.threads * layout.vector
                regs = -(-total // step) * layout.vector
                note = f"  # {layout.kind}: {layout.vector} consecutive elements per thread step"
            else:
                regs, note = total, "  # replicated: every thread holds every element"
            self.line(depth, f"{b.name} = cute.make_rmem_tensor(({regs},), {cute_type(b.dtype)}){note}")
            return
        shape = ", ".join(str(int(d.value)) for d in b.shape)
        self.line(depth, f"{b.name} = cute.make_rmem_tensor(({shape},), {cute_type(b.dtype)})")

    def element(self, name: str, indices) -> str:
        """Source text of ``name[indices]`` in its memory (a register, shared or global)."""
        buf = self.buffers[name]
        if buf.scope == "fragment":
            layout = self.layouts.get(name, N.Layout("replicated"))
            if layout.kind == "mma":
                if self.mma_reg is None:
                    self.fail(None, f"internal: fragment '{name}' accessed outside its nest")
                lane = "" if self.lane in (None, "0") else f" + {self.lane}"
                return f"{name}[{self.mma_reg}{lane}]"
            if layout.kind == "blocked":
                if self.frag_reg is None or self.lane is None:
                    self.fail(None, f"internal: fragment '{name}' accessed outside its nest")
                k, width = self.frag_reg
                reg = self.lane if k == "0" else (
                    f"{k} * {width} + {self.lane}" if width > 1 else k)
                return f"{name}[{reg}]"
            return f"{name}[{self.flat_index(buf, indices)}]"
        if buf.scope == "shared":
            return f"{name}[{self.shared_index(buf, indices)}]"
        return f"{name}[{self.index_tuple(indices)}]"

    def flat_index(self, buf: N.Buffer, indices) -> str:
        terms = []
        for idx, stride in zip(indices, row_major_strides(buf)):
            if isinstance(stride, N.Const) and stride.value == 1:
                terms.append(self.operand(idx, PREC["add"]))
            else:
                terms.append(f"{self.operand(idx, PREC['mul'])} * {int(stride.value)}")
        return " + ".join(terms)

    def shared_index(self, buf: N.Buffer, indices) -> str:
        layout = self.layouts.get(buf.name)
        if layout is not None and layout.kind == "tma_swizzled":
            # TMA's pattern on byte offsets: b ^ ((b >> 3) & mask); in elements of 2^l bytes
            # that is e ^ ((e >> 3) & (mask >> l))
            mask = TMA_SWIZZLE_MASK[layout.swizzle] >> (DTYPES[buf.dtype].bytes.bit_length() - 1)
            width = layout.swizzle // DTYPES[buf.dtype].bytes
            cols = int(buf.shape[-1].value)
            if cols <= width:
                e = self.flat_index(buf, indices)
            else:  # chunk c // width of the last dim, then the row, then c % width
                rows = math.prod(int(d.value) for d in buf.shape[:-1])
                lead = self.flat_index(N.Buffer(buf.name, buf.dtype, buf.shape[:-1]), indices[:-1])
                c = self.operand(indices[-1], PREC["shr"] + 1)
                e = (f"({c} >> {width.bit_length() - 1}) * {rows * width} + "
                     f"({lead}) * {width} + ({c} & {width - 1})")
            return f"({e}) ^ ((({e}) >> 3) & {mask})"
        if layout is None or layout.kind != "swizzled":
            return self.flat_index(buf, indices)
        # column c of row r is stored at c ^ (r % swizzle)
        r, c = indices[-2], indices[-1]
        rows, cols = int(buf.shape[-2].value), int(buf.shape[-1].value)
        lead = self.flat_index(N.Buffer(buf.name, buf.dtype, buf.shape[:-2]), indices[:-2]) \
            if buf.ndim > 2 else None
        rt, ct = self.operand(r, PREC["bitand"] + 1), self.operand(c, PREC["bitxor"] + 1)
        text = f"{self.operand(r, PREC['mul'])} * {cols} + ({ct} ^ ({rt} & {layout.swizzle - 1}))"
        if lead:
            text = f"({lead}) * {rows * cols} + {text}"
        return text

    def serial(self, s: N.For, depth: int, guarded: bool) -> None:
        zero = isinstance(s.start, N.Const) and s.start.value == 0
        start, stop = self.expr(s.start), self.expr(s.extent if zero else N.binop("add", s.start, s.extent))
        const = isinstance(s.start, N.Const) and isinstance(s.extent, N.Const)
        if s.kind == "unrolled" and const:
            rng = f"cutlass.range_constexpr({start}, {stop})"
        elif s.kind == "unrolled":
            rng = f"cutlass.range({start}, {stop}, unroll_full=True)"
        else:
            rng = f"cutlass.range({start}, {stop})"
        if const:
            self.ranges[s.var.name] = (int(s.start.value), int(s.start.value + s.extent.value - 1))
        else:
            lo = value_range(s.start, self.ranges)[0]
            self.ranges[s.var.name] = (lo, None)
        self.line(depth, f"for {s.var.name} in {rng}:")
        views = []
        if s.kind == "pipelined":
            used = _used_buffers(s.body)
            rel = s.var.name if zero else \
                f"({s.var.name} - {self.operand(s.start, PREC['sub'] + 1)})"
            operands = {x for t in walk_stmts(s.body) if isinstance(t, N.Gemm) for x in (t.a, t.b)}
            for name, a in self.staged.items():
                if (name in used or name in operands) and a.stages == s.num_stages:
                    views.append(name)
                    stage = f"{rel} % {s.num_stages}"
                    self.stage_of[name] = stage
                    if name in used:  # indexed in the body (T.gemm takes the pointer itself)
                        self.line(depth + 1, f"{name} = {self.shared_view(a, stage)}  # the stage this iteration reads")
        self.body(s.body, depth + 1, guarded)
        for name in views:
            del self.stage_of[name]
        self.drain(depth)

    def parallel(self, s: N.For, depth: int) -> None:
        loops = parallel_nest(s)
        for lp in loops:
            if not isinstance(lp.extent, N.Const) or not isinstance(lp.start, N.Const):
                self.fail(lp, "T.Parallel extents must be known at compile time")
        if _has_parallel(loops[-1].body):
            self.fail(s, "a T.Parallel loop inside a T.Parallel body must be the whole body "
                         "(write `for i, j in T.Parallel(a, b)`)")
        if loops[-1].replicated:
            self.replicated_nest(loops, depth)
            return
        mma = [b for b, _, _ in accesses(loops[-1].body) if b in self.mma_coords]
        if mma:
            self.mma_nest(loops, mma[0], depth)
            return
        extents = [int(lp.extent.value) for lp in loops]
        width = max(1, loops[-1].vector_width)
        total = math.prod(extents)
        threads = self.scope.num_threads
        per_step = threads * width
        iters = -(-total // per_step)
        fragments = any(self.buffers[b].scope == "fragment" for b, _, _ in accesses(loops[-1].body))
        # nests over fragments unroll fully: their register indices must be constants
        static_k = iters == 1 or iters <= UNROLL_LIMIT or fragments
        k, f = ("0" if iters == 1 else self.fresh("k")), self.fresh("f")
        scale = f" * {width}" if width > 1 else ""
        if iters == 1:
            inner = depth
            self.line(inner, f"{f} = tc_tid{scale}")
        else:
            rng = f"cutlass.range_constexpr({iters})" if static_k else f"cutlass.range({iters})"
            self.line(depth, f"for {k} in {rng}:")
            inner = depth + 1
            self.line(inner, f"{f} = ({k} * {threads} + tc_tid){scale}")
        if total % per_step:
            self.line(inner, f"if {f} < {total}:")
            inner += 1
        rest = total
        for lp, extent in zip(loops, extents):
            rest //= extent
            start = int(lp.start.value)
            if static_k and rest % per_step == 0:
                # the same for every thread of a step: a compile-time value
                value = f"{k} * {per_step} // {rest}" if rest > 1 else f"{k} * {per_step}"
                if lp is not loops[0]:
                    value = f"{value} % {extent}"
                value = value if k != "0" else "0"
            else:
                value = f"{f} // {rest}" if rest > 1 else f
                if lp is not loops[0]:
                    value = f"({value}) % {extent}"
            if start:
                value = f"{value} + {start}"
            self.line(inner, f"{lp.var.name} = {value}")
            self.ranges[lp.var.name] = (start, start + extent - 1)
        self.frag_reg = (k, width)
        self.lanes(loops[-1], width, inner)
        self.frag_reg = None

    def mma_nest(self, loops, frag: str, depth: int) -> None:
        """A nest over T.gemm accumulators: each thread walks its own registers, with the
        loop variables taken from the register's (i, j)."""
        self.drain(depth)
        r = self.fresh("r")
        width = max(1, loops[-1].vector_width)  # registers r, r + 1: columns j, j + 1
        step = f", {width}" if width > 1 else ""
        # unrolled by the compiler (register indices become constants); range_constexpr
        # would unroll while tracing, slowly, and warn past 64 iterations
        self.line(depth, f"for {r} in cutlass.range(0, cute.size({frag}){step}, unroll_full=True):")
        names = ", ".join(lp.var.name for lp in loops)
        self.line(depth + 1, f"{names} = {self.mma_coords[frag]}[{r}]")
        for lp in loops:
            self.ranges[lp.var.name] = (0, int(lp.extent.value) - 1)
        self.mma_reg = r
        self.lanes(loops[-1], width, depth + 1)
        self.mma_reg = None

    def drain(self, depth: int) -> None:
        """Wait for the wgmma batches a T.gemm left in flight."""
        for acc in self.in_flight:
            self.line(depth, f"tcm.drain({acc})  # the MMAs still in flight")
        self.in_flight = []

    def gemm(self, s: N.Gemm, depth: int) -> None:
        a, b, c = (self.buffers[x] for x in (s.a, s.b, s.c))
        layout = self.layouts[s.c]
        mma = self.gemms[id(s)]

        def view(buf, mn_major):
            rows, cols = (int(d.value) for d in buf.shape)
            return (f"tcm.operand({self.shared_ptr(buf.name)}, {_mma_type(buf.dtype)}, {rows}, {cols}, "
                    f"{self.layouts[buf.name].swizzle}, {mn_major}, \"{layout.mma}\")")
        a_mn, b_mn = s.transpose_a, not s.transpose_b
        acc = "" if not s.clear_accum else ", accumulate=False"
        if a.scope == "fragment":  # wgmma's RS form: A is this thread's registers
            a_view, acc = s.a, acc + ", a_regs=True"
        else:
            a_view = view(a, a_mn)
        self.line(depth, f"# T.gemm({s.a}, {s.b}, {s.c}): {s.c} += {s.a}{'^T' if s.transpose_a else ''} "
                         f"@ {s.b}{'^T' if s.transpose_b else ''}")
        if layout.mma == "wgmma":
            if s.wg_wait:
                acc += f", wait={s.wg_wait}"
                if s.c not in self.in_flight:
                    self.in_flight.append(s.c)
            self.line(depth, f"tcm.gemm({mma}, tc_tid, {s.c}, {a_view}, {view(b, b_mn)}{acc})")
        else:
            self.line(depth, f"tcm.gemm_warp({mma}, tc_tid, {s.c}, {a_view}, "
                             f"{view(b, b_mn)}, {a_mn}, {b_mn}{acc})")

    def declare_gemms(self, body, depth: int) -> None:
        """One tiled MMA per T.gemm, at the kernel's start."""
        allocs = {s.buffer.name: s for s in walk_stmts(body) if isinstance(s, N.Allocate)}
        written = {x for t in walk_stmts(body) if not isinstance(t, N.TmaCopy)
                   for x, _, w in accesses([t]) if w}  # shared buffers threads write
        for s in walk_stmts(body):
            if not isinstance(s, N.Gemm):
                continue
            self.uses.add("mma")
            layout = allocs[s.c].layout
            a, b = allocs[s.a].buffer, allocs[s.b].buffer
            name = f"tc_mma{len(self.gemms)}"
            self.gemms[id(s)] = name
            n = int(allocs[s.c].buffer.shape[1].value)
            self.line(depth, f"{name} = tcm.tiled_mma(\"{layout.mma}\", {_mma_type(a.dtype)}, {_mma_type(b.dtype)}, "
                             f"cutlass.Float32, {s.transpose_a}, {not s.transpose_b}, "
                             f"{tuple(layout.warps)}, {n}{', a_regs=True' if a.scope == 'fragment' else ''})"
                             f"  # T.gemm({s.a}, {s.b}, {s.c})")
            if layout.mma == "wgmma":
                self.proxy_fence |= bool({s.a, s.b} & written)

    def replicated_nest(self, loops, depth: int) -> None:
        """Every thread runs every iteration (the nest writes only replicated fragments and
        locals); small nests unroll so fragment indices are constants."""
        total = math.prod(int(lp.extent.value) for lp in loops)
        for lp in loops:
            start, stop = int(lp.start.value), int(lp.start.value + lp.extent.value)
            rng = "cutlass.range_constexpr" if total <= REPLICATED_UNROLL else "cutlass.range"
            self.line(depth, f"for {lp.var.name} in {rng}({start}, {stop}):")
            self.ranges[lp.var.name] = (start, stop - 1)
            depth += 1
        self.body(loops[-1].body, depth, guarded=True)

    def lanes(self, inner: N.For, width: int, depth: int) -> None:
        """The body for ``width`` consecutive iterations of ``inner`` per thread: vector
        loads into registers, the body once per lane, vector stores; a per-lane bounds-checked
        path where a vector may cross a tensor's end."""
        vec = vector_accesses(inner, self.buffers, self.layouts, width)
        conds = self.vector_bounds(inner, vec, width)
        if conds:
            self.line(depth, f"if {' and '.join(conds)}:")
            self.lanes_fast(inner, width, vec, depth + 1)
            self.line(depth, "else:")
            self.lanes_loop(inner, width, {}, depth + 1)
        else:
            self.lanes_fast(inner, width, vec, depth)

    def vector_bounds(self, inner: N.For, vec, width: int) -> list[str]:
        """Bounds conditions of the vector accesses at the first and the last lane."""
        j = inner.var.name
        conds = []
        # indices grow with the lane: lower bounds at the first lane, upper at the last
        for (name, indices) in vec:
            conds += self.access_predicate(name, indices, upper=width == 1)
        if width > 1:
            lo, hi = self.ranges[j]
            self.subst[j] = f"({j} + {width - 1})"
            self.ranges[j] = (lo + width - 1, hi)
            for (name, indices) in vec:
                conds += self.access_predicate(name, indices, lower=False)
            self.ranges[j] = (lo, hi)
            del self.subst[j]
        return list(dict.fromkeys(conds))

    def lanes_fast(self, inner: N.For, width: int, vec, depth: int) -> None:
        body = inner.body
        if inner.async_copy and vec:
            (st,) = body
            chunk = vec[(st.buffer, st.indices)]
            for c in range(0, width, chunk):
                src = self.vector_view(st.value.buffer, st.value.indices, chunk, c)
                dst = self.vector_view(st.buffer, st.indices, chunk, c)
                bits = chunk * DTYPES[self.buffers[st.buffer].dtype].bits
                self.line(depth, f"tcc.copy_async({src}, {dst}, {bits})")
            self.uses.add("copy")
            return
        temps = {}
        stores = []
        for key, chunk in vec.items():
            name, indices = key
            dtype = cute_type(self.buffers[name].dtype)
            tmp = self.fresh("vec")
            temps[key] = tmp
            self.line(depth, f"{tmp} = cute.make_rmem_tensor(({width},), {dtype})")
            if any(isinstance(s, N.Store) and (s.buffer, s.indices) == key for s in body):
                stores.append((key, chunk, tmp))
                continue
            for c in range(0, width, chunk):
                part = f"cute.make_tensor({tmp}.iterator + {c}, cute.make_layout({chunk}))" \
                    if chunk < width else tmp
                self.line(depth, f"{part}.store({self.vector_view(name, indices, chunk, c)}.load())")
        self.lanes_loop(inner, width, temps, depth)
        for key, chunk, tmp in stores:
            name, indices = key
            for c in range(0, width, chunk):
                part = f"cute.make_tensor({tmp}.iterator + {c}, cute.make_layout({chunk}))" \
                    if chunk < width else tmp
                self.line(depth, f"{self.vector_view(name, indices, chunk, c)}.store({part}.load())")

    def lanes_loop(self, inner: N.For, width: int, temps, depth: int) -> None:
        j = inner.var.name
        if width == 1:
            self.lane, self.vector = "0", temps
            self.body(inner.body, depth, guarded=True)
            self.lane, self.vector = None, {}
            return
        lane = self.fresh("lane")
        self.line(depth, f"for {lane} in cutlass.range_constexpr({width}):")
        self.subst[j] = f"({j} + {lane})"
        self.lane, self.vector = lane, temps
        self.body(inner.body, depth + 1, guarded=True)
        self.lane, self.vector = None, {}
        del self.subst[j]

    def vector_view(self, buffer: str, indices, width: int, extra: int = 0) -> str:
        """A ``width``-element tensor over ``buffer[indices...]`` (+ ``extra`` elements):
        contiguous, and aligned to its size."""
        buf = self.buffers[buffer]
        layout = self.layouts.get(buffer)
        if buf.scope == "shared" and layout is not None and layout.kind == "tma_swizzled":
            last = indices[-1] if not extra else N.binop("add", indices[-1], N.Const(extra, "int32"))
            offset = self.shared_index(buf, tuple(indices[:-1]) + (last,))
            return (f"cute.make_tensor({buffer}.iterator + cute.assume({offset}, divby={width}), "
                    f"cute.make_layout({width}))")
        strides = row_major_strides(buf)
        terms = []
        for idx, stride in zip(indices, strides):
            if isinstance(stride, N.Const) and stride.value == 1:
                terms.append(self.expr(idx))
            else:
                terms.append(f"{self.operand(idx, PREC['mul'])} * {self.operand(stride, PREC['mul'] + 1)}")
        if extra:
            terms.append(str(extra))
        offset = " + ".join(terms)
        return (f"cute.make_tensor({buffer}.iterator + cute.assume({offset}, divby={width}), "
                f"cute.make_layout({width}))")

    # ---- tile statements -----------------------------------------------------------------
    def reduce(self, s: N.Reduce, depth: int) -> None:
        """Each thread combines its own registers of every row, then a warp shuffle
        all-reduce, then (several warps) a shared-memory exchange; the result lands in every
        thread's copy of the replicated ``dst``."""
        src, dst = self.buffers[s.src], self.buffers[s.dst]
        threads = self.layouts[s.src].threads
        row = int(src.shape[-1].value)
        rows = math.prod(int(d.value) for d in src.shape[:-1])
        per_row = row // threads  # registers of a row in each thread
        op = {"sum": "sum", "abssum": "sum", "max": "max", "absmax": "max", "min": "min"}[s.kind]
        take = (lambda x: f"cute.math.absf({x})") if s.kind.startswith("abs") and N.is_float(src.dtype) \
            else (lambda x: f"abs({x})") if s.kind.startswith("abs") else (lambda x: x)
        red, r, q = self.fresh("red"), self.fresh("r"), self.fresh("q")
        acc = self.fresh("acc")
        self.line(depth, f"{red} = cute.make_rmem_tensor(({rows},), {cute_type(src.dtype)})")
        self.line(depth, f"for {r} in cutlass.range_constexpr({rows}):")
        self.line(depth + 1, f"{acc} = {take(f'{s.src}[{r} * {per_row}]')}")
        if per_row > 1:
            self.line(depth + 1, f"for {q} in cutlass.range_constexpr(1, {per_row}):")
            self.line(depth + 2, f'{acc} = tcr.combine({acc}, {take(f"{s.src}[{r} * {per_row} + {q}]")}, "{op}")')
        warp = min(threads, 32)
        self.line(depth + 1, f'{red}[{r}] = tcr.warp_allreduce({acc}, "{op}", {warp})')
        if threads > 32:
            warps = threads // 32
            named = f", {self.scope.num_threads}" if self.scope.producer_threads else ""
            self.line(depth, f'tcr.block_allreduce({red}, "{op}", {s.scratch}, {warps}, {warps}{named})')
        self.line(depth, f"for {r} in cutlass.range_constexpr({rows}):")
        value = f"{red}[{r}]"
        if not s.clear:
            value = f'tcr.combine({s.dst}[{r}], {value}, "{op}")'
        if dst.dtype != src.dtype:
            value = f"{cute_type(dst.dtype)}({value})"
        self.line(depth + 1, f"{s.dst}[{r}] = {value}")
        self.uses.add("reduce")

    def atomic_add(self, s: N.AtomicAdd, depth: int, guarded: bool) -> None:
        buf = self.buffers[s.dst.buffer]
        if buf.scope not in ("global", "shared"):
            self.fail(s, f"T.atomic_add into '{buf.name}': atomics target global or shared memory")
        value = self.expr(N.cast(s.value, buf.dtype))
        if buf.scope == "shared":
            coord = self.shared_index(buf, s.dst.starts)
        else:
            coord = f"({self.index_tuple(s.dst.starts)},)" if len(s.dst.starts) == 1 \
                else f"({self.index_tuple(s.dst.starts)})"
        text = f"tca.atomic_add({buf.name}, {coord}, {value})"
        conds = []
        if guarded:
            conds = list(dict.fromkeys(self.access_predicate(buf.name, s.dst.starts)
                                       + self.access_conds(list(_loads(s.value)) + list(_loads(s.dst.starts)))))
        if conds:
            self.line(depth, f"if {' and '.join(conds)}:")
            self.line(depth + 1, text)
        else:
            self.line(depth, text)
        self.uses.add("atomic")

    # ---- TMA ------------------------------------------------------------------------------
    def shared_ptr(self, name: str, stage: str | None = None) -> str:
        """The Int8 shared-memory pointer to buffer ``name`` (stage ``stage`` of a staged
        buffer)."""
        off = self.smem_offsets[name]
        if stage is None:
            stage = self.stage_of.get(name)
        if name not in self.staged or stage is None:
            return f"tc_smem + {off}"
        a = self.staged[name]
        # assume: keeps the pointer's alignment (vector and TMA accesses need it)
        return (f"tc_smem + cute.assume({off} + ({stage}) * {shared_stride(a)}, "
                f"divby={shared_align(a)})")

    def shared_view(self, a: N.Allocate, stage: str | None = None) -> str:
        b = a.buffer
        n = math.prod(int(d.value) for d in b.shape)
        return (f"cute.make_tensor(cute.recast_ptr({self.shared_ptr(b.name, stage)}, "
                f"dtype={cute_type(b.dtype)}), cute.make_layout({n}))")

    def barrier_ref(self, r: N.Region) -> str:
        idx = r.starts[0]
        if isinstance(idx, N.Const) and idx.value == 0:
            return r.buffer
        return f"{r.buffer} + {self.operand(idx, PREC['add'] + 1)}"

    def tma_copy(self, s: N.TmaCopy, depth: int) -> None:
        self.uses.add("tma")
        params = {p.name: p for p in self.plan.abi.kernels[self.index].params}
        desc = params.get(s.desc)
        if desc is None:
            self.fail(s, "internal: T.tma_copy without a descriptor (the TMA pass assigns one)")
        load = s.barrier is not None
        glob, shared = (s.src, s.dst) if load else (s.dst, s.src)
        coords = ", ".join(self.expr(x) for x in reversed(glob.starts))
        coords = f"({coords},)" if len(glob.starts) == 1 else f"({coords})"
        stage = None if s.stage is None else self.expr(s.stage)
        smem = self.shared_ptr(shared.buffer, stage)
        box = "x".join(map(str, desc.tma.box))
        chunk_bytes = desc.tma.box_bytes(desc.dtype)
        chunks = int(self.buffers[shared.buffer].shape[-1].value) // desc.tma.box[-1]
        what = f"a {box} box" if chunks == 1 else f"{chunks} {box} boxes"
        more = f", chunks={chunks}, step={desc.tma.box[-1]}, chunk_bytes={chunk_bytes}" \
            if chunks > 1 else ""
        if load:
            call = (f"tct.load({s.desc}, {smem}, {self.barrier_ref(s.barrier)}, "
                    f"{coords}, {chunk_bytes * chunks}{more})")
            if self.one_thread:  # already inside `if tc_tid == <one thread>:`
                self.line(depth, f"{call}  # TMA load of {what} of {glob.buffer}")
            else:
                self.line(depth, f"if tc_tid == 0:  # TMA load of {what} of {glob.buffer}")
                self.line(depth + 1, call)
        else:
            self.line(depth, f"tct.store_fence()  # TMA store of {what} of {glob.buffer}")
            self.line(depth, self.sync())
            self.line(depth, "if tc_tid == 0:")
            self.line(depth + 1, f"tct.store({s.desc}, {smem}, {coords}{more})")

    def barrier(self, s: N.Barrier, depth: int) -> None:
        if s.wait_async:
            self.line(depth, "cute.arch.cp_async_wait_group(0)")
        if self.proxy_fence:  # shared writes become visible to wgmma's (async proxy) reads
            self.line(depth, 'cute.arch.fence_proxy("async.shared", space="cta")')
        self.line(depth, self.sync())

    # ---- the kernel ----------------------------------------------------------------------
    def emit(self) -> list[str]:
        plan, k = self.plan, self.scope
        params = [f"{p.name}: {_param_type(p)}" for p in plan.abi.kernels[self.index].params]
        if any(p.kind == "tma_desc" for p in plan.abi.kernels[self.index].params):
            self.uses.add("tma")
        self.line(0, "@cute.kernel")
        self.line(0, f"def {self.name}({', '.join(params)}):")
        bvars = [v.name for v in k.block_vars] + ["_"] * (3 - len(k.block_vars))
        self.line(1, f"{', '.join(bvars)} = cute.arch.block_idx()")
        self.line(1, "tc_tx, tc_ty, tc_tz = cute.arch.thread_idx()")
        tx, ty = (k.threads + (1, 1))[:2]
        tid = "tc_tx"
        if len(k.threads) > 1:
            tid += f" + tc_ty * {tx}"
        if len(k.threads) > 2:
            tid += f" + tc_tz * {tx * ty}"
        self.line(1, f"tc_tid = {tid}")
        for d, t in enumerate(k.threads):
            self.ranges[f"thread_idx{d}"] = (0, t - 1 + (k.producer_threads if d == 0 else 0))
        for v, g in zip(k.block_vars, k.grid):
            hi = g.value - 1 if isinstance(g, N.Const) else None
            self.ranges[v.name] = (0, hi)
            if isinstance(g, N.Var):
                self.grid_bound[v.name] = g.name
        offsets, total = shared_offsets(k)
        self.smem_offsets = offsets
        if offsets:
            allocs = shared_allocs(k)
            align = max(shared_align(a) for a in allocs)
            self.line(1, f"tc_smem = cute.arch.get_dyn_smem(cutlass.Int8, alignment={align})"
                         f"  # {total} bytes")
            barriers = []
            for a in allocs:
                b = a.buffer
                if a.layout is not None and a.layout.kind == "mbarrier":
                    barriers.append(a)
                    self.line(1, f"{b.name} = cute.recast_ptr(tc_smem + {offsets[b.name]}, "
                                 f"dtype=cutlass.Int64)  # {int(b.shape[0].value)} mbarrier(s)")
                elif a.stages > 1:
                    self.staged[b.name] = a
                    self.line(1, f"# {b.name}: {a.stages} stages of {math.prod(int(d.value) for d in b.shape)} "
                                 f"{b.dtype} from byte {offsets[b.name]}, {shared_stride(a)} apart")
                else:
                    self.line(1, f"{b.name} = {self.shared_view(a)}")
            if barriers:
                self.uses.add("tma")
                self.line(1, "if tc_tid == 0:")
                for a in barriers:
                    self.line(2, f"tct.init_barriers({a.buffer.name}, {int(a.buffer.shape[0].value)}, "
                                 f"{a.layout.threads})")
                self.line(1, "cute.arch.sync_threads()")
        used = _used_buffers(k.body)
        for p in plan.tensor_params:
            if p.name not in used:
                continue
            shape = ", ".join(self.expr(d) for d in p.shape)
            strides = ", ".join(self.expr(d) for d in row_major_strides(p))
            self.line(1, f"{p.name} = cute.make_tensor({p.name}_ptr, "
                         f"cute.make_layout(({shape},), stride=({strides},)))")
        self.declare_gemms(k.body, 1)
        self.body(k.body, 1)
        return self.lines


def _param_type(p) -> str:
    if p.kind == "pointer":
        return "cute.Pointer"
    if p.kind == "tma_desc":
        return "tct.Desc"
    return cute_type(p.dtype)


def _mma_type(dtype: str) -> str:
    """The CuTe type of a T.gemm operand: float32 operands multiply as tf32."""
    return "cutlass.TFloat32" if dtype == "float32" else cute_type(dtype)


def _one_thread(e) -> int | None:
    """The thread ``t`` if ``e`` is the condition ``thread_idx(0) == t``."""
    if isinstance(e, N.Cmp) and e.op == "eq" and isinstance(e.a, N.Call) and \
            e.a.name == "thread_idx" and e.a.args == (N.Const(0, "int32"),) and \
            isinstance(e.b, N.Const):
        return int(e.b.value)
    return None


def _has_parallel(body) -> bool:
    for s in body:
        if isinstance(s, N.For):
            if s.kind == "parallel" or _has_parallel(s.body):
                return True
        elif isinstance(s, N.If) and (_has_parallel(s.then) or _has_parallel(s.orelse)):
            return True
    return False


def _used_buffers(body) -> set[str]:
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


def emit_cute(plan: KernelPlan) -> str:
    """The CuTe DSL source of ``plan``."""
    f, abi = plan.func, plan.abi
    out = [
        f"# Generated by tilecute {__version__} from prim_func '{f.name}'"
        + (f" ({f.loc})" if f.loc else "") + ".",
        f"# {len(f.kernels)} @cute.kernel function(s) and the @cute.jit wrapper `{f.name}` that",
        "# launches them in order.  Kernel parameters follow the launch ABI (abi.json).",
        "import cutlass",
        "import cutlass.cute as cute",
        "",
    ]
    kernels, uses = [], set()
    for i in range(len(f.kernels)):
        emitter = _KernelEmitter(plan, i)
        kernels.append(emitter.emit())
        uses |= emitter.uses
    out += [HELPERS[u] for u in sorted(uses)]
    for i in range(len(f.kernels)):
        out += ["", *kernels[i], "",
                f'{plan.kernel_names[i]}.set_name_prefix("{plan.name_prefixes[i]}", '
                "remove_cutlass_symbol=True, keep_mangled_name=False)", ""]
    params = [p for p in abi.kernels[0].params if p.kind != "tma_desc"]  # common to all kernels
    sig = ", ".join(f"{p.name}: {_param_type(p)}" for p in params)
    out += ["", "@cute.jit", f"def {f.name}({sig}):"]
    emitter = _KernelEmitter(plan, 0)
    pointer_of = {p.source: p.name for p in params if p.kind == "pointer"}
    for i, (k, launch) in enumerate(zip(f.kernels, abi.kernels)):
        names = []
        for p in launch.params:
            if p.kind == "tma_desc":
                # a stand-in of the right type: the launcher passes the real descriptor
                out.append(f"    {p.name} = tct.placeholder({pointer_of[p.source]}, "
                           f"{cute_type(p.dtype)}, {tuple(p.tma.box)}, {p.tma.swizzle})")
            names.append(p.name)
        names = ", ".join(names)
        grid = [emitter.expr(g) for g in k.grid] + ["1"] * (3 - len(k.grid))
        extra = f", cluster=[{', '.join(map(str, launch.cluster))}]" if launch.cluster else ""
        if launch.dynamic_smem:
            extra += f", smem={launch.dynamic_smem}"
        if k.producer_threads:  # one block per SM: setmaxnreg shares the SM's registers
            extra += ", min_blocks_per_mp=1"
        out.append(f"    {plan.kernel_names[i]}({names}).launch(grid=[{', '.join(grid)}], "
                   f"block=[{', '.join(map(str, launch.block))}]{extra})")
    align = {a.name: a.align for a in abi.args if a.kind == "tensor"}
    out += ["", "", "def placeholder_args():",
            '    """Compile-time stand-ins for the wrapper\'s parameters, in order."""',
            "    return ("]
    for p in params:
        if p.kind == "pointer":
            out.append(f"        cute.runtime.make_ptr({cute_type(p.dtype)}, 0, "
                       f"cute.AddressSpace.gmem, assumed_align={max(align[p.source], DTYPES[p.dtype].bytes)}),")
        else:
            out.append(f"        {cute_type(p.dtype)}(0),")
    out.append("    )")
    return "\n".join(out) + "\n"
