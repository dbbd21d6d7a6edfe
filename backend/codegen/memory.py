"""Memory as CuTe DSL source text: the kernel's dynamic shared memory carved into its
buffers (stages of multi-buffered ones included) where the shared-memory pass placed them
(``Allocate.slot``, ``KernelScope.shared_bytes``), element offsets in row-major and
swizzled layouts, and the aligned vector views that 128-bit accesses and cp.async use.
Imports no CUTLASS.
"""

from __future__ import annotations

import math
from contextlib import contextmanager

from ..ir import nodes as N
from ..runtime.dtypes import DTYPES, storage_bytes
from ..ir.visitor import fold_constants, walk_stmts
from ..transform.analysis import known_multiple, launch_sized, row_major_strides
from ..transform.shared_memory import shared_allocs
from .expr import PREC, ExprPrinter, memory_type
from .source import CodegenError, Writer, ident

TMA_SWIZZLE_MASK = {32: 0x10, 64: 0x30, 128: 0x70}  # byte bits that TMA's swizzle XORs in


def elements(buf: N.Buffer) -> int:
    return math.prod(int(d.value) for d in buf.shape)


def memory_elements(buf: N.Buffer) -> int:
    """Elements of ``buf``'s tensor in shared memory: its elements, or for a sub-byte
    dtype (two float4_e2m1fn a byte) its bytes."""
    n = elements(buf)
    return storage_bytes(buf.dtype, n) if DTYPES[buf.dtype].pack > 1 else n


# ---- element offsets ----------------------------------------------------------------------
def flat_index(exprs: ExprPrinter, buf: N.Buffer, indices) -> str:
    """The row-major element offset of ``buf[indices]`` (static shape)."""
    terms = []
    for idx, stride in zip(indices, row_major_strides(buf)):
        if isinstance(stride, N.Const) and stride.value == 1:
            terms.append(exprs.operand(idx, PREC["add"]))
        elif isinstance(stride, N.Const):
            terms.append(f"{exprs.operand(idx, PREC['mul'])} * {int(stride.value)}")
        else:  # a shared buffer sized at launch: a stride of its run-time dims
            terms.append(f"{exprs.operand(idx, PREC['mul'])} * "
                         f"{exprs.operand(stride, PREC['mul'])}")
    return " + ".join(terms)


def shared_index(exprs: ExprPrinter, buf: N.Buffer, layout: N.Layout | None, indices) -> str:
    """The element offset of ``buf[indices]`` in a shared buffer of ``layout``."""
    if layout is not None and layout.kind == "tma_swizzled":
        # TMA's pattern on byte offsets: b ^ ((b >> 3) & mask); in elements of b bits that
        # is e ^ ((e >> 3) & (mask * 8 / b)) (exact: the masks' low 4 bits are 0; two int4
        # elements a byte: mask << 1)
        bits = DTYPES[buf.dtype].bits
        mask = TMA_SWIZZLE_MASK[layout.swizzle] * 8 // bits
        width = layout.swizzle * 8 // bits
        cols = int(buf.shape[-1].value)
        if cols <= width or layout.flat:  # (one chunk a row, or no chunks: the flat index)
            e = flat_index(exprs, buf, indices)
        else:  # the matrix, chunk c // width of the last dim, then the row, then c % width
            rows = int(buf.shape[-2].value) if buf.ndim > 1 else 1
            row = exprs.operand(indices[-2], PREC["add"]) if buf.ndim > 1 else "0"
            c = exprs.operand(indices[-1], PREC["shr"] + 1)
            e = (f"({c} >> {width.bit_length() - 1}) * {rows * width} + "
                 f"({row}) * {width} + ({c} & {width - 1})")
            if buf.ndim > 2:
                matrix = flat_index(exprs, N.Buffer(buf.name, buf.dtype, buf.shape[:-2]), indices[:-2])
                e = f"({matrix}) * {rows * cols} + {e}"
        return f"({e}) ^ ((({e}) >> 3) & {mask})"
    if layout is None or layout.kind != "swizzled":
        return flat_index(exprs, buf, indices)
    # column c of row r is stored at c ^ (r % swizzle)
    r, c = indices[-2], indices[-1]
    rows, cols = int(buf.shape[-2].value), int(buf.shape[-1].value)
    lead = flat_index(exprs, N.Buffer(buf.name, buf.dtype, buf.shape[:-2]), indices[:-2]) \
        if buf.ndim > 2 else None
    rt, ct = exprs.operand(r, PREC["bitand"] + 1), exprs.operand(c, PREC["bitxor"] + 1)
    text = f"{exprs.operand(r, PREC['mul'])} * {cols} + ({ct} ^ ({rt} & {layout.swizzle - 1}))"
    if lead:
        text = f"({lead}) * {rows * cols} + {text}"
    return text


def vector_view(exprs: ExprPrinter, buf: N.Buffer, layout: N.Layout | None, indices,
                width: int, extra: int = 0, wide: bool = False) -> str:
    """A ``width``-element tensor over ``buf[indices...]`` (+ ``extra`` elements):
    contiguous, and aligned to its size; ``wide``: 64-bit offsets (the index-width pass)."""
    if buf.scope == "shared" and layout is not None and layout.kind == "tma_swizzled":
        last = indices[-1] if not extra else N.binop("add", indices[-1], N.Const(extra, "int32"))
        offset = shared_index(exprs, buf, layout, tuple(indices[:-1]) + (last,))
    else:
        terms = []
        for idx, stride in zip(indices, row_major_strides(buf, wide)):
            if wide:  # an index past int32 computed in int64 (TileLang's index legalization)
                idx = exprs.wide_index(idx)
            # (a constant stride is a Python int: its product with an Int64 is one)
            st = str(int(stride.value)) if isinstance(stride, N.Const) else \
                exprs.operand(stride, PREC['mul'] + 1)
            if isinstance(stride, N.Const) and stride.value == 1:
                terms.append(exprs.expr(idx))
            elif wide and idx.dtype == "int64":
                terms.append(f"{exprs.operand(idx, PREC['mul'])} * {st}")
            elif wide:
                terms.append(f"cutlass.Int64({exprs.expr(idx)}) * {st}")
            else:
                terms.append(f"{exprs.operand(idx, PREC['mul'])} * {exprs.operand(stride, PREC['mul'] + 1)}")
        if extra:
            terms.append(str(extra))
        offset = " + ".join(terms)
    pack = DTYPES[buf.dtype].pack
    if pack > 1:  # a sub-byte tensor is its bytes: `width` elements are width // pack of them
        offset, width = f"({offset}) // {pack}", width // pack
    return (f"cute.make_tensor({ident(buf.name)}.iterator + cute.assume({offset}, divby={width}), "
            f"cute.make_layout({width}))")


# ---- dynamic shared memory ---------------------------------------------------------------
class SharedMemory:
    """The kernel's shared buffers in its dynamic shared memory ``tc_smem``: their slots,
    which are multi-buffered, and which stage a pipelined loop body sees."""

    def __init__(self, scope: N.KernelScope, out: Writer):
        self.out = out
        # fence.mbarrier_init after the init (sm_90+; before it the block barrier is all,
        # as in TileLang's sm_80 code): KernelEmitter sets it from the target
        self.init_fence = True
        # blocks of a cluster multicast into each other's stages and arrive on each other's
        # mbarriers (the multicast pass, T.mbarrier_arrive(bar, cta_id)): the barriers'
        # init is synced cluster-wide
        self.cluster_barriers = any(isinstance(s, N.TmaCopy) and s.multicast or
                                    isinstance(s, N.MBarrierArrive) and s.block is not None or
                                    isinstance(s, N.ClusterCopy) and s.barrier is not None
                                    for s in walk_stmts(scope.body))
        self.allocs = shared_allocs(scope)
        self.total = scope.shared_bytes
        self.slots: dict[str, N.SharedSlot] = {a.buffer.name: a.slot for a in self.allocs}
        unplaced = [name for name, slot in self.slots.items() if slot is None]
        if unplaced:
            raise CodegenError(f"internal: shared buffers {unplaced} have no slot (the "
                               "shared-memory pass places them)")
        self.staged: dict[str, N.Allocate] = {}  # multi-buffered shared buffers
        self.stage_of: dict[str, str] = {}  # staged buffer -> the stage the loop body sees

    def carve(self, depth: int) -> None:
        """Declare every shared buffer at its offset (staged ones get views per loop
        iteration) and initialize the mbarriers."""
        if not self.slots:
            return
        out = self.out
        align = max(a.slot.align for a in self.allocs)
        launch = ", ".join(f"'{a.buffer.name}'" for a in self.allocs if launch_sized(a.buffer))
        out.line(depth, f"tc_smem = cute.arch.get_dyn_smem(cutlass.Int8, alignment={align})",
                 f"{self.total} bytes" + (f", then {launch} sized at launch" if launch else ""))
        barriers = []
        for a in self.allocs:
            b = a.buffer
            if a.layout is not None and a.layout.kind == "mbarrier":
                barriers.append(a)
                out.line(depth, f"{ident(b.name)} = cute.recast_ptr(tc_smem + {a.slot.offset}, "
                                "dtype=cutlass.Int64)", f"{int(b.shape[0].value)} mbarrier(s)")
            elif a.stages > 1:
                self.staged[b.name] = a
                out.comment(depth, f"{b.name}: {a.stages} stages of {elements(b)} "
                                   f"{b.dtype} from byte {a.slot.offset}, {a.slot.stride} apart")
            else:
                out.line(depth, f"{ident(b.name)} = {self.view(a)}")
        if barriers:
            out.use("tma")
            out.line(depth, "if tc_tid == 0:")
            for a in barriers:
                out.line(depth + 1, f"tct.init_barriers({ident(a.buffer.name)}, {int(a.buffer.shape[0].value)}, "
                                    f"{a.layout.threads}{'' if self.init_fence else ', fence=False'})")
            if self.cluster_barriers:
                out.line(depth, "tct.cluster_sync()", "the cluster's blocks see each other's "
                                                      "barriers initialized")
            else:
                out.line(depth, "cute.arch.sync_threads()")

    def ptr(self, name: str, stage: str | None = None, matrix: tuple[str, int] | None = None,
            offset: tuple[str, int] | None = None) -> str:
        """The Int8 shared-memory pointer to buffer ``name`` (stage ``stage`` of a staged
        buffer; by default the stage the enclosing pipelined loop sees), or with ``matrix``
        (``(index, bytes)``) to matrix ``index`` of its matrices of ``bytes`` bytes each;
        ``offset``: ``(bytes, a number they are a multiple of)`` further on (a part of a
        matrix)."""
        slot = self.slots[name]
        if stage is None:
            stage = self.stage_of.get(name)
        terms, align = [str(slot.offset)], slot.align
        if slot.launch_offset is not None:  # past the shared buffers sized at launch before it
            terms.append(self.exprs.operand(slot.launch_offset, PREC["add"]))
        if name in self.staged and stage is not None and stage.isdigit():
            terms[0] = str(slot.offset + int(stage) * slot.stride)
        elif name in self.staged and stage is not None:
            terms.append(f"({stage}) * {slot.stride}")
        if matrix is not None:
            index, size = matrix
            if index.isdigit():  # a constant matrix: a constant offset
                terms[0] = str(int(terms[0]) + int(index) * size)
            else:
                terms.append(f"({index}) * {size}")
                align = math.gcd(align, size)
        if offset is not None:
            at, multiple = offset
            if at.isdigit():
                terms[0] = str(int(terms[0]) + int(at))
            else:
                terms.append(f"({at})")
                align = math.gcd(align, multiple)
        if len(terms) == 1:
            return f"tc_smem + {terms[0]}"
        # assume: keeps the pointer's alignment (vector and TMA accesses need it)
        return f"tc_smem + cute.assume({' + '.join(terms)}, divby={align})"

    def matrix_ptr(self, exprs: ExprPrinter, buf: N.Buffer, index, stage: str | None = None,
                   offset: N.Expr | None = None) -> str:
        """The pointer to matrix ``buf[*index, :, :]`` of a shared buffer of more than 2
        dims (the whole buffer for ``index == ()``): the matrices of the last two dims lie
        one after another in every shared layout; ``offset`` bytes further on (an integer
        expression) when given."""
        if offset is not None:
            folded = fold_constants(offset)
            at = str(int(folded.value)) if isinstance(folded, N.Const) else exprs.expr(folded)
            offset = (at, max(1, known_multiple(folded)))
        if not index:
            return self.ptr(buf.name, stage, offset=offset)
        lead = N.Buffer(buf.name, buf.dtype, buf.shape[:-2])
        size = storage_bytes(buf.dtype, math.prod(int(d.value) for d in buf.shape[-2:]))
        if all(isinstance(i, N.Const) for i in index):
            at = str(sum(int(i.value) * int(st.value)
                         for i, st in zip(index, row_major_strides(lead))))
        else:
            at = flat_index(exprs, lead, index)
        return self.ptr(buf.name, stage, (at, size), offset)

    def view(self, a: N.Allocate, stage: str | None = None) -> str:
        b = a.buffer
        count = memory_elements(b) if not launch_sized(b) else self.launch_count(b)
        return (f"cute.make_tensor(cute.recast_ptr({self.ptr(b.name, stage)}, "
                f"dtype={memory_type(b.dtype)}), cute.make_layout({count}))")

    def launch_count(self, b: N.Buffer) -> str:
        """The elements (bytes, for a sub-byte dtype) of a shared buffer sized at launch,
        as an expression of the kernel's symbol and scalar parameters."""
        count = b.shape[0]
        for d in b.shape[1:]:
            count = N.binop("mul", count, d)
        if DTYPES[b.dtype].pack > 1:
            count = N.ceildiv(count, N.Const(DTYPES[b.dtype].pack, count.dtype))
        return self.exprs.expr(fold_constants(count))

    @contextmanager
    def pipelined(self, stages: int, step: str, indexed: set[str], operands: set[str], depth: int):
        """Inside a pipelined loop of ``stages`` whose step since its start is ``step``:
        each staged buffer the body touches is its stage ``step % stages``; buffers the
        body indexes get a tensor view of it."""
        views = []
        for name, a in self.staged.items():
            if (name in indexed or name in operands) and a.stages == stages:
                views.append(name)
                stage = f"{step} % {stages}"
                self.stage_of[name] = stage
                if name in indexed:  # (T.gemm takes the pointer itself)
                    self.out.line(depth, f"{ident(name)} = {self.view(a, stage)}", "the stage this iteration reads")
        try:
            yield
        finally:
            for name in views:
                del self.stage_of[name]
