"""A twenty-first set of programs in TileLang's idioms (written for tilecute, not taken from
TileLang), about what crosses the host boundary: ``T.dynamic`` / ``T.symbolic`` dims in the
batch, sequence and hidden positions with tails that are not tile multiples, one symbol
shared by several tensors, dims written as expressions of symbols (``N * 2``, ``M // 4``),
scalar kernel arguments (``T.int32``, ``T.int64``, ``T.float32``, ``T.float64``, ``T.bool``)
used in bounds and arithmetic, tensors of int8 / uint8 / int64 / bool / float64 /
bfloat16 / float8, ``T.StridedTensor`` parameters fed by non-contiguous torch views
(a row slice, a transposed matrix), 0-size dims at call time, ``out_idx`` with several
outputs and negative indices, and outputs whose shapes are expressions of symbols.

``tests/test_unseen_programs21.py`` builds each to a cubin on the CPU, reads the generated
CuTe DSL and C++ launcher, calls each launcher with wrong arguments (dtype, rank, fixed
dim, disagreeing symbols, a CPU tensor, a non-contiguous tensor) and on a GPU compares each
with a torch reference."""

import tilecute
import tilecute.language as T


# ---- dynamic dims in every position, tails that are not tile multiples ---------------------
@tilecute.jit(out_idx=[-1])
def affine_rows_scalars(block_M=32, block_N=64, threads=128):
    """``Y = alpha * X + beta`` over a (M, N) tensor whose both dims are dynamic; alpha and
    beta are ``T.float32`` kernel arguments, ``n_valid`` (a ``T.int32`` argument) masks
    the columns past it to 0.  The last block row and column are ragged."""
    M, N = T.dynamic("M"), T.dynamic("N")

    @T.prim_func
    def affine(X: T.Tensor((M, N), T.float32), alpha: T.float32, beta: T.float32,
               n_valid: T.int32, Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            for i, j in T.Parallel(block_M, block_N):
                r = by * block_M + i
                c = bx * block_N + j
                if r < M and c < N:
                    Y[r, c] = T.if_then_else(c < n_valid, alpha * X[r, c] + beta, 0.0)

    return affine


@tilecute.jit(out_idx=[1])
def rmsnorm_bsh_dynamic(eps=1e-6, block_H=128, threads=128):
    """RMSNorm over the hidden dim of a (batch, seq, hidden) bf16 tensor, all three dims
    ``T.symbolic``: one block per (b, s) row walks hidden in ``block_H`` chunks (the last
    one ragged) twice, once for the sum of squares, once to scale."""
    B, S, H = T.symbolic("batch"), T.symbolic("seq"), T.symbolic("hidden")

    @T.prim_func
    def rms(X: T.Tensor((B, S, H), T.bfloat16), Y: T.Tensor((B, S, H), T.bfloat16)):
        with T.Kernel(S, B, threads=threads) as (s, b):
            xs = T.alloc_fragment((block_H,), T.float32)
            sq = T.alloc_fragment((block_H,), T.float32)
            tot = T.alloc_fragment((1,), T.float32)
            acc = T.alloc_fragment((1,), T.float32)
            T.clear(acc)
            for k in T.serial(T.ceildiv(H, block_H)):
                for j in T.Parallel(block_H):
                    h = k * block_H + j
                    xs[j] = T.if_then_else(h < H, T.cast(X[b, s, h], T.float32), 0.0)
                    sq[j] = xs[j] * xs[j]
                T.reduce_sum(sq, tot, dim=0)
                acc[0] += tot[0]
            for k in T.serial(T.ceildiv(H, block_H)):
                for j in T.Parallel(block_H):
                    h = k * block_H + j
                    if h < H:
                        Y[b, s, h] = T.cast(T.cast(X[b, s, h], T.float32) *
                                            T.rsqrt(acc[0] / T.cast(H, T.float32) + eps),
                                            T.bfloat16)

    return rms


@tilecute.jit(out_idx=[-1])
def bias_gelu_shared_symbol(block_M=16, block_N=128, threads=128):
    """``Y = gelu(X + bias) * gate`` where X, gate and Y share both symbols and bias shares
    N: the launcher binds M and N once and checks every other tensor against them."""
    M, N = T.dynamic("M"), T.dynamic("N")

    @T.prim_func
    def bias_gelu(X: T.Tensor((M, N), T.float16), bias: T.Tensor((N,), T.float16),
                  gate: T.Tensor((M, N), T.float16), Y: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            for i, j in T.Parallel(block_M, block_N):
                r = by * block_M + i
                c = bx * block_N + j
                if r < M and c < N:
                    v = T.cast(X[r, c], T.float32) + T.cast(bias[c], T.float32)
                    g = 0.5 * v * (1.0 + T.erf(v * 0.7071067811865476))
                    Y[r, c] = T.cast(g * T.cast(gate[r, c], T.float32), T.float16)

    return bias_gelu


@tilecute.jit(out_idx=[2])
def concat_cols_expr_shape(block_M=32, block_N=32, threads=128):
    """``Out[:, :N] = A``, ``Out[:, N:] = B``: the output is declared ``(M, N * 2)``, so
    ``out_idx`` allocates it from the bound symbols, and a caller's own Out must have
    ``2 * N`` columns."""
    M, N = T.dynamic("M"), T.dynamic("N")

    @T.prim_func
    def concat(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32),
               Out: T.Tensor((M, N * 2), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            a_s = T.alloc_shared((block_M, block_N), T.float32)
            b_s = T.alloc_shared((block_M, block_N), T.float32)
            T.copy(A[by * block_M, bx * block_N], a_s)
            T.copy(B[by * block_M, bx * block_N], b_s)
            for i, j in T.Parallel(block_M, block_N):
                r = by * block_M + i
                c = bx * block_N + j
                if r < M and c < N:
                    Out[r, c] = a_s[i, j]
                    Out[r, c + N] = b_s[i, j]

    return concat


@tilecute.jit(out_idx=[1])
def group_quads_floordiv(threads=128):
    """A flat (L,) int32 tensor summed in groups of 4 into an ``(L // 4,)`` output; L must be
    a multiple of 4 only for the output's size, the kernel reads the whole groups."""
    L = T.dynamic("L")

    @T.prim_func
    def quads(X: T.Tensor((L,), T.int32), Y: T.Tensor((L // 4,), T.int32)):
        with T.Kernel(T.ceildiv(L // 4, threads), threads=threads) as bx:
            for t in T.Parallel(threads):
                g = bx * threads + t
                if g < L // 4:
                    Y[g] = X[g * 4] + X[g * 4 + 1] + X[g * 4 + 2] + X[g * 4 + 3]

    return quads


@tilecute.jit(out_idx=[-1])
def row_window_scalar_bounds(N=96, threads=128):
    """Rows ``start .. start + count`` of X copied to the output's first ``count`` rows, the
    rest zero: ``start`` and ``count`` are ``T.int32`` arguments used as loop bounds and in
    index arithmetic; the hidden dim is fixed (96)."""
    M = T.dynamic("M")

    @T.prim_func
    def window(X: T.Tensor((M, N), T.float16), start: T.int32, count: T.int32,
               Y: T.Tensor((M, N), T.float16)):
        with T.Kernel(M, threads=threads) as r:
            for j in T.Parallel(N):
                Y[r, j] = T.float16(0)
            if r < count and start + r < M:
                for j in T.Parallel(N):
                    Y[r, j] = X[start + r, j]

    return window


# ---- integer, bool and float64 tensors ------------------------------------------------------
@tilecute.jit(out_idx=[-1])
def int8_rowsum_dyn(block_K=64, threads=64):
    """Row sums of an int8 (M, K) tensor into int32, both dims dynamic, K walked in
    chunks with a ragged last chunk (each thread owns a strided column set)."""
    M, K = T.dynamic("M"), T.dynamic("K")

    @T.prim_func
    def rowsum(X: T.Tensor((M, K), T.int8), S: T.Tensor((M,), T.int32)):
        with T.Kernel(M, threads=threads) as r:
            part = T.alloc_fragment((block_K,), T.int32)
            tot = T.alloc_fragment((1,), T.int32)
            T.clear(part)
            for k in T.serial(T.ceildiv(K, block_K)):
                for j in T.Parallel(block_K):
                    c = k * block_K + j
                    part[j] += T.if_then_else(c < K, T.cast(X[r, c], T.int32), 0)
            T.reduce_sum(part, tot, dim=0)
            S[r] = tot[0]

    return rowsum


@tilecute.jit(out_idx=[-1])
def uint8_xor_key(threads=256):
    """Each byte of a (N,) uint8 tensor XOR-ed with the low byte of ``key + i`` (``key`` a
    ``T.int32`` argument) and rotated left by 3 bits."""
    N = T.dynamic("N")

    @T.prim_func
    def xor_key(X: T.Tensor((N,), T.uint8), key: T.int32, Y: T.Tensor((N,), T.uint8)):
        with T.Kernel(T.ceildiv(N, threads), threads=threads) as bx:
            for t in T.Parallel(threads):
                i = bx * threads + t
                if i < N:
                    k = T.cast((key + i) & 255, T.uint8)
                    v = X[i] ^ k
                    Y[i] = T.cast(((v << 3) | (v >> 5)) & T.uint8(255), T.uint8)

    return xor_key


@tilecute.jit(out_idx=[-1])
def int64_index_gather_rows(D=64, threads=64):
    """``Out[i, :] = Table[idx[i], :] * scale`` with int64 indices (a torch ``long`` tensor),
    a dynamic number of lookups and of table rows; an index outside ``[0, V)`` gives a
    zero row."""
    n, V = T.dynamic("n"), T.dynamic("V")

    @T.prim_func
    def gather(Table: T.Tensor((V, D), T.float32), idx: T.Tensor((n,), T.int64),
               scale: T.float32, Out: T.Tensor((n, D), T.float32)):
        with T.Kernel(n, threads=threads) as i:
            row = idx[i]
            for j in T.Parallel(D):
                Out[i, j] = T.if_then_else(row >= 0 and row < T.cast(V, T.int64),
                                           Table[row, j] * scale, 0.0)

    return gather


@tilecute.jit(out_idx=[-2, -1])
def bool_mask_where_count(threads=128):
    """``Y = where(mask, X, fill)`` over a dynamic (N,) tensor with a ``T.bool`` mask, and
    the number of true elements, atomically counted into a (1,) int32 output; ``fill`` is a
    ``T.float32`` argument.  Two outputs named by negative ``out_idx`` (an ``out_idx``
    output is ``torch.empty``, in TileLang too: to count, compile with ``out_idx=[3]`` and
    pass a zeroed ``count``, as the GPU tests do)."""
    N = T.dynamic("N")

    @T.prim_func
    def where(X: T.Tensor((N,), T.float32), mask: T.Tensor((N,), T.bool), fill: T.float32,
              Y: T.Tensor((N,), T.float32), count: T.Tensor((1,), T.int32)):
        with T.Kernel(T.ceildiv(N, threads), threads=threads) as bx:
            for t in T.Parallel(threads):
                i = bx * threads + t
                if i < N:
                    Y[i] = T.if_then_else(mask[i], X[i], fill)
                    if mask[i]:
                        T.atomic_add(count[0], 1)

    return where


@tilecute.jit(out_idx=[-1])
def float64_axpby_scalars(threads=128):
    """``Z = a * X + b * Y`` in float64 with ``T.float64`` scalars, over a 2-D tensor whose
    leading dim is dynamic and trailing dim fixed at 33 (a tail in every row)."""
    M = T.dynamic("M")
    N = 33

    @T.prim_func
    def axpby(X: T.Tensor((M, N), T.float64), Y: T.Tensor((M, N), T.float64), a: T.float64,
              b: T.float64, Z: T.Tensor((M, N), T.float64)):
        with T.Kernel(M, threads=threads) as r:
            for j in T.Parallel(N):
                Z[r, j] = a * X[r, j] + b * Y[r, j]

    return axpby


@tilecute.jit(out_idx=[-1])
def fp8_rows_dequant_bf16(block_N=128, threads=128):
    """A float8_e4m3 (M, N) tensor with a float32 scale per row dequantized to bfloat16;
    M and N dynamic, the row's last chunk ragged."""
    M, N = T.dynamic("M"), T.dynamic("N")

    @T.prim_func
    def deq(Q: T.Tensor((M, N), T.float8_e4m3), scale: T.Tensor((M,), T.float32),
            Y: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(T.ceildiv(N, block_N), M, threads=threads) as (bx, r):
            for j in T.Parallel(block_N):
                c = bx * block_N + j
                if c < N:
                    Y[r, c] = T.cast(T.cast(Q[r, c], T.float32) * scale[r], T.bfloat16)

    return deq


@tilecute.jit(out_idx=[-1])
def fp8_e5m2_to_half_scale(threads=128):
    """A float8_e5m2 (N,) tensor to float16 times a ``T.float32`` argument."""
    N = T.dynamic("N")

    @T.prim_func
    def up(Q: T.Tensor((N,), T.float8_e5m2), s: T.float32, Y: T.Tensor((N,), T.float16)):
        with T.Kernel(T.ceildiv(N, threads), threads=threads) as bx:
            for t in T.Parallel(threads):
                i = bx * threads + t
                if i < N:
                    Y[i] = T.cast(T.cast(Q[i], T.float32) * s, T.float16)

    return up


# ---- strided parameters fed by torch views -------------------------------------------------
@tilecute.jit(out_idx=[-1])
def strided_rows_slice_scale(block_M=16, block_N=64, threads=128):
    """A ``T.StridedTensor((M, N), (ld, 1))`` input: the caller passes ``x[:, :N]`` of a
    wider tensor (row stride ``ld`` > N, read from the tensor's strides), scaled by a
    ``T.float32`` argument into a contiguous output."""
    M, N, ld = T.dynamic("M"), T.dynamic("N"), T.dynamic("ld")

    @T.prim_func
    def scale_view(X: T.StridedTensor((M, N), (ld, 1), T.float16), s: T.float32,
                   Y: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            tile = T.alloc_shared((block_M, block_N), T.float16)
            T.copy(X[by * block_M, bx * block_N], tile)
            for i, j in T.Parallel(block_M, block_N):
                r = by * block_M + i
                c = bx * block_N + j
                if r < M and c < N:
                    Y[r, c] = T.cast(T.cast(tile[i, j], T.float32) * s, T.float16)

    return scale_view


@tilecute.jit(out_idx=[-1])
def colmajor_input_colsum(block_N=32, threads=128):
    """Column sums of a matrix handed over transposed: ``A`` is declared
    ``T.StridedTensor((M, N), (1, ld))`` (column-major, the stride of a column ``ld``), so
    ``x.t()`` of a row-major (N, M) tensor binds without a copy."""
    M, N, ld = T.dynamic("M"), T.dynamic("N"), T.dynamic("ld")

    @T.prim_func
    def colsum(A: T.StridedTensor((M, N), (1, ld), T.float32), S: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), threads=threads) as bx:
            part = T.alloc_fragment((4, block_N), T.float32)
            out = T.alloc_fragment((block_N,), T.float32)
            T.clear(part)
            for k in T.serial(T.ceildiv(M, 4)):
                for i, j in T.Parallel(4, block_N):
                    r = k * 4 + i
                    c = bx * block_N + j
                    if r < M and c < N:
                        part[i, j] += A[r, c]
            T.reduce_sum(part, out, dim=0)
            for j in T.Parallel(block_N):
                if bx * block_N + j < N:
                    S[bx * block_N + j] = out[j]

    return colsum


@tilecute.jit(out_idx=[-1])
def static_strides_every_other_row(M=64, N=48, threads=128):
    """A fixed-stride view: ``X: T.StridedTensor((M, N), (2 * N, 1))`` reads every other
    row of a (2M, N) tensor (``x[::2]``); a caller's contiguous (M, N) tensor is refused
    (its row stride is N)."""

    @T.prim_func
    def even_rows(X: T.StridedTensor((M, N), (2 * N, 1), T.float32), Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(M, threads=threads) as r:
            for j in T.Parallel(N):
                Y[r, j] = X[r, j] + 1.0

    return even_rows


# ---- GEMMs with dynamic dims ------------------------------------------------------------------
@tilecute.jit(out_idx=[-1])
def gemm_dynamic_tokens_bf16(N=256, K=128, block_M=64, block_N=128, block_K=32, threads=128):
    """``C = A @ W^T`` with a dynamic token count M (ragged last block row) and fixed N, K;
    bf16 operands, float32 accumulation, bf16 output."""
    M = T.dynamic("tokens")

    @T.prim_func
    def linear(A: T.Tensor((M, K), T.bfloat16), W: T.Tensor((N, K), T.bfloat16),
               C: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            a_s = T.alloc_shared((block_M, block_K), T.bfloat16)
            w_s = T.alloc_shared((block_N, block_K), T.bfloat16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(acc)
            for ko in T.Pipelined(K // block_K, num_stages=2):
                T.copy(A[by * block_M, ko * block_K], a_s)
                T.copy(W[bx * block_N, ko * block_K], w_s)
                T.gemm(a_s, w_s, acc, transpose_B=True)
            T.copy(acc, C[by * block_M, bx * block_N])

    return linear


@tilecute.jit(out_idx=[-1])
def gemm_dynamic_k_tail(block_M=64, block_N=64, block_K=32, threads=128):
    """``C = A @ B`` where M, N and K are all dynamic and K is not a multiple of block_K:
    the K loop runs ``ceildiv(K, block_K)`` steps and the tile copies zero-fill past K."""
    M, N, K = T.dynamic("M"), T.dynamic("N"), T.dynamic("K")

    @T.prim_func
    def mm(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16),
           C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            a_s = T.alloc_shared((block_M, block_K), T.float16)
            b_s = T.alloc_shared((block_K, block_N), T.float16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, ko * block_K], a_s)
                T.copy(B[ko * block_K, bx * block_N], b_s)
                T.gemm(a_s, b_s, acc)
            T.copy(acc, C[by * block_M, bx * block_N])

    return mm


@tilecute.jit(out_idx=[2])
def bmm_dynamic_batch_rows(N=64, K=64, block_M=64, threads=128):
    """A batched ``C[b] = A[b] @ B[b]`` with a dynamic batch and a dynamic row count; N, K
    fixed.  The batch is the grid's y dim."""
    Bt, M = T.symbolic("batch"), T.symbolic("rows")

    @T.prim_func
    def bmm(A: T.Tensor((Bt, M, K), T.float16), B: T.Tensor((Bt, K, N), T.float16),
            C: T.Tensor((Bt, M, N), T.float16)):
        with T.Kernel(T.ceildiv(M, block_M), Bt, threads=threads) as (bx, b):
            a_s = T.alloc_shared((block_M, K), T.float16)
            b_s = T.alloc_shared((K, N), T.float16)
            acc = T.alloc_fragment((block_M, N), T.float32)
            T.copy(A[b, bx * block_M:(bx + 1) * block_M, :], a_s)
            T.copy(B[b, :, :], b_s)
            T.gemm(a_s, b_s, acc, clear_accum=True)
            T.copy(acc, C[b, bx * block_M:(bx + 1) * block_M, :])

    return bmm


# ---- several outputs, negative out_idx, symbol-dependent output shapes -------------------
@tilecute.jit(out_idx=[-3, -2, -1])
def layernorm_stats_three_outputs(N=256, eps=1e-5, threads=128):
    """LayerNorm over a fixed hidden size of a dynamic number of rows, returning the
    normalized rows (float16), each row's mean and its rstd (float32): three outputs
    given by negative ``out_idx``."""
    M = T.dynamic("M")

    @T.prim_func
    def ln(X: T.Tensor((M, N), T.float16), Y: T.Tensor((M, N), T.float16),
           Mean: T.Tensor((M,), T.float32), Rstd: T.Tensor((M,), T.float32)):
        with T.Kernel(M, threads=threads) as r:
            xf = T.alloc_fragment((N,), T.float32)
            sq = T.alloc_fragment((N,), T.float32)
            s1 = T.alloc_fragment((1,), T.float32)
            s2 = T.alloc_fragment((1,), T.float32)
            for j in T.Parallel(N):
                xf[j] = T.cast(X[r, j], T.float32)
            T.reduce_sum(xf, s1, dim=0)
            for j in T.Parallel(N):
                sq[j] = (xf[j] - s1[0] / N) * (xf[j] - s1[0] / N)
            T.reduce_sum(sq, s2, dim=0)
            mu = s1[0] / N
            rs = T.rsqrt(s2[0] / N + eps)
            for j in T.Parallel(N):
                Y[r, j] = T.cast((xf[j] - mu) * rs, T.float16)
            Mean[r] = mu
            Rstd[r] = rs

    return ln


@tilecute.jit(out_idx=[1, 2])
def argmax_rows_int64_out(block_N=128, threads=128):
    """Per-row max and its index over a dynamic (M, N) float32 tensor, the index an int64
    output (torch's ``argmax`` dtype); N is walked in ragged chunks."""
    M, N = T.dynamic("M"), T.dynamic("N")

    @T.prim_func
    def argmax(X: T.Tensor((M, N), T.float32), Vmax: T.Tensor((M,), T.float32),
               Imax: T.Tensor((M,), T.int64)):
        with T.Kernel(M, threads=1) as r:
            best = T.alloc_var(T.float32)
            at = T.alloc_var(T.int64)
            best = -T.infinity(T.float32)
            at = T.int64(0)
            for c in T.serial(N):
                if X[r, c] > best:
                    best = X[r, c]
                    at = T.cast(c, T.int64)
            Vmax[r] = best
            Imax[r] = at

    return argmax


@tilecute.jit(out_idx=[-1])
def pad_rows_output_plus_one(threads=128):
    """An output one row taller than its input: ``Out: (M + 1, N)`` holds X's rows shifted
    down by one under a row of ``fill`` (a ``T.float32`` argument); out_idx allocates it
    from the symbols."""
    M, N = T.dynamic("M"), T.dynamic("N")

    @T.prim_func
    def shift(X: T.Tensor((M, N), T.float32), fill: T.float32, Out: T.Tensor((M + 1, N), T.float32)):
        with T.Kernel(M + 1, threads=threads) as r:
            for k in T.serial(T.ceildiv(N, threads)):
                for t in T.Parallel(threads):
                    c = k * threads + t
                    if c < N:
                        Out[r, c] = T.if_then_else(r == 0, fill, X[r - 1, c])

    return shift


@tilecute.jit(out_idx=[1])
def pairs_to_interleaved(threads=128):
    """Two rows of a (2, N) tensor interleaved into an ``(N * 2,)`` output: the output
    dim is an expression of the input's symbol."""
    N = T.dynamic("N")

    @T.prim_func
    def interleave(X: T.Tensor((2, N), T.int32), Y: T.Tensor((N * 2,), T.int32)):
        with T.Kernel(T.ceildiv(N, threads), threads=threads) as bx:
            for t in T.Parallel(threads):
                i = bx * threads + t
                if i < N:
                    Y[2 * i] = X[0, i]
                    Y[2 * i + 1] = X[1, i]

    return interleave


# ---- scalar arguments of several types --------------------------------------------------------
@tilecute.jit
def int64_offset_scalar_flag(threads=128):
    """``Y[i] = X[i + offset] * (2 if doubled else 1)`` with ``offset`` a ``T.int64``
    argument and ``doubled`` a ``T.bool``; ``Y`` has n elements, X has L >= n + offset.
    Y is the caller's (n is bound by Y alone, so no input could size it as an output)."""
    L, n = T.dynamic("L"), T.dynamic("n")

    @T.prim_func
    def offs(X: T.Tensor((L,), T.float32), offset: T.int64, doubled: T.bool,
             Y: T.Tensor((n,), T.float32)):
        with T.Kernel(T.ceildiv(n, threads), threads=threads) as bx:
            for t in T.Parallel(threads):
                i = bx * threads + t
                if i < n and T.cast(i, T.int64) + offset < T.cast(L, T.int64):
                    Y[i] = X[T.cast(i, T.int64) + offset] * T.if_then_else(doubled, 2.0, 1.0)

    return offs


@tilecute.jit
def scalar_stride_flat_view(threads=64):
    """A flat buffer read as rows of a run-time pitch: ``row_pitch`` (a ``T.int32``
    argument) times the row plus the column; only the first ``cols`` (another argument)
    columns of each of the ``R`` rows of the caller's output are taken."""
    L, R, C = T.dynamic("L"), T.dynamic("R"), T.dynamic("C")

    @T.prim_func
    def pitch(X: T.Tensor((L,), T.float16), row_pitch: T.int32, Y: T.Tensor((R, C), T.float16)):
        with T.Kernel(R, threads=threads) as r:
            for k in T.serial(T.ceildiv(C, threads)):
                for t in T.Parallel(threads):
                    c = k * threads + t
                    if c < C and r * row_pitch + c < L:
                        Y[r, c] = X[r * row_pitch + c]

    return pitch


@tilecute.jit(out_idx=[-1])
def blocks_from_scalar_grid(block=64, threads=64):
    """The grid comes from a ``T.int32`` argument (``num_blocks``), not from a tensor:
    each block writes its id and ``base`` (a ``T.float32``) into its block-sized slice of
    a (L,) output while the slice lies inside L."""
    L = T.dynamic("L")

    @T.prim_func
    def stamp(num_blocks: T.int32, base: T.float32, X: T.Tensor((L,), T.float32),
              Y: T.Tensor((L,), T.float32)):
        with T.Kernel(num_blocks, threads=threads) as bx:
            for t in T.Parallel(block):
                i = bx * block + t
                if i < L:
                    Y[i] = X[i] + base + T.cast(bx, T.float32)

    return stamp


# ---- more strided and expression-shaped parameters ------------------------------------------
@tilecute.jit(out_idx=[-1])
def gemm_strided_a_panel(N=128, K=64, block_M=64, block_N=128, block_K=32, threads=128):
    """``C = A @ B`` where A is a ``T.StridedTensor((M, K), (lda, 1))`` panel of a wider
    matrix (the caller passes ``big[:, off:off + K]``); its row stride is read at the call
    and its tiles go through TMA, whose global strides must be multiples of 16 bytes."""
    M, lda = T.dynamic("M"), T.dynamic("lda")

    @T.prim_func
    def panel(A: T.StridedTensor((M, K), (lda, 1), T.float16), B: T.Tensor((K, N), T.float16),
              C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            a_s = T.alloc_shared((block_M, block_K), T.float16)
            b_s = T.alloc_shared((block_K, block_N), T.float16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(acc)
            for ko in T.Pipelined(K // block_K, num_stages=2):
                T.copy(A[by * block_M, ko * block_K], a_s)
                T.copy(B[ko * block_K, bx * block_N], b_s)
                T.gemm(a_s, b_s, acc)
            T.copy(acc, C[by * block_M, bx * block_N])

    return panel


@tilecute.jit(out_idx=[-1])
def dense_copy_keeps_pitch(threads=128):
    """A strided (M, N) view copied into a dense (M, ld) output that keeps the input's row
    pitch (the pad columns zeroed): the output's second dim is the *stride* symbol ``ld``
    of the input, as TileLang allocates an output from an input's stride."""
    M, N, ld = T.dynamic("M"), T.dynamic("N"), T.dynamic("ld")

    @T.prim_func
    def keep_pitch(X: T.StridedTensor((M, N), (ld, 1), T.float32), Y: T.Tensor((M, ld), T.float32)):
        with T.Kernel(M, threads=threads) as r:
            for k in T.serial(T.ceildiv(ld, threads)):
                for t in T.Parallel(threads):
                    c = k * threads + t
                    if c < ld:
                        Y[r, c] = T.if_then_else(c < N, X[r, c], 0.0)

    return keep_pitch


@tilecute.jit(out_idx=[-1])
def groups_of_four_input(threads=128):
    """An input declared ``(L // 4, 4)`` after a flat ``(L,)`` input: L binds from the
    flat one, the grouped one's first dim is checked as ``L // 4`` (TileLang binds in
    parameter order and cannot solve L from ``L // 4``, so the flat one comes first); the output (L // 4,)
    holds each group's max minus the flat input's first element of the group."""
    L = T.dynamic("L")

    @T.prim_func
    def grouped(F: T.Tensor((L,), T.float32), G: T.Tensor((L // 4, 4), T.float32),
                Y: T.Tensor((L // 4,), T.float32)):
        with T.Kernel(T.ceildiv(L // 4, threads), threads=threads) as bx:
            for t in T.Parallel(threads):
                g = bx * threads + t
                if g < L // 4:
                    Y[g] = T.max(T.max(G[g, 0], G[g, 1]), T.max(G[g, 2], G[g, 3])) - F[g * 4]

    return grouped


@tilecute.jit(out_idx=[-1])
def seq_mean_tuple_symbols(H=64, block_S=32, threads=128):
    """A (batch, seq, H) float16 tensor averaged over seq into (batch, H) float32; the
    dynamic dims come from one ``T.dynamic("batch, seq")`` call returning both."""
    Bt, S = T.dynamic("batch, seq")

    @T.prim_func
    def seq_mean(X: T.Tensor((Bt, S, H), T.float16), Y: T.Tensor((Bt, H), T.float32)):
        with T.Kernel(Bt, threads=threads) as b:
            tile = T.alloc_fragment((block_S, H), T.float32)
            acc = T.alloc_fragment((H,), T.float32)
            part = T.alloc_fragment((H,), T.float32)
            T.clear(acc)
            for k in T.serial(T.ceildiv(S, block_S)):
                for i, j in T.Parallel(block_S, H):
                    tile[i, j] = T.if_then_else(k * block_S + i < S,
                                                T.cast(X[b, k * block_S + i, j], T.float32), 0.0)
                T.reduce_sum(tile, part, dim=0)
                for j in T.Parallel(H):
                    acc[j] += part[j]
            for j in T.Parallel(H):
                Y[b, j] = acc[j] / T.cast(T.max(S, 1), T.float32)

    return seq_mean


@tilecute.jit(out_idx=[1, 2])
def isfinite_bool_out(threads=128):
    """A bool output and an int32 output from a bfloat16 input: ``ok[i] = isfinite(x)``
    and ``cls[i]`` = 0 finite, 1 inf, 2 NaN."""
    N = T.dynamic("N")

    @T.prim_func
    def finite(X: T.Tensor((N,), T.bfloat16), ok: T.Tensor((N,), T.bool), cls: T.Tensor((N,), T.int32)):
        with T.Kernel(T.ceildiv(N, threads), threads=threads) as bx:
            for t in T.Parallel(threads):
                i = bx * threads + t
                if i < N:
                    v = T.cast(X[i], T.float32)
                    ok[i] = T.isfinite(v)
                    cls[i] = T.if_then_else(T.isnan(v), 2, T.if_then_else(T.isinf(v), 1, 0))

    return finite


@tilecute.jit(out_idx=[-1])
def add_broadcast_bias_view(block_M=8, threads=128, static_zero=False):
    """``Y = X + Bias`` where Bias is declared ``T.StridedTensor((M, N), (rs, 1))``: the
    caller passes ``bias.expand(M, N)`` (a row stride ``rs`` of 0) and the kernel reads its
    one row for every row.  ``static_zero`` declares the stride a literal 0 (TileLang's
    broadcast declaration), which tilecute refuses by name."""
    M, N, rs = T.dynamic("M"), T.dynamic("N"), T.dynamic("rs")
    row_stride = 0 if static_zero else rs

    @T.prim_func
    def add_bias(X: T.Tensor((M, N), T.float32), Bias: T.StridedTensor((M, N), (row_stride, 1), T.float32),
                 Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            for k in T.serial(T.ceildiv(N, threads)):
                for i, t in T.Parallel(block_M, threads):
                    r = bx * block_M + i
                    c = k * threads + t
                    if r < M and c < N:
                        Y[r, c] = X[r, c] + Bias[r, c]

    return add_bias


@tilecute.jit(out_idx=[-1])
def kv_prefix_dot_shared_stride(H=64, threads=64):
    """``out[b, s] = sum_h K[b, s, h] * V[b, s, h]`` over the first S positions of two
    caches of Smax positions: K and V are ``T.StridedTensor((B, S, H), (sb, H, 1))``
    sharing the batch stride symbol ``sb`` (the caller passes ``k_cache[:, :S]`` and
    ``v_cache[:, :S]``), so V's batch stride is checked against K's."""
    Bt, S, sb = T.dynamic("B"), T.dynamic("S"), T.dynamic("sb")

    @T.prim_func
    def kv_dot(K: T.StridedTensor((Bt, S, H), (sb, H, 1), T.float16),
               V: T.StridedTensor((Bt, S, H), (sb, H, 1), T.float16),
               out: T.Tensor((Bt, S), T.float32)):
        with T.Kernel(S, Bt, threads=threads) as (s, b):
            prod = T.alloc_fragment((H,), T.float32)
            tot = T.alloc_fragment((1,), T.float32)
            for h in T.Parallel(H):
                prod[h] = T.cast(K[b, s, h], T.float32) * T.cast(V[b, s, h], T.float32)
            T.reduce_sum(prod, tot, dim=0)
            out[b, s] = tot[0]

    return kv_dot


@tilecute.jit(out_idx=[-1])
def square_symmetrize(block=32, threads=128):
    """``Y = (X + X^T) / 2`` of a square matrix declared ``(N, N)``: one symbol names both
    dims of one tensor, so a (4, 5) tensor is refused at its second dim.  The transpose goes
    through a shared tile (the tile of the mirrored block)."""
    N = T.dynamic("N")

    @T.prim_func
    def symmetrize(X: T.Tensor((N, N), T.float32), Y: T.Tensor((N, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(N, block), threads=threads) as (bx, by):
            mine = T.alloc_shared((block, block), T.float32)
            mirror = T.alloc_shared((block, block), T.float32)
            T.copy(X[by * block, bx * block], mine)
            T.copy(X[bx * block, by * block], mirror)
            for i, j in T.Parallel(block, block):
                r = by * block + i
                c = bx * block + j
                if r < N and c < N:
                    Y[r, c] = (mine[i, j] + mirror[j, i]) * 0.5

    return symmetrize


@tilecute.jit(out_idx=[-1])
def narrow_scalar_params(threads=128):
    """Scalar arguments of narrow types: ``h`` a ``T.float16``, ``g`` a ``T.bfloat16`` (the
    launcher rounds the Python float to their bits), ``shift`` a ``T.uint8`` and ``bias`` a
    ``T.int8`` (range-checked): ``Y[i] = (X[i] * h + g) * 2**shift + bias`` in float32."""
    N = T.dynamic("N")

    @T.prim_func
    def narrow(X: T.Tensor((N,), T.float32), h: T.float16, g: T.bfloat16, shift: T.uint8,
               bias: T.int8, Y: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, threads), threads=threads) as bx:
            for t in T.Parallel(threads):
                i = bx * threads + t
                if i < N:
                    Y[i] = (X[i] * T.cast(h, T.float32) + T.cast(g, T.float32)) * \
                        T.cast(T.shift_left(1, T.cast(shift, T.int32)), T.float32) + T.cast(bias, T.float32)

    return narrow


@tilecute.jit(out_idx=[-1])
def gemm_k_tiles_scalar(M=128, N=128, K=256, block_M=64, block_N=64, block_K=32, threads=128):
    """``C = A[:, :k_tiles * block_K] @ B[:k_tiles * block_K, :]``: the pipelined K loop
    runs ``k_tiles`` steps, a ``T.int32`` argument that may be 0 (C = 0), 1 (fewer steps
    than stages) or up to K / block_K; the static shapes keep the TMA loads."""

    @T.prim_func
    def partial_k(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), k_tiles: T.int32,
                  C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            a_s = T.alloc_shared((block_M, block_K), T.float16)
            b_s = T.alloc_shared((block_K, block_N), T.float16)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(acc)
            for ko in T.Pipelined(T.min(k_tiles, K // block_K), num_stages=3):
                T.copy(A[by * block_M, ko * block_K], a_s)
                T.copy(B[ko * block_K, bx * block_N], b_s)
                T.gemm(a_s, b_s, acc)
            T.copy(acc, C[by * block_M, bx * block_N])

    return partial_k


@tilecute.jit(out_idx=[-1])
def swiglu_fused_halves(block_N=128, threads=128):
    """SwiGLU over a fused (M, 2N) projection passed as its two halves: ``G`` and ``U`` are
    ``T.StridedTensor((M, N), (N * 2, 1))``, the caller's ``h[:, :N]`` and ``h[:, N:]`` (a
    row stride that is an expression of the shape's symbol, checked against it)."""
    M, N = T.dynamic("M"), T.dynamic("N")

    @T.prim_func
    def swiglu(G: T.StridedTensor((M, N), (N * 2, 1), T.bfloat16),
               U: T.StridedTensor((M, N), (N * 2, 1), T.bfloat16),
               Out: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(T.ceildiv(N, block_N), M, threads=threads) as (bx, r):
            for j in T.Parallel(block_N):
                c = bx * block_N + j
                if c < N:
                    g = T.cast(G[r, c], T.float32)
                    Out[r, c] = T.cast(g / (1.0 + T.exp(-g)) * T.cast(U[r, c], T.float32), T.bfloat16)

    return swiglu
