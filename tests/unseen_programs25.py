"""A twenty-fifth set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang), from the newest TileLang example domains: lazy-annotated ``@jit`` factories
(``T.const("a, b")``, ``T.Tensor[[...], dtype]`` parameter annotations in the body, ``T.empty``
outputs, ``T.float``), hyper-connection mixing (DeepSeek mHC pre / post), the DSA indexer's
logit cleaning and fp8 block mean pooling, per-group fp8 activation quantisation with
``T.clamp``, chunked gated linear attention pieces (GDN / KDA: chunk cumsum, the scaled K K^T,
the chunk output), block-causal and block-sparse (SeerAttention-style) flash attention,
attention with a per-head sink, flash decoding with a split-KV pass and a combine pass, a
vertical-column sparse attention (MInference-style index lists), a Hadamard butterfly in shared
memory, a top-k by repeated ``T.reduce_max``, split-K GEMV with ``T.atomic_add``, an int4
dequantising GEMM, a MoE token gather / weighted combine, a fused add + RMSNorm, a two-pass
online softmax and a lightning-indexer style weighted ReLU score; then top-k-index sparse MQA,
a grouped GEMM over ragged groups, KDA's per-channel gated intra-chunk scores, mHC warp roles
(Sinkhorn on one warp of three) and a TF32 gemm, an MInference-style async prefetch ring with
program-managed commit / wait groups, a DSA sparse dKV backward (shifted accumulator slabs,
``T.atomic_add`` through the index list) and GDN's chunk recurrence of the delta-rule state.

``tests/test_unseen_programs25.py`` builds each to a cubin on the CPU, checks what each means
in the generated source, and on a GPU compares it with a torch reference."""

import math

import tilecute
import tilecute.language as T


# ---- lazy-annotated factories (the newest @jit style) --------------------------------------
@tilecute.jit
def dsa_clean_logits(Logits, KS, KE, threads=128, block_K=512):
    """In place: row r keeps columns [KS[r], KE[r]); columns outside become -inf and the two
    ends +inf.  Shapes come from ``T.const("seq, seq_kv")``, the thread index from
    ``T.thread_binding``, the dtype from ``T.float``."""
    seq, seq_kv = T.const("seq, seq_kv")
    dtype = T.float
    Logits: T.Tensor[[seq, seq_kv], dtype]
    KS: T.Tensor[[seq], T.int32]
    KE: T.Tensor[[seq], T.int32]
    with T.Kernel(seq, threads=threads) as bx:
        tx = T.thread_binding(0, threads, thread="threadIdx.x")
        s = KS[bx]
        e = KE[bx]
        for n in T.Pipelined(T.ceildiv(seq_kv, block_K)):
            for k in T.serial(block_K // threads):
                idx = n * block_K + k * threads + tx
                if idx < seq_kv:
                    if idx == s or idx == e - 1:
                        Logits[bx, idx] = T.infinity(dtype)
                    if idx < s or idx >= e:
                        Logits[bx, idx] = -T.infinity(dtype)


@tilecute.jit
def mhc_post_mix(A, B, C, D, hc=4, hidden=512, h_blk=256, threads=128):
    """Hyper-connection post mix: X[n, o, :] = C[n, o] * D[n, :] + sum_i A[n, i, o] B[n, i, :]
    (bf16 in, fp32 math); the token count is ``T.dynamic`` and X comes from ``T.empty``."""
    n = T.dynamic("num_tokens")
    A: T.Tensor((n, hc, hc), T.float32)
    B: T.Tensor((n, hc, hidden), T.bfloat16)
    C: T.Tensor((n, hc), T.float32)
    D: T.Tensor((n, hidden), T.bfloat16)
    X = T.empty((n, hc, hidden), T.bfloat16)
    with T.Kernel(n, threads=threads) as tok:
        b_s = T.alloc_shared((hc, h_blk), T.bfloat16)
        d_s = T.alloc_shared((h_blk,), T.bfloat16)
        x_s = T.alloc_shared((hc, h_blk), T.bfloat16)
        a_f = T.alloc_fragment((hc, hc), T.float32)
        c_f = T.alloc_fragment((hc,), T.float32)
        b_f = T.alloc_fragment((hc, h_blk), T.float32)
        d_f = T.alloc_fragment((h_blk,), T.float32)
        x_f = T.alloc_fragment((hc, h_blk), T.float32)
        T.copy(A[tok, 0, 0], a_f)
        T.copy(C[tok, 0], c_f)
        for hb in T.Pipelined(hidden // h_blk, num_stages=2):
            T.copy(B[tok, 0, hb * h_blk], b_s)
            T.copy(D[tok, hb * h_blk], d_s)
            T.copy(b_s, b_f)
            T.copy(d_s, d_f)
            for o, j in T.Parallel(hc, h_blk):
                x_f[o, j] = c_f[o] * d_f[j]
                for i in T.serial(hc):
                    x_f[o, j] += a_f[i, o] * b_f[i, j]
            T.copy(x_f, x_s)
            T.copy(x_s, X[tok, 0, hb * h_blk])
    return X


@tilecute.jit(out_idx=[2])
def mhc_pre_rms_gate(hc=4, hidden=256, eps=1e-6, threads=128):
    """Hyper-connection pre step: each token's (hc, hidden) residual streams are RMS-normalised
    together (``T.reduce_sum`` twice, ``T.rsqrt``) and mixed by ``T.sigmoid`` gates:
    Y[n, :] = sum_i sigmoid(G[n, i]) * X[n, i, :] * rsqrt(mean(X[n]^2) + eps)."""
    n = T.dynamic("n")

    @T.prim_func
    def pre(X: T.Tensor((n, hc, hidden), "bfloat16"), G: T.Tensor((n, hc), "float32"),
            Y: T.Tensor((n, hidden), "bfloat16")):
        with T.Kernel(n, threads=threads) as tok:
            x_s = T.alloc_shared((hc, hidden), "bfloat16")
            x_f = T.alloc_fragment((hc, hidden), "float32")
            sq = T.alloc_fragment((hc, hidden), "float32")
            row = T.alloc_fragment((hc,), "float32")
            tot = T.alloc_fragment((1,), "float32")
            g_f = T.alloc_fragment((hc,), "float32")
            y_f = T.alloc_fragment((hidden,), "float32")
            T.copy(X[tok, 0, 0], x_s)
            T.copy(x_s, x_f)
            T.copy(G[tok, 0], g_f)
            for i, j in T.Parallel(hc, hidden):
                sq[i, j] = x_f[i, j] * x_f[i, j]
            T.reduce_sum(sq, row, dim=1)
            T.reduce_sum(row, tot, dim=0)
            for j in T.Parallel(hidden):
                y_f[j] = 0.0
                for i in T.serial(hc):
                    y_f[j] += T.sigmoid(g_f[i]) * x_f[i, j]
            for j in T.Parallel(hidden):
                y_f[j] = y_f[j] * T.rsqrt(tot[0] / (hc * hidden) + eps)
            T.copy(y_f, Y[tok, 0])
    return pre


@tilecute.jit
def fp8_block_mean_pool(K, block_N=32, dim=128, threads=128):
    """DSA-style pooling: each block of block_N key rows is averaged (a ragged last block
    averages only its rows), then quantised to float8_e4m3fn with one absmax scale per block.
    Outputs come from ``T.empty``; the loops use the lowercase ``T.parallel``."""
    seq_k = T.const("seq_k")
    K: T.Tensor[[seq_k, dim], T.bfloat16]
    nb = T.ceildiv(seq_k, block_N)
    Pooled = T.empty((nb, dim), T.float8_e4m3fn)
    Scale = T.empty((nb,), T.float32)
    with T.Kernel(nb, threads=threads) as bx:
        k_f = T.alloc_fragment((block_N, dim), T.float32)
        mean = T.alloc_fragment((dim,), T.float32)
        amax = T.alloc_fragment((1,), T.float32)
        cnt = T.min(block_N, seq_k - bx * block_N)
        for r in T.parallel(block_N):
            for d in T.parallel(dim):
                k_f[r, d] = T.if_then_else(r < cnt, K[bx * block_N + r, d], 0.0)
        T.reduce_sum(k_f, mean, dim=0)
        for d in T.Parallel(dim):
            mean[d] = mean[d] / T.cast(cnt, T.float32)
        T.reduce_absmax(mean, amax, dim=0)
        for d in T.Parallel(dim):
            Pooled[bx, d] = T.cast(mean[d] / T.max(amax[0] / 448.0, 1e-8), T.float8_e4m3fn)
        Scale[bx] = T.max(amax[0] / 448.0, 1e-8)
    return Pooled, Scale


@tilecute.jit(out_idx=[1, 2])
def act_quant_group_fp8(M=256, N=512, group=128, block_M=32, threads=128):
    """Per (row, 128-column group) fp8 quantisation: s = max(absmax / 448, 1e-4) and
    q = clamp(x / s, -448, 448) in float8_e4m3fn (``T.reduce_absmax``, ``T.clamp``)."""

    @T.prim_func
    def quant(X: T.Tensor((M, N), "bfloat16"), Q: T.Tensor((M, N), "float8_e4m3"),
              S: T.Tensor((M, N // group), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), N // group, threads=threads) as (bx, by):
            x_s = T.alloc_shared((block_M, group), "bfloat16")
            x_f = T.alloc_fragment((block_M, group), "float32")
            amax = T.alloc_fragment((block_M,), "float32")
            s_f = T.alloc_fragment((block_M,), "float32")
            q_f = T.alloc_fragment((block_M, group), "float8_e4m3")
            T.copy(X[bx * block_M, by * group], x_s)
            T.copy(x_s, x_f)
            T.reduce_absmax(x_f, amax, dim=1)
            for i in T.Parallel(block_M):
                s_f[i] = T.max(amax[i] / 448.0, 1e-4)
            for i, j in T.Parallel(block_M, group):
                q_f[i, j] = T.clamp(x_f[i, j] / s_f[i], -448.0, 448.0)
            T.copy(q_f, Q[bx * block_M, by * group])
            for i in T.Parallel(block_M):
                if bx * block_M + i < M:
                    S[bx * block_M + i, by] = s_f[i]
    return quant


# the lazy factories' compile-time shapes (by keyword) for a CPU build
LAZY_SHAPES = {"dsa_clean_logits": dict(seq=8, seq_kv=1000), "mhc_post_mix": {},
               "fp8_block_mean_pool": dict(seq_k=200), "mhc_sinkhorn_roles": dict(n=37)}


# ---- chunked gated linear attention (GDN / KDA pieces) ---------------------------------------
@tilecute.jit(out_idx=[1])
def chunk_local_cumsum(B=2, S=256, H=4, chunk=64, reverse=False, threads=128):
    """Within each chunk of 64 steps, the (inclusive) cumulative sum of the gate G[b, t, h]
    along t (``T.cumsum`` over a shared (chunk, H) tile, ``reverse=`` for a suffix sum)."""

    @T.prim_func
    def cumsum(G: T.Tensor((B, S, H), "float32"), O: T.Tensor((B, S, H), "float32")):
        with T.Kernel(S // chunk, B, threads=threads) as (bc, bb):
            g_s = T.alloc_shared((chunk, H), "float32")
            T.copy(G[bb, bc * chunk:(bc + 1) * chunk, 0:H], g_s)
            T.cumsum(g_s, dim=0, reverse=reverse)
            T.copy(g_s, O[bb, bc * chunk:(bc + 1) * chunk, 0:H])
    return cumsum


@tilecute.jit(out_idx=[3])
def chunk_scaled_kkt(B=2, S=128, H=2, DK=64, chunk=64, threads=128):
    """A[b, t, h, :] over a chunk: A[i, j] = beta[i] * (k_i . k_j) * exp(g_i - g_j) for j < i,
    0 elsewhere (``T.gemm(..., transpose_B=True)``, then the gate and the strict causal mask
    in one ``T.Parallel``)."""

    @T.prim_func
    def kkt(K: T.Tensor((B, S, H, DK), "float16"), Beta: T.Tensor((B, S, H), "float32"),
            G: T.Tensor((B, S, H), "float32"), A: T.Tensor((B, S, H, chunk), "float32")):
        with T.Kernel(S // chunk, B * H, threads=threads) as (bc, bbh):
            bb = bbh // H
            bh = bbh % H
            k_s = T.alloc_shared((chunk, DK), "float16")
            beta_f = T.alloc_fragment((chunk,), "float32")
            g_s = T.alloc_shared((chunk,), "float32")
            a_f = T.alloc_fragment((chunk, chunk), "float32")
            T.copy(K[bb, bc * chunk:(bc + 1) * chunk, bh, :], k_s)
            T.copy(Beta[bb, bc * chunk:(bc + 1) * chunk, bh], beta_f)
            T.copy(G[bb, bc * chunk:(bc + 1) * chunk, bh], g_s)
            T.clear(a_f)
            T.gemm(k_s, k_s, a_f, transpose_B=True)
            for i, j in T.Parallel(chunk, chunk):
                a_f[i, j] = T.if_then_else(j < i, a_f[i, j] * beta_f[i] * T.exp(g_s[i] - g_s[j]), 0.0)
            T.copy(a_f, A[bb, bc * chunk:(bc + 1) * chunk, bh, :])
    return kkt


@tilecute.jit(out_idx=[5])
def chunk_gated_output(B=1, S=128, H=2, DK=64, DV=64, chunk=64, scale=0.125, threads=128):
    """The chunk output of gated linear attention: O_c = scale * ((Q K^T) * exp(g_i - g_j)
    [j <= i]) V + scale * exp(g_i) * Q h_c, with h_c the chunk's incoming state (DK, DV).
    Two gemms into one accumulator (the second after a shared-memory rescale of Q)."""

    @T.prim_func
    def chunk_o(Q: T.Tensor((B, S, H, DK), "float16"), K: T.Tensor((B, S, H, DK), "float16"),
                V: T.Tensor((B, S, H, DV), "float16"), Hs: T.Tensor((B, S // chunk, H, DK, DV), "float16"),
                G: T.Tensor((B, S, H), "float32"), O: T.Tensor((B, S, H, DV), "float16")):
        with T.Kernel(S // chunk, B * H, threads=threads) as (bc, bbh):
            bb = bbh // H
            bh = bbh % H
            q_s = T.alloc_shared((chunk, DK), "float16")
            k_s = T.alloc_shared((chunk, DK), "float16")
            v_s = T.alloc_shared((chunk, DV), "float16")
            h_s = T.alloc_shared((DK, DV), "float16")
            p_s = T.alloc_shared((chunk, chunk), "float16")
            g_s = T.alloc_shared((chunk,), "float32")
            s_f = T.alloc_fragment((chunk, chunk), "float32")
            o_f = T.alloc_fragment((chunk, DV), "float32")
            T.copy(Q[bb, bc * chunk:(bc + 1) * chunk, bh, :], q_s)
            T.copy(K[bb, bc * chunk:(bc + 1) * chunk, bh, :], k_s)
            T.copy(V[bb, bc * chunk:(bc + 1) * chunk, bh, :], v_s)
            T.copy(Hs[bb, bc, bh, :, :], h_s)
            T.copy(G[bb, bc * chunk:(bc + 1) * chunk, bh], g_s)
            T.clear(s_f)
            T.gemm(q_s, k_s, s_f, transpose_B=True)
            for i, j in T.Parallel(chunk, chunk):
                s_f[i, j] = T.if_then_else(j <= i, s_f[i, j] * T.exp(g_s[i] - g_s[j]) * scale, 0.0)
            T.copy(s_f, p_s)
            for i, d in T.Parallel(chunk, DK):
                q_s[i, d] = q_s[i, d] * T.exp(g_s[i]) * scale
            T.clear(o_f)
            T.gemm(p_s, v_s, o_f)
            T.gemm(q_s, h_s, o_f)
            T.copy(o_f, O[bb, bc * chunk:(bc + 1) * chunk, bh, :])
    return chunk_o


@tilecute.jit(out_idx=[2])
def linear_attn_chunk_states(B=1, S=256, H=2, DK=64, DV=64, chunk=64, threads=128):
    """The state entering each chunk of (ungated) linear attention: Hs[c] = sum over earlier
    chunks of K_c^T V_c, carried in a fragment across a ``T.Pipelined`` loop and stored
    before each chunk's update (``T.gemm(..., transpose_A=True)``)."""

    @T.prim_func
    def states(K: T.Tensor((B, S, H, DK), "float16"), V: T.Tensor((B, S, H, DV), "float16"),
               Hs: T.Tensor((B, S // chunk, H, DK, DV), "float32")):
        with T.Kernel(H, B, threads=threads) as (bh, bb):
            k_s = T.alloc_shared((chunk, DK), "float16")
            v_s = T.alloc_shared((chunk, DV), "float16")
            h_f = T.alloc_fragment((DK, DV), "float32")
            T.clear(h_f)
            for c in T.Pipelined(S // chunk, num_stages=2):
                T.copy(K[bb, c * chunk:(c + 1) * chunk, bh, :], k_s)
                T.copy(V[bb, c * chunk:(c + 1) * chunk, bh, :], v_s)
                T.copy(h_f, Hs[bb, c, bh, :, :])
                T.gemm(k_s, v_s, h_f, transpose_A=True)
    return states


# ---- attention variants ------------------------------------------------------------------------
@tilecute.jit(out_idx=[3, 4])
def block_causal_attention(B=1, H=2, S=256, D=64, block_M=64, block_N=64, frame=128, threads=128):
    """Block-causal attention: query i sees every key of its own frame and the frames before
    it (key j visible when j // frame <= i // frame).  Online softmax in base 2 (``T.exp2``,
    ``T.log2`` for the row's log-sum-exp, stored as LSE), the key loop cut at the frame's end,
    the mask by ``T.if_then_else``."""
    scale = 1.44269504 / math.sqrt(D)

    @T.prim_func
    def attn(Q: T.Tensor((B, H, S, D), "float16"), K: T.Tensor((B, H, S, D), "float16"),
             V: T.Tensor((B, H, S, D), "float16"), O: T.Tensor((B, H, S, D), "float16"),
             LSE: T.Tensor((B, H, S), "float32")):
        with T.Kernel(T.ceildiv(S, block_M), H, B, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared((block_M, D), "float16")
            k_s = T.alloc_shared((block_N, D), "float16")
            v_s = T.alloc_shared((block_N, D), "float16")
            p_s = T.alloc_shared((block_M, block_N), "float16")
            s_f = T.alloc_fragment((block_M, block_N), "float32")
            o_f = T.alloc_fragment((block_M, D), "float32")
            m = T.alloc_fragment((block_M,), "float32")
            m_prev = T.alloc_fragment((block_M,), "float32")
            r = T.alloc_fragment((block_M,), "float32")
            l = T.alloc_fragment((block_M,), "float32")
            T.copy(Q[bz, by, bx * block_M:(bx + 1) * block_M, :], q_s)
            T.fill(o_f, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity("float32"))
            kv_end = T.min(S, ((bx * block_M + block_M - 1) // frame + 1) * frame)
            for kb in T.Pipelined(T.ceildiv(kv_end, block_N), num_stages=2):
                T.copy(K[bz, by, kb * block_N:(kb + 1) * block_N, :], k_s)
                for i, j in T.Parallel(block_M, block_N):
                    s_f[i, j] = T.if_then_else((kb * block_N + j) // frame <= (bx * block_M + i) // frame, 0,
                                               -T.infinity("float32"))
                T.gemm(q_s, k_s, s_f, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(m, m_prev)
                T.reduce_max(s_f, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    r[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    s_f[i, j] = T.exp2(s_f[i, j] * scale - m[i] * scale)
                for i, d in T.Parallel(block_M, D):
                    o_f[i, d] *= r[i]
                T.reduce_sum(s_f, m_prev, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * r[i] + m_prev[i]
                T.copy(s_f, p_s)
                T.copy(V[bz, by, kb * block_N:(kb + 1) * block_N, :], v_s)
                T.gemm(p_s, v_s, o_f, policy=T.GemmWarpPolicy.FullRow)
            for i, d in T.Parallel(block_M, D):
                o_f[i, d] /= l[i]
            T.copy(o_f, O[bz, by, bx * block_M:(bx + 1) * block_M, :])
            for i in T.Parallel(block_M):
                l[i] = T.log2(l[i]) + m[i] * scale
            T.copy(l, LSE[bz, by, bx * block_M:(bx + 1) * block_M])
    return attn


@tilecute.jit(out_idx=[4])
def block_sparse_attention_mask(B=1, H=2, S=256, D=64, block=64, threads=128):
    """SeerAttention-style block sparsity: BlockMask[b, h, qb, kb] (bool) says whether query
    block qb reads key block kb; masked-out blocks are skipped by an ``if`` inside the
    pipelined loop (the diagonal block is always on, so every row has keys)."""
    scale = 1.44269504 / math.sqrt(D)
    nb = S // block

    @T.prim_func
    def attn(Q: T.Tensor((B, H, S, D), "float16"), K: T.Tensor((B, H, S, D), "float16"),
             V: T.Tensor((B, H, S, D), "float16"), BlockMask: T.Tensor((B, H, nb, nb), "bool"),
             O: T.Tensor((B, H, S, D), "float16")):
        with T.Kernel(nb, H, B, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared((block, D), "float16")
            k_s = T.alloc_shared((block, D), "float16")
            v_s = T.alloc_shared((block, D), "float16")
            p_s = T.alloc_shared((block, block), "float16")
            s_f = T.alloc_fragment((block, block), "float32")
            o_f = T.alloc_fragment((block, D), "float32")
            m = T.alloc_fragment((block,), "float32")
            m_prev = T.alloc_fragment((block,), "float32")
            rs = T.alloc_fragment((block,), "float32")
            l = T.alloc_fragment((block,), "float32")
            T.copy(Q[bz, by, bx * block:(bx + 1) * block, :], q_s)
            T.fill(o_f, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity("float32"))
            for kb in T.Pipelined(nb, num_stages=1):
                if BlockMask[bz, by, bx, kb]:
                    T.copy(K[bz, by, kb * block:(kb + 1) * block, :], k_s)
                    T.clear(s_f)
                    T.gemm(q_s, k_s, s_f, transpose_B=True)
                    T.copy(m, m_prev)
                    T.reduce_max(s_f, m, dim=1, clear=False)
                    for i, j in T.Parallel(block, block):
                        s_f[i, j] = T.exp2(s_f[i, j] * scale - m[i] * scale)
                    T.reduce_sum(s_f, rs, dim=1)
                    for i in T.Parallel(block):
                        m_prev[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                        l[i] = l[i] * m_prev[i] + rs[i]
                    for i, d in T.Parallel(block, D):
                        o_f[i, d] *= m_prev[i]
                    T.copy(s_f, p_s)
                    T.copy(V[bz, by, kb * block:(kb + 1) * block, :], v_s)
                    T.gemm(p_s, v_s, o_f)
            for i, d in T.Parallel(block, D):
                o_f[i, d] /= l[i]
            T.copy(o_f, O[bz, by, bx * block:(bx + 1) * block, :])
    return attn


@tilecute.jit(out_idx=[4])
def attention_with_sink(B=1, H=4, S=128, D=64, block_M=64, block_N=64, threads=128):
    """Softmax with a learned per-head sink logit: O = softmax([s_i, sink_h]) over keys, the
    sink adding exp(sink - m) to each row's denominator but no value.  Non-causal; the sink
    read once per block into a ``T.alloc_var``."""
    scale = 1.0 / math.sqrt(D)

    @T.prim_func
    def attn(Q: T.Tensor((B, H, S, D), "float16"), K: T.Tensor((B, H, S, D), "float16"),
             V: T.Tensor((B, H, S, D), "float16"), Sink: T.Tensor((H,), "float32"),
             O: T.Tensor((B, H, S, D), "float16")):
        with T.Kernel(S // block_M, H, B, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared((block_M, D), "float16")
            k_s = T.alloc_shared((block_N, D), "float16")
            v_s = T.alloc_shared((block_N, D), "float16")
            p_s = T.alloc_shared((block_M, block_N), "float16")
            s_f = T.alloc_fragment((block_M, block_N), "float32")
            o_f = T.alloc_fragment((block_M, D), "float32")
            m = T.alloc_fragment((block_M,), "float32")
            m_prev = T.alloc_fragment((block_M,), "float32")
            rs = T.alloc_fragment((block_M,), "float32")
            l = T.alloc_fragment((block_M,), "float32")
            sink = T.alloc_var("float32")
            sink = Sink[by]
            T.copy(Q[bz, by, bx * block_M:(bx + 1) * block_M, :], q_s)
            T.fill(o_f, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity("float32"))
            for kb in T.Pipelined(S // block_N, num_stages=2):
                T.copy(K[bz, by, kb * block_N:(kb + 1) * block_N, :], k_s)
                T.clear(s_f)
                T.gemm(q_s, k_s, s_f, transpose_B=True)
                for i, j in T.Parallel(block_M, block_N):
                    s_f[i, j] *= scale
                T.copy(m, m_prev)
                T.reduce_max(s_f, m, dim=1, clear=False)
                for i, j in T.Parallel(block_M, block_N):
                    s_f[i, j] = T.exp(s_f[i, j] - m[i])
                T.reduce_sum(s_f, rs, dim=1)
                for i in T.Parallel(block_M):
                    m_prev[i] = T.exp(m_prev[i] - m[i])
                    l[i] = l[i] * m_prev[i] + rs[i]
                for i, d in T.Parallel(block_M, D):
                    o_f[i, d] *= m_prev[i]
                T.copy(s_f, p_s)
                T.copy(V[bz, by, kb * block_N:(kb + 1) * block_N, :], v_s)
                T.gemm(p_s, v_s, o_f)
            for i, d in T.Parallel(block_M, D):
                o_f[i, d] /= l[i] + T.exp(sink - m[i])
            T.copy(o_f, O[bz, by, bx * block_M:(bx + 1) * block_M, :])
    return attn


# ---- flash decoding: split-KV partials, then the combine --------------------------------------
@tilecute.jit(out_idx=[3, 4])
def decode_split_kv(B=4, H=8, S=1000, D=64, splits=4, block_N=64, threads=128):
    """One query token per (batch, head); the S keys split into ``splits`` ranges, each range's
    softmax partial (unnormalised O / l and its log2-sum-exp) written per split.  The tail of
    a range past S is masked by ``T.if_then_else``; a ``T.macro`` does the rescale step."""
    scale = 1.44269504 / math.sqrt(D)
    per = T.ceildiv(S, splits)

    @T.macro
    def rescale(acc, l, m, m_new, rs):
        for d in T.Parallel(D):
            acc[d] *= T.exp2(m[0] * scale - m_new[0] * scale)
        l[0] = l[0] * T.exp2(m[0] * scale - m_new[0] * scale) + rs[0]
        m[0] = m_new[0]

    @T.prim_func
    def split(Q: T.Tensor((B, H, D), "float16"), K: T.Tensor((B, S, H, D), "float16"),
              V: T.Tensor((B, S, H, D), "float16"), Opart: T.Tensor((B, H, splits, D), "float32"),
              Lpart: T.Tensor((B, H, splits), "float32")):
        with T.Kernel(splits, H, B, threads=threads) as (bs, bh, bb):
            q_f = T.alloc_fragment((D,), "float32")
            k_f = T.alloc_fragment((block_N, D), "float32")
            s_f = T.alloc_fragment((block_N,), "float32")
            acc = T.alloc_fragment((D,), "float32")
            pv = T.alloc_fragment((block_N, D), "float32")
            pvs = T.alloc_fragment((D,), "float32")
            m = T.alloc_fragment((1,), "float32")
            m_new = T.alloc_fragment((1,), "float32")
            rs = T.alloc_fragment((1,), "float32")
            l = T.alloc_fragment((1,), "float32")
            T.copy(Q[bb, bh, :], q_f)
            T.fill(acc, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity("float32"))
            lo = bs * per
            for t in T.serial(T.ceildiv(per, block_N)):
                for j, d in T.Parallel(block_N, D):
                    k_f[j, d] = T.if_then_else(lo + t * block_N + j < T.min(lo + per, S),
                                               K[bb, lo + t * block_N + j, bh, d] * q_f[d], 0.0)
                T.reduce_sum(k_f, s_f, dim=1)
                for j in T.Parallel(block_N):
                    s_f[j] = T.if_then_else(lo + t * block_N + j < T.min(lo + per, S), s_f[j],
                                            -T.infinity("float32"))
                T.reduce_max(s_f, m_new, dim=0)
                m_new[0] = T.max(m_new[0], m[0])
                for j in T.Parallel(block_N):
                    s_f[j] = T.exp2(s_f[j] * scale - m_new[0] * scale)
                T.reduce_sum(s_f, rs, dim=0)
                for j, d in T.Parallel(block_N, D):
                    pv[j, d] = T.if_then_else(lo + t * block_N + j < T.min(lo + per, S),
                                              s_f[j] * V[bb, lo + t * block_N + j, bh, d], 0.0)
                T.reduce_sum(pv, pvs, dim=0)
                rescale(acc, l, m, m_new, rs)
                for d in T.Parallel(D):
                    acc[d] += pvs[d]
            for d in T.Parallel(D):
                Opart[bb, bh, bs, d] = acc[d] / l[0]
            Lpart[bb, bh, bs] = T.log2(l[0]) + m[0] * scale
    return split


@tilecute.jit(out_idx=[2])
def decode_combine(B=4, H=8, D=64, splits=4, threads=64):
    """Merges the split partials: O = sum_s 2^(L_s - L_max) O_s / sum_s 2^(L_s - L_max), with
    ``T.alloc_var`` running scalars and ``T.serial`` over the splits."""

    @T.prim_func
    def combine(Opart: T.Tensor((B, H, splits, D), "float32"), Lpart: T.Tensor((B, H, splits), "float32"),
                O: T.Tensor((B, H, D), "float16")):
        with T.Kernel(H, B, threads=threads) as (bh, bb):
            lmax = T.alloc_var("float32", init=-T.infinity("float32"))
            den = T.alloc_var("float32", init=0.0)
            o_f = T.alloc_fragment((D,), "float32")
            for s in T.serial(splits):
                lmax = T.max(lmax, Lpart[bb, bh, s])
            T.clear(o_f)
            for s in T.serial(splits):
                w = T.exp2(Lpart[bb, bh, s] - lmax)
                den += w
                for d in T.Parallel(D):
                    o_f[d] += w * Opart[bb, bh, s, d]
            for d in T.Parallel(D):
                O[bb, bh, d] = o_f[d] / den
    return combine


@tilecute.jit(out_idx=[5])
def vertical_column_sparse_attn(B=1, H=2, S=256, D=64, block_M=64, max_cols=64, threads=128):
    """MInference-style vertical sparsity: each (b, h) lists up to ``max_cols`` key columns
    (ColIdx, with ColCnt valid, ascending); every query block gathers those keys / values
    into shared memory (rows past the count zeroed, their scores -inf; a column after the
    query is masked per row) and runs one softmax over them."""
    scale = 1.0 / math.sqrt(D)

    @T.prim_func
    def attn(Q: T.Tensor((B, H, S, D), "float16"), K: T.Tensor((B, H, S, D), "float16"),
             V: T.Tensor((B, H, S, D), "float16"), ColIdx: T.Tensor((B, H, max_cols), "int32"),
             ColCnt: T.Tensor((B, H), "int32"), O: T.Tensor((B, H, S, D), "float16")):
        with T.Kernel(S // block_M, H, B, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared((block_M, D), "float16")
            k_s = T.alloc_shared((max_cols, D), "float16")
            v_s = T.alloc_shared((max_cols, D), "float16")
            p_s = T.alloc_shared((block_M, max_cols), "float16")
            col_s = T.alloc_shared((max_cols,), "int32")
            s_f = T.alloc_fragment((block_M, max_cols), "float32")
            o_f = T.alloc_fragment((block_M, D), "float32")
            m = T.alloc_fragment((block_M,), "float32")
            l = T.alloc_fragment((block_M,), "float32")
            cnt = T.alloc_var("int32")
            cnt = ColCnt[bz, by]
            T.copy(Q[bz, by, bx * block_M:(bx + 1) * block_M, :], q_s)
            T.copy(ColIdx[bz, by, :], col_s)
            for c, d in T.Parallel(max_cols, D):
                k_s[c, d] = T.if_then_else(c < cnt, K[bz, by, col_s[c], d], 0)
                v_s[c, d] = T.if_then_else(c < cnt, V[bz, by, col_s[c], d], 0)
            T.clear(s_f)
            T.gemm(q_s, k_s, s_f, transpose_B=True)
            for i, c in T.Parallel(block_M, max_cols):
                s_f[i, c] = T.if_then_else(c < cnt and col_s[c] <= bx * block_M + i, s_f[i, c] * scale,
                                           -T.infinity("float32"))
            T.reduce_max(s_f, m, dim=1)
            for i, c in T.Parallel(block_M, max_cols):
                s_f[i, c] = T.exp(s_f[i, c] - m[i])
            T.reduce_sum(s_f, l, dim=1)
            T.copy(s_f, p_s)
            T.clear(o_f)
            T.gemm(p_s, v_s, o_f)
            for i, d in T.Parallel(block_M, D):
                o_f[i, d] /= l[i]
            T.copy(o_f, O[bz, by, bx * block_M:(bx + 1) * block_M, :])
    return attn


# ---- transforms, selection, GEMV / GEMM variants ---------------------------------------------
@tilecute.jit(out_idx=[1])
def hadamard_rows(M=64, N=256, threads=128):
    """Unnormalised fast Walsh-Hadamard transform of each row, scaled by 1/sqrt(N): log2(N)
    butterfly stages over a row in shared memory, a ``T.serial`` stage loop around a
    ``T.Parallel`` of N/2 pairs (pair p, stride h: a = p // h * 2h + p % h, b = a + h)."""
    logn = int(math.log2(N))

    @T.prim_func
    def fwht(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(M, threads=threads) as bx:
            x_s = T.alloc_shared((N,), "float32")
            T.copy(X[bx, :], x_s)
            for st in T.serial(logn):
                h = 1 << st
                for p in T.Parallel(N // 2):
                    a = p // h * (2 * h) + p % h
                    u = x_s[a]
                    v = x_s[a + h]
                    x_s[a] = u + v
                    x_s[a + h] = u - v
            for j in T.Parallel(N):
                Y[bx, j] = x_s[j] * (1.0 / math.sqrt(N))
    return fwht


@tilecute.jit(out_idx=[1, 2])
def topk_rows_reduce_max(M=128, N=64, k=4, block_M=32, threads=128):
    """Top-k of each row (values and column indices, descending; ties to the lower column) by
    k rounds of ``T.reduce_max`` -- the chosen entry's index by a second ``T.reduce_min`` over
    the columns holding the max -- then knocked out with -inf."""

    @T.prim_func
    def topk(X: T.Tensor((M, N), "float32"), Vals: T.Tensor((M, k), "float32"), Idx: T.Tensor((M, k), "int32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x_f = T.alloc_fragment((block_M, N), "float32")
            c_f = T.alloc_fragment((block_M, N), "int32")
            mx = T.alloc_fragment((block_M,), "float32")
            arg = T.alloc_fragment((block_M,), "int32")
            T.copy(X[bx * block_M, 0], x_f)
            for r in T.serial(k):
                T.reduce_max(x_f, mx, dim=1)
                for i, j in T.Parallel(block_M, N):
                    c_f[i, j] = T.if_then_else(x_f[i, j] == mx[i], j, N)
                T.reduce_min(c_f, arg, dim=1)
                for i, j in T.Parallel(block_M, N):
                    if j == arg[i]:
                        x_f[i, j] = -T.infinity("float32")
                for i in T.Parallel(block_M):
                    if bx * block_M + i < M:
                        Vals[bx * block_M + i, r] = mx[i]
                        Idx[bx * block_M + i, r] = arg[i]
    return topk


@tilecute.jit
def gemv_split_k(N=512, K=4096, block_N=64, block_K=256, split=4, threads=128):
    """y = W x with K split over ``split`` blocks: each block reduces its K range in tiles
    (``T.reduce_sum`` over a (block_N, block_K) fragment, accumulated) and adds its part
    into y with ``T.atomic_add``; y is an argument the caller zeroes (no ``out_idx``: an
    output made by the launcher starts uninitialised)."""
    per = K // split

    @T.prim_func
    def gemv(W: T.Tensor((N, K), "float16"), Xv: T.Tensor((K,), "float16"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), split, threads=threads) as (bn, bk):
            w_f = T.alloc_fragment((block_N, block_K), "float32")
            part = T.alloc_fragment((block_N,), "float32")
            acc = T.alloc_fragment((block_N,), "float32")
            T.clear(acc)
            for kt in T.Pipelined(per // block_K, num_stages=2):
                for i, j in T.Parallel(block_N, block_K):
                    w_f[i, j] = W[bn * block_N + i, bk * per + kt * block_K + j] * Xv[bk * per + kt * block_K + j]
                T.reduce_sum(w_f, part, dim=1)
                for i in T.Parallel(block_N):
                    acc[i] += part[i]
            for i in T.Parallel(block_N):
                T.atomic_add(Y[bn * block_N + i], acc[i])
    return gemv


@tilecute.jit(out_idx=[3])
def int4_dequant_gemm(M=128, N=128, K=256, group=64, block_M=64, block_N=64, block_K=64, threads=128):
    """C = A (B_q dequantised)^T: B holds two signed-offset int4 per uint8 along K (low nibble
    first), w = (q - 8) * Scale[n, k // group]; each K tile unpacked into a shared fp16 tile by
    shifts / masks, then ``T.gemm(..., transpose_B=True)`` in a ``T.Pipelined`` loop."""

    @T.prim_func
    def gemm(A: T.Tensor((M, K), "float16"), Bq: T.Tensor((N, K // 2), "uint8"),
             Scale: T.Tensor((N, K // group), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            a_s = T.alloc_shared((block_M, block_K), "float16")
            bq_s = T.alloc_shared((block_N, block_K // 2), "uint8")
            b_s = T.alloc_shared((block_N, block_K), "float16")
            c_f = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(c_f)
            for kt in T.Pipelined(K // block_K, num_stages=2):
                T.copy(A[by * block_M, kt * block_K], a_s)
                T.copy(Bq[bx * block_N, kt * block_K // 2], bq_s)
                for n, k in T.Parallel(block_N, block_K):
                    q = (bq_s[n, k // 2] >> ((k % 2) * 4)) & 0xF
                    b_s[n, k] = T.cast(T.cast(q, "int32") - 8, "float16") * Scale[bx * block_N + n, (kt * block_K + k) // group]
                T.gemm(a_s, b_s, c_f, transpose_B=True)
            T.copy(c_f, C[by * block_M, bx * block_N])
    return gemm


# ---- MoE routing pieces --------------------------------------------------------------------------
@tilecute.jit(out_idx=[2])
def moe_gather_sorted_tokens(T_tok=200, D=128, topk=2, block=32, threads=128):
    """Permute tokens into expert order: row r of Xs is X[SortedIds[r] // topk] (SortedIds
    indexes the flattened (token, slot) pairs; padding slots hold T_tok * topk and write
    zeros).  The row's source token read once into a ``T.alloc_var``."""
    nslots = T.dynamic("nslots")

    @T.prim_func
    def gather(X: T.Tensor((T_tok, D), "bfloat16"), SortedIds: T.Tensor((nslots,), "int32"),
               Xs: T.Tensor((nslots, D), "bfloat16")):
        with T.Kernel(T.ceildiv(nslots, block), threads=threads) as bx:
            for r in T.serial(block):
                src = T.alloc_var("int32")
                if bx * block + r < nslots:
                    src = SortedIds[bx * block + r]
                    for d in T.Parallel(D):
                        Xs[bx * block + r, d] = T.if_then_else(src < T_tok * topk, X[src // topk, d], 0)
    return gather


@tilecute.jit
def moe_weighted_combine(T_tok=200, D=128, topk=2, block_D=128, threads=128):
    """Scatter expert outputs back: Out[tok] += W[slot] * Ys[r] for every routed row r with
    slot = SortedIds[r] < T_tok * topk (``T.atomic_add`` on a float32 output the caller
    zeroes, several experts landing on one token)."""
    nslots = T.dynamic("nslots")

    @T.prim_func
    def combine(Ys: T.Tensor((nslots, D), "float32"), SortedIds: T.Tensor((nslots,), "int32"),
                Wt: T.Tensor((T_tok * topk,), "float32"), Out: T.Tensor((T_tok, D), "float32")):
        with T.Kernel(nslots, D // block_D, threads=threads) as (r, bd):
            slot = SortedIds[r]
            if slot < T_tok * topk:
                for d in T.Parallel(block_D):
                    T.atomic_add(Out[slot // topk, bd * block_D + d], Wt[slot] * Ys[r, bd * block_D + d])
    return combine


# ---- norms and softmax ------------------------------------------------------------------------------
@tilecute.jit(out_idx=[3, 4])
def fused_add_rmsnorm(M=100, N=1024, eps=1e-6, block_M=4, threads=128):
    """R' = X + R (the new residual, bf16) and Y = R' * rsqrt(mean(R'^2) + eps) * W; a ragged
    last block guarded on its rows."""

    @T.prim_func
    def norm(X: T.Tensor((M, N), "bfloat16"), R: T.Tensor((M, N), "bfloat16"), W: T.Tensor((N,), "bfloat16"),
             Rout: T.Tensor((M, N), "bfloat16"), Y: T.Tensor((M, N), "bfloat16")):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            h = T.alloc_fragment((block_M, N), "float32")
            sq = T.alloc_fragment((block_M, N), "float32")
            ss = T.alloc_fragment((block_M,), "float32")
            for i, j in T.Parallel(block_M, N):
                h[i, j] = T.if_then_else(bx * block_M + i < M,
                                         T.cast(X[bx * block_M + i, j], "float32") + T.cast(R[bx * block_M + i, j], "float32"),
                                         0.0)
                sq[i, j] = h[i, j] * h[i, j]
            T.reduce_sum(sq, ss, dim=1)
            for i, j in T.Parallel(block_M, N):
                if bx * block_M + i < M:
                    Rout[bx * block_M + i, j] = h[i, j]
                    Y[bx * block_M + i, j] = h[i, j] * T.rsqrt(ss[i] / N + eps) * W[j]
    return norm


@tilecute.jit(out_idx=[1])
def online_softmax_two_pass(M=64, N=3000, block_N=512, threads=128):
    """Row softmax over a long row: pass 1 keeps a running max and rescaled sum over column
    tiles (scalar ``T.alloc_var``s updated from per-tile ``T.reduce_max`` / ``T.reduce_sum``),
    pass 2 writes exp(x - m) / s; the ragged last tile padded with -inf."""

    @T.prim_func
    def softmax(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(M, threads=threads) as bx:
            x_f = T.alloc_fragment((block_N,), "float32")
            tmax = T.alloc_fragment((1,), "float32")
            tsum = T.alloc_fragment((1,), "float32")
            m = T.alloc_var("float32", init=-T.infinity("float32"))
            s = T.alloc_var("float32", init=0.0)
            for t in T.serial(T.ceildiv(N, block_N)):
                for j in T.Parallel(block_N):
                    x_f[j] = T.if_then_else(t * block_N + j < N, X[bx, t * block_N + j], -T.infinity("float32"))
                T.reduce_max(x_f, tmax, dim=0)
                m_new = T.max(m, tmax[0])
                for j in T.Parallel(block_N):
                    x_f[j] = T.exp(x_f[j] - m_new)
                T.reduce_sum(x_f, tsum, dim=0)
                s = s * T.exp(m - m_new) + tsum[0]
                m = m_new
            for t in T.serial(T.ceildiv(N, block_N)):
                for j in T.Parallel(block_N):
                    if t * block_N + j < N:
                        Y[bx, t * block_N + j] = T.exp(X[bx, t * block_N + j] - m) / s
    return softmax


@tilecute.jit(out_idx=[3])
def indexer_weighted_relu_scores(S=128, SK=256, H=8, D=64, block_M=64, block_N=64, threads=128):
    """A lightning-indexer style score: Score[s, t] = sum_h W[s, h] * relu(q_{s,h} . k_t),
    one ``T.gemm`` per head into a (block_M, block_N) fragment, the ReLU and the head weight
    folded into a second accumulator."""

    @T.prim_func
    def score(Q: T.Tensor((S, H, D), "float16"), Kc: T.Tensor((SK, D), "float16"), W: T.Tensor((S, H), "float32"),
              Score: T.Tensor((S, SK), "float32")):
        with T.Kernel(SK // block_N, S // block_M, threads=threads) as (bx, by):
            q_s = T.alloc_shared((block_M, D), "float16")
            k_s = T.alloc_shared((block_N, D), "float16")
            w_s = T.alloc_shared((block_M, H), "float32")
            s_f = T.alloc_fragment((block_M, block_N), "float32")
            acc = T.alloc_fragment((block_M, block_N), "float32")
            T.copy(Kc[bx * block_N, 0], k_s)
            T.copy(W[by * block_M, 0], w_s)
            T.clear(acc)
            for h in T.serial(H):
                T.copy(Q[by * block_M:(by + 1) * block_M, h, :], q_s)
                T.clear(s_f)
                T.gemm(q_s, k_s, s_f, transpose_B=True)
                for i, j in T.Parallel(block_M, block_N):
                    acc[i, j] += T.max(s_f[i, j], 0.0) * w_s[i, h]
            T.copy(acc, Score[by * block_M, bx * block_N])
    return score


# ---- index-driven sparse attention and grouped GEMM ---------------------------------------------
@tilecute.jit(out_idx=[3])
def topk_index_sparse_mqa(S=64, SKV=512, H=16, D=64, topk=128, block_I=64, threads=128):
    """DeepSeek-sparse-attention style MQA: query token s reads only the ``topk`` KV rows listed
    in Idx[s, :] (-1 = unused).  All H heads of a token form the gemm's M; each block of
    block_I indices is gathered into shared memory row by row (``T.Parallel`` with an
    index read inside the address), invalid rows masked to -inf, online softmax across the
    ``T.Pipelined`` index blocks.  K and V share one latent (V = KV[..., :D])."""
    scale = 1.0 / math.sqrt(D)

    @T.prim_func
    def attn(Q: T.Tensor((S, H, D), "bfloat16"), KV: T.Tensor((SKV, D), "bfloat16"),
             Idx: T.Tensor((S, topk), "int32"), O: T.Tensor((S, H, D), "bfloat16")):
        with T.Kernel(S, threads=threads) as s:
            q_s = T.alloc_shared((H, D), "bfloat16")
            kv_s = T.alloc_shared((block_I, D), "bfloat16")
            p_s = T.alloc_shared((H, block_I), "bfloat16")
            ok = T.alloc_fragment((block_I,), "bool")
            s_f = T.alloc_fragment((H, block_I), "float32")
            o_f = T.alloc_fragment((H, D), "float32")
            m = T.alloc_fragment((H,), "float32")
            m_prev = T.alloc_fragment((H,), "float32")
            rs = T.alloc_fragment((H,), "float32")
            l = T.alloc_fragment((H,), "float32")
            T.copy(Q[s, 0, 0], q_s)
            T.fill(o_f, 0)
            T.fill(l, 0)
            T.fill(m, -(2.0 ** 30))
            for ib in T.Pipelined(topk // block_I, num_stages=2):
                for i in T.Parallel(block_I):
                    ok[i] = Idx[s, ib * block_I + i] >= 0
                for i, d in T.Parallel(block_I, D):
                    kv_s[i, d] = T.if_then_else(Idx[s, ib * block_I + i] >= 0, KV[Idx[s, ib * block_I + i], d], 0)
                for h, i in T.Parallel(H, block_I):
                    s_f[h, i] = T.if_then_else(ok[i], 0, -T.infinity("float32"))
                T.gemm(q_s, kv_s, s_f, transpose_B=True)
                T.copy(m, m_prev)
                T.reduce_max(s_f, m, dim=1, clear=False)
                for h, i in T.Parallel(H, block_I):
                    s_f[h, i] = T.exp((s_f[h, i] - m[h]) * scale)
                T.reduce_sum(s_f, rs, dim=1)
                for h in T.Parallel(H):
                    m_prev[h] = T.exp((m_prev[h] - m[h]) * scale)
                    l[h] = l[h] * m_prev[h] + rs[h]
                for h, d in T.Parallel(H, D):
                    o_f[h, d] *= m_prev[h]
                T.copy(s_f, p_s)
                T.gemm(p_s, kv_s, o_f)
            for h, d in T.Parallel(H, D):
                o_f[h, d] /= l[h]
            T.copy(o_f, O[s, 0, 0])
    return attn


@tilecute.jit(out_idx=[4])
def grouped_gemm_offsets(G=3, K=128, N=128, block_M=64, block_N=64, block_K=32, threads=128):
    """Grouped GEMM over a ragged batch: rows Offs[g] .. Offs[g + 1] of A use weight W[g].  The
    grid runs over (tiles of N, a run-time bound of M tiles); each block finds its group by a
    ``T.serial`` scan of TileOffs into a ``T.alloc_var``, skips tiles past the end, masks rows
    outside its group on the load and the store."""
    total = T.dynamic("total")

    @T.prim_func
    def ggemm(A: T.Tensor((total, K), "float16"), W: T.Tensor((G, K, N), "float16"),
              Offs: T.Tensor((G + 1,), "int32"), TileOffs: T.Tensor((G + 1,), "int32"),
              C: T.Tensor((total, N), "float16")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(total, block_M) + G, threads=threads) as (bx, by):
            a_s = T.alloc_shared((block_M, block_K), "float16")
            w_s = T.alloc_shared((block_K, block_N), "float16")
            c_f = T.alloc_fragment((block_M, block_N), "float32")
            g = T.alloc_var("int32", init=0)
            for q in T.serial(G):
                if by >= TileOffs[q + 1]:
                    g = q + 1
            if g < G:
                row0 = Offs[g] + (by - TileOffs[g]) * block_M
                rows = Offs[g + 1] - row0
                T.clear(c_f)
                for kt in T.Pipelined(K // block_K, num_stages=2):
                    for i, k in T.Parallel(block_M, block_K):
                        a_s[i, k] = T.if_then_else(i < rows, A[row0 + i, kt * block_K + k], 0)
                    T.copy(W[g, kt * block_K, bx * block_N], w_s)
                    T.gemm(a_s, w_s, c_f)
                for i, j in T.Parallel(block_M, block_N):
                    if i < rows:
                        C[row0 + i, bx * block_N + j] = c_f[i, j]
    return ggemm


@tilecute.jit(out_idx=[3])
def kda_intra_chunk_scores(B=1, S=128, H=2, DK=32, chunk=16, threads=128):
    """KDA's per-channel gated intra-chunk scores: A[i, j] = sum_d q[i, d] k[j, d]
    exp(g[i, d] - g[j, d]) for j <= i within a chunk of 16, 0 above the diagonal; the channel
    sum a ``T.serial`` inside a (chunk, chunk) ``T.Parallel`` over shared tiles (no gemm:
    the gate differs per channel)."""

    @T.prim_func
    def intra(Q: T.Tensor((B, S, H, DK), "float32"), K: T.Tensor((B, S, H, DK), "float32"),
              G: T.Tensor((B, S, H, DK), "float32"), A: T.Tensor((B, S, H, chunk), "float32")):
        with T.Kernel(S // chunk, H, B, threads=threads) as (bc, bh, bb):
            q_s = T.alloc_shared((chunk, DK), "float32")
            k_s = T.alloc_shared((chunk, DK), "float32")
            g_s = T.alloc_shared((chunk, DK), "float32")
            a_f = T.alloc_fragment((chunk, chunk), "float32")
            T.copy(Q[bb, bc * chunk:(bc + 1) * chunk, bh, :], q_s)
            T.copy(K[bb, bc * chunk:(bc + 1) * chunk, bh, :], k_s)
            T.copy(G[bb, bc * chunk:(bc + 1) * chunk, bh, :], g_s)
            for i, j in T.Parallel(chunk, chunk):
                a_f[i, j] = 0.0
                if j <= i:
                    for d in T.serial(DK):
                        a_f[i, j] += q_s[i, d] * k_s[j, d] * T.exp(g_s[i, d] - g_s[j, d])
            T.copy(a_f, A[bb, bc * chunk:(bc + 1) * chunk, bh, :])
    return intra


# ---- mHC: warp roles in one block, Sinkhorn on one warp -----------------------------------------
@tilecute.jit
def mhc_sinkhorn_roles(Mixes, hc=4, repeat=3, eps=1e-6, threads=96):
    """Per token, two roles split by ``T.get_thread_binding() < 32``: the first warp turns the
    hc x hc logits into a doubly-stochastic mix (row softmax, then ``repeat`` Sinkhorn
    rounds of column / row normalisation with ``T.reduce_sum`` over dim 0 / 1 on a fragment
    allocated inside the branch); the other 64 threads write sigmoid(pre logits)."""
    n = T.const("n")
    Mixes: T.Tensor[[n, hc + hc * hc], T.float32]
    Comb = T.empty((n, hc, hc), T.float32)
    Pre = T.empty((n, hc), T.float32)
    with T.Kernel(n, threads=threads) as tok:
        mix_s = T.alloc_shared((hc + hc * hc,), T.float32)
        T.copy(Mixes[tok, 0:hc + hc * hc], mix_s)
        if T.get_thread_binding() < 32:
            cm = T.alloc_fragment((hc, hc), T.float32)
            rsum = T.alloc_fragment((hc,), T.float32)
            csum = T.alloc_fragment((hc,), T.float32)
            rmax = T.alloc_fragment((hc,), T.float32)
            for j, k in T.Parallel(hc, hc):
                cm[j, k] = mix_s[hc + j * hc + k]
            T.reduce_max(cm, rmax, dim=1)
            for j, k in T.Parallel(hc, hc):
                cm[j, k] = T.exp(cm[j, k] - rmax[j])
            T.reduce_sum(cm, rsum, dim=1)
            for j, k in T.Parallel(hc, hc):
                cm[j, k] = cm[j, k] / rsum[j] + eps
            for _ in T.serial(repeat):
                T.reduce_sum(cm, csum, dim=0)
                for j, k in T.Parallel(hc, hc):
                    cm[j, k] = cm[j, k] / (csum[k] + eps)
                T.reduce_sum(cm, rsum, dim=1)
                for j, k in T.Parallel(hc, hc):
                    cm[j, k] = cm[j, k] / (rsum[j] + eps)
            for j, k in T.Parallel(hc, hc):
                Comb[tok, j, k] = cm[j, k]
        else:
            for j in T.Parallel(hc):
                Pre[tok, j] = T.sigmoid(mix_s[j])
    return Comb, Pre


@tilecute.jit(out_idx=[2, 3])
def mhc_tf32_gemm_sqrsum(M=128, N=24, K=512, block_M=64, block_K=64, threads=128):
    """X (M, K) float32 times Fn (N, K)^T as a TF32 ``T.gemm`` (both operands ``T.tfloat32``
    in shared memory, N = 24 padded to 32 in the tile), plus each row's sum of squares
    from the same tiles."""

    @T.prim_func
    def gemm(X: T.Tensor((M, K), "float32"), Fn: T.Tensor((N, K), "float32"),
             Out: T.Tensor((M, N), "float32"), SqSum: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x_s = T.alloc_shared((block_M, block_K), T.tfloat32)
            f_s = T.alloc_shared((32, block_K), T.tfloat32)
            x_f = T.alloc_fragment((block_M, block_K), "float32")
            c_f = T.alloc_fragment((block_M, 32), "float32")
            sq = T.alloc_fragment((block_M,), "float32")
            part = T.alloc_fragment((block_M,), "float32")
            T.clear(c_f)
            T.clear(sq)
            for kt in T.Pipelined(K // block_K, num_stages=2):
                T.copy(X[bx * block_M, kt * block_K], x_s)
                for i, k in T.Parallel(32, block_K):
                    f_s[i, k] = T.if_then_else(i < N, Fn[i, kt * block_K + k], 0.0)
                T.copy(x_s, x_f)
                for i, k in T.Parallel(block_M, block_K):
                    x_f[i, k] = x_f[i, k] * x_f[i, k]
                T.reduce_sum(x_f, part, dim=1)
                for i in T.Parallel(block_M):
                    sq[i] += part[i]
                T.gemm(x_s, f_s, c_f, transpose_B=True)
            for i, j in T.Parallel(block_M, 32):
                if j < N:
                    Out[bx * block_M + i, j] = c_f[i, j]
            T.copy(sq, SqSum[bx * block_M])
    return gemm


# ---- MInference-style prefetch: async gathers with program-managed commit / wait groups ------------
@tilecute.jit(out_idx=[5])
def vertical_prefetch_async(B=1, H=2, S=256, D=64, block_M=64, block_N=32, max_cols=128, threads=128):
    """The vertical-column attention of ``vertical_column_sparse_attn`` over longer column
    lists, with the gathered K / V tiles in a 2-stage ring: a ``T.macro`` prefetch (its
    shared buffers passed as ``T.SharedBuffer`` parameters) fills a stage by a
    ``T.Parallel(..., prefer_async=True)`` with ``parallel_async_without_async_commit_wait``
    and commits the group itself (``T.ptx_commit_group``); the compute step waits with
    ``T.ptx_wait_group(1)`` (0 on the last tile) and runs online softmax."""
    scale = 1.44269504 / math.sqrt(D)

    @T.macro
    def prefetch(K: T.Tensor((B, H, S, D), "float16"), V: T.Tensor((B, H, S, D), "float16"),
                 k_s: T.SharedBuffer([2, block_N, D], "float16"), v_s: T.SharedBuffer([2, block_N, D], "float16"),
                 col_s: T.SharedBuffer([max_cols], "int32"), stage: T.int32, c0: T.int32, cnt: T.int32,
                 bz: T.int32, by: T.int32):
        for i, d in T.Parallel(block_N, D, prefer_async=True,
                               annotations={"parallel_async_without_async_commit_wait": True}):
            k_s[stage, i, d] = T.if_then_else(c0 + i < cnt, K[bz, by, col_s[c0 + i], d], 0)
        for i, d in T.Parallel(block_N, D, prefer_async=True,
                               annotations={"parallel_async_without_async_commit_wait": True}):
            v_s[stage, i, d] = T.if_then_else(c0 + i < cnt, V[bz, by, col_s[c0 + i], d], 0)
        T.ptx_commit_group()

    @T.prim_func
    def attn(Q: T.Tensor((B, H, S, D), "float16"), K: T.Tensor((B, H, S, D), "float16"),
             V: T.Tensor((B, H, S, D), "float16"), ColIdx: T.Tensor((B, H, max_cols), "int32"),
             ColCnt: T.Tensor((B, H), "int32"), O: T.Tensor((B, H, S, D), "float16")):
        with T.Kernel(S // block_M, H, B, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared((block_M, D), "float16")
            k_s = T.alloc_shared((2, block_N, D), "float16")
            v_s = T.alloc_shared((2, block_N, D), "float16")
            col_s = T.alloc_shared((max_cols,), "int32")
            s_f = T.alloc_fragment((block_M, block_N), "float32")
            p_f = T.alloc_fragment((block_M, block_N), "float16")
            o_f = T.alloc_fragment((block_M, D), "float32")
            m = T.alloc_fragment((block_M,), "float32")
            m_prev = T.alloc_fragment((block_M,), "float32")
            rs = T.alloc_fragment((block_M,), "float32")
            l = T.alloc_fragment((block_M,), "float32")
            cnt = T.alloc_var("int32")
            cnt = ColCnt[bz, by]
            T.copy(Q[bz, by, bx * block_M:(bx + 1) * block_M, :], q_s)
            for c in T.Parallel(max_cols):
                col_s[c] = ColIdx[bz, by, c]
            T.fill(o_f, 0)
            T.fill(l, 0)
            T.fill(m, -(2.0 ** 30))
            nblk = T.ceildiv(cnt, block_N)
            prefetch(K, V, k_s, v_s, col_s, 0, 0, cnt, bz, by)
            for t in T.serial(nblk):
                if t + 1 < nblk:
                    prefetch(K, V, k_s, v_s, col_s, (t + 1) % 2, (t + 1) * block_N, cnt, bz, by)
                    T.ptx_wait_group(1)
                else:
                    T.ptx_wait_group(0)
                for i, j in T.Parallel(block_M, block_N):
                    s_f[i, j] = T.if_then_else(t * block_N + j < cnt and col_s[t * block_N + j] <= bx * block_M + i,
                                               0, -T.infinity("float32"))
                T.gemm(q_s, k_s[t % 2, :, :], s_f, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(m, m_prev)
                T.reduce_max(s_f, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    m_prev[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    s_f[i, j] = T.exp2(s_f[i, j] * scale - m[i] * scale)
                T.reduce_sum(s_f, rs, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * m_prev[i] + rs[i]
                for i, d in T.Parallel(block_M, D):
                    o_f[i, d] *= m_prev[i]
                T.copy(s_f, p_f)
                T.gemm(p_f, v_s[t % 2, :, :], o_f, policy=T.GemmWarpPolicy.FullRow)
            for i, d in T.Parallel(block_M, D):
                o_f[i, d] /= l[i]
            T.copy(o_f, O[bz, by, bx * block_M:(bx + 1) * block_M, :])
    return attn


# ---- DSA sparse backward: dKV through the index list ----------------------------------------------
@tilecute.jit
def sparse_dkv_scatter(S=32, SKV=256, H=64, D=64, topk=128, BS=64, split_store=2, threads=128):
    """dKV[Idx[s, i]] += (dP_s^T Q_s + P_s^T dO_s)[i] for every query token s and listed row i:
    two ``T.gemm(..., transpose_A=True)`` into one accumulator (the first with
    ``clear_accum=True``, ``policy=T.GemmWarpPolicy.FullCol``), then stored in ``split_store``
    row slabs: a plain Python ``range`` over slabs, a ``T.Parallel(BS, D)`` copying the shifted
    fragment rows i + s * (BS // split_store) into a half-height shared slab under
    ``if i < BS // split_store``, and ``T.atomic_add`` of each slab row into the gathered
    dKV row (float32; the caller zeroes it)."""
    rows = BS // split_store

    @T.prim_func
    def dkv(Q: T.Tensor((S, H, D), "float16"), dO: T.Tensor((S, H, D), "float16"),
            Pm: T.Tensor((S, H, topk), "float16"), dP: T.Tensor((S, H, topk), "float16"),
            Idx: T.Tensor((S, topk), "int32"), dKV: T.Tensor((SKV, D), "float32")):
        with T.Kernel(S, topk // BS, threads=threads) as (s_i, i_i):
            q_s = T.alloc_shared((H, D), "float16")
            do_s = T.alloc_shared((H, D), "float16")
            p_s = T.alloc_shared((H, BS), "float16")
            dp_s = T.alloc_shared((H, BS), "float16")
            slab = T.alloc_shared((rows, D), "float32")
            acc = T.alloc_fragment((BS, D), "float32")
            T.copy(Q[s_i, 0, 0], q_s)
            T.copy(dO[s_i, 0, 0], do_s)
            T.copy(Pm[s_i, 0:H, i_i * BS:(i_i + 1) * BS], p_s)
            T.copy(dP[s_i, 0:H, i_i * BS:(i_i + 1) * BS], dp_s)
            T.gemm(dp_s, q_s, acc, transpose_A=True, policy=T.GemmWarpPolicy.FullCol, clear_accum=True)
            T.gemm(p_s, do_s, acc, transpose_A=True, policy=T.GemmWarpPolicy.FullCol)
            for s in range(split_store):
                for i, d in T.Parallel(BS, D):
                    if i < rows:
                        slab[i, d] = acc[i + s * rows, d]
                for i, d in T.Parallel(rows, D):
                    T.atomic_add(dKV[Idx[s_i, i_i * BS + i + s * rows], d], slab[i, d])
    return dkv


# ---- GDN: the chunk recurrence of the delta-rule state -----------------------------------------
@tilecute.jit(out_idx=[4, 5])
def gdn_chunk_delta_h(B=1, S=256, H=2, DK=64, DV=64, chunk=64, threads=128):
    """The gated delta-rule state across chunks: for each chunk c, store h_c, then
    V'_c = U_c - W_c h_c, and h_{c+1} = exp(g_last) h_c + K_c^T (V'_c * exp(g_last - g_t)).
    The state lives in a fragment, copied to shared memory as the gemm's B operand; the
    loop is ``T.Pipelined(num_stages=2)`` over chunks (g here is a per-step log gate already
    summed within its chunk)."""

    @T.prim_func
    def delta_h(K: T.Tensor((B, S, H, DK), "float16"), W: T.Tensor((B, S, H, DK), "float16"),
                U: T.Tensor((B, S, H, DV), "float16"), G: T.Tensor((B, S, H), "float32"),
                Hs: T.Tensor((B, S // chunk, H, DK, DV), "float16"), Vn: T.Tensor((B, S, H, DV), "float16")):
        with T.Kernel(H, B, threads=threads) as (bh, bb):
            k_s = T.alloc_shared((chunk, DK), "float16")
            w_s = T.alloc_shared((chunk, DK), "float16")
            h_s = T.alloc_shared((DK, DV), "float16")
            vn_s = T.alloc_shared((chunk, DV), "float16")
            g_s = T.alloc_shared((chunk,), "float32")
            h_f = T.alloc_fragment((DK, DV), "float32")
            v_f = T.alloc_fragment((chunk, DV), "float32")
            u_f = T.alloc_fragment((chunk, DV), "float32")
            T.clear(h_f)
            for c in T.Pipelined(S // chunk, num_stages=2):
                T.copy(h_f, h_s)
                T.copy(h_s, Hs[bb, c, bh, :, :])
                T.copy(K[bb, c * chunk:(c + 1) * chunk, bh, :], k_s)
                T.copy(W[bb, c * chunk:(c + 1) * chunk, bh, :], w_s)
                T.copy(U[bb, c * chunk:(c + 1) * chunk, bh, :], u_f)
                T.copy(G[bb, c * chunk:(c + 1) * chunk, bh], g_s)
                T.gemm(w_s, h_s, v_f, clear_accum=True)
                for t, v in T.Parallel(chunk, DV):
                    v_f[t, v] = u_f[t, v] - v_f[t, v]
                T.copy(v_f, Vn[bb, c * chunk:(c + 1) * chunk, bh, :])
                for t, v in T.Parallel(chunk, DV):
                    vn_s[t, v] = v_f[t, v] * T.exp(g_s[chunk - 1] - g_s[t])
                for i, j in T.Parallel(DK, DV):
                    h_f[i, j] *= T.exp(g_s[chunk - 1])
                T.gemm(k_s, vn_s, h_f, transpose_A=True)
    return delta_h
