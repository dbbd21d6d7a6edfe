"""A second set of TileLang programs written in TileLang's idioms (not taken from TileLang):
flash attention (GQA, causal, the pipelined MMA-overlap schedule), GEMV with a warp
reduction, a transpose through shared memory, int8 and fp8 GEMMs, annotated swizzles,
scalar loops with steps, math helpers, argmax, convolution loads, a fused GELU epilogue,
3-D parallel loops, shared fills, batched GEMMs and ``@jit`` keys.
``tests/test_unseen_programs2.py`` builds each to an sm_90a cubin on the CPU and, on a
GPU, compares it with torch.

Each factory returns a ``@T.prim_func`` (or, for the ``jit_*`` ones, a ``@tilecute.jit``
kernel factory)."""

import math

import tilecute
import tilecute.language as T
from tilecute.layout import make_swizzled_layout


# ---- attention ----------------------------------------------------------------------------
def flash_attn_gqa_causal(batch=2, heads=8, kv_heads=2, seq=256, dim=64, block_M=64,
                          block_N=64, stages=2, causal=True, threads=128):
    """Flash attention forward over BHSD tensors: heads share K/V in groups (GQA), the
    causal mask is a T.if_then_else on the scores and the key loop stops at the diagonal
    (T.min of two T.ceildiv); running max with reduce_max(clear=False), exp2 with the
    softmax scale folded into log2(e), the scores cast to fp16 with T.copy."""
    group = heads // kv_heads
    scale = (1.0 / dim) ** 0.5 * 1.44269504

    @T.prim_func
    def attn(Q: T.Tensor((batch, heads, seq, dim), T.float16),
             K: T.Tensor((batch, kv_heads, seq, dim), T.float16),
             V: T.Tensor((batch, kv_heads, seq, dim), T.float16),
             O: T.Tensor((batch, heads, seq, dim), T.float16)):
        with T.Kernel(T.ceildiv(seq, block_M), heads, batch, threads=threads) as (bm, h, b):
            q_s = T.alloc_shared((block_M, dim), T.float16)
            k_s = T.alloc_shared((block_N, dim), T.float16)
            v_s = T.alloc_shared((block_N, dim), T.float16)
            o_s = T.alloc_shared((block_M, dim), T.float16)
            s = T.alloc_fragment((block_M, block_N), T.float32)
            p = T.alloc_fragment((block_M, block_N), T.float16)
            o = T.alloc_fragment((block_M, dim), T.float32)
            m = T.alloc_fragment((block_M,), T.float32)
            m_prev = T.alloc_fragment((block_M,), T.float32)
            alpha = T.alloc_fragment((block_M,), T.float32)
            l = T.alloc_fragment((block_M,), T.float32)
            l_step = T.alloc_fragment((block_M,), T.float32)
            kvh = h // group

            T.copy(Q[b, h, bm * block_M:(bm + 1) * block_M, :], q_s)
            T.clear(o)
            T.clear(l)
            T.fill(m, -T.infinity(T.float32))
            n_steps = T.min(T.ceildiv(seq, block_N), T.ceildiv((bm + 1) * block_M, block_N)) \
                if causal else T.ceildiv(seq, block_N)
            for t in T.Pipelined(n_steps, num_stages=stages):
                T.copy(K[b, kvh, t * block_N:(t + 1) * block_N, :], k_s)
                T.gemm(q_s, k_s, s, transpose_B=True, clear_accum=True,
                       policy=T.GemmWarpPolicy.FullRow)
                if causal:
                    for i, j in T.Parallel(block_M, block_N):
                        s[i, j] = T.if_then_else(bm * block_M + i >= t * block_N + j, s[i, j],
                                                 -T.infinity(T.float32))
                T.copy(m, m_prev)
                T.reduce_max(s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    alpha[i] = T.exp2((m_prev[i] - m[i]) * scale)
                for i, j in T.Parallel(block_M, block_N):
                    s[i, j] = T.exp2(s[i, j] * scale - m[i] * scale)
                T.reduce_sum(s, l_step, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * alpha[i] + l_step[i]
                T.copy(s, p)
                for i, d in T.Parallel(block_M, dim):
                    o[i, d] *= alpha[i]
                T.copy(V[b, kvh, t * block_N:(t + 1) * block_N, :], v_s)
                T.gemm(p, v_s, o, policy=T.GemmWarpPolicy.FullRow)
            for i, d in T.Parallel(block_M, dim):
                o[i, d] /= l[i]
            T.copy(o, o_s)
            T.copy(o_s, O[b, h, bm * block_M:(bm + 1) * block_M, :])
    return attn


def flash_attn_overlap(batch=1, heads=4, seq=512, dim=128, block_M=128, block_N=128,
                       threads=256):
    """Non-causal BSHD attention with TileLang's pipelined schedule (order/stage/group:
    the next QK^T GEMM issued before this step's softmax) and the scores' row max reset
    each step with T.fill before reduce_max(clear=False)."""
    scale = (1.0 / dim) ** 0.5 * 1.44269504

    @T.prim_func
    def attn_pipe(Q: T.Tensor((batch, seq, heads, dim), T.float16),
                  K: T.Tensor((batch, seq, heads, dim), T.float16),
                  V: T.Tensor((batch, seq, heads, dim), T.float16),
                  O: T.Tensor((batch, seq, heads, dim), T.float16)):
        with T.Kernel(T.ceildiv(seq, block_M), heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared((block_M, dim), T.float16)
            k_s = T.alloc_shared((block_N, dim), T.float16)
            v_s = T.alloc_shared((block_N, dim), T.float16)
            acc_s = T.alloc_fragment((block_M, block_N), T.float32)
            acc_s_cast = T.alloc_fragment((block_M, block_N), T.float16)
            acc_o = T.alloc_fragment((block_M, dim), T.float32)
            row_max = T.alloc_fragment((block_M,), T.float32)
            row_max_prev = T.alloc_fragment((block_M,), T.float32)
            rescale = T.alloc_fragment((block_M,), T.float32)
            row_sum = T.alloc_fragment((block_M,), T.float32)
            denom = T.alloc_fragment((block_M,), T.float32)

            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], q_s)
            T.fill(acc_o, 0)
            T.fill(denom, 0)
            T.fill(row_max, -T.infinity(T.float32))
            for k in T.Pipelined(T.ceildiv(seq, block_N), num_stages=2,
                                 order=[-1, 0, 3, 1, -1, 2], stage=[-1, 0, 0, 1, -1, 1],
                                 group=[[0], [1, 2], [3, 4, 5, 6, 7, 8, 9, 10, 11], [12],
                                        [13], [14]]):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], k_s)
                T.clear(acc_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(row_max, row_max_prev)
                T.fill(row_max, -T.infinity(T.float32))
                T.reduce_max(acc_s, row_max, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    row_max[i] = T.max(row_max[i], row_max_prev[i])
                for i in T.Parallel(block_M):
                    rescale[i] = T.exp2(row_max_prev[i] * scale - row_max[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - row_max[i] * scale)
                T.reduce_sum(acc_s, row_sum, dim=1)
                for i in T.Parallel(block_M):
                    denom[i] = denom[i] * rescale[i] + row_sum[i]
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= rescale[i]
                T.copy(acc_s, acc_s_cast)
                T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= denom[i]
            T.copy(acc_o, O[bz, bx * block_M:(bx + 1) * block_M, by, :])
    return attn_pipe


# ---- GEMV, transpose ------------------------------------------------------------------------
def gemv_warp_reduce(N=1024, K=2048, rows_per_block=4, vec=8):
    """y = A x: a warp per row (2-D threads (32, rows)), each lane multiplies `vec`
    consecutive elements per step in a T.vectorized loop, then T.warp_reduce_sum."""
    steps = K // (32 * vec)

    @T.prim_func
    def gemv(A: T.Tensor((N, K), T.float16), x: T.Tensor((K,), T.float16),
             y: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, rows_per_block), threads=(32, rows_per_block)) as bn:
            lane = T.get_thread_binding(0)
            r = T.get_thread_binding(1)
            row = bn * rows_per_block + r
            acc = T.alloc_local((1,), T.float32)
            a_vec = T.alloc_local((vec,), T.float16)
            x_vec = T.alloc_local((vec,), T.float16)
            acc[0] = 0.0
            for s in T.serial(steps):
                base = (s * 32 + lane) * vec
                for v in T.vectorized(vec):
                    a_vec[v] = A[row, base + v]
                for v in T.vectorized(vec):
                    x_vec[v] = x[base + v]
                for v in T.serial(vec):
                    acc[0] += T.cast(a_vec[v], T.float32) * T.cast(x_vec[v], T.float32)
            total = T.warp_reduce_sum(acc[0])
            if lane == 0:
                y[row] = total
    return gemv


def gemv_shfl_tree(N=512, K=1024, threads=128):
    """y = A x with one block per row: each thread a strided partial sum, a shfl_xor tree
    inside each warp, the warps' sums through a shared array."""
    warps = threads // 32

    @T.prim_func
    def gemv_tree(A: T.Tensor((N, K), T.float32), x: T.Tensor((K,), T.float32),
                  y: T.Tensor((N,), T.float32)):
        with T.Kernel(N, threads=threads) as row:
            tx = T.get_thread_binding()
            part = T.alloc_var(T.float32)
            warp_sums = T.alloc_shared((warps,), T.float32)
            part = 0.0
            for k in T.serial(tx, K, threads):
                part += A[row, k] * x[k]
            for off in T.unroll(5):
                part += T.shfl_xor(part, 16 >> off)
            if tx % 32 == 0:
                warp_sums[tx // 32] = part
            T.sync_threads()
            if tx == 0:
                total = T.alloc_var(T.float32)
                total = 0.0
                for w in T.serial(warps):
                    total += warp_sums[w]
                y[row] = total
    return gemv_tree


def transpose_shared(M=1000, N=700, block=32):
    """B = A^T through a shared tile (reads coalesced along A's rows, writes along B's),
    guarded at ragged edges."""
    @T.prim_func
    def transpose(A: T.Tensor((M, N), T.float32), B: T.Tensor((N, M), T.float32)):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=256) as (bx, by):
            tile = T.alloc_shared((block, block + 1), T.float32)
            for i, j in T.Parallel(block, block):
                if by * block + i < M and bx * block + j < N:
                    tile[i, j] = A[by * block + i, bx * block + j]
            for j, i in T.Parallel(block, block):
                if bx * block + j < N and by * block + i < M:
                    B[bx * block + j, by * block + i] = tile[i, j]
    return transpose


# ---- GEMM dtypes and layouts ----------------------------------------------------------------
def gemm_int8(M=256, N=256, K=512, block_M=128, block_N=128, block_K=64):
    """int8 x int8 -> int32 with B stored N x K (transpose_B), three stages."""
    @T.prim_func
    def igemm(A: T.Tensor((M, K), T.int8), B: T.Tensor((N, K), T.int8),
              C: T.Tensor((M, N), T.int32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.int8)
            B_s = T.alloc_shared((block_N, block_K), T.int8)
            C_l = T.alloc_fragment((block_M, block_N), T.int32)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[bx * block_N, k * block_K], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=True)
            T.copy(C_l, C[by * block_M, bx * block_N])
    return igemm


def gemm_fp8_e4m3(M=256, N=256, K=256, block_M=128, block_N=128, block_K=128):
    """float8_e4m3 A and B (B as N x K), fp32 accumulation, a per-tensor scale applied to
    the fragment, bf16 out."""
    @T.prim_func
    def fp8_gemm(A: T.Tensor((M, K), T.float8_e4m3), B: T.Tensor((N, K), T.float8_e4m3),
                 scale: T.Tensor((1,), T.float32), C: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.float8_e4m3)
            B_s = T.alloc_shared((block_N, block_K), T.float8_e4m3)
            C_l = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[bx * block_N, k * block_K], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=True)
            for i, j in T.Parallel(block_M, block_N):
                C_l[i, j] = C_l[i, j] * scale[0]
            T.copy(C_l, C[by * block_M, bx * block_N])
    return fp8_gemm


def gemm_annotated_swizzle(M=512, N=512, K=512, block_M=128, block_N=128, block_K=32,
                           rasterize=True):
    """T.annotate_layout with make_swizzled_layout on both operand tiles, and
    T.use_swizzle(panel_size, enable=...) as a switch."""
    @T.prim_func
    def gemm_sw(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
                C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            B_s = T.alloc_shared((block_K, block_N), T.float16)
            C_l = T.alloc_fragment((block_M, block_N), T.float32)
            T.annotate_layout({A_s: make_swizzled_layout(A_s), B_s: make_swizzled_layout(B_s)})
            T.use_swizzle(panel_size=8, enable=rasterize)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * block_M, bx * block_N])
    return gemm_sw


def gemm_square_kpack(M=256, N=384, K=256, block_M=128, block_N=128, block_K=64):
    """256 threads in the Square policy, k_pack=1 spelled out, the result through a shared
    fp16 tile; N not a multiple of a square of warps."""
    @T.prim_func
    def gemm_sq(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
                C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            B_s = T.alloc_shared((block_K, block_N), T.float16)
            C_s = T.alloc_shared((block_M, block_N), T.float16)
            C_l = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_l)
            for k in T.Pipelined(K // block_K, num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_l, k_pack=1, policy=T.GemmWarpPolicy.Square)
            T.copy(C_l, C_s)
            T.copy(C_s, C[by * block_M, bx * block_N])
    return gemm_sq


def gemm_bias_gelu(M=256, N=256, K=256, block_M=64, block_N=128, block_K=32):
    """GEMM with a bias + exact GELU (erf) epilogue on the accumulator fragment."""
    inv_sqrt2 = 1.0 / math.sqrt(2.0)

    @T.prim_func
    def gemm_gelu(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
                  bias: T.Tensor((N,), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            B_s = T.alloc_shared((block_K, block_N), T.float16)
            C_l = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_l)
            for i, j in T.Parallel(block_M, block_N):
                v = C_l[i, j] + T.cast(bias[bx * block_N + j], T.float32)
                C_l[i, j] = 0.5 * v * (1.0 + T.erf(v * inv_sqrt2))
            T.copy(C_l, C[by * block_M, bx * block_N])
    return gemm_gelu


def batched_gemm(batch=3, M=128, N=256, K=128, block_M=64, block_N=64, block_K=32):
    """A third grid dim over a batch of 3-D tensors; the copies read 2-D tiles of one
    batch (A[bz, m0, k0] into a 2-D shared tile)."""
    @T.prim_func
    def bmm(A: T.Tensor((batch, M, K), T.float16), B: T.Tensor((batch, K, N), T.float16),
            C: T.Tensor((batch, M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), batch,
                      threads=128) as (bx, by, bz):
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            B_s = T.alloc_shared((block_K, block_N), T.float16)
            C_l = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[bz, by * block_M, k * block_K], A_s)
                T.copy(B[bz, k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[bz, by * block_M, bx * block_N])
    return bmm


def gemm_register_a(M=256, N=256, K=256, block_M=64, block_N=64, block_K=64):
    """A tile scaled in registers (shared -> fragment, x2) and fed to T.gemm as a fragment
    operand."""
    @T.prim_func
    def gemm_rs(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
                C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            A_f = T.alloc_fragment((block_M, block_K), T.float16)
            B_s = T.alloc_shared((block_K, block_N), T.float16)
            C_l = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.copy(A_s, A_f)
                for i, j in T.Parallel(block_M, block_K):
                    A_f[i, j] = A_f[i, j] * T.float16(2.0)
                T.gemm(A_f, B_s, C_l)
            T.copy(C_l, C[by * block_M, bx * block_N])
    return gemm_rs


def dequant_int4_gemm(M=128, N=128, K=256, block_M=64, block_N=64, block_K=64, group=64):
    """Two signed int4 weights per uint8 (low nibble first along K), unpacked with shifts
    and masks, a per-(group, column) fp16 scale, then T.gemm."""
    @T.prim_func
    def w4a16(A: T.Tensor((M, K), T.float16), Bp: T.Tensor((K // 2, N), T.uint8),
              S: T.Tensor((K // group, N), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            Bp_s = T.alloc_shared((block_K // 2, block_N), T.uint8)
            B_s = T.alloc_shared((block_K, block_N), T.float16)
            C_l = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_l)
            for k in T.Pipelined(K // block_K, num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(Bp[k * block_K // 2, bx * block_N], Bp_s)
                for i, j in T.Parallel(block_K, block_N):
                    nib = (Bp_s[i // 2, j] >> ((i % 2) * 4)) & T.uint8(15)
                    q = T.cast(nib, T.int32) - 8
                    B_s[i, j] = T.cast(q, T.float16) * S[(k * block_K + i) // group, bx * block_N + j]
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * block_M, bx * block_N])
    return w4a16


def conv2d_im2col_loads(N=2, H=16, W=16, C=32, F=64, KH=3, KW=3, stride=1, pad=1,
                        block_M=64, block_N=64, block_K=32):
    """NHWC 3x3 convolution as an implicit GEMM: each step gathers a (pixels, K) tile of
    the image into shared memory (zero outside the padding), the filter is (KH*KW*C, F)."""
    OH = (H + 2 * pad - KH) // stride + 1
    OW = (W + 2 * pad - KW) // stride + 1
    KT = KH * KW * C

    @T.prim_func
    def conv(X: T.Tensor((N, H, W, C), T.float16), Wt: T.Tensor((KH, KW, C, F), T.float16),
             Y: T.Tensor((N, OH, OW, F), T.float16)):
        with T.Kernel(T.ceildiv(F, block_N), T.ceildiv(N * OH * OW, block_M),
                      threads=128) as (bx, by):
            x_s = T.alloc_shared((block_M, block_K), T.float16)
            w_s = T.alloc_shared((block_K, block_N), T.float16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            out_s = T.alloc_shared((block_M, block_N), T.float16)
            w_flat = T.Tensor((KT, F), T.float16, Wt.data)
            y_flat = T.Tensor((N * OH * OW, F), T.float16, Y.data)
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(KT, block_K), num_stages=2):
                for i, j in T.Parallel(block_M, block_K):
                    pix = by * block_M + i
                    kk = ko * block_K + j
                    n = pix // (OH * OW)
                    oh = pix % (OH * OW) // OW
                    ow = pix % OW
                    ih = oh * stride + kk // (KW * C) - pad
                    iw = ow * stride + kk // C % KW - pad
                    inside = (ih >= 0) and (ih < H) and (iw >= 0) and (iw < W) and (pix < N * OH * OW)
                    x_s[i, j] = T.if_then_else(inside, X[n, ih, iw, kk % C], T.float16(0))
                T.copy(w_flat[ko * block_K, bx * block_N], w_s)
                T.gemm(x_s, w_s, acc)
            T.copy(acc, out_s)
            T.copy(out_s, y_flat[by * block_M, bx * block_N])
    return conv


# ---- scalars, loops, math -------------------------------------------------------------------
def strided_loops_scalars(M=256, N=96, threads=128):
    """One row per thread: T.serial(start, stop, step) over the even columns, range with a
    step over the odd ones, T.unroll(explicit=True), alloc_var counters and an alloc_local
    array of partial maxima."""
    @T.prim_func
    def strided(X: T.Tensor((M, N), T.float32), Even: T.Tensor((M,), T.float32),
                OddMax: T.Tensor((M,), T.float32), Count: T.Tensor((M,), T.int32)):
        with T.Kernel(T.ceildiv(M, threads), threads=threads) as bx:
            r = bx * threads + T.get_thread_binding()
            even = T.alloc_var(T.float32)
            cnt = T.alloc_var(T.int32, init=0)
            best = T.alloc_local((4,), T.float32)
            even = 0.0
            for u in T.unroll(4, explicit=True):
                best[u] = -T.infinity(T.float32)
            if r < M:
                for j in T.serial(0, N, 2):
                    even += X[r, j]
                for j in range(1, N, 2):
                    best[(j // 2) % 4] = T.max(best[(j // 2) % 4], X[r, j])
                    if X[r, j] > 0:
                        cnt += 1
                Even[r] = even
                OddMax[r] = T.max(T.max(best[0], best[1]), T.max(best[2], best[3]))
                Count[r] = cnt
    return strided


def math_helpers(M=128, N=256, block_M=32, block_N=64):
    """T.clamp, T.abs, T.rsqrt, T.log2, T.exp, T.min/T.max, T.sqrt and T.tanh in one
    elementwise tile."""
    @T.prim_func
    def mathy(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32),
              Z: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            x = T.alloc_fragment((block_M, block_N), T.float32)
            T.copy(X[by * block_M, bx * block_N], x)
            for i, j in T.Parallel(block_M, block_N):
                a = T.abs(x[i, j]) + 1.0
                Y[by * block_M + i, bx * block_N + j] = (
                    T.rsqrt(a) + T.log2(a) + T.exp(T.min(x[i, j], 2.0)) + T.sqrt(a)
                    + T.clamp(x[i, j], -0.5, 0.5))
                Z[by * block_M + i, bx * block_N + j] = T.cast(
                    T.max(T.tanh(x[i, j]), -0.25), T.float16)
    return mathy


def reductions_min_dim0(M=128, N=64):
    """reduce_min along dim 0 (a column min), reduce_absmax and reduce_abssum along dim 1,
    T.reduce with reduce_type="max" and dim=-1, on one fragment."""
    @T.prim_func
    def reds(X: T.Tensor((M, N), T.float32), ColMin: T.Tensor((N,), T.float32),
             RowAbsMax: T.Tensor((M,), T.float32), RowAbsSum: T.Tensor((M,), T.float32),
             RowMax: T.Tensor((M,), T.float32)):
        with T.Kernel(1, threads=256) as _:
            x = T.alloc_fragment((M, N), T.float32)
            cmin = T.alloc_fragment((N,), T.float32)
            ramax = T.alloc_fragment((M,), T.float32)
            rasum = T.alloc_fragment((M,), T.float32)
            rmax = T.alloc_fragment((M,), T.float32)
            T.copy(X, x)
            T.reduce_min(x, cmin, dim=0)
            T.reduce_absmax(x, ramax, dim=1)
            T.reduce_abssum(x, rasum, dim=1)
            T.reduce(x, rmax, "max", dim=-1, clear=True)
            T.copy(cmin, ColMin)
            T.copy(ramax, RowAbsMax)
            T.copy(rasum, RowAbsSum)
            T.copy(rmax, RowMax)
    return reds


def row_argmax(M=256, N=128, block_M=16):
    """Row-wise top-1: reduce_max, then each element's column where it equals the max
    (N elsewhere) and a reduce_min of those: the first index of the max."""
    @T.prim_func
    def argmax(X: T.Tensor((M, N), T.float32), Val: T.Tensor((M,), T.float32),
               Idx: T.Tensor((M,), T.int32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x = T.alloc_fragment((block_M, N), T.float32)
            cand = T.alloc_fragment((block_M, N), T.int32)
            best = T.alloc_fragment((block_M,), T.float32)
            where = T.alloc_fragment((block_M,), T.int32)
            T.copy(X[bx * block_M, 0], x)
            T.reduce_max(x, best, dim=1)
            for i, j in T.Parallel(block_M, N):
                cand[i, j] = T.if_then_else(x[i, j] == best[i], j, N)
            T.reduce_min(cand, where, dim=1)
            T.copy(best, Val[bx * block_M])
            T.copy(where, Idx[bx * block_M])
    return argmax


def argmax_scan_thread(M=300, N=77, threads=64):
    """A row per thread tracking the best value and its index in alloc_var scalars."""
    @T.prim_func
    def argmax_t(X: T.Tensor((M, N), T.float16), Idx: T.Tensor((M,), T.int64)):
        with T.Kernel(T.ceildiv(M, threads), threads=threads) as bx:
            r = bx * threads + T.get_thread_binding()
            bv = T.alloc_var(T.float32)
            bi = T.alloc_var(T.int32)
            if r < M:
                bv = -T.infinity(T.float32)
                bi = 0
                for j in T.serial(N):
                    v = T.cast(X[r, j], T.float32)
                    if v > bv:
                        bv = v
                        bi = j
                Idx[r] = T.cast(bi, T.int64)
    return argmax_t


# ---- parallel shapes, fills, atomics ---------------------------------------------------------
def parallel_3d(B=4, S=64, D=64, block_S=16):
    """T.Parallel over three dims of a 3-D shared tile: x * w[d] + bias[b, d]."""
    @T.prim_func
    def par3(X: T.Tensor((B, S, D), T.float16), w: T.Tensor((D,), T.float16),
             bias: T.Tensor((B, D), T.float32), Y: T.Tensor((B, S, D), T.float32)):
        with T.Kernel(S // block_S, threads=128) as bs:
            x_s = T.alloc_shared((B, block_S, D), T.float16)
            y = T.alloc_fragment((B, block_S, D), T.float32)
            T.copy(X[:, bs * block_S:(bs + 1) * block_S, :], x_s)
            for b, i, d in T.Parallel(B, block_S, D):
                y[b, i, d] = T.cast(x_s[b, i, d] * w[d], T.float32) + bias[b, d]
            T.copy(y, Y[:, bs * block_S:(bs + 1) * block_S, :])
    return par3


def fill_shared_pad(M=100, N=60, block=64):
    """T.fill of a shared tile with a pad value, a partial overwrite from the ragged global
    tile, then the tile's row max (the pad never wins: it is -inf)."""
    @T.prim_func
    def fill_pad(X: T.Tensor((M, N), T.float32), RowMax: T.Tensor((M,), T.float32)):
        with T.Kernel(T.ceildiv(M, block), threads=128) as bx:
            tile = T.alloc_shared((block, block), T.float32)
            mx = T.alloc_fragment((block,), T.float32)
            T.fill(tile, -T.infinity(T.float32))
            for i, j in T.Parallel(block, block):
                if bx * block + i < M and j < N:
                    tile[i, j] = X[bx * block + i, j]
            T.reduce_max(tile, mx, dim=1)
            for i in T.Parallel(block):
                if bx * block + i < M:
                    RowMax[bx * block + i] = mx[i]
    return fill_pad


def atomic_pairs(M=128, N=256, block_M=32):
    """Column sums of row pairs with T.atomic_addx2 on fp32 pairs of the destination."""
    @T.prim_func
    def pairs(X: T.Tensor((M, N), T.float32), S: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x_s = T.alloc_shared((block_M, N), T.float32)
            T.copy(X[bx * block_M, 0], x_s)
            for i, j in T.Parallel(block_M, N // 2):
                T.atomic_addx2(S[j * 2], x_s[i, j * 2])
    return pairs


def shared_histogram(N=4096, bins=64, threads=256):
    """A per-block histogram in shared int32 counters (cleared, atomic adds, barrier), then
    added into the global one."""
    per_block = threads * 4

    @T.prim_func
    def hist(X: T.Tensor((N,), T.int32), H: T.Tensor((bins,), T.int32)):
        with T.Kernel(T.ceildiv(N, per_block), threads=threads) as bx:
            h = T.alloc_shared((bins,), T.int32)
            tx = T.get_thread_binding()
            T.clear(h)
            for u in T.serial(4):
                g = bx * per_block + u * threads + tx
                if g < N:
                    T.atomic_add(h[X[g] % bins], 1)
            for b in T.Parallel(bins):
                T.atomic_add(H[b], h[b])
    return hist


def copy_forms(M=256, N=256, block_M=64, block_N=64):
    """T.copy with disable_tma=True into shared, and out of a fragment into global through
    a shared tile; T.copy of a slice with explicit stop bounds."""
    @T.prim_func
    def copies(X: T.Tensor((M, N), T.float16), Y: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            s = T.alloc_shared((block_M, block_N), T.float16)
            f = T.alloc_fragment((block_M, block_N), T.float16)
            T.copy(X[by * block_M:(by + 1) * block_M, bx * block_N:(bx + 1) * block_N], s,
                   disable_tma=True)
            T.copy(s, f)
            for i, j in T.Parallel(block_M, block_N):
                f[i, j] = f[i, j] + T.float16(1)
            T.copy(f, s)
            T.copy(s, Y[by * block_M:(by + 1) * block_M, bx * block_N:(bx + 1) * block_N])
    return copies


def pipelined_softmax_rows(M=64, N=4096, block_M=8, block_N=512):
    """Long rows: an online max/sum over T.Pipelined column chunks (no GEMM), then a
    second pipelined pass writing exp(x - max) / sum."""
    @T.prim_func
    def online_softmax(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            xs = T.alloc_shared((block_M, block_N), T.float32)
            x = T.alloc_fragment((block_M, block_N), T.float32)
            mx = T.alloc_fragment((block_M,), T.float32)
            mx_old = T.alloc_fragment((block_M,), T.float32)
            sm = T.alloc_fragment((block_M,), T.float32)
            part = T.alloc_fragment((block_M,), T.float32)
            T.fill(mx, -T.infinity(T.float32))
            T.clear(sm)
            for c in T.Pipelined(N // block_N, num_stages=2):
                T.copy(X[bx * block_M, c * block_N], xs)
                T.copy(xs, x)
                T.copy(mx, mx_old)
                T.reduce_max(x, mx, dim=1, clear=False)
                for i, j in T.Parallel(block_M, block_N):
                    x[i, j] = T.exp(x[i, j] - mx[i])
                T.reduce_sum(x, part, dim=1)
                for i in T.Parallel(block_M):
                    sm[i] = sm[i] * T.exp(mx_old[i] - mx[i]) + part[i]
            for c in T.Pipelined(N // block_N, num_stages=2):
                T.copy(X[bx * block_M, c * block_N], xs)
                for i, j in T.Parallel(block_M, block_N):
                    x[i, j] = T.exp(xs[i, j] - mx[i]) / sm[i]
                T.copy(x, Y[bx * block_M, c * block_N])
    return online_softmax


def fp8_row_quant(M=128, N=512, block_M=16):
    """Per-row fp8 quantization: absmax, scale = absmax / 448, x / scale clamped to the
    e4m3 range and cast to float8_e4m3; the scales written out."""
    @T.prim_func
    def quant(X: T.Tensor((M, N), T.bfloat16), Q: T.Tensor((M, N), T.float8_e4m3),
              Scale: T.Tensor((M,), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x = T.alloc_fragment((block_M, N), T.float32)
            amax = T.alloc_fragment((block_M,), T.float32)
            q = T.alloc_fragment((block_M, N), T.float8_e4m3)
            T.copy(X[bx * block_M, 0], x)
            T.reduce_absmax(x, amax, dim=1)
            for i in T.Parallel(block_M):
                amax[i] = T.max(amax[i], 1e-4) / 448.0
            for i, j in T.Parallel(block_M, N):
                q[i, j] = T.cast(T.clamp(x[i, j] / amax[i], -448.0, 448.0), T.float8_e4m3)
            T.copy(q, Q[bx * block_M, 0])
            T.copy(amax, Scale[bx * block_M])
    return quant


def kernel_forms(N=1000):
    """T.Kernel with no blocks (one block), a 3-D block grid, and 2-D threads read with
    T.get_thread_bindings(); two kernels in one prim_func run in order."""
    @T.prim_func
    def forms(X: T.Tensor((N,), T.float32), Y: T.Tensor((4, 8, 32), T.int32),
              Total: T.Tensor((1,), T.float32)):
        with T.Kernel(4, 8, threads=(8, 4)) as (bx, by):
            tx, ty, _ = T.get_thread_bindings()
            Y[bx, by, ty * 8 + tx] = bx * 1000 + by * 100 + ty * 8 + tx
        with T.Kernel(threads=128):
            acc = T.alloc_fragment((1,), T.float32)
            vals = T.alloc_fragment((128,), T.float32)
            T.clear(vals)
            for c in T.serial(T.ceildiv(N, 128)):
                for t in T.Parallel(128):
                    if c * 128 + t < N:
                        vals[t] += X[c * 128 + t]
            T.reduce_sum(vals, acc, dim=0)
            Total[0] = acc[0]
    return forms


# ---- @jit keys --------------------------------------------------------------------------------
@tilecute.jit(out_idx=[-1])
def jit_dynamic_rowscale(block_M=32, N=256):
    """A T.dynamic row count with out_idx: the output's shape follows the input's."""
    M = T.dynamic("M")

    @T.prim_func
    def rowscale(X: T.Tensor((M, N), T.float16), s: T.Tensor((M,), T.float32),
                 Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            for i, j in T.Parallel(block_M, N):
                if bx * block_M + i < M:
                    Y[bx * block_M + i, j] = T.cast(X[bx * block_M + i, j], T.float32) * s[bx * block_M + i]
    return rowscale


@tilecute.jit(out_idx=[2], pass_configs={
    tilecute.PassConfigKey.TL_DISABLE_TMA_LOWER: True,
    tilecute.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True,
    tilecute.PassConfigKey.TL_ENABLE_FAST_MATH: True})
def jit_gemm_pass_configs(M, N, K, block_M=64, block_N=64, block_K=32):
    """A GEMM built with TileLang's usual pass_configs (no TMA, no warp specialization,
    fast math) and a sigmoid epilogue."""
    @T.prim_func
    def gemm_sig(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
                 C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            B_s = T.alloc_shared((block_K, block_N), T.float16)
            C_l = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_l)
            for i, j in T.Parallel(block_M, block_N):
                C_l[i, j] = T.sigmoid(C_l[i, j])
            T.copy(C_l, C[by * block_M, bx * block_N])
    return gemm_sig


# ---- ragged tiles, loop ranges, partial outputs ------------------------------------------------
def gemm_ragged(M=1000, N=500, K=300, block_M=128, block_N=128, block_K=64):
    """M, N and K none a multiple of its block: T.copy reads past the ends as zeros and
    writes only the elements inside (TileLang's safe memory access)."""
    @T.prim_func
    def gemm_edge(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
                  C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            B_s = T.alloc_shared((block_K, block_N), T.float16)
            C_l = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * block_M, bx * block_N])
    return gemm_edge


def ragged_rows_fragment(M=1000, N=96, block_M=64):
    """T.copy of a ragged row block straight into a fragment and back out (no shared
    tile), scaled per row by a ragged 1-D slice."""
    @T.prim_func
    def ragged(X: T.Tensor((M, N), T.float32), s: T.Tensor((M,), T.float32),
               Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x = T.alloc_fragment((block_M, N), T.float32)
            sc = T.alloc_fragment((block_M,), T.float32)
            T.copy(X[bx * block_M:(bx + 1) * block_M, :], x)
            T.copy(s[bx * block_M:(bx + 1) * block_M], sc)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] * sc[i] + 1.0
            T.copy(x, Y[bx * block_M:(bx + 1) * block_M, :])
    return ragged


def attn_lse_band(batch=2, heads=2, seq=256, dim=64, block_M=64, block_N=64, window=96):
    """Sliding-window attention: the key loop runs T.Pipelined(start, stop) over the
    blocks the window touches (T.max/T.min of block indices); the log-sum-exp of each row
    written out as a 1-D fragment into a 3-D slice."""
    scale = (1.0 / dim) ** 0.5 * 1.44269504

    @T.prim_func
    def band(Q: T.Tensor((batch, heads, seq, dim), T.float16),
             K: T.Tensor((batch, heads, seq, dim), T.float16),
             V: T.Tensor((batch, heads, seq, dim), T.float16),
             O: T.Tensor((batch, heads, seq, dim), T.float32),
             LSE: T.Tensor((batch, heads, seq), T.float32)):
        with T.Kernel(T.ceildiv(seq, block_M), heads, batch, threads=128) as (bx, by, bz):
            q_s = T.alloc_shared((block_M, dim), T.float16)
            k_s = T.alloc_shared((block_N, dim), T.float16)
            v_s = T.alloc_shared((block_N, dim), T.float16)
            s = T.alloc_fragment((block_M, block_N), T.float32)
            p = T.alloc_fragment((block_M, block_N), T.float16)
            o = T.alloc_fragment((block_M, dim), T.float32)
            mx = T.alloc_fragment((block_M,), T.float32)
            mx_prev = T.alloc_fragment((block_M,), T.float32)
            mx_use = T.alloc_fragment((block_M,), T.float32)
            corr = T.alloc_fragment((block_M,), T.float32)
            rs = T.alloc_fragment((block_M,), T.float32)
            den = T.alloc_fragment((block_M,), T.float32)
            T.copy(Q[bz, by, bx * block_M:(bx + 1) * block_M, :], q_s)
            T.clear(o)
            T.clear(den)
            T.fill(mx, -T.infinity(T.float32))
            lo = T.max(0, (bx * block_M - window) // block_N)
            hi = T.min(T.ceildiv(seq, block_N), T.ceildiv((bx + 1) * block_M, block_N))
            for kb in T.Pipelined(lo, hi, num_stages=2):
                T.copy(K[bz, by, kb * block_N:(kb + 1) * block_N, :], k_s)
                T.clear(s)
                T.gemm(q_s, k_s, s, transpose_B=True)
                for i, j in T.Parallel(block_M, block_N):
                    qi = bx * block_M + i
                    kj = kb * block_N + j
                    s[i, j] = T.if_then_else((kj <= qi) & (kj > qi - window), s[i, j],
                                             -T.infinity(T.float32))
                T.copy(mx, mx_prev)
                T.reduce_max(s, mx, dim=1, clear=False)
                # a row the window has not reached yet has seen only -inf scores: its
                # running max stays -inf, and its terms (exp2(-inf - 0)) and sums stay 0
                for i in T.Parallel(block_M):
                    mx_use[i] = T.if_then_else(mx[i] == -T.infinity(T.float32), 0, mx[i])
                    corr[i] = T.exp2((mx_prev[i] - mx_use[i]) * scale)
                for i, j in T.Parallel(block_M, block_N):
                    s[i, j] = T.exp2((s[i, j] - mx_use[i]) * scale)
                T.reduce_sum(s, rs, dim=1)
                for i in T.Parallel(block_M):
                    den[i] = den[i] * corr[i] + rs[i]
                for i, d in T.Parallel(block_M, dim):
                    o[i, d] = o[i, d] * corr[i]
                T.copy(s, p)
                T.copy(V[bz, by, kb * block_N:(kb + 1) * block_N, :], v_s)
                T.gemm(p, v_s, o)
            for i, d in T.Parallel(block_M, dim):
                o[i, d] = o[i, d] / den[i]
            for i in T.Parallel(block_M):
                den[i] = T.log2(den[i]) + mx[i] * scale
            T.copy(o, O[bz, by, bx * block_M:(bx + 1) * block_M, :])
            T.copy(den, LSE[bz, by, bx * block_M:(bx + 1) * block_M])
    return band


def dq_atomic_accumulate(batch=1, seq=128, heads=2, dim=64, block_M=64, block_N=32):
    """The dQ step of an attention backward: dQ += dS K for each key block, added
    atomically per element into a (batch, seq, heads, dim) float32 tensor."""
    @T.prim_func
    def dq(dS: T.Tensor((batch, heads, seq, seq), T.float16),
           K: T.Tensor((batch, seq, heads, dim), T.float16),
           dQ: T.Tensor((batch, seq, heads, dim), T.float32)):
        with T.Kernel(T.ceildiv(seq, block_N), heads, batch, threads=128) as (bx, by, bz):
            ds_s = T.alloc_shared((block_M, block_N), T.float16)
            k_s = T.alloc_shared((block_N, dim), T.float16)
            acc = T.alloc_fragment((block_M, dim), T.float32)
            T.copy(K[bz, bx * block_N:(bx + 1) * block_N, by, :], k_s)
            for mb in T.serial(T.ceildiv(seq, block_M)):
                T.copy(dS[bz, by, mb * block_M:(mb + 1) * block_M, bx * block_N:(bx + 1) * block_N], ds_s)
                T.gemm(ds_s, k_s, acc, clear_accum=True)
                for i, j in T.Parallel(block_M, dim):
                    T.atomic_add(dQ[bz, mb * block_M + i, by, j], acc[i, j])
    return dq


def splitk_workspace(M=128, N=128, K=512, block_M=64, block_N=64, block_K=32, splits=4):
    """Split-K through a T.alloc_global workspace: each split writes its partial tile, a
    second kernel sums the splits."""
    part = K // splits

    @T.prim_func
    def splitk_ws(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
                  C: T.Tensor((M, N), T.float32)):
        ws = T.alloc_global((splits, M, N), T.float32)
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), splits,
                      threads=128) as (bx, by, bz):
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            B_s = T.alloc_shared((block_K, block_N), T.float16)
            C_l = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_l)
            for k in T.Pipelined(part // block_K, num_stages=2):
                T.copy(A[by * block_M, bz * part + k * block_K], A_s)
                T.copy(B[bz * part + k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, ws[bz, by * block_M, bx * block_N])
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(acc)
            for s in T.serial(splits):
                for i, j in T.Parallel(block_M, block_N):
                    acc[i, j] += ws[s, by * block_M + i, bx * block_N + j]
            T.copy(acc, C[by * block_M, bx * block_N])
    return splitk_ws


# ---- accumulator epilogues and scalar parameters ------------------------------------------------
def gemm_tt_colscale(M=256, N=256, K=128, block_M=128, block_N=128, block_K=32):
    """A stored K x M and B stored N x K (both transposed); a per-column scale copied into
    a 1-D fragment multiplies the accumulator in a T.Parallel whose loop order is (j, i);
    each column's sum of the scaled tile is added atomically (reduce_sum dim=0 of the
    accumulator)."""
    @T.prim_func
    def gemm_tt(A: T.Tensor((K, M), T.float16), B: T.Tensor((N, K), T.float16),
                scale: T.Tensor((N,), T.float32), C: T.Tensor((M, N), T.float32),
                ColSum: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_K, block_M), T.float16)
            B_s = T.alloc_shared((block_N, block_K), T.float16)
            C_l = T.alloc_fragment((block_M, block_N), T.float32)
            sc = T.alloc_fragment((block_N,), T.float32)
            cs = T.alloc_fragment((block_N,), T.float32)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[k * block_K, by * block_M], A_s)
                T.copy(B[bx * block_N, k * block_K], B_s)
                T.gemm(A_s, B_s, C_l, transpose_A=True, transpose_B=True)
            T.copy(scale[bx * block_N], sc)
            for j, i in T.Parallel(block_N, block_M):
                C_l[i, j] = C_l[i, j] * sc[j]
            T.reduce_sum(C_l, cs, dim=0)
            T.copy(C_l, C[by * block_M, bx * block_N])
            for j in T.Parallel(block_N):
                T.atomic_add(ColSum[bx * block_N + j], cs[j])
    return gemm_tt


def axpby_scalars(N=10000, block=1024):
    """Scalar parameters (alpha: T.float32, n_valid: T.int32) read in the body."""
    @T.prim_func
    def axpby(X: T.Tensor((N,), T.float32), Y: T.Tensor((N,), T.float32), alpha: T.float32,
              beta: T.float32, n_valid: T.int32):
        with T.Kernel(T.ceildiv(N, block), threads=256) as bx:
            for i in T.Parallel(block):
                g = bx * block + i
                if g < n_valid:
                    Y[g] = alpha * X[g] + beta * Y[g]
    return axpby


def int8_quant_round(M=128, N=256, block_M=32):
    """Round-to-nearest int8 quantization with a per-row scale (T.round, T.clamp, cast to
    int8) and a bool mask choosing zero."""
    @T.prim_func
    def q8(X: T.Tensor((M, N), T.float32), keep: T.Tensor((M, N), T.bool),
           Q: T.Tensor((M, N), T.int8), S: T.Tensor((M,), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x = T.alloc_fragment((block_M, N), T.float32)
            am = T.alloc_fragment((block_M,), T.float32)
            T.copy(X[bx * block_M, 0], x)
            T.reduce_absmax(x, am, dim=1)
            for i in T.Parallel(block_M):
                am[i] = T.max(am[i], 1e-6) / 127.0
            for i, j in T.Parallel(block_M, N):
                Q[bx * block_M + i, j] = T.if_then_else(
                    keep[bx * block_M + i, j],
                    T.cast(T.clamp(T.round(x[i, j] / am[i]), -127.0, 127.0), T.int8),
                    T.int8(0))
            T.copy(am, S[bx * block_M])
    return q8


def gemm_wide_n_256threads(M=128, N=512, K=128, block_M=64, block_N=256, block_K=32):
    """block_M 64 with 256 threads: the warps must split N (two warpgroups side by side)."""
    @T.prim_func
    def gemm_wide(A: T.Tensor((M, K), T.bfloat16), B: T.Tensor((K, N), T.bfloat16),
                  C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.bfloat16)
            B_s = T.alloc_shared((block_K, block_N), T.bfloat16)
            C_l = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * block_M, bx * block_N])
    return gemm_wide


def gemm_fp16_accum(M=128, N=128, K=128, block_M=64, block_N=64, block_K=32):
    """fp16 accumulation (an fp16 accumulator fragment), T.Pipelined with num_stages=0
    (a plain loop)."""
    @T.prim_func
    def gemm_h(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
               C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            B_s = T.alloc_shared((block_K, block_N), T.float16)
            C_l = T.alloc_fragment((block_M, block_N), T.float16)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=0):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * block_M, bx * block_N])
    return gemm_h


# ---- attention backward pieces, gathers, top-k -------------------------------------------------
def attn_bwd_dv(batch=1, heads=2, seq=256, dim=64, block_M=64, block_N=64):
    """dV = P^T dO of an attention backward, one key block per kernel block: the scores
    transposed (K Q^T into an accumulator), P^T = exp2(s * scale - lse[j]) with the query's
    log-sum-exp read from a shared 1-D tile, causal through T.if_then_else, P^T cast with
    T.copy into a register fragment that is the A operand of the dV GEMM; the row sums of P^T
    kept with reduce_sum(clear=False); dV through a shared tile."""
    scale = (1.0 / dim) ** 0.5 * 1.44269504

    @T.prim_func
    def dv_kernel(Q: T.Tensor((batch, seq, heads, dim), T.float16),
                  K: T.Tensor((batch, seq, heads, dim), T.float16),
                  dO: T.Tensor((batch, seq, heads, dim), T.float16),
                  lse: T.Tensor((batch, heads, seq), T.float32),
                  dV: T.Tensor((batch, seq, heads, dim), T.float16),
                  Psum: T.Tensor((batch, heads, seq), T.float32)):
        with T.Kernel(heads, T.ceildiv(seq, block_M), batch, threads=128) as (bx, by, bz):
            k_s = T.alloc_shared((block_M, dim), T.float16)
            q_s = T.alloc_shared((block_N, dim), T.float16)
            do_s = T.alloc_shared((block_N, dim), T.float16)
            lse_s = T.alloc_shared((block_N,), T.float32, scope="shared")
            dv_s = T.alloc_shared((block_M, dim), T.float16)
            qkT = T.alloc_fragment((block_M, block_N), T.float32)
            qkT_cast = T.alloc_fragment((block_M, block_N), T.float16)
            dv = T.alloc_fragment((block_M, dim), T.float32)
            psum = T.alloc_fragment((block_M,), T.float32)
            T.copy(K[bz, by * block_M:(by + 1) * block_M, bx, :], k_s)
            T.clear(dv)
            T.clear(psum)
            start = T.floordiv(by * block_M, block_N)
            for k in T.Pipelined(start, T.ceildiv(seq, block_N), num_stages=2):
                T.copy(Q[bz, k * block_N:(k + 1) * block_N, bx, :], q_s)
                T.clear(qkT)
                T.gemm(k_s, q_s, qkT, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(lse[bz, bx, k * block_N:(k + 1) * block_N], lse_s)
                for i, j in T.Parallel(block_M, block_N):
                    qkT[i, j] = T.exp2(qkT[i, j] * scale - lse_s[j])
                for i, j in T.Parallel(block_M, block_N):
                    qkT[i, j] = T.if_then_else(by * block_M + i <= k * block_N + j, qkT[i, j], 0)
                T.reduce_sum(qkT, psum, dim=1, clear=False)
                T.copy(dO[bz, k * block_N:(k + 1) * block_N, bx, :], do_s)
                T.copy(qkT, qkT_cast)
                T.gemm(qkT_cast, do_s, dv, policy=T.GemmWarpPolicy.FullRow)
            T.copy(dv, dv_s)
            T.copy(dv_s, dV[bz, by * block_M:(by + 1) * block_M, bx, :])
            T.copy(psum, Psum[bz, bx, by * block_M:(by + 1) * block_M])
    return dv_kernel


def gqa_tile_atomic(batch=2, seq=128, heads=4, kv_heads=2, dim=64, block_M=64):
    """Each query head's tile added into its KV head's with one tile T.atomic_add from a
    shared tile into a slice of a 4-D tensor (GQA's dK/dV reduction)."""
    groups = heads // kv_heads

    @T.prim_func
    def gqa_sum(X: T.Tensor((batch, seq, heads, dim), T.float32),
                Y: T.Tensor((batch, seq, kv_heads, dim), T.float32)):
        with T.Kernel(heads, T.ceildiv(seq, block_M), batch, threads=128) as (bx, by, bz):
            x_s = T.alloc_shared((block_M, dim), T.float32)
            T.copy(X[bz, by * block_M:(by + 1) * block_M, bx, :], x_s)
            T.atomic_add(Y[bz, by * block_M:(by + 1) * block_M, bx // groups, :], x_s)
    return gqa_sum


def paged_gather_sum(num_pages=16, page=32, dim=64, batch=4, pages_per_seq=3):
    """Paged rows: each sequence's pages are listed in a block table; each step gathers a
    page's rows (T.copy with an index read from the table) and sums them."""
    @T.prim_func
    def paged(Cache: T.Tensor((num_pages, page, dim), T.float16),
              table: T.Tensor((batch, pages_per_seq), T.int32),
              Out: T.Tensor((batch, dim), T.float32)):
        with T.Kernel(batch, threads=128) as b:
            kv = T.alloc_shared((page, dim), T.float16)
            part = T.alloc_fragment((dim,), T.float32)
            acc = T.alloc_fragment((dim,), T.float32)
            T.clear(acc)
            for p in T.Pipelined(pages_per_seq, num_stages=2):
                T.copy(Cache[table[b, p], :, :], kv)
                T.reduce_sum(kv, part, dim=0)
                for d in T.Parallel(dim):
                    acc[d] += part[d]
            T.copy(acc, Out[b, :])
    return paged


def topk_rows(M=64, N=128, topk=4, block_M=16):
    """Row-wise top-k by repeated argmax: each round takes the row max, records its first
    index, and masks that element out with -inf."""
    @T.prim_func
    def topk_kernel(X: T.Tensor((M, N), T.float32), Vals: T.Tensor((M, topk), T.float32),
                    Idx: T.Tensor((M, topk), T.int32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x = T.alloc_fragment((block_M, N), T.float32)
            pos = T.alloc_fragment((block_M, N), T.int32)
            mx = T.alloc_fragment((block_M,), T.float32)
            at = T.alloc_fragment((block_M,), T.int32)
            T.copy(X[bx * block_M, 0], x)
            for r in T.serial(topk):
                T.reduce_max(x, mx, dim=1)
                for i, j in T.Parallel(block_M, N):
                    pos[i, j] = T.if_then_else(x[i, j] == mx[i], j, N)
                T.reduce_min(pos, at, dim=1)
                for i, j in T.Parallel(block_M, N):
                    if j == at[i]:
                        x[i, j] = -T.infinity(T.float32)
                for i in T.Parallel(block_M):
                    Vals[bx * block_M + i, r] = mx[i]
                    Idx[bx * block_M + i, r] = at[i]
    return topk_kernel


def compact_positive(N=2048, threads=256):
    """Stream compaction per block: each thread takes a slot in a shared counter
    (T.atomic_add on shared with return_prev=True) for each positive element, writes it
    into a shared staging array, and the block's count and items go out; a shared running
    maximum (atomic_max, return_prev) records the largest value seen before each."""
    per_block = threads * 2

    @T.prim_func
    def compact(X: T.Tensor((N,), T.float32), Out: T.Tensor((N,), T.float32),
                Count: T.Tensor((N // per_block,), T.int32)):
        with T.Kernel(N // per_block, threads=threads) as bx:
            tx = T.get_thread_binding()
            n = T.alloc_shared((1,), T.int32)
            stage = T.alloc_shared((per_block,), T.float32)
            slot = T.alloc_var(T.int32)
            if tx == 0:
                n[0] = 0
            T.sync_threads()
            for u in T.serial(2):
                v = X[bx * per_block + u * threads + tx]
                if v > 0:
                    slot = T.atomic_add(n[0], 1, return_prev=True)
                    stage[slot] = v
            T.sync_threads()
            for i in T.Parallel(per_block):
                if i < n[0]:
                    Out[bx * per_block + i] = stage[i]
            if tx == 0:
                Count[bx] = n[0]
    return compact
