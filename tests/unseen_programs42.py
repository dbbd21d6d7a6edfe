"""A forty-second set of programs in TileLang's idioms (written for tilecute, not taken from
anywhere): kernels in the ways TileLang is used outside its own repository -- inference
engines' quantization and sparse-attention kernels, model ports, generated benchmark
solutions, tutorials.  Their idioms, not their code: ``T.Tensor[(M, N), dtype]`` subscript
annotations with ``T.symbolic`` dims and a ``-> None`` return; dtype strings next to
``T.float32`` objects; scale helpers that are plain Python functions on PrimExprs
(``T.reinterpret`` bit tricks); ``@tilelang.jit(out_idx=-1)`` stacked on a ``@T.prim_func``
inside a builder function and ``tilelang.compile(func, out_idx=[...], target="cuda")``;
``T.Tensor(shape, dtype, w.data)`` flat views of a parameter; Python ``range`` loops and
chained comparisons inside a kernel; warp-per-row kernels with ``T.get_thread_binding(0)``,
one-element fragments and ``T.warp_reduce_sum``; a ``T.macro`` with a keyword-only tensor
parameter and a Python epilogue closure; ``T.SharedBuffer`` macro parameters; gathers
through an index tensor into shared memory with ``-T.infinity(acc.dtype)`` masks; packed
uint32 words decoded with ``T.uint32`` constants; the eager form (``T.const`` /
``T.empty``); split-K with ``T.atomic_addx2``; a grid with no ``threads=``; a producer and a
consumer warpgroup on ``T.alloc_barrier`` mbarriers (``T.set_max_nreg``, ``wg_wait=-1``,
``T.attr("default", "async_scope", 1)``, ``T.cp_async_barrier_noinc``, a shared tile
reused by ``O_s = Q_s``).

The file reads as TileLang after swapping its two import lines; builder functions take a
``target`` (``"cuda"`` as their authors write it) so the tests can build them for sm_80
too.  ``tests/test_unseen_programs42.py`` builds each to a cubin on the CPU, checks what
decides the result in the generated source, and on a GPU compares it with torch."""

import math

import tilecute as tilelang
import tilecute as tl
import tilecute.language as T

BF16 = "bfloat16"
FP8 = "float8_e4m3fn"
FP32 = "float32"
INT32 = T.int32

pass_configs = {
    tilelang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True,
    tilelang.PassConfigKey.TL_DISABLE_TMA_LOWER: True,
}


# ---- per-group activation quantization with power-of-two scales ------------------------------
def ceil_log2_bits(x):
    """ceil(log2(x)) of a positive float32 from its bits: the exponent, plus one when any
    mantissa bit is set."""
    bits = T.reinterpret("uint32", x)
    exponent = (bits >> 23) & 0xFF
    mantissa = bits & ((1 << 23) - 1)
    return T.Cast("int32", exponent - 127 + T.if_then_else(mantissa != 0, 1, 0))


def exp2_bits(e):
    """2**e for an int32 e in the normal range, built as float32 bits."""
    return T.reinterpret("float32", (e + 127) << 23)


@tilelang.jit(pass_configs=pass_configs)
def group_quant_pow2(N=512, group=128, rows_per_block=16, pow2_scale=True):
    """Each row's groups of `group` values are scaled into e4m3 by their absolute maximum
    over 448; with pow2_scale the scale is rounded up to a power of two (by its bits).  X,
    Y and S are all arguments (no out_idx): the caller owns the buffers, as the engines do."""
    M = T.symbolic("M")
    inv_max = 1.0 / 448.0

    @T.prim_func
    def quant(X: T.Tensor[(M, N), BF16], Y: T.Tensor[(M, N), FP8],
              S: T.Tensor[(M, T.ceildiv(N, group)), FP32]) -> None:
        with T.Kernel(T.ceildiv(M, rows_per_block), T.ceildiv(N, group), threads=128) as (
                pm, pg):
            x_s = T.alloc_shared((rows_per_block, group), BF16)
            x_f = T.alloc_fragment((rows_per_block, group), BF16)
            amax = T.alloc_fragment(rows_per_block, FP32)
            scale = T.alloc_fragment((rows_per_block,), FP32)
            y_f = T.alloc_fragment((rows_per_block, group), FP8)
            for _ in T.Pipelined(1, num_stages=0):
                T.copy(X[pm * rows_per_block, pg * group], x_s)
                T.copy(x_s, x_f)
                T.reduce_absmax(x_f, amax, dim=1)
                for i in T.Parallel(rows_per_block):
                    amax[i] = T.max(amax[i], 1e-4)
                    if pow2_scale:
                        scale[i] = exp2_bits(ceil_log2_bits(amax[i] * inv_max))
                    else:
                        scale[i] = amax[i] * inv_max
                for i, j in T.Parallel(rows_per_block, group):
                    y_f[i, j] = T.clamp(x_f[i, j] / scale[i], -448.0, 448.0)
                for i in T.Parallel(rows_per_block):
                    S[pm * rows_per_block + i, pg] = scale[i]
                T.copy(y_f, Y[pm * rows_per_block, pg * group])

    return quant


# ---- im2col convolution (NHWC) with a GELU epilogue, jit stacked on the prim_func -------------
def build_im2col_conv_gelu(N=2, H=10, W=9, C=16, F=48, KH=3, KW=3, block_M=64, block_N=32,
                           block_K=32, dtype="float16", accum_dtype="float", target="cuda"):
    """A valid (unpadded) convolution as a GEMM: rows are output pixels, the reduction runs
    over (kh, kw, c); the A tile is gathered from X with a bounds flag, the weights are read
    through a flat [KH*KW*C, F] view of W's storage; bias and exact GELU in the epilogue."""
    OH, OW = H - KH + 1, W - KW + 1
    K_TOTAL = KH * KW * C
    P_TOTAL = N * OH * OW
    inv_sqrt2 = 1.0 / math.sqrt(2.0)

    @tilelang.jit(out_idx=-1, target=target)
    @T.prim_func
    def conv_gelu(x: T.Tensor((N, H, W, C), dtype), w: T.Tensor((KH, KW, C, F), dtype),
                  b: T.Tensor((F,), dtype), out: T.Tensor((N, OH, OW, F), dtype)):
        with T.Kernel(T.ceildiv(F, block_N), T.ceildiv(P_TOTAL, block_M), threads=128) as (
                bx, by):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_K, block_N), dtype)
            acc = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(acc)
            w_flat = T.Tensor((K_TOTAL, F), dtype, w.data)
            for ko in T.Pipelined(T.ceildiv(K_TOTAL, block_K), num_stages=2):
                for ti, tk in T.Parallel(block_M, block_K):
                    p = by * block_M + ti
                    r = ko * block_K + tk
                    inside = (p < P_TOTAL) and (r < K_TOTAL)
                    if inside:
                        n = p // (OH * OW)
                        oh = p % (OH * OW) // OW
                        ow = p % OW
                        kh = r // (KW * C)
                        kw = r % (KW * C) // C
                        A_s[ti, tk] = x[n, oh + kh, ow + kw, r % C]
                    else:
                        A_s[ti, tk] = T.Cast(dtype, 0)
                T.copy(w_flat[ko * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, acc)
            for ti, tj in T.Parallel(block_M, block_N):
                p = by * block_M + ti
                f = bx * block_N + tj
                if (p < P_TOTAL) and (f < F):
                    v = acc[ti, tj] + b[f].astype(accum_dtype)
                    g = 0.5 * v * (1.0 + T.erf(v * T.Cast(accum_dtype, inv_sqrt2)))
                    out[p // (OH * OW), p % (OH * OW) // OW, p % OW, f] = T.Cast(dtype, g)

    return conv_gelu


# ---- direct convolution (NCHW, same padding), range loops, tilelang.compile ------------------
def build_direct_conv_hardtanh(batch=2, cin=3, cout=5, H=12, W=11, ks=3, block_h=4, block_w=8,
                               block_c=4, dtype="float16", target="cuda"):
    """One output element per T.Parallel point: a one-element local accumulator over Python
    `range` loops of (cin, kh, kw), a chained-comparison bounds test for the zero padding,
    bias, then hardtanh(-1, 1)."""
    pad = ks // 2

    @T.prim_func
    def conv_hardtanh(X: T.Tensor((batch, cin, H, W), dtype),
                      Wt: T.Tensor((cout, cin, ks, ks), dtype), B: T.Tensor((cout,), dtype),
                      Y: T.Tensor((batch, cout, H, W), dtype)):
        with T.Kernel(T.ceildiv(W, block_w), T.ceildiv(H, block_h),
                      T.ceildiv(batch * cout, block_c), threads=128) as (bx, by, bz):
            for lz, ly, lx in T.Parallel(block_c, block_h, block_w):
                z = bz * block_c + lz
                y = by * block_h + ly
                x = bx * block_w + lx
                if z < batch * cout and y < H and x < W:
                    n = z // cout
                    oc = z % cout
                    acc = T.alloc_local((1,), "float32")
                    acc[0] = T.Cast("float32", B[oc])
                    for ic in range(cin):
                        for kh in range(ks):
                            for kw in range(ks):
                                hi = y + kh - pad
                                wi = x + kw - pad
                                if 0 <= hi < H and 0 <= wi < W:
                                    acc[0] += X[n, ic, hi, wi].astype("float32") * \
                                        Wt[oc, ic, kh, kw].astype("float32")
                    Y[n, oc, y, x] = T.Cast(dtype, T.min(T.max(acc[0], -1.0), 1.0))

    return tilelang.compile(conv_hardtanh, out_idx=[3], target=target)


# ---- warp-per-row kernels built per dtype, as a model port does ------------------------------
WARP = 32


def build_row_kernels(DTYPE="float16"):
    """A builder closing over the element type; each jit factory is specialized per head
    count H.  One warp a row of N = 128: each lane owns N // 32 consecutive values,
    one-element fragments hold its partial sums, T.warp_reduce_sum combines them."""
    N = 128
    SERIAL = N // WARP

    @tilelang.jit(out_idx=[1])
    def l2norm_rows(H: int):
        @T.prim_func
        def impl(x: T.Tensor((H, N), DTYPE), y: T.Tensor((H, N), DTYPE)):
            with T.Kernel(H, threads=WARP) as h:
                lane = T.get_thread_binding(0)
                part = T.alloc_fragment((1,), "float32")
                part[0] = T.float32(0.0)
                for j in T.serial(SERIAL):
                    v = T.cast(x[h, lane * SERIAL + j], "float32")
                    part[0] += v * v
                total = T.warp_reduce_sum(part[0])
                den = T.max(T.sqrt(total), T.float32(1e-12))
                for j in T.serial(SERIAL):
                    y[h, lane * SERIAL + j] = T.cast(T.cast(x[h, lane * SERIAL + j], "float32")
                                                     / den, DTYPE)

        return impl

    @tilelang.jit(out_idx=[3])
    def groupnorm_rows(H: int, eps: float = 1e-5):
        @T.prim_func
        def impl(x: T.Tensor((H, N), DTYPE), gamma: T.Tensor((H * N,), DTYPE),
                 beta: T.Tensor((H * N,), DTYPE), y: T.Tensor((H * N,), DTYPE)):
            with T.Kernel(H, threads=WARP) as h:
                lane = T.get_thread_binding(0)
                s = T.alloc_fragment((1,), "float32")
                s[0] = T.float32(0.0)
                for j in T.serial(SERIAL):
                    s[0] += T.cast(x[h, lane * SERIAL + j], "float32")
                mean = T.warp_reduce_sum(s[0]) / T.float32(N)
                q = T.alloc_fragment((1,), "float32")
                q[0] = T.float32(0.0)
                for j in T.serial(SERIAL):
                    d = T.cast(x[h, lane * SERIAL + j], "float32") - mean
                    q[0] += d * d
                rstd = T.float32(1.0) / T.sqrt(T.warp_reduce_sum(q[0]) / T.float32(N) + eps)
                for j in T.serial(SERIAL):
                    flat = h * N + lane * SERIAL + j
                    v = (T.cast(x[h, lane * SERIAL + j], "float32") - mean) * rstd
                    y[flat] = T.cast(v * T.cast(gamma[flat], "float32")
                                     + T.cast(beta[flat], "float32"), DTYPE)

        return impl

    return l2norm_rows, groupnorm_rows


l2norm_rows, groupnorm_rows = build_row_kernels("float16")


# ---- GEMV through a T.macro with a keyword-only output and a Python epilogue ----------------
def gemv_block(M, K, DTYPE, THREADS=WARP, epilogue=None):
    """out[m] = epilogue(sum_k x[k] * W[k, m], extra, m) for the THREADS outputs of block
    `bx`; `epilogue` is a plain Python function the caller picks, given the accumulator, the
    macro's `extra` tensor and the output index (None: the accumulator as it is)."""

    @T.macro
    def impl(bx, x: T.Tensor((K,), DTYPE), W: T.Tensor((K, M), DTYPE), *,
             out: T.Tensor((M,), DTYPE), extra=None):
        acc = T.alloc_fragment((THREADS,), "float32")
        T.clear(acc)
        for k in T.serial(K):
            for i in T.Parallel(THREADS):
                acc[i] += T.cast(x[k], "float32") * T.cast(W[k, bx * THREADS + i], "float32")
        for i in T.Parallel(THREADS):
            idx = bx * THREADS + i
            val = epilogue(acc[i], extra, idx) if epilogue is not None else acc[i]
            out[idx] = T.cast(val, DTYPE)

    return impl


def relu_sq_plus(v, residual, i):
    """relu(v)^2 + residual[i], in fp32."""
    r = T.max(v, 0.0)
    return r * r + T.cast(residual[i], "float32")


@tilelang.jit(out_idx=[3])
def gemv_relu_sq_residual(M=256, K=96, DTYPE="float16", THREADS=WARP):
    """x @ W, then relu(v)^2 plus a residual that the epilogue helper reads."""
    gemv = gemv_block(M, K, DTYPE, THREADS, epilogue=relu_sq_plus)

    @T.prim_func
    def impl(x: T.Tensor((K,), DTYPE), W: T.Tensor((K, M), DTYPE), r: T.Tensor((M,), DTYPE),
             out: T.Tensor((M,), DTYPE)):
        with T.Kernel(M // THREADS, threads=THREADS) as bx:
            gemv(bx, x, W, out=out, extra=r)

    return impl


# ---- top-k of a causal score row by a bitonic sort in shared memory --------------------------
@tl.jit(out_idx=[2, 3], pass_configs=pass_configs)
def windowed_topk_softmax(topk=32, L=256, threads=64):
    """Per row: the top `topk` scores among positions [lo, hi) (Bounds[row] = lo, hi), kept
    in the first half of a 2*topk shared buffer: each chunk of `topk` positions fills the
    second half and a bitonic sort (a macro on T.SharedBuffer parameters) puts the best first
    (descending); then a softmax over the kept scores.  Empty slots carry index -1."""
    N2 = 2 * topk
    stages = int(round(math.log2(N2)))
    rows = T.symbolic("rows")

    @T.macro
    def sort_desc(idx_s: T.SharedBuffer([N2], dtype=INT32), val_s: T.SharedBuffer([N2], dtype=FP32)):
        T.sync_threads()
        for s1 in T.serial(stages):
            for s2 in T.serial(s1 + 1):
                for i in T.Parallel(N2):
                    up = (i & (1 << (s1 + 1))) != 0
                    j = i ^ (1 << (s1 - s2))
                    if i < j and ((up and val_s[i] > val_s[j]) or (not up and val_s[i] < val_s[j])):
                        v = val_s[i]
                        val_s[i] = val_s[j]
                        val_s[j] = v
                        t = idx_s[i]
                        idx_s[i] = idx_s[j]
                        idx_s[j] = t
                T.sync_threads()

    @T.prim_func
    def impl(Scores: T.Tensor((rows, L), FP32), Bounds: T.Tensor((rows, 2), INT32),
             TopIdx: T.Tensor((rows, topk), INT32), TopProb: T.Tensor((rows, topk), FP32)):
        with T.Kernel(rows, threads=threads) as (bx):
            lo, hi = Bounds[bx, 0], Bounds[bx, 1]
            idx_s = T.alloc_shared([N2], dtype=INT32)
            val_s = T.alloc_shared([N2], dtype=FP32)
            T.fill(idx_s, -1)
            T.fill(val_s, float("-inf"))
            for c in T.serial(L // topk):
                for i in T.Parallel(topk):
                    pos = c * topk + i
                    keep = lo <= pos and pos < hi
                    idx_s[topk + i] = T.if_then_else(keep, pos, -1)
                    val_s[topk + i] = T.if_then_else(keep, Scores[bx, pos], float("-inf"))
                sort_desc(idx_s, val_s)
            best = T.alloc_fragment([1], dtype=FP32)
            p = T.alloc_fragment([topk], dtype=FP32)
            T.copy(val_s[:topk], p)
            T.reduce_max(p, best, dim=-1)
            for i in T.Parallel(topk):
                p[i] = T.exp(p[i] - best[0])
            total = T.alloc_fragment([1], dtype=FP32)
            T.reduce_sum(p, total)
            for i in T.Parallel(topk):
                p[i] = p[i] / total[0]
            T.copy(idx_s[:topk], TopIdx[bx, :])
            T.copy(p, TopProb[bx, :])

    return impl


# ---- Sinkhorn normalization of small mixing matrices ----------------------------------------
@tilelang.jit(out_idx=[3], pass_configs=pass_configs)
def sigmoid_sinkhorn(hc=4, iters=6, eps=1e-6):
    """Per token a hc x hc matrix from logits (scaled, biased, sigmoid), then `iters` rounds
    of row then column normalization (T.reduce_sum over dim=1, then dim=0) of a fragment far
    smaller than the block."""
    n = T.symbolic("n")

    @T.prim_func
    def impl(logits: T.Tensor[(n, hc * hc), FP32], scale: T.Tensor[(1,), FP32],
             bias: T.Tensor[(hc * hc,), FP32], out: T.Tensor[(n, hc, hc), FP32]):
        with T.Kernel(n, threads=64) as t:
            lg = T.alloc_shared(hc * hc, FP32)
            m = T.alloc_fragment((hc, hc), FP32)
            T.copy(logits[t, :], lg)
            for i, j in T.Parallel(hc, hc):
                m[i, j] = T.sigmoid(lg[i * hc + j] * scale[0] + bias[i * hc + j]) + eps
            row = T.alloc_fragment(hc, FP32)
            col = T.alloc_fragment(hc, FP32)
            for _ in T.serial(iters):
                T.reduce_sum(m, row, dim=1)
                for i, j in T.Parallel(hc, hc):
                    m[i, j] = m[i, j] / (row[i] + eps)
                T.reduce_sum(m, col, dim=0)
                for i, j in T.Parallel(hc, hc):
                    m[i, j] = m[i, j] / (col[j] + eps)
            T.copy(m, out[t, :, :])

    return impl


# ---- sparse attention over gathered KV rows (online softmax in exp2) -------------------------
@tilelang.jit(out_idx=[-1], pass_configs=pass_configs)
def gathered_kv_attention(heads=16, dim=64, topk=128, block_I=64, num_stages=2, threads=128,
                          sm_scale=None):
    """Each query token attends to the `topk` KV rows its index row names (-1: none): the
    rows are gathered into shared memory, invalid ones masked to -inf before the QK^T GEMM
    accumulates into them, the softmax runs in base 2, an attention sink per head joins the
    denominator."""
    sm_scale = ((1.0 / dim) ** 0.5 if sm_scale is None else sm_scale) * 1.44269504
    batch = T.symbolic("batch")
    seq_len = T.symbolic("seq_len")
    seq_kv = T.symbolic("seq_kv")
    NI = tilelang.cdiv(topk, block_I)
    dtype, accum_dtype = "bfloat16", "float"

    @T.prim_func
    def main(Q: T.Tensor([batch, seq_len, heads, dim], dtype),
             KV: T.Tensor([batch, seq_kv, dim], dtype),
             Indices: T.Tensor([batch, seq_len, topk], "int32"),
             Sink: T.Tensor([heads], accum_dtype),
             Output: T.Tensor([batch, seq_len, heads, dim], dtype)):
        with T.Kernel(seq_len, batch, threads=threads) as (bx, by):
            Q_s = T.alloc_shared([heads, dim], dtype)
            KV_s = T.alloc_shared([block_I, dim], dtype)
            P_s = T.alloc_shared([heads, block_I], dtype)
            mask = T.alloc_fragment([block_I], "bool")
            acc_o = T.alloc_fragment([heads, dim], accum_dtype)
            acc_s = T.alloc_fragment([heads, block_I], accum_dtype)
            m_i = T.alloc_fragment([heads], accum_dtype)
            m_prev = T.alloc_fragment([heads], accum_dtype)
            l_i = T.alloc_fragment([heads], accum_dtype)
            l_blk = T.alloc_fragment([heads], accum_dtype)
            alpha = T.alloc_fragment([heads], accum_dtype)
            T.fill(acc_o, 0)
            T.fill(l_i, 0)
            T.fill(m_i, -(2**30))
            b_i, s_i = by, bx
            T.copy(Q[b_i, s_i, :, :dim], Q_s)
            for it in T.Pipelined(NI, num_stages=num_stages):
                for r in T.Parallel(block_I):
                    mask[r] = Indices[b_i, s_i, it * block_I + r] >= 0
                for r, d in T.Parallel(block_I, dim):
                    KV_s[r, d] = KV[b_i, T.max(Indices[b_i, s_i, it * block_I + r], 0), d]
                for h, r in T.Parallel(heads, block_I):
                    acc_s[h, r] = T.if_then_else(mask[r], 0, -T.infinity(acc_s.dtype))
                T.gemm(Q_s, KV_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
                T.copy(m_i, m_prev)
                T.reduce_max(acc_s, m_i, dim=1, clear=False)
                for h in T.Parallel(heads):
                    alpha[h] = T.exp2((m_prev[h] - m_i[h]) * sm_scale)
                for h, r in T.Parallel(heads, block_I):
                    acc_s[h, r] = T.exp2(acc_s[h, r] * sm_scale - m_i[h] * sm_scale)
                T.reduce_sum(acc_s, l_blk, dim=1)
                for h in T.Parallel(heads):
                    l_i[h] = l_i[h] * alpha[h] + l_blk[h]
                for h, d in T.Parallel(heads, dim):
                    acc_o[h, d] *= alpha[h]
                T.copy(acc_s, P_s)
                T.gemm(P_s, KV_s, acc_o, policy=T.GemmWarpPolicy.FullCol)
            for h in T.Parallel(heads):
                l_i[h] += T.exp2(Sink[h] * 1.44269504 - m_i[h] * sm_scale)
            for h, d in T.Parallel(heads, dim):
                acc_o[h, d] /= l_i[h]
            T.copy(acc_o, Output[b_i, s_i, :, :])

    return main


# ---- the same gather, warp-specialized: a producer warpgroup and a consumer on mbarriers -----
@tilelang.jit(out_idx=[-1], pass_configs=pass_configs)
def producer_consumer_gathered_attention(H=64, D=64, topk=256, BI=64):
    """Threads 128..255 gather the KV rows of two BI-row slots (K0 / K1) through the index
    row (an invalid index repeats the last valid row, masked), each slot handed over by a
    `ready` mbarrier (cp.async arrive, no increment) and handed back by a `free` one; threads
    0..127 wait for a slot, run QK^T (wg_wait=-1, then T.wait_wgmma), the base-2 online
    softmax and PV.  One macro serves both slots, given its buffers and its state as a tuple;
    the output is staged in Q's shared tile (`O_s = Q_s`)."""
    NI = topk // BI
    scale = (1.0 / D) ** 0.5 * 1.44269504
    seq = T.symbolic("seq")
    skv = T.symbolic("skv")
    dtype, accum_dtype = "bfloat16", "float"

    @T.macro
    def consume(K_slot, ok_slot, ready, free, i, state):
        Q_s, S_s, acc_s, acc_o, m_i, m_prev, l_i, l_blk, alpha = state
        T.barrier_wait(ready[0], i & 1)
        for h, r in T.Parallel(H, BI):
            acc_s[h, r] = T.if_then_else(ok_slot[r], 0, -T.infinity(acc_s.dtype))
        T.gemm(Q_s, K_slot, acc_s, transpose_B=True, wg_wait=-1)
        T.wait_wgmma(0)
        T.copy(m_i, m_prev)
        T.reduce_max(acc_s, m_i, dim=1, clear=False)
        for h in T.Parallel(H):
            alpha[h] = T.exp2((m_prev[h] - m_i[h]) * scale)
        for h, r in T.Parallel(H, BI):
            acc_s[h, r] = T.exp2(acc_s[h, r] * scale - m_i[h] * scale)
        T.reduce_sum(acc_s, l_blk, dim=1)
        for h in T.Parallel(H):
            l_i[h] = l_i[h] * alpha[h] + l_blk[h]
        for h, d in T.Parallel(H, D):
            acc_o[h, d] *= alpha[h]
        T.copy(acc_s, S_s)
        T.gemm(S_s, K_slot, acc_o)
        T.barrier_arrive(free[0])

    @T.macro
    def produce(K_slot, ok_slot, ready, free, i, block, KV, Ind, bx, tx, idx_last, idx_now):
        T.barrier_wait(free[0], (i & 1) ^ 1)
        for r in T.serial(BI // 16):
            row = r * 16 + (tx - 128) // 8
            idx_now[0] = Ind[bx, block * BI + row]
            ok_slot[row] = idx_now[0] >= 0
            if ok_slot[row]:
                idx_last[0] = idx_now[0]
            with T.attr("default", "async_scope", 1):
                for v in T.vectorized(8):
                    K_slot[row, (tx - 128) % 8 * 8 + v] = KV[idx_last[0], (tx - 128) % 8 * 8 + v]
        T.cp_async_barrier_noinc(ready[0])

    @T.prim_func
    def main(Q: T.Tensor([seq, H, D], dtype), KV: T.Tensor([skv, D], dtype),
             Ind: T.Tensor([seq, topk], "int32"), Out: T.Tensor([seq, H, D], dtype)):
        with T.Kernel(seq, threads=256) as bx:
            Q_s = T.alloc_shared([H, D], dtype)
            K0 = T.alloc_shared([BI, D], dtype)
            K1 = T.alloc_shared([BI, D], dtype)
            O_s = Q_s
            ok0 = T.alloc_shared([BI], "bool", scope="shared")
            ok1 = T.alloc_shared([BI], "bool", scope="shared")
            S_s = T.alloc_shared([H, BI], dtype)
            acc_o = T.alloc_fragment([H, D], accum_dtype)
            acc_s = T.alloc_fragment([H, BI], accum_dtype)
            m_i = T.alloc_fragment([H], accum_dtype)
            m_prev = T.alloc_fragment([H], accum_dtype)
            l_i = T.alloc_fragment([H], accum_dtype)
            l_blk = T.alloc_fragment([H], accum_dtype)
            alpha = T.alloc_fragment([H], accum_dtype)
            idx_last = T.alloc_local([1], "int32")
            idx_now = T.alloc_local([1], "int32")
            bar_q = T.alloc_barrier(arrive_count=256)
            ready0 = T.alloc_barrier(arrive_count=128)
            ready1 = T.alloc_barrier(arrive_count=128)
            free0 = T.alloc_barrier(arrive_count=128)
            free1 = T.alloc_barrier(arrive_count=128)
            tx = T.get_thread_binding()
            T.copy(Q[bx, 0:H, :], Q_s)
            T.barrier_arrive(bar_q)
            if tx < 128:
                T.set_max_nreg(240, 1)
                T.fill(acc_o, 0)
                T.fill(l_i, 0)
                T.fill(m_i, -(2**30))
                T.barrier_wait(bar_q, 0)
                state = (Q_s, S_s, acc_s, acc_o, m_i, m_prev, l_i, l_blk, alpha)
                for i in T.serial(NI // 2):
                    consume(K0, ok0, ready0, free0, i, state)
                    consume(K1, ok1, ready1, free1, i, state)
                for h, d in T.Parallel(H, D):
                    acc_o[h, d] /= l_i[h]
                T.copy(acc_o, O_s)
                T.copy(O_s, Out[bx, 0:H, :])
            else:
                T.set_max_nreg(80, 0)
                idx_last[0] = 0
                for i in T.serial(NI // 2):
                    produce(K0, ok0, ready0, free0, i, i * 2, KV, Ind, bx, tx, idx_last, idx_now)
                    produce(K1, ok1, ready1, free1, i, i * 2 + 1, KV, Ind, bx, tx, idx_last,
                            idx_now)

    return main


# ---- combining split-KV partial outputs by their log-sum-exps ---------------------------------
@tilelang.jit(out_idx=[-1], pass_configs=pass_configs)
def combine_partials_lse(heads=16, dim=128, splits=4, head_per_block=8, threads=128):
    """Output = sum_k 2^(lse_k - lse) O_k over the KV splits, lse the log2-sum-exp2 of the
    partials' lse_k; heads split over blocks of `head_per_block`.  The grid is one-dim,
    bound as a one-tuple."""
    seq_len = T.dynamic("seq_len")
    groups = heads // head_per_block
    dtype, accum_dtype = T.bfloat16, T.float32

    @T.prim_func
    def main(Partial_O: T.Tensor([seq_len, splits, heads, dim], dtype),
             Partial_Lse: T.Tensor([seq_len, splits, heads], accum_dtype),
             Output: T.Tensor([seq_len, heads, dim], dtype)):
        with T.Kernel(seq_len * groups, threads=threads) as (bx,):
            lse_s = T.alloc_shared([splits, head_per_block], accum_dtype)
            lse_max = T.alloc_fragment([head_per_block], accum_dtype)
            lse_sum = T.alloc_fragment([head_per_block], accum_dtype)
            w = T.alloc_fragment([head_per_block, splits], accum_dtype)
            acc = T.alloc_fragment([head_per_block, dim], accum_dtype)
            s_i = bx // groups
            H0 = bx % groups * head_per_block
            H1 = H0 + head_per_block
            for k in T.serial(splits):
                T.copy(Partial_Lse[s_i, k, H0:H1], lse_s[k, :])
            T.fill(lse_max, -(2**30))
            for k in T.serial(splits):
                for h in T.Parallel(head_per_block):
                    lse_max[h] = T.max(lse_max[h], lse_s[k, h])
            T.fill(lse_sum, 0)
            for k in T.serial(splits):
                for h in T.Parallel(head_per_block):
                    lse_sum[h] = lse_sum[h] + T.exp2(lse_s[k, h] - lse_max[h])
            for k in T.serial(splits):
                for h in T.Parallel(head_per_block):
                    w[h, k] = T.exp2(lse_s[k, h] - lse_max[h] - T.log2(lse_sum[h]))
            T.fill(acc, 0)
            for k in T.serial(splits):
                for h, d in T.Parallel(head_per_block, dim):
                    acc[h, d] = acc[h, d] + w[h, k] * Partial_O[s_i, k, H0 + h, d].astype(
                        accum_dtype)
            T.copy(acc, Output[s_i, H0:H1, :])

    return main


# ---- fp8 index scores: relu(K Q^T) weighted per head, summed over heads ----------------------
@tilelang.jit(out_idx=[4], pass_configs=pass_configs)
def fp8_index_scores(h=16, d=64, clear_accum=True):
    """o[b, m, n] = k_s[b, n] * sum_h q_s[b, m, h] * relu(k[b, n] . q[b, m, h]) in fp8 with
    fp32 accumulation; the K tiles, their scales and the logits are allocated inside the
    pipelined loop; clear_accum=False clears the logits with T.fill instead."""
    b = T.symbolic("b")
    m = T.symbolic("m")
    n = T.symbolic("n")
    blk_n1, blk_n2 = 256, 64

    @T.prim_func
    def impl(q: T.Tensor[(b, m, h, d), FP8], q_s: T.Tensor[(b, m, h), FP32],
             k: T.Tensor[(b, n, d), FP8], k_s: T.Tensor[(b, n), FP32],
             o: T.Tensor[(b, m, n), FP32]) -> None:
        with T.Kernel(b, m, T.ceildiv(n, blk_n1)) as (i_b, i_m, i1_n):
            q_smem = T.alloc_shared((h, d), FP8)
            T.copy(q[i_b, i_m, 0, 0], q_smem)
            q_s_frag = T.alloc_fragment(h, FP32)
            T.copy(q_s[i_b, i_m, 0], q_s_frag)
            for i2_n in T.Pipelined(blk_n1 // blk_n2, num_stages=2):
                k_smem = T.alloc_shared((blk_n2, d), FP8)
                T.copy(k[i_b, i1_n * blk_n1 + i2_n * blk_n2, 0], k_smem)
                k_s_frag = T.alloc_fragment(blk_n2, FP32)
                T.copy(k_s[i_b, i1_n * blk_n1 + i2_n * blk_n2], k_s_frag)
                logits = T.alloc_fragment((blk_n2, h), FP32)
                if not clear_accum:
                    T.fill(logits, 0)
                T.gemm(k_smem, q_smem, logits, transpose_A=False, transpose_B=True,
                       clear_accum=clear_accum)
                for i_h, i3_n in T.Parallel(h, blk_n2):
                    logits[i3_n, i_h] = T.max(logits[i3_n, i_h], 0) * q_s_frag[i_h]
                logits_sum = T.alloc_fragment(blk_n2, FP32)
                T.reduce_sum(logits, logits_sum, dim=1)
                for i3_n in T.Parallel(blk_n2):
                    logits_sum[i3_n] *= k_s_frag[i3_n]
                T.copy(logits_sum, o[i_b, i_m, i1_n * blk_n1 + i2_n * blk_n2])

    return impl


# ---- e4m3 bytes in uint32 words, decoded to bf16 with a shared exponent per row --------------
@tilelang.jit(out_idx=[-1], pass_configs=pass_configs)
def packed_e4m3_rows_to_bf16(D=128, BI=32):
    """Each row of `D` e4m3 values is packed four a uint32 word (little end first) with one
    uint32 exponent offset per row; the bf16 is assembled from the bits (sign, exponent plus
    the row's offset minus the e4m3 bias, mantissa), rows at or past Count[0] are zeroed.
    Normal e4m3 values only (no zeros or subnormals), as the engines' decoders assume."""
    n = T.symbolic("n")
    W4 = D // 4

    @T.prim_func
    def impl(Packed: T.Tensor((n, W4), "uint32"), RowExp: T.Tensor((n,), "uint32"),
             Count: T.Tensor((1,), INT32), Out: T.Tensor((n, D), BF16)):
        with T.Kernel(T.ceildiv(n, BI), threads=128) as bx:
            words = T.alloc_shared([BI, W4], "uint32")
            out_s = T.alloc_shared([BI, D], BF16)
            live = T.alloc_fragment([BI], "bool")
            limit = Count[0]
            for r, c in T.Parallel(BI, W4):
                words[r, c] = T.if_then_else(bx * BI + r < n, Packed[bx * BI + r, c],
                                             T.uint32(0))
            for r in T.Parallel(BI):
                row = bx * BI + r
                live[r] = (row < n) & (row < limit)
            for r, c in T.Parallel(BI, D):
                word = words[r, c // 4]
                byte = (word >> T.Cast("uint32", c % 4 * 8)) & T.uint32(0xFF)
                sign = (byte & T.uint32(0x80)) * T.uint32(0x100)
                expo = (byte & T.uint32(0x78)) >> T.uint32(3)
                mant = (byte & T.uint32(0x7)) * T.uint32(0x10)
                e = expo + RowExp[T.min(bx * BI + r, n - 1)] - T.uint32(7)
                bits = sign | (e << T.uint32(7)) | mant
                out_s[r, c] = T.if_then_else(live[r], T.reinterpret(BF16, T.Cast("uint16", bits)),
                                             T.bfloat16(0))
            T.copy(out_s, Out[bx * BI, 0])

    return impl


# ---- the eager form: T.const dims, annotated inputs, T.empty output --------------------------
@tilelang.jit
def eager_rmsnorm(X, weight, eps: float = 1e-6, BLOCK_M: int = 16, BLOCK_N: int = 256):
    """RMSNorm of each row in fp32, scaled by weight, in the eager form: the shapes are
    T.const names bound from the arguments, the output is a T.empty."""
    M, N = T.const("M, N")
    dtype, accum_dtype = T.float16, T.float32
    X: T.Tensor((M, N), dtype)
    weight: T.Tensor((N,), dtype)
    O = T.empty((M, N), dtype)
    with T.Kernel(T.ceildiv(M, BLOCK_M), threads=128) as pid_m:
        x_l = T.alloc_fragment((BLOCK_M, BLOCK_N), dtype)
        w_l = T.alloc_fragment((BLOCK_N,), dtype)
        sq = T.alloc_fragment((BLOCK_M, BLOCK_N), accum_dtype)
        ssum = T.alloc_fragment((BLOCK_M,), accum_dtype)
        o_l = T.alloc_fragment((BLOCK_M, BLOCK_N), dtype)
        T.copy(X[pid_m * BLOCK_M, 0], x_l)
        T.copy(weight[0], w_l)
        for i, j in T.Parallel(BLOCK_M, BLOCK_N):
            x = x_l[i, j].astype(accum_dtype)
            sq[i, j] = x * x
        T.reduce_sum(sq, ssum, dim=1, clear=True)
        for i, j in T.Parallel(BLOCK_M, BLOCK_N):
            o_l[i, j] = (x_l[i, j].astype(accum_dtype) * T.rsqrt(ssum[i] / N + eps)
                         * w_l[j].astype(accum_dtype)).astype(dtype)
        T.copy(o_l, O[pid_m * BLOCK_M, 0])
    return O


# ---- split-K GEMM: T.Buffer annotations, partial tiles added by paired atomics ---------------
def build_split_k_gemm(M=256, N=192, K=512, block_M=64, block_N=64, block_K=32, split_k=4,
                       dtype="float16", accum_dtype="float", target="cuda"):
    """C (zeroed by the caller) += the A @ B of each of `split_k` K ranges: every block
    stages its fp32 tile as fp16 in shared memory and adds it to C two halves at a time."""
    span = K // split_k

    @T.prim_func
    def main(A: T.Buffer((M, K), dtype), B: T.Buffer((K, N), dtype), C: T.Buffer((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), split_k, threads=128) as (
                bx, by, bz):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_K, block_N), dtype)
            C_s = T.alloc_shared((block_M, block_N), dtype)
            C_l = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.use_swizzle(10)
            T.clear(C_l)
            for ko in T.Pipelined(T.ceildiv(span, block_K), num_stages=2):
                T.copy(A[by * block_M, bz * span + ko * block_K], A_s)
                T.copy(B[bz * span + ko * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C_s)
            for i, j in T.Parallel(block_M, block_N // 2):
                m, n = by * block_M + i, bx * block_N + j * 2
                T.atomic_addx2(C[m, n], C_s[i, j * 2])

    return tilelang.compile(main, target=target)


# ---- a tutorial GEMV: no threads= (128), one row a thread through shared tiles ---------------
def build_rowwise_gemv(M=512, K=384, BLOCK_M=128, BLOCK_K=64, dtype="float16",
                       accum_dtype="float", target="cuda"):
    """Thread tm of block bm owns row bm * BLOCK_M + tm: it stages its row's K chunk and
    (redundantly, every thread the same values) the vector's into shared memory, then adds
    the products into a one-element local accumulator cleared with T.clear."""

    @T.prim_func
    def main(A: T.Buffer((M, K), dtype), x: T.Buffer((K,), dtype), y: T.Buffer((M,), dtype)):
        with T.Kernel(T.ceildiv(M, BLOCK_M)) as bm:
            tm = T.get_thread_binding(0)
            A_s = T.alloc_shared((BLOCK_M, BLOCK_K), dtype)
            x_s = T.alloc_shared((BLOCK_K,), dtype)
            c = T.alloc_local((1,), accum_dtype)
            T.clear(c)
            for bk in T.serial(T.ceildiv(K, BLOCK_K)):
                for tk in T.serial(BLOCK_K):
                    A_s[tm, tk] = A[bm * BLOCK_M + tm, bk * BLOCK_K + tk]
                    x_s[tk] = x[bk * BLOCK_K + tk]
                for tk in T.serial(BLOCK_K):
                    c[0] += A_s[tm, tk].astype(accum_dtype) * x_s[tk].astype(accum_dtype)
            y[bm * BLOCK_M + tm] = c[0]

    return tilelang.compile(main, out_idx=[2], target=target)


# ---- block-scaled fp8 GEMM (per-128 scales of A rows and B blocks) ---------------------------
@tilelang.jit(pass_configs=pass_configs)
def fp8_block_scaled_gemm(N=256, K=512, out_dtype=BF16, accum_dtype=FP32, group=128):
    """C = sum_k (A_k B_k^T) * sa[m, k] * sb[n // 128, k] over 128-wide K groups: each
    group's GEMM accumulates into a cleared fragment that is scaled into a second one."""
    M = T.symbolic("M")
    block_M, block_N, block_K = 32, 128, 128

    @T.prim_func
    def impl(A: T.Tensor[(M, K), FP8], B: T.Tensor[(N, K), FP8], C: T.Tensor[(M, N), out_dtype],
             sa: T.Tensor[(M, T.ceildiv(K, group)), FP32],
             sb: T.Tensor[(T.ceildiv(N, group), T.ceildiv(K, group)), FP32]):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), FP8)
            B_s = T.alloc_shared((block_N, block_K), FP8)
            C_s = T.alloc_shared((block_M, block_N), out_dtype)
            row_scale = T.alloc_shared((block_M), FP32)
            C_l = T.alloc_fragment((block_M, block_N), accum_dtype)
            C_acc = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.use_swizzle(panel_size=10)
            T.clear(C_l)
            T.clear(C_acc)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[bx * block_N, k * block_K], B_s)
                b_scale = sb[bx * block_N // group, k]
                for i in T.Parallel(block_M):
                    row_scale[i] = sa[by * block_M + i, k] * b_scale
                T.gemm(A_s, B_s, C_l, transpose_B=True)
                for i, j in T.Parallel(block_M, block_N):
                    C_acc[i, j] += C_l[i, j] * row_scale[i]
                T.clear(C_l)
            T.copy(C_acc, C_s)
            T.copy(C_s, C[by * block_M, bx * block_N])

    return impl


# ---- an in-place row cumsum in shared memory -------------------------------------------------
@tilelang.jit(out_idx=[1])
def row_cumsum_shared(M=16, N=512):
    """Inclusive prefix sums of each row: copy it to shared memory, T.cumsum in place,
    copy back."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(M, threads=128) as bm:
            row = T.alloc_shared((N,), T.float32)
            T.copy(X[bm, 0:N], row)
            T.cumsum(row, dim=0)
            T.copy(row, Y[bm, 0:N])

    return main
