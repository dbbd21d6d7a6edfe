"""Tile programs over the memory hierarchy: fragments, shared memory, T.copy, reductions
and atomics.

Each factory returns a ``PrimFunc``.  The row-wise kernels (softmax, layernorm, rmsnorm)
hold one row per block in a fragment of ``block_n`` fp32 values spread over the block's
threads; rows may be shorter than ``block_n`` (the copy reads 0 past the end, and the
kernels mask those columns).  ``align`` is a divisor of the row length the launcher checks;
at 8 (16 bytes of fp16) every row starts 16-byte aligned and is read with 128-bit loads,
at 1 any length works with scalar loads.  The test-suite compiles every one to sm_90a and sm_80 cubins
and checks them against torch on a GPU.
"""

import tilecute.language as T

NEG_INF = float("-inf")


def row_config(n: int, per_thread: int = 32) -> dict:
    """``block_n`` and ``threads`` for rows of ``n`` elements: the row rounded up to a
    power of two (at least 1024), about ``per_thread`` fp32 values per thread (128 to 1024
    threads).  At 1024 threads ptxas caps a thread at 64 registers."""
    block_n = max(1024, 1 << (n - 1).bit_length())
    threads = min(1024, max(128, block_n // per_thread))
    return {"block_n": block_n, "threads": threads}


def softmax(block_n=4096, dtype="float16", threads=256, align=8):
    """Y = softmax(X, dim=-1) for rows of up to ``block_n`` elements."""
    M, N = T.symbolic("M"), T.symbolic("N", multiple_of=align)

    @T.prim_func
    def softmax(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(M, threads=threads) as row:
            x = T.alloc_fragment((block_n,), "float32")
            row_max = T.alloc_fragment((1,), "float32")
            row_sum = T.alloc_fragment((1,), "float32")
            T.copy(X[row, 0], x)
            for j in T.Parallel(block_n):
                x[j] = T.if_then_else(j < N, x[j], T.float32(NEG_INF))
            T.reduce_max(x, row_max, dim=0)
            for j in T.Parallel(block_n):
                x[j] = T.exp(x[j] - row_max[0])
            T.reduce_sum(x, row_sum, dim=0)
            for j in T.Parallel(block_n):
                x[j] = x[j] * (1.0 / row_sum[0])
            T.copy(x, Y[row, 0])

    return softmax


def layernorm(block_n=4096, dtype="float16", threads=256, align=8, eps=1e-5):
    """Y = layer_norm(X, (N,), W, B, eps): fp32 statistics, ``dtype`` in and out."""
    M, N = T.symbolic("M"), T.symbolic("N", multiple_of=align)

    @T.prim_func
    def layernorm(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype),
                  Y: T.Tensor((M, N), dtype)):
        with T.Kernel(M, threads=threads) as row:
            x = T.alloc_fragment((block_n,), "float32")
            sq = T.alloc_fragment((block_n,), "float32")
            total = T.alloc_fragment((1,), "float32")
            var = T.alloc_fragment((1,), "float32")
            T.copy(X[row, 0], x)
            T.reduce_sum(x, total, dim=0)
            for j in T.Parallel(block_n):
                x[j] = T.if_then_else(j < N, x[j] - total[0] / T.Cast("float32", N), 0.0)
                sq[j] = x[j] * x[j]
            T.reduce_sum(sq, var, dim=0)
            for j in T.Parallel(block_n):
                Y[row, j] = x[j] * T.rsqrt(var[0] / T.Cast("float32", N) + eps) * W[j] + B[j]

    return layernorm


def rmsnorm(block_n=4096, dtype="float16", threads=256, align=8, eps=1e-6):
    """Y = rms_norm(X, (N,), W, eps)."""
    M, N = T.symbolic("M"), T.symbolic("N", multiple_of=align)

    @T.prim_func
    def rmsnorm(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(M, threads=threads) as row:
            x = T.alloc_fragment((block_n,), "float32")
            sq = T.alloc_fragment((block_n,), "float32")
            ms = T.alloc_fragment((1,), "float32")
            T.copy(X[row, 0], x)
            for j in T.Parallel(block_n):
                sq[j] = x[j] * x[j]
            T.reduce_sum(sq, ms, dim=0)
            for j in T.Parallel(block_n):
                Y[row, j] = x[j] * T.rsqrt(ms[0] / T.Cast("float32", N) + eps) * W[j]

    return rmsnorm


def row_sum(block_m=4, block_n=1024, dtype="float16", threads=128, align=8):
    """S[i] = sum(X[i, :]) in fp32, ``block_m`` rows per block, columns in tiles."""
    M, N = T.symbolic("M"), T.symbolic("N", multiple_of=align)

    @T.prim_func
    def row_sum(X: T.Tensor((M, N), dtype), S: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_m), threads=threads) as by:
            x = T.alloc_fragment((block_m, block_n), "float32")
            acc = T.alloc_fragment((block_m,), "float32")
            T.clear(acc)
            for t in T.serial(T.ceildiv(N, block_n)):
                T.copy(X[by * block_m, t * block_n], x)
                T.reduce_sum(x, acc, dim=1, clear=False)
            T.copy(acc, S[by * block_m])

    return row_sum


def transpose(M=4096, N=4096, block=64, dtype="float32", threads=256):
    """B = A.T through a (block, block) shared tile; the layout pass swizzles the tile so
    the column reads hit distinct banks."""

    @T.prim_func
    def transpose(A: T.Tensor((M, N), dtype), B: T.Tensor((N, M), dtype)):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=threads) as (bx, by):
            tile = T.alloc_shared((block, block), dtype)
            T.copy(A[by * block, bx * block], tile)
            for i, j in T.Parallel(block, block):
                B[bx * block + i, by * block + j] = tile[j, i]

    return transpose


def histogram(bins=256, block=4096, threads=256):
    """H[v] += count of v in X (values in [0, bins)): shared-memory atomics per block, then
    one global atomic per bin and block."""
    N = T.symbolic("N")

    @T.prim_func
    def histogram(X: T.Tensor((N,), "int32"), H: T.Tensor((bins,), "int32")):
        with T.Kernel(T.ceildiv(N, block), threads=threads) as bx:
            counts = T.alloc_shared((bins,), "int32")
            T.clear(counts)
            for i in T.Parallel(block):
                if bx * block + i < N:
                    T.atomic_add(counts[X[bx * block + i]], 1)
            T.atomic_add(H[0:bins], counts)

    return histogram


def tile_copy(M=256, N=256, block_m=64, block_n=128, dtype="float16", threads=128):
    """B = A through shared memory (cp.async on sm_80+) and then a fragment."""

    @T.prim_func
    def tile_copy(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_n), T.ceildiv(M, block_m), threads=threads) as (bx, by):
            s = T.alloc_shared((block_m, block_n), dtype)
            f = T.alloc_fragment((block_m, block_n), dtype)
            T.copy(A[by * block_m, bx * block_n], s)
            T.copy(s, f)
            T.copy(f, B[by * block_m, bx * block_n])

    return tile_copy


ALL = {
    "softmax": softmax, "layernorm": layernorm, "rmsnorm": rmsnorm, "row_sum": row_sum,
    "transpose": transpose, "histogram": histogram, "tile_copy": tile_copy,
}
