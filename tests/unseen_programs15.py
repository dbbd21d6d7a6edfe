"""A fifteenth set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang), all from the attention / sequence-model family and all written as a TileLang
user writes them: ``@tilecute.jit(out_idx=...)`` factories returning a ``@T.prim_func``.
They aim at the variations the earlier rounds leave out: variable-length attention whose
query and key lengths differ (bottom-right causal alignment, read from ``cu_seqlens``),
left / right sliding windows (rows whose first tiles are wholly masked), ALiBi slopes read
from a tensor, logit soft-capping before the tail mask, an additive bias tensor, a
relative-position bias that *initialises* the score accumulator the GEMM then adds to, a
key-padding mask read from a bool tensor, GQA at head dim 96 with a value dim of 64, head
dim 192 with a value dim of 128, head dim 32 over two warpgroups, RoPE fused into the Q / K
loads, StreamingLLM sink tokens plus a window (two loops through one macro), causal
attention with fewer queries than keys, per-head descale factors, speculative-decoding
GQA decode, paged-KV decode whose tiles span two pages of a block table, split-KV decode
with its LSE combine, MLA-like decode (q_pe / k_pe as a second GEMM into the scores), a
FlashAttention backward with a tail (Delta preprocess, dQ by tile atomics, postprocess),
chunked linear attention and retention with state passing, Mamba-2's chunk cumsum and
chunk states, attention over a packed QKV tensor at 3 stages, and a two-pass attention
that writes the normalised probabilities.  Outputs are float16 / bfloat16 / float32,
several with an LSE (log2 or natural, as each docstring says).

``tests/test_unseen_programs15.py`` builds each to a cubin on the CPU and, on a GPU,
compares it with a float32 torch reference written to TileLang's meaning, at lengths that
are not tile multiples.

Each factory is a ``@tilecute.jit`` function: calling it with its parameters gives the
compiled kernel (``out_idx`` outputs returned by the call)."""

import tilecute
import tilecute.language as T

LOG2E = 1.44269504
LN2 = 0.69314718


# ---- forward: variable length, windows, biases ---------------------------------------------
@tilecute.jit(out_idx=[5, 6])
def fa_varlen_bottom_right(batch=3, heads=2, total_q=188, total_k=501, max_q=127, dim=64,
                           block_M=64, block_N=64, threads=128, dynamic_totals=False):
    """Packed variable-length attention: sequence b's queries are Q[cu_q[b]:cu_q[b + 1]],
    its keys K[cu_k[b]:cu_k[b + 1]] (more keys than queries), causal aligned to the bottom
    right (query i sees keys j <= i + len_k - len_q).  O float16 [total_q, H, D]; LSE
    float32 [H, total_q] in log2 units (log2 of the row's sum of 2^(s * scale)).  With
    ``dynamic_totals`` the token totals are ``T.dynamic`` (the outputs' shapes taken from
    the inputs at each call)."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    dtype, accum = "float16", "float"
    if dynamic_totals:
        total_q, total_k = T.dynamic("total_q"), T.dynamic("total_k")

    @T.prim_func
    def varlen(Q: T.Tensor([total_q, heads, dim], dtype), K: T.Tensor([total_k, heads, dim], dtype),
               V: T.Tensor([total_k, heads, dim], dtype), cu_q: T.Tensor([batch + 1], "int32"),
               cu_k: T.Tensor([batch + 1], "int32"), O: T.Tensor([total_q, heads, dim], dtype),
               LSE: T.Tensor([heads, total_q], accum)):
        with T.Kernel(T.ceildiv(max_q, block_M), heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            m = T.alloc_fragment([block_M], accum)
            m_prev = T.alloc_fragment([block_M], accum)
            r_scale = T.alloc_fragment([block_M], accum)
            r_sum = T.alloc_fragment([block_M], accum)
            l = T.alloc_fragment([block_M], accum)

            q_start = cu_q[bz]
            q_len = cu_q[bz + 1] - q_start
            k_start = cu_k[bz]
            k_len = cu_k[bz + 1] - k_start
            off = k_len - q_len

            T.copy(Q[q_start + bx * block_M:q_start + (bx + 1) * block_M, by, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            n_blocks = T.min(T.ceildiv(k_len, block_N), T.ceildiv((bx + 1) * block_M + off, block_N))
            for k in T.Pipelined(n_blocks, num_stages=2):
                T.copy(K[k_start + k * block_N:k_start + (k + 1) * block_N, by, :], k_s)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(
                        (bx * block_M + i + off >= k * block_N + j) and (k * block_N + j < k_len),
                        0, -T.infinity(accum))
                T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    r_scale[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                T.reduce_sum(acc_s, r_sum, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * r_scale[i] + r_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= r_scale[i]
                T.copy(V[k_start + k * block_N:k_start + (k + 1) * block_N, by, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                if bx * block_M + i < q_len:
                    O[q_start + bx * block_M + i, by, j] = acc_o[i, j] / l[i]
            for i in T.Parallel(block_M):
                if bx * block_M + i < q_len:
                    LSE[by, q_start + bx * block_M + i] = T.log2(l[i]) + m[i] * scale
    return varlen


@tilecute.jit(out_idx=[3])
def fa_window_left_right(batch=1, heads=2, seq_len=1000, dim=64, window_left=100, window_right=37,
                         block_M=64, block_N=64, threads=128):
    """Non-causal banded attention (BSHD, bfloat16): query i sees keys i - window_left ..
    i + window_right.  The loop runs over the key tiles the band touches,
    ``T.Pipelined(lo, hi)``; a row whose first tile is wholly masked keeps a max of -inf,
    which the program guards (the running max taken as 0 while it is -inf)."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    dtype, accum = "bfloat16", "float"
    shape = [batch, seq_len, heads, dim]

    @T.prim_func
    def band(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
             O: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            o_s = T.alloc_shared([block_M, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            m = T.alloc_fragment([block_M], accum)
            m_prev = T.alloc_fragment([block_M], accum)
            m_safe = T.alloc_fragment([block_M], accum)
            r_scale = T.alloc_fragment([block_M], accum)
            r_sum = T.alloc_fragment([block_M], accum)
            l = T.alloc_fragment([block_M], accum)

            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            lo = T.max(0, (bx * block_M - window_left) // block_N)
            hi = T.min(T.ceildiv(seq_len, block_N), T.ceildiv((bx + 1) * block_M + window_right, block_N))
            for k in T.Pipelined(lo, hi, num_stages=2):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], k_s)
                T.clear(acc_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_M, block_N):
                    q_idx = bx * block_M + i
                    k_idx = k * block_N + j
                    acc_s[i, j] = T.if_then_else(
                        (k_idx >= q_idx - window_left) and (k_idx <= q_idx + window_right) and (k_idx < seq_len),
                        acc_s[i, j], -T.infinity(accum))
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    m_safe[i] = T.if_then_else(m[i] == -T.infinity(accum), 0, m[i])
                for i in T.Parallel(block_M):
                    r_scale[i] = T.exp2(m_prev[i] * scale - m_safe[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m_safe[i] * scale)
                T.reduce_sum(acc_s, r_sum, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * r_scale[i] + r_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= r_scale[i]
                T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= l[i]
            T.copy(acc_o, o_s)
            T.copy(o_s, O[bz, bx * block_M:(bx + 1) * block_M, by, :])
    return band


@tilecute.jit(out_idx=[4, 5])
def fa_alibi_slopes_tensor(batch=1, heads=4, seq_len=1000, dim=64, block_M=64, block_N=64, threads=128):
    """Causal ALiBi attention: score = q.k / sqrt(D) + slope[h] * (j - i), the slopes read
    from a float32 tensor, the bias added before the row max (in log2 units).  O float16
    (BSHD); LSE float32 [B, H, S] in natural-log units."""
    sm_scale = (1.0 / dim) ** 0.5
    dtype, accum = "float16", "float"
    shape = [batch, seq_len, heads, dim]

    @T.prim_func
    def alibi(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
              Slopes: T.Tensor([heads], accum), O: T.Tensor(shape, dtype),
              LSE: T.Tensor([batch, heads, seq_len], accum)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            m = T.alloc_fragment([block_M], accum)
            m_prev = T.alloc_fragment([block_M], accum)
            r_scale = T.alloc_fragment([block_M], accum)
            r_sum = T.alloc_fragment([block_M], accum)
            l = T.alloc_fragment([block_M], accum)
            lse = T.alloc_fragment([block_M], accum)

            slope = Slopes[by]
            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(T.min(T.ceildiv(seq_len, block_N), T.ceildiv((bx + 1) * block_M, block_N)),
                                 num_stages=2):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], k_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, clear_accum=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(
                        bx * block_M + i >= k * block_N + j,
                        (acc_s[i, j] * sm_scale + slope * (k * block_N + j - bx * block_M - i)) * LOG2E,
                        -T.infinity(accum))
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    r_scale[i] = T.exp2(m_prev[i] - m[i])
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] - m[i])
                T.reduce_sum(acc_s, r_sum, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * r_scale[i] + r_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= r_scale[i]
                T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= l[i]
            for i in T.Parallel(block_M):
                lse[i] = (m[i] + T.log2(l[i])) * LN2
            T.copy(acc_o, O[bz, bx * block_M:(bx + 1) * block_M, by, :])
            T.copy(lse, LSE[bz, by, bx * block_M:(bx + 1) * block_M])
    return alibi


@tilecute.jit(out_idx=[3, 4])
def fa_softcap_then_tail_mask(batch=1, heads=2, seq_len=1000, dim=64, softcap=20.0, block_M=64,
                              block_N=64, threads=128):
    """Non-causal attention with logit soft-capping: s = softcap * tanh(q.k / sqrt(D) /
    softcap), applied before the tail mask (keys past the end set to -inf).  O float32
    (BHSD); LSE float32 [B, H, S] in log2 units."""
    sm_scale = (1.0 / dim) ** 0.5
    dtype, accum = "float16", "float"
    shape = [batch, heads, seq_len, dim]

    @T.prim_func
    def capped(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
               O: T.Tensor(shape, accum), LSE: T.Tensor([batch, heads, seq_len], accum)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            m = T.alloc_fragment([block_M], accum)
            m_prev = T.alloc_fragment([block_M], accum)
            r_scale = T.alloc_fragment([block_M], accum)
            r_sum = T.alloc_fragment([block_M], accum)
            l = T.alloc_fragment([block_M], accum)

            T.copy(Q[bz, by, bx * block_M:(bx + 1) * block_M, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(T.ceildiv(seq_len, block_N), num_stages=2):
                T.copy(K[bz, by, k * block_N:(k + 1) * block_N, :], k_s)
                T.clear(acc_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = softcap * T.tanh(acc_s[i, j] * (sm_scale / softcap)) * LOG2E
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(k * block_N + j < seq_len, acc_s[i, j], -T.infinity(accum))
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    r_scale[i] = T.exp2(m_prev[i] - m[i])
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] - m[i])
                T.reduce_sum(acc_s, r_sum, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * r_scale[i] + r_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= r_scale[i]
                T.copy(V[bz, by, k * block_N:(k + 1) * block_N, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= l[i]
            T.copy(acc_o, O[bz, by, bx * block_M:(bx + 1) * block_M, :])
            for i in T.Parallel(block_M):
                if bx * block_M + i < seq_len:
                    LSE[bz, by, bx * block_M + i] = m[i] + T.log2(l[i])
    return capped


@tilecute.jit(out_idx=[4])
def fa_additive_bias_tensor(batch=2, heads=2, seq_q=200, seq_k=300, dim=64, block_M=64, block_N=64, threads=128):
    """Cross attention (BHSD, seq_q != seq_k, both ragged) plus an additive float16 bias
    tensor [B, H, Sq, Sk] loaded tile by tile into a fragment and added after the scale,
    before the max.  O bfloat16."""
    sm_scale = (1.0 / dim) ** 0.5
    dtype, accum = "bfloat16", "float"

    @T.prim_func
    def biased(Q: T.Tensor([batch, heads, seq_q, dim], dtype), K: T.Tensor([batch, heads, seq_k, dim], dtype),
               V: T.Tensor([batch, heads, seq_k, dim], dtype), Bias: T.Tensor([batch, heads, seq_q, seq_k], "float16"),
               O: T.Tensor([batch, heads, seq_q, dim], dtype)):
        with T.Kernel(T.ceildiv(seq_q, block_M), heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            bias_f = T.alloc_fragment([block_M, block_N], "float16")
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            m = T.alloc_fragment([block_M], accum)
            m_prev = T.alloc_fragment([block_M], accum)
            r_scale = T.alloc_fragment([block_M], accum)
            r_sum = T.alloc_fragment([block_M], accum)
            l = T.alloc_fragment([block_M], accum)

            T.copy(Q[bz, by, bx * block_M:(bx + 1) * block_M, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(T.ceildiv(seq_k, block_N), num_stages=2):
                T.copy(K[bz, by, k * block_N:(k + 1) * block_N, :], k_s)
                T.copy(Bias[bz, by, bx * block_M:(bx + 1) * block_M, k * block_N:(k + 1) * block_N], bias_f)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, clear_accum=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(k * block_N + j < seq_k,
                                                 (acc_s[i, j] * sm_scale + bias_f[i, j]) * LOG2E,
                                                 -T.infinity(accum))
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    r_scale[i] = T.exp2(m_prev[i] - m[i])
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] - m[i])
                T.reduce_sum(acc_s, r_sum, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * r_scale[i] + r_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= r_scale[i]
                T.copy(V[bz, by, k * block_N:(k + 1) * block_N, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= l[i]
            T.copy(acc_o, O[bz, by, bx * block_M:(bx + 1) * block_M, :])
    return biased


@tilecute.jit(out_idx=[4])
def fa_relpos_bias_initialises_scores(heads=2, seq_len=200, dim=64, block_M=64, block_N=64, threads=128):
    """The scores start at a relative-position bias RelB[h, j - i + S - 1] (float32, in raw
    q.k units; keys past the end start at -inf) and the GEMM adds q.k to them (no clear):
    softmax((q.k + bias) / sqrt(D)).  Single batch, SHD layout, O float16."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    dtype, accum = "float16", "float"
    shape = [seq_len, heads, dim]

    @T.prim_func
    def relpos(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
               RelB: T.Tensor([heads, 2 * seq_len - 1], accum), O: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, threads=threads) as (bx, by):
            q_s = T.alloc_shared([block_M, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            m = T.alloc_fragment([block_M], accum)
            m_prev = T.alloc_fragment([block_M], accum)
            r_scale = T.alloc_fragment([block_M], accum)
            r_sum = T.alloc_fragment([block_M], accum)
            l = T.alloc_fragment([block_M], accum)

            T.copy(Q[bx * block_M:(bx + 1) * block_M, by, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(T.ceildiv(seq_len, block_N), num_stages=2):
                T.copy(K[k * block_N:(k + 1) * block_N, by, :], k_s)
                for i, j in T.Parallel(block_M, block_N):
                    rel = T.max(0, T.min(2 * seq_len - 2, k * block_N + j - bx * block_M - i + seq_len - 1))
                    acc_s[i, j] = T.if_then_else(k * block_N + j < seq_len, RelB[by, rel], -T.infinity(accum))
                T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    r_scale[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                T.reduce_sum(acc_s, r_sum, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * r_scale[i] + r_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= r_scale[i]
                T.copy(V[k * block_N:(k + 1) * block_N, by, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= l[i]
            T.copy(acc_o, O[bx * block_M:(bx + 1) * block_M, by, :])
    return relpos


@tilecute.jit(out_idx=[4])
def fa_key_padding_mask(batch=2, heads=2, seq_len=1000, dim=64, block_M=64, block_N=64, threads=128):
    """Non-causal attention whose keys are masked by a bool tensor KeyMask[B, S] (True:
    attend): the scores start at 0 / -inf from the mask, read from the tensor, before the
    GEMM adds to them.  A row whose tile is wholly masked keeps a max of -inf (guarded).
    O float16 (BSHD)."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    dtype, accum = "float16", "float"
    shape = [batch, seq_len, heads, dim]

    @T.prim_func
    def padded(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
               KeyMask: T.Tensor([batch, seq_len], "bool"), O: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            m = T.alloc_fragment([block_M], accum)
            m_prev = T.alloc_fragment([block_M], accum)
            m_safe = T.alloc_fragment([block_M], accum)
            r_scale = T.alloc_fragment([block_M], accum)
            r_sum = T.alloc_fragment([block_M], accum)
            l = T.alloc_fragment([block_M], accum)

            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(T.ceildiv(seq_len, block_N), num_stages=2):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], k_s)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(
                        (k * block_N + j < seq_len) and KeyMask[bz, k * block_N + j], 0, -T.infinity(accum))
                T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    m_safe[i] = T.if_then_else(m[i] == -T.infinity(accum), 0, m[i])
                    r_scale[i] = T.exp2(m_prev[i] * scale - m_safe[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m_safe[i] * scale)
                T.reduce_sum(acc_s, r_sum, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * r_scale[i] + r_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= r_scale[i]
                T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= l[i]
            T.copy(acc_o, O[bz, bx * block_M:(bx + 1) * block_M, by, :])
    return padded


# ---- forward: head dims, groups, tiles --------------------------------------------------------
@tilecute.jit(out_idx=[3, 4])
def fa_gqa_d96_dv64(batch=1, heads=8, kv_heads=2, seq_len=300, dim=96, dim_v=64, block_M=64, block_N=64, threads=128):
    """Causal GQA (BSHD): 4 query heads share a key / value head; the q.k dim is 96, the
    value dim 64.  O bfloat16 [B, S, HQ, 64]; LSE float32 [B, HQ, S] in log2 units."""
    groups = heads // kv_heads
    scale = (1.0 / dim) ** 0.5 * LOG2E
    dtype, accum = "bfloat16", "float"

    @T.prim_func
    def gqa(Q: T.Tensor([batch, seq_len, heads, dim], dtype), K: T.Tensor([batch, seq_len, kv_heads, dim], dtype),
            V: T.Tensor([batch, seq_len, kv_heads, dim_v], dtype), O: T.Tensor([batch, seq_len, heads, dim_v], dtype),
            LSE: T.Tensor([batch, heads, seq_len], accum)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim_v], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim_v], accum)
            m = T.alloc_fragment([block_M], accum)
            m_prev = T.alloc_fragment([block_M], accum)
            r_scale = T.alloc_fragment([block_M], accum)
            r_sum = T.alloc_fragment([block_M], accum)
            l = T.alloc_fragment([block_M], accum)
            lse = T.alloc_fragment([block_M], accum)

            kvh = by // groups
            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            loop_range = T.min(T.ceildiv(seq_len, block_N), T.ceildiv((bx + 1) * block_M, block_N))
            for k in T.Pipelined(loop_range, num_stages=2):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, kvh, :], k_s)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(bx * block_M + i >= k * block_N + j, 0, -T.infinity(accum))
                T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    r_scale[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                T.reduce_sum(acc_s, r_sum, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * r_scale[i] + r_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim_v):
                    acc_o[i, j] *= r_scale[i]
                T.copy(V[bz, k * block_N:(k + 1) * block_N, kvh, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim_v):
                acc_o[i, j] /= l[i]
            for i in T.Parallel(block_M):
                lse[i] = T.log2(l[i]) + m[i] * scale
            T.copy(acc_o, O[bz, bx * block_M:(bx + 1) * block_M, by, :])
            T.copy(lse, LSE[bz, by, bx * block_M:(bx + 1) * block_M])
    return gqa


@tilecute.jit(out_idx=[3, 4])
def fa_d192_dv128(batch=1, heads=2, seq_len=300, dim=192, dim_v=128, block_M=64, block_N=64, threads=128):
    """Non-causal attention at q.k dim 192, value dim 128 (BHSD), tail keys masked.
    O float16; LSE float32 [B, H, S] in natural-log units (T.log of the sum plus the max)."""
    sm_scale = (1.0 / dim) ** 0.5
    scale = sm_scale * LOG2E
    dtype, accum = "float16", "float"

    @T.prim_func
    def wide(Q: T.Tensor([batch, heads, seq_len, dim], dtype), K: T.Tensor([batch, heads, seq_len, dim], dtype),
             V: T.Tensor([batch, heads, seq_len, dim_v], dtype), O: T.Tensor([batch, heads, seq_len, dim_v], dtype),
             LSE: T.Tensor([batch, heads, seq_len], accum)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim_v], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim_v], accum)
            m = T.alloc_fragment([block_M], accum)
            m_prev = T.alloc_fragment([block_M], accum)
            r_scale = T.alloc_fragment([block_M], accum)
            r_sum = T.alloc_fragment([block_M], accum)
            l = T.alloc_fragment([block_M], accum)
            lse = T.alloc_fragment([block_M], accum)

            T.copy(Q[bz, by, bx * block_M:(bx + 1) * block_M, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(T.ceildiv(seq_len, block_N), num_stages=2):
                T.copy(K[bz, by, k * block_N:(k + 1) * block_N, :], k_s)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(k * block_N + j < seq_len, 0, -T.infinity(accum))
                T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    r_scale[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                T.reduce_sum(acc_s, r_sum, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * r_scale[i] + r_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim_v):
                    acc_o[i, j] *= r_scale[i]
                T.copy(V[bz, by, k * block_N:(k + 1) * block_N, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim_v):
                acc_o[i, j] /= l[i]
            for i in T.Parallel(block_M):
                lse[i] = T.log(l[i]) + m[i] * sm_scale
            T.copy(acc_o, O[bz, by, bx * block_M:(bx + 1) * block_M, :])
            T.copy(lse, LSE[bz, by, bx * block_M:(bx + 1) * block_M])
    return wide


@tilecute.jit(out_idx=[3])
def fa_d32_two_warpgroups(batch=2, heads=2, seq_len=1000, dim=32, block_M=128, block_N=64):
    """Causal attention at head dim 32 in 128-row tiles over 256 threads (two warpgroups,
    FullRow: 64 rows each), bfloat16, 3 stages."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    dtype, accum = "bfloat16", "float"
    shape = [batch, seq_len, heads, dim]

    @T.prim_func
    def narrow(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
               O: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=256) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            m = T.alloc_fragment([block_M], accum)
            m_prev = T.alloc_fragment([block_M], accum)
            r_scale = T.alloc_fragment([block_M], accum)
            r_sum = T.alloc_fragment([block_M], accum)
            l = T.alloc_fragment([block_M], accum)

            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(T.min(T.ceildiv(seq_len, block_N), T.ceildiv((bx + 1) * block_M, block_N)),
                                 num_stages=3):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], k_s)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(bx * block_M + i >= k * block_N + j, 0, -T.infinity(accum))
                T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    r_scale[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                T.reduce_sum(acc_s, r_sum, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * r_scale[i] + r_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= r_scale[i]
                T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= l[i]
            T.copy(acc_o, O[bz, bx * block_M:(bx + 1) * block_M, by, :])
    return narrow


@tilecute.jit(out_idx=[5])
def fa_rope_fused_loads(batch=1, heads=2, seq_len=200, dim=64, block_M=64, block_N=64, threads=128):
    """Causal attention with rotary embedding (rotate-half form) applied as Q and each K
    tile are loaded: raw tile -> shared, rotated through a T.Parallel into the GEMM's
    shared operand, positions clamped to the table for rows past the end.  Cos / Sin
    float32 [S, D / 2].  O float16 (BSHD)."""
    half = dim // 2
    scale = (1.0 / dim) ** 0.5 * LOG2E
    dtype, accum = "float16", "float"
    shape = [batch, seq_len, heads, dim]

    @T.prim_func
    def rope_attn(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
                  Cos: T.Tensor([seq_len, half], accum), Sin: T.Tensor([seq_len, half], accum),
                  O: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            q_raw = T.alloc_shared([block_M, dim], dtype)
            q_s = T.alloc_shared([block_M, dim], dtype)
            k_raw = T.alloc_shared([block_N, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            m = T.alloc_fragment([block_M], accum)
            m_prev = T.alloc_fragment([block_M], accum)
            r_scale = T.alloc_fragment([block_M], accum)
            r_sum = T.alloc_fragment([block_M], accum)
            l = T.alloc_fragment([block_M], accum)

            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], q_raw)
            for i, j in T.Parallel(block_M, dim):
                p = T.min(bx * block_M + i, seq_len - 1)
                jj = j % half
                c = Cos[p, jj]
                s = Sin[p, jj]
                q_s[i, j] = T.if_then_else(
                    j < half, q_raw[i, j] * c - q_raw[i, j + half] * s, q_raw[i, j] * c + q_raw[i, j - half] * s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(T.min(T.ceildiv(seq_len, block_N), T.ceildiv((bx + 1) * block_M, block_N)),
                                 num_stages=2):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], k_raw)
                for i, j in T.Parallel(block_N, dim):
                    p = T.min(k * block_N + i, seq_len - 1)
                    jj = j % half
                    k_s[i, j] = T.if_then_else(
                        j < half, k_raw[i, j] * Cos[p, jj] - k_raw[i, j + half] * Sin[p, jj],
                        k_raw[i, j] * Cos[p, jj] + k_raw[i, j - half] * Sin[p, jj])
                T.clear(acc_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(bx * block_M + i >= k * block_N + j, acc_s[i, j], -T.infinity(accum))
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    r_scale[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                T.reduce_sum(acc_s, r_sum, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * r_scale[i] + r_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= r_scale[i]
                T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= l[i]
            T.copy(acc_o, O[bz, bx * block_M:(bx + 1) * block_M, by, :])
    return rope_attn


@tilecute.jit(out_idx=[3])
def fa_sink_tokens_window(batch=1, heads=2, seq_len=1000, dim=64, sinks=4, window=128, block_M=64,
                          block_N=64, threads=128):
    """StreamingLLM attention: causal, query i sees the first ``sinks`` keys and the keys
    within ``window`` of it.  One step (a ``T.macro`` defined in the factory, taking the
    kernel's buffers) serves the sink tile (tile 0, outside any loop) and a
    ``T.Pipelined`` loop over the window's tiles that starts after it.  O float16 (BSHD)."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    dtype, accum = "float16", "float"
    shape = [batch, seq_len, heads, dim]

    @T.macro
    def step(K, V, k, bx, by, bz, q_s, k_s, v_s, acc_s, acc_s_cast, acc_o, m, m_prev, m_safe, r_scale, r_sum, l):
        T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], k_s)
        T.clear(acc_s)
        T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
        for i, j in T.Parallel(block_M, block_N):
            q_idx = bx * block_M + i
            k_idx = k * block_N + j
            acc_s[i, j] = T.if_then_else(
                (k_idx <= q_idx) and ((k_idx < sinks) or (q_idx - k_idx < window)),
                acc_s[i, j], -T.infinity(accum))
        T.copy(m, m_prev)
        T.reduce_max(acc_s, m, dim=1, clear=False)
        for i in T.Parallel(block_M):
            m_safe[i] = T.if_then_else(m[i] == -T.infinity(accum), 0, m[i])
        for i in T.Parallel(block_M):
            r_scale[i] = T.exp2(m_prev[i] * scale - m_safe[i] * scale)
        for i, j in T.Parallel(block_M, block_N):
            acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m_safe[i] * scale)
        T.reduce_sum(acc_s, r_sum, dim=1)
        for i in T.Parallel(block_M):
            l[i] = l[i] * r_scale[i] + r_sum[i]
        T.copy(acc_s, acc_s_cast)
        for i, j in T.Parallel(block_M, dim):
            acc_o[i, j] *= r_scale[i]
        T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], v_s)
        T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)

    @T.prim_func
    def streaming(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
                  O: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            m = T.alloc_fragment([block_M], accum)
            m_prev = T.alloc_fragment([block_M], accum)
            m_safe = T.alloc_fragment([block_M], accum)
            r_scale = T.alloc_fragment([block_M], accum)
            r_sum = T.alloc_fragment([block_M], accum)
            l = T.alloc_fragment([block_M], accum)

            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            step(K, V, 0, bx, by, bz, q_s, k_s, v_s, acc_s, acc_s_cast, acc_o, m, m_prev, m_safe, r_scale, r_sum, l)
            lo = T.max(1, (bx * block_M - window + 1) // block_N)
            hi = T.min(T.ceildiv(seq_len, block_N), T.ceildiv((bx + 1) * block_M, block_N))
            for k in T.Pipelined(lo, hi, num_stages=2):
                step(K, V, k, bx, by, bz, q_s, k_s, v_s, acc_s, acc_s_cast, acc_o, m, m_prev, m_safe, r_scale,
                     r_sum, l)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= l[i]
            T.copy(acc_o, O[bz, bx * block_M:(bx + 1) * block_M, by, :])
    return streaming


@tilecute.jit(out_idx=[3, 4])
def fa_causal_fewer_queries(batch=1, heads=2, seq_q=100, seq_kv=1000, dim=64, block_M=64, block_N=64, threads=128):
    """Causal attention with 100 queries over 1000 keys, aligned to the bottom right (query
    i at position i + seq_kv - seq_q: a chunk of prefill after a cache).  O float16
    [B, Sq, H, D]; LSE float32 [B, H, Sq] in log2 units."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    off = seq_kv - seq_q
    dtype, accum = "float16", "float"

    @T.prim_func
    def chunk(Q: T.Tensor([batch, seq_q, heads, dim], dtype), K: T.Tensor([batch, seq_kv, heads, dim], dtype),
              V: T.Tensor([batch, seq_kv, heads, dim], dtype), O: T.Tensor([batch, seq_q, heads, dim], dtype),
              LSE: T.Tensor([batch, heads, seq_q], accum)):
        with T.Kernel(T.ceildiv(seq_q, block_M), heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            m = T.alloc_fragment([block_M], accum)
            m_prev = T.alloc_fragment([block_M], accum)
            r_scale = T.alloc_fragment([block_M], accum)
            r_sum = T.alloc_fragment([block_M], accum)
            l = T.alloc_fragment([block_M], accum)
            lse = T.alloc_fragment([block_M], accum)

            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            loop_range = T.min(T.ceildiv(seq_kv, block_N), T.ceildiv((bx + 1) * block_M + off, block_N))
            for k in T.Pipelined(loop_range, num_stages=2):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], k_s)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(bx * block_M + i + off >= k * block_N + j, 0, -T.infinity(accum))
                T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    r_scale[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                T.reduce_sum(acc_s, r_sum, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * r_scale[i] + r_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= r_scale[i]
                T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= l[i]
            for i in T.Parallel(block_M):
                lse[i] = T.log2(l[i]) + m[i] * scale
            T.copy(acc_o, O[bz, bx * block_M:(bx + 1) * block_M, by, :])
            T.copy(lse, LSE[bz, by, bx * block_M:(bx + 1) * block_M])
    return chunk


@tilecute.jit(out_idx=[5, 6])
def fa_per_head_descale(batch=1, heads=2, seq_len=333, dim=128, block_M=64, block_N=128, threads=128):
    """Non-causal attention whose scores are scaled by per-head factors q_scale[h] *
    k_scale[h] read from float32 tensors (as after quantised Q / K), block_N = 128.
    O float16 (BHSD); LSE float32 [B, H, S] in natural-log units."""
    sm_scale = (1.0 / dim) ** 0.5
    dtype, accum = "float16", "float"
    shape = [batch, heads, seq_len, dim]

    @T.prim_func
    def descaled(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
                 QScale: T.Tensor([heads], accum), KScale: T.Tensor([heads], accum),
                 O: T.Tensor(shape, dtype), LSE: T.Tensor([batch, heads, seq_len], accum)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            m = T.alloc_fragment([block_M], accum)
            m_prev = T.alloc_fragment([block_M], accum)
            r_scale = T.alloc_fragment([block_M], accum)
            r_sum = T.alloc_fragment([block_M], accum)
            l = T.alloc_fragment([block_M], accum)
            lse = T.alloc_fragment([block_M], accum)

            s = QScale[by] * KScale[by] * sm_scale * LOG2E
            T.copy(Q[bz, by, bx * block_M:(bx + 1) * block_M, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(T.ceildiv(seq_len, block_N), num_stages=2):
                T.copy(K[bz, by, k * block_N:(k + 1) * block_N, :], k_s)
                T.clear(acc_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(k * block_N + j < seq_len, acc_s[i, j] * s, -T.infinity(accum))
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    r_scale[i] = T.exp2(m_prev[i] - m[i])
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] - m[i])
                T.reduce_sum(acc_s, r_sum, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * r_scale[i] + r_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= r_scale[i]
                T.copy(V[bz, by, k * block_N:(k + 1) * block_N, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= l[i]
            for i in T.Parallel(block_M):
                lse[i] = T.log(l[i]) + m[i] * LN2
            T.copy(acc_o, O[bz, by, bx * block_M:(bx + 1) * block_M, :])
            T.copy(lse, LSE[bz, by, bx * block_M:(bx + 1) * block_M])
    return descaled


@tilecute.jit(out_idx=[1])
def fa_packed_qkv_3_stages(batch=1, heads=2, seq_len=1000, dim=64, block_M=64, block_N=64, threads=128):
    """Non-causal attention over a packed QKV tensor [B, S, 3, H, D] (Q, K, V sliced out of
    one 5-D tensor by the copies), 3 stages, tail keys masked.  O float16 [B, S, H, D]."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    dtype, accum = "float16", "float"

    @T.prim_func
    def packed(QKV: T.Tensor([batch, seq_len, 3, heads, dim], dtype), O: T.Tensor([batch, seq_len, heads, dim], dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            m = T.alloc_fragment([block_M], accum)
            m_prev = T.alloc_fragment([block_M], accum)
            r_scale = T.alloc_fragment([block_M], accum)
            r_sum = T.alloc_fragment([block_M], accum)
            l = T.alloc_fragment([block_M], accum)

            T.copy(QKV[bz, bx * block_M:(bx + 1) * block_M, 0, by, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(T.ceildiv(seq_len, block_N), num_stages=3):
                T.copy(QKV[bz, k * block_N:(k + 1) * block_N, 1, by, :], k_s)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(k * block_N + j < seq_len, 0, -T.infinity(accum))
                T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    r_scale[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                T.reduce_sum(acc_s, r_sum, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * r_scale[i] + r_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= r_scale[i]
                T.copy(QKV[bz, k * block_N:(k + 1) * block_N, 2, by, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= l[i]
            T.copy(acc_o, O[bz, bx * block_M:(bx + 1) * block_M, by, :])
    return packed


@tilecute.jit(out_idx=[2])
def attn_probs_two_pass(batch=1, heads=2, seq_q=130, seq_k=200, dim=64, block_M=64, block_N=64):
    """The attention probabilities themselves, softmax(q.k / sqrt(D)) [B, H, Sq, Sk] in
    float32, in two passes over the keys in one kernel: the row max and sum online, then
    each tile's exp2(s - m) / l stored (the tail keys never stored)."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    dtype, accum = "float16", "float"

    @T.prim_func
    def probs(Q: T.Tensor([batch, heads, seq_q, dim], dtype), K: T.Tensor([batch, heads, seq_k, dim], dtype),
              P: T.Tensor([batch, heads, seq_q, seq_k], accum)):
        with T.Kernel(T.ceildiv(seq_q, block_M), heads, batch, threads=128) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            m = T.alloc_fragment([block_M], accum)
            m_prev = T.alloc_fragment([block_M], accum)
            r_sum = T.alloc_fragment([block_M], accum)
            l = T.alloc_fragment([block_M], accum)

            T.copy(Q[bz, by, bx * block_M:(bx + 1) * block_M, :], q_s)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(T.ceildiv(seq_k, block_N), num_stages=2):
                T.copy(K[bz, by, k * block_N:(k + 1) * block_N, :], k_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, clear_accum=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(k * block_N + j < seq_k, acc_s[i, j] * scale, -T.infinity(accum))
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] - m[i])
                T.reduce_sum(acc_s, r_sum, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * T.exp2(m_prev[i] - m[i]) + r_sum[i]
            for k in T.Pipelined(T.ceildiv(seq_k, block_N), num_stages=2):
                T.copy(K[bz, by, k * block_N:(k + 1) * block_N, :], k_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, clear_accum=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i]) / l[i]
                T.copy(acc_s, P[bz, by, bx * block_M:(bx + 1) * block_M, k * block_N:(k + 1) * block_N])
    return probs


# ---- decode ---------------------------------------------------------------------------------
@tilecute.jit(out_idx=[4])
def spec_decode_gqa(batch=3, heads=8, kv_heads=2, q_len=4, max_kv=1000, dim=64, block_N=64):
    """Speculative-decoding attention: each sequence has q_len new tokens (the last q_len
    of its cache_seqlens[b] keys), causal among them; the 4 query heads of a group times 4
    tokens make a 16-row tile (row r: head g = r // q_len, token t = r % q_len), gathered
    from Q by a T.Parallel.  K / V cache [B, max_kv, HK, D]; O float16 [B, q_len, HQ, D]."""
    groups = heads // kv_heads
    rows = groups * q_len
    scale = (1.0 / dim) ** 0.5 * LOG2E
    dtype, accum = "float16", "float"

    @T.prim_func
    def spec(Q: T.Tensor([batch, q_len, heads, dim], dtype), Kc: T.Tensor([batch, max_kv, kv_heads, dim], dtype),
             Vc: T.Tensor([batch, max_kv, kv_heads, dim], dtype), cache_seqlens: T.Tensor([batch], "int32"),
             O: T.Tensor([batch, q_len, heads, dim], dtype)):
        with T.Kernel(kv_heads, batch, threads=128) as (bx, by):
            q_s = T.alloc_shared([rows, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([rows, block_N], accum)
            acc_s_cast = T.alloc_fragment([rows, block_N], dtype)
            acc_o = T.alloc_fragment([rows, dim], accum)
            m = T.alloc_fragment([rows], accum)
            m_prev = T.alloc_fragment([rows], accum)
            r_scale = T.alloc_fragment([rows], accum)
            r_sum = T.alloc_fragment([rows], accum)
            l = T.alloc_fragment([rows], accum)

            kv_len = cache_seqlens[by]
            for r, d in T.Parallel(rows, dim):
                q_s[r, d] = Q[by, r % q_len, bx * groups + r // q_len, d]
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(T.ceildiv(kv_len, block_N), num_stages=2):
                T.copy(Kc[by, k * block_N:(k + 1) * block_N, bx, :], k_s)
                T.copy(Vc[by, k * block_N:(k + 1) * block_N, bx, :], v_s)
                T.clear(acc_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                for r, j in T.Parallel(rows, block_N):
                    acc_s[r, j] = T.if_then_else(k * block_N + j <= kv_len - q_len + r % q_len, acc_s[r, j],
                                                 -T.infinity(accum))
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for r in T.Parallel(rows):
                    r_scale[r] = T.exp2(m_prev[r] * scale - m[r] * scale)
                for r, j in T.Parallel(rows, block_N):
                    acc_s[r, j] = T.exp2(acc_s[r, j] * scale - m[r] * scale)
                T.reduce_sum(acc_s, r_sum, dim=1)
                for r in T.Parallel(rows):
                    l[r] = l[r] * r_scale[r] + r_sum[r]
                T.copy(acc_s, acc_s_cast)
                for r, d in T.Parallel(rows, dim):
                    acc_o[r, d] *= r_scale[r]
                T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for r, d in T.Parallel(rows, dim):
                O[by, r % q_len, bx * groups + r // q_len, d] = acc_o[r, d] / l[r]
    return spec


@tilecute.jit(out_idx=[5])
def paged_decode_two_pages_a_tile(batch=3, heads=32, kv_heads=2, dim=128, page=32, num_pages=100,
                                  max_pages=32, block_N=64):
    """Decode over a paged KV cache: a 64-key tile is two 32-key pages looked up in the
    block table (two copies into the halves of the shared tile), keys past
    cache_seqlens[b] masked.  16 query heads a KV head as the 16 rows of the tile.
    O float16 [B, HQ, D]."""
    groups = heads // kv_heads
    scale = (1.0 / dim) ** 0.5 * LOG2E
    dtype, accum = "float16", "float"
    per_tile = block_N // page

    @T.prim_func
    def paged(Q: T.Tensor([batch, heads, dim], dtype), Kp: T.Tensor([num_pages, page, kv_heads, dim], dtype),
              Vp: T.Tensor([num_pages, page, kv_heads, dim], dtype),
              block_table: T.Tensor([batch, max_pages], "int32"), cache_seqlens: T.Tensor([batch], "int32"),
              O: T.Tensor([batch, heads, dim], dtype)):
        with T.Kernel(kv_heads, batch, threads=128) as (bx, by):
            q_s = T.alloc_shared([groups, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([groups, block_N], accum)
            acc_s_cast = T.alloc_fragment([groups, block_N], dtype)
            acc_o = T.alloc_fragment([groups, dim], accum)
            m = T.alloc_fragment([groups], accum)
            m_prev = T.alloc_fragment([groups], accum)
            r_scale = T.alloc_fragment([groups], accum)
            r_sum = T.alloc_fragment([groups], accum)
            l = T.alloc_fragment([groups], accum)

            kv_len = cache_seqlens[by]
            T.copy(Q[by, bx * groups:(bx + 1) * groups, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(T.ceildiv(kv_len, block_N), num_stages=2):
                for p in T.serial(per_tile):
                    page_id = block_table[by, k * per_tile + p]
                    T.copy(Kp[page_id, :, bx, :], k_s[p * page:(p + 1) * page, :])
                    T.copy(Vp[page_id, :, bx, :], v_s[p * page:(p + 1) * page, :])
                T.gemm(q_s, k_s, acc_s, transpose_B=True, clear_accum=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(groups, block_N):
                    acc_s[i, j] = T.if_then_else(k * block_N + j < kv_len, acc_s[i, j], -T.infinity(accum))
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(groups):
                    r_scale[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(groups, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                T.reduce_sum(acc_s, r_sum, dim=1)
                for i in T.Parallel(groups):
                    l[i] = l[i] * r_scale[i] + r_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(groups, dim):
                    acc_o[i, j] *= r_scale[i]
                T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(groups, dim):
                acc_o[i, j] /= l[i]
            T.copy(acc_o, O[by, bx * groups:(bx + 1) * groups, :])
    return paged


@tilecute.jit(out_idx=[4, 5])
def split_kv_decode_partials(batch=3, heads=16, kv_heads=1, max_kv=1000, dim=64, num_split=4, block_N=64):
    """Split-KV decode (MQA: 16 query heads over one KV head): split s takes its share of
    the key tiles of cache_seqlens[b] (possibly none) and writes its normalised partial
    output and its LSE (log2 units; -inf and a zero output for an empty split), float32."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    groups = heads // kv_heads
    dtype, accum = "float16", "float"

    @T.prim_func
    def partial(Q: T.Tensor([batch, heads, dim], dtype), Kc: T.Tensor([batch, max_kv, kv_heads, dim], dtype),
                Vc: T.Tensor([batch, max_kv, kv_heads, dim], dtype), cache_seqlens: T.Tensor([batch], "int32"),
                Opart: T.Tensor([batch, heads, num_split, dim], accum),
                LSEpart: T.Tensor([batch, heads, num_split], accum)):
        with T.Kernel(num_split, kv_heads, batch, threads=128) as (bx, by, bz):
            q_s = T.alloc_shared([groups, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([groups, block_N], accum)
            acc_s_cast = T.alloc_fragment([groups, block_N], dtype)
            acc_o = T.alloc_fragment([groups, dim], accum)
            m = T.alloc_fragment([groups], accum)
            m_prev = T.alloc_fragment([groups], accum)
            r_scale = T.alloc_fragment([groups], accum)
            r_sum = T.alloc_fragment([groups], accum)
            l = T.alloc_fragment([groups], accum)

            kv_len = cache_seqlens[bz]
            n_tiles = T.ceildiv(kv_len, block_N)
            per_split = T.ceildiv(n_tiles, num_split)
            start = bx * per_split
            end = T.min(start + per_split, n_tiles)
            T.copy(Q[bz, by * groups:(by + 1) * groups, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(start, end, num_stages=2):
                T.copy(Kc[bz, k * block_N:(k + 1) * block_N, by, :], k_s)
                T.clear(acc_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(groups, block_N):
                    acc_s[i, j] = T.if_then_else(k * block_N + j < kv_len, acc_s[i, j], -T.infinity(accum))
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(groups):
                    r_scale[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(groups, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                T.reduce_sum(acc_s, r_sum, dim=1)
                for i in T.Parallel(groups):
                    l[i] = l[i] * r_scale[i] + r_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(groups, dim):
                    acc_o[i, j] *= r_scale[i]
                T.copy(Vc[bz, k * block_N:(k + 1) * block_N, by, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(groups, dim):
                Opart[bz, by * groups + i, bx, j] = T.if_then_else(l[i] > 0, acc_o[i, j] / l[i], 0)
            for i in T.Parallel(groups):
                LSEpart[bz, by * groups + i, bx] = T.if_then_else(l[i] > 0, T.log2(l[i]) + m[i] * scale,
                                                                  -T.infinity(accum))
    return partial


@tilecute.jit(out_idx=[2, 3])
def split_kv_combine(batch=3, heads=16, num_split=4, dim=64):
    """The combine of split-KV decode: weights 2^(lse_s - max) over the splits (an empty
    split's -inf gives 0), the partial outputs summed along dim 0 of a [splits, D] fragment.
    O float16 [B, H, D]; LSE float32 [B, H] in log2 units."""
    accum = "float"

    @T.prim_func
    def combine(Opart: T.Tensor([batch, heads, num_split, dim], accum),
                LSEpart: T.Tensor([batch, heads, num_split], accum),
                O: T.Tensor([batch, heads, dim], "float16"), LSE: T.Tensor([batch, heads], accum)):
        with T.Kernel(heads, batch, threads=64) as (bx, by):
            lse_f = T.alloc_fragment([num_split], accum)
            w = T.alloc_fragment([num_split], accum)
            mx = T.alloc_fragment([1], accum)
            tot = T.alloc_fragment([1], accum)
            o_f = T.alloc_fragment([num_split, dim], accum)
            out_f = T.alloc_fragment([dim], accum)
            T.copy(LSEpart[by, bx, :], lse_f)
            T.reduce_max(lse_f, mx, dim=0)
            for s in T.Parallel(num_split):
                w[s] = T.exp2(lse_f[s] - mx[0])
            T.reduce_sum(w, tot, dim=0)
            T.copy(Opart[by, bx, :, :], o_f)
            for s, d in T.Parallel(num_split, dim):
                o_f[s, d] = o_f[s, d] * (w[s] / tot[0])
            T.reduce_sum(o_f, out_f, dim=0)
            T.copy(out_f, O[by, bx, :])
            LSE[by, bx] = mx[0] + T.log2(tot[0])
    return combine


@tilecute.jit(out_idx=[5, 6])
def mla_decode_rope_part(batch=2, heads=64, max_kv=300, dim=128, pe_dim=32, block_N=64):
    """MLA-like decode: the scores are q_nope . kv (the latent, also the values) plus
    q_pe . k_pe, two GEMMs into one accumulator (the second adds to the first); keys past
    cache_seqlens[b] masked.  64 heads make one 64-row tile.  O bfloat16 [B, H, D];
    LSE float32 [B, H] in natural-log units."""
    sm_scale = (1.0 / (dim + pe_dim)) ** 0.5
    scale = sm_scale * LOG2E
    dtype, accum = "bfloat16", "float"

    @T.prim_func
    def mla(Qn: T.Tensor([batch, heads, dim], dtype), Qp: T.Tensor([batch, heads, pe_dim], dtype),
            KV: T.Tensor([batch, max_kv, dim], dtype), Kp: T.Tensor([batch, max_kv, pe_dim], dtype),
            cache_seqlens: T.Tensor([batch], "int32"), O: T.Tensor([batch, heads, dim], dtype),
            LSE: T.Tensor([batch, heads], accum)):
        with T.Kernel(batch, threads=128) as bx:
            qn_s = T.alloc_shared([heads, dim], dtype)
            qp_s = T.alloc_shared([heads, pe_dim], dtype)
            kv_s = T.alloc_shared([block_N, dim], dtype)
            kp_s = T.alloc_shared([block_N, pe_dim], dtype)
            acc_s = T.alloc_fragment([heads, block_N], accum)
            acc_s_cast = T.alloc_fragment([heads, block_N], dtype)
            acc_o = T.alloc_fragment([heads, dim], accum)
            m = T.alloc_fragment([heads], accum)
            m_prev = T.alloc_fragment([heads], accum)
            r_scale = T.alloc_fragment([heads], accum)
            r_sum = T.alloc_fragment([heads], accum)
            l = T.alloc_fragment([heads], accum)
            lse = T.alloc_fragment([heads], accum)

            kv_len = cache_seqlens[bx]
            T.copy(Qn[bx, :, :], qn_s)
            T.copy(Qp[bx, :, :], qp_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(T.ceildiv(kv_len, block_N), num_stages=2):
                T.copy(KV[bx, k * block_N:(k + 1) * block_N, :], kv_s)
                T.copy(Kp[bx, k * block_N:(k + 1) * block_N, :], kp_s)
                T.gemm(qn_s, kv_s, acc_s, transpose_B=True, clear_accum=True, policy=T.GemmWarpPolicy.FullRow)
                T.gemm(qp_s, kp_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(heads, block_N):
                    acc_s[i, j] = T.if_then_else(k * block_N + j < kv_len, acc_s[i, j], -T.infinity(accum))
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(heads):
                    r_scale[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(heads, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                T.reduce_sum(acc_s, r_sum, dim=1)
                for i in T.Parallel(heads):
                    l[i] = l[i] * r_scale[i] + r_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(heads, dim):
                    acc_o[i, j] *= r_scale[i]
                T.gemm(acc_s_cast, kv_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(heads, dim):
                acc_o[i, j] /= l[i]
            for i in T.Parallel(heads):
                lse[i] = T.log(l[i]) + m[i] * sm_scale
            T.copy(acc_o, O[bx, :, :])
            T.copy(lse, LSE[bx, :])
    return mla


# ---- backward ---------------------------------------------------------------------------------
@tilecute.jit(out_idx=[2])
def bwd_delta(batch=1, seq_len=1000, heads=2, dim=64, block_M=64):
    """Delta[b, h, s] = sum_d O * dO (BSHD bfloat16 in, float32 out), a ragged last tile."""
    dtype, accum = "bfloat16", "float"
    shape = [batch, seq_len, heads, dim]

    @T.prim_func
    def delta(O: T.Tensor(shape, dtype), dO: T.Tensor(shape, dtype), Delta: T.Tensor([batch, heads, seq_len], accum)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=128) as (bx, by, bz):
            o = T.alloc_fragment([block_M, dim], accum)
            do = T.alloc_fragment([block_M, dim], accum)
            acc = T.alloc_fragment([block_M, dim], accum)
            d = T.alloc_fragment([block_M], accum)
            T.copy(O[bz, bx * block_M:(bx + 1) * block_M, by, :], o)
            T.copy(dO[bz, bx * block_M:(bx + 1) * block_M, by, :], do)
            for i, j in T.Parallel(block_M, dim):
                acc[i, j] = o[i, j] * do[i, j]
            T.reduce_sum(acc, d, dim=1)
            T.copy(d, Delta[bz, by, bx * block_M:(bx + 1) * block_M])
    return delta


@tilecute.jit(out_idx=[7, 8])
def bwd_kv_major_atomic_dq(batch=1, seq_len=1000, heads=2, dim=64, causal=True, block_M=64, block_N=64):
    """FlashAttention backward, one block per K / V tile, the query tiles pipelined: P^T =
    exp2(K Q^T * scale - lse) (LSE in log2 units), dV += P^T dO, dP^T = V dO^T, dS^T =
    P^T * (dP^T - Delta) / sqrt(D), dK += dS^T Q, and dQ += dS K added into a float32
    tensor by tile atomics (the last query tile runs past the end).  dQacc is an input
    the caller zeroes; dK, dV bfloat16 outputs."""
    sm_scale = (1.0 / dim) ** 0.5
    scale = sm_scale * LOG2E
    dtype, accum = "bfloat16", "float"
    shape = [batch, seq_len, heads, dim]

    @T.prim_func
    def bwd(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype), dO: T.Tensor(shape, dtype),
            LSE: T.Tensor([batch, heads, seq_len], accum), Delta: T.Tensor([batch, heads, seq_len], accum),
            dQacc: T.Tensor(shape, accum), dK: T.Tensor(shape, dtype), dV: T.Tensor(shape, dtype)):
        with T.Kernel(heads, T.ceildiv(seq_len, block_M), batch, threads=128) as (bx, by, bz):
            k_s = T.alloc_shared([block_M, dim], dtype)
            v_s = T.alloc_shared([block_M, dim], dtype)
            q_s = T.alloc_shared([block_N, dim], dtype)
            do_s = T.alloc_shared([block_N, dim], dtype)
            lse_s = T.alloc_shared([block_N], accum)
            delta_s = T.alloc_shared([block_N], accum)
            ds_s = T.alloc_shared([block_M, block_N], dtype)
            pT = T.alloc_fragment([block_M, block_N], accum)
            pT_cast = T.alloc_fragment([block_M, block_N], dtype)
            dpT = T.alloc_fragment([block_M, block_N], accum)
            dsT_cast = T.alloc_fragment([block_M, block_N], dtype)
            dv = T.alloc_fragment([block_M, dim], accum)
            dk = T.alloc_fragment([block_M, dim], accum)
            dq = T.alloc_fragment([block_N, dim], accum)

            T.copy(K[bz, by * block_M:(by + 1) * block_M, bx, :], k_s)
            T.copy(V[bz, by * block_M:(by + 1) * block_M, bx, :], v_s)
            T.clear(dv)
            T.clear(dk)
            first = T.floordiv(by * block_M, block_N) if causal else 0
            for t in T.Pipelined(first, T.ceildiv(seq_len, block_N), num_stages=2):
                T.copy(Q[bz, t * block_N:(t + 1) * block_N, bx, :], q_s)
                T.copy(dO[bz, t * block_N:(t + 1) * block_N, bx, :], do_s)
                T.copy(LSE[bz, bx, t * block_N:(t + 1) * block_N], lse_s)
                T.copy(Delta[bz, bx, t * block_N:(t + 1) * block_N], delta_s)
                T.gemm(k_s, q_s, pT, transpose_B=True, clear_accum=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_M, block_N):
                    pT[i, j] = T.exp2(pT[i, j] * scale - lse_s[j])
                if causal:
                    for i, j in T.Parallel(block_M, block_N):
                        pT[i, j] = T.if_then_else(by * block_M + i <= t * block_N + j, pT[i, j], 0)
                T.gemm(v_s, do_s, dpT, transpose_B=True, clear_accum=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(pT, pT_cast)
                T.gemm(pT_cast, do_s, dv, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_M, block_N):
                    dsT_cast[i, j] = pT[i, j] * (dpT[i, j] - delta_s[j]) * sm_scale
                T.gemm(dsT_cast, q_s, dk, policy=T.GemmWarpPolicy.FullRow)
                T.copy(dsT_cast, ds_s)
                T.gemm(ds_s, k_s, dq, transpose_A=True, clear_accum=True)
                T.atomic_add(dQacc[bz, t * block_N:(t + 1) * block_N, bx, :], dq)
            T.copy(dv, dV[bz, by * block_M:(by + 1) * block_M, bx, :])
            T.copy(dk, dK[bz, by * block_M:(by + 1) * block_M, bx, :])
    return bwd


@tilecute.jit(out_idx=[1])
def bwd_dq_post(batch=1, seq_len=1000, heads=2, dim=64, block_M=64):
    """dQ: the float32 accumulation cast to bfloat16, tile by tile (a ragged last tile)."""
    shape = [batch, seq_len, heads, dim]

    @T.prim_func
    def post(dQacc: T.Tensor(shape, "float"), dQ: T.Tensor(shape, "bfloat16")):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=128) as (bx, by, bz):
            f = T.alloc_fragment([block_M, dim], "float")
            T.copy(dQacc[bz, bx * block_M:(bx + 1) * block_M, by, :], f)
            T.copy(f, dQ[bz, bx * block_M:(bx + 1) * block_M, by, :])
    return post


# ---- linear attention, retention, Mamba-2 -------------------------------------------------------
@tilecute.jit(out_idx=[3, 4])
def linear_attn_chunk_state(batch=1, heads=2, seq_len=200, dk=64, dv=64, chunk=64):
    """Causal linear attention in chunks with the state passed along: o_c = (q k^T, lower
    triangle incl. the diagonal) v + q S, then S += k^T v; the state in a float32 fragment,
    cast into shared as the GEMM's operand.  O float32 [B, S, H, Dv]; the final state
    float32 [B, H, Dk, Dv]."""
    dtype, accum = "float16", "float"

    @T.prim_func
    def lin(Q: T.Tensor([batch, seq_len, heads, dk], dtype), K: T.Tensor([batch, seq_len, heads, dk], dtype),
            V: T.Tensor([batch, seq_len, heads, dv], dtype), O: T.Tensor([batch, seq_len, heads, dv], accum),
            S_out: T.Tensor([batch, heads, dk, dv], accum)):
        with T.Kernel(heads, batch, threads=128) as (bx, by):
            q_s = T.alloc_shared([chunk, dk], dtype)
            k_s = T.alloc_shared([chunk, dk], dtype)
            v_s = T.alloc_shared([chunk, dv], dtype)
            h_s = T.alloc_shared([dk, dv], dtype)
            att = T.alloc_fragment([chunk, chunk], accum)
            att_cast = T.alloc_fragment([chunk, chunk], dtype)
            o = T.alloc_fragment([chunk, dv], accum)
            h = T.alloc_fragment([dk, dv], accum)
            T.clear(h)
            for c in T.Pipelined(T.ceildiv(seq_len, chunk), num_stages=1):
                T.copy(Q[by, c * chunk:(c + 1) * chunk, bx, :], q_s)
                T.copy(K[by, c * chunk:(c + 1) * chunk, bx, :], k_s)
                T.copy(V[by, c * chunk:(c + 1) * chunk, bx, :], v_s)
                T.gemm(q_s, k_s, att, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(chunk, chunk):
                    att[i, j] = T.if_then_else(i >= j, att[i, j], 0)
                T.copy(att, att_cast)
                T.copy(h, h_s)
                T.gemm(att_cast, v_s, o, clear_accum=True)
                T.gemm(q_s, h_s, o)
                T.copy(o, O[by, c * chunk:(c + 1) * chunk, bx, :])
                T.gemm(k_s, v_s, h, transpose_A=True)
            T.copy(h, S_out[by, bx, :, :])
    return lin


@tilecute.jit(out_idx=[4])
def retention_chunk_recurrent(batch=1, heads=4, seq_len=200, dim=64, chunk=64):
    """Chunkwise retention with a per-head decay gamma = 2^LogG[h]: within a chunk
    (q k^T * D) v with D[i, j] = gamma^(i - j) for i >= j; across chunks (q S) *
    gamma^(i + 1); then S = gamma^C S + (k * gamma^(C - 1 - j))^T v.  O float32."""
    dtype, accum = "float16", "float"
    shape = [batch, seq_len, heads, dim]

    @T.prim_func
    def ret(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
            LogG: T.Tensor([heads], accum), O: T.Tensor(shape, accum)):
        with T.Kernel(heads, batch, threads=128) as (bx, by):
            q_s = T.alloc_shared([chunk, dim], dtype)
            k_s = T.alloc_shared([chunk, dim], dtype)
            kd_s = T.alloc_shared([chunk, dim], dtype)
            v_s = T.alloc_shared([chunk, dim], dtype)
            h_s = T.alloc_shared([dim, dim], dtype)
            att = T.alloc_fragment([chunk, chunk], accum)
            att_cast = T.alloc_fragment([chunk, chunk], dtype)
            o = T.alloc_fragment([chunk, dim], accum)
            o_inter = T.alloc_fragment([chunk, dim], accum)
            h = T.alloc_fragment([dim, dim], accum)
            lg = LogG[bx]
            T.clear(h)
            for c in T.Pipelined(T.ceildiv(seq_len, chunk), num_stages=1):
                T.copy(Q[by, c * chunk:(c + 1) * chunk, bx, :], q_s)
                T.copy(K[by, c * chunk:(c + 1) * chunk, bx, :], k_s)
                T.copy(V[by, c * chunk:(c + 1) * chunk, bx, :], v_s)
                T.gemm(q_s, k_s, att, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(chunk, chunk):
                    att[i, j] = T.if_then_else(i >= j, att[i, j] * T.exp2((i - j) * lg), 0)
                T.copy(att, att_cast)
                T.copy(h, h_s)
                T.gemm(att_cast, v_s, o, clear_accum=True)
                T.gemm(q_s, h_s, o_inter, clear_accum=True)
                for i, j in T.Parallel(chunk, dim):
                    o[i, j] = o[i, j] + o_inter[i, j] * T.exp2((i + 1) * lg)
                T.copy(o, O[by, c * chunk:(c + 1) * chunk, bx, :])
                for i, j in T.Parallel(chunk, dim):
                    kd_s[i, j] = k_s[i, j] * T.exp2((chunk - 1 - i) * lg)
                for i, j in T.Parallel(dim, dim):
                    h[i, j] = h[i, j] * T.exp2(chunk * lg)
                T.gemm(kd_s, v_s, h, transpose_A=True)
    return ret


@tilecute.jit(out_idx=[4, 5])
def mamba2_chunk_cumsum_states(batch=1, seq_len=200, heads=2, headdim=64, dstate=64, chunk=64):
    """Two Mamba-2 chunk pieces in one kernel per (chunk, head, batch): dA_cumsum =
    cumsum(dt * A[h]) within the chunk (``T.cumsum`` on shared), and the chunk's state
    states[p, n] = sum_l x[l, p] * exp(dA_cs[last] - dA_cs[l]) * dt[l] * B[l, n] (the
    decayed x written to shared, then a GEMM with transpose_A).  dt [B, H, S] float32
    (past softplus), A [H]; dA_cumsum float32 [B, H, nchunks, chunk]; states float32
    [B, nchunks, H, P, N]."""
    nchunks = (seq_len + chunk - 1) // chunk
    dtype, accum = "float16", "float"

    @T.prim_func
    def chunk_state(X: T.Tensor([batch, seq_len, heads, headdim], dtype), Bm: T.Tensor([batch, seq_len, dstate], dtype),
                    dt: T.Tensor([batch, heads, seq_len], accum), A: T.Tensor([heads], accum),
                    dA_cumsum: T.Tensor([batch, heads, nchunks, chunk], accum),
                    states: T.Tensor([batch, nchunks, heads, headdim, dstate], accum)):
        with T.Kernel(nchunks, heads, batch, threads=128) as (bx, by, bz):
            dt_s = T.alloc_shared([chunk], accum)
            cs_s = T.alloc_shared([chunk], accum)
            x_s = T.alloc_shared([chunk, headdim], dtype)
            xd_s = T.alloc_shared([chunk, headdim], dtype)
            b_s = T.alloc_shared([chunk, dstate], dtype)
            st = T.alloc_fragment([headdim, dstate], accum)
            a = A[by]
            T.copy(dt[bz, by, bx * chunk:(bx + 1) * chunk], dt_s)
            for l in T.Parallel(chunk):
                cs_s[l] = dt_s[l] * a
            T.cumsum(cs_s, dim=0)
            T.copy(cs_s, dA_cumsum[bz, by, bx, :])
            T.copy(X[bz, bx * chunk:(bx + 1) * chunk, by, :], x_s)
            T.copy(Bm[bz, bx * chunk:(bx + 1) * chunk, :], b_s)
            for l, p in T.Parallel(chunk, headdim):
                xd_s[l, p] = x_s[l, p] * T.exp(cs_s[chunk - 1] - cs_s[l]) * dt_s[l]
            T.gemm(xd_s, b_s, st, transpose_A=True, clear_accum=True)
            T.copy(st, states[bz, bx, by, :, :])
    return chunk_state


# ---- forward: other ways to write the online softmax ----------------------------------------------
@tilecute.jit(out_idx=[3])
def fa_normalised_every_step(batch=1, heads=2, seq_len=1000, dim=64, block_M=64, block_N=64, threads=128):
    """FlashAttention-1's bookkeeping: the output kept normalised after every step,
    o = o * (l_old * alpha / l_new) + (P V) / l_new, so the running sum l is read inside
    the loop (P V into a second accumulator cleared each step).  Causal, float16 (BSHD)."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    dtype, accum = "float16", "float"
    shape = [batch, seq_len, heads, dim]

    @T.prim_func
    def fa1(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype), O: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            pv = T.alloc_fragment([block_M, dim], accum)
            m = T.alloc_fragment([block_M], accum)
            m_prev = T.alloc_fragment([block_M], accum)
            r_sum = T.alloc_fragment([block_M], accum)
            l = T.alloc_fragment([block_M], accum)
            l_new = T.alloc_fragment([block_M], accum)

            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(T.min(T.ceildiv(seq_len, block_N), T.ceildiv((bx + 1) * block_M, block_N)),
                                 num_stages=2):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], k_s)
                T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], v_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, clear_accum=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(bx * block_M + i >= k * block_N + j, acc_s[i, j], -T.infinity(accum))
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                T.reduce_sum(acc_s, r_sum, dim=1)
                for i in T.Parallel(block_M):
                    l_new[i] = l[i] * T.exp2(m_prev[i] * scale - m[i] * scale) + r_sum[i]
                T.copy(acc_s, acc_s_cast)
                T.gemm(acc_s_cast, v_s, pv, clear_accum=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] = acc_o[i, j] * (l[i] * T.exp2(m_prev[i] * scale - m[i] * scale) / l_new[i]) + \
                        pv[i, j] / l_new[i]
                T.copy(l_new, l)
            T.copy(acc_o, O[bz, bx * block_M:(bx + 1) * block_M, by, :])
    return fa1


@tilecute.jit(out_idx=[3, 4])
def fa_sum_into_running_clear_false(batch=1, heads=2, seq_len=777, dim=64, block_M=64, block_N=64, threads=128):
    """The running sum kept by ``T.reduce_sum(acc_s, l, dim=1, clear=False)`` (added to l,
    which was rescaled first), the max by ``T.reduce_max(..., clear=True)`` then
    ``T.max`` with the previous one.  Non-causal, tail keys masked.  O bfloat16 (BHSD);
    LSE float32 [B, H, S] in log2 units."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    dtype, accum = "bfloat16", "float"
    shape = [batch, heads, seq_len, dim]

    @T.prim_func
    def running(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
                O: T.Tensor(shape, dtype), LSE: T.Tensor([batch, heads, seq_len], accum)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            m = T.alloc_fragment([block_M], accum)
            m_prev = T.alloc_fragment([block_M], accum)
            r_scale = T.alloc_fragment([block_M], accum)
            l = T.alloc_fragment([block_M], accum)
            lse = T.alloc_fragment([block_M], accum)

            T.copy(Q[bz, by, bx * block_M:(bx + 1) * block_M, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(T.ceildiv(seq_len, block_N), num_stages=2):
                T.copy(K[bz, by, k * block_N:(k + 1) * block_N, :], k_s)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(k * block_N + j < seq_len, 0, -T.infinity(accum))
                T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1)
                for i in T.Parallel(block_M):
                    m[i] = T.max(m[i], m_prev[i])
                    r_scale[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                    l[i] *= r_scale[i]
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                T.reduce_sum(acc_s, l, dim=1, clear=False)
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= r_scale[i]
                T.copy(V[bz, by, k * block_N:(k + 1) * block_N, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= l[i]
            for i in T.Parallel(block_M):
                lse[i] = T.log2(l[i]) + m[i] * scale
            T.copy(acc_o, O[bz, by, bx * block_M:(bx + 1) * block_M, :])
            T.copy(lse, LSE[bz, by, bx * block_M:(bx + 1) * block_M])
    return running


@tilecute.jit(out_idx=[3])
def fa_user_lazy_rescale(batch=1, heads=2, seq_len=1000, dim=64, block_M=64, block_N=64, threads=128,
                         threshold=8.0):
    """The program's own lazy rescale (FlashAttention-4's): a row's exponent base moves to
    the new max only when the max grew by more than 2^threshold (in log2 units); else the
    old base stays (exponents up to 2^threshold).  The rescale of O and l is then exactly
    1 for rows that kept their base.  Causal, float16 (BSHD)."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    dtype, accum = "float16", "float"
    shape = [batch, seq_len, heads, dim]

    @T.prim_func
    def lazy(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype), O: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            base = T.alloc_fragment([block_M], accum)
            mx = T.alloc_fragment([block_M], accum)
            r_scale = T.alloc_fragment([block_M], accum)
            r_sum = T.alloc_fragment([block_M], accum)
            l = T.alloc_fragment([block_M], accum)

            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(base, -T.infinity(accum))
            for k in T.Pipelined(T.min(T.ceildiv(seq_len, block_N), T.ceildiv((bx + 1) * block_M, block_N)),
                                 num_stages=2):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], k_s)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(bx * block_M + i >= k * block_N + j, 0, -T.infinity(accum))
                T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = acc_s[i, j] * scale
                T.reduce_max(acc_s, mx, dim=1)
                for i in T.Parallel(block_M):
                    r_scale[i] = T.if_then_else(mx[i] - base[i] > threshold, T.exp2(base[i] - mx[i]), 1.0)
                    base[i] = T.if_then_else(mx[i] - base[i] > threshold, mx[i], base[i])
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] - base[i])
                T.reduce_sum(acc_s, r_sum, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * r_scale[i] + r_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= r_scale[i]
                T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= l[i]
            T.copy(acc_o, O[bz, bx * block_M:(bx + 1) * block_M, by, :])
    return lazy


@tilecute.jit(out_idx=[7])
def mamba2_chunk_scan_output(batch=1, seq_len=200, heads=2, headdim=64, dstate=64, chunk=64):
    """Mamba-2's chunk scan, the output piece, per (chunk, head, batch): y = (C B^T *
    exp(cs_l - cs_s) * dt_s, lower triangle) x + (C prev_state^T) * exp(cs_l) + D[h] x,
    with the segment-sum decay built in the fragment of the C B^T GEMM, the entering state
    (float32) cast through shared as the second GEMM's operand.  Y float32."""
    nchunks = (seq_len + chunk - 1) // chunk
    dtype, accum = "float16", "float"

    @T.prim_func
    def chunk_scan(X: T.Tensor([batch, seq_len, heads, headdim], dtype), Cm: T.Tensor([batch, seq_len, dstate], dtype),
                   Bm: T.Tensor([batch, seq_len, dstate], dtype), dt: T.Tensor([batch, heads, seq_len], accum),
                   dA_cumsum: T.Tensor([batch, heads, nchunks, chunk], accum),
                   prev_states: T.Tensor([batch, nchunks, heads, headdim, dstate], accum),
                   Dskip: T.Tensor([heads], accum), Y: T.Tensor([batch, seq_len, heads, headdim], accum)):
        with T.Kernel(nchunks, heads, batch, threads=128) as (bx, by, bz):
            c_s = T.alloc_shared([chunk, dstate], dtype)
            b_s = T.alloc_shared([chunk, dstate], dtype)
            x_s = T.alloc_shared([chunk, headdim], dtype)
            st_s = T.alloc_shared([headdim, dstate], dtype)
            cs_s = T.alloc_shared([chunk], accum)
            dt_s = T.alloc_shared([chunk], accum)
            cb = T.alloc_fragment([chunk, chunk], accum)
            cb_cast = T.alloc_fragment([chunk, chunk], dtype)
            st_f = T.alloc_fragment([headdim, dstate], accum)
            y = T.alloc_fragment([chunk, headdim], accum)
            y_off = T.alloc_fragment([chunk, headdim], accum)
            d = Dskip[by]
            T.copy(Cm[bz, bx * chunk:(bx + 1) * chunk, :], c_s)
            T.copy(Bm[bz, bx * chunk:(bx + 1) * chunk, :], b_s)
            T.copy(X[bz, bx * chunk:(bx + 1) * chunk, by, :], x_s)
            T.copy(dA_cumsum[bz, by, bx, :], cs_s)
            T.copy(dt[bz, by, bx * chunk:(bx + 1) * chunk], dt_s)
            T.copy(prev_states[bz, bx, by, :, :], st_f)
            T.copy(st_f, st_s)
            T.gemm(c_s, b_s, cb, transpose_B=True, clear_accum=True)
            for l, s in T.Parallel(chunk, chunk):
                cb[l, s] = T.if_then_else(l >= s, cb[l, s] * T.exp(cs_s[l] - cs_s[s]) * dt_s[s], 0)
            T.copy(cb, cb_cast)
            T.gemm(cb_cast, x_s, y, clear_accum=True)
            T.gemm(c_s, st_s, y_off, transpose_B=True, clear_accum=True)
            for l, p in T.Parallel(chunk, headdim):
                y[l, p] = y[l, p] + y_off[l, p] * T.exp(cs_s[l]) + d * x_s[l, p]
            T.copy(y, Y[bz, bx * chunk:(bx + 1) * chunk, by, :])
    return chunk_scan


# ---- forward: masks that meet the mask fold ---------------------------------------------------------
@tilecute.jit(out_idx=[4])
def fa_doc_mask_from_fragment(batch=1, heads=2, seq_len=1000, dim=64, block_M=64, block_N=64, threads=128):
    """Document masking whose scores start at 0 / -inf from a condition that reads the
    query rows' document ids from a fragment (loaded once) and the keys' ids from the
    tensor: Doc[b, i] == Doc[b, j].  Tiles can be wholly masked for a row (guarded max).
    O float16 (BSHD)."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    dtype, accum = "float16", "float"
    shape = [batch, seq_len, heads, dim]

    @T.prim_func
    def docs(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
             Doc: T.Tensor([batch, seq_len], "int32"), O: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            qdoc = T.alloc_fragment([block_M], "int32")
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            m = T.alloc_fragment([block_M], accum)
            m_prev = T.alloc_fragment([block_M], accum)
            m_safe = T.alloc_fragment([block_M], accum)
            r_scale = T.alloc_fragment([block_M], accum)
            r_sum = T.alloc_fragment([block_M], accum)
            l = T.alloc_fragment([block_M], accum)

            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], q_s)
            for i in T.Parallel(block_M):
                qdoc[i] = T.if_then_else(bx * block_M + i < seq_len, Doc[bz, T.min(bx * block_M + i, seq_len - 1)], -1)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(T.ceildiv(seq_len, block_N), num_stages=2):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], k_s)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(
                        (k * block_N + j < seq_len) and (qdoc[i] == Doc[bz, k * block_N + j]), 0, -T.infinity(accum))
                T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    m_safe[i] = T.if_then_else(m[i] == -T.infinity(accum), 0, m[i])
                    r_scale[i] = T.exp2(m_prev[i] * scale - m_safe[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m_safe[i] * scale)
                T.reduce_sum(acc_s, r_sum, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * r_scale[i] + r_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= r_scale[i]
                T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= l[i]
            T.copy(acc_o, O[bz, bx * block_M:(bx + 1) * block_M, by, :])
    return docs


@tilecute.jit(out_idx=[3])
def fa_mask_init_then_softcap(batch=1, heads=2, seq_len=1000, dim=64, softcap=5.0, block_M=64, block_N=64,
                              threads=128):
    """Scores started at the tail mask written with -inf first (``T.if_then_else(j >= S,
    -inf, 0)``), the GEMM added, then soft-capped: a masked score becomes
    softcap * tanh(-inf) = -softcap, not -inf (the program's literal meaning: the tail keys
    of the last tile still take weight exp(-softcap)).  O float16 (BSHD)."""
    sm_scale = (1.0 / dim) ** 0.5
    dtype, accum = "float16", "float"
    shape = [batch, seq_len, heads, dim]

    @T.prim_func
    def capped_late(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
                    O: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            m = T.alloc_fragment([block_M], accum)
            m_prev = T.alloc_fragment([block_M], accum)
            r_scale = T.alloc_fragment([block_M], accum)
            r_sum = T.alloc_fragment([block_M], accum)
            l = T.alloc_fragment([block_M], accum)

            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(T.ceildiv(seq_len, block_N), num_stages=2):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], k_s)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(k * block_N + j >= seq_len, -T.infinity(accum), 0)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = softcap * T.tanh(acc_s[i, j] * sm_scale / softcap) * LOG2E
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    r_scale[i] = T.exp2(m_prev[i] - m[i])
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] - m[i])
                T.reduce_sum(acc_s, r_sum, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * r_scale[i] + r_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= r_scale[i]
                T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], v_s)
                T.gemm(acc_s_cast, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= l[i]
            T.copy(acc_o, O[bz, bx * block_M:(bx + 1) * block_M, by, :])
    return capped_late


@tilecute.jit(out_idx=[3])
def fa_p_through_shared(batch=1, heads=2, seq_len=1000, dim=64, block_M=64, block_N=64, threads=128):
    """Causal attention whose probabilities go through shared memory (P cast into a shared
    tile, the second GEMM shared x shared), bfloat16 (BSHD)."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    dtype, accum = "bfloat16", "float"
    shape = [batch, seq_len, heads, dim]

    @T.prim_func
    def p_shared(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
                 O: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            p_s = T.alloc_shared([block_M, block_N], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            m = T.alloc_fragment([block_M], accum)
            m_prev = T.alloc_fragment([block_M], accum)
            r_scale = T.alloc_fragment([block_M], accum)
            r_sum = T.alloc_fragment([block_M], accum)
            l = T.alloc_fragment([block_M], accum)

            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum))
            for k in T.Pipelined(T.min(T.ceildiv(seq_len, block_N), T.ceildiv((bx + 1) * block_M, block_N)),
                                 num_stages=2):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], k_s)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(bx * block_M + i >= k * block_N + j, 0, -T.infinity(accum))
                T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    r_scale[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                T.reduce_sum(acc_s, r_sum, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * r_scale[i] + r_sum[i]
                T.copy(acc_s, p_s)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= r_scale[i]
                T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], v_s)
                T.gemm(p_s, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= l[i]
            T.copy(acc_o, O[bz, bx * block_M:(bx + 1) * block_M, by, :])
    return p_shared
