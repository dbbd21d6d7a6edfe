"""Programs written for tilecute in the idioms of TileLang kernels found in third-party
repositories (inference engines, training frameworks, model releases) -- not copied from them:
``T.Tensor[(..), dtype]`` subscript annotations over ``T.symbolic`` / ``T.dynamic`` sizes,
``pass_configs`` dicts keyed by ``tilecute.PassConfigKey``, point-start ``T.copy``
(``X[r, c]`` -> a tile, extents from the destination), ``T.Pipelined(1, num_stages=...)``
bodies, ``T.reduce_absmax`` + ``T.clamp`` block quantization (fp8 e4m3 values, fp32 / e8m0
scales, power-of-two scales by ``T.reinterpret`` bit tricks), buffers allocated inside a
pipelined loop, fragments iterated in transposed order (``T.Parallel(h, n)`` writing
``x[n, h]``), gathers by an index tensor into shared memory with a validity mask and -inf
initialised scores, online softmax with ``-(2**30)`` as the initial max, log-sum-exp combines of
partial results (``as (bx,)``, row-slice copies into ``shared[k, :]``, ``.astype``),
histogram / radix threshold search with ``T.sync_threads(id, count)`` named barriers inside a
thread branch, ``T.atomic_add(..., return_prev=True)`` cursors and ``T.loop_break``,
reducers (``T.alloc_reducer(replication="all")`` / ``T.finalize_reducer``) for an RMSNorm,
interleaved RoPE by thread, ``T.Serial`` / ``T.vectorized`` loops inside ``T.Parallel``, a
warp-reduced GEMV with ``T.alloc_local`` accumulators, block-scaled fp8 GEMM with
``T.use_swizzle(panel_size=...)`` and a second accumulator, Sinkhorn normalisation by row /
column ``T.reduce_sum`` over a tiny fragment, and attention with a learned sink.

``tests/test_third_party_idioms.py`` builds each to sm_90a (and sm_80) cubins on the CPU, checks
what each means in the generated source, and on a GPU compares it with torch."""

import tilecute
import tilecute.language as T

BF16 = "bfloat16"
FP8 = "float8_e4m3fn"
FP32 = "float32"
INT32 = "int32"

PASS_CONFIGS = {
    tilecute.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True,
    tilecute.PassConfigKey.TL_DISABLE_TMA_LOWER: True,
}


def _log2_ceil_bits(x):
    """ceil(log2(x)) of a positive float32 from its bits (exponent, +1 if any mantissa bit)."""
    bits = T.reinterpret("uint32", x)
    exponent = (bits >> 23) & 0xFF
    mantissa = bits & ((1 << 23) - 1)
    return T.Cast("int32", exponent - 127 + T.if_then_else(mantissa != 0, 1, 0))


def _pow2_bits(e):
    """2**e for an int32 e as a float32 built from its bits."""
    return T.reinterpret("float32", (e + 127) << 23)


# ---- block quantization ----------------------------------------------------------------------
@tilecute.jit(pass_configs=PASS_CONFIGS)
def block_quant_fp8(N=256, group=128, pow2_scale=False, stages=2):
    """Per (32 x group) block: amax over each row's group, scale = amax / 448 (or the next power
    of two of it), y = clamp(x / s) as fp8 e4m3; three inputs, no out_idx (the caller owns Y, S)."""
    M = T.symbolic("M")
    blk_m = 32
    fp8_max = 448.0

    @T.prim_func
    def quant(X: T.Tensor[(M, N), BF16], Y: T.Tensor[(M, N), FP8],
              S: T.Tensor[(M, T.ceildiv(N, group)), FP32]):
        with T.Kernel(T.ceildiv(M, blk_m), T.ceildiv(N, group), threads=128) as (pm, pn):
            xs = T.alloc_shared((blk_m, group), BF16)
            xf = T.alloc_fragment((blk_m, group), BF16)
            amax = T.alloc_fragment((blk_m,), FP32)
            sc = T.alloc_fragment((blk_m,), FP32)
            yf = T.alloc_fragment((blk_m, group), FP8)
            ys = T.alloc_shared((blk_m, group), FP8)
            for _ in T.Pipelined(1, num_stages=stages):
                T.copy(X[pm * blk_m, pn * group], xs)
                T.copy(xs, xf)
                T.reduce_absmax(xf, amax, dim=1)
                for i in T.Parallel(blk_m):
                    amax[i] = T.max(amax[i], 1e-4)
                    if pow2_scale:
                        sc[i] = _pow2_bits(_log2_ceil_bits(amax[i] * (1.0 / fp8_max)))
                    else:
                        sc[i] = amax[i] * (1.0 / fp8_max)
                for i, j in T.Parallel(blk_m, group):
                    yf[i, j] = T.clamp(xf[i, j] / sc[i], -fp8_max, fp8_max)
                for i in T.Parallel(blk_m):
                    S[pm * blk_m + i, pn] = sc[i]
                T.copy(yf, ys)
                T.copy(ys, Y[pm * blk_m, pn * group])

    return quant


@tilecute.jit(pass_configs=PASS_CONFIGS)
def block_fake_quant_e8m0(N=256, group=32, scale_dtype="float8_e8m0fnu"):
    """Quantize-dequantize into the caller's Y (bf16), power-of-two scales stored as
    ``scale_dtype``: y = bf16(float(fp8(clamp(x / s))) * s).  float8_e8m0fnu scales are
    refused by name (tilecute has no e8m0 type); float32 scales build."""
    M = T.symbolic("M")
    blk_m = 32

    @T.prim_func
    def fake_quant(X: T.Tensor[(M, N), BF16], Y: T.Tensor[(M, N), BF16],
                   S: T.Tensor[(M, T.ceildiv(N, group)), scale_dtype]):
        with T.Kernel(T.ceildiv(M, blk_m), T.ceildiv(N, group), threads=128) as (pm, pn):
            xs = T.alloc_shared((blk_m, group), BF16)
            xf = T.alloc_fragment((blk_m, group), BF16)
            amax = T.alloc_fragment((blk_m,), FP32)
            sc = T.alloc_fragment((blk_m,), FP32)
            yf = T.alloc_fragment((blk_m, group), BF16)
            for _ in T.Pipelined(1, num_stages=0):
                T.copy(X[pm * blk_m, pn * group], xs)
                T.copy(xs, xf)
                T.reduce_absmax(xf, amax, dim=1)
                for i in T.Parallel(blk_m):
                    sc[i] = _pow2_bits(_log2_ceil_bits(T.max(amax[i], 1e-4) * (1.0 / 448.0)))
                for i, j in T.Parallel(blk_m, group):
                    yf[i, j] = T.Cast(BF16, T.Cast(FP32, T.Cast(FP8, T.clamp(xf[i, j] / sc[i], -448.0, 448.0)))
                                      * sc[i])
                for i in T.Parallel(blk_m):
                    S[pm * blk_m + i, pn] = T.Cast(scale_dtype, sc[i])
                T.copy(yf, Y[pm * blk_m, pn * group])

    return fake_quant


# ---- indexer scores --------------------------------------------------------------------------
@tilecute.jit(out_idx=[4], pass_configs=PASS_CONFIGS)
def fp8_index_scores(h=16, d=64, blk_n1=256, blk_n2=64, clear_accum=True):
    """o[b, m, n] = k_s[b, n] * sum_h relu(k[b, n] . q[b, m, h]) * w[b, m, h]: an fp8 GEMM of a
    K tile (rows = keys) by Q^T, the relu/weight applied over a T.Parallel(h, n) nest that
    writes logits[n, h] (transposed order), buffers allocated inside the pipelined loop."""
    b = T.symbolic("b")
    m = T.symbolic("m")
    n = T.symbolic("n")

    @T.prim_func
    def index_scores(q: T.Tensor[(b, m, h, d), FP8], w: T.Tensor[(b, m, h), FP32],
                     k: T.Tensor[(b, n, d), FP8], k_s: T.Tensor[(b, n), FP32],
                     o: T.Tensor[(b, m, n), FP32]) -> None:
        with T.Kernel(b, m, T.ceildiv(n, blk_n1)) as (ib, im, i1):
            q_s = T.alloc_shared((h, d), FP8)
            T.copy(q[ib, im, 0, 0], q_s)
            w_f = T.alloc_fragment(h, FP32)
            T.copy(w[ib, im, 0], w_f)
            for i2 in T.Pipelined(blk_n1 // blk_n2, num_stages=2):
                k_sm = T.alloc_shared((blk_n2, d), FP8)
                T.copy(k[ib, i1 * blk_n1 + i2 * blk_n2, 0], k_sm)
                ks_f = T.alloc_fragment(blk_n2, FP32)
                T.copy(k_s[ib, i1 * blk_n1 + i2 * blk_n2], ks_f)
                logits = T.alloc_fragment((blk_n2, h), FP32)
                if not clear_accum:
                    T.fill(logits, 0)
                T.gemm(k_sm, q_s, logits, transpose_A=False, transpose_B=True, clear_accum=clear_accum)
                for ih, i3 in T.Parallel(h, blk_n2):
                    logits[i3, ih] = T.max(logits[i3, ih], 0) * w_f[ih]
                total = T.alloc_fragment(blk_n2, FP32)
                T.reduce_sum(logits, total, dim=1)
                for i3 in T.Parallel(blk_n2):
                    total[i3] *= ks_f[i3]
                T.copy(total, o[ib, im, i1 * blk_n1 + i2 * blk_n2])

    return index_scores


# ---- sparse attention by index gathering ---------------------------------------------------
@tilecute.jit(out_idx=[-1], pass_configs=PASS_CONFIGS)
def gathered_sparse_attention(heads=16, dim=64, tail=32, topk=128, block_I=64, threads=128, sm_scale=None):
    """One query row per block: keys chosen by Indices (-1 = none) are gathered into shared
    memory by T.Parallel (main part and rope tail), masked scores start at -inf, two GEMMs add
    into one score tile (policy FullCol), online softmax in exp2 with -(2**30) as the first max."""
    if sm_scale is None:
        sm_scale = (1.0 / (dim + tail)) ** 0.5 * 1.44269504
    batch = T.symbolic("batch")
    seq_len = T.symbolic("seq_len")
    seq_kv = T.symbolic("seq_len_kv")
    NI = tilecute.cdiv(topk, block_I)

    @T.prim_func
    def main(Q: T.Tensor([batch, seq_len, heads, dim + tail], BF16),  # type: ignore
             KV: T.Tensor([batch, seq_kv, 1, dim + tail], BF16),  # type: ignore
             Indices: T.Tensor([batch, seq_len, 1, topk], INT32),  # type: ignore
             Output: T.Tensor([batch, seq_len, heads, dim], BF16)):  # type: ignore
        with T.Kernel(seq_len, batch, 1, threads=threads) as (bx, by, bz):
            Q_s = T.alloc_shared([heads, dim], BF16)
            Qt_s = T.alloc_shared([heads, tail], BF16)
            KV_s = T.alloc_shared([block_I, dim], BF16)
            Kt_s = T.alloc_shared([block_I, tail], BF16)
            mask = T.alloc_fragment([block_I], "bool")
            acc_o = T.alloc_fragment([heads, dim], FP32)
            acc_s = T.alloc_fragment([heads, block_I], FP32)
            S_s = T.alloc_shared([heads, block_I], BF16)
            sumexp = T.alloc_fragment([heads], FP32)
            sumexp_i = T.alloc_fragment([heads], FP32)
            alpha = T.alloc_fragment([heads], FP32)
            m_i = T.alloc_fragment([heads], FP32)
            m_prev = T.alloc_fragment([heads], FP32)
            T.fill(acc_o, 0)
            T.fill(sumexp, 0)
            T.fill(m_i, -(2**30))
            b_i, g_i, s_i = by, bz, bx
            T.copy(Q[b_i, s_i, 0:heads, :dim], Q_s)
            T.copy(Q[b_i, s_i, 0:heads, dim:], Qt_s)
            for i_i in T.Pipelined(NI, num_stages=2):
                for bi in T.Parallel(block_I):
                    mask[bi] = Indices[b_i, s_i, g_i, i_i * block_I + bi] >= 0
                for bi, d_i in T.Parallel(block_I, dim):
                    KV_s[bi, d_i] = KV[b_i, T.max(Indices[b_i, s_i, g_i, i_i * block_I + bi], 0), g_i, d_i]
                for bi, d_i in T.Parallel(block_I, tail):
                    Kt_s[bi, d_i] = KV[b_i, T.max(Indices[b_i, s_i, g_i, i_i * block_I + bi], 0), g_i, dim + d_i]
                for h_i, bi in T.Parallel(heads, block_I):
                    acc_s[h_i, bi] = T.if_then_else(mask[bi], 0, -T.infinity(acc_s.dtype))
                T.gemm(Q_s, KV_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
                T.gemm(Qt_s, Kt_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
                T.copy(m_i, m_prev)
                T.reduce_max(acc_s, m_i, dim=1, clear=False)
                for h_i in T.Parallel(heads):
                    alpha[h_i] = T.exp2((m_prev[h_i] - m_i[h_i]) * sm_scale)
                for h_i, bi in T.Parallel(heads, block_I):
                    acc_s[h_i, bi] = T.exp2(acc_s[h_i, bi] * sm_scale - m_i[h_i] * sm_scale)
                T.reduce_sum(acc_s, sumexp_i, dim=1)
                for h_i in T.Parallel(heads):
                    sumexp[h_i] = sumexp[h_i] * alpha[h_i] + sumexp_i[h_i]
                for h_i, d_i in T.Parallel(heads, dim):
                    acc_o[h_i, d_i] = acc_o[h_i, d_i] * alpha[h_i]
                T.copy(acc_s, S_s)
                T.gemm(S_s, KV_s, acc_o, policy=T.GemmWarpPolicy.FullCol)
            for h_i, d_i in T.Parallel(heads, dim):
                acc_o[h_i, d_i] /= sumexp[h_i]
            T.copy(acc_o, Output[b_i, s_i, 0:heads, :])

    return main


@tilecute.jit(out_idx=[-1], pass_configs=PASS_CONFIGS)
def lse_combine(heads=16, dim=64, NI=4, head_per_block=8, threads=128):
    """Merge NI partial attention outputs by their log2-sum-exp: as (bx,) of a one-axis grid, a
    row slice of the partial LSEs copied into shared[k, :], a serial loop over parts around
    T.Parallel nests, and a bf16 partial read with .astype(accum)."""
    seq_len = T.dynamic("seq_len")
    REP = heads // head_per_block

    @T.prim_func
    def main(Partial_O: T.Tensor([1, seq_len, NI, heads, dim], T.bfloat16),
             Partial_Lse: T.Tensor([1, seq_len, NI, heads], T.float32),
             Output: T.Tensor([1, seq_len, heads, dim], T.bfloat16)):
        with T.Kernel(seq_len * REP, threads=threads) as (bx,):
            lse_s = T.alloc_shared([NI, head_per_block], T.float32)
            lse_max = T.alloc_fragment([head_per_block], T.float32)
            lse_sum = T.alloc_fragment([head_per_block], T.float32)
            scale = T.alloc_fragment([head_per_block, NI], T.float32)
            acc_o = T.alloc_fragment([head_per_block, dim], T.float32)
            s_i = bx // REP
            H0 = (bx % REP) * head_per_block
            H1 = H0 + head_per_block
            for k in T.serial(NI):
                T.copy(Partial_Lse[0, s_i, k, H0:H1], lse_s[k, :])
            T.fill(lse_max, -(2**30))
            for k in T.serial(NI):
                for h in T.Parallel(head_per_block):
                    lse_max[h] = T.max(lse_max[h], lse_s[k, h])
            T.fill(lse_sum, 0)
            for k in T.serial(NI):
                for h in T.Parallel(head_per_block):
                    lse_sum[h] = lse_sum[h] + T.exp2(lse_s[k, h] - lse_max[h])
            for k in T.serial(NI):
                for h in T.Parallel(head_per_block):
                    scale[h, k] = T.exp2(lse_s[k, h] - lse_max[h] - T.log2(lse_sum[h]))
            T.fill(acc_o, 0)
            for k in T.serial(NI):
                for h, d in T.Parallel(head_per_block, dim):
                    acc_o[h, d] = acc_o[h, d] + scale[h, k] * Partial_O[0, s_i, k, H0 + h, d].astype(T.float32)
            T.copy(acc_o, Output[0, s_i, H0:H1, :])

    return main


@tilecute.jit(pass_configs={tilecute.PassConfigKey.TL_DISABLE_THREAD_STORAGE_SYNC: True})
def radix_threshold_select(topk=64, BLOCK=512):
    """Top-k row selection by an 8-bit radix histogram, with every barrier written by hand (the
    pass config turns tilecute's own off): a (batch) index tensor, as (bx) on a 1-D grid, a
    shared counter zeroed by T.fill on one element, a suffix sum by T.sync_threads(1, RADIX)
    in the first RADIX threads, cursors from T.atomic_add(..., return_prev=True), and a
    T.loop_break.  Every element whose bin lies above the threshold bin lands in index[b, :],
    then threshold-bin elements fill the remaining slots."""
    batch = T.dynamic("batch")
    seq_len = T.dynamic("seq_len")
    RADIX = 256

    def key8(x):
        h = T.reinterpret("uint16", T.Cast("float16", x))
        h = T.if_then_else(x < 0, ~h & 0xFFFF, h | 0x8000)
        return h >> 8

    @T.prim_func
    def select(inp: T.Tensor[(batch, seq_len), FP32], index: T.Tensor[(batch, topk), INT32],
               counts: T.Tensor[(batch), INT32]):
        with T.Kernel(batch, threads=BLOCK) as (bx):
            tx = T.get_thread_binding()
            s_thr = T.alloc_shared([1], INT32)
            s_hist = T.alloc_shared([RADIX + 1], INT32)
            s_eq = T.alloc_shared([1], INT32)
            l_val = T.alloc_var(INT32)
            l_thr = T.alloc_var(INT32)
            l_rest = T.alloc_var(INT32)
            T.fill(s_hist, 0)
            T.fill(s_eq[0], 0)
            T.sync_threads()
            for s in T.serial(T.ceildiv(seq_len, BLOCK)):
                idx = s * BLOCK + tx
                if idx < seq_len:
                    T.atomic_add(s_hist[key8(inp[bx, idx])], 1)
            T.sync_threads()
            if tx < RADIX:
                for i in T.serial(8):
                    offset = 1 << i
                    T.sync_threads(1, RADIX)
                    if tx < RADIX - offset:
                        l_val = s_hist[tx] + s_hist[tx + offset]
                    T.sync_threads(1, RADIX)
                    if tx < RADIX - offset:
                        s_hist[tx] = l_val
                T.sync_threads(1, RADIX)
                if s_hist[tx] > topk and s_hist[tx + 1] <= topk:
                    s_thr[0] = tx
            T.sync_threads()
            l_thr = s_thr[0]
            l_rest = topk - s_hist[l_thr + 1]
            T.sync_threads()
            for s in T.serial(T.ceildiv(seq_len, BLOCK)):
                if l_rest < 0:
                    T.loop_break()
                idx = s * BLOCK + tx
                if idx < seq_len:
                    b32 = T.Cast(INT32, key8(inp[bx, idx]))
                    if b32 > l_thr:
                        pos = T.atomic_add(s_hist[b32 + 1], 1, return_prev=True)
                        index[bx, pos] = idx
                    elif b32 == l_thr:
                        pos = T.atomic_add(s_eq[0], 1, return_prev=True)
                        if pos < l_rest:
                            index[bx, topk - l_rest + pos] = idx
            T.sync_threads()
            if tx == 0:
                counts[bx] = T.min(s_eq[0], l_rest) + topk - l_rest

    return select


# ---- norms, rotary, hyper-connections ------------------------------------------------------
@tilecute.jit(pass_configs=PASS_CONFIGS)
def q_rmsnorm_rope(heads=8, head_dim=128, rope_dim=64, eps=1e-6):
    """Per (token, head) row: RMSNorm by a T.alloc_reducer(replication="all") summed in a
    T.Parallel nest and finalized, T.rsqrt of it bound to a name, the first head_dim - rope_dim
    channels written from the fragment, the interleaved rope pairs by the first rope_dim/2
    threads, with the normalised value rounded to bf16 before the rotation (T.Cast chain)."""
    tokens = T.symbolic("tokens")
    nope = head_dim - rope_dim

    @T.prim_func
    def norm_rope(q: T.Tensor[(tokens, heads, head_dim), BF16], freqs: T.Tensor[(rope_dim,), FP32],
                  out: T.Tensor[(tokens, heads, head_dim), BF16]):
        with T.Kernel(tokens * heads, threads=128) as row:
            token = row // heads
            head = row % heads
            vals = T.alloc_fragment((head_dim,), FP32)
            T.copy(q[token, head, 0], vals)
            sq = T.alloc_reducer((1,), FP32, replication="all")
            T.fill(sq, 0.0)
            for c in T.Parallel(head_dim):
                sq[0] += vals[c] * vals[c]
            T.finalize_reducer(sq)
            inv = T.rsqrt(sq[0] / head_dim + eps)
            for c in T.Parallel(nope):
                out[token, head, c] = vals[c] * inv
            t = T.get_thread_binding()
            if t < rope_dim // 2:
                c = nope + t * 2
                re = T.Cast(FP32, T.Cast(BF16, T.Cast(FP32, q[token, head, c]) * inv))
                im = T.Cast(FP32, T.Cast(BF16, T.Cast(FP32, q[token, head, c + 1]) * inv))
                cos = freqs[t * 2]
                sin = freqs[t * 2 + 1]
                out[token, head, c] = re * cos - im * sin
                out[token, head, c + 1] = im * cos + re * sin

    return norm_rope


@tilecute.jit(pass_configs=PASS_CONFIGS)
def rope_tail_inplace(heads=4, head_dim=96, rope_dim=64, inverse=False):
    """Rotate the last rope_dim channels of every (token, head) row in place, one warp per row,
    lane t the pair (2t, 2t+1); the inverse rotation chosen by a Python conditional while tracing."""
    tokens = T.symbolic("tokens")
    nope = head_dim - rope_dim

    @T.prim_func
    def rope(value: T.Tensor[(tokens, heads, head_dim), BF16], freqs: T.Tensor[(rope_dim,), FP32]):
        with T.Kernel(tokens * heads, threads=32) as row:
            token = row // heads
            head = row % heads
            t = T.get_thread_binding()
            c = nope + t * 2
            re = T.Cast(FP32, value[token, head, c])
            im = T.Cast(FP32, value[token, head, c + 1])
            cos = freqs[t * 2]
            sin = -freqs[t * 2 + 1] if inverse else freqs[t * 2 + 1]
            value[token, head, c] = re * cos - im * sin
            value[token, head, c + 1] = im * cos + re * sin

    return rope


@tilecute.jit(pass_configs=PASS_CONFIGS)
def hyper_post_mix(hc=4, hidden=512, block=256, threads=128):
    """out[t, c, :] = post[t, c] * value[t, :] + sum_s comb[t, s, c] * residual[t, s, :], over
    hidden in blocks by T.Serial (capital S), the sum over s by a T.vectorized loop inside the
    T.Parallel nest, point-start copies of 2-D and 3-D slices into shared and fragments."""
    tokens = T.symbolic("tokens")

    @T.prim_func
    def post_mix(value: T.Tensor[(tokens, hidden), BF16], residual: T.Tensor[(tokens, hc, hidden), BF16],
                 post: T.Tensor[(tokens, hc), FP32], comb: T.Tensor[(tokens, hc, hc), FP32],
                 out: T.Tensor[(tokens, hc, hidden), BF16]):
        with T.Kernel(tokens, threads=threads) as tok:
            res_s = T.alloc_shared((hc, block), BF16)
            val_s = T.alloc_shared((block,), BF16)
            acc = T.alloc_fragment((hc, block), FP32)
            res_l = T.alloc_fragment((hc, block), FP32)
            val_l = T.alloc_fragment((block,), FP32)
            comb_l = T.alloc_fragment((hc, hc), FP32)
            post_l = T.alloc_fragment((hc,), FP32)
            T.copy(comb[tok, 0, 0], comb_l)
            T.copy(post[tok, 0], post_l)
            for bi in T.Serial(T.ceildiv(hidden, block)):
                T.copy(residual[tok, 0, bi * block], res_s)
                T.copy(value[tok, bi * block], val_s)
                T.copy(res_s, res_l)
                T.copy(val_s, val_l)
                for c, i in T.Parallel(hc, block):
                    acc[c, i] = post_l[c] * val_l[i]
                    for s in T.vectorized(hc):
                        acc[c, i] += comb_l[s, c] * res_l[s, i]
                T.copy(acc, out[tok, 0, bi * block])

    return post_mix


@tilecute.jit(pass_configs=PASS_CONFIGS)
def prenorm_gemv_warps(hidden=256, hc=4, outputs=24, threads=256, tile=4):
    """out[t, o] = sum_k x[t, k] * W[o, k] and sq[t] = sum_k x[t, k]^2 over k = hc * hidden,
    tile outputs per block column: T.alloc_local accumulators cleared by T.clear, T.unroll over
    the tile, T.warp_reduce_sum, shared buffers allocated after the loop, lane 0 of each warp
    stores, warp 0 sums the warps into T.alloc_var(init=0.0)s declared inside branches."""
    tokens = T.symbolic("tokens")
    width = hc * hidden
    iters = width // threads
    tiles = T.ceildiv(outputs, tile)

    @T.prim_func
    def gemv(x: T.Tensor[(tokens, width), BF16], W: T.Tensor[(outputs, width), FP32],
             out: T.Tensor[(tokens, outputs), FP32], sq: T.Tensor[(tokens,), FP32]):
        with T.Kernel(tokens, tiles, threads=threads) as (tok, tl_):
            th = T.get_thread_binding()
            acc = T.alloc_local((tile,), FP32)
            sqa = T.alloc_local((1,), FP32)
            T.clear(acc)
            T.clear(sqa)
            for it in T.serial(iters):
                k = it * threads + th
                xv = x[tok, k]
                for r in T.unroll(tile):
                    o = tl_ * tile + r
                    if o < outputs:
                        acc[r] += xv * W[o, k]
                if tl_ == 0:
                    sqa[0] += xv * xv
            for r in T.unroll(tile):
                acc[r] = T.warp_reduce_sum(acc[r])
            if tl_ == 0:
                sqa[0] = T.warp_reduce_sum(sqa[0])
            lane = th % 32
            warp = th // 32
            warps = threads // 32
            w_out = T.alloc_shared((warps, tile), FP32)
            w_sq = T.alloc_shared((warps,), FP32)
            if lane == 0:
                for r in T.unroll(tile):
                    w_out[warp, r] = acc[r]
                if tl_ == 0:
                    w_sq[warp] = sqa[0]
            T.sync_threads()
            if warp == 0:
                if lane < tile:
                    red = T.alloc_var(FP32, init=0.0)
                    for sw in T.unroll(warps):
                        red += w_out[sw, lane]
                    o = tl_ * tile + lane
                    if o < outputs:
                        out[tok, o] = red
                if lane == 0 and tl_ == 0:
                    red_sq = T.alloc_var(FP32, init=0.0)
                    for sw in T.unroll(warps):
                        red_sq += w_sq[sw]
                    sq[tok] = red_sq

    return gemv


@tilecute.jit(pass_configs=PASS_CONFIGS)
def sinkhorn_split(hc=4, iters=5, eps=1e-6):
    """mixes[t] -> pre (sigmoid), post (2 sigmoid), comb (hc x hc softmax rows, then alternate
    column / row normalisation): a 1-D shared copy of mixes[t, :], T.reduce_max / T.reduce_sum
    over dim=1 and dim=0 of a 4x4 fragment, 64 threads, T.copy(frag, comb[t, :, :])."""
    n = T.symbolic("n")
    mix = (2 + hc) * hc

    @T.prim_func
    def split(mixes: T.Tensor[(n, mix), FP32], hc_scale: T.Tensor[(3,), FP32], hc_base: T.Tensor[(mix,), FP32],
              pre: T.Tensor[(n, hc), FP32], post: T.Tensor[(n, hc), FP32], comb: T.Tensor[(n, hc, hc), FP32]):
        with T.Kernel(n, threads=64) as i:
            mix_s = T.alloc_shared(mix, FP32)
            cf = T.alloc_fragment((hc, hc), FP32)
            T.copy(mixes[i, :], mix_s)
            for j in T.Parallel(hc):
                pre[i, j] = T.sigmoid(mix_s[j] * hc_scale[0] + hc_base[j]) + eps
            for j in T.Parallel(hc):
                post[i, j] = 2 * T.sigmoid(mix_s[j + hc] * hc_scale[1] + hc_base[j + hc])
            for j, k in T.Parallel(hc, hc):
                cf[j, k] = mix_s[j * hc + k + hc * 2] * hc_scale[2] + hc_base[j * hc + k + hc * 2]
            row_sum = T.alloc_fragment(hc, FP32)
            col_sum = T.alloc_fragment(hc, FP32)
            row_max = T.alloc_fragment(hc, FP32)
            T.reduce_max(cf, row_max, dim=1)
            for j, k in T.Parallel(hc, hc):
                cf[j, k] = T.exp(cf[j, k] - row_max[j])
            T.reduce_sum(cf, row_sum, dim=1)
            for j, k in T.Parallel(hc, hc):
                cf[j, k] = cf[j, k] / row_sum[j] + eps
            T.reduce_sum(cf, col_sum, dim=0)
            for j, k in T.Parallel(hc, hc):
                cf[j, k] = cf[j, k] / (col_sum[k] + eps)
            for _ in T.serial(iters - 1):
                T.reduce_sum(cf, row_sum, dim=1)
                for j, k in T.Parallel(hc, hc):
                    cf[j, k] = cf[j, k] / (row_sum[j] + eps)
                T.reduce_sum(cf, col_sum, dim=0)
                for j, k in T.Parallel(hc, hc):
                    cf[j, k] = cf[j, k] / (col_sum[k] + eps)
            T.copy(cf, comb[i, :, :])

    return split


# ---- block-scaled GEMMs ------------------------------------------------------------------------
@tilecute.jit(pass_configs=PASS_CONFIGS)
def fp8_block_scaled_gemm(N=256, K=512, out_dtype=BF16):
    """C = (A * sa) (B * sb)^T with one A scale per (row, 128 of K) and one B scale per (128
    rows, 128 of K): T.use_swizzle(panel_size=10), the B scale bound to a name from a T.Cast
    of a global read inside the pipelined loop, the row scales written to a shared vector by
    T.Parallel and read after the GEMM, a second accumulator, the first cleared each step."""
    M = T.symbolic("M")
    g = 128
    bM, bN, bK = 32, 128, 128

    @T.prim_func
    def gemm(A: T.Tensor[(M, K), FP8], B: T.Tensor[(N, K), FP8], C: T.Tensor[(M, N), out_dtype],
             sa: T.Tensor[(M, T.ceildiv(K, g)), FP32],
             sb: T.Tensor[(T.ceildiv(N, g), T.ceildiv(K, g)), FP32]):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=128) as (bx, by):
            A_s = T.alloc_shared((bM, bK), FP8)
            B_s = T.alloc_shared((bN, bK), FP8)
            C_s = T.alloc_shared((bM, bN), out_dtype)
            sc_s = T.alloc_shared((bM), FP32)
            C_l = T.alloc_fragment((bM, bN), FP32)
            C_acc = T.alloc_fragment((bM, bN), FP32)
            T.use_swizzle(panel_size=10)
            T.clear(C_l)
            T.clear(C_acc)
            for k in T.Pipelined(T.ceildiv(K, bK), num_stages=3):
                T.copy(A[by * bM, k * bK], A_s)
                T.copy(B[bx * bN, k * bK], B_s)
                s_b = T.Cast(FP32, sb[bx * bN // g, k])
                for i in T.Parallel(bM):
                    sc_s[i] = T.Cast(FP32, sa[by * bM + i, k]) * s_b
                T.gemm(A_s, B_s, C_l, transpose_B=True)
                for i, j in T.Parallel(bM, bN):
                    C_acc[i, j] += C_l[i, j] * sc_s[i]
                T.clear(C_l)
            T.copy(C_acc, C_s)
            T.copy(C_s, C[by * bM, bx * bN])

    return gemm


@tilecute.jit(pass_configs=PASS_CONFIGS)
def fp4_weight_gemm(N=128, K=256):
    """C = (A * sa) (B4 * sb)^T with B in float4_e2m1fn, 32-wide K blocks: each B tile converted
    to fp8 through float32 in shared memory, per-row B scales per 32 of K, A scales per 128."""
    M = T.symbolic("M")
    bM, bN, bK = 32, 128, 32

    @T.prim_func
    def gemm(A: T.Tensor[(M, K), FP8], B: T.Tensor[(N, K), "float4_e2m1fn"], C: T.Tensor[(M, N), BF16],
             sa: T.Tensor[(M, T.ceildiv(K, 128)), FP32], sb: T.Tensor[(N, T.ceildiv(K, 32)), FP32]):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=128) as (bx, by):
            A_s = T.alloc_shared((bM, bK), FP8)
            B4_s = T.alloc_shared((bN, bK), "float4_e2m1fn")
            B_s = T.alloc_shared((bN, bK), FP8)
            C_s = T.alloc_shared((bM, bN), BF16)
            C_l = T.alloc_fragment((bM, bN), FP32)
            C_acc = T.alloc_fragment((bM, bN), FP32)
            sa_f = T.alloc_fragment((bM,), FP32)
            sb_f = T.alloc_fragment((bN,), FP32)
            T.clear(C_l)
            T.clear(C_acc)
            for k in T.Pipelined(T.ceildiv(K, bK), num_stages=2):
                T.copy(A[by * bM, k * bK], A_s)
                T.copy(B[bx * bN, k * bK], B4_s)
                for i, j in T.Parallel(bN, bK):
                    B_s[i, j] = T.Cast(FP8, T.Cast(FP32, B4_s[i, j]))
                for i in T.Parallel(bN):
                    sb_f[i] = sb[bx * bN + i, k]
                for i in T.Parallel(bM):
                    sa_f[i] = sa[by * bM + i, k // 4]
                T.gemm(A_s, B_s, C_l, transpose_B=True)
                for i, j in T.Parallel(bM, bN):
                    C_acc[i, j] += C_l[i, j] * sa_f[i] * sb_f[j]
                T.clear(C_l)
            T.copy(C_acc, C_s)
            T.copy(C_s, C[by * bM, bx * bN])

    return gemm


@tilecute.jit(pass_configs=PASS_CONFIGS)
def sink_sparse_attention(h=16, d=64, scale=None, block=64):
    """Per (query, batch): top-k keys by index (-1 = none, the count symbolic), the block count
    from tilecute.cdiv of a symbol, idxs in a fragment from T.if_then_else past the end, keys
    gathered at a fragment index, exp (not exp2) online softmax, and a learned sink added to
    the denominator; q copied by q[by, bx, :, :], o written by o[by, bx, :, :]."""
    b = T.symbolic("b")
    m = T.symbolic("m")
    n = T.symbolic("n")
    topk = T.symbolic("topk")
    if scale is None:
        scale = (1.0 / d) ** 0.5
    nb = tilecute.cdiv(topk, block)

    @T.prim_func
    def attn(q: T.Tensor[(b, m, h, d), BF16], kv: T.Tensor[(b, n, d), BF16], o: T.Tensor[(b, m, h, d), BF16],
             sink: T.Tensor[(h,), FP32], topk_idxs: T.Tensor[(b, m, topk), INT32]):
        with T.Kernel(m, b, threads=128) as (bx, by):
            q_s = T.alloc_shared((h, d), BF16)
            kv_s = T.alloc_shared((block, d), BF16)
            o_s = T.alloc_shared((h, d), BF16)
            p_s = T.alloc_shared((h, block), BF16)
            idxs = T.alloc_fragment(block, INT32)
            acc_s = T.alloc_fragment((h, block), FP32)
            acc_o = T.alloc_fragment((h, d), FP32)
            mx = T.alloc_fragment(h, FP32)
            mx_prev = T.alloc_fragment(h, FP32)
            rescale = T.alloc_fragment(h, FP32)
            rsum = T.alloc_fragment(h, FP32)
            lsum = T.alloc_fragment(h, FP32)
            T.clear(acc_o)
            T.clear(lsum)
            T.fill(mx, -T.infinity(FP32))
            T.copy(q[by, bx, :, :], q_s)
            for t in T.Pipelined(nb, num_stages=2):
                for i in T.Parallel(block):
                    idxs[i] = T.if_then_else(t * block + i < topk, topk_idxs[by, bx, t * block + i], -1)
                for i, j in T.Parallel(block, d):
                    kv_s[i, j] = T.if_then_else(idxs[i] != -1, kv[by, idxs[i], j], 0)
                for i, j in T.Parallel(h, block):
                    acc_s[i, j] = T.if_then_else(idxs[j] != -1, 0, -T.infinity(FP32))
                T.gemm(q_s, kv_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(h, block):
                    acc_s[i, j] *= scale
                T.copy(mx, mx_prev)
                T.reduce_max(acc_s, mx, dim=1, clear=False)
                for i in T.Parallel(h):
                    rescale[i] = T.exp(mx_prev[i] - mx[i])
                for i, j in T.Parallel(h, block):
                    acc_s[i, j] = T.exp(acc_s[i, j] - mx[i])
                T.reduce_sum(acc_s, rsum, dim=1)
                for i in T.Parallel(h):
                    lsum[i] = lsum[i] * rescale[i] + rsum[i]
                T.copy(acc_s, p_s)
                for i, j in T.Parallel(h, d):
                    acc_o[i, j] *= rescale[i]
                T.gemm(p_s, kv_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i in T.Parallel(h):
                lsum[i] += T.exp(sink[i] - mx[i])
            for i, j in T.Parallel(h, d):
                acc_o[i, j] /= lsum[i]
            T.copy(acc_o, o_s)
            T.copy(o_s, o[by, bx, :, :])

    return attn


# ---- MoE routing / activation ----------------------------------------------------------------
@tilecute.jit(out_idx=[1])
def silu_and_mul_rows(d=512, blk=256):
    """out[t, :] = silu(x[t, :d]) * x[t, d:], one block per (token, column block): as (bx, by)
    over T.ceildiv, a symbolic token count, a scalar-shaped ``T.Tensor[(n), dtype]`` scale."""
    n = T.symbolic("n")

    @T.prim_func
    def act(x: T.Tensor[(n, 2 * d), BF16], out: T.Tensor[(n, d), BF16], s: T.Tensor[(n), FP32]):
        with T.Kernel(n, T.ceildiv(d, blk), threads=128) as (bx, by):
            g = T.alloc_fragment((blk,), FP32)
            u = T.alloc_fragment((blk,), FP32)
            T.copy(x[bx, by * blk:(by + 1) * blk], g)
            T.copy(x[bx, d + by * blk:d + (by + 1) * blk], u)
            for i in T.Parallel(blk):
                g[i] = g[i] / (1.0 + T.exp(-g[i])) * u[i] * s[bx]
            T.copy(g, out[bx, by * blk])

    return act


@tilecute.jit(out_idx=[1, 2])
def moe_align_counts(E=16, topk=2, block_size=16, threads=256):
    """One block: count each expert's (token, k) slots with shared T.atomic_add, pad each count
    up to block_size, an exclusive scan by thread 0 in a T.serial loop, then every slot's
    position in the padded order from a shared cursor (T.atomic_add(..., return_prev=True))."""
    n = T.symbolic("n")

    @T.prim_func
    def align(topk_ids: T.Tensor[(n, topk), INT32], sorted_pos: T.Tensor[(n, topk), INT32],
              offsets: T.Tensor[(E + 1,), INT32]):
        with T.Kernel(1, threads=threads) as _:
            tx = T.get_thread_binding()
            cnt = T.alloc_shared((E,), INT32)
            off = T.alloc_shared((E + 1,), INT32)
            cur = T.alloc_shared((E,), INT32)
            T.clear(cnt)
            T.sync_threads()
            for it in T.serial(T.ceildiv(n * topk, threads)):
                f = it * threads + tx
                if f < n * topk:
                    T.atomic_add(cnt[topk_ids[f // topk, f % topk]], 1)
            T.sync_threads()
            if tx == 0:
                off[0] = 0
                for e in T.serial(E):
                    off[e + 1] = off[e] + T.ceildiv(cnt[e], block_size) * block_size
            T.sync_threads()
            if tx < E:
                cur[tx] = off[tx]
            for e in T.Parallel(E + 1):
                offsets[e] = off[e]
            T.sync_threads()
            for it in T.serial(T.ceildiv(n * topk, threads)):
                f = it * threads + tx
                if f < n * topk:
                    sorted_pos[f // topk, f % topk] = T.atomic_add(cur[topk_ids[f // topk, f % topk]], 1,
                                                                   return_prev=True)

    return align


@tilecute.jit(out_idx=[2])
def moe_grouped_gemm_offsets(E=4, N=128, K=128, bM=64, bN=64, bK=32):
    """Grouped GEMM over tokens sorted by expert: block bx covers rows [bx*bM, bx*bM + bM) of
    the sorted activations, its expert found by a while loop over the padded offsets into a
    T.alloc_var, the expert's weight chosen by W[e, ...] in a point-start copy, rows past the
    total masked in a T.Parallel store."""
    T_rows = T.symbolic("T_rows")

    @T.prim_func
    def grouped(A: T.Tensor[(T_rows, K), BF16], W: T.Tensor[(E, N, K), BF16], C: T.Tensor[(T_rows, N), FP32],
                offsets: T.Tensor[(E + 1,), INT32]):
        with T.Kernel(T.ceildiv(T_rows, bM), T.ceildiv(N, bN), threads=128) as (bx, by):
            A_s = T.alloc_shared((bM, bK), BF16)
            W_s = T.alloc_shared((bN, bK), BF16)
            acc = T.alloc_fragment((bM, bN), FP32)
            e = T.alloc_var(INT32, init=0)
            while e < E - 1 and offsets[e + 1] <= bx * bM:
                e += 1
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bK), num_stages=2):
                T.copy(A[bx * bM, k * bK], A_s)
                T.copy(W[e, by * bN, k * bK], W_s)
                T.gemm(A_s, W_s, acc, transpose_B=True)
            for i, j in T.Parallel(bM, bN):
                if bx * bM + i < offsets[E]:
                    C[bx * bM + i, by * bN + j] = acc[i, j]

    return grouped


@tilecute.jit(out_idx=[1, 2])
def router_topk_softmax(E=32, K=2, threads=32):
    """Per token (one warp): softmax over E router logits held in shared memory, then K rounds
    of argmax by T.reduce_max on a fragment and a first-index search with T.atomic_min, each
    chosen expert's probability masked out before the next round; weights renormalised."""
    n = T.symbolic("n")

    @T.prim_func
    def route(logits: T.Tensor[(n, E), FP32], ids: T.Tensor[(n, K), INT32], w: T.Tensor[(n, K), FP32]):
        with T.Kernel(n, threads=threads) as t:
            p = T.alloc_fragment((E,), FP32)
            mx = T.alloc_fragment((1,), FP32)
            sm = T.alloc_fragment((1,), FP32)
            best = T.alloc_shared((1,), INT32)
            picked = T.alloc_shared((K,), FP32)
            T.copy(logits[t, :], p)
            T.reduce_max(p, mx, dim=0)
            for i in T.Parallel(E):
                p[i] = T.exp(p[i] - mx[0])
            T.reduce_sum(p, sm, dim=0)
            for i in T.Parallel(E):
                p[i] = p[i] / sm[0]
            for r in T.serial(K):
                T.reduce_max(p, mx, dim=0)
                best[0] = E
                T.sync_threads()
                for i in T.Parallel(E):
                    if p[i] == mx[0]:
                        T.atomic_min(best[0], i)
                T.sync_threads()
                ids[t, r] = best[0]
                picked[r] = mx[0]
                for i in T.Parallel(E):
                    if i == best[0]:
                        p[i] = -1.0
                T.sync_threads()
            for r in T.Parallel(K):
                w[t, r] = picked[r] / (picked[0] + picked[1])

    return route


# ---- norms -------------------------------------------------------------------------------------
@tilecute.jit(pass_configs=PASS_CONFIGS)
def fused_add_rmsnorm(N=1024, blk_m=4, eps=1e-5):
    """x += residual (written back into residual), then x * rsqrt(mean(x^2) + eps) * w into x:
    both tensors updated in place, blk_m rows per block held whole in a fragment."""
    M = T.symbolic("M")

    @T.prim_func
    def norm(x: T.Tensor[(M, N), BF16], residual: T.Tensor[(M, N), BF16], weight: T.Tensor[(N,), BF16]):
        with T.Kernel(T.ceildiv(M, blk_m), threads=256) as bx:
            xf = T.alloc_fragment((blk_m, N), FP32)
            ss = T.alloc_fragment((blk_m,), FP32)
            sq = T.alloc_fragment((blk_m, N), FP32)
            for i, j in T.Parallel(blk_m, N):
                xf[i, j] = T.Cast(FP32, x[bx * blk_m + i, j]) + T.Cast(FP32, residual[bx * blk_m + i, j])
            T.copy(xf, residual[bx * blk_m, 0])
            for i, j in T.Parallel(blk_m, N):
                sq[i, j] = xf[i, j] * xf[i, j]
            T.reduce_sum(sq, ss, dim=1)
            for i in T.Parallel(blk_m):
                ss[i] = T.rsqrt(ss[i] / N + eps)
            for i, j in T.Parallel(blk_m, N):
                x[bx * blk_m + i, j] = xf[i, j] * ss[i] * weight[j]

    return norm


@tilecute.jit(out_idx=[-1])
def layernorm_two_pass(N=768, blk_m=8, eps=1e-5):
    """LayerNorm by two T.reduce_sum passes (mean, then centred squares) over a row tile copied
    with a slice start ``X[bx * blk_m:(bx + 1) * blk_m, :]``; gamma / beta in fragments."""
    M = T.symbolic("M")

    @T.prim_func
    def ln(X: T.Tensor((M, N), "float16"), G: T.Tensor((N,), "float16"), Bt: T.Tensor((N,), "float16"),
           Y: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(M, blk_m), threads=256) as bx:
            xs = T.alloc_shared((blk_m, N), "float16")
            xf = T.alloc_fragment((blk_m, N), "float")
            cf = T.alloc_fragment((blk_m, N), "float")
            mean = T.alloc_fragment((blk_m,), "float")
            var = T.alloc_fragment((blk_m,), "float")
            g = T.alloc_fragment((N,), "float")
            bb = T.alloc_fragment((N,), "float")
            T.copy(X[bx * blk_m:(bx + 1) * blk_m, :], xs)
            T.copy(xs, xf)
            T.copy(G, g)
            T.copy(Bt, bb)
            T.reduce_sum(xf, mean, dim=1)
            for i in T.Parallel(blk_m):
                mean[i] = mean[i] / N
            for i, j in T.Parallel(blk_m, N):
                cf[i, j] = (xf[i, j] - mean[i]) * (xf[i, j] - mean[i])
            T.reduce_sum(cf, var, dim=1)
            for i in T.Parallel(blk_m):
                var[i] = T.rsqrt(var[i] / N + eps)
            for i, j in T.Parallel(blk_m, N):
                xf[i, j] = (xf[i, j] - mean[i]) * var[i] * g[j] + bb[j]
            T.copy(xf, Y[bx * blk_m:(bx + 1) * blk_m, :])

    return ln


# ---- quantized weights, caches, state-space pieces --------------------------------------------
@tilecute.jit(out_idx=[-1])
def int4_dequant_gemm(N=128, K=256, group=64, bM=64, bN=64, bK=64):
    """C = A (dequant(Bq))^T with Bq two unsigned 4-bit weights per uint8 along K (low nibble
    first), one scale and zero per (row, group): the nibble picked by shifts of the packed byte
    in a T.Parallel nest writing the bf16 shared tile the T.gemm reads."""
    M = T.symbolic("M")

    @T.prim_func
    def gemm(A: T.Tensor((M, K), "bfloat16"), Bq: T.Tensor((N, K // 2), "uint8"),
             Sc: T.Tensor((N, K // group), "bfloat16"), Zr: T.Tensor((N, K // group), "bfloat16"),
             C: T.Tensor((M, N), "bfloat16")):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=128) as (bx, by):
            A_s = T.alloc_shared((bM, bK), "bfloat16")
            Bq_s = T.alloc_shared((bN, bK // 2), "uint8")
            B_s = T.alloc_shared((bN, bK), "bfloat16")
            acc = T.alloc_fragment((bM, bN), "float")
            T.clear(acc)
            for k in T.Pipelined(K // bK, num_stages=2):
                T.copy(A[by * bM, k * bK], A_s)
                T.copy(Bq[bx * bN, k * bK // 2], Bq_s)
                for i, j in T.Parallel(bN, bK):
                    q = (Bq_s[i, j // 2] >> ((j % 2) * 4)) & T.uint8(0xF)
                    g = (k * bK + j) // group
                    B_s[i, j] = (T.Cast("float32", q) - T.Cast("float32", Zr[bx * bN + i, g])) * \
                        T.Cast("float32", Sc[bx * bN + i, g])
                T.gemm(A_s, B_s, acc, transpose_B=True)
            T.copy(acc, C[by * bM, bx * bN])

    return gemm


@tilecute.jit(out_idx=[-1])
def paged_kv_gather(page_size=16, heads=4, dim=64, max_pages=8):
    """Gather one sequence's keys from a paged cache: for token t of batch b, page =
    block_table[b, t // page_size], row t % page_size; the copy's start computed from a table
    read bound to a name, tokens past seq_lens[b] zero-filled."""
    B = T.symbolic("B")
    P = T.symbolic("P")
    L = max_pages * page_size

    @T.prim_func
    def gather(cache: T.Tensor[(P, page_size, heads, dim), BF16], block_table: T.Tensor[(B, max_pages), INT32],
               seq_lens: T.Tensor[(B,), INT32], out: T.Tensor[(B, L, heads, dim), BF16]):
        with T.Kernel(L, B, threads=128) as (t, b):
            row = T.alloc_shared((heads, dim), BF16)
            page = block_table[b, t // page_size]
            if t < seq_lens[b]:
                T.copy(cache[page, t % page_size, :, :], row)
            else:
                T.clear(row)
            T.copy(row, out[b, t, :, :])

    return gather


@tilecute.jit(out_idx=[-1])
def causal_conv1d_update(D=256, W=4, blk=128):
    """One decode step of a depthwise causal conv: the (D, W-1) state shifted left by one with x
    appended, y = silu(sum_w state_w * w + bias), state updated in place (a T.serial over W
    inside T.Parallel over channels)."""
    Bsz = T.symbolic("Bsz")

    @T.prim_func
    def step(x: T.Tensor[(Bsz, D), FP32], state: T.Tensor[(Bsz, D, W - 1), FP32], w: T.Tensor[(D, W), FP32],
             bias: T.Tensor[(D,), FP32], y: T.Tensor[(Bsz, D), FP32]):
        with T.Kernel(T.ceildiv(D, blk), Bsz, threads=blk) as (bx, b):
            for c in T.Parallel(blk):
                ch = bx * blk + c
                acc = T.alloc_var(FP32, init=0.0)
                acc = bias[ch] + x[b, ch] * w[ch, W - 1]
                for k in T.serial(W - 1):
                    acc += state[b, ch, k] * w[ch, k]
                for k in T.serial(W - 2):
                    state[b, ch, k] = state[b, ch, k + 1]
                state[b, ch, W - 2] = x[b, ch]
                y[b, ch] = acc / (1.0 + T.exp(-acc))

    return step


@tilecute.jit(out_idx=[1, 2])
def per_token_int8_quant(N=512):
    """Per row: s = absmax / 127, q = round(x / s) as int8 (T.round, T.Cast), one block per row
    over a fragment of the whole row; the scale written by T.copy of a (1,) fragment."""
    M = T.symbolic("M")

    @T.prim_func
    def quant(X: T.Tensor[(M, N), BF16], Q: T.Tensor[(M, N), "int8"], S: T.Tensor[(M, 1), FP32]):
        with T.Kernel(M, threads=128) as r:
            xf = T.alloc_fragment((1, N), FP32)
            am = T.alloc_fragment((1,), FP32)
            T.copy(X[r:r + 1, :], xf)
            T.reduce_absmax(xf, am, dim=1)
            for i in T.Parallel(1):
                am[i] = T.max(am[i], 1e-8) / 127.0
            for i, j in T.Parallel(1, N):
                Q[r + i, j] = T.Cast("int8", T.clamp(T.round(xf[i, j] / am[i]), -127.0, 127.0))
            T.copy(am, S[r, 0:1])

    return quant


@tilecute.jit(out_idx=[-1])
def rotary_neox_rows(heads=8, dim=128, blk_t=4):
    """NeoX rotary (halves): out[.., :d/2] = x1 cos - x2 sin, out[.., d/2:] = x2 cos + x1 sin,
    cos/sin indexed by positions[t] (a gather of the table row), blk_t tokens per block,
    a 3-D T.Parallel nest."""
    tokens = T.symbolic("tokens")
    max_pos = T.symbolic("max_pos")
    half = dim // 2

    @T.prim_func
    def rope(x: T.Tensor[(tokens, heads, dim), BF16], positions: T.Tensor[(tokens,), "int64"],
             cos_sin: T.Tensor[(max_pos, dim), FP32], out: T.Tensor[(tokens, heads, dim), BF16]):
        with T.Kernel(T.ceildiv(tokens, blk_t), threads=256) as bx:
            for i, h, j in T.Parallel(blk_t, heads, half):
                t = bx * blk_t + i
                if t < tokens:
                    p = positions[t]
                    c = cos_sin[p, j]
                    s = cos_sin[p, half + j]
                    x1 = T.Cast(FP32, x[t, h, j])
                    x2 = T.Cast(FP32, x[t, h, half + j])
                    out[t, h, j] = x1 * c - x2 * s
                    out[t, h, half + j] = x2 * c + x1 * s

    return rope


@tilecute.jit(out_idx=[-1])
def ssd_chunk_state(chunk=64, headdim=64, dstate=64):
    """Mamba-2 chunk state: states[b, c, h] = sum_l (B[l] * exp(dA_last - dA[l]) * dt[l])^T x[l]
    as one T.gemm with transpose_A=True over the chunk's rows (B scaled in shared memory first),
    the decay's last element read from global into a name."""
    batch = T.symbolic("batch")
    nchunks = T.symbolic("nchunks")
    nheads = 2

    @T.prim_func
    def state(x: T.Tensor((batch, nchunks * chunk, nheads, headdim), "float16"),
              Bm: T.Tensor((batch, nchunks * chunk, dstate), "float16"),
              dt: T.Tensor((batch, nheads, nchunks, chunk), "float32"),
              dA: T.Tensor((batch, nheads, nchunks, chunk), "float32"),
              states: T.Tensor((batch, nchunks, nheads, dstate, headdim), "float32")):
        with T.Kernel(nchunks, nheads, batch, threads=128) as (c, h, b):
            x_s = T.alloc_shared((chunk, headdim), "float16")
            B_s = T.alloc_shared((chunk, dstate), "float16")
            scale = T.alloc_shared((chunk,), "float32")
            acc = T.alloc_fragment((dstate, headdim), "float32")
            last = dA[b, h, c, chunk - 1]
            T.copy(x[b, c * chunk:(c + 1) * chunk, h, :], x_s)
            T.copy(Bm[b, c * chunk:(c + 1) * chunk, :], B_s)
            for l in T.Parallel(chunk):
                scale[l] = T.exp(last - dA[b, h, c, l]) * dt[b, h, c, l]
            for l, s in T.Parallel(chunk, dstate):
                B_s[l, s] = B_s[l, s] * scale[l]
            T.gemm(B_s, x_s, acc, transpose_A=True, clear_accum=True)
            T.copy(acc, states[b, c, h, :, :])

    return state


@tilecute.jit(out_idx=[-1])
def gated_chunk_cumsum(chunk=64, H=4):
    """Per (chunk, head): the inclusive prefix sum of log-gates over the chunk's positions by
    T.cumsum on a shared column, and its reverse (reverse=True) into a second output half."""
    S = T.symbolic("S")

    @T.prim_func
    def cs(g: T.Tensor[(S, H), FP32], o: T.Tensor[(2, S, H), FP32]):
        with T.Kernel(T.ceildiv(S, chunk), H, threads=64) as (c, h):
            a = T.alloc_shared((chunk,), FP32)
            r = T.alloc_shared((chunk,), FP32)
            for i in T.Parallel(chunk):
                a[i] = T.if_then_else(c * chunk + i < S, g[c * chunk + i, h], 0.0)
                r[i] = a[i]
            T.cumsum(a, dim=0)
            T.cumsum(r, dim=0, reverse=True)
            for i in T.Parallel(chunk):
                if c * chunk + i < S:
                    o[0, c * chunk + i, h] = a[i]
                    o[1, c * chunk + i, h] = r[i]

    return cs


@tilecute.jit(out_idx=[-1])
def gumbel_argmax_sample(V=1000, threads=256):
    """Sampling by argmax of logits / temperature + gumbel noise (given): a block per row, each
    thread's running best over a strided T.serial, then the block's best by T.reduce_max over
    a (threads,) fragment and the smallest index holding it by T.atomic_min into shared."""
    B = T.symbolic("B")

    @T.prim_func
    def sample(logits: T.Tensor[(B, V), FP32], noise: T.Tensor[(B, V), FP32], temp: T.Tensor[(B,), FP32],
               out: T.Tensor[(B,), INT32]):
        with T.Kernel(B, threads=threads) as b:
            tx = T.get_thread_binding()
            best = T.alloc_fragment((threads,), FP32)
            top = T.alloc_fragment((1,), FP32)
            arg = T.alloc_shared((1,), INT32)
            for t in T.Parallel(threads):
                best[t] = -T.infinity(FP32)
                for k in T.serial(T.ceildiv(V, threads)):
                    v = k * threads + t
                    if v < V:
                        best[t] = T.max(best[t], logits[b, v] / temp[b] + noise[b, v])
            T.reduce_max(best, top, dim=0)
            if tx == 0:
                arg[0] = V
            T.sync_threads()
            for k in T.serial(T.ceildiv(V, threads)):
                v = k * threads + tx
                if v < V:
                    if logits[b, v] / temp[b] + noise[b, v] == top[0]:
                        T.atomic_min(arg[0], v)
            T.sync_threads()
            if tx == 0:
                out[b] = arg[0]

    return sample
