"""Split-K GEMM whose partial tiles go out as one tile-wide atomic add,
``T.atomic_add(C[...], C_local)`` (TileLang's vectorized-atomic split-K example), with
a pipelined K loop per split."""

import tilecute.language as T

OUTPUTS = (2,)
ATOL, RTOL = 1e-2, 1e-2
SM80 = True
MISSING = None


def program(M=256, N=256, K=1024, block_M=64, block_N=128, block_K=64, split_k=4,
            dtype="float16", accum_dtype="float"):
    splitK = K // split_k

    @T.prim_func
    def gemm_splitk_tile_atomic(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
                                C: T.Tensor((M, N), accum_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), split_k, threads=128) as (bx, by, bz):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(splitK, block_K), num_stages=2):
                T.copy(A[by * block_M, bz * splitK + ko * block_K], A_shared)
                T.copy(B[bz * splitK + ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.atomic_add(C[by * block_M, bx * block_N], C_local)

    return gemm_splitk_tile_atomic


def make_args(device):
    import torch

    a = torch.randn(256, 1024, device=device, dtype=torch.float16)
    b = torch.randn(1024, 256, device=device, dtype=torch.float16)
    return [a, b, torch.zeros(256, 256, device=device)]


def reference(a, b, c):
    return (a.float() @ b.float(),)
