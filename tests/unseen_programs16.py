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


# ---- reductions along either dim, transposes ------------------------------------------------
@tilecute.jit(out_idx=[1])
def lora_three_slices_sum(M=1000, N=64, block_N=64, threads=64):
    """The three slices of a fused QKV-LoRA output [3, M, N] summed into one [M, N]
    through a [3, block_N] fragment a row at a time: ``T.reduce_sum(frag, out, dim=0)``
    over 3 rows (not a power of two) -- TileLang accepts it (each thread holds a column's
    three values)."""
    accum = "float32"

    @T.prim_func
    def main(X: T.Tensor((3, M, N), "float16"), Y: T.Tensor((M, N), accum)):
        with T.Kernel(M, T.ceildiv(N, block_N), threads=threads) as (bx, by):
            f = T.alloc_fragment((3, block_N), accum)
            s = T.alloc_fragment((block_N,), accum)
            for k, j in T.Parallel(3, block_N):
                f[k, j] = X[k, bx, by * block_N + j]
            T.reduce_sum(f, s, dim=0)
            T.copy(s, Y[bx, by * block_N:(by + 1) * block_N])

    return main


@tilecute.jit
def tile_reductions_both_dims(M=300, N=200, block_M=64, block_N=64, threads=128):
    """One [64, 64] tile reduced both ways: row sums (dim=1, added over the column tiles
    with ``T.atomic_add``), column sums (dim=0, atomics over the row tiles), column max
    (``reduce_max`` dim=0) and column absmax (``reduce_absmax`` dim=0) merged with
    ``T.atomic_max``; both dims ragged (pads contribute 0 to sums, -inf to the max).  The
    four outputs are accumulated into, so the caller initialises them (no ``out_idx``)."""
    accum = "float32"

    @T.prim_func
    def main(X: T.Tensor((M, N), accum), RowSum: T.Tensor((M,), accum), ColSum: T.Tensor((N,), accum),
             ColMax: T.Tensor((N,), accum), ColAbs: T.Tensor((N,), accum)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            x = T.alloc_fragment((block_M, block_N), accum)
            xm = T.alloc_fragment((block_M, block_N), accum)
            rs = T.alloc_fragment((block_M,), accum)
            cs = T.alloc_fragment((block_N,), accum)
            cm = T.alloc_fragment((block_N,), accum)
            ca = T.alloc_fragment((block_N,), accum)
            T.copy(X[by * block_M, bx * block_N], x)  # the pad reads as 0
            for i, j in T.Parallel(block_M, block_N):
                xm[i, j] = T.if_then_else(by * block_M + i < M, x[i, j], -T.infinity(accum))
            T.reduce_sum(x, rs, dim=1)
            T.reduce_sum(x, cs, dim=0)
            T.reduce_max(xm, cm, dim=0)
            T.reduce_absmax(x, ca, dim=0)
            for i in T.Parallel(block_M):
                if by * block_M + i < M:
                    T.atomic_add(RowSum[by * block_M + i], rs[i])
            for j in T.Parallel(block_N):
                if bx * block_N + j < N:
                    T.atomic_add(ColSum[bx * block_N + j], cs[j])
                    T.atomic_max(ColMax[bx * block_N + j], cm[j])
                    T.atomic_max(ColAbs[bx * block_N + j], ca[j])

    return main


@tilecute.jit(out_idx=[1])
def transpose_cast_scale_symbolic(N=777, scale=0.5, block=32, threads=128):
    """out[j, i] = bf16(x[i, j] * scale) for a float32 [M, 777] with M ``T.symbolic``,
    through a padded shared tile [32, 33] (column reads hit distinct banks), the two
    ``T.Parallel`` phases separated by the barrier the compiler places; both dims ragged."""
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((N, M), "bfloat16")):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=threads) as (bx, by):
            tile = T.alloc_shared((block, block + 1), "float32")
            for i, j in T.Parallel(block, block):
                r, c = by * block + i, bx * block + j
                tile[i, j] = T.if_then_else(r < M and c < N, X[r, c], 0.0)
            for j, i in T.Parallel(block, block):
                r, c = by * block + i, bx * block + j
                if r < M and c < N:
                    Y[c, r] = T.cast(tile[i, j] * scale, "bfloat16")

    return main


@tilecute.jit(out_idx=[1])
def column_mean_shared_reduce(M=1000, N=128, chunk=64, threads=128):
    """Column means of a [1000, 128] float16 matrix (the mean over tokens of each hidden
    unit): chunks of 64 rows copied to shared memory, ``T.reduce_sum`` of the *shared*
    tile along dim=0 accumulated (``clear=False``) into a fragment; the last chunk ragged
    (the copy's pad reads as 0).  (At N = 96 TileLang 0.1.15 finds no layout for the
    [96] accumulator over 128 threads; tilecute builds it too.)"""
    accum = "float32"

    @T.prim_func
    def main(X: T.Tensor((M, N), "float16"), Mean: T.Tensor((N,), accum)):
        with T.Kernel(1, threads=threads):
            xs = T.alloc_shared((chunk, N), accum)
            acc = T.alloc_fragment((N,), accum)
            T.clear(acc)
            for c in T.serial(T.ceildiv(M, chunk)):
                T.copy(X[c * chunk, 0], xs)
                T.reduce_sum(xs, acc, dim=0, clear=False)
            for j in T.Parallel(N):
                Mean[j] = acc[j] / M

    return main


@tilecute.jit(out_idx=[1])
def popcount_clz_narrow(n=256, threads=128):
    """T.popcount of 8- and 16-bit arithmetic that overflows: a uint8 sum wraps (200 +
    100 -> 44), a uint16 product wraps, an int8 negation; the bit count is that of the
    narrow value (TileLang's __popc of the narrow result converted to 32 bits: zero- or
    sign-extended).  T.clz takes 32 / 64-bit integers only (TileLang refuses uint8), so the
    narrow results are cast to 32 bits first (uint8 -> uint32 zero-extends, int8 -> int32
    sign-extends)."""

    @T.prim_func
    def main(A: T.Tensor((n,), "uint8"), Out: T.Tensor((n, 6), "int32")):
        with T.Kernel(1, threads=threads):
            for i in T.Parallel(n):
                a = A[i]
                s8 = a + T.uint8(200)
                w16 = T.cast(a, "uint16") * T.uint16(300)
                neg8 = -T.cast(a, "int8")
                Out[i, 0] = T.popcount(s8)
                Out[i, 1] = T.clz(T.cast(s8, "uint32"))
                Out[i, 2] = T.popcount(w16)
                Out[i, 3] = T.clz(T.cast(w16, "int32"))
                Out[i, 4] = T.popcount(neg8)
                Out[i, 5] = T.clz(T.cast(neg8, "int32"))

    return main


# ---- gathers, quantization, caches, routing -------------------------------------------------
@tilecute.jit(out_idx=[2])
def embedding_gather_padding_idx(V=32000, D=4096, padding_idx=0, block_T=2, threads=256):
    """Token embedding: Out[t] = Table[Ids[t]] (bfloat16 rows of 4096), the row of zeros
    for ``padding_idx`` and for an id outside [0, V) (a guard the program writes).  Tokens
    ``T.dynamic``; block_T tokens a block, each row copied through a 2-D ``T.Parallel``."""
    Tn = T.dynamic("tokens")
    dtype = "bfloat16"

    @T.prim_func
    def main(Ids: T.Tensor((Tn,), "int64"), Table: T.Tensor((V, D), dtype), Out: T.Tensor((Tn, D), dtype)):
        with T.Kernel(T.ceildiv(Tn, block_T), threads=threads) as bx:
            for t, d in T.Parallel(block_T, D):
                tok = bx * block_T + t
                if tok < Tn:
                    idx = Ids[tok]
                    Out[tok, d] = T.if_then_else(idx != padding_idx and idx >= 0 and idx < V,
                                                 Table[idx, d], T.cast(0, dtype))

    return main


@tilecute.jit(out_idx=[1, 2])
def fp8_weight_block_quant(N=1000, K=700, blk=128, threads=128):
    """DeepSeek-V3 style weight quantization in 128 x 128 blocks: the block's absmax by
    ``T.reduce_absmax`` along dim=1 then ``T.reduce_max`` along dim=0 of the row maxima
    (a [128, 1]-shaped 2-D fragment), scale = max(amax, 1e-4) / 448, q = e4m3(clamp(w /
    scale, -448, 448)); scales float32 [ceil(N/128), ceil(K/128)].  Both dims ragged: the
    pad reads as 0 and is not written."""
    accum = "float32"
    fp8 = "float8_e4m3"

    @T.prim_func
    def main(W: T.Tensor((N, K), "bfloat16"), Q: T.Tensor((N, K), fp8),
             S: T.Tensor((T.ceildiv(N, blk), T.ceildiv(K, blk)), accum)):
        with T.Kernel(T.ceildiv(K, blk), T.ceildiv(N, blk), threads=threads) as (bx, by):
            w = T.alloc_fragment((blk, blk), accum)
            rmax = T.alloc_fragment((blk, 1), accum)
            amax = T.alloc_fragment((1,), accum)
            T.copy(W[by * blk, bx * blk], w)
            T.reduce_absmax(w, rmax, dim=1)
            T.reduce_max(rmax, amax, dim=0)
            scale = T.max(amax[0], 1e-4) / 448.0
            S[by, bx] = scale
            for i, j in T.Parallel(blk, blk):
                if by * blk + i < N and bx * blk + j < K:
                    Q[by * blk + i, bx * blk + j] = T.cast(T.clamp(w[i, j] / scale, -448.0, 448.0), fp8)

    return main


@tilecute.jit(out_idx=[2])
def fp8_block_dequant(N=1000, K=700, blk=128, threads=128):
    """The inverse: W = bfloat16(q * S[i // 128, j // 128]), through a shared tile of the
    fp8 block (``T.copy`` global -> shared, ragged)."""
    fp8 = "float8_e4m3"

    @T.prim_func
    def main(Q: T.Tensor((N, K), fp8), S: T.Tensor((T.ceildiv(N, blk), T.ceildiv(K, blk)), "float32"),
             W: T.Tensor((N, K), "bfloat16")):
        with T.Kernel(T.ceildiv(K, blk), T.ceildiv(N, blk), threads=threads) as (bx, by):
            qs = T.alloc_shared((blk, blk), fp8)
            T.copy(Q[by * blk, bx * blk], qs)
            s = S[by, bx]
            for i, j in T.Parallel(blk, blk):
                if by * blk + i < N and bx * blk + j < K:
                    W[by * blk + i, bx * blk + j] = T.cast(T.cast(qs[i, j], "float32") * s, "bfloat16")

    return main


@tilecute.jit(out_idx=[1, 2])
def act_quant_fp8_groups_colmajor_scales(N=7168, group=128, block_M=4, threads=128):
    """Per-token, per-128-column-group fp8 activation quantization with the scales stored
    column-major (DeepGEMM's layout: S[g, m], tokens contiguous), ue8m0 scales (rounded up
    to a power of two: 2^ceil(log2(amax / 448))); tokens ``T.symbolic``.  A 3-D fragment
    (rows, groups, 128) reduced along its last dim."""
    M = T.symbolic("M")
    G = N // group
    accum = "float32"

    @T.prim_func
    def main(X: T.Tensor((M, N), "bfloat16"), Q: T.Tensor((M, N), "float8_e4m3"), S: T.Tensor((G, M), accum)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, G, group), accum)
            am = T.alloc_fragment((block_M, G), accum)
            for i, g, j in T.Parallel(block_M, G, group):
                x[i, g, j] = T.if_then_else(bx * block_M + i < M, T.cast(X[bx * block_M + i, g * group + j], accum), 0.0)
            T.reduce_absmax(x, am, dim=2)
            for i, g in T.Parallel(block_M, G):
                am[i, g] = T.exp2(T.ceil(T.log2(T.max(am[i, g], 1e-10) / 448.0)))
                if bx * block_M + i < M:
                    S[g, bx * block_M + i] = am[i, g]
            for i, g, j in T.Parallel(block_M, G, group):
                if bx * block_M + i < M:
                    Q[bx * block_M + i, g * group + j] = T.cast(T.clamp(x[i, g, j] / am[i, g], -448.0, 448.0),
                                                                "float8_e4m3")

    return main


@tilecute.jit(out_idx=[2, 3])
def int8_smoothquant_per_token(M=300, N=2048, block_M=2, threads=256):
    """SmoothQuant's dynamic int8 activation quantization: x' = x * smooth (per column),
    scale = absmax(x' row) / 127, q = int8(round(x' / scale)) with ties to even
    (``T.round``), clamped to [-127, 127]; an all-zero row gets scale 1 (q all 0)."""
    accum = "float32"

    @T.prim_func
    def main(X: T.Tensor((M, N), "float16"), Smooth: T.Tensor((N,), accum), Q: T.Tensor((M, N), "int8"),
             S: T.Tensor((M,), accum)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, N), accum)
            am = T.alloc_fragment((block_M,), accum)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = T.cast(X[bx * block_M + i, j], accum) * Smooth[j]
            T.reduce_absmax(x, am, dim=1)
            for i in T.Parallel(block_M):
                am[i] = T.if_then_else(am[i] == 0.0, 1.0, am[i] / 127.0)
                S[bx * block_M + i] = am[i]
            for i, j in T.Parallel(block_M, N):
                Q[bx * block_M + i, j] = T.cast(T.clamp(T.round(x[i, j] / am[i]), -127.0, 127.0), "int8")

    return main


@tilecute.jit
def moe_route_one_block(n_tokens=300, topk=2, E=16, threads=256):
    """MoE routing in one block: count the (token, slot) pairs per expert with shared-memory
    ``T.atomic_add``, an exclusive prefix sum of the counts with ``T.cumsum`` on the shared
    counts (inclusive, then shifted), then each pair takes a ticket in its expert's segment
    (``T.atomic_add(..., return_prev=True)`` on a shared cursor) and writes its flat pair
    index there (SortedIds) and its position back (Pos[t, k]); Offsets[E + 1] out.  The
    order inside a segment is the tickets' (any); the test checks the segments."""
    n = n_tokens * topk

    @T.prim_func
    def main(TopkIds: T.Tensor((n_tokens, topk), "int32"), Offsets: T.Tensor((E + 1,), "int32"),
             SortedIds: T.Tensor((n,), "int32"), Pos: T.Tensor((n_tokens, topk), "int32")):
        with T.Kernel(1, threads=threads):
            cnt = T.alloc_shared((E,), "int32")
            incl = T.alloc_shared((E,), "int32")
            cursor = T.alloc_shared((E,), "int32")
            T.fill(cnt, 0)
            for p in T.Parallel(n):
                T.atomic_add(cnt[TopkIds[p // topk, p % topk]], 1)
            T.copy(cnt, incl)
            T.cumsum(incl, dim=0)
            for e in T.Parallel(E):
                cursor[e] = incl[e] - cnt[e]
                Offsets[e + 1] = incl[e]
                if e == 0:
                    Offsets[0] = 0
            for p in T.Parallel(n):
                slot = T.atomic_add(cursor[TopkIds[p // topk, p % topk]], 1, return_prev=True)
                SortedIds[slot] = p
                Pos[p // topk, p % topk] = slot

    return main


@tilecute.jit
def paged_kv_append_block_table(B=4, Hk=8, D=128, page=16, max_pages=64, num_blocks=256, threads=128):
    """Decode-step KV-cache append into a paged cache through a block table: sequence b's
    new K / V [B, Hk, D] go to position p = SeqLens[b] (the length before this token):
    page BlockTable[b, p // page], row p % page of Kc / Vc [num_blocks, page, Hk, D].  A
    sequence with SeqLens[b] < 0 (a padding slot) writes nothing.  No outputs: the caches
    are written in place."""
    dtype = "bfloat16"

    @T.prim_func
    def main(K: T.Tensor((B, Hk, D), dtype), V: T.Tensor((B, Hk, D), dtype),
             SeqLens: T.Tensor((B,), "int32"), BlockTable: T.Tensor((B, max_pages), "int32"),
             Kc: T.Tensor((num_blocks, page, Hk, D), dtype), Vc: T.Tensor((num_blocks, page, Hk, D), dtype)):
        with T.Kernel(B, threads=threads) as b:
            pos = SeqLens[b]
            if pos >= 0:
                blk = BlockTable[b, pos // page]
                row = pos % page
                T.copy(K[b, :, :], Kc[blk, row, :, :])
                T.copy(V[b, :, :], Vc[blk, row, :, :])

    return main


@tilecute.jit
def kv_cache_fp8_slot_mapping(Hk=4, D=128, num_slots=4096, threads=128):
    """vLLM's reshape_and_cache for an fp8 cache: token t's K / V heads go to flat slot
    SlotMapping[t] (int64; -1 skips the token) of Kc / Vc [num_slots, Hk, D] (e4m3) after
    division by per-head scales (KScale / VScale [Hk], float32).  Tokens ``T.symbolic``."""
    Tn = T.symbolic("tokens")
    fp8 = "float8_e4m3"

    @T.prim_func
    def main(K: T.Tensor((Tn, Hk, D), "float16"), V: T.Tensor((Tn, Hk, D), "float16"),
             SlotMapping: T.Tensor((Tn,), "int64"), KScale: T.Tensor((Hk,), "float32"),
             VScale: T.Tensor((Hk,), "float32"), Kc: T.Tensor((num_slots, Hk, D), fp8),
             Vc: T.Tensor((num_slots, Hk, D), fp8)):
        with T.Kernel(Tn, threads=threads) as t:
            slot = SlotMapping[t]
            if slot >= 0:
                for h, d in T.Parallel(Hk, D):
                    Kc[slot, h, d] = T.cast(T.clamp(T.cast(K[t, h, d], "float32") / KScale[h], -448.0, 448.0), fp8)
                    Vc[slot, h, d] = T.cast(T.clamp(T.cast(V[t, h, d], "float32") / VScale[h], -448.0, 448.0), fp8)

    return main


@tilecute.jit(out_idx=[4])
def adaln_gated_residual(B=2, S=300, N=768, block_S=16, block_N=128, threads=128):
    """DiT's gated residual with broadcasting: out = x + gate[b, :] * (y + bias[:]) over
    [B, S, N] (gate per batch and channel, bias per channel), bfloat16 io, float32 math;
    S ragged against block_S."""
    dtype, accum = "bfloat16", "float32"

    @T.prim_func
    def main(X: T.Tensor((B, S, N), dtype), Y: T.Tensor((B, S, N), dtype), Gate: T.Tensor((B, N), dtype),
             Bias: T.Tensor((N,), accum), Out: T.Tensor((B, S, N), dtype)):
        with T.Kernel(N // block_N, T.ceildiv(S, block_S), B, threads=threads) as (bx, by, bz):
            g = T.alloc_fragment((block_N,), accum)
            o = T.alloc_fragment((block_S, block_N), accum)
            for j in T.Parallel(block_N):
                g[j] = T.cast(Gate[bz, bx * block_N + j], accum)
            for i, j in T.Parallel(block_S, block_N):
                o[i, j] = T.cast(X[bz, by * block_S + i, bx * block_N + j], accum) + g[j] * (
                    T.cast(Y[bz, by * block_S + i, bx * block_N + j], accum) + Bias[bx * block_N + j])
            T.copy(o, Out[bz, by * block_S, bx * block_N])

    return main


@tilecute.jit(out_idx=[2, 3])
def eos_lengths_and_last_hidden(B=6, L=200, D=256, eos=2, threads=64):
    """After generation: each sequence's length is the index of its first EOS token + 1
    (L if none), found by a ``while`` loop over a ``T.alloc_var`` position run by one
    thread; then the hidden state of that last token (Hidden [B, L, D] float16) is
    gathered into Last [B, D] by the whole block (the length passed through shared
    memory)."""

    @T.prim_func
    def main(Tokens: T.Tensor((B, L), "int32"), Hidden: T.Tensor((B, L, D), "float16"),
             Lengths: T.Tensor((B,), "int32"), Last: T.Tensor((B, D), "float16")):
        with T.Kernel(B, threads=threads) as b:
            n = T.alloc_shared((1,), "int32")
            tx = T.get_thread_binding()
            if tx == 0:
                i = T.alloc_var("int32", init=0)
                while i < L and Tokens[b, i] != eos:
                    i += 1
                n[0] = T.min(i + 1, L)
                Lengths[b] = n[0]
            for d in T.Parallel(D):
                Last[b, d] = Hidden[b, n[0] - 1, d]

    return main


# ---- more: per-tensor scales, varlen pooling, decode-step state updates ---------------------
@tilecute.jit
def tensor_absmax_atomic(M=1000, N=3000, block_M=16, block_N=256, threads=128):
    """Pass one of per-tensor fp8 quantization: the tensor's absmax by a tile
    ``T.reduce_absmax`` (rows, then the row maxima) merged across blocks with a float
    ``T.atomic_max`` into Amax[0] (which the caller zeroes); both dims ragged."""
    accum = "float32"

    @T.prim_func
    def main(X: T.Tensor((M, N), "bfloat16"), Amax: T.Tensor((1,), accum)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            x = T.alloc_fragment((block_M, block_N), accum)
            rm = T.alloc_fragment((block_M,), accum)
            m = T.alloc_fragment((1,), accum)
            T.copy(X[by * block_M, bx * block_N], x)
            T.reduce_absmax(x, rm, dim=1)
            T.reduce_max(rm, m, dim=0)
            if T.get_thread_binding() == 0:
                T.atomic_max(Amax[0], m[0])

    return main


@tilecute.jit(out_idx=[2, 3])
def tensor_fp8_quant_from_amax(M=1000, N=3000, block_M=16, block_N=256, threads=128):
    """Pass two: scale = max(Amax[0], 1e-12) / 448 read from the tensor pass one wrote
    (a scalar load every thread makes), q = e4m3(clamp(x / scale)); the scale written out
    (Scale[0]) by one thread."""
    accum = "float32"

    @T.prim_func
    def main(X: T.Tensor((M, N), "bfloat16"), Amax: T.Tensor((1,), accum), Q: T.Tensor((M, N), "float8_e4m3"),
             Scale: T.Tensor((1,), accum)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            s = T.max(Amax[0], 1e-12) / 448.0
            if bx == 0 and by == 0 and T.get_thread_binding() == 0:
                Scale[0] = s
            for i, j in T.Parallel(block_M, block_N):
                r, c = by * block_M + i, bx * block_N + j
                if r < M and c < N:
                    Q[r, c] = T.cast(T.clamp(T.cast(X[r, c], accum) / s, -448.0, 448.0), "float8_e4m3")

    return main


@tilecute.jit(out_idx=[2])
def varlen_mean_pooling(batch=5, D=256, block_T=32, threads=128):
    """Sentence-embedding mean pooling over packed sequences: Out[b] = mean of Hidden rows
    cu[b] .. cu[b + 1] (float16 [total, D], ``T.dynamic`` total), float32 out, an empty
    sequence giving zeros.  A ``T.serial`` loop whose trip count is read from the tensor,
    tiles of 32 rows (the last masked), each tile's column sums by ``T.reduce_sum`` along
    dim=0 added into the running sums (``clear=False``)."""
    total = T.dynamic("total")
    accum = "float32"

    @T.prim_func
    def main(Hidden: T.Tensor((total, D), "float16"), Cu: T.Tensor((batch + 1,), "int32"),
             Out: T.Tensor((batch, D), accum)):
        with T.Kernel(batch, threads=threads) as b:
            tile = T.alloc_fragment((block_T, D), accum)
            acc = T.alloc_fragment((D,), accum)
            start = Cu[b]
            length = Cu[b + 1] - start
            T.clear(acc)
            for t in T.serial(T.ceildiv(length, block_T)):
                for i, d in T.Parallel(block_T, D):
                    tile[i, d] = T.if_then_else(t * block_T + i < length,
                                                T.cast(Hidden[start + t * block_T + i, d], accum), 0.0)
                T.reduce_sum(tile, acc, dim=0, clear=False)
            for d in T.Parallel(D):
                Out[b, d] = T.if_then_else(length > 0, acc[d] / T.max(length, 1), 0.0)

    return main


@tilecute.jit(out_idx=[4])
def causal_conv1d_update(B=3, D=768, W=4, block_D=128, threads=128):
    """Decode-step causal conv1d (Mamba's causal_conv1d_update): per channel, the conv
    state [B, D, W - 1] holds the last W - 1 inputs; out = silu(sum_k w[d, k] * window[k]
    + bias[d]) over the window (state then x), and the state is shifted left by one with
    x appended, in place.  A ``T.serial`` inner loop over the taps with a ``T.alloc_var``
    accumulator inside a ``T.Parallel`` over channels."""
    dtype, accum = "float16", "float32"

    @T.prim_func
    def main(X: T.Tensor((B, D), dtype), State: T.Tensor((B, D, W - 1), dtype), Wt: T.Tensor((D, W), dtype),
             Bias: T.Tensor((D,), dtype), Out: T.Tensor((B, D), dtype)):
        with T.Kernel(T.ceildiv(D, block_D), B, threads=threads) as (bx, b):
            for j in T.Parallel(block_D):
                d = bx * block_D + j
                if d < D:
                    acc = T.alloc_var(accum)
                    acc = T.cast(Bias[d], accum)
                    for k in T.serial(W - 1):
                        acc += T.cast(Wt[d, k], accum) * T.cast(State[b, d, k], accum)
                    acc += T.cast(Wt[d, W - 1], accum) * T.cast(X[b, d], accum)
                    Out[b, d] = T.cast(acc * T.sigmoid(acc), dtype)
                    for k in T.serial(W - 2):
                        State[b, d, k] = State[b, d, k + 1]
                    State[b, d, W - 2] = X[b, d]

    return main


@tilecute.jit(out_idx=[9])
def selective_state_update(B=2, H=8, P=64, N=128, block_P=16, threads=128):
    """Mamba-2's decode-step selective state update, per (batch, head, block of head dims):
    dt = softplus(dt_raw + dt_bias[h]), dA = exp(dt * A[h]), state = state * dA + dt *
    B[n] * x[p] (in place, float32 state), y[p] = sum_n state[p, n] * C[n] + D[h] * x[p],
    gated by silu(z).  The [block_P, N] state tile is reduced along dim=1."""
    dtype, accum = "bfloat16", "float32"

    @T.prim_func
    def main(State: T.Tensor((B, H, P, N), accum), X: T.Tensor((B, H, P), dtype), Dt: T.Tensor((B, H), dtype),
             DtBias: T.Tensor((H,), accum), A: T.Tensor((H,), accum), Bm: T.Tensor((B, N), dtype),
             Cm: T.Tensor((B, N), dtype), Dskip: T.Tensor((H,), accum), Z: T.Tensor((B, H, P), dtype),
             Y: T.Tensor((B, H, P), dtype)):
        with T.Kernel(P // block_P, H, B, threads=threads) as (bx, h, b):
            st = T.alloc_fragment((block_P, N), accum)
            yc = T.alloc_fragment((block_P, N), accum)
            y = T.alloc_fragment((block_P,), accum)
            raw = T.cast(Dt[b, h], accum) + DtBias[h]
            dt = T.if_then_else(raw > 20.0, raw, T.log(1.0 + T.exp(raw)))
            dA = T.exp(dt * A[h])
            T.copy(State[b, h, bx * block_P, 0], st)
            for p, n in T.Parallel(block_P, N):
                st[p, n] = st[p, n] * dA + dt * T.cast(Bm[b, n], accum) * T.cast(X[b, h, bx * block_P + p], accum)
                yc[p, n] = st[p, n] * T.cast(Cm[b, n], accum)
            T.copy(st, State[b, h, bx * block_P, 0])
            T.reduce_sum(yc, y, dim=1)
            for p in T.Parallel(block_P):
                zp = T.cast(Z[b, h, bx * block_P + p], accum)
                Y[b, h, bx * block_P + p] = T.cast(
                    (y[p] + Dskip[h] * T.cast(X[b, h, bx * block_P + p], accum)) * zp * T.sigmoid(zp), dtype)

    return main


@tilecute.jit
def paged_kv_gather_dequant(batch=3, Hk=2, D=128, page=16, max_pages=32, num_blocks=128, threads=128):
    """Gather a batch's paged fp8 KV cache into contiguous bfloat16 K / V for a prefill
    with context: token t of the packed output (``T.dynamic`` total, sequences at Cu)
    belongs to sequence b (found by a ``while`` over Cu with a ``T.alloc_var``), position
    t - Cu[b], page BlockTable[b, pos // page]; K = q * KScale (a per-tensor scale, a
    scalar parameter).  K / V are the caller's (their length is only known from Cu)."""
    total = T.dynamic("total")
    fp8 = "float8_e4m3"

    @T.prim_func
    def main(Kc: T.Tensor((num_blocks, page, Hk, D), fp8), Vc: T.Tensor((num_blocks, page, Hk, D), fp8),
             BlockTable: T.Tensor((batch, max_pages), "int32"), Cu: T.Tensor((batch + 1,), "int32"),
             K: T.Tensor((total, Hk, D), "bfloat16"), V: T.Tensor((total, Hk, D), "bfloat16"),
             KScale: T.float32, VScale: T.float32):
        with T.Kernel(total, threads=threads) as t:
            seq = T.alloc_var("int32", init=0)
            while seq < batch - 1 and Cu[seq + 1] <= t:
                seq += 1
            pos = t - Cu[seq]
            blk = BlockTable[seq, pos // page]
            for h, d in T.Parallel(Hk, D):
                K[t, h, d] = T.cast(T.cast(Kc[blk, pos % page, h, d], "float32") * KScale, "bfloat16")
                V[t, h, d] = T.cast(T.cast(Vc[blk, pos % page, h, d], "float32") * VScale, "bfloat16")

    return main


@tilecute.jit(out_idx=[1, 2])
def column_argmax_five_rows(R=5, N=1000, block_N=256, threads=128):
    """Per-column max and first arg-max over 5 rows (say 5 candidate scores per token
    position): a [5, 256] fragment reduced along dim=0 by ``T.reduce_max``, then the
    smallest row index holding it by ``T.reduce_min`` along dim=0 of an int32 fragment
    (5 rows: neither a power of two nor a multiple of 32); N ragged."""
    accum = "float32"

    @T.prim_func
    def main(X: T.Tensor((R, N), accum), Mx: T.Tensor((N,), accum), Arg: T.Tensor((N,), "int32")):
        with T.Kernel(T.ceildiv(N, block_N), threads=threads) as bx:
            x = T.alloc_fragment((R, block_N), accum)
            ix = T.alloc_fragment((R, block_N), "int32")
            m = T.alloc_fragment((block_N,), accum)
            a = T.alloc_fragment((block_N,), "int32")
            T.copy(X[0, bx * block_N], x)
            T.reduce_max(x, m, dim=0)
            for r, j in T.Parallel(R, block_N):
                ix[r, j] = T.if_then_else(x[r, j] == m[j], r, R)
            T.reduce_min(ix, a, dim=0)
            for j in T.Parallel(block_N):
                if bx * block_N + j < N:
                    Mx[bx * block_N + j] = m[j]
                    Arg[bx * block_N + j] = a[j]

    return main


@tilecute.jit(out_idx=-1)
def rmsnorm_gemma_valid_rows(M=500, N=2304, block_M=1, threads=256, eps=1e-6):
    """Gemma's RMSNorm (weight applied as 1 + w) with a scalar ``n_valid: T.int32``: rows
    at or past n_valid (padding tokens of a CUDA-graph batch) are written as zeros and
    not normalised.  ``out_idx=-1`` (the last parameter is the output)."""
    dtype, accum = "bfloat16", "float32"

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), n_valid: T.int32, Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, N), accum)
            x2 = T.alloc_fragment((block_M, N), accum)
            ss = T.alloc_fragment((block_M,), accum)
            if bx * block_M < n_valid:
                T.copy(X[bx * block_M, 0], x)
                for i, j in T.Parallel(block_M, N):
                    x2[i, j] = x[i, j] * x[i, j]
                T.reduce_sum(x2, ss, dim=1)
                for i, j in T.Parallel(block_M, N):
                    Y[bx * block_M + i, j] = T.cast(
                        x[i, j] * T.rsqrt(ss[i] / N + eps) * (1.0 + T.cast(W[j], accum)), dtype)
            else:
                for i, j in T.Parallel(block_M, N):
                    Y[bx * block_M + i, j] = T.cast(0, dtype)

    return main


@tilecute.jit(out_idx=[3])
def layernorm_pipelined_chunks(M=128, N=6000, chunk=1024, block_M=2, threads=128, num_stages=2):
    """LayerNorm whose row chunks stream through shared memory with ``T.Pipelined``
    (``num_stages`` copies in flight, the last chunk ragged: its pad reads 0): pass one
    sums x and x^2 chunk by chunk, pass two (pipelined again, through a second shared
    tile: TileLang 0.1.15 cannot version one tile over two pipelined loops) normalises.
    float16 io, weight / bias float16, eps 1e-5."""
    dtype, accum = "float16", "float32"
    n_chunks = (N + chunk - 1) // chunk

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Wt: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype),
             Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            xs = T.alloc_shared((block_M, chunk), dtype)
            ys = T.alloc_shared((block_M, chunk), dtype)
            xf = T.alloc_fragment((block_M, chunk), accum)
            x2 = T.alloc_fragment((block_M, chunk), accum)
            s1 = T.alloc_fragment((block_M,), accum)
            s2 = T.alloc_fragment((block_M,), accum)
            T.clear(s1)
            T.clear(s2)
            for c in T.Pipelined(n_chunks, num_stages=num_stages):
                T.copy(X[bx * block_M, c * chunk], xs)
                for i, j in T.Parallel(block_M, chunk):
                    xf[i, j] = T.cast(xs[i, j], accum)
                    x2[i, j] = xf[i, j] * xf[i, j]
                T.reduce_sum(xf, s1, dim=1, clear=False)
                T.reduce_sum(x2, s2, dim=1, clear=False)
            for i in T.Parallel(block_M):
                s1[i] = s1[i] / N
                s2[i] = T.rsqrt(s2[i] / N - s1[i] * s1[i] + 1e-5)
            for c in T.Pipelined(n_chunks, num_stages=num_stages):
                T.copy(X[bx * block_M, c * chunk], ys)
                for i, j in T.Parallel(block_M, chunk):
                    if c * chunk + j < N:
                        Y[bx * block_M + i, c * chunk + j] = T.cast(
                            (T.cast(ys[i, j], accum) - s1[i]) * s2[i] * T.cast(Wt[c * chunk + j], accum)
                            + T.cast(B[c * chunk + j], accum), dtype)

    return main


@tilecute.jit(out_idx=[2])
def rope_inkernel_frequencies(H=4, D=128, base=10000.0, block_T=1, threads=128):
    """Rotary embedding with the angles computed in the kernel (no tables): inv_freq_i =
    base^(-2i / D) by ``T.pow``, angle = pos * inv_freq_i, then ``T.cos`` / ``T.sin`` of
    angles up to ~30000 rad (precise functions, as TileLang's cosf / sinf); NeoX halves,
    float32 io, positions int32, tokens ``T.symbolic``."""
    Tn = T.symbolic("tokens")
    half = D // 2

    @T.prim_func
    def main(X: T.Tensor((Tn, H, D), "float32"), Pos: T.Tensor((Tn,), "int32"), Out: T.Tensor((Tn, H, D), "float32")):
        with T.Kernel(Tn, threads=threads) as t:
            for h, i in T.Parallel(H, half):
                ang = T.cast(Pos[t], "float32") * T.pow(base, -2.0 * T.cast(i, "float32") / D)
                c, s = T.cos(ang), T.sin(ang)
                a, b = X[t, h, i], X[t, h, i + half]
                Out[t, h, i] = a * c - b * s
                Out[t, h, i + half] = b * c + a * s

    return main


@tilecute.jit(out_idx=[3])
def bias_add_two_dynamic_dims(N=1024, block_S=8, threads=128):
    """out = (x + bias) * scale[b] over [B, S, N] with B and S both ``T.dynamic``: the grid
    from both, the row guard in S, the scale per batch."""
    B, S = T.dynamic("B"), T.dynamic("S")

    @T.prim_func
    def main(X: T.Tensor((B, S, N), "float16"), Bias: T.Tensor((N,), "float16"), Scale: T.Tensor((B,), "float32"),
             Out: T.Tensor((B, S, N), "float16")):
        with T.Kernel(T.ceildiv(S, block_S), B, threads=threads) as (bx, b):
            for i, j in T.Parallel(block_S, N):
                if bx * block_S + i < S:
                    Out[b, bx * block_S + i, j] = T.cast(
                        (T.cast(X[b, bx * block_S + i, j], "float32") + T.cast(Bias[j], "float32")) * Scale[b],
                        "float16")

    return main


@tilecute.jit
def moe_combine_atomic(n_tokens=300, topk=4, D=512, threads=128):
    """MoE output combine by scatter-add: expert output row r (the permuted rows, float16
    [n_tokens * topk, D]) belongs to pair SrcPair[r] = token * topk + k and adds
    Weights[token, k] * Y[r] into Out[token] (float32, zeroed by the caller) with
    ``T.atomic_add`` -- one block a permuted row."""
    n = n_tokens * topk

    @T.prim_func
    def main(Y: T.Tensor((n, D), "float16"), SrcPair: T.Tensor((n,), "int32"),
             Weights: T.Tensor((n_tokens, topk), "float32"), Out: T.Tensor((n_tokens, D), "float32")):
        with T.Kernel(n, threads=threads) as r:
            pair = SrcPair[r]
            tok = pair // topk
            w = Weights[tok, pair % topk]
            for d in T.Parallel(D):
                T.atomic_add(Out[tok, d], w * T.cast(Y[r, d], "float32"))

    return main


@tilecute.jit(out_idx=[2])
def moe_topk6_weighted_sum(block_T=1, K=6, D=256, threads=128):
    """DeepSeek-style combine of 6 routed experts' outputs already gathered per token
    ([tokens, 6, D] bfloat16, ``T.symbolic`` tokens): out = sum_k w[t, k] * Y[t, k, :] by
    ``T.reduce_sum`` along the middle dim of a [1, 6, 256] fragment (6: neither a power
    of two nor a multiple of the threads; TileLang 0.1.15 finds no layout for [2, 6,
    256])."""
    Tn = T.symbolic("tokens")
    accum = "float32"

    @T.prim_func
    def main(Y: T.Tensor((Tn, K, D), "bfloat16"), Wt: T.Tensor((Tn, K), accum), Out: T.Tensor((Tn, D), "bfloat16")):
        with T.Kernel(T.ceildiv(Tn, block_T), threads=threads) as bx:
            y = T.alloc_fragment((block_T, K, D), accum)
            o = T.alloc_fragment((block_T, D), accum)
            for t, k, d in T.Parallel(block_T, K, D):
                tok = bx * block_T + t
                y[t, k, d] = T.if_then_else(tok < Tn, Wt[tok, k] * T.cast(Y[tok, k, d], accum), 0.0)
            T.reduce_sum(y, o, dim=1)
            for t, d in T.Parallel(block_T, D):
                if bx * block_T + t < Tn:
                    Out[bx * block_T + t, d] = T.cast(o[t, d], "bfloat16")

    return main


@tilecute.jit(out_idx=[1, 2])
def column_stats_96_rows(R=96, N=300, block_N=64, threads=128):
    """Per-column sum and max over 96 rows ([96, 64] fragment tiles, N ragged) by
    ``T.reduce_sum`` / ``T.reduce_max`` along dim=0 at 128 threads (96 rows: neither a
    power of two nor a multiple of the threads; TileLang keeps each column's rows in its
    own threads); the columns past N read 0 and are not stored."""
    accum = "float32"

    @T.prim_func
    def main(X: T.Tensor((R, N), "float16"), Sum: T.Tensor((N,), accum), Max: T.Tensor((N,), accum)):
        with T.Kernel(T.ceildiv(N, block_N), threads=threads) as bx:
            x = T.alloc_fragment((R, block_N), accum)
            s = T.alloc_fragment((block_N,), accum)
            m = T.alloc_fragment((block_N,), accum)
            for r, j in T.Parallel(R, block_N):
                x[r, j] = T.if_then_else(bx * block_N + j < N, T.cast(X[r, bx * block_N + j], accum), 0.0)
            T.reduce_sum(x, s, dim=0)
            T.reduce_max(x, m, dim=0)
            for j in T.Parallel(block_N):
                if bx * block_N + j < N:
                    Sum[bx * block_N + j] = s[j]
                    Max[bx * block_N + j] = m[j]

    return main
