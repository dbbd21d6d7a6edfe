"""A sixteenth set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang): the memory-bound and small fused operators an LLM-serving team writes, each as
a TileLang user writes it, a ``@tilecute.jit(out_idx=...)`` factory returning a
``@T.prim_func``.  Norms with a fused residual add (rows longer than a block's threads,
``T.symbolic`` row counts, bf16 in / fp32 math, scalar ``eps``), per-head QK norm and a
gated group norm, rotary embedding (interleaved and half-split, partial rotary, GQA head
counts, in place), GeGLU / SwiGLU forms, masked softmax, cross-entropy with
``ignore_index``, argmax / small top-k, embedding gathers, fp8 / int8 quantize and
dequantize with their scales, MoE routing helpers, paged KV-cache appends, sampling
helpers, broadcast adds, transposes and 2-D reductions along either dim, ``T.alloc_var``
loops, tails everywhere.

``tests/test_unseen_programs16.py`` builds each to a cubin on the CPU and, on a GPU,
compares it with a float32 / float64 torch reference written to TileLang's meaning."""

import tilecute
import tilecute.language as T

LOG2E = 1.44269504


# ---- norms -----------------------------------------------------------------------------------
@tilecute.jit(out_idx=[3, 4])
def add_rmsnorm_residual_out(N=5120, block_M=2, threads=128, eps=1e-6):
    """vLLM's fused_add_rms_norm as two outputs: h = x + residual (written back as the new
    residual, bfloat16), y = h * rsqrt(mean(h^2) + eps) * weight.  The row (5120) is longer
    than the block's threads; the token count is ``T.symbolic`` and not a multiple of
    block_M.  The math is float32 from the bfloat16 inputs (h is rounded to bfloat16 only
    where it is stored)."""
    M = T.symbolic("num_tokens")
    dtype, accum = "bfloat16", "float32"

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Res: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype),
             Y: T.Tensor((M, N), dtype), ResOut: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            h = T.alloc_fragment((block_M, N), accum)
            sq = T.alloc_fragment((block_M, N), accum)
            ss = T.alloc_fragment((block_M,), accum)
            for i, j in T.Parallel(block_M, N):
                h[i, j] = T.cast(X[bx * block_M + i, j], accum) + T.cast(Res[bx * block_M + i, j], accum)
            T.copy(h, ResOut[bx * block_M, 0])
            for i, j in T.Parallel(block_M, N):
                sq[i, j] = h[i, j] * h[i, j]
            T.reduce_sum(sq, ss, dim=1)
            for i in T.Parallel(block_M):
                ss[i] = T.rsqrt(ss[i] / N + eps)
            for i, j in T.Parallel(block_M, N):
                Y[bx * block_M + i, j] = T.cast(h[i, j] * ss[i] * T.cast(W[j], accum), dtype)

    return main


@tilecute.jit(out_idx=[4, 5, 6])
def layernorm_chunked_scalar_eps(M=300, N=3000, chunk=1024, block_M=4, threads=256):
    """LayerNorm over rows of 3000 read in chunks of 1024 (the last chunk ragged):
    pass one sums x and x^2 over the chunks (``reduce_sum(clear=False)``), pass two
    normalises; eps is a scalar parameter (``eps: T.float32``); weight and bias float32,
    x / y float16; mean and rstd saved (float32) for the backward."""
    dtype, accum = "float16", "float32"
    n_chunks = (N + chunk - 1) // chunk

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Wt: T.Tensor((N,), accum), B: T.Tensor((N,), accum),
             eps: T.float32, Y: T.Tensor((M, N), dtype), Mean: T.Tensor((M,), accum),
             Rstd: T.Tensor((M,), accum)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            xc = T.alloc_fragment((block_M, chunk), accum)
            x2 = T.alloc_fragment((block_M, chunk), accum)
            s1 = T.alloc_fragment((block_M,), accum)
            s2 = T.alloc_fragment((block_M,), accum)
            T.clear(s1)
            T.clear(s2)
            for c in T.serial(n_chunks):
                for i, j in T.Parallel(block_M, chunk):
                    xc[i, j] = T.if_then_else(c * chunk + j < N,
                                              T.cast(X[bx * block_M + i, c * chunk + j], accum), 0.0)
                    x2[i, j] = xc[i, j] * xc[i, j]
                T.reduce_sum(xc, s1, dim=1, clear=False)
                T.reduce_sum(x2, s2, dim=1, clear=False)
            for i in T.Parallel(block_M):
                s1[i] = s1[i] / N
                s2[i] = T.rsqrt(s2[i] / N - s1[i] * s1[i] + eps)
                if bx * block_M + i < M:
                    Mean[bx * block_M + i] = s1[i]
                    Rstd[bx * block_M + i] = s2[i]
            for c in T.serial(n_chunks):
                for i, j in T.Parallel(block_M, chunk):
                    if c * chunk + j < N:
                        Y[bx * block_M + i, c * chunk + j] = T.cast(
                            (T.cast(X[bx * block_M + i, c * chunk + j], accum) - s1[i]) * s2[i]
                            * Wt[c * chunk + j] + B[c * chunk + j], dtype)

    return main


@tilecute.jit(out_idx=[2])
def qk_norm_per_head(H=12, D=128, block_T=4, threads=128, eps=1e-6):
    """Per-head RMSNorm of a [tokens, heads, head_dim] tensor (Qwen3's q_norm / k_norm):
    each (token, head) vector of 128 normalised alone, one weight shared by the heads.
    Tokens are ``T.dynamic``; a block takes block_T tokens (a 3-D fragment reduced along
    its last dim)."""
    Tn = T.dynamic("tokens")
    dtype, accum = "bfloat16", "float32"

    @T.prim_func
    def main(Q: T.Tensor((Tn, H, D), dtype), W: T.Tensor((D,), dtype), Out: T.Tensor((Tn, H, D), dtype)):
        with T.Kernel(T.ceildiv(Tn, block_T), threads=threads) as bx:
            q = T.alloc_fragment((block_T, H, D), accum)
            q2 = T.alloc_fragment((block_T, H, D), accum)
            ss = T.alloc_fragment((block_T, H), accum)
            T.copy(Q[bx * block_T:(bx + 1) * block_T, :, :], q)
            for t, h, d in T.Parallel(block_T, H, D):
                q2[t, h, d] = q[t, h, d] * q[t, h, d]
            T.reduce_sum(q2, ss, dim=2)
            for t, h, d in T.Parallel(block_T, H, D):
                q[t, h, d] = q[t, h, d] * T.rsqrt(ss[t, h] / D + eps) * W[d]
            T.copy(q, Out[bx * block_T:(bx + 1) * block_T, :, :])

    return main


@tilecute.jit(out_idx=[3])
def gated_group_rmsnorm(M=200, N=1024, group=256, block_M=2, threads=128, eps=1e-5):
    """Mamba-2's gated RMSNorm with groups: g = x * silu(z), then each group of 256 columns
    of a row is RMS-normalised on its own and scaled by the weight.  The fragment is
    viewed as (rows, groups, group) by indexing (no reshape), reduced along its last dim."""
    G = N // group
    dtype, accum = "float16", "float32"

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Z: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype),
             Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            g = T.alloc_fragment((block_M, G, group), accum)
            g2 = T.alloc_fragment((block_M, G, group), accum)
            ss = T.alloc_fragment((block_M, G), accum)
            for i, k, j in T.Parallel(block_M, G, group):
                z = T.cast(Z[bx * block_M + i, k * group + j], accum)
                g[i, k, j] = T.cast(X[bx * block_M + i, k * group + j], accum) * z * T.sigmoid(z)
                g2[i, k, j] = g[i, k, j] * g[i, k, j]
            T.reduce_sum(g2, ss, dim=2)
            for i, k, j in T.Parallel(block_M, G, group):
                if bx * block_M + i < M:
                    Y[bx * block_M + i, k * group + j] = T.cast(
                        g[i, k, j] * T.rsqrt(ss[i, k] / group + eps) * T.cast(W[k * group + j], accum), dtype)

    return main


# ---- rotary embedding ------------------------------------------------------------------------
@tilecute.jit(out_idx=[5, 6])
def rope_interleaved_gqa(Hq=8, Hk=2, D=128, max_pos=4096, block_T=2, threads=128):
    """GPT-J style rotary embedding (pairs (2i, 2i + 1) rotated) applied to Q and K of a
    GQA layer (8 query heads, 2 key heads) at each token's position (Pos int64); cos /
    sin tables are float32 [max_pos, D / 2].  Tokens are ``T.symbolic``."""
    Tn = T.symbolic("tokens")
    half = D // 2
    dtype, accum = "bfloat16", "float32"

    @T.prim_func
    def main(Q: T.Tensor((Tn, Hq, D), dtype), K: T.Tensor((Tn, Hk, D), dtype), Pos: T.Tensor((Tn,), "int64"),
             Cos: T.Tensor((max_pos, half), accum), Sin: T.Tensor((max_pos, half), accum),
             Qo: T.Tensor((Tn, Hq, D), dtype), Ko: T.Tensor((Tn, Hk, D), dtype)):
        with T.Kernel(T.ceildiv(Tn, block_T), threads=threads) as bx:
            for t, h, i in T.Parallel(block_T, Hq, half):
                tok = bx * block_T + t
                if tok < Tn:
                    p = Pos[tok]
                    x0 = T.cast(Q[tok, h, 2 * i], accum)
                    x1 = T.cast(Q[tok, h, 2 * i + 1], accum)
                    Qo[tok, h, 2 * i] = T.cast(x0 * Cos[p, i] - x1 * Sin[p, i], dtype)
                    Qo[tok, h, 2 * i + 1] = T.cast(x1 * Cos[p, i] + x0 * Sin[p, i], dtype)
            for t, h, i in T.Parallel(block_T, Hk, half):
                tok = bx * block_T + t
                if tok < Tn:
                    p = Pos[tok]
                    x0 = T.cast(K[tok, h, 2 * i], accum)
                    x1 = T.cast(K[tok, h, 2 * i + 1], accum)
                    Ko[tok, h, 2 * i] = T.cast(x0 * Cos[p, i] - x1 * Sin[p, i], dtype)
                    Ko[tok, h, 2 * i + 1] = T.cast(x1 * Cos[p, i] + x0 * Sin[p, i], dtype)

    return main


@tilecute.jit
def rope_neox_partial_inplace(tokens=77, Hq=16, Hk=4, D=128, rot=64, max_pos=2048, threads=128):
    """NeoX style (half split) rotary embedding on the first ``rot`` dims of each head,
    in place on a packed QKV tensor [tokens, Hq + 2 Hk, D] (V heads untouched, the
    dims past ``rot`` untouched).  cos / sin [max_pos, rot] hold the duplicated halves as
    HF stores them; positions int32.  No outputs: the kernel writes its input."""
    half = rot // 2
    heads = Hq + Hk
    dtype, accum = "float16", "float32"

    @T.prim_func
    def main(QKV: T.Tensor((tokens, Hq + 2 * Hk, D), dtype), Pos: T.Tensor((tokens,), "int32"),
             Cos: T.Tensor((max_pos, rot), dtype), Sin: T.Tensor((max_pos, rot), dtype)):
        with T.Kernel(tokens, threads=threads) as t:
            xs = T.alloc_shared((heads, rot), dtype)
            cs = T.alloc_shared((rot,), dtype)
            sn = T.alloc_shared((rot,), dtype)
            p = Pos[t]
            T.copy(QKV[t, 0:heads, 0:rot], xs)
            T.copy(Cos[p, :], cs)
            T.copy(Sin[p, :], sn)
            for h, i in T.Parallel(heads, half):
                a = T.cast(xs[h, i], accum)
                b = T.cast(xs[h, i + half], accum)
                QKV[t, h, i] = T.cast(a * cs[i] - b * sn[i], dtype)
                QKV[t, h, i + half] = T.cast(b * cs[i + half] + a * sn[i + half], dtype)

    return main


# ---- gated activations -----------------------------------------------------------------------
@tilecute.jit(out_idx=[1])
def geglu(M=333, N=1000, approximate="tanh", block_M=32, block_N=128, threads=128):
    """GeGLU over [M, 2N] (gate first, up second): gelu(gate) * up, gelu with tanh
    (``approximate="tanh"``) or with erf (``"none"``), float32 math, bfloat16 io, both
    dims ragged against the tile."""
    dtype, accum = "bfloat16", "float32"

    @T.prim_func
    def main(X: T.Tensor((M, 2 * N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            gate = T.alloc_fragment((block_M, block_N), accum)
            up = T.alloc_fragment((block_M, block_N), accum)
            out = T.alloc_fragment((block_M, block_N), dtype)
            for i, j in T.Parallel(block_M, block_N):
                r, c = by * block_M + i, bx * block_N + j
                gate[i, j] = T.if_then_else(r < M and c < N, T.cast(X[r, c], accum), 0.0)
                up[i, j] = T.if_then_else(r < M and c < N, T.cast(X[r, c + N], accum), 0.0)
            for i, j in T.Parallel(block_M, block_N):
                g = gate[i, j]
                if approximate == "tanh":
                    act = 0.5 * g * (1.0 + T.tanh(0.7978845608028654 * (g + 0.044715 * g * g * g)))
                else:
                    act = 0.5 * g * (1.0 + T.erf(g * 0.7071067811865476))
                out[i, j] = T.cast(act * up[i, j], dtype)
            T.copy(out, Y[by * block_M, bx * block_N])

    return main


@tilecute.jit(out_idx=[1])
def swiglu_interleaved_clamped(M=257, N=704, alpha=1.702, limit=7.0, block_M=16, block_N=64, threads=128):
    """gpt-oss's clamped SwiGLU on interleaved columns (gate at 2j, up at 2j + 1):
    gate = min(gate, limit), up = clamp(up, -limit, limit), out = gate * sigmoid(alpha *
    gate) * (up + 1).  M ragged against block_M."""
    dtype, accum = "bfloat16", "float32"

    @T.prim_func
    def main(X: T.Tensor((M, 2 * N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(N // block_N, T.ceildiv(M, block_M), threads=threads) as (bx, by):
            xs = T.alloc_shared((block_M, 2 * block_N), dtype)
            T.copy(X[by * block_M, bx * 2 * block_N], xs)
            for i, j in T.Parallel(block_M, block_N):
                g = T.min(T.cast(xs[i, 2 * j], accum), limit)
                u = T.clamp(T.cast(xs[i, 2 * j + 1], accum), -limit, limit)
                if by * block_M + i < M:
                    Y[by * block_M + i, bx * block_N + j] = T.cast(g * T.sigmoid(alpha * g) * (u + 1.0), dtype)

    return main


# ---- softmax, cross-entropy, argmax, top-k, sampling ----------------------------------------
@tilecute.jit(out_idx=[3])
def masked_softmax_key_padding(B=2, H=3, S=100, N=1000, block_M=4, threads=128):
    """Softmax of scaled scores [B, H, S, N] (float16) with a key-padding mask [B, N]
    (bool, True keeps the key); a row whose keys are all masked is written as zeros (not
    NaN).  ``scale`` is a scalar parameter; rows of 1000 in a fragment of 1024 (the pad
    masked as -inf: TileLang finds no layout for a 1000-wide row over 128 threads), S
    ragged against block_M; exp2 with log2(e) folded into the scale."""
    dtype, accum = "float16", "float32"
    Np = 1 << (N - 1).bit_length()

    @T.prim_func
    def main(Sc: T.Tensor((B, H, S, N), dtype), Keep: T.Tensor((B, N), "bool"), scale: T.float32,
             P: T.Tensor((B, H, S, N), dtype)):
        with T.Kernel(T.ceildiv(S, block_M), H, B, threads=threads) as (bx, by, bz):
            x = T.alloc_fragment((block_M, Np), accum)
            mx = T.alloc_fragment((block_M,), accum)
            sm = T.alloc_fragment((block_M,), accum)
            for i, j in T.Parallel(block_M, Np):
                x[i, j] = T.if_then_else(j < N and Keep[bz, j] and bx * block_M + i < S,
                                         T.cast(Sc[bz, by, bx * block_M + i, j], accum) * scale * LOG2E,
                                         -T.infinity(accum))
            T.reduce_max(x, mx, dim=1)
            for i, j in T.Parallel(block_M, Np):
                x[i, j] = T.if_then_else(mx[i] == -T.infinity(accum), 0.0, T.exp2(x[i, j] - mx[i]))
            T.reduce_sum(x, sm, dim=1)
            for i, j in T.Parallel(block_M, Np):
                if bx * block_M + i < S and j < N:
                    P[bz, by, bx * block_M + i, j] = T.cast(
                        T.if_then_else(sm[i] > 0.0, x[i, j] / sm[i], 0.0), dtype)

    return main


@tilecute.jit(out_idx=[2])
def cross_entropy_ignore_index(V=32003, chunk=2048, ignore_index=-100, threads=256):
    """Token cross-entropy with ``ignore_index``: one block per row of logits (bfloat16,
    vocab 32003: the last chunk ragged) keeps an online max / sum-of-exp over the chunks
    (``T.alloc_var`` carries), gathers the target's logit by a scalar read, writes the
    per-row loss (0 for ignored rows) and adds the loss and the count of kept rows into
    two float32 totals with ``T.atomic_add`` (the mean is Total[0] / Total[1])."""
    M = T.symbolic("rows")
    dtype, accum = "bfloat16", "float32"
    n_chunks = (V + chunk - 1) // chunk

    @T.prim_func
    def main(Logits: T.Tensor((M, V), dtype), Labels: T.Tensor((M,), "int64"), Loss: T.Tensor((M,), accum),
             Total: T.Tensor((2,), accum)):
        with T.Kernel(M, threads=threads) as row:
            x = T.alloc_fragment((chunk,), accum)
            cm = T.alloc_fragment((1,), accum)
            cs = T.alloc_fragment((1,), accum)
            m = T.alloc_var(accum, init=-T.infinity(accum))
            s = T.alloc_var(accum, init=0.0)
            for c in T.serial(n_chunks):
                for j in T.Parallel(chunk):
                    x[j] = T.if_then_else(c * chunk + j < V, T.cast(Logits[row, c * chunk + j], accum),
                                          -T.infinity(accum))
                T.reduce_max(x, cm, dim=0)
                m_new = T.max(m, cm[0])
                for j in T.Parallel(chunk):
                    x[j] = T.exp(x[j] - m_new)
                T.reduce_sum(x, cs, dim=0)
                s = s * T.exp(m - m_new) + cs[0]
                m = m_new
            label = Labels[row]
            tx = T.get_thread_binding()
            if label == ignore_index:
                if tx == 0:
                    Loss[row] = 0.0
            else:
                if tx == 0:
                    loss = T.log(s) + m - T.cast(Logits[row, label], accum)
                    Loss[row] = loss
                    T.atomic_add(Total[0], loss)
                    T.atomic_add(Total[1], 1.0)

    return main


@tilecute.jit(out_idx=[1, 2])
def argmax_vocab_chunks(M=6, V=50257, chunk=4096, threads=256):
    """Greedy decoding's argmax over a vocabulary of 50257 read in chunks of 4096: each
    chunk's max, then the smallest index holding it (a ``reduce_min`` over indices where
    the value equals the max), merged into a running (value, index) pair kept in
    ``T.alloc_var`` s; ties keep the first index, as torch.argmax does.  Writes the max
    (float32) and its index (int64)."""
    dtype, accum = "float16", "float32"
    n_chunks = (V + chunk - 1) // chunk

    @T.prim_func
    def main(Logits: T.Tensor((M, V), dtype), Val: T.Tensor((M,), accum), Idx: T.Tensor((M,), "int64")):
        with T.Kernel(M, threads=threads) as row:
            x = T.alloc_fragment((chunk,), accum)
            ix = T.alloc_fragment((chunk,), "int32")
            cmax = T.alloc_fragment((1,), accum)
            cidx = T.alloc_fragment((1,), "int32")
            best = T.alloc_var(accum)
            best_i = T.alloc_var("int32")
            best = -T.infinity(accum)
            best_i = 0
            for c in T.serial(n_chunks):
                for j in T.Parallel(chunk):
                    x[j] = T.if_then_else(c * chunk + j < V, T.cast(Logits[row, c * chunk + j], accum),
                                          -T.infinity(accum))
                T.reduce_max(x, cmax, dim=0)
                for j in T.Parallel(chunk):
                    ix[j] = T.if_then_else(x[j] == cmax[0] and c * chunk + j < V, c * chunk + j, V)
                T.reduce_min(ix, cidx, dim=0)
                if cmax[0] > best:
                    best = cmax[0]
                    best_i = cidx[0]
            if T.get_thread_binding() == 0:
                Val[row] = best
                Idx[row] = T.cast(best_i, "int64")

    return main


@tilecute.jit(out_idx=[1, 2])
def topk_small_k_rounds(M=300, N=1000, k=4, block_M=2, threads=128):
    """Top-k with small k by k rounds of (row max, first index of it, knock it out with
    -inf) over a [block_M, N] fragment; values float32 in descending order, indices int32
    (first occurrence on ties, as torch.topk on distinct values).  A ``T.serial`` loop
    over the rounds around the ``T.Parallel`` / ``T.reduce_*`` statements; the row of 1000
    sits in a fragment of 1024 whose pad is -inf."""
    accum = "float32"
    Np = 1 << (N - 1).bit_length()

    @T.prim_func
    def main(X: T.Tensor((M, N), accum), Vals: T.Tensor((M, k), accum), Ids: T.Tensor((M, k), "int32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, Np), accum)
            ix = T.alloc_fragment((block_M, Np), "int32")
            mx = T.alloc_fragment((block_M,), accum)
            am = T.alloc_fragment((block_M,), "int32")
            for i, j in T.Parallel(block_M, Np):
                x[i, j] = T.if_then_else(j < N and bx * block_M + i < M, X[bx * block_M + i, j], -T.infinity(accum))
            for r in T.serial(k):
                T.reduce_max(x, mx, dim=1)
                for i, j in T.Parallel(block_M, Np):
                    ix[i, j] = T.if_then_else(x[i, j] == mx[i], j, Np)
                T.reduce_min(ix, am, dim=1)
                for i in T.Parallel(block_M):
                    if bx * block_M + i < M:
                        Vals[bx * block_M + i, r] = mx[i]
                        Ids[bx * block_M + i, r] = am[i]
                for i, j in T.Parallel(block_M, Np):
                    if j == am[i]:
                        x[i, j] = -T.infinity(accum)

    return main


@tilecute.jit(out_idx=[3])
def sample_temperature_gumbel(B=5, V=32000, chunk=2048, threads=256):
    """Sampling by the Gumbel-max trick with a temperature per row: token = argmax(logits /
    t + g) with the Gumbel noise g given (float32 [B, V]); a row with t == 0 is greedy
    (argmax of the logits, noise ignored).  The chunk's (max, first index) found with
    ``T.reduce_max`` then ``T.reduce_min`` over indices; tokens int64."""
    accum = "float32"
    n_chunks = (V + chunk - 1) // chunk

    @T.prim_func
    def main(Logits: T.Tensor((B, V), accum), G: T.Tensor((B, V), accum), Temp: T.Tensor((B,), accum),
             Tok: T.Tensor((B,), "int64")):
        with T.Kernel(B, threads=threads) as b:
            x = T.alloc_fragment((chunk,), accum)
            ix = T.alloc_fragment((chunk,), "int32")
            cm = T.alloc_fragment((1,), accum)
            ci = T.alloc_fragment((1,), "int32")
            best = T.alloc_var(accum, init=-T.infinity(accum))
            best_i = T.alloc_var("int32", init=0)
            t = Temp[b]
            greedy = t == 0.0
            inv_t = T.if_then_else(greedy, 1.0, 1.0 / t)
            for c in T.serial(n_chunks):
                for j in T.Parallel(chunk):
                    col = c * chunk + j
                    x[j] = T.if_then_else(col < V, Logits[b, col] * inv_t + T.if_then_else(greedy, 0.0, G[b, col]),
                                          -T.infinity(accum))
                T.reduce_max(x, cm, dim=0)
                for j in T.Parallel(chunk):
                    ix[j] = T.if_then_else(x[j] == cm[0], c * chunk + j, V)
                T.reduce_min(ix, ci, dim=0)
                if cm[0] > best:
                    best = cm[0]
                    best_i = ci[0]
            Tok[b] = T.cast(best_i, "int64")

    return main


@tilecute.jit
def repetition_penalty_inplace(B=4, V=1000, L=50, penalty=1.3, threads=64):
    """HF's repetition penalty in place: for each previously generated token id (Prev
    [B, L], repeats allowed) the logit becomes l / p if l > 0 else l * p.  All the ids'
    logits are gathered into shared memory first and written back after a barrier, so a
    repeated id is penalised once, from its original value (as torch's gather then
    scatter)."""
    accum = "float32"

    @T.prim_func
    def main(Logits: T.Tensor((B, V), accum), Prev: T.Tensor((B, L), "int32")):
        with T.Kernel(B, threads=threads) as b:
            g = T.alloc_shared((L,), accum)
            for j in T.Parallel(L):
                g[j] = Logits[b, Prev[b, j]]
            for j in T.Parallel(L):
                Logits[b, Prev[b, j]] = T.if_then_else(g[j] > 0.0, g[j] / penalty, g[j] * penalty)

    return main


@tilecute.jit(out_idx=[1])
def min_p_renorm(M=100, V=4000, min_p=0.05, block_M=1, threads=256):
    """min-p filtering: softmax of a row, probabilities below min_p * (the row's top
    probability) zeroed, the rest renormalised (float32 probabilities out).  The row of
    4000 in a fragment of 4096 (pad -inf); a row block of one row."""
    accum = "float32"
    Vp = 1 << (V - 1).bit_length()

    @T.prim_func
    def main(L: T.Tensor((M, V), "bfloat16"), P: T.Tensor((M, V), accum)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, Vp), accum)
            mx = T.alloc_fragment((block_M,), accum)
            sm = T.alloc_fragment((block_M,), accum)
            kept = T.alloc_fragment((block_M,), accum)
            for i, j in T.Parallel(block_M, Vp):
                x[i, j] = T.if_then_else(j < V, L[bx * block_M + i, j], -T.infinity(accum))
            T.reduce_max(x, mx, dim=1)
            for i, j in T.Parallel(block_M, Vp):
                x[i, j] = T.exp(x[i, j] - mx[i])
            T.reduce_sum(x, sm, dim=1)
            # the top probability is exp(0) / sm = 1 / sm: keep p >= min_p / sm, i.e. e >= min_p
            for i, j in T.Parallel(block_M, Vp):
                x[i, j] = T.if_then_else(x[i, j] >= min_p, x[i, j], 0.0)
            T.reduce_sum(x, kept, dim=1)
            for i, j in T.Parallel(block_M, Vp):
                if j < V:
                    P[bx * block_M + i, j] = x[i, j] / kept[i]

    return main
