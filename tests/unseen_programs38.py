"""A thirty-eighth set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang), families earlier rounds had not tried: a QK projection with rotary embedding fused
into its epilogue (half-split over a T.dynamic token count with a positions tensor, and
interleaved from a cos / sin cache for the q / k heads of a fused QKV projection), MoE token
permutation and weighted un-permutation through index tensors over a T.dynamic token count, a
planar complex GEMM (three accumulators), a 3xBF16 split GEMM emulating float32 precision with
three T.gemm calls into one accumulator, a lower-triangular SYRK (upper blocks zero-filled,
the diagonal block masked), a fused linear cross-entropy (vocabulary chunks in a serial loop,
each a pipelined GEMM, an online logsumexp and the target's logit picked by a masked
reduction, through a T.macro), Swin's shifted-window partition and its reverse with a
residual add, multi-section rotary embedding (Qwen2-VL's M-RoPE: three position rows chosen by
frequency section), differential attention (two online softmaxes, their outputs subtracted),
a col2im fold by float32 atomics over a stepped serial loop, a flash attention with an
in-kernel hash dropout on P, SageAttention-style int8 QK scores (an int32 accumulator
converted and scaled into a float32 fragment), tree attention through a packed per-query
bitmask, Muon's Newton-Schulz iteration (a chain of GEMMs on one shared tile), a bitonic
top-k by nested while loops over T.alloc_var strides, a GEMM with a bias + residual +
LayerNorm epilogue over whole rows, an MoE router (gate GEMM, softmax, top-k by rounds of
max) and a paged MQA decode walking its pages by a while loop through a block table.  The
attention programs share their online-softmax step as a T.macro (the differential attention
calls it twice a key block).

The file reads as TileLang after swapping its two import lines (``import tilelang`` /
``import tilelang.language as T``); ``tests/test_unseen_programs38.py`` builds each to a cubin
on the CPU, checks what decides the result in the generated source, and on a GPU compares it
with torch."""

import tilecute as tilelang
import tilecute.language as T


# ---- QK projection, rotary (half-split, NeoX) in the epilogue, T.dynamic tokens ----------------
@tilelang.jit(out_idx=[4])
def qk_proj_rope_half_split(N=256, K=256, head_dim=128, block_M=64, block_K=64, threads=128):
    """Y = rope(X @ W^T) per head of head_dim columns: the accumulator goes through a float32
    shared tile so that column j can read its partner (j + half) % head_dim; the angle is
    pos[t] * inv_freq[j % half], the token count a T.dynamic (the last tile ragged)."""
    M = T.dynamic("tokens")
    half = head_dim // 2

    @T.prim_func
    def main(X: T.Tensor((M, K), T.float16), W: T.Tensor((N, K), T.float16),
             pos: T.Tensor((M,), T.int32), inv_freq: T.Tensor((half,), T.float32),
             Y: T.Tensor((M, N), T.float16)):
        with T.Kernel(N // head_dim, T.ceildiv(M, block_M), threads=threads) as (bh, bm):
            X_s = T.alloc_shared((block_M, block_K), T.float16)
            W_s = T.alloc_shared((head_dim, block_K), T.float16)
            acc = T.alloc_fragment((block_M, head_dim), T.float32)
            C_s = T.alloc_shared((block_M, head_dim), T.float32)
            out = T.alloc_fragment((block_M, head_dim), T.float16)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(X[bm * block_M, k * block_K], X_s)
                T.copy(W[bh * head_dim, k * block_K], W_s)
                T.gemm(X_s, W_s, acc, transpose_B=True)
            T.copy(acc, C_s)
            for i, j in T.Parallel(block_M, head_dim):
                t = bm * block_M + i
                p = T.if_then_else(t < M, pos[T.min(t, M - 1)], 0)
                theta = T.cast(p, T.float32) * inv_freq[j % half]
                partner = C_s[i, (j + half) % head_dim]
                rot = T.if_then_else(j < half, -partner, partner)
                out[i, j] = T.cast(C_s[i, j] * T.cos(theta) + rot * T.sin(theta), T.float16)
            T.copy(out, Y[bm * block_M, bh * head_dim])

    return main


# ---- fused QKV projection, interleaved rotary on the q / k heads from a cos / sin cache --------
@tilelang.jit(out_idx=[4])
def qkv_proj_rope_interleaved(M=192, K=128, heads_q=2, heads_k=1, heads_v=1, head_dim=64,
                              max_pos=4096, block_M=64, block_K=32, threads=128):
    """QKV = X @ W^T, W stacking q, k and v heads; the q and k heads (block columns below
    heads_q + heads_k) rotate pairs (2p, 2p + 1) by cos / sin[pos[t], p] read from a cache,
    partner j ^ 1 with sign -1 on even j; the v heads are stored as computed."""
    N = (heads_q + heads_k + heads_v) * head_dim

    @T.prim_func
    def main(X: T.Tensor((M, K), T.bfloat16), W: T.Tensor((N, K), T.bfloat16),
             pos: T.Tensor((M,), T.int64), cs: T.Tensor((max_pos, head_dim), T.float32),
             QKV: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(N // head_dim, T.ceildiv(M, block_M), threads=threads) as (bh, bm):
            X_s = T.alloc_shared((block_M, block_K), T.bfloat16)
            W_s = T.alloc_shared((head_dim, block_K), T.bfloat16)
            acc = T.alloc_fragment((block_M, head_dim), T.float32)
            C_s = T.alloc_shared((block_M, head_dim), T.float32)
            T.clear(acc)
            for k in T.Pipelined(K // block_K, num_stages=3):
                T.copy(X[bm * block_M, k * block_K], X_s)
                T.copy(W[bh * head_dim, k * block_K], W_s)
                T.gemm(X_s, W_s, acc, transpose_B=True)
            if bh < heads_q + heads_k:
                T.copy(acc, C_s)
                for i, j in T.Parallel(block_M, head_dim):
                    p = pos[bm * block_M + i]
                    c = cs[p, (j // 2) * 2]  # the cache interleaves cos, sin per pair
                    s = cs[p, (j // 2) * 2 + 1]
                    sign = T.if_then_else(j % 2 == 0, T.float32(-1), T.float32(1))
                    acc[i, j] = C_s[i, j] * c + sign * C_s[i, j ^ 1] * s
            T.copy(acc, QKV[bm * block_M, bh * head_dim])

    return main


# ---- MoE permutation: tokens to their experts' rows, index tensors, T.dynamic tokens ----------
@tilelang.jit(out_idx=[2])
def moe_permute_rows(hidden=512, topk=2, block_T=16, block_H=256, threads=128):
    """Xp[dst[t, k], :] = X[t, :] for each of a token's top-k slots; the destination rows come
    from an index tensor (the experts' sorted order), the token count T.dynamic, so the
    permuted buffer has tokens * topk rows; a slot of -1 (a dropped token) writes nothing."""
    M = T.dynamic("tokens")

    @T.prim_func
    def main(X: T.Tensor((M, hidden), T.bfloat16), dst: T.Tensor((M, topk), T.int32),
             Xp: T.Tensor((M * topk, hidden), T.bfloat16)):
        with T.Kernel(T.ceildiv(M, block_T), hidden // block_H, threads=threads) as (bt, bh):
            x = T.alloc_fragment((block_T, block_H), T.bfloat16)
            T.copy(X[bt * block_T, bh * block_H], x)
            for k in T.serial(topk):
                for i, j in T.Parallel(block_T, block_H):
                    t = bt * block_T + i
                    if t < M:
                        row = dst[t, k]
                        if row >= 0:
                            Xp[row, bh * block_H + j] = x[i, j]

    return main


@tilelang.jit(out_idx=[3])
def moe_unpermute_weighted(hidden=384, topk=4, block_T=32, block_H=128, threads=128):
    """Y[t, :] = sum_k w[t, k] * Yp[src[t, k], :] in float32 (a dropped slot, -1, adds nothing),
    the expert outputs gathered back through the same index tensor; T.dynamic tokens and
    permuted rows, a bfloat16 result stored through a ragged T.copy."""
    M = T.dynamic("tokens")
    R = T.dynamic("rows")

    @T.prim_func
    def main(Yp: T.Tensor((R, hidden), T.bfloat16), src: T.Tensor((M, topk), T.int32),
             w: T.Tensor((M, topk), T.float32), Y: T.Tensor((M, hidden), T.bfloat16)):
        with T.Kernel(T.ceildiv(M, block_T), T.ceildiv(hidden, block_H), threads=threads) as (bt, bh):
            acc = T.alloc_fragment((block_T, block_H), T.float32)
            out = T.alloc_fragment((block_T, block_H), T.bfloat16)
            T.clear(acc)
            for k in T.serial(topk):
                for i, j in T.Parallel(block_T, block_H):
                    t = bt * block_T + i
                    if t < M:
                        r = src[t, k]
                        acc[i, j] += T.if_then_else(
                            r >= 0, w[t, k] * T.cast(Yp[T.max(r, 0), bh * block_H + j], T.float32), 0.0)
            T.copy(acc, out)
            T.copy(out, Y[bt * block_T, bh * block_H])

    return main


# ---- planar complex GEMM: three accumulators ---------------------------------------------------
@tilelang.jit(out_idx=[4, 5])
def complex_gemm_planar(M=128, N=128, K=256, block_M=64, block_N=64, block_K=32, threads=128):
    """(Cr + i Ci) = (Ar + i Ai)(Br + i Bi) with planes in separate tensors: Ar Br and Ai Bi into
    two accumulators (subtracted in the epilogue), Ar Bi + Ai Br into a third."""

    @T.prim_func
    def main(Ar: T.Tensor((M, K), T.float16), Ai: T.Tensor((M, K), T.float16),
             Br: T.Tensor((K, N), T.float16), Bi: T.Tensor((K, N), T.float16),
             Cr: T.Tensor((M, N), T.float32), Ci: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            Ar_s = T.alloc_shared((block_M, block_K), T.float16)
            Ai_s = T.alloc_shared((block_M, block_K), T.float16)
            Br_s = T.alloc_shared((block_K, block_N), T.float16)
            Bi_s = T.alloc_shared((block_K, block_N), T.float16)
            rr = T.alloc_fragment((block_M, block_N), T.float32)
            ii = T.alloc_fragment((block_M, block_N), T.float32)
            im = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(rr)
            T.clear(ii)
            T.clear(im)
            for k in T.Pipelined(K // block_K, num_stages=2):
                T.copy(Ar[by * block_M, k * block_K], Ar_s)
                T.copy(Ai[by * block_M, k * block_K], Ai_s)
                T.copy(Br[k * block_K, bx * block_N], Br_s)
                T.copy(Bi[k * block_K, bx * block_N], Bi_s)
                T.gemm(Ar_s, Br_s, rr)
                T.gemm(Ai_s, Bi_s, ii)
                T.gemm(Ar_s, Bi_s, im)
                T.gemm(Ai_s, Br_s, im)
            for i, j in T.Parallel(block_M, block_N):
                rr[i, j] = rr[i, j] - ii[i, j]
            T.copy(rr, Cr[by * block_M, bx * block_N])
            T.copy(im, Ci[by * block_M, bx * block_N])

    return main


# ---- 3xBF16: float32 operands split into high and low bfloat16 parts ---------------------------
@tilelang.jit(out_idx=[2])
def gemm_3xbf16_split(M=128, N=128, K=256, block_M=64, block_N=64, block_K=32, threads=128):
    """C = A @ B^T for float32 A, B at near-float32 accuracy: each tile is split in registers
    into hi = bf16(x) and lo = bf16(x - hi), staged in shared memory, and hi.hi + hi.lo + lo.hi
    accumulate into one float32 accumulator (lo.lo is dropped, as the trick does)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float32), B: T.Tensor((N, K), T.float32),
             C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            a = T.alloc_fragment((block_M, block_K), T.float32)
            b = T.alloc_fragment((block_N, block_K), T.float32)
            a_hi = T.alloc_shared((block_M, block_K), T.bfloat16)
            a_lo = T.alloc_shared((block_M, block_K), T.bfloat16)
            b_hi = T.alloc_shared((block_N, block_K), T.bfloat16)
            b_lo = T.alloc_shared((block_N, block_K), T.bfloat16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(acc)
            for k in T.serial(K // block_K):
                T.copy(A[by * block_M, k * block_K], a)
                T.copy(B[bx * block_N, k * block_K], b)
                for i, j in T.Parallel(block_M, block_K):
                    h = T.cast(a[i, j], T.bfloat16)
                    a_hi[i, j] = h
                    a_lo[i, j] = T.cast(a[i, j] - T.cast(h, T.float32), T.bfloat16)
                for i, j in T.Parallel(block_N, block_K):
                    h = T.cast(b[i, j], T.bfloat16)
                    b_hi[i, j] = h
                    b_lo[i, j] = T.cast(b[i, j] - T.cast(h, T.float32), T.bfloat16)
                T.gemm(a_lo, b_hi, acc, transpose_B=True)
                T.gemm(a_hi, b_lo, acc, transpose_B=True)
                T.gemm(a_hi, b_hi, acc, transpose_B=True)
            T.copy(acc, C[by * block_M, bx * block_N])

    return main


# ---- SYRK, lower triangle: C = A A^T, upper blocks zero, the diagonal block masked -------------
@tilelang.jit(out_idx=[1])
def syrk_lower_blocks(N=256, K=128, block=64, block_K=64, threads=128):
    """C[i, j] = sum_k A[i, k] A[j, k] for i >= j and 0 above the diagonal: both operands are
    row panels of A; a block strictly above the diagonal stores zeros without a GEMM."""

    @T.prim_func
    def main(A: T.Tensor((N, K), T.float16), C: T.Tensor((N, N), T.float32)):
        with T.Kernel(N // block, N // block, threads=threads) as (bx, by):
            A_s = T.alloc_shared((block, block_K), T.float16)
            B_s = T.alloc_shared((block, block_K), T.float16)
            acc = T.alloc_fragment((block, block), T.float32)
            T.clear(acc)
            if bx <= by:
                for k in T.Pipelined(K // block_K, num_stages=2):
                    T.copy(A[by * block, k * block_K], A_s)
                    T.copy(A[bx * block, k * block_K], B_s)
                    T.gemm(A_s, B_s, acc, transpose_B=True)
                if bx == by:
                    for i, j in T.Parallel(block, block):
                        acc[i, j] = T.if_then_else(i >= j, acc[i, j], 0.0)
            T.copy(acc, C[by * block, bx * block])

    return main


# ---- fused linear cross-entropy: vocabulary chunks, online logsumexp, the target's logit ------
@T.macro
def _online_lse(logits, m, l, m_prev, rowmax, rowsum, block_M, block_V):
    T.copy(m, m_prev)
    T.reduce_max(logits, rowmax, dim=1)
    for i in T.Parallel(block_M):
        m[i] = T.max(m_prev[i], rowmax[i])
    for i, j in T.Parallel(block_M, block_V):
        logits[i, j] = T.exp(logits[i, j] - m[i])
    T.reduce_sum(logits, rowsum, dim=1)
    for i in T.Parallel(block_M):
        l[i] = l[i] * T.exp(m_prev[i] - m[i]) + rowsum[i]


@tilelang.jit(out_idx=[3])
def fused_linear_cross_entropy(D=256, V=1024, block_M=64, block_V=128, block_K=64, threads=128,
                               ignore_index=-100):
    """loss[t] = logsumexp_v(h[t] . W[v]) - h[t] . W[target[t]] without materialising logits:
    a serial loop over vocabulary chunks, each a pipelined GEMM into a fresh accumulator, the
    target's logit picked by a masked row reduction (accumulated, clear=False), the running
    max / sum updated by a T.macro; a token whose target is ignore_index gets 0; T.dynamic
    tokens."""
    M = T.dynamic("tokens")

    @T.prim_func
    def main(H: T.Tensor((M, D), T.float16), W: T.Tensor((V, D), T.float16),
             target: T.Tensor((M,), T.int32), loss: T.Tensor((M,), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bm:
            H_s = T.alloc_shared((block_M, block_K), T.float16)
            W_s = T.alloc_shared((block_V, block_K), T.float16)
            logits = T.alloc_fragment((block_M, block_V), T.float32)
            picked = T.alloc_fragment((block_M, block_V), T.float32)
            tgt = T.alloc_fragment((block_M,), T.float32)
            m = T.alloc_fragment((block_M,), T.float32)
            m_prev = T.alloc_fragment((block_M,), T.float32)
            l = T.alloc_fragment((block_M,), T.float32)
            rowmax = T.alloc_fragment((block_M,), T.float32)
            rowsum = T.alloc_fragment((block_M,), T.float32)
            tid = T.alloc_fragment((block_M,), T.int32)
            T.fill(m, -T.infinity(T.float32))
            T.fill(l, 0)
            T.fill(tgt, 0)
            for i in T.Parallel(block_M):
                tid[i] = T.if_then_else(bm * block_M + i < M, target[bm * block_M + i], ignore_index)
            for v in T.serial(V // block_V):
                T.clear(logits)
                for k in T.Pipelined(D // block_K, num_stages=2):
                    T.copy(H[bm * block_M, k * block_K], H_s)
                    T.copy(W[v * block_V, k * block_K], W_s)
                    T.gemm(H_s, W_s, logits, transpose_B=True)
                for i, j in T.Parallel(block_M, block_V):
                    picked[i, j] = T.if_then_else(v * block_V + j == tid[i], logits[i, j], 0.0)
                T.reduce_sum(picked, tgt, dim=1, clear=False)
                _online_lse(logits, m, l, m_prev, rowmax, rowsum, block_M, block_V)
            for i in T.Parallel(block_M):
                if bm * block_M + i < M:
                    loss[bm * block_M + i] = T.if_then_else(
                        tid[i] == ignore_index, 0.0, T.log(l[i]) + m[i] - tgt[i])

    return main


# ---- Swin: shifted-window partition and its reverse with a residual ----------------------------
@tilelang.jit(out_idx=[1])
def swin_window_partition_shift(B=2, H=28, W=28, C=96, ws=7, shift=3, threads=128):
    """windows[b * nW + wh * nWw + ww, r * ws + c, :] = x[b, (wh * ws + r + shift) % H,
    (ww * ws + c + shift) % W, :]: torch.roll(x, (-shift, -shift)) then the window split, one
    block a window."""
    nWh, nWw = H // ws, W // ws

    @T.prim_func
    def main(x: T.Tensor((B, H, W, C), T.float16),
             win: T.Tensor((B * nWh * nWw, ws * ws, C), T.float16)):
        with T.Kernel(nWw, nWh, B, threads=threads) as (ww, wh, b):
            tile = T.alloc_shared((ws * ws, C), T.float16)
            for p, ch in T.Parallel(ws * ws, C):
                tile[p, ch] = x[b, (wh * ws + p // ws + shift) % H, (ww * ws + p % ws + shift) % W, ch]
            T.copy(tile, win[(b * nWh + wh) * nWw + ww, 0, 0])

    return main


@tilelang.jit(out_idx=[2])
def swin_window_reverse_residual(B=2, H=28, W=28, C=96, ws=7, shift=3, threads=128):
    """out[b, y, x, :] = shortcut[b, y, x, :] + windows[window of ((y - shift) mod H, (x - shift)
    mod W)]: the reverse (window merge then torch.roll by +shift) fused with the residual add,
    a row of W pixels a block; the negative shift kept non-negative by adding H / W first."""
    nWh, nWw = H // ws, W // ws

    @T.prim_func
    def main(shortcut: T.Tensor((B, H, W, C), T.float16),
             win: T.Tensor((B * nWh * nWw, ws * ws, C), T.float16),
             out: T.Tensor((B, H, W, C), T.float16)):
        with T.Kernel(H, B, threads=threads) as (y, b):
            acc = T.alloc_fragment((W, C), T.float32)
            ys = (y - shift + H) % H
            for xx, ch in T.Parallel(W, C):
                xs = (xx - shift + W) % W
                wi = (b * nWh + ys // ws) * nWw + xs // ws
                acc[xx, ch] = (T.cast(shortcut[b, y, xx, ch], T.float32)
                               + T.cast(win[wi, (ys % ws) * ws + xs % ws, ch], T.float32))
            T.copy(acc, out[b, y, 0, 0])

    return main


# ---- M-RoPE: three position rows chosen by frequency section ----------------------------------
@tilelang.jit
def mrope_sections_inplace(heads=4, head_dim=128, sections=(16, 24, 24), block_T=8, threads=128,
                           theta=1000000.0):
    """Qwen2-VL's multimodal rotary embedding, in place on q (tokens, heads, head_dim), half-
    split: frequency f < half uses pos[0, t] for f in the first section, pos[1, t] in the
    second, pos[2, t] in the third; inv_freq computed in kernel as theta ** (-2 f / head_dim);
    T.dynamic tokens."""
    M = T.dynamic("tokens")
    half = head_dim // 2
    s0, s1 = sections[0], sections[0] + sections[1]
    assert sections[0] + sections[1] + sections[2] == half

    @T.prim_func
    def main(q: T.Tensor((M, heads, head_dim), T.bfloat16), pos: T.Tensor((3, M), T.int32)):
        with T.Kernel(T.ceildiv(M, block_T), threads=threads) as bt:
            for i, h, f in T.Parallel(block_T, heads, half):
                t = bt * block_T + i
                if t < M:
                    sec = T.if_then_else(f < s0, 0, T.if_then_else(f < s1, 1, 2))
                    inv = T.pow(T.float32(theta), T.cast(-2 * f, T.float32) / head_dim)
                    ang = T.cast(pos[sec, t], T.float32) * inv
                    x1 = T.cast(q[t, h, f], T.float32)
                    x2 = T.cast(q[t, h, f + half], T.float32)
                    q[t, h, f] = T.cast(x1 * T.cos(ang) - x2 * T.sin(ang), T.bfloat16)
                    q[t, h, f + half] = T.cast(x2 * T.cos(ang) + x1 * T.sin(ang), T.bfloat16)

    return main


# ---- differential attention: two softmaxes, their outputs subtracted ---------------------------
@T.macro
def _online_softmax(s, o, m, m_prev, l, rowsum, rows, cols, dv):
    """One key block of an online softmax over scores already scaled by log2(e) / sqrt(d):
    each row's running max and sum updated, s turned into exp2(s - max), o rescaled."""
    T.copy(m, m_prev)
    T.reduce_max(s, m, dim=1, clear=False)
    for i, j in T.Parallel(rows, cols):
        s[i, j] = T.exp2(s[i, j] - m[i])
    T.reduce_sum(s, rowsum, dim=1)
    for i in T.Parallel(rows):
        l[i] = l[i] * T.exp2(m_prev[i] - m[i]) + rowsum[i]
    for i, j in T.Parallel(rows, dv):
        o[i, j] *= T.exp2(m_prev[i] - m[i])


@tilelang.jit(out_idx=[6])
def diff_attention_fwd(B=1, H=4, S=256, D=64, Dv=64, block_M=64, block_N=64, threads=128):
    """O = softmax(Q1 K1^T / sqrt(D)) V - lam[h] * softmax(Q2 K2^T / sqrt(D)) V with one pass over
    the keys: two running maxes and sums, two output accumulators rescaled each step, the
    per-head lambda from a tensor."""
    scale = (1.0 / D) ** 0.5 * 1.44269504  # log2(e)

    @T.prim_func
    def main(Q1: T.Tensor((B, H, S, D), T.float16), Q2: T.Tensor((B, H, S, D), T.float16),
             K1: T.Tensor((B, H, S, D), T.float16), K2: T.Tensor((B, H, S, D), T.float16),
             V: T.Tensor((B, H, S, Dv), T.float16), lam: T.Tensor((H,), T.float32),
             O: T.Tensor((B, H, S, Dv), T.float16)):
        with T.Kernel(T.ceildiv(S, block_M), H, B, threads=threads) as (bx, h, b):
            Q1_s = T.alloc_shared((block_M, D), T.float16)
            Q2_s = T.alloc_shared((block_M, D), T.float16)
            K_s = T.alloc_shared((block_N, D), T.float16)
            V_s = T.alloc_shared((block_N, Dv), T.float16)
            P_s = T.alloc_shared((block_M, block_N), T.float16)
            s = T.alloc_fragment((block_M, block_N), T.float32)
            o1 = T.alloc_fragment((block_M, Dv), T.float32)
            o2 = T.alloc_fragment((block_M, Dv), T.float32)
            m1 = T.alloc_fragment((block_M,), T.float32)
            m2 = T.alloc_fragment((block_M,), T.float32)
            mp = T.alloc_fragment((block_M,), T.float32)
            l1 = T.alloc_fragment((block_M,), T.float32)
            l2 = T.alloc_fragment((block_M,), T.float32)
            rs = T.alloc_fragment((block_M,), T.float32)
            T.copy(Q1[b, h, bx * block_M, 0], Q1_s)
            T.copy(Q2[b, h, bx * block_M, 0], Q2_s)
            T.fill(m1, -T.infinity(T.float32))
            T.fill(m2, -T.infinity(T.float32))
            T.fill(l1, 0)
            T.fill(l2, 0)
            T.clear(o1)
            T.clear(o2)
            for n in T.Pipelined(T.ceildiv(S, block_N), num_stages=1):
                T.copy(V[b, h, n * block_N, 0], V_s)
                # map 1
                T.copy(K1[b, h, n * block_N, 0], K_s)
                T.clear(s)
                T.gemm(Q1_s, K_s, s, transpose_B=True)
                for i, j in T.Parallel(block_M, block_N):
                    s[i, j] *= scale
                _online_softmax(s, o1, m1, mp, l1, rs, block_M, block_N, Dv)
                T.copy(s, P_s)
                T.gemm(P_s, V_s, o1)
                # map 2
                T.copy(K2[b, h, n * block_N, 0], K_s)
                T.clear(s)
                T.gemm(Q2_s, K_s, s, transpose_B=True)
                for i, j in T.Parallel(block_M, block_N):
                    s[i, j] *= scale
                _online_softmax(s, o2, m2, mp, l2, rs, block_M, block_N, Dv)
                T.copy(s, P_s)
                T.gemm(P_s, V_s, o2)
            for i, j in T.Parallel(block_M, Dv):
                o1[i, j] = o1[i, j] / l1[i] - lam[h] * o2[i, j] / l2[i]
            T.copy(o1, O[b, h, bx * block_M, 0])

    return main


# ---- col2im (fold): patch columns added into the image by float32 atomics ----------------------
@tilelang.jit
def col2im_fold_atomic(B=2, C=8, H=20, W=20, kh=3, kw=3, stride=2, pad=1, block_L=64,
                       threads=128):
    """img[b, c, y, x] += cols[b, c * kh * kw + ky * kw + kx, l] for the patch l = oy * OW + ox
    with y = oy * stride - pad + ky (torch.nn.functional.fold): a serial loop over the kernel
    taps stepping by kw (one kernel row a step, its kw taps unrolled), atomics where patches
    overlap, taps in the padding skipped."""
    OH = (H + 2 * pad - kh) // stride + 1
    OW = (W + 2 * pad - kw) // stride + 1
    L = OH * OW

    @T.prim_func
    def main(cols: T.Tensor((B, C * kh * kw, L), T.float32), img: T.Tensor((B, C, H, W), T.float32)):
        with T.Kernel(T.ceildiv(L, block_L), C, B, threads=threads) as (bl, c, b):
            for t in T.serial(0, kh * kw, kw):
                for dx, li in T.Parallel(kw, block_L):
                    l = bl * block_L + li
                    y = (l // OW) * stride - pad + t // kw
                    x = (l % OW) * stride - pad + dx
                    if l < L and y >= 0 and y < H and x >= 0 and x < W:
                        T.atomic_add(img[b, c, y, x], cols[b, c * kh * kw + t + dx, l])

    return main


# ---- flash attention with an in-kernel hash dropout on P ---------------------------------------
@tilelang.jit(out_idx=[3])
def flash_fwd_hash_dropout(B=1, H=2, S=256, D=64, block_M=64, block_N=64, threads=128,
                           p_drop=0.25):
    """O = dropout(softmax(Q K^T / sqrt(D))) V, the dropout mask a hash of (b, h, row, col, seed)
    (uint32 multiply / xor-shift rounds) compared with a threshold, kept values scaled by
    1 / (1 - p); the row sums use the undropped probabilities (as dropout after softmax does);
    the seed a scalar argument."""
    scale = (1.0 / D) ** 0.5 * 1.44269504
    threshold = int(p_drop * 4294967296.0)
    keep_scale = 1.0 / (1.0 - p_drop)

    @T.prim_func
    def main(Q: T.Tensor((B, H, S, D), T.float16), K: T.Tensor((B, H, S, D), T.float16),
             V: T.Tensor((B, H, S, D), T.float16), O: T.Tensor((B, H, S, D), T.float16),
             seed: T.uint32):
        with T.Kernel(T.ceildiv(S, block_M), H, B, threads=threads) as (bx, h, b):
            Q_s = T.alloc_shared((block_M, D), T.float16)
            K_s = T.alloc_shared((block_N, D), T.float16)
            V_s = T.alloc_shared((block_N, D), T.float16)
            P_s = T.alloc_shared((block_M, block_N), T.float16)
            s = T.alloc_fragment((block_M, block_N), T.float32)
            o = T.alloc_fragment((block_M, D), T.float32)
            m = T.alloc_fragment((block_M,), T.float32)
            mp = T.alloc_fragment((block_M,), T.float32)
            l = T.alloc_fragment((block_M,), T.float32)
            rs = T.alloc_fragment((block_M,), T.float32)
            T.copy(Q[b, h, bx * block_M, 0], Q_s)
            T.fill(m, -T.infinity(T.float32))
            T.fill(l, 0)
            T.clear(o)
            for n in T.Pipelined(T.ceildiv(S, block_N), num_stages=2):
                T.copy(K[b, h, n * block_N, 0], K_s)
                T.copy(V[b, h, n * block_N, 0], V_s)
                T.clear(s)
                T.gemm(Q_s, K_s, s, transpose_B=True)
                for i, j in T.Parallel(block_M, block_N):
                    s[i, j] *= scale
                _online_softmax(s, o, m, mp, l, rs, block_M, block_N, D)
                for i, j in T.Parallel(block_M, block_N):
                    hsh = (T.cast((b * H + h) * S + bx * block_M + i, T.uint32) * T.uint32(2654435761)
                           ^ T.cast(n * block_N + j, T.uint32) * T.uint32(2246822519)) ^ seed
                    hsh = hsh ^ (hsh >> 16)
                    hsh = hsh * T.uint32(2146121005)
                    hsh = hsh ^ (hsh >> 15)
                    P_s[i, j] = T.if_then_else(hsh >= T.uint32(threshold),
                                               T.cast(s[i, j] * keep_scale, T.float16), T.float16(0))
                T.gemm(P_s, V_s, o)
            for i, j in T.Parallel(block_M, D):
                o[i, j] = o[i, j] / l[i]
            T.copy(o, O[b, h, bx * block_M, 0])

    return main


# ---- SageAttention-style: int8 Q / K with per-block scales, int32 scores, fp16 P V -------------
@tilelang.jit(out_idx=[5])
def sage_int8_qk_attention(B=1, H=2, S=256, D=64, block_M=64, block_N=64, threads=128):
    """scores = (Q8 K8^T as int32) * q_scale[b, h, query block] * k_scale[b, h, key block]: an
    int8 x int8 -> int32 T.gemm per key block, converted to float32 and scaled, then the online
    softmax and a float16 P V; the keys' scale read per block inside the pipelined loop."""
    sm = (1.0 / D) ** 0.5 * 1.44269504

    @T.prim_func
    def main(Q: T.Tensor((B, H, S, D), T.int8), K: T.Tensor((B, H, S, D), T.int8),
             V: T.Tensor((B, H, S, D), T.float16), qs: T.Tensor((B, H, S // block_M), T.float32),
             ks: T.Tensor((B, H, S // block_N), T.float32), O: T.Tensor((B, H, S, D), T.float16)):
        with T.Kernel(S // block_M, H, B, threads=threads) as (bx, h, b):
            Q_s = T.alloc_shared((block_M, D), T.int8)
            K_s = T.alloc_shared((block_N, D), T.int8)
            V_s = T.alloc_shared((block_N, D), T.float16)
            P_s = T.alloc_shared((block_M, block_N), T.float16)
            si = T.alloc_fragment((block_M, block_N), T.int32)
            s = T.alloc_fragment((block_M, block_N), T.float32)
            o = T.alloc_fragment((block_M, D), T.float32)
            m = T.alloc_fragment((block_M,), T.float32)
            mp = T.alloc_fragment((block_M,), T.float32)
            l = T.alloc_fragment((block_M,), T.float32)
            rs = T.alloc_fragment((block_M,), T.float32)
            T.copy(Q[b, h, bx * block_M, 0], Q_s)
            T.fill(m, -T.infinity(T.float32))
            T.fill(l, 0)
            T.clear(o)
            for n in T.Pipelined(S // block_N, num_stages=2):
                T.copy(K[b, h, n * block_N, 0], K_s)
                T.copy(V[b, h, n * block_N, 0], V_s)
                T.gemm(Q_s, K_s, si, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(block_M, block_N):
                    s[i, j] = T.cast(si[i, j], T.float32) * (qs[b, h, bx] * ks[b, h, n] * sm)
                _online_softmax(s, o, m, mp, l, rs, block_M, block_N, D)
                T.copy(s, P_s)
                T.gemm(P_s, V_s, o)
            for i, j in T.Parallel(block_M, D):
                o[i, j] /= l[i]
            T.copy(o, O[b, h, bx * block_M, 0])

    return main


# ---- tree attention (speculative decoding): a packed bitmask per query row ---------------------
@tilelang.jit(out_idx=[4])
def tree_attention_bitmask(H=4, prefix=192, tree=64, D=64, block_N=64, threads=128):
    """tree query tokens attend all prefix keys and the tree keys their packed mask allows: bit
    (k % 32) of mask[q, k // 32] for tree key k, the bits tested in registers after the score
    GEMM; keys = prefix + tree (one key block of each kind per step, a serial loop)."""
    S = prefix + tree
    W = tree // 32
    scale = (1.0 / D) ** 0.5 * 1.44269504

    @T.prim_func
    def main(Q: T.Tensor((H, tree, D), T.bfloat16), K: T.Tensor((H, S, D), T.bfloat16),
             V: T.Tensor((H, S, D), T.bfloat16), mask: T.Tensor((tree, W), T.uint32),
             O: T.Tensor((H, tree, D), T.bfloat16)):
        with T.Kernel(H, threads=threads) as h:
            Q_s = T.alloc_shared((tree, D), T.bfloat16)
            K_s = T.alloc_shared((block_N, D), T.bfloat16)
            V_s = T.alloc_shared((block_N, D), T.bfloat16)
            P_s = T.alloc_shared((tree, block_N), T.bfloat16)
            bits = T.alloc_shared((tree, W), T.uint32)
            s = T.alloc_fragment((tree, block_N), T.float32)
            o = T.alloc_fragment((tree, D), T.float32)
            m = T.alloc_fragment((tree,), T.float32)
            mp = T.alloc_fragment((tree,), T.float32)
            l = T.alloc_fragment((tree,), T.float32)
            rs = T.alloc_fragment((tree,), T.float32)
            T.copy(Q[h, 0, 0], Q_s)
            T.copy(mask, bits)
            T.fill(m, -T.infinity(T.float32))
            T.fill(l, 0)
            T.clear(o)
            for n in T.serial(T.ceildiv(S, block_N)):
                T.copy(K[h, n * block_N, 0], K_s)
                T.copy(V[h, n * block_N, 0], V_s)
                T.clear(s)
                T.gemm(Q_s, K_s, s, transpose_B=True)
                for i, j in T.Parallel(tree, block_N):
                    k = n * block_N + j
                    t = k - prefix
                    word = bits[i, T.max(t, 0) // 32]
                    keep = (k < prefix) or ((word >> T.cast(t % 32, T.uint32)) & T.uint32(1)) == T.uint32(1)
                    s[i, j] = T.if_then_else(keep, s[i, j] * scale, -T.infinity(T.float32))
                _online_softmax(s, o, m, mp, l, rs, tree, block_N, D)
                T.copy(s, P_s)
                T.gemm(P_s, V_s, o)
            for i, j in T.Parallel(tree, D):
                o[i, j] /= l[i]
            T.copy(o, O[h, 0, 0])

    return main


# ---- Muon's Newton-Schulz orthogonalisation: a chain of GEMMs on one tile ----------------------
@tilelang.jit(out_idx=[1])
def muon_newton_schulz(M=64, N=128, steps=5, threads=128, a=3.4445, b=-4.7750, c=2.0315):
    """X <- a X + (b A + c A A) X with A = X X^T, five times, X normalised first by its
    Frobenius norm: X X^T is one shared tile used as both GEMM operands, A A likewise
    (A symmetric), each product staged in bfloat16 shared tiles for the next GEMM."""

    @T.prim_func
    def main(G: T.Tensor((M, N), T.bfloat16), Y: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(1, threads=threads) as _:
            X_s = T.alloc_shared((M, N), T.bfloat16)
            A_s = T.alloc_shared((M, M), T.bfloat16)
            Bm_s = T.alloc_shared((M, M), T.bfloat16)
            x = T.alloc_fragment((M, N), T.float32)
            sq = T.alloc_fragment((M, N), T.float32)
            rows = T.alloc_fragment((M,), T.float32)
            tot = T.alloc_fragment((1,), T.float32)
            A = T.alloc_fragment((M, M), T.float32)
            AA = T.alloc_fragment((M, M), T.float32)
            Xn = T.alloc_fragment((M, N), T.float32)
            T.copy(G, x)
            for i, j in T.Parallel(M, N):
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, rows, dim=1)
            T.reduce_sum(rows, tot, dim=0)
            for i, j in T.Parallel(M, N):
                x[i, j] = x[i, j] / (T.sqrt(tot[0]) + 1e-7)
            T.copy(x, X_s)
            for _it in T.serial(steps):
                T.gemm(X_s, X_s, A, transpose_B=True, clear_accum=True)
                T.copy(A, A_s)
                T.gemm(A_s, A_s, AA, clear_accum=True)
                for i, j in T.Parallel(M, M):
                    Bm_s[i, j] = T.cast(b * A[i, j] + c * AA[i, j], T.bfloat16)
                T.gemm(Bm_s, X_s, Xn, clear_accum=True)
                T.copy(X_s, x)
                for i, j in T.Parallel(M, N):
                    x[i, j] = a * x[i, j] + Xn[i, j]
                T.copy(x, X_s)
            T.copy(X_s, Y)

    return main


# ---- bitonic top-k in shared memory: nested while loops over T.alloc_var strides --------------
@tilelang.jit(out_idx=[1, 2])
def bitonic_topk_while(R=64, N=1024, k=16, threads=256):
    """Each block sorts one row of N floats in shared memory (descending, the index carried
    along) by a bitonic network written as two nested ``while`` loops over T.alloc_var
    sizes (size doubles, stride halves), each step a T.Parallel compare-and-swap; the first k
    values and their indices are stored."""

    @T.prim_func
    def main(X: T.Tensor((R, N), T.float32), V: T.Tensor((R, k), T.float32),
             I: T.Tensor((R, k), T.int32)):
        with T.Kernel(R, threads=threads) as r:
            val = T.alloc_shared((N,), T.float32)
            idx = T.alloc_shared((N,), T.int32)
            size = T.alloc_var(T.int32)
            stride = T.alloc_var(T.int32)
            for t in T.Parallel(N):
                val[t] = X[r, t]
                idx[t] = t
            size = 2
            while size <= N:
                stride = size // 2
                while stride > 0:
                    for t in T.Parallel(N):
                        p = t ^ stride
                        if p > t:
                            desc = (t & size) == 0
                            a = val[t]
                            bv = val[p]
                            if (a < bv) == desc:
                                val[t] = bv
                                val[p] = a
                                ia = idx[t]
                                idx[t] = idx[p]
                                idx[p] = ia
                    stride = stride // 2
                size = size * 2
            for t in T.Parallel(k):
                V[r, t] = val[t]
                I[r, t] = idx[t]

    return main


# ---- GEMM with a LayerNorm epilogue over whole rows (BERT's output projection) -----------------
@tilelang.jit(out_idx=[5])
def gemm_bias_residual_layernorm(N=256, K=256, block_M=64, block_K=64, threads=256, eps=1e-5):
    """Y = LayerNorm(X @ W^T + bias + R) * gamma + beta, a block holding whole rows (block_N =
    N): the accumulator plus bias and residual land in a float32 fragment of its layout, whose
    rows' mean and variance (two reductions) are read back as h[i, j] - mean[i]; T.dynamic
    rows, the last tile ragged."""
    M = T.dynamic("rows")

    @T.prim_func
    def main(X: T.Tensor((M, K), T.float16), W: T.Tensor((N, K), T.float16),
             bias: T.Tensor((N,), T.float32), R: T.Tensor((M, N), T.float16),
             gb: T.Tensor((2, N), T.float32), Y: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bm:
            X_s = T.alloc_shared((block_M, block_K), T.float16)
            W_s = T.alloc_shared((N, block_K), T.float16)
            R_s = T.alloc_shared((block_M, N), T.float16)
            acc = T.alloc_fragment((block_M, N), T.float32)
            h = T.alloc_fragment((block_M, N), T.float32)
            sq = T.alloc_fragment((block_M, N), T.float32)
            mean = T.alloc_fragment((block_M,), T.float32)
            var = T.alloc_fragment((block_M,), T.float32)
            T.clear(acc)
            T.copy(R[bm * block_M, 0], R_s)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(X[bm * block_M, k * block_K], X_s)
                T.copy(W[0, k * block_K], W_s)
                T.gemm(X_s, W_s, acc, transpose_B=True)
            for i, j in T.Parallel(block_M, N):
                h[i, j] = acc[i, j] + bias[j] + T.cast(R_s[i, j], T.float32)
            T.reduce_sum(h, mean, dim=1)
            for i in T.Parallel(block_M):
                mean[i] = mean[i] / N
            for i, j in T.Parallel(block_M, N):
                h[i, j] = h[i, j] - mean[i]
                sq[i, j] = h[i, j] * h[i, j]
            T.reduce_sum(sq, var, dim=1)
            for i in T.Parallel(block_M):
                var[i] = T.rsqrt(var[i] / N + eps)
            for i, j in T.Parallel(block_M, N):
                acc[i, j] = h[i, j] * var[i] * gb[0, j] + gb[1, j]
            T.copy(acc, Y[bm * block_M, 0])

    return main


# ---- MoE router: gate GEMM, softmax and top-k by rounds of max over a register tile -----------
@tilelang.jit(out_idx=[2, 3])
def router_gemm_softmax_topk(D=512, E=64, topk=4, block_M=64, block_K=64, threads=128):
    """logits = x @ Wg^T (E experts), probabilities by a row softmax in a float32 fragment
    sharing the accumulator's layout, then top-k by k rounds of: row max, the first column
    holding it (a row minimum over an int32 fragment), masking that column, the round's
    weight and expert kept in (block_M, topk) fragments; the chosen weights renormalised;
    T.dynamic tokens."""
    M = T.dynamic("tokens")

    @T.prim_func
    def main(x: T.Tensor((M, D), T.bfloat16), Wg: T.Tensor((E, D), T.bfloat16),
             w: T.Tensor((M, topk), T.float32), ids: T.Tensor((M, topk), T.int32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bm:
            x_s = T.alloc_shared((block_M, block_K), T.bfloat16)
            W_s = T.alloc_shared((E, block_K), T.bfloat16)
            acc = T.alloc_fragment((block_M, E), T.float32)
            p = T.alloc_fragment((block_M, E), T.float32)
            col = T.alloc_fragment((block_M, E), T.int32)
            mx = T.alloc_fragment((block_M,), T.float32)
            sm = T.alloc_fragment((block_M,), T.float32)
            arg = T.alloc_fragment((block_M,), T.int32)
            tot = T.alloc_fragment((block_M,), T.float32)
            wk = T.alloc_fragment((block_M, topk), T.float32)
            ik = T.alloc_fragment((block_M, topk), T.int32)
            T.clear(acc)
            for k in T.Pipelined(D // block_K, num_stages=2):
                T.copy(x[bm * block_M, k * block_K], x_s)
                T.copy(Wg[0, k * block_K], W_s)
                T.gemm(x_s, W_s, acc, transpose_B=True)
            T.copy(acc, p)
            T.reduce_max(p, mx, dim=1)
            for i, j in T.Parallel(block_M, E):
                p[i, j] = T.exp(p[i, j] - mx[i])
            T.reduce_sum(p, sm, dim=1)
            for i, j in T.Parallel(block_M, E):
                p[i, j] = p[i, j] / sm[i]
            T.fill(tot, 0)
            for r in T.serial(topk):
                T.reduce_max(p, mx, dim=1)
                for i, j in T.Parallel(block_M, E):
                    col[i, j] = T.if_then_else(p[i, j] == mx[i], j, E)
                T.reduce_min(col, arg, dim=1)
                for i, j in T.Parallel(block_M, E):
                    p[i, j] = T.if_then_else(j == arg[i], -1.0, p[i, j])
                for i in T.Parallel(block_M):
                    tot[i] += mx[i]
                    wk[i, r] = mx[i]
                    ik[i, r] = arg[i]
            for i, r in T.Parallel(block_M, topk):
                if bm * block_M + i < M:
                    w[bm * block_M + i, r] = wk[i, r] / tot[i]
                    ids[bm * block_M + i, r] = ik[i, r]

    return main


# ---- paged MQA decode: a while loop over a sequence's pages through its block table ----------
@tilelang.jit(out_idx=[5])
def paged_mqa_decode_while(B=4, H=64, D=64, page=64, pages=256, max_pages=16, threads=128):
    """One block per sequence, its H query heads the rows of the score tile against one shared
    K / V head: a ``while`` loop over a T.alloc_var page counter runs while p * page < lens[b],
    each step copying page block_table[b, p] of the caches (a data-dependent T.copy source),
    masking keys past the length and updating an online softmax."""
    scale = (1.0 / D) ** 0.5 * 1.44269504

    @T.prim_func
    def main(Q: T.Tensor((B, H, D), T.float16), Kc: T.Tensor((pages, page, D), T.float16),
             Vc: T.Tensor((pages, page, D), T.float16), block_table: T.Tensor((B, max_pages), T.int32),
             lens: T.Tensor((B,), T.int32), O: T.Tensor((B, H, D), T.float16)):
        with T.Kernel(B, threads=threads) as b:
            Q_s = T.alloc_shared((H, D), T.float16)
            K_s = T.alloc_shared((page, D), T.float16)
            V_s = T.alloc_shared((page, D), T.float16)
            P_s = T.alloc_shared((H, page), T.float16)
            s = T.alloc_fragment((H, page), T.float32)
            o = T.alloc_fragment((H, D), T.float32)
            m = T.alloc_fragment((H,), T.float32)
            mp = T.alloc_fragment((H,), T.float32)
            l = T.alloc_fragment((H,), T.float32)
            rs = T.alloc_fragment((H,), T.float32)
            p = T.alloc_var(T.int32)
            T.copy(Q[b, 0, 0], Q_s)
            T.fill(m, -T.infinity(T.float32))
            T.fill(l, 0)
            T.clear(o)
            p = 0
            while p * page < lens[b]:
                T.copy(Kc[block_table[b, p], 0, 0], K_s)
                T.copy(Vc[block_table[b, p], 0, 0], V_s)
                T.clear(s)
                T.gemm(Q_s, K_s, s, transpose_B=True)
                for i, j in T.Parallel(H, page):
                    s[i, j] = T.if_then_else(p * page + j < lens[b], s[i, j] * scale, -T.infinity(T.float32))
                _online_softmax(s, o, m, mp, l, rs, H, page, D)
                T.copy(s, P_s)
                T.gemm(P_s, V_s, o)
                p += 1
            for i, j in T.Parallel(H, D):
                o[i, j] /= l[i]
            T.copy(o, O[b, 0, 0])

    return main


# ---- W8A8 GEMM, dequantized per token x per channel, requantized to fp8 per token -------------
@tilelang.jit(out_idx=[4, 5])
def w8a8_gemm_fp8_requant(N=256, K=512, block_M=64, block_K=128, threads=256):
    """y = (A8 @ W8^T as int32) * sa[m] * sw[n] in a float32 fragment of the accumulator's
    layout (a block holds whole rows, N = 256 over two warpgroups), then each row requantized
    for the next layer: amax by T.reduce_absmax, Y = y / (amax / 448) as float8_e4m3 and the
    row's scale stored; T.dynamic tokens."""
    M = T.dynamic("tokens")

    @T.prim_func
    def main(A: T.Tensor((M, K), T.int8), W: T.Tensor((N, K), T.int8), sa: T.Tensor((M,), T.float32),
             sw: T.Tensor((N,), T.float32), Y: T.Tensor((M, N), T.float8_e4m3fn),
             sy: T.Tensor((M,), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bm:
            A_s = T.alloc_shared((block_M, block_K), T.int8)
            W_s = T.alloc_shared((N, block_K), T.int8)
            acc = T.alloc_fragment((block_M, N), T.int32)
            y = T.alloc_fragment((block_M, N), T.float32)
            q = T.alloc_fragment((block_M, N), T.float8_e4m3fn)
            amax = T.alloc_fragment((block_M,), T.float32)
            T.clear(acc)
            for k in T.Pipelined(K // block_K, num_stages=3):
                T.copy(A[bm * block_M, k * block_K], A_s)
                T.copy(W[0, k * block_K], W_s)
                T.gemm(A_s, W_s, acc, transpose_B=True)
            for i, j in T.Parallel(block_M, N):
                t = T.min(bm * block_M + i, M - 1)
                y[i, j] = T.cast(acc[i, j], T.float32) * sa[t] * sw[j]
            T.reduce_absmax(y, amax, dim=1)
            for i in T.Parallel(block_M):
                amax[i] = T.max(amax[i], 1e-6) / 448.0
            for i, j in T.Parallel(block_M, N):
                q[i, j] = T.cast(T.clamp(y[i, j] / amax[i], -448.0, 448.0), T.float8_e4m3fn)
            T.copy(q, Y[bm * block_M, 0])
            for i in T.Parallel(block_M):
                if bm * block_M + i < M:
                    sy[bm * block_M + i] = amax[i]

    return main
