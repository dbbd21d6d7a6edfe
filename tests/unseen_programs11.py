"""An eleventh set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang), aimed at the kernels users port that the earlier rounds leave out: a
group-limited MoE router (sigmoid scores with a selection bias, top-2 sums per expert
group, top groups, then top experts inside them), a grouped GEMM whose blocks find their
group by a ``while`` walk over a ragged offsets table, a stable sort of tokens by expert
built from ``T.cumsum`` ranks and block bases, chunked linear-attention backward (dQ with
the running state), the delta rule's recurrent form, NSA's compressed keys and top-n block
selection, block-sparse GEMM over a per-row index table, group quantizers (packed int4,
fp8 with power-of-two scales, asymmetric uint8 with zero points), RoPE with paged KV
cache writes and a rotated decode, FlashAttention backward with dK / dV by tile atomics
from query-major blocks, softmax / log-softmax / cross-entropy backward, GEMM epilogues
(bias + tanh-GELU + residual, SwiGLU of two accumulators, int8 with row and column
scales at M = 1), split-K with a per-tile semaphore (``T.atomic_load`` acquire spins and
``T.atomic_store`` release), ``T.Persistent`` schedules, ``T.ws`` producer / consumer
regions with mbarriers over a non-GEMM loop, ``T.macro`` attention pieces over
``T.dynamic`` lengths, ``while`` loops with ``T.alloc_var`` counters (speculative-decoding
acceptance), Walsh-Hadamard butterflies in shared memory, grouped and dilated
convolutions, a causal depthwise conv1d with a carried state, embedding bags over an
offsets table and the embedding backward by atomics; also row compaction by ``T.cumsum``
along dim 1, a ``while`` binary search (bucketize), 3-D fragment reductions over dims 0
and 2, ``T.bool`` masks, an e4m3 x e5m2 GEMM written as fp8, a ``T.dynamic`` batch in the
grid and ``T.atomic_max(return_prev=True)``.  ``tests/test_unseen_programs11.py``
builds each to a cubin on the CPU and, on a GPU, compares it with torch written to
TileLang's meaning.

Each factory returns a ``@T.prim_func`` (or a list of them, launched in order), or, for
the ``jit_*`` ones, a ``@tilecute.jit`` kernel."""

import tilecute
import tilecute.language as T

LOG2E = 1.44269504


# ---- MoE ---------------------------------------------------------------------------------
def moe_group_limited_router(tokens=1000, E=64, G=8, topk_group=3, topk=6, bt=16,
                             routed_scale=2.5):
    """DeepSeek-V3-style routing: s = sigmoid(logits); b = s + bias; a group's score is the
    sum of its two largest b; the best ``topk_group`` groups survive; the ``topk`` best b
    among their experts are chosen, weighted by their s renormalized and scaled."""
    Eg = E // G

    @T.prim_func
    def router(logits: T.Tensor((tokens, E), T.float32), bias: T.Tensor((E,), T.float32),
               ids: T.Tensor((tokens, topk), T.int32), weights: T.Tensor((tokens, topk), T.float32)):
        with T.Kernel(T.ceildiv(tokens, bt), threads=128) as bx:
            s_s = T.alloc_shared((bt, E), T.float32)
            b = T.alloc_fragment((bt, E), T.float32)
            bg = T.alloc_fragment((bt, G, Eg), T.float32)
            g1 = T.alloc_fragment((bt, G), T.float32)
            g2 = T.alloc_fragment((bt, G), T.float32)
            keep = T.alloc_fragment((bt, G), T.int32)
            mx = T.alloc_fragment((bt,), T.float32)
            cand = T.alloc_fragment((bt, E), T.int32)
            arg = T.alloc_fragment((bt,), T.int32)
            w = T.alloc_fragment((bt, topk), T.float32)
            idl = T.alloc_fragment((bt, topk), T.int32)
            wsum = T.alloc_fragment((bt,), T.float32)
            T.copy(logits[bx * bt, 0], b)
            for i, j in T.Parallel(bt, E):
                s_s[i, j] = T.sigmoid(b[i, j])
                b[i, j] = T.sigmoid(b[i, j]) + bias[j]
            for i, g, e in T.Parallel(bt, G, Eg):
                bg[i, g, e] = b[i, g * Eg + e]
            T.reduce_max(bg, g1, dim=2)
            for i, g, e in T.Parallel(bt, G, Eg):
                bg[i, g, e] = T.if_then_else(bg[i, g, e] == g1[i, g], -T.infinity(T.float32), bg[i, g, e])
            T.reduce_max(bg, g2, dim=2)
            for i, g in T.Parallel(bt, G):
                g1[i, g] = g1[i, g] + g2[i, g]
                keep[i, g] = 0
            for r in T.serial(topk_group):
                T.reduce_max(g1, mx, dim=1)
                for i, g in T.Parallel(bt, G):
                    if g1[i, g] == mx[i]:
                        keep[i, g] = 1
                        g1[i, g] = -T.infinity(T.float32)
            for i, j in T.Parallel(bt, E):
                b[i, j] = T.if_then_else(keep[i, j // Eg] == 1, b[i, j], -T.infinity(T.float32))
            T.clear(wsum)
            for k in T.serial(topk):
                T.reduce_max(b, mx, dim=1)
                for i, j in T.Parallel(bt, E):
                    cand[i, j] = T.if_then_else(b[i, j] == mx[i], j, E)
                T.reduce_min(cand, arg, dim=1)
                for i in T.Parallel(bt):
                    idl[i, k] = arg[i]
                    w[i, k] = s_s[i, arg[i]]
                    wsum[i] += s_s[i, arg[i]]
                for i, j in T.Parallel(bt, E):
                    if j == arg[i]:
                        b[i, j] = -T.infinity(T.float32)
            for i, k in T.Parallel(bt, topk):
                w[i, k] = w[i, k] / wsum[i] * routed_scale
            T.copy(idl, ids[bx * bt, 0])
            T.copy(w, weights[bx * bt, 0])
    return router


def grouped_gemm_while_walk(G=5, K=256, N=256, bm=64, bn=128, bk=64, stages=3):
    """Y[rows of group g] = X[rows of g] @ W[g] over a packed X whose group g holds rows
    offsets[g]..offsets[g+1] (any sizes, empty ones too; ``total`` is a ``T.dynamic``
    dim).  The grid is ceildiv(total, bm) + G row tiles (enough for every ragged tail);
    block bx finds its group by a ``while`` over the table, counters in ``T.alloc_var``;
    blocks past the last tile do nothing, rows past the group's end are not stored."""
    total = T.dynamic("total")

    @T.prim_func
    def grouped(X: T.Tensor((total, K), T.bfloat16), W: T.Tensor((G, K, N), T.bfloat16),
                offsets: T.Tensor((G + 1,), T.int32), Y: T.Tensor((total, N), T.bfloat16)):
        with T.Kernel(T.ceildiv(total, bm) + G, T.ceildiv(N, bn), threads=128) as (bx, by):
            x_s = T.alloc_shared((bm, bk), T.bfloat16)
            w_s = T.alloc_shared((bk, bn), T.bfloat16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            g = T.alloc_var(T.int32)
            t = T.alloc_var(T.int32)
            g = 0
            t = bx
            while g < G and t >= T.ceildiv(offsets[g + 1] - offsets[g], bm):
                t -= T.ceildiv(offsets[g + 1] - offsets[g], bm)
                g += 1
            if g < G:
                start = offsets[g] + t * bm
                rows = offsets[g + 1] - start
                T.clear(acc)
                for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                    T.copy(X[start, k * bk], x_s)
                    T.copy(W[g, k * bk, by * bn], w_s)
                    T.gemm(x_s, w_s, acc)
                for i, j in T.Parallel(bm, bn):
                    if i < rows:
                        Y[start + i, by * bn + j] = acc[i, j]
    return grouped


def moe_sort_by_expert(n=1000, E=16, bt=128):
    """A stable sort of n tokens by expert id, as two kernels.  1: per block of bt tokens,
    a one-hot (bt, E) tile in shared and its ``T.cumsum`` down the tokens give each
    token's rank among its block's tokens of the same expert, and the block's counts.
    2 (one block): ``T.cumsum`` of the (blocks, E) count table down the blocks and of the
    expert totals give each (block, expert) base; each token goes to base + rank - 1, and
    ``order[pos] = token``; expert_offsets gets the exclusive totals."""
    nb = (n + bt - 1) // bt

    @T.prim_func
    def ranks(expert: T.Tensor((n,), T.int32), rank: T.Tensor((n,), T.int32),
              counts: T.Tensor((nb, E), T.int32)):
        with T.Kernel(nb, threads=128) as bx:
            oh = T.alloc_shared((bt, E), T.int32)
            for i, e in T.Parallel(bt, E):
                tok = bx * bt + i
                oh[i, e] = T.if_then_else(tok < n and expert[T.min(tok, n - 1)] == e, 1, 0)
            T.cumsum(oh, dim=0)
            for i in T.Parallel(bt):
                tok = bx * bt + i
                if tok < n:
                    rank[tok] = oh[i, expert[tok]]
            for e in T.Parallel(E):
                counts[bx, e] = oh[bt - 1, e]

    @T.prim_func
    def scatter(expert: T.Tensor((n,), T.int32), rank: T.Tensor((n,), T.int32),
                counts: T.Tensor((nb, E), T.int32), order: T.Tensor((n,), T.int32),
                expert_offsets: T.Tensor((E + 1,), T.int32)):
        with T.Kernel(1, threads=256) as _:
            c = T.alloc_shared((nb, E), T.int32)
            tot = T.alloc_shared((E,), T.int32)
            T.copy(counts, c)
            T.cumsum(c, dim=0)
            for e in T.Parallel(E):
                tot[e] = c[nb - 1, e]
            T.cumsum(tot, dim=0)
            for e in T.Parallel(E):
                expert_offsets[e + 1] = tot[e]
                if e == 0:
                    expert_offsets[0] = 0
            for ch in T.serial(T.ceildiv(n, 256)):
                for i in T.Parallel(256):
                    tok = ch * 256 + i
                    if tok < n:
                        e = expert[tok]
                        blk = tok // bt
                        before = T.if_then_else(blk > 0, c[T.max(blk - 1, 0), e], 0)
                        order[tot[e] - c[nb - 1, e] + before + rank[tok] - 1] = tok
    return [ranks, scatter]


def embedding_bag_offsets(bags=37, vocab=500, D=192, bd=64):
    """out[b] = mean over the rows idx[offsets[b]:offsets[b+1]] of the table (bags may be
    empty: zeros), a serial loop over a run-time range per bag into a fragment."""
    nnz = T.dynamic("nnz")

    @T.prim_func
    def bag(table: T.Tensor((vocab, D), T.float16), idx: T.Tensor((nnz,), T.int64),
            offsets: T.Tensor((bags + 1,), T.int32), out: T.Tensor((bags, D), T.float32)):
        with T.Kernel(bags, T.ceildiv(D, bd), threads=64) as (b, bz):
            acc = T.alloc_fragment((bd,), T.float32)
            lo = offsets[b]
            hi = offsets[b + 1]
            T.clear(acc)
            for r in T.serial(lo, hi):
                for d in T.Parallel(bd):
                    acc[d] += T.cast(table[idx[r], bz * bd + d], T.float32)
            for d in T.Parallel(bd):
                out[b, bz * bd + d] = T.if_then_else(hi > lo, acc[d] / T.cast(hi - lo, T.float32), 0.0)
    return bag


def embedding_backward_atomic(n=777, vocab=300, D=128, bt=8):
    """dW[ids[t], :] += dY[t, :] by float32 ``T.atomic_add`` (repeated ids collide), the
    padding id -1 skipped."""
    @T.prim_func
    def emb_bwd(ids: T.Tensor((n,), T.int32), dY: T.Tensor((n, D), T.bfloat16),
                dW: T.Tensor((vocab, D), T.float32)):
        with T.Kernel(T.ceildiv(n, bt), threads=128) as bx:
            for i, d in T.Parallel(bt, D):
                t = bx * bt + i
                if t < n:
                    if ids[t] >= 0:
                        T.atomic_add(dW[ids[t], d], T.cast(dY[t, d], T.float32))
    return emb_bwd


# ---- linear attention / delta rule --------------------------------------------------------
def linear_attn_bwd_dq(B=2, H=2, L=256, Dk=64, Dv=64, C=64):
    """Chunked causal linear attention, o_t = sum_{s<=t} (q_t . k_s) v_s, backward for dQ:
    dQ_c = (dO_c V_c^T masked to s <= t) K_c + dO_c H_{c-1}^T with H_c = H_{c-1} + K_c^T V_c
    carried in a float32 accumulator across a serial chunk loop (fp16 copy in shared for
    the GEMM), K_c^T V_c by ``transpose_A``."""
    @T.prim_func
    def dq_kernel(K: T.Tensor((B, H, L, Dk), T.float16), V: T.Tensor((B, H, L, Dv), T.float16),
                  dO: T.Tensor((B, H, L, Dv), T.float16), dQ: T.Tensor((B, H, L, Dk), T.float32)):
        with T.Kernel(H, B, threads=128) as (h, b):
            k_s = T.alloc_shared((C, Dk), T.float16)
            v_s = T.alloc_shared((C, Dv), T.float16)
            do_s = T.alloc_shared((C, Dv), T.float16)
            h_s = T.alloc_shared((Dk, Dv), T.float16)
            a_s = T.alloc_shared((C, C), T.float16)
            state = T.alloc_fragment((Dk, Dv), T.float32)
            a = T.alloc_fragment((C, C), T.float32)
            dq = T.alloc_fragment((C, Dk), T.float32)
            T.clear(state)
            for c in T.serial(L // C):
                T.copy(K[b, h, c * C:(c + 1) * C, :], k_s)
                T.copy(V[b, h, c * C:(c + 1) * C, :], v_s)
                T.copy(dO[b, h, c * C:(c + 1) * C, :], do_s)
                T.copy(state, h_s)
                T.clear(a)
                T.gemm(do_s, v_s, a, transpose_B=True)
                for i, j in T.Parallel(C, C):
                    a[i, j] = T.if_then_else(j <= i, a[i, j], 0.0)
                T.copy(a, a_s)
                T.clear(dq)
                T.gemm(a_s, k_s, dq)
                T.gemm(do_s, h_s, dq, transpose_B=True)
                T.copy(dq, dQ[b, h, c * C:(c + 1) * C, :])
                T.gemm(k_s, v_s, state, transpose_A=True)
    return dq_kernel


def delta_rule_recurrent(B=1, H=4, L=48, Dk=64, Dv=64):
    """The delta rule token by token: S (Dk, Dv) in a float32 fragment;
    u = v_t - S^T k_t; S += beta_t k_t u^T; o_t = S^T q_t.  The matrix-vector products are
    a T.Parallel product then ``T.reduce_sum(dim=0)``; k_t, q_t, v_t staged in 1-D shared."""
    @T.prim_func
    def delta(Q: T.Tensor((B, L, H, Dk), T.float32), K: T.Tensor((B, L, H, Dk), T.float32),
              V: T.Tensor((B, L, H, Dv), T.float32), beta: T.Tensor((B, L, H), T.float32),
              O: T.Tensor((B, L, H, Dv), T.float32), S_out: T.Tensor((B, H, Dk, Dv), T.float32)):
        with T.Kernel(H, B, threads=128) as (h, b):
            S = T.alloc_fragment((Dk, Dv), T.float32)
            tmp = T.alloc_fragment((Dk, Dv), T.float32)
            kv = T.alloc_fragment((Dv,), T.float32)
            q_s = T.alloc_shared((Dk,), T.float32)
            k_s = T.alloc_shared((Dk,), T.float32)
            v_s = T.alloc_shared((Dv,), T.float32)
            o = T.alloc_fragment((Dv,), T.float32)
            T.clear(S)
            for t in T.serial(L):
                T.copy(Q[b, t, h, :], q_s)
                T.copy(K[b, t, h, :], k_s)
                T.copy(V[b, t, h, :], v_s)
                bt = beta[b, t, h]
                for i, j in T.Parallel(Dk, Dv):
                    tmp[i, j] = S[i, j] * k_s[i]
                T.reduce_sum(tmp, kv, dim=0)
                for i, j in T.Parallel(Dk, Dv):
                    S[i, j] += bt * k_s[i] * (v_s[j] - kv[j])
                for i, j in T.Parallel(Dk, Dv):
                    tmp[i, j] = S[i, j] * q_s[i]
                T.reduce_sum(tmp, o, dim=0)
                T.copy(o, O[b, t, h, :])
            T.copy(S, S_out[b, h, :, :])
    return delta


def ssd_state_passing(B=2, H=3, nchunks=9, P=64, N=32, bp=32):
    """Mamba-2's state passing: states[c] (the state entering chunk c) = exp(A_last[c-1]) *
    states[c-1] + chunk_states[c-1], a serial chunk loop over a float32 fragment; the
    final state is written too."""
    @T.prim_func
    def passing(chunk_states: T.Tensor((B, nchunks, H, P, N), T.float32),
                A_last: T.Tensor((B, H, nchunks), T.float32),
                states: T.Tensor((B, nchunks, H, P, N), T.float32),
                final: T.Tensor((B, H, P, N), T.float32)):
        with T.Kernel(T.ceildiv(P, bp), H, B, threads=128) as (bx, h, b):
            s = T.alloc_fragment((bp, N), T.float32)
            new = T.alloc_fragment((bp, N), T.float32)
            T.clear(s)
            for c in T.serial(nchunks):
                T.copy(s, states[b, c, h, bx * bp:(bx + 1) * bp, :])
                T.copy(chunk_states[b, c, h, bx * bp:(bx + 1) * bp, :], new)
                decay = T.exp(A_last[b, h, c])
                for i, j in T.Parallel(bp, N):
                    s[i, j] = s[i, j] * decay + new[i, j]
            T.copy(s, final[b, h, bx * bp:(bx + 1) * bp, :])
    return passing


# ---- NSA ----------------------------------------------------------------------------------
def nsa_compress_keys(B=1, S=512, H=2, D=64, bs=32):
    """Compressed keys: the mean of each block of bs keys, reduced along dim 0 of a fragment."""
    nblk = S // bs

    @T.prim_func
    def compress(K: T.Tensor((B, S, H, D), T.bfloat16), Kc: T.Tensor((B, nblk, H, D), T.bfloat16)):
        with T.Kernel(nblk, H, B, threads=64) as (j, h, b):
            kf = T.alloc_fragment((bs, D), T.float32)
            m = T.alloc_fragment((D,), T.float32)
            T.copy(K[b, j * bs:(j + 1) * bs, h, :], kf)
            T.reduce_sum(kf, m, dim=0)
            for d in T.Parallel(D):
                Kc[b, j, h, d] = m[d] / bs
    return compress


def nsa_select_blocks(B=1, S=512, H=2, D=64, bs=32, n_sel=4, bm=64):
    """NSA's selection: scores of each query against the compressed keys (one GEMM), a key
    block allowed when it ends at or before the query (the query's own block forced in
    with +inf); the n_sel best blocks by repeated ``T.reduce_max`` / ``T.reduce_min``
    argmax; -1 where fewer blocks are allowed."""
    nblk = S // bs

    @T.prim_func
    def select(Q: T.Tensor((B, S, H, D), T.bfloat16), Kc: T.Tensor((B, nblk, H, D), T.bfloat16),
               idx: T.Tensor((B, H, S, n_sel), T.int32)):
        with T.Kernel(S // bm, H, B, threads=128) as (bx, h, b):
            q_s = T.alloc_shared((bm, D), T.bfloat16)
            kc_s = T.alloc_shared((nblk, D), T.bfloat16)
            sc = T.alloc_fragment((bm, nblk), T.float32)
            mx = T.alloc_fragment((bm,), T.float32)
            cand = T.alloc_fragment((bm, nblk), T.int32)
            arg = T.alloc_fragment((bm,), T.int32)
            out = T.alloc_fragment((bm, n_sel), T.int32)
            T.copy(Q[b, bx * bm:(bx + 1) * bm, h, :], q_s)
            T.copy(Kc[b, :, h, :], kc_s)
            T.clear(sc)
            T.gemm(q_s, kc_s, sc, transpose_B=True)
            for i, j in T.Parallel(bm, nblk):
                pos = bx * bm + i
                sc[i, j] = T.if_then_else(j == pos // bs, T.infinity(T.float32),
                                          T.if_then_else((j + 1) * bs - 1 <= pos, sc[i, j],
                                                         -T.infinity(T.float32)))
            for k in T.serial(n_sel):
                T.reduce_max(sc, mx, dim=1)
                for i, j in T.Parallel(bm, nblk):
                    cand[i, j] = T.if_then_else(sc[i, j] == mx[i], j, nblk)
                T.reduce_min(cand, arg, dim=1)
                for i in T.Parallel(bm):
                    out[i, k] = T.if_then_else(mx[i] == -T.infinity(T.float32), -1, arg[i])
                for i, j in T.Parallel(bm, nblk):
                    if j == arg[i]:
                        sc[i, j] = -T.infinity(T.float32)
            T.copy(out, idx[b, h, bx * bm:(bx + 1) * bm, :])
    return select


def nsa_all():
    return [nsa_compress_keys(), nsa_select_blocks()]


# ---- block-sparse GEMM over an index table (eager jit) ---------------------------------------
@tilecute.jit
def jit_bsr_gemm(A, B, blk_idx, blk_cnt, block_M: int = 128, block_N: int = 128, block_K: int = 64,
                 max_nnz: int = 8):
    """C[row block r] = sum over the k-blocks blk_idx[r, :blk_cnt[r]] of A @ B, a
    ``T.Pipelined`` over a run-time count, the A and B tiles at indices read from a tensor."""
    M, N, K = T.const("M, N, K")
    A: T.Tensor((M, K), T.float16)
    B: T.Tensor((K, N), T.float16)
    blk_idx: T.Tensor((T.ceildiv(M, block_M), max_nnz), T.int32)
    blk_cnt: T.Tensor((T.ceildiv(M, block_M),), T.int32)
    C = T.empty((M, N), T.float16)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        a_s = T.alloc_shared((block_M, block_K), T.float16)
        b_s = T.alloc_shared((block_K, block_N), T.float16)
        acc = T.alloc_fragment((block_M, block_N), T.float32)
        T.clear(acc)
        for k in T.Pipelined(blk_cnt[by], num_stages=2):
            kb = blk_idx[by, k]
            T.copy(A[by * block_M, kb * block_K], a_s)
            T.copy(B[kb * block_K, bx * block_N], b_s)
            T.gemm(a_s, b_s, acc)
        T.copy(acc, C[by * block_M, bx * block_N])
    return C


def jit_bsr_gemm_kernel():
    return jit_bsr_gemm.compile(M=384, N=256, K=512)


# ---- quantizers ---------------------------------------------------------------------------
def int4_group_quant_pack(M=127, K=512, g=32, bm=32):
    """Symmetric int4 per (row, group of g): scale = absmax / 7, q = clamp(round(x / s),
    -8, 7); two values a byte (even column in the low nibble) through an int32 tile in shared."""
    @T.prim_func
    def quant(X: T.Tensor((M, K), T.bfloat16), Qp: T.Tensor((M, K // 2), T.uint8),
              S: T.Tensor((M, K // g), T.float32)):
        with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
            x = T.alloc_fragment((bm, g), T.float32)
            amax = T.alloc_fragment((bm,), T.float32)
            q_s = T.alloc_shared((bm, g), T.int32)
            for gi in T.serial(K // g):
                T.copy(X[bx * bm, gi * g], x)
                T.reduce_absmax(x, amax, dim=1)
                for i in T.Parallel(bm):
                    amax[i] = T.max(amax[i], 1e-6) / 7.0
                    if bx * bm + i < M:
                        S[bx * bm + i, gi] = amax[i]
                for i, j in T.Parallel(bm, g):
                    q_s[i, j] = T.cast(T.clamp(T.round(x[i, j] / amax[i]), -8.0, 7.0), T.int32)
                for i, j in T.Parallel(bm, g // 2):
                    if bx * bm + i < M:
                        Qp[bx * bm + i, gi * (g // 2) + j] = T.cast(
                            (q_s[i, 2 * j] & 15) | ((q_s[i, 2 * j + 1] & 15) << 4), T.uint8)
    return quant


def fp8_pow2_group_quant(M=1000, K=384, g=128, bm=16):
    """DeepGEMM-style 1x128 fp8 quantization with power-of-two scales:
    s = 2^ceil(log2(max(absmax, 1e-4) / 448)), q = fp8_e4m3(x / s); the scale table
    stored transposed (K // g, M) as DeepGEMM wants it."""
    @T.prim_func
    def quant(X: T.Tensor((M, K), T.bfloat16), Q: T.Tensor((M, K), T.float8_e4m3fn),
              S: T.Tensor((K // g, M), T.float32)):
        with T.Kernel(T.ceildiv(M, bm), K // g, threads=128) as (bx, gi):
            x = T.alloc_fragment((bm, g), T.float32)
            q = T.alloc_fragment((bm, g), T.float8_e4m3fn)
            amax = T.alloc_fragment((bm,), T.float32)
            T.copy(X[bx * bm:(bx + 1) * bm, gi * g:(gi + 1) * g], x)
            T.reduce_absmax(x, amax, dim=1)
            for i in T.Parallel(bm):
                amax[i] = T.exp2(T.ceil(T.log2(T.max(amax[i], 1e-4) / 448.0)))
            for i, j in T.Parallel(bm, g):
                q[i, j] = x[i, j] / amax[i]
            T.copy(q, Q[bx * bm:(bx + 1) * bm, gi * g:(gi + 1) * g])
            T.copy(amax, S[gi, bx * bm:(bx + 1) * bm])
    return quant


def uint8_asym_group_quant(M=200, K=256, g=64, bm=8):
    """Asymmetric uint8 per (row, group): scale = (max - min) / 255, zp = round(-min /
    scale), q = clamp(round(x / scale) + zp, 0, 255); also the dequantized copy."""
    @T.prim_func
    def quant(X: T.Tensor((M, K), T.float16), Q: T.Tensor((M, K), T.uint8),
              scale: T.Tensor((M, K // g), T.float32), zp: T.Tensor((M, K // g), T.int32),
              Xd: T.Tensor((M, K), T.float16)):
        with T.Kernel(T.ceildiv(M, bm), K // g, threads=64) as (bx, gi):
            x = T.alloc_fragment((bm, g), T.float32)
            mn = T.alloc_fragment((bm,), T.float32)
            mx = T.alloc_fragment((bm,), T.float32)
            z = T.alloc_fragment((bm,), T.float32)
            q = T.alloc_fragment((bm, g), T.uint8)
            T.copy(X[bx * bm, gi * g], x)
            T.reduce_min(x, mn, dim=1)
            T.reduce_max(x, mx, dim=1)
            for i in T.Parallel(bm):
                mx[i] = T.max(mx[i] - mn[i], 1e-5) / 255.0
                z[i] = T.round(-mn[i] / mx[i])
            for i, j in T.Parallel(bm, g):
                q[i, j] = T.cast(T.clamp(T.round(x[i, j] / mx[i]) + z[i], 0.0, 255.0), T.uint8)
            T.copy(q, Q[bx * bm, gi * g])
            for i, j in T.Parallel(bm, g):
                Xd[bx * bm + i, gi * g + j] = T.cast((T.cast(q[i, j], T.float32) - z[i]) * mx[i], T.float16)
            for i in T.Parallel(bm):
                scale[bx * bm + i, gi] = mx[i]
                zp[bx * bm + i, gi] = T.cast(z[i], T.int32)
    return quant


# ---- RoPE, KV cache, decode -------------------------------------------------------------
def rope_paged_kv_write(n=45, Hk=2, D=128, page=16, num_pages=12, max_pos=256):
    """vLLM-style cache write with NeoX rotary on the keys: token t goes to slot
    slot_mapping[t] (page = slot // page, offset = slot % page; -1 = padding, skipped);
    k rotated by the cos / sin rows of positions[t] (halves: x1 * cos - x2 * sin, x2 * cos +
    x1 * sin), v copied as is."""
    half = D // 2

    @T.prim_func
    def write(k: T.Tensor((n, Hk, D), T.bfloat16), v: T.Tensor((n, Hk, D), T.bfloat16),
              positions: T.Tensor((n,), T.int64), slot_mapping: T.Tensor((n,), T.int64),
              cos: T.Tensor((max_pos, half), T.float32), sin: T.Tensor((max_pos, half), T.float32),
              k_cache: T.Tensor((num_pages, page, Hk, D), T.bfloat16),
              v_cache: T.Tensor((num_pages, page, Hk, D), T.bfloat16)):
        with T.Kernel(n, threads=128) as t:
            slot = slot_mapping[t]
            if slot >= 0:
                pg = slot // page
                off = slot % page
                pos = positions[t]
                for h, d in T.Parallel(Hk, half):
                    x1 = T.cast(k[t, h, d], T.float32)
                    x2 = T.cast(k[t, h, d + half], T.float32)
                    k_cache[pg, off, h, d] = T.cast(x1 * cos[pos, d] - x2 * sin[pos, d], T.bfloat16)
                    k_cache[pg, off, h, d + half] = T.cast(x2 * cos[pos, d] + x1 * sin[pos, d], T.bfloat16)
                for h, d in T.Parallel(Hk, D):
                    v_cache[pg, off, h, d] = v[t, h, d]
    return write


def rope_decode_gqa(batch=3, Hq=8, Hk=2, D=64, max_len=300, bn=64, block_H=16, base=10000.0):
    """One decode step: the query is rotated in the kernel (GPT-J pairs (2i, 2i+1), the
    frequencies base^(-2i/D) by ``T.exp2``/``T.log2``, the position = the cache length);
    keys in the (already rotated) cache up to lens[b]; the key loop's bound is read from
    the tensor and its tail masked; the group's heads padded to block_H rows."""
    group = Hq // Hk
    scale = (1.0 / D) ** 0.5 * LOG2E
    import math
    lb = math.log2(base)

    @T.prim_func
    def decode(Q: T.Tensor((batch, Hq, D), T.bfloat16), Kc: T.Tensor((batch, max_len, Hk, D), T.bfloat16),
               Vc: T.Tensor((batch, max_len, Hk, D), T.bfloat16), lens: T.Tensor((batch,), T.int32),
               O: T.Tensor((batch, Hq, D), T.bfloat16)):
        with T.Kernel(Hk, batch, threads=128) as (hk, b):
            q_s = T.alloc_shared((block_H, D), T.bfloat16)
            k_s = T.alloc_shared((bn, D), T.bfloat16)
            v_s = T.alloc_shared((bn, D), T.bfloat16)
            s = T.alloc_fragment((block_H, bn), T.float32)
            p = T.alloc_fragment((block_H, bn), T.bfloat16)
            o = T.alloc_fragment((block_H, D), T.float32)
            m = T.alloc_fragment((block_H,), T.float32)
            m_prev = T.alloc_fragment((block_H,), T.float32)
            l = T.alloc_fragment((block_H,), T.float32)
            ls = T.alloc_fragment((block_H,), T.float32)
            n = lens[b]
            pos = T.cast(n - 1, T.float32)
            for i, d in T.Parallel(block_H, D):
                h = hk * group + T.min(i, group - 1)
                ang = pos * T.exp2(-T.cast(d // 2 * 2, T.float32) / D * lb)
                x = T.cast(Q[b, h, d], T.float32)
                y = T.cast(Q[b, h, T.bitwise_xor(d, 1)], T.float32)
                r = T.if_then_else(d % 2 == 0, x * T.cos(ang) - y * T.sin(ang),
                                   x * T.cos(ang) + y * T.sin(ang))
                q_s[i, d] = T.if_then_else(i < group, T.cast(r, T.bfloat16), T.bfloat16(0))
            T.fill(o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(T.float32))
            for kt in T.Pipelined(T.ceildiv(n, bn), num_stages=2):
                T.copy(Kc[b, kt * bn:(kt + 1) * bn, hk, :], k_s)
                T.copy(Vc[b, kt * bn:(kt + 1) * bn, hk, :], v_s)
                T.clear(s)
                T.gemm(q_s, k_s, s, transpose_B=True)
                for i, j in T.Parallel(block_H, bn):
                    s[i, j] = T.if_then_else(kt * bn + j < n, s[i, j], -T.infinity(T.float32))
                T.copy(m, m_prev)
                T.reduce_max(s, m, dim=1, clear=False)
                for i, j in T.Parallel(block_H, bn):
                    s[i, j] = T.exp2((s[i, j] - m[i]) * scale)
                T.reduce_sum(s, ls, dim=1)
                for i in T.Parallel(block_H):
                    l[i] = l[i] * T.exp2((m_prev[i] - m[i]) * scale) + ls[i]
                for i, d in T.Parallel(block_H, D):
                    o[i, d] *= T.exp2((m_prev[i] - m[i]) * scale)
                T.copy(s, p)
                T.gemm(p, v_s, o)
            for i, d in T.Parallel(block_H, D):
                if i < group:
                    O[b, hk * group + i, d] = o[i, d] / l[i]
    return decode


# ---- FlashAttention backward, query-major ----------------------------------------------
def attn_bwd_query_major(B=1, H=2, S=192, D=64, bm=64, bn=64, causal=True):
    """Backward with one block per query tile (BSHD, fp16): dQ accumulates in registers
    over the key tiles (up to the diagonal when causal); each key tile's dK = dS^T Q and
    dV = P^T dO (``transpose_A`` on shared P / dS) go to float32 dK / dV by tile
    ``T.atomic_add``s; lse in natural log, scores by ``T.exp``."""
    sm_scale = (1.0 / D) ** 0.5

    @T.prim_func
    def bwd(Q: T.Tensor((B, S, H, D), T.float16), K: T.Tensor((B, S, H, D), T.float16),
            V: T.Tensor((B, S, H, D), T.float16), dO: T.Tensor((B, S, H, D), T.float16),
            lse: T.Tensor((B, H, S), T.float32), Delta: T.Tensor((B, H, S), T.float32),
            dQ: T.Tensor((B, S, H, D), T.float32), dK: T.Tensor((B, S, H, D), T.float32),
            dV: T.Tensor((B, S, H, D), T.float32)):
        with T.Kernel(S // bm, H, B, threads=128) as (bx, h, b):
            q_s = T.alloc_shared((bm, D), T.float16)
            do_s = T.alloc_shared((bm, D), T.float16)
            k_s = T.alloc_shared((bn, D), T.float16)
            v_s = T.alloc_shared((bn, D), T.float16)
            p_s = T.alloc_shared((bm, bn), T.float16)
            ds_s = T.alloc_shared((bm, bn), T.float16)
            s = T.alloc_fragment((bm, bn), T.float32)
            dp = T.alloc_fragment((bm, bn), T.float32)
            dq = T.alloc_fragment((bm, D), T.float32)
            dk = T.alloc_fragment((bn, D), T.float32)
            dv = T.alloc_fragment((bn, D), T.float32)
            T.copy(Q[b, bx * bm:(bx + 1) * bm, h, :], q_s)
            T.copy(dO[b, bx * bm:(bx + 1) * bm, h, :], do_s)
            T.clear(dq)
            hi = T.ceildiv((bx + 1) * bm, bn) if causal else T.ceildiv(S, bn)
            for kt in T.Pipelined(hi, num_stages=1):
                T.copy(K[b, kt * bn:(kt + 1) * bn, h, :], k_s)
                T.copy(V[b, kt * bn:(kt + 1) * bn, h, :], v_s)
                T.clear(s)
                T.gemm(q_s, k_s, s, transpose_B=True)
                T.clear(dp)
                T.gemm(do_s, v_s, dp, transpose_B=True)
                for i, j in T.Parallel(bm, bn):
                    s[i, j] = T.exp(s[i, j] * sm_scale - lse[b, h, bx * bm + i])
                    if causal:
                        s[i, j] = T.if_then_else(kt * bn + j <= bx * bm + i, s[i, j], 0.0)
                for i, j in T.Parallel(bm, bn):
                    dp[i, j] = s[i, j] * (dp[i, j] - Delta[b, h, bx * bm + i]) * sm_scale
                T.copy(s, p_s)
                T.copy(dp, ds_s)
                T.gemm(ds_s, k_s, dq)
                T.clear(dv)
                T.gemm(p_s, do_s, dv, transpose_A=True)
                T.clear(dk)
                T.gemm(ds_s, q_s, dk, transpose_A=True)
                T.atomic_add(dV[b, kt * bn:(kt + 1) * bn, h, :], dv)
                T.atomic_add(dK[b, kt * bn:(kt + 1) * bn, h, :], dk)
            T.copy(dq, dQ[b, bx * bm:(bx + 1) * bm, h, :])
    return bwd


# ---- softmax / cross-entropy backward ------------------------------------------------------
def softmax_bwd_chunked(M=127, N=1000, bm=4, bc=256):
    """dx = y * (dy - sum_j y dy) over rows longer than a tile: the row dot accumulated
    over column chunks (``T.reduce_sum(clear=False)``, chunks past N read as zeros), then a
    second pass writes dx (bf16 in, fp32 statistics)."""
    @T.prim_func
    def sm_bwd(Y: T.Tensor((M, N), T.bfloat16), dY: T.Tensor((M, N), T.bfloat16),
               dX: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
            y = T.alloc_fragment((bm, bc), T.float32)
            dy = T.alloc_fragment((bm, bc), T.float32)
            dot = T.alloc_fragment((bm,), T.float32)
            T.clear(dot)
            for c in T.serial(T.ceildiv(N, bc)):
                T.copy(Y[bx * bm, c * bc], y)
                T.copy(dY[bx * bm, c * bc], dy)
                for i, j in T.Parallel(bm, bc):
                    y[i, j] = y[i, j] * dy[i, j]
                T.reduce_sum(y, dot, dim=1, clear=False)
            for c in T.serial(T.ceildiv(N, bc)):
                T.copy(Y[bx * bm, c * bc], y)
                T.copy(dY[bx * bm, c * bc], dy)
                for i, j in T.Parallel(bm, bc):
                    y[i, j] = y[i, j] * (dy[i, j] - dot[i])
                T.copy(y, dX[bx * bm, c * bc])
    return sm_bwd


def log_softmax_bwd(M=1, N=4096, bc=1024):
    """dx = dy - exp(out) * sum(dy) for one row (M = 1) in fp16, 256 threads, columns in
    chunks of a 1-D fragment."""
    @T.prim_func
    def lsm_bwd(Out: T.Tensor((M, N), T.float16), dY: T.Tensor((M, N), T.float16),
                dX: T.Tensor((M, N), T.float16)):
        with T.Kernel(M, threads=256) as r:
            dy = T.alloc_fragment((bc,), T.float32)
            tot = T.alloc_fragment((1,), T.float32)
            part = T.alloc_fragment((1,), T.float32)
            T.clear(tot)
            for c in T.serial(N // bc):
                T.copy(dY[r, c * bc:(c + 1) * bc], dy)
                T.reduce_sum(dy, part, dim=0)
                tot[0] += part[0]
            for c in T.serial(N // bc):
                T.copy(dY[r, c * bc:(c + 1) * bc], dy)
                for j in T.Parallel(bc):
                    dy[j] = dy[j] - T.exp(T.cast(Out[r, c * bc + j], T.float32)) * tot[0]
                T.copy(dy, dX[r, c * bc:(c + 1) * bc])
    return lsm_bwd


def cross_entropy_fwd_bwd(M=127, V=1000, bm=4, bc=256, smoothing=0.1, ignore_index=-100):
    """Cross-entropy with label smoothing and ``ignore_index``, loss and gradient in one
    kernel: an online max / sum-of-exp over column chunks (``T.reduce_max`` into a
    running max with rescaled sums), loss = lse - (1 - eps) x[label] - eps * mean(x), and
    dx = (softmax - (1 - eps) onehot - eps / V) * dloss[row]; ignored rows: zero loss and
    gradient."""
    @T.prim_func
    def ce(X: T.Tensor((M, V), T.bfloat16), labels: T.Tensor((M,), T.int64),
           dloss: T.Tensor((M,), T.float32), loss: T.Tensor((M,), T.float32),
           dX: T.Tensor((M, V), T.bfloat16)):
        with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
            x = T.alloc_fragment((bm, bc), T.float32)
            m = T.alloc_fragment((bm,), T.float32)
            m_new = T.alloc_fragment((bm,), T.float32)
            l = T.alloc_fragment((bm,), T.float32)
            ls = T.alloc_fragment((bm,), T.float32)
            xs = T.alloc_fragment((bm,), T.float32)
            xsum = T.alloc_fragment((bm,), T.float32)
            T.fill(m, -T.infinity(T.float32))
            T.clear(l)
            T.clear(xsum)
            for c in T.serial(T.ceildiv(V, bc)):
                T.copy(X[bx * bm, c * bc], x)
                for i, j in T.Parallel(bm, bc):
                    x[i, j] = T.if_then_else(c * bc + j < V, x[i, j], -T.infinity(T.float32))
                T.copy(m, m_new)
                T.reduce_max(x, m_new, dim=1, clear=False)
                for i, j in T.Parallel(bm, bc):
                    x[i, j] = T.exp(x[i, j] - m_new[i])
                T.reduce_sum(x, ls, dim=1)
                for i in T.Parallel(bm):
                    l[i] = l[i] * T.exp(m[i] - m_new[i]) + ls[i]
                    m[i] = m_new[i]
                T.copy(X[bx * bm, c * bc], x)
                T.reduce_sum(x, xs, dim=1)
                for i in T.Parallel(bm):
                    xsum[i] += xs[i]
            for i in T.Parallel(bm):
                row = bx * bm + i
                if row < M:
                    lab = labels[row]
                    lse = m[i] + T.log(l[i])
                    loss[row] = T.if_then_else(
                        lab == ignore_index, 0.0,
                        lse - (1.0 - smoothing) * T.cast(X[row, T.max(lab, 0)], T.float32)
                        - smoothing * xsum[i] / V)
                    m[i] = lse
            for c in T.serial(T.ceildiv(V, bc)):
                T.copy(X[bx * bm, c * bc], x)
                for i, j in T.Parallel(bm, bc):
                    row = bx * bm + i
                    col = c * bc + j
                    if row < M and col < V:
                        lab = labels[row]
                        g = T.exp(x[i, j] - m[i]) - smoothing / V - T.if_then_else(
                            col == lab, 1.0 - smoothing, 0.0)
                        dX[row, col] = T.cast(T.if_then_else(lab == ignore_index, 0.0, g * dloss[row]),
                                              T.bfloat16)
    return ce


# ---- GEMM epilogues -----------------------------------------------------------------------
def gemm_bias_gelu_residual(M=1000, N=384, K=320, bm=128, bn=128, bk=64):
    """C = gelu_tanh(A @ B + bias) + R in bf16 at M = 1000 (a ragged last row tile): the
    epilogue on the accumulator, R read element-wise, stores past M dropped by the copy."""
    c0 = 0.7978845608028654

    @T.prim_func
    def fused(A: T.Tensor((M, K), T.bfloat16), B: T.Tensor((K, N), T.bfloat16),
              bias: T.Tensor((N,), T.float32), R: T.Tensor((M, N), T.bfloat16),
              C: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=256) as (bx, by):
            a_s = T.alloc_shared((bm, bk), T.bfloat16)
            b_s = T.alloc_shared((bk, bn), T.bfloat16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            r = T.alloc_fragment((bm, bn), T.float32)
            out = T.alloc_fragment((bm, bn), T.bfloat16)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=3):
                T.copy(A[by * bm, k * bk], a_s)
                T.copy(B[k * bk, bx * bn], b_s)
                T.gemm(a_s, b_s, acc)
            T.copy(R[by * bm, bx * bn], r)
            for i, j in T.Parallel(bm, bn):
                x = acc[i, j] + bias[bx * bn + j]
                out[i, j] = 0.5 * x * (1.0 + T.tanh(c0 * (x + 0.044715 * x * x * x))) + r[i, j]
            T.copy(out, C[by * bm, bx * bn])
    return fused


def gemm_swiglu_two_acc(M=127, N=256, K=256, bm=64, bn=64, bk=64):
    """out = silu(A @ Wg) * (A @ Wu): one A tile, two B tiles and two accumulators in
    one pipelined loop (fp16, M = 127)."""
    @T.prim_func
    def swiglu(A: T.Tensor((M, K), T.float16), Wg: T.Tensor((K, N), T.float16),
               Wu: T.Tensor((K, N), T.float16), Out: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            a_s = T.alloc_shared((bm, bk), T.float16)
            g_s = T.alloc_shared((bk, bn), T.float16)
            u_s = T.alloc_shared((bk, bn), T.float16)
            g = T.alloc_fragment((bm, bn), T.float32)
            u = T.alloc_fragment((bm, bn), T.float32)
            T.clear(g)
            T.clear(u)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm, k * bk], a_s)
                T.copy(Wg[k * bk, bx * bn], g_s)
                T.copy(Wu[k * bk, bx * bn], u_s)
                T.gemm(a_s, g_s, g)
                T.gemm(a_s, u_s, u)
            for i, j in T.Parallel(bm, bn):
                g[i, j] = g[i, j] * T.sigmoid(g[i, j]) * u[i, j]
            T.copy(g, Out[by * bm, bx * bn])
    return swiglu


def w8a8_gemm_rowcol_scale(M=1, N=512, K=1024, bm=64, bn=128, bk=128):
    """Decode-shaped W8A8: int8 A (M = 1 row) times int8 B^T into int32, then
    out = acc * sa[m] * sb[n] in bf16 (``transpose_B``, K-major both)."""
    @T.prim_func
    def w8a8(A: T.Tensor((M, K), T.int8), B: T.Tensor((N, K), T.int8),
             sa: T.Tensor((M,), T.float32), sb: T.Tensor((N,), T.float32),
             C: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            a_s = T.alloc_shared((bm, bk), T.int8)
            b_s = T.alloc_shared((bn, bk), T.int8)
            acc = T.alloc_fragment((bm, bn), T.int32)
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=3):
                T.copy(A[by * bm, k * bk], a_s)
                T.copy(B[bx * bn, k * bk], b_s)
                T.gemm(a_s, b_s, acc, transpose_B=True)
            for i, j in T.Parallel(bm, bn):
                if by * bm + i < M:
                    C[by * bm + i, bx * bn + j] = T.cast(
                        T.cast(acc[i, j], T.float32) * sa[by * bm + i] * sb[bx * bn + j], T.bfloat16)
    return w8a8


# ---- split-K with a semaphore -------------------------------------------------------------
def splitk_semaphore(M=256, N=256, K=1024, splits=4, bm=128, bn=128, bk=64):
    """Split-K whose last split reduces: every split stores its float32 partial into a
    workspace and thread 0 adds 1 to the tile's semaphore (``memory_order="release"``) after
    a block barrier; the block of the last split spins on ``T.atomic_load(acquire)`` in a
    ``while`` over a ``T.alloc_var`` until all splits arrived, sums the other partials
    into its accumulator and writes C, then resets the semaphore by ``T.atomic_store``."""
    kper = K // splits

    @T.prim_func
    def splitk(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
               sem: T.Tensor((M // bm, N // bn), T.int32), C: T.Tensor((M, N), T.float16)):
        ws = T.alloc_global((splits, M, N), T.float32)
        with T.Kernel(N // bn, M // bm, splits, threads=128) as (bx, by, bz):
            tx = T.get_thread_binding()
            a_s = T.alloc_shared((bm, bk), T.float16)
            b_s = T.alloc_shared((bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            part = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for k in T.Pipelined(kper // bk, num_stages=2):
                T.copy(A[by * bm, bz * kper + k * bk], a_s)
                T.copy(B[bz * kper + k * bk, bx * bn], b_s)
                T.gemm(a_s, b_s, acc)
            if bz < splits - 1:
                T.copy(acc, ws[bz, by * bm, bx * bn])
                T.sync_threads()
                if tx == 0:
                    T.atomic_add(sem[by, bx], 1, memory_order="release")
            else:
                if tx == 0:
                    seen = T.alloc_var(T.int32, init=T.atomic_load(sem[by, bx], memory_order="acquire"))
                    while seen < splits - 1:
                        seen = T.atomic_load(sem[by, bx], memory_order="acquire")
                    T.atomic_store(sem[by, bx], 0, memory_order="relaxed")
                T.sync_threads()
                for s in T.serial(splits - 1):
                    T.copy(ws[s, by * bm, bx * bn], part)
                    for i, j in T.Parallel(bm, bn):
                        acc[i, j] += part[i, j]
                T.copy(acc, C[by * bm, bx * bn])
    return splitk


# ---- persistent schedules -----------------------------------------------------------------
def persistent_gemm_bias(M=1000, N=384, K=256, bm=128, bn=128, bk=64, sm_num=7, group=4):
    """``T.Persistent`` over the (m, n) tile grid with 7 blocks (several waves, the last
    one partial), ``group_size`` 4, M ragged; a bias epilogue through shared."""
    @T.prim_func
    def pgemm(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
              bias: T.Tensor((N,), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(sm_num, threads=128) as block_id:
            a_s = T.alloc_shared((bm, bk), T.float16)
            b_s = T.alloc_shared((bk, bn), T.float16)
            c_s = T.alloc_shared((bm, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            for mi, ni in T.Persistent([T.ceildiv(M, bm), T.ceildiv(N, bn)], sm_num, block_id,
                                       group_size=group):
                T.clear(acc)
                for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                    T.copy(A[mi * bm, k * bk], a_s)
                    T.copy(B[k * bk, ni * bn], b_s)
                    T.gemm(a_s, b_s, acc)
                for i, j in T.Parallel(bm, bn):
                    acc[i, j] += bias[ni * bn + j]
                T.copy(acc, c_s)
                T.copy(c_s, C[mi * bm, ni * bn])
    return pgemm


def persistent_rmsnorm_rows(M=1000, N=512, bm=8, nblocks=16, eps=1e-6):
    """RMSNorm whose 16 blocks walk the row tiles by a 1-D ``T.Persistent`` domain, the
    weight loaded once per block into shared."""
    @T.prim_func
    def prms(X: T.Tensor((M, N), T.bfloat16), W: T.Tensor((N,), T.bfloat16),
             Y: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(nblocks, threads=128) as bid:
            w_s = T.alloc_shared((N,), T.bfloat16)
            x = T.alloc_fragment((bm, N), T.float32)
            sq = T.alloc_fragment((bm, N), T.float32)
            ss = T.alloc_fragment((bm,), T.float32)
            T.copy(W, w_s)
            for ti in T.Persistent([T.ceildiv(M, bm)], nblocks, bid):
                T.copy(X[ti * bm, 0], x)
                for i, j in T.Parallel(bm, N):
                    sq[i, j] = x[i, j] * x[i, j]
                T.reduce_sum(sq, ss, dim=1)
                for i in T.Parallel(bm):
                    ss[i] = T.rsqrt(ss[i] / N + eps)
                for i, j in T.Parallel(bm, N):
                    x[i, j] = x[i, j] * ss[i] * w_s[j]
                T.copy(x, Y[ti * bm, 0])
    return prms


# ---- explicit warp specialization over a non-GEMM loop ---------------------------------------
def ws_row_logsumexp(M=256, N=2048, bm=16, bc=256, stages=2):
    """Row log-sum-exp streamed by warpgroup 1 (thread copies of (bm, bc) chunks into a
    ring of ``stages`` shared tiles, its 128 threads arriving on ``full``) to warpgroup 0
    (an online max / sum in fragments, releasing the stage on ``empty``)."""
    nch = N // bc

    @T.prim_func
    def lse_ws(X: T.Tensor((M, N), T.float32), out: T.Tensor((M,), T.float32)):
        with T.Kernel(M // bm, threads=256) as bx:
            ring = T.alloc_shared((stages, bm, bc), T.float32)
            x = T.alloc_fragment((bm, bc), T.float32)
            m = T.alloc_fragment((bm,), T.float32)
            m_new = T.alloc_fragment((bm,), T.float32)
            l = T.alloc_fragment((bm,), T.float32)
            ls = T.alloc_fragment((bm,), T.float32)
            full = T.alloc_barrier([128] * stages)
            empty = T.alloc_barrier([128] * stages)
            with T.ws(0):
                T.fill(m, -T.infinity(T.float32))
                T.clear(l)
            for c in T.serial(nch):
                with T.ws(1):
                    T.mbarrier_wait_parity(empty[c % stages], ((c // stages) & 1) ^ 1)
                    T.copy(X[bx * bm:(bx + 1) * bm, c * bc:(c + 1) * bc], ring[c % stages, :, :])
                    T.mbarrier_arrive(full[c % stages])
                with T.ws(0):
                    T.mbarrier_wait_parity(full[c % stages], (c // stages) & 1)
                    T.copy(ring[c % stages, :, :], x)
                    T.mbarrier_arrive(empty[c % stages])
                    T.copy(m, m_new)
                    T.reduce_max(x, m_new, dim=1, clear=False)
                    for i, j in T.Parallel(bm, bc):
                        x[i, j] = T.exp(x[i, j] - m_new[i])
                    T.reduce_sum(x, ls, dim=1)
                    for i in T.Parallel(bm):
                        l[i] = l[i] * T.exp(m[i] - m_new[i]) + ls[i]
                        m[i] = m_new[i]
            with T.ws(0):
                for i in T.Parallel(bm):
                    out[bx * bm + i] = m[i] + T.log(l[i])
    return lse_ws


# ---- T.macro attention over dynamic lengths ------------------------------------------------
def flash_fwd_macros_split_loops(B=2, H=2, D=64, bm=64, bn=64):
    """Causal attention over a ``T.dynamic`` length S, written as TileLang's examples write
    it with macros taking the buffers (``qk``, ``softmax``, ``rescale``, ``pv``), but used
    twice: a pipelined loop over the key tiles wholly below the diagonal without a mask,
    then a serial loop over the diagonal tiles with the causal and the length mask; lse
    written too (log2 units converted to natural)."""
    S = T.dynamic("S")
    scale = (1.0 / D) ** 0.5 * LOG2E

    @T.macro
    def qk(K: T.Tensor((B, S, H, D), T.float16), q_s, k_s, s, kt, h, b):
        T.copy(K[b, kt * bn:(kt + 1) * bn, h, :], k_s)
        T.clear(s)
        T.gemm(q_s, k_s, s, transpose_B=True)

    @T.macro
    def softmax(s, m, m_prev, alpha, l, ls):
        T.copy(m, m_prev)
        T.reduce_max(s, m, dim=1, clear=False)
        for i in T.Parallel(bm):
            alpha[i] = T.exp2((m_prev[i] - m[i]) * scale)
        for i, j in T.Parallel(bm, bn):
            s[i, j] = T.exp2(s[i, j] * scale - m[i] * scale)
        T.reduce_sum(s, ls, dim=1)
        for i in T.Parallel(bm):
            l[i] = l[i] * alpha[i] + ls[i]

    @T.macro
    def rescale(o, alpha):
        for i, d in T.Parallel(bm, D):
            o[i, d] *= alpha[i]

    @T.macro
    def pv(V: T.Tensor((B, S, H, D), T.float16), v_s, s, p, o, kt, h, b):
        T.copy(V[b, kt * bn:(kt + 1) * bn, h, :], v_s)
        T.copy(s, p)
        T.gemm(p, v_s, o)

    @T.prim_func
    def fwd(Q: T.Tensor((B, S, H, D), T.float16), K: T.Tensor((B, S, H, D), T.float16),
            V: T.Tensor((B, S, H, D), T.float16), O: T.Tensor((B, S, H, D), T.float16),
            lse: T.Tensor((B, H, S), T.float32)):
        with T.Kernel(T.ceildiv(S, bm), H, B, threads=128) as (bx, h, b):
            q_s = T.alloc_shared((bm, D), T.float16)
            k_s = T.alloc_shared((bn, D), T.float16)
            v_s = T.alloc_shared((bn, D), T.float16)
            s = T.alloc_fragment((bm, bn), T.float32)
            p = T.alloc_fragment((bm, bn), T.float16)
            o = T.alloc_fragment((bm, D), T.float32)
            m = T.alloc_fragment((bm,), T.float32)
            m_prev = T.alloc_fragment((bm,), T.float32)
            alpha = T.alloc_fragment((bm,), T.float32)
            l = T.alloc_fragment((bm,), T.float32)
            ls = T.alloc_fragment((bm,), T.float32)
            T.copy(Q[b, bx * bm:(bx + 1) * bm, h, :], q_s)
            T.fill(o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(T.float32))
            full = T.floordiv(bx * bm, bn)
            for kt in T.Pipelined(full, num_stages=2):
                qk(K, q_s, k_s, s, kt, h, b)
                softmax(s, m, m_prev, alpha, l, ls)
                rescale(o, alpha)
                pv(V, v_s, s, p, o, kt, h, b)
            for kt in T.serial(full, T.ceildiv(T.min((bx + 1) * bm, S), bn)):
                qk(K, q_s, k_s, s, kt, h, b)
                for i, j in T.Parallel(bm, bn):
                    s[i, j] = T.if_then_else(kt * bn + j <= bx * bm + i and kt * bn + j < S, s[i, j],
                                             -T.infinity(T.float32))
                softmax(s, m, m_prev, alpha, l, ls)
                rescale(o, alpha)
                pv(V, v_s, s, p, o, kt, h, b)
            for i, d in T.Parallel(bm, D):
                if bx * bm + i < S:
                    O[b, bx * bm + i, h, d] = o[i, d] / l[i]
            for i in T.Parallel(bm):
                if bx * bm + i < S:
                    lse[b, h, bx * bm + i] = (m[i] * scale + T.log2(l[i])) / LOG2E
    return fwd


def document_masked_attn(S=256, H=2, D=64, bm=64, bn=64):
    """Packed documents: a key is visible to a query of the same document at or before it
    (doc ids per token in a tensor); key tiles wholly in earlier documents are skipped by
    an ``if`` on the tile's last doc id; a row sees its own key, but a tile (and every tile
    before) may hold none of its document's keys, so the max is guarded."""
    scale = (1.0 / D) ** 0.5 * LOG2E

    @T.prim_func
    def doc_attn(Q: T.Tensor((S, H, D), T.bfloat16), K: T.Tensor((S, H, D), T.bfloat16),
                 V: T.Tensor((S, H, D), T.bfloat16), doc: T.Tensor((S,), T.int32),
                 O: T.Tensor((S, H, D), T.bfloat16)):
        with T.Kernel(S // bm, H, threads=128) as (bx, h):
            q_s = T.alloc_shared((bm, D), T.bfloat16)
            k_s = T.alloc_shared((bn, D), T.bfloat16)
            v_s = T.alloc_shared((bn, D), T.bfloat16)
            dq_s = T.alloc_shared((bm,), T.int32)
            s = T.alloc_fragment((bm, bn), T.float32)
            p = T.alloc_fragment((bm, bn), T.bfloat16)
            o = T.alloc_fragment((bm, D), T.float32)
            m = T.alloc_fragment((bm,), T.float32)
            m_prev = T.alloc_fragment((bm,), T.float32)
            l = T.alloc_fragment((bm,), T.float32)
            ls = T.alloc_fragment((bm,), T.float32)
            T.copy(Q[bx * bm:(bx + 1) * bm, h, :], q_s)
            T.copy(doc[bx * bm:(bx + 1) * bm], dq_s)
            T.fill(o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(T.float32))
            first_doc = doc[bx * bm]
            for kt in T.serial(T.ceildiv((bx + 1) * bm, bn)):
                if doc[kt * bn + bn - 1] >= first_doc:
                    T.copy(K[kt * bn:(kt + 1) * bn, h, :], k_s)
                    T.copy(V[kt * bn:(kt + 1) * bn, h, :], v_s)
                    T.clear(s)
                    T.gemm(q_s, k_s, s, transpose_B=True)
                    for i, j in T.Parallel(bm, bn):
                        qi = bx * bm + i
                        kj = kt * bn + j
                        s[i, j] = T.if_then_else(kj <= qi and doc[kj] == dq_s[i], s[i, j] * scale,
                                                 -T.infinity(T.float32))
                    T.copy(m, m_prev)
                    T.reduce_max(s, m, dim=1, clear=False)
                    # a row may see no key of this tile and none before (its document
                    # starts later): its max is still -inf, and exp2(-inf - -inf) is NaN
                    for i, j in T.Parallel(bm, bn):
                        s[i, j] = T.exp2(s[i, j] - T.if_then_else(
                            m[i] == -T.infinity(T.float32), 0.0, m[i]))
                    T.reduce_sum(s, ls, dim=1)
                    for i in T.Parallel(bm):
                        m_prev[i] = T.exp2(m_prev[i] - T.if_then_else(
                            m[i] == -T.infinity(T.float32), 0.0, m[i]))
                        l[i] = l[i] * m_prev[i] + ls[i]
                    for i, d in T.Parallel(bm, D):
                        o[i, d] *= m_prev[i]
                    T.copy(s, p)
                    T.gemm(p, v_s, o)
            for i, d in T.Parallel(bm, D):
                o[i, d] /= l[i]
            T.copy(o, O[bx * bm:(bx + 1) * bm, h, :])
    return doc_attn


def int8_kv_decode(batch=2, H=4, D=128, S=320, bn=64, bm=16):
    """MHA decode over an int8 KV cache with per-token float scales: each key / value tile
    is dequantized through a fragment into fp16 shared tiles before the GEMMs; the query's
    row padded to 16 rows (rows 1..15 zero, not stored)."""
    scale = (1.0 / D) ** 0.5 * LOG2E

    @T.prim_func
    def dec(Q: T.Tensor((batch, H, D), T.float16), Kq: T.Tensor((batch, H, S, D), T.int8),
            Vq: T.Tensor((batch, H, S, D), T.int8), ks: T.Tensor((batch, H, S), T.float32),
            vs: T.Tensor((batch, H, S), T.float32), O: T.Tensor((batch, H, D), T.float16)):
        with T.Kernel(H, batch, threads=128) as (h, b):
            q_s = T.alloc_shared((bm, D), T.float16)
            k_s = T.alloc_shared((bn, D), T.float16)
            v_s = T.alloc_shared((bn, D), T.float16)
            kq = T.alloc_fragment((bn, D), T.float32)
            s = T.alloc_fragment((bm, bn), T.float32)
            p = T.alloc_fragment((bm, bn), T.float16)
            o = T.alloc_fragment((bm, D), T.float32)
            m = T.alloc_fragment((bm,), T.float32)
            m_prev = T.alloc_fragment((bm,), T.float32)
            l = T.alloc_fragment((bm,), T.float32)
            ls = T.alloc_fragment((bm,), T.float32)
            for i, d in T.Parallel(bm, D):
                q_s[i, d] = T.if_then_else(i == 0, Q[b, h, d], T.float16(0))
            T.fill(o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(T.float32))
            for kt in T.Pipelined(T.ceildiv(S, bn), num_stages=2):
                T.copy(Kq[b, h, kt * bn:(kt + 1) * bn, :], kq)
                for j, d in T.Parallel(bn, D):
                    k_s[j, d] = T.cast(kq[j, d] * ks[b, h, kt * bn + j], T.float16)
                T.copy(Vq[b, h, kt * bn:(kt + 1) * bn, :], kq)
                for j, d in T.Parallel(bn, D):
                    v_s[j, d] = T.cast(kq[j, d] * vs[b, h, kt * bn + j], T.float16)
                T.clear(s)
                T.gemm(q_s, k_s, s, transpose_B=True)
                for i, j in T.Parallel(bm, bn):
                    s[i, j] = T.if_then_else(kt * bn + j < S, s[i, j] * scale, -T.infinity(T.float32))
                T.copy(m, m_prev)
                T.reduce_max(s, m, dim=1, clear=False)
                for i, j in T.Parallel(bm, bn):
                    s[i, j] = T.exp2(s[i, j] - m[i])
                T.reduce_sum(s, ls, dim=1)
                for i in T.Parallel(bm):
                    m_prev[i] = T.exp2(m_prev[i] - m[i])
                    l[i] = l[i] * m_prev[i] + ls[i]
                for i, d in T.Parallel(bm, D):
                    o[i, d] *= m_prev[i]
                T.copy(s, p)
                T.gemm(p, v_s, o)
            for i, d in T.Parallel(bm, D):
                if i == 0:
                    O[b, h, d] = o[i, d] / l[i]
    return dec


# ---- while loops and counters ------------------------------------------------------------
def spec_decode_accept(batch=1000, K=5, vocab=32000):
    """Greedy speculative decoding's acceptance, one thread per sequence: walk the K draft
    tokens ``while`` each equals the target's argmax (``T.alloc_var`` counter), then emit
    the accepted tokens plus the target's token at the first mismatch (or the bonus
    token), -1 padding the rest; accepted counts summed by ``T.atomic_add``."""
    @T.prim_func
    def accept(draft: T.Tensor((batch, K), T.int32), target: T.Tensor((batch, K + 1), T.int32),
               out: T.Tensor((batch, K + 1), T.int32), n_acc: T.Tensor((batch,), T.int32),
               total: T.Tensor((1,), T.int32)):
        with T.Kernel(T.ceildiv(batch, 128), threads=128) as bx:
            tx = T.get_thread_binding()
            r = bx * 128 + tx
            if r < batch:
                n = T.alloc_var(T.int32)
                n = 0
                while n < K and draft[r, n] == target[r, n]:
                    out[r, n] = draft[r, n]
                    n += 1
                out[r, n] = target[r, n]
                for j in T.serial(n + 1, K + 1):
                    out[r, j] = -1
                n_acc[r] = n
                T.atomic_add(total[0], n)
    return accept


def hadamard_rows_shared(M=64, N=256, bm=4):
    """Fast Walsh-Hadamard transform of each row (length N = 2^8), scaled by 1/sqrt(N):
    log2(N) butterfly stages over a shared tile, each stage a T.Parallel over the N/2 pairs
    of every row (partner index by shifts and masks), ping-ponging between two shared
    tiles so that a stage reads what the last one wrote."""
    stages = N.bit_length() - 1

    @T.prim_func
    def fwht(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(M // bm, threads=128) as bx:
            a = T.alloc_shared((bm, N), T.float32)
            c = T.alloc_shared((bm, N), T.float32)
            T.copy(X[bx * bm, 0], a)
            for st in T.serial(stages):
                hstep = 1 << st
                for i, pidx in T.Parallel(bm, N // 2):
                    lo = ((pidx >> st) << (st + 1)) | (pidx & (hstep - 1))
                    hi = lo + hstep
                    if st % 2 == 0:
                        c[i, lo] = a[i, lo] + a[i, hi]
                        c[i, hi] = a[i, lo] - a[i, hi]
                    else:
                        a[i, lo] = c[i, lo] + c[i, hi]
                        a[i, hi] = c[i, lo] - c[i, hi]
            for i, j in T.Parallel(bm, N):
                Y[bx * bm + i, j] = T.if_then_else(stages % 2 == 1, c[i, j], a[i, j]) * (1.0 / N ** 0.5)
    return fwht


# ---- convolutions -------------------------------------------------------------------------
def conv2d_grouped_dilated(N=2, H=17, W=19, C=64, F=128, groups=2, KH=3, KW=3, stride=2, dil=2,
                           pad=2, bm=64, bn=64, bk=32):
    """Grouped, strided, dilated NHWC convolution as an implicit GEMM per group: the
    im2col tile of the group's C/groups channels gathered by a T.Parallel with
    ``T.if_then_else`` padding, the filter tile (F, KH, KW, C/groups) read K-major
    (``transpose_B``); output pixels past N*OH*OW dropped."""
    Cg = C // groups
    Fg = F // groups
    OH = (H + 2 * pad - dil * (KH - 1) - 1) // stride + 1
    OW = (W + 2 * pad - dil * (KW - 1) - 1) // stride + 1
    P = N * OH * OW
    Kdim = KH * KW * Cg

    @T.prim_func
    def conv(X: T.Tensor((N, H, W, C), T.float16), Wt: T.Tensor((F, KH, KW, Cg), T.float16),
             Y: T.Tensor((N, OH, OW, F), T.float16)):
        with T.Kernel(T.ceildiv(Fg, bn), T.ceildiv(P, bm), groups, threads=128) as (bx, by, g):
            a_s = T.alloc_shared((bm, bk), T.float16)
            b_s = T.alloc_shared((bn, bk), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(Kdim, bk), num_stages=2):
                for i, j in T.Parallel(bm, bk):
                    p = by * bm + i
                    kk = k * bk + j
                    n = p // (OH * OW)
                    oh = p % (OH * OW) // OW
                    ow = p % OW
                    kh = kk // (KW * Cg)
                    kw = kk // Cg % KW
                    c = kk % Cg
                    ih = oh * stride + kh * dil - pad
                    iw = ow * stride + kw * dil - pad
                    ok = p < P and kk < Kdim and ih >= 0 and ih < H and iw >= 0 and iw < W
                    a_s[i, j] = T.if_then_else(ok, X[n, ih, iw, g * Cg + c], T.float16(0))
                for i, j in T.Parallel(bn, bk):
                    kk = k * bk + j
                    f = g * Fg + bx * bn + i
                    b_s[i, j] = T.if_then_else(kk < Kdim and bx * bn + i < Fg,
                                               Wt[f, kk // (KW * Cg), kk // Cg % KW, kk % Cg], T.float16(0))
                T.gemm(a_s, b_s, acc, transpose_B=True)
            for i, j in T.Parallel(bm, bn):
                p = by * bm + i
                if p < P and bx * bn + j < Fg:
                    Y[p // (OH * OW), p % (OH * OW) // OW, p % OW, g * Fg + bx * bn + j] = acc[i, j]
    return conv


def causal_conv1d_with_state(B=2, Dm=256, L=100, KW=4, bd=64, bl=32):
    """Mamba's causal depthwise conv1d with an initial state: y[b, d, t] = silu(bias[d] +
    sum_k w[d, k] x[b, d, t - (KW-1) + k]), positions before 0 read from state[b, d, :];
    the final state (the last KW-1 inputs) written back.  Time in chunks of bl through a
    shared window with a (KW-1)-column halo."""
    @T.prim_func
    def conv1d(X: T.Tensor((B, Dm, L), T.float32), Wt: T.Tensor((Dm, KW), T.float32),
               bias: T.Tensor((Dm,), T.float32), state: T.Tensor((B, Dm, KW - 1), T.float32),
               Y: T.Tensor((B, Dm, L), T.float32), state_out: T.Tensor((B, Dm, KW - 1), T.float32)):
        with T.Kernel(Dm // bd, B, threads=128) as (bx, b):
            win = T.alloc_shared((bd, bl + KW - 1), T.float32)
            w_s = T.alloc_shared((bd, KW), T.float32)
            y = T.alloc_fragment((bd, bl), T.float32)
            T.copy(Wt[bx * bd, 0], w_s)
            for c in T.serial(T.ceildiv(L, bl)):
                for d, j in T.Parallel(bd, bl + KW - 1):
                    t = c * bl + j - (KW - 1)
                    win[d, j] = T.if_then_else(
                        t < 0, state[b, bx * bd + d, T.max(t + KW - 1, 0)],
                        T.if_then_else(t < L, X[b, bx * bd + d, T.min(T.max(t, 0), L - 1)], 0.0))
                for d, j in T.Parallel(bd, bl):
                    y[d, j] = bias[bx * bd + d]
                for k in T.unroll(KW):
                    for d, j in T.Parallel(bd, bl):
                        y[d, j] += w_s[d, k] * win[d, j + k]
                for d, j in T.Parallel(bd, bl):
                    if c * bl + j < L:
                        Y[b, bx * bd + d, c * bl + j] = y[d, j] * T.sigmoid(y[d, j])
            for d, k in T.Parallel(bd, KW - 1):
                t = L - (KW - 1) + k
                state_out[b, bx * bd + d, k] = T.if_then_else(t >= 0, X[b, bx * bd + d, T.max(t, 0)],
                                                              state[b, bx * bd + d, T.max(k + L, 0)])
    return conv1d


# ---- fused norms / quant ------------------------------------------------------------------
def add_rmsnorm_fp8_quant(M=127, N=1024, bm=2, eps=1e-6):
    """h = x + residual (written back as the new residual, bf16), y = rmsnorm(h) * w,
    then per-token fp8 e4m3: scale = absmax(y) / 448, q = y / scale."""
    @T.prim_func
    def fused(X: T.Tensor((M, N), T.bfloat16), Res: T.Tensor((M, N), T.bfloat16),
              W: T.Tensor((N,), T.bfloat16), Q: T.Tensor((M, N), T.float8_e4m3fn),
              S: T.Tensor((M,), T.float32)):
        with T.Kernel(T.ceildiv(M, bm), threads=256) as bx:
            h = T.alloc_fragment((bm, N), T.float32)
            r = T.alloc_fragment((bm, N), T.float32)
            hb = T.alloc_fragment((bm, N), T.bfloat16)
            sq = T.alloc_fragment((bm, N), T.float32)
            rs = T.alloc_fragment((bm,), T.float32)
            am = T.alloc_fragment((bm,), T.float32)
            q = T.alloc_fragment((bm, N), T.float8_e4m3fn)
            T.copy(X[bx * bm, 0], h)
            T.copy(Res[bx * bm, 0], r)
            for i, j in T.Parallel(bm, N):
                hb[i, j] = h[i, j] + r[i, j]
            T.copy(hb, Res[bx * bm, 0])
            for i, j in T.Parallel(bm, N):
                h[i, j] = hb[i, j]
                sq[i, j] = h[i, j] * h[i, j]
            T.reduce_sum(sq, rs, dim=1)
            for i in T.Parallel(bm):
                rs[i] = T.rsqrt(rs[i] / N + eps)
            for i, j in T.Parallel(bm, N):
                h[i, j] = T.cast(T.cast(h[i, j] * rs[i], T.bfloat16) * W[j], T.float32)
            T.reduce_absmax(h, am, dim=1)
            for i in T.Parallel(bm):
                am[i] = T.max(am[i], 1e-8) / 448.0
            for i, j in T.Parallel(bm, N):
                q[i, j] = h[i, j] / am[i]
            T.copy(q, Q[bx * bm, 0])
            for i in T.Parallel(bm):
                if bx * bm + i < M:
                    S[bx * bm + i] = am[i]
    return fused


# ---- @jit factories with dynamic dims -----------------------------------------------------
@tilecute.jit(out_idx=[-1])
def jit_dynamic_gemm_tails(block_M=64, block_N=128, block_K=64, dtype=T.bfloat16):
    """M, N, K all ``T.dynamic``: ragged in each (K's tail read as zeros by the copies)."""
    M, N, K = T.dynamic("M"), T.dynamic("N"), T.dynamic("K")

    @T.prim_func
    def dyn(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            a_s = T.alloc_shared((block_M, block_K), dtype)
            b_s = T.alloc_shared((block_K, block_N), dtype)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, k * block_K], a_s)
                T.copy(B[k * block_K, bx * block_N], b_s)
                T.gemm(a_s, b_s, acc)
            T.copy(acc, C[by * block_M, bx * block_N])
    return dyn


def jit_dynamic_gemm_tails_kernel():
    return jit_dynamic_gemm_tails()


# ---- gated linear attention, intra-chunk --------------------------------------------------
def gla_chunk_intra(B=1, H=2, L=256, Dk=64, C=64):
    """GLA's intra-chunk scores A[i, j] = sum_d q[i, d] k[j, d] exp(g[i, d] - g[j, d]) for
    j <= i (g the in-chunk cumulative log-gates, each chunk's first row the reference):
    q * exp(g - g0) and k * exp(g0 - g) staged in fp16 shared tiles, one GEMM, a causal
    mask; written as float32."""
    @T.prim_func
    def intra(Q: T.Tensor((B, H, L, Dk), T.float32), K: T.Tensor((B, H, L, Dk), T.float32),
              G: T.Tensor((B, H, L, Dk), T.float32), A: T.Tensor((B, H, L, C), T.float32)):
        with T.Kernel(L // C, H, B, threads=128) as (c, h, b):
            qg = T.alloc_shared((C, Dk), T.float16)
            kg = T.alloc_shared((C, Dk), T.float16)
            g0 = T.alloc_shared((Dk,), T.float32)
            acc = T.alloc_fragment((C, C), T.float32)
            T.copy(G[b, h, c * C, :], g0)
            for i, d in T.Parallel(C, Dk):
                qg[i, d] = T.cast(Q[b, h, c * C + i, d] * T.exp(G[b, h, c * C + i, d] - g0[d]), T.float16)
                kg[i, d] = T.cast(K[b, h, c * C + i, d] * T.exp(g0[d] - G[b, h, c * C + i, d]), T.float16)
            T.clear(acc)
            T.gemm(qg, kg, acc, transpose_B=True)
            for i, j in T.Parallel(C, C):
                acc[i, j] = T.if_then_else(j <= i, acc[i, j], 0.0)
            T.copy(acc, A[b, h, c * C:(c + 1) * C, :])
    return intra


# ---- scans, masks, searches ---------------------------------------------------------------
def row_compact_above(M=64, N=512, bm=4, thresh=0.5):
    """Stable compaction of each row's values above a threshold to the row's front: a 0/1
    flag tile, its ``T.cumsum`` along dim 1 (in a fragment) gives each kept value's slot;
    the row's count is the scan's last column; the rest of the row is filled with 0."""
    @T.prim_func
    def compact(X: T.Tensor((M, N), T.float32), Out: T.Tensor((M, N), T.float32),
                count: T.Tensor((M,), T.int32)):
        with T.Kernel(M // bm, threads=128) as bx:
            x = T.alloc_fragment((bm, N), T.float32)
            f = T.alloc_fragment((bm, N), T.int32)
            T.copy(X[bx * bm, 0], x)
            for i, j in T.Parallel(bm, N):
                f[i, j] = T.if_then_else(x[i, j] > thresh, 1, 0)
            T.cumsum(f, dim=1)
            for i, j in T.Parallel(bm, N):
                Out[bx * bm + i, j] = 0.0
            T.sync_threads()
            for i, j in T.Parallel(bm, N):
                if x[i, j] > thresh:
                    Out[bx * bm + i, f[i, j] - 1] = x[i, j]
            for i in T.Parallel(bm):
                count[bx * bm + i] = f[i, N - 1]
    return compact


def bucketize_binary_search(n=1000, nb=77):
    """torch.bucketize(x, boundaries, right=False) one thread per value: a ``while lo <
    hi`` binary search over a sorted boundary tensor staged in shared, ``T.alloc_var``
    bounds; values beyond the block's range skipped."""
    @T.prim_func
    def bucketize(x: T.Tensor((n,), T.float32), bnd: T.Tensor((nb,), T.float32),
                  out: T.Tensor((n,), T.int32)):
        with T.Kernel(T.ceildiv(n, 256), threads=256) as bx:
            b_s = T.alloc_shared((nb,), T.float32)
            T.copy(bnd, b_s)
            tx = T.get_thread_binding()
            lo = T.alloc_var(T.int32)
            hi = T.alloc_var(T.int32)
            i = bx * 256 + tx
            if i < n:
                v = x[i]
                lo = 0
                hi = nb
                while lo < hi:
                    mid = (lo + hi) // 2
                    if b_s[mid] < v:
                        lo = mid + 1
                    else:
                        hi = mid
                out[i] = lo
    return bucketize


def groupnorm_middle_dim(Ntok=96, G=8, Cg=16, bt=8, eps=1e-5):
    """Statistics over the middle dim of a 3-D fragment: x viewed (tokens, G, Cg) with the
    tokens of a block reduced along dim 0 per (group, channel) - i.e. per-channel means
    over a token tile, ``T.reduce_sum(dim=0)`` of a 3-D fragment - and per-(token, group)
    means along dim 2; both written out."""
    @T.prim_func
    def gn(X: T.Tensor((Ntok, G * Cg), T.float32), tok_mean: T.Tensor((Ntok, G), T.float32),
           chan_sum: T.Tensor((Ntok // bt, G, Cg), T.float32)):
        with T.Kernel(Ntok // bt, threads=128) as bx:
            x = T.alloc_fragment((bt, G, Cg), T.float32)
            tm = T.alloc_fragment((bt, G), T.float32)
            cs = T.alloc_fragment((G, Cg), T.float32)
            for i, g, c in T.Parallel(bt, G, Cg):
                x[i, g, c] = X[bx * bt + i, g * Cg + c]
            T.reduce_sum(x, tm, dim=2)
            T.reduce_sum(x, cs, dim=0)
            for i, g in T.Parallel(bt, G):
                tok_mean[bx * bt + i, g] = tm[i, g] / Cg
            T.copy(cs, chan_sum[bx, :, :])
    return gn


def bool_mask_fill_count(M=100, N=256, bm=4):
    """masked_fill(X, mask, -inf) from a ``T.bool`` mask tensor, and each row's number of
    True entries by ``T.reduce_sum`` of the mask cast to int32."""
    @T.prim_func
    def mfill(X: T.Tensor((M, N), T.float16), mask: T.Tensor((M, N), T.bool),
              Y: T.Tensor((M, N), T.float16), cnt: T.Tensor((M,), T.int32)):
        with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
            c = T.alloc_fragment((bm, N), T.int32)
            r = T.alloc_fragment((bm,), T.int32)
            for i, j in T.Parallel(bm, N):
                if bx * bm + i < M:
                    Y[bx * bm + i, j] = T.if_then_else(mask[bx * bm + i, j], -T.infinity(T.float16),
                                                       X[bx * bm + i, j])
                c[i, j] = T.if_then_else(bx * bm + i < M, T.cast(mask[T.min(bx * bm + i, M - 1), j], T.int32), 0)
            T.reduce_sum(c, r, dim=1)
            for i in T.Parallel(bm):
                if bx * bm + i < M:
                    cnt[bx * bm + i] = r[i]
    return mfill


def fp8_mixed_gemm_fp8_out(M=256, N=256, K=256, bm=128, bn=128, bk=64):
    """An e4m3 x e5m2 GEMM (the mixed fp8 pair the tensor cores take) with per-tensor
    scales, written back as saturated e4m3."""
    @T.prim_func
    def mixed(A: T.Tensor((M, K), T.float8_e4m3fn), B: T.Tensor((N, K), T.float8_e5m2),
              sa: T.Tensor((1,), T.float32), sb: T.Tensor((1,), T.float32),
              C: T.Tensor((M, N), T.float8_e4m3fn)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            a_s = T.alloc_shared((bm, bk), T.float8_e4m3fn)
            b_s = T.alloc_shared((bn, bk), T.float8_e5m2)
            acc = T.alloc_fragment((bm, bn), T.float32)
            out = T.alloc_fragment((bm, bn), T.float8_e4m3fn)
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm, k * bk], a_s)
                T.copy(B[bx * bn, k * bk], b_s)
                T.gemm(a_s, b_s, acc, transpose_B=True)
            for i, j in T.Parallel(bm, bn):
                out[i, j] = acc[i, j] * sa[0] * sb[0]
            T.copy(out, C[by * bm, bx * bn])
    return mixed


def dynamic_batch_grid_rowmax(H=4, N=128, bm=16):
    """A ``T.dynamic`` batch as the grid's third dim and a dynamic row count in the second:
    row max of (B, H, S, N) with the ragged S tail dropped."""
    B = T.dynamic("B")
    S = T.dynamic("S")

    @T.prim_func
    def rowmax(X: T.Tensor((B, H, S, N), T.float32), Y: T.Tensor((B, H, S), T.float32)):
        with T.Kernel(T.ceildiv(S, bm), H, B, threads=128) as (bx, h, b):
            x = T.alloc_fragment((bm, N), T.float32)
            m = T.alloc_fragment((bm,), T.float32)
            T.copy(X[b, h, bx * bm:(bx + 1) * bm, :], x)
            T.reduce_max(x, m, dim=1)
            T.copy(m, Y[b, h, bx * bm:(bx + 1) * bm])
    return rowmax


def atomic_max_raised(n=4096, buckets=16):
    """Each value atomically maxes into its bucket's float, keeping the old value
    (``return_prev=True``); raised[i] = old < value."""
    @T.prim_func
    def amax(x: T.Tensor((n,), T.float32), bucket: T.Tensor((n,), T.int32),
             best: T.Tensor((buckets,), T.float32), raised: T.Tensor((n,), T.int32)):
        with T.Kernel(n // 256, threads=256) as bx:
            for i in T.Parallel(256):
                v = x[bx * 256 + i]
                old = T.atomic_max(best[bucket[bx * 256 + i]], v, return_prev=True)
                raised[bx * 256 + i] = T.if_then_else(old < v, 1, 0)
    return amax
