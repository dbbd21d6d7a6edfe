"""A fortieth set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang), on LLM serving and training utilities: presence / frequency / repetition penalties
from a token-id list (counts by shared-memory atomics), a greedy argmax over a T.dynamic vocab
with ties to the lowest index, min-p filtering then Gumbel-max sampling with a hash RNG,
speculative-decoding verification (accept lengths by a while loop over T.alloc_var), a KV-cache
append into paged fp8 blocks through a slot mapping with a scale per block and head, a Lion
step over a multi-tensor offset table (flat fp32 master weights and bf16 params), global
grad-norm clipping in two kernels (partial squares by atomics, then a scale), an embedding
backward adding bf16 row slices atomically, bilinear resizing with align_corners both ways,
an LSTM cell whose four gate GEMMs share one pipelined loop and are fused with the cell
update, a DeepSeek-style fp8 GEMM (1x128 activation scales stored M-major, 128x128 weight
scales) over a T.dynamic M, a GEMV split over K across warps (a warp-shaped shared tile reduced
over dim 0), label-smoothed cross-entropy forward and backward with an ignore index, and a
5-point stencil through a haloed shared tile.

The file reads as TileLang after swapping its two import lines (``import tilelang`` /
``import tilelang.language as T``); ``tests/test_unseen_programs40.py`` builds each to a cubin
on the CPU, checks what decides the result in the generated source, and on a GPU compares it
with torch."""

import tilecute as tilelang
import tilecute.language as T


# ---- presence / frequency / repetition penalties from a token-id list ---------------------------
@tilelang.jit
def penalties_from_token_ids(B=4, V=4000, L=96, threads=256):
    """OpenAI-style penalties in place: each row's generated ids (Ids [B, L], -1 = padding) are
    counted into a shared int32 histogram of the vocab by T.atomic_add; then every logit with a
    count c > 0 becomes rep(l) - freq * c - presence, rep(l) = l / r if l > 0 else l * r, with
    the three coefficients per row (Pen [B, 3])."""

    @T.prim_func
    def main(Logits: T.Tensor((B, V), T.float32), Ids: T.Tensor((B, L), T.int32),
             Pen: T.Tensor((B, 3), T.float32)):
        with T.Kernel(B, threads=threads) as b:
            cnt = T.alloc_shared((V,), T.int32)
            T.fill(cnt, 0)
            T.sync_threads()
            for t in T.Parallel(L):
                tok = Ids[b, t]
                if tok >= 0:
                    T.atomic_add(cnt[tok], 1)
            T.sync_threads()
            rep = Pen[b, 0]
            freq = Pen[b, 1]
            pres = Pen[b, 2]
            for v in T.Parallel(V):
                c = cnt[v]
                if c > 0:
                    l = Logits[b, v]
                    l = T.if_then_else(l > 0, l / rep, l * rep)
                    Logits[b, v] = l - freq * T.cast(c, T.float32) - pres

    return main


# ---- greedy argmax over a dynamic vocab, ties to the lowest index --------------------------------
@tilelang.jit(out_idx=[1])
def argmax_vocab_ties_dynamic(B=8, chunk=1024, threads=256):
    """token[b] = the first index of the row's maximum over V = T.dynamic columns: a T.Pipelined
    loop copies chunks (the last one ragged: zero-padded, masked to -inf by T.if_then_else),
    a T.reduce_max then a T.reduce_min over candidate indices settle each chunk, and a strict
    ``>`` keeps the earlier chunk on a tie."""
    V = T.dynamic("V")

    @T.prim_func
    def main(Logits: T.Tensor((B, V), T.bfloat16), Tok: T.Tensor((B,), T.int32)):
        with T.Kernel(B, threads=threads) as b:
            xs = T.alloc_shared((chunk,), T.bfloat16)
            x = T.alloc_fragment((chunk,), T.float32)
            ix = T.alloc_fragment((chunk,), T.int32)
            cm = T.alloc_fragment((1,), T.float32)
            ci = T.alloc_fragment((1,), T.int32)
            best = T.alloc_var(T.float32, init=-T.infinity(T.float32))
            best_i = T.alloc_var(T.int32, init=0)
            for c in T.Pipelined(T.ceildiv(V, chunk), num_stages=2):
                T.copy(Logits[b, c * chunk], xs)
                for j in T.Parallel(chunk):
                    x[j] = T.if_then_else(c * chunk + j < V, T.cast(xs[j], T.float32),
                                          -T.infinity(T.float32))
                T.reduce_max(x, cm, dim=0)
                for j in T.Parallel(chunk):
                    ix[j] = T.if_then_else(x[j] == cm[0], c * chunk + j, 2147483647)
                T.reduce_min(ix, ci, dim=0)
                if cm[0] > best:
                    best = cm[0]
                    best_i = ci[0]
            Tok[b] = best_i

    return main


# ---- min-p filter, then Gumbel-max sampling with a hash RNG --------------------------------------
@tilelang.jit(out_idx=[3])
def min_p_gumbel_sample(B=4, V=5000, chunk=1024, threads=256):
    """Sample with temperature t and min-p m (per row): logits scaled by 1 / t, tokens whose
    probability is below m * p_max (l < l_max + log m) are dropped, and the kept ones compete
    by l + Gumbel(u), u drawn from a 32-bit integer hash of (seed, row, column) -- a
    murmur-style finalizer in uint32 arithmetic (wrapping multiplies, logical shifts)."""
    n_chunks = T.ceildiv(V, chunk)

    @T.prim_func
    def main(Logits: T.Tensor((B, V), T.float32), Temp: T.Tensor((B,), T.float32),
             MinP: T.Tensor((B,), T.float32), Tok: T.Tensor((B,), T.int32),
             seed: T.uint32):
        with T.Kernel(B, threads=threads) as b:
            x = T.alloc_fragment((chunk,), T.float32)
            ix = T.alloc_fragment((chunk,), T.int32)
            cm = T.alloc_fragment((1,), T.float32)
            ci = T.alloc_fragment((1,), T.int32)
            lmax = T.alloc_var(T.float32, init=-T.infinity(T.float32))
            best = T.alloc_var(T.float32, init=-T.infinity(T.float32))
            best_i = T.alloc_var(T.int32, init=0)
            inv_t = 1.0 / Temp[b]
            for c in T.serial(n_chunks):
                for j in T.Parallel(chunk):
                    col = c * chunk + j
                    x[j] = T.if_then_else(col < V, Logits[b, col] * inv_t, -T.infinity(T.float32))
                T.reduce_max(x, cm, dim=0)
                lmax = T.max(lmax, cm[0])
            cut = lmax + T.log(MinP[b])
            for c in T.serial(n_chunks):
                for j in T.Parallel(chunk):
                    col = c * chunk + j
                    h = seed ^ (T.cast(b, T.uint32) * T.uint32(0x9E3779B9)) ^ T.cast(col, T.uint32)
                    h = h ^ (h >> 16)
                    h = h * T.uint32(0x85EBCA6B)
                    h = h ^ (h >> 13)
                    h = h * T.uint32(0xC2B2AE35)
                    h = h ^ (h >> 16)
                    u = (T.cast(h >> 8, T.float32) + 0.5) * (1.0 / 16777216.0)
                    l = T.if_then_else(col < V, Logits[b, col] * inv_t, -T.infinity(T.float32))
                    x[j] = T.if_then_else(l >= cut, l - T.log(-T.log(u)), -T.infinity(T.float32))
                T.reduce_max(x, cm, dim=0)
                for j in T.Parallel(chunk):
                    ix[j] = T.if_then_else(x[j] == cm[0], c * chunk + j, V)
                T.reduce_min(ix, ci, dim=0)
                if cm[0] > best:
                    best = cm[0]
                    best_i = ci[0]
            Tok[b] = best_i

    return main


# ---- speculative decoding: accept lengths and the emitted tokens ---------------------------------
@tilelang.jit(out_idx=[2, 3])
def spec_verify_accept_while(B=100, K=5, threads=64):
    """Greedy verification of K draft tokens per row against the target's K + 1 argmax tokens:
    n = the length of the matching prefix (a while loop on a T.alloc_var), then the row emits
    draft[0:n] and the target's token n (the correction or the bonus) and -1 after; Acc[b] =
    n + 1 tokens.  One thread a row, rows past B return early."""

    @T.prim_func
    def main(Draft: T.Tensor((B, K), T.int64), Target: T.Tensor((B, K + 1), T.int64),
             Out: T.Tensor((B, K + 1), T.int64), Acc: T.Tensor((B,), T.int32)):
        with T.Kernel(T.ceildiv(B, threads), threads=threads) as bx:
            tx = T.get_thread_binding()
            r = bx * threads + tx
            if r < B:
                n = T.alloc_var(T.int32, init=0)
                while n < K and Draft[r, n] == Target[r, n]:
                    n += 1
                for j in T.serial(K + 1):
                    Out[r, j] = T.if_then_else(j < n, Draft[r, j],
                                               T.if_then_else(j == n, Target[r, n], T.int64(-1)))
                Acc[r] = n + 1

    return main


# ---- KV-cache append into paged fp8 blocks ------------------------------------------------------
@tilelang.jit
def kv_append_paged_fp8(T_new=37, H=8, D=128, num_blocks=16, block_size=16, threads=128):
    """New keys / values (bf16 [T, H, D]) written to a paged cache [blocks, block_size, H, D]
    of float8_e4m3 at slot_mapping[t] (block = slot // block_size, offset = slot % block_size;
    a negative slot is a padding token, skipped); each value is divided by its block's and
    head's scale (float32 [blocks, H]) and saturated to +-448 before the cast.  One block per
    (token, head)."""

    @T.prim_func
    def main(K: T.Tensor((T_new, H, D), T.bfloat16), V: T.Tensor((T_new, H, D), T.bfloat16),
             Slot: T.Tensor((T_new,), T.int64),
             Kc: T.Tensor((num_blocks, block_size, H, D), T.float8_e4m3),
             Vc: T.Tensor((num_blocks, block_size, H, D), T.float8_e4m3),
             Ks: T.Tensor((num_blocks, H), T.float32), Vs: T.Tensor((num_blocks, H), T.float32)):
        with T.Kernel(T_new, H, threads=threads) as (t, h):
            slot = Slot[t]
            if slot >= 0:
                blk = slot // block_size
                off = slot % block_size
                inv_k = 1.0 / Ks[blk, h]
                inv_v = 1.0 / Vs[blk, h]
                for d in T.Parallel(D):
                    Kc[blk, off, h, d] = T.cast(
                        T.clamp(T.cast(K[t, h, d], T.float32) * inv_k, -448.0, 448.0), T.float8_e4m3)
                    Vc[blk, off, h, d] = T.cast(
                        T.clamp(T.cast(V[t, h, d], T.float32) * inv_v, -448.0, 448.0), T.float8_e4m3)

    return main


# ---- Lion over a multi-tensor offset table --------------------------------------------------------
@tilelang.jit
def lion_multi_tensor(n_tensors=3, block=1024, threads=256, beta1=0.9, beta2=0.99, wd=0.01):
    """One Lion step for several tensors packed in one flat buffer of T.dynamic length N:
    tensor i owns [Off[i], Off[i + 1]) and its learning rate Lr[i]; the grid is (chunks of the
    longest tensor, a scalar argument, tensors), a block past its tensor's end does nothing.  The fp32 master
    weights are updated (decoupled weight decay, sign of the interpolated momentum), the bf16
    copy rewritten, the momentum moved on."""
    N = T.dynamic("N")

    @T.prim_func
    def main(P32: T.Tensor((N,), T.float32), P16: T.Tensor((N,), T.bfloat16),
             G: T.Tensor((N,), T.bfloat16), M: T.Tensor((N,), T.float32),
             Off: T.Tensor((n_tensors + 1,), T.int32), Lr: T.Tensor((n_tensors,), T.float32),
             max_len: T.int32):
        with T.Kernel(T.ceildiv(max_len, block), n_tensors, threads=threads) as (bx, ti):
            lo = Off[ti]
            hi = Off[ti + 1]
            lr = Lr[ti]
            start = lo + bx * block
            if start < hi:
                for i in T.Parallel(block):
                    k = start + i
                    if k < hi:
                        g = T.cast(G[k], T.float32)
                        m = M[k]
                        c = beta1 * m + (1.0 - beta1) * g
                        s = T.if_then_else(c > 0, 1.0, T.if_then_else(c < 0, -1.0, 0.0))
                        p = P32[k] * (1.0 - lr * wd) - lr * s
                        P32[k] = p
                        P16[k] = T.cast(p, T.bfloat16)
                        M[k] = beta2 * m + (1.0 - beta2) * g

    return main


# ---- global grad-norm clipping: two kernels --------------------------------------------------------
@tilelang.jit
def grad_sq_partials(block=2048, threads=256):
    """Kernel 1: every block sums the squares of its bf16 gradient chunk (a ragged last one,
    over a T.dynamic N) and adds the sum into Total[0] by T.atomic_add."""
    N = T.dynamic("N")

    @T.prim_func
    def main(G: T.Tensor((N,), T.bfloat16), Total: T.Tensor((1,), T.float32)):
        with T.Kernel(T.ceildiv(N, block), threads=threads) as bx:
            g = T.alloc_fragment((block,), T.float32)
            s = T.alloc_fragment((1,), T.float32)
            for i in T.Parallel(block):
                k = bx * block + i
                v = T.if_then_else(k < N, T.cast(G[k], T.float32), 0.0)
                g[i] = v * v
            T.reduce_sum(g, s, dim=0)
            if T.get_thread_binding() == 0:
                T.atomic_add(Total[0], s[0])

    return main


@tilelang.jit
def grad_clip_scale(block=2048, threads=256, max_norm=1.0, eps=1e-6):
    """Kernel 2: scale = min(1, max_norm / (sqrt(Total) + eps)), applied in place, four
    elements a thread per step of a T.serial loop with a step."""
    N = T.dynamic("N")

    @T.prim_func
    def main(G: T.Tensor((N,), T.bfloat16), Total: T.Tensor((1,), T.float32)):
        with T.Kernel(T.ceildiv(N, block), threads=threads) as bx:
            tx = T.get_thread_binding()
            scale = T.min(1.0, max_norm / (T.sqrt(Total[0]) + eps))
            for j in T.serial(0, block, threads):
                k = bx * block + j + tx
                if k < N:
                    G[k] = T.cast(T.cast(G[k], T.float32) * scale, T.bfloat16)

    return main


# ---- embedding backward: bf16 row slices added atomically --------------------------------------------
@tilelang.jit
def embedding_bwd_bf16_atomic(T_tok=300, V=1000, D=256, tile_t=16, threads=128, padding_idx=0):
    """dW[ids[t], :] += dY[t, :] with dW in bf16: a block takes tile_t tokens and a 128-wide
    half of D, loads dY's tile to registers, and adds each token's row slice into dW with a
    region T.atomic_add (paired bf16 atomics); tokens equal to padding_idx or past T add
    nothing."""
    dc = 128

    @T.prim_func
    def main(Ids: T.Tensor((T_tok,), T.int32), dY: T.Tensor((T_tok, D), T.bfloat16),
             dW: T.Tensor((V, D), T.bfloat16)):
        with T.Kernel(T.ceildiv(T_tok, tile_t), D // dc, threads=threads) as (bt, bd):
            row = T.alloc_fragment((dc,), T.bfloat16)
            for t in T.serial(tile_t):
                tok = bt * tile_t + t
                if tok < T_tok:
                    idx = Ids[tok]
                    if idx != padding_idx:
                        T.copy(dY[tok, bd * dc:(bd + 1) * dc], row)
                        T.atomic_add(dW[idx, bd * dc:(bd + 1) * dc], row)

    return main


# ---- bilinear resize, align_corners both ways -------------------------------------------------------
@tilelang.jit(out_idx=[1])
def resize_bilinear(N=2, C=3, H=37, W=50, OH=64, OW=80, align_corners=True, block=256):
    """torch's F.interpolate(mode="bilinear") on NCHW float32: a source coordinate
    dst * (in - 1) / (out - 1) with align_corners, else (dst + 0.5) * in / out - 0.5 clamped at
    0; the upper neighbour clamped to the last row / column.  A flat 1-D grid over outputs."""
    total = N * C * OH * OW
    if align_corners:
        sh = (H - 1) / (OH - 1)
        sw = (W - 1) / (OW - 1)
    else:
        sh = H / OH
        sw = W / OW

    @T.prim_func
    def main(X: T.Tensor((N, C, H, W), T.float32), Y: T.Tensor((N, C, OH, OW), T.float32)):
        with T.Kernel(T.ceildiv(total, block), threads=block) as bx:
            for i in T.Parallel(block):
                f = bx * block + i
                if f < total:
                    ox = f % OW
                    oy = (f // OW) % OH
                    nc = f // (OW * OH)
                    n = nc // C
                    c = nc % C
                    if align_corners:
                        fy = T.cast(oy, T.float32) * sh
                        fx = T.cast(ox, T.float32) * sw
                    else:
                        fy = T.max((T.cast(oy, T.float32) + 0.5) * sh - 0.5, 0.0)
                        fx = T.max((T.cast(ox, T.float32) + 0.5) * sw - 0.5, 0.0)
                    y0 = T.cast(T.floor(fy), T.int32)
                    x0 = T.cast(T.floor(fx), T.int32)
                    y1 = T.min(y0 + 1, H - 1)
                    x1 = T.min(x0 + 1, W - 1)
                    wy = fy - T.cast(y0, T.float32)
                    wx = fx - T.cast(x0, T.float32)
                    top = X[n, c, y0, x0] * (1.0 - wx) + X[n, c, y0, x1] * wx
                    bot = X[n, c, y1, x0] * (1.0 - wx) + X[n, c, y1, x1] * wx
                    Y[n, c, oy, ox] = top * (1.0 - wy) + bot * wy

    return main


# ---- LSTM cell: four gate GEMMs fused with the cell update ------------------------------------------
@tilelang.jit(out_idx=[5, 6])
def lstm_cell_fused(Bt=128, I=256, Hd=256, block_M=64, block_N=32, block_K=64, threads=128):
    """gates = x @ W^T + h @ U^T + b with W [4H, I], U [4H, H] (gate order i, f, g, o);
    each block owns block_N hidden units and keeps one accumulator per gate; the K loop runs
    over x's columns then h's (one T.Pipelined loop, the operand chosen by the step), and the
    epilogue is c' = sigmoid(f) c + sigmoid(i) tanh(g), h' = sigmoid(o) tanh(c')."""
    kx = I // block_K
    kt = (I + Hd) // block_K

    @T.prim_func
    def main(X: T.Tensor((Bt, I), T.float16), Hp: T.Tensor((Bt, Hd), T.float16),
             W: T.Tensor((4 * Hd, I), T.float16), U: T.Tensor((4 * Hd, Hd), T.float16),
             Cp: T.Tensor((Bt, Hd), T.float32), Hn: T.Tensor((Bt, Hd), T.float16),
             Cn: T.Tensor((Bt, Hd), T.float32), bias: T.Tensor((4 * Hd,), T.float32)):
        with T.Kernel(Hd // block_N, T.ceildiv(Bt, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            Wi = T.alloc_shared((block_N, block_K), T.float16)
            Wf = T.alloc_shared((block_N, block_K), T.float16)
            Wg = T.alloc_shared((block_N, block_K), T.float16)
            Wo = T.alloc_shared((block_N, block_K), T.float16)
            ai = T.alloc_fragment((block_M, block_N), T.float32)
            af = T.alloc_fragment((block_M, block_N), T.float32)
            ag = T.alloc_fragment((block_M, block_N), T.float32)
            ao = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(ai)
            T.clear(af)
            T.clear(ag)
            T.clear(ao)
            n0 = bx * block_N
            for k in T.Pipelined(kt, num_stages=2):
                if k < kx:
                    T.copy(X[by * block_M, k * block_K], A_s)
                    T.copy(W[n0, k * block_K], Wi)
                    T.copy(W[Hd + n0, k * block_K], Wf)
                    T.copy(W[2 * Hd + n0, k * block_K], Wg)
                    T.copy(W[3 * Hd + n0, k * block_K], Wo)
                else:
                    T.copy(Hp[by * block_M, (k - kx) * block_K], A_s)
                    T.copy(U[n0, (k - kx) * block_K], Wi)
                    T.copy(U[Hd + n0, (k - kx) * block_K], Wf)
                    T.copy(U[2 * Hd + n0, (k - kx) * block_K], Wg)
                    T.copy(U[3 * Hd + n0, (k - kx) * block_K], Wo)
                T.gemm(A_s, Wi, ai, transpose_B=True)
                T.gemm(A_s, Wf, af, transpose_B=True)
                T.gemm(A_s, Wg, ag, transpose_B=True)
                T.gemm(A_s, Wo, ao, transpose_B=True)
            for i, j in T.Parallel(block_M, block_N):
                r = by * block_M + i
                col = n0 + j
                if r < Bt:
                    ig = T.sigmoid(ai[i, j] + bias[col])
                    fg = T.sigmoid(af[i, j] + bias[Hd + col])
                    gg = T.tanh(ag[i, j] + bias[2 * Hd + col])
                    og = T.sigmoid(ao[i, j] + bias[3 * Hd + col])
                    c = fg * Cp[r, col] + ig * gg
                    Cn[r, col] = c
                    Hn[r, col] = T.cast(og * T.tanh(c), T.float16)

    return main


# ---- DeepSeek-style fp8 GEMM: 1x128 activation scales (M-major), 128x128 weight scales -----------
@tilelang.jit(out_idx=[4])
def fp8_gemm_deepseek_scales(N=512, K=1024, block_M=64, block_N=128, threads=128):
    """C[M, N] (bf16) = sum over 128-wide K blocks kb of (A_kb @ B_kb^T) * Sa[kb, m] * Sb[n // 128,
    kb]: A's scales stored transposed (K / 128, M) as DeepGEMM keeps them, M a T.dynamic
    dimension (a ragged last tile); each K block's product goes to a cleared partial
    accumulator, promoted into the float32 total with both scales."""
    M = T.dynamic("M")
    bk = 128

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float8_e4m3), B: T.Tensor((N, K), T.float8_e4m3),
             Sa: T.Tensor((K // bk, M), T.float32), Sb: T.Tensor((N // bk, K // bk), T.float32),
             C: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(N // block_N, T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, bk), T.float8_e4m3)
            B_s = T.alloc_shared((block_N, bk), T.float8_e4m3)
            part = T.alloc_fragment((block_M, block_N), T.float32)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            C_s = T.alloc_shared((block_M, block_N), T.bfloat16)
            T.clear(acc)
            for kb in T.Pipelined(K // bk, num_stages=3):
                T.copy(A[by * block_M, kb * bk], A_s)
                T.copy(B[bx * block_N, kb * bk], B_s)
                T.gemm(A_s, B_s, part, transpose_B=True, clear_accum=True)
                sb = Sb[bx * block_N // bk, kb]
                for i, j in T.Parallel(block_M, block_N):
                    r = by * block_M + i
                    sa = T.if_then_else(r < M, Sa[kb, r], 0.0)
                    acc[i, j] += part[i, j] * sa * sb
            T.copy(acc, C_s)
            T.copy(C_s, C[by * block_M, bx * block_N])

    return main


# ---- GEMV split over K across warps ----------------------------------------------------------------
@tilelang.jit(out_idx=[2])
def gemv_splitk_warps(N=1000, K=4096, rows=8, threads=128):
    """y = W x with W [N, K] bf16: a block owns `rows` outputs; its four warps split K in
    quarters, each lane accumulating a strided part of its quarter for every row (T.serial with
    a step over T.alloc_local partials); the lanes' sums are warp-reduced by T.shfl_xor, each
    warp's total lands in a (4, rows) shared tile, and T.reduce_sum over dim 0 adds the warps."""
    warps = threads // 32
    kq = K // warps

    @T.prim_func
    def main(Wt: T.Tensor((N, K), T.bfloat16), x: T.Tensor((K,), T.bfloat16),
             y: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, rows), threads=threads) as bx:
            tx = T.get_thread_binding()
            w = tx // 32
            lane = tx % 32
            part = T.alloc_local((rows,), T.float32)
            red = T.alloc_shared((warps, rows), T.float32)
            tot = T.alloc_fragment((rows,), T.float32)
            for r in T.serial(rows):
                part[r] = 0.0
            for k in T.serial(w * kq + lane, (w + 1) * kq, 32):
                xv = T.cast(x[k], T.float32)
                for r in T.unroll(rows):
                    n = bx * rows + r
                    if n < N:
                        part[r] += T.cast(Wt[n, k], T.float32) * xv
            for r in T.unroll(rows):
                v = part[r]
                v += T.shfl_xor(v, 16)
                v += T.shfl_xor(v, 8)
                v += T.shfl_xor(v, 4)
                v += T.shfl_xor(v, 2)
                v += T.shfl_xor(v, 1)
                if lane == 0:
                    red[w, r] = v
            T.sync_threads()
            T.reduce_sum(red, tot, dim=0)
            for r in T.Parallel(rows):
                if bx * rows + r < N:
                    y[bx * rows + r] = tot[r]

    return main


# ---- label-smoothed cross-entropy, forward and backward, ignore index -----------------------------
@tilelang.jit(out_idx=[2, 3])
def label_smoothed_ce(R=64, V=3000, chunk=1024, threads=256, eps=0.1, ignore_index=-100):
    """Per row: lse = logsumexp(x); loss = (1 - eps) * (lse - x[y]) + eps * (lse - mean(x));
    dx = softmax(x) - (1 - eps) * onehot(y) - eps / V.  A row whose label is ignore_index has
    loss 0 and dx 0.  Online max / sum over chunks (T.alloc_var carries), a second pass for
    dx (bf16 logits in, float32 out)."""
    n_chunks = T.ceildiv(V, chunk)

    @T.prim_func
    def main(X: T.Tensor((R, V), T.bfloat16), Y: T.Tensor((R,), T.int64),
             Loss: T.Tensor((R,), T.float32), dX: T.Tensor((R, V), T.float32)):
        with T.Kernel(R, threads=threads) as r:
            x = T.alloc_fragment((chunk,), T.float32)
            cm = T.alloc_fragment((1,), T.float32)
            cs = T.alloc_fragment((1,), T.float32)
            tot = T.alloc_fragment((1,), T.float32)
            m = T.alloc_var(T.float32, init=-T.infinity(T.float32))
            s = T.alloc_var(T.float32, init=0.0)
            sx = T.alloc_var(T.float32, init=0.0)
            label = Y[r]
            if label == ignore_index:
                Loss[r] = 0.0
                for c in T.serial(n_chunks):
                    for j in T.Parallel(chunk):
                        if c * chunk + j < V:
                            dX[r, c * chunk + j] = 0.0
            else:
                for c in T.serial(n_chunks):
                    for j in T.Parallel(chunk):
                        x[j] = T.if_then_else(c * chunk + j < V,
                                              T.cast(X[r, c * chunk + j], T.float32),
                                              -T.infinity(T.float32))
                    T.reduce_max(x, cm, dim=0)
                    m_new = T.max(m, cm[0])
                    for j in T.Parallel(chunk):
                        x[j] = T.exp(x[j] - m_new)
                    T.reduce_sum(x, cs, dim=0)
                    s = s * T.exp(m - m_new) + cs[0]
                    m = m_new
                    for j in T.Parallel(chunk):
                        x[j] = T.if_then_else(c * chunk + j < V,
                                              T.cast(X[r, c * chunk + j], T.float32), 0.0)
                    T.reduce_sum(x, tot, dim=0)
                    sx += tot[0]
                lse = m + T.log(s)
                xy = T.cast(X[r, label], T.float32)
                Loss[r] = (1.0 - eps) * (lse - xy) + eps * (lse - sx / V)
                for c in T.serial(n_chunks):
                    for j in T.Parallel(chunk):
                        col = c * chunk + j
                        if col < V:
                            p = T.exp(T.cast(X[r, col], T.float32) - lse)
                            dX[r, col] = p - eps / V - T.if_then_else(col == label, 1.0 - eps, 0.0)

    return main


# ---- 5-point stencil through a haloed shared tile ---------------------------------------------------
@tilelang.jit(out_idx=[1])
def stencil5_haloed_tile(H=100, W=130, bh=16, bw=32, alpha=0.2):
    """One explicit heat step Y = X + alpha * (N + S + E + W - 4 X) with zero outside: each
    block loads a (bh + 2, bw + 2) tile with a one-cell halo into shared memory (a T.Parallel
    load masked by T.if_then_else at the borders and past the ragged edges), then reads the five
    taps from shared memory."""

    @T.prim_func
    def main(X: T.Tensor((H, W), T.float32), Y: T.Tensor((H, W), T.float32)):
        with T.Kernel(T.ceildiv(W, bw), T.ceildiv(H, bh), threads=128) as (bx, by):
            tile = T.alloc_shared((bh + 2, bw + 2), T.float32)
            for i, j in T.Parallel(bh + 2, bw + 2):
                gy = by * bh + i - 1
                gx = bx * bw + j - 1
                tile[i, j] = T.if_then_else((gy >= 0) and (gy < H) and (gx >= 0) and (gx < W),
                                            X[gy, gx], 0.0)
            for i, j in T.Parallel(bh, bw):
                gy = by * bh + i
                gx = bx * bw + j
                if gy < H and gx < W:
                    c = tile[i + 1, j + 1]
                    lap = tile[i, j + 1] + tile[i + 2, j + 1] + tile[i + 1, j] + tile[i + 1, j + 2] - 4.0 * c
                    Y[gy, gx] = c + alpha * lap

    return main
