"""A forty-ninth set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang): serving-time decode kernels over paged and quantized KV caches, the way inference
engines write them -- flash-decoding over 64-token pages (two 32-token key tiles a page, the
batch and the table width T.dynamic) with the split-KV pass and the log2-sum-exp combine as two
T.Kernel launches of one prim_func; GQA decode with ALiBi slopes, tanh soft-capping, three
pipeline stages and an early T.thread_return() for an empty sequence; an fp8 (e4m3) paged cache
of 16-token pages with per-token scales dequantized in registers before a bf16 GEMM; fp8 MQA
decode whose two GEMMs run on fp8 operands with per-head scales applied to the scores and the
output; a uint8 cache with KIVI-style zero points (keys per channel, values per token); the
KV-cache append with NeoX rotary embedding of keys and queries from a cos/sin cache at int64
positions, written into pages at slot_mapping (slot -1 skipped); speculative-decoding
verification with a token tree (an ancestor mask built from a parent array by a while loop
in T.alloc_var); chunked prefill over a paged prefix (varlen chunks by cu_seqlens, a query
tile past its chunk leaves early); MLA decode over a paged 576-wide latent cache (FlashMLA's
layout, latent and rope parts sliced from one buffer) with split-KV; a combine whose
split count is read per sequence and whose LSEs are natural logs, reduced as a fragment;
speculative verification causal within the drafts as two pipelined loops (TileLang's
T.Pipelined(start, stop) form, the split point in a T.alloc_var(init=0)); MLA decode walking
its pages last first with only the first iteration masked, T.use_swizzle and the row
fragment's LSEs copied to a global slice; and SageAttention-style int8 Q K^T (mma.sync int8,
per-head and per-token scales applied to the int32 scores); and GQA decode with a bool token
mask copied into a column fragment, the group's 8 rows of a 64-row wgmma tile stored from
acc_o[:8, :]; and varlen decode with a learned sink that also returns each key tile's
attention-mass bound (a row fragment copied into a column of a shared table, T.copy(tile_max,
S_s[:, k]), then a T.Parallel over that table reading the row statistics).

The file reads as TileLang after swapping its two import lines (``import tilelang`` /
``import tilelang.language as T``); ``tests/test_unseen_programs49.py`` builds each to a cubin
on the CPU, checks what decides the result in the generated source, and on a GPU compares it
with torch."""

import tilecute as tilelang
import tilecute.language as T

LOG2E = 1.44269504


@T.macro
def _online_softmax(acc_s, m, m_prev, r_scale, r_sum, logsum, acc_o, scale, rows, cols, dv):
    """One key tile of an online softmax over raw scores (scale applied inside exp2, as
    TileLang's decode examples do): m holds the raw running max.  A row whose keys so far are
    all masked keeps m = -inf and is exponentiated against 0 instead, so no inf - inf."""
    T.copy(m, m_prev)
    T.reduce_max(acc_s, m, dim=1, clear=False)
    for i in T.Parallel(rows):
        r_sum[i] = T.if_then_else(m[i] == -T.infinity(T.float32), 0.0, m[i] * scale)
        r_scale[i] = T.exp2(m_prev[i] * scale - r_sum[i])
    for i, j in T.Parallel(rows, cols):
        acc_s[i, j] = T.exp2(acc_s[i, j] * scale - r_sum[i])
    T.reduce_sum(acc_s, r_sum, dim=1)
    for i in T.Parallel(rows):
        logsum[i] = logsum[i] * r_scale[i] + r_sum[i]
    for i, j in T.Parallel(rows, dv):
        acc_o[i, j] *= r_scale[i]


# ---- flash-decoding over 64-token pages: split and combine, two launches of one prim_func ----
@tilelang.jit(out_idx=[7])
def paged64_decode_split_combine(heads=16, kv_heads=2, dim=128, page=64, num_blocks=64,
                                 num_split=4, block_N=32, block_H=16, threads=128):
    """Split-KV GQA decode: the cache is flat ([num_blocks * page, kv_heads, dim]) and a key
    tile of 32 tokens is half a page, so a tile starts at block_table[b, t // 64] * 64 + t % 64.
    Tiles are shared out unevenly (the first `total % num_split` splits take one more); each
    split writes its normalised partial output and its log2-sum-exp (an empty split: zeros and
    -inf).  The second launch combines the splits; a sequence of length 0 gives zeros.
    T.dynamic batch and table width; Q / O are [batch, heads, dim]."""
    batch = T.dynamic("batch")
    max_pages = T.dynamic("max_pages")
    group = heads // kv_heads
    scale = dim ** -0.5 * LOG2E
    dtype, accum = T.float16, T.float32

    @T.prim_func
    def main(Q: T.Tensor((batch, heads, dim), dtype),
             K_cache: T.Tensor((num_blocks * page, kv_heads, dim), dtype),
             V_cache: T.Tensor((num_blocks * page, kv_heads, dim), dtype),
             block_table: T.Tensor((batch, max_pages), T.int32),
             cache_seqlens: T.Tensor((batch,), T.int32),
             glse: T.Tensor((batch, heads, num_split), accum),
             O_partial: T.Tensor((batch, heads, num_split, dim), accum),
             O: T.Tensor((batch, heads, dim), dtype)):
        with T.Kernel(batch, kv_heads, num_split, threads=threads) as (bx, hk, bz):
            q_s = T.alloc_shared((block_H, dim), dtype)
            k_s = T.alloc_shared((block_N, dim), dtype)
            v_s = T.alloc_shared((block_N, dim), dtype)
            acc_s = T.alloc_fragment((block_H, block_N), accum)
            p_s = T.alloc_shared((block_H, block_N), dtype)
            acc_o = T.alloc_fragment((block_H, dim), accum)
            m = T.alloc_fragment((block_H,), accum)
            m_prev = T.alloc_fragment((block_H,), accum)
            r_scale = T.alloc_fragment((block_H,), accum)
            r_sum = T.alloc_fragment((block_H,), accum)
            logsum = T.alloc_fragment((block_H,), accum)

            seqlen = cache_seqlens[bx]
            total = T.ceildiv(seqlen, block_N)
            per_split = T.floordiv(total, num_split)
            rem = T.floormod(total, num_split)
            n_tiles = per_split + T.if_then_else(bz < rem, 1, 0)
            start = (per_split * bz + T.min(bz, rem)) * block_N

            for i, d in T.Parallel(block_H, dim):
                q_s[i, d] = T.if_then_else(i < group, Q[bx, hk * group + i, d], 0)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(n_tiles, num_stages=2):
                tok0 = start + k * block_N
                kv_start = block_table[bx, tok0 // page] * page + tok0 % page
                T.copy(K_cache[kv_start:kv_start + block_N, hk, :], k_s)
                T.copy(V_cache[kv_start:kv_start + block_N, hk, :], v_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(block_H, block_N):
                    acc_s[i, j] = T.if_then_else(tok0 + j < seqlen, acc_s[i, j], -T.infinity(accum))
                _online_softmax(acc_s, m, m_prev, r_scale, r_sum, logsum, acc_o, scale,
                                block_H, block_N, dim)
                T.copy(acc_s, p_s)
                T.gemm(p_s, v_s, acc_o)
            for i, d in T.Parallel(block_H, dim):
                if i < group:
                    O_partial[bx, hk * group + i, bz, d] = T.if_then_else(
                        logsum[i] > 0, acc_o[i, d] / logsum[i], 0)
            for i in T.Parallel(block_H):
                if i < group:
                    glse[bx, hk * group + i, bz] = T.if_then_else(
                        logsum[i] > 0, T.log2(logsum[i]) + m[i] * scale, -T.infinity(accum))

        with T.Kernel(heads, batch, threads=128) as (h, b):
            o = T.alloc_fragment((dim,), accum)
            lse_max = T.alloc_var(accum)
            lse_sum = T.alloc_var(accum)
            w = T.alloc_var(accum)
            T.clear(o)
            if cache_seqlens[b] > 0:
                lse_max = -T.infinity(accum)
                for s in T.serial(num_split):
                    lse_max = T.max(lse_max, glse[b, h, s])
                lse_sum = 0.0
                for s in T.Pipelined(num_split, num_stages=1):
                    lse_sum += T.exp2(glse[b, h, s] - lse_max)
                for s in T.serial(num_split):
                    w = T.exp2(glse[b, h, s] - lse_max) / lse_sum
                    for d in T.Parallel(dim):
                        o[d] += w * O_partial[b, h, s, d]
            for d in T.Parallel(dim):
                O[b, h, d] = o[d]

    return main


# ---- GQA decode with ALiBi and soft-capping; an empty sequence leaves at once ----------------
@tilelang.jit(out_idx=[5])
def gqa_decode_alibi_softcap(heads=32, kv_heads=8, dim=128, softcap=30.0, block_N=64,
                             block_H=16, threads=128):
    """Decode over a contiguous cache [batch, max_len, kv_heads, dim] (T.dynamic batch and
    max_len): score = softcap * tanh(q.k / sqrt(d) / softcap) + slope[h] * (pos - (len - 1)),
    the 4 query heads of a KV head padded to 16 rows.  Three pipeline stages over the key tiles;
    a sequence of length 0 writes zeros and returns before any tile work."""
    batch = T.dynamic("batch")
    max_len = T.dynamic("max_len")
    group = heads // kv_heads
    sm_scale = dim ** -0.5
    dtype, accum = T.bfloat16, T.float32

    @T.prim_func
    def main(Q: T.Tensor((batch, heads, dim), dtype),
             K: T.Tensor((batch, max_len, kv_heads, dim), dtype),
             V: T.Tensor((batch, max_len, kv_heads, dim), dtype),
             lengths: T.Tensor((batch,), T.int32),
             slopes: T.Tensor((heads,), accum),
             O: T.Tensor((batch, heads, dim), dtype)):
        with T.Kernel(kv_heads, batch, threads=threads) as (hk, b):
            q_s = T.alloc_shared((block_H, dim), dtype)
            k_s = T.alloc_shared((block_N, dim), dtype)
            v_s = T.alloc_shared((block_N, dim), dtype)
            acc_s = T.alloc_fragment((block_H, block_N), accum)
            p_s = T.alloc_shared((block_H, block_N), dtype)
            acc_o = T.alloc_fragment((block_H, dim), accum)
            m = T.alloc_fragment((block_H,), accum)
            m_prev = T.alloc_fragment((block_H,), accum)
            r_scale = T.alloc_fragment((block_H,), accum)
            r_sum = T.alloc_fragment((block_H,), accum)
            logsum = T.alloc_fragment((block_H,), accum)
            slope = T.alloc_fragment((block_H,), accum)

            seqlen = lengths[b]
            if seqlen == 0:
                for i, d in T.Parallel(group, dim):
                    O[b, hk * group + i, d] = T.cast(0, dtype)
                T.thread_return()
            for i, d in T.Parallel(block_H, dim):
                q_s[i, d] = T.if_then_else(i < group, Q[b, hk * group + i, d], 0)
            for i in T.Parallel(block_H):
                slope[i] = T.if_then_else(i < group, slopes[hk * group + i], 0.0)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(T.ceildiv(seqlen, block_N), num_stages=3):
                T.copy(K[b, k * block_N:(k + 1) * block_N, hk, :], k_s)
                T.copy(V[b, k * block_N:(k + 1) * block_N, hk, :], v_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(block_H, block_N):
                    pos = k * block_N + j
                    acc_s[i, j] = T.if_then_else(
                        pos < seqlen,
                        softcap * T.tanh(acc_s[i, j] * sm_scale / softcap)
                        + slope[i] * T.cast(pos - (seqlen - 1), accum),
                        -T.infinity(accum))
                _online_softmax(acc_s, m, m_prev, r_scale, r_sum, logsum, acc_o, LOG2E,
                                block_H, block_N, dim)
                T.copy(acc_s, p_s)
                for j, d in T.Parallel(block_N, dim):
                    v_s[j, d] = T.if_then_else(k * block_N + j < seqlen, v_s[j, d], 0)
                T.gemm(p_s, v_s, acc_o)
            for i, d in T.Parallel(block_H, dim):
                if i < group:
                    O[b, hk * group + i, d] = acc_o[i, d] / logsum[i]

    return main


# ---- fp8 paged cache (16-token pages) with per-token scales, dequantized in registers --------
@tilelang.jit(out_idx=[7])
def fp8_paged16_decode_token_scales(batch=3, heads=16, kv_heads=2, dim=128, page=16,
                                    num_blocks=160, max_pages=64, block_N=64, threads=128):
    """vLLM-style fp8 KV cache: K / V pages [num_blocks, 16, kv_heads, dim] in float8_e4m3 with
    one float32 scale per (page slot, kv head).  A 64-token key tile is four pages, each copied
    into its quarter of an fp8 shared tile; the tile is dequantized in registers (fp8 -> float32,
    times the token's scale, rows past the sequence zeroed so stale pages -- NaN bytes
    included -- weigh nothing) and stored back as bf16 for the GEMMs.  The 8 heads of a KV head
    fill 8 of 16 rows."""
    group = heads // kv_heads
    block_H = 16
    pages_per_tile = block_N // page
    scale = dim ** -0.5 * LOG2E
    fp8, dtype, accum = T.float8_e4m3fn, T.bfloat16, T.float32

    @T.prim_func
    def main(Q: T.Tensor((batch, heads, dim), dtype),
             K_cache: T.Tensor((num_blocks, page, kv_heads, dim), fp8),
             V_cache: T.Tensor((num_blocks, page, kv_heads, dim), fp8),
             k_scale: T.Tensor((num_blocks, page, kv_heads), accum),
             v_scale: T.Tensor((num_blocks, page, kv_heads), accum),
             block_table: T.Tensor((batch, max_pages), T.int32),
             seq_lens: T.Tensor((batch,), T.int32),
             O: T.Tensor((batch, heads, dim), dtype)):
        with T.Kernel(kv_heads, batch, threads=threads) as (hk, b):
            q_s = T.alloc_shared((block_H, dim), dtype)
            k8_s = T.alloc_shared((block_N, dim), fp8)
            v8_s = T.alloc_shared((block_N, dim), fp8)
            k_s = T.alloc_shared((block_N, dim), dtype)
            v_s = T.alloc_shared((block_N, dim), dtype)
            ks_s = T.alloc_shared((block_N,), accum)
            vs_s = T.alloc_shared((block_N,), accum)
            kv_f = T.alloc_fragment((block_N, dim), accum)
            acc_s = T.alloc_fragment((block_H, block_N), accum)
            p_s = T.alloc_shared((block_H, block_N), dtype)
            acc_o = T.alloc_fragment((block_H, dim), accum)
            m = T.alloc_fragment((block_H,), accum)
            m_prev = T.alloc_fragment((block_H,), accum)
            r_scale = T.alloc_fragment((block_H,), accum)
            r_sum = T.alloc_fragment((block_H,), accum)
            logsum = T.alloc_fragment((block_H,), accum)
            page_id = T.alloc_var(T.int32)

            seqlen = seq_lens[b]
            for i, d in T.Parallel(block_H, dim):
                q_s[i, d] = T.if_then_else(i < group, Q[b, hk * group + i, d], 0)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(T.ceildiv(seqlen, block_N), num_stages=2):
                for p in T.serial(pages_per_tile):
                    page_id = block_table[b, T.min(k * pages_per_tile + p, max_pages - 1)]
                    T.copy(K_cache[page_id, :, hk, :], k8_s[p * page:(p + 1) * page, :])
                    T.copy(V_cache[page_id, :, hk, :], v8_s[p * page:(p + 1) * page, :])
                for j in T.Parallel(block_N):
                    tok = k * block_N + j
                    pg = block_table[b, T.min(tok // page, max_pages - 1)]
                    ks_s[j] = T.if_then_else(tok < seqlen, k_scale[pg, tok % page, hk], 0.0)
                    vs_s[j] = T.if_then_else(tok < seqlen, v_scale[pg, tok % page, hk], 0.0)
                T.copy(k8_s, kv_f)
                for j, d in T.Parallel(block_N, dim):
                    kv_f[j, d] = T.if_then_else(k * block_N + j < seqlen, kv_f[j, d] * ks_s[j], 0.0)
                T.copy(kv_f, k_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(block_H, block_N):
                    acc_s[i, j] = T.if_then_else(k * block_N + j < seqlen, acc_s[i, j],
                                                 -T.infinity(accum))
                _online_softmax(acc_s, m, m_prev, r_scale, r_sum, logsum, acc_o, scale,
                                block_H, block_N, dim)
                T.copy(acc_s, p_s)
                T.copy(v8_s, kv_f)
                for j, d in T.Parallel(block_N, dim):
                    kv_f[j, d] = T.if_then_else(k * block_N + j < seqlen, kv_f[j, d] * vs_s[j], 0.0)
                T.copy(kv_f, v_s)
                T.gemm(p_s, v_s, acc_o)
            for i, d in T.Parallel(block_H, dim):
                if i < group:
                    O[b, hk * group + i, d] = acc_o[i, d] / logsum[i]

    return main


# ---- fp8 MQA decode: both GEMMs on fp8 operands, per-head scales on scores and output --------
def _fp8_mqa(batch, heads, max_len, dim, block_N, threads, v_transposed):
    """Multi-query decode with Q, K, V in float8_e4m3 (one KV head, the 64 query heads as the
    GEMM's rows): S = (Q K^T) * q_scale[h] * k_scale (kv_scale[0]), the probabilities are cast
    to e4m3 for P V, and the output is scaled by v_scale (kv_scale[1]).  With v_transposed the
    cache holds V^T ([batch, dim, max_len], FA3's fp8 layout), so P V reads V K-major;
    without, V is [batch, max_len, dim] (MN-major)."""
    fp8, accum = T.float8_e4m3fn, T.float32
    v_shape = (batch, dim, max_len) if v_transposed else (batch, max_len, dim)
    v_tile = (dim, block_N) if v_transposed else (block_N, dim)

    @T.prim_func
    def main(Q: T.Tensor((batch, heads, dim), fp8),
             K: T.Tensor((batch, max_len, dim), fp8),
             V: T.Tensor(v_shape, fp8),
             q_scale: T.Tensor((heads,), accum),
             kv_scale: T.Tensor((2,), accum),
             lengths: T.Tensor((batch,), T.int32),
             O: T.Tensor((batch, heads, dim), T.bfloat16)):
        with T.Kernel(batch, threads=threads) as b:
            q_s = T.alloc_shared((heads, dim), fp8)
            k_s = T.alloc_shared((block_N, dim), fp8)
            v_s = T.alloc_shared(v_tile, fp8)
            acc_s = T.alloc_fragment((heads, block_N), accum)
            p8 = T.alloc_fragment((heads, block_N), fp8)
            acc_o = T.alloc_fragment((heads, dim), accum)
            m = T.alloc_fragment((heads,), accum)
            m_prev = T.alloc_fragment((heads,), accum)
            r_scale = T.alloc_fragment((heads,), accum)
            r_sum = T.alloc_fragment((heads,), accum)
            logsum = T.alloc_fragment((heads,), accum)
            qk = T.alloc_fragment((heads,), accum)

            seqlen = lengths[b]
            T.copy(Q[b, :, :], q_s)
            for i in T.Parallel(heads):
                qk[i] = q_scale[i] * kv_scale[0] * dim ** -0.5
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(T.ceildiv(seqlen, block_N), num_stages=2):
                T.copy(K[b, k * block_N:(k + 1) * block_N, :], k_s)
                if v_transposed:
                    T.copy(V[b, :, k * block_N:(k + 1) * block_N], v_s)
                else:
                    T.copy(V[b, k * block_N:(k + 1) * block_N, :], v_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(heads, block_N):
                    acc_s[i, j] = T.if_then_else(k * block_N + j < seqlen, acc_s[i, j] * qk[i],
                                                 -T.infinity(accum))
                _online_softmax(acc_s, m, m_prev, r_scale, r_sum, logsum, acc_o, LOG2E,
                                heads, block_N, dim)
                T.copy(acc_s, p8)
                T.gemm(p8, v_s, acc_o, transpose_B=v_transposed)
            for i, d in T.Parallel(heads, dim):
                O[b, i, d] = acc_o[i, d] * kv_scale[1] / logsum[i]

    return main


@tilelang.jit(out_idx=[6])
def fp8_mqa_decode_fp8_gemms(batch=2, heads=64, max_len=1024, dim=128, block_N=64, threads=128):
    """fp8 MQA decode over a V^T cache: both GEMMs K-major fp8 (wgmma)."""
    return _fp8_mqa(batch, heads, max_len, dim, block_N, threads, v_transposed=True)


def fp8_mqa_mn_major_v(batch=2, heads=64, max_len=1024, dim=128, block_N=64, threads=128):
    """The same over a [batch, max_len, dim] V: P V's fp8 B operand is MN-major, which no
    wgmma reads; TileLang 0.1.15 puts it on mma.sync in another warp arrangement than Q K^T
    and refuses the rescale acc_o *= r_scale (a layout conflict), as tilecute does."""
    return _fp8_mqa(batch, heads, max_len, dim, block_N, threads, v_transposed=False)


# ---- uint8 cache with zero points: keys per channel, values per token (KIVI) -----------------
@tilelang.jit(out_idx=[8])
def uint8_kv_decode_zero_points(batch=3, heads=8, kv_heads=2, max_len=1000, dim=128,
                                block_N=64, threads=128):
    """Asymmetric 8-bit cache: k = (K_q - k_zero[hk, d]) * k_scale[hk, d] per channel,
    v = (V_q - v_zero[b, t, hk]) * v_scale[b, t, hk] per token; dequantized element by element
    from global memory straight into the bf16 shared tiles (rows past the sequence zero).  The
    4 heads of a KV head pad 16 rows."""
    group = heads // kv_heads
    block_H = 16
    scale = dim ** -0.5 * LOG2E
    u8, dtype, accum = T.uint8, T.bfloat16, T.float32

    @T.prim_func
    def main(Q: T.Tensor((batch, heads, dim), dtype),
             K_q: T.Tensor((batch, max_len, kv_heads, dim), u8),
             V_q: T.Tensor((batch, max_len, kv_heads, dim), u8),
             k_scale: T.Tensor((kv_heads, dim), accum),
             k_zero: T.Tensor((kv_heads, dim), accum),
             v_scale: T.Tensor((batch, max_len, kv_heads), accum),
             v_zero: T.Tensor((batch, max_len, kv_heads), accum),
             lengths: T.Tensor((batch,), T.int32),
             O: T.Tensor((batch, heads, dim), dtype)):
        with T.Kernel(kv_heads, batch, threads=threads) as (hk, b):
            q_s = T.alloc_shared((block_H, dim), dtype)
            k_s = T.alloc_shared((block_N, dim), dtype)
            v_s = T.alloc_shared((block_N, dim), dtype)
            acc_s = T.alloc_fragment((block_H, block_N), accum)
            p_s = T.alloc_shared((block_H, block_N), dtype)
            acc_o = T.alloc_fragment((block_H, dim), accum)
            m = T.alloc_fragment((block_H,), accum)
            m_prev = T.alloc_fragment((block_H,), accum)
            r_scale = T.alloc_fragment((block_H,), accum)
            r_sum = T.alloc_fragment((block_H,), accum)
            logsum = T.alloc_fragment((block_H,), accum)

            seqlen = lengths[b]
            for i, d in T.Parallel(block_H, dim):
                q_s[i, d] = T.if_then_else(i < group, Q[b, hk * group + i, d], 0)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(T.ceildiv(seqlen, block_N), num_stages=2):
                for j, d in T.Parallel(block_N, dim):
                    t = k * block_N + j
                    k_s[j, d] = T.if_then_else(
                        t < seqlen,
                        (T.cast(K_q[b, t, hk, d], accum) - k_zero[hk, d]) * k_scale[hk, d], 0.0)
                    v_s[j, d] = T.if_then_else(
                        t < seqlen,
                        (T.cast(V_q[b, t, hk, d], accum) - v_zero[b, t, hk]) * v_scale[b, t, hk],
                        0.0)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(block_H, block_N):
                    acc_s[i, j] = T.if_then_else(k * block_N + j < seqlen, acc_s[i, j],
                                                 -T.infinity(accum))
                _online_softmax(acc_s, m, m_prev, r_scale, r_sum, logsum, acc_o, scale,
                                block_H, block_N, dim)
                T.copy(acc_s, p_s)
                T.gemm(p_s, v_s, acc_o)
            for i, d in T.Parallel(block_H, dim):
                if i < group:
                    O[b, hk * group + i, d] = acc_o[i, d] / logsum[i]

    return main


# ---- KV-cache append: NeoX rotary on q / k from a cos|sin cache, keys into pages by slot ----
@tilelang.jit
def kv_append_rope_slots(heads=8, kv_heads=2, dim=128, rot=64, page=16, num_blocks=32,
                         max_pos=4096, threads=128):
    """One block per new token (T.dynamic count): the query heads are rotated in place over
    their first `rot` channels (NeoX halves; cos_sin_cache[pos] = [cos | sin], int64
    positions); then a token whose slot_mapping entry is -1 (a padding token) returns, and the
    others write the rotated key and the value into page slot // 16, row slot % 16."""
    ntok = T.dynamic("num_tokens")
    half = rot // 2
    dtype, accum = T.bfloat16, T.float32

    @T.prim_func
    def main(positions: T.Tensor((ntok,), T.int64),
             query: T.Tensor((ntok, heads, dim), dtype),
             key: T.Tensor((ntok, kv_heads, dim), dtype),
             value: T.Tensor((ntok, kv_heads, dim), dtype),
             cos_sin_cache: T.Tensor((max_pos, rot), accum),
             slot_mapping: T.Tensor((ntok,), T.int64),
             k_cache: T.Tensor((num_blocks, page, kv_heads, dim), dtype),
             v_cache: T.Tensor((num_blocks, page, kv_heads, dim), dtype)):
        with T.Kernel(ntok, threads=threads) as t:
            pos = positions[t]
            for h, i in T.Parallel(heads, half):
                c = cos_sin_cache[pos, i]
                s = cos_sin_cache[pos, half + i]
                x1 = T.cast(query[t, h, i], accum)
                x2 = T.cast(query[t, h, half + i], accum)
                query[t, h, i] = T.cast(x1 * c - x2 * s, dtype)
                query[t, h, half + i] = T.cast(x2 * c + x1 * s, dtype)
            slot = slot_mapping[t]
            if slot < 0:
                T.thread_return()
            blk = slot // page
            off = slot % page
            for h, d in T.Parallel(kv_heads, dim):
                if d < half:
                    k_cache[blk, off, h, d] = T.cast(
                        T.cast(key[t, h, d], accum) * cos_sin_cache[pos, d]
                        - T.cast(key[t, h, d + half], accum) * cos_sin_cache[pos, half + d], dtype)
                elif d < rot:
                    k_cache[blk, off, h, d] = T.cast(
                        T.cast(key[t, h, d], accum) * cos_sin_cache[pos, d - half]
                        + T.cast(key[t, h, d - half], accum) * cos_sin_cache[pos, d], dtype)
                else:
                    k_cache[blk, off, h, d] = key[t, h, d]
                v_cache[blk, off, h, d] = value[t, h, d]

    return main


# ---- speculative verification over a token tree: ancestor mask from a parent array ----------
@tilelang.jit(out_idx=[8])
def spec_verify_token_tree(batch=2, heads=8, kv_heads=2, n_draft=6, dim=64, page=64,
                           num_pages=48, max_pages=16, block_N=64, threads=128):
    """Tree-speculation verify: n_draft candidate tokens per sequence form a tree
    (parents[b, i] < i, -1 for children of the last accepted token).  A draft token attends to
    the whole cached prefix (paged, prefix_lens[b] tokens, possibly 0) and to its ancestors in
    the tree and itself.  The first n_draft threads build the ancestor mask in shared memory by
    walking parent pointers (T.alloc_var, a while loop); the drafts' keys / values come from
    their own tensors.  Rows r = token * group + head (4 x 6 = 24 of 32)."""
    group = heads // kv_heads
    rows = n_draft * group
    block_M = 32
    scale = dim ** -0.5 * LOG2E
    dtype, accum = T.float16, T.float32

    @T.prim_func
    def main(Q: T.Tensor((batch, n_draft, heads, dim), dtype),
             K_pages: T.Tensor((num_pages, page, kv_heads, dim), dtype),
             V_pages: T.Tensor((num_pages, page, kv_heads, dim), dtype),
             K_draft: T.Tensor((batch, n_draft, kv_heads, dim), dtype),
             V_draft: T.Tensor((batch, n_draft, kv_heads, dim), dtype),
             block_table: T.Tensor((batch, max_pages), T.int32),
             prefix_lens: T.Tensor((batch,), T.int32),
             parents: T.Tensor((batch, n_draft), T.int32),
             O: T.Tensor((batch, n_draft, heads, dim), dtype)):
        with T.Kernel(kv_heads, batch, threads=threads) as (hk, b):
            q_s = T.alloc_shared((block_M, dim), dtype)
            k_s = T.alloc_shared((block_N, dim), dtype)
            v_s = T.alloc_shared((block_N, dim), dtype)
            kd_s = T.alloc_shared((block_N, dim), dtype)
            vd_s = T.alloc_shared((block_N, dim), dtype)
            anc = T.alloc_shared((n_draft, n_draft), T.int32)
            acc_s = T.alloc_fragment((block_M, block_N), accum)
            p_s = T.alloc_shared((block_M, block_N), dtype)
            acc_o = T.alloc_fragment((block_M, dim), accum)
            m = T.alloc_fragment((block_M,), accum)
            m_prev = T.alloc_fragment((block_M,), accum)
            r_scale = T.alloc_fragment((block_M,), accum)
            r_sum = T.alloc_fragment((block_M,), accum)
            logsum = T.alloc_fragment((block_M,), accum)
            node = T.alloc_var(T.int32)

            tx = T.get_thread_binding()
            prefix = prefix_lens[b]
            for i, j in T.Parallel(n_draft, n_draft):
                anc[i, j] = 0
            T.sync_threads()
            if tx < n_draft:
                node = tx
                while node >= 0:
                    anc[tx, node] = 1
                    node = parents[b, node]
            T.sync_threads()
            for r, d in T.Parallel(block_M, dim):
                q_s[r, d] = T.if_then_else(r < rows, Q[b, r // group, hk * group + r % group, d], 0)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(m, -T.infinity(accum))
            for p in T.Pipelined(T.ceildiv(prefix, block_N), num_stages=2):
                T.copy(K_pages[block_table[b, p], :, hk, :], k_s)
                T.copy(V_pages[block_table[b, p], :, hk, :], v_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, clear_accum=True)
                for r, j in T.Parallel(block_M, block_N):
                    acc_s[r, j] = T.if_then_else(p * block_N + j < prefix, acc_s[r, j],
                                                 -T.infinity(accum))
                _online_softmax(acc_s, m, m_prev, r_scale, r_sum, logsum, acc_o, scale,
                                block_M, block_N, dim)
                T.copy(acc_s, p_s)
                T.gemm(p_s, v_s, acc_o)
            # the draft tokens: one tile, rows past n_draft zero
            for j, d in T.Parallel(block_N, dim):
                kd_s[j, d] = T.if_then_else(j < n_draft, K_draft[b, j, hk, d], 0)
                vd_s[j, d] = T.if_then_else(j < n_draft, V_draft[b, j, hk, d], 0)
            T.gemm(q_s, kd_s, acc_s, transpose_B=True, clear_accum=True)
            for r, j in T.Parallel(block_M, block_N):
                acc_s[r, j] = T.if_then_else(
                    r < rows and j < n_draft and anc[r // group, j] == 1, acc_s[r, j],
                    -T.infinity(accum))
            _online_softmax(acc_s, m, m_prev, r_scale, r_sum, logsum, acc_o, scale,
                            block_M, block_N, dim)
            T.copy(acc_s, p_s)
            T.gemm(p_s, vd_s, acc_o)
            for r, d in T.Parallel(block_M, dim):
                if r < rows:
                    O[b, r // group, hk * group + r % group, d] = acc_o[r, d] / logsum[r]

    return main


# ---- chunked prefill: a varlen query chunk over a paged prefix (the chunk already cached) ----
@tilelang.jit(out_idx=[6])
def chunked_prefill_paged(batch=3, heads=8, kv_heads=2, dim=128, page=64, num_pages=64,
                          max_pages=20, max_chunk=128, block_M=64, block_N=64, threads=128):
    """Sequence b's chunk is rows cu_q[b]:cu_q[b+1] of Q (T.dynamic total); its keys -- the
    prefix and the chunk itself -- are the first seq_lens[b] cached tokens, so query row i sits
    at position seq_lens[b] - q_len + i and sees keys up to it (causal).  A query tile past its
    chunk leaves at once; the key loop stops at the tile's last position; pages of 64 tokens are
    key tiles."""
    total_q = T.dynamic("total_q")
    group = heads // kv_heads
    scale = dim ** -0.5 * LOG2E
    dtype, accum = T.bfloat16, T.float32

    @T.prim_func
    def main(Q: T.Tensor((total_q, heads, dim), dtype),
             K_pages: T.Tensor((num_pages, page, kv_heads, dim), dtype),
             V_pages: T.Tensor((num_pages, page, kv_heads, dim), dtype),
             block_table: T.Tensor((batch, max_pages), T.int32),
             cu_q: T.Tensor((batch + 1,), T.int32),
             seq_lens: T.Tensor((batch,), T.int32),
             O: T.Tensor((total_q, heads, dim), dtype)):
        with T.Kernel(T.ceildiv(max_chunk, block_M), heads, batch, threads=threads) as (bx, h, b):
            q_s = T.alloc_shared((block_M, dim), dtype)
            k_s = T.alloc_shared((block_N, dim), dtype)
            v_s = T.alloc_shared((block_N, dim), dtype)
            o_s = T.alloc_shared((block_M, dim), dtype)
            acc_s = T.alloc_fragment((block_M, block_N), accum)
            acc_s_cast = T.alloc_fragment((block_M, block_N), dtype)
            acc_o = T.alloc_fragment((block_M, dim), accum)
            m = T.alloc_fragment((block_M,), accum)
            m_prev = T.alloc_fragment((block_M,), accum)
            r_scale = T.alloc_fragment((block_M,), accum)
            r_sum = T.alloc_fragment((block_M,), accum)
            logsum = T.alloc_fragment((block_M,), accum)

            q_start = cu_q[b]
            q_len = cu_q[b + 1] - q_start
            if bx * block_M < q_len:
                kv_len = seq_lens[b]
                ctx = kv_len - q_len
                hk = h // group
                for i, d in T.Parallel(block_M, dim):
                    q_s[i, d] = T.if_then_else(bx * block_M + i < q_len,
                                               Q[q_start + bx * block_M + i, h, d], 0)
                T.fill(acc_o, 0)
                T.fill(logsum, 0)
                T.fill(m, -T.infinity(accum))
                last = ctx + T.min((bx + 1) * block_M, q_len)
                for p in T.Pipelined(T.ceildiv(last, block_N), num_stages=2):
                    T.copy(K_pages[block_table[b, p], :, hk, :], k_s)
                    T.copy(V_pages[block_table[b, p], :, hk, :], v_s)
                    T.gemm(q_s, k_s, acc_s, transpose_B=True, clear_accum=True)
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.if_then_else(
                            p * block_N + j <= ctx + bx * block_M + i and p * block_N + j < kv_len,
                            acc_s[i, j], -T.infinity(accum))
                    _online_softmax(acc_s, m, m_prev, r_scale, r_sum, logsum, acc_o, scale,
                                    block_M, block_N, dim)
                    T.copy(acc_s, acc_s_cast)
                    T.gemm(acc_s_cast, v_s, acc_o)
                for i, d in T.Parallel(block_M, dim):
                    o_s[i, d] = acc_o[i, d] / logsum[i]
                for i, d in T.Parallel(block_M, dim):
                    if bx * block_M + i < q_len:
                        O[q_start + bx * block_M + i, h, d] = o_s[i, d]

    return main


# ---- MLA decode over a paged 576-wide latent cache (latent | rope in one row), split-KV ------
@tilelang.jit(out_idx=[4, 5])
def mla_paged_latent576_split(batch=2, heads=64, kv_lora=512, pe_dim=64, page=64,
                              num_blocks=40, max_pages=16, num_split=2, block_N=32,
                              threads=256):
    """FlashMLA's cache layout: one row of 576 per token (512 latent | 64 rope), pages of 64
    tokens [num_blocks, 64, 576]; the latent part is key and value.  The query likewise is one
    576-wide row per head.  Key tiles of 32 (half a page) are sliced from the row: [.., 0:512]
    and [.., 512:576]; split s takes tiles s, s + num_split, ... (strided), writes its partial
    output (float32) and its log2-sum-exp (-inf if it saw no key)."""
    dim = kv_lora + pe_dim
    scale = dim ** -0.5 * LOG2E
    dtype, accum = T.bfloat16, T.float32

    @T.prim_func
    def main(Q: T.Tensor((batch, heads, dim), dtype),
             KV_cache: T.Tensor((num_blocks, page, dim), dtype),
             block_table: T.Tensor((batch, max_pages), T.int32),
             cache_seqlens: T.Tensor((batch,), T.int32),
             O_partial: T.Tensor((batch, num_split, heads, kv_lora), accum),
             LSE: T.Tensor((batch, num_split, heads), accum)):
        with T.Kernel(batch, num_split, threads=threads) as (b, s):
            q_s = T.alloc_shared((heads, kv_lora), dtype)
            qpe_s = T.alloc_shared((heads, pe_dim), dtype)
            kv_s = T.alloc_shared((block_N, kv_lora), dtype)
            kpe_s = T.alloc_shared((block_N, pe_dim), dtype)
            p_s = T.alloc_shared((heads, block_N), dtype)
            acc_s = T.alloc_fragment((heads, block_N), accum)
            acc_o = T.alloc_fragment((heads, kv_lora), accum)
            m = T.alloc_fragment((heads,), accum)
            m_prev = T.alloc_fragment((heads,), accum)
            r_scale = T.alloc_fragment((heads,), accum)
            r_sum = T.alloc_fragment((heads,), accum)
            logsum = T.alloc_fragment((heads,), accum)

            seqlen = cache_seqlens[b]
            n_mine = T.ceildiv(T.max(T.ceildiv(seqlen, block_N) - s, 0), num_split)
            T.copy(Q[b, :, 0:kv_lora], q_s)
            T.copy(Q[b, :, kv_lora:dim], qpe_s)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(n_mine, num_stages=2):
                tok0 = (s + k * num_split) * block_N
                pg = block_table[b, tok0 // page]
                off = tok0 % page
                T.copy(KV_cache[pg, off:off + block_N, 0:kv_lora], kv_s)
                T.copy(KV_cache[pg, off:off + block_N, kv_lora:dim], kpe_s)
                T.gemm(q_s, kv_s, acc_s, transpose_B=True, clear_accum=True,
                       policy=T.GemmWarpPolicy.FullCol)
                T.gemm(qpe_s, kpe_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
                for i, j in T.Parallel(heads, block_N):
                    acc_s[i, j] = T.if_then_else(tok0 + j < seqlen, acc_s[i, j], -T.infinity(accum))
                _online_softmax(acc_s, m, m_prev, r_scale, r_sum, logsum, acc_o, scale,
                                heads, block_N, kv_lora)
                T.copy(acc_s, p_s)
                T.gemm(p_s, kv_s, acc_o, policy=T.GemmWarpPolicy.FullCol)
            for i, d in T.Parallel(heads, kv_lora):
                O_partial[b, s, i, d] = T.if_then_else(logsum[i] > 0, acc_o[i, d] / logsum[i], 0)
            for i in T.Parallel(heads):
                LSE[b, s, i] = T.if_then_else(logsum[i] > 0, T.log2(logsum[i]) + m[i] * scale,
                                              -T.infinity(accum))

    return main


# ---- combine with a per-sequence split count and natural-log LSEs, as a fragment reduce ------
@tilelang.jit(out_idx=[3])
def combine_varsplit_natural_lse(heads=16, dim=128, max_split=8, threads=128):
    """Split counts differ per sequence (num_splits[b] <= max_split, read from a tensor; 0 for
    an empty sequence gives zeros).  LSEs are natural logs; the block loads a head's LSEs into a
    fragment (slots past the count are -inf), takes their max with T.reduce_max, the weights
    exp(lse_s - max) / sum, and accumulates the partial outputs (bf16) in float32.
    T.dynamic batch."""
    batch = T.dynamic("batch")
    accum = T.float32

    @T.prim_func
    def main(O_partial: T.Tensor((batch, max_split, heads, dim), T.bfloat16),
             LSE: T.Tensor((batch, max_split, heads), accum),
             num_splits: T.Tensor((batch,), T.int32),
             O: T.Tensor((batch, heads, dim), T.bfloat16)):
        with T.Kernel(heads, batch, threads=threads) as (h, b):
            lse = T.alloc_fragment((max_split,), accum)
            lse_max = T.alloc_fragment((1,), accum)
            wsum = T.alloc_fragment((1,), accum)
            wts = T.alloc_fragment((max_split,), accum)
            o = T.alloc_fragment((dim,), accum)
            n = num_splits[b]
            for s in T.Parallel(max_split):
                lse[s] = T.if_then_else(s < n, LSE[b, s, h], -T.infinity(accum))
            T.reduce_max(lse, lse_max, dim=0)
            for s in T.Parallel(max_split):
                wts[s] = T.if_then_else(s < n, T.exp(lse[s] - lse_max[0]), 0.0)
            T.reduce_sum(wts, wsum, dim=0)
            T.clear(o)
            for s in T.serial(n):
                for d in T.Parallel(dim):
                    o[d] += wts[s] / wsum[0] * T.cast(O_partial[b, s, h, d], accum)
            for d in T.Parallel(dim):
                O[b, h, d] = T.cast(o[d], T.bfloat16)

    return main


# ---- speculative verify, causal within the drafts: a full-prefix loop, then a masked tail ----
@tilelang.jit(out_idx=[4])
def spec_verify_causal_two_loops(heads=16, kv_heads=4, q_len=4, dim=128, block_N=64,
                                 threads=128):
    """The q_len draft tokens are the last q_len of seq_lens[b] cached tokens ([batch, max_len,
    kv_heads, dim], T.dynamic batch and max_len); draft t sees positions <= len - q_len + t.
    Rows r = head * q_len + t (head-major: 4 heads x 4 drafts = 16 rows).  The key tiles
    wholly before the drafts run unmasked under T.Pipelined(0, n_full); the rest under
    T.Pipelined(n_full, n_tiles) with the causal mask (TileLang's start / stop form), into
    tiles of its own (TileLang versions a shared tile once per pipelined loop).  n_full
    is a T.alloc_var(init=0) set by one branch."""
    batch = T.dynamic("batch")
    max_len = T.dynamic("max_len")
    group = heads // kv_heads
    rows = group * q_len
    scale = dim ** -0.5 * LOG2E
    dtype, accum = T.bfloat16, T.float32

    @T.prim_func
    def main(Q: T.Tensor((batch, q_len, heads, dim), dtype),
             K: T.Tensor((batch, max_len, kv_heads, dim), dtype),
             V: T.Tensor((batch, max_len, kv_heads, dim), dtype),
             seq_lens: T.Tensor((batch,), T.int32),
             O: T.Tensor((batch, q_len, heads, dim), dtype)):
        with T.Kernel(kv_heads, batch, threads=threads) as (hk, b):
            q_s = T.alloc_shared((rows, dim), dtype)
            k_s = T.alloc_shared((block_N, dim), dtype)
            v_s = T.alloc_shared((block_N, dim), dtype)
            kt_s = T.alloc_shared((block_N, dim), dtype)
            vt_s = T.alloc_shared((block_N, dim), dtype)
            p_s = T.alloc_shared((rows, block_N), dtype)
            acc_s = T.alloc_fragment((rows, block_N), accum)
            acc_o = T.alloc_fragment((rows, dim), accum)
            m = T.alloc_fragment((rows,), accum)
            m_prev = T.alloc_fragment((rows,), accum)
            r_scale = T.alloc_fragment((rows,), accum)
            r_sum = T.alloc_fragment((rows,), accum)
            logsum = T.alloc_fragment((rows,), accum)
            n_full = T.alloc_var(T.int32, init=0)

            kv_len = seq_lens[b]
            ctx = kv_len - q_len
            if ctx > 0:
                n_full = ctx // block_N
            for r, d in T.Parallel(rows, dim):
                q_s[r, d] = Q[b, r % q_len, hk * group + r // q_len, d]
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(0, n_full, num_stages=2):
                T.copy(K[b, k * block_N:(k + 1) * block_N, hk, :], k_s)
                T.copy(V[b, k * block_N:(k + 1) * block_N, hk, :], v_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, clear_accum=True)
                _online_softmax(acc_s, m, m_prev, r_scale, r_sum, logsum, acc_o, scale,
                                rows, block_N, dim)
                T.copy(acc_s, p_s)
                T.gemm(p_s, v_s, acc_o)
            for k in T.Pipelined(n_full, T.ceildiv(kv_len, block_N), num_stages=2):
                T.copy(K[b, k * block_N:(k + 1) * block_N, hk, :], kt_s)
                T.copy(V[b, k * block_N:(k + 1) * block_N, hk, :], vt_s)
                T.gemm(q_s, kt_s, acc_s, transpose_B=True, clear_accum=True)
                for r, j in T.Parallel(rows, block_N):
                    acc_s[r, j] = T.if_then_else(k * block_N + j <= ctx + r % q_len, acc_s[r, j],
                                                 -T.infinity(accum))
                _online_softmax(acc_s, m, m_prev, r_scale, r_sum, logsum, acc_o, scale,
                                rows, block_N, dim)
                T.copy(acc_s, p_s)
                T.gemm(p_s, vt_s, acc_o)
            for r, d in T.Parallel(rows, dim):
                O[b, r % q_len, hk * group + r // q_len, d] = acc_o[r, d] / logsum[r]

    return main


# ---- MLA decode, keys walked last tile first: only the first iteration is masked ---------------
@tilelang.jit(out_idx=[4, 5])
def mla_decode_reversed_tiles(batch=2, heads=64, kv_lora=256, pe_dim=64, page=64,
                              num_blocks=24, max_pages=12, threads=256):
    """MLA decode without split over a paged [num_blocks, 64, 320] latent | rope cache, one
    page a key tile, the tiles walked from the last: kr = 0 is the only partial tile, so only
    it is masked (``if kr == 0``).  T.use_swizzle(10) on the (heads / 64, batch) grid; the
    output goes through a swizzled shared tile to its slice of O, and each row's log2-sum-exp
    is copied from the row fragment to LSE[b, h0:h0 + 64]."""
    dim = kv_lora + pe_dim
    block_H = 64
    scale = dim ** -0.5 * LOG2E
    dtype, accum = T.float16, T.float32

    @T.prim_func
    def main(Q: T.Tensor((batch, heads, dim), dtype),
             KV: T.Tensor((num_blocks, page, dim), dtype),
             block_table: T.Tensor((batch, max_pages), T.int32),
             cache_seqlens: T.Tensor((batch,), T.int32),
             O: T.Tensor((batch, heads, kv_lora), dtype),
             LSE: T.Tensor((batch, heads), accum)):
        with T.Kernel(heads // block_H, batch, threads=threads) as (hx, b):
            q_s = T.alloc_shared((block_H, kv_lora), dtype)
            qpe_s = T.alloc_shared((block_H, pe_dim), dtype)
            kv_s = T.alloc_shared((page, kv_lora), dtype)
            kpe_s = T.alloc_shared((page, pe_dim), dtype)
            s_s = T.alloc_shared((block_H, page), dtype)
            o_s = T.alloc_shared((block_H, kv_lora), dtype)
            acc_s = T.alloc_fragment((block_H, page), accum)
            acc_o = T.alloc_fragment((block_H, kv_lora), accum)
            m = T.alloc_fragment((block_H,), accum)
            m_prev = T.alloc_fragment((block_H,), accum)
            r_scale = T.alloc_fragment((block_H,), accum)
            r_sum = T.alloc_fragment((block_H,), accum)
            logsum = T.alloc_fragment((block_H,), accum)
            T.annotate_layout({o_s: tilelang.layout.make_swizzled_layout(o_s)})
            T.use_swizzle(10)

            T.copy(Q[b, hx * block_H:(hx + 1) * block_H, 0:kv_lora], q_s)
            T.copy(Q[b, hx * block_H:(hx + 1) * block_H, kv_lora:dim], qpe_s)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(m, -T.infinity(accum))
            n = T.ceildiv(cache_seqlens[b], page)
            for kr in T.Pipelined(n, num_stages=2):
                k = n - 1 - kr
                T.copy(KV[block_table[b, k], :, 0:kv_lora], kv_s)
                T.copy(KV[block_table[b, k], :, kv_lora:dim], kpe_s)
                T.gemm(q_s, kv_s, acc_s, transpose_B=True, clear_accum=True,
                       policy=T.GemmWarpPolicy.FullCol)
                T.gemm(qpe_s, kpe_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
                if kr == 0:
                    for i, j in T.Parallel(block_H, page):
                        acc_s[i, j] = T.if_then_else(k * page + j >= cache_seqlens[b],
                                                     -T.infinity(accum), acc_s[i, j])
                _online_softmax(acc_s, m, m_prev, r_scale, r_sum, logsum, acc_o, scale,
                                block_H, page, kv_lora)
                T.copy(acc_s, s_s)
                T.gemm(s_s, kv_s, acc_o, policy=T.GemmWarpPolicy.FullCol)
            for i, d in T.Parallel(block_H, kv_lora):
                acc_o[i, d] /= logsum[i]
            for i in T.Parallel(block_H):
                logsum[i] = T.log2(logsum[i]) + m[i] * scale
            T.copy(logsum, LSE[b, hx * block_H:(hx + 1) * block_H])
            T.copy(acc_o, o_s)
            T.copy(o_s, O[b, hx * block_H:(hx + 1) * block_H, :])

    return main


# ---- int8 Q K^T with per-head / per-token scales (SageAttention-style), V in bf16 -----------
@tilelang.jit(out_idx=[6])
def int8_qk_decode_token_scales(batch=3, heads=32, kv_heads=4, max_len=1000, dim=128,
                                block_N=64, threads=128):
    """Q and K quantized to int8 (Q one scale per (b, head), K one per (b, token, kv head)):
    S = int32(Q_q K_q^T) * q_scale * k_scale in float32, then softmax and P V with V in bf16.
    The 8 heads of a KV head pad 16 rows; the int32 accumulator and the float scores share
    their loops (one register layout)."""
    group = heads // kv_heads
    block_H = 16
    scale = dim ** -0.5 * LOG2E
    dtype, accum = T.bfloat16, T.float32

    @T.prim_func
    def main(Q_q: T.Tensor((batch, heads, dim), T.int8),
             q_scale: T.Tensor((batch, heads), accum),
             K_q: T.Tensor((batch, max_len, kv_heads, dim), T.int8),
             k_scale: T.Tensor((batch, max_len, kv_heads), accum),
             V: T.Tensor((batch, max_len, kv_heads, dim), dtype),
             lengths: T.Tensor((batch,), T.int32),
             O: T.Tensor((batch, heads, dim), dtype)):
        with T.Kernel(kv_heads, batch, threads=threads) as (hk, b):
            q_s = T.alloc_shared((block_H, dim), T.int8)
            k_s = T.alloc_shared((block_N, dim), T.int8)
            v_s = T.alloc_shared((block_N, dim), dtype)
            ks_s = T.alloc_shared((block_N,), accum)
            p_s = T.alloc_shared((block_H, block_N), dtype)
            acc_i = T.alloc_fragment((block_H, block_N), T.int32)
            acc_s = T.alloc_fragment((block_H, block_N), accum)
            acc_o = T.alloc_fragment((block_H, dim), accum)
            qs = T.alloc_fragment((block_H,), accum)
            m = T.alloc_fragment((block_H,), accum)
            m_prev = T.alloc_fragment((block_H,), accum)
            r_scale = T.alloc_fragment((block_H,), accum)
            r_sum = T.alloc_fragment((block_H,), accum)
            logsum = T.alloc_fragment((block_H,), accum)

            seqlen = lengths[b]
            for i, d in T.Parallel(block_H, dim):
                q_s[i, d] = T.if_then_else(i < group, Q_q[b, hk * group + i, d], 0)
            for i in T.Parallel(block_H):
                qs[i] = T.if_then_else(i < group, q_scale[b, hk * group + i], 0.0)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(T.ceildiv(seqlen, block_N), num_stages=2):
                T.copy(K_q[b, k * block_N:(k + 1) * block_N, hk, :], k_s)
                T.copy(V[b, k * block_N:(k + 1) * block_N, hk, :], v_s)
                for j in T.Parallel(block_N):
                    ks_s[j] = T.if_then_else(k * block_N + j < seqlen,
                                             k_scale[b, k * block_N + j, hk], 0.0)
                T.gemm(q_s, k_s, acc_i, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(block_H, block_N):
                    acc_s[i, j] = T.if_then_else(
                        k * block_N + j < seqlen, T.cast(acc_i[i, j], accum) * qs[i] * ks_s[j],
                        -T.infinity(accum))
                _online_softmax(acc_s, m, m_prev, r_scale, r_sum, logsum, acc_o, scale,
                                block_H, block_N, dim)
                T.copy(acc_s, p_s)
                for j, d in T.Parallel(block_N, dim):
                    v_s[j, d] = T.if_then_else(k * block_N + j < seqlen, v_s[j, d], 0)
                T.gemm(p_s, v_s, acc_o)
            for i, d in T.Parallel(block_H, dim):
                if i < group:
                    O[b, hk * group + i, d] = acc_o[i, d] / logsum[i]

    return main


# ---- GQA decode with a per-token mask; a 64-row tile of which the group fills 8 ---------------
@tilelang.jit(out_idx=[4])
def gqa_decode_token_mask(batch=2, heads=32, kv_heads=4, seqlen=1000, dim=128, block_N=64,
                          block_H=64, threads=128):
    """A KV head's 8 query heads take the first 8 rows of a 64-row tile (one wgmma warpgroup):
    Q's rows are copied from hid * 8 on, 64 of them -- rows past the heads are out of Q and
    read as zeros -- and only acc_o[:8, :] is stored, through an (8, dim) shared tile.  A
    token takes part where mask[b, t, hk] (bool) is set: the tile's mask is copied into a
    (block_N,) fragment read at the scores' column.  A row all of whose tokens are masked
    gives 0 (logsum 0)."""
    group = heads // kv_heads
    valid = min(block_H, group)
    scale = dim ** -0.5 * LOG2E
    dtype, accum = T.float16, T.float32

    @T.prim_func
    def main(Q: T.Tensor((batch, heads, dim), dtype),
             K: T.Tensor((batch, seqlen, kv_heads, dim), dtype),
             V: T.Tensor((batch, seqlen, kv_heads, dim), dtype),
             mask: T.Tensor((batch, seqlen, kv_heads), T.bool),
             O: T.Tensor((batch, heads, dim), dtype)):
        with T.Kernel(batch, heads // valid, threads=threads) as (bid, hid):
            q_s = T.alloc_shared((block_H, dim), dtype)
            k_s = T.alloc_shared((block_N, dim), dtype)
            v_s = T.alloc_shared((block_N, dim), dtype)
            o_s = T.alloc_shared((valid, dim), dtype)
            acc_s = T.alloc_fragment((block_H, block_N), accum)
            acc_s_cast = T.alloc_fragment((block_H, block_N), dtype)
            acc_o = T.alloc_fragment((block_H, dim), accum)
            mask_local = T.alloc_fragment((block_N,), T.bool)
            m = T.alloc_fragment((block_H,), accum)
            m_prev = T.alloc_fragment((block_H,), accum)
            r_scale = T.alloc_fragment((block_H,), accum)
            r_sum = T.alloc_fragment((block_H,), accum)
            logsum = T.alloc_fragment((block_H,), accum)

            hk = hid // (group // valid)
            T.copy(Q[bid, hid * valid:hid * valid + block_H, :], q_s)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(T.ceildiv(seqlen, block_N), num_stages=2):
                T.copy(K[bid, k * block_N:(k + 1) * block_N, hk, :], k_s)
                T.copy(mask[bid, k * block_N:(k + 1) * block_N, hk], mask_local)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(block_H, block_N):
                    acc_s[i, j] = T.if_then_else(mask_local[j], acc_s[i, j], -T.infinity(accum))
                _online_softmax(acc_s, m, m_prev, r_scale, r_sum, logsum, acc_o, scale,
                                block_H, block_N, dim)
                T.copy(acc_s, acc_s_cast)
                T.copy(V[bid, k * block_N:(k + 1) * block_N, hk, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o)
            for i, d in T.Parallel(block_H, dim):
                acc_o[i, d] = T.if_then_else(logsum[i] > 0, acc_o[i, d] / logsum[i], 0)
            T.copy(acc_o[:valid, :], o_s)
            T.copy(o_s, O[bid, hid * valid:(hid + 1) * valid, :])

    return main


# ---- varlen decode that also returns each key tile's attention-mass bound, with sinks -------
@tilelang.jit(out_idx=[5, 6])
def varlen_decode_tile_scores_sink(batch=3, heads=32, kv_heads=4, max_seqlen=1000, dim=128,
                                   block_N=64, block_H=64, threads=128):
    """Keys packed by cu_seqlens_k ([total, kv_heads, dim], T.dynamic total).  Besides O, each
    key tile t gets a bound on the attention mass its keys take:
    2^((max of tile t's scores - final max) * scale) / (sum + sink) -- the tile maxima are
    copied from a row fragment into column t of a shared (block_H, tiles) table
    (T.copy(tile_max, S_s[:, k])), tiles past the sequence stay -inf (mass 0).  A learned
    sink per head adds exp of itself to the denominator (gpt-oss).  The group's 8 rows of
    64 go out through row slices of shared tiles.  Every sequence has a key (no early exit
    here)."""
    total = T.dynamic("total_k")
    group = heads // kv_heads
    valid = min(block_H, group)
    n_tiles = (max_seqlen + block_N - 1) // block_N
    scale = dim ** -0.5 * LOG2E
    dtype, accum = T.bfloat16, T.float32

    @T.prim_func
    def main(Q: T.Tensor((batch, heads, dim), dtype),
             K: T.Tensor((total, kv_heads, dim), dtype),
             V: T.Tensor((total, kv_heads, dim), dtype),
             cu_seqlens_k: T.Tensor((batch + 1,), T.int32),
             sinks: T.Tensor((heads,), accum),
             O: T.Tensor((batch, heads, dim), dtype),
             S: T.Tensor((batch, heads, n_tiles), dtype)):
        with T.Kernel(batch, heads // valid, threads=threads) as (bid, hid):
            q_s = T.alloc_shared((block_H, dim), dtype)
            k_s = T.alloc_shared((block_N, dim), dtype)
            v_s = T.alloc_shared((block_N, dim), dtype)
            o_s = T.alloc_shared((valid, dim), dtype)
            S_s = T.alloc_shared((block_H, n_tiles), accum)
            S_cast = T.alloc_shared((block_H, n_tiles), dtype)
            sink_s = T.alloc_shared((block_H,), accum)
            acc_s = T.alloc_fragment((block_H, block_N), accum)
            acc_s_cast = T.alloc_fragment((block_H, block_N), dtype)
            acc_o = T.alloc_fragment((block_H, dim), accum)
            tile_max = T.alloc_fragment((block_H,), accum)
            m = T.alloc_fragment((block_H,), accum)
            m_prev = T.alloc_fragment((block_H,), accum)
            r_scale = T.alloc_fragment((block_H,), accum)
            r_sum = T.alloc_fragment((block_H,), accum)
            logsum = T.alloc_fragment((block_H,), accum)

            hk = hid // (group // valid)
            k0 = cu_seqlens_k[bid]
            seqlen = cu_seqlens_k[bid + 1] - k0
            T.copy(Q[bid, hid * valid:hid * valid + block_H, :], q_s)
            T.fill(S_s, -T.infinity(accum))
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(T.ceildiv(seqlen, block_N), num_stages=2):
                T.copy(K[k0 + k * block_N:k0 + (k + 1) * block_N, hk, :], k_s)
                T.clear(acc_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_H, block_N):
                    acc_s[i, j] = T.if_then_else(k * block_N + j < seqlen, acc_s[i, j],
                                                 -T.infinity(accum))
                T.reduce_max(acc_s, tile_max, dim=1)
                T.copy(tile_max, S_s[:, k])
                _online_softmax(acc_s, m, m_prev, r_scale, r_sum, logsum, acc_o, scale,
                                block_H, block_N, dim)
                T.copy(acc_s, acc_s_cast)
                T.copy(V[k0 + k * block_N:k0 + (k + 1) * block_N, hk, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            T.copy(sinks[hid * valid:hid * valid + block_H], sink_s)
            for i in T.Parallel(block_H):
                logsum[i] += T.exp2(sink_s[i] * LOG2E - m[i] * scale)
            for i, j in T.Parallel(block_H, dim):
                acc_o[i, j] /= logsum[i]
            for h, t in T.Parallel(block_H, n_tiles):
                S_s[h, t] = T.exp2((S_s[h, t] - m[h]) * scale) / logsum[h]
            T.copy(acc_o[:valid, :], o_s)
            T.copy(o_s, O[bid, hid * valid:(hid + 1) * valid, :])
            T.copy(S_s, S_cast)
            T.copy(S_cast[:valid, :], S[bid, hid * valid:(hid + 1) * valid, :])

    return main
