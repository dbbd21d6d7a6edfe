"""Elementwise kernels written with tilecute's T.* frontend (TileLang's surface).

Each factory returns a ``PrimFunc``; ``tilecute.compile(f)`` builds it.  The test-suite
compiles every one of them to sm_90a and sm_80 cubins, and runs them on a GPU.
"""

import tilecute.language as T


def vector_add(dtype="float16", block=1024, threads=128):
    N = T.symbolic("N")

    @T.prim_func
    def vector_add(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype), C: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, block), threads=threads) as bx:
            for i in T.Parallel(block):
                C[bx * block + i] = A[bx * block + i] + B[bx * block + i]

    return vector_add


def add_2d(N=1024, dtype="float32", block_M=32, block_N=128, threads=256):
    """C = A + B over an (M, N) matrix, M symbolic."""
    M = T.symbolic("M")

    @T.prim_func
    def add_2d(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            for i, j in T.Parallel(block_M, block_N):
                C[by * block_M + i, bx * block_N + j] = (
                    A[by * block_M + i, bx * block_N + j] + B[by * block_M + i, bx * block_N + j]
                )

    return add_2d


def scaled_add(dtype="bfloat16", block=512):
    """out = alpha * x + beta * y (+ offset), with float scalars and a symbolic length."""
    N = T.symbolic("N")

    @T.prim_func
    def scaled_add(x: T.Tensor((N,), dtype), y: T.Tensor((N,), dtype), out: T.Tensor((N,), dtype),
                   alpha: T.float32, beta: T.float32, offset: T.int32):
        with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
            for i in T.Parallel(block):
                out[bx * block + i] = alpha * x[bx * block + i] + beta * y[bx * block + i] + offset

    return scaled_add


def two_kernels(dtype="float32", block=256):
    """Two kernels launched in order: tmp = x * 2, then out = tmp + x."""
    N = T.symbolic("N")

    @T.prim_func
    def two_kernels(x: T.Tensor((N,), dtype), tmp: T.Tensor((N,), dtype), out: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
            for i in T.Parallel(block):
                tmp[bx * block + i] = x[bx * block + i] * 2.0
        with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
            for i in T.Parallel(block):
                out[bx * block + i] = tmp[bx * block + i] + x[bx * block + i]

    return two_kernels


def clamp_rows(K=64, dtype="float32", threads=128):
    """Per row: a serial loop sums the row, then if/else picks what to write.
    out[r] = sum(x[r, :]) if that sum > 0 else -1 (threads own rows)."""
    M = T.symbolic("M")

    @T.prim_func
    def clamp_rows(x: T.Tensor((M, K), dtype), out: T.Tensor((M,), dtype)):
        with T.Kernel(T.ceildiv(M, threads), threads=threads) as bx:
            acc = T.alloc_local((1,), "float32")
            row = bx * threads + T.get_thread_binding(0)
            if row < M:
                acc[0] = 0.0
                for k in T.serial(K):
                    acc[0] += x[row, k]
                if acc[0] > 0:
                    out[row] = acc[0]
                else:
                    out[row] = -1.0

    return clamp_rows


def math_ops(dtype="float32", block=256):
    """Every math intrinsic once: out = f(x) computed in fp32 for 16-bit inputs."""
    N = T.symbolic("N")

    @T.prim_func
    def math_ops(x: T.Tensor((N,), dtype), y: T.Tensor((N,), dtype), out: T.Tensor((8, N), dtype)):
        with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
            for i in T.Parallel(block):
                v = T.Cast("float32", x[bx * block + i])
                w = T.Cast("float32", y[bx * block + i])
                out[0, bx * block + i] = T.exp(v) + T.exp2(w)
                out[1, bx * block + i] = T.log(T.abs(v) + 1.0) + T.log2(T.abs(w) + 1.0)
                out[2, bx * block + i] = T.sqrt(T.abs(v)) + T.rsqrt(T.abs(w) + 1.0)
                out[3, bx * block + i] = T.tanh(v) + T.sin(w) + T.cos(v)
                out[4, bx * block + i] = T.max(v, w) - T.min(v, w)
                out[5, bx * block + i] = T.fma(v, w, 1.0)
                out[6, bx * block + i] = T.floor(v) + T.ceil(w)
                out[7, bx * block + i] = T.if_then_else(v > w, v, w)

    return math_ops


ALL = {
    "vector_add": vector_add,
    "add_2d": add_2d,
    "scaled_add": scaled_add,
    "two_kernels": two_kernels,
    "clamp_rows": clamp_rows,
    "math_ops": math_ops,
}


def strided_scale(N=256, dtype="float16", block_M=4, threads=128):
    """y = 2 * x over (M, N) views whose row stride is symbolic (non-contiguous inputs)."""
    M, sx, sy = T.symbolic("M"), T.symbolic("sx"), T.symbolic("sy")

    @T.prim_func
    def strided_scale(x: T.StridedTensor((M, N), (sx, 1), dtype),
                      y: T.StridedTensor((M, N), (sy, 1), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            for i, j in T.Parallel(block_M, N):
                y[bx * block_M + i, j] = x[bx * block_M + i, j] * 2.0

    return strided_scale


ALL["strided_scale"] = strided_scale


def many_args(dtype="float16", block=1024):
    """10 tensors and 4 scalars (the launch-overhead benchmark's wide case):
    y = (x0 + ... + x8) * scale + bias, with two int scalars shifting the result."""
    N = T.symbolic("N")

    @T.prim_func
    def many_args(x0: T.Tensor((N,), dtype), x1: T.Tensor((N,), dtype), x2: T.Tensor((N,), dtype),
                  x3: T.Tensor((N,), dtype), x4: T.Tensor((N,), dtype), x5: T.Tensor((N,), dtype),
                  x6: T.Tensor((N,), dtype), x7: T.Tensor((N,), dtype), x8: T.Tensor((N,), dtype),
                  y: T.Tensor((N,), dtype), scale: T.float32, bias: T.float32, k0: T.int32,
                  k1: T.int32):
        with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
            for i in T.Parallel(block):
                s = (x0[bx * block + i] + x1[bx * block + i] + x2[bx * block + i]
                     + x3[bx * block + i] + x4[bx * block + i] + x5[bx * block + i]
                     + x6[bx * block + i] + x7[bx * block + i] + x8[bx * block + i])
                y[bx * block + i] = s * scale + bias + (k0 - k1)

    return many_args


ALL["many_args"] = many_args
