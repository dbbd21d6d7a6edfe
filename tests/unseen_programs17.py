"""A seventeenth set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang), all from the GEMM family and all written as a TileLang user writes them:
``@tilecute.jit(out_idx=...)`` factories returning a ``@T.prim_func``.  They aim at the
variations the earlier rounds leave out: both operands transposed with a bfloat16 output,
``k_pack=2`` (AMD's packing, the same GEMM on NVIDIA), fp8 with ``transpose_A`` (no wgmma:
TileLang takes mma.sync there) and fp8 into a float16 accumulator, int8 re-quantised to
int8 in the epilogue, 128 x 256 tiles over two warpgroups (``FullCol`` / ``Square``),
epilogues over the accumulator with ``T.Parallel`` (row-bias + tanh-GELU, SiLU + residual
read past a ``T.symbolic`` M, per-token x per-channel scales clamped into e4m3, alpha /
beta over a batch), split-K by element atomics and by a ``(M, splits, N)`` workspace summed
by ``T.reduce_sum`` over its middle dim, batches stacked in rows and columns of 2-D
tensors, a ``T.symbolic`` batch with ``transpose_A`` at 4 stages, grouped GEMMs whose group
is found by a ``T.serial`` search over a tile-offsets tensor or by an in-kernel prefix
sum, GEMVs by ``T.Parallel`` + ``T.reduce_sum`` and by one warp a row with ``T.shfl_xor``,
skinny GEMMs (16-row mma, CUDA-core FMAs in ``T.Parallel``), weight-only dequant GEMMs
(uint4 with packed zero points, signed int4 packed along K in int8, uint4 packed along N,
a dequantised weight as the register A operand), ``T.use_swizzle(order="column")``,
``T.annotate_layout`` with ``make_swizzled_layout``, ``num_stages`` 0..4, all-symbolic
tails through a shared epilogue, RMSNorm fused into the A fragment, a peeled first step
with ``clear_accum=True``, a LoRA side GEMM into a second accumulator, and a DeepGEMM-like
fp8 GEMM with 1 x 128 / 128 x 128 block scales.

``tests/test_unseen_programs17.py`` builds each to a cubin on the CPU, checks what the
generated source says, and on a GPU compares each with a float32 / float64 torch
reference written to TileLang's meaning."""

import tilecute
import tilecute.language as T
from tilecute.layout import make_swizzled_layout


# ---- transposes and operand types -------------------------------------------------------------
@tilecute.jit(out_idx=[-1])
def gemm_tt_fp16_bf16_out(M=200, N=136, K=192, block_M=64, block_N=64, block_K=32, num_stages=3,
                          threads=128):
    """C = A^T @ B^T with A given as (K, M) and B as (N, K), float16 operands, float32
    accumulation, a bfloat16 C (the cast in the final T.copy).  M and N have tails."""

    @T.prim_func
    def main(A: T.Tensor((K, M), T.float16), B: T.Tensor((N, K), T.float16),
             C: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_K, block_M), T.float16)
            B_shared = T.alloc_shared((block_N, block_K), T.float16)
            C_local = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[ko * block_K, by * block_M], A_shared)
                T.copy(B[bx * block_N, ko * block_K], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_A=True, transpose_B=True)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


@tilecute.jit(out_idx=[-1])
def gemm_bf16_k_pack2_fullrow(M=256, N=256, K=256, block_M=128, block_N=128, block_K=64, k_pack=2):
    """bfloat16 NN GEMM over 256 threads with ``policy=FullRow`` and ``k_pack=2`` (TileLang
    reads k_pack only for AMD's MFMA: on NVIDIA the same GEMM as k_pack=1)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.bfloat16), B: T.Tensor((K, N), T.bfloat16),
             C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), T.bfloat16)
            B_shared = T.alloc_shared((block_K, block_N), T.bfloat16)
            C_local = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local, k_pack=k_pack, policy=T.GemmWarpPolicy.FullRow)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


@tilecute.jit(out_idx=[-1])
def gemm_fp8_transpose_a(M=128, N=192, K=256, block_M=64, block_N=64, block_K=64):
    """e4m3 x e4m3 -> float32 with A given as (K, M) (``transpose_A``): wgmma takes 8-bit
    operands K-major only, so TileLang runs this one on mma.sync."""

    @T.prim_func
    def main(A: T.Tensor((K, M), T.float8_e4m3), B: T.Tensor((N, K), T.float8_e4m3),
             C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_K, block_M), T.float8_e4m3)
            B_shared = T.alloc_shared((block_N, block_K), T.float8_e4m3)
            C_local = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[ko * block_K, by * block_M], A_shared)
                T.copy(B[bx * block_N, ko * block_K], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_A=True, transpose_B=True)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


@tilecute.jit(out_idx=[-1])
def gemm_fp8_half_accumulator(M=128, N=128, K=128, block_M=64, block_N=128, block_K=64):
    """e4m3 x e4m3 accumulated in a **float16** fragment (wgmma's f16 accumulator), the
    float16 C written straight from it."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float8_e4m3), B: T.Tensor((N, K), T.float8_e4m3),
             C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), T.float8_e4m3)
            B_shared = T.alloc_shared((block_N, block_K), T.float8_e4m3)
            C_local = T.alloc_fragment((block_M, block_N), T.float16)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[bx * block_N, ko * block_K], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


@tilecute.jit(out_idx=[-1])
def gemm_int8_requant_int8_out(M=192, N=128, K=256, block_M=64, block_N=64, block_K=64):
    """int8 x int8 -> int32, then re-quantised: q = int8(clamp(round(acc * sa[m] * sw[n]),
    -128, 127)) (``T.round``: TileLang's nearbyintf, halves to even)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.int8), W: T.Tensor((N, K), T.int8), Sa: T.Tensor((M,), T.float32),
             Sw: T.Tensor((N,), T.float32), Q: T.Tensor((M, N), T.int8)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), T.int8)
            W_shared = T.alloc_shared((block_N, block_K), T.int8)
            acc = T.alloc_fragment((block_M, block_N), T.int32)
            q = T.alloc_fragment((block_M, block_N), T.int8)
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(W[bx * block_N, ko * block_K], W_shared)
                T.gemm(A_shared, W_shared, acc, transpose_B=True)
            for i, j in T.Parallel(block_M, block_N):
                v = T.cast(acc[i, j], T.float32) * Sa[by * block_M + i] * Sw[bx * block_N + j]
                q[i, j] = T.cast(T.clamp(T.round(v), -128.0, 127.0), T.int8)
            T.copy(q, Q[by * block_M, bx * block_N])

    return main


@tilecute.jit(out_idx=[-1])
def gemm_fullcol_128x256_shared_out(M=256, N=512, K=256, block_M=128, block_N=256, block_K=32,
                                    policy=T.GemmWarpPolicy.FullCol, threads=256):
    """float16 TN GEMM on a 128 x 256 tile over two warpgroups with ``policy`` (FullCol:
    the warps split N), the float16 C staged through shared: ``T.copy(C_local,
    C_shared); T.copy(C_shared, C[...])``."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((N, K), T.float16),
             C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), T.float16)
            B_shared = T.alloc_shared((block_N, block_K), T.float16)
            C_shared = T.alloc_shared((block_M, block_N), T.float16)
            C_local = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[bx * block_N, ko * block_K], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True, policy=policy)
            T.copy(C_local, C_shared)
            T.copy(C_shared, C[by * block_M, bx * block_N])

    return main


# ---- epilogues over the accumulator -----------------------------------------------------------
@tilecute.jit(out_idx=[-1])
def gemm_row_bias_gelu_tanh_bf16(M=300, N=200, K=128, block_M=64, block_N=64, block_K=64):
    """bfloat16 NN GEMM; epilogue: a bias per **row** (Bias[M], broadcast along N), the
    tanh GELU, bfloat16 out through a shared tile; M and N have tails."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.bfloat16), B: T.Tensor((K, N), T.bfloat16),
             Bias: T.Tensor((M,), T.float32), C: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), T.bfloat16)
            B_shared = T.alloc_shared((block_K, block_N), T.bfloat16)
            C_shared = T.alloc_shared((block_M, block_N), T.bfloat16)
            C_local = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            for i, j in T.Parallel(block_M, block_N):
                x = C_local[i, j] + Bias[by * block_M + i]
                C_local[i, j] = 0.5 * x * (1.0 + T.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))
            T.copy(C_local, C_shared)
            T.copy(C_shared, C[by * block_M, bx * block_N])

    return main


@tilecute.jit(out_idx=[-1])
def gemm_silu_residual_symbolic_m(N=256, K=192, block_M=64, block_N=128, block_K=64):
    """M = ``T.symbolic("m")``; C = silu(A @ W^T) + R.  The residual is read in the
    ``T.Parallel`` epilogue without a guard: on the last row tile TileLang's safe-access
    pass keeps the rows past M from being read (and the final ``T.copy`` from being
    written)."""
    M = T.symbolic("m")

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), W: T.Tensor((N, K), T.float16), R: T.Tensor((M, N), T.float16),
             C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), T.float16)
            W_shared = T.alloc_shared((block_N, block_K), T.float16)
            C_local = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(W[bx * block_N, ko * block_K], W_shared)
                T.gemm(A_shared, W_shared, C_local, transpose_B=True)
            for i, j in T.Parallel(block_M, block_N):
                C_local[i, j] = C_local[i, j] * T.sigmoid(C_local[i, j]) + R[by * block_M + i, bx * block_N + j]
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


@tilecute.jit(out_idx=[-1])
def gemm_token_channel_scales_fp8_out(M=200, N=256, K=256, block_M=64, block_N=128, block_K=64):
    """float16 NT GEMM whose result is quantised to e4m3: out = e4m3(clamp(acc * st[m] *
    sc[n], -448, 448)) (per-token and per-channel scales); M has a tail."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((N, K), T.float16), St: T.Tensor((M,), T.float32),
             Sc: T.Tensor((N,), T.float32), C: T.Tensor((M, N), T.float8_e4m3)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), T.float16)
            B_shared = T.alloc_shared((block_N, block_K), T.float16)
            sc_shared = T.alloc_shared((block_N,), T.float32)
            C_local = T.alloc_fragment((block_M, block_N), T.float32)
            C_out = T.alloc_fragment((block_M, block_N), T.float8_e4m3)
            T.copy(Sc[bx * block_N], sc_shared)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[bx * block_N, ko * block_K], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
            for i, j in T.Parallel(block_M, block_N):
                C_out[i, j] = T.clamp(C_local[i, j] * St[by * block_M + i] * sc_shared[j], -448.0, 448.0)
            T.copy(C_out, C[by * block_M, bx * block_N])

    return main


@tilecute.jit(out_idx=[-1])
def bmm_alpha_beta(batch=3, M=128, N=128, K=96, beta=0.5, block_M=64, block_N=64, block_K=32):
    """Batched C = alpha[b] * A[b] @ B[b] + beta * Cin[b] over ``bz``, Cin staged in shared
    beside the K loop, beta a Python float."""

    @T.prim_func
    def main(A: T.Tensor((batch, M, K), T.float16), B: T.Tensor((batch, K, N), T.float16),
             Cin: T.Tensor((batch, M, N), T.float16), alpha: T.Tensor((batch,), T.float32),
             C: T.Tensor((batch, M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), batch, threads=128) as (bx, by, bz):
            A_shared = T.alloc_shared((block_M, block_K), T.float16)
            B_shared = T.alloc_shared((block_K, block_N), T.float16)
            Cin_shared = T.alloc_shared((block_M, block_N), T.float16)
            C_local = T.alloc_fragment((block_M, block_N), T.float32)
            T.copy(Cin[bz, by * block_M:(by + 1) * block_M, bx * block_N:(bx + 1) * block_N], Cin_shared)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[bz, by * block_M:(by + 1) * block_M, ko * block_K:(ko + 1) * block_K], A_shared)
                T.copy(B[bz, ko * block_K:(ko + 1) * block_K, bx * block_N:(bx + 1) * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            a = alpha[bz]
            for i, j in T.Parallel(block_M, block_N):
                C_local[i, j] = a * C_local[i, j] + beta * Cin_shared[i, j]
            T.copy(C_local, C[bz, by * block_M:(by + 1) * block_M, bx * block_N:(bx + 1) * block_N])

    return main


# ---- split-K ------------------------------------------------------------------------------------
@tilecute.jit
def splitk_element_atomics(M=100, N=136, K=500, splits=3, block_M=64, block_N=64, block_K=32):
    """Split-K over ``bz``; each split's partial sums are added into a float32 C (zeroed by
    the caller) one element at a time, ``T.atomic_add(C[m, n], acc[i, j])`` under the
    user's own bounds test.  K's splits are whole ``block_K`` multiples; the last split
    runs past K (read as zeros)."""
    k_per_split = ((K + splits - 1) // splits + block_K - 1) // block_K * block_K

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), splits, threads=128) as (bx, by, bz):
            A_shared = T.alloc_shared((block_M, block_K), T.float16)
            B_shared = T.alloc_shared((block_K, block_N), T.float16)
            C_local = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_local)
            for ko in T.Pipelined(k_per_split // block_K, num_stages=2):
                k0 = bz * k_per_split + ko * block_K
                T.copy(A[by * block_M, k0], A_shared)
                T.copy(B[k0, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            for i, j in T.Parallel(block_M, block_N):
                if by * block_M + i < M and bx * block_N + j < N:
                    T.atomic_add(C[by * block_M + i, bx * block_N + j], C_local[i, j])

    return main


@tilecute.jit(out_idx=[-1])
def splitk_partials_mid_dim(M=128, N=96, K=384, splits=4, block_M=64, block_N=32, block_K=32):
    """Split-K's first kernel: each split's partial tile goes to Ws[m, split, n] (the split
    a middle dim of the workspace, written through a 2-D fragment copy)."""
    k_per_split = K // splits

    @T.prim_func
    def main(A: T.Tensor((M, K), T.bfloat16), B: T.Tensor((N, K), T.bfloat16),
             Ws: T.Tensor((M, splits, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), splits, threads=128) as (bx, by, bz):
            A_shared = T.alloc_shared((block_M, block_K), T.bfloat16)
            B_shared = T.alloc_shared((block_N, block_K), T.bfloat16)
            C_local = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_local)
            for ko in T.Pipelined(k_per_split // block_K, num_stages=3):
                T.copy(A[by * block_M, bz * k_per_split + ko * block_K], A_shared)
                T.copy(B[bx * block_N, bz * k_per_split + ko * block_K], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
            T.copy(C_local, Ws[by * block_M:(by + 1) * block_M, bz, bx * block_N:(bx + 1) * block_N])

    return main


@tilecute.jit(out_idx=[-1])
def splitk_reduce_mid_dim(M=128, N=96, splits=4, block_M=16, block_N=32):
    """Split-K's second kernel: a (block_M, splits, block_N) fragment of the workspace summed
    over its middle dim by ``T.reduce_sum(dim=1)``, a bias per column added, ReLU,
    bfloat16 out."""

    @T.prim_func
    def main(Ws: T.Tensor((M, splits, N), T.float32), Bias: T.Tensor((N,), T.float32),
             C: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            w = T.alloc_fragment((block_M, splits, block_N), T.float32)
            s = T.alloc_fragment((block_M, block_N), T.float32)
            T.copy(Ws[by * block_M:(by + 1) * block_M, :, bx * block_N:(bx + 1) * block_N], w)
            T.reduce_sum(w, s, dim=1)
            for i, j in T.Parallel(block_M, block_N):
                s[i, j] = T.max(s[i, j] + Bias[bx * block_N + j], 0.0)
            T.copy(s, C[by * block_M, bx * block_N])

    return main


# ---- batches ------------------------------------------------------------------------------------
@tilecute.jit
def bmm_stacked_2d(batch=3, M=100, N=64, K=128, block_M=64, block_N=64, block_K=32):
    """Batches stacked in 2-D tensors: batch b's A is rows [b*M, (b+1)*M) of A2 (batch*M, K),
    its B the columns [b*N, (b+1)*N) of B2 (K, batch*N), its C rows [b*M, (b+1)*M) of C2.
    M is not a tile multiple, so a row tile runs into the next batch's rows: the user
    guards the write (``i < M - by * block_M``); the reads past M are the next batch's."""

    @T.prim_func
    def main(A2: T.Tensor((batch * M, K), T.float16), B2: T.Tensor((K, batch * N), T.float16),
             C2: T.Tensor((batch * M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), batch, threads=128) as (bx, by, bz):
            A_shared = T.alloc_shared((block_M, block_K), T.float16)
            B_shared = T.alloc_shared((block_K, block_N), T.float16)
            C_local = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A2[bz * M + by * block_M, ko * block_K], A_shared)
                T.copy(B2[ko * block_K, bz * N + bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            for i, j in T.Parallel(block_M, block_N):
                if i < M - by * block_M:
                    C2[bz * M + by * block_M + i, bx * block_N + j] = C_local[i, j]

    return main


@tilecute.jit(out_idx=[-1])
def bmm_symbolic_batch_transpose_a(M=128, N=128, K=256, block_M=64, block_N=64, block_K=32):
    """batch = ``T.symbolic("batch")``; C[b] = A[b]^T @ B[b] with A given as (batch, K, M),
    bfloat16, 4 pipeline stages, float32 C."""
    batch = T.symbolic("batch")

    @T.prim_func
    def main(A: T.Tensor((batch, K, M), T.bfloat16), B: T.Tensor((batch, K, N), T.bfloat16),
             C: T.Tensor((batch, M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), batch, threads=128) as (bx, by, bz):
            A_shared = T.alloc_shared((block_K, block_M), T.bfloat16)
            B_shared = T.alloc_shared((block_K, block_N), T.bfloat16)
            C_local = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=4):
                T.copy(A[bz, ko * block_K, by * block_M], A_shared)
                T.copy(B[bz, ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_A=True)
            T.copy(C_local, C[bz, by * block_M, bx * block_N])

    return main


# ---- grouped GEMMs ------------------------------------------------------------------------------
@tilecute.jit(out_idx=[-1])
def grouped_gemm_tile_search(G=4, total=300, max_tiles=8, N=128, K=128, block_M=64, block_N=64,
                             block_K=64):
    """Grouped Y[rows of g] = X[rows of g] @ W[g]^T over a flat grid of row tiles: block bx
    finds its group by a ``T.serial`` search of tile_offs (the prefix of each group's
    ceil(size / block_M)) into a ``T.alloc_var``; row_offs holds the groups' first rows.
    Blocks past the last tile do nothing; a tile's rows past its group are not written."""

    @T.prim_func
    def main(X: T.Tensor((total, K), T.float16), W: T.Tensor((G, N, K), T.float16),
             row_offs: T.Tensor((G + 1,), T.int32), tile_offs: T.Tensor((G + 1,), T.int32),
             Y: T.Tensor((total, N), T.float16)):
        with T.Kernel(max_tiles, T.ceildiv(N, block_N), threads=128) as (bx, by):
            X_shared = T.alloc_shared((block_M, block_K), T.float16)
            W_shared = T.alloc_shared((block_N, block_K), T.float16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            g = T.alloc_var(T.int32)
            g = 0
            for i in T.serial(G):
                if bx >= tile_offs[i + 1]:
                    g = i + 1
            if g < G:
                row0 = row_offs[g] + (bx - tile_offs[g]) * block_M
                rows = row_offs[g + 1] - row0
                T.clear(acc)
                for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                    T.copy(X[row0:row0 + block_M, ko * block_K:(ko + 1) * block_K], X_shared)
                    T.copy(W[g, by * block_N:(by + 1) * block_N, ko * block_K:(ko + 1) * block_K], W_shared)
                    T.gemm(X_shared, W_shared, acc, transpose_B=True)
                for i, j in T.Parallel(block_M, block_N):
                    if i < rows:
                        Y[row0 + i, by * block_N + j] = acc[i, j]

    return main


@tilecute.jit(out_idx=[-1])
def grouped_gemm_prefix_in_kernel(G=3, total=260, max_rows=128, N=96, K=64, block_M=64, block_N=32,
                                  block_K=32):
    """Grouped GEMM over a (row tiles, col tiles, group) grid: group ``bz``'s first row is
    the prefix sum of sizes[0:bz], computed in the kernel by a ``T.serial(bz)`` loop into
    a ``T.alloc_var`` initialised by ``init=``; row tiles past the group's size skip the
    whole body.  W[g] is (K, N) (not transposed); Y is bfloat16."""

    @T.prim_func
    def main(X: T.Tensor((total, K), T.bfloat16), W: T.Tensor((G, K, N), T.bfloat16),
             sizes: T.Tensor((G,), T.int32), Y: T.Tensor((total, N), T.bfloat16)):
        with T.Kernel(T.ceildiv(max_rows, block_M), T.ceildiv(N, block_N), G, threads=128) as (bx, by, bz):
            X_shared = T.alloc_shared((block_M, block_K), T.bfloat16)
            W_shared = T.alloc_shared((block_K, block_N), T.bfloat16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            start = T.alloc_var(T.int32, init=0)
            for i in T.serial(bz):
                start += sizes[i]
            size = sizes[bz]
            if bx * block_M < size:
                T.clear(acc)
                for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                    T.copy(X[start + bx * block_M, ko * block_K], X_shared)
                    T.copy(W[bz, ko * block_K, by * block_N], W_shared)
                    T.gemm(X_shared, W_shared, acc)
                for i, j in T.Parallel(block_M, block_N):
                    if bx * block_M + i < size:
                        Y[start + bx * block_M + i, by * block_N + j] = acc[i, j]

    return main


# ---- GEMV and skinny GEMMs -------------------------------------------------------------------------
@tilecute.jit(out_idx=[-1])
def gemv_parallel_reduce_sum(N=300, K=1000, block_N=32, block_K=128):
    """y = W @ x: a (block_N, block_K) tile of products in a fragment, summed along K by
    ``T.reduce_sum(dim=1, clear=False)`` into a running (block_N,) fragment; N and K have
    tails (read as zeros by the copies)."""

    @T.prim_func
    def main(W: T.Tensor((N, K), T.float16), x: T.Tensor((K,), T.float16), y: T.Tensor((N,), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), threads=128) as bx:
            x_shared = T.alloc_shared((block_K,), T.float16)
            w_local = T.alloc_fragment((block_N, block_K), T.float16)
            prod = T.alloc_fragment((block_N, block_K), T.float32)
            acc = T.alloc_fragment((block_N,), T.float32)
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(x[ko * block_K], x_shared)
                T.copy(W[bx * block_N, ko * block_K], w_local)
                for i, k in T.Parallel(block_N, block_K):
                    prod[i, k] = T.cast(w_local[i, k], T.float32) * T.cast(x_shared[k], T.float32)
                T.reduce_sum(prod, acc, dim=1, clear=False)
            T.copy(acc, y[bx * block_N])

    return main


@tilecute.jit(out_idx=[-1])
def gemv_warp_per_row_shfl(N=203, K=1000, warps=4, vec=8):
    """y = W @ x + bias, one warp a row: lane l takes ``vec`` elements at a time, stride 32 *
    vec, through ``T.get_thread_binding``; the lanes' sums combine by ``T.shfl_xor``
    (16, 8, 4, 2, 1) and lane 0 writes.  Every lane joins the shuffles; only the loads
    and the write are guarded."""

    @T.prim_func
    def main(W: T.Tensor((N, K), T.bfloat16), x: T.Tensor((K,), T.bfloat16), bias: T.Tensor((N,), T.float32),
             y: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, warps), threads=32 * warps) as bx:
            tx = T.get_thread_binding(0)
            lane = tx % 32
            row = bx * warps + tx // 32
            acc = T.alloc_local((1,), T.float32)
            acc[0] = 0.0
            for ko in T.serial(T.ceildiv(K, 32 * vec)):
                for v in T.unroll(vec):
                    k = ko * 32 * vec + lane * vec + v
                    if row < N and k < K:
                        acc[0] += T.cast(W[row, k], T.float32) * T.cast(x[k], T.float32)
            acc[0] += T.shfl_xor(acc[0], 16)
            acc[0] += T.shfl_xor(acc[0], 8)
            acc[0] += T.shfl_xor(acc[0], 4)
            acc[0] += T.shfl_xor(acc[0], 2)
            acc[0] += T.shfl_xor(acc[0], 1)
            if lane == 0 and row < N:
                y[row] = acc[0] + bias[row]

    return main


@tilecute.jit(out_idx=[-1])
def skinny_gemm_m16_fullcol(N=320, K=256, block_M=16, block_N=64, block_K=64):
    """Decode-shaped GEMM: M = ``T.symbolic("tokens")`` (a handful), a 16-row tile on
    mma.sync with the four warps side by side along N (``FullCol``)."""
    M = T.symbolic("tokens")

    @T.prim_func
    def main(X: T.Tensor((M, K), T.float16), W: T.Tensor((N, K), T.float16), Y: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            X_shared = T.alloc_shared((block_M, block_K), T.float16)
            W_shared = T.alloc_shared((block_N, block_K), T.float16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(X[by * block_M, ko * block_K], X_shared)
                T.copy(W[bx * block_N, ko * block_K], W_shared)
                T.gemm(X_shared, W_shared, acc, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
            T.copy(acc, Y[by * block_M, bx * block_N])

    return main


@tilecute.jit(out_idx=[-1])
def skinny_gemm_cuda_core_fma(tokens=4, N=200, K=320, block_N=64, block_K=32):
    """tokens x N = X @ W^T on CUDA cores: a (tokens, block_N) fragment accumulates, each
    element a ``T.serial`` dot over the K tile read from shared; N has a tail."""

    @T.prim_func
    def main(X: T.Tensor((tokens, K), T.float16), W: T.Tensor((N, K), T.float16),
             Y: T.Tensor((tokens, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), threads=128) as bx:
            X_shared = T.alloc_shared((tokens, block_K), T.float16)
            W_shared = T.alloc_shared((block_N, block_K), T.float16)
            acc = T.alloc_fragment((tokens, block_N), T.float32)
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(X[0, ko * block_K], X_shared)
                T.copy(W[bx * block_N, ko * block_K], W_shared)
                for t, n in T.Parallel(tokens, block_N):
                    for kk in T.serial(block_K):
                        acc[t, n] += T.cast(X_shared[t, kk], T.float32) * T.cast(W_shared[n, kk], T.float32)
            T.copy(acc, Y[0, bx * block_N])

    return main


# ---- weight-only dequant GEMMs ----------------------------------------------------------------------
@tilecute.jit(out_idx=[-1])
def dequant_uint4_zero_points(M=128, N=128, K=256, group=64, block_M=64, block_N=64, block_K=64):
    """W4A16 with zero points: W[n, k] = (q - z) * s, q the uint4 nibble k % 2 of
    Bq[n, k // 2] (even k low), z the nibble (k // group) % 2 of Zp[n, k // group // 2],
    s = Sc[n, k // group].  Dequantised into shared with ``T.Parallel``, then C = A @ W^T."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), Bq: T.Tensor((N, K // 2), T.uint8),
             Sc: T.Tensor((N, K // group), T.float16), Zp: T.Tensor((N, K // group // 2), T.uint8),
             C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), T.float16)
            Bq_shared = T.alloc_shared((block_N, block_K // 2), T.uint8)
            B_shared = T.alloc_shared((block_N, block_K), T.float16)
            C_local = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(Bq[bx * block_N, ko * block_K // 2], Bq_shared)
                for i, j in T.Parallel(block_N, block_K):
                    grp = (ko * block_K + j) // group
                    q = (Bq_shared[i, j // 2] >> (4 * (j % 2))) & 0xF
                    z = (Zp[bx * block_N + i, grp // 2] >> (4 * (grp % 2))) & 0xF
                    B_shared[i, j] = (T.cast(q, T.float16) - T.cast(z, T.float16)) * Sc[bx * block_N + i, grp]
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


@tilecute.jit(out_idx=[-1])
def dequant_int4_signed_k_packed_fragment(M=128, N=128, K=256, group=32, block_M=64, block_N=64,
                                          block_K=64):
    """bf16 x signed int4 with B packed two a byte **along K** in int8: Bq[k // 2, n] holds
    k even in the low nibble, sign-extended by ``T.cast(T.cast(b, T.uint8) << 4, T.int8) >>
    4``, and k odd in the high one (``b >> 4``, arithmetic); group scales S[k // group, n].
    Dequantised into a fragment, copied to shared, then C = A @ B.  (``T.cast(b << 4,
    T.int8)`` would not narrow: ``b << 4`` is already int8 to TVM, so the cast is dropped
    and C computes ``(b << 4) >> 4`` in int: b itself.)"""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.bfloat16), Bq: T.Tensor((K // 2, N), T.int8),
             S: T.Tensor((K // group, N), T.bfloat16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), T.bfloat16)
            Bq_shared = T.alloc_shared((block_K // 2, block_N), T.int8)
            B_local = T.alloc_fragment((block_K, block_N), T.bfloat16)
            B_shared = T.alloc_shared((block_K, block_N), T.bfloat16)
            C_local = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(Bq[ko * block_K // 2, bx * block_N], Bq_shared)
                for k, n in T.Parallel(block_K, block_N):
                    b = Bq_shared[k // 2, n]
                    v = T.if_then_else(k % 2 == 0, T.cast(T.cast(b, T.uint8) << 4, T.int8) >> 4, b >> 4)
                    B_local[k, n] = T.cast(v, T.bfloat16) * S[(ko * block_K + k) // group, bx * block_N + n]
                T.copy(B_local, B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


@tilecute.jit(out_idx=[-1])
def dequant_uint4_n_packed_zeros(M=64, N=256, K=256, group=128, block_M=64, block_N=128, block_K=64):
    """uint4 packed two a byte **along N** (AWQ-like): Bq[k, n // 2] holds n even low, n odd
    high; zero points packed the same way in Zp[k // group, n // 2]; scales Sc[k // group,
    n].  W = (q - z) * s dequantised into shared, C = A @ W (NN)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), Bq: T.Tensor((K, N // 2), T.uint8),
             Sc: T.Tensor((K // group, N), T.float16), Zp: T.Tensor((K // group, N // 2), T.uint8),
             C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), T.float16)
            Bq_shared = T.alloc_shared((block_K, block_N // 2), T.uint8)
            B_shared = T.alloc_shared((block_K, block_N), T.float16)
            C_local = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(Bq[ko * block_K, bx * block_N // 2], Bq_shared)
                for k, n in T.Parallel(block_K, block_N):
                    grp = (ko * block_K + k) // group
                    col = bx * block_N + n
                    shift = (n % 2) * 4
                    q = (Bq_shared[k, n // 2] >> shift) & 15
                    z = (Zp[grp, col // 2] >> shift) & 15
                    B_shared[k, n] = T.cast(T.cast(q, T.int32) - T.cast(z, T.int32), T.float16) * Sc[grp, col]
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


@tilecute.jit(out_idx=[-1])
def dequant_weight_register_a(N=256, K=256, group=64, block_N=64, block_M=32, block_K=64):
    """Y = X @ W^T computed as Y^T = W @ X^T, with the dequantised weight as the **register
    A operand**: W[n, k] = (uint4 - 8) * Sc[n, k // group] built in a fragment, then
    ``T.gemm(W_frag, X_shared, acc, transpose_B=True)``; the (block_N, block_M)
    accumulator written transposed into Y.  M = ``T.symbolic("m")``."""
    M = T.symbolic("m")

    @T.prim_func
    def main(X: T.Tensor((M, K), T.float16), Wq: T.Tensor((N, K // 2), T.uint8),
             Sc: T.Tensor((N, K // group), T.float16), Y: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            Wq_shared = T.alloc_shared((block_N, block_K // 2), T.uint8)
            X_shared = T.alloc_shared((block_M, block_K), T.float16)
            W_frag = T.alloc_fragment((block_N, block_K), T.float16)
            acc = T.alloc_fragment((block_N, block_M), T.float32)
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(Wq[bx * block_N, ko * block_K // 2], Wq_shared)
                T.copy(X[by * block_M, ko * block_K], X_shared)
                for i, j in T.Parallel(block_N, block_K):
                    nib = (Wq_shared[i, j // 2] >> ((j % 2) * 4)) & 15
                    W_frag[i, j] = (T.cast(nib, T.float16) - T.float16(8)) * Sc[bx * block_N + i, (ko * block_K + j) // group]
                T.gemm(W_frag, X_shared, acc, transpose_B=True)
            for i, j in T.Parallel(block_N, block_M):
                if by * block_M + j < M:
                    Y[by * block_M + j, bx * block_N + i] = acc[i, j]

    return main


# ---- schedules and layouts ------------------------------------------------------------------------
@tilecute.jit(out_idx=[-1])
def gemm_swizzle_column_panel(M=320, N=448, K=128, panel=4, order="column", block_M=64, block_N=64,
                              block_K=32):
    """float16 NN GEMM over a 7 x 5 grid with ``T.use_swizzle(panel, order)``: the panel does
    not divide the grid."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), T.float16)
            B_shared = T.alloc_shared((block_K, block_N), T.float16)
            C_local = T.alloc_fragment((block_M, block_N), T.float32)
            T.use_swizzle(panel_size=panel, order=order)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


@tilecute.jit(out_idx=[-1])
def gemm_annotated_swizzled_layouts(M=256, N=256, K=256, block_M=128, block_N=128, block_K=32):
    """bf16 TN GEMM whose A, B and C staging tiles carry ``make_swizzled_layout`` through
    ``T.annotate_layout``; C leaves through the swizzled shared tile."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.bfloat16), B: T.Tensor((N, K), T.bfloat16), C: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), T.bfloat16)
            B_shared = T.alloc_shared((block_N, block_K), T.bfloat16)
            C_shared = T.alloc_shared((block_M, block_N), T.bfloat16)
            C_local = T.alloc_fragment((block_M, block_N), T.float32)
            T.annotate_layout({
                A_shared: make_swizzled_layout(A_shared),
                B_shared: make_swizzled_layout(B_shared),
                C_shared: make_swizzled_layout(C_shared),
            })
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[bx * block_N, ko * block_K], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
            T.copy(C_local, C_shared)
            T.copy(C_shared, C[by * block_M, bx * block_N])

    return main


@tilecute.jit(out_idx=[-1])
def gemm_stages_fullrow_256(M=256, N=256, K=320, num_stages=0, block_M=128, block_N=128, block_K=32):
    """bf16 NN GEMM, 256 threads, ``policy=FullRow`` (the 8 warps split M), at
    ``num_stages`` 0 (a plain loop) through 4; K = 10 tiles."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.bfloat16), B: T.Tensor((K, N), T.bfloat16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), T.bfloat16)
            B_shared = T.alloc_shared((block_K, block_N), T.bfloat16)
            C_local = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local, policy=T.GemmWarpPolicy.FullRow)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


@tilecute.jit(out_idx=[-1])
def gemm_all_symbolic_shared_epilogue(block_M=64, block_N=64, block_K=32):
    """M, N and K all ``T.symbolic``; the float16 C leaves through a shared tile whose copy
    to C is the one guarded on the tails; the copies into A / B read zeros past M, N, K."""
    M, N, K = T.symbolic("M"), T.symbolic("N"), T.symbolic("K")

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), T.float16)
            B_shared = T.alloc_shared((block_K, block_N), T.float16)
            C_shared = T.alloc_shared((block_M, block_N), T.float16)
            C_local = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C_shared)
            T.copy(C_shared, C[by * block_M, bx * block_N])

    return main


# ---- register A, peeled steps, second accumulators ------------------------------------------------
@tilecute.jit(out_idx=[-1])
def rmsnorm_gemm_register_a(M=128, N=128, K=256, eps=1e-6, block_M=64, block_N=64, block_K=64):
    """Y = RMSNorm(X) @ W^T fused: each K tile of X is scaled by gamma into a float16 **A
    fragment** (``T.gemm(A_frag, W_shared, ...)``) while the rows' sums of squares of X
    accumulate by ``T.reduce_sum(clear=False)``; the epilogue divides by rms.  Refused
    (TileLang: "no available layout found"): the squares' fragment is walked in a loop of
    its own, so its row sums cannot live with the accumulator's rows; see
    ``rmsnorm_gemm_register_a_one_loop``."""

    @T.prim_func
    def main(X: T.Tensor((M, K), T.float16), gamma: T.Tensor((K,), T.float16), W: T.Tensor((N, K), T.float16),
             Y: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            X_shared = T.alloc_shared((block_M, block_K), T.float16)
            W_shared = T.alloc_shared((block_N, block_K), T.float16)
            A_frag = T.alloc_fragment((block_M, block_K), T.float16)
            sq = T.alloc_fragment((block_M, block_K), T.float32)
            ss = T.alloc_fragment((block_M,), T.float32)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(acc)
            T.clear(ss)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(X[by * block_M, ko * block_K], X_shared)
                T.copy(W[bx * block_N, ko * block_K], W_shared)
                for i, k in T.Parallel(block_M, block_K):
                    A_frag[i, k] = X_shared[i, k] * gamma[ko * block_K + k]
                for i, k in T.Parallel(block_M, block_K):
                    sq[i, k] = T.cast(X_shared[i, k], T.float32) * T.cast(X_shared[i, k], T.float32)
                T.reduce_sum(sq, ss, dim=1, clear=False)
                T.gemm(A_frag, W_shared, acc, transpose_B=True)
            for i, j in T.Parallel(block_M, block_N):
                acc[i, j] = acc[i, j] * T.rsqrt(ss[i] / K + eps)
            T.copy(acc, Y[by * block_M, bx * block_N])

    return main


@tilecute.jit(out_idx=[-1])
def rmsnorm_gemm_register_a_one_loop(M=128, N=128, K=256, eps=1e-6, block_M=64, block_N=64, block_K=64):
    """Y = RMSNorm(X) @ W^T fused: each K tile of X is scaled by gamma into a float16 **A
    fragment** (``T.gemm(A_frag, W_shared, ...)``) while the rows' sums of squares of X
    accumulate by ``T.reduce_sum(clear=False)``; the epilogue divides by rms.  The squares
    are written in the loop that writes the A fragment, so they take its (i, k) layout
    and their row sums live with the accumulator's rows."""

    @T.prim_func
    def main(X: T.Tensor((M, K), T.float16), gamma: T.Tensor((K,), T.float16), W: T.Tensor((N, K), T.float16),
             Y: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            X_shared = T.alloc_shared((block_M, block_K), T.float16)
            W_shared = T.alloc_shared((block_N, block_K), T.float16)
            A_frag = T.alloc_fragment((block_M, block_K), T.float16)
            sq = T.alloc_fragment((block_M, block_K), T.float32)
            ss = T.alloc_fragment((block_M,), T.float32)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(acc)
            T.clear(ss)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(X[by * block_M, ko * block_K], X_shared)
                T.copy(W[bx * block_N, ko * block_K], W_shared)
                for i, k in T.Parallel(block_M, block_K):
                    A_frag[i, k] = X_shared[i, k] * gamma[ko * block_K + k]
                    sq[i, k] = T.cast(X_shared[i, k], T.float32) * T.cast(X_shared[i, k], T.float32)
                T.reduce_sum(sq, ss, dim=1, clear=False)
                T.gemm(A_frag, W_shared, acc, transpose_B=True)
            for i, j in T.Parallel(block_M, block_N):
                acc[i, j] = acc[i, j] * T.rsqrt(ss[i] / K + eps)
            T.copy(acc, Y[by * block_M, bx * block_N])

    return main


@tilecute.jit(out_idx=[-1])
def gemm_peeled_first_step_clear_accum(M=128, N=128, K=320, block_M=64, block_N=64, block_K=64):
    """The first K step taken before the loop with ``clear_accum=True`` (no ``T.clear``; the
    accumulator holds garbage before it), the rest in a pipelined loop from step 1."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((N, K), T.float16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), T.float16)
            B_shared = T.alloc_shared((block_N, block_K), T.float16)
            C_local = T.alloc_fragment((block_M, block_N), T.float32)
            T.copy(A[by * block_M, 0], A_shared)
            T.copy(B[bx * block_N, 0], B_shared)
            T.gemm(A_shared, B_shared, C_local, transpose_B=True, clear_accum=True)
            for ko in T.Pipelined(T.ceildiv(K, block_K) - 1, num_stages=2):
                T.copy(A[by * block_M, (ko + 1) * block_K], A_shared)
                T.copy(B[bx * block_N, (ko + 1) * block_K], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


@tilecute.jit(out_idx=[-1])
def lora_gemm_second_accumulator(M=128, N=128, K=256, r=16, lora_scale=0.5, block_M=64, block_N=64,
                                 block_K=64):
    """Y = X @ W^T + s * (X @ La^T) @ Lb^T: in the K loop two GEMMs into two accumulators
    (block_M x block_N and block_M x r); after it the rank-r product, cast to float16 in
    shared, is the A of a third GEMM (K = r) into the main accumulator."""

    @T.prim_func
    def main(X: T.Tensor((M, K), T.float16), W: T.Tensor((N, K), T.float16), La: T.Tensor((r, K), T.float16),
             Lb: T.Tensor((N, r), T.float16), Y: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            X_shared = T.alloc_shared((block_M, block_K), T.float16)
            W_shared = T.alloc_shared((block_N, block_K), T.float16)
            La_shared = T.alloc_shared((r, block_K), T.float16)
            Lb_shared = T.alloc_shared((block_N, r), T.float16)
            XA_shared = T.alloc_shared((block_M, r), T.float16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            xa = T.alloc_fragment((block_M, r), T.float32)
            T.clear(acc)
            T.clear(xa)
            T.copy(Lb[bx * block_N, 0], Lb_shared)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(X[by * block_M, ko * block_K], X_shared)
                T.copy(W[bx * block_N, ko * block_K], W_shared)
                T.copy(La[0, ko * block_K], La_shared)
                T.gemm(X_shared, W_shared, acc, transpose_B=True)
                T.gemm(X_shared, La_shared, xa, transpose_B=True)
            for i, j in T.Parallel(block_M, r):
                xa[i, j] = xa[i, j] * lora_scale
            T.copy(xa, XA_shared)
            T.gemm(XA_shared, Lb_shared, acc, transpose_B=True)
            T.copy(acc, Y[by * block_M, bx * block_N])

    return main


@tilecute.jit(out_idx=[-1])
def fp8_blockwise_scaled_gemm(M=256, N=256, K=512, block_M=64, block_N=128, block_K=128):
    """DeepGEMM-like fp8: A e4m3 with a scale per row per 128-wide K block (As[m, k // 128]),
    B e4m3 (N, K) with a scale per 128 x 128 block (Bs[n // 128, k // 128]).  Each K step's
    GEMM goes to a scratch accumulator (``clear_accum=True``) that is scaled into the
    running one; bfloat16 out."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float8_e4m3), B: T.Tensor((N, K), T.float8_e4m3),
             As: T.Tensor((M, K // 128), T.float32), Bs: T.Tensor((N // 128, K // 128), T.float32),
             C: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), T.float8_e4m3)
            B_shared = T.alloc_shared((block_N, block_K), T.float8_e4m3)
            tmp = T.alloc_fragment((block_M, block_N), T.float32)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(acc)
            for ko in T.Pipelined(K // block_K, num_stages=3):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[bx * block_N, ko * block_K], B_shared)
                T.gemm(A_shared, B_shared, tmp, transpose_B=True, clear_accum=True)
                b_scale = Bs[bx * block_N // 128, ko]
                for i, j in T.Parallel(block_M, block_N):
                    acc[i, j] += tmp[i, j] * As[by * block_M + i, ko] * b_scale
            T.copy(acc, C[by * block_M, bx * block_N])

    return main


@tilecute.jit(out_idx=[-1])
def gemv_2d_threads_shared_sum(N=200, K=768, block_N=32, reduce_threads=4):
    """GEMV over a 2-D thread block, ``threads=(block_N, reduce_threads)``: thread (tn, tk)
    sums a strided slice of row tn's K into a local; the partials meet in a (block_N,
    reduce_threads) shared tile and thread tk == 0 adds them up (a barrier between)."""

    @T.prim_func
    def main(W: T.Tensor((N, K), T.float16), x: T.Tensor((K,), T.float16), y: T.Tensor((N,), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), threads=(block_N, reduce_threads)) as bx:
            tn = T.get_thread_binding(0)
            tk = T.get_thread_binding(1)
            part = T.alloc_shared((block_N, reduce_threads), T.float32)
            s = T.alloc_local((1,), T.float32)
            s[0] = 0.0
            row = bx * block_N + tn
            for k in T.serial(T.ceildiv(K, reduce_threads)):
                kk = k * reduce_threads + tk
                if row < N and kk < K:
                    s[0] += T.cast(W[row, kk], T.float32) * T.cast(x[kk], T.float32)
            part[tn, tk] = s[0]
            T.sync_threads()
            if tk == 0 and row < N:
                total = T.alloc_var(T.float32, init=0.0)
                for t in T.serial(reduce_threads):
                    total += part[tn, t]
                y[row] = total

    return main


# ---- integer selects and narrow shifts (the dequant programs' building blocks) --------------------
@tilecute.jit(out_idx=[-1])
def select_uint8_bytes(n=256):
    """``v = T.if_then_else(c, U[i], U[j])`` over uint8 bytes, then v widened to int32, v >>
    4 (logical: v is unsigned) and v as a float: each reads v as the unsigned byte."""

    @T.prim_func
    def main(U: T.Tensor((n,), T.uint8), O: T.Tensor((n, 3), T.int32)):
        with T.Kernel(1, threads=n) as bx:
            for i in T.Parallel(n):
                v = T.if_then_else(i % 2 == 0, U[i], U[(i + 1) % n])
                O[i, 0] = T.cast(v, T.int32)
                O[i, 1] = T.cast(v >> 4, T.int32)
                O[i, 2] = T.cast(T.cast(v, T.float32) * 2.0, T.int32)

    return main


@tilecute.jit(out_idx=[-1])
def int8_nibble_shifts(n=256):
    """The low nibble of an int8 byte b, three ways, as TileLang computes them:
    ``T.cast(b << 4, T.int8) >> 4`` (b << 4 is int8 to TVM already, so the cast is dropped
    and C shifts the promoted int: b itself, not its nibble), ``T.cast(T.cast(b, T.uint8)
    << 4, T.int8) >> 4`` (sign-extended) and, through a ``T.if_then_else`` on i % 3, that or
    the high nibble ``b >> 4`` (arithmetic), as a float."""

    @T.prim_func
    def main(B: T.Tensor((n,), T.int8), O: T.Tensor((n, 3), T.int32)):
        with T.Kernel(1, threads=n) as bx:
            for i in T.Parallel(n):
                b = B[i]
                O[i, 0] = T.cast(T.cast(b << 4, T.int8) >> 4, T.int32)
                O[i, 1] = T.cast(T.cast(T.cast(b, T.uint8) << 4, T.int8) >> 4, T.int32)
                O[i, 2] = T.cast(T.if_then_else(i % 3 == 0, T.cast(T.cast(b, T.uint8) << 4, T.int8) >> 4, b >> 4), T.float32)

    return main


# ---- accumulators loaded, re-used and reduced ------------------------------------------------------
@tilecute.jit
def gemm_accumulate_into_c(M=200, N=128, K=128, block_M=64, block_N=64, block_K=32):
    """C += A @ B with the accumulator **loaded from C** by ``T.copy(C[...], C_local)`` (no
    clear), float32 C updated in place; M has a tail (rows past M read as zeros, not
    written)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), T.float16)
            B_shared = T.alloc_shared((block_K, block_N), T.float16)
            C_local = T.alloc_fragment((block_M, block_N), T.float32)
            T.copy(C[by * block_M, bx * block_N], C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


@tilecute.jit(out_idx=[-2, -1])
def gemm_rowwise_fp8_quant_fullcol(M=200, N=256, K=128, block_M=64, block_N=256, block_K=64):
    """GEMM fused with per-token-per-tile fp8 quantisation of its output over 256 threads with
    ``FullCol`` (the two warpgroups split N, so a row's amax meets across them): amax[i] =
    ``T.reduce_absmax`` of the accumulator's row, scale = max(amax, 1e-4) / 448, Q = e4m3(acc
    / scale), S[m, tile] = scale."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.bfloat16), B: T.Tensor((N, K), T.bfloat16),
             Q: T.Tensor((M, N), T.float8_e4m3), S: T.Tensor((M, N // block_N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), T.bfloat16)
            B_shared = T.alloc_shared((block_N, block_K), T.bfloat16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            q = T.alloc_fragment((block_M, block_N), T.float8_e4m3)
            amax = T.alloc_fragment((block_M,), T.float32)
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[bx * block_N, ko * block_K], B_shared)
                T.gemm(A_shared, B_shared, acc, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
            T.reduce_absmax(acc, amax, dim=1)
            for i in T.Parallel(block_M):
                amax[i] = T.max(amax[i], 1e-4) / 448.0
            for i, j in T.Parallel(block_M, block_N):
                q[i, j] = acc[i, j] / amax[i]
            T.copy(q, Q[by * block_M, bx * block_N])
            for i in T.Parallel(block_M):
                S[by * block_M + i, bx] = amax[i]

    return main


@tilecute.jit(out_idx=[-1])
def gemm_two_n_tiles_per_block(M=128, N=512, K=192, tiles=2, block_M=64, block_N=128, block_K=64):
    """Each block computes ``tiles`` neighbouring N tiles one after another in a
    ``T.serial`` loop, re-using one accumulator (``T.clear`` at each tile's start) and the
    shared stages; bfloat16 out."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.bfloat16), B: T.Tensor((K, N), T.bfloat16), C: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(T.ceildiv(N, block_N * tiles), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), T.bfloat16)
            B_shared = T.alloc_shared((block_K, block_N), T.bfloat16)
            C_local = T.alloc_fragment((block_M, block_N), T.float32)
            for t in T.serial(tiles):
                n0 = (bx * tiles + t) * block_N
                T.clear(C_local)
                for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                    T.copy(A[by * block_M, ko * block_K], A_shared)
                    T.copy(B[ko * block_K, n0], B_shared)
                    T.gemm(A_shared, B_shared, C_local)
                T.copy(C_local, C[by * block_M, n0])

    return main


@tilecute.jit(out_idx=[-2, -1])
def gemm_weight_grad_with_bias_grad(M=300, N=128, K=96, block_N=64, block_K=32, block_M=64):
    """Linear backward for the weight: dW = dY^T @ X (dY (M, N), X (M, K): ``transpose_A``
    over the token dim M, which has a tail) and db = the column sums of dY, from the dY
    tiles already in shared (``T.reduce_sum(dim=0)`` of a fragment copy), written by the
    blocks of the first K tile."""

    @T.prim_func
    def main(dY: T.Tensor((M, N), T.float16), X: T.Tensor((M, K), T.float16),
             dW: T.Tensor((N, K), T.float32), db: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(K, block_K), T.ceildiv(N, block_N), threads=128) as (bx, by):
            dY_shared = T.alloc_shared((block_M, block_N), T.float16)
            X_shared = T.alloc_shared((block_M, block_K), T.float16)
            dY_frag = T.alloc_fragment((block_M, block_N), T.float32)
            col = T.alloc_fragment((block_N,), T.float32)
            colsum = T.alloc_fragment((block_N,), T.float32)
            acc = T.alloc_fragment((block_N, block_K), T.float32)
            T.clear(acc)
            T.clear(colsum)
            for mo in T.Pipelined(T.ceildiv(M, block_M), num_stages=2):
                T.copy(dY[mo * block_M, by * block_N], dY_shared)
                T.copy(X[mo * block_M, bx * block_K], X_shared)
                T.gemm(dY_shared, X_shared, acc, transpose_A=True)
                T.copy(dY_shared, dY_frag)
                T.reduce_sum(dY_frag, col, dim=0)
                for j in T.Parallel(block_N):
                    colsum[j] += col[j]
            T.copy(acc, dW[by * block_N, bx * block_K])
            if bx == 0:
                T.copy(colsum, db[by * block_N])

    return main
