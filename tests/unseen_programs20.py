"""A twentieth set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang), all from training: backward passes and optimizer steps.  RMSNorm / LayerNorm
backward (dX, and dGamma / dBeta either by ``T.atomic_add`` of a block's column sums or by a
second kernel reducing per-block partials), softmax backward on rows of a run-time count,
cross-entropy forward and backward over vocabulary tiles (online log-sum-exp, label
smoothing, a z-loss, an ignored label), SwiGLU / GeGLU backward, the pieces of an attention
backward (delta = rowsum(dO * O), dK / dV by GEMMs on transposed operands, dQ accumulated in
float32 by ``T.atomic_add``, a postprocess casting dQ), embedding backward by a scatter-add
over sorted token runs, rotary-embedding backward, the two GEMMs of a linear layer's backward
(dA = dC B^T by ``transpose_B``, dB = A^T dC by ``transpose_A`` split over M with atomics),
AdamW and SGD-momentum steps over flat tensors (float32 master weights, bfloat16 copies),
gradient clipping by the global norm (two kernels), dropout from a counter-based hash
(forward and the backward regenerating the mask), mixed-precision loss-scale unscaling with a
``T.isnan`` / ``T.isinf`` check and the scale update, BCE-with-logits and batch-norm
backward, and a reverse cumulative sum (the backward of a cumsum).

``tests/test_unseen_programs20.py`` builds each to a cubin on the CPU, checks what each means
in the generated source, and on a GPU compares it with a torch reference.

Each factory is a ``@tilecute.jit`` function: calling it with its parameters gives the
compiled kernel (``out_idx`` outputs returned by the call).  Gradients accumulated by
atomics go into tensors the caller passes in (zeroed), as in TileLang, whose ``out_idx``
outputs are not zeroed."""

import tilecute
import tilecute.language as T


# ---- normalisation backward ---------------------------------------------------------------
@tilecute.jit(out_idx=[4])
def rmsnorm_bwd_atomic_dw(M=100, N=384, block_M=8, threads=128):
    """RMSNorm backward from the saved rstd: xhat = x * rstd, dX = rstd * (dy * w - xhat *
    mean(dy * w * xhat)), and dW = sum over rows of dy * xhat: each block reduces its rows
    (``T.reduce_sum(dim=0)``) and adds the column sums into dW with one tile
    ``T.atomic_add``.  M = 100 rows in blocks of 8: the last block half empty (its rows
    read as zeros, adding nothing)."""
    dtype, accum = "bfloat16", "float32"

    @T.prim_func
    def bwd(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), accum), dY: T.Tensor((M, N), dtype),
            Rstd: T.Tensor((M,), accum), dX: T.Tensor((M, N), dtype), dW: T.Tensor((N,), accum)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x_s = T.alloc_shared((block_M, N), dtype)
            dy_s = T.alloc_shared((block_M, N), dtype)
            xh = T.alloc_fragment((block_M, N), accum)
            dy = T.alloc_fragment((block_M, N), accum)
            prod = T.alloc_fragment((block_M, N), accum)
            w = T.alloc_fragment((N,), accum)
            r = T.alloc_fragment((block_M,), accum)
            c = T.alloc_fragment((block_M,), accum)
            dw_part = T.alloc_fragment((N,), accum)
            dx = T.alloc_fragment((block_M, N), dtype)
            T.copy(X[bx * block_M, 0], x_s)
            T.copy(dY[bx * block_M, 0], dy_s)
            T.copy(x_s, xh)
            T.copy(dy_s, dy)
            T.copy(W, w)
            T.copy(Rstd[bx * block_M], r)
            for i, j in T.Parallel(block_M, N):
                xh[i, j] = xh[i, j] * r[i]
                prod[i, j] = dy[i, j] * w[j] * xh[i, j]
            T.reduce_sum(prod, c, dim=1)
            for i, j in T.Parallel(block_M, N):
                prod[i, j] = dy[i, j] * xh[i, j]
            T.reduce_sum(prod, dw_part, dim=0)
            T.atomic_add(dW[0:N], dw_part)
            for i, j in T.Parallel(block_M, N):
                dx[i, j] = (dy[i, j] * w[j] - xh[i, j] * c[i] / N) * r[i]
            T.copy(dx, dX[bx * block_M, 0])
    return bwd


@tilecute.jit(out_idx=[4, 5, 6])
def layernorm_bwd_partials(M=120, N=256, block_M=16, threads=256):
    """LayerNorm backward, first stage: dX from the saved mean and rstd, and each block's
    column sums of dy * xhat and dy written to a (blocks, N) workspace (no atomics: the
    second stage reduces them).  The saved statistics come in one (M, 2) tensor read by a
    strided ``T.copy`` of a column."""
    G = (M + block_M - 1) // block_M
    dtype, accum = "float16", "float32"

    @T.prim_func
    def stage1(X: T.Tensor((M, N), dtype), Gamma: T.Tensor((N,), dtype), dY: T.Tensor((M, N), dtype),
               Stats: T.Tensor((M, 2), accum), dX: T.Tensor((M, N), dtype),
               PartG: T.Tensor((G, N), accum), PartB: T.Tensor((G, N), accum)):
        with T.Kernel(G, threads=threads) as bx:
            xf = T.alloc_fragment((block_M, N), accum)
            dyf = T.alloc_fragment((block_M, N), accum)
            gdy = T.alloc_fragment((block_M, N), accum)
            g = T.alloc_fragment((N,), accum)
            mean = T.alloc_fragment((block_M,), accum)
            rstd = T.alloc_fragment((block_M,), accum)
            s1 = T.alloc_fragment((block_M,), accum)
            s2 = T.alloc_fragment((block_M,), accum)
            pg = T.alloc_fragment((N,), accum)
            pb = T.alloc_fragment((N,), accum)
            T.copy(X[bx * block_M:(bx + 1) * block_M, :], xf)
            T.copy(dY[bx * block_M:(bx + 1) * block_M, :], dyf)
            T.copy(Gamma, g)
            T.copy(Stats[bx * block_M:(bx + 1) * block_M, 0], mean)
            T.copy(Stats[bx * block_M:(bx + 1) * block_M, 1], rstd)
            for i, j in T.Parallel(block_M, N):
                xf[i, j] = (xf[i, j] - mean[i]) * rstd[i]
                gdy[i, j] = dyf[i, j] * g[j]
            T.reduce_sum(gdy, s1, dim=1)
            T.reduce_sum(dyf, pb, dim=0)
            for i, j in T.Parallel(block_M, N):
                gdy[i, j] = gdy[i, j] * xf[i, j]
            T.reduce_sum(gdy, s2, dim=1)
            for i, j in T.Parallel(block_M, N):
                gdy[i, j] = dyf[i, j] * xf[i, j]
            T.reduce_sum(gdy, pg, dim=0)
            T.copy(pg, PartG[bx, :])
            T.copy(pb, PartB[bx, :])
            for i, j in T.Parallel(block_M, N):
                gdy[i, j] = rstd[i] * (dyf[i, j] * g[j] - (s1[i] + xf[i, j] * s2[i]) / N)
            T.copy(gdy, dX[bx * block_M:(bx + 1) * block_M, :])
    return stage1


@tilecute.jit(out_idx=[2, 3])
def layernorm_bwd_reduce_partials(G=8, N=256, block_G=4, block_N=64, threads=128):
    """LayerNorm backward, second stage: dGamma and dBeta as the column sums of the (G, N)
    workspaces, a block a column tile, ``T.Pipelined`` over row chunks accumulating with
    ``T.reduce_sum(..., clear=False)``; G = 8 partial rows in chunks of 4 (and with G = 7 the
    last chunk is ragged: zero rows)."""
    accum = "float32"

    @T.prim_func
    def stage2(PartG: T.Tensor((G, N), accum), PartB: T.Tensor((G, N), accum), dGamma: T.Tensor((N,), accum),
               dBeta: T.Tensor((N,), accum)):
        with T.Kernel(T.ceildiv(N, block_N), threads=threads) as bx:
            sg = T.alloc_shared((block_G, block_N), accum)
            sb = T.alloc_shared((block_G, block_N), accum)
            fg = T.alloc_fragment((block_G, block_N), accum)
            fb = T.alloc_fragment((block_G, block_N), accum)
            ag = T.alloc_fragment((block_N,), accum)
            ab = T.alloc_fragment((block_N,), accum)
            T.clear(ag)
            T.clear(ab)
            for k in T.Pipelined(T.ceildiv(G, block_G), num_stages=2):
                T.copy(PartG[k * block_G, bx * block_N], sg)
                T.copy(PartB[k * block_G, bx * block_N], sb)
                T.copy(sg, fg)
                T.copy(sb, fb)
                T.reduce_sum(fg, ag, dim=0, clear=False)
                T.reduce_sum(fb, ab, dim=0, clear=False)
            T.copy(ag, dGamma[bx * block_N])
            T.copy(ab, dBeta[bx * block_N])
    return stage2


@tilecute.jit(out_idx=[2])
def softmax_bwd_dynamic_rows(N=1536, block_M=2, threads=128):
    """Softmax backward dX = y * (dy - rowsum(dy * y)) over a run-time number of rows
    (``T.dynamic``), bfloat16 in and out, rows of 1000 (not a multiple of the threads)
    held whole in a fragment; the last block may hold one row."""
    M = T.dynamic("M")
    dtype, accum = "bfloat16", "float32"

    @T.prim_func
    def sbwd(Y: T.Tensor((M, N), dtype), dY: T.Tensor((M, N), dtype), dX: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            y = T.alloc_fragment((block_M, N), accum)
            dy = T.alloc_fragment((block_M, N), accum)
            yd = T.alloc_fragment((block_M, N), accum)
            dot = T.alloc_fragment((block_M,), accum)
            T.copy(Y[bx * block_M, 0], y)
            T.copy(dY[bx * block_M, 0], dy)
            for i, j in T.Parallel(block_M, N):
                yd[i, j] = y[i, j] * dy[i, j]
            T.reduce_sum(yd, dot, dim=1)
            for i, j in T.Parallel(block_M, N):
                yd[i, j] = y[i, j] * (dy[i, j] - dot[i])
            T.copy(yd, dX[bx * block_M, 0])
    return sbwd


@tilecute.jit(out_idx=[3, 4])
def cross_entropy_smoothed_zloss(M=37, V=5000, block_M=4, block_V=512, smoothing=0.1, z_weight=1e-4,
                                 ignore_index=-100, threads=128):
    """Cross-entropy forward and backward over vocabulary tiles: a first ``T.Pipelined``
    sweep keeps an online max / sum of exp (and the row sum of logits for label smoothing);
    loss = lse - (1 - eps) x[label] - eps mean(x) + z * lse^2; a second sweep writes
    dlogits = dloss * (softmax * (1 + 2 z lse) - (1 - eps) onehot - eps / V).  V = 5000 in tiles
    of 512 (the last tile ragged: -inf and 0 past V), a label of -100 gives zero loss and
    gradient, M = 37 rows in blocks of 4."""
    dtype, accum = "bfloat16", "float32"
    nt = (V + block_V - 1) // block_V

    @T.prim_func
    def xent(Logits: T.Tensor((M, V), dtype), Labels: T.Tensor((M,), "int64"), dLoss: T.Tensor((M,), accum),
             Loss: T.Tensor((M,), accum), dLogits: T.Tensor((M, V), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            tile = T.alloc_shared((block_M, block_V), dtype)
            x = T.alloc_fragment((block_M, block_V), accum)
            m = T.alloc_fragment((block_M,), accum)
            m_prev = T.alloc_fragment((block_M,), accum)
            tmax = T.alloc_fragment((block_M,), accum)
            l = T.alloc_fragment((block_M,), accum)
            tsum = T.alloc_fragment((block_M,), accum)
            xs = T.alloc_fragment((block_M,), accum)
            txs = T.alloc_fragment((block_M,), accum)
            g = T.alloc_fragment((block_M, block_V), dtype)
            T.fill(m, -T.infinity(accum))
            T.clear(l)
            T.clear(xs)
            for t in T.Pipelined(nt, num_stages=2):
                T.copy(Logits[bx * block_M, t * block_V], tile)
                for i, j in T.Parallel(block_M, block_V):
                    x[i, j] = T.if_then_else(t * block_V + j < V, T.cast(tile[i, j], accum), -T.infinity(accum))
                T.copy(m, m_prev)
                T.reduce_max(x, tmax, dim=1)
                for i in T.Parallel(block_M):
                    m[i] = T.max(m_prev[i], tmax[i])
                for i, j in T.Parallel(block_M, block_V):
                    x[i, j] = T.exp(x[i, j] - m[i])
                T.reduce_sum(x, tsum, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * T.exp(m_prev[i] - m[i]) + tsum[i]
                for i, j in T.Parallel(block_M, block_V):
                    x[i, j] = T.if_then_else(t * block_V + j < V, T.cast(tile[i, j], accum), 0)
                T.reduce_sum(x, txs, dim=1)
                for i in T.Parallel(block_M):
                    xs[i] = xs[i] + txs[i]
            for i in T.Parallel(block_M):
                row = bx * block_M + i
                lab = Labels[row]
                lse = m[i] + T.log(l[i])
                if row < M:
                    if lab == ignore_index:
                        Loss[row] = 0
                    else:
                        Loss[row] = (lse - (1 - smoothing) * T.cast(Logits[row, lab], accum)
                                     - smoothing * xs[i] / V + z_weight * lse * lse)
                m[i] = lse
            for t in T.Pipelined(nt, num_stages=2):
                T.copy(Logits[bx * block_M, t * block_V], tile)
                for i, j in T.Parallel(block_M, block_V):
                    row = bx * block_M + i
                    col = t * block_V + j
                    lab = Labels[row]
                    p = T.exp(T.cast(tile[i, j], accum) - m[i])
                    hot = T.if_then_else(col == lab, 1 - smoothing, 0)
                    gv = dLoss[row] * (p * (1 + 2 * z_weight * m[i]) - hot - smoothing / V)
                    g[i, j] = T.if_then_else(lab == ignore_index, 0, gv)
                T.copy(g, dLogits[bx * block_M, t * block_V])
    return xent


# ---- gated activations backward ------------------------------------------------------------
@tilecute.jit(out_idx=[2])
def swiglu_bwd_packed(M=77, F=320, block_M=32, block_F=64, threads=128):
    """SwiGLU backward with the gate and up projections packed in one (M, 2F) input (gate
    in columns [0, F), up in [F, 2F)): h = silu(g) * u, dG = dH * u * s * (1 + g (1 - s)),
    dU = dH * silu(g), written into the same packed layout.  M = 77 ragged."""
    dtype, accum = "bfloat16", "float32"

    @T.prim_func
    def bwd(GU: T.Tensor((M, 2 * F), dtype), dH: T.Tensor((M, F), dtype), dGU: T.Tensor((M, 2 * F), dtype)):
        with T.Kernel(T.ceildiv(F, block_F), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            gs = T.alloc_shared((block_M, block_F), dtype)
            us = T.alloc_shared((block_M, block_F), dtype)
            hs = T.alloc_shared((block_M, block_F), dtype)
            dg = T.alloc_fragment((block_M, block_F), dtype)
            du = T.alloc_fragment((block_M, block_F), dtype)
            T.copy(GU[by * block_M, bx * block_F], gs)
            T.copy(GU[by * block_M, F + bx * block_F], us)
            T.copy(dH[by * block_M, bx * block_F], hs)
            for i, j in T.Parallel(block_M, block_F):
                gv = T.cast(gs[i, j], accum)
                uv = T.cast(us[i, j], accum)
                hv = T.cast(hs[i, j], accum)
                s = T.sigmoid(gv)
                dg[i, j] = hv * uv * s * (1 + gv * (1 - s))
                du[i, j] = hv * gv * s
            T.copy(dg, dGU[by * block_M, bx * block_F])
            T.copy(du, dGU[by * block_M, F + bx * block_F])
    return bwd


@tilecute.jit(out_idx=[3, 4])
def geglu_tanh_bwd(M=64, F=200, block_M=16, block_F=128, threads=128):
    """GeGLU (tanh-approximated GELU) backward, element by element from globals: with
    t = tanh(c (a + 0.044715 a^3)), gelu(a) = a (1 + t) / 2 and gelu'(a) = (1 + t) / 2 + a (1 -
    t^2) c (1 + 3 * 0.044715 a^2) / 2; dA = dH * b * gelu'(a), dB = dH * gelu(a).  F = 200 in
    tiles of 128 (a ragged column tile guarded by hand)."""
    dtype, accum = "float16", "float32"
    c = 0.7978845608028654

    @T.prim_func
    def bwd(A: T.Tensor((M, F), dtype), B: T.Tensor((M, F), dtype), dH: T.Tensor((M, F), dtype),
            dA: T.Tensor((M, F), dtype), dB: T.Tensor((M, F), dtype)):
        with T.Kernel(T.ceildiv(F, block_F), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            for i, j in T.Parallel(block_M, block_F):
                r = by * block_M + i
                col = bx * block_F + j
                if col < F:
                    a = T.cast(A[r, col], accum)
                    t = T.tanh(c * (a + 0.044715 * a * a * a))
                    ge = 0.5 * a * (1 + t)
                    dge = 0.5 * (1 + t) + 0.5 * a * (1 - t * t) * c * (1 + 3 * 0.044715 * a * a)
                    h = T.cast(dH[r, col], accum)
                    dA[r, col] = T.cast(h * T.cast(B[r, col], accum) * dge, dtype)
                    dB[r, col] = T.cast(h * ge, dtype)
    return bwd


# ---- attention backward ------------------------------------------------------------------
@tilecute.jit(out_idx=[2])
def attn_bwd_delta_bshd(B=2, S=200, H=3, D=64, block_M=64, threads=128):
    """Attention backward preprocess: delta[b, h, s] = sum_d dO[b, s, h, d] * O[b, s, h, d]
    from BSHD tensors (a head's rows are strided by H * D), written (B, H, S); S = 200
    leaves a ragged query tile."""
    dtype, accum = "bfloat16", "float32"

    @T.prim_func
    def pre(O: T.Tensor((B, S, H, D), dtype), dO: T.Tensor((B, S, H, D), dtype), Delta: T.Tensor((B, H, S), accum)):
        with T.Kernel(T.ceildiv(S, block_M), H, B, threads=threads) as (bx, by, bz):
            o = T.alloc_fragment((block_M, D), accum)
            do = T.alloc_fragment((block_M, D), accum)
            d = T.alloc_fragment((block_M,), accum)
            T.copy(O[bz, bx * block_M:(bx + 1) * block_M, by, :], o)
            T.copy(dO[bz, bx * block_M:(bx + 1) * block_M, by, :], do)
            for i, j in T.Parallel(block_M, D):
                o[i, j] = o[i, j] * do[i, j]
            T.reduce_sum(o, d, dim=1)
            T.copy(d, Delta[bz, by, bx * block_M:(bx + 1) * block_M])
    return pre


@tilecute.jit(out_idx=[7, 8])
def attn_bwd_kv_major_gqa(B=1, S=128, HQ=4, HKV=2, D=64, block_M=64, block_N=64, causal=True, threads=128):
    """Attention backward, a block per (key tile, kv head): the scores are computed
    transposed (S^T = K Q^T, ``transpose_B``), P^T = exp2(S^T * scale * log2e - lse),
    dV += P^T dO, dP^T = V dO^T (``transpose_B``), dS^T = P^T (dP^T - delta), dK += dS^T Q,
    and dQ += dS K = (dS^T)^T K by ``transpose_A``, added in float32 into a (B, HQ, S, D)
    accumulator with a tile ``T.atomic_add``.  The GQA group's query heads (HQ / HKV) and
    the query tiles are walked by one flattened ``T.Pipelined`` loop; causal tiles above
    the diagonal are skipped.  BHSD layout; LSE given in log2 units (lse * log2 e)."""
    dtype, accum = "float16", "float32"
    groups = HQ // HKV
    nq = S // block_M
    scale = (1.0 / D) ** 0.5 * 1.44269504

    @T.prim_func
    def bwd(Q: T.Tensor((B, HQ, S, D), dtype), K: T.Tensor((B, HKV, S, D), dtype), V: T.Tensor((B, HKV, S, D), dtype),
            dO: T.Tensor((B, HQ, S, D), dtype), LSE2: T.Tensor((B, HQ, S), accum), Delta: T.Tensor((B, HQ, S), accum),
            dQacc: T.Tensor((B, HQ, S, D), accum), dK: T.Tensor((B, HKV, S, D), dtype),
            dV: T.Tensor((B, HKV, S, D), dtype)):
        with T.Kernel(S // block_N, HKV, B, threads=threads) as (bx, by, bz):
            k_s = T.alloc_shared((block_N, D), dtype)
            v_s = T.alloc_shared((block_N, D), dtype)
            q_s = T.alloc_shared((block_M, D), dtype)
            do_s = T.alloc_shared((block_M, D), dtype)
            pt_s = T.alloc_shared((block_N, block_M), dtype)
            dst_s = T.alloc_shared((block_N, block_M), dtype)
            lse_s = T.alloc_shared((block_M,), accum)
            delta_s = T.alloc_shared((block_M,), accum)
            st = T.alloc_fragment((block_N, block_M), accum)
            dpt = T.alloc_fragment((block_N, block_M), accum)
            dv = T.alloc_fragment((block_N, D), accum)
            dk = T.alloc_fragment((block_N, D), accum)
            dq = T.alloc_fragment((block_M, D), accum)
            dv_out = T.alloc_fragment((block_N, D), dtype)
            dk_out = T.alloc_fragment((block_N, D), dtype)
            T.copy(K[bz, by, bx * block_N:(bx + 1) * block_N, :], k_s)
            T.copy(V[bz, by, bx * block_N:(bx + 1) * block_N, :], v_s)
            T.clear(dv)
            T.clear(dk)
            for it in T.Pipelined(groups * nq, num_stages=1):
                h = by * groups + it // nq
                qt = it % nq
                if (not causal) or (qt * block_M + block_M > bx * block_N):
                    T.copy(Q[bz, h, qt * block_M:(qt + 1) * block_M, :], q_s)
                    T.copy(dO[bz, h, qt * block_M:(qt + 1) * block_M, :], do_s)
                    T.copy(LSE2[bz, h, qt * block_M:(qt + 1) * block_M], lse_s)
                    T.copy(Delta[bz, h, qt * block_M:(qt + 1) * block_M], delta_s)
                    T.clear(st)
                    T.gemm(k_s, q_s, st, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                    for i, j in T.Parallel(block_N, block_M):
                        keep = (not causal) or (bx * block_N + i <= qt * block_M + j)
                        st[i, j] = T.if_then_else(keep, T.exp2(st[i, j] * scale - lse_s[j]), 0)
                    T.copy(st, pt_s)
                    T.gemm(pt_s, do_s, dv, policy=T.GemmWarpPolicy.FullRow)
                    T.clear(dpt)
                    T.gemm(v_s, do_s, dpt, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                    for i, j in T.Parallel(block_N, block_M):
                        dpt[i, j] = st[i, j] * (dpt[i, j] - delta_s[j])
                    T.copy(dpt, dst_s)
                    T.gemm(dst_s, q_s, dk, policy=T.GemmWarpPolicy.FullRow)
                    T.clear(dq)
                    T.gemm(dst_s, k_s, dq, transpose_A=True, policy=T.GemmWarpPolicy.FullRow)
                    T.atomic_add(dQacc[bz, h, qt * block_M:(qt + 1) * block_M, :], dq)
            for i, j in T.Parallel(block_N, D):
                dk[i, j] = dk[i, j] * (scale / 1.44269504)
            T.copy(dk, dk_out)
            T.copy(dv, dv_out)
            T.copy(dk_out, dK[bz, by, bx * block_N:(bx + 1) * block_N, :])
            T.copy(dv_out, dV[bz, by, bx * block_N:(bx + 1) * block_N, :])
    return bwd


@tilecute.jit(out_idx=[1])
def attn_bwd_dq_postprocess(B=1, H=4, S=128, D=64, sm_scale=0.125, block_M=64, threads=128):
    """Attention backward postprocess: dQ = dQacc * sm_scale cast to float16 (BHSD), the
    float32 accumulator read through shared memory."""

    @T.prim_func
    def post(dQacc: T.Tensor((B, H, S, D), "float32"), dQ: T.Tensor((B, H, S, D), "float16")):
        with T.Kernel(T.ceildiv(S, block_M), H, B, threads=threads) as (bx, by, bz):
            a_s = T.alloc_shared((block_M, D), "float32")
            out = T.alloc_fragment((block_M, D), "float16")
            T.copy(dQacc[bz, by, bx * block_M:(bx + 1) * block_M, :], a_s)
            for i, j in T.Parallel(block_M, D):
                out[i, j] = a_s[i, j] * sm_scale
            T.copy(out, dQ[bz, by, bx * block_M:(bx + 1) * block_M, :])
    return post


@tilecute.jit(out_idx=[6, 7])
def attn_bwd_register_p(B=1, H=2, S=128, D=64, block_M=64, block_N=64, threads=128):
    """Attention backward with the probabilities and dS kept in registers as the A operand
    of the dV and dK GEMMs (``T.copy`` of the float32 accumulator into a bfloat16
    fragment, then ``T.gemm(fragment, shared, ...)``), ``clear_accum=True`` on the score,
    dP and dQ GEMMs, dS also staged in shared for dQ = (dS^T)^T K (``transpose_A``), dQ added
    element by element with ``T.atomic_add`` inside ``T.Parallel``; LSE and delta read
    straight into fragments indexed by the score's column; dK and dV written in float32.
    dQacc (after the out_idx outputs) is an input the caller zeroes."""
    dtype, accum = "bfloat16", "float32"
    scale = (1.0 / D) ** 0.5

    @T.prim_func
    def bwd(Q: T.Tensor((B, H, S, D), dtype), K: T.Tensor((B, H, S, D), dtype), V: T.Tensor((B, H, S, D), dtype),
            dO: T.Tensor((B, H, S, D), dtype), LSE: T.Tensor((B, H, S), accum), Delta: T.Tensor((B, H, S), accum),
            dK: T.Tensor((B, H, S, D), accum), dV: T.Tensor((B, H, S, D), accum), dQacc: T.Tensor((B, H, S, D), accum)):
        with T.Kernel(S // block_N, H, B, threads=threads) as (bx, by, bz):
            k_s = T.alloc_shared((block_N, D), dtype)
            v_s = T.alloc_shared((block_N, D), dtype)
            q_s = T.alloc_shared((block_M, D), dtype)
            do_s = T.alloc_shared((block_M, D), dtype)
            ds_s = T.alloc_shared((block_N, block_M), dtype)
            st = T.alloc_fragment((block_N, block_M), accum)
            st_cast = T.alloc_fragment((block_N, block_M), dtype)
            dpt = T.alloc_fragment((block_N, block_M), accum)
            dpt_cast = T.alloc_fragment((block_N, block_M), dtype)
            dv = T.alloc_fragment((block_N, D), accum)
            dk = T.alloc_fragment((block_N, D), accum)
            dq = T.alloc_fragment((block_M, D), accum)
            lse = T.alloc_fragment((block_M,), accum)
            dl = T.alloc_fragment((block_M,), accum)
            T.copy(K[bz, by, bx * block_N:(bx + 1) * block_N, :], k_s)
            T.copy(V[bz, by, bx * block_N:(bx + 1) * block_N, :], v_s)
            T.clear(dv)
            T.clear(dk)
            for qt in T.Pipelined(S // block_M, num_stages=2):
                T.copy(Q[bz, by, qt * block_M:(qt + 1) * block_M, :], q_s)
                T.copy(dO[bz, by, qt * block_M:(qt + 1) * block_M, :], do_s)
                T.copy(LSE[bz, by, qt * block_M:(qt + 1) * block_M], lse)
                T.copy(Delta[bz, by, qt * block_M:(qt + 1) * block_M], dl)
                T.gemm(k_s, q_s, st, transpose_B=True, clear_accum=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_N, block_M):
                    st[i, j] = T.exp(st[i, j] * scale - lse[j])
                T.copy(st, st_cast)
                T.gemm(st_cast, do_s, dv, policy=T.GemmWarpPolicy.FullRow)
                T.gemm(v_s, do_s, dpt, transpose_B=True, clear_accum=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_N, block_M):
                    dpt_cast[i, j] = st[i, j] * (dpt[i, j] - dl[j]) * scale
                T.gemm(dpt_cast, q_s, dk, policy=T.GemmWarpPolicy.FullRow)
                T.copy(dpt_cast, ds_s)
                T.gemm(ds_s, k_s, dq, transpose_A=True, clear_accum=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_M, D):
                    T.atomic_add(dQacc[bz, by, qt * block_M + i, j], dq[i, j])
            T.copy(dk, dK[bz, by, bx * block_N:(bx + 1) * block_N, :])
            T.copy(dv, dV[bz, by, bx * block_N:(bx + 1) * block_N, :])
    return bwd


# ---- embeddings and rotary ----------------------------------------------------------------
@tilecute.jit(out_idx=[])
def embedding_bwd_sorted_runs(T_tokens=300, D=96, chunk=32, threads=96):
    """Embedding backward over tokens sorted by id (ids sorted, Perm the token each sorted
    position came from): a block takes ``chunk`` sorted positions, a thread a column; it
    sums dY rows while the id repeats (``T.alloc_var`` running sum) and flushes a run with
    one ``T.atomic_add`` when the id changes or the chunk ends (a run split between two
    blocks meets in the atomics).  The padding id 0 is skipped."""

    @T.prim_func
    def ebwd(SortedIds: T.Tensor((T_tokens,), "int32"), Perm: T.Tensor((T_tokens,), "int32"),
             dY: T.Tensor((T_tokens, D), "float32"), dW: T.Tensor((64, D), "float32")):
        with T.Kernel(T.ceildiv(T_tokens, chunk), threads=threads) as bx:
            c = T.get_thread_binding()
            acc = T.alloc_var("float32")
            cur = T.alloc_var("int32")
            acc = 0.0
            cur = SortedIds[bx * chunk]
            for t in T.serial(chunk):
                p = bx * chunk + t
                if p < T_tokens:
                    idx = SortedIds[p]
                    if idx != cur:
                        if cur != 0:
                            T.atomic_add(dW[cur, c], acc)
                        acc = 0.0
                        cur = idx
                    acc += dY[Perm[p], c]
            if cur != 0:
                T.atomic_add(dW[cur, c], acc)
    return ebwd


@tilecute.jit(out_idx=[3])
def rope_bwd_neox_position_ids(Bt=2, S=50, H=4, D=64, rot=32, block_S=16, threads=128):
    """Rotary embedding backward (NeoX halves, rotary on the first ``rot`` dims only): with
    c = cos[pos, i], s = sin[pos, i] gathered by position id, dx1 = dy1 c + dy2 s,
    dx2 = dy2 c - dy1 s, the dims past ``rot`` copied through.  BSHD bfloat16 gradients,
    S = 50 ragged."""
    half = rot // 2

    @T.prim_func
    def rbwd(dY: T.Tensor((Bt, S, H, D), "bfloat16"), Cos: T.Tensor((128, half), "float32"),
             Pos: T.Tensor((Bt, S), "int32"), dX: T.Tensor((Bt, S, H, D), "bfloat16"), Sin: T.Tensor((128, half), "float32")):
        with T.Kernel(T.ceildiv(S, block_S), H, Bt, threads=threads) as (bx, by, bz):
            g = T.alloc_shared((block_S, D), "bfloat16")
            o = T.alloc_fragment((block_S, D), "bfloat16")
            T.copy(dY[bz, bx * block_S:(bx + 1) * block_S, by, :], g)
            for i, j in T.Parallel(block_S, D):
                s = T.min(bx * block_S + i, S - 1)
                pos = Pos[bz, s]
                if j < half:
                    o[i, j] = g[i, j] * Cos[pos, j] + g[i, j + half] * Sin[pos, j]
                elif j < rot:
                    o[i, j] = g[i, j] * Cos[pos, j - half] - g[i, j - half] * Sin[pos, j - half]
                else:
                    o[i, j] = g[i, j]
            T.copy(o, dX[bz, bx * block_S:(bx + 1) * block_S, by, :])
    return rbwd


# ---- linear layer backward ----------------------------------------------------------------
@tilecute.jit(out_idx=[2])
def linear_bwd_grad_input(M=200, N=256, K=192, block_M=64, block_K=64, block_N=64, threads=128):
    """dA = dC B^T for C = A B with B (K, N): the output tile (block_M, block_K) of dA is
    a sum over N of dC (block_M, block_N) times the B tile (block_K, block_N) read as it is
    stored and multiplied with ``transpose_B=True``; M = 200 ragged, 3 stages."""
    dtype, accum = "bfloat16", "float32"

    @T.prim_func
    def dgrad(dC: T.Tensor((M, N), dtype), Bw: T.Tensor((K, N), dtype), dA: T.Tensor((M, K), dtype)):
        with T.Kernel(T.ceildiv(K, block_K), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            dc_s = T.alloc_shared((block_M, block_N), dtype)
            b_s = T.alloc_shared((block_K, block_N), dtype)
            acc = T.alloc_fragment((block_M, block_K), accum)
            T.clear(acc)
            for n in T.Pipelined(T.ceildiv(N, block_N), num_stages=3):
                T.copy(dC[by * block_M, n * block_N], dc_s)
                T.copy(Bw[bx * block_K, n * block_N], b_s)
                T.gemm(dc_s, b_s, acc, transpose_B=True)
            T.copy(acc, dA[by * block_M, bx * block_K])
    return dgrad


@tilecute.jit(out_idx=[])
def linear_bwd_grad_weight_splitm(M=500, K=128, N=192, block_M=32, block_K=64, block_N=64, split=4, threads=128):
    """dB = A^T dC for C = A B: a block's (block_K, block_N) output tile sums over its
    share of M (split in ``split`` parts, blockIdx.z), the A tile (block_M, block_K)
    multiplied with ``transpose_A=True``; the partial products meet in float32 by a tile
    ``T.atomic_add`` into the caller's zeroed dB.  M = 500: the last part's last tile is
    ragged (rows past M read as zeros)."""
    dtype, accum = "float16", "float32"
    per = (M + split - 1) // split
    steps = (per + block_M - 1) // block_M

    @T.prim_func
    def wgrad(A: T.Tensor((M, K), dtype), dC: T.Tensor((M, N), dtype), dB: T.Tensor((K, N), accum)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(K, block_K), split, threads=threads) as (bx, by, bz):
            a_s = T.alloc_shared((block_M, block_K), dtype)
            c_s = T.alloc_shared((block_M, block_N), dtype)
            acc = T.alloc_fragment((block_K, block_N), accum)
            T.clear(acc)
            for s in T.Pipelined(steps, num_stages=2):
                m0 = bz * per + s * block_M
                for i, j in T.Parallel(block_M, block_K):
                    a_s[i, j] = T.if_then_else(s * block_M + i < per and m0 + i < M, A[m0 + i, by * block_K + j], 0)
                for i, j in T.Parallel(block_M, block_N):
                    c_s[i, j] = T.if_then_else(s * block_M + i < per and m0 + i < M, dC[m0 + i, bx * block_N + j], 0)
                T.gemm(a_s, c_s, acc, transpose_A=True)
            T.atomic_add(dB[by * block_K, bx * block_N], acc)
    return wgrad


# ---- optimizer steps -----------------------------------------------------------------------
@tilecute.jit(out_idx=[])
def adamw_step_master_weights(block=256, threads=256):
    """AdamW over flat tensors of a run-time length N (``T.dynamic``): float32 master
    weights, moments m and v updated in place from a bfloat16 gradient, a bfloat16 copy
    of the new weights written for the forward; lr, betas, eps, weight decay and the step
    count are scalar arguments (the bias corrections 1 - beta^step by ``T.pow`` in the
    kernel).  Decoupled decay: p -= lr * wd * p before the Adam update."""
    N = T.dynamic("N")

    @T.prim_func
    def adamw(P: T.Tensor((N,), "float32"), G: T.Tensor((N,), "bfloat16"), Mom: T.Tensor((N,), "float32"),
              Var: T.Tensor((N,), "float32"), Pbf: T.Tensor((N,), "bfloat16"), lr: T.float32, beta1: T.float32,
              beta2: T.float32, eps: T.float32, wd: T.float32, step: T.int32):
        with T.Kernel(T.ceildiv(N, block), threads=threads) as bx:
            bc1 = 1 - T.pow(beta1, T.cast(step, "float32"))
            bc2 = 1 - T.pow(beta2, T.cast(step, "float32"))
            for i in T.Parallel(block):
                k = bx * block + i
                if k < N:
                    g = T.cast(G[k], "float32")
                    m = beta1 * Mom[k] + (1 - beta1) * g
                    v = beta2 * Var[k] + (1 - beta2) * g * g
                    Mom[k] = m
                    Var[k] = v
                    p = P[k] * (1 - lr * wd)
                    p = p - lr * (m / bc1) / (T.sqrt(v / bc2) + eps)
                    P[k] = p
                    Pbf[k] = T.cast(p, "bfloat16")
    return adamw


@tilecute.jit(out_idx=[])
def sgd_nesterov_tiles(N=3000, block=512, lr=0.05, momentum=0.9, wd=1e-4, threads=128):
    """SGD with Nesterov momentum and L2 weight decay, through shared tiles: g' = g + wd p,
    buf = momentum buf + g', p -= lr (g' + momentum buf).  The tile loads and stores are
    ``T.copy``s between globals and fragments; N = 3000 leaves a ragged last tile."""

    @T.prim_func
    def sgd(P: T.Tensor((N,), "float32"), G: T.Tensor((N,), "float16"), Buf: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=threads) as bx:
            p = T.alloc_fragment((block,), "float32")
            g = T.alloc_fragment((block,), "float32")
            b = T.alloc_fragment((block,), "float32")
            T.copy(P[bx * block:(bx + 1) * block], p)
            T.copy(G[bx * block:(bx + 1) * block], g)
            T.copy(Buf[bx * block:(bx + 1) * block], b)
            for i in T.Parallel(block):
                g[i] = g[i] + wd * p[i]
                b[i] = momentum * b[i] + g[i]
                p[i] = p[i] - lr * (g[i] + momentum * b[i])
            T.copy(b, Buf[bx * block:(bx + 1) * block])
            T.copy(p, P[bx * block:(bx + 1) * block])
    return sgd


@tilecute.jit(out_idx=[])
def clip_grad_global_norm(N=5000, block=1024, max_norm=1.0, threads=256):
    """Gradient clipping by the global L2 norm, two kernels in one ``prim_func``: the first
    squares and sums a tile (``T.reduce_sum`` of a 1-D fragment to a scalar-shaped
    fragment) and adds it into Norm2[0] by ``T.atomic_add``; the second reads the total
    and scales every element by min(1, max_norm / (norm + 1e-6)).  Norm2 is passed zeroed;
    N = 5000 ragged."""

    @T.prim_func
    def clip(G: T.Tensor((N,), "float32"), Norm2: T.Tensor((1,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=threads) as bx:
            g = T.alloc_fragment((block,), "float32")
            tot = T.alloc_fragment((1,), "float32")
            T.copy(G[bx * block:(bx + 1) * block], g)
            for i in T.Parallel(block):
                g[i] = g[i] * g[i]
            T.reduce_sum(g, tot, dim=0)
            if T.get_thread_binding() == 0:
                T.atomic_add(Norm2[0], tot[0])
        with T.Kernel(T.ceildiv(N, block), threads=threads) as bx2:
            coef = T.min(max_norm / (T.sqrt(Norm2[0]) + 1e-6), 1.0)
            for i in T.Parallel(block):
                k = bx2 * block + i
                if k < N:
                    G[k] = G[k] * coef
    return clip


# ---- dropout ---------------------------------------------------------------------------------
@T.macro
def _keep(seed, idx, p):
    """A counter-based draw: a murmur-style mix of (seed, idx) to 24 uniform bits."""
    h = T.cast(idx, "uint32") * T.uint32(0x9E3779B1) ^ T.cast(seed, "uint32")
    h = h ^ (h >> T.uint32(16))
    h = h * T.uint32(0x85EBCA6B)
    h = h ^ (h >> T.uint32(13))
    h = h * T.uint32(0xC2B2AE35)
    h = h ^ (h >> T.uint32(16))
    u = T.cast(h >> T.uint32(8), "float32") * (1.0 / 16777216.0)
    return u >= p


@tilecute.jit(out_idx=[1])
def dropout_hash_fwd(M=100, N=192, p=0.25, block_M=16, block_N=64, threads=128):
    """Dropout forward: keep with probability 1 - p by a counter-based hash of (seed, flat
    index) in a ``T.macro`` returning the predicate, kept values scaled by 1 / (1 - p);
    the seed is a scalar argument; M = 100 ragged."""

    @T.prim_func
    def fwd(X: T.Tensor((M, N), "float16"), Y: T.Tensor((M, N), "float16"), seed: T.int32):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            x = T.alloc_fragment((block_M, block_N), "float16")
            T.copy(X[by * block_M, bx * block_N], x)
            for i, j in T.Parallel(block_M, block_N):
                idx = (by * block_M + i) * N + bx * block_N + j
                x[i, j] = T.if_then_else(_keep(seed, idx, p), x[i, j] * (1.0 / (1.0 - p)), 0)
            T.copy(x, Y[by * block_M, bx * block_N])
    return fwd


@tilecute.jit(out_idx=[1])
def dropout_hash_bwd(M=100, N=192, p=0.25, block=256, threads=256):
    """Dropout backward regenerating the forward's mask from the same hash (no stored
    mask): dX = dY * keep / (1 - p), a flat 1-D walk over M * N elements."""

    @T.prim_func
    def bwd(dY: T.Tensor((M, N), "float16"), dX: T.Tensor((M, N), "float16"), seed: T.int32):
        with T.Kernel(T.ceildiv(M * N, block), threads=threads) as bx:
            for t in T.Parallel(block):
                idx = bx * block + t
                if idx < M * N:
                    r = idx // N
                    c = idx % N
                    dX[r, c] = T.if_then_else(_keep(seed, idx, p), dY[r, c] * T.float16(1.0 / (1.0 - p)),
                                              T.float16(0))
    return bwd


# ---- mixed precision -----------------------------------------------------------------------
@tilecute.jit(out_idx=[])
def amp_unscale_and_check(N=4000, block=512, threads=128):
    """Loss-scale unscaling: grads *= 1 / scale (the scale read from a one-element tensor),
    and FoundInf[0] = 1 when any unscaled value is NaN or infinite (``T.isnan`` /
    ``T.isinf``), raised by ``T.atomic_max`` so that every block may report."""

    @T.prim_func
    def unscale(G: T.Tensor((N,), "float32"), Scale: T.Tensor((1,), "float32"), FoundInf: T.Tensor((1,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=threads) as bx:
            g = T.alloc_fragment((block,), "float32")
            bad = T.alloc_fragment((block,), "float32")
            flag = T.alloc_fragment((1,), "float32")
            inv = 1.0 / Scale[0]
            T.copy(G[bx * block:(bx + 1) * block], g)
            for i in T.Parallel(block):
                g[i] = g[i] * inv
                bad[i] = T.if_then_else(T.isnan(g[i]) or T.isinf(g[i]), 1.0, 0.0)
            T.reduce_max(bad, flag, dim=0)
            T.copy(g, G[bx * block:(bx + 1) * block])
            if flag[0] > 0:
                T.atomic_max(FoundInf[0], flag[0])
    return unscale


@tilecute.jit(out_idx=[])
def amp_update_scale(growth_interval=3, growth=2.0, backoff=0.5):
    """The loss-scale update after a step, one thread: with an overflow the scale backs
    off and the growth tracker resets; otherwise the tracker counts up and the scale grows
    after ``growth_interval`` clean steps (torch's _amp_update_scale_)."""

    @T.prim_func
    def update(Scale: T.Tensor((1,), "float32"), Tracker: T.Tensor((1,), "int32"), FoundInf: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=32) as _:
            tx = T.get_thread_binding()
            if tx == 0:
                if FoundInf[0] > 0:
                    Scale[0] = Scale[0] * backoff
                    Tracker[0] = 0
                else:
                    n = Tracker[0] + 1
                    if n == growth_interval:
                        Scale[0] = Scale[0] * growth
                        Tracker[0] = 0
                    else:
                        Tracker[0] = n
    return update


# ---- losses and other backward passes ------------------------------------------------------
@tilecute.jit(out_idx=[2])
def bce_logits_fwd_bwd_mean(N=3000, block=256, pos_weight=2.0, threads=128):
    """BCE-with-logits with a positive-class weight, mean reduction: loss_i = (1 - y) x +
    (1 + (w - 1) y) (log1p(exp(-|x|)) + max(-x, 0)), summed into Loss[0] by ``T.atomic_add``
    of each block's ``T.reduce_sum`` / N by thread 0 (a statement outside ``T.Parallel`` runs in
    every thread, in TileLang as here); dX = (sigmoid(x) (1 + (w - 1) y) - w y) / N."""

    @T.prim_func
    def bce(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32"), dX: T.Tensor((N,), "float32"),
            Loss: T.Tensor((1,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=threads) as bx:
            l = T.alloc_fragment((block,), "float32")
            s = T.alloc_fragment((1,), "float32")
            for i in T.Parallel(block):
                k = bx * block + i
                x = T.if_then_else(k < N, X[k], 0.0)
                y = T.if_then_else(k < N, Y[k], 0.0)
                lw = 1 + (pos_weight - 1) * y
                sp = T.log1p(T.exp(-T.abs(x))) + T.max(-x, 0.0)
                l[i] = T.if_then_else(k < N, (1 - y) * x + lw * sp, 0.0)
                if k < N:
                    dX[k] = (T.sigmoid(x) * lw - pos_weight * y) / N
            T.reduce_sum(l, s, dim=0)
            if T.get_thread_binding() == 0:
                T.atomic_add(Loss[0], s[0] / N)
    return bce


@tilecute.jit(out_idx=[3, 4, 5])
def batchnorm_bwd_column_tiles(R=300, C=96, block_R=64, block_C=32, eps=1e-5, threads=128):
    """Batch-norm (training) backward over (R, C) activations, a block a column tile: a
    first pipelined sweep over row tiles recomputes nothing but sums dy and dy * xhat per
    column (``T.reduce_sum(dim=0, clear=False)``), a second sweep writes dX = gamma rstd / R
    (R dy - sum dy - xhat sum dy xhat); dGamma and dBeta are the column sums.  Mean and
    rstd per column come from the forward; R = 300 ragged."""
    dtype, accum = "float32", "float32"

    @T.prim_func
    def bn(X: T.Tensor((R, C), dtype), dY: T.Tensor((R, C), dtype), Stat: T.Tensor((2, C), accum),
           dX: T.Tensor((R, C), dtype), dGamma: T.Tensor((C,), accum), dBeta: T.Tensor((C,), accum),
           Gamma: T.Tensor((C,), accum)):
        with T.Kernel(T.ceildiv(C, block_C), threads=threads) as bx:
            xs = T.alloc_shared((block_R, block_C), dtype)
            ds = T.alloc_shared((block_R, block_C), dtype)
            xh = T.alloc_fragment((block_R, block_C), accum)
            dy = T.alloc_fragment((block_R, block_C), accum)
            mean = T.alloc_fragment((block_C,), accum)
            rstd = T.alloc_fragment((block_C,), accum)
            sdy = T.alloc_fragment((block_C,), accum)
            sdx = T.alloc_fragment((block_C,), accum)
            gm = T.alloc_fragment((block_C,), accum)
            T.copy(Stat[0, bx * block_C], mean)
            T.copy(Stat[1, bx * block_C], rstd)
            T.copy(Gamma[bx * block_C], gm)
            T.clear(sdy)
            T.clear(sdx)
            for r in T.Pipelined(T.ceildiv(R, block_R), num_stages=2):
                T.copy(X[r * block_R, bx * block_C], xs)
                T.copy(dY[r * block_R, bx * block_C], ds)
                for i, j in T.Parallel(block_R, block_C):
                    dy[i, j] = ds[i, j]
                    xh[i, j] = T.if_then_else(r * block_R + i < R, (xs[i, j] - mean[j]) * rstd[j] * ds[i, j], 0.0)
                T.reduce_sum(dy, sdy, dim=0, clear=False)
                T.reduce_sum(xh, sdx, dim=0, clear=False)
            for r in T.Pipelined(T.ceildiv(R, block_R), num_stages=2):
                T.copy(X[r * block_R, bx * block_C], xs)
                T.copy(dY[r * block_R, bx * block_C], ds)
                for i, j in T.Parallel(block_R, block_C):
                    xh[i, j] = gm[j] * rstd[j] / R * (R * ds[i, j] - sdy[j]
                                                      - (xs[i, j] - mean[j]) * rstd[j] * sdx[j])
                T.copy(xh, dX[r * block_R, bx * block_C])
            T.copy(sdx, dGamma[bx * block_C])
            T.copy(sdy, dBeta[bx * block_C])
    return bn


@tilecute.jit(out_idx=[1])
def cumsum_bwd_reverse(M=40, N=256, block_M=8, threads=128):
    """The backward of a cumulative sum along rows is the reverse cumulative sum of the
    gradient: ``T.cumsum(frag, dim=1, reverse=True)`` on a fragment, float32, M = 40."""

    @T.prim_func
    def cbwd(dY: T.Tensor((M, N), "float32"), dX: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            s = T.alloc_shared((block_M, N), "float32")
            T.copy(dY[bx * block_M, 0], s)
            T.cumsum(s, dim=1, reverse=True)
            T.copy(s, dX[bx * block_M, 0])
    return cbwd


@tilecute.jit(out_idx=[])
def fp8_delayed_scaling_update(L=16, T_hist=16, fp8_max=448.0, margin=1, threads=128):
    """FP8 delayed scaling after a training step, one block for L tensors: each tensor's
    amax history (T_hist entries) is rolled by one (the newest amax into slot 0, through
    a shared copy so that no thread reads a slot another already moved), the scale becomes
    fp8_max / max(history) / 2^margin (kept when the maximum is 0 or not finite), and the
    inverse scale is written beside it."""

    @T.prim_func
    def upd(Hist: T.Tensor((L, T_hist), "float32"), Amax: T.Tensor((L,), "float32"), Scale: T.Tensor((L,), "float32"),
            ScaleInv: T.Tensor((L,), "float32")):
        with T.Kernel(1, threads=threads) as _:
            h = T.alloc_shared((L, T_hist), "float32")
            hf = T.alloc_fragment((L, T_hist), "float32")
            mx = T.alloc_fragment((L,), "float32")
            T.copy(Hist, h)
            for i, j in T.Parallel(L, T_hist):
                hf[i, j] = T.if_then_else(j == 0, Amax[i], h[i, T.max(j - 1, 0)])
            T.copy(hf, Hist)
            T.reduce_max(hf, mx, dim=1)
            for i in T.Parallel(L):
                s = fp8_max / mx[i] / (2.0 ** margin)
                ok = mx[i] > 0 and T.isfinite(mx[i])
                Scale[i] = T.if_then_else(ok, s, Scale[i])
                ScaleInv[i] = T.if_then_else(ok, 1.0 / s, ScaleInv[i])
    return upd


@tilecute.jit(out_idx=[3, 4])
def rmsnorm_bwd_dynamic_partials(N=256, block_M=16, threads=128):
    """RMSNorm backward over a run-time number of rows (``T.dynamic``), dW left as one
    partial row a block in a workspace declared ``T.Tensor((T.ceildiv(M, block_M), N))``
    (TVM's integer ceildiv in a shape: the launcher allocates and checks it from M), the
    caller summing the partials (a second stage)."""
    M = T.dynamic("M")
    dtype, accum = "float16", "float32"

    @T.prim_func
    def bwd(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), accum), dY: T.Tensor((M, N), dtype),
            dX: T.Tensor((M, N), dtype), dWPart: T.Tensor((T.ceildiv(M, block_M), N), accum)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, N), accum)
            dy = T.alloc_fragment((block_M, N), accum)
            t = T.alloc_fragment((block_M, N), accum)
            ss = T.alloc_fragment((block_M,), accum)
            c = T.alloc_fragment((block_M,), accum)
            w = T.alloc_fragment((N,), accum)
            pw = T.alloc_fragment((N,), accum)
            T.copy(X[bx * block_M, 0], x)
            T.copy(dY[bx * block_M, 0], dy)
            T.copy(W, w)
            for i, j in T.Parallel(block_M, N):
                t[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(t, ss, dim=1)
            for i in T.Parallel(block_M):
                ss[i] = T.rsqrt(ss[i] / N + 1e-6)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] * ss[i]
                t[i, j] = dy[i, j] * w[j] * x[i, j]
            T.reduce_sum(t, c, dim=1)
            for i, j in T.Parallel(block_M, N):
                t[i, j] = dy[i, j] * x[i, j]
            T.reduce_sum(t, pw, dim=0)
            T.copy(pw, dWPart[bx, :])
            for i, j in T.Parallel(block_M, N):
                t[i, j] = (dy[i, j] * w[j] - x[i, j] * c[i] / N) * ss[i]
            T.copy(t, dX[bx * block_M, 0])
    return bwd


@tilecute.jit(out_idx=[1])
def logsumexp_vocab_clear_false(M=8, V=1000, block_V=256, threads=128):
    """The forward half of a chunked cross-entropy: the row log-sum-exp over vocabulary
    tiles with the running maximum kept by ``T.reduce_max(x, m, dim=1, clear=False)`` (the
    tile's maximum combined with m's), the running sum rescaled by exp(m_prev - m); V = 1000
    in tiles of 256 (the last tile -inf past V); the LSE is what the backward reuses."""

    @T.prim_func
    def lse(X: T.Tensor((M, V), "float32"), L: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=threads) as _:
            x = T.alloc_fragment((M, block_V), "float32")
            m = T.alloc_fragment((M,), "float32")
            mp = T.alloc_fragment((M,), "float32")
            s = T.alloc_fragment((M,), "float32")
            ts = T.alloc_fragment((M,), "float32")
            T.fill(m, -T.infinity("float32"))
            T.clear(s)
            for t in T.Pipelined(T.ceildiv(V, block_V), num_stages=2):
                T.copy(X[0, t * block_V], x)
                for i, j in T.Parallel(M, block_V):
                    x[i, j] = T.if_then_else(t * block_V + j < V, x[i, j], -T.infinity("float32"))
                T.copy(m, mp)
                T.reduce_max(x, m, dim=1, clear=False)
                for i, j in T.Parallel(M, block_V):
                    x[i, j] = T.exp(x[i, j] - m[i])
                T.reduce_sum(x, ts, dim=1)
                for i in T.Parallel(M):
                    s[i] = s[i] * T.exp(mp[i] - m[i]) + ts[i]
            for i in T.Parallel(M):
                L[i] = m[i] + T.log(s[i])
    return lse


@tilecute.jit(out_idx=[3])
def rope_interleaved_bwd_pairs(S=64, D=64, block_S=16, threads=128):
    """Rotary backward, interleaved pairs (GPT-J style): a ``T.Parallel(block_S, D // 2)``
    over the pairs writes o[i, 2j] = g[i, 2j] c + g[i, 2j + 1] s and o[i, 2j + 1] = g[i, 2j + 1] c -
    g[i, 2j] s on fragments indexed with a stride of 2."""

    @T.prim_func
    def rbwd(dY: T.Tensor((S, D), "bfloat16"), Cos: T.Tensor((S, D // 2), "float32"),
             Sin: T.Tensor((S, D // 2), "float32"), dX: T.Tensor((S, D), "bfloat16")):
        with T.Kernel(S // block_S, threads=threads) as bx:
            g = T.alloc_fragment((block_S, D), "float32")
            o = T.alloc_fragment((block_S, D), "bfloat16")
            T.copy(dY[bx * block_S, 0], g)
            for i, j in T.Parallel(block_S, D // 2):
                c = Cos[bx * block_S + i, j]
                s = Sin[bx * block_S + i, j]
                o[i, 2 * j] = g[i, 2 * j] * c + g[i, 2 * j + 1] * s
                o[i, 2 * j + 1] = g[i, 2 * j + 1] * c - g[i, 2 * j] * s
            T.copy(o, dX[bx * block_S, 0])
    return rbwd
