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


@tilecute.jit
def conv1d(data, weight, bias, S: int = 1, threads: int = 64):
    """out[n, o, f] = bias[o, f] + sum over k, c of data[n, o * S + k, c] * weight[k, c, f]:
    constants aliased (``KW = K``) and dims derived from them (``OL``) before the
    declarations; ``bias``'s first dim is a derived one."""
    N, L, C, F, K = T.const("N, L, C, F, K")
    KW = K
    OL = (L - K) // S + 1
    data: T.Tensor((N, L, C), T.float32)
    weight: T.Tensor((KW, C, F), T.float32)
    bias: T.Tensor((OL, F), T.float32)
    out = T.empty((N, OL, F), T.float32)
    with T.Kernel(OL, N, threads=threads) as (o, n):
        acc = T.alloc_fragment((F,), T.float32)
        for f in T.Parallel(F):
            acc[f] = bias[o, f]
        for k in T.serial(KW):
            for c in T.serial(C):
                for f in T.Parallel(F):
                    acc[f] += data[n, o * S + k, c] * weight[k, c, f]
        for f in T.Parallel(F):
            out[n, o, f] = acc[f]
    return out


@tilecute.jit
def scale_rows(A, D, trans: bool = False, block: int = 16):
    """B = diag(D) A (A stored transposed when ``trans``): the shape comes from a variable,
    a list, and a parenthesized single dim, as TileLang programs write them."""
    M, K = T.const("M K")
    A_shape = (K, M) if trans else (M, K)
    A: T.Tensor(A_shape, T.float32)
    D: T.Tensor((M), T.float32)
    B = T.empty([M, K], dtype=T.float32)
    with T.Kernel(T.ceildiv(M, block), threads=128) as bx:
        for i, j in T.Parallel(block, K):
            if trans:
                B[bx * block + i, j] = A[j, bx * block + i] * D[bx * block + i]
            else:
                B[bx * block + i, j] = A[bx * block + i, j] * D[bx * block + i]
    return B


@tilecute.jit
def axpy_(X, Y, alpha, n_valid, block: int = 256):
    """Y[:n_valid] += alpha * X[:n_valid], in place (no T.empty: the call returns None);
    ``alpha`` and ``n_valid`` are runtime scalars and the grid comes from ``n_valid``."""
    N = T.const("N")
    X: T.Tensor((N,), T.float32)
    Y: T.Tensor((N,), T.float32)
    alpha: T.float32
    n_valid: T.int32
    with T.Kernel(T.ceildiv(n_valid, block), threads=block) as bx:
        for i in T.Parallel(block):
            if bx * block + i < n_valid:
                Y[bx * block + i] = Y[bx * block + i] + alpha * X[bx * block + i]
