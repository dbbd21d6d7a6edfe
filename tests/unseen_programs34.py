"""A thirty-fourth set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang): losses, vision and state-space kernels the earlier rounds leave out -- a chunked
cross-entropy forward (online log-sum-exp over the vocabulary, the label's logit gathered) and
its backward, a causal depthwise conv1d (Mamba's short convolution) over a shared window, a
sequential selective scan with its state in a fragment, group norm over NHWC, a 3x3 max pool
with padding, a bilinear 2x upsample (float source coordinates, floor and clamp), a column
softmax (dim 0) and a segment mean (embedding bag with offsets).

The file reads as TileLang after swapping its two import lines (``import tilelang`` /
``import tilelang.language as T``); ``tests/test_unseen_programs34.py`` builds each to a cubin
on the CPU, checks what decides the result in the generated source, and on a GPU compares it
with torch."""

import tilecute as tilelang
import tilecute.language as T


# ---- losses ------------------------------------------------------------------------------
@tilelang.jit(out_idx=[2])
def cross_entropy_fwd(M=256, V=8192, block_V=1024, threads=128):
    """loss[r] = logsumexp(X[r, :]) - X[r, y[r]], bf16 logits, the vocabulary in chunks with
    a running max and sum (fp32)."""
    log2e = 1.4426950408889634
    ln2 = 0.6931471805599453

    @T.prim_func
    def xent(X: T.Tensor((M, V), "bfloat16"), Y: T.Tensor((M,), "int64"),
             Loss: T.Tensor((M,), "float32")):
        with T.Kernel(M, threads=threads) as r:
            x = T.alloc_fragment((block_V,), "float32")
            m_cur = T.alloc_fragment((1,), "float32")
            s_cur = T.alloc_fragment((1,), "float32")
            m = T.alloc_var("float32")
            s = T.alloc_var("float32")
            m = -T.infinity("float32")
            s = 0.0
            for c in T.serial(V // block_V):
                for j in T.Parallel(block_V):
                    x[j] = T.cast(X[r, c * block_V + j], "float32")
                T.reduce_max(x, m_cur, dim=0)
                m_new = T.max(m, m_cur[0])
                for j in T.Parallel(block_V):
                    x[j] = T.exp2((x[j] - m_new) * log2e)
                T.reduce_sum(x, s_cur, dim=0)
                s = s * T.exp2((m - m_new) * log2e) + s_cur[0]
                m = m_new
            label = Y[r]
            Loss[r] = m + T.log2(s) * ln2 - T.cast(X[r, label], "float32")

    return xent


@tilelang.jit(out_idx=[4])
def cross_entropy_bwd(M=256, V=8192, block_M=4, block_V=512, threads=128):
    """dX = (softmax(X) - onehot(y)) * dloss[r], from the saved log-sum-exp; fp16 out."""

    @T.prim_func
    def xent_bwd(X: T.Tensor((M, V), "float16"), Y: T.Tensor((M,), "int32"),
                 LSE: T.Tensor((M,), "float32"), dL: T.Tensor((M,), "float32"),
                 dX: T.Tensor((M, V), "float16")):
        with T.Kernel(T.ceildiv(V, block_V), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            g = T.alloc_fragment((block_M, block_V), "float16")
            for i, j in T.Parallel(block_M, block_V):
                row = by * block_M + i
                col = bx * block_V + j
                p = T.exp(T.cast(X[row, col], "float32") - LSE[row])
                g[i, j] = T.cast((p - T.if_then_else(col == Y[row], 1.0, 0.0)) * dL[row], "float16")
            T.copy(g, dX[by * block_M, bx * block_V])

    return xent_bwd


# ---- state-space / sequence ----------------------------------------------------------------
@tilelang.jit(out_idx=[2])
def causal_conv1d(Bt=2, D=512, L=1024, W=4, block_D=64, block_L=128, threads=128):
    """y[b, d, t] = silu(sum_k w[d, k] * x[b, d, t - W + 1 + k]) (zero before t = 0): the
    window is a shared (block_D, block_L + W - 1) tile, its left halo filled with zeros at
    the sequence's start."""

    @T.prim_func
    def conv(X: T.Tensor((Bt, D, L), "float16"), Wt: T.Tensor((D, W), "float32"),
             Y: T.Tensor((Bt, D, L), "float16")):
        with T.Kernel(T.ceildiv(L, block_L), T.ceildiv(D, block_D), Bt, threads=threads) as (bx, by, bz):
            xs = T.alloc_shared((block_D, block_L + W - 1), "float16")
            ws = T.alloc_fragment((block_D, W), "float32")
            acc = T.alloc_fragment((block_D, block_L), "float32")
            for i, t in T.Parallel(block_D, block_L + W - 1):
                src = bx * block_L + t - (W - 1)
                xs[i, t] = T.if_then_else(src >= 0, X[bz, by * block_D + i, T.max(src, 0)], T.float16(0))
            T.copy(Wt[by * block_D, 0], ws)
            T.clear(acc)
            for k in T.unroll(W):
                for i, t in T.Parallel(block_D, block_L):
                    acc[i, t] += ws[i, k] * T.cast(xs[i, t + k], "float32")
            for i, t in T.Parallel(block_D, block_L):
                Y[bz, by * block_D + i, bx * block_L + t] = T.cast(acc[i, t] / (1.0 + T.exp(-acc[i, t])), "float16")

    return conv


@tilelang.jit(out_idx=[5])
def selective_scan(Bt=2, D=256, L=256, Nst=16, block_D=32, threads=128):
    """Mamba-1's scan, one step at a time: h = exp(dt * A) * h + dt * B[t] * x[t],
    y[t] = sum_n C[t, n] * h[n] + Dskip * x[t]; h lives in a (block_D, Nst) fragment."""

    @T.prim_func
    def scan(X: T.Tensor((Bt, L, D), "float32"), Dt: T.Tensor((Bt, L, D), "float32"),
             A: T.Tensor((D, Nst), "float32"), Bm: T.Tensor((Bt, L, Nst), "float32"),
             Cm: T.Tensor((Bt, L, Nst), "float32"), Y: T.Tensor((Bt, L, D), "float32")):
        with T.Kernel(T.ceildiv(D, block_D), Bt, threads=threads) as (bx, bz):
            h = T.alloc_fragment((block_D, Nst), "float32")
            a = T.alloc_fragment((block_D, Nst), "float32")
            hc = T.alloc_fragment((block_D, Nst), "float32")
            y = T.alloc_fragment((block_D,), "float32")
            T.clear(h)
            T.copy(A[bx * block_D, 0], a)
            for t in T.serial(L):
                for i, n in T.Parallel(block_D, Nst):
                    dt = Dt[bz, t, bx * block_D + i]
                    h[i, n] = T.exp(dt * a[i, n]) * h[i, n] + dt * Bm[bz, t, n] * X[bz, t, bx * block_D + i]
                    hc[i, n] = h[i, n] * Cm[bz, t, n]
                T.reduce_sum(hc, y, dim=1)
                for i in T.Parallel(block_D):
                    Y[bz, t, bx * block_D + i] = y[i] + X[bz, t, bx * block_D + i]

    return scan


# ---- vision ------------------------------------------------------------------------------
@tilelang.jit(out_idx=[3])
def group_norm_nhwc(Nb=4, HW=1024, C=256, G=8, block_HW=128, threads=256, eps=1e-5):
    """GroupNorm over NHWC fp16: a block per (sample, group), the group's C // G channels
    summed over HW in chunks (sum and sum of squares), then normalized with gamma."""
    Cg = C // G

    @T.prim_func
    def gn(X: T.Tensor((Nb, HW, C), "float16"), Gamma: T.Tensor((C,), "float32"),
           Beta: T.Tensor((C,), "float32"), Y: T.Tensor((Nb, HW, C), "float16")):
        with T.Kernel(G, Nb, threads=threads) as (g, n):
            x = T.alloc_fragment((block_HW, Cg), "float32")
            sq = T.alloc_fragment((block_HW, Cg), "float32")
            part = T.alloc_fragment((block_HW,), "float32")
            part2 = T.alloc_fragment((block_HW,), "float32")
            tot = T.alloc_fragment((1,), "float32")
            tot2 = T.alloc_fragment((1,), "float32")
            acc = T.alloc_var("float32")
            acc2 = T.alloc_var("float32")
            acc = 0.0
            acc2 = 0.0
            for c in T.serial(HW // block_HW):
                for i, j in T.Parallel(block_HW, Cg):
                    x[i, j] = T.cast(X[n, c * block_HW + i, g * Cg + j], "float32")
                    sq[i, j] = x[i, j] * x[i, j]
                T.reduce_sum(x, part, dim=1)
                T.reduce_sum(sq, part2, dim=1)
                T.reduce_sum(part, tot, dim=0)
                T.reduce_sum(part2, tot2, dim=0)
                acc += tot[0]
                acc2 += tot2[0]
            mean = acc / (HW * Cg)
            rstd = T.rsqrt(acc2 / (HW * Cg) - mean * mean + eps)
            for c in T.serial(HW // block_HW):
                for i, j in T.Parallel(block_HW, Cg):
                    ch = g * Cg + j
                    v = (T.cast(X[n, c * block_HW + i, ch], "float32") - mean) * rstd
                    Y[n, c * block_HW + i, ch] = T.cast(v * Gamma[ch] + Beta[ch], "float16")

    return gn


@tilelang.jit(out_idx=[1])
def max_pool_3x3_s2(Nb=2, H=56, W=56, C=64, block_C=64, threads=128):
    """3x3 max pool, stride 2, padding 1, NHWC fp32: out of bounds taps are -inf."""
    OH = (H + 2 - 3) // 2 + 1
    OW = (W + 2 - 3) // 2 + 1

    @T.prim_func
    def pool(X: T.Tensor((Nb, H, W, C), "float32"), Y: T.Tensor((Nb, OH, OW, C), "float32")):
        with T.Kernel(OW, OH, Nb, threads=threads) as (ox, oy, n):
            best = T.alloc_fragment((block_C,), "float32")
            T.fill(best, -T.infinity("float32"))
            for kh, kw in T.grid(3, 3):
                ih = oy * 2 - 1 + kh
                iw = ox * 2 - 1 + kw
                if ih >= 0 and ih < H and iw >= 0 and iw < W:
                    for c in T.Parallel(block_C):
                        best[c] = T.max(best[c], X[n, ih, iw, c])
            T.copy(best, Y[n, oy, ox, 0])

    return pool


@tilelang.jit(out_idx=[1])
def upsample_bilinear_2x(Nb=2, C=32, H=32, W=32, block_W=64, threads=64):
    """Bilinear 2x upsampling, align_corners=False, NCHW fp32: source coordinate
    (o + 0.5) / 2 - 0.5 clamped at 0, its floor and the next pixel clamped at the edge."""
    OH, OW = 2 * H, 2 * W

    @T.prim_func
    def up(X: T.Tensor((Nb, C, H, W), "float32"), Y: T.Tensor((Nb, C, OH, OW), "float32")):
        with T.Kernel(OH, C, Nb, threads=threads) as (oy, c, n):
            sy = T.max((oy + 0.5) * 0.5 - 0.5, 0.0)
            y0 = T.cast(T.floor(sy), "int32")
            y1 = T.min(y0 + 1, H - 1)
            ly = sy - T.cast(y0, "float32")
            for ox in T.Parallel(block_W):
                sx = T.max((ox + 0.5) * 0.5 - 0.5, 0.0)
                x0 = T.cast(T.floor(sx), "int32")
                x1 = T.min(x0 + 1, W - 1)
                lx = sx - T.cast(x0, "float32")
                top = X[n, c, y0, x0] * (1.0 - lx) + X[n, c, y0, x1] * lx
                bot = X[n, c, y1, x0] * (1.0 - lx) + X[n, c, y1, x1] * lx
                Y[n, c, oy, ox] = top * (1.0 - ly) + bot * ly

    return up


# ---- column and segment reductions ---------------------------------------------------------
@tilelang.jit(out_idx=[1])
def column_softmax(M=128, N=1024, block_N=64, threads=128):
    """softmax over dim 0 of an (M, N) fp32 tensor: whole columns of M rows in a fragment,
    T.reduce_max / T.reduce_sum with dim=0."""

    @T.prim_func
    def colsm(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), threads=threads) as bx:
            x = T.alloc_fragment((M, block_N), "float32")
            mx = T.alloc_fragment((block_N,), "float32")
            sm = T.alloc_fragment((block_N,), "float32")
            T.copy(X[0, bx * block_N], x)
            T.reduce_max(x, mx, dim=0)
            for i, j in T.Parallel(M, block_N):
                x[i, j] = T.exp(x[i, j] - mx[j])
            T.reduce_sum(x, sm, dim=0)
            for i, j in T.Parallel(M, block_N):
                x[i, j] = x[i, j] / sm[j]
            T.copy(x, Y[0, bx * block_N])

    return colsm


@tilelang.jit(out_idx=[3])
def embedding_bag_mean(V=4096, D=256, B=64, Tot=1024, threads=128):
    """out[b] = mean of Emb[idx[k]] for k in [off[b], off[b + 1]) (empty bag: zeros), a block
    per bag, the bag's bounds read into T.alloc_var scalars."""

    @T.prim_func
    def bag(Emb: T.Tensor((V, D), "float32"), Idx: T.Tensor((Tot,), "int32"),
            Off: T.Tensor((B + 1,), "int32"), Out: T.Tensor((B, D), "float32")):
        with T.Kernel(B, threads=threads) as b:
            acc = T.alloc_fragment((D,), "float32")
            lo = T.alloc_var("int32")
            hi = T.alloc_var("int32")
            lo = Off[b]
            hi = Off[b + 1]
            T.clear(acc)
            for k in T.serial(hi - lo):
                row = Idx[lo + k]
                for d in T.Parallel(D):
                    acc[d] += Emb[row, d]
            for d in T.Parallel(D):
                Out[b, d] = T.if_then_else(hi > lo, acc[d] / T.cast(hi - lo, "float32"), 0.0)

    return bag
