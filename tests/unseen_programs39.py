"""A thirty-ninth set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang), every one in TileLang's eager ``@tilelang.jit`` style: the decorated function is the
kernel body, ``M, N = T.const("M, N")`` names dims bound from the tensors, ``X: T.Tensor(...)``
declares an argument in the body, ``T.empty`` creates the outputs it returns, and block sizes,
dtypes and flags are plain arguments.  The families: a broadcast elementwise epilogue (dtype
argument, a Python helper computing a constant), an RMS norm with a runtime ``eps`` scalar and
two outputs returned out of declaration order, a top-k under ``@tilelang.autotune``, a GEMM with
a bias / activation epilogue chosen by a flag, a per-token-group fp8 cast whose scale tensor's
width is a ``T.ceildiv`` of a constant, a convolution through a hand-written im2col gather
(constants aliased ``KH, KW = K, K``, output dims derived in Python), a causal flash attention
forward (its softmax scale computed in Python from the head dim), a w4a16 dequant GEMM whose
packed weight dim is ``K // 2``, a chunked row scan (``T.cumsum``) over a ``T.dynamic`` row count,
a block-sparse GEMM reading a bool mask whose shape is a Python tuple of quotients, an in-place
softmax calling a ``T.macro`` with a runtime ``scale`` scalar, a transpose of a strided view
(``T.StridedTensor`` with constant strides), a GEMM compiled with a ``T.dynamic`` value given
for a ``T.const`` by keyword (TileLang's ``matmul.compile(M=T.dynamic("m"), N=..., K=...)``) and
a row absmax / normalize pair of launches over a ``T.dynamic`` row count, the first opened by a
plain Python function, the second by a ``T.macro``, both called at the top level.

The file reads as TileLang after swapping its two import lines (``import tilelang`` /
``import tilelang.language as T``); ``tests/test_unseen_programs39.py`` builds each to a cubin on
the CPU, checks what decides the result in the generated source, and on a GPU compares it with
torch."""

import itertools

import tilecute as tilelang
import tilecute.language as T


def _gelu_coefficient():
    """sqrt(2 / pi), as a plain Python float the body folds in."""
    return (2.0 / 3.141592653589793) ** 0.5


# ---- elementwise with broadcasting: Y = gelu(X * row_scale[:, None] + bias[None, :]) ----------
@tilelang.jit
def bias_gelu_broadcast(X, bias, row_scale, block_M=32, block_N=128, dtype=T.float16):
    """A tanh-GELU over X scaled per row and shifted per column; the dtype is an argument
    (T.float16 or a torch dtype), the arithmetic is float32."""
    M, N = T.const("M, N")
    c = _gelu_coefficient()
    X: T.Tensor((M, N), dtype)
    bias: T.Tensor((N,), dtype)
    row_scale: T.Tensor([M], T.float32)
    Y = T.empty((M, N), dtype)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        for i, j in T.Parallel(block_M, block_N):
            r = by * block_M + i
            col = bx * block_N + j
            if r < M and col < N:
                v = T.cast(X[r, col], T.float32) * row_scale[r] + T.cast(bias[col], T.float32)
                Y[r, col] = T.cast(0.5 * v * (1.0 + T.tanh(c * (v + 0.044715 * v * v * v))), dtype)
    return Y


# ---- row reduction: RMS norm, eps a runtime scalar, outputs returned (rstd, Y) ------------------
@tilelang.jit
def rms_norm_rows(X, W, eps: T.float32, block_M=4):
    """Y = X * rsqrt(mean(X^2) + eps) * W per row, and the rstd of each row; the body declares
    Y before rstd and returns them the other way round."""
    M, N = T.const("M, N")
    X: T.Tensor((M, N), T.bfloat16)
    W: T.Tensor((N,), T.bfloat16)
    Y = T.empty((M, N), T.bfloat16)
    rstd = T.empty((M,), T.float32)
    with T.Kernel(T.ceildiv(M, block_M), threads=128) as bm:
        x = T.alloc_fragment((block_M, N), T.float32)
        sq = T.alloc_fragment((block_M, N), T.float32)
        ss = T.alloc_fragment((block_M,), T.float32)
        T.copy(X[bm * block_M, 0], x)
        for i, j in T.Parallel(block_M, N):
            sq[i, j] = x[i, j] * x[i, j]
        T.reduce_sum(sq, ss, dim=1)
        for i in T.Parallel(block_M):
            ss[i] = T.rsqrt(ss[i] / N + eps)
        for i, j in T.Parallel(block_M, N):
            x[i, j] = x[i, j] * ss[i] * W[j]
        T.copy(x, Y[bm * block_M, 0])
        T.copy(ss, rstd[bm * block_M])
    return rstd, Y


# ---- top-k by repeated argmax, under @tilelang.autotune ---------------------------------------
def _topk_configs():
    return [dict(block_M=m, threads=t) for m, t in itertools.product([16, 32], [128, 256])]


@tilelang.autotune(configs=_topk_configs())
@tilelang.jit
def topk_rows(scores, k, block_M=16, threads=128):
    """The k largest scores of each row, largest first, with their column (the lowest column
    among equal values): k rounds of a row max, a min over the columns holding it, and a
    knock-out of that one column."""
    M, E = T.const("M, E")
    scores: T.Tensor((M, E), T.float32)
    values = T.empty((M, k), T.float32)
    indices = T.empty((M, k), T.int32)
    with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bm:
        s = T.alloc_fragment((block_M, E), T.float32)
        cand = T.alloc_fragment((block_M, E), T.int32)
        best = T.alloc_fragment((block_M,), T.float32)
        where = T.alloc_fragment((block_M,), T.int32)
        T.copy(scores[bm * block_M, 0], s)
        for r in T.serial(k):
            T.reduce_max(s, best, dim=1, clear=True)
            for i, j in T.Parallel(block_M, E):
                cand[i, j] = T.if_then_else(s[i, j] == best[i], j, E)
            T.reduce_min(cand, where, dim=1, clear=True)
            for i, j in T.Parallel(block_M, E):
                s[i, j] = T.if_then_else(j == where[i], -T.infinity(T.float32), s[i, j])
            for i in T.Parallel(block_M):
                if bm * block_M + i < M:
                    values[bm * block_M + i, r] = best[i]
                    indices[bm * block_M + i, r] = where[i]
    return values, indices


# ---- GEMM with a bias + activation epilogue picked by a flag -----------------------------------
@tilelang.jit
def gemm_bias_act(A, B, bias, activation="relu", block_M=128, block_N=128, block_K=64,
                  num_stages=3, threads=256, out_dtype=T.float16):
    """C = act(A @ B + bias) with A (M, K), B (K, N); ``activation`` is a Python string the
    body branches on while it is built ("relu" or "silu")."""
    M, N, K = T.const("M N K")
    A: T.Tensor[[M, K], T.float16]
    B: T.Tensor[[K, N], T.float16]
    bias: T.Tensor[[N], T.float32]
    C = T.empty((M, N), out_dtype)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
        A_s = T.alloc_shared((block_M, block_K), T.float16)
        B_s = T.alloc_shared((block_K, block_N), T.float16)
        acc = T.alloc_fragment((block_M, block_N), T.float32)
        C_s = T.alloc_shared((block_M, block_N), out_dtype)
        T.clear(acc)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
            T.copy(A[by * block_M, k * block_K], A_s)
            T.copy(B[k * block_K, bx * block_N], B_s)
            T.gemm(A_s, B_s, acc)
        for i, j in T.Parallel(block_M, block_N):
            v = acc[i, j] + bias[bx * block_N + j]
            if activation == "relu":
                acc[i, j] = T.max(v, 0.0)
            else:
                acc[i, j] = v / (1.0 + T.exp(-v))
        T.copy(acc, C_s)
        T.copy(C_s, C[by * block_M, bx * block_N])
    return C


# ---- per-token-group fp8 cast: scales (M, ceildiv(N, group)) -----------------------------------
@tilelang.jit
def per_token_group_fp8(X, block_M=8, group=128):
    """Each row of X in groups of ``group`` columns: s = max(|x|, 1e-4) / 448 per group, the
    codes x / s clamped to +-448 as float8_e4m3; a ragged last group is read zero-padded."""
    M, N = T.const("M, N")
    fp8_max = 448.0
    X: T.Tensor((M, N), T.bfloat16)
    Xq = T.empty((M, N), T.float8_e4m3fn)
    Xs = T.empty((M, T.ceildiv(N, group)), T.float32)
    with T.Kernel(T.ceildiv(M, block_M), T.ceildiv(N, group), threads=128) as (bm, bg):
        x = T.alloc_fragment((block_M, group), T.float32)
        amax = T.alloc_fragment((block_M,), T.float32)
        q = T.alloc_fragment((block_M, group), T.float8_e4m3fn)
        T.copy(X[bm * block_M, bg * group], x)
        T.reduce_absmax(x, amax, dim=1)
        for i in T.Parallel(block_M):
            amax[i] = T.max(amax[i], 1e-4) / fp8_max
        for i, j in T.Parallel(block_M, group):
            q[i, j] = T.clamp(x[i, j] / amax[i], -fp8_max, fp8_max)
        T.copy(q, Xq[bm * block_M, bg * group])
        for i in T.Parallel(block_M):
            if bm * block_M + i < M:
                Xs[bm * block_M + i, bg] = amax[i]
    return Xq, Xs


# ---- convolution (NHWC x KKCF) through a hand-written im2col gather ----------------------------
@tilelang.jit
def conv2d_im2col_gather(data, weight, stride, padding, block_M=64, block_N=64, block_K=32,
                         threads=128):
    """out[n, oh, ow, f] = sum over (kh, kw, c) of data[n, oh*S - P + kh, ow*S - P + kw, c] *
    weight[kh, kw, c, f]: a GEMM whose A tile is gathered row by row from the image (zero
    outside it) and whose B is the weight viewed (KH * KW * C, F)."""
    Nb, H, W, C, F, K = T.const("Nb, H, W, C, F, K")
    KH, KW = K, K
    OH = (H + 2 * padding - KH) // stride + 1
    OW = (W + 2 * padding - KW) // stride + 1
    data: T.Tensor((Nb, H, W, C), T.float16)
    weight: T.Tensor((KH, KW, C, F), T.float16)
    out = T.empty((Nb, OH, OW, F), T.float16)
    rows, depth = Nb * OH * OW, KH * KW * C
    with T.Kernel(T.ceildiv(F, block_N), T.ceildiv(rows, block_M), threads=threads) as (bx, by):
        A_s = T.alloc_shared((block_M, block_K), T.float16)
        B_s = T.alloc_shared((block_K, block_N), T.float16)
        acc = T.alloc_fragment((block_M, block_N), T.float32)
        w_flat = T.Tensor((depth, F), T.float16, weight.data)
        o_flat = T.Tensor((rows, F), T.float16, out.data)
        T.clear(acc)
        for k in T.Pipelined(T.ceildiv(depth, block_K), num_stages=2):
            for i, j in T.Parallel(block_M, block_K):
                m = by * block_M + i
                d = k * block_K + j
                n, rest = m // (OH * OW), m % (OH * OW)
                ih = rest // OW * stride - padding + d // (KW * C)
                iw = rest % OW * stride - padding + d // C % KW
                inside = (m < rows) and (d < depth) and (ih >= 0) and (ih < H) and (iw >= 0) and (iw < W)
                A_s[i, j] = T.if_then_else(inside, data[n, ih, iw, d % C], T.cast(0, T.float16))
            T.copy(w_flat[k * block_K, bx * block_N], B_s)
            T.gemm(A_s, B_s, acc)
        T.copy(acc, o_flat[by * block_M, bx * block_N])
    return out


# ---- causal flash attention forward, the scale from Python ------------------------------------
@tilelang.jit
def flash_attn_fwd(Q, K, V, is_causal=True, block_M=64, block_N=64, threads=128):
    """O = softmax(Q K^T / sqrt(D)) V per (batch, head), (B, S, H, D) layout, an online
    softmax in base 2; with ``is_causal`` the key loop stops at the query block's diagonal
    and masks inside it."""
    B, S, H, D = T.const("B, S, H, D")
    scale = (1.0 / D) ** 0.5 * 1.44269504
    shape = [B, S, H, D]
    Q: T.Tensor(shape, T.float16)
    K: T.Tensor(shape, T.float16)
    V: T.Tensor(shape, T.float16)
    O = T.empty(shape, T.float16)
    with T.Kernel(T.ceildiv(S, block_M), H, B, threads=threads) as (bx, by, bz):
        Q_s = T.alloc_shared((block_M, D), T.float16)
        K_s = T.alloc_shared((block_N, D), T.float16)
        V_s = T.alloc_shared((block_N, D), T.float16)
        P_s = T.alloc_shared((block_M, block_N), T.float16)
        acc_s = T.alloc_fragment((block_M, block_N), T.float32)
        acc_o = T.alloc_fragment((block_M, D), T.float32)
        m_i = T.alloc_fragment((block_M,), T.float32)
        m_prev = T.alloc_fragment((block_M,), T.float32)
        l_i = T.alloc_fragment((block_M,), T.float32)
        row = T.alloc_fragment((block_M,), T.float32)
        T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], Q_s)
        T.fill(acc_o, 0)
        T.fill(l_i, 0)
        T.fill(m_i, -T.infinity(T.float32))
        steps = T.ceildiv((bx + 1) * block_M, block_N) if is_causal else T.ceildiv(S, block_N)
        for t in T.Pipelined(steps, num_stages=1):
            T.copy(K[bz, t * block_N:(t + 1) * block_N, by, :], K_s)
            if is_causal:
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(bx * block_M + i >= t * block_N + j, 0,
                                                 -T.infinity(T.float32))
            else:
                T.clear(acc_s)
            T.gemm(Q_s, K_s, acc_s, transpose_B=True)
            T.copy(m_i, m_prev)
            T.reduce_max(acc_s, m_i, dim=1, clear=False)
            for i in T.Parallel(block_M):
                row[i] = T.exp2(m_prev[i] * scale - m_i[i] * scale)
            for i, j in T.Parallel(block_M, block_N):
                acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m_i[i] * scale)
            for i, j in T.Parallel(block_M, D):
                acc_o[i, j] *= row[i]
            T.reduce_sum(acc_s, m_prev, dim=1)
            for i in T.Parallel(block_M):
                l_i[i] = l_i[i] * row[i] + m_prev[i]
            T.copy(acc_s, P_s)
            T.copy(V[bz, t * block_N:(t + 1) * block_N, by, :], V_s)
            T.gemm(P_s, V_s, acc_o)
        for i, j in T.Parallel(block_M, D):
            acc_o[i, j] /= l_i[i]
        T.copy(acc_o, O[bz, bx * block_M:(bx + 1) * block_M, by, :])
    return O


# ---- w4a16 dequant GEMM: uint8 bytes holding two codes, the packed dim K // 2 ------------------
@tilelang.jit
def dequant_w4a16_gemm(A, Bq, Scale, group=64, block_M=64, block_N=64, block_K=64, threads=128):
    """C = A @ W^T with W[n, k] = (nibble k of Bq[n, k // 2] - 8) * Scale[n, k // group]; the
    low nibble is the even k.  K is bound from A (Bq's dim is K // 2, no constant's own)."""
    M, N, K = T.const("M, N, K")
    A: T.Tensor((M, K), T.float16)
    Bq: T.Tensor((N, K // 2), T.uint8)
    Scale: T.Tensor((N, K // group), T.float16)
    C = T.empty((M, N), T.float16)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
        A_s = T.alloc_shared((block_M, block_K), T.float16)
        Bq_s = T.alloc_shared((block_N, block_K // 2), T.uint8)
        W_s = T.alloc_shared((block_N, block_K), T.float16)
        acc = T.alloc_fragment((block_M, block_N), T.float32)
        T.clear(acc)
        for k in T.Pipelined(K // block_K, num_stages=2):
            T.copy(A[by * block_M, k * block_K], A_s)
            T.copy(Bq[bx * block_N, k * block_K // 2], Bq_s)
            for i, j in T.Parallel(block_N, block_K):
                code = (Bq_s[i, j // 2] >> ((j % 2) * 4)) & 15
                W_s[i, j] = (T.cast(code, T.float16) - T.cast(8, T.float16)) * \
                    Scale[bx * block_N + i, (k * block_K + j) // group]
            T.gemm(A_s, W_s, acc, transpose_B=True)
        T.copy(acc, C[by * block_M, bx * block_N])
    return C


# ---- chunked row scan over a T.dynamic row count -----------------------------------------------
@tilelang.jit
def chunked_row_cumsum(X, chunk=64, reverse=False):
    """Y[r, :] = the running sum of X[r, :] inside each chunk of ``chunk`` columns (from the
    chunk's end with ``reverse``); the row count is T.dynamic (one kernel for every M), the
    width a constant."""
    M = T.dynamic("M")
    L = T.const("L")
    assert L % chunk == 0, "the width is whole chunks"
    X: T.Tensor((M, L), T.float32)
    Y = T.empty((M, L), T.float32)
    with T.Kernel(L // chunk, M, threads=chunk) as (bc, r):
        s = T.alloc_shared((1, chunk), T.float32)
        T.copy(X[r, bc * chunk:(bc + 1) * chunk], s)
        T.cumsum(s, dim=1, reverse=reverse)
        T.copy(s, Y[r, bc * chunk:(bc + 1) * chunk])
    return Y


# ---- block-sparse GEMM: a bool mask of shape (M // bM, N // bN, K // bK) -----------------------
@tilelang.jit
def blocksparse_gemm_mask(A, B, Mask, block_M=64, block_N=64, block_K=32, num_stages=2,
                          threads=128, swizzle=True):
    """C = sum over k blocks with Mask[bm, bn, bk] of A_blk @ B_blk, the mask's shape a
    Python tuple of quotients of the constants; ``swizzle`` a flag for T.use_swizzle."""
    M, N, K = T.const("M, N, K")
    mask_shape = (M // block_M, N // block_N, K // block_K)
    A: T.Tensor((M, K), T.float16)
    B: T.Tensor((K, N), T.float16)
    Mask: T.Tensor(mask_shape, "bool")
    C = T.empty((M, N), T.float16)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
        A_s = T.alloc_shared((block_M, block_K), T.float16)
        B_s = T.alloc_shared((block_K, block_N), T.float16)
        acc = T.alloc_fragment((block_M, block_N), T.float32)
        T.use_swizzle(panel_size=4, enable=swizzle)
        T.clear(acc)
        for k in T.Pipelined(K // block_K, num_stages=num_stages):
            if Mask[by, bx, k]:
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, acc)
        T.copy(acc, C[by * block_M, bx * block_N])
    return C


# ---- in-place scaled softmax, a T.macro for the row statistics --------------------------------
@T.macro
def _row_softmax(x, mx, sm, scale):
    T.reduce_max(x, mx, dim=1)
    for i, j in T.Parallel(x.shape[0], x.shape[1]):
        x[i, j] = T.exp((x[i, j] - mx[i]) * scale)
    T.reduce_sum(x, sm, dim=1)
    for i, j in T.Parallel(x.shape[0], x.shape[1]):
        x[i, j] = x[i, j] / sm[i]


@tilelang.jit
def softmax_inplace(X, scale: T.float32, block_M=8):
    """X[r, :] <- softmax(X[r, :] * scale) in place (the body returns nothing); ``scale`` is a
    runtime scalar passed on to a T.macro."""
    M, N = T.const("M, N")
    X: T.Tensor((M, N), T.float16)
    with T.Kernel(T.ceildiv(M, block_M), threads=128) as bm:
        x = T.alloc_fragment((block_M, N), T.float32)
        mx = T.alloc_fragment((block_M,), T.float32)
        sm = T.alloc_fragment((block_M,), T.float32)
        T.copy(X[bm * block_M, 0], x)
        _row_softmax(x, mx, sm, scale)
        T.copy(x, X[bm * block_M, 0])


# ---- transpose of a strided view (T.StridedTensor, constant strides) ---------------------------
@tilelang.jit
def strided_transpose(X, block=32):
    """Y = X^T for X a view with any strides (say every other row and column of a larger
    tensor): its strides are constants bound from the tensor, like its shape."""
    M, N, SM, SN = T.const("M, N, SM, SN")
    X: T.StridedTensor((M, N), (SM, SN), T.float32)
    Y = T.empty((N, M), T.float32)
    with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
        t = T.alloc_shared((block, block + 1), T.float32)
        for i, j in T.Parallel(block, block):
            if by * block + i < M and bx * block + j < N:
                t[i, j] = X[by * block + i, bx * block + j]
        for j, i in T.Parallel(block, block):
            if by * block + i < M and bx * block + j < N:
                Y[bx * block + j, by * block + i] = t[i, j]
    return Y


# ---- GEMM whose M is given as a T.dynamic by keyword ------------------------------------------
@tilelang.jit
def gemm_nt(A, B, block_M=64, block_N=64, block_K=32, num_stages=2, threads=128):
    """C = A @ B^T; compiled ahead of time as ``gemm_nt.compile(M=T.dynamic("m"), N=256,
    K=256)`` (TileLang's autotune test does so), one kernel for every row count."""
    M, N, K = T.const("M, N, K")
    A: T.Tensor((M, K), T.float16)
    B: T.Tensor((N, K), T.float16)
    C = T.empty((M, N), T.float16)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
        A_s = T.alloc_shared((block_M, block_K), T.float16)
        B_s = T.alloc_shared((block_N, block_K), T.float16)
        acc = T.alloc_fragment((block_M, block_N), T.float32)
        T.clear(acc)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
            T.copy(A[by * block_M, k * block_K], A_s)
            T.copy(B[bx * block_N, k * block_K], B_s)
            T.gemm(A_s, B_s, acc, transpose_B=True)
        T.copy(acc, C[by * block_M, bx * block_N])
    return C


# ---- two launches from plain Python functions, over a T.dynamic row count ----------------------
def _launch_row_absmax(X, S, block_M):
    """A plain Python function (no T.macro) opening a kernel of tile ops only: TileLang's
    builder runs it where the eager body calls it."""
    M, N = X.shape
    with T.Kernel(T.ceildiv(M, block_M), threads=128) as bm:
        x = T.alloc_fragment((block_M, N), T.float32)
        amax = T.alloc_fragment((block_M,), T.float32)
        T.copy(X[bm * block_M, 0], x)
        T.reduce_absmax(x, amax, dim=1)
        T.copy(amax, S[bm * block_M])


@T.macro
def _launch_row_normalize(X, S, Y, block_M):
    M, N = X.shape
    with T.Kernel(T.ceildiv(M, block_M), threads=128) as bm:
        for i, j in T.Parallel(block_M, N):
            if bm * block_M + i < M:
                Y[bm * block_M + i, j] = X[bm * block_M + i, j] / T.max(S[bm * block_M + i], 1e-6)


@tilelang.jit
def absmax_normalize_two_launches(X, block_M=16):
    """S = max |X| per row, Y = X / S: the first kernel from a plain Python function, the
    second from a T.macro, both called at the top level; M is T.dynamic, N a constant."""
    M = T.dynamic("M")
    N = T.const("N")
    X: T.Tensor((M, N), T.float32)
    S = T.empty((M,), T.float32)
    Y = T.empty((M, N), T.float32)
    _launch_row_absmax(X, S, block_M)
    _launch_row_normalize(X, S, Y, block_M)
    return Y, S
