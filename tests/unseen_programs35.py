"""A thirty-fifth set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang): families the earlier rounds leave out -- LayerNorm with Welford / Chan merging of
per-chunk statistics, BitNet's int8 x ternary (2-bit packed) GEMV and its prefill GEMM
(weights decoded into a shared int8 tile for T.gemm), the unit-lower-triangular inverse
(I + A)^-1 of gated-delta-rule chunks by forward substitution, 2:4 structured pruning, a
LAMB optimizer step (two launches: update + norms by atomics, then the trust ratio), a
radix-select threshold for top-k (order-preserving float keys, a shared histogram, a reverse
cumsum), a Jensen-Shannon loss over vocabulary chunks, box IoU bitmasks plus greedy NMS, a
Stockham radix-2 FFT per row in shared memory and the Mish backward.

The file reads as TileLang after swapping its two import lines (``import tilelang`` /
``import tilelang.language as T``); ``tests/test_unseen_programs35.py`` builds each to a cubin
on the CPU, checks what decides the result in the generated source, and on a GPU compares it
with torch."""

import math

import tilecute as tilelang
import tilecute.language as T


# ---- normalisation -----------------------------------------------------------------------
@tilelang.jit(out_idx=[3])
def welford_layernorm(M=256, N=6144, block_N=1024, threads=256, eps=1e-5):
    """LayerNorm of bf16 rows whose statistics merge chunk by chunk (Chan et al.): each chunk's
    mean and M2 come from two block reductions, folded into the running (count, mean, M2)."""

    @T.prim_func
    def ln(X: T.Tensor((M, N), "bfloat16"), W: T.Tensor((N,), "float32"),
           B: T.Tensor((N,), "float32"), Y: T.Tensor((M, N), "bfloat16")):
        with T.Kernel(M, threads=threads) as r:
            x = T.alloc_fragment((block_N,), "float32")
            d = T.alloc_fragment((block_N,), "float32")
            c_sum = T.alloc_fragment((1,), "float32")
            c_m2 = T.alloc_fragment((1,), "float32")
            mean = T.alloc_var("float32", init=0.0)
            m2 = T.alloc_var("float32", init=0.0)
            cnt = T.alloc_var("float32", init=0.0)
            for c in T.serial(N // block_N):
                T.copy(X[r, c * block_N:(c + 1) * block_N], x)
                T.reduce_sum(x, c_sum, dim=0)
                c_mean = c_sum[0] / block_N
                for j in T.Parallel(block_N):
                    d[j] = (x[j] - c_mean) * (x[j] - c_mean)
                T.reduce_sum(d, c_m2, dim=0)
                n_new = cnt + block_N
                delta = c_mean - mean
                mean = mean + delta * block_N / n_new
                m2 = m2 + c_m2[0] + delta * delta * cnt * block_N / n_new
                cnt = n_new
            rstd = T.rsqrt(m2 / N + eps)
            for c in T.serial(N // block_N):
                T.copy(X[r, c * block_N:(c + 1) * block_N], x)
                for j in T.Parallel(block_N):
                    col = c * block_N + j
                    Y[r, col] = T.cast((x[j] - mean) * rstd * W[col] + B[col], "bfloat16")

    return ln


# ---- BitNet b1.58: int8 activations x ternary weights packed four to a byte ----------------
@tilelang.jit(out_idx=[3])
def bitnet_int2_gemv(N=2048, K=4096, block_N=8, block_K=512, threads=128, reverse=False):
    """y[n] = s * sum_k a[k] * w[n, k], w in {-1, 0, 1} stored as the 2-bit code w + 1, weight
    k of a byte at bits 2 * (k % 4); int32 partial products in a fragment, one row reduction.
    ``reverse``: the block's rows stored last to first (each thread reads another's row)."""

    @T.prim_func
    def gemv(A: T.Tensor((K,), "int8"), Wq: T.Tensor((N, K // 4), "uint8"),
             S: T.Tensor((1,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), threads=threads) as bx:
            acc = T.alloc_fragment((block_N, block_K), "int32")
            row = T.alloc_fragment((block_N,), "int32")
            T.clear(acc)
            for kc in T.serial(K // block_K):
                for i, k in T.Parallel(block_N, block_K):
                    kk = kc * block_K + k
                    code = (Wq[bx * block_N + i, kk // 4] >> (2 * (k % 4))) & 3
                    acc[i, k] += T.cast(A[kk], "int32") * (T.cast(code, "int32") - 1)
            T.reduce_sum(acc, row, dim=1)
            for i in T.Parallel(block_N):
                if reverse:
                    Y[bx * block_N + block_N - 1 - i] = T.cast(row[block_N - 1 - i], "float32") * S[0]
                else:
                    Y[bx * block_N + i] = T.cast(row[i], "float32") * S[0]

    return gemv


@tilelang.jit(out_idx=[3])
def bitnet_int2_prefill(M=256, N=512, K=1024, block_M=64, block_N=128, block_K=64,
                        num_stages=2, threads=128):
    """C = (A @ W^T) * s: the packed ternary weight tile (block_N, block_K // 4) is loaded by
    T.copy into shared, decoded into a shared int8 (block_N, block_K) tile, and fed with the
    int8 activation tile to T.gemm (transpose_B) into an int32 accumulator; the decoded tile
    annotated swizzled, the blocks rasterized in panels of 4 (T.use_swizzle)."""

    @T.prim_func
    def prefill(A: T.Tensor((M, K), "int8"), Wq: T.Tensor((N, K // 4), "uint8"),
                S: T.Tensor((1,), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), "int8")
            Wp_s = T.alloc_shared((block_N, block_K // 4), "uint8")
            W_s = T.alloc_shared((block_N, block_K), "int8")
            acc = T.alloc_fragment((block_M, block_N), "int32")
            out = T.alloc_fragment((block_M, block_N), "float32")
            T.annotate_layout({W_s: tilelang.layout.make_swizzled_layout(W_s)})
            T.use_swizzle(panel_size=4)
            T.clear(acc)
            for ko in T.Pipelined(K // block_K, num_stages=num_stages):
                T.copy(A[by * block_M, ko * block_K], A_s)
                T.copy(Wq[bx * block_N, ko * (block_K // 4)], Wp_s)
                for n, k in T.Parallel(block_N, block_K):
                    W_s[n, k] = T.cast(((Wp_s[n, k // 4] >> (2 * (k % 4))) & 3), "int8") - T.int8(1)
                T.gemm(A_s, W_s, acc, transpose_B=True)
            for i, j in T.Parallel(block_M, block_N):
                out[i, j] = T.cast(acc[i, j], "float32") * S[0]
            T.copy(out, C[by * block_M, bx * block_N])

    return prefill


# ---- chunked linear attention: (I + A)^-1 by forward substitution -------------------------
@tilelang.jit(out_idx=[1])
def solve_unit_lower(C=64, threads=64):
    """X = (I + A)^-1 for each strictly lower-triangular (C, C) chunk A (the WY / UT transform
    of DeltaNet-style kernels): row i of X is e_i - sum_{k < i} A[i, k] X[k, :], rows in
    order, the row being solved in registers, the solved rows in shared memory.  The number
    of chunks is a T.dynamic size, the output allocated from it (out_idx)."""
    NB = T.dynamic("NB")

    @T.prim_func
    def solve(A: T.Tensor((NB, C, C), "float32"), X: T.Tensor((NB, C, C), "float32")):
        with T.Kernel(NB, threads=threads) as b:
            A_s = T.alloc_shared((C, C), "float32")
            X_s = T.alloc_shared((C, C), "float32")
            T.copy(A[b, :, :], A_s)
            for i, j in T.Parallel(C, C):
                X_s[i, j] = T.if_then_else(i == j, 1.0, 0.0)
            for i in T.serial(1, C):
                for j in T.Parallel(C):
                    for k in T.serial(i):
                        X_s[i, j] -= A_s[i, k] * X_s[k, j]
            T.copy(X_s, X[b, :, :])

    return solve


# ---- 2:4 structured sparsity ---------------------------------------------------------------
def _beats(other, other_k, me, k):
    """1 where lane ``other_k`` ranks ahead of lane ``k``: a larger magnitude, or an equal
    one at a lower index."""
    return T.if_then_else((other > me) | ((other == me) & (other_k < k)), 1, 0)


@tilelang.jit(out_idx=[1, 2])
def sparse24_prune(M=512, K=1024, block_M=32, block_K=128, threads=128):
    """Keep the two largest |x| of every group of four (ties to the lower index): the pruned
    fp16 tensor, and a byte per group whose low four bits mark the kept lanes."""

    @T.prim_func
    def prune(X: T.Tensor((M, K), "float16"), Y: T.Tensor((M, K), "float16"),
              Mask: T.Tensor((M, K // 4), "uint8")):
        with T.Kernel(T.ceildiv(K, block_K), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            x_s = T.alloc_shared((block_M, block_K), "float16")
            keep = T.alloc_shared((block_M, block_K), "int32")
            T.copy(X[by * block_M, bx * block_K], x_s)
            for i, k in T.Parallel(block_M, block_K):
                base = k - k % 4
                me = T.abs(x_s[i, k])
                rank = (_beats(T.abs(x_s[i, base]), base, me, k)
                        + _beats(T.abs(x_s[i, base + 1]), base + 1, me, k)
                        + _beats(T.abs(x_s[i, base + 2]), base + 2, me, k)
                        + _beats(T.abs(x_s[i, base + 3]), base + 3, me, k))
                keep[i, k] = T.if_then_else(rank < 2, 1, 0)
                Y[by * block_M + i, bx * block_K + k] = T.if_then_else(rank < 2, x_s[i, k], T.float16(0))
            for i, g in T.Parallel(block_M, block_K // 4):
                Mask[by * block_M + i, bx * (block_K // 4) + g] = T.cast(
                    keep[i, 4 * g] | (keep[i, 4 * g + 1] << 1) | (keep[i, 4 * g + 2] << 2)
                    | (keep[i, 4 * g + 3] << 3), "uint8")

    return prune


# ---- LAMB ------------------------------------------------------------------------------------
@tilelang.jit
def lamb_update_norms(N=1 << 20, block=2048, threads=256):
    """Adam moments in place, the raw update u = m_hat / (sqrt(v_hat) + eps) + wd * w into a
    workspace, and sum(w^2), sum(u^2) accumulated by one atomic per block each (thread 0's)."""

    @T.prim_func
    def upd(Wt: T.Tensor((N,), "float32"), G: T.Tensor((N,), "float32"),
            Mo: T.Tensor((N,), "float32"), Vo: T.Tensor((N,), "float32"),
            U: T.Tensor((N,), "float32"), Norms: T.Tensor((2,), "float32"),
            beta1: T.float32, beta2: T.float32, eps: T.float32, wd: T.float32,
            bc1: T.float32, bc2: T.float32):
        with T.Kernel(T.ceildiv(N, block), threads=threads) as bx:
            w2 = T.alloc_fragment((block,), "float32")
            u2 = T.alloc_fragment((block,), "float32")
            w_sum = T.alloc_fragment((1,), "float32")
            u_sum = T.alloc_fragment((1,), "float32")
            for j in T.Parallel(block):
                idx = bx * block + j
                g = G[idx]
                m = beta1 * Mo[idx] + (1 - beta1) * g
                v = beta2 * Vo[idx] + (1 - beta2) * g * g
                Mo[idx] = m
                Vo[idx] = v
                u = (m / bc1) / (T.sqrt(v / bc2) + eps) + wd * Wt[idx]
                U[idx] = u
                w2[j] = Wt[idx] * Wt[idx]
                u2[j] = u * u
            T.reduce_sum(w2, w_sum, dim=0)
            T.reduce_sum(u2, u_sum, dim=0)
            if T.get_thread_binding() == 0:  # (every thread holds the sums)
                T.atomic_add(Norms[0], w_sum[0])
                T.atomic_add(Norms[1], u_sum[0])

    return upd


@tilelang.jit
def lamb_apply(N=1 << 20, block=1024, threads=128):
    """w -= lr * trust * u, trust = ||w|| / ||u|| when both are non-zero, else 1."""

    @T.prim_func
    def apply(Wt: T.Tensor((N,), "float32"), U: T.Tensor((N,), "float32"),
              Norms: T.Tensor((2,), "float32"), lr: T.float32):
        with T.Kernel(T.ceildiv(N, block), threads=threads) as bx:
            wn = T.sqrt(Norms[0])
            un = T.sqrt(Norms[1])
            trust = T.if_then_else((wn > 0) & (un > 0), wn / un, T.float32(1.0))
            for j in T.Parallel(block):
                Wt[bx * block + j] = Wt[bx * block + j] - lr * trust * U[bx * block + j]

    return apply


# ---- top-k by radix select ----------------------------------------------------------------------
@tilelang.jit(out_idx=[1, 2])
def topk_radix_threshold(R=64, N=8192, topk=100, threads=256):
    """First pass of a radix top-k: the top byte of each order-preserving key (the float's bits
    with the sign bit flipped, all bits flipped for negatives) into a 256-bin shared histogram,
    a reverse (suffix) cumsum, and the bin holding the k-th largest value with the count of
    values in higher bins."""

    @T.prim_func
    def radix(X: T.Tensor((R, N), "float32"), Bin: T.Tensor((R,), "int32"),
              Above: T.Tensor((R,), "int32")):
        with T.Kernel(R, threads=threads) as r:
            hist = T.alloc_shared((256,), "int32")
            suffix = T.alloc_shared((256,), "int32")
            T.clear(hist)
            for j in T.Parallel(N):
                bits = T.reinterpret(X[r, j], "uint32")
                key = T.if_then_else((bits >> 31) == 1, ~bits, bits | T.uint32(0x80000000))
                T.atomic_add(hist[T.cast(key >> 24, "int32")], 1)
            T.cumsum(hist, suffix, dim=0, reverse=True)
            for b in T.Parallel(256):
                higher = T.if_then_else(b < 255, suffix[T.min(b + 1, 255)], 0)
                if suffix[b] >= topk and higher < topk:
                    Bin[r] = b
                    Above[r] = higher

    return radix


# ---- Jensen-Shannon divergence over the vocabulary ----------------------------------------------
@tilelang.jit(out_idx=[2])
def jsd_loss(V=16384, block_V=2048, threads=256):
    """JSD(p || q) per row for logits X (student) and Y (teacher): one pass for both
    log-sum-exps (online max / sum), a second for 0.5 * sum p log(p/m) + q log(q/m).  The
    row count is symbolic (T.symbolic)."""
    M = T.symbolic("M")

    @T.prim_func
    def jsd(X: T.Tensor((M, V), "float16"), Y: T.Tensor((M, V), "float16"),
            Out: T.Tensor((M,), "float32")):
        with T.Kernel(M, threads=threads) as r:
            x = T.alloc_fragment((block_V,), "float32")
            y = T.alloc_fragment((block_V,), "float32")
            t = T.alloc_fragment((block_V,), "float32")
            cx = T.alloc_fragment((1,), "float32")
            cy = T.alloc_fragment((1,), "float32")
            mx = T.alloc_var("float32", init=-T.infinity("float32"))
            my = T.alloc_var("float32", init=-T.infinity("float32"))
            sx = T.alloc_var("float32", init=0.0)
            sy = T.alloc_var("float32", init=0.0)
            for c in T.serial(V // block_V):
                T.copy(X[r, c * block_V:(c + 1) * block_V], x)
                T.copy(Y[r, c * block_V:(c + 1) * block_V], y)
                T.reduce_max(x, cx, dim=0)
                T.reduce_max(y, cy, dim=0)
                nx = T.max(mx, cx[0])
                ny = T.max(my, cy[0])
                for j in T.Parallel(block_V):
                    t[j] = T.exp(x[j] - nx)
                T.reduce_sum(t, cx, dim=0)
                for j in T.Parallel(block_V):
                    t[j] = T.exp(y[j] - ny)
                T.reduce_sum(t, cy, dim=0)
                sx = sx * T.exp(mx - nx) + cx[0]
                sy = sy * T.exp(my - ny) + cy[0]
                mx = nx
                my = ny
            lx = mx + T.log(sx)
            ly = my + T.log(sy)
            total = T.alloc_var("float32", init=0.0)
            for c in T.serial(V // block_V):
                T.copy(X[r, c * block_V:(c + 1) * block_V], x)
                T.copy(Y[r, c * block_V:(c + 1) * block_V], y)
                for j in T.Parallel(block_V):
                    p = T.exp(x[j] - lx)
                    q = T.exp(y[j] - ly)
                    lm = T.log(0.5 * (p + q) + 1e-30)
                    t[j] = 0.5 * (p * (x[j] - lx - lm) + q * (y[j] - ly - lm))
                T.reduce_sum(t, cx, dim=0)
                total += cx[0]
            Out[r] = total

    return jsd


# ---- detection: IoU bitmask + greedy NMS ----------------------------------------------------------
@tilelang.jit(out_idx=[1])
def nms_iou_mask(N=1024, block=64, thr=0.5, threads=128):
    """mask[i, w] bit b set when box j = 32 w + b comes after box i (boxes sorted by score)
    and IoU(i, j) > thr; boxes are (x1, y1, x2, y2)."""
    W = N // 32

    @T.prim_func
    def iou_mask(Bx: T.Tensor((N, 4), "float32"), Mask: T.Tensor((N, W), "uint32")):
        with T.Kernel(T.ceildiv(N, block), threads=threads) as bx:
            box_s = T.alloc_shared((N, 4), "float32")
            bits = T.alloc_fragment((block, W), "uint32")
            T.copy(Bx, box_s)
            T.clear(bits)
            for i, w in T.Parallel(block, W):
                for b in T.serial(32):
                    gi = bx * block + i
                    j = w * 32 + b
                    ix1 = T.max(box_s[gi, 0], box_s[j, 0])
                    iy1 = T.max(box_s[gi, 1], box_s[j, 1])
                    ix2 = T.min(box_s[gi, 2], box_s[j, 2])
                    iy2 = T.min(box_s[gi, 3], box_s[j, 3])
                    inter = T.max(ix2 - ix1, 0.0) * T.max(iy2 - iy1, 0.0)
                    area_i = (box_s[gi, 2] - box_s[gi, 0]) * (box_s[gi, 3] - box_s[gi, 1])
                    area_j = (box_s[j, 2] - box_s[j, 0]) * (box_s[j, 3] - box_s[j, 1])
                    hit = (j > gi) & (inter > thr * (area_i + area_j - inter))
                    bits[i, w] = bits[i, w] | (T.cast(hit, "uint32") << T.cast(b, "uint32"))
            T.copy(bits, Mask[bx * block, 0])

    return iou_mask


@tilelang.jit(out_idx=[1])
def nms_greedy(N=1024, threads=32):
    """Walk the boxes in score order: a box not yet suppressed is kept and ORs its mask row
    into the suppressed set (one word per lane, the set in shared memory)."""
    W = N // 32

    @T.prim_func
    def greedy(Mask: T.Tensor((N, W), "uint32"), Keep: T.Tensor((N,), "int32")):
        with T.Kernel(1, threads=threads) as _:
            removed = T.alloc_shared((W,), "uint32")
            T.clear(removed)
            for i in T.serial(N):
                if ((removed[i // 32] >> T.cast(i % 32, "uint32")) & T.uint32(1)) == T.uint32(0):
                    for w in T.Parallel(W):
                        removed[w] = removed[w] | Mask[i, w]
                    Keep[i] = 1
                else:
                    Keep[i] = 0

    return greedy


# ---- signal processing ----------------------------------------------------------------------------
@tilelang.jit(out_idx=[2, 3])
def fft_rows_stockham(R=64, N=256, threads=128):
    """Complex FFT of each row (real and imaginary parts apart) by Stockham's autosort radix-2
    algorithm: log2(N) stages of a serial loop ping-ponging between the two rows of a (2, N)
    shared buffer, stage st with stride s = 2^st and length n = N / 2^st, each butterfly
    y[q + s(2p)] = a + b, y[q + s(2p + 1)] = (a - b) w^p with w = exp(-2 pi i / n)."""
    stages = int(math.log2(N))

    @T.prim_func
    def fft(Xr: T.Tensor((R, N), "float32"), Xi: T.Tensor((R, N), "float32"),
            Yr: T.Tensor((R, N), "float32"), Yi: T.Tensor((R, N), "float32")):
        with T.Kernel(R, threads=threads) as r:
            buf_r = T.alloc_shared((2, N), "float32")
            buf_i = T.alloc_shared((2, N), "float32")
            T.copy(Xr[r, :], buf_r[0, :])
            T.copy(Xi[r, :], buf_i[0, :])
            for st in T.serial(stages):
                s = 1 << st
                n = N >> st
                m = n // 2
                cur = st % 2
                nxt = 1 - cur
                for t in T.Parallel(N // 2):
                    p = t // s
                    q = t % s
                    ang = -2.0 * math.pi * T.cast(p, "float32") / T.cast(n, "float32")
                    wr = T.cos(ang)
                    wi = T.sin(ang)
                    a_r = buf_r[cur, q + s * p]
                    a_i = buf_i[cur, q + s * p]
                    b_r = buf_r[cur, q + s * (p + m)]
                    b_i = buf_i[cur, q + s * (p + m)]
                    buf_r[nxt, q + s * (2 * p)] = a_r + b_r
                    buf_i[nxt, q + s * (2 * p)] = a_i + b_i
                    buf_r[nxt, q + s * (2 * p + 1)] = (a_r - b_r) * wr - (a_i - b_i) * wi
                    buf_i[nxt, q + s * (2 * p + 1)] = (a_r - b_r) * wi + (a_i - b_i) * wr
            T.copy(buf_r[stages % 2, :], Yr[r, :])
            T.copy(buf_i[stages % 2, :], Yi[r, :])

    return fft


# ---- activations ---------------------------------------------------------------------------------
@tilelang.jit(out_idx=[2])
def mish_bwd(M=1024, N=4096, block_M=16, block_N=256, threads=256):
    """dx = dy * (tanh(sp) + x * sigmoid(x) * (1 - tanh(sp)^2)), sp = softplus(x) computed
    as log1p(exp(x)) below a threshold of 20 and x above it (torch's softplus)."""

    @T.prim_func
    def bwd(X: T.Tensor((M, N), "bfloat16"), dY: T.Tensor((M, N), "bfloat16"),
            dX: T.Tensor((M, N), "bfloat16")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            x = T.alloc_fragment((block_M, block_N), "float32")
            g = T.alloc_fragment((block_M, block_N), "float32")
            o = T.alloc_fragment((block_M, block_N), "bfloat16")
            T.copy(X[by * block_M, bx * block_N], x)
            T.copy(dY[by * block_M, bx * block_N], g)
            for i, j in T.Parallel(block_M, block_N):
                sp = T.if_then_else(x[i, j] > 20.0, x[i, j], T.log1p(T.exp(x[i, j])))
                th = T.tanh(sp)
                sg = T.sigmoid(x[i, j])
                o[i, j] = T.cast(g[i, j] * (th + x[i, j] * sg * (1.0 - th * th)), "bfloat16")
            T.copy(o, dX[by * block_M, bx * block_N])

    return bwd


# ---- vision: 2-D rotary embedding -----------------------------------------------------------------
@T.macro
def _rotate_half_pair(x, pos, i, j, half, theta):
    """x[i, j] rotated with its partner in the other half of a head's ``2 * half`` lanes."""
    k = j % half
    inv = T.exp2(-T.log2(theta) * (2.0 * T.cast(k, "float32") / (2 * half)))
    ang = T.cast(pos, "float32") * inv
    partner = T.if_then_else(j < half, -x[i, j + half], x[i, j - half])
    return x[i, j] * T.cos(ang) + partner * T.sin(ang)


@tilelang.jit(out_idx=[2])
def rope_2d_vision(H=8, D=64, block_S=32, threads=128, theta=10000.0):
    """A vision transformer's 2-D RoPE on a (S, H, D) bf16 tensor of patch tokens: the first
    D / 2 lanes of each head rotate by the token's patch row Pos[s, 0], the last D / 2 by its
    column Pos[s, 1], each half NeoX-style (lane k paired with k + D / 4); tokens in a
    T.dynamic count, each half loaded into a shared tile per (token block, head) (a lane
    reads its partner's element: TileLang refuses that read of a fragment)."""
    S = T.dynamic("S")
    half = D // 4

    @T.prim_func
    def rope2d(X: T.Tensor((S, H, D), "bfloat16"), Pos: T.Tensor((S, 2), "int32"),
               Y: T.Tensor((S, H, D), "bfloat16")):
        with T.Kernel(T.ceildiv(S, block_S), H, threads=threads) as (bx, h):
            xr = T.alloc_shared((block_S, D // 2), "float32")
            xc = T.alloc_shared((block_S, D // 2), "float32")
            o_r = T.alloc_fragment((block_S, D // 2), "bfloat16")
            o_c = T.alloc_fragment((block_S, D // 2), "bfloat16")
            T.copy(X[bx * block_S:(bx + 1) * block_S, h, 0:D // 2], xr)
            T.copy(X[bx * block_S:(bx + 1) * block_S, h, D // 2:D], xc)
            for i, j in T.Parallel(block_S, D // 2):
                s = T.min(bx * block_S + i, S - 1)
                o_r[i, j] = T.cast(_rotate_half_pair(xr, Pos[s, 0], i, j, half, theta), "bfloat16")
                o_c[i, j] = T.cast(_rotate_half_pair(xc, Pos[s, 1], i, j, half, theta), "bfloat16")
            T.copy(o_r, Y[bx * block_S:(bx + 1) * block_S, h, 0:D // 2])
            T.copy(o_c, Y[bx * block_S:(bx + 1) * block_S, h, D // 2:D])

    return rope2d


# ---- LM head greedy decoding: GEMM tiles + a running argmax ------------------------------------
@tilelang.jit(out_idx=[2, 3])
def lm_head_argmax(M=128, V=4096, K=512, block_M=64, block_N=128, block_K=64, num_stages=2,
                   threads=128):
    """The greedy token per row of H @ W^T without writing the logits: vocabulary tiles in a
    serial loop, each a pipelined T.gemm into a cleared accumulator, its row maximum and the
    first column holding it (a T.reduce_min of masked column indices, int32) merged into a
    running (max, index) kept in fragments across tiles; ties keep the earlier tile."""

    @T.prim_func
    def argmax(H: T.Tensor((M, K), "bfloat16"), W: T.Tensor((V, K), "bfloat16"),
               Best: T.Tensor((M,), "float32"), Idx: T.Tensor((M,), "int32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            H_s = T.alloc_shared((block_M, block_K), "bfloat16")
            W_s = T.alloc_shared((block_N, block_K), "bfloat16")
            acc = T.alloc_fragment((block_M, block_N), "float32")
            col = T.alloc_fragment((block_M, block_N), "int32")
            t_max = T.alloc_fragment((block_M,), "float32")
            t_idx = T.alloc_fragment((block_M,), "int32")
            best = T.alloc_fragment((block_M,), "float32")
            best_idx = T.alloc_fragment((block_M,), "int32")
            T.fill(best, -T.infinity("float32"))
            T.fill(best_idx, 0)
            for n in T.serial(V // block_N):
                T.clear(acc)
                for ko in T.Pipelined(K // block_K, num_stages=num_stages):
                    T.copy(H[bx * block_M, ko * block_K], H_s)
                    T.copy(W[n * block_N, ko * block_K], W_s)
                    T.gemm(H_s, W_s, acc, transpose_B=True)
                T.reduce_max(acc, t_max, dim=1)
                for i, j in T.Parallel(block_M, block_N):
                    col[i, j] = T.if_then_else(acc[i, j] == t_max[i], n * block_N + j, V)
                T.reduce_min(col, t_idx, dim=1)
                for i in T.Parallel(block_M):
                    if t_max[i] > best[i]:
                        best[i] = t_max[i]
                        best_idx[i] = t_idx[i]
            T.copy(best, Best[bx * block_M])
            T.copy(best_idx, Idx[bx * block_M])

    return argmax


# ---- attention at head sizes the earlier rounds skip -------------------------------------------
@tilelang.jit(out_idx=[3])
def flash_fwd_head_dim(B=2, H=4, S=512, D=80, block_M=64, block_N=64, num_stages=2,
                       threads=128):
    """Non-causal FlashAttention forward (BSHD, fp16) at a head size D the earlier rounds skip:
    80 (ViT-H, not a power of two) and 256 (Gemma); exp2 with the log2(e) / sqrt(D) scale
    folded in, the output rescaled each step and normalised at the end."""
    scale = (1.0 / D) ** 0.5 * 1.44269504

    @T.prim_func
    def attn(Q: T.Tensor((B, S, H, D), "float16"), K: T.Tensor((B, S, H, D), "float16"),
             V: T.Tensor((B, S, H, D), "float16"), O: T.Tensor((B, S, H, D), "float16")):
        with T.Kernel(T.ceildiv(S, block_M), H, B, threads=threads) as (bx, by, bz):
            Q_s = T.alloc_shared((block_M, D), "float16")
            K_s = T.alloc_shared((block_N, D), "float16")
            V_s = T.alloc_shared((block_N, D), "float16")
            s = T.alloc_fragment((block_M, block_N), "float32")
            p = T.alloc_fragment((block_M, block_N), "float16")
            o = T.alloc_fragment((block_M, D), "float32")
            m = T.alloc_fragment((block_M,), "float32")
            m_prev = T.alloc_fragment((block_M,), "float32")
            alpha = T.alloc_fragment((block_M,), "float32")
            l = T.alloc_fragment((block_M,), "float32")
            l_step = T.alloc_fragment((block_M,), "float32")
            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], Q_s)
            T.fill(o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity("float32"))
            for kb in T.Pipelined(T.ceildiv(S, block_N), num_stages=num_stages):
                T.copy(K[bz, kb * block_N:(kb + 1) * block_N, by, :], K_s)
                T.clear(s)
                T.gemm(Q_s, K_s, s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(m, m_prev)
                T.reduce_max(s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    alpha[i] = T.exp2((m_prev[i] - m[i]) * scale)
                for i, j in T.Parallel(block_M, block_N):
                    s[i, j] = T.exp2(s[i, j] * scale - m[i] * scale)
                T.reduce_sum(s, l_step, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * alpha[i] + l_step[i]
                T.copy(s, p)
                for i, j in T.Parallel(block_M, D):
                    o[i, j] *= alpha[i]
                T.copy(V[bz, kb * block_N:(kb + 1) * block_N, by, :], V_s)
                T.gemm(p, V_s, o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, D):
                o[i, j] /= l[i]
            T.copy(o, O[bz, bx * block_M:(bx + 1) * block_M, by, :])

    return attn


# ---- batched dense linear algebra: Cholesky of small SPD blocks ---------------------------------
@tilelang.jit(out_idx=[1])
def cholesky_blocks(NB=32, C=64, threads=128):
    """L with L @ L^T = A for each (C, C) symmetric positive-definite block, right-looking in
    shared memory: per column k the pivot's square root, the column below it scaled, then the
    trailing lower triangle updated by the column's outer product; the upper part zeroed."""

    @T.prim_func
    def chol(A: T.Tensor((NB, C, C), "float32"), L: T.Tensor((NB, C, C), "float32")):
        with T.Kernel(NB, threads=threads) as b:
            a = T.alloc_shared((C, C), "float32")
            piv = T.alloc_var("float32")
            T.copy(A[b, :, :], a)
            for k in T.serial(C):
                piv = T.sqrt(a[k, k])
                for i in T.Parallel(C):
                    if i > k:
                        a[i, k] = a[i, k] / piv
                for i, j in T.Parallel(C, C):
                    if j > k and i >= j:
                        a[i, j] -= a[i, k] * a[j, k]
                if T.get_thread_binding() == 0:
                    a[k, k] = piv
            for i, j in T.Parallel(C, C):
                L[b, i, j] = T.if_then_else(j <= i, a[i, j], 0.0)

    return chol


# ---- sparse: CSR x dense with a software pipeline over each row's nonzeros --------------------
@tilelang.jit(out_idx=[4])
def csr_spmm_pipelined(M=512, K=1024, N=256, nnz=8192, block_N=128, block_nz=32,
                       num_stages=2, threads=128):
    """C[r, :] = sum over the row's nonzeros v * B[col, :]: one row and one column tile per
    block; the nonzeros in chunks of block_nz under T.Pipelined (a trip count read from the
    row pointers), each chunk's indices and values staged in shared memory, then the B rows
    they name gathered into a shared tile and accumulated per column (fp16 B, fp32 sums)."""

    @T.prim_func
    def spmm(RowPtr: T.Tensor((M + 1,), "int32"), ColIdx: T.Tensor((nnz,), "int32"),
             Val: T.Tensor((nnz,), "float32"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), M, threads=threads) as (bx, r):
            cols_s = T.alloc_shared((block_nz,), "int32")
            vals_s = T.alloc_shared((block_nz,), "float32")
            B_s = T.alloc_shared((block_nz, block_N), "float16")
            acc = T.alloc_fragment((block_N,), "float32")
            start = RowPtr[r]
            end = RowPtr[r + 1]
            T.clear(acc)
            for c in T.Pipelined(T.ceildiv(end - start, block_nz), num_stages=num_stages):
                for z in T.Parallel(block_nz):
                    idx = start + c * block_nz + z
                    cols_s[z] = T.if_then_else(idx < end, ColIdx[idx], 0)
                    vals_s[z] = T.if_then_else(idx < end, Val[idx], 0.0)
                for z, j in T.Parallel(block_nz, block_N):
                    B_s[z, j] = B[cols_s[z], bx * block_N + j]
                for j in T.Parallel(block_N):
                    for z in T.serial(block_nz):
                        acc[j] += vals_s[z] * T.cast(B_s[z, j], "float32")
            T.copy(acc, C[r, bx * block_N])

    return spmm
