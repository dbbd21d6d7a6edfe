"""A forty-second set of programs in TileLang's idioms (written for tilecute, not taken from
anywhere): kernels in the ways TileLang is used outside its own repository -- generated
benchmark solutions, model ports, inference engines, tutorials -- in idioms the earlier
rounds and tests/third_party_programs.py (sglang / DeepSeek / Megatron quantization,
sparse attention, Sinkhorn, fp8 GEMMs) did not write: builder functions holding
``@tilelang.jit(out_idx=-1)`` stacked on a ``@T.prim_func``, or returning
``tilelang.compile(func, out_idx=[...], target="cuda")``; ``T.Tensor(shape, dtype, x.data)``
flat views of inputs and outputs; Python ``range`` loops, chained comparisons and names
rebound step by step in a kernel body; one-thread blocks; warp-per-row kernels
(``T.get_thread_binding(0)``, one-element fragments, ``T.warp_reduce_sum``) built per dtype
inside a function, and a recurrent state carried through a serial loop over a ``T.dynamic``
token count; a ``T.macro`` with a keyword-only tensor parameter and a plain Python epilogue
helper given a tensor; ``T.SharedBuffer`` macro parameters for a bitonic top-k; packed
uint32 words decoded with ``T.uint32`` constants; the eager form (``T.const`` / ``T.empty``)
for an RMSNorm, grouped-query attention with a Python flag choosing the loop range and a
rotary embedding on 4-D slices; split-K with ``T.atomic_addx2``; a grid with no
``threads=``; and a producer and a consumer warpgroup on ``T.alloc_barrier`` mbarriers
(``T.set_max_nreg``, ``wg_wait=-1``, ``T.attr("default", "async_scope", 1)``,
``T.cp_async_barrier_noinc``, a shared tile reused by ``O_s = Q_s``).

The file reads as TileLang after swapping its import lines; builder functions take a
``target`` (``"cuda"`` as their authors write it) so the tests can build them for sm_80
too.  ``tests/test_unseen_programs42.py`` builds each to a cubin on the CPU, checks what
decides the result in the generated source, and on a GPU compares it with torch."""

import math

import tilecute as tilelang
import tilecute as tl
import tilecute.language as T

BF16 = "bfloat16"
FP32 = "float32"
INT32 = T.int32

pass_configs = {
    tilelang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True,
    tilelang.PassConfigKey.TL_DISABLE_TMA_LOWER: True,
}


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


# ---- global average pooling, one thread a block (generated benchmark solutions) -------------
def build_global_avg_pool(N=3, OH=6, OW=7, F=40, dtype="float16", accum_dtype="float",
                          target="cuda"):
    """out[n, f] = mean over (h, w) of inp[n, h, w, f]: a block of one thread per (f, n),
    Python range loops into a one-element local accumulator."""
    inv_area = 1.0 / float(OH * OW)

    @tilelang.jit(out_idx=-1, target=target)
    @T.prim_func
    def gap(inp: T.Tensor((N, OH, OW, F), dtype), out: T.Tensor((N, F), dtype)):
        with T.Kernel(F, N, threads=1) as (fx, nx):
            acc = T.alloc_local((1,), accum_dtype)
            acc[0] = T.Cast(accum_dtype, 0)
            for h in range(OH):
                for w in range(OW):
                    acc[0] += inp[nx, h, w, fx].astype(accum_dtype)
            out[nx, fx] = T.Cast(dtype, acc[0] * inv_area)

    return gap


# ---- a GEMM fused with bias, tanh-GELU, a scale and a row max --------------------------------
def build_matmul_gelu_rowmax(batch=200, in_features=256, out_features=64, scale=1.7,
                             block_M=64, block_K=32, num_stages=2, target="cuda"):
    """Out[b] = max_f scale * gelu_tanh(X[b] @ Wt[:, f] + Bias[f]): one block covers every
    feature (block_N = out_features), the epilogue rebinds its names step by step in the
    T.Parallel body, rows past the batch are not written."""
    block_N = out_features

    @tilelang.jit(out_idx=-1, target=target)
    @T.prim_func
    def kernel(X: T.Tensor((batch, in_features), "float16"),
               Wt: T.Tensor((in_features, out_features), "float16"),
               Bias: T.Tensor((out_features,), "float16"), Out: T.Tensor((batch,), "float")):
        with T.Kernel(1, T.ceildiv(batch, block_M), threads=128) as (bx, by):
            A_sh = T.alloc_shared((block_M, block_K), "float16")
            W_sh = T.alloc_shared((block_K, block_N), "float16")
            B_sh = T.alloc_shared((block_N,), "float16")
            acc = T.alloc_fragment((block_M, block_N), "float")
            row_max = T.alloc_fragment((block_M,), "float")
            T.copy(Bias, B_sh)
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(in_features, block_K), num_stages=num_stages):
                T.copy(X[by * block_M, ko * block_K], A_sh)
                T.copy(Wt[ko * block_K, 0], W_sh)
                T.gemm(A_sh, W_sh, acc)
            for i, j in T.Parallel(block_M, block_N):
                v = acc[i, j] + T.Cast("float", B_sh[j])
                cube = v * v
                cube = cube * v
                u = v + cube * 0.044715
                acc[i, j] = 0.5 * v * (1.0 + T.tanh(0.7978845608028654 * u)) * scale
            T.reduce_max(acc, row_max, dim=1)
            for i in T.Parallel(block_M):
                row = by * block_M + i
                if row < batch:
                    Out[row] = row_max[i]

    return kernel


# ---- a 1x1 convolution as a GEMM through flat views of its input and output ------------------
def build_conv1x1_flat_views(N=2, H=12, W=10, C=64, F=96, block_M=64, block_N=32, block_K=32,
                             dtype="float16", target="cuda"):
    """out[n, h, w, :] = x[n, h, w, :] @ Wt (NHWC): x and out are read and written as
    [N*H*W, C] and [N*H*W, F] tensors over their storage, tiles moved by T.copy."""
    P = N * H * W

    @T.prim_func
    def conv1x1(x: T.Tensor((N, H, W, C), dtype), Wt: T.Tensor((C, F), dtype),
                out: T.Tensor((N, H, W, F), dtype)):
        with T.Kernel(T.ceildiv(F, block_N), T.ceildiv(P, block_M), threads=128) as (bx, by):
            x_flat = T.Tensor((P, C), dtype, x.data)
            out_flat = T.Tensor((P, F), dtype, out.data)
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_K, block_N), dtype)
            C_l = T.alloc_fragment((block_M, block_N), "float")
            T.clear(C_l)
            for ko in T.Pipelined(T.ceildiv(C, block_K), num_stages=2):
                T.copy(x_flat[by * block_M, ko * block_K], A_s)
                T.copy(Wt[ko * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, out_flat[by * block_M, bx * block_N])

    return tilelang.compile(conv1x1, out_idx=[2], target=target)


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


# ---- a recurrent state, one warp a state row, over a T.dynamic number of tokens -------------
@tilelang.jit(out_idx=[8])
def warp_state_recurrence(H: int = 4, N: int = 64, DTYPE="float16"):
    """Per token t, head h and state row v (a block of one warp; each lane owns N // 32
    columns): sa = S[v, :] . a_t, S[v, :] = S[v, :] * w_t + sa * b_t + v_t[v] * k_t,
    y_t[v] = S[v, :] . r_t.  The fp32 state starts from S0 and is kept in S_out (an
    argument: the caller may pass S0 again, as the model port does); y is the output."""
    T_LEN = T.dynamic("T_LEN")
    SERIAL = N // WARP

    @T.prim_func
    def impl(S0: T.Tensor((H, N, N), "float32"), R: T.Tensor((T_LEN, H, N), DTYPE),
             Wd: T.Tensor((T_LEN, H, N), DTYPE), A: T.Tensor((T_LEN, H, N), DTYPE),
             B: T.Tensor((T_LEN, H, N), DTYPE), V: T.Tensor((T_LEN, H, N), DTYPE),
             K: T.Tensor((T_LEN, H, N), DTYPE), S_out: T.Tensor((H, N, N), "float32"),
             y: T.Tensor((T_LEN, H, N), DTYPE)):
        with T.Kernel(H, N, threads=WARP) as (h, v_n):
            lane = T.get_thread_binding(0)
            for j in T.serial(SERIAL):
                S_out[h, v_n, lane * SERIAL + j] = S0[h, v_n, lane * SERIAL + j]
            p_sa = T.alloc_fragment((1,), "float32")
            p_y = T.alloc_fragment((1,), "float32")
            for t in T.serial(T_LEN):
                p_sa[0] = T.float32(0.0)
                for j in T.serial(SERIAL):
                    c = lane * SERIAL + j
                    p_sa[0] += S_out[h, v_n, c] * T.cast(A[t, h, c], "float32")
                sa = T.warp_reduce_sum(p_sa[0])
                v_val = T.cast(V[t, h, v_n], "float32")
                p_y[0] = T.float32(0.0)
                for j in T.serial(SERIAL):
                    c = lane * SERIAL + j
                    s_new = S_out[h, v_n, c] * T.cast(Wd[t, h, c], "float32") \
                        + sa * T.cast(B[t, h, c], "float32") + v_val * T.cast(K[t, h, c], "float32")
                    S_out[h, v_n, c] = s_new
                    p_y[0] += s_new * T.cast(R[t, h, c], "float32")
                y_val = T.warp_reduce_sum(p_y[0])
                if lane == 0:
                    y[t, h, v_n] = T.cast(y_val, DTYPE)

    return impl


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


# ---- sparse attention over gathered KV rows: a producer and a consumer warpgroup on mbarriers
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


# ---- eager grouped-query attention: T.const dims, a Python flag choosing the loop range ------
@tilelang.jit
def eager_gqa_attention(Q, K, V, is_causal: bool = True, BLOCK_L: int = 16, BLOCK_S: int = 16):
    """Attention of QH query heads over H KV heads (QH // H queries a KV head), one warp a
    block: the KV range is cut at the diagonal when causal (a Python conditional expression),
    masked scores start at -inf, the running sum is rescaled then accumulated into by
    T.reduce_sum(..., clear=False), P is cast into a register fragment that is the PV GEMM's
    A operand."""
    N, QH, H, S, D = T.const("N, QH, H, S, D")
    dtype, accum_dtype = T.float16, T.float32
    L = S
    Q: T.Tensor((N, L, QH, D), dtype)
    K: T.Tensor((N, S, H, D), dtype)
    V: T.Tensor((N, S, H, D), dtype)
    O = T.empty((N, L, QH, D), dtype)
    scale = 1 / T.sqrt(T.cast(D, accum_dtype))
    log2_e = 1.44269504
    group = QH // H
    with T.Kernel(N, T.ceildiv(L, BLOCK_L), QH, threads=32) as (pn, pl, ph):
        Q_s = T.alloc_shared((BLOCK_L, D), dtype)
        K_s = T.alloc_shared((BLOCK_S, D), dtype)
        V_s = T.alloc_shared((BLOCK_S, D), dtype)
        cur_max = T.alloc_fragment([BLOCK_L], accum_dtype)
        prev_max = T.alloc_fragment([BLOCK_L], accum_dtype)
        run_sum = T.alloc_fragment([BLOCK_L], accum_dtype)
        alpha = T.alloc_fragment([BLOCK_L], accum_dtype)
        s_acc = T.alloc_fragment([BLOCK_L, BLOCK_S], accum_dtype)
        p_cast = T.alloc_fragment([BLOCK_L, BLOCK_S], dtype)
        o_acc = T.alloc_fragment([BLOCK_L, D], accum_dtype)
        T.fill(cur_max, -T.infinity(accum_dtype))
        T.fill(run_sum, 0.0)
        T.fill(o_acc, 0.0)
        T.copy(Q[pn, pl * BLOCK_L:(pl + 1) * BLOCK_L, ph, :], Q_s)
        loop_range = (T.min(T.ceildiv(S, BLOCK_S), T.ceildiv((pl + 1) * BLOCK_L, BLOCK_S))
                      if is_causal else T.ceildiv(S, BLOCK_S))
        for k in T.Pipelined(loop_range, num_stages=2):
            T.copy(K[pn, k * BLOCK_S:(k + 1) * BLOCK_S, ph // group, :], K_s)
            if is_causal:
                for i, j in T.Parallel(BLOCK_L, BLOCK_S):
                    s_acc[i, j] = T.if_then_else(pl * BLOCK_L + i >= k * BLOCK_S + j, 0,
                                                 -T.infinity(accum_dtype))
            else:
                for i, j in T.Parallel(BLOCK_L, BLOCK_S):
                    s_acc[i, j] = T.if_then_else(k * BLOCK_S + j >= S, -T.infinity(accum_dtype), 0)
            T.gemm(Q_s, K_s, s_acc, transpose_B=True, clear_accum=False,
                   policy=T.GemmWarpPolicy.FullRow)
            T.copy(cur_max, prev_max)
            T.fill(cur_max, -T.infinity(accum_dtype))
            T.reduce_max(s_acc, cur_max, dim=1, clear=False)
            for i in T.Parallel(BLOCK_L):
                cur_max[i] = T.max(cur_max[i], prev_max[i])
            for i, j in T.Parallel(BLOCK_L, BLOCK_S):
                s_acc[i, j] = T.exp2((s_acc[i, j] - cur_max[i]) * log2_e * scale)
            for i in T.Parallel(BLOCK_L):
                alpha[i] = T.exp2((prev_max[i] - cur_max[i]) * log2_e * scale)
                run_sum[i] = run_sum[i] * alpha[i]
            T.reduce_sum(s_acc, run_sum, dim=1, clear=False)
            for i, j in T.Parallel(BLOCK_L, D):
                o_acc[i, j] *= alpha[i]
            T.copy(s_acc, p_cast)
            T.copy(V[pn, k * BLOCK_S:(k + 1) * BLOCK_S, ph // group, :], V_s)
            T.gemm(p_cast, V_s, o_acc, clear_accum=False, policy=T.GemmWarpPolicy.FullRow)
        for i, j in T.Parallel(BLOCK_L, D):
            o_acc[i, j] /= run_sum[i]
        T.copy(o_acc, O[pn, pl * BLOCK_L:(pl + 1) * BLOCK_L, ph, :])
    return O


# ---- eager rotary embedding on the two halves of each head, 4-D fragments --------------------
@tilelang.jit
def eager_rope_halves(X, offset: int = 0, base: float = 10000.0, BLOCK_S: int = 16,
                      BLOCK_D: int = 16):
    """out = x1 cos - x2 sin | x2 cos + x1 sin, x1 / x2 the halves of each head, the angle
    (offset + s) * base^(-d / (D/2)) computed per block into 2-D fragments; the halves
    moved by T.copy of 4-D slices into [1, BLOCK_S, 1, BLOCK_D] fragments."""
    N, S, H, D = T.const("N, S, H, D")
    dtype = T.float32
    X: T.Tensor((N, S, H, D), dtype)
    O = T.empty((N, S, H, D), dtype)
    half_D = D // 2
    d_blocks = T.ceildiv(half_D, BLOCK_D)
    with T.Kernel(N, T.ceildiv(S, BLOCK_S), H * d_blocks, threads=128) as (pn, ps, phd):
        ph = phd // d_blocks
        pd = phd % d_blocks
        x1 = T.alloc_fragment((1, BLOCK_S, 1, BLOCK_D), dtype)
        x2 = T.alloc_fragment((1, BLOCK_S, 1, BLOCK_D), dtype)
        cos_t = T.alloc_fragment((BLOCK_S, BLOCK_D), dtype)
        sin_t = T.alloc_fragment((BLOCK_S, BLOCK_D), dtype)
        for s, d in T.Parallel(BLOCK_S, BLOCK_D):
            pos = offset + ps * BLOCK_S + s
            dim = pd * BLOCK_D + d
            freq = T.pow(base, -dim.astype("float32") / half_D)
            cos_t[s, d] = T.cos(pos * freq)
            sin_t[s, d] = T.sin(pos * freq)
        T.copy(X[pn:pn + 1, ps * BLOCK_S:(ps + 1) * BLOCK_S, ph:ph + 1,
                 pd * BLOCK_D:(pd + 1) * BLOCK_D], x1)
        T.copy(X[pn:pn + 1, ps * BLOCK_S:(ps + 1) * BLOCK_S, ph:ph + 1,
                 pd * BLOCK_D + half_D:(pd + 1) * BLOCK_D + half_D], x2)
        for n, s, h, d in T.Parallel(1, BLOCK_S, 1, BLOCK_D):
            a = x1[n, s, h, d] * cos_t[s, d] - x2[n, s, h, d] * sin_t[s, d]
            b = x2[n, s, h, d] * cos_t[s, d] + x1[n, s, h, d] * sin_t[s, d]
            x1[n, s, h, d] = a
            x2[n, s, h, d] = b
        T.copy(x1, O[pn:pn + 1, ps * BLOCK_S:(ps + 1) * BLOCK_S, ph:ph + 1,
                     pd * BLOCK_D:(pd + 1) * BLOCK_D])
        T.copy(x2, O[pn:pn + 1, ps * BLOCK_S:(ps + 1) * BLOCK_S, ph:ph + 1,
                     pd * BLOCK_D + half_D:(pd + 1) * BLOCK_D + half_D])
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
