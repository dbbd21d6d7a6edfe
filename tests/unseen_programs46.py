"""A forty-sixth set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang): training kernels -- backward passes, reductions across blocks and a counter-based
RNG. RMSNorm backward from a saved rstd (dx per row, dgamma as per-block partial rows in a
workspace, reduced over blocks by a second kernel with T.reduce_sum(dim=0, clear=False)); an
erf-GELU backward fused with the bias gradient (T.reduce_sum over dim 0 of the tile, then
float32 T.atomic_add per column); dropout forward / backward with a Philox-2x32 hash on uint32
(64-bit products for mulhi, key bumps that wrap around, the uniform from T.reinterpret of the
mantissa bits) recomputed in the backward from the same seed and offset; a fused Adam step
(AMSGrad, AMP gradient unscale, bias corrections passed as T.float32 arguments) over a flat
T.dynamic-length buffer; dW = X^T @ dY with T.gemm(transpose_A=True), split-K over the tokens
and a tile T.atomic_add of the fragment (or, on Hopper, of a shared tile by a TMA reduce-add,
use_tma=True); cross-entropy backward from a saved log-sum-exp with label smoothing and
ignore_index (int64 labels); weight-norm backward with a whole row per fragment; dropout by
T.rng_init / T.rng_rand with the mask packed 32 bits to a uint32 word, and its backward from the
packed mask; LayerNorm backward with dgamma / dbeta added by atomics of the block's column sums;
and a global gradient norm in one launch, the last block to bump a counter (T.atomic_add
return_prev, acq_rel) reducing every block's partial; and GroupNorm backward channels-last,
its (tokens, groups, channels) fragments read back as (tokens, channels) rows.

The file reads as TileLang after swapping its two import lines (``import tilelang`` /
``import tilelang.language as T``); ``tests/test_unseen_programs46.py`` builds each to a cubin
on the CPU, checks what decides the result in the generated source, and on a GPU compares it
with torch."""

import tilecute as tilelang
import tilecute.language as T


# ---- RMSNorm backward: dx per row, dgamma partials reduced by a second kernel ----------------
@tilelang.jit(out_idx=[4, 5])
def rmsnorm_bwd_dx_partials(M=100, N=512, block_M=8, threads=128):
    """y = x * rstd * gamma.  dx = rstd * (dy * gamma) - x * rstd^3 * sum(dy * gamma * x) / N,
    and each block's rows add dy * x * rstd over dim 0 into its own row of DgPart; rows past M
    (the last block is ragged) add nothing."""
    G = T.ceildiv(M, block_M)

    @T.prim_func
    def main(X: T.Tensor((M, N), T.bfloat16), DY: T.Tensor((M, N), T.bfloat16),
             Gamma: T.Tensor((N,), T.float32), Rstd: T.Tensor((M,), T.float32),
             DX: T.Tensor((M, N), T.bfloat16), DgPart: T.Tensor((G, N), T.float32)):
        with T.Kernel(G, threads=threads) as bx:
            x = T.alloc_fragment((block_M, N), T.float32)
            dy = T.alloc_fragment((block_M, N), T.float32)
            prod = T.alloc_fragment((block_M, N), T.float32)
            dot = T.alloc_fragment((block_M,), T.float32)
            dg = T.alloc_fragment((N,), T.float32)
            T.copy(X[bx * block_M, 0], x)
            T.copy(DY[bx * block_M, 0], dy)
            for i, j in T.Parallel(block_M, N):
                prod[i, j] = dy[i, j] * Gamma[j] * x[i, j]
            T.reduce_sum(prod, dot, dim=1)
            for i, j in T.Parallel(block_M, N):
                r = bx * block_M + i
                rs = T.if_then_else(r < M, Rstd[r], 0.0)
                prod[i, j] = dy[i, j] * x[i, j] * rs
                x[i, j] = rs * dy[i, j] * Gamma[j] - x[i, j] * rs * rs * rs * dot[i] / N
            T.reduce_sum(prod, dg, dim=0)
            T.copy(x, DX[bx * block_M, 0])
            T.copy(dg, DgPart[bx, 0])

    return main


@tilelang.jit(out_idx=[1])
def rmsnorm_dgamma_reduce(G=13, N=512, block_G=4, block_N=128, threads=128):
    """dgamma[n] = sum over g of DgPart[g, n]: chunks of block_G partial rows, accumulated by
    T.reduce_sum(dim=0, clear=False); G = 13 leaves a ragged last chunk."""

    @T.prim_func
    def main(DgPart: T.Tensor((G, N), T.float32), Dg: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), threads=threads) as bx:
            part = T.alloc_shared((block_G, block_N), T.float32)
            acc = T.alloc_fragment((block_N,), T.float32)
            T.clear(acc)
            for k in T.serial(T.ceildiv(G, block_G)):
                T.copy(DgPart[k * block_G, bx * block_N], part)
                T.reduce_sum(part, acc, dim=0, clear=False)
            T.copy(acc, Dg[bx * block_N])

    return main


# ---- GELU (erf) backward with the bias gradient by column atomics ---------------------------
@tilelang.jit(out_idx=[2])
def gelu_erf_bwd_bias_grad(M=300, N=256, block_M=64, block_N=64, threads=128):
    """h = x W + b was the pre-activation; dh = dy * (Phi(h) + h phi(h)) with Phi by T.erf.
    db[n] += sum over the tile's rows of dh (T.reduce_sum dim 0, then T.atomic_add per column);
    rows past M count zero (DB is zeroed by the caller)."""

    @T.prim_func
    def main(H: T.Tensor((M, N), T.float16), DY: T.Tensor((M, N), T.float16),
             DH: T.Tensor((M, N), T.float16), DB: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            h = T.alloc_fragment((block_M, block_N), T.float32)
            g = T.alloc_fragment((block_M, block_N), T.float32)
            col = T.alloc_fragment((block_N,), T.float32)
            T.copy(H[by * block_M, bx * block_N], h)
            T.copy(DY[by * block_M, bx * block_N], g)
            for i, j in T.Parallel(block_M, block_N):
                cdf = 0.5 * (1.0 + T.erf(h[i, j] * 0.7071067811865476))
                pdf = T.exp(-0.5 * h[i, j] * h[i, j]) * 0.3989422804014327
                g[i, j] = T.if_then_else(by * block_M + i < M, g[i, j] * (cdf + h[i, j] * pdf), 0.0)
            T.reduce_sum(g, col, dim=0)
            T.copy(g, DH[by * block_M, bx * block_N])
            for j in T.Parallel(block_N):
                T.atomic_add(DB[bx * block_N + j], col[j])

    return main


# ---- dropout with a Philox-2x32 counter hash ------------------------------------------------
@T.macro
def _philox_uniform(c0, c1, k0):
    """Seven Philox-2x32 rounds on the counter (c0, c1) under key k0 in T.alloc_var state: lo /
    hi of a 64-bit product, key bumped by the Weyl constant (uint32 wraparound); returns u in
    [0, 1) from the top 23 bits of the first word, by reinterpreting 0x3F800000 | bits as a
    float32 in [1, 2)."""
    ctr0 = T.alloc_var(T.uint32)
    ctr1 = T.alloc_var(T.uint32)
    key = T.alloc_var(T.uint32)
    ctr0 = c0
    ctr1 = c1
    key = k0
    for _r in T.unroll(7):
        prod = T.Cast("uint64", ctr0) * T.uint64(0xD256D193)
        hi = T.Cast("uint32", prod >> T.uint64(32))
        lo = T.Cast("uint32", prod)
        ctr0 = hi ^ key ^ ctr1
        ctr1 = lo
        key = key + T.uint32(0x9E3779B9)
    return T.reinterpret((ctr0 >> T.uint32(9)) | T.uint32(0x3F800000), T.float32) - 1.0


@tilelang.jit(out_idx=[3, 4])
def dropout_philox_fwd(M=100, N=192, p=0.25, block=256, threads=128):
    """y = x * keep / (1 - p), keep = u >= p with u from (element index, offset) under seed;
    the keep mask is also written (uint8) for a check."""
    total = M * N
    scale = 1.0 / (1.0 - p)

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float16), seed: T.uint32, offset: T.uint32,
             Y: T.Tensor((M, N), T.float16), Keep: T.Tensor((M, N), T.uint8)):
        with T.Kernel(T.ceildiv(total, block), threads=threads) as bx:
            for t in T.serial(T.ceildiv(block, threads)):
                tx = T.get_thread_binding()
                e = bx * block + t * threads + tx
                if e < total:
                    u = _philox_uniform(T.Cast("uint32", e), offset, seed)
                    keep = u >= p
                    Y[e // N, e % N] = T.if_then_else(keep, X[e // N, e % N] * T.float16(scale), T.float16(0))
                    Keep[e // N, e % N] = T.Cast("uint8", keep)

    return main


@tilelang.jit(out_idx=[3])
def dropout_philox_bwd(M=100, N=192, p=0.25, block=256, threads=128):
    """dx = dy * keep / (1 - p), the keep mask recomputed from the same seed and offset."""
    total = M * N
    scale = 1.0 / (1.0 - p)

    @T.prim_func
    def main(DY: T.Tensor((M, N), T.float16), seed: T.uint32, offset: T.uint32,
             DX: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(total, block), threads=threads) as bx:
            for t in T.serial(T.ceildiv(block, threads)):
                tx = T.get_thread_binding()
                e = bx * block + t * threads + tx
                if e < total:
                    u = _philox_uniform(T.Cast("uint32", e), offset, seed)
                    DX[e // N, e % N] = T.if_then_else(u >= p, DY[e // N, e % N] * T.float16(scale),
                                                       T.float16(0))

    return main


# ---- fused Adam (AMSGrad, AMP unscale) over a dynamic flat buffer --------------------------
@tilelang.jit(out_idx=[])
def adam_amsgrad_unscale(block=1024, threads=256):
    """g = G * inv_scale (the AMP loss scale undone); m, v updated; vmax = max(vmax, v);
    p -= lr * (m / bc1) / (sqrt(vmax / bc2) + eps), with the bias corrections bc1 = 1 - beta1^t,
    bc2 = 1 - beta2^t computed by the caller and passed as float32 arguments."""
    N = T.dynamic("N")

    @T.prim_func
    def main(P: T.Tensor((N,), T.float32), G: T.Tensor((N,), T.float16), Mom: T.Tensor((N,), T.float32),
             Var: T.Tensor((N,), T.float32), Vmax: T.Tensor((N,), T.float32), lr: T.float32,
             beta1: T.float32, beta2: T.float32, eps: T.float32, bc1: T.float32, bc2: T.float32,
             inv_scale: T.float32):
        with T.Kernel(T.ceildiv(N, block), threads=threads) as bx:
            for i in T.Parallel(block):
                k = bx * block + i
                if k < N:
                    g = T.Cast(T.float32, G[k]) * inv_scale
                    m = beta1 * Mom[k] + (1.0 - beta1) * g
                    v = beta2 * Var[k] + (1.0 - beta2) * g * g
                    vm = T.max(Vmax[k], v)
                    Mom[k] = m
                    Var[k] = v
                    Vmax[k] = vm
                    P[k] = P[k] - lr * (m / bc1) / (T.sqrt(vm / bc2) + eps)

    return main


# ---- dW = X^T dY, split-K over the tokens --------------------------------------------------
@tilelang.jit(out_idx=[])
def gemm_dw_transpose_a_splitk(Ntok=500, K=128, N=192, block_K=64, block_N=64, block_T=32, split=4,
                               threads=128, tma_reduce=False):
    """dW[K, N] += X[t, K]^T dY[t, N] over the tokens of this split (T.gemm with transpose_A on
    the (block_T, block_K) tile of X); each split adds its fragment into dW (float32, zeroed by
    the caller) by one tile T.atomic_add -- or, with tma_reduce (Hopper), stages it in shared
    memory and adds the tile by T.atomic_add(use_tma=True), a bulk reduce-add.  500 tokens: the
    last tile of a split is ragged."""
    per_split = T.ceildiv(Ntok, split)

    @T.prim_func
    def main(X: T.Tensor((Ntok, K), T.float16), DY: T.Tensor((Ntok, N), T.float16),
             DW: T.Tensor((K, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(K, block_K), split, threads=threads) as (bx, by, bz):
            xs = T.alloc_shared((block_T, block_K), T.float16)
            ds = T.alloc_shared((block_T, block_N), T.float16)
            acc = T.alloc_fragment((block_K, block_N), T.float32)
            acc_s = T.alloc_shared((block_K, block_N), T.float32)
            T.clear(acc)
            for t in T.Pipelined(T.ceildiv(per_split, block_T), num_stages=2):
                t0 = bz * per_split + t * block_T
                for i, j in T.Parallel(block_T, block_K):
                    ok = (t * block_T + i < per_split) and (t0 + i < Ntok)
                    xs[i, j] = T.if_then_else(ok, X[t0 + i, by * block_K + j], T.float16(0))
                for i, j in T.Parallel(block_T, block_N):
                    ok = (t * block_T + i < per_split) and (t0 + i < Ntok)
                    ds[i, j] = T.if_then_else(ok, DY[t0 + i, bx * block_N + j], T.float16(0))
                T.gemm(xs, ds, acc, transpose_A=True)
            if tma_reduce:
                T.copy(acc, acc_s)
                T.atomic_add(DW[by * block_K, bx * block_N], acc_s, use_tma=True)
            else:
                T.atomic_add(DW[by * block_K, bx * block_N], acc)

    return main


# ---- cross-entropy backward from the saved log-sum-exp -------------------------------------
@tilelang.jit(out_idx=[4])
def ce_bwd_saved_lse(M=127, V=1000, block_M=4, block_V=256, smoothing=0.1, ignore_index=-100,
                     threads=128):
    """dlogits[i, j] = dloss[i] * (exp(x[i, j] - lse[i]) - (1 - s) [j == label[i]] - s / V),
    and zero for a row whose label is ignore_index; chunks of block_V columns (V = 1000 ragged)."""
    off = smoothing / V

    @T.prim_func
    def main(Logits: T.Tensor((M, V), T.bfloat16), Lse: T.Tensor((M,), T.float32),
             Labels: T.Tensor((M,), T.int64), DLoss: T.Tensor((M,), T.float32),
             DLogits: T.Tensor((M, V), T.bfloat16)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, block_V), T.float32)
            for c in T.serial(T.ceildiv(V, block_V)):
                T.copy(Logits[bx * block_M, c * block_V], x)
                for i, j in T.Parallel(block_M, block_V):
                    r = bx * block_M + i
                    col = c * block_V + j
                    lab = Labels[r]
                    hit = T.if_then_else(T.Cast(T.int64, col) == lab, 1.0 - smoothing, 0.0)
                    grad = (T.exp(x[i, j] - Lse[r]) - hit - off) * DLoss[r]
                    x[i, j] = T.if_then_else(lab == ignore_index, 0.0, grad)
                T.copy(x, DLogits[bx * block_M, c * block_V])

    return main


# ---- weight-norm backward, a whole row per fragment ----------------------------------------
@tilelang.jit(out_idx=[3, 4])
def weight_norm_bwd(O=96, I=384, block_O=4, threads=128):
    """w = g v / ||v|| per output row.  With s = sum(dw v): dg = s / ||v||,
    dv = (g / ||v||) (dw - s v / ||v||^2).  The row (I = 384, three elements per thread) is one
    fragment; 300 wide is refused here as TileLang's layout inference refuses it."""

    @T.prim_func
    def main(DWt: T.Tensor((O, I), T.float32), Vt: T.Tensor((O, I), T.float32), Gt: T.Tensor((O,), T.float32),
             DG: T.Tensor((O,), T.float32), DV: T.Tensor((O, I), T.float32)):
        with T.Kernel(T.ceildiv(O, block_O), threads=threads) as bx:
            dw = T.alloc_fragment((block_O, I), T.float32)
            v = T.alloc_fragment((block_O, I), T.float32)
            sq = T.alloc_fragment((block_O, I), T.float32)
            ss = T.alloc_fragment((block_O,), T.float32)
            dot = T.alloc_fragment((block_O,), T.float32)
            T.copy(DWt[bx * block_O, 0], dw)
            T.copy(Vt[bx * block_O, 0], v)
            for i, j in T.Parallel(block_O, I):
                sq[i, j] = v[i, j] * v[i, j]
            T.reduce_sum(sq, ss, dim=1)
            for i, j in T.Parallel(block_O, I):
                sq[i, j] = dw[i, j] * v[i, j]
            T.reduce_sum(sq, dot, dim=1)
            for i in T.Parallel(block_O):
                DG[bx * block_O + i] = dot[i] * T.rsqrt(ss[i])
            for i, j in T.Parallel(block_O, I):
                dw[i, j] = Gt[bx * block_O + i] * T.rsqrt(ss[i]) * (dw[i, j] - dot[i] * v[i, j] / ss[i])
            T.copy(dw, DV[bx * block_O, 0])

    return main


# ---- dropout by curand draws, the mask packed 32 to a uint32 word ---------------------------
@tilelang.jit(out_idx=[3, 4])
def dropout_curand_packed_mask(M=63, N=1000, p=0.1, threads=128):
    """Each thread owns 32 consecutive elements of the flat tensor (one mask word): its
    Philox4x32-10 state from T.rng_init(seed, seq=the word's index, off=offset), one
    T.rng_rand() per element kept when the draw is >= p * 2^32; the kept bits are or-ed into the
    word (bit b for element 32 w + b).  63 x 1000 elements are not whole words: the last word
    covers the 24 of the tail (its other bits stay 0)."""
    total = M * N
    words = T.ceildiv(total, 32)
    thresh = int(p * 4294967296.0)
    scale = 1.0 / (1.0 - p)

    @T.prim_func
    def main(X: T.Tensor((total,), T.bfloat16), seed: T.int64, offset: T.int64,
             Y: T.Tensor((total,), T.bfloat16), Mask: T.Tensor((words,), T.uint32)):
        with T.Kernel(T.ceildiv(words, threads), threads=threads) as bx:
            tx = T.get_thread_binding()
            w = bx * threads + tx
            bits = T.alloc_var(T.uint32)
            bits = T.uint32(0)
            T.rng_init(seed, T.Cast(T.int64, w), offset)
            if w < words:
                for b in T.serial(32):
                    e = w * 32 + b
                    if e < total:
                        keep = T.rng_rand() >= T.uint32(thresh)
                        bits = bits | (T.Cast(T.uint32, keep) << T.Cast(T.uint32, b))
                        Y[e] = T.if_then_else(keep, T.Cast(T.bfloat16, T.Cast(T.float32, X[e]) * scale),
                                              T.bfloat16(0))
                Mask[w] = bits

    return main


@tilelang.jit(out_idx=[2])
def dropout_packed_mask_bwd(M=63, N=1000, p=0.1, block=256, threads=256):
    """dx = dy * bit / (1 - p), the bit of element e read from word e // 32 of the packed mask."""
    total = M * N
    words = T.ceildiv(total, 32)
    scale = 1.0 / (1.0 - p)

    @T.prim_func
    def main(DY: T.Tensor((total,), T.bfloat16), Mask: T.Tensor((words,), T.uint32),
             DX: T.Tensor((total,), T.bfloat16)):
        with T.Kernel(T.ceildiv(total, block), threads=threads) as bx:
            for i in T.Parallel(block):
                e = bx * block + i
                if e < total:
                    bit = (Mask[e // 32] >> T.Cast(T.uint32, e % 32)) & T.uint32(1)
                    DX[e] = T.Cast(T.bfloat16, T.Cast(T.float32, DY[e]) * T.Cast(T.float32, bit) * scale)

    return main


# ---- LayerNorm backward: dgamma / dbeta by tile atomics of the block's column sums ----------
@tilelang.jit(out_idx=[5])
def layernorm_bwd_atomic_dgamma_dbeta(M=200, N=256, block_M=16, threads=128):
    """xhat = (x - mean) rstd from the saved statistics; dx = rstd (dy g - mean(dy g) - xhat
    mean(dy g xhat)); the block's column sums of dy xhat and dy are added into DGamma / DBeta
    (float32, zeroed by the caller) by one T.atomic_add of a (N,) fragment each; rows past M
    are masked to zero."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float16), DY: T.Tensor((M, N), T.float16), Gamma: T.Tensor((N,), T.float32),
             Mean: T.Tensor((M,), T.float32), Rstd: T.Tensor((M,), T.float32), DX: T.Tensor((M, N), T.float16),
             DGamma: T.Tensor((N,), T.float32), DBeta: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            xh = T.alloc_fragment((block_M, N), T.float32)
            dy = T.alloc_fragment((block_M, N), T.float32)
            t = T.alloc_fragment((block_M, N), T.float32)
            s1 = T.alloc_fragment((block_M,), T.float32)
            s2 = T.alloc_fragment((block_M,), T.float32)
            dg = T.alloc_fragment((N,), T.float32)
            db = T.alloc_fragment((N,), T.float32)
            T.copy(X[bx * block_M, 0], xh)
            T.copy(DY[bx * block_M, 0], dy)
            for i, j in T.Parallel(block_M, N):
                r = bx * block_M + i
                ok = r < M
                xh[i, j] = T.if_then_else(ok, (xh[i, j] - Mean[r]) * Rstd[r], 0.0)
                t[i, j] = dy[i, j] * Gamma[j]
            T.reduce_sum(t, s1, dim=1)
            for i, j in T.Parallel(block_M, N):
                t[i, j] = t[i, j] * xh[i, j]
            T.reduce_sum(t, s2, dim=1)
            for i, j in T.Parallel(block_M, N):
                t[i, j] = dy[i, j] * xh[i, j]
            T.reduce_sum(t, dg, dim=0)
            T.reduce_sum(dy, db, dim=0)
            T.atomic_add(DGamma, dg)
            T.atomic_add(DBeta, db)
            for i, j in T.Parallel(block_M, N):
                r = bx * block_M + i
                rs = T.if_then_else(r < M, Rstd[r], 0.0)
                dy[i, j] = rs * (dy[i, j] * Gamma[j] - s1[i] / N - xh[i, j] * s2[i] / N)
            T.copy(dy, DX[bx * block_M, 0])

    return main


# ---- global gradient norm in one launch: the last block to finish reduces the partials ---------
@tilelang.jit(out_idx=[1, 2])
def grad_norm_last_block(Ntot=8000, block=256, max_norm=1.0, threads=128):
    """Each block writes its partial sum of squares, then thread 0 bumps a counter
    (T.atomic_add, return_prev, acq_rel); the block that sees ceildiv(Ntot, block) - 1 is the
    last: it reduces every partial, writes the norm and the clip coefficient
    min(1, max_norm / (norm + 1e-6)), and resets the counter for the next launch."""
    NB = T.ceildiv(Ntot, block)

    @T.prim_func
    def main(G: T.Tensor((Ntot,), T.float32), Part: T.Tensor((NB,), T.float32), Out: T.Tensor((2,), T.float32),
             Counter: T.Tensor((1,), T.int32)):
        with T.Kernel(NB, threads=threads) as bx:
            g = T.alloc_fragment((block,), T.float32)
            s = T.alloc_fragment((1,), T.float32)
            parts = T.alloc_fragment((NB,), T.float32)
            tot = T.alloc_fragment((1,), T.float32)
            last = T.alloc_shared((1,), T.int32)
            T.copy(G[bx * block], g)
            for i in T.Parallel(block):
                g[i] = g[i] * g[i]
            T.reduce_sum(g, s, dim=0)
            tx = T.get_thread_binding()
            if tx == 0:
                Part[bx] = s[0]
                last[0] = T.atomic_add(Counter[0], 1, memory_order="acq_rel", return_prev=True)
            T.sync_threads()
            if last[0] == NB - 1:
                T.copy(Part, parts)
                T.reduce_sum(parts, tot, dim=0)
                if tx == 0:
                    norm = T.sqrt(tot[0])
                    Out[0] = norm
                    Out[1] = T.min(1.0, max_norm / (norm + 1e-6))
                    Counter[0] = 0

    return main


# ---- GroupNorm backward, channels last: sums over (tokens, channels of a group) -------------
@tilelang.jit(out_idx=[5, 6, 7])
def groupnorm_bwd_channels_last(B=2, HW=100, G=8, Cg=16, block_T=16, threads=128):
    """x[b, t, g * Cg + c] normalised per (b, g) with the saved Mean / Rstd (B, G).  One block
    per image: a first pass over the tokens in chunks sums dy gamma and dy gamma xhat per group
    (a (block_T, G, Cg) fragment reduced over its last dim, then over the tokens with
    clear=False) and dy xhat, dy per channel (dgamma / dbeta partials per image, reduced over
    dim 0 with clear=False); a second pass writes dx = rstd (dy gamma - s1 / n - xhat s2 / n),
    n = HW Cg.  HW = 100 leaves a ragged last chunk."""
    C = G * Cg
    n = HW * Cg

    @T.prim_func
    def main(X: T.Tensor((B, HW, C), T.float32), DY: T.Tensor((B, HW, C), T.float32),
             Gamma: T.Tensor((C,), T.float32), Mean: T.Tensor((B, G), T.float32), Rstd: T.Tensor((B, G), T.float32),
             DX: T.Tensor((B, HW, C), T.float32), DGammaPart: T.Tensor((B, C), T.float32),
             DBetaPart: T.Tensor((B, C), T.float32)):
        with T.Kernel(B, threads=threads) as b:
            x = T.alloc_fragment((block_T, G, Cg), T.float32)
            dy = T.alloc_fragment((block_T, G, Cg), T.float32)
            t = T.alloc_fragment((block_T, G, Cg), T.float32)
            part = T.alloc_fragment((block_T, G), T.float32)
            s1 = T.alloc_fragment((G,), T.float32)
            s2 = T.alloc_fragment((G,), T.float32)
            xc = T.alloc_fragment((block_T, C), T.float32)
            dyc = T.alloc_fragment((block_T, C), T.float32)
            dg = T.alloc_fragment((C,), T.float32)
            db = T.alloc_fragment((C,), T.float32)
            T.clear(s1)
            T.clear(s2)
            T.clear(dg)
            T.clear(db)
            for k in T.serial(T.ceildiv(HW, block_T)):
                for i, g, c in T.Parallel(block_T, G, Cg):
                    tok = k * block_T + i
                    ok = tok < HW
                    x[i, g, c] = T.if_then_else(ok, (X[b, tok, g * Cg + c] - Mean[b, g]) * Rstd[b, g], 0.0)
                    dy[i, g, c] = T.if_then_else(ok, DY[b, tok, g * Cg + c], 0.0)
                    t[i, g, c] = dy[i, g, c] * Gamma[g * Cg + c]
                T.reduce_sum(t, part, dim=2)
                T.reduce_sum(part, s1, dim=0, clear=False)
                for i, g, c in T.Parallel(block_T, G, Cg):
                    t[i, g, c] = t[i, g, c] * x[i, g, c]
                T.reduce_sum(t, part, dim=2)
                T.reduce_sum(part, s2, dim=0, clear=False)
                for i, j in T.Parallel(block_T, C):
                    xc[i, j] = x[i, j // Cg, j % Cg] * dy[i, j // Cg, j % Cg]
                    dyc[i, j] = dy[i, j // Cg, j % Cg]
                T.reduce_sum(xc, dg, dim=0, clear=False)
                T.reduce_sum(dyc, db, dim=0, clear=False)
            T.copy(dg, DGammaPart[b, 0])
            T.copy(db, DBetaPart[b, 0])
            for k in T.serial(T.ceildiv(HW, block_T)):
                for i, g, c in T.Parallel(block_T, G, Cg):
                    tok = k * block_T + i
                    if tok < HW:
                        xh = (X[b, tok, g * Cg + c] - Mean[b, g]) * Rstd[b, g]
                        DX[b, tok, g * Cg + c] = Rstd[b, g] * (DY[b, tok, g * Cg + c] * Gamma[g * Cg + c]
                                                               - s1[g] / n - xh * s2[g] / n)

    return main
