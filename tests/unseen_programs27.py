"""A twenty-seventh set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang): whole kernels of medium size as TileLang's users write them, each combining
several features.  GEMMs with both operands transposed and a bias + tanh-GELU epilogue over
ragged M / N / K under ``T.use_swizzle(order="col")``; a ``T.symbolic`` M with
``T.annotate_layout`` swizzled tiles and a ReLU epilogue through a shared tile; split-K by tile
``T.atomic_add`` of a fragment over ``T.Buffer`` annotations and a run-time pipelined trip
count; int8 x int8 with row / column scales (``k_pack=2``); an fp8 GEMM scaled by a
``T.float32`` scalar parameter; a packed-uint4 dequantizing GEMM with group scales.  Row
kernels: an RMSNorm over a ``T.symbolic`` row count, a chunked LayerNorm over a row that is
no multiple of the chunk (``T.reduce_sum(clear=False)``), an online softmax with
``T.Pipelined``, top-k by repeated ``T.reduce_max`` / ``T.reduce_min`` of an index, a
chunked ``T.cumsum`` with a ``T.alloc_var`` carry.  Attention: a causal GQA flash
attention at a sequence length that is no multiple of the tile, a paged-KV decode with a
block table split over KV and its combine kernel.  A fused residual add with
``T.vectorized`` loads, a lane-strided ``T.serial(a, b, step)`` over a ``T.dynamic`` width and
a ``T.int32`` scalar parameter.

``tests/test_unseen_programs27.py`` builds each to a cubin on the CPU, checks what matters in
the generated source, and on a GPU compares it with a torch reference."""

import math

import tilecute
import tilecute.language as T
from tilecute.layout import make_swizzled_layout

LOG2E = 1.44269504


# ---- GEMMs ---------------------------------------------------------------------------------
@tilecute.jit(out_idx=[3])
def gemm_tt_bias_gelu(M=200, N=136, K=200, bm=64, bn=64, bk=32, stages=3):
    """C = gelu_tanh(A^T @ B^T + bias) with A stored (K, M) and B stored (N, K), every size
    ragged against its tile, blocks in column panels of 3."""

    @T.prim_func
    def main(A: T.Tensor((K, M), T.float16), B: T.Tensor((N, K), T.float16), bias: T.Tensor((N,), T.float16),
             C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bk, bm), T.float16)
            B_s = T.alloc_shared((bn, bk), T.float16)
            C_l = T.alloc_fragment((bm, bn), T.float32)
            T.use_swizzle(panel_size=3, order="col")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[k * bk, by * bm], A_s)
                T.copy(B[bx * bn, k * bk], B_s)
                T.gemm(A_s, B_s, C_l, transpose_A=True, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
            for i, j in T.Parallel(bm, bn):
                x = C_l[i, j] + bias[bx * bn + j]
                C_l[i, j] = 0.5 * x * (1.0 + T.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))
            T.copy(C_l, C[by * bm, bx * bn])

    return main


@tilecute.jit(out_idx=[2])
def gemm_symbolic_m_swizzled(N=256, K=256, bm=128, bn=128, bk=64):
    """C = relu(A @ B) in bfloat16 for a run-time M, the operand tiles swizzled by annotation,
    the result staged through a shared tile."""
    M = T.symbolic("m")

    @T.prim_func
    def main(A: T.Tensor((M, K), T.bfloat16), B: T.Tensor((K, N), T.bfloat16), C: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=256) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.bfloat16)
            B_s = T.alloc_shared((bk, bn), T.bfloat16)
            C_s = T.alloc_shared((bm, bn), T.bfloat16)
            C_l = T.alloc_fragment((bm, bn), T.float32)
            T.annotate_layout({A_s: make_swizzled_layout(A_s), B_s: make_swizzled_layout(B_s)})
            T.clear(C_l)
            for ko in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm, ko * bk], A_s)
                T.copy(B[ko * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(bm, bn):
                C_l[i, j] = T.max(C_l[i, j], 0)
            T.copy(C_l, C_s)
            T.copy(C_s, C[by * bm, bx * bn])

    return main


@tilecute.jit
def splitk_atomic_gemm(M=128, N=192, K=1000, bm=64, bn=64, bk=64, splits=3):
    """C += A @ B with K split over blockIdx.z: each split runs its own run of K tiles (the
    last split fewer, K's last tile ragged) and adds its fragment into C atomically."""
    k_tiles = (K + bk - 1) // bk
    per_split = (k_tiles + splits - 1) // splits

    @T.prim_func
    def main(A: T.Buffer((M, K), "float16"), B: T.Buffer((K, N), "float16"), C: T.Buffer((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), splits, threads=128) as (bx, by, bz):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            C_l = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_l)
            for ko in T.Pipelined(T.min(per_split, k_tiles - bz * per_split), num_stages=2):
                kt = bz * per_split + ko
                T.copy(A[by * bm, kt * bk], A_s)
                T.copy(B[kt * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l)
            T.atomic_add(C[by * bm, bx * bn], C_l)

    return main


@tilecute.jit(out_idx=[4])
def int8_gemm_rowcol_scale(M=256, N=128, K=512, bm=128, bn=128, bk=64):
    """C = fp16((A @ B^T) * sa[m] * sb[n]) of int8 A, B (int32 accumulation), k_pack=2
    (AMD's packing, the same GEMM on NVIDIA)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.int8), B: T.Tensor((N, K), T.int8), sa: T.Tensor((M,), T.float32),
             sb: T.Tensor((N,), T.float32), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=256) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.int8)
            B_s = T.alloc_shared((bn, bk), T.int8)
            acc = T.alloc_fragment((bm, bn), T.int32)
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=4):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[bx * bn, k * bk], B_s)
                T.gemm(A_s, B_s, acc, transpose_B=True, k_pack=2)
            for i, j in T.Parallel(bm, bn):
                C[by * bm + i, bx * bn + j] = T.cast(T.cast(acc[i, j], "float32") * sa[by * bm + i] * sb[bx * bn + j],
                                                     "float16")

    return main


@tilecute.jit(out_idx=[2])
def fp8_gemm_scaled(M=128, N=256, K=256, bm=64, bn=128, bk=128):
    """C = bf16(scale * (A @ B^T)) of e4m3 A, B; ``scale`` a float32 scalar argument after the
    output."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float8_e4m3), B: T.Tensor((N, K), T.float8_e4m3),
             C: T.Tensor((M, N), T.bfloat16), scale: T.float32):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.float8_e4m3)
            B_s = T.alloc_shared((bn, bk), T.float8_e4m3)
            C_l = T.alloc_fragment((bm, bn), T.float32)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[bx * bn, k * bk], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=True)
            for i, j in T.Parallel(bm, bn):
                C_l[i, j] = C_l[i, j] * scale
            T.copy(C_l, C[by * bm, bx * bn])

    return main


@tilecute.jit(out_idx=[3])
def dequant_uint4_gemm(M=128, N=256, K=512, bm=64, bn=128, bk=64, g=128):
    """C = A @ W^T where W[n, k] = (nibble(k) - 8) * S[n, k // g]: two 4-bit values per byte of
    Bq (the low nibble first), dequantized into a shared tile inside the pipelined loop."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), Bq: T.Tensor((N, K // 2), T.uint8), S: T.Tensor((N, K // g), T.float16),
             C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.float16)
            Bq_s = T.alloc_shared((bn, bk // 2), T.uint8)
            B_s = T.alloc_shared((bn, bk), T.float16)
            C_l = T.alloc_fragment((bm, bn), T.float32)
            T.clear(C_l)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(Bq[bx * bn, k * bk // 2], Bq_s)
                for i, j in T.Parallel(bn, bk):
                    q = (Bq_s[i, j // 2] >> ((j % 2) * 4)) & 0xF
                    B_s[i, j] = T.cast(T.cast(q, "int32") - 8, "float16") * S[bx * bn + i, (k * bk + j) // g]
                T.gemm(A_s, B_s, C_l, transpose_B=True)
            T.copy(C_l, C[by * bm, bx * bn])

    return main


# ---- row kernels ---------------------------------------------------------------------------
@tilecute.jit(out_idx=[2])
def rmsnorm_symbolic_rows(N=1024, bm=2, eps=1e-6):
    """Y = X * rsqrt(mean(X^2) + eps) * W over a run-time row count (the last block ragged)."""
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), T.bfloat16), W: T.Tensor((N,), T.bfloat16), Y: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
            x_s = T.alloc_shared((bm, N), T.bfloat16)
            x_f = T.alloc_fragment((bm, N), T.float32)
            sq = T.alloc_fragment((bm, N), T.float32)
            ss = T.alloc_fragment((bm,), T.float32)
            T.copy(X[bx * bm, 0], x_s)
            T.copy(x_s, x_f)
            for i, j in T.Parallel(bm, N):
                sq[i, j] = x_f[i, j] * x_f[i, j]
            T.reduce_sum(sq, ss, dim=1)
            for i in T.Parallel(bm):
                ss[i] = T.rsqrt(ss[i] / N + eps)
            for i, j in T.Parallel(bm, N):
                x_f[i, j] = x_f[i, j] * ss[i] * W[j]
            T.copy(x_f, Y[bx * bm, 0])

    return main


@tilecute.jit(out_idx=[3])
def layernorm_chunked_ragged(M=64, N=3000, bm=4, bn=512, eps=1e-5):
    """LayerNorm over rows of 3000 in chunks of 512: sums by ``reduce_sum(clear=False)``, sums
    of squares through a per-chunk partial, then a second pass normalizing each chunk."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float16), G: T.Tensor((N,), T.float32), Bb: T.Tensor((N,), T.float32),
             Y: T.Tensor((M, N), T.float16)):
        with T.Kernel(M // bm, threads=128) as bx:
            x_f = T.alloc_fragment((bm, bn), T.float32)
            part = T.alloc_fragment((bm,), T.float32)
            s = T.alloc_fragment((bm,), T.float32)
            s2 = T.alloc_fragment((bm,), T.float32)
            mean = T.alloc_fragment((bm,), T.float32)
            rstd = T.alloc_fragment((bm,), T.float32)
            T.clear(s)
            T.clear(s2)
            for c in T.Pipelined(T.ceildiv(N, bn), num_stages=2):
                T.copy(X[bx * bm, c * bn], x_f)
                T.reduce_sum(x_f, s, dim=1, clear=False)
                for i, j in T.Parallel(bm, bn):
                    x_f[i, j] = x_f[i, j] * x_f[i, j]
                T.reduce_sum(x_f, part, dim=1)
                for i in T.Parallel(bm):
                    s2[i] += part[i]
            for i in T.Parallel(bm):
                mean[i] = s[i] / N
                rstd[i] = T.rsqrt(s2[i] / N - mean[i] * mean[i] + eps)
            for c in T.serial(T.ceildiv(N, bn)):
                T.copy(X[bx * bm, c * bn], x_f)
                for i, j in T.Parallel(bm, bn):
                    x_f[i, j] = (x_f[i, j] - mean[i]) * rstd[i] * T.if_then_else(c * bn + j < N, G[c * bn + j], 0.0) \
                        + T.if_then_else(c * bn + j < N, Bb[c * bn + j], 0.0)
                T.copy(x_f, Y[bx * bm, c * bn])

    return main


@tilecute.jit(out_idx=[1])
def online_softmax_pipelined(M=48, N=1000, bm=4, bn=256):
    """Softmax over rows of 1000 in chunks of 256: a pipelined pass keeps the running max and
    the rescaled running sum (columns past N masked to -inf), a second pass writes."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float16), Y: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
            x_s = T.alloc_shared((bm, bn), T.float16)
            x_f = T.alloc_fragment((bm, bn), T.float32)
            m = T.alloc_fragment((bm,), T.float32)
            m_prev = T.alloc_fragment((bm,), T.float32)
            tsum = T.alloc_fragment((bm,), T.float32)
            lsum = T.alloc_fragment((bm,), T.float32)
            T.fill(m, -T.infinity(T.float32))
            T.clear(lsum)
            for c in T.Pipelined(T.ceildiv(N, bn), num_stages=2):
                T.copy(X[bx * bm, c * bn], x_s)
                for i, j in T.Parallel(bm, bn):
                    x_f[i, j] = T.if_then_else(c * bn + j < N, x_s[i, j], -T.infinity(T.float32))
                T.copy(m, m_prev)
                T.reduce_max(x_f, m, dim=1, clear=False)
                for i, j in T.Parallel(bm, bn):
                    x_f[i, j] = T.exp2((x_f[i, j] - m[i]) * LOG2E)
                T.reduce_sum(x_f, tsum, dim=1)
                for i in T.Parallel(bm):
                    lsum[i] = lsum[i] * T.exp2((m_prev[i] - m[i]) * LOG2E) + tsum[i]
            for c in T.serial(T.ceildiv(N, bn)):
                T.copy(X[bx * bm, c * bn], x_f)
                for i, j in T.Parallel(bm, bn):
                    x_f[i, j] = T.exp2((x_f[i, j] - m[i]) * LOG2E) / lsum[i]
                T.copy(x_f, Y[bx * bm, c * bn])

    return main


@tilecute.jit(out_idx=[1, 2])
def topk_repeated_max(M=102, N=64, k=5, bm=4):
    """The k largest values of each row and their columns (the lowest column among equals),
    by k rounds of reduce_max, reduce_min of the matching columns, and masking the winner."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), V: T.Tensor((M, k), T.float32), I: T.Tensor((M, k), T.int32)):
        with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
            x_f = T.alloc_fragment((bm, N), T.float32)
            idx_f = T.alloc_fragment((bm, N), T.int32)
            mx = T.alloc_fragment((bm,), T.float32)
            am = T.alloc_fragment((bm,), T.int32)
            T.copy(X[bx * bm, 0], x_f)
            for t in T.serial(k):
                T.reduce_max(x_f, mx, dim=1)
                for i, j in T.Parallel(bm, N):
                    idx_f[i, j] = T.if_then_else(x_f[i, j] == mx[i], j, N)
                T.reduce_min(idx_f, am, dim=1)
                for i in T.Parallel(bm):
                    if bx * bm + i < M:
                        V[bx * bm + i, t] = mx[i]
                        I[bx * bm + i, t] = am[i]
                for i, j in T.Parallel(bm, N):
                    x_f[i, j] = T.if_then_else(j == am[i], -T.infinity(T.float32), x_f[i, j])

    return main


@tilecute.jit(out_idx=[1])
def chunked_cumsum_carry(M=8, N=1000, bn=256):
    """Y = cumsum(X, dim=1) per row in chunks of 256: each chunk scanned in shared memory,
    the sum of earlier chunks carried in a ``T.alloc_var``; the last chunk ragged."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(M, threads=128) as bx:
            x_s = T.alloc_shared((bn,), T.float32)
            carry = T.alloc_var(T.float32, init=0.0)
            for c in T.serial(T.ceildiv(N, bn)):
                T.copy(X[bx, c * bn:(c + 1) * bn], x_s)
                T.cumsum(x_s, dim=0)
                for j in T.Parallel(bn):
                    if c * bn + j < N:
                        Y[bx, c * bn + j] = x_s[j] + carry
                carry += x_s[bn - 1]

    return main


# ---- attention -----------------------------------------------------------------------------
@tilecute.jit(out_idx=[3])
def flash_gqa_causal_odd(B=2, Hq=4, Hkv=2, S=200, D=64, bm=64, bn=64):
    """Causal attention with grouped KV heads (query head h reads KV head h // 2) at S = 200:
    the causal bound limits the KV loop, a mask drops keys past S and after the query."""
    groups = Hq // Hkv
    scale = (1.0 / D) ** 0.5 * LOG2E

    @T.prim_func
    def main(Q: T.Tensor((B, S, Hq, D), T.float16), K: T.Tensor((B, S, Hkv, D), T.float16),
             V: T.Tensor((B, S, Hkv, D), T.float16), O: T.Tensor((B, S, Hq, D), T.float16)):
        with T.Kernel(T.ceildiv(S, bm), Hq, B, threads=128) as (bx, by, bz):
            Q_s = T.alloc_shared((bm, D), T.float16)
            K_s = T.alloc_shared((bn, D), T.float16)
            V_s = T.alloc_shared((bn, D), T.float16)
            acc_s = T.alloc_fragment((bm, bn), T.float32)
            acc_s_cast = T.alloc_fragment((bm, bn), T.float16)
            acc_o = T.alloc_fragment((bm, D), T.float32)
            scores_max = T.alloc_fragment((bm,), T.float32)
            scores_max_prev = T.alloc_fragment((bm,), T.float32)
            scores_scale = T.alloc_fragment((bm,), T.float32)
            scores_sum = T.alloc_fragment((bm,), T.float32)
            logsum = T.alloc_fragment((bm,), T.float32)

            T.copy(Q[bz, bx * bm:(bx + 1) * bm, by, :], Q_s)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(T.float32))
            loop_range = T.min(T.ceildiv(S, bn), T.ceildiv((bx + 1) * bm, bn))
            for k in T.Pipelined(loop_range, num_stages=2):
                T.copy(K[bz, k * bn:(k + 1) * bn, by // groups, :], K_s)
                for i, j in T.Parallel(bm, bn):
                    acc_s[i, j] = T.if_then_else(bx * bm + i >= k * bn + j and k * bn + j < S, 0,
                                                 -T.infinity(acc_s.dtype))
                T.gemm(Q_s, K_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(scores_max, scores_max_prev)
                T.fill(scores_max, -T.infinity(T.float32))
                T.reduce_max(acc_s, scores_max, dim=1, clear=False)
                for i in T.Parallel(bm):
                    scores_max[i] = T.max(scores_max[i], scores_max_prev[i])
                for i in T.Parallel(bm):
                    scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
                for i, j in T.Parallel(bm, bn):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
                T.reduce_sum(acc_s, scores_sum, dim=1)
                for i in T.Parallel(bm):
                    logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(bm, D):
                    acc_o[i, j] *= scores_scale[i]
                T.copy(V[bz, k * bn:(k + 1) * bn, by // groups, :], V_s)
                T.gemm(acc_s_cast, V_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(bm, D):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, O[bz, bx * bm:(bx + 1) * bm, by, :])

    return main


@tilecute.jit(out_idx=[5, 6])
def paged_decode_split(batch=3, Hq=8, Hkv=2, D=64, page=32, pages_max=8, n_phys=24, splits=3, block_H=16):
    """One decode step over a paged KV cache (pages of 32 tokens found through a block table,
    lengths per sequence), the pages of each sequence split over blockIdx.z; each split writes
    its normalized partial output and its log2-sum-exp (-inf, 0 for a split with no pages).
    The 4 query heads of a KV head are padded to a 16-row GEMM tile."""
    group = Hq // Hkv
    scale = LOG2E / math.sqrt(D)
    pps = (pages_max + splits - 1) // splits

    @T.prim_func
    def main(Q: T.Tensor((batch, Hq, D), T.float16), Kc: T.Tensor((n_phys, page, Hkv, D), T.float16),
             Vc: T.Tensor((n_phys, page, Hkv, D), T.float16), BT: T.Tensor((batch, pages_max), T.int32),
             Lens: T.Tensor((batch,), T.int32), Op: T.Tensor((batch, Hq, splits, D), T.float32),
             Lse: T.Tensor((batch, Hq, splits), T.float32)):
        with T.Kernel(batch, Hkv, splits, threads=128) as (b, hk, sp):
            Q_s = T.alloc_shared((block_H, D), T.float16)
            K_s = T.alloc_shared((page, D), T.float16)
            V_s = T.alloc_shared((page, D), T.float16)
            S_f = T.alloc_fragment((block_H, page), T.float32)
            P_c = T.alloc_fragment((block_H, page), T.float16)
            acc = T.alloc_fragment((block_H, D), T.float32)
            m = T.alloc_fragment((block_H,), T.float32)
            m_prev = T.alloc_fragment((block_H,), T.float32)
            sc = T.alloc_fragment((block_H,), T.float32)
            ssum = T.alloc_fragment((block_H,), T.float32)
            lsum = T.alloc_fragment((block_H,), T.float32)

            seqlen = Lens[b]
            n_pages = T.ceildiv(seqlen, page)
            start = sp * pps
            end = T.min(start + pps, n_pages)
            for i, d in T.Parallel(block_H, D):
                Q_s[i, d] = T.if_then_else(i < group, Q[b, hk * group + i, d], 0)
            T.fill(acc, 0)
            T.fill(lsum, 0)
            T.fill(m, -T.infinity(T.float32))
            for p in T.Pipelined(T.max(end - start, 0), num_stages=2):
                phys = BT[b, start + p]
                T.copy(Kc[phys, :, hk, :], K_s)
                T.gemm(Q_s, K_s, S_f, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(block_H, page):
                    S_f[i, j] = T.if_then_else((start + p) * page + j < seqlen, S_f[i, j] * scale,
                                               -T.infinity(T.float32))
                T.copy(m, m_prev)
                T.reduce_max(S_f, m, dim=1, clear=False)
                for i in T.Parallel(block_H):
                    sc[i] = T.exp2(m_prev[i] - m[i])
                for i, j in T.Parallel(block_H, page):
                    S_f[i, j] = T.exp2(S_f[i, j] - m[i])
                T.reduce_sum(S_f, ssum, dim=1)
                for i in T.Parallel(block_H):
                    lsum[i] = lsum[i] * sc[i] + ssum[i]
                T.copy(S_f, P_c)
                for i, d in T.Parallel(block_H, D):
                    acc[i, d] *= sc[i]
                T.copy(Vc[phys, :, hk, :], V_s)
                T.gemm(P_c, V_s, acc)
            for i, d in T.Parallel(block_H, D):
                if i < group:
                    Op[b, hk * group + i, sp, d] = T.if_then_else(lsum[i] > 0, acc[i, d] / lsum[i], 0.0)
            for i in T.Parallel(block_H):
                if i < group:
                    Lse[b, hk * group + i, sp] = T.if_then_else(lsum[i] > 0, T.log2(lsum[i]) + m[i],
                                                                -T.infinity(T.float32))

    return main


@tilecute.jit(out_idx=[2])
def decode_combine(batch=3, Hq=8, D=64, splits=3):
    """O = sum_s 2^(lse_s - lse_max) O_s / sum_s 2^(lse_s - lse_max), in float16, with the max and
    the total in ``T.alloc_var`` scalars assigned by name."""

    @T.prim_func
    def main(Op: T.Tensor((batch, Hq, splits, D), T.float32), Lse: T.Tensor((batch, Hq, splits), T.float32),
             O: T.Tensor((batch, Hq, D), T.float16)):
        with T.Kernel(Hq, batch, threads=64) as (h, b):
            o_f = T.alloc_fragment((D,), T.float32)
            lmax = T.alloc_var(T.float32)
            total = T.alloc_var(T.float32)
            lmax = -T.infinity(T.float32)
            for s in T.serial(splits):
                lmax = T.max(lmax, Lse[b, h, s])
            total = 0.0
            for s in T.serial(splits):
                total += T.exp2(Lse[b, h, s] - lmax)
            T.clear(o_f)
            for s in T.serial(splits):
                w = T.exp2(Lse[b, h, s] - lmax) / total
                for d in T.Parallel(D):
                    o_f[d] += w * Op[b, h, s, d]
            T.copy(o_f, O[b, h, :])

    return main


# ---- elementwise + reduction ---------------------------------------------------------------
@tilecute.jit(out_idx=[2, 3])
def fused_add_sumsq_vectorized(vec=4, threads=128):
    """H = X + R (float16, stored) and SS[row] = sum of float32(H)^2 over the first ``n_valid``
    columns (a scalar argument): each thread walks its columns in steps of threads * vec with
    vectorized loads, its partial sum in a ``T.alloc_var``, then a block reduction of the
    partials in shared memory.  N is ``T.dynamic`` (a multiple of vec at run time)."""
    M = T.symbolic("M")
    N = T.dynamic("N")

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float16), R: T.Tensor((M, N), T.float16), Hs: T.Tensor((M, N), T.float16),
             SS: T.Tensor((M,), T.float32), n_valid: T.int32):
        with T.Kernel(M, threads=threads) as row:
            tx = T.get_thread_binding()
            xl = T.alloc_local((vec,), T.float16)
            rl = T.alloc_local((vec,), T.float16)
            part_s = T.alloc_shared((threads,), T.float32)
            tot = T.alloc_fragment((1,), T.float32)
            acc = T.alloc_var(T.float32, init=0.0)
            for c in T.serial(tx * vec, N, threads * vec):
                for v in T.vectorized(vec):
                    xl[v] = X[row, c + v]
                for v in T.vectorized(vec):
                    rl[v] = R[row, c + v]
                for v in T.vectorized(vec):
                    Hs[row, c + v] = xl[v] + rl[v]
                for v in T.serial(vec):
                    if c + v < n_valid:
                        hv = T.cast(xl[v] + rl[v], T.float32)
                        acc += hv * hv
            part_s[tx] = acc
            T.reduce_sum(part_s, tot, dim=0)
            SS[row] = tot[0]

    return main


# ---- second batch: GEMM layouts, schedules, batched and scalar-sized kernels ----------------
@tilecute.jit(out_idx=[2])
def gemm_int8_nn(M=128, N=128, K=256, bm=64, bn=64, bk=64):
    """C = A @ B (int32) of int8 A (M, K) and B stored (K, N): B is not K-major."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.int8), B: T.Tensor((K, N), T.int8), C: T.Tensor((M, N), T.int32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.int8)
            B_s = T.alloc_shared((bk, bn), T.int8)
            C_l = T.alloc_fragment((bm, bn), T.int32)
            T.clear(C_l)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * bm, bx * bn])

    return main


@tilecute.jit(out_idx=[2])
def gemm_fp8_tn_mixed(M=128, N=128, K=256, bm=64, bn=64, bk=64):
    """C = A^T @ B of e5m2 A stored (K, M) and e4m3 B stored (K, N), float32 out: neither
    operand K-major."""

    @T.prim_func
    def main(A: T.Tensor((K, M), T.float8_e5m2), B: T.Tensor((K, N), T.float8_e4m3), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bk, bm), T.float8_e5m2)
            B_s = T.alloc_shared((bk, bn), T.float8_e4m3)
            C_l = T.alloc_fragment((bm, bn), T.float32)
            T.clear(C_l)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[k * bk, by * bm], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l, transpose_A=True)
            T.copy(C_l, C[by * bm, bx * bn])

    return main


@tilecute.jit(out_idx=[2])
def gemm_fp16_accum_schedule(M=256, N=256, K=512, bm=128, bn=128, bk=32):
    """C = A @ B accumulated in float16 (a float16 fragment), the pipelined loop given TileLang's
    explicit schedule: both copies in stage 0, the GEMM in stage 1."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, bn), T.float16)
            C_l = T.alloc_fragment((bm, bn), T.float16)
            T.clear(C_l)
            for k in T.Pipelined(K // bk, num_stages=2, order=[0, 1, 2], stage=[0, 0, 1]):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * bm, bx * bn])

    return main


@tilecute.jit(out_idx=[2])
def batched_gemm_3d_origin(Bt=3, M=96, N=80, K=128, bm=64, bn=64, bk=32):
    """C[b] = A[b] @ B[b]^T for a batch of 3, each tile addressed by an element origin with the
    batch index first (TileLang's copy infers the box from the tile's shape)."""

    @T.prim_func
    def main(A: T.Tensor((Bt, M, K), T.bfloat16), B: T.Tensor((Bt, N, K), T.bfloat16), C: T.Tensor((Bt, M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), Bt, threads=128) as (bx, by, bz):
            A_s = T.alloc_shared((bm, bk), T.bfloat16)
            B_s = T.alloc_shared((bn, bk), T.bfloat16)
            C_l = T.alloc_fragment((bm, bn), T.float32)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=3):
                T.copy(A[bz, by * bm, k * bk], A_s)
                T.copy(B[bz, bx * bn, k * bk], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=True)
            T.copy(C_l, C[bz, by * bm, bx * bn])

    return main


@tilecute.jit(out_idx=[3])
def dequant_local_fragments(M=128, N=128, K=256, bm=64, bn=64, bk=64):
    """C = A @ (int8 Bq * scale[n])^T with TileLang's local dequant idiom: the int8 tile copied
    shared -> local fragment, converted and scaled in registers, copied into the shared
    operand tile."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), Bq: T.Tensor((N, K), T.int8), Sc: T.Tensor((N,), T.float16),
             C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.float16)
            Bq_s = T.alloc_shared((bn, bk), T.int8)
            Bq_l = T.alloc_fragment((bn, bk), T.int8)
            Bd_l = T.alloc_fragment((bn, bk), T.float16)
            Bd_s = T.alloc_shared((bn, bk), T.float16)
            C_l = T.alloc_fragment((bm, bn), T.float32)
            T.clear(C_l)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(Bq[bx * bn, k * bk], Bq_s)
                T.copy(Bq_s, Bq_l)
                for i, j in T.Parallel(bn, bk):
                    Bd_l[i, j] = T.cast(Bq_l[i, j], T.float16) * Sc[bx * bn + i]
                T.copy(Bd_l, Bd_s)
                T.gemm(A_s, Bd_s, C_l, transpose_B=True)
            T.copy(C_l, C[by * bm, bx * bn])

    return main


@tilecute.jit(out_idx=[1])
def reverse_chunk_scan(M=6, N=700, bn=128):
    """Y[r, j] = sum of X[r, j:] (a suffix sum), chunks walked from the last by
    ``T.serial(n - 1, -1, -1)``, each scanned with ``T.cumsum(reverse=True)`` in a fragment,
    the sum of the later chunks carried in a ``T.alloc_var``."""
    nch = (N + bn - 1) // bn

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(M, threads=128) as bx:
            x_f = T.alloc_fragment((bn,), T.float32)
            carry = T.alloc_var(T.float32, init=0.0)
            tail = T.alloc_shared((1,), T.float32)
            for c in T.serial(nch - 1, -1, -1):
                T.copy(X[bx, c * bn:(c + 1) * bn], x_f)
                T.cumsum(x_f, dim=0, reverse=True)
                for j in T.Parallel(bn):
                    x_f[j] += carry
                    if j == 0:
                        tail[0] = x_f[j]
                T.copy(x_f, Y[bx, c * bn:(c + 1) * bn])
                carry = tail[0]

    return main


@tilecute.jit(out_idx=[1])
def column_sum_atomic(M=1000, N=96, bm=64):
    """db[n] = sum over rows of dY[:, n] (a bias gradient): each block reduces its rows of the
    tile along dim 0 and adds the partial column sums into db atomically (db cleared by a
    first kernel launch in the same program)."""

    @T.prim_func
    def main(dY: T.Tensor((M, N), T.bfloat16), db: T.Tensor((N,), T.float32)):
        with T.Kernel(1, threads=128) as _:
            for j in T.Parallel(N):
                db[j] = 0.0
        with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
            y_f = T.alloc_fragment((bm, N), T.float32)
            cs = T.alloc_fragment((N,), T.float32)
            T.copy(dY[bx * bm, 0], y_f)
            T.reduce_sum(y_f, cs, dim=0)
            for j in T.Parallel(N):
                T.atomic_add(db[j], cs[j])

    return main


@tilecute.jit(out_idx=[1])
def scalar_sized_2d_threads(blk=64):
    """Y[i] = X[i] * 2 + i for the first n of X's elements, n a ``T.int32`` scalar that also sizes
    the grid; threads laid out 2-D (32 x 2) and read through T.get_thread_bindings."""
    L = T.symbolic("L")

    @T.prim_func
    def main(X: T.Tensor((L,), T.float32), Y: T.Tensor((L,), T.float32), n: T.int32):
        with T.Kernel(T.ceildiv(n, blk), threads=(32, 2)) as bx:
            tx, ty, _ = T.get_thread_bindings()
            g = bx * blk + ty * 32 + tx
            if g < n:
                Y[g] = X[g] * 2.0 + T.cast(g, T.float32)

    return main


# ---- third batch: decode / attention idioms, halos, schedules with scalar bindings ---------
@tilecute.jit(out_idx=[3])
def gqa_decode_padded_heads(batch=2, Hq=8, Hkv=2, S=300, D=64, bn=64, block_H=16):
    """Decode attention for the 4 query heads of a KV head, read as a 16-row tile starting at the
    group's first head (rows past the group read the next heads' queries, rows past Hq read
    zeros) and written back through ``T.copy(o_f[:valid, :], O_s)`` into a swizzled shared tile."""
    group = Hq // Hkv
    valid = min(block_H, group)
    scale = LOG2E / math.sqrt(D)

    @T.prim_func
    def main(Q: T.Tensor((batch, Hq, D), T.float16), K: T.Tensor((batch, S, Hkv, D), T.float16),
             V: T.Tensor((batch, S, Hkv, D), T.float16), O: T.Tensor((batch, Hq, D), T.float16)):
        with T.Kernel(batch, Hq // valid, threads=128) as (bid, hid):
            Q_s = T.alloc_shared((block_H, D), T.float16)
            K_s = T.alloc_shared((bn, D), T.float16)
            V_s = T.alloc_shared((bn, D), T.float16)
            O_s = T.alloc_shared((valid, D), T.float16)
            s_f = T.alloc_fragment((block_H, bn), T.float32)
            p_f = T.alloc_fragment((block_H, bn), T.float16)
            o_f = T.alloc_fragment((block_H, D), T.float32)
            m = T.alloc_fragment((block_H,), T.float32)
            mp = T.alloc_fragment((block_H,), T.float32)
            sc = T.alloc_fragment((block_H,), T.float32)
            ls = T.alloc_fragment((block_H,), T.float32)
            rs = T.alloc_fragment((block_H,), T.float32)
            kvh = hid // (group // valid)
            T.annotate_layout({O_s: make_swizzled_layout(O_s)})
            T.copy(Q[bid, hid * valid:hid * valid + block_H, :], Q_s)
            T.fill(o_f, 0)
            T.fill(ls, 0)
            T.fill(m, -T.infinity(T.float32))
            for k in T.Pipelined(T.ceildiv(S, bn), num_stages=2):
                T.copy(K[bid, k * bn:(k + 1) * bn, kvh, :], K_s)
                T.clear(s_f)
                T.gemm(Q_s, K_s, s_f, transpose_B=True)
                for i, j in T.Parallel(block_H, bn):
                    s_f[i, j] = T.if_then_else(k * bn + j < S, s_f[i, j], -T.infinity(T.float32))
                T.copy(m, mp)
                T.reduce_max(s_f, m, dim=1, clear=False)
                for i in T.Parallel(block_H):
                    sc[i] = T.exp2(mp[i] * scale - m[i] * scale)
                for i, j in T.Parallel(block_H, bn):
                    s_f[i, j] = T.exp2(s_f[i, j] * scale - m[i] * scale)
                T.reduce_sum(s_f, rs, dim=1)
                for i in T.Parallel(block_H):
                    ls[i] = ls[i] * sc[i] + rs[i]
                T.copy(s_f, p_f)
                for i, j in T.Parallel(block_H, D):
                    o_f[i, j] *= sc[i]
                T.copy(V[bid, k * bn:(k + 1) * bn, kvh, :], V_s)
                T.gemm(p_f, V_s, o_f)
            for i, j in T.Parallel(block_H, D):
                o_f[i, j] /= ls[i]
            T.copy(o_f[:valid, :], O_s)
            T.copy(O_s, O[bid, hid * valid:(hid + 1) * valid, :])

    return main


@tilecute.jit(out_idx=[2])
def pipelined_start_stop(M=128, N=128, K=512, bm=64, bn=64, bk=64, splits=2):
    """Partial products of K halves: ``T.Pipelined(start, stop)`` over a split's tiles (start
    from blockIdx.z), operands and output addressed by full slices."""
    per = K // bk // splits

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((splits, M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), splits, threads=128) as (bx, by, bz):
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, bn), T.float16)
            C_l = T.alloc_fragment((bm, bn), T.float32)
            T.clear(C_l)
            for k in T.Pipelined(bz * per, (bz + 1) * per, num_stages=2):
                T.copy(A[by * bm:(by + 1) * bm, k * bk:(k + 1) * bk], A_s)
                T.copy(B[k * bk:(k + 1) * bk, bx * bn:(bx + 1) * bn], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[bz, by * bm:(by + 1) * bm, bx * bn:(bx + 1) * bn])

    return main


@tilecute.jit(out_idx=[2])
def gemm_scalar_bind_schedule(M=128, N=128, K=256, bm=64, bn=64, bk=32):
    """A GEMM pipelined by TileLang's manual schedule (copies stage 0, GEMM stage 1, the copies
    issued after the GEMM) with an annotated scalar binding ``base: T.int32 = ko * bk``
    that the schedule's lists leave out."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, bn), T.float16)
            C_l = T.alloc_fragment((bm, bn), T.float32)
            T.clear(C_l)
            for ko in T.Pipelined(T.ceildiv(K, bk), stage=[0, 0, 1], order=[1, 2, 0]):
                base: T.int32 = ko * bk
                T.copy(A[by * bm, base], A_s)
                T.copy(B[base, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * bm, bx * bn])

    return main


@tilecute.jit(out_idx=[3])
def flash_macros_overlap_schedule(B=1, H=2, S=200, D=64, bm=64, bn=64):
    """Causal attention in bfloat16 at S = 200 written with ``T.macro`` pieces and TileLang's
    explicit MMA-overlap schedule (``order`` / ``stage`` / ``group`` over the 15 statements the
    macros expand to)."""
    scale = LOG2E / math.sqrt(D)

    @T.macro
    def qk(K, K_s, acc_s, Q_s, k, bx, by, bz):
        T.copy(K[bz, by, k * bn:(k + 1) * bn, :], K_s)
        for i, j in T.Parallel(bm, bn):
            acc_s[i, j] = T.if_then_else(bx * bm + i >= k * bn + j, 0, -T.infinity(T.float32))
        T.gemm(Q_s, K_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)

    @T.macro
    def pv(V, V_s, acc_s_cast, acc_o, k, by, bz):
        T.copy(V[bz, by, k * bn:(k + 1) * bn, :], V_s)
        T.gemm(acc_s_cast, V_s, acc_o, policy=T.GemmWarpPolicy.FullRow)

    @T.macro
    def softmax(acc_s, acc_s_cast, m, m_prev, scl, ssum, lsum):
        T.copy(m, m_prev)
        T.fill(m, -T.infinity(T.float32))
        T.reduce_max(acc_s, m, dim=1, clear=False)
        for i in T.Parallel(bm):
            m[i] = T.max(m[i], m_prev[i])
        for i in T.Parallel(bm):
            scl[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
        for i, j in T.Parallel(bm, bn):
            acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
        T.reduce_sum(acc_s, ssum, dim=1)
        for i in T.Parallel(bm):
            lsum[i] = lsum[i] * scl[i] + ssum[i]
        T.copy(acc_s, acc_s_cast)

    @T.macro
    def rescale(acc_o, scl):
        for i, j in T.Parallel(bm, D):
            acc_o[i, j] *= scl[i]

    @T.prim_func
    def main(Q: T.Tensor((B, H, S, D), T.bfloat16), K: T.Tensor((B, H, S, D), T.bfloat16),
             V: T.Tensor((B, H, S, D), T.bfloat16), O: T.Tensor((B, H, S, D), T.bfloat16)):
        with T.Kernel(T.ceildiv(S, bm), H, B, threads=128) as (bx, by, bz):
            Q_s = T.alloc_shared((bm, D), T.bfloat16)
            K_s = T.alloc_shared((bn, D), T.bfloat16)
            V_s = T.alloc_shared((bn, D), T.bfloat16)
            acc_s = T.alloc_fragment((bm, bn), T.float32)
            acc_s_cast = T.alloc_fragment((bm, bn), T.bfloat16)
            acc_o = T.alloc_fragment((bm, D), T.float32)
            m = T.alloc_fragment((bm,), T.float32)
            m_prev = T.alloc_fragment((bm,), T.float32)
            scl = T.alloc_fragment((bm,), T.float32)
            ssum = T.alloc_fragment((bm,), T.float32)
            lsum = T.alloc_fragment((bm,), T.float32)
            T.copy(Q[bz, by, bx * bm:(bx + 1) * bm, :], Q_s)
            T.fill(acc_o, 0)
            T.fill(lsum, 0)
            T.fill(m, -T.infinity(T.float32))
            loop_range = T.min(T.ceildiv(S, bn), T.ceildiv((bx + 1) * bm, bn))
            for k in T.Pipelined(loop_range, num_stages=2, order=[-1, 0, 3, 1, -1, 2], stage=[-1, 0, 0, 1, -1, 1],
                                 group=[[0], [1, 2], [3, 4, 5, 6, 7, 8, 9, 10, 11], [12], [13], [14]]):
                qk(K, K_s, acc_s, Q_s, k, bx, by, bz)
                softmax(acc_s, acc_s_cast, m, m_prev, scl, ssum, lsum)
                rescale(acc_o, scl)
                pv(V, V_s, acc_s_cast, acc_o, k, by, bz)
            for i, j in T.Parallel(bm, D):
                acc_o[i, j] /= lsum[i]
            T.copy(acc_o, O[bz, by, bx * bm:(bx + 1) * bm, :])

    return main


@tilecute.jit(out_idx=[3])
def sliding_window_attn(B=1, H=2, S=320, D=64, bm=64, bn=64, window=100):
    """Causal attention limited to the last ``window`` keys: the KV loop runs
    ``T.Pipelined(lo, hi)`` from the first tile the window reaches; rows a tile masks entirely
    keep their running max and sum (-inf guarded)."""
    scale = LOG2E / math.sqrt(D)

    @T.prim_func
    def main(Q: T.Tensor((B, S, H, D), T.float16), K: T.Tensor((B, S, H, D), T.float16),
             V: T.Tensor((B, S, H, D), T.float16), O: T.Tensor((B, S, H, D), T.float16)):
        with T.Kernel(T.ceildiv(S, bm), H, B, threads=128) as (bx, by, bz):
            Q_s = T.alloc_shared((bm, D), T.float16)
            K_s = T.alloc_shared((bn, D), T.float16)
            V_s = T.alloc_shared((bn, D), T.float16)
            s_f = T.alloc_fragment((bm, bn), T.float32)
            p_f = T.alloc_fragment((bm, bn), T.float16)
            o_f = T.alloc_fragment((bm, D), T.float32)
            m = T.alloc_fragment((bm,), T.float32)
            mp = T.alloc_fragment((bm,), T.float32)
            sc = T.alloc_fragment((bm,), T.float32)
            rs = T.alloc_fragment((bm,), T.float32)
            ls = T.alloc_fragment((bm,), T.float32)
            T.copy(Q[bz, bx * bm:(bx + 1) * bm, by, :], Q_s)
            T.fill(o_f, 0)
            T.fill(ls, 0)
            T.fill(m, -T.infinity(T.float32))
            lo = T.max(0, (bx * bm - window + 1) // bn)
            hi = T.min(T.ceildiv(S, bn), T.ceildiv((bx + 1) * bm, bn))
            for k in T.Pipelined(lo, hi, num_stages=2):
                T.copy(K[bz, k * bn:(k + 1) * bn, by, :], K_s)
                for i, j in T.Parallel(bm, bn):
                    s_f[i, j] = T.if_then_else((bx * bm + i >= k * bn + j) & (bx * bm + i - (k * bn + j) < window), 0,
                                               -T.infinity(T.float32))
                T.gemm(Q_s, K_s, s_f, transpose_B=True)
                T.copy(m, mp)
                T.reduce_max(s_f, m, dim=1, clear=False)
                for i in T.Parallel(bm):
                    sc[i] = T.if_then_else(m[i] == -T.infinity(T.float32), 1.0, T.exp2((mp[i] - m[i]) * scale))
                for i, j in T.Parallel(bm, bn):
                    s_f[i, j] = T.if_then_else(m[i] == -T.infinity(T.float32), 0.0, T.exp2((s_f[i, j] - m[i]) * scale))
                T.reduce_sum(s_f, rs, dim=1)
                for i in T.Parallel(bm):
                    ls[i] = ls[i] * sc[i] + rs[i]
                T.copy(s_f, p_f)
                for i, j in T.Parallel(bm, D):
                    o_f[i, j] *= sc[i]
                T.copy(V[bz, k * bn:(k + 1) * bn, by, :], V_s)
                T.gemm(p_f, V_s, o_f)
            for i, j in T.Parallel(bm, D):
                o_f[i, j] /= ls[i]
            T.copy(o_f, O[bz, bx * bm:(bx + 1) * bm, by, :])

    return main


@tilecute.jit(out_idx=[2])
def causal_conv_halo(Bt=2, L=300, C=64, W=4, bt=64):
    """Y[b, t, c] = sum_k Wt[k, c] * X[b, t - 3 + k, c] (zeros before t = 0): each block loads
    its 64 rows plus a 3-row halo by one ``T.copy`` whose start is negative for the first block."""

    @T.prim_func
    def main(X: T.Tensor((Bt, L, C), T.float16), Wt: T.Tensor((W, C), T.float32), Y: T.Tensor((Bt, L, C), T.float16)):
        with T.Kernel(T.ceildiv(L, bt), Bt, threads=128) as (bx, bz):
            x_s = T.alloc_shared((bt + W - 1, C), T.float16)
            y_f = T.alloc_fragment((bt, C), T.float32)
            T.copy(X[bz, bx * bt - (W - 1):(bx + 1) * bt, :], x_s)
            T.clear(y_f)
            for k in T.serial(W):
                for t, c in T.Parallel(bt, C):
                    y_f[t, c] += Wt[k, c] * x_s[t + k, c]
            T.copy(y_f, Y[bz, bx * bt:(bx + 1) * bt, :])

    return main


@tilecute.jit
def histogram_two_level(N=10000, bins=64, threads=256):
    """H[b] += the number of X[i] with X[i] mod 64 == b (floor modulo: negative values count in
    their Python bin), counted per block in shared memory by atomics, then added into H."""

    @T.prim_func
    def main(X: T.Tensor((N,), T.int32), H: T.Tensor((bins,), T.int32)):
        with T.Kernel(T.ceildiv(N, threads * 4), threads=threads) as bx:
            h_s = T.alloc_shared((bins,), T.int32)
            tx = T.get_thread_binding()
            T.clear(h_s)
            for k in T.serial(4):
                g = (bx * 4 + k) * threads + tx
                if g < N:
                    T.atomic_add(h_s[X[g] % bins], 1)
            for b in T.Parallel(bins):
                T.atomic_add(H[b], h_s[b])

    return main


@tilecute.jit
def atomic_row_region(M=64, N=256, bm=16):
    """Out[bx % 4, :] += the column sums of each block's 16 rows: a tile atomic of a fragment
    into a row selected by an index and a full slice."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), Out: T.Tensor((4, N), T.float32)):
        with T.Kernel(M // bm, threads=128) as bx:
            x_f = T.alloc_fragment((bm, N), T.float32)
            cs = T.alloc_fragment((N,), T.float32)
            T.copy(X[bx * bm, 0], x_f)
            T.reduce_sum(x_f, cs, dim=0)
            T.atomic_add(Out[bx % 4, :], cs)

    return main


# ---- fourth batch: epilogues over the accumulator's layout ---------------------------------
@tilecute.jit(out_idx=[3])
def gemm_bias_colsum_transposed_store(M=128, N=192, K=128, bm=64, bn=64, bk=32):
    """Ct = (A @ B + bias - column means of the tile)^T: the bias held in a (bn,) fragment
    indexed by the column, the tile's column sums by ``T.reduce_sum(dim=0)`` of the
    accumulator, the result stored transposed straight from the fragment."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), bias: T.Tensor((N,), T.float32),
             Ct: T.Tensor((N, M), T.float32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, bn), T.float16)
            C_l = T.alloc_fragment((bm, bn), T.float32)
            b_f = T.alloc_fragment((bn,), T.float32)
            cs = T.alloc_fragment((bn,), T.float32)
            T.copy(bias[bx * bn], b_f)
            T.clear(C_l)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l)
            for i, j in T.Parallel(bm, bn):
                C_l[i, j] += b_f[j]
            T.reduce_sum(C_l, cs, dim=0)
            for i, j in T.Parallel(bm, bn):
                Ct[bx * bn + j, by * bm + i] = C_l[i, j] - cs[j] / bm

    return main


@tilecute.jit(out_idx=[2])
def gemm_row_softmax_fullcol(M=128, N=256, K=128, bm=64, bk=32):
    """P = softmax(A @ B^T) over whole rows of 256 logits: two warpgroups split each row
    (``FullCol``), so the row max and sum meet across them."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((N, K), T.float16), P: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(M, bm), threads=256) as bx:
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((N, bk), T.float16)
            C_l = T.alloc_fragment((bm, N), T.float32)
            mx = T.alloc_fragment((bm,), T.float32)
            sm = T.alloc_fragment((bm,), T.float32)
            T.clear(C_l)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[bx * bm, k * bk], A_s)
                T.copy(B[0, k * bk], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
            T.reduce_max(C_l, mx, dim=1)
            for i, j in T.Parallel(bm, N):
                C_l[i, j] = T.exp(C_l[i, j] - mx[i])
            T.reduce_sum(C_l, sm, dim=1)
            for i, j in T.Parallel(bm, N):
                C_l[i, j] = C_l[i, j] / sm[i]
            T.copy(C_l, P[bx * bm, 0])

    return main


@tilecute.jit(out_idx=[2])
def gemm_a_from_registers(M=128, N=128, K=256, bm=64, bn=64, bk=32):
    """C = (2 A) @ B with A's tile copied from global straight into a register fragment,
    doubled there and fed to the GEMM from registers."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_f = T.alloc_fragment((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, bn), T.float16)
            C_l = T.alloc_fragment((bm, bn), T.float32)
            T.clear(C_l)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm, k * bk], A_f)
                for i, j in T.Parallel(bm, bk):
                    A_f[i, j] = A_f[i, j] * T.float16(2.0)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_f, B_s, C_l)
            T.copy(C_l, C[by * bm, bx * bn])

    return main


@tilecute.jit(out_idx=[3])
def gemm_into_loaded_accumulator(M=100, N=72, K=128, bm=64, bn=64, bk=32):
    """C = Cin + A @ B at ragged M and N: the accumulator starts as the tile of Cin (zeros past
    its ends), the GEMM adds into it."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), Cin: T.Tensor((M, N), T.float32),
             C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, bn), T.float16)
            C_l = T.alloc_fragment((bm, bn), T.float32)
            T.copy(Cin[by * bm, bx * bn], C_l)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * bm, bx * bn])

    return main
