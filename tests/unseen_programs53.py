"""A fifty-third set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang), in the forms of TileLang's newest examples: the mHC pre block's fused tail (eager
@jit with T.dynamic tokens and annotations in the body, 96 threads split by
``if T.get_thread_binding() < 32`` into a warp that runs Sinkhorn normalisation on a (4, 4)
fragment -- T.reduce_sum along dim 1 and dim 0 -- and the rest that mixes the hc residual
streams under T.Pipelined with tiles allocated inside the loop); mHC's GEMM + sum of squares
in tfloat32 (a bfloat16 fragment copied to a tfloat32 fragment as the GEMM's A operand); the
mHC post mix (a (hc, hc) fragment copied from a 3-d tensor by its start, read transposed in
a serial loop inside T.Parallel); a Sinkhorn backward on (tile, n, n) fragments (eager with
T.const n, T.reduce_sum along dim=-1 and dim=-2 into shared tiles inside a @T.macro); a
fast Walsh-Hadamard transform (butterflies in registers, T.tvm_warp_shuffle in a @T.macro,
a shared-memory transpose between warps with T.vectorized copies); a block-causal attention
forward (diffusion-LM blocks smaller than the tile: the diagonal tile's mask written into the
score fragment before the GEMM accumulates on it, the number of key tiles a T.if_then_else)
and its block-diffusion form over packed sequences (cu_seqlens, a scalar max_seqlen argument
sizing the grid, the body under ``if bx < tiles``, each step's key / value tile copied from
the noisy or the clean half by an if / else inside T.Pipelined, masks from nested
T.if_then_else);
and an fp8 block mean pooling (eager with T.const, T.empty outputs, nested T.parallel,
T.reduce_sum(dim=0, clear=False) over a partial tail, T.reduce_absmax into a (1,) fragment).

``tests/test_unseen_programs53.py`` builds each to a cubin on the CPU, checks what decides
the result in the generated source, and on a GPU compares it with torch.  The file reads as
TileLang after swapping its two import lines."""

import math

import tilecute as tilelang
import tilecute.language as T

LOG2E = 1.4426950408889634


# ---- mHC pre: Sinkhorn on one warp, stream mixing on the others ----------------------------------
@tilelang.jit
def mhc_pre_sinkhorn(partial_mix, partial_sq, hc_base, residual, post_mix, comb_mix, layer_input,
                     hidden: int = 512, hc: int = 4, n_splits: int = 4, repeat: int = 3,
                     eps: float = 1e-6, sk_eps: float = 1e-4, post_mult: float = 2.0):
    """Per token: rms = rsqrt(sum of split squares / (hc * hidden) + eps); mixes = rms times
    the sum of split GEMM partials.  Warp 0: post_mix = sigmoid(mixes[hc:2hc] + base) *
    post_mult and comb = Sinkhorn(softmax rows of mixes[2hc:] + base); the other warps:
    layer_input = sum_h sigmoid(mixes[h] + base[h]) * residual[:, h, :]."""
    tokens = T.dynamic("tokens")
    hc3 = hc * (2 + hc)
    hblk = math.gcd(256, hidden)

    partial_mix: T.Tensor[[n_splits, tokens, hc3], T.float32]
    partial_sq: T.Tensor[[n_splits, tokens], T.float32]
    hc_base: T.Tensor[[hc3], T.float32]
    residual: T.Tensor[[tokens, hc, hidden], T.bfloat16]
    post_mix: T.Tensor[[tokens, hc], T.float32]
    comb_mix: T.Tensor[[tokens, hc * hc], T.float32]
    layer_input: T.Tensor[[tokens, hidden], T.bfloat16]

    with T.Kernel(tokens, threads=96) as t:
        rms = T.alloc_fragment(1, T.float32)
        mixes = T.alloc_fragment(hc3, T.float32)
        T.clear(mixes)
        rms[0] = 0
        for s in T.serial(n_splits):
            rms[0] += partial_sq[s, t]
        rms[0] = T.rsqrt(rms[0] / (hc * hidden) + eps)
        for j in T.Parallel(hc3):
            for s in T.serial(n_splits):
                mixes[j] += partial_mix[s, t, j]
            mixes[j] *= rms[0]
        mixes_s = T.alloc_shared(hc3, T.float32)
        T.copy(mixes, mixes_s)

        if T.get_thread_binding() < 32:
            cm = T.alloc_fragment((hc, hc), T.float32)
            rsum = T.alloc_fragment(hc, T.float32)
            csum = T.alloc_fragment(hc, T.float32)
            rmax = T.alloc_fragment(hc, T.float32)
            for j in T.Parallel(hc):
                post_mix[t, j] = T.sigmoid(mixes_s[hc + j] + hc_base[hc + j]) * post_mult
            for j, k in T.Parallel(hc, hc):
                cm[j, k] = mixes_s[2 * hc + j * hc + k] + hc_base[2 * hc + j * hc + k]
            T.reduce_max(cm, rmax, dim=1)
            for j, k in T.Parallel(hc, hc):
                cm[j, k] = T.exp(cm[j, k] - rmax[j])
            T.reduce_sum(cm, rsum, dim=1)
            for j, k in T.Parallel(hc, hc):
                cm[j, k] = cm[j, k] / rsum[j] + sk_eps
            for _ in T.serial(repeat):
                T.reduce_sum(cm, csum, dim=0)
                for j, k in T.Parallel(hc, hc):
                    cm[j, k] = cm[j, k] / (csum[k] + sk_eps)
                T.reduce_sum(cm, rsum, dim=1)
                for j, k in T.Parallel(hc, hc):
                    cm[j, k] = cm[j, k] / (rsum[j] + sk_eps)
            for j, k in T.Parallel(hc, hc):
                comb_mix[t, j * hc + k] = cm[j, k]
        else:
            pre_s = T.alloc_shared(hc, T.float32)
            for j in T.Parallel(hc):
                pre_s[j] = T.sigmoid(mixes_s[j] + hc_base[j])
            for hb in T.Pipelined(hidden // hblk, num_stages=2):
                xs = T.alloc_shared((hc, hblk), T.float32)  # bfloat16 -> float32 in the copy
                xl = T.alloc_fragment((hc, hblk), T.float32)
                T.copy(residual[t, 0, hb * hblk], xs)
                T.copy(xs, xl)
                ol = T.alloc_fragment(hblk, T.float32)
                T.clear(ol)
                for h in T.serial(hc):
                    w = pre_s[h]
                    for c in T.Parallel(hblk):
                        ol[c] += w * xl[h, c]
                T.copy(ol, layer_input[t, hb * hblk])


# ---- mHC pre: the mixing GEMM in tfloat32 with each row's sum of squares ----------------------------
@tilelang.jit
def mhc_gemm_sqrsum_tf32(x, fn, out, sqrsum, hc3: int = 24, width: int = 1024,
                         block_T: int = 64, block_H: int = 128):
    """out = x @ fn^T (x read as bfloat16, converted to tfloat32 in registers; fn stored as
    tfloat32 and padded to 32 rows in shared memory), sqrsum = each row's sum of x^2 kept as
    4 partial columns and reduced at the end."""
    tokens = T.dynamic("tokens")
    x: T.Tensor((tokens, width), T.bfloat16)
    fn: T.Tensor((hc3, width), T.float32)
    out: T.Tensor((tokens, hc3), T.float32)
    sqrsum: T.Tensor((tokens,), T.float32)

    with T.Kernel(T.ceildiv(tokens, block_T)) as bt:
        acc = T.alloc_fragment((block_T, 32), T.float32)
        part = T.alloc_fragment((block_T, 4), T.float32)
        T.clear(acc)
        T.clear(part)
        for kb in T.Pipelined(width // block_H, num_stages=2):
            xs = T.alloc_shared((block_T, block_H), T.bfloat16)
            fs = T.alloc_shared((32, block_H), T.tfloat32)
            T.copy(x[bt * block_T, kb * block_H], xs)
            T.copy(fn[0, kb * block_H], fs)
            x16 = T.alloc_fragment((block_T, block_H), T.bfloat16)
            T.copy(xs, x16)
            x32 = T.alloc_fragment((block_T, block_H), T.tfloat32)
            T.copy(x16, x32)
            for q in T.serial(block_H // 4):
                for i, j in T.Parallel(block_T, 4):
                    part[i, j] += x32[i, q * 4 + j] * x32[i, q * 4 + j]
            T.gemm(x32, fs, acc, transpose_B=True)
        sq = T.alloc_fragment(block_T, T.float32)
        T.reduce_sum(part, sq, dim=1)
        for i in T.Parallel(block_T):
            if bt * block_T + i < tokens:
                sqrsum[bt * block_T + i] = sq[i]
        for i, j in T.Parallel(block_T, hc3):
            if bt * block_T + i < tokens:
                out[bt * block_T + i, j] = acc[i, j]


# ---- fast Walsh-Hadamard transform: registers, warp shuffles, a shared transpose ---------------------
@T.macro
def _xor_butterflies(vals, other, elems, width, rounds):
    """`rounds` butterfly stages across lanes: stage r pairs lane l with l ^ (1 << r); the lane
    whose bit r is 0 keeps a + b, its partner b' - a' (= a - b from the lower lane's view)."""
    tx = T.get_thread_binding(0)
    for r in T.serial(rounds):
        low = ((tx >> r) & 1) == 0
        for e in T.serial(elems):
            other[e] = T.tvm_warp_shuffle(0xFFFFFFFF, vals[e], (tx ^ (1 << r)) % width, width, width)
            vals[e] = T.if_then_else(low, vals[e] + other[e], other[e] - vals[e])


@tilelang.jit(out_idx=[1])
def hadamard_shfl(rows=64, n=1024, threads=128, scale=1.0):
    """B = (A @ H_n) * scale, H_n the Sylvester Hadamard matrix (H[a, b] = (-1)^popcount(a & b)).
    Thread tx holds elements tx * E .. tx * E + E - 1 (E = n / threads): the low log2(E) bits by
    butterflies in registers, the next five by shuffles in the warp, the warp bits by a
    transpose through shared memory, shuffles again, and the transpose back."""
    E = n // threads
    warps = threads // 32
    r_thread = int(math.log2(E))
    r_warp = int(math.log2(warps))

    @T.prim_func
    def main(A: T.Tensor((rows, n), T.float32), B: T.Tensor((rows, n), T.float32)):
        with T.Kernel(rows, threads=threads) as bx:
            vals = T.alloc_local((E,), T.float32)
            other = T.alloc_local((E,), T.float32)
            xch = T.alloc_shared((threads, E), T.float32)
            tx = T.get_thread_binding(0)
            for i in T.vectorized(E):
                vals[i] = A[bx, tx * E + i]
            for r in T.serial(r_thread):
                half = 1 << r
                for c in T.serial(E // (2 * half)):
                    for k in T.serial(half):
                        a = c * 2 * half + k
                        vals[a] = vals[a] + vals[a + half]
                        vals[a + half] = vals[a] - 2 * vals[a + half]
            _xor_butterflies(vals, other, E, 32, 5)
            if r_warp > 0:
                peer = (tx % warps) * 32 + tx // warps
                for i in T.vectorized(E):
                    xch[tx, i] = vals[i]
                for i in T.vectorized(E):
                    vals[i] = xch[peer, i]
                _xor_butterflies(vals, other, E, 32, r_warp)
                for i in T.vectorized(E):
                    xch[peer, i] = vals[i]
                for i in T.vectorized(E):
                    vals[i] = xch[tx, i]
            for i in T.vectorized(E):
                B[bx, tx * E + i] = vals[i] * scale

    return main


# ---- block-causal attention (diffusion-LM blocks inside a tile) --------------------------------------
@T.macro
def _online_softmax_pv(s, p, m, m_prev, sc, ssum, l, acc, Vs, scale, block, dim):
    """One key tile of the online softmax: m takes the tile's row maxima (on top of what the
    caller left in it), the scores become exp2 of their distance to m, the running sum l and
    the output acc are rescaled by exp2(m_prev - m), and acc += P @ V."""
    T.reduce_max(s, m, dim=1, clear=False)
    for i in T.Parallel(block):
        sc[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
    for i, j in T.Parallel(block, block):
        s[i, j] = T.exp2(s[i, j] * scale - m[i] * scale)
    T.reduce_sum(s, ssum, dim=1)
    for i in T.Parallel(block):
        l[i] = l[i] * sc[i] + ssum[i]
    for i, j in T.Parallel(block, dim):
        acc[i, j] *= sc[i]
    T.copy(s, p)
    T.gemm(p, Vs, acc, policy=T.GemmWarpPolicy.FullRow)


def _allowed(i, j, blk, diag):
    """Inside the diagonal tile, query row i sees key column j when j's block is not after
    i's; every earlier tile is seen whole."""
    return T.if_then_else(diag, T.if_then_else(i // blk >= j // blk, 1, 0), 1)


@tilelang.jit(out_idx=[3, 4])
def block_causal_fwd(batch=2, heads=4, seq_len=512, dim=64, blk=16, block=64, threads=128,
                     dtype=T.bfloat16):
    """O = softmax(Q K^T * dim^-0.5 + mask) V where query s sees key t iff t // blk <= s // blk;
    LSE in base 2.  The key tiles 0 .. bx are visited (their count a T.if_then_else), the
    diagonal one masked by writing 0 / -1e6 into the scores before the GEMM accumulates
    onto them."""
    scale = dim ** -0.5 * LOG2E
    neg = -1.0e6
    shape = [batch, seq_len, heads, dim]

    @T.prim_func
    def main(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
             O: T.Tensor(shape, dtype), LSE: T.Tensor([batch, heads, seq_len], T.float32)):
        with T.Kernel(seq_len // block, heads, batch, threads=threads) as (bx, by, bz):
            Qs = T.alloc_shared([block, dim], dtype)
            Ks = T.alloc_shared([block, dim], dtype)
            Vs = T.alloc_shared([block, dim], dtype)
            Os = T.alloc_shared([block, dim], dtype)
            s = T.alloc_fragment([block, block], T.float32)
            p = T.alloc_fragment([block, block], dtype)
            acc = T.alloc_fragment([block, dim], T.float32)
            m = T.alloc_fragment([block], T.float32)
            m_prev = T.alloc_fragment([block], T.float32)
            sc = T.alloc_fragment([block], T.float32)
            ssum = T.alloc_fragment([block], T.float32)
            l = T.alloc_fragment([block], T.float32)
            T.copy(Q[bz, bx * block:(bx + 1) * block, by, :], Qs)
            T.fill(acc, 0)
            T.fill(l, 0)
            T.fill(m, neg)
            steps = T.if_then_else(bx == 0, 1, bx + 1)
            for k in T.Pipelined(steps, num_stages=1):
                T.copy(K[bz, k * block:(k + 1) * block, by, :], Ks)
                diag = k == bx
                if diag:
                    for i, j in T.Parallel(block, block):
                        s[i, j] = T.if_then_else(_allowed(i, j, blk, diag) > 0, 0, neg)
                else:
                    T.clear(s)
                T.gemm(Qs, Ks, s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(m, m_prev)
                T.fill(m, neg)
                T.copy(V[bz, k * block:(k + 1) * block, by, :], Vs)
                _online_softmax_pv(s, p, m, m_prev, sc, ssum, l, acc, Vs, scale, block, dim)
            for i, j in T.Parallel(block, dim):
                acc[i, j] /= l[i]
            T.copy(acc, Os)
            T.copy(Os, O[bz, bx * block:(bx + 1) * block, by, :])
            for i in T.Parallel(block):
                LSE[bz, by, bx * block + i] = T.log2(l[i]) + m[i] * scale

    return main


# ---- fp8 block mean pooling: a pooled, re-quantised key per block of rows ---------------------------
@tilelang.jit
def fp8_block_mean_pool(K, KScale, dim: int = 128, pool: int = 128, block_N: int = 32,
                        threads: int = 128):
    """Per block of `pool` rows (the last one partial): mean_r(K[r] * KScale[r]) re-quantised
    to e4m3 with a per-block scale max|mean| / 448 (at least 1e-10)."""
    seq = T.const("seq")
    K: T.Tensor[[seq, dim], T.float8_e4m3fn]
    KScale: T.Tensor[[seq], T.float32]
    nblk = T.ceildiv(seq, pool)
    PK = T.empty((nblk, dim), T.float8_e4m3fn)
    PScale = T.empty((nblk,), T.float32)

    with T.Kernel(nblk, threads=threads) as bx:
        rows = T.alloc_fragment([block_N, dim], T.float32)
        sc = T.alloc_fragment([block_N], T.float32)
        acc = T.alloc_fragment([dim], T.float32)
        amax = T.alloc_fragment([1], T.float32)
        T.fill(acc, 0.0)
        k0 = bx * pool
        k1 = T.min(k0 + pool, seq)
        count = k1 - k0
        for b in T.serial(T.ceildiv(count, block_N)):
            r0 = k0 + b * block_N
            T.copy(K[r0:r0 + block_N, :], rows)
            for n in T.Parallel(block_N):
                sc[n] = T.if_then_else(r0 + n < k1, KScale[r0 + n], 0.0)
            for n in T.parallel(block_N):
                for d in T.parallel(dim):
                    if r0 + n >= k1:
                        rows[n, d] = T.cast(0, T.float32)
                    else:
                        rows[n, d] = rows[n, d] * sc[n]
            T.reduce_sum(rows, acc, dim=0, clear=False)
        inv = T.cast(1.0, T.float32) / T.cast(count, T.float32)
        for d in T.Parallel(dim):
            acc[d] = acc[d] * inv
        T.reduce_absmax(acc, amax, dim=0, clear=True)
        bs = T.max(amax[0] * T.cast(1.0 / 448.0, T.float32), T.cast(1e-10, T.float32))
        for d in T.Parallel(dim):
            PK[bx, d] = T.cast(acc[d] / bs, T.float8_e4m3fn)
        PScale[bx] = bs

    return PK, PScale


# ---- mHC post: each output stream a mix of the residual streams plus the layer output ---------------
@tilelang.jit
def mhc_post_mix(comb, resid, post, y, out, hc: int = 4, hidden: int = 768, threads: int = 128,
                 h_blk: int = 512):
    """out[t, o, :] = post[t, o] * y[t, :] + sum_i comb[t, i, o] * resid[t, i, :] (comb read
    transposed): comb's (hc, hc) tile copied from a 3-d tensor into a 2-d fragment by its
    start, the hidden dim in blocks of gcd(hidden, h_blk) under T.Pipelined."""
    n = T.dynamic("tokens")
    blk = math.gcd(hidden, h_blk)
    comb: T.Tensor((n, hc, hc), T.float32)
    resid: T.Tensor((n, hc, hidden), T.bfloat16)
    post: T.Tensor((n, hc), T.float32)
    y: T.Tensor((n, hidden), T.bfloat16)
    out: T.Tensor((n, hc, hidden), T.bfloat16)

    with T.Kernel(n, threads=threads) as t:
        r_s = T.alloc_shared((hc, blk), T.bfloat16)
        y_s = T.alloc_shared(blk, T.bfloat16)
        o_s = T.alloc_shared((hc, blk), T.bfloat16)
        r_l = T.alloc_fragment((hc, blk), T.float32)
        y_l = T.alloc_fragment(blk, T.float32)
        o_l = T.alloc_fragment((hc, blk), T.float32)
        c_l = T.alloc_fragment((hc, hc), T.float32)
        p_l = T.alloc_fragment(hc, T.float32)
        T.copy(comb[t, 0, 0], c_l)
        T.copy(post[t, 0], p_l)
        for hb in T.Pipelined(T.ceildiv(hidden, blk), num_stages=2):
            T.copy(resid[t, 0, hb * blk], r_s)
            T.copy(y[t, hb * blk], y_s)
            T.copy(r_s, r_l)
            T.copy(y_s, y_l)
            for o, c in T.Parallel(hc, blk):
                o_l[o, c] = p_l[o] * y_l[c]
                for i in T.serial(hc):
                    o_l[o, c] += c_l[i, o] * r_l[i, c]
            T.copy(o_l, o_s)
            T.copy(o_s, out[t, 0, hb * blk])


# ---- Sinkhorn backward: a fixed number of damped Richardson steps on [[I, R], [R^T, I]] -------------
@T.macro
def _apply_block(R, u, v, buf, au, av, tile, n):
    """(au, av) = (u + R v, v + R^T u) per matrix of the tile: R v as the row sums (dim=-1)
    of R * v[j], R^T u as the column sums (dim=-2) of R * u[i]."""
    for b, i, j in T.Parallel(tile, n, n):
        buf[b, i, j] = R[b, i, j] * v[b, j]
    T.reduce_sum(buf, au, dim=-1)
    for b, i, j in T.Parallel(tile, n, n):
        buf[b, i, j] = R[b, i, j] * u[b, i]
    T.reduce_sum(buf, av, dim=-2)
    for b, i in T.Parallel(tile, n):
        au[b, i] += u[b, i]
        av[b, i] += v[b, i]


@tilelang.jit
def sinkhorn_bwd_richardson(out, dout, tile: int = 16, threads: int = 128, steps: int = 8,
                            omega: float = 0.25):
    """For each (n, n) Sinkhorn output R with gradient dR: b1 = rows of R * dR, b2 = its
    columns; (x1, x2) from `steps` damped Richardson steps x += omega * (b - A x) from zero;
    grad = R * (dR - x1[i] - x2[j])."""
    seqlen = T.dynamic("seqlen")
    n = T.const("n")
    out: T.Tensor((seqlen, n, n), T.float32)
    dout: T.Tensor((seqlen, n, n), T.float32)
    grad = T.empty((seqlen, n, n), T.float32)

    with T.Kernel(T.ceildiv(seqlen, tile), threads=threads) as bs:
        R = T.alloc_fragment([tile, n, n], T.float32)
        dR = T.alloc_fragment([tile, n, n], T.float32)
        RdR = T.alloc_fragment([tile, n, n], T.float32)
        g_s = T.alloc_shared([tile, n, n], T.float32)
        buf = T.alloc_shared([tile, n, n], T.float32)
        b1 = T.alloc_shared([tile, n], T.float32)
        b2 = T.alloc_shared([tile, n], T.float32)
        x1 = T.alloc_shared([tile, n], T.float32)
        x2 = T.alloc_shared([tile, n], T.float32)
        a1 = T.alloc_shared([tile, n], T.float32)
        a2 = T.alloc_shared([tile, n], T.float32)
        T.copy(out[bs * tile:(bs + 1) * tile, :, :], R)
        T.copy(dout[bs * tile:(bs + 1) * tile, :, :], dR)
        for b, i, j in T.Parallel(tile, n, n):
            RdR[b, i, j] = R[b, i, j] * dR[b, i, j]
        T.reduce_sum(RdR, b1, dim=-1)
        T.reduce_sum(RdR, b2, dim=-2)
        T.fill(x1, 0.0)
        T.fill(x2, 0.0)
        for _ in T.serial(steps):
            _apply_block(R, x1, x2, buf, a1, a2, tile, n)
            for b, i in T.Parallel(tile, n):
                x1[b, i] += omega * (b1[b, i] - a1[b, i])
                x2[b, i] += omega * (b2[b, i] - a2[b, i])
        for b, i, j in T.Parallel(tile, n, n):
            g_s[b, i, j] = R[b, i, j] * (dR[b, i, j] - x1[b, i] - x2[b, j])
        T.copy(g_s, grad[bs * tile:(bs + 1) * tile, :, :])

    return grad


# ---- block-diffusion attention over packed sequences: noisy | clean halves --------------------------
def _dllm_allowed(i, j, blk, noisy_diag, q_noisy):
    """In a tile that needs a mask (tile-local rows i, columns j): on the noisy diagonal a
    noisy query sees the noisy keys of its own block; on the clean boundary a noisy query sees
    the clean blocks before its own, a clean query those up to its own."""
    same = T.if_then_else(i // blk == j // blk, 1, 0)
    earlier = T.if_then_else(q_noisy, T.if_then_else(i // blk > j // blk, 1, 0),
                             T.if_then_else(i // blk >= j // blk, 1, 0))
    return T.if_then_else(noisy_diag == 1, same, earlier)


@tilelang.jit(out_idx=[5, 6])
def dllm_varlen_fwd(batch=3, heads=2, dim=64, blk=16, block=64, threads=128):
    """Sequence b is tokens cu_seqlens[b] .. cu_seqlens[b + 1]: a noisy half then a clean half,
    each a whole number of tiles.  A noisy query of block q attends the clean blocks < q and
    the noisy block q; a clean query the clean blocks <= q.  The grid is sized by the scalar
    argument max_seqlen; a tile past its sequence does nothing.  The key tile each step comes
    from the clean half, or (a noisy query tile's last step) its own noisy tile.  O and the
    base-2 LSE (per head, per packed token)."""
    tokens = T.dynamic("total_tokens")
    shape = [tokens, heads, dim]
    scale = dim ** -0.5 * LOG2E
    neg = -1.0e6

    @T.prim_func
    def main(Q: T.Tensor(shape, T.bfloat16), K: T.Tensor(shape, T.bfloat16),
             V: T.Tensor(shape, T.bfloat16), cu_seqlens: T.Tensor([batch + 1], T.int32),
             max_seqlen: T.int32, O: T.Tensor(shape, T.bfloat16),
             LSE: T.Tensor([heads, tokens], T.float32)):
        with T.Kernel(T.ceildiv(max_seqlen, block), heads, batch, threads=threads) as (bx, by, bz):
            Qs = T.alloc_shared([block, dim], T.bfloat16)
            Ks = T.alloc_shared([block, dim], T.bfloat16)
            Vs = T.alloc_shared([block, dim], T.bfloat16)
            Os = T.alloc_shared([block, dim], T.bfloat16)
            s = T.alloc_fragment([block, block], T.float32)
            p = T.alloc_fragment([block, block], T.bfloat16)
            acc = T.alloc_fragment([block, dim], T.float32)
            m = T.alloc_fragment([block], T.float32)
            m_prev = T.alloc_fragment([block], T.float32)
            sc = T.alloc_fragment([block], T.float32)
            ssum = T.alloc_fragment([block], T.float32)
            l = T.alloc_fragment([block], T.float32)
            start = cu_seqlens[bz]
            n_tiles = (cu_seqlens[bz + 1] - start) // 2 // block
            clean = start + n_tiles * block
            q_noisy = bx < n_tiles
            if bx < 2 * n_tiles:
                T.copy(Q[start + bx * block:start + (bx + 1) * block, by, :], Qs)
                T.fill(acc, 0)
                T.fill(l, 0)
                T.fill(m, neg)
                last_clean = T.if_then_else(q_noisy, bx, bx - n_tiles)
                steps = T.if_then_else(q_noisy, bx + 2, bx - n_tiles + 1)
                for k in T.Pipelined(steps, num_stages=1):
                    noisy_diag = T.if_then_else(k > last_clean, 1, 0)
                    if noisy_diag != 0:
                        T.copy(K[start + bx * block:start + (bx + 1) * block, by, :], Ks)
                        T.copy(V[start + bx * block:start + (bx + 1) * block, by, :], Vs)
                    else:
                        T.copy(K[clean + k * block:clean + (k + 1) * block, by, :], Ks)
                        T.copy(V[clean + k * block:clean + (k + 1) * block, by, :], Vs)
                    if noisy_diag + T.if_then_else(k == last_clean, 1, 0) != 0:
                        for i, j in T.Parallel(block, block):
                            s[i, j] = T.if_then_else(
                                _dllm_allowed(i, j, blk, noisy_diag, q_noisy) > 0, 0, neg)
                    else:
                        T.clear(s)
                    T.gemm(Qs, Ks, s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                    T.copy(m, m_prev)
                    _online_softmax_pv(s, p, m, m_prev, sc, ssum, l, acc, Vs, scale, block, dim)
                for i, j in T.Parallel(block, dim):
                    acc[i, j] /= l[i] + 1e-30
                T.copy(acc, Os)
                T.copy(Os, O[start + bx * block:start + (bx + 1) * block, by, :])
                for i in T.Parallel(block):
                    l[i] = T.log2(l[i] + 1e-30) + m[i] * scale
                T.copy(l, LSE[by, start + bx * block:start + (bx + 1) * block])

    return main
