"""A forty-third set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang): the attention family as people write it -- MLA decode over a 512-wide latent with a
64-wide rope part, flash-decoding over a paged cache of 16-token pages (four pages a key tile)
with a split-KV pass writing LSEs and a combine kernel, variable-length GQA over cu_seqlens
with a sliding window (the key loop cut on both ends), prefill with a 192-wide QK and a
128-wide V, head dim 256 with tanh soft-capping, FP8 (e4m3) attention with per-head scales,
a warp-specialised forward (a producer warpgroup branching on the thread index, mbarriers,
T.wgmma_gemm / T.wait_wgmma in the consumer), a GQA forward under T.Pipelined(order=,
stage=, group=), the backward dK / dV of sliding-window attention with dQ by atomics,
speculative decode (three draft tokens) over a paged cache with a GQA group of 8 packed into
the rows, T5-style clamped relative-position bias from a table, native-sparse-attention over
selected key blocks with the query group packed per token, and gpt-oss style learned sinks
with a sliding window.

The file reads as TileLang after swapping its two import lines (``import tilelang`` /
``import tilelang.language as T``); ``tests/test_unseen_programs43.py`` builds each to a cubin
on the CPU, checks what decides the result in the generated source, and on a GPU compares it
with torch."""

import tilecute as tilelang
import tilecute.language as T

LOG2E = 1.44269504


@T.macro
def _softmax_step(acc_s, m, m_prev, r_scale, r_sum, l, acc_o, rows, cols, dv):
    """One key tile of an online softmax over scores already in log2 units: running max and
    sum updated, acc_s turned into 2^(s - max), acc_o rescaled.  A row whose keys so far are
    all masked keeps max -inf; it is exponentiated against 0 (held in r_sum until the row
    sums overwrite it) so no inf - inf appears."""
    T.copy(m, m_prev)
    T.reduce_max(acc_s, m, dim=1, clear=False)
    for i in T.Parallel(rows):
        r_sum[i] = T.if_then_else(m[i] == -T.infinity("float32"), 0.0, m[i])
        r_scale[i] = T.exp2(m_prev[i] - r_sum[i])
    for i, j in T.Parallel(rows, cols):
        acc_s[i, j] = T.exp2(acc_s[i, j] - r_sum[i])
    T.reduce_sum(acc_s, r_sum, dim=1)
    for i in T.Parallel(rows):
        l[i] = l[i] * r_scale[i] + r_sum[i]
    for i, j in T.Parallel(rows, dv):
        acc_o[i, j] *= r_scale[i]


# ---- MLA decode: a 512-wide latent (keys and values alike) plus a 64-wide rope part --------
@tilelang.jit(out_idx=[5])
def mla_decode_latent512_rope64(batch=2, heads=128, max_kv=320, kv_lora=512, pe_dim=64,
                                block_H=64, block_N=32, threads=256):
    """DeepSeek MLA decode with the up-projections absorbed: each query head has a 512-wide
    latent part Q and a 64-wide rope part Q_pe; the cache holds one latent row KV (used as
    key and as value) and one rope key K_pe per token.  scores = Q KV^T + Q_pe K_pe^T (two
    GEMMs into one accumulator), O = softmax(scores * scale) KV over the first
    cache_seqlens[b] tokens.  block_H heads share every KV tile; P goes through shared memory
    for the second GEMM (the FullCol policy splits the 512 output columns over the warps)."""
    scale = (1.0 / (kv_lora + pe_dim)) ** 0.5 * LOG2E
    dtype, accum = T.bfloat16, T.float32

    @T.prim_func
    def mla(Q: T.Tensor((batch, heads, kv_lora), dtype), Q_pe: T.Tensor((batch, heads, pe_dim), dtype),
            KV: T.Tensor((batch, max_kv, kv_lora), dtype), K_pe: T.Tensor((batch, max_kv, pe_dim), dtype),
            cache_seqlens: T.Tensor((batch,), T.int32), O: T.Tensor((batch, heads, kv_lora), dtype)):
        with T.Kernel(heads // block_H, batch, threads=threads) as (hx, b):
            q_s = T.alloc_shared((block_H, kv_lora), dtype)
            qpe_s = T.alloc_shared((block_H, pe_dim), dtype)
            kv_s = T.alloc_shared((block_N, kv_lora), dtype)
            kpe_s = T.alloc_shared((block_N, pe_dim), dtype)
            p_s = T.alloc_shared((block_H, block_N), dtype)
            o_s = T.alloc_shared((block_H, kv_lora), dtype)
            acc_s = T.alloc_fragment((block_H, block_N), accum)
            acc_o = T.alloc_fragment((block_H, kv_lora), accum)
            m = T.alloc_fragment((block_H,), accum)
            m_prev = T.alloc_fragment((block_H,), accum)
            r_scale = T.alloc_fragment((block_H,), accum)
            r_sum = T.alloc_fragment((block_H,), accum)
            l = T.alloc_fragment((block_H,), accum)
            T.annotate_layout({o_s: tilelang.layout.make_swizzled_layout(o_s)})

            seqlen = cache_seqlens[b]
            T.copy(Q[b, hx * block_H:(hx + 1) * block_H, :], q_s)
            T.copy(Q_pe[b, hx * block_H:(hx + 1) * block_H, :], qpe_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(T.ceildiv(seqlen, block_N), num_stages=2):
                T.copy(KV[b, k * block_N:(k + 1) * block_N, :], kv_s)
                T.copy(K_pe[b, k * block_N:(k + 1) * block_N, :], kpe_s)
                T.gemm(q_s, kv_s, acc_s, transpose_B=True, clear_accum=True,
                       policy=T.GemmWarpPolicy.FullCol)
                T.gemm(qpe_s, kpe_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
                for i, j in T.Parallel(block_H, block_N):
                    acc_s[i, j] = T.if_then_else(k * block_N + j < seqlen, acc_s[i, j] * scale,
                                                 -T.infinity(accum))
                _softmax_step(acc_s, m, m_prev, r_scale, r_sum, l, acc_o, block_H, block_N, kv_lora)
                T.copy(acc_s, p_s)
                T.gemm(p_s, kv_s, acc_o, policy=T.GemmWarpPolicy.FullCol)
            for i, j in T.Parallel(block_H, kv_lora):
                acc_o[i, j] /= l[i]
            T.copy(acc_o, o_s)
            T.copy(o_s, O[b, hx * block_H:(hx + 1) * block_H, :])

    return mla


# ---- flash-decoding over 16-token pages: split-KV partials with LSE, then a combine ---------
@tilelang.jit(out_idx=[5, 6])
def paged16_decode_split(batch=3, heads=32, kv_heads=4, dim=128, page=16, num_blocks=96,
                         max_pages=30, num_split=4, block_N=64, block_H=16, threads=128):
    """Split-KV GQA decode over a paged cache of 16-token pages: a key tile of 64 tokens spans
    four pages, so K / V are gathered row by row through block_table (token t lives in page
    block_table[b, t // 16], slot t % 16).  The query group (8 heads of one KV head, padded to
    block_H rows) shares the tiles; the table's 30 pages (480 tokens) end inside the last
    tile, whose rows past the sequence are zeros.  Split s takes an equal share of the tiles
    and writes its output (normalised by its own sum) and its log2-sum-exp; an empty split
    writes LSE = -inf and zeros."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    dtype, accum = T.float16, T.float32
    group = heads // kv_heads

    @T.prim_func
    def split(Q: T.Tensor((batch, heads, dim), dtype),
              K_cache: T.Tensor((num_blocks, page, kv_heads, dim), dtype),
              V_cache: T.Tensor((num_blocks, page, kv_heads, dim), dtype),
              block_table: T.Tensor((batch, max_pages), T.int32),
              cache_seqlens: T.Tensor((batch,), T.int32),
              O_part: T.Tensor((batch, heads, num_split, dim), accum),
              LSE_part: T.Tensor((batch, heads, num_split), accum)):
        with T.Kernel(batch, kv_heads, num_split, threads=threads) as (b, hk, s):
            q_s = T.alloc_shared((block_H, dim), dtype)
            k_s = T.alloc_shared((block_N, dim), dtype)
            v_s = T.alloc_shared((block_N, dim), dtype)
            acc_s = T.alloc_fragment((block_H, block_N), accum)
            acc_s_cast = T.alloc_fragment((block_H, block_N), dtype)
            acc_o = T.alloc_fragment((block_H, dim), accum)
            m = T.alloc_fragment((block_H,), accum)
            m_prev = T.alloc_fragment((block_H,), accum)
            r_scale = T.alloc_fragment((block_H,), accum)
            r_sum = T.alloc_fragment((block_H,), accum)
            l = T.alloc_fragment((block_H,), accum)

            seqlen = cache_seqlens[b]
            n_tiles = T.ceildiv(seqlen, block_N)
            per_split = T.ceildiv(n_tiles, num_split)
            start = s * per_split
            end = T.min(start + per_split, n_tiles)

            for i, d in T.Parallel(block_H, dim):
                q_s[i, d] = T.if_then_else(i < group, Q[b, hk * group + i, d], 0)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            for t in T.Pipelined(T.max(end - start, 0), num_stages=2):
                for j, d in T.Parallel(block_N, dim):
                    tok = (start + t) * block_N + j
                    k_s[j, d] = T.if_then_else(
                        tok < seqlen, K_cache[block_table[b, tok // page], tok % page, hk, d], 0)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(block_H, block_N):
                    acc_s[i, j] = T.if_then_else((start + t) * block_N + j < seqlen,
                                                 acc_s[i, j] * scale, -T.infinity(accum))
                _softmax_step(acc_s, m, m_prev, r_scale, r_sum, l, acc_o, block_H, block_N, dim)
                T.copy(acc_s, acc_s_cast)
                for j, d in T.Parallel(block_N, dim):
                    tok = (start + t) * block_N + j
                    v_s[j, d] = T.if_then_else(
                        tok < seqlen, V_cache[block_table[b, tok // page], tok % page, hk, d], 0)
                T.gemm(acc_s_cast, v_s, acc_o)
            for i, d in T.Parallel(block_H, dim):
                if i < group:
                    O_part[b, hk * group + i, s, d] = T.if_then_else(l[i] > 0, acc_o[i, d] / l[i], 0)
            for i in T.Parallel(block_H):
                if i < group:
                    LSE_part[b, hk * group + i, s] = T.if_then_else(
                        l[i] > 0, T.log2(l[i]) + m[i], -T.infinity(accum))

    return split


@tilelang.jit(out_idx=[2])
def paged16_decode_combine(batch=3, heads=32, dim=128, num_split=4, threads=128):
    """The combine of flash-decoding: O = sum_s 2^(lse_s - lse) O_s with lse the log2-sum-exp
    of the splits' LSEs (empty splits carry -inf and weigh nothing); one block a (head, b)."""
    accum = T.float32

    @T.prim_func
    def combine(O_part: T.Tensor((batch, heads, num_split, dim), accum),
                LSE_part: T.Tensor((batch, heads, num_split), accum),
                O: T.Tensor((batch, heads, dim), T.float16)):
        with T.Kernel(heads, batch, threads=threads) as (h, b):
            o = T.alloc_fragment((dim,), accum)
            lse_max = T.alloc_var(accum)
            lse_sum = T.alloc_var(accum)
            lse = T.alloc_var(accum)
            w = T.alloc_var(accum)
            lse_max = -T.infinity(accum)
            for s in T.serial(num_split):
                lse_max = T.max(lse_max, LSE_part[b, h, s])
            lse_sum = 0.0
            for s in T.serial(num_split):
                lse_sum += T.exp2(LSE_part[b, h, s] - lse_max)
            lse = T.log2(lse_sum) + lse_max
            T.clear(o)
            for s in T.serial(num_split):
                w = T.exp2(LSE_part[b, h, s] - lse)
                for d in T.Parallel(dim):
                    o[d] += w * O_part[b, h, s, d]
            for d in T.Parallel(dim):
                O[b, h, d] = o[d]

    return combine


# ---- varlen GQA with a sliding window: the key loop cut at both ends ------------------------
@tilelang.jit(out_idx=[5])
def varlen_gqa_sliding_window(batch=4, heads=8, kv_heads=2, max_seqlen=200, dim=64, window=90,
                              block_M=64, block_N=32, threads=128):
    """Packed variable-length causal GQA (THD layout, T.dynamic token total) with a sliding
    window: query i of a sequence sees keys i - window < j <= i.  The key loop starts at the
    tile holding the first key any row of the query tile sees and stops after the diagonal,
    both bounds read from cu_seqlens at run time; rows past the sequence end are loaded as
    zeros and not stored."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    dtype, accum = T.bfloat16, T.float32
    group = heads // kv_heads
    total = T.dynamic("total_tokens")

    @T.prim_func
    def varlen(Q: T.Tensor((total, heads, dim), dtype), K: T.Tensor((total, kv_heads, dim), dtype),
               V: T.Tensor((total, kv_heads, dim), dtype), cu_seqlens: T.Tensor((batch + 1,), T.int32),
               max_len: T.int32, O: T.Tensor((total, heads, dim), dtype)):
        with T.Kernel(T.ceildiv(max_seqlen, block_M), heads, batch, threads=threads) as (bx, h, b):
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
            l = T.alloc_fragment((block_M,), accum)

            start = cu_seqlens[b]
            seqlen = cu_seqlens[b + 1] - start
            if bx * block_M < T.min(seqlen, max_len):
                for i, d in T.Parallel(block_M, dim):
                    q_s[i, d] = T.if_then_else(bx * block_M + i < seqlen,
                                               Q[start + bx * block_M + i, h, d], 0)
                T.fill(acc_o, 0)
                T.fill(l, 0)
                T.fill(m, -T.infinity(accum))
                lo = T.max(bx * block_M - window + 1, 0) // block_N
                hi = T.ceildiv(T.min((bx + 1) * block_M, seqlen), block_N)
                for k in T.Pipelined(lo, hi, num_stages=2):
                    for j, d in T.Parallel(block_N, dim):
                        k_s[j, d] = T.if_then_else(k * block_N + j < seqlen,
                                                   K[start + k * block_N + j, h // group, d], 0)
                    T.gemm(q_s, k_s, acc_s, transpose_B=True, clear_accum=True)
                    for i, j in T.Parallel(block_M, block_N):
                        q_pos = bx * block_M + i
                        k_pos = k * block_N + j
                        acc_s[i, j] = T.if_then_else(
                            (k_pos <= q_pos) & (k_pos > q_pos - window) & (k_pos < seqlen),
                            acc_s[i, j] * scale, -T.infinity(accum))
                    _softmax_step(acc_s, m, m_prev, r_scale, r_sum, l, acc_o, block_M, block_N, dim)
                    T.copy(acc_s, acc_s_cast)
                    for j, d in T.Parallel(block_N, dim):
                        v_s[j, d] = T.if_then_else(k * block_N + j < seqlen,
                                                   V[start + k * block_N + j, h // group, d], 0)
                    T.gemm(acc_s_cast, v_s, acc_o)
                for i, d in T.Parallel(block_M, dim):
                    o_s[i, d] = acc_o[i, d] / l[i]
                for i, d in T.Parallel(block_M, dim):
                    if bx * block_M + i < seqlen:
                        O[start + bx * block_M + i, h, d] = o_s[i, d]

    return varlen


# ---- prefill with QK width 192 and V width 128 (DeepSeek-style), causal ---------------------
@tilelang.jit(out_idx=[3])
def fa_causal_qk192_v128(batch=1, heads=4, seq_len=384, dim_qk=192, dim_v=128, block_M=128,
                         block_N=64, threads=256, num_stages=2):
    """Causal attention whose queries and keys are 192 wide (128 nope + 64 rope, as MLA
    prefill materialises them) while values and output are 128 wide; BSHD bfloat16,
    the causal loop bound min(ceil((bx+1) bm / bn), ceil(S / bn)); the mask is only
    applied on the tiles that cross the diagonal."""
    scale = (1.0 / dim_qk) ** 0.5 * LOG2E
    dtype, accum = T.bfloat16, T.float32

    @T.prim_func
    def fwd(Q: T.Tensor((batch, seq_len, heads, dim_qk), dtype),
            K: T.Tensor((batch, seq_len, heads, dim_qk), dtype),
            V: T.Tensor((batch, seq_len, heads, dim_v), dtype),
            O: T.Tensor((batch, seq_len, heads, dim_v), dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, h, b):
            q_s = T.alloc_shared((block_M, dim_qk), dtype)
            k_s = T.alloc_shared((block_N, dim_qk), dtype)
            v_s = T.alloc_shared((block_N, dim_v), dtype)
            acc_s = T.alloc_fragment((block_M, block_N), accum)
            acc_s_cast = T.alloc_fragment((block_M, block_N), dtype)
            acc_o = T.alloc_fragment((block_M, dim_v), accum)
            m = T.alloc_fragment((block_M,), accum)
            m_prev = T.alloc_fragment((block_M,), accum)
            r_scale = T.alloc_fragment((block_M,), accum)
            r_sum = T.alloc_fragment((block_M,), accum)
            l = T.alloc_fragment((block_M,), accum)

            T.copy(Q[b, bx * block_M:(bx + 1) * block_M, h, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            n = T.min(T.ceildiv((bx + 1) * block_M, block_N), T.ceildiv(seq_len, block_N))
            for k in T.Pipelined(n, num_stages=num_stages):
                T.copy(K[b, k * block_N:(k + 1) * block_N, h, :], k_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, clear_accum=True,
                       policy=T.GemmWarpPolicy.FullRow)
                if (k + 1) * block_N > bx * block_M:
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.if_then_else(bx * block_M + i >= k * block_N + j,
                                                     acc_s[i, j] * scale, -T.infinity(accum))
                else:
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = acc_s[i, j] * scale
                _softmax_step(acc_s, m, m_prev, r_scale, r_sum, l, acc_o, block_M, block_N, dim_v)
                T.copy(acc_s, acc_s_cast)
                T.copy(V[b, k * block_N:(k + 1) * block_N, h, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, d in T.Parallel(block_M, dim_v):
                acc_o[i, d] /= l[i]
            T.copy(acc_o, O[b, bx * block_M:(bx + 1) * block_M, h, :])

    return fwd


# ---- head dim 256 with tanh soft-capping of the logits --------------------------------------
@tilelang.jit(out_idx=[3])
def fa_d256_softcap(batch=2, heads=2, seq_len=300, dim=256, softcap=50.0, block_M=64, block_N=64,
                    threads=128):
    """Gemma-style attention: head dim 256, logits soft-capped as cap * tanh(s / (cap sqrt(d)))
    before the softmax, non-causal over a sequence that is not a multiple of the tile (keys
    past the end masked, query rows past the end clipped by the tile copy)."""
    dtype, accum = T.float16, T.float32
    sm_scale = (1.0 / dim) ** 0.5

    @T.prim_func
    def fwd(Q: T.Tensor((batch, heads, seq_len, dim), dtype), K: T.Tensor((batch, heads, seq_len, dim), dtype),
            V: T.Tensor((batch, heads, seq_len, dim), dtype), O: T.Tensor((batch, heads, seq_len, dim), dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, h, b):
            q_s = T.alloc_shared((block_M, dim), dtype)
            k_s = T.alloc_shared((block_N, dim), dtype)
            v_s = T.alloc_shared((block_N, dim), dtype)
            acc_s = T.alloc_fragment((block_M, block_N), accum)
            acc_s_cast = T.alloc_fragment((block_M, block_N), dtype)
            acc_o = T.alloc_fragment((block_M, dim), accum)
            m = T.alloc_fragment((block_M,), accum)
            m_prev = T.alloc_fragment((block_M,), accum)
            r_scale = T.alloc_fragment((block_M,), accum)
            r_sum = T.alloc_fragment((block_M,), accum)
            l = T.alloc_fragment((block_M,), accum)

            T.copy(Q[b, h, bx * block_M:(bx + 1) * block_M, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(T.ceildiv(seq_len, block_N), num_stages=1):
                T.copy(K[b, h, k * block_N:(k + 1) * block_N, :], k_s)
                T.clear(acc_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(
                        k * block_N + j < seq_len,
                        softcap * T.tanh(acc_s[i, j] * sm_scale / softcap) * LOG2E,
                        -T.infinity(accum))
                _softmax_step(acc_s, m, m_prev, r_scale, r_sum, l, acc_o, block_M, block_N, dim)
                T.copy(acc_s, acc_s_cast)
                T.copy(V[b, h, k * block_N:(k + 1) * block_N, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o)
            for i, d in T.Parallel(block_M, dim):
                acc_o[i, d] /= l[i]
            T.copy(acc_o, O[b, h, bx * block_M:(bx + 1) * block_M, :])

    return fwd


# ---- FP8 (e4m3) attention with per-head descale factors ------------------------------------
@tilelang.jit(out_idx=[6])
def fa_fp8_per_head_scales(batch=2, heads=4, seq_len=256, dim=128, block_M=64, block_N=64,
                           threads=128):
    """Q, K and V quantised to float8_e4m3 with one scale per (batch, head): S = Q K^T in an
    FP8 GEMM (f32 accumulate), times q_scale * k_scale / sqrt(d); V is widened to float16 in
    shared memory (an FP8 B operand must be K-major, V's tile is not) and its scale applied
    to the output once at the end.  Non-causal, BHSD, O float16."""
    sm_scale = (1.0 / dim) ** 0.5 * LOG2E
    fp8, half, accum = T.float8_e4m3fn, T.float16, T.float32

    @T.prim_func
    def fp8_fwd(Q: T.Tensor((batch, heads, seq_len, dim), fp8), K: T.Tensor((batch, heads, seq_len, dim), fp8),
                V: T.Tensor((batch, heads, seq_len, dim), fp8), q_scale: T.Tensor((batch, heads), accum),
                k_scale: T.Tensor((batch, heads), accum), v_scale: T.Tensor((batch, heads), accum),
                O: T.Tensor((batch, heads, seq_len, dim), half)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, h, b):
            q_s = T.alloc_shared((block_M, dim), fp8)
            k_s = T.alloc_shared((block_N, dim), fp8)
            v_s8 = T.alloc_shared((block_N, dim), fp8)
            v_s = T.alloc_shared((block_N, dim), half)
            acc_s = T.alloc_fragment((block_M, block_N), accum)
            acc_s_cast = T.alloc_fragment((block_M, block_N), half)
            acc_o = T.alloc_fragment((block_M, dim), accum)
            m = T.alloc_fragment((block_M,), accum)
            m_prev = T.alloc_fragment((block_M,), accum)
            r_scale = T.alloc_fragment((block_M,), accum)
            r_sum = T.alloc_fragment((block_M,), accum)
            l = T.alloc_fragment((block_M,), accum)
            qk = T.alloc_var(accum)

            qk = q_scale[b, h] * k_scale[b, h] * sm_scale
            T.copy(Q[b, h, bx * block_M:(bx + 1) * block_M, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(T.ceildiv(seq_len, block_N), num_stages=2):
                T.copy(K[b, h, k * block_N:(k + 1) * block_N, :], k_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] *= qk
                _softmax_step(acc_s, m, m_prev, r_scale, r_sum, l, acc_o, block_M, block_N, dim)
                T.copy(acc_s, acc_s_cast)
                T.copy(V[b, h, k * block_N:(k + 1) * block_N, :], v_s8)
                for j, d in T.Parallel(block_N, dim):
                    v_s[j, d] = v_s8[j, d]
                T.gemm(acc_s_cast, v_s, acc_o)
            for i, d in T.Parallel(block_M, dim):
                acc_o[i, d] = acc_o[i, d] * v_scale[b, h] / l[i]
            T.copy(acc_o, O[b, h, bx * block_M:(bx + 1) * block_M, :])

    return fp8_fwd


# ---- warp-specialised forward: a producer warpgroup chosen by the thread index -------------
@tilelang.jit(out_idx=[3])
def fa_ws_producer_tx_branch(batch=1, heads=4, seq_len=512, dim=128, block_M=64, block_N=64,
                             stages=2):
    """Non-causal forward written the way TileLang's hand-specialised MLA kernels are:
    256 threads, ``if tx >= 128`` is the producer (``T.set_max_nreg(40, 0)``) copying K and
    V tiles into a ring of ``stages`` slots and arriving on ``kv_ready``; the consumer
    (``T.set_max_nreg(232, 1)``) waits, runs ``T.wgmma_gemm`` / ``T.wait_wgmma(0)`` and
    releases the slot on ``kv_free``.  Q is loaded by all threads before the split."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    dtype, accum = T.float16, T.float32

    @T.prim_func
    def ws(Q: T.Tensor((batch, seq_len, heads, dim), dtype), K: T.Tensor((batch, seq_len, heads, dim), dtype),
           V: T.Tensor((batch, seq_len, heads, dim), dtype), O: T.Tensor((batch, seq_len, heads, dim), dtype)):
        with T.Kernel(seq_len // block_M, heads, batch, threads=256) as (bx, h, b):
            q_s = T.alloc_shared((block_M, dim), dtype)
            k_s = T.alloc_shared((stages, block_N, dim), dtype)
            v_s = T.alloc_shared((stages, block_N, dim), dtype)
            acc_s = T.alloc_fragment((block_M, block_N), accum)
            acc_s_cast = T.alloc_fragment((block_M, block_N), dtype)
            acc_o = T.alloc_fragment((block_M, dim), accum)
            m = T.alloc_fragment((block_M,), accum)
            m_prev = T.alloc_fragment((block_M,), accum)
            r_scale = T.alloc_fragment((block_M,), accum)
            r_sum = T.alloc_fragment((block_M,), accum)
            l = T.alloc_fragment((block_M,), accum)
            kv_ready = T.alloc_barrier(arrive_count=[128] * stages)
            kv_free = T.alloc_barrier(arrive_count=[128] * stages)
            tx = T.get_thread_binding()
            n = seq_len // block_N

            T.copy(Q[b, bx * block_M:(bx + 1) * block_M, h, :], q_s)
            T.sync_threads()
            if tx >= 128:
                T.set_max_nreg(40, 0)
                for t in T.serial(n):
                    T.barrier_wait(kv_free[t % stages], ((t // stages) & 1) ^ 1)
                    T.copy(K[b, t * block_N:(t + 1) * block_N, h, :], k_s[t % stages, :, :])
                    T.copy(V[b, t * block_N:(t + 1) * block_N, h, :], v_s[t % stages, :, :])
                    T.barrier_arrive(kv_ready[t % stages])
            else:
                T.set_max_nreg(232, 1)
                T.fill(acc_o, 0)
                T.fill(l, 0)
                T.fill(m, -T.infinity(accum))
                for t in T.serial(n):
                    T.barrier_wait(kv_ready[t % stages], (t // stages) & 1)
                    T.clear(acc_s)
                    T.wgmma_gemm(q_s, k_s[t % stages, :, :], acc_s, transpose_B=True)
                    T.wait_wgmma(0)
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] *= scale
                    _softmax_step(acc_s, m, m_prev, r_scale, r_sum, l, acc_o, block_M, block_N, dim)
                    T.copy(acc_s, acc_s_cast)
                    T.wgmma_gemm(acc_s_cast, v_s[t % stages, :, :], acc_o)
                    T.wait_wgmma(0)
                    T.barrier_arrive(kv_free[t % stages])
                for i, d in T.Parallel(block_M, dim):
                    acc_o[i, d] /= l[i]
                T.copy(acc_o, O[b, bx * block_M:(bx + 1) * block_M, h, :])

    return ws


# ---- GQA forward under T.Pipelined(order=, stage=, group=) ---------------------------------
@tilelang.jit(out_idx=[3])
def gqa_fwd_order_stage_group(batch=1, heads=16, kv_heads=2, seq_len=512, dim=128, block_M=128,
                              block_N=128, threads=256, causal=True):
    """Causal GQA (8 query heads a KV head), BSHD float16, head dim 128, with the loop
    written as FlashAttention-3's intra-warpgroup overlap: the statements in six groups
    (K copy | mask + QK GEMM | softmax + P cast | rescale | V copy | PV GEMM), the softmax
    of tile k scheduled with the PV GEMM of tile k - 1 (order / stage per group)."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    dtype, accum = T.float16, T.float32
    group = heads // kv_heads

    @T.prim_func
    def gqa(Q: T.Tensor((batch, seq_len, heads, dim), dtype), K: T.Tensor((batch, seq_len, kv_heads, dim), dtype),
            V: T.Tensor((batch, seq_len, kv_heads, dim), dtype), O: T.Tensor((batch, seq_len, heads, dim), dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, h, b):
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
            l = T.alloc_fragment((block_M,), accum)

            T.copy(Q[b, bx * block_M:(bx + 1) * block_M, h, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            n = T.min(T.ceildiv(seq_len, block_N), T.ceildiv((bx + 1) * block_M, block_N)) if causal \
                else T.ceildiv(seq_len, block_N)
            for k in T.Pipelined(n, num_stages=2, order=[-1, 0, 3, 1, -1, 2],
                                 stage=[-1, 0, 0, 1, -1, 1],
                                 group=[[0], [1, 2], [3, 4, 5, 6, 7, 8, 9, 10], [11], [12], [13]]):
                T.copy(K[b, k * block_N:(k + 1) * block_N, h // group, :], k_s)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(bx * block_M + i >= k * block_N + j, 0,
                                                 -T.infinity(accum))
                T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    m[i] = T.max(m[i], m_prev[i])
                for i in T.Parallel(block_M):
                    r_scale[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                T.reduce_sum(acc_s, r_sum, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * r_scale[i] + r_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, d in T.Parallel(block_M, dim):
                    acc_o[i, d] *= r_scale[i]
                T.copy(V[b, k * block_N:(k + 1) * block_N, h // group, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, d in T.Parallel(block_M, dim):
                acc_o[i, d] /= l[i]
            T.copy(acc_o, o_s)
            T.copy(o_s, O[b, bx * block_M:(bx + 1) * block_M, h, :])

    return gqa


# ---- backward of sliding-window causal attention: dK / dV per key tile, dQ by atomics -------
@tilelang.jit
def attn_bwd_sliding_window(batch=1, heads=2, seq_len=320, dim=64, window=100, block_M=64,
                            block_N=64, threads=256):
    """The main backward kernel of causal sliding-window attention (query i sees keys
    i - window < j <= i), one block a key tile: the query loop runs only over the tiles
    whose rows can see it, [bx * bn / bm, ceil((bx + 1) bn + window - 1) / bm), both ends cut.
    P is recomputed from the forward's LSE (log2 units), dP = dO V^T, dS = P (dP - Delta);
    dV += P^T dO and dK += dS^T Q stay in registers, dQ += dS K goes to a float32 dQ by
    ``T.atomic_add`` of the tile.  BSHD float16; dQ (zeroed by the caller), dK, dV float32."""
    scale = (1.0 / dim) ** 0.5
    dtype, accum = T.float16, T.float32
    shape = (batch, seq_len, heads, dim)

    @T.prim_func
    def bwd(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
            dO: T.Tensor(shape, dtype), lse: T.Tensor((batch, heads, seq_len), accum),
            Delta: T.Tensor((batch, heads, seq_len), accum), dQ: T.Tensor(shape, accum),
            dK: T.Tensor(shape, accum), dV: T.Tensor(shape, accum)):
        with T.Kernel(T.ceildiv(seq_len, block_N), heads, batch, threads=threads) as (bx, h, b):
            k_s = T.alloc_shared((block_N, dim), dtype)
            v_s = T.alloc_shared((block_N, dim), dtype)
            q_s = T.alloc_shared((block_M, dim), dtype)
            do_s = T.alloc_shared((block_M, dim), dtype)
            lse_s = T.alloc_shared((block_M,), accum)
            delta_s = T.alloc_shared((block_M,), accum)
            p_s = T.alloc_shared((block_N, block_M), dtype)
            ds_s = T.alloc_shared((block_N, block_M), dtype)
            qkT = T.alloc_fragment((block_N, block_M), accum)
            dpT = T.alloc_fragment((block_N, block_M), accum)
            dv = T.alloc_fragment((block_N, dim), accum)
            dk = T.alloc_fragment((block_N, dim), accum)
            dq = T.alloc_fragment((block_M, dim), accum)

            T.copy(K[b, bx * block_N:(bx + 1) * block_N, h, :], k_s)
            T.copy(V[b, bx * block_N:(bx + 1) * block_N, h, :], v_s)
            T.clear(dv)
            T.clear(dk)
            lo = bx * block_N // block_M
            hi = T.min(T.ceildiv((bx + 1) * block_N + window - 1, block_M), T.ceildiv(seq_len, block_M))
            for t in T.Pipelined(lo, hi, num_stages=2):
                T.copy(Q[b, t * block_M:(t + 1) * block_M, h, :], q_s)
                T.clear(qkT)
                T.gemm(k_s, q_s, qkT, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(lse[b, h, t * block_M:(t + 1) * block_M], lse_s)
                for j, i in T.Parallel(block_N, block_M):
                    q_pos = t * block_M + i
                    k_pos = bx * block_N + j
                    qkT[j, i] = T.if_then_else(
                        (k_pos <= q_pos) & (q_pos - k_pos < window) & (q_pos < seq_len),
                        T.exp2(qkT[j, i] * scale * LOG2E - lse_s[i]), 0)
                T.copy(dO[b, t * block_M:(t + 1) * block_M, h, :], do_s)
                T.clear(dpT)
                T.gemm(v_s, do_s, dpT, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(qkT, p_s)
                T.gemm(p_s, do_s, dv, policy=T.GemmWarpPolicy.FullRow)
                T.copy(Delta[b, h, t * block_M:(t + 1) * block_M], delta_s)
                for j, i in T.Parallel(block_N, block_M):
                    qkT[j, i] = qkT[j, i] * (dpT[j, i] - delta_s[i]) * scale
                T.copy(qkT, ds_s)
                T.gemm(ds_s, q_s, dk, policy=T.GemmWarpPolicy.FullRow)
                T.clear(dq)
                T.gemm(ds_s, k_s, dq, transpose_A=True)
                T.atomic_add(dQ[b, t * block_M:(t + 1) * block_M, h, :], dq)
            T.copy(dv, dV[b, bx * block_N:(bx + 1) * block_N, h, :])
            T.copy(dk, dK[b, bx * block_N:(bx + 1) * block_N, h, :])

    return bwd


# ---- speculative decode over a paged cache: 3 draft tokens x a GQA group of 8 in the rows ---
@tilelang.jit(out_idx=[5])
def spec_decode_paged_gqa8(batch=3, q_len=3, heads=16, kv_heads=2, dim=128, page=64,
                           num_pages=40, max_pages=8, block_N=64, block_M=32, threads=128):
    """Verification of q_len draft tokens against a paged cache that already holds them:
    a KV head's 8 query heads times the q_len tokens fill rows r = token * 8 + head of one
    tile (24 of 32 rows used); token t of a sequence of `len` cached tokens sees positions
    < len - q_len + 1 + t (the prefix, the drafts up to itself).  One KV tile is one 64-token
    page, found through block_table; Q / O are [batch, q_len, heads, dim]."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    dtype, accum = T.bfloat16, T.float32
    group = heads // kv_heads
    rows = q_len * group

    @T.prim_func
    def verify(Q: T.Tensor((batch, q_len, heads, dim), dtype),
               K_pages: T.Tensor((num_pages, page, kv_heads, dim), dtype),
               V_pages: T.Tensor((num_pages, page, kv_heads, dim), dtype),
               block_table: T.Tensor((batch, max_pages), T.int32),
               seq_lens: T.Tensor((batch,), T.int32),
               O: T.Tensor((batch, q_len, heads, dim), dtype)):
        with T.Kernel(kv_heads, batch, threads=threads) as (hk, b):
            q_s = T.alloc_shared((block_M, dim), dtype)
            k_s = T.alloc_shared((block_N, dim), dtype)
            v_s = T.alloc_shared((block_N, dim), dtype)
            acc_s = T.alloc_fragment((block_M, block_N), accum)
            acc_s_cast = T.alloc_fragment((block_M, block_N), dtype)
            acc_o = T.alloc_fragment((block_M, dim), accum)
            m = T.alloc_fragment((block_M,), accum)
            m_prev = T.alloc_fragment((block_M,), accum)
            r_scale = T.alloc_fragment((block_M,), accum)
            r_sum = T.alloc_fragment((block_M,), accum)
            l = T.alloc_fragment((block_M,), accum)
            page_id = T.alloc_var(T.int32)

            kv_len = seq_lens[b]
            for r, d in T.Parallel(block_M, dim):
                q_s[r, d] = T.if_then_else(r < rows, Q[b, r // group, hk * group + r % group, d], 0)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            for p in T.Pipelined(T.ceildiv(kv_len, block_N), num_stages=2):
                page_id = block_table[b, p]
                T.copy(K_pages[page_id, :, hk, :], k_s)
                T.copy(V_pages[page_id, :, hk, :], v_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, clear_accum=True)
                for r, j in T.Parallel(block_M, block_N):
                    acc_s[r, j] = T.if_then_else(
                        p * block_N + j < kv_len - q_len + 1 + r // group,
                        acc_s[r, j] * scale, -T.infinity(accum))
                _softmax_step(acc_s, m, m_prev, r_scale, r_sum, l, acc_o, block_M, block_N, dim)
                T.copy(acc_s, acc_s_cast)
                T.gemm(acc_s_cast, v_s, acc_o)
            for r, d in T.Parallel(block_M, dim):
                if r < rows:
                    O[b, r // group, hk * group + r % group, d] = acc_o[r, d] / l[r]

    return verify


# ---- T5-style relative position bias, clamped distance buckets from a table -----------------
@tilelang.jit(out_idx=[4])
def rel_bias_table_attn(batch=2, heads=4, seq_len=200, dim=64, max_dist=32, block_M=64,
                        block_N=64, threads=128):
    """Bidirectional encoder attention with a learned relative-position bias:
    s_ij = q_i k_j / sqrt(d) + bias[h, clamp(j - i, -max_dist, max_dist) + max_dist], the
    per-head table ([H, 2 max_dist + 1], float32) staged in shared memory once per block.
    Keys past the end masked, BHSD bfloat16."""
    sm_scale = (1.0 / dim) ** 0.5
    dtype, accum = T.bfloat16, T.float32
    n_bias = 2 * max_dist + 1

    @T.prim_func
    def t5(Q: T.Tensor((batch, heads, seq_len, dim), dtype), K: T.Tensor((batch, heads, seq_len, dim), dtype),
           V: T.Tensor((batch, heads, seq_len, dim), dtype), bias: T.Tensor((heads, n_bias), accum),
           O: T.Tensor((batch, heads, seq_len, dim), dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, h, b):
            q_s = T.alloc_shared((block_M, dim), dtype)
            k_s = T.alloc_shared((block_N, dim), dtype)
            v_s = T.alloc_shared((block_N, dim), dtype)
            bias_s = T.alloc_shared((n_bias,), accum)
            acc_s = T.alloc_fragment((block_M, block_N), accum)
            acc_s_cast = T.alloc_fragment((block_M, block_N), dtype)
            acc_o = T.alloc_fragment((block_M, dim), accum)
            m = T.alloc_fragment((block_M,), accum)
            m_prev = T.alloc_fragment((block_M,), accum)
            r_scale = T.alloc_fragment((block_M,), accum)
            r_sum = T.alloc_fragment((block_M,), accum)
            l = T.alloc_fragment((block_M,), accum)

            T.copy(bias[h, :], bias_s)
            T.copy(Q[b, h, bx * block_M:(bx + 1) * block_M, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(T.ceildiv(seq_len, block_N), num_stages=2):
                T.copy(K[b, h, k * block_N:(k + 1) * block_N, :], k_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(block_M, block_N):
                    rel = T.clamp(k * block_N + j - (bx * block_M + i), -max_dist, max_dist)
                    acc_s[i, j] = T.if_then_else(
                        k * block_N + j < seq_len,
                        (acc_s[i, j] * sm_scale + bias_s[rel + max_dist]) * LOG2E,
                        -T.infinity(accum))
                _softmax_step(acc_s, m, m_prev, r_scale, r_sum, l, acc_o, block_M, block_N, dim)
                T.copy(acc_s, acc_s_cast)
                T.copy(V[b, h, k * block_N:(k + 1) * block_N, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o)
            for i, d in T.Parallel(block_M, dim):
                acc_o[i, d] /= l[i]
            T.copy(acc_o, O[b, h, bx * block_M:(bx + 1) * block_M, :])

    return t5


# ---- NSA: attention over each token's selected key blocks, the query group in the rows -----
@tilelang.jit(out_idx=[4])
def nsa_selected_blocks_fwd(batch=2, seq_len=256, heads=32, kv_heads=2, dim=64, block_size=32,
                            n_selected=4, threads=128):
    """Native sparse attention's selection branch: one block a (token, KV head); the group's
    16 query heads are the rows; the key blocks are block_indices[b, t, hk, :] (-1 = none,
    blocks past the token's own skipped), each 32 keys, causal inside the token's own block.
    BSHD float16, O float16."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    dtype, accum = T.float16, T.float32
    G = heads // kv_heads

    @T.prim_func
    def nsa(Q: T.Tensor((batch, seq_len, heads, dim), dtype), K: T.Tensor((batch, seq_len, kv_heads, dim), dtype),
            V: T.Tensor((batch, seq_len, kv_heads, dim), dtype),
            block_indices: T.Tensor((batch, seq_len, kv_heads, n_selected), T.int32),
            O: T.Tensor((batch, seq_len, heads, dim), dtype)):
        with T.Kernel(seq_len, kv_heads, batch, threads=threads) as (t, hk, b):
            q_s = T.alloc_shared((G, dim), dtype)
            k_s = T.alloc_shared((block_size, dim), dtype)
            v_s = T.alloc_shared((block_size, dim), dtype)
            o_s = T.alloc_shared((G, dim), dtype)
            acc_s = T.alloc_fragment((G, block_size), accum)
            acc_s_cast = T.alloc_fragment((G, block_size), dtype)
            acc_o = T.alloc_fragment((G, dim), accum)
            m = T.alloc_fragment((G,), accum)
            m_prev = T.alloc_fragment((G,), accum)
            r_scale = T.alloc_fragment((G,), accum)
            r_sum = T.alloc_fragment((G,), accum)
            l = T.alloc_fragment((G,), accum)
            blk = T.alloc_local((n_selected,), T.int32)

            T.copy(Q[b, t, hk * G:(hk + 1) * G, :], q_s)
            for s in T.serial(n_selected):
                blk[s] = block_indices[b, t, hk, s]
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            for s in T.Pipelined(n_selected, num_stages=2):
                i_s = blk[s]
                if i_s >= 0 and i_s * block_size <= t:
                    T.copy(K[b, i_s * block_size:(i_s + 1) * block_size, hk, :], k_s)
                    T.gemm(q_s, k_s, acc_s, transpose_B=True, clear_accum=True)
                    for g, j in T.Parallel(G, block_size):
                        acc_s[g, j] = T.if_then_else(i_s * block_size + j <= t, acc_s[g, j] * scale,
                                                     -T.infinity(accum))
                    _softmax_step(acc_s, m, m_prev, r_scale, r_sum, l, acc_o, G, block_size, dim)
                    T.copy(acc_s, acc_s_cast)
                    T.copy(V[b, i_s * block_size:(i_s + 1) * block_size, hk, :], v_s)
                    T.gemm(acc_s_cast, v_s, acc_o)
            for g, d in T.Parallel(G, dim):
                o_s[g, d] = acc_o[g, d] / l[g]
            T.copy(o_s, O[b, t, hk * G:(hk + 1) * G, :])

    return nsa


# ---- gpt-oss attention: learned sinks, sliding window, GQA ----------------------------------
@tilelang.jit(out_idx=[4])
def sinks_sliding_window_gqa(batch=1, heads=8, kv_heads=2, seq_len=300, dim=64, window=128,
                             block_M=64, block_N=64, threads=128):
    """gpt-oss's attention layer: causal with a sliding window of 128 keys, a learned sink
    logit per head (natural units) in every row's denominator (never in the numerator),
    GQA 4:1, BHSD bfloat16; the loop runs from the window's first tile to the diagonal."""
    sm_scale = (1.0 / dim) ** 0.5
    dtype, accum = T.bfloat16, T.float32
    group = heads // kv_heads

    @T.prim_func
    def sinks(Q: T.Tensor((batch, heads, seq_len, dim), dtype), K: T.Tensor((batch, kv_heads, seq_len, dim), dtype),
              V: T.Tensor((batch, kv_heads, seq_len, dim), dtype), Sinks: T.Tensor((heads,), accum),
              O: T.Tensor((batch, heads, seq_len, dim), dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, h, b):
            q_s = T.alloc_shared((block_M, dim), dtype)
            k_s = T.alloc_shared((block_N, dim), dtype)
            v_s = T.alloc_shared((block_N, dim), dtype)
            acc_s = T.alloc_fragment((block_M, block_N), accum)
            acc_s_cast = T.alloc_fragment((block_M, block_N), dtype)
            acc_o = T.alloc_fragment((block_M, dim), accum)
            m = T.alloc_fragment((block_M,), accum)
            m_prev = T.alloc_fragment((block_M,), accum)
            r_scale = T.alloc_fragment((block_M,), accum)
            r_sum = T.alloc_fragment((block_M,), accum)
            l = T.alloc_fragment((block_M,), accum)
            sink = T.alloc_local((1,), accum)

            sink[0] = Sinks[h] * LOG2E
            T.copy(Q[b, h, bx * block_M:(bx + 1) * block_M, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            start = T.max(0, (bx * block_M - window + 1) // block_N)
            end = T.min(T.ceildiv(seq_len, block_N), T.ceildiv((bx + 1) * block_M, block_N))
            for k in T.Pipelined(start, end, num_stages=2):
                T.copy(K[b, h // group, k * block_N:(k + 1) * block_N, :], k_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(block_M, block_N):
                    q_pos = bx * block_M + i
                    k_pos = k * block_N + j
                    acc_s[i, j] = T.if_then_else((q_pos >= k_pos) & (q_pos - k_pos < window),
                                                 acc_s[i, j] * sm_scale * LOG2E, -T.infinity(accum))
                _softmax_step(acc_s, m, m_prev, r_scale, r_sum, l, acc_o, block_M, block_N, dim)
                T.copy(acc_s, acc_s_cast)
                T.copy(V[b, h // group, k * block_N:(k + 1) * block_N, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o)
            for i in T.Parallel(block_M):
                l[i] += T.exp2(sink[0] - m[i])
            for i, d in T.Parallel(block_M, dim):
                acc_o[i, d] /= l[i]
            T.copy(acc_o, O[b, h, bx * block_M:(bx + 1) * block_M, :])

    return sinks
