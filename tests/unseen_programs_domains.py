"""Programs in TileLang's idioms from the domains TileLang's users write kernels in (not
taken from TileLang): chunked linear attention and gated delta-rule chunk kernels, MoE
(grouped GEMM over expert offsets, token gather/scatter, top-k gating, block alignment),
block-sparse attention, paged and split-KV decoding, implicit-GEMM convolution,
dequantizing GEMMs (uint4 with zero points, fp4 e2m1), fp8 GEMM with block scales,
normalization backward passes, cross-entropy, rotary embedding, sampling helpers and
radix counting.  ``tests/test_unseen_programs_domains.py`` builds each to an sm_90a cubin
on the CPU and, on a GPU, compares it with torch.

Each factory returns a ``@T.prim_func``."""

import tilecute.language as T

LOG2E = 1.44269504


# ---- chunked linear attention ----------------------------------------------------------------
def chunk_cumsum_gates(B=2, S=256, H=4, chunk=64, reverse=False):
    """Chunk-local cumulative sum of per-head log gates: a (chunk, H) tile of G in shared
    memory, T.cumsum along dim 0 (all heads of the chunk at once), written back as float32."""
    @T.prim_func
    def cumsum_gates(G: T.Tensor((B, S, H), T.float16), Gc: T.Tensor((B, S, H), T.float32)):
        with T.Kernel(T.ceildiv(S, chunk), B, threads=128) as (c, b):
            g_s = T.alloc_shared((chunk, H), T.float32)
            T.copy(G[b, c * chunk:(c + 1) * chunk, :], g_s)
            T.cumsum(g_s, dim=0, reverse=reverse)
            T.copy(g_s, Gc[b, c * chunk:(c + 1) * chunk, :])
    return cumsum_gates


def chunk_gla_fwd(B=2, S=256, H=2, DK=64, DV=64, BT=64, BV=64, threads=128):
    """Gated linear attention, chunked: per (value block, batch*head) the state h (DK, BV)
    lives in a float32 fragment across the chunk loop.  Each chunk: the gates' in-chunk
    cumsum (a 1-D shared T.cumsum), o = exp(g_i) q h + the causal intra-chunk scores
    q k^T decayed by exp(g_i - g_j) times v, then h = exp(g_last) h + (exp(g_last - g_j) k)^T v."""
    NT = S // BT

    @T.prim_func
    def gla_fwd(Q: T.Tensor((B, S, H, DK), T.float16), K: T.Tensor((B, S, H, DK), T.float16),
                V: T.Tensor((B, S, H, DV), T.float16), G: T.Tensor((B, S, H), T.float32),
                O: T.Tensor((B, S, H, DV), T.float16)):
        with T.Kernel(T.ceildiv(DV, BV), B * H, threads=threads) as (bv, bbh):
            bb, bh = bbh // H, bbh % H
            q_s = T.alloc_shared((BT, DK), T.float16)
            k_s = T.alloc_shared((BT, DK), T.float16)
            kd_s = T.alloc_shared((BT, DK), T.float16)
            v_s = T.alloc_shared((BT, BV), T.float16)
            a_s = T.alloc_shared((BT, BT), T.float16)
            h_s = T.alloc_shared((DK, BV), T.float16)
            g_s = T.alloc_shared((BT,), T.float32)
            h = T.alloc_fragment((DK, BV), T.float32)
            a = T.alloc_fragment((BT, BT), T.float32)
            o = T.alloc_fragment((BT, BV), T.float32)
            T.clear(h)
            for t in T.serial(NT):
                for i in T.Parallel(BT):
                    g_s[i] = G[bb, t * BT + i, bh]
                T.cumsum(g_s, dim=0)
                T.copy(Q[bb, t * BT:(t + 1) * BT, bh, :], q_s)
                T.copy(K[bb, t * BT:(t + 1) * BT, bh, :], k_s)
                T.copy(V[bb, t * BT:(t + 1) * BT, bh, bv * BV:(bv + 1) * BV], v_s)
                T.copy(h, h_s)
                T.gemm(q_s, h_s, o, clear_accum=True)
                for i, j in T.Parallel(BT, BV):
                    o[i, j] = o[i, j] * T.exp(g_s[i])
                T.gemm(q_s, k_s, a, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(BT, BT):
                    a_s[i, j] = T.if_then_else(i >= j, a[i, j] * T.exp(g_s[i] - g_s[j]), 0)
                T.gemm(a_s, v_s, o)
                T.copy(o, O[bb, t * BT:(t + 1) * BT, bh, bv * BV:(bv + 1) * BV])
                g_last = g_s[BT - 1]
                for i, d in T.Parallel(BT, DK):
                    kd_s[i, d] = k_s[i, d] * T.exp(g_last - g_s[i])
                for d, j in T.Parallel(DK, BV):
                    h[d, j] *= T.exp(g_last)
                T.gemm(kd_s, v_s, h, transpose_A=True)
    return gla_fwd


def chunk_delta_h(B=1, S=256, H=2, DK=64, DV=128, BT=64, BV=64, threads=128):
    """The gated delta rule's state pass: per chunk the state h (DK, BV) is stored (fp16),
    v_new = u - w h is formed (written out too), and the state moves on as
    h = exp(g_last) h + k^T (exp(g_last - g) v_new).  G holds gates already cumsummed in
    their chunk; the state stays in one float32 fragment for the whole sequence."""
    NT = S // BT

    @T.prim_func
    def delta_h(K: T.Tensor((B, S, H, DK), T.float16), W: T.Tensor((B, S, H, DK), T.float16),
                U: T.Tensor((B, S, H, DV), T.float16), G: T.Tensor((B, S, H), T.float32),
                Hs: T.Tensor((B, NT, H, DK, DV), T.float16),
                Vn: T.Tensor((B, S, H, DV), T.float16)):
        with T.Kernel(T.ceildiv(DV, BV), B * H, threads=threads) as (bv, bbh):
            bb, bh = bbh // H, bbh % H
            h = T.alloc_fragment((DK, BV), T.float32)
            h_s = T.alloc_shared((DK, BV), T.float16)
            w_s = T.alloc_shared((BT, DK), T.float16)
            k_s = T.alloc_shared((BT, DK), T.float16)
            u_s = T.alloc_shared((BT, BV), T.float16)
            vn = T.alloc_fragment((BT, BV), T.float32)
            vn_s = T.alloc_shared((BT, BV), T.float16)
            g_s = T.alloc_shared((BT,), T.float32)
            T.clear(h)
            for t in T.Pipelined(NT, num_stages=1):
                T.copy(h, h_s)
                T.copy(h_s, Hs[bb, t, bh, :, bv * BV:(bv + 1) * BV])
                T.copy(W[bb, t * BT:(t + 1) * BT, bh, :], w_s)
                T.copy(U[bb, t * BT:(t + 1) * BT, bh, bv * BV:(bv + 1) * BV], u_s)
                T.gemm(w_s, h_s, vn, clear_accum=True)
                for i, j in T.Parallel(BT, BV):
                    vn[i, j] = u_s[i, j] - vn[i, j]
                T.copy(vn, Vn[bb, t * BT:(t + 1) * BT, bh, bv * BV:(bv + 1) * BV])
                T.copy(G[bb, t * BT:(t + 1) * BT, bh], g_s)
                g_last = G[bb, (t + 1) * BT - 1, bh]
                for i, j in T.Parallel(BT, BV):
                    vn_s[i, j] = vn[i, j] * T.exp(g_last - g_s[i])
                for d, j in T.Parallel(DK, BV):
                    h[d, j] = h[d, j] * T.exp(g_last)
                T.copy(K[bb, t * BT:(t + 1) * BT, bh, :], k_s)
                T.gemm(k_s, vn_s, h, transpose_A=True)
    return delta_h


def chunk_kkt_beta(B=2, S=256, H=2, DK=64, BT=64):
    """The delta rule's strictly lower A = beta_i (k_i . k_j) exp(g_i - g_j), i > j, per
    chunk: one GEMM, the row scales beta and gates read from (BT,) shared tiles."""
    @T.prim_func
    def kkt(K: T.Tensor((B, S, H, DK), T.bfloat16), Beta: T.Tensor((B, S, H), T.float32),
            G: T.Tensor((B, S, H), T.float32), A: T.Tensor((B, S, H, BT), T.float32)):
        with T.Kernel(T.ceildiv(S, BT), B * H, threads=128) as (c, bbh):
            bb, bh = bbh // H, bbh % H
            k_s = T.alloc_shared((BT, DK), T.bfloat16)
            beta_s = T.alloc_shared((BT,), T.float32)
            g_s = T.alloc_shared((BT,), T.float32)
            a = T.alloc_fragment((BT, BT), T.float32)
            T.copy(K[bb, c * BT:(c + 1) * BT, bh, :], k_s)
            T.copy(Beta[bb, c * BT:(c + 1) * BT, bh], beta_s)
            T.copy(G[bb, c * BT:(c + 1) * BT, bh], g_s)
            T.gemm(k_s, k_s, a, transpose_B=True, clear_accum=True)
            for i, j in T.Parallel(BT, BT):
                a[i, j] = T.if_then_else(i > j, a[i, j] * beta_s[i] * T.exp(g_s[i] - g_s[j]), 0)
            T.copy(a, A[bb, c * BT:(c + 1) * BT, bh, :])
    return kkt



def wy_bwd_dk_dbeta(B=1, S=256, H=2, DK=128, BT=64, block_DK=64):
    """The WY representation's backward for dk and dbeta, per chunk: dkb = A^T dw (a
    T.gemm per DK block, A read transposed from shared), dk = dkb * beta * exp(g); dbeta's
    row sums come from a fragment computed from the accumulator (dkb * k * exp(g)) by
    reduce_sum(dim=1, clear=False) across the DK blocks."""
    @T.prim_func
    def wy_bwd(K: T.Tensor((B, S, H, DK), T.bfloat16), A: T.Tensor((B, S, H, BT), T.bfloat16),
               dW: T.Tensor((B, S, H, DK), T.bfloat16), Beta: T.Tensor((B, S, H), T.float32),
               G: T.Tensor((B, S, H), T.float32), dK: T.Tensor((B, S, H, DK), T.float32),
               dBeta: T.Tensor((B, S, H), T.float32)):
        with T.Kernel(T.ceildiv(S, BT), B * H, threads=128) as (c, bbh):
            bb, bh = bbh // H, bbh % H
            a_s = T.alloc_shared((BT, BT), T.bfloat16)
            k_s = T.alloc_shared((BT, block_DK), T.bfloat16)
            dw_s = T.alloc_shared((BT, block_DK), T.bfloat16)
            beta_s = T.alloc_shared((BT,), T.float32)
            eg_s = T.alloc_shared((BT,), T.float32)
            dkb = T.alloc_fragment((BT, block_DK), T.float32)
            dk_l = T.alloc_fragment((BT, block_DK), T.float32)
            tmp = T.alloc_fragment((BT, block_DK), T.float32)
            dbeta = T.alloc_fragment((BT,), T.float32)
            T.clear(dbeta)
            T.copy(A[bb, c * BT:(c + 1) * BT, bh, :], a_s)
            for i in T.Parallel(BT):
                beta_s[i] = Beta[bb, c * BT + i, bh]
                eg_s[i] = T.exp(G[bb, c * BT + i, bh])
            for kb in T.Pipelined(T.ceildiv(DK, block_DK), num_stages=2):
                T.copy(K[bb, c * BT:(c + 1) * BT, bh, kb * block_DK:(kb + 1) * block_DK], k_s)
                T.copy(dW[bb, c * BT:(c + 1) * BT, bh, kb * block_DK:(kb + 1) * block_DK], dw_s)
                T.gemm(a_s, dw_s, dkb, transpose_A=True, clear_accum=True)
                for i, j in T.Parallel(BT, block_DK):
                    dk_l[i, j] = dkb[i, j] * beta_s[i] * eg_s[i]
                    tmp[i, j] = dkb[i, j] * k_s[i, j] * eg_s[i]
                T.reduce_sum(tmp, dbeta, dim=1, clear=False)
                T.copy(dk_l, dK[bb, c * BT:(c + 1) * BT, bh, kb * block_DK:(kb + 1) * block_DK])
            for i in T.Parallel(BT):
                dBeta[bb, c * BT + i, bh] = dbeta[i]
    return wy_bwd

# ---- mixture of experts ----------------------------------------------------------------------
def moe_grouped_gemm(E=4, rows=600, K=256, N=256, block_M=64, block_N=64, block_K=64,
                     stages=2):
    """Grouped GEMM over experts whose row ranges come from a tensor (offsets[e] ..
    offsets[e + 1] of the token-sorted A): each block finds its expert and tile by walking
    the offsets (T.alloc_var's in a serial loop), so the tile's origin and its row bound
    are data; W is (E, N, K) (transpose_B); blocks past the last tile do nothing.  The grid
    has an upper bound of tiles, ceil(rows / block_M) + E."""
    max_tiles = (rows + block_M - 1) // block_M + E

    @T.prim_func
    def grouped(A: T.Tensor((rows, K), T.float16), W: T.Tensor((E, N, K), T.float16),
                offsets: T.Tensor((E + 1,), T.int32), C: T.Tensor((rows, N), T.float16)):
        with T.Kernel(max_tiles, T.ceildiv(N, block_N), threads=128) as (bm, bn):
            a_s = T.alloc_shared((block_M, block_K), T.float16)
            w_s = T.alloc_shared((block_N, block_K), T.float16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            expert = T.alloc_var(T.int32)
            m_start = T.alloc_var(T.int32)
            m_end = T.alloc_var(T.int32)
            seen = T.alloc_var(T.int32)
            expert = -1
            seen = 0
            m_start = 0
            m_end = 0
            for e in T.serial(E):
                lo = offsets[e]
                hi = offsets[e + 1]
                tiles = T.ceildiv(hi - lo, block_M)
                if expert < 0 and bm < seen + tiles:
                    expert = e
                    m_start = lo + (bm - seen) * block_M
                    m_end = hi
                seen += tiles
            if expert >= 0:
                T.clear(acc)
                for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=stages):
                    T.copy(A[m_start:m_start + block_M, k * block_K:(k + 1) * block_K], a_s)
                    T.copy(W[expert, bn * block_N:(bn + 1) * block_N, k * block_K:(k + 1) * block_K],
                           w_s)
                    T.gemm(a_s, w_s, acc, transpose_B=True)
                for i, j in T.Parallel(block_M, block_N):
                    if m_start + i < m_end:
                        C[m_start + i, bn * block_N + j] = acc[i, j]
    return grouped


def moe_permute_gather(tokens=300, topk=2, D=512, block_R=16):
    """Token dispatch: row r of the expert-sorted buffer is token src[r] // topk of X; the
    indices are staged in a fragment, the rows gathered by a T.Parallel over (rows, D)."""
    R = tokens * topk

    @T.prim_func
    def permute(X: T.Tensor((tokens, D), T.bfloat16), src: T.Tensor((R,), T.int32),
                Xp: T.Tensor((R, D), T.bfloat16)):
        with T.Kernel(T.ceildiv(R, block_R), threads=128) as br:
            idx = T.alloc_fragment((block_R,), T.int32)
            for i in T.Parallel(block_R):
                idx[i] = T.if_then_else(br * block_R + i < R, src[br * block_R + i], 0)
            for i, d in T.Parallel(block_R, D):
                if br * block_R + i < R:
                    Xp[br * block_R + i, d] = X[idx[i] // topk, d]
    return permute


def moe_scatter_combine(tokens=300, topk=2, D=256, block_R=32):
    """Token combine by scattering: each expert-output row r adds weight[r] * Y[r, :] into
    row tok[r] of the float32 output with T.atomic_add (the topk rows of a token meet there)."""
    R = tokens * topk

    @T.prim_func
    def combine(Y: T.Tensor((R, D), T.float16), tok: T.Tensor((R,), T.int32),
                weight: T.Tensor((R,), T.float32), Out: T.Tensor((tokens, D), T.float32)):
        with T.Kernel(T.ceildiv(R, block_R), threads=256) as br:
            for i, d in T.Parallel(block_R, D):
                r = br * block_R + i
                if r < R:
                    T.atomic_add(Out[tok[r], d], weight[r] * Y[r, d])
    return combine


def moe_gather_combine(tokens=256, topk=4, D=256, block_T=8):
    """Token combine by gathering: out[t] = sum_k w[t, k] * Y[pos[t, k]], the k loop serial
    over a float32 fragment, the positions and weights read per (token, k)."""
    @T.prim_func
    def combine_g(Y: T.Tensor((tokens * topk, D), T.bfloat16),
                  pos: T.Tensor((tokens, topk), T.int32),
                  w: T.Tensor((tokens, topk), T.float32),
                  Out: T.Tensor((tokens, D), T.bfloat16)):
        with T.Kernel(T.ceildiv(tokens, block_T), threads=128) as bt:
            acc = T.alloc_fragment((block_T, D), T.float32)
            T.clear(acc)
            for k in T.serial(topk):
                for i, d in T.Parallel(block_T, D):
                    t = bt * block_T + i
                    acc[i, d] += w[t, k] * Y[pos[t, k], d]
            T.copy(acc, Out[bt * block_T:(bt + 1) * block_T, :])
    return combine_g


def topk_gating_softmax(tokens=256, E=64, topk=4, block_T=16, renorm=True):
    """Router: softmax over E expert logits per token (row max, exp, row sum in fragments),
    then top-k by repeated selection: the row max, its lowest index (a reduce_min over
    T.if_then_else(p == max, j, E)), masked to -1 before the next round; weights
    renormalized over the chosen k."""
    @T.prim_func
    def gating(logits: T.Tensor((tokens, E), T.float32), weights: T.Tensor((tokens, topk), T.float32),
               ids: T.Tensor((tokens, topk), T.int32)):
        with T.Kernel(T.ceildiv(tokens, block_T), threads=128) as bt:
            p = T.alloc_fragment((block_T, E), T.float32)
            cand = T.alloc_fragment((block_T, E), T.int32)
            mx = T.alloc_fragment((block_T,), T.float32)
            sm = T.alloc_fragment((block_T,), T.float32)
            arg = T.alloc_fragment((block_T,), T.int32)
            wsum = T.alloc_fragment((block_T,), T.float32)
            w_l = T.alloc_fragment((block_T, topk), T.float32)
            id_l = T.alloc_fragment((block_T, topk), T.int32)
            T.copy(logits[bt * block_T:(bt + 1) * block_T, :], p)
            T.reduce_max(p, mx, dim=1)
            for i, j in T.Parallel(block_T, E):
                p[i, j] = T.exp2((p[i, j] - mx[i]) * LOG2E)
            T.reduce_sum(p, sm, dim=1)
            for i, j in T.Parallel(block_T, E):
                p[i, j] = p[i, j] / sm[i]
            T.clear(wsum)
            for k in T.serial(topk):
                T.reduce_max(p, mx, dim=1)
                for i, j in T.Parallel(block_T, E):
                    cand[i, j] = T.if_then_else(p[i, j] == mx[i], j, E)
                T.reduce_min(cand, arg, dim=1)
                for i in T.Parallel(block_T):
                    w_l[i, k] = mx[i]
                    id_l[i, k] = arg[i]
                    wsum[i] += mx[i]
                for i, j in T.Parallel(block_T, E):
                    if j == arg[i]:
                        p[i, j] = -1.0
            if renorm:
                for i, k in T.Parallel(block_T, topk):
                    w_l[i, k] = w_l[i, k] / wsum[i]
            T.copy(w_l, weights[bt * block_T:(bt + 1) * block_T, :])
            T.copy(id_l, ids[bt * block_T:(bt + 1) * block_T, :])
    return gating


def moe_align_block_size(n=1024, E=16, block=64, threads=256):
    """MoE block alignment in one block: per-expert counts in a shared histogram
    (T.atomic_add), each count padded to a multiple of `block` and scanned (T.cumsum on a
    shared tile) into padded offsets, then each entry takes its slot from a shared cursor
    (T.atomic_add(..., return_prev=True)); slots in the padding hold n."""
    max_padded = n + E * (block - 1)

    @T.prim_func
    def align(topk_ids: T.Tensor((n,), T.int32), sorted_ids: T.Tensor((max_padded,), T.int32),
              offsets: T.Tensor((E + 1,), T.int32)):
        with T.Kernel(1, threads=threads) as _:
            tx = T.get_thread_binding()
            counts = T.alloc_shared((E,), T.int32)
            padded = T.alloc_shared((E,), T.int32)
            cursor = T.alloc_shared((E,), T.int32)
            T.clear(counts)
            for i in T.serial(tx, max_padded, threads):
                sorted_ids[i] = n
            for i in T.serial(tx, n, threads):
                T.atomic_add(counts[topk_ids[i]], 1)
            for e in T.Parallel(E):
                padded[e] = T.ceildiv(counts[e], block) * block
            T.cumsum(padded, dim=0)
            for e in T.Parallel(E):
                cursor[e] = padded[e] - T.ceildiv(counts[e], block) * block
                offsets[e + 1] = padded[e]
            if tx == 0:
                offsets[0] = 0
            for i in T.serial(tx, n, threads):
                slot = T.atomic_add(cursor[topk_ids[i]], 1, return_prev=True)
                sorted_ids[slot] = i
    return align


# ---- sparse, paged and split-KV attention ----------------------------------------------------

def block_sparse_attn(batch=1, heads=2, seq=512, dim=64, block_M=64, block_N=64, stages=2):
    """Flash attention that visits a key block only where a (B, H, q-blocks, k-blocks) uint8
    block mask is nonzero: an `if` on a mask element inside T.Pipelined, a per-row running
    max and sum; rows whose blocks are all skipped end at 0 (l guarded)."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    NQ, NK = seq // block_M, seq // block_N

    @T.prim_func
    def bs_attn(Q: T.Tensor((batch, heads, seq, dim), T.float16),
                K: T.Tensor((batch, heads, seq, dim), T.float16),
                V: T.Tensor((batch, heads, seq, dim), T.float16),
                mask: T.Tensor((batch, heads, NQ, NK), T.uint8),
                O: T.Tensor((batch, heads, seq, dim), T.float16)):
        with T.Kernel(NQ, heads, batch, threads=128) as (bx, by, bz):
            q_s = T.alloc_shared((block_M, dim), T.float16)
            k_s = T.alloc_shared((block_N, dim), T.float16)
            v_s = T.alloc_shared((block_N, dim), T.float16)
            s = T.alloc_fragment((block_M, block_N), T.float32)
            p = T.alloc_fragment((block_M, block_N), T.float16)
            o = T.alloc_fragment((block_M, dim), T.float32)
            m = T.alloc_fragment((block_M,), T.float32)
            m_prev = T.alloc_fragment((block_M,), T.float32)
            alpha = T.alloc_fragment((block_M,), T.float32)
            l = T.alloc_fragment((block_M,), T.float32)
            l_step = T.alloc_fragment((block_M,), T.float32)
            T.copy(Q[bz, by, bx * block_M:(bx + 1) * block_M, :], q_s)
            T.fill(o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(T.float32))
            for kb in T.Pipelined(NK, num_stages=stages):
                if mask[bz, by, bx, kb] != 0:
                    T.copy(K[bz, by, kb * block_N:(kb + 1) * block_N, :], k_s)
                    T.clear(s)
                    T.gemm(q_s, k_s, s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                    T.copy(m, m_prev)
                    T.reduce_max(s, m, dim=1, clear=False)
                    for i in T.Parallel(block_M):
                        alpha[i] = T.exp2((m_prev[i] - m[i]) * scale)
                    for i, j in T.Parallel(block_M, block_N):
                        s[i, j] = T.exp2((s[i, j] - m[i]) * scale)
                    T.reduce_sum(s, l_step, dim=1)
                    for i in T.Parallel(block_M):
                        l[i] = l[i] * alpha[i] + l_step[i]
                    for i, d in T.Parallel(block_M, dim):
                        o[i, d] *= alpha[i]
                    T.copy(s, p)
                    T.copy(V[bz, by, kb * block_N:(kb + 1) * block_N, :], v_s)
                    T.gemm(p, v_s, o, policy=T.GemmWarpPolicy.FullRow)
            for i, d in T.Parallel(block_M, dim):
                o[i, d] = T.if_then_else(l[i] > 0, o[i, d] / l[i], 0)
            T.copy(o, O[bz, by, bx * block_M:(bx + 1) * block_M, :])
    return bs_attn


def block_index_attn(batch=1, heads=2, seq=512, dim=64, block_M=64, block_N=64, max_blocks=4):
    """Attention over the key blocks a (B, H, q-blocks, max_blocks) int32 index tensor
    lists, the first counts[b, h, q] of them: the loop's extent is read from a tensor and
    each step's tile origin from another (block-sparse attention's index form, as in
    NSA/MInference)."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    NQ = seq // block_M

    @T.prim_func
    def idx_attn(Q: T.Tensor((batch, heads, seq, dim), T.bfloat16),
                 K: T.Tensor((batch, heads, seq, dim), T.bfloat16),
                 V: T.Tensor((batch, heads, seq, dim), T.bfloat16),
                 block_idx: T.Tensor((batch, heads, NQ, max_blocks), T.int32),
                 counts: T.Tensor((batch, heads, NQ), T.int32),
                 O: T.Tensor((batch, heads, seq, dim), T.bfloat16)):
        with T.Kernel(NQ, heads, batch, threads=128) as (bx, by, bz):
            q_s = T.alloc_shared((block_M, dim), T.bfloat16)
            k_s = T.alloc_shared((block_N, dim), T.bfloat16)
            v_s = T.alloc_shared((block_N, dim), T.bfloat16)
            s = T.alloc_fragment((block_M, block_N), T.float32)
            p = T.alloc_fragment((block_M, block_N), T.bfloat16)
            o = T.alloc_fragment((block_M, dim), T.float32)
            m = T.alloc_fragment((block_M,), T.float32)
            m_prev = T.alloc_fragment((block_M,), T.float32)
            alpha = T.alloc_fragment((block_M,), T.float32)
            l = T.alloc_fragment((block_M,), T.float32)
            l_step = T.alloc_fragment((block_M,), T.float32)
            T.copy(Q[bz, by, bx * block_M:(bx + 1) * block_M, :], q_s)
            T.fill(o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(T.float32))
            n_blocks = counts[bz, by, bx]
            for t in T.Pipelined(n_blocks, num_stages=2):
                kb = block_idx[bz, by, bx, t]
                T.copy(K[bz, by, kb * block_N:(kb + 1) * block_N, :], k_s)
                T.gemm(q_s, k_s, s, transpose_B=True, clear_accum=True,
                       policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_M, block_N):
                    s[i, j] = T.if_then_else(bx * block_M + i >= kb * block_N + j, s[i, j],
                                             -T.infinity(T.float32))
                T.copy(m, m_prev)
                T.reduce_max(s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    alpha[i] = T.if_then_else(m[i] == -T.infinity(T.float32), 1.0,
                                              T.exp2((m_prev[i] - m[i]) * scale))
                for i, j in T.Parallel(block_M, block_N):
                    s[i, j] = T.if_then_else(m[i] == -T.infinity(T.float32), 0.0,
                                             T.exp2((s[i, j] - m[i]) * scale))
                T.reduce_sum(s, l_step, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * alpha[i] + l_step[i]
                for i, d in T.Parallel(block_M, dim):
                    o[i, d] *= alpha[i]
                T.copy(s, p)
                T.copy(V[bz, by, kb * block_N:(kb + 1) * block_N, :], v_s)
                T.gemm(p, v_s, o, policy=T.GemmWarpPolicy.FullRow)
            for i, d in T.Parallel(block_M, dim):
                o[i, d] = T.if_then_else(l[i] > 0, o[i, d] / l[i], 0)
            T.copy(o, O[bz, by, bx * block_M:(bx + 1) * block_M, :])
    return idx_attn


def paged_decode_gqa(batch=3, heads=16, kv_heads=2, dim=128, page=64, num_pages=40,
                     max_pages=8, block_H=16):
    """Decoding over a paged KV cache: one block per (sequence, KV head) whose rows are the
    group's query heads (padded to block_H for the MMA); the pages come from a block table
    and the loop's extent from the sequence's length (a tensor); the last page's keys past
    the length are masked."""
    group = heads // kv_heads
    scale = (1.0 / dim) ** 0.5 * LOG2E

    @T.prim_func
    def paged_decode(Q: T.Tensor((batch, heads, dim), T.float16),
                     Kc: T.Tensor((num_pages, page, kv_heads, dim), T.float16),
                     Vc: T.Tensor((num_pages, page, kv_heads, dim), T.float16),
                     table: T.Tensor((batch, max_pages), T.int32),
                     seqlens: T.Tensor((batch,), T.int32),
                     O: T.Tensor((batch, heads, dim), T.float16)):
        with T.Kernel(batch, kv_heads, threads=128) as (b, kvh):
            q_s = T.alloc_shared((block_H, dim), T.float16)
            k_s = T.alloc_shared((page, dim), T.float16)
            v_s = T.alloc_shared((page, dim), T.float16)
            s = T.alloc_fragment((block_H, page), T.float32)
            p = T.alloc_fragment((block_H, page), T.float16)
            o = T.alloc_fragment((block_H, dim), T.float32)
            m = T.alloc_fragment((block_H,), T.float32)
            m_prev = T.alloc_fragment((block_H,), T.float32)
            alpha = T.alloc_fragment((block_H,), T.float32)
            l = T.alloc_fragment((block_H,), T.float32)
            l_step = T.alloc_fragment((block_H,), T.float32)
            seqlen = seqlens[b]
            for i, d in T.Parallel(block_H, dim):
                q_s[i, d] = T.if_then_else(i < group, Q[b, kvh * group + i, d], T.float16(0))
            T.fill(o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(T.float32))
            for pi in T.Pipelined(T.ceildiv(seqlen, page), num_stages=2):
                pg = table[b, pi]
                T.copy(Kc[pg, :, kvh, :], k_s)
                T.gemm(q_s, k_s, s, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(block_H, page):
                    s[i, j] = T.if_then_else(pi * page + j < seqlen, s[i, j], -T.infinity(T.float32))
                T.copy(m, m_prev)
                T.reduce_max(s, m, dim=1, clear=False)
                for i in T.Parallel(block_H):
                    alpha[i] = T.exp2((m_prev[i] - m[i]) * scale)
                for i, j in T.Parallel(block_H, page):
                    s[i, j] = T.exp2((s[i, j] - m[i]) * scale)
                T.reduce_sum(s, l_step, dim=1)
                for i in T.Parallel(block_H):
                    l[i] = l[i] * alpha[i] + l_step[i]
                for i, d in T.Parallel(block_H, dim):
                    o[i, d] *= alpha[i]
                T.copy(s, p)
                T.copy(Vc[pg, :, kvh, :], v_s)
                T.gemm(p, v_s, o)
            for i, d in T.Parallel(block_H, dim):
                if i < group:
                    O[b, kvh * group + i, d] = o[i, d] / l[i]
    return paged_decode


def split_kv_decode(batch=2, heads=16, kv_heads=2, seqlen=4096, dim=128, block_N=64,
                    block_H=16, num_split=4, threads=128):
    """Flash-decoding in one prim_func: kernel 1 (batch, KV heads, splits) attends the
    group's heads to its slice of the keys, the MMA's rows padded to block_H (the Q copy
    reads block_H heads from the group's first, past the last head for the last group, as
    TileLang's decoding kernels do), writing the valid rows' partial output
    (T.copy(o[:group, :], ...)) and base-2 LSE to T.alloc_global workspaces; kernel 2
    (heads, batch) combines the splits (the LSEs' max over a (splits, 128) fragment by
    reduce_max on dim 0, then weights exp2(lse - lse_all))."""
    group = heads // kv_heads
    scale = (1.0 / dim) ** 0.5 * LOG2E
    part = seqlen // num_split

    @T.prim_func
    def decode(Q: T.Tensor((batch, heads, dim), T.float16),
               K: T.Tensor((batch, seqlen, kv_heads, dim), T.float16),
               V: T.Tensor((batch, seqlen, kv_heads, dim), T.float16),
               O: T.Tensor((batch, heads, dim), T.float16)):
        lse_ws = T.alloc_global((batch, heads, num_split), T.float32)
        o_ws = T.alloc_global((batch, heads, num_split, dim), T.float32)
        with T.Kernel(batch, kv_heads, num_split, threads=threads) as (b, kvh, sp):
            q_s = T.alloc_shared((block_H, dim), T.float16)
            k_s = T.alloc_shared((block_N, dim), T.float16)
            v_s = T.alloc_shared((block_N, dim), T.float16)
            s = T.alloc_fragment((block_H, block_N), T.float32)
            p = T.alloc_fragment((block_H, block_N), T.float16)
            o = T.alloc_fragment((block_H, dim), T.float32)
            m = T.alloc_fragment((block_H,), T.float32)
            m_prev = T.alloc_fragment((block_H,), T.float32)
            alpha = T.alloc_fragment((block_H,), T.float32)
            l = T.alloc_fragment((block_H,), T.float32)
            l_step = T.alloc_fragment((block_H,), T.float32)
            T.copy(Q[b, kvh * group:kvh * group + block_H, :], q_s)
            T.fill(o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(T.float32))
            for k in T.Pipelined(part // block_N, num_stages=2):
                T.copy(K[b, sp * part + k * block_N:sp * part + (k + 1) * block_N, kvh, :], k_s)
                T.gemm(q_s, k_s, s, transpose_B=True, clear_accum=True,
                       policy=T.GemmWarpPolicy.FullRow)
                T.copy(m, m_prev)
                T.reduce_max(s, m, dim=1, clear=False)
                for i in T.Parallel(block_H):
                    alpha[i] = T.exp2((m_prev[i] - m[i]) * scale)
                for i, j in T.Parallel(block_H, block_N):
                    s[i, j] = T.exp2((s[i, j] - m[i]) * scale)
                T.reduce_sum(s, l_step, dim=1)
                for i in T.Parallel(block_H):
                    l[i] = l[i] * alpha[i] + l_step[i]
                for i, d in T.Parallel(block_H, dim):
                    o[i, d] *= alpha[i]
                T.copy(s, p)
                T.copy(V[b, sp * part + k * block_N:sp * part + (k + 1) * block_N, kvh, :], v_s)
                T.gemm(p, v_s, o, policy=T.GemmWarpPolicy.FullRow)
            for i, d in T.Parallel(block_H, dim):
                o[i, d] /= l[i]
            for i in T.Parallel(block_H):
                if i < group:
                    lse_ws[b, kvh * group + i, sp] = T.log2(l[i]) + m[i] * scale
            T.copy(o[:group, :], o_ws[b, kvh * group:(kvh + 1) * group, sp, :])

        with T.Kernel(heads, batch, threads=128) as (h, b):
            lse = T.alloc_fragment((num_split, 128), T.float32)
            lse_max = T.alloc_fragment((128,), T.float32)
            lse_sum = T.alloc_fragment((128,), T.float32)
            acc = T.alloc_fragment((dim,), T.float32)
            T.clear(acc)
            T.clear(lse_sum)
            for k, j in T.Parallel(num_split, 128):
                lse[k, j] = lse_ws[b, h, k]
            T.reduce_max(lse, lse_max, dim=0)
            for k in T.serial(num_split):
                for j in T.Parallel(128):
                    lse_sum[j] += T.exp2(lse[k, j] - lse_max[j])
            for j in T.Parallel(128):
                lse_sum[j] = T.log2(lse_sum[j]) + lse_max[j]
            for k in T.serial(num_split):
                for d in T.Parallel(dim):
                    acc[d] += o_ws[b, h, k, d] * T.exp2(lse[k, d] - lse_sum[d])
            T.copy(acc, O[b, h, :])
    return decode


# ---- convolution as implicit GEMM ------------------------------------------------------------
def conv2d_im2col(N=2, H=30, W=30, C=64, F=128, KS=3, stride=2, dilation=2, pad=2,
                  block_M=64, block_N=128, block_K=64, stages=2):
    """NHWC convolution with stride, dilation and padding through T.im2col: each K step
    gathers a (pixels, KS*KS*C slice) tile of the image; the filter viewed as a
    (KS*KS*C, F) matrix with T.Tensor(..., W.data); output pixels past N*OH*OW skipped."""
    OH = (H + 2 * pad - dilation * (KS - 1) - 1) // stride + 1
    OW = (W + 2 * pad - dilation * (KS - 1) - 1) // stride + 1
    KT = KS * KS * C

    @T.prim_func
    def conv_im2col(X: T.Tensor((N, H, W, C), T.float16), Wt: T.Tensor((KS, KS, C, F), T.float16),
                    Y: T.Tensor((N, OH, OW, F), T.float16)):
        with T.Kernel(T.ceildiv(F, block_N), T.ceildiv(N * OH * OW, block_M), threads=128) as (bx, by):
            x_s = T.alloc_shared((block_M, block_K), T.float16)
            w_s = T.alloc_shared((block_K, block_N), T.float16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            w_flat = T.Tensor((KT, F), T.float16, Wt.data)
            y_flat = T.Tensor((N * OH * OW, F), T.float16, Y.data)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(KT, block_K), num_stages=stages):
                T.im2col(X, x_s, by, k, KS, stride, dilation, pad)
                T.copy(w_flat[k * block_K, bx * block_N], w_s)
                T.gemm(x_s, w_s, acc)
            for i, j in T.Parallel(block_M, block_N):
                if by * block_M + i < N * OH * OW:
                    y_flat[by * block_M + i, bx * block_N + j] = acc[i, j]
    return conv_im2col


def conv2d_rect_gather(N=2, H=20, W=33, C=32, F=64, KH=3, KW=5, sh=2, sw=1, dh=1, dw=2,
                       ph=1, pw=4, block_M=64, block_N=64, block_K=32):
    """A rectangular-kernel NHWC convolution (separate strides, dilations and pads per
    axis) whose image tile is gathered by a T.Parallel with T.if_then_else at the padding;
    the bias is added and the result cast in the epilogue."""
    OH = (H + 2 * ph - dh * (KH - 1) - 1) // sh + 1
    OW = (W + 2 * pw - dw * (KW - 1) - 1) // sw + 1
    KT = KH * KW * C
    P = N * OH * OW

    @T.prim_func
    def conv_rect(X: T.Tensor((N, H, W, C), T.bfloat16), Wt: T.Tensor((KT, F), T.bfloat16),
                  bias: T.Tensor((F,), T.float32), Y: T.Tensor((P, F), T.bfloat16)):
        with T.Kernel(T.ceildiv(F, block_N), T.ceildiv(P, block_M), threads=128) as (bx, by):
            x_s = T.alloc_shared((block_M, block_K), T.bfloat16)
            w_s = T.alloc_shared((block_K, block_N), T.bfloat16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(KT, block_K), num_stages=2):
                for i, j in T.Parallel(block_M, block_K):
                    pix = by * block_M + i
                    kk = k * block_K + j
                    n, r = pix // (OH * OW), pix % (OH * OW)
                    oh, ow = r // OW, r % OW
                    kh, kw, c = kk // (KW * C), kk // C % KW, kk % C
                    ih = oh * sh + kh * dh - ph
                    iw = ow * sw + kw * dw - pw
                    ok = (pix < P) & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
                    x_s[i, j] = T.if_then_else(ok, X[n, ih, iw, c], T.bfloat16(0))
                T.copy(Wt[k * block_K, bx * block_N], w_s)
                T.gemm(x_s, w_s, acc)
            for i, j in T.Parallel(block_M, block_N):
                acc[i, j] += bias[bx * block_N + j]
            T.copy(acc, Y[by * block_M, bx * block_N])
    return conv_rect


# ---- dequantizing and block-scaled GEMMs -----------------------------------------------------
def dequant_uint4_zp_gemm(M=256, N=256, K=512, block_M=64, block_N=128, block_K=64,
                          group=128, stages=2):
    """A W4A16 linear layer in nn.Linear's (N, K) weight layout: two uint4 per byte along K
    (low nibble first), an asymmetric group quantization ((q - zero) * scale, zero points
    packed two per byte too); the dequantized tile goes to shared memory through a
    fragment, then T.gemm(transpose_B=True)."""
    @T.prim_func
    def w4_zp(A: T.Tensor((M, K), T.float16), Bq: T.Tensor((N, K // 2), T.uint8),
              Zq: T.Tensor((N, K // group // 2), T.uint8),
              S: T.Tensor((N, K // group), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            a_s = T.alloc_shared((block_M, block_K), T.float16)
            bq_s = T.alloc_shared((block_N, block_K // 2), T.uint8)
            b_l = T.alloc_fragment((block_N, block_K), T.float16)
            b_s = T.alloc_shared((block_N, block_K), T.float16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(acc)
            for k in T.Pipelined(K // block_K, num_stages=stages):
                T.copy(A[by * block_M, k * block_K], a_s)
                T.copy(Bq[bx * block_N, k * block_K // 2], bq_s)
                for n, j in T.Parallel(block_N, block_K):
                    g = (k * block_K + j) // group
                    q = (bq_s[n, j // 2] >> (4 * (j % 2))) & 0xF
                    z = (Zq[bx * block_N + n, g // 2] >> (4 * (g % 2))) & 0xF
                    b_l[n, j] = (T.cast(q, T.float16) - T.cast(z, T.float16)) * S[bx * block_N + n, g]
                T.copy(b_l, b_s)
                T.gemm(a_s, b_s, acc, transpose_B=True)
            T.copy(acc, C[by * block_M, bx * block_N])
    return w4_zp


def _e2m1_to_bf16(byte, pos):
    """The fp4 e2m1 value in nibble `pos` of a uint8 as bfloat16 bits: sign, 2 exponent
    bits (bias 1), 1 mantissa bit; exponent 0 is the subnormal 0 / 0.5."""
    nib = (byte >> (pos * 4)) & T.uint8(0xF)
    sign = T.cast(nib >> 3, T.uint16)
    e = T.cast((nib >> 1) & T.uint8(3), T.uint16)
    mant = T.cast(nib & T.uint8(1), T.uint16)
    normal = (sign << 15) | ((e + 126) << 7) | (mant << 6)
    sub = (sign << 15) | T.if_then_else(mant == 1, T.uint16(126 << 7), T.uint16(0))
    return T.reinterpret(T.if_then_else(e == 0, sub, normal), T.bfloat16)


def dequant_fp4_mx_gemm(M=256, N=256, K=512, block_M=128, block_N=128, block_K=128,
                        stages=2):
    """An MXFP4 weight GEMM: e2m1 values two per byte along K (a plain Python helper builds
    the bfloat16 bits with shifts and T.reinterpret), one uint8 power-of-two exponent per
    32 K elements (value * 2^(e - 127)), applied by a T.macro that dequantizes a tile."""
    @T.macro
    def dequant_tile(bq_s, sc_s, b_s, b_l):
        for n, j in T.Parallel(block_N, block_K):
            v = T.cast(_e2m1_to_bf16(bq_s[n, j // 2], j % 2), T.float32)
            b_l[n, j] = v * T.exp2(T.cast(sc_s[n, j // 32], T.float32) - 127.0)
        T.copy(b_l, b_s)

    @T.prim_func
    def mxfp4(A: T.Tensor((M, K), T.bfloat16), Bq: T.Tensor((N, K // 2), T.uint8),
              Sc: T.Tensor((N, K // 32), T.uint8), C: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
            a_s = T.alloc_shared((block_M, block_K), T.bfloat16)
            bq_s = T.alloc_shared((block_N, block_K // 2), T.uint8)
            sc_s = T.alloc_shared((block_N, block_K // 32), T.uint8)
            b_l = T.alloc_fragment((block_N, block_K), T.bfloat16)
            b_s = T.alloc_shared((block_N, block_K), T.bfloat16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(acc)
            for k in T.Pipelined(K // block_K, num_stages=stages):
                T.copy(A[by * block_M, k * block_K], a_s)
                T.copy(Bq[bx * block_N, k * block_K // 2], bq_s)
                T.copy(Sc[bx * block_N, k * block_K // 32], sc_s)
                dequant_tile(bq_s, sc_s, b_s, b_l)
                T.gemm(a_s, b_s, acc, transpose_B=True)
            T.copy(acc, C[by * block_M, bx * block_N])
    return mxfp4


def fp8_blockscale_gemm(M=256, N=256, K=512, block_M=128, block_N=128, block_K=128):
    """DeepSeek-style fp8 GEMM: e4m3 A with a scale per (row, 128 of K), e4m3 B (N, K)
    with a scale per (128 of N, 128 of K); each K step's product goes to its own
    fragment (clear_accum) and is added scaled into the float32 total (the two-level
    accumulation), output bfloat16."""
    @T.prim_func
    def fp8_bs(A: T.Tensor((M, K), T.float8_e4m3), B: T.Tensor((N, K), T.float8_e4m3),
               As: T.Tensor((M, K // 128), T.float32), Bs: T.Tensor((N // 128, K // 128), T.float32),
               C: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            a_s = T.alloc_shared((block_M, block_K), T.float8_e4m3)
            b_s = T.alloc_shared((block_N, block_K), T.float8_e4m3)
            as_s = T.alloc_shared((block_M,), T.float32)
            step = T.alloc_fragment((block_M, block_N), T.float32)
            total = T.alloc_fragment((block_M, block_N), T.float32)
            c_s = T.alloc_shared((block_M, block_N), T.bfloat16)
            T.clear(total)
            for k in T.Pipelined(K // block_K, num_stages=2):
                T.copy(A[by * block_M, k * block_K], a_s)
                T.copy(B[bx * block_N, k * block_K], b_s)
                for i in T.Parallel(block_M):
                    as_s[i] = As[by * block_M + i, k]
                b_scale = Bs[bx * block_N // 128, k]
                T.gemm(a_s, b_s, step, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(block_M, block_N):
                    total[i, j] += step[i, j] * as_s[i] * b_scale
            T.copy(total, c_s)
            T.copy(c_s, C[by * block_M, bx * block_N])
    return fp8_bs


# ---- normalization backward, losses, embeddings ----------------------------------------------
def layernorm_bwd(M=256, N=512, block_M=8):
    """LayerNorm backward from the saved mean and rstd: per row xhat, g = dy * gamma, the
    row means of g and g * xhat (reduce_sum), dx = rstd (g - mean(g) - xhat mean(g xhat));
    dgamma and dbeta summed over the block's rows (reduce_sum dim 0) and added into
    float32 globals with tile atomics."""
    @T.prim_func
    def ln_bwd(X: T.Tensor((M, N), T.float16), dY: T.Tensor((M, N), T.float16),
               gamma: T.Tensor((N,), T.float32), mean: T.Tensor((M,), T.float32),
               rstd: T.Tensor((M,), T.float32), dX: T.Tensor((M, N), T.float16),
               dgamma: T.Tensor((N,), T.float32), dbeta: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bm:
            x = T.alloc_fragment((block_M, N), T.float32)
            dy = T.alloc_fragment((block_M, N), T.float32)
            g = T.alloc_fragment((block_M, N), T.float32)
            gx = T.alloc_fragment((block_M, N), T.float32)
            mu = T.alloc_fragment((block_M,), T.float32)
            rs = T.alloc_fragment((block_M,), T.float32)
            sg = T.alloc_fragment((block_M,), T.float32)
            sgx = T.alloc_fragment((block_M,), T.float32)
            part = T.alloc_fragment((N,), T.float32)
            T.copy(X[bm * block_M, 0], x)
            T.copy(dY[bm * block_M, 0], dy)
            T.copy(mean[bm * block_M], mu)
            T.copy(rstd[bm * block_M], rs)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = (x[i, j] - mu[i]) * rs[i]
                g[i, j] = dy[i, j] * gamma[j]
                gx[i, j] = g[i, j] * x[i, j]
            T.reduce_sum(g, sg, dim=1)
            T.reduce_sum(gx, sgx, dim=1)
            for i, j in T.Parallel(block_M, N):
                g[i, j] = rs[i] * (g[i, j] - sg[i] / N - x[i, j] * sgx[i] / N)
            T.copy(g, dX[bm * block_M, 0])
            for i, j in T.Parallel(block_M, N):
                gx[i, j] = dy[i, j] * x[i, j]
            T.reduce_sum(gx, part, dim=0)
            T.atomic_add(dgamma[0:N], part)
            T.reduce_sum(dy, part, dim=0)
            T.atomic_add(dbeta[0:N], part)
    return ln_bwd


def rmsnorm_bwd(M=512, N=1024, block_M=4, eps=1e-6):
    """RMSNorm backward recomputing rstd: dx = rstd * (dy w) - x rstd^3 mean(dy w x);
    each block's dw partial goes to a T.alloc_global workspace row and a second kernel of
    the same prim_func sums the rows (a serial loop over blocks per column tile)."""
    NB = M // block_M

    @T.prim_func
    def rms_bwd(X: T.Tensor((M, N), T.bfloat16), dY: T.Tensor((M, N), T.bfloat16),
                w: T.Tensor((N,), T.bfloat16), dX: T.Tensor((M, N), T.bfloat16),
                dw: T.Tensor((N,), T.float32)):
        dw_part = T.alloc_global((NB, N), T.float32)
        with T.Kernel(NB, threads=256) as bm:
            x = T.alloc_fragment((block_M, N), T.float32)
            gw = T.alloc_fragment((block_M, N), T.float32)
            sq = T.alloc_fragment((block_M, N), T.float32)
            ss = T.alloc_fragment((block_M,), T.float32)
            dot = T.alloc_fragment((block_M,), T.float32)
            col = T.alloc_fragment((N,), T.float32)
            T.copy(X[bm * block_M:(bm + 1) * block_M, :], x)
            T.copy(dY[bm * block_M:(bm + 1) * block_M, :], gw)
            for i, j in T.Parallel(block_M, N):
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, ss, dim=1)
            for i in T.Parallel(block_M):
                ss[i] = T.rsqrt(ss[i] / N + eps)
            for i, j in T.Parallel(block_M, N):
                sq[i, j] = gw[i, j] * x[i, j] * ss[i]
            T.reduce_sum(sq, col, dim=0)
            T.copy(col, dw_part[bm, :])
            for i, j in T.Parallel(block_M, N):
                gw[i, j] = gw[i, j] * w[j]
                sq[i, j] = gw[i, j] * x[i, j]
            T.reduce_sum(sq, dot, dim=1)
            for i, j in T.Parallel(block_M, N):
                gw[i, j] = ss[i] * gw[i, j] - x[i, j] * ss[i] * ss[i] * ss[i] * dot[i] / N
            T.copy(gw, dX[bm * block_M:(bm + 1) * block_M, :])
        with T.Kernel(T.ceildiv(N, 256), threads=256) as bn:
            tx = T.get_thread_binding()
            total = T.alloc_var(T.float32)
            total = 0.0
            for b in T.serial(NB):
                total += dw_part[b, bn * 256 + tx]
            dw[bn * 256 + tx] = total
    return rms_bwd


def cross_entropy_fwd(M=64, V=5000, block_M=4, block_V=1024, ignore_index=-100):
    """Softmax cross-entropy forward over a vocabulary not a multiple of the tile: per row
    an online max / sum over vocabulary tiles (out-of-range columns -inf), the label's
    logit gathered from global memory with an int64 label; loss = lse - x[label], 0 for
    ignore_index; the natural-log LSE is written too."""
    @T.prim_func
    def xent(logits: T.Tensor((M, V), T.bfloat16), labels: T.Tensor((M,), T.int64),
             loss: T.Tensor((M,), T.float32), lse: T.Tensor((M,), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=256) as bm:
            x = T.alloc_fragment((block_M, block_V), T.float32)
            m = T.alloc_fragment((block_M,), T.float32)
            m_prev = T.alloc_fragment((block_M,), T.float32)
            s = T.alloc_fragment((block_M,), T.float32)
            s_step = T.alloc_fragment((block_M,), T.float32)
            T.fill(m, -T.infinity(T.float32))
            T.clear(s)
            for v in T.serial(T.ceildiv(V, block_V)):
                for i, j in T.Parallel(block_M, block_V):
                    x[i, j] = T.if_then_else(v * block_V + j < V,
                                             T.cast(logits[bm * block_M + i, v * block_V + j], T.float32),
                                             -T.infinity(T.float32))
                T.copy(m, m_prev)
                T.reduce_max(x, m, dim=1, clear=False)
                for i, j in T.Parallel(block_M, block_V):
                    x[i, j] = T.exp(x[i, j] - m[i])
                T.reduce_sum(x, s_step, dim=1)
                for i in T.Parallel(block_M):
                    s[i] = s[i] * T.exp(m_prev[i] - m[i]) + s_step[i]
            for i in T.Parallel(block_M):
                row = bm * block_M + i
                lab = labels[row]
                z = T.log(s[i]) + m[i]
                lse[row] = z
                loss[row] = T.if_then_else(
                    lab == ignore_index, 0.0,
                    z - T.cast(logits[row, T.if_then_else(lab == ignore_index, 0, lab)], T.float32))
    return xent


def rotary_embedding(B=2, S=128, H=8, D=128, block_S=32, interleaved=False):
    """Rotary position embedding in place of a copy: cos / sin tables (max_pos, D / 2)
    indexed by a per-token position tensor (a gather), rotate-half (NeoX) or interleaved
    pairs (GPT-J) chosen at build time, fp16 in and out, float32 math."""
    half = D // 2
    max_pos = 4 * S

    @T.prim_func
    def rope(X: T.Tensor((B, S, H, D), T.float16), pos: T.Tensor((B, S), T.int32),
             cos: T.Tensor((max_pos, half), T.float32), sin: T.Tensor((max_pos, half), T.float32),
             Y: T.Tensor((B, S, H, D), T.float16)):
        with T.Kernel(T.ceildiv(S, block_S), H, B, threads=128) as (bs, h, b):
            x = T.alloc_shared((block_S, D), T.float16)
            y = T.alloc_fragment((block_S, D), T.float32)
            T.copy(X[b, bs * block_S:(bs + 1) * block_S, h, :], x)
            for i, d in T.Parallel(block_S, D):
                p = pos[b, bs * block_S + i]
                if interleaved:
                    f = d // 2
                    mate = T.cast(x[i, d ^ 1], T.float32)
                    rot = T.if_then_else(d % 2 == 0, -mate, mate)
                else:
                    f = d % half
                    mate = T.cast(x[i, (d + half) % D], T.float32)
                    rot = T.if_then_else(d < half, -mate, mate)
                y[i, d] = T.cast(x[i, d], T.float32) * cos[p, f] + rot * sin[p, f]
            T.copy(y, Y[b, bs * block_S:(bs + 1) * block_S, h, :])
    return rope


# ---- sampling and counting -------------------------------------------------------------------
def top_p_renorm(M=32, V=1024, top_p=0.9, block_M=4):
    """Top-p (nucleus) filtering of rows sorted in descending order (probabilities with
    their vocabulary ids): the running sum by T.cumsum along dim 1 of a shared tile, a
    token kept while the mass before it is below top_p, the kept mass renormalized and
    scattered back to vocabulary order through the id tensor (zeros elsewhere)."""
    @T.prim_func
    def top_p(P: T.Tensor((M, V), T.float32), ids: T.Tensor((M, V), T.int32),
              Out: T.Tensor((M, V), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=256) as bm:
            p_s = T.alloc_shared((block_M, V), T.float32)
            c_s = T.alloc_shared((block_M, V), T.float32)
            kept = T.alloc_fragment((block_M, V), T.float32)
            total = T.alloc_fragment((block_M,), T.float32)
            T.copy(P[bm * block_M, 0], p_s)
            T.copy(p_s, c_s)
            T.cumsum(c_s, dim=1)
            for i, j in T.Parallel(block_M, V):
                kept[i, j] = T.if_then_else(c_s[i, j] - p_s[i, j] < top_p, p_s[i, j], 0.0)
            T.reduce_sum(kept, total, dim=1)
            for i, j in T.Parallel(block_M, V):
                Out[bm * block_M + i, ids[bm * block_M + i, j]] = kept[i, j] / total[i]
    return top_p


def topk_threshold_mask(M=64, V=2048, k=8, block_M=2):
    """Top-k logits filtering without a sort: k rounds of a row max over a working copy
    (each round lowers the found maxima below every other value), the k-th max the
    threshold; logits below it become -inf."""
    @T.prim_func
    def topk_mask(L: T.Tensor((M, V), T.float32), Out: T.Tensor((M, V), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=256) as bm:
            x = T.alloc_fragment((block_M, V), T.float32)
            work = T.alloc_fragment((block_M, V), T.float32)
            kth = T.alloc_fragment((block_M,), T.float32)
            T.copy(L[bm * block_M, 0], x)
            T.copy(x, work)
            for r in T.serial(k):
                T.reduce_max(work, kth, dim=1)
                if r < k - 1:
                    for i, j in T.Parallel(block_M, V):
                        work[i, j] = T.if_then_else(work[i, j] >= kth[i], -T.infinity(T.float32),
                                                    work[i, j])
            for i, j in T.Parallel(block_M, V):
                x[i, j] = T.if_then_else(x[i, j] >= kth[i], x[i, j], -T.infinity(T.float32))
            T.copy(x, Out[bm * block_M, 0])
    return topk_mask


def radix_digit_counts(N=1 << 16, shift=8, threads=256, per_thread=16):
    """One radix-sort counting pass over uint32 keys: each block counts the 8-bit digit
    (key >> shift) & 255 of its keys in a shared histogram (T.atomic_add on shared
    elements), merges it into the global counts with tile atomics; a second kernel of the
    same prim_func turns the counts into exclusive digit offsets (T.cumsum on shared)."""
    per_block = threads * per_thread

    @T.prim_func
    def radix_count(keys: T.Tensor((N,), T.uint32), counts: T.Tensor((256,), T.int32),
                    offsets: T.Tensor((256,), T.int32)):
        with T.Kernel(T.ceildiv(N, per_block), threads=threads) as bx:
            tx = T.get_thread_binding()
            hist = T.alloc_shared((256,), T.int32)
            T.clear(hist)
            for r in T.serial(per_thread):
                i = bx * per_block + r * threads + tx
                if i < N:
                    digit = T.cast((keys[i] >> shift) & T.uint32(255), T.int32)
                    T.atomic_add(hist[digit], 1)
            T.atomic_add(counts[0:256], hist)
        with T.Kernel(1, threads=256):
            tx = T.get_thread_binding()
            c_s = T.alloc_shared((256,), T.int32)
            c_s[tx] = counts[tx]
            T.cumsum(c_s, dim=0)
            offsets[tx] = c_s[tx] - counts[tx]
    return radix_count
