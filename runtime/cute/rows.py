"""Per-row statistics of MMA accumulators: the registers behind an ``(M,)`` fragment whose
elements live with the rows of an ``(M, N)`` ``T.gemm`` accumulator (the ``mma_rows``
layout), the row reductions that fill them, and the index arithmetic that lets a loop
over the accumulator's registers read the statistic of each register's row.

In both tensor-core families a thread's accumulator registers have the shape
``((2, 2[, N/8]), MMA_M, MMA_N)``: two adjacent columns, two rows 8 apart, (wgmma:
column groups of 8), then the tiles along M and N.  So a thread holds ``2 * MMA_M``
rows, the same ones for every N, and the four lanes of a quad (``lane // 4`` equal)
hold the same rows.  A row reduction combines a thread's registers of each row and
then the quad (two butterfly shuffles); when warps also split N (``(w, n)`` with n > 1:
``GemmWarpPolicy.FullCol``), ``reduce_rows_across`` then combines the n warps' partials
through a shared scratch the layout pass allocates.  A column reduction
(``reduce_cols``, dim=0) combines a thread's registers of each of its columns, then the 8
lanes with one ``lane % 4`` (three shuffles), then the warps along M through a scratch,
into a fragment every thread holds whole.  Likewise an ``(N,)`` fragment can live with
the columns of an MMA register fragment (the ``mma_cols`` layout: a per-column scale or
decay read as ``v[j]`` in a loop over ``(i, j)``): each thread holds the ``2 * N/8 *
MMA_N`` columns its registers cover, the 8 lanes with one ``lane % 4`` the same ones.

Usage in generated code::

    from tilecute.runtime.cute import rows as tcrow
    m, m_i = tcrow.row_fragment("wgmma", (2, 1), 128, cutlass.Float32, tc_tid)
    tcrow.reduce_rows(acc, m, "max", clear=False)
    for r in cutlass.range(0, cute.size(acc), 2, unroll_full=True):
        ... m[tcrow.row_of(acc, r)] ...          # the statistic of register r's row
    for q in cutlass.range_constexpr(cute.size(m)):
        i = m_i[q]                              # the row that m[q] belongs to
    tcrow.reduce_cols(acc, tc_acc_ij, cs, "sum", True, scratch, "wgmma", (2, 1), tc_tid, 0)
    d, d_j = tcrow.col_fragment("wgmma", (2, 1), 64, cutlass.Float32, tc_tid)
    ... d[tcrow.col_of(acc, r + lane)] ...      # the value of register r + lane's column
    for q in cutlass.range_constexpr(0, cute.size(d), 2):
        j = d_j[q]                              # the column d[q] belongs to (d[q + 1]: j + 1)
"""

import cutlass
import cutlass.cute as cute

from . import mma as tcm
from .reduce import _sync, combine, warp_allreduce


def row_fragment(family: str, warps: tuple, m: int, dtype, tid):
    """Registers for one value per accumulator row this thread holds (``2 * MMA_M`` of
    them), and the row index of each (a tuple, indexed by a compile-time register)."""
    n = (8 if family == "wgmma" else 16) * warps[1]  # the rows a thread holds do not depend on N
    mma = tcm.tiled_mma(family, cutlass.Float16, cutlass.Float16, cutlass.Float32, False, False,
                        warps, n)
    coords = mma.get_slice(tid).partition_C(cute.make_identity_tensor((m, n)))
    mma_m = cute.size(coords, mode=[1])
    rows = tuple(coords[((0, r0) + (0,) * (len(coords.shape[0]) - 2), mi, 0)][0]
                 for mi in range(mma_m) for r0 in range(2))
    return cute.make_rmem_tensor((2 * mma_m,), dtype), rows


def row_of(acc, r):
    """The register of a row fragment holding the row of accumulator register ``r``
    (``r`` a flat register index; the registers are compact, column-major)."""
    inner = cute.size(acc, mode=[0])
    mma_m = cute.size(acc, mode=[1])
    return (r // 2) % 2 + 2 * ((r // inner) % mma_m)


def row_owner(family: str, warps: tuple, m: int, tid):
    """Whether this thread is the first of those holding its rows (the lane of its quad
    with ``lane % 4 == 0``, in the first warp(group) along N: its first accumulator
    register is in column 0): the one copy of a side effect of a nest over a row fragment."""
    n = (8 if family == "wgmma" else 16) * warps[1]
    mma = tcm.tiled_mma(family, cutlass.Float16, cutlass.Float16, cutlass.Float32, False, False,
                        warps, n)
    coords = mma.get_slice(tid).partition_C(cute.make_identity_tensor((m, n)))
    return coords[((0, 0) + (0,) * (len(coords.shape[0]) - 2), 0, 0)][1] == 0


def col_owner(family: str, warps: tuple, n: int, tid):
    """Whether this thread is the first of those holding its columns (``lane // 4 == 0``,
    in the first warp(group) along M: its first register is in row 0): the one copy of a
    side effect of a nest over a column fragment."""
    m = (64 if family == "wgmma" else 16) * warps[0]
    _, coords = tcm.accumulator(family, warps, (m, n), cutlass.Float32, tid)
    return coords[0][0] == 0


def col_fragment(family: str, warps: tuple, n: int, dtype, tid):
    """Registers for one value per column of an ``(M, n)`` MMA register fragment (an
    accumulator, or an A operand in registers, which holds its registers in accumulator
    order) that this thread holds (``2 * N/8 * MMA_N`` of them, in
    :func:`column_registers` order: adjacent column pairs, then column groups of 8, then
    N steps), and the column index of each (a tuple, indexed by a compile-time register).
    The columns a thread holds do not depend on M; the 8 lanes with one ``lane % 4`` (and
    every warp along M) hold the same ones."""
    m = (64 if family == "wgmma" else 16) * warps[0]
    _, coords = tcm.accumulator(family, warps, (m, n), cutlass.Float32, tid)
    inner = cute.size(coords, mode=[0])
    mma_n = cute.size(coords, mode=[2])
    cols = tuple(coords[regs[0]][1] for regs in column_registers(inner, 1, mma_n))
    return cute.make_rmem_tensor((len(cols),), dtype), cols


def col_of(frag, r):
    """The register of a column fragment (:func:`col_fragment`) holding the column of
    register ``r`` of the MMA register fragment ``frag`` (``r`` a flat register index;
    the registers are compact, column-major ``((2, 2[, N/8]), MMA_M, MMA_N)``)."""
    return column_index(r, cute.size(frag, mode=[0]), cute.size(frag, mode=[1]))


def column_index(r, inner: int, mma_m: int):
    """The position, among the columns a thread holds (:func:`column_registers` order), of
    the column of flat register ``r`` of registers ``((2, 2[, N/8]), MMA_M, MMA_N)``
    (``inner`` values a step): its pair ``r % 2``, column group ``(r // 4) % (N/8)`` and N
    step."""
    groups = inner // 4
    return r % 2 + 2 * ((r // 4) % groups) + 2 * groups * (r // (inner * mma_m))


def any_not_one(rows):
    """Whether any of this thread's rows of the row fragment ``rows`` is not 1 (a rescale
    of the accumulator by it would change something)."""
    differs = rows[0] != rows.element_type(1.0)
    for q in range(1, cute.size(rows)):
        differs = differs | (rows[q] != rows.element_type(1.0))
    return differs


def _quad_rows(acc, op: str, quad: bool = True):
    """Per row this thread holds (``2 * MMA_M`` of them, in row-fragment order): its
    registers of the row combined, then (``quad``) the quad holding the row (two
    shuffles)."""
    absolute = op.startswith("abs")
    base = op[3:] if absolute else op
    inner = cute.size(acc, mode=[0])
    mma_m = cute.size(acc, mode=[1])
    mma_n = cute.size(acc, mode=[2])
    groups = inner // 4  # column groups of 8 (wgmma), else 1
    out = []
    for mi in range(mma_m):
        for r0 in range(2):
            xs = []
            for ni in range(mma_n):
                for g in range(groups):
                    for c0 in range(2):
                        x = acc[c0 + 2 * r0 + 4 * g + inner * (mi + mma_m * ni)]
                        xs.append(_abs(x) if absolute else x)
            own = _tree(xs, base)
            out.append(warp_allreduce(own, base, 4) if quad else own)
    return out


def _tree(xs: list, op: str):
    """``xs`` combined pairwise: a dependency chain of log2(len) operations instead of
    len - 1 (a 128-column wgmma row is 32 registers a thread: 5 levels, not 31)."""
    while len(xs) > 1:
        xs = [combine(xs[i], xs[i + 1], op) if i + 1 < len(xs) else xs[i]
              for i in range(0, len(xs), 2)]
    return xs[0]


def reduce_rows(acc, rows, op: str, clear: bool = True, partial: bool = False):
    """``rows[q] = op over the accumulator row of rows[q]`` (``clear=False``: combined
    with the value already there).  ``op``: "sum", "max", "min", "abssum", "absmax".
    ``partial``: over this thread's registers of the row only (no shuffle);
    :func:`combine_rows` adds the threads' partials up later."""
    base = op[3:] if op.startswith("abs") else op
    for q, v in enumerate(_quad_rows(acc, op, quad=not partial)):
        rows[q] = v if clear else combine(rows[q], v, base)


def combine_rows(rows, rows_i, op: str, scratch, family: str, warps: tuple, m: int, tid,
                 threads: int = 0, barrier_id: int = 1):
    """Each row of the row fragment ``rows`` held as partials (one per thread holding the
    row, from ``reduce_rows(..., partial=True)`` and per-thread updates) becomes the row's
    total in every such thread: the quad (two shuffles), then, with warps (warpgroups)
    along N, their partials through ``scratch`` as :func:`reduce_rows_across` does."""
    quads = [warp_allreduce(rows[q], op, 4) for q in range(len(rows_i))]
    if warps[1] > 1:
        _across(quads, rows, rows_i, op, True, scratch, family, warps, m, tid, threads,
                barrier_id)
    else:
        for q, v in enumerate(quads):
            rows[q] = v


def _across(partials: list, rows, rows_i, op: str, clear: bool, scratch, family: str,
            warps: tuple, m: int, tid, threads: int, barrier_id: int, sync_after: bool = True):
    """Each row's quad-combined ``partials`` of the ``warps[1]`` warp(group)s along N
    combined through ``scratch`` into ``rows`` (:func:`_exchange`)."""
    unit = 128 if family == "wgmma" else 32
    part = cute.make_rmem_tensor((len(partials),), rows.element_type)
    for q, v in enumerate(partials):
        part[q] = v
    _exchange(part, rows, rows_i, op, clear, scratch, warps[1], m, (tid // unit) // warps[0],
              tid, threads, barrier_id, sync_after)


def reduce_rows_across(acc, rows, rows_i, op: str, clear: bool, scratch, family: str,
                       warps: tuple, m: int, tid, threads: int = 0, barrier_id: int = 1,
                       sync_after: bool = True):
    """``reduce_rows`` for an accumulator whose warps (warpgroups for wgmma) split N:
    each warp's quad reduces its columns of the row, lane 0 of the quad writes the partial
    to ``scratch[w * m + row]`` (``w``: the warp's index along N, the tiled MMA's atoms
    being laid out column-major, M first), a barrier, then every thread combines the
    ``warps[1]`` partials of each of its rows, and a second barrier lets the scratch be
    written again.  Every thread of the MMA must call it; ``tid`` is its index among them
    (in a warpgroup region, from the region's first thread), and with ``threads`` the
    barriers are named barrier ``barrier_id`` over ``threads`` threads.  ``sync_after=False``
    leaves out the second barrier: the caller's next barrier comes before the scratch is
    written again (the barrier pass decides)."""
    base = op[3:] if op.startswith("abs") else op
    _across(_quad_rows(acc, op), rows, rows_i, base, clear, scratch, family, warps, m, tid,
            threads, barrier_id, sync_after)


@cute.jit
def _exchange(part, rows, rows_i, op: cutlass.Constexpr, clear: cutlass.Constexpr, scratch,
              warps_n: cutlass.Constexpr, m: cutlass.Constexpr, along_n, tid,
              threads: cutlass.Constexpr, barrier_id: cutlass.Constexpr,
              sync_after: cutlass.Constexpr = True):
    if tid % 4 == 0:
        for q in cutlass.range_constexpr(len(rows_i)):
            scratch[along_n * m + rows_i[q]] = part[q]
    _sync(threads, barrier_id)
    for q in cutlass.range_constexpr(len(rows_i)):
        v = scratch[rows_i[q]]
        for w in cutlass.range_constexpr(1, warps_n):
            v = combine(v, scratch[w * m + rows_i[q]], op)
        if cutlass.const_expr(clear):
            rows[q] = v
        else:
            rows[q] = combine(rows[q], v, op)
    if cutlass.const_expr(sync_after):
        _sync(threads, barrier_id)


def reduce_cols(acc, acc_ij, cols, op: str, clear: bool, scratch, family: str, warps: tuple,
                tid, threads: int = 0, barrier_id: int = 1, sync_after: bool = True):
    """``cols[c] = op over column c of the accumulator`` (``clear=False``: combined with
    the value already there), in every thread of the MMA: ``cols`` is replicated.  ``op``:
    "sum", "max", "min", "abssum", "absmax", on integers "bitand", "bitor", "bitxor";
    "max_nan" / "min_nan" propagate NaN.  ``acc_ij``: the accumulator's ``(i, j)`` tensor
    (:func:`tcm.accumulator`).  As TileLang, each element is converted to ``cols``' dtype
    before it is combined.

    A thread's registers ``((2, 2[, N/8]), MMA_M, MMA_N)`` hold two rows 8 apart per M
    step and the same columns for every M step, so it first combines its registers of
    each of its columns (``2 * N/8 * MMA_N`` of them), then the 8 lanes with the same
    ``lane % 4`` (which hold the same columns: three butterfly shuffles, offsets 4, 8,
    16).  The warps holding the same columns are those along M (the 4 warps of a
    warpgroup times the warpgroups along M for wgmma, the warps along M for mma.sync):
    lanes 0..3 of each write their partials to ``scratch[slot * N + column]`` (``slot``:
    the warp's index along M); after a barrier each column's slots are combined once,
    into slot 0, by thread ``column % threads of the MMA``; after another, every thread
    reads all N columns.  ``scratch`` holds ``N x`` slots values of ``cols``' dtype.
    Every thread of the MMA must call it; ``tid`` is its index among them, and with
    ``threads`` the barriers are named barrier ``barrier_id`` over ``threads`` threads (as
    :func:`reduce_rows_across`); ``sync_after=False`` leaves out the last barrier (the
    caller's next barrier comes before the scratch is written again)."""
    absolute = op.startswith("abs")
    base = op[3:] if absolute else op
    dtype = cols.element_type
    inner = cute.size(acc, mode=[0])
    mma_m = cute.size(acc, mode=[1])
    mma_n = cute.size(acc, mode=[2])

    def take(x):
        x = x if acc.element_type is dtype else dtype(x)
        return combine(x, -x, "max") if absolute else x

    registers = column_registers(inner, mma_m, mma_n)
    part = cute.make_rmem_tensor((len(registers),), dtype)
    for q, regs in enumerate(registers):
        v = _tree([take(acc[r]) for r in regs], base)
        for offset in COLUMN_LANES:  # the lanes holding the same columns
            v = combine(v, cute.arch.shuffle_sync_bfly(v, offset=offset), base)
        part[q] = v
    columns = tuple(acc_ij[regs[0]][1] for regs in registers)
    slots, slot = column_slot(family, warps, tid)
    unit = 128 if family == "wgmma" else 32
    _col_exchange(part, columns, cols, base, clear, scratch, slots, slot,
                  unit * warps[0] * warps[1], tid, threads, barrier_id, sync_after)


def reduce_segments(acc, acc_ij, runs, op: str, width: int, per_row: int, tid,
                    threads: int = 0, barrier_id: int = 1):
    """``runs[i * per_row + j // width] = op over columns j .. j + width - 1 of row i`` of
    the accumulator (``j`` a multiple of ``width``; ``per_row`` = N / width), then a
    barrier of the MMA's threads: statements after it read ``runs`` (shared memory, of
    ``runs``' dtype; each element is converted to it before it is combined, as TileLang
    reduces in the destination's dtype).  ``op``: "sum", "max", "min", "abssum",
    "absmax", the bitwise ones on integers, "max_nan" / "min_nan".

    A thread's registers ``((2, 2[, N/8]), MMA_M, MMA_N)`` hold, per row, two adjacent
    columns of each 8-column group, the quad's other lanes the group's other columns.
    ``width`` (chosen by the accumulator views pass) is 1, 2 or 4 (a run is part of one
    lane's pair or of two lanes' pairs), or a multiple of 8 dividing the columns a warp
    (group) holds of each N step, so a run is ``width / 8`` whole groups of one
    warp(group) and one N step: the thread combines its registers of the run, the
    ``min(width, 8) / 2`` lanes holding the run combine theirs (butterfly shuffles), and
    the first of them writes the run's value.  ``tid``, ``threads``, ``barrier_id`` as
    for :func:`reduce_cols`."""
    base, take, (inner, mma_m, mma_n) = _segment_operands(acc, runs, op)
    dtype = runs.element_type

    registers = segment_registers(inner, mma_m, mma_n, width)
    lanes = max(min(width, 8) // 2, 1)
    part = cute.make_rmem_tensor((len(registers),), dtype)
    for q, regs in enumerate(registers):
        part[q] = warp_allreduce(_tree([take(acc[r]) for r in regs], base), base, lanes)
    slots = tuple(acc_ij[regs[0]][0] * per_row + acc_ij[regs[0]][1] // width
                  for regs in registers)
    _write_runs(part, slots, runs, lanes, tid, threads, barrier_id)


def _segment_operands(acc, runs, op: str):
    """For the segment reductions: the op's combining kind, the conversion of an
    accumulator element to ``runs``' dtype (its absolute value for "abs*"), and the
    accumulator's register modes (inner, MMA_M, MMA_N)."""
    absolute = op.startswith("abs")
    base = op[3:] if absolute else op
    dtype = runs.element_type

    def take(x):
        x = x if acc.element_type is dtype else dtype(x)
        return combine(x, -x, "max") if absolute else x
    modes = tuple(cute.size(acc, mode=[m]) for m in range(3))
    return base, take, modes


def segment_registers(inner: int, mma_m: int, mma_n: int, width: int) -> list:
    """The flat indices of a thread's accumulator registers ``((2, 2[, N/8]), MMA_M,
    MMA_N)`` grouped by run of ``width`` columns of one row (see :func:`reduce_segments`):
    per N step, M step and row (two rows 8 apart), the registers of each run, the first
    one the run's leftmost column."""
    groups = inner // 4  # 8-column groups per N step (wgmma: N / 8; mma.sync: 1)
    out = []
    for ni in range(mma_n):
        for mi in range(mma_m):
            for r0 in range(2):
                first = 2 * r0 + inner * (mi + mma_m * ni)
                if width >= 8:
                    per = width // 8
                    for u in range(groups // per):
                        out.append([first + c0 + 4 * g for g in range(u * per, (u + 1) * per)
                                    for c0 in range(2)])
                elif width > 1:  # 2 or 4: a lane's pair is in one run
                    out += [[first + 4 * g, first + 4 * g + 1] for g in range(groups)]
                else:
                    out += [[first + c0 + 4 * g] for g in range(groups) for c0 in range(2)]
    return out


def reduce_row_segments(acc, acc_ij, runs, op: str, height: int, n: int, tid,
                        threads: int = 0, barrier_id: int = 1):
    """``runs[(i // height) * n + j] = op over rows i .. i + height - 1 of column j`` of the
    ``(M, n)`` accumulator (``i`` a multiple of ``height``, which divides 16), then a
    barrier of the MMA's threads; as :func:`reduce_segments` otherwise.

    Each warp holds 16-row blocks: a thread two rows 8 apart (``r0``) of each, the 8 lanes
    with one ``lane % 4`` the 8 consecutive rows.  A run of 16 is the thread's two
    registers of a column, then those 8 lanes (shuffles at lane offsets 16, 8, 4); a run
    of ``height`` <= 8 one register, then the ``height`` lanes ``4`` apart holding its
    rows, the first of which writes it."""
    base, take, (inner, mma_m, mma_n) = _segment_operands(acc, runs, op)
    dtype = runs.element_type

    registers = row_segment_registers(inner, mma_m, mma_n, height)
    lanes = min(height, 8)
    part = cute.make_rmem_tensor((len(registers),), dtype)
    for q, regs in enumerate(registers):
        part[q] = warp_allreduce(_tree([take(acc[r]) for r in regs], base), base, lanes, 4)
    slots = tuple((acc_ij[regs[0]][0] // height) * n + acc_ij[regs[0]][1] for regs in registers)
    _write_runs(part, slots, runs, lanes * 4, tid, threads, barrier_id, 4)


def row_segment_registers(inner: int, mma_m: int, mma_n: int, height: int) -> list:
    """A thread's accumulator registers grouped by run of ``height`` rows of one column (see
    :func:`reduce_row_segments`), the first one the run's top row."""
    out = []
    for ni in range(mma_n):
        for mi in range(mma_m):
            for g in range(inner // 4):
                for c0 in range(2):
                    first = c0 + 4 * g + inner * (mi + mma_m * ni)
                    if height == 16:
                        out.append([first, first + 2])
                    else:
                        out += [[first], [first + 2]]
    return out


@cute.jit
def _write_runs(part, slots, runs, lanes: cutlass.Constexpr, tid, threads: cutlass.Constexpr,
                barrier_id: cutlass.Constexpr, unit: cutlass.Constexpr = 1):
    """``runs[slots[q]] = part[q]`` from the first lane of each group of ``lanes / unit``
    lanes ``unit`` apart (lane % lanes < unit), then the barrier."""
    if tid % lanes < unit:
        for q in cutlass.range_constexpr(len(slots)):
            runs[slots[q]] = part[q]
    _sync(threads, barrier_id)


COLUMN_LANES = (4, 8, 16)  # lane xor these: the 8 lanes of a warp with one lane % 4


def column_registers(inner: int, mma_m: int, mma_n: int) -> list:
    """The flat indices of a thread's accumulator registers ``((2, 2[, N/8]), MMA_M,
    MMA_N)`` (compact, column-major) grouped by column: one list per column the thread
    holds (its two adjacent columns of each column group of each N step), the
    register of every row (two rows 8 apart, every M step) of that column."""
    out = []
    for ni in range(mma_n):
        for g in range(inner // 4):
            for c0 in range(2):
                first = c0 + 4 * g + inner * mma_m * ni
                out.append([first + 2 * r0 + inner * mi for mi in range(mma_m) for r0 in range(2)])
    return out


def column_slot(family: str, warps: tuple, tid):
    """(slots, slot): how many warps hold each column of the accumulator (those along M: a
    warpgroup's 4 warps times the warpgroups along M for wgmma, the warps along M for
    mma.sync; the tiled MMA lays its atoms out M first), and this thread's warp's index
    among them."""
    unit = 128 if family == "wgmma" else 32  # a warpgroup, or a warp
    per = unit // 32
    return warps[0] * per, ((tid // unit) % warps[0]) * per + (tid // 32) % per


@cute.jit
def _col_exchange(part, columns, cols, op: cutlass.Constexpr, clear: cutlass.Constexpr, scratch,
                  slots: cutlass.Constexpr, slot, mma_threads: cutlass.Constexpr, tid,
                  threads: cutlass.Constexpr, barrier_id: cutlass.Constexpr,
                  sync_after: cutlass.Constexpr = True):
    n = cute.size(cols)
    if tid % 32 < 4:
        for q in cutlass.range_constexpr(len(columns)):
            scratch[slot * n + columns[q]] = part[q]
    _sync(threads, barrier_id)
    if cutlass.const_expr(slots > 1):
        for k in cutlass.range_constexpr((n + mma_threads - 1) // mma_threads):
            if cutlass.const_expr((k + 1) * mma_threads <= n):
                _combine_slots(scratch, tid + k * mma_threads, n, slots, op)
            elif tid + k * mma_threads < n:
                _combine_slots(scratch, tid + k * mma_threads, n, slots, op)
        _sync(threads, barrier_id)
    # unrolled by the compiler (register indices become constants)
    for j in cutlass.range(n, unroll_full=True):
        if cutlass.const_expr(clear):
            cols[j] = scratch[j]
        else:
            cols[j] = combine(cols[j], scratch[j], op)
    if cutlass.const_expr(sync_after):
        _sync(threads, barrier_id)


def _combine_slots(scratch, column, n: int, slots: int, op: str):
    """``scratch[column]`` = the combination of ``scratch[w * n + column]`` over the slots."""
    v = scratch[column]
    for w in range(1, slots):
        v = combine(v, scratch[w * n + column], op)
    scratch[column] = v


def _abs(x):
    return cute.arch.fmax(x, -x)
