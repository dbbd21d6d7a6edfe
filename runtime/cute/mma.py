"""Matrix multiply for generated kernels: ``T.gemm`` and its accumulators.

Two tensor-core instruction families, both through CuTe's tiled MMAs, accumulating in
float32, float16 or (int8 operands) int32 registers:

* ``wgmma`` (sm_90a): warpgroup MMA reading A and B straight from shared memory through
  matrix descriptors; one warpgroup (128 threads) per 64 rows of the tile.
* ``mma`` (sm_80+): warp ``mma.sync`` with ``ldmatrix`` (16-bit types, and 8-bit integers
  read as 16-bit pairs along K: :class:`Int8WarpMma`) or plain shared loads (tf32) into
  registers; warps arranged ``(warps_m, warps_n)`` over the tile.

and the SIMT fallback (:func:`gemm_simt`) for what no tensor-core MMA serves: scalar
multiply-adds on the CUDA cores into a fragment of the layout pass's blocked (or
replicated) layout, from :func:`simt_operand` views of row-major shared operands.

Shared operands are tilecute's ``tma_swizzled`` buffers: row-major ``(rows, cols)`` with
the last dim cut into chunks of ``swizzle`` bytes, chunk after chunk, each chunk a
``(rows, swizzle bytes)`` block with TMA's XOR pattern (what TMA writes for a box whose
inner dim is ``swizzle`` bytes, one box per chunk).  :func:`operand` views one as the
``(MN, K)`` tensor the MMA wants; a buffer whose last dim is K is K-major, one whose last
dim is M (or N) is MN-major.

Accumulators: :func:`accumulator` gives the registers of a ``(M, N)`` fragment and the
``(i, j)`` coordinate of each register, so an elementwise loop over the fragment is::

    acc, tc_acc_ij = tcm.accumulator("wgmma", (2, 1), (128, 128), cutlass.Float32, tc_tid)
    for r in cutlass.range(0, cute.size(acc), 2, unroll_full=True):  # register pairs
        i, j = tc_acc_ij[r]
        ...

:func:`a_fragment` does the same for an A operand read from registers (wgmma's RS form);
register ``r`` holds the same ``(i, j)`` there as in an accumulator with K columns.

The register layout depends only on the family, the warp arrangement and the tile, so a
fragment shares it with every ``T.gemm`` that accumulates into it.
"""

import cutlass
import cutlass.cute as cute
from cutlass._mlir.dialects import llvm as _llvm
from cutlass.cute.nvgpu import OperandMajorMode, warp, warpgroup

WARPGROUP = 128


def _major(mn_major: bool):
    return OperandMajorMode.MN if mn_major else OperandMajorMode.K


def _outer(rows: int, cols: int, width: int, mn_major: bool, chunk_rows: int = 0):
    """The unswizzled ``(MN, K)`` layout of a ``(rows, cols)`` chunked buffer, in
    elements (``width`` elements per chunk row); rows come in groups of 8, the unit of
    the swizzle pattern and of the MMA descriptors.  ``chunk_rows``: the rows of each
    chunk when the view is part of a taller matrix (its chunks lie that far apart)."""
    chunked = ((width, cols // width), (1, (chunk_rows or rows) * width))  # chunk after chunk
    grouped = ((8, rows // 8), (width, 8 * width))  # the first dim, in groups of 8 rows
    if mn_major:  # buffer (K, MN): MN is the chunked last dim
        return cute.make_layout((chunked[0], grouped[0]), stride=(chunked[1], grouped[1]))
    return cute.make_layout((grouped[0], chunked[0]), stride=(grouped[1], chunked[1]))


def _swizzle_bits(swizzle: int) -> int:
    return {32: 1, 64: 2, 128: 3}[swizzle]


def operand(smem, dtype, rows: int, cols: int, swizzle: int, mn_major: bool, family: str,
            chunk_rows: int = 0):
    """The ``(MN, K)`` view of the ``(rows, cols)`` ``tma_swizzled`` shared buffer at the
    byte pointer ``smem``.  wgmma takes the swizzle on the pointer (in bytes); the warp
    family on the layout (in elements).

    A part of a ``(chunk_rows, C)`` matrix (TileLang's ``Q_s[:, 256:512]``, a K range):
    ``smem`` points at its first element, ``c0 * chunk_rows + r0 * width`` elements into
    the matrix for a part from row ``r0`` (a multiple of 8) and column ``c0`` (a multiple of
    the ``width`` elements of a chunk), ``rows x cols`` whole chunks and 8-row groups; the
    offset is a multiple of the swizzle pattern's period, so the part keeps its pattern.

    An 8-bit integer operand of mma.sync (K-major: the tensor cores read 8-bit operands
    so only) is viewed as ``(MN, K / 2)`` 16-bit elements, each two bytes adjacent along K
    (:class:`Int8WarpMma`); the swizzle moves 16-byte units either way, so the bytes are
    where TMA or a copy put them.  ``family="simt"``: the scalar view, swizzled as the warp
    family's (the SIMT fallback reads a buffer a tensor-core T.gemm swizzled)."""
    if family == "mma" and dtype.width in (4, 8):  # int8 / int4 mma.sync: 16-bit units along K
        dtype, cols = _PAIR, cols * dtype.width // 16
    esize = dtype.width // 8
    outer = _outer(rows, cols, swizzle // esize, mn_major, chunk_rows)
    bits = _swizzle_bits(swizzle)
    if family == "wgmma":
        ptr = cute.recast_ptr(smem, cute.make_swizzle(bits, 4, 3), dtype=dtype)
        return cute.make_tensor(ptr, outer)
    shift = 4 - (esize.bit_length() - 1)  # 16-byte units, in elements
    layout = cute.make_composed_layout(cute.make_swizzle(bits, shift, 3), 0, outer)
    return cute.make_tensor(cute.recast_ptr(smem, dtype=dtype), layout)


def wgmma_instruction_n(n: int) -> int:
    """The N of the wgmma instruction for a warpgroup's ``n`` columns: ``n`` itself up to
    256, else the widest N up to 256 that divides it, issued ``n / N`` times along N (as
    CUTLASS's op selectors, which TileLang's wgmma takes); a multiple of 16 where ``n`` is
    one (int8 wgmma takes no other widths above 24).  It depends on ``n`` only: an
    accumulator's register layout (:func:`accumulator`) is the same for every operand
    dtype."""
    if n <= 256:
        return n
    return next(w for w in range(256, 7, -8) if n % w == 0 and (w % 16 == 0 or n % 16))


def tiled_mma(family: str, a_dtype, b_dtype, acc_dtype, a_mn_major: bool, b_mn_major: bool,
              warps: tuple, n: int, a_regs: bool = False):
    """The tiled MMA of one ``T.gemm`` with an ``n``-column tile: ``warps = (along M,
    along N)`` in warpgroups for wgmma (each warpgroup a 64 x ``n / warps[1]`` part, in
    instructions of up to 256 columns: :func:`wgmma_instruction_n`; ``a_regs``: A from
    registers, the RS form), in warps for mma.sync (8-bit integer operands: an
    :class:`Int8WarpMma`)."""
    if family == "wgmma":
        n = wgmma_instruction_n(n // warps[1])
        if a_dtype.width == 16:
            source = warpgroup.OperandSource.RMEM if a_regs else warpgroup.OperandSource.SMEM
            op = warpgroup.MmaF16BF16Op(a_dtype, acc_dtype, (64, n, 16), source,
                                        _major(a_mn_major), _major(b_mn_major))
        elif a_dtype in (cutlass.Int8, cutlass.Uint8):
            op = warpgroup.MmaI8Op(a_dtype, b_dtype, acc_dtype, (64, n, 32),
                                   warpgroup.OperandSource.SMEM, _major(a_mn_major),
                                   _major(b_mn_major))
        else:
            op = warpgroup.MmaF8Op(a_dtype, b_dtype, acc_dtype, (64, n, 32),
                                   warpgroup.OperandSource.SMEM, _major(a_mn_major),
                                   _major(b_mn_major))
        return cute.make_tiled_mma(cute.make_mma_atom(op), (warps[0], warps[1], 1))
    if a_dtype.width in (4, 8):  # m16n8k32 s8/u8, m16n8k64 s4: the f16 m16n8k16 partition
        tiled = tiled_mma(family, _PAIR, _PAIR, cutlass.Float32, a_mn_major, b_mn_major,
                          warps, n)
        return Int8WarpMma(tiled, a_dtype, b_dtype)
    if a_dtype.width == 32:
        op, shape = warp.MmaTF32Op((16, 8, 8)), (16, 8, 8)
    else:
        op, shape = warp.MmaF16BF16Op(a_dtype, acc_dtype, (16, 8, 16)), (16, 8, 16)
    # each warp takes a 16 x 16 step (two n8 atoms) so ldmatrix.x4 feeds B; a 16 x 8 step
    # (TileLang's narrowest) where the tile has fewer than 16 columns a warp
    return cute.make_tiled_mma(op, cute.make_layout((warps[0], warps[1], 1)),
                               permutation_mnk=(warps[0] * shape[0],
                                                warps[1] * mma_n_step(n, warps[1]), shape[2]))


# 8-bit integer operands of mma.sync, viewed two bytes (adjacent along K) an element
_PAIR = cutlass.Float16


class Int8WarpMma:
    """The tiled MMA of an 8-bit integer (s8 / u8, either mix) x 8-bit -> int32 T.gemm on
    warp ``mma.sync.aligned.m16n8k32.row.col.s32``: CuTe DSL has no warp-level int8 MMA
    atom, so the operands are partitioned and loaded (``ldmatrix``) as those of the f16
    m16n8k16 MMA, ``tiled`` here, each 16-bit element being two int8 adjacent along K
    (:func:`operand`), and :func:`gemm_warp` issues each m16n8k32 by inline PTX.  The PTX
    fragments agree register for register (PTX ISA, "Matrix Fragments for mma.m16n8k32"
    and "for mma.m16n8k16" with 16-bit types), for lane ``4 g + t``: A's four registers
    hold K bytes ``4t..4t+3`` of row ``g``, of row ``g + 8``, then the same 16 bytes on;
    the f16 A's hold K elements ``2t, 2t+1`` in that order, which over byte pairs are those
    bytes (CuTe's A values ``(2, 2, 2)``: K pair, row + 8, K + 8; read two by two as
    32-bit words).  B's two registers likewise (K bytes ``4t..4t+3`` of column ``g``, then
    16 on), and the int32 accumulator's four registers are the f32 accumulator's (rows
    ``g``, ``g + 8``, columns ``2t, 2t+1``), so :func:`accumulator` serves."""

    def __init__(self, tiled, a_dtype, b_dtype):
        self.tiled = tiled
        self.kinds = (_int8_kind(a_dtype), _int8_kind(b_dtype))


class Uint4:
    """T.uint4 operands of mma.sync (CuTe DSL has no Uint4 numeric class; the operands
    are read as 16-bit units, so only the width counts)."""
    width = 4


def _int8_kind(dtype) -> str:
    if dtype is cutlass.Int8:
        return "s8"
    if dtype is cutlass.Uint8:
        return "u8"
    if dtype is cutlass.Int4:
        return "s4"
    if dtype is Uint4:
        return "u4"
    raise TypeError(f"mma.sync m16n8k32 takes s8 or u8 operands (m16n8k64: s4), not {dtype}")


def mma_i8(kinds: tuple, d, a, b) -> None:
    """``d += a @ b`` for one m16n8k32 (s8 / u8; m16n8k64 for s4, whose fragments are the
    same registers over nibbles: PTX ISA, "Matrix Fragments for mma.m16n8k64"): ``d``
    this thread's 4 int32 accumulator registers, ``a`` its 4 and ``b`` its 2 32-bit
    operand registers (4 bytes, or 8 nibbles, each), in PTX order."""
    k = 64 if kinds[0] in ("s4", "u4") else 32
    code = (f"mma.sync.aligned.m16n8k{k}.row.col.s32.{kinds[0]}.{kinds[1]}.s32 "
            "{$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, {$0, $1, $2, $3};")
    i32 = cutlass.Int32.mlir_type
    args = [cutlass.Int32(x).ir_value() for x in
            [a[0], a[1], a[2], a[3], b[0], b[1], d[0], d[1], d[2], d[3]]]
    out = _llvm.inline_asm(_llvm.StructType.get_literal([i32] * 4), args, code,
                           "=r,=r,=r,=r,r,r,r,r,r,r,0,1,2,3", has_side_effects=False,
                           is_align_stack=False, asm_dialect=_llvm.AsmDialect.AD_ATT)
    for i in range(4):
        d[i] = cutlass.Int32(_llvm.extractvalue(i32, out, [i]))


def mma_n_step(n: int, warps_n: int) -> int:
    """The columns of one step of each warp of an mma.sync tile ``n`` columns wide split
    over ``warps_n`` warps: 16 (two n8 atoms) where the tile has them and ``warps_n`` is a
    power of two, else 8 (one; CuTe DSL aborts partitioning B for ldmatrix.x4 over 3, 6,
    12 ... warps along N)."""
    return 16 if n % (16 * warps_n) == 0 and warps_n & (warps_n - 1) == 0 else 8


def accumulator(family: str, warps: tuple, shape: tuple, dtype, tid):
    """The registers of this thread's part of an ``(M, N)`` fragment under the MMA
    layout, and a tensor of the same shape holding each register's ``(i, j)``."""
    mma = tiled_mma(family, cutlass.Float16, cutlass.Float16, cutlass.Float32, False, False,
                    warps, shape[1])
    thr = mma.get_slice(tid)
    regs = cute.make_rmem_tensor(thr.partition_shape_C(shape), dtype)
    return regs, thr.partition_C(cute.make_identity_tensor(shape))


def a_fragment(family: str, warps: tuple, shape: tuple, dtype, tid):
    """The registers of this thread's part of an ``(M, K)`` A operand read from registers
    (wgmma's RS form; for mma.sync every warp along M, ``warps = (w, 1)``), and each
    register's ``(i, k)``: the registers and coordinates of an accumulator with ``K``
    columns, in its order, so that a copy from an accumulator goes register by register.
    :func:`gemm` (wgmma) reads them through :func:`_a_view_wgmma` and :func:`gemm_warp`
    (mma.sync) through :func:`_a_view`: the MMA's A order (``(2, 2, 2)`` values by M steps
    by k16 steps) over the same registers."""
    if family != "wgmma":
        return accumulator(family, warps, shape, dtype, tid)
    # wgmma: the registers of an accumulator with K columns (a warpgroup holds all K
    # columns of its rows), read as the A operand through :func:`_a_view_wgmma`.  In the A
    # partition's own order a warpgroup of two or more 64-row steps would list its
    # registers by K step before M step, where an accumulator lists them M step last: a
    # copy register by register from an accumulator (TileLang's T.copy(acc_s, acc_s_cast))
    # would mix the steps' rows
    if warps[1] != 1:
        raise ValueError(f"a wgmma A fragment over warpgroups {warps}: select_mma reads A "
                         "from registers only with every warpgroup along M")
    return accumulator(family, warps, shape, dtype, tid)


def gemm(mma, tid, acc, sa, sb, accumulate: bool = True, wait=0,
         a_regs: bool = False) -> None:
    """``acc += sa @ sb^T`` (``sa`` is ``(M, K)``, ``sb`` is ``(N, K)``, both shared views
    from :func:`operand`; with ``a_regs``, ``sa`` is this thread's registers from
    :func:`a_fragment` and ``mma`` an RS tiled MMA), issued by the whole warpgroup as one batch; returns once at most
    ``wait`` batches are in flight (then :func:`drain` before reading ``acc``); ``wait=None``
    (TileLang's T.wgmma_gemm) does not wait at all.
    ``accumulate=False`` overwrites ``acc`` (``clear_accum``)."""
    # ACCUMULATE is set on a copy of the tiled MMA: a value set on the caller's object
    # inside a branch would outlive the branch, and the next call on that object (the same
    # T.gemm in a T.unroll's next copy of the branch) would use a value that does not
    # dominate it -- the cubin build fails.  Every call sets ACCUMULATE before its first MMA
    mma = cutlass.new_from_mlir_values(mma, cutlass.extract_mlir_values(mma))
    # the shared-memory descriptors depend only on the warpgroup: slicing by a value the
    # compiler knows is warp-uniform keeps them in uniform registers (a per-thread value
    # makes every wgmma wait for a per-thread descriptor conversion)
    thr = mma.get_slice(cute.arch.make_warp_uniform(tid // WARPGROUP) * WARPGROUP)
    fb = mma.make_fragment_B(thr.partition_B(sb))
    fa = _a_view_wgmma(sa) if a_regs else mma.make_fragment_A(thr.partition_A(sa))
    mma.set(warpgroup.Field.ACCUMULATE, accumulate)
    warpgroup.fence()
    for k in range(cute.size(fa, mode=[2])):
        cute.gemm(mma, acc, fa[None, None, k], fb[None, None, k], acc)
        mma.set(warpgroup.Field.ACCUMULATE, True)
    warpgroup.commit_group()
    if wait is not None:
        warpgroup.wait_group(wait)
    if wait == 0:
        fence_registers(acc)


# the named barrier :func:`anchor` arrives on (alone: 32 threads, so each warp's arrival
# completes it at once and nothing ever waits on it); codegen keeps it out of the ids it
# hands to thread regions when a kernel anchors a wait
ANCHOR_BARRIER = 15


def wait_batches(pending: int, after=None) -> None:
    """Wait until at most the last ``pending`` wgmma batches of this warpgroup are in
    flight (then :func:`fence_registers` the accumulators of the finished ones).
    ``after``: a float32 register fragment written just before; the wait stays after
    the statements that wrote it (:func:`anchor`)."""
    if after is not None:
        anchor(after)
    warpgroup.wait_group(pending)


def anchor(frag) -> None:
    """Keep the next ``wgmma.wait_group`` after the writes of ``frag``'s first and last
    registers.  ptxas moves a wait (``WARPGROUP.DEPBAR``) and named-barrier arrivals up to
    the top of their basic block, above arithmetic they do not depend on: FlashAttention's
    wait for P V, placed after the softmax so that the softmax runs while P V does, ends
    up before it.  It keeps a wait after a preceding ``bar.arrive``, and a ``bar.arrive``
    after the instructions its operands come from: so this arrives on
    :data:`ANCHOR_BARRIER` with an id that reads ``frag`` (``+ (bits & (smem >> 31))``:
    0, since the dynamic shared memory size is below 2^31, a fact neither LLVM nor
    ptxas folds)."""
    x = frag[0] + frag[cute.size(frag) - 1]
    bits = cutlass.Int32(_llvm.bitcast(cutlass.Int32.mlir_type, cutlass.Float32(x).ir_value()))
    smem = cutlass.Int32(_llvm.inline_asm(
        cutlass.Int32.mlir_type, [], "mov.u32 $0, %dynamic_smem_size;", "=r",
        has_side_effects=False, is_align_stack=False, asm_dialect=_llvm.AsmDialect.AD_ATT))
    cute.arch.barrier_arrive(barrier_id=ANCHOR_BARRIER + (bits & (smem >> 31)),
                             number_of_threads=32)


def drain(acc) -> None:
    """Wait until every wgmma batch of this warpgroup is done; ``acc`` may be read after."""
    warpgroup.wait_group(0)
    fence_registers(acc)


def fence_registers(acc) -> None:
    """Pin every register of ``acc`` after the preceding wait: without it the compiler may
    move reads of the accumulators (an epilogue's conversions) above ``wgmma.wait_group``,
    and ptxas then serializes every wgmma of the kernel (its warning C7514).  An empty
    volatile asm that "rewrites" each register, like CUTLASS's warpgroup_fence_operand:
    float32 registers as ``f``, int32 ones as ``r``; float16 accumulators (two to a 32-bit
    register, as wgmma and mma.sync hold them) as ``r`` pairs."""
    regs = acc
    if acc.element_type.width == 16:
        regs = cute.recast_tensor(acc, cutlass.Int32)
    kind = cutlass.Float32 if regs.element_type is cutlass.Float32 else cutlass.Int32
    code = "=f,0" if kind is cutlass.Float32 else "=r,0"
    for i in range(cute.size(regs)):
        regs[i] = regs.element_type(_llvm.inline_asm(
            kind.mlir_type, [kind(regs[i]).ir_value()], "", code,
            has_side_effects=True, is_align_stack=False, asm_dialect=_llvm.AsmDialect.AD_ATT))


def gemm_warp(mma, tid, acc, sa, sb, a_mn_major: bool, b_mn_major: bool,
              accumulate: bool = True, a_regs: bool = False) -> None:
    """``acc += sa @ sb^T`` with mma.sync: per K step, shared -> registers (``ldmatrix``
    for 16-bit types, transposing for MN-major operands) then the MMAs.  With ``a_regs``,
    ``sa`` is this thread's registers from :func:`a_fragment` (A from registers, TileLang's
    gemm_rs); only B is loaded.  ``mma`` an :class:`Int8WarpMma`: its f16 tiled MMA loads
    the byte pairs, and each MMA is an m16n8k32 (:func:`mma_step`)."""
    tiled = mma.tiled if isinstance(mma, Int8WarpMma) else mma
    if isinstance(mma, Int8WarpMma) and (a_regs or sa.element_type is not _PAIR or
                                         sb.element_type is not _PAIR):
        raise TypeError("int8 mma.sync reads A and B from shared memory as byte pairs: "
                        "views from tcm.operand(..., 'mma') of K-major swizzled buffers")
    thr = tiled.get_slice(tid)
    fb = tiled.make_fragment_B(thr.partition_B(sb))
    if not accumulate:
        acc.fill(0)
    # (a warp's B step is 16 x 16 for ldmatrix.x4, or one 8-column atom for .x2)
    b_step = tiled.get_tile_size(1) // cute.size(tiled.thr_layout_vmnk, mode=[2])
    copy_b = cute.make_tiled_copy_B(_s2r_atom(sb.element_type, b_mn_major, b_step // 4),
                                    tiled).get_slice(tid)
    src_b, dst_b = copy_b.partition_S(sb), copy_b.retile(fb)
    if a_regs:
        fa = _a_view(sa)
        for k in range(cute.size(fa, mode=[2])):
            cute.copy(copy_b, src_b[None, None, k], dst_b[None, None, k])
            mma_step(mma, acc, fa[None, None, k], fb[None, None, k])
        return
    fa = tiled.make_fragment_A(thr.partition_A(sa))
    copy_a = cute.make_tiled_copy_A(_s2r_atom(sa.element_type, a_mn_major), tiled).get_slice(tid)
    src_a, dst_a = copy_a.partition_S(sa), copy_a.retile(fa)
    for k in range(cute.size(fa, mode=[2])):
        cute.copy(copy_a, src_a[None, None, k], dst_a[None, None, k])
        cute.copy(copy_b, src_b[None, None, k], dst_b[None, None, k])
        mma_step(mma, acc, fa[None, None, k], fb[None, None, k])


def mma_step(mma, acc, fa, fb) -> None:
    """One K step of mma.sync: ``acc += fa @ fb`` over this thread's fragments of every
    atom (``fa`` ``(values, M atoms)``, ``fb`` ``(values, N atoms)``).  An
    :class:`Int8WarpMma` issues an m16n8k32 per atom, reading the 16-bit byte pairs of
    the operand fragments as 32-bit registers (A: 4, B: 2, in PTX's order)."""
    if not isinstance(mma, Int8WarpMma):
        cute.gemm(mma, acc, fa, fb, acc)
        return
    a = cute.recast_tensor(fa, cutlass.Int32)
    b = cute.recast_tensor(fb, cutlass.Int32)
    for m in range(cute.size(acc, mode=[1])):
        for n in range(cute.size(acc, mode=[2])):
            mma_i8(mma.kinds, acc[None, m, n], a[None, m], b[None, n])


def _a_view(regs):
    """mma.sync's A operand over registers held in accumulator order.  An accumulator's
    registers with ``K`` columns are ``((2, 2), M steps, K / 8)``: (column pair, row +8)
    of each 16 x 8 step, M steps, then n8 steps.  The 16 x 16 A operand of one
    m16n8k16 holds ``(2, 2, 2)`` values: (column pair, row +8, column +8), which are the
    values of two adjacent n8 steps; so register ``c + 2 row + 4 (m + Mt (2 k + h))``
    is A's value ``(c, row, h)`` of M step ``m``, K step ``k``."""
    mt = cute.size(regs, mode=[1])
    kt = cute.size(regs, mode=[2]) // 2
    layout = cute.make_layout(((2, 2, 2), mt, kt), stride=((1, 2, 4 * mt), 4, 8 * mt))
    return cute.make_tensor(regs.iterator, layout)


def _a_view_wgmma(regs):
    """wgmma's A operand (the RS form) over registers held in accumulator order
    (:func:`a_fragment`).  An accumulator's registers with ``K`` columns are ``((2, 2, K /
    8), M steps)``: (column pair, row +8, n8 step) of each 64-row step, then the steps.
    The 64 x 16 A operand of one wgmma k-step holds ``(2, 2, 2)`` values: (column pair,
    row +8, column +8), the values of two adjacent n8 steps; so register ``c + 2 row + 4 (2
    k + h) + (K / 2) m`` is A's value ``(c, row, h)`` of M step ``m``, K step ``k``."""
    per_step = cute.size(regs, mode=[0])  # K / 2 registers of one 64-row step
    mt = cute.size(regs, mode=[1])
    layout = cute.make_layout(((2, 2, 2), mt, per_step // 8), stride=((1, 2, 4), per_step, 8))
    return cute.make_tensor(regs.iterator, layout)


def _s2r_atom(dtype, mn_major: bool, matrices: int = 4):
    if dtype.width == 16:
        return cute.make_copy_atom(warp.LdMatrix8x8x16bOp(mn_major, matrices), dtype)
    return cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), dtype)


# ---- the SIMT fallback --------------------------------------------------------------------
def simt_operand(smem, dtype, rows: int, cols: int, mn_major: bool, row_stride: int = 0):
    """The ``(MN, K)`` view of the row-major ``(rows, cols)`` shared buffer at the byte
    pointer ``smem`` (``mn_major``: the buffer is ``(K, MN)``); ``row_stride``: the
    elements between rows when it is part of a wider matrix."""
    ptr = cute.recast_ptr(smem, dtype=dtype)
    stride = row_stride or cols
    if mn_major:
        return cute.make_tensor(ptr, cute.make_layout((cols, rows), stride=(1, stride)))
    return cute.make_tensor(ptr, cute.make_layout((rows, cols), stride=(stride, 1)))


SIMT_UNROLLED = 512  # multiply-adds per K step traced one by one; more run in a loop


def dp4a(a, b, c):
    """``c + a . b`` over the four signed bytes of the Int32s ``a`` and ``b`` (PTX
    ``dp4a.s32.s32``, CUDA's ``__dp4a``)."""
    return cutlass.Int32(_llvm.inline_asm(
        cutlass.Int32.mlir_type, [cutlass.Int32(x).ir_value() for x in (a, b, c)],
        "dp4a.s32.s32 $0, $1, $2, $3;", "=r,r,r,r", has_side_effects=False,
        is_align_stack=False, asm_dialect=_llvm.AsmDialect.AD_ATT))


@cute.jit
def gemm_simt(acc, sa, sb, m: cutlass.Constexpr, n: cutlass.Constexpr, k: cutlass.Constexpr,
              threads: cutlass.Constexpr, vector: cutlass.Constexpr, tid,
              accumulate: cutlass.Constexpr = True, packed: cutlass.Constexpr = False):
    """``acc += sa @ sb^T`` on CUDA cores (``sa`` ``(M, K)``, ``sb`` ``(N, K)`` views of
    shared memory), each thread computing its own registers of the ``(m, n)`` fragment
    ``acc`` under the blocked layout: element ``f`` (row-major) on thread
    ``(f // vector) % threads``, in register ``(f // (vector * threads)) * vector + f %
    vector`` (``threads=1, vector=n``: a replicated fragment, row-major).  Scalar
    multiply-adds in the accumulator's dtype.  The thread's registers are a grid of rows
    by columns when a step of ``threads * vector`` elements covers whole rows or a row is
    whole steps; per K step it then loads its A rows and B columns once and does every
    product (register blocking).  ``packed``: int8 operands, K-major, ``k`` a multiple of
    4 and rows 4-byte aligned, into an int32 ``acc``: each step reads four bytes of a row
    as one word and multiply-adds them with one ``dp4a``."""
    dtype = acc.element_type
    if cutlass.const_expr(packed):
        sa, sb = cute.recast_tensor(sa, cutlass.Int32), cute.recast_tensor(sb, cutlass.Int32)
        k = k // 4
    if cutlass.const_expr(not accumulate):
        acc.fill(0)
    step = threads * vector
    grid = n % step == 0 or (step % n == 0 and n % vector == 0)
    if cutlass.const_expr(grid):
        if cutlass.const_expr(n % step == 0):  # every row; n // step runs of vector columns
            nr, nc, row_step = m, (n // step) * vector, 1
            row0, col0 = 0, tid * vector
        else:  # step // n rows per step, vector columns
            nr, nc, row_step = -(-m // (step // n)), vector, step // n
            row0, col0 = (tid * vector) // n, (tid * vector) % n
        av = cute.make_rmem_tensor((nr,), sa.element_type if packed else dtype)
        bv = cute.make_rmem_tensor((nc,), sb.element_type if packed else dtype)
        if cutlass.const_expr(nr * nc <= SIMT_UNROLLED):
            for kk in cutlass.range(k, unroll=2 if k % 2 == 0 else 1):
                for ri in cutlass.range_constexpr(nr):
                    # (a last partial step's rows past m: clamped, their registers unused)
                    row = row0 + ri * row_step
                    if cutlass.const_expr(m % row_step != 0 and ri == nr - 1):
                        row = cutlass.min(row, m - 1)
                    av[ri] = sa[row, kk] if packed else dtype(sa[row, kk])
                for ci in cutlass.range_constexpr(nc):
                    col = col0 + (ci // vector) * step + ci % vector
                    bv[ci] = sb[col, kk] if packed else dtype(sb[col, kk])
                for ri in cutlass.range_constexpr(nr):
                    for ci in cutlass.range_constexpr(nc):
                        if cutlass.const_expr(packed):
                            acc[ri * nc + ci] = dp4a(av[ri], bv[ci], acc[ri * nc + ci])
                        else:
                            acc[ri * nc + ci] = acc[ri * nc + ci] + av[ri] * bv[ci]
        else:  # a large replicated fragment: a loop over its rows
            for kk in cutlass.range(k):
                for ci in cutlass.range_constexpr(nc):
                    col = col0 + (ci // vector) * step + ci % vector
                    bv[ci] = sb[col, kk] if packed else dtype(sb[col, kk])
                for ri in cutlass.range(nr):
                    row = cutlass.min(row0 + ri * row_step, m - 1)
                    a = sa[row, kk] if packed else dtype(sa[row, kk])
                    for ci in cutlass.range_constexpr(nc):
                        if cutlass.const_expr(packed):
                            acc[ri * nc + ci] = dp4a(a, bv[ci], acc[ri * nc + ci])
                        else:
                            acc[ri * nc + ci] = acc[ri * nc + ci] + a * bv[ci]
    else:  # no grid: each register's own (i, j)
        for kk in cutlass.range(k):
            for r in cutlass.range(cute.size(acc), unroll_full=True):
                f = ((r // vector) * threads + tid) * vector + r % vector
                f = cutlass.min(f, m * n - 1)  # (a last partial step's registers: unused)
                if cutlass.const_expr(packed):
                    acc[r] = dp4a(sa[f // n, kk], sb[f % n, kk], acc[r])
                else:
                    acc[r] = acc[r] + dtype(sa[f // n, kk]) * dtype(sb[f % n, kk])


@cute.jit
def gemm_simt_at(acc, sa, sb, m: cutlass.Constexpr, n: cutlass.Constexpr, k: cutlass.Constexpr,
                 coords, accumulate: cutlass.Constexpr = True):
    """:func:`gemm_simt` for an accumulator in a tensor-core MMA's register layout
    (``coords[r]`` = the ``(i, j)`` of register ``r``, as :func:`accumulator` gives)."""
    dtype = acc.element_type
    if cutlass.const_expr(not accumulate):
        acc.fill(0)
    for kk in cutlass.range(k):
        for r in cutlass.range(cute.size(acc), unroll_full=True):
            i, j = coords[r]
            acc[r] = acc[r] + dtype(sa[i, kk]) * dtype(sb[j, kk])
