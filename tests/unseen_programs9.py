"""A ninth set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang), aimed at what the earlier rounds cover thinly: split-K by tile atomics in
bf16, dequantizing GEMMs whose weights are unpacked with shifts, masks and
``T.reinterpret``, fp8 GEMMs at every transpose, GEMVs over 2-D thread blocks and
reductions across a block's threads, per-thread argmax / CSR / segment loops with
``T.alloc_var`` and stepped ``T.serial``, float histograms in shared memory, norms
(residual RMSNorm, group norm, saved-statistics layernorm), softmax along dim 0,
log-softmax in bf16, scans (``T.cumsum`` reversed, two-kernel carries), an in-shared
bitonic sort, 1-D im2col convolution, depthwise convolution and pooling with padding by
``T.if_then_else``, block-sparse attention over an index list with a data-dependent
``T.Pipelined`` range, rotary embedding by position ids, MoE counting and offsets,
``T.Pipelined`` with ``order`` / ``stage`` / ``group`` around an epilogue nest,
``T.serial(start, stop, step)``, ``T.unroll``, ``T.vectorized``, math on dtype mixes,
int64 shapes and indices, ``T.dynamic`` ragged tails, ``T.reshape`` / ``T.view`` of
global and shared buffers, ``T.fill`` and ``T.copy`` on slices, fragments of different
shapes, and raw cp.async double buffering with ``T.ptx_commit_group`` /
``T.ptx_wait_group``.  ``tests/test_unseen_programs9.py`` builds each to a cubin on the
CPU and, on a GPU, compares it with torch written to TileLang's meaning.

Each factory returns a ``@T.prim_func``."""

import tilecute.language as T
import tilecute.layout as L

LOG2E = 1.44269504


# ---- GEMMs ------------------------------------------------------------------------------
def splitk_atomic_bf16(M=256, N=256, K=1024, bm=128, bn=128, bk=64, splits=4, stages=3):
    """C += A[:, k-slice] @ B[k-slice, :] for each of ``splits`` K slices (grid z), bf16
    inputs, float32 C accumulated with a tile ``T.atomic_add`` of the accumulator."""
    per = K // splits

    @T.prim_func
    def splitk(A: T.Tensor((M, K), T.bfloat16), B: T.Tensor((K, N), T.bfloat16),
               C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), splits, threads=128) as (bx, by, bz):
            A_s = T.alloc_shared((bm, bk), T.bfloat16)
            B_s = T.alloc_shared((bk, bn), T.bfloat16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for ko in T.Pipelined(per // bk, num_stages=stages):
                T.copy(A[by * bm, bz * per + ko * bk], A_s)
                T.copy(B[bz * per + ko * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc)
            T.atomic_add(C[by * bm:(by + 1) * bm, bx * bn:(bx + 1) * bn], acc)
    return splitk


def dequant_int8_groupscale(M=128, N=256, K=512, bm=64, bn=128, bk=64, group=128):
    """C = A @ dequant(W)^T with W int8 (N, K) and one fp16 scale per (row of W, group of
    ``group`` columns): the int8 tile is copied to shared, dequantized by a T.Parallel
    nest into an fp16 tile, multiplied with ``transpose_B``."""

    @T.prim_func
    def dq8(A: T.Tensor((M, K), T.float16), W: T.Tensor((N, K), T.int8),
            S: T.Tensor((N, K // group), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.float16)
            Wq_s = T.alloc_shared((bn, bk), T.int8)
            W_s = T.alloc_shared((bn, bk), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for ko in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm, ko * bk], A_s)
                T.copy(W[bx * bn, ko * bk], Wq_s)
                for i, j in T.Parallel(bn, bk):
                    W_s[i, j] = T.Cast(T.float16, Wq_s[i, j]) * S[bx * bn + i, (ko * bk + j) // group]
                T.gemm(A_s, W_s, acc, transpose_B=True)
            T.copy(acc, C[by * bm, bx * bn])
    return dq8


def _signed_nibble(byte, pos):
    """The signed 4-bit value in nibble ``pos`` (0 low, 1 high) of a uint8: moved to the
    high nibble, the byte read as int8, and shifted back arithmetically."""
    up = (byte << (4 - pos * 4)) & T.uint8(0xF0)
    return T.reinterpret(T.Cast(T.uint8, up), T.int8) >> 2 >> 2


def dequant_int4_packed(M=128, N=128, K=256, bm=64, bn=64, bk=64, group=32):
    """W (K, N) of signed int4 packed two per uint8 along K (row k's values in byte k // 2,
    low nibble first), per-group float scales (K // group, N): dequantized through a
    fragment in a T.Parallel nest (``_signed_nibble``: shifts, a mask and
    ``T.reinterpret``), copied to shared, multiplied (no transpose)."""

    @T.prim_func
    def dq4(A: T.Tensor((M, K), T.bfloat16), W: T.Tensor((K // 2, N), T.uint8),
            S: T.Tensor((K // group, N), T.float32), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.bfloat16)
            Wp_s = T.alloc_shared((bk // 2, bn), T.uint8)
            W_f = T.alloc_fragment((bk, bn), T.bfloat16)
            W_s = T.alloc_shared((bk, bn), T.bfloat16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for ko in T.serial(K // bk):
                T.copy(A[by * bm, ko * bk], A_s)
                T.copy(W[ko * bk // 2, bx * bn], Wp_s)
                for k, n in T.Parallel(bk, bn):
                    W_f[k, n] = T.Cast(T.bfloat16, T.Cast(T.float32, _signed_nibble(Wp_s[k // 2, n], k % 2))
                                       * S[(ko * bk + k) // group, bx * bn + n])
                T.copy(W_f, W_s)
                T.gemm(A_s, W_s, acc)
            T.copy(acc, C[by * bm, bx * bn])
    return dq4


def gemm_fp8_forms(ta=False, tb=True, M=128, N=128, K=256, bm=64, bn=64, bk=64):
    """fp8 e4m3 C = op(A) @ op(B) in float32, at any transpose pair (A stored (K, M) when
    ``ta``, B stored (N, K) when ``tb``)."""
    a_shape, b_shape = ((K, M) if ta else (M, K)), ((N, K) if tb else (K, N))
    a_tile, b_tile = ((bk, bm) if ta else (bm, bk)), ((bn, bk) if tb else (bk, bn))

    @T.prim_func
    def fp8(A: T.Tensor(a_shape, T.float8_e4m3), B: T.Tensor(b_shape, T.float8_e4m3),
            C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            A_s = T.alloc_shared(a_tile, T.float8_e4m3)
            B_s = T.alloc_shared(b_tile, T.float8_e4m3)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for ko in T.Pipelined(K // bk, num_stages=2):
                if ta:
                    T.copy(A[ko * bk, by * bm], A_s)
                else:
                    T.copy(A[by * bm, ko * bk], A_s)
                if tb:
                    T.copy(B[bx * bn, ko * bk], B_s)
                else:
                    T.copy(B[ko * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc, transpose_A=ta, transpose_B=tb)
            T.copy(acc, C[by * bm, bx * bn])
    return fp8


def gemm_grouped_schedule(M=128, N=128, K=512, bm=64, bn=64, bk=64, stages=2):
    """A pipelined GEMM whose body also rescales the A tile in place (a T.Parallel nest
    between the loads and the GEMM), scheduled with ``order`` / ``stage`` / ``group``:
    the two loads one group in stage 0, the rescale and the GEMM in the last stage."""

    @T.prim_func
    def grouped(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
                colscale: T.Tensor((K,), T.float16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for ko in T.Pipelined(K // bk, num_stages=stages, order=[0, 1, 2],
                                  stage=[0, stages - 1, stages - 1], group=[[0, 1], [2], [3]]):
                T.copy(A[by * bm, ko * bk], A_s)
                T.copy(B[ko * bk, bx * bn], B_s)
                for i, k in T.Parallel(bm, bk):
                    A_s[i, k] = A_s[i, k] * colscale[ko * bk + k]
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * bm, bx * bn])
    return grouped


def gemm_fp8_epilogue(M=256, N=256, K=128, bm=128, bn=128, bk=64):
    """bf16 GEMM whose epilogue scales rows, adds a column bias, clamps to e4m3's range and
    stores float8_e4m3 through a shared tile."""

    @T.prim_func
    def epi(A: T.Tensor((M, K), T.bfloat16), B: T.Tensor((N, K), T.bfloat16),
            rs: T.Tensor((M,), T.float32), bias: T.Tensor((N,), T.float32),
            C: T.Tensor((M, N), T.float8_e4m3)):
        with T.Kernel(N // bn, M // bm, threads=256) as (bx, by):
            A_s = T.alloc_shared((bm, bk), T.bfloat16)
            B_s = T.alloc_shared((bn, bk), T.bfloat16)
            C_s = T.alloc_shared((bm, bn), T.float8_e4m3)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for ko in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm, ko * bk], A_s)
                T.copy(B[bx * bn, ko * bk], B_s)
                T.gemm(A_s, B_s, acc, transpose_B=True)
            for i, j in T.Parallel(bm, bn):
                C_s[i, j] = T.Cast(T.float8_e4m3,
                                   T.clamp(acc[i, j] * rs[by * bm + i] + bias[bx * bn + j], -448.0, 448.0))
            T.copy(C_s, C[by * bm, bx * bn])
    return epi


def batched_gemm_swizzled(batch=3, M=256, N=320, K=128, bm=64, bn=64, bk=32, panel=2,
                          order="column"):
    """A batched GEMM over a 3-D grid (batch on z) with ``T.use_swizzle`` on x/y."""

    @T.prim_func
    def bgemm(A: T.Tensor((batch, M, K), T.float16), B: T.Tensor((batch, K, N), T.float16),
              C: T.Tensor((batch, M, N), T.float16)):
        with T.Kernel(N // bn, M // bm, batch, threads=128) as (bx, by, bz):
            T.use_swizzle(panel, order=order)
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for ko in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[bz, by * bm:(by + 1) * bm, ko * bk:(ko + 1) * bk], A_s)
                T.copy(B[bz, ko * bk:(ko + 1) * bk, bx * bn:(bx + 1) * bn], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[bz, by * bm:(by + 1) * bm, bx * bn:(bx + 1) * bn])
    return bgemm


# ---- GEMV and reductions ----------------------------------------------------------------
def gemv_2d_threads(N=1024, K=1024, rows=4, vec=8):
    """y = W @ x with a (32, rows) thread block: ``ty`` picks the row, the 32 lanes of
    ``tx`` stride along K in ``vec``-wide vectorized pieces into a local, then
    ``T.warp_reduce_sum``; lane 0 stores."""

    @T.prim_func
    def gemv(W: T.Tensor((N, K), T.float16), x: T.Tensor((K,), T.float16),
             y: T.Tensor((N,), T.float32)):
        with T.Kernel(N // rows, threads=(32, rows)) as bx:
            tx = T.get_thread_binding(0)
            ty = T.get_thread_binding(1)
            part = T.alloc_local((1,), T.float32)
            part[0] = 0.0
            for ko in T.serial(K // (32 * vec)):
                for v in T.vectorized(vec):
                    k = (ko * 32 + tx) * vec + v
                    part[0] += T.Cast(T.float32, W[bx * rows + ty, k]) * T.Cast(T.float32, x[k])
            total = T.warp_reduce_sum(part[0])
            if tx == 0:
                y[bx * rows + ty] = total
    return gemv


def gemv_block_reduce(N=512, K=2048, threads=128):
    """One row of W per block: each thread sums K // threads products into its slot of a
    (threads,) fragment, and ``T.reduce_sum(..., dim=0)`` adds the slots across the
    block's threads into a (1,) fragment."""

    @T.prim_func
    def gemv(W: T.Tensor((N, K), T.bfloat16), x: T.Tensor((K,), T.bfloat16),
             y: T.Tensor((N,), T.bfloat16)):
        with T.Kernel(N, threads=threads) as bx:
            part = T.alloc_fragment((threads,), T.float32)
            tot = T.alloc_fragment((1,), T.float32)
            for t in T.Parallel(threads):
                part[t] = 0.0
                for k in T.serial(K // threads):
                    part[t] += T.Cast(T.float32, W[bx, k * threads + t]) * T.Cast(T.float32, x[k * threads + t])
            T.reduce_sum(part, tot, dim=0)
            y[bx] = T.Cast(T.bfloat16, tot[0])
    return gemv


def argminmax_rows(M=300, N=257, threads=64):
    """Per row (one thread each): the index of the first maximum and of the first minimum,
    with ``T.alloc_var`` running values and a ``T.serial`` scan."""

    @T.prim_func
    def amm(X: T.Tensor((M, N), T.float32), Imax: T.Tensor((M,), T.int32),
            Imin: T.Tensor((M,), T.int64)):
        with T.Kernel(T.ceildiv(M, threads), threads=threads) as bx:
            tx = T.get_thread_binding()
            r = bx * threads + tx
            best = T.alloc_var(T.float32)
            worst = T.alloc_var(T.float32)
            bi = T.alloc_var(T.int32)
            wi = T.alloc_var(T.int32)
            if r < M:
                best = X[r, 0]
                worst = X[r, 0]
                bi = 0
                wi = 0
                for j in T.serial(1, N):
                    v = X[r, j]
                    if v > best:
                        best = v
                        bi = j
                    if v < worst:
                        worst = v
                        wi = j
                Imax[r] = bi
                Imin[r] = T.Cast(T.int64, wi)
    return amm


def weighted_histogram(n=8192, bins=96, threads=256, per_block=2048):
    """A float histogram: each block adds its elements' weights into shared bins with
    ``T.atomic_add`` on shared elements (bin = clamp(floor(v * bins), 0, bins - 1)), then
    adds its bins to the global histogram with a tile ``T.atomic_add``."""

    @T.prim_func
    def hist(V: T.Tensor((n,), T.float32), Wt: T.Tensor((n,), T.float32),
             H: T.Tensor((bins,), T.float32)):
        with T.Kernel(n // per_block, threads=threads) as bx:
            h_s = T.alloc_shared((bins,), T.float32)
            T.clear(h_s)
            for i in T.Parallel(per_block):
                b = T.clamp(T.Cast(T.int32, T.floor(V[bx * per_block + i] * bins)), 0, bins - 1)
                T.atomic_add(h_s[b], Wt[bx * per_block + i])
            T.atomic_add(H[0:bins], h_s)
    return hist


def softmax_dim0(M=128, N=256, bn=32):
    """Softmax down each column (dim 0) of an (M, N) fp16 matrix: a block holds all M rows
    of ``bn`` columns; ``T.reduce_max`` / ``T.reduce_sum`` with ``dim=0``."""

    @T.prim_func
    def sm0(X: T.Tensor((M, N), T.float16), Y: T.Tensor((M, N), T.float16)):
        with T.Kernel(N // bn, threads=128) as bx:
            x = T.alloc_fragment((M, bn), T.float32)
            mx = T.alloc_fragment((bn,), T.float32)
            sm = T.alloc_fragment((bn,), T.float32)
            T.copy(X[0:M, bx * bn:(bx + 1) * bn], x)
            T.reduce_max(x, mx, dim=0)
            for i, j in T.Parallel(M, bn):
                x[i, j] = T.exp2((x[i, j] - mx[j]) * LOG2E)
            T.reduce_sum(x, sm, dim=0)
            for i, j in T.Parallel(M, bn):
                Y[i, bx * bn + j] = T.Cast(T.float16, x[i, j] / sm[j])
    return sm0


def log_softmax_bf16(M=64, N=1024, bm=4):
    """log_softmax over rows in bf16: max, sum of exp, ``T.log``."""

    @T.prim_func
    def lsm(X: T.Tensor((M, N), T.bfloat16), Y: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(M // bm, threads=128) as bx:
            x = T.alloc_fragment((bm, N), T.float32)
            e = T.alloc_fragment((bm, N), T.float32)
            mx = T.alloc_fragment((bm,), T.float32)
            se = T.alloc_fragment((bm,), T.float32)
            T.copy(X[bx * bm, 0], x)
            T.reduce_max(x, mx, dim=1)
            for i, j in T.Parallel(bm, N):
                e[i, j] = T.exp(x[i, j] - mx[i])
            T.reduce_sum(e, se, dim=1)
            for i, j in T.Parallel(bm, N):
                Y[bx * bm + i, j] = T.Cast(T.bfloat16, x[i, j] - mx[i] - T.log(se[i]))
    return lsm


def rmsnorm_residual(M=256, N=768, bm=2, eps=1e-6):
    """Fused residual add and RMSNorm in bf16: H = X + R is written back, Y = H *
    rsqrt(mean(H^2) + eps) * w."""

    @T.prim_func
    def rms(X: T.Tensor((M, N), T.bfloat16), R: T.Tensor((M, N), T.bfloat16),
            w: T.Tensor((N,), T.bfloat16), H: T.Tensor((M, N), T.bfloat16),
            Y: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(M // bm, threads=256) as bx:
            h = T.alloc_fragment((bm, N), T.float32)
            sq = T.alloc_fragment((bm, N), T.float32)
            ss = T.alloc_fragment((bm,), T.float32)
            for i, j in T.Parallel(bm, N):
                h[i, j] = T.Cast(T.float32, X[bx * bm + i, j]) + T.Cast(T.float32, R[bx * bm + i, j])
                sq[i, j] = h[i, j] * h[i, j]
            T.reduce_sum(sq, ss, dim=1)
            for i in T.Parallel(bm):
                ss[i] = T.rsqrt(ss[i] / N + eps)
            for i, j in T.Parallel(bm, N):
                H[bx * bm + i, j] = T.Cast(T.bfloat16, h[i, j])
                Y[bx * bm + i, j] = T.Cast(T.bfloat16, h[i, j] * ss[i] * T.Cast(T.float32, w[j]))
    return rms


def layernorm_saved_stats(M=128, N=512, bm=8, eps=1e-5):
    """Layernorm forward that also saves each row's mean and rstd (what a backward reads):
    the variance from the centered values."""

    @T.prim_func
    def ln(X: T.Tensor((M, N), T.float16), g: T.Tensor((N,), T.float32),
           b: T.Tensor((N,), T.float32), Y: T.Tensor((M, N), T.float16),
           Mean: T.Tensor((M,), T.float32), Rstd: T.Tensor((M,), T.float32)):
        with T.Kernel(M // bm, threads=128) as bx:
            x = T.alloc_fragment((bm, N), T.float32)
            d = T.alloc_fragment((bm, N), T.float32)
            mu = T.alloc_fragment((bm,), T.float32)
            var = T.alloc_fragment((bm,), T.float32)
            T.copy(X[bx * bm:(bx + 1) * bm, :], x)
            T.reduce_sum(x, mu, dim=1)
            for i in T.Parallel(bm):
                mu[i] = mu[i] / N
            for i, j in T.Parallel(bm, N):
                d[i, j] = (x[i, j] - mu[i]) * (x[i, j] - mu[i])
            T.reduce_sum(d, var, dim=1)
            for i in T.Parallel(bm):
                var[i] = T.rsqrt(var[i] / N + eps)
                Mean[bx * bm + i] = mu[i]
                Rstd[bx * bm + i] = var[i]
            for i, j in T.Parallel(bm, N):
                Y[bx * bm + i, j] = T.Cast(T.float16, (x[i, j] - mu[i]) * var[i] * g[j] + b[j])
    return ln


def groupnorm_nhwc(Bn=2, HW=256, C=128, G=8, chunk=64, eps=1e-5):
    """Group norm of a (B, HW, C) activation: one block per (batch, group) accumulates sums
    and sums of squares over HW in chunks of ``chunk`` rows (``T.reduce_sum`` with
    ``clear=False`` into (1,)-shaped fragments), then normalizes its chunk again."""
    cg = C // G

    @T.prim_func
    def gn(X: T.Tensor((Bn, HW, C), T.float32), gamma: T.Tensor((C,), T.float32),
           beta: T.Tensor((C,), T.float32), Y: T.Tensor((Bn, HW, C), T.float32)):
        with T.Kernel(G, Bn, threads=128) as (g, bb):
            x = T.alloc_fragment((chunk, cg), T.float32)
            x2 = T.alloc_fragment((chunk, cg), T.float32)
            rows = T.alloc_fragment((chunk,), T.float32)
            rows2 = T.alloc_fragment((chunk,), T.float32)
            s1 = T.alloc_fragment((1,), T.float32)
            s2 = T.alloc_fragment((1,), T.float32)
            T.clear(s1)
            T.clear(s2)
            for c in T.serial(HW // chunk):
                T.copy(X[bb, c * chunk:(c + 1) * chunk, g * cg:(g + 1) * cg], x)
                for i, j in T.Parallel(chunk, cg):
                    x2[i, j] = x[i, j] * x[i, j]
                T.reduce_sum(x, rows, dim=1)
                T.reduce_sum(x2, rows2, dim=1)
                T.reduce_sum(rows, s1, dim=0, clear=False)
                T.reduce_sum(rows2, s2, dim=0, clear=False)
            mean = s1[0] / (HW * cg)
            rstd = T.rsqrt(s2[0] / (HW * cg) - mean * mean + eps)
            for c in T.serial(HW // chunk):
                T.copy(X[bb, c * chunk:(c + 1) * chunk, g * cg:(g + 1) * cg], x)
                for i, j in T.Parallel(chunk, cg):
                    Y[bb, c * chunk + i, g * cg + j] = (x[i, j] - mean) * rstd * gamma[g * cg + j] + beta[g * cg + j]
    return gn


def column_variance(M=1000, N=128, bm=64, bn=64):
    """Mean and (population) variance of each column over a ragged number of rows: chunks
    of ``bm`` rows, zero-padded by ``T.if_then_else``, accumulated with dim-0
    reductions that do not clear; the second pass sums squared deviations."""

    @T.prim_func
    def cvar(X: T.Tensor((M, N), T.float32), Mu: T.Tensor((N,), T.float32),
             Var: T.Tensor((N,), T.float32)):
        with T.Kernel(N // bn, threads=128) as bx:
            x = T.alloc_fragment((bm, bn), T.float32)
            s = T.alloc_fragment((bn,), T.float32)
            q = T.alloc_fragment((bn,), T.float32)
            T.clear(s)
            T.clear(q)
            for c in T.serial(T.ceildiv(M, bm)):
                for i, j in T.Parallel(bm, bn):
                    x[i, j] = T.if_then_else(c * bm + i < M, X[c * bm + i, bx * bn + j], 0.0)
                T.reduce_sum(x, s, dim=0, clear=False)
            for j in T.Parallel(bn):
                s[j] = s[j] / M
            for c in T.serial(T.ceildiv(M, bm)):
                for i, j in T.Parallel(bm, bn):
                    x[i, j] = T.if_then_else(c * bm + i < M, (X[c * bm + i, bx * bn + j] - s[j]) * (X[c * bm + i, bx * bn + j] - s[j]), 0.0)
                T.reduce_sum(x, q, dim=0, clear=False)
            for j in T.Parallel(bn):
                Mu[bx * bn + j] = s[j]
                Var[bx * bn + j] = q[j] / M
    return cvar


# ---- scans and sorting ----------------------------------------------------------------
def reverse_cumsums(M=64, N=128, bm=32):
    """Suffix sums along rows of a shared tile (``T.cumsum(s, dim=1, reverse=True)``) and
    prefix sums down columns of a fragment (``T.cumsum(f, dim=0)``)."""

    @T.prim_func
    def rc(X: T.Tensor((M, N), T.float32), Rows: T.Tensor((M, N), T.float32),
           Cols: T.Tensor((M, N), T.float32)):
        with T.Kernel(M // bm, threads=128) as bx:
            s = T.alloc_shared((bm, N), T.float32)
            f = T.alloc_fragment((bm, N), T.float32)
            T.copy(X[bx * bm, 0], s)
            T.copy(s, f)
            T.cumsum(s, dim=1, reverse=True)
            T.cumsum(f, dim=0)
            T.copy(s, Rows[bx * bm, 0])
            T.copy(f, Cols[bx * bm, 0])
    return rc


def scan_with_carries(n=4096, block=512):
    """An inclusive scan of n int32s in two kernels: each block scans its piece in shared
    memory (``T.cumsum`` of a 1-D buffer) and writes its total; the second kernel (one
    block) scans the totals exclusively with a serial loop and adds each block's carry."""
    nb = n // block

    @T.prim_func
    def scan(X: T.Tensor((n,), T.int32), Y: T.Tensor((n,), T.int32),
             Tot: T.Tensor((nb,), T.int32)):
        with T.Kernel(nb, threads=128) as bx:
            s = T.alloc_shared((block,), T.int32)
            T.copy(X[bx * block:(bx + 1) * block], s)
            T.cumsum(s, dim=0)
            T.copy(s, Y[bx * block:(bx + 1) * block])
            Tot[bx] = s[block - 1]
        with T.Kernel(1, threads=256) as _:
            carry = T.alloc_shared((nb,), T.int32)
            acc = T.alloc_var(T.int32)
            tx = T.get_thread_binding()
            if tx == 0:
                acc = 0
                for b in T.serial(nb):
                    carry[b] = acc
                    acc = acc + Tot[b]
            for b, i in T.Parallel(nb, block):
                Y[b * block + i] = Y[b * block + i] + carry[b]
    return scan


def bitonic_sort_rows(R=8, n=256, threads=128):
    """Each row of n floats sorted ascending in shared memory by a bitonic network: for
    each (size, stride) stage a T.Parallel nest over n / 2 compare-exchange pairs (the
    stage loops are T.serial with a doubling / halving variable)."""
    log_n = n.bit_length() - 1

    @T.prim_func
    def bsort(X: T.Tensor((R, n), T.float32), Y: T.Tensor((R, n), T.float32)):
        with T.Kernel(R, threads=threads) as bx:
            s = T.alloc_shared((n,), T.float32)
            T.copy(X[bx, 0:n], s)
            for p in T.serial(log_n):
                for q in T.serial(p + 1):
                    size = 2 << p
                    stride = size >> (q + 1)
                    for t in T.Parallel(n // 2):
                        lo = (t // stride) * stride * 2 + t % stride
                        hi = lo + stride
                        up = (lo & size) == 0
                        a = s[lo]
                        b = s[hi]
                        swap = T.if_then_else(up, a > b, a < b)
                        s[lo] = T.if_then_else(swap, b, a)
                        s[hi] = T.if_then_else(swap, a, b)
            T.copy(s, Y[bx, 0:n])
    return bsort


def csr_spmv(rows=500, cols=300, threads=128):
    """y = A @ x with A in CSR (row_ptr, col_idx, vals): a warp per row, its lanes walking
    the row's nonzeros with ``T.serial(start + lane, end, 32)``, then
    ``T.warp_reduce_sum``."""
    warps = threads // 32

    @T.prim_func
    def spmv(row_ptr: T.Tensor((rows + 1,), T.int32), col_idx: T.Tensor((rows * 8,), T.int32),
             vals: T.Tensor((rows * 8,), T.float32), x: T.Tensor((cols,), T.float32),
             y: T.Tensor((rows,), T.float32)):
        with T.Kernel(T.ceildiv(rows, warps), threads=threads) as bx:
            tx = T.get_thread_binding()
            lane = tx % 32
            r = bx * warps + tx // 32
            acc = T.alloc_var(T.float32)
            acc = 0.0
            if r < rows:
                for k in T.serial(row_ptr[r] + lane, row_ptr[r + 1], 32):
                    acc = acc + vals[k] * x[col_idx[k]]
            total = T.warp_reduce_sum(acc)
            if r < rows and lane == 0:
                y[r] = total
    return spmv


def segment_sums(E=6, T_=700, D=128):
    """MoE-style grouped rows: tokens sorted by expert, ``offsets`` (E + 1) gives each
    expert's rows; block e sums its rows (a run-time ``T.serial`` range over the
    offsets table) into a (D,) fragment."""

    @T.prim_func
    def seg(X: T.Tensor((T_, D), T.float16), offsets: T.Tensor((E + 1,), T.int32),
            Out: T.Tensor((E, D), T.float32)):
        with T.Kernel(E, threads=128) as e:
            acc = T.alloc_fragment((D,), T.float32)
            T.clear(acc)
            for r in T.serial(offsets[e], offsets[e + 1]):
                for d in T.Parallel(D):
                    acc[d] += T.Cast(T.float32, X[r, d])
            T.copy(acc, Out[e, :])
    return seg


def moe_count_offsets(n=2048, E=16, threads=256):
    """Counting the tokens routed to each expert with global atomics (kernel 1), then the
    exclusive offsets (E + 1) by a 1-D ``T.cumsum`` in shared memory (kernel 2)."""

    @T.prim_func
    def count(ids: T.Tensor((n,), T.int32), counts: T.Tensor((E,), T.int32),
              offsets: T.Tensor((E + 1,), T.int32)):
        with T.Kernel(n // threads, threads=threads) as bx:
            for i in T.Parallel(threads):
                T.atomic_add(counts[ids[bx * threads + i]], 1)
        with T.Kernel(1, threads=32) as _:
            c = T.alloc_shared((E,), T.int32)
            T.copy(counts, c)
            T.cumsum(c, dim=0)
            offsets[0] = 0
            for e in T.Parallel(E):
                offsets[e + 1] = c[e]
    return count


# ---- convolution, pooling, attention ------------------------------------------------------
def conv1d_im2col(Bn=2, Lin=200, C=64, F=128, KS=5, dil=2, pad=4, bl=64, threads=128):
    """A 1-D convolution (B, L, C) x (KS, C, F), stride 1, dilation ``dil``, zero padding
    ``pad``: per output row block an im2col tile (bl, KS * C) built in shared memory by a
    T.Parallel nest with ``T.if_then_else`` (rows outside [0, L) read 0), one GEMM; the
    output's ragged last block is stored by T.copy."""
    Lout = Lin + 2 * pad - dil * (KS - 1)

    @T.prim_func
    def conv(X: T.Tensor((Bn, Lin, C), T.float16), Wt: T.Tensor((KS * C, F), T.float16),
             Y: T.Tensor((Bn, Lout, F), T.float32)):
        with T.Kernel(T.ceildiv(Lout, bl), Bn, threads=threads) as (bx, bb):
            col = T.alloc_shared((bl, KS * C), T.float16)
            w_s = T.alloc_shared((KS * C, F), T.float16)
            acc = T.alloc_fragment((bl, F), T.float32)
            T.copy(Wt, w_s)
            for i, kc in T.Parallel(bl, KS * C):
                src = bx * bl + i + (kc // C) * dil - pad
                col[i, kc] = T.if_then_else((src >= 0) & (src < Lin), X[bb, src, kc % C], T.float16(0))
            T.gemm(col, w_s, acc, clear_accum=True)
            T.copy(acc, Y[bb, bx * bl:(bx + 1) * bl, :])
    return conv


def depthwise_conv2d(Bn=2, H=30, W=30, C=64, bh=8, bw=8, KS=3):
    """A 3x3 depthwise convolution (NHWC, stride 1, zero padding 1): a (bh + 2, bw + 2, C)
    halo tile loaded into shared by a T.Parallel nest with ``T.if_then_else`` (the edges
    read 0), then per output element a T.serial double loop over the taps."""
    pad = KS // 2

    @T.prim_func
    def dw(X: T.Tensor((Bn, H, W, C), T.float16), Wt: T.Tensor((KS, KS, C), T.float32),
           Y: T.Tensor((Bn, H, W, C), T.float16)):
        with T.Kernel(T.ceildiv(W, bw), T.ceildiv(H, bh), Bn, threads=256) as (bx, by, bb):
            tile = T.alloc_shared((bh + 2 * pad, bw + 2 * pad, C), T.float16)
            out = T.alloc_fragment((bh, bw, C), T.float32)
            for i, j, c in T.Parallel(bh + 2 * pad, bw + 2 * pad, C):
                h = by * bh + i - pad
                w = bx * bw + j - pad
                tile[i, j, c] = T.if_then_else((h >= 0) & (h < H) & (w >= 0) & (w < W),
                                               X[bb, h, w, c], T.float16(0))
            for i, j, c in T.Parallel(bh, bw, C):
                out[i, j, c] = 0.0
                for ki in T.serial(KS):
                    for kj in T.serial(KS):
                        out[i, j, c] += T.Cast(T.float32, tile[i + ki, j + kj, c]) * Wt[ki, kj, c]
            for i, j, c in T.Parallel(bh, bw, C):
                if (by * bh + i < H) & (bx * bw + j < W):
                    Y[bb, by * bh + i, bx * bw + j, c] = T.Cast(T.float16, out[i, j, c])
    return dw


def maxpool2d(Bn=2, C=32, H=33, W=31, KS=3, stride=2, pad=1):
    """Max pooling (NCHW) with -inf padding: a T.Parallel nest over the output plane, a
    ``T.unroll`` double loop over the window with ``T.max`` and ``T.if_then_else``."""
    Ho = (H + 2 * pad - KS) // stride + 1
    Wo = (W + 2 * pad - KS) // stride + 1

    @T.prim_func
    def pool(X: T.Tensor((Bn, C, H, W), T.float32), Y: T.Tensor((Bn, C, Ho, Wo), T.float32)):
        with T.Kernel(C, Bn, threads=128) as (c, bb):
            acc = T.alloc_fragment((Ho, Wo), T.float32)
            T.fill(acc, -T.infinity(T.float32))
            for i, j in T.Parallel(Ho, Wo):
                for ki in T.unroll(KS):
                    for kj in T.unroll(KS):
                        h = i * stride + ki - pad
                        w = j * stride + kj - pad
                        acc[i, j] = T.max(acc[i, j], T.if_then_else(
                            (h >= 0) & (h < H) & (w >= 0) & (w < W), X[bb, c, h, w],
                            -T.infinity(T.float32)))
            T.copy(acc, Y[bb, c, :, :])
    return pool


def sparse_attn_index_list(batch=1, heads=2, seq=512, dim=64, bm=64, bn=64, max_sel=4,
                           stages=2):
    """Attention over a selected list of key blocks per query block: ``BlockIdx[b, h, qb,
    s]`` (-1 past the list's end, the list sorted) and a causal bound; the loop runs over
    ``T.Pipelined(count[b, h, qb])`` (a run-time range), a selected block past the
    diagonal is skipped by an ``if`` inside, and the diagonal block is masked."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    NQ = seq // bm

    @T.prim_func
    def sattn(Q: T.Tensor((batch, heads, seq, dim), T.float16),
              K: T.Tensor((batch, heads, seq, dim), T.float16),
              V: T.Tensor((batch, heads, seq, dim), T.float16),
              BlockIdx: T.Tensor((batch, heads, NQ, max_sel), T.int32),
              Count: T.Tensor((batch, heads, NQ), T.int32),
              O: T.Tensor((batch, heads, seq, dim), T.float16)):
        with T.Kernel(NQ, heads, batch, threads=128) as (bx, by, bz):
            q_s = T.alloc_shared((bm, dim), T.float16)
            k_s = T.alloc_shared((bn, dim), T.float16)
            v_s = T.alloc_shared((bn, dim), T.float16)
            s = T.alloc_fragment((bm, bn), T.float32)
            p = T.alloc_fragment((bm, bn), T.float16)
            o = T.alloc_fragment((bm, dim), T.float32)
            m = T.alloc_fragment((bm,), T.float32)
            m_old = T.alloc_fragment((bm,), T.float32)
            l = T.alloc_fragment((bm,), T.float32)
            ls = T.alloc_fragment((bm,), T.float32)
            T.copy(Q[bz, by, bx * bm:(bx + 1) * bm, :], q_s)
            T.fill(o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(T.float32))
            for t in T.Pipelined(Count[bz, by, bx], num_stages=stages):
                kb = BlockIdx[bz, by, bx, t]
                if kb * bn <= bx * bm + bm - 1:
                    T.copy(K[bz, by, kb * bn:(kb + 1) * bn, :], k_s)
                    for i, j in T.Parallel(bm, bn):
                        s[i, j] = T.if_then_else(bx * bm + i >= kb * bn + j, 0, -T.infinity(T.float32))
                    T.gemm(q_s, k_s, s, transpose_B=True)
                    T.copy(m, m_old)
                    T.reduce_max(s, m, dim=1, clear=False)
                    for i, j in T.Parallel(bm, bn):
                        s[i, j] = T.exp2(s[i, j] * scale - m[i] * scale)
                    for i in T.Parallel(bm):
                        m_old[i] = T.exp2(m_old[i] * scale - m[i] * scale)
                    T.reduce_sum(s, ls, dim=1)
                    for i in T.Parallel(bm):
                        l[i] = l[i] * m_old[i] + ls[i]
                    for i, j in T.Parallel(bm, dim):
                        o[i, j] *= m_old[i]
                    T.copy(s, p)
                    T.copy(V[bz, by, kb * bn:(kb + 1) * bn, :], v_s)
                    T.gemm(p, v_s, o)
            for i, j in T.Parallel(bm, dim):
                o[i, j] = T.if_then_else(l[i] > 0, o[i, j] / l[i], 0.0)
            T.copy(o, O[bz, by, bx * bm:(bx + 1) * bm, :])
    return sattn


def rotary_position_ids(T_=300, H=4, D=64, bt=16, max_pos=1024):
    """Rotary embedding by position ids (int64, any order) into cos/sin caches of
    ``max_pos`` rows, rotate-half style, bf16 in and out, a ragged token tail."""
    half = D // 2

    @T.prim_func
    def rope(X: T.Tensor((T_, H, D), T.bfloat16), pos: T.Tensor((T_,), T.int64),
             cos: T.Tensor((max_pos, half), T.float32), sin: T.Tensor((max_pos, half), T.float32),
             Y: T.Tensor((T_, H, D), T.bfloat16)):
        with T.Kernel(T.ceildiv(T_, bt), threads=128) as bx:
            for t, h, d in T.Parallel(bt, H, half):
                if bx * bt + t < T_:
                    p = pos[bx * bt + t]
                    x1 = T.Cast(T.float32, X[bx * bt + t, h, d])
                    x2 = T.Cast(T.float32, X[bx * bt + t, h, d + half])
                    Y[bx * bt + t, h, d] = T.Cast(T.bfloat16, x1 * cos[p, d] - x2 * sin[p, d])
                    Y[bx * bt + t, h, d + half] = T.Cast(T.bfloat16, x2 * cos[p, d] + x1 * sin[p, d])
    return rope


# ---- loop, math and buffer forms ---------------------------------------------------------
def stepped_and_reversed(n=64, m=37):
    """Per row: a reverse running maximum with ``T.serial(m - 1, -1, -1)``, every third
    element summed with ``T.serial(1, m, 3)``, and a 4-wide ``T.vectorized`` copy of the
    first 32 elements, ``T.unroll`` for a fixed 4-term polynomial."""

    @T.prim_func
    def loops(X: T.Tensor((n, m), T.float32), Rmax: T.Tensor((n, m), T.float32),
              S3: T.Tensor((n,), T.float32), Cp: T.Tensor((n, 32), T.float32),
              Poly: T.Tensor((n,), T.float32)):
        with T.Kernel(1, threads=64) as _:
            tx = T.get_thread_binding()
            run = T.alloc_var(T.float32)
            acc = T.alloc_var(T.float32)
            run = -T.infinity(T.float32)
            for j in T.serial(m - 1, -1, -1):
                run = T.max(run, X[tx, j])
                Rmax[tx, j] = run
            acc = 0.0
            for j in T.serial(1, m, 3):
                acc = acc + X[tx, j]
            S3[tx] = acc
            for v in T.vectorized(32):
                Cp[tx, v] = X[tx, v]
            acc = 0.0
            for k in T.unroll(4):
                acc = acc * X[tx, 0] + (k + 1)
            Poly[tx] = acc
    return loops


def math_dtype_mixes(n=1024):
    """fp16, bf16, float32 and int32 inputs through ``T.clamp``, ``T.abs``, ``T.rsqrt``,
    ``T.log2``, ``T.floor``, ``T.ceil``, ``T.max`` / ``T.min`` with mixed operands (TileLang
    promotes to the wider type), casts back to the narrow outputs."""

    @T.prim_func
    def mixes(H: T.Tensor((n,), T.float16), Bf: T.Tensor((n,), T.bfloat16),
              F: T.Tensor((n,), T.float32), I: T.Tensor((n,), T.int32),
              O16: T.Tensor((4, n), T.float16), Obf: T.Tensor((2, n), T.bfloat16),
              O32: T.Tensor((3, n), T.float32), Oi: T.Tensor((2, n), T.int32)):
        with T.Kernel(n // 128, threads=128) as bx:
            for i in T.Parallel(128):
                g = bx * 128 + i
                O16[0, g] = T.clamp(H[g], T.float16(-1.5), T.float16(2.0))
                O16[1, g] = T.abs(H[g]) + H[g]
                O16[2, g] = T.floor(H[g] * T.float16(3.0))
                O16[3, g] = T.ceil(H[g] * T.float16(3.0))
                Obf[0, g] = T.rsqrt(T.abs(Bf[g]) + T.bfloat16(1.0))
                Obf[1, g] = T.Cast(T.bfloat16, T.log2(T.abs(T.Cast(T.float32, Bf[g])) + 1.0))
                O32[0, g] = T.max(F[g], T.Cast(T.float32, H[g]))
                O32[1, g] = T.min(F[g], T.Cast(T.float32, I[g]) * 0.25)
                O32[2, g] = T.floor(F[g]) + T.ceil(F[g])
                Oi[0, g] = T.clamp(I[g], -100, 100)
                Oi[1, g] = T.abs(I[g]) // 3 + T.Cast(T.int32, T.floor(F[g]))
    return mixes


def int64_shapes_gather(rows=T.int64(4096), D=T.int64(128), n=T.int64(512)):
    """An embedding gather whose tensors have int64 shapes and whose ids are int64:
    out[i, :] = table[ids[i], :] * 2, with int64 index arithmetic."""

    @T.prim_func
    def gather(table: T.Tensor((rows, D), T.float16), ids: T.Tensor((n,), T.int64),
               out: T.Tensor((n, D), T.float16)):
        with T.Kernel(T.ceildiv(n, 16), threads=128) as bx:
            for i, d in T.Parallel(16, D):
                out[bx * 16 + i, d] = table[ids[bx * 16 + i], d] * T.float16(2.0)
    return gather


def dynamic_ragged_tiles(bm=64, bn=64):
    """``T.dynamic`` M and N: Y = 2 * X + 1 through a shared tile whose T.copy reaches past
    the ragged edges (TileLang's bounds-checked copies), in a (ceildiv, ceildiv) grid."""
    M, N = T.dynamic("M, N")

    @T.prim_func
    def ragged(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            s = T.alloc_shared((bm, bn), T.float32)
            f = T.alloc_fragment((bm, bn), T.float32)
            T.copy(X[by * bm, bx * bn], s)
            T.copy(s, f)
            for i, j in T.Parallel(bm, bn):
                f[i, j] = f[i, j] * 2.0 + 1.0
            T.copy(f, Y[by * bm, bx * bn])
    return ragged


def reshape_view_buffers(B=4, S=64, D=64):
    """``T.reshape`` of a global (B, S, D) tensor to (B * S, D) rows and of a shared (S, D)
    tile to (S * D // 128, 128); ``T.view`` of an fp16 shared tile as uint16 to flip sign
    bits (negation) with an XOR."""

    @T.prim_func
    def rv(X: T.Tensor((B, S, D), T.float16), Y: T.Tensor((B, S, D), T.float16),
           Z: T.Tensor((B, S * D // 128, 128), T.float16)):
        with T.Kernel(B, threads=128) as bx:
            X2 = T.reshape(X, (B * S, D))
            s = T.alloc_shared((S, D), T.float16)
            T.copy(X2[bx * S:(bx + 1) * S, :], s)
            bits = T.view(s, dtype=T.uint16)
            for i, j in T.Parallel(S, D):
                bits[i, j] = bits[i, j] ^ T.uint16(0x8000)
            T.copy(s, Y[bx, :, :])
            s2 = T.reshape(s, (S * D // 128, 128))
            T.copy(s2, Z[bx, :, :])
    return rv


def fill_slices_fragment_shapes(M=64, N=64):
    """``T.fill`` on row and column slices of a shared tile and a fragment, and ``T.copy``
    between fragments of different shapes: a (1, N) slice of a 2-D fragment to a (N,)
    fragment, scaled and stored."""

    @T.prim_func
    def fills(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32),
              Z: T.Tensor((M, N), T.float32), W: T.Tensor((1, N), T.float32)):
        with T.Kernel(1, threads=128) as _:
            s = T.alloc_shared((M, N), T.float32)
            f = T.alloc_fragment((M, N), T.float32)
            row = T.alloc_fragment((N,), T.float32)
            T.copy(X, s)
            T.fill(s[0:4, :], 1.0)
            T.fill(s[:, N - 8:N], -2.0)
            T.copy(s, Y)
            T.copy(X, f)
            T.fill(f[8:16, 0:32], 3.0)
            T.copy(f, Z)
            T.copy(f[5, :], row)
            for j in T.Parallel(N):
                row[j] = row[j] * 10.0
            T.copy(row, W[0, :])
    return fills


def permute_bshd(B=2, S=128, H=4, D=64, bs=32):
    """(B, S, H, D) -> (B, H, S, D) through a shared tile: a T.copy of a region with a unit
    head dim in and out."""

    @T.prim_func
    def perm(X: T.Tensor((B, S, H, D), T.bfloat16), Y: T.Tensor((B, H, S, D), T.bfloat16)):
        with T.Kernel(S // bs, H, B, threads=128) as (bx, h, b):
            s = T.alloc_shared((bs, D), T.bfloat16)
            T.copy(X[b, bx * bs:(bx + 1) * bs, h, :], s)
            T.copy(s, Y[b, h, bx * bs:(bx + 1) * bs, :])
    return perm


def swiglu_bf16(M=256, N=1024, bm=8, bn=256):
    """SwiGLU: out = silu(gate) * up in bf16, silu by ``x / (1 + exp(-x))``, computed in
    float32 from a concatenated (M, 2N) input."""

    @T.prim_func
    def swiglu(X: T.Tensor((M, 2 * N), T.bfloat16), Y: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            for i, j in T.Parallel(bm, bn):
                g = T.Cast(T.float32, X[by * bm + i, bx * bn + j])
                u = T.Cast(T.float32, X[by * bm + i, N + bx * bn + j])
                Y[by * bm + i, bx * bn + j] = T.Cast(T.bfloat16, g / (1.0 + T.exp(-g)) * u)
    return swiglu


def index_add_rows(n=1000, R=64, D=128, bn=8):
    """torch's index_add_ along rows with float atomics: out[idx[i], :] += alpha * src[i, :]
    (duplicate indices collide), a ragged row tail."""

    @T.prim_func
    def iadd(src: T.Tensor((n, D), T.float32), idx: T.Tensor((n,), T.int32),
             out: T.Tensor((R, D), T.float32)):
        with T.Kernel(T.ceildiv(n, bn), threads=128) as bx:
            for i, d in T.Parallel(bn, D):
                if bx * bn + i < n:
                    T.atomic_add(out[idx[bx * bn + i], d], src[bx * bn + i, d] * 0.5)
    return iadd


def raw_cp_async_double_buffer(M=512, D=64, bm=32, threads=128):
    """Row sums of (M, D) fp16 with a two-slot shared ring filled by raw cp.async (16
    bytes a thread a piece), one commit per slab and ``T.ptx_wait_group(1)`` before the
    slab behind the newest is summed (TileLang's explicit async idiom)."""
    steps = M // bm
    per = bm * D // 8 // threads

    @T.prim_func
    def ring(X: T.Tensor((M, D), T.float16), out: T.Tensor((M,), T.float32)):
        with T.Kernel(1, threads=threads) as _:
            s = T.alloc_shared((2, bm, D), T.float16)
            f = T.alloc_fragment((bm, D), T.float32)
            r = T.alloc_fragment((bm,), T.float32)
            tx = T.get_thread_binding()
            for p in T.serial(per):
                q = p * threads + tx
                T.ptx_cp_async(T.access_ptr(s[0, q // (D // 8), q % (D // 8) * 8], "w", 8),
                               T.access_ptr(X[q // (D // 8), q % (D // 8) * 8], "r", 8), 8)
            T.ptx_commit_group()
            for k in T.serial(steps):
                if k + 1 < steps:
                    for p in T.serial(per):
                        q = p * threads + tx
                        T.ptx_cp_async(
                            T.access_ptr(s[(k + 1) % 2, q // (D // 8), q % (D // 8) * 8], "w", 8),
                            T.access_ptr(X[(k + 1) * bm + q // (D // 8), q % (D // 8) * 8], "r", 8), 8)
                T.ptx_commit_group()
                T.ptx_wait_group(1)
                for i, j in T.Parallel(bm, D):
                    f[i, j] = T.Cast(T.float32, s[k % 2, i, j])
                T.reduce_sum(f, r, dim=1)
                T.copy(r, out[k * bm:(k + 1) * bm])
    return ring


def shared_custom_layout(M=64, N=64):
    """``T.annotate_layout`` with a custom ``T.Layout`` index map on a shared tile (a
    transposed placement): the tile is accessed element by element at the mapped index
    (docs/tile-ops.md, "User layouts")."""

    @T.prim_func
    def custom(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, threads=128) as _:
            s = T.alloc_shared((M, N), T.float32)
            T.annotate_layout({s: L.Layout((M, N), lambda i, j: j * M + i)})
            T.copy(X, s)
            T.copy(s, Y)
    return custom
