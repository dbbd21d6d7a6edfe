"""A twenty-second set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang): the plain memory-bound or small-compute kernels users write first -- elementwise
with broadcast, row softmax, RMSNorm, LayerNorm, a transpose through shared memory, row and
column reductions, a cumsum, gathers and scatters, GEMV, a batched small GEMM, fp8
quantisation with per-row and per-group scales, bias + activation epilogues, concat / split
copies.  They are the programs of the static comparison with TileLang 0.1.15's code
(/work/notes/helperU_static.md): the memory instructions each gets (vector widths, barriers,
local memory).

The file reads as TileLang after swapping its two import lines (``import tilelang`` /
``import tilelang.language as T``); ``tests/test_unseen_programs22.py`` builds each to a cubin
on the CPU, checks the generated source / PTX, and on a GPU compares with torch."""

import tilecute as tilelang
import tilecute.language as T


# ---- elementwise -------------------------------------------------------------------------
@tilelang.jit(out_idx=[2])
def bias_add_broadcast(M=1024, N=1024, block_M=32, block_N=128, threads=128, dtype="float16"):
    """Y = X + b[None, :], straight from global memory in one T.Parallel."""

    @T.prim_func
    def bias_add(X: T.Tensor((M, N), dtype), B: T.Tensor((N,), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            for i, j in T.Parallel(block_M, block_N):
                Y[by * block_M + i, bx * block_N + j] = X[by * block_M + i, bx * block_N + j] + \
                    B[bx * block_N + j]

    return bias_add


@tilelang.jit(out_idx=[2])
def scale_rows_cols_3d(Bt=4, M=256, N=512, block_M=16, block_N=256, threads=256):
    """Y[b, i, j] = X[b, i, j] * s[b, j] (fp32 out from bf16 in), tiles through
    fragments with T.copy."""

    @T.prim_func
    def scale3(X: T.Tensor((Bt, M, N), "bfloat16"), S: T.Tensor((Bt, N), "float32"),
               Y: T.Tensor((Bt, M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), Bt, threads=threads) as (bx, by, bz):
            x = T.alloc_fragment((block_M, block_N), "bfloat16")
            y = T.alloc_fragment((block_M, block_N), "float32")
            T.copy(X[bz, by * block_M, bx * block_N], x)
            for i, j in T.Parallel(block_M, block_N):
                y[i, j] = T.cast(x[i, j], "float32") * S[bz, bx * block_N + j]
            T.copy(y, Y[bz, by * block_M, bx * block_N])

    return scale3


@tilelang.jit(out_idx=[1])
def swiglu_halves(M=512, H=1024, block_M=16, block_N=256, threads=128):
    """Y = silu(X[:, :H]) * X[:, H:], fp16, through shared tiles."""

    @T.prim_func
    def swiglu(X: T.Tensor((M, 2 * H), "float16"), Y: T.Tensor((M, H), "float16")):
        with T.Kernel(T.ceildiv(H, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            g = T.alloc_shared((block_M, block_N), "float16")
            u = T.alloc_shared((block_M, block_N), "float16")
            o = T.alloc_fragment((block_M, block_N), "float16")
            T.copy(X[by * block_M, bx * block_N], g)
            T.copy(X[by * block_M, H + bx * block_N], u)
            for i, j in T.Parallel(block_M, block_N):
                gf = T.cast(g[i, j], "float32")
                o[i, j] = T.cast(gf / (1.0 + T.exp(-gf)) * T.cast(u[i, j], "float32"), "float16")
            T.copy(o, Y[by * block_M, bx * block_N])

    return swiglu


# ---- row-wise normalisations -------------------------------------------------------------
@tilelang.jit(out_idx=[1])
def row_softmax(M=256, N=1024, block_M=4, threads=128):
    """softmax over rows of fp16, whole rows in a fragment."""
    scale = 1.44269504

    @T.prim_func
    def softmax(X: T.Tensor((M, N), "float16"), Y: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            mx = T.alloc_fragment((block_M,), "float32")
            sm = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            T.reduce_max(x, mx, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = T.exp2((x[i, j] - mx[i]) * scale)
            T.reduce_sum(x, sm, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] / sm[i]
            T.copy(x, Y[bx * block_M, 0])

    return softmax


@tilelang.jit(out_idx=[2])
def rmsnorm_shared(M=512, N=2048, block_M=2, threads=256, eps=1e-6):
    """RMSNorm of bf16 rows: row tile to shared, squares in a fragment, reduce, scale by w."""

    @T.prim_func
    def rms(X: T.Tensor((M, N), "bfloat16"), W: T.Tensor((N,), "bfloat16"),
            Y: T.Tensor((M, N), "bfloat16")):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            xs = T.alloc_shared((block_M, N), "bfloat16")
            sq = T.alloc_fragment((block_M, N), "float32")
            ss = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], xs)
            for i, j in T.Parallel(block_M, N):
                sq[i, j] = T.cast(xs[i, j], "float32") * T.cast(xs[i, j], "float32")
            T.reduce_sum(sq, ss, dim=1)
            for i in T.Parallel(block_M):
                ss[i] = T.rsqrt(ss[i] / N + eps)
            for i, j in T.Parallel(block_M, N):
                sq[i, j] = T.cast(xs[i, j], "float32") * ss[i] * T.cast(W[j], "float32")
            T.copy(sq, Y[bx * block_M, 0])

    return rms


@tilelang.jit(out_idx=[3])
def layernorm_fragment(M=256, N=1024, block_M=1, threads=128, eps=1e-5):
    """LayerNorm of fp16 rows with fp16 weight and bias, everything in fragments."""

    @T.prim_func
    def ln(X: T.Tensor((M, N), "float16"), W: T.Tensor((N,), "float16"), Bv: T.Tensor((N,), "float16"),
           Y: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            d = T.alloc_fragment((block_M, N), "float32")
            mean = T.alloc_fragment((block_M,), "float32")
            var = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            T.reduce_sum(x, mean, dim=1)
            for i in T.Parallel(block_M):
                mean[i] = mean[i] / N
            for i, j in T.Parallel(block_M, N):
                d[i, j] = (x[i, j] - mean[i]) * (x[i, j] - mean[i])
            T.reduce_sum(d, var, dim=1)
            for i in T.Parallel(block_M):
                var[i] = T.rsqrt(var[i] / N + eps)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = (x[i, j] - mean[i]) * var[i] * W[j] + Bv[j]
            T.copy(x, Y[bx * block_M, 0])

    return ln


# ---- transpose, reductions, scan ---------------------------------------------------------
@tilelang.jit(out_idx=[1])
def transpose_shared_tile(M=1024, N=2048, block=64, threads=256):
    """Y = X.T (fp32) through a shared tile: coalesced read, coalesced write."""

    @T.prim_func
    def transpose(X: T.Tensor((M, N), "float32"), Y: T.Tensor((N, M), "float32")):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=threads) as (bx, by):
            s = T.alloc_shared((block, block), "float32")
            T.copy(X[by * block, bx * block], s)
            for i, j in T.Parallel(block, block):
                Y[bx * block + i, by * block + j] = s[j, i]

    return transpose


@tilelang.jit(out_idx=[1])
def row_sum_fp16(M=4096, N=512, block_M=8, threads=128):
    """Y[i] = sum_j X[i, j] (fp16 in, fp32 out)."""

    @T.prim_func
    def rowsum(X: T.Tensor((M, N), "float16"), Y: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, N), "float16")
            xf = T.alloc_fragment((block_M, N), "float32")
            s = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            T.copy(x, xf)
            T.reduce_sum(xf, s, dim=1)
            T.copy(s, Y[bx * block_M])

    return rowsum


@tilelang.jit(out_idx=[1])
def col_max_fp32(M=4096, N=1024, block_M=64, block_N=128, threads=128):
    """Y[j] = max_i X[i, j]: a block per column strip loops over row tiles, T.reduce_max
    over dim 0 and a running max."""

    @T.prim_func
    def colmax(X: T.Tensor((M, N), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), threads=threads) as bx:
            x = T.alloc_fragment((block_M, block_N), "float32")
            part = T.alloc_fragment((block_N,), "float32")
            acc = T.alloc_fragment((block_N,), "float32")
            T.fill(acc, -T.infinity("float32"))
            for k in T.Pipelined(T.ceildiv(M, block_M), num_stages=2):
                T.copy(X[k * block_M, bx * block_N], x)
                T.reduce_max(x, part, dim=0)
                for j in T.Parallel(block_N):
                    acc[j] = T.max(acc[j], part[j])
            T.copy(acc, Y[bx * block_N])

    return colmax


@tilelang.jit(out_idx=[1])
def cumsum_rows_fp32(M=1024, N=256, block_M=8, threads=128):
    """Inclusive cumsum over each row (fp32) with T.cumsum on a shared tile."""

    @T.prim_func
    def cs(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            s = T.alloc_shared((block_M, N), "float32")
            T.copy(X[bx * block_M, 0], s)
            T.cumsum(s, dim=1)
            T.copy(s, Y[bx * block_M, 0])

    return cs


# ---- gathers and scatters ----------------------------------------------------------------
@tilelang.jit(out_idx=[2])
def gather_rows(V=4096, D=512, R=1024, block_R=4, threads=128):
    """Y[r, :] = E[idx[r], :] (bf16 rows, int32 indices)."""

    @T.prim_func
    def gather(E: T.Tensor((V, D), "bfloat16"), Idx: T.Tensor((R,), "int32"),
               Y: T.Tensor((R, D), "bfloat16")):
        with T.Kernel(T.ceildiv(R, block_R), threads=threads) as bx:
            for i, j in T.Parallel(block_R, D):
                Y[bx * block_R + i, j] = E[Idx[bx * block_R + i], j]

    return gather


@tilelang.jit(out_idx=[2])
def scatter_rows_copy(R=1024, D=256, V=2048, block_R=8, threads=128):
    """Y[idx[r], :] = X[r, :] (fp32; rows not named stay whatever the output held -- the
    test passes a permutation), a row tile staged in shared then written out per row."""

    @T.prim_func
    def scatter(X: T.Tensor((R, D), "float32"), Idx: T.Tensor((R,), "int32"),
                Y: T.Tensor((V, D), "float32")):
        with T.Kernel(T.ceildiv(R, block_R), threads=threads) as bx:
            s = T.alloc_shared((block_R, D), "float32")
            T.copy(X[bx * block_R, 0], s)
            for i, j in T.Parallel(block_R, D):
                Y[Idx[bx * block_R + i], j] = s[i, j]

    return scatter


# ---- GEMV and small GEMMs ----------------------------------------------------------------
@tilelang.jit(out_idx=[2])
def gemv_fragment_reduce(N=4096, K=4096, block_N=4, block_K=512, threads=128):
    """y = A x (fp16 A and x, fp32 y): a K loop of fragment tiles, a product tile, a
    T.reduce_sum over K into a running sum."""

    @T.prim_func
    def gemv(A: T.Tensor((N, K), "float16"), X: T.Tensor((K,), "float16"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), threads=threads) as bx:
            a = T.alloc_fragment((block_N, block_K), "float16")
            p = T.alloc_fragment((block_N, block_K), "float32")
            part = T.alloc_fragment((block_N,), "float32")
            acc = T.alloc_fragment((block_N,), "float32")
            T.clear(acc)
            for k in T.serial(T.ceildiv(K, block_K)):
                T.copy(A[bx * block_N, k * block_K], a)
                for i, j in T.Parallel(block_N, block_K):
                    p[i, j] = T.cast(a[i, j], "float32") * T.cast(X[k * block_K + j], "float32")
                T.reduce_sum(p, part, dim=1)
                for i in T.Parallel(block_N):
                    acc[i] += part[i]
            T.copy(acc, Y[bx * block_N])

    return gemv


@tilelang.jit(out_idx=[2])
def gemv_thread_per_row_split(N=2048, K=1024, threads=128, reduce_threads=32, vec=8):
    """GEMV written per thread: reduce_threads lanes per row, each summing vec-wide chunks
    read by T.vectorized loops into local arrays, then a warp shuffle sum (T.shfl_xor)."""
    rows = threads // reduce_threads

    @T.prim_func
    def gemv_t(A: T.Tensor((N, K), "float16"), X: T.Tensor((K,), "float16"), Y: T.Tensor((N,), "float16")):
        with T.Kernel(T.ceildiv(N, rows), threads=threads) as bx:
            tx = T.get_thread_binding(0)
            r = tx // reduce_threads
            lane = tx % reduce_threads
            a = T.alloc_local((vec,), "float16")
            x = T.alloc_local((vec,), "float16")
            acc = T.alloc_local((1,), "float32")
            acc[0] = 0.0
            for ko in T.serial(K // (reduce_threads * vec)):
                for v in T.vectorized(vec):
                    a[v] = A[bx * rows + r, ko * reduce_threads * vec + lane * vec + v]
                for v in T.vectorized(vec):
                    x[v] = X[ko * reduce_threads * vec + lane * vec + v]
                for v in T.serial(vec):
                    acc[0] += T.cast(a[v], "float32") * T.cast(x[v], "float32")
            for off in T.unroll(5):
                acc[0] += T.shfl_xor(acc[0], 16 >> off)
            if lane == 0:
                Y[bx * rows + r] = T.cast(acc[0], "float16")

    return gemv_t


@tilelang.jit(out_idx=[2])
def batched_small_gemm(Bt=64, M=64, N=64, K=64, threads=128):
    """C[b] = A[b] @ B[b] for many 64x64x64 fp16 problems, one block each."""

    @T.prim_func
    def bgemm(A: T.Tensor((Bt, M, K), "float16"), B: T.Tensor((Bt, K, N), "float16"),
              C: T.Tensor((Bt, M, N), "float16")):
        with T.Kernel(Bt, threads=threads) as bz:
            a = T.alloc_shared((M, K), "float16")
            b = T.alloc_shared((K, N), "float16")
            c = T.alloc_fragment((M, N), "float32")
            T.clear(c)
            T.copy(A[bz, 0, 0], a)
            T.copy(B[bz, 0, 0], b)
            T.gemm(a, b, c)
            T.copy(c, C[bz, 0, 0])

    return bgemm


@tilelang.jit(out_idx=[3])
def gemm_bias_gelu_epilogue(M=512, N=512, K=512, block_M=64, block_N=64, block_K=32, threads=128):
    """C = gelu_tanh(A @ B + bias) in fp16, the epilogue in the fragment, out through shared."""

    @T.prim_func
    def gemm_gelu(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
                  Bias: T.Tensor((N,), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            a = T.alloc_shared((block_M, block_K), "float16")
            b = T.alloc_shared((block_K, block_N), "float16")
            c = T.alloc_fragment((block_M, block_N), "float32")
            cs = T.alloc_shared((block_M, block_N), "float16")
            T.clear(c)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, k * block_K], a)
                T.copy(B[k * block_K, bx * block_N], b)
                T.gemm(a, b, c)
            for i, j in T.Parallel(block_M, block_N):
                v = c[i, j] + T.cast(Bias[bx * block_N + j], "float32")
                c[i, j] = 0.5 * v * (1.0 + T.tanh(0.7978845608 * (v + 0.044715 * v * v * v)))
            T.copy(c, cs)
            T.copy(cs, C[by * block_M, bx * block_N])

    return gemm_gelu


# ---- fp8 quantisation --------------------------------------------------------------------
@tilelang.jit(out_idx=[1, 2])
def fp8_quant_per_row(M=1024, N=2048, block_M=1, threads=256):
    """Per-row fp8 e4m3: amax of |x|, scale = amax / 448, q = x / scale."""

    @T.prim_func
    def q_row(X: T.Tensor((M, N), "bfloat16"), Q: T.Tensor((M, N), "float8_e4m3"),
              S: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            ax = T.alloc_fragment((block_M, N), "float32")
            amax = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            for i, j in T.Parallel(block_M, N):
                ax[i, j] = T.abs(x[i, j])
            T.reduce_max(ax, amax, dim=1)
            for i in T.Parallel(block_M):
                amax[i] = T.max(amax[i], 1e-4) / 448.0
            for i, j in T.Parallel(block_M, N):
                Q[bx * block_M + i, j] = T.cast(T.clamp(x[i, j] / amax[i], -448.0, 448.0), "float8_e4m3")
            for i in T.Parallel(block_M):
                S[bx * block_M + i] = amax[i]

    return q_row


@tilelang.jit(out_idx=[1, 2])
def fp8_quant_per_group(M=512, N=4096, G=128, block_M=4, threads=128):
    """Per-(row, 128-group) fp8 e4m3 scales: a block takes block_M rows by one group."""

    @T.prim_func
    def q_grp(X: T.Tensor((M, N), "float16"), Q: T.Tensor((M, N), "float8_e4m3"),
              S: T.Tensor((M, N // G), "float32")):
        with T.Kernel(N // G, T.ceildiv(M, block_M), threads=threads) as (bx, by):
            x = T.alloc_fragment((block_M, G), "float32")
            ax = T.alloc_fragment((block_M, G), "float32")
            q = T.alloc_fragment((block_M, G), "float8_e4m3")
            amax = T.alloc_fragment((block_M,), "float32")
            T.copy(X[by * block_M, bx * G], x)
            for i, j in T.Parallel(block_M, G):
                ax[i, j] = T.abs(x[i, j])
            T.reduce_max(ax, amax, dim=1)
            for i in T.Parallel(block_M):
                amax[i] = T.max(amax[i], 1e-4) / 448.0
            for i, j in T.Parallel(block_M, G):
                q[i, j] = T.cast(x[i, j] / amax[i], "float8_e4m3")
            T.copy(q, Q[by * block_M, bx * G])
            for i in T.Parallel(block_M):
                S[by * block_M + i, bx] = amax[i]

    return q_grp


# ---- concat / split copies ---------------------------------------------------------------
@tilelang.jit(out_idx=[2])
def concat_last_dim(M=1024, N1=256, N2=128, block_M=32, threads=128):
    """Z = cat([X, Y], dim=1) with two T.copy calls per row tile (through shared)."""

    @T.prim_func
    def concat(X: T.Tensor((M, N1), "float16"), Y: T.Tensor((M, N2), "float16"),
               Z: T.Tensor((M, N1 + N2), "float16")):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            xs = T.alloc_shared((block_M, N1), "float16")
            ys = T.alloc_shared((block_M, N2), "float16")
            T.copy(X[bx * block_M, 0], xs)
            T.copy(Y[bx * block_M, 0], ys)
            T.copy(xs, Z[bx * block_M, 0])
            T.copy(ys, Z[bx * block_M, N1])

    return concat


@tilelang.jit(out_idx=[1, 2])
def split_heads_parallel(M=1024, N=384, N1=256, block_M=16, threads=128):
    """A, B = X[:, :N1], X[:, N1:] by T.Parallel global-to-global copies."""
    N2 = N - N1

    @T.prim_func
    def split(X: T.Tensor((M, N), "bfloat16"), A: T.Tensor((M, N1), "bfloat16"),
              B: T.Tensor((M, N2), "bfloat16")):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            for i, j in T.Parallel(block_M, N1):
                A[bx * block_M + i, j] = X[bx * block_M + i, j]
            for i, j in T.Parallel(block_M, N2):
                B[bx * block_M + i, j] = X[bx * block_M + i, N1 + j]

    return split


@tilelang.jit(out_idx=[1])
def cast_fp32_to_bf16_tiles(M=2048, N=2048, block_M=64, block_N=64, threads=128):
    """Y = X.to(bf16): T.copy global -> fragment (fp32), fragment cast copy, fragment -> global."""

    @T.prim_func
    def cast(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "bfloat16")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            x = T.alloc_fragment((block_M, block_N), "float32")
            y = T.alloc_fragment((block_M, block_N), "bfloat16")
            T.copy(X[by * block_M, bx * block_N], x)
            T.copy(x, y)
            T.copy(y, Y[by * block_M, bx * block_N])

    return cast


@tilelang.jit(out_idx=[2])
def residual_add_rmsnorm(M=512, N=1024, threads=128, eps=1e-6):
    """h = x + r (fp16), y = rmsnorm(h) (no weight): one row per block, shared row."""

    @T.prim_func
    def add_rms(X: T.Tensor((M, N), "float16"), R: T.Tensor((M, N), "float16"),
                Y: T.Tensor((M, N), "float16")):
        with T.Kernel(M, threads=threads) as bx:
            h = T.alloc_shared((N,), "float32")
            sq = T.alloc_fragment((N,), "float32")
            ss = T.alloc_fragment((1,), "float32")
            for j in T.Parallel(N):
                h[j] = T.cast(X[bx, j], "float32") + T.cast(R[bx, j], "float32")
            for j in T.Parallel(N):
                sq[j] = h[j] * h[j]
            T.reduce_sum(sq, ss, dim=0)
            for j in T.Parallel(N):
                Y[bx, j] = T.cast(h[j] * T.rsqrt(ss[0] / N + eps), "float16")

    return add_rms


# ---- a few more first programs: dynamic rows, masks, dequant, 1-D -------------------------
@tilelang.jit(out_idx=[2])
def add_dynamic_rows(N=768, block_M=8, threads=128, dtype="float16"):
    """Z = X + Y over (M, N) with M symbolic (a tail block): T.copy through fragments."""
    M = T.symbolic("M")

    @T.prim_func
    def add_dyn(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype), Z: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, N), dtype)
            y = T.alloc_fragment((block_M, N), dtype)
            T.copy(X[bx * block_M, 0], x)
            T.copy(Y[bx * block_M, 0], y)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] + y[i, j]
            T.copy(x, Z[bx * block_M, 0])

    return add_dyn


@tilelang.jit(out_idx=[1])
def causal_mask_fill(S=1024, block_M=32, block_N=128, threads=128):
    """Y[i, j] = X[i, j] if j <= i else -inf (fp32 scores), T.if_then_else in T.Parallel."""

    @T.prim_func
    def mask(X: T.Tensor((S, S), "float32"), Y: T.Tensor((S, S), "float32")):
        with T.Kernel(T.ceildiv(S, block_N), T.ceildiv(S, block_M), threads=threads) as (bx, by):
            for i, j in T.Parallel(block_M, block_N):
                r = by * block_M + i
                c = bx * block_N + j
                Y[r, c] = T.if_then_else(c <= r, X[r, c], -T.infinity("float32"))

    return mask


@tilelang.jit(out_idx=[2])
def int8_dequant_per_channel(M=1024, N=4096, block_M=16, block_N=256, threads=256):
    """W = q.float() * scale[None, :] to bf16 (int8 weights, fp32 per-column scale)."""

    @T.prim_func
    def dequant(Q: T.Tensor((M, N), "int8"), Sc: T.Tensor((N,), "float32"), W: T.Tensor((M, N), "bfloat16")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            for i, j in T.Parallel(block_M, block_N):
                W[by * block_M + i, bx * block_N + j] = T.cast(
                    T.cast(Q[by * block_M + i, bx * block_N + j], "float32") * Sc[bx * block_N + j], "bfloat16")

    return dequant


@tilelang.jit(out_idx=[1])
def gelu_1d(L=1 << 20, block=1024, threads=256):
    """y = gelu(x) (erf form) over a flat bf16 vector, one T.Parallel(block) a block."""

    @T.prim_func
    def gelu(X: T.Tensor((L,), "bfloat16"), Y: T.Tensor((L,), "bfloat16")):
        with T.Kernel(T.ceildiv(L, block), threads=threads) as bx:
            for i in T.Parallel(block):
                v = T.cast(X[bx * block + i], "float32")
                Y[bx * block + i] = T.cast(0.5 * v * (1.0 + T.erf(v * 0.7071067811865476)), "bfloat16")

    return gelu


@tilelang.jit(out_idx=[2])
def rmsnorm_chunked_pipelined(M=256, N=8192, block_N=1024, threads=128, eps=1e-6):
    """RMSNorm of long fp16 rows: a pipelined pass over column chunks summing squares, then a
    second pass scaling by w; one row a block."""

    @T.prim_func
    def rms_chunks(X: T.Tensor((M, N), "float16"), W: T.Tensor((N,), "float16"),
                   Y: T.Tensor((M, N), "float16")):
        with T.Kernel(M, threads=threads) as bx:
            xs = T.alloc_shared((1, block_N), "float16")
            sq = T.alloc_fragment((1, block_N), "float32")
            part = T.alloc_fragment((1,), "float32")
            tot = T.alloc_fragment((1,), "float32")
            o = T.alloc_fragment((1, block_N), "float16")
            T.clear(tot)
            for k in T.Pipelined(N // block_N, num_stages=2):
                T.copy(X[bx, k * block_N], xs)
                for i, j in T.Parallel(1, block_N):
                    sq[i, j] = T.cast(xs[i, j], "float32") * T.cast(xs[i, j], "float32")
                T.reduce_sum(sq, part, dim=1)
                tot[0] += part[0]
            for k in T.Pipelined(N // block_N, num_stages=2):
                T.copy(X[bx, k * block_N], xs)
                for i, j in T.Parallel(1, block_N):
                    o[i, j] = T.cast(T.cast(xs[i, j], "float32") * T.rsqrt(tot[0] / N + eps) *
                                     T.cast(W[k * block_N + j], "float32"), "float16")
                T.copy(o, Y[bx, k * block_N])

    return rms_chunks


@tilelang.jit
def col_sum_atomic(M=4096, N=1024, block_M=128, block_N=128, threads=128):
    """Y[j] = sum_i X[i, j]: each block reduces a tile over dim 0 and T.atomic_add's its
    partial column sums into Y (the caller's, zeroed: no out_idx)."""

    @T.prim_func
    def colsum(X: T.Tensor((M, N), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            x = T.alloc_fragment((block_M, block_N), "float32")
            s = T.alloc_fragment((block_N,), "float32")
            T.copy(X[by * block_M, bx * block_N], x)
            T.reduce_sum(x, s, dim=0)
            for j in T.Parallel(block_N):
                T.atomic_add(Y[bx * block_N + j], s[j])

    return colsum


@tilelang.jit(out_idx=[2])
def bias_add_dynamic_rows(N=1024, block_M=32, block_N=128, threads=128):
    """Y = X + b[None, :] with the row count M symbolic (a tail block): the rows are
    bounds-checked, the bias row is not."""
    M = T.symbolic("M")

    @T.prim_func
    def bias_dyn(X: T.Tensor((M, N), "float16"), B: T.Tensor((N,), "float16"),
                 Y: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            for i, j in T.Parallel(block_M, block_N):
                Y[by * block_M + i, bx * block_N + j] = X[by * block_M + i, bx * block_N + j] + \
                    B[bx * block_N + j]

    return bias_dyn


@tilelang.jit(out_idx=[2])
def row_scale_global(M=2048, N=2048, block_M=16, block_N=256, threads=128):
    """Y[i, j] = X[i, j] * s[i] (bf16, a per-row fp32 scale read from global memory)."""

    @T.prim_func
    def row_scale(X: T.Tensor((M, N), "bfloat16"), S: T.Tensor((M,), "float32"),
                  Y: T.Tensor((M, N), "bfloat16")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            for i, j in T.Parallel(block_M, block_N):
                Y[by * block_M + i, bx * block_N + j] = T.cast(
                    T.cast(X[by * block_M + i, bx * block_N + j], "float32") * S[by * block_M + i], "bfloat16")

    return row_scale


@tilelang.jit(out_idx=[2])
def add_via_shared_tiles(M=1024, N=1024, block_M=32, block_N=32, threads=128):
    """C = A + B (fp32) the way TileLang's first example stages it: both inputs to shared,
    the sum in a fragment, out through a shared tile."""

    @T.prim_func
    def add_tiles(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"),
                  C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            a_s = T.alloc_shared((block_M, block_N), "float32")
            b_s = T.alloc_shared((block_M, block_N), "float32")
            c_f = T.alloc_fragment((block_M, block_N), "float32")
            c_s = T.alloc_shared((block_M, block_N), "float32")
            T.copy(A[by * block_M, bx * block_N], a_s)
            T.copy(B[by * block_M, bx * block_N], b_s)
            for i, j in T.Parallel(block_M, block_N):
                c_f[i, j] = a_s[i, j] + b_s[i, j]
            T.copy(c_f, c_s)
            T.copy(c_s, C[by * block_M, bx * block_N])

    return add_tiles


@tilelang.jit(out_idx=[1])
def row_argmax(M=1024, N=512, block_M=4, threads=128):
    """Y[i] = argmax_j X[i, j] (fp32, first index of the max): reduce_max, then a masked
    reduce_min over the column indices."""

    @T.prim_func
    def argmax(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M,), "int32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            cand = T.alloc_fragment((block_M, N), "int32")
            mx = T.alloc_fragment((block_M,), "float32")
            arg = T.alloc_fragment((block_M,), "int32")
            T.copy(X[bx * block_M, 0], x)
            T.reduce_max(x, mx, dim=1)
            for i, j in T.Parallel(block_M, N):
                cand[i, j] = T.if_then_else(x[i, j] == mx[i], j, N)
            T.reduce_min(cand, arg, dim=1)
            T.copy(arg, Y[bx * block_M])

    return argmax
