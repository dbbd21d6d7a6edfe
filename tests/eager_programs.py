"""Eager-style TileLang programs (tests/test_host_api.py): the body declares its T.const
shapes, tensor types and T.empty outputs; the kernel takes tensors and returns outputs."""

import tilecute
import tilecute.language as T


@tilecute.jit
def add(A, B, block_M: int = 32, block_N: int = 32, threads: int = 128):
    """C = A + B, TileLang's eager style."""
    M, N = T.const("M, N")
    A: T.Tensor((M, N), T.float32)
    B: T.Tensor[[M, N], T.float32]
    C = T.empty((M, N), T.float32)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
        for i, j in T.Parallel(block_M, block_N):
            C[by * block_M + i, bx * block_N + j] = A[by * block_M + i, bx * block_N + j] + B[by * block_M + i, bx * block_N + j]
    return C


@tilecute.jit(pass_configs={tilecute.PassConfigKey.TL_DISABLE_TMA_LOWER: True})
def row_sum(A, BLOCK_N: int = 16, BLOCK_M: int = 128):
    N, M = T.const("N, M")
    dtype = T.float32
    assert M % BLOCK_M == 0
    A: T.Tensor((N, M), dtype)
    B = T.empty((N,), dtype)
    S = T.empty((N,), dtype)
    with T.Kernel(N // BLOCK_N, threads=128) as pid:
        acc = T.alloc_fragment((BLOCK_N,), dtype)
        tile = T.alloc_fragment((BLOCK_N, BLOCK_M), dtype)
        T.clear(acc)
        for k in T.serial(M // BLOCK_M):
            T.copy(A[pid * BLOCK_N, k * BLOCK_M], tile)
            T.reduce_sum(tile, acc, dim=1, clear=False)
        T.copy(acc, B[pid * BLOCK_N])
        T.copy(acc, S[pid * BLOCK_N])
    return S, B
