"""Programs in TileLang's idioms (written for tilecute, not taken from TileLang) in the style
of the chunked linear-attention kernels of TileLang's ``examples/kda`` (FLA's Kimi Delta
Attention): a block per token reducing shared tiles into per-head sums and writing them
into columns of a shared tile (``T.copy(frag, tile[:, j % C])``, a conditional second
copy), a column sum of a shared tile into a shared vector (``T.reduce_sum(..., dim=0)``,
then ``clear=False``), a state carried through a reversed ``T.Pipelined`` loop in a
fragment and re-read from shared memory by the next step's GEMM, and sub-chunk loops
``T.Pipelined(i)`` / ``T.Pipelined(i + 1, n)`` whose bounds come from block indices (zero
trips included) with float32 GEMMs, one of them ``transpose_A``.
``tests/test_kda_programs.py`` builds each to an sm_90a cubin on the CPU and, on a GPU,
compares it with torch written to TileLang's meaning.

Each factory returns a ``@T.prim_func``."""

import tilecute.language as T


def token_pair_sums(B=1, S=96, H=4, D=64, C=32, SC=16, heads_per_block=2, threads=64, stages=2):
    """For token t of a chunk of C tokens cut into sub-chunks of SC (t's sub-chunk starts
    at ts), and each j in [ts, t]: kj = K[j] * exp2(G[t] - G[j]) (per head and dim),
    Aq[t, h, j % C] = sum_d Q[t] * kj and, for j < t, Ak[t, h, j - ts] =
    sum_d (K[t] * beta[t]) * kj; other entries 0.  ``K[t] * beta[t]`` multiplies two
    bfloat16 values, so (TileLang's meaning) the product is a bfloat16 before it is
    stored into the float32 fragment."""
    hb = heads_per_block

    @T.prim_func
    def pair_sums(Q: T.Tensor((B, S, H, D), T.bfloat16), K: T.Tensor((B, S, H, D), T.bfloat16),
                  G: T.Tensor((B, S, H, D), T.float32), Beta: T.Tensor((B, S, H), T.bfloat16),
                  Aq: T.Tensor((B, S, H, C), T.float32), Ak: T.Tensor((B, S, H, SC), T.float32)):
        with T.Kernel(B * S, T.ceildiv(H, hb), threads=threads) as (bt, bh):
            b = bt // S
            t = bt % S
            ts = t // C * C + (t % C) // SC * SC
            q_t = T.alloc_shared((hb, D), T.bfloat16)
            k_t = T.alloc_shared((hb, D), T.bfloat16)
            g_t = T.alloc_shared((hb, D), T.float32)
            beta_t = T.alloc_shared((hb,), T.bfloat16)
            k_j = T.alloc_shared((hb, D), T.bfloat16)
            g_j = T.alloc_shared((hb, D), T.float32)
            prod_q = T.alloc_shared((hb, D), T.float32)
            prod_k = T.alloc_shared((hb, D), T.float32)
            row_q = T.alloc_shared((hb, C), T.float32)
            row_k = T.alloc_shared((hb, SC), T.float32)
            qf = T.alloc_fragment((hb, D), T.float32)
            kbf = T.alloc_fragment((hb, D), T.float32)
            kjf = T.alloc_fragment((hb, D), T.float32)
            sum_q = T.alloc_fragment((hb,), T.float32)
            sum_k = T.alloc_fragment((hb,), T.float32)

            T.copy(Q[b, t, bh * hb:(bh + 1) * hb, :], q_t)
            T.copy(K[b, t, bh * hb:(bh + 1) * hb, :], k_t)
            T.copy(G[b, t, bh * hb:(bh + 1) * hb, :], g_t)
            for i in T.Parallel(hb):
                beta_t[i] = Beta[b, t, bh * hb + i]
            for i, d in T.Parallel(hb, D):
                kbf[i, d] = k_t[i, d] * beta_t[i]
                qf[i, d] = q_t[i, d]
            T.clear(row_q)
            T.clear(row_k)
            for s in T.Pipelined(t + 1 - ts, num_stages=stages):
                j = ts + s
                T.copy(K[b, j, bh * hb:(bh + 1) * hb, :], k_j)
                T.copy(G[b, j, bh * hb:(bh + 1) * hb, :], g_j)
                for i, d in T.Parallel(hb, D):
                    kjf[i, d] = k_j[i, d] * T.exp2(g_t[i, d] - g_j[i, d])
                    prod_q[i, d] = qf[i, d] * kjf[i, d]
                    prod_k[i, d] = kbf[i, d] * kjf[i, d]
                T.reduce_sum(prod_q, sum_q, dim=-1, clear=True)
                T.reduce_sum(prod_k, sum_k, dim=-1, clear=True)
                T.copy(sum_q, row_q[:, j % C])
                if j < t:
                    T.copy(sum_k, row_k[:, s])
            T.copy(row_q, Aq[b, t, bh * hb:(bh + 1) * hb, :])
            T.copy(row_k, Ak[b, t, bh * hb:(bh + 1) * hb, :])

    return pair_sums


def gated_column_sums(S=200, D=64, bs=64, threads=128):
    """Per tile of ``bs`` rows (the last one partial): col[d] = sum_i X[i, d] * Y[i, d]
    (a shared-tile column sum into a shared vector), then col[d] += sum_i Y[i, d]^2
    (``clear=False``), then col[d] += exp2(G[last, d]) with ``last`` the tile's last row
    inside S; Out[i, d] = X[i, d] - Y[i, d], plus col[d] on the row ``last``."""

    @T.prim_func
    def colsums(X: T.Tensor((S, D), T.float32), Y: T.Tensor((S, D), T.float32),
                G: T.Tensor((S, D), T.float32), Out: T.Tensor((S, D), T.float32)):
        with T.Kernel(T.ceildiv(S, bs), threads=threads) as bx:
            last = T.min(S, (bx + 1) * bs) - 1
            xs = T.alloc_shared((bs, D), T.float32)
            ys = T.alloc_shared((bs, D), T.float32)
            prod = T.alloc_shared((bs, D), T.float32)
            sq = T.alloc_shared((bs, D), T.float32)
            col = T.alloc_shared((D,), T.float32)
            gate = T.alloc_fragment((D,), T.float32)
            outs = T.alloc_shared((bs, D), T.float32)
            T.copy(X[bx * bs:(bx + 1) * bs, :], xs)
            T.copy(Y[bx * bs:(bx + 1) * bs, :], ys)
            for d in T.Parallel(D):
                gate[d] = T.exp2(G[last, d])
            for i, d in T.Parallel(bs, D):
                prod[i, d] = xs[i, d] * ys[i, d]
                sq[i, d] = ys[i, d] * ys[i, d]
            T.reduce_sum(prod, col, dim=0, clear=True)
            T.reduce_sum(sq, col, dim=0, clear=False)
            for d in T.Parallel(D):
                col[d] += gate[d]
            for i, d in T.Parallel(bs, D):
                outs[i, d] = xs[i, d] - ys[i, d] + T.if_then_else(last == bx * bs + i, col[d], 0.0)
            T.copy(outs, Out[bx * bs:(bx + 1) * bs, :])

    return colsums


def reverse_state_recurrence(S=256, DK=64, DV=64, bs=64, bv=32, scale=0.5, threads=128, stages=2):
    """A (DK, DV) state walked over the chunks of ``bs`` rows from the last to the first
    (r = NT - 1 - i): Hs[r] = state (bfloat16, as the GEMM reads it); V2[r] = K_r @ Hs[r];
    state = state * exp2(G[last row of r])[:, None] + scale * Q_r^T @ dO_r.  Hfin = the
    state after chunk 0.  The state lives in a fragment, goes through shared memory each
    step (stored, then read by the step's GEMM), and the loop's loads are pipelined."""
    NT = S // bs

    @T.prim_func
    def walk(Q: T.Tensor((S, DK), T.bfloat16), K: T.Tensor((S, DK), T.bfloat16),
             dO: T.Tensor((S, DV), T.bfloat16), G: T.Tensor((S, DK), T.float32),
             Hlast: T.Tensor((DK, DV), T.bfloat16), Hs: T.Tensor((NT, DK, DV), T.bfloat16),
             V2: T.Tensor((S, DV), T.float32), Hfin: T.Tensor((DK, DV), T.float32)):
        with T.Kernel(T.ceildiv(DV, bv), threads=threads) as bx:
            h_s = T.alloc_shared((DK, bv), T.bfloat16)
            h = T.alloc_fragment((DK, bv), T.float32)
            upd = T.alloc_fragment((DK, bv), T.float32)
            v = T.alloc_fragment((bs, bv), T.float32)
            k_s = T.alloc_shared((bs, DK), T.bfloat16)
            q_s = T.alloc_shared((bs, DK), T.bfloat16)
            do_s = T.alloc_shared((bs, bv), T.bfloat16)
            g_last = T.alloc_shared((DK,), T.float32)
            T.copy(Hlast[:, bx * bv:(bx + 1) * bv], h_s)
            T.copy(h_s, h)
            for i in T.Pipelined(NT, num_stages=stages):
                r = NT - 1 - i
                T.copy(h, h_s)
                T.copy(h_s, Hs[r, :, bx * bv:(bx + 1) * bv])
                T.copy(K[r * bs:(r + 1) * bs, :], k_s)
                T.gemm(k_s, h_s, v, clear_accum=True)
                T.copy(v, V2[r * bs:(r + 1) * bs, bx * bv:(bx + 1) * bv])
                T.copy(Q[r * bs:(r + 1) * bs, :], q_s)
                T.copy(dO[r * bs:(r + 1) * bs, bx * bv:(bx + 1) * bv], do_s)
                T.copy(G[(r + 1) * bs - 1, :], g_last)
                for k, c in T.Parallel(DK, bv):
                    h[k, c] *= T.exp2(g_last[k])
                T.gemm(q_s, do_s, upd, transpose_A=True, clear_accum=True)
                for k, c in T.Parallel(DK, bv):
                    h[k, c] += upd[k, c] * scale
            T.copy(h, Hfin[:, bx * bv:(bx + 1) * bv])

    return walk


def subchunk_neighbour_sums(S=112, D=32, C=64, SC=16, threads=128, stages=2):
    """Per chunk ``it`` of C rows and sub-chunk ``ii`` of SC rows (rows R_ii): Out[R_ii] =
    sum over jj < ii of A[R_ii, cols_jj] @ X[R_jj] (``T.Pipelined(ii)``: no trip for ii = 0)
    + sum over ii < jj < n of A[R_jj, cols_ii]^T @ X[R_jj] (``T.Pipelined(ii + 1, n)``,
    n = the chunk's sub-chunks inside S), all float32; rows past S read as 0."""
    NC = C // SC

    @T.prim_func
    def neighbours(A: T.Tensor((S, C), T.float32), X: T.Tensor((S, D), T.float32),
                   Out: T.Tensor((S, D), T.float32)):
        with T.Kernel(NC, T.ceildiv(S, C), threads=threads) as (ii, it):
            row0 = it * C + ii * SC
            acc = T.alloc_fragment((SC, D), T.float32)
            tmp = T.alloc_fragment((SC, D), T.float32)
            a_s = T.alloc_shared((SC, SC), T.float32)
            x_s = T.alloc_shared((SC, D), T.float32)
            a2_s = T.alloc_shared((SC, SC), T.float32)
            x2_s = T.alloc_shared((SC, D), T.float32)
            T.clear(acc)
            for jj in T.Pipelined(ii, num_stages=stages):
                T.copy(A[row0:row0 + SC, jj * SC:(jj + 1) * SC], a_s)
                T.copy(X[it * C + jj * SC:it * C + (jj + 1) * SC, :], x_s)
                T.gemm(a_s, x_s, acc, clear_accum=False)
            n = T.min(NC, T.ceildiv(S - it * C, SC))
            if ii < n - 1:
                for jj in T.Pipelined(ii + 1, n, num_stages=stages):
                    T.copy(A[it * C + jj * SC:it * C + (jj + 1) * SC, ii * SC:(ii + 1) * SC], a2_s)
                    T.copy(X[it * C + jj * SC:it * C + (jj + 1) * SC, :], x2_s)
                    T.gemm(a2_s, x2_s, tmp, transpose_A=True, clear_accum=True)
                    for i, d in T.Parallel(SC, D):
                        acc[i, d] += tmp[i, d]
            T.copy(acc, Out[row0:row0 + SC, :])

    return neighbours


def late_gradient_tiles(S=128, H=2, D=128, R=16, bd=64, threads=128):
    """A block per R-row tile and bd-column block of each head, shaped like the end of a KDA
    intra-chunk backward kernel: q, k, g tiles and beta copied in first; a token loop over
    the tile's rows j adds ``A[r, j] * k[j] * exp2(g[r] - g[j])`` into ``acc[r]`` for rows
    r >= j; ``qa = q * acc``; ``acc *= beta``; a second token loop (rows r <= j) adds
    ``A[j, r] * q[j] * exp2(g[j] - g[r])`` into ``acc_t``; only then, with g's and beta's
    tiles dead, are the dk and dg tiles copied in (one barrier for both), and
    ``Dk = acc + dk + acc_t``, ``Dg = qa + (acc - acc_t) * k + dg``.  The shared-memory plan
    may place dg's tile on the bytes g's and beta's held: Dg must still read dg."""

    @T.prim_func
    def late_tiles(Q: T.Tensor((S, H, D), T.float32), K: T.Tensor((S, H, D), T.float32),
                   G: T.Tensor((S, H, D), T.float32), Beta: T.Tensor((S, H), T.float32),
                   A: T.Tensor((S, H, R), T.float32), dK: T.Tensor((S, H, D), T.float32),
                   dG: T.Tensor((S, H, D), T.float32), Dk: T.Tensor((S, H, D), T.float32),
                   Dg: T.Tensor((S, H, D), T.float32)):
        with T.Kernel(D // bd, S // R, H, threads=threads) as (bk, bt, h):
            r0 = bt * R
            q_s = T.alloc_shared((R, bd), T.float32)
            k_s = T.alloc_shared((R, bd), T.float32)
            beta_s = T.alloc_shared((R,), T.float32)
            g_s = T.alloc_shared((R, bd), T.float32)
            acc = T.alloc_fragment((R, bd), T.float32)
            acc_t = T.alloc_fragment((R, bd), T.float32)
            qa = T.alloc_fragment((R, bd), T.float32)
            kj = T.alloc_shared((bd,), T.float32)
            gj = T.alloc_shared((bd,), T.float32)
            a_col = T.alloc_shared((R,), T.float32)
            T.copy(Q[r0:r0 + R, h, bk * bd:(bk + 1) * bd], q_s)
            T.copy(K[r0:r0 + R, h, bk * bd:(bk + 1) * bd], k_s)
            T.copy(G[r0:r0 + R, h, bk * bd:(bk + 1) * bd], g_s)
            T.copy(Beta[r0:r0 + R, h], beta_s)
            T.clear(acc)
            T.clear(acc_t)
            for j in T.Pipelined(R, num_stages=0):
                T.copy(K[r0 + j, h, bk * bd:(bk + 1) * bd], kj)
                T.copy(G[r0 + j, h, bk * bd:(bk + 1) * bd], gj)
                T.copy(A[r0:r0 + R, h, j], a_col)
                for r, d in T.Parallel(R, bd):
                    acc[r, d] += T.if_then_else(r >= j, a_col[r] * kj[d] * T.exp2(g_s[r, d] - gj[d]), 0.0)
            for r, d in T.Parallel(R, bd):
                qa[r, d] = q_s[r, d] * acc[r, d]
            for r, d in T.Parallel(R, bd):
                acc[r, d] = acc[r, d] * beta_s[r]
            qj = T.alloc_shared((bd,), T.float32)
            gj2 = T.alloc_shared((bd,), T.float32)
            a_row = T.alloc_shared((R,), T.float32)
            for j in T.Pipelined(R, num_stages=0):
                T.copy(Q[r0 + j, h, bk * bd:(bk + 1) * bd], qj)
                T.copy(G[r0 + j, h, bk * bd:(bk + 1) * bd], gj2)
                T.copy(A[r0 + j, h, 0:R], a_row)
                for r, d in T.Parallel(R, bd):
                    acc_t[r, d] += T.if_then_else(r <= j, a_row[r] * qj[d] * T.exp2(gj2[d] - g_s[r, d]), 0.0)
            dk_s = T.alloc_shared((R, bd), T.float32)
            dg_s = T.alloc_shared((R, bd), T.float32)
            T.copy(dK[r0:r0 + R, h, bk * bd:(bk + 1) * bd], dk_s)
            T.copy(dG[r0:r0 + R, h, bk * bd:(bk + 1) * bd], dg_s)
            for r, d in T.Parallel(R, bd):
                qa[r, d] = qa[r, d] + (acc[r, d] - acc_t[r, d]) * k_s[r, d] + dg_s[r, d]
            for r, d in T.Parallel(R, bd):
                acc[r, d] += dk_s[r, d] + acc_t[r, d]
            T.copy(acc, Dk[r0:r0 + R, h, bk * bd:(bk + 1) * bd])
            T.copy(qa, Dg[r0:r0 + R, h, bk * bd:(bk + 1) * bd])

    return late_tiles
