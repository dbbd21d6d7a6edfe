"""A third set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang), aimed at what the core tile forms *mean* rather than at coverage: copies with
slices, offsets, unit dims, dtype changes and tiles that run off the tensor in every
direction (TileLang reads zeros there and writes nothing); reductions along each dim,
accumulating with ``clear=False``, from shared and fragment tiles, with more threads than
rows; scans with ``reverse`` and ``dim``; atomics that collide; ``T.Pipelined`` over
cp.async copies with 1..4 stages and fragments carried across steps; loops with symbolic
extents; conditions threads disagree on (``if``, ``while``); scalars in loops; integer
floor division and modulo of negative numbers, shifts, bit operations, dtype promotion,
casts out of range; 2-D and 3-D thread blocks.
``tests/test_unseen_programs3.py`` builds each to an sm_90a cubin on the CPU and, on a
GPU, compares it with torch written to TileLang's meaning.

Each factory returns a ``@T.prim_func``."""

import tilecute.language as T


# ---- copies -----------------------------------------------------------------------------
def copy_ragged_tiles(M=100, N=70, bm=32, bn=32):
    """A (M, N) tensor read in (bm, bn) tiles that run off its bottom and right edges into a
    shared tile first filled with 7: TileLang's copy reads zeros where the source has no
    element, so the padded output holds A and zeros, never 7.  The tile then goes through a
    fragment (scaled) back to a (M, N) output, whose copy writes only the elements that
    exist, and to a transposed output read at a negative-free offset."""
    gm, gn = (M + bm - 1) // bm, (N + bn - 1) // bn

    @T.prim_func
    def ragged(A: T.Tensor((M, N), T.float32), Pad: T.Tensor((gm * bm, gn * bn), T.float32),
               B: T.Tensor((M, N), T.float32), Bt: T.Tensor((N, M), T.float32)):
        with T.Kernel(gn, gm, threads=128) as (bx, by):
            s = T.alloc_shared((bm, bn), T.float32)
            f = T.alloc_fragment((bm, bn), T.float32)
            T.fill(s, 7.0)
            T.copy(A[by * bm, bx * bn], s)
            T.copy(s, Pad[by * bm:(by + 1) * bm, bx * bn:(bx + 1) * bn])
            T.copy(s, f)
            for i, j in T.Parallel(bm, bn):
                f[i, j] = f[i, j] * 2.0 + 1.0
            T.copy(f, B[by * bm:(by + 1) * bm, bx * bn:(bx + 1) * bn])
            for i, j in T.Parallel(bn, bm):
                if bx * bn + i < N and by * bm + j < M:
                    Bt[bx * bn + i, by * bm + j] = s[j, i]
    return ragged


def copy_ragged_left_top(M=100, N=70, bm=32, bn=32):
    """Tiles shifted up and left by half a tile, so the first row and column of blocks
    start before the tensor (negative coordinates) and the last ones run past it: the
    copy's bounds check is two-sided.  Out-of-range source elements read as zero; the
    result goes to an output of the grid's own padded shape."""
    gm, gn = (M + bm // 2 + bm - 1) // bm, (N + bn // 2 + bn - 1) // bn

    @T.prim_func
    def shifted(A: T.Tensor((M, N), T.float32), Out: T.Tensor((gm * bm, gn * bn), T.float32),
                Back: T.Tensor((M, N), T.float32)):
        with T.Kernel(gn, gm, threads=128) as (bx, by):
            s = T.alloc_shared((bm, bn), T.float32)
            f = T.alloc_fragment((bm, bn), T.float32)
            r0 = by * bm - bm // 2
            c0 = bx * bn - bn // 2
            T.fill(s, -3.0)
            T.copy(A[r0:r0 + bm, c0:c0 + bn], s)
            T.copy(s, Out[by * bm:(by + 1) * bm, bx * bn:(bx + 1) * bn])
            T.copy(A[r0:r0 + bm, c0:c0 + bn], f)
            for i, j in T.Parallel(bm, bn):
                f[i, j] = f[i, j] + 10.0
            T.copy(f, Back[r0:r0 + bm, c0:c0 + bn])
    return shifted


def copy_dtype_casts(M=64, N=96):
    """T.copy with a different dtype on each side (TileLang casts each element to the
    destination's dtype): float32 global -> float16 shared (round to nearest), float16
    shared -> float32 fragment, float32 fragment -> bfloat16 global, int32 global ->
    float32 shared, float32 fragment -> int32 global (toward zero)."""

    @T.prim_func
    def casts(A: T.Tensor((M, N), T.float32), I: T.Tensor((M, N), T.int32),
              H: T.Tensor((M, N), T.float16), Bf: T.Tensor((M, N), T.bfloat16),
              F: T.Tensor((M, N), T.float32), Z: T.Tensor((M, N), T.int32)):
        with T.Kernel(1, threads=128) as _:
            sh = T.alloc_shared((M, N), T.float16)
            si = T.alloc_shared((M, N), T.float32)
            f = T.alloc_fragment((M, N), T.float32)
            g = T.alloc_fragment((M, N), T.float32)
            T.copy(A, sh)
            T.copy(sh, H)
            T.copy(sh, f)
            T.copy(f, Bf)
            T.copy(I, si)
            T.copy(si, F)
            T.copy(A, g)
            for i, j in T.Parallel(M, N):
                g[i, j] = g[i, j] * 100.0
            T.copy(g, Z)
    return casts


def copy_slices_unit_dims(B=3, M=48, N=40):
    """Copies whose regions drop a dim or keep a unit one: a column A[b, r0:r0 + 16, c]
    into a 1-D fragment, a row A[b, r, :] into a 1-D shared tile, a (1, 16) window into a
    2-D fragment, a shared sub-tile to another shared tile at an offset, and a 1-D
    fragment into a column of the output."""

    @T.prim_func
    def slices(A: T.Tensor((B, M, N), T.float32), Col: T.Tensor((B, 16), T.float32),
               Row: T.Tensor((B, N), T.float32), Win: T.Tensor((B, 16), T.float32),
               Sub: T.Tensor((B, 16, 8), T.float32), Out: T.Tensor((B, M, N), T.float32)):
        with T.Kernel(B, threads=64) as b:
            col = T.alloc_fragment((16,), T.float32)
            row = T.alloc_shared((N,), T.float32)
            win = T.alloc_fragment((1, 16), T.float32)
            whole = T.alloc_shared((M, N), T.float32)
            part = T.alloc_shared((16, 8), T.float32)
            T.copy(A[b, 5:21, 7], col)
            T.copy(col, Col[b, :])
            T.copy(A[b, 9, :], row)
            T.copy(row, Row[b, :])
            T.copy(A[b, 2:3, 20:36], win)
            T.copy(win, Win[b:b + 1, :])
            T.copy(A[b, :, :], whole)
            T.copy(whole[8:24, 30:38], part)
            T.copy(part, Sub[b, :, :])
            T.clear(whole)
            T.copy(col, whole[10:26, 3])
            T.copy(whole, Out[b, :, :])
    return slices


# ---- reductions and scans ---------------------------------------------------------------
def reduce_dims_mixed(M=32, N=64, threads=256):
    """Reductions of a non-square (M, N) tile along dim 0, dim 1 and dim -1, from a shared
    and from a fragment source, with more threads than rows or columns: sum of columns
    from shared, max of rows from the fragment, min along -1 from shared, absmax and
    abssum of columns from the fragment."""

    @T.prim_func
    def reds(A: T.Tensor((M, N), T.float32), ColSum: T.Tensor((N,), T.float32),
             RowMax: T.Tensor((M,), T.float32), RowMin: T.Tensor((M,), T.float32),
             ColAbsMax: T.Tensor((N,), T.float32), ColAbsSum: T.Tensor((N,), T.float32)):
        with T.Kernel(1, threads=threads) as _:
            s = T.alloc_shared((M, N), T.float32)
            f = T.alloc_fragment((M, N), T.float32)
            cs = T.alloc_fragment((N,), T.float32)
            rm = T.alloc_fragment((M,), T.float32)
            rn = T.alloc_shared((M,), T.float32)
            ca = T.alloc_fragment((N,), T.float32)
            cb = T.alloc_fragment((N,), T.float32)
            T.copy(A, s)
            T.copy(A, f)
            T.reduce_sum(s, cs, dim=0)
            T.reduce_max(f, rm, dim=1)
            T.reduce_min(s, rn, dim=-1)
            T.reduce_absmax(f, ca, dim=0)
            T.reduce_abssum(f, cb, dim=0)
            T.copy(cs, ColSum)
            T.copy(rm, RowMax)
            T.copy(rn, RowMin)
            T.copy(ca, ColAbsMax)
            T.copy(cb, ColAbsSum)
    return reds


def reduce_accumulate_steps(M=64, K=512, bk=64, threads=128):
    """Row sums and maxima accumulated over K in steps with clear=False (the running
    value kept in the output fragment; TileLang combines the tile's reduction with what
    the output holds), the max started from -inf with T.fill, and a dim-0 sum of a
    transposed step accumulated likewise into a shared output."""

    @T.prim_func
    def acc_steps(A: T.Tensor((M, K), T.float32), S: T.Tensor((M,), T.float32),
                  Mx: T.Tensor((M,), T.float32), Cs: T.Tensor((bk,), T.float32)):
        with T.Kernel(1, threads=threads) as _:
            a_s = T.alloc_shared((M, bk), T.float32)
            a_f = T.alloc_fragment((M, bk), T.float32)
            s = T.alloc_fragment((M,), T.float32)
            mx = T.alloc_fragment((M,), T.float32)
            cs = T.alloc_shared((bk,), T.float32)
            T.clear(s)
            T.fill(mx, -T.infinity(T.float32))
            T.clear(cs)
            for k in T.serial(K // bk):
                T.copy(A[0:M, k * bk:(k + 1) * bk], a_s)
                T.copy(a_s, a_f)
                T.reduce_sum(a_f, s, dim=1, clear=False)
                T.reduce_max(a_f, mx, dim=1, clear=False)
                T.reduce_sum(a_s, cs, dim=0, clear=False)
            T.copy(s, S)
            T.copy(mx, Mx)
            T.copy(cs, Cs)
    return acc_steps


def scans_reverse_dims(M=16, N=64):
    """T.cumsum and T.cummax along each dim, forward and reversed, on a shared tile and
    on a fragment (TileLang's inclusive scans; reverse: the running value from the end)."""

    @T.prim_func
    def scans(A: T.Tensor((M, N), T.float32), C1: T.Tensor((M, N), T.float32),
              C0r: T.Tensor((M, N), T.float32), X1r: T.Tensor((M, N), T.float32),
              X0: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, threads=128) as _:
            s = T.alloc_shared((M, N), T.float32)
            d = T.alloc_shared((M, N), T.float32)
            f = T.alloc_fragment((M, N), T.float32)
            g = T.alloc_fragment((M, N), T.float32)
            T.copy(A, s)
            T.cumsum(s, d, dim=1)
            T.copy(d, C1)
            T.cumsum(s, dim=0, reverse=True)
            T.copy(s, C0r)
            T.copy(A, f)
            T.cummax(f, g, dim=-1, reverse=True)
            T.copy(g, X1r)
            T.cummax(f, dim=0)
            T.copy(f, X0)
    return scans


# ---- integer arithmetic, promotion, casts -------------------------------------------------
def int_floor_ops(n=256):
    """Integer // and % of negative operands (TVM's floordiv / floormod: rounded toward
    -inf, the remainder with the divisor's sign), T.truncdiv / T.truncmod (C's), by
    constants and by run-time divisors of either sign; shifts of negative int32 (>> keeps
    the sign) and of uint32 (>> fills zeros); and, or, xor, not."""

    @T.prim_func
    def intops(A: T.Tensor((n,), T.int32), D: T.Tensor((n,), T.int32),
               U: T.Tensor((n,), T.uint32), Out: T.Tensor((12, n), T.int32),
               Uo: T.Tensor((3, n), T.uint32)):
        with T.Kernel(1, threads=128) as _:
            for i in T.Parallel(n):
                a = A[i]
                d = D[i]
                Out[0, i] = a // 7
                Out[1, i] = a % 7
                Out[2, i] = a // -3
                Out[3, i] = a % -3
                Out[4, i] = a // d
                Out[5, i] = a % d
                Out[6, i] = T.truncdiv(a, d)
                Out[7, i] = T.truncmod(a, d)
                Out[8, i] = a >> 3
                Out[9, i] = (a << 2) ^ (a & 0xFF) | (a & -16)
                Out[10, i] = ~a
                Out[11, i] = (a * 37 + 5) % 16 - (a // 16) * 3
                Uo[0, i] = U[i] >> 5
                Uo[1, i] = U[i] // T.uint32(3)
                Uo[2, i] = (U[i] << 3) | (U[i] >> 29)
    return intops


def promote_and_cast(n=512):
    """Dtype promotion and conversions: int8 * int8 kept in int8 (wrapping) and widened
    first, float16 + float32 (float32), an int32 times a Python float (float32), a bool
    mask times a value, float -> int8 and -> uint8 of values in range (toward zero),
    int32 -> int8 (the low byte), float32 -> float16 beyond its range (inf)."""

    @T.prim_func
    def promo(A8: T.Tensor((n,), T.int8), B8: T.Tensor((n,), T.int8),
              H: T.Tensor((n,), T.float16), F: T.Tensor((n,), T.float32),
              I: T.Tensor((n,), T.int32), P8: T.Tensor((n,), T.int8),
              W: T.Tensor((n,), T.int32), S: T.Tensor((n,), T.float32),
              Q8: T.Tensor((n,), T.int8), Qu: T.Tensor((n,), T.uint8),
              L8: T.Tensor((n,), T.int8), Hf: T.Tensor((n,), T.float16)):
        with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
            for i in T.Parallel(128):
                g = bx * 128 + i
                P8[g] = A8[g] * B8[g]
                W[g] = T.cast(A8[g], T.int32) * T.cast(B8[g], T.int32) + A8[g]
                S[g] = H[g] + F[g] + I[g] * 0.5 + T.cast(F[g] > 0, T.float32) * 3.0 \
                    + T.if_then_else(I[g] % 2 == 0, T.float32(1), T.float32(-1))
                Q8[g] = T.cast(T.clamp(F[g] * 40.0, -128.0, 127.0), T.int8)
                Qu[g] = T.cast(T.abs(F[g]) * 50.0, T.uint8)
                L8[g] = T.cast(I[g], T.int8)
                Hf[g] = T.cast(F[g] * 30000.0, T.float16)
    return promo


# ---- pipelines over cp.async copies -------------------------------------------------------
def pipelined_cp_async_rowsum(M=128, K=1000, bm=32, bk=64, stages=3, threads=128):
    """Row sums and a running max over K in a T.Pipelined loop whose copies cannot be TMA
    (K is not a multiple of the tile: the last tile runs off the tensor, the copy reads
    zeros there; the loads are cp.async, multi-buffered over ``stages``), a fragment
    carried across steps (acc), and a second copy of a bias slice through its own shared
    tile in the same step."""

    @T.prim_func
    def rowsum(A: T.Tensor((M, K), T.float16), Bias: T.Tensor((K,), T.float16),
               S: T.Tensor((M,), T.float32), Mx: T.Tensor((M,), T.float32)):
        with T.Kernel(T.ceildiv(M, bm), threads=threads) as bx:
            a_s = T.alloc_shared((bm, bk), T.float16)
            b_s = T.alloc_shared((bk,), T.float16)
            acc = T.alloc_fragment((bm, bk), T.float32)
            mx = T.alloc_fragment((bm,), T.float32)
            step = T.alloc_fragment((bm,), T.float32)
            T.clear(acc)
            T.fill(mx, -T.infinity(T.float32))
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[bx * bm, k * bk], a_s, disable_tma=True)
                T.copy(Bias[k * bk:(k + 1) * bk], b_s, disable_tma=True)
                for i, j in T.Parallel(bm, bk):
                    acc[i, j] += T.cast(a_s[i, j], T.float32) * T.cast(b_s[j], T.float32)
                T.reduce_max(acc, step, dim=1)
                for i in T.Parallel(bm):
                    mx[i] = T.max(mx[i], step[i])
            T.reduce_sum(acc, step, dim=1)
            T.copy(step, S[bx * bm:(bx + 1) * bm])
            T.copy(mx, Mx[bx * bm:(bx + 1) * bm])
    return rowsum


# ---- loops with symbolic extents, scalars, 2-D/3-D threads ------------------------------
def symbolic_loops(block=128):
    """Loops whose extents are run-time values: T.serial over a symbolic length with a
    step, T.unroll and T.vectorized of a parameter-dependent count inside a
    T.Parallel-free kernel, a T.alloc_var counter and running max updated in them, and a
    T.Parallel over a symbolic tail."""
    N = T.symbolic("N")

    @T.prim_func
    def symloops(X: T.Tensor((N,), T.float32), Cnt: T.Tensor((N,), T.int32),
                 Y: T.Tensor((N,), T.float32), Stats: T.Tensor(((N + block - 1) // block, 2),
                                                              T.float32)):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            tx = T.get_thread_binding()
            g = bx * block + tx
            c = T.alloc_var(T.int32)
            best = T.alloc_var(T.float32)
            c = 0
            best = -T.infinity(T.float32)
            for k in T.serial(g % 5, N, 7):
                if X[k] > 0:
                    c += 1
            for u in T.unroll(3):
                best = T.max(best, X[(g + u) % N])
            if g < N:
                Cnt[g] = c
                Y[g] = best
            part = T.alloc_shared((block,), T.float32)
            for i in T.Parallel(block):
                part[i] = T.if_then_else(bx * block + i < N, X[T.min(bx * block + i, N - 1)], 0.0)
            if tx == 0:
                tot = T.alloc_var(T.float32)
                mxv = T.alloc_var(T.float32)
                tot = 0.0
                mxv = -T.infinity(T.float32)
                for i in T.serial(T.min(block, N - bx * block)):
                    tot += part[i]
                    mxv = T.max(mxv, part[i])
                Stats[bx, 0] = tot
                Stats[bx, 1] = mxv
    return symloops


def threads_3d(M=64, N=64):
    """A (16, 4, 2) thread block: each (tx, ty, tz) thread writes its own linear index
    and its coordinates; T.Parallel and T.reduce_sum over a fragment use the block's 128
    threads as one range, and a shared transpose is read back through ty/tz."""

    @T.prim_func
    def t3(A: T.Tensor((M, N), T.float32), Ids: T.Tensor((2, 4, 16), T.int32),
           RowSum: T.Tensor((M,), T.float32), AT: T.Tensor((N, M), T.float32)):
        with T.Kernel(1, threads=(16, 4, 2)) as _:
            tx = T.get_thread_binding(0)
            ty = T.get_thread_binding(1)
            tz = T.get_thread_binding(2)
            f = T.alloc_fragment((M, N), T.float32)
            r = T.alloc_fragment((M,), T.float32)
            s = T.alloc_shared((M, N), T.float32)
            Ids[tz, ty, tx] = tx + 16 * ty + 64 * tz + 1000 * (tz * 10 + ty)
            T.copy(A, f)
            T.reduce_sum(f, r, dim=1)
            T.copy(r, RowSum)
            T.copy(f, s)
            for c in T.serial(N // 8):
                AT[c * 8 + tz * 4 + ty, tx * 4 + 0] = s[tx * 4 + 0, c * 8 + tz * 4 + ty]
                AT[c * 8 + tz * 4 + ty, tx * 4 + 1] = s[tx * 4 + 1, c * 8 + tz * 4 + ty]
                AT[c * 8 + tz * 4 + ty, tx * 4 + 2] = s[tx * 4 + 2, c * 8 + tz * 4 + ty]
                AT[c * 8 + tz * 4 + ty, tx * 4 + 3] = s[tx * 4 + 3, c * 8 + tz * 4 + ty]
    return t3


# ---- atomics -----------------------------------------------------------------------------
def atomics_conflicts(n=4096, bins=8, block=256):
    """Atomics that collide: every thread adds 1 into one of a few int32 bins and its
    value into float32 bins of global memory, takes the max and min of int32 values with
    negatives into two single elements, and counts into a shared histogram (atomic adds on
    shared elements) that one warp then adds into a global one; a tile atomic adds a
    fragment into a slice of the output."""

    @T.prim_func
    def atoms(X: T.Tensor((n,), T.float32), K: T.Tensor((n,), T.int32),
              Cnt: T.Tensor((bins,), T.int32), Sum: T.Tensor((bins,), T.float32),
              Ext: T.Tensor((2,), T.int32), Hist: T.Tensor((bins,), T.int32),
              Tile: T.Tensor((4, 64), T.float32)):
        with T.Kernel(n // block, threads=block) as bx:
            tx = T.get_thread_binding()
            h = T.alloc_shared((bins,), T.int32)
            f = T.alloc_fragment((4, 64), T.float32)
            if tx < bins:
                h[tx] = 0
            T.sync_threads()
            g = bx * block + tx
            b = T.if_then_else(K[g] < 0, (-K[g]) % bins, K[g] % bins)
            T.atomic_add(Cnt[b], 1)
            T.atomic_add(Sum[b], X[g])
            T.atomic_max(Ext[0], K[g])
            T.atomic_min(Ext[1], K[g])
            T.atomic_add(h[(K[g] % bins + bins) % bins], 1)
            T.sync_threads()
            if tx < bins:
                T.atomic_add(Hist[tx], h[tx])
            for i, j in T.Parallel(4, 64):
                f[i, j] = T.cast(i * 64 + j, T.float32) * 0.5 + T.cast(bx, T.float32)
            T.atomic_add(Tile[0:4, 0:64], f)
    return atoms


# ---- conditions threads disagree on, scalars ------------------------------------------------
def while_per_thread(n=256):
    """A while loop whose trip count is each thread's own (a Collatz-style walk from its
    element, bounded): its condition reads a T.alloc_var given a per-thread value, so a
    barrier inside would hang; the loop writes the thread's own shared slot, and after it
    every thread reads its neighbour's (ordered by a barrier after the loop)."""

    @T.prim_func
    def walk(X: T.Tensor((n,), T.int32), Steps: T.Tensor((n,), T.int32),
             Nb: T.Tensor((n,), T.int32)):
        with T.Kernel(n // 128, threads=128) as bx:
            tx = T.get_thread_binding()
            s = T.alloc_shared((128,), T.int32)
            v = T.alloc_var(T.int32)
            c = T.alloc_var(T.int32)
            v = X[bx * 128 + tx]
            c = 0
            s[tx] = 0
            while v != 1 and c < 200:
                if v % 2 == 0:
                    v = v // 2
                else:
                    v = 3 * v + 1
                c += 1
                s[tx] = s[tx] + 1
            Steps[bx * 128 + tx] = c
            Nb[bx * 128 + tx] = s[(tx + 1) % 128]
    return walk


def parallel_thread_conditions(M=64, N=64):
    """T.Parallel nests whose ifs read values that differ per element and per thread: a
    fragment's own element against a per-row threshold (a 1-D fragment read at the row),
    a shared element written by another thread in an earlier nest, the thread index
    itself; a masked count into a T.alloc_local scalar per thread."""

    @T.prim_func
    def conds(A: T.Tensor((M, N), T.float32), Thr: T.Tensor((M,), T.float32),
              Out: T.Tensor((M, N), T.float32), Odd: T.Tensor((M, N), T.float32),
              Cnt: T.Tensor((128,), T.int32)):
        with T.Kernel(1, threads=128) as _:
            tx = T.get_thread_binding()
            f = T.alloc_fragment((M, N), T.float32)
            thr = T.alloc_fragment((M,), T.float32)
            s = T.alloc_shared((M, N), T.float32)
            cnt = T.alloc_local((1,), T.int32)
            T.copy(A, f)
            T.copy(Thr, thr)
            for i, j in T.Parallel(M, N):
                if f[i, j] > thr[i]:
                    f[i, j] = f[i, j] - thr[i]
                else:
                    f[i, j] = 0.0
            T.copy(f, Out)
            for i, j in T.Parallel(M, N):
                s[i, j] = A[i, j]
            for i, j in T.Parallel(M, N):
                if s[j, i] > 0:
                    Odd[i, j] = s[j, i]
                else:
                    Odd[i, j] = -1.0
            cnt[0] = 0
            for r in T.serial(M):
                if A[r, tx % N] > 0 and tx < N:
                    cnt[0] += 1
            Cnt[tx] = cnt[0]
    return conds


def scalar_loops(n=512):
    """T.alloc_var scalars updated in nested loops and branches: a running sum with a
    reset when it passes a threshold, a counter of resets, a last-seen index, the loop
    broken out of early (break) and an iteration skipped (continue), T.grid's nest."""

    @T.prim_func
    def scal(X: T.Tensor((n,), T.float32), R: T.Tensor((4,), T.float32),
             G: T.Tensor((4, 8), T.int32)):
        with T.Kernel(1, threads=32) as _:
            tx = T.get_thread_binding()
            run = T.alloc_var(T.float32)
            resets = T.alloc_var(T.int32)
            last = T.alloc_var(T.int32)
            first_big = T.alloc_var(T.int32)
            run = 0.0
            resets = 0
            last = -1
            first_big = -1
            if tx == 0:
                for i in T.serial(n):
                    if X[i] < -1.5:
                        continue
                    run += X[i]
                    if run > 3.0:
                        run = 0.0
                        resets += 1
                        last = i
                for i in T.serial(n):
                    if X[i] > 2.0:
                        first_big = i
                        break
                R[0] = run
                R[1] = T.cast(resets, T.float32)
                R[2] = T.cast(last, T.float32)
                R[3] = T.cast(first_big, T.float32)
            if tx < 4:
                for a, b in T.grid(1, 8):
                    G[tx + a, b] = tx * 10 + b - (b // 3) * (tx % 2)
    return scal


def if_then_else_guards(M=64, N=64, n=1000):
    """T.if_then_else guarding reads that would leave their buffer (TVM's if_then_else
    evaluates only the branch taken): a 3-point stencil on a shared tile at its edges, a
    shifted fragment read, a global read past the tensor's end in a block of more threads
    than elements left; divergent conditions in both forms (Select and if)."""

    @T.prim_func
    def guards(A: T.Tensor((M, N), T.float32), X: T.Tensor((n,), T.float32),
               B: T.Tensor((M, N), T.float32), Y: T.Tensor((1024,), T.float32)):
        with T.Kernel(n // 128 + 1, threads=128) as bx:
            s = T.alloc_shared((M, N), T.float32)
            T.copy(A, s)
            for i, j in T.Parallel(M, N):
                B[i, j] = T.if_then_else(j > 0, s[i, j - 1], 0.0) \
                    + T.if_then_else(j < N - 1, s[i, j + 1], 0.0) \
                    + T.if_then_else(i > 0 and i < M - 1, s[i - 1, j] - s[i + 1, j], s[i, j])
            g = bx * 128 + T.get_thread_binding()
            Y[g] = T.if_then_else(g < n, X[g] * X[T.min(g + 1, n - 1)], -1.0)
    return guards


def pipelined_stage_counts(M=64, K=768, bk=64, stages=1, threads=128):
    """One program for num_stages 1..4: a T.Pipelined loop over TMA-able tiles whose body
    reads the stage's tile into a fragment and accumulates a scaled copy (a loop-carried
    fragment), plus a second loop-carried fragment updated from the first (the running
    max of the partial sums)."""

    @T.prim_func
    def stages_k(A: T.Tensor((M, K), T.float32), S: T.Tensor((M, bk), T.float32),
                 P: T.Tensor((M, bk), T.float32)):
        with T.Kernel(1, threads=threads) as _:
            a_s = T.alloc_shared((M, bk), T.float32)
            acc = T.alloc_fragment((M, bk), T.float32)
            peak = T.alloc_fragment((M, bk), T.float32)
            T.clear(acc)
            T.fill(peak, -T.infinity(T.float32))
            for k in T.Pipelined(K // bk, num_stages=stages):
                T.copy(A[0:M, k * bk:(k + 1) * bk], a_s)
                for i, j in T.Parallel(M, bk):
                    acc[i, j] += a_s[i, j] * T.cast(k + 1, T.float32)
                for i, j in T.Parallel(M, bk):
                    peak[i, j] = T.max(peak[i, j], acc[i, j])
            T.copy(acc, S)
            T.copy(peak, P)
    return stages_k


def int_reductions(M=32, N=64):
    """Integer reductions: sum, max, min of int32 with negatives along both dims, and
    T.reduce_bitand / bitor / bitxor of rows (TileLang's integer reduce types)."""

    @T.prim_func
    def ireds(A: T.Tensor((M, N), T.int32), Out: T.Tensor((6, M), T.int32),
              ColMax: T.Tensor((N,), T.int32), ColSum: T.Tensor((N,), T.int32)):
        with T.Kernel(1, threads=128) as _:
            f = T.alloc_fragment((M, N), T.int32)
            r = T.alloc_fragment((M,), T.int32)
            c = T.alloc_fragment((N,), T.int32)
            T.copy(A, f)
            T.reduce_sum(f, r, dim=1)
            T.copy(r, Out[0, :])
            T.reduce_max(f, r, dim=1)
            T.copy(r, Out[1, :])
            T.reduce_min(f, r, dim=-1)
            T.copy(r, Out[2, :])
            T.reduce_bitand(f, r, dim=1)
            T.copy(r, Out[3, :])
            T.reduce_bitor(f, r, dim=1)
            T.copy(r, Out[4, :])
            T.reduce_bitxor(f, r, dim=1)
            T.copy(r, Out[5, :])
            T.reduce_max(f, c, dim=0)
            T.copy(c, ColMax)
            T.reduce_sum(f, c, dim=0)
            T.copy(c, ColSum)
    return ireds


def mixed_dtype_minmax(n=256):
    """T.max / T.min / T.clamp over mixed dtypes: a float16 value against a Python float
    (kept float16), an int32 against a float bound (promoted to float32), a float16 against
    a float32 (float32), an int8 clamped by Python ints and its absolute value widened.""" 

    @T.prim_func
    def mm(H: T.Tensor((n,), T.float16), F: T.Tensor((n,), T.float32),
           I: T.Tensor((n,), T.int32), C8: T.Tensor((n,), T.int8),
           Oh: T.Tensor((n,), T.float16), Of: T.Tensor((n,), T.float32),
           Og: T.Tensor((n,), T.float32), O8: T.Tensor((n,), T.int32)):
        with T.Kernel(n // 128, threads=128) as bx:
            for i in T.Parallel(128):
                g = bx * 128 + i
                Oh[g] = T.clamp(H[g], -0.75, 0.5) + T.max(H[g], 0.25)
                Of[g] = T.max(I[g], 2.5) + T.min(I[g], -1.5)
                Og[g] = T.max(H[g], F[g]) - T.min(H[g] * 2, F[g])
                O8[g] = T.cast(T.clamp(C8[g], -100, 100), T.int32) \
                    + T.cast(T.abs(C8[g]), T.int32) * 1000
    return mm


def int8_dot_rows(M=64, K=256):
    """Row dot products of int8 vectors written elementwise, as TileLang programs do
    without a GEMM: ``acc[0] += A[r, k] * B[k]`` into an int32 T.alloc_var (TVM's int8
    product, widened by the add: TileLang's CUDA C computes the product in int, so it
    does not wrap), and a per-row count of products above 100 (compared unwrapped)."""

    @T.prim_func
    def dots(A: T.Tensor((M, K), T.int8), B: T.Tensor((K,), T.int8),
             D: T.Tensor((M,), T.int32), Big: T.Tensor((M,), T.int32)):
        with T.Kernel(M // 64, threads=64) as bx:
            r = bx * 64 + T.get_thread_binding()
            acc = T.alloc_var(T.int32)
            big = T.alloc_var(T.int32)
            acc = 0
            big = 0
            for k in T.serial(K):
                acc += A[r, k] * B[k]
                if A[r, k] * B[k] > 100:
                    big += 1
            D[r] = acc
            Big[r] = big
    return dots


def fragment_copies(M=32, N=64):
    """T.copy between fragments and between shared tiles at offsets: a fragment into a
    fragment of another dtype (float32 -> float16), a half of a fragment into a smaller
    one, a shared tile into a shared window of a larger one at an offset, a fragment into
    a shared window."""

    @T.prim_func
    def fcopies(A: T.Tensor((M, N), T.float32), H: T.Tensor((M, N), T.float16),
                Half: T.Tensor((M, N // 2), T.float32), Big: T.Tensor((M + 8, N + 16), T.float32)):
        with T.Kernel(1, threads=128) as _:
            f = T.alloc_fragment((M, N), T.float32)
            h = T.alloc_fragment((M, N), T.float16)
            q = T.alloc_fragment((M, N // 2), T.float32)
            s = T.alloc_shared((M, N), T.float32)
            big = T.alloc_shared((M + 8, N + 16), T.float32)
            T.copy(A, f)
            T.copy(f, h)
            T.copy(h, H)
            T.copy(f[:, N // 2:N], q)
            T.copy(q, Half)
            T.clear(big)
            T.copy(A, s)
            T.copy(s, big[8:8 + M, 16:16 + N])
            T.copy(f[0:8, 0:16], big[0:8, 0:16])
            T.copy(big, Big)
    return fcopies


def threads_2d_tiles(M=64, N=64):
    """A (32, 4) thread block: each warp (ty) owns a band of rows of a shared tile it
    writes at (ty, tx), a T.Parallel nest over the tile uses the block's 128 threads as one
    range, and a warp-level T.warp_reduce_sum on a per-lane partial gives each band's sum."""

    @T.prim_func
    def t2(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32),
           Band: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=(32, 4)) as _:
            tx = T.get_thread_binding(0)
            ty = T.get_thread_binding(1)
            s = T.alloc_shared((M, N), T.float32)
            part = T.alloc_var(T.float32)
            part = 0.0
            for r in T.serial(M // 4):
                s[ty * (M // 4) + r, tx] = A[ty * (M // 4) + r, tx] * 2.0
                s[ty * (M // 4) + r, tx + 32] = A[ty * (M // 4) + r, tx + 32] * 2.0
                part += A[ty * (M // 4) + r, tx] + A[ty * (M // 4) + r, tx + 32]
            total = T.warp_reduce_sum(part)
            if tx == 0:
                Band[ty] = total
            for i, j in T.Parallel(M, N):
                B[i, j] = s[i, j] + s[M - 1 - i, j]
    return t2
