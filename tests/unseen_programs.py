"""Small TileLang programs written the way TileLang's users write them (not taken from
TileLang): elementwise tiles, row normalizations, scalar locals, ragged shapes, split-K
and transposed GEMMs, pipelining schedules, slices with unit dims, scans, casts and
``out_idx`` host use.  ``tests/test_unseen_programs.py`` builds each to an sm_90a cubin
on the CPU and, on a GPU, compares it with torch.

Each factory returns a ``@T.prim_func`` (or, for the ``jit_*`` ones, a ``@tilecute.jit``
kernel factory); ``REFERENCES`` maps its name to a torch function of the inputs."""

import tilecute
import tilecute.language as T


# ---- elementwise --------------------------------------------------------------------------
def scale_add_2d(M=1000, N=500, block_M=32, block_N=128):
    """A 2-D tile of an fp16 pair into fp32, guarded at the ragged edges."""
    @T.prim_func
    def scale_add(A: T.Tensor((M, N), T.float16), B: T.Tensor((M, N), T.float16),
                  C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            for i, j in T.Parallel(block_M, block_N):
                gi = by * block_M + i
                gj = bx * block_N + j
                if gi < M and gj < N:
                    C[gi, gj] = T.cast(A[gi, gj], T.float32) * 2.0 + B[gi, gj]
    return scale_add


def relu_bf16_tiles(M=512, N=1024, block_M=64, block_N=64):
    """Shared tiles in, a fragment out, bf16 -> fp32 -> bf16 round trips."""
    @T.prim_func
    def relu_bf16(X: T.Tensor((M, N), T.bfloat16), Y: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            x_s = T.alloc_shared((block_M, block_N), T.bfloat16)
            y_f = T.alloc_fragment((block_M, block_N), T.float32)
            T.copy(X[by * block_M, bx * block_N], x_s)
            for i, j in T.Parallel(block_M, block_N):
                y_f[i, j] = T.max(T.cast(x_s[i, j], T.float32), 0.0)
            T.copy(y_f, Y[by * block_M, bx * block_N])
    return relu_bf16


# ---- row reductions -----------------------------------------------------------------------
def softmax_rows(M=256, N=256, block_M=16):
    """Row softmax in one tile: reduce_max, exp2, reduce_sum, divide; fp32 -> fp16 copy."""
    log2e = 1.44269504

    @T.prim_func
    def softmax(X: T.Tensor((M, N), T.float16), Y: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x_s = T.alloc_shared((block_M, N), T.float16)
            x = T.alloc_fragment((block_M, N), T.float32)
            row_max = T.alloc_fragment((block_M,), T.float32)
            row_sum = T.alloc_fragment((block_M,), T.float32)
            T.copy(X[bx * block_M, 0], x_s)
            T.copy(x_s, x)
            T.reduce_max(x, row_max, dim=1, clear=True)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = T.exp2((x[i, j] - row_max[i]) * log2e)
            T.reduce_sum(x, row_sum, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] / row_sum[i]
            T.copy(x, Y[bx * block_M, 0])
    return softmax


def layernorm(M=128, N=512, block_M=8, eps=1e-5):
    """A bf16 row tile copied straight into an fp32 fragment; mean, variance, affine."""
    @T.prim_func
    def layer_norm(X: T.Tensor((M, N), T.bfloat16), W: T.Tensor((N,), T.float32),
                   Bias: T.Tensor((N,), T.float32), Y: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(T.ceildiv(M, block_M), threads=256) as bx:
            x = T.alloc_fragment((block_M, N), T.float32)
            sq = T.alloc_fragment((block_M, N), T.float32)
            mean = T.alloc_fragment((block_M,), T.float32)
            var = T.alloc_fragment((block_M,), T.float32)
            T.copy(X[bx * block_M:(bx + 1) * block_M, :], x)
            T.reduce_sum(x, mean, dim=1)
            for i in T.Parallel(block_M):
                mean[i] = mean[i] / N
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] - mean[i]
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, var, dim=1)
            for i in T.Parallel(block_M):
                var[i] = T.rsqrt(var[i] / N + eps)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] * var[i] * W[j] + Bias[j]
            T.copy(x, Y[bx * block_M:(bx + 1) * block_M, :])
    return layer_norm


def rmsnorm_chunked(M=64, N=2048, block_M=4, block_N=256, eps=1e-6):
    """Rows longer than a tile: a running sum of squares (reduce_sum clear=False) over
    T.serial chunks, then a second pass scaling each chunk in shared memory."""
    @T.prim_func
    def rms_norm(X: T.Tensor((M, N), T.float16), W: T.Tensor((N,), T.float16),
                 Y: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            xs = T.alloc_shared((block_M, block_N), T.float16)
            sq = T.alloc_fragment((block_M, block_N), T.float32)
            ss = T.alloc_fragment((block_M,), T.float32)
            T.clear(ss)
            for k in T.serial(N // block_N):
                T.copy(X[bx * block_M, k * block_N], xs)
                for i, j in T.Parallel(block_M, block_N):
                    sq[i, j] = T.cast(xs[i, j], T.float32) * T.cast(xs[i, j], T.float32)
                T.reduce_sum(sq, ss, dim=1, clear=False)
            for i in T.Parallel(block_M):
                ss[i] = T.rsqrt(ss[i] / N + eps)
            for k in T.serial(N // block_N):
                T.copy(X[bx * block_M, k * block_N], xs)
                for i, j in T.Parallel(block_M, block_N):
                    xs[i, j] = T.cast(T.cast(xs[i, j], T.float32) * ss[i], T.float16) * W[k * block_N + j]
                T.copy(xs, Y[bx * block_M, k * block_N])
    return rms_norm


def online_max_absmax(M=128, N=1024, block_M=32, block_N=128):
    """A running row max over column chunks (reduce_max clear=False after a fill of -inf)
    and each chunk's absolute max written out (reduce_absmax)."""
    chunks = N // block_N

    @T.prim_func
    def online_max(X: T.Tensor((M, N), T.float32), RowMax: T.Tensor((M,), T.float32),
                   ChunkAbsMax: T.Tensor((M, chunks), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x = T.alloc_fragment((block_M, block_N), T.float32)
            m = T.alloc_fragment((block_M,), T.float32)
            a = T.alloc_fragment((block_M,), T.float32)
            T.fill(m, -T.infinity(T.float32))
            for c in T.serial(chunks):
                T.copy(X[bx * block_M, c * block_N], x)
                T.reduce_max(x, m, dim=1, clear=False)
                T.reduce_absmax(x, a, dim=1)
                for i in T.Parallel(block_M):
                    ChunkAbsMax[bx * block_M + i, c] = a[i]
            T.copy(m, RowMax[bx * block_M])
    return online_max


def column_sum(M=256, N=256, block_M=64, block_N=32):
    """A reduction along dim 0 of a shared tile; partial column sums added atomically."""
    @T.prim_func
    def col_sum(X: T.Tensor((M, N), T.float32), S: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            x_s = T.alloc_shared((block_M, block_N), T.float32)
            part = T.alloc_fragment((block_N,), T.float32)
            T.copy(X[by * block_M, bx * block_N], x_s)
            T.reduce_sum(x_s, part, dim=0)
            for j in T.Parallel(block_N):
                T.atomic_add(S[bx * block_N + j], part[j])
    return col_sum


# ---- scalars and loops --------------------------------------------------------------------
def row_dot_scalars(M=1000, K=64, threads=128):
    """One row per thread: T.alloc_var / T.alloc_local scalars, T.serial and T.unroll."""
    @T.prim_func
    def row_dot(A: T.Tensor((M, K), T.float32), B: T.Tensor((M, K), T.float32),
                Out: T.Tensor((M,), T.float32)):
        with T.Kernel(T.ceildiv(M, threads), threads=threads) as bx:
            tx = T.get_thread_binding()
            row = bx * threads + tx
            acc = T.alloc_var(T.float32)
            part = T.alloc_local((4,), T.float32)
            acc = 0.0
            if row < M:
                for k in T.serial(K // 4):
                    for u in T.unroll(4):
                        part[u] = A[row, k * 4 + u] * B[row, k * 4 + u]
                    for u in T.unroll(4):
                        acc += part[u]
                Out[row] = acc
    return row_dot


def first_negative(M=512, N=300, threads=64):
    """alloc_var with an init, a data-dependent `if` in a T.serial loop (index of the
    first negative element per row, -1 if none)."""
    @T.prim_func
    def first_neg(X: T.Tensor((M, N), T.float32), Idx: T.Tensor((M,), T.int32)):
        with T.Kernel(T.ceildiv(M, threads), threads=threads) as bx:
            r = bx * threads + T.get_thread_binding(0)
            found = T.alloc_var(T.int32, init=-1)
            if r < M:
                for j in T.serial(N):
                    if found < 0 and X[r, j] < 0:
                        found = j
                Idx[r] = found
    return first_neg


# ---- ragged (symbolic) shapes --------------------------------------------------------------
def masked_rows_dynamic(block=256):
    """T.dynamic dims: each row keeps its first lens[row] elements (T.if_then_else), the
    rest become zero; columns past N are skipped."""
    M, N = T.dynamic("M, N")

    @T.prim_func
    def masked(X: T.Tensor((M, N), T.float16), lens: T.Tensor((M,), T.int32),
               Y: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block), M, threads=128) as (bx, by):
            for j in T.Parallel(block):
                col = bx * block + j
                if col < N:
                    Y[by, col] = T.if_then_else(col < lens[by], X[by, col] * T.float16(2.0),
                                                T.float16(0))
    return masked


def padded_tile_symbolic(block_M=64, block_N=64):
    """A T.symbolic row count; a shared tile loaded with T.if_then_else (zero padding),
    each row summed."""
    n = T.symbolic("n")
    N = 64

    @T.prim_func
    def padded_sum(X: T.Tensor((n, N), T.float32), S: T.Tensor((n,), T.float32)):
        with T.Kernel(T.ceildiv(n, block_M), threads=128) as bx:
            tile = T.alloc_shared((block_M, block_N), T.float32)
            acc = T.alloc_fragment((block_M,), T.float32)
            for i, j in T.Parallel(block_M, block_N):
                tile[i, j] = T.if_then_else(bx * block_M + i < n, X[bx * block_M + i, j], 0.0)
            T.reduce_sum(tile, acc, dim=1)
            for i in T.Parallel(block_M):
                if bx * block_M + i < n:
                    S[bx * block_M + i] = acc[i]
    return padded_sum


def batched_mean_symbolic(S=256, D=128, block_S=64):
    """A T.symbolic batch of a 3-D tensor: per batch, the mean over the sequence of a
    (block_S, D) tile read as X[b, s0:s0 + block_S, :]."""
    batch = T.symbolic("batch")

    @T.prim_func
    def seq_mean(X: T.Tensor((batch, S, D), T.float16), Out: T.Tensor((batch, D), T.float32)):
        with T.Kernel(batch, threads=128) as b:
            x = T.alloc_fragment((block_S, D), T.float32)
            s = T.alloc_fragment((D,), T.float32)
            acc = T.alloc_fragment((D,), T.float32)
            T.clear(acc)
            for c in T.serial(S // block_S):
                T.copy(X[b, c * block_S:(c + 1) * block_S, :], x)
                T.reduce_sum(x, s, dim=0)
                for d in T.Parallel(D):
                    acc[d] += s[d]
            for d in T.Parallel(D):
                Out[b, d] = acc[d] / S
    return seq_mean


# ---- GEMMs --------------------------------------------------------------------------------
def splitk_gemm(M=256, N=256, K=1024, block_M=128, block_N=128, block_K=32, split_k=4,
                tile_atomic=False):
    """Split-K: a third grid dim takes a K range; partial tiles added with T.atomic_add,
    element by element or (tile_atomic) as one tile."""
    split_len = K // split_k

    @T.prim_func
    def splitk(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
               C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), split_k,
                      threads=128) as (bx, by, bz):
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            B_s = T.alloc_shared((block_K, block_N), T.float16)
            C_l = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_l)
            for ko in T.Pipelined(T.ceildiv(split_len, block_K), num_stages=3):
                T.copy(A[by * block_M, bz * split_len + ko * block_K], A_s)
                T.copy(B[bz * split_len + ko * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_l)
            if tile_atomic:
                T.atomic_add(C[by * block_M, bx * block_N], C_l)
            else:
                for i, j in T.Parallel(block_M, block_N):
                    T.atomic_add(C[by * block_M + i, bx * block_N + j], C_l[i, j])
    return splitk


def gemm_trans_a_fullrow(M=256, N=256, K=256, block_M=64, block_N=128, block_K=64):
    """A stored K x M (transpose_A), GemmWarpPolicy.FullRow, one stage, fp16 out."""
    @T.prim_func
    def gemm_ta(A: T.Tensor((K, M), T.float16), B: T.Tensor((K, N), T.float16),
                C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_K, block_M), T.float16)
            B_s = T.alloc_shared((block_K, block_N), T.float16)
            C_l = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=1):
                T.copy(A[k * block_K, by * block_M], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_l, transpose_A=True, policy=T.GemmWarpPolicy.FullRow)
            T.copy(C_l, C[by * block_M, bx * block_N])
    return gemm_ta


def gemm_nt_swizzle_fullcol(M=512, N=512, K=512, block_M=128, block_N=128, block_K=32,
                            stages=4):
    """B stored N x K (transpose_B), FullCol, 4 stages, T.use_swizzle, 256 threads, the
    result staged through shared memory."""
    @T.prim_func
    def gemm_nt(A: T.Tensor((M, K), T.float16), B: T.Tensor((N, K), T.float16),
                C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            B_s = T.alloc_shared((block_N, block_K), T.float16)
            C_l = T.alloc_fragment((block_M, block_N), T.float32)
            C_s = T.alloc_shared((block_M, block_N), T.float16)
            T.use_swizzle(panel_size=4)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=stages):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[bx * block_N, k * block_K], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
            T.copy(C_l, C_s)
            T.copy(C_s, C[by * block_M, bx * block_N])
    return gemm_nt


def gemm_bf16_order_stage(M=256, N=256, K=512, block_M=128, block_N=128, block_K=64,
                          order=(0, 1, 2), stage=(0, 0, 1)):
    """bf16 GEMM whose pipeline is given by order/stage; bias and ReLU epilogue on the
    fragment."""
    @T.prim_func
    def gemm_bias_relu(A: T.Tensor((M, K), T.bfloat16), B: T.Tensor((K, N), T.bfloat16),
                       bias: T.Tensor((N,), T.float32), C: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.bfloat16)
            B_s = T.alloc_shared((block_K, block_N), T.bfloat16)
            C_l = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), order=list(order), stage=list(stage)):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_l)
            for i, j in T.Parallel(block_M, block_N):
                C_l[i, j] = T.max(C_l[i, j] + bias[bx * block_N + j], 0.0)
            T.copy(C_l, C[by * block_M, bx * block_N])
    return gemm_bias_relu


def dequant_int8_gemm(M=128, N=256, K=256, block_M=64, block_N=64, block_K=64):
    """int8 weights with a per-column fp16 scale, dequantized in shared memory before
    T.gemm; two stages."""
    @T.prim_func
    def dequant_gemm(A: T.Tensor((M, K), T.float16), Bq: T.Tensor((K, N), T.int8),
                     scale: T.Tensor((N,), T.float16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            Bq_s = T.alloc_shared((block_K, block_N), T.int8)
            B_s = T.alloc_shared((block_K, block_N), T.float16)
            C_l = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_l)
            for k in T.Pipelined(K // block_K, num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(Bq[k * block_K, bx * block_N], Bq_s)
                for i, j in T.Parallel(block_K, block_N):
                    B_s[i, j] = T.cast(Bq_s[i, j], T.float16) * scale[bx * block_N + j]
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * block_M, bx * block_N])
    return dequant_gemm


# ---- copies with slices and unit dims; scans ----------------------------------------------
def copy_unit_dims(B=4, S=128, D=64, block_S=32):
    """T.copy of a 3-D tensor's slices: a (1, D) row into a (1, D) shared tile, a 2-D
    slice with a scalar batch index into a 2-D tile, and a 1-D row out of a 2-D tile."""
    @T.prim_func
    def unit_dims(X: T.Tensor((B, S, D), T.float16), First: T.Tensor((B, D), T.float16),
                  Y: T.Tensor((B, S, D), T.float16)):
        with T.Kernel(S // block_S, B, threads=128) as (bs, b):
            row = T.alloc_shared((1, D), T.float16)
            tile = T.alloc_shared((block_S, D), T.float16)
            T.copy(X[b, 0:1, :], row)
            T.copy(X[b, bs * block_S:(bs + 1) * block_S, :], tile)
            for i, d in T.Parallel(block_S, D):
                tile[i, d] = tile[i, d] - row[0, d]
            T.copy(tile, Y[b, bs * block_S:(bs + 1) * block_S, :])
            if bs == 0:
                T.copy(row[0, :], First[b, :])
    return unit_dims


def cumsum_rows(M=64, N=128, block_M=16):
    """Inclusive prefix sums along dim 1 of a shared tile, and a reversed one of a
    fragment."""
    @T.prim_func
    def prefix(X: T.Tensor((M, N), T.float32), Fwd: T.Tensor((M, N), T.float32),
               Rev: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            s = T.alloc_shared((block_M, N), T.float32)
            f = T.alloc_fragment((block_M, N), T.float32)
            T.copy(X[bx * block_M, 0], s)
            T.copy(s, f)
            T.cumsum(s, dim=1)
            T.cumsum(f, dim=1, reverse=True)
            T.copy(s, Fwd[bx * block_M, 0])
            T.copy(f, Rev[bx * block_M, 0])
    return prefix


def fill_and_cast(M=256, N=256, block_M=64, block_N=64):
    """T.fill / T.clear and casts between fp32, bf16 and fp16."""
    @T.prim_func
    def fill_cast(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float16),
                  Z: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            a = T.alloc_fragment((block_M, block_N), T.bfloat16)
            b = T.alloc_fragment((block_M, block_N), T.float16)
            T.fill(a, 1.5)
            T.clear(b)
            for i, j in T.Parallel(block_M, block_N):
                a[i, j] = a[i, j] + T.cast(X[by * block_M + i, bx * block_N + j], T.bfloat16)
                b[i, j] = b[i, j] + T.cast(T.cast(a[i, j], T.float32), T.float16)
            T.copy(b, Y[by * block_M, bx * block_N])
            T.copy(a, Z[by * block_M, bx * block_N])
    return fill_cast


# ---- @jit(out_idx=...) host use -----------------------------------------------------------
@tilecute.jit(out_idx=[-1])
def jit_matmul(M, N, K, block_M=128, block_N=128, block_K=32, dtype=T.float16,
               accum_dtype=T.float32):
    @T.prim_func
    def matmul(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
               C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_K, block_N), dtype)
            C_l = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * block_M, bx * block_N])
    return matmul


@tilecute.jit(out_idx=[1, 2])
def jit_row_stats(M, N, block_M=32):
    """Two outputs: each row's max and sum."""
    @T.prim_func
    def row_stats(X: T.Tensor((M, N), T.float32), Max: T.Tensor((M,), T.float32),
                  Sum: T.Tensor((M,), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x = T.alloc_fragment((block_M, N), T.float32)
            mx = T.alloc_fragment((block_M,), T.float32)
            sm = T.alloc_fragment((block_M,), T.float32)
            T.copy(X[bx * block_M, 0], x)
            T.reduce_max(x, mx, dim=1)
            T.reduce_sum(x, sm, dim=1)
            T.copy(mx, Max[bx * block_M])
            T.copy(sm, Sum[bx * block_M])
    return row_stats


def total_of_row_sums(M=128, N=64):
    """A reduction of a reduction: each row's sum, then the sum of those (row_sums is
    replicated: every thread holds all of it)."""
    @T.prim_func
    def total_sum(X: T.Tensor((M, N), T.float32), Total: T.Tensor((1,), T.float32)):
        with T.Kernel(1, threads=128) as _:
            x = T.alloc_fragment((M, N), T.float32)
            row_sums = T.alloc_fragment((M,), T.float32)
            total = T.alloc_fragment((1,), T.float32)
            T.copy(X, x)
            T.reduce_sum(x, row_sums, dim=1)
            T.reduce_sum(row_sums, total, dim=0)
            T.copy(total, Total)
    return total_sum


def ticket_slots(N=512, threads=128):
    """Each thread takes a ticket (T.atomic_add(..., return_prev=True), the counter's old
    value) and writes its global index into that slot; a float32 running max returns the
    previous maximum."""
    @T.prim_func
    def tickets(counter: T.Tensor((1,), T.int32), slots: T.Tensor((N,), T.int32),
                best: T.Tensor((1,), T.float32), X: T.Tensor((N,), T.float32),
                seen: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, threads), threads=threads) as bx:
            tx = T.get_thread_binding()
            g = bx * threads + tx
            ticket = T.atomic_add(counter[0], 1, return_prev=True)
            slots[ticket] = g
            seen[g] = T.atomic_max(best[0], X[g], return_prev=True)
    return tickets


def skip_and_stop(N=128, K=64):
    """Python's `continue` and `break` in a T.serial loop: per row, the sum of its
    non-negative elements up to (not including) the first one above 100."""
    @T.prim_func
    def skip_stop(A: T.Tensor((N, K), T.int32), B: T.Tensor((N,), T.int32)):
        with T.Kernel(T.ceildiv(N, 64), threads=64) as bx:
            r = bx * 64 + T.get_thread_binding()
            total = T.alloc_var(T.int32)
            total = 0
            for k in T.serial(K):
                if A[r, k] < 0:
                    continue
                if A[r, k] > 100:
                    break
                total += A[r, k]
            B[r] = total
    return skip_stop
