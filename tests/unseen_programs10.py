"""A tenth set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang), aimed at domains the earlier rounds leave out: a whole FlashAttention backward
in BHSD layout (the Delta = rowsum(dO * O) preprocess, the main kernel with dK / dV from
GEMMs on transposed score tiles and dQ accumulated by float32 ``T.atomic_add``, the dQ
postprocess), a GQA backward whose dK / dV are tile atomics across the query heads of a
group, variable-length attention over ``cu_seqlens`` (tile origins and loop bounds read
from a tensor), sliding-window attention with logit soft-capping, attention with
per-head sink logits, ALiBi biases, Mamba-2's chunk state and chunk scan, retention,
block-sparse GEMM driven by a mask tensor, split-K GEMM with ``T.use_swizzle`` and a K
tail, a global abs-max by ``T.atomic_max``, per-token fp8 quantization, and TileLang forms
in unusual combinations.  ``tests/test_unseen_programs10.py`` builds each to a cubin on
the CPU and, on a GPU, compares it with torch written to TileLang's meaning.

Each factory returns a ``@T.prim_func`` (or a list of them, launched in order)."""

import tilecute.language as T

LOG2E = 1.44269504


# ---- FlashAttention backward -------------------------------------------------------------
def attn_bwd_preprocess(B=1, H=2, S=256, D=64, bm=64):
    """Delta[b, h, s] = sum_d O[b, h, s, d] * dO[b, h, s, d] (BHSD, bf16 in, fp32 out)."""

    @T.prim_func
    def prep(O: T.Tensor((B, H, S, D), T.bfloat16), dO: T.Tensor((B, H, S, D), T.bfloat16),
             Delta: T.Tensor((B, H, S), T.float32)):
        with T.Kernel(T.ceildiv(S, bm), H, B, threads=128) as (bx, by, bz):
            o = T.alloc_fragment((bm, D), T.float32)
            do = T.alloc_fragment((bm, D), T.float32)
            d = T.alloc_fragment((bm,), T.float32)
            T.copy(O[bz, by, bx * bm:(bx + 1) * bm, :], o)
            T.copy(dO[bz, by, bx * bm:(bx + 1) * bm, :], do)
            for i, j in T.Parallel(bm, D):
                o[i, j] = o[i, j] * do[i, j]
            T.reduce_sum(o, d, dim=1)
            T.copy(d, Delta[bz, by, bx * bm:(bx + 1) * bm])
    return prep


def attn_bwd_main(B=1, H=2, S=256, D=64, bm=64, bn=64, causal=True, threads=256):
    """One block per (key tile, head, batch): K and V in shared; for each query tile
    P^T = exp2(K Q^T * scale - lse), dP^T = V dO^T, dV += P^T dO, dS^T = P^T (dP^T - Delta),
    dK += dS^T Q, and dQ = dS K (``transpose_A`` on the shared dS^T) added to a float32 dQ
    with per-element ``T.atomic_add``."""
    sm_scale = (1.0 / D) ** 0.5
    scale = sm_scale * LOG2E
    shape = (B, H, S, D)

    @T.prim_func
    def bwd(Q: T.Tensor(shape, T.bfloat16), K: T.Tensor(shape, T.bfloat16),
            V: T.Tensor(shape, T.bfloat16), dO: T.Tensor(shape, T.bfloat16),
            lse: T.Tensor((B, H, S), T.float32), Delta: T.Tensor((B, H, S), T.float32),
            dQ: T.Tensor(shape, T.float32), dK: T.Tensor(shape, T.bfloat16),
            dV: T.Tensor(shape, T.bfloat16)):
        with T.Kernel(T.ceildiv(S, bm), H, B, threads=threads) as (bx, by, bz):
            k_s = T.alloc_shared((bm, D), T.bfloat16)
            v_s = T.alloc_shared((bm, D), T.bfloat16)
            q_s = T.alloc_shared((bn, D), T.bfloat16)
            do_s = T.alloc_shared((bn, D), T.bfloat16)
            lse_s = T.alloc_shared((bn,), T.float32)
            delta_s = T.alloc_shared((bn,), T.float32)
            ds_s = T.alloc_shared((bm, bn), T.bfloat16)
            pT = T.alloc_fragment((bm, bn), T.float32)
            dpT = T.alloc_fragment((bm, bn), T.float32)
            pT_cast = T.alloc_fragment((bm, bn), T.bfloat16)
            dsT_cast = T.alloc_fragment((bm, bn), T.bfloat16)
            dv = T.alloc_fragment((bm, D), T.float32)
            dk = T.alloc_fragment((bm, D), T.float32)
            dq = T.alloc_fragment((bn, D), T.float32)
            dv_s = T.alloc_shared((bm, D), T.bfloat16)
            dk_s = T.alloc_shared((bm, D), T.bfloat16)
            T.copy(K[bz, by, bx * bm:(bx + 1) * bm, :], k_s)
            T.copy(V[bz, by, bx * bm:(bx + 1) * bm, :], v_s)
            T.clear(dv)
            T.clear(dk)
            lo = T.floordiv(bx * bm, bn) if causal else 0
            for k in T.Pipelined(lo, T.ceildiv(S, bn), num_stages=2):
                T.copy(Q[bz, by, k * bn:(k + 1) * bn, :], q_s)
                T.clear(pT)
                T.gemm(k_s, q_s, pT, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(lse[bz, by, k * bn:(k + 1) * bn], lse_s)
                for i, j in T.Parallel(bm, bn):
                    pT[i, j] = T.exp2(pT[i, j] * scale - lse_s[j])
                if causal:
                    for i, j in T.Parallel(bm, bn):
                        pT[i, j] = T.if_then_else(bx * bm + i <= k * bn + j, pT[i, j], 0)
                T.copy(dO[bz, by, k * bn:(k + 1) * bn, :], do_s)
                T.clear(dpT)
                T.gemm(v_s, do_s, dpT, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(pT, pT_cast)
                T.gemm(pT_cast, do_s, dv, policy=T.GemmWarpPolicy.FullRow)
                T.copy(Delta[bz, by, k * bn:(k + 1) * bn], delta_s)
                for i, j in T.Parallel(bm, bn):
                    dsT_cast[i, j] = pT[i, j] * (dpT[i, j] - delta_s[j]) * sm_scale
                T.gemm(dsT_cast, q_s, dk, policy=T.GemmWarpPolicy.FullRow)
                T.copy(dsT_cast, ds_s)
                T.clear(dq)
                T.gemm(ds_s, k_s, dq, transpose_A=True)
                for i, j in T.Parallel(bn, D):
                    T.atomic_add(dQ[bz, by, k * bn + i, j], dq[i, j])
            T.copy(dv, dv_s)
            T.copy(dk, dk_s)
            T.copy(dv_s, dV[bz, by, bx * bm:(bx + 1) * bm, :])
            T.copy(dk_s, dK[bz, by, bx * bm:(bx + 1) * bm, :])
    return bwd


def attn_bwd_postprocess(B=1, H=2, S=256, D=64, bm=64):
    """dQ float32 -> bf16 through a fragment."""

    @T.prim_func
    def post(dQ: T.Tensor((B, H, S, D), T.float32), dQ_out: T.Tensor((B, H, S, D), T.bfloat16)):
        with T.Kernel(T.ceildiv(S, bm), H, B, threads=128) as (bx, by, bz):
            f = T.alloc_fragment((bm, D), T.float32)
            T.copy(dQ[bz, by, bx * bm:(bx + 1) * bm, :], f)
            T.copy(f, dQ_out[bz, by, bx * bm:(bx + 1) * bm, :])
    return post


def attn_bwd_all():
    return [attn_bwd_preprocess(), attn_bwd_main(), attn_bwd_postprocess()]


def gqa_bwd_tile_atomics(B=1, HQ=4, HK=2, S=128, D=64, bm=64, bn=32):
    """GQA backward (BSHD, fp16, not causal): block per (key tile, query head, batch); the
    query heads of a group add their dK / dV into float32 tensors with tile
    ``T.atomic_add``s of the accumulators, dQ by tile atomics of a (bn, D) fragment."""
    groups = HQ // HK
    sm_scale = (1.0 / D) ** 0.5
    scale = sm_scale * LOG2E

    @T.prim_func
    def gqa_bwd(Q: T.Tensor((B, S, HQ, D), T.float16), K: T.Tensor((B, S, HK, D), T.float16),
                V: T.Tensor((B, S, HK, D), T.float16), dO: T.Tensor((B, S, HQ, D), T.float16),
                lse: T.Tensor((B, HQ, S), T.float32), Delta: T.Tensor((B, HQ, S), T.float32),
                dQ: T.Tensor((B, S, HQ, D), T.float32), dK: T.Tensor((B, S, HK, D), T.float32),
                dV: T.Tensor((B, S, HK, D), T.float32)):
        with T.Kernel(T.ceildiv(S, bm), HQ, B, threads=128) as (bx, by, bz):
            hk = by // groups
            k_s = T.alloc_shared((bm, D), T.float16)
            v_s = T.alloc_shared((bm, D), T.float16)
            q_s = T.alloc_shared((bn, D), T.float16)
            do_s = T.alloc_shared((bn, D), T.float16)
            ds_s = T.alloc_shared((bm, bn), T.float16)
            pT = T.alloc_fragment((bm, bn), T.float32)
            dpT = T.alloc_fragment((bm, bn), T.float32)
            p16 = T.alloc_fragment((bm, bn), T.float16)
            ds16 = T.alloc_fragment((bm, bn), T.float16)
            dv = T.alloc_fragment((bm, D), T.float32)
            dk = T.alloc_fragment((bm, D), T.float32)
            dq = T.alloc_fragment((bn, D), T.float32)
            T.copy(K[bz, bx * bm:(bx + 1) * bm, hk, :], k_s)
            T.copy(V[bz, bx * bm:(bx + 1) * bm, hk, :], v_s)
            T.clear(dv)
            T.clear(dk)
            for k in T.Pipelined(T.ceildiv(S, bn), num_stages=2):
                T.copy(Q[bz, k * bn:(k + 1) * bn, by, :], q_s)
                T.copy(dO[bz, k * bn:(k + 1) * bn, by, :], do_s)
                T.clear(pT)
                T.clear(dpT)
                T.gemm(k_s, q_s, pT, transpose_B=True)
                T.gemm(v_s, do_s, dpT, transpose_B=True)
                for i, j in T.Parallel(bm, bn):
                    pT[i, j] = T.exp2(pT[i, j] * scale - lse[bz, by, k * bn + j])
                T.copy(pT, p16)
                T.gemm(p16, do_s, dv)
                for i, j in T.Parallel(bm, bn):
                    ds16[i, j] = pT[i, j] * (dpT[i, j] - Delta[bz, by, k * bn + j]) * sm_scale
                T.gemm(ds16, q_s, dk)
                T.copy(ds16, ds_s)
                T.clear(dq)
                T.gemm(ds_s, k_s, dq, transpose_A=True)
                T.atomic_add(dQ[bz, k * bn:(k + 1) * bn, by, :], dq)
            T.atomic_add(dV[bz, bx * bm:(bx + 1) * bm, hk, :], dv)
            T.atomic_add(dK[bz, bx * bm:(bx + 1) * bm, hk, :], dk)
    return gqa_bwd


# ---- attention forward variants ----------------------------------------------------------
def varlen_attn_fwd(batch=3, H=2, max_len=192, D=64, bm=64, bn=64, causal=True):
    """Variable-length attention: sequences packed along dim 0 of (total, H, D) tensors,
    ``cu_seqlens`` giving each one's start; ``total`` is a ``T.dynamic`` dim.  Query tile
    origins and the key loop's bound come from the tensor; loads past a sequence's end
    are zero by ``T.if_then_else``, stores guarded by an ``if``."""
    scale = (1.0 / D) ** 0.5 * LOG2E
    total = T.dynamic("total")

    @T.prim_func
    def varlen(Q: T.Tensor((total, H, D), T.float16), K: T.Tensor((total, H, D), T.float16),
               V: T.Tensor((total, H, D), T.float16), cu_seqlens: T.Tensor((batch + 1,), T.int32),
               O: T.Tensor((total, H, D), T.float16)):
        with T.Kernel(T.ceildiv(max_len, bm), H, batch, threads=128) as (bx, by, bz):
            q_s = T.alloc_shared((bm, D), T.float16)
            k_s = T.alloc_shared((bn, D), T.float16)
            v_s = T.alloc_shared((bn, D), T.float16)
            o_s = T.alloc_shared((bm, D), T.float16)
            acc_s = T.alloc_fragment((bm, bn), T.float32)
            acc_p = T.alloc_fragment((bm, bn), T.float16)
            acc_o = T.alloc_fragment((bm, D), T.float32)
            m = T.alloc_fragment((bm,), T.float32)
            m_prev = T.alloc_fragment((bm,), T.float32)
            rescale = T.alloc_fragment((bm,), T.float32)
            rowsum = T.alloc_fragment((bm,), T.float32)
            l = T.alloc_fragment((bm,), T.float32)
            start = cu_seqlens[bz]
            seqlen = cu_seqlens[bz + 1] - start
            for i, d in T.Parallel(bm, D):
                q_s[i, d] = T.if_then_else(bx * bm + i < seqlen, Q[start + bx * bm + i, by, d], 0)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(T.float32))
            hi = T.min(T.ceildiv(seqlen, bn), T.ceildiv((bx + 1) * bm, bn)) if causal \
                else T.ceildiv(seqlen, bn)
            for k in T.Pipelined(hi, num_stages=2):
                for j, d in T.Parallel(bn, D):
                    k_s[j, d] = T.if_then_else(k * bn + j < seqlen, K[start + k * bn + j, by, d], 0)
                for i, j in T.Parallel(bm, bn):
                    if causal:
                        acc_s[i, j] = T.if_then_else((k * bn + j < seqlen) & (bx * bm + i >= k * bn + j),
                                                     0, -T.infinity(T.float32))
                    else:
                        acc_s[i, j] = T.if_then_else(k * bn + j < seqlen, 0, -T.infinity(T.float32))
                T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(bm):
                    rescale[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(bm, bn):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                T.reduce_sum(acc_s, rowsum, dim=1)
                for i in T.Parallel(bm):
                    l[i] = l[i] * rescale[i] + rowsum[i]
                for i, d in T.Parallel(bm, D):
                    acc_o[i, d] *= rescale[i]
                T.copy(acc_s, acc_p)
                for j, d in T.Parallel(bn, D):
                    v_s[j, d] = T.if_then_else(k * bn + j < seqlen, V[start + k * bn + j, by, d], 0)
                T.gemm(acc_p, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, d in T.Parallel(bm, D):
                acc_o[i, d] /= l[i]
            T.copy(acc_o, o_s)
            for i, d in T.Parallel(bm, D):
                if bx * bm + i < seqlen:
                    O[start + bx * bm + i, by, d] = o_s[i, d]
    return varlen


def sliding_window_softcap(B=1, H=2, S=256, D=64, bm=64, bn=64, window=96, softcap=30.0):
    """Causal sliding-window attention (key j attends query i when i - window < j <= i)
    with Gemma-style logit soft-capping s = cap * tanh(s * sm_scale / cap); the key loop
    runs from the window's first tile (``T.max`` in the bound) to the diagonal."""
    sm_scale = (1.0 / D) ** 0.5

    @T.prim_func
    def swa(Q: T.Tensor((B, H, S, D), T.bfloat16), K: T.Tensor((B, H, S, D), T.bfloat16),
            V: T.Tensor((B, H, S, D), T.bfloat16), O: T.Tensor((B, H, S, D), T.bfloat16)):
        with T.Kernel(T.ceildiv(S, bm), H, B, threads=128) as (bx, by, bz):
            q_s = T.alloc_shared((bm, D), T.bfloat16)
            k_s = T.alloc_shared((bn, D), T.bfloat16)
            v_s = T.alloc_shared((bn, D), T.bfloat16)
            acc_s = T.alloc_fragment((bm, bn), T.float32)
            acc_p = T.alloc_fragment((bm, bn), T.bfloat16)
            acc_o = T.alloc_fragment((bm, D), T.float32)
            m = T.alloc_fragment((bm,), T.float32)
            m_prev = T.alloc_fragment((bm,), T.float32)
            rescale = T.alloc_fragment((bm,), T.float32)
            m_base = T.alloc_fragment((bm,), T.float32)
            rowsum = T.alloc_fragment((bm,), T.float32)
            l = T.alloc_fragment((bm,), T.float32)
            T.copy(Q[bz, by, bx * bm:(bx + 1) * bm, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(T.float32))
            lo = T.max(bx * bm - window + 1, 0) // bn
            hi = T.ceildiv((bx + 1) * bm, bn)
            for k in T.Pipelined(lo, hi, num_stages=2):
                T.copy(K[bz, by, k * bn:(k + 1) * bn, :], k_s)
                T.clear(acc_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True)
                for i, j in T.Parallel(bm, bn):
                    acc_s[i, j] = softcap * T.tanh(acc_s[i, j] * (sm_scale / softcap))
                for i, j in T.Parallel(bm, bn):
                    q_pos = bx * bm + i
                    k_pos = k * bn + j
                    acc_s[i, j] = T.if_then_else((k_pos <= q_pos) & (k_pos > q_pos - window),
                                                 acc_s[i, j], -T.infinity(T.float32))
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                # a row the window has not reached yet has seen only -inf: its exponents
                # take base 0 (-inf - -inf would be NaN)
                for i in T.Parallel(bm):
                    m_base[i] = T.if_then_else(m[i] == -T.infinity(T.float32), 0.0, m[i])
                    rescale[i] = T.exp2((m_prev[i] - m_base[i]) * LOG2E)
                for i, j in T.Parallel(bm, bn):
                    acc_s[i, j] = T.exp2((acc_s[i, j] - m_base[i]) * LOG2E)
                T.reduce_sum(acc_s, rowsum, dim=1)
                for i in T.Parallel(bm):
                    l[i] = l[i] * rescale[i] + rowsum[i]
                for i, d in T.Parallel(bm, D):
                    acc_o[i, d] *= rescale[i]
                T.copy(acc_s, acc_p)
                T.copy(V[bz, by, k * bn:(k + 1) * bn, :], v_s)
                T.gemm(acc_p, v_s, acc_o)
            for i, d in T.Parallel(bm, D):
                acc_o[i, d] /= l[i]
            T.copy(acc_o, O[bz, by, bx * bm:(bx + 1) * bm, :])
    return swa


def attn_with_sinks(B=1, H=4, S=256, D=64, bm=64, bn=64):
    """Attention (not causal) whose softmax denominator also holds one learned sink logit
    per head: O = sum_j exp(s_ij - m) v_j / (sum_j exp(s_ij - m) + exp(sink_h - m)); the
    output also returns lse including the sink (two outputs)."""
    sm_scale = (1.0 / D) ** 0.5
    scale = sm_scale * LOG2E

    @T.prim_func
    def sinks(Q: T.Tensor((B, H, S, D), T.float16), K: T.Tensor((B, H, S, D), T.float16),
              V: T.Tensor((B, H, S, D), T.float16), Sinks: T.Tensor((H,), T.float32),
              O: T.Tensor((B, H, S, D), T.float16), LSE: T.Tensor((B, H, S), T.float32)):
        with T.Kernel(T.ceildiv(S, bm), H, B, threads=128) as (bx, by, bz):
            q_s = T.alloc_shared((bm, D), T.float16)
            k_s = T.alloc_shared((bn, D), T.float16)
            v_s = T.alloc_shared((bn, D), T.float16)
            o_s = T.alloc_shared((bm, D), T.float16)
            acc_s = T.alloc_fragment((bm, bn), T.float32)
            acc_p = T.alloc_fragment((bm, bn), T.float16)
            acc_o = T.alloc_fragment((bm, D), T.float32)
            m = T.alloc_fragment((bm,), T.float32)
            m_prev = T.alloc_fragment((bm,), T.float32)
            rescale = T.alloc_fragment((bm,), T.float32)
            rowsum = T.alloc_fragment((bm,), T.float32)
            l = T.alloc_fragment((bm,), T.float32)
            T.copy(Q[bz, by, bx * bm:(bx + 1) * bm, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(T.float32))
            for k in T.Pipelined(T.ceildiv(S, bn), num_stages=2):
                T.copy(K[bz, by, k * bn:(k + 1) * bn, :], k_s)
                T.clear(acc_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(bm):
                    rescale[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(bm, bn):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                T.reduce_sum(acc_s, rowsum, dim=1)
                for i in T.Parallel(bm):
                    l[i] = l[i] * rescale[i] + rowsum[i]
                for i, d in T.Parallel(bm, D):
                    acc_o[i, d] *= rescale[i]
                T.copy(acc_s, acc_p)
                T.copy(V[bz, by, k * bn:(k + 1) * bn, :], v_s)
                T.gemm(acc_p, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i in T.Parallel(bm):
                l[i] += T.exp2(Sinks[by] * LOG2E - m[i] * scale)
            for i, d in T.Parallel(bm, D):
                acc_o[i, d] /= l[i]
            for i in T.Parallel(bm):
                l[i] = (T.log2(l[i]) + m[i] * scale) / LOG2E
            T.copy(acc_o, o_s)
            T.copy(o_s, O[bz, by, bx * bm:(bx + 1) * bm, :])
            T.copy(l, LSE[bz, by, bx * bm:(bx + 1) * bm])
    return sinks


def alibi_attn(B=1, H=4, S=192, D=64, bm=64, bn=64):
    """Causal attention with ALiBi: s_ij += slope_h * (j - i), slopes a float32 tensor
    read per head into a scalar; ragged S (192 % 128 != 0 along no dim, but the key loop
    ends at the diagonal)."""
    sm_scale = (1.0 / D) ** 0.5

    @T.prim_func
    def alibi(Q: T.Tensor((B, S, H, D), T.float16), K: T.Tensor((B, S, H, D), T.float16),
              V: T.Tensor((B, S, H, D), T.float16), slopes: T.Tensor((H,), T.float32),
              O: T.Tensor((B, S, H, D), T.float16)):
        with T.Kernel(T.ceildiv(S, bm), H, B, threads=128) as (bx, by, bz):
            q_s = T.alloc_shared((bm, D), T.float16)
            k_s = T.alloc_shared((bn, D), T.float16)
            v_s = T.alloc_shared((bn, D), T.float16)
            acc_s = T.alloc_fragment((bm, bn), T.float32)
            acc_p = T.alloc_fragment((bm, bn), T.float16)
            acc_o = T.alloc_fragment((bm, D), T.float32)
            m = T.alloc_fragment((bm,), T.float32)
            m_prev = T.alloc_fragment((bm,), T.float32)
            rowsum = T.alloc_fragment((bm,), T.float32)
            l = T.alloc_fragment((bm,), T.float32)
            slope = T.alloc_var(T.float32)
            slope = slopes[by] * LOG2E
            T.copy(Q[bz, bx * bm:(bx + 1) * bm, by, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(T.float32))
            for k in T.Pipelined(T.ceildiv((bx + 1) * bm, bn), num_stages=2):
                T.copy(K[bz, k * bn:(k + 1) * bn, by, :], k_s)
                T.clear(acc_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(bm, bn):
                    acc_s[i, j] = T.if_then_else(
                        bx * bm + i >= k * bn + j,
                        acc_s[i, j] * (sm_scale * LOG2E) + slope * T.Cast(T.float32, k * bn + j - bx * bm - i),
                        -T.infinity(T.float32))
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i, j in T.Parallel(bm, bn):
                    acc_s[i, j] = T.exp2(acc_s[i, j] - m[i])
                T.reduce_sum(acc_s, rowsum, dim=1)
                for i in T.Parallel(bm):
                    l[i] = l[i] * T.exp2(m_prev[i] - m[i]) + rowsum[i]
                for i, d in T.Parallel(bm, D):
                    acc_o[i, d] *= T.exp2(m_prev[i] - m[i])
                T.copy(acc_s, acc_p)
                T.copy(V[bz, k * bn:(k + 1) * bn, by, :], v_s)
                T.gemm(acc_p, v_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, d in T.Parallel(bm, D):
                acc_o[i, d] /= l[i]
            T.copy(acc_o, O[bz, bx * bm:(bx + 1) * bm, by, :])
    return alibi


# ---- state-space / linear attention ------------------------------------------------------
def mamba2_chunk_state(B=1, C=2, L=128, H=4, G=2, P=64, N=64, bk=64):
    """Mamba-2's chunk state: states[b, c, h, p, n] = sum_l x[b, cL + l, h, p] *
    Bm[b, cL + l, g(h), n] * exp(dA_cs[b, h, c, L - 1] - dA_cs[b, h, c, l]) * dt[b, h, c, l]
    (x^T @ (Bm scaled per row): ``transpose_A`` of a shared (bk, P) tile); G groups of
    heads share Bm."""
    per_group = H // G
    S = C * L

    @T.prim_func
    def chunk_state(x: T.Tensor((B, S, H, P), T.bfloat16), Bm: T.Tensor((B, S, G, N), T.bfloat16),
                    dt: T.Tensor((B, H, C, L), T.float32), dA_cs: T.Tensor((B, H, C, L), T.float32),
                    states: T.Tensor((B, C, H, P, N), T.float32)):
        with T.Kernel(H, C, B, threads=128) as (bh, bc, bb):
            x_s = T.alloc_shared((bk, P), T.bfloat16)
            b_s = T.alloc_shared((bk, N), T.bfloat16)
            w_s = T.alloc_shared((bk,), T.float32)
            acc = T.alloc_fragment((P, N), T.float32)
            last = T.alloc_var(T.float32)
            last = dA_cs[bb, bh, bc, L - 1]
            T.clear(acc)
            for ko in T.Pipelined(L // bk, num_stages=2):
                T.copy(x[bb, bc * L + ko * bk:bc * L + (ko + 1) * bk, bh, :], x_s)
                for l in T.Parallel(bk):
                    w_s[l] = T.exp(last - dA_cs[bb, bh, bc, ko * bk + l]) * dt[bb, bh, bc, ko * bk + l]
                for l, n in T.Parallel(bk, N):
                    b_s[l, n] = T.Cast(T.bfloat16, T.Cast(T.float32, Bm[bb, bc * L + ko * bk + l, bh // per_group, n]) * w_s[l])
                T.gemm(x_s, b_s, acc, transpose_A=True)
            T.copy(acc, states[bb, bc, bh, :, :])
    return chunk_state


def mamba2_chunk_scan(B=1, C=2, L=64, H=2, G=1, P=64, N=64, bm=64, bk=32):
    """Mamba-2's chunk scan: out[b, cL + i, h, p] = exp(dA_cs[i]) * (Cm[i] . prev[b, c, h, p])
    + sum_{j <= i} (Cm[i] . Bm[j]) exp(dA_cs[i] - dA_cs[j]) dt[j] x[j, p] + Dskip[h] x[i, p]:
    a ``transpose_B`` GEMM of C against the states, per-row rescale, then a causal loop over
    key tiles whose bound is the diagonal, each scores tile scaled and masked in a
    T.Parallel nest and cast into the A operand of the second GEMM."""
    per_group = H // G
    S = C * L

    @T.prim_func
    def chunk_scan(x: T.Tensor((B, S, H, P), T.float16), Cm: T.Tensor((B, S, G, N), T.float16),
                   Bm: T.Tensor((B, S, G, N), T.float16), dt: T.Tensor((B, H, C, L), T.float32),
                   dA_cs: T.Tensor((B, H, C, L), T.float32),
                   prev: T.Tensor((B, C, H, P, N), T.float16), Dskip: T.Tensor((H,), T.float32),
                   out: T.Tensor((B, S, H, P), T.float32)):
        with T.Kernel(L // bm, B * H, C, threads=128) as (bm_i, bbh, bc):
            bb = bbh // H
            bh = bbh % H
            g = bh // per_group
            c_s = T.alloc_shared((bm, N), T.float16)
            st_s = T.alloc_shared((P, N), T.float16)
            b_s = T.alloc_shared((bk, N), T.float16)
            x_s = T.alloc_shared((bk, P), T.float16)
            xr_s = T.alloc_shared((bm, P), T.float16)
            acc_o = T.alloc_fragment((bm, P), T.float32)
            cb = T.alloc_fragment((bm, bk), T.float32)
            cb16 = T.alloc_fragment((bm, bk), T.float16)
            dA_row = T.alloc_fragment((bm,), T.float32)
            row0 = bc * L + bm_i * bm
            T.copy(Cm[bb, row0:row0 + bm, g, :], c_s)
            T.copy(prev[bb, bc, bh, :, :], st_s)
            T.clear(acc_o)
            T.gemm(c_s, st_s, acc_o, transpose_B=True)
            for i in T.Parallel(bm):
                dA_row[i] = dA_cs[bb, bh, bc, bm_i * bm + i]
            for i, p in T.Parallel(bm, P):
                acc_o[i, p] *= T.exp(dA_row[i])
            for kj in T.Pipelined(T.ceildiv((bm_i + 1) * bm, bk), num_stages=2):
                T.copy(Bm[bb, bc * L + kj * bk:bc * L + (kj + 1) * bk, g, :], b_s)
                T.clear(cb)
                T.gemm(c_s, b_s, cb, transpose_B=True)
                for i, j in T.Parallel(bm, bk):
                    cb[i, j] = T.if_then_else(
                        bm_i * bm + i >= kj * bk + j,
                        cb[i, j] * T.exp(dA_row[i] - dA_cs[bb, bh, bc, kj * bk + j]) * dt[bb, bh, bc, kj * bk + j],
                        0.0)
                T.copy(cb, cb16)
                T.copy(x[bb, bc * L + kj * bk:bc * L + (kj + 1) * bk, bh, :], x_s)
                T.gemm(cb16, x_s, acc_o)
            T.copy(x[bb, row0:row0 + bm, bh, :], xr_s)
            for i, p in T.Parallel(bm, P):
                acc_o[i, p] += Dskip[bh] * xr_s[i, p]
            T.copy(acc_o, out[bb, row0:row0 + bm, bh, :])
    return chunk_scan


def retention_parallel(B=1, H=4, S=256, D=64, DV=64, bm=64, bn=64):
    """Parallel retention: O = ((Q K^T) * Dmask) V with Dmask[i, j] = gamma_h^(i - j) for
    j <= i (0 above), gamma_h = 1 - 2^(-5 - h), and each row divided by max(1, |sum_j
    (QK^T * Dmask)_ij|) (RetNet's normalisation); decays as exp2 of a per-head log2."""

    @T.prim_func
    def retention(Q: T.Tensor((B, H, S, D), T.float16), K: T.Tensor((B, H, S, D), T.float16),
                  V: T.Tensor((B, H, S, DV), T.float16), O: T.Tensor((B, H, S, DV), T.float32)):
        with T.Kernel(S // bm, H, B, threads=128) as (bx, by, bz):
            q_s = T.alloc_shared((bm, D), T.float16)
            k_s = T.alloc_shared((bn, D), T.float16)
            v_s = T.alloc_shared((bn, DV), T.float16)
            s = T.alloc_fragment((bm, bn), T.float32)
            s16 = T.alloc_fragment((bm, bn), T.float16)
            acc = T.alloc_fragment((bm, DV), T.float32)
            den = T.alloc_fragment((bm,), T.float32)
            part = T.alloc_fragment((bm,), T.float32)
            log2g = T.log2(1.0 - T.exp2(-5.0 - T.Cast(T.float32, by)))
            T.copy(Q[bz, by, bx * bm:(bx + 1) * bm, :], q_s)
            T.clear(acc)
            T.clear(den)
            for k in T.Pipelined(bx + 1 if bm == bn else T.ceildiv((bx + 1) * bm, bn), num_stages=2):
                T.copy(K[bz, by, k * bn:(k + 1) * bn, :], k_s)
                T.copy(V[bz, by, k * bn:(k + 1) * bn, :], v_s)
                T.clear(s)
                T.gemm(q_s, k_s, s, transpose_B=True)
                for i, j in T.Parallel(bm, bn):
                    diff = bx * bm + i - (k * bn + j)
                    s[i, j] = T.if_then_else(diff >= 0, s[i, j] * T.exp2(log2g * T.Cast(T.float32, diff)), 0.0)
                T.reduce_sum(s, part, dim=1)
                for i in T.Parallel(bm):
                    den[i] += part[i]
                T.copy(s, s16)
                T.gemm(s16, v_s, acc)
            for i, d in T.Parallel(bm, DV):
                acc[i, d] /= T.max(T.abs(den[i]), 1.0)
            T.copy(acc, O[bz, by, bx * bm:(bx + 1) * bm, :])
    return retention


# ---- GEMM variants ------------------------------------------------------------------------
def blocksparse_gemm_mask(M=256, N=256, K=512, bm=128, bn=128, bk=32, stages=3):
    """C = A @ B with only the (m, n, k) tiles whose BlockMask[m, n, k] is true taking part:
    an ``if`` on a bool tensor inside ``T.Pipelined`` around both copies and the GEMM."""

    @T.prim_func
    def bsgemm(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
               BlockMask: T.Tensor((M // bm, N // bn, K // bk), T.bool),
               C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            a_s = T.alloc_shared((bm, bk), T.float16)
            b_s = T.alloc_shared((bk, bn), T.float16)
            c_s = T.alloc_shared((bm, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=stages):
                if BlockMask[by, bx, k]:
                    T.copy(A[by * bm, k * bk], a_s)
                    T.copy(B[k * bk, bx * bn], b_s)
                    T.gemm(a_s, b_s, acc)
            T.copy(acc, c_s)
            T.copy(c_s, C[by * bm, bx * bn])
    return bsgemm


def splitk_swizzle_tail(M=256, N=384, K=1000, bm=128, bn=128, bk=64, splits=3):
    """Split-K with a K tail: each grid z slice takes ``per`` K tiles (the last fewer, its
    last tile past K read as zeros by T.copy's bounds checks), blocks rastered by
    ``T.use_swizzle``; float32 C accumulated by a tile ``T.atomic_add``."""
    k_tiles = (K + bk - 1) // bk
    per = (k_tiles + splits - 1) // splits

    @T.prim_func
    def splitk(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
               C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), splits, threads=128) as (bx, by, bz):
            a_s = T.alloc_shared((bm, bk), T.float16)
            b_s = T.alloc_shared((bk, bn), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            T.use_swizzle(panel_size=2)
            T.clear(acc)
            for ko in T.Pipelined(T.min(per, k_tiles - bz * per), num_stages=3):
                T.copy(A[by * bm, (bz * per + ko) * bk], a_s)
                T.copy(B[(bz * per + ko) * bk, bx * bn], b_s)
                T.gemm(a_s, b_s, acc)
            T.atomic_add(C[by * bm, bx * bn], acc)
    return splitk


# ---- reductions and quantization ----------------------------------------------------------
def global_absmax_atomic(M=512, N=384, bm=64, bn=128):
    """amax = max |X| over a 2-D tensor: each block reduces its tile (abs-max along dim 1,
    then the row maxima along dim 0 into a 1-element fragment) and one ``T.atomic_max``
    per block combines them in a float32 scalar tensor."""

    @T.prim_func
    def amax(X: T.Tensor((M, N), T.bfloat16), Amax: T.Tensor((1,), T.float32)):
        with T.Kernel(N // bn, M // bm, threads=256) as (bx, by):
            x = T.alloc_fragment((bm, bn), T.float32)
            rows = T.alloc_fragment((bm,), T.float32)
            tot = T.alloc_fragment((1,), T.float32)
            T.copy(X[by * bm:(by + 1) * bm, bx * bn:(bx + 1) * bn], x)
            T.reduce_absmax(x, rows, dim=1)
            T.reduce_max(rows, tot, dim=0)
            T.atomic_max(Amax[0], tot[0])
    return amax


def per_token_fp8_quant(M=256, N=1024, bm=32, bn=256):
    """Per-token fp8 e4m3 quantization: for each row amax over all N (a first pass over
    column tiles, ``reduce_absmax(clear=False)``), scale = max(amax, 1e-4) / 448, then
    Xq = clamp(x / scale, -448, 448) cast to fp8 in a second pass; scales written out."""

    @T.prim_func
    def quant(X: T.Tensor((M, N), T.bfloat16), Xq: T.Tensor((M, N), T.float8_e4m3),
              Scale: T.Tensor((M,), T.float32)):
        with T.Kernel(M // bm, threads=128) as bx:
            x = T.alloc_fragment((bm, bn), T.float32)
            q = T.alloc_fragment((bm, bn), T.float8_e4m3)
            amax = T.alloc_fragment((bm,), T.float32)
            T.fill(amax, 0)
            for n in T.serial(N // bn):
                T.copy(X[bx * bm, n * bn], x)
                T.reduce_absmax(x, amax, dim=1, clear=False)
            for i in T.Parallel(bm):
                amax[i] = T.max(amax[i], 1e-4) / 448.0
            for n in T.Pipelined(N // bn, num_stages=2):
                T.copy(X[bx * bm, n * bn], x)
                for i, j in T.Parallel(bm, bn):
                    q[i, j] = T.clamp(x[i, j] / amax[i], -448.0, 448.0)
                T.copy(q, Xq[bx * bm, n * bn])
            T.copy(amax, Scale[bx * bm])
    return quant


# ---- TileLang forms in unusual combinations ----------------------------------------------
def atomic_vector_scatter(M=256, N=128, E=64, bm=32):
    """Rows of X added into Out[idx[row]] (an embedding-gradient scatter) two and four
    elements at a time: ``T.atomic_addx2`` on float16 pairs and ``T.atomic_addx4`` on
    float32 quads, each from a ``T.Parallel`` over the row's pairs / quads."""

    @T.prim_func
    def scatter(X: T.Tensor((M, N), T.float16), Y: T.Tensor((M, N), T.float32),
                idx: T.Tensor((M,), T.int32), Out16: T.Tensor((E, N), T.float16),
                Out32: T.Tensor((E, N), T.float32)):
        with T.Kernel(M // bm, threads=128) as bx:
            for i, j in T.Parallel(bm, N // 2):
                T.atomic_addx2(Out16[idx[bx * bm + i], j * 2], X[bx * bm + i, j * 2])
            for i, j in T.Parallel(bm, N // 4):
                T.atomic_addx4(Out32[idx[bx * bm + i], j * 4], Y[bx * bm + i, j * 4])
    return scatter


def first_match_break(M=128, N=500, bm=64):
    """Per row, the first column whose value exceeds the row's threshold (N if none): one
    thread per row walks the row in a ``T.serial`` loop left by ``T.loop_break()``; also
    the count of columns visited, to check the break happened where it should."""

    @T.prim_func
    def first(X: T.Tensor((M, N), T.float32), thr: T.Tensor((M,), T.float32),
              pos: T.Tensor((M,), T.int32), visited: T.Tensor((M,), T.int32)):
        with T.Kernel(M // bm, threads=bm) as bx:
            tx = T.get_thread_binding()
            row = bx * bm + tx
            found = T.alloc_var(T.int32, init=N)
            seen = T.alloc_var(T.int32, init=0)
            for j in T.serial(N):
                seen += 1
                if X[row, j] > thr[row]:
                    found = j
                    T.loop_break()
            pos[row] = found
            visited[row] = seen
    return first


def fragment_conditions_nested(M=128, N=128, bm=64, bn=64):
    """Nested ``T.Parallel`` loops over a fragment (the outer one over rows, the inner
    over columns) with an ``if`` on both indices and a ``T.if_then_else`` reading the
    fragment; a band of the tile becomes its clamp, the rest x or -x by the row's sign
    (a per-row fragment); T.clamp with expression bounds."""

    @T.prim_func
    def nested(X: T.Tensor((M, N), T.float32), lo: T.Tensor((M,), T.float32),
               Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            x = T.alloc_fragment((bm, bn), T.float32)
            sgn = T.alloc_fragment((bm,), T.float32)
            T.copy(X[by * bm, bx * bn], x)
            for i in T.Parallel(bm):
                sgn[i] = T.if_then_else(lo[by * bm + i] < 0, -1.0, 1.0)
            for i in T.Parallel(bm):
                for j in T.Parallel(bn):
                    if (i + j) % 4 == 0 and j < bn - 8:
                        x[i, j] = T.clamp(x[i, j], lo[by * bm + i], lo[by * bm + i] + 1.0)
                    else:
                        x[i, j] = T.if_then_else(x[i, j] > 0, x[i, j] * sgn[i], -x[i, j])
            T.copy(x, Y[by * bm, bx * bn])
    return nested


def two_outputs_dynamic_rows(N=256):
    """A ``T.dynamic`` row count in a kernel with two outputs: row means and a centered
    copy of X.  Written the tilelang.jit way (the jit builds it with out_idx=[-2, -1],
    negative indices naming the last two parameters)."""
    M = T.dynamic("M")
    bm = 16

    @T.prim_func
    def center(X: T.Tensor((M, N), T.float32), Mean: T.Tensor((M,), T.float32),
               Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
            x = T.alloc_fragment((bm, N), T.float32)
            s = T.alloc_fragment((bm,), T.float32)
            T.copy(X[bx * bm, 0], x)
            T.reduce_sum(x, s, dim=1)
            for i in T.Parallel(bm):
                s[i] = s[i] / N
            for i, j in T.Parallel(bm, N):
                x[i, j] -= s[i]
            T.copy(s, Mean[bx * bm])
            T.copy(x, Y[bx * bm, 0])
    return center


def stepped_thread_loops(N=4096):
    """Per-thread loops with steps: each thread walks the elements tx, tx + 128, ... of its
    block's chunk (``T.serial(tx, n, 128)`` with a run-time start), a ``T.unroll`` with a
    step of 2 over a local buffer, a ``T.vectorized`` copy of 4, and a warp reduction."""
    chunk = 1024

    @T.prim_func
    def stepped(X: T.Tensor((N,), T.float32), Y: T.Tensor((N,), T.float32),
                S: T.Tensor((N // chunk,), T.float32)):
        with T.Kernel(N // chunk, threads=128) as bx:
            tx = T.get_thread_binding()
            acc = T.alloc_var(T.float32, init=0.0)
            loc = T.alloc_local((8,), T.float32)
            red = T.alloc_shared((4,), T.float32)
            for e in T.serial(tx, chunk, 128):
                acc += X[bx * chunk + e]
            for v in T.vectorized(8):
                loc[v] = X[bx * chunk + tx * 8 + v]
            for v in T.unroll(0, 8, 2):
                loc[v] = loc[v] + loc[v + 1]
                loc[v + 1] = loc[v] * 2.0
            for v in T.vectorized(8):
                Y[bx * chunk + tx * 8 + v] = loc[v]
            acc = T.warp_reduce_sum(acc)
            if tx % 32 == 0:
                red[tx // 32] = acc
            T.sync_threads()
            if tx == 0:
                S[bx] = red[0] + red[1] + red[2] + red[3]
    return stepped


def reshape_fragment_groups(M=128, N=256, G=8, bm=32):
    """Group-wise max-abs scaling: a (bm, N) fragment viewed by ``T.reshape`` as
    (bm, G, N // G) for a per-group ``reduce_absmax`` along its last dim, scaled back in
    the 3-D view, the 2-D fragment copied out."""
    gs = N // G

    @T.prim_func
    def groups(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32),
               Amax: T.Tensor((M, G), T.float32)):
        with T.Kernel(M // bm, threads=128) as bx:
            x = T.alloc_fragment((bm, N), T.float32)
            am = T.alloc_fragment((bm, G), T.float32)
            T.copy(X[bx * bm, 0], x)
            x3 = T.reshape(x, (bm, G, gs))
            T.reduce_absmax(x3, am, dim=2)
            for i, g, k in T.Parallel(bm, G, gs):
                x3[i, g, k] = x3[i, g, k] / T.max(am[i, g], 1e-6)
            T.copy(x, Y[bx * bm, 0])
            T.copy(am, Amax[bx * bm, 0])
    return groups


# ---- more attention and GEMM forms ------------------------------------------------------
def _dq_layout(dQ):
    """A program's own index map for its float32 dQ (as TileLang's backward examples write
    one): 8 x 8 blocks whose elements are interleaved the way an MMA fragment holds them."""
    return T.Layout(dQ.shape, lambda b, l, h, d: [b, l // 8, h, d // 8, d % 2, 4 * (l % 8) + (d % 8) // 2])


def attn_bwd_dq_layout(B=1, S=128, H=2, D=64, bm=64, bn=64, wg_wait=None):
    """A causal BSHD backward written the way TileLang's examples write it: dQ annotated
    with the program's index map (``T.annotate_layout({dQ: _dq_layout(dQ)})``), both score
    GEMMs issued before ``T.wait_wgmma`` calls; dQ by element atomics through the map.  Its
    postprocess (``attn_bwd_dq_layout_post``) reads dQ through the same map.  With
    ``wg_wait=(-1, 1)`` the GEMMs carry TileLang's earlier ``wg_wait`` argument as its
    wgmma-pipelined backward wrote them: -1 (no wait) on the score GEMMs and dV, 1 on dK
    and dQ."""
    nowait, one = (0, 0) if wg_wait is None else wg_wait
    sm_scale = (1.0 / D) ** 0.5
    scale = sm_scale * LOG2E
    shape = [B, S, H, D]

    @T.prim_func
    def bwd(Q: T.Tensor(shape, T.float16), K: T.Tensor(shape, T.float16), V: T.Tensor(shape, T.float16),
            dO: T.Tensor(shape, T.float16), lse: T.Tensor([B, H, S], T.float32),
            Delta: T.Tensor([B, H, S], T.float32), dQ: T.Tensor(shape, T.float32),
            dK: T.Tensor(shape, T.float16), dV: T.Tensor(shape, T.float16)):
        with T.Kernel(H, T.ceildiv(S, bm), B, threads=256) as (bx, by, bz):
            K_shared = T.alloc_shared([bm, D], T.float16)
            V_shared = T.alloc_shared([bm, D], T.float16)
            q = T.alloc_shared([bn, D], T.float16)
            do = T.alloc_shared([bn, D], T.float16)
            dsT_shared = T.alloc_shared([bm, bn], T.float16)
            lse_shared = T.alloc_shared([bn], T.float32)
            delta = T.alloc_shared([bn], T.float32)
            qkT = T.alloc_fragment([bm, bn], T.float32)
            dsT = T.alloc_fragment([bm, bn], T.float32)
            qkT_cast = T.alloc_fragment([bm, bn], T.float16)
            dsT_cast = T.alloc_fragment([bm, bn], T.float16)
            dv = T.alloc_fragment([bm, D], T.float32)
            dk = T.alloc_fragment([bm, D], T.float32)
            dq = T.alloc_fragment([bn, D], T.float32)
            dv_shared = T.alloc_shared([bm, D], T.float16)
            dk_shared = T.alloc_shared([bm, D], T.float16)
            T.annotate_layout({dQ: _dq_layout(dQ)})
            T.copy(K[bz, by * bm:(by + 1) * bm, bx, :], K_shared)
            T.copy(V[bz, by * bm:(by + 1) * bm, bx, :], V_shared)
            T.clear(dv)
            T.clear(dk)
            for k in T.Pipelined(T.floordiv(by * bm, bn), T.ceildiv(S, bn), num_stages=2):
                T.copy(Q[bz, k * bn:(k + 1) * bn, bx, :], q)
                T.clear(qkT)
                T.gemm(K_shared, q, qkT, transpose_B=True, policy=T.GemmWarpPolicy.FullRow, wg_wait=nowait)
                T.copy(dO[bz, k * bn:(k + 1) * bn, bx, :], do)
                T.clear(dsT)
                T.gemm(V_shared, do, dsT, transpose_B=True, policy=T.GemmWarpPolicy.FullRow, wg_wait=nowait)
                T.wait_wgmma(1)
                T.copy(lse[bz, bx, k * bn:(k + 1) * bn], lse_shared)
                for i, j in T.Parallel(bm, bn):
                    qkT[i, j] = T.exp2(qkT[i, j] * scale - lse_shared[j])
                for i, j in T.Parallel(bm, bn):
                    qkT[i, j] = T.if_then_else(by * bm + i <= k * bn + j, qkT[i, j], 0)
                T.wait_wgmma(0)
                T.copy(qkT, qkT_cast)
                T.gemm(qkT_cast, do, dv, policy=T.GemmWarpPolicy.FullRow, wg_wait=nowait)
                T.copy(Delta[bz, bx, k * bn:(k + 1) * bn], delta)
                for i, j in T.Parallel(bm, bn):
                    dsT_cast[i, j] = qkT[i, j] * (dsT[i, j] - delta[j]) * sm_scale
                T.gemm(dsT_cast, q, dk, policy=T.GemmWarpPolicy.FullRow, wg_wait=one)
                T.copy(dsT_cast, dsT_shared)
                T.clear(dq)
                T.gemm(dsT_shared, K_shared, dq, transpose_A=True, wg_wait=one)
                T.wait_wgmma(0)
                for i, j in T.Parallel(bn, D):
                    T.atomic_add(dQ[bz, k * bn + i, bx, j], dq[i, j])
            T.copy(dv, dv_shared)
            T.copy(dk, dk_shared)
            T.copy(dv_shared, dV[bz, by * bm:(by + 1) * bm, bx, :])
            T.copy(dk_shared, dK[bz, by * bm:(by + 1) * bm, bx, :])
    return bwd


def attn_bwd_dq_layout_post(B=1, S=128, H=2, D=64, blk=64):
    shape = [B, S, H, D]

    @T.prim_func
    def post(dQ: T.Tensor(shape, T.float32), dQ_out: T.Tensor(shape, T.float16)):
        with T.Kernel(T.ceildiv(S, blk), H, B, threads=128) as (bx, by, bz):
            T.annotate_layout({dQ: _dq_layout(dQ)})
            T.copy(dQ[bz, bx * blk:(bx + 1) * blk, by, :], dQ_out[bz, bx * blk:(bx + 1) * blk, by, :])
    return post


def attn_bwd_dq_layout_all(wg_wait=None):
    return [attn_bwd_dq_layout(wg_wait=wg_wait), attn_bwd_dq_layout_post()]


def attn_bwd_wg_wait():
    """attn_bwd_dq_layout with TileLang's earlier ``T.gemm(..., wg_wait=-1 / 1)``."""
    return attn_bwd_dq_layout_all(wg_wait=(-1, 1))


def fp8_qk_bf16_pv(B=1, H=2, S=256, D=128, bm=64, bn=64):
    """Attention with fp8 e4m3 Q and K (per-(batch, head) dequantization scales folded
    into the softmax scale, scores by an fp8 wgmma with ``clear_accum=True``) and bf16 V
    (P cast to bf16 in registers for the second GEMM)."""
    scale = (1.0 / D) ** 0.5 * LOG2E

    @T.prim_func
    def attn(Q: T.Tensor((B, H, S, D), T.float8_e4m3), K: T.Tensor((B, H, S, D), T.float8_e4m3),
             V: T.Tensor((B, H, S, D), T.bfloat16), qs: T.Tensor((B, H), T.float32),
             ks: T.Tensor((B, H), T.float32), O: T.Tensor((B, H, S, D), T.bfloat16)):
        with T.Kernel(S // bm, H, B, threads=128) as (bx, by, bz):
            q_s = T.alloc_shared((bm, D), T.float8_e4m3)
            k_s = T.alloc_shared((bn, D), T.float8_e4m3)
            v_s = T.alloc_shared((bn, D), T.bfloat16)
            acc_s = T.alloc_fragment((bm, bn), T.float32)
            acc_p = T.alloc_fragment((bm, bn), T.bfloat16)
            acc_o = T.alloc_fragment((bm, D), T.float32)
            m = T.alloc_fragment((bm,), T.float32)
            mp = T.alloc_fragment((bm,), T.float32)
            rs = T.alloc_fragment((bm,), T.float32)
            l = T.alloc_fragment((bm,), T.float32)
            dq = qs[bz, by] * ks[bz, by] * scale
            T.copy(Q[bz, by, bx * bm:(bx + 1) * bm, :], q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(T.float32))
            for k in T.Pipelined(S // bn, num_stages=2):
                T.copy(K[bz, by, k * bn:(k + 1) * bn, :], k_s)
                T.copy(V[bz, by, k * bn:(k + 1) * bn, :], v_s)
                T.gemm(q_s, k_s, acc_s, transpose_B=True, clear_accum=True)
                T.copy(m, mp)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i, j in T.Parallel(bm, bn):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * dq - m[i] * dq)
                T.reduce_sum(acc_s, rs, dim=1)
                for i in T.Parallel(bm):
                    l[i] = l[i] * T.exp2(mp[i] * dq - m[i] * dq) + rs[i]
                for i, d in T.Parallel(bm, D):
                    acc_o[i, d] *= T.exp2(mp[i] * dq - m[i] * dq)
                T.copy(acc_s, acc_p)
                T.gemm(acc_p, v_s, acc_o)
            for i, d in T.Parallel(bm, D):
                acc_o[i, d] /= l[i]
            T.copy(acc_o, O[bz, by, bx * bm:(bx + 1) * bm, :])
    return attn


def flash_fwd_d96(B=1, H=2, S=256, D=96, bm=64, bn=64):
    """Flash attention forward with head dim 96 (not a power of two: 96-column tiles,
    their swizzle and the P @ V GEMM's N of 96)."""
    scale = (1.0 / D) ** 0.5 * LOG2E

    @T.prim_func
    def fa(Q: T.Tensor((B, H, S, D), T.float16), K: T.Tensor((B, H, S, D), T.float16),
           V: T.Tensor((B, H, S, D), T.float16), O: T.Tensor((B, H, S, D), T.float16)):
        with T.Kernel(S // bm, H, B, threads=128) as (bx, by, bz):
            q_s = T.alloc_shared((bm, D), T.float16)
            k_s = T.alloc_shared((bn, D), T.float16)
            v_s = T.alloc_shared((bn, D), T.float16)
            s = T.alloc_fragment((bm, bn), T.float32)
            p = T.alloc_fragment((bm, bn), T.float16)
            o = T.alloc_fragment((bm, D), T.float32)
            m = T.alloc_fragment((bm,), T.float32)
            mp = T.alloc_fragment((bm,), T.float32)
            rs = T.alloc_fragment((bm,), T.float32)
            l = T.alloc_fragment((bm,), T.float32)
            T.copy(Q[bz, by, bx * bm:(bx + 1) * bm, :], q_s)
            T.fill(o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(T.float32))
            for k in T.Pipelined(S // bn, num_stages=2):
                T.copy(K[bz, by, k * bn:(k + 1) * bn, :], k_s)
                T.gemm(q_s, k_s, s, transpose_B=True, clear_accum=True)
                T.copy(m, mp)
                T.reduce_max(s, m, dim=1, clear=False)
                for i, j in T.Parallel(bm, bn):
                    s[i, j] = T.exp2(s[i, j] * scale - m[i] * scale)
                T.reduce_sum(s, rs, dim=1)
                for i in T.Parallel(bm):
                    l[i] = l[i] * T.exp2(mp[i] * scale - m[i] * scale) + rs[i]
                for i, d in T.Parallel(bm, D):
                    o[i, d] *= T.exp2(mp[i] * scale - m[i] * scale)
                T.copy(s, p)
                T.copy(V[bz, by, k * bn:(k + 1) * bn, :], v_s)
                T.gemm(p, v_s, o)
            for i, d in T.Parallel(bm, D):
                o[i, d] /= l[i]
            T.copy(o, O[bz, by, bx * bm:(bx + 1) * bm, :])
    return fa


def gemm_k_subtiles(M=128, N=128, K=256, bm=64, bn=64, bk=128):
    """Each pipelined K tile multiplied in 32-wide K parts by a ``T.serial`` loop of
    ``T.gemm(a[:, kk * 32:(kk + 1) * 32], b[kk * 32:(kk + 1) * 32, :], c)`` (run-time
    part origins)."""

    @T.prim_func
    def g(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            a = T.alloc_shared((bm, bk), T.float16)
            b = T.alloc_shared((bk, bn), T.float16)
            c = T.alloc_fragment((bm, bn), T.float32)
            T.clear(c)
            for ko in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm, ko * bk], a)
                T.copy(B[ko * bk, bx * bn], b)
                for kk in T.serial(bk // 32):
                    T.gemm(a[:, kk * 32:(kk + 1) * 32], b[kk * 32:(kk + 1) * 32, :], c)
            T.copy(c, C[by * bm, bx * bn])
    return g


def gemm_scaled_a_schedule(M=128, N=128, K=512, bm=64, bn=64, bk=64):
    """A scaled per K column in shared memory between the copies and the GEMM, under an
    explicit ``T.Pipelined(order=[0, 1, 2, 3], stage=[0, 0, 1, 1])``."""

    @T.prim_func
    def g(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), sc: T.Tensor((K,), T.float16),
          C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            a = T.alloc_shared((bm, bk), T.float16)
            a2 = T.alloc_shared((bm, bk), T.float16)
            b = T.alloc_shared((bk, bn), T.float16)
            c = T.alloc_fragment((bm, bn), T.float32)
            T.clear(c)
            for ko in T.Pipelined(K // bk, num_stages=2, order=[0, 1, 2, 3], stage=[0, 0, 1, 1]):
                T.copy(A[by * bm, ko * bk], a)
                T.copy(B[ko * bk, bx * bn], b)
                for i, k in T.Parallel(bm, bk):
                    a2[i, k] = a[i, k] * sc[ko * bk + k]
                T.gemm(a2, b, c)
            T.copy(c, C[by * bm, bx * bn])
    return g


# ---- reductions, sorting, atomics --------------------------------------------------------
def shared_reduce_and_colmax(M=128, N=128, bm=32):
    """Reductions whose source is a shared tile: row sums (dim 1) and column maxima (dim 0)
    into fragments, the column maxima combined across blocks by a tile
    ``T.atomic_max``."""

    @T.prim_func
    def rs(X: T.Tensor((M, N), T.float32), S: T.Tensor((M,), T.float32), Mx: T.Tensor((N,), T.float32)):
        with T.Kernel(M // bm, threads=128) as bx:
            xs = T.alloc_shared((bm, N), T.float32)
            s = T.alloc_fragment((bm,), T.float32)
            c = T.alloc_fragment((N,), T.float32)
            T.copy(X[bx * bm, 0], xs)
            T.reduce_sum(xs, s, dim=1)
            T.reduce_max(xs, c, dim=0)
            T.copy(s, S[bx * bm])
            T.atomic_max(Mx[0:N], c)
    return rs


def warp_bitonic_shfl(M=64):
    """Each warp sorts one 32-value row ascending, a value per lane, by a bitonic network
    of ``T.shfl_xor`` compare-exchanges in nested ``T.unroll`` loops (a variable shift)."""

    @T.prim_func
    def wsort(X: T.Tensor((M, 32), T.float32), Y: T.Tensor((M, 32), T.float32)):
        with T.Kernel(M // 4, threads=128) as bx:
            tx = T.get_thread_binding()
            lane = tx % 32
            row = bx * 4 + tx // 32
            v = T.alloc_var(T.float32)
            v = X[row, lane]
            for ks in T.unroll(1, 6):
                for js in T.unroll(ks):
                    j = 1 << (ks - 1 - js)
                    other = T.shfl_xor(v, j)
                    take_min = ((lane & (1 << ks)) == 0) == ((lane & j) == 0)
                    v = T.if_then_else(take_min, T.min(v, other), T.max(v, other))
            Y[row, lane] = v
    return wsort


def reducer_softmax(M=128, N=256, bm=16):
    """Row softmax with TileLang's legacy reducers: ``T.alloc_reducer`` max and sum
    (replication "all"), updated in ``T.Parallel`` nests and ``T.finalize_reducer``."""

    @T.prim_func
    def rsm(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(M // bm, threads=128) as bx:
            x = T.alloc_fragment((bm, N), T.float32)
            mx = T.alloc_reducer((bm,), T.float32, op="max", replication="all")
            sm = T.alloc_reducer((bm,), T.float32, op="sum", replication="all")
            T.copy(X[bx * bm, 0], x)
            T.fill(mx, -T.infinity(T.float32))
            T.clear(sm)
            for i, j in T.Parallel(bm, N):
                mx[i] = T.max(mx[i], x[i, j])
            T.finalize_reducer(mx)
            for i, j in T.Parallel(bm, N):
                x[i, j] = T.exp(x[i, j] - mx[i])
                sm[i] += x[i, j]
            T.finalize_reducer(sm)
            for i, j in T.Parallel(bm, N):
                x[i, j] = x[i, j] / sm[i]
            T.copy(x, Y[bx * bm, 0])
    return rsm


def shared_atomic_buckets(M=256, N=64, bm=64):
    """Rows summed into 8 buckets (row index % 8 of an index tensor) in a shared tile by
    element ``T.atomic_add``s, the shared tile then added into global by one tile
    ``T.atomic_add``."""

    @T.prim_func
    def sa(X: T.Tensor((M, N), T.float32), idx: T.Tensor((M,), T.int32), Out: T.Tensor((8, N), T.float32)):
        with T.Kernel(M // bm, threads=128) as bx:
            acc = T.alloc_shared((8, N), T.float32)
            T.clear(acc)
            for i, j in T.Parallel(bm, N):
                T.atomic_add(acc[idx[bx * bm + i] % 8, j], X[bx * bm + i, j])
            T.atomic_add(Out[0:8, 0:N], acc)
    return sa


def tile_atomic_max_min(M=128, N=128, bm=32):
    """Tile ``T.atomic_max`` of a float fragment and ``T.atomic_min`` of an int32 fragment
    (the whole-tensor form) across blocks."""

    @T.prim_func
    def a(X: T.Tensor((M, N), T.float32), Mx: T.Tensor((bm, N), T.float32), Mn: T.Tensor((bm, N), T.int32)):
        with T.Kernel(M // bm, threads=128) as bx:
            x = T.alloc_fragment((bm, N), T.float32)
            xi = T.alloc_fragment((bm, N), T.int32)
            T.copy(X[bx * bm, 0], x)
            for i, j in T.Parallel(bm, N):
                xi[i, j] = T.Cast(T.int32, x[i, j] * 100.0)
            T.atomic_max(Mx[0:bm, 0:N], x)
            T.atomic_min(Mn, xi)
    return a


def neg_dim_reduce_scan(M=64, N=128):
    """``dim=-1`` (TileLang's default dim) on T.reduce_sum and T.cumsum of a fragment."""

    @T.prim_func
    def r(X: T.Tensor((M, N), T.float32), S: T.Tensor((M,), T.float32), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            x = T.alloc_fragment((M, N), T.float32)
            s = T.alloc_fragment((M,), T.float32)
            T.copy(X, x)
            T.reduce_sum(x, s, dim=-1)
            T.cumsum(x, dim=-1)
            T.copy(s, S)
            T.copy(x, C)
    return r
