"""A fiftieth set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang): GEMMs at the edges of their shapes and schedules -- a one-row decode GEMM on a
16-row tile with four pipeline stages, a K tail and N not a multiple of 8; 48 rows on a 64-row
wgmma tile with a float16 accumulator and one stage; A given (K, M) (``transpose_A``) in
bfloat16 on wgmma with eight rows; a router's logits with the gate stored (D, 24) (B
MN-major and 48 bytes wide); an fp32 accumulator written as bfloat16 after a fused bias
and residual, N ragged (read from global, and staged through shared tiles); an fp8 GEMM whose B is (K, N) (MN-major, which wgmma's 8-bit operands
never are); ``policy=Square`` on eight warps with ``k_pack=2``; ``FullCol`` on two warps;
a 256-row tile over two warpgroups; per-K-block scales with ``clear_accum=True`` inside the
K loop; stream-K whose K range per block runs under ``T.Pipelined`` with a runtime extent and
atomics for the fixup, and stream-K ahead of data-parallel tiles in one launch (16-row
tiles on two warps); a grouped GEMM over a ``T.dynamic`` number of rows with an offsets
tensor; a batched GEMM with the batch in blockIdx.z whose output is written transposed; and
``T.use_swizzle`` with panels of 16 (row order) and 8 (column order) over ragged grids.

The file reads as TileLang after swapping its two import lines (``import tilelang`` /
``import tilelang.language as T``); ``tests/test_unseen_programs50.py`` builds each to a cubin
on the CPU, checks what decides the result in the generated source, and on a GPU compares it
with torch."""

import tilecute as tilelang
import tilecute.language as T


# ---- decode: one row on a 16-row tile, four stages, K and N ragged ----------------------------
@tilelang.jit(out_idx=[-1])
def decode_gemm_m1_bm16(M=1, N=100, K=300, block_M=16, block_N=32, block_K=64, num_stages=4):
    """y = x @ W^T for a single token: a 16-row tile (rows past M read as zeros and are never
    written), K = 300 leaves a 44-wide tail, N = 100 is not a multiple of 8."""

    @T.prim_func
    def main(x: T.Tensor((M, K), T.float16), W: T.Tensor((N, K), T.float16), y: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            x_s = T.alloc_shared((block_M, block_K), T.float16)
            W_s = T.alloc_shared((block_N, block_K), T.float16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(x[by * block_M, ko * block_K], x_s)
                T.copy(W[bx * block_N, ko * block_K], W_s)
                T.gemm(x_s, W_s, acc, transpose_B=True)
            T.copy(acc, y[by * block_M, bx * block_N])

    return main


# ---- 48 rows, float16 accumulator, one stage ----------------------------------------------------
@tilelang.jit(out_idx=[-1])
def gemm_m48_half_accum_one_stage(M=48, N=96, K=176, block_M=64, block_N=64, block_K=32, num_stages=1):
    """C = A @ B with B given (K, N) and a float16 accumulator (``accum_dtype=T.float16``);
    ``num_stages=1`` (no overlap); M = 48 fills three quarters of the tile, N = 96 half of the
    second column of tiles, K = 176 half of the last K step."""
    accum_dtype = T.float16

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            B_s = T.alloc_shared((block_K, block_N), T.float16)
            C_l = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_l)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, ko * block_K], A_s)
                T.copy(B[ko * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * block_M, bx * block_N])

    return main


# ---- A stored (K, M): transpose_A on wgmma, eight rows, K ragged ----------------------------------
@tilelang.jit(out_idx=[-1])
def gemm_transpose_a_bf16_m8(M=8, N=136, K=200, block_M=64, block_N=64, block_K=64, num_stages=2):
    """C = A^T @ B^T with A stored (K, M) (a weight-gradient layout) and M = 8; bfloat16 in,
    float32 accumulate, bfloat16 out."""

    @T.prim_func
    def main(A: T.Tensor((K, M), T.bfloat16), B: T.Tensor((N, K), T.bfloat16), C: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_K, block_M), T.bfloat16)
            B_s = T.alloc_shared((block_N, block_K), T.bfloat16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[ko * block_K, by * block_M], A_s)
                T.copy(B[bx * block_N, ko * block_K], B_s)
                T.gemm(A_s, B_s, acc, transpose_A=True, transpose_B=True)
            T.copy(acc, C[by * block_M, bx * block_N])

    return main


# ---- B stored (K, N) with 24 columns: a router's logits ----------------------------------------
@tilelang.jit(out_idx=[-1])
def router_logits_kn_24_experts(D=512, E=24, block_M=64, block_K=64):
    """logits = x @ Wg for 24 experts, the gate stored (D, E) (no ``transpose_B``): B's tile
    is 24 float16 columns (48 bytes) wide, which no 32-byte swizzle chunk tiles.  T.dynamic
    tokens."""
    M = T.dynamic("tokens")

    @T.prim_func
    def main(x: T.Tensor((M, D), T.float16), Wg: T.Tensor((D, E), T.float16), logits: T.Tensor((M, E), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bm:
            x_s = T.alloc_shared((block_M, block_K), T.float16)
            W_s = T.alloc_shared((block_K, E), T.float16)
            acc = T.alloc_fragment((block_M, E), T.float32)
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(D, block_K), num_stages=3):
                T.copy(x[bm * block_M, ko * block_K], x_s)
                T.copy(Wg[ko * block_K, 0], W_s)
                T.gemm(x_s, W_s, acc)
            T.copy(acc, logits[bm * block_M, 0])

    return main


# ---- bf16 out of an fp32 accumulator: bias and residual fused ----------------------------------
@tilelang.jit(out_idx=[-1])
def gemm_bias_residual_bf16(M=200, N=250, K=256, block_M=128, block_N=128, block_K=64, num_stages=3):
    """out = bf16(x @ W^T + bias + residual): the bias (float32, per column) and the residual
    (bfloat16, per element) are read in the epilogue straight from global memory; N = 250
    ragged (the residual's rows are 500 bytes: no 16-byte multiple)."""

    @T.prim_func
    def main(x: T.Tensor((M, K), T.bfloat16), W: T.Tensor((N, K), T.bfloat16), bias: T.Tensor((N,), T.float32),
             res: T.Tensor((M, N), T.bfloat16), out: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
            x_s = T.alloc_shared((block_M, block_K), T.bfloat16)
            W_s = T.alloc_shared((block_N, block_K), T.bfloat16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(x[by * block_M, ko * block_K], x_s)
                T.copy(W[bx * block_N, ko * block_K], W_s)
                T.gemm(x_s, W_s, acc, transpose_B=True)
            for i, j in T.Parallel(block_M, block_N):
                m = by * block_M + i
                n = bx * block_N + j
                if m < M and n < N:
                    out[m, n] = T.cast(acc[i, j] + bias[n] + T.cast(res[m, n], T.float32), T.bfloat16)

    return main


@tilelang.jit(out_idx=[-1])
def gemm_bias_residual_staged_bf16(M=200, N=250, K=192, block_M=64, block_N=128, block_K=64, num_stages=2):
    """The same epilogue staged through shared memory: the bias slice (``T.copy`` of a 1-D
    range) and the residual tile come into shared tiles during the K loop's shadow, the
    accumulator takes both, goes to a bfloat16 shared tile and out by one ``T.copy``; the
    ragged N (250) cuts the bias, residual and output tiles."""

    @T.prim_func
    def main(x: T.Tensor((M, K), T.bfloat16), W: T.Tensor((N, K), T.bfloat16), bias: T.Tensor((N,), T.bfloat16),
             res: T.Tensor((M, N), T.bfloat16), out: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            x_s = T.alloc_shared((block_M, block_K), T.bfloat16)
            W_s = T.alloc_shared((block_N, block_K), T.bfloat16)
            bias_s = T.alloc_shared((block_N,), T.bfloat16)
            res_s = T.alloc_shared((block_M, block_N), T.bfloat16)
            out_s = T.alloc_shared((block_M, block_N), T.bfloat16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.copy(bias[bx * block_N], bias_s)
            T.copy(res[by * block_M, bx * block_N], res_s)
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(x[by * block_M, ko * block_K], x_s)
                T.copy(W[bx * block_N, ko * block_K], W_s)
                T.gemm(x_s, W_s, acc, transpose_B=True)
            for i, j in T.Parallel(block_M, block_N):
                acc[i, j] += T.cast(bias_s[j], T.float32) + T.cast(res_s[i, j], T.float32)
            T.copy(acc, out_s)
            T.copy(out_s, out[by * block_M, bx * block_N])

    return main


# ---- fp8 with B given (K, N) ---------------------------------------------------------------------
@tilelang.jit(out_idx=[-1])
def gemm_fp8_b_kn(M=128, N=128, K=256, block_M=64, block_N=64, block_K=64, num_stages=2):
    """e4m3 x e4m3 -> float32 with B stored (K, N) (no ``transpose_B``): B's tile is N-major,
    which wgmma takes for 16-bit operands only."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float8_e4m3), B: T.Tensor((K, N), T.float8_e4m3), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.float8_e4m3)
            B_s = T.alloc_shared((block_K, block_N), T.float8_e4m3)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, ko * block_K], A_s)
                T.copy(B[ko * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * block_M, bx * block_N])

    return main


# ---- Square on eight warps, k_pack=2 -------------------------------------------------------------
@tilelang.jit(out_idx=[-1])
def gemm_square_8warps_kpack2(M=256, N=320, K=192, block_M=128, block_N=128, block_K=64, threads=256):
    """bf16 GEMM, eight warps with ``policy=Square`` and ``k_pack=2`` (ROCm's packing: no
    meaning on NVIDIA); N = 320 leaves half a tile."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.bfloat16), B: T.Tensor((N, K), T.bfloat16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.bfloat16)
            B_s = T.alloc_shared((block_N, block_K), T.bfloat16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, ko * block_K], A_s)
                T.copy(B[bx * block_N, ko * block_K], B_s)
                T.gemm(A_s, B_s, acc, transpose_B=True, policy=T.GemmWarpPolicy.Square, k_pack=2)
            T.copy(acc, C[by * block_M, bx * block_N])

    return main


# ---- FullCol on two warps ------------------------------------------------------------------------
@tilelang.jit(out_idx=[-1])
def gemm_fullcol_two_warps(M=96, N=80, K=128, block_M=32, block_N=64, block_K=32, threads=64):
    """A 32 x 64 tile on two warps side by side along N (``FullCol``); N = 80 ragged."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((N, K), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            B_s = T.alloc_shared((block_N, block_K), T.float16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, ko * block_K], A_s)
                T.copy(B[bx * block_N, ko * block_K], B_s)
                T.gemm(A_s, B_s, acc, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
            T.copy(acc, C[by * block_M, bx * block_N])

    return main


# ---- 256 rows on two warpgroups ------------------------------------------------------------------
@tilelang.jit(out_idx=[-1])
def gemm_bm256_two_warpgroups(M=512, N=384, K=256, block_M=256, block_N=128, block_K=64):
    """A 256 x 128 tile on 256 threads (two warpgroups stacked along M); N = 384 three tiles."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            B_s = T.alloc_shared((block_K, block_N), T.float16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, ko * block_K], A_s)
                T.copy(B[ko * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * block_M, bx * block_N])

    return main


# ---- per-K-block scales: clear_accum inside the K loop -------------------------------------------
@tilelang.jit(out_idx=[-1])
def gemm_kblock_scales_clear_accum(M=96, N=128, K=320, block_M=32, block_N=64, block_K=64):
    """out = sum_k s[k] * (A_k @ B_k^T): each K block's product lands in its own fragment
    (``clear_accum=True`` clears it first) and is added, scaled by the block's scale, into the
    accumulator; a 32-row tile on four warps (``FullCol``)."""
    k_blocks = T.ceildiv(K, block_K)

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((N, K), T.float16), s: T.Tensor((k_blocks,), T.float32),
             out: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            B_s = T.alloc_shared((block_N, block_K), T.float16)
            part = T.alloc_fragment((block_M, block_N), T.float32)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(acc)
            for ko in T.Pipelined(k_blocks, num_stages=2):
                T.copy(A[by * block_M, ko * block_K], A_s)
                T.copy(B[bx * block_N, ko * block_K], B_s)
                T.gemm(A_s, B_s, part, transpose_B=True, policy=T.GemmWarpPolicy.FullCol, clear_accum=True)
                for i, j in T.Parallel(block_M, block_N):
                    acc[i, j] += part[i, j] * s[ko]
            T.copy(acc, out[by * block_M, bx * block_N])

    return main


# ---- stream-K: a runtime K range per tile under T.Pipelined, atomics for the fixup --------------
@tilelang.jit
def streamk_pipelined_ragged(M=200, N=192, K=448, block_M=64, block_N=64, block_K=64, sms=7):
    """Stream-K over (tiles x K blocks) = 4 * 3 * 7 = 84 iterations shared by 7 blocks
    (12 each); a block walks its iterations tile by tile, each tile's K range
    [k0, k_end) under ``T.Pipelined`` with a runtime extent, and adds the partial tile into C
    (zeroed by the caller) with a float32 ``T.atomic_add``; M = 200 ragged."""
    tiles_n = T.ceildiv(N, block_N)
    k_iters = T.ceildiv(K, block_K)
    total = T.ceildiv(M, block_M) * tiles_n * k_iters
    per = T.ceildiv(total, sms)

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((N, K), T.float16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(sms, threads=128) as pid:
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            B_s = T.alloc_shared((block_N, block_K), T.float16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            it = T.alloc_var(T.int32)
            stop = T.alloc_var(T.int32)
            it = pid * per
            stop = T.min(it + per, total)
            while it < stop:
                tile = it // k_iters
                k0 = it % k_iters
                k_end = T.min(k_iters, k0 + stop - it)
                tm = tile // tiles_n
                tn = tile % tiles_n
                T.clear(acc)
                for kk in T.Pipelined(k_end - k0, num_stages=2):
                    T.copy(A[tm * block_M, (k0 + kk) * block_K], A_s)
                    T.copy(B[tn * block_N, (k0 + kk) * block_K], B_s)
                    T.gemm(A_s, B_s, acc, transpose_B=True)
                for i, j in T.Parallel(block_M, block_N):
                    if tm * block_M + i < M:
                        T.atomic_add(C[tm * block_M + i, tn * block_N + j], acc[i, j])
                it = it + (k_end - k0)

    return main


# ---- stream-K then data-parallel tiles in one launch, 16-row tiles on two warps ------------------
@tilelang.jit
def streamk_hybrid_dp_tail(M=96, N=384, K=320, block_M=16, block_N=128, block_K=32, programs=4):
    """Of the 6 x 3 = 18 output tiles, the first 6 (18 % 4, plus one round of 4 as there are
    more than 4 left) are shared stream-K style by the 4 programs (60 K iterations, 15
    each); a program's range inside one tile is a ``T.Pipelined`` loop of runtime extent,
    stored plainly when it covers the whole tile and added by float32 atomics otherwise;
    then the programs take the other 12 tiles whole, one each per round (``T.serial`` over
    3 rounds, ``num_stages=1``, their own shared tiles).  The counters are one-element
    ``T.alloc_fragment(..., "local")`` buffers; 64 threads."""
    tiles_n = T.ceildiv(N, block_N)
    iters = T.ceildiv(K, block_K)
    total_tiles = T.ceildiv(M, block_M) * tiles_n
    sk_tiles = total_tiles % programs
    if total_tiles - sk_tiles > programs:
        sk_tiles += programs
    per_program = sk_tiles * iters // programs
    extra = sk_tiles * iters % programs
    dp_rounds = (total_tiles - sk_tiles) // programs

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((N, K), T.float16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(programs, threads=64) as pid:
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            B_s = T.alloc_shared((block_N, block_K), T.float16)
            A_dp = T.alloc_shared((block_M, block_K), T.float16)
            B_dp = T.alloc_shared((block_N, block_K), T.float16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            it = T.alloc_fragment((1,), T.int32, "local")
            end = T.alloc_fragment((1,), T.int32, "local")
            it[0] = pid * per_program + T.min(pid, extra)
            last = (pid + 1) * per_program + T.min(pid + 1, extra)
            while it[0] < last:
                end[0] = T.min(it[0] + (iters - it[0] % iters), last)
                tile = it[0] // iters
                k0 = it[0] % iters
                tm = tile // tiles_n
                tn = tile % tiles_n
                T.clear(acc)
                for k in T.Pipelined(end[0] - it[0], num_stages=2):
                    T.copy(A[tm * block_M, (k0 + k) * block_K], A_s)
                    T.copy(B[tn * block_N, (k0 + k) * block_K], B_s)
                    T.gemm(A_s, B_s, acc, transpose_B=True)
                if k0 == 0 and end[0] % iters == 0:
                    T.copy(acc, C[tm * block_M, tn * block_N])
                else:
                    for i, j in T.Parallel(block_M, block_N):
                        T.atomic_add(C[tm * block_M + i, tn * block_N + j], acc[i, j])
                it[0] = end[0]
            for r in T.serial(dp_rounds):
                tile = sk_tiles + r * programs + pid
                tm = tile // tiles_n
                tn = tile % tiles_n
                T.clear(acc)
                for k in T.Pipelined(iters, num_stages=1):
                    T.copy(A[tm * block_M, k * block_K], A_dp)
                    T.copy(B[tn * block_N, k * block_K], B_dp)
                    T.gemm(A_dp, B_dp, acc, transpose_B=True)
                T.copy(acc, C[tm * block_M, tn * block_N])

    return main


# ---- grouped GEMM: a T.dynamic number of rows, groups by an offsets tensor ----------------------
@tilelang.jit(out_idx=[-1])
def grouped_gemm_dynamic_rows(G=3, N=128, K=192, block_M=64, block_N=64, block_K=64):
    """Rows [offsets[g], offsets[g + 1]) of A go through W[g]: the grid has
    ceildiv(rows, block_M) + G - 1 row tiles (enough for every group's own tail); a block finds
    its group by walking the tile counts, its rows from the group's start, and masks the rows
    past the group's end on the load and the store."""
    rows = T.dynamic("rows")

    @T.prim_func
    def main(A: T.Tensor((rows, K), T.float16), W: T.Tensor((G, N, K), T.float16),
             offsets: T.Tensor((G + 1,), T.int32), C: T.Tensor((rows, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(rows, block_M) + G - 1, threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            W_s = T.alloc_shared((block_N, block_K), T.float16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            g = T.alloc_var(T.int32)
            first = T.alloc_var(T.int32)
            g = -1
            first = 0
            for gi in T.serial(G):
                n_tiles = T.ceildiv(offsets[gi + 1] - offsets[gi], block_M)
                if g < 0 and by < first + n_tiles:
                    g = gi
                if g < 0:
                    first = first + n_tiles
            if g >= 0:
                start = offsets[g] + (by - first) * block_M
                end = offsets[g + 1]
                T.clear(acc)
                for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                    for i, k in T.Parallel(block_M, block_K):
                        A_s[i, k] = T.if_then_else(start + i < end, A[start + i, ko * block_K + k], T.float16(0))
                    T.copy(W[g, bx * block_N, ko * block_K], W_s)
                    T.gemm(A_s, W_s, acc, transpose_B=True)
                for i, j in T.Parallel(block_M, block_N):
                    if start + i < end:
                        C[start + i, bx * block_N + j] = T.cast(acc[i, j], T.float16)

    return main


# ---- batched, batch in blockIdx.z, output written transposed -------------------------------------
@tilelang.jit(out_idx=[-1])
def bmm_z_batch_transposed_out(Bt=3, M=100, N=72, K=96, block_M=64, block_N=64, block_K=32):
    """Ct[b] = (A[b] @ B[b])^T over a (N-tiles, M-tiles, batch) grid: the accumulator goes to
    a (block_N, block_M) shared tile transposed, then out to Ct[b] (N, M); M and N ragged."""

    @T.prim_func
    def main(A: T.Tensor((Bt, M, K), T.float16), B: T.Tensor((Bt, K, N), T.float16),
             Ct: T.Tensor((Bt, N, M), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), Bt, threads=128) as (bx, by, bz):
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            B_s = T.alloc_shared((block_K, block_N), T.float16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            out_s = T.alloc_shared((block_N, block_M), T.float16)
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[bz, by * block_M, ko * block_K], A_s)
                T.copy(B[bz, ko * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, acc)
            for i, j in T.Parallel(block_M, block_N):
                out_s[j, i] = acc[i, j]
            T.copy(out_s, Ct[bz, bx * block_N, by * block_M])

    return main


# ---- T.use_swizzle: panels of 16 by rows, of 8 by columns, ragged grids --------------------------
def _swizzled_gemm(M, N, K, panel, order, block_M, block_N, block_K):
    """A plain GEMM whose blocks run in panels (``T.use_swizzle(panel, order)``)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((N, K), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            B_s = T.alloc_shared((block_N, block_K), T.float16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.use_swizzle(panel, order=order)
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, ko * block_K], A_s)
                T.copy(B[bx * block_N, ko * block_K], B_s)
                T.gemm(A_s, B_s, acc, transpose_B=True)
            T.copy(acc, C[by * block_M, bx * block_N])

    return main


@tilelang.jit(out_idx=[-1])
def gemm_swizzle_panel16_row(M=1344, N=320, K=128, block_M=64, block_N=64, block_K=64):
    """``T.use_swizzle(16)`` (row order) over a 5 x 21 grid: a panel of 16 block rows, then
    one of 5 walked from the far column."""
    return _swizzled_gemm(M, N, K, 16, "row", block_M, block_N, block_K)


@tilelang.jit(out_idx=[-1])
def gemm_swizzle_panel8_column(M=320, N=1088, K=128, block_M=64, block_N=64, block_K=64):
    """``T.use_swizzle(8, order="column")`` over a 17 x 5 grid: panels of 8, 8 and 1 block
    columns, the second walked from the bottom row."""
    return _swizzled_gemm(M, N, K, 8, "column", block_M, block_N, block_K)
