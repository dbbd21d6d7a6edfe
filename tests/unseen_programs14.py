"""A fourteenth set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang), aimed at domains the earlier rounds touch less: quantized GEMMs (int8 x int8 ->
int32 with ragged K, per-row / per-column dequantizing epilogues, fp8 e4m3 with per-tensor
scales, e5m2 with per-channel scales and an e4m3 output, bf16 x fp4-e2m1 through a lookup
table in shared and through bit operations, signed int4 nibbles by shifts and narrowing
casts), grouped / MoE GEMMs (an expert-offsets table over a 3-D grid, token gather and
weighted scatter by index, a top-2 router, count / scan / scatter of token slots), scans
(``T.cumsum`` down columns with a ragged tail, segmented scans from ``T.cumsum`` and
``T.cummax``, a two-level block scan), sorting and top-k inside a block (a bitonic argsort,
per-thread insertion top-k, a stable rank sort), histograms with shared and global
atomics, convolution as an im2col GEMM with a K tail, depthwise convolution, pooling
(average without padding, max with indices, global average), transposes into padded
outputs, split-K by tile atomics and by a workspace plus a second reduction kernel, GEMVs
(ragged K, transposed with atomics, int8), batched GEMMs with the batch in the middle dim
and a broadcast B, hand-masked tails, ``T.dynamic`` / ``T.symbolic`` dims, ``T.macro``
pieces, ``T.alloc_var``, ``T.if_then_else``, ``T.clamp``, ``T.cast``, ``T.reinterpret``
and shifts.  ``tests/test_unseen_programs14.py`` builds each to a cubin on the CPU and, on
a GPU, compares it with torch written to TileLang's meaning.

Each factory returns a ``@T.prim_func`` (or a list of them, launched in order), or, for the
``jit_*`` ones, a compiled ``@tilecute.jit`` kernel."""

import tilecute
import tilecute.language as T


# ---- quantized GEMMs --------------------------------------------------------------------
def gemm_int8_ragged_k(M=100, N=72, K=200, bm=64, bn=64, bk=64):
    """int8 x int8 -> int32 with B given as (N, K) (``transpose_B``); M, N and K all have
    tails (K = 3 * 64 + 8: the last K tile is read as zeros past K by ``T.copy``)."""

    @T.prim_func
    def gi8(A: T.Tensor((M, K), T.int8), B: T.Tensor((N, K), T.int8), C: T.Tensor((M, N), T.int32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            a_s = T.alloc_shared((bm, bk), T.int8)
            b_s = T.alloc_shared((bn, bk), T.int8)
            acc = T.alloc_fragment((bm, bn), T.int32)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, k * bk], a_s)
                T.copy(B[bx * bn, k * bk], b_s)
                T.gemm(a_s, b_s, acc, transpose_B=True)
            T.copy(acc, C[by * bm, bx * bn])
    return gi8


def gemm_int8_rowcol_dequant(M=128, N=128, K=256, bm=64, bn=64, bk=64):
    """W8A8: int32 accumulation, then C = float16(float(acc) * sa[row] * sb[col] + bias[col])
    with the per-row and per-column scales staged in shared."""

    @T.prim_func
    def w8a8(A: T.Tensor((M, K), T.int8), B: T.Tensor((N, K), T.int8), Sa: T.Tensor((M,), T.float32),
             Sb: T.Tensor((N,), T.float32), Bias: T.Tensor((N,), T.float32), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            a_s = T.alloc_shared((bm, bk), T.int8)
            b_s = T.alloc_shared((bn, bk), T.int8)
            sa_s = T.alloc_shared((bm,), T.float32)
            sb_s = T.alloc_shared((bn,), T.float32)
            acc = T.alloc_fragment((bm, bn), T.int32)
            out = T.alloc_fragment((bm, bn), T.float16)
            T.copy(Sa[by * bm], sa_s)
            T.copy(Sb[bx * bn], sb_s)
            for k in T.Pipelined(K // bk, num_stages=3):
                T.copy(A[by * bm, k * bk], a_s)
                T.copy(B[bx * bn, k * bk], b_s)
                T.gemm(a_s, b_s, acc, transpose_B=True, clear_accum=(k == 0))
            for i, j in T.Parallel(bm, bn):
                out[i, j] = T.cast(T.cast(acc[i, j], T.float32) * sa_s[i] * sb_s[j] + Bias[bx * bn + j], T.float16)
            T.copy(out, C[by * bm, bx * bn])
    return w8a8


def gemm_fp8_e4m3_tensor_scales(M=192, N=128, K=256, bm=64, bn=128, bk=64):
    """e4m3 A (M, K) and B (N, K), one float32 scale each (a one-element tensor), bf16 out
    through shared."""

    @T.prim_func
    def fp8ts(A: T.Tensor((M, K), T.float8_e4m3), B: T.Tensor((N, K), T.float8_e4m3),
              Sa: T.Tensor((1,), T.float32), Sb: T.Tensor((1,), T.float32), C: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            a_s = T.alloc_shared((bm, bk), T.float8_e4m3)
            b_s = T.alloc_shared((bn, bk), T.float8_e4m3)
            c_s = T.alloc_shared((bm, bn), T.bfloat16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm, k * bk], a_s)
                T.copy(B[bx * bn, k * bk], b_s)
                T.gemm(a_s, b_s, acc, transpose_B=True)
            s = Sa[0] * Sb[0]
            for i, j in T.Parallel(bm, bn):
                c_s[i, j] = acc[i, j] * s
            T.copy(c_s, C[by * bm, bx * bn])
    return fp8ts


def gemm_fp8_e5m2_channel_scales_e4m3_out(M=128, N=128, K=128, bm=64, bn=64, bk=64):
    """e5m2 A (M, K) and B (N, K) with a scale per row of A and per row of B (per output
    column); the result times 1 / out_scale is clamped to e4m3's +-448 and stored as e4m3."""

    @T.prim_func
    def fp8cs(A: T.Tensor((M, K), T.float8_e5m2), B: T.Tensor((N, K), T.float8_e5m2),
              Sa: T.Tensor((M,), T.float32), Sb: T.Tensor((N,), T.float32), So: T.Tensor((1,), T.float32),
              C: T.Tensor((M, N), T.float8_e4m3)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            a_s = T.alloc_shared((bm, bk), T.float8_e5m2)
            b_s = T.alloc_shared((bn, bk), T.float8_e5m2)
            acc = T.alloc_fragment((bm, bn), T.float32)
            q = T.alloc_fragment((bm, bn), T.float8_e4m3)
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm, k * bk], a_s)
                T.copy(B[bx * bn, k * bk], b_s)
                T.gemm(a_s, b_s, acc, transpose_B=True)
            inv = 1.0 / So[0]
            for i, j in T.Parallel(bm, bn):
                v = acc[i, j] * Sa[by * bm + i] * Sb[bx * bn + j] * inv
                q[i, j] = T.cast(T.clamp(v, -448.0, 448.0), T.float8_e4m3)
            T.copy(q, C[by * bm, bx * bn])
    return fp8cs


def dequant_fp4_lut_gemm(M=128, N=128, K=256, bm=64, bn=64, bk=64, g=32):
    """bf16 A x fp4 (e2m1) B: two codes a byte along K (even k in the low nibble), decoded
    through a 16-entry float32 table staged in shared (indexed by the code), times a bf16
    scale per (row of B, g of K); the decoded tile goes to shared as bf16."""

    @T.prim_func
    def fp4lut(A: T.Tensor((M, K), T.bfloat16), Bq: T.Tensor((N, K // 2), T.uint8), Lut: T.Tensor((16,), T.float32),
               Sc: T.Tensor((N, K // g), T.bfloat16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            lut_s = T.alloc_shared((16,), T.float32)
            a_s = T.alloc_shared((bm, bk), T.bfloat16)
            q_s = T.alloc_shared((bn, bk // 2), T.uint8)
            b_s = T.alloc_shared((bn, bk), T.bfloat16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.copy(Lut, lut_s)
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm, k * bk], a_s)
                T.copy(Bq[bx * bn, k * bk // 2], q_s)
                for n, j in T.Parallel(bn, bk):
                    code = (q_s[n, j // 2] >> ((j % 2) * 4)) & 15
                    b_s[n, j] = T.cast(lut_s[code] * T.cast(Sc[bx * bn + n, (k * bk + j) // g], T.float32), T.bfloat16)
                T.gemm(a_s, b_s, acc, transpose_B=True)
            T.copy(acc, C[by * bm, bx * bn])
    return fp4lut


def _e2m1_value(code):
    """The float32 value of a 4-bit e2m1 code by bit operations: sign bit 3, exponent bits
    2..1 (bias 1), mantissa bit 0; exponent 0 is subnormal (m * 0.5)."""
    s = (code >> 3) & 1
    e = (code >> 1) & 3
    m = code & 1
    mag = T.if_then_else(e == 0, T.cast(m, T.float32) * 0.5,
                         T.cast(T.shift_left(2 + m, e), T.float32) * 0.25)
    return T.if_then_else(s == 1, -mag, mag)


def dequant_fp4_bitops_gemm(M=128, N=128, K=256, bm=64, bn=128, bk=64):
    """bf16 A x fp4 (e2m1) B decoded with shifts and masks (no table) through a fragment,
    a float32 scale per output channel applied to the accumulator, bf16 out."""

    @T.prim_func
    def fp4bits(A: T.Tensor((M, K), T.bfloat16), Bq: T.Tensor((N, K // 2), T.uint8), Sc: T.Tensor((N,), T.float32),
                C: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(N // bn, M // bm, threads=256) as (bx, by):
            a_s = T.alloc_shared((bm, bk), T.bfloat16)
            q_s = T.alloc_shared((bn, bk // 2), T.uint8)
            b_f = T.alloc_fragment((bn, bk), T.bfloat16)
            b_s = T.alloc_shared((bn, bk), T.bfloat16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm, k * bk], a_s)
                T.copy(Bq[bx * bn, k * bk // 2], q_s)
                for n, j in T.Parallel(bn, bk):
                    byte = T.cast(q_s[n, j // 2], T.int32)
                    b_f[n, j] = T.cast(_e2m1_value(T.shift_right(byte, (j % 2) * 4) & 15), T.bfloat16)
                T.copy(b_f, b_s)
                T.gemm(a_s, b_s, acc, transpose_B=True)
            for i, j in T.Parallel(bm, bn):
                acc[i, j] = acc[i, j] * Sc[bx * bn + j]
            T.copy(acc, C[by * bm, bx * bn])
    return fp4bits


def int4_signed_gemv_groups(N=300, K=512, g=64, rows=4):
    """y = W x with W signed int4 packed two a byte (even k low): the low nibble sign-extended
    as int8(byte << 4) >> 4 (the shift of a uint8 stays uint8: 0xF3 << 4 is 0x30), the high
    one as int8(byte) >> 4 (arithmetic); a float16 scale per (row, g of K); per block
    ``rows`` rows (a ragged last block), partial sums in a (rows, 32) fragment reduced by
    ``T.reduce_sum``."""

    @T.prim_func
    def i4gemv(Wq: T.Tensor((N, K // 2), T.uint8), S: T.Tensor((N, K // g), T.float16), X: T.Tensor((K,), T.float16),
               Y: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, rows), threads=128) as bx:
            part = T.alloc_fragment((rows, 32), T.float32)
            tot = T.alloc_fragment((rows,), T.float32)
            T.clear(part)
            for r, l in T.Parallel(rows, 32):
                if bx * rows + r < N:
                    for t in T.serial(K // 64):
                        byte = Wq[bx * rows + r, t * 32 + l]
                        k0 = (t * 32 + l) * 2
                        lo = T.cast(byte << 4, T.int8) >> 4
                        hi = T.cast(byte, T.int8) >> 4
                        sc = T.cast(S[bx * rows + r, k0 // g], T.float32)
                        part[r, l] += sc * (T.cast(lo, T.float32) * T.cast(X[k0], T.float32)
                                            + T.cast(hi, T.float32) * T.cast(X[k0 + 1], T.float32))
            T.reduce_sum(part, tot, dim=1)
            for r in T.Parallel(rows):
                if bx * rows + r < N:
                    Y[bx * rows + r] = tot[r]
    return i4gemv


def gemv_int8_dynamic_quant(N=200, K=768, warps=8):
    """int8 weights (N, K) times an int8-quantized activation: int32 dot products in a
    ``T.alloc_var`` per lane, ``T.warp_reduce_sum`` over the warp (one row a warp), then
    y = float(acc) * sw[row] * sx[0]."""

    @T.prim_func
    def i8gemv(W: T.Tensor((N, K), T.int8), X: T.Tensor((K,), T.int8), Sw: T.Tensor((N,), T.float32),
               Sx: T.Tensor((1,), T.float32), Y: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, warps), threads=warps * 32) as bx:
            tx = T.get_thread_binding()
            row = bx * warps + tx // 32
            lane = tx % 32
            acc = T.alloc_var(T.int32, init=0)
            if row < N:
                for t in T.serial(K // 32):
                    acc += T.cast(W[row, t * 32 + lane], T.int32) * T.cast(X[t * 32 + lane], T.int32)
            tot = T.warp_reduce_sum(acc)
            if row < N and lane == 0:
                Y[row] = T.cast(tot, T.float32) * Sw[row] * Sx[0]
    return i8gemv


# ---- grouped GEMM / MoE -------------------------------------------------------------------
def moe_grouped_gemm_offsets(E=4, T_=300, K=128, N=128, bm=64, bn=64, bk=64):
    """Tokens sorted by expert, expert e's rows Offsets[e]..Offsets[e+1] (any sizes, empty
    too); grid (N tiles, row tiles of the longest possible group, E): a block whose row tile
    starts past its expert's end does nothing; rows are gathered with a bounds mask and
    stored under it; W is (E, N, K)."""

    @T.prim_func
    def grouped(X: T.Tensor((T_, K), T.float16), W: T.Tensor((E, N, K), T.float16), Offsets: T.Tensor((E + 1,), T.int32),
                Y: T.Tensor((T_, N), T.float32)):
        with T.Kernel(N // bn, T.ceildiv(T_, bm), E, threads=128) as (bx, by, bz):
            start = Offsets[bz]
            end = Offsets[bz + 1]
            row0 = start + by * bm
            a_s = T.alloc_shared((bm, bk), T.float16)
            w_s = T.alloc_shared((bn, bk), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            if row0 < end:
                T.clear(acc)
                for k in T.Pipelined(K // bk, num_stages=2):
                    for i, j in T.Parallel(bm, bk):
                        a_s[i, j] = T.if_then_else(row0 + i < end, X[row0 + i, k * bk + j], T.float16(0))
                    T.copy(W[bz, bx * bn:(bx + 1) * bn, k * bk:(k + 1) * bk], w_s)
                    T.gemm(a_s, w_s, acc, transpose_B=True)
                for i, j in T.Parallel(bm, bn):
                    if row0 + i < end:
                        Y[row0 + i, bx * bn + j] = acc[i, j]
    return grouped


def moe_gather_scatter_gemm(tokens=200, E=4, cap=96, K=128, N=128, bm=32, bn=64, bk=64):
    """Per expert a list of token ids (Ids[e, c], -1 padding) and routing weights: the rows
    X[id] gathered into shared (zeros for padding), times the expert's (N, K) weight, and
    scattered as Out[id] += w * row with ``T.atomic_add`` (a token may reach two experts)."""

    @T.prim_func
    def gs(X: T.Tensor((tokens, K), T.bfloat16), W: T.Tensor((E, N, K), T.bfloat16), Ids: T.Tensor((E, cap), T.int32),
           Wt: T.Tensor((E, cap), T.float32), Out: T.Tensor((tokens, N), T.float32)):
        with T.Kernel(N // bn, cap // bm, E, threads=128) as (bx, by, bz):
            ids_s = T.alloc_shared((bm,), T.int32)
            a_s = T.alloc_shared((bm, bk), T.bfloat16)
            w_s = T.alloc_shared((bn, bk), T.bfloat16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.copy(Ids[bz, by * bm], ids_s)
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=2):
                for i, j in T.Parallel(bm, bk):
                    tok = ids_s[i]
                    a_s[i, j] = T.if_then_else(tok >= 0, X[T.max(tok, 0), k * bk + j], T.bfloat16(0))
                T.copy(W[bz, bx * bn, k * bk], w_s)
                T.gemm(a_s, w_s, acc, transpose_B=True)
            for i, j in T.Parallel(bm, bn):
                tok = ids_s[i]
                if tok >= 0:
                    T.atomic_add(Out[tok, bx * bn + j], acc[i, j] * Wt[bz, by * bm + i])
    return gs


def top2_router_softmax(tokens=300, E=24, threads=64):
    """One thread a token: the softmax over E logits (max, then the sum of exps in
    ``T.alloc_var``\\ s), the two largest by strict comparison (first index wins a tie),
    their probabilities renormalized to sum 1; ids as int32."""

    @T.prim_func
    def router(L: T.Tensor((tokens, E), T.float32), Ids: T.Tensor((tokens, 2), T.int32),
               Wt: T.Tensor((tokens, 2), T.float32)):
        with T.Kernel(T.ceildiv(tokens, threads), threads=threads) as bx:
            t = bx * threads + T.get_thread_binding()
            mx = T.alloc_var(T.float32, init=-T.infinity(T.float32))
            sm = T.alloc_var(T.float32, init=0.0)
            b1 = T.alloc_var(T.int32, init=0)
            b2 = T.alloc_var(T.int32, init=-1)
            if t < tokens:
                for e in T.serial(E):
                    mx = T.max(mx, L[t, e])
                for e in T.serial(E):
                    sm += T.exp(L[t, e] - mx)
                for e in T.serial(1, E):
                    if L[t, e] > L[t, b1]:
                        b2 = b1
                        b1 = e
                    elif b2 < 0 or L[t, e] > L[t, b2]:
                        b2 = e
                p1 = T.exp(L[t, b1] - mx) / sm
                p2 = T.exp(L[t, b2] - mx) / sm
                Ids[t, 0] = b1
                Ids[t, 1] = b2
                Wt[t, 0] = p1 / (p1 + p2)
                Wt[t, 1] = p2 / (p1 + p2)
    return router


def moe_count_scan_scatter(n=1000, E=16, threads=256):
    """Three kernels: per-expert counts by global ``T.atomic_add``; one block turns them into
    exclusive offsets (``T.cumsum`` of a shared copy, minus the count); each slot takes its
    place Offsets[e] + atomic_add(Cursor[e], 1, return_prev=True) and writes its index
    there (order within an expert is the atomics' order).  Counts and Cursor start at 0."""

    @T.prim_func
    def count(Ex: T.Tensor((n,), T.int32), Counts: T.Tensor((E,), T.int32)):
        with T.Kernel(T.ceildiv(n, threads), threads=threads) as bx:
            for i in T.Parallel(threads):
                if bx * threads + i < n:
                    T.atomic_add(Counts[Ex[bx * threads + i]], 1)

    @T.prim_func
    def scan(Counts: T.Tensor((E,), T.int32), Offsets: T.Tensor((E + 1,), T.int32)):
        with T.Kernel(1, threads=32):
            c_s = T.alloc_shared((E,), T.int32)
            T.copy(Counts, c_s)
            T.cumsum(c_s, dim=0)
            for e in T.Parallel(E):
                Offsets[e] = c_s[e] - Counts[e]
            Offsets[E] = c_s[E - 1]

    @T.prim_func
    def scatter(Ex: T.Tensor((n,), T.int32), Offsets: T.Tensor((E + 1,), T.int32), Cursor: T.Tensor((E,), T.int32),
                Perm: T.Tensor((n,), T.int32)):
        with T.Kernel(T.ceildiv(n, threads), threads=threads) as bx:
            i = bx * threads + T.get_thread_binding()
            if i < n:
                e = Ex[i]
                pos = T.atomic_add(Cursor[e], 1, return_prev=True)
                Perm[Offsets[e] + pos] = i
    return [count, scan, scatter]


# ---- scans --------------------------------------------------------------------------------
def cumsum_columns_ragged(M=100, N=96, bn=32):
    """Inclusive cumsum down each column: the whole (ragged) column tile in a (128, bn)
    shared buffer (rows past M read as zeros by ``T.copy``), ``T.cumsum(dim=0)``, stored back
    under the tail."""

    @T.prim_func
    def ccols(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // bn, threads=128) as bx:
            s = T.alloc_shared((128, bn), T.float32)
            T.copy(X[0, bx * bn], s)
            T.cumsum(s, dim=0)
            T.copy(s, Y[0, bx * bn])
    return ccols


def segmented_cumsum_scans(R=6, N=256):
    """A segmented inclusive scan per row: Flags[r, j] = 1 starts a segment (column 0 always
    does).  ``T.cumsum`` of the values, ``T.cummax`` of (j if flag else 0) gives each
    element's segment start s, the result is cs[j] - cs[s - 1] (0 when s = 0)."""

    @T.prim_func
    def segscan(X: T.Tensor((R, N), T.float32), Flags: T.Tensor((R, N), T.int8), Y: T.Tensor((R, N), T.float32)):
        with T.Kernel(R, threads=128) as bx:
            cs = T.alloc_shared((N,), T.float32)
            st = T.alloc_shared((N,), T.int32)
            for j in T.Parallel(N):
                cs[j] = X[bx, j]
                st[j] = T.if_then_else(Flags[bx, j] != 0, j, 0)
            T.cumsum(cs, dim=0)
            T.cummax(st, dim=0)
            for j in T.Parallel(N):
                s = st[j]
                Y[bx, j] = cs[j] - T.if_then_else(s > 0, cs[T.max(s - 1, 0)], T.float32(0))
    return segscan


def cummax_fragment_and_reverse(M=16, N=64):
    """``T.cummax`` of a fragment along rows, and a reverse ``T.cumsum`` of a shared tile
    down the columns (each element the sum of itself and those below)."""

    @T.prim_func
    def cmx(X: T.Tensor((M, N), T.float32), Mx: T.Tensor((M, N), T.float32), Rs: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((M, N), T.float32)
            s = T.alloc_shared((M, N), T.float32)
            T.copy(X, f)
            T.cummax(f, dim=1)
            T.copy(f, Mx)
            T.copy(X, s)
            T.cumsum(s, dim=0, reverse=True)
            T.copy(s, Rs)
    return cmx


def block_scan_two_level(n=5000, block=256):
    """An inclusive scan of n floats: kernel 1 scans each block's chunk in shared
    (Hillis-Steele, the offset 1 << s, read / sync / write / sync) and writes the block
    total; kernel 2 (one thread) makes the totals exclusive; kernel 3 adds each block's
    base."""
    nb = (n + block - 1) // block
    steps = (block - 1).bit_length()

    @T.prim_func
    def local_scan(X: T.Tensor((n,), T.float32), Y: T.Tensor((n,), T.float32), Tot: T.Tensor((nb,), T.float32)):
        with T.Kernel(nb, threads=block) as bx:
            tx = T.get_thread_binding()
            s = T.alloc_shared((block,), T.float32)
            s[tx] = T.if_then_else(bx * block + tx < n, X[bx * block + tx], T.float32(0))
            T.sync_threads()
            for st in T.serial(steps):
                off = 1 << st
                v = T.alloc_var(T.float32)
                v = s[tx]
                if tx >= off:
                    v = v + s[tx - off]
                T.sync_threads()
                s[tx] = v
                T.sync_threads()
            if bx * block + tx < n:
                Y[bx * block + tx] = s[tx]
            if tx == block - 1:
                Tot[bx] = s[tx]

    @T.prim_func
    def bases(Tot: T.Tensor((nb,), T.float32)):
        with T.Kernel(1, threads=32):
            if T.get_thread_binding() == 0:
                run = T.alloc_var(T.float32, init=0.0)
                for b in T.serial(nb):
                    t = Tot[b]
                    Tot[b] = run
                    run += t

    @T.prim_func
    def add_base(Y: T.Tensor((n,), T.float32), Tot: T.Tensor((nb,), T.float32)):
        with T.Kernel(nb, threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n:
                    Y[bx * block + i] += Tot[bx]
    return [local_scan, bases, add_base]


# ---- sorting and top-k --------------------------------------------------------------------
def bitonic_argsort_desc(R=5, n=128):
    """Each row sorted descending with its original indices carried along: a bitonic
    network in shared, one thread an element, stage k = 2 << a and step j = k >> (b + 1)
    from ``T.serial`` counters, the partner i ^ j, the direction from i & k."""
    logn = n.bit_length() - 1

    @T.prim_func
    def argsort(X: T.Tensor((R, n), T.float32), V: T.Tensor((R, n), T.float32), I: T.Tensor((R, n), T.int32)):
        with T.Kernel(R, threads=n) as bx:
            i = T.get_thread_binding()
            key = T.alloc_shared((n,), T.float32)
            idx = T.alloc_shared((n,), T.int32)
            key[i] = X[bx, i]
            idx[i] = i
            T.sync_threads()
            for a in T.serial(logn):
                k = 2 << a
                for b in T.serial(a + 1):
                    j = k >> (b + 1)
                    p = i ^ j
                    if p > i:
                        desc = (i & k) == 0
                        ki = key[i]
                        kp = key[p]
                        if (ki < kp) == desc:
                            key[i] = kp
                            key[p] = ki
                            ii = idx[i]
                            idx[i] = idx[p]
                            idx[p] = ii
                    T.sync_threads()
            V[bx, i] = key[i]
            I[bx, i] = idx[i]
    return argsort


def topk_insertion_per_thread(M=300, N=77, k=4, threads=64):
    """One thread a row: the k largest values and their column indices kept sorted in
    ``T.alloc_local`` arrays by insertion (a new value shifts the smaller ones down)."""

    @T.prim_func
    def topk(X: T.Tensor((M, N), T.float32), V: T.Tensor((M, k), T.float32), I: T.Tensor((M, k), T.int32)):
        with T.Kernel(T.ceildiv(M, threads), threads=threads) as bx:
            row = bx * threads + T.get_thread_binding()
            vals = T.alloc_local((k,), T.float32)
            ids = T.alloc_local((k,), T.int32)
            if row < M:
                for t in T.serial(k):
                    vals[t] = -T.infinity(T.float32)
                    ids[t] = -1
                for c in T.serial(N):
                    x = X[row, c]
                    if x > vals[k - 1]:
                        pos = T.alloc_var(T.int32, init=k - 1)
                        while pos > 0 and vals[pos - 1] < x:
                            vals[pos] = vals[pos - 1]
                            ids[pos] = ids[pos - 1]
                            pos -= 1
                        vals[pos] = x
                        ids[pos] = c
                for t in T.serial(k):
                    V[row, t] = vals[t]
                    I[row, t] = ids[t]
    return topk


def stable_rank_sort(n=256):
    """A stable ascending sort of int32 keys with ties: element i's rank is the number of
    keys below it plus the equal keys before it; Out[rank] = key, Perm[rank] = i."""

    @T.prim_func
    def ranksort(X: T.Tensor((n,), T.int32), Out: T.Tensor((n,), T.int32), Perm: T.Tensor((n,), T.int32)):
        with T.Kernel(1, threads=n):
            i = T.get_thread_binding()
            s = T.alloc_shared((n,), T.int32)
            s[i] = X[i]
            T.sync_threads()
            xi = s[i]
            r = T.alloc_var(T.int32, init=0)
            for j in T.serial(n):
                xj = s[j]
                r += T.if_then_else(xj < xi or (xj == xi and j < i), 1, 0)
            Out[r] = xi
            Perm[r] = i
    return ranksort


# ---- histograms ---------------------------------------------------------------------------
def histogram_float_bins(n=10000, bins=50, lo=-3.0, hi=3.0, threads=256, per=1024):
    """Floats binned by floor((x - lo) * bins / (hi - lo)) clamped to [0, bins - 1] (values
    below lo land in bin 0: floor, not truncation, before the cast), counted in shared
    int32 bins with ``T.atomic_add``, then added into the global histogram."""
    nb = (n + per - 1) // per
    scale = bins / (hi - lo)

    @T.prim_func
    def hist(X: T.Tensor((n,), T.float32), H: T.Tensor((bins,), T.int32)):
        with T.Kernel(nb, threads=threads) as bx:
            tx = T.get_thread_binding()
            h = T.alloc_shared((bins,), T.int32)
            T.clear(h)
            T.sync_threads()
            for r in T.serial(per // threads):
                i = bx * per + r * threads + tx
                if i < n:
                    b = T.cast(T.floor((X[i] - lo) * scale), T.int32)
                    T.atomic_add(h[T.clamp(b, 0, bins - 1)], 1)
            T.sync_threads()
            for b in T.Parallel(bins):
                T.atomic_add(H[b], h[b])
    return hist


def histogram_joint_weighted(n=3000, B1=8, B2=12, threads=128):
    """A joint histogram of two int32 label arrays into (B1, B2) counts (int32 atomics) and
    the same with float32 weights (float atomics), straight into global memory."""

    @T.prim_func
    def joint(A: T.Tensor((n,), T.int32), B: T.Tensor((n,), T.int32), Wt: T.Tensor((n,), T.float32),
              H: T.Tensor((B1, B2), T.int32), HW: T.Tensor((B1, B2), T.float32)):
        with T.Kernel(T.ceildiv(n, threads), threads=threads) as bx:
            for t in T.Parallel(threads):
                i = bx * threads + t
                if i < n:
                    T.atomic_add(H[A[i], B[i]], 1)
                    T.atomic_add(HW[A[i], B[i]], Wt[i])
    return joint


# ---- convolution and pooling --------------------------------------------------------------
def conv2d_nhwc_im2col_ktail(Nb=2, H=14, W=14, C=24, F=64, KS=3, pad=1, bm=64, bn=64, bk=32):
    """NHWC conv, stride 1, zero padding, as a GEMM over K = KS * KS * C = 216 (a K tail of
    24 in the last tile): each im2col tile built in shared by ``T.Parallel`` with
    ``T.if_then_else`` on the image bounds and on k < K; weights (F, K); output rows
    (Nb * H * W = 392) with an M tail."""
    Kt = KS * KS * C
    Mt = Nb * H * W

    @T.prim_func
    def conv(X: T.Tensor((Nb, H, W, C), T.float16), Wt: T.Tensor((F, Kt), T.float16), Y: T.Tensor((Mt, F), T.float32)):
        with T.Kernel(F // bn, T.ceildiv(Mt, bm), threads=128) as (bx, by):
            a_s = T.alloc_shared((bm, bk), T.float16)
            w_s = T.alloc_shared((bn, bk), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(Kt, bk), num_stages=2):
                for i, j in T.Parallel(bm, bk):
                    m = by * bm + i
                    kk = k * bk + j
                    b = m // (H * W)
                    oh = m % (H * W) // W
                    ow = m % W
                    c = kk % C
                    kw = kk // C % KS
                    kh = kk // (C * KS)
                    ih = oh + kh - pad
                    iw = ow + kw - pad
                    ok = (m < Mt) and (kk < Kt) and (ih >= 0) and (ih < H) and (iw >= 0) and (iw < W)
                    a_s[i, j] = T.if_then_else(ok, X[b, ih, iw, c], T.float16(0))
                T.copy(Wt[bx * bn, k * bk], w_s)
                T.gemm(a_s, w_s, acc, transpose_B=True)
            T.copy(acc, Y[by * bm, bx * bn])
    return conv


def depthwise_conv2d_nchw_stride2(Nb=2, C=16, H=23, W=29, KS=5, stride=2, pad=2, bh=4):
    """Depthwise NCHW conv with stride 2 and zero padding plus a per-channel bias: a block
    per (image * channel, ``bh`` output rows), the channel's KS x KS taps in shared, one
    thread an output pixel (a ragged last row block and a masked row tail)."""
    Ho = (H + 2 * pad - KS) // stride + 1
    Wo = (W + 2 * pad - KS) // stride + 1

    @T.prim_func
    def dw(X: T.Tensor((Nb, C, H, W), T.float32), Wt: T.Tensor((C, KS, KS), T.float32), Bias: T.Tensor((C,), T.float32),
           Y: T.Tensor((Nb, C, Ho, Wo), T.float32)):
        with T.Kernel(Nb * C, T.ceildiv(Ho, bh), threads=bh * 32) as (bx, by):
            n = bx // C
            c = bx % C
            w_s = T.alloc_shared((KS, KS), T.float32)
            T.copy(Wt[c, 0:KS, 0:KS], w_s)
            for r, q in T.Parallel(bh, 32):
                oh = by * bh + r
                if oh < Ho and q < Wo:
                    acc = T.alloc_var(T.float32)
                    acc = Bias[c]
                    for kh, kw in T.grid(KS, KS):
                        ih = oh * stride - pad + kh
                        iw = q * stride - pad + kw
                        if ih >= 0 and ih < H and iw >= 0 and iw < W:
                            acc += X[n, c, ih, iw] * w_s[kh, kw]
                    Y[n, c, oh, q] = acc
    return dw


def avgpool2d_exclude_padding(Nb=2, C=8, H=17, W=20, KS=3, stride=2, pad=1, threads=128):
    """Average pooling (NCHW) whose divisor counts only the taps inside the image
    (count_include_pad=False); one thread an output element over a flat index."""
    Ho = (H + 2 * pad - KS) // stride + 1
    Wo = (W + 2 * pad - KS) // stride + 1
    total = Nb * C * Ho * Wo

    @T.prim_func
    def avgpool(X: T.Tensor((Nb, C, H, W), T.float32), Y: T.Tensor((Nb, C, Ho, Wo), T.float32)):
        with T.Kernel(T.ceildiv(total, threads), threads=threads) as bx:
            idx = bx * threads + T.get_thread_binding()
            if idx < total:
                ow = idx % Wo
                oh = idx // Wo % Ho
                c = idx // (Wo * Ho) % C
                n = idx // (Wo * Ho * C)
                s = T.alloc_var(T.float32, init=0.0)
                cnt = T.alloc_var(T.int32, init=0)
                for kh in T.serial(KS):
                    for kw in T.serial(KS):
                        ih = oh * stride - pad + kh
                        iw = ow * stride - pad + kw
                        if 0 <= ih < H and 0 <= iw < W:
                            s += X[n, c, ih, iw]
                            cnt += 1
                Y[n, c, oh, ow] = s / T.cast(cnt, T.float32)
    return avgpool


def maxpool_nhwc_with_indices(Nb=2, H=15, W=15, C=32, KS=2, stride=2, bc=32):
    """2x2 / stride 2 max pooling of NHWC (H = 15: the last input row and column unused),
    with the flat index ih * W + iw of each maximum (the first on ties, scanning rows then
    columns); one thread a (pixel, channel) through ``T.Parallel``."""
    Ho = (H - KS) // stride + 1
    Wo = (W - KS) // stride + 1

    @T.prim_func
    def mp(X: T.Tensor((Nb, H, W, C), T.float32), Y: T.Tensor((Nb, Ho, Wo, C), T.float32),
           I: T.Tensor((Nb, Ho, Wo, C), T.int32)):
        with T.Kernel(Nb * Ho, threads=128) as bx:
            n = bx // Ho
            oh = bx % Ho
            for ow, c in T.Parallel(Wo, C):
                best = T.alloc_var(T.float32, init=-T.infinity(T.float32))
                arg = T.alloc_var(T.int32, init=0)
                for kh, kw in T.grid(KS, KS):
                    ih = oh * stride + kh
                    iw = ow * stride + kw
                    v = X[n, ih, iw, c]
                    if v > best:
                        best = v
                        arg = ih * W + iw
                Y[n, oh, ow, c] = best
                I[n, oh, ow, c] = arg
    return mp


def global_avgpool_nhwc(Nb=3, HW=200, C=96, bc=32, chunk=64):
    """The mean over H * W of NHWC (HW = 200: a ragged last chunk of 8 rows, read as zeros
    by ``T.copy``), chunk sums by ``T.reduce_sum(dim=0)`` added into a (bc,) fragment."""
    nchunks = (HW + chunk - 1) // chunk

    @T.prim_func
    def gap(X: T.Tensor((Nb, HW, C), T.float32), Y: T.Tensor((Nb, C), T.float32)):
        with T.Kernel(C // bc, Nb, threads=128) as (bx, by):
            t = T.alloc_fragment((chunk, bc), T.float32)
            part = T.alloc_fragment((bc,), T.float32)
            tot = T.alloc_fragment((bc,), T.float32)
            T.clear(tot)
            for k in T.serial(nchunks):
                T.copy(X[by, k * chunk, bx * bc], t)
                T.reduce_sum(t, part, dim=0)
                for j in T.Parallel(bc):
                    tot[j] += part[j]
            for j in T.Parallel(bc):
                Y[by, bx * bc + j] = tot[j] / HW
    return gap


# ---- transposes ---------------------------------------------------------------------------
def transpose_into_padded(M=100, N=70, P=32):
    """Y (Npad, Mpad) = X^T with zeros in the padding (Npad, Mpad the multiples of P): a
    (P, P + 1) shared tile (the +1 column against bank conflicts), loaded under the bounds
    with zeros outside, stored transposed whole."""
    Mp = (M + P - 1) // P * P
    Np = (N + P - 1) // P * P

    @T.prim_func
    def tpad(X: T.Tensor((M, N), T.float32), Y: T.Tensor((Np, Mp), T.float32)):
        with T.Kernel(Mp // P, Np // P, threads=256) as (bx, by):
            t = T.alloc_shared((P, P + 1), T.float32)
            for i, j in T.Parallel(P, P):
                r = bx * P + i
                c = by * P + j
                t[i, j] = T.if_then_else(r < M and c < N, X[T.min(r, M - 1), T.min(c, N - 1)], T.float32(0))
            for j, i in T.Parallel(P, P):
                Y[by * P + j, bx * P + i] = t[i, j]
    return tpad


def batched_transpose_fp16(Bt=3, M=64, N=40, bm=32, bn=32):
    """(B, M, N) -> (B, N, M) in fp16 through a shared tile, N = 40 ragged against 32: both
    ``T.copy``\\ s clip at the edge."""

    @T.prim_func
    def btr(X: T.Tensor((Bt, M, N), T.float16), Y: T.Tensor((Bt, N, M), T.float16)):
        with T.Kernel(M // bm, T.ceildiv(N, bn), Bt, threads=128) as (bx, by, bz):
            s = T.alloc_shared((bm, bn), T.float16)
            st = T.alloc_shared((bn, bm), T.float16)
            T.copy(X[bz, bx * bm:(bx + 1) * bm, by * bn:(by + 1) * bn], s)
            for j, i in T.Parallel(bn, bm):
                st[j, i] = s[i, j]
            T.copy(st, Y[bz, by * bn:(by + 1) * bn, bx * bm:(bx + 1) * bm])
    return btr


# ---- split-K ------------------------------------------------------------------------------
def splitk_tile_atomic_ragged(M=100, N=128, K=512, bm=64, bn=64, bk=32, splits=4):
    """Split-K over a 3-D grid: each split's partial tile added into C (float32, zeroed by
    the caller) by one tile ``T.atomic_add``; M = 100 leaves a ragged last row tile (rows
    past M read as zeros, none written)."""
    kper = K // splits

    @T.prim_func
    def sk(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // bn, T.ceildiv(M, bm), splits, threads=128) as (bx, by, bz):
            a_s = T.alloc_shared((bm, bk), T.float16)
            b_s = T.alloc_shared((bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for k in T.Pipelined(kper // bk, num_stages=3):
                T.copy(A[by * bm, bz * kper + k * bk], a_s)
                T.copy(B[bz * kper + k * bk, bx * bn], b_s)
                T.gemm(a_s, b_s, acc)
            T.atomic_add(C[by * bm, bx * bn], acc)
    return sk


def splitk_workspace_reduce(M=128, N=96, K=384, bm=64, bn=32, bk=32, splits=3):
    """Split-K into a (splits, M, N) float32 workspace, then a second kernel that sums the
    splits, adds a bias and writes float16."""
    kper = K // splits

    @T.prim_func
    def partial(A: T.Tensor((M, K), T.float16), B: T.Tensor((N, K), T.float16), Ws: T.Tensor((splits, M, N), T.float32)):
        with T.Kernel(N // bn, M // bm, splits, threads=128) as (bx, by, bz):
            a_s = T.alloc_shared((bm, bk), T.float16)
            b_s = T.alloc_shared((bn, bk), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for k in T.Pipelined(kper // bk, num_stages=2):
                T.copy(A[by * bm, bz * kper + k * bk], a_s)
                T.copy(B[bx * bn, bz * kper + k * bk], b_s)
                T.gemm(a_s, b_s, acc, transpose_B=True)
            T.copy(acc, Ws[bz, by * bm:(by + 1) * bm, bx * bn:(bx + 1) * bn])

    @T.prim_func
    def reduce(Ws: T.Tensor((splits, M, N), T.float32), Bias: T.Tensor((N,), T.float32), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(M // 16, threads=128) as bx:
            f = T.alloc_fragment((16, N), T.float32)
            T.clear(f)
            for s in T.serial(splits):
                for i, j in T.Parallel(16, N):
                    f[i, j] += Ws[s, bx * 16 + i, j]
            for i, j in T.Parallel(16, N):
                C[bx * 16 + i, j] = T.cast(f[i, j] + Bias[j], T.float16)
    return [partial, reduce]


# ---- GEMV ---------------------------------------------------------------------------------
def gemv_fp16_ktail_fragment(N=300, K=1000, rows=8, vec=4):
    """y = float16(A x + b) with K = 1000 not a multiple of the 128-wide sweep: a (rows, 32)
    fragment of lane partials, each lane ``vec`` consecutive elements a step under
    ``T.if_then_else`` on k < K, ``T.reduce_sum`` over the lanes; a ragged row block."""
    steps = (K + 32 * vec - 1) // (32 * vec)

    @T.prim_func
    def gemv(A: T.Tensor((N, K), T.float16), X: T.Tensor((K,), T.float16), Bv: T.Tensor((N,), T.float16),
             Y: T.Tensor((N,), T.float16)):
        with T.Kernel(T.ceildiv(N, rows), threads=128) as bx:
            part = T.alloc_fragment((rows, 32), T.float32)
            tot = T.alloc_fragment((rows,), T.float32)
            T.clear(part)
            for r, l in T.Parallel(rows, 32):
                row = bx * rows + r
                for s in T.serial(steps):
                    for v in T.vectorized(vec):
                        k = s * 32 * vec + l * vec + v
                        part[r, l] += T.if_then_else(k < K and row < N,
                                                     T.cast(A[T.min(row, N - 1), T.min(k, K - 1)], T.float32)
                                                     * T.cast(X[T.min(k, K - 1)], T.float32), 0.0)
            T.reduce_sum(part, tot, dim=1)
            for r in T.Parallel(rows):
                if bx * rows + r < N:
                    Y[bx * rows + r] = T.cast(tot[r] + T.cast(Bv[bx * rows + r], T.float32), T.float16)
    return gemv


def gemv_transposed_atomic(K=512, N=300, bk=64, threads=128):
    """y = A^T x for A (K, N): a block per (column block, K slice), one thread a column
    summing its slice, the slices combined by ``T.atomic_add`` into y (zeroed by the caller)."""

    @T.prim_func
    def gemvt(A: T.Tensor((K, N), T.float32), X: T.Tensor((K,), T.float32), Y: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, threads), K // bk, threads=threads) as (bx, by):
            x_s = T.alloc_shared((bk,), T.float32)
            T.copy(X[by * bk], x_s)
            col = bx * threads + T.get_thread_binding()
            acc = T.alloc_var(T.float32, init=0.0)
            if col < N:
                for k in T.serial(bk):
                    acc += A[by * bk + k, col] * x_s[k]
                T.atomic_add(Y[col], acc)
    return gemvt


# ---- batched GEMMs ------------------------------------------------------------------------
def batched_gemm_middle_batch_dim(M=64, Bt=3, K=96, N=80, bm=64, bn=64, bk=32):
    """A stored (M, B, K) (the batch in the middle: rows of a tile stride B * K), B (B, K, N),
    C (B, M, N); N = 80 leaves a ragged column tile."""

    @T.prim_func
    def bmid(A: T.Tensor((M, Bt, K), T.float16), B: T.Tensor((Bt, K, N), T.float16), C: T.Tensor((Bt, M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, bn), M // bm, Bt, threads=128) as (bx, by, bz):
            a_s = T.alloc_shared((bm, bk), T.float16)
            b_s = T.alloc_shared((bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm:(by + 1) * bm, bz, k * bk:(k + 1) * bk], a_s)
                T.copy(B[bz, k * bk:(k + 1) * bk, bx * bn:(bx + 1) * bn], b_s)
                T.gemm(a_s, b_s, acc)
            T.copy(acc, C[bz, by * bm:(by + 1) * bm, bx * bn:(bx + 1) * bn])
    return bmid


def batched_gemm_broadcast_b_transposed_out(Bt=4, M=96, N=64, K=128, bm=32, bn=64, bk=64):
    """C[b] = (s[b] * A[b] @ W)^T: one (K, N) weight for every batch, a per-batch scale,
    the (bm, bn) tile written transposed into C (B, N, M) through shared."""

    @T.prim_func
    def bcast(A: T.Tensor((Bt, M, K), T.bfloat16), W: T.Tensor((K, N), T.bfloat16), S: T.Tensor((Bt,), T.float32),
              C: T.Tensor((Bt, N, M), T.float32)):
        with T.Kernel(N // bn, M // bm, Bt, threads=128) as (bx, by, bz):
            a_s = T.alloc_shared((bm, bk), T.bfloat16)
            w_s = T.alloc_shared((bk, bn), T.bfloat16)
            ct = T.alloc_shared((bn, bm), T.float32)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[bz, by * bm, k * bk], a_s)
                T.copy(W[k * bk, bx * bn], w_s)
                T.gemm(a_s, w_s, acc)
            for i, j in T.Parallel(bm, bn):
                ct[j, i] = acc[i, j] * S[bz]
            T.copy(ct, C[bz, bx * bn, by * bm])
    return bcast


# ---- masked tails -------------------------------------------------------------------------
def gemm_hand_masked_tails(M=90, N=70, K=100, bm=64, bn=64, bk=32):
    """Every load and store masked by hand (no ``T.copy``): A and B tiles filled by
    ``T.Parallel`` with ``T.if_then_else`` on both bounds (K = 100: a 4-wide K tail), the
    accumulator stored under ``if`` on both bounds, with a ReLU."""

    @T.prim_func
    def masked(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            a_s = T.alloc_shared((bm, bk), T.float16)
            b_s = T.alloc_shared((bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                for i, j in T.Parallel(bm, bk):
                    r = by * bm + i
                    c = k * bk + j
                    a_s[i, j] = T.if_then_else(r < M and c < K, A[r, c], T.float16(0))
                for i, j in T.Parallel(bk, bn):
                    r = k * bk + i
                    c = bx * bn + j
                    b_s[i, j] = T.if_then_else(r < K and c < N, B[r, c], T.float16(0))
                T.gemm(a_s, b_s, acc)
            for i, j in T.Parallel(bm, bn):
                if by * bm + i < M and bx * bn + j < N:
                    C[by * bm + i, bx * bn + j] = T.max(acc[i, j], 0.0)
    return masked


# ---- dynamic and symbolic dims ------------------------------------------------------------
@tilecute.jit(out_idx=[-1])
def jit_dynamic_softmax_rows(N=256, bm=8):
    """Row softmax over a ``T.dynamic`` row count (a ragged last row block): max and sum by
    ``T.reduce_max`` / ``T.reduce_sum`` of a fragment, exp2 with log2(e) folded in; the
    output allocated by the jit (out_idx=[-1])."""
    M = T.dynamic("M")
    log2e = 1.4426950408889634

    @T.prim_func
    def smax(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
            x = T.alloc_fragment((bm, N), T.float32)
            mx = T.alloc_fragment((bm,), T.float32)
            sm = T.alloc_fragment((bm,), T.float32)
            T.copy(X[bx * bm, 0], x)
            T.reduce_max(x, mx, dim=1)
            for i, j in T.Parallel(bm, N):
                x[i, j] = T.exp2((x[i, j] - mx[i]) * log2e)
            T.reduce_sum(x, sm, dim=1)
            for i, j in T.Parallel(bm, N):
                x[i, j] = x[i, j] / sm[i]
            T.copy(x, Y[bx * bm, 0])
    return smax


def jit_dynamic_softmax_rows_kernel():
    return jit_dynamic_softmax_rows()


def symbolic_rows_cumsum(N=64, bm=16):
    """``T.symbolic`` row count: each row's inclusive cumsum (shared ``T.cumsum(dim=1)``),
    rows past n read as zeros and not written."""
    n = T.symbolic("n")

    @T.prim_func
    def srcs(X: T.Tensor((n, N), T.float32), Y: T.Tensor((n, N), T.float32)):
        with T.Kernel(T.ceildiv(n, bm), threads=64) as bx:
            s = T.alloc_shared((bm, N), T.float32)
            T.copy(X[bx * bm, 0], s)
            T.cumsum(s, dim=1)
            T.copy(s, Y[bx * bm, 0])
    return srcs


@tilecute.jit(out_idx=[-1])
def jit_dynamic_k_gemv(N=128, threads=128):
    """y = A x with K a ``T.dynamic`` dim: one thread a row, a serial loop over K."""
    K = T.dynamic("K")

    @T.prim_func
    def dgemv(A: T.Tensor((N, K), T.float32), X: T.Tensor((K,), T.float32), Y: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, threads), threads=threads) as bx:
            row = bx * threads + T.get_thread_binding()
            acc = T.alloc_var(T.float32, init=0.0)
            if row < N:
                for k in T.serial(K):
                    acc += A[row, k] * X[k]
                Y[row] = acc
    return dgemv


def jit_dynamic_k_gemv_kernel():
    return jit_dynamic_k_gemv()


# ---- bits, casts, macros ------------------------------------------------------------------
def pack_unpack_int8x4(n=256):
    """Four int8 lanes packed into an int32 with masks and shifts (lane q at bits 8q..8q+7,
    lane 3 landing in the sign bit), unpacked by an arithmetic shift right of
    (p << (24 - 8q)) by 24 (sign extension), and the packed word's logical shift right by
    28 through ``T.reinterpret`` as uint32."""

    @T.prim_func
    def pack(X: T.Tensor((n, 4), T.int8), P: T.Tensor((n,), T.int32), U: T.Tensor((n, 4), T.int8),
             Hi: T.Tensor((n,), T.int32)):
        with T.Kernel(n // 128, threads=128) as bx:
            i = bx * 128 + T.get_thread_binding()
            p = T.alloc_var(T.int32, init=0)
            for q in T.unroll(4):
                p = p | T.shift_left(T.cast(X[i, q], T.int32) & 0xFF, 8 * q)
            P[i] = p
            for q in T.unroll(4):
                U[i, q] = T.cast(T.shift_right(T.shift_left(p, 24 - 8 * q), 24), T.int8)
            Hi[i] = T.cast(T.reinterpret(p, T.uint32) >> 28, T.int32)
    return pack


def narrow_casts_and_floor_ops(n=256):
    """Runtime int32 numerators and divisors of both signs: ``//`` and ``%`` (TileLang's
    floor division and modulo), ``T.truncdiv`` / ``T.truncmod``; float -> int32 casts of
    negatives (truncation), int32 -> uint8 (wraps mod 256), int32 -> int8 of 200 (wraps
    to -56), uint8 -> float through a table index; ``T.clamp`` of ints."""

    @T.prim_func
    def narrow(A: T.Tensor((n,), T.int32), D: T.Tensor((n,), T.int32), F: T.Tensor((n,), T.float32),
               O: T.Tensor((n, 8), T.int32), G: T.Tensor((n,), T.float32)):
        with T.Kernel(n // 64, threads=64) as bx:
            for t in T.Parallel(64):
                i = bx * 64 + t
                a = A[i]
                d = D[i]
                O[i, 0] = a // d
                O[i, 1] = a % d
                O[i, 2] = T.truncdiv(a, d)
                O[i, 3] = T.truncmod(a, d)
                O[i, 4] = T.cast(F[i], T.int32)
                O[i, 5] = T.cast(T.cast(a, T.uint8), T.int32)
                O[i, 6] = T.cast(T.cast(a + 200, T.int8), T.int32)
                O[i, 7] = T.clamp(a, -50, 50)
                G[i] = T.cast(T.cast(a, T.uint8), T.float32) * 0.5
    return narrow


@T.macro
def _quantize_rows(x, q, s, amax, bm, N):
    """Symmetric per-row int8: s = max(absmax / 127, 1e-8), q = clamp(round(x / s), -127, 127)."""
    T.reduce_absmax(x, amax, dim=1)
    for i in T.Parallel(bm):
        s[i] = T.max(amax[i] / 127.0, 1e-8)
    for i, j in T.Parallel(bm, N):
        q[i, j] = T.cast(T.clamp(T.round(x[i, j] / s[i]), -127.0, 127.0), T.int8)


def macro_quant_dequant_error(M=64, N=256, bm=8):
    """A ``T.macro`` quantizes each row to int8; the program writes Q and the scales, then
    dequantizes and writes each row's largest absolute error (``T.reduce_max``)."""

    @T.prim_func
    def qdq(X: T.Tensor((M, N), T.float32), Q: T.Tensor((M, N), T.int8), S: T.Tensor((M,), T.float32),
            Err: T.Tensor((M,), T.float32)):
        with T.Kernel(M // bm, threads=128) as bx:
            x = T.alloc_fragment((bm, N), T.float32)
            q = T.alloc_fragment((bm, N), T.int8)
            amax = T.alloc_fragment((bm,), T.float32)
            s = T.alloc_fragment((bm,), T.float32)
            e = T.alloc_fragment((bm, N), T.float32)
            em = T.alloc_fragment((bm,), T.float32)
            T.copy(X[bx * bm, 0], x)
            _quantize_rows(x, q, s, amax, bm, N)
            T.copy(q, Q[bx * bm, 0])
            for i, j in T.Parallel(bm, N):
                e[i, j] = T.abs(T.cast(q[i, j], T.float32) * s[i] - x[i, j])
            T.reduce_max(e, em, dim=1)
            for i in T.Parallel(bm):
                S[bx * bm + i] = s[i]
                Err[bx * bm + i] = em[i]
    return qdq


# ---- a second round: variable-K groups, shared transposes, block counting sort, ... ------
def grouped_gemm_variable_k(G=4, M=64, N=128, Ktot=416, bn=64, bk=64):
    """C[g] = A[:, Ko[g]:Ko[g+1]] @ B[Ko[g]:Ko[g+1], :]: the groups packed along K with a
    run-time K per group (K offsets in a tensor, a group may be empty or not a multiple of
    bk), ``T.Pipelined`` over ceildiv(K_g, bk) steps; the tiles loaded by hand under the
    group's K bound (a ``T.copy`` would read the next group's columns), C cleared when
    K_g is 0."""

    @T.prim_func
    def vk(A: T.Tensor((M, Ktot), T.float16), B: T.Tensor((Ktot, N), T.float16), Ko: T.Tensor((G + 1,), T.int32),
           C: T.Tensor((G, M, N), T.float32)):
        with T.Kernel(N // bn, G, threads=128) as (bx, g):
            k0 = Ko[g]
            kg = Ko[g + 1] - k0
            a_s = T.alloc_shared((M, bk), T.float16)
            b_s = T.alloc_shared((bk, bn), T.float16)
            acc = T.alloc_fragment((M, bn), T.float32)
            T.clear(acc)
            for t in T.Pipelined(T.ceildiv(kg, bk), num_stages=2):
                for i, j in T.Parallel(M, bk):
                    a_s[i, j] = T.if_then_else(t * bk + j < kg, A[i, k0 + t * bk + j], T.float16(0))
                for i, j in T.Parallel(bk, bn):
                    b_s[i, j] = T.if_then_else(t * bk + i < kg, B[k0 + t * bk + i, bx * bn + j], T.float16(0))
                T.gemm(a_s, b_s, acc)
            T.copy(acc, C[g, 0:M, bx * bn:(bx + 1) * bn])
    return vk


def transpose_tileop_shared(M=100, N=72, b=32):
    """``T.transpose`` (TileLang's tile op: dst[j, i] = src[i, j]) of a (b, b) shared tile
    into another, the tiles loaded and stored by ``T.copy`` with ragged edges (M = 100,
    N = 72), scaled by 2 on the way out through a fragment."""

    @T.prim_func
    def ttr(X: T.Tensor((M, N), T.float32), Y: T.Tensor((N, M), T.float32)):
        with T.Kernel(T.ceildiv(M, b), T.ceildiv(N, b), threads=128) as (bx, by):
            s = T.alloc_shared((b, b), T.float32)
            st = T.alloc_shared((b, b), T.float32)
            f = T.alloc_fragment((b, b), T.float32)
            T.copy(X[bx * b, by * b], s)
            T.transpose(s, st)
            T.copy(st, f)
            for i, j in T.Parallel(b, b):
                f[i, j] = f[i, j] * 2.0
            T.copy(f, Y[by * b, bx * b])
    return ttr


def block_counting_sort_u8(n=2000, per=512, threads=256):
    """Each block sorts its chunk of uint8 keys (the last one ragged): a 256-bin shared
    histogram by ``T.atomic_add``, ``T.cumsum`` of it made exclusive, then each key's slot
    base[key] + atomic_add(cursor[key], 1, return_prev=True) in shared (ties in any order:
    equal keys), written back in order; the block's count of each key also goes to a
    global histogram."""
    nb = (n + per - 1) // per

    @T.prim_func
    def csort(X: T.Tensor((n,), T.uint8), Y: T.Tensor((n,), T.uint8), H: T.Tensor((256,), T.int32)):
        with T.Kernel(nb, threads=threads) as bx:
            tx = T.get_thread_binding()
            hist = T.alloc_shared((256,), T.int32)
            base = T.alloc_shared((256,), T.int32)
            cur = T.alloc_shared((256,), T.int32)
            out = T.alloc_shared((per,), T.uint8)
            T.clear(hist)
            T.clear(cur)
            T.sync_threads()
            for r in T.serial(per // threads):
                i = bx * per + r * threads + tx
                if i < n:
                    T.atomic_add(hist[T.cast(X[i], T.int32)], 1)
            T.sync_threads()
            T.copy(hist, base)
            T.cumsum(base, dim=0)
            for b in T.Parallel(256):
                base[b] = base[b] - hist[b]
                T.atomic_add(H[b], hist[b])
            T.sync_threads()
            for r in T.serial(per // threads):
                i = bx * per + r * threads + tx
                if i < n:
                    key = T.cast(X[i], T.int32)
                    slot = base[key] + T.atomic_add(cur[key], 1, return_prev=True)
                    out[slot] = X[i]
            T.sync_threads()
            for r in T.serial(per // threads):
                i = bx * per + r * threads + tx
                if i < n:
                    Y[i] = out[r * threads + tx]
    return csort


def causal_depthwise_conv1d_dynamic(D=64, KW=4, bl=32):
    """Channels-last causal depthwise conv1d over a ``T.dynamic`` length L: out[l, d] =
    sum_k w[d, k] * x[l - (KW - 1) + k, d] (x before 0 is 0), a (bl + KW - 1, D) shared halo
    tile loaded with ``T.if_then_else`` on both ends, SiLU applied."""
    L = T.dynamic("L")

    @T.prim_func
    def cconv(X: T.Tensor((L, D), T.float32), Wt: T.Tensor((D, KW), T.float32), Y: T.Tensor((L, D), T.float32)):
        with T.Kernel(T.ceildiv(L, bl), threads=128) as bx:
            h = T.alloc_shared((bl + KW - 1, D), T.float32)
            w_s = T.alloc_shared((D, KW), T.float32)
            T.copy(Wt, w_s)
            for r, d in T.Parallel(bl + KW - 1, D):
                l = bx * bl + r - (KW - 1)
                h[r, d] = T.if_then_else(l >= 0 and l < L, X[T.max(l, 0), d], T.float32(0))
            for r, d in T.Parallel(bl, D):
                acc = T.alloc_var(T.float32, init=0.0)
                for k in T.serial(KW):
                    acc += w_s[d, k] * h[r + k, d]
                if bx * bl + r < L:
                    Y[bx * bl + r, d] = acc * T.sigmoid(acc)
    return cconv


def gemm_u8_activation_zero_point(M=128, N=128, K=256, bm=64, bn=64, bk=64):
    """Asymmetric uint8 activations (a zero point per row) times symmetric int8 weights, on
    the int8 x int8 GEMM: A - 128 staged in shared as int8 (exact), W's column sums over K
    accumulated in a shared int32 vector beside the GEMM (one thread a column), then
    C = float(acc + (128 - za[row]) * colsum[col]) * sa[row] * sw[col]."""

    @T.prim_func
    def u8zp(A: T.Tensor((M, K), T.uint8), W: T.Tensor((N, K), T.int8), Za: T.Tensor((M,), T.int32),
             Sa: T.Tensor((M,), T.float32), Sw: T.Tensor((N,), T.float32), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            a_s = T.alloc_shared((bm, bk), T.int8)
            w_s = T.alloc_shared((bn, bk), T.int8)
            acc = T.alloc_fragment((bm, bn), T.int32)
            csum = T.alloc_shared((bn,), T.int32)
            T.clear(acc)
            T.clear(csum)
            for k in T.Pipelined(K // bk, num_stages=2):
                for i, j in T.Parallel(bm, bk):
                    a_s[i, j] = T.cast(T.cast(A[by * bm + i, k * bk + j], T.int32) - 128, T.int8)
                T.copy(W[bx * bn, k * bk], w_s)
                T.gemm(a_s, w_s, acc, transpose_B=True)
                for n in T.Parallel(bn):
                    for j in T.serial(bk):
                        csum[n] += T.cast(w_s[n, j], T.int32)
            for i, j in T.Parallel(bm, bn):
                r = by * bm + i
                v = acc[i, j] + (128 - Za[r]) * csum[j]
                C[r, bx * bn + j] = T.cast(v, T.float32) * Sa[r] * Sw[bx * bn + j]
    return u8zp


# ---- eager @tilecute.jit kernels ---------------------------------------------------------
@tilecute.jit
def jit_rowwise_fp8_quant(X, bm: int = 4):
    """Eager style: per row, scale = max(absmax / 448, 1e-12) and Q = e4m3(x / scale); two
    ``T.empty`` outputs returned (Q, S); M from X's shape (ragged against bm)."""
    M, N = T.const("M, N")
    X: T.Tensor((M, N), T.bfloat16)
    Q = T.empty((M, N), T.float8_e4m3)
    S = T.empty((M,), T.float32)
    with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
        x = T.alloc_fragment((bm, N), T.float32)
        q = T.alloc_fragment((bm, N), T.float8_e4m3)
        am = T.alloc_fragment((bm,), T.float32)
        T.copy(X[bx * bm, 0], x)
        T.reduce_absmax(x, am, dim=1)
        for i in T.Parallel(bm):
            am[i] = T.max(am[i] / 448.0, 1e-12)
        for i, j in T.Parallel(bm, N):
            q[i, j] = T.cast(x[i, j] / am[i], T.float8_e4m3)
        T.copy(q, Q[bx * bm, 0])
        for i in T.Parallel(bm):
            if bx * bm + i < M:
                S[bx * bm + i] = am[i]
    return Q, S


def jit_rowwise_fp8_quant_kernel():
    return jit_rowwise_fp8_quant.compile(M=130, N=512)


@tilecute.jit
def jit_csr_segment_max(Vals, Offsets, warps: int = 4):
    """Eager style with a ``T.dynamic`` value count: the max of each CSR segment
    Vals[Offsets[s]:Offsets[s + 1]] (-inf for an empty one), one warp a segment, lanes
    striding a ``while`` loop over it, ``T.warp_reduce_max``."""
    nnz = T.dynamic("nnz")
    S = T.const("S")
    Vals: T.Tensor((nnz,), T.float32)
    Offsets: T.Tensor((S + 1,), T.int32)
    Out = T.empty((S,), T.float32)
    with T.Kernel(T.ceildiv(S, warps), threads=warps * 32) as bx:
        tx = T.get_thread_binding()
        s = bx * warps + tx // 32
        lane = tx % 32
        m = T.alloc_var(T.float32, init=-T.infinity(T.float32))
        if s < S:
            p = T.alloc_var(T.int32)
            p = Offsets[s] + lane
            while p < Offsets[s + 1]:
                m = T.max(m, Vals[p])
                p += 32
        r = T.warp_reduce_max(m)
        if s < S and lane == 0:
            Out[s] = r
    return Out


def jit_csr_segment_max_kernel():
    return jit_csr_segment_max.compile(S=37)
