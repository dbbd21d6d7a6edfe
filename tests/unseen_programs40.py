"""A fortieth set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang), on LLM serving and training utilities.  Sampling: presence / frequency /
repetition penalties from a token-id list (counts by shared-memory atomics), greedy argmax
over a T.dynamic vocab with ties to the lowest index, and across blocks by a 64-bit
T.atomic_max of (ordered float bits, reversed index), min-p then Gumbel-max with a uint32 hash
RNG or with T.rng_init / T.rng_rand_float (Philox), top-p by a bisection on the threshold or by
a chunked T.cumsum over caller-sorted probabilities, a shared bool ban table.  Speculative
decoding: accept lengths by a while loop on a T.alloc_var, a ``break`` out of a T.serial loop
inside a T.Parallel over rows, a reverse T.serial(K - 1, -1, -1), a walk up parent pointers,
atomic tickets for a flat output list.  KV caches: paged fp8 append with a scale per (block,
head), vLLM's [blocks, H, D / x, block_size, x] key layout, global-to-global T.copy of a
token's slab (converting to fp8), per-block amax by T.atomic_max.  Optimizers: Lion over a
multi-tensor offset table, Adam over tables of T.ptr addresses (T.make_tensor), AdamW by
grid-stride loops whose bounds are read from tables; grad-norm clipping in two kernels.
Losses and the rest: embedding backward with bf16 atomics (vector and scalar), label-smoothed
cross-entropy forward and backward, cross-entropy over a T.dynamic vocab through a
T.Pipelined shared chunk, a 5-point stencil through a haloed shared tile, bilinear resize
forward and backward (align_corners both ways), LSTM and GRU cells fused with their gate
GEMMs (one with a T.macro and Python lists of tiles), DeepSeek-style fp8 GEMMs (1x128
activation / 128x128 weight scales, M-major or K-major, staged through shared memory, on two
warpgroups), split-K GEMVs over warps, and layer-norm backward (dgamma / dbeta partials over
dim 0, a second pass, tile atomics, a persistent loop).  Three are eager-jit kernels: a
soft-capped argmax taking its cap as a T.macro argument, Adam through a T.macro with T.Ref
parameters, and a KV append whose T.ptr parameters are bound by T.match_buffer.

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


# ---- Adam over a pointer table (multi-tensor apply) -------------------------------------------------
@tilelang.jit
def adam_pointer_table(G=3, block=512, threads=128, beta1=0.9, beta2=0.999, eps=1e-8, wd=0.0):
    """torch.optim.Adam's update for G tensors of different lengths reached through tables of
    addresses (``T.Tensor([G], T.ptr)``: fp32 params, bf16 grads, fp32 moments) and a length
    table; the bias corrections 1 - beta^step come from T.pow of the int step argument; the
    grid is (chunks of the longest, G) and a chunk past its tensor's end does nothing."""

    @T.prim_func
    def main(Params: T.Tensor([G], T.ptr), Grads: T.Tensor([G], T.ptr),
             ExpAvg: T.Tensor([G], T.ptr), ExpAvgSq: T.Tensor([G], T.ptr),
             Sizes: T.Tensor([G], T.int32), lr: T.float32, step: T.int32, max_size: T.int32):
        with T.Kernel(T.ceildiv(max_size, block), G, threads=threads) as (bx, g):
            n = Sizes[g]
            p = T.make_tensor(Params[g], (n,), T.float32)
            gr = T.make_tensor(Grads[g], (n,), T.bfloat16)
            m = T.make_tensor(ExpAvg[g], (n,), T.float32)
            v = T.make_tensor(ExpAvgSq[g], (n,), T.float32)
            bc1 = 1.0 - T.pow(beta1, T.cast(step, T.float32))
            bc2 = 1.0 - T.pow(beta2, T.cast(step, T.float32))
            step_size = lr / bc1
            for i in T.Parallel(block):
                k = bx * block + i
                if k < n:
                    gk = T.cast(gr[k], T.float32) + wd * p[k]
                    mk = beta1 * m[k] + (1.0 - beta1) * gk
                    vk = beta2 * v[k] + (1.0 - beta2) * gk * gk
                    m[k] = mk
                    v[k] = vk
                    p[k] = p[k] - step_size * mk / (T.sqrt(vk / bc2) + eps)

    return main


# ---- layer-norm backward: dx and per-block dgamma / dbeta partials, then their sum ----------------
@tilelang.jit(out_idx=[5, 6, 7])
def layernorm_bwd_partials_dim0(M=200, N=512, block_M=8, threads=256):
    """dx = rstd * (dy*g - mean(dy*g) - xhat * mean(dy*g*xhat)) per row, with the block's
    dgamma / dbeta contributions (sum over its block_M rows of dy * xhat and dy) reduced over
    dim 0 of (block_M, N) fragments by T.reduce_sum and stored as one row of the partials
    [ceil(M / block_M), N]; rows past M (a ragged last block) are masked."""
    nb = T.ceildiv(M, block_M)

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float16), dY: T.Tensor((M, N), T.float16),
             Gamma: T.Tensor((N,), T.float32), Mean: T.Tensor((M,), T.float32),
             Rstd: T.Tensor((M,), T.float32), dX: T.Tensor((M, N), T.float16),
             dGp: T.Tensor((nb, N), T.float32), dBp: T.Tensor((nb, N), T.float32)):
        with T.Kernel(nb, threads=threads) as bx:
            xh = T.alloc_fragment((block_M, N), T.float32)
            dy = T.alloc_fragment((block_M, N), T.float32)
            wdy = T.alloc_fragment((block_M, N), T.float32)
            t = T.alloc_fragment((block_M, N), T.float32)
            c1 = T.alloc_fragment((block_M,), T.float32)
            c2 = T.alloc_fragment((block_M,), T.float32)
            dg = T.alloc_fragment((N,), T.float32)
            db = T.alloc_fragment((N,), T.float32)
            for i, j in T.Parallel(block_M, N):
                r = bx * block_M + i
                ok = r < M
                xh[i, j] = T.if_then_else(ok, (T.cast(X[r, j], T.float32) - Mean[r]) * Rstd[r], 0.0)
                dy[i, j] = T.if_then_else(ok, T.cast(dY[r, j], T.float32), 0.0)
                wdy[i, j] = dy[i, j] * Gamma[j]
            T.reduce_sum(wdy, c1, dim=1)
            for i, j in T.Parallel(block_M, N):
                t[i, j] = wdy[i, j] * xh[i, j]
            T.reduce_sum(t, c2, dim=1)
            for i, j in T.Parallel(block_M, N):
                r = bx * block_M + i
                if r < M:
                    dX[r, j] = T.cast(Rstd[r] * (wdy[i, j] - c1[i] / N - xh[i, j] * c2[i] / N), T.float16)
            for i, j in T.Parallel(block_M, N):
                t[i, j] = dy[i, j] * xh[i, j]
            T.reduce_sum(t, dg, dim=0)
            T.reduce_sum(dy, db, dim=0)
            T.copy(dg, dGp[bx, :])
            T.copy(db, dBp[bx, :])

    return main


@tilelang.jit(out_idx=[1])
def partials_sum_dim0(P=25, N=512, block_P=8, block_N=128, threads=128):
    """The second pass: out[n] = sum over p of Part[p, n], T.Pipelined over (block_P,
    block_N) shared tiles (the last one ragged, zero-filled by T.copy) with T.reduce_sum over
    dim 0 accumulating across steps (clear=False)."""

    @T.prim_func
    def main(Part: T.Tensor((P, N), T.float32), Out: T.Tensor((N,), T.float32)):
        with T.Kernel(N // block_N, threads=threads) as bx:
            tile = T.alloc_shared((block_P, block_N), T.float32)
            acc = T.alloc_fragment((block_N,), T.float32)
            T.clear(acc)
            for p in T.Pipelined(T.ceildiv(P, block_P), num_stages=2):
                T.copy(Part[p * block_P, bx * block_N], tile)
                T.reduce_sum(tile, acc, dim=0, clear=False)
            T.copy(acc, Out[bx * block_N])

    return main


# ---- GRU cell fused with its two gate GEMMs ---------------------------------------------------------
@tilelang.jit(out_idx=[4])
def gru_cell_fused(Bt=96, I=128, Hd=128, block_M=64, block_N=32, block_K=64, threads=128):
    """PyTorch's GRUCell: gi = x W_ih^T + b_ih, gh = h W_hh^T + b_hh (gate order r, z, n);
    r = sigmoid(gi_r + gh_r), z = sigmoid(gi_z + gh_z), n = tanh(gi_n + r * gh_n),
    h' = (1 - z) n + z h.  The n gate keeps x's and h's products apart, so the block holds
    four accumulators (r, z summed over both GEMMs, n_x, n_h), each a T.gemm per K step of
    two T.Pipelined loops; Bt is ragged against block_M."""

    @T.prim_func
    def main(X: T.Tensor((Bt, I), T.bfloat16), Hp: T.Tensor((Bt, Hd), T.bfloat16),
             Wih: T.Tensor((3 * Hd, I), T.bfloat16), Whh: T.Tensor((3 * Hd, Hd), T.bfloat16),
             Hn: T.Tensor((Bt, Hd), T.bfloat16), Bih: T.Tensor((3 * Hd,), T.float32),
             Bhh: T.Tensor((3 * Hd,), T.float32)):
        with T.Kernel(Hd // block_N, T.ceildiv(Bt, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.bfloat16)
            Wr = T.alloc_shared((block_N, block_K), T.bfloat16)
            Wz = T.alloc_shared((block_N, block_K), T.bfloat16)
            Wn = T.alloc_shared((block_N, block_K), T.bfloat16)
            ar = T.alloc_fragment((block_M, block_N), T.float32)
            az = T.alloc_fragment((block_M, block_N), T.float32)
            anx = T.alloc_fragment((block_M, block_N), T.float32)
            anh = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(ar)
            T.clear(az)
            T.clear(anx)
            T.clear(anh)
            n0 = bx * block_N
            for k in T.Pipelined(I // block_K, num_stages=2):
                T.copy(X[by * block_M, k * block_K], A_s)
                T.copy(Wih[n0, k * block_K], Wr)
                T.copy(Wih[Hd + n0, k * block_K], Wz)
                T.copy(Wih[2 * Hd + n0, k * block_K], Wn)
                T.gemm(A_s, Wr, ar, transpose_B=True)
                T.gemm(A_s, Wz, az, transpose_B=True)
                T.gemm(A_s, Wn, anx, transpose_B=True)
            for k in T.Pipelined(Hd // block_K, num_stages=2):
                T.copy(Hp[by * block_M, k * block_K], A_s)
                T.copy(Whh[n0, k * block_K], Wr)
                T.copy(Whh[Hd + n0, k * block_K], Wz)
                T.copy(Whh[2 * Hd + n0, k * block_K], Wn)
                T.gemm(A_s, Wr, ar, transpose_B=True)
                T.gemm(A_s, Wz, az, transpose_B=True)
                T.gemm(A_s, Wn, anh, transpose_B=True)
            for i, j in T.Parallel(block_M, block_N):
                row = by * block_M + i
                col = n0 + j
                if row < Bt:
                    r = T.sigmoid(ar[i, j] + Bih[col] + Bhh[col])
                    z = T.sigmoid(az[i, j] + Bih[Hd + col] + Bhh[Hd + col])
                    n = T.tanh(anx[i, j] + Bih[2 * Hd + col] + r * (anh[i, j] + Bhh[2 * Hd + col]))
                    Hn[row, col] = T.cast((1.0 - z) * n + z * T.cast(Hp[row, col], T.float32), T.bfloat16)

    return main


# ---- top-p filtering by pivot search (no sort) -------------------------------------------------------
@tilelang.jit(out_idx=[2])
def top_p_pivot_mask(B=4, V=2048, threads=256, iters=24):
    """Top-p (nucleus) filtering without sorting: probabilities of the row (softmax of
    logits / 1) are held in registers; a bisection on a probability threshold t (a T.serial
    loop over T.alloc_var bounds, a T.reduce_sum per step) finds the largest t whose kept
    mass sum(p >= t) is still >= top_p; logits below it become -inf."""

    @T.prim_func
    def main(Logits: T.Tensor((B, V), T.float32), TopP: T.Tensor((B,), T.float32),
             Out: T.Tensor((B, V), T.float32)):
        with T.Kernel(B, threads=threads) as b:
            p = T.alloc_fragment((V,), T.float32)
            kept = T.alloc_fragment((V,), T.float32)
            mx = T.alloc_fragment((1,), T.float32)
            s = T.alloc_fragment((1,), T.float32)
            lo = T.alloc_var(T.float32, init=0.0)
            hi = T.alloc_var(T.float32, init=1.0)
            T.copy(Logits[b, :], p)
            T.reduce_max(p, mx, dim=0)
            for j in T.Parallel(V):
                p[j] = T.exp(p[j] - mx[0])
            T.reduce_sum(p, s, dim=0)
            for j in T.Parallel(V):
                p[j] = p[j] / s[0]
            top_p = TopP[b]
            for _ in T.serial(iters):
                mid = (lo + hi) * 0.5
                for j in T.Parallel(V):
                    kept[j] = T.if_then_else(p[j] >= mid, p[j], 0.0)
                T.reduce_sum(kept, s, dim=0)
                if s[0] >= top_p:
                    lo = mid
                else:
                    hi = mid
            for j in T.Parallel(V):
                Out[b, j] = T.if_then_else(p[j] >= lo, Logits[b, j], -T.infinity(T.float32))

    return main


# ---- KV-cache reshape into vLLM's paged key layout [blocks, H, D / x, block_size, x] --------------
@tilelang.jit
def kv_cache_vllm_layout(T_new=50, H=4, D=128, num_blocks=8, block_size=16, x=8, threads=128):
    """vLLM's reshape_and_cache: keys go to Kc[blk, h, d // x, off, x] (x elements of 16
    bytes together), values to Vc[blk, h, d, off]; the slot mapping gives blk and off,
    negative slots are skipped.  One block per token, a T.Parallel over (H, D)."""

    @T.prim_func
    def main(K: T.Tensor((T_new, H, D), T.float16), V: T.Tensor((T_new, H, D), T.float16),
             Kc: T.Tensor((num_blocks, H, D // x, block_size, x), T.float16),
             Vc: T.Tensor((num_blocks, H, D, block_size), T.float16),
             Slot: T.Tensor((T_new,), T.int64)):
        with T.Kernel(T_new, threads=threads) as t:
            slot = Slot[t]
            if slot >= 0:
                blk = slot // block_size
                off = slot % block_size
                for h, d in T.Parallel(H, D):
                    Kc[blk, h, d // x, off, d % x] = K[t, h, d]
                    Vc[blk, h, d, off] = V[t, h, d]

    return main


# ---- DeepSeek-style fp8 GEMM with the activation scales staged through shared memory -------------
@tilelang.jit(out_idx=[4])
def fp8_gemm_scales_shared(N=256, K=512, block_M=128, block_N=128, threads=256):
    """As fp8_gemm_deepseek_scales, but each K block's activation scales (a block_M slice of
    Sa[kb, :], ragged at the T.dynamic M) are T.copy'd into a shared vector beside the
    operand tiles in the pipelined loop and read from there in the promotion; the weight
    scale is one scalar per (N block, K block); float32 output."""
    M = T.dynamic("M")
    bk = 128

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float8_e4m3), B: T.Tensor((N, K), T.float8_e4m3),
             Sa: T.Tensor((K // bk, M), T.float32), Sb: T.Tensor((N // bk, K // bk), T.float32),
             C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // block_N, T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, bk), T.float8_e4m3)
            B_s = T.alloc_shared((block_N, bk), T.float8_e4m3)
            sa_s = T.alloc_shared((block_M,), T.float32)
            part = T.alloc_fragment((block_M, block_N), T.float32)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(acc)
            for kb in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * block_M, kb * bk], A_s)
                T.copy(B[bx * block_N, kb * bk], B_s)
                T.copy(Sa[kb, by * block_M], sa_s)
                T.gemm(A_s, B_s, part, transpose_B=True, clear_accum=True)
                sb = Sb[bx, kb]
                for i, j in T.Parallel(block_M, block_N):
                    acc[i, j] += part[i, j] * sa_s[i] * sb
            T.copy(acc, C[by * block_M, bx * block_N])

    return main


# ---- speculative decoding: one block for the batch, a T.Parallel over rows with a break ----------
@tilelang.jit(out_idx=[3])
def spec_accept_parallel_break(B=48, K=4, threads=64):
    """Probabilistic verification (the uniform draw given): draft token j of row b is accepted
    while u[b, j] <= p_target / p_draft of it; the first rejection ends the row (a ``break``
    out of a T.serial loop inside a T.Parallel over rows), Acc[b] = accepted count; draft
    probabilities of 0 never reject (the ratio reads as +inf)."""

    @T.prim_func
    def main(Pt: T.Tensor((B, K), T.float32), Pd: T.Tensor((B, K), T.float32),
             U: T.Tensor((B, K), T.float32), Acc: T.Tensor((B,), T.int32)):
        with T.Kernel(1, threads=threads) as _:
            for b in T.Parallel(B):
                n = T.alloc_var(T.int32, init=0)
                for j in T.serial(K):
                    ratio = T.if_then_else(Pd[b, j] > 0.0, Pt[b, j] / Pd[b, j], T.infinity(T.float32))
                    if U[b, j] > ratio:
                        break
                    n += 1
                Acc[b] = n

    return main


# ---- GEMV: a warp-shaped fragment of partials, reduced over lanes then over warps ------------------
@tilelang.jit(out_idx=[2])
def gemv_warp_fragment(N=300, K=2048, threads=128):
    """y[n] = sum_k W[n, k] x[k], one output a block: the (4, 32) fragment part[w, l] holds
    lane l of warp w's strided sum over its quarter of K (a T.serial loop inside a T.Parallel
    over the fragment); T.reduce_sum over dim 1 gives each warp's total, T.reduce_sum over
    dim 0 of those the output."""
    warps = threads // 32
    kq = K // warps

    @T.prim_func
    def main(W: T.Tensor((N, K), T.float16), x: T.Tensor((K,), T.float16),
             y: T.Tensor((N,), T.float16)):
        with T.Kernel(N, threads=threads) as n:
            part = T.alloc_fragment((warps, 32), T.float32)
            per_warp = T.alloc_fragment((warps,), T.float32)
            tot = T.alloc_fragment((1,), T.float32)
            for w, l in T.Parallel(warps, 32):
                part[w, l] = 0.0
                for k in T.serial(kq // 32):
                    kk = w * kq + k * 32 + l
                    part[w, l] += T.cast(W[n, kk], T.float32) * T.cast(x[kk], T.float32)
            T.reduce_sum(part, per_warp, dim=1)
            T.reduce_sum(per_warp, tot, dim=0)
            y[n] = T.cast(tot[0], T.float16)

    return main


# ---- embedding backward: scalar bf16 atomics of float32 values ------------------------------------
@tilelang.jit
def embedding_bwd_scalar_bf16(T_tok=200, V=500, D=96, threads=96, scale=0.5):
    """dW[ids[t], d] += scale * dY[t, d] with dW bf16 and the added value computed in float32
    (T.atomic_add converts it to dW's dtype); ids are int64."""

    @T.prim_func
    def main(Ids: T.Tensor((T_tok,), T.int64), dY: T.Tensor((T_tok, D), T.float32),
             dW: T.Tensor((V, D), T.bfloat16)):
        with T.Kernel(T_tok, threads=threads) as t:
            idx = Ids[t]
            for d in T.Parallel(D):
                T.atomic_add(dW[idx, d], dY[t, d] * scale)

    return main


# ---- per-block fp8 KV quantization: amax by atomic_max, then the scale and the cast ---------------
@tilelang.jit
def kv_block_amax_scales(T_new=64, H=4, D=128, num_blocks=8, block_size=16, threads=128):
    """Kernel 1 of a per-(block, head) fp8 scaling: each token's |k| max over D (T.reduce_absmax
    of a fragment) goes into Amax[blk, h] by T.atomic_max (Amax zeroed by the caller), the
    token's block taken from its slot."""

    @T.prim_func
    def main(K: T.Tensor((T_new, H, D), T.bfloat16), Slot: T.Tensor((T_new,), T.int32),
             Amax: T.Tensor((num_blocks, H), T.float32)):
        with T.Kernel(T_new, H, threads=threads) as (t, h):
            k = T.alloc_fragment((D,), T.float32)
            a = T.alloc_fragment((1,), T.float32)
            slot = Slot[t]
            for d in T.Parallel(D):
                k[d] = T.cast(K[t, h, d], T.float32)
            T.reduce_absmax(k, a, dim=0)
            if slot >= 0 and T.get_thread_binding() == 0:
                T.atomic_max(Amax[slot // block_size, h], a[0])

    return main


# ---- Adam by grid-stride loops whose bounds come from a length table -------------------------------
@tilelang.jit
def adamw_grid_stride(G=4, blocks=8, threads=128, beta1=0.9, beta2=0.95, eps=1e-8):
    """AdamW over G segments of one flat buffer: segment g spans [Off[g], Off[g] + Len[g]) and
    has its own weight decay; each block walks it by a grid-stride loop (T.serial(start, stop,
    step) with start and stop read from the tables), bias corrections from scalar arguments."""
    N = T.dynamic("N")

    @T.prim_func
    def main(P: T.Tensor((N,), T.float32), Gr: T.Tensor((N,), T.float32),
             M: T.Tensor((N,), T.float32), Vv: T.Tensor((N,), T.float32),
             Off: T.Tensor((G,), T.int32), Len: T.Tensor((G,), T.int32),
             Wd: T.Tensor((G,), T.float32), lr: T.float32, bc1: T.float32, bc2: T.float32):
        with T.Kernel(blocks, G, threads=threads) as (bx, g):
            tx = T.get_thread_binding()
            lo = Off[g]
            hi = lo + Len[g]
            wd = Wd[g]
            for k in T.serial(lo + bx * threads + tx, hi, blocks * threads):
                p = P[k] * (1.0 - lr * wd)
                m = beta1 * M[k] + (1.0 - beta1) * Gr[k]
                v = beta2 * Vv[k] + (1.0 - beta2) * Gr[k] * Gr[k]
                M[k] = m
                Vv[k] = v
                P[k] = p - lr * (m / bc1) / (T.sqrt(v / bc2) + eps)

    return main


# ---- paged KV append by tile copies (global to global, converting) ---------------------------------
@tilelang.jit
def paged_kv_copy_tiles(T_new=40, H=8, D=64, num_blocks=10, block_size=8, threads=128):
    """Keys and values of the new tokens copied to a paged cache [blocks, block_size, H, D]
    by T.copy of a token's (H, D) slab straight from global to global at the slot's
    (block, offset); the key cache is float16 like the input, the value cache float8_e4m3 (the
    copy converts).  Negative slots are skipped."""

    @T.prim_func
    def main(K: T.Tensor((T_new, H, D), T.float16), V: T.Tensor((T_new, H, D), T.float16),
             Slot: T.Tensor((T_new,), T.int32),
             Kc: T.Tensor((num_blocks, block_size, H, D), T.float16),
             Vc: T.Tensor((num_blocks, block_size, H, D), T.float8_e4m3)):
        with T.Kernel(T_new, threads=threads) as t:
            slot = Slot[t]
            if slot >= 0:
                T.copy(K[t, :, :], Kc[slot // block_size, slot % block_size, :, :])
                T.copy(V[t, :, :], Vc[slot // block_size, slot % block_size, :, :])

    return main


# ---- layer-norm backward: dgamma / dbeta added as tiles by T.atomic_add ------------------------------
@tilelang.jit
def ln_bwd_weight_grads_atomic(M=300, N=256, block_M=16, threads=128):
    """dgamma[n] += sum over the block's rows of dy * xhat, dbeta[n] += sum of dy: (block_M, N)
    fragments reduced over dim 0 and added into the float32 outputs by a whole-buffer
    T.atomic_add (rows past M read as 0)."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.bfloat16), dY: T.Tensor((M, N), T.bfloat16),
             Mean: T.Tensor((M,), T.float32), Rstd: T.Tensor((M,), T.float32),
             dG: T.Tensor((N,), T.float32), dB: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_shared((block_M, N), T.bfloat16)
            g = T.alloc_shared((block_M, N), T.bfloat16)
            t = T.alloc_fragment((block_M, N), T.float32)
            dyf = T.alloc_fragment((block_M, N), T.float32)
            dg = T.alloc_fragment((N,), T.float32)
            db = T.alloc_fragment((N,), T.float32)
            T.copy(X[bx * block_M, 0], x)
            T.copy(dY[bx * block_M, 0], g)
            for i, j in T.Parallel(block_M, N):
                r = T.min(bx * block_M + i, M - 1)
                dyf[i, j] = T.cast(g[i, j], T.float32)
                t[i, j] = dyf[i, j] * (T.cast(x[i, j], T.float32) - Mean[r]) * Rstd[r]
            T.reduce_sum(t, dg, dim=0)
            T.reduce_sum(dyf, db, dim=0)
            T.atomic_add(dG, dg)
            T.atomic_add(dB, db)

    return main


# ---- cross-entropy over a T.dynamic vocab, chunks through shared memory ------------------------------
@tilelang.jit(out_idx=[2])
def ce_dynamic_vocab_pipelined(R=16, chunk=2048, threads=256, ignore_index=-1):
    """loss[r] = logsumexp(x[r, :]) - x[r, y[r]] (0 where y[r] == ignore_index) with V =
    T.dynamic: a T.Pipelined loop T.copy's slices ``X[r, c * chunk:(c + 1) * chunk]`` (ragged at
    V, zero-filled) into shared memory, an online max / sum runs in registers."""
    V = T.dynamic("V")

    @T.prim_func
    def main(X: T.Tensor((R, V), T.float16), Y: T.Tensor((R,), T.int32),
             Loss: T.Tensor((R,), T.float32)):
        with T.Kernel(R, threads=threads) as r:
            xs = T.alloc_shared((chunk,), T.float16)
            x = T.alloc_fragment((chunk,), T.float32)
            cm = T.alloc_fragment((1,), T.float32)
            cs = T.alloc_fragment((1,), T.float32)
            m = T.alloc_var(T.float32, init=-T.infinity(T.float32))
            s = T.alloc_var(T.float32, init=0.0)
            for c in T.Pipelined(T.ceildiv(V, chunk), num_stages=3):
                T.copy(X[r, c * chunk:(c + 1) * chunk], xs)
                for j in T.Parallel(chunk):
                    x[j] = T.if_then_else(c * chunk + j < V, T.cast(xs[j], T.float32),
                                          -T.infinity(T.float32))
                T.reduce_max(x, cm, dim=0)
                m_new = T.max(m, cm[0])
                for j in T.Parallel(chunk):
                    x[j] = T.exp2((x[j] - m_new) * 1.4426950408889634)
                T.reduce_sum(x, cs, dim=0)
                s = s * T.exp2((m - m_new) * 1.4426950408889634) + cs[0]
                m = m_new
            y = Y[r]
            if y == ignore_index:
                Loss[r] = 0.0
            else:
                Loss[r] = m + T.log(s) - T.cast(X[r, y], T.float32)

    return main


# ---- no-repeat penalty with a shared bool table -----------------------------------------------------
@tilelang.jit
def banned_tokens_bool_table(B=3, V=2000, L=40, threads=128):
    """Tokens listed in Ban[b, :] (-1 = none) get logit -inf: a shared bool table of the vocab
    is cleared, marked through the list, and read back over the row."""

    @T.prim_func
    def main(Logits: T.Tensor((B, V), T.float16), Ban: T.Tensor((B, L), T.int32)):
        with T.Kernel(B, threads=threads) as b:
            seen = T.alloc_shared((V,), T.bool)
            for v in T.Parallel(V):
                seen[v] = False
            for t in T.Parallel(L):
                if Ban[b, t] >= 0:
                    seen[Ban[b, t]] = True
            for v in T.Parallel(V):
                if seen[v]:
                    Logits[b, v] = -T.infinity(T.float16)

    return main


# ---- argmax across blocks by a 64-bit atomic max of (ordered value bits, reversed index) ----------
@tilelang.jit
def argmax_u64_atomic(B=4, V=50000, chunk=4096, threads=256):
    """Greedy argmax split over blocks: each block finds its chunk's (max, first index) and
    publishes key = (ordered bits of the float max) << 32 | (2^32 - 1 - index) into Key[b]
    (uint64, zeroed by the caller) by T.atomic_max, so the larger value wins and a tie goes to
    the lower index; the float's bits are made ordered by flipping all bits of a negative
    value and the sign bit of a positive one (T.reinterpret to uint32)."""

    @T.prim_func
    def main(Logits: T.Tensor((B, V), T.float32), Key: T.Tensor((B,), T.uint64)):
        with T.Kernel(T.ceildiv(V, chunk), B, threads=threads) as (bx, b):
            x = T.alloc_fragment((chunk,), T.float32)
            ix = T.alloc_fragment((chunk,), T.int32)
            cm = T.alloc_fragment((1,), T.float32)
            ci = T.alloc_fragment((1,), T.int32)
            for j in T.Parallel(chunk):
                col = bx * chunk + j
                x[j] = T.if_then_else(col < V, Logits[b, col], -T.infinity(T.float32))
            T.reduce_max(x, cm, dim=0)
            for j in T.Parallel(chunk):
                ix[j] = T.if_then_else(x[j] == cm[0], bx * chunk + j, V)
            T.reduce_min(ix, ci, dim=0)
            if T.get_thread_binding() == 0:
                bits = T.reinterpret(cm[0], T.uint32)
                ordered = T.if_then_else(bits >= T.uint32(0x80000000), ~bits, bits | T.uint32(0x80000000))
                key = (T.cast(ordered, T.uint64) << T.uint64(32)) | T.cast(T.uint32(0xFFFFFFFF) - T.cast(ci[0], T.uint32), T.uint64)
                T.atomic_max(Key[b], key)

    return main


# ---- speculative tree verification: walk a node's parents ----------------------------------------------
@tilelang.jit(out_idx=[2])
def spec_tree_path_length(B=8, Nn=16, threads=32):
    """For a draft token tree (Parent[b, i] = parent node, -1 at the root; node i accepted
    where Ok[b, i] != 0), a node is usable if it and every ancestor is accepted; Depth[b, i] =
    the number of its accepted ancestors-and-self, or -1 where the chain breaks -- a while
    loop on a T.alloc_var chasing Parent pointers, one thread a node."""

    @T.prim_func
    def main(Parent: T.Tensor((B, Nn), T.int32), Ok: T.Tensor((B, Nn), T.int8),
             Depth: T.Tensor((B, Nn), T.int32)):
        with T.Kernel(B, threads=threads) as b:
            for i in T.Parallel(Nn):
                node = T.alloc_var(T.int32, init=i)
                d = T.alloc_var(T.int32, init=0)
                while node >= 0:
                    if Ok[b, node] != 0:
                        d += 1
                        node = Parent[b, node]
                    else:
                        d = -1
                        node = -1
                Depth[b, i] = d

    return main


# ---- layer-norm backward weight grads: a persistent loop over rows, partials in registers ----------
@tilelang.jit(out_idx=[4, 5])
def ln_bwd_persistent_partials(M=1000, N=256, blocks=16, rows=4, threads=128):
    """Each of `blocks` blocks walks row groups bx, bx + blocks, ... (T.serial with a step) of
    `rows` rows, adding dy * xhat and dy into (N,) fragments by T.reduce_sum over dim 0 with
    clear=False; the block's partials go to row bx of [blocks, N] outputs at the end."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), dY: T.Tensor((M, N), T.float32),
             Mean: T.Tensor((M,), T.float32), Rstd: T.Tensor((M,), T.float32),
             dGp: T.Tensor((blocks, N), T.float32), dBp: T.Tensor((blocks, N), T.float32)):
        with T.Kernel(blocks, threads=threads) as bx:
            t = T.alloc_fragment((rows, N), T.float32)
            dy = T.alloc_fragment((rows, N), T.float32)
            dg = T.alloc_fragment((N,), T.float32)
            db = T.alloc_fragment((N,), T.float32)
            T.clear(dg)
            T.clear(db)
            for g in T.serial(bx, T.ceildiv(M, rows), blocks):
                for i, j in T.Parallel(rows, N):
                    r = g * rows + i
                    dy[i, j] = T.if_then_else(r < M, dY[r, j], 0.0)
                    t[i, j] = T.if_then_else(r < M, dy[i, j] * (X[r, j] - Mean[r]) * Rstd[r], 0.0)
                T.reduce_sum(t, dg, dim=0, clear=False)
                T.reduce_sum(dy, db, dim=0, clear=False)
            T.copy(dg, dGp[bx, :])
            T.copy(db, dBp[bx, :])

    return main


# ---- Gumbel-max sampling with TileLang's Philox generator -----------------------------------------------
@tilelang.jit(out_idx=[1])
def gumbel_sample_philox(B=4, V=3000, threads=128, seed=1234):
    """token = argmax(logits + Gumbel noise) with the noise drawn in the kernel: each thread
    starts Philox at subsequence (row, thread) by T.rng_init and draws one uniform per
    element it owns with T.rng_rand_float(), in a T.serial loop with a step over the row."""

    @T.prim_func
    def main(Logits: T.Tensor((B, V), T.float32), Tok: T.Tensor((B,), T.int32)):
        with T.Kernel(B, threads=threads) as b:
            tx = T.get_thread_binding()
            best = T.alloc_var(T.float32, init=-T.infinity(T.float32))
            best_i = T.alloc_var(T.int32, init=V)
            vals = T.alloc_shared((threads,), T.float32)
            idxs = T.alloc_shared((threads,), T.int32)
            T.rng_init(seed, b * threads + tx, 0)
            for j in T.serial(tx, V, threads):
                u = T.rng_rand_float()
                g = Logits[b, j] - T.log(-T.log(u))
                if g > best:
                    best = g
                    best_i = j
            vals[tx] = best
            idxs[tx] = best_i
            T.sync_threads()
            if tx == 0:
                bv = T.alloc_var(T.float32, init=-T.infinity(T.float32))
                bi = T.alloc_var(T.int32, init=V)
                for t in T.serial(threads):
                    if vals[t] > bv or (vals[t] == bv and idxs[t] < bi):
                        bv = vals[t]
                        bi = idxs[t]
                Tok[b] = bi

    return main


# ---- LSTM cell with its loads in a T.macro and the gates as Python lists of buffers ---------------
@tilelang.jit(out_idx=[4, 5])
def lstm_cell_macro_gates(Bt=64, I=128, Hd=128, block_M=64, block_N=32, block_K=64, threads=128):
    """The LSTM cell over one concatenated weight Wc [4H, I + H] and input [x, h] (two
    tensors): a T.macro loads a K step's A tile (from x or h by the step) and the four gate
    tiles, which the program keeps in Python lists and walks with enumerate / zip (unrolled as
    Python loops); the
    bias slab is T.copy'd into a shared tile and read in the epilogue."""
    kx = I // block_K
    kt = (I + Hd) // block_K

    @T.macro
    def load_step(X, Hp, Wc, A_s, W_tiles, by, n0, k):
        if k < kx:
            T.copy(X[by * block_M, k * block_K], A_s)
        else:
            T.copy(Hp[by * block_M, (k - kx) * block_K], A_s)
        for q, W_t in enumerate(W_tiles):
            T.copy(Wc[q * Hd + n0, k * block_K], W_t)

    @T.prim_func
    def main(X: T.Tensor((Bt, I), T.bfloat16), Hp: T.Tensor((Bt, Hd), T.bfloat16),
             Wc: T.Tensor((4 * Hd, I + Hd), T.bfloat16), Cp: T.Tensor((Bt, Hd), T.float32),
             Hn: T.Tensor((Bt, Hd), T.bfloat16), Cn: T.Tensor((Bt, Hd), T.float32),
             bias: T.Tensor((4, Hd), T.float32)):
        with T.Kernel(Hd // block_N, T.ceildiv(Bt, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.bfloat16)
            W_tiles = [T.alloc_shared((block_N, block_K), T.bfloat16) for _ in range(4)]
            accs = [T.alloc_fragment((block_M, block_N), T.float32) for _ in range(4)]
            b_s = T.alloc_shared((4, block_N), T.float32)
            n0 = bx * block_N
            T.copy(bias[0:4, n0:n0 + block_N], b_s)
            for acc in accs:
                T.clear(acc)
            for k in T.Pipelined(kt, num_stages=2):
                load_step(X, Hp, Wc, A_s, W_tiles, by, n0, k)
                for W_t, acc in zip(W_tiles, accs):
                    T.gemm(A_s, W_t, acc, transpose_B=True)
            for i, j in T.Parallel(block_M, block_N):
                r = by * block_M + i
                ig = T.sigmoid(accs[0][i, j] + b_s[0, j])
                fg = T.sigmoid(accs[1][i, j] + b_s[1, j])
                gg = T.tanh(accs[2][i, j] + b_s[2, j])
                og = T.sigmoid(accs[3][i, j] + b_s[3, j])
                c = fg * Cp[r, n0 + j] + ig * gg
                Cn[r, n0 + j] = c
                Hn[r, n0 + j] = T.cast(og * T.tanh(c), T.bfloat16)

    return main


# ---- bilinear resize backward: scatter by atomics ---------------------------------------------------
@tilelang.jit
def resize_bilinear_bwd(N=2, C=2, H=20, W=24, OH=33, OW=47, align_corners=False, block=128):
    """The gradient of bilinear resizing (torch's half-pixel source coordinates, clamped at 0,
    or align_corners): each output gradient is split among its four source pixels by
    T.atomic_add into dX (float32, zeroed by the caller); four taps can fall on one pixel at
    the border, the atomics add them all."""
    total = N * C * OH * OW
    sh = (H - 1) / (OH - 1) if align_corners else H / OH
    sw = (W - 1) / (OW - 1) if align_corners else W / OW

    @T.prim_func
    def main(dY: T.Tensor((N, C, OH, OW), T.float32), dX: T.Tensor((N, C, H, W), T.float32)):
        with T.Kernel(T.ceildiv(total, block), threads=block) as bx:
            for i in T.Parallel(block):
                f = bx * block + i
                if f < total:
                    ox = f % OW
                    oy = f // OW % OH
                    c = f // (OW * OH) % C
                    n = f // (OW * OH * C)
                    fy = T.cast(oy, T.float32) * sh if align_corners else \
                        T.max((T.cast(oy, T.float32) + 0.5) * sh - 0.5, 0.0)
                    fx = T.cast(ox, T.float32) * sw if align_corners else \
                        T.max((T.cast(ox, T.float32) + 0.5) * sw - 0.5, 0.0)
                    y0 = T.min(T.cast(fy, T.int32), H - 1)
                    x0 = T.min(T.cast(fx, T.int32), W - 1)
                    y1 = T.min(y0 + 1, H - 1)
                    x1 = T.min(x0 + 1, W - 1)
                    wy = fy - y0
                    wx = fx - x0
                    g = dY[n, c, oy, ox]
                    T.atomic_add(dX[n, c, y0, x0], g * (1.0 - wy) * (1.0 - wx))
                    T.atomic_add(dX[n, c, y0, x1], g * (1.0 - wy) * wx)
                    T.atomic_add(dX[n, c, y1, x0], g * wy * (1.0 - wx))
                    T.atomic_add(dX[n, c, y1, x1], g * wy * wx)

    return main


# ---- DeepSeek-style fp8 GEMM on two warpgroups, a 64-row tile (FullRow) --------------------------
@tilelang.jit(out_idx=[4])
def fp8_gemm_two_wg_fullrow(M=192, N=384, K=768, block_M=64, block_N=256, threads=256):
    """The 1x128 / 128x128-scaled fp8 GEMM with a (64, 256) tile on two warpgroups split along
    N (GemmWarpPolicy.FullRow: a 64-row tile cannot be split along M), N ragged against the
    tile (384 = 1.5 tiles), the weight scale indexed by the column's own 128-block (two per
    tile) in the promotion, bf16 out."""
    bk = 128

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float8_e4m3), B: T.Tensor((N, K), T.float8_e4m3),
             Sa: T.Tensor((M, K // bk), T.float32), Sb: T.Tensor((N // bk, K // bk), T.float32),
             C: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(T.ceildiv(N, block_N), M // block_M, threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, bk), T.float8_e4m3)
            B_s = T.alloc_shared((block_N, bk), T.float8_e4m3)
            part = T.alloc_fragment((block_M, block_N), T.float32)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(acc)
            for kb in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * block_M, kb * bk], A_s)
                T.copy(B[bx * block_N, kb * bk], B_s)
                T.gemm(A_s, B_s, part, transpose_B=True, clear_accum=True,
                       policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_M, block_N):
                    col = T.min(bx * block_N + j, N - 1)
                    acc[i, j] += part[i, j] * Sa[by * block_M + i, kb] * Sb[col // bk, kb]
            T.copy(acc, C[by * block_M, bx * block_N])

    return main


# ---- top-p over probabilities sorted by the caller: a chunked cumsum with a carry --------------
@tilelang.jit
def top_p_sorted_cumsum(B=4, V=3000, chunk=1024, threads=128):
    """vLLM-style top-p after a sort: Ps[b, :] holds the row's probabilities in descending order
    and Ids[b, :] their token ids; a token is dropped where the mass before it (the inclusive
    cumsum minus itself) already exceeds top_p (the first token always stays).  T.cumsum runs
    over a shared chunk (ragged at V) and a T.alloc_var carries the sum across chunks; the
    dropped tokens' logits are set to -inf through the id list."""
    n_chunks = T.ceildiv(V, chunk)

    @T.prim_func
    def main(Ps: T.Tensor((B, V), T.float32), Ids: T.Tensor((B, V), T.int32),
             TopP: T.Tensor((B,), T.float32), Logits: T.Tensor((B, V), T.float32)):
        with T.Kernel(B, threads=threads) as b:
            cs = T.alloc_shared((chunk,), T.float32)
            carry = T.alloc_var(T.float32, init=0.0)
            top_p = TopP[b]
            for c in T.serial(n_chunks):
                T.copy(Ps[b, c * chunk], cs)
                T.cumsum(cs, dim=0)
                for j in T.Parallel(chunk):
                    col = c * chunk + j
                    if col < V and col > 0:
                        before = carry + cs[j] - Ps[b, col]
                        if before > top_p:
                            Logits[b, Ids[b, col]] = -T.infinity(T.float32)
                carry += cs[chunk - 1]
                T.sync_threads()

    return main


# ---- small serving forms together: chained bounds, a reverse serial loop, int64 vars, tickets ------
@tilelang.jit(out_idx=[2])
def spec_last_accept_reverse(B=40, K=6, threads=64):
    """Per row: the last draft position whose token was accepted (a reverse T.serial(K - 1,
    -1, -1) loop with a break, -1 if none), and the row's emitted tokens appended to one flat
    output list at a position taken by an atomic ticket (T.atomic_add(..., return_prev=True)
    on Count[0], zeroed by the caller), the bounds written as a chained comparison and the
    running count held in an int64 T.alloc_var."""

    @T.prim_func
    def main(Ok: T.Tensor((B, K), T.int32), Tok: T.Tensor((B, K), T.int64),
             Last: T.Tensor((B,), T.int32), Count: T.Tensor((1,), T.int32),
             Flat: T.Tensor((B * K,), T.int64), Where: T.Tensor((B,), T.int32)):
        with T.Kernel(T.ceildiv(B, threads), threads=threads) as bx:
            for t in T.Parallel(threads):
                r = bx * threads + t
                if 0 <= r < B:
                    last = T.alloc_var(T.int32, init=-1)
                    for j in T.serial(K - 1, -1, -1):
                        if Ok[r, j] != 0:
                            last = j
                            break
                    Last[r] = last
                    n = T.alloc_var(T.int64, init=0)
                    for j in T.serial(K):
                        n += T.if_then_else(Ok[r, j] != 0, 1, 0)
                    base = T.atomic_add(Count[0], T.cast(n, T.int32), return_prev=True)
                    Where[r] = base
                    w = T.alloc_var(T.int32, init=0)
                    for j in T.serial(K):
                        if Ok[r, j] != 0:
                            Flat[base + w] = Tok[r, j]
                            w += 1

    return main


# ---- eager-style serving kernels (TileLang's eager jit: annotations in the body, T.empty) ---------
@T.macro
def softcap30(x):
    return 30.0 * T.tanh(x / 30.0)


@tilelang.jit
def eager_capped_argmax(logits, cap, chunk: int = 1024):
    """Greedy decoding over soft-capped logits (Gemma-style), written for the eager jit: the
    batch is T.dynamic and the vocab T.const, the cap a T.macro passed as an argument, the
    token ids returned from T.empty; ties go to the lowest index."""
    B = T.dynamic("B")
    V = T.const("V")
    logits: T.Tensor[[B, V], T.float32]
    tok = T.empty((B,), T.int32)
    with T.Kernel(B, threads=256) as b:
        x = T.alloc_fragment((chunk,), T.float32)
        ix = T.alloc_fragment((chunk,), T.int32)
        cm = T.alloc_fragment((1,), T.float32)
        ci = T.alloc_fragment((1,), T.int32)
        best = T.alloc_var(T.float32, init=-T.infinity(T.float32))
        best_i = T.alloc_var(T.int32, init=0)
        for c in T.serial(T.ceildiv(V, chunk)):
            for j in T.Parallel(chunk):
                x[j] = T.if_then_else(c * chunk + j < V, cap(logits[b, c * chunk + j]),
                                      -T.infinity(T.float32))
            T.reduce_max(x, cm, dim=0)
            for j in T.Parallel(chunk):
                ix[j] = T.if_then_else(x[j] == cm[0], c * chunk + j, V)
            T.reduce_min(ix, ci, dim=0)
            if cm[0] > best:
                best = cm[0]
                best_i = ci[0]
        tok[b] = best_i
    return tok


@T.macro
def ema_(m: T.Ref, g, beta):
    m = beta * m + (1.0 - beta) * g


@tilelang.jit
def eager_adam_ref_macro(p, g, m, v, lr: T.float32 = 1e-3, step: T.int32 = 1, block: int = 1024):
    """Adam in place for the eager jit: N = T.dynamic, both moments moved by a T.macro taking
    a T.Ref to the buffer element, lr and step scalar annotations with defaults; returns
    nothing (the kernel writes its arguments)."""
    N = T.dynamic("N")
    p: T.Tensor[[N], T.float32]
    g: T.Tensor[[N], T.float32]
    m: T.Tensor[[N], T.float32]
    v: T.Tensor[[N], T.float32]
    with T.Kernel(T.ceildiv(N, block), threads=256) as bx:
        for i in T.Parallel(block):
            k = bx * block + i
            if k < N:
                gk = g[k]
                ema_(m[k], gk, 0.9)
                ema_(v[k], gk * gk, 0.999)
                bc1 = 1.0 - T.pow(0.9, T.cast(step, T.float32))
                bc2 = 1.0 - T.pow(0.999, T.cast(step, T.float32))
                p[k] = p[k] - lr / bc1 * m[k] / (T.sqrt(v[k] / bc2) + 1e-8)


@tilelang.jit
def eager_kv_append_match_buffer(k_new: T.ptr, cache: T.ptr, slots, T_new: int, num_slots: int,
                                 H: int = 8, D: int = 64):
    """KV append for the eager jit with T.ptr parameters bound by T.match_buffer to shapes
    given as Python ints ([T, H, D] new keys, a flat [slots, H, D] cache), the slot mapping an
    int64 tensor annotated in the body; negative slots skipped."""
    k_new = T.match_buffer(k_new, [T_new, H, D], T.bfloat16)
    cache = T.match_buffer(cache, [num_slots, H, D], T.bfloat16)
    slots: T.Tensor[[T_new], T.int64]
    with T.Kernel(T_new, threads=128) as t:
        s = slots[t]
        if s >= 0:
            for h, d in T.Parallel(H, D):
                cache[s, h, d] = k_new[t, h, d]
