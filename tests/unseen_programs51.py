"""A fifty-first set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang): attention forwards at the head dims and tile shapes the earlier attention rounds
skipped -- head dims 80, 96, 112, 160, 192 (and a 192-wide QK with a 128-wide V) and 256;
block_M 64 / 128 on 4 or 8 warps with block_N 32, 48, 80, 112 and 176; tanh soft-capping,
ALiBi slopes computed per head, a left / right sliding window with the key loop cut to the
band, causal attention with more keys than queries aligned bottom-right, cross attention over
T.dynamic query and key lengths, varlen GQA over cu_seqlens with a causal mask, learned sinks
as one extra logit per head, a relative-position bias table added to the scores, fp8 (e4m3)
Q / K / V with per-head descale factors, and the log-sum-exp written in base 2 or base e.
Then four written the way TileLang's own examples write them: gpt-oss sinks with a window
under T.Pipelined(num_stages=0), T.annotate_layout and T.use_swizzle; varlen with separate
query / key offsets and tiles copied from each sequence's start; Q pre-scaled in registers
as the first GEMM's A operand; and the sink as the softmax's starting point with a bias tile
copied into registers and symmetric ALiBi.

Every program keys its tail: a key column past the sequence is masked (to -inf, or -1e9 as
TileLang's varlen example does), a query row past it is never stored.  The file reads as
TileLang after swapping its three import lines (``import tilelang`` / ``import
tilelang.language as T`` / ``from tilelang.layout import make_swizzled_layout``);
``tests/test_unseen_programs51.py`` builds each to a cubin on the CPU, checks what decides
the result in the generated source, and on a GPU compares it with torch."""

import tilecute as tilelang
import tilecute.language as T
from tilecute.layout import make_swizzled_layout

LOG2E = 1.44269504
LN2 = 0.69314718


# ---- head dim 80, 8 warps over 128 rows, block_N 48, tanh soft-capping, LSE in base e -----------
@tilelang.jit(out_idx=[3, 4])
def fa_d80_softcap_bm128_w8(B=1, H=2, S=300, D=80, softcap=30.0, block_M=128, block_N=48,
                            num_stages=2, threads=256):
    """Non-causal attention (BHSD, fp16) with Gemma-2 soft-capping: s = tanh(q.k / sqrt(D) /
    cap) * cap, then a softmax in base e (T.exp).  The running max by T.reduce_max(clear=False)
    over the previous one; the LSE out in natural-log units, max + log(sum)."""
    sm_scale = (1.0 / D) ** 0.5
    shape = [B, H, S, D]

    @T.prim_func
    def main(Q: T.Tensor(shape, T.float16), K: T.Tensor(shape, T.float16), V: T.Tensor(shape, T.float16),
             O: T.Tensor(shape, T.float16), LSE: T.Tensor([B, H, S], T.float32)):
        with T.Kernel(T.ceildiv(S, block_M), H, B, threads=threads) as (bx, by, bz):
            Q_shared = T.alloc_shared([block_M, D], T.float16)
            K_shared = T.alloc_shared([block_N, D], T.float16)
            V_shared = T.alloc_shared([block_N, D], T.float16)
            acc_s = T.alloc_fragment([block_M, block_N], T.float32)
            acc_s_cast = T.alloc_fragment([block_M, block_N], T.float16)
            acc_o = T.alloc_fragment([block_M, D], T.float32)
            scores_max = T.alloc_fragment([block_M], T.float32)
            scores_max_prev = T.alloc_fragment([block_M], T.float32)
            scores_scale = T.alloc_fragment([block_M], T.float32)
            scores_sum = T.alloc_fragment([block_M], T.float32)
            logsum = T.alloc_fragment([block_M], T.float32)

            T.copy(Q[bz, by, bx * block_M:(bx + 1) * block_M, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(T.float32))
            for k in T.Pipelined(T.ceildiv(S, block_N), num_stages=num_stages):
                T.copy(K[bz, by, k * block_N:(k + 1) * block_N, :], K_shared)
                T.clear(acc_s)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(k * block_N + j < S,
                                                 T.tanh(acc_s[i, j] * sm_scale / softcap) * softcap,
                                                 -T.infinity(T.float32))
                T.copy(scores_max, scores_max_prev)
                T.reduce_max(acc_s, scores_max, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    scores_scale[i] = T.exp(scores_max_prev[i] - scores_max[i])
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp(acc_s[i, j] - scores_max[i])
                T.reduce_sum(acc_s, scores_sum, dim=1)
                for i in T.Parallel(block_M):
                    logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, D):
                    acc_o[i, j] *= scores_scale[i]
                T.copy(V[bz, by, k * block_N:(k + 1) * block_N, :], V_shared)
                T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, D):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, O[bz, by, bx * block_M:(bx + 1) * block_M, :])
            for i in T.Parallel(block_M):
                if bx * block_M + i < S:
                    LSE[bz, by, bx * block_M + i] = scores_max[i] + T.log(logsum[i])

    return main


# ---- head dim 112, block_N 112, ALiBi slopes computed per head, causal -------------------------
@tilelang.jit(out_idx=[3])
def fa_d112_alibi_causal(B=1, H=4, S=300, D=112, block_M=64, block_N=112, num_stages=1, threads=128):
    """Causal ALiBi attention (BSHD, bf16): score = q.k / sqrt(D) - slope_h * (i - j) with
    slope_h = 2^(-8 (h + 1) / H) computed in the kernel; the key loop stops at the diagonal.
    The running max taken explicitly: the tile's own max (T.reduce_max, clear) then
    max(previous, tile), the output rescaled by exp2 of the difference."""
    scale = (1.0 / D) ** 0.5 * LOG2E
    shape = [B, S, H, D]

    @T.prim_func
    def main(Q: T.Tensor(shape, T.bfloat16), K: T.Tensor(shape, T.bfloat16), V: T.Tensor(shape, T.bfloat16),
             O: T.Tensor(shape, T.bfloat16)):
        with T.Kernel(T.ceildiv(S, block_M), H, B, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, D], T.bfloat16)
            k_s = T.alloc_shared([block_N, D], T.bfloat16)
            v_s = T.alloc_shared([block_N, D], T.bfloat16)
            o_s = T.alloc_shared([block_M, D], T.bfloat16)
            s = T.alloc_fragment([block_M, block_N], T.float32)
            p = T.alloc_fragment([block_M, block_N], T.bfloat16)
            o = T.alloc_fragment([block_M, D], T.float32)
            m = T.alloc_fragment([block_M], T.float32)
            m_tile = T.alloc_fragment([block_M], T.float32)
            alpha = T.alloc_fragment([block_M], T.float32)
            l = T.alloc_fragment([block_M], T.float32)
            l_tile = T.alloc_fragment([block_M], T.float32)
            slope = T.alloc_var(T.float32)

            slope = T.exp2(-8.0 * (by + 1) / H)
            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], q_s)
            T.fill(o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(T.float32))
            hi = T.min(T.ceildiv(S, block_N), T.ceildiv((bx + 1) * block_M, block_N))
            for k in T.Pipelined(hi, num_stages=num_stages):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], k_s)
                T.clear(s)
                T.gemm(q_s, k_s, s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_M, block_N):
                    qi = bx * block_M + i
                    kj = k * block_N + j
                    s[i, j] = T.if_then_else(kj <= qi and kj < S,
                                             s[i, j] * scale - slope * LOG2E * (qi - kj),
                                             -T.infinity(T.float32))
                T.reduce_max(s, m_tile, dim=1)
                for i in T.Parallel(block_M):
                    m_tile[i] = T.max(m[i], m_tile[i])
                    alpha[i] = T.exp2(m[i] - m_tile[i])
                    m[i] = m_tile[i]
                for i, j in T.Parallel(block_M, block_N):
                    s[i, j] = T.exp2(s[i, j] - m[i])
                T.reduce_sum(s, l_tile, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * alpha[i] + l_tile[i]
                T.copy(s, p)
                for i, j in T.Parallel(block_M, D):
                    o[i, j] = o[i, j] * alpha[i]
                T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], v_s)
                T.gemm(p, v_s, o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, D):
                o[i, j] = o[i, j] / l[i]
            T.copy(o, o_s)
            T.copy(o_s, O[bz, bx * block_M:(bx + 1) * block_M, by, :])

    return main


# ---- head dim 160, block_N 32, three stages, left / right window with the loop cut -------------
@tilelang.jit(out_idx=[3])
def fa_d160_window_lr(B=1, H=2, S=300, D=160, left=100, right=20, block_M=64, block_N=32,
                      num_stages=3, threads=128):
    """Banded attention (BHSD, fp16): query i sees keys i - left .. i + right.  The key loop
    runs over the tiles the block's band touches (T.Pipelined(lo, hi)); a tile wholly left of
    some row's band leaves that row's max at -inf, taken as 0 (check_inf) so no inf - inf."""
    scale = (1.0 / D) ** 0.5 * LOG2E
    shape = [B, H, S, D]

    @T.prim_func
    def main(Q: T.Tensor(shape, T.float16), K: T.Tensor(shape, T.float16), V: T.Tensor(shape, T.float16),
             O: T.Tensor(shape, T.float16)):
        with T.Kernel(T.ceildiv(S, block_M), H, B, threads=threads) as (bx, by, bz):
            Q_shared = T.alloc_shared([block_M, D], T.float16)
            K_shared = T.alloc_shared([block_N, D], T.float16)
            V_shared = T.alloc_shared([block_N, D], T.float16)
            acc_s = T.alloc_fragment([block_M, block_N], T.float32)
            acc_s_cast = T.alloc_fragment([block_M, block_N], T.float16)
            acc_o = T.alloc_fragment([block_M, D], T.float32)
            m = T.alloc_fragment([block_M], T.float32)
            m_prev = T.alloc_fragment([block_M], T.float32)
            m_safe = T.alloc_fragment([block_M], T.float32)
            r_scale = T.alloc_fragment([block_M], T.float32)
            r_sum = T.alloc_fragment([block_M], T.float32)
            l = T.alloc_fragment([block_M], T.float32)

            T.copy(Q[bz, by, bx * block_M:(bx + 1) * block_M, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(T.float32))
            lo = T.max(0, (bx * block_M - left) // block_N)
            hi = T.min(T.ceildiv(S, block_N), T.ceildiv((bx + 1) * block_M + right, block_N))
            for k in T.Pipelined(lo, hi, num_stages=num_stages):
                T.copy(K[bz, by, k * block_N:(k + 1) * block_N, :], K_shared)
                for i, j in T.Parallel(block_M, block_N):
                    qi = bx * block_M + i
                    kj = k * block_N + j
                    acc_s[i, j] = T.if_then_else(kj >= qi - left and kj <= qi + right and kj < S,
                                                 0, -T.infinity(T.float32))
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    m_safe[i] = T.if_then_else(m[i] == -T.infinity(T.float32), 0, m[i])
                    r_scale[i] = T.exp2(m_prev[i] * scale - m_safe[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m_safe[i] * scale)
                T.reduce_sum(acc_s, r_sum, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * r_scale[i] + r_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, D):
                    acc_o[i, j] *= r_scale[i]
                T.copy(V[bz, by, k * block_N:(k + 1) * block_N, :], V_shared)
                T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, D):
                acc_o[i, j] /= l[i]
            T.copy(acc_o, O[bz, by, bx * block_M:(bx + 1) * block_M, :])

    return main


# ---- QK 192 / V 128, 8 warps over 128 rows, causal with Sk > Sq aligned bottom-right -----------
@tilelang.jit(out_idx=[3, 4])
def fa_dqk192_dv128_bottom_right(B=1, H=2, Sq=300, Sk=337, Dqk=192, Dv=128, block_M=128,
                                 block_N=64, num_stages=2, threads=256):
    """Prefill with a cached prefix (BSHD, bf16): Sq new queries over Sk = prefix + Sq keys,
    query i at absolute position i + Sk - Sq (causal aligned bottom-right).  QK 192 wide, V 128
    wide; the loop stops at the last block row's diagonal; LSE out in base 2."""
    past = Sk - Sq
    scale = (1.0 / Dqk) ** 0.5 * LOG2E

    @T.prim_func
    def main(Q: T.Tensor([B, Sq, H, Dqk], T.bfloat16), K: T.Tensor([B, Sk, H, Dqk], T.bfloat16),
             V: T.Tensor([B, Sk, H, Dv], T.bfloat16), O: T.Tensor([B, Sq, H, Dv], T.bfloat16),
             LSE: T.Tensor([B, H, Sq], T.float32)):
        with T.Kernel(T.ceildiv(Sq, block_M), H, B, threads=threads) as (bx, by, bz):
            Q_shared = T.alloc_shared([block_M, Dqk], T.bfloat16)
            K_shared = T.alloc_shared([block_N, Dqk], T.bfloat16)
            V_shared = T.alloc_shared([block_N, Dv], T.bfloat16)
            O_shared = T.alloc_shared([block_M, Dv], T.bfloat16)
            acc_s = T.alloc_fragment([block_M, block_N], T.float32)
            acc_s_cast = T.alloc_fragment([block_M, block_N], T.bfloat16)
            acc_o = T.alloc_fragment([block_M, Dv], T.float32)
            scores_max = T.alloc_fragment([block_M], T.float32)
            scores_max_prev = T.alloc_fragment([block_M], T.float32)
            scores_scale = T.alloc_fragment([block_M], T.float32)
            scores_sum = T.alloc_fragment([block_M], T.float32)
            logsum = T.alloc_fragment([block_M], T.float32)

            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(T.float32))
            loop_range = T.min(T.ceildiv(Sk, block_N), T.ceildiv((bx + 1) * block_M + past, block_N))
            for k in T.Pipelined(loop_range, num_stages=num_stages):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], K_shared)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(bx * block_M + i + past >= k * block_N + j,
                                                 0, -T.infinity(T.float32))
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(scores_max, scores_max_prev)
                T.fill(scores_max, -T.infinity(T.float32))
                T.reduce_max(acc_s, scores_max, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    scores_max[i] = T.max(scores_max[i], scores_max_prev[i])
                for i in T.Parallel(block_M):
                    scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
                T.reduce_sum(acc_s, scores_sum, dim=1)
                for i in T.Parallel(block_M):
                    logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, Dv):
                    acc_o[i, j] *= scores_scale[i]
                T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], V_shared)
                T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, Dv):
                acc_o[i, j] /= logsum[i]
            for i in T.Parallel(block_M):
                logsum[i] = T.log2(logsum[i]) + scores_max[i] * scale
            T.copy(acc_o, O_shared)
            T.copy(O_shared, O[bz, bx * block_M:(bx + 1) * block_M, by, :])
            T.copy(logsum, LSE[bz, by, bx * block_M:(bx + 1) * block_M])

    return main


# ---- head dim 256, cross attention over T.dynamic query and key lengths ------------------------
@tilelang.jit(out_idx=[3])
def fa_d256_cross_dynamic(B=1, H=2, D=256, block_M=64, block_N=32, num_stages=1, threads=128):
    """Encoder-decoder cross attention (BSHD, fp16): Sq decoder queries over Sk encoder keys,
    both T.dynamic; no mask but the key tail.  Head dim 256 with 32-key tiles."""
    Sq = T.dynamic("Sq")
    Sk = T.dynamic("Sk")
    scale = (1.0 / D) ** 0.5 * LOG2E

    @T.prim_func
    def main(Q: T.Tensor([B, Sq, H, D], T.float16), K: T.Tensor([B, Sk, H, D], T.float16),
             V: T.Tensor([B, Sk, H, D], T.float16), O: T.Tensor([B, Sq, H, D], T.float16)):
        with T.Kernel(T.ceildiv(Sq, block_M), H, B, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, D], T.float16)
            k_s = T.alloc_shared([block_N, D], T.float16)
            v_s = T.alloc_shared([block_N, D], T.float16)
            s = T.alloc_fragment([block_M, block_N], T.float32)
            p = T.alloc_fragment([block_M, block_N], T.float16)
            o = T.alloc_fragment([block_M, D], T.float32)
            m = T.alloc_fragment([block_M], T.float32)
            m_prev = T.alloc_fragment([block_M], T.float32)
            alpha = T.alloc_fragment([block_M], T.float32)
            l = T.alloc_fragment([block_M], T.float32)
            l_tile = T.alloc_fragment([block_M], T.float32)

            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], q_s)
            T.fill(o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(T.float32))
            for k in T.Pipelined(T.ceildiv(Sk, block_N), num_stages=num_stages):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], k_s)
                T.clear(s)
                T.gemm(q_s, k_s, s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_M, block_N):
                    s[i, j] = T.if_then_else(k * block_N + j < Sk, s[i, j], -T.infinity(T.float32))
                T.copy(m, m_prev)
                T.reduce_max(s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    alpha[i] = T.exp2((m_prev[i] - m[i]) * scale)
                for i, j in T.Parallel(block_M, block_N):
                    s[i, j] = T.exp2((s[i, j] - m[i]) * scale)
                T.reduce_sum(s, l_tile, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * alpha[i] + l_tile[i]
                T.copy(s, p)
                for i, j in T.Parallel(block_M, D):
                    o[i, j] *= alpha[i]
                T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], v_s)
                T.gemm(p, v_s, o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, D):
                o[i, j] /= l[i]
            T.copy(o, O[bz, bx * block_M:(bx + 1) * block_M, by, :])

    return main


# ---- head dim 96, block_N 80: varlen GQA over cu_seqlens, causal --------------------------------
@tilelang.jit(out_idx=[4])
def fa_varlen_gqa_causal_d96(batch=3, heads=4, kv_heads=2, max_seqlen=300, D=96, block_M=64,
                             block_N=80, num_stages=2, threads=128):
    """Packed variable-length GQA (THD, fp16): sequence b is rows cu_seqlens[b] ..
    cu_seqlens[b + 1] of Q / K / V, T.dynamic total rows; causal within the sequence.  Tiles
    are copied from the sequence's own start (rows past its end masked, never stored); a
    block past the sequence's end does nothing."""
    total = T.dynamic("total")
    groups = heads // kv_heads
    scale = (1.0 / D) ** 0.5 * LOG2E

    @T.prim_func
    def main(Q: T.Tensor([total, heads, D], T.float16), K: T.Tensor([total, kv_heads, D], T.float16),
             V: T.Tensor([total, kv_heads, D], T.float16), cu_seqlens: T.Tensor([batch + 1], T.int32),
             O: T.Tensor([total, heads, D], T.float16)):
        with T.Kernel(T.ceildiv(max_seqlen, block_M), heads, batch, threads=threads) as (bx, by, bz):
            Q_shared = T.alloc_shared([block_M, D], T.float16)
            K_shared = T.alloc_shared([block_N, D], T.float16)
            V_shared = T.alloc_shared([block_N, D], T.float16)
            O_shared = T.alloc_shared([block_M, D], T.float16)
            acc_s = T.alloc_fragment([block_M, block_N], T.float32)
            acc_s_cast = T.alloc_fragment([block_M, block_N], T.float16)
            acc_o = T.alloc_fragment([block_M, D], T.float32)
            scores_max = T.alloc_fragment([block_M], T.float32)
            scores_max_prev = T.alloc_fragment([block_M], T.float32)
            scores_scale = T.alloc_fragment([block_M], T.float32)
            scores_sum = T.alloc_fragment([block_M], T.float32)
            logsum = T.alloc_fragment([block_M], T.float32)

            start = cu_seqlens[bz]
            seqlen = cu_seqlens[bz + 1] - start
            kv_head = by // groups
            if bx * block_M < seqlen:
                for i, d in T.Parallel(block_M, D):
                    Q_shared[i, d] = T.if_then_else(bx * block_M + i < seqlen,
                                                    Q[start + bx * block_M + i, by, d], 0)
                T.fill(acc_o, 0)
                T.fill(logsum, 0)
                T.fill(scores_max, -T.infinity(T.float32))
                loop_range = T.min(T.ceildiv(seqlen, block_N), T.ceildiv((bx + 1) * block_M, block_N))
                for k in T.Pipelined(loop_range, num_stages=num_stages):
                    for j, d in T.Parallel(block_N, D):
                        K_shared[j, d] = T.if_then_else(k * block_N + j < seqlen,
                                                        K[start + k * block_N + j, kv_head, d], 0)
                    for i, j in T.Parallel(block_M, block_N):
                        qi = bx * block_M + i
                        kj = k * block_N + j
                        acc_s[i, j] = T.if_then_else(kj <= qi and kj < seqlen, 0, -T.infinity(T.float32))
                    T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                    T.copy(scores_max, scores_max_prev)
                    T.reduce_max(acc_s, scores_max, dim=1, clear=False)
                    for i in T.Parallel(block_M):
                        scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
                    T.reduce_sum(acc_s, scores_sum, dim=1)
                    for i in T.Parallel(block_M):
                        logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
                    T.copy(acc_s, acc_s_cast)
                    for i, d in T.Parallel(block_M, D):
                        acc_o[i, d] *= scores_scale[i]
                    for j, d in T.Parallel(block_N, D):
                        V_shared[j, d] = T.if_then_else(k * block_N + j < seqlen,
                                                        V[start + k * block_N + j, kv_head, d], 0)
                    T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)
                for i, d in T.Parallel(block_M, D):
                    acc_o[i, d] /= logsum[i]
                T.copy(acc_o, O_shared)
                for i, d in T.Parallel(block_M, D):
                    if bx * block_M + i < seqlen:
                        O[start + bx * block_M + i, by, d] = O_shared[i, d]

    return main


# ---- head dim 128, 8 warps, block_N 176: learned sinks per head, LSE in base 2 -----------------
@tilelang.jit(out_idx=[4, 5])
def fa_sinks_bn176_lse2(B=1, H=4, S=300, D=128, block_M=128, block_N=176, num_stages=1, threads=256):
    """gpt-oss attention (BHSD, bf16, causal): each head's sink logit joins the softmax
    denominator only (exp(sink - max) added to the row sum at the end).  176-key tiles; the
    LSE out in base 2 including the sink."""
    scale = (1.0 / D) ** 0.5 * LOG2E
    shape = [B, H, S, D]

    @T.prim_func
    def main(Q: T.Tensor(shape, T.bfloat16), K: T.Tensor(shape, T.bfloat16), V: T.Tensor(shape, T.bfloat16),
             Sinks: T.Tensor([H], T.float32), O: T.Tensor(shape, T.bfloat16),
             LSE: T.Tensor([B, H, S], T.float32)):
        with T.Kernel(T.ceildiv(S, block_M), H, B, threads=threads) as (bx, by, bz):
            Q_shared = T.alloc_shared([block_M, D], T.bfloat16)
            K_shared = T.alloc_shared([block_N, D], T.bfloat16)
            V_shared = T.alloc_shared([block_N, D], T.bfloat16)
            acc_s = T.alloc_fragment([block_M, block_N], T.float32)
            acc_s_cast = T.alloc_fragment([block_M, block_N], T.bfloat16)
            acc_o = T.alloc_fragment([block_M, D], T.float32)
            scores_max = T.alloc_fragment([block_M], T.float32)
            scores_max_prev = T.alloc_fragment([block_M], T.float32)
            scores_scale = T.alloc_fragment([block_M], T.float32)
            scores_sum = T.alloc_fragment([block_M], T.float32)
            logsum = T.alloc_fragment([block_M], T.float32)
            sinks = T.alloc_fragment([block_M], T.float32)

            T.copy(Q[bz, by, bx * block_M:(bx + 1) * block_M, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(T.float32))
            for i in T.Parallel(block_M):
                sinks[i] = Sinks[by]
            end = T.min(T.ceildiv(S, block_N), T.ceildiv((bx + 1) * block_M, block_N))
            for k in T.Pipelined(end, num_stages=num_stages):
                T.copy(K[bz, by, k * block_N:(k + 1) * block_N, :], K_shared)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(bx * block_M + i >= k * block_N + j, 0, -T.infinity(T.float32))
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(scores_max, scores_max_prev)
                T.fill(scores_max, -T.infinity(T.float32))
                T.reduce_max(acc_s, scores_max, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    scores_max[i] = T.max(scores_max[i], scores_max_prev[i])
                    scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
                T.reduce_sum(acc_s, scores_sum, dim=1)
                for i in T.Parallel(block_M):
                    logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, D):
                    acc_o[i, j] *= scores_scale[i]
                T.copy(V[bz, by, k * block_N:(k + 1) * block_N, :], V_shared)
                T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i in T.Parallel(block_M):
                logsum[i] += T.exp2(sinks[i] * LOG2E - scores_max[i] * scale)
            for i, j in T.Parallel(block_M, D):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, O[bz, by, bx * block_M:(bx + 1) * block_M, :])
            for i in T.Parallel(block_M):
                if bx * block_M + i < S:
                    LSE[bz, by, bx * block_M + i] = T.log2(logsum[i]) + scores_max[i] * scale

    return main


# ---- head dim 80, block_N 80: relative-position bias table added to the scores ------------------
@tilelang.jit(out_idx=[4])
def fa_relpos_bias_d80(B=1, H=2, S=300, D=80, block_M=64, block_N=80, num_stages=2, threads=128):
    """Bidirectional attention (BSHD, fp16) with a learned relative-position bias: score =
    q.k / sqrt(D) + Bias[h, j - i + S - 1] from a (H, 2S - 1) float32 table, gathered per
    score element; the softmax in base e (T.exp)."""
    sm_scale = (1.0 / D) ** 0.5
    shape = [B, S, H, D]

    @T.prim_func
    def main(Q: T.Tensor(shape, T.float16), K: T.Tensor(shape, T.float16), V: T.Tensor(shape, T.float16),
             Bias: T.Tensor([H, 2 * S - 1], T.float32), O: T.Tensor(shape, T.float16)):
        with T.Kernel(T.ceildiv(S, block_M), H, B, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, D], T.float16)
            k_s = T.alloc_shared([block_N, D], T.float16)
            v_s = T.alloc_shared([block_N, D], T.float16)
            s = T.alloc_fragment([block_M, block_N], T.float32)
            p = T.alloc_fragment([block_M, block_N], T.float16)
            o = T.alloc_fragment([block_M, D], T.float32)
            m = T.alloc_fragment([block_M], T.float32)
            m_prev = T.alloc_fragment([block_M], T.float32)
            alpha = T.alloc_fragment([block_M], T.float32)
            l = T.alloc_fragment([block_M], T.float32)
            l_tile = T.alloc_fragment([block_M], T.float32)

            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], q_s)
            T.fill(o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(T.float32))
            for k in T.Pipelined(T.ceildiv(S, block_N), num_stages=num_stages):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], k_s)
                T.clear(s)
                T.gemm(q_s, k_s, s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_M, block_N):
                    qi = bx * block_M + i
                    kj = k * block_N + j
                    s[i, j] = T.if_then_else(
                        kj < S and qi < S,
                        s[i, j] * sm_scale + Bias[by, kj - qi + S - 1], -T.infinity(T.float32))
                T.copy(m, m_prev)
                T.reduce_max(s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    m[i] = T.if_then_else(m[i] == -T.infinity(T.float32), 0, m[i])
                    alpha[i] = T.exp(m_prev[i] - m[i])
                for i, j in T.Parallel(block_M, block_N):
                    s[i, j] = T.exp(s[i, j] - m[i])
                T.reduce_sum(s, l_tile, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * alpha[i] + l_tile[i]
                T.copy(s, p)
                for i, j in T.Parallel(block_M, D):
                    o[i, j] *= alpha[i]
                T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], v_s)
                T.gemm(p, v_s, o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, D):
                o[i, j] /= T.max(l[i], 1e-30)
            T.copy(o, O[bz, bx * block_M:(bx + 1) * block_M, by, :])

    return main


# ---- fp8 e4m3 Q / K / V with per-head descale factors, head dim 128 -----------------------------
@tilelang.jit(out_idx=[6])
def fa_fp8_e4m3_descale(B=1, H=2, S=300, D=128, block_M=64, block_N=64, num_stages=2, threads=128):
    """FP8 attention (BHSD Q / K, e4m3): S = (Q K^T) * q_descale[h] * k_descale[h] with fp32
    accumulation; P (in [0, 1]) cast to e4m3 and staged in shared memory for the second GEMM,
    against V stored transposed (B, H, D, S) so both fp8 operands are K-major; the output
    times v_descale[h], divided by the row sum, stored in bf16."""
    scale = (1.0 / D) ** 0.5 * LOG2E
    shape = [B, H, S, D]
    fp8 = T.float8_e4m3fn

    @T.prim_func
    def main(Q: T.Tensor(shape, fp8), K: T.Tensor(shape, fp8), Vt: T.Tensor([B, H, D, S], fp8),
             q_descale: T.Tensor([H], T.float32), k_descale: T.Tensor([H], T.float32),
             v_descale: T.Tensor([H], T.float32), O: T.Tensor(shape, T.bfloat16)):
        with T.Kernel(T.ceildiv(S, block_M), H, B, threads=threads) as (bx, by, bz):
            Q_shared = T.alloc_shared([block_M, D], fp8)
            K_shared = T.alloc_shared([block_N, D], fp8)
            Vt_shared = T.alloc_shared([D, block_N], fp8)
            P_shared = T.alloc_shared([block_M, block_N], fp8)
            acc_s = T.alloc_fragment([block_M, block_N], T.float32)
            acc_s_cast = T.alloc_fragment([block_M, block_N], fp8)
            acc_o = T.alloc_fragment([block_M, D], T.float32)
            scores_max = T.alloc_fragment([block_M], T.float32)
            scores_max_prev = T.alloc_fragment([block_M], T.float32)
            scores_scale = T.alloc_fragment([block_M], T.float32)
            scores_sum = T.alloc_fragment([block_M], T.float32)
            logsum = T.alloc_fragment([block_M], T.float32)
            qk_scale = T.alloc_var(T.float32)

            qk_scale = q_descale[by] * k_descale[by] * scale
            T.copy(Q[bz, by, bx * block_M:(bx + 1) * block_M, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(T.float32))
            for k in T.Pipelined(T.ceildiv(S, block_N), num_stages=num_stages):
                T.copy(K[bz, by, k * block_N:(k + 1) * block_N, :], K_shared)
                T.clear(acc_s)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(k * block_N + j < S, acc_s[i, j] * qk_scale,
                                                 -T.infinity(T.float32))
                T.copy(scores_max, scores_max_prev)
                T.reduce_max(acc_s, scores_max, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    scores_scale[i] = T.exp2(scores_max_prev[i] - scores_max[i])
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] - scores_max[i])
                T.reduce_sum(acc_s, scores_sum, dim=1)
                for i in T.Parallel(block_M):
                    logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, D):
                    acc_o[i, j] *= scores_scale[i]
                T.copy(acc_s_cast, P_shared)
                T.copy(Vt[bz, by, :, k * block_N:(k + 1) * block_N], Vt_shared)
                T.gemm(P_shared, Vt_shared, acc_o, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, D):
                acc_o[i, j] = acc_o[i, j] * v_descale[by] / logsum[i]
            T.copy(acc_o, O[bz, by, bx * block_M:(bx + 1) * block_M, :])

    return main


# ---- head dim 192, GQA, 4 warps, block_N 48, three stages, LSE in base e -----------------------
@tilelang.jit(out_idx=[3, 4])
def fa_gqa_d192_bn48_lse_e(B=2, H=6, KVH=2, S=300, D=192, block_M=64, block_N=48,
                           num_stages=3, threads=128, causal=True):
    """Causal GQA (BSHD, bf16) at head dim 192 with 48-key tiles under a three-stage
    pipeline; the LSE (natural log) out per (batch, head, row) as FlashAttention-2 stores it
    for the backward: LSE = max * scale * ln 2 + log(sum), with base-2 exponents inside."""
    groups = H // KVH
    scale = (1.0 / D) ** 0.5 * LOG2E

    @T.prim_func
    def main(Q: T.Tensor([B, S, H, D], T.bfloat16), K: T.Tensor([B, S, KVH, D], T.bfloat16),
             V: T.Tensor([B, S, KVH, D], T.bfloat16), O: T.Tensor([B, S, H, D], T.bfloat16),
             LSE: T.Tensor([B, H, S], T.float32)):
        with T.Kernel(T.ceildiv(S, block_M), H, B, threads=threads) as (bx, by, bz):
            Q_shared = T.alloc_shared([block_M, D], T.bfloat16)
            K_shared = T.alloc_shared([block_N, D], T.bfloat16)
            V_shared = T.alloc_shared([block_N, D], T.bfloat16)
            acc_s = T.alloc_fragment([block_M, block_N], T.float32)
            acc_s_cast = T.alloc_fragment([block_M, block_N], T.bfloat16)
            acc_o = T.alloc_fragment([block_M, D], T.float32)
            scores_max = T.alloc_fragment([block_M], T.float32)
            scores_max_prev = T.alloc_fragment([block_M], T.float32)
            scores_scale = T.alloc_fragment([block_M], T.float32)
            scores_sum = T.alloc_fragment([block_M], T.float32)
            logsum = T.alloc_fragment([block_M], T.float32)

            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(T.float32))
            loop_range = (T.min(T.ceildiv(S, block_N), T.ceildiv((bx + 1) * block_M, block_N))
                          if causal else T.ceildiv(S, block_N))
            for k in T.Pipelined(loop_range, num_stages=num_stages):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, by // groups, :], K_shared)
                if causal:
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.if_then_else(bx * block_M + i >= k * block_N + j, 0,
                                                     -T.infinity(T.float32))
                else:
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.if_then_else(k * block_N + j >= S, -T.infinity(T.float32), 0)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(scores_max, scores_max_prev)
                T.reduce_max(acc_s, scores_max, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
                T.reduce_sum(acc_s, scores_sum, dim=1)
                for i in T.Parallel(block_M):
                    logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, D):
                    acc_o[i, j] *= scores_scale[i]
                T.copy(V[bz, k * block_N:(k + 1) * block_N, by // groups, :], V_shared)
                T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, D):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, O[bz, bx * block_M:(bx + 1) * block_M, by, :])
            for i in T.Parallel(block_M):
                logsum[i] = scores_max[i] * scale * LN2 + T.log(logsum[i])
            T.copy(logsum, LSE[bz, by, bx * block_M:(bx + 1) * block_M])

    return main


# ---- gpt-oss sinks with a window, as TileLang's sink example writes it; num_stages=0 -----------
@tilelang.jit(out_idx=[3])
def fa_sink_window_stage0(batch=1, heads=2, seq_q=200, seq_kv=263, dim=128, window_size=128,
                          block_M=128, block_N=128, num_stages=0, threads=256, dtype=T.float16):
    """gpt-oss attention as TileLang's sink example writes it (BHSD, fp16): a fp16 sinks
    fragment filled per row, a sliding window of window_size keys ending at the query's
    absolute position (seq_kv - seq_q + i), the key loop from the window's first tile to
    the diagonal, T.Pipelined(num_stages=0) (no pipelining), swizzled Q / O tiles by
    T.annotate_layout, T.use_swizzle(10), the mask built before the GEMM accumulates."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    past_len = seq_kv - seq_q
    accum = T.float32

    @T.prim_func
    def main(Q: T.Tensor([batch, heads, seq_q, dim], dtype), K: T.Tensor([batch, heads, seq_kv, dim], dtype),
             V: T.Tensor([batch, heads, seq_kv, dim], dtype), Output: T.Tensor([batch, heads, seq_q, dim], dtype),
             Sinks: T.Tensor([heads], dtype)):
        with T.Kernel(T.ceildiv(seq_q, block_M), heads, batch, threads=threads) as (bx, by, bz):
            Q_shared = T.alloc_shared([block_M, dim], dtype)
            K_shared = T.alloc_shared([block_N, dim], dtype)
            V_shared = T.alloc_shared([block_N, dim], dtype)
            O_shared = T.alloc_shared([block_M, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            scores_max = T.alloc_fragment([block_M], accum)
            scores_max_prev = T.alloc_fragment([block_M], accum)
            scores_scale = T.alloc_fragment([block_M], accum)
            scores_sum = T.alloc_fragment([block_M], accum)
            logsum = T.alloc_fragment([block_M], accum)
            sinks = T.alloc_fragment([block_M], dtype)
            T.annotate_layout({Q_shared: make_swizzled_layout(Q_shared), O_shared: make_swizzled_layout(O_shared)})
            T.use_swizzle(10)
            T.copy(Q[bz, by, bx * block_M:(bx + 1) * block_M, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(accum))
            for i in T.Parallel(block_M):
                sinks[i] = Sinks[by]
            end = T.min(T.ceildiv(seq_kv, block_N), T.ceildiv((bx + 1) * block_M + past_len, block_N))
            start = T.max(0, (bx * block_M + past_len - window_size) // block_N)
            for k in T.Pipelined(start, end, num_stages=num_stages):
                T.copy(K[bz, by, k * block_N:(k + 1) * block_N, :], K_shared)
                for i, j in T.Parallel(block_M, block_N):
                    q_idx = bx * block_M + i + past_len
                    k_idx = k * block_N + j
                    acc_s[i, j] = T.if_then_else(q_idx >= k_idx and q_idx < k_idx + window_size, 0,
                                                 -T.infinity(acc_s.dtype))
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(scores_max, scores_max_prev)
                T.fill(scores_max, -T.infinity(accum))
                T.reduce_max(acc_s, scores_max, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    scores_max[i] = T.max(scores_max[i], scores_max_prev[i])
                for i in T.Parallel(block_M):
                    scores_max[i] = T.if_then_else(scores_max[i] == -T.infinity(accum), 0, scores_max[i])
                    scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
                T.reduce_sum(acc_s, scores_sum, dim=1)
                for i in T.Parallel(block_M):
                    logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= scores_scale[i]
                T.copy(V[bz, by, k * block_N:(k + 1) * block_N, :], V_shared)
                T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i in T.Parallel(block_M):
                logsum[i] += T.exp2(sinks[i] * LOG2E - scores_max[i] * scale)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, O_shared)
            T.copy(O_shared, Output[bz, by, bx * block_M:(bx + 1) * block_M, :])

    return main


# ---- varlen with separate query / key offsets, tiles copied from each sequence's start --------
@tilelang.jit(out_idx=[5, 6])
def fa_varlen_qk_slices_d112(batch=3, heads=4, kv_heads=2, max_seqlen_q=300, dim=112, block_M=64, block_N=64,
                      num_stages=1, threads=128, causal=True):
    """Varlen GQA with separate query and key offsets (THD, bf16, T.dynamic totals): tiles
    copied by T.copy from each sequence's own start (rows past its end read the next
    sequence, masked by -1e9, the way TileLang's varlen example does), causal aligned
    bottom-right (k_len - q_len keys of prefix), head dim 112; O and a base-2 LSE (heads,
    total_q) stored row by row for the sequence's rows only."""
    total_q = T.dynamic("total_q")
    total_k = T.dynamic("total_k")
    groups = heads // kv_heads
    scale = (1.0 / dim) ** 0.5 * LOG2E

    @T.prim_func
    def main(Q: T.Tensor([total_q, heads, dim], T.bfloat16), K: T.Tensor([total_k, kv_heads, dim], T.bfloat16),
             V: T.Tensor([total_k, kv_heads, dim], T.bfloat16), cu_seqlens_q: T.Tensor([batch + 1], T.int32),
             cu_seqlens_k: T.Tensor([batch + 1], T.int32),
             O: T.Tensor([total_q, heads, dim], T.bfloat16), LSE: T.Tensor([heads, total_q], T.float32)):
        with T.Kernel(T.ceildiv(max_seqlen_q, block_M), heads, batch, threads=threads) as (bx, by, bz):
            Q_shared = T.alloc_shared([block_M, dim], T.bfloat16)
            K_shared = T.alloc_shared([block_N, dim], T.bfloat16)
            V_shared = T.alloc_shared([block_N, dim], T.bfloat16)
            O_shared = T.alloc_shared([block_M, dim], T.bfloat16)
            acc_s = T.alloc_fragment([block_M, block_N], T.float32)
            acc_s_cast = T.alloc_fragment([block_M, block_N], T.bfloat16)
            acc_o = T.alloc_fragment([block_M, dim], T.float32)
            scores_max = T.alloc_fragment([block_M], T.float32)
            scores_max_prev = T.alloc_fragment([block_M], T.float32)
            scores_scale = T.alloc_fragment([block_M], T.float32)
            scores_sum = T.alloc_fragment([block_M], T.float32)
            logsum = T.alloc_fragment([block_M], T.float32)
            q_start = cu_seqlens_q[bz]
            k_start = cu_seqlens_k[bz]
            q_len = cu_seqlens_q[bz + 1] - q_start
            k_len = cu_seqlens_k[bz + 1] - k_start
            offset = k_len - q_len
            T.copy(Q[q_start + bx * block_M:q_start + (bx + 1) * block_M, by, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(T.float32))
            loop_range = (T.min(T.ceildiv(k_len, block_N), T.ceildiv((bx + 1) * block_M + offset, block_N))
                          if causal else T.ceildiv(k_len, block_N))
            for k in T.Pipelined(loop_range, num_stages=num_stages):
                T.copy(K[k_start + k * block_N:k_start + (k + 1) * block_N, by // groups, :], K_shared)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(
                        (bx * block_M + i + offset < k * block_N + j) or (bx * block_M + i >= q_len)
                        or (k * block_N + j >= k_len), -1e9, 0)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(scores_max, scores_max_prev)
                T.fill(scores_max, -T.infinity(T.float32))
                T.reduce_max(acc_s, scores_max, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    scores_max[i] = T.max(scores_max[i], scores_max_prev[i])
                for i in T.Parallel(block_M):
                    scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
                T.reduce_sum(acc_s, scores_sum, dim=1)
                for i in T.Parallel(block_M):
                    logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= scores_scale[i]
                T.copy(V[k_start + k * block_N:k_start + (k + 1) * block_N, by // groups, :], V_shared)
                T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= logsum[i]
            for i in T.Parallel(block_M):
                logsum[i] = T.log2(logsum[i]) + scores_max[i] * scale
            T.copy(acc_o, O_shared)
            for i, d in T.Parallel(block_M, dim):
                if bx * block_M + i < q_len:
                    O[q_start + bx * block_M + i, by, d] = O_shared[i, d]
            for i in T.Parallel(block_M):
                if bx * block_M + i < q_len:
                    LSE[by, q_start + bx * block_M + i] = logsum[i]

    return main


# ---- Q pre-scaled in registers: the first GEMM's A operand from a fragment ---------------------
@tilelang.jit(out_idx=[3])
def fa_q_in_registers_d96(B=1, H=2, S=300, D=96, block_M=64, block_N=32, num_stages=2, threads=128):
    """Q loaded once into a register fragment and pre-scaled (fp16) so the first GEMM reads
    A from registers; T.reduce_max / T.reduce_sum with TileLang's default dim (-1);
    32-key tiles (BHSD, fp16, non-causal)."""
    scale = (1.0 / D) ** 0.5 * LOG2E

    @T.prim_func
    def main(Q: T.Tensor([B, H, S, D], T.float16), K: T.Tensor([B, H, S, D], T.float16),
             V: T.Tensor([B, H, S, D], T.float16), O: T.Tensor([B, H, S, D], T.float16)):
        with T.Kernel(T.ceildiv(S, block_M), H, B, threads=threads) as (bx, by, bz):
            Q_shared = T.alloc_shared([block_M, D], T.float16)
            Q_frag = T.alloc_fragment([block_M, D], T.float16)
            K_shared = T.alloc_shared([block_N, D], T.float16)
            V_shared = T.alloc_shared([block_N, D], T.float16)
            acc_s = T.alloc_fragment([block_M, block_N], T.float32)
            acc_s_cast = T.alloc_fragment([block_M, block_N], T.float16)
            acc_o = T.alloc_fragment([block_M, D], T.float32)
            m = T.alloc_fragment([block_M], T.float32)
            m_prev = T.alloc_fragment([block_M], T.float32)
            r = T.alloc_fragment([block_M], T.float32)
            l = T.alloc_fragment([block_M], T.float32)
            ls = T.alloc_fragment([block_M], T.float32)
            T.copy(Q[bz, by, bx * block_M:(bx + 1) * block_M, :], Q_shared)
            T.copy(Q_shared, Q_frag)
            for i, j in T.Parallel(block_M, D):
                Q_frag[i, j] = Q_frag[i, j] * T.float16(scale)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(T.float32))
            for k in T.Pipelined(T.ceildiv(S, block_N), num_stages=num_stages):
                T.copy(K[bz, by, k * block_N:(k + 1) * block_N, :], K_shared)
                T.gemm(Q_frag, K_shared, acc_s, transpose_B=True, clear_accum=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(k * block_N + j < S, acc_s[i, j], -T.infinity(T.float32))
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, clear=False)
                for i in T.Parallel(block_M):
                    r[i] = T.exp2(m_prev[i] - m[i])
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] - m[i])
                T.reduce_sum(acc_s, ls)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * r[i] + ls[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, D):
                    acc_o[i, j] *= r[i]
                T.copy(V[bz, by, k * block_N:(k + 1) * block_N, :], V_shared)
                T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, D):
                acc_o[i, j] /= l[i]
            T.copy(acc_o, O[bz, by, bx * block_M:(bx + 1) * block_M, :])

    return main


# ---- the sink as the softmax's start, a bias tile copied into registers, symmetric ALiBi --------
@tilelang.jit(out_idx=[5, 6])
def fa_sink_start_bias_frag_d96(B=1, H=4, S=300, D=96, block_M=64, block_N=64, num_stages=2, threads=128):
    """The sink logit as the online softmax's starting point (running max = sink, running
    sum = 1) instead of a term added at the end; a full (H, S, S) float32 bias tile copied
    by T.copy straight into a register fragment beside the scores, plus a symmetric ALiBi
    term slope_h * |i - j| with slope_h = T.pow(2, -8 (h + 1) / H); the base-2 LSE stored by
    a point-start T.copy of the row fragment (BHSD, fp16)."""
    scale = (1.0 / D) ** 0.5 * LOG2E
    shape = [B, H, S, D]

    @T.prim_func
    def main(Q: T.Tensor(shape, T.float16), K: T.Tensor(shape, T.float16), V: T.Tensor(shape, T.float16),
             Sinks: T.Tensor([H], T.float32), Bias: T.Tensor([H, S, S], T.float32),
             O: T.Tensor(shape, T.float16), LSE: T.Tensor([B, H, S], T.float32)):
        with T.Kernel(T.ceildiv(S, block_M), H, B, threads=threads) as (bx, by, bz):
            Q_shared = T.alloc_shared([block_M, D], T.float16)
            K_shared = T.alloc_shared([block_N, D], T.float16)
            V_shared = T.alloc_shared([block_N, D], T.float16)
            acc_s = T.alloc_fragment([block_M, block_N], T.float32)
            bias = T.alloc_fragment([block_M, block_N], T.float32)
            acc_s_cast = T.alloc_fragment([block_M, block_N], T.float16)
            acc_o = T.alloc_fragment([block_M, D], T.float32)
            m = T.alloc_fragment([block_M], T.float32)
            m_prev = T.alloc_fragment([block_M], T.float32)
            r = T.alloc_fragment([block_M], T.float32)
            l = T.alloc_fragment([block_M], T.float32)
            ls = T.alloc_fragment([block_M], T.float32)
            slope = T.alloc_var(T.float32)
            slope = T.pow(2.0, -8.0 * (by + 1) / H)
            T.copy(Q[bz, by, bx * block_M:(bx + 1) * block_M, :], Q_shared)
            T.fill(acc_o, 0)
            for i in T.Parallel(block_M):
                m[i] = Sinks[by] * LOG2E
                l[i] = 1.0
            for k in T.Pipelined(T.ceildiv(S, block_N), num_stages=num_stages):
                T.copy(K[bz, by, k * block_N:(k + 1) * block_N, :], K_shared)
                T.copy(Bias[by, bx * block_M:(bx + 1) * block_M, k * block_N:(k + 1) * block_N], bias)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, clear_accum=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_M, block_N):
                    dist = T.abs(bx * block_M + i - k * block_N - j)
                    acc_s[i, j] = T.if_then_else(k * block_N + j < S,
                                                 acc_s[i, j] * scale + (bias[i, j] - slope * dist) * LOG2E,
                                                 -T.infinity(T.float32))
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    r[i] = T.exp2(m_prev[i] - m[i])
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] - m[i])
                T.reduce_sum(acc_s, ls, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * r[i] + ls[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, D):
                    acc_o[i, j] *= r[i]
                T.copy(V[bz, by, k * block_N:(k + 1) * block_N, :], V_shared)
                T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, D):
                acc_o[i, j] /= l[i]
            T.copy(acc_o, O[bz, by, bx * block_M:(bx + 1) * block_M, :])
            for i in T.Parallel(block_M):
                l[i] = T.log2(l[i]) + m[i]
            T.copy(l, LSE[bz, by, bx * block_M])

    return main
