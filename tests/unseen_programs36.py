"""A thirty-sixth set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang): a 192x96 GEMM tile on three warpgroups with both operands transposed and an
explicit pipeline schedule, k-means assignment (a GEMM, then a row argmin from the
accumulator) over a T.dynamic number of points with two outputs named by negative
``out_idx``, the RWKV-6 recurrence (a data-dependent diagonal decay, the output a dim=0
reduction of a register tile), Hamming nearest neighbours of binary codes (XOR,
``T.popcount``, ``T.clz``, a bool validity mask), bilinear ``grid_sample`` on a 3-D grid,
survival (reverse cumsum) and column maxima of a register tile copied between dtypes, an
implicit-GEMM 3-D convolution, point-cloud segment boxes by float atomic min/max and
vectorized atomic adds, a hand warp-specialized row softmax (one producer warpgroup, two
consumer warpgroups, ``T.barrier_arrive`` / ``T.barrier_wait`` phases), macros calling
macros over stepped serial loops, a CDF search by ``while`` and ``break``, a shared
tile read through ``T.reshape`` / ``T.view``, a GEMM with B stored (K, N) split along N over
warpgroups, KV quantization to float8_e4m3 / e5m2 through float8 register tiles, a transpose
through a shared tile laid out by a Python function, half-warp shuffles, a sparse MQA over
gathered keys with a bool mask and per-head sinks, and an eager-style fp8 / fp4 group
quantizer with power-of-two scales from the float's bits.

The file reads as TileLang after swapping its two import lines (``import tilelang`` /
``import tilelang.language as T``); ``tests/test_unseen_programs36.py`` builds each to a cubin
on the CPU, checks what decides the result in the generated source, and on a GPU compares it
with torch."""

import tilecute as tilelang
import tilecute.language as T


# ---- GEMM: a 192x96 tile, three consumer warpgroups, A^T B^T ---------------------------------
@tilelang.jit(out_idx=[2])
def gemm_192x96_three_warpgroups(M=576, N=288, K=512, block_M=192, block_N=96, block_K=64,
                                 threads=384):
    """C = A^T @ B^T in bfloat16 from A stored (K, M) and B stored (N, K): each of the three
    warpgroups owns 64 rows of the 192-row tile (FullRow), the loads run two steps ahead of
    the GEMM (``stage=[0, 0, 2]``), the tile leaves through shared memory."""

    @T.prim_func
    def main(A: T.Tensor((K, M), "float16"), B: T.Tensor((N, K), "float16"),
             C: T.Tensor((M, N), "bfloat16")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_K, block_M), "float16")
            B_s = T.alloc_shared((block_N, block_K), "float16")
            C_s = T.alloc_shared((block_M, block_N), "bfloat16")
            acc = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3, order=[0, 1, 2],
                                 stage=[0, 0, 2]):
                T.copy(A[k * block_K, by * block_M], A_s)
                T.copy(B[bx * block_N, k * block_K], B_s)
                T.gemm(A_s, B_s, acc, transpose_A=True, transpose_B=True,
                       policy=T.GemmWarpPolicy.FullRow)
            T.copy(acc, C_s)
            T.copy(C_s, C[by * block_M, bx * block_N])

    return main


# ---- k-means assignment ----------------------------------------------------------------------
@tilelang.jit(out_idx=[-2, -1])
def kmeans_assign(D=64, C=256, block_M=64, threads=128):
    """For each point the nearest centroid: ||c||^2 - 2 x.c from one GEMM into a (64, 256)
    accumulator, the row minimum by ``T.reduce_min``, the lowest index reaching it by an int
    ``T.reduce_min`` over a candidate tile; the distance adds ||x||^2 back (a serial sum per row).  The number of
    points is a T.dynamic size, the last tile ragged."""
    NP = T.dynamic("NP")

    @T.prim_func
    def assign(X: T.Tensor((NP, D), "float16"), Cen: T.Tensor((C, D), "float16"),
               CenSq: T.Tensor((C,), "float32"), Label: T.Tensor((NP,), "int32"),
               Dist: T.Tensor((NP,), "float32")):
        with T.Kernel(T.ceildiv(NP, block_M), threads=threads) as bx:
            X_s = T.alloc_shared((block_M, D), "float16")
            C_s = T.alloc_shared((C, D), "float16")
            acc = T.alloc_fragment((block_M, C), "float32")
            cand = T.alloc_fragment((block_M, C), "int32")
            best = T.alloc_fragment((block_M,), "float32")
            arg = T.alloc_fragment((block_M,), "int32")
            T.copy(X[bx * block_M, 0], X_s)
            T.copy(Cen, C_s)
            T.gemm(X_s, C_s, acc, transpose_B=True, clear_accum=True,
                   policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, C):
                acc[i, j] = CenSq[j] - 2.0 * acc[i, j]
            T.reduce_min(acc, best, dim=1)
            for i, j in T.Parallel(block_M, C):
                cand[i, j] = T.if_then_else(acc[i, j] == best[i], j, C)
            T.reduce_min(cand, arg, dim=1)
            for i in T.Parallel(block_M):
                if bx * block_M + i < NP:
                    xsq = T.alloc_var("float32", init=0.0)
                    for d in T.serial(D):
                        xsq += T.cast(X_s[i, d], "float32") * T.cast(X_s[i, d], "float32")
                    Label[bx * block_M + i] = arg[i]
                    Dist[bx * block_M + i] = T.max(best[i] + xsq, 0.0)

    return assign


# ---- RWKV-6 recurrence ---------------------------------------------------------------------------
@tilelang.jit(out_idx=[5])
def rwkv6_recurrent(BH=8, L=64, K=64, V=64, threads=128):
    """One head per block, the (K, V) state S in registers:
    o_t[v] = sum_k r_t[k] (u[k] k_t[k] v_t[v] + S[k, v]);  S <- diag(exp(-exp(w_t))) S + k_t v_t^T.
    The sum over k is a ``T.reduce_sum(..., dim=0)`` of a register tile."""

    @T.prim_func
    def wkv(R: T.Tensor((BH, L, K), "bfloat16"), Kt: T.Tensor((BH, L, K), "bfloat16"),
            Vt: T.Tensor((BH, L, V), "bfloat16"), W: T.Tensor((BH, L, K), "float32"),
            U: T.Tensor((BH, K), "float32"), O: T.Tensor((BH, L, V), "bfloat16")):
        with T.Kernel(BH, threads=threads) as h:
            S = T.alloc_fragment((K, V), "float32")
            tmp = T.alloc_fragment((K, V), "float32")
            o = T.alloc_fragment((V,), "float32")
            r_s = T.alloc_shared((K,), "float32")
            k_s = T.alloc_shared((K,), "float32")
            w_s = T.alloc_shared((K,), "float32")
            v_s = T.alloc_shared((V,), "float32")
            u_s = T.alloc_shared((K,), "float32")
            T.copy(U[h, :], u_s)
            T.clear(S)
            for t in T.serial(L):
                T.copy(R[h, t, :], r_s)
                T.copy(Kt[h, t, :], k_s)
                T.copy(Vt[h, t, :], v_s)
                for i in T.Parallel(K):
                    w_s[i] = T.exp(-T.exp(W[h, t, i]))
                for i, j in T.Parallel(K, V):
                    kv = k_s[i] * v_s[j]
                    tmp[i, j] = r_s[i] * (u_s[i] * kv + S[i, j])
                    S[i, j] = S[i, j] * w_s[i] + kv
                T.reduce_sum(tmp, o, dim=0)
                for j in T.Parallel(V):
                    O[h, t, j] = T.cast(o[j], "bfloat16")

    return wkv


# ---- binary codes: Hamming nearest neighbour ---------------------------------------------------
@tilelang.jit(out_idx=[3, 4, 5])
def hamming_nearest(NQ=256, ND=2048, W=8, block_Q=16, block_D=128, threads=128):
    """Nearest database code (XOR + ``T.popcount`` over W 32-bit words) among the valid ones
    (a bool mask), ties to the lower index; with it the number of leading bits the best
    match shares with the query's first word (``T.clz`` of the XOR, 32 when equal) as int8."""

    @T.prim_func
    def nn(Q: T.Tensor((NQ, W), "uint32"), Db: T.Tensor((ND, W), "uint32"),
           Valid: T.Tensor((ND,), "bool"), Idx: T.Tensor((NQ,), "int32"),
           Dist: T.Tensor((NQ,), "int32"), Lead: T.Tensor((NQ,), "int8")):
        with T.Kernel(NQ // block_Q, threads=threads) as bx:
            q_s = T.alloc_shared((block_Q, W), "uint32")
            d_s = T.alloc_shared((block_D, W), "uint32")
            dist = T.alloc_fragment((block_Q, block_D), "int32")
            cand = T.alloc_fragment((block_Q, block_D), "int32")
            cmin = T.alloc_fragment((block_Q,), "int32")
            carg = T.alloc_fragment((block_Q,), "int32")
            best = T.alloc_fragment((block_Q,), "int32")
            barg = T.alloc_fragment((block_Q,), "int32")
            T.copy(Q[bx * block_Q, 0], q_s)
            T.fill(best, 1 << 30)
            T.fill(barg, 0)
            for c in T.serial(ND // block_D):
                T.copy(Db[c * block_D, 0], d_s)
                for i, j in T.Parallel(block_Q, block_D):
                    acc = T.alloc_var("int32", init=0)
                    for w in T.unroll(W):
                        acc += T.popcount(q_s[i, w] ^ d_s[j, w])
                    dist[i, j] = T.if_then_else(Valid[c * block_D + j], acc, 1 << 30)
                T.reduce_min(dist, cmin, dim=1)
                for i, j in T.Parallel(block_Q, block_D):
                    cand[i, j] = T.if_then_else(dist[i, j] == cmin[i], c * block_D + j, ND)
                T.reduce_min(cand, carg, dim=1)
                for i in T.Parallel(block_Q):
                    if cmin[i] < best[i]:
                        best[i] = cmin[i]
                        barg[i] = carg[i]
            for i in T.Parallel(block_Q):
                q = bx * block_Q + i
                Idx[q] = barg[i]
                Dist[q] = best[i]
                Lead[q] = T.cast(T.clz(Q[q, 0] ^ Db[barg[i], 0]), "int8")

    return nn


# ---- grid_sample (bilinear, zeros padding, align_corners=False) ------------------------------------
@tilelang.jit(out_idx=[2])
def grid_sample_bilinear(N=2, H=32, W=48, C=64, Ho=40, Wo=40, block_W=16, threads=128):
    """out[n, y, x, c] = bilinear sample of the NHWC input at grid[n, y, x] in [-1, 1]
    (x first), taps outside the image read as zero.  Grid: (x tiles, rows, batch)."""

    @T.prim_func
    def sample(X: T.Tensor((N, H, W, C), "float16"), G: T.Tensor((N, Ho, Wo, 2), "float32"),
               Y: T.Tensor((N, Ho, Wo, C), "float16")):
        with T.Kernel(T.ceildiv(Wo, block_W), Ho, N, threads=threads) as (bx, oy, n):
            for p, c in T.Parallel(block_W, C):
                ox = bx * block_W + p
                if ox < Wo:
                    fx = ((G[n, oy, ox, 0] + 1.0) * W - 1.0) * 0.5
                    fy = ((G[n, oy, ox, 1] + 1.0) * H - 1.0) * 0.5
                    x0 = T.cast(T.floor(fx), "int32")
                    y0 = T.cast(T.floor(fy), "int32")
                    ax = fx - T.floor(fx)
                    ay = fy - T.floor(fy)
                    v00 = T.if_then_else((x0 >= 0) & (x0 < W) & (y0 >= 0) & (y0 < H),
                                         T.cast(X[n, y0, x0, c], "float32"), 0.0)
                    v01 = T.if_then_else((x0 + 1 >= 0) & (x0 + 1 < W) & (y0 >= 0) & (y0 < H),
                                         T.cast(X[n, y0, x0 + 1, c], "float32"), 0.0)
                    v10 = T.if_then_else((x0 >= 0) & (x0 < W) & (y0 + 1 >= 0) & (y0 + 1 < H),
                                         T.cast(X[n, y0 + 1, x0, c], "float32"), 0.0)
                    v11 = T.if_then_else((x0 + 1 >= 0) & (x0 + 1 < W) & (y0 + 1 >= 0) & (y0 + 1 < H),
                                         T.cast(X[n, y0 + 1, x0 + 1, c], "float32"), 0.0)
                    top = v00 * (1.0 - ax) + v01 * ax
                    bot = v10 * (1.0 - ax) + v11 * ax
                    Y[n, oy, ox, c] = T.cast(top * (1.0 - ay) + bot * ay, "float16")

    return sample


# ---- survival function and column maxima of a register tile --------------------------------------
@tilelang.jit(out_idx=[1, 2])
def survival_and_colmax(Tn=64, B=1024, block_B=128, threads=128):
    """P holds per-column probabilities over Tn steps (bfloat16): S[t, b] = sum_{s >= t} P[s, b]
    (a reverse cumsum along dim 0 of a float32 register tile copied from the bfloat16 one)
    and the column maxima (``T.reduce_max(..., dim=0)``)."""

    @T.prim_func
    def surv(P: T.Tensor((Tn, B), "bfloat16"), S: T.Tensor((Tn, B), "float32"),
             Mx: T.Tensor((B,), "float32")):
        with T.Kernel(B // block_B, threads=threads) as bx:
            p16 = T.alloc_fragment((Tn, block_B), "bfloat16")
            p32 = T.alloc_fragment((Tn, block_B), "float32")
            mx = T.alloc_fragment((block_B,), "float32")
            T.copy(P[0, bx * block_B], p16)
            T.copy(p16, p32)
            T.reduce_max(p32, mx, dim=0)
            T.cumsum(p32, dim=0, reverse=True)
            T.copy(p32, S[0, bx * block_B])
            T.copy(mx, Mx[bx * block_B])

    return surv


# ---- 3-D convolution as an implicit GEMM ----------------------------------------------------------
@tilelang.jit(out_idx=[2])
def conv3d_ndhwc_implicit_gemm(N=2, D=8, H=16, W=16, C=32, F=64, KS=3, pad=1, block_M=64,
                               block_N=64, block_K=32, num_stages=2, threads=128):
    """out[n, d, h, w, f] = sum_{kd, kh, kw, c} x[n, d+kd-pad, h+kh-pad, w+kw-pad, c] w[kd, kh, kw, c, f]
    (stride 1): rows are output voxels, the reduction runs over taps x channels, the input tile
    gathered into shared memory with zeros outside the volume, the weight tile by T.copy."""
    KK = KS * KS * KS * C
    MV = N * D * H * W

    @T.prim_func
    def conv(X: T.Tensor((N, D, H, W, C), "float16"), Wt: T.Tensor((KK, F), "float16"),
             Y: T.Tensor((N, D, H, W, F), "float16")):
        with T.Kernel(T.ceildiv(F, block_N), T.ceildiv(MV, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), "float16")
            B_s = T.alloc_shared((block_K, block_N), "float16")
            acc = T.alloc_fragment((block_M, block_N), "float32")
            Yf = T.view(Y, (MV, F))
            T.clear(acc)
            for k in T.Pipelined(KK // block_K, num_stages=num_stages):
                for i, j in T.Parallel(block_M, block_K):
                    m = by * block_M + i
                    kk = k * block_K + j
                    tap = kk // C
                    zd = (m // (H * W)) % D + tap // (KS * KS) - pad
                    zh = (m // W) % H + (tap // KS) % KS - pad
                    zw = m % W + tap % KS - pad
                    inside = (zd >= 0) & (zd < D) & (zh >= 0) & (zh < H) & (zw >= 0) & (zw < W)
                    A_s[i, j] = T.if_then_else(inside, X[m // (D * H * W), zd, zh, zw, kk % C],
                                               T.float16(0))
                T.copy(Wt[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, Yf[by * block_M, bx * block_N])

    return conv


# ---- point-cloud segments: boxes and centroids by atomics ------------------------------------------
@tilelang.jit
def segment_boxes_atomic(NPTS=4096, S=32, block=256, threads=128):
    """Each point updates its segment's box with float ``T.atomic_min`` / ``T.atomic_max``
    (coordinates of both signs) and adds (x, y, z, 1) to the segment's sums with one
    ``T.atomic_addx4`` of a 4-element register region (``T.atomic_add`` of a region is a tile
    op, which TileLang refuses inside a T.Parallel loop)."""

    @T.prim_func
    def boxes(Pts: T.Tensor((NPTS, 4), "float32"), Seg: T.Tensor((NPTS,), "int32"),
              Lo: T.Tensor((S, 3), "float32"), Hi: T.Tensor((S, 3), "float32"),
              Sums: T.Tensor((S, 4), "float32")):
        with T.Kernel(T.ceildiv(NPTS, block), threads=threads) as bx:
            for p in T.Parallel(block):
                idx = bx * block + p
                if idx < NPTS:
                    s = Seg[idx]
                    if s >= 0:
                        v = T.alloc_local((4,), "float32")
                        for c in T.vectorized(4):
                            v[c] = Pts[idx, c]
                        v[3] = 1.0
                        for c in T.unroll(3):
                            T.atomic_min(Lo[s, c], v[c])
                            T.atomic_max(Hi[s, c], v[c])
                        T.atomic_addx4(Sums[s, 0:4], v[0:4])

    return boxes


# ---- hand warp specialization: one producer, two consumer warpgroups ---------------------------------
@tilelang.jit(out_idx=[1])
def ws_softmax_two_consumers(M=1024, N=512, block_M=16, stages=2, threads=384):
    """Rows of X in tiles of 16: the producer warpgroup (``T.ws(2)``) copies a tile into a
    two-slot shared ring and arrives on ``full[slot]`` (128 arrivals); consumers (``T.ws(0, 1)``,
    256 threads) wait with the slot's phase, take a softmax of each row and arrive on
    ``empty[slot]`` (256 arrivals) once they have read it."""
    n_tiles = M // block_M

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(132, threads=threads) as bx:
            ring = T.alloc_shared((stages, block_M, N), "float32")
            full = T.alloc_barrier([128] * stages)
            empty = T.alloc_barrier([256] * stages)
            n_mine = T.ceildiv(n_tiles - bx, 132)
            with T.ws(2):
                for it in T.serial(n_mine):
                    slot = it % stages
                    T.barrier_wait(empty[slot], ((it // stages) & 1) ^ 1)
                    T.copy(X[(bx + it * 132) * block_M, 0], ring[slot, :, :])
                    T.barrier_arrive(full[slot])
            with T.ws(0, 1):
                x = T.alloc_fragment((block_M, N), "float32")
                mx = T.alloc_fragment((block_M,), "float32")
                sm = T.alloc_fragment((block_M,), "float32")
                for it in T.serial(n_mine):
                    slot = it % stages
                    T.barrier_wait(full[slot], (it // stages) & 1)
                    T.copy(ring[slot, :, :], x)
                    T.barrier_arrive(empty[slot])
                    T.reduce_max(x, mx, dim=1)
                    for i, j in T.Parallel(block_M, N):
                        x[i, j] = T.exp(x[i, j] - mx[i])
                    T.reduce_sum(x, sm, dim=1)
                    for i, j in T.Parallel(block_M, N):
                        x[i, j] = x[i, j] / sm[i]
                    T.copy(x, Y[(bx + it * 132) * block_M, 0])

    return main


# ---- macros calling macros over stepped loops -----------------------------------------------------------
@T.macro
def _axpy_pair(dst, src, a, i, j):
    dst[i, j] = dst[i, j] + a * src[i, j]


@T.macro
def _two_taps(dst, src, a, b, i, j, width):
    _axpy_pair(dst, src, a, i, j)
    if j + 1 < width:
        _axpy_pair(dst, src, b, i, j + 1)


@tilelang.jit(out_idx=[-1])
def macro_nested_stepped(block=64, threads=128):
    """Y[i, j] for even j: a * X[i, j] and b * X[i, j + 1] from a serial loop stepping by 2
    (two taps per step through nested macros; the last odd column only where it exists), the
    number of rows and columns T.dynamic, the row count not a multiple of the tile."""
    R = T.dynamic("R")
    Cn = T.dynamic("Cn")

    @T.prim_func
    def main(X: T.Tensor((R, Cn), "float32"), a: T.float32, b: T.float32,
             Y: T.Tensor((R, Cn), "float32")):
        with T.Kernel(T.ceildiv(R, block), threads=threads) as bx:
            t = T.alloc_shared((block, 1), "float32")
            for r in T.Parallel(block):
                t[r, 0] = 0.0
            for r in T.Parallel(block):
                row = bx * block + r
                if row < R:
                    for j in T.serial(0, Cn, 2):
                        Y[row, j] = 0.0
                        if j + 1 < Cn:
                            Y[row, j + 1] = 0.0
                        _two_taps(Y, X, a, b, row, j, Cn)

    return main


# ---- CDF search: while and break ---------------------------------------------------------------------------
@tilelang.jit(out_idx=[2])
def cdf_search_while_break(R=512, V=1000, threads=128):
    """For each row, the first index whose running sum of probabilities passes u[r] (inverse
    CDF sampling), walking the row with ``while`` and leaving it with ``break``; rows that
    never pass it take the last index."""

    @T.prim_func
    def search(Pr: T.Tensor((R, V), "float32"), Uu: T.Tensor((R,), "float32"),
               Out: T.Tensor((R,), "int32")):
        with T.Kernel(T.ceildiv(R, threads), threads=threads) as bx:
            r = bx * threads + T.get_thread_binding()
            if r < R:
                acc = T.alloc_var("float32", init=0.0)
                k = T.alloc_var("int32", init=0)
                pick = T.alloc_var("int32", init=V - 1)
                while k < V:
                    acc += Pr[r, k]
                    if acc > Uu[r]:
                        pick = k
                        break
                    k += 1
                Out[r] = pick

    return search


# ---- shared tile through T.reshape / T.view -------------------------------------------------------------------
@tilelang.jit(out_idx=[1, 2])
def shared_reshape_group_absmax(M=256, N=1024, block_M=32, block_N=128, group=4, threads=128):
    """Per group of 4 consecutive values: the absolute maximum, read from the (32, 128) shared
    tile reshaped to (32 * 128 / 4, 4); the tile's bits through ``T.view`` as uint16 give a
    count of negative values (sign bits) per row.  The input's L2 hit ratio annotated."""

    @T.prim_func
    def main(X: T.Tensor((M, N), "float16"), Amax: T.Tensor((M, N // group), "float16"),
             Neg: T.Tensor((M, N // block_N), "int32")):
        with T.Kernel(N // block_N, M // block_M, threads=threads) as (bx, by):
            T.annotate_l2_hit_ratio({X: 0.5})
            x_s = T.alloc_shared((block_M, block_N), "float16")
            T.copy(X[by * block_M, bx * block_N], x_s)
            grp = T.reshape(x_s, (block_M * block_N // group, group))
            bits = T.view(x_s, dtype="uint16")
            for g in T.Parallel(block_M * block_N // group):
                m = T.max(T.max(T.abs(grp[g, 0]), T.abs(grp[g, 1])),
                          T.max(T.abs(grp[g, 2]), T.abs(grp[g, 3])))
                Amax[by * block_M + g // (block_N // group),
                     bx * (block_N // group) + g % (block_N // group)] = m
            for i in T.Parallel(block_M):
                cnt = T.alloc_var("int32", init=0)
                for j in T.serial(block_N):
                    cnt += T.cast(bits[i, j] >> 15, "int32")
                Neg[by * block_M + i, bx] = cnt

    return main


# ---- GEMM: B stored (K, N), its columns split over two warpgroups ------------------------------------
@tilelang.jit(out_idx=[2])
def gemm_nn_split_n_warpgroups(M=256, N=384, K=512, block_M=64, block_N=96, block_K=32,
                               threads=256):
    """C = A @ B with B stored (K, N) (N-major for the MMA): a 64-row tile on two
    warpgroups puts them side by side along N, 48 columns each; with block_M=192 and
    block_N=48 each would take 24 columns."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), "float16")
            B_s = T.alloc_shared((block_K, block_N), "float16")
            acc = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * block_M, bx * block_N])

    return main


# ---- KV cache quantization: keys to e4m3, values to e5m2 -------------------------------------------------
@tilelang.jit(out_idx=[2, 3, 4, 5])
def kv_quant_e4m3_e5m2(Ntok=512, D=128, block_T=32, threads=128):
    """Per token: keys scaled by 448 / amax into float8_e4m3, values by 57344 / amax into
    float8_e5m2 (amax from ``T.reduce_absmax`` of a register tile), through a float8
    register tile (a fragment-to-fragment T.copy that converts); the scales returned."""

    @T.prim_func
    def quant(Kx: T.Tensor((Ntok, D), "bfloat16"), Vx: T.Tensor((Ntok, D), "bfloat16"),
              Kq: T.Tensor((Ntok, D), "float8_e4m3"), Vq: T.Tensor((Ntok, D), "float8_e5m2"),
              Ks: T.Tensor((Ntok,), "float32"), Vs: T.Tensor((Ntok,), "float32")):
        with T.Kernel(Ntok // block_T, threads=threads) as bx:
            k = T.alloc_fragment((block_T, D), "float32")
            v = T.alloc_fragment((block_T, D), "float32")
            k8 = T.alloc_fragment((block_T, D), "float8_e4m3")
            v8 = T.alloc_fragment((block_T, D), "float8_e5m2")
            ka = T.alloc_fragment((block_T,), "float32")
            va = T.alloc_fragment((block_T,), "float32")
            T.copy(Kx[bx * block_T, 0], k)
            T.copy(Vx[bx * block_T, 0], v)
            T.reduce_absmax(k, ka, dim=1)
            T.reduce_absmax(v, va, dim=1)
            for t, d in T.Parallel(block_T, D):
                k[t, d] = k[t, d] * (448.0 / T.max(ka[t], 1e-6))
                v[t, d] = v[t, d] * (57344.0 / T.max(va[t], 1e-6))
            T.copy(k, k8)
            T.copy(v, v8)
            T.copy(k8, Kq[bx * block_T, 0])
            T.copy(v8, Vq[bx * block_T, 0])
            for t in T.Parallel(block_T):
                Ks[bx * block_T + t] = T.max(ka[t], 1e-6) / 448.0
                Vs[bx * block_T + t] = T.max(va[t], 1e-6) / 57344.0

    return quant


# ---- a shared tile with a layout given as a function -------------------------------------------------------
@tilelang.jit(out_idx=[1])
def transpose_custom_layout(M=512, N=256, block=64, threads=128):
    """Y = X^T through a (64, 64) shared tile whose layout is a Python function, the XOR of
    the column with the row's low bits (T.Layout), written by T.copy and read transposed."""

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((N, M), "float32")):
        with T.Kernel(N // block, M // block, threads=threads) as (bx, by):
            s = T.alloc_shared((block, block), "float32")
            T.annotate_layout({s: T.Layout((block, block), lambda i, j: [i, j ^ (i % 32)])})
            T.copy(X[by * block, bx * block], s)
            for j, i in T.Parallel(block, block):
                Y[bx * block + j, by * block + i] = s[i, j]

    return main


# ---- warp shuffles: half-warp segments ---------------------------------------------------------------------
@tilelang.jit(out_idx=[1, 2])
def halfwarp_scan_broadcast(R=256, threads=128):
    """Each half-warp (16 lanes) holds 16 values of a row segment: an inclusive prefix sum by
    ``T.shfl_up`` (width 16), the segment total broadcast from its last lane by
    ``T.tvm_warp_shuffle`` (width 16) and the segment maximum by ``T.shfl_xor``."""

    @T.prim_func
    def main(X: T.Tensor((R, 16), "float32"), Scan: T.Tensor((R, 16), "float32"),
             Stat: T.Tensor((R, 2), "float32")):
        with T.Kernel(R * 16 // threads, threads=threads) as bx:
            tx = T.get_thread_binding()
            seg = bx * (threads // 16) + tx // 16
            lane = tx % 16
            x = T.alloc_var("float32", init=X[seg, lane])
            m = T.alloc_var("float32", init=x)
            for o in T.unroll(4):
                y = T.shfl_up(x, 1 << o, 16)
                if lane >= (1 << o):
                    x += y
            for o in T.unroll(4):
                m = T.max(m, T.shfl_xor(m, 8 >> o, 16))
            total = T.tvm_warp_shuffle(T.uint32(0xFFFFFFFF), x, 15, 16, 32)
            Scan[seg, lane] = x
            if lane == 0:
                Stat[seg, 0] = total
                Stat[seg, 1] = m

    return main


# ---- sparse MQA over gathered keys with a per-head sink -------------------------------------------------------
@tilelang.jit(out_idx=[3])
def sparse_mqa_gather_sink(B=1, S=128, SKV=512, H=64, D=64, topk=128, block_N=64, threads=256):
    """Each query token attends to ``topk`` gathered positions of one shared key/value tensor
    (index -1: padding, masked through a bool register tile); 64 heads of one token form the
    rows of the score tile; each head's sink logit joins the softmax denominator.  The
    output is parameter 3 with the sinks after it; the grid (token, batch)."""
    scale = (1.0 / D) ** 0.5 * 1.44269504

    @T.prim_func
    def attn(Q: T.Tensor((B, S, H, D), "bfloat16"), KV: T.Tensor((B, SKV, D), "bfloat16"),
             Idx: T.Tensor((B, S, topk), "int32"), Out: T.Tensor((B, S, H, D), "bfloat16"),
             Sink: T.Tensor((H,), "float32")):
        with T.Kernel(S, B, threads=threads) as (t, b):
            Q_s = T.alloc_shared((H, D), "bfloat16")
            KV_s = T.alloc_shared((block_N, D), "bfloat16")
            P_s = T.alloc_shared((H, block_N), "bfloat16")
            valid = T.alloc_fragment((block_N,), "bool")
            s = T.alloc_fragment((H, block_N), "float32")
            o = T.alloc_fragment((H, D), "float32")
            m = T.alloc_fragment((H,), "float32")
            m_prev = T.alloc_fragment((H,), "float32")
            alpha = T.alloc_fragment((H,), "float32")
            l = T.alloc_fragment((H,), "float32")
            l_blk = T.alloc_fragment((H,), "float32")
            T.copy(Q[b, t, :, :], Q_s)
            T.fill(o, 0)
            T.fill(l, 0)
            T.fill(m, -(2.0 ** 30))
            for c in T.Pipelined(topk // block_N, num_stages=2):
                for j in T.Parallel(block_N):
                    valid[j] = Idx[b, t, c * block_N + j] >= 0
                for j, d in T.Parallel(block_N, D):
                    pos = T.max(Idx[b, t, c * block_N + j], 0)
                    KV_s[j, d] = KV[b, pos, d]
                for h, j in T.Parallel(H, block_N):
                    s[h, j] = T.if_then_else(valid[j], 0, -T.infinity("float32"))
                T.gemm(Q_s, KV_s, s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(m, m_prev)
                T.reduce_max(s, m, dim=1, clear=False)
                for h in T.Parallel(H):
                    alpha[h] = T.exp2((m_prev[h] - m[h]) * scale)
                for h, j in T.Parallel(H, block_N):
                    s[h, j] = T.exp2((s[h, j] - m[h]) * scale)
                T.reduce_sum(s, l_blk, dim=1)
                for h, d in T.Parallel(H, D):
                    o[h, d] *= alpha[h]
                T.copy(s, P_s)
                T.gemm(P_s, KV_s, o, policy=T.GemmWarpPolicy.FullRow)
                for h in T.Parallel(H):
                    l[h] = l[h] * alpha[h] + l_blk[h]
            for h in T.Parallel(H):
                l[h] += T.exp2(Sink[h] * 1.44269504 - m[h] * scale)
            for h, d in T.Parallel(H, D):
                o[h, d] /= l[h]
            T.copy(o, Out[b, t, :, :])

    return attn


# ---- eager style: power-of-two fp8 scales, fp4 groups ------------------------------------------------------
def _log2_ceil(x):
    """ceil(log2(x)) of a positive float32 from its bits."""
    bits = T.reinterpret(x, "uint32")
    return T.Cast("int32", ((bits >> 23) & 0xFF) - 127 + T.if_then_else((bits & 0x7FFFFF) != 0, 1, 0))


def _pow2(e):
    """2 ** e for an int32 e in float32's normal range, from its bits."""
    return T.reinterpret((e + 127) << 23, "float32")


@tilelang.jit(pass_configs={tilelang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True})
def eager_pow2_fp8_fp4_quant(x, group=32):
    """Eager style (``T.const`` / ``T.dynamic`` shapes, ``T.empty`` outputs): each row group
    of ``group`` values into float8_e4m3 with a power-of-two scale (ceil(log2(amax / 448)),
    from the float's bits) and into float4_e2m1fn with scale amax / 6, values clamped; a
    one-step T.Pipelined body with loads that are never TMA (``disable_tma``)."""
    M = T.dynamic("M")
    N = T.const("N")
    x: T.Tensor[(M, N), T.bfloat16]
    q8 = T.empty((M, N), T.float8_e4m3)
    q4 = T.empty((M, N), T.float4_e2m1fn)
    s8 = T.empty((M, N // group), T.float32)
    s4 = T.empty((M, N // group), T.float32)
    rows = 32
    with T.Kernel(T.ceildiv(M, rows), N // group, threads=128) as (bx, by):
        x_s = T.alloc_shared((rows, group), T.bfloat16)
        xf = T.alloc_fragment((rows, group), T.float32)
        amax = T.alloc_fragment((rows,), T.float32)
        sc8 = T.alloc_fragment((rows,), T.float32)
        sc4 = T.alloc_fragment((rows,), T.float32)
        for _ in T.Pipelined(1, num_stages=0):
            T.copy(x[bx * rows, by * group], x_s, disable_tma=True)
            T.copy(x_s, xf)
            T.reduce_absmax(xf, amax, dim=1)
            for i in T.Parallel(rows):
                a = T.max(amax[i], 1e-4)
                sc8[i] = _pow2(_log2_ceil(a * (1.0 / 448.0)))
                sc4[i] = a / 6.0
            for i, j in T.Parallel(rows, group):
                r = bx * rows + i
                if r < M:
                    q8[r, by * group + j] = T.clamp(xf[i, j] / sc8[i], -448.0, 448.0)
                    q4[r, by * group + j] = T.clamp(xf[i, j] / sc4[i], -6.0, 6.0)
            for i in T.Parallel(rows):
                if bx * rows + i < M:
                    s8[bx * rows + i, by] = sc8[i]
                    s4[bx * rows + i, by] = sc4[i]
    return q8, q4, s8, s4


# ---- early exit: T.thread_return -------------------------------------------------------------------------------
@tilelang.jit
def rownorm_thread_return(R=1000, D=64, threads=128):
    """One thread a row: threads past the last row, and rows marked empty (length 0),
    return early with ``T.thread_return()``; the others store the row's L2 norm over its
    first ``Len[r]`` entries (an empty row's output is written 0 before it returns), and
    add its square into ``Total`` (an element atomic: one thread's update)."""

    @T.prim_func
    def norm(X: T.Tensor((R, D), "float32"), Len: T.Tensor((R,), "int32"),
             Y: T.Tensor((R,), "float32"), Total: T.Tensor((1,), "float32")):
        with T.Kernel(T.ceildiv(R, threads), threads=threads) as bx:
            r = bx * threads + T.get_thread_binding()
            if r >= R:
                T.thread_return()
            n = Len[r]
            if n <= 0:
                Y[r] = 0.0
                T.thread_return()
            acc = T.alloc_var("float32", init=0.0)
            for j in T.serial(T.min(n, D)):
                acc += X[r, j] * X[r, j]
            Y[r] = T.sqrt(acc)
            T.atomic_add(Total[0], acc)

    return norm
