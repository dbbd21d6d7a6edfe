"""A forty-eighth set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang): DeepSeek-V3.2 / V4-era sparse attention and block-scaled fp8 --

- sparse MLA forward over a top-k list of token indices (the 512 latent + 64 rope split, KV
  rows gathered by index into shared memory, -1 and future indices masked, T.dynamic
  lengths); the same written as the pipelined example writes it (GEMMs on column slices of
  the shared tiles, a 3-d staged KV buffer, the output in two latent halves); a decode step
  over FlashMLA's fp8 sparse cache (the latent dequantised as it is gathered), and one split
  over the index list with a combine kernel (two kernels in one prim_func);
- V4's MQA sparse attention with a per-head attention sink over a head block wider than the
  heads (the slices past the last head read zeros and are not stored), and with partial
  RoPE rotated in shared memory (gathered rows at their own positions, in the pipeline
  stage the gather filled);
- the lightning indexer: dense over each query block's K window (T.const heads, block_Q
  derived from it, a T.reshape'd 3-d view of the fp8 score fragment summed over heads, the
  result stored transposed), block-sparse over chosen K blocks (int64 block ids, per-row K
  scales, [ks, ke) cut to -inf), the sparse-finetune form over a varlen batch with a
  running top-k kept by a bitonic sort T.macro, and its backward (dW by a dim-0 reduction,
  dQ from a transposed register fragment, dK by atomics); the logits clean-up that marks
  the window's ends +inf;
- top-k selection: a radix select over float16 bit keys (shared histogram by atomics, a
  scan under named barriers, positions by T.atomic_add(return_prev=True)) and an exact
  four-round radix select over float32 bit keys in a ``while`` loop;
- NSA's compressed-block attention (a query sees a block once its last token is at or
  before it); DeepGEMM's fp8 GEMM with 1x128 activation scales stored K-major and 128x128
  weight scales promoted into an fp32 accumulator every K block; the fp8 act_quant with a
  power-of-two (ue8m0) scale computed by IEEE bit manipulation, and over whole rows through a
  T.reshape'd (rows, groups, 128) view reduced by T.reduce_absmax; the sparse MLA backward's
  dQ with gathered K and dKV scattered by float32 atomics.

The file reads as TileLang after swapping its two import lines (``import tilelang`` /
``import tilelang.language as T``); ``tests/test_unseen_programs48.py`` builds each to a cubin
on the CPU, checks what decides the result in the generated source, and on a GPU compares it
with torch."""

import math

import tilecute as tilelang
import tilecute.language as T

LOG2E = 1.44269504


# ---- DeepSeek-V3.2 sparse MLA forward: 512 latent + 64 rope, KV gathered by top-k index ---------
@tilelang.jit(out_idx=[-2, -1])
def sparse_mla_fwd(heads=64, dim=512, tail_dim=64, topk=128, block_I=64, threads=256,
                   sm_scale=None):
    """Each query row s attends its topk KV rows Indices[b, s, :] (MQA over one latent KV
    head); an index of -1 or one past s (causal) scores -inf.  The gathered rows go to shared
    memory by index (the 512 latent dims and the 64 rope dims to separate tiles), the score is
    the sum of two GEMMs, the value is the latent part again.  Returns O and the base-2 LSE."""
    B = T.dynamic("batch")
    S = T.dynamic("seq_len")
    SKV = T.dynamic("seq_len_kv")
    D, DT, H, BI = dim, tail_dim, heads, block_I
    NI = topk // BI
    scale = (sm_scale if sm_scale is not None else (dim + tail_dim) ** -0.5) * LOG2E

    @T.prim_func
    def main(Q: T.Tensor((B, S, H, D + DT), T.bfloat16), KV: T.Tensor((B, SKV, 1, D + DT), T.bfloat16),
             Indices: T.Tensor((B, S, 1, topk), T.int32), Out: T.Tensor((B, S, H, D), T.bfloat16),
             Lse: T.Tensor((B, S, H), T.float32)):
        with T.Kernel(S, B, threads=threads) as (s_i, by):
            Q_s = T.alloc_shared((H, D), T.bfloat16)
            Qt_s = T.alloc_shared((H, DT), T.bfloat16)
            KV_s = T.alloc_shared((BI, D), T.bfloat16)
            Kt_s = T.alloc_shared((BI, DT), T.bfloat16)
            P_s = T.alloc_shared((H, BI), T.bfloat16)
            O_s = T.alloc_shared((H, D), T.bfloat16)
            valid = T.alloc_fragment((BI,), T.bool)
            acc_s = T.alloc_fragment((H, BI), T.float32)
            acc_o = T.alloc_fragment((H, D), T.float32)
            m_i = T.alloc_fragment((H,), T.float32)
            m_prev = T.alloc_fragment((H,), T.float32)
            alpha = T.alloc_fragment((H,), T.float32)
            l_i = T.alloc_fragment((H,), T.float32)
            l_blk = T.alloc_fragment((H,), T.float32)

            T.fill(acc_o, 0)
            T.fill(l_i, 0)
            T.fill(m_i, -(2**30))
            T.copy(Q[by, s_i, :, :D], Q_s)
            T.copy(Q[by, s_i, :, D:], Qt_s)
            for it in T.Pipelined(NI, num_stages=2):
                for bi in T.Parallel(BI):
                    idx = Indices[by, s_i, 0, it * BI + bi]
                    valid[bi] = (idx >= 0) & (idx <= s_i)
                for bi, d in T.Parallel(BI, D):
                    KV_s[bi, d] = KV[by, T.max(Indices[by, s_i, 0, it * BI + bi], 0), 0, d]
                for bi, d in T.Parallel(BI, DT):
                    Kt_s[bi, d] = KV[by, T.max(Indices[by, s_i, 0, it * BI + bi], 0), 0, D + d]
                for h, bi in T.Parallel(H, BI):
                    acc_s[h, bi] = T.if_then_else(valid[bi], 0, -T.infinity(T.float32))
                T.gemm(Q_s, KV_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.gemm(Qt_s, Kt_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(m_i, m_prev)
                T.reduce_max(acc_s, m_i, dim=1, clear=False)
                for h in T.Parallel(H):
                    alpha[h] = T.exp2((m_prev[h] - m_i[h]) * scale)
                for h, bi in T.Parallel(H, BI):
                    acc_s[h, bi] = T.exp2(acc_s[h, bi] * scale - m_i[h] * scale)
                T.reduce_sum(acc_s, l_blk, dim=1)
                for h in T.Parallel(H):
                    l_i[h] = l_i[h] * alpha[h] + l_blk[h]
                for h, d in T.Parallel(H, D):
                    acc_o[h, d] *= alpha[h]
                T.copy(acc_s, P_s)
                T.gemm(P_s, KV_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for h, d in T.Parallel(H, D):
                acc_o[h, d] /= l_i[h]
            for h in T.Parallel(H):
                l_i[h] = T.log2(l_i[h]) + m_i[h] * scale
            T.copy(acc_o, O_s)
            T.copy(O_s, Out[by, s_i, :, :])
            T.copy(l_i, Lse[by, s_i, :])

    return main


# ---- DeepSeek-V4 MQA sparse attention with a per-head sink, a 64-row head block ---------------
@tilelang.jit(out_idx=[3], pass_configs={tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: True})
def sparse_attn_sink_fwd(batch=1, heads=16, seq_len=128, seq_len_kv=512, dim=128, topk=128,
                         block_N=64, threads=256):
    """V4's sparse attention: heads fewer than the 64-row head block, so the Q / sink / output
    slices run past the last head (TileLang guards them: the extra rows read zero and are not
    written).  A bool mask fragment from the indices (-1 pads), the score initialised to 0 or
    -inf before the GEMM, the sink's exp added to each head's denominator at the end."""
    HB = 64
    scale = dim**-0.5 * LOG2E
    NI = T.ceildiv(topk, block_N)

    @T.prim_func
    def main(Q: T.Tensor((batch, seq_len, heads, dim), T.bfloat16),
             KV: T.Tensor((batch, seq_len_kv, dim), T.bfloat16),
             Idx: T.Tensor((batch, seq_len, topk), T.int32),
             Out: T.Tensor((batch, seq_len, heads, dim), T.bfloat16),
             Sinks: T.Tensor((heads,), T.bfloat16)):
        with T.Kernel(T.ceildiv(heads, HB), seq_len, batch, threads=threads) as (hb, s_i, b):
            h0 = hb * HB
            Q_s = T.alloc_shared((HB, dim), T.bfloat16)
            KV_s = T.alloc_shared((block_N, dim), T.bfloat16)
            P_s = T.alloc_shared((HB, block_N), T.bfloat16)
            sink_s = T.alloc_shared((HB,), T.bfloat16)
            O_s = T.alloc_shared((HB, dim), T.bfloat16)
            acc_s = T.alloc_fragment((HB, block_N), T.float32)
            acc_o = T.alloc_fragment((HB, dim), T.float32)
            mx = T.alloc_fragment((HB,), T.float32)
            mx_prev = T.alloc_fragment((HB,), T.float32)
            rescale = T.alloc_fragment((HB,), T.float32)
            psum = T.alloc_fragment((HB,), T.float32)
            denom = T.alloc_fragment((HB,), T.float32)
            ok = T.alloc_fragment((block_N,), T.bool)

            T.copy(Q[b, s_i, h0:h0 + HB, :], Q_s)
            T.copy(Sinks[h0:h0 + HB], sink_s)
            T.fill(acc_o, 0)
            T.fill(denom, 0)
            T.fill(mx, -(2**30))
            for it in T.Pipelined(NI, num_stages=2):
                for j in T.Parallel(block_N):
                    ok[j] = Idx[b, s_i, it * block_N + j] >= 0
                for j, d in T.Parallel(block_N, dim):
                    KV_s[j, d] = KV[b, T.max(Idx[b, s_i, it * block_N + j], 0), d]
                for h, j in T.Parallel(HB, block_N):
                    acc_s[h, j] = T.if_then_else(ok[j], 0, -T.infinity(acc_s.dtype))
                T.gemm(Q_s, KV_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(mx, mx_prev)
                T.reduce_max(acc_s, mx, dim=1, clear=False)
                for h in T.Parallel(HB):
                    mx[h] = T.max(mx[h], mx_prev[h])
                    rescale[h] = T.exp2(mx_prev[h] * scale - mx[h] * scale)
                for h, j in T.Parallel(HB, block_N):
                    acc_s[h, j] = T.exp2(acc_s[h, j] * scale - mx[h] * scale)
                T.reduce_sum(acc_s, psum, dim=1)
                for h, d in T.Parallel(HB, dim):
                    acc_o[h, d] *= rescale[h]
                T.copy(acc_s, P_s)
                T.gemm(P_s, KV_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
                for h in T.Parallel(HB):
                    denom[h] = denom[h] * rescale[h] + psum[h]
            for h in T.Parallel(HB):
                denom[h] += T.exp2(sink_s[h] * LOG2E - mx[h] * scale)
            for h, d in T.Parallel(HB, dim):
                acc_o[h, d] /= denom[h]
            T.copy(acc_o, O_s)
            T.copy(O_s, Out[b, s_i, h0:h0 + HB, :])

    return main


# ---- lightning indexer over selected K blocks (HISA's block-sparse fp8 stage) -----------------
@tilelang.jit
def indexer_block_sparse_fp8(IndexQ, IndexK, KScale, BlockIdx, Weights, KS, KE, heads: int = 32,
                             index_dim: int = 64, kv_block: int = 128, n_blocks: int = 4,
                             block_N: int = 64, threads: int = 128):
    """logits[m, n * kv_block + t] = sum_h relu(q[m, h] . k[blk * kv_block + t] * kscale) *
    w[m, h] over each query's n_blocks chosen K blocks (int64 ids), -inf outside the query's
    [ks, ke) window.  The (block_N, heads) score fragment is summed over heads through a
    T.reshape'd (block_N, 1, heads) view, TileLang's way of keeping a query-row dim."""
    seq_len, seq_len_kv = T.const("seq_len, seq_len_kv")
    IndexQ: T.Tensor[[seq_len * heads, index_dim], T.float8_e4m3fn]
    IndexK: T.Tensor[[seq_len_kv, index_dim], T.float8_e4m3fn]
    KScale: T.Tensor[[seq_len_kv], T.float32]
    BlockIdx: T.Tensor[[seq_len, n_blocks], T.int64]
    Weights: T.Tensor[[seq_len, heads], T.float32]
    KS: T.Tensor[[seq_len], T.int32]
    KE: T.Tensor[[seq_len], T.int32]
    Logits = T.empty((seq_len, n_blocks * kv_block), T.float32)

    with T.Kernel(seq_len, threads=threads) as m:
        q_s = T.alloc_shared((heads, index_dim), T.float8_e4m3fn)
        k_s = T.alloc_shared((block_N, index_dim), T.float8_e4m3fn)
        ks_s = T.alloc_shared((block_N,), T.float32)
        s = T.alloc_fragment((block_N, heads), T.float32)
        s3 = T.reshape(s, (block_N, 1, heads))
        lg = T.alloc_fragment((block_N, 1), T.float32)
        w = T.alloc_fragment((1, heads), T.float32)
        k_lo = KS[m]
        k_hi = KE[m]
        T.copy(IndexQ[m * heads:(m + 1) * heads, :], q_s)
        T.copy(Weights[m, :], w)
        for n in T.serial(n_blocks):
            blk = T.cast(BlockIdx[m, n], T.int32)
            for sub in T.Pipelined(kv_block // block_N, num_stages=1):
                k0 = blk * kv_block + sub * block_N
                T.copy(IndexK[k0:k0 + block_N, :], k_s)
                for j in T.Parallel(block_N):
                    ks_s[j] = KScale[k0 + j]
                T.gemm(k_s, q_s, s, transpose_B=True, clear_accum=True,
                       policy=T.GemmWarpPolicy.FullRow)
                for j, q, h in T.Parallel(block_N, 1, heads):
                    s3[j, q, h] = T.max(s3[j, q, h] * ks_s[j], 0) * w[q, h]
                T.reduce_sum(s3, lg, dim=-1, clear=True)
                for j in T.Parallel(block_N):
                    if k0 + j < k_lo or k0 + j >= k_hi:
                        lg[j, 0] = -T.infinity(T.float32)
                for j in T.Parallel(block_N):
                    Logits[m, n * kv_block + sub * block_N + j] = lg[j, 0]
    return Logits


# ---- the logits clean-up: -inf outside [ks, ke), +inf at its two ends -------------------------
@tilelang.jit
def clean_logits_window(Logits, KS, KE, threads: int = 256, block_K: int = 1024):
    """In place: each row's entries outside [ks, ke) become -inf and the window's first and
    last entries +inf (so a top-k keeps them); a thread binding taken inside the kernel, a
    T.Pipelined loop whose body is plain stores."""
    seq_len, seq_len_kv = T.const("seq_len, seq_len_kv")
    Logits: T.Tensor[[seq_len, seq_len_kv], T.float32]
    KS: T.Tensor[[seq_len], T.int32]
    KE: T.Tensor[[seq_len], T.int32]
    with T.Kernel(seq_len, threads=threads) as row:
        tx = T.thread_binding(0, threads, thread="threadIdx.x")
        lo = KS[row]
        hi = KE[row]
        for c in T.Pipelined(T.ceildiv(seq_len_kv, block_K)):
            for r in T.serial(block_K // threads):
                col = c * block_K + r * threads + tx
                if col < seq_len_kv:
                    if col == lo or col == hi - 1:
                        Logits[row, col] = T.infinity(T.float32)
                    if col < lo or col >= hi:
                        Logits[row, col] = -T.infinity(T.float32)


# ---- radix top-k selector: float16 bit keys, shared histogram, named-barrier scan ----------------
def _desc_key16(x):
    """An 8-bit key of x whose order is x's order (the float16's top byte, sign flipped in)."""
    bits = T.reinterpret(T.cast(x, T.float16), T.uint16)
    bits = T.if_then_else(x < 0, ~bits & 0xFFFF, bits | 0x8000)
    return bits >> 8


@tilelang.jit(out_idx=[1])
def radix_topk_select(topk=64, block=512, per_thread=4, radix=256, cap=2048):
    """index[b, :] = the positions of row b's topk largest values within [starts[b], ends[b])
    (in no order): an 8-bit histogram of float16 keys by shared atomics, a suffix scan of it by
    the first `radix` threads under named barrier 1, the threshold bin; rows above it are
    written at positions taken by atomics, the threshold bin's rows are kept in a shared list
    and the rest of the k taken from it in order.  T.dynamic batch and row length."""
    batch = T.dynamic("batch")
    L = T.dynamic("seq_len")
    chunk = block * per_thread

    @T.prim_func
    def main(x: T.Tensor((batch, L), T.float32), index: T.Tensor((batch, topk), T.int32),
             starts: T.Tensor((batch,), T.int32), ends: T.Tensor((batch,), T.int32)):
        with T.Kernel(batch, threads=block) as b:
            tx = T.get_thread_binding()
            hist = T.alloc_shared((radix + 1,), T.int32)
            thr = T.alloc_shared((1,), T.int32)
            n_eq = T.alloc_shared((1,), T.int32)
            eq_list = T.alloc_shared((cap,), T.int32)
            acc = T.alloc_var(T.int32)
            need = T.alloc_var(T.int32)
            t_bin = T.alloc_var(T.int32)
            key = T.alloc_var(T.int32)
            pos = T.alloc_var(T.int32)
            lo = starts[b]
            hi = ends[b]
            T.fill(hist, 0)
            T.fill(thr, 0)
            T.fill(n_eq, 0)
            T.sync_threads()
            for c in T.serial(T.ceildiv(L, chunk)):
                for j in T.serial(per_thread):
                    p = c * chunk + tx * per_thread + j
                    if p >= lo and p < hi and p < L:
                        T.atomic_add(hist[_desc_key16(x[b, p])], 1)
            T.sync_threads()
            if tx < radix:
                for i in T.serial(8):
                    T.sync_threads(1, radix)
                    if tx < radix - (1 << i):
                        acc = hist[tx] + hist[tx + (1 << i)]
                    T.sync_threads(1, radix)
                    if tx < radix - (1 << i):
                        hist[tx] = acc
                T.sync_threads(1, radix)
                if hist[tx] >= topk and hist[tx + 1] < topk:
                    thr[0] = tx
            T.sync_threads()
            t_bin = thr[0]
            need = topk - hist[t_bin + 1]
            T.sync_threads()
            for c in T.serial(T.ceildiv(L, chunk)):
                for j in T.serial(per_thread):
                    p = c * chunk + tx * per_thread + j
                    if p >= lo and p < hi and p < L:
                        key = T.cast(_desc_key16(x[b, p]), T.int32)
                        if key > t_bin:
                            pos = T.atomic_add(hist[key + 1], 1, return_prev=True)
                            index[b, pos] = p
                        elif key == t_bin and need > 0:
                            pos = T.atomic_add(n_eq[0], 1, return_prev=True)
                            if pos < cap:
                                eq_list[pos] = p
            T.sync_threads()
            for i in T.serial(T.ceildiv(topk, block)):
                r = i * block + tx
                if r < need and r < n_eq[0]:
                    index[b, topk - need + r] = eq_list[r]

    return main


# ---- NSA compressed-block attention ------------------------------------------------------------
@tilelang.jit(out_idx=[3])
def nsa_compressed_attn(heads=32, groups=2, dim=64, cmp_len=32, stride=16, block_C=32,
                        threads=128):
    """Query t of kv group g attends the compressed keys / values of the blocks whose last
    token (c * stride + cmp_len - 1) is at or before t; a query that sees no block outputs
    zero.  The loop runs over ceildiv(visible, block_C) tiles -- a per-block trip count -- and
    the last tile's columns past the visible count are masked.  T.dynamic sequence length and
    compressed-block count; the group's heads are the GEMM's rows."""
    S = T.dynamic("seq_len")
    NC = T.dynamic("n_cmp")
    HG = heads // groups
    scale = dim**-0.5 * LOG2E

    @T.prim_func
    def main(Q: T.Tensor((S, heads, dim), T.bfloat16), Kc: T.Tensor((NC, groups, dim), T.bfloat16),
             Vc: T.Tensor((NC, groups, dim), T.bfloat16), O: T.Tensor((S, heads, dim), T.bfloat16)):
        with T.Kernel(S, groups, threads=threads) as (t, g):
            Q_s = T.alloc_shared((HG, dim), T.bfloat16)
            K_s = T.alloc_shared((block_C, dim), T.bfloat16)
            V_s = T.alloc_shared((block_C, dim), T.bfloat16)
            P_s = T.alloc_shared((HG, block_C), T.bfloat16)
            acc_s = T.alloc_fragment((HG, block_C), T.float32)
            acc_o = T.alloc_fragment((HG, dim), T.float32)
            mx = T.alloc_fragment((HG,), T.float32)
            mx_prev = T.alloc_fragment((HG,), T.float32)
            corr = T.alloc_fragment((HG,), T.float32)
            bsum = T.alloc_fragment((HG,), T.float32)
            tot = T.alloc_fragment((HG,), T.float32)
            n_vis = T.if_then_else(t + 1 >= cmp_len, (t + 1 - cmp_len) // stride + 1, 0)
            T.copy(Q[t, g * HG:(g + 1) * HG, :], Q_s)
            T.fill(acc_o, 0)
            T.fill(tot, 0)
            T.fill(mx, -T.infinity(T.float32))
            for c in T.Pipelined(T.ceildiv(n_vis, block_C), num_stages=2):
                T.copy(Kc[c * block_C:(c + 1) * block_C, g, :], K_s)
                T.copy(Vc[c * block_C:(c + 1) * block_C, g, :], V_s)
                T.clear(acc_s)
                T.gemm(Q_s, K_s, acc_s, transpose_B=True)
                for h, j in T.Parallel(HG, block_C):
                    acc_s[h, j] = T.if_then_else(c * block_C + j < n_vis, acc_s[h, j],
                                                 -T.infinity(T.float32))
                T.copy(mx, mx_prev)
                T.reduce_max(acc_s, mx, dim=1, clear=False)
                for h in T.Parallel(HG):
                    corr[h] = T.exp2((mx_prev[h] - mx[h]) * scale)
                for h, j in T.Parallel(HG, block_C):
                    acc_s[h, j] = T.exp2((acc_s[h, j] - mx[h]) * scale)
                T.reduce_sum(acc_s, bsum, dim=1)
                for h in T.Parallel(HG):
                    tot[h] = tot[h] * corr[h] + bsum[h]
                for h, d in T.Parallel(HG, dim):
                    acc_o[h, d] *= corr[h]
                T.copy(acc_s, P_s)
                T.gemm(P_s, V_s, acc_o)
            for h, d in T.Parallel(HG, dim):
                acc_o[h, d] = T.if_then_else(n_vis > 0, acc_o[h, d] / tot[h], 0)
            T.copy(acc_o, O[t, g * HG:(g + 1) * HG, :])

    return main


# ---- DeepGEMM fp8 GEMM: 1x128 activation scales (K-major), 128x128 weight scales ---------------
@tilelang.jit(out_idx=[2])
def deepgemm_fp8_promote(N=512, K=1024, block_M=64, block_N=64, block_K=128, stages=3,
                         threads=128):
    """C = sum over K blocks k of (A_k @ B_k^T) * sa[k, m] * sb[n // 128, k]: each K block's
    product goes to its own fp32 fragment (clear_accum) and is promoted into the running fp32
    accumulator with the two scales -- DeepGEMM's two-level accumulation.  The activation
    scales are stored K-major (sa[K // 128, M], the TMA-aligned layout) and a 64-wide N block
    shares its weight scale with its neighbour.  T.dynamic M, T.use_swizzle."""
    M = T.dynamic("m")

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float8_e4m3fn), B: T.Tensor((N, K), T.float8_e4m3fn),
             C: T.Tensor((M, N), T.bfloat16), Sa: T.Tensor((K // 128, M), T.float32),
             Sb: T.Tensor((T.ceildiv(N, 128), K // 128), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.float8_e4m3fn)
            B_s = T.alloc_shared((block_N, block_K), T.float8_e4m3fn)
            sa_s = T.alloc_shared((block_M,), T.float32)
            C_s = T.alloc_shared((block_M, block_N), T.bfloat16)
            part = T.alloc_fragment((block_M, block_N), T.float32)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.use_swizzle(panel_size=8)
            T.clear(acc)
            for k in T.Pipelined(K // block_K, num_stages=stages):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[bx * block_N, k * block_K], B_s)
                T.copy(Sa[k, by * block_M:(by + 1) * block_M], sa_s)
                sb = Sb[bx * block_N // 128, k]
                T.gemm(A_s, B_s, part, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(block_M, block_N):
                    acc[i, j] += part[i, j] * sa_s[i] * sb
            T.copy(acc, C_s)
            T.copy(C_s, C[by * block_M, bx * block_N])

    return main


# ---- fp8 act_quant: per 1x128 group absmax, a ue8m0 (power-of-two) scale from the bits ----------
def _log2_ceil_bits(v):
    """ceil(log2(v)) of a positive float32 from its IEEE bits (exponent, plus one when any
    mantissa bit is set)."""
    bits = T.reinterpret(v, T.uint32)
    exp = (bits >> 23) & 0xFF
    man = bits & ((1 << 23) - 1)
    return T.Cast(T.int32, exp) - 127 + T.if_then_else(man != 0, 1, 0)


def _pow2_bits(e):
    """2.0 ** e for an int32 e, built as a float32's bits."""
    return T.reinterpret((e + 127) << 23, T.float32)


@tilelang.jit(pass_configs={tilelang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True})
def act_quant_ue8m0(x, group: int = 128, blk_m: int = 32):
    """y = clamp(x / s, -448, 448) cast to e4m3 per 1x128 group, s = 2 ** ceil(log2(amax /
    448)) (amax floored at 1e-4) computed by bit manipulation; the scale is returned both as
    float32 and as its ue8m0 byte (the biased exponent).  T.dynamic rows (the last row block
    partial), T.const columns, T.Pipelined(1, num_stages=0), non-TMA copies."""
    M = T.dynamic("M")
    N = T.const("N")
    x: T.Tensor[(M, N), T.bfloat16]
    y = T.empty((M, N), T.float8_e4m3fn)
    s = T.empty((M, T.ceildiv(N, group)), T.float32)
    e8 = T.empty((M, T.ceildiv(N, group)), T.uint8)
    with T.Kernel(T.ceildiv(M, blk_m), T.ceildiv(N, group), threads=128) as (bx, by):
        x_s = T.alloc_shared((blk_m, group), T.bfloat16)
        x_l = T.alloc_fragment((blk_m, group), T.bfloat16)
        amax = T.alloc_fragment((blk_m,), T.float32)
        sc = T.alloc_fragment((blk_m,), T.float32)
        y_l = T.alloc_fragment((blk_m, group), T.float8_e4m3fn)
        y_s = T.alloc_shared((blk_m, group), T.float8_e4m3fn)
        for _ in T.Pipelined(1, num_stages=0):
            T.copy(x[bx * blk_m, by * group], x_s, disable_tma=True)
            T.copy(x_s, x_l)
            T.reduce_absmax(x_l, amax, dim=1)
            for i in T.Parallel(blk_m):
                sc[i] = _pow2_bits(_log2_ceil_bits(T.max(amax[i], 1e-4) * (1.0 / 448.0)))
            for i, j in T.Parallel(blk_m, group):
                y_l[i, j] = T.clamp(x_l[i, j] / sc[i], -448.0, 448.0)
            for i in T.Parallel(blk_m):
                s[bx * blk_m + i, by] = sc[i]
                e8[bx * blk_m + i, by] = T.cast((T.reinterpret(sc[i], T.uint32) >> 23) & 0xFF, T.uint8)
            T.copy(y_l, y_s)
            T.copy(y_s, y[bx * blk_m, by * group], disable_tma=True)
    return y, s, e8


# ---- sparse MLA backward: dQ through gathered K, dKV scattered by float32 atomics ---------------
@tilelang.jit(out_idx=[6])
def sparse_mla_bwd_dq_dkv(batch=1, seq_len=64, heads=64, dim=128, tail_dim=64, topk=128,
                          block_I=64, threads=256, sm_scale=None):
    """Given the forward's base-2 LSE and delta = rowsum(dO * O): P = exp2(s * scale - lse),
    dS = P * (dO V^T - delta) * sm_scale over each query's gathered rows; dQ = dS K (latent and
    rope parts), dKV[idx] += dS^T Q (+ P^T dO on the latent part) by float32 atomics at the
    gathered row (dKV is zeroed by the caller); -1 and future indices are skipped (tested
    from the index again: the column mask fragment cannot also index the dKV rows -- TileLang
    and tilecute both refuse that layout)."""
    D, DT, H, BI = dim, tail_dim, heads, block_I
    sm = sm_scale if sm_scale is not None else (dim + tail_dim) ** -0.5
    scale = sm * LOG2E
    NI = topk // BI

    @T.prim_func
    def main(Q: T.Tensor((batch, seq_len, H, D + DT), T.bfloat16),
             KV: T.Tensor((batch, seq_len, D + DT), T.bfloat16),
             dO: T.Tensor((batch, seq_len, H, D), T.bfloat16),
             Idx: T.Tensor((batch, seq_len, topk), T.int32),
             Lse: T.Tensor((batch, seq_len, H), T.float32),
             Delta: T.Tensor((batch, seq_len, H), T.float32),
             dQ: T.Tensor((batch, seq_len, H, D + DT), T.bfloat16),
             dKV: T.Tensor((batch, seq_len, D + DT), T.float32)):
        with T.Kernel(seq_len, batch, threads=threads) as (s_i, b):
            Q_s = T.alloc_shared((H, D), T.bfloat16)
            Qt_s = T.alloc_shared((H, DT), T.bfloat16)
            dO_s = T.alloc_shared((H, D), T.bfloat16)
            KV_s = T.alloc_shared((BI, D), T.bfloat16)
            Kt_s = T.alloc_shared((BI, DT), T.bfloat16)
            P_s = T.alloc_shared((H, BI), T.bfloat16)
            dS_s = T.alloc_shared((H, BI), T.bfloat16)
            valid = T.alloc_fragment((BI,), T.bool)
            lse = T.alloc_fragment((H,), T.float32)
            delta = T.alloc_fragment((H,), T.float32)
            acc_p = T.alloc_fragment((H, BI), T.float32)
            acc_dp = T.alloc_fragment((H, BI), T.float32)
            acc_dq = T.alloc_fragment((H, D), T.float32)
            acc_dqt = T.alloc_fragment((H, DT), T.float32)
            acc_dkv = T.alloc_fragment((BI, D), T.float32)
            acc_dkt = T.alloc_fragment((BI, DT), T.float32)
            T.copy(Q[b, s_i, :, :D], Q_s)
            T.copy(Q[b, s_i, :, D:], Qt_s)
            T.copy(dO[b, s_i, :, :], dO_s)
            T.copy(Lse[b, s_i, :], lse)
            T.copy(Delta[b, s_i, :], delta)
            T.clear(acc_dq)
            T.clear(acc_dqt)
            for it in T.serial(NI):
                for bi in T.Parallel(BI):
                    idx = Idx[b, s_i, it * BI + bi]
                    valid[bi] = (idx >= 0) & (idx <= s_i)
                for bi, d in T.Parallel(BI, D):
                    KV_s[bi, d] = KV[b, T.max(Idx[b, s_i, it * BI + bi], 0), d]
                for bi, d in T.Parallel(BI, DT):
                    Kt_s[bi, d] = KV[b, T.max(Idx[b, s_i, it * BI + bi], 0), D + d]
                for h, bi in T.Parallel(H, BI):
                    acc_p[h, bi] = T.if_then_else(valid[bi], 0, -T.infinity(T.float32))
                T.gemm(Q_s, KV_s, acc_p, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.gemm(Qt_s, Kt_s, acc_p, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                for h, bi in T.Parallel(H, BI):
                    acc_p[h, bi] = T.exp2(acc_p[h, bi] * scale - lse[h])
                T.gemm(dO_s, KV_s, acc_dp, transpose_B=True, clear_accum=True,
                       policy=T.GemmWarpPolicy.FullRow)
                for h, bi in T.Parallel(H, BI):
                    acc_dp[h, bi] = acc_p[h, bi] * (acc_dp[h, bi] - delta[h]) * sm
                T.copy(acc_p, P_s)
                T.copy(acc_dp, dS_s)
                T.gemm(dS_s, KV_s, acc_dq, policy=T.GemmWarpPolicy.FullRow)
                T.gemm(dS_s, Kt_s, acc_dqt, policy=T.GemmWarpPolicy.FullRow)
                T.gemm(dS_s, Q_s, acc_dkv, transpose_A=True, clear_accum=True,
                       policy=T.GemmWarpPolicy.FullRow)
                T.gemm(P_s, dO_s, acc_dkv, transpose_A=True, policy=T.GemmWarpPolicy.FullRow)
                T.gemm(dS_s, Qt_s, acc_dkt, transpose_A=True, clear_accum=True,
                       policy=T.GemmWarpPolicy.FullRow)
                for bi, d in T.Parallel(BI, D):
                    row = Idx[b, s_i, it * BI + bi]
                    if row >= 0 and row <= s_i:
                        T.atomic_add(dKV[b, row, d], acc_dkv[bi, d])
                for bi, d in T.Parallel(BI, DT):
                    row = Idx[b, s_i, it * BI + bi]
                    if row >= 0 and row <= s_i:
                        T.atomic_add(dKV[b, row, D + d], acc_dkt[bi, d])
            T.copy(acc_dq, dQ[b, s_i, :, :D])
            T.copy(acc_dqt, dQ[b, s_i, :, D:])

    return main


# ---- DeepSeek-V3.2 lightning indexer: fp8 q . k per head, ReLU, weighted head sum, causal window -
@tilelang.jit(pass_configs={tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: True})
def lightning_indexer_fp8(IndexQ, IndexK, KScale, Weights, KS, KE, block_N: int = 64,
                          num_stages: int = 2, threads: int = 128, block_Q=None):
    """logits[m, n] = sum_h relu(q[m, h] . k[n]) * w[m, h] * kscale[n] for n in the K range
    the block's block_Q queries span (from the smallest ks to the largest ke, clamped to the K
    length: a per-block T.Pipelined trip count found by T.alloc_var min / max loops);
    entries the kernel does not visit keep the caller's fill.  heads and index_dim are
    T.const (block_Q = 128 // heads is computed from one), the row count and K length
    T.dynamic; the (block_N, block_Q) result is stored transposed into the query rows."""
    heads, index_dim = T.const("heads, index_dim")
    if block_Q is None:
        block_Q = 128 // heads
    S = T.dynamic("seq_len")
    SKV = T.dynamic("seq_len_kv")
    IndexQ: T.Tensor([S * heads, index_dim], T.float8_e4m3fn)
    IndexK: T.Tensor([SKV, index_dim], T.float8_e4m3fn)
    KScale: T.Tensor([SKV], T.float32)
    Weights: T.Tensor([S, heads], T.float32)
    KS: T.Tensor([S], T.int32)
    KE: T.Tensor([S], T.int32)
    Logits = T.empty([S, SKV], T.float32)
    with T.Kernel(T.ceildiv(S, block_Q), threads=threads) as bx:
        q_s = T.alloc_shared([block_Q * heads, index_dim], T.float8_e4m3fn)
        k_s = T.alloc_shared([block_N, index_dim], T.float8_e4m3fn)
        kscale = T.alloc_fragment([block_N], T.float32)
        s = T.alloc_fragment([block_N, block_Q * heads], T.float32)
        s3 = T.reshape(s, (block_N, block_Q, heads))
        lg = T.alloc_fragment([block_N, block_Q], T.float32)
        w = T.alloc_fragment([block_Q, heads], T.float32)
        q0 = bx * block_Q
        k_lo = T.alloc_var(T.int32)
        k_hi = T.alloc_var(T.int32)
        k_lo = 2147483647
        k_hi = -2147483648
        for q in T.serial(block_Q):
            k_lo = T.min(k_lo, T.min(KS[q0 + q], SKV))
        for q in T.serial(block_Q):
            k_hi = T.max(k_hi, T.min(KE[q0 + q], SKV))
        T.copy(IndexQ[q0 * heads, 0], q_s)
        T.copy(Weights[q0, 0], w)
        for n in T.Pipelined(T.ceildiv(k_hi - k_lo, block_N), num_stages=num_stages):
            T.copy(IndexK[k_lo + n * block_N, 0], k_s)
            T.copy(KScale[k_lo + n * block_N], kscale)
            T.gemm(k_s, q_s, s, transpose_B=True, clear_accum=True, policy=T.GemmWarpPolicy.FullCol)
            for j, q, h in T.Parallel(block_N, block_Q, heads):
                s3[j, q, h] = T.max(s3[j, q, h], 0) * w[q, h] * kscale[j]
            T.reduce_sum(s3, lg, dim=-1, clear=True)
            for q, j in T.Parallel(block_Q, block_N):
                Logits[q0 + q, k_lo + n * block_N + j] = lg[j, q]
    return Logits


# ---- sparse MLA forward with the latent split in two: GEMMs on column slices of shared tiles -----
@tilelang.jit(out_idx=[-1])
def sparse_mla_fwd_split_latent(heads=64, dim=512, tail_dim=64, topk=128, block_I=64,
                                threads=256):
    """The V3.2 forward again, written as its pipelined form writes it: one shared tile holds a
    gathered row's latent and rope dims together, the scores are T.gemm's on column slices of
    the Q and KV tiles (two latent halves, then the rope part), two stages of the KV tile are
    one 3-d shared buffer indexed by a T.unroll stage, and the output is two (H, dim / 2)
    accumulators, each a GEMM on its half of the KV tile's latent columns."""
    S = T.dynamic("seq_len")
    SKV = T.dynamic("seq_len_kv")
    D, DT, H, BI = dim, tail_dim, heads, block_I
    DH = dim // 2
    NI = topk // BI
    scale = (dim + tail_dim) ** -0.5 * LOG2E

    @T.prim_func
    def main(Q: T.Tensor((S, H, D + DT), T.bfloat16), KV: T.Tensor((SKV, D + DT), T.bfloat16),
             Indices: T.Tensor((S, topk), T.int32), Out: T.Tensor((S, H, D), T.bfloat16)):
        with T.Kernel(S, threads=threads) as s_i:
            Q_s = T.alloc_shared((H, D + DT), T.bfloat16)
            KV_s = T.alloc_shared((2, BI, D + DT), T.bfloat16)
            P_s = T.alloc_shared((H, BI), T.bfloat16)
            ok = T.alloc_fragment((BI,), T.bool)
            acc_s = T.alloc_fragment((H, BI), T.float32)
            acc_l = T.alloc_fragment((H, DH), T.float32)
            acc_r = T.alloc_fragment((H, DH), T.float32)
            m_i = T.alloc_fragment((H,), T.float32)
            m_prev = T.alloc_fragment((H,), T.float32)
            alpha = T.alloc_fragment((H,), T.float32)
            l_i = T.alloc_fragment((H,), T.float32)
            l_blk = T.alloc_fragment((H,), T.float32)
            T.copy(Q[s_i, :, :], Q_s)
            T.fill(acc_l, 0)
            T.fill(acc_r, 0)
            T.fill(l_i, 0)
            T.fill(m_i, -(2**30))
            for i in T.serial(NI // 2):
                for st in T.unroll(2):
                    for bi, d in T.Parallel(BI, D + DT):
                        KV_s[st, bi, d] = KV[T.max(Indices[s_i, (i * 2 + st) * BI + bi], 0), d]
                    for bi in T.Parallel(BI):
                        ok[bi] = Indices[s_i, (i * 2 + st) * BI + bi] >= 0
                    for h, bi in T.Parallel(H, BI):
                        acc_s[h, bi] = T.if_then_else(ok[bi], 0, -T.infinity(T.float32))
                    T.gemm(Q_s[:, :DH], KV_s[st, :, :DH], acc_s, transpose_B=True)
                    T.gemm(Q_s[:, DH:D], KV_s[st, :, DH:D], acc_s, transpose_B=True)
                    T.gemm(Q_s[:, D:], KV_s[st, :, D:], acc_s, transpose_B=True)
                    T.copy(m_i, m_prev)
                    T.reduce_max(acc_s, m_i, dim=1, clear=False)
                    for h in T.Parallel(H):
                        alpha[h] = T.exp2((m_prev[h] - m_i[h]) * scale)
                    for h, bi in T.Parallel(H, BI):
                        acc_s[h, bi] = T.exp2(acc_s[h, bi] * scale - m_i[h] * scale)
                    T.reduce_sum(acc_s, l_blk, dim=1)
                    for h in T.Parallel(H):
                        l_i[h] = l_i[h] * alpha[h] + l_blk[h]
                    for h, d in T.Parallel(H, DH):
                        acc_l[h, d] *= alpha[h]
                        acc_r[h, d] *= alpha[h]
                    T.copy(acc_s, P_s)
                    T.gemm(P_s, KV_s[st, :, :DH], acc_l)
                    T.gemm(P_s, KV_s[st, :, DH:D], acc_r)
            for h, d in T.Parallel(H, DH):
                acc_l[h, d] /= l_i[h]
                acc_r[h, d] /= l_i[h]
            T.copy(acc_l, Out[s_i, :, :DH])
            T.copy(acc_r, Out[s_i, :, DH:])

    return main


# ---- the sparse-finetune indexer: scores over a varlen batch, a running top-k by bitonic sort ----
@tilelang.jit(out_idx=[5, 6])
def indexer_topk_softmax(heads=16, dim=64, topk=64, block_K=32, threads=128, sm_scale=None):
    """For token t (sequence TokenIdx[t, 0], position TokenIdx[t, 1] in it, the sequence's rows
    from Offsets[seq]): score[k] = sum_h relu(q_h . k * sm_scale) * w_h over the causal keys
    k <= pos, the top-k of them kept in a 2 * topk shared buffer -- new blocks go to the lower
    half until it is full, then round the upper half, and a bitonic sort (a T.macro on
    T.SharedBuffer parameters) puts the best first whenever the upper half fills -- then a
    softmax over the k.  Indices past pos (or never filled) are written -1.  The key tile and
    the score fragment are allocated inside the T.Pipelined loop, as the example does."""
    N = 2 * topk
    n_rounds = int(math.log2(N))
    scale = sm_scale if sm_scale is not None else dim**-0.5
    S = T.dynamic("tokens")
    NB = T.dynamic("n_seqs_plus_one")

    @T.macro
    def _bitonic(idx_s: T.SharedBuffer([N], T.int32), val_s: T.SharedBuffer([N], T.float32)):
        T.sync_threads()
        for stage in T.serial(n_rounds):
            for sub in T.serial(stage + 1):
                for i in T.Parallel(N):
                    other = i ^ (1 << (stage - sub))
                    up = (i & (2 << stage)) != 0
                    if i < other and ((up and val_s[i] > val_s[other]) or
                                      (not up and val_s[i] < val_s[other])):
                        v = val_s[i]
                        val_s[i] = val_s[other]
                        val_s[other] = v
                        j = idx_s[i]
                        idx_s[i] = idx_s[other]
                        idx_s[other] = j
                T.sync_threads()

    @T.prim_func
    def main(Q: T.Tensor((S, heads, dim), T.bfloat16), W: T.Tensor((S, heads), T.float32),
             K: T.Tensor((S, dim), T.bfloat16), Offsets: T.Tensor((NB,), T.int32),
             TokenIdx: T.Tensor((S, 2), T.int32), TopIdx: T.Tensor((S, topk), T.int32),
             Prob: T.Tensor((S, topk), T.float32)):
        with T.Kernel(S, threads=threads) as t:
            seq, pos = TokenIdx[t, 0], TokenIdx[t, 1]
            bos = Offsets[seq]
            idx_s = T.alloc_shared([N], T.int32)
            val_s = T.alloc_shared([N], T.float32)
            q_s = T.alloc_shared([heads, dim], T.bfloat16)
            w_s = T.alloc_shared([heads], T.float32)
            T.fill(idx_s, -1)
            T.fill(val_s, -T.infinity(T.float32))
            T.copy(Q[bos + pos, :, :], q_s)
            T.copy(W[bos + pos, :], w_s)
            T.sync_threads()
            for kb in T.Pipelined(T.ceildiv(pos + 1, block_K), num_stages=0):
                k0 = kb * block_K
                k_s = T.alloc_shared([block_K, dim], T.bfloat16)
                for i, d in T.Parallel(block_K, dim):
                    k_s[i, d] = T.if_then_else(k0 + i <= pos, K[bos + k0 + i, d], 0)
                sc = T.alloc_fragment((block_K, heads), T.float32)
                T.gemm(k_s, q_s, sc, transpose_B=True, clear_accum=True)
                for i, h in T.Parallel(block_K, heads):
                    sc[i, h] = T.max(sc[i, h] * scale, 0) * w_s[h]
                tot = T.alloc_fragment((block_K,), T.float32)
                T.reduce_sum(sc, tot, dim=1)
                base = T.alloc_var(T.int32)
                if k0 >= topk:
                    base = topk + k0 % topk
                else:
                    base = k0
                for i in T.Parallel(block_K):
                    idx_s[base + i] = k0 + i
                    val_s[base + i] = T.if_then_else(k0 + i <= pos, tot[i], -T.infinity(T.float32))
                if k0 + block_K > topk and (k0 + block_K) % topk == 0:
                    _bitonic(idx_s, val_s)
            _bitonic(idx_s, val_s)
            p = T.alloc_fragment([topk], T.float32)
            mx = T.alloc_fragment([1], T.float32)
            tot_p = T.alloc_fragment([1], T.float32)
            T.copy(val_s[:topk], p)
            T.reduce_max(p, mx, dim=-1)
            for i in T.Parallel(topk):
                p[i] = T.exp(p[i] - mx[0])
            T.reduce_sum(p, tot_p)
            for i in T.Parallel(topk):
                Prob[t, i] = p[i] / tot_p[0]
                TopIdx[t, i] = T.if_then_else(idx_s[i] > pos, -1, idx_s[i])

    return main


# ---- exact radix top-k: four 8-bit rounds over float32 bit keys ---------------------------------
def _desc_key32(x):
    """A uint32 key of the float32 x whose order is x's order (sign flipped in, negatives'
    bits inverted)."""
    bits = T.reinterpret(x, T.uint32)
    return T.if_then_else(x < 0, ~bits & T.cast(0xFFFFFFFF, T.uint32), bits | T.cast(0x80000000, T.uint32))


@tilelang.jit(out_idx=[1])
def radix_topk_exact(topk=32, block=256, cap=1024):
    """index[b, :] = the positions of the topk largest of x[b, :lens[b]] (in no order), exact:
    a ``while`` over up to four rounds, each an 8-bit histogram (bits 31..24, then 23..16, ...:
    a shift by the round) of the round's candidates -- the whole row first, then the
    threshold bin's positions, kept in a (2, cap) shared list by round parity -- its suffix
    scan, and the keys above the threshold bin placed at once; the fourth round's equal keys
    (equal values) fill what is left.  T.dynamic batch and row length."""
    radix = 256
    batch = T.dynamic("batch")
    L = T.dynamic("seq_len")

    @T.prim_func
    def main(x: T.Tensor((batch, L), T.float32), index: T.Tensor((batch, topk), T.int32),
             lens: T.Tensor((batch,), T.int32)):
        with T.Kernel(batch, threads=block) as b:
            tx = T.get_thread_binding()
            hist = T.alloc_shared((radix + 1,), T.int32)
            cand = T.alloc_shared((2, cap), T.int32)
            n_cand = T.alloc_shared((2,), T.int32)
            n_out = T.alloc_shared((1,), T.int32)
            n_eq = T.alloc_shared((1,), T.int32)
            thr = T.alloc_shared((1,), T.int32)
            acc = T.alloc_var(T.int32)
            need = T.alloc_var(T.int32)
            rnd = T.alloc_var(T.int32)
            cnt = T.alloc_var(T.int32)
            t_bin = T.alloc_var(T.int32)
            above = T.alloc_var(T.int32)
            key = T.alloc_var(T.int32)
            p = T.alloc_var(T.int32)
            pos = T.alloc_var(T.int32)
            n = lens[b]
            need = topk
            rnd = 0
            if tx == 0:
                n_out[0] = 0
                n_eq[0] = 0
                n_cand[0] = 0
            while rnd < 4 and need > 0:
                hist[tx] = 0
                if tx == 0:
                    hist[radix] = 0
                    thr[0] = 0
                    n_cand[(rnd + 1) % 2] = 0
                T.sync_threads()
                cnt = T.if_then_else(rnd == 0, n, n_cand[rnd % 2])
                for c in T.serial(T.ceildiv(cnt, block)):
                    if c * block + tx < cnt:
                        p = T.if_then_else(rnd == 0, c * block + tx, cand[rnd % 2, c * block + tx])
                        key = T.cast((_desc_key32(x[b, p]) >> T.cast(24 - rnd * 8, T.uint32)) & 0xFF, T.int32)
                        T.atomic_add(hist[key], 1)
                T.sync_threads()
                if tx < radix:
                    for i in T.serial(8):
                        if tx < radix - (1 << i):
                            acc = hist[tx] + hist[tx + (1 << i)]
                        T.sync_threads(2, radix)
                        if tx < radix - (1 << i):
                            hist[tx] = acc
                        T.sync_threads(2, radix)
                    if hist[tx] >= need and hist[tx + 1] < need:
                        thr[0] = tx
                T.sync_threads()
                t_bin = thr[0]
                above = hist[t_bin + 1]
                for c in T.serial(T.ceildiv(cnt, block)):
                    if c * block + tx < cnt:
                        p = T.if_then_else(rnd == 0, c * block + tx, cand[rnd % 2, c * block + tx])
                        key = T.cast((_desc_key32(x[b, p]) >> T.cast(24 - rnd * 8, T.uint32)) & 0xFF, T.int32)
                        if key > t_bin:
                            pos = T.atomic_add(n_out[0], 1, return_prev=True)
                            index[b, pos] = p
                        elif key == t_bin:
                            if rnd == 3:
                                pos = T.atomic_add(n_eq[0], 1, return_prev=True)
                                if pos < need - above:
                                    index[b, topk - need + above + pos] = p
                            else:
                                pos = T.atomic_add(n_cand[(rnd + 1) % 2], 1, return_prev=True)
                                if pos < cap:
                                    cand[(rnd + 1) % 2, pos] = p
                T.sync_threads()
                need = need - above
                rnd = rnd + 1

    return main


# ---- V4-style sparse attention with partial RoPE applied in shared memory -------------------------
@tilelang.jit(out_idx=[5])
def sparse_attn_partial_rope(heads=64, dim=128, rope_dim=64, topk=128, block_N=64, threads=256):
    """The rope is part of the head dim (its last rope_dim dims, rotated in halves): Q's rope
    dims are rotated in its shared tile at the query's position, and each gathered KV row's at
    that row's own position (cos / sin rows read through the index) -- in place in the
    T.Pipelined stage the gather filled, before the QK^T GEMM reads it; the rotated rows are
    also the values.  -1 indices masked."""
    S = T.dynamic("seq_len")
    SKV = T.dynamic("seq_len_kv")
    R0 = dim - rope_dim
    half = rope_dim // 2
    scale = dim**-0.5 * LOG2E

    @T.prim_func
    def main(Q: T.Tensor((S, heads, dim), T.bfloat16), KV: T.Tensor((SKV, dim), T.bfloat16),
             Cos: T.Tensor((SKV, half), T.float32), Sin: T.Tensor((SKV, half), T.float32),
             Idx: T.Tensor((S, topk), T.int32), Out: T.Tensor((S, heads, dim), T.bfloat16)):
        with T.Kernel(S, threads=threads) as s_i:
            Q_s = T.alloc_shared((heads, dim), T.bfloat16)
            KV_s = T.alloc_shared((block_N, dim), T.bfloat16)
            P_s = T.alloc_shared((heads, block_N), T.bfloat16)
            ok = T.alloc_fragment((block_N,), T.bool)
            acc_s = T.alloc_fragment((heads, block_N), T.float32)
            acc_o = T.alloc_fragment((heads, dim), T.float32)
            mx = T.alloc_fragment((heads,), T.float32)
            mx_prev = T.alloc_fragment((heads,), T.float32)
            alpha = T.alloc_fragment((heads,), T.float32)
            l_i = T.alloc_fragment((heads,), T.float32)
            l_blk = T.alloc_fragment((heads,), T.float32)
            T.copy(Q[s_i, :, :], Q_s)
            for h, d in T.Parallel(heads, half):
                x1 = T.cast(Q_s[h, R0 + d], T.float32)
                x2 = T.cast(Q_s[h, R0 + half + d], T.float32)
                Q_s[h, R0 + d] = x1 * Cos[s_i, d] - x2 * Sin[s_i, d]
                Q_s[h, R0 + half + d] = x2 * Cos[s_i, d] + x1 * Sin[s_i, d]
            T.fill(acc_o, 0)
            T.fill(l_i, 0)
            T.fill(mx, -(2**30))
            for it in T.Pipelined(topk // block_N, num_stages=2):
                for j, d in T.Parallel(block_N, dim):
                    KV_s[j, d] = KV[T.max(Idx[s_i, it * block_N + j], 0), d]
                for j, d in T.Parallel(block_N, half):
                    r = T.max(Idx[s_i, it * block_N + j], 0)
                    y1 = T.cast(KV_s[j, R0 + d], T.float32)
                    y2 = T.cast(KV_s[j, R0 + half + d], T.float32)
                    KV_s[j, R0 + d] = y1 * Cos[r, d] - y2 * Sin[r, d]
                    KV_s[j, R0 + half + d] = y2 * Cos[r, d] + y1 * Sin[r, d]
                for j in T.Parallel(block_N):
                    ok[j] = Idx[s_i, it * block_N + j] >= 0
                for h, j in T.Parallel(heads, block_N):
                    acc_s[h, j] = T.if_then_else(ok[j], 0, -T.infinity(T.float32))
                T.gemm(Q_s, KV_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(mx, mx_prev)
                T.reduce_max(acc_s, mx, dim=1, clear=False)
                for h in T.Parallel(heads):
                    alpha[h] = T.exp2((mx_prev[h] - mx[h]) * scale)
                for h, j in T.Parallel(heads, block_N):
                    acc_s[h, j] = T.exp2(acc_s[h, j] * scale - mx[h] * scale)
                T.reduce_sum(acc_s, l_blk, dim=1)
                for h in T.Parallel(heads):
                    l_i[h] = l_i[h] * alpha[h] + l_blk[h]
                for h, d in T.Parallel(heads, dim):
                    acc_o[h, d] *= alpha[h]
                T.copy(acc_s, P_s)
                T.gemm(P_s, KV_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for h, d in T.Parallel(heads, dim):
                acc_o[h, d] /= l_i[h]
            T.copy(acc_o, Out[s_i, :, :])

    return main


# ---- sparse MLA decode over an fp8 KV cache: dequantised while gathered ---------------------------
@tilelang.jit(out_idx=[-1])
def sparse_mla_decode_fp8_cache(heads=64, dim=512, tail_dim=64, topk=128, block_I=64, tile=128,
                                threads=256):
    """FlashMLA's fp8 sparse cache: per token the 512 latent dims as e4m3 with one float32
    scale per 128-dim tile, and the 64 rope dims in bf16.  A decode step (one query row per
    batch entry, all heads) gathers its topk tokens from the cache, dequantising the latent
    part (e4m3 -> float32, times its tile's scale, -> bf16) as it stores the row to shared
    memory; -1 indices are masked.  T.dynamic batch and cache length."""
    B = T.dynamic("batch")
    SKV = T.dynamic("cache_len")
    D, DT, H, BI = dim, tail_dim, heads, block_I
    scale = (dim + tail_dim) ** -0.5 * LOG2E

    @T.prim_func
    def main(Q: T.Tensor((B, H, D + DT), T.bfloat16), Kq: T.Tensor((SKV, D), T.float8_e4m3fn),
             Ks: T.Tensor((SKV, D // tile), T.float32), Kr: T.Tensor((SKV, DT), T.bfloat16),
             Idx: T.Tensor((B, topk), T.int32), Out: T.Tensor((B, H, D), T.bfloat16)):
        with T.Kernel(B, threads=threads) as b:
            Q_s = T.alloc_shared((H, D), T.bfloat16)
            Qt_s = T.alloc_shared((H, DT), T.bfloat16)
            KV_s = T.alloc_shared((BI, D), T.bfloat16)
            Kt_s = T.alloc_shared((BI, DT), T.bfloat16)
            P_s = T.alloc_shared((H, BI), T.bfloat16)
            ok = T.alloc_fragment((BI,), T.bool)
            acc_s = T.alloc_fragment((H, BI), T.float32)
            acc_o = T.alloc_fragment((H, D), T.float32)
            mx = T.alloc_fragment((H,), T.float32)
            mx_prev = T.alloc_fragment((H,), T.float32)
            alpha = T.alloc_fragment((H,), T.float32)
            l_i = T.alloc_fragment((H,), T.float32)
            l_blk = T.alloc_fragment((H,), T.float32)
            T.copy(Q[b, :, :D], Q_s)
            T.copy(Q[b, :, D:], Qt_s)
            T.fill(acc_o, 0)
            T.fill(l_i, 0)
            T.fill(mx, -(2**30))
            for it in T.Pipelined(topk // BI, num_stages=2):
                for bi, d in T.Parallel(BI, D):
                    row = T.max(Idx[b, it * BI + bi], 0)
                    KV_s[bi, d] = T.cast(T.cast(Kq[row, d], T.float32) * Ks[row, d // tile], T.bfloat16)
                for bi, d in T.Parallel(BI, DT):
                    Kt_s[bi, d] = Kr[T.max(Idx[b, it * BI + bi], 0), d]
                for bi in T.Parallel(BI):
                    ok[bi] = Idx[b, it * BI + bi] >= 0
                for h, bi in T.Parallel(H, BI):
                    acc_s[h, bi] = T.if_then_else(ok[bi], 0, -T.infinity(T.float32))
                T.gemm(Q_s, KV_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.gemm(Qt_s, Kt_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(mx, mx_prev)
                T.reduce_max(acc_s, mx, dim=1, clear=False)
                for h in T.Parallel(H):
                    alpha[h] = T.exp2((mx_prev[h] - mx[h]) * scale)
                for h, bi in T.Parallel(H, BI):
                    acc_s[h, bi] = T.exp2(acc_s[h, bi] * scale - mx[h] * scale)
                T.reduce_sum(acc_s, l_blk, dim=1)
                for h in T.Parallel(H):
                    l_i[h] = l_i[h] * alpha[h] + l_blk[h]
                for h, d in T.Parallel(H, D):
                    acc_o[h, d] *= alpha[h]
                T.copy(acc_s, P_s)
                T.gemm(P_s, KV_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for h, d in T.Parallel(H, D):
                acc_o[h, d] /= l_i[h]
            T.copy(acc_o, Out[b, :, :])

    return main


# ---- the indexer's backward: dQ, dW per token, dK scattered by atomics ---------------------------
@tilelang.jit(out_idx=[8, 9], pass_configs={tilelang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True})
def indexer_bwd(heads=16, dim=64, topk=64, block_I=32, threads=128, sm_scale=None):
    """The indexer score of key i for token t is sum_h w_h relu(sm q_h . k_i); its gradient
    is g_i = Pidx_i - Pattn_i (the indexer's softmax against the attention's).  Per token
    (varlen: Offsets / TokenIdx): dW_h = sum_i g_i relu(.), dQ_h = sm sum_i g_i w_h [. > 0] k_i,
    and dK[idx_i] += the same with q_h, by float32 atomics into the caller's zeroed dK --
    gathered keys past the token or -1 are zero rows and are not scattered.  The ReLU's
    derivative is a T.alloc_var set by an if / else inside the T.Parallel body, dW is a
    T.reduce_sum over dim 0 of a score-shaped fragment (clear=False across the blocks), and
    dQ is a GEMM whose A operand is a register fragment, transposed."""
    scale = sm_scale if sm_scale is not None else dim**-0.5
    S = T.dynamic("tokens")
    NB = T.dynamic("n_seqs_plus_one")

    @T.prim_func
    def main(Q: T.Tensor((S, heads, dim), T.bfloat16), W: T.Tensor((S, heads), T.bfloat16),
             K: T.Tensor((S, dim), T.bfloat16), Pattn: T.Tensor((S, topk), T.float32),
             Pidx: T.Tensor((S, topk), T.float32), Idx: T.Tensor((S, topk), T.int32),
             Offsets: T.Tensor((NB,), T.int32), TokenIdx: T.Tensor((S, 2), T.int32),
             dQ: T.Tensor((S, heads, dim), T.bfloat16), dW: T.Tensor((S, heads), T.bfloat16),
             dK: T.Tensor((S, dim), T.float32)):
        with T.Kernel(S, threads=threads) as t:
            seq, pos = TokenIdx[t, 0], TokenIdx[t, 1]
            bos = Offsets[seq]
            q_s = T.alloc_shared((heads, dim), T.bfloat16)
            w_s = T.alloc_shared((heads,), T.bfloat16)
            dq = T.alloc_fragment((heads, dim), T.float32)
            dw = T.alloc_fragment((heads,), T.float32)
            T.copy(Q[bos + pos, :, :], q_s)
            T.copy(W[bos + pos, :], w_s)
            T.fill(dq, 0)
            T.fill(dw, 0)
            for i, d in T.Parallel(heads, dim):
                q_s[i, d] = q_s[i, d] * scale
            for blk in T.Pipelined(topk // block_I, num_stages=0):
                idx_s = T.alloc_shared((block_I,), T.int32)
                T.copy(Idx[bos + pos, blk * block_I:(blk + 1) * block_I], idx_s)
                k_s = T.alloc_shared((block_I, dim), T.bfloat16)
                for r, d in T.Parallel(block_I, dim):
                    row = idx_s[r]
                    k_s[r, d] = T.if_then_else((row > -1) & (row <= pos), K[bos + row, d], 0)
                g_s = T.alloc_shared((block_I,), T.float32)
                for r in T.Parallel(block_I):
                    g_s[r] = Pidx[bos + pos, blk * block_I + r] - Pattn[bos + pos, blk * block_I + r]
                lg = T.alloc_fragment((block_I, heads), T.float32)
                T.gemm(k_s, q_s, lg, transpose_B=True, clear_accum=True)
                dw_part = T.alloc_fragment((block_I, heads), T.float32)
                for r, h in T.Parallel(block_I, heads):
                    dw_part[r, h] = g_s[r] * T.max(lg[r, h], 0)
                T.reduce_sum(dw_part, dw, dim=0, clear=False)
                dl_s = T.alloc_shared((block_I, heads), T.float32)
                for r, h in T.Parallel(block_I, heads):
                    d_relu = T.alloc_var(T.float32)
                    if lg[r, h] > 0:
                        d_relu = 1.0
                    else:
                        d_relu = 0.0
                    dl_s[r, h] = g_s[r] * d_relu * w_s[h]
                dl_a = T.alloc_fragment((block_I, heads), T.bfloat16)
                T.copy(dl_s, dl_a)
                T.gemm(dl_a, k_s, dq, transpose_A=True)
                dl_b = T.alloc_fragment((block_I, heads), T.bfloat16)
                T.copy(dl_s, dl_b)
                dk = T.alloc_fragment((block_I, dim), T.float32)
                T.gemm(dl_b, q_s, dk, clear_accum=True)
                for r, d in T.Parallel(block_I, dim):
                    row = idx_s[r]
                    if (row > -1) & (row <= pos):
                        T.atomic_add(dK[bos + row, d], dk[r, d])
            for i, d in T.Parallel(heads, dim):
                dq[i, d] = dq[i, d] * scale
            T.copy(dq, dQ[bos + pos, :, :])
            T.copy(dw, dW[bos + pos, :])

    return main


# ---- sparse MLA decode split over the top-k, then combined: two kernels in one prim_func --------
@tilelang.jit(out_idx=[-1])
def sparse_mla_decode_splitk(heads=64, dim=256, tail_dim=64, topk=512, splits=4, block_I=64,
                             threads=256):
    """Flash-decoding over the sparse index list: the first kernel's (split, batch) blocks each
    attend one split of the topk indices and write a float32 partial output and its base-2
    LSE (a split whose indices are all -1 writes zeros and -inf); the second kernel's (head,
    batch) blocks rescale the splits by exp2(lse - max) and sum them.  Both kernels in one
    prim_func, the partials as the caller's buffers (the second kernel's block variables have
    names of their own: TileLang's parser refuses a name the first kernel bound)."""
    B = T.dynamic("batch")
    SKV = T.dynamic("seq_len_kv")
    D, DT, H, BI = dim, tail_dim, heads, block_I
    per = topk // splits
    scale = (dim + tail_dim) ** -0.5 * LOG2E

    @T.prim_func
    def main(Q: T.Tensor((B, H, D + DT), T.bfloat16), KV: T.Tensor((SKV, D + DT), T.bfloat16),
             Idx: T.Tensor((B, topk), T.int32), Opart: T.Tensor((B, splits, H, D), T.float32),
             Lpart: T.Tensor((B, splits, H), T.float32), Out: T.Tensor((B, H, D), T.bfloat16)):
        with T.Kernel(splits, B, threads=threads) as (sp, b):
            Q_s = T.alloc_shared((H, D + DT), T.bfloat16)
            KV_s = T.alloc_shared((BI, D + DT), T.bfloat16)
            P_s = T.alloc_shared((H, BI), T.bfloat16)
            ok = T.alloc_fragment((BI,), T.bool)
            acc_s = T.alloc_fragment((H, BI), T.float32)
            acc_o = T.alloc_fragment((H, D), T.float32)
            mx = T.alloc_fragment((H,), T.float32)
            mx_prev = T.alloc_fragment((H,), T.float32)
            alpha = T.alloc_fragment((H,), T.float32)
            l_i = T.alloc_fragment((H,), T.float32)
            l_blk = T.alloc_fragment((H,), T.float32)
            T.copy(Q[b, :, :], Q_s)
            T.fill(acc_o, 0)
            T.fill(l_i, 0)
            T.fill(mx, -(2**30))
            for it in T.Pipelined(per // BI, num_stages=2):
                i0 = sp * per + it * BI
                for j, d in T.Parallel(BI, D + DT):
                    KV_s[j, d] = KV[T.max(Idx[b, i0 + j], 0), d]
                for j in T.Parallel(BI):
                    ok[j] = Idx[b, i0 + j] >= 0
                for h, j in T.Parallel(H, BI):
                    acc_s[h, j] = T.if_then_else(ok[j], 0, -T.infinity(T.float32))
                T.gemm(Q_s, KV_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(mx, mx_prev)
                T.reduce_max(acc_s, mx, dim=1, clear=False)
                for h in T.Parallel(H):
                    alpha[h] = T.exp2((mx_prev[h] - mx[h]) * scale)
                for h, j in T.Parallel(H, BI):
                    acc_s[h, j] = T.exp2(acc_s[h, j] * scale - mx[h] * scale)
                T.reduce_sum(acc_s, l_blk, dim=1)
                for h in T.Parallel(H):
                    l_i[h] = l_i[h] * alpha[h] + l_blk[h]
                for h, d in T.Parallel(H, D):
                    acc_o[h, d] *= alpha[h]
                T.copy(acc_s, P_s)
                T.gemm(P_s, KV_s[:, :D], acc_o, policy=T.GemmWarpPolicy.FullRow)
            for h, d in T.Parallel(H, D):
                acc_o[h, d] = T.if_then_else(l_i[h] > 0, acc_o[h, d] / l_i[h], 0)
            for h in T.Parallel(H):
                l_i[h] = T.if_then_else(l_i[h] > 0, T.log2(l_i[h]) + mx[h] * scale, -T.infinity(T.float32))
            T.copy(acc_o, Opart[b, sp, :, :])
            T.copy(l_i, Lpart[b, sp, :])

        with T.Kernel(H, B, threads=128) as (head, bb):
            lse = T.alloc_fragment((splits,), T.float32)
            lmax = T.alloc_fragment((1,), T.float32)
            wsum = T.alloc_fragment((1,), T.float32)
            o = T.alloc_fragment((D,), T.float32)
            for s in T.Parallel(splits):
                lse[s] = Lpart[bb, s, head]
            T.reduce_max(lse, lmax, dim=0)
            for s in T.Parallel(splits):
                lse[s] = T.exp2(lse[s] - lmax[0])
            T.reduce_sum(lse, wsum, dim=0)
            T.clear(o)
            for s in T.serial(splits):
                for d in T.Parallel(D):
                    o[d] += Opart[bb, s, head, d] * lse[s] / wsum[0]
            for d in T.Parallel(D):
                Out[bb, head, d] = o[d]

    return main


# ---- act_quant over whole rows: the row tile reshaped into its 1x128 groups ----------------------
@tilelang.jit(out_idx=[1, 2])
def act_quant_row_groups(N=512, group=128, blk_m=16, threads=128):
    """The per-1x128-group fp8 quantisation with each block holding whole rows: the (blk_m, N)
    tile is T.reshape'd to (blk_m, N / 128, 128) and T.reduce_absmax'd over dim=-1 into a
    (blk_m, N / 128) fragment of group maxima; scales are amax / 448 (amax floored at 1e-4),
    e4m3 values clamped to +-448.  T.dynamic rows."""
    M = T.dynamic("M")
    G = N // group

    @T.prim_func
    def main(x: T.Tensor((M, N), T.bfloat16), y: T.Tensor((M, N), T.float8_e4m3fn),
             s: T.Tensor((M, G), T.float32)):
        with T.Kernel(T.ceildiv(M, blk_m), threads=threads) as bx:
            x_l = T.alloc_fragment((blk_m, N), T.float32)
            x3 = T.reshape(x_l, (blk_m, G, group))
            amax = T.alloc_fragment((blk_m, G), T.float32)
            y_l = T.alloc_fragment((blk_m, N), T.float8_e4m3fn)
            T.copy(x[bx * blk_m, 0], x_l)
            T.reduce_absmax(x3, amax, dim=-1)
            for i, g in T.Parallel(blk_m, G):
                amax[i, g] = T.max(amax[i, g], 1e-4) / 448.0
            for i, g, c in T.Parallel(blk_m, G, group):
                y_l[i, g * group + c] = T.clamp(x3[i, g, c] / amax[i, g], -448.0, 448.0)
            T.copy(y_l, y[bx * blk_m, 0])
            T.copy(amax, s[bx * blk_m, 0])

    return main
