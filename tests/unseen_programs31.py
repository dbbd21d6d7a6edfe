"""A thirty-first set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang): TileLang 0.1.15's eager / lazy JIT surface and kernel objects.

Eager kernels (``@tilecute.jit`` functions called with tensors): T.const shapes bound by the
call, T.dynamic dims, T.empty outputs returned, parameters annotated in the signature with
module-level dynamic dims, scalars as parameters, several calls with other shapes / dtypes.
Lazy factories: ``out_idx`` as an int, a list or negative; the same prim_func compiled twice
with other options; ``T.StridedTensor`` / ``strides=``; macros and prim_func builders from a
helper module; ``functools.partial`` of factories; factories called with keywords only.

``tests/test_unseen_programs31.py`` builds each to a cubin on the CPU, checks what matters in
the generated source and the kernel objects, and on a GPU compares with torch."""

import functools

import tilecute
import tilecute.language as T

import unseen31_helpers as H

# module-level dims used in signature annotations
SEQ = T.dynamic("SEQ")
ROWS = T.dynamic("ROWS")


# ---- eager kernels ------------------------------------------------------------------------
@tilecute.jit
def eager_gemm(A, B, block_M: int = 64, block_N: int = 64, block_K: int = 32, num_stages: int = 2):
    """C = A @ B (float32 accumulate), shapes from the call."""
    M, N, K = T.const("M, N, K")
    dtype = T.float16
    A: T.Tensor((M, K), dtype)
    B: T.Tensor((K, N), dtype)
    C = T.empty((M, N), dtype)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        A_s = T.alloc_shared((block_M, block_K), dtype)
        B_s = T.alloc_shared((block_K, block_N), dtype)
        C_f = T.alloc_fragment((block_M, block_N), T.float32)
        T.clear(C_f)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
            T.copy(A[by * block_M, k * block_K], A_s)
            T.copy(B[k * block_K, bx * block_N], B_s)
            T.gemm(A_s, B_s, C_f)
        T.copy(C_f, C[by * block_M, bx * block_N])
    return C


@tilecute.jit
def eager_rmsnorm(X, W, eps: float = 1e-6, block_M: int = 8):
    """Y = X / rms(X) * W; the row count dynamic (one kernel for every M), N a constant."""
    M = T.dynamic("M")
    N = T.const("N")
    X: T.Tensor((M, N), T.float16)
    W: T.Tensor((N,), T.float16)
    Y = T.empty((M, N), T.float16)
    with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
        xf = T.alloc_fragment((block_M, N), T.float32)
        sq = T.alloc_fragment((block_M, N), T.float32)
        ss = T.alloc_fragment((block_M,), T.float32)
        T.copy(X[bx * block_M, 0], xf)
        for i, j in T.Parallel(block_M, N):
            sq[i, j] = xf[i, j] * xf[i, j]
        T.reduce_sum(sq, ss, dim=1)
        for i in T.Parallel(block_M):
            ss[i] = T.rsqrt(ss[i] / N + eps)
        for i, j in T.Parallel(block_M, N):
            xf[i, j] = xf[i, j] * ss[i] * T.cast(W[j], T.float32)
        T.copy(xf, Y[bx * block_M, 0])
    return Y


@tilecute.jit
def eager_softmax_sig(X: T.Tensor((ROWS, 256), T.float32), block_M: int = 4):
    """Row softmax; X annotated in the signature with a module-level dynamic row count."""
    Y = T.empty((ROWS, 256), T.float32)
    with T.Kernel(T.ceildiv(ROWS, block_M), threads=128) as bx:
        f = T.alloc_fragment((block_M, 256), T.float32)
        mx = T.alloc_fragment((block_M,), T.float32)
        sm = T.alloc_fragment((block_M,), T.float32)
        T.copy(X[bx * block_M, 0], f)
        T.reduce_max(f, mx, dim=1)
        for i, j in T.Parallel(block_M, 256):
            f[i, j] = T.exp(f[i, j] - mx[i])
        T.reduce_sum(f, sm, dim=1)
        for i, j in T.Parallel(block_M, 256):
            f[i, j] = f[i, j] / sm[i]
        T.copy(f, Y[bx * block_M, 0])
    return Y


@tilecute.jit
def eager_dtype_cast(X, in_dtype: str = "float16", block: int = 256):
    """Y = float32(X) * 2; the input dtype a keyword (several calls, one kernel each)."""
    N = T.const("N")
    X: T.Tensor((N,), in_dtype)
    Y = T.empty((N,), T.float32)
    with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
        for i in T.Parallel(block):
            if bx * block + i < N:
                Y[bx * block + i] = T.cast(X[bx * block + i], T.float32) * 2.0
    return Y


@tilecute.jit
def eager_scaled_add(X, Y, alpha: T.float32, beta: T.float32, block: int = 128):
    """Z = alpha * X + beta * Y with alpha, beta runtime scalars (one kernel for all values)."""
    M, N = T.const("M N")
    X: T.Tensor[(M, N), T.float32]
    Y: T.Tensor[(M, N), T.float32]
    Z = T.empty((M, N), T.float32)
    with T.Kernel(T.ceildiv(M * N, block), threads=block) as bx:
        for i in T.Parallel(block):
            g = bx * block + i
            if g < M * N:
                Z[g // N, g % N] = alpha * X[g // N, g % N] + beta * Y[g // N, g % N]
    return Z


@tilecute.jit
def eager_two_outputs(X, block_M: int = 16):
    """Row max and row sum of X: two T.empty outputs returned as a tuple."""
    M, N = T.const("M, N")
    X: T.Tensor((M, N), T.float32)
    RowMax = T.empty((M,), T.float32)
    RowSum = T.empty((M,), T.float32)
    with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
        f = T.alloc_fragment((block_M, N), T.float32)
        a = T.alloc_fragment((block_M,), T.float32)
        b = T.alloc_fragment((block_M,), T.float32)
        T.copy(X[bx * block_M, 0], f)
        T.reduce_max(f, a, dim=1)
        T.reduce_sum(f, b, dim=1)
        T.copy(a, RowMax[bx * block_M])
        T.copy(b, RowSum[bx * block_M])
    return RowMax, RowSum


@tilecute.jit
def eager_cumsum_rows(X, block_M: int = 4):
    """Inclusive scan of each row (T.cumsum over a shared tile)."""
    M, N = T.const("M, N")
    X: T.Tensor((M, N), T.float32)
    Y = T.empty((M, N), T.float32)
    with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
        s = T.alloc_shared((block_M, N), T.float32)
        T.copy(X[bx * block_M, 0], s)
        T.cumsum(s, dim=1)
        T.copy(s, Y[bx * block_M, 0])
    return Y


@tilecute.jit
def eager_macro_softmax(S, scale: float = 1.0, block_M: int = 8):
    """Row softmax through a macro imported from the helper module."""
    M, N = T.const("M, N")
    S: T.Tensor((M, N), T.float32)
    P = T.empty((M, N), T.float32)
    with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
        f = T.alloc_fragment((block_M, N), T.float32)
        mx = T.alloc_fragment((block_M,), T.float32)
        sm = T.alloc_fragment((block_M,), T.float32)
        T.copy(S[bx * block_M, 0], f)
        H.row_reduce_max_sum(f, mx, sm, scale)
        for i, j in T.Parallel(block_M, N):
            f[i, j] = f[i, j] / sm[i]
        T.copy(f, P[bx * block_M, 0])
    return P


@tilecute.jit
def eager_strided_rows(X, block_M: int = 16):
    """Y = X + 1 over a row-strided view: T.StridedTensor whose leading dimension is a T.const
    bound from the tensor's stride (one kernel a stride)."""
    M, N, ld = T.const("M, N, ld")
    X: T.StridedTensor((M, N), (ld, 1), T.float32)
    Y = T.empty((M, N), T.float32)
    with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
        for i, j in T.Parallel(block_M, N):
            Y[bx * block_M + i, j] = X[bx * block_M + i, j] + 1.0
    return Y


@tilecute.jit
def eager_strided_dynamic(X, block_M: int = 16):
    """The same with the leading dimension T.dynamic: one kernel for every stride."""
    M, N = T.const("M, N")
    ld = T.dynamic("ld")
    X: T.StridedTensor((M, N), (ld, 1), T.float32)
    Y = T.empty((M, N), T.float32)
    with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
        for i, j in T.Parallel(block_M, N):
            Y[bx * block_M + i, j] = X[bx * block_M + i, j] + 1.0
    return Y


@tilecute.jit
def eager_shape_from_tensor(X, W, eps: float = 1e-5, block_M: int = 4):
    """LayerNorm with weight: the dims declared inline (``T.const`` inside the declaration),
    read back from the declared tensor (``M, N = X.shape``), the output dtype ``X.dtype``."""
    X: T.Tensor((T.const("M"), T.const("N")), T.bfloat16)
    M, N = X.shape
    W: T.Tensor((N,), T.float32)
    Y = T.empty((M, N), X.dtype)
    with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
        xf = T.alloc_fragment((block_M, N), T.float32)
        sq = T.alloc_fragment((block_M, N), T.float32)
        mean = T.alloc_fragment((block_M,), T.float32)
        var = T.alloc_fragment((block_M,), T.float32)
        T.copy(X[bx * block_M, 0], xf)
        T.reduce_sum(xf, mean, dim=1)
        for i in T.Parallel(block_M):
            mean[i] = mean[i] / N
        for i, j in T.Parallel(block_M, N):
            sq[i, j] = (xf[i, j] - mean[i]) * (xf[i, j] - mean[i])
        T.reduce_sum(sq, var, dim=1)
        for i, j in T.Parallel(block_M, N):
            xf[i, j] = (xf[i, j] - mean[i]) * T.rsqrt(var[i] / N + eps) * W[j]
        T.copy(xf, Y[bx * block_M, 0])
    return Y


@tilecute.jit
def eager_sig_shape_rows(X: T.Tensor((SEQ, 128), T.float16), block_M: int = 16):
    """Y = |X| with the dims read from a signature-annotated tensor's shape."""
    rows, cols = X.shape
    Y = T.empty((rows, cols), X.dtype)
    with T.Kernel(T.ceildiv(rows, block_M), threads=128) as bx:
        for i, j in T.Parallel(block_M, cols):
            Y[bx * block_M + i, j] = T.abs(X[bx * block_M + i, j])
    return Y


@tilecute.jit
def eager_transpose_tuple_consts(X, block: int = 32):
    """Y = X^T through a shared tile; the constants declared one call each
    (``M, N = T.const("M"), T.const("N")``)."""
    M, N = T.const("M"), T.const("N")
    X: T.Tensor((M, N), T.float16)
    Y = T.empty((N, M), T.float16)
    with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
        s = T.alloc_shared((block, block), T.float16)
        T.copy(X[by * block, bx * block], s)
        for i, j in T.Parallel(block, block):
            Y[bx * block + i, by * block + j] = s[j, i]
    return Y


@tilecute.jit
def eager_masked_tail_scale(X, n_valid, scale: T.float32, block: int = 256):
    """Y[:n_valid] = X[:n_valid] * scale, zero after: the grid computed in a Python
    statement from the runtime scalar n_valid (declared in the body) and one from the
    signature's scalar scale (neither a constant: one kernel for every value)."""
    N = T.const("N")
    X: T.Tensor((N,), T.float32)
    n_valid: T.int32
    n_blocks = T.ceildiv(n_valid, block)
    half = scale * 0.5
    Y = T.empty((N,), T.float32)
    with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
        for i in T.Parallel(block):
            g = bx * block + i
            if g < N:
                Y[g] = T.if_then_else(bx < n_blocks and g < n_valid, X[g] * (half + half), 0.0)
    return Y


@tilecute.jit
def eager_strided_both(X, block: int = 64):
    """Y = 3 X over any 2-D view (every other column, a transpose): both strides T.const,
    bound from the view (one kernel a layout)."""
    M, N, s0, s1 = T.const("M, N, s0, s1")
    X: T.StridedTensor((M, N), (s0, s1), T.float32)
    Y = T.empty((M, N), T.float32)
    with T.Kernel(M, threads=block) as bx:
        for j in T.Parallel(N):
            Y[bx, j] = X[bx, j] * 3.0
    return Y


@tilecute.jit
def eager_qkv_slice_rmsnorm(Q, eps: float = 1e-6):
    """Per-head RMS norm of the Q part of a packed (B, S, 3 * D) QKV tensor, passed as the
    slice qkv[:, :, :D]: batch and row strides T.dynamic (one kernel for every packing)."""
    B, S, D = T.const("B, S, D")
    sb, ss = T.dynamic("sb, ss")
    Q: T.StridedTensor((B, S, D), (sb, ss, 1), T.float16)
    Y = T.empty((B, S, D), T.float16)
    with T.Kernel(S, B, threads=128) as (bx, by):
        row = T.alloc_fragment((1, D), T.float32)
        sq = T.alloc_fragment((1, D), T.float32)
        acc = T.alloc_fragment((1,), T.float32)
        for j in T.Parallel(D):
            row[0, j] = T.cast(Q[by, bx, j], T.float32)
            sq[0, j] = row[0, j] * row[0, j]
        T.reduce_sum(sq, acc, dim=1)
        for j in T.Parallel(D):
            Y[by, bx, j] = T.cast(row[0, j] * T.rsqrt(acc[0] / D + eps), T.float16)
    return Y


@tilecute.jit
def eager_flash_fwd(Q, K, V, block_M: int = 64, block_N: int = 64):
    """Single-head flash attention forward, the online softmax step a macro of the helper
    module (which calls another of its macros and reads a module constant)."""
    S, D = T.const("S, D")
    Q: T.Tensor((S, D), T.float16)
    K: T.Tensor((S, D), T.float16)
    V: T.Tensor((S, D), T.float16)
    O = T.empty((S, D), T.float16)
    scale = D ** -0.5
    with T.Kernel(T.ceildiv(S, block_M), threads=128) as bx:
        Q_s = T.alloc_shared((block_M, D), T.float16)
        K_s = T.alloc_shared((block_N, D), T.float16)
        V_s = T.alloc_shared((block_N, D), T.float16)
        P_s = T.alloc_shared((block_M, block_N), T.float16)
        acc_s = T.alloc_fragment((block_M, block_N), T.float32)
        acc_o = T.alloc_fragment((block_M, D), T.float32)
        m = T.alloc_fragment((block_M,), T.float32)
        m_prev = T.alloc_fragment((block_M,), T.float32)
        l = T.alloc_fragment((block_M,), T.float32)
        r = T.alloc_fragment((block_M,), T.float32)
        T.copy(Q[bx * block_M, 0], Q_s)
        T.clear(acc_o)
        T.clear(l)
        T.fill(m, -T.infinity(T.float32))
        for k in T.Pipelined(T.ceildiv(S, block_N), num_stages=1):
            T.copy(K[k * block_N, 0], K_s)
            T.copy(V[k * block_N, 0], V_s)
            T.clear(acc_s)
            T.gemm(Q_s, K_s, acc_s, transpose_B=True)
            H.online_softmax_step(acc_s, m, m_prev, l, r, scale)
            for i, j in T.Parallel(block_M, D):
                acc_o[i, j] = acc_o[i, j] * r[i]
            T.copy(acc_s, P_s)
            T.gemm(P_s, V_s, acc_o)
        for i, j in T.Parallel(block_M, D):
            acc_o[i, j] = acc_o[i, j] / l[i]
        T.copy(acc_o, O[bx * block_M, 0])
    return O


@tilecute.jit
def eager_residual_inplace(X, R, alpha: float = 1.0, block_M: int = 8):
    """R += alpha * X in place (no T.empty: the call returns None); R declared from X's
    shape and dtype (``R: T.Tensor(X.shape, X.dtype)``)."""
    M, N = T.const("M, N")
    X: T.Tensor((M, N), T.float16)
    R: T.Tensor(X.shape, X.dtype)
    with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
        for i, j in T.Parallel(block_M, N):
            R[bx * block_M + i, j] = T.cast(T.cast(R[bx * block_M + i, j], T.float32) +
                                            alpha * T.cast(X[bx * block_M + i, j], T.float32), T.float16)


# ---- lazy factories and kernel objects ----------------------------------------------------
@tilecute.jit(out_idx=-1)
def layernorm_out_int(M, N, block_M=8, dtype=T.float16, eps=1e-5):
    """LayerNorm without affine; out_idx given as a bare negative int."""

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            xf = T.alloc_fragment((block_M, N), T.float32)
            t = T.alloc_fragment((block_M, N), T.float32)
            mean = T.alloc_fragment((block_M,), T.float32)
            var = T.alloc_fragment((block_M,), T.float32)
            T.copy(X[bx * block_M, 0], xf)
            T.reduce_sum(xf, mean, dim=1)
            for i in T.Parallel(block_M):
                mean[i] = mean[i] / N
            for i, j in T.Parallel(block_M, N):
                t[i, j] = (xf[i, j] - mean[i]) * (xf[i, j] - mean[i])
            T.reduce_sum(t, var, dim=1)
            for i, j in T.Parallel(block_M, N):
                xf[i, j] = (xf[i, j] - mean[i]) * T.rsqrt(var[i] / N + eps)
            T.copy(xf, Y[bx * block_M, 0])

    return main


@tilecute.jit(out_idx=[1, 2])
def split_gate_up(M, N, block_M=16):
    """GU (M, 2N) split into G and U (two outputs by a positive list of indices)."""

    @T.prim_func
    def main(GU: T.Tensor((M, 2 * N), T.float16), G: T.Tensor((M, N), T.float16), U: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            for i, j in T.Parallel(block_M, N):
                G[bx * block_M + i, j] = GU[bx * block_M + i, j]
                U[bx * block_M + i, j] = GU[bx * block_M + i, N + j]

    return main


@tilecute.jit(out_idx=[-2, -1])
def silu_mul_two_outputs(M, N, block_N=128):
    """Out = silu(G) * U and Act = silu(G) (two outputs by negative indices)."""

    @T.prim_func
    def main(G: T.Tensor((M, N), T.float32), U: T.Tensor((M, N), T.float32),
             Out: T.Tensor((M, N), T.float32), Act: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), M, threads=128) as (bx, by):
            for j in T.Parallel(block_N):
                g = G[by, bx * block_N + j]
                a = g / (1.0 + T.exp(-g))
                Act[by, bx * block_N + j] = a
                Out[by, bx * block_N + j] = a * U[by, bx * block_N + j]

    return main


def gemm_prim(M, N, K, block_M=64, block_N=64, block_K=32, num_stages=2, threads=128):
    """A plain prim_func builder (no jit): compiled with tilecute.compile twice."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((N, K), T.float16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            B_s = T.alloc_shared((block_N, block_K), T.float16)
            C_f = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[bx * block_N, k * block_K], B_s)
                T.gemm(A_s, B_s, C_f, transpose_B=True)
            T.copy(C_f, C[by * block_M, bx * block_N])

    return main


@tilecute.jit(out_idx=[-1])
def strided_rows_copy(M, N, ld, block_M=16):
    """Y = 2 * X where X is a row-strided view (leading dimension ld >= N): T.StridedTensor."""

    @T.prim_func
    def main(X: T.StridedTensor((M, N), (ld, 1), T.float32), Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            for i, j in T.Parallel(block_M, N):
                Y[bx * block_M + i, j] = X[bx * block_M + i, j] * 2.0

    return main


@tilecute.jit(out_idx=[-1])
def transposed_view_sum(M, N, block_N=32):
    """colsum over a column-major (M, N) input (a torch .t() view): T.StridedTensor with
    strides (1, M).  (TileLang's T.Tensor takes no strides=; T.Buffer does, deprecated.)"""

    @T.prim_func
    def main(X: T.StridedTensor((M, N), (1, M), T.float32), S: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), threads=128) as bx:
            acc = T.alloc_fragment((block_N,), T.float32)
            T.clear(acc)
            for i in T.serial(M):
                for j in T.Parallel(block_N):
                    acc[j] += X[i, bx * block_N + j]
            T.copy(acc, S[bx * block_N])

    return main


@tilecute.jit(out_idx=[-1])
def helper_rowscale(M, N):
    """A prim_func built by the helper module's builder, returned from a jit factory."""
    return H.make_rowscale(M, N, block_M=32)


@tilecute.jit(out_idx=[-1])
def tile_copy_macro(M, N, block_M=32, block_N=64):
    """Y = X + 1 via shared tiles loaded by the helper module's macro."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float16), Y: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            s = T.alloc_shared((block_M, block_N), T.float16)
            H.load_tile(X, s, by * block_M, bx * block_N)
            for i, j in T.Parallel(block_M, block_N):
                Y[by * block_M + i, bx * block_N + j] = s[i, j] + T.float16(1)

    return main


def _attn_scores(*, batch, heads, seq, dim, block_M=64, block_N=64, sm_scale=None):
    """S = softmax(Q K^T * scale) for one row block (an attention piece); keyword-only."""
    scale = sm_scale if sm_scale is not None else dim ** -0.5

    @T.prim_func
    def main(Q: T.Tensor((batch, heads, seq, dim), T.float16), K: T.Tensor((batch, heads, seq, dim), T.float16),
             P: T.Tensor((batch, heads, seq, seq), T.float32)):
        with T.Kernel(T.ceildiv(seq, block_M), heads, batch, threads=128) as (bx, by, bz):
            Q_s = T.alloc_shared((block_M, dim), T.float16)
            K_s = T.alloc_shared((seq, dim), T.float16)
            S_f = T.alloc_fragment((block_M, seq), T.float32)
            mx = T.alloc_fragment((block_M,), T.float32)
            sm = T.alloc_fragment((block_M,), T.float32)
            T.copy(Q[bz, by, bx * block_M:(bx + 1) * block_M, :], Q_s)
            T.copy(K[bz, by, :, :], K_s)
            T.clear(S_f)
            T.gemm(Q_s, K_s, S_f, transpose_B=True)
            H.row_reduce_max_sum(S_f, mx, sm, scale)
            for i, j in T.Parallel(block_M, seq):
                S_f[i, j] = S_f[i, j] / sm[i]
            T.copy(S_f, P[bz, by, bx * block_M:(bx + 1) * block_M, :])

    return main


attn_scores = tilecute.jit(out_idx=[-1])(_attn_scores)
attn_scores_fixed_scale = functools.partial(attn_scores, sm_scale=0.125)


@tilecute.jit(out_idx=[-1])
def chunk_scan(*, B, L, chunk=64, dtype=T.float32):
    """Chunked prefix sum: a running carry across chunks (scan); keyword-only factory."""

    @T.prim_func
    def main(X: T.Tensor((B, L), dtype), Y: T.Tensor((B, L), dtype)):
        with T.Kernel(B, threads=chunk) as b:
            s = T.alloc_shared((chunk,), dtype)
            carry = T.alloc_local((1,), dtype)
            carry[0] = 0
            for c in T.serial(T.ceildiv(L, chunk)):
                T.copy(X[b, c * chunk:(c + 1) * chunk], s)
                T.cumsum(s, dim=0)
                for i in T.Parallel(chunk):
                    Y[b, c * chunk + i] = s[i] + carry[0]
                carry[0] = carry[0] + s[chunk - 1]

    return main


@tilecute.jit(out_idx=[-1])
def gemm_bias_relu(M, N, K, block_M=64, block_N=64, block_K=32, relu=True):
    """C = relu(A @ B + bias) with the bias row broadcast."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), bias: T.Tensor((N,), T.float32),
             C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            B_s = T.alloc_shared((block_K, block_N), T.float16)
            C_f = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_f)
            for i, j in T.Parallel(block_M, block_N):
                v = C_f[i, j] + bias[bx * block_N + j]
                C_f[i, j] = T.max(v, 0.0) if relu else v
            T.copy(C_f, C[by * block_M, bx * block_N])

    return main


gemm_bias_linear = functools.partial(gemm_bias_relu, relu=False)


# a decorator made by functools.partial of tilecute.jit (a repository's `jit_out_last`)
jit_out_last = functools.partial(tilecute.jit, out_idx=[-1], pass_configs={"tl.disable_tma_lower": True})


@jit_out_last
def log_softmax_rows(M, N, block_M=4, dtype=T.float32):
    """Y = log_softmax(X) over rows."""

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            f = T.alloc_fragment((block_M, N), T.float32)
            e = T.alloc_fragment((block_M, N), T.float32)
            mx = T.alloc_fragment((block_M,), T.float32)
            sm = T.alloc_fragment((block_M,), T.float32)
            T.copy(X[bx * block_M, 0], f)
            T.reduce_max(f, mx, dim=1)
            for i, j in T.Parallel(block_M, N):
                e[i, j] = T.exp(f[i, j] - mx[i])
            T.reduce_sum(e, sm, dim=1)
            for i, j in T.Parallel(block_M, N):
                f[i, j] = f[i, j] - mx[i] - T.log(sm[i])
            T.copy(f, Y[bx * block_M, 0])

    return main
